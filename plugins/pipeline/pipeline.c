// SPDX-License-Identifier: Apache-2.0
/*
 * pipeline -- a policy composed at run time of other wsel plugins, the
 * filter / scorer / picker shape of Dynamo's selection framework and of
 * llm-d's scheduler, but configured by JSON and loaded by path.
 *
 * What it does, per request:
 *   1. filter: rows failing a configured filter (skip_no_load,
 *      max_active_requests, max_kv_usage) are treated as excluded, unless
 *      that would leave no eligible row, in which case that request is
 *      not filtered;
 *   2. score: each scorer child (wsel_host_api.child_score) scores every
 *      row of the filtered table; each scorer's scores are normalised over
 *      the eligible rows (busy ones only when every eligible row is busy),
 *      n = (s - min) / (max - min), 0 when all are equal, and combined as
 *      sum(weight * n). No scorer configured: the table's default cost is
 *      the one scorer;
 *   3. pick: argmin of the combined score (exact ties broken by the
 *      request's stream), softmax over it with `temperature` (as softmax:
 *      wsel_request_temperature), or, when picker_plugin is set, that
 *      child's select on the filtered table whose `cost` column is the
 *      combined score.
 *
 * Children are opened through the host (child_open), so they pass the
 * host's trust rules, and a child that fails is answered for by the host
 * and counted against that child (wsel_host_read_child_counters). They
 * live and die with the pipeline instance: a switch swaps them as one
 * policy.
 *
 * Configuration (docs/policies.md, "pipeline"):
 *   {"scorers": [{"path": "softmax", "weight": 1},
 *                {"path": "/opt/wsel/mine.so", "weight": 0.5,
 *                 "config": {"slack": 2}}],
 *    "picker": "softmax", "temperature": 0.3}
 * A path without '/' names NAME.so beside pipeline.so.
 *
 * Not concurrent: the per-row scratch lives in the instance (no allocation
 * on select or score), sized by `max_rows` and grown by
 * on_topology_changed; a larger table is refused (WSEL_ERANGE) and the
 * host answers it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

#define PICK_ARGMIN  0u
#define PICK_SOFTMAX 1u
#define PICK_PLUGIN  2u

/* Reason codes of this plugin (WSEL_REASON_PLUGIN and up). */
/* The picker child chose, giving no reason of its own. */
#define PIPELINE_REASON_PICKER (WSEL_REASON_PLUGIN + 0u)

typedef struct pipeline {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    wsel_child *scorer[PIPELINE_MAX_SCORERS];
    double weight[PIPELINE_MAX_SCORERS];
    uint32_t num_scorers;
    wsel_child *picker_child; /* PICK_PLUGIN only */
    uint32_t picker;
    double temperature;
    uint32_t skip_no_load;
    double max_active;
    double max_kv_usage;
    /* Scratch, `capacity` rows each (control thread resizes). */
    uint32_t capacity;
    double *combined;
    double *tmp;
    uint8_t *flags;
    /* Per select: the rows outside the eligible mask (num_outside of
     * them), and their combined score before a scorer is added. */
    uint32_t *outside;
    double *outside_sum;
    uint32_t num_outside;
} pipeline;

static const char *const pick_choices[] = {"argmin", "softmax", NULL};

enum {
    P_SCORERS,
    P_PICKER,
    P_TEMPERATURE,
    P_PICKER_PLUGIN,
    P_SKIP_NO_LOAD,
    P_MAX_ACTIVE,
    P_MAX_KV_USAGE,
    P_MAX_ROWS,
    P_COUNT
};

static const wsel_param_def pipeline_params[] = {
    [P_SCORERS] =
        {
            .name = "scorers",
            .doc = "array of {\"path\", \"weight\" (default 1), \"config\"} children "
                   "whose scores are normalised and summed; none = the default cost",
            .type = WSEL_PARAM_JSON,
        },
    [P_PICKER] =
        {
            .name = "picker",
            .doc = "how the row is picked from the combined score: argmin or softmax "
                   "(with temperature); picker_plugin, when set, picks instead",
            .type = WSEL_PARAM_ENUM,
            .default_value = PICK_ARGMIN,
            .min_value = 0,
            .max_value = 1,
            .choices = pick_choices,
        },
    [P_TEMPERATURE] =
        {
            .name = "temperature",
            .doc = "softmax picker's temperature over the combined score; a "
                   "request's temperature override wins",
            .type = WSEL_PARAM_DOUBLE,
            .default_value = 0.0,
            .min_value = 0.0,
            .max_value = 100.0,
        },
    [P_PICKER_PLUGIN] =
        {
            .name = "picker_plugin",
            .doc = "{\"path\", \"config\"} of a child that picks instead of picker: "
                   "its select sees the combined score as the table's cost",
            .type = WSEL_PARAM_JSON,
        },
    [P_SKIP_NO_LOAD] =
        {
            .name = "skip_no_load",
            .doc = "filter: leave out rows without a load record (WSEL_ROW_NO_LOAD)",
            .type = WSEL_PARAM_BOOL,
            .default_value = 0,
            .min_value = 0,
            .max_value = 1,
        },
    [P_MAX_ACTIVE] =
        {
            .name = "max_active_requests",
            .doc = "filter: leave out rows with more requests in flight (0 = off)",
            .type = WSEL_PARAM_INT,
            .default_value = 0,
            .min_value = 0,
            .max_value = 1e9,
        },
    [P_MAX_KV_USAGE] =
        {
            .name = "max_kv_usage",
            .doc = "filter: leave out rows whose decode_blocks / kv_capacity_blocks "
                   "exceeds this (0 = off; rows of unknown capacity pass)",
            .type = WSEL_PARAM_DOUBLE,
            .default_value = 0.0,
            .min_value = 0.0,
            .max_value = 100.0,
        },
    [P_MAX_ROWS] =
        {
            .name = "max_rows",
            .doc = "rows of scratch allocated up front (grown on a topology change)",
            .type = WSEL_PARAM_INT,
            .default_value = 4096,
            .min_value = 1,
            .max_value = 1048576,
        },
};

/* Log an error; a message longer than the buffer ends in "..." so the
 * reader sees it was cut (a child's path and error are up to 1 KiB each). */
static void pipeline_log(const pipeline *p, const char *fmt, const char *a, const char *b)
{
    char msg[1400];
    int n = snprintf(msg, sizeof(msg), fmt, a, b);
    if (n >= (int)sizeof(msg))
        memcpy(msg + sizeof(msg) - sizeof("..."), "...", sizeof("..."));
    p->host->log(p->host, WSEL_LOG_ERROR, msg);
}

/* [control thread] Scratch for `rows` rows; keeps the old on failure. */
static int32_t ensure_capacity(pipeline *p, uint32_t rows)
{
    if (rows <= p->capacity)
        return 0;
    double *combined = malloc(rows * sizeof(double));
    double *tmp = malloc(rows * sizeof(double));
    uint8_t *flags = malloc(rows);
    uint32_t *outside = malloc(rows * sizeof(uint32_t));
    double *outside_sum = malloc(rows * sizeof(double));
    if (combined == NULL || tmp == NULL || flags == NULL || outside == NULL ||
        outside_sum == NULL) {
        free(combined);
        free(tmp);
        free(flags);
        free(outside);
        free(outside_sum);
        return WSEL_ENOMEM;
    }
    free(p->combined);
    free(p->tmp);
    free(p->flags);
    free(p->outside);
    free(p->outside_sum);
    p->combined = combined;
    p->tmp = tmp;
    p->flags = flags;
    p->outside = outside;
    p->outside_sum = outside_sum;
    p->capacity = rows;
    return 0;
}

static void close_children(pipeline *p)
{
    for (uint32_t i = 0; i < p->num_scorers; i++)
        p->host->child_close(p->host, p->scorer[i]);
    p->num_scorers = 0;
    if (p->picker_child != NULL)
        p->host->child_close(p->host, p->picker_child);
    p->picker_child = NULL;
}

static void pipeline_free(pipeline *p)
{
    if (p == NULL)
        return;
    if (WSEL_HOST_HAS(p->host, child_close))
        close_children(p);
    free(p->combined);
    free(p->tmp);
    free(p->flags);
    free(p->outside);
    free(p->outside_sum);
    free(p);
}

/* Open one configured child; refuses a scorer without a score function. */
static int32_t open_child(pipeline *p, const pipeline_spec *s, int scorer,
                          wsel_child **out)
{
    char err[1024] = "";
    uint32_t features = 0;
    int32_t rc = p->host->child_open(p->host, s->path, s->config, out, &features, err,
                                     sizeof(err));
    if (rc < 0) {
        pipeline_log(p, "pipeline: child %s refused: %s", s->path, err);
        return rc;
    }
    if (scorer && !(features & WSEL_CHILD_HAS_SCORE)) {
        pipeline_log(p, "pipeline: child %s has no score function%s", s->path, "");
        p->host->child_close(p->host, *out);
        *out = NULL;
        return WSEL_ECONFIG;
    }
    return 0;
}

/* [control thread] Reads the JSON parameters and opens the children.
 * `configured` is 1 for each JSON parameter the configuration set (the
 * host passes 1.0 for a present JSON key). */
static int32_t open_configured_children(pipeline *p, int scorers_set, int picker_set)
{
    int has_children =
        WSEL_HOST_HAS(p->host, param_json) && WSEL_HOST_HAS(p->host, child_open) &&
        WSEL_HOST_HAS(p->host, child_close) && WSEL_HOST_HAS(p->host, child_score) &&
        WSEL_HOST_HAS(p->host, child_select);
    if (!scorers_set && !picker_set)
        return 0; /* the default cost and the configured picker */
    if (!has_children) {
        /* A host without children (isolated mode, a router's own table):
         * refuse rather than silently drop the configured children. */
        pipeline_log(p,
                     "pipeline: %s needs a host that opens children (ABI 1.1, "
                     "not isolated)%s",
                     scorers_set ? "scorers" : "picker_plugin", "");
        return WSEL_ECONFIG;
    }
    const char *scorers = p->host->param_json(p->host, P_SCORERS);
    const char *picker = p->host->param_json(p->host, P_PICKER_PLUGIN);
    pipeline_spec specs[PIPELINE_MAX_SCORERS];
    uint32_t n = 0;
    int32_t rc = 0;
    if (scorers != NULL) {
        rc = pipeline_read_scorers(p->host, scorers, specs, &n);
        if (rc < 0)
            return rc;
    }
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rc = open_child(p, &specs[i], 1, &p->scorer[i]);
        if (rc == 0) {
            p->weight[i] = specs[i].weight;
            p->num_scorers = i + 1;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        pipeline_spec_clear(&specs[i]);
    if (rc < 0 || picker == NULL)
        return rc;
    pipeline_spec s;
    rc = pipeline_read_picker(p->host, picker, &s);
    if (rc < 0)
        return rc;
    rc = open_child(p, &s, 0, &p->picker_child);
    pipeline_spec_clear(&s);
    if (rc == 0)
        p->picker = PICK_PLUGIN;
    return rc;
}

/* [control thread] */
static int32_t pipeline_create(const wsel_host_api *host, const double *params,
                               uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != P_COUNT)
        return WSEL_EINVAL;
    pipeline *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return WSEL_ENOMEM;
    p->host = host;
    p->picker = (uint32_t)params[P_PICKER];
    p->temperature = params[P_TEMPERATURE];
    p->skip_no_load = params[P_SKIP_NO_LOAD] != 0.0;
    p->max_active = params[P_MAX_ACTIVE];
    p->max_kv_usage = params[P_MAX_KV_USAGE];
    int32_t rc = ensure_capacity(p, (uint32_t)params[P_MAX_ROWS]);
    if (rc == 0)
        rc = open_configured_children(p, params[P_SCORERS] != 0.0,
                                      params[P_PICKER_PLUGIN] != 0.0);
    if (rc < 0) {
        pipeline_free(p);
        return rc;
    }
    *out_instance = p;
    return 0;
}

/* [control thread] Closes the children first: they belong to this
 * instance. */
static void pipeline_destroy(void *instance)
{
    pipeline_free(instance);
}

/* Does row i pass every configured filter? */
static int passes(const pipeline *p, const wsel_table *t, uint32_t i)
{
    if (p->skip_no_load && (t->flags[i] & WSEL_ROW_NO_LOAD))
        return 0;
    if (p->max_active > 0.0 && (double)t->active_requests[i] > p->max_active)
        return 0;
    if (p->max_kv_usage > 0.0 && t->kv_capacity_blocks[i] != 0 &&
        (double)t->decode_blocks[i] / (double)t->kv_capacity_blocks[i] > p->max_kv_usage)
        return 0;
    return 1;
}

/* The filtered flags into p->flags: a failing row is excluded, unless no
 * row would stay eligible. */
static void filter(const pipeline *p, const wsel_table *t)
{
    uint32_t n = t->num_rows, kept = 0;
    int any = p->skip_no_load || p->max_active > 0.0 || p->max_kv_usage > 0.0;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t f = t->flags[i];
        if (any && !(f & WSEL_ROW_EXCLUDED) && !passes(p, t, i))
            f |= WSEL_ROW_EXCLUDED;
        if (!(f & WSEL_ROW_EXCLUDED))
            kept++;
        p->flags[i] = f;
    }
    if (kept == 0)
        memcpy(p->flags, t->flags, n);
}

/* Rows per block in add_normalised's main loop: a fixed inner count that
 * gcc and clang vectorise at -O2 (no epilogue inside a block). */
#define NORM_BLOCK 8u

/* NORM_BLOCK rows of weight * (s / 2 - half_lo) / range into c (= or +=). */
static inline void normalise_block(double *restrict c, const double *restrict x,
                                   double half_lo, double range, double weight)
{
    for (uint32_t j = 0; j < NORM_BLOCK; j++)
        c[j] = weight * ((x[j] / 2 - half_lo) / range);
}

static inline void add_normalised_block(double *restrict c, const double *restrict x,
                                        double half_lo, double range, double weight)
{
    for (uint32_t j = 0; j < NORM_BLOCK; j++)
        c[j] += weight * ((x[j] / 2 - half_lo) / range);
}

/*
 * combined (+)= weight * (s - min) / (max - min) over every row, the range
 * taken over the rows the skip mask leaves (`first`, for the first scorer
 * of a select, writes instead of adding and lists the rows outside the
 * mask in p->outside). For those rows the value is in [0, 1] by construction (every
 * step is monotonic and s = max gives range / range = 1), so they take
 * the branch-free loop, which the compiler vectorises; the few rows
 * outside the mask, whose scores may lie anywhere, are then redone from
 * their saved sums with the value clamped to [0, 1], so every combined
 * score stays finite.
 */
static void add_normalised(pipeline *p, const double *restrict s, uint32_t n,
                           uint8_t skip, double weight, int first)
{
    double *restrict combined = p->combined;
    const uint8_t *flags = p->flags;
    double lo = INFINITY, hi = -INFINITY;
    uint32_t outside = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (flags[i] & skip) {
            if (first)
                p->outside[outside++] = i;
            continue;
        }
        if (s[i] < lo)
            lo = s[i];
        if (s[i] > hi)
            hi = s[i];
    }
    if (first)
        p->num_outside = outside;
    if (!(hi > lo)) { /* every eligible row equal: contributes 0 */
        if (first)
            memset(combined, 0, n * sizeof(double));
        return;
    }
    for (uint32_t k = 0; k < p->num_outside; k++)
        p->outside_sum[k] = first ? 0.0 : combined[p->outside[k]];
    /* Halves keep a range wider than DBL_MAX finite. */
    double half_lo = lo / 2, range = hi / 2 - half_lo;
    uint32_t i = 0;
    if (first) {
        for (; i + NORM_BLOCK <= n; i += NORM_BLOCK)
            normalise_block(combined + i, s + i, half_lo, range, weight);
        for (; i < n; i++)
            combined[i] = weight * ((s[i] / 2 - half_lo) / range);
    } else {
        for (; i + NORM_BLOCK <= n; i += NORM_BLOCK)
            add_normalised_block(combined + i, s + i, half_lo, range, weight);
        for (; i < n; i++)
            combined[i] += weight * ((s[i] / 2 - half_lo) / range);
    }
    for (uint32_t k = 0; k < p->num_outside; k++) {
        uint32_t r = p->outside[k];
        double v = (s[r] / 2 - half_lo) / range;
        if (!(v >= 0.0))
            v = 0.0;
        else if (v > 1.0)
            v = 1.0;
        combined[r] = p->outside_sum[k] + weight * v;
    }
}

/* The filtered view (flags = p->flags) and the combined score in
 * p->combined. Returns 0 or a negative WSEL_E*; *out_skip the eligible
 * mask. [select thread] No allocation. */
static int32_t combine(pipeline *p, const wsel_request *request, const wsel_table *table,
                       wsel_table *view, uint8_t *out_skip)
{
    uint32_t n = table->num_rows;
    if (n > p->capacity)
        return WSEL_ERANGE;
    filter(p, table);
    *view = *table;
    view->flags = p->flags;
    uint8_t skip;
    int32_t rc = wsel_call_eligible_skip(p->host, p->flags, n, &skip, NULL);
    if (rc < 0)
        return rc;
    if (p->num_scorers == 0) {
        add_normalised(p, table->cost, n, skip, 1.0, 1);
    } else {
        for (uint32_t k = 0; k < p->num_scorers; k++) {
            rc = p->host->child_score(p->host, p->scorer[k], request, view, p->tmp);
            if (rc < 0)
                return rc;
            add_normalised(p, p->tmp, n, skip, p->weight[k], k == 0);
        }
    }
    *out_skip = skip;
    return 0;
}

/* [select thread, serialised by the host] */
static int32_t pipeline_select(void *instance, const wsel_request *request,
                               const wsel_table *table, wsel_choice *choice)
{
    pipeline *p = instance;
    wsel_table view;
    uint8_t skip;
    int32_t rc = combine(p, request, table, &view, &skip);
    if (rc < 0)
        return rc;
    uint32_t n = table->num_rows, row = 0, reason;
    if (p->picker == PICK_PLUGIN) {
        wsel_choice pick;
        memset(&pick, 0, sizeof(pick));
        pick.struct_size = sizeof(pick);
        view.cost = p->combined;
        rc = p->host->child_select(p->host, p->picker_child, request, &view, &pick);
        if (rc < 0)
            return rc;
        row = pick.row;
        reason = pick.reason != WSEL_REASON_NONE ? pick.reason : PIPELINE_REASON_PICKER;
    } else {
        double t = p->picker == PICK_SOFTMAX
                       ? wsel_request_temperature(request, p->temperature)
                       : 0.0;
        if (t > 0.0)
            rc = p->host->softmax_sample(p->combined, p->flags, n, skip, t,
                                         request->uniform, &row);
        else
            rc = p->host->argmin(p->combined, p->flags, n, skip, request->rng, &row);
        if (rc < 0)
            return rc;
        reason = t > 0.0 ? WSEL_REASON_SAMPLED : WSEL_REASON_CHEAPEST;
    }
    choice->row = row;
    wsel_choice_explain(choice, wsel_reason_unless_all_busy(skip, reason),
                        p->combined[row]);
    return 0;
}

/* [select thread, serialised] The combined score, lower better, in
 * [0, sum of weights]. */
static int32_t pipeline_score(void *instance, const wsel_request *request,
                              const wsel_table *table, double *scores)
{
    pipeline *p = instance;
    wsel_table view;
    uint8_t skip;
    int32_t rc = combine(p, request, table, &view, &skip);
    if (rc < 0)
        return rc;
    memcpy(scores, p->combined, table->num_rows * sizeof(double));
    return 0;
}

static void pipeline_finished(void *instance, uint64_t request_id, uint64_t worker_id,
                              uint32_t dp_rank)
{
    pipeline *p = instance;
    if (!WSEL_HOST_HAS(p->host, child_finished))
        return;
    for (uint32_t k = 0; k < p->num_scorers; k++)
        p->host->child_finished(p->host, p->scorer[k], request_id, worker_id, dp_rank);
    if (p->picker_child != NULL)
        p->host->child_finished(p->host, p->picker_child, request_id, worker_id, dp_rank);
}

static void pipeline_outcome(void *instance, const wsel_outcome *outcome)
{
    pipeline *p = instance;
    if (!WSEL_HOST_HAS(p->host, child_outcome))
        return;
    for (uint32_t k = 0; k < p->num_scorers; k++)
        p->host->child_outcome(p->host, p->scorer[k], outcome);
    if (p->picker_child != NULL)
        p->host->child_outcome(p->host, p->picker_child, outcome);
}

/* [control thread] Grows the scratch, then tells the children. A failed
 * growth keeps the old scratch: larger tables are then refused (the host
 * answers them) until a later change succeeds. */
static void pipeline_topology(void *instance, const wsel_table *table)
{
    pipeline *p = instance;
    if (ensure_capacity(p, table->num_rows) < 0)
        p->host->log(p->host, WSEL_LOG_WARN, "pipeline: cannot grow its scratch");
    if (!WSEL_HOST_HAS(p->host, child_topology_changed))
        return;
    for (uint32_t k = 0; k < p->num_scorers; k++)
        p->host->child_topology_changed(p->host, p->scorer[k], table);
    if (p->picker_child != NULL)
        p->host->child_topology_changed(p->host, p->picker_child, table);
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = 0,
    .name = "pipeline",
    .version = "1.1.0",
    .description = "filters, weighted scorers (other plugins, by path) and a picker "
                   "(argmin, softmax or a plugin), composed at run time",
    .params = pipeline_params,
    .num_params = P_COUNT,
    .param_def_size = sizeof(wsel_param_def),
    .create = pipeline_create,
    .destroy = pipeline_destroy,
    .select = pipeline_select,
    .on_request_finished = pipeline_finished,
    .on_topology_changed = pipeline_topology,
    .score = pipeline_score,
    .on_request_outcome = pipeline_outcome,
};
