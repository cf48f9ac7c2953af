// SPDX-License-Identifier: Apache-2.0
/*
 * replicas.c -- router replicas: which replica an arrival reaches, each
 * replica's own view of the predictive loads, and the sync that carries
 * one replica's load changes to the others (at once, after a lag, or
 * never). The KV index is not here: every replica subscribes to the
 * engines' KV events, so router.c keeps one index for all.
 */
#include <stdlib.h>
#include <string.h>

#include "simcore.h"

const char *const sim_spread_names[] = {"round-robin", "random", NULL};
const char *const sim_sync_names[] = {"lag", "none", NULL};

int32_t sim_replicas_init(sim_state *s)
{
    const sim_router_config *rc = s->args->router;
    s->num_replicas = rc->replicas > 1 ? rc->replicas : 1;
    /* Its own stream: not the jitter's, seeded with the same number. */
    wsel_rng_seed(&s->spread_rng, sim_mix64(rc->spread_seed ^ 0x5350524541440000ull));
    s->views = calloc((size_t)s->num_replicas * s->num_ranks, sizeof(*s->views));
    return s->views ? 0 : WSEL_ENOMEM;
}

void sim_replicas_free(sim_state *s)
{
    free(s->views);
    free(s->deltas);
}

uint32_t sim_replicas_pick(sim_state *s)
{
    uint32_t n = s->num_replicas;
    if (n == 1)
        return 0;
    if (s->args->router->spread == SIM_SPREAD_RANDOM) {
        uint32_t q = (uint32_t)(wsel_rng_uniform(&s->spread_rng) * n);
        return q < n ? q : n - 1;
    }
    uint32_t q = s->next_replica;
    s->next_replica = (q + 1) % n;
    return q;
}

static void apply(sim_load *l, int64_t prefill, int64_t blocks, int32_t requests)
{
    l->prefill = (uint64_t)((int64_t)l->prefill + prefill);
    l->blocks = (uint64_t)((int64_t)l->blocks + blocks);
    l->requests = (uint32_t)((int32_t)l->requests + requests);
}

static int32_t grow_ring(sim_state *s)
{
    size_t cap = s->dl_capacity ? s->dl_capacity * 2 : 1024;
    sim_load_delta *grown = malloc(cap * sizeof(*grown));
    if (!grown)
        return WSEL_ENOMEM;
    for (size_t i = 0; i < s->dl_count; i++)
        grown[i] = s->deltas[(s->dl_head + i) % s->dl_capacity];
    free(s->deltas);
    s->deltas = grown;
    s->dl_head = 0;
    s->dl_capacity = cap;
    return 0;
}

/* Every replica but d->replica sees the delta. */
static void apply_to_others(sim_state *s, const sim_load_delta *d)
{
    for (uint32_t q = 0; q < s->num_replicas; q++)
        if (q != d->replica)
            apply(&s->views[(size_t)q * s->num_ranks + d->rank], d->prefill, d->blocks,
                  d->requests);
}

void sim_replicas_book(sim_state *s, uint32_t q, uint32_t rank, int64_t prefill,
                       int64_t blocks, int32_t requests)
{
    apply(&s->views[(size_t)q * s->num_ranks + rank], prefill, blocks, requests);
    const sim_router_config *rc = s->args->router;
    if (s->num_replicas == 1 || rc->sync == SIM_SYNC_NONE)
        return;
    sim_load_delta d = {
        s->now_ns + (int64_t)rc->sync_lag_ns, prefill, blocks, requests, q, rank};
    if (rc->sync_lag_ns == 0) {
        apply_to_others(s, &d);
        return;
    }
    if (s->dl_count == s->dl_capacity && grow_ring(s) != 0) {
        s->failed = WSEL_ENOMEM;
        return;
    }
    s->deltas[(s->dl_head + s->dl_count++) % s->dl_capacity] = d;
}

void sim_replicas_apply_due(sim_state *s, int64_t now_ns)
{
    /* One lag for all: the ring is in time order. */
    while (s->dl_count > 0 && s->deltas[s->dl_head].time_ns <= now_ns) {
        apply_to_others(s, &s->deltas[s->dl_head]);
        s->dl_head = (s->dl_head + 1) % s->dl_capacity;
        s->dl_count--;
    }
}
