// SPDX-License-Identifier: Apache-2.0
/*
 * test_random.c -- the random plugin: uniform over eligible rows, flag
 * handling, reproducibility from the request's stream.
 *
 * Statistical checks use fixed seeds (so they are deterministic) and
 * tolerances of 5 standard deviations of the count under the hypothesis,
 * derived next to each check.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

/* Select once per request id 0 .. n-1 (seed 11) and count rows. */
static void count_choices(const harness_table *t, uint32_t n, uint32_t *counts)
{
    void *instance = harness_create(NULL, NULL, 0);
    memset(counts, 0, t->table.num_rows * sizeof(*counts));
    for (uint32_t k = 0; k < n; k++) {
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, 11, k, 0, NULL, 0);
        counts[harness_select(instance, &req, t)]++;
    }
    wsel_plugin_entry.destroy(instance);
}

static void test_descriptor_is_stateless_concurrent_without_parameters(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "random");
    assert_int_equal(p->abi_major, WSEL_ABI_MAJOR);
    assert_int_equal(p->struct_size, sizeof(wsel_plugin));
    assert_int_equal(p->capabilities, WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS);
    assert_int_equal(p->num_params, 0);
    /* No score on purpose (plugins/random/random.c): a constant says
     * nothing, and random numbers would be an invented preference. */
    assert_null(p->score);
}

static void test_eligible_rows_share_requests_uniformly(void **state)
{
    (void)state;
    /* 5 rows, row 2 excluded: each other row is a Binomial(40000, 1/4)
     * count, mean 10000, sd sqrt(40000 * 1/4 * 3/4) = 86.6. */
    harness_table *t = harness_table_new(5, NULL);
    t->flags[2] = WSEL_ROW_EXCLUDED;
    uint32_t counts[5];
    count_choices(t, 40000, counts);
    assert_int_equal(counts[2], 0);
    for (int r = 0; r < 5; r++)
        if (r != 2)
            harness_assert_binomial(counts[r], 40000, 0.25);
    harness_table_free(t);
}

static void test_a_hundred_rows_pass_a_chi_square_test(void **state)
{
    (void)state;
    /* 100 rows, 100000 draws: under uniformity X^2 = sum (c - 1000)^2 / 1000
     * is chi-square with 99 degrees of freedom: mean 99, variance 198
     * (sd 14.07). 99 + 5 * 14.07 = 169.4; the chi-square tail beyond it is
     * about 1e-5, and the seed is fixed anyway. */
    harness_table *t = harness_table_new(100, NULL);
    uint32_t counts[100];
    count_choices(t, 100000, counts);
    double x2 = 0;
    for (int r = 0; r < 100; r++)
        x2 += (counts[r] - 1000.0) * (counts[r] - 1000.0) / 1000.0;
    if (x2 > 169.4)
        fail_msg("chi-square %.1f over 99 degrees of freedom", x2);
    harness_table_free(t);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    /* Rows 0 and 1 busy, 3 excluded: rows 2 and 4 share the requests,
     * each Binomial(10000, 1/2), sd 50. */
    harness_table *t = harness_table_new(5, NULL);
    t->flags[0] = WSEL_ROW_BUSY;
    t->flags[1] = WSEL_ROW_BUSY;
    t->flags[3] = WSEL_ROW_EXCLUDED;
    uint32_t counts[5];
    count_choices(t, 10000, counts);
    assert_int_equal(counts[0] + counts[1] + counts[3], 0);
    harness_assert_binomial(counts[2], 10000, 0.5);
    harness_table_free(t);
}

static void test_busy_rows_share_requests_when_every_eligible_row_is_busy(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(4, NULL);
    t->flags[0] = WSEL_ROW_BUSY;
    t->flags[1] = WSEL_ROW_BUSY | WSEL_ROW_EXCLUDED;
    t->flags[2] = WSEL_ROW_EXCLUDED;
    t->flags[3] = WSEL_ROW_BUSY;
    uint32_t counts[4];
    count_choices(t, 10000, counts);
    assert_int_equal(counts[1] + counts[2], 0);
    harness_assert_binomial(counts[0], 10000, 0.5);
    harness_table_free(t);
}

/* The explanation (ABI 1.1): a random draw, or all busy. No score is
 * claimed, since random has no score function. */
static void test_the_choice_says_random_or_all_busy(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(3, NULL);
    void *instance = harness_create(NULL, NULL, 0);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 11, 1, 0, NULL, 0);
    wsel_choice choice = {.struct_size = sizeof(choice)};
    assert_int_equal(wsel_plugin_entry.select(instance, &req, &t->table, &choice), 0);
    assert_int_equal(choice.reason, WSEL_REASON_RANDOM);
    assert_int_equal(choice.flags, 0);
    t->flags[0] = t->flags[1] = t->flags[2] = WSEL_ROW_BUSY;
    harness_request(&req, &rng, 11, 2, 0, NULL, 0);
    choice = (wsel_choice){.struct_size = sizeof(choice)};
    assert_int_equal(wsel_plugin_entry.select(instance, &req, &t->table, &choice), 0);
    assert_int_equal(choice.reason, WSEL_REASON_ALL_BUSY);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_every_row_excluded_returns_enocandidate_and_writes_nothing(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(2);
}

static void test_same_seed_and_request_give_the_same_row(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(1000, NULL);
    void *a = harness_create(NULL, NULL, 0);
    void *b = harness_create(NULL, NULL, 0);
    uint32_t differing = 0;
    for (uint32_t k = 0; k < 100; k++) {
        wsel_request req1, req2, req3;
        wsel_rng rng1, rng2, rng3;
        harness_request(&req1, &rng1, 5, k, 0, NULL, 0);
        harness_request(&req2, &rng2, 5, k, 0, NULL, 0);
        harness_request(&req3, &rng3, 6, k, 0, NULL, 0);
        uint32_t row = harness_select(a, &req1, t);
        assert_int_equal(harness_select(b, &req2, t), row);
        differing += harness_select(a, &req3, t) != row;
    }
    /* Another seed changes the row except for 1-in-1000 coincidences:
     * at least 90 of 100 differ unless the stream is ignored. */
    assert_true(differing >= 90);
    wsel_plugin_entry.destroy(a);
    wsel_plugin_entry.destroy(b);
    harness_table_free(t);
}

static void test_a_host_whose_eligible_rule_leaves_no_row_is_refused(void **state)
{
    (void)state;
    harness_expect_wrong_host_refused(40, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_is_stateless_concurrent_without_parameters),
        cmocka_unit_test(test_eligible_rows_share_requests_uniformly),
        cmocka_unit_test(test_a_hundred_rows_pass_a_chi_square_test),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_busy_rows_share_requests_when_every_eligible_row_is_busy),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_same_seed_and_request_give_the_same_row),
        cmocka_unit_test(test_the_choice_says_random_or_all_busy),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
