// SPDX-License-Identifier: Apache-2.0
/*
 * scan.c -- see scan.h.
 *
 * The SSE2 passes take 16 rows a step: the 16 flag bytes become lane masks
 * (all ones for an eligible row) by unpacking (sse2_rows.h), 32-bit lanes for the
 * overlaps and 64-bit lanes for the costs. Overlaps are compared as signed
 * 32-bit values with the sign bit flipped (SSE2 has no unsigned compare),
 * which orders them as unsigned. A cost lane that does not count is made
 * +inf, so no row needs a branch; a pass that meets a NaN among the costs
 * that count says so, and its caller answers row by row (a NaN does not
 * order, so the row-by-row answer depends on where it stands).
 */
#include "scan.h"

#include <math.h>
#include <string.h>

#include "sse2_rows.h"

/* Sums in blocks of 8 rows with a fixed inner count, so gcc -O2 vectorises
 * them (its cheap cost model refuses a loop that would need a scalar
 * epilogue); the tail is added row by row. */
static uint64_t sum_u32(const uint32_t *v, uint32_t n)
{
    uint64_t total = 0;
    uint32_t blocks = n / 8;
    for (uint32_t b = 0; b < blocks; b++)
        for (uint32_t j = 0; j < 8; j++)
            total += v[b * 8 + j];
    for (uint32_t i = blocks * 8; i < n; i++)
        total += v[i];
    return total;
}

/* gcc -O2 leaves this one scalar: SSE2's 64-bit adds by hand, 8 rows a
 * step in two accumulators. */
static uint64_t sum_u64(const uint64_t *v, uint32_t n)
{
    uint64_t total = 0;
    uint32_t i = 0;
#if SSE2_ROWS
    __m128i a = _mm_setzero_si128(), b = _mm_setzero_si128();
    for (; i + 8 <= n; i += 8) {
        const __m128i *p = (const __m128i *)(const void *)(v + i);
        a = _mm_add_epi64(a, _mm_add_epi64(_mm_loadu_si128(p), _mm_loadu_si128(p + 1)));
        b = _mm_add_epi64(b,
                          _mm_add_epi64(_mm_loadu_si128(p + 2), _mm_loadu_si128(p + 3)));
    }
    total = sse2_sum_lanes_u64(_mm_add_epi64(a, b));
#endif
    for (; i < n; i++)
        total += v[i];
    return total;
}

uint64_t chash_scan_total(const wsel_table *t, uint32_t kind)
{
    return kind == CHASH_LOAD_REQUESTS ? sum_u32(t->active_requests, t->num_rows)
                                       : sum_u64(t->decode_blocks, t->num_rows);
}

#if SSE2_ROWS
/* Unsigned 32-bit lane maximum of a and b (both biased by the sign bit). */
static inline __m128i max_biased(__m128i a, __m128i b)
{
    __m128i gt = _mm_cmpgt_epi32(a, b);
    return _mm_or_si128(_mm_and_si128(gt, a), _mm_andnot_si128(gt, b));
}
#endif

uint32_t chash_scan_eligible(const uint8_t *flags, uint32_t n, uint8_t skip)
{
    uint32_t count = 0, i = 0;
#if SSE2_ROWS
    const __m128i vskip = _mm_set1_epi8((char)skip), zero = _mm_setzero_si128();
    while (i + 16 <= n) {
        /* Per byte lane: how many of up to 255 steps saw an eligible row. */
        uint32_t end = n - i > 255 * 16 ? i + 255 * 16 : n;
        __m128i lanes = zero;
        for (; i + 16 <= end; i += 16)
            lanes = _mm_sub_epi8(lanes, sse2_rows_candidates(flags + i, vskip));
        count += (uint32_t)sse2_sum_lanes_u64(_mm_sad_epu8(lanes, zero));
    }
#endif
    for (; i < n; i++)
        count += (flags[i] & skip) == 0;
    return count;
}

/* Deepest overlap over the eligible rows of [lo, hi) into *deepest (kept
 * when larger). */
static void deepest_in(const wsel_table *t, uint8_t skip, uint32_t lo, uint32_t hi,
                       uint32_t *deepest)
{
    const uint8_t *flags = t->flags;
    const uint32_t *ov = t->overlap_blocks;
    uint32_t best = *deepest;
    uint32_t i = lo;
#if SSE2_ROWS
    const __m128i vskip = _mm_set1_epi8((char)skip);
    const __m128i sign = _mm_set1_epi32(INT32_MIN);
    __m128i vbest = _mm_xor_si128(_mm_set1_epi32((int32_t)best), sign);
    for (; i + 16 <= hi; i += 16) {
        __m128i E[4];
        sse2_rows_widen32(sse2_rows_candidates(flags + i, vskip), E);
        const __m128i *o = (const __m128i *)(const void *)(ov + i);
        __m128i a = _mm_xor_si128(_mm_and_si128(_mm_loadu_si128(o), E[0]), sign);
        __m128i b = _mm_xor_si128(_mm_and_si128(_mm_loadu_si128(o + 1), E[1]), sign);
        __m128i c = _mm_xor_si128(_mm_and_si128(_mm_loadu_si128(o + 2), E[2]), sign);
        __m128i d = _mm_xor_si128(_mm_and_si128(_mm_loadu_si128(o + 3), E[3]), sign);
        vbest = max_biased(vbest, max_biased(max_biased(a, b), max_biased(c, d)));
    }
    uint32_t lanes[4];
    _mm_storeu_si128((__m128i *)(void *)lanes, vbest);
    for (int k = 0; k < 4; k++) {
        uint32_t v = lanes[k] ^ 0x80000000u;
        best = v > best ? v : best;
    }
#endif
    for (; i < hi; i++) {
        if (flags[i] & skip)
            continue;
        best = ov[i] > best ? ov[i] : best;
    }
    *deepest = best;
}

/* Least cost over the eligible rows of [lo, hi) (with overlap == ov when
 * by_overlap) into *least (kept when smaller); returns non-zero when one of
 * those rows' costs is a NaN (the least is then meaningless). */
static uint64_t least_in(const wsel_table *t, uint8_t skip, int by_overlap, uint32_t ov,
                         uint32_t lo, uint32_t hi, double *least, int *any)
{
    const uint8_t *flags = t->flags;
    const uint32_t *overlap = t->overlap_blocks;
    const double *cost = t->cost;
    double best = *least;
    uint64_t bad = 0;
    uint32_t i = lo;
#if SSE2_ROWS
    const __m128i vskip = _mm_set1_epi8((char)skip);
    /* by_overlap: lanes must match ov; else every lane matches. */
    const __m128i vov = _mm_set1_epi32((int32_t)ov);
    const __m128i any_ov = by_overlap ? _mm_setzero_si128() : _mm_set1_epi32(-1);
    const __m128d inf = _mm_set1_pd(INFINITY);
    __m128d vbest = _mm_set1_pd(best);
    __m128d vbad = _mm_setzero_pd();
    __m128i vany = _mm_setzero_si128();
    /* K: 64-bit keep mask of two rows; m: their costs, plus +inf where
     * not kept, into the minimum, whose value only counts when no m is a NaN
     * (CMPUNORDPD finds those): a kept NaN, or a -inf cost not kept (a
     * false alarm, which only costs the row-by-row answer). */
#define PAIR(K, k, m)                                                                    \
    const __m128d m = _mm_add_pd(_mm_loadu_pd(cost + i + 2 * k),                         \
                                 _mm_andnot_pd(_mm_castsi128_pd(K), inf))
    for (; i + 16 <= hi; i += 16) {
        __m128i E[4];
        sse2_rows_widen32(sse2_rows_candidates(flags + i, vskip), E);
        const __m128i *o = (const __m128i *)(const void *)(overlap + i);
        const __m128i A = _mm_and_si128(
            E[0], _mm_or_si128(any_ov, _mm_cmpeq_epi32(_mm_loadu_si128(o), vov)));
        const __m128i B = _mm_and_si128(
            E[1], _mm_or_si128(any_ov, _mm_cmpeq_epi32(_mm_loadu_si128(o + 1), vov)));
        const __m128i C = _mm_and_si128(
            E[2], _mm_or_si128(any_ov, _mm_cmpeq_epi32(_mm_loadu_si128(o + 2), vov)));
        const __m128i D = _mm_and_si128(
            E[3], _mm_or_si128(any_ov, _mm_cmpeq_epi32(_mm_loadu_si128(o + 3), vov)));
        vany = _mm_or_si128(vany, _mm_or_si128(_mm_or_si128(A, B), _mm_or_si128(C, D)));
        PAIR(_mm_unpacklo_epi32(A, A), 0, m0);
        PAIR(_mm_unpackhi_epi32(A, A), 1, m1);
        PAIR(_mm_unpacklo_epi32(B, B), 2, m2);
        PAIR(_mm_unpackhi_epi32(B, B), 3, m3);
        PAIR(_mm_unpacklo_epi32(C, C), 4, m4);
        PAIR(_mm_unpackhi_epi32(C, C), 5, m5);
        PAIR(_mm_unpacklo_epi32(D, D), 6, m6);
        PAIR(_mm_unpackhi_epi32(D, D), 7, m7);
        __m128d z =
            _mm_or_pd(_mm_or_pd(_mm_cmpunord_pd(m0, m1), _mm_cmpunord_pd(m2, m3)),
                      _mm_or_pd(_mm_cmpunord_pd(m4, m5), _mm_cmpunord_pd(m6, m7)));
        vbad = _mm_or_pd(vbad, z);
        vbest = _mm_min_pd(sse2_min8_pd(m0, m1, m2, m3, m4, m5, m6, m7), vbest);
    }
#undef PAIR
    best = sse2_min_lanes(vbest);
    best = best < *least ? best : *least;
    bad = sse2_or_lanes_u64(_mm_castpd_si128(vbad));
    *any |= _mm_movemask_epi8(vany) != 0;
#endif
    for (; i < hi; i++) {
        if ((flags[i] & skip) || (by_overlap && overlap[i] != ov))
            continue;
        *any = 1;
        double c = cost[i];
        bad |= c != c;
        best = c < best ? c : best;
    }
    *least = best;
    return bad;
}

/* The excluded range [xf, xe) within the table's n rows. */
static void clamp_excluded(uint32_t n, uint32_t *xf, uint32_t *xe)
{
    if (*xf > n)
        *xf = n;
    if (*xe < *xf)
        *xe = *xf;
    if (*xe > n)
        *xe = n;
}

int chash_scan_leaders(const wsel_table *t, uint8_t skip, int by_overlap, uint32_t xf,
                       uint32_t xe, uint32_t *out_ov, double *out_cost)
{
    uint32_t n = t->num_rows;
    clamp_excluded(n, &xf, &xe);
    uint32_t ov = 0;
    if (by_overlap) {
        deepest_in(t, skip, 0, xf, &ov);
        deepest_in(t, skip, xe, n, &ov);
    }
    double least = INFINITY;
    int any = 0;
    uint64_t bad = least_in(t, skip, by_overlap, ov, 0, xf, &least, &any);
    bad |= least_in(t, skip, by_overlap, ov, xe, n, &least, &any);
    if (bad != 0 || !any)
        return -1;
    *out_ov = ov;
    *out_cost = least;
    return 0;
}

/* The index of the lowest set bit of x != 0. */
static inline int lowest_bit(uint32_t x)
{
#if defined(__GNUC__)
    return __builtin_ctz(x);
#else
    int k = 0;
    while (!(x & 1u)) {
        x >>= 1;
        k++;
    }
    return k;
#endif
}

/* What the one-pass leader search has found so far (deepest_rows). */
typedef struct leaders {
    int32_t deepest; /* -1: no eligible row yet */
    double cost;     /* least cost among the eligible rows that deep */
    uint32_t count;  /* rows at (deepest, cost); the first `cap` in rows[] */
    uint32_t judged; /* rows at the deepest overlap looked at one by one */
    uint32_t *rows;
    uint32_t cap;
} leaders;

/* Row i, eligible, at overlap ov (>= the deepest so far): into *l.
 * Returns -1 on a NaN cost (no order), else 0. */
static int leader_row(leaders *l, const wsel_table *t, uint32_t i, int32_t ov)
{
    double c = t->cost[i];
    if (c != c)
        return -1;
    l->judged++;
    if (ov > l->deepest || c < l->cost) {
        l->deepest = ov;
        l->cost = c;
        l->count = 0;
    } else if (c != l->cost) {
        return 0;
    }
    if (l->count < l->cap)
        l->rows[l->count] = i;
    l->count++;
    return 0;
}

/* Rows [lo, hi) into *l; -1 when the pass cannot answer (a NaN cost, an
 * overlap past 32,767, or more than `limit` rows judged one by one). */
static int deepest_rows_in(leaders *l, const wsel_table *t, uint8_t skip, uint32_t lo,
                           uint32_t hi, uint32_t limit)
{
    const uint8_t *flags = t->flags;
    const uint32_t *ov = t->overlap_blocks;
    uint32_t i = lo;
#if SSE2_ROWS
    /* 16 rows a step, overlaps packed to 16 bits (exact below 32,768: the
     * OR of the raw values, checked at the end, says). A step with no row as deep as the
     * deepest so far takes no branch; the others judge those rows one by one, in row
     * order (a row that deepens it leaves the rows after it to be judged
     * against the new depth). */
    const __m128i vskip = _mm_set1_epi8((char)skip), zero = _mm_setzero_si128();
    __m128i wide = zero;
    for (; i + 16 <= hi; i += 16) {
        const __m128i in = sse2_rows_candidates(flags + i, vskip);
        const __m128i *o = (const __m128i *)(const void *)(ov + i);
        const __m128i a = _mm_loadu_si128(o), b = _mm_loadu_si128(o + 1);
        const __m128i c = _mm_loadu_si128(o + 2), d = _mm_loadu_si128(o + 3);
        wide = _mm_or_si128(wide, _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d)));
        /* Bit k: row i + k is eligible and at least as deep. */
        __m128i deep_enough = in;
        if (l->deepest >= 0) {
            const __m128i below = _mm_set1_epi16((int16_t)(l->deepest - 1));
            deep_enough = _mm_and_si128(
                in, _mm_packs_epi16(_mm_cmpgt_epi16(_mm_packs_epi32(a, b), below),
                                    _mm_cmpgt_epi16(_mm_packs_epi32(c, d), below)));
        }
        int at = _mm_movemask_epi8(deep_enough);
        for (uint32_t bits = (uint32_t)at; bits != 0; bits &= bits - 1) {
            uint32_t k = i + (uint32_t)lowest_bit(bits);
            if ((int32_t)ov[k] < l->deepest)
                continue;
            if (leader_row(l, t, k, (int32_t)ov[k]) != 0 || l->judged > limit)
                return -1;
        }
    }
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_srli_epi32(wide, 15), zero)) != 0xffff)
        return -1;
#endif
    for (; i < hi; i++) {
        if (flags[i] & skip)
            continue;
        if (ov[i] > 32767u)
            return -1;
        if ((int32_t)ov[i] < l->deepest)
            continue;
        if (leader_row(l, t, i, (int32_t)ov[i]) != 0 || l->judged > limit)
            return -1;
    }
    return 0;
}

int chash_scan_deepest_rows(const wsel_table *t, uint8_t skip, uint32_t xf, uint32_t xe,
                            uint32_t limit, uint32_t *rows, uint32_t cap)
{
    uint32_t n = t->num_rows;
    clamp_excluded(n, &xf, &xe);
    leaders l = {
        .deepest = -1, .cost = 0.0, .count = 0, .judged = 0, .rows = rows, .cap = cap};
    if (deepest_rows_in(&l, t, skip, 0, xf, limit) != 0 ||
        deepest_rows_in(&l, t, skip, xe, n, limit) != 0)
        return -1;
    if (l.deepest < 0 || l.count > cap)
        return -1;
    return (int)l.count;
}

static int is_leader(const wsel_table *t, uint8_t skip, int by_overlap, uint32_t ov,
                     double cost, uint32_t i)
{
    return (t->flags[i] & skip) == 0 && t->cost[i] == cost &&
           (!by_overlap || t->overlap_blocks[i] == ov);
}

uint32_t chash_scan_next_leader(const wsel_table *t, uint8_t skip, int by_overlap,
                                uint32_t ov, double cost, uint32_t from, uint32_t xf,
                                uint32_t xe)
{
    uint32_t n = t->num_rows;
    uint32_t i = from >= xf && from < xe ? xe : from;
    while (i < n) {
        uint32_t end = i < xf ? (xf < n ? xf : n) : n;
#if SSE2_ROWS
        const __m128d vc = _mm_set1_pd(cost);
        const double *c = t->cost;
        for (; i + 8 <= end; i += 8) {
            __m128d e = _mm_or_pd(_mm_or_pd(_mm_cmpeq_pd(_mm_loadu_pd(c + i), vc),
                                            _mm_cmpeq_pd(_mm_loadu_pd(c + i + 2), vc)),
                                  _mm_or_pd(_mm_cmpeq_pd(_mm_loadu_pd(c + i + 4), vc),
                                            _mm_cmpeq_pd(_mm_loadu_pd(c + i + 6), vc)));
            if (_mm_movemask_pd(e) == 0)
                continue;
            for (uint32_t k = i; k < i + 8; k++)
                if (is_leader(t, skip, by_overlap, ov, cost, k))
                    return k;
        }
#endif
        for (; i < end; i++)
            if (is_leader(t, skip, by_overlap, ov, cost, i))
                return i;
        if (i == xf && xe > xf)
            i = xe;
    }
    return UINT32_MAX;
}

uint32_t chash_scan_next_holder(const wsel_table *t, uint8_t skip, uint32_t depth,
                                uint32_t from, uint32_t xf, uint32_t xe)
{
    uint32_t n = t->num_rows;
    const uint32_t *ov = t->overlap_blocks;
    uint32_t i = from >= xf && from < xe ? xe : from;
    while (i < n) {
        uint32_t end = i < xf ? (xf < n ? xf : n) : n;
#if SSE2_ROWS
        if (depth > 0) {
            const __m128i sign = _mm_set1_epi32(INT32_MIN);
            /* ov >= depth, i.e. ov > depth - 1, on biased values. */
            const __m128i below =
                _mm_xor_si128(_mm_set1_epi32((int32_t)(depth - 1)), sign);
            for (; i + 16 <= end; i += 16) {
                const __m128i *o = (const __m128i *)(const void *)(ov + i);
                __m128i a =
                    _mm_cmpgt_epi32(_mm_xor_si128(_mm_loadu_si128(o), sign), below);
                __m128i b =
                    _mm_cmpgt_epi32(_mm_xor_si128(_mm_loadu_si128(o + 1), sign), below);
                __m128i c =
                    _mm_cmpgt_epi32(_mm_xor_si128(_mm_loadu_si128(o + 2), sign), below);
                __m128i d =
                    _mm_cmpgt_epi32(_mm_xor_si128(_mm_loadu_si128(o + 3), sign), below);
                if (_mm_movemask_epi8(
                        _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d))) == 0)
                    continue;
                for (uint32_t k = i; k < i + 16; k++)
                    if ((t->flags[k] & skip) == 0 && ov[k] >= depth)
                        return k;
            }
        }
#endif
        for (; i < end; i++)
            if ((t->flags[i] & skip) == 0 && ov[i] >= depth)
                return i;
        if (i == xf && xe > xf)
            i = xe;
    }
    return UINT32_MAX;
}

uint32_t chash_group_of_row(const wsel_table *t, uint32_t row)
{
    uint32_t lo = 0, hi = t->num_groups; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->group_first_row[mid] <= row)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
