/*
 * simcore.h -- the simulator's internal state, shared by its parts:
 * engine.c (ranks stepping in lockstep), router.c (block index, KV events,
 * predictive loads, rank states), metrics.c (accumulators) and run.c (the
 * event loop). Not a public header.
 */
#ifndef WSEL_SIM_SIMCORE_H
#define WSEL_SIM_SIMCORE_H

#include "heap.h"
#include "kvcache.h"
#include "metrics.h"
#include "sim.h"
#include "u64map.h"

/* One in-flight request. Allocated when routed, freed when finished. */
typedef struct sim_seq {
    uint64_t id;
    int64_t arrival_ns;
    uint32_t isl;
    uint32_t osl;    /* at least 1: the first token always comes */
    uint32_t target; /* prompt tokens to have computed: max(isl, 1) */
    uint32_t num_blocks;
    uint32_t rank;
    uint32_t phase;
    uint32_t computed;    /* prompt tokens done, cached ones included */
    uint32_t generated;   /* tokens produced; osl once finished */
    uint32_t chunk;       /* prefill tokens scheduled in the current step */
    uint64_t finish_step; /* decoding: the rank step that yields its last token */
    uint32_t private_blocks;
    uint32_t routed_prefill; /* predictive load added at routing */
    uint32_t routed_blocks;
    uint32_t match;       /* prefix blocks found cached at admission */
    struct sim_seq *next; /* waiting queue */
    uint32_t *slots;      /* KV entry of each block, after blocks[] */
    uint64_t blocks[];
} sim_seq;

typedef struct sim_rank {
    uint32_t worker;
    uint32_t dp_rank;
    sim_kvcache kv;
    /* Running sequences: those in prefill in admission order, and those
     * decoding in a min-heap by (finish_step, id). Every decoding sequence
     * gets a token each step (the token budget is at least max_running),
     * so decoding costs nothing per sequence per step. */
    sim_seq **prefilling;
    uint32_t num_prefilling;
    sim_seq **decoding;
    uint32_t num_decoding;
    uint32_t step_decoding; /* sequences that decode in the current step */
    uint64_t steps;         /* steps this rank has completed */
    uint64_t kv_tokens;     /* KV tokens of the running sequences */
    sim_seq *wait_head;
    sim_seq *wait_tail;
    uint64_t load_tokens; /* isl + generated of every routed, unfinished seq */
    /* The waiting head that last failed admission for want of blocks. The
     * cache's content cannot change while it blocks the queue, so it is
     * retried only once the available blocks have grown by its shortfall
     * since then. */
    sim_seq *blocked;
    uint32_t blocked_available;
    uint32_t blocked_shortfall;
    /* The router's predictive view. */
    uint64_t pred_prefill;
    uint64_t pred_blocks;
    uint32_t active_requests;
} sim_rank;

typedef struct sim_worker {
    uint32_t first_rank;
    uint32_t num_ranks;
    int stepping;
} sim_worker;

typedef struct sim_kv_event {
    int64_t time_ns;
    uint64_t hash;
    uint32_t rank;
    uint32_t stored; /* 1 stored, 0 removed */
} sim_kv_event;

#define SIM_EV_ARRIVAL  0
#define SIM_EV_STEP_END 1
#define SIM_EV_SWITCH   2

typedef struct sim_state {
    const sim_run_args *args;
    const sim_cluster *cluster;
    uint32_t num_ranks;
    sim_rank *ranks;
    sim_worker *workers;
    sim_heap heap;
    int64_t now_ns;
    /* Router. */
    sim_u64map index;     /* block hash -> mask of ranks holding it */
    sim_kv_event *events; /* FIFO ring of delayed KV events */
    size_t ev_head, ev_count, ev_capacity;
    wsel_rank_state *rank_states;
    uint32_t evicting_rank; /* rank whose cache is evicting (callback ctx) */
    sim_u64map acc_keys;    /* affinity key -> last worker + 1 */
    /* Metrics: [0] the whole run, [1 + p] phase p when there are switches. */
    sim_acc acc[1 + SIM_MAX_PHASES];
    uint32_t num_acc;
    uint32_t phase;
    uint64_t in_flight;
    uint64_t routed;
    int failed;
    char *err;
    size_t err_size;
} sim_state;

/* engine.c */
int32_t sim_engine_start_step(sim_state *s, uint32_t worker);
void sim_engine_end_step(sim_state *s, uint32_t worker);
void sim_engine_enqueue(sim_state *s, sim_seq *seq);

/* router.c */
int32_t sim_router_init(sim_state *s);
void sim_router_free(sim_state *s);
void sim_router_kv_event(sim_state *s, uint32_t rank, uint64_t hash, int stored);
void sim_router_apply_due(sim_state *s, int64_t now_ns);
int32_t sim_router_route(sim_state *s, const sim_request *req);
void sim_router_first_token(sim_state *s, sim_seq *seq);
void sim_router_finished(sim_state *s, sim_seq *seq);

#endif
