// SPDX-License-Identifier: Apache-2.0
/*
 * test_table_guard.c -- the checksum select uses for cost columns past
 * WSEL_HOST_SNAPSHOT_ROWS rows (host/table_guard.c, compiled in): every
 * write a plugin bug is likely to make changes it, and the guard's modes
 * catch a write at every size.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "table_guard.h"

#define ROWS 4099u /* not a multiple of 8: the scalar tail is covered */

static double *costs(uint32_t n)
{
    double *c = malloc(n * sizeof(double));
    assert_non_null(c);
    for (uint32_t i = 0; i < n; i++) /* integers, as wsel_table_build makes */
        c[i] = (double)((i * 7919u) % 5000u);
    return c;
}

static int same(const double *c, uint32_t n, const uint64_t want[2])
{
    uint64_t got[2];
    wsel_table_checksum(c, n * sizeof(double), got);
    return got[0] == want[0] && got[1] == want[1];
}

static void test_every_single_bit_flip_is_seen(void **state)
{
    (void)state;
    double *c = costs(ROWS);
    uint64_t sum[2];
    wsel_table_checksum(c, ROWS * sizeof(double), sum);
    uint32_t rows[] = {0, 1, 7, 8, 63, 64, 1000, ROWS - 2, ROWS - 1};
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        for (int bit = 0; bit < 64; bit++) {
            uint64_t w;
            memcpy(&w, &c[rows[r]], 8);
            w ^= 1ull << bit;
            memcpy(&c[rows[r]], &w, 8);
            assert_false(same(c, ROWS, sum));
            w ^= 1ull << bit;
            memcpy(&c[rows[r]], &w, 8);
        }
    }
    assert_true(same(c, ROWS, sum));
    free(c);
}

/* Negating every cost (argmax by negation, in place) flips only the top
 * bit of every word: lost by a plain 64-bit sum, seen here. */
static void test_negating_every_cost_is_seen(void **state)
{
    (void)state;
    for (uint32_t n = 1024; n <= 8192; n *= 2) {
        double *c = costs(n);
        c[0] = 1.0; /* no -0.0 == 0.0 row to leave alone */
        uint64_t sum[2];
        wsel_table_checksum(c, n * sizeof(double), sum);
        for (uint32_t i = 0; i < n; i++)
            c[i] = -c[i];
        assert_false(same(c, n, sum));
        free(c);
    }
}

/* Swapping two different costs, in the same lane (8 rows apart times k)
 * or not, and sorting the column in place. */
static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_moved_costs_are_seen(void **state)
{
    (void)state;
    double *c = costs(ROWS);
    uint64_t sum[2];
    wsel_table_checksum(c, ROWS * sizeof(double), sum);
    uint32_t dist[] = {1, 2, 7, 8, 16, 64, 512, 1024, 4096};
    for (size_t d = 0; d < sizeof(dist) / sizeof(dist[0]); d++) {
        for (uint32_t i = 0; i + dist[d] < ROWS; i += 97) {
            uint32_t j = i + dist[d];
            if (c[i] == c[j])
                continue;
            double t = c[i];
            c[i] = c[j];
            c[j] = t;
            assert_false(same(c, ROWS, sum));
            c[j] = c[i];
            c[i] = t;
        }
    }
    assert_true(same(c, ROWS, sum));
    qsort(c, ROWS, sizeof(double), by_value);
    assert_false(same(c, ROWS, sum));
    free(c);
}

/* NaN, zero or one value written over every row, or over two rows that
 * held equal costs. */
static void test_filled_costs_are_seen(void **state)
{
    (void)state;
    double fills[] = {NAN, 0.0, 1.0, INFINITY};
    for (size_t f = 0; f < sizeof(fills) / sizeof(fills[0]); f++) {
        double *c = costs(ROWS);
        c[8] = c[16] = 42.0;
        uint64_t sum[2];
        wsel_table_checksum(c, ROWS * sizeof(double), sum);
        c[8] = c[16] = fills[f];
        assert_false(same(c, ROWS, sum));
        for (uint32_t i = 0; i < ROWS; i++)
            c[i] = fills[f];
        assert_false(same(c, ROWS, sum));
        free(c);
    }
}

/* Every size from 0 to 200 bytes (head, vector blocks, word tail, byte
 * tail): a change to any byte is seen. */
static void test_every_size_and_byte_is_covered(void **state)
{
    (void)state;
    unsigned char buf[200];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 37u + 11u);
    for (size_t size = 1; size <= sizeof(buf); size++) {
        uint64_t sum[2], got[2];
        wsel_table_checksum(buf, size, sum);
        for (size_t i = 0; i < size; i++) {
            buf[i] ^= 0x80;
            wsel_table_checksum(buf, size, got);
            assert_true(got[0] != sum[0] || got[1] != sum[1]);
            buf[i] ^= 0x80;
        }
    }
}

/* The guard itself, at a size in each mode: flags and costs written
 * are seen; the copied flags are what the caller handed in. */
static void test_guard_catches_writes_in_every_mode(void **state)
{
    (void)state;
    uint32_t sizes[] = {1,
                        8,
                        WSEL_HOST_SNAPSHOT_ROWS,
                        WSEL_HOST_SNAPSHOT_ROWS + 1,
                        4096,
                        WSEL_GUARD_FLAG_ROWS,
                        WSEL_GUARD_FLAG_ROWS + 1,
                        20000};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        uint32_t n = sizes[s];
        double *c = costs(n);
        uint8_t *fl = calloc(n, 1);
        assert_non_null(fl);
        fl[n - 1] = WSEL_ROW_EXCLUDED;
        wsel_table t;
        memset(&t, 0, sizeof(t));
        t.struct_size = sizeof(t);
        t.num_rows = n;
        t.cost = c;
        t.flags = fl;
        wsel_table_guard *g = malloc(sizeof(*g));
        assert_non_null(g);
        for (int what = 0; what < 3; what++) {
            wsel_table_guard_take(g, &t);
            assert_int_equal(g->mode, n <= WSEL_HOST_SNAPSHOT_ROWS ? WSEL_GUARD_COPIED
                                      : n <= WSEL_GUARD_FLAG_ROWS
                                          ? WSEL_GUARD_FLAGS_COPIED
                                          : WSEL_GUARD_SUMMED);
            assert_false(wsel_table_guard_changed(g, &t));
            double keep = c[n / 2];
            if (what == 0)
                fl[n - 1] = 0;
            else if (what == 1)
                c[n / 2] = nextafter(c[n / 2], INFINITY);
            else
                c[n / 2] = NAN;
            assert_true(wsel_table_guard_changed(g, &t));
            if (g->mode != WSEL_GUARD_SUMMED)
                assert_int_equal(g->flags[n - 1], WSEL_ROW_EXCLUDED);
            fl[n - 1] = WSEL_ROW_EXCLUDED;
            c[n / 2] = keep;
        }
        free(g);
        free(fl);
        free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_single_bit_flip_is_seen),
        cmocka_unit_test(test_negating_every_cost_is_seen),
        cmocka_unit_test(test_moved_costs_are_seen),
        cmocka_unit_test(test_filled_costs_are_seen),
        cmocka_unit_test(test_every_size_and_byte_is_covered),
        cmocka_unit_test(test_guard_catches_writes_in_every_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
