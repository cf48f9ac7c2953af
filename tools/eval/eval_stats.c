// SPDX-License-Identifier: Apache-2.0
/*
 * eval_stats.c -- means, Student-t 95 % confidence intervals, and the
 * paired difference from the reference policy (same seed, same input), the
 * test docs/evaluation.md names.
 */
#include <math.h>

#include "eval.h"

double eval_t975(uint32_t df)
{
    /* t_{0.975, df}, df = 1..30. */
    static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                               2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                               2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                               2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
    if (df == 0)
        return INFINITY;
    if (df <= 30)
        return t[df - 1];
    return df <= 60 ? 2.000 : df <= 120 ? 1.980 : 1.960;
}

static void mean_ci(const double *x, uint32_t n, double *mean, double *ci)
{
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += x[i];
    *mean = n ? sum / n : 0;
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += (x[i] - *mean) * (x[i] - *mean);
    *ci = n > 1 ? eval_t975(n - 1) * sqrt(ss / (n - 1)) / sqrt((double)n) : 0;
}

eval_stat eval_stat_paired(const double *x, const double *ref, uint32_t n)
{
    eval_stat st = {0, 0, 0, 0, 0};
    mean_ci(x, n, &st.mean, &st.ci);
    if (!ref || n == 0)
        return st;
    double d[EVAL_MAX_SEEDS];
    for (uint32_t i = 0; i < n && i < EVAL_MAX_SEEDS; i++)
        d[i] = x[i] - ref[i];
    mean_ci(d, n, &st.diff, &st.diff_ci);
    /* A difference whose CI excludes 0. Identical runs (a deterministic
     * policy on a trace) differ by exactly the same amount every seed: that
     * is significant too, unless it is 0 (up to rounding). */
    double tiny = 1e-9 * (fabs(st.mean) + 1);
    st.significant = fabs(st.diff) > tiny && fabs(st.diff) > st.diff_ci;
    return st;
}
