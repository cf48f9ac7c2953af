// SPDX-License-Identifier: Apache-2.0
/*
 * aibrix_least_request -- AIBrix's routing algorithm `least-request`, as a
 * wsel plugin. Ported from vllm-project/aibrix at e3e10f9e4aeb,
 * pkg/plugins/gateway/algorithms/least_request.go (Route, ScoreAll).
 *
 * What it does: the row with the fewest requests running (wsel: in
 * flight, active_requests), exact ties uniform at random.
 *
 * Stateless and safe to call concurrently; select allocates nothing.
 * score() answers each row's requests in flight (lower is better).
 */
#include <stdlib.h>

#include "row_load.h"
#include "wsel.h"

typedef struct least_request {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
} least_request;

/* [control thread] */
static int32_t lr_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    (void)params;
    if (host == NULL || out_instance == NULL || num_params != 0)
        return WSEL_EINVAL;
    least_request *l = malloc(sizeof(*l));
    if (l == NULL)
        return WSEL_ENOMEM;
    l->host = host;
    *out_instance = l;
    return 0;
}

/* [control thread] */
static void lr_destroy(void *instance)
{
    free(instance);
}

/* [select thread, concurrent] */
static int32_t lr_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    const least_request *l = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(l->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    uint32_t row = row_load_least_active(l->host, table, skip, 0, request->rng);
    if (row == ROW_LOAD_NONE)
        return WSEL_ENOCANDIDATE;
    wsel_choice_answer(choice, row, wsel_reason_unless_all_busy(skip, WSEL_REASON_CHEAPEST));
    return 0;
}

/* [select thread, concurrent] */
static int32_t lr_score(void *instance, const wsel_request *request,
                        const wsel_table *table, double *scores)
{
    (void)instance;
    (void)request;
    for (uint32_t i = 0; i < table->num_rows; i++)
        scores[i] = (double)table->active_requests[i];
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "aibrix_least_request",
    .version = "1.0.0",
    .description = "AIBrix's least-request: the fewest requests in flight, ties at "
                   "random",
    .params = NULL,
    .num_params = 0,
    .param_def_size = sizeof(wsel_param_def),
    .create = lr_create,
    .destroy = lr_destroy,
    .select = lr_select,
    .score = lr_score,
};
