// SPDX-License-Identifier: Apache-2.0
/*
 * sketch.h -- the chash plugin's memory of recent traffic: how many recent
 * requests contained a given prefix block, with exponential decay.
 *
 * `width` 32-bit counters (a power of two); a block adds 1 to the counter
 * its hash selects, so a count is never below the truth and above it by
 * the colliding blocks' counts (about increments / width on average). A
 * sweep halves `width / window` counters per request, so each counter is
 * halved once every `window` requests: a block present in every request
 * holds between `window` and 2 * `window`, one present in a fraction f of
 * the traffic f times that, and blocks nobody sends any more fade out.
 * chash_sketch_share divides a count by what an always-present block's
 * counter would hold at the same phase of its sweep, which gives the
 * fraction f without any per-counter bookkeeping.
 *
 * Counters are atomics with relaxed ordering: any number of threads count
 * and estimate at once, never block, never allocate, and no select does
 * more than a bounded slice of the decay. A count racing with the halving
 * of its counter's word (it and its neighbour) may be lost, which only
 * blurs an approximate estimate; counts racing with counts are never lost.
 */
#ifndef WSEL_CHASH_SKETCH_H
#define WSEL_CHASH_SKETCH_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct chash_sketch {
    /* Two 32-bit counters a word (counter i: half i % 2 of word i / 2), so
     * the sweep halves two with one load and one store; an increment adds
     * to its half (a count stays far below 2^32: about 2 * window). */
    _Atomic uint64_t *words;
    uint32_t width;  /* a power of two */
    uint32_t window; /* requests per full sweep; divides width */
    uint32_t slice;  /* counters halved per request: width / window */
    _Atomic uint64_t requests;
} chash_sketch;

/* `width` rounded up to a power of two, `window` rounded down to a power of
 * two <= width (both >= 1). Returns 0, WSEL_EINVAL or WSEL_ENOMEM (then *s
 * is untouched). OWNERSHIP: caller owns `s`; release with
 * chash_sketch_free. */
int32_t chash_sketch_init(chash_sketch *s, uint32_t width, uint32_t window);
void chash_sketch_free(chash_sketch *s);

/* The estimated fraction of recent requests that contained `block`, in
 * [0, about 1]; 0 before any request was counted. */
double chash_sketch_share(const chash_sketch *s, uint64_t block);

/* Count one occurrence of `block`; call it for the blocks of a request,
 * then chash_sketch_request once. */
void chash_sketch_add(chash_sketch *s, uint64_t block);
/* One more request: advances the decay sweep by one slice. */
void chash_sketch_request(chash_sketch *s);

#endif
