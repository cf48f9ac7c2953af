// SPDX-License-Identifier: Apache-2.0
/* topology.c -- workers and their rank slots: add, drain, remove, the
 * canonical row order and the epoch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router_internal.h"

static int row_cmp_ctx(const wsel_router *r, uint32_t a, uint32_t b)
{
    const rt_slot *x = &r->slots[a], *y = &r->slots[b];
    uint64_t wa = r->workers[x->worker].id, wb = r->workers[y->worker].id;
    if (wa != wb)
        return wa < wb ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

void rt_rebuild_rows(wsel_router *r)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < r->opt.max_rows; s++)
        if (r->slots[s].worker != RT_NIL)
            r->rows[n++] = s;
    /* Insertion sort: topology changes are rare and rows few. */
    for (uint32_t i = 1; i < n; i++) {
        uint32_t v = r->rows[i], j = i;
        while (j > 0 && row_cmp_ctx(r, r->rows[j - 1], v) > 0) {
            r->rows[j] = r->rows[j - 1];
            j--;
        }
        r->rows[j] = v;
    }
    r->num_rows = n;
    r->epoch++;
}

uint32_t rt_slot_of(const wsel_router *r, uint64_t worker_id, uint32_t rank)
{
    uint32_t w = rt_map_get(&r->worker_ids, worker_id);
    if (w == RT_MAP_NONE || rank >= r->workers[w].dp_size)
        return RT_NIL;
    return r->workers[w].slots[rank];
}

/* Free n copied endpoints (NULL entries and a NULL array are no-ops). */
static void free_endpoints(char **eps, uint32_t n)
{
    for (uint32_t i = 0; eps && i < n; i++)
        free(eps[i]);
    free(eps);
}

static void set_err(char *err, size_t size, const char *fmt, uint64_t a)
{
    if (err && size)
        snprintf(err, size, fmt, (unsigned long long)a);
}

/* The worker's KV endpoints copied, one per rank (*out NULL when the
 * router does not read KV events or the worker names none). */
static int32_t copy_endpoints(const wsel_router *r, const wsel_router_worker *wk,
                              char ***out, char *err, size_t err_size)
{
    *out = NULL;
    if (!wk->kv_endpoints || r->opt.kv_source != WSEL_ROUTER_KV_EVENTS)
        return 0;
    char **eps = calloc(wk->dp_size, sizeof(*eps));
    if (!eps)
        return WSEL_ENOMEM;
    for (uint32_t i = 0; i < wk->dp_size; i++) {
        if (!wk->kv_endpoints[i] || !(eps[i] = strdup(wk->kv_endpoints[i]))) {
            set_err(err, err_size, "add_worker %llu: a KV endpoint per rank",
                    wk->worker_id);
            free_endpoints(eps, wk->dp_size);
            return wk->kv_endpoints[i] ? WSEL_ENOMEM : WSEL_EINVAL;
        }
    }
    *out = eps;
    return 0;
}

/* Under the mutex: a free worker entry (*w) with dp_size free slots, its
 * id registered. */
static int32_t claim_worker(wsel_router *r, const wsel_router_worker *wk, uint32_t *w,
                            char *err, size_t err_size)
{
    if (rt_map_get(&r->worker_ids, wk->worker_id) != RT_MAP_NONE) {
        set_err(err, err_size, "add_worker: worker %llu exists", wk->worker_id);
        return WSEL_ESTATE;
    }
    uint32_t free_slots = 0;
    *w = RT_NIL;
    for (uint32_t i = 0; i < r->opt.max_rows; i++) {
        if (*w == RT_NIL && !r->workers[i].in_use)
            *w = i;
        free_slots += r->slots[i].worker == RT_NIL;
    }
    if (*w == RT_NIL || free_slots < wk->dp_size) {
        set_err(err, err_size, "add_worker: more rows than max_rows (%llu)",
                r->opt.max_rows);
        return WSEL_ERANGE;
    }
    return rt_map_put(&r->worker_ids, wk->worker_id, *w) != 0 ? WSEL_ENOMEM : 0;
}

/* Under the mutex: fill worker entry w and give its ranks the first free
 * slots, gens[k] the generation of rank k's slot. */
static void place_worker(wsel_router *r, uint32_t w, const wsel_router_worker *wk,
                         char **eps, uint32_t *gens)
{
    rt_worker *wr = &r->workers[w];
    memset(wr, 0, sizeof(*wr));
    wr->id = wk->worker_id;
    wr->in_use = 1;
    wr->dp_size = wk->dp_size;
    snprintf(wr->address, sizeof(wr->address), "%s", wk->address);
    wr->kv_endpoints = eps;
    for (uint32_t k = 0, s = 0; k < wk->dp_size; s++) {
        if (r->slots[s].worker != RT_NIL)
            continue;
        uint32_t gen = r->slots[s].gen;
        r->slots[s] = (rt_slot){.worker = w, .rank = k, .gen = gen};
        r->load[s] = (rt_load){0};
        gens[k] = gen;
        wr->slots[k++] = s;
    }
    rt_rebuild_rows(r);
}

int32_t wsel_router_add_worker(wsel_router *r, const wsel_router_worker *wk, char *err,
                               size_t err_size)
{
    if (!r || !wk || !wk->address || wk->dp_size == 0 || wk->dp_size > RT_MAX_DP ||
        strlen(wk->address) >= sizeof(r->workers[0].address)) {
        set_err(
            err, err_size,
            "add_worker %llu: an address (< 256 bytes) and dp_size 1..64 are required",
            wk ? wk->worker_id : 0);
        return WSEL_EINVAL;
    }
    char **eps;
    int32_t rc = copy_endpoints(r, wk, &eps, err, err_size);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&r->mu);
    uint32_t w;
    rc = claim_worker(r, wk, &w, err, err_size);
    if (rc < 0) {
        pthread_mutex_unlock(&r->mu);
        free_endpoints(eps, wk->dp_size);
        return rc;
    }
    uint32_t gens[RT_MAX_DP];
    place_worker(r, w, wk, eps, gens);
    /* Subscribed under the mutex, as remove and drain unsubscribe: the KV
     * thread then takes the requests in the order the topology changed
     * (a remove posted after a concurrent re-add of the id would close the
     * new incarnation's sockets). The KV thread never takes the mutex. */
    if (eps) {
        rc = rt_kvsub_add(r, wk->worker_id, wk->dp_size, eps, r->workers[w].slots, gens);
        if (rc != 0) {
            set_err(err, err_size, "add_worker %llu: cannot subscribe to its KV events",
                    wk->worker_id);
            rt_worker_free(r, w); /* frees eps, now the worker's */
        }
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void rt_worker_free(wsel_router *r, uint32_t w)
{
    rt_worker *wr = &r->workers[w];
    for (uint32_t k = 0; k < wr->dp_size; k++) {
        uint32_t s = wr->slots[k];
        rt_index_clear_slot(&r->ix, s);
        uint32_t gen = r->slots[s].gen + 1;
        r->slots[s] = (rt_slot){.worker = RT_NIL, .gen = gen};
        r->load[s] = (rt_load){0};
    }
    rt_map_del(&r->worker_ids, wr->id);
    free_endpoints(wr->kv_endpoints, wr->dp_size);
    memset(wr, 0, sizeof(*wr));
    rt_rebuild_rows(r);
}

void rt_check_drained(wsel_router *r, uint32_t w)
{
    rt_worker *wr = &r->workers[w];
    if (!wr->in_use || !wr->draining)
        return;
    for (uint32_t k = 0; k < wr->dp_size; k++)
        if (r->load[wr->slots[k]].active_requests)
            return;
    uint64_t id = wr->id;
    int had_events = wr->kv_endpoints != NULL;
    rt_worker_free(r, w);
    if (had_events)
        rt_kvsub_remove(r, id); /* takes only the KV thread's own lock */
    rt_log(r, WSEL_LOG_INFO, "worker %llu drained and removed", (unsigned long long)id);
}

/* Locks the router and finds WORKER_ID's worker: its index, with r->mu
 * held, or WSEL_EINVAL (no router) or WSEL_ENOENT (no such worker), with
 * the lock not held. */
static int64_t lock_worker(wsel_router *r, uint64_t worker_id)
{
    if (!r)
        return WSEL_EINVAL;
    pthread_mutex_lock(&r->mu);
    uint32_t w = rt_map_get(&r->worker_ids, worker_id);
    if (w == RT_MAP_NONE) {
        pthread_mutex_unlock(&r->mu);
        return WSEL_ENOENT;
    }
    return w;
}

int32_t wsel_router_drain_worker(wsel_router *r, uint64_t worker_id)
{
    int64_t w = lock_worker(r, worker_id);
    if (w < 0)
        return (int32_t)w;
    r->workers[w].draining = 1;
    r->epoch++;
    rt_check_drained(r, (uint32_t)w);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int32_t wsel_router_set_worker_available(wsel_router *r, uint64_t worker_id,
                                         int available)
{
    int64_t w = lock_worker(r, worker_id);
    if (w < 0)
        return (int32_t)w;
    uint32_t unavailable = available ? 0 : 1;
    if (r->workers[w].unavailable != unavailable) {
        r->workers[w].unavailable = unavailable;
        r->epoch++;
        rt_log(r, WSEL_LOG_INFO, "worker %llu %s", (unsigned long long)worker_id,
               unavailable ? "unavailable: its rows excluded" : "available again");
    }
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int32_t wsel_router_remove_worker(wsel_router *r, uint64_t worker_id)
{
    int64_t w = lock_worker(r, worker_id);
    if (w < 0)
        return (int32_t)w;
    int had_events = r->workers[w].kv_endpoints != NULL;
    rt_worker_free(r, (uint32_t)w);
    if (had_events)
        rt_kvsub_remove(r, worker_id); /* in order with adds: see add_worker */
    pthread_mutex_unlock(&r->mu);
    return 0;
}
