// SPDX-License-Identifier: Apache-2.0
/*
 * engine_api.h -- the engine model of `wsel sim`, driven from outside
 * sim_run's event loop.
 *
 * wsel-engine (engine/) serves real HTTP requests with the same model
 * `wsel sim` simulates: it hands each request to one rank at a time it
 * chooses and ends each step when the wall clock reaches it. This API is
 * that entry point. It adds no model of its own: admission goes through
 * the router model's route (with the rank fixed by the caller), steps
 * through engine.c, caches through kvcache.c, exactly as in sim_run.
 *
 * Time is model time in ns; every call's time must not go back. The
 * caller ends steps in time order (sim_engine_next_step_end says which is
 * due) before it submits anything later than them.
 *
 * Not thread-safe: one owner at a time (wsel-engine holds a mutex).
 * OWNERSHIP: the engine owns its state; sim_engine_destroy frees it.
 */
#ifndef WSEL_SIM_ENGINE_API_H
#define WSEL_SIM_ENGINE_API_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

typedef struct sim_engine sim_engine;

/* What the model did, reported after each call that changes it. */
typedef struct sim_engine_observer {
    void *ctx;
    /* A running request's state: prompt tokens found cached at its
     * admission (the sim's rule: whole blocks, at most isl - 1), tokens
     * generated so far, and whether it has finished (then generated ==
     * osl and the id is forgotten). Called for every running request of
     * the stepped worker after each step, so the caller compares. */
    void (*on_request)(void *ctx, uint64_t id, uint32_t cached_tokens, uint32_t generated,
                       int finished);
    /* A block entered (stored = 1) or left (0) the cache of rank `rank`. */
    void (*on_kv)(void *ctx, uint32_t rank, uint64_t hash, int stored);
} sim_engine_observer;

/* A model of the cluster `c` (its ranks numbered as in sim_run: worker by
 * worker). The observer is copied. Returns 0, or a negative WSEL_E* with
 * a message in err. */
int32_t sim_engine_create(sim_engine **out, const sim_cluster *c,
                          const sim_engine_observer *ob, char *err, size_t err_size);
/* Replace the observer (NULL: none); copied. */
void sim_engine_set_observer(sim_engine *e, const sim_engine_observer *ob);
/* NULL is a harmless no-op. Requests still running are dropped. */
void sim_engine_destroy(sim_engine *e);

/* Prompt plus output blocks a request needs on one rank; a request needing
 * more than the cluster's kv_blocks can never run (submit refuses it). */
uint64_t sim_engine_blocks_needed(const sim_cluster *c, uint32_t isl, uint32_t osl);

/*
 * Submit request `id` (unique among running ones) to rank `rank` at
 * `now_ns`: `blocks` are the prefix hashes of its full prompt blocks.
 * Starts its worker's step if the worker is idle. Returns 0, WSEL_ERANGE
 * (too large for a rank, or no such rank) or WSEL_ENOMEM, with a message.
 */
int32_t sim_engine_submit(sim_engine *e, int64_t now_ns, uint64_t id, uint32_t rank,
                          uint32_t isl, uint32_t osl, const uint64_t *blocks,
                          uint32_t num_blocks, char *err, size_t err_size);

/* 1 with the model time of the earliest step end, or 0 when every worker
 * is idle. */
int sim_engine_next_step_end(const sim_engine *e, int64_t *time_ns);

/* End the earliest step and start that worker's next one; reports through
 * the observer. Returns 0, 1 if no step was in flight, or WSEL_ENOMEM. */
int32_t sim_engine_step(sim_engine *e);

/* Stop request `id` at its next token: a waiting request leaves the queue
 * at once (reported finished with 0 tokens), a running one finishes at
 * the end of its worker's next step with what it has generated then.
 * Returns 0 or WSEL_ENOENT when no such request is running. */
int32_t sim_engine_cancel(sim_engine *e, uint64_t id);

/* Rank `rank`'s KV cache: blocks in use (cached or reserved) and capacity. */
void sim_engine_kv_usage(const sim_engine *e, uint32_t rank, uint32_t *used,
                         uint32_t *capacity);
/* Call fn for every block hash cached on rank `rank`, in no order. */
void sim_engine_kv_blocks(const sim_engine *e, uint32_t rank,
                          void (*fn)(void *ctx, uint64_t hash), void *ctx);

#endif
