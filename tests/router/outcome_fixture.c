// SPDX-License-Identifier: Apache-2.0
/*
 * outcome_fixture.c -- a plugin that answers the cheapest row and logs
 * every outcome it is told, all of its fields, as
 * "outcome ID on W/R ttft=T e2e=E fin=F prompt=P cached=C output=O flags=X",
 * so a test reading the host's log sees exactly what libwsel-router
 * delivered. It logs on_request_finished as "finished ID on W/R" too, to
 * show the order of the two hooks, and, for tables of at most 8 rows,
 * every column it is asked to choose from ("table rows=..."), so a test
 * can compare the router's table with wsel_table_build's. It answers the
 * cheapest row that is neither excluded nor busy (busy ones only when
 * every eligible row is busy).
 */
#include <stdio.h>
#include <stdlib.h>

#include "wsel.h"

typedef struct fx {
    const wsel_host_api *host;
} fx;

static int32_t fx_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out)
{
    (void)params, (void)num_params;
    fx *f = malloc(sizeof(*f));
    if (f == NULL)
        return WSEL_ENOMEM;
    f->host = host;
    *out = f;
    return 0;
}

static void fx_destroy(void *instance)
{
    free(instance);
}

/* The whole table, as test_router's format_table writes it. */
static void log_table(fx *f, const wsel_table *t)
{
    char msg[2048];
    size_t n = (size_t)snprintf(msg, sizeof(msg), "table rows=%u groups=%u epoch=%llu",
                                t->num_rows, t->num_groups,
                                (unsigned long long)t->topology_epoch);
    for (uint32_t i = 0; i < t->num_rows && n < sizeof(msg); i++)
        n += (size_t)snprintf(
            msg + n, sizeof(msg) - n,
            " | %llu/%u o=%u p=%llu d=%llu c=%a f=%u a=%u k=%llu",
            (unsigned long long)t->worker_id[i], t->dp_rank[i], t->overlap_blocks[i],
            (unsigned long long)t->prefill_tokens[i],
            (unsigned long long)t->decode_blocks[i], t->cost[i], t->flags[i],
            t->active_requests[i], (unsigned long long)t->kv_capacity_blocks[i]);
    for (uint32_t g = 0; g < t->num_groups && n < sizeof(msg); g++)
        n += (size_t)snprintf(msg + n, sizeof(msg) - n, " g%u+%u", t->group_first_row[g],
                              t->group_row_count[g]);
    f->host->log(f->host, WSEL_LOG_WARN, msg);
}

static int32_t fx_select(void *instance, const wsel_request *req, const wsel_table *t,
                         wsel_choice *choice)
{
    fx *f = instance;
    if (t->num_rows <= 8)
        log_table(f, t);
    uint8_t skip = WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
    for (uint32_t i = 0; i < t->num_rows; i++)
        if ((t->flags[i] & skip) == 0)
            return f->host->argmin(t->cost, t->flags, t->num_rows, skip, req->rng,
                                   &choice->row);
    return f->host->argmin(t->cost, t->flags, t->num_rows, WSEL_ROW_EXCLUDED, req->rng,
                           &choice->row);
}

static void fx_finished(void *instance, uint64_t request_id, uint64_t worker_id,
                        uint32_t dp_rank)
{
    fx *f = instance;
    char msg[96];
    snprintf(msg, sizeof(msg), "finished %llu on %llu/%u", (unsigned long long)request_id,
             (unsigned long long)worker_id, dp_rank);
    f->host->log(f->host, WSEL_LOG_WARN, msg);
}

static void fx_outcome(void *instance, const wsel_outcome *o)
{
    fx *f = instance;
    char msg[256];
    snprintf(msg, sizeof(msg),
             "outcome %llu on %llu/%u ttft=%llu e2e=%llu fin=%llu prompt=%u cached=%u "
             "output=%u flags=%u",
             (unsigned long long)o->request_id, (unsigned long long)o->worker_id,
             o->dp_rank, (unsigned long long)o->ttft_us, (unsigned long long)o->e2e_us,
             (unsigned long long)o->finished_us, o->prompt_tokens, o->cached_tokens,
             o->output_tokens, o->flags);
    f->host->log(f->host, WSEL_LOG_WARN, msg);
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .name = "router_outcome_fixture",
    .version = "1.0.0",
    .description = "answers the cheapest row, logs every outcome",
    .param_def_size = sizeof(wsel_param_def),
    .create = fx_create,
    .destroy = fx_destroy,
    .select = fx_select,
    .on_request_finished = fx_finished,
    .on_request_outcome = fx_outcome,
};
