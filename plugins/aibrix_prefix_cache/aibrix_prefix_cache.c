// SPDX-License-Identifier: Apache-2.0
/*
 * aibrix_prefix_cache -- AIBrix's routing algorithm `prefix-cache`, as a
 * wsel plugin. Ported from vllm-project/aibrix at e3e10f9e4aeb,
 * pkg/plugins/gateway/algorithms/prefix_cache.go (routeOriginal,
 * getTargetPodListOnLoadImbalance, getTargetPodFromMatchedPods),
 * least_request.go and util.go; pkg/utils/prefixcacheindexer/hash.go for
 * the match percentage. docs/policies.md says how each input maps.
 *
 * What it does, a row's load being its requests in flight:
 *   1. imbalance: when max - min load > imbalance_abs_count, only the
 *      least loaded rows stay candidates;
 *   2. a candidate matches with percent = 100 * cached blocks / request
 *      blocks (integer) > 0; the best match whose load is at most
 *      mean + std_dev_factor * sd (over every eligible row; sd with n - 1)
 *      wins: highest percent, then least loaded, then at random;
 *   3. no such match: the least loaded eligible row, ties at random.
 * Defaults are AIBrix's (AIBRIX_PREFIX_CACHE_POD_RUNNING_REQUEST_
 * IMBALANCE_ABS_COUNT = 8, AIBRIX_PREFIX_CACHE_STANDARD_DEVIATION_FACTOR
 * = 1).
 *
 * Stateless and safe to call concurrently; select allocates nothing.
 */
#include <math.h>
#include <stdlib.h>

#include "row_load.h"
#include "wsel.h"

enum { P_ABS, P_SD, PC_NUM_PARAMS };

static const wsel_param_def pc_params[] = {
    [P_ABS] = {.name = "imbalance_abs_count",
               .doc = "requests in flight by which max exceeds min before only the "
                      "least loaded rows are candidates (AIBrix default)",
               .type = WSEL_PARAM_INT,
               .default_value = 8,
               .min_value = 0,
               .max_value = 1e9},
    [P_SD] = {.name = "std_dev_factor",
              .doc = "a matched row is taken while its load is at most mean + this "
                     "many standard deviations (AIBrix default)",
              .type = WSEL_PARAM_INT,
              .default_value = 1,
              .min_value = 0,
              .max_value = 1000},
};

typedef struct prefix_cache {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    uint64_t abs;
    double sd_factor;
} prefix_cache;

/* [control thread] */
static int32_t pc_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL ||
        num_params != PC_NUM_PARAMS)
        return WSEL_EINVAL;
    prefix_cache *p = malloc(sizeof(*p));
    if (p == NULL)
        return WSEL_ENOMEM;
    p->host = host;
    p->abs = (uint64_t)params[P_ABS];
    p->sd_factor = params[P_SD];
    *out_instance = p;
    return 0;
}

/* [control thread] */
static void pc_destroy(void *instance)
{
    free(instance);
}

/* mean + factor * sample standard deviation of the candidates' loads. */
static double load_bound(const prefix_cache *p, const wsel_table *t, uint8_t skip,
                         const row_load *l)
{
    double mean = (double)l->sum / l->count, squares = 0.0;
    if (l->count <= 1)
        return mean;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (t->flags[i] & skip)
            continue;
        double d = t->active_requests[i] - mean;
        squares += d * d;
    }
    return mean + p->sd_factor * sqrt(squares / (l->count - 1));
}

/* -1, 0 or 1 as row i (match percent pi) ranks before, level with or
 * after row b (percent pb): higher percent first, then fewer requests. */
static int rank_order(const wsel_table *t, uint32_t i, uint32_t pi, uint32_t b,
                      uint32_t pb)
{
    if (pi != pb)
        return pi > pb ? -1 : 1;
    uint32_t x = t->active_requests[i], y = t->active_requests[b];
    return (x > y) - (x < y);
}

/* The best matched candidate within the load bound, or ROW_LOAD_NONE. */
static uint32_t best_match(const prefix_cache *p, const wsel_request *r,
                           const wsel_table *t, uint8_t skip, const row_load *l)
{
    if (r->num_block_hashes == 0)
        return ROW_LOAD_NONE;
    int imbalanced = l->max - l->min > p->abs;
    double bound = load_bound(p, t, skip, l);
    uint32_t best = ROW_LOAD_NONE, best_percent = 0, ties = 0;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if ((t->flags[i] & skip) || (imbalanced && t->active_requests[i] != l->min))
            continue;
        uint64_t blocks = t->overlap_blocks[i];
        uint32_t percent = (uint32_t)(blocks * 100 / r->num_block_hashes);
        if (percent == 0 || t->active_requests[i] > bound)
            continue;
        int order = best == ROW_LOAD_NONE ? -1 : rank_order(t, i, percent, best, best_percent);
        if (order < 0) {
            best = i;
            best_percent = percent;
            ties = 1;
        } else if (order == 0 && row_load_take_tie(p->host, r->rng, &ties)) {
            best = i;
        }
    }
    return best;
}

/* [select thread, concurrent] */
static int32_t pc_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    const prefix_cache *p = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(p->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    row_load load;
    row_load_scan(table, skip, &load);
    if (load.count == 0)
        return WSEL_ENOCANDIDATE;
    uint32_t row = best_match(p, request, table, skip, &load);
    uint32_t reason = WSEL_REASON_STICKY;
    if (row == ROW_LOAD_NONE) {
        row = row_load_least_active(p->host, table, skip, 0, request->rng);
        reason = WSEL_REASON_CHEAPEST;
    }
    wsel_choice_answer(choice, row, reason);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "aibrix_prefix_cache",
    .version = "1.0.0",
    .description = "AIBrix's prefix-cache: the best prefix match not above mean + 1 sd "
                   "of load, least-request when none or when load is uneven",
    .params = pc_params,
    .num_params = PC_NUM_PARAMS,
    .param_def_size = sizeof(wsel_param_def),
    .create = pc_create,
    .destroy = pc_destroy,
    .select = pc_select,
};
