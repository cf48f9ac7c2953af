// SPDX-License-Identifier: Apache-2.0
/*
 * fixture_v1_1.c -- a plugin using what ABI 1.1 adds: it answers the
 * cheapest row with an explanation (WSEL_REASON_CHEAPEST and its cost),
 * scores rows by cost, and logs every outcome it is told as
 * "outcome ID ttft=T e2e=E prompt=P cached=C output=O on W/R", so a test
 * reading the host's log sees exactly what reached the plugin. Once told
 * an outcome, it explains its answers with WSEL_REASON_PLUGIN + (the last
 * TTFT % 64), which shows through an isolated helper too (whose log goes
 * to its stderr). Not concurrent: the last TTFT is instance state.
 */
#include <stdio.h>
#include <stdlib.h>

#include "wsel.h"

typedef struct fx {
    const wsel_host_api *host;
    uint64_t last_ttft_us; /* 0 until an outcome arrives */
} fx;

static int32_t fx_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out)
{
    (void)params, (void)num_params;
    fx *f = malloc(sizeof(*f));
    if (f == NULL)
        return WSEL_ENOMEM;
    f->host = host;
    f->last_ttft_us = 0;
    *out = f;
    return 0;
}

static void fx_destroy(void *instance)
{
    free(instance);
}

static int32_t fx_select(void *instance, const wsel_request *req, const wsel_table *t,
                         wsel_choice *choice)
{
    fx *f = instance;
    uint8_t skip;
    int32_t rc = wsel_call_eligible_skip(f->host, t->flags, t->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    uint32_t row;
    rc = f->host->argmin(t->cost, t->flags, t->num_rows, skip, req->rng, &row);
    if (rc < 0)
        return rc;
    choice->row = row;
    if (WSEL_CHOICE_HAS(choice, score)) {
        choice->reason = f->last_ttft_us == 0
                             ? WSEL_REASON_CHEAPEST
                             : WSEL_REASON_PLUGIN + (uint32_t)(f->last_ttft_us % 64);
        choice->flags = WSEL_CHOICE_SCORED;
        choice->score = t->cost[row];
    }
    return 0;
}

static int32_t fx_score(void *instance, const wsel_request *req, const wsel_table *t,
                        double *scores)
{
    (void)instance, (void)req;
    for (uint32_t i = 0; i < t->num_rows; i++)
        scores[i] = t->cost[i];
    return 0;
}

static void fx_outcome(void *instance, const wsel_outcome *o)
{
    fx *f = instance;
    f->last_ttft_us = o->ttft_us;
    char msg[200];
    snprintf(msg, sizeof(msg),
             "outcome %llu ttft=%llu e2e=%llu prompt=%u cached=%u output=%u on %llu/%u",
             (unsigned long long)o->request_id, (unsigned long long)o->ttft_us,
             (unsigned long long)o->e2e_us, o->prompt_tokens, o->cached_tokens,
             o->output_tokens, (unsigned long long)o->worker_id, o->dp_rank);
    f->host->log(f->host, WSEL_LOG_WARN, msg);
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .name = "v1_1_fixture",
    .version = "1.1.0",
    .description = "explains its answers, scores by cost, logs its outcomes",
    .param_def_size = sizeof(wsel_param_def),
    .create = fx_create,
    .destroy = fx_destroy,
    .select = fx_select,
    .score = fx_score,
    .on_request_outcome = fx_outcome,
};
