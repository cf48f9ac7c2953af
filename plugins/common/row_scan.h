// SPDX-License-Identifier: Apache-2.0
/*
 * row_scan.h -- the passes over every row that hysteresis and adaptive
 * share: the best candidate cost and the spread of candidate loads. SSE2 on x86-64 (16
 * rows a step, no branch per row), plain loops elsewhere; both give the
 * very doubles the plain loops in row order give.
 */
#ifndef WSEL_PLUGINS_ROW_SCAN_H
#define WSEL_PLUGINS_ROW_SCAN_H

#include <stdint.h>

/* What one pass over every row found (row_scan). */
typedef struct row_scan_result {
    int best_known;  /* best is set; else call row_scan_best */
    int loads_known; /* min_load and mean_load are set; else row_scan_loads */
    double best;
    double min_load;
    double mean_load;
} row_scan_result;

/* One pass over every row: what row_scan_best and row_scan_loads would
 * give, each when a shortcut allows (see row_scan.c); the result says which
 * it found. */
void row_scan(const uint8_t *flags, const double *cost, const uint64_t *load, uint32_t n,
              uint8_t skip, row_scan_result *out);

/* The least cost over rows whose flags & skip == 0 (+inf when none) into
 * *out_best. Returns 0, or WSEL_EINVAL when such a row's cost is not
 * finite (then *out_best is unset). A zero best may come out as -0.0 where
 * the row-order loop gives +0.0, or the reverse: equal in every use. */
int32_t row_scan_best(const uint8_t *flags, const double *cost, uint32_t n, uint8_t skip,
                      double *out_best);

/* Over rows whose flags & skip == 0: the least of (double)load (+inf when
 * none) and the mean, the double sum in row order of (double)load divided
 * by their count (0 when none). */
void row_scan_loads(const uint8_t *flags, const uint64_t *load, uint32_t n, uint8_t skip,
                    double *out_min, double *out_mean);

#endif
