// SPDX-License-Identifier: Apache-2.0
/*
 * sketch.c -- see sketch.h.
 */
#include "sketch.h"

#include <stdlib.h>

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
    _Atomic uint32_t *c = calloc(w, sizeof(*c));
    if (c == NULL)
        return WSEL_ENOMEM;
    for (uint32_t i = 0; i < w; i++)
        atomic_init(&c[i], 0);
    s->counters = c;
    s->width = w;
    s->window = win;
    s->slice = w / win;
    atomic_init(&s->requests, 0);
    return 0;
}

void chash_sketch_free(chash_sketch *s)
{
    free(s->counters);
    s->counters = NULL;
}

static uint32_t slot_of(const chash_sketch *s, uint64_t block)
{
    return (uint32_t)chash_mix64(block ^ 0x3c6ef372fe94f82bull) & (s->width - 1);
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
    if (m >= 64)
        gap = 0.0; /* below 2^-64 of a window: nothing left */
    for (uint64_t k = 0; k < m && gap != 0.0; k++)
        gap /= 2.0;
    double c = (double)s->window + gap + (double)since;
    return c >= 1.0 ? c : 1.0;
}

double chash_sketch_share(const chash_sketch *s, uint64_t block)
{
    uint64_t r = atomic_load_explicit(&s->requests, memory_order_relaxed);
    if (r == 0)
        return 0.0;
    uint32_t slot = slot_of(s, block);
    uint32_t c = atomic_load_explicit(&s->counters[slot], memory_order_relaxed);
    return (double)c / always_count(s, slot, r);
}

void chash_sketch_add(chash_sketch *s, uint64_t block)
{
    atomic_fetch_add_explicit(&s->counters[slot_of(s, block)], 1, memory_order_relaxed);
}

void chash_sketch_request(chash_sketch *s)
{
    uint64_t r = atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed) + 1;
    uint64_t first = (r % s->window) * s->slice;
    for (uint64_t i = first; i < first + s->slice; i++) {
        /* A load and a store, not a compare-and-swap loop: bounded work; an
         * increment landing in between is lost (see sketch.h). */
        uint32_t v = atomic_load_explicit(&s->counters[i], memory_order_relaxed);
        atomic_store_explicit(&s->counters[i], v / 2, memory_order_relaxed);
    }
}
