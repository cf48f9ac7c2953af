// SPDX-License-Identifier: Apache-2.0
/*
 * test_aibrix_prefix_cache.c -- AIBrix's prefix-cache at its thresholds:
 * the imbalance count (8) and the mean + 1 sd load bound, each at and
 * just past its edge, with exact answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#define HASHES 10u

static const uint64_t hashes[HASHES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

static uint32_t route(void *instance, const uint32_t *overlap, const uint32_t *active,
                      uint32_t n, uint64_t id)
{
    return harness_route_overlap_active(instance, overlap, active, n, 9, id);
}

static void test_descriptor_keeps_aibrix_defaults(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "aibrix_prefix_cache");
    assert_int_equal(p->num_params, 2);
    assert_string_equal(p->params[0].name, "imbalance_abs_count");
    assert_true(p->params[0].default_value == 8);
    assert_string_equal(p->params[1].name, "std_dev_factor");
    assert_true(p->params[1].default_value == 1);
}

static void test_the_highest_match_within_the_load_bound_wins(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    /* Loads 2, 4, 0: mean 2, sd 2, bound 4: row 1 (50 %) at the bound. */
    assert_int_equal(route(c, (uint32_t[]){0, 5, 2}, (uint32_t[]){2, 4, 0}, 3, 1), 1);
    /* Loads 1, 4, 1: mean 2, sd sqrt 3, bound 3.73: row 1 is over it, the
     * next match (row 2, 20 %) wins. */
    assert_int_equal(route(c, (uint32_t[]){0, 5, 2}, (uint32_t[]){1, 4, 1}, 3, 1), 2);
    wsel_plugin_entry.destroy(c);
}

static void test_equal_matches_go_to_the_least_loaded(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    assert_int_equal(route(c, (uint32_t[]){5, 5, 0}, (uint32_t[]){3, 1, 2}, 3, 1), 1);
    wsel_plugin_entry.destroy(c);
}

static void test_no_match_takes_the_least_request(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    assert_int_equal(route(c, (uint32_t[]){0, 0, 0}, (uint32_t[]){3, 1, 2}, 3, 1), 1);
    /* Every match over the bound: the same. */
    assert_int_equal(route(c, (uint32_t[]){0, 9, 0}, (uint32_t[]){1, 4, 1}, 3, 1) != 1, 1);
    wsel_plugin_entry.destroy(c);
}

static void test_an_imbalance_above_eight_keeps_only_the_least_loaded(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    /* 9 - 0 > 8: only row 0 is a candidate; its 0 % falls back to it. */
    assert_int_equal(route(c, (uint32_t[]){0, 10, 0}, (uint32_t[]){0, 9, 5}, 3, 1), 0);
    /* 9 - 1 = 8 is not above 8: mean 5, sd 4, bound 9: row 1 (100 %) wins. */
    assert_int_equal(route(c, (uint32_t[]){0, 10, 0}, (uint32_t[]){1, 9, 5}, 3, 1), 1);
    wsel_plugin_entry.destroy(c);
}

static void test_the_std_dev_factor_is_configurable(void **state)
{
    (void)state;
    static const char *const names[] = {"std_dev_factor"};
    const double zero = 0.0;
    void *c = harness_create(names, &zero, 1);
    /* Bound = mean 2: row 1 (load 4) is over it. */
    assert_int_equal(route(c, (uint32_t[]){0, 5, 2}, (uint32_t[]){2, 4, 0}, 3, 1), 2);
    wsel_plugin_entry.destroy(c);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(2, NULL);
    t->flags[0] = WSEL_ROW_BUSY;
    t->overlap_blocks[0] = 10;
    t->active_requests[1] = 3;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_keeps_aibrix_defaults),
        cmocka_unit_test(test_the_highest_match_within_the_load_bound_wins),
        cmocka_unit_test(test_equal_matches_go_to_the_least_loaded),
        cmocka_unit_test(test_no_match_takes_the_least_request),
        cmocka_unit_test(test_an_imbalance_above_eight_keeps_only_the_least_loaded),
        cmocka_unit_test(test_the_std_dev_factor_is_configurable),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
