// SPDX-License-Identifier: Apache-2.0
/*
 * harness.h -- drive one plugin in-process for its unit tests.
 *
 * A plugin test compiles the plugin's source into the test executable (so
 * wsel_plugin_entry is the plugin under test) and links libwsel-host for the
 * helpers the real host hands plugins. No dlopen, no loader: these suites
 * test the policy, not the host.
 */
#ifndef WSEL_TESTS_PLUGIN_HARNESS_H
#define WSEL_TESTS_PLUGIN_HARNESS_H

#include <stdint.h>

#include "wsel.h"

/* A candidate table with owned columns. Rows are canonical: worker w has
 * ranks 0..dp[w]-1. Columns start zeroed (cost 0, flags 0). */
typedef struct harness_table {
    wsel_table table;
    uint64_t *worker_id;
    uint32_t *dp_rank;
    uint32_t *overlap_blocks;
    uint64_t *prefill_tokens;
    uint64_t *decode_blocks;
    double *cost;
    uint64_t *kv_capacity_blocks;
    uint32_t *active_requests;
    uint8_t *flags;
    uint32_t *group_first_row;
    uint32_t *group_row_count;
} harness_table;

/* `num_workers` workers with dp_sizes[w] ranks each (dp_sizes NULL = 1 each);
 * worker ids are 0..num_workers-1. Aborts the test on allocation failure. */
harness_table *harness_table_new(uint32_t num_workers, const uint32_t *dp_sizes);
/* Every worker with `dp` ranks. */
harness_table *harness_table_uniform(uint32_t num_workers, uint32_t dp);
void harness_table_free(harness_table *t);
/* Recompute cost from the raw columns with Dynamo's formula. */
void harness_table_default_costs(harness_table *t, double overlap_weight,
                                 uint32_t block_size);

/* The helpers table a real host passes to create(). Logs go to stderr. */
const wsel_host_api *harness_host_api(void);

/* A request with id `request_id`, affinity `affinity_key`, the given
 * hashes, block size 16, isl = 16 * num_hashes, weight 1, temperature 0,
 * and rng / uniform seeded from (seed, request_id). `rng` is caller storage. */
void harness_request(wsel_request *req, wsel_rng *rng, uint64_t seed, uint64_t request_id,
                     uint64_t affinity_key, const uint64_t *hashes, uint32_t num_hashes);

/* Values for create(): each parameter's default, then `overrides` applied
 * ("name", value pairs, NULL-terminated names). Fails the test on an unknown
 * name. `values` must hold wsel_plugin_entry.num_params entries. */
void harness_params(double *values, const char *const *names, const double *overrides,
                    uint32_t num_overrides);

/* create() with defaults + overrides; fails the test if create fails. */
void *harness_create(const char *const *names, const double *overrides,
                     uint32_t num_overrides);

/* select() and return the row; fails the test if select fails or the row
 * is out of range or excluded. */
uint32_t harness_select(void *instance, const wsel_request *req, const harness_table *t);

/* The row chosen for request `request_id` (rng seed `seed`, a prompt of
 * 10 blocks hashed 1..10) over `n` single-rank workers with these cached
 * blocks and requests in flight; the other columns the harness's. */
uint32_t harness_route_overlap_active(void *instance, const uint32_t *overlap,
                                      const uint32_t *active, uint32_t n, uint64_t seed,
                                      uint64_t request_id);

/* select() must fail with `expected_rc` and leave the choice untouched (the
 * ABI: outputs are written only on success). */
void harness_expect_refusal(void *instance, const wsel_request *req,
                            const harness_table *t, int32_t expected_rc);

/* The all-excluded case every plugin must handle: a table of `num_rows`
 * one-rank workers, each excluded (every other one busy too), refused with
 * WSEL_ENOCANDIDATE by a default instance, the choice untouched. */
void harness_expect_all_excluded_refused(uint32_t num_rows);

/* A host that breaks its eligible-row rule (it answers "skip the busy
 * rows" over a table of `num_rows` busy rows, leaving none, at most 64):
 * select, and score if `score_too` (a score that reads the rule), refuse
 * with WSEL_ENOCANDIDATE rather than divide by zero or answer an unset
 * row. */
void harness_expect_wrong_host_refused(uint32_t num_rows, int score_too);

/* Through libwsel-host, as a router calls it: load the built plugin
 * `name` (HARNESS_PLUGIN_DIR/name.so) with JSON `config`, then select 200
 * requests that carry WSEL_OVERRIDE_TEMPERATURE with temperature 0 over
 * eight one-rank workers of distinct costs. Fails the test unless every
 * answer is the plugin's and the cheapest row. */
void harness_expect_override_zero_is_cheapest(const char *name, const char *config);

/* Fail unless `count` is within 5 standard deviations of the mean of a
 * Binomial(n, p). A Gaussian leaves 5 sd with probability 5.7e-7, so a
 * fixed seed that passes says nothing lucky about the plugin. */
void harness_assert_binomial(uint32_t count, uint32_t n, double p);

#endif
