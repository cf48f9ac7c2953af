// SPDX-License-Identifier: Apache-2.0
/*
 * least_active.c -- an out-of-tree wsel plugin, built against wsel.h alone.
 *
 * Policy: send the request to the rank with the fewest requests in flight;
 * among ranks within `slack` requests of that minimum, take the lowest
 * default cost (the KV-aware one), so a little imbalance buys cache hits.
 * Busy ranks are avoided unless every eligible rank is busy.
 *
 * ABI 1.1 hooks, optional (a 1.0 host never calls them): a score function
 * (requests in flight per rank, lower better, for a composing policy such
 * as `pipeline`), the choice's explanation (reason code), and an outcome
 * callback that counts what finished (examples/outcome-learner shows one
 * that changes its answers from outcomes).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "wsel.h"

struct least_active {
    uint64_t slack;
    /* Outcomes seen and how many failed. Atomic: with
     * WSEL_CAP_CONCURRENT_SELECT, outcomes may arrive on several threads. */
    atomic_uint_fast64_t finished, failed;
};

static const wsel_param_def least_active_params[] = {
    {
        .name = "slack",
        .doc = "ranks within this many active requests of the least loaded tie; "
               "the lowest cost among them wins",
        .type = WSEL_PARAM_INT,
        .default_value = 0.0,
        .min_value = 0.0,
        .max_value = 1024.0,
    },
};

static int32_t least_active_create(const wsel_host_api *host, const double *params,
                                   uint32_t num_params, void **out_instance)
{
    (void)host;
    if (num_params != 1)
        return WSEL_EINVAL;
    struct least_active *self = malloc(sizeof(*self));
    if (self == NULL)
        return WSEL_ENOMEM;
    self->slack = (uint64_t)params[0];
    atomic_init(&self->finished, 0);
    atomic_init(&self->failed, 0);
    *out_instance = self;
    return 0;
}

static void least_active_destroy(void *instance)
{
    free(instance);
}

/* Fewest active requests among rows not flagged with `skip`, or UINT64_MAX. */
static uint64_t least_active_minimum(const wsel_table *t, uint8_t skip)
{
    uint64_t least = UINT64_MAX;
    for (uint32_t i = 0; i < t->num_rows; i++)
        if ((t->flags[i] & skip) == 0 && t->active_requests[i] < least)
            least = t->active_requests[i];
    return least;
}

static int32_t least_active_select(void *instance, const wsel_request *request,
                                   const wsel_table *t, wsel_choice *choice)
{
    const struct least_active *self = instance;
    (void)request;
    uint8_t skip = WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
    uint64_t least = least_active_minimum(t, skip);
    if (least == UINT64_MAX) {
        skip = WSEL_ROW_EXCLUDED;
        least = least_active_minimum(t, skip);
    }
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if ((t->flags[i] & skip) != 0 || t->active_requests[i] > least + self->slack)
            continue;
        if (best == UINT32_MAX || t->cost[i] < t->cost[best])
            best = i;
    }
    if (best == UINT32_MAX)
        return WSEL_ENOCANDIDATE;
    choice->row = best;
    /* The explanation (ABI 1.1): write it only when the host's choice has
     * room for it (a 1.0 host's does not). */
    if (WSEL_CHOICE_HAS(choice, reason))
        choice->reason =
            skip & WSEL_ROW_BUSY ? WSEL_REASON_CHEAPEST : WSEL_REASON_ALL_BUSY;
    return 0;
}

/* Score (ABI 1.1): one finite value per row, lower better, the table left
 * untouched, no allocation. Here: requests in flight, what select
 * minimises first (the slack and the cost tie-break are select's own). */
static int32_t least_active_score(void *instance, const wsel_request *request,
                                  const wsel_table *t, double *scores)
{
    (void)instance;
    (void)request;
    for (uint32_t i = 0; i < t->num_rows; i++)
        scores[i] = (double)t->active_requests[i];
    return 0;
}

/* Outcome (ABI 1.1): a routed request finished; `o` says what it cost
 * (TTFT, end to end, tokens, the rank). No allocation, bounded state. */
static void least_active_outcome(void *instance, const wsel_outcome *o)
{
    struct least_active *self = instance;
    atomic_fetch_add_explicit(&self->finished, 1, memory_order_relaxed);
    if (o->flags & WSEL_OUTCOME_FAILED)
        atomic_fetch_add_explicit(&self->failed, 1, memory_order_relaxed);
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "least_active",
    .version = "1.0.0",
    .description = "fewest requests in flight, ties (within slack) to the lowest cost",
    .params = least_active_params,
    .num_params = sizeof(least_active_params) / sizeof(least_active_params[0]),
    .param_def_size = sizeof(wsel_param_def),
    .create = least_active_create,
    .destroy = least_active_destroy,
    .select = least_active_select,
    .score = least_active_score,                /* optional, ABI 1.1 */
    .on_request_outcome = least_active_outcome, /* optional, ABI 1.1 */
};
