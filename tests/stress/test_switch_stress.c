/*
 * test_switch_stress.c -- switching under live traffic.
 *
 * Eight threads call wsel_host_select on one host while the main thread
 * switches among three instrumented policies (tests/stress/stress_plugin.c)
 * every millisecond, one of them without WSEL_CAP_CONCURRENT_SELECT and one
 * configured to misbehave (errors, out-of-range and excluded rows). The
 * plugins abort the process if an instance is destroyed twice, destroyed
 * while a select is inside it, entered after its destroy began, or entered
 * twice at once when it is not concurrent; the workers check every answer;
 * the lifecycle lines the plugins log prove each instance is destroyed
 * exactly once, and that wsel_host_reclaim destroys every replaced instance
 * while selects go on. A second test shows that a switch whose create()
 * takes 200 ms never holds up a select.
 *
 * WSEL_STRESS_SCALE scales the run (1.0 = 1,000,000 selects and 1,000
 * switches; the ThreadSanitizer run uses 0.05).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "stress_util.h"
#include "stress_workers.h"

#define SELECT_THREADS   8
#define SWITCH_PERIOD_US 1000u
/* How long reclamation may take under load once switching stops. A reader
 * preempted inside select holds a grace period for one scheduler period
 * (tens of ms on a loaded 2-core machine); two flips need two. 10 s is a
 * hundred times that. */
#define RECLAIM_LIMIT_S 10.0
/* Measure the steady rate over at least this long, for a stable figure. */
#define STEADY_MIN_S 0.5
/* Nothing here should take more than this, even under a sanitizer. */
#define DEADLINE_S 300.0

typedef struct policy {
    const char *name;
    const char *config;
} policy;

/* The rotation: concurrent -> concurrent -> serialised -> a misbehaving
 * concurrent policy (three answers in four unusable) -> ... */
static const policy rotation[] = {
    {"stress_a", "{\"pick\": \"argmin\"}"},
    {"stress_b", "{\"pick\": \"cycle\", \"spin\": 20}"},
    {"stress_serial", "{\"pick\": \"last\", \"log_lifecycle\": true}"},
    {"stress_b", "{\"pick\": \"faulty\"}"},
};
#define ROTATION_SIZE (sizeof rotation / sizeof rotation[0])

static void switch_or_fail(wsel_host *host, const char *name, const char *config)
{
    char path[1024];
    char err[512] = "";
    int32_t rc;

    assert_int_equal(stress_plugin_path(path, sizeof path, name), 0);
    rc = wsel_host_switch(host, path, config, err, sizeof err);
    if (rc != 0)
        fail_msg("switch to %s failed: %s (%s)", path, wsel_errname(rc), err);
}

/* Replaced instances not yet destroyed: created - destroyed - the live one. */
static uint32_t retired_alive(stress_log_counts *logs)
{
    unsigned created = atomic_load(&logs->created);
    unsigned destroyed = atomic_load(&logs->destroyed);

    return created > destroyed ? (uint32_t)(created - destroyed - 1) : 0;
}

static void assert_no_bad_answer(const stress_pool *pool)
{
    const stress_worker *w = stress_pool_failure(pool);

    if (w)
        fail_msg("worker %u got a bad answer: return %d (%s), row %u", w->index,
                 (int)w->bad_rc, w->bad_rc < 0 ? wsel_errname(w->bad_rc) : "answer",
                 w->bad_row);
}

/* Wait until the workers have answered `target` selects in total. */
static void wait_for_selects(const stress_pool *pool, uint64_t target, double deadline)
{
    while (stress_pool_done(pool) < target && !stress_pool_failure(pool) &&
           stress_now() < deadline)
        stress_sleep_us(500);
}

static void test_every_select_is_answered_while_switching_every_millisecond(void **state)
{
    const uint64_t steady_target = stress_scaled(1000000, 10000);
    const uint64_t switching_target = stress_scaled(1000000, 10000);
    const uint64_t switch_target = stress_scaled(1000, 12);
    const double deadline = stress_now() + DEADLINE_S;
    stress_log_counts logs = {0};
    wsel_host_options opts;
    wsel_table_buf buf = {0};
    wsel_host_counters counters;
    wsel_host *host = NULL;
    stress_pool pool;
    uint64_t switches = 0, d0, d1, d2, total;
    uint32_t pending = 0, pending_max = 0;
    double t0, t1, t2, t3, switch_time = 0, switch_max = 0;

    (void)state;
    assert_int_equal(stress_table_build(&buf), 0);
    stress_host_options(&opts, &logs);
    assert_int_equal(wsel_host_create(&opts, &host), 0);
    switch_or_fail(host, rotation[0].name, rotation[0].config);
    assert_int_equal(stress_pool_start(&pool, host, &buf.table, SELECT_THREADS, 0), 0);

    /* Steady: one concurrent policy, no switching. Rates are counted
     * between two snapshots: the main thread may wait for a core after
     * starting eight busy workers. */
    t0 = stress_now();
    d0 = stress_pool_done(&pool);
    wait_for_selects(&pool, d0 + steady_target, deadline);
    while (stress_now() - t0 < STEADY_MIN_S && !stress_pool_failure(&pool))
        stress_sleep_us(1000);
    t1 = stress_now();
    d1 = stress_pool_done(&pool);

    /* Switching every millisecond until both targets are met. */
    while (
        (switches < switch_target || stress_pool_done(&pool) - d1 < switching_target) &&
        !stress_pool_failure(&pool) && stress_now() < deadline) {
        const policy *next = &rotation[(switches + 1) % ROTATION_SIZE];
        double start = stress_now(), took;
        switch_or_fail(host, next->name, next->config);
        took = stress_now() - start;
        switch_time += took;
        switch_max = took > switch_max ? took : switch_max;
        switches++;
        pending = retired_alive(&logs);
        pending_max = pending > pending_max ? pending : pending_max;
        stress_sleep_us(SWITCH_PERIOD_US);
    }
    t2 = stress_now();
    d2 = stress_pool_done(&pool);

    /* Reclamation makes progress under load: with the workers still
     * selecting, polling wsel_host_reclaim destroys every replaced instance. */
    while ((pending = wsel_host_reclaim(host)) != 0 &&
           stress_now() - t2 < RECLAIM_LIMIT_S)
        stress_sleep_us(1000);
    t3 = stress_now();
    stress_pool_stop(&pool);
    assert_no_bad_answer(&pool);
    if (pending != 0)
        fail_msg("%u replaced instances still alive %.1f s after the last switch",
                 (unsigned)pending, RECLAIM_LIMIT_S);
    assert_int_equal(retired_alive(&logs), 0);
    if (stress_now() >= deadline)
        fail_msg("deadline: %llu switches, %llu selects while switching",
                 (unsigned long long)switches, (unsigned long long)(d2 - d1));

    printf("stress: %.0f selects/s steady, %.0f selects/s while switching every 1 ms "
           "(%llu switches, %llu selects, %llu fallbacks; a switch took %.2f ms on "
           "average, %.2f ms at most)\n"
           "stress: at most %u replaced instances awaiting reclamation; the last "
           "reclaimed %.2f ms after the last switch, under load\n",
           (double)(d1 - d0) / (t1 - t0), (double)(d2 - d1) / (t2 - t1),
           (unsigned long long)switches, (unsigned long long)(d2 - d1),
           (unsigned long long)stress_pool_fallbacks(&pool),
           switches ? switch_time / (double)switches * 1e3 : 0.0, switch_max * 1e3,
           (unsigned)pending_max, (t3 - t2) * 1e3);

    assert_true(d1 - d0 >= steady_target);
    assert_true(d2 - d1 >= switching_target);
    assert_true(switches >= switch_target);

    total = stress_pool_done(&pool);

    wsel_host_get_counters(host, &counters);
    assert_int_equal(counters.selects, total);
    assert_int_equal(counters.plugin_answers + counters.fallbacks, total);
    assert_int_equal(counters.fallbacks, stress_pool_fallbacks(&pool));
    /* The faulty policy's bad answers were each replaced, for its reason;
     * nothing else fell back. */
    assert_true(counters.fallback_by_reason[WSEL_FALLBACK_ERROR] > 0);
    assert_true(counters.fallback_by_reason[WSEL_FALLBACK_OUT_OF_RANGE] > 0);
    assert_true(counters.fallback_by_reason[WSEL_FALLBACK_EXCLUDED] > 0);
    assert_int_equal(counters.fallback_by_reason[WSEL_FALLBACK_ERROR] +
                         counters.fallback_by_reason[WSEL_FALLBACK_OUT_OF_RANGE] +
                         counters.fallback_by_reason[WSEL_FALLBACK_EXCLUDED],
                     counters.fallbacks);
    assert_int_equal(counters.switches, switches + 1);
    assert_int_equal(counters.failed_switches, 0);
    /* stress_b (cycle) answered: every eligible row was named; and none
     * of the excluded ones (each answer was checked as it came). */
    for (uint32_t row = 0; row < buf.table.num_rows; row++) {
        if (buf.table.flags[row] & WSEL_ROW_EXCLUDED)
            assert_int_equal(stress_pool_row_hits(&pool, row), 0);
        else
            assert_true(stress_pool_row_hits(&pool, row) > 0);
    }

    wsel_host_destroy(host);
    wsel_table_buf_free(&buf);

    /* One instance per successful switch, each destroyed exactly once (a
     * second destroy would have aborted inside the plugin). */
    assert_int_equal(atomic_load(&logs.created), switches + 1);
    assert_int_equal(atomic_load(&logs.destroyed), switches + 1);
    assert_int_equal(atomic_load(&logs.errors), 0);
}

static void test_a_slow_create_never_blocks_selects(void **state)
{
    /* A select that waited for the switch would last about 200 ms, and
     * would have waited voluntarily (on a lock, a futex, a sleep). Selects
     * during which the scheduler took the core away (an involuntary context
     * switch) are set apart: on a loaded 2-core machine they last one or
     * more 4 ms ticks, up to 128 ms seen with twelve CPU hogs running,
     * which says nothing about the host. The others take microseconds;
     * 20 ms is ten times below the create delay. */
    const uint64_t max_latency_ns = 20u * 1000u * 1000u;
    const double deadline = stress_now() + DEADLINE_S;
    stress_log_counts logs = {0};
    wsel_host_options opts;
    wsel_table_buf buf = {0};
    wsel_host *host = NULL;
    stress_pool pool;
    uint64_t old0, old1, new0, new1, others;
    double t0, t1;

    (void)state;
    assert_int_equal(stress_table_build(&buf), 0);
    stress_host_options(&opts, &logs);
    assert_int_equal(wsel_host_create(&opts, &host), 0);
    switch_or_fail(host, "stress_a", "{\"pick\": \"first\"}");
    assert_int_equal(stress_pool_start(&pool, host, &buf.table, 2, 1), 0);
    wait_for_selects(&pool, 1000, deadline);

    old0 = stress_pool_row_hits(&pool, STRESS_FIRST_ELIGIBLE_ROW);
    new0 = stress_pool_row_hits(&pool, STRESS_LAST_ELIGIBLE_ROW);
    t0 = stress_now();
    switch_or_fail(host, "stress_b", "{\"pick\": \"last\", \"create_delay_ms\": 200}");
    t1 = stress_now();
    old1 = stress_pool_row_hits(&pool, STRESS_FIRST_ELIGIBLE_ROW);

    /* The new policy takes over once published. */
    do {
        new1 = stress_pool_row_hits(&pool, STRESS_LAST_ELIGIBLE_ROW);
        stress_sleep_us(1000);
    } while (new1 == new0 && !stress_pool_failure(&pool) && stress_now() < deadline);
    stress_pool_stop(&pool);
    assert_no_bad_answer(&pool);

    others = stress_pool_done(&pool) -
             stress_pool_row_hits(&pool, STRESS_FIRST_ELIGIBLE_ROW) -
             stress_pool_row_hits(&pool, STRESS_LAST_ELIGIBLE_ROW);
    printf("stress: switch with a 200 ms create took %.0f ms; %llu selects answered "
           "by the old policy meanwhile; longest select %.3f ms (%llu preempted by the "
           "scheduler, longest %.3f ms)\n",
           (t1 - t0) * 1e3, (unsigned long long)(old1 - old0),
           (double)stress_pool_max_latency_ns(&pool, 0) / 1e6,
           (unsigned long long)stress_pool_preempted(&pool),
           (double)stress_pool_max_latency_ns(&pool, 1) / 1e6);

    assert_true(t1 - t0 >= 0.195);
    assert_int_equal(new0, 0);
    assert_true(old1 - old0 >= 1000);
    assert_true(new1 > new0);
    assert_int_equal(others, 0);
    assert_int_equal(stress_pool_fallbacks(&pool), 0);
    assert_true(stress_pool_max_latency_ns(&pool, 0) < max_latency_ns);

    wsel_host_destroy(host);
    wsel_table_buf_free(&buf);
    assert_int_equal(atomic_load(&logs.created), 2);
    assert_int_equal(atomic_load(&logs.destroyed), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_select_is_answered_while_switching_every_millisecond),
        cmocka_unit_test(test_a_slow_create_never_blocks_selects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
