// SPDX-License-Identifier: Apache-2.0
/*
 * ring.h -- the chash plugin's hash ring: `vnodes` points per rank of a
 * worker (a worker of 8 data-parallel ranks has 8 times the points of a
 * one-rank worker: it takes 8 times the keys), sorted, rebuilt in place
 * (no allocation) whenever the worker set or a worker's rank count
 * changes. The worker set it was built for is kept as a fingerprint
 * (chash_ring_fold), so no storage grows with the workers: only the
 * points do, `room` of them reserved at create and grown (allocation) by
 * chash_ring_reserve, never on a select.
 * Not thread-safe: the plugin guards it with its own lock.
 */
#ifndef WSEL_CHASH_RING_H
#define WSEL_CHASH_RING_H

#include <stdint.h>

#include "wsel.h"

/* One virtual node: a point on the 64-bit ring and the index of its worker
 * in the ring's worker list (= its group index in a matching table). */
typedef struct ring_point {
    uint64_t point;
    uint32_t owner;
    uint32_t reserved;
} ring_point;

typedef struct chash_ring {
    /* vnodes points per rank (fewer when that passes `room`: see
     * chash_ring_build), sorted by (point, owner). */
    ring_point *points;
    /* Fingerprint of the workers (ids and rank counts, in table order) the
     * ring was built for: chash_ring_fold over them. */
    uint64_t fingerprint;
    uint32_t room; /* points reserved: max_workers * vnodes at create */
    uint32_t vnodes;
    uint32_t num_workers; /* 0: built for none */
    uint32_t num_points;
} chash_ring;

/* Worker g (id, rank count) folded into a fingerprint started at 0; the
 * fold over a table's workers, finished by chash_ring_finish, is what the
 * ring keeps. Each worker's term stands alone (no chain from one worker
 * to the next, so a pass over the workers runs at full width) and carries
 * its place g, so renumbered workers differ. */
static inline uint64_t chash_ring_fold(uint64_t h, uint32_t g, uint64_t id, uint32_t ranks)
{
    uint64_t x = (id + ((uint64_t)g << 32 | ranks)) * 0xff51afd7ed558ccdull;
    return h + (x ^ (x >> 31));
}
uint64_t chash_ring_finish(uint64_t h, uint32_t num_workers);

/* Reserve max_workers * vnodes points. Returns 0, WSEL_EINVAL or
 * WSEL_ENOMEM (then *ring is untouched). OWNERSHIP: caller owns `ring`;
 * release with chash_ring_free. */
int32_t chash_ring_init(chash_ring *ring, uint32_t max_workers, uint32_t vnodes);

/* Grow the reserved points to hold `num_workers` workers (one point each
 * at least); never shrinks; keeps the built ring. Allocates: the topology
 * hook's, never a select's. Returns 0 or WSEL_ENOMEM (ring unchanged). */
int32_t chash_ring_reserve(chash_ring *ring, uint32_t num_workers);

/* Release the storage; a zeroed ring is a harmless no-op. */
void chash_ring_free(chash_ring *ring);

/* 1 if the ring was built for exactly the workers of `table` with their
 * rank counts, else 0. O(G). */
int chash_ring_matches(const chash_ring *ring, const wsel_table *table);

/* Rebuild for the workers of `table`, in place: vnodes points per rank
 * when the cluster's R ranks need at most the P = room points reserved,
 * else max(1, floor((P - G) * ranks / R)) per worker (G workers), still
 * proportional to ranks. Returns 0, or WSEL_ERANGE (more workers than
 * points reserved: chash_ring_reserve first; the ring is left empty). */
int32_t chash_ring_build(chash_ring *ring, const wsel_table *table);

/* Index of the first point at or after `hash`, wrapping to 0. num_points
 * must be > 0. */
uint32_t chash_ring_find(const chash_ring *ring, uint64_t hash);

#endif
