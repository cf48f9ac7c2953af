// SPDX-License-Identifier: Apache-2.0
/*
 * stress_workers.c -- select threads for the switching stress tests.
 */
#include "stress_workers.h"

#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "stress_util.h"

/* Single writer: a relaxed load and store is enough and costs no lock. */
static void bump(atomic_uint_fast64_t *counter)
{
    uint_fast64_t v = atomic_load_explicit(counter, memory_order_relaxed);

    atomic_store_explicit(counter, v + 1, memory_order_relaxed);
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Involuntary context switches of the calling thread so far: how often the
 * scheduler took its core away (a thread that blocks switches voluntarily). */
static long preemptions(void)
{
    struct rusage ru;

    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

static void raise_to(atomic_uint_fast64_t *max, uint64_t v)
{
    if (v > atomic_load_explicit(max, memory_order_relaxed))
        atomic_store_explicit(max, v, memory_order_relaxed);
}

static void record_failure(stress_worker *w, int32_t rc, uint32_t row)
{
    w->bad_rc = rc;
    w->bad_row = row;
    atomic_store(&w->failed, 1);
}

static void *worker_main(void *arg)
{
    stress_worker *w = arg;
    stress_pool *pool = w->pool;
    const wsel_table *table = pool->table;
    uint64_t n = 0;

    while (!atomic_load_explicit(&pool->stop, memory_order_relaxed)) {
        wsel_request req;
        wsel_rng rng;
        wsel_choice choice;
        uint64_t start = 0;
        long preempted = 0;
        int32_t rc;

        memset(&req, 0, sizeof req);
        req.request_id = ((uint64_t)w->index << 48) | n;
        req.isl_tokens = STRESS_ISL;
        req.block_size = STRESS_BLOCK_SIZE;
        req.overlap_score_weight = 1.0;
        wsel_host_prepare_request(pool->host, &req, &rng);
        memset(&choice, 0, sizeof choice);
        choice.struct_size = sizeof choice;

        if (pool->measure_latency) {
            preempted = preemptions();
            start = now_ns();
        }
        rc = wsel_host_select(pool->host, &req, table, &choice);
        if (pool->measure_latency) {
            uint64_t took = now_ns() - start;
            if (preemptions() != preempted) {
                bump(&w->preempted);
                raise_to(&w->max_preempted_latency_ns, took);
            } else {
                raise_to(&w->max_latency_ns, took);
            }
        }

        if (rc != WSEL_ANSWER_PLUGIN && rc != WSEL_ANSWER_FALLBACK) {
            record_failure(w, rc, choice.row);
            break;
        }
        if (choice.row >= table->num_rows ||
            (table->flags[choice.row] & WSEL_ROW_EXCLUDED)) {
            record_failure(w, rc, choice.row);
            break;
        }
        if (rc == WSEL_ANSWER_FALLBACK)
            bump(&w->fallbacks);
        bump(&w->row_hits[choice.row]);
        n++;
        atomic_store_explicit(&w->done, n, memory_order_relaxed);
    }
    return NULL;
}

int32_t stress_pool_start(stress_pool *pool, wsel_host *host, const wsel_table *table,
                          uint32_t num_workers, int measure_latency)
{
    uint32_t started;

    if (!pool || !host || !table || num_workers == 0 ||
        num_workers > STRESS_MAX_WORKERS || table->num_rows > STRESS_MAX_ROWS)
        return WSEL_EINVAL;
    memset(pool, 0, sizeof *pool);
    pool->host = host;
    pool->table = table;
    pool->measure_latency = measure_latency;
    atomic_init(&pool->stop, 0);
    for (started = 0; started < num_workers; started++) {
        stress_worker *w = &pool->workers[started];
        w->pool = pool;
        w->index = started;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            goto out_stop_started;
        pool->num_workers = started + 1;
    }
    return 0;

out_stop_started:
    stress_pool_stop(pool);
    return WSEL_ENOMEM;
}

void stress_pool_stop(stress_pool *pool)
{
    if (pool->joined)
        return;
    atomic_store(&pool->stop, 1);
    for (uint32_t i = 0; i < pool->num_workers; i++)
        pthread_join(pool->workers[i].thread, NULL);
    pool->joined = 1;
}

uint64_t stress_pool_done(const stress_pool *pool)
{
    uint64_t sum = 0;

    for (uint32_t i = 0; i < pool->num_workers; i++)
        sum += atomic_load_explicit(&pool->workers[i].done, memory_order_relaxed);
    return sum;
}

uint64_t stress_pool_row_hits(const stress_pool *pool, uint32_t row)
{
    uint64_t sum = 0;

    for (uint32_t i = 0; i < pool->num_workers && row < STRESS_MAX_ROWS; i++)
        sum +=
            atomic_load_explicit(&pool->workers[i].row_hits[row], memory_order_relaxed);
    return sum;
}

uint64_t stress_pool_fallbacks(const stress_pool *pool)
{
    uint64_t sum = 0;

    for (uint32_t i = 0; i < pool->num_workers; i++)
        sum += atomic_load_explicit(&pool->workers[i].fallbacks, memory_order_relaxed);
    return sum;
}

uint64_t stress_pool_max_latency_ns(const stress_pool *pool, int preempted)
{
    uint64_t max = 0;

    for (uint32_t i = 0; i < pool->num_workers; i++) {
        const stress_worker *w = &pool->workers[i];
        uint64_t v = atomic_load_explicit(preempted ? &w->max_preempted_latency_ns
                                                    : &w->max_latency_ns,
                                          memory_order_relaxed);
        max = v > max ? v : max;
    }
    return max;
}

uint64_t stress_pool_preempted(const stress_pool *pool)
{
    uint64_t sum = 0;

    for (uint32_t i = 0; i < pool->num_workers; i++)
        sum += atomic_load_explicit(&pool->workers[i].preempted, memory_order_relaxed);
    return sum;
}

const stress_worker *stress_pool_failure(const stress_pool *pool)
{
    for (uint32_t i = 0; i < pool->num_workers; i++)
        if (atomic_load(&pool->workers[i].failed))
            return &pool->workers[i];
    return NULL;
}
