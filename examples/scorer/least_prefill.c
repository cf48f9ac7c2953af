// SPDX-License-Identifier: Apache-2.0
/*
 * least_prefill.c -- a third-party-style scorer, built against wsel.h alone.
 *
 * Policy: the eligible rank with the fewest prompt tokens left to prefill
 * for this request (the table's prefill_tokens: its backlog plus this
 * request's uncached tokens), ties to the lowest default cost, then to the
 * first row. Score (ABI 1.1): prefill_tokens itself, lower better, so a
 * pipeline can weigh it against other scorers and argmin of the scores is
 * what select answers (up to ties). Stateless: safe on many threads.
 */
#include <stdlib.h>

#include <wsel.h>

#if WSEL_ABI_MINOR < 1
#error "least_prefill needs wsel.h of ABI 1.1 or later (score, reason)"
#endif

typedef struct least_prefill {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
} least_prefill;

static int32_t lp_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    (void)params, (void)num_params;
    least_prefill *self = malloc(sizeof(*self));
    if (self == NULL)
        return WSEL_ENOMEM;
    self->host = host;
    *out_instance = self;
    return 0;
}

static void lp_destroy(void *instance)
{
    free(instance);
}

/* [select thread, concurrent] No allocation. */
static int32_t lp_select(void *instance, const wsel_request *request, const wsel_table *t,
                         wsel_choice *choice)
{
    const least_prefill *self = instance;
    (void)request;
    uint8_t skip; /* the host's rule: not excluded; busy only if all are */
    int32_t rc = wsel_call_eligible_skip(self->host, t->flags, t->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (t->flags[i] & skip)
            continue;
        if (best == UINT32_MAX || t->prefill_tokens[i] < t->prefill_tokens[best] ||
            (t->prefill_tokens[i] == t->prefill_tokens[best] &&
             t->cost[i] < t->cost[best]))
            best = i;
    }
    if (best == UINT32_MAX) /* only a host that broke its own rule */
        return WSEL_ENOCANDIDATE;
    choice->row = best;
    if (WSEL_CHOICE_HAS(choice, score)) { /* the explanation, on a 1.1 host */
        choice->reason =
            skip & WSEL_ROW_BUSY ? WSEL_REASON_CHEAPEST : WSEL_REASON_ALL_BUSY;
        choice->flags = WSEL_CHOICE_SCORED;
        choice->score = (double)t->prefill_tokens[best];
    }
    return 0;
}

/* [select thread, concurrent] One finite score per row, lower better. */
static int32_t lp_score(void *instance, const wsel_request *request, const wsel_table *t,
                        double *scores)
{
    (void)instance, (void)request;
    for (uint32_t i = 0; i < t->num_rows; i++)
        scores[i] = (double)t->prefill_tokens[i];
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "least_prefill",
    .version = "1.0.0",
    .description = "fewest prompt tokens left to prefill; scores them for a pipeline",
    .param_def_size = sizeof(wsel_param_def),
    .create = lp_create,
    .destroy = lp_destroy,
    .select = lp_select,
    .score = lp_score,
};
