// SPDX-License-Identifier: Apache-2.0
/*
 * host_policy.c -- route the simulator's requests through the real host.
 */
#include "host_policy.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int32_t hp_select(void *ctx, wsel_request *request, const wsel_rank_state *ranks,
                         uint32_t num_ranks, uint32_t *row, uint64_t *select_ns)
{
    sim_host_policy *hp = ctx;
    int32_t rc =
        wsel_table_build(&hp->table, request, ranks, num_ranks, hp->topology_epoch,
                         hp->build_err, sizeof(hp->build_err));
    if (rc != 0)
        return rc;
    wsel_host_prepare_request_sized(hp->host, request, sizeof(*request), request->rng);
    wsel_choice *choice = &hp->choice;
    memset(choice, 0, sizeof(*choice));
    choice->struct_size = sizeof(*choice);
    uint64_t t0 = now_ns();
    rc = wsel_host_select(hp->host, request, &hp->table.table, choice);
    *select_ns = now_ns() - t0;
    if (rc < 0)
        return rc;
    *row = choice->row;
    return rc;
}

static void hp_finished(void *ctx, uint64_t request_id, uint64_t worker_id,
                        uint32_t dp_rank)
{
    sim_host_policy *hp = ctx;
    wsel_host_request_finished(hp->host, request_id, worker_id, dp_rank);
}

static void hp_outcome(void *ctx, const wsel_outcome *outcome)
{
    sim_host_policy *hp = ctx;
    wsel_host_request_outcome(hp->host, outcome);
}

static int32_t hp_switch(void *ctx, const char *path, const char *config, char *err,
                         size_t err_size)
{
    sim_host_policy *hp = ctx;
    return wsel_host_switch(hp->host, path, config, err, err_size);
}

static uint64_t hp_fallbacks(void *ctx)
{
    sim_host_policy *hp = ctx;
    wsel_host_counters c;
    wsel_host_get_counters(hp->host, &c);
    return c.fallbacks;
}

int32_t sim_host_policy_open(sim_host_policy *hp, sim_policy *policy, const char *path,
                             const char *config, uint64_t seed, uint32_t isolated,
                             uint32_t max_ranks, char *err, size_t err_size)
{
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.seed = seed;
    opts.isolated = isolated;
    return sim_host_policy_open_opts(hp, policy, path, config, &opts, max_ranks, err,
                                     err_size);
}

int32_t sim_host_policy_open_opts(sim_host_policy *hp, sim_policy *policy,
                                  const char *path, const char *config,
                                  const wsel_host_options *opts, uint32_t max_ranks,
                                  char *err, size_t err_size)
{
    memset(hp, 0, sizeof(*hp));
    hp->topology_epoch = 1;
    int32_t rc = wsel_host_create(opts, &hp->host);
    if (rc != 0) {
        snprintf(err, err_size, "cannot create a host: %s", wsel_strerror(rc));
        return rc;
    }
    rc = wsel_table_buf_init(&hp->table, max_ranks);
    if (rc != 0) {
        snprintf(err, err_size, "cannot allocate a table of %u rows", max_ranks);
        goto out_destroy_host;
    }
    rc = wsel_host_switch(hp->host, path, config, err, err_size);
    if (rc != 0)
        goto out_free_table;
    policy->ctx = hp;
    policy->select = hp_select;
    policy->finished = hp_finished;
    policy->outcome = hp_outcome;
    policy->switch_to = hp_switch;
    policy->fallbacks = hp_fallbacks;
    return 0;

out_free_table:
    wsel_table_buf_free(&hp->table);
out_destroy_host:
    wsel_host_destroy(hp->host);
    hp->host = NULL;
    return rc;
}

void sim_host_policy_close(sim_host_policy *hp)
{
    wsel_table_buf_free(&hp->table);
    wsel_host_destroy(hp->host);
    hp->host = NULL;
}

int32_t sim_host_policy_open_replicas(sim_host_policy *hp, sim_policy *policies,
                                      uint32_t n, const char *path, const char *config,
                                      const wsel_host_options *opts, uint32_t max_ranks,
                                      char *err, size_t err_size)
{
    memset(hp, 0, n * sizeof(*hp));
    for (uint32_t k = 0; k < n; k++) {
        wsel_host_options o = *opts;
        o.seed = sim_replica_seed(opts->seed, k);
        int32_t rc = sim_host_policy_open_opts(&hp[k], &policies[k], path, config, &o,
                                               max_ranks, err, err_size);
        if (rc != 0) {
            sim_host_policy_close_replicas(hp, k);
            return rc;
        }
    }
    return 0;
}

void sim_host_policy_close_replicas(sim_host_policy *hp, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (hp[k].host != NULL)
            sim_host_policy_close(&hp[k]);
}
