/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_status.c -- the status location (JSON, Prometheus text)
 * and the admin location that switches the policy by path.
 */

#include "ngx_http_wsel_module.h"
#include "wsel_json.h"

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


/* The server a rank belongs to (worker ids are server index + 1). */
static ngx_str_t *
ngx_http_wsel_rank_server(ngx_http_wsel_upstream_t *up,
    const wsel_router_rank_info *ri)
{
    uint32_t  k;

    k = (uint32_t) ri->worker_id - 1;

    return k < up->npeers ? &up->peer_names[k] : &up->name;
}


static uint64_t
ngx_http_wsel_kv_skipped(const wsel_router_counters *rcn)
{
    uint64_t    n;
    ngx_uint_t  i;

    n = 0;
    for (i = 0; i < WSEL_KV_SKIP_REASONS; i++) {
        n += rcn->kv_skipped[i];
    }

    return n;
}


ngx_int_t
ngx_http_wsel_status_handler(ngx_http_request_t *r)
{
    u_char                     *d, *last;
    size_t                      size;
    uint32_t                    nr, i, reason;
    ngx_int_t                   rc;
    ngx_buf_t                  *b;
    ngx_str_t                   fmt, *wn;
    ngx_uint_t                  prom;
    const char                 *pol;
    wsel_host_counters          hc;
    wsel_router_counters        rcn;
    wsel_router_kv_cpu          kc;
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
    kc.struct_size = sizeof(kc);
    if (wsel_router_read_kv_cpu(up->router, &kc) != 0) {
        ngx_memzero(&kc, sizeof(kc));
    }

    nr = wsel_router_read_ranks(up->router, NULL, 0);
    ri = ngx_palloc(r->pool, (nr + 1) * sizeof(wsel_router_rank_info));
    if (ri == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    nr = wsel_router_read_ranks(up->router, ri, nr);

    pol = wsel_host_policy_name(up->host);

    /* the fixed text, each rank's line, and the three strings at their
     * longest escaped (6 bytes a byte) */
    size = 16384 + (size_t) nr * 1024
           + 6 * (ngx_strlen(pol) + ngx_strlen(up->live_path)
                  + ngx_strlen(up->last_error));
    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    d = b->pos;
    last = b->end;

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
            "\",\"isolated\":%s,\"kv_source\":\"%s\",\"kv_threads\":\"%s\","
            "\"prompt\":\"%s\",\"token_reader\":\"%s\",\"block_size\":%ui,"
            "\"worker_pid\":%P,",
            up->isolated ? "true" : "false",
            up->kv_events ? "events" : "history",
            up->kv_threads == WSEL_ROUTER_KV_THREADS_NORMAL ? "normal" : "low",
            up->text_mode ? "text" : "tokens",
            up->token_reader == WSEL_TOKEN_IDS_AVX512 ? "avx512"
            : up->token_reader == WSEL_TOKEN_IDS_SSE2 ? "sse2" : "bytes",
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
            "\"body_copies\":%uL,"
            "\"builtin_routes\":%uL,\"route_errors\":%uL,\"retries\":%uL,"
            "\"peer_unavailable\":%uL,\"upstream_failures\":%uL,"
            "\"failed_outcomes\":%uL,\"responses_cut\":%uL,"
            "\"peers_down\":%ui,\"peers_marked_down\":%uL,"
            "\"admin_switches\":%uL,\"admin_refused\":%uL,"
            "\"prompt_blocks\":%uL,\"overlap_blocks\":%uL,"
            "\"kv_messages\":%uL,\"kv_blocks_stored\":%uL,"
            "\"kv_blocks_removed\":%uL,\"kv_skipped\":%uL,"
            "\"kv_cpu_messages\":%uL,\"kv_decode_ns\":%uL,"
            "\"kv_apply_ns\":%uL,"
            "\"index_blocks\":%uL,\"index_entries\":%uL,"
            "\"route_time_us_p50\":%uL,\"route_time_ns_sum\":%uL,"
            "\"ranks\":[",
            up->requests, rcn.routes, up->no_prompt, up->body_copies,
            rcn.builtin_routes,
            up->route_errors, up->retries, up->peer_unavailable,
            up->upstream_failures, up->failed_outcomes, up->responses_cut,
            up->ndown, up->peers_marked_down,
            up->admin_switches,
            up->admin_refused,
            rcn.prompt_blocks, rcn.overlap_blocks, rcn.kv_messages,
            rcn.kv_blocks_stored, rcn.kv_blocks_removed,
            ngx_http_wsel_kv_skipped(&rcn),
            kc.messages, kc.decode_ns, kc.apply_ns,
            rcn.index_blocks, rcn.index_entries,
            ngx_http_wsel_latency_p50_us(up), up->lat_sum_ns);

        for (i = 0; i < nr; i++) {
            wn = ngx_http_wsel_rank_server(up, &ri[i]);
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
        WSEL_PROM("body_copies_total", "counter", up->body_copies);
        WSEL_PROM("route_errors_total", "counter", up->route_errors);
        WSEL_PROM("retries_total", "counter", up->retries);
        WSEL_PROM("peer_unavailable_total", "counter", up->peer_unavailable);
        WSEL_PROM("upstream_failures_total", "counter", up->upstream_failures);
        WSEL_PROM("failed_outcomes_total", "counter", up->failed_outcomes);
        WSEL_PROM("responses_cut_total", "counter", up->responses_cut);
        WSEL_PROM("peers_down", "gauge", up->ndown);
        WSEL_PROM("peers_marked_down_total", "counter", up->peers_marked_down);
        WSEL_PROM("prompt_blocks_total", "counter", rcn.prompt_blocks);
        WSEL_PROM("overlap_blocks_total", "counter", rcn.overlap_blocks);
        WSEL_PROM("kv_messages_total", "counter", rcn.kv_messages);
        WSEL_PROM("kv_decode_ns_total", "counter", kc.decode_ns);
        WSEL_PROM("kv_apply_ns_total", "counter", kc.apply_ns);
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
            wn = ngx_http_wsel_rank_server(up, &ri[i]);
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


/*
 * String token v of text decoded (JSON's escapes, \uXXXX to UTF-8) into the
 * pool, NUL-terminated; NULL with the reason in err when an escape is no
 * character (U+0000 or a lone surrogate: the value must stay one C string)
 * or memory ran out. Decoding never lengthens a string, so the raw length
 * is room enough.
 */
static char *
ngx_http_wsel_admin_string(ngx_pool_t *pool, const char *text,
    const wsel_json_token *v, const char *name, char *err, size_t err_size)
{
    char    *s;
    size_t   size;

    size = (size_t) (v->end - v->start) + 1;

    s = ngx_pnalloc(pool, size);
    if (s == NULL) {
        *ngx_snprintf((u_char *) err, err_size - 1, "no memory for %s",
                      name) = '\0';
        return NULL;
    }

    if (wsel_json_string(text, v, s, size) < 0) {
        *ngx_snprintf((u_char *) err, err_size - 1, "%s has an escape that "
                      "is not a character (U+0000 or a lone surrogate)",
                      name) = '\0';
        return NULL;
    }

    return s;
}


/*
 * The admin request's body, {"path": "...", "config": <object, or a string
 * holding one>}, read by wsel's JSON reader (host/json/wsel_json.c, the
 * one libwsel-host reads configs with, compiled into the module): strict
 * RFC 8259, nothing after the object, within the module's body limit, the
 * prompt scanner's depth below the object and NGX_HTTP_WSEL_ADMIN_VALUES
 * values. path and config (NULL when absent) NUL-terminated in the pool,
 * or NGX_ERROR with the reason in err. Other members are ignored, and so
 * is a "path" that is no string; of a member given twice, the last counts.
 */
static ngx_int_t
ngx_http_wsel_admin_read(ngx_pool_t *pool, u_char *body, size_t len,
    char **path, char **config, char *err, size_t err_size)
{
    char                           why[256];
    int32_t                        rc;
    uint32_t                       i;
    ngx_int_t                      ret;
    const char                    *text;
    wsel_json_doc                  doc;
    wsel_json_token               *t, *pv, *cv;
    static const wsel_json_limits  limits = {
        NGX_HTTP_WSEL_MAX_BODY, 1 + NGX_HTTP_WSEL_JSON_DEPTH,
        NGX_HTTP_WSEL_ADMIN_VALUES
    };

    text = (const char *) body;
    ret = NGX_ERROR;
    ngx_memzero(&doc, sizeof(doc));

    rc = wsel_json_parse(&doc, text, len, &limits, why, sizeof(why));
    if (rc != 0) {
        *ngx_snprintf((u_char *) err, err_size - 1, "%s: %s",
                      rc == WSEL_ERANGE ? "the body is over a limit"
                      : rc == WSEL_ENOMEM ? "no memory to read the body"
                      : "the body is not JSON", why) = '\0';
        goto out_free_doc;
    }

    t = doc.tokens;
    if (t[0].type != WSEL_JSON_OBJECT) {
        ngx_cpystrn((u_char *) err, (u_char *) "the body is not a JSON object",
                    err_size);
        goto out_free_doc;
    }

    /* the object's members: a key at i, its value at i + 1 */
    pv = NULL;
    cv = NULL;
    for (i = 1; i < doc.count; i = t[i + 1].next) {
        if (wsel_json_string_is(text, &t[i], "path")) {
            if (t[i + 1].type == WSEL_JSON_STRING) {
                pv = &t[i + 1];
            }

        } else if (wsel_json_string_is(text, &t[i], "config")) {
            cv = &t[i + 1];
        }
    }

    if (pv == NULL) {
        ngx_cpystrn((u_char *) err, (u_char *) "\"path\" (a string) is "
                    "missing", err_size);
        goto out_free_doc;
    }

    *path = ngx_http_wsel_admin_string(pool, text, pv, "\"path\"", err,
                                       err_size);
    if (*path == NULL) {
        goto out_free_doc;
    }

    if ((*path)[0] == '\0') {
        ngx_cpystrn((u_char *) err, (u_char *) "\"path\" is empty", err_size);
        goto out_free_doc;
    }

    if (cv == NULL) {
        *config = NULL;

    } else if (cv->type == WSEL_JSON_STRING) {
        /* never "{}" in its place: the policy would run on its defaults,
         * not on the config sent */
        *config = ngx_http_wsel_admin_string(pool, text, cv,
                                             "\"config\" (a string)", err,
                                             err_size);
        if (*config == NULL) {
            goto out_free_doc;
        }

    } else {
        /* an object (or what the host refuses as a config) as sent */
        *config = ngx_pnalloc(pool, (size_t) (cv->end - cv->start) + 1);
        if (*config == NULL) {
            ngx_cpystrn((u_char *) err, (u_char *) "no memory for \"config\"",
                        err_size);
            goto out_free_doc;
        }
        ngx_memcpy(*config, text + cv->start, cv->end - cv->start);
        (*config)[cv->end - cv->start] = '\0';
    }

    ret = NGX_OK;

out_free_doc:

    wsel_json_doc_free(&doc);
    return ret;
}


static void
ngx_http_wsel_admin_body(ngx_http_request_t *r)
{
    u_char                     *body, *d;
    char                       *path, *config, err[NGX_HTTP_WSEL_ERR];
    size_t                      len;
    int32_t                     rc;
    ngx_buf_t                  *b;
    ngx_uint_t                  status, copied;
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

    body = ngx_http_wsel_body(r, NULL, &len, &copied);
    if (body == NULL) {
        ngx_cpystrn((u_char *) err, (u_char *)
                    (r->headers_in.content_length_n > NGX_HTTP_WSEL_MAX_BODY
                     ? "the body is over the module's 64 MiB limit"
                     : "no body; expected "
                       "{\"path\": \"/x.so\", \"config\": {...}}"),
                    sizeof(err));
        goto answer;
    }

    if (ngx_http_wsel_admin_read(r->pool, body, len, &path, &config, err,
                                 sizeof(err))
        != NGX_OK)
    {
        goto answer;
    }

    path = (char *) ngx_http_wsel_plugin_path(r->pool, path, err,
                                              sizeof(err));
    if (path == NULL) {
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

    b = ngx_create_temp_buf(r->pool, 256 + 6 * (ngx_strlen(pol)
                                                + ngx_strlen(up->live_path)
                                                + ngx_strlen(err)));
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


ngx_int_t
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
