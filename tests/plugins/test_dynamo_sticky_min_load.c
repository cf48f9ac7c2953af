// SPDX-License-Identifier: Apache-2.0
/*
 * test_dynamo_sticky_min_load.c -- Dynamo's sticky-min-load: a session
 * binds to the least loaded row, stays whatever the load, and rebinds
 * only when its row stops being a candidate; requests without a session
 * are never bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

/* The row for session `key` (0: none) over rows with these loads. */
static uint32_t route(void *instance, harness_table *t, const uint32_t *active,
                      uint64_t key)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++)
        t->active_requests[i] = active[i];
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 17, key + 1000, key, NULL, 0);
    return harness_select(instance, &req, t);
}

static void test_descriptor_keeps_dynamos_table_size(void **state)
{
    (void)state;
    assert_string_equal(wsel_plugin_entry.name, "dynamo_sticky_min_load");
    assert_int_equal(wsel_plugin_entry.capabilities, WSEL_CAP_CONCURRENT_SELECT);
    assert_string_equal(wsel_plugin_entry.params[0].name, "max_sessions");
    assert_true(wsel_plugin_entry.params[0].default_value == 65536);
}

static void test_a_new_session_takes_the_least_loaded_row(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){5, 2}, 7), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_a_bound_session_ignores_load(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(3, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){0, 9, 9}, 7), 0);
    assert_int_equal(route(s, t, (uint32_t[]){90, 0, 0}, 7), 0);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_a_session_rebinds_only_when_its_row_leaves(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){0, 9}, 7), 0);
    t->flags[0] = WSEL_ROW_EXCLUDED;
    assert_int_equal(route(s, t, (uint32_t[]){0, 9}, 7), 1);
    /* The new binding holds when the first row returns idle. */
    t->flags[0] = 0;
    assert_int_equal(route(s, t, (uint32_t[]){0, 9}, 7), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_requests_without_a_session_are_not_bound(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){0, 9}, 0), 0);
    assert_int_equal(route(s, t, (uint32_t[]){9, 0}, 0), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_busy_bound_row_gives_way_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(2, NULL);
    assert_int_equal(route(s, t, (uint32_t[]){0, 9}, 7), 0);
    t->flags[0] = WSEL_ROW_BUSY;
    assert_int_equal(route(s, t, (uint32_t[]){0, 9}, 7), 1);
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
        cmocka_unit_test(test_descriptor_keeps_dynamos_table_size),
        cmocka_unit_test(test_a_new_session_takes_the_least_loaded_row),
        cmocka_unit_test(test_a_bound_session_ignores_load),
        cmocka_unit_test(test_a_session_rebinds_only_when_its_row_leaves),
        cmocka_unit_test(test_requests_without_a_session_are_not_bound),
        cmocka_unit_test(test_busy_bound_row_gives_way_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
