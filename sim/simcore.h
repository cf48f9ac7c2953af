// SPDX-License-Identifier: Apache-2.0
/*
 * simcore.h -- the simulator's internal state, shared by its parts:
 * engine.c (ranks stepping in lockstep), router.c (block index, KV events,
 * rank states), replicas.c (router replicas: their predictive load views
 * and the lagged sync between them), metrics.c (accumulators) and run.c
 * (the event loop). Not a public header.
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
    uint32_t replica; /* the router replica that routed it */
    uint32_t phase;
    uint32_t computed;    /* prompt tokens done, cached ones included */
    uint32_t generated;   /* tokens produced; osl once finished */
    uint32_t chunk;       /* prefill tokens scheduled in the current step */
    uint64_t finish_step; /* decoding: the rank step that yields its last token */
    uint32_t private_blocks;
    uint32_t routed_prefill; /* predictive load added at routing */
    uint32_t routed_blocks;
    uint32_t match;         /* prefix blocks found cached at admission */
    int64_t first_token_ns; /* when its first token came (for the outcome) */
    struct sim_seq *next;   /* waiting queue */
    uint32_t *slots;        /* KV entry of each block, after blocks[] */
    uint64_t blocks[];
} sim_seq;

typedef struct sim_rank {
    uint32_t worker;
    uint32_t dp_rank;
    uint32_t unit; /* the engine it steps with (its worker when lockstep) */
    /* Prompt tokens still to compute of the requests queued or in prefill
     * on this rank (the engine's own figure, for the busy threshold). */
    uint64_t prefill_backlog;
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
} sim_rank;

/* One router replica's predictive view of one rank (Dynamo's): what it
 * added when routing, less what it removed at first tokens and finishes. */
typedef struct sim_load {
    uint64_t prefill; /* prompt tokens not yet past their first token */
    uint64_t blocks;  /* blocks of the unfinished requests */
    uint32_t requests;
} sim_load;

/* A load change one replica booked, on its way to the others. */
typedef struct sim_load_delta {
    int64_t time_ns; /* when the other replicas see it */
    int64_t prefill;
    int64_t blocks;
    int32_t requests;
    uint32_t replica; /* who booked it */
    uint32_t rank;
} sim_load_delta;

/* A FIFO ring of deltas, in time order (one delay for all). */
typedef struct sim_delta_ring {
    sim_load_delta *v;
    size_t head, count, capacity;
} sim_delta_ring;

/* A worker, or an engine unit: the ranks that step together (a worker
 * when lockstep, one rank when independent). */
typedef struct sim_worker {
    uint32_t first_rank;
    uint32_t num_ranks;
    int stepping;
    int pending; /* a step start is due once this instant's events are done */
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
    sim_worker *units; /* engines: == workers when lockstep */
    uint32_t num_units;
    uint32_t *pending; /* units whose step starts after this instant */
    uint32_t num_pending;
    sim_heap heap;
    int64_t now_ns;
    /* Router. */
    sim_u64map index;     /* block hash -> mask of ranks holding it */
    sim_kv_event *events; /* FIFO ring of delayed KV events */
    size_t ev_head, ev_count, ev_capacity;
    wsel_rank_state *rank_states;
    uint32_t evicting_rank; /* rank whose cache is evicting (callback ctx) */
    /* Replicas (replicas.c): views[q * num_ranks + r] is replica q's view
     * of rank r; one replica when the run models none. */
    uint32_t num_replicas;
    sim_load *views;
    sim_delta_ring lagged; /* deltas on their way to the other replicas */
    sim_delta_ring echoes; /* echoes to take back (sim_router_config.echo_ns) */
    uint32_t next_replica; /* SIM_SPREAD_ROUND_ROBIN */
    wsel_rng spread_rng;   /* SIM_SPREAD_RANDOM */
    sim_u64map acc_keys;   /* affinity key -> last worker + 1 */
    /* Prefix ownership for flicker_rate: block hash -> rank + 1 of the last
     * request that contained it; two generations of bounded size (the
     * older is dropped when the newer fills), so memory stays bounded. */
    sim_u64map owner[2];
    uint32_t owner_gen;       /* index of the newer generation */
    uint64_t index_holdings;  /* set bits over the block index (prefix_copies) */
    int64_t first_arrival_ns; /* replay clock: -1 until the first request */
    int64_t last_arrival_ns;  /* replay clock, after jitter */
    int64_t last_source_ns;   /* the previous request's time as given */
    int64_t jitter_off_ns;    /* offset of the current arrival instant */
    wsel_rng jitter_rng;
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

/* engine.c: units are the engines of SIM_DP_* (workers when lockstep). */
int32_t sim_engine_start_step(sim_state *s, uint32_t unit);
void sim_engine_end_step(sim_state *s, uint32_t unit);
void sim_engine_enqueue(sim_state *s, sim_seq *seq);
/* Start the unit's step once every event of this instant has run (so a
 * burst is admitted together); a no-op while it steps. */
void sim_engine_wake(sim_state *s, uint32_t unit);
/* Start the steps woken at this instant. */
int32_t sim_engine_start_pending(sim_state *s);

/* state.c: build the cluster for `args` into `s` (zeroed first); on
 * failure a message in err, and sim_state_teardown frees what was built. */
int32_t sim_state_setup(sim_state *s, const sim_run_args *args, char *err,
                        size_t err_size);
/* Free everything sim_state_setup built, and any request still inside. */
void sim_state_teardown(sim_state *s);

/* router.c */
int32_t sim_router_init(sim_state *s);
void sim_router_free(sim_state *s);
void sim_router_kv_event(sim_state *s, uint32_t rank, uint64_t hash, int stored);
void sim_router_apply_due(sim_state *s, int64_t now_ns);
int32_t sim_router_route(sim_state *s, const sim_request *req);
void sim_router_first_token(sim_state *s, sim_seq *seq);
void sim_router_finished(sim_state *s, sim_seq *seq);
/* A waiting request was withdrawn: undo what routing booked. */
void sim_router_cancelled(sim_state *s, sim_seq *seq);
/* The sum over replicas of the answers their hosts replaced. */
uint64_t sim_router_fallbacks(const sim_state *s);

/* replicas.c: 0 or WSEL_ENOMEM (free with sim_replicas_free). */
int32_t sim_replicas_init(sim_state *s);
void sim_replicas_free(sim_state *s);
/* The replica the next arrival reaches (SIM_SPREAD_*). */
uint32_t sim_replicas_pick(sim_state *s);
/* Replica q's view of every rank, num_ranks entries. */
static inline const sim_load *sim_replicas_view(const sim_state *s, uint32_t q)
{
    return s->views + (size_t)q * s->num_ranks;
}
/* Replica q changes its view of `rank` now; the others see the change
 * after the sync lag, or never (SIM_SYNC_NONE). */
void sim_replicas_book(sim_state *s, uint32_t q, uint32_t rank, int64_t prefill,
                       int64_t blocks, int32_t requests);
/* Apply the other replicas' deltas due by now_ns. */
void sim_replicas_apply_due(sim_state *s, int64_t now_ns);
/* Most blocks one ownership generation keeps (flicker_rate). */
#define SIM_OWNER_GENERATION (1u << 18)

#endif
