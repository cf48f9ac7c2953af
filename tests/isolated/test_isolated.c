// SPDX-License-Identifier: Apache-2.0
/*
 * test_isolated.c -- isolated mode: a plugin that crashes, hangs or runs
 * away inside its wsel-isolated-helper helper costs no request.
 *
 * For each fixture (iso_fixture.c): every select is answered, the counters
 * name the reason, and the helper comes back (plugin answers resume). A
 * well-behaved plugin gives the same answers in and out of isolation.
 * Deadlines are generous wherever correctness, not timing, is tested, so
 * the suite holds on a loaded two-core machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "iso_util.h"

/* Deadline when the fixture is not meant to be late: 2 s. */
#define GENEROUS_US 2000000u
/* Deadline for the fixtures that hang or sleep 300 ms: 50 ms. */
#define SHORT_US 50000u
/* Restart backoff in the tests: 1 ms (doubling while failures repeat). */
#define BACKOFF_US 1000u
/* How long a fixture's helper may take to fail and come back twice. */
#define RECOVERY_LIMIT_NS (20ull * 1000000000ull)

typedef struct fixture_run {
    wsel_host *host;
    char *dir;
    char *path;
} fixture_run;

static void start(fixture_run *r, const char *name, const char *config,
                  uint32_t deadline_us, uint32_t as_limit_mb)
{
    iso_quiet_sanitizer();
    r->dir = iso_temp_dir();
    assert_non_null(r->dir);
    r->path = iso_install(r->dir, name);
    assert_non_null(r->path);
    wsel_host_options opts;
    iso_options(&opts, deadline_us, BACKOFF_US);
    opts.helper_as_limit_mb = as_limit_mb;
    assert_int_equal(wsel_host_create(&opts, &r->host), 0);
    char err[512];
    int32_t rc = wsel_host_switch(r->host, r->path, config, err, sizeof(err));
    if (rc != 0)
        fail_msg("switch to %s: %s", r->path, err);
}

/* Destroy the host and check it left no child behind, zombie or not. */
static void finish(fixture_run *r)
{
    wsel_host_destroy(r->host);
    int status;
    assert_int_equal(waitpid(-1, &status, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    free(r->path);
    iso_remove_dir(r->dir);
}

/* Select on `t` and return who answered, with the row in *row (NULL: not
 * wanted); the answer must exist whatever happened. */
static int32_t select_row(wsel_host *host, iso_table *t, uint64_t id, uint32_t *row)
{
    t->request.request_id = id;
    wsel_host_prepare_request(host, &t->request, &t->rng);
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    int32_t rc = wsel_host_select(host, &t->request, &t->buf.table, &c);
    assert_true(rc == WSEL_ANSWER_PLUGIN || rc == WSEL_ANSWER_FALLBACK);
    assert_true(c.row < t->buf.table.num_rows);
    if (row != NULL)
        *row = c.row;
    return rc;
}

static int32_t select_once(wsel_host *host, iso_table *t, uint64_t id)
{
    return select_row(host, t, id, NULL);
}

/*
 * Select until the fixture has failed twice and the helper has answered
 * again after the last failure (or the time limit, which fails the test).
 * Returns the counters.
 */
static void run_until_recovered(fixture_run *r, uint32_t reason, wsel_host_counters *c)
{
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    uint64_t limit = iso_now_ns() + RECOVERY_LIMIT_NS;
    uint64_t answers_after_failure = 0, id = 0;
    for (;;) {
        int32_t rc = select_once(r->host, &t, ++id);
        wsel_host_get_counters(r->host, c);
        if (rc == WSEL_ANSWER_FALLBACK) {
            answers_after_failure = 0;
            struct timespec ts = {0, 1000000}; /* let the restart happen */
            nanosleep(&ts, NULL);
        } else if (c->fallback_by_reason[reason] > 0) {
            answers_after_failure++;
        }
        if (c->fallback_by_reason[reason] >= 2 && answers_after_failure >= 1)
            break;
        if (iso_now_ns() > limit)
            fail_msg("no recovery: %llu selects, %llu plugin answers, %llu fallbacks "
                     "(crashed %llu, timeout %llu)",
                     (unsigned long long)c->selects,
                     (unsigned long long)c->plugin_answers,
                     (unsigned long long)c->fallbacks,
                     (unsigned long long)c->fallback_by_reason[WSEL_FALLBACK_CRASHED],
                     (unsigned long long)c->fallback_by_reason[WSEL_FALLBACK_TIMEOUT]);
    }
    assert_int_equal(c->selects, id);
    assert_int_equal(c->ejections, 0);
    /* Only the named reason: no error, no ejection, no other kind. */
    assert_int_equal(c->fallbacks, c->fallback_by_reason[reason]);
    iso_table_free(&t);
}

static void check_recovers(const char *name, const char *config, uint32_t deadline_us,
                           uint32_t as_limit_mb, uint32_t reason)
{
    fixture_run r;
    start(&r, name, config, deadline_us, as_limit_mb);
    wsel_host_counters c;
    run_until_recovered(&r, reason, &c);
    assert_string_equal(wsel_host_policy_name(r.host), name);
    finish(&r);
}

static void test_segfaulting_plugin_is_answered_counted_and_restarted(void **state)
{
    (void)state;
    check_recovers("iso_segv", "{\"n\": 3}", GENEROUS_US, 0, WSEL_FALLBACK_CRASHED);
}

static void test_aborting_plugin_is_answered_counted_and_restarted(void **state)
{
    (void)state;
    check_recovers("iso_abort", "{\"n\": 3}", GENEROUS_US, 0, WSEL_FALLBACK_CRASHED);
}

static void test_exiting_plugin_is_answered_counted_and_restarted(void **state)
{
    (void)state;
    check_recovers("iso_exit", "{\"n\": 3}", GENEROUS_US, 0, WSEL_FALLBACK_CRASHED);
}

/* The spare helper is up long before the 100th select (a select every
 * 5 ms, half a second in all, against a start-up of a few milliseconds),
 * so the crash costs exactly the select it happened in. */
static void test_hot_spare_makes_an_isolated_crash_cost_one_select(void **state)
{
    (void)state;
    fixture_run r;
    start(&r, "iso_segv", "{\"n\": 100}", GENEROUS_US, 0);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    for (uint64_t id = 1; id <= 150; id++) {
        struct timespec pace = {0, 5000000};
        if (id < 100)
            nanosleep(&pace, NULL);
        int32_t rc = select_once(r.host, &t, id);
        assert_int_equal(rc, id == 100 ? WSEL_ANSWER_FALLBACK : WSEL_ANSWER_PLUGIN);
    }
    wsel_host_counters c;
    wsel_host_get_counters(r.host, &c);
    assert_int_equal(c.fallbacks, 1);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_CRASHED], 1);
    iso_table_free(&t);
    finish(&r);
}

static void
test_forged_answer_sequence_is_malformed_and_the_helper_restarted(void **state)
{
    (void)state;
    check_recovers("iso_forge", "{\"n\": 3}", GENEROUS_US, 0, WSEL_FALLBACK_CRASHED);
}

static void test_looping_plugin_misses_its_deadline_and_is_restarted(void **state)
{
    (void)state;
    check_recovers("iso_loop", "{\"n\": 2}", SHORT_US, 0, WSEL_FALLBACK_TIMEOUT);
}

static void test_sleeping_plugin_misses_its_deadline_and_is_restarted(void **state)
{
    (void)state;
    check_recovers("iso_sleep", "{\"n\": 2}", SHORT_US, 0, WSEL_FALLBACK_TIMEOUT);
}

static void test_leaking_plugin_hits_its_memory_limit_and_is_restarted(void **state)
{
    (void)state;
#ifdef WSEL_ISO_SANITIZED
    skip(); /* no RLIMIT_AS under a sanitizer runtime (tools/CMakeLists.txt) */
#else
    /* 32 MiB per select under a 256 MiB limit: the helper dies after ~7. */
    check_recovers("iso_leak", NULL, GENEROUS_US, 256, WSEL_FALLBACK_CRASHED);
#endif
}

static void test_plugin_writing_to_stdout_never_reaches_the_router_output(void **state)
{
    (void)state;
    fflush(stdout);
    char capture[] = "/tmp/wsel-iso-stdout-XXXXXX";
    int cap = mkstemp(capture);
    assert_true(cap >= 0);
    int saved = dup(1);
    assert_true(saved >= 0);
    assert_int_equal(dup2(cap, 1), 1);

    fixture_run r;
    start(&r, "iso_stdout", NULL, GENEROUS_US, 0);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    for (uint64_t id = 1; id <= 50; id++)
        assert_int_equal(select_once(r.host, &t, id), WSEL_ANSWER_PLUGIN);
    iso_table_free(&t);
    finish(&r);

    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char buf[256];
    ssize_t n = pread(cap, buf, sizeof(buf), 0);
    close(cap);
    unlink(capture);
    assert_int_equal(n, 0);
}

/* Same seeds, same tables: the isolated host answers exactly as the
 * in-process one, at temperature 0 (argmin, ties broken by the stream) and
 * 0.5 (softmax_sample on the request's draw). */
static void test_good_plugin_answers_identically_in_and_out_of_isolation(void **state)
{
    (void)state;
    fixture_run r;
    start(&r, "iso_good", NULL, GENEROUS_US, 0);
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.seed = 42;
    wsel_host *local = NULL;
    assert_int_equal(wsel_host_create(&opts, &local), 0);
    char err[512];
    if (wsel_host_switch(local, r.path, NULL, err, sizeof(err)) != 0)
        fail_msg("in-process switch: %s", err);

    const uint32_t shapes[][2] = {{8, 1}, {4, 2}, {64, 8}, {512, 2}};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        iso_table a, b;
        assert_int_equal(iso_table_init(&a, shapes[s][0], shapes[s][1], s), 0);
        assert_int_equal(iso_table_init(&b, shapes[s][0], shapes[s][1], s), 0);
        for (uint64_t id = 1; id <= 100; id++) {
            double temp = id % 2 ? 0.0 : 0.5;
            a.request.temperature = temp;
            b.request.temperature = temp;
            uint32_t row_a, row_b;
            assert_int_equal(select_row(r.host, &a, id, &row_a), WSEL_ANSWER_PLUGIN);
            assert_int_equal(select_row(local, &b, id, &row_b), WSEL_ANSWER_PLUGIN);
            assert_int_equal(row_a, row_b);
            /* The stream comes back as the plugin left it. */
            assert_memory_equal(&a.rng, &b.rng, sizeof(a.rng));
        }
        iso_table_free(&a);
        iso_table_free(&b);
    }
    wsel_host_destroy(local);
    finish(&r);
}

/* A 1.1 request's override bits reach the plugin in its helper; a request
 * labelled 1.0 forwards none, whatever lies past its end. */
static void test_request_overrides_cross_into_the_helper_only_when_labelled(void **state)
{
    (void)state;
    fixture_run r;
    start(&r, "iso_overrides", NULL, GENEROUS_US, 0);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 3), 0);
    wsel_choice c;
    t.request.request_id = 1;
    wsel_host_prepare_request_sized(r.host, &t.request, sizeof(t.request), &t.rng);
    t.request.overrides = WSEL_OVERRIDE_TEMPERATURE;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    assert_int_equal(wsel_host_select(r.host, &t.request, &t.buf.table, &c),
                     WSEL_ANSWER_PLUGIN);
    assert_int_equal(c.row, WSEL_OVERRIDE_TEMPERATURE);
    wsel_host_prepare_request(r.host, &t.request, &t.rng); /* labelled 1.0 */
    t.request.overrides = WSEL_OVERRIDE_TEMPERATURE;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    assert_int_equal(wsel_host_select(r.host, &t.request, &t.buf.table, &c),
                     WSEL_ANSWER_PLUGIN);
    assert_int_equal(c.row, 0);
    iso_table_free(&t);
    finish(&r);
}

static void test_bad_config_is_refused_by_the_helper_naming_the_key(void **state)
{
    (void)state;
    fixture_run r;
    start(&r, "iso_good", NULL, GENEROUS_US, 0);
    char err[512] = "";
    int32_t rc = wsel_host_switch(r.host, r.path, "{\"bogus\": 1}", err, sizeof(err));
    assert_int_equal(rc, WSEL_ECONFIG);
    assert_non_null(strstr(err, "bogus"));
    /* The previous helper keeps serving. */
    assert_string_equal(wsel_host_policy_name(r.host), "iso_good");
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    assert_int_equal(select_once(r.host, &t, 1), WSEL_ANSWER_PLUGIN);
    iso_table_free(&t);
    finish(&r);
}

/* Both hooks travel through the slot to the active helper's instance. */
static void test_hooks_reach_the_plugin_in_its_helper(void **state)
{
    (void)state;
    fixture_run r;
    start(&r, "iso_hooks", NULL, GENEROUS_US, 0);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    t.buf.table.topology_epoch = 2;
    wsel_host_topology_changed(r.host, &t.buf.table);
    for (uint64_t id = 1; id <= 3; id++)
        wsel_host_request_finished(r.host, id, 0, 0);
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    wsel_host_prepare_request(r.host, &t.request, &t.rng);
    assert_int_equal(wsel_host_select(r.host, &t.request, &t.buf.table, &c),
                     WSEL_ANSWER_PLUGIN);
    assert_int_equal(c.row, 5); /* 3 finished + epoch 2 */
    iso_table_free(&t);
    finish(&r);
}

typedef struct thread_arg {
    wsel_host *host;
    uint32_t index;
    uint32_t plugin_answers;
} thread_arg;

static void *select_thread(void *p)
{
    thread_arg *a = p;
    iso_table t;
    if (iso_table_init(&t, 16, 2, a->index) != 0)
        return NULL;
    for (uint64_t i = 0; i < 300; i++) {
        t.request.request_id = (uint64_t)a->index << 32 | i;
        wsel_host_prepare_request(a->host, &t.request, &t.rng);
        wsel_choice c;
        memset(&c, 0, sizeof(c));
        c.struct_size = sizeof(c);
        if (wsel_host_select(a->host, &t.request, &t.buf.table, &c) == WSEL_ANSWER_PLUGIN)
            a->plugin_answers++;
    }
    iso_table_free(&t);
    return NULL;
}

static void test_concurrent_selects_share_one_helper_safely(void **state)
{
    (void)state;
    fixture_run r;
    start(&r, "iso_good", NULL, GENEROUS_US, 0);
    pthread_t threads[4];
    thread_arg args[4];
    for (uint32_t i = 0; i < 4; i++) {
        args[i] = (thread_arg){r.host, i, 0};
        assert_int_equal(pthread_create(&threads[i], NULL, select_thread, &args[i]), 0);
    }
    for (uint32_t i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(args[i].plugin_answers, 300);
    }
    wsel_host_counters c;
    wsel_host_get_counters(r.host, &c);
    assert_int_equal(c.selects, 1200);
    assert_int_equal(c.fallbacks, 0);
    finish(&r);
}

/* A log sink that remembers the pids of helpers reported ready and counts
 * helpers killed or respawned. */
typedef struct helper_log {
    pthread_mutex_t mutex;
    int ready_pids[64];
    int num_ready;
    int killed;  /* "(killed)" or "killed by signal" */
    int respawn; /* "respawning in" */
} helper_log;

static void helper_log_sink(void *user, int32_t level, const char *msg)
{
    (void)level;
    helper_log *l = user;
    pthread_mutex_lock(&l->mutex);
    const char *p = strstr(msg, "isolated helper (pid ");
    if (p != NULL && strstr(msg, ") ready") != NULL && l->num_ready < 64)
        l->ready_pids[l->num_ready++] = atoi(p + strlen("isolated helper (pid "));
    if (strstr(msg, "(killed)") != NULL || strstr(msg, "killed by signal") != NULL)
        l->killed++;
    if (strstr(msg, "respawning in") != NULL)
        l->respawn++;
    pthread_mutex_unlock(&l->mutex);
}

static helper_log read_log(helper_log *l)
{
    pthread_mutex_lock(&l->mutex);
    helper_log copy = *l;
    pthread_mutex_unlock(&l->mutex);
    return copy;
}

static void start_logged(fixture_run *r, helper_log *l, const char *name,
                         uint32_t deadline_us, uint32_t hang_us, uint32_t max_failures)
{
    iso_quiet_sanitizer();
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mutex, NULL);
    r->dir = iso_temp_dir();
    assert_non_null(r->dir);
    r->path = iso_install(r->dir, name);
    assert_non_null(r->path);
    wsel_host_options opts;
    iso_options(&opts, deadline_us, BACKOFF_US);
    opts.hang_timeout_us = hang_us;
    opts.max_consecutive_failures = max_failures;
    opts.log = helper_log_sink;
    opts.log_user = l;
    assert_int_equal(wsel_host_create(&opts, &r->host), 0);
    char err[512];
    if (wsel_host_switch(r->host, r->path, NULL, err, sizeof(err)) != 0)
        fail_msg("switch to %s: %s", r->path, err);
}

static uint64_t reason_count(const wsel_host_counters *c, uint32_t reason)
{
    return reason < WSEL_FALLBACK_REASONS
               ? c->fallback_by_reason[reason]
               : c->fallback_by_reason_more[reason - WSEL_FALLBACK_REASONS];
}

/* More block hashes than the slot carries is the host's limit: answered by
 * the fallback under its own reason, and never an ejection, however often. */
static void test_host_limit_never_counts_against_the_plugin(void **state)
{
    (void)state;
    fixture_run r;
    helper_log l;
    start_logged(&r, &l, "iso_good", GENEROUS_US, 0, 2);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    uint32_t many = 65537;
    uint64_t *hashes = calloc(many, sizeof(uint64_t));
    assert_non_null(hashes);
    t.request.block_hashes = hashes;
    t.request.num_block_hashes = many;
    for (uint64_t id = 1; id <= 10; id++)
        assert_int_equal(select_once(r.host, &t, id), WSEL_ANSWER_FALLBACK);
    t.request.block_hashes = t.hashes;
    t.request.num_block_hashes = 16;
    assert_int_equal(select_once(r.host, &t, 11), WSEL_ANSWER_PLUGIN);
    wsel_host_counters c;
    wsel_host_read_counters(r.host, &c, sizeof(c));
    assert_int_equal(reason_count(&c, WSEL_FALLBACK_HOST_LIMIT), 10);
    assert_int_equal(c.fallbacks, 10);
    assert_int_equal(c.ejections, 0);
    assert_string_equal(wsel_host_policy_name(r.host), "iso_good");
    free(hashes);
    iso_table_free(&t);
    finish(&r);
}

/* Only 0 is success, in a helper too. */
static void test_positive_return_in_a_helper_is_an_error(void **state)
{
    (void)state;
    fixture_run r;
    helper_log l;
    start_logged(&r, &l, "iso_positive", GENEROUS_US, 0, WSEL_HOST_NEVER_EJECT);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    for (uint64_t id = 1; id <= 5; id++)
        assert_int_equal(select_once(r.host, &t, id), WSEL_ANSWER_FALLBACK);
    wsel_host_counters c;
    wsel_host_read_counters(r.host, &c, sizeof(c));
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_ERROR], 5);
    iso_table_free(&t);
    finish(&r);
}

/* A plugin that answers instantly, under a deadline of 1 us that the
 * scheduler decides whether it meets: however many selects miss it, each
 * is answered (by the plugin or as a timeout, nothing else), and no late
 * answer kills the helper. Nothing here depends on how many miss. */
static void test_late_answers_never_kill_a_healthy_helper(void **state)
{
    (void)state;
    fixture_run r;
    helper_log l;
    start_logged(&r, &l, "iso_good", 1, 60000000u, WSEL_HOST_NEVER_EJECT);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    uint64_t plugin = 0, fallback = 0;
    for (uint64_t id = 1; id <= 2000; id++) {
        if (select_once(r.host, &t, id) == WSEL_ANSWER_PLUGIN)
            plugin++;
        else
            fallback++;
    }
    wsel_host_counters c;
    wsel_host_read_counters(r.host, &c, sizeof(c));
    assert_int_equal(c.selects, 2000);
    assert_int_equal(c.plugin_answers, plugin);
    assert_int_equal(c.fallbacks, fallback);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_TIMEOUT], fallback);
    helper_log seen = read_log(&l);
    assert_int_equal(seen.killed, 0);
    assert_int_equal(seen.respawn, 0);
    print_message("      1 us deadline: %llu of 2000 answered by the plugin\n",
                  (unsigned long long)plugin);
    iso_table_free(&t);
    finish(&r);
}

/* A plugin that sleeps 300 ms on every 2nd select, under a 50 ms deadline
 * and a 60 s hang timeout: the late selects fall back, the same helper
 * answers again once it wakes, and no helper is killed. */
static void test_a_late_helper_is_kept_and_answers_again(void **state)
{
    (void)state;
    fixture_run r;
    helper_log l;
    start_logged(&r, &l, "iso_sleep", SHORT_US, 60000000u, WSEL_HOST_NEVER_EJECT);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    uint64_t limit = iso_now_ns() + RECOVERY_LIMIT_NS, id = 0;
    int late_then_answered = 0, was_late = 0;
    while (late_then_answered < 2) {
        int32_t rc = select_once(r.host, &t, ++id);
        if (rc == WSEL_ANSWER_FALLBACK)
            was_late = 1;
        else if (was_late)
            late_then_answered++, was_late = 0;
        if (iso_now_ns() > limit)
            fail_msg("the late helper never answered again (%llu selects)",
                     (unsigned long long)id);
    }
    wsel_host_counters c;
    wsel_host_read_counters(r.host, &c, sizeof(c));
    assert_int_equal(c.fallbacks, c.fallback_by_reason[WSEL_FALLBACK_TIMEOUT]);
    assert_int_equal(c.selects, id);
    helper_log seen = read_log(&l);
    assert_int_equal(seen.killed, 0);
    assert_int_equal(seen.respawn, 0);
    iso_table_free(&t);
    finish(&r);
}

/* A helper stuck in one call longer than the hang timeout is killed and
 * the spare takes over. */
static void test_a_stuck_helper_is_killed_after_the_hang_timeout(void **state)
{
    (void)state;
    fixture_run r;
    helper_log l;
    start_logged(&r, &l, "iso_loop", 1000, 100000, WSEL_HOST_NEVER_EJECT);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    uint64_t limit = iso_now_ns() + RECOVERY_LIMIT_NS, id = 0;
    while (read_log(&l).killed == 0) {
        select_once(r.host, &t, ++id);
        if (iso_now_ns() > limit)
            fail_msg("the stuck helper was never killed (%llu selects)",
                     (unsigned long long)id);
    }
    wsel_host_counters c;
    wsel_host_read_counters(r.host, &c, sizeof(c));
    assert_int_equal(c.fallbacks, c.fallback_by_reason[WSEL_FALLBACK_TIMEOUT]);
    assert_int_equal(c.ejections, 0);
    iso_table_free(&t);
    finish(&r);
}

/* Select (plugin answers expected) until the log has reported `n` ready
 * helpers. */
static uint64_t select_until_ready(fixture_run *r, helper_log *l, iso_table *t,
                                   uint64_t id, int n)
{
    uint64_t limit = iso_now_ns() + RECOVERY_LIMIT_NS;
    while (read_log(l).num_ready < n) {
        assert_int_equal(select_once(r->host, t, ++id), WSEL_ANSWER_PLUGIN);
        if (iso_now_ns() > limit)
            fail_msg("only %d of %d helpers reported ready", read_log(l).num_ready, n);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return id;
}

/* An idle spare killed from outside is noticed, reaped and replaced, so a
 * crash of the active helper afterwards still costs exactly one select. */
static void test_a_killed_spare_is_replaced_before_the_next_crash(void **state)
{
    (void)state;
    fixture_run r;
    helper_log l;
    start_logged(&r, &l, "iso_trigger", GENEROUS_US, 0, WSEL_HOST_NEVER_EJECT);
    iso_table t;
    assert_int_equal(iso_table_init(&t, 4, 2, 7), 0);
    uint64_t id = select_until_ready(&r, &l, &t, 0, 2); /* active + spare */
    int spare = read_log(&l).ready_pids[1];
    assert_true(spare > 0);
    assert_int_equal(kill(spare, SIGKILL), 0);
    id = select_until_ready(&r, &l, &t, id, 3); /* its replacement */
    assert_int_not_equal(read_log(&l).ready_pids[2], spare);

    assert_int_equal(select_once(r.host, &t, 1ull << 40), WSEL_ANSWER_FALLBACK);
    for (uint64_t i = 0; i < 20; i++)
        assert_int_equal(select_once(r.host, &t, ++id), WSEL_ANSWER_PLUGIN);
    wsel_host_counters c;
    wsel_host_read_counters(r.host, &c, sizeof(c));
    assert_int_equal(c.fallbacks, 1);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_CRASHED], 1);
    iso_table_free(&t);
    finish(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_plugin_answers_identically_in_and_out_of_isolation),
        cmocka_unit_test(test_segfaulting_plugin_is_answered_counted_and_restarted),
        cmocka_unit_test(test_aborting_plugin_is_answered_counted_and_restarted),
        cmocka_unit_test(test_exiting_plugin_is_answered_counted_and_restarted),
        cmocka_unit_test(test_hot_spare_makes_an_isolated_crash_cost_one_select),
        cmocka_unit_test(
            test_forged_answer_sequence_is_malformed_and_the_helper_restarted),
        cmocka_unit_test(test_looping_plugin_misses_its_deadline_and_is_restarted),
        cmocka_unit_test(test_sleeping_plugin_misses_its_deadline_and_is_restarted),
        cmocka_unit_test(test_leaking_plugin_hits_its_memory_limit_and_is_restarted),
        cmocka_unit_test(test_plugin_writing_to_stdout_never_reaches_the_router_output),
        cmocka_unit_test(test_request_overrides_cross_into_the_helper_only_when_labelled),
        cmocka_unit_test(test_bad_config_is_refused_by_the_helper_naming_the_key),
        cmocka_unit_test(test_hooks_reach_the_plugin_in_its_helper),
        cmocka_unit_test(test_concurrent_selects_share_one_helper_safely),
        cmocka_unit_test(test_host_limit_never_counts_against_the_plugin),
        cmocka_unit_test(test_positive_return_in_a_helper_is_an_error),
        cmocka_unit_test(test_late_answers_never_kill_a_healthy_helper),
        cmocka_unit_test(test_a_late_helper_is_kept_and_answers_again),
        cmocka_unit_test(test_a_stuck_helper_is_killed_after_the_hang_timeout),
        cmocka_unit_test(test_a_killed_spare_is_replaced_before_the_next_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
