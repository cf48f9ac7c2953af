// SPDX-License-Identifier: Apache-2.0
/*
 * test_host_select.c -- wsel_host_select: the built-in policy and each
 * fallback reason with its counter, ejection (after N, logged once, cleared
 * by the next switch), serialisation of plugins that do not declare
 * concurrent select, the hooks, and reproducible per-request streams.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <cmocka.h>

#include "testutil.h"

typedef struct fixture {
    char *dir;
    tu_log log;
    wsel_host *host;
    tu_table table; /* 4 workers x 2 ranks, row 0 cheapest */
    char err[1024];
} fixture;

static int make_fixture(void **state, uint32_t max_failures)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = tu_temp_dir();
    tu_log_init(&f->log);
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.log = tu_log_sink;
    opts.log_user = &f->log;
    opts.max_consecutive_failures = max_failures;
    if (wsel_host_create(&opts, &f->host) != 0)
        return -1;
    tu_table_init(&f->table, 4, 2, NULL);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return make_fixture(state, 5);
}

static int setup_never_eject(void **state)
{
    return make_fixture(state, WSEL_HOST_NEVER_EJECT);
}

static int setup_zero_max_failures(void **state)
{
    return make_fixture(state, 0);
}

static int teardown(void **state)
{
    fixture *f = *state;
    wsel_host_destroy(f->host);
    tu_table_free(&f->table);
    tu_log_free(&f->log);
    tu_remove_tree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void load(fixture *f, const char *fixture_name, const char *config)
{
    char as[128];
    snprintf(as, sizeof(as), "%s.so", fixture_name);
    char *path = tu_install_fixture(f->dir, fixture_name, as);
    if (wsel_host_switch(f->host, path, config, f->err, sizeof(f->err)) != 0)
        fail_msg("switch to %s: %s", fixture_name, f->err);
    free(path);
}

static int32_t select_row(fixture *f, uint32_t *row)
{
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    c.row = 0xdead;
    int32_t rc = wsel_host_select(f->host, &f->table.request, &f->table.buf.table, &c);
    *row = c.row;
    return rc;
}

static wsel_host_counters counters(fixture *f)
{
    wsel_host_counters c;
    wsel_host_get_counters(f->host, &c);
    return c;
}

/* Make row `r` carry `flags` (the table buffer's columns are ours). */
static void set_flags(fixture *f, uint32_t r, uint8_t flags)
{
    ((uint8_t *)f->table.buf.table.flags)[r] = flags;
}

static void test_no_policy_answers_with_builtin_argmin(void **state)
{
    fixture *f = *state;
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_int_equal(row, 0);
    assert_string_equal(wsel_host_policy_name(f->host), "builtin");
    wsel_host_counters c = counters(f);
    assert_int_equal(c.selects, 1);
    assert_int_equal(c.fallbacks, 1);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_NO_POLICY], 1);
    assert_int_equal(c.plugin_answers, 0);
}

static void test_builtin_skips_excluded_and_busy_rows(void **state)
{
    fixture *f = *state;
    uint32_t row;
    set_flags(f, 0, WSEL_ROW_EXCLUDED);
    set_flags(f, 1, WSEL_ROW_BUSY);
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_int_equal(row, 2);
}

static void test_builtin_takes_busy_row_when_every_eligible_row_is_busy(void **state)
{
    fixture *f = *state;
    for (uint32_t r = 0; r < 8; r++)
        set_flags(f, r, r < 5 ? WSEL_ROW_EXCLUDED : WSEL_ROW_BUSY);
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_int_equal(row, 5);
}

static void test_every_row_excluded_is_no_candidate_and_choice_untouched(void **state)
{
    fixture *f = *state;
    for (uint32_t r = 0; r < 8; r++)
        set_flags(f, r, WSEL_ROW_EXCLUDED);
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ENOCANDIDATE);
    assert_int_equal(row, 0xdead);
    assert_int_equal(counters(f).selects, 0);
}

static void test_builtin_breaks_exact_ties_uniformly(void **state)
{
    fixture *f = *state;
    /* Four rows tied at the minimum. Over N = 8000 selects each is chosen
     * Binomial(N, 1/4) times: mean 2000, sd sqrt(8000 * 1/4 * 3/4) = 38.7.
     * With a fixed seed the result is deterministic; 5 sd (194) bounds it
     * for any reasonable generator. */
    double *cost = (double *)f->table.buf.table.cost;
    for (uint32_t r = 0; r < 8; r++)
        cost[r] = r < 4 ? 1.0 : 2.0;
    uint32_t hits[8] = {0};
    wsel_request req = f->table.request;
    wsel_rng rng;
    for (uint64_t id = 0; id < 8000; id++) {
        req.request_id = id;
        wsel_host_prepare_request(f->host, &req, &rng);
        wsel_choice c;
        assert_int_equal(wsel_host_select(f->host, &req, &f->table.buf.table, &c),
                         WSEL_ANSWER_FALLBACK);
        hits[c.row]++;
    }
    for (uint32_t r = 0; r < 4; r++) {
        assert_true(hits[r] > 2000 - 194);
        assert_true(hits[r] < 2000 + 194);
    }
    for (uint32_t r = 4; r < 8; r++)
        assert_int_equal(hits[r], 0);
}

static void test_plugin_answer_is_used_when_valid(void **state)
{
    fixture *f = *state;
    load(f, "fx_good", "{\"row\": 6}");
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 6);
    assert_int_equal(counters(f).plugin_answers, 1);
}

static void expect_fallback(fixture *f, uint32_t reason, uint32_t expected_row)
{
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_int_equal(row, expected_row);
    wsel_host_counters c = counters(f);
    assert_int_equal(c.fallback_by_reason[reason], 1);
    assert_int_equal(c.fallbacks, 1);
    assert_int_equal(c.selects, 1);
}

static void test_error_from_plugin_falls_back_with_reason_error(void **state)
{
    fixture *f = *state;
    load(f, "fx_returns_error", NULL);
    expect_fallback(f, WSEL_FALLBACK_ERROR, 0);
}

static void test_row_out_of_range_falls_back_with_reason_out_of_range(void **state)
{
    fixture *f = *state;
    load(f, "fx_out_of_range", NULL);
    expect_fallback(f, WSEL_FALLBACK_OUT_OF_RANGE, 0);
}

static void test_excluded_row_falls_back_with_reason_excluded(void **state)
{
    fixture *f = *state;
    load(f, "fx_excluded_row", NULL);
    set_flags(f, 3, WSEL_ROW_EXCLUDED);
    expect_fallback(f, WSEL_FALLBACK_EXCLUDED, 0);
}

static void test_ejects_after_max_failures_and_logs_once(void **state)
{
    fixture *f = *state; /* max_consecutive_failures = 5 */
    load(f, "fx_returns_error", NULL);
    uint32_t row;
    for (int i = 0; i < 5; i++)
        assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_string_equal(wsel_host_policy_name(f->host), "builtin");
    for (int i = 0; i < 20; i++)
        assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    wsel_host_counters c = counters(f);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_ERROR], 5);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_EJECTED], 20);
    assert_int_equal(c.ejections, 1);
    assert_int_equal(tu_log_count(&f->log, "ejected after 5 consecutive failed answers"),
                     1);
    assert_int_equal(
        tu_log_count(&f->log, "fx_returns_error.so: plugin fx_returns_error"), 1);
}

static void test_next_switch_clears_ejection(void **state)
{
    fixture *f = *state;
    load(f, "fx_returns_error", NULL);
    uint32_t row;
    for (int i = 0; i < 6; i++)
        select_row(f, &row);
    assert_int_equal(counters(f).ejections, 1);
    load(f, "fx_good", "{\"row\": 4}");
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 4);
    assert_string_equal(wsel_host_policy_name(f->host), "fx_good");
}

static void test_a_good_answer_resets_the_failure_streak(void **state)
{
    fixture *f = *state; /* max 5 */
    load(f, "fx_good", "{\"row\": 1}");
    uint32_t row;
    for (int round = 0; round < 5; round++) {
        set_flags(f, 1, WSEL_ROW_EXCLUDED);
        for (int i = 0; i < 4; i++)
            assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
        set_flags(f, 1, 0);
        assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    }
    wsel_host_counters c = counters(f);
    assert_int_equal(c.ejections, 0);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_EXCLUDED], 20);
    assert_int_equal(c.plugin_answers, 5);
}

static void test_never_eject_option_never_ejects(void **state)
{
    fixture *f = *state;
    load(f, "fx_returns_error", NULL);
    uint32_t row;
    for (int i = 0; i < 100; i++)
        select_row(f, &row);
    wsel_host_counters c = counters(f);
    assert_int_equal(c.ejections, 0);
    assert_int_equal(c.fallback_by_reason[WSEL_FALLBACK_ERROR], 100);
}

/* Zero means the default, 16, like every zero-filled option. */
static void test_zero_max_failures_means_the_default_of_16(void **state)
{
    fixture *f = *state;
    load(f, "fx_returns_error", NULL);
    uint32_t row;
    for (int i = 0; i < 15; i++)
        select_row(f, &row);
    assert_int_equal(counters(f).ejections, 0);
    select_row(f, &row);
    assert_int_equal(counters(f).ejections, 1);
}

/* A program built against the 1.0 counters struct passes a shorter buffer:
 * nothing past it is written. */
static void test_counters_are_written_only_within_the_size_given(void **state)
{
    fixture *f = *state;
    uint32_t row;
    select_row(f, &row);
    unsigned char buf[sizeof(wsel_host_counters) + 16];
    memset(buf, 0xAB, sizeof(buf));
    wsel_host_get_counters(f->host, (wsel_host_counters *)(void *)buf);
    for (size_t i = WSEL_HOST_COUNTERS_SIZE_1_0; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0xAB);
    memset(buf, 0xAB, sizeof(buf));
    wsel_host_read_counters(f->host, (wsel_host_counters *)(void *)buf, 8);
    uint64_t selects;
    memcpy(&selects, buf, sizeof(selects));
    assert_int_equal(selects, 1);
    for (size_t i = 8; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0xAB);
}

typedef struct slow_worker {
    fixture *f;
    int calls;
} slow_worker;

static void *slow_loop(void *arg)
{
    slow_worker *w = arg;
    wsel_request req = w->f->table.request;
    wsel_rng rng;
    for (int i = 0; i < w->calls; i++) {
        req.request_id = (uint64_t)i;
        wsel_host_prepare_request(w->f->host, &req, &rng);
        wsel_choice c;
        wsel_host_select(w->f->host, &req, &w->f->table.buf.table, &c);
    }
    return NULL;
}

static void test_non_concurrent_plugin_calls_are_serialised(void **state)
{
    fixture *f = *state;
    /* fx_slow sleeps 1 ms inside select and answers an error if it ever
     * sees a second thread inside: any ERROR fallback means overlap. */
    load(f, "fx_slow", "{\"sleep_us\": 1000}");
    pthread_t threads[4];
    slow_worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (slow_worker){f, 10};
        assert_int_equal(pthread_create(&threads[i], NULL, slow_loop, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    wsel_host_counters c = counters(f);
    assert_int_equal(c.plugin_answers, 40);
    assert_int_equal(c.fallbacks, 0);
}

static void test_bad_arguments_are_refused_without_touching_choice(void **state)
{
    fixture *f = *state;
    wsel_choice c;
    c.row = 77;
    wsel_request req = f->table.request;
    wsel_table t = f->table.buf.table;
    assert_int_equal(wsel_host_select(f->host, NULL, &t, &c), WSEL_EREQUEST);
    req.rng = NULL;
    assert_int_equal(wsel_host_select(f->host, &req, &t, &c), WSEL_EREQUEST);
    req = f->table.request;
    req.struct_size = 8;
    assert_int_equal(wsel_host_select(f->host, &req, &t, &c), WSEL_EREQUEST);
    req = f->table.request;
    assert_int_equal(wsel_host_select(f->host, &req, NULL, &c), WSEL_ETABLE);
    t.num_rows = 0;
    assert_int_equal(wsel_host_select(f->host, &req, &t, &c), WSEL_ETABLE);
    t = f->table.buf.table;
    t.cost = NULL;
    assert_int_equal(wsel_host_select(f->host, &req, &t, &c), WSEL_ETABLE);
    assert_int_equal(wsel_host_select(f->host, &req, &f->table.buf.table, NULL),
                     WSEL_EINVAL);
    assert_int_equal(c.row, 77);
    assert_int_equal(counters(f).selects, 0);
}

static void test_hooks_reach_the_live_plugin(void **state)
{
    fixture *f = *state;
    wsel_host_request_finished(f->host, 1, 2, 3); /* no policy: no-op */
    wsel_host_topology_changed(f->host, &f->table.buf.table);
    load(f, "fx_good", NULL);
    wsel_host_request_finished(f->host, 5, 2, 1);
    wsel_host_topology_changed(f->host, &f->table.buf.table);
    assert_int_equal(tu_log_count(&f->log, "fx_good: request 5 finished on (2, 1)"), 1);
    assert_int_equal(tu_log_count(&f->log, "fx_good: topology changed (8 rows)"), 1);
}

static void test_prepared_requests_are_reproducible_from_seed_and_id(void **state)
{
    fixture *f = *state;
    wsel_request a, b;
    wsel_rng ra, rb;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    a.request_id = b.request_id = 99;
    wsel_host_prepare_request(f->host, &a, &ra);
    wsel_host_prepare_request(f->host, &b, &rb);
    /* The 1.0 entry point labels a request exactly as it did in 1.0. */
    assert_int_equal(a.struct_size, WSEL_REQUEST_SIZE_1_0);
    assert_ptr_equal(a.rng, &ra);
    assert_true(a.uniform == b.uniform);
    assert_true(a.uniform >= 0.0 && a.uniform < 1.0);
    assert_memory_equal(&ra, &rb, sizeof(ra));
    b.request_id = 100;
    wsel_host_prepare_request(f->host, &b, &rb);
    assert_true(a.uniform != b.uniform);
}

/* A program built against 1.0 passes an 88-byte request to a later library:
 * the 1.0 entry point must not label it larger than that, or a plugin would
 * read past its end; the sized one labels what the caller says it has. */
static void test_prepare_request_never_labels_more_than_the_caller_has(void **state)
{
    fixture *f = *state;
    wsel_request r;
    wsel_rng rng;
    memset(&r, 0xAB, sizeof(r));
    r.request_id = 7;
    wsel_host_prepare_request(f->host, &r, &rng);
    assert_int_equal(r.struct_size, WSEL_REQUEST_SIZE_1_0);
    const unsigned char *tail = (const unsigned char *)&r + WSEL_REQUEST_SIZE_1_0;
    for (size_t i = 0; i < sizeof(r) - WSEL_REQUEST_SIZE_1_0; i++)
        assert_int_equal(tail[i], 0xAB);
    wsel_host_prepare_request_sized(f->host, &r, sizeof(r), &rng);
    assert_int_equal(r.struct_size, sizeof(wsel_request));
    wsel_host_prepare_request_sized(f->host, &r, sizeof(r) + 64, &rng);
    assert_int_equal(r.struct_size, sizeof(wsel_request));
}

static wsel_host_counters all_counters(fixture *f)
{
    wsel_host_counters c;
    memset(&c, 0xff, sizeof(c));
    wsel_host_read_counters(f->host, &c, sizeof(c));
    return c;
}

static uint64_t by_reason(const wsel_host_counters *c, uint32_t reason)
{
    return reason < WSEL_FALLBACK_REASONS
               ? c->fallback_by_reason[reason]
               : c->fallback_by_reason_more[reason - WSEL_FALLBACK_REASONS];
}

/* Every select answered by the fallback under `reason` with the cheapest
 * eligible row, and the counters add up. */
static void expect_fallbacks(fixture *f, uint32_t reason, uint32_t expected_row, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t row;
        assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
        assert_int_equal(row, expected_row);
    }
    wsel_host_counters c = all_counters(f);
    assert_int_equal(by_reason(&c, reason), (uint64_t)n);
    assert_int_equal(c.fallbacks, (uint64_t)n);
    assert_int_equal(c.selects, (uint64_t)n);
    assert_int_equal(c.plugin_answers, 0);
}

/* A plugin writing past its choice (as one built against a later minor
 * that writes an appended field without checking struct_size) writes into
 * the host's guard, not the host's stack: a bad answer, in every build. */
static void test_writing_48_bytes_past_the_choice_is_a_bad_answer(void **state)
{
    fixture *f = *state; /* never eject: 500 selects all see the plugin */
    load(f, "fx_choice_overrun_48", NULL);
    expect_fallbacks(f, WSEL_FALLBACK_CHOICE_OVERRUN, 0, 500);
}

static void test_writing_64_bytes_past_the_choice_is_a_bad_answer(void **state)
{
    fixture *f = *state;
    load(f, "fx_choice_overrun_64", NULL);
    expect_fallbacks(f, WSEL_FALLBACK_CHOICE_OVERRUN, 0, 500);
}

/* The older fixture also overwrites `row` with 0xabababab. */
static void test_scribbling_over_and_past_the_choice_is_a_bad_answer(void **state)
{
    fixture *f = *state;
    load(f, "fx_writes_past_choice", NULL);
    expect_fallbacks(f, WSEL_FALLBACK_CHOICE_OVERRUN, 0, 20);
    assert_string_equal(wsel_host_policy_name(f->host), "fx_writes_past_choice");
}

static void test_overruns_count_towards_ejection(void **state)
{
    fixture *f = *state; /* max 5 */
    load(f, "fx_choice_overrun_48", NULL);
    uint32_t row;
    for (int i = 0; i < 5; i++)
        assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_int_equal(counters(f).ejections, 1);
}

/* Clearing WSEL_ROW_EXCLUDED in the table and answering that row: the
 * answer is checked against the flags as the router handed them. */
static void test_plugin_clearing_an_excluded_flag_is_refused(void **state)
{
    fixture *f = *state;
    set_flags(f, 0, WSEL_ROW_EXCLUDED);
    load(f, "fx_clears_excluded", NULL);
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_int_equal(row, 1); /* row 0 was excluded when the router asked */
    wsel_host_counters c = all_counters(f);
    assert_int_equal(by_reason(&c, WSEL_FALLBACK_TABLE_WRITTEN), 1);
    assert_int_equal(c.fallbacks, 1);
}

/* NaN costs written by a failing plugin: the fallback still answers the
 * cheapest eligible row of the table as handed in. */
static void test_nan_costs_written_by_a_plugin_do_not_break_the_fallback(void **state)
{
    fixture *f = *state;
    load(f, "fx_nan_costs", NULL);
    expect_fallbacks(f, WSEL_FALLBACK_TABLE_WRITTEN, 0, 1);
}

/* Above WSEL_HOST_SNAPSHOT_ROWS the cost column is checksummed: the write is
 * still caught, and NaN costs still leave the fallback an answer. */
static void test_large_table_writes_are_caught_and_answered(void **state)
{
    fixture *f = *state;
    tu_table big;
    tu_table_init(&big, WSEL_HOST_SNAPSHOT_ROWS / 2 + 1, 2, NULL);
    assert_true(big.buf.table.num_rows > WSEL_HOST_SNAPSHOT_ROWS);
    load(f, "fx_nan_costs", NULL);
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    assert_int_equal(wsel_host_select(f->host, &big.request, &big.buf.table, &c),
                     WSEL_ANSWER_FALLBACK);
    assert_true(c.row < big.buf.table.num_rows);
    wsel_host_counters k = all_counters(f);
    assert_int_equal(by_reason(&k, WSEL_FALLBACK_TABLE_WRITTEN), 1);
    tu_table_free(&big);
}

/* Past WSEL_HOST_SNAPSHOT_ROWS the flags are still copied (up to 9 bytes a
 * row of the snapshot, 9,216 rows) and the costs checksummed: a plugin
 * clearing an excluded flag on 4,096 rows is caught, and neither its answer
 * nor the fallback lands on the row the caller excluded. */
static void large_table_cleared_flag(fixture *f, uint32_t workers)
{
    uint32_t n = workers * 2;
    uint8_t *flags = calloc(n, 1);
    assert_non_null(flags);
    flags[0] = WSEL_ROW_EXCLUDED;
    tu_table big;
    tu_table_init(&big, workers, 2, flags);
    free(flags);
    assert_true(big.buf.table.num_rows > WSEL_HOST_SNAPSHOT_ROWS);
    load(f, "fx_clears_excluded", NULL);
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    assert_int_equal(wsel_host_select(f->host, &big.request, &big.buf.table, &c),
                     WSEL_ANSWER_FALLBACK);
    wsel_host_counters k = all_counters(f);
    assert_int_equal(by_reason(&k, WSEL_FALLBACK_TABLE_WRITTEN), 1);
    if (n <= 9u * WSEL_HOST_SNAPSHOT_ROWS)
        assert_int_equal(c.row, 1); /* the cheapest row the caller left eligible */
    else
        assert_true(c.row < n); /* past 9,216 rows: flags as the plugin left them */
    tu_table_free(&big);
}

static void test_large_table_flag_write_never_routes_to_an_excluded_row(void **state)
{
    large_table_cleared_flag(*state, 2048);
}

static void test_largest_table_flag_write_is_caught(void **state)
{
    large_table_cleared_flag(*state, 9u * WSEL_HOST_SNAPSHOT_ROWS / 2 + 1);
}

/* "Busy only when every eligible row is busy" is checked like the rest. */
static void test_busy_row_while_an_eligible_row_is_free_is_refused(void **state)
{
    fixture *f = *state;
    set_flags(f, 2, WSEL_ROW_BUSY);
    load(f, "fx_busy_row", NULL);
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_FALLBACK);
    assert_int_equal(row, 0);
    wsel_host_counters c = all_counters(f);
    assert_int_equal(by_reason(&c, WSEL_FALLBACK_BUSY), 1);
    /* Every eligible row busy: a busy answer is the right one. */
    for (uint32_t r = 0; r < 8; r++)
        set_flags(f, r, r < 2 ? WSEL_ROW_EXCLUDED : WSEL_ROW_BUSY);
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 2);
}

/* Only 0 is success: a positive return with nothing written is an error. */
static void test_positive_return_is_an_error_answer(void **state)
{
    fixture *f = *state;
    set_flags(f, 0, WSEL_ROW_BUSY); /* the zeroed row 0 would be wrong */
    load(f, "fx_returns_positive", NULL);
    expect_fallbacks(f, WSEL_FALLBACK_ERROR, 1, 1);
}

typedef struct flood_log {
    _Atomic uint64_t flooding; /* the plugin's lines that reached the sink */
} flood_log;

static void flood_sink(void *user, int32_t level, const char *msg)
{
    (void)level;
    if (strstr(msg, "fx_log_flood: flooding") == msg)
        atomic_fetch_add(&((flood_log *)user)->flooding, 1);
}

/* 100,000 log calls in one select: at most WSEL_HOST_LOG_PER_SECOND a
 * second reach the sink, and delivered + dropped = calls. The bound is in
 * seconds the select actually took, so a slow machine cannot fail it. */
static void test_plugin_log_flood_is_rate_limited_and_counted(void **state)
{
    fixture *f = *state;
    flood_log fl;
    atomic_init(&fl.flooding, 0);
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.log = flood_sink;
    opts.log_user = &fl;
    wsel_host *host = NULL;
    assert_int_equal(wsel_host_create(&opts, &host), 0);
    char *path = tu_install_fixture(f->dir, "fx_log_flood", "fx_log_flood.so");
    assert_int_equal(wsel_host_switch(host, path, NULL, f->err, sizeof(f->err)), 0);
    free(path);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    assert_int_equal(wsel_host_select(host, &f->table.request, &f->table.buf.table, &c),
                     WSEL_ANSWER_PLUGIN);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t seconds = (uint64_t)(t1.tv_sec - t0.tv_sec) + 2; /* windows touched */
    wsel_host_counters k;
    wsel_host_read_counters(host, &k, sizeof(k));
    uint64_t delivered = atomic_load(&fl.flooding);
    assert_true(delivered >= 1);
    assert_true(delivered <= WSEL_HOST_LOG_PER_SECOND * seconds);
    assert_int_equal(delivered + k.log_dropped, 100000);
    wsel_host_destroy(host);
}

#define T(name)  cmocka_unit_test_setup_teardown(name, setup, teardown)
#define T0(name) cmocka_unit_test_setup_teardown(name, setup_never_eject, teardown)
#define TZ(name) cmocka_unit_test_setup_teardown(name, setup_zero_max_failures, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_no_policy_answers_with_builtin_argmin),
        T(test_builtin_skips_excluded_and_busy_rows),
        T(test_builtin_takes_busy_row_when_every_eligible_row_is_busy),
        T(test_every_row_excluded_is_no_candidate_and_choice_untouched),
        T(test_builtin_breaks_exact_ties_uniformly),
        T(test_plugin_answer_is_used_when_valid),
        T(test_error_from_plugin_falls_back_with_reason_error),
        T(test_row_out_of_range_falls_back_with_reason_out_of_range),
        T(test_excluded_row_falls_back_with_reason_excluded),
        T(test_ejects_after_max_failures_and_logs_once),
        T(test_next_switch_clears_ejection),
        T(test_a_good_answer_resets_the_failure_streak),
        T0(test_never_eject_option_never_ejects),
        TZ(test_zero_max_failures_means_the_default_of_16),
        T0(test_counters_are_written_only_within_the_size_given),
        T(test_non_concurrent_plugin_calls_are_serialised),
        T(test_bad_arguments_are_refused_without_touching_choice),
        T(test_hooks_reach_the_live_plugin),
        T(test_prepared_requests_are_reproducible_from_seed_and_id),
        T(test_prepare_request_never_labels_more_than_the_caller_has),
        T0(test_writing_48_bytes_past_the_choice_is_a_bad_answer),
        T0(test_writing_64_bytes_past_the_choice_is_a_bad_answer),
        T0(test_scribbling_over_and_past_the_choice_is_a_bad_answer),
        T(test_overruns_count_towards_ejection),
        T(test_plugin_clearing_an_excluded_flag_is_refused),
        T(test_nan_costs_written_by_a_plugin_do_not_break_the_fallback),
        T(test_large_table_flag_write_never_routes_to_an_excluded_row),
        T(test_largest_table_flag_write_is_caught),
        T(test_large_table_writes_are_caught_and_answered),
        T(test_busy_row_while_an_eligible_row_is_free_is_refused),
        T(test_positive_return_is_an_error_answer),
        T(test_plugin_log_flood_is_rate_limited_and_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
