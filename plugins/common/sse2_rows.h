// SPDX-License-Identifier: Apache-2.0
/*
 * sse2_rows.h -- the SSE2 pieces every branch-free pass over a table's rows
 * repeats (hysteresis's row_scan.c, chash's scan.c): 16 rows' flag bytes
 * as lane masks, and the trees that fold 16 rows' pairs of lanes.
 *
 * A pass takes 16 rows a step. Their 16 flag bytes become a byte mask
 * (sse2_rows_candidates), widened to 32-bit lanes (4 rows a register) for
 * 32-bit columns or 64-bit lanes (2 rows a register) for doubles and
 * 64-bit columns. The trees combine the 8 registers of one step pairwise,
 * so a running minimum or sum waits on one instruction per 16 rows, not
 * per pair; their operand order is fixed (MINPD is not commutative when a
 * lane is a NaN: it returns the second operand).
 *
 * SSE2_ROWS is 1 where SSE2 is available (every x86-64), else 0 and none
 * of this is defined. Pure, any thread; static inline, so a pass keeps
 * every register it names.
 */
#ifndef WSEL_PLUGINS_SSE2_ROWS_H
#define WSEL_PLUGINS_SSE2_ROWS_H

#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define SSE2_ROWS 1

/* 0xff in byte k when row k of the 16 at `flags` is a candidate (flags &
 * skip == 0), else 0x00. `vskip` is the skip mask in every byte. */
static inline __m128i sse2_rows_candidates(const uint8_t *flags, __m128i vskip)
{
    const __m128i f = _mm_loadu_si128((const __m128i *)(const void *)flags);
    return _mm_cmpeq_epi8(_mm_and_si128(f, vskip), _mm_setzero_si128());
}

/* A 16-row byte mask in 32-bit lanes: w[k] covers rows 4k .. 4k + 3. */
static inline void sse2_rows_widen32(__m128i m, __m128i w[4])
{
    const __m128i lo = _mm_unpacklo_epi8(m, m), hi = _mm_unpackhi_epi8(m, m);
    w[0] = _mm_unpacklo_epi16(lo, lo);
    w[1] = _mm_unpackhi_epi16(lo, lo);
    w[2] = _mm_unpacklo_epi16(hi, hi);
    w[3] = _mm_unpackhi_epi16(hi, hi);
}

/* A 16-row byte mask in 64-bit lanes: w[k] covers rows 2k and 2k + 1.
 * Written out, with no loop (gcc -O2 would not unroll one), so the
 * arrays stay in registers once inlined. */
static inline void sse2_rows_widen64(__m128i m, __m128i w[8])
{
    __m128i q[4];
    sse2_rows_widen32(m, q);
    w[0] = _mm_unpacklo_epi32(q[0], q[0]);
    w[1] = _mm_unpackhi_epi32(q[0], q[0]);
    w[2] = _mm_unpacklo_epi32(q[1], q[1]);
    w[3] = _mm_unpackhi_epi32(q[1], q[1]);
    w[4] = _mm_unpacklo_epi32(q[2], q[2]);
    w[5] = _mm_unpackhi_epi32(q[2], q[2]);
    w[6] = _mm_unpacklo_epi32(q[3], q[3]);
    w[7] = _mm_unpackhi_epi32(q[3], q[3]);
}

/* The lane-wise minimum of 8 registers, as a tree in operand order. */
static inline __m128d sse2_min8_pd(__m128d d0, __m128d d1, __m128d d2, __m128d d3,
                                   __m128d d4, __m128d d5, __m128d d6, __m128d d7)
{
    return _mm_min_pd(_mm_min_pd(_mm_min_pd(d0, d1), _mm_min_pd(d2, d3)),
                      _mm_min_pd(_mm_min_pd(d4, d5), _mm_min_pd(d6, d7)));
}

/* The lane-wise 64-bit sum of 8 registers, as a tree. */
static inline __m128i sse2_add8_epi64(__m128i v0, __m128i v1, __m128i v2, __m128i v3,
                                      __m128i v4, __m128i v5, __m128i v6, __m128i v7)
{
    return _mm_add_epi64(_mm_add_epi64(_mm_add_epi64(v0, v1), _mm_add_epi64(v2, v3)),
                         _mm_add_epi64(_mm_add_epi64(v4, v5), _mm_add_epi64(v6, v7)));
}

/* The bitwise OR of 8 registers, as a tree. */
static inline __m128i sse2_or8(__m128i v0, __m128i v1, __m128i v2, __m128i v3,
                               __m128i v4, __m128i v5, __m128i v6, __m128i v7)
{
    return _mm_or_si128(_mm_or_si128(_mm_or_si128(v0, v1), _mm_or_si128(v2, v3)),
                        _mm_or_si128(_mm_or_si128(v4, v5), _mm_or_si128(v6, v7)));
}

/* The lesser of a register's two lanes (the second when either is a NaN
 * or they are equal). */
static inline double sse2_min_lanes(__m128d v)
{
    double lanes[2];
    _mm_storeu_pd(lanes, v);
    return lanes[0] < lanes[1] ? lanes[0] : lanes[1];
}

/* The sum of a register's two 64-bit lanes (wrapping). */
static inline uint64_t sse2_sum_lanes_u64(__m128i v)
{
    uint64_t lanes[2];
    _mm_storeu_si128((__m128i *)(void *)lanes, v);
    return lanes[0] + lanes[1];
}

/* The OR of a register's two 64-bit lanes. */
static inline uint64_t sse2_or_lanes_u64(__m128i v)
{
    uint64_t lanes[2];
    _mm_storeu_si128((__m128i *)(void *)lanes, v);
    return lanes[0] | lanes[1];
}

#else
#define SSE2_ROWS 0
#endif

#endif
