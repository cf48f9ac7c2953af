// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_reader.h -- take typed values from a fuzzer's input, front to back.
 *
 * Past the end every read returns zero, so any input decodes to something
 * and a short input decodes to the simplest case. Header-only: each harness
 * is one translation unit plus this.
 */
#ifndef WSEL_TESTS_FUZZ_READER_H
#define WSEL_TESTS_FUZZ_READER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fuzz_reader {
    const uint8_t *data;
    size_t size;
    size_t pos;
} fuzz_reader;

static inline void fuzz_reader_init(fuzz_reader *r, const uint8_t *data, size_t size)
{
    r->data = data;
    r->size = size;
    r->pos = 0;
}

static inline uint8_t fuzz_u8(fuzz_reader *r)
{
    return r->pos < r->size ? r->data[r->pos++] : 0;
}

static inline uint32_t fuzz_u32(fuzz_reader *r)
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fuzz_u8(r) << (8 * i);
    return v;
}

static inline uint64_t fuzz_u64(fuzz_reader *r)
{
    uint64_t v = fuzz_u32(r);

    return v | (uint64_t)fuzz_u32(r) << 32;
}

/* A double: mostly small and ordinary, sometimes any bit pattern (NaN,
 * infinities, subnormals, huge). */
static inline double fuzz_double(fuzz_reader *r)
{
    uint8_t kind = fuzz_u8(r);
    uint64_t bits;
    double d;

    if (kind < 0xf0)
        return (double)kind / 16.0 + (double)fuzz_u8(r);
    bits = fuzz_u64(r);
    memcpy(&d, &bits, sizeof d);
    return d;
}

#endif
