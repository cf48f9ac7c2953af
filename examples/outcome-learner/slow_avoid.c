// SPDX-License-Identifier: Apache-2.0
/*
 * slow_avoid.c -- a plugin that learns from outcomes, built against wsel.h
 * alone (ABI 1.1: on_request_outcome, score, the choice's explanation).
 *
 * Policy: Dynamo's default cost, but a rank whose time to first token has
 * been slow lately is avoided. Each finished request's TTFT updates an
 * exponentially weighted moving average (EWMA) for the rank it ran on,
 *   ewma += alpha * (ttft - ewma).
 * A rank whose EWMA exceeds `slow_factor` times the mean EWMA of the
 * table's measured ranks is "slow": select takes the lowest cost among the
 * other eligible ranks (slow ones only when nothing else is eligible).
 * Ranks not measured yet are never slow, so new ranks get traffic.
 *
 * State is bounded: a fixed open-addressing table of (worker, dp_rank) ->
 * EWMA with `max_ranks` slots allocated in create(); a rank that finds it
 * full is simply not learned, and on_topology_changed keeps only the
 * ranks still present. select and score allocate nothing. The host
 * serialises select, score and outcomes on one instance (no
 * WSEL_CAP_CONCURRENT_SELECT), so no locks or atomics are needed.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <wsel.h>

#if WSEL_ABI_MINOR < 1
#error "slow_avoid needs wsel.h of ABI 1.1 or later (on_request_outcome)"
#endif

/* Reason code of this plugin: the cheapest rank once slow ones were left
 * out (documented, as codes from WSEL_REASON_PLUGIN up must be). */
#define SLOW_AVOID_REASON_SLOW_SKIPPED (WSEL_REASON_PLUGIN + 0u)

typedef struct slot {
    uint64_t worker_id;
    uint32_t dp_rank;
    uint32_t used;
    double ewma_us;
} slot;

typedef struct slow_avoid {
    double alpha, slow_factor;
    uint32_t mask;            /* slots - 1, slots a power of two */
    uint32_t count, max_used; /* ranks learned; at most max_ranks */
    slot *slots;
} slow_avoid;

static const wsel_param_def slow_avoid_params[] = {
    {.name = "alpha",
     .doc = "weight of the newest TTFT in the per-rank moving average",
     .type = WSEL_PARAM_DOUBLE,
     .default_value = 0.2,
     .min_value = 0.001,
     .max_value = 1.0},
    {.name = "slow_factor",
     .doc = "a rank is slow above this multiple of the mean TTFT average",
     .type = WSEL_PARAM_DOUBLE,
     .default_value = 1.5,
     .min_value = 1.0,
     .max_value = 100.0},
    {.name = "max_ranks",
     .doc = "ranks whose TTFT is remembered (memory is fixed at create)",
     .type = WSEL_PARAM_INT,
     .default_value = 4096,
     .min_value = 1,
     .max_value = 1048576},
};

static int32_t sa_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    (void)host;
    if (num_params != 3)
        return WSEL_EINVAL;
    uint32_t slots = 2;
    while (slots < 2 * (uint32_t)params[2]) /* load factor <= 1/2 */
        slots *= 2;
    slow_avoid *self = malloc(sizeof(*self));
    slot *table = calloc(slots, sizeof(slot));
    if (self == NULL || table == NULL) {
        free(self);
        free(table);
        return WSEL_ENOMEM;
    }
    self->alpha = params[0];
    self->slow_factor = params[1];
    self->mask = slots - 1;
    self->count = 0;
    self->max_used = (uint32_t)params[2]; /* so probes stay short: half full */
    self->slots = table;
    *out_instance = self;
    return 0;
}

static void sa_destroy(void *instance)
{
    slow_avoid *self = instance;
    free(self->slots);
    free(self);
}

/* In slots[0..mask]: the slot of (worker, rank), or the empty slot where
 * it would go, or NULL when they are full without it. Linear probing. */
static slot *find(slot *slots, uint32_t mask, uint64_t worker, uint32_t rank)
{
    uint64_t h = (worker * 0x9e3779b97f4a7c15ull) ^ (rank * 0xbf58476d1ce4e5b9ull);
    for (uint32_t k = 0; k <= mask; k++) {
        slot *s = &slots[(h + k) & mask];
        if (!s->used || (s->worker_id == worker && s->dp_rank == rank))
            return s;
    }
    return NULL;
}

/* The rank's EWMA in microseconds, 0 when not measured. */
static double ewma_of(const slow_avoid *self, const wsel_table *t, uint32_t row)
{
    const slot *s = find(self->slots, self->mask, t->worker_id[row], t->dp_rank[row]);
    return s != NULL && s->used ? s->ewma_us : 0.0;
}

/* The EWMA above which a rank is slow: slow_factor x the mean over the
 * table's measured ranks (+inf when none is measured). */
static double slow_threshold(const slow_avoid *self, const wsel_table *t)
{
    double sum = 0;
    uint32_t measured = 0;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        double e = ewma_of(self, t, i);
        sum += e;
        measured += e > 0;
    }
    return measured ? self->slow_factor * sum / measured : INFINITY;
}

/* [select thread] Lowest cost among eligible rows, slow ones last. */
static int32_t sa_select(void *instance, const wsel_request *request, const wsel_table *t,
                         wsel_choice *choice)
{
    const slow_avoid *self = instance;
    (void)request;
    double limit = slow_threshold(self, t);
    uint32_t best = UINT32_MAX;
    int best_slow = 0, skipped = 0, pass = 0;
    for (; pass < 2 && best == UINT32_MAX; pass++) {
        uint8_t skip = pass == 0 ? WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY : WSEL_ROW_EXCLUDED;
        for (uint32_t i = 0; i < t->num_rows; i++) {
            if (t->flags[i] & skip)
                continue;
            int slow = ewma_of(self, t, i) > limit;
            skipped |= slow;
            if (best == UINT32_MAX || slow < best_slow ||
                (slow == best_slow && t->cost[i] < t->cost[best])) {
                best = i;
                best_slow = slow;
            }
        }
    }
    if (best == UINT32_MAX)
        return WSEL_ENOCANDIDATE;
    choice->row = best;
    if (WSEL_CHOICE_HAS(choice, reason)) /* the explanation, on a 1.1 host */
        choice->reason = pass == 2               ? WSEL_REASON_ALL_BUSY
                         : skipped && !best_slow ? SLOW_AVOID_REASON_SLOW_SKIPPED
                                                 : WSEL_REASON_CHEAPEST;
    return 0;
}

/* [select thread] cost / 8, and slow ranks after every other: raised by
 * twice the span of cost / 8 over the table, plus 1. Eighths keep every
 * score finite for any finite costs. */
static int32_t sa_score(void *instance, const wsel_request *request, const wsel_table *t,
                        double *scores)
{
    const slow_avoid *self = instance;
    (void)request;
    double limit = slow_threshold(self, t), lo = t->cost[0], hi = t->cost[0];
    for (uint32_t i = 0; i < t->num_rows; i++) {
        lo = t->cost[i] < lo ? t->cost[i] : lo;
        hi = t->cost[i] > hi ? t->cost[i] : hi;
    }
    double penalty = 2 * (hi / 8 - lo / 8) + 1.0;
    for (uint32_t i = 0; i < t->num_rows; i++)
        scores[i] = t->cost[i] / 8 + (ewma_of(self, t, i) > limit ? penalty : 0.0);
    return 0;
}

/* [select thread] One finished request: fold its TTFT into its rank's EWMA.
 * Failed requests and unmeasured TTFTs teach nothing. No allocation. */
static void sa_outcome(void *instance, const wsel_outcome *o)
{
    slow_avoid *self = instance;
    if (o->ttft_us == 0 || (o->flags & WSEL_OUTCOME_FAILED))
        return;
    slot *s = find(self->slots, self->mask, o->worker_id, o->dp_rank);
    if (s == NULL || (!s->used && self->count == self->max_used))
        return; /* full: this rank is not learned */
    if (!s->used) {
        self->count++;
        *s = (slot){.worker_id = o->worker_id,
                    .dp_rank = o->dp_rank,
                    .used = 1,
                    .ewma_us = (double)o->ttft_us};
        return;
    }
    s->ewma_us += self->alpha * ((double)o->ttft_us - s->ewma_us);
}

/* [control thread] Keep the ranks still in the table: rebuild the slots. */
static void sa_topology(void *instance, const wsel_table *t)
{
    slow_avoid *self = instance;
    slot *old = malloc((self->mask + 1) * sizeof(slot));
    if (old == NULL)
        return; /* keep everything: bounded anyway */
    memcpy(old, self->slots, (self->mask + 1) * sizeof(slot));
    memset(self->slots, 0, (self->mask + 1) * sizeof(slot));
    self->count = 0;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        slot *s = find(old, self->mask, t->worker_id[i], t->dp_rank[i]);
        if (s != NULL && s->used) { /* fits: no more ranks than before */
            *find(self->slots, self->mask, s->worker_id, s->dp_rank) = *s;
            self->count++;
        }
    }
    free(old);
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = 0, /* learns (not stateless); serialised by the host */
    .name = "slow_avoid",
    .version = "1.0.0",
    .description = "lowest cost, avoiding ranks whose recent TTFT is slow (learns "
                   "from outcomes)",
    .params = slow_avoid_params,
    .num_params = sizeof(slow_avoid_params) / sizeof(slow_avoid_params[0]),
    .param_def_size = sizeof(wsel_param_def),
    .create = sa_create,
    .destroy = sa_destroy,
    .select = sa_select,
    .on_topology_changed = sa_topology,
    .score = sa_score,
    .on_request_outcome = sa_outcome,
};
