// SPDX-License-Identifier: Apache-2.0
/*
 * row_scan.c -- see row_scan.h.
 *
 * The SSE2 passes turn each row's flags into a 64-bit lane mask, all ones
 * for a skipped row. OR-ed into a double, that mask makes it a NaN, which
 * MINPD passes over (given a NaN first operand it returns the second), so
 * no row needs a branch.
 */
#include "row_scan.h"

#include <math.h>
#include <string.h>

#include "wsel.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define ROW_SCAN_SSE2 1
#else
#define ROW_SCAN_SSE2 0
#endif

/* The bits of c - c: zero when c is finite, a NaN's otherwise. */
static uint64_t nonfinite_bits(double c)
{
    double z = c - c;
    uint64_t bits;
    memcpy(&bits, &z, sizeof(bits));
    return bits;
}

#if ROW_SCAN_SSE2
/* The lane masks of 16 rows: M(k) covers rows 2k and 2k + 1, all ones
 * where flags & skip != 0; `in` holds 0xff per candidate row. Written out
 * (a macro, not a function filling an array) so they stay in registers. */
#define LANE_MASKS(flags, vskip)                                                         \
    const __m128i in = _mm_cmpeq_epi8(                                                   \
        _mm_and_si128(_mm_loadu_si128((const __m128i *)(const void *)(flags)), vskip),   \
        _mm_setzero_si128());                                                            \
    const __m128i m_ = _mm_xor_si128(in, _mm_set1_epi8(-1));                             \
    const __m128i lo_ = _mm_unpacklo_epi8(m_, m_), hi_ = _mm_unpackhi_epi8(m_, m_);      \
    const __m128i w0_ = _mm_unpacklo_epi16(lo_, lo_),                                    \
                  w1_ = _mm_unpackhi_epi16(lo_, lo_);                                    \
    const __m128i w2_ = _mm_unpacklo_epi16(hi_, hi_),                                    \
                  w3_ = _mm_unpackhi_epi16(hi_, hi_);                                    \
    const __m128i M0 = _mm_unpacklo_epi32(w0_, w0_), M1 = _mm_unpackhi_epi32(w0_, w0_);  \
    const __m128i M2 = _mm_unpacklo_epi32(w1_, w1_), M3 = _mm_unpackhi_epi32(w1_, w1_);  \
    const __m128i M4 = _mm_unpacklo_epi32(w2_, w2_), M5 = _mm_unpackhi_epi32(w2_, w2_);  \
    const __m128i M6 = _mm_unpacklo_epi32(w3_, w3_), M7 = _mm_unpackhi_epi32(w3_, w3_)

#endif

static int32_t best_masked(const uint8_t *flags, const double *cost, uint32_t n,
                           uint8_t skip, double *out_best)
{
    double best = INFINITY;
    uint64_t bad = 0;
    uint32_t i = 0;
#if ROW_SCAN_SSE2
    const __m128i vskip = _mm_set1_epi8((char)skip);
    __m128d vbest = _mm_set1_pd(INFINITY);
    __m128i vbad = _mm_setzero_si128();
    const __m128d inf = _mm_set1_pd(INFINITY);
    /* Per pair of rows: x = the cost, +0.0 where skipped; its x - x (0
     * unless a candidate's cost is not finite); the cost, +inf where
     * skipped. Minima and ORs combine as trees inside the 16 rows, so the
     * running minimum waits on one MINPD per 16 rows, not per pair. */
#define BEST_PAIR(k, M, x, d)                                                            \
    const __m128d x =                                                                    \
        _mm_andnot_pd(_mm_castsi128_pd(M), _mm_loadu_pd(cost + i + 2 * (k)));            \
    const __m128d d = _mm_or_pd(x, _mm_and_pd(_mm_castsi128_pd(M), inf))
    for (; i + 16 <= n; i += 16) {
        LANE_MASKS(flags + i, vskip);
        (void)in;
        BEST_PAIR(0, M0, x0, d0);
        BEST_PAIR(1, M1, x1, d1);
        BEST_PAIR(2, M2, x2, d2);
        BEST_PAIR(3, M3, x3, d3);
        BEST_PAIR(4, M4, x4, d4);
        BEST_PAIR(5, M5, x5, d5);
        BEST_PAIR(6, M6, x6, d6);
        BEST_PAIR(7, M7, x7, d7);
        __m128d z =
            _mm_or_pd(_mm_or_pd(_mm_or_pd(_mm_sub_pd(x0, x0), _mm_sub_pd(x1, x1)),
                                _mm_or_pd(_mm_sub_pd(x2, x2), _mm_sub_pd(x3, x3))),
                      _mm_or_pd(_mm_or_pd(_mm_sub_pd(x4, x4), _mm_sub_pd(x5, x5)),
                                _mm_or_pd(_mm_sub_pd(x6, x6), _mm_sub_pd(x7, x7))));
        vbad = _mm_or_si128(vbad, _mm_castpd_si128(z));
        __m128d m = _mm_min_pd(_mm_min_pd(_mm_min_pd(d0, d1), _mm_min_pd(d2, d3)),
                               _mm_min_pd(_mm_min_pd(d4, d5), _mm_min_pd(d6, d7)));
        vbest = _mm_min_pd(m, vbest);
    }
#undef BEST_PAIR
    double lanes[2];
    uint64_t bad_lanes[2];
    _mm_storeu_pd(lanes, vbest);
    _mm_storeu_si128((__m128i *)(void *)bad_lanes, vbad);
    best = lanes[0] < lanes[1] ? lanes[0] : lanes[1];
    bad = bad_lanes[0] | bad_lanes[1];
#endif
    for (; i < n; i++) {
        if (flags[i] & skip)
            continue;
        double c = cost[i];
        bad |= nonfinite_bits(c);
        best = best < c ? best : c;
    }
    if (bad != 0)
        return WSEL_EINVAL;
    *out_best = best;
    return 0;
}

/* Row-order double sum and minimum: the definition. */
static void loads_in_order(const uint8_t *flags, const uint64_t *load, uint32_t n,
                           uint8_t skip, double *out_min, double *out_mean)
{
    double least = INFINITY, sum = 0.0;
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (flags[i] & skip)
            continue;
        double l = (double)load[i];
        least = l < least ? l : least;
        sum += l;
        count++;
    }
    *out_min = least;
    *out_mean = count > 0 ? sum / (double)count : 0.0;
}

/*
 * When every candidate load is below 2^52 and their sum below 2^53, every
 * partial sum of the row-order loop is an exact double, so that loop's sum
 * is the integer sum converted once, and its minimum the integer minimum.
 * The SSE2 pass keeps the sum in integers and the minimum as the doubles
 * 2^52 + load (the bits of load | 2^52's exponent: ordered as the loads
 * are), checking the bounds every 2,048 rows (so the integer sum cannot
 * wrap in between); past them it hands over to the row-order loop.
 */
static void loads_masked(const uint8_t *flags, const uint64_t *load, uint32_t n,
                         uint8_t skip, double *out_min, double *out_mean)
{
#if ROW_SCAN_SSE2
    const uint64_t small = 1ull << 52, exact = 1ull << 53;
    const __m128i vskip = _mm_set1_epi8((char)skip), zero = _mm_setzero_si128();
    const __m128i magic = _mm_set1_epi64x(0x4330000000000000ll); /* 2^52 */
    const __m128i low52 = _mm_set1_epi64x(0x000fffffffffffffll);
    __m128d vleast = _mm_set1_pd(INFINITY);
    __m128i vsum = zero, vany = zero;
    uint64_t count = 0;
    uint32_t i = 0;
    while (i + 16 <= n) {
        uint32_t chunk_end = n - i > 2048 ? i + 2048 : n;
        __m128i vcount = zero; /* candidates per byte lane: at most 128 */
        /* Per pair of rows: v = the load, 0 where skipped, into the sum and
         * the OR; 2^52 + v as a double into the minimum, 2^53 - 1 (no
         * candidate's can be larger) where skipped. Trees inside the 16 rows,
         * as in row_scan_best. */
#define LOAD_PAIR(k, M, v, d)                                                            \
    const __m128i v = _mm_andnot_si128(                                                  \
        M, _mm_loadu_si128((const __m128i *)(const void *)(load + i + 2 * (k))));        \
    const __m128d d =                                                                    \
        _mm_castsi128_pd(_mm_or_si128(_mm_or_si128(v, magic), _mm_and_si128(M, low52)))
        for (; i + 16 <= chunk_end; i += 16) {
            LANE_MASKS(flags + i, vskip);
            vcount = _mm_sub_epi8(vcount, in);
            LOAD_PAIR(0, M0, v0, d0);
            LOAD_PAIR(1, M1, v1, d1);
            LOAD_PAIR(2, M2, v2, d2);
            LOAD_PAIR(3, M3, v3, d3);
            LOAD_PAIR(4, M4, v4, d4);
            LOAD_PAIR(5, M5, v5, d5);
            LOAD_PAIR(6, M6, v6, d6);
            LOAD_PAIR(7, M7, v7, d7);
            vsum = _mm_add_epi64(
                vsum, _mm_add_epi64(
                          _mm_add_epi64(_mm_add_epi64(v0, v1), _mm_add_epi64(v2, v3)),
                          _mm_add_epi64(_mm_add_epi64(v4, v5), _mm_add_epi64(v6, v7))));
            vany = _mm_or_si128(
                vany,
                _mm_or_si128(_mm_or_si128(_mm_or_si128(v0, v1), _mm_or_si128(v2, v3)),
                             _mm_or_si128(_mm_or_si128(v4, v5), _mm_or_si128(v6, v7))));
            __m128d m = _mm_min_pd(_mm_min_pd(_mm_min_pd(d0, d1), _mm_min_pd(d2, d3)),
                                   _mm_min_pd(_mm_min_pd(d4, d5), _mm_min_pd(d6, d7)));
            vleast = _mm_min_pd(m, vleast);
        }
#undef LOAD_PAIR
        uint64_t lanes[2];
        _mm_storeu_si128((__m128i *)(void *)lanes, _mm_sad_epu8(vcount, zero));
        count += lanes[0] + lanes[1];
        uint64_t s[2], a[2];
        _mm_storeu_si128((__m128i *)(void *)s, vsum);
        _mm_storeu_si128((__m128i *)(void *)a, vany);
        if ((a[0] | a[1]) >= small || s[0] + s[1] >= exact) {
            loads_in_order(flags, load, n, skip, out_min, out_mean);
            return;
        }
    }
    uint64_t s[2], a[2];
    double l[2];
    _mm_storeu_si128((__m128i *)(void *)s, vsum);
    _mm_storeu_si128((__m128i *)(void *)a, vany);
    _mm_storeu_pd(l, vleast);
    uint64_t sum = s[0] + s[1], any = a[0] | a[1];
    double least = l[0] < l[1] ? l[0] : l[1];
    /* Back from 2^52 + least (2^52 - 1 when only skipped rows so far: no
     * candidate load below 2^52 is larger, and none is counted at all
     * when count stays 0). */
    least = least - 4503599627370496.0;
    for (; i < n; i++) {
        if (flags[i] & skip)
            continue;
        double v = (double)load[i];
        least = v < least ? v : least;
        sum += load[i];
        any |= load[i];
        count++;
    }
    if (any >= small || sum >= exact) {
        loads_in_order(flags, load, n, skip, out_min, out_mean);
        return;
    }
    *out_min = count > 0 ? least : INFINITY;
    *out_mean = count > 0 ? (double)sum / (double)count : 0.0;
#else
    loads_in_order(flags, load, n, skip, out_min, out_mean);
#endif
}

/* --- every row at once, then the skipped ones taken back out ------------ */

/*
 * Most rows are candidates, so the SSE2 pass reads every row with no mask
 * at all, and visits the few skipped rows one by one (16 rows' flags a
 * step): their loads come back out of the sum, and the least of their
 * costs and of their loads is kept apart. Every cost finite (their sum is:
 * a NaN or an infinity makes it so, an overflow only sends the scan to the
 * masked pass), the least cost over every row is the candidates' unless a
 * skipped row is at or below it; the same for the loads, when every load
 * is below 2^52 and their sum below 2^53 (each chunk of 2,048 rows is
 * checked, so the integer sum cannot wrap in between). Whenever one of
 * these fails, the masked passes above answer instead (the loads only when
 * asked for: row_scan_loads).
 */
void row_scan(const uint8_t *flags, const double *cost, const uint64_t *load, uint32_t n,
              uint8_t skip, row_scan_result *out)
{
    out->best_known = 0;
    out->loads_known = 0;
#if ROW_SCAN_SSE2
    const uint64_t small = 1ull << 52, exact = 1ull << 53;
    const __m128i magic = _mm_set1_epi64x(0x4330000000000000ll); /* 2^52 */
    const __m128i vskip = _mm_set1_epi8((char)skip), zero = _mm_setzero_si128();
    __m128d vbest = _mm_set1_pd(INFINITY), vleast = vbest, vcsum = _mm_setzero_pd();
    __m128i vsum = zero, vany = zero;
    double skipped_cost = INFINITY;
    uint64_t skipped_load = UINT64_MAX, skipped_sum = 0;
    uint32_t skipped = 0, i = 0;
    int fits = 1;
#define SKIPPED_ROW(r)                                                                   \
    do {                                                                                 \
        skipped_cost = cost[r] < skipped_cost ? cost[r] : skipped_cost;                  \
        skipped_load = load[r] < skipped_load ? load[r] : skipped_load;                  \
        skipped_sum += load[r];                                                          \
        skipped++;                                                                       \
    } while (0)
    while (fits && i + 16 <= n) {
        uint32_t chunk_end = n - i > 2048 ? i + 2048 : n;
        for (; i + 16 <= chunk_end; i += 16) {
            const double *c = cost + i;
            __m128d c0 = _mm_loadu_pd(c), c1 = _mm_loadu_pd(c + 2),
                    c2 = _mm_loadu_pd(c + 4), c3 = _mm_loadu_pd(c + 6),
                    c4 = _mm_loadu_pd(c + 8), c5 = _mm_loadu_pd(c + 10),
                    c6 = _mm_loadu_pd(c + 12), c7 = _mm_loadu_pd(c + 14);
            vcsum = _mm_add_pd(
                vcsum, _mm_add_pd(_mm_add_pd(_mm_add_pd(c0, c1), _mm_add_pd(c2, c3)),
                                  _mm_add_pd(_mm_add_pd(c4, c5), _mm_add_pd(c6, c7))));
            vbest =
                _mm_min_pd(_mm_min_pd(_mm_min_pd(_mm_min_pd(c0, c1), _mm_min_pd(c2, c3)),
                                      _mm_min_pd(_mm_min_pd(c4, c5), _mm_min_pd(c6, c7))),
                           vbest);
            const __m128i *p = (const __m128i *)(const void *)(load + i);
            __m128i v0 = _mm_loadu_si128(p), v1 = _mm_loadu_si128(p + 1),
                    v2 = _mm_loadu_si128(p + 2), v3 = _mm_loadu_si128(p + 3),
                    v4 = _mm_loadu_si128(p + 4), v5 = _mm_loadu_si128(p + 5),
                    v6 = _mm_loadu_si128(p + 6), v7 = _mm_loadu_si128(p + 7);
            vsum = _mm_add_epi64(
                vsum, _mm_add_epi64(
                          _mm_add_epi64(_mm_add_epi64(v0, v1), _mm_add_epi64(v2, v3)),
                          _mm_add_epi64(_mm_add_epi64(v4, v5), _mm_add_epi64(v6, v7))));
            vany = _mm_or_si128(
                vany,
                _mm_or_si128(_mm_or_si128(_mm_or_si128(v0, v1), _mm_or_si128(v2, v3)),
                             _mm_or_si128(_mm_or_si128(v4, v5), _mm_or_si128(v6, v7))));
#define AS_DOUBLE(v) _mm_castsi128_pd(_mm_or_si128(v, magic))
            vleast = _mm_min_pd(
                _mm_min_pd(_mm_min_pd(_mm_min_pd(AS_DOUBLE(v0), AS_DOUBLE(v1)),
                                      _mm_min_pd(AS_DOUBLE(v2), AS_DOUBLE(v3))),
                           _mm_min_pd(_mm_min_pd(AS_DOUBLE(v4), AS_DOUBLE(v5)),
                                      _mm_min_pd(AS_DOUBLE(v6), AS_DOUBLE(v7)))),
                vleast);
#undef AS_DOUBLE
            __m128i f = _mm_loadu_si128((const __m128i *)(const void *)(flags + i));
            unsigned out_rows = (unsigned)_mm_movemask_epi8(
                                    _mm_cmpeq_epi8(_mm_and_si128(f, vskip), zero)) ^
                                0xffffu;
            for (; out_rows != 0; out_rows &= out_rows - 1)
                SKIPPED_ROW(i + (uint32_t)__builtin_ctz(out_rows));
        }
        uint64_t sv[2], av[2];
        _mm_storeu_si128((__m128i *)(void *)sv, vsum);
        _mm_storeu_si128((__m128i *)(void *)av, vany);
        fits = (av[0] | av[1]) < small && sv[0] + sv[1] < exact;
    }
    double b[2], l[2], cs[2];
    uint64_t sv[2], av[2];
    _mm_storeu_pd(b, vbest);
    _mm_storeu_pd(l, vleast);
    _mm_storeu_pd(cs, vcsum);
    _mm_storeu_si128((__m128i *)(void *)sv, vsum);
    _mm_storeu_si128((__m128i *)(void *)av, vany);
    double best = b[0] < b[1] ? b[0] : b[1], csum = cs[0] + cs[1];
    /* Back from 2^52 + least (+inf: no row yet). */
    double least = (l[0] < l[1] ? l[0] : l[1]) - 4503599627370496.0;
    uint64_t sum = sv[0] + sv[1], any = av[0] | av[1];
    for (; fits && i < n; i++) {
        csum += cost[i];
        best = best < cost[i] ? best : cost[i];
        double v = (double)load[i];
        least = v < least ? v : least;
        sum += load[i];
        any |= load[i];
        if (flags[i] & skip)
            SKIPPED_ROW(i);
    }
#undef SKIPPED_ROW
    if (fits && csum - csum == 0.0 && skipped_cost > best) {
        out->best = best;
        out->best_known = 1;
    }
    if (fits && any < small && sum < exact && skipped < n &&
        (double)skipped_load > least) {
        out->min_load = least;
        out->mean_load = (double)(sum - skipped_sum) / (double)(n - skipped);
        out->loads_known = 1;
    }
#else
    (void)flags;
    (void)cost;
    (void)load;
    (void)n;
    (void)skip;
#endif
}

int32_t row_scan_best(const uint8_t *flags, const double *cost, uint32_t n, uint8_t skip,
                      double *out_best)
{
    return best_masked(flags, cost, n, skip, out_best);
}

void row_scan_loads(const uint8_t *flags, const uint64_t *load, uint32_t n, uint8_t skip,
                    double *out_min, double *out_mean)
{
    loads_masked(flags, load, n, skip, out_min, out_mean);
}
