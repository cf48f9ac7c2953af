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

#include "sse2_rows.h"
#include "wsel.h"

/* The bits of c - c: zero when c is finite, a NaN's otherwise. */
static uint64_t nonfinite_bits(double c)
{
    double z = c - c;
    uint64_t bits;
    memcpy(&bits, &z, sizeof(bits));
    return bits;
}

#if SSE2_ROWS
/* 2^52 as a double's bits: OR-ed into a load below 2^52, the double
 * 2^52 + load, ordered as the loads are. */
#define TWO_52_BITS 0x4330000000000000ll
#define TWO_52      4503599627370496.0

/* The 64-bit lane masks of the 16 rows at `flags`: m[k], rows 2k and
 * 2k + 1, all ones where flags & skip != 0. Returns the byte mask of the
 * candidates (sse2_rows_candidates). */
static inline __m128i skipped_masks(const uint8_t *flags, __m128i vskip, __m128i m[8])
{
    const __m128i in = sse2_rows_candidates(flags, vskip);
    sse2_rows_widen64(_mm_xor_si128(in, _mm_set1_epi8(-1)), m);
    return in;
}

/* Whether loads whose OR is `any` and sum `sum` keep every partial sum
 * exact in a double (each below 2^52, the sum below 2^53). */
static inline int loads_exact(uint64_t any, uint64_t sum)
{
    return any < (1ull << 52) && sum < (1ull << 53);
}
#endif

static int32_t best_masked(const uint8_t *flags, const double *cost, uint32_t n,
                           uint8_t skip, double *out_best)
{
    double best = INFINITY;
    uint64_t bad = 0;
    uint32_t i = 0;
#if SSE2_ROWS
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
#define NONFINITE(x) _mm_castpd_si128(_mm_sub_pd(x, x))
    for (; i + 16 <= n; i += 16) {
        __m128i M[8];
        skipped_masks(flags + i, vskip, M);
        BEST_PAIR(0, M[0], x0, d0);
        BEST_PAIR(1, M[1], x1, d1);
        BEST_PAIR(2, M[2], x2, d2);
        BEST_PAIR(3, M[3], x3, d3);
        BEST_PAIR(4, M[4], x4, d4);
        BEST_PAIR(5, M[5], x5, d5);
        BEST_PAIR(6, M[6], x6, d6);
        BEST_PAIR(7, M[7], x7, d7);
        vbad = _mm_or_si128(vbad, sse2_or8(NONFINITE(x0), NONFINITE(x1), NONFINITE(x2),
                                           NONFINITE(x3), NONFINITE(x4), NONFINITE(x5),
                                           NONFINITE(x6), NONFINITE(x7)));
        vbest = _mm_min_pd(sse2_min8_pd(d0, d1, d2, d3, d4, d5, d6, d7), vbest);
    }
#undef NONFINITE
#undef BEST_PAIR
    best = sse2_min_lanes(vbest);
    bad = sse2_or_lanes_u64(vbad);
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
#if SSE2_ROWS
/* What the masked load pass has met so far over the candidates: the least
 * load as 2^52 + load, the load sum and OR, the count. */
typedef struct load_pass {
    __m128d least;
    __m128i sum, any;
    uint64_t count;
} load_pass;

/* Whole steps of 16 rows into *p, in chunks of 2,048 rows. Returns the
 * first row not taken, or UINT32_MAX once the loads are not exact. */
static inline uint32_t load_pass_steps(load_pass *p, const uint8_t *flags,
                                       const uint64_t *load, uint32_t n, uint8_t skip)
{
    const __m128i vskip = _mm_set1_epi8((char)skip), zero = _mm_setzero_si128();
    const __m128i magic = _mm_set1_epi64x(TWO_52_BITS);
    const __m128i low52 = _mm_set1_epi64x(0x000fffffffffffffll);
    p->least = _mm_set1_pd(INFINITY);
    p->sum = p->any = zero;
    p->count = 0;
    uint32_t i = 0;
    while (i + 16 <= n) {
        uint32_t chunk_end = n - i > 2048 ? i + 2048 : n;
        __m128i vcount = zero; /* candidates per byte lane: at most 128 */
        /* Per pair of rows: v = the load, 0 where skipped, into the sum and
         * the OR; 2^52 + v as a double into the minimum, 2^53 - 1 (no
         * candidate's can be larger) where skipped. */
#define LOAD_PAIR(k, M, v, d)                                                            \
    const __m128i v = _mm_andnot_si128(                                                  \
        M, _mm_loadu_si128((const __m128i *)(const void *)(load + i + 2 * (k))));        \
    const __m128d d =                                                                    \
        _mm_castsi128_pd(_mm_or_si128(_mm_or_si128(v, magic), _mm_and_si128(M, low52)))
        for (; i + 16 <= chunk_end; i += 16) {
            __m128i M[8];
            vcount = _mm_sub_epi8(vcount, skipped_masks(flags + i, vskip, M));
            LOAD_PAIR(0, M[0], v0, d0);
            LOAD_PAIR(1, M[1], v1, d1);
            LOAD_PAIR(2, M[2], v2, d2);
            LOAD_PAIR(3, M[3], v3, d3);
            LOAD_PAIR(4, M[4], v4, d4);
            LOAD_PAIR(5, M[5], v5, d5);
            LOAD_PAIR(6, M[6], v6, d6);
            LOAD_PAIR(7, M[7], v7, d7);
            __m128i sum8 = sse2_add8_epi64(v0, v1, v2, v3, v4, v5, v6, v7);
            p->sum = _mm_add_epi64(p->sum, sum8);
            p->any = _mm_or_si128(p->any, sse2_or8(v0, v1, v2, v3, v4, v5, v6, v7));
            p->least = _mm_min_pd(sse2_min8_pd(d0, d1, d2, d3, d4, d5, d6, d7), p->least);
        }
#undef LOAD_PAIR
        p->count += sse2_sum_lanes_u64(_mm_sad_epu8(vcount, zero));
        if (!loads_exact(sse2_or_lanes_u64(p->any), sse2_sum_lanes_u64(p->sum)))
            return UINT32_MAX;
    }
    return i;
}
#endif

static void loads_masked(const uint8_t *flags, const uint64_t *load, uint32_t n,
                         uint8_t skip, double *out_min, double *out_mean)
{
#if SSE2_ROWS
    load_pass p;
    uint32_t i = load_pass_steps(&p, flags, load, n, skip);
    if (i == UINT32_MAX) {
        loads_in_order(flags, load, n, skip, out_min, out_mean);
        return;
    }
    uint64_t sum = sse2_sum_lanes_u64(p.sum), any = sse2_or_lanes_u64(p.any);
    uint64_t count = p.count;
    /* Back from 2^52 + least (2^52 - 1 when only skipped rows so far: no
     * candidate load below 2^52 is larger, and none is counted at all
     * when count stays 0). */
    double least = sse2_min_lanes(p.least) - TWO_52;
    for (; i < n; i++) {
        if (flags[i] & skip)
            continue;
        double v = (double)load[i];
        least = v < least ? v : least;
        sum += load[i];
        any |= load[i];
        count++;
    }
    if (!loads_exact(any, sum)) {
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
 * Most rows are candidates, so the SSE2 pass sums every load with no mask
 * at all, and visits the few skipped rows one by one (16 rows' flags a
 * step): their loads come back out of the sum. The minima take each pair
 * of rows as MINPD's first operand against a running minimum, a skipped
 * row's lanes OR-ed with its all-ones mask (a NaN, which MINPD passes
 * over): the least candidate cost, and the least candidate load as
 * 2^52 + load, whichever rows are skipped. Every cost finite (their sum
 * is: a NaN or an infinity makes it so, an overflow only sends the scan to
 * the masked pass), that least is the answer; every load below 2^52 and
 * their sum below 2^53 (each chunk of 2,048 rows is checked, so the
 * integer sum cannot wrap in between), so are the loads' least and mean.
 * Whenever one of these fails, the masked passes above answer instead (the
 * loads only when asked for: row_scan_loads).
 */
#if SSE2_ROWS
/* What the full pass has met so far: over the candidates, the least cost
 * and the least load as 2^52 + load (two running minima each, the even
 * and the odd pairs of rows); over every row, the cost sum and the load
 * sum and OR; over the skipped rows, their load sum and count. */
typedef struct full_pass {
    __m128d best[2], least[2], csum;
    __m128i sum, any;
    uint64_t skipped_sum;
    uint32_t skipped;
} full_pass;

/* Rows i .. i + 15 into *p: every row unmasked into the sums, then the
 * skipped ones (16 rows' flags a step) one by one out of them. */
static inline void full_pass_step(full_pass *p, const uint8_t *flags, const double *cost,
                                  const uint64_t *load, uint32_t i, __m128i vskip)
{
    const __m128i magic = _mm_set1_epi64x(TWO_52_BITS);
    const double *c = cost + i;
    __m128d c0 = _mm_loadu_pd(c), c1 = _mm_loadu_pd(c + 2), c2 = _mm_loadu_pd(c + 4),
            c3 = _mm_loadu_pd(c + 6), c4 = _mm_loadu_pd(c + 8),
            c5 = _mm_loadu_pd(c + 10), c6 = _mm_loadu_pd(c + 12),
            c7 = _mm_loadu_pd(c + 14);
    p->csum = _mm_add_pd(
        p->csum, _mm_add_pd(_mm_add_pd(_mm_add_pd(c0, c1), _mm_add_pd(c2, c3)),
                            _mm_add_pd(_mm_add_pd(c4, c5), _mm_add_pd(c6, c7))));
    __m128i M[8];
    const __m128i in = skipped_masks(flags + i, vskip, M);
    const __m128i *l = (const __m128i *)(const void *)(load + i);
    __m128i v0 = _mm_loadu_si128(l), v1 = _mm_loadu_si128(l + 1),
            v2 = _mm_loadu_si128(l + 2), v3 = _mm_loadu_si128(l + 3),
            v4 = _mm_loadu_si128(l + 4), v5 = _mm_loadu_si128(l + 5),
            v6 = _mm_loadu_si128(l + 6), v7 = _mm_loadu_si128(l + 7);
    p->sum = _mm_add_epi64(p->sum, sse2_add8_epi64(v0, v1, v2, v3, v4, v5, v6, v7));
    p->any = _mm_or_si128(p->any, sse2_or8(v0, v1, v2, v3, v4, v5, v6, v7));
    /* Pair k into the running minima of its parity: the cost, and 2^52 +
     * the load, each a NaN where skipped. */
#define PAIR_MIN(k, x, v)                                                                \
    p->best[(k) & 1] =                                                                   \
        _mm_min_pd(_mm_or_pd(x, _mm_castsi128_pd(M[k])), p->best[(k) & 1]);              \
    p->least[(k) & 1] = _mm_min_pd(                                                      \
        _mm_castsi128_pd(_mm_or_si128(_mm_or_si128(v, magic), M[k])), p->least[(k) & 1])
    PAIR_MIN(0, c0, v0);
    PAIR_MIN(1, c1, v1);
    PAIR_MIN(2, c2, v2);
    PAIR_MIN(3, c3, v3);
    PAIR_MIN(4, c4, v4);
    PAIR_MIN(5, c5, v5);
    PAIR_MIN(6, c6, v6);
    PAIR_MIN(7, c7, v7);
#undef PAIR_MIN
    unsigned out_rows = (unsigned)_mm_movemask_epi8(in) ^ 0xffffu;
    for (; out_rows != 0; out_rows &= out_rows - 1) {
        p->skipped_sum += load[i + (uint32_t)__builtin_ctz(out_rows)];
        p->skipped++;
    }
}

/* The full pass over whole steps of 16 rows, in chunks of 2,048 rows, until
 * the loads stop being exact (*out_fits = 0). Returns the first row not
 * taken. */
static inline uint32_t full_pass_steps(full_pass *p, const uint8_t *flags,
                                       const double *cost, const uint64_t *load,
                                       uint32_t n, uint8_t skip, int *out_fits)
{
    const __m128i vskip = _mm_set1_epi8((char)skip);
    p->best[0] = p->best[1] = p->least[0] = p->least[1] = _mm_set1_pd(INFINITY);
    p->csum = _mm_setzero_pd();
    p->sum = p->any = _mm_setzero_si128();
    p->skipped_sum = 0;
    p->skipped = 0;
    uint32_t i = 0;
    int fits = 1;
    while (fits && i + 16 <= n) {
        uint32_t chunk_end = n - i > 2048 ? i + 2048 : n;
        for (; i + 16 <= chunk_end; i += 16)
            full_pass_step(p, flags, cost, load, i, vskip);
        fits = loads_exact(sse2_or_lanes_u64(p->any), sse2_sum_lanes_u64(p->sum));
    }
    *out_fits = fits;
    return i;
}
#endif

void row_scan(const uint8_t *flags, const double *cost, const uint64_t *load, uint32_t n,
              uint8_t skip, row_scan_result *out)
{
    out->best_known = 0;
    out->loads_known = 0;
#if SSE2_ROWS
    full_pass p;
    int fits;
    uint32_t i = full_pass_steps(&p, flags, cost, load, n, skip, &fits);
    if (!fits)
        return;
    double cs[2];
    _mm_storeu_pd(cs, p.csum);
    double best = sse2_min_lanes(_mm_min_pd(p.best[0], p.best[1])), csum = cs[0] + cs[1];
    /* Back from 2^52 + least (+inf: no candidate yet). */
    double least = sse2_min_lanes(_mm_min_pd(p.least[0], p.least[1])) - TWO_52;
    uint64_t sum = sse2_sum_lanes_u64(p.sum), any = sse2_or_lanes_u64(p.any);
    for (; i < n; i++) {
        csum += cost[i];
        sum += load[i];
        any |= load[i];
        if (flags[i] & skip) {
            p.skipped_sum += load[i];
            p.skipped++;
            continue;
        }
        best = best < cost[i] ? best : cost[i];
        double v = (double)load[i];
        least = v < least ? v : least;
    }
    if (csum - csum == 0.0) {
        out->best = best;
        out->best_known = 1;
    }
    if (loads_exact(any, sum)) {
        uint32_t count = n - p.skipped;
        out->min_load = count > 0 ? least : INFINITY;
        out->mean_load = count > 0 ? (double)(sum - p.skipped_sum) / (double)count : 0.0;
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
