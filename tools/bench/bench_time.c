// SPDX-License-Identifier: Apache-2.0
/*
 * bench_time.c -- the clock's own cost and order statistics for `wsel bench`.
 */
#include "bench.h"

#include <stdlib.h>

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_quantile(double *samples, size_t n, double q)
{
    if (n == 0)
        return 0.0;
    qsort(samples, n, sizeof(double), compare_doubles);
    size_t k = (size_t)(q * (double)(n - 1) + 0.5);
    return samples[k < n ? k : n - 1];
}

double bench_median(double *values, size_t n)
{
    return bench_quantile(values, n, 0.5);
}

double bench_timer_overhead_ns(void)
{
    enum { pairs = 2001 };
    static double samples[pairs];
    for (int i = 0; i < pairs; i++) {
        uint64_t t0 = bench_now_ns();
        uint64_t t1 = bench_now_ns();
        samples[i] = (double)(t1 - t0);
    }
    return bench_median(samples, pairs);
}
