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
 *                     the response's usage figures are scanned as it passes.
 *   pool cleanup      the request's end: wsel_router_finished_ex, the
 *                     policy told the outcome (output and cached tokens,
 *                     failed or not).
 *
 * One worker process: the router (load accounting, KV index) lives in the
 * worker's memory, so a second worker would route on half the picture.
 * The module refuses `worker_processes` above 1 at configuration time.
 *
 * Style: nginx's (the code is read next to nginx's own modules), built
 * with nginx's warning flags (nginx/CMakeLists.txt says which and why).
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdio.h>
#include <time.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "wsel_router.h"


#define NGX_HTTP_WSEL_MAX_BODY      (64 * 1024 * 1024)
#define NGX_HTTP_WSEL_ERR           512
#define NGX_HTTP_WSEL_JSON_DEPTH    64
#define NGX_HTTP_WSEL_LAT_BUCKETS   24


typedef struct {
    ngx_str_t                       addr;
    ngx_uint_t                      dp;
    ngx_array_t                    *kv;        /* char * (NUL-terminated) */
    ngx_uint_t                      used;
} ngx_http_wsel_server_t;


typedef struct {
    /* configuration */
    ngx_flag_t                      enabled;
    ngx_str_t                       name;
    ngx_str_t                       policy;    /* NUL-terminated; "" = builtin */
    ngx_str_t                       config;    /* NUL-terminated JSON */
    ngx_flag_t                      isolated;
    ngx_str_t                       helper;    /* NUL-terminated or empty */
    ngx_uint_t                      block_size;
    ngx_uint_t                      text_mode;
    ngx_uint_t                      kv_events;
    ngx_uint_t                      capacity;
    ngx_uint_t                      busy_requests;
    ngx_uint_t                      busy_prefill;
    ngx_array_t                    *servers;   /* ngx_http_wsel_server_t */
    ngx_http_upstream_srv_conf_t   *uscf;

    /* the worker's state */
    wsel_host                      *host;
    wsel_router                    *router;
    ngx_uint_t                      npeers;
    ngx_str_t                      *peer_names; /* by worker id - 1 */
    uint32_t                       *tokens;    /* the prompt being routed */
    size_t                          tokens_cap;
    ngx_event_t                     flush;     /* deferred history record */
    u_char                          live_path[1024];
    u_char                          last_error[NGX_HTTP_WSEL_ERR];

    /* the module's own counters */
    uint64_t                        requests;
    uint64_t                        no_prompt;
    uint64_t                        route_errors;
    uint64_t                        retries;
    uint64_t                        peer_unavailable;
    uint64_t                        upstream_failures;
    uint64_t                        failed_outcomes;
    uint64_t                        admin_switches;
    uint64_t                        admin_refused;
    uint64_t                        lat[NGX_HTTP_WSEL_LAT_BUCKETS];
    uint64_t                        lat_sum_ns;
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
    unsigned                        tried:1;
    unsigned                        have_cached:1;
    u_char                          rank_text[NGX_INT_T_LEN];
    size_t                          rank_len;
    /* the response's "usage" figures, scanned as it streams by */
    uint32_t                        output_tokens;
    uint32_t                        cached_tokens;
    ngx_http_wsel_scan_t            scan[2];
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
} ngx_http_wsel_prompt_t;


static ngx_int_t ngx_http_wsel_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_wsel_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_wsel_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_wsel_create_srv_conf(ngx_conf_t *cf);
static void *ngx_http_wsel_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_wsel_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static ngx_int_t ngx_http_wsel_init_module(ngx_cycle_t *cycle);
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

static ngx_int_t ngx_http_wsel_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_wsel_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_wsel_get_peer(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_wsel_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state);


static ngx_http_output_body_filter_pt  ngx_http_next_body_filter;


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
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE1,
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
    ngx_http_wsel_init_module,             /* init module */
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


static void
ngx_http_wsel_log(void *user, int32_t level, const char *msg)
{
    ngx_uint_t  l;

    (void) user;

    l = level <= WSEL_LOG_ERROR ? NGX_LOG_ERR
        : level == WSEL_LOG_WARN ? NGX_LOG_WARN : NGX_LOG_INFO;

    ngx_log_error(l, ngx_cycle->log, 0, "wsel: %s", msg);
}


static ngx_http_wsel_upstream_t *
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


static void
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
/* a bounded JSON scanner: finds the prompt, skips everything else          */
/* ------------------------------------------------------------------------ */

static u_char *
ngx_http_wsel_js_ws(u_char *p, u_char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
        p++;
    }

    return p;
}


/* p at '"': returns the byte after the closing quote, or NULL */
static u_char *
ngx_http_wsel_js_string(u_char *p, u_char *e)
{
    for (p++; p < e; p++) {
        if (*p == '\\') {
            p++;
            continue;
        }

        if (*p == '"') {
            return p + 1;
        }

        if (*p < 0x20) {
            return NULL;
        }
    }

    return NULL;
}


static u_char *
ngx_http_wsel_js_value(u_char *p, u_char *e, ngx_uint_t depth)
{
    p = ngx_http_wsel_js_ws(p, e);

    if (p == e || depth > NGX_HTTP_WSEL_JSON_DEPTH) {
        return NULL;
    }

    if (*p == '"') {
        return ngx_http_wsel_js_string(p, e);
    }

    if (*p == '{' || *p == '[') {
        u_char  close = *p == '{' ? '}' : ']';

        p = ngx_http_wsel_js_ws(p + 1, e);

        if (p < e && *p == close) {
            return p + 1;
        }

        for ( ;; ) {
            if (close == '}') {
                p = ngx_http_wsel_js_ws(p, e);
                if (p == e || *p != '"') {
                    return NULL;
                }
                p = ngx_http_wsel_js_string(p, e);
                if (p == NULL) {
                    return NULL;
                }
                p = ngx_http_wsel_js_ws(p, e);
                if (p == e || *p != ':') {
                    return NULL;
                }
                p++;
            }

            p = ngx_http_wsel_js_value(p, e, depth + 1);
            if (p == NULL) {
                return NULL;
            }

            p = ngx_http_wsel_js_ws(p, e);
            if (p == e) {
                return NULL;
            }

            if (*p == close) {
                return p + 1;
            }

            if (*p != ',') {
                return NULL;
            }

            p++;
        }
    }

    /* a number, true, false or null */
    if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == 't' || *p == 'f'
          || *p == 'n'))
    {
        return NULL;
    }

    while (p < e && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z')
                     || *p == '-' || *p == '+' || *p == '.' || *p == 'E'))
    {
        p++;
    }

    return p;
}


/*
 * The value of the 1..8 ASCII digits starting at p, when the 8 bytes at p
 * are readable: *len = how many digits (0: none; 8: maybe more follow).
 * SWAR: a byte is a digit when (byte ^ '0') < 10; the digits are moved to
 * the top of a 64-bit word (leading zeros below) and folded pairwise,
 * 8 digits in three multiply-add steps.
 */
static ngx_inline uint64_t
ngx_http_wsel_digits8(const u_char *p, ngx_uint_t *len)
{
    uint64_t  x, nd;

    ngx_memcpy(&x, p, 8);
    x ^= 0x3030303030303030ull;

    /* high bit set in every byte that is not a digit */
    nd = ((x + 0x7676767676767676ull) | x) & 0x8080808080808080ull;

    *len = nd ? (ngx_uint_t) __builtin_ctzll(nd) >> 3 : 8;

    if (*len == 0) {
        return 0;
    }

    x <<= 8 * (8 - *len);

    x = (x * 10 + (x >> 8)) & 0x00ff00ff00ff00ffull;
    x = (x * 100 + (x >> 16)) & 0x0000ffff0000ffffull;
    x = (x * 10000 + (x >> 32)) & 0xffffffffull;

    return x;
}


#if defined(__SSE2__)

/*
 * 64 bytes of "d,d,d" at p (p at a token's first digit, 72 bytes readable):
 * every token starting in them but the last, into out. Returns how many
 * (*adv = the offset of the last one's start, where the next window
 * begins), or 0 when the window holds anything but digits and single
 * commas, or a token of 8 digits or more: the caller's byte loop then
 * reads from p. Finding the tokens' starts in a digit mask (SSE2) frees
 * each token's conversion from the one before it.
 */
static ngx_uint_t
ngx_http_wsel_tokens64(const u_char *p, uint32_t *out, size_t *adv)
{
    __m128i     v, lo, hi, comma;
    uint64_t    d, c, starts, x;
    ngx_uint_t  i, k, q, len, last;

    lo = _mm_set1_epi8('0' - 1);
    hi = _mm_set1_epi8('9' + 1);
    comma = _mm_set1_epi8(',');
    d = 0;
    c = 0;

    for (i = 0; i < 4; i++) {
        v = _mm_loadu_si128((const __m128i *) (p + 16 * i));
        d |= (uint64_t) (uint16_t) _mm_movemask_epi8(
                 _mm_and_si128(_mm_cmpgt_epi8(v, lo), _mm_cmplt_epi8(v, hi)))
             << (16 * i);
        c |= (uint64_t) (uint16_t) _mm_movemask_epi8(_mm_cmpeq_epi8(v, comma))
             << (16 * i);
    }

    if ((d | c) != ~0ull || (c & (c << 1)) || !(d & 1)) {
        return 0;
    }

    starts = d & ~(d << 1);
    last = 63 - (ngx_uint_t) __builtin_clzll(starts);

    if (last == 0) {
        return 0;
    }

    starts &= ~(1ull << last);
    k = 0;

    while (starts) {
        q = (ngx_uint_t) __builtin_ctzll(starts);
        x = ngx_http_wsel_digits8(p + q, &len);
        if (len >= 8) {
            return 0;
        }
        out[k++] = (uint32_t) x;
        starts &= starts - 1;
    }

    *adv = last;
    return k;
}

#endif


/*
 * An array of token ids (p at '['), every element an integer in [0, 2^32),
 * parsed in one pass into the upstream's token buffer (grown as needed,
 * kept for the next request: no per-request allocation). Returns the byte
 * after the ']' with out->tokens set, or NULL when the value is not such
 * an array (or is empty); NGX_ERROR in *rc when memory ran out.
 */
static u_char *
ngx_http_wsel_js_tokens(ngx_http_wsel_upstream_t *up, u_char *p, u_char *e,
    ngx_http_wsel_prompt_t *out, ngx_int_t *rc)
{
    size_t      n, cap, adv;
    uint32_t   *t, *g;
    uint64_t    v;
    ngx_uint_t  len;

    (void) adv;

    t = up->tokens;
    cap = up->tokens_cap;
    n = 0;

    p = ngx_http_wsel_js_ws(p + 1, e);

    for ( ;; ) {
#if defined(__SSE2__)
        /* p at a token: whole windows of "d,d,d" first */
        while (e - p >= 72 && p < e && *p >= '0' && *p <= '9') {
            if (cap - n < 64) {
                cap = cap ? cap * 2 : 16384;
                g = ngx_alloc(cap * sizeof(uint32_t), ngx_cycle->log);
                if (g == NULL) {
                    *rc = NGX_ERROR;
                    return NULL;
                }

                if (n) {
                    ngx_memcpy(g, t, n * sizeof(uint32_t));
                }

                ngx_free(up->tokens);
                up->tokens = t = g;
                up->tokens_cap = cap;
            }

            len = ngx_http_wsel_tokens64(p, t + n, &adv);
            if (len == 0) {
                break;
            }

            n += len;
            p += adv;
        }
#endif

        if (e - p > 8) {
            /* the common case: fewer than 8 digits, then ',' or ']' */
            v = ngx_http_wsel_digits8(p, &len);
            if (len == 0) {
                return NULL;
            }
            p += len;

        } else {
            len = 0;
            v = 0;
        }

        if (len == 0 || len == 8) {
            if (len == 0 && (p == e || *p < '0' || *p > '9')) {
                return NULL;
            }

            while (p < e && *p >= '0' && *p <= '9') {
                v = v * 10 + (uint64_t) (*p++ - '0');
                if (v > 0xffffffffu) {
                    return NULL;
                }
            }
        }

        if (n == cap) {
            cap = cap ? cap * 2 : 16384;
            g = ngx_alloc(cap * sizeof(uint32_t), ngx_cycle->log);
            if (g == NULL) {
                *rc = NGX_ERROR;
                return NULL;
            }

            if (n) {
                ngx_memcpy(g, t, n * sizeof(uint32_t));
            }

            ngx_free(up->tokens);
            up->tokens = t = g;
            up->tokens_cap = cap;
        }

        t[n++] = (uint32_t) v;

        if (p < e && *p == ',') {
            p++;
            if (p < e && (*p < '0' || *p > '9')) {  /* ", " and the like */
                p = ngx_http_wsel_js_ws(p, e);
            }
            continue;
        }

        p = ngx_http_wsel_js_ws(p, e);
        if (p == e) {
            return NULL;
        }

        if (*p == ']') {
            break;
        }

        if (*p != ',') {
            return NULL;
        }

        p = ngx_http_wsel_js_ws(p + 1, e);
    }

    out->tokens = t;
    out->ntokens = (uint32_t) n;

    return p + 1;
}


/*
 * The prompt of a /v1/completions or /v1/chat/completions body: "prompt" as
 * token ids (any mode) or as a string (text mode), or "messages" (text
 * mode: their JSON text, so conversations sharing a beginning share a
 * prefix). One pass: token ids are read where they stand, every other
 * value skipped. NGX_DECLINED: no usable prompt.
 */
static ngx_int_t
ngx_http_wsel_find_prompt(ngx_http_wsel_upstream_t *up, u_char *p, u_char *e,
    ngx_uint_t text_mode, ngx_http_wsel_prompt_t *out)
{
    u_char     *k, *ke, *v, *ve;
    ngx_int_t   rc, found;

    found = NGX_DECLINED;

    p = ngx_http_wsel_js_ws(p, e);
    if (p == e || *p != '{') {
        return NGX_DECLINED;
    }

    p = ngx_http_wsel_js_ws(p + 1, e);
    if (p < e && *p == '}') {
        return NGX_DECLINED;
    }

    for ( ;; ) {
        p = ngx_http_wsel_js_ws(p, e);
        if (p == e || *p != '"') {
            return NGX_DECLINED;
        }

        k = p + 1;
        p = ngx_http_wsel_js_string(p, e);
        if (p == NULL) {
            return NGX_DECLINED;
        }
        ke = p - 1;

        p = ngx_http_wsel_js_ws(p, e);
        if (p == e || *p != ':') {
            return NGX_DECLINED;
        }

        v = ngx_http_wsel_js_ws(p + 1, e);
        ve = NULL;

        if (ke - k == 6 && ngx_strncmp(k, "prompt", 6) == 0 && v < e
            && *v == '[')
        {
            rc = NGX_OK;
            ve = ngx_http_wsel_js_tokens(up, v, e, out, &rc);
            if (rc == NGX_ERROR) {
                return NGX_ERROR;
            }

            if (ve) {
                return NGX_OK;          /* token ids win; the rest unread */
            }
        }

        if (ve == NULL) {
            ve = ngx_http_wsel_js_value(v, e, 1);
            if (ve == NULL) {
                return NGX_DECLINED;
            }

            if (ke - k == 6 && ngx_strncmp(k, "prompt", 6) == 0) {
                if (*v == '"' && text_mode && ve - v > 2) {
                    out->text = v + 1;
                    out->text_len = (size_t) (ve - v - 2);
                    found = NGX_OK;
                }

            } else if (ke - k == 8 && ngx_strncmp(k, "messages", 8) == 0) {
                if (*v == '[' && text_mode && out->text == NULL) {
                    out->text = v;
                    out->text_len = (size_t) (ve - v);
                    found = NGX_OK;
                }
            }
        }

        p = ngx_http_wsel_js_ws(ve, e);
        if (p == e) {
            return NGX_DECLINED;
        }

        if (*p == '}') {
            return found;
        }

        if (*p != ',') {
            return NGX_DECLINED;
        }

        p++;
    }
}


/* The request body as one buffer (memory or temp file), or NULL. */
static u_char *
ngx_http_wsel_body(ngx_http_request_t *r, size_t *len)
{
    u_char       *buf, *d;
    size_t        n;
    ssize_t       got;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        return NULL;
    }

    cl = r->request_body->bufs;

    if (cl->next == NULL && !cl->buf->in_file) {
        *len = (size_t) (cl->buf->last - cl->buf->pos);
        return cl->buf->pos;
    }

    n = 0;
    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;
        n += b->in_file ? (size_t) (b->file_last - b->file_pos)
                        : (size_t) (b->last - b->pos);
    }

    if (n > NGX_HTTP_WSEL_MAX_BODY) {
        return NULL;
    }

    buf = ngx_palloc(r->pool, n + 1);
    if (buf == NULL) {
        return NULL;
    }

    d = buf;
    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (b->in_file) {
            got = ngx_read_file(b->file, d, (size_t) (b->file_last - b->file_pos),
                                b->file_pos);
            if (got != b->file_last - b->file_pos) {
                return NULL;
            }
            d += got;

        } else {
            d = ngx_cpymem(d, b->pos, b->last - b->pos);
        }
    }

    *len = n;
    return buf;
}


/* ------------------------------------------------------------------------ */
/* routing: precontent phase, variable, body filter, cleanup                */
/* ------------------------------------------------------------------------ */

/*
 * The routed request ends: its outcome goes to the policy through
 * libwsel-router, with the response's completion_tokens (0 if it had none)
 * and cached_tokens (the engine's figure when the response says it), failed
 * when the client went away, the upstream failed, the status is not a
 * success, or no response byte came back.
 */
static void
ngx_http_wsel_finish(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx,
    ngx_uint_t failed)
{
    ngx_http_upstream_t  *u;
    wsel_router_finish    fin;

    if (!ctx->routed || ctx->up->router == NULL) {
        return;
    }

    ngx_memzero(&fin, sizeof(fin));
    fin.struct_size = sizeof(fin);
    fin.output_tokens = ctx->output_tokens;

    if (ctx->have_cached) {
        fin.flags |= WSEL_ROUTER_FINISH_CACHED_KNOWN;
        fin.cached_tokens = ctx->cached_tokens;
    }

    u = r->upstream;

    if (failed
        || r->connection->error
        || u == NULL
        || u->error
        || !ctx->first
        || r->headers_out.status == 0
        || r->headers_out.status >= NGX_HTTP_BAD_REQUEST)
    {
        fin.flags |= WSEL_ROUTER_FINISH_FAILED;
        ctx->up->failed_outcomes++;
    }

    (void) wsel_router_finished_ex(ctx->up->router, ctx->request_id, &fin);
    ctx->routed = 0;
}


static void
ngx_http_wsel_cleanup(void *data)
{
    ngx_http_wsel_ctx_t  *ctx = data;

    ngx_http_wsel_finish(ctx->request, ctx, 0);
}


static uint64_t
ngx_http_wsel_now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


static void
ngx_http_wsel_route(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx)
{
    u_char                    *body;
    size_t                     len;
    int32_t                    rc;
    uint64_t                   t0, dt, us;
    ngx_uint_t                 b;
    ngx_pool_cleanup_t        *cln;
    wsel_route_request         q;
    wsel_route_result          res;
    wsel_router_finish         fin;
    ngx_http_wsel_prompt_t     prompt;
    ngx_http_wsel_upstream_t  *up = ctx->up;

    if (up->router == NULL) {
        return;
    }

    t0 = ngx_http_wsel_now_ns();
    up->requests++;

    ngx_memzero(&prompt, sizeof(prompt));
    ngx_memzero(&q, sizeof(q));
    q.struct_size = sizeof(q);

    body = ngx_http_wsel_body(r, &len);

    if (body == NULL
        || ngx_http_wsel_find_prompt(up, body, body + len, up->text_mode,
                                     &prompt)
           != NGX_OK)
    {
        up->no_prompt++;
        q.overrides = WSEL_ROUTE_BUILTIN;

    } else if (prompt.tokens) {
        q.tokens = prompt.tokens;
        q.num_tokens = prompt.ntokens;

    } else {
        q.text = (const char *) prompt.text;
        q.text_len = prompt.text_len;
    }

    if (!up->kv_events) {
        /* the history record waits until the request is on its way
         * upstream (the posted flush below, after this event's handlers) */
        q.overrides |= WSEL_ROUTE_DEFER_HISTORY;
    }

    rc = wsel_router_route(up->router, &q, &res);

    if (!up->kv_events && !up->flush.posted) {
        ngx_post_event(&up->flush, &ngx_posted_events);
    }

    if (rc != 0) {
        up->route_errors++;
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "wsel: route in upstream \"%V\": %s; round-robin serves",
                      &up->name, wsel_strerror(rc));
        return;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        ngx_memzero(&fin, sizeof(fin));
        fin.struct_size = sizeof(fin);
        fin.flags = WSEL_ROUTER_FINISH_FAILED;
        (void) wsel_router_finished_ex(up->router, res.request_id, &fin);
        return;
    }

    cln->handler = ngx_http_wsel_cleanup;
    cln->data = ctx;

    ctx->routed = 1;
    ctx->request_id = res.request_id;
    ctx->worker_id = res.worker_id;
    ctx->dp_rank = res.dp_rank;
    ctx->rank_len = ngx_sprintf(ctx->rank_text, "%uD", res.dp_rank)
                    - ctx->rank_text;

    dt = ngx_http_wsel_now_ns() - t0;
    up->lat_sum_ns += dt;

    for (b = 0, us = dt / 1000; us > 0 && b < NGX_HTTP_WSEL_LAT_BUCKETS - 1; b++) {
        us >>= 1;
    }

    up->lat[b]++;
}


static void
ngx_http_wsel_flush_handler(ngx_event_t *ev)
{
    ngx_http_wsel_upstream_t  *up = ev->data;

    if (up->router) {
        wsel_router_flush(up->router);
    }
}


static void
ngx_http_wsel_body_handler(ngx_http_request_t *r)
{
    ngx_http_wsel_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_upstream_wsel_module);

    ngx_http_wsel_route(r, ctx);

    ctx->phase_status = NGX_DECLINED;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


static ngx_int_t
ngx_http_wsel_precontent_handler(ngx_http_request_t *r)
{
    ngx_int_t                   rc;
    ngx_http_wsel_ctx_t        *ctx;
    ngx_http_wsel_loc_conf_t   *wlcf;
    ngx_http_wsel_upstream_t   *up;

    if (r != r->main) {
        return NGX_DECLINED;
    }

    wlcf = ngx_http_get_module_loc_conf(r, ngx_http_upstream_wsel_module);

    if (wlcf->route.len == 0) {
        return NGX_DECLINED;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_upstream_wsel_module);

    if (ctx) {
        return ctx->phase_status;
    }

    up = ngx_http_wsel_find(
        ngx_http_get_module_main_conf(r, ngx_http_upstream_wsel_module),
        &wlcf->route);

    if (up == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "wsel: \"%V\" is not an upstream with wsel_policy",
                      &wlcf->route);
        return NGX_DECLINED;
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_wsel_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->up = up;
    ctx->request = r;
    ctx->phase_status = NGX_DONE;
    ngx_http_set_ctx(r, ctx, ngx_http_upstream_wsel_module);

    rc = ngx_http_read_client_request_body(r, ngx_http_wsel_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    ngx_http_finalize_request(r, NGX_DONE);
    return NGX_DONE;
}


static ngx_int_t
ngx_http_wsel_rank_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_wsel_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r->main, ngx_http_upstream_wsel_module);

    if (ctx == NULL || ctx->rank_len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->len = ctx->rank_len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    v->data = ctx->rank_text;

    return NGX_OK;
}


/*
 * The usage figures of an OpenAI-style response ("completion_tokens": N,
 * "cached_tokens": N), wherever they are (a JSON body, the last SSE
 * chunk), matched byte by byte so a key or number split across buffers is
 * still read; the last value of each key wins.
 */
static void
ngx_http_wsel_scan_usage(ngx_http_wsel_ctx_t *ctx, u_char *p, u_char *e)
{
    static const ngx_str_t  keys[2] = {
        ngx_string("\"completion_tokens\":"),
        ngx_string("\"cached_tokens\":")
    };

    u_char                 c;
    ngx_uint_t             k;
    ngx_http_wsel_scan_t  *sc;

    for ( /* void */ ; p < e; p++) {
        c = *p;

        for (k = 0; k < 2; k++) {
            sc = &ctx->scan[k];

            if (sc->matched < keys[k].len) {
                if (c == keys[k].data[sc->matched]) {
                    sc->matched++;
                    sc->digits = 0;
                    sc->value = 0;

                } else {
                    sc->matched = c == '"';
                }

                continue;
            }

            if (c >= '0' && c <= '9' && sc->value < 0xffffffffu) {
                sc->value = sc->value * 10 + (c - '0');
                sc->digits++;
                continue;
            }

            if (c == ' ' && sc->digits == 0) {
                continue;
            }

            if (sc->digits) {
                if (k == 0) {
                    ctx->output_tokens = sc->value > 0xffffffffu
                                         ? 0xffffffffu : (uint32_t) sc->value;
                } else {
                    ctx->cached_tokens = sc->value > 0xffffffffu
                                         ? 0xffffffffu : (uint32_t) sc->value;
                    ctx->have_cached = 1;
                }
            }

            sc->matched = c == '"';
        }
    }
}


static ngx_int_t
ngx_http_wsel_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_chain_t          *cl;
    ngx_http_wsel_ctx_t  *ctx;

    if (r == r->main && in) {
        ctx = ngx_http_get_module_ctx(r, ngx_http_upstream_wsel_module);

        if (ctx && ctx->routed) {
            for (cl = in; cl; cl = cl->next) {
                if (ngx_buf_size(cl->buf) <= 0) {
                    continue;
                }

                if (!ctx->first) {
                    ctx->first = 1;
                    (void) wsel_router_first_token(ctx->up->router,
                                                   ctx->request_id);
                }

                if (ngx_buf_in_memory(cl->buf)) {
                    ngx_http_wsel_scan_usage(ctx, cl->buf->pos,
                                             cl->buf->last);
                }
            }
        }
    }

    return ngx_http_next_body_filter(r, in);
}


/* ------------------------------------------------------------------------ */
/* balancer                                                                 */
/* ------------------------------------------------------------------------ */

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

    if (wp->ctx && wp->ctx->up != wp->up) {
        wp->ctx = NULL;     /* routed for another upstream: not ours */
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

    if (state & NGX_PEER_FAILED) {
        wp->up->upstream_failures++;
    }

    ngx_http_upstream_free_round_robin_peer(pc, wp->rrp, state);
}


/* Load the policy into a throwaway host: nginx -t and a reload refuse a
 * policy the workers could not load (the old workers keep serving). */
static ngx_int_t
ngx_http_wsel_check_policy(ngx_conf_t *cf, ngx_http_wsel_upstream_t *up)
{
    char               err[NGX_HTTP_WSEL_ERR];
    int32_t            rc;
    wsel_host         *host;
    wsel_host_options  o;

    if (up->policy.len == 0) {
        return NGX_OK;
    }

    ngx_http_wsel_host_options(up, &o);

    rc = wsel_host_create(&o, &host);
    if (rc != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "wsel: upstream \"%V\": no host: %s", &up->name,
                           wsel_strerror(rc));
        return NGX_ERROR;
    }

    err[0] = '\0';
    rc = wsel_host_switch(host, (const char *) up->policy.data,
                          (const char *) up->config.data, err, sizeof(err));
    wsel_host_destroy(host);

    if (rc != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "wsel: upstream \"%V\": policy \"%V\" refused: %s",
                           &up->name, &up->policy, err);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
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

    return ngx_http_wsel_check_policy(cf, up);
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


static ngx_int_t
ngx_http_wsel_start(ngx_cycle_t *cycle, ngx_http_wsel_upstream_t *up)
{
    char                           err[NGX_HTTP_WSEL_ERR];
    char                           addr[256];
    int32_t                        rc;
    ngx_uint_t                     i;
    wsel_host_options              ho;
    wsel_router_worker             w;
    wsel_router_options            ro;
    ngx_http_wsel_server_t        *srv;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    ngx_http_wsel_host_options(up, &ho);

    up->flush.handler = ngx_http_wsel_flush_handler;
    up->flush.data = up;
    up->flush.log = cycle->log;

    rc = wsel_host_create(&ho, &up->host);
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "wsel: upstream \"%V\": no host: %s", &up->name,
                      wsel_strerror(rc));
        return NGX_ERROR;
    }

    if (up->policy.len) {
        err[0] = '\0';
        rc = wsel_host_switch(up->host, (const char *) up->policy.data,
                              (const char *) up->config.data, err, sizeof(err));
        if (rc != 0) {
            /* checked by the master a moment ago; serve with the built-in
             * policy rather than not at all, and say so */
            ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                          "wsel: upstream \"%V\": policy \"%V\" refused in "
                          "the worker: %s; the built-in policy serves",
                          &up->name, &up->policy, err);
            ngx_snprintf(up->last_error, sizeof(up->last_error) - 1, "%s%Z",
                         err);

        } else {
            ngx_snprintf(up->live_path, sizeof(up->live_path) - 1, "%V%Z",
                         &up->policy);
        }
    }

    ngx_memzero(&ro, sizeof(ro));
    ro.struct_size = sizeof(ro);
    ro.block_size = (uint32_t) up->block_size;
    ro.kv_source = up->kv_events ? WSEL_ROUTER_KV_EVENTS
                                 : WSEL_ROUTER_KV_HISTORY;
    ro.capacity_blocks = (uint32_t) up->capacity;
    ro.busy_active_requests = (uint32_t) up->busy_requests;
    ro.busy_prefill_tokens = up->busy_prefill;
    ro.host = up->host;
    ro.log = ngx_http_wsel_log;

    rc = wsel_router_create(&ro, &up->router, err, sizeof(err));
    if (rc != 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "wsel: upstream \"%V\": no router: %s", &up->name, err);
        return NGX_ERROR;
    }

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

        rc = wsel_router_add_worker(up->router, &w, err, sizeof(err));
        if (rc != 0) {
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                          "wsel: upstream \"%V\": server %V: %s", &up->name,
                          &peer->name, err);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
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
ngx_http_wsel_init_module(ngx_cycle_t *cycle)
{
    ngx_core_conf_t            *ccf;
    ngx_http_wsel_upstream_t  **ups;
    ngx_http_wsel_main_conf_t  *wmcf;

    wmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_upstream_wsel_module);
    if (wmcf == NULL || wmcf->upstreams.nelts == 0) {
        return NGX_OK;
    }

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);
    ups = wmcf->upstreams.elts;

    if (ccf->master && ccf->worker_processes > 1) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, 0,
                      "wsel: upstream \"%V\" needs \"worker_processes 1;\" "
                      "(found %i): the router's load accounting and KV "
                      "index live in one worker's memory, and a second "
                      "worker would route on half the picture "
                      "(nginx/README.md)",
                      &ups[0]->name, ccf->worker_processes);
        return NGX_ERROR;
    }

    return NGX_OK;
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

        wsel_router_destroy(ups[i]->router);
        ups[i]->router = NULL;
        wsel_host_destroy(ups[i]->host);
        ups[i]->host = NULL;
        ngx_free(ups[i]->tokens);
        ups[i]->tokens = NULL;
        ups[i]->tokens_cap = 0;
    }
}


/* ------------------------------------------------------------------------ */
/* status and admin                                                         */
/* ------------------------------------------------------------------------ */

/* s as a JSON or Prometheus string body (quotes not included) */
static u_char *
ngx_http_wsel_escape(u_char *d, u_char *last, const u_char *s, size_t n)
{
    size_t  i;

    for (i = 0; i < n && d + 6 < last; i++) {
        if (s[i] == '"' || s[i] == '\\') {
            *d++ = '\\';
            *d++ = s[i];

        } else if (s[i] == '\n') {
            *d++ = '\\';
            *d++ = 'n';

        } else if (s[i] < 0x20) {
            d = ngx_slprintf(d, last, "\\u%04xd", (int) s[i]);

        } else {
            *d++ = s[i];
        }
    }

    return d;
}


static ngx_int_t
ngx_http_wsel_send(ngx_http_request_t *r, ngx_uint_t status, const char *type,
    ngx_buf_t *b)
{
    ngx_int_t    rc;
    ngx_chain_t  out;

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;
    r->headers_out.content_type.len = ngx_strlen(type);
    r->headers_out.content_type.data = (u_char *) type;
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


static uint64_t
ngx_http_wsel_latency_p50_us(ngx_http_wsel_upstream_t *up)
{
    uint64_t    total, seen;
    ngx_uint_t  b;

    total = 0;
    for (b = 0; b < NGX_HTTP_WSEL_LAT_BUCKETS; b++) {
        total += up->lat[b];
    }

    if (total == 0) {
        return 0;
    }

    seen = 0;
    for (b = 0; b < NGX_HTTP_WSEL_LAT_BUCKETS; b++) {
        seen += up->lat[b];
        if (seen * 2 >= total) {
            break;
        }
    }

    /* bucket b holds [2^(b-1), 2^b) us; its upper bound */
    return (uint64_t) 1 << b;
}


static ngx_int_t
ngx_http_wsel_status_handler(ngx_http_request_t *r)
{
    u_char                     *d, *last;
    size_t                      size;
    uint32_t                    nr, i, k, reason;
    ngx_int_t                   rc;
    ngx_buf_t                  *b;
    ngx_str_t                   fmt, *wn;
    ngx_uint_t                  prom;
    const char                 *pol;
    wsel_host_counters          hc;
    wsel_router_counters        rcn;
    wsel_router_rank_info      *ri;
    ngx_http_wsel_loc_conf_t   *wlcf;
    ngx_http_wsel_upstream_t   *up;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    wlcf = ngx_http_get_module_loc_conf(r, ngx_http_upstream_wsel_module);
    up = ngx_http_wsel_find(
        ngx_http_get_module_main_conf(r, ngx_http_upstream_wsel_module),
        &wlcf->status);

    if (up == NULL || up->router == NULL) {
        return NGX_HTTP_NOT_FOUND;
    }

    prom = 0;
    if (ngx_http_arg(r, (u_char *) "format", 6, &fmt) == NGX_OK
        && fmt.len == 10 && ngx_strncmp(fmt.data, "prometheus", 10) == 0)
    {
        prom = 1;
    }

    ngx_memzero(&hc, sizeof(hc));
    wsel_host_read_counters(up->host, &hc, sizeof(hc));
    wsel_router_read_counters(up->router, &rcn);

    nr = wsel_router_read_ranks(up->router, NULL, 0);
    ri = ngx_palloc(r->pool, (nr + 1) * sizeof(wsel_router_rank_info));
    if (ri == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    nr = wsel_router_read_ranks(up->router, ri, nr);

    size = 16384 + (size_t) nr * 1024;
    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    d = b->pos;
    last = b->end;
    pol = wsel_host_policy_name(up->host);

    if (!prom) {
        d = ngx_slprintf(d, last, "{\"upstream\":\"%V\",\"policy\":\"",
                         &up->name);
        d = ngx_http_wsel_escape(d, last, (u_char *) pol, ngx_strlen(pol));
        d = ngx_slprintf(d, last, "\",\"policy_path\":\"");
        d = ngx_http_wsel_escape(d, last, up->live_path,
                                 ngx_strlen(up->live_path));
        d = ngx_slprintf(d, last, "\",\"last_switch_error\":\"");
        d = ngx_http_wsel_escape(d, last, up->last_error,
                                 ngx_strlen(up->last_error));
        d = ngx_slprintf(d, last,
            "\",\"isolated\":%s,\"kv_source\":\"%s\",\"prompt\":\"%s\","
            "\"block_size\":%ui,\"worker_pid\":%P,",
            up->isolated ? "true" : "false",
            up->kv_events ? "events" : "history",
            up->text_mode ? "text" : "tokens",
            up->block_size, ngx_pid);
        d = ngx_slprintf(d, last,
            "\"selects\":%uL,\"plugin_answers\":%uL,\"fallbacks\":%uL,"
            "\"ejections\":%uL,\"switches\":%uL,\"failed_switches\":%uL,"
            "\"fallbacks_by_reason\":{",
            hc.selects, hc.plugin_answers, hc.fallbacks, hc.ejections,
            hc.switches, hc.failed_switches);

        for (reason = 0; reason <= WSEL_FALLBACK_HOST_LIMIT; reason++) {
            d = ngx_slprintf(d, last, "%s\"%s\":%uL", reason ? "," : "",
                             wsel_fallback_reason_name(reason),
                             reason < WSEL_FALLBACK_REASONS
                             ? hc.fallback_by_reason[reason]
                             : hc.fallback_by_reason_more[reason
                                                   - WSEL_FALLBACK_REASONS]);
        }

        d = ngx_slprintf(d, last,
            "},\"requests\":%uL,\"routes\":%uL,\"no_prompt\":%uL,"
            "\"builtin_routes\":%uL,\"route_errors\":%uL,\"retries\":%uL,"
            "\"peer_unavailable\":%uL,\"upstream_failures\":%uL,"
            "\"failed_outcomes\":%uL,"
            "\"admin_switches\":%uL,\"admin_refused\":%uL,"
            "\"prompt_blocks\":%uL,\"overlap_blocks\":%uL,"
            "\"kv_messages\":%uL,\"kv_blocks_stored\":%uL,"
            "\"kv_blocks_removed\":%uL,\"kv_skipped\":%uL,"
            "\"index_blocks\":%uL,\"index_entries\":%uL,"
            "\"route_time_us_p50\":%uL,\"route_time_ns_sum\":%uL,"
            "\"ranks\":[",
            up->requests, rcn.routes, up->no_prompt, rcn.builtin_routes,
            up->route_errors, up->retries, up->peer_unavailable,
            up->upstream_failures, up->failed_outcomes, up->admin_switches,
            up->admin_refused,
            rcn.prompt_blocks, rcn.overlap_blocks, rcn.kv_messages,
            rcn.kv_blocks_stored, rcn.kv_blocks_removed,
            rcn.kv_skipped[0] + rcn.kv_skipped[1] + rcn.kv_skipped[2]
            + rcn.kv_skipped[3] + rcn.kv_skipped[4] + rcn.kv_skipped[5]
            + rcn.kv_skipped[6] + rcn.kv_skipped[7],
            rcn.index_blocks, rcn.index_entries,
            ngx_http_wsel_latency_p50_us(up), up->lat_sum_ns);

        for (i = 0; i < nr; i++) {
            k = (uint32_t) ri[i].worker_id - 1;
            wn = k < up->npeers ? &up->peer_names[k] : &up->name;
            d = ngx_slprintf(d, last,
                "%s{\"server\":\"%V\",\"dp_rank\":%uD,\"active_requests\":%uD,"
                "\"active_prefill_tokens\":%uL,\"active_blocks\":%uL,"
                "\"cached_blocks\":%uL,\"flags\":%uD}",
                i ? "," : "", wn, ri[i].dp_rank, ri[i].active_requests,
                ri[i].active_prefill_tokens, ri[i].active_blocks,
                ri[i].cached_blocks, ri[i].flags);
        }

        d = ngx_slprintf(d, last, "]}\n");

    } else {
        d = ngx_slprintf(d, last,
            "# TYPE wsel_policy_info gauge\n"
            "wsel_policy_info{upstream=\"%V\",policy=\"", &up->name);
        d = ngx_http_wsel_escape(d, last, (u_char *) pol, ngx_strlen(pol));
        d = ngx_slprintf(d, last, "\",path=\"");
        d = ngx_http_wsel_escape(d, last, up->live_path,
                                 ngx_strlen(up->live_path));
        d = ngx_slprintf(d, last, "\"} 1\n");

#define WSEL_PROM(metric, kind, v)                                            \
        d = ngx_slprintf(d, last, "# TYPE wsel_" metric " " kind "\n"         \
                         "wsel_" metric "{upstream=\"%V\"} %uL\n",           \
                         &up->name, (uint64_t) (v))

        WSEL_PROM("selects_total", "counter", hc.selects);
        WSEL_PROM("plugin_answers_total", "counter", hc.plugin_answers);
        WSEL_PROM("ejections_total", "counter", hc.ejections);
        WSEL_PROM("switches_total", "counter", hc.switches);
        WSEL_PROM("failed_switches_total", "counter", hc.failed_switches);
        WSEL_PROM("requests_total", "counter", up->requests);
        WSEL_PROM("no_prompt_total", "counter", up->no_prompt);
        WSEL_PROM("route_errors_total", "counter", up->route_errors);
        WSEL_PROM("retries_total", "counter", up->retries);
        WSEL_PROM("peer_unavailable_total", "counter", up->peer_unavailable);
        WSEL_PROM("upstream_failures_total", "counter", up->upstream_failures);
        WSEL_PROM("failed_outcomes_total", "counter", up->failed_outcomes);
        WSEL_PROM("prompt_blocks_total", "counter", rcn.prompt_blocks);
        WSEL_PROM("overlap_blocks_total", "counter", rcn.overlap_blocks);
        WSEL_PROM("kv_messages_total", "counter", rcn.kv_messages);
        WSEL_PROM("index_blocks", "gauge", rcn.index_blocks);
        WSEL_PROM("route_time_ns_sum", "counter", up->lat_sum_ns);

        d = ngx_slprintf(d, last, "# TYPE wsel_fallbacks_total counter\n");
        for (reason = 0; reason <= WSEL_FALLBACK_HOST_LIMIT; reason++) {
            d = ngx_slprintf(d, last,
                "wsel_fallbacks_total{upstream=\"%V\",reason=\"%s\"} %uL\n",
                &up->name, wsel_fallback_reason_name(reason),
                reason < WSEL_FALLBACK_REASONS
                ? hc.fallback_by_reason[reason]
                : hc.fallback_by_reason_more[reason - WSEL_FALLBACK_REASONS]);
        }

        d = ngx_slprintf(d, last,
                         "# TYPE wsel_rank_active_requests gauge\n"
                         "# TYPE wsel_rank_prefill_tokens gauge\n"
                         "# TYPE wsel_rank_active_blocks gauge\n"
                         "# TYPE wsel_rank_cached_blocks gauge\n");

        for (i = 0; i < nr; i++) {
            k = (uint32_t) ri[i].worker_id - 1;
            wn = k < up->npeers ? &up->peer_names[k] : &up->name;
            d = ngx_slprintf(d, last,
                "wsel_rank_active_requests{upstream=\"%V\",server=\"%V\","
                "dp_rank=\"%uD\"} %uD\n"
                "wsel_rank_prefill_tokens{upstream=\"%V\",server=\"%V\","
                "dp_rank=\"%uD\"} %uL\n"
                "wsel_rank_active_blocks{upstream=\"%V\",server=\"%V\","
                "dp_rank=\"%uD\"} %uL\n"
                "wsel_rank_cached_blocks{upstream=\"%V\",server=\"%V\","
                "dp_rank=\"%uD\"} %uL\n",
                &up->name, wn, ri[i].dp_rank, ri[i].active_requests,
                &up->name, wn, ri[i].dp_rank, ri[i].active_prefill_tokens,
                &up->name, wn, ri[i].dp_rank, ri[i].active_blocks,
                &up->name, wn, ri[i].dp_rank, ri[i].cached_blocks);
        }
    }

#undef WSEL_PROM

    b->last = d;

    return ngx_http_wsel_send(r, NGX_HTTP_OK,
                              prom ? "text/plain; version=0.0.4"
                                   : "application/json", b);
}


/* The unescaped value of a JSON string at p (at '"'), NUL-terminated. */
static char *
ngx_http_wsel_js_unescape(ngx_pool_t *pool, u_char *p, u_char *e)
{
    u_char  *end, *d;
    char    *out;

    end = ngx_http_wsel_js_string(p, e);
    if (end == NULL) {
        return NULL;
    }

    out = ngx_pnalloc(pool, (size_t) (end - p));
    if (out == NULL) {
        return NULL;
    }

    d = (u_char *) out;
    for (p++; p < end - 1; p++) {
        if (*p == '\\') {
            p++;
            switch (*p) {
            case 'n': *d++ = '\n'; break;
            case 't': *d++ = '\t'; break;
            case 'r': *d++ = '\r'; break;
            case 'b': *d++ = '\b'; break;
            case 'f': *d++ = '\f'; break;
            case 'u': return NULL;  /* not in a path or config we take */
            default:  *d++ = *p; break;
            }
            continue;
        }
        *d++ = *p;
    }

    *d = '\0';
    return out;
}


static void
ngx_http_wsel_admin_body(ngx_http_request_t *r)
{
    u_char                     *body, *p, *e, *k, *ke, *v, *ve, *d;
    char                       *path, *config, err[NGX_HTTP_WSEL_ERR];
    size_t                      len;
    int32_t                     rc;
    ngx_buf_t                  *b;
    ngx_uint_t                  status;
    const char                 *pol;
    ngx_http_wsel_loc_conf_t   *wlcf;
    ngx_http_wsel_upstream_t   *up;

    wlcf = ngx_http_get_module_loc_conf(r, ngx_http_upstream_wsel_module);
    up = ngx_http_wsel_find(
        ngx_http_get_module_main_conf(r, ngx_http_upstream_wsel_module),
        &wlcf->admin);

    if (up == NULL || up->host == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_NOT_FOUND);
        return;
    }

    path = NULL;
    config = NULL;
    err[0] = '\0';

    body = ngx_http_wsel_body(r, &len);
    if (body == NULL) {
        ngx_cpystrn((u_char *) err, (u_char *) "no body; expected "
                    "{\"path\": \"/x.so\", \"config\": {...}}", sizeof(err));
        goto answer;
    }

    /* {"path": "...", "config": <object, or a string holding one>} */
    p = body;
    e = body + len;
    p = ngx_http_wsel_js_ws(p, e);
    if (p == e || *p != '{' || ngx_http_wsel_js_value(p, e, 0) == NULL) {
        ngx_cpystrn((u_char *) err, (u_char *) "the body is not a JSON object",
                    sizeof(err));
        goto answer;
    }

    p = ngx_http_wsel_js_ws(p + 1, e);

    while (p < e && *p == '"') {
        k = p + 1;
        p = ngx_http_wsel_js_string(p, e);
        ke = p - 1;
        p = ngx_http_wsel_js_ws(p, e) + 1;          /* the ':' */
        v = ngx_http_wsel_js_ws(p, e);
        ve = ngx_http_wsel_js_value(v, e, 1);

        if (ke - k == 4 && ngx_strncmp(k, "path", 4) == 0 && *v == '"') {
            path = ngx_http_wsel_js_unescape(r->pool, v, e);

        } else if (ke - k == 6 && ngx_strncmp(k, "config", 6) == 0) {
            if (*v == '"') {
                config = ngx_http_wsel_js_unescape(r->pool, v, e);

            } else {
                config = ngx_pnalloc(r->pool, (size_t) (ve - v) + 1);
                if (config) {
                    ngx_memcpy(config, v, ve - v);
                    config[ve - v] = '\0';
                }
            }
        }

        p = ngx_http_wsel_js_ws(ve, e);
        if (p < e && *p == ',') {
            p = ngx_http_wsel_js_ws(p + 1, e);
        }
    }

    if (path == NULL || path[0] == '\0') {
        ngx_cpystrn((u_char *) err, (u_char *) "\"path\" (a string) is missing",
                    sizeof(err));
        goto answer;
    }

    rc = wsel_host_switch(up->host, path, config ? config : "{}", err,
                          sizeof(err));

    if (rc == 0) {
        err[0] = '\0';
        up->admin_switches++;
        ngx_cpystrn(up->live_path, (u_char *) path, sizeof(up->live_path));
        up->last_error[0] = '\0';
        ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0,
                      "wsel: upstream \"%V\" switched to \"%s\"", &up->name,
                      path);

    } else if (err[0] == '\0') {
        ngx_cpystrn((u_char *) err, (u_char *) wsel_strerror(rc), sizeof(err));
    }

answer:

    if (err[0]) {
        up->admin_refused++;
        ngx_cpystrn(up->last_error, (u_char *) err, sizeof(up->last_error));
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "wsel: upstream \"%V\": switch refused, the old policy "
                      "serves: %s", &up->name, err);
    }

    status = err[0] ? NGX_HTTP_CONFLICT : NGX_HTTP_OK;
    pol = wsel_host_policy_name(up->host);

    b = ngx_create_temp_buf(r->pool, 4096);
    if (b == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    d = ngx_slprintf(b->pos, b->end, "{\"ok\":%s,\"policy\":\"",
                     err[0] ? "false" : "true");
    d = ngx_http_wsel_escape(d, b->end, (u_char *) pol, ngx_strlen(pol));
    d = ngx_slprintf(d, b->end, "\",\"path\":\"");
    d = ngx_http_wsel_escape(d, b->end, up->live_path,
                             ngx_strlen(up->live_path));
    d = ngx_slprintf(d, b->end, "\",\"worker_pid\":%P,\"error\":\"", ngx_pid);
    d = ngx_http_wsel_escape(d, b->end, (u_char *) err, ngx_strlen(err));
    d = ngx_slprintf(d, b->end, "\"}\n");
    b->last = d;

    ngx_http_finalize_request(r, ngx_http_wsel_send(r, status,
                                                    "application/json", b));
}


static ngx_int_t
ngx_http_wsel_admin_handler(ngx_http_request_t *r)
{
    ngx_int_t  rc;

    if (!(r->method & NGX_HTTP_POST)) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_read_client_request_body(r, ngx_http_wsel_admin_body);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
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

    ngx_http_next_body_filter = ngx_http_top_body_filter;
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
    ngx_http_wsel_defaults(up);

    if (up->block_size == 0 || up->block_size > 65536) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "wsel: upstream \"%V\": wsel_block_size must be "
                           "1..65536", &up->name);
        return NGX_ERROR;
    }

    return ngx_http_wsel_init_upstream(cf, us);
}


static char *
ngx_http_wsel_policy(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_wsel_upstream_t  *up = conf;

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

    if (value[1].len == 7 && ngx_strncmp(value[1].data, "builtin", 7) == 0) {
        ngx_str_null(&up->policy);

    } else {
        if (value[1].data[0] != '/') {
            return "needs an absolute path to the policy (or \"builtin\")";
        }

        up->policy.len = value[1].len;
        up->policy.data = (u_char *) ngx_http_wsel_cstr(cf->pool, &value[1]);
        if (up->policy.data == NULL) {
            return NGX_CONF_ERROR;
        }
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
            if (n < 0) {
                return "has a bad requests=";
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
