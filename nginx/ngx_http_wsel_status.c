/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_status.c -- the status location: one snapshot of the
 * upstream's figures printed as JSON or Prometheus text from the lists
 * of ngx_http_wsel_metrics.h, into a buffer sized from what is printed.
 */

#include "ngx_http_wsel_module.h"

/* s as a JSON or Prometheus string body (quotes not included) */
u_char *
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


ngx_int_t
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


/* Most bytes a number takes: 20 digits, or seconds with 9 decimals. */
#define NGX_HTTP_WSEL_NUM_LEN  (NGX_INT64_LEN + 1)


/* What the status prints, read once per request. */
typedef struct {
    ngx_http_wsel_upstream_t       *up;
    const char                     *policy;
    wsel_host_counters              hc;
    wsel_router_counters            rcn;
    wsel_router_kv_cpu              kc;
    wsel_router_history_counters    hcn;
    wsel_router_rank_info          *ri;
    uint32_t                        nr;
    ngx_http_wsel_rank_counters_t   engine;    /* the ranks' sums */
    wsel_router_sync_counters       sc;        /* the other workers' */
    wsel_router_sync_counters       nats;      /* sc with wsel_sync, or 0 */
    wsel_router_rank_info          *oi;        /* by ri: the others' part */
    uint64_t                        active;    /* requests, all ranks */
    /* what is printed: the upstream's sums for counters (every worker's,
     * the exited ones' too), this worker's figure for gauges */
    time_t                          started;   /* of the sums */
    uint64_t                       *scalar;    /* NGX_HTTP_WSEL_NSCALARS */
    uint64_t                       *reason;    /* NGX_HTTP_WSEL_NREASONS */
    ngx_http_wsel_hist_t           *hist;      /* NGX_HTTP_WSEL_HISTS */
    ngx_http_wsel_rank_counters_t  *rc;        /* nr */
} ngx_http_wsel_snap_t;


/* Which scalars are counters (summed over workers). */
static const u_char  ngx_http_wsel_scalar_counter[] = {
#define NGX_HTTP_WSEL_X(json, prom, type, unit, help, value)                  \
    sizeof(type) == sizeof("counter"),
    NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X
};


/* The other workers' (and with wsel_sync, replicas') load added to each
 * rank's (the whole upstream's in flight), kept apart in oi too, and
 * their number. */
static ngx_int_t
ngx_http_wsel_snap_others(ngx_pool_t *pool, ngx_http_wsel_upstream_t *up,
    ngx_http_wsel_snap_t *s)
{
    uint32_t                i, n;
    wsel_router_rank_info  *o, *ri;

    s->sc.struct_size = sizeof(s->sc);
    if (wsel_router_sync_read_counters(up->router, &s->sc) != 0) {
        ngx_memzero(&s->sc, sizeof(s->sc));
    }

    if (up->sync.replica_id) {
        s->nats = s->sc;
    }

    o = ngx_palloc(pool, (s->nr + 1) * sizeof(wsel_router_rank_info));
    s->oi = ngx_pcalloc(pool, (s->nr + 1) * sizeof(wsel_router_rank_info));
    if (o == NULL || s->oi == NULL) {
        return NGX_ERROR;
    }
    n = ngx_min(wsel_router_sync_read_ranks(up->router, o, s->nr), s->nr);

    for (i = 0; i < s->nr; i++) {
        ri = &s->ri[i];
        if (i < n && o[i].worker_id == ri->worker_id
            && o[i].dp_rank == ri->dp_rank)
        {
            s->oi[i] = o[i];
            ri->active_requests += o[i].active_requests;
            ri->active_prefill_tokens += o[i].active_prefill_tokens;
            ri->active_blocks += o[i].active_blocks;
        }
        s->active += ri->active_requests;
    }

    return NGX_OK;
}


static ngx_str_t *ngx_http_wsel_rank_server(ngx_http_wsel_upstream_t *up,
    const wsel_router_rank_info *ri);


/* A rank's key across workers and reloads: its server's name, dp rank. */
static uint64_t
ngx_http_wsel_rank_key(ngx_http_wsel_upstream_t *up,
    const wsel_router_rank_info *ri)
{
    ngx_str_t  *name;

    name = ngx_http_wsel_rank_server(up, ri);

    return ((uint64_t) ngx_crc32_long(name->data, name->len) << 32
            | ngx_murmur_hash2(name->data, name->len))
           ^ ((uint64_t) ri->dp_rank + 1) * 0x9e3779b97f4a7c15ULL;
}


/* This worker's counters as a vector (ngx_http_wsel_module.h's layout),
 * exchanged for the upstream's sums; the gauges then this worker's. */
static ngx_int_t
ngx_http_wsel_snap_totals(ngx_pool_t *pool, ngx_http_wsel_upstream_t *up,
    ngx_http_wsel_snap_t *s)
{
    uint32_t                        r;
    uint64_t                       *v, *keys;
    ngx_uint_t                      i;
    ngx_http_wsel_rank_counters_t  *rc, *to;

    v = ngx_pcalloc(pool, (NGX_HTTP_WSEL_TOTALS_HEAD
                           + (s->nr + 1) * NGX_HTTP_WSEL_TOTALS_RANK) * 8);
    keys = ngx_palloc(pool, (s->nr + 1) * sizeof(uint64_t));
    if (v == NULL || keys == NULL) {
        return NGX_ERROR;
    }

    s->scalar = v;
    s->reason = v + NGX_HTTP_WSEL_NSCALARS;
    s->hist = (ngx_http_wsel_hist_t *) (s->reason + NGX_HTTP_WSEL_NREASONS);
    s->rc = (ngx_http_wsel_rank_counters_t *) (v + NGX_HTTP_WSEL_TOTALS_HEAD);

    i = 0;
#define NGX_HTTP_WSEL_X(json, object, prom, help, count, name, value)         \
    for (r = 0; r < (count); r++) {                                           \
        s->reason[i++] = (value);                                             \
    }
    NGX_HTTP_WSEL_BY_REASON(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    ngx_memcpy(s->hist, up->metrics.hist, sizeof(up->metrics.hist));

    for (r = 0; r < s->nr; r++) {
        rc = ngx_http_wsel_rank_counters(&up->metrics, s->ri[r].worker_id,
                                         s->ri[r].dp_rank);
        to = &s->rc[r];
        if (rc) {
            *to = *rc;
        }
        keys[r] = ngx_http_wsel_rank_key(up, &s->ri[r]);
    }

    s->started = up->metrics.started;
    i = 0;
#define NGX_HTTP_WSEL_X(json, prom, type, unit, help, value)                  \
    s->scalar[i++] = (uint64_t) (value);
    NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    s->started = ngx_http_wsel_totals_exchange(up, v, keys, s->nr);

    i = 0;
#define NGX_HTTP_WSEL_X(json, prom, type, unit, help, value)                  \
    if (!ngx_http_wsel_scalar_counter[i]) {                                   \
        s->scalar[i] = (uint64_t) (value);                                    \
    }                                                                         \
    i++;
    NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    return NGX_OK;
}


static ngx_int_t
ngx_http_wsel_snap_read(ngx_pool_t *pool, ngx_http_wsel_upstream_t *up,
    ngx_http_wsel_snap_t *s)
{
    uint32_t                        i, nr;
    ngx_http_wsel_rank_counters_t  *rc;

    ngx_memzero(s, sizeof(ngx_http_wsel_snap_t));
    s->up = up;
    s->policy = wsel_host_policy_name(up->host);

    wsel_host_read_counters(up->host, &s->hc, sizeof(s->hc));
    wsel_router_read_counters(up->router, &s->rcn);
    s->hcn.struct_size = sizeof(s->hcn);
    (void) wsel_router_history_read_counters(up->router, &s->hcn);
    s->kc.struct_size = sizeof(s->kc);
    if (wsel_router_read_kv_cpu(up->router, &s->kc) != 0) {
        ngx_memzero(&s->kc, sizeof(s->kc));
    }

    nr = wsel_router_read_ranks(up->router, NULL, 0);
    s->ri = ngx_palloc(pool, (nr + 1) * sizeof(wsel_router_rank_info));
    if (s->ri == NULL) {
        return NGX_ERROR;
    }
    s->nr = wsel_router_read_ranks(up->router, s->ri, nr);
    s->nr = ngx_min(s->nr, nr);

    if (ngx_http_wsel_snap_others(pool, up, s) != NGX_OK) {
        return NGX_ERROR;
    }

    for (i = 0; i < s->nr; i++) {
        rc = ngx_http_wsel_rank_counters(&up->metrics, s->ri[i].worker_id,
                                         s->ri[i].dp_rank);
        if (rc) {
            s->engine.prompt_tokens += rc->prompt_tokens;
            s->engine.cached_tokens += rc->cached_tokens;
        }
    }

    return ngx_http_wsel_snap_totals(pool, up, s);
}


/* The server a rank belongs to (worker ids are server index + 1). */
static ngx_str_t *
ngx_http_wsel_rank_server(ngx_http_wsel_upstream_t *up,
    const wsel_router_rank_info *ri)
{
    uint32_t  k;

    k = (uint32_t) ri->worker_id - 1;

    return k < up->npeers ? &up->peer_names[k] : &up->name;
}


/* The module's counters of a rank, summed over the workers. */
static const ngx_http_wsel_rank_counters_t *
ngx_http_wsel_rank_of(ngx_http_wsel_snap_t *s, const wsel_router_rank_info *ri)
{
    return &s->rc[ri - s->ri];
}


static ngx_uint_t
ngx_http_wsel_rank_down(ngx_http_wsel_snap_t *s,
    const wsel_router_rank_info *ri)
{
    uint64_t  k;

    k = ri->worker_id - 1;

    return s->up->peer_down && k < s->up->npeers && s->up->peer_down[k];
}


/* A reason the library names (it names the others "unknown"). */
static ngx_uint_t
ngx_http_wsel_reason_known(const char *name)
{
    return ngx_strcmp(name, "unknown") != 0;
}


/* ns as seconds, without trailing zeros: 2500000 is "0.0025". */
static u_char *
ngx_http_wsel_seconds(u_char *d, u_char *last, uint64_t ns)
{
    u_char  *p;

    p = ngx_slprintf(d, last, "%uL.%09uL", ns / 1000000000,
                     ns % 1000000000);

    while (p > d && p[-1] == '0') {
        p--;
    }

    return (p > d && p[-1] == '.') ? p - 1 : p;
}


/* The bucket holding the median's upper bound in microseconds, rounded
 * up (the last finite bound for a median above them all); 0 if empty. */
static uint64_t
ngx_http_wsel_p50_us(ngx_http_wsel_hist_t *hist, ngx_uint_t h)
{
    uint64_t         total, seen;
    ngx_uint_t       b, n;
    const uint64_t  *bounds;

    bounds = ngx_http_wsel_bounds(h, &n);

    for (total = 0, b = 0; b <= n; b++) {
        total += hist->count[b];
    }

    if (total == 0) {
        return 0;
    }

    for (seen = 0, b = 0; b < n; b++) {
        seen += hist->count[b];
        if (seen * 2 >= total) {
            break;
        }
    }

    return (bounds[ngx_min(b, n - 1)] + 999) / 1000;
}


static uint64_t
ngx_http_wsel_hist_total(ngx_http_wsel_hist_t *hist, ngx_uint_t h)
{
    uint64_t    total;
    ngx_uint_t  b, n;

    (void) ngx_http_wsel_bounds(h, &n);

    for (total = 0, b = 0; b <= n; b++) {
        total += hist->count[b];
    }

    return total;
}


/* ---- JSON --------------------------------------------------------------- */

/* The JSON's head with each choice at its longest (for its size). */
#define NGX_HTTP_WSEL_JSON_HEAD                                               \
    "{\"upstream\":\"%V\",\"policy\":\"\",\"policy_path\":\"\","              \
    "\"last_switch_error\":\"\",\"isolated\":false,\"kv_source\":\"history\"," \
    "\"kv_threads\":\"normal\",\"prompt\":\"tokens\","                        \
    "\"token_reader\":\"avx512\",\"block_size\":%ui,\"worker_pid\":%P"


static size_t
ngx_http_wsel_json_size(ngx_http_wsel_snap_t *s)
{
    size_t    size;
    uint32_t  r;

    size = sizeof(NGX_HTTP_WSEL_JSON_HEAD) + s->up->name.len
           + 2 * NGX_HTTP_WSEL_NUM_LEN
           + 6 * (ngx_strlen(s->policy) + ngx_strlen(s->up->live_path)
                  + ngx_strlen(s->up->last_error));

#define NGX_HTTP_WSEL_X(json, prom, type, unit, help, value)                  \
    size += sizeof(",\"" json "\":") + NGX_HTTP_WSEL_NUM_LEN;
    NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

#define NGX_HTTP_WSEL_X(json, object, prom, help, count, name, value)         \
    size += sizeof(",\"" json "\":,\"" object "\":{}") + NGX_HTTP_WSEL_NUM_LEN; \
    for (r = 0; r < (count); r++) {                                           \
        size += sizeof(",\"\":") + ngx_strlen(name) + NGX_HTTP_WSEL_NUM_LEN;  \
    }
    NGX_HTTP_WSEL_BY_REASON(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

#define NGX_HTTP_WSEL_X(field, json, prom, help)                              \
    size += sizeof(",\"" json "_count\":,\"" json "_ns_sum\":,\""             \
                   json "_us_p50\":") + 3 * NGX_HTTP_WSEL_NUM_LEN;
    NGX_HTTP_WSEL_HISTOGRAMS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    size += sizeof(",\"ranks\":[]}\n");

    for (r = 0; r < s->nr; r++) {
        size += sizeof(",{\"server\":\"\",\"dp_rank\":}") + NGX_HTTP_WSEL_NUM_LEN
                + ngx_http_wsel_rank_server(s->up, &s->ri[r])->len;

#define NGX_HTTP_WSEL_X(json, prom, type, help, value)                        \
        size += sizeof(",\"" json "\":") + NGX_HTTP_WSEL_NUM_LEN;
        NGX_HTTP_WSEL_RANKS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X
    }

    return size;
}


static u_char *
ngx_http_wsel_json_head(u_char *d, u_char *last, ngx_http_wsel_snap_t *s)
{
    ngx_http_wsel_upstream_t  *up = s->up;

    d = ngx_slprintf(d, last, "{\"upstream\":\"%V\",\"policy\":\"",
                     &up->name);
    d = ngx_http_wsel_escape(d, last, (u_char *) s->policy,
                             ngx_strlen(s->policy));
    d = ngx_slprintf(d, last, "\",\"policy_path\":\"");
    d = ngx_http_wsel_escape(d, last, up->live_path,
                             ngx_strlen(up->live_path));
    d = ngx_slprintf(d, last, "\",\"last_switch_error\":\"");
    d = ngx_http_wsel_escape(d, last, up->last_error,
                             ngx_strlen(up->last_error));

    return ngx_slprintf(d, last,
        "\",\"isolated\":%s,\"kv_source\":\"%s\",\"kv_threads\":\"%s\","
        "\"prompt\":\"%s\",\"token_reader\":\"%s\",\"block_size\":%ui,"
        "\"worker_pid\":%P",
        up->isolated ? "true" : "false",
        up->kv_events ? "events" : "history",
        up->kv_threads == WSEL_ROUTER_KV_THREADS_NORMAL ? "normal" : "low",
        up->text_mode ? "text" : "tokens",
        up->token_reader == WSEL_TOKEN_IDS_AVX512 ? "avx512"
        : up->token_reader == WSEL_TOKEN_IDS_SSE2 ? "sse2" : "bytes",
        up->block_size, ngx_pid);
}


/* The scalars, the counters by reason and the histograms. */
static u_char *
ngx_http_wsel_json_figures(u_char *d, u_char *last, ngx_http_wsel_snap_t *s)
{
    uint32_t               r;
    uint64_t               total, *v;
    ngx_uint_t             i;
    const char            *sep;
    ngx_http_wsel_hist_t  *hist = s->hist;

    i = 0;
#define NGX_HTTP_WSEL_X(json, prom, type, unit, help, value)                  \
    d = ngx_slprintf(d, last, ",\"" json "\":%uL", s->scalar[i++]);
    NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    v = s->reason;
#define NGX_HTTP_WSEL_X(json, object, prom, help, count, name, value)         \
    for (total = 0, r = 0; r < (count); r++) {                                \
        total += ngx_http_wsel_reason_known(name) ? v[r] : 0;                 \
    }                                                                         \
    d = ngx_slprintf(d, last, ",\"" json "\":%uL,\"" object "\":{", total);   \
    for (sep = "", r = 0; r < (count); r++) {                                 \
        if (ngx_http_wsel_reason_known(name)) {                               \
            d = ngx_slprintf(d, last, "%s\"%s\":%uL", sep, (name), v[r]);     \
            sep = ",";                                                        \
        }                                                                     \
    }                                                                         \
    d = ngx_slprintf(d, last, "}");                                           \
    v += (count);
    NGX_HTTP_WSEL_BY_REASON(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

#define NGX_HTTP_WSEL_X(field, json, prom, help)                              \
    d = ngx_slprintf(d, last,                                                 \
        ",\"" json "_count\":%uL,\"" json "_ns_sum\":%uL,\""                  \
        json "_us_p50\":%uL",                                                 \
        ngx_http_wsel_hist_total(&hist[NGX_HTTP_WSEL_HIST_##field],           \
                                 NGX_HTTP_WSEL_HIST_##field),                 \
        hist[NGX_HTTP_WSEL_HIST_##field].sum_ns,                              \
        ngx_http_wsel_p50_us(&hist[NGX_HTTP_WSEL_HIST_##field],               \
                             NGX_HTTP_WSEL_HIST_##field));
    NGX_HTTP_WSEL_HISTOGRAMS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    return d;
}


static u_char *
ngx_http_wsel_json_ranks(u_char *d, u_char *last, ngx_http_wsel_snap_t *s)
{
    uint32_t                              i;
    ngx_uint_t                            down;
    const wsel_router_rank_info          *ri, *oi;
    const ngx_http_wsel_rank_counters_t  *rc;

    d = ngx_slprintf(d, last, ",\"ranks\":[");

    for (i = 0; i < s->nr; i++) {
        ri = &s->ri[i];
        oi = &s->oi[i];
        rc = ngx_http_wsel_rank_of(s, ri);
        down = ngx_http_wsel_rank_down(s, ri);

        d = ngx_slprintf(d, last, "%s{\"server\":\"%V\",\"dp_rank\":%uD",
                         i ? "," : "", ngx_http_wsel_rank_server(s->up, ri),
                         ri->dp_rank);

#define NGX_HTTP_WSEL_X(json, prom, type, help, value)                        \
        d = ngx_slprintf(d, last, ",\"" json "\":%uL", (uint64_t) (value));
        NGX_HTTP_WSEL_RANKS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

        d = ngx_slprintf(d, last, "}");
    }

    return ngx_slprintf(d, last, "]}\n");
}


/* ---- Prometheus text (exposition format 0.0.4) -------------------------- */

#define NGX_HTTP_WSEL_FAMILY  "# HELP wsel_%s %s\n# TYPE wsel_%s %s\n"

/* A family's HELP and TYPE lines, and a sample's line less its labels'
 * values and its number. */
#define NGX_HTTP_WSEL_FAMILY_LEN(name, type, help)                            \
    (sizeof(NGX_HTTP_WSEL_FAMILY) + 2 * sizeof(name) + sizeof(type)           \
     + sizeof(help))
#define NGX_HTTP_WSEL_SAMPLE_LEN(name, labels)                                \
    (sizeof("wsel_" name "_bucket{upstream=\"\"" labels "} \n")               \
     + NGX_HTTP_WSEL_NUM_LEN)


static size_t
ngx_http_wsel_prom_size(ngx_http_wsel_snap_t *s)
{
    size_t      size, u;
    uint32_t    r;
    ngx_uint_t  n;

    u = s->up->name.len;
    size = sizeof("wsel_policy_info{upstream=\"\",policy=\"\",path=\"\"} 1\n")
           + NGX_HTTP_WSEL_FAMILY_LEN("policy_info", "gauge",
                                      "The live policy and its path.")
           + u + 6 * (ngx_strlen(s->policy) + ngx_strlen(s->up->live_path));

#define NGX_HTTP_WSEL_X(json, prom, type, unit, help, value)                  \
    size += NGX_HTTP_WSEL_FAMILY_LEN(prom, type, help)                        \
            + NGX_HTTP_WSEL_SAMPLE_LEN(prom, "") + u;
    NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

#define NGX_HTTP_WSEL_X(json, object, prom, help, count, name, value)         \
    size += NGX_HTTP_WSEL_FAMILY_LEN(prom, "counter", help);                  \
    for (r = 0; r < (count); r++) {                                           \
        size += NGX_HTTP_WSEL_SAMPLE_LEN(prom, ",reason=\"\"") + u            \
                + ngx_strlen(name);                                           \
    }
    NGX_HTTP_WSEL_BY_REASON(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    /* buckets, +Inf, _sum and _count */
#define NGX_HTTP_WSEL_X(field, json, prom, help)                              \
    (void) ngx_http_wsel_bounds(NGX_HTTP_WSEL_HIST_##field, &n);              \
    size += NGX_HTTP_WSEL_FAMILY_LEN(prom, "histogram", help)                 \
            + (n + 3) * (NGX_HTTP_WSEL_SAMPLE_LEN(prom, ",le=\"\"") + u       \
                         + NGX_HTTP_WSEL_NUM_LEN);
    NGX_HTTP_WSEL_HISTOGRAMS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

#define NGX_HTTP_WSEL_X(json, prom, type, help, value)                        \
    size += NGX_HTTP_WSEL_FAMILY_LEN(prom, type, help);                       \
    for (r = 0; r < s->nr; r++) {                                             \
        size += NGX_HTTP_WSEL_SAMPLE_LEN(prom, ",server=\"\",dp_rank=\"\"")   \
                + u + ngx_http_wsel_rank_server(s->up, &s->ri[r])->len        \
                + NGX_HTTP_WSEL_NUM_LEN;                                      \
    }
    NGX_HTTP_WSEL_RANKS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    return size;
}


/* A number as printed: as it is, or nanoseconds as seconds. */
static u_char *
ngx_http_wsel_prom_value(u_char *d, u_char *last, ngx_uint_t unit,
    uint64_t v)
{
    if (unit == NGX_HTTP_WSEL_NS) {
        d = ngx_http_wsel_seconds(d, last, v);
        return ngx_slprintf(d, last, "\n");
    }

    return ngx_slprintf(d, last, "%uL\n", v);
}


/* The policy's info, the scalars and the counters by reason. */
static u_char *
ngx_http_wsel_prom_figures(u_char *d, u_char *last, ngx_http_wsel_snap_t *s)
{
    uint32_t    r;
    uint64_t   *v;
    ngx_uint_t  i;
    ngx_str_t  *u = &s->up->name;

    d = ngx_slprintf(d, last, NGX_HTTP_WSEL_FAMILY
                     "wsel_policy_info{upstream=\"%V\",policy=\"",
                     "policy_info", "The live policy and its path.",
                     "policy_info", "gauge", u);
    d = ngx_http_wsel_escape(d, last, (u_char *) s->policy,
                             ngx_strlen(s->policy));
    d = ngx_slprintf(d, last, "\",path=\"");
    d = ngx_http_wsel_escape(d, last, s->up->live_path,
                             ngx_strlen(s->up->live_path));
    d = ngx_slprintf(d, last, "\"} 1\n");

    i = 0;
#define NGX_HTTP_WSEL_X(json, prom, type, unit, help, value)                  \
    d = ngx_slprintf(d, last, NGX_HTTP_WSEL_FAMILY "wsel_%s{upstream=\"%V\"} ",\
                     prom, help, prom, type, prom, u);                        \
    d = ngx_http_wsel_prom_value(d, last, unit, s->scalar[i++]);
    NGX_HTTP_WSEL_SCALARS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    v = s->reason;
#define NGX_HTTP_WSEL_X(json, object, prom, help, count, name, value)         \
    d = ngx_slprintf(d, last, NGX_HTTP_WSEL_FAMILY, prom, help, prom,         \
                     "counter");                                              \
    for (r = 0; r < (count); r++) {                                           \
        if (ngx_http_wsel_reason_known(name)) {                               \
            d = ngx_slprintf(d, last,                                         \
                             "wsel_%s{upstream=\"%V\",reason=\"%s\"} %uL\n",  \
                             prom, u, (name), v[r]);                          \
        }                                                                     \
    }                                                                         \
    v += (count);
    NGX_HTTP_WSEL_BY_REASON(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    return d;
}


/* Histogram h as Prometheus's cumulative buckets, sum and count. */
static u_char *
ngx_http_wsel_prom_hist(u_char *d, u_char *last, ngx_http_wsel_snap_t *s,
    ngx_uint_t h, const char *name, const char *help)
{
    uint64_t               seen;
    ngx_uint_t             b, n;
    const uint64_t        *bounds;
    ngx_http_wsel_hist_t  *hist = &s->hist[h];

    bounds = ngx_http_wsel_bounds(h, &n);

    d = ngx_slprintf(d, last, NGX_HTTP_WSEL_FAMILY, name, help, name,
                     "histogram");

    for (seen = 0, b = 0; b <= n; b++) {
        seen += hist->count[b];
        d = ngx_slprintf(d, last, "wsel_%s_bucket{upstream=\"%V\",le=\"",
                         name, &s->up->name);
        d = b < n ? ngx_http_wsel_seconds(d, last, bounds[b])
                  : ngx_slprintf(d, last, "+Inf");
        d = ngx_slprintf(d, last, "\"} %uL\n", seen);
    }

    d = ngx_slprintf(d, last, "wsel_%s_sum{upstream=\"%V\"} ", name,
                     &s->up->name);
    d = ngx_http_wsel_prom_value(d, last, NGX_HTTP_WSEL_NS, hist->sum_ns);

    return ngx_slprintf(d, last, "wsel_%s_count{upstream=\"%V\"} %uL\n",
                        name, &s->up->name, seen);
}


static u_char *
ngx_http_wsel_prom_ranks(u_char *d, u_char *last, ngx_http_wsel_snap_t *s)
{
    uint32_t                              i;
    ngx_uint_t                            down;
    const wsel_router_rank_info          *ri, *oi;
    const ngx_http_wsel_rank_counters_t  *rc;

#define NGX_HTTP_WSEL_X(json, prom, type, help, value)                        \
    d = ngx_slprintf(d, last, NGX_HTTP_WSEL_FAMILY, prom, help, prom, type);  \
    for (i = 0; i < s->nr; i++) {                                             \
        ri = &s->ri[i];                                                       \
        oi = &s->oi[i];                                                       \
        rc = ngx_http_wsel_rank_of(s, ri);                                    \
        down = ngx_http_wsel_rank_down(s, ri);                                \
        d = ngx_slprintf(d, last, "wsel_%s{upstream=\"%V\",server=\"%V\","    \
                         "dp_rank=\"%uD\"} %uL\n", prom, &s->up->name,        \
                         ngx_http_wsel_rank_server(s->up, ri), ri->dp_rank,   \
                         (uint64_t) (value));                                 \
    }
    NGX_HTTP_WSEL_RANKS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

    return d;
}


/* The status in a buffer of the size its format needs, or NULL. */
static ngx_buf_t *
ngx_http_wsel_status_write(ngx_pool_t *pool, ngx_log_t *log,
    ngx_http_wsel_snap_t *s, ngx_uint_t prom)
{
    u_char     *d, *last;
    ngx_buf_t  *b;

    b = ngx_create_temp_buf(pool, prom ? ngx_http_wsel_prom_size(s)
                                       : ngx_http_wsel_json_size(s));
    if (b == NULL) {
        return NULL;
    }

    d = b->pos;
    last = b->end;

    if (prom) {
        d = ngx_http_wsel_prom_figures(d, last, s);

#define NGX_HTTP_WSEL_X(field, json, name, help)                              \
        d = ngx_http_wsel_prom_hist(d, last, s, NGX_HTTP_WSEL_HIST_##field,   \
                                    name, help);
        NGX_HTTP_WSEL_HISTOGRAMS(NGX_HTTP_WSEL_X)
#undef NGX_HTTP_WSEL_X

        d = ngx_http_wsel_prom_ranks(d, last, s);

    } else {
        d = ngx_http_wsel_json_head(d, last, s);
        d = ngx_http_wsel_json_figures(d, last, s);
        d = ngx_http_wsel_json_ranks(d, last, s);
    }

    if (d == last) {
        /* the size above is short of what was printed: a bug */
        ngx_log_error(NGX_LOG_ALERT, log, 0, "wsel: the status was cut at "
                      "%uz bytes", (size_t) (last - b->pos));
    }

    b->last = d;

    return b;
}


void
ngx_http_wsel_status_publish(ngx_http_wsel_upstream_t *up, ngx_log_t *log)
{
    ngx_pool_t            *pool;
    ngx_http_wsel_snap_t   s;

    pool = ngx_create_pool(4096, log);
    if (pool == NULL) {
        return;
    }

    (void) ngx_http_wsel_snap_read(pool, up, &s);
    ngx_destroy_pool(pool);
}


ngx_int_t
ngx_http_wsel_status_handler(ngx_http_request_t *r)
{
    ngx_int_t                   rc;
    ngx_buf_t                  *b;
    ngx_str_t                   fmt;
    ngx_uint_t                  prom;
    ngx_http_wsel_snap_t        s;
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

    prom = ngx_http_arg(r, (u_char *) "format", 6, &fmt) == NGX_OK
           && fmt.len == 10 && ngx_strncmp(fmt.data, "prometheus", 10) == 0;

    ngx_http_wsel_shared_sync(up, r->connection->log);

    if (ngx_http_wsel_snap_read(r->pool, up, &s) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = ngx_http_wsel_status_write(r->pool, r->connection->log, &s, prom);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_wsel_send(r, NGX_HTTP_OK,
                              prom ? "text/plain; version=0.0.4"
                                   : "application/json", b);
}
