/*
 * table.c -- build a candidate table from rank states into storage that is
 * allocated once and reused for every request.
 *
 * The columns live in one allocation, widest first so each stays aligned.
 * The build makes three passes: check order and flags (nothing written),
 * copy the raw columns, then compute prefill, decode and cost in loops with
 * no branches in their bodies so the compiler can vectorise them.
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

/* Known row flag bits. */
#define ROW_FLAGS_KNOWN (WSEL_ROW_BUSY | WSEL_ROW_EXCLUDED | WSEL_ROW_NO_LOAD)

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

/* Canonical order and known flags; writes nothing. */
static int32_t check_ranks(const wsel_rank_state *ranks, uint32_t n, char *err,
                           size_t err_size)
{
    for (uint32_t i = 0; i < n; i++) {
        if (ranks[i].flags & ~ROW_FLAGS_KNOWN) {
            wsel_set_error(err, err_size, "ranks[%u].flags: unknown bits 0x%02x", i,
                           (unsigned)(ranks[i].flags & ~ROW_FLAGS_KNOWN));
            return WSEL_ETABLE;
        }
        if (i == 0)
            continue;
        const wsel_rank_state *a = &ranks[i - 1], *b = &ranks[i];
        if (b->worker_id < a->worker_id ||
            (b->worker_id == a->worker_id && b->dp_rank <= a->dp_rank)) {
            wsel_set_error(
                err, err_size,
                "ranks[%u]: (worker %llu, dp_rank %u) does not follow (worker "
                "%llu, dp_rank %u); ranks must be sorted by worker then dp_rank "
                "without repeats",
                i, (unsigned long long)b->worker_id, b->dp_rank,
                (unsigned long long)a->worker_id, a->dp_rank);
            return WSEL_ETABLE;
        }
    }
    return 0;
}

/* Raw columns and the group view; returns the number of groups. */
static uint32_t copy_raw(const columns *c, const wsel_rank_state *ranks, uint32_t n)
{
    uint32_t groups = 0;
    for (uint32_t i = 0; i < n; i++) {
        const wsel_rank_state *r = &ranks[i];
        c->worker_id[i] = r->worker_id;
        c->dp_rank[i] = r->dp_rank;
        c->overlap_blocks[i] = r->overlap_blocks;
        c->kv_capacity_blocks[i] = r->kv_capacity_blocks;
        c->active_requests[i] = r->active_requests;
        c->flags[i] = r->flags;
        /* Reuse the derived columns as scratch for the loads. */
        c->prefill_tokens[i] = r->active_prefill_tokens;
        c->decode_blocks[i] = r->active_blocks;
        if (i == 0 || r->worker_id != ranks[i - 1].worker_id) {
            c->group_first_row[groups] = i;
            c->group_row_count[groups] = 0;
            groups++;
        }
        c->group_row_count[groups - 1]++;
    }
    return groups;
}

/* prefill, decode and cost from the raw columns. The bodies have no
 * branches (selects and masks only) and the columns are restrict-qualified
 * (they never overlap), so compilers vectorise them where the ISA has
 * 64-bit integer vector ops: with -march=x86-64-v4 both loops vectorise
 * (gcc -O3, clang -O2); on baseline x86-64 clang -O2 still vectorises the
 * cost loop, gcc -O2 neither (its very-cheap cost model). */
static void compute_costs(const columns *c, uint32_t n, uint64_t isl, uint64_t bs,
                          double weight)
{
    const uint32_t *restrict overlap = c->overlap_blocks;
    const uint8_t *restrict flags = c->flags;
    uint64_t *restrict prefill = c->prefill_tokens;
    uint64_t *restrict decode = c->decode_blocks;
    double *restrict cost = c->cost;
    const uint64_t isl_blocks = isl / bs;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t ov = overlap[i];
        uint64_t cached = ov * bs;
        uint64_t uncached = isl > cached ? isl - cached : 0;
        uint64_t new_blocks = isl_blocks > ov ? isl_blocks - ov : 0;
        uint64_t no_load = (uint64_t)((flags[i] & WSEL_ROW_NO_LOAD) != 0);
        uint64_t keep = no_load - 1; /* all ones when the rank has a load record */
        prefill[i] = ((uncached + prefill[i]) & keep) | (isl & ~keep);
        decode[i] = ((new_blocks + decode[i]) & keep) | (isl_blocks & ~keep);
    }
    /* The ABI promises finite costs: an absurd weight (say 1e300) would
     * overflow to infinity, so costs saturate at DBL_MAX (a compare-select
     * the vectoriser maps to a min instruction). */
    const double dbs = (double)bs;
    for (uint32_t i = 0; i < n; i++) {
        double x = weight * (double)prefill[i] / dbs + (double)decode[i];
        cost[i] = x < DBL_MAX ? x : DBL_MAX;
    }
}

int32_t wsel_table_build(wsel_table_buf *buf, const wsel_request *request,
                         const wsel_rank_state *ranks, uint32_t num_ranks,
                         uint64_t topology_epoch, char *err, size_t err_size)
{
    if (buf == NULL || buf->storage == NULL || request == NULL ||
        (ranks == NULL && num_ranks > 0)) {
        wsel_set_error(err, err_size, "table build: NULL %s",
                       buf == NULL || buf->storage == NULL ? "buffer"
                       : request == NULL                   ? "request"
                                                           : "ranks");
        return WSEL_EINVAL;
    }
    if (num_ranks == 0) {
        wsel_set_error(err, err_size, "table build: no ranks");
        return WSEL_EINVAL;
    }
    if (request->block_size == 0 || !isfinite(request->overlap_score_weight) ||
        request->overlap_score_weight < 0.0) {
        wsel_set_error(err, err_size, "table build: request %s",
                       request->block_size == 0
                           ? "block_size is 0"
                           : "overlap_score_weight is negative or not finite");
        return WSEL_EINVAL;
    }
    if (num_ranks > buf->capacity_rows) {
        wsel_set_error(err, err_size, "table build: %u ranks, buffer holds %u", num_ranks,
                       buf->capacity_rows);
        return WSEL_ERANGE;
    }
    int32_t rc = check_ranks(ranks, num_ranks, err, err_size);
    if (rc < 0)
        return rc;

    columns c = carve(buf);
    uint32_t groups = copy_raw(&c, ranks, num_ranks);
    compute_costs(&c, num_ranks, request->isl_tokens, request->block_size,
                  request->overlap_score_weight);

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
