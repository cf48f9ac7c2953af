// SPDX-License-Identifier: Apache-2.0
/*
 * test_dynamo_soft_affinity.c -- Dynamo's soft-affinity load guard at its
 * edges: the load limit (inclusive), the move margin (a one-request swing
 * never walks a session across the pool), ties to the lowest worker id,
 * and the binding following each answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

static const char *const guard_names[] = {"max_active_requests", "move_margin"};

/* The row for session `key` (0: none) over rows with these loads. */
static uint32_t route(void *instance, harness_table *t, const uint32_t *active,
                      uint64_t key)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++)
        t->active_requests[i] = active[i];
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 19, key + 1000, key, NULL, 0);
    return harness_select(instance, &req, t);
}

/* An instance with this limit and margin. */
static void *guard(double max_active, double margin)
{
    return harness_create(guard_names, (const double[]){max_active, margin}, 2);
}

static void test_descriptor_keeps_dynamos_defaults(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "dynamo_soft_affinity");
    assert_int_equal(p->capabilities, WSEL_CAP_CONCURRENT_SELECT);
    assert_int_equal(p->num_params, 3);
    assert_string_equal(p->params[0].name, "max_active_requests");
    assert_true(p->params[0].default_value == 32);
    assert_string_equal(p->params[1].name, "move_margin");
    assert_true(p->params[1].default_value == 2);
    assert_true(p->params[1].min_value == 1);
}

static void test_an_unbound_request_takes_the_least_loaded_row(void **state)
{
    (void)state;
    void *s = guard(0, 1);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){2, 0}, 0), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_ties_go_to_the_lowest_worker_id(void **state)
{
    (void)state;
    void *s = guard(0, 1);
    harness_table *t = harness_table_new(3, NULL);
    t->worker_id[0] = 57;
    t->worker_id[1] = 29;
    t->worker_id[2] = 41;
    assert_int_equal(route(s, t, (uint32_t[]){1, 1, 1}, 0), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_the_bound_row_is_kept_at_the_limit_and_left_above_it(void **state)
{
    (void)state;
    void *s = guard(4, 1);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){9, 0}, 7), 1); /* binds row 1 */
    assert_int_equal(route(s, t, (uint32_t[]){0, 4}, 7), 1);
    assert_int_equal(route(s, t, (uint32_t[]){0, 5}, 7), 0);
    /* The binding followed the answer. */
    assert_int_equal(route(s, t, (uint32_t[]){3, 0}, 7), 0);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_an_equally_loaded_row_never_takes_the_session(void **state)
{
    (void)state;
    void *s = guard(0, 1);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){9, 0}, 7), 1);
    assert_int_equal(route(s, t, (uint32_t[]){1, 1}, 7), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_a_one_request_swing_does_not_walk_the_session(void **state)
{
    (void)state;
    void *s = guard(0, 2);
    harness_table *t = harness_table_new(3, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){0, 5, 5}, 7), 0);
    assert_int_equal(route(s, t, (uint32_t[]){1, 0, 1}, 7), 0);
    assert_int_equal(route(s, t, (uint32_t[]){1, 1, 0}, 7), 0);
    assert_int_equal(route(s, t, (uint32_t[]){1, 0, 1}, 7), 0);
    assert_int_equal(route(s, t, (uint32_t[]){3, 0, 1}, 7), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_the_largest_margin_never_moves(void **state)
{
    (void)state;
    void *s = guard(0, 4294967295.0);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){0, 9}, 7), 0);
    assert_int_equal(route(s, t, (uint32_t[]){4000000000u, 0}, 7), 0);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_a_session_whose_row_left_takes_the_least_loaded(void **state)
{
    (void)state;
    void *s = guard(0, 1);
    harness_table *t = harness_table_new(3, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){5, 0, 5}, 7), 1);
    t->flags[1] = WSEL_ROW_EXCLUDED;
    assert_int_equal(route(s, t, (uint32_t[]){3, 0, 0}, 7), 2);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
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
        cmocka_unit_test(test_descriptor_keeps_dynamos_defaults),
        cmocka_unit_test(test_an_unbound_request_takes_the_least_loaded_row),
        cmocka_unit_test(test_ties_go_to_the_lowest_worker_id),
        cmocka_unit_test(test_the_bound_row_is_kept_at_the_limit_and_left_above_it),
        cmocka_unit_test(test_an_equally_loaded_row_never_takes_the_session),
        cmocka_unit_test(test_a_one_request_swing_does_not_walk_the_session),
        cmocka_unit_test(test_the_largest_margin_never_moves),
        cmocka_unit_test(test_a_session_whose_row_left_takes_the_least_loaded),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
