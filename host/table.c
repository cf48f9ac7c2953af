// SPDX-License-Identifier: Apache-2.0
/*
 * table.c -- build a candidate table from rank states into storage that is
 * allocated once and reused for every request.
 *
 * The columns live in one allocation, widest first so each stays aligned.
 * The build makes two passes over the rows:
 *   1. copy the rank states into the columns, compute prefill and decode,
 *      find where each worker's group starts, and fold the order and flag
 *      checks into two words (a row-by-row check runs only to name a
 *      refused rank); no branch in the body;
 *   2. the cost, converting the loads to double exactly through a 2^52
 *      bias when they are below 2^52 (always, for real loads). It
 *      vectorises with SSE2 under gcc -O3, which host/CMakeLists.txt sets
 *      for this file (docs/bench.md, "What vectorises").
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Bytes per row over every column: five 8-byte, five 4-byte (two of them
 * the group view, at most one group per row), one flag byte. */
#define BYTES_PER_ROW (5u * 8u + 5u * 4u + 1u)

typedef struct columns {
    uint64_t *worker_id;
    uint64_t *prefill_tokens;
    uint64_t *decode_blocks;
    double *cost;
    uint64_t *kv_capacity_blocks;
    uint32_t *dp_rank;
    uint32_t *overlap_blocks;
    uint32_t *active_requests;
    uint32_t *group_first_row;
    uint32_t *group_row_count;
    uint8_t *flags;
} columns;

/* Carve the column pointers out of buf->storage. */
static columns carve(const wsel_table_buf *buf)
{
    size_t n = buf->capacity_rows;
    char *p = buf->storage;
    columns c;
    c.worker_id = (uint64_t *)(void *)p;
    c.prefill_tokens = c.worker_id + n;
    c.decode_blocks = c.prefill_tokens + n;
    c.cost = (double *)(void *)(c.decode_blocks + n);
    c.kv_capacity_blocks = (uint64_t *)(void *)(c.cost + n);
    c.dp_rank = (uint32_t *)(void *)(c.kv_capacity_blocks + n);
    c.overlap_blocks = c.dp_rank + n;
    c.active_requests = c.overlap_blocks + n;
    c.group_first_row = c.active_requests + n;
    c.group_row_count = c.group_first_row + n;
    c.flags = (uint8_t *)(c.group_row_count + n);
    return c;
}

int32_t wsel_table_buf_init(wsel_table_buf *buf, uint32_t capacity_rows)
{
    if (buf == NULL || capacity_rows == 0)
        return WSEL_EINVAL;
    void *storage = calloc(capacity_rows, BYTES_PER_ROW);
    if (storage == NULL)
        return WSEL_ENOMEM;
    memset(buf, 0, sizeof(*buf));
    buf->capacity_rows = capacity_rows;
    buf->storage = storage;
    buf->table.struct_size = sizeof(wsel_table);
    return 0;
}

void wsel_table_buf_free(wsel_table_buf *buf)
{
    if (buf == NULL)
        return;
    free(buf->storage);
    memset(buf, 0, sizeof(*buf));
}

/* Canonical order and known flags, row by row; writes nothing. Run only
 * after copy_raw found a fault, to name the first offending rank. */
static int32_t check_ranks(const wsel_rank_state *ranks, uint32_t n, char *err,
                           size_t err_size)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ranks[i].flags & ~WSEL_ROW_FLAGS_KNOWN) {
            wsel__set_error(err, err_size, "ranks[%u].flags: unknown bits 0x%02x", i,
                            (unsigned)(ranks[i].flags & ~WSEL_ROW_FLAGS_KNOWN));
            return WSEL_ETABLE;
        }
        if (i == 0)
            continue;
        const wsel_rank_state *a = &ranks[i - 1], *b = &ranks[i];
        if (b->worker_id < a->worker_id ||
            (b->worker_id == a->worker_id && b->dp_rank <= a->dp_rank)) {
            wsel__set_error(
                err, err_size,
                "ranks[%u]: (worker %llu, dp_rank %u) does not follow (worker "
                "%llu, dp_rank %u); ranks must be sorted by worker then dp_rank "
                "without repeats",
                i, (unsigned long long)b->worker_id, b->dp_rank,
                (unsigned long long)a->worker_id, a->dp_rank);
            return WSEL_ETABLE;
        }
    }
    wsel__set_error(err, err_size, "table build: ranks refused"); /* not reached */
    return WSEL_ETABLE;
}

/* What every row's prefill and decode need from the request. */
typedef struct request_terms {
    uint32_t isl;         /* isl_tokens */
    uint32_t bs;          /* block_size */
    uint32_t blocks;      /* isl / bs */
    uint32_t blocks_ceil; /* ceil(isl / bs) */
} request_terms;

/*
 * Rank r into row i: the raw columns, then (selects, no branches)
 *   prefill = max(isl - overlap * bs, 0) + active_prefill_tokens
 *   decode  = active_blocks + max(isl / bs - overlap, 0)
 * (isl and isl / bs for a rank without a load record). overlap * bs < isl
 * exactly when overlap < ceil(isl / bs), and then both fit in 32 bits, so
 * the clamps need no 64-bit multiply. Returns prefill | decode.
 */
static uint64_t copy_row(const columns *c, const wsel_rank_state *r, uint32_t i,
                         const request_terms *q)
{
    uint32_t ov = r->overlap_blocks;
    c->worker_id[i] = r->worker_id;
    c->dp_rank[i] = r->dp_rank;
    c->overlap_blocks[i] = ov;
    c->kv_capacity_blocks[i] = r->kv_capacity_blocks;
    c->active_requests[i] = r->active_requests;
    c->flags[i] = r->flags;
    uint32_t uncached = ov < q->blocks_ceil ? q->isl - ov * q->bs : 0;
    uint32_t new_blocks = ov < q->blocks ? q->blocks - ov : 0;
    int no_load = (r->flags & WSEL_ROW_NO_LOAD) != 0;
    uint64_t p = no_load ? q->isl : uncached + r->active_prefill_tokens;
    uint64_t d = no_load ? q->blocks : r->active_blocks + new_blocks;
    c->prefill_tokens[i] = p;
    c->decode_blocks[i] = d;
    return p | d;
}

/*
 * Every column but the cost, and the group view, with the order and flag
 * checks folded in without branches. Returns 0 with *out_groups and *out_all
 * (the OR of every prefill and decode value) set, or -1 when a rank is out
 * of order, repeated or carries unknown flag bits (the columns are then
 * garbage and the caller refuses the build).
 */
static int copy_raw(const columns *c, const wsel_rank_state *ranks, uint32_t n,
                    const request_terms *q, uint32_t *out_groups, uint64_t *out_all)
{
    uint64_t all = copy_row(c, &ranks[0], 0, q);
    c->group_first_row[0] = 0;
    uint32_t groups = 1, disorder = 0;
    uint8_t all_flags = ranks[0].flags;
    for (uint32_t i = 1; i < n; i++) {
        const wsel_rank_state *a = &ranks[i - 1], *b = &ranks[i];
        all |= copy_row(c, b, i, q);
        all_flags |= b->flags;
        uint32_t same = b->worker_id == a->worker_id;
        disorder |= (b->worker_id < a->worker_id) | (same & (b->dp_rank <= a->dp_rank));
        /* Every row writes the next group's slot, which only a group's
         * first row keeps (groups advances); the next first row overwrites
         * the others. groups <= i here, so the slot is inside the column. */
        c->group_first_row[groups] = i;
        groups += same ^ 1u;
    }
    if (disorder || (all_flags & ~WSEL_ROW_FLAGS_KNOWN))
        return -1;
    for (uint32_t g = 0; g + 1 < groups; g++)
        c->group_row_count[g] = c->group_first_row[g + 1] - c->group_first_row[g];
    c->group_row_count[groups - 1] = n - c->group_first_row[groups - 1];
    *out_groups = groups;
    *out_all = all;
    return 0;
}

/* (double)x for x < 2^52, exactly: x in the mantissa of 2^52 (whose
 * exponent field is 0x433), minus 2^52. Two SSE2 instructions per pair,
 * where SSE2 has no uint64_t -> double conversion. */
static double small_to_double(uint64_t x)
{
    union {
        uint64_t u;
        double d;
    } v = {x | 0x4330000000000000ull};
    return v.d - 4503599627370496.0;
}

/*
 * cost = weight * (prefill / bs) + decode, in that order as Dynamo computes
 * it (prefill blocks first, then the weight: the last bit differs from
 * (weight * prefill) / bs for most weights and block sizes, and at T = 0
 * that makes or breaks exact ties). Saturated at DBL_MAX: the ABI
 * promises finite costs, and an absurd weight (say 1e300) would overflow
 * to infinity. `all` is the OR of every prefill and decode value, so no
 * value exceeds it. Below 2^52 (any real load) the loads convert exactly
 * through the bias and the loop vectorises; and since every step is
 * monotonic, the cost computed from (all, all) bounds every row's, so when
 * that bound is finite no row can saturate and the clamp is skipped.
 * Otherwise each value is converted and clamped by the C rule. The same
 * operations in the same order either way, so the same doubles.
 *
 * noinline: callgrind reports this pass on its own (bench/callgrind.sh),
 * the figure the cost-column budget is held to (docs/bench.md).
 */
__attribute__((noinline)) static void
compute_costs(const columns *c, uint32_t n, uint32_t bs, double weight, uint64_t all)
{
    const uint64_t *restrict prefill = c->prefill_tokens;
    const uint64_t *restrict decode = c->decode_blocks;
    double *restrict cost = c->cost;
    const double dbs = (double)bs;
    const double bound = weight * ((double)all / dbs) + (double)all;
    if (all < (1ull << 52) && bound < DBL_MAX) {
        for (uint32_t i = 0; i < n; i++)
            cost[i] =
                weight * (small_to_double(prefill[i]) / dbs) + small_to_double(decode[i]);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        double x = weight * ((double)prefill[i] / dbs) + (double)decode[i];
        cost[i] = x < DBL_MAX ? x : DBL_MAX;
    }
}

int32_t wsel_table_build(wsel_table_buf *buf, const wsel_request *request,
                         const wsel_rank_state *ranks, uint32_t num_ranks,
                         uint64_t topology_epoch, char *err, size_t err_size)
{
    if (buf == NULL || buf->storage == NULL || request == NULL ||
        (ranks == NULL && num_ranks > 0)) {
        wsel__set_error(err, err_size, "table build: NULL %s",
                        buf == NULL || buf->storage == NULL ? "buffer"
                        : request == NULL                   ? "request"
                                                            : "ranks");
        return WSEL_EINVAL;
    }
    if (num_ranks == 0) {
        wsel__set_error(err, err_size, "table build: no ranks");
        return WSEL_EINVAL;
    }
    if (request->block_size == 0 || !isfinite(request->overlap_score_weight) ||
        request->overlap_score_weight < 0.0) {
        wsel__set_error(err, err_size, "table build: request %s",
                        request->block_size == 0
                            ? "block_size is 0"
                            : "overlap_score_weight is negative or not finite");
        return WSEL_EINVAL;
    }
    if (num_ranks > buf->capacity_rows) {
        wsel__set_error(err, err_size, "table build: %u ranks, buffer holds %u",
                        num_ranks, buf->capacity_rows);
        return WSEL_ERANGE;
    }
    columns c = carve(buf);
    request_terms q = {request->isl_tokens, request->block_size,
                       request->isl_tokens / request->block_size, 0};
    q.blocks_ceil = q.blocks + (q.isl % q.bs != 0);
    uint32_t groups;
    uint64_t all;
    if (copy_raw(&c, ranks, num_ranks, &q, &groups, &all) != 0)
        return check_ranks(ranks, num_ranks, err, err_size);
    compute_costs(&c, num_ranks, request->block_size, request->overlap_score_weight, all);

    wsel_table *t = &buf->table;
    memset(t, 0, sizeof(*t));
    t->struct_size = sizeof(wsel_table);
    t->num_rows = num_ranks;
    t->num_groups = groups;
    t->topology_epoch = topology_epoch;
    t->worker_id = c.worker_id;
    t->dp_rank = c.dp_rank;
    t->overlap_blocks = c.overlap_blocks;
    t->prefill_tokens = c.prefill_tokens;
    t->decode_blocks = c.decode_blocks;
    t->cost = c.cost;
    t->kv_capacity_blocks = c.kv_capacity_blocks;
    t->active_requests = c.active_requests;
    t->flags = c.flags;
    t->group_first_row = c.group_first_row;
    t->group_row_count = c.group_row_count;
    return 0;
}
