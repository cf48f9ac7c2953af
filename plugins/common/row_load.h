// SPDX-License-Identifier: Apache-2.0
/*
 * row_load.h -- the load scans the ports of other routers' policies share
 * (sglang_cache_aware, llmd_default, aibrix_*, pstack_prefixaware,
 * session_hash): the peers count a worker's load as its requests in
 * flight (active_requests) and mostly break ties at random, so these scans
 * do too, drawing from the request's stream (a decision stays
 * reproducible from seed and request id).
 *
 * A row is a candidate when (flags & skip) == 0, skip coming from
 * wsel_call_eligible_skip. Pure functions over the table: any thread, no
 * allocation. OWNERSHIP: everything the caller's, read during the call.
 */
#ifndef WSEL_PLUGINS_ROW_LOAD_H
#define WSEL_PLUGINS_ROW_LOAD_H

#include <stdint.h>

#include "wsel.h"

/* No row (every scan below on a table without a candidate). */
#define ROW_LOAD_NONE UINT32_MAX

/* The candidates' active_requests: fewest, most, sum and how many rows. */
typedef struct row_load {
    uint32_t min, max, count;
    uint64_t sum;
} row_load;

static inline void row_load_scan(const wsel_table *t, uint8_t skip, row_load *out)
{
    row_load l = {UINT32_MAX, 0, 0, 0};
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (t->flags[i] & skip)
            continue;
        uint32_t a = t->active_requests[i];
        l.min = a < l.min ? a : l.min;
        l.max = a > l.max ? a : l.max;
        l.sum += a;
        l.count++;
    }
    if (l.count == 0)
        l.min = 0;
    *out = l;
}

/* Whether a newcomer tied with the kept row takes its place: the k-th
 * tie does with probability 1 / k, which leaves all k equally likely. */
static inline int row_load_take_tie(const wsel_host_api *host, wsel_rng *rng,
                                    uint32_t *ties)
{
    return wsel_call_rng_below(host, rng, ++*ties) == 0;
}

/* The candidate with the fewest requests in flight among those with at
 * least `min_overlap` cached blocks (0: all), exact ties uniform at
 * random; ROW_LOAD_NONE when none qualifies. */
static inline uint32_t row_load_least_active(const wsel_host_api *host,
                                             const wsel_table *t, uint8_t skip,
                                             uint32_t min_overlap, wsel_rng *rng)
{
    uint32_t best = ROW_LOAD_NONE, ties = 0;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if ((t->flags[i] & skip) || t->overlap_blocks[i] < min_overlap)
            continue;
        if (best == ROW_LOAD_NONE ||
            t->active_requests[i] < t->active_requests[best]) {
            best = i;
            ties = 1;
        } else if (t->active_requests[i] == t->active_requests[best] &&
                   row_load_take_tie(host, rng, &ties)) {
            best = i;
        }
    }
    return best;
}

/* The first candidate in row order with the fewest requests in flight
 * (production-stack's pick by the lowest rate: the first minimum wins);
 * ROW_LOAD_NONE when there is no candidate. */
static inline uint32_t row_load_first_least_active(const wsel_table *t, uint8_t skip)
{
    uint32_t best = ROW_LOAD_NONE;
    for (uint32_t i = 0; i < t->num_rows; i++)
        if (!(t->flags[i] & skip) &&
            (best == ROW_LOAD_NONE || t->active_requests[i] < t->active_requests[best]))
            best = i;
    return best;
}

/* The candidate other than `except` (ROW_LOAD_NONE: none excepted) with
 * the fewest requests in flight, ties to the lowest (worker_id, dp_rank)
 * (Dynamo's pickers order by (load, worker)); ROW_LOAD_NONE when none. */
static inline uint32_t row_load_least_active_lowest_id(const wsel_table *t, uint8_t skip,
                                                       uint32_t except)
{
    uint32_t best = ROW_LOAD_NONE;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if ((t->flags[i] & skip) || i == except)
            continue;
        if (best == ROW_LOAD_NONE || t->active_requests[i] < t->active_requests[best] ||
            (t->active_requests[i] == t->active_requests[best] &&
             (t->worker_id[i] < t->worker_id[best] ||
              (t->worker_id[i] == t->worker_id[best] && t->dp_rank[i] < t->dp_rank[best]))))
            best = i;
    }
    return best;
}

/* The deepest cached prefix among the candidates, in blocks. */
static inline uint32_t row_load_max_overlap(const wsel_table *t, uint8_t skip)
{
    uint32_t deepest = 0;
    for (uint32_t i = 0; i < t->num_rows; i++)
        if (!(t->flags[i] & skip) && t->overlap_blocks[i] > deepest)
            deepest = t->overlap_blocks[i];
    return deepest;
}

#endif
