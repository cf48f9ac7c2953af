// SPDX-License-Identifier: Apache-2.0
/*
 * test_pstack_prefixaware.c -- production-stack's prefixaware: a uniform
 * draw among the rows holding the deepest prefix, load unseen, and the
 * minimum match length at its edge.
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
    return harness_route_overlap_active(instance, overlap, active, n, 11, id);
}

static void test_descriptor_keeps_the_production_stack_default(void **state)
{
    (void)state;
    assert_string_equal(wsel_plugin_entry.name, "pstack_prefixaware");
    assert_int_equal(wsel_plugin_entry.num_params, 1);
    assert_string_equal(wsel_plugin_entry.params[0].name, "prefix_min_match_length");
    assert_true(wsel_plugin_entry.params[0].default_value == 0);
}

static void test_the_deepest_rows_are_equally_likely_whatever_their_load(void **state)
{
    (void)state;
    void *p = harness_create(NULL, NULL, 0);
    uint32_t counts[4] = {0};
    const uint32_t n = 4000;
    for (uint32_t id = 0; id < n; id++)
        counts[route(p, (uint32_t[]){3, 5, 5, 1}, (uint32_t[]){0, 90, 1, 0}, 4, id)]++;
    assert_int_equal(counts[0] + counts[3], 0);
    harness_assert_binomial(counts[1], n, 0.5);
    wsel_plugin_entry.destroy(p);
}

static void test_without_a_cached_prefix_every_row_is_equally_likely(void **state)
{
    (void)state;
    void *p = harness_create(NULL, NULL, 0);
    uint32_t counts[4] = {0};
    const uint32_t n = 4000;
    for (uint32_t id = 0; id < n; id++)
        counts[route(p, (uint32_t[]){0, 0, 0, 0}, (uint32_t[]){9, 0, 0, 0}, 4, id)]++;
    for (uint32_t i = 0; i < 4; i++)
        harness_assert_binomial(counts[i], n, 0.25);
    wsel_plugin_entry.destroy(p);
}

static void test_a_prefix_shorter_than_the_minimum_goes_to_the_first_least_loaded(void **state)
{
    (void)state;
    static const char *const names[] = {"prefix_min_match_length"};
    const double tokens = 64; /* 4 blocks of 16 */
    void *p = harness_create(names, &tokens, 1);
    assert_int_equal(route(p, (uint32_t[]){3, 0, 0, 0}, (uint32_t[]){5, 2, 2, 7}, 4, 1), 1);
    assert_int_equal(route(p, (uint32_t[]){4, 0, 0, 0}, (uint32_t[]){5, 2, 2, 7}, 4, 1), 0);
    wsel_plugin_entry.destroy(p);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    void *p = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(2, NULL);
    t->flags[0] = WSEL_ROW_BUSY;
    t->overlap_blocks[0] = 10;
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 1, 1, 0, hashes, HASHES);
    assert_int_equal(harness_select(p, &req, t), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(p);
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
        cmocka_unit_test(test_descriptor_keeps_the_production_stack_default),
        cmocka_unit_test(test_the_deepest_rows_are_equally_likely_whatever_their_load),
        cmocka_unit_test(test_without_a_cached_prefix_every_row_is_equally_likely),
        cmocka_unit_test(test_a_prefix_shorter_than_the_minimum_goes_to_the_first_least_loaded),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
