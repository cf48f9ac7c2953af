/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_upstream_wsel_module -- a wsel policy as nginx's load balancer
 * (nginx/README.md, docs/nginx.md).
 *
 * Per request, in this order:
 *   precontent phase  (wsel_route) read the buffered body, find the prompt
 *                     (token ids, parsed in one pass into a buffer kept
 *                     between requests, or text in text mode),
 *                     wsel_router_route; the choice is kept in the request's
 *                     context and the rank in $wsel_dp_rank. nginx's upstream
 *                     code builds the proxied request (headers included)
 *                     before it asks the balancer for a peer, so the choice
 *                     must exist by then. In history mode the route's
 *                     history record is deferred to a posted event
 *                     (wsel_router_flush), run once the request is on its
 *                     way upstream.
 *   balancer          peer.get hands out the chosen server (round-robin
 *                     bookkeeping kept, so max_fails and proxy_next_upstream
 *                     work); a retry, or a chosen server that is down, goes
 *                     to round-robin and is counted.
 *   body filter       the first response bytes: wsel_router_first_token;
 *                     the response's usage figures are scanned as it passes;
 *                     its last buffer: wsel_router_finished_ex, the policy
 *                     told the outcome (output and cached tokens, failed or
 *                     not).
 *   pool cleanup      the request's end, for a request whose response had
 *                     no end (failed, cut, the client gone): the same.
 *
 * Any number of worker processes: each runs its own router; the zone they
 * share (ngx_http_wsel_shared.c) carries their load, history, policy
 * switches and counters.
 *
 * The files: this one (directives, configuration, worker start and end),
 * ngx_http_wsel_check.c (the checks of the whole configuration, in a core
 * module of the same .so), ngx_http_wsel_prompt.c (the body and the prompt in it),
 * ngx_http_wsel_request.c (the phases above), ngx_http_wsel_balancer.c
 * (the peers), ngx_http_wsel_status.c and ngx_http_wsel_metrics.[ch]
 * (the status location and what it prints), ngx_http_wsel_admin.c (the
 * admin location); ngx_http_wsel_module.h is what they share.
 *
 * Style: nginx's (the code is read next to nginx's own modules), built
 * with nginx's warning flags (nginx/CMakeLists.txt says which and why).
 */

#include "ngx_http_wsel_module.h"


static ngx_int_t ngx_http_wsel_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_wsel_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_wsel_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_wsel_create_srv_conf(ngx_conf_t *cf);
static void *ngx_http_wsel_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_wsel_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static ngx_int_t ngx_http_wsel_init_process(ngx_cycle_t *cycle);
static void ngx_http_wsel_exit_process(ngx_cycle_t *cycle);

static char *ngx_http_wsel_policy(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_wsel_isolated(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_wsel_server(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_wsel_prompt(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_wsel_kv_source(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_wsel_busy(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_wsel_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_wsel_admin(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);


static ngx_command_t  ngx_http_wsel_commands[] = {

    { ngx_string("wsel_policy"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE12,
      ngx_http_wsel_policy,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_isolated"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE12,
      ngx_http_wsel_isolated,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_server"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE23,
      ngx_http_wsel_server,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_block_size"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_SRV_CONF_OFFSET,
      offsetof(ngx_http_wsel_upstream_t, block_size),
      NULL },

    { ngx_string("wsel_prompt"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE1,
      ngx_http_wsel_prompt,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_kv_source"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE12,
      ngx_http_wsel_kv_source,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_capacity_blocks"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_SRV_CONF_OFFSET,
      offsetof(ngx_http_wsel_upstream_t, capacity),
      NULL },

    { ngx_string("wsel_busy"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE12,
      ngx_http_wsel_busy,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_sync"),
      NGX_HTTP_UPS_CONF|NGX_CONF_1MORE,
      ngx_http_wsel_sync_directive,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_tokenizer"),
      NGX_HTTP_UPS_CONF|NGX_CONF_1MORE,
      ngx_http_wsel_tokenizer,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_route"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_wsel_loc_conf_t, route),
      NULL },

    { ngx_string("wsel_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_wsel_status,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("wsel_admin"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_wsel_admin,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_upstream_wsel_module_ctx = {
    ngx_http_wsel_add_variables,           /* preconfiguration */
    ngx_http_wsel_postconfiguration,       /* postconfiguration */

    ngx_http_wsel_create_main_conf,        /* create main configuration */
    NULL,                                  /* init main configuration */

    ngx_http_wsel_create_srv_conf,         /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_wsel_create_loc_conf,         /* create location configuration */
    ngx_http_wsel_merge_loc_conf           /* merge location configuration */
};


ngx_module_t  ngx_http_upstream_wsel_module = {
    NGX_MODULE_V1,
    &ngx_http_upstream_wsel_module_ctx,    /* module context */
    ngx_http_wsel_commands,                /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_wsel_init_process,            /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_wsel_exit_process,            /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_str_t  ngx_http_wsel_rank_var = ngx_string("wsel_dp_rank");


/* ------------------------------------------------------------------------ */
/* small helpers                                                            */
/* ------------------------------------------------------------------------ */

static char *
ngx_http_wsel_cstr(ngx_pool_t *pool, ngx_str_t *s)
{
    char  *p;

    p = ngx_pnalloc(pool, s->len + 1);
    if (p == NULL) {
        return NULL;
    }

    ngx_memcpy(p, s->data, s->len);
    p[s->len] = '\0';

    return p;
}


void
ngx_http_wsel_log(void *user, int32_t level, const char *msg)
{
    ngx_uint_t  l;

    (void) user;

    l = level <= WSEL_LOG_ERROR ? NGX_LOG_ERR
        : level == WSEL_LOG_WARN ? NGX_LOG_WARN : NGX_LOG_INFO;

    ngx_log_error(l, ngx_cycle->log, 0, "wsel: %s", msg);
}


ngx_http_wsel_upstream_t *
ngx_http_wsel_find(ngx_http_wsel_main_conf_t *wmcf, ngx_str_t *name)
{
    ngx_uint_t                  i;
    ngx_http_wsel_upstream_t  **ups;

    if (wmcf == NULL) {
        return NULL;
    }

    ups = wmcf->upstreams.elts;

    for (i = 0; i < wmcf->upstreams.nelts; i++) {
        if (ups[i]->name.len == name->len
            && ngx_strncmp(ups[i]->name.data, name->data, name->len) == 0)
        {
            return ups[i];
        }
    }

    return NULL;
}


void
ngx_http_wsel_host_options(ngx_http_wsel_upstream_t *up,
    wsel_host_options *o)
{
    wsel_host_options_default(o);
    o->log = ngx_http_wsel_log;
    o->isolated = up->isolated ? 1 : 0;

    if (up->helper.len) {
        o->helper_path = (const char *) up->helper.data;
    }
}


/* ------------------------------------------------------------------------ */
/* worker start and end                                                     */
/* ------------------------------------------------------------------------ */

static ngx_http_wsel_server_t *
ngx_http_wsel_server_of(ngx_http_wsel_upstream_t *up,
    ngx_http_upstream_rr_peer_t *peer)
{
    ngx_uint_t               j;
    ngx_http_wsel_server_t  *srv;

    if (up->servers == NULL) {
        return NULL;
    }

    srv = up->servers->elts;

    for (j = 0; j < up->servers->nelts; j++) {
        if ((peer->name.len == srv[j].addr.len
             && ngx_strncmp(peer->name.data, srv[j].addr.data, srv[j].addr.len)
                == 0)
            || (peer->server.len == srv[j].addr.len
                && ngx_strncmp(peer->server.data, srv[j].addr.data,
                               srv[j].addr.len) == 0))
        {
            return &srv[j];
        }
    }

    return NULL;
}


/* The worker's host, with the configured policy live; a policy refused
 * here (checked at configuration a moment ago) leaves the built-in one
 * serving, said in the log and the status. */
static ngx_int_t
ngx_http_wsel_start_host(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    char               err[NGX_HTTP_WSEL_ERR];
    int32_t            rc;
    wsel_host_options  ho;

    ngx_http_wsel_host_options(up, &ho);

    rc = wsel_host_create(&ho, &up->host);
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "wsel: upstream \"%V\": no host: %s", &up->name,
                      wsel_strerror(rc));
        return NGX_ERROR;
    }

    if (up->policy.len == 0) {
        return NGX_OK;
    }

    err[0] = '\0';
    rc = wsel_host_switch(up->host, (const char *) up->policy.data,
                          (const char *) up->config.data, err, sizeof(err));
    if (rc != 0) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "wsel: upstream \"%V\": policy \"%V\" refused in "
                      "the worker: %s; the built-in policy serves",
                      &up->name, &up->policy, err);
        ngx_snprintf(up->last_error, sizeof(up->last_error) - 1, "%s%Z", err);

    } else {
        ngx_snprintf(up->live_path, sizeof(up->live_path) - 1, "%V%Z",
                     &up->policy);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_wsel_start_router(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    char                 err[NGX_HTTP_WSEL_ERR];
    wsel_router_options  ro;

    ngx_memzero(&ro, sizeof(ro));
    ro.struct_size = sizeof(ro);
    ro.block_size = (uint32_t) up->block_size;
    ro.kv_source = up->kv_events ? WSEL_ROUTER_KV_EVENTS
                                 : WSEL_ROUTER_KV_HISTORY;
    ro.kv_threads = (uint32_t) up->kv_threads;
    ro.capacity_blocks = (uint32_t) up->capacity;
    ro.busy_active_requests = (uint32_t) up->busy_requests;
    ro.busy_prefill_tokens = up->busy_prefill;
    ro.host = up->host;
    ro.log = ngx_http_wsel_log;

    if (wsel_router_create(&ro, &up->router, err, sizeof(err)) != 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "wsel: upstream \"%V\": no router: %s", &up->name, err);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* Peer i of the upstream is the router's worker i + 1, with its DP size
 * and KV event endpoints from its wsel_server line. */
static ngx_int_t
ngx_http_wsel_add_workers(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    char                           err[NGX_HTTP_WSEL_ERR];
    char                           addr[256];
    ngx_uint_t                     i;
    wsel_router_worker             w;
    ngx_http_wsel_server_t        *srv;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    peers = up->uscf->peer.data;

    for (peer = peers->peer, i = 0; peer; peer = peer->next, i++) {
        srv = ngx_http_wsel_server_of(up, peer);

        ngx_memzero(&w, sizeof(w));
        ngx_snprintf((u_char *) addr, sizeof(addr) - 1, "%V%Z", &peer->name);
        w.worker_id = i + 1;
        w.address = addr;
        w.dp_size = srv ? (uint32_t) srv->dp : 1;

        if (srv && srv->kv && up->kv_events) {
            w.kv_endpoints = (const char *const *) srv->kv->elts;
        }

        if (wsel_router_add_worker(up->router, &w, err, sizeof(err)) != 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "wsel: upstream \"%V\": server %V: %s", &up->name,
                          &peer->name, err);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_wsel_start(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    up->flush.handler = ngx_http_wsel_flush_handler;
    up->flush.data = up;
    up->flush.log = cycle->log;
    up->token_reader = wsel_token_ids_best();

    up->peer_down = ngx_pcalloc(cycle->pool, up->npeers + 1);
    up->ndown = 0;

    if (up->peer_down == NULL
        || ngx_http_wsel_start_host(cycle, up) != NGX_OK
        || ngx_http_wsel_start_router(cycle, up) != NGX_OK
        || ngx_http_wsel_add_workers(cycle, up) != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* a server configured `down` is no choice for the policy either */
    ngx_http_wsel_init_peer_state(up);
    (void) ngx_http_wsel_sync_start(cycle, up);
    ngx_http_wsel_shared_start(cycle, up);

    return ngx_http_wsel_metrics_init(&up->metrics, cycle->pool, up->router);
}


static void
ngx_http_wsel_reclaim_handler(ngx_event_t *ev)
{
    ngx_uint_t                   i;
    ngx_http_wsel_upstream_t   **ups;
    ngx_http_wsel_main_conf_t   *wmcf = ev->data;

    ups = wmcf->upstreams.elts;

    for (i = 0; i < wmcf->upstreams.nelts; i++) {
        if (ups[i]->host) {
            (void) wsel_host_reclaim(ups[i]->host);
        }
    }

    if (!ngx_exiting) {
        ngx_add_timer(ev, 1000);
    }
}


static ngx_int_t
ngx_http_wsel_init_process(ngx_cycle_t *cycle)
{
    ngx_uint_t                  i;
    ngx_http_wsel_upstream_t  **ups;
    ngx_http_wsel_main_conf_t  *wmcf;

    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE) {
        return NGX_OK;
    }

    wmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_upstream_wsel_module);
    if (wmcf == NULL || wmcf->upstreams.nelts == 0) {
        return NGX_OK;
    }

    ups = wmcf->upstreams.elts;

    for (i = 0; i < wmcf->upstreams.nelts; i++) {
        if (ngx_http_wsel_start(cycle, ups[i]) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    wmcf->reclaim.handler = ngx_http_wsel_reclaim_handler;
    wmcf->reclaim.data = wmcf;
    wmcf->reclaim.log = cycle->log;
    wmcf->reclaim.cancelable = 1;
    ngx_add_timer(&wmcf->reclaim, 1000);

    return NGX_OK;
}


static void
ngx_http_wsel_exit_process(ngx_cycle_t *cycle)
{
    ngx_uint_t                  i;
    ngx_http_wsel_upstream_t  **ups;
    ngx_http_wsel_main_conf_t  *wmcf;

    wmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_upstream_wsel_module);
    if (wmcf == NULL) {
        return;
    }

    ups = wmcf->upstreams.elts;

    for (i = 0; i < wmcf->upstreams.nelts; i++) {
        if (ups[i]->flush.posted) {
            ngx_delete_posted_event(&ups[i]->flush);
        }

        ngx_http_wsel_shared_exit(ups[i], cycle->log);

        wsel_router_destroy(ups[i]->router);
        ups[i]->router = NULL;
        wsel_host_destroy(ups[i]->host);
        ups[i]->host = NULL;
        free(ups[i]->tokens.ids);
        ngx_memzero(&ups[i]->tokens, sizeof(ups[i]->tokens));
        free(ups[i]->body.data);
        ngx_memzero(&ups[i]->body, sizeof(ups[i]->body));
    }
}


/* ------------------------------------------------------------------------ */
/* configuration                                                            */
/* ------------------------------------------------------------------------ */

static ngx_int_t
ngx_http_wsel_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var;

    var = ngx_http_add_variable(cf, &ngx_http_wsel_rank_var,
                                NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) {
        return NGX_ERROR;
    }

    var->get_handler = ngx_http_wsel_rank_variable;

    return NGX_OK;
}


static ngx_int_t
ngx_http_wsel_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_wsel_precontent_handler;

    ngx_http_wsel_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_wsel_body_filter;

    return NGX_OK;
}


static void *
ngx_http_wsel_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_wsel_main_conf_t  *wmcf;

    wmcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_wsel_main_conf_t));
    if (wmcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&wmcf->upstreams, cf->pool, 4,
                       sizeof(ngx_http_wsel_upstream_t *))
        != NGX_OK)
    {
        return NULL;
    }

    return wmcf;
}


static void *
ngx_http_wsel_create_srv_conf(ngx_conf_t *cf)
{
    ngx_http_wsel_upstream_t  *up;

    up = ngx_pcalloc(cf->pool, sizeof(ngx_http_wsel_upstream_t));
    if (up == NULL) {
        return NULL;
    }

    up->isolated = NGX_CONF_UNSET;
    up->block_size = NGX_CONF_UNSET_UINT;
    up->capacity = NGX_CONF_UNSET_UINT;
    up->text_mode = NGX_CONF_UNSET_UINT;
    up->kv_events = NGX_CONF_UNSET_UINT;

    return up;
}


static void *
ngx_http_wsel_create_loc_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(ngx_http_wsel_loc_conf_t));
}


static char *
ngx_http_wsel_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_wsel_loc_conf_t  *prev = parent;
    ngx_http_wsel_loc_conf_t  *conf = child;

    ngx_conf_merge_str_value(conf->route, prev->route, "");

    return NGX_CONF_OK;
}


/* Defaults of the upstream's settings, once its block is read: the
 * directives may come in any order, so this runs from wsel_policy's
 * init_upstream path as well. */
static void
ngx_http_wsel_defaults(ngx_http_wsel_upstream_t *up)
{
    ngx_conf_init_value(up->isolated, 0);
    ngx_conf_init_uint_value(up->block_size, 64);
    ngx_conf_init_uint_value(up->capacity, 0);
    ngx_conf_init_uint_value(up->text_mode, 0);
    ngx_conf_init_uint_value(up->kv_events, 0);
}


static ngx_int_t
ngx_http_wsel_init_upstream_defaults(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_wsel_upstream_t  *up;

    up = ngx_http_conf_upstream_srv_conf(us, ngx_http_upstream_wsel_module);

    if (up->tok && up->text_mode == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "wsel: upstream \"%V\": wsel_tokenizer reads text "
                           "prompts and chat messages: remove \"wsel_prompt "
                           "tokens;\" (token-id prompts are read either way)",
                           &up->name);
        return NGX_ERROR;
    }

    if (up->tok) {
        up->text_mode = 1;
    }

    ngx_http_wsel_defaults(up);

    if (up->block_size == 0 || up->block_size > 65536) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "wsel: upstream \"%V\": wsel_block_size must be "
                           "1..65536", &up->name);
        return NGX_ERROR;
    }

    /* the router takes 32 bits: more would wrap (2^32 to 0, the default) */
    if (up->capacity > 0xffffffff) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "wsel: upstream \"%V\": wsel_capacity_blocks must "
                           "be at most 4294967295", &up->name);
        return NGX_ERROR;
    }

    if (up->text_mode && up->kv_events && up->tok == NULL) {
        /* the engines' events carry the hashes of token ids; without
         * wsel_tokenizer a text prompt's blocks (character chunks) never
         * match them, and text requests get no KV affinity */
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "wsel: upstream \"%V\": text prompts with KV "
                           "events: a text prompt is hashed as character "
                           "chunks, which never match the engines' token-id "
                           "events, so text requests find no cached prefix; "
                           "name the model's tokenizer (wsel_tokenizer), "
                           "send token-id prompts, or use "
                           "\"wsel_kv_source history;\"", &up->name);
    }

    return ngx_http_wsel_init_upstream(cf, us);
}


/* wsel_policy's first argument: "builtin", an absolute path, or a bundled
 * policy's name (ngx_http_wsel_plugin_path.c). */
static char *
ngx_http_wsel_policy_path(ngx_conf_t *cf, ngx_http_wsel_upstream_t *up,
    ngx_str_t *arg)
{
    char         err[NGX_HTTP_WSEL_ERR];
    const char  *path;

    if (arg->len == 7 && ngx_strncmp(arg->data, "builtin", 7) == 0) {
        ngx_str_null(&up->policy);
        return NGX_CONF_OK;
    }

    if (ngx_strlchr(arg->data, arg->data + arg->len, '/') != NULL
        && arg->data[0] != '/')
    {
        return "needs an absolute path to the policy, a bundled policy's "
               "name or \"builtin\"";
    }

    /* nginx's tokens are NUL-terminated */
    path = ngx_http_wsel_plugin_path(cf->pool, (char *) arg->data, err,
                                     sizeof(err));
    if (path == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "wsel: upstream \"%V\": %s",
                           &up->name, err);
        return NGX_CONF_ERROR;
    }

    up->policy.len = ngx_strlen(path);
    up->policy.data = (u_char *) path;

    return NGX_CONF_OK;
}


static char *
ngx_http_wsel_policy(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    char                           *rv;
    ngx_str_t                      *value;
    ngx_http_wsel_upstream_t      **slot;
    ngx_http_wsel_main_conf_t      *wmcf;
    ngx_http_upstream_srv_conf_t   *uscf;

    if (up->enabled) {
        return "is duplicate";
    }

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    value = cf->args->elts;

    up->enabled = 1;
    up->uscf = uscf;
    up->name = uscf->host;
    up->policy_file = cf->conf_file->file.name;
    up->policy_line = cf->conf_file->line;

    rv = ngx_http_wsel_policy_path(cf, up, &value[1]);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    if (cf->args->nelts == 3) {
        up->config.len = value[2].len;
        up->config.data = (u_char *) ngx_http_wsel_cstr(cf->pool, &value[2]);

    } else {
        ngx_str_set(&up->config, "{}");
    }

    if (up->config.data == NULL) {
        return NGX_CONF_ERROR;
    }

    wmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_upstream_wsel_module);
    slot = ngx_array_push(&wmcf->upstreams);
    if (slot == NULL) {
        return NGX_CONF_ERROR;
    }

    *slot = up;

    uscf->peer.init_upstream = ngx_http_wsel_init_upstream_defaults;

    (void) cmd;
    return NGX_CONF_OK;
}


static char *
ngx_http_wsel_isolated(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    ngx_str_t  *value;

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "on") == 0) {
        up->isolated = 1;

    } else if (ngx_strcmp(value[1].data, "off") == 0) {
        up->isolated = 0;

    } else {
        return "takes \"on\" or \"off\" [and the helper's path]";
    }

    if (cf->args->nelts == 3) {
        up->helper.len = value[2].len;
        up->helper.data = (u_char *) ngx_http_wsel_cstr(cf->pool, &value[2]);
        if (up->helper.data == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    (void) cmd;
    return NGX_CONF_OK;
}


/* wsel_server ADDRESS dp=N [kv=tcp://H:P,tcp://H:P,...]; */
static char *
ngx_http_wsel_server(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    u_char                  *p, *e, *s;
    char                   **ep;
    ngx_int_t                n;
    ngx_str_t               *value, one;
    ngx_uint_t               i;
    ngx_http_wsel_server_t  *srv;

    if (up->servers == NULL) {
        up->servers = ngx_array_create(cf->pool, 4,
                                       sizeof(ngx_http_wsel_server_t));
        if (up->servers == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    srv = ngx_array_push(up->servers);
    if (srv == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(srv, sizeof(ngx_http_wsel_server_t));
    value = cf->args->elts;
    srv->addr = value[1];
    srv->dp = 0;

    for (i = 2; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "dp=", 3) == 0) {
            n = ngx_atoi(value[i].data + 3, value[i].len - 3);
            if (n < 1 || n > 64) {
                return "has a dp= outside 1..64";
            }
            srv->dp = (ngx_uint_t) n;

        } else if (ngx_strncmp(value[i].data, "kv=", 3) == 0) {
            srv->kv = ngx_array_create(cf->pool, 4, sizeof(char *));
            if (srv->kv == NULL) {
                return NGX_CONF_ERROR;
            }

            p = value[i].data + 3;
            e = value[i].data + value[i].len;

            while (p < e) {
                s = p;
                while (p < e && *p != ',') {
                    p++;
                }

                one.data = s;
                one.len = (size_t) (p - s);

                if (one.len == 0) {
                    return "has an empty kv= endpoint";
                }

                ep = ngx_array_push(srv->kv);
                if (ep == NULL) {
                    return NGX_CONF_ERROR;
                }

                *ep = ngx_http_wsel_cstr(cf->pool, &one);
                if (*ep == NULL) {
                    return NGX_CONF_ERROR;
                }

                if (p < e) {
                    p++;
                }
            }

        } else {
            return "takes dp=N and kv=ENDPOINT,ENDPOINT,...";
        }
    }

    if (srv->dp == 0) {
        return "needs dp=N";
    }

    if (srv->kv && srv->kv->nelts != srv->dp) {
        return "needs one kv= endpoint per rank (dp= of them)";
    }

    (void) cmd;
    return NGX_CONF_OK;
}


static char *
ngx_http_wsel_prompt(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    ngx_str_t  *value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "tokens") == 0) {
        up->text_mode = 0;

    } else if (ngx_strcmp(value[1].data, "text") == 0) {
        up->text_mode = 1;

    } else {
        return "takes \"tokens\" or \"text\"";
    }

    (void) cmd;
    return NGX_CONF_OK;
}


static char *
ngx_http_wsel_kv_source(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    ngx_str_t  *value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "history") == 0) {
        up->kv_events = 0;

    } else if (ngx_strcmp(value[1].data, "events") == 0) {
        up->kv_events = 1;

    } else {
        return "takes \"history\" or \"events\"";
    }

    up->kv_threads = WSEL_ROUTER_KV_THREADS_LOW;

    if (cf->args->nelts == 3) {
        if (!up->kv_events) {
            return "takes threads= with \"events\" only";
        }

        if (ngx_strcmp(value[2].data, "threads=low") == 0) {
            up->kv_threads = WSEL_ROUTER_KV_THREADS_LOW;

        } else if (ngx_strcmp(value[2].data, "threads=normal") == 0) {
            up->kv_threads = WSEL_ROUTER_KV_THREADS_NORMAL;

        } else {
            return "takes \"threads=low\" or \"threads=normal\" after \"events\"";
        }
    }

    (void) cmd;
    return NGX_CONF_OK;
}


/* wsel_busy [requests=N] [prefill_tokens=N]; */
static char *
ngx_http_wsel_busy(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

    ngx_int_t    n;
    ngx_str_t   *value = cf->args->elts;
    ngx_uint_t   i;

    for (i = 1; i < cf->args->nelts; i++) {
        if (ngx_strncmp(value[i].data, "requests=", 9) == 0) {
            n = ngx_atoi(value[i].data + 9, value[i].len - 9);
            if (n < 0 || (uint64_t) n > 0xffffffff) {
                return "has a bad requests= (0..4294967295)";
            }
            up->busy_requests = (ngx_uint_t) n;

        } else if (ngx_strncmp(value[i].data, "prefill_tokens=", 15) == 0) {
            n = ngx_atoi(value[i].data + 15, value[i].len - 15);
            if (n < 0) {
                return "has a bad prefill_tokens=";
            }
            up->busy_prefill = (ngx_uint_t) n;

        } else {
            return "takes requests=N and prefill_tokens=N";
        }
    }

    (void) cmd;
    return NGX_CONF_OK;
}


static char *
ngx_http_wsel_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_loc_conf_t  *wlcf = conf;

    ngx_str_t                 *value = cf->args->elts;
    ngx_http_core_loc_conf_t  *clcf;

    wlcf->status = value[1];

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_wsel_status_handler;

    (void) cmd;
    return NGX_CONF_OK;
}


static char *
ngx_http_wsel_admin(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_loc_conf_t  *wlcf = conf;

    ngx_str_t                 *value = cf->args->elts;
    ngx_http_core_loc_conf_t  *clcf;

    wlcf->admin = value[1];

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_wsel_admin_handler;

    (void) cmd;
    return NGX_CONF_OK;
}
