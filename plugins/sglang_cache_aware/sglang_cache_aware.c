// SPDX-License-Identifier: Apache-2.0
/*
 * sglang_cache_aware -- SGLang's router policy `cache_aware`, as a wsel
 * plugin. Ported from smg-project/smg (Shepherd Model Gateway, formerly
 * sgl-router), model_gateway/src/policies/cache_aware.rs and main.rs at
 * f8daa8835a8b; the `fleet_spread` test is vllm-project/router's copy,
 * src/policies/cache_aware.rs at 2f2db0d9a6d0. docs/policies.md says how
 * each peer input maps onto the table.
 *
 * What it does, a worker's load being its requests in flight:
 *   - match rate = the deepest cached prefix among the candidates, in
 *     tokens, over the request's tokens. Above `cache_threshold`: the least
 *     loaded of the rows holding that prefix; otherwise the least loaded
 *     row (shortest queue). Ties at random.
 *   - imbalance = mean_gate (smg): the matched row spills to the least
 *     loaded one when its load exceeds both mean * balance_rel_threshold
 *     and mean + balance_abs_threshold. fleet_spread (sgl-router, vLLM's
 *     router): when max - min > abs and max > rel * min over the
 *     candidates, every request takes the least loaded row.
 *
 * Stateless and safe to call concurrently; select allocates nothing.
 */
#include <stdlib.h>

#include "row_load.h"
#include "wsel.h"

#define CA_IMBALANCE_MEAN_GATE    0u
#define CA_IMBALANCE_FLEET_SPREAD 1u

static const char *const ca_imbalance_names[] = {"mean_gate", "fleet_spread", NULL};

enum { P_THRESHOLD, P_ABS, P_REL, P_IMBALANCE, CA_NUM_PARAMS };

static const wsel_param_def ca_params[] = {
    [P_THRESHOLD] = {.name = "cache_threshold",
                     .doc = "share of the prompt's tokens that must be cached on some "
                            "row before the request follows its cache (smg default)",
                     .type = WSEL_PARAM_DOUBLE,
                     .default_value = 0.3,
                     .min_value = 0.0,
                     .max_value = 1.0},
    [P_ABS] = {.name = "balance_abs_threshold",
               .doc = "requests in flight by which load must be uneven before "
                      "shortest-queue takes over (smg default)",
               .type = WSEL_PARAM_INT,
               .default_value = 64,
               .min_value = 0,
               .max_value = 1e9},
    [P_REL] = {.name = "balance_rel_threshold",
               .doc = "ratio by which load must be uneven before shortest-queue "
                      "takes over (smg default)",
               .type = WSEL_PARAM_DOUBLE,
               .default_value = 1.5,
               .min_value = 0.0,
               .max_value = 1e6},
    [P_IMBALANCE] = {.name = "imbalance",
                     .doc = "mean_gate: the matched row against the mean (smg); "
                            "fleet_spread: max against min (sgl-router, vLLM router)",
                     .type = WSEL_PARAM_ENUM,
                     .default_value = CA_IMBALANCE_MEAN_GATE,
                     .min_value = CA_IMBALANCE_MEAN_GATE,
                     .max_value = CA_IMBALANCE_FLEET_SPREAD,
                     .choices = ca_imbalance_names},
};

typedef struct cache_aware {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    double threshold, rel;
    uint64_t abs;
    uint32_t imbalance; /* CA_IMBALANCE_* */
} cache_aware;

/* [control thread] */
static int32_t ca_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL ||
        num_params != CA_NUM_PARAMS)
        return WSEL_EINVAL;
    cache_aware *c = malloc(sizeof(*c));
    if (c == NULL)
        return WSEL_ENOMEM;
    c->host = host;
    c->threshold = params[P_THRESHOLD];
    c->abs = (uint64_t)params[P_ABS];
    c->rel = params[P_REL];
    c->imbalance = (uint32_t)params[P_IMBALANCE];
    *out_instance = c;
    return 0;
}

/* [control thread] */
static void ca_destroy(void *instance)
{
    free(instance);
}

/* sgl-router's test: max - min > abs and max > rel * min. */
static int fleet_imbalanced(const cache_aware *c, const row_load *l)
{
    return l->max - l->min > c->abs && (double)l->max > (double)l->min * c->rel;
}

/* smg's gate on the row a match chose: load > mean * rel and
 * load > mean + abs. */
static int row_over_gate(const cache_aware *c, const row_load *l, uint32_t load)
{
    double mean = (double)l->sum / l->count;
    return load > mean * c->rel && load > mean + (double)c->abs;
}

/* The matched share of the prompt: cached tokens / prompt tokens. */
static double match_rate(const wsel_request *r, uint32_t deepest)
{
    if (r->isl_tokens == 0)
        return 0.0;
    double rate = (double)deepest * r->block_size / r->isl_tokens;
    return rate < 1.0 ? rate : 1.0;
}

/* [select thread, concurrent] */
static int32_t ca_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    const cache_aware *c = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(c->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    row_load load;
    row_load_scan(table, skip, &load);
    uint32_t least = row_load_least_active(c->host, table, skip, 0, request->rng);
    if (least == ROW_LOAD_NONE)
        return WSEL_ENOCANDIDATE;
    if (c->imbalance == CA_IMBALANCE_FLEET_SPREAD && fleet_imbalanced(c, &load)) {
        wsel_choice_answer(choice, least, WSEL_REASON_CHEAPEST);
        return 0;
    }
    uint32_t deepest = row_load_max_overlap(table, skip);
    if (deepest == 0 || !(match_rate(request, deepest) > c->threshold)) {
        wsel_choice_answer(choice, least, WSEL_REASON_CHEAPEST);
        return 0;
    }
    uint32_t row = row_load_least_active(c->host, table, skip, deepest, request->rng);
    if (c->imbalance == CA_IMBALANCE_MEAN_GATE &&
        row_over_gate(c, &load, table->active_requests[row])) {
        wsel_choice_answer(choice, least, WSEL_REASON_SPILLED);
        return 0;
    }
    wsel_choice_answer(choice, row, WSEL_REASON_STICKY);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "sglang_cache_aware",
    .version = "1.0.0",
    .description = "SGLang's cache_aware: follow the deepest cached prefix above a "
                   "match threshold, shortest queue when load is uneven",
    .params = ca_params,
    .num_params = CA_NUM_PARAMS,
    .param_def_size = sizeof(wsel_param_def),
    .create = ca_create,
    .destroy = ca_destroy,
    .select = ca_select,
};
