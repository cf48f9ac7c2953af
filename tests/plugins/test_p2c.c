// SPDX-License-Identifier: Apache-2.0
/*
 * test_p2c.c -- the p2c plugin against balls-into-bins theory and exact
 * small cases.
 *
 * Statistical checks use fixed seeds, so they are deterministic; their
 * tolerances are derived from the variance under the hypothesis, next to
 * each check, and say how far from theory the sampler may be.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static const char *const d_name[] = {"d"};
static const char *const d_and_column[] = {"d", "column"};

/* Count, over request ids 0 .. n-1 (seed 23), how often each row wins. */
static void count_choices(void *instance, const harness_table *t, uint32_t n,
                          uint32_t *counts)
{
    memset(counts, 0, t->table.num_rows * sizeof(*counts));
    for (uint32_t k = 0; k < n; k++) {
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, 23, k, 0, NULL, 0);
        counts[harness_select(instance, &req, t)]++;
    }
}

static void test_descriptor_declares_d_and_column(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "p2c");
    assert_int_equal(p->abi_major, WSEL_ABI_MAJOR);
    assert_int_equal(p->struct_size, sizeof(wsel_plugin));
    assert_int_equal(p->capabilities, WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS);
    assert_int_equal(p->num_params, 2);
    assert_string_equal(p->params[0].name, "d");
    assert_int_equal(p->params[0].type, WSEL_PARAM_INT);
    assert_true(p->params[0].default_value == 2);
    assert_true(p->params[0].min_value == 1 && p->params[0].max_value == 8);
    assert_string_equal(p->params[1].name, "column");
    assert_int_equal(p->params[1].type, WSEL_PARAM_ENUM);
    assert_true(p->params[1].default_value == 0);
    assert_true(p->params[1].min_value == 0 && p->params[1].max_value == 3);
    const char *const *c = p->params[1].choices;
    assert_string_equal(c[0], "cost");
    assert_string_equal(c[1], "decode_blocks");
    assert_string_equal(c[2], "prefill_tokens");
    assert_string_equal(c[3], "active_requests");
    assert_null(c[4]);
}

/*
 * Balls into bins: throw m = n balls into n equal bins, each ball to the
 * least loaded of d random bins (cost = current load), and return the
 * fraction of bins holding >= 2 and >= 3 balls.
 */
static void throw_balls(uint32_t d, uint32_t n, double *at_least_2, double *at_least_3)
{
    const double value = d;
    void *instance = harness_create(d_name, &value, 1);
    harness_table *t = harness_table_new(n, NULL);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 2024, 1, 0, NULL, 0);
    for (uint32_t ball = 0; ball < n; ball++) {
        wsel_choice choice = {.struct_size = sizeof(choice)};
        assert_int_equal(wsel_plugin_entry.select(instance, &req, &t->table, &choice), 0);
        assert_true(choice.row < n);
        t->cost[choice.row] += 1;
    }
    uint32_t two = 0, three = 0;
    for (uint32_t i = 0; i < n; i++) {
        two += t->cost[i] >= 2;
        three += t->cost[i] >= 3;
    }
    *at_least_2 = (double)two / n;
    *at_least_3 = (double)three / n;
    harness_table_free(t);
    wsel_plugin_entry.destroy(instance);
}

/*
 * Tolerance for a fraction f of n = 100,000 bins against its fluid limit p:
 * 5 * sqrt(p (1 - p) / n), five standard deviations of a Binomial(n, p)
 * fraction. Why that bound is conservative:
 *  - d = 1: bin loads are negatively associated (Dubhashi and Ranjan,
 *    "Balls and bins: a study in negative dependence", 1998) and
 *    "load >= k" is non-decreasing in one bin's load, so the indicators are
 *    pairwise non-positively correlated: the variance of their sum is at
 *    most the binomial n p (1 - p).
 *  - d = 2: Kurtz's theorem for density-dependent Markov chains (the basis
 *    of Mitzenmacher's fluid limit) gives Gaussian fluctuations of order
 *    1 / sqrt(n) around the limit, and sending each ball to the emptier bin
 *    pulls loads together rather than apart. Measured over 40 seeds
 *    (seeds 1000..1039, n = 1e5), the sd of each fraction was below the
 *    binomial sd: d = 2: 7.8e-4 vs 1.33e-3 (>= 2), 2.5e-4 vs 2.97e-4 (>= 3);
 *    d = 1: 8.3e-4 vs 1.39e-3 (>= 2), 6.6e-4 vs 8.6e-4 (>= 3).
 *  - The fluid limit is exact only as n -> infinity; the finite-n offset is
 *    O(1/n) (for d = 1, |P(load >= 2) - (1 - 2/e)| < 1e-5 at n = 1e5),
 *    negligible beside tolerances of 1.5e-3 and up.
 * The numbers: d = 2: p = 0.2295 -> 6.65e-3, p = 0.008895 -> 1.49e-3;
 *              d = 1: p = 0.2642 -> 6.97e-3, p = 0.0803 -> 4.30e-3.
 * The d = 1 and d = 2 targets sit at least 5 tolerances apart, so the test
 * also tells whether `d` was honoured.
 */
#define BINS 100000u

static void assert_fraction(double observed, double p, const char *what)
{
    double tolerance = 5 * sqrt(p * (1 - p) / BINS);
    if (fabs(observed - p) > tolerance)
        fail_msg("%s: %.6f, theory %.6f +- %.6f", what, observed, p, tolerance);
    print_message("%s: %.6f (theory %.6f, tolerance %.6f)\n", what, observed, p,
                  tolerance);
}

static void test_two_choices_match_the_fluid_limit_for_m_equal_n(void **state)
{
    (void)state;
    double two, three;
    throw_balls(2, BINS, &two, &three);
    assert_fraction(two, 0.2295, "d=2 load>=2");
    assert_fraction(three, 0.008895, "d=2 load>=3");
}

static void test_one_choice_matches_the_poisson_limit_for_m_equal_n(void **state)
{
    (void)state;
    double two, three;
    throw_balls(1, BINS, &two, &three);
    assert_fraction(two, 0.2642, "d=1 load>=2");
    assert_fraction(three, 0.0803, "d=1 load>=3");
}

static void test_d_equal_to_the_row_count_always_picks_the_global_minimum(void **state)
{
    (void)state;
    /* Distinctness: 8 rows, d = 8. Drawing with replacement would miss the
     * minimum (row 5) with probability (7/8)^8 = 0.34 per request. */
    const double costs[] = {9, 4, 7, 3, 8, 1, 6, 2};
    harness_table *t = harness_table_new(8, NULL);
    memcpy(t->cost, costs, sizeof(costs));
    const double d = 8;
    void *instance = harness_create(d_name, &d, 1);
    uint32_t counts[8];
    count_choices(instance, t, 500, counts);
    assert_int_equal(counts[5], 500);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_fewer_eligible_rows_than_d_are_all_compared(void **state)
{
    (void)state;
    /* 10 rows, 7 excluded (and cheapest): d = 8 compares the 3 others. */
    harness_table *t = harness_table_new(10, NULL);
    for (uint32_t i = 0; i < 10; i++) {
        t->cost[i] = 10 + i;
        t->flags[i] = WSEL_ROW_EXCLUDED;
    }
    t->flags[9] = t->flags[4] = t->flags[7] = 0;
    const double d = 8;
    void *instance = harness_create(d_name, &d, 1);
    uint32_t counts[10];
    count_choices(instance, t, 200, counts);
    assert_int_equal(counts[4], 200);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_the_column_parameter_chooses_what_is_compared(void **state)
{
    (void)state;
    /* Each column has its minimum on a different row. */
    harness_table *t = harness_table_new(4, NULL);
    const double cost[] = {5, 1, 5, 5};
    const uint64_t decode[] = {5, 5, 1, 5};
    const uint64_t prefill[] = {5, 5, 5, 1};
    const uint32_t active[] = {1, 5, 5, 5};
    memcpy(t->cost, cost, sizeof(cost));
    memcpy(t->decode_blocks, decode, sizeof(decode));
    memcpy(t->prefill_tokens, prefill, sizeof(prefill));
    memcpy(t->active_requests, active, sizeof(active));
    const uint32_t expected[] = {1, 2, 3, 0};
    for (uint32_t column = 0; column < 4; column++) {
        const double values[] = {4, column};
        void *instance = harness_create(d_and_column, values, 2);
        uint32_t counts[4];
        count_choices(instance, t, 50, counts);
        assert_int_equal(counts[expected[column]], 50);
        wsel_plugin_entry.destroy(instance);
    }
    harness_table_free(t);
}

static void test_integer_columns_are_compared_without_rounding(void **state)
{
    (void)state;
    /* 2^53 + 1 and 2^53 are equal as doubles; as integers row 1 is lower. */
    harness_table *t = harness_table_new(2, NULL);
    t->decode_blocks[0] = (UINT64_C(1) << 53) + 1;
    t->decode_blocks[1] = UINT64_C(1) << 53;
    const double values[] = {2, 1};
    void *instance = harness_create(d_and_column, values, 2);
    uint32_t counts[2];
    count_choices(instance, t, 100, counts);
    assert_int_equal(counts[1], 100);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_pairs_are_uniform_over_the_eligible_rows(void **state)
{
    (void)state;
    /*
     * 10 rows; 6 excluded with cost 0 (they would win if ever drawn); the
     * eligible rows 1, 4, 6, 8 cost 1, 2, 3, 4. With d = 2 and a uniform
     * pair among C(4,2) = 6, the row of rank r (0 = cheapest) wins when it
     * is drawn with a dearer one: (3 - r) of 6 pairs, so p = 1/2, 1/3, 1/6,
     * 0. Each count is Binomial(6000, p): 5 sd = 194, 183, 144.
     */
    harness_table *t = harness_table_new(10, NULL);
    for (uint32_t i = 0; i < 10; i++)
        t->flags[i] = WSEL_ROW_EXCLUDED;
    const uint32_t rows[] = {1, 4, 6, 8};
    for (uint32_t r = 0; r < 4; r++) {
        t->flags[rows[r]] = 0;
        t->cost[rows[r]] = 1 + r;
    }
    void *instance = harness_create(NULL, NULL, 0);
    uint32_t counts[10];
    count_choices(instance, t, 6000, counts);
    harness_assert_binomial(counts[1], 6000, 1.0 / 2);
    harness_assert_binomial(counts[4], 6000, 1.0 / 3);
    harness_assert_binomial(counts[6], 6000, 1.0 / 6);
    assert_int_equal(counts[8], 0);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_pairs_stay_uniform_when_eligible_rows_are_scarce(void **state)
{
    (void)state;
    /*
     * 10,000 rows, only 3 eligible (rows 17, 5000, 9999, cost 1, 2, 3): the
     * random draws almost never find two, so the scan path answers. A
     * uniform pair among 3 gives p = 2/3, 1/3, 0; counts Binomial(3000, p),
     * 5 sd = 129.
     */
    harness_table *t = harness_table_new(10000, NULL);
    for (uint32_t i = 0; i < 10000; i++)
        t->flags[i] = WSEL_ROW_EXCLUDED;
    const uint32_t rows[] = {17, 5000, 9999};
    for (uint32_t r = 0; r < 3; r++) {
        t->flags[rows[r]] = 0;
        t->cost[rows[r]] = 1 + r;
    }
    void *instance = harness_create(NULL, NULL, 0);
    uint32_t *counts = calloc(10000, sizeof(*counts));
    assert_non_null(counts);
    count_choices(instance, t, 3000, counts);
    harness_assert_binomial(counts[17], 3000, 2.0 / 3);
    harness_assert_binomial(counts[5000], 3000, 1.0 / 3);
    assert_int_equal(counts[9999], 0);
    free(counts);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_exact_ties_are_broken_uniformly(void **state)
{
    (void)state;
    /* 4 equal rows, d = 2: by symmetry each wins with p = 1/4;
     * Binomial(8000, 1/4) has 5 sd = 194. */
    harness_table *t = harness_table_new(4, NULL);
    void *instance = harness_create(NULL, NULL, 0);
    uint32_t counts[4];
    count_choices(instance, t, 8000, counts);
    for (uint32_t r = 0; r < 4; r++)
        harness_assert_binomial(counts[r], 8000, 0.25);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    /* Busy rows are cheapest but never chosen; the scarce idle row always
     * is, through the rejection path (rows 0..98) or the scan path. */
    harness_table *t = harness_table_new(100, NULL);
    for (uint32_t i = 0; i < 100; i++) {
        t->flags[i] = WSEL_ROW_BUSY;
        t->cost[i] = 0;
    }
    t->flags[42] = 0;
    t->cost[42] = 100;
    void *instance = harness_create(NULL, NULL, 0);
    uint32_t counts[100];
    count_choices(instance, t, 300, counts);
    assert_int_equal(counts[42], 300);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_busy_rows_are_compared_when_every_eligible_row_is_busy(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(4, NULL);
    const double costs[] = {3, 0, 1, 2};
    memcpy(t->cost, costs, sizeof(costs));
    t->flags[0] = WSEL_ROW_BUSY;
    t->flags[1] = WSEL_ROW_BUSY | WSEL_ROW_EXCLUDED;
    t->flags[2] = WSEL_ROW_BUSY;
    t->flags[3] = WSEL_ROW_BUSY;
    const double d = 3;
    void *instance = harness_create(d_name, &d, 1);
    uint32_t counts[4];
    count_choices(instance, t, 100, counts);
    assert_int_equal(counts[2], 100);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_every_row_excluded_returns_enocandidate_and_writes_nothing(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(1000);
}

static void test_a_host_whose_eligible_rule_leaves_no_row_is_refused(void **state)
{
    (void)state;
    harness_expect_wrong_host_refused(40, 0); /* its score ignores flags */
}

static void test_same_seed_and_request_give_the_same_row(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(1000, NULL);
    for (uint32_t i = 0; i < 1000; i++)
        t->cost[i] = i % 37;
    void *a = harness_create(NULL, NULL, 0);
    void *b = harness_create(NULL, NULL, 0);
    for (uint32_t k = 0; k < 200; k++) {
        wsel_request req1, req2;
        wsel_rng rng1, rng2;
        harness_request(&req1, &rng1, 9, k, 0, NULL, 0);
        harness_request(&req2, &rng2, 9, k, 0, NULL, 0);
        assert_int_equal(harness_select(a, &req1, t), harness_select(b, &req2, t));
    }
    wsel_plugin_entry.destroy(a);
    wsel_plugin_entry.destroy(b);
    harness_table_free(t);
}

static void test_create_refuses_d_or_column_out_of_range(void **state)
{
    (void)state;
    const double bad[][2] = {{0, 0}, {9, 0}, {2.5, 0}, {2, 4}, {2, -1}, {2, 0.5}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        void *instance = NULL;
        assert_int_equal(
            wsel_plugin_entry.create(harness_host_api(), bad[i], 2, &instance),
            WSEL_ECONFIG);
        assert_null(instance);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_declares_d_and_column),
        cmocka_unit_test(test_two_choices_match_the_fluid_limit_for_m_equal_n),
        cmocka_unit_test(test_one_choice_matches_the_poisson_limit_for_m_equal_n),
        cmocka_unit_test(test_d_equal_to_the_row_count_always_picks_the_global_minimum),
        cmocka_unit_test(test_fewer_eligible_rows_than_d_are_all_compared),
        cmocka_unit_test(test_the_column_parameter_chooses_what_is_compared),
        cmocka_unit_test(test_integer_columns_are_compared_without_rounding),
        cmocka_unit_test(test_pairs_are_uniform_over_the_eligible_rows),
        cmocka_unit_test(test_pairs_stay_uniform_when_eligible_rows_are_scarce),
        cmocka_unit_test(test_exact_ties_are_broken_uniformly),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_busy_rows_are_compared_when_every_eligible_row_is_busy),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
        cmocka_unit_test(test_same_seed_and_request_give_the_same_row),
        cmocka_unit_test(test_create_refuses_d_or_column_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
