// SPDX-License-Identifier: Apache-2.0
/*
 * test_sglang_cache_aware.c -- SGLang's cache_aware at its thresholds:
 * the match threshold, smg's mean gate and sgl-router's fleet spread,
 * each just below and just above its edge, with exact answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define HASHES 10u /* prompt of 10 blocks of 16 tokens (the harness's) */

static const uint64_t hashes[HASHES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static const char *const imbalance_name[] = {"imbalance"};
static const double fleet_spread = 1.0;
static const char *const dp_rank_name[] = {"dp_rank"};
static const double min_tokens = 1.0;

/* The row chosen over 2 workers x 2 ranks with these columns per row, when
 * each worker's ranks sit behind one URL (dp_rank min_tokens). */
static uint32_t route_min_tokens(const uint32_t overlap[4], const uint32_t active[4],
                                 const uint64_t decode[4])
{
    void *c = harness_create(dp_rank_name, &min_tokens, 1);
    harness_table *t = harness_table_new(2, (const uint32_t[]){2, 2});
    for (uint32_t i = 0; i < 4; i++) {
        t->overlap_blocks[i] = overlap[i];
        t->active_requests[i] = active[i];
        t->decode_blocks[i] = decode[i];
    }
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 7, 1, 0, hashes, HASHES);
    uint32_t row = harness_select(c, &req, t);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
    return row;
}

/* The row chosen for request `id` over rows with these cached blocks and
 * requests in flight. */
static uint32_t route(void *instance, const uint32_t *overlap, const uint32_t *active,
                      uint32_t n, uint64_t id)
{
    return harness_route_overlap_active(instance, overlap, active, n, 7, id);
}

static void test_descriptor_keeps_smg_defaults(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "sglang_cache_aware");
    assert_int_equal(p->capabilities, WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS);
    assert_int_equal(p->num_params, 5);
    assert_string_equal(p->params[0].name, "cache_threshold");
    assert_true(p->params[0].default_value == 0.3);
    assert_string_equal(p->params[1].name, "balance_abs_threshold");
    assert_true(p->params[1].default_value == 64);
    assert_string_equal(p->params[2].name, "balance_rel_threshold");
    assert_true(p->params[2].default_value == 1.5);
    assert_string_equal(p->params[3].name, "imbalance");
    assert_string_equal(p->params[3].choices[0], "mean_gate");
    assert_string_equal(p->params[3].choices[1], "fleet_spread");
    assert_true(p->params[3].default_value == 0);
    assert_string_equal(p->params[4].name, "dp_rank");
    assert_string_equal(p->params[4].choices[1], "min_tokens");
    assert_true(p->params[4].default_value == 0);
}

static void test_a_match_above_the_threshold_follows_the_cache(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    /* 4 of 10 blocks = 0.4 > 0.3: the deepest row, though not the least
     * loaded. */
    assert_int_equal(route(c, (uint32_t[]){0, 4, 2, 0}, (uint32_t[]){1, 5, 0, 3}, 4, 1), 1);
    wsel_plugin_entry.destroy(c);
}

static void test_a_match_at_the_threshold_takes_the_shortest_queue(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    /* 3 of 10 = 0.3, not above 0.3: the least loaded row. */
    assert_int_equal(route(c, (uint32_t[]){0, 3, 0, 0}, (uint32_t[]){5, 9, 7, 2}, 4, 1), 3);
    /* No cached block at all: the same. */
    assert_int_equal(route(c, (uint32_t[]){0, 0, 0, 0}, (uint32_t[]){5, 9, 1, 2}, 4, 1), 2);
    wsel_plugin_entry.destroy(c);
}

static void test_the_least_loaded_of_the_deepest_rows_wins(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    assert_int_equal(route(c, (uint32_t[]){6, 6, 5, 6}, (uint32_t[]){4, 2, 0, 3}, 4, 1), 1);
    wsel_plugin_entry.destroy(c);
}

static void test_the_mean_gate_spills_only_past_both_margins(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    const uint32_t deep1[] = {0, 8};
    /* Absolute edge: mean 64, load 128 = mean + 64: stays; 130 > 65 + 64. */
    assert_int_equal(route(c, deep1, (uint32_t[]){0, 128}, 2, 1), 1);
    assert_int_equal(route(c, deep1, (uint32_t[]){0, 130}, 2, 1), 0);
    /* Relative edge: mean 200, load 300 = 1.5 x mean: stays; 302 > 1.5 x 201. */
    assert_int_equal(route(c, deep1, (uint32_t[]){100, 300}, 2, 1), 1);
    assert_int_equal(route(c, deep1, (uint32_t[]){100, 302}, 2, 1), 0);
    /* Uneven elsewhere, the matched row below the gate: it keeps the request
     * (the fleet spread would not). */
    assert_int_equal(route(c, (uint32_t[]){8, 0, 0}, (uint32_t[]){3, 2, 90}, 3, 1), 0);
    wsel_plugin_entry.destroy(c);
}

static void test_the_fleet_spread_takes_the_shortest_queue_for_every_request(void **state)
{
    (void)state;
    void *c = harness_create(imbalance_name, &fleet_spread, 1);
    const uint32_t deep1[] = {0, 8};
    /* max - min = 65 > 64 and 165 > 1.5 x 100: imbalanced, the cache is
     * ignored. */
    assert_int_equal(route(c, deep1, (uint32_t[]){100, 165}, 2, 1), 0);
    /* 64 is not above 64: balanced, the cache wins. */
    assert_int_equal(route(c, deep1, (uint32_t[]){100, 164}, 2, 1), 1);
    /* 300 is not above 1.5 x 200: balanced. */
    assert_int_equal(route(c, deep1, (uint32_t[]){200, 300}, 2, 1), 1);
    /* Imbalanced by a third row: the matched row 0 loses to row 1. */
    assert_int_equal(route(c, (uint32_t[]){8, 0, 0}, (uint32_t[]){3, 2, 90}, 3, 1), 1);
    wsel_plugin_entry.destroy(c);
}

static void test_ties_are_broken_uniformly(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    uint32_t first = 0;
    const uint32_t n = 4000;
    for (uint32_t id = 0; id < n; id++)
        first += route(c, (uint32_t[]){0, 7, 7}, (uint32_t[]){0, 3, 3}, 3, id) == 1;
    harness_assert_binomial(first, n, 0.5);
    wsel_plugin_entry.destroy(c);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(3, NULL);
    t->overlap_blocks[0] = 9;
    t->flags[0] = WSEL_ROW_BUSY;
    t->active_requests[1] = 4;
    t->active_requests[2] = 6;
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 1, 1, 0, hashes, HASHES);
    assert_int_equal(harness_select(c, &req, t), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

static void test_every_row_excluded_returns_enocandidate_and_writes_nothing(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(100);
}

static void test_a_host_whose_eligible_rule_leaves_no_row_is_refused(void **state)
{
    (void)state;
    harness_expect_wrong_host_refused(40, 0);
}

static void test_min_tokens_follows_the_cache_to_the_worker_not_the_rank(void **state)
{
    (void)state;
    /* Worker 0 holds 4 of 10 blocks on its rank 1: the worker wins the
     * match, then its rank with the fewer active tokens (rank 0) is sent. */
    assert_int_equal(route_min_tokens((uint32_t[]){0, 4, 0, 0}, (uint32_t[]){1, 1, 0, 0},
                                      (uint64_t[]){10, 20, 0, 0}),
                     0);
}

static void test_min_tokens_sums_a_workers_ranks_and_ties_to_rank_zero(void **state)
{
    (void)state;
    /* No match: worker 1 (5 + 0 requests) is lighter than worker 0
     * (3 + 3); its ranks tie on tokens, so rank 0 (row 2) is sent. */
    assert_int_equal(route_min_tokens((uint32_t[]){0, 0, 0, 0}, (uint32_t[]){3, 3, 5, 0},
                                      (uint64_t[]){0, 0, 7, 7}),
                     2);
    assert_int_equal(route_min_tokens((uint32_t[]){0, 0, 0, 0}, (uint32_t[]){3, 3, 5, 0},
                                      (uint64_t[]){0, 0, 8, 7}),
                     3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_keeps_smg_defaults),
        cmocka_unit_test(test_a_match_above_the_threshold_follows_the_cache),
        cmocka_unit_test(test_a_match_at_the_threshold_takes_the_shortest_queue),
        cmocka_unit_test(test_the_least_loaded_of_the_deepest_rows_wins),
        cmocka_unit_test(test_the_mean_gate_spills_only_past_both_margins),
        cmocka_unit_test(test_the_fleet_spread_takes_the_shortest_queue_for_every_request),
        cmocka_unit_test(test_ties_are_broken_uniformly),
        cmocka_unit_test(test_min_tokens_follows_the_cache_to_the_worker_not_the_rank),
        cmocka_unit_test(test_min_tokens_sums_a_workers_ranks_and_ties_to_rank_zero),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
