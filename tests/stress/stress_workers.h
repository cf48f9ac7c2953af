// SPDX-License-Identifier: Apache-2.0
/*
 * stress_workers.h -- threads that call wsel_host_select in a loop on one
 * host and check every answer.
 *
 * Each worker answers requests until the pool is stopped, and records the
 * first bad answer (an error code, a row out of range, an excluded row)
 * instead of asserting: cmocka's asserts must run on the test's own thread.
 * Counters are single-writer atomics, readable by the main thread while the
 * workers run.
 */
#ifndef WSEL_TESTS_STRESS_WORKERS_H
#define WSEL_TESTS_STRESS_WORKERS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "wsel_host.h"

#define STRESS_MAX_WORKERS 16
#define STRESS_MAX_ROWS    16

typedef struct stress_worker {
    pthread_t thread;
    struct stress_pool *pool;
    uint32_t index;
    /* Answered selects. */
    atomic_uint_fast64_t done;
    /* Answers by WSEL_ANSWER_FALLBACK. */
    atomic_uint_fast64_t fallbacks;
    /* Answers per row. */
    atomic_uint_fast64_t row_hits[STRESS_MAX_ROWS];
    /* When pool->measure_latency: the longest select, in nanoseconds, among
     * those the scheduler did not preempt (no involuntary context switch of
     * the thread during the call; blocking on a lock or sleep is a
     * voluntary one, so it counts here); and, apart, the preempted selects
     * and the longest of them. */
    atomic_uint_fast64_t max_latency_ns;
    atomic_uint_fast64_t preempted;
    atomic_uint_fast64_t max_preempted_latency_ns;
    /* First bad answer: failed != 0, with the return code and row. */
    atomic_int failed;
    int32_t bad_rc;
    uint32_t bad_row;
} stress_worker;

typedef struct stress_pool {
    wsel_host *host;
    const wsel_table *table;
    uint32_t num_workers;
    int measure_latency;
    /* Set once the workers are joined; counters stay readable. */
    int joined;
    atomic_int stop;
    stress_worker workers[STRESS_MAX_WORKERS];
} stress_pool;

/*
 * Start `num_workers` (<= STRESS_MAX_WORKERS) threads selecting on `host`
 * with `table` (<= STRESS_MAX_ROWS rows). [control thread]
 * OWNERSHIP: pool, host and table are the caller's and must stay valid
 * until stress_pool_stop returns. Returns 0 or WSEL_EINVAL / WSEL_ENOMEM
 * (then no thread is left running).
 */
int32_t stress_pool_start(stress_pool *pool, wsel_host *host, const wsel_table *table,
                          uint32_t num_workers, int measure_latency);

/* Ask the workers to stop and join them; a second call is a no-op. The
 * counters stay readable afterwards. [control thread] */
void stress_pool_stop(stress_pool *pool);

/* Sum of answered selects so far. [any thread] */
uint64_t stress_pool_done(const stress_pool *pool);

/* Sum of answers naming `row` so far. [any thread] */
uint64_t stress_pool_row_hits(const stress_pool *pool, uint32_t row);

/* Sum of fallback answers so far. [any thread] */
uint64_t stress_pool_fallbacks(const stress_pool *pool);

/* Longest select seen by any worker, in nanoseconds: among those not
 * preempted by the scheduler, or (preempted != 0) among those that were.
 * [any thread] */
uint64_t stress_pool_max_latency_ns(const stress_pool *pool, int preempted);

/* Selects during which the scheduler preempted the worker. [any thread] */
uint64_t stress_pool_preempted(const stress_pool *pool);

/* The first worker that recorded a bad answer, or NULL. [any thread] */
const stress_worker *stress_pool_failure(const stress_pool *pool);

#endif
