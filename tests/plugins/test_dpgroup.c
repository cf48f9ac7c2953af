// SPDX-License-Identifier: Apache-2.0
/*
 * test_dpgroup.c -- the dpgroup plugin: a data-parallel worker is scored by
 * its busiest rank, so it gets its fair share of traffic but never while its
 * busiest rank leads; a saturated rank shields its idle siblings; blend
 * mode follows its formula; lockstep mode charges a row the wait on its
 * worker's shared steps and half its own and half its worker's decode load,
 * and is Dynamo's cost on a one-rank worker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "wsel.h"
#include "wsel_host.h"

#define SEED 77u

/* A two-level instance (the default before lockstep became it). */
static void *two_level_create(void)
{
    const char *names[] = {"mode"};
    const double values[] = {0.0};
    return harness_create(names, values, 1);
}

/* 0 = the rank-level baseline (softmax at T = 0 on the default cost),
 * otherwise a dpgroup instance. */
static uint32_t decide(void *d, const harness_table *t, uint64_t request_id)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, request_id, 0, NULL, 0);
    if (d != NULL)
        return harness_select(d, &req, t);
    uint32_t row;
    assert_int_equal(wsel_softmax_sample(t->table.cost, t->flags, t->table.num_rows,
                                         WSEL_ROW_EXCLUDED, 0.0, req.uniform, &row),
                     0);
    return row;
}

/* Each request is one block with nothing to prefill: decode_blocks is the
 * rank's load + 1, and the default cost equals it. */
static void set_loads(harness_table *t, const uint64_t *load)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++) {
        t->decode_blocks[i] = load[i] + 1;
        t->prefill_tokens[i] = 0;
        t->cost[i] = (double)t->decode_blocks[i];
    }
}

typedef struct stream_result {
    uint32_t to_wide;        /* requests sent to the 8-rank worker */
    uint32_t while_it_leads; /* ... while its busiest rank exceeded the
                                least-loaded 1-rank worker */
    uint64_t widest_spread;  /* max over steps of (max load - min load) */
} stream_result;

#define STREAM 16000u

/* Rows 0..7: worker 0 (8 ranks); rows 8..15: workers 1..8 (1 rank each). */
static stream_result run_stream(void *d)
{
    static const uint32_t dp[9] = {8, 1, 1, 1, 1, 1, 1, 1, 1};
    harness_table *t = harness_table_new(9, dp);
    uint64_t load[16] = {0};
    stream_result res = {0, 0, 0};
    for (uint32_t n = 0; n < STREAM; n++) {
        set_loads(t, load);
        uint32_t row = decide(d, t, n);
        uint64_t wide_max = 0, narrow_min = UINT64_MAX;
        for (uint32_t i = 0; i < 16; i++) {
            if (i < 8 && load[i] > wide_max)
                wide_max = load[i];
            if (i >= 8 && load[i] < narrow_min)
                narrow_min = load[i];
        }
        if (row < 8) {
            res.to_wide++;
            res.while_it_leads += wide_max > narrow_min;
        }
        load[row]++;
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t i = 0; i < 16; i++) {
            lo = load[i] < lo ? load[i] : lo;
            hi = load[i] > hi ? load[i] : hi;
        }
        if (hi - lo > res.widest_spread)
            res.widest_spread = hi - lo;
    }
    harness_table_free(t);
    return res;
}

/*
 * One 8-rank worker and eight 1-rank workers, equal per-rank load, 16,000
 * one-block requests. The 8-rank worker has 8 of the 16 ranks, so its fair
 * share is exactly 1/2: balanced lockstep ranks cost no capacity.
 *
 * Rank-level argmin keeps every rank within 1 of the others, so after 1,000
 * rounds of 16 the wide worker has exactly 8,000. But it is fed whenever one
 * of its ranks is at the minimum, even while another of its ranks is
 * already above a 1-rank worker. Within a round (all 16 ranks at level L,
 * visited in uniformly random order) a request to the wide worker is sent
 * "while it leads" unless it is the first of its 8 in the round or comes
 * after the last 1-rank worker: E = 8 - (1 + 8/9 - 1/C(16,8)) = 6.1111 per
 * round, 6,111 in 1,000 rounds. Each round contributes a value in [0, 7],
 * variance <= 49/4, so sigma <= 3.5 * sqrt(1000) = 111; 5 sigma = 553.
 *
 * dpgroup (max) takes the wide worker only when its busiest rank is at most
 * the least-loaded 1-rank worker, so "while it leads" is 0 by construction.
 * Every increment lands on a rank at most 1 above the global minimum (the
 * chosen single is <= every single and <= the wide worker's max, which is
 * <= its min + 1; the chosen wide rank is the global minimum), so loads stay
 * within 2 of each other; pairing the 8 wide ranks with the 8 singles then
 * puts the wide worker's count within 8 of 8,000. Its share is 1/2 too.
 *
 * aggregate = sum, by contrast, treats a worker as one unit: it scores the
 * wide worker W + 8 (W = its requests) against s_i + 1 for each single. A
 * single is fed only while s_i <= W + 7 and the wide worker only while
 * W <= min s - 7, so at the end W + 6 <= s_i <= W + 8, and with
 * W + sum s_i = 16,000: 9 W in [16,000 - 64, 16,000 - 48], W in {1771, 1772},
 * a share of 1/9: the wide worker is starved of 7/8 of its capacity.
 */
static void test_a_wide_worker_gets_its_fair_share_but_never_while_its_busiest_rank_leads(
    void **state)
{
    (void)state;
    stream_result rank_level = run_stream(NULL);
    assert_int_equal(rank_level.to_wide, 8000);
    assert_in_range(rank_level.while_it_leads, 6111 - 553, 6111 + 553);
    print_message("rank-level: wide worker %u/16000, %u while its busiest rank led\n",
                  rank_level.to_wide, rank_level.while_it_leads);

    void *d = two_level_create();
    stream_result group = run_stream(d);
    wsel_plugin_entry.destroy(d);
    print_message("dpgroup max: wide worker %u/16000, %u while its busiest rank led, "
                  "spread %u\n",
                  group.to_wide, group.while_it_leads, (unsigned)group.widest_spread);
    assert_int_equal(group.while_it_leads, 0);
    assert_true(group.widest_spread <= 2);
    assert_in_range(group.to_wide, 8000 - 8, 8000 + 8);

    const char *names[] = {"mode", "aggregate"};
    const double sum[] = {0, 2};
    d = harness_create(names, sum, 2);
    stream_result summed = run_stream(d);
    wsel_plugin_entry.destroy(d);
    print_message("dpgroup sum: wide worker %u/16000\n", summed.to_wide);
    assert_in_range(summed.to_wide, 1771, 1772);
}

static void
test_a_worker_with_one_saturated_rank_is_avoided_though_its_others_idle(void **state)
{
    (void)state;
    static const uint32_t dp[5] = {8, 1, 1, 1, 1};
    harness_table *t = harness_table_new(5, dp);
    uint64_t load[12] = {1000, 0, 0, 0, 0, 0, 0, 0, 100, 100, 100, 100};
    set_loads(t, load);
    void *d = two_level_create();
    for (uint64_t n = 0; n < 200; n++) {
        assert_in_range(decide(NULL, t, n), 1, 7); /* the baseline walks in */
        assert_in_range(decide(d, t, n), 8, 11);
    }
    /* Once the others are as busy as the saturated rank, it is fair game. */
    for (uint32_t i = 8; i < 12; i++)
        load[i] = 1001;
    set_loads(t, load);
    assert_in_range(decide(d, t, 1), 1, 7);
    wsel_plugin_entry.destroy(d);
    harness_table_free(t);
}

static void test_the_worker_score_adds_the_prefill_of_its_best_overlap_rank(void **state)
{
    (void)state;
    static const uint32_t dp[2] = {2, 1};
    harness_table *t = harness_table_new(2, dp);
    /* Worker 0: rank 1 holds the prefix (nothing to prefill), max load 20.
     * Worker 1: load 10 but 256 tokens / 16 = 16 blocks to prefill: 26. */
    const uint64_t decode[3] = {20, 18, 10};
    const uint64_t prefill[3] = {256, 0, 256};
    const uint32_t overlap[3] = {0, 16, 0};
    for (uint32_t i = 0; i < 3; i++) {
        t->decode_blocks[i] = decode[i];
        t->prefill_tokens[i] = prefill[i];
        t->overlap_blocks[i] = overlap[i];
    }
    harness_table_default_costs(t, 1.0, 16);
    void *d = two_level_create();
    assert_int_equal(decide(d, t, 1), 1);
    /* Without the prefix, worker 0 scores 20 + 16 = 36 > 26. */
    t->overlap_blocks[1] = 0;
    t->prefill_tokens[1] = 256;
    harness_table_default_costs(t, 1.0, 16);
    assert_int_equal(decide(d, t, 2), 2);
    wsel_plugin_entry.destroy(d);
    harness_table_free(t);
}

static void test_the_mean_aggregate_lets_one_hot_rank_hide_among_idle_ones(void **state)
{
    (void)state;
    static const uint32_t dp[2] = {4, 1};
    harness_table *t = harness_table_new(2, dp);
    uint64_t load[5] = {49, 0, 0, 0, 19}; /* worker 0: max 50, mean 12.5; worker 1: 20 */
    set_loads(t, load);
    const char *names[] = {"mode", "aggregate"};
    const double mean[] = {0, 1};
    void *by_max = two_level_create();
    void *by_mean = harness_create(names, mean, 2);
    assert_int_equal(decide(by_max, t, 1), 4);
    assert_in_range(decide(by_mean, t, 1), 1, 3);
    wsel_plugin_entry.destroy(by_max);
    wsel_plugin_entry.destroy(by_mean);
    harness_table_free(t);
}

/* Worker 0: ranks with decode {10, 50}, cost {12, 51}, mean load 30.
 * Worker 1: one rank, decode 18, cost 20, mean 18.
 * Scores cost + alpha * mean: row 0 = 12 + 30 a, row 1 = 51 + 30 a,
 * row 2 = 20 + 18 a. Rows 0 and 2 cross at a = 8 / 12 = 2/3. */
static void
test_blend_adds_alpha_times_the_worker_mean_load_to_each_rank_cost(void **state)
{
    (void)state;
    static const uint32_t dp[2] = {2, 1};
    harness_table *t = harness_table_new(2, dp);
    const uint64_t decode[3] = {10, 50, 18};
    const double cost[3] = {12, 51, 20};
    memcpy(t->decode_blocks, decode, sizeof(decode));
    memcpy(t->cost, cost, sizeof(cost));
    const struct {
        double alpha;
        uint32_t row;
    } cases[] = {{0.0, 0}, {0.5, 0}, {0.6, 0}, {0.7, 2}, {1.0, 2}, {100.0, 2}};
    const char *names[] = {"mode", "alpha"};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const double values[] = {1, cases[c].alpha};
        void *d = harness_create(names, values, 2);
        assert_int_equal(decide(d, t, c), cases[c].row);
        wsel_plugin_entry.destroy(d);
    }
    /* An exact tie (in binary too): with row 2 at cost 21 and a = 0.75,
     * 12 + 22.5 = 34.5 = 21 + 13.5; both rows must come up. */
    t->cost[2] = 21.0;
    const double tie[] = {1, 0.75};
    void *d = harness_create(names, tie, 2);
    uint32_t seen = 0;
    for (uint64_t n = 0; n < 64; n++)
        seen |= 1u << decide(d, t, n);
    assert_int_equal(seen, 0x5);
    wsel_plugin_entry.destroy(d);
    harness_table_free(t);
}

/* Lockstep mode with token_budget `budget` (0 = its default). */
static void *lockstep_create(double budget)
{
    const char *names[] = {"mode", "token_budget"};
    const double values[] = {2, budget};
    return harness_create(names, values, budget > 0 ? 2 : 1);
}

/* A request of `blocks` blocks of 16 tokens (isl = 16 * blocks). */
static uint32_t decide_blocks(void *d, const harness_table *t, uint64_t request_id,
                              uint32_t blocks)
{
    static const uint64_t hashes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_true(blocks <= 8);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, request_id, 0, hashes, blocks);
    return harness_select(d, &req, t);
}

/* Fills row i from what it holds besides the request (backlog tokens,
 * active blocks) and the request's overlap there, for a request of `blocks`
 * blocks of 16 tokens, the way the router's predictive load counts it. */
static void set_row(harness_table *t, uint32_t i, uint64_t backlog, uint64_t active,
                    uint32_t overlap, uint32_t blocks)
{
    t->overlap_blocks[i] = overlap;
    t->prefill_tokens[i] = backlog + 16u * (blocks - overlap);
    t->decode_blocks[i] = active + (blocks - overlap);
}

/*
 * Worker 0: rank 0 has 4,096 tokens queued and 10 active blocks; rank 1 is
 * idle and caches 2 of the request's 4 blocks. Worker 1: one rank, B
 * tokens queued, 6 active blocks. Request: 4 blocks (64 tokens). L_0 = 4096.
 *   row 0: (4096 + 0 + 64) / 16 + (14 + max(14, 0)) / 2  = 260 + 14 = 274
 *   row 1: (4096 + 0 + 32) / 16 + (2 + max(2, 10)) / 2   = 258 + 6 = 264
 *   row 2: (B + 64) / 16 + (10 + 10) / 2                 = (B + 64) / 16 + 10
 * so the idle sibling pays its worker's step: row 2 wins below B = 4000,
 * ties at it (exact in binary: every value is a multiple of 1/16), loses
 * above. Dynamo's cost sees row 1 at 32 / 16 + 2 = 4 and always takes it.
 */
static void test_lockstep_charges_an_idle_rank_its_worker_s_step(void **state)
{
    (void)state;
    static const uint32_t dp[2] = {2, 1};
    harness_table *t = harness_table_new(2, dp);
    set_row(t, 0, 4096, 10, 0, 4);
    set_row(t, 1, 0, 0, 2, 4);
    void *d = lockstep_create(0);
    wsel_request req;
    wsel_rng rng;
    const struct {
        uint64_t backlog;
        uint32_t seen; /* rows that must come up, as a bit set */
    } cases[] = {{0, 0x4}, {3984, 0x4}, {4000, 0x6}, {4016, 0x2}, {8000, 0x2}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        set_row(t, 2, cases[c].backlog, 6, 0, 4);
        harness_table_default_costs(t, 1.0, 16);
        harness_request(&req, &rng, SEED, 0, 0, NULL, 0);
        uint32_t base;
        assert_int_equal(wsel_softmax_sample(t->table.cost, t->flags, t->table.num_rows,
                                             WSEL_ROW_EXCLUDED, 0.0, req.uniform, &base),
                         0);
        assert_int_equal(base, 1);
        uint32_t seen = 0;
        for (uint64_t n = 0; n < 64; n++)
            seen |= 1u << decide_blocks(d, t, n, 4);
        assert_int_equal(seen, cases[c].seen);
    }
    wsel_plugin_entry.destroy(d);
    harness_table_free(t);
}

/* One-rank workers with backlogs within the budget: the lockstep score is
 * Dynamo's cost, so lockstep's choice has the least cost, rows without a
 * load record (Dynamo's defaults) included. 500 random tables, seeded. */
static void test_lockstep_on_one_rank_workers_picks_dynamo_s_argmin(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(16, NULL);
    void *d = lockstep_create(0);
    wsel_rng rng;
    wsel_rng_seed(&rng, SEED);
    for (uint64_t n = 0; n < 500; n++) {
        uint32_t blocks = 1 + wsel_rng_below(&rng, 8);
        for (uint32_t i = 0; i < 16; i++) {
            t->flags[i] = wsel_rng_below(&rng, 8) == 0 ? WSEL_ROW_NO_LOAD : 0;
            uint64_t backlog = wsel_rng_below(&rng, 8193);
            uint64_t active = wsel_rng_below(&rng, 200);
            set_row(t, i, backlog, active, wsel_rng_below(&rng, blocks + 1), blocks);
            if (t->flags[i] & WSEL_ROW_NO_LOAD) {
                t->prefill_tokens[i] = 16u * blocks;
                t->decode_blocks[i] = blocks;
            }
        }
        harness_table_default_costs(t, 1.0, 16);
        double least = t->cost[0];
        for (uint32_t i = 1; i < 16; i++)
            least = t->cost[i] < least ? t->cost[i] : least;
        assert_true(t->cost[decide_blocks(d, t, n, blocks)] == least);
    }
    wsel_plugin_entry.destroy(d);
    harness_table_free(t);
}

/*
 * One-block requests (16 tokens), nothing active (decode 1 everywhere).
 * Worker 0: rank 0 has 10,000 tokens queued, rank 1 none; worker 1: one
 * rank with 9,500. With budget b, for b <= 9,500:
 *   row 0: (b + (10000 - b) + 16) / 16 + 1 = 627       (its own excess)
 *   row 1: (b + 0 + 16) / 16 + 1                       (one step only)
 *   row 2: (b + (9500 - b) + 16) / 16 + 1 = 595.75
 * so row 1 wins (b = 8192: 514); with row 1 excluded row 2 beats row 0: the
 * excess stays on its own rank. Once b >= 10,000 the idle sibling pays the
 * whole backlog, 627, and row 2 wins.
 */
static harness_table *budget_table(void)
{
    static const uint32_t dp[2] = {2, 1};
    harness_table *t = harness_table_new(2, dp);
    set_row(t, 0, 10000, 0, 0, 1);
    set_row(t, 1, 0, 0, 0, 1);
    set_row(t, 2, 9500, 0, 0, 1);
    return t;
}

static void test_lockstep_charges_a_backlog_over_the_budget_only_to_its_rank(void **state)
{
    (void)state;
    harness_table *t = budget_table();
    void *by_default = lockstep_create(0);
    void *wide = lockstep_create(16384);
    assert_int_equal(decide_blocks(by_default, t, 1, 1), 1);
    assert_int_equal(decide_blocks(wide, t, 1, 1), 2);
    t->flags[1] = WSEL_ROW_EXCLUDED;
    assert_int_equal(decide_blocks(by_default, t, 1, 1), 2);
    wsel_plugin_entry.destroy(by_default);
    wsel_plugin_entry.destroy(wide);
    harness_table_free(t);
}

/*
 * The two-stage choice. Two one-rank workers, a request of 4 blocks (64
 * tokens), cached nowhere. Row 0 has X tokens queued and nothing active;
 * row 1 nothing queued and 2,000 active blocks. Waits: row 0 X + 64 (its
 * backlog is its worker's step and the rest of its own), row 1 64; the
 * band ends one budget (8,192) after the least: 8,256. Lockstep scores:
 *   row 0: (X + 64) / 16 + 4          row 1: 64 / 16 + 2004 = 2008
 * so row 0 scores lower for every X below 32,000, but it is in the band
 * only up to X = 8,192: there row 0 wins (X = 8,192: 520), at X = 8,208
 * (score 521) row 1 does. The score function orders rows the same way: a
 * row outside the band scores the band's highest score (2008) + 1 + its
 * own: X = 8,208 gives row 0 2008 + 1 + 521 = 2530.
 */
static void
test_lockstep_keeps_a_request_within_one_step_of_the_shortest_wait(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(2, NULL);
    void *d = lockstep_create(0);
    set_row(t, 1, 0, 2000, 0, 4);
    const struct {
        uint64_t backlog;
        uint32_t row;
        double score0;
    } cases[] = {{0, 0, 8.0}, {8192, 0, 520.0}, {8208, 1, 2530.0}, {20000, 1, 3267.0}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        set_row(t, 0, cases[c].backlog, 0, 0, 4);
        harness_table_default_costs(t, 1.0, 16);
        assert_int_equal(decide_blocks(d, t, c, 4), cases[c].row);
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, SEED, c, 0, NULL, 0);
        req.isl_tokens = 64;
        double scores[2];
        assert_int_equal(wsel_plugin_entry.score(d, &req, &t->table, scores), 0);
        assert_true(scores[0] == cases[c].score0);
        assert_true(scores[1] == 2008.0);
    }
    /* Row 1 excluded: the band is taken over row 0 alone, which is then in it. */
    t->flags[1] = WSEL_ROW_EXCLUDED;
    assert_int_equal(decide_blocks(d, t, 9, 4), 0);
    wsel_plugin_entry.destroy(d);
    harness_table_free(t);
}

/*
 * The decode part is half the rank's own load and half its worker's pace.
 * Request: 4 blocks (64 tokens), cached nowhere, nothing queued, so every
 * row's prefill part is 64 / 16 = 4. Active blocks: worker 0 (rows 0, 1)
 * 200 and 0; worker 1 (rows 2, 3) 60 and 30; worker 2 (row 4) 50.
 *   row 0: 4 + (204 + 204) / 2 = 208     row 1: 4 + (4 + 200) / 2 = 106
 *   row 2: 4 + (64 + 64) / 2   = 68      row 3: 4 + (34 + 60) / 2 = 51
 *   row 4: 4 + (54 + 54) / 2   = 58
 * so row 3 wins. Dynamo's cost (own load only) takes row 1 (8), the idle
 * rank of the worker whose busiest rank paces every step; the pace alone
 * (row 1: 204, row 3: 64, row 4: 58) would take row 4 and leave row 3's
 * room unused.
 */
static void
test_lockstep_weighs_a_rank_s_own_load_and_its_worker_s_pace_equally(void **state)
{
    (void)state;
    static const uint32_t dp[3] = {2, 2, 1};
    harness_table *t = harness_table_new(3, dp);
    const uint64_t active[5] = {200, 0, 60, 30, 50};
    for (uint32_t i = 0; i < 5; i++)
        set_row(t, i, 0, active[i], 0, 4);
    harness_table_default_costs(t, 1.0, 16);
    void *d = lockstep_create(0);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, 1, 0, NULL, 0);
    uint32_t base;
    assert_int_equal(wsel_softmax_sample(t->table.cost, t->flags, t->table.num_rows,
                                         WSEL_ROW_EXCLUDED, 0.0, req.uniform, &base),
                     0);
    assert_int_equal(base, 1);
    req.isl_tokens = 64;
    double scores[5];
    assert_int_equal(wsel_plugin_entry.score(d, &req, &t->table, scores), 0);
    const double want[5] = {208.0, 106.0, 68.0, 51.0, 58.0};
    for (uint32_t i = 0; i < 5; i++)
        assert_true(scores[i] == want[i]);
    assert_int_equal(decide_blocks(d, t, 2, 4), 3);
    wsel_plugin_entry.destroy(d);
    harness_table_free(t);
}

/* token_budget is appended (old configs map as before), an INT in
 * [1, 1,048,576], default 8,192; lockstep is the third mode. Both bounds
 * create, and behave as the budget table above predicts. */
static void test_token_budget_is_accepted_at_both_bounds(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_int_equal(p->num_params, 4);
    assert_string_equal(p->params[0].choices[2], "lockstep");
    assert_null(p->params[0].choices[3]);
    /* lockstep (2) is the default: see docs/policies.md, "Which mode". */
    assert_true(p->params[0].default_value == 2.0 && p->params[0].max_value == 2.0);
    const wsel_param_def *budget = &p->params[3];
    assert_string_equal(budget->name, "token_budget");
    assert_int_equal(budget->type, WSEL_PARAM_INT);
    assert_true(budget->default_value == 8192.0);
    assert_true(budget->min_value == 1.0 && budget->max_value == 1048576.0);

    harness_table *t = budget_table();
    void *low = lockstep_create(1);
    void *high = lockstep_create(1048576);
    assert_int_equal(decide_blocks(low, t, 1, 1), 1);
    assert_int_equal(decide_blocks(high, t, 1, 1), 2);
    wsel_plugin_entry.destroy(low);
    wsel_plugin_entry.destroy(high);
    harness_table_free(t);
}

static void test_excluded_and_busy_ranks_are_skipped(void **state)
{
    (void)state;
    static const uint32_t dp[3] = {2, 2, 1};
    harness_table *t = harness_table_new(3, dp);
    uint64_t load[5] = {0, 0, 5, 5, 9};
    set_loads(t, load);
    void *two_level = two_level_create();
    const char *names[] = {"mode"};
    const double blend[] = {1};
    void *blended = harness_create(names, blend, 1);
    void *lockstep = lockstep_create(0);

    t->flags[0] = WSEL_ROW_EXCLUDED;
    t->flags[1] = WSEL_ROW_BUSY;
    assert_in_range(decide(two_level, t, 1), 2, 3);
    assert_in_range(decide(blended, t, 1), 2, 3);
    assert_in_range(decide(lockstep, t, 1), 2, 3);

    /* Every eligible row busy: busy rows are candidates again. */
    memset(t->flags, WSEL_ROW_BUSY, 5);
    t->flags[0] = WSEL_ROW_EXCLUDED;
    assert_int_equal(decide(two_level, t, 2), 1);
    assert_int_equal(decide(blended, t, 2), 1);
    assert_int_equal(decide(lockstep, t, 2), 1);

    memset(t->flags, WSEL_ROW_EXCLUDED, 5);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, 3, 0, NULL, 0);
    wsel_choice choice = {.struct_size = sizeof(choice), .row = 99};
    assert_int_equal(wsel_plugin_entry.select(two_level, &req, &t->table, &choice),
                     WSEL_ENOCANDIDATE);
    assert_int_equal(wsel_plugin_entry.select(blended, &req, &t->table, &choice),
                     WSEL_ENOCANDIDATE);
    assert_int_equal(wsel_plugin_entry.select(lockstep, &req, &t->table, &choice),
                     WSEL_ENOCANDIDATE);
    assert_int_equal(choice.row, 99);
    wsel_plugin_entry.destroy(two_level);
    wsel_plugin_entry.destroy(blended);
    wsel_plugin_entry.destroy(lockstep);
    harness_table_free(t);
}

/*
 * Select lands on a row with the least score of the score function, on
 * tables whose waits shrink along the rows and on shuffled ones, workers
 * of 1 to 70 ranks (past the 64 whose loads a pass keeps on the stack).
 */
static void test_the_choice_has_the_least_score_on_sorted_and_shuffled_tables(
    void **state)
{
    (void)state;
    void *d = harness_create(NULL, NULL, 0);
    wsel_rng gen;
    wsel_rng_seed(&gen, 77);
    for (uint32_t round = 0; round < 24; round++) {
        uint32_t dp[40];
        for (uint32_t w = 0; w < 40; w++)
            dp[w] = round % 3 == 2 && w == 5 ? 70 : 1 + (uint32_t)wsel_rng_below(&gen, 8);
        harness_table *t = harness_table_new(40, dp);
        uint32_t n = t->table.num_rows;
        for (uint32_t i = 0; i < n; i++) {
            uint64_t spread = round % 2 ? (uint64_t)(n - i) * 900 : wsel_rng_below(&gen, 40000);
            t->prefill_tokens[i] = spread + wsel_rng_below(&gen, 600);
            t->decode_blocks[i] = wsel_rng_below(&gen, 5000);
            t->overlap_blocks[i] = (uint32_t)wsel_rng_below(&gen, 4);
            t->flags[i] = i % 13 == 4 ? WSEL_ROW_EXCLUDED : 0;
        }
        harness_table_default_costs(t, 1.0, 16);
        double scores[4096];
        for (uint64_t id = 1; id <= 8; id++) {
            wsel_request req;
            wsel_rng rng;
            harness_request(&req, &rng, SEED, id, 0, NULL, 0);
            req.isl_tokens = 16 * (1 + wsel_rng_below(&gen, 64));
            uint32_t row = harness_select(d, &req, t);
            assert_int_equal(wsel_plugin_entry.score(d, &req, &t->table, scores), 0);
            for (uint32_t i = 0; i < n; i++)
                if ((t->flags[i] & WSEL_ROW_EXCLUDED) == 0)
                    assert_true(scores[row] <= scores[i]);
        }
        harness_table_free(t);
    }
    wsel_plugin_entry.destroy(d);
}

/* The reservoir tie-break over every eligible row in row order, scores
 * from the score function: what a select reading every row answers, and
 * the draws it takes from `rng`. */
static uint32_t pick_over_every_row(const double *scores, const uint8_t *flags, uint32_t n,
                                    wsel_rng *rng)
{
    double best = 0.0;
    uint32_t ties = 0, pick = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (flags[i] & (WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY))
            continue;
        if (ties == 0 || scores[i] < best) {
            best = scores[i];
            ties = 1;
            pick = i;
        } else if (scores[i] == best) {
            ties++;
            if ((((wsel_rng_u64(rng) >> 32) * ties) >> 32) == 0)
                pick = i;
        }
    }
    return pick;
}

/* Select on t answers, and draws from *rng (req's stream), as
 * pick_over_every_row over the plugin's scores does. */
static void answers_as_every_row(void *d, const wsel_request *req, wsel_rng *rng,
                                 const harness_table *t, double *scores)
{
    wsel_rng again = *rng;
    uint32_t row = harness_select(d, req, t);
    assert_int_equal(wsel_plugin_entry.score(d, req, &t->table, scores), 0);
    assert_int_equal(pick_over_every_row(scores, t->flags, t->table.num_rows, &again), row);
    assert_memory_equal(&again, rng, sizeof(*rng)); /* the same draws */
}

/*
 * Select reads only the groups that can change its answer (docs/bench.md,
 * "Scaling"); it must answer, and draw, as a pass over every row would:
 * tables of up to 3,000 rows whose loads tie often, a token budget wide
 * enough that every row is in the band, weights 0, 0.5 and 1.
 */
static void test_select_answers_and_draws_as_a_pass_over_every_row(void **state)
{
    (void)state;
    void *d = lockstep_create(1048576.0);
    wsel_rng gen;
    wsel_rng_seed(&gen, 5);
    static double scores[4096];
    for (uint32_t round = 0; round < 30; round++) {
        uint32_t dp[400];
        for (uint32_t w = 0; w < 400; w++)
            dp[w] = w == 17 ? 70 : 1 + (uint32_t)wsel_rng_below(&gen, round % 2 ? 9 : 2);
        harness_table *t = harness_table_new(400, dp);
        uint32_t n = t->table.num_rows;
        for (uint32_t i = 0; i < n; i++) {
            t->prefill_tokens[i] = wsel_rng_below(&gen, 300);
            t->decode_blocks[i] = wsel_rng_below(&gen, 40);
            t->overlap_blocks[i] = (uint32_t)wsel_rng_below(&gen, 8);
            t->flags[i] = (uint8_t)(i % 11 == 3   ? WSEL_ROW_EXCLUDED
                                    : i % 13 == 5 ? WSEL_ROW_BUSY
                                    : i % 17 == 0 ? WSEL_ROW_NO_LOAD
                                                  : 0);
        }
        for (uint64_t id = 1; id <= 6; id++) {
            wsel_request req;
            wsel_rng rng;
            harness_request(&req, &rng, SEED, id, 0, NULL, 0);
            req.isl_tokens = 16 * (1 + wsel_rng_below(&gen, 8));
            req.overlap_score_weight = (double)(id % 3) / 2.0;
            harness_table_default_costs(t, req.overlap_score_weight, 16);
            answers_as_every_row(d, &req, &rng, t, scores);
        }
        harness_table_free(t);
    }
    wsel_plugin_entry.destroy(d);
}

/*
 * Idle ranks (the route at scale's table: every row's load is the
 * request's own, a few rows hold a cached prefix), where most rows score
 * alike and a few tie below them: select must still answer and draw as a
 * pass over every row, with block sizes that are and are not powers of
 * two and weights whose per-token factor w / block_size is inexact.
 */
static void test_select_on_idle_ranks_answers_and_draws_as_a_pass_over_every_row(
    void **state)
{
    (void)state;
    void *d = lockstep_create(8192.0);
    wsel_rng gen;
    wsel_rng_seed(&gen, 11);
    static double scores[4096];
    const uint32_t block_sizes[3] = {16, 24, 64};
    const double weights[4] = {0.0, 0.5, 1.0, 1.7};
    for (uint32_t round = 0; round < 24; round++) {
        harness_table *t = harness_table_uniform(300, 8);
        uint32_t n = t->table.num_rows, bs = block_sizes[round % 3];
        for (uint64_t id = 1; id <= 4; id++) {
            uint32_t isl = bs * (8 + (uint32_t)wsel_rng_below(&gen, 24));
            for (uint32_t i = 0; i < n; i++) {
                uint32_t ov = 0;
                if (wsel_rng_below(&gen, 8) == 0)
                    ov = 1 + (uint32_t)wsel_rng_below(&gen, 4);
                t->overlap_blocks[i] = ov;
                t->prefill_tokens[i] = isl - ov * bs;
                t->decode_blocks[i] = isl / bs - ov;
                t->flags[i] = (uint8_t)(i % 29 == 7 ? WSEL_ROW_EXCLUDED : 0);
            }
            wsel_request req;
            wsel_rng rng;
            harness_request(&req, &rng, SEED, id, 0, NULL, 0);
            req.isl_tokens = isl;
            req.block_size = bs;
            req.overlap_score_weight = weights[(round + id) % 4];
            harness_table_default_costs(t, req.overlap_score_weight, bs);
            answers_as_every_row(d, &req, &rng, t, scores);
        }
        harness_table_free(t);
    }
    wsel_plugin_entry.destroy(d);
}

static void test_ties_between_workers_are_broken_at_random_and_reproducibly(void **state)
{
    (void)state;
    harness_table *t = harness_table_uniform(4, 2);
    uint64_t load[8] = {3, 3, 3, 3, 3, 3, 3, 3};
    set_loads(t, load);
    void *modes[2] = {two_level_create(), lockstep_create(0)};
    for (size_t m = 0; m < 2; m++) {
        uint32_t seen = 0;
        for (uint64_t n = 0; n < 200; n++) {
            uint32_t row = decide(modes[m], t, n);
            seen |= 1u << row;
            assert_int_equal(decide(modes[m], t, n), row); /* same stream, same answer */
        }
        assert_int_equal(seen, 0xff);
        wsel_plugin_entry.destroy(modes[m]);
    }
    harness_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_a_wide_worker_gets_its_fair_share_but_never_while_its_busiest_rank_leads),
        cmocka_unit_test(
            test_a_worker_with_one_saturated_rank_is_avoided_though_its_others_idle),
        cmocka_unit_test(test_the_worker_score_adds_the_prefill_of_its_best_overlap_rank),
        cmocka_unit_test(test_the_mean_aggregate_lets_one_hot_rank_hide_among_idle_ones),
        cmocka_unit_test(
            test_blend_adds_alpha_times_the_worker_mean_load_to_each_rank_cost),
        cmocka_unit_test(test_lockstep_charges_an_idle_rank_its_worker_s_step),
        cmocka_unit_test(test_lockstep_on_one_rank_workers_picks_dynamo_s_argmin),
        cmocka_unit_test(
            test_lockstep_keeps_a_request_within_one_step_of_the_shortest_wait),
        cmocka_unit_test(
            test_lockstep_weighs_a_rank_s_own_load_and_its_worker_s_pace_equally),
        cmocka_unit_test(
            test_lockstep_charges_a_backlog_over_the_budget_only_to_its_rank),
        cmocka_unit_test(test_token_budget_is_accepted_at_both_bounds),
        cmocka_unit_test(test_excluded_and_busy_ranks_are_skipped),
        cmocka_unit_test(test_select_answers_and_draws_as_a_pass_over_every_row),
        cmocka_unit_test(
            test_select_on_idle_ranks_answers_and_draws_as_a_pass_over_every_row),
        cmocka_unit_test(test_ties_between_workers_are_broken_at_random_and_reproducibly),
        cmocka_unit_test(test_the_choice_has_the_least_score_on_sorted_and_shuffled_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
