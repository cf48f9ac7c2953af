/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_shared.c -- what the workers of one upstream share: a
 * shared memory zone per upstream ("wsel:NAME", added automatically, sized
 * from worker_processes), allocated with nginx's slab allocator as
 * ngx_http_upstream_zone_module does, holding
 *   the router's replica-sync region (wsel_router_shm_*): each worker
 *   writes its own per-rank load into its slot, and each route adds the
 *   other live workers' (the same contribution NATS replicas share);
 *   in history mode, the router's shared routing history
 *   (wsel_router_history_*): a ring of every worker's route records, each
 *   worker applying the others' to its own index before its next route;
 *   the last policy switch the admin location accepted (path, config, a
 *   generation): each worker applies a newer one before its next route or
 *   status answer.
 *   the counters of every worker, summed (ngx_http_wsel_totals.c).
 * A timer per upstream (every NGX_HTTP_WSEL_TICK_MS) does the same for an
 * idle worker, so the ring never turns over under it, and writes its
 * counters into the zone.
 * The zone outlives a reload when its size stays (same worker_processes):
 * the new workers then see the old ones' requests still in flight. A
 * reload's workers take the configuration's policy (an epoch per cycle).
 */

#include "ngx_http_wsel_module.h"


/* Rows per worker in the region: the router's default max_rows. */
#define NGX_HTTP_WSEL_ZONE_ROWS    1024
/* History entries in the ring (512 bytes each, 4 MiB): about 1.4 s of
 * 2,000 routes a second of 3 entries each, far above a worker's lag. */
#define NGX_HTTP_WSEL_HISTORY      8192
#define NGX_HTTP_WSEL_TICK_MS      100


struct ngx_http_wsel_shared_s {
    ngx_atomic_t                    epoch;      /* a cycle each, the master's */
    ngx_atomic_t                    policy_gen; /* switches, under the mutex */
    ngx_uint_t                      policy_epoch;
    u_char                          policy_path[PATH_MAX];
    u_char                         *policy_config; /* slab, NUL-terminated */
    void                           *region;
    void                           *history;   /* history mode, else NULL */
    ngx_http_wsel_totals_t         *totals;
};


/* Processes the region holds: the workers, as many again draining a
 * reload, and room for the respawned. */
static ngx_uint_t
ngx_http_wsel_zone_processes(ngx_conf_t *cf)
{
    ngx_core_conf_t  *ccf;
    ngx_int_t         n;

    ccf = (ngx_core_conf_t *) ngx_get_conf(cf->cycle->conf_ctx,
                                           ngx_core_module);
    n = ccf->worker_processes;
    if (n == NGX_CONF_UNSET || n < 1) {
        n = ngx_max(ngx_ncpu, 1); /* worker_processes after http {} */
    }

    return 2 * (ngx_uint_t) n + 4;
}


/* The history ring, in history mode only. */
static ngx_int_t
ngx_http_wsel_history_init(ngx_slab_pool_t *shpool,
    ngx_http_wsel_upstream_t *up, ngx_http_wsel_shared_t *sh)
{
    size_t  size;

    if (up->kv_events) {
        return NGX_OK;
    }

    size = wsel_router_history_size(NGX_HTTP_WSEL_HISTORY);
    sh->history = ngx_slab_calloc(shpool, size);

    if (sh->history == NULL
        || wsel_router_history_format(sh->history, size,
                                      NGX_HTTP_WSEL_HISTORY) != 0)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_wsel_zone_init(ngx_shm_zone_t *zone, void *data)
{
    size_t                     size;
    ngx_slab_pool_t           *shpool;
    ngx_http_wsel_shared_t    *sh;
    ngx_http_wsel_upstream_t  *up = zone->data;

    shpool = (ngx_slab_pool_t *) zone->shm.addr;

    if (data == NULL) {
        sh = ngx_slab_calloc(shpool, sizeof(ngx_http_wsel_shared_t));
        size = wsel_router_shm_size(up->zone_processes,
                                    NGX_HTTP_WSEL_ZONE_ROWS);
        if (sh == NULL) {
            return NGX_ERROR;
        }
        sh->region = ngx_slab_calloc(shpool, size);
        if (sh->region == NULL
            || wsel_router_shm_format(sh->region, size, up->zone_processes,
                                      NGX_HTTP_WSEL_ZONE_ROWS) != 0)
        {
            return NGX_ERROR;
        }
        sh->totals = ngx_http_wsel_totals_create(shpool, up->zone_processes);
        if (sh->totals == NULL
            || ngx_http_wsel_history_init(shpool, up, sh) != NGX_OK)
        {
            return NGX_ERROR;
        }
        shpool->data = sh;
    }

    /* this cycle's workers ignore a switch an older cycle's made */
    up->shared = shpool->data;
    up->epoch = ngx_atomic_fetch_add(&up->shared->epoch, 1) + 1;

    return NGX_OK;
}


ngx_int_t
ngx_http_wsel_zone_add(ngx_conf_t *cf, ngx_http_wsel_upstream_t *up)
{
    size_t           size;
    ngx_str_t        name;
    ngx_shm_zone_t  *zone;

    name.len = sizeof("wsel:") - 1 + up->name.len;
    name.data = ngx_pnalloc(cf->pool, name.len);
    if (name.data == NULL) {
        return NGX_ERROR;
    }
    ngx_sprintf(name.data, "wsel:%V", &up->name);

    up->zone_processes = ngx_http_wsel_zone_processes(cf);

    /* the region, the policy record, two configs (the old one is freed
     * after the new one is in) and the slab's own pages */
    size = wsel_router_shm_size(up->zone_processes, NGX_HTTP_WSEL_ZONE_ROWS)
           + sizeof(ngx_http_wsel_shared_t) + 2 * NGX_HTTP_WSEL_SHARED_CONFIG
           + 16 * ngx_pagesize;
    size += ngx_http_wsel_totals_size(up->zone_processes);
    if (!up->kv_events) {
        size += wsel_router_history_size(NGX_HTTP_WSEL_HISTORY);
    }
    size = ngx_align(size, ngx_pagesize);

    zone = ngx_shared_memory_add(cf, &name, size,
                                 &ngx_http_upstream_wsel_module);
    if (zone == NULL) {
        return NGX_ERROR;
    }

    zone->init = ngx_http_wsel_zone_init;
    zone->data = up;
    zone->noreuse = 0;
    up->zone = zone;

    return NGX_OK;
}


static void
ngx_http_wsel_tick_handler(ngx_event_t *ev)
{
    ngx_http_wsel_upstream_t  *up = ev->data;

    if (up->router == NULL) {
        return;
    }

    ngx_http_wsel_shared_sync(up, ev->log);
    ngx_http_wsel_status_publish(up, ev->log);

    if (!ngx_exiting) {
        ngx_add_timer(ev, NGX_HTTP_WSEL_TICK_MS);
    }
}


void
ngx_http_wsel_shared_start(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    char  err[NGX_HTTP_WSEL_ERR];

    /* a worker respawned after a switch takes it before its first route */
    up->policy_seen = (ngx_atomic_uint_t) -1;

    /* a NATS replica per worker covers the other workers too */
    if (up->shared == NULL || up->sync.replica_id != 0) {
        return;
    }

    if (wsel_router_shm_start(up->router, up->shared->region, 0, err,
                              sizeof(err)) != 0)
    {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "wsel: upstream \"%V\": this worker routes on its own "
                      "load only: %s", &up->name, err);
    }

    if (up->shared->history
        && wsel_router_history_start(up->router, up->shared->history, 0, err,
                                     sizeof(err)) != 0)
    {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "wsel: upstream \"%V\": this worker's index learns "
                      "from its own routes only: %s", &up->name, err);
    }

    up->totals = up->shared->totals;
    ngx_http_wsel_totals_join(up, cycle->log);

    up->tick.handler = ngx_http_wsel_tick_handler;
    up->tick.data = up;
    up->tick.log = cycle->log;
    up->tick.cancelable = 1;
    ngx_add_timer(&up->tick, NGX_HTTP_WSEL_TICK_MS);
}


void
ngx_http_wsel_shared_exit(ngx_http_wsel_upstream_t *up, ngx_log_t *log)
{
    if (up->totals_slot == NULL || up->router == NULL) {
        return;
    }

    ngx_http_wsel_status_publish(up, log);
    ngx_http_wsel_totals_leave(up);
}


/* Copy the shared policy if this cycle's admin location set it; NGX_OK
 * with *path set (malloc'd, the config after its NUL), NGX_DECLINED when
 * it is none of this cycle's, NGX_ERROR without memory. */
static ngx_int_t
ngx_http_wsel_policy_copy(ngx_http_wsel_upstream_t *up, char **path)
{
    size_t                   plen, clen;
    ngx_int_t                rc;
    ngx_slab_pool_t         *shpool;
    ngx_http_wsel_shared_t  *sh = up->shared;

    shpool = (ngx_slab_pool_t *) up->zone->shm.addr;
    rc = NGX_DECLINED;

    ngx_shmtx_lock(&shpool->mutex);

    up->policy_seen = sh->policy_gen;

    if (sh->policy_epoch == up->epoch && sh->policy_path[0]) {
        plen = ngx_strlen(sh->policy_path) + 1;
        clen = ngx_strlen(sh->policy_config) + 1;
        *path = malloc(plen + clen);
        rc = NGX_ERROR;
        if (*path) {
            ngx_memcpy(*path, sh->policy_path, plen);
            ngx_memcpy(*path + plen, sh->policy_config, clen);
            rc = NGX_OK;
        }
    }

    ngx_shmtx_unlock(&shpool->mutex);

    return rc;
}


/* Take the policy another worker's admin location switched to. */
static void
ngx_http_wsel_policy_follow(ngx_http_wsel_upstream_t *up, ngx_log_t *log)
{
    char     *path, err[NGX_HTTP_WSEL_ERR];
    int32_t   rc;

    if (ngx_http_wsel_policy_copy(up, &path) != NGX_OK) {
        return;
    }

    err[0] = '\0';
    rc = wsel_host_switch(up->host, path, path + ngx_strlen(path) + 1, err,
                          sizeof(err));
    if (rc == 0) {
        ngx_cpystrn(up->live_path, (u_char *) path, sizeof(up->live_path));
        up->last_error[0] = '\0';
        up->shared_switches++;
        ngx_log_error(NGX_LOG_NOTICE, log, 0, "wsel: upstream \"%V\" "
                      "followed another worker's switch to \"%s\"",
                      &up->name, path);

    } else {
        ngx_log_error(NGX_LOG_ALERT, log, 0, "wsel: upstream \"%V\": "
                      "another worker's switch to \"%s\" refused here: %s",
                      &up->name, path, err[0] ? err : wsel_strerror(rc));
    }

    free(path);
}


void
ngx_http_wsel_shared_sync(ngx_http_wsel_upstream_t *up, ngx_log_t *log)
{
    if (up->shared == NULL) {
        return;
    }

    if (up->shared->policy_gen != up->policy_seen) {
        ngx_http_wsel_policy_follow(up, log);
    }

    wsel_router_shm_poll(up->router);
    wsel_router_history_poll(up->router);
}


ngx_int_t
ngx_http_wsel_shared_publish(ngx_http_wsel_upstream_t *up, const char *path,
    const char *config, char *err, size_t err_size)
{
    size_t                   len;
    u_char                  *copy;
    ngx_slab_pool_t         *shpool;
    ngx_http_wsel_shared_t  *sh = up->shared;

    if (sh == NULL) {
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) up->zone->shm.addr;
    len = ngx_strlen(config) + 1;

    ngx_shmtx_lock(&shpool->mutex);

    copy = ngx_slab_alloc_locked(shpool, len);
    if (copy == NULL) {
        ngx_shmtx_unlock(&shpool->mutex);
        *ngx_snprintf((u_char *) err, err_size - 1, "the config (%uz bytes) "
                      "does not fit the shared zone \"%V\" the other "
                      "workers read it from", len, &up->zone->shm.name) = '\0';
        return NGX_ERROR;
    }

    ngx_memcpy(copy, config, len);
    if (sh->policy_config) {
        ngx_slab_free_locked(shpool, sh->policy_config);
    }
    sh->policy_config = copy;
    ngx_cpystrn(sh->policy_path, (u_char *) path, sizeof(sh->policy_path));
    sh->policy_epoch = up->epoch;
    up->policy_seen = ++sh->policy_gen;

    ngx_shmtx_unlock(&shpool->mutex);

    return NGX_OK;
}
