// SPDX-License-Identifier: Apache-2.0
/*
 * explain.c -- the explainer's policy wrapper: the sample, the scoring
 * instance that follows the live one, and the rows copied for each sampled
 * request. The "why" is written in explain_why.c, printing in
 * explain_report.c.
 */
#include "explain.h"
#include "explain_why.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Salt of the sample's stream, so it is not the host's. */
#define EXPLAIN_SEED_SALT 0x6578706c61696e00ull /* "explain" */

/* floor(k * total / count) without overflow: k * q + floor(k * r / count)
 * for total = q * count + r, and k * r < count^2 <= SIM_EXPLAIN_MAX^2. */
static uint64_t stretch_start(uint64_t k, uint64_t total, uint32_t count)
{
    return k * (total / count) + k * (total % count) / count;
}

static int32_t plan(sim_explain *ex, uint32_t n, uint64_t total, uint64_t seed)
{
    ex->total = total;
    if (n == 0 || total == 0)
        return 0;
    uint32_t count = (uint64_t)n >= total ? (uint32_t)total : n;
    ex->picks = calloc(count, sizeof(*ex->picks));
    ex->records = calloc(count, sizeof(*ex->records));
    if (ex->picks == NULL || ex->records == NULL)
        return WSEL_ENOMEM;
    wsel_rng rng;
    wsel_rng_seed(&rng, seed ^ EXPLAIN_SEED_SALT);
    for (uint32_t k = 0; k < count; k++) {
        if (count == total) {
            ex->picks[k] = k;
            continue;
        }
        /* Stretch k is [k * total / count, (k + 1) * total / count): each
         * at least one request long, since count < total. */
        uint64_t lo = stretch_start(k, total, count);
        uint64_t hi = stretch_start(k + 1, total, count);
        uint64_t span = hi - lo;
        uint64_t off = span <= UINT32_MAX ? wsel_rng_below(&rng, (uint32_t)span)
                                          : wsel_rng_u64(&rng) % span;
        ex->picks[k] = lo + off;
    }
    ex->num_picks = count;
    return 0;
}

/* A fresh copy of `request` with its stream prepared as the host prepared
 * the live one's: same (seed, request id), same draws. */
static void fresh_request(const sim_explain *ex, const wsel_request *request,
                          wsel_request *copy, wsel_rng *rng)
{
    *copy = *request;
    wsel_host_prepare_request_sized(ex->hp->host, copy, sizeof(*copy), rng);
}

static int plugin_has(const wsel_plugin *p, size_t end)
{
    return p->struct_size >= end;
}
#define PLUGIN_HAS(p, member)                                                            \
    plugin_has((p), offsetof(wsel_plugin, member) + sizeof((p)->member))

/* Score the table for `request` with the scoring instance; 1 when every
 * score came back finite. */
static int score_rows(sim_explain *ex, const wsel_request *request,
                      const wsel_table *table)
{
    if (ex->instance == NULL)
        return 0;
    wsel_request copy;
    wsel_rng rng;
    fresh_request(ex, request, &copy, &rng);
    if (ex->plugin->score(ex->instance, &copy, table, ex->scores) != 0)
        return 0;
    for (uint32_t i = 0; i < table->num_rows; i++)
        if (!isfinite(ex->scores[i]))
            return 0;
    return 1;
}

/* The mirror's own select, so its state follows the live instance's.
 * Returns its row, or -1 (no mirror, or it failed). */
static int32_t mirror_select(sim_explain *ex, const wsel_request *request,
                             const wsel_table *table)
{
    if (ex->instance == NULL || !ex->mirror)
        return -1;
    wsel_request copy;
    wsel_rng rng;
    fresh_request(ex, request, &copy, &rng);
    wsel_choice choice;
    memset(&choice, 0, sizeof(choice));
    choice.struct_size = sizeof(choice);
    if (ex->plugin->select(ex->instance, &copy, table, &choice) != 0)
        return -1;
    return (int32_t)choice.row;
}

static uint64_t fallback_count(const wsel_host_counters *c, uint32_t r)
{
    return r < WSEL_FALLBACK_REASONS
               ? c->fallback_by_reason[r]
               : c->fallback_by_reason_more[r - WSEL_FALLBACK_REASONS];
}

static int32_t ex_select(void *ctx, wsel_request *request, const wsel_rank_state *ranks,
                         uint32_t num_ranks, uint32_t *row, uint64_t *select_ns)
{
    sim_explain *ex = ctx;
    uint64_t index = ex->routed++;
    int sampled = ex->next_pick < ex->num_picks && ex->picks[ex->next_pick] == index;
    wsel_host_counters before;
    if (sampled)
        wsel_host_read_counters(ex->hp->host, &before, sizeof(before));
    int32_t rc =
        ex->inner.select(ex->inner.ctx, request, ranks, num_ranks, row, select_ns);
    if (rc < 0)
        return rc;
    const wsel_table *table = &ex->hp->table.table;
    sim_explain_record *r = NULL;
    if (sampled) {
        r = &ex->records[ex->num_records++];
        ex->next_pick++;
        memset(r, 0, sizeof(*r));
        r->index = index;
        r->answer = (uint32_t)rc;
        r->fallback = -1;
        if (rc == WSEL_ANSWER_FALLBACK) {
            wsel_host_counters after;
            wsel_host_read_counters(ex->hp->host, &after, sizeof(after));
            for (uint32_t k = 0; k < WSEL_FALLBACK_REASONS_MAX && r->fallback < 0; k++)
                if (fallback_count(&after, k) != fallback_count(&before, k))
                    r->fallback = (int32_t)k;
        }
        snprintf(r->policy, sizeof(r->policy), "%s", wsel_host_policy_name(ex->hp->host));
        int scored = score_rows(ex, request, table);
        sim_explain_fill(r, request, table, &ex->hp->choice, scored ? ex->scores : NULL,
                         ex->order, ex->has_temperature, ex->temperature);
    }
    int32_t mirror_row = mirror_select(ex, request, table);
    if (r != NULL)
        r->mirror_row = mirror_row;
    return rc;
}

static void ex_finished(void *ctx, uint64_t request_id, uint64_t worker_id,
                        uint32_t dp_rank)
{
    sim_explain *ex = ctx;
    ex->inner.finished(ex->inner.ctx, request_id, worker_id, dp_rank);
    if (ex->instance && ex->mirror && ex->plugin->on_request_finished)
        ex->plugin->on_request_finished(ex->instance, request_id, worker_id, dp_rank);
}

static void ex_outcome(void *ctx, const wsel_outcome *outcome)
{
    sim_explain *ex = ctx;
    ex->inner.outcome(ex->inner.ctx, outcome);
    if (ex->instance == NULL || !ex->mirror)
        return;
    /* What wsel_host_request_outcome does for the live instance. */
    if (ex->plugin->on_request_finished)
        ex->plugin->on_request_finished(ex->instance, outcome->request_id,
                                        outcome->worker_id, outcome->dp_rank);
    if (PLUGIN_HAS(ex->plugin, on_request_outcome) && ex->plugin->on_request_outcome)
        ex->plugin->on_request_outcome(ex->instance, outcome);
}

static void close_instance(sim_explain *ex)
{
    if (ex->instance != NULL)
        ex->plugin->destroy(ex->instance);
    ex->instance = NULL;
    wsel_plugin_context_close(ex->pctx);
    ex->pctx = NULL;
    wsel_host_destroy(ex->child_host);
    ex->child_host = NULL;
    free(ex->params);
    ex->params = NULL;
    wsel_library_close(ex->lib);
    ex->lib = NULL;
    ex->plugin = NULL;
    ex->has_temperature = 0;
    ex->temperature = 0.0;
}

/* Open `path` a second time for its scores and its temperature parameter.
 * A failure leaves the explainer without scores, saying why in `warning`. */
static void open_instance(sim_explain *ex, const char *path, const char *config)
{
    char err[512] = "";
    ex->warning[0] = '\0';
    int32_t rc = wsel_library_open(path, NULL, &ex->lib, err, sizeof(err));
    if (rc < 0)
        goto out_warn;
    ex->plugin = wsel_library_plugin(ex->lib);
    ex->params = calloc(ex->plugin->num_params + 1u, sizeof(double));
    if (ex->params == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto out_warn;
    }
    wsel_host_options o;
    wsel_host_options_default(&o);
    rc = wsel_host_create(&o, &ex->child_host);
    if (rc < 0) {
        snprintf(err, sizeof(err), "cannot create a host: %s", wsel_strerror(rc));
        goto out_warn;
    }
    rc = wsel_plugin_context_open(ex->child_host, ex->lib, config, ex->params, &ex->pctx,
                                  err, sizeof(err));
    if (rc < 0)
        goto out_warn;
    for (uint32_t i = 0; i < ex->plugin->num_params; i++) {
        const wsel_param_def *d = wsel_library_param(ex->lib, i);
        if (d != NULL && d->name != NULL && strcmp(d->name, "temperature") == 0) {
            ex->has_temperature = 1;
            ex->temperature = ex->params[i];
        }
    }
    if (!PLUGIN_HAS(ex->plugin, score) || ex->plugin->score == NULL)
        return; /* no scores to show: keys are costs */
    rc = ex->plugin->create(wsel_plugin_context_api(ex->pctx), ex->params,
                            ex->plugin->num_params, &ex->instance);
    if (rc != 0) {
        ex->instance = NULL;
        snprintf(err, sizeof(err), "create() returned %d", rc);
        goto out_warn;
    }
    ex->mirror = !(ex->plugin->capabilities & WSEL_CAP_STATELESS);
    return;

out_warn:
    snprintf(ex->warning, sizeof(ex->warning), "no scores: %s", err);
    int has_temperature = ex->has_temperature;
    double temperature = ex->temperature;
    close_instance(ex);
    ex->has_temperature = has_temperature;
    ex->temperature = temperature;
}

static int32_t ex_switch(void *ctx, const char *path, const char *config, char *err,
                         size_t err_size)
{
    sim_explain *ex = ctx;
    int32_t rc = ex->inner.switch_to(ex->inner.ctx, path, config, err, err_size);
    if (rc == 0) {
        close_instance(ex);
        open_instance(ex, path, config);
    }
    return rc;
}

static uint64_t ex_fallbacks(void *ctx)
{
    sim_explain *ex = ctx;
    return ex->inner.fallbacks(ex->inner.ctx);
}

int32_t sim_explain_open(sim_explain *ex, uint32_t n, uint64_t total, uint64_t seed,
                         sim_host_policy *hp, sim_policy *policy, const char *path,
                         const char *config, uint32_t max_rows, char *err,
                         size_t err_size)
{
    memset(ex, 0, sizeof(*ex));
    if (max_rows > SIM_MAX_RANKS) {
        snprintf(err, err_size, "--explain: at most %d rows", SIM_MAX_RANKS);
        return WSEL_EINVAL;
    }
    ex->hp = hp;
    ex->max_rows = max_rows;
    ex->inner = *policy;
    ex->scores = calloc(max_rows ? max_rows : 1, sizeof(*ex->scores));
    ex->order = calloc(max_rows ? max_rows : 1, sizeof(*ex->order));
    int32_t rc = ex->scores && ex->order ? plan(ex, n, total, seed) : WSEL_ENOMEM;
    if (rc != 0) {
        snprintf(err, err_size, "--explain: out of memory");
        sim_explain_close(ex);
        return rc;
    }
    open_instance(ex, path, config);
    policy->ctx = ex;
    policy->select = ex_select;
    policy->finished = ex_finished;
    policy->outcome = ex->inner.outcome ? ex_outcome : NULL;
    policy->switch_to = ex->inner.switch_to ? ex_switch : NULL;
    policy->fallbacks = ex_fallbacks;
    return 0;
}

void sim_explain_close(sim_explain *ex)
{
    close_instance(ex);
    free(ex->picks);
    free(ex->records);
    free(ex->scores);
    free(ex->order);
    ex->picks = NULL;
    ex->records = NULL;
    ex->scores = NULL;
    ex->order = NULL;
}
