// SPDX-License-Identifier: Apache-2.0
/*
 * table_builder.h -- the one candidate-table builder of the test suites.
 *
 * Every suite that routes through libwsel-host needs a small table: a
 * cluster of `workers` x `dp` ranks in canonical order, filled with the
 * load each suite wants, turned into columns by wsel_table_build (so the
 * default cost is the host's own). The suites differ only in how they
 * fill the ranks; that is the callback.
 */
#ifndef WSEL_TESTS_SUPPORT_TABLE_BUILDER_H
#define WSEL_TESTS_SUPPORT_TABLE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

/* Fill the load of `n` ranks whose worker_id (row / dp) and dp_rank
 * (row % dp) are already set and every other field zero. It may change
 * the ids as long as they stay in canonical order. */
typedef void (*ts_fill_fn)(wsel_rank_state *ranks, uint32_t n, uint32_t dp, void *ctx);

/*
 * Build `workers` x `dp` ranks filled by `fill` into `buf` (initialised
 * here; free it with wsel_table_buf_free) for `request`, with topology
 * epoch 1. Returns 0 or the negative code of the step that failed, with a
 * message in err.
 */
int32_t ts_table_build(wsel_table_buf *buf, const wsel_request *request, uint32_t workers,
                       uint32_t dp, ts_fill_fn fill, void *ctx, char *err,
                       size_t err_size);

/* A table with the request it was built for: what most suites pass to
 * wsel_host_select. The request is a 1.0-shaped one (struct_size set,
 * block_hashes pointing at `hashes` when num_hashes > 0, weight 1.0, rng
 * pointing at `rng` seeded with `seed`). */
#define TS_MAX_HASHES 16u
typedef struct ts_table {
    wsel_table_buf buf;
    wsel_request request;
    wsel_rng rng;
    uint64_t hashes[TS_MAX_HASHES];
} ts_table;

int32_t ts_table_init(ts_table *t, uint32_t workers, uint32_t dp, uint32_t isl_tokens,
                      uint32_t block_size, uint32_t num_hashes, uint64_t seed,
                      ts_fill_fn fill, void *ctx, char *err, size_t err_size);
void ts_table_free(ts_table *t);

#endif
