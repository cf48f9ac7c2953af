// SPDX-License-Identifier: Apache-2.0
/*
 * sim.h -- the cluster simulator behind `wsel sim`: its configuration, the
 * policy it routes through, and the figures it reports.
 *
 * A discrete-event model of a router in front of W workers, each a
 * data-parallel engine of D ranks stepping in lockstep. Requests come from
 * a sim_source (a trace or a built-in workload, see source.h); the router
 * keeps a block index fed by KV events and Dynamo-style predictive loads and
 * asks a sim_policy for a rank. With sim_router_config.replicas > 1 the
 * router is R replicas, each with its own policy and load view.
 * docs/sim.md describes the model in full.
 *
 * Threading: everything here is single-threaded; one sim_run at a time per
 * sim_policy. Ownership is stated per function.
 */
#ifndef WSEL_SIM_SIM_H
#define WSEL_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

/* Most ranks over the whole cluster (the router index keeps a 64-bit mask
 * of ranks per block). */
#define SIM_MAX_RANKS 64
/* Most --switch-at phases. */
#define SIM_MAX_PHASES 9
/* Most router replicas. */
#define SIM_MAX_REPLICAS 16

#define SIM_COST_POLYNOMIAL 0
#define SIM_COST_LINEAR     1

/* How the ranks of one worker step (docs/sim.md, "Engines"). */
#define SIM_DP_LOCKSTEP    0 /* one step for all ranks, as long as the slowest */
#define SIM_DP_INDEPENDENT 1 /* every rank steps on its own */

/* How arrivals are spread over router replicas (docs/sim.md, "Replicas"). */
#define SIM_SPREAD_ROUND_ROBIN 0 /* replica k takes arrivals k, k + R, ... */
#define SIM_SPREAD_RANDOM      1 /* a uniform replica per arrival, seeded */

/* How replicas share their load views. */
#define SIM_SYNC_LAG  0 /* the others' deltas arrive sync_lag_ns late */
#define SIM_SYNC_NONE 1 /* never: each replica sees its own requests only */

/* Their names (options, reports), indexed by SIM_COST_* / SIM_DP_* /
 * SIM_SPREAD_* / SIM_SYNC_*; NULL-terminated. */
extern const char *const sim_cost_model_names[];
extern const char *const sim_dp_mode_names[];
extern const char *const sim_spread_names[];
extern const char *const sim_sync_names[];

typedef struct sim_cluster {
    uint32_t num_workers;
    uint32_t dp[SIM_MAX_RANKS]; /* ranks of each worker */
    uint32_t kv_blocks;         /* per rank */
    uint32_t block_size;        /* router and engine block, tokens */
    uint32_t max_running;       /* sequences per rank */
    uint32_t token_budget;      /* batched tokens per rank step */
    uint32_t cost_model;        /* SIM_COST_* */
    double step_fixed_ms;       /* linear: fixed cost per step */
    double prefill_token_ms;    /* linear: per prefill token */
    double decode_seq_ms;       /* linear: per decoding sequence */
    uint32_t dp_mode;           /* SIM_DP_* */
} sim_cluster;

/* Defaults: one worker of dp 8 with Dynamo mocker's engine (16,384
 * blocks, 256 sequences, 8,192 tokens per step), block 64, the polynomial
 * cost model. (`wsel sim` picks its own default cluster: options.c.) */
void sim_cluster_default(sim_cluster *c);
/* Total ranks. */
uint32_t sim_cluster_ranks(const sim_cluster *c);
/* Duration of one rank's step in ms for `prefill_tokens` new tokens,
 * `decoding` sequences and KV utilisation `u` in [0, 1]; 0 when idle. */
double sim_step_ms(const sim_cluster *c, uint64_t prefill_tokens, uint32_t decoding,
                   double u);

typedef struct sim_router_config {
    double overlap_weight;      /* wsel_request.overlap_score_weight */
    double temperature;         /* wsel_request.temperature */
    uint64_t kv_event_delay_ns; /* KV events reach the index this late */
    uint32_t affinity_blocks;   /* K of the affinity key */
    /* Dynamo's busy thresholds (0 = off, Dynamo's default): a rank is busy
     * when its active KV blocks / capacity exceed busy_decode_blocks, or
     * its prefill tokens waiting or in progress exceed busy_prefill_tokens;
     * a worker's rows get WSEL_ROW_BUSY when all its ranks are busy. */
    double busy_decode_blocks;
    uint64_t busy_prefill_tokens;
    /* The replay clock: arrival = (time - first arrival + jitter) / speedup
     * (speedup 0 or 1 = as given). With jitter_ns > 0 every distinct
     * arrival instant of the input moves later by a uniform [0, jitter_ns)
     * drawn from jitter_seed (requests sharing an instant stay together; an
     * instant never passes the next one's). */
    double speedup;
    uint64_t jitter_ns;
    uint64_t jitter_seed;
    /* Router replicas (docs/sim.md, "Replicas"): arrivals are spread over
     * `replicas` routers (0 or 1: one), each with its own policy and its
     * own view of the predictive loads, which sees the other replicas'
     * load deltas sync_lag_ns late (SIM_SYNC_LAG) or never
     * (SIM_SYNC_NONE). The block index (KV events) is shared by all. */
    uint32_t replicas;
    uint32_t spread; /* SIM_SPREAD_* */
    uint32_t sync;   /* SIM_SYNC_* */
    uint64_t sync_lag_ns;
    /* With SIM_SYNC_LAG: for echo_ns after each route, the routing
     * replica's view counts the route once more per other replica, as
     * libwsel-router's sync echo does (0: off). */
    uint64_t echo_ns;
    uint64_t spread_seed; /* SIM_SPREAD_RANDOM's stream */
} sim_router_config;

/* One request as a source hands it over. OWNERSHIP: the source owns
 * `blocks`, valid until its next call. */
typedef struct sim_request {
    uint64_t id;
    int64_t arrival_ns;
    uint32_t isl;
    uint32_t osl;
    uint32_t num_blocks;    /* full router blocks: isl / block_size */
    const uint64_t *blocks; /* prefix hash of each full block */
} sim_request;

/* Pull interface of a request stream. next() returns 1 with *out filled,
 * 0 at the end, or a negative WSEL_E* with a message in err. */
typedef struct sim_source_ops {
    int32_t (*next)(void *ctx, sim_request *out, char *err, size_t err_size);
} sim_source_ops;

/*
 * The policy the simulator routes through. select() gets the request (its
 * struct_size, rng and uniform still to be prepared) and the rank states
 * in canonical order; it writes the chosen index to *row, the time spent
 * choosing to *select_ns and returns WSEL_ANSWER_PLUGIN/FALLBACK or a
 * negative code. finished() reports a completed request. switch_to() loads
 * another policy (NULL when unsupported). OWNERSHIP: every pointer is the
 * caller's and valid during the call.
 */
typedef struct sim_policy {
    void *ctx;
    int32_t (*select)(void *ctx, wsel_request *request, const wsel_rank_state *ranks,
                      uint32_t num_ranks, uint32_t *row, uint64_t *select_ns);
    void (*finished)(void *ctx, uint64_t request_id, uint64_t worker_id,
                     uint32_t dp_rank);
    /* Optional: called instead of `finished` with what the request cost
     * (TTFT, e2e, tokens; ABI 1.1's wsel_outcome) when set. */
    void (*outcome)(void *ctx, const wsel_outcome *outcome);
    int32_t (*switch_to)(void *ctx, const char *path, const char *config, char *err,
                         size_t err_size);
    /* Answers the host replaced so far (wsel_host_counters.fallbacks). */
    uint64_t (*fallbacks)(void *ctx);
} sim_policy;

typedef struct sim_switch {
    int64_t at_ns;
    const char *label; /* name shown in the report */
    const char *path;
    const char *config;
} sim_switch;

typedef struct sim_percentiles {
    double mean, p50, p90, p99;
} sim_percentiles;

/* What one run (or one phase of it) measured. */
typedef struct sim_metrics {
    uint64_t requests;
    uint64_t finished;
    uint64_t input_tokens;
    uint64_t cached_tokens;
    uint64_t output_tokens;
    double kv_hit_rate;
    sim_percentiles ttft_ms;
    sim_percentiles e2e_ms;
    double throughput_tok_s;
    double flicker_rate;  /* block-weighted prefix ownership moves (docs/sim.md) */
    double key_move_rate; /* affinity key moved worker (the former flicker) */
    double prefix_copies; /* mean ranks holding each cached block, time average */
    double share_volatility;
    double rank_load_imbalance;
    double group_load_imbalance;
    uint64_t fallbacks;
    uint64_t select_ns_p50;
    uint64_t select_ns_p99;
    uint64_t lost_requests;
    /* Mean over bursts (>= 2 requests in one SIM_HERD_WINDOW_NS window) of
     * the most requests one rank got / ceil(burst / ranks): 1 = spread as
     * evenly as possible (docs/sim.md, "Replicas"). */
    double herding_index;
} sim_metrics;

typedef struct sim_result {
    sim_metrics total;
    uint32_t num_phases; /* 1 + switches that fired */
    sim_metrics phase[SIM_MAX_PHASES];
    const char *phase_label[SIM_MAX_PHASES];
    double sim_seconds; /* simulated time */
} sim_result;

/* Optional observer for charts: called for each routed request and at each
 * worker step end. NULL members are skipped. */
typedef struct sim_observer {
    void *ctx;
    void (*on_ttft)(void *ctx, double ttft_ms);
    /* flicker: 0 when the request's prefix had no owner; otherwise +w when
     * it was sent away from its owner rank, -w when kept there, w = the
     * request's owned prefix blocks (>= 1): the flicker_rate terms. */
    void (*on_route)(void *ctx, int64_t now_ns, uint32_t worker, int flicker);
    /* worker_tokens[w]: active tokens of worker w's busiest rank. */
    void (*on_load)(void *ctx, int64_t now_ns, const uint64_t *worker_tokens,
                    uint32_t num_workers);
    /* Progress: simulated ns, requests routed so far. */
    void (*on_progress)(void *ctx, int64_t now_ns, uint64_t routed);
} sim_observer;

typedef struct sim_run_args {
    const sim_cluster *cluster;
    const sim_router_config *router;
    const sim_source_ops *source;
    void *source_ctx;
    /* The policy of each router replica: max(1, router->replicas) of them,
     * replica k routing through policy[k]. */
    const sim_policy *policy;
    const sim_switch *switches; /* sorted by at_ns; every replica switches */
    uint32_t num_switches;
    const char *first_label;
    const sim_observer *observer; /* may be NULL */
} sim_run_args;

/* Replay the source through the cluster with the policy. On success fills
 * *out and returns 0; otherwise a negative WSEL_E* with a message in err
 * (a source error's message is passed through). */
int32_t sim_run(const sim_run_args *args, sim_result *out, char *err, size_t err_size);

#endif
