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
 *   no-hit-lru (pkg/epp/framework/plugins/scheduling/scorer/nohitlru; not
 *           in the default profile, weight 0): for a request no candidate
 *           has cached ("cold"), rows that never took a cold request rank
 *           first in row order, then the others from the least recently
 *           used; score 1 - rank / (n - 1). Warm requests score 0.5.
 *
 * Safe to call concurrently; select allocates nothing. Stateless while
 * no_hit_lru_weight is 0; above it, select records which row took each
 * cold request (hence no WSEL_CAP_STATELESS). score() answers minus the
 * weighted sum (lower is better) and records nothing.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "row_load.h"
#include "sticky_table.h"
#include "wsel.h"

enum { P_QUEUE, P_KV, P_PREFIX, P_LRU, P_LRU_SIZE, LLMD_NUM_PARAMS };

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
    [P_LRU] = {.name = "no_hit_lru_weight",
               .doc = "weight of no-hit-lru-scorer (cold requests to the least "
                      "recently cold-used row); 0: not in the profile (llm-d's default)",
               .type = WSEL_PARAM_DOUBLE,
               .default_value = 0.0,
               .min_value = 0.0,
               .max_value = 1e6},
    [P_LRU_SIZE] = {.name = "lru_size",
                    .doc = "rows no-hit-lru remembers (llm-d's lruSize; its table has "
                           "4 slots a row)",
                    .type = WSEL_PARAM_INT,
                    .default_value = 1024,
                    .min_value = 1,
                    .max_value = 1 << 20},
};

typedef struct llmd {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    double weight[P_LRU + 1];
    sticky_table lru;            /* row fingerprint -> its last cold pick's stamp */
    _Atomic uint32_t lru_clock;  /* the last stamp given */
} llmd;

/* [control thread] */
static int32_t llmd_create(const wsel_host_api *host, const double *params,
                           uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL ||
        num_params != LLMD_NUM_PARAMS)
        return WSEL_EINVAL;
    llmd *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return WSEL_ENOMEM;
    l->host = host;
    for (uint32_t i = 0; i <= P_LRU; i++)
        l->weight[i] = params[i];
    atomic_init(&l->lru_clock, 0);
    if (l->weight[P_LRU] > 0) {
        int32_t rc = sticky_table_init(&l->lru, 4 * (uint32_t)params[P_LRU_SIZE]);
        if (rc < 0) {
            free(l);
            return rc;
        }
    }
    *out_instance = l;
    return 0;
}

/* [control thread] */
static void llmd_destroy(void *instance)
{
    llmd *l = instance;
    sticky_table_free(&l->lru);
    free(l);
}

static uint64_t row_key(const wsel_table *t, uint32_t row)
{
    return mix64(sticky_worker_mix(t->worker_id[row]) + t->dp_rank[row]);
}

/* no-hit-lru's score for candidate i of `n` on a cold request: rows never
 * picked cold rank first in row order, then the others oldest first. */
static double lru_score(const llmd *l, const wsel_table *t, uint8_t skip, uint32_t n,
                        uint32_t i)
{
    if (n <= 1)
        return 1.0;
    uint32_t stamp = sticky_table_get(&l->lru, row_key(t, i)), rank = 0;
    for (uint32_t j = 0; j < t->num_rows; j++) {
        if ((t->flags[j] & skip) || j == i)
            continue;
        uint32_t other = sticky_table_get(&l->lru, row_key(t, j));
        if (stamp == 0 ? (other == 0 && j < i) : (other == 0 || other < stamp))
            rank++;
    }
    double score = 1.0 - (double)rank / (n - 1);
    return score > 0.0 ? score : 0.0;
}

/* What every row's sum reads: the candidates, their loads, and whether
 * the request is cold (no candidate holds any of its blocks). */
typedef struct llmd_view {
    uint8_t skip;
    int cold;
    row_load load;
} llmd_view;

/* Fills `v` for one call; WSEL_ENOCANDIDATE when no row is a candidate. */
static int32_t view_scan(const llmd *l, const wsel_table *t, llmd_view *v)
{
    int32_t rc = wsel_call_eligible_skip(l->host, t->flags, t->num_rows, &v->skip, NULL);
    if (rc < 0)
        return rc;
    row_load_scan(t, v->skip, &v->load);
    v->cold = row_load_max_overlap(t, v->skip) == 0;
    return v->load.count != 0 ? 0 : WSEL_ENOCANDIDATE;
}

/* Row i's weighted sum, higher better. */
static double weighted_sum(const llmd *l, const wsel_request *r, const wsel_table *t,
                           const llmd_view *v, uint32_t i)
{
    const row_load *load = &v->load;
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
    double sum = l->weight[P_QUEUE] * queue + l->weight[P_KV] * (1.0 - usage) +
                 l->weight[P_PREFIX] * prefix;
    if (l->weight[P_LRU] > 0)
        sum += l->weight[P_LRU] *
               (v->cold ? lru_score(l, t, v->skip, load->count, i) : 0.5);
    return sum;
}

/* no-hit-lru's PreRequest: a cold request's row becomes the most recent. */
static void lru_record(llmd *l, const wsel_table *t, const llmd_view *v, uint32_t row)
{
    if (!(l->weight[P_LRU] > 0) || !v->cold)
        return;
    uint32_t stamp = atomic_fetch_add_explicit(&l->lru_clock, 1, memory_order_relaxed) + 1;
    if (stamp != 0) /* 0 means "never"; a wrapped clock skips it */
        sticky_table_put(&l->lru, row_key(t, row), stamp);
}

/* [select thread, concurrent] The max-score picker. */
static int32_t llmd_select(void *instance, const wsel_request *request,
                           const wsel_table *table, wsel_choice *choice)
{
    llmd *l = instance;
    llmd_view v;
    int32_t rc = view_scan(l, table, &v);
    if (rc < 0)
        return rc;
    uint32_t best = ROW_LOAD_NONE, ties = 0;
    double best_sum = 0.0;
    for (uint32_t i = 0; i < table->num_rows; i++) {
        if (table->flags[i] & v.skip)
            continue;
        double sum = weighted_sum(l, request, table, &v, i);
        if (best == ROW_LOAD_NONE || sum > best_sum) {
            best = i;
            best_sum = sum;
            ties = 1;
        } else if (sum == best_sum && row_load_take_tie(l->host, request->rng, &ties)) {
            best = i;
        }
    }
    lru_record(l, table, &v, best);
    wsel_choice_answer(choice, best,
                       wsel_reason_unless_all_busy(v.skip, WSEL_REASON_CHEAPEST));
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
    llmd_view v;
    int32_t rc = view_scan(l, table, &v);
    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < table->num_rows; i++)
        scores[i] = -weighted_sum(l, request, table, &v, i);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT,
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
