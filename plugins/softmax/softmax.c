// SPDX-License-Identifier: Apache-2.0
/*
 * softmax -- Dynamo's kv_router worker selection, as a wsel plugin.
 *
 * What it does: hands the table's default `cost` column to the host's
 * softmax_sample with the request's uniform draw. At temperature 0 that is
 * the cheapest row (exact ties broken by the draw); above 0 it samples rows
 * with p ~ exp(-(c - min) / ((max - min) T)), with the row Dynamo's
 * selector gives for the same draw (abi/wsel.h, softmax_sample, says how
 * an infinite range, equal costs and ties are handled).
 *
 * Why: it is the reference every other policy is measured against, and it
 * shows the smallest useful plugin that reuses a host helper instead of
 * reimplementing it.
 *
 * Temperature: wsel_request_temperature (abi/wsel.h) of the request and
 * the `temperature` parameter, whose default 0 is Dynamo's.
 *
 * Rows flagged WSEL_ROW_EXCLUDED are never candidates; rows flagged
 * WSEL_ROW_BUSY are candidates only when every eligible row is busy.
 *
 * Stateless and safe to call concurrently: the instance holds only the
 * host table and the configured temperature, both read-only after create.
 */
#include <stddef.h>
#include <stdlib.h>

#include "wsel.h"

typedef struct softmax {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    double temperature;        /* the `temperature` parameter */
} softmax;

static const wsel_param_def softmax_params[] = {
    {
        .name = "temperature",
        .doc = "softmax temperature (0 = cheapest row); a request's "
               "temperature override (0 included) or non-zero temperature wins",
        .type = WSEL_PARAM_DOUBLE,
        .default_value = 0.0,
        .min_value = 0.0,
        .max_value = 100.0,
    },
};

#define SOFTMAX_NUM_PARAMS (sizeof(softmax_params) / sizeof(softmax_params[0]))

/* [control thread] Copies the temperature; keeps `host` until destroy. */
static int32_t softmax_create(const wsel_host_api *host, const double *params,
                              uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL ||
        num_params != SOFTMAX_NUM_PARAMS)
        return WSEL_EINVAL;
    softmax *s = malloc(sizeof(*s));
    if (s == NULL)
        return WSEL_ENOMEM;
    s->host = host;
    s->temperature = params[0];
    *out_instance = s;
    return 0;
}

/* [control thread] */
static void softmax_destroy(void *instance)
{
    free(instance);
}

/* [select thread, concurrent] No allocation: the host helper uses none. */
static int32_t softmax_select(void *instance, const wsel_request *request,
                              const wsel_table *table, wsel_choice *choice)
{
    const softmax *s = instance;
    double t = wsel_request_temperature(request, s->temperature);
    uint32_t row;

    /* Rows that are neither excluded nor busy; if none is left, the busy
     * ones are better than no answer (the host's rule, eligible_skip;
     * inline in a 1.0 host). */
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(s->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    rc = s->host->softmax_sample(table->cost, table->flags, table->num_rows, skip, t,
                                 request->uniform, &row);
    if (rc < 0)
        return rc;
    choice->row = row;
    uint32_t reason = wsel_reason_unless_all_busy(
        skip, t > 0.0 ? WSEL_REASON_SAMPLED : WSEL_REASON_CHEAPEST);
    wsel_choice_explain(choice, reason, table->cost[row]);
    return 0;
}

/* [select thread, concurrent] The score is the default cost itself, lower
 * better: what softmax samples from (Dynamo's logit). */
static int32_t softmax_score(void *instance, const wsel_request *request,
                             const wsel_table *table, double *scores)
{
    (void)instance, (void)request;
    for (uint32_t i = 0; i < table->num_rows; i++)
        scores[i] = table->cost[i];
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "softmax",
    .version = "1.1.0",
    .description = "Dynamo's selection: softmax over the default cost (argmin at "
                   "T=0); a request's temperature override wins over the parameter",
    .params = softmax_params,
    .num_params = SOFTMAX_NUM_PARAMS,
    .param_def_size = sizeof(wsel_param_def),
    .create = softmax_create,
    .destroy = softmax_destroy,
    .select = softmax_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
    .score = softmax_score,
};
