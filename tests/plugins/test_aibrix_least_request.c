// SPDX-License-Identifier: Apache-2.0
/*
 * test_aibrix_least_request.c -- AIBrix's least-request: the fewest
 * requests in flight, ties uniform.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

static uint32_t pick(void *instance, const uint32_t *active, uint32_t n, uint64_t id)
{
    harness_table *t = harness_table_new(n, NULL);
    for (uint32_t i = 0; i < n; i++) {
        t->active_requests[i] = active[i];
        t->overlap_blocks[i] = 10 * i; /* ignored */
    }
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 5, id, 0, NULL, 0);
    uint32_t row = harness_select(instance, &req, t);
    harness_table_free(t);
    return row;
}

static void test_descriptor_has_no_parameters(void **state)
{
    (void)state;
    assert_string_equal(wsel_plugin_entry.name, "aibrix_least_request");
    assert_int_equal(wsel_plugin_entry.num_params, 0);
    assert_int_equal(wsel_plugin_entry.capabilities,
                     WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS);
}

static void test_the_fewest_requests_in_flight_win(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    assert_int_equal(pick(l, (uint32_t[]){7, 3, 9, 4}, 4, 1), 1);
    assert_int_equal(pick(l, (uint32_t[]){7, 3, 9, 0}, 4, 1), 3);
    wsel_plugin_entry.destroy(l);
}

static void test_ties_are_broken_uniformly(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    uint32_t counts[4] = {0};
    const uint32_t n = 4000;
    for (uint32_t id = 0; id < n; id++)
        counts[pick(l, (uint32_t[]){2, 5, 2, 2}, 4, id)]++;
    assert_int_equal(counts[1], 0);
    harness_assert_binomial(counts[0], n, 1.0 / 3);
    harness_assert_binomial(counts[3], n, 1.0 / 3);
    wsel_plugin_entry.destroy(l);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    void *l = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(2, NULL);
    t->flags[0] = WSEL_ROW_BUSY;
    t->active_requests[1] = 50;
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 1, 1, 0, NULL, 0);
    assert_int_equal(harness_select(l, &req, t), 1);
    harness_table_free(t);
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
    harness_expect_wrong_host_refused(40, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_has_no_parameters),
        cmocka_unit_test(test_the_fewest_requests_in_flight_win),
        cmocka_unit_test(test_ties_are_broken_uniformly),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
