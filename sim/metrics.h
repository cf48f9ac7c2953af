// SPDX-License-Identifier: Apache-2.0
/*
 * metrics.h -- accumulate one run's (or one phase's) measurements and turn
 * them into sim_metrics. Definitions are in docs/sim.md. Not thread-safe.
 * OWNERSHIP: an accumulator owns its sample arrays; sim_acc_free frees them.
 */
#ifndef WSEL_SIM_METRICS_H
#define WSEL_SIM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

/* Share volatility window. */
#define SIM_SHARE_WINDOW_NS 10000000000ll
/* Herding index burst: the requests arriving in one such window. */
#define SIM_HERD_WINDOW_NS 100000000ll

typedef struct sim_samples {
    float *v;
    size_t n, capacity;
} sim_samples;

typedef struct sim_acc {
    uint64_t requests, finished, input_tokens, cached_tokens, output_tokens;
    sim_samples ttft_ms, e2e_ms, select_ns;
    uint64_t affinity_seen, affinity_moved;
    uint64_t owned_blocks, away_blocks; /* flicker_rate terms */
    double copies_s, copies_time_s;     /* prefix_copies time integral */
    int64_t first_arrival_ns, last_finish_ns;
    int64_t window;
    uint64_t window_total;
    uint64_t window_count[SIM_MAX_RANKS];
    double share_sum[SIM_MAX_RANKS], share_sumsq[SIM_MAX_RANKS];
    uint64_t windows;
    double rank_ratio_s, group_ratio_s, loaded_s;
    uint64_t fallbacks_start, fallbacks_end;
    /* Herding: the current burst's requests per rank, and the sum of the
     * closed bursts' indices. num_ranks is set after sim_acc_init. */
    uint32_t num_ranks;
    int64_t herd_window;
    uint32_t herd_total;
    uint32_t herd_count[SIM_MAX_RANKS];
    double herd_sum;
    uint64_t herd_bursts;
    int failed_alloc;
} sim_acc;

void sim_acc_init(sim_acc *a);
void sim_acc_free(sim_acc *a);
/* A request was routed to `worker` at `now_ns` (its arrival). */
void sim_acc_route(sim_acc *a, int64_t now_ns, uint32_t worker, uint32_t isl,
                   uint64_t select_ns);
/* ... and to `rank` (< num_ranks), for the herding index; a caller that
 * never calls it gets a herding index of 0. */
void sim_acc_herd(sim_acc *a, int64_t now_ns, uint32_t rank);
/* A request with a known affinity key was routed; moved = other worker. */
void sim_acc_affinity(sim_acc *a, int moved);
/* A request whose deepest previously routed prefix block (`owned` blocks
 * deep) had an owner rank was routed; away = not to that rank. */
void sim_acc_ownership(sim_acc *a, uint32_t owned, int away);
/* `seconds` of simulated time passed with `copies` ranks per cached block. */
void sim_acc_copies(sim_acc *a, double seconds, double copies);
void sim_acc_admitted(sim_acc *a, uint32_t cached_tokens);
void sim_acc_first_token(sim_acc *a, double ttft_ms);
void sim_acc_finished(sim_acc *a, int64_t now_ns, double e2e_ms, uint32_t output_tokens);
/* `seconds` of simulated time passed with the given load ratios. */
void sim_acc_load(sim_acc *a, double seconds, double rank_ratio, double group_ratio);
/* Compute the figures. Returns WSEL_ENOMEM if a sample could not be kept. */
int32_t sim_acc_finish(sim_acc *a, uint32_t num_workers, sim_metrics *out);

#endif
