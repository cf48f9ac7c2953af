// SPDX-License-Identifier: Apache-2.0
/*
 * sketch.c -- see sketch.h.
 */
#include "sketch.h"

#include <stdlib.h>
#include <string.h>

#include "mix64.h"
#include "ring.h"
#include "wsel.h"

int32_t chash_sketch_init(chash_sketch *s, uint32_t width, uint32_t window)
{
    if (width == 0 || width > (1u << 30) || window == 0)
        return WSEL_EINVAL;
    uint32_t w = 1, win = 1;
    while (w < width)
        w <<= 1;
    while (win * 2 <= window && win * 2 <= w)
        win <<= 1;
    uint32_t words = (w + 1) / 2;
    _Atomic uint64_t *c = calloc(words, sizeof(*c));
    if (c == NULL)
        return WSEL_ENOMEM;
    for (uint32_t i = 0; i < words; i++)
        atomic_init(&c[i], 0);
    s->words = c;
    s->width = w;
    s->window = win;
    s->slice = w / win;
    atomic_init(&s->requests, 0);
    return 0;
}

void chash_sketch_free(chash_sketch *s)
{
    free(s->words);
    s->words = NULL;
}

static uint32_t slot_of(const chash_sketch *s, uint64_t block)
{
    return (uint32_t)mix64(block ^ 0x3c6ef372fe94f82bull) & (s->width - 1);
}

/*
 * What the counter at `slot` would hold for a block present in all of the
 * `r` requests counted so far. The sweep halves counter i after the
 * requests r with r % window == i / slice (r >= 1); call the first such r
 * `first`. Before it the counter has counted all r; at it, it drops to
 * first / 2; every later halving maps c to (c + window) / 2, so after m
 * more it holds window + (first / 2 - window) / 2^m, plus one per request
 * since the last halving.
 */
static double always_count(const chash_sketch *s, uint32_t slot, uint64_t r)
{
    uint64_t phase = slot / s->slice;
    uint64_t first = phase == 0 ? s->window : phase;
    if (r < first)
        return (double)r;
    uint64_t m = (r - first) / s->window, since = (r - first) % s->window;
    double gap = (double)first / 2.0 - (double)s->window;
    if (m >= 64) {
        gap = 0.0; /* below 2^-64 of a window: nothing left */
    } else {
        /* gap / 2^m: times the double 2^-m, built from its bits (exact, as
         * m halvings are: gap is a multiple of 0.5, so it stays normal). */
        uint64_t bits = (uint64_t)(1023 - m) << 52;
        double scale;
        memcpy(&scale, &bits, sizeof(scale));
        gap *= scale;
    }
    double c = (double)s->window + gap + (double)since;
    return c >= 1.0 ? c : 1.0;
}

double chash_sketch_share(const chash_sketch *s, uint64_t block)
{
    uint64_t r = atomic_load_explicit(&s->requests, memory_order_relaxed);
    if (r == 0)
        return 0.0;
    uint32_t slot = slot_of(s, block);
    uint64_t word = atomic_load_explicit(&s->words[slot / 2], memory_order_relaxed);
    uint32_t c = (uint32_t)(word >> (32 * (slot % 2)));
    return (double)c / always_count(s, slot, r);
}

void chash_sketch_add(chash_sketch *s, uint64_t block)
{
    uint32_t slot = slot_of(s, block);
    atomic_fetch_add_explicit(&s->words[slot / 2], (uint64_t)1 << (32 * (slot % 2)),
                              memory_order_relaxed);
}

void chash_sketch_request(chash_sketch *s)
{
    uint64_t r = atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed) + 1;
    uint64_t first = (r % s->window) * s->slice;
    /* A load and a store, not a compare-and-swap loop: bounded work; an
     * increment landing in between is lost (see sketch.h). */
    if (s->slice % 2 == 0) {
        /* Whole words (first is even): both halves halved at once, the
         * high half's low bit kept out of the low half. */
        for (uint64_t i = first / 2; i < (first + s->slice) / 2; i++) {
            uint64_t v = atomic_load_explicit(&s->words[i], memory_order_relaxed);
            atomic_store_explicit(&s->words[i], (v >> 1) & 0x7fffffff7fffffffull,
                                  memory_order_relaxed);
        }
        return;
    }
    /* One counter (slice 1): its half of the word. */
    uint64_t shift = 32 * (first % 2), mask = (uint64_t)0xffffffffu << shift;
    uint64_t v = atomic_load_explicit(&s->words[first / 2], memory_order_relaxed);
    uint64_t half = ((v & mask) >> 1) & mask;
    atomic_store_explicit(&s->words[first / 2], (v & ~mask) | half, memory_order_relaxed);
}
