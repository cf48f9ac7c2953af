/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_module.h -- what the files of ngx_http_upstream_wsel_module
 * share: its settings and per-request state, and the functions one file
 * calls in another (each file's comment says what it does).
 */

#ifndef NGX_HTTP_WSEL_MODULE_H_INCLUDED_
#define NGX_HTTP_WSEL_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdio.h>
#include <time.h>

#include "wsel_router.h"
#include "wsel_token_ids.h"
#include "ngx_http_wsel_metrics.h"


#define NGX_HTTP_WSEL_MAX_BODY      (64 * 1024 * 1024)
#define NGX_HTTP_WSEL_ERR           512
#define NGX_HTTP_WSEL_JSON_DEPTH    64
/* most JSON values in an admin request: twice what a policy's config may
 * hold (host/config.c), so memory for its tokens stays under 200 KiB */
#define NGX_HTTP_WSEL_ADMIN_VALUES  8192
/* most bytes of a config the admin location shares with the other workers */
#define NGX_HTTP_WSEL_SHARED_CONFIG (1024 * 1024)


/* The upstream's shared zone (ngx_http_wsel_shared.c). */
typedef struct ngx_http_wsel_shared_s  ngx_http_wsel_shared_t;
/* The upstream's counters summed over workers (ngx_http_wsel_totals.c). */
typedef struct ngx_http_wsel_totals_s  ngx_http_wsel_totals_t;


/* A worker's counters as the zone sums them, a vector of uint64_t: every
 * scalar of NGX_HTTP_WSEL_SCALARS (a gauge's sum is not printed), every
 * reason of NGX_HTTP_WSEL_BY_REASON, the histograms
 * (ngx_http_wsel_hist_t each), then per rank its
 * ngx_http_wsel_rank_counters_t. */
#define NGX_HTTP_WSEL_X_ONE(...)  + 1
#define NGX_HTTP_WSEL_X_COUNT(json, object, prom, help, count, name, value)  \
    + (count)

enum {
    NGX_HTTP_WSEL_NSCALARS = 0 NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X_ONE),
    NGX_HTTP_WSEL_NREASONS = 0 NGX_HTTP_WSEL_BY_REASON(NGX_HTTP_WSEL_X_COUNT),
    NGX_HTTP_WSEL_TOTALS_HEAD = NGX_HTTP_WSEL_NSCALARS + NGX_HTTP_WSEL_NREASONS
        + NGX_HTTP_WSEL_HISTS * sizeof(ngx_http_wsel_hist_t) / 8,
    NGX_HTTP_WSEL_TOTALS_RANK = sizeof(ngx_http_wsel_rank_counters_t) / 8
};

/* wsel_tokenizer's state (ngx_http_wsel_tokenize.c). */
typedef struct ngx_http_wsel_tok_s  ngx_http_wsel_tok_t;
typedef struct ngx_http_wsel_tok_task_s  ngx_http_wsel_tok_task_t;


typedef struct {
    ngx_str_t                       addr;
    ngx_uint_t                      dp;
    ngx_array_t                    *kv;        /* char * (NUL-terminated) */
    ngx_uint_t                      used;
} ngx_http_wsel_server_t;


/* wsel_sync's settings (ngx_http_wsel_sync.c); url.len 0 = off. */
typedef struct {
    ngx_str_t                       url;       /* NUL-terminated */
    ngx_str_t                       subject;   /* NUL-terminated; "" = default */
    uint32_t                        instance;  /* replica= or random */
    uint32_t                        generation; /* random per configuration */
    ngx_uint_t                      period_ms;
    ngx_uint_t                      lease;
    ngx_uint_t                      batch_us;
    ngx_uint_t                      echo_us;    /* UNSET: the library's */
    ngx_str_t                       file;      /* where wsel_sync is, */
    ngx_uint_t                      line;      /* for a refusal's message */
    uint64_t                        replica_id; /* this worker's; 0 = none */
} ngx_http_wsel_sync_conf_t;


/* Bytes kept between requests (malloc'd, grown as needed). */
typedef struct {
    u_char                         *data;
    size_t                          cap;
} ngx_http_wsel_bytes_t;


typedef struct {
    /* configuration */
    ngx_flag_t                      enabled;
    ngx_str_t                       name;
    ngx_str_t                       policy;    /* NUL-terminated; "" = builtin */
    ngx_str_t                       config;    /* NUL-terminated JSON */
    ngx_str_t                       policy_file; /* where wsel_policy is, */
    ngx_uint_t                      policy_line; /* for a refusal's message */
    ngx_flag_t                      isolated;
    ngx_str_t                       helper;    /* NUL-terminated or empty */
    ngx_uint_t                      block_size;
    ngx_uint_t                      text_mode;
    ngx_uint_t                      kv_events;
    ngx_uint_t                      kv_threads;    /* WSEL_ROUTER_KV_THREADS_* */
    ngx_uint_t                      capacity;
    ngx_uint_t                      busy_requests;
    ngx_uint_t                      busy_prefill;
    ngx_array_t                    *servers;   /* ngx_http_wsel_server_t */
    ngx_http_wsel_sync_conf_t       sync;
    ngx_http_upstream_srv_conf_t   *uscf;

    /* the worker's state */
    wsel_host                      *host;
    wsel_router                    *router;
    ngx_uint_t                      npeers;
    ngx_str_t                      *peer_names; /* by worker id - 1 */
    u_char                         *peer_down; /* by worker id - 1: told
                                                  the router unavailable */
    ngx_uint_t                      ndown;     /* how many */
    wsel_token_buf                  tokens;    /* the prompt being routed */
    ngx_http_wsel_bytes_t           body;      /* its body, when in pieces */
    int                             token_reader;  /* WSEL_TOKEN_IDS_* */
    ngx_event_t                     flush;     /* deferred history record */
    ngx_event_t                     tick;      /* the zone's, when idle */
    u_char                          live_path[PATH_MAX]; /* as the host takes */
    u_char                          last_error[NGX_HTTP_WSEL_ERR];
    ngx_shm_zone_t                 *zone;      /* shared by the workers */
    ngx_uint_t                      zone_processes;
    ngx_http_wsel_shared_t         *shared;    /* in it; NULL before init */
    ngx_uint_t                      epoch;     /* this cycle's */
    ngx_atomic_uint_t               policy_seen; /* the switch applied */
    ngx_http_wsel_tok_t            *tok;       /* wsel_tokenizer, or NULL */
    ngx_http_wsel_totals_t         *totals;    /* in the zone */
    void                           *totals_slot; /* this worker's, or NULL */

    /* the module's own counters */
    uint64_t                        requests;
    uint64_t                        no_prompt;
    uint64_t                        body_copies; /* bodies in pieces, joined */
    uint64_t                        route_errors;
    uint64_t                        retries;
    uint64_t                        peer_unavailable;
    uint64_t                        upstream_failures;
    uint64_t                        failed_outcomes;
    uint64_t                        responses_cut;
    uint64_t                        peers_marked_down;
    uint64_t                        admin_switches;
    uint64_t                        admin_refused;
    uint64_t                        shared_switches; /* another worker's */
    /* wsel_tokenizer: prompts routed by their token ids, refused ones
     * (hashed as text), ids, and the chat prefix cache */
    uint64_t                        tok_text;
    uint64_t                        tok_chat;
    uint64_t                        tok_fallbacks;
    uint64_t                        tok_tokens;
    uint64_t                        tok_cache_hits;
    uint64_t                        tok_cache_misses;
    uint64_t                        tok_cache_tokens;
    ngx_http_wsel_metrics_t         metrics;
} ngx_http_wsel_upstream_t;


typedef struct {
    ngx_array_t                     upstreams; /* ngx_http_wsel_upstream_t * */
    ngx_event_t                     reclaim;
} ngx_http_wsel_main_conf_t;


typedef struct {
    ngx_str_t                       route;
    ngx_str_t                       status;
    ngx_str_t                       admin;
} ngx_http_wsel_loc_conf_t;


/* One "key": NUMBER of the response looked for across its buffers. */
typedef struct {
    ngx_uint_t                      matched;   /* key bytes matched */
    ngx_uint_t                      digits;
    uint64_t                        value;
} ngx_http_wsel_scan_t;


typedef struct {
    ngx_http_wsel_upstream_t       *up;
    ngx_http_request_t             *request;
    ngx_int_t                       phase_status;
    uint64_t                        request_id;
    uint64_t                        worker_id;
    uint32_t                        dp_rank;
    unsigned                        routed:1;
    unsigned                        first:1;
    unsigned                        tried:1;     /* the balancer chose a peer */
    unsigned                        complete:1;  /* the response's last_buf went by */
    unsigned                        have_cached:1;
    unsigned                        have_prompt:1;
    u_char                          rank_text[NGX_INT_T_LEN];
    size_t                          rank_len;
    /* the response's "usage" figures, scanned as it streams by */
    uint32_t                        output_tokens;
    uint32_t                        cached_tokens;
    uint32_t                        prompt_tokens;
    uint64_t                        routed_ns;   /* the route's start */
    ngx_http_wsel_tok_task_t       *tok_task;    /* tokenizing in the pool */
    ngx_http_wsel_scan_t            scan[3];
} ngx_http_wsel_ctx_t;


typedef struct {
    ngx_http_upstream_rr_peer_data_t  *rrp;
    ngx_http_wsel_ctx_t               *ctx;
    ngx_http_wsel_upstream_t          *up;
} ngx_http_wsel_peer_data_t;


typedef struct {
    uint32_t                       *tokens;
    uint32_t                        ntokens;
    u_char                         *text;
    size_t                          text_len;
    ngx_uint_t                      chat;      /* text is "messages" */
} ngx_http_wsel_prompt_t;


extern ngx_module_t  ngx_http_upstream_wsel_module;
extern ngx_http_output_body_filter_pt  ngx_http_wsel_next_body_filter;


/* ngx_http_upstream_wsel_module.c: helpers */
void ngx_http_wsel_log(void *user, int32_t level, const char *msg);
ngx_http_wsel_upstream_t *ngx_http_wsel_find(ngx_http_wsel_main_conf_t *wmcf,
    ngx_str_t *name);
void ngx_http_wsel_host_options(ngx_http_wsel_upstream_t *up,
    wsel_host_options *o);

/* ngx_http_wsel_prompt.c: the body and the prompt in it */
u_char *ngx_http_wsel_js_ws(u_char *p, u_char *e);
u_char *ngx_http_wsel_js_string(u_char *p, u_char *e);
u_char *ngx_http_wsel_js_value(u_char *p, u_char *e, ngx_uint_t depth);
ngx_int_t ngx_http_wsel_find_prompt(ngx_http_wsel_upstream_t *up, u_char *p,
    u_char *e, ngx_uint_t text_mode, ngx_http_wsel_prompt_t *out);
u_char *ngx_http_wsel_body(ngx_http_request_t *r, ngx_http_wsel_bytes_t *keep,
    size_t *len, ngx_uint_t *copied);

/* ngx_http_wsel_request.c: the request path */
void ngx_http_wsel_finish(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx,
    ngx_uint_t failed);
void ngx_http_wsel_flush_handler(ngx_event_t *ev);
ngx_int_t ngx_http_wsel_precontent_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_wsel_rank_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
ngx_int_t ngx_http_wsel_body_filter(ngx_http_request_t *r, ngx_chain_t *in);

/* ngx_http_wsel_balancer.c: the peer nginx proxies to */
ngx_int_t ngx_http_wsel_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
void ngx_http_wsel_init_peer_state(ngx_http_wsel_upstream_t *up);
void ngx_http_wsel_recheck_peers(ngx_http_wsel_upstream_t *up);

/* ngx_http_wsel_check.c: the checks of the whole configuration */
/* The upstream's policy and config loaded into a throwaway host, as a
 * worker loads them: 0, or the host's error with the reason in err.
 * [configuration time, the master or a child of it] */
int32_t ngx_http_wsel_try_policy(ngx_http_wsel_upstream_t *up, char *err,
    size_t size);

/* ngx_http_wsel_plugin_path.c: a policy by path or by name */
/* The policy `spec` names: itself when it holds a '/', else the path of
 * NAME.so in the plugin folder beside the module (installed or build
 * tree). NULL when none is found, the reason in err. [any process]
 * OWNERSHIP: the result is spec or allocated from pool. */
const char *ngx_http_wsel_plugin_path(ngx_pool_t *pool, const char *spec,
    char *err, size_t size);

/* ngx_http_wsel_status.c: the status location, and what the admin
 * location's answer shares with it */
ngx_int_t ngx_http_wsel_status_handler(ngx_http_request_t *r);
u_char *ngx_http_wsel_escape(u_char *d, u_char *last, const u_char *s,
    size_t n);
ngx_int_t ngx_http_wsel_send(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, ngx_buf_t *b);

/* ngx_http_wsel_shared.c: the zone the upstream's workers share */
/* Add the upstream's zone "wsel:NAME". [configuration time] */
ngx_int_t ngx_http_wsel_zone_add(ngx_conf_t *cf, ngx_http_wsel_upstream_t *up);
/* Share the router's load through the zone (a failure is logged: the
 * worker then routes on its own load). [worker start, after the router] */
void ngx_http_wsel_shared_start(ngx_cycle_t *cycle,
    ngx_http_wsel_upstream_t *up);
/* Before a route or a status answer: take another worker's policy switch,
 * apply the other workers' load. [the worker's thread] */
void ngx_http_wsel_shared_sync(ngx_http_wsel_upstream_t *up, ngx_log_t *log);
/* After the admin location's switch: publish it for the other workers.
 * NGX_OK, or NGX_ERROR with the reason in err (the zone is full).
 * [the worker's thread] */
ngx_int_t ngx_http_wsel_shared_publish(ngx_http_wsel_upstream_t *up,
    const char *path, const char *config, char *err, size_t err_size);

/* ngx_http_wsel_sync.c: wsel_sync, the load shared with other nginx
 * instances over NATS */
/* The directive: wsel_sync nats://HOST:PORT [subject=S] [replica=ID]
 * [period=MS] [lease=N] [batch=US]. [configuration time] */
char *ngx_http_wsel_sync_directive(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
/* Start this worker's replica (a failure is logged: the worker then routes
 * on its own instance's load). NGX_DECLINED when wsel_sync is not set.
 * [worker start, after the router] */
ngx_int_t ngx_http_wsel_sync_start(ngx_cycle_t *cycle,
    ngx_http_wsel_upstream_t *up);

/* ngx_http_wsel_tokenize.c: wsel_tokenizer (docs/tokenize.md) */
/* The directive: wsel_tokenizer DIR [pool=NAME] [large_pool=NAME]
 * [large=SIZE] [cache=SIZE]. The files
 * are opened here (a refusal names the reason), the thread pool added.
 * [configuration time] */
char *ngx_http_wsel_tokenizer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* Tokenize the prompt of a routed request in the thread pool: NGX_AGAIN
 * when a task is posted (ngx_http_wsel_route_tokens routes it when it is
 * done), NGX_DECLINED when the prompt is to be hashed as text here (no
 * tokenizer, or no task could be posted: counted a fallback).
 * body[0..len) must live as long as the request. [the worker's thread] */
ngx_int_t ngx_http_wsel_tokenize_post(ngx_http_request_t *r,
    ngx_http_wsel_ctx_t *ctx, ngx_http_wsel_prompt_t *prompt,
    u_char *body, size_t len);
/* The finished task's ids for the route: NGX_OK with q->tokens set (they
 * live as long as the request), or NGX_DECLINED: the tokenizer refused
 * the prompt, counted; q keeps its text. [the worker's thread] */
ngx_int_t ngx_http_wsel_tokenize_result(ngx_http_wsel_ctx_t *ctx,
    wsel_route_request *q);

/* ngx_http_wsel_request.c: routing once a task is done */
void ngx_http_wsel_route_tokens(ngx_http_request_t *r);

/* Before the worker exits: its last counters into the zone's retired
 * sum. [the worker's thread, router and host still up] */
void ngx_http_wsel_shared_exit(ngx_http_wsel_upstream_t *up, ngx_log_t *log);

/* ngx_http_wsel_totals.c: the counters summed over workers */
/* Bytes and a zeroed sum for `processes` workers in the zone (NULL
 * without memory). [zone init] */
size_t ngx_http_wsel_totals_size(ngx_uint_t processes);
ngx_http_wsel_totals_t *ngx_http_wsel_totals_create(ngx_slab_pool_t *shpool,
    ngx_uint_t processes);
/* Take a counter slot (logged when none is free). [worker start] */
void ngx_http_wsel_totals_join(ngx_http_wsel_upstream_t *up, ngx_log_t *log);
/* Write this worker's vector v (NGX_HTTP_WSEL_TOTALS_HEAD values, then
 * NGX_HTTP_WSEL_TOTALS_RANK per rank of keys[0..nr)) into its slot and
 * replace v by the upstream's sum; returns when the sum started (the
 * zone's creation). Without a slot v stays this worker's. [the worker's
 * thread] */
time_t ngx_http_wsel_totals_exchange(ngx_http_wsel_upstream_t *up,
    uint64_t *v, const uint64_t *keys, ngx_uint_t nr);
/* Value i of the sum, under the zone's mutex. */
uint64_t ngx_http_wsel_totals_at(ngx_http_wsel_totals_t *t, ngx_uint_t i);
/* Add this worker's slot to the retired sum and free it. [exit] */
void ngx_http_wsel_totals_leave(ngx_http_wsel_upstream_t *up);
/* ngx_http_wsel_status.c: write this worker's counters into the zone. */
void ngx_http_wsel_status_publish(ngx_http_wsel_upstream_t *up,
    ngx_log_t *log);

/* ngx_http_wsel_admin.c: the admin location */
ngx_int_t ngx_http_wsel_admin_handler(ngx_http_request_t *r);


#endif /* NGX_HTTP_WSEL_MODULE_H_INCLUDED_ */
