/* SPDX-License-Identifier: Apache-2.0 */

/*
 * wsel_token_ids.c -- wsel_token_ids.h: a JSON array of token ids read in
 * one pass, by a byte loop, SSE2 windows or AVX-512 windows.
 */

#include "wsel_token_ids.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define WSEL_TOKEN_IDS_X86 1
#endif

/* A window reader writes at most this many ids (32 tokens fit in 64
 * bytes, written 8 at a time). */
#define WINDOW_IDS 32u

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Room for `more` ids past buf->n; 0 or -1 (out of memory). */
static int reserve(wsel_token_buf *buf, size_t more)
{
    if (buf->cap - buf->n >= more)
        return 0;
    size_t cap = buf->cap ? buf->cap : 16384;
    while (cap - buf->n < more)
        cap *= 2;
    uint32_t *g = realloc(buf->ids, cap * sizeof(*g));
    if (!g)
        return -1;
    buf->ids = g;
    buf->cap = cap;
    return 0;
}

/*
 * The value of the 1..8 ASCII digits starting at p, when the 8 bytes at p
 * are readable: *len = how many digits (0: none; 8: maybe more follow).
 * SWAR: a byte is a digit when (byte ^ '0') < 10; the digits are moved to
 * the top of a 64-bit word (leading zeros below) and folded pairwise, 8
 * digits in three multiply-add steps.
 */
static uint64_t digits8(const unsigned char *p, size_t *len)
{
    uint64_t x, nd;

    memcpy(&x, p, 8);
    x ^= 0x3030303030303030ull;
    /* high bit set in every byte that is not a digit */
    nd = ((x + 0x7676767676767676ull) | x) & 0x8080808080808080ull;
    *len = nd ? (size_t)__builtin_ctzll(nd) >> 3 : 8;
    if (*len == 0)
        return 0;
    x <<= 8 * (8 - *len);
    x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffull;
    x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffull;
    x = (x * 10000 + (x >> 32)) & 0xffffffffull;
    return x;
}

/* One id at p (a digit); the byte after it, or NULL when it overflows. */
static const unsigned char *read_one(const unsigned char *p, const unsigned char *e,
                                     uint32_t *out)
{
    uint64_t v = 0;
    size_t len = 0;

    if (e - p > 8) {
        v = digits8(p, &len); /* the common case: fewer than 8 digits */
        p += len;
        if (len < 8) {
            *out = (uint32_t)v;
            return p;
        }
    }
    while (p < e && is_digit(*p)) {
        v = v * 10 + (uint64_t)(*p++ - '0');
        if (v > 0xffffffffu)
            return NULL;
    }
    *out = (uint32_t)v;
    return p;
}

#ifdef WSEL_TOKEN_IDS_X86

/*
 * 64 bytes of "d,d,d" at p (a digit; 72 bytes readable): the ids of every
 * token starting in them but the last, into out; returns how many and
 * sets *adv to the comma before the last one's start. 0 when the window
 * holds anything but digits and single commas, or an id of 8 digits or
 * more. Finding the tokens' starts in a digit mask frees each id's
 * conversion from the one before it.
 */
static size_t window_sse2(const unsigned char *p, uint32_t *out, size_t *adv)
{
    const __m128i lo = _mm_set1_epi8('0' - 1), hi = _mm_set1_epi8('9' + 1);
    const __m128i comma = _mm_set1_epi8(',');
    uint64_t d = 0, c = 0;

    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i));
        d |= (uint64_t)(uint16_t)_mm_movemask_epi8(
                 _mm_and_si128(_mm_cmpgt_epi8(v, lo), _mm_cmplt_epi8(v, hi)))
             << (16 * i);
        c |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, comma)) << (16 * i);
    }
    if ((d | c) != ~0ull || (c & (c << 1)) || !(d & 1))
        return 0;
    uint64_t starts = d & ~(d << 1);
    unsigned last = 63u - (unsigned)__builtin_clzll(starts);
    if (last == 0)
        return 0;
    starts &= ~(1ull << last);
    size_t k = 0, len;
    while (starts) {
        unsigned q = (unsigned)__builtin_ctzll(starts);
        uint64_t x = digits8(p + q, &len);
        if (len >= 8)
            return 0;
        out[k++] = (uint32_t)x;
        starts &= starts - 1;
    }
    *adv = last - 1;
    return k;
}

/*
 * 64 bytes at p (a digit; 64 bytes readable): every complete token (its
 * last digit followed by a comma, all bytes before it digits or single
 * commas) into out, 8 ids at a time; returns how many and sets *adv to the
 * comma after the last. 0 when there is none, or an id has more than 8
 * digits, or two commas touch.
 *
 * The tokens' first and last digit positions are compressed into two byte
 * vectors (VBMI2); a byte permute (VBMI) then moves each id's digits,
 * right-aligned with zeros in front, into its own 64-bit lane, and three
 * multiply-adds fold the 8 digits of the 8 lanes together.
 */
#define WSEL_AVX512 __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2")))

/* Ids j..j+7 of a window (first and last digit positions compressed in
 * `first` and `lastd`, the digits' values in dv) into out[j..j+7]. */
WSEL_AVX512 static inline void eight_ids(__m512i first, __m512i lastd, __m512i dv,
                                         size_t j, uint32_t *out)
{
    /* byte b of lane8 = b / 8; of back = b % 8 - 7 */
    const __m512i lane8 =
        _mm512_set_epi64(0x0707070707070707ll, 0x0606060606060606ll, 0x0505050505050505ll,
                         0x0404040404040404ll, 0x0303030303030303ll, 0x0202020202020202ll,
                         0x0101010101010101ll, 0x0000000000000000ll);
    const __m512i back = _mm512_set1_epi64(0x00fffefdfcfbfaf9ll);
    const __m512i sel = _mm512_add_epi8(lane8, _mm512_set1_epi8((char)j));
    const __m512i s = _mm512_permutexvar_epi8(sel, first);
    const __m512i g = _mm512_add_epi8(_mm512_permutexvar_epi8(sel, lastd), back);
    /* signed: a position before the window's start is negative */
    const __mmask64 keep = _mm512_cmpge_epi8_mask(g, s);
    __m512i x = _mm512_maskz_permutexvar_epi8(keep, g, dv);
    x = _mm512_maddubs_epi16(x, _mm512_set1_epi16(0x010a));
    x = _mm512_madd_epi16(x, _mm512_set1_epi32(0x00010064));
    x = _mm512_add_epi64(_mm512_mul_epu32(x, _mm512_set1_epi64(10000)),
                         _mm512_srli_epi64(x, 32));
    _mm256_storeu_si256((__m256i *)(void *)(out + j), _mm512_cvtepi64_epi32(x));
}

/*
 * 64 bytes at p (a digit; 64 bytes readable): every complete token (its
 * last digit followed by a comma, all bytes before it digits or single
 * commas) into out (WINDOW_IDS of room); returns how many and sets *adv
 * to the comma after the last. 0 when there is none, or an id has more
 * than 8 digits, or two commas touch.
 *
 * The tokens' first and last digit positions are compressed into two byte
 * vectors (VBMI2); a byte permute (VBMI) then moves each id's digits,
 * right-aligned with zeros in front, into its own 64-bit lane, and three
 * multiply-adds fold the 8 digits of the 8 lanes together.
 */
WSEL_AVX512 static inline size_t window_avx512(const unsigned char *p, uint32_t *out,
                                               size_t *adv)
{
    const __m512i v = _mm512_loadu_si512((const void *)p);
    const __m512i dv = _mm512_sub_epi8(v, _mm512_set1_epi8('0'));
    const uint64_t d = _mm512_cmplt_epu8_mask(dv, _mm512_set1_epi8(10));
    const uint64_t c = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(','));
    const uint64_t other = ~(d | c);
    const uint64_t valid = other ? (1ull << __builtin_ctzll(other)) - 1 : ~0ull;

    if (c & (c << 1) & valid)
        return 0;
    const uint64_t ends = d & (c >> 1) & valid;
    if (!ends)
        return 0;
    const unsigned last = 63u - (unsigned)__builtin_clzll(ends); /* <= 62 */
    const uint64_t starts = d & ~(d << 1) & ((2ull << last) - 1);
    const size_t k = (size_t)__builtin_popcountll(ends);

    /* byte b of iota = b */
    const __m512i iota =
        _mm512_set_epi64(0x3f3e3d3c3b3a3938ll, 0x3736353433323130ll, 0x2f2e2d2c2b2a2928ll,
                         0x2726252423222120ll, 0x1f1e1d1c1b1a1918ll, 0x1716151413121110ll,
                         0x0f0e0d0c0b0a0908ll, 0x0706050403020100ll);
    const __m512i first = _mm512_maskz_compress_epi8(starts, iota);
    const __m512i lastd = _mm512_maskz_compress_epi8(ends, iota);
    const uint64_t live = (1ull << k) - 1; /* k <= 31 */

    if (_mm512_mask_cmpgt_epu8_mask(live, _mm512_sub_epi8(lastd, first),
                                    _mm512_set1_epi8(7)))
        return 0;
    for (size_t j = 0; j < k; j += 8)
        eight_ids(first, lastd, dv, j, out);
    *adv = last + 1;
    return k;
}

#endif /* WSEL_TOKEN_IDS_X86 */

/* WSEL_TOKEN_IDS_CAP (a build flag, -DWSEL_TOKEN_IDS_CAP=1) caps the
 * reader: the module on an AVX-512 machine measured as on one without. */
int wsel_token_ids_best(void)
{
#if defined(WSEL_TOKEN_IDS_CAP) && WSEL_TOKEN_IDS_CAP < WSEL_TOKEN_IDS_AVX512
    if (WSEL_TOKEN_IDS_CAP <= WSEL_TOKEN_IDS_BYTES)
        return WSEL_TOKEN_IDS_BYTES;
#ifdef WSEL_TOKEN_IDS_X86
    return WSEL_TOKEN_IDS_SSE2;
#endif
#endif
#ifdef WSEL_TOKEN_IDS_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2"))
        return WSEL_TOKEN_IDS_AVX512;
    return WSEL_TOKEN_IDS_SSE2;
#else
    return WSEL_TOKEN_IDS_BYTES;
#endif
}

typedef size_t (*window_fn)(const unsigned char *p, uint32_t *out, size_t *adv);

/*
 * The reader's loop: a window of `need` readable bytes at each token while
 * the window reader takes them, the byte loop otherwise. Inlined into one
 * function per reader, so that a window reader is inlined too (an AVX-512
 * one into a function compiled for AVX-512).
 */
static inline __attribute__((always_inline)) const unsigned char *
parse_loop(const unsigned char *p, const unsigned char *e, wsel_token_buf *buf,
           int *nomem, window_fn window, ptrdiff_t need)
{
    size_t adv = 0, k;

    p = skip_ws(p + 1, e);
    for (;;) {
        /* p at a token */
        if (p == e || !is_digit(*p))
            return NULL;
        if (reserve(buf, WINDOW_IDS) != 0) {
            *nomem = 1;
            return NULL;
        }
        k = window && e - p >= need ? window(p, buf->ids + buf->n, &adv) : 0;
        if (k) {
            buf->n += k;
            p += adv; /* at the comma after the last id read */
        } else {
            p = read_one(p, e, buf->ids + buf->n);
            if (!p)
                return NULL;
            buf->n++;
        }
        /* after a token: ',' then the next, or ']' */
        if (p < e && *p == ',') {
            p++;
            if (p < e && !is_digit(*p))
                p = skip_ws(p, e); /* ", " and the like */
            continue;
        }
        p = skip_ws(p, e);
        if (p == e)
            return NULL;
        if (*p == ']')
            return p + 1;
        if (*p != ',')
            return NULL;
        p = skip_ws(p + 1, e);
    }
}

static const unsigned char *parse_bytes(const unsigned char *p, const unsigned char *e,
                                        wsel_token_buf *buf, int *nomem)
{
    return parse_loop(p, e, buf, nomem, NULL, 0);
}

#ifdef WSEL_TOKEN_IDS_X86
static const unsigned char *parse_sse2(const unsigned char *p, const unsigned char *e,
                                       wsel_token_buf *buf, int *nomem)
{
    return parse_loop(p, e, buf, nomem, window_sse2, 72);
}

WSEL_AVX512 static const unsigned char *parse_avx512(const unsigned char *p,
                                                     const unsigned char *e,
                                                     wsel_token_buf *buf, int *nomem)
{
    return parse_loop(p, e, buf, nomem, window_avx512, 64);
}
#endif

/* wsel_token_ids_best(), asked once: every thread computes the same. */
static int best_reader(void)
{
    static atomic_int best = -1;
    int b = atomic_load_explicit(&best, memory_order_relaxed);
    if (b < 0) {
        b = wsel_token_ids_best();
        atomic_store_explicit(&best, b, memory_order_relaxed);
    }
    return b;
}

const unsigned char *wsel_token_ids_parse(const unsigned char *p, const unsigned char *e,
                                          wsel_token_buf *buf, int reader, int *nomem)
{
    int best = best_reader();

    if (reader > best)
        reader = best;
    buf->n = 0;
    *nomem = 0;
    if (p == e || *p != '[')
        return NULL;
#ifdef WSEL_TOKEN_IDS_X86
    if (reader == WSEL_TOKEN_IDS_AVX512)
        return parse_avx512(p, e, buf, nomem);
    if (reader == WSEL_TOKEN_IDS_SSE2)
        return parse_sse2(p, e, buf, nomem);
#endif
    return parse_bytes(p, e, buf, nomem);
}
