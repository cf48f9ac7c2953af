// SPDX-License-Identifier: Apache-2.0
/*
 * test_bench_time.c -- order statistics and the clock of `wsel bench`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bench.h"

static void test_median_of_odd_count_is_the_middle_value(void **state)
{
    (void)state;
    double v[5] = {9, 1, 5, 3, 7};
    assert_true(bench_median(v, 5) == 5.0);
}

static void test_quantiles_pick_nearest_rank_of_sorted_samples(void **state)
{
    (void)state;
    double v[101];
    for (int i = 0; i <= 100; i++)
        v[i] = 100 - i; /* 100 .. 0, reversed */
    assert_true(bench_quantile(v, 101, 0.0) == 0.0);
    assert_true(bench_quantile(v, 101, 0.5) == 50.0);
    assert_true(bench_quantile(v, 101, 0.99) == 99.0);
    assert_true(bench_quantile(v, 101, 1.0) == 100.0);
}

static void test_quantile_of_no_samples_is_zero(void **state)
{
    (void)state;
    assert_true(bench_quantile(NULL, 0, 0.5) == 0.0);
}

static void test_clock_is_monotonic_and_its_overhead_small(void **state)
{
    (void)state;
    uint64_t a = bench_now_ns(), b = bench_now_ns();
    assert_true(b >= a);
    double overhead = bench_timer_overhead_ns();
    /* Generous: a vDSO clock costs ~20 ns, a trapping one a few us. */
    assert_true(overhead >= 0 && overhead < 100000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median_of_odd_count_is_the_middle_value),
        cmocka_unit_test(test_quantiles_pick_nearest_rank_of_sorted_samples),
        cmocka_unit_test(test_quantile_of_no_samples_is_zero),
        cmocka_unit_test(test_clock_is_monotonic_and_its_overhead_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
