// SPDX-License-Identifier: Apache-2.0
/*
 * bench.h -- the pieces of `wsel bench` (internal to the wsel command).
 *
 *   bench_alloc.c    counts heap allocations made by this process
 *   bench_time.c     a nanosecond clock, its overhead, percentiles
 *   bench_table.c    realistic candidate tables built from rank states
 *   bench_run.c      the measurement loops (direct, through the host)
 *   cmd_bench.c      arguments and output
 *
 * Threads: one measuring thread, except where marked [any thread].
 * OWNERSHIP: the caller owns every struct passed in; btable_init allocates
 * the columns and btable_free releases them.
 */
#ifndef WSEL_TOOLS_BENCH_H
#define WSEL_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

/* --- bench_alloc.c ---------------------------------------------------------
 * The wsel executable defines malloc, calloc, realloc, free and the aligned
 * allocators, forwarding to glibc's __libc_* functions, so every allocation
 * in the process (host library and plugins included) passes through here.
 * Counting is off except between bench_alloc_begin and bench_alloc_end.
 * Compiled out (bench_alloc_available() == 0) in sanitizer builds, whose
 * runtimes own malloc. */

/* 1 when allocations can be counted in this build. [any thread] */
int bench_alloc_available(void);
/* Zero the counter and start counting. [one measuring thread] */
void bench_alloc_begin(void);
/* Stop counting; returns allocations (malloc, calloc, realloc, aligned)
 * made by any thread since bench_alloc_begin. */
uint64_t bench_alloc_end(void);

/* --- bench_time.c ---------------------------------------------------------- */

/* Monotonic time in nanoseconds. [any thread] */
static inline uint64_t bench_now_ns(void);
/* Median cost of one bench_now_ns() pair, subtracted from every sample. */
double bench_timer_overhead_ns(void);
/* The q-quantile (0..1) of `n` samples; sorts `samples` in place. */
double bench_quantile(double *samples, size_t n, double q);
/* Median of n values; sorts in place. */
double bench_median(double *values, size_t n);

#include <time.h>
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- bench_table.c --------------------------------------------------------- */

/* A realistic table: `rows` ranks in workers of 8 and of 1 DP ranks
 * (alternating), varied overlaps and loads, about 1 row in 16 excluded and
 * 1 in 32 busy, built by wsel_table_build. */
typedef struct btable {
    wsel_table_buf buf;
    wsel_rank_state *ranks;
    uint32_t rows;
    wsel_request request; /* the request the costs were built for */
    wsel_rng rng;
    uint64_t hashes[32];
} btable;

/* Returns 0, WSEL_ENOMEM, or the wsel_table_build error (message in err). */
int32_t btable_init(btable *bt, uint32_t rows, uint64_t seed, char *err, size_t err_size);
void btable_free(btable *bt);
/* Request `id` for this table (affinity among 64 sessions, 32 hashes),
 * its rng seeded by `host` (or from `id` alone when host is NULL). */
void btable_request(const btable *bt, const wsel_host *host, uint64_t id,
                    wsel_request *req, wsel_rng *rng);

/* --- bench_run.c ----------------------------------------------------------- */

typedef struct bench_result {
    uint32_t rows;
    double direct_ns_p50;
    double direct_ns_p99;
    double host_ns_p50;
    double host_ns_p99;
    double allocs_per_select;
    uint64_t fallbacks; /* host answers that were not the plugin's */
    uint32_t batch;     /* selects per timed sample */
    /* The score function (ABI 1.1), called directly; has_score 0 = none,
     * and the score fields are 0. */
    int has_score;
    double score_ns_p50;
    double score_ns_p99;
    double allocs_per_score;
} bench_result;

typedef struct bench_config {
    uint32_t selects_per_run; /* timed selects per run (rounded up to batches) */
    uint32_t runs;            /* runs; the median of their quantiles is kept */
    uint32_t warmup;          /* untimed selects before each run */
    double temperature;       /* the requests' temperature */
    const char *config;       /* the plugin's JSON configuration; NULL = defaults */
} bench_config;

/* Measure one plugin at `rows` rows: select directly and through the host,
 * and its score function directly when it has one. Returns 0, or a
 * negative code with a message naming the plugin in err. */
int32_t bench_plugin(const char *path, uint32_t rows, const bench_config *cfg,
                     bench_result *out, char *err, size_t err_size);

/* Cost of wsel_table_build, nanoseconds per row, at `rows` rows. */
int32_t bench_table_build(uint32_t rows, const bench_config *cfg, double *out_ns_per_row,
                          char *err, size_t err_size);

/* Allocations made by `selects` selects on a `rows`-row table, direct and
 * through the host, into *out_direct / *out_host, and by as many direct
 * score calls into *out_score (0 without a score function). `config` is
 * the plugin's JSON configuration (NULL = defaults). */
int32_t bench_count_allocs(const char *path, const char *config, uint32_t rows,
                           uint32_t selects, uint64_t *out_direct, uint64_t *out_host,
                           uint64_t *out_score, char *err, size_t err_size);

/* Run `selects` selects of the plugin at `path` (with `config`, NULL =
 * defaults) on a `rows`-row table whose topology was reported first,
 * directly, through the host and as scores; *out_fallbacks gets the host's
 * fallbacks. Returns 0, or the first error (message in err). */
int32_t bench_scale_check(const char *path, const char *config, uint32_t rows,
                          uint32_t selects, uint64_t *out_fallbacks, char *err,
                          size_t err_size);

/* Run `selects` selects (or scores) at `temperature` for callgrind (the
 * plugin with `config`, NULL = defaults): prepared first,
 * then called in bench_callgrind_direct_loop (through the descriptor),
 * bench_callgrind_host_loop (through wsel_host_select) or
 * bench_callgrind_score_loop (the descriptor's score): `via` 0, 1 or 2. */
int32_t bench_callgrind(const char *path, const char *config, uint32_t rows,
                        uint32_t selects, int via, double temperature, char *err,
                        size_t err_size);

/* Run `builds` wsel_table_build calls on `rows` ranks inside
 * bench_callgrind_build_loop, for callgrind. */
int32_t bench_callgrind_build(uint32_t rows, uint32_t builds, char *err, size_t err_size);

#endif
