// SPDX-License-Identifier: Apache-2.0
/*
 * ring.c -- see ring.h.
 */
#include "ring.h"

#include <stdlib.h>

#include "mix64.h"

int32_t chash_ring_init(chash_ring *ring, uint32_t max_workers, uint32_t vnodes)
{
    if (max_workers == 0 || vnodes == 0)
        return WSEL_EINVAL;
    size_t num_points = (size_t)max_workers * vnodes;
    if (num_points > UINT32_MAX)
        return WSEL_EINVAL;
    /* Large: pages are only touched for the workers actually present. */
    ring_point *points = malloc(num_points * sizeof(*points));
    if (points == NULL)
        return WSEL_ENOMEM;
    ring->points = points;
    ring->fingerprint = 0;
    ring->room = (uint32_t)num_points;
    ring->vnodes = vnodes;
    ring->num_workers = 0;
    ring->num_points = 0;
    return 0;
}

int32_t chash_ring_reserve(chash_ring *ring, uint32_t num_workers)
{
    if (num_workers <= ring->room)
        return 0;
    ring_point *points = realloc(ring->points, (size_t)num_workers * sizeof(*points));
    if (points == NULL)
        return WSEL_ENOMEM;
    ring->points = points;
    ring->room = num_workers;
    return 0;
}

void chash_ring_free(chash_ring *ring)
{
    free(ring->points);
    ring->points = NULL;
    ring->num_workers = 0;
    ring->num_points = 0;
}

uint64_t chash_ring_finish(uint64_t h, uint32_t num_workers)
{
    return mix64(h ^ num_workers);
}

/* The fingerprint of `table`'s workers. */
static uint64_t table_fingerprint(const wsel_table *table)
{
    uint64_t h = 0;
    for (uint32_t g = 0; g < table->num_groups; g++)
        h = chash_ring_fold(h, g, table->worker_id[table->group_first_row[g]],
                            table->group_row_count[g]);
    return chash_ring_finish(h, table->num_groups);
}

int chash_ring_matches(const chash_ring *ring, const wsel_table *table)
{
    return ring->num_workers == table->num_groups &&
           ring->fingerprint == table_fingerprint(table);
}

static int point_less(const ring_point *a, const ring_point *b)
{
    return a->point < b->point || (a->point == b->point && a->owner < b->owner);
}

static void sift_down(ring_point *p, uint32_t root, uint32_t n)
{
    for (;;) {
        uint32_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && point_less(&p[child], &p[child + 1]))
            child++;
        if (!point_less(&p[root], &p[child]))
            return;
        ring_point tmp = p[root];
        p[root] = p[child];
        p[child] = tmp;
        root = child;
    }
}

/* In-place heapsort: O(n log n), no allocation (qsort may allocate). */
static void sort_points(ring_point *p, uint32_t n)
{
    for (uint32_t i = n / 2; i-- > 0;)
        sift_down(p, i, n);
    for (uint32_t end = n; end-- > 1;) {
        ring_point tmp = p[0];
        p[0] = p[end];
        p[end] = tmp;
        sift_down(p, 0, end);
    }
}

int32_t chash_ring_build(chash_ring *ring, const wsel_table *table)
{
    ring->num_workers = 0;
    ring->num_points = 0;
    if (table->num_groups > ring->room)
        return WSEL_ERANGE;
    uint64_t total_ranks = 0;
    for (uint32_t g = 0; g < table->num_groups; g++)
        total_ranks += table->group_row_count[g];
    uint64_t room = ring->room;
    int scaled = total_ranks * ring->vnodes > room;
    uint32_t n = 0;
    for (uint32_t g = 0; g < table->num_groups; g++) {
        uint64_t id = table->worker_id[table->group_first_row[g]];
        uint32_t ranks = table->group_row_count[g];
        uint64_t points = (uint64_t)ranks * ring->vnodes;
        if (scaled) {
            points = (room - table->num_groups) * ranks / total_ranks;
            points = points > 0 ? points : 1;
        }
        /* A worker's points depend on its id (and rank count) alone, so
         * they stay put when other workers come or go. */
        uint64_t base = mix64(id);
        for (uint32_t v = 0; v < points; v++, n++) {
            ring->points[n].point = mix64(base + (v + 1) * 0x9e3779b97f4a7c15ull);
            ring->points[n].owner = g;
            ring->points[n].reserved = 0;
        }
    }
    sort_points(ring->points, n);
    ring->fingerprint = table_fingerprint(table);
    ring->num_workers = table->num_groups;
    ring->num_points = n;
    return 0;
}

uint32_t chash_ring_find(const chash_ring *ring, uint64_t hash)
{
    uint32_t lo = 0, hi = ring->num_points;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ring->points[mid].point < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == ring->num_points ? 0 : lo;
}
