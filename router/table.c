// SPDX-License-Identifier: Apache-2.0
/*
 * table.c -- the candidate table a route hands to libwsel-host, kept in
 * column form between routes. What changes only with the topology (worker
 * ids, ranks, capacity, the group view, the excluded flag of a draining or
 * unavailable worker)
 * is written when the epoch moves. What changes only with a rank's load
 * (requests in flight, busy) is written when the load does
 * (rt_table_note_load: a route's accounting, a first token, a finish),
 * except with replica sync, whose peers' loads move without a note, and
 * after an answer that was not the plugin's (it may have written the
 * flags: rt_table_distrust), when the next route writes them all. A route
 * writes what depends on the request (overlap, prefill, decode, cost), in
 * one pass over the rows, with wsel_table_build's formulas in its order
 * of operations, so the doubles are the same:
 *   prefill = max(isl - overlap * bs, 0) + active_prefill_tokens
 *   decode  = active_blocks + max(isl / bs - overlap, 0)
 *   cost    = weight * (prefill / bs) + decode, saturated at DBL_MAX.
 * The active loads include the other replicas' with replica sync, and its
 * echo of this replica's latest routes (sync.h).
 * (The router never sets WSEL_ROW_NO_LOAD: every rank has a load record.)
 * The rows are in canonical order by construction (topology.c), so the
 * table is valid without wsel_table_validate's pass. The pass over every
 * row takes overlap 0; the few rows with a cached prefix (r->ov_slots)
 * are written again after it, and only they hold a nonzero overlap.
 */
#include <float.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "router_internal.h"
#include "sync.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

int rt_table_init(rt_table *t, uint32_t max_rows)
{
    memset(t, 0, sizeof(*t));
    size_t n = max_rows;
    /* Five 8-byte columns, eight 4-byte ones, two 1-byte ones. */
    t->storage = calloc(n, 5 * 8 + 8 * 4 + 2);
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
    t->row_of = t->slot + n;
    t->ov_rows = t->row_of + n;
    t->flags = (uint8_t *)(t->ov_rows + n);
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
    memset(t->row_of, 0xff, (size_t)r->opt.max_rows * sizeof(*t->row_of)); /* RT_NIL */
    memset(t->overlap, 0, (size_t)r->opt.max_rows * sizeof(*t->overlap));
    t->ov_nrows = 0;
    t->rows_are_slots = 1;
    for (uint32_t i = 0; i < r->num_rows; i++) {
        uint32_t sid = r->rows[i];
        const rt_slot *s = &r->slots[sid];
        const rt_worker *w = &r->workers[s->worker];
        t->slot[i] = sid;
        t->row_of[sid] = i;
        t->rows_are_slots &= sid == i;
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
    t->load_cols = 0;
}

/* x / bs as wsel_table_build computes it. A power of two's reciprocal is
 * exact, so with pow2 (inv_bs = 1 / bs) x * inv_bs is the same correctly
 * rounded quotient, without a division a row. */
static inline double per_block(double x, double bs, double inv_bs, int pow2)
{
    return pow2 ? x * inv_bs : x / bs;
}

/* What a route's request makes of every row. */
typedef struct fill_req {
    uint32_t isl, bs, blocks, blocks_ceil;
    double weight, dbs, inv_bs;
    uint64_t echo_now; /* rt_sync_echo_now */
} fill_req;

/* A row's flags: its base flags, and WSEL_ROW_BUSY when act requests or
 * pre prefill tokens in flight reach the router's thresholds. */
static inline uint8_t load_flags(const wsel_router *r, uint32_t i, uint32_t act,
                                 uint64_t pre)
{
    const uint32_t busy_req = r->opt.busy_active_requests;
    const uint64_t busy_pre = r->opt.busy_prefill_tokens;
    const int busy = (busy_req && act >= busy_req) || (busy_pre && pre >= busy_pre);
    return (uint8_t)(r->table.base_flags[i] | (busy ? WSEL_ROW_BUSY : 0));
}

/* Row i of slot sid with overlap o: its request- and load-dependent
 * columns (the overlap column is the caller's). */
static inline void fill_row(wsel_router *r, const fill_req *f, uint32_t i, uint32_t sid,
                            uint32_t o)
{
    rt_table *t = &r->table;
    const rt_load *s = &r->load[sid];
    rt_sync_row peers; /* other replicas', and the echo */
    rt_sync_load_echo(r, sid, f->echo_now, &peers);
    const uint64_t pre = s->active_prefill_tokens + peers.prefill;
    const uint32_t act = s->active_requests + peers.requests;
    const uint32_t uncached = o < f->blocks_ceil ? f->isl - o * f->bs : 0;
    const uint32_t new_blocks = o < f->blocks ? f->blocks - o : 0;
    const uint64_t p = uncached + pre;
    const uint64_t d = s->active_blocks + peers.blocks + new_blocks;
    const double c =
        f->weight * per_block((double)p, f->dbs, f->inv_bs, f->inv_bs != 0.0) + (double)d;
    t->prefill[i] = p;
    t->decode[i] = d;
    t->cost[i] = c < DBL_MAX ? c : DBL_MAX;
    t->active[i] = act;
    t->flags[i] = load_flags(r, i, act, pre);
}

/* Row i's load columns (requests in flight, flags) from slot sid's load,
 * without a replica's. */
static inline void fill_load_row(wsel_router *r, uint32_t i, uint32_t sid)
{
    const rt_load *s = &r->load[sid];
    r->table.active[i] = s->active_requests;
    r->table.flags[i] = load_flags(r, i, s->active_requests, s->active_prefill_tokens);
}

void rt_table_note_load(wsel_router *r, uint32_t sid)
{
    rt_table *t = &r->table;
    if (!t->load_cols || t->epoch != r->epoch)
        return;
    const uint32_t i = t->row_of[sid];
    if (i != RT_NIL)
        fill_load_row(r, i, sid);
}

void rt_table_distrust(wsel_router *r)
{
    r->table.load_cols = 0;
}

/* The columns fill_uncached writes. */
typedef struct fill_cols {
    uint64_t *prefill, *decode;
    double *cost;
} fill_cols;

/* Row i of fill_uncached from load s: fill_row's request-dependent
 * columns with overlap 0 and no replica's load. */
static inline void uncached_row(const fill_cols *c, const fill_req *f, int pow2,
                                uint32_t i, const rt_load *s)
{
    const uint64_t p = (f->blocks_ceil > 0 ? f->isl : 0) + s->active_prefill_tokens;
    const uint64_t d = s->active_blocks + f->blocks;
    const double cost =
        f->weight * per_block((double)p, f->dbs, f->inv_bs, pow2) + (double)d;
    c->prefill[i] = p;
    c->decode[i] = d;
    c->cost[i] = cost < DBL_MAX ? cost : DBL_MAX;
}

#if defined(__SSE2__)
_Static_assert(offsetof(rt_load, active_prefill_tokens) == 0 &&
                   offsetof(rt_load, active_blocks) == 8,
               "uncached_pair loads a slot's prefill and blocks as one register");

/* Rows i and i + 1 of fill_uncached from loads s0 and s1, 2 lanes a
 * register: prefill, decode and cost in the scalar's operations, each
 * lane's own rounding. x < 2^52 converts exactly as the bits of 2^52 + x
 * less 2^52; a pair with a larger value takes the scalar rows. */
static inline void uncached_pair(const fill_cols *c, const fill_req *f, int pow2,
                                 uint32_t i, const rt_load *s0, const rt_load *s1)
{
    const __m128i l0 = _mm_loadu_si128((const __m128i *)(const void *)s0);
    const __m128i l1 = _mm_loadu_si128((const __m128i *)(const void *)s1);
    const __m128i p = _mm_add_epi64(_mm_unpacklo_epi64(l0, l1),
                                    _mm_set1_epi64x(f->blocks_ceil > 0 ? f->isl : 0));
    const __m128i d = _mm_add_epi64(_mm_unpackhi_epi64(l0, l1),
                                    _mm_set1_epi64x(f->blocks));
    const __m128i big = _mm_set1_epi64x((long long)~((UINT64_C(1) << 52) - 1));
    const __m128i high = _mm_and_si128(_mm_or_si128(p, d), big);
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(high, _mm_setzero_si128())) != 0xffff) {
        uncached_row(c, f, pow2, i, s0);
        uncached_row(c, f, pow2, i + 1, s1);
        return;
    }
    const __m128i bits = _mm_set1_epi64x(0x4330000000000000LL);
    const __m128d two52 = _mm_set1_pd(0x1p52);
    const __m128d pd = _mm_sub_pd(_mm_castsi128_pd(_mm_or_si128(p, bits)), two52);
    const __m128d dd = _mm_sub_pd(_mm_castsi128_pd(_mm_or_si128(d, bits)), two52);
    const __m128d per = pow2 ? _mm_mul_pd(pd, _mm_set1_pd(f->inv_bs))
                             : _mm_div_pd(pd, _mm_set1_pd(f->dbs));
    const __m128d cost = _mm_add_pd(_mm_mul_pd(_mm_set1_pd(f->weight), per), dd);
    /* MINPD answers its second operand unless the first is less: as
     * uncached_row's saturation. */
    _mm_storeu_si128((__m128i *)(void *)(c->prefill + i), p);
    _mm_storeu_si128((__m128i *)(void *)(c->decode + i), d);
    _mm_storeu_pd(c->cost + i, _mm_min_pd(cost, _mm_set1_pd(DBL_MAX)));
}
#endif

/* fill_row's request-dependent columns for every row with overlap 0 and
 * no replica's load (pow2: bs is a power of two; rows_are_slots: row i
 * is slot i). The column pointers live in a local copy, which no store
 * through them can change. */
static inline void fill_uncached(wsel_router *r, const fill_req *f, int pow2,
                                 int rows_are_slots)
{
    rt_table *t = &r->table;
    const fill_cols c = {t->prefill, t->decode, t->cost};
    const uint32_t *slot = t->slot;
    const rt_load *load = r->load;
    const uint32_t n = r->num_rows;
    uint32_t i = 0;
#if defined(__SSE2__)
    for (; n - i >= 2; i += 2)
        uncached_pair(&c, f, pow2, i, &load[rows_are_slots ? i : slot[i]],
                      &load[rows_are_slots ? i + 1 : slot[i + 1]]);
#endif
    for (; i < n; i++)
        uncached_row(&c, f, pow2, i, &load[rows_are_slots ? i : slot[i]]);
}

/* fill_rows without replica sync: the load columns only when they are not
 * kept (rt_table_note_load), the request's columns of every row. */
static void fill_unshared(wsel_router *r, const fill_req *f)
{
    rt_table *t = &r->table;
    if (!t->load_cols) {
        for (uint32_t i = 0; i < r->num_rows; i++)
            fill_load_row(r, i, t->slot[i]);
        t->load_cols = 1;
    }
    if (f->inv_bs != 0.0) {
        if (t->rows_are_slots)
            fill_uncached(r, f, 1, 1);
        else
            fill_uncached(r, f, 1, 0);
    } else if (t->rows_are_slots) {
        fill_uncached(r, f, 0, 1);
    } else {
        fill_uncached(r, f, 0, 0);
    }
}

/* The rows of the slots with an overlap, again, the overlap column
 * cleared where the last route set it. */
static void fill_cached(wsel_router *r, const fill_req *f)
{
    rt_table *t = &r->table;
    for (uint32_t k = 0; k < t->ov_nrows; k++)
        t->overlap[t->ov_rows[k]] = 0;
    t->ov_nrows = 0;
    for (uint32_t k = 0; k < r->ov_n; k++) {
        const uint32_t sid = r->ov_slots[k], i = t->row_of[sid];
        if (i == RT_NIL)
            continue;
        fill_row(r, f, i, sid, r->ov[sid]);
        t->overlap[i] = r->ov[sid];
        t->ov_rows[t->ov_nrows++] = i;
    }
}

/* Every row as if nothing were cached (the load columns only when they
 * are not kept), then the rows of the slots with an overlap again. */
static void fill_rows(wsel_router *r, const wsel_request *q)
{
    rt_table *t = &r->table;
    const uint32_t isl = q->isl_tokens, bs = q->block_size;
    fill_req f = {.isl = isl,
                  .bs = bs,
                  .blocks = isl / bs,
                  .blocks_ceil = isl / bs + (isl % bs != 0),
                  .weight = q->overlap_score_weight,
                  .dbs = (double)bs,
                  .inv_bs = (bs & (bs - 1)) == 0 ? 1.0 / (double)bs : 0.0,
                  .echo_now = rt_sync_echo_now(r)};
    if (r->sync) {
        for (uint32_t i = 0; i < r->num_rows; i++)
            fill_row(r, &f, i, t->slot[i], 0);
        t->load_cols = 0; /* the replicas' loads move without a note */
    } else {
        fill_unshared(r, &f);
    }
    fill_cached(r, &f);
}

const wsel_table *rt_table_fill(wsel_router *r, const wsel_request *q)
{
    rt_table *t = &r->table;
    if (t->epoch != r->epoch)
        fill_static(r);
    fill_rows(r, q);
    const uint32_t n = r->num_rows;
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
