// SPDX-License-Identifier: Apache-2.0
/*
 * test_session_hash.c -- session hashing as production-stack and vLLM's
 * router do it: a key keeps its row, keys spread evenly, a row that
 * leaves moves only its own keys, and each peer's answer without a key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#define KEYS 4000u

static const char *const peer_name[] = {"peer"};
static const double vllm_router = 1.0;

static uint32_t route_key(void *instance, harness_table *t, uint64_t key,
                          const uint64_t *hashes, uint32_t num_hashes)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 13, key, key, hashes, num_hashes);
    return harness_select(instance, &req, t);
}

static void test_descriptor_defaults_to_production_stack(void **state)
{
    (void)state;
    assert_string_equal(wsel_plugin_entry.name, "session_hash");
    assert_string_equal(wsel_plugin_entry.params[0].name, "peer");
    assert_string_equal(wsel_plugin_entry.params[0].choices[0], "production_stack");
    assert_string_equal(wsel_plugin_entry.params[0].choices[1], "vllm_router");
    assert_true(wsel_plugin_entry.params[0].default_value == 0);
}

static void test_a_key_keeps_its_row_whatever_the_load(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(5, NULL);
    uint32_t row = route_key(s, t, 77, NULL, 0);
    t->active_requests[row] = 1000;
    assert_int_equal(route_key(s, t, 77, NULL, 0), row);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_keys_spread_evenly_over_the_rows(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(2, 2); /* ranks are rows too */
    uint32_t counts[4] = {0};
    for (uint64_t key = 1; key <= KEYS; key++)
        counts[route_key(s, t, key, NULL, 0)]++;
    for (uint32_t i = 0; i < 4; i++)
        harness_assert_binomial(counts[i], KEYS, 0.25);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

/* Route every key with all 5 rows, then with row 2 excluded: only row 2's
 * keys move, to `expected_new` (UINT32_MAX: anywhere but row 2). */
static void check_leaving_row(void *s, uint32_t expected_new)
{
    harness_table *t = harness_table_new(5, NULL);
    uint32_t moved = 0, on_two = 0;
    for (uint64_t key = 1; key <= KEYS; key++) {
        t->flags[2] = 0;
        uint32_t before = route_key(s, t, key, NULL, 0);
        t->flags[2] = WSEL_ROW_EXCLUDED;
        uint32_t after = route_key(s, t, key, NULL, 0);
        on_two += before == 2;
        if (before != 2) {
            assert_int_equal(after, before);
        } else {
            moved++;
            assert_int_not_equal(after, 2);
            if (expected_new != UINT32_MAX)
                assert_int_equal(after, expected_new);
        }
    }
    assert_int_equal(moved, on_two);
    harness_assert_binomial(on_two, KEYS, 0.2);
    harness_table_free(t);
}

static void test_a_row_that_leaves_moves_only_its_own_keys(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    check_leaving_row(s, UINT32_MAX);
    wsel_plugin_entry.destroy(s);
    /* vLLM's router keeps the row on its ring: its keys go to the first
     * candidate. */
    s = harness_create(peer_name, &vllm_router, 1);
    check_leaving_row(s, 0);
    wsel_plugin_entry.destroy(s);
}

static void test_without_a_key_production_stack_takes_the_first_least_loaded(void **state)
{
    (void)state;
    void *s = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_new(4, NULL);
    const uint32_t active[] = {4, 1, 1, 3};
    for (uint32_t i = 0; i < 4; i++)
        t->active_requests[i] = active[i];
    assert_int_equal(route_key(s, t, 0, NULL, 0), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_without_a_key_vllm_router_hashes_the_prompt(void **state)
{
    (void)state;
    void *s = harness_create(peer_name, &vllm_router, 1);
    harness_table *t = harness_table_new(8, NULL);
    static const uint64_t prompt[] = {5, 6, 1234567};
    uint32_t row = route_key(s, t, 0, prompt, 3);
    assert_int_equal(route_key(s, t, 1234567, NULL, 0), row);
    /* No key and no block: the first candidate. */
    t->flags[0] = WSEL_ROW_EXCLUDED;
    assert_int_equal(route_key(s, t, 0, NULL, 0), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(s);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    for (double peer = 0; peer <= 1; peer++) {
        void *s = harness_create(peer_name, &peer, 1);
        harness_table *t = harness_table_new(2, NULL);
        for (uint64_t key = 1; key <= 64; key++) {
            t->flags[0] = WSEL_ROW_BUSY;
            t->flags[1] = 0;
            assert_int_equal(route_key(s, t, key, NULL, 0), 1);
        }
        harness_table_free(t);
        wsel_plugin_entry.destroy(s);
    }
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
        cmocka_unit_test(test_descriptor_defaults_to_production_stack),
        cmocka_unit_test(test_a_key_keeps_its_row_whatever_the_load),
        cmocka_unit_test(test_keys_spread_evenly_over_the_rows),
        cmocka_unit_test(test_a_row_that_leaves_moves_only_its_own_keys),
        cmocka_unit_test(test_without_a_key_production_stack_takes_the_first_least_loaded),
        cmocka_unit_test(test_without_a_key_vllm_router_hashes_the_prompt),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
