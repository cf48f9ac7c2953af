// SPDX-License-Identifier: Apache-2.0
/*
 * llmd_default -- llm-d's default scheduling profile, as a wsel plugin.
 * Ported from llm-d/llm-d-inference-scheduler at 520af47896e5:
 * pkg/epp/config/loader/defaults.go (the profile and its weights),
 * pkg/epp/framework/plugins/scheduling/scorer/{queuedepth,
 * kvcacheutilization,prefix} and picker/maxscore. docs/policies.md says
 * how each metric maps onto the table.
 *
 * What it does: three scorers, each in [0, 1] with higher better, summed
 * with their weights (2, 2, 3 as llm-d ships them); the highest sum wins,
 * exact ties at random (llm-d shuffles, then sorts stably).
 *   queue   (max - q) / (max - min) over the candidates, 1 when all are
 *           equal; q = requests in flight.
 *   kv      1 - KV usage, usage = decode_blocks / kv_capacity_blocks
 *           (capped at 1; 0 when the capacity is unknown).
 *   prefix  cached prefix blocks / the request's blocks.
 *
 * Stateless and safe to call concurrently; select allocates nothing.
 * score() answers minus the weighted sum (lower is better).
 */
#include <stdlib.h>

#include "row_load.h"
#include "wsel.h"

enum { P_QUEUE, P_KV, P_PREFIX, LLMD_NUM_PARAMS };

static const wsel_param_def llmd_params[] = {
    [P_QUEUE] = {.name = "queue_weight",
                 .doc = "weight of queue-scorer (fewest requests in flight)",
                 .type = WSEL_PARAM_DOUBLE,
                 .default_value = 2.0,
                 .min_value = 0.0,
                 .max_value = 1e6},
    [P_KV] = {.name = "kv_cache_weight",
              .doc = "weight of kv-cache-utilization-scorer (1 - KV usage)",
              .type = WSEL_PARAM_DOUBLE,
              .default_value = 2.0,
              .min_value = 0.0,
              .max_value = 1e6},
    [P_PREFIX] = {.name = "prefix_weight",
                  .doc = "weight of prefix-cache-scorer (cached share of the "
                         "request's blocks)",
                  .type = WSEL_PARAM_DOUBLE,
                  .default_value = 3.0,
                  .min_value = 0.0,
                  .max_value = 1e6},
};

typedef struct llmd {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    double weight[LLMD_NUM_PARAMS];
} llmd;

/* [control thread] */
static int32_t llmd_create(const wsel_host_api *host, const double *params,
                           uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL ||
        num_params != LLMD_NUM_PARAMS)
        return WSEL_EINVAL;
    llmd *l = malloc(sizeof(*l));
    if (l == NULL)
        return WSEL_ENOMEM;
    l->host = host;
    for (uint32_t i = 0; i < LLMD_NUM_PARAMS; i++)
        l->weight[i] = params[i];
    *out_instance = l;
    return 0;
}

/* [control thread] */
static void llmd_destroy(void *instance)
{
    free(instance);
}

/* Row i's weighted sum, higher better; `load` spans the candidates. */
static double weighted_sum(const llmd *l, const wsel_request *r, const wsel_table *t,
                           const row_load *load, uint32_t i)
{
    double queue = 1.0;
    if (load->max != load->min)
        queue = ((double)load->max - t->active_requests[i]) / (load->max - load->min);
    double usage = 0.0;
    if (t->kv_capacity_blocks[i] != 0) {
        usage = (double)t->decode_blocks[i] / (double)t->kv_capacity_blocks[i];
        usage = usage < 1.0 ? usage : 1.0;
    }
    double prefix = 0.0;
    if (r->num_block_hashes != 0) {
        prefix = (double)t->overlap_blocks[i] / r->num_block_hashes;
        prefix = prefix < 1.0 ? prefix : 1.0;
    }
    return l->weight[P_QUEUE] * queue + l->weight[P_KV] * (1.0 - usage) +
           l->weight[P_PREFIX] * prefix;
}

/* [select thread, concurrent] The max-score picker. */
static int32_t llmd_select(void *instance, const wsel_request *request,
                           const wsel_table *table, wsel_choice *choice)
{
    const llmd *l = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(l->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    row_load load;
    row_load_scan(table, skip, &load);
    uint32_t best = ROW_LOAD_NONE, ties = 0;
    double best_sum = 0.0;
    for (uint32_t i = 0; i < table->num_rows; i++) {
        if (table->flags[i] & skip)
            continue;
        double sum = weighted_sum(l, request, table, &load, i);
        if (best == ROW_LOAD_NONE || sum > best_sum) {
            best = i;
            best_sum = sum;
            ties = 1;
        } else if (sum == best_sum && row_load_take_tie(l->host, request->rng, &ties)) {
            best = i;
        }
    }
    if (best == ROW_LOAD_NONE)
        return WSEL_ENOCANDIDATE;
    choice->row = best;
    if (WSEL_CHOICE_HAS(choice, reason))
        choice->reason = skip & WSEL_ROW_BUSY ? WSEL_REASON_CHEAPEST : WSEL_REASON_ALL_BUSY;
    if (WSEL_CHOICE_HAS(choice, score)) {
        choice->flags |= WSEL_CHOICE_SCORED;
        choice->score = -best_sum;
    }
    return 0;
}

/* [select thread, concurrent] Minus each row's weighted sum. */
static int32_t llmd_score(void *instance, const wsel_request *request,
                          const wsel_table *table, double *scores)
{
    const llmd *l = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(l->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    row_load load;
    row_load_scan(table, skip, &load);
    if (load.count == 0)
        return WSEL_ENOCANDIDATE;
    for (uint32_t i = 0; i < table->num_rows; i++)
        scores[i] = -weighted_sum(l, request, table, &load, i);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "llmd_default",
    .version = "1.0.0",
    .description = "llm-d's default profile: queue (2), KV usage (2) and prefix "
                   "cache (3) scorers, the highest weighted sum wins",
    .params = llmd_params,
    .num_params = LLMD_NUM_PARAMS,
    .param_def_size = sizeof(wsel_param_def),
    .create = llmd_create,
    .destroy = llmd_destroy,
    .select = llmd_select,
    .score = llmd_score,
};
