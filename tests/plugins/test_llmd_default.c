// SPDX-License-Identifier: Apache-2.0
/*
 * test_llmd_default.c -- llm-d's default profile: each scorer's value and
 * the weighted sum with llm-d's weights (2, 2, 3), exactly, and the edge
 * where a cached prefix starts to outweigh a shorter queue.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#define HASHES 10u

static const uint64_t hashes[HASHES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

/* A table of n rows of 100 KV blocks with these columns. */
static harness_table *table_of(uint32_t n, const uint32_t *active, const uint64_t *decode,
                               const uint32_t *overlap)
{
    harness_table *t = harness_table_new(n, NULL);
    for (uint32_t i = 0; i < n; i++) {
        t->active_requests[i] = active[i];
        t->decode_blocks[i] = decode[i];
        t->overlap_blocks[i] = overlap[i];
        t->kv_capacity_blocks[i] = 100;
    }
    return t;
}

static uint32_t pick(void *instance, harness_table *t, uint64_t id)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 3, id, 0, hashes, HASHES);
    uint32_t row = harness_select(instance, &req, t);
    harness_table_free(t);
    return row;
}

static void test_descriptor_keeps_llmd_weights(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "llmd_default");
    assert_int_equal(p->capabilities, WSEL_CAP_CONCURRENT_SELECT);
    assert_int_equal(p->num_params, 5);
    assert_string_equal(p->params[0].name, "queue_weight");
    assert_true(p->params[0].default_value == 2.0);
    assert_string_equal(p->params[1].name, "kv_cache_weight");
    assert_true(p->params[1].default_value == 2.0);
    assert_string_equal(p->params[2].name, "prefix_weight");
    assert_true(p->params[2].default_value == 3.0);
    assert_string_equal(p->params[3].name, "no_hit_lru_weight");
    assert_true(p->params[3].default_value == 0.0);
    assert_string_equal(p->params[4].name, "lru_size");
    assert_true(p->params[4].default_value == 1024);
}

static void test_scores_are_the_weighted_sums_negated(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    /* queue 1, 0.5, 0; kv 0.5, 0.8, 1; prefix 0, 0.5, 1. */
    harness_table *t = table_of(3, (uint32_t[]){0, 4, 8}, (uint64_t[]){50, 20, 0},
                                (uint32_t[]){0, 5, 10});
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 3, 1, 0, hashes, HASHES);
    double scores[3];
    assert_int_equal(wsel_plugin_entry.score(l, &req, &t->table, scores), 0);
    assert_true(fabs(scores[0] - -(2.0 + 1.0 + 0.0)) < 1e-12);
    assert_true(fabs(scores[1] - -(1.0 + 1.6 + 1.5)) < 1e-12);
    assert_true(fabs(scores[2] - -(0.0 + 2.0 + 3.0)) < 1e-12);
    assert_int_equal(harness_select(l, &req, t), 2);
    harness_table_free(t);
    wsel_plugin_entry.destroy(l);
}

static void test_a_prefix_outweighs_one_more_request_from_seven_blocks_of_ten(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    /* Row 0 has the shorter queue (2 points); row 1's prefix gives 0.3 a
     * block: 6 blocks = 1.8 loses, 7 blocks = 2.1 wins. */
    const uint32_t active[] = {0, 1};
    const uint64_t decode[] = {10, 10};
    assert_int_equal(pick(l, table_of(2, active, decode, (uint32_t[]){0, 6}), 1), 0);
    assert_int_equal(pick(l, table_of(2, active, decode, (uint32_t[]){0, 7}), 1), 1);
    wsel_plugin_entry.destroy(l);
}

static void test_kv_usage_decides_between_equal_queues(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    /* Equal queues score 1 each; usage 0.6 beats 0.7. */
    assert_int_equal(pick(l, table_of(2, (uint32_t[]){3, 3}, (uint64_t[]){70, 60},
                                      (uint32_t[]){0, 0}),
                          1),
                     1);
    /* Unknown capacity counts as empty: it beats usage 0.1. */
    harness_table *t = table_of(2, (uint32_t[]){3, 3}, (uint64_t[]){10, 999},
                                (uint32_t[]){0, 0});
    t->kv_capacity_blocks[1] = 0;
    assert_int_equal(pick(l, t, 1), 1);
    wsel_plugin_entry.destroy(l);
}

static void test_weights_are_configurable(void **state)
{
    (void)state;
    static const char *const names[] = {"prefix_weight"};
    const double zero = 0.0;
    void *l = harness_create(names, &zero, 1);
    assert_int_equal(pick(l, table_of(2, (uint32_t[]){0, 1}, (uint64_t[]){10, 10},
                                      (uint32_t[]){0, 10}),
                          1),
                     0);
    wsel_plugin_entry.destroy(l);
}

static void test_exact_ties_are_broken_uniformly(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    uint32_t last = 0;
    const uint32_t n = 3000;
    for (uint32_t id = 0; id < n; id++)
        last += pick(l, table_of(3, (uint32_t[]){2, 2, 2}, (uint64_t[]){5, 5, 5},
                                 (uint32_t[]){1, 1, 1}),
                     id) == 2;
    harness_assert_binomial(last, n, 1.0 / 3);
    wsel_plugin_entry.destroy(l);
}

/* An instance scoring by no-hit-lru alone. */
static void *lru_only(void)
{
    static const char *const names[] = {"queue_weight", "kv_cache_weight",
                                        "prefix_weight", "no_hit_lru_weight"};
    static const double values[] = {0, 0, 0, 1};
    return harness_create(names, values, 4);
}

static const uint32_t idle[] = {0, 0, 0};
static const uint64_t empty[] = {0, 0, 0};
static const uint32_t cold[] = {0, 0, 0};

static void test_cold_requests_go_to_the_least_recently_cold_used_row(void **state)
{
    (void)state;
    void *l = lru_only();
    /* Never-used rows first in row order, then the oldest: a rotation. */
    for (uint64_t id = 0; id < 6; id++)
        assert_int_equal(pick(l, table_of(3, idle, empty, cold), id), id % 3);
    wsel_plugin_entry.destroy(l);
}

static void test_no_hit_lru_scores_rank_rows_exactly(void **state)
{
    (void)state;
    void *l = lru_only();
    assert_int_equal(pick(l, table_of(3, idle, empty, cold), 1), 0);
    /* Row 1 and row 2 never used (ranks 0, 1), row 0 used (rank 2). */
    harness_table *t = table_of(3, idle, empty, cold);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 3, 2, 0, hashes, HASHES);
    double scores[3];
    assert_int_equal(wsel_plugin_entry.score(l, &req, &t->table, scores), 0);
    assert_true(scores[0] == -0.0 && scores[1] == -1.0 && scores[2] == -0.5);
    /* score() records nothing: select still takes row 1. */
    assert_int_equal(pick(l, t, 2), 1);
    wsel_plugin_entry.destroy(l);
}

static void test_warm_requests_score_neutral_and_are_not_recorded(void **state)
{
    (void)state;
    void *l = lru_only();
    assert_int_equal(pick(l, table_of(3, idle, empty, cold), 1), 0);
    /* A warm request: every row 0.5, a draw among them, nothing recorded. */
    pick(l, table_of(3, idle, empty, (uint32_t[]){0, 0, 4}), 2);
    assert_int_equal(pick(l, table_of(3, idle, empty, cold), 3), 1);
    assert_int_equal(pick(l, table_of(3, idle, empty, cold), 4), 2);
    wsel_plugin_entry.destroy(l);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    harness_table *t = table_of(2, (uint32_t[]){0, 9}, (uint64_t[]){0, 90},
                                (uint32_t[]){10, 0});
    t->flags[0] = WSEL_ROW_BUSY;
    assert_int_equal(pick(l, t, 1), 1);
    wsel_plugin_entry.destroy(l);
}

static void test_every_row_excluded_returns_enocandidate_and_writes_nothing(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(100);
}

static void test_a_host_whose_eligible_rule_leaves_no_row_is_refused(void **state)
{
    (void)state;
    harness_expect_wrong_host_refused(40, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_keeps_llmd_weights),
        cmocka_unit_test(test_scores_are_the_weighted_sums_negated),
        cmocka_unit_test(test_a_prefix_outweighs_one_more_request_from_seven_blocks_of_ten),
        cmocka_unit_test(test_kv_usage_decides_between_equal_queues),
        cmocka_unit_test(test_weights_are_configurable),
        cmocka_unit_test(test_exact_ties_are_broken_uniformly),
        cmocka_unit_test(test_cold_requests_go_to_the_least_recently_cold_used_row),
        cmocka_unit_test(test_no_hit_lru_scores_rank_rows_exactly),
        cmocka_unit_test(test_warm_requests_score_neutral_and_are_not_recorded),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
