// SPDX-License-Identifier: Apache-2.0
/*
 * session_hash -- session-keyed hashing as two peers ship it, as a wsel
 * plugin: the vLLM production-stack router's `session` routing logic
 * (vllm-project/production-stack at a6c01db05f65,
 * src/vllm_router/routers/routing_logic.py, SessionRouter) and vLLM's
 * router's `consistent_hash` (vllm-project/router at 080589a0b729,
 * src/policies/consistent_hash.rs; hash_key.rs at 335c57e2ee62).
 *
 * What it does: the request's affinity_key (the session id) picks a row
 * by rendezvous hashing: the row whose mix of (key, worker, rank) is
 * highest. Like the peers' rings, a key keeps its row while that row
 * stays, and only the keys of a row that leaves move. Then, by `peer`:
 *   production_stack: the ring holds the candidates only; without a key,
 *     the row with the router's lowest rate (wsel: the first row with the
 *     fewest requests in flight).
 *   vllm_router: the ring holds every row; a chosen row that is not a
 *     candidate gives way to the first candidate; without a key, the
 *     request's content is the key (its deepest block hash).
 * docs/policies.md says why rendezvous stands in for their rings.
 *
 * Stateless and safe to call concurrently; select allocates nothing.
 */
#include <stdlib.h>

#include "row_load.h"
#include "sticky_table.h"
#include "wsel.h"

#define SH_PEER_PRODUCTION_STACK 0u
#define SH_PEER_VLLM_ROUTER      1u

static const char *const sh_peer_names[] = {"production_stack", "vllm_router", NULL};

static const wsel_param_def sh_params[] = {
    {.name = "peer",
     .doc = "production_stack: hash over the candidates, no key -> least loaded; "
            "vllm_router: hash over every row, no key -> the prompt's hash",
     .type = WSEL_PARAM_ENUM,
     .default_value = SH_PEER_PRODUCTION_STACK,
     .min_value = SH_PEER_PRODUCTION_STACK,
     .max_value = SH_PEER_VLLM_ROUTER,
     .choices = sh_peer_names},
};

typedef struct session_hash {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    uint32_t peer;             /* SH_PEER_* */
} session_hash;

/* [control thread] */
static int32_t sh_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != 1)
        return WSEL_EINVAL;
    session_hash *s = malloc(sizeof(*s));
    if (s == NULL)
        return WSEL_ENOMEM;
    s->host = host;
    s->peer = (uint32_t)params[0];
    *out_instance = s;
    return 0;
}

/* [control thread] */
static void sh_destroy(void *instance)
{
    free(instance);
}

/* The row among those whose flags miss `skip` with the highest rendezvous
 * weight for `key`; ROW_LOAD_NONE when none. */
static uint32_t rendezvous(const wsel_table *t, uint8_t skip, uint64_t key)
{
    uint32_t best = ROW_LOAD_NONE;
    uint64_t best_weight = 0;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (t->flags[i] & skip)
            continue;
        uint64_t row_mix = mix64(sticky_worker_mix(t->worker_id[i]) + t->dp_rank[i]);
        uint64_t weight = mix64(key ^ row_mix);
        if (best == ROW_LOAD_NONE || weight > best_weight) {
            best = i;
            best_weight = weight;
        }
    }
    return best;
}

/* The first candidate in row order. */
static uint32_t first_candidate(const wsel_table *t, uint8_t skip)
{
    for (uint32_t i = 0; i < t->num_rows; i++)
        if (!(t->flags[i] & skip))
            return i;
    return ROW_LOAD_NONE;
}

/* vLLM's router: the whole ring, then the first candidate. */
static uint32_t vllm_router_row(const wsel_request *r, const wsel_table *t, uint8_t skip)
{
    uint64_t key = r->affinity_key;
    if (key == 0 && r->num_block_hashes != 0)
        key = r->block_hashes[r->num_block_hashes - 1];
    uint32_t row = key != 0 ? rendezvous(t, 0, key) : ROW_LOAD_NONE;
    if (row == ROW_LOAD_NONE || (t->flags[row] & skip))
        row = first_candidate(t, skip);
    return row;
}

/* [select thread, concurrent] */
static int32_t sh_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    const session_hash *s = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(s->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    uint32_t row, reason = WSEL_REASON_HASHED;
    if (s->peer == SH_PEER_VLLM_ROUTER) {
        row = vllm_router_row(request, table, skip);
    } else if (request->affinity_key != 0) {
        row = rendezvous(table, skip, request->affinity_key);
    } else {
        row = row_load_first_least_active(table, skip);
        reason = WSEL_REASON_CHEAPEST;
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
    .name = "session_hash",
    .version = "1.0.0",
    .description = "session hashing (production-stack's session, vLLM router's "
                   "consistent_hash): the key's row, load unseen",
    .params = sh_params,
    .num_params = 1,
    .param_def_size = sizeof(wsel_param_def),
    .create = sh_create,
    .destroy = sh_destroy,
    .select = sh_select,
};
