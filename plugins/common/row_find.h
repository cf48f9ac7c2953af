// SPDX-License-Identifier: Apache-2.0
/*
 * row_find.h -- jumps over the rows that cannot matter: the first row of a
 * 64-bit column at or below a limit, and the group that holds a row.
 *
 * A policy that keeps a running best can skip every group whose rows all
 * lie above a bound derived from it (dpgroup: a group's least wait is at
 * least its rows' prefill, its scores at least their decode load). Such a
 * scan reads one column at about two instructions a row, where a pass that
 * scores each group reads several columns and pays a loop per group.
 * Exact: the rows skipped are exactly those above the limit. Pure, any
 * thread; static inline.
 */
#ifndef WSEL_PLUGINS_ROW_FIND_H
#define WSEL_PLUGINS_ROW_FIND_H

#include <stdint.h>

#include "sse2_rows.h"
#include "wsel.h"

/* The first row i in [from, end) with col[i] <= limit, or end if none. */
static inline uint32_t row_find_at_most_u64(const uint64_t *col, uint32_t from, uint32_t end,
                                            uint64_t limit)
{
    uint32_t i = from;
#if SSE2_ROWS
    /* x - (limit + 1) has its sign bit set for every x <= limit when limit <
     * 2^63 (and for a few x >= 2^63, which the scalar check below drops):
     * 8 rows a step, one branch. */
    if (limit < (UINT64_C(1) << 63)) {
        const __m128i above = _mm_set1_epi64x((long long)(limit + 1));
        for (; end - i >= 8; i += 8) {
            const __m128i *p = (const __m128i *)(const void *)(col + i);
            __m128i d0 = _mm_sub_epi64(_mm_loadu_si128(p), above);
            __m128i d1 = _mm_sub_epi64(_mm_loadu_si128(p + 1), above);
            __m128i d2 = _mm_sub_epi64(_mm_loadu_si128(p + 2), above);
            __m128i d3 = _mm_sub_epi64(_mm_loadu_si128(p + 3), above);
            __m128i any = _mm_or_si128(_mm_or_si128(d0, d1), _mm_or_si128(d2, d3));
            if (_mm_movemask_pd(_mm_castsi128_pd(any)) == 0)
                continue;
            for (uint32_t k = i; k < i + 8; k++)
                if (col[k] <= limit)
                    return k;
        }
    }
#endif
    for (; i < end; i++)
        if (col[i] <= limit)
            break;
    return i;
}

/* The first row i in [from, end) with a[i] <= a_limit and b[i] <= b_limit,
 * or end if none. */
static inline uint32_t row_find_both_at_most_u64(const uint64_t *a, uint64_t a_limit,
                                                 const uint64_t *b, uint64_t b_limit,
                                                 uint32_t from, uint32_t end)
{
    const uint64_t sign = UINT64_C(1) << 63;
    if (a_limit >= sign || b_limit >= sign) { /* one column decides, or neither */
        for (uint32_t i = from;; i++) {
            if (a_limit < sign)
                i = row_find_at_most_u64(a, i, end, a_limit);
            else if (b_limit < sign)
                i = row_find_at_most_u64(b, i, end, b_limit);
            if (i >= end || (a[i] <= a_limit && b[i] <= b_limit))
                return i;
        }
    }
    uint32_t i = from;
#if SSE2_ROWS
    /* As row_find_at_most_u64, a row a candidate when both signs are set:
     * the AND of the two differences. 8 rows a step. */
    const __m128i a_above = _mm_set1_epi64x((long long)(a_limit + 1));
    const __m128i b_above = _mm_set1_epi64x((long long)(b_limit + 1));
    for (; end - i >= 8; i += 8) {
        const __m128i *pa = (const __m128i *)(const void *)(a + i);
        const __m128i *pb = (const __m128i *)(const void *)(b + i);
        __m128i d0 = _mm_and_si128(_mm_sub_epi64(_mm_loadu_si128(pa), a_above),
                                   _mm_sub_epi64(_mm_loadu_si128(pb), b_above));
        __m128i d1 = _mm_and_si128(_mm_sub_epi64(_mm_loadu_si128(pa + 1), a_above),
                                   _mm_sub_epi64(_mm_loadu_si128(pb + 1), b_above));
        __m128i d2 = _mm_and_si128(_mm_sub_epi64(_mm_loadu_si128(pa + 2), a_above),
                                   _mm_sub_epi64(_mm_loadu_si128(pb + 2), b_above));
        __m128i d3 = _mm_and_si128(_mm_sub_epi64(_mm_loadu_si128(pa + 3), a_above),
                                   _mm_sub_epi64(_mm_loadu_si128(pb + 3), b_above));
        __m128i any = _mm_or_si128(_mm_or_si128(d0, d1), _mm_or_si128(d2, d3));
        if (_mm_movemask_pd(_mm_castsi128_pd(any)) == 0)
            continue;
        for (uint32_t k = i; k < i + 8; k++)
            if (a[k] <= a_limit && b[k] <= b_limit)
                return k;
    }
#endif
    for (; i < end; i++)
        if (a[i] <= a_limit && b[i] <= b_limit)
            break;
    return i;
}

/* 1 when a[i] <= a_limit and a[i] * k + b[i] <= bound, a[i] and b[i]
 * converted to double, multiplied, then added (no FMA in a baseline
 * build). */
static inline int row_weighted_at_most(const uint64_t *a, uint64_t a_limit, double k,
                                       const uint64_t *b, double bound, uint32_t i)
{
    return a[i] <= a_limit && (double)a[i] * k + (double)b[i] <= bound;
}

#if SSE2_ROWS
/* row_weighted_at_most of 2 rows, a[] in x and b[] in y, each below 2^52:
 * x | bits(2^52) is then the double 2^52 + x exactly, and less 2^52 the
 * double x, as the conversion gives it. A lane mask. */
static inline __m128d row_weighted_pair(__m128i x, __m128i y, __m128d a_limit, __m128d k,
                                        __m128d bound)
{
    const __m128i bits = _mm_set1_epi64x(0x4330000000000000LL);
    const __m128d two52 = _mm_set1_pd(0x1p52);
    const __m128d xa = _mm_sub_pd(_mm_castsi128_pd(_mm_or_si128(x, bits)), two52);
    const __m128d yb = _mm_sub_pd(_mm_castsi128_pd(_mm_or_si128(y, bits)), two52);
    return _mm_and_pd(_mm_cmple_pd(xa, a_limit),
                      _mm_cmple_pd(_mm_add_pd(_mm_mul_pd(xa, k), yb), bound));
}
#endif

/* The first row i in [from, end) that row_weighted_at_most keeps, or end
 * if none. */
static inline uint32_t row_find_weighted_at_most(const uint64_t *a, uint64_t a_limit,
                                                 double k, const uint64_t *b, double bound,
                                                 uint32_t from, uint32_t end)
{
    uint32_t i = from;
#if SSE2_ROWS
    /* 8 rows a step while every value of the step is below 2^52 (a_limit,
     * exact up to 2^52, compares alike); a step with a larger value is
     * checked row by row. */
    const __m128i big = _mm_set1_epi64x((long long)~((UINT64_C(1) << 52) - 1));
    const __m128d vk = _mm_set1_pd(k), vb = _mm_set1_pd(bound);
    const __m128d va = _mm_set1_pd((double)(a_limit < (UINT64_C(1) << 52)
                                                ? a_limit
                                                : (UINT64_C(1) << 52)));
    for (; end - i >= 8; i += 8) {
        const __m128i *pa = (const __m128i *)(const void *)(a + i);
        const __m128i *pb = (const __m128i *)(const void *)(b + i);
        const __m128i x0 = _mm_loadu_si128(pa), x1 = _mm_loadu_si128(pa + 1);
        const __m128i x2 = _mm_loadu_si128(pa + 2), x3 = _mm_loadu_si128(pa + 3);
        const __m128i y0 = _mm_loadu_si128(pb), y1 = _mm_loadu_si128(pb + 1);
        const __m128i y2 = _mm_loadu_si128(pb + 2), y3 = _mm_loadu_si128(pb + 3);
        const __m128i xs = _mm_or_si128(_mm_or_si128(x0, x1), _mm_or_si128(x2, x3));
        const __m128i ys = _mm_or_si128(_mm_or_si128(y0, y1), _mm_or_si128(y2, y3));
        const __m128i hi = _mm_or_si128(xs, ys);
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(hi, big),
                                             _mm_setzero_si128())) == 0xffff) {
            const __m128d m =
                _mm_or_pd(_mm_or_pd(row_weighted_pair(x0, y0, va, vk, vb),
                                    row_weighted_pair(x1, y1, va, vk, vb)),
                          _mm_or_pd(row_weighted_pair(x2, y2, va, vk, vb),
                                    row_weighted_pair(x3, y3, va, vk, vb)));
            if (_mm_movemask_pd(m) == 0)
                continue;
        }
        for (uint32_t r = i; r < i + 8; r++)
            if (row_weighted_at_most(a, a_limit, k, b, bound, r))
                return r;
    }
#endif
    for (; i < end; i++)
        if (row_weighted_at_most(a, a_limit, k, b, bound, i))
            break;
    return i;
}

/* The group holding `row`, searched from group `from` on (which must hold
 * `row` or precede it): a few steps, then a galloping search, so a jump
 * over many groups costs their logarithm. */
static inline uint32_t row_find_group(const wsel_table *t, uint32_t from, uint32_t row)
{
    const uint32_t *first = t->group_first_row;
    uint32_t lo = from, step = 1;
    /* Invariant: first[lo] <= row. Widen until first[lo + step] > row. */
    while (lo + step < t->num_groups && first[lo + step] <= row) {
        lo += step;
        step *= 2;
    }
    uint32_t hi = lo + step < t->num_groups ? lo + step : t->num_groups;
    while (hi - lo > 1) { /* first[lo] <= row < first[hi] (or hi = num_groups) */
        uint32_t mid = lo + (hi - lo) / 2;
        if (first[mid] <= row)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

#endif
