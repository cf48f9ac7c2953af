// SPDX-License-Identifier: Apache-2.0
/*
 * host_policy.h -- a sim_policy backed by libwsel-host: one wsel_host per
 * policy, loaded with wsel_host_switch(path, config). Each select builds
 * the candidate table into one reusable wsel_table_buf (no allocation per
 * request), prepares the request and times wsel_host_select alone.
 * [control thread for open/close; the sim's single thread for the rest]
 * OWNERSHIP: the caller owns the sim_host_policy struct; close frees what
 * open allocated.
 */
#ifndef WSEL_SIM_HOST_POLICY_H
#define WSEL_SIM_HOST_POLICY_H

#include "sim.h"

typedef struct sim_host_policy {
    wsel_host *host;
    wsel_table_buf table;
    uint64_t topology_epoch;
    /* The last answer of select: row, and the plugin's reason and score
     * when it gave them (for `wsel sim --explain`). */
    wsel_choice choice;
    char build_err[256];
} sim_host_policy;

/* Create a host seeded with `seed` (isolated mode when `isolated` is 1),
 * load `path` with `config` (NULL = {}), and fill *policy to route through
 * it. Returns 0 or a negative code with the host's message in err. */
int32_t sim_host_policy_open(sim_host_policy *hp, sim_policy *policy, const char *path,
                             const char *config, uint64_t seed, uint32_t isolated,
                             uint32_t max_ranks, char *err, size_t err_size);
/* The same with the host's options spelled out (isolated deadline, hang
 * timeout, ...); `opts` is read during the call only. */
int32_t sim_host_policy_open_opts(sim_host_policy *hp, sim_policy *policy,
                                  const char *path, const char *config,
                                  const wsel_host_options *opts, uint32_t max_ranks,
                                  char *err, size_t err_size);
void sim_host_policy_close(sim_host_policy *hp);

/* One policy per router replica, as separate routers would create theirs:
 * hp[k] and policies[k] for k < n, each its own host loading `path`,
 * replica k's host seeded with sim_replica_seed(opts->seed, k). On
 * failure, what was opened is closed (every hp[k].host NULL) and the
 * message is in err. */
int32_t sim_host_policy_open_replicas(sim_host_policy *hp, sim_policy *policies,
                                      uint32_t n, const char *path, const char *config,
                                      const wsel_host_options *opts, uint32_t max_ranks,
                                      char *err, size_t err_size);
/* Close hp[0..n) (those open). */
void sim_host_policy_close_replicas(sim_host_policy *hp, uint32_t n);
/* Replica k's host seed: `seed` itself for replica 0 (one replica routes
 * as one router does), a distinct stream for the others. */
static inline uint64_t sim_replica_seed(uint64_t seed, uint32_t k)
{
    return seed + (uint64_t)k * 0x9e3779b97f4a7c15ull;
}

#endif
