// SPDX-License-Identifier: Apache-2.0
/*
 * model_greedy.c -- a diagnostic router for the evaluation, not a bundled
 * policy and never installed: it sends each request to the row where the
 * simulator's own engine model (sim/step_model.h, ranks stepping in
 * lockstep) predicts the earliest first token, from the table alone. It
 * knows what no real router knows, the engine's step time exactly, so its
 * figures say how far per-request routing can go on the evaluation's
 * targets (docs/evaluation.md, "How far routing can go";
 * scripts/eval-bound.sh runs it).
 *
 * Prediction for row r of worker w. Every rank i of w has b_i tokens of
 * prefill queued ahead (its prefill_tokens without this request's own
 * uncached tokens u_i) and serves them first come first served,
 * `token_budget` tokens a step; r also has u_r. Step s (from 0) of w
 * prefills c_i(s) = min(budget, max(0, q_i - s * budget)) on each rank,
 * q_i = b_i (+ u_r on r), and lasts
 *     max over ranks i of  prefill_ms(c_i(s)) + (a_i > 0 ? decode_ms(k_i) : 0)
 * where a_i is the rank's active requests and k_i its active KV blocks over
 * its capacity. The request's first token comes at the end of step
 * ceil(q_r / budget) - 1; the prediction is the sum of the steps until
 * then, plus `kv_penalty_ms` when its new blocks do not fit the rank's
 * free KV blocks (it would wait for some to free). Left out: the step in
 * progress, decode tokens' share of the budget, and later arrivals.
 * Past the last step a sibling prefills in, the request's own steps are
 * summed in closed form, so a long queue costs no more than the siblings'.
 *
 * Lowest prediction wins, ties to the lower table cost, then the lower row;
 * busy rows only when every eligible row is busy. O(rows x ranks a worker
 * x steps) a select; no allocation; stateless.
 */
#include <math.h> /* INFINITY */
#include <stdint.h>
#include <stdlib.h>

#include "step_model.h"
#include "wsel.h"

enum { P_TOKEN_BUDGET, P_KV_PENALTY, P_COUNT };

static const wsel_param_def model_greedy_params[P_COUNT] = {
    [P_TOKEN_BUDGET] = {.name = "token_budget",
                        .doc = "prefill tokens a rank's step takes (wsel sim "
                               "--token-budget)",
                        .type = WSEL_PARAM_INT,
                        .default_value = 8192.0,
                        .min_value = 1.0,
                        .max_value = 16777216.0},
    [P_KV_PENALTY] = {.name = "kv_penalty_ms",
                      .doc = "added to the prediction where the request's new blocks do "
                             "not fit the rank's free KV blocks",
                      .type = WSEL_PARAM_DOUBLE,
                      .default_value = 10000.0,
                      .min_value = 0.0,
                      .max_value = 1e9},
};

typedef struct model_greedy {
    uint64_t budget;
    double kv_penalty_ms;
} model_greedy;

static int32_t model_greedy_create(const wsel_host_api *host, const double *params,
                                   uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != P_COUNT)
        return WSEL_EINVAL;
    model_greedy *m = malloc(sizeof(*m));
    if (m == NULL)
        return WSEL_ENOMEM;
    m->budget = (uint64_t)params[P_TOKEN_BUDGET];
    m->kv_penalty_ms = params[P_KV_PENALTY];
    *out_instance = m;
    return 0;
}

static void model_greedy_destroy(void *instance)
{
    free(instance);
}

/* Row i's load without this request. A row without a load record holds
 * Dynamo's defaults for this request alone on an idle rank. */
typedef struct rank_view {
    double queued;   /* prefill tokens ahead of this request */
    double uncached; /* this request's tokens to prefill there */
    double new_blocks;
    double decode_ms;   /* its decode pass, 0 without requests */
    double free_blocks; /* INFINITY when the capacity is unknown */
} rank_view;

static rank_view view_of(const wsel_request *req, const wsel_table *t, uint32_t i)
{
    double bs = (double)req->block_size, overlap = (double)t->overlap_blocks[i];
    double isl = (double)req->isl_tokens;
    double full = req->block_size ? (double)(req->isl_tokens / req->block_size) : 0.0;
    double uncached = isl > overlap * bs ? isl - overlap * bs : 0.0;
    double new_blocks = full > overlap ? full - overlap : 0.0;
    if (t->flags[i] & WSEL_ROW_NO_LOAD) {
        uncached = (double)t->prefill_tokens[i];
        new_blocks = (double)t->decode_blocks[i];
    }
    double prefill = (double)t->prefill_tokens[i], blocks = (double)t->decode_blocks[i];
    double active = blocks > new_blocks ? blocks - new_blocks : 0.0;
    double capacity = (double)t->kv_capacity_blocks[i];
    rank_view v = {.queued = prefill > uncached ? prefill - uncached : 0.0,
                   .uncached = uncached,
                   .new_blocks = new_blocks,
                   .decode_ms = 0.0,
                   .free_blocks = INFINITY};
    if (t->active_requests[i] > 0)
        v.decode_ms =
            sim_poly_decode_ms(capacity > 0 && active < capacity ? active / capacity
                               : capacity > 0                    ? 1.0
                                                                 : 0.0);
    if (capacity > 0)
        v.free_blocks = capacity > active ? capacity - active : 0.0;
    return v;
}

/* Whole steps that q queued tokens take, at least one. */
static uint64_t steps_for(const model_greedy *m, double q)
{
    uint64_t tokens = q > 0 ? (uint64_t)q : 0, budget = m->budget;
    uint64_t n = tokens / budget + (tokens % budget != 0);
    return n ? n : 1;
}

/* The step time of a rank in step s with q tokens queued. */
static double rank_step_ms(const model_greedy *m, const rank_view *v, double q,
                           uint64_t s)
{
    double left = q - (double)s * (double)m->budget;
    double chunk = left <= 0 ? 0.0 : left < (double)m->budget ? left : (double)m->budget;
    return sim_poly_prefill_ms(chunk) + v->decode_ms;
}

/* Predicted TTFT, in ms, of the request on row r of group g: the steps
 * its siblings still prefill in, one by one; after the last of them, its
 * own steps against the siblings' decode passes alone. */
static double predict_ms(const model_greedy *m, const wsel_request *req,
                         const wsel_table *t, uint32_t g, uint32_t r)
{
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    rank_view own = view_of(req, t, r);
    double q = own.queued + own.uncached;
    uint64_t steps = steps_for(m, q), shared = 0;
    double sibling_decode = 0.0;
    for (uint32_t i = first; i < first + count; i++) {
        if (i == r)
            continue;
        rank_view sib = view_of(req, t, i);
        uint64_t n = sib.queued > 0 ? steps_for(m, sib.queued) : 0;
        shared = n > shared ? n : shared;
        sibling_decode = sib.decode_ms > sibling_decode ? sib.decode_ms : sibling_decode;
    }
    double total = own.new_blocks > own.free_blocks ? m->kv_penalty_ms : 0.0;
    uint64_t s = 0;
    for (; s < steps && s < shared; s++) {
        double step = rank_step_ms(m, &own, q, s);
        for (uint32_t i = first; i < first + count; i++) {
            if (i == r)
                continue;
            rank_view sib = view_of(req, t, i);
            double other = rank_step_ms(m, &sib, sib.queued, s);
            step = other > step ? other : step;
        }
        total += step;
    }
    if (s < steps) {
        /* the rest: full steps, then the last one's remainder */
        double full = sim_poly_prefill_ms((double)m->budget) + own.decode_ms;
        double last = rank_step_ms(m, &own, q, steps - 1);
        total +=
            (double)(steps - 1 - s) * (full > sibling_decode ? full : sibling_decode);
        total += last > sibling_decode ? last : sibling_decode;
    }
    return total;
}

static int32_t model_greedy_select(void *instance, const wsel_request *req,
                                   const wsel_table *t, wsel_choice *choice)
{
    const model_greedy *m = instance;
    uint8_t skip = WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
    for (int pass = 0; pass < 2; pass++, skip = WSEL_ROW_EXCLUDED) {
        uint32_t best = UINT32_MAX;
        double best_ms = INFINITY;
        for (uint32_t g = 0; g < t->num_groups; g++) {
            uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
            for (uint32_t r = first; r < first + count; r++) {
                if (t->flags[r] & skip)
                    continue;
                double ms = predict_ms(m, req, t, g, r);
                if (best == UINT32_MAX || ms < best_ms ||
                    (ms == best_ms && t->cost[r] < t->cost[best])) {
                    best = r;
                    best_ms = ms;
                }
            }
        }
        if (best != UINT32_MAX) {
            choice->row = best;
            return 0;
        }
    }
    return WSEL_ENOCANDIDATE;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "model_greedy",
    .version = "1.0.0",
    .description = "diagnostic: the row with the earliest first token under the "
                   "simulator's own lockstep engine model (knows the engine; not a "
                   "policy for a real router)",
    .params = model_greedy_params,
    .num_params = P_COUNT,
    .param_def_size = sizeof(wsel_param_def),
    .create = model_greedy_create,
    .destroy = model_greedy_destroy,
    .select = model_greedy_select,
};
