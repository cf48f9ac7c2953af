// SPDX-License-Identifier: Apache-2.0
/* table_builder.c -- the one candidate-table builder of the test suites. */
#include "table_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t ts_table_build(wsel_table_buf *buf, const wsel_request *request, uint32_t workers,
                       uint32_t dp, ts_fill_fn fill, void *ctx, char *err,
                       size_t err_size)
{
    uint32_t n = workers * dp;
    int32_t rc = WSEL_ENOMEM;
    wsel_rank_state *ranks = calloc(n ? n : 1, sizeof(*ranks));
    if (ranks == NULL) {
        snprintf(err, err_size, "table builder: out of memory for %u ranks", n);
        return rc;
    }
    for (uint32_t i = 0; i < n; i++) {
        ranks[i].worker_id = i / dp;
        ranks[i].dp_rank = i % dp;
    }
    if (fill != NULL)
        fill(ranks, n, dp, ctx);
    rc = wsel_table_buf_init(buf, n);
    if (rc != 0) {
        snprintf(err, err_size, "table builder: wsel_table_buf_init(%u rows): %s", n,
                 wsel_strerror(rc));
        goto out_free_ranks;
    }
    rc = wsel_table_build(buf, request, ranks, n, 1, err, err_size);
    if (rc != 0)
        wsel_table_buf_free(buf);
out_free_ranks:
    free(ranks);
    return rc;
}

int32_t ts_table_init(ts_table *t, uint32_t workers, uint32_t dp, uint32_t isl_tokens,
                      uint32_t block_size, uint32_t num_hashes, uint64_t seed,
                      ts_fill_fn fill, void *ctx, char *err, size_t err_size)
{
    memset(t, 0, sizeof(*t));
    if (num_hashes > TS_MAX_HASHES) {
        snprintf(err, err_size, "table builder: at most %u block hashes", TS_MAX_HASHES);
        return WSEL_ERANGE;
    }
    wsel_rng_seed(&t->rng, seed);
    for (uint32_t i = 0; i < num_hashes; i++)
        t->hashes[i] = wsel_rng_u64(&t->rng);
    t->request.struct_size = sizeof(t->request);
    t->request.request_id = 1;
    t->request.isl_tokens = isl_tokens;
    t->request.block_size = block_size;
    t->request.num_block_hashes = num_hashes;
    t->request.block_hashes = num_hashes ? t->hashes : NULL;
    t->request.overlap_score_weight = 1.0;
    t->request.rng = &t->rng;
    return ts_table_build(&t->buf, &t->request, workers, dp, fill, ctx, err, err_size);
}

void ts_table_free(ts_table *t)
{
    wsel_table_buf_free(&t->buf);
}
