// SPDX-License-Identifier: Apache-2.0
/*
 * pstack_prefixaware -- the vLLM production-stack router's `prefixaware`
 * routing logic, as a wsel plugin. Ported from
 * vllm-project/production-stack at a6c01db05f65,
 * src/vllm_router/routers/routing_logic.py (PrefixAwareRouter,
 * _qps_routing) and src/vllm_router/prefix/hashtrie.py.
 *
 * What it does: the rows holding the deepest cached prefix among the
 * candidates (every candidate when none holds any) are equally likely;
 * one is drawn at random, load unseen. When prefix_min_match_length is
 * above 0 and the deepest prefix is shorter, the request goes where the
 * router's rate is lowest instead (wsel: the first row with the fewest
 * requests in flight). docs/policies.md says how each input maps.
 *
 * Stateless and safe to call concurrently; select allocates nothing.
 */
#include <stdlib.h>

#include "row_load.h"
#include "wsel.h"

static const wsel_param_def pa_params[] = {
    {.name = "prefix_min_match_length",
     .doc = "tokens the deepest cached prefix must reach to be followed; shorter "
            "goes to the least loaded row (production-stack default 0: always)",
     .type = WSEL_PARAM_INT,
     .default_value = 0,
     .min_value = 0,
     .max_value = 1e12},
};

typedef struct prefixaware {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    uint64_t min_match;        /* tokens */
} prefixaware;

/* [control thread] */
static int32_t pa_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != 1)
        return WSEL_EINVAL;
    prefixaware *p = malloc(sizeof(*p));
    if (p == NULL)
        return WSEL_ENOMEM;
    p->host = host;
    p->min_match = (uint64_t)params[0];
    *out_instance = p;
    return 0;
}

/* [control thread] */
static void pa_destroy(void *instance)
{
    free(instance);
}

/* A uniform draw among the candidates holding `deepest` blocks. */
static uint32_t draw_deepest(const prefixaware *p, const wsel_table *t, uint8_t skip,
                             uint32_t deepest, wsel_rng *rng)
{
    uint32_t kept = ROW_LOAD_NONE, seen = 0;
    for (uint32_t i = 0; i < t->num_rows; i++)
        if (!(t->flags[i] & skip) && t->overlap_blocks[i] == deepest &&
            row_load_take_tie(p->host, rng, &seen))
            kept = i;
    return kept;
}

/* [select thread, concurrent] */
static int32_t pa_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    const prefixaware *p = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(p->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    uint32_t deepest = row_load_max_overlap(table, skip);
    uint32_t row, reason;
    if ((uint64_t)deepest * request->block_size < p->min_match) {
        row = row_load_first_least_active(table, skip);
        reason = WSEL_REASON_CHEAPEST;
    } else {
        row = draw_deepest(p, table, skip, deepest, request->rng);
        reason = deepest != 0 ? WSEL_REASON_STICKY : WSEL_REASON_RANDOM;
    }
    if (row == ROW_LOAD_NONE)
        return WSEL_ENOCANDIDATE;
    wsel_choice_answer(choice, row, reason);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "pstack_prefixaware",
    .version = "1.0.0",
    .description = "vLLM production-stack's prefixaware: a random row among those "
                   "holding the deepest cached prefix, load unseen",
    .params = pa_params,
    .num_params = 1,
    .param_def_size = sizeof(wsel_param_def),
    .create = pa_create,
    .destroy = pa_destroy,
    .select = pa_select,
};
