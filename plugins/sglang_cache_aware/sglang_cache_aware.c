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
 *   - dp_rank = row (smg's --dp-aware: every rank its own worker, as
 *     `url@rank`), or min_tokens (a worker's ranks behind one URL: the
 *     policy above runs over workers, a worker's load the sum of its
 *     candidate ranks' and its match their deepest, then smg's
 *     MinimumTokensPolicy takes the worker's rank with the fewest active
 *     tokens, ties to the lowest rank).
 *
 * Stateless and safe to call concurrently; select allocates nothing.
 */
#include <stdlib.h>

#include "row_load.h"
#include "wsel.h"

#define CA_IMBALANCE_MEAN_GATE    0u
#define CA_IMBALANCE_FLEET_SPREAD 1u

#define CA_DP_ROW        0u
#define CA_DP_MIN_TOKENS 1u

static const char *const ca_imbalance_names[] = {"mean_gate", "fleet_spread", NULL};
static const char *const ca_dp_names[] = {"row", "min_tokens", NULL};

enum { P_THRESHOLD, P_ABS, P_REL, P_IMBALANCE, P_DP_RANK, CA_NUM_PARAMS };

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
    [P_DP_RANK] = {.name = "dp_rank",
                   .doc = "row: each rank is a worker (smg --dp-aware); min_tokens: "
                          "choose the worker, then its rank with the fewest active "
                          "tokens (smg's dp_min_token)",
                   .type = WSEL_PARAM_ENUM,
                   .default_value = CA_DP_ROW,
                   .min_value = CA_DP_ROW,
                   .max_value = CA_DP_MIN_TOKENS,
                   .choices = ca_dp_names},
};

typedef struct cache_aware {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    double threshold, rel;
    uint64_t abs;
    uint32_t imbalance; /* CA_IMBALANCE_* */
    uint32_t dp_rank;   /* CA_DP_* */
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
    c->dp_rank = (uint32_t)params[P_DP_RANK];
    *out_instance = c;
    return 0;
}

/* [control thread] */
static void ca_destroy(void *instance)
{
    free(instance);
}

/* What the policy sees of one worker: a row, or (min_tokens) a group. */
typedef struct ca_unit {
    int candidate;    /* a row, or some row of the group, is a candidate */
    uint32_t load;    /* requests in flight (a group's: its candidates' sum) */
    uint32_t overlap; /* cached prefix blocks (a group's: its deepest) */
} ca_unit;

static uint32_t unit_count(const cache_aware *c, const wsel_table *t)
{
    return c->dp_rank == CA_DP_ROW ? t->num_rows : t->num_groups;
}

static void unit_at(const cache_aware *c, const wsel_table *t, uint8_t skip, uint32_t i,
                    ca_unit *u)
{
    if (c->dp_rank == CA_DP_ROW) {
        u->candidate = !(t->flags[i] & skip);
        u->load = t->active_requests[i];
        u->overlap = t->overlap_blocks[i];
        return;
    }
    uint32_t first = t->group_first_row[i], end = first + t->group_row_count[i];
    uint64_t load = 0;
    *u = (ca_unit){0, 0, 0};
    for (uint32_t r = first; r < end; r++) {
        if (t->flags[r] & skip)
            continue;
        u->candidate = 1;
        load += t->active_requests[r];
        u->overlap = t->overlap_blocks[r] > u->overlap ? t->overlap_blocks[r] : u->overlap;
    }
    u->load = load < UINT32_MAX ? (uint32_t)load : UINT32_MAX;
}

/* The candidates' loads (as row_load_scan) and their deepest match. */
static uint32_t unit_scan(const cache_aware *c, const wsel_table *t, uint8_t skip,
                          row_load *out)
{
    row_load l = {UINT32_MAX, 0, 0, 0};
    uint32_t deepest = 0;
    for (uint32_t i = 0, n = unit_count(c, t); i < n; i++) {
        ca_unit u;
        unit_at(c, t, skip, i, &u);
        if (!u.candidate)
            continue;
        l.min = u.load < l.min ? u.load : l.min;
        l.max = u.load > l.max ? u.load : l.max;
        l.sum += u.load;
        l.count++;
        deepest = u.overlap > deepest ? u.overlap : deepest;
    }
    if (l.count == 0)
        l.min = 0;
    *out = l;
    return deepest;
}

/* The least loaded candidate unit with at least `min_overlap` blocks,
 * ties uniform at random (row_load_least_active over units); *load is
 * its load. ROW_LOAD_NONE when none qualifies. */
static uint32_t unit_least(const cache_aware *c, const wsel_table *t, uint8_t skip,
                           uint32_t min_overlap, wsel_rng *rng, uint32_t *load)
{
    uint32_t best = ROW_LOAD_NONE, ties = 0;
    for (uint32_t i = 0, n = unit_count(c, t); i < n; i++) {
        ca_unit u;
        unit_at(c, t, skip, i, &u);
        if (!u.candidate || u.overlap < min_overlap)
            continue;
        if (best == ROW_LOAD_NONE || u.load < *load) {
            best = i;
            *load = u.load;
            ties = 1;
        } else if (u.load == *load && row_load_take_tie(c->host, rng, &ties)) {
            best = i;
        }
    }
    return best;
}

/* The row answering for unit `i`: the row itself, or smg's
 * MinimumTokensPolicy over the group's candidates: the fewest active
 * tokens (decode_blocks), ties to the lowest rank. */
static uint32_t unit_row(const cache_aware *c, const wsel_table *t, uint8_t skip, uint32_t i)
{
    if (c->dp_rank == CA_DP_ROW)
        return i;
    uint32_t first = t->group_first_row[i], end = first + t->group_row_count[i];
    uint32_t best = ROW_LOAD_NONE;
    for (uint32_t r = first; r < end; r++)
        if (!(t->flags[r] & skip) &&
            (best == ROW_LOAD_NONE || t->decode_blocks[r] < t->decode_blocks[best] ||
             (t->decode_blocks[r] == t->decode_blocks[best] && t->dp_rank[r] < t->dp_rank[best])))
            best = r;
    return best;
}

/* sgl-router's test: max - min > abs and max > rel * min. */
static int fleet_imbalanced(const cache_aware *c, const row_load *l)
{
    return l->max - l->min > c->abs && (double)l->max > (double)l->min * c->rel;
}

/* smg's gate on the unit a match chose: load > mean * rel and
 * load > mean + abs. */
static int unit_over_gate(const cache_aware *c, const row_load *l, uint32_t load)
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

/* The unit chosen and why (cache_aware's order over units). */
static uint32_t ca_decide(const cache_aware *c, const wsel_request *request,
                          const wsel_table *t, uint8_t skip, uint32_t *reason)
{
    row_load load;
    uint32_t deepest = unit_scan(c, t, skip, &load);
    uint32_t least_load = 0, matched_load = 0;
    uint32_t least = unit_least(c, t, skip, 0, request->rng, &least_load);
    *reason = WSEL_REASON_CHEAPEST;
    if (least == ROW_LOAD_NONE)
        return least;
    if (c->imbalance == CA_IMBALANCE_FLEET_SPREAD && fleet_imbalanced(c, &load))
        return least;
    if (deepest == 0 || !(match_rate(request, deepest) > c->threshold))
        return least;
    uint32_t unit = unit_least(c, t, skip, deepest, request->rng, &matched_load);
    if (c->imbalance == CA_IMBALANCE_MEAN_GATE && unit_over_gate(c, &load, matched_load)) {
        *reason = WSEL_REASON_SPILLED;
        return least;
    }
    *reason = WSEL_REASON_STICKY;
    return unit;
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
    uint32_t reason;
    uint32_t unit = ca_decide(c, request, table, skip, &reason);
    if (unit == ROW_LOAD_NONE)
        return WSEL_ENOCANDIDATE;
    wsel_choice_answer(choice, unit_row(c, table, skip, unit), reason);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "sglang_cache_aware",
    .version = "1.1.0",
    .description = "SGLang's cache_aware: follow the deepest cached prefix above a "
                   "match threshold, shortest queue when load is uneven",
    .params = ca_params,
    .num_params = CA_NUM_PARAMS,
    .param_def_size = sizeof(wsel_param_def),
    .create = ca_create,
    .destroy = ca_destroy,
    .select = ca_select,
};
