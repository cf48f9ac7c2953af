// SPDX-License-Identifier: Apache-2.0
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
 * while selects go on. A second test shows that a switch whose create() is
 * held at a gate the test controls never holds up a select: every worker
 * answers selects with the old policy while create() is provably still
 * waiting, which no host that makes a select wait for a switch can do.
 *
 * WSEL_STRESS_SCALE scales the run (1.0 = 1,000,000 selects and 1,000
 * switches; the ThreadSanitizer run uses 0.05).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

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
/* Selects that answer nothing for this long are stuck, not slow: a ceiling
 * for a host that blocks, far above any preemption (tens of ms). */
#define STALL_LIMIT_S 60.0
/* Selects each worker must answer while a create() is held at the gate. */
#define GATED_SELECTS 1000u

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

/* A switch made on its own thread, whose create() may be held at a gate. */
typedef struct gated_switch {
    pthread_t thread;
    wsel_host *host;
    char path[1024];
    char config[128];
    char err[512];
    int32_t rc;
    atomic_int returned;
} gated_switch;

static void *gated_switch_main(void *arg)
{
    gated_switch *g = arg;

    g->rc = wsel_host_switch(g->host, g->path, g->config, g->err, sizeof g->err);
    atomic_store(&g->returned, 1);
    return NULL;
}

/* Let the held create() return (a byte on the gate) and wait for the switch. */
static void open_gate_and_join(gated_switch *g, int *gate)
{
    if (gate[1] >= 0) {
        while (write(gate[1], "", 1) < 0 && errno == EINTR)
            ;
        close(gate[1]);
        gate[1] = -1;
    }
    pthread_join(g->thread, NULL);
}

/* Whether every worker has answered at least `target[i]` selects. */
static int workers_reached(const stress_pool *pool, const uint64_t *target)
{
    for (uint32_t i = 0; i < pool->num_workers; i++)
        if (atomic_load(&pool->workers[i].done) < target[i])
            return 0;
    return 1;
}

static void test_a_slow_create_never_blocks_selects(void **state)
{
    /* Proved by order, not by a clock: stress_b's create() waits at a gate
     * (a pipe) until the test opens it, so the switch cannot finish before
     * then. Meanwhile each worker must answer GATED_SELECTS selects, all
     * by the old policy; a host whose selects waited for the switch would
     * answer none and stall (reported after STALL_LIMIT_S without an
     * answer, a ceiling for a hang that no preemption approaches). Then the
     * gate opens and the new policy takes over. */
    const double deadline = stress_now() + DEADLINE_S;
    stress_log_counts logs = {0};
    wsel_host_options opts;
    wsel_table_buf buf = {0};
    wsel_host *host = NULL;
    stress_pool pool;
    gated_switch sw = {0};
    int gate[2] = {-1, -1};
    uint64_t target[STRESS_MAX_WORKERS];
    uint64_t old0, old1, new0, new_held, new1, others, last_done;
    double t0, t1, t2, progress_at;
    int returned_while_held;

    (void)state;
    assert_int_equal(stress_table_build(&buf), 0);
    stress_host_options(&opts, &logs);
    assert_int_equal(wsel_host_create(&opts, &host), 0);
    switch_or_fail(host, "stress_a", "{\"pick\": \"first\"}");
    assert_int_equal(stress_pool_start(&pool, host, &buf.table, 2, 1), 0);
    wait_for_selects(&pool, 1000, deadline);

    /* The switch, held in create() at the gate. */
    assert_int_equal(pipe(gate), 0);
    sw.host = host;
    assert_int_equal(stress_plugin_path(sw.path, sizeof sw.path, "stress_b"), 0);
    snprintf(sw.config, sizeof sw.config, "{\"pick\": \"last\", \"gate_fd\": %d}",
             gate[0]);
    atomic_init(&sw.returned, 0);
    assert_int_equal(pthread_create(&sw.thread, NULL, gated_switch_main, &sw), 0);
    while (atomic_load(&logs.gated) == 0 && !atomic_load(&sw.returned))
        stress_sleep_us(500);
    if (atomic_load(&logs.gated) == 0) {
        open_gate_and_join(&sw, gate);
        fail_msg("the switch returned %s without reaching the gate: %s",
                 wsel_errname(sw.rc), sw.err);
    }

    /* create() is held: every worker answers GATED_SELECTS more selects. */
    t0 = stress_now();
    old0 = stress_pool_row_hits(&pool, STRESS_FIRST_ELIGIBLE_ROW);
    new0 = stress_pool_row_hits(&pool, STRESS_LAST_ELIGIBLE_ROW);
    for (uint32_t i = 0; i < pool.num_workers; i++)
        target[i] = atomic_load(&pool.workers[i].done) + GATED_SELECTS;
    last_done = stress_pool_done(&pool);
    progress_at = t0;
    while (!workers_reached(&pool, target) && !stress_pool_failure(&pool) &&
           stress_now() - progress_at < STALL_LIMIT_S) {
        uint64_t done = stress_pool_done(&pool);
        if (done != last_done) {
            last_done = done;
            progress_at = stress_now();
        }
        stress_sleep_us(500);
    }
    old1 = stress_pool_row_hits(&pool, STRESS_FIRST_ELIGIBLE_ROW);
    new_held = stress_pool_row_hits(&pool, STRESS_LAST_ELIGIBLE_ROW);
    returned_while_held = atomic_load(&sw.returned);
    t1 = stress_now();
    if (!workers_reached(&pool, target) && !stress_pool_failure(&pool)) {
        open_gate_and_join(&sw, gate);
        stress_pool_stop(&pool);
        fail_msg("while create() was held at the gate, no select was answered for "
                 "%.0f s (%llu in all): selects wait for the switch",
                 STALL_LIMIT_S, (unsigned long long)(old1 - old0));
    }

    /* Open the gate: the switch completes and the new policy takes over. */
    open_gate_and_join(&sw, gate);
    t2 = stress_now();
    close(gate[0]);
    if (sw.rc != 0)
        fail_msg("switch to stress_b failed: %s (%s)", wsel_errname(sw.rc), sw.err);
    do {
        new1 = stress_pool_row_hits(&pool, STRESS_LAST_ELIGIBLE_ROW);
        stress_sleep_us(1000);
    } while (new1 == new0 && !stress_pool_failure(&pool) && stress_now() < deadline);
    stress_pool_stop(&pool);
    assert_no_bad_answer(&pool);

    others = stress_pool_done(&pool) -
             stress_pool_row_hits(&pool, STRESS_FIRST_ELIGIBLE_ROW) -
             stress_pool_row_hits(&pool, STRESS_LAST_ELIGIBLE_ROW);
    printf("stress: create held at the gate for %.0f ms; %llu selects answered by "
           "the old policy meanwhile (%u per worker required); the switch returned "
           "%.2f ms after the gate opened; longest select %.3f ms (%llu preempted by "
           "the scheduler, longest %.3f ms)\n",
           (t1 - t0) * 1e3, (unsigned long long)(old1 - old0), GATED_SELECTS,
           (t2 - t1) * 1e3, (double)stress_pool_max_latency_ns(&pool, 0) / 1e6,
           (unsigned long long)stress_pool_preempted(&pool),
           (double)stress_pool_max_latency_ns(&pool, 1) / 1e6);

    /* The switch was still inside create() when the selects were counted. */
    assert_int_equal(returned_while_held, 0);
    assert_int_equal(atomic_load(&logs.gated), 1);
    assert_int_equal(new0, 0);
    assert_int_equal(new_held, 0);
    assert_true(old1 - old0 >= (uint64_t)GATED_SELECTS * pool.num_workers);
    assert_true(new1 > new0);
    assert_int_equal(others, 0);
    assert_int_equal(stress_pool_fallbacks(&pool), 0);

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
