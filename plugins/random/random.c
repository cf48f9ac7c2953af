// SPDX-License-Identifier: Apache-2.0
/*
 * random -- send each request to an eligible row chosen uniformly at random.
 *
 * The baseline every load-aware policy must beat (balls into bins with one
 * choice). The draw comes from the request's seeded stream through the
 * host's rng_u64, so a decision is reproducible from (seed, request id).
 *
 * Eligible means not WSEL_ROW_EXCLUDED, and not WSEL_ROW_BUSY unless every
 * eligible row is busy. Two scans of the flags column: count, then find the
 * drawn row. Stateless and safe to call concurrently: the instance only
 * holds the host table.
 *
 * No score function (ABI 1.1), on purpose: a score says which rows a
 * policy prefers, and random prefers none. Its only truthful score is a
 * constant, which a composer normalises to 0 for every row (it adds
 * nothing to a pipeline), and per-row random numbers would be noise
 * passed off as a preference.
 * To put random in a pipeline, use it as the picker (picker_plugin): its
 * select then draws among the rows the pipeline's filters leave.
 */
#include <stdlib.h>

#include "wsel.h"

typedef struct random_policy {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
} random_policy;

/* [control thread] */
static int32_t random_create(const wsel_host_api *host, const double *params,
                             uint32_t num_params, void **out_instance)
{
    (void)params;
    if (host == NULL || out_instance == NULL || num_params != 0)
        return WSEL_EINVAL;
    random_policy *r = malloc(sizeof(*r));
    if (r == NULL)
        return WSEL_ENOMEM;
    r->host = host;
    *out_instance = r;
    return 0;
}

/* [control thread] */
static void random_destroy(void *instance)
{
    free(instance);
}

/* Index of the k-th (0-based) row whose flags miss `skip`, or num_rows
 * when there are not k + 1 of them (a host whose count was wrong). */
static uint32_t nth_row(const wsel_table *t, uint8_t skip, uint32_t k)
{
    uint32_t i = 0;
    for (; i < t->num_rows; i++) {
        if ((t->flags[i] & skip) == 0 && k-- == 0)
            break;
    }
    return i;
}

/* [select thread, concurrent] Draws from request->rng; no allocation. */
static int32_t random_select(void *instance, const wsel_request *request,
                             const wsel_table *table, wsel_choice *choice)
{
    const random_policy *r = instance;
    uint8_t skip;
    uint32_t m;
    /* The host's eligible-row rule (inline in a 1.0 host): idle rows, or
     * the busy ones when every eligible row is busy. */
    int32_t rc =
        wsel_call_eligible_skip(r->host, table->flags, table->num_rows, &skip, &m);
    if (rc < 0)
        return rc;
    uint32_t row = m ? nth_row(table, skip, wsel_call_rng_below(r->host, request->rng, m))
                     : table->num_rows;
    if (row >= table->num_rows)
        return WSEL_ENOCANDIDATE;
    wsel_choice_answer(choice, row, wsel_reason_unless_all_busy(skip, WSEL_REASON_RANDOM));
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "random",
    .version = "1.0.0",
    .description =
        "an eligible rank uniformly at random (load- and cache-blind baseline)",
    .params = NULL,
    .num_params = 0,
    .param_def_size = sizeof(wsel_param_def),
    .create = random_create,
    .destroy = random_destroy,
    .select = random_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
};
