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
#include <stdarg.h>
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
        cmocka_unit_test(test_bad_config_is_refused_by_the_helper_naming_the_key),
        cmocka_unit_test(test_hooks_reach_the_plugin_in_its_helper),
        cmocka_unit_test(test_concurrent_selects_share_one_helper_safely),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
