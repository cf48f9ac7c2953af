// SPDX-License-Identifier: Apache-2.0
/*
 * scan.h -- the chash plugin's passes over every row of a table: the load
 * total, the rows that lead a spill's order, the rows that hold a prefix.
 * SSE2 on x86-64 (no branch per row), plain loops elsewhere; both give
 * exactly what the row-by-row definitions give (the SSE2 passes hand over
 * to them whenever a value is out of the range they handle).
 */
#ifndef WSEL_CHASH_SCAN_H
#define WSEL_CHASH_SCAN_H

#include <stdint.h>

#include "wsel.h"

/* What a worker's load counts (the plugin's `load` parameter). */
enum { CHASH_LOAD_REQUESTS, CHASH_LOAD_BLOCKS };

/* Row i's load: its active requests, or the KV blocks the rank would hold
 * with the request (decode_blocks: its active blocks plus the request's
 * blocks it does not hold, the column Dynamo's cost reads). */
static inline uint64_t chash_row_load(const wsel_table *t, uint32_t i, uint32_t kind)
{
    return kind == CHASH_LOAD_REQUESTS ? t->active_requests[i] : t->decode_blocks[i];
}

/* The sum of chash_row_load over every row, in uint64_t (wrapping as the
 * row-order sum would). */
uint64_t chash_scan_total(const wsel_table *t, uint32_t kind);

/* How many rows have flags & skip == 0. */
uint32_t chash_scan_eligible(const uint8_t *flags, uint32_t n, uint8_t skip);

/* The rows a spill's order puts first: eligible (flags & skip == 0), outside
 * rows [xf, xe), with the deepest overlap when `by_overlap` (any overlap
 * otherwise), and among those the least cost. Sets *out_ov (0 unless
 * by_overlap) and *out_cost and returns 0; returns -1 when no such row
 * exists or one of the deepest has a NaN cost (the caller
 * then judges every row). */
int chash_scan_leaders(const wsel_table *t, uint8_t skip, int by_overlap, uint32_t xf,
                       uint32_t xe, uint32_t *out_ov, double *out_cost);

/* The rows a spill=overlap order puts first, in one pass: eligible, outside
 * [xf, xe), at the deepest overlap, at the least cost among those. Writes
 * the first `cap` of them, in row order, to rows[] and returns how many
 * there are (1 to cap); returns -1 when it cannot answer: no eligible row,
 * more than `cap` of them, a NaN cost, an overlap past 32,767, or more
 * than `limit` rows at the deepest overlap so far met (many ties: the
 * passes above do better). */
int chash_scan_deepest_rows(const wsel_table *t, uint8_t skip, uint32_t xf, uint32_t xe,
                            uint32_t limit, uint32_t *rows, uint32_t cap);

/* The first row at or after `from`, outside [xf, xe), eligible, with cost
 * == `cost` and (when by_overlap) overlap == `ov`; UINT32_MAX when none. */
uint32_t chash_scan_next_leader(const wsel_table *t, uint8_t skip, int by_overlap,
                                uint32_t ov, double cost, uint32_t from, uint32_t xf,
                                uint32_t xe);

/* The first row at or after `from`, outside [xf, xe), eligible, with
 * overlap >= depth; UINT32_MAX when none. */
uint32_t chash_scan_next_holder(const wsel_table *t, uint8_t skip, uint32_t depth,
                                uint32_t from, uint32_t xf, uint32_t xe);

/* The group (worker) of row `row`: the last g with group_first_row[g] <=
 * row. O(log groups). */
uint32_t chash_group_of_row(const wsel_table *t, uint32_t row);

#endif
