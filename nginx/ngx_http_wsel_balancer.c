/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_balancer.c -- the balancer: the upstream's peers set up at
 * configuration (the policy checked in a throwaway host), and per request
 * the routed peer handed to nginx's round-robin bookkeeping, or
 * round-robin itself; and nginx's view of each peer told to the router,
 * so the policy does not choose a server nginx holds down.
 */

#include "ngx_http_wsel_module.h"

static ngx_int_t ngx_http_wsel_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_wsel_get_peer(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_wsel_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state);


/* ------------------------------------------------------------------------ */
/* balancer                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * nginx's own peer state, followed: a peer is down once its fails reach
 * max_fails (round-robin then skips it for fail_timeout from its last
 * failure, `checked`); it is up again when a request to it succeeds after
 * a try past fail_timeout (round-robin resets `fails`: accessed < checked)
 * or when fail_timeout has passed (round-robin would try it again, so the
 * policy may). Peer i is the router's worker i + 1. The router is told
 * only of changes (wsel_router_set_worker_available bumps its epoch).
 */
static void
ngx_http_wsel_peer_state(ngx_http_wsel_upstream_t *up, ngx_uint_t i,
    ngx_http_upstream_rr_peer_t *peer, time_t now)
{
    ngx_uint_t  down;

    down = peer->down
           || (peer->max_fails && peer->fails >= peer->max_fails
               && now - peer->checked <= peer->fail_timeout);

    if (up->router == NULL || up->peer_down == NULL || i >= up->npeers
        || down == up->peer_down[i])
    {
        return;
    }

    if (wsel_router_set_worker_available(up->router, i + 1, !down) != 0) {
        return;
    }

    up->peer_down[i] = (u_char) down;

    if (down) {
        up->ndown++;
        up->peers_marked_down++;

    } else {
        up->ndown--;
    }
}


/*
 * Each peer's state passed on to the router: every peer (only_down 0), or
 * only those the router holds down, while some are (only_down 1).
 */
static void
ngx_http_wsel_walk_peers(ngx_http_wsel_upstream_t *up, ngx_uint_t only_down)
{
    time_t                         now;
    ngx_uint_t                     i;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    peers = up->uscf->peer.data;
    now = ngx_time();

    ngx_http_upstream_rr_peers_rlock(peers);

    for (peer = peers->peer, i = 0;
         peer && (!only_down || up->ndown);
         peer = peer->next, i++)
    {
        if (!only_down || (i < up->npeers && up->peer_down[i])) {
            ngx_http_wsel_peer_state(up, i, peer, now);
        }
    }

    ngx_http_upstream_rr_peers_unlock(peers);
}


/* At the worker's start: the servers configured `down` (or held down). */
void
ngx_http_wsel_init_peer_state(ngx_http_wsel_upstream_t *up)
{
    ngx_http_wsel_walk_peers(up, 0);
}


/* Before a route, while some peer is marked down: has fail_timeout passed? */
void
ngx_http_wsel_recheck_peers(ngx_http_wsel_upstream_t *up)
{
    ngx_http_wsel_walk_peers(up, 1);
}


static ngx_int_t
ngx_http_wsel_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_wsel_peer_data_t  *wp;

    wp = ngx_palloc(r->pool, sizeof(ngx_http_wsel_peer_data_t));
    if (wp == NULL) {
        return NGX_ERROR;
    }

    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }

    wp->rrp = r->upstream->peer.data;
    wp->up = ngx_http_conf_upstream_srv_conf(us, ngx_http_upstream_wsel_module);
    wp->ctx = ngx_http_get_module_ctx(r->main, ngx_http_upstream_wsel_module);

    if (wp->ctx && (wp->ctx->up != wp->up || r != r->main)) {
        /* routed for another upstream, or a subrequest (a mirror, an
         * auth_request) whose peer is not the routed request's: its try
         * would take the choice and turn the request's own into a retry */
        wp->ctx = NULL;
    }

    r->upstream->peer.data = wp;
    r->upstream->peer.get = ngx_http_wsel_get_peer;
    r->upstream->peer.free = ngx_http_wsel_free_peer;

    return NGX_OK;
}


static ngx_int_t
ngx_http_wsel_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_wsel_peer_data_t  *wp = data;

    time_t                             now;
    uintptr_t                          m;
    ngx_uint_t                         i, n;
    ngx_http_wsel_ctx_t               *ctx;
    ngx_http_upstream_rr_peer_t       *peer;
    ngx_http_upstream_rr_peer_data_t  *rrp;

    ctx = wp->ctx;
    rrp = wp->rrp;

    if (ctx == NULL || !ctx->routed) {
        if (ctx) {
            ctx->tried = 1;     /* a cut response is counted all the same */
        }

        return ngx_http_upstream_get_round_robin_peer(pc, rrp);
    }

    if (ctx->tried) {
        /* a retry (proxy_next_upstream): the load leaves the first choice,
         * round-robin picks among the untried; the rank header stays */
        wp->up->retries++;
        ngx_http_wsel_finish(ctx->request, ctx, 1);
        return ngx_http_upstream_get_round_robin_peer(pc, rrp);
    }

    ctx->tried = 1;
    now = ngx_time();
    n = (ngx_uint_t) ctx->worker_id - 1;

    ngx_http_upstream_rr_peers_wlock(rrp->peers);

    for (peer = rrp->peers->peer, i = 0; peer && i < n; peer = peer->next) {
        i++;
    }

    if (peer == NULL
        || peer->down
        || (peer->max_fails && peer->fails >= peer->max_fails
            && now - peer->checked <= peer->fail_timeout)
        || (peer->max_conns && peer->conns >= peer->max_conns))
    {
        ngx_http_upstream_rr_peers_unlock(rrp->peers);

        wp->up->peer_unavailable++;
        ngx_http_wsel_finish(ctx->request, ctx, 1);
        return ngx_http_upstream_get_round_robin_peer(pc, rrp);
    }

    rrp->current = peer;

    if (now - peer->checked > peer->fail_timeout) {
        peer->checked = now;
    }

    pc->sockaddr = peer->sockaddr;
    pc->socklen = peer->socklen;
    pc->name = &peer->name;

    peer->conns++;

    ngx_http_upstream_rr_peers_unlock(rrp->peers);

    m = (uintptr_t) 1 << n % (8 * sizeof(uintptr_t));
    rrp->tried[n / (8 * sizeof(uintptr_t))] |= m;

    return NGX_OK;
}


static void
ngx_http_wsel_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_wsel_peer_data_t  *wp = data;

    ngx_uint_t                         i;
    ngx_http_upstream_rr_peer_t       *peer, *p;
    ngx_http_upstream_rr_peer_data_t  *rrp = wp->rrp;

    if (state & NGX_PEER_FAILED) {
        wp->up->upstream_failures++;
    }

    peer = rrp->current;

    ngx_http_upstream_free_round_robin_peer(pc, rrp, state);

    /* round-robin has counted the failure or the success: follow it (a
     * success with no peer marked down changes nothing, and costs nothing).
     * Only a primary server is a router's worker: once round-robin has gone
     * to the backup servers (rrp->peers is then their list), peer i of that
     * list is no worker i + 1. */
    if (peer == NULL || rrp->peers->single
        || rrp->peers != wp->up->uscf->peer.data
        || (!(state & NGX_PEER_FAILED) && wp->up->ndown == 0))
    {
        return;
    }

    ngx_http_upstream_rr_peers_rlock(rrp->peers);

    for (p = rrp->peers->peer, i = 0; p && p != peer; p = p->next) {
        i++;
    }

    if (p) {
        ngx_http_wsel_peer_state(wp->up, i, p, ngx_time());
    }

    ngx_http_upstream_rr_peers_unlock(rrp->peers);
}


/* Load the policy into a throwaway host: nginx -t and a reload refuse a
 * policy the workers could not load (the old workers keep serving). */
static ngx_int_t
ngx_http_wsel_check_policy(ngx_conf_t *cf, ngx_http_wsel_upstream_t *up)
{
    char  err[NGX_HTTP_WSEL_ERR];

    if (up->policy.len == 0
        || ngx_http_wsel_try_policy(up, err, sizeof(err)) == 0)
    {
        return NGX_OK;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "wsel: upstream \"%V\": policy \"%V\" (wsel_policy "
                       "in %V:%ui) refused: %s",
                       &up->name, &up->policy, &up->policy_file,
                       up->policy_line, err);
    return NGX_ERROR;
}


ngx_int_t
ngx_http_wsel_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    ngx_uint_t                     i, j, n, found;
    ngx_http_wsel_server_t        *srv;
    ngx_http_wsel_upstream_t      *up;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    if (ngx_http_upstream_init_round_robin(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }

    us->peer.init = ngx_http_wsel_init_peer;

    up = ngx_http_conf_upstream_srv_conf(us, ngx_http_upstream_wsel_module);
    peers = us->peer.data;

    n = 0;
    for (peer = peers->peer; peer; peer = peer->next) {
        n++;
    }

    up->npeers = n;
    up->peer_names = ngx_pcalloc(cf->pool, (n + 1) * sizeof(ngx_str_t));
    if (up->peer_names == NULL) {
        return NGX_ERROR;
    }

    for (peer = peers->peer, i = 0; peer; peer = peer->next, i++) {
        up->peer_names[i] = peer->name;
    }

    srv = up->servers ? up->servers->elts : NULL;

    for (j = 0; up->servers && j < up->servers->nelts; j++) {
        found = 0;

        for (peer = peers->peer; peer; peer = peer->next) {
            if ((peer->name.len == srv[j].addr.len
                 && ngx_strncmp(peer->name.data, srv[j].addr.data,
                                srv[j].addr.len) == 0)
                || (peer->server.len == srv[j].addr.len
                    && ngx_strncmp(peer->server.data, srv[j].addr.data,
                                   srv[j].addr.len) == 0))
            {
                found = 1;
            }
        }

        if (!found) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "wsel: upstream \"%V\": wsel_server \"%V\" "
                               "names no server of the upstream",
                               &up->name, &srv[j].addr);
            return NGX_ERROR;
        }
    }

    if (ngx_http_wsel_zone_add(cf, up) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_wsel_check_policy(cf, up);
}
