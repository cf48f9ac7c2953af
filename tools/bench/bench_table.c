// SPDX-License-Identifier: Apache-2.0
/*
 * bench_table.c -- realistic candidate tables for `wsel bench`, built from
 * raw per-rank state by wsel_table_build exactly as a router would.
 */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

int32_t btable_init(btable *bt, uint32_t rows, uint64_t seed, char *err, size_t err_size)
{
    memset(bt, 0, sizeof(*bt));
    bt->rows = rows;
    bt->ranks = calloc(rows ? rows : 1, sizeof(*bt->ranks));
    if (bt->ranks == NULL)
        return WSEL_ENOMEM;
    int32_t rc = wsel_table_buf_init(&bt->buf, rows);
    if (rc < 0)
        goto out_free_ranks;

    wsel_rng rng;
    wsel_rng_seed(&rng, seed);
    /* Workers alternate between 8 data-parallel ranks and 1. */
    uint32_t row = 0, group = 0;
    while (row < rows) {
        uint32_t dp = (group & 1) ? 1 : 8;
        for (uint32_t r = 0; r < dp && row < rows; r++, row++) {
            wsel_rank_state *s = &bt->ranks[row];
            s->worker_id = 1000 + group;
            s->dp_rank = r;
            s->overlap_blocks = wsel_rng_below(&rng, 33);
            s->active_prefill_tokens = wsel_rng_below(&rng, 8192);
            s->active_blocks = wsel_rng_below(&rng, 12000);
            s->kv_capacity_blocks = 16384;
            s->active_requests = wsel_rng_below(&rng, 200);
            if (row % 16 == 5)
                s->flags |= WSEL_ROW_EXCLUDED;
            if (row % 32 == 11)
                s->flags |= WSEL_ROW_BUSY;
            if (row % 64 == 63)
                s->flags |= WSEL_ROW_NO_LOAD;
        }
        group++;
    }

    for (uint32_t i = 0; i < 32; i++)
        bt->hashes[i] = 0x9e3779b97f4a7c15ull * (i + 1);
    bt->request.struct_size = sizeof(wsel_request);
    bt->request.isl_tokens = 32 * 16;
    bt->request.block_size = 16;
    bt->request.num_block_hashes = 32;
    bt->request.block_hashes = bt->hashes;
    bt->request.overlap_score_weight = 1.0;
    /* Dynamo's default; `wsel bench --temperature` changes it. */
    bt->request.temperature = 0.0;
    bt->request.uniform = 0.5;
    bt->request.rng = &bt->rng;
    wsel_rng_seed(&bt->rng, seed);

    rc = wsel_table_build(&bt->buf, &bt->request, bt->ranks, rows, 1, err, err_size);
    if (rc < 0)
        goto out_free_buf;
    return 0;

out_free_buf:
    wsel_table_buf_free(&bt->buf);
out_free_ranks:
    free(bt->ranks);
    bt->ranks = NULL;
    return rc;
}

void btable_free(btable *bt)
{
    wsel_table_buf_free(&bt->buf);
    free(bt->ranks);
    memset(bt, 0, sizeof(*bt));
}

void btable_request(const btable *bt, const wsel_host *host, uint64_t id,
                    wsel_request *req, wsel_rng *rng)
{
    *req = bt->request;
    req->request_id = id;
    req->affinity_key = 1 + id % 64;
    req->timestamp_us = id * 1000;
    req->rng = rng;
    if (host != NULL) {
        wsel_host_prepare_request(host, req, rng);
        req->rng = rng;
    } else {
        wsel_rng_seed(rng, id * 0x9e3779b97f4a7c15ull);
        req->uniform = wsel_rng_uniform(rng);
    }
}
