// SPDX-License-Identifier: Apache-2.0
/*
 * test_adaptive.c -- the adaptive plugin: its TTFT model fits scripted
 * outcomes exactly (a line in the row's load, or a plane in the row's and
 * its worker's busiest rank's), weighs the worker's rank only where it
 * tells something beside the row's own load, forgets at the rate its
 * window says and keeps its setting in bounds; outcomes it did not route
 * (unknown id, another row, failed, unmeasured, repeated) teach it
 * nothing; the fitted setting moves the owner's load bound exactly where
 * the formula puts it (a tolerance, the learned weight of a worker's
 * busiest rank), and before the fit the bound is hysteresis's; the prefill
 * a spill would add widens the bound by exactly that many tokens
 * (spill_work 1), or not at all (0); a long prompt finds its own deepest
 * block;
 * its score ranks select's answer first; and four threads routing and
 * reporting at once keep it consistent.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "adaptive.h"
#include "harness.h"
#include "ttft_model.h"
#include "wsel.h"
#include "wsel_host.h"

#define SEED 20261130u

static void assert_close(double got, double want, double rel)
{
    if (!(fabs(got - want) <= rel * fabs(want))) {
        print_error("got %.17g, want %.17g (rel %g)\n", got, want, rel);
        fail();
    }
}

/* --- the model alone ------------------------------------------------------ */

static void test_the_model_fits_a_scripted_line_exactly(void **state)
{
    (void)state;
    ttft_model m;
    ttft_model_init(&m, 256);
    /* ttft = 1000 us + 2 us/token * P at P = 1000 and 3000, alternating,
     * on one-rank workers (G = P: nothing beside P, so no coupling). */
    for (int i = 0; i < 16; i++)
        ttft_model_add(&m, i % 2 ? 3000.0 : 1000.0, i % 2 ? 3000.0 : 1000.0,
                       i % 2 ? 7000.0 : 3000.0);
    double a, b, c, k, g;
    assert_int_equal(ttft_model_fit(&m, &a, &b, &c), 0);
    assert_close(a, 1000.0, 1e-9);
    assert_close(b, 2.0, 1e-12);
    assert_true(c == 0.0);
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_close(k, 500.0, 1e-9);
    assert_true(g == 0.0);
}

/* P and G on four corners, ttft = 1000 + 2 P + 0.5 G: the plane exactly. */
static void test_the_model_fits_a_worker_coupling_exactly(void **state)
{
    (void)state;
    static const double corner[4][2] = {
        {1000, 1000}, {3000, 3000}, {1000, 5000}, {3000, 5000}};
    ttft_model m;
    ttft_model_init(&m, 256);
    for (int i = 0; i < 32; i++) {
        double p = corner[i % 4][0], gw = corner[i % 4][1];
        ttft_model_add(&m, p, gw, 1000.0 + 2.0 * p + 0.5 * gw);
    }
    double a, b, c, k, g;
    assert_int_equal(ttft_model_fit(&m, &a, &b, &c), 0);
    assert_close(a, 1000.0, 1e-6);
    assert_close(b, 2.0, 1e-9);
    assert_close(c, 0.5, 1e-9);
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_close(k, 500.0, 1e-6);
    assert_close(g, 0.25, 1e-9);

    /* A busiest rank that shortens first tokens is no coupling: the line
     * in P alone (the one-regressor least squares on the same moments),
     * g = 0. Here ttft = 1000 + 2 P - 0.5 G, P and G independent. */
    static const double square[4][2] = {
        {1000, 1000}, {3000, 1000}, {1000, 5000}, {3000, 5000}};
    ttft_model_init(&m, 256);
    for (int i = 0; i < 32; i++) {
        double p = square[i % 4][0], gw = square[i % 4][1];
        ttft_model_add(&m, p, gw, 1000.0 + 2.0 * p - 0.5 * gw);
    }
    assert_int_equal(ttft_model_fit(&m, &a, &b, &c), 0);
    assert_true(c == 0.0);
    double line_b = (m.pt - m.p * m.t) / (m.pp - m.p * m.p);
    assert_close(b, line_b, 1e-12);
    assert_close(a, m.t - line_b * m.p, 1e-9);
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_true(g == 0.0);
}

static void test_the_model_waits_for_sixteen_outcomes_and_for_spread(void **state)
{
    (void)state;
    ttft_model m;
    ttft_model_init(&m, 8);
    for (int i = 0; i < 15; i++)
        ttft_model_add(&m, i % 2 ? 3000.0 : 1000.0, i % 2 ? 3000.0 : 1000.0,
                       i % 2 ? 7000.0 : 3000.0);
    double k = 0.0, g = 0.0;
    assert_int_equal(ttft_model_setting(&m, &k, &g),
                     -1); /* 15 < TTFT_MODEL_MIN_SAMPLES */
    ttft_model_add(&m, 3000.0, 3000.0, 7000.0);
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_close(k, 500.0, 1e-9);

    /* Every P the same: no slope to fit. */
    ttft_model_init(&m, 8);
    for (int i = 0; i < 32; i++)
        ttft_model_add(&m, 2000.0, 2000.0 + i, 1000.0 + i);
    assert_int_equal(ttft_model_setting(&m, &k, &g), -1);

    /* TTFT falling with P: not a queue, not used. */
    ttft_model_init(&m, 8);
    for (int i = 0; i < 32; i++)
        ttft_model_add(&m, i % 2 ? 3000.0 : 1000.0, 2000.0, i % 2 ? 1000.0 : 3000.0);
    assert_int_equal(ttft_model_setting(&m, &k, &g), -1);
}

static void test_the_model_ignores_values_that_are_not_times(void **state)
{
    (void)state;
    ttft_model m;
    ttft_model_init(&m, 4);
    ttft_model_add(&m, -1.0, 1.0, 10.0);
    ttft_model_add(&m, 1.0, -1.0, 10.0);
    ttft_model_add(&m, 1.0, 1.0, NAN);
    ttft_model_add(&m, INFINITY, 1.0, 10.0);
    ttft_model_add(&m, 1.0, NAN, 10.0);
    assert_int_equal(m.samples, 0);
}

static void test_the_newest_outcome_weighs_one_over_the_window(void **state)
{
    (void)state;
    ttft_model m;
    ttft_model_init(&m, 4);
    ttft_model_add(&m, 0.0, 0.0, 100.0); /* the first sets the moments */
    assert_true(m.t == 100.0);
    ttft_model_add(&m, 0.0, 0.0, 200.0); /* then each moves them by 1/4 */
    assert_true(m.t == 125.0);
    ttft_model_add(&m, 4.0, 8.0, 125.0);
    assert_true(m.t == 125.0);
    assert_true(m.p == 1.0);
    assert_true(m.pp == 4.0);
    assert_true(m.g == 2.0);
    assert_true(m.gg == 16.0);
    assert_true(m.pg == 8.0);
}

static void test_the_setting_follows_a_new_regime_and_stays_in_bounds(void **state)
{
    (void)state;
    ttft_model m;
    ttft_model_init(&m, 8);
    for (int i = 0; i < 32; i++) /* k = 1000 / 2 = 500 */
        ttft_model_add(&m, i % 2 ? 3000.0 : 1000.0, i % 2 ? 3000.0 : 1000.0,
                       1000.0 + 2.0 * (i % 2 ? 3000 : 1000));
    double k = 0.0, g = 0.0;
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_close(k, 500.0, 1e-9);
    /* A loaded cluster: the fixed part grows to 8000 us, k = 4000. After
     * 200 outcomes the old line weighs (7/8)^200 < 3e-12. */
    for (int i = 0; i < 200; i++)
        ttft_model_add(&m, i % 2 ? 3000.0 : 1000.0, i % 2 ? 3000.0 : 1000.0,
                       8000.0 + 2.0 * (i % 2 ? 3000 : 1000));
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_close(k, 4000.0, 1e-6);

    /* A negative intercept is no fixed part: k = 0, the lower bound. */
    for (int i = 0; i < 200; i++)
        ttft_model_add(&m, i % 2 ? 3000.0 : 1000.0, i % 2 ? 3000.0 : 1000.0,
                       -500.0 + 2.0 * (i % 2 ? 3000 : 1000));
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_true(k == 0.0);

    /* A fixed part worth more than 2^24 tokens is clamped there. */
    for (int i = 0; i < 200; i++)
        ttft_model_add(&m, i % 2 ? 3000.0 : 1000.0, i % 2 ? 3000.0 : 1000.0,
                       1e12 + 1e-3 * (i % 2 ? 3000 : 1000));
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_true(k == TTFT_MODEL_MAX_OVERHEAD);

    /* A coupling worth more than 64 tokens of the row's own each is
     * clamped there: ttft = 1000 + 1e-3 P + 1 G. */
    static const double corner[4][2] = {
        {1000, 1000}, {3000, 3000}, {1000, 5000}, {3000, 5000}};
    ttft_model_init(&m, 8);
    for (int i = 0; i < 32; i++)
        ttft_model_add(&m, corner[i % 4][0], corner[i % 4][1],
                       1000.0 + 1e-3 * corner[i % 4][0] + corner[i % 4][1]);
    assert_int_equal(ttft_model_setting(&m, &k, &g), 0);
    assert_true(g == TTFT_MODEL_MAX_COUPLING);
}

/* --- the plugin ----------------------------------------------------------- */

static void *create_default(void)
{
    return harness_create(NULL, NULL, 0);
}

/* Route request `id` (no block hashes, no affinity key: no owner) on a
 * table whose every row shows `tokens` prefill tokens; returns the row. */
static uint32_t route_plain(void *inst, harness_table *t, uint64_t id, uint64_t tokens)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++) {
        t->prefill_tokens[i] = tokens;
        t->cost[i] = 10.0;
    }
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, id, 0, NULL, 0);
    return harness_select(inst, &req, t);
}

static void report(void *inst, const harness_table *t, uint64_t id, uint32_t row,
                   uint64_t ttft_us, uint32_t flags)
{
    wsel_outcome o = {
        .struct_size = sizeof(wsel_outcome),
        .dp_rank = t->dp_rank[row],
        .request_id = id,
        .worker_id = t->worker_id[row],
        .ttft_us = ttft_us,
        .e2e_us = ttft_us + 1000,
        .prompt_tokens = 16,
        .flags = flags,
    };
    wsel_plugin_entry.on_request_outcome(inst, &o);
}

/* Teach `inst` ttft = a + 2 P with `n` routed requests from `first_id`,
 * P alternating 1000 / 3000: afterwards k = a / 2 (once the older
 * outcomes' weight is negligible). */
static void teach(void *inst, harness_table *t, uint64_t first_id, uint32_t n, double a)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t p = i % 2 ? 3000 : 1000;
        uint32_t row = route_plain(inst, t, first_id + i, p);
        report(inst, t, first_id + i, row, (uint64_t)(a + 2.0 * (double)p), 0);
    }
}

static void test_scripted_outcomes_set_the_overhead(void **state)
{
    (void)state;
    adaptive *a = create_default();
    harness_table *t = harness_table_uniform(2, 1);
    assert_true(adaptive_overhead(a) < 0.0); /* nothing learned yet */
    teach(a, t, 100, 16, 1000.0);
    assert_int_equal(adaptive_samples(a), 16);
    assert_close(adaptive_overhead(a), 500.0, 1e-9);
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);
}

static void test_outcomes_it_did_not_route_teach_nothing(void **state)
{
    (void)state;
    adaptive *a = create_default();
    harness_table *t = harness_table_uniform(2, 2);
    uint32_t row = route_plain(a, t, 7, 1000);
    uint32_t other = (row + 1) % t->table.num_rows;

    report(a, t, 8, row, 5000, 0);   /* an id never routed */
    report(a, t, 7, other, 5000, 0); /* routed, but to another row */
    report(a, t, 7, row, 5000, WSEL_OUTCOME_FAILED);
    report(a, t, 7, row, 0, 0); /* no TTFT measured */
    wsel_outcome short_one = {.struct_size = WSEL_OUTCOME_SIZE_1_1 - 8,
                              .request_id = 7,
                              .worker_id = t->worker_id[row],
                              .dp_rank = t->dp_rank[row],
                              .ttft_us = 5000};
    wsel_plugin_entry.on_request_outcome(a, &short_one); /* too short */
    assert_int_equal(adaptive_samples(a), 0);

    report(a, t, 7, row, 5000, 0); /* the real one, once */
    report(a, t, 7, row, 5000, 0); /* repeated: already taken */
    assert_int_equal(adaptive_samples(a), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);
}

/* One request with prefix blocks {1, 2}, routed on `t` as it is. */
static uint32_t route_prefix(void *inst, const harness_table *t, uint64_t id)
{
    static const uint64_t hashes[] = {0x1111, 0x2222};
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, id, 0, hashes, 2);
    return harness_select(inst, &req, t);
}

/* Every row at cost 10, no overlap, 1000 prefill tokens; the prefix
 * {1, 2} routed once (request 1): returns the row that now owns it. */
static uint32_t owner_on_even_rows(void *inst, harness_table *t)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++) {
        t->cost[i] = 10.0;
        t->overlap_blocks[i] = 0;
        t->prefill_tokens[i] = 1000;
    }
    return route_prefix(inst, t, 1);
}

/* Four one-rank rows, equal cost; the owner shows `owner_tokens`, the
 * others 1000 prefill tokens each. Returns where the prefix goes. */
static uint32_t route_with_owner_load(void *inst, harness_table *t, uint32_t owner,
                                      uint64_t owner_tokens, uint64_t id)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++) {
        t->cost[i] = 10.0;
        t->prefill_tokens[i] = i == owner ? owner_tokens : 1000;
    }
    return route_prefix(inst, t, id);
}

static void test_the_fitted_setting_bounds_the_owner_exactly(void **state)
{
    (void)state;
    /* tolerance 0.02 (the default is 0); window 2, so a new regime
     * replaces the old one within 40 outcomes (old weight 2^-40). */
    const char *names[] = {"window", "tolerance"};
    const double values[] = {2.0, 0.02};
    adaptive *a = harness_create(names, values, 2);
    harness_table *t = harness_table_uniform(4, 1);
    teach(a, t, 100, 16, 1000.0); /* k = 500 tokens */

    /* The owner keeps the prefix while P_owner - P_min <= 0.02 (k + P_min)
     * = 0.02 * 1500 = 30 tokens (one token either side of the bound: the
     * fit and 0.02 are exact only to rounding). */
    uint32_t owner = owner_on_even_rows(a, t);
    assert_int_equal(route_with_owner_load(a, t, owner, 1029, 2), owner);
    uint32_t moved = route_with_owner_load(a, t, owner, 1031, 3);
    assert_int_not_equal(moved, owner);

    /* A loaded cluster: k = 4000 tokens, the band 0.02 * 5000 = 100. */
    teach(a, t, 1000, 40, 8000.0);
    assert_close(adaptive_overhead(a), 4000.0, 1e-6);
    assert_int_equal(route_with_owner_load(a, t, moved, 1099, 4), moved);
    assert_int_not_equal(route_with_owner_load(a, t, moved, 1101, 5), moved);
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);
}

static void test_before_the_fit_the_bound_is_hysteresis_default(void **state)
{
    (void)state;
    const char *names[] = {"tolerance"};
    const double values[] = {0.02};
    adaptive *a = harness_create(names, values, 1);
    harness_table *t = harness_table_uniform(4, 1);
    uint32_t owner = owner_on_even_rows(a, t);
    /* Loads {1020, 1000, 1000, 1000}: mean 1005, bound 1000 + 0.5 * 5 =
     * 1002.5 < 1020: the owner is released; {1000 x 4}: kept. */
    assert_int_equal(route_with_owner_load(a, t, owner, 1000, 2), owner);
    uint32_t moved = route_with_owner_load(a, t, owner, 1020, 3);
    assert_int_not_equal(moved, owner);

    /* Fitted (k = 500, band 0.02 * 1500 = 30), the same 20 extra tokens
     * keep it. */
    teach(a, t, 100, 16, 1000.0);
    assert_int_equal(route_with_owner_load(a, t, moved, 1020, 4), moved);
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);

    /* The default, tolerance 0: fitted, the owner keeps a request only
     * while no candidate is less loaded (no cache, so no spill term). */
    a = create_default();
    t = harness_table_uniform(4, 1);
    teach(a, t, 100, 16, 1000.0);
    owner = owner_on_even_rows(a, t);
    assert_int_equal(route_with_owner_load(a, t, owner, 1000, 2), owner);
    assert_int_not_equal(route_with_owner_load(a, t, owner, 1001, 3), owner);
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);
}

/* The request with blocks {1, 2} (32 tokens), routed where row `cached`
 * holds both its blocks (its own prefill there: 0 tokens; elsewhere 32)
 * and every row's load is its backlog plus that prefill; the owner's
 * backlog is `owner_backlog`, the others' 1000. */
static uint32_t route_with_cache(void *inst, harness_table *t, uint32_t owner,
                                 uint64_t owner_backlog, uint64_t id)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++) {
        t->cost[i] = 10.0;
        t->overlap_blocks[i] = i == owner ? 2 : 0;
        t->prefill_tokens[i] =
            (i == owner ? owner_backlog : 1000) + (i == owner ? 0 : 32);
    }
    return route_prefix(inst, t, id);
}

static void test_the_work_a_spill_adds_widens_the_bound_exactly(void **state)
{
    (void)state;
    const char *names[] = {"window", "tolerance"};
    const double values[] = {2.0, 0.02};
    adaptive *a = harness_create(names, values, 2);
    harness_table *t = harness_table_uniform(4, 1);
    teach(a, t, 100, 16, 1000.0); /* k = 500 tokens */
    uint32_t owner = owner_on_even_rows(a, t);

    /* The owner caches the request's 32 tokens: P_owner = its backlog, P_min
     * = 1032 (u_min = 32, u_owner = 0). Bound: 1032 + 0.02 (500 + 1032) +
     * 1 x (32 - 0) = 1094.64 tokens. */
    assert_int_equal(route_with_cache(a, t, owner, 1094, 2), owner);
    /* The score agrees (it records nothing): inside the bound the owner
     * scores its cost less the band, outside its plain cost. */
    static const uint64_t hashes[] = {0x1111, 0x2222};
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, 9, 0, hashes, 2);
    double scores[4];
    assert_int_equal(wsel_plugin_entry.score(a, &req, &t->table, scores), 0);
    assert_true(scores[owner] == 10.0 - (1.0 * 10.0 + 64.0));
    t->prefill_tokens[owner] = 1095;
    assert_int_equal(wsel_plugin_entry.score(a, &req, &t->table, scores), 0);
    assert_true(scores[owner] == 10.0);
    assert_int_not_equal(route_with_cache(a, t, owner, 1095, 3), owner);

    /* spill_work 0: the request's own TTFT alone, 1032 + 30.64 = 1062.64. */
    const char *names0[] = {"window", "tolerance", "spill_work"};
    const double values0[] = {2.0, 0.02, 0.0};
    adaptive *b = harness_create(names0, values0, 3);
    teach(b, t, 100, 16, 1000.0);
    owner = owner_on_even_rows(b, t);
    assert_int_equal(route_with_cache(b, t, owner, 1062, 2), owner);
    assert_int_not_equal(route_with_cache(b, t, owner, 1063, 3), owner);

    /* The defaults (tolerance 0, spill_work 1): 1032 + 32 = 1064, exactly. */
    adaptive *c = create_default();
    teach(c, t, 100, 16, 1000.0);
    owner = owner_on_even_rows(c, t);
    assert_int_equal(route_with_cache(c, t, owner, 1064, 2), owner);
    assert_int_not_equal(route_with_cache(c, t, owner, 1065, 3), owner);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
    wsel_plugin_entry.destroy(b);
    wsel_plugin_entry.destroy(a);
}

/* Two workers of two ranks. Request i sets rank loads {P, S} on both
 * workers (P alternating 1000 / 3000, S cycling 1000, 3000, 5000 with
 * period 3, so P and G = max(P, S) are not collinear) and reports the
 * TTFT 1000 + 2 P + 2 G of the row it went to. */
static void teach_coupling(void *inst, harness_table *t, uint64_t first_id, uint32_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t p = i % 2 ? 3000 : 1000, s = 1000 + 2000 * (i % 3);
        for (uint32_t r = 0; r < t->table.num_rows; r++) {
            t->cost[r] = 10.0;
            t->prefill_tokens[r] = r % 2 ? s : p;
        }
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, SEED, first_id + i, 0, NULL, 0);
        uint32_t row = harness_select(inst, &req, t);
        double g = (double)(p > s ? p : s);
        report(inst, t, first_id + i, row,
               (uint64_t)(1000.0 + 2.0 * (double)t->prefill_tokens[row] + 2.0 * g), 0);
    }
}

static void test_a_worker_busy_elsewhere_releases_the_owner(void **state)
{
    (void)state;
    adaptive *a = create_default();
    harness_table *t = harness_table_uniform(2, 2);
    teach_coupling(a, t, 100, 64);
    assert_close(adaptive_coupling(a), 1.0, 1e-9); /* c / b = 2 / 2 */
    assert_close(adaptive_overhead(a), 500.0, 1e-6);

    /* The owner's own queue is the shortest (1000), but its worker's other
     * rank holds S: predicted, over b and less k, 1000 + S on the owner,
     * 1100 + 1100 on the other worker's ranks (no cache anywhere: no spill
     * term). Kept while 1000 + S <= 2200 (one token either side). */
    uint32_t owner = owner_on_even_rows(a, t);
    uint32_t sibling = owner ^ 1u;
    for (uint32_t r = 0; r < 4; r++) {
        /* Costs inside the dead band; released, the owner is not the
         * cheapest. */
        t->cost[r] = r == owner ? 11.0 : r == sibling ? 12.0 : 10.0;
        t->prefill_tokens[r] = r == owner ? 1000 : r == sibling ? 1199 : 1100;
    }
    assert_int_equal(route_prefix(a, t, 2), owner);
    t->prefill_tokens[sibling] = 1201;
    uint32_t moved = route_prefix(a, t, 3);
    assert_int_not_equal(moved, owner);
    assert_int_not_equal(moved, sibling);

    /* One-rank workers teach no coupling: G = P, the line alone. */
    adaptive *b = create_default();
    harness_table *t1 = harness_table_uniform(4, 1);
    teach(b, t1, 100, 16, 1000.0);
    assert_true(adaptive_coupling(b) == 0.0);
    harness_table_free(t1);
    wsel_plugin_entry.destroy(b);
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);
}

static void test_the_score_ranks_the_kept_owner_first(void **state)
{
    (void)state;
    adaptive *a = create_default();
    harness_table *t = harness_table_uniform(4, 1);
    for (uint32_t i = 0; i < 4; i++) {
        t->cost[i] = 10.0 + i;
        t->prefill_tokens[i] = 1000;
    }
    uint32_t owner = route_prefix(a, t, 1);
    assert_int_equal(owner, 0); /* the cheapest */
    t->cost[0] = 12.5;          /* inside the dead band, load equal */
    static const uint64_t hashes[] = {0x1111, 0x2222};
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, 2, 0, hashes, 2);
    double scores[4];
    assert_int_equal(wsel_plugin_entry.score(a, &req, &t->table, scores), 0);
    /* The owner's cost less the band: 12.5 - (1.0 * 11 + 64). */
    assert_true(scores[0] == 12.5 - 75.0);
    assert_true(scores[1] == 11.0 && scores[2] == 12.0 && scores[3] == 13.0);
    /* The score recorded nothing: select still answers the owner. */
    assert_int_equal(harness_select(a, &req, t), 0);
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);
}

/* Two agents share 128 blocks (past depth 64, where the recorded depths
 * thin out to every 2nd, 4th...) and then differ: each next step follows
 * its own previous step, not the shared prefix's last recipient. */
static void test_a_long_prompt_follows_its_own_deepest_block_past_depth_64(void **state)
{
    (void)state;
    adaptive *a = create_default();
    harness_table *t = harness_table_uniform(4, 1); /* loads all 0: in bound */
    uint64_t x[200], y[200];
    for (uint32_t j = 0; j < 128; j++)
        x[j] = y[j] = j + 1;
    for (uint32_t j = 128; j < 200; j++) {
        x[j] = 1000 + j;
        y[j] = 2000 + j;
    }
    wsel_request req;
    wsel_rng rng;
    for (uint32_t i = 0; i < 4; i++)
        t->cost[i] = i == 1 ? 0.0 : 100.0;
    harness_request(&req, &rng, SEED, 1, 0, x, 150);
    assert_int_equal(harness_select(a, &req, t), 1); /* agent X, step 1 */
    for (uint32_t i = 0; i < 4; i++)
        t->cost[i] = i == 2 ? 0.0 : 100.0;
    harness_request(&req, &rng, SEED, 2, 0, y, 150);
    assert_int_equal(harness_select(a, &req, t), 2); /* agent Y, step 1 */
    for (uint32_t i = 0; i < 4; i++)
        t->cost[i] = i == 3 ? 9.0 : 10.0; /* row 3 cheapest, all in the band */
    harness_request(&req, &rng, SEED, 3, 0, x, 200);
    assert_int_equal(harness_select(a, &req, t), 1); /* agent X, step 2 */
    harness_request(&req, &rng, SEED, 4, 0, y, 181);
    assert_int_equal(harness_select(a, &req, t), 2); /* agent Y, step 2 */
    harness_table_free(t);
    wsel_plugin_entry.destroy(a);
}

static void test_every_row_excluded_is_refused(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(6);
}

/* --- threads ------------------------------------------------------------- */

typedef struct worker_arg {
    adaptive *a;
    uint64_t first_id;
    uint32_t routed;
} worker_arg;

/* Each thread routes 2,000 requests on its own table (P alternating 1000
 * / 3000) and reports each one at once with ttft = 1000 + 2 P. */
static void *route_and_report(void *p)
{
    worker_arg *w = p;
    harness_table *t = harness_table_uniform(4, 2);
    for (uint32_t r = 0; r < t->table.num_rows; r++) /* rows no other thread has */
        t->worker_id[r] += w->first_id;
    for (uint64_t i = 0; i < 2000; i++) {
        uint64_t id = w->first_id + i, tokens = i % 2 ? 3000 : 1000;
        uint32_t row = route_plain(w->a, t, id, tokens);
        report(w->a, t, id, row, 1000 + 2 * tokens, 0);
        w->routed++;
    }
    harness_table_free(t);
    return NULL;
}

static void test_four_threads_routing_and_reporting_agree(void **state)
{
    (void)state;
    const char *names[] = {"pending"};
    const double values[] = {1048576.0};
    adaptive *a = harness_create(names, values, 1);
    pthread_t th[4];
    worker_arg w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker_arg){.a = a, .first_id = (uint64_t)i * 1000000u};
        assert_int_equal(pthread_create(&th[i], NULL, route_and_report, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    /* Each thread reports right after its select, so an outcome is lost
     * only when another thread's request in flight at that moment took the
     * same slot: at most one per pair of ids sharing one of the 2^20 slots,
     * about 8000^2 / 2 / 2^20 = 31 pairs whatever the schedule. Rows
     * differ between threads, so a torn slot never matches an outcome's
     * row: every outcome learned lies on the line. */
    uint64_t n = adaptive_samples(a);
    assert_true(n <= 8000 && n >= 7800);
    assert_close(adaptive_overhead(a), 500.0, 1e-6);
    wsel_plugin_entry.destroy(a);
}

/* Configured at temperature 5, a request whose override says 0 still gets
 * the cheapest row, loaded and called through libwsel-host. */
static void test_override_of_zero_beats_a_configured_temperature(void **state)
{
    (void)state;
    harness_expect_override_zero_is_cheapest("adaptive", "{\"temperature\": 5}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_model_fits_a_scripted_line_exactly),
        cmocka_unit_test(test_the_model_fits_a_worker_coupling_exactly),
        cmocka_unit_test(test_the_model_waits_for_sixteen_outcomes_and_for_spread),
        cmocka_unit_test(test_the_model_ignores_values_that_are_not_times),
        cmocka_unit_test(test_the_newest_outcome_weighs_one_over_the_window),
        cmocka_unit_test(test_the_setting_follows_a_new_regime_and_stays_in_bounds),
        cmocka_unit_test(test_scripted_outcomes_set_the_overhead),
        cmocka_unit_test(test_outcomes_it_did_not_route_teach_nothing),
        cmocka_unit_test(test_the_fitted_setting_bounds_the_owner_exactly),
        cmocka_unit_test(test_before_the_fit_the_bound_is_hysteresis_default),
        cmocka_unit_test(test_the_work_a_spill_adds_widens_the_bound_exactly),
        cmocka_unit_test(test_a_worker_busy_elsewhere_releases_the_owner),
        cmocka_unit_test(test_the_score_ranks_the_kept_owner_first),
        cmocka_unit_test(test_a_long_prompt_follows_its_own_deepest_block_past_depth_64),
        cmocka_unit_test(test_every_row_excluded_is_refused),
        cmocka_unit_test(test_four_threads_routing_and_reporting_agree),
        cmocka_unit_test(test_override_of_zero_beats_a_configured_temperature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
