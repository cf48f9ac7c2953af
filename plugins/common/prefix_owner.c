// SPDX-License-Identifier: Apache-2.0
/*
 * prefix_owner.c -- see prefix_owner.h.
 */
#include "prefix_owner.h"

#include "depth_grid.h"

/* A key for the affinity key, kept apart from block hashes of equal value. */
static uint64_t affinity_slot_key(uint64_t affinity_key)
{
    return affinity_key ^ 0xa0761d6478bd642full;
}

/*
 * Blocks are remembered for every request routed, so "depth d was routed
 * before" holds for a whole leading run of depths: a binary search over
 * the grid finds its end. (A slot overwritten by another key can break the
 * run; the search then settles on a shallower block, which is still a
 * block this request shares.)
 */
uint32_t prefix_owner_find(const sticky_table *owners, const wsel_request *req,
                           int by_affinity_key)
{
    if (by_affinity_key && req->affinity_key != 0)
        return sticky_table_get(owners, affinity_slot_key(req->affinity_key));
    uint32_t n = req->block_hashes != NULL ? req->num_block_hashes : 0;
    if (n == 0)
        return req->affinity_key != 0
                   ? sticky_table_get(owners, affinity_slot_key(req->affinity_key))
                   : 0;
    const uint64_t *b = req->block_hashes;
    /* The whole prompt routed before (a retry, or a repeated prompt). */
    uint32_t owner = sticky_table_get(owners, b[n - 1]);
    if (owner != 0)
        return owner;
    /* Largest d in [1, n] whose depth_grid_floor(d) is remembered. */
    uint32_t lo = 0, hi = n; /* invariant: answer in [lo, hi] */
    uint32_t found = 0;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        uint32_t o = sticky_table_get(owners, b[depth_grid_floor(mid) - 1]);
        if (o != 0) {
            lo = mid;
            found = o;
        } else {
            hi = mid - 1;
        }
    }
    return found; /* set whenever lo moved; 0 if it never did */
}

void prefix_owner_record(sticky_table *owners, const wsel_request *req, uint32_t owner,
                         int by_affinity_key)
{
    if (by_affinity_key && req->affinity_key != 0) {
        sticky_table_put(owners, affinity_slot_key(req->affinity_key), owner);
        return;
    }
    uint32_t n = req->block_hashes != NULL ? req->num_block_hashes : 0;
    if (n == 0) {
        if (req->affinity_key != 0)
            sticky_table_put(owners, affinity_slot_key(req->affinity_key), owner);
        return;
    }
    for (uint32_t d = 1; d <= n && d != UINT32_MAX; d = depth_grid_next(d))
        sticky_table_put(owners, req->block_hashes[d - 1], owner);
    sticky_table_put(owners, req->block_hashes[n - 1], owner);
}
