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
    free(s->lagged.v);
    free(s->echoes.v);
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

/* Append d to ring g (grown when full); sets s->failed on no memory. */
static void ring_push(sim_state *s, sim_delta_ring *g, const sim_load_delta *d)
{
    if (g->count == g->capacity) {
        size_t cap = g->capacity ? g->capacity * 2 : 1024;
        sim_load_delta *grown = malloc(cap * sizeof(*grown));
        if (!grown) {
            s->failed = WSEL_ENOMEM;
            return;
        }
        for (size_t i = 0; i < g->count; i++)
            grown[i] = g->v[(g->head + i) % g->capacity];
        free(g->v);
        g->v = grown;
        g->head = 0;
        g->capacity = cap;
    }
    g->v[(g->head + g->count++) % g->capacity] = *d;
}

/* Every replica but d->replica sees the delta. */
static void apply_to_others(sim_state *s, const sim_load_delta *d)
{
    for (uint32_t q = 0; q < s->num_replicas; q++)
        if (q != d->replica)
            apply(&s->views[(size_t)q * s->num_ranks + d->rank], d->prefill, d->blocks,
                  d->requests);
}

/* Only d->replica sees the delta (an echo). */
static void apply_to_own(sim_state *s, const sim_load_delta *d)
{
    apply(&s->views[(size_t)d->replica * s->num_ranks + d->rank], d->prefill, d->blocks,
          d->requests);
}

/* A route's echo in replica q's view, taken back echo_ns later. */
static void echo_route(sim_state *s, uint32_t q, uint32_t rank, int64_t prefill,
                       int64_t blocks)
{
    int64_t k = (int64_t)s->num_replicas - 1;
    sim_load_delta d = {s->now_ns, k * prefill, k * blocks, (int32_t)k, q, rank};
    apply_to_own(s, &d);
    d = (sim_load_delta){s->now_ns + (int64_t)s->args->router->echo_ns, -k * prefill,
                         -k * blocks, -(int32_t)k, q, rank};
    ring_push(s, &s->echoes, &d);
}

void sim_replicas_book(sim_state *s, uint32_t q, uint32_t rank, int64_t prefill,
                       int64_t blocks, int32_t requests)
{
    apply(&s->views[(size_t)q * s->num_ranks + rank], prefill, blocks, requests);
    const sim_router_config *rc = s->args->router;
    if (s->num_replicas == 1 || rc->sync == SIM_SYNC_NONE)
        return;
    if (rc->echo_ns > 0 && requests > 0)
        echo_route(s, q, rank, prefill, blocks);
    sim_load_delta d = {
        s->now_ns + (int64_t)rc->sync_lag_ns, prefill, blocks, requests, q, rank};
    if (rc->sync_lag_ns == 0) {
        apply_to_others(s, &d);
        return;
    }
    ring_push(s, &s->lagged, &d);
}

/* Apply ring g's deltas due by now_ns with `to`. */
static void ring_apply_due(sim_state *s, sim_delta_ring *g, int64_t now_ns,
                           void (*to)(sim_state *, const sim_load_delta *))
{
    while (g->count > 0 && g->v[g->head].time_ns <= now_ns) {
        to(s, &g->v[g->head]);
        g->head = (g->head + 1) % g->capacity;
        g->count--;
    }
}

void sim_replicas_apply_due(sim_state *s, int64_t now_ns)
{
    ring_apply_due(s, &s->lagged, now_ns, apply_to_others);
    ring_apply_due(s, &s->echoes, now_ns, apply_to_own);
}
