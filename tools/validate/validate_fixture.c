// SPDX-License-Identifier: Apache-2.0
/*
 * validate_fixture.c -- what the checks feed a plugin: owned candidate
 * tables, requests, the host table, and instances created from a config.
 */
#include "validate.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int32_t vtable_init(vtable *vt, uint32_t num_groups, const uint32_t *dp_sizes,
                    uint64_t seed)
{
    uint32_t rows = 0;
    for (uint32_t g = 0; g < num_groups; g++)
        rows += dp_sizes ? dp_sizes[g] : 1;
    if (rows == 0 || num_groups == 0)
        return WSEL_EINVAL;

    vtable t;
    memset(&t, 0, sizeof(t));
    t.worker_id = calloc(rows, sizeof(*t.worker_id));
    t.dp_rank = calloc(rows, sizeof(*t.dp_rank));
    t.overlap_blocks = calloc(rows, sizeof(*t.overlap_blocks));
    t.prefill_tokens = calloc(rows, sizeof(*t.prefill_tokens));
    t.decode_blocks = calloc(rows, sizeof(*t.decode_blocks));
    t.cost = calloc(rows, sizeof(*t.cost));
    t.kv_capacity_blocks = calloc(rows, sizeof(*t.kv_capacity_blocks));
    t.active_requests = calloc(rows, sizeof(*t.active_requests));
    t.flags = calloc(rows, sizeof(*t.flags));
    t.group_first_row = calloc(num_groups, sizeof(*t.group_first_row));
    t.group_row_count = calloc(num_groups, sizeof(*t.group_row_count));
    if (!t.worker_id || !t.dp_rank || !t.overlap_blocks || !t.prefill_tokens ||
        !t.decode_blocks || !t.cost || !t.kv_capacity_blocks || !t.active_requests ||
        !t.flags || !t.group_first_row || !t.group_row_count) {
        vtable_free(&t);
        return WSEL_ENOMEM;
    }

    wsel_rng rng;
    wsel_rng_seed(&rng, seed ^ 0x7ab1e5eedull);
    uint32_t row = 0;
    for (uint32_t g = 0; g < num_groups; g++) {
        uint32_t dp = dp_sizes ? dp_sizes[g] : 1;
        t.group_first_row[g] = row;
        t.group_row_count[g] = dp;
        for (uint32_t r = 0; r < dp; r++, row++) {
            /* Ids with gaps, as a real fleet has. */
            t.worker_id[row] = 100 + 7 * (uint64_t)g;
            t.dp_rank[row] = r;
            t.overlap_blocks[row] = wsel_rng_below(&rng, 33);
            t.prefill_tokens[row] =
                (32 - t.overlap_blocks[row]) * 16u + wsel_rng_below(&rng, 4096);
            t.decode_blocks[row] =
                32 - t.overlap_blocks[row] + wsel_rng_below(&rng, 8000);
            t.cost[row] =
                (double)t.prefill_tokens[row] / 16.0 + (double)t.decode_blocks[row];
            t.kv_capacity_blocks[row] = 16384;
            t.active_requests[row] = wsel_rng_below(&rng, 64);
        }
    }
    t.t.struct_size = sizeof(wsel_table);
    t.t.num_rows = rows;
    t.t.num_groups = num_groups;
    t.t.topology_epoch = 1;
    t.t.worker_id = t.worker_id;
    t.t.dp_rank = t.dp_rank;
    t.t.overlap_blocks = t.overlap_blocks;
    t.t.prefill_tokens = t.prefill_tokens;
    t.t.decode_blocks = t.decode_blocks;
    t.t.cost = t.cost;
    t.t.kv_capacity_blocks = t.kv_capacity_blocks;
    t.t.active_requests = t.active_requests;
    t.t.flags = t.flags;
    t.t.group_first_row = t.group_first_row;
    t.t.group_row_count = t.group_row_count;
    *vt = t;
    return 0;
}

void vtable_free(vtable *vt)
{
    free(vt->worker_id);
    free(vt->dp_rank);
    free(vt->overlap_blocks);
    free(vt->prefill_tokens);
    free(vt->decode_blocks);
    free(vt->cost);
    free(vt->kv_capacity_blocks);
    free(vt->active_requests);
    free(vt->flags);
    free(vt->group_first_row);
    free(vt->group_row_count);
    memset(vt, 0, sizeof(*vt));
}

void vrequest_make(vrequest *vr, uint64_t seed, uint64_t id, uint32_t num_hashes,
                   double temperature)
{
    memset(vr, 0, sizeof(*vr));
    if (num_hashes > 32)
        num_hashes = 32;
    wsel_rng_seed(&vr->rng, seed ^ (id * 0x9e3779b97f4a7c15ull));
    /* Prompts of 16 sessions share prefixes: hash i depends on the
     * session and i only. */
    uint64_t session = 1 + wsel_rng_below(&vr->rng, 16);
    for (uint32_t i = 0; i < num_hashes; i++)
        vr->hashes[i] = session * 0x100000001b3ull + i * 0xcbf29ce484222325ull;
    vr->req.struct_size = sizeof(wsel_request);
    vr->req.request_id = id;
    vr->req.affinity_key = session;
    vr->req.timestamp_us = 1000 * id;
    vr->req.isl_tokens = 16 * (num_hashes ? num_hashes : 1);
    vr->req.block_size = 16;
    vr->req.num_block_hashes = num_hashes;
    vr->req.block_hashes = num_hashes ? vr->hashes : NULL;
    vr->req.overlap_score_weight = 1.0;
    vr->req.temperature = temperature;
    vr->req.uniform = wsel_rng_uniform(&vr->rng);
    vr->req.rng = &vr->rng;
}

static void log_to_stderr(const wsel_host_api *host, int32_t level, const char *msg)
{
    (void)host;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const char *name = level >= 0 && level <= 3 ? names[level] : "log";
    fprintf(stderr, "wsel validate: plugin %s: %s\n", name, msg ? msg : "(null)");
}

static wsel_host_api validate_api;

static void init_validate_api(void)
{
    wsel_host_api_init(&validate_api, NULL, log_to_stderr);
}

const wsel_host_api *vhost_api(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_validate_api);
    return &validate_api;
}

int32_t vinstance_open(vinstance *vi, const vcontext *ctx, vcheck_result *res)
{
    char err[512] = "";
    vinstance v;
    memset(&v, 0, sizeof(v));
    int32_t rc = wsel_library_open(ctx->path, NULL, &v.lib, err, sizeof(err));
    if (rc < 0) {
        vfail(res, "cannot load %s: %s", ctx->path, err);
        return rc;
    }
    v.plugin = wsel_library_plugin(v.lib);
    v.params = calloc(v.plugin->num_params + 1u, sizeof(double));
    if (v.params == NULL) {
        vfail(res, "out of memory");
        rc = WSEL_ENOMEM;
        goto out_close_lib;
    }
    /* A host for the plugin's children (a pipeline's): the same trust
     * rules, its log to stderr. */
    wsel_host_options o;
    wsel_host_options_default(&o);
    rc = wsel_host_create(&o, &v.host);
    if (rc < 0) {
        vfail(res, "cannot create a host: %s", wsel_strerror(rc));
        goto out_free_params;
    }
    rc = wsel_plugin_context_open(v.host, v.lib, ctx->config, v.params, &v.pctx, err,
                                  sizeof(err));
    if (rc < 0) {
        vfail(res, "config %s refused: %s", ctx->config ? ctx->config : "{}", err);
        goto out_destroy_host;
    }
    rc = vinstance_create(&v, v.params, &v.instance);
    v.has_instance = rc == 0;
    if (rc < 0) {
        vfail(res, "create() with config %s returned %d (%s)",
              ctx->config ? ctx->config : "{}", rc, wsel_errname(rc));
        goto out_close_context;
    }
    *vi = v;
    return 0;

out_close_context:
    wsel_plugin_context_close(v.pctx);
out_destroy_host:
    wsel_host_destroy(v.host);
out_free_params:
    free(v.params);
out_close_lib:
    wsel_library_close(v.lib);
    return rc;
}

int32_t vinstance_create(const vinstance *vi, const double *params, void **out)
{
    void *instance = NULL;
    const wsel_host_api *api =
        vi->pctx != NULL ? wsel_plugin_context_api(vi->pctx) : vhost_api();
    int32_t rc = vi->plugin->create(api, params, vi->plugin->num_params, &instance);
    if (rc > 0)
        return WSEL_EPLUGIN;
    if (rc == 0)
        *out = instance;
    return rc;
}

void vinstance_close(vinstance *vi)
{
    if (vi->has_instance)
        vi->plugin->destroy(vi->instance);
    wsel_plugin_context_close(vi->pctx);
    if (vi->host != NULL)
        wsel_host_destroy(vi->host);
    free(vi->params);
    if (vi->lib != NULL)
        wsel_library_close(vi->lib);
    memset(vi, 0, sizeof(*vi));
}
