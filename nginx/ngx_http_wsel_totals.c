/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_totals.c -- the upstream's counters summed over its
 * workers, the exited ones' included, in the zone the workers share. Each
 * worker owns a slot (tagged with wsel_router_shm_process_tag) where it
 * writes its counters (a vector: ngx_http_wsel_module.h's TOTALS layout)
 * at each tick and status answer; a worker that exits adds its last
 * vector to the retired sum and frees its slot; a dead worker's last
 * vector is moved there by whoever finds it. Everything under the slab
 * pool's mutex (nginx frees it when a holder dies), so a sum never goes
 * back: a value moves from a slot to the retired sum in one step. Ranks
 * are matched across workers (and reloads) by a key of their server name
 * and dp rank.
 */

#include "ngx_http_wsel_module.h"


/* Most ranks whose counters the zone sums (the router's max rows). */
#define NGX_HTTP_WSEL_TOTALS_RANKS  1024
#define NGX_HTTP_WSEL_TOTALS_VALUES                                           \
    (NGX_HTTP_WSEL_TOTALS_HEAD                                                \
     + NGX_HTTP_WSEL_TOTALS_RANKS * NGX_HTTP_WSEL_TOTALS_RANK)


typedef struct {
    uint64_t                        owner;     /* process tag; 0 = free */
    uint64_t                        v[NGX_HTTP_WSEL_TOTALS_VALUES];
} ngx_http_wsel_totals_slot_t;


struct ngx_http_wsel_totals_s {
    time_t                          started;
    ngx_uint_t                      nslots;
    ngx_uint_t                      nkeys;
    uint64_t                        keys[NGX_HTTP_WSEL_TOTALS_RANKS];
    uint64_t                        retired[NGX_HTTP_WSEL_TOTALS_VALUES];
    ngx_http_wsel_totals_slot_t     slot[1];   /* nslots */
};


size_t
ngx_http_wsel_totals_size(ngx_uint_t processes)
{
    return sizeof(ngx_http_wsel_totals_t)
           + (processes - 1) * sizeof(ngx_http_wsel_totals_slot_t);
}


ngx_http_wsel_totals_t *
ngx_http_wsel_totals_create(ngx_slab_pool_t *shpool, ngx_uint_t processes)
{
    ngx_http_wsel_totals_t  *t;

    t = ngx_slab_calloc(shpool, ngx_http_wsel_totals_size(processes));
    if (t) {
        t->started = ngx_time();
        t->nslots = processes;
    }

    return t;
}


static void
ngx_http_wsel_totals_add(uint64_t *sum, const uint64_t *v)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_WSEL_TOTALS_VALUES; i++) {
        sum[i] += v[i];
    }
}


/* Move the dead workers' last vectors to the retired sum (locked). */
static void
ngx_http_wsel_totals_reap(ngx_http_wsel_totals_t *t)
{
    ngx_uint_t  i;

    for (i = 0; i < t->nslots; i++) {
        if (t->slot[i].owner
            && wsel_router_shm_process_gone(t->slot[i].owner))
        {
            ngx_http_wsel_totals_add(t->retired, t->slot[i].v);
            t->slot[i].owner = 0;
        }
    }
}


void
ngx_http_wsel_totals_join(ngx_http_wsel_upstream_t *up, ngx_log_t *log)
{
    ngx_uint_t               i;
    ngx_slab_pool_t         *shpool;
    ngx_http_wsel_totals_t  *t = up->totals;

    up->totals_slot = NULL;
    if (t == NULL) {
        return;
    }

    shpool = (ngx_slab_pool_t *) up->zone->shm.addr;
    ngx_shmtx_lock(&shpool->mutex);
    ngx_http_wsel_totals_reap(t);

    for (i = 0; i < t->nslots; i++) {
        if (t->slot[i].owner == 0) {
            ngx_memzero(t->slot[i].v, sizeof(t->slot[i].v));
            t->slot[i].owner = wsel_router_shm_process_tag(ngx_pid);
            up->totals_slot = &t->slot[i];
            break;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    if (up->totals_slot == NULL) {
        ngx_log_error(NGX_LOG_ALERT, log, 0, "wsel: upstream \"%V\": every "
                      "counter slot of the zone is taken: the status counts "
                      "this worker's figures alone", &up->name);
    }
}


/* The zone's index of a rank key, a new one if need be; -1 when full
 * (locked). */
static ngx_int_t
ngx_http_wsel_totals_rank(ngx_http_wsel_totals_t *t, uint64_t key)
{
    ngx_uint_t  k;

    for (k = 0; k < t->nkeys; k++) {
        if (t->keys[k] == key) {
            return k;
        }
    }

    if (t->nkeys == NGX_HTTP_WSEL_TOTALS_RANKS) {
        return -1;
    }

    t->keys[t->nkeys] = key;

    return t->nkeys++;
}


/* This worker's vector v (head, then nr ranks of keys[]) into its slot,
 * then v replaced by the upstream's sum (locked). */
static void
ngx_http_wsel_totals_swap(ngx_http_wsel_totals_t *t,
    ngx_http_wsel_totals_slot_t *mine, uint64_t *v, const uint64_t *keys,
    ngx_uint_t nr)
{
    ngx_int_t   k;
    ngx_uint_t  i, j, r;
    uint64_t   *sum, *own;

    own = mine->v;
    ngx_memcpy(own, v, NGX_HTTP_WSEL_TOTALS_HEAD * sizeof(uint64_t));

    for (r = 0; r < nr; r++) {
        k = ngx_http_wsel_totals_rank(t, keys[r]);
        if (k >= 0) {
            ngx_memcpy(&own[NGX_HTTP_WSEL_TOTALS_HEAD
                            + k * NGX_HTTP_WSEL_TOTALS_RANK],
                       &v[NGX_HTTP_WSEL_TOTALS_HEAD
                          + r * NGX_HTTP_WSEL_TOTALS_RANK],
                       NGX_HTTP_WSEL_TOTALS_RANK * sizeof(uint64_t));
        }
    }

    sum = v;
    for (r = 0; r < nr; r++) {
        k = ngx_http_wsel_totals_rank(t, keys[r]);
        for (j = 0; k >= 0 && j < NGX_HTTP_WSEL_TOTALS_RANK; j++) {
            i = NGX_HTTP_WSEL_TOTALS_HEAD + k * NGX_HTTP_WSEL_TOTALS_RANK + j;
            sum[NGX_HTTP_WSEL_TOTALS_HEAD + r * NGX_HTTP_WSEL_TOTALS_RANK + j]
                = ngx_http_wsel_totals_at(t, i);
        }
    }

    for (i = 0; i < NGX_HTTP_WSEL_TOTALS_HEAD; i++) {
        sum[i] = ngx_http_wsel_totals_at(t, i);
    }
}


uint64_t
ngx_http_wsel_totals_at(ngx_http_wsel_totals_t *t, ngx_uint_t i)
{
    uint64_t    s;
    ngx_uint_t  n;

    s = t->retired[i];
    for (n = 0; n < t->nslots; n++) {
        if (t->slot[n].owner) {
            s += t->slot[n].v[i];
        }
    }

    return s;
}


time_t
ngx_http_wsel_totals_exchange(ngx_http_wsel_upstream_t *up, uint64_t *v,
    const uint64_t *keys, ngx_uint_t nr)
{
    time_t                   started;
    ngx_slab_pool_t         *shpool;
    ngx_http_wsel_totals_t  *t = up->totals;

    if (t == NULL || up->totals_slot == NULL) {
        return up->metrics.started;
    }

    shpool = (ngx_slab_pool_t *) up->zone->shm.addr;
    ngx_shmtx_lock(&shpool->mutex);
    ngx_http_wsel_totals_reap(t);
    ngx_http_wsel_totals_swap(t, up->totals_slot, v, keys, nr);
    started = t->started;
    ngx_shmtx_unlock(&shpool->mutex);

    return started;
}


void
ngx_http_wsel_totals_leave(ngx_http_wsel_upstream_t *up)
{
    ngx_slab_pool_t              *shpool;
    ngx_http_wsel_totals_slot_t  *slot;
    ngx_http_wsel_totals_t  *t = up->totals;

    if (t == NULL || up->totals_slot == NULL) {
        return;
    }

    shpool = (ngx_slab_pool_t *) up->zone->shm.addr;
    ngx_shmtx_lock(&shpool->mutex);
    slot = up->totals_slot;
    ngx_http_wsel_totals_add(t->retired, slot->v);
    slot->owner = 0;
    ngx_shmtx_unlock(&shpool->mutex);
    up->totals_slot = NULL;
}
