/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_metrics.c -- the module's histograms (their bucket bounds)
 * and per-rank counters; ngx_http_wsel_metrics.h lists what is printed.
 */

#include "ngx_http_wsel_module.h"


#define NGX_HTTP_WSEL_US  1000ULL
#define NGX_HTTP_WSEL_MS  1000000ULL
#define NGX_HTTP_WSEL_S   1000000000ULL


/* The module's route step: microseconds (docs/nginx.md has its figures). */
static const uint64_t  ngx_http_wsel_route_bounds[] = {
    1 * NGX_HTTP_WSEL_US, 2500, 5 * NGX_HTTP_WSEL_US, 10 * NGX_HTTP_WSEL_US,
    25 * NGX_HTTP_WSEL_US, 50 * NGX_HTTP_WSEL_US, 100 * NGX_HTTP_WSEL_US,
    250 * NGX_HTTP_WSEL_US, 500 * NGX_HTTP_WSEL_US, 1 * NGX_HTTP_WSEL_MS,
    2500 * NGX_HTTP_WSEL_US, 10 * NGX_HTTP_WSEL_MS
};

/* A first token: milliseconds (a cached prefix) to a minute (a queue). */
static const uint64_t  ngx_http_wsel_ttft_bounds[] = {
    5 * NGX_HTTP_WSEL_MS, 10 * NGX_HTTP_WSEL_MS, 25 * NGX_HTTP_WSEL_MS,
    50 * NGX_HTTP_WSEL_MS, 100 * NGX_HTTP_WSEL_MS, 250 * NGX_HTTP_WSEL_MS,
    500 * NGX_HTTP_WSEL_MS, 1 * NGX_HTTP_WSEL_S, 2500 * NGX_HTTP_WSEL_MS,
    5 * NGX_HTTP_WSEL_S, 10 * NGX_HTTP_WSEL_S, 30 * NGX_HTTP_WSEL_S,
    60 * NGX_HTTP_WSEL_S
};

/* A whole response: tens of milliseconds to minutes of decoding. */
static const uint64_t  ngx_http_wsel_e2e_bounds[] = {
    25 * NGX_HTTP_WSEL_MS, 50 * NGX_HTTP_WSEL_MS, 100 * NGX_HTTP_WSEL_MS,
    250 * NGX_HTTP_WSEL_MS, 500 * NGX_HTTP_WSEL_MS, 1 * NGX_HTTP_WSEL_S,
    2500 * NGX_HTTP_WSEL_MS, 5 * NGX_HTTP_WSEL_S, 10 * NGX_HTTP_WSEL_S,
    30 * NGX_HTTP_WSEL_S, 60 * NGX_HTTP_WSEL_S, 120 * NGX_HTTP_WSEL_S,
    300 * NGX_HTTP_WSEL_S, 600 * NGX_HTTP_WSEL_S
};


const uint64_t *
ngx_http_wsel_bounds(ngx_uint_t h, ngx_uint_t *n)
{
    switch (h) {

    case NGX_HTTP_WSEL_HIST_route:
        *n = sizeof(ngx_http_wsel_route_bounds) / sizeof(uint64_t);
        return ngx_http_wsel_route_bounds;

    case NGX_HTTP_WSEL_HIST_ttft:
        *n = sizeof(ngx_http_wsel_ttft_bounds) / sizeof(uint64_t);
        return ngx_http_wsel_ttft_bounds;

    default:
        *n = sizeof(ngx_http_wsel_e2e_bounds) / sizeof(uint64_t);
        return ngx_http_wsel_e2e_bounds;
    }
}


void
ngx_http_wsel_observe(ngx_http_wsel_metrics_t *m, ngx_uint_t h, uint64_t ns)
{
    ngx_uint_t       b, n;
    const uint64_t  *bounds;

    bounds = ngx_http_wsel_bounds(h, &n);

    for (b = 0; b < n && ns > bounds[b]; b++) {
        /* void */
    }

    m->hist[h].count[b]++;
    m->hist[h].sum_ns += ns;
}


ngx_int_t
ngx_http_wsel_metrics_init(ngx_http_wsel_metrics_t *m, ngx_pool_t *pool,
    wsel_router *router)
{
    uint32_t                nr, i;
    uint64_t                wid;
    ngx_uint_t              w, n;
    wsel_router_rank_info  *ri;

    ngx_memzero(m, sizeof(ngx_http_wsel_metrics_t));
    m->started = ngx_time();

    nr = wsel_router_read_ranks(router, NULL, 0);
    ri = ngx_pcalloc(pool, (nr + 1) * sizeof(wsel_router_rank_info));
    if (ri == NULL) {
        return NGX_ERROR;
    }
    nr = wsel_router_read_ranks(router, ri, nr);

    /* worker ids are 1 .. nworkers, each with ranks 0 .. dp - 1 */
    for (i = 0; i < nr; i++) {
        if (ri[i].worker_id > m->nworkers) {
            m->nworkers = (ngx_uint_t) ri[i].worker_id;
        }
    }

    m->rank_base = ngx_pcalloc(pool, (m->nworkers + 1) * sizeof(ngx_uint_t));
    m->rank_dp = ngx_pcalloc(pool, (m->nworkers + 1) * sizeof(ngx_uint_t));
    if (m->rank_base == NULL || m->rank_dp == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < nr; i++) {
        wid = ri[i].worker_id;
        if (wid > 0 && ri[i].dp_rank + 1 > m->rank_dp[wid - 1]) {
            m->rank_dp[wid - 1] = ri[i].dp_rank + 1;
        }
    }

    for (w = 1; w < m->nworkers; w++) {
        m->rank_base[w] = m->rank_base[w - 1] + m->rank_dp[w - 1];
    }

    /* rank_base[nworkers] (0 past the last) is unused: count them again */
    for (w = 0, n = 0; w < m->nworkers; w++) {
        n += m->rank_dp[w];
    }

    m->rank = ngx_pcalloc(pool, (n + 1)
                                * sizeof(ngx_http_wsel_rank_counters_t));

    return m->rank ? NGX_OK : NGX_ERROR;
}


ngx_http_wsel_rank_counters_t *
ngx_http_wsel_rank_counters(ngx_http_wsel_metrics_t *m, uint64_t worker_id,
    uint32_t dp_rank)
{
    if (m->rank == NULL || worker_id == 0 || worker_id > m->nworkers
        || dp_rank >= m->rank_dp[worker_id - 1])
    {
        return NULL;
    }

    return &m->rank[m->rank_base[worker_id - 1] + dp_rank];
}
