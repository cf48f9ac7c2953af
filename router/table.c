// SPDX-License-Identifier: Apache-2.0
/*
 * table.c -- the candidate table a route hands to libwsel-host, kept in
 * column form between routes. What changes only with the topology (worker
 * ids, ranks, capacity, the group view, the excluded flag of a draining or
 * unavailable worker)
 * is written when the epoch moves; a route writes only what depends on the
 * request and the loads (overlap, prefill, decode, cost, requests in
 * flight, busy), in one pass over the rows, with wsel_table_build's
 * formulas in its order of operations, so the doubles are the same:
 *   prefill = max(isl - overlap * bs, 0) + active_prefill_tokens
 *   decode  = active_blocks + max(isl / bs - overlap, 0)
 *   cost    = weight * (prefill / bs) + decode, saturated at DBL_MAX.
 * The active loads include the other replicas' with replica sync, and its
 * echo of this replica's latest routes (sync.h).
 * (The router never sets WSEL_ROW_NO_LOAD: every rank has a load record.)
 * The rows are in canonical order by construction (topology.c), so the
 * table is valid without wsel_table_validate's pass.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "router_internal.h"
#include "sync.h"

int rt_table_init(rt_table *t, uint32_t max_rows)
{
    memset(t, 0, sizeof(*t));
    size_t n = max_rows;
    /* Five 8-byte columns, six 4-byte ones, two 1-byte ones. */
    t->storage = calloc(n, 5 * 8 + 6 * 4 + 2);
    if (!t->storage)
        return WSEL_ENOMEM;
    char *p = t->storage;
    t->worker_id = (uint64_t *)(void *)p;
    t->prefill = t->worker_id + n;
    t->decode = t->prefill + n;
    t->kvcap = t->decode + n;
    t->cost = (double *)(void *)(t->kvcap + n);
    t->dp_rank = (uint32_t *)(void *)(t->cost + n);
    t->overlap = t->dp_rank + n;
    t->active = t->overlap + n;
    t->gfirst = t->active + n;
    t->gcount = t->gfirst + n;
    t->slot = t->gcount + n;
    t->flags = (uint8_t *)(t->slot + n);
    t->base_flags = t->flags + n;
    t->epoch = 0; /* the router's starts at 1: the first fill writes all */
    return 0;
}

void rt_table_free(rt_table *t)
{
    free(t->storage);
    memset(t, 0, sizeof(*t));
}

/* The columns that change only with the topology. */
static void fill_static(wsel_router *r)
{
    rt_table *t = &r->table;
    uint32_t groups = 0;
    for (uint32_t i = 0; i < r->num_rows; i++) {
        uint32_t sid = r->rows[i];
        const rt_slot *s = &r->slots[sid];
        const rt_worker *w = &r->workers[s->worker];
        t->slot[i] = sid;
        t->worker_id[i] = w->id;
        t->dp_rank[i] = s->rank;
        t->kvcap[i] = r->opt.capacity_blocks;
        t->base_flags[i] = w->draining || w->unavailable ? WSEL_ROW_EXCLUDED : 0;
        if (i == 0 || t->worker_id[i - 1] != w->id)
            t->gfirst[groups++] = i;
    }
    for (uint32_t g = 0; g < groups; g++)
        t->gcount[g] = (g + 1 < groups ? t->gfirst[g + 1] : r->num_rows) - t->gfirst[g];
    t->num_groups = groups;
    t->epoch = r->epoch;
}

const wsel_table *rt_table_fill(wsel_router *r, const wsel_request *q, const uint32_t *ov)
{
    rt_table *t = &r->table;
    if (t->epoch != r->epoch)
        fill_static(r);
    const uint32_t n = r->num_rows;
    const uint32_t isl = q->isl_tokens, bs = q->block_size;
    const uint32_t blocks = isl / bs, blocks_ceil = blocks + (isl % bs != 0);
    const double weight = q->overlap_score_weight, dbs = (double)bs;
    const uint32_t busy_req = r->opt.busy_active_requests;
    const uint64_t busy_pre = r->opt.busy_prefill_tokens;
    const uint64_t echo_now = rt_sync_echo_now(r);
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t sid = t->slot[i];
        const rt_slot *s = &r->slots[sid];
        rt_sync_row peers; /* other replicas' */
        rt_sync_load_echo(r, sid, echo_now, &peers);
        const uint64_t pre = s->active_prefill_tokens + peers.prefill;
        const uint32_t act = s->active_requests + peers.requests;
        const uint32_t o = ov[sid];
        const uint32_t uncached = o < blocks_ceil ? isl - o * bs : 0;
        const uint32_t new_blocks = o < blocks ? blocks - o : 0;
        const uint64_t p = uncached + pre;
        const uint64_t d = s->active_blocks + peers.blocks + new_blocks;
        const double c = weight * ((double)p / dbs) + (double)d;
        uint8_t f = t->base_flags[i];
        if ((busy_req && act >= busy_req) || (busy_pre && pre >= busy_pre))
            f |= WSEL_ROW_BUSY;
        t->overlap[i] = o;
        t->prefill[i] = p;
        t->decode[i] = d;
        t->cost[i] = c < DBL_MAX ? c : DBL_MAX;
        t->active[i] = act;
        t->flags[i] = f;
    }
    wsel_table *w = &t->t;
    memset(w, 0, sizeof(*w));
    w->struct_size = sizeof(*w);
    w->num_rows = n;
    w->num_groups = t->num_groups;
    w->topology_epoch = r->epoch;
    w->worker_id = t->worker_id;
    w->dp_rank = t->dp_rank;
    w->overlap_blocks = t->overlap;
    w->prefill_tokens = t->prefill;
    w->decode_blocks = t->decode;
    w->cost = t->cost;
    w->kv_capacity_blocks = t->kvcap;
    w->active_requests = t->active;
    w->flags = t->flags;
    w->group_first_row = t->gfirst;
    w->group_row_count = t->gcount;
    return w;
}
