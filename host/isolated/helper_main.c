// SPDX-License-Identifier: Apache-2.0
/*
 * helper_main.c -- wsel-isolated-helper, the helper process of isolated mode
 * (docs/isolated.md). Started by libwsel-host, never by hand:
 *
 *   wsel-isolated-helper --plugin PATH [--config JSON] [--as-mb N] [--cpu-s N]
 *                [--allow DIR]...
 *
 * with the shared slot (host/isolated_shm.h) on descriptor 3. It closes
 * every other descriptor above 2, applies its resource limits, loads the
 * plugin with the host's own trust checks (wsel_library_open), parses the
 * configuration, creates one instance, reports ready, and then runs the
 * calls the host posts until the host asks it to exit or goes away.
 *
 * A crash here is the point: the host notices it and answers without us.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "isolated_shm.h"
#include "wsel_host.h"

/* Spin this long for the next call before sleeping on the futex. */
#define SPIN_NS 50000u
/* Futex sleep between checks that the host is still there. */
#define PARENT_CHECK_NS 100000000
#define MAX_ALLOW       64

typedef struct helper_args {
    const char *plugin;
    const char *config;
    uint32_t as_mb;
    uint32_t cpu_s;
    const char *allow[MAX_ALLOW + 1];
} helper_args;

/* Start-up failure: tell the host why (it is waiting on `state`). */
static int report_failure(wsel_iso_slot *s, int32_t rc, const char *msg)
{
    if (s == NULL) {
        fprintf(stderr, "wsel-isolated-helper: %s\n", msg);
        return 2;
    }
    snprintf(s->start_err, sizeof(s->start_err), "%s", msg);
    s->start_rc = rc;
    atomic_store(&s->state, WSEL_ISO_FAILED);
    wsel__iso_futex_wake(&s->state);
    return 1;
}

static int parse_u32(const char *text, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, helper_args *a, char *err, size_t err_size)
{
    memset(a, 0, sizeof(*a));
    size_t allows = 0;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        if (i + 1 >= argc) {
            snprintf(err, err_size, "wsel-isolated-helper: %s needs a value", opt);
            return -1;
        }
        const char *val = argv[++i];
        if (strcmp(opt, "--plugin") == 0) {
            a->plugin = val;
        } else if (strcmp(opt, "--config") == 0) {
            a->config = val;
        } else if (strcmp(opt, "--as-mb") == 0 || strcmp(opt, "--cpu-s") == 0) {
            uint32_t *dst = opt[2] == 'a' ? &a->as_mb : &a->cpu_s;
            if (parse_u32(val, dst) < 0) {
                snprintf(err, err_size, "wsel-isolated-helper: %s '%s': not a number",
                         opt, val);
                return -1;
            }
        } else if (strcmp(opt, "--allow") == 0 && allows < MAX_ALLOW) {
            a->allow[allows++] = val;
        } else {
            snprintf(err, err_size, "wsel-isolated-helper: unknown option '%s'", opt);
            return -1;
        }
    }
    if (a->plugin == NULL) {
        snprintf(err, err_size, "wsel-isolated-helper: --plugin is required");
        return -1;
    }
    return 0;
}

/* Every descriptor above the slot goes: the helper keeps stdin, stdout
 * (both /dev/null, set by the host), stderr and the slot. */
static void close_others(void)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, WSEL_ISO_SHM_FD + 1, ~0u, 0) == 0)
        return;
#endif
    for (int fd = WSEL_ISO_SHM_FD + 1; fd < 1024; fd++)
        close(fd);
}

static wsel_iso_slot *map_slot(void)
{
    struct stat st;
    if (fstat(WSEL_ISO_SHM_FD, &st) != 0 || (size_t)st.st_size < sizeof(wsel_iso_slot))
        return NULL;
    void *p = mmap(NULL, sizeof(wsel_iso_slot), PROT_READ | PROT_WRITE, MAP_SHARED,
                   WSEL_ISO_SHM_FD, 0);
    if (p == MAP_FAILED)
        return NULL;
    wsel_iso_slot *s = p;
    return s->magic == WSEL_ISO_MAGIC ? s : NULL;
}

/* No core files (a crash loop would litter the router's folder and slow
 * every death); RLIMIT_CPU unless UINT32_MAX; RLIMIT_AS unless UINT32_MAX
 * or a sanitizer build (its shadow memory needs terabytes of address
 * space). Returns 1 when RLIMIT_AS was applied. */
static int apply_limits(const helper_args *a)
{
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    if (a->cpu_s != 0 && a->cpu_s != UINT32_MAX) {
        struct rlimit cpu = {a->cpu_s, (rlim_t)a->cpu_s + 1};
        setrlimit(RLIMIT_CPU, &cpu);
    }
#ifndef WSEL_HELPER_NO_AS_LIMIT
    if (a->as_mb != 0 && a->as_mb != UINT32_MAX) {
        rlim_t bytes = (rlim_t)a->as_mb * 1024u * 1024u;
        struct rlimit as = {bytes, bytes};
        if (setrlimit(RLIMIT_AS, &as) == 0)
            return 1;
    }
#endif
    return 0;
}

static void helper_log(const wsel_host_api *api, int32_t level, const char *msg)
{
    if (msg == NULL || level > WSEL_LOG_WARN)
        return;
    const char *name = api->host_ctx != NULL ? api->host_ctx : "plugin";
    fprintf(stderr, "wsel-isolated-helper: %s: %s\n", name, msg);
}

static void copy_text(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src != NULL ? src : "");
}

/* Wait for a call after `last`; exits if the host has gone away. */
static uint32_t wait_call(wsel_iso_slot *s, uint32_t last, pid_t parent)
{
    uint64_t spin_end = wsel__iso_now_ns() + SPIN_NS;
    for (uint32_t step = 0;; step++) {
        uint32_t seq = atomic_load_explicit(&s->req_seq, memory_order_acquire);
        if (seq != last)
            return seq;
        if (wsel__iso_now_ns() < spin_end) {
            wsel__iso_spin_step(step);
            continue;
        }
        atomic_store(&s->helper_sleeping, 1);
        if (atomic_load(&s->req_seq) == last)
            wsel__iso_futex_wait(&s->req_seq, last, PARENT_CHECK_NS);
        atomic_store(&s->helper_sleeping, 0);
        if (getppid() != parent)
            _exit(0);
    }
}

static void slot_table(const wsel_iso_slot *s, wsel_table *t)
{
    memset(t, 0, sizeof(*t));
    t->struct_size = sizeof(*t);
    t->num_rows = s->num_rows;
    t->num_groups = s->num_groups;
    t->topology_epoch = s->topology_epoch;
    t->worker_id = s->worker_ids;
    t->dp_rank = s->dp_ranks;
    t->overlap_blocks = s->overlap_blocks;
    t->prefill_tokens = s->prefill_tokens;
    t->decode_blocks = s->decode_blocks;
    t->cost = s->cost;
    t->kv_capacity_blocks = s->kv_capacity_blocks;
    t->active_requests = s->active_requests;
    t->flags = s->flags;
    t->group_first_row = s->group_first_row;
    t->group_row_count = s->group_row_count;
}

static void run_select(const wsel_plugin *p, void *instance, wsel_iso_slot *s)
{
    wsel_rng rng = s->rng;
    wsel_request req;
    memset(&req, 0, sizeof(req));
    req.struct_size = sizeof(req);
    req.request_id = s->request_id;
    req.affinity_key = s->affinity_key;
    req.timestamp_us = s->timestamp_us;
    req.isl_tokens = s->isl_tokens;
    req.block_size = s->block_size;
    req.num_block_hashes =
        s->num_block_hashes <= WSEL_ISO_MAX_HASHES ? s->num_block_hashes : 0;
    req.block_hashes = req.num_block_hashes != 0 ? s->block_hashes : NULL;
    req.overlap_score_weight = s->overlap_score_weight;
    req.temperature = s->temperature;
    req.uniform = s->uniform;
    req.overrides = s->overrides;
    req.rng = &rng;
    wsel_table table;
    slot_table(s, &table);
    wsel_choice choice;
    memset(&choice, 0, sizeof(choice));
    choice.struct_size = sizeof(choice);
    int32_t rc = WSEL_ETABLE;
    if (s->num_rows >= 1 && s->num_rows <= WSEL_ISO_MAX_ROWS)
        rc = p->select(instance, &req, &table, &choice);
    s->rc = rc;
    s->row = choice.row;
    s->reason = choice.reason;
    s->choice_flags = choice.flags;
    s->score = choice.score;
    s->rng = rng;
}

static void serve(const wsel_plugin *p, void *instance, wsel_iso_slot *s, pid_t parent)
{
    /* Not req_seq: the host may already have posted a call since READY. */
    uint32_t last = atomic_load(&s->ack_seq);
    for (;;) {
        uint32_t seq = wait_call(s, last, parent);
        uint32_t op = s->op;
        if (op == WSEL_ISO_OP_SELECT) {
            run_select(p, instance, s);
        } else if (op == WSEL_ISO_OP_FINISHED && p->on_request_finished != NULL) {
            p->on_request_finished(instance, s->request_id, s->worker_id, s->dp_rank);
        } else if (op == WSEL_ISO_OP_OUTCOME) {
            wsel_outcome o = s->outcome; /* the host's copy, full size */
            o.struct_size = sizeof(o);
            if (p->on_request_outcome != NULL)
                p->on_request_outcome(instance, &o);
        } else if (op == WSEL_ISO_OP_TOPOLOGY && p->on_topology_changed != NULL &&
                   s->num_rows <= WSEL_ISO_MAX_ROWS) {
            wsel_table table;
            slot_table(s, &table);
            p->on_topology_changed(instance, &table);
        } else if (op == WSEL_ISO_OP_EXIT) {
            p->destroy(instance);
        }
        last = seq;
        atomic_store(&s->ack_seq, seq);
        if (atomic_load(&s->host_waiting))
            wsel__iso_futex_wake(&s->ack_seq);
        if (op == WSEL_ISO_OP_EXIT)
            _exit(0);
    }
}

int main(int argc, char **argv)
{
    close_others();
    pid_t parent = getppid();
    wsel_iso_slot *s = map_slot();
    char err[512] = "";
    helper_args a;
    if (parse_args(argc, argv, &a, err, sizeof(err)) < 0)
        return report_failure(s, WSEL_EINVAL, err);
    if (s == NULL)
        return report_failure(NULL, WSEL_EINVAL, "no shared slot on descriptor 3");
    s->as_limited = (uint32_t)apply_limits(&a);

    wsel_trust_options trust = {sizeof(trust), 0, a.allow[0] != NULL ? a.allow : NULL};
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(a.plugin, &trust, &lib, err, sizeof(err));
    if (rc < 0)
        return report_failure(s, rc, err);
    const wsel_plugin *p = wsel_library_plugin(lib);
    double *values = calloc(p->num_params + 1u, sizeof(double));
    if (values == NULL)
        return report_failure(s, WSEL_ENOMEM, "wsel-isolated-helper: out of memory");
    rc = wsel_config_parse(lib, a.config, values, err, sizeof(err));
    if (rc < 0)
        return report_failure(s, rc, err);

    wsel_host_api api;
    wsel_host_api_init(&api, (void *)p->name, helper_log);
    void *instance = NULL;
    rc = p->create(&api, values, p->num_params, &instance);
    free(values);
    if (rc != 0) {
        snprintf(err, sizeof(err), "%s: plugin %s create failed: %s (%d)", a.plugin,
                 p->name, wsel_strerror(rc), (int)rc);
        return report_failure(s, rc < 0 ? rc : WSEL_EPLUGIN, err);
    }

    copy_text(s->name, sizeof(s->name), p->name);
    copy_text(s->version, sizeof(s->version), p->version);
    copy_text(s->description, sizeof(s->description), p->description);
    s->capabilities = p->capabilities;
    s->has_finished = p->on_request_finished != NULL;
    s->has_outcome = p->on_request_outcome != NULL;
    s->has_topology = p->on_topology_changed != NULL;
    atomic_store(&s->state, WSEL_ISO_READY);
    wsel__iso_futex_wake(&s->state);
    serve(p, instance, s, parent);
    return 0;
}
