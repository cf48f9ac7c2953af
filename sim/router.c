// SPDX-License-Identifier: Apache-2.0
/*
 * router.c -- the router's side of the model: a block index fed by KV
 * events (optionally delayed), Dynamo-style predictive loads (booked in
 * the routing replica's view, replicas.c) and busy flags, the rank states
 * handed to the policy, and the bookkeeping of prefix ownership
 * (flicker_rate) and affinity keys (key_move_rate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcore.h"

int32_t sim_router_init(sim_state *s)
{
    s->rank_states = calloc(s->num_ranks, sizeof(*s->rank_states));
    if (!s->rank_states || sim_replicas_init(s) != 0)
        return WSEL_ENOMEM;
    if (sim_u64map_init(&s->owner[0], 1024, 1) != 0 ||
        sim_u64map_init(&s->owner[1], 1024, 1) != 0)
        return WSEL_ENOMEM;
    return sim_u64map_init(&s->index, 1024, 1);
}

void sim_router_free(sim_state *s)
{
    free(s->rank_states);
    free(s->events);
    sim_replicas_free(s);
    sim_u64map_free(&s->index);
    sim_u64map_free(&s->owner[0]);
    sim_u64map_free(&s->owner[1]);
}

static void apply_event(sim_state *s, uint32_t rank, uint64_t hash, int stored)
{
    uint64_t bit = 1ull << rank;
    if (stored) {
        int inserted;
        uint64_t *mask = sim_u64map_upsert(&s->index, hash, &inserted);
        if (!mask) {
            s->failed = WSEL_ENOMEM;
            return;
        }
        s->index_holdings += (*mask & bit) == 0;
        *mask |= bit;
        return;
    }
    uint64_t *mask = sim_u64map_find(&s->index, hash);
    if (!mask || (*mask & bit) == 0)
        return;
    s->index_holdings--;
    if ((*mask &= ~bit) == 0)
        sim_u64map_erase_found(&s->index, mask);
}

void sim_router_kv_event(sim_state *s, uint32_t rank, uint64_t hash, int stored)
{
    if (s->args->router->kv_event_delay_ns == 0) {
        apply_event(s, rank, hash, stored);
        return;
    }
    if (s->ev_count == s->ev_capacity) {
        size_t cap = s->ev_capacity ? s->ev_capacity * 2 : 4096;
        sim_kv_event *grown = malloc(cap * sizeof(*grown));
        if (!grown) {
            s->failed = WSEL_ENOMEM;
            return;
        }
        for (size_t i = 0; i < s->ev_count; i++)
            grown[i] = s->events[(s->ev_head + i) % s->ev_capacity];
        free(s->events);
        s->events = grown;
        s->ev_head = 0;
        s->ev_capacity = cap;
    }
    sim_kv_event *e = &s->events[(s->ev_head + s->ev_count++) % s->ev_capacity];
    e->time_ns = s->now_ns + (int64_t)s->args->router->kv_event_delay_ns;
    e->hash = hash;
    e->rank = rank;
    e->stored = (uint32_t)stored;
}

void sim_router_apply_due(sim_state *s, int64_t now_ns)
{
    while (s->ev_count > 0 && s->events[s->ev_head].time_ns <= now_ns) {
        const sim_kv_event *e = &s->events[s->ev_head];
        apply_event(s, e->rank, e->hash, (int)e->stored);
        s->ev_head = (s->ev_head + 1) % s->ev_capacity;
        s->ev_count--;
    }
    sim_replicas_apply_due(s, now_ns);
}

/* Consecutive prefix blocks of `blocks` the index says each rank holds. */
static void fill_overlaps(sim_state *s, const uint64_t *blocks, uint32_t n)
{
    uint64_t alive = s->num_ranks == 64 ? ~0ull : (1ull << s->num_ranks) - 1;
    for (uint32_t r = 0; r < s->num_ranks; r++)
        s->rank_states[r].overlap_blocks = 0;
    for (uint32_t i = 0; i < n; i++)
        sim_u64map_prefetch(&s->index, blocks[i]);
    uint32_t i = 0;
    for (; i < n && alive; i++) {
        const uint64_t *mask = sim_u64map_find(&s->index, blocks[i]);
        uint64_t held = mask ? *mask : 0;
        uint64_t dropped = alive & ~held;
        while (dropped) {
            s->rank_states[__builtin_ctzll(dropped)].overlap_blocks = i;
            dropped &= dropped - 1;
        }
        alive &= held;
    }
    while (alive) {
        s->rank_states[__builtin_ctzll(alive)].overlap_blocks = i;
        alive &= alive - 1;
    }
}

/* Dynamo's busy rule (its KvWorkerMonitor): a rank is busy when its active
 * KV blocks / capacity exceed the decode threshold or its prefill tokens
 * exceed the prefill threshold, both from the engine's own figures; a
 * worker is busy, and all its rows flagged, only when every rank is. */
static uint32_t busy_flags(const sim_state *s, uint32_t worker)
{
    const sim_router_config *rc = s->args->router;
    if (rc->busy_decode_blocks <= 0 && rc->busy_prefill_tokens == 0)
        return 0;
    const sim_worker *w = &s->workers[worker];
    for (uint32_t k = 0; k < w->num_ranks; k++) {
        const sim_rank *r = &s->ranks[w->first_rank + k];
        uint32_t active = sim_kv_used(&r->kv) - r->kv.lru_size;
        int busy =
            (rc->busy_decode_blocks > 0 &&
             (double)active > rc->busy_decode_blocks * (double)r->kv.capacity) ||
            (rc->busy_prefill_tokens > 0 && r->prefill_backlog > rc->busy_prefill_tokens);
        if (!busy)
            return 0;
    }
    return WSEL_ROW_BUSY;
}

/* The rank states as replica q sees them. */
static void fill_loads(sim_state *s, uint32_t q)
{
    const sim_load *view = sim_replicas_view(s, q);
    for (uint32_t w = 0; w < s->cluster->num_workers; w++) {
        uint32_t flags = busy_flags(s, w);
        for (uint32_t k = 0; k < s->workers[w].num_ranks; k++)
            s->rank_states[s->workers[w].first_rank + k].flags = flags;
    }
    for (uint32_t r = 0; r < s->num_ranks; r++) {
        const sim_rank *rank = &s->ranks[r];
        wsel_rank_state *st = &s->rank_states[r];
        st->worker_id = rank->worker;
        st->dp_rank = rank->dp_rank;
        st->active_prefill_tokens = view[r].prefill;
        st->active_blocks = view[r].blocks;
        st->kv_capacity_blocks = s->cluster->kv_blocks;
        st->active_requests = view[r].requests;
    }
}

static uint64_t affinity_key(const sim_state *s, const sim_request *req)
{
    uint32_t k = s->args->router->affinity_blocks;
    if (req->num_blocks == 0 || k == 0)
        return 0;
    uint64_t h = req->blocks[(k < req->num_blocks ? k : req->num_blocks) - 1];
    return h ? h : sim_mix64(0);
}

static uint64_t *owner_find(sim_state *s, uint64_t hash)
{
    uint64_t *v = sim_u64map_find(&s->owner[s->owner_gen], hash);
    return v ? v : sim_u64map_find(&s->owner[s->owner_gen ^ 1], hash);
}

/* The request's owned prefix: its deepest block that an earlier request
 * contained (prefix hashes: block i known implies blocks < i known, short
 * of a forgotten generation, so the scan stops at the first unknown
 * block). Writes the owner (rank + 1, 0 = none) and returns the depth. */
static uint32_t prefix_owner(sim_state *s, const sim_request *req, uint64_t *owner)
{
    uint32_t depth = 0;
    *owner = 0;
    for (uint32_t i = 0; i < req->num_blocks; i++) {
        const uint64_t *v = owner_find(s, req->blocks[i]);
        if (!v)
            break;
        depth = i + 1;
        *owner = *v;
    }
    return depth;
}

/* Every block of the request is now owned by `rank`. Returns 0 or
 * WSEL_ENOMEM. */
static int32_t take_ownership(sim_state *s, const sim_request *req, uint32_t rank)
{
    for (uint32_t i = 0; i < req->num_blocks; i++) {
        sim_u64map *cur = &s->owner[s->owner_gen];
        if (cur->size >= SIM_OWNER_GENERATION) {
            /* The newer generation is full: forget the older one. */
            s->owner_gen ^= 1;
            cur = &s->owner[s->owner_gen];
            sim_u64map_free(cur);
            if (sim_u64map_init(cur, 1024, 1) != 0)
                return WSEL_ENOMEM;
        }
        int inserted;
        uint64_t *v = sim_u64map_upsert(cur, req->blocks[i], &inserted);
        if (!v)
            return WSEL_ENOMEM;
        *v = (uint64_t)rank + 1;
    }
    return 0;
}

static int32_t new_seq(sim_state *s, const sim_request *req, uint32_t row, uint32_t q,
                       sim_seq **out)
{
    const uint32_t bs = s->cluster->block_size;
    sim_seq *seq = malloc(sizeof(*seq) + (size_t)req->num_blocks * 12);
    if (!seq)
        return WSEL_ENOMEM;
    memset(seq, 0, sizeof(*seq));
    seq->slots = (uint32_t *)(void *)(seq->blocks + req->num_blocks);
    memcpy(seq->blocks, req->blocks, (size_t)req->num_blocks * sizeof(uint64_t));
    seq->id = req->id;
    seq->arrival_ns = req->arrival_ns;
    seq->isl = req->isl;
    seq->osl = req->osl > 0 ? req->osl : 1;
    seq->target = req->isl > 0 ? req->isl : 1;
    seq->num_blocks = req->num_blocks;
    seq->rank = row;
    seq->replica = q;
    seq->phase = s->phase;
    uint64_t total = ((uint64_t)seq->target + seq->osl + bs - 1) / bs;
    seq->private_blocks = (uint32_t)(total - req->num_blocks);
    uint32_t overlap = s->rank_states[row].overlap_blocks;
    uint64_t covered = (uint64_t)overlap * bs;
    seq->routed_prefill = covered < req->isl ? (uint32_t)(req->isl - covered) : 0;
    seq->routed_blocks = (req->isl + bs - 1) / bs;
    *out = seq;
    return 0;
}

int32_t sim_router_route(sim_state *s, const sim_request *req)
{
    const sim_router_config *rc = s->args->router;
    const uint32_t bs = s->cluster->block_size;
    uint64_t need =
        ((uint64_t)(req->isl ? req->isl : 1) + (req->osl ? req->osl : 1) + bs - 1) / bs;
    if (need > s->cluster->kv_blocks) {
        snprintf(
            s->err, s->err_size,
            "request %llu needs %llu KV blocks but a rank holds %u: raise --kv-blocks",
            (unsigned long long)req->id, (unsigned long long)need, s->cluster->kv_blocks);
        return WSEL_ERANGE;
    }
    uint32_t q = sim_replicas_pick(s);
    fill_loads(s, q);
    fill_overlaps(s, req->blocks, req->num_blocks);
    uint64_t owner;
    uint32_t owned = prefix_owner(s, req, &owner);
    wsel_rng rng;
    wsel_request wr;
    memset(&wr, 0, sizeof(wr));
    wr.struct_size = sizeof(wr);
    wr.request_id = req->id;
    wr.affinity_key = affinity_key(s, req);
    wr.timestamp_us = (uint64_t)(req->arrival_ns / 1000);
    wr.isl_tokens = req->isl;
    wr.block_size = bs;
    wr.num_block_hashes = req->num_blocks;
    wr.block_hashes = req->num_blocks ? req->blocks : NULL;
    wr.overlap_score_weight = rc->overlap_weight;
    wr.temperature = rc->temperature;
    wr.rng = &rng;
    uint32_t row = 0;
    uint64_t select_ns = 0;
    const sim_policy *p = &s->args->policy[q];
    int32_t answer =
        p->select(p->ctx, &wr, s->rank_states, s->num_ranks, &row, &select_ns);
    if (answer < 0) {
        snprintf(s->err, s->err_size, "select failed for request %llu: %s",
                 (unsigned long long)req->id, wsel_strerror(answer));
        return answer;
    }
    if (row >= s->num_ranks) {
        snprintf(s->err, s->err_size, "select answered row %u of %u", row, s->num_ranks);
        return WSEL_ETABLE;
    }
    sim_seq *seq;
    int32_t rc_alloc = new_seq(s, req, row, q, &seq);
    if (rc_alloc != 0) {
        snprintf(s->err, s->err_size, "out of memory for request %llu",
                 (unsigned long long)req->id);
        return rc_alloc;
    }
    sim_rank *rank = &s->ranks[row];
    sim_replicas_book(s, q, row, seq->routed_prefill, seq->routed_blocks, 1);
    rank->load_tokens += req->isl;
    s->in_flight++;
    s->routed++;

    uint32_t worker = rank->worker;
    uint64_t key = wr.affinity_key;
    int moved = -1;
    if (key != 0) {
        int inserted;
        uint64_t *last = sim_u64map_upsert(&s->acc_keys, key, &inserted);
        if (!last)
            return WSEL_ENOMEM;
        if (!inserted)
            moved = *last != worker + 1;
        *last = worker + 1;
    }
    int away = owner != 0 && owner != (uint64_t)row + 1;
    if (take_ownership(s, req, row) != 0)
        return WSEL_ENOMEM;
    sim_acc *accs[2] = {&s->acc[0], s->num_acc > 1 ? &s->acc[1 + s->phase] : NULL};
    for (int i = 0; i < 2 && accs[i]; i++) {
        sim_acc_route(accs[i], req->arrival_ns, worker, req->isl, select_ns);
        sim_acc_herd(accs[i], req->arrival_ns, row);
        if (moved >= 0)
            sim_acc_affinity(accs[i], moved);
        if (owner != 0)
            sim_acc_ownership(accs[i], owned, away);
    }
    const sim_observer *ob = s->args->observer;
    if (ob && ob->on_route)
        ob->on_route(ob->ctx, req->arrival_ns, worker,
                     owner == 0 ? 0
                     : away     ? (int)owned
                                : -(int)owned);
    sim_engine_enqueue(s, seq);
    sim_engine_wake(s, rank->unit);
    return 0;
}

void sim_router_first_token(sim_state *s, sim_seq *seq)
{
    sim_replicas_book(s, seq->replica, seq->rank, -(int64_t)seq->routed_prefill, 0, 0);
    seq->routed_prefill = 0;
    seq->first_token_ns = s->now_ns;
}

void sim_router_finished(sim_state *s, sim_seq *seq)
{
    sim_rank *rank = &s->ranks[seq->rank];
    sim_replicas_book(s, seq->replica, seq->rank, 0, -(int64_t)seq->routed_blocks, -1);
    const sim_policy *p = &s->args->policy[seq->replica];
    if (p->outcome) { /* what it cost, from the model (ABI 1.1 outcome) */
        uint64_t cached = (uint64_t)seq->match * s->cluster->block_size;
        wsel_outcome o = {
            .struct_size = sizeof(o),
            .dp_rank = rank->dp_rank,
            .request_id = seq->id,
            .worker_id = rank->worker,
            .ttft_us = (uint64_t)(seq->first_token_ns - seq->arrival_ns) / 1000u,
            .e2e_us = (uint64_t)(s->now_ns - seq->arrival_ns) / 1000u,
            .finished_us = (uint64_t)s->now_ns / 1000u,
            .prompt_tokens = seq->isl,
            .cached_tokens = (uint32_t)(cached < seq->isl ? cached : seq->isl),
            .output_tokens = seq->osl,
        };
        p->outcome(p->ctx, &o);
    } else if (p->finished) {
        p->finished(p->ctx, seq->id, rank->worker, rank->dp_rank);
    }
}

void sim_router_cancelled(sim_state *s, sim_seq *seq)
{
    sim_replicas_book(s, seq->replica, seq->rank, -(int64_t)seq->routed_prefill,
                      -(int64_t)seq->routed_blocks, -1);
}

uint64_t sim_router_fallbacks(const sim_state *s)
{
    uint64_t n = 0;
    for (uint32_t q = 0; q < s->num_replicas; q++) {
        const sim_policy *p = &s->args->policy[q];
        n += p->fallbacks ? p->fallbacks(p->ctx) : 0;
    }
    return n;
}
