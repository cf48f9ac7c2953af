// SPDX-License-Identifier: Apache-2.0
/*
 * state.c -- build and free the simulated cluster (ranks, workers, stepping
 * units, KV caches, the router model, the metric accumulators): the one
 * setup shared by sim_run (run.c) and the real-time engine (engine_api.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcore.h"

static int32_t report_nomem(const sim_state *s, char *err, size_t err_size)
{
    snprintf(err, err_size, "out of memory for a cluster of %u ranks x %u KV blocks",
             s->num_ranks, s->cluster->kv_blocks);
    return WSEL_ENOMEM;
}

int32_t sim_state_setup(sim_state *s, const sim_run_args *args, char *err,
                        size_t err_size)
{
    const sim_cluster *c = args->cluster;
    memset(s, 0, sizeof(*s));
    s->args = args;
    s->cluster = c;
    s->err = err;
    s->err_size = err_size;
    s->num_ranks = sim_cluster_ranks(c);
    if (c->max_running == 0 || c->token_budget < c->max_running) {
        snprintf(err, err_size,
                 "the token budget (%u) must be at least the running sequences (%u)",
                 c->token_budget, c->max_running);
        return WSEL_EINVAL;
    }
    if (c->num_workers == 0 || s->num_ranks == 0 || s->num_ranks > SIM_MAX_RANKS) {
        snprintf(err, err_size, "the cluster has %u ranks; wsel sim models 1 to %d",
                 s->num_ranks, SIM_MAX_RANKS);
        return WSEL_ERANGE;
    }
    if (c->dp_mode != SIM_DP_LOCKSTEP && c->dp_mode != SIM_DP_INDEPENDENT) {
        snprintf(err, err_size, "unknown DP mode %u", c->dp_mode);
        return WSEL_EINVAL;
    }
    const sim_router_config *rc = args->router;
    if (!(rc->speedup >= 0) || !isfinite(rc->speedup) || !(rc->busy_decode_blocks >= 0)) {
        snprintf(err, err_size, "the speedup and the busy threshold must be >= 0");
        return WSEL_EINVAL;
    }
    if (rc->replicas > SIM_MAX_REPLICAS || rc->spread > SIM_SPREAD_RANDOM ||
        rc->sync > SIM_SYNC_NONE) {
        snprintf(err, err_size,
                 "%u replicas (spread %u, sync %u): wsel sim models 1 to %d",
                 rc->replicas, rc->spread, rc->sync, SIM_MAX_REPLICAS);
        return WSEL_ERANGE;
    }
    s->first_arrival_ns = -1;
    wsel_rng_seed(&s->jitter_rng, rc->jitter_seed);
    s->num_units = c->dp_mode == SIM_DP_INDEPENDENT ? s->num_ranks : c->num_workers;
    s->ranks = calloc(s->num_ranks, sizeof(*s->ranks));
    s->workers = calloc(c->num_workers, sizeof(*s->workers));
    s->units = calloc(s->num_units, sizeof(*s->units));
    s->pending = calloc(s->num_units, sizeof(*s->pending));
    if (!s->ranks || !s->workers || !s->units || !s->pending)
        return report_nomem(s, err, err_size);
    uint32_t r = 0;
    for (uint32_t w = 0; w < c->num_workers; w++) {
        s->workers[w].first_rank = r;
        s->workers[w].num_ranks = c->dp[w];
        if (c->dp_mode == SIM_DP_LOCKSTEP)
            s->units[w] = s->workers[w];
        for (uint32_t d = 0; d < c->dp[w]; d++, r++) {
            s->ranks[r].worker = w;
            s->ranks[r].dp_rank = d;
            s->ranks[r].unit = c->dp_mode == SIM_DP_LOCKSTEP ? w : r;
            if (c->dp_mode == SIM_DP_INDEPENDENT)
                s->units[r] = (sim_worker){r, 1, 0, 0};
            s->ranks[r].prefilling = malloc(c->max_running * sizeof(sim_seq *));
            s->ranks[r].decoding = malloc(c->max_running * sizeof(sim_seq *));
            if (!s->ranks[r].prefilling || !s->ranks[r].decoding ||
                sim_kv_init(&s->ranks[r].kv, c->kv_blocks) != 0)
                return report_nomem(s, err, err_size);
        }
    }
    if (sim_router_init(s) != 0 || sim_u64map_init(&s->acc_keys, 1024, 1) != 0)
        return report_nomem(s, err, err_size);
    s->num_acc = args->num_switches > 0 ? 1 + 1 + args->num_switches : 1;
    for (uint32_t i = 0; i < s->num_acc; i++) {
        sim_acc_init(&s->acc[i]);
        s->acc[i].num_ranks = s->num_ranks;
    }
    return 0;
}

void sim_state_teardown(sim_state *s)
{
    for (uint32_t r = 0; s->ranks && r < s->num_ranks; r++) {
        sim_rank *rank = &s->ranks[r];
        for (uint32_t i = 0; i < rank->num_prefilling; i++)
            free(rank->prefilling[i]);
        for (uint32_t i = 0; i < rank->num_decoding; i++)
            free(rank->decoding[i]);
        for (sim_seq *q = rank->wait_head, *next; q; q = next) {
            next = q->next;
            free(q);
        }
        free(rank->prefilling);
        free(rank->decoding);
        sim_kv_free(&rank->kv);
    }
    free(s->ranks);
    free(s->workers);
    free(s->units);
    free(s->pending);
    sim_router_free(s);
    sim_u64map_free(&s->acc_keys);
    sim_heap_free(&s->heap);
    for (uint32_t i = 0; i < s->num_acc; i++)
        sim_acc_free(&s->acc[i]);
}
