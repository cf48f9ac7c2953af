// SPDX-License-Identifier: Apache-2.0
/*
 * ring.h -- the chash plugin's hash ring: `vnodes` points per rank of a
 * worker (a worker of 8 data-parallel ranks has 8 times the points of a
 * one-rank worker: it takes 8 times the keys), sorted, rebuilt in place
 * (no allocation) whenever the worker set or a worker's rank count
 * changes.
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
    /* Worker ids the ring was built for, in table order; num_workers == 0:
     * none. */
    uint64_t *workers;
    /* Each worker's rank count (group_row_count) it was built for. */
    uint32_t *ranks;
    /* vnodes points per rank (fewer when that passes the reserved
     * max_workers * vnodes: see chash_ring_build), sorted by (point,
     * owner). */
    ring_point *points;
    uint32_t max_workers;
    uint32_t vnodes;
    uint32_t num_workers;
    uint32_t num_points;
} chash_ring;

/* Reserve room for `max_workers` workers and max_workers * vnodes points. Returns 0,
 * WSEL_EINVAL or WSEL_ENOMEM (then *ring is untouched). OWNERSHIP: caller
 * owns `ring`; release with chash_ring_free. */
int32_t chash_ring_init(chash_ring *ring, uint32_t max_workers, uint32_t vnodes);

/* Release the storage; a zeroed ring is a harmless no-op. */
void chash_ring_free(chash_ring *ring);

/* 1 if the ring was built for exactly the workers of `table` with their
 * rank counts, else 0. O(G). */
int chash_ring_matches(const chash_ring *ring, const wsel_table *table);

/* Rebuild for the workers of `table`, in place: vnodes points per rank
 * when the cluster's R ranks need at most the P = max_workers * vnodes
 * points reserved, else max(1, floor((P - G) * ranks / R)) per worker (G
 * workers), still proportional to ranks. Returns 0, or WSEL_ERANGE (more
 * workers than max_workers; the ring is left empty). */
int32_t chash_ring_build(chash_ring *ring, const wsel_table *table);

/* Index of the first point at or after `hash`, wrapping to 0. num_points
 * must be > 0. */
uint32_t chash_ring_find(const chash_ring *ring, uint64_t hash);

#endif
