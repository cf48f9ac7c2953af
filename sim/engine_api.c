// SPDX-License-Identifier: Apache-2.0
/*
 * engine_api.c -- sim_engine: engine.c, kvcache.c and the router model's
 * route driven one call at a time (engine_api.h).
 *
 * A request is admitted by sim_router_route with a policy that answers the
 * rank the caller chose, so it is booked exactly as in sim_run. KV events
 * are taken from the router model's delayed-event queue: with a delay no
 * run reaches, every event stays queued in order until this file drains
 * it to the observer. A step is ended and the next one started exactly as
 * run.c's loop does; the cluster is built and freed by the same
 * sim_state_setup / sim_state_teardown as sim_run's.
 */
#include "engine_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcore.h"

/* Far beyond any model time, so queued KV events never reach the index. */
#define NEVER_NS 1000000000000000000ull

/* A running request as it was before a step: finished ones are freed by
 * the step, so their figures are kept here. */
typedef struct before {
    uint64_t id;
    uint32_t osl;
    uint32_t cached;
} before;

struct sim_engine {
    sim_state s;
    sim_cluster cluster;
    sim_router_config router;
    sim_policy policy;
    sim_run_args args;
    sim_engine_observer ob;
    uint32_t chosen_rank; /* the answer of `policy` */
    before *snap;
    size_t snap_cap;
    uint64_t finished_since_reset;
    char err[256]; /* where the model writes outside submit */
};

static int32_t answer_chosen(void *ctx, wsel_request *request,
                             const wsel_rank_state *ranks, uint32_t num_ranks,
                             uint32_t *row, uint64_t *select_ns)
{
    const sim_engine *e = ctx;
    (void)request;
    (void)ranks;
    (void)num_ranks;
    *row = e->chosen_rank;
    *select_ns = 0;
    return WSEL_ANSWER_PLUGIN;
}

void sim_engine_destroy(sim_engine *e)
{
    if (!e)
        return;
    sim_state_teardown(&e->s);
    free(e->snap);
    free(e);
}

int32_t sim_engine_create(sim_engine **out, const sim_cluster *c,
                          const sim_engine_observer *ob, char *err, size_t err_size)
{
    sim_engine *e = calloc(1, sizeof(*e));
    if (!e) {
        snprintf(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    e->cluster = *c;
    e->router.overlap_weight = 1.0;
    e->router.kv_event_delay_ns = NEVER_NS;
    e->policy.ctx = e;
    e->policy.select = answer_chosen;
    e->args.cluster = &e->cluster;
    e->args.router = &e->router;
    e->args.policy = &e->policy;
    e->args.first_label = "engine";
    if (ob)
        e->ob = *ob;
    int32_t rc = sim_state_setup(&e->s, &e->args, err, err_size);
    if (rc != 0) {
        sim_engine_destroy(e);
        return rc;
    }
    e->s.err = e->err;
    e->s.err_size = sizeof(e->err);
    *out = e;
    return 0;
}

void sim_engine_set_observer(sim_engine *e, const sim_engine_observer *ob)
{
    if (ob)
        e->ob = *ob;
    else
        memset(&e->ob, 0, sizeof(e->ob));
}

uint64_t sim_engine_blocks_needed(const sim_cluster *c, uint32_t isl, uint32_t osl)
{
    const uint64_t bs = c->block_size;
    return ((uint64_t)(isl ? isl : 1) + (osl ? osl : 1) + bs - 1) / bs;
}

/* Hand the queued KV events to the observer, oldest first. */
static void drain_kv_events(sim_engine *e)
{
    sim_state *s = &e->s;
    while (s->ev_count > 0) {
        const sim_kv_event *ev = &s->events[s->ev_head];
        if (e->ob.on_kv)
            e->ob.on_kv(e->ob.ctx, ev->rank, ev->hash, (int)ev->stored);
        s->ev_head = (s->ev_head + 1) % s->ev_capacity;
        s->ev_count--;
    }
}

/* Prompt tokens the engine found cached at admission (engine.c's rule). */
static uint32_t cached_tokens(const sim_state *s, const sim_seq *seq)
{
    uint64_t cached = (uint64_t)seq->match * s->cluster->block_size;
    return cached >= seq->target ? seq->target - 1 : (uint32_t)cached;
}

/* Tokens a running sequence has generated: 0 in prefill; while decoding
 * one per step since its first, so osl less the steps still to come. */
static uint32_t generated(const sim_rank *r, const sim_seq *seq, int decoding)
{
    if (!decoding)
        return 0;
    uint64_t left = seq->finish_step > r->steps ? seq->finish_step - r->steps : 0;
    return left >= seq->osl ? 0 : seq->osl - (uint32_t)left;
}

static int32_t start_pending(sim_engine *e)
{
    sim_state *s = &e->s;
    int32_t rc = s->num_pending > 0 ? sim_engine_start_pending(s) : 0;
    drain_kv_events(e); /* admissions evict */
    return rc;
}

int32_t sim_engine_submit(sim_engine *e, int64_t now_ns, uint64_t id, uint32_t rank,
                          uint32_t isl, uint32_t osl, const uint64_t *blocks,
                          uint32_t num_blocks, char *err, size_t err_size)
{
    sim_state *s = &e->s;
    if (rank >= s->num_ranks) {
        snprintf(err, err_size, "rank %u of %u", rank, s->num_ranks);
        return WSEL_ERANGE;
    }
    if (now_ns > s->now_ns)
        s->now_ns = now_ns;
    sim_request req = {.id = id,
                       .arrival_ns = s->now_ns,
                       .isl = isl,
                       .osl = osl,
                       .num_blocks = num_blocks,
                       .blocks = blocks};
    e->chosen_rank = rank;
    s->err = err;
    s->err_size = err_size;
    int32_t rc = sim_router_route(s, &req);
    s->err = e->err;
    s->err_size = sizeof(e->err);
    if (rc != 0)
        return rc;
    if (s->failed) {
        snprintf(err, err_size, "out of memory in the router model");
        return s->failed;
    }
    return start_pending(e);
}

int sim_engine_next_step_end(const sim_engine *e, int64_t *time_ns)
{
    if (e->s.heap.size == 0)
        return 0;
    *time_ns = e->s.heap.items[0].time_ns;
    return 1;
}

static int32_t snapshot(sim_engine *e, const sim_worker *u, size_t *n)
{
    sim_state *s = &e->s;
    size_t need = 0;
    for (uint32_t k = 0; k < u->num_ranks; k++) {
        const sim_rank *r = &s->ranks[u->first_rank + k];
        need += r->num_prefilling + r->num_decoding;
    }
    if (need > e->snap_cap) {
        before *grown = realloc(e->snap, need * sizeof(*grown));
        if (!grown)
            return WSEL_ENOMEM;
        e->snap = grown;
        e->snap_cap = need;
    }
    *n = 0;
    for (uint32_t k = 0; k < u->num_ranks; k++) {
        const sim_rank *r = &s->ranks[u->first_rank + k];
        for (uint32_t i = 0; i < r->num_prefilling; i++) {
            const sim_seq *q = r->prefilling[i];
            e->snap[(*n)++] = (before){q->id, q->osl, cached_tokens(s, q)};
        }
        for (uint32_t i = 0; i < r->num_decoding; i++) {
            const sim_seq *q = r->decoding[i];
            e->snap[(*n)++] = (before){q->id, q->osl, cached_tokens(s, q)};
        }
    }
    return 0;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const before *)a)->id, y = ((const before *)b)->id;
    return x < y ? -1 : x > y;
}

/* Report every running sequence of the unit; mark it seen in the sorted
 * snapshot (osl = 0) so what is left unmarked has finished. */
static void report_running(sim_engine *e, const sim_worker *u, size_t n)
{
    sim_state *s = &e->s;
    for (uint32_t k = 0; k < u->num_ranks; k++) {
        const sim_rank *r = &s->ranks[u->first_rank + k];
        for (int dec = 0; dec < 2; dec++) {
            uint32_t count = dec ? r->num_decoding : r->num_prefilling;
            for (uint32_t i = 0; i < count; i++) {
                const sim_seq *q = dec ? r->decoding[i] : r->prefilling[i];
                before key = {.id = q->id};
                before *b = bsearch(&key, e->snap, n, sizeof(*e->snap), by_id);
                if (b)
                    b->osl = 0;
                if (e->ob.on_request)
                    e->ob.on_request(e->ob.ctx, q->id, cached_tokens(s, q),
                                     generated(r, q, dec), 0);
            }
        }
    }
}

int32_t sim_engine_step(sim_engine *e)
{
    sim_state *s = &e->s;
    sim_event ev;
    if (!sim_heap_pop(&s->heap, &ev))
        return 1;
    const sim_worker *u = &s->units[ev.arg];
    size_t n;
    if (snapshot(e, u, &n) != 0)
        return WSEL_ENOMEM;
    qsort(e->snap, n, sizeof(*e->snap), by_id);
    s->now_ns = ev.time_ns;
    sim_engine_end_step(s, ev.arg);
    drain_kv_events(e); /* first tokens store blocks */
    sim_engine_wake(s, ev.arg);
    int32_t rc = start_pending(e);
    report_running(e, u, n);
    for (size_t i = 0; i < n; i++) {
        if (e->snap[i].osl == 0)
            continue;
        if (e->ob.on_request)
            e->ob.on_request(e->ob.ctx, e->snap[i].id, e->snap[i].cached, e->snap[i].osl,
                             1);
        e->finished_since_reset++;
    }
    /* The metrics keep a sample per request; an engine runs for ever. */
    if (e->finished_since_reset >= (1u << 20) && s->in_flight == 0) {
        sim_acc_free(&s->acc[0]);
        sim_acc_init(&s->acc[0]);
        e->finished_since_reset = 0;
    }
    return rc;
}

/* Restore the decoding heap's order after a finish_step moved earlier. */
static void sift_up(sim_rank *r, uint32_t i)
{
    sim_seq *seq = r->decoding[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        const sim_seq *p = r->decoding[parent];
        if (!(seq->finish_step < p->finish_step ||
              (seq->finish_step == p->finish_step && seq->id < p->id)))
            break;
        r->decoding[i] = r->decoding[parent];
        i = parent;
    }
    r->decoding[i] = seq;
}

static int cancel_waiting(sim_engine *e, sim_rank *r, uint64_t id)
{
    sim_state *s = &e->s;
    sim_seq *prev = NULL;
    for (sim_seq *q = r->wait_head; q; prev = q, q = q->next) {
        if (q->id != id)
            continue;
        if (prev)
            prev->next = q->next;
        else
            r->wait_head = q->next;
        if (r->wait_tail == q)
            r->wait_tail = prev;
        if (r->blocked == q)
            r->blocked = NULL;
        /* Undo what routing and queueing booked. */
        r->prefill_backlog -= q->target;
        r->load_tokens -= q->isl;
        sim_router_cancelled(s, q);
        s->in_flight--;
        free(q);
        if (e->ob.on_request)
            e->ob.on_request(e->ob.ctx, id, 0, 0, 1);
        return 1;
    }
    return 0;
}

int32_t sim_engine_cancel(sim_engine *e, uint64_t id)
{
    sim_state *s = &e->s;
    for (uint32_t k = 0; k < s->num_ranks; k++) {
        sim_rank *r = &s->ranks[k];
        for (uint32_t i = 0; i < r->num_prefilling; i++)
            if (r->prefilling[i]->id == id) {
                r->prefilling[i]->osl = 1; /* ends with its first token */
                return 0;
            }
        for (uint32_t i = 0; i < r->num_decoding; i++) {
            sim_seq *q = r->decoding[i];
            if (q->id != id)
                continue;
            /* The step in flight yields one more token, its last. */
            uint32_t done = generated(r, q, 1);
            q->osl = done + 1;
            q->finish_step = r->steps + 1;
            sift_up(r, i);
            return 0;
        }
        if (cancel_waiting(e, r, id))
            return 0;
    }
    return WSEL_ENOENT;
}

void sim_engine_kv_usage(const sim_engine *e, uint32_t rank, uint32_t *used,
                         uint32_t *capacity)
{
    const sim_kvcache *kv = &e->s.ranks[rank].kv;
    *used = sim_kv_used(kv);
    *capacity = kv->capacity;
}

void sim_engine_kv_blocks(const sim_engine *e, uint32_t rank,
                          void (*fn)(void *ctx, uint64_t hash), void *ctx)
{
    const sim_kvcache *kv = &e->s.ranks[rank].kv;
    const sim_u64map *m = &kv->index;
    if (m->has_zero)
        fn(ctx, kv->hash[m->zero_value]);
    for (size_t i = 0; m->slots && i <= m->mask; i++)
        if (m->slots[i].mixed != 0)
            fn(ctx, kv->hash[m->slots[i].value]);
}
