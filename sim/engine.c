// SPDX-License-Identifier: Apache-2.0
/*
 * engine.c -- the engine model: each rank runs continuous batching with
 * chunked prefill and prefix caching. Ranks step in units: with
 * SIM_DP_LOCKSTEP a unit is a worker, whose step lasts as long as its
 * slowest rank's; with SIM_DP_INDEPENDENT every rank is its own unit.
 * A unit woken by an arrival or a step end starts its next step only once
 * every event of that instant has run, so requests arriving together are
 * admitted together.
 */
#include <stdlib.h>
#include <string.h>

#include "simcore.h"
#include "step_model.h"

const char *const sim_cost_model_names[] = {"polynomial", "linear", NULL};
const char *const sim_dp_mode_names[] = {"lockstep", "independent", NULL};

void sim_cluster_default(sim_cluster *c)
{
    memset(c, 0, sizeof(*c));
    c->num_workers = 1;
    c->dp[0] = 8;
    c->kv_blocks = 16384;
    c->block_size = 64;
    c->max_running = 256;
    c->token_budget = 8192;
    c->cost_model = SIM_COST_POLYNOMIAL;
    c->step_fixed_ms = 5.0;
    c->prefill_token_ms = 0.015;
    c->decode_seq_ms = 0.1;
    c->dp_mode = SIM_DP_LOCKSTEP;
}

uint32_t sim_cluster_ranks(const sim_cluster *c)
{
    uint32_t n = 0;
    for (uint32_t w = 0; w < c->num_workers; w++)
        n += c->dp[w];
    return n;
}

double sim_step_ms(const sim_cluster *c, uint64_t prefill_tokens, uint32_t decoding,
                   double u)
{
    if (prefill_tokens == 0 && decoding == 0)
        return 0;
    if (c->cost_model == SIM_COST_LINEAR)
        return c->step_fixed_ms + c->prefill_token_ms * (double)prefill_tokens +
               c->decode_seq_ms * decoding;
    /* Dynamo mocker's polynomial model: a prefill pass plus a decode pass. */
    return sim_poly_prefill_ms((double)prefill_tokens) +
           (decoding > 0 ? sim_poly_decode_ms(u) : 0.0);
}

void sim_engine_enqueue(sim_state *s, sim_seq *seq)
{
    sim_rank *r = &s->ranks[seq->rank];
    r->prefill_backlog += seq->target;
    seq->next = NULL;
    if (r->wait_tail)
        r->wait_tail->next = seq;
    else
        r->wait_head = seq;
    r->wait_tail = seq;
}

static void on_evict(void *ctx, uint64_t hash)
{
    sim_state *s = ctx;
    sim_router_kv_event(s, s->evicting_rank, hash, 0);
}

/* Decoding heap: ordered by (finish_step, id). */
static int heap_before(const sim_seq *a, const sim_seq *b)
{
    return a->finish_step < b->finish_step ||
           (a->finish_step == b->finish_step && a->id < b->id);
}

static void heap_push(sim_rank *r, sim_seq *seq)
{
    uint32_t i = r->num_decoding++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!heap_before(seq, r->decoding[parent]))
            break;
        r->decoding[i] = r->decoding[parent];
        i = parent;
    }
    r->decoding[i] = seq;
}

static sim_seq *heap_pop(sim_rank *r)
{
    sim_seq *top = r->decoding[0];
    sim_seq *last = r->decoding[--r->num_decoding];
    uint32_t i = 0, n = r->num_decoding;
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && heap_before(r->decoding[child + 1], r->decoding[child]))
            child++;
        if (!heap_before(r->decoding[child], last))
            break;
        r->decoding[i] = r->decoding[child];
        i = child;
    }
    if (n > 0)
        r->decoding[i] = last;
    return top;
}

/* Admit waiting requests in FCFS order while sequences, budget and KV
 * blocks allow; returns the budget left. */
static uint32_t admit_waiting(sim_state *s, uint32_t rank_index, uint32_t budget,
                              uint64_t *prefill)
{
    sim_rank *r = &s->ranks[rank_index];
    const uint32_t bs = s->cluster->block_size;
    while (r->wait_head &&
           r->num_prefilling + r->num_decoding < s->cluster->max_running && budget > 0) {
        sim_seq *seq = r->wait_head;
        uint32_t match;
        s->evicting_rank = rank_index;
        if (seq == r->blocked &&
            sim_kv_available(&r->kv) - r->blocked_available < r->blocked_shortfall)
            break; /* not enough was released since it last failed */
        uint32_t shortfall;
        if (sim_kv_admit(&r->kv, seq->blocks, seq->num_blocks, seq->private_blocks,
                         seq->slots, &match, &shortfall, on_evict, s) != 0) {
            r->blocked = seq; /* head of line waits for blocks */
            r->blocked_available = sim_kv_available(&r->kv);
            r->blocked_shortfall = shortfall;
            break;
        }
        r->blocked = NULL;
        seq->match = match;
        r->wait_head = seq->next;
        if (!r->wait_head)
            r->wait_tail = NULL;
        uint64_t cached = (uint64_t)match * bs;
        if (cached >= seq->target)
            cached = seq->target - 1; /* the last token is always computed */
        seq->computed = (uint32_t)cached;
        r->prefill_backlog -= cached;
        r->kv_tokens += cached;
        sim_acc_admitted(&s->acc[0], (uint32_t)cached);
        if (s->num_acc > 1)
            sim_acc_admitted(&s->acc[1 + seq->phase], (uint32_t)cached);
        uint32_t c = seq->target - seq->computed;
        seq->chunk = c < budget ? c : budget;
        budget -= seq->chunk;
        *prefill += seq->chunk;
        r->prefilling[r->num_prefilling++] = seq;
    }
    return budget;
}

/* Plan one rank's share of the step; returns its duration in ms. Every
 * decoding sequence decodes (budget >= max_running), then prefill chunks
 * go oldest first, then to newly admitted requests. */
static double plan_rank(sim_state *s, uint32_t rank_index)
{
    sim_rank *r = &s->ranks[rank_index];
    uint32_t decoding = r->num_decoding;
    uint32_t budget = s->cluster->token_budget - decoding;
    uint64_t prefill = 0;
    double capacity = (double)r->kv.capacity * s->cluster->block_size;
    double u = capacity > 0 ? (double)r->kv_tokens / capacity : 0;
    for (uint32_t i = 0; i < r->num_prefilling; i++) {
        sim_seq *seq = r->prefilling[i];
        uint32_t c = seq->target - seq->computed;
        seq->chunk = c < budget ? c : budget;
        budget -= seq->chunk;
        prefill += seq->chunk;
    }
    admit_waiting(s, rank_index, budget, &prefill);
    r->step_decoding = decoding;
    return sim_step_ms(s->cluster, prefill, decoding, u > 1 ? 1 : u);
}

int32_t sim_engine_start_step(sim_state *s, uint32_t unit)
{
    sim_worker *w = &s->units[unit];
    double ms = 0;
    for (uint32_t k = 0; k < w->num_ranks; k++) {
        double t = plan_rank(s, w->first_rank + k);
        if (t > ms)
            ms = t;
    }
    if (ms <= 0) {
        w->stepping = 0;
        return 0;
    }
    w->stepping = 1;
    int64_t dur = (int64_t)(ms * 1e6 + 0.5);
    return sim_heap_push(&s->heap, s->now_ns + (dur > 0 ? dur : 1), SIM_EV_STEP_END,
                         unit);
}

void sim_engine_wake(sim_state *s, uint32_t unit)
{
    sim_worker *w = &s->units[unit];
    if (w->stepping || w->pending)
        return;
    w->pending = 1;
    s->pending[s->num_pending++] = unit;
}

int32_t sim_engine_start_pending(sim_state *s)
{
    int32_t rc = 0;
    for (uint32_t i = 0; i < s->num_pending; i++) {
        sim_worker *w = &s->units[s->pending[i]];
        w->pending = 0;
        if (rc == 0 && !w->stepping)
            rc = sim_engine_start_step(s, s->pending[i]);
    }
    s->num_pending = 0;
    return rc;
}

static void finish_seq(sim_state *s, sim_rank *r, sim_seq *seq)
{
    seq->generated = seq->osl;
    double e2e = (double)(s->now_ns - seq->arrival_ns) / 1e6;
    sim_acc_finished(&s->acc[0], s->now_ns, e2e, seq->generated);
    if (s->num_acc > 1)
        sim_acc_finished(&s->acc[1 + seq->phase], s->now_ns, e2e, seq->generated);
    sim_kv_release(&r->kv, seq->slots, seq->num_blocks, seq->private_blocks);
    r->kv_tokens -= (uint64_t)seq->target + seq->osl;
    r->load_tokens -= (uint64_t)seq->isl + seq->osl;
    sim_router_finished(s, seq);
    s->in_flight--;
    free(seq);
}

static void first_token(sim_state *s, uint32_t rank_index, sim_seq *seq)
{
    sim_rank *r = &s->ranks[rank_index];
    seq->generated = 1;
    r->load_tokens++;
    r->kv_tokens++;
    double ttft = (double)(s->now_ns - seq->arrival_ns) / 1e6;
    sim_acc_first_token(&s->acc[0], ttft);
    if (s->num_acc > 1)
        sim_acc_first_token(&s->acc[1 + seq->phase], ttft);
    if (s->args->observer && s->args->observer->on_ttft)
        s->args->observer->on_ttft(s->args->observer->ctx, ttft);
    /* Blocks found cached were announced when first computed. */
    for (uint32_t b = seq->match; b < seq->num_blocks; b++)
        sim_router_kv_event(s, rank_index, seq->blocks[b], 1);
    sim_router_first_token(s, seq);
}

/* Apply one rank's step: one token for every decoding sequence (those
 * whose last token this was finish), then prefill progress and first
 * tokens. Keeps the admission order of the sequences still in prefill. */
static void apply_rank(sim_state *s, uint32_t rank_index)
{
    sim_rank *r = &s->ranks[rank_index];
    r->steps++;
    r->kv_tokens += r->step_decoding;
    r->load_tokens += r->step_decoding;
    r->step_decoding = 0;
    while (r->num_decoding > 0 && r->decoding[0]->finish_step <= r->steps)
        finish_seq(s, r, heap_pop(r));
    uint32_t kept = 0;
    for (uint32_t i = 0; i < r->num_prefilling; i++) {
        sim_seq *seq = r->prefilling[i];
        seq->computed += seq->chunk;
        r->prefill_backlog -= seq->chunk;
        r->kv_tokens += seq->chunk;
        seq->chunk = 0;
        if (seq->computed < seq->target) {
            r->prefilling[kept++] = seq;
            continue;
        }
        first_token(s, rank_index, seq);
        if (seq->osl <= 1) {
            finish_seq(s, r, seq);
            continue;
        }
        /* It decodes in each of the next osl - 1 steps. */
        seq->finish_step = r->steps + seq->osl - 1;
        heap_push(r, seq);
    }
    r->num_prefilling = kept;
}

void sim_engine_end_step(sim_state *s, uint32_t unit)
{
    sim_worker *w = &s->units[unit];
    for (uint32_t k = 0; k < w->num_ranks; k++)
        apply_rank(s, w->first_rank + k);
    w->stepping = 0;
}
