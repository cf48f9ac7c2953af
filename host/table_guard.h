// SPDX-License-Identifier: Apache-2.0
/*
 * table_guard.h -- what select checks a plugin did not write: the table's
 * flags and cost columns (table_guard.c; used by select.c).
 *
 * The guard lives on the calling thread's stack (selects run on any thread
 * at once and may not allocate): 9 bytes a row of WSEL_HOST_SNAPSHOT_ROWS,
 * 9 KiB, whatever the table's size.
 */
#ifndef WSEL_HOST_TABLE_GUARD_H
#define WSEL_HOST_TABLE_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

/* Tables past WSEL_HOST_SNAPSHOT_ROWS rows whose flags still fit the
 * 9 KiB: 9,216 rows. */
#define WSEL_GUARD_FLAG_ROWS (9u * WSEL_HOST_SNAPSHOT_ROWS)

#define WSEL_GUARD_COPIED       0u /* both columns copied (small tables) */
#define WSEL_GUARD_FLAGS_COPIED 1u /* flags copied, costs checksummed */
#define WSEL_GUARD_SUMMED       2u /* both checksummed (largest tables) */

typedef struct wsel_table_guard {
    const uint8_t *flags; /* what answers and the fallback read */
    const double *cost;   /* what the fallback ranks */
    uint32_t mode;        /* WSEL_GUARD_* */
    uint64_t cost_sum[2]; /* checksums before the call (when not copied) */
    uint64_t flag_sum[2];
    union {
        struct {
            uint8_t flags[WSEL_HOST_SNAPSHOT_ROWS];
            double cost[WSEL_HOST_SNAPSHOT_ROWS];
        } both;
        uint8_t flags[WSEL_GUARD_FLAG_ROWS];
    } copy;
} wsel_table_guard;

/* Before the call: copy both columns (up to WSEL_HOST_SNAPSHOT_ROWS rows),
 * or copy the flags and checksum the costs (up to WSEL_GUARD_FLAG_ROWS), or
 * checksum both. */
void wsel_table_guard_take(wsel_table_guard *g, const wsel_table *table);

/* After the call: 1 when the flags or cost column changed since _take. */
int wsel_table_guard_changed(const wsel_table_guard *g, const wsel_table *table);

/* The checksum both use, over `size` bytes: two 64-bit sums (a sum and a
 * position-weighted sum, Fletcher's construction) in 8 independent 64-bit
 * lanes. Exposed for the white-box test (tests/host/test_table_guard.c). */
void wsel_table_checksum(const void *data, size_t size, uint64_t out[2]);

#endif
