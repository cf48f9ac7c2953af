// SPDX-License-Identifier: Apache-2.0
/*
 * validate_temperature.c -- the check select_temperature_override_zero: a
 * plugin that declares a parameter named `temperature`, configured high,
 * answers every request whose override says temperature 0 with the
 * cheapest row (abi/wsel.h, wsel_request_temperature).
 */
#include "validate.h"

#include <stdlib.h>
#include <string.h>

/* The configured temperature (clamped to the parameter's range): high
 * enough that sampling misses the cheapest row of 16 most of the time. */
#define VTEMP_CONFIGURED 5.0
#define VTEMP_REQUESTS   200u
#define VTEMP_WORKERS    16u

/* The descriptor of the parameter named "temperature", or NULL. */
static const wsel_param_def *temperature_param(const wsel_plugin *p, uint32_t *out_index)
{
    for (uint32_t i = 0; i < p->num_params; i++) {
        const wsel_param_def *d = (const wsel_param_def *)((const char *)p->params +
                                                           (size_t)i * p->param_def_size);
        if (d->name != NULL && strcmp(d->name, "temperature") == 0) {
            *out_index = i;
            return d;
        }
    }
    return NULL;
}

/* Make one row the best by every column a policy may weigh (cost, load,
 * cache, requests in flight) and every other row cost at least 1.
 * Returns that row. */
static uint32_t make_cheapest_row(vtable *vt, uint64_t seed)
{
    uint32_t best = (uint32_t)(seed % vt->t.num_rows);
    for (uint32_t i = 0; i < vt->t.num_rows; i++) {
        if (i != best && vt->decode_blocks[i] == 0) {
            vt->decode_blocks[i] = 1;
            vt->cost[i] += 1.0;
        }
    }
    vt->overlap_blocks[best] = 32;
    vt->prefill_tokens[best] = 0;
    vt->decode_blocks[best] = 0;
    vt->active_requests[best] = 0;
    vt->cost[best] = 0.0;
    return best;
}

/* Send the requests, each with the override bit and temperature 0;
 * record the first answer that is not `best`. */
static void select_overridden(const wsel_plugin *plugin, void *instance, const vtable *vt,
                              uint32_t best, double configured, const vcontext *ctx,
                              vcheck_result *res)
{
    for (uint64_t id = 1; id <= VTEMP_REQUESTS; id++) {
        vrequest vr;
        vrequest_make(&vr, ctx->seed, id, 32, 0.0);
        vr.req.overrides = WSEL_OVERRIDE_TEMPERATURE;
        wsel_choice c;
        memset(&c, 0, sizeof(c));
        c.struct_size = sizeof(c);
        int32_t rc = plugin->select(instance, &vr.req, &vt->t, &c);
        if (rc == 0 && c.row == best)
            continue;
        if (rc != 0)
            vfail(res, "request %llu: select returned %d (%s)", (unsigned long long)id,
                  rc, wsel_errname(rc));
        else
            vfail(res,
                  "request %llu: row %u, not the cheapest row %u: configured at "
                  "temperature %g, a request with WSEL_OVERRIDE_TEMPERATURE and "
                  "temperature 0 must get the cheapest row (wsel_request_temperature)",
                  (unsigned long long)id, c.row, best, configured);
        return;
    }
}

void vcheck_temperature_override(const vcontext *ctx, vcheck_result *res)
{
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    uint32_t index;
    const wsel_param_def *d = temperature_param(vi.plugin, &index);
    double configured = VTEMP_CONFIGURED;
    if (d != NULL) {
        configured = configured > d->max_value ? d->max_value : configured;
        configured = configured < d->min_value ? d->min_value : configured;
    }
    if (d == NULL || !(configured > 0.0)) {
        vskip(res, "no parameter named temperature that can be above 0");
        goto out_close_instance;
    }
    double *params = malloc((vi.plugin->num_params + 1u) * sizeof(*params));
    if (params == NULL) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    memcpy(params, vi.params, vi.plugin->num_params * sizeof(*params));
    params[index] = configured;
    void *instance = NULL;
    int32_t rc = vinstance_create(&vi, params, &instance);
    if (rc < 0) {
        vfail(res, "create() at temperature %g returned %d (%s)", configured, rc,
              wsel_errname(rc));
        goto out_free_params;
    }
    vtable vt;
    if (vtable_init(&vt, VTEMP_WORKERS, NULL, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_destroy;
    }
    uint32_t best = make_cheapest_row(&vt, ctx->seed);
    select_overridden(vi.plugin, instance, &vt, best, configured, ctx, res);
    vtable_free(&vt);
out_destroy:
    vi.plugin->destroy(instance);
out_free_params:
    free(params);
out_close_instance:
    vinstance_close(&vi);
}
