// SPDX-License-Identifier: Apache-2.0
/*
 * adaptive -- hysteresis whose load bound is learned from outcomes: the
 * owner keeps a request while its TTFT, predicted by a model fitted online
 * to the router's outcomes (ttft_model.h), exceeds the fastest row's by no
 * more than the work a spill would add. Requests awaiting an outcome live
 * in pending.h's bounded table; no allocation after create.
 * The model, the bound, the threads and why: docs/policies.md, "adaptive".
 */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef ADAPTIVE_TRACE
#include <stdio.h>
#endif

#include "adaptive.h"
#include "prefix_owner.h"
#include "prefix_owner_params.h"
#include "row_find.h"
#include "row_scan.h"
#include "wsel.h"

/* Parameter indices, in the order of the table below: append, never insert. */
enum {
    P_TOLERANCE,
    P_WINDOW,
    P_REL_MARGIN,
    P_ABS_MARGIN,
    P_TEMPERATURE,
    P_CAPACITY,
    P_PENDING,
    P_SPILL_WORK,
    P_COUNT
};

static const wsel_param_def adaptive_params[P_COUNT] = {
    [P_TOLERANCE] = {.name = "tolerance",
                     .doc = "keep the owner while its predicted TTFT is at most (1 + "
                            "tolerance) x the least candidate's (plus the spill term)",
                     .type = WSEL_PARAM_DOUBLE,
                     .default_value = 0.0,
                     .min_value = 0.0,
                     .max_value = 100.0},
    [P_WINDOW] = {.name = "window",
                  .doc = "outcomes the TTFT model remembers (weight 1/window for the "
                         "newest)",
                  .type = WSEL_PARAM_INT,
                  .default_value = 256.0,
                  .min_value = 1.0,
                  .max_value = 1048576.0},
    [P_REL_MARGIN] = PREFIX_OWNER_PARAM_REL_MARGIN,
    [P_ABS_MARGIN] = PREFIX_OWNER_PARAM_ABS_MARGIN,
    [P_TEMPERATURE] = PREFIX_OWNER_PARAM_TEMPERATURE,
    [P_CAPACITY] = PREFIX_OWNER_PARAM_CAPACITY,
    [P_PENDING] = {.name = "pending",
                   .doc = "requests in flight remembered until their outcome "
                          "(rounded up to a power of two; 24 bytes each)",
                   .type = WSEL_PARAM_INT,
                   .default_value = 4096.0,
                   .min_value = 1.0,
                   .max_value = 16777216.0},
    [P_SPILL_WORK] = {.name = "spill_work",
                      .doc = "weight, in the load bound, of the prefill a spill adds "
                             "(the request's cached prefix, prefilled again); 0 = "
                             "the request's own TTFT only",
                      .type = WSEL_PARAM_DOUBLE,
                      .default_value = 1.0,
                      .min_value = 0.0,
                      .max_value = 100.0},
};

/* hysteresis's default load bound, used until the model is fitted. */
#define COLD_LOAD_SLACK 0.5

static uint64_t double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof(u));
    return u;
}

static double bits_double(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

double adaptive_overhead(const adaptive *a)
{
    return bits_double(atomic_load_explicit(&a->overhead, memory_order_relaxed));
}

double adaptive_coupling(const adaptive *a)
{
    return bits_double(atomic_load_explicit(&a->coupling, memory_order_relaxed));
}

uint64_t adaptive_samples(adaptive *a)
{
    while (atomic_flag_test_and_set_explicit(&a->fitting, memory_order_acquire))
        ;
    uint64_t n = a->model.samples;
    atomic_flag_clear_explicit(&a->fitting, memory_order_release);
    return n;
}

static int32_t adaptive_create(const wsel_host_api *host, const double *params,
                               uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != P_COUNT)
        return WSEL_EINVAL;
    adaptive *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return WSEL_ENOMEM;
    a->host = host;
    a->tolerance = params[P_TOLERANCE];
    a->rel_margin = params[P_REL_MARGIN];
    a->abs_margin = params[P_ABS_MARGIN];
    a->temperature = params[P_TEMPERATURE];
    a->spill_work = params[P_SPILL_WORK];
    atomic_flag_clear(&a->fitting);
    ttft_model_init(&a->model, params[P_WINDOW]);
    atomic_init(&a->overhead, double_bits(-1.0));
    atomic_init(&a->coupling, double_bits(-1.0));
    int32_t rc = sticky_table_init(&a->owners, (uint32_t)params[P_CAPACITY]);
    if (rc != 0)
        goto out_free;
    rc = pending_init(&a->routed, (uint32_t)params[P_PENDING]);
    if (rc != 0)
        goto out_free_owners;
    *out_instance = a;
    return 0;

out_free_owners:
    sticky_table_free(&a->owners);
out_free:
    free(a);
    return rc;
}

static void adaptive_destroy(void *instance)
{
    adaptive *a = instance;
    if (a == NULL)
        return;
#ifdef ADAPTIVE_TRACE
    /* A diagnostic build (-DADAPTIVE_TRACE) says where the fit ended. */
    double fa = 0.0, fb = 0.0, fc = 0.0;
    ttft_model_fit(&a->model, &fa, &fb, &fc);
    char msg[224];
    snprintf(msg, sizeof(msg),
             "adaptive: %llu outcomes, ttft = %.0f us + %.3f us/token * P + %.3f "
             "us/token * G, k = %.0f tokens, g = %.4f",
             (unsigned long long)a->model.samples, fa, fb, fc, adaptive_overhead(a),
             adaptive_coupling(a));
    a->host->log(a->host, WSEL_LOG_WARN, msg);
#endif
    pending_free(&a->routed);
    sticky_table_free(&a->owners);
    free(a);
}

/* --- the prefix owners (as hysteresis) ------------------------------------ */

static uint32_t row_fingerprint(const wsel_table *t, uint32_t row)
{
    return sticky_owner(sticky_worker_mix(t->worker_id[row]), t->dp_rank[row]);
}

/* --- a worker's busiest rank ---------------------------------------------- */

/* G: the largest prefill_tokens among rows [first, end), a worker's rows,
 * every one of them (a rank the router excludes still steps with its
 * worker). */
static uint64_t worker_load(const wsel_table *t, uint32_t first, uint32_t end)
{
    uint64_t g = 0;
    for (uint32_t i = first; i < end; i++)
        g = t->prefill_tokens[i] > g ? t->prefill_tokens[i] : g;
    return g;
}

/* G of the worker holding `row`. */
static uint64_t row_worker_load(const wsel_table *t, uint32_t row)
{
    uint32_t g = row_find_group(t, 0, row);
    uint32_t first = t->group_first_row[g];
    return worker_load(t, first, first + t->group_row_count[g]);
}

/* --- the decision --------------------------------------------------------- */

/* What select and score both need: the candidates (skip), the best cost,
 * the dead band's width, and the owner's row when it is a candidate inside
 * the load bound (else UINT32_MAX). Read-only. Returns 0,
 * WSEL_ENOCANDIDATE or WSEL_EINVAL (a candidate cost not finite). */
typedef struct decision {
    uint8_t skip;
    double best;
    double band;        /* rel_margin * |best| + abs_margin */
    uint32_t owner;     /* fingerprint; 0 = none remembered */
    uint32_t bound_row; /* the owner's row inside the load bound, or UINT32_MAX */
} decision;

/* The request's own uncached tokens on row i, the part of its load that a
 * spill changes: isl less the blocks cached there, at least 0 and never
 * more than the row's load (a row without a load record shows the prompt
 * alone). */
static double own_prefill(const wsel_request *req, const wsel_table *t, uint32_t i)
{
    double u = (double)req->isl_tokens - (double)t->overlap_blocks[i] * req->block_size;
    double load = (double)t->prefill_tokens[i];
    u = u > 0.0 ? u : 0.0;
    return u < load ? u : load;
}

/* The first candidate row holding the owner `owner` (fingerprint), or
 * UINT32_MAX. */
static uint32_t owner_row(const wsel_table *t, uint32_t owner, uint8_t skip)
{
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
        uint64_t wm = sticky_worker_mix(t->worker_id[first]);
        for (uint32_t i = first; i < end; i++)
            if (sticky_owner(wm, t->dp_rank[i]) == owner && (t->flags[i] & skip) == 0)
                return i;
    }
    return UINT32_MAX;
}

/* The fitted bound: whether the owner's row keeps the request, its
 * predicted TTFT over b less k being v = P + g G on every candidate row. */
static int fitted_keeps(const adaptive *a, const wsel_request *req, const wsel_table *t,
                        uint8_t skip, uint32_t row, double k)
{
    double cg = adaptive_coupling(a);
    cg = cg > 0.0 ? cg : 0.0;
    uint32_t min_row = 0;
    double min_v = INFINITY, owner_v = 0.0;
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
        double gv = cg > 0.0 ? cg * (double)worker_load(t, first, end) : 0.0;
        for (uint32_t i = first; i < end; i++) {
            if (t->flags[i] & skip)
                continue;
            double v = (double)t->prefill_tokens[i] + gv;
            if (v < min_v) {
                min_v = v;
                min_row = i;
            }
            if (i == row)
                owner_v = v;
        }
    }
    return owner_v <= min_v + a->tolerance * (k + min_v) +
                          a->spill_work *
                              (own_prefill(req, t, min_row) - own_prefill(req, t, row));
}

/* One pass (row_scan.h) gives the best cost and, for the cold bound, the
 * spread of loads; the owner's row is searched only when an owner is
 * remembered, and the fitted bound reads the rows once more. */
static int32_t decide(const adaptive *a, const wsel_request *req, const wsel_table *t,
                      decision *d)
{
    int32_t rc = wsel_call_eligible_skip(a->host, t->flags, t->num_rows, &d->skip, NULL);
    if (rc < 0)
        return rc;
    row_scan_result scan;
    row_scan(t->flags, t->cost, t->prefill_tokens, t->num_rows, d->skip, &scan);
    if (!scan.best_known) {
        rc = row_scan_best(t->flags, t->cost, t->num_rows, d->skip, &scan.best);
        if (rc != 0)
            return rc;
    }
    d->best = scan.best;
    d->band = prefix_owner_band(a->rel_margin, a->abs_margin, scan.best);
    d->bound_row = UINT32_MAX;
    d->owner = prefix_owner_find(&a->owners, req, 0);
    if (d->owner == 0)
        return 0;
    uint32_t row = owner_row(t, d->owner, d->skip);
    if (row == UINT32_MAX)
        return 0;
    double k = adaptive_overhead(a);
    int keep;
    if (k >= 0.0) {
        keep = fitted_keeps(a, req, t, d->skip, row, k);
    } else {
        if (!scan.loads_known)
            row_scan_loads(t->flags, t->prefill_tokens, t->num_rows, d->skip,
                           &scan.min_load, &scan.mean_load);
        keep = (double)t->prefill_tokens[row] <=
               scan.min_load + COLD_LOAD_SLACK * (scan.mean_load - scan.min_load);
    }
    if (keep)
        d->bound_row = row;
    return 0;
}

static int32_t adaptive_select(void *instance, const wsel_request *req,
                               const wsel_table *t, wsel_choice *choice)
{
    adaptive *a = instance;
    double temperature = wsel_request_temperature(req, a->temperature);
    if (!isfinite(temperature) || temperature < 0.0 ||
        !(req->uniform >= 0.0 && req->uniform < 1.0) || req->block_size == 0)
        return WSEL_EINVAL;
    decision d;
    int32_t rc = decide(a, req, t, &d);
    if (rc != 0)
        return rc;

    uint32_t row, reason;
    if (d.bound_row != UINT32_MAX && t->cost[d.bound_row] <= d.best + d.band) {
        row = d.bound_row;
        reason = WSEL_REASON_STICKY;
    } else {
        rc = a->host->softmax_sample(t->cost, t->flags, t->num_rows, d.skip, temperature,
                                     req->uniform, &row);
        if (rc != 0)
            return rc;
        reason = d.owner != 0        ? WSEL_REASON_SPILLED
                 : temperature > 0.0 ? WSEL_REASON_SAMPLED
                                     : WSEL_REASON_CHEAPEST;
        reason = wsel_reason_unless_all_busy(d.skip, reason);
    }
    uint32_t fp = row_fingerprint(t, row);
    prefix_owner_record(&a->owners, req, fp, 0);
    pending_put(&a->routed, req->request_id, fp, t->prefill_tokens[row],
                row_worker_load(t, row));
    choice->row = row;
    wsel_choice_explain(choice, reason, t->cost[row]);
    return 0;
}

/* The score is hysteresis's: the default cost, lower better, with the dead
 * band's width taken off the owner's while its load is inside the bound.
 * So the lowest score is the row select takes at temperature 0 (the owner
 * whenever select keeps it; otherwise the cheapest row, which the owner's
 * score, above the best cost, does not undercut), and in `pipeline` the
 * band is a stickiness bonus other scorers can outweigh. Rows that are not
 * candidates score their cost, or DBL_MAX when it is not finite. Reads the
 * owner table, never writes it: a score is not a routing. */
static int32_t adaptive_score(void *instance, const wsel_request *req,
                              const wsel_table *t, double *scores)
{
    const adaptive *a = instance;
    decision d;
    int32_t rc = decide(a, req, t, &d);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < t->num_rows; i++)
        scores[i] = isfinite(t->cost[i]) ? t->cost[i] : DBL_MAX;
    if (d.bound_row != UINT32_MAX)
        scores[d.bound_row] = t->cost[d.bound_row] - d.band;
    return 0;
}

/* An outcome of a request this instance routed, on the row it routed it
 * to, with a measured TTFT, feeds the model; any other is ignored. */
static void adaptive_outcome(void *instance, const wsel_outcome *o)
{
    adaptive *a = instance;
    if (o == NULL || o->struct_size < WSEL_OUTCOME_SIZE_1_1 ||
        (o->flags & WSEL_OUTCOME_FAILED) || o->ttft_us == 0)
        return;
    uint32_t fp = sticky_owner(sticky_worker_mix(o->worker_id), o->dp_rank);
    uint32_t tokens, worker_tokens;
    if (!pending_take(&a->routed, o->request_id, fp, &tokens, &worker_tokens))
        return;
    while (atomic_flag_test_and_set_explicit(&a->fitting, memory_order_acquire))
        ;
    ttft_model_add(&a->model, (double)tokens, (double)worker_tokens, (double)o->ttft_us);
    double k = -1.0, g = -1.0;
    if (ttft_model_setting(&a->model, &k, &g) != 0)
        k = g = -1.0;
    /* Coupling first: a select between the stores sees the new g with the
     * old k, two fits' values (or k < 0, then neither is used). */
    atomic_store_explicit(&a->coupling, double_bits(g), memory_order_relaxed);
    atomic_store_explicit(&a->overhead, double_bits(k), memory_order_relaxed);
    atomic_flag_clear_explicit(&a->fitting, memory_order_release);
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT,
    .name = "adaptive",
    .version = "1.2.2",
    .description = "hysteresis whose load bound compares predicted TTFTs plus the work a "
                   "spill adds, the TTFT model (own queue, worker's busiest rank) fitted "
                   "online to the outcomes",
    .params = adaptive_params,
    .num_params = P_COUNT,
    .param_def_size = sizeof(wsel_param_def),
    .create = adaptive_create,
    .destroy = adaptive_destroy,
    .select = adaptive_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
    .score = adaptive_score,
    .on_request_outcome = adaptive_outcome,
};
