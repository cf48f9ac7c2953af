// SPDX-License-Identifier: Apache-2.0
/*
 * table_guard.c -- catch a plugin writing the table's flags or cost column
 * (select.c calls it around every in-process select).
 *
 * Tables of up to WSEL_HOST_SNAPSHOT_ROWS rows: both columns are copied to
 * the caller's stack and compared after the call (libc's memcpy and memcmp
 * are the fastest way through 9 bytes a row; an SSE2 checksum of the costs
 * was measured slower, docs/robustness.md). The fallback then reads the
 * copies, so a plugin that clears WSEL_ROW_EXCLUDED or writes NaN costs
 * changes nothing.
 *
 * Larger tables: the flags are still copied, into the same 9 KiB, up to
 * WSEL_GUARD_FLAG_ROWS rows (so an answer or the fallback never lands on a
 * row the caller excluded), and the cost column is checksummed before and
 * after. Past WSEL_GUARD_FLAG_ROWS the flags are checksummed too and the
 * fallback reads what the plugin left.
 */
#include "table_guard.h"

#include <string.h>

/*
 * The checksum: Fletcher's pair of sums (a += w; b += a, so b weighs each
 * word by its position) in 8 independent 64-bit lanes, 64 bytes a step, no
 * dependency from one lane to another, which gcc and clang compile to SSE2
 * adds (2 a 16-byte vector). The words are read from byte 4 on, so a
 * double's sign and exponent sit in the middle of a lane: an addition
 * loses only the top bit of a lane, which is then bit 31 of a mantissa,
 * not the sign (negating every cost changes the sum). The lanes are mixed
 * with distinct odd multipliers at the end, so a value moved from one lane
 * to another changes the result too. It catches what a bug writes; it is
 * not meant to resist a plugin forging a collision.
 */
#if defined(__GNUC__) || defined(__clang__)
typedef uint64_t u64x2 __attribute__((vector_size(16)));
#define WSEL_GUARD_VECTORS 1
#endif

#define MIX 0x9e3779b97f4a7c15ull

static uint64_t word_at(const unsigned char *p, size_t len)
{
    uint64_t w = 0;
    memcpy(&w, p, len);
    return w;
}

void wsel_table_checksum(const void *data, size_t size, uint64_t out[2])
{
    const unsigned char *p = data;
    uint64_t a = size, b = 0, ha = 0, hb = 0;
    size_t head = size < 4 ? size : 4;
    a += word_at(p, head);
    b += a;
    size_t i = head;
#ifdef WSEL_GUARD_VECTORS
    if (size - i >= 64) {
        u64x2 a0 = {0, 0}, a1 = a0, a2 = a0, a3 = a0;
        u64x2 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (; size - i >= 64; i += 64) {
            u64x2 w0, w1, w2, w3;
            memcpy(&w0, p + i, 16);
            memcpy(&w1, p + i + 16, 16);
            memcpy(&w2, p + i + 32, 16);
            memcpy(&w3, p + i + 48, 16);
            a0 += w0;
            a1 += w1;
            a2 += w2;
            a3 += w3;
            b0 += a0;
            b1 += a1;
            b2 += a2;
            b3 += a3;
        }
        uint64_t la[8] = {a0[0], a0[1], a1[0], a1[1], a2[0], a2[1], a3[0], a3[1]};
        uint64_t lb[8] = {b0[0], b0[1], b1[0], b1[1], b2[0], b2[1], b3[0], b3[1]};
        for (int k = 0; k < 8; k++) {
            ha = (ha + la[k]) * MIX;
            hb = (hb + lb[k]) * MIX;
        }
    }
#endif
    for (; i < size; i += 8) {
        size_t len = size - i < 8 ? size - i : 8;
        a += word_at(p + i, len);
        b += a;
    }
    out[0] = (ha ^ a) * MIX + (a >> 32);
    out[1] = (hb ^ b) * MIX + (b >> 32) + (hb >> 29);
}

static void checksum_pair(const wsel_table *table, uint64_t cost[2], uint64_t flags[2],
                          int with_flags)
{
    uint32_t n = table->num_rows;
    wsel_table_checksum(table->cost, (size_t)n * sizeof(double), cost);
    if (with_flags)
        wsel_table_checksum(table->flags, n, flags);
}

void wsel_table_guard_take(wsel_table_guard *g, const wsel_table *table)
{
    uint32_t n = table->num_rows;
    g->flags = table->flags;
    g->cost = table->cost;
    g->mode = WSEL_GUARD_COPIED;
    if (n <= WSEL_HOST_SNAPSHOT_ROWS) {
        memcpy(g->copy.both.flags, table->flags, n);
        memcpy(g->copy.both.cost, table->cost, n * sizeof(double));
    } else {
        g->mode = n <= WSEL_GUARD_FLAG_ROWS ? WSEL_GUARD_FLAGS_COPIED : WSEL_GUARD_SUMMED;
        checksum_pair(table, g->cost_sum, g->flag_sum, g->mode == WSEL_GUARD_SUMMED);
        if (g->mode == WSEL_GUARD_FLAGS_COPIED) {
            memcpy(g->copy.flags, table->flags, n);
            g->flags = g->copy.flags;
        }
        return;
    }
    g->flags = g->copy.both.flags;
    g->cost = g->copy.both.cost;
}

int wsel_table_guard_changed(const wsel_table_guard *g, const wsel_table *table)
{
    uint32_t n = table->num_rows;
    switch (g->mode) {
    case WSEL_GUARD_COPIED:
        return memcmp(g->copy.both.flags, table->flags, n) != 0 ||
               memcmp(g->copy.both.cost, table->cost, n * sizeof(double)) != 0;
    case WSEL_GUARD_FLAGS_COPIED: {
        if (memcmp(g->copy.flags, table->flags, n) != 0)
            return 1;
        uint64_t cost[2];
        checksum_pair(table, cost, NULL, 0);
        return cost[0] != g->cost_sum[0] || cost[1] != g->cost_sum[1];
    }
    default: {
        uint64_t cost[2], flags[2];
        checksum_pair(table, cost, flags, 1);
        return cost[0] != g->cost_sum[0] || cost[1] != g->cost_sum[1] ||
               flags[0] != g->flag_sum[0] || flags[1] != g->flag_sum[1];
    }
    }
}
