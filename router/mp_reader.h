// SPDX-License-Identifier: Apache-2.0
/*
 * mp_reader.h -- a cursor over msgpack bytes for the KV event decoder
 * (events.c): reads one header at a time where it lies, allocates nothing
 * (msgpack-c's unpacker builds an object per element in a zone: a
 * BlockStored of 8,000 token ids is 8,000 objects). Meant for bytes
 * msgpack_sizes_fit (events.c) has accepted: one object whose declared
 * sizes all fit. Every read is still bounds-checked and fails with -1
 * rather than read past the end. Private to libwsel-router.
 */
#ifndef WSEL_ROUTER_MP_READER_H
#define WSEL_ROUTER_MP_READER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct mp_cursor {
    const unsigned char *p, *e;
} mp_cursor;

/* What a value is, as msgpack-c's object types would say. */
enum {
    MP_NIL,
    MP_BOOL,
    MP_UINT, /* non-negative integer, whatever its encoding */
    MP_NINT, /* negative integer */
    MP_FLOAT,
    MP_STR,
    MP_BIN,
    MP_ARRAY,
    MP_MAP,
    MP_EXT,
    MP_BAD
};

static inline uint64_t mp_be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* The type of the value at the cursor (not consumed). */
static inline int mp_peek(const mp_cursor *c)
{
    if (c->p >= c->e)
        return MP_BAD;
    unsigned t = *c->p;
    if (t <= 0x7f)
        return MP_UINT;
    if (t <= 0x8f)
        return MP_MAP;
    if (t <= 0x9f)
        return MP_ARRAY;
    if (t <= 0xbf)
        return MP_STR;
    if (t >= 0xe0)
        return MP_NINT;
    switch (t) {
    case 0xc0:
        return MP_NIL;
    case 0xc2:
    case 0xc3:
        return MP_BOOL;
    case 0xc4:
    case 0xc5:
    case 0xc6:
        return MP_BIN;
    case 0xca:
    case 0xcb:
        return MP_FLOAT;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
        return MP_UINT;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
        /* msgpack-c calls a signed encoding of a value >= 0 positive */
        int n = 1 << (t - 0xd0);
        if (c->e - c->p < 1 + n)
            return MP_BAD;
        return (c->p[1] & 0x80) ? MP_NINT : MP_UINT;
    }
    case 0xd9:
    case 0xda:
    case 0xdb:
        return MP_STR;
    case 0xdc:
    case 0xdd:
        return MP_ARRAY;
    case 0xde:
    case 0xdf:
        return MP_MAP;
    case 0xc7:
    case 0xc8:
    case 0xc9:
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
        return MP_EXT;
    default:
        return MP_BAD;
    }
}

/* An integer's 64 bits (a negative one as two's complement). 0 or -1. */
static inline int mp_int(mp_cursor *c, uint64_t *v)
{
    if (c->p >= c->e)
        return -1;
    unsigned t = *c->p;
    if (t <= 0x7f || t >= 0xe0) {
        *v = t <= 0x7f ? t : (uint64_t)(int64_t)(int8_t)t;
        c->p++;
        return 0;
    }
    int n;
    int sign = 0;
    if (t >= 0xcc && t <= 0xcf)
        n = 1 << (t - 0xcc);
    else if (t >= 0xd0 && t <= 0xd3)
        n = 1 << (t - 0xd0), sign = 1;
    else
        return -1;
    if (c->e - c->p < 1 + n)
        return -1;
    uint64_t x = mp_be(c->p + 1, n);
    if (sign && n < 8 && (x >> (8 * n - 1)))
        x |= ~0ull << (8 * n); /* sign-extend */
    *v = x;
    c->p += 1 + n;
    return 0;
}

/* A container header: *n elements (pairs for a map). 0 or -1. */
static inline int mp_container(mp_cursor *c, int want, uint32_t *n)
{
    if (mp_peek(c) != want)
        return -1;
    unsigned t = *c->p;
    if ((t & 0xf0) == 0x80 || (t & 0xf0) == 0x90) {
        *n = t & 0x0f;
        c->p++;
        return 0;
    }
    int k = (t == 0xdc || t == 0xde) ? 2 : 4;
    if (c->e - c->p < 1 + k)
        return -1;
    *n = (uint32_t)mp_be(c->p + 1, k);
    c->p += 1 + k;
    return 0;
}

/* A str or bin's bytes. 0 or -1. */
static inline int mp_bytes(mp_cursor *c, int want, const unsigned char **s, uint32_t *len)
{
    if (mp_peek(c) != want)
        return -1;
    unsigned t = *c->p;
    int k;
    uint64_t n;
    if (t >= 0xa0 && t <= 0xbf)
        k = 0, n = t & 0x1f;
    else {
        k = (t == 0xd9 || t == 0xc4) ? 1 : (t == 0xda || t == 0xc5) ? 2 : 4;
        if (c->e - c->p < 1 + k)
            return -1;
        n = mp_be(c->p + 1, k);
    }
    if ((uint64_t)(c->e - c->p - 1 - k) < n)
        return -1;
    *s = c->p + 1 + k;
    *len = (uint32_t)n;
    c->p += 1 + k + n;
    return 0;
}

/* Is the value at the cursor the string s? (Not consumed.) */
static inline int mp_is_str(const mp_cursor *c, const char *s, size_t n)
{
    mp_cursor t = *c;
    const unsigned char *b;
    uint32_t len;
    return mp_bytes(&t, MP_STR, &b, &len) == 0 && len == n && memcmp(b, s, n) == 0;
}

/* Step over one value, containers whole. 0 or -1. */
static inline int mp_skip(mp_cursor *c)
{
    uint64_t pending = 1;
    while (pending > 0) {
        if (c->p >= c->e)
            return -1;
        pending--;
        unsigned t = *c->p;
        if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
            c->p++;
            continue;
        }
        uint32_t n;
        const unsigned char *b;
        switch (mp_peek(c)) {
        case MP_MAP:
            if (mp_container(c, MP_MAP, &n) != 0)
                return -1;
            pending += 2ull * n;
            break;
        case MP_ARRAY:
            if (mp_container(c, MP_ARRAY, &n) != 0)
                return -1;
            pending += n;
            break;
        case MP_STR:
        case MP_BIN:
            if (mp_bytes(c, mp_peek(c), &b, &n) != 0)
                return -1;
            break;
        case MP_UINT:
        case MP_NINT: {
            uint64_t v;
            if (mp_int(c, &v) != 0)
                return -1;
            break;
        }
        case MP_FLOAT: {
            int k = t == 0xca ? 4 : 8;
            if (c->e - c->p < 1 + k)
                return -1;
            c->p += 1 + k;
            break;
        }
        case MP_EXT: {
            uint64_t len;
            int k = 0;
            if (t >= 0xd4 && t <= 0xd8)
                len = 1ull << (t - 0xd4);
            else {
                k = t == 0xc7 ? 1 : t == 0xc8 ? 2 : 4;
                if (c->e - c->p < 1 + k)
                    return -1;
                len = mp_be(c->p + 1, k);
            }
            if (c->e - c->p < 2 + k || (uint64_t)(c->e - c->p - 2 - k) < len)
                return -1;
            c->p += 1 + k + 1 + len;
            break;
        }
        default:
            return -1;
        }
    }
    return 0;
}

#endif
