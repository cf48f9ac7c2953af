// SPDX-License-Identifier: Apache-2.0
/*
 * bench_run.c -- the measurement loops of `wsel bench`.
 *
 * Method (docs/bench.md): one table per (plugin, rows), built once; each
 * run does a warm-up, then times every select on its own with the
 * monotonic clock, subtracting the clock's median cost; direct and host
 * runs (and direct score runs, for a plugin with a score function)
 * alternate so all see the same machine state; the reported p50 and p99
 * are the medians over runs of each run's quantiles.
 */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"

/* The plugin loaded twice: an instance called directly (created through
 * a plugin context, so a pipeline's children open), and a host. */
typedef struct bsubject {
    wsel_library *lib;
    const wsel_plugin *plugin;
    wsel_plugin_context *pctx;
    void *instance;
    int has_instance;
    wsel_host *host;
    double *scores; /* num_rows doubles for score, allocated before timing */
} bsubject;

static void bsubject_close(bsubject *s)
{
    if (s->has_instance)
        s->plugin->destroy(s->instance);
    wsel_plugin_context_close(s->pctx);
    if (s->lib)
        wsel_library_close(s->lib);
    wsel_host_destroy(s->host);
    free(s->scores);
    memset(s, 0, sizeof(*s));
}

/* Open `path` with `config` (NULL = defaults) for tables of `rows` rows. */
static int32_t bsubject_open(bsubject *s, const char *path, const char *config,
                             uint32_t rows, char *err, size_t err_size)
{
    memset(s, 0, sizeof(*s));
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.seed = 42;
    opts.max_consecutive_failures = WSEL_HOST_NEVER_EJECT;
    int32_t rc = wsel_host_create(&opts, &s->host);
    if (rc < 0) {
        snprintf(err, err_size, "wsel_host_create: %s", wsel_strerror(rc));
        return rc;
    }
    rc = wsel_library_open(path, NULL, &s->lib, err, err_size);
    if (rc < 0)
        goto out_close;
    s->plugin = wsel_library_plugin(s->lib);
    s->scores = malloc(((size_t)rows + 1) * sizeof(double));
    double *params = calloc(s->plugin->num_params + 1u, sizeof(double));
    if (params == NULL || s->scores == NULL) {
        free(params);
        rc = WSEL_ENOMEM;
        goto out_close;
    }
    rc = wsel_plugin_context_open(s->host, s->lib, config, params, &s->pctx, err,
                                  err_size);
    if (rc == 0) {
        rc = s->plugin->create(wsel_plugin_context_api(s->pctx), params,
                               s->plugin->num_params, &s->instance);
        if (rc < 0)
            snprintf(err, err_size, "%s: create() with %s returned %s", path,
                     config ? config : "defaults", wsel_errname(rc));
    }
    free(params);
    if (rc < 0)
        goto out_close;
    s->has_instance = 1;
    rc = wsel_host_switch(s->host, path, config, err, err_size);
    if (rc < 0)
        goto out_close;
    return 0;

out_close:
    bsubject_close(s);
    return rc;
}

/* Report the table's topology to both instances, as a router does when
 * its worker set changes: a policy sizes its state there, off the select
 * path. */
static void bsubject_topology(const bsubject *s, const btable *bt)
{
    if (s->plugin->on_topology_changed != NULL)
        s->plugin->on_topology_changed(s->instance, &bt->buf.table);
    wsel_host_topology_changed(s->host, &bt->buf.table);
}

static inline int32_t select_direct(const bsubject *s, const wsel_request *req,
                                    const wsel_table *t, wsel_choice *c)
{
    return s->plugin->select(s->instance, req, t, c);
}

/* What a timed loop calls. */
#define VIA_DIRECT 0
#define VIA_HOST   1
#define VIA_SCORE  2

#define MAX_BATCH 256

/*
 * Time `batches` batches of `batch` consecutive selects; ns[b] (when ns is
 * not NULL) gets batch b's mean nanoseconds per select, clock cost
 * subtracted. Requests are prepared before each batch's clock starts;
 * request ids advance through *next_id.
 */
static int32_t timed_batches(const bsubject *s, int via, const btable *bt,
                             uint32_t batches, uint32_t batch, double overhead,
                             uint64_t *next_id, double *ns)
{
    const wsel_table *t = &bt->buf.table;
    wsel_request reqs[MAX_BATCH];
    wsel_rng rngs[MAX_BATCH];
    wsel_choice c;
    for (uint32_t b = 0; b < batches; b++) {
        for (uint32_t k = 0; k < batch; k++)
            btable_request(bt, via == VIA_HOST ? s->host : NULL, (*next_id)++, &reqs[k],
                           &rngs[k]);
        int32_t worst = 0;
        uint64_t t0 = bench_now_ns();
        for (uint32_t k = 0; k < batch; k++) {
            int32_t rc;
            if (via == VIA_SCORE) {
                rc = s->plugin->score(s->instance, &reqs[k], t, s->scores);
            } else {
                memset(&c, 0, sizeof(c));
                c.struct_size = sizeof(c);
                rc = via == VIA_HOST ? wsel_host_select(s->host, &reqs[k], t, &c)
                                     : select_direct(s, &reqs[k], t, &c);
            }
            worst = rc < worst ? rc : worst;
        }
        uint64_t t1 = bench_now_ns();
        if (worst < 0)
            return worst;
        if (ns != NULL)
            ns[b] = ((double)(t1 - t0) - overhead) / batch;
    }
    return 0;
}

/* Selects per batch so that a batch lasts about 2 us: the clock's cost
 * (~20 ns) and resolution then stay below 1 % of a sample. */
static uint32_t choose_batch(const bsubject *s, int via, const btable *bt,
                             uint64_t *next_id)
{
    double mean = 0;
    if (timed_batches(s, via, bt, 1, 64, 0, next_id, &mean) < 0 || mean <= 0)
        return 1;
    double b = 2000.0 / mean;
    return b < 1 ? 1 : b > MAX_BATCH ? MAX_BATCH : (uint32_t)b;
}

int32_t bench_plugin(const char *path, uint32_t rows, const bench_config *cfg,
                     bench_result *out, char *err, size_t err_size)
{
    bsubject s;
    btable bt;
    int32_t rc = bsubject_open(&s, path, cfg->config, rows, err, err_size);
    if (rc < 0)
        return rc;
    rc = btable_init(&bt, rows, 0xbe7c4ull + rows, err, err_size);
    if (rc < 0)
        goto out_close_subject;
    bsubject_topology(&s, &bt);

    bt.request.temperature = cfg->temperature;
    int has_score = s.plugin->score != NULL;
    int vias = has_score ? 3 : 2; /* VIA_DIRECT, VIA_HOST[, VIA_SCORE] */
    uint64_t next_id = 1, allocs[3] = {0, 0, 0};
    uint32_t batch[3], n[3], runs = cfg->runs, most = 0;
    for (int via = 0; via < vias; via++) {
        /* The host's batch is the direct one: their ratio compares like
         * with like. Score gets its own (it may cost another amount). */
        batch[via] =
            via == VIA_HOST ? batch[VIA_DIRECT] : choose_batch(&s, via, &bt, &next_id);
        n[via] = (cfg->selects_per_run + batch[via] - 1) / batch[via];
        most = n[via] > most ? n[via] : most;
    }
    double *ns = malloc((size_t)most * sizeof(double));
    double *q = malloc((size_t)runs * 6 * sizeof(double));
    if (ns == NULL || q == NULL) {
        rc = WSEL_ENOMEM;
        goto out_free_samples;
    }
    double overhead = bench_timer_overhead_ns();
    for (uint32_t r = 0; r < runs; r++) {
        for (int via = 0; via < vias; via++) {
            rc = timed_batches(&s, via, &bt, cfg->warmup, 1, 0, &next_id, NULL);
            bench_alloc_begin();
            if (rc == 0)
                rc = timed_batches(&s, via, &bt, n[via], batch[via], overhead, &next_id,
                                   ns);
            allocs[via] += bench_alloc_end();
            if (rc < 0) {
                snprintf(err, err_size, "%s: %s on %u rows returned %s", path,
                         via == VIA_SCORE ? "score" : "select", rows, wsel_errname(rc));
                goto out_free_samples;
            }
            q[(2 * via + 0) * runs + r] = bench_quantile(ns, n[via], 0.50);
            q[(2 * via + 1) * runs + r] = bench_quantile(ns, n[via], 0.99);
        }
    }
    wsel_host_counters counters;
    wsel_host_get_counters(s.host, &counters);
    bench_result res = {
        .rows = rows,
        .direct_ns_p50 = bench_median(q + 0 * runs, runs),
        .direct_ns_p99 = bench_median(q + 1 * runs, runs),
        .host_ns_p50 = bench_median(q + 2 * runs, runs),
        .host_ns_p99 = bench_median(q + 3 * runs, runs),
        .allocs_per_select = (double)(allocs[VIA_DIRECT] + allocs[VIA_HOST]) /
                             (2.0 * (double)runs * n[VIA_DIRECT] * batch[VIA_DIRECT]),
        .batch = batch[VIA_DIRECT],
        .fallbacks = counters.fallbacks,
        .has_score = has_score,
    };
    if (has_score) {
        res.score_ns_p50 = bench_median(q + 4 * runs, runs);
        res.score_ns_p99 = bench_median(q + 5 * runs, runs);
        res.allocs_per_score =
            (double)allocs[VIA_SCORE] / ((double)runs * n[VIA_SCORE] * batch[VIA_SCORE]);
    }
    *out = res;
    rc = 0;

out_free_samples:
    free(q);
    free(ns);
    btable_free(&bt);
out_close_subject:
    bsubject_close(&s);
    return rc;
}

int32_t bench_table_build(uint32_t rows, const bench_config *cfg, double *out_ns_per_row,
                          char *err, size_t err_size)
{
    enum { builds_per_sample = 64, samples = 101 };
    btable bt;
    int32_t rc = btable_init(&bt, rows, 7, err, err_size);
    if (rc < 0)
        return rc;
    double *per_run = malloc(cfg->runs * sizeof(double));
    double *ns = malloc(samples * sizeof(double));
    if (per_run == NULL || ns == NULL) {
        rc = WSEL_ENOMEM;
        goto out_free;
    }
    for (uint32_t r = 0; r < cfg->runs; r++) {
        for (uint32_t k = 0; k < samples + 10; k++) {
            uint64_t t0 = bench_now_ns();
            for (uint32_t b = 0; b < builds_per_sample && rc == 0; b++)
                rc = wsel_table_build(&bt.buf, &bt.request, bt.ranks, rows, 1, err,
                                      err_size);
            uint64_t t1 = bench_now_ns();
            if (rc < 0)
                goto out_free;
            if (k >= 10) /* the first ten batches warm the caches */
                ns[k - 10] = (double)(t1 - t0) / builds_per_sample / rows;
        }
        per_run[r] = bench_median(ns, samples);
    }
    *out_ns_per_row = bench_median(per_run, cfg->runs);

out_free:
    free(ns);
    free(per_run);
    btable_free(&bt);
    return rc;
}

int32_t bench_count_allocs(const char *path, const char *config, uint32_t rows,
                           uint32_t selects, uint64_t *out_direct, uint64_t *out_host,
                           uint64_t *out_score, char *err, size_t err_size)
{
    bsubject s;
    btable bt;
    int32_t rc = bsubject_open(&s, path, config, rows, err, err_size);
    if (rc < 0)
        return rc;
    rc = btable_init(&bt, rows, 0xa110cull + rows, err, err_size);
    if (rc < 0)
        goto out_close_subject;
    bsubject_topology(&s, &bt);
    uint64_t id = 1, counts[3] = {0, 0, 0};
    int vias = s.plugin->score != NULL ? 3 : 2, via = 0;
    for (; via < vias && rc == 0; via++) {
        /* 16 uncounted calls first: lazy one-off setup is allowed. */
        rc = timed_batches(&s, via, &bt, 16, 1, 0, &id, NULL);
        bench_alloc_begin();
        if (rc == 0)
            rc = timed_batches(&s, via, &bt, selects, 1, 0, &id, NULL);
        counts[via] = bench_alloc_end();
    }
    if (rc < 0) {
        snprintf(err, err_size, "%s: %s on %u rows returned %s", path,
                 via - 1 == VIA_SCORE ? "score" : "select", rows, wsel_errname(rc));
    } else {
        *out_direct = counts[VIA_DIRECT];
        *out_host = counts[VIA_HOST];
        *out_score = counts[VIA_SCORE];
    }
    btable_free(&bt);
out_close_subject:
    bsubject_close(&s);
    return rc;
}

int32_t bench_scale_check(const char *path, const char *config, uint32_t rows,
                          uint32_t selects, uint64_t *out_fallbacks, char *err,
                          size_t err_size)
{
    bsubject s;
    btable bt;
    int32_t rc = bsubject_open(&s, path, config, rows, err, err_size);
    if (rc < 0)
        return rc;
    rc = btable_init(&bt, rows, 0x5ca1eull + rows, err, err_size);
    if (rc < 0)
        goto out_close_subject;
    bsubject_topology(&s, &bt);
    uint64_t id = 1;
    int vias = s.plugin->score != NULL ? 3 : 2, via = 0;
    for (; via < vias && rc == 0; via++)
        rc = timed_batches(&s, via, &bt, selects, 1, 0, &id, NULL);
    if (rc < 0) {
        snprintf(err, err_size, "%s: %s on %u rows returned %s", path,
                 via - 1 == VIA_SCORE ? "score" : "select", rows, wsel_errname(rc));
    } else {
        wsel_host_counters counters;
        wsel_host_get_counters(s.host, &counters);
        *out_fallbacks = counters.fallbacks;
    }
    btable_free(&bt);
out_close_subject:
    bsubject_close(&s);
    return rc;
}

/* The loops callgrind measures (--toggle-collect=bench_callgrind_*_loop):
 * requests are prepared beforehand, so only select is inside. */
__attribute__((noinline)) void bench_callgrind_direct_loop(const bsubject *s,
                                                           const wsel_request *reqs,
                                                           const wsel_table *t,
                                                           uint32_t n);
__attribute__((noinline)) void bench_callgrind_direct_loop(const bsubject *s,
                                                           const wsel_request *reqs,
                                                           const wsel_table *t,
                                                           uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        wsel_choice c = {.struct_size = sizeof(c)};
        select_direct(s, &reqs[k], t, &c);
    }
}

__attribute__((noinline)) void bench_callgrind_host_loop(const bsubject *s,
                                                         const wsel_request *reqs,
                                                         const wsel_table *t, uint32_t n);
__attribute__((noinline)) void bench_callgrind_host_loop(const bsubject *s,
                                                         const wsel_request *reqs,
                                                         const wsel_table *t, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        wsel_choice c = {.struct_size = sizeof(c)};
        wsel_host_select(s->host, &reqs[k], t, &c);
    }
}

__attribute__((noinline)) void bench_callgrind_score_loop(const bsubject *s,
                                                          const wsel_request *reqs,
                                                          const wsel_table *t,
                                                          uint32_t n);
__attribute__((noinline)) void bench_callgrind_score_loop(const bsubject *s,
                                                          const wsel_request *reqs,
                                                          const wsel_table *t, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        s->plugin->score(s->instance, &reqs[k], t, s->scores);
}

int32_t bench_callgrind(const char *path, const char *config, uint32_t rows,
                        uint32_t selects, int via, double temperature, char *err,
                        size_t err_size)
{
    bsubject s;
    btable bt;
    int32_t rc = bsubject_open(&s, path, config, rows, err, err_size);
    if (rc < 0)
        return rc;
    rc = btable_init(&bt, rows, 0xca11ull + rows, err, err_size);
    if (rc < 0)
        goto out_close_subject;
    bsubject_topology(&s, &bt);
    bt.request.temperature = temperature;
    if (via == VIA_SCORE && s.plugin->score == NULL) {
        snprintf(err, err_size, "%s has no score function", path);
        rc = WSEL_EINVAL;
        goto out_free_table;
    }
    wsel_request *reqs = calloc(selects, sizeof(*reqs));
    wsel_rng *rngs = calloc(selects, sizeof(*rngs));
    if (reqs == NULL || rngs == NULL) {
        rc = WSEL_ENOMEM;
        goto out_free_requests;
    }
    for (uint32_t k = 0; k < selects; k++)
        btable_request(&bt, via == VIA_HOST ? s.host : NULL, k + 1, &reqs[k], &rngs[k]);
    if (via == VIA_HOST)
        bench_callgrind_host_loop(&s, reqs, &bt.buf.table, selects);
    else if (via == VIA_SCORE)
        bench_callgrind_score_loop(&s, reqs, &bt.buf.table, selects);
    else
        bench_callgrind_direct_loop(&s, reqs, &bt.buf.table, selects);
out_free_requests:
    free(rngs);
    free(reqs);
out_free_table:
    btable_free(&bt);
out_close_subject:
    bsubject_close(&s);
    return rc;
}

__attribute__((noinline)) void bench_callgrind_build_loop(btable *bt, uint32_t builds);
__attribute__((noinline)) void bench_callgrind_build_loop(btable *bt, uint32_t builds)
{
    for (uint32_t b = 0; b < builds; b++)
        wsel_table_build(&bt->buf, &bt->request, bt->ranks, bt->rows, 1, NULL, 0);
}

int32_t bench_callgrind_build(uint32_t rows, uint32_t builds, char *err, size_t err_size)
{
    btable bt;
    int32_t rc = btable_init(&bt, rows, 7, err, err_size);
    if (rc < 0)
        return rc;
    bench_callgrind_build_loop(&bt, builds);
    btable_free(&bt);
    return 0;
}
