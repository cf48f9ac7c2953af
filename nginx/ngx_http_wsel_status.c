/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_status.c -- the status location (JSON, Prometheus text)
 * and the admin location that switches the policy by path.
 */

#include "ngx_http_wsel_module.h"

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
            up->requests, rcn.routes, up->no_prompt, rcn.builtin_routes,
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


/* The 4 hex digits at p as a number, or -1. */
static ngx_int_t
ngx_http_wsel_js_hex4(u_char *p, u_char *e)
{
    if (e - p < 4) {
        return -1;
    }

    return ngx_hextoi(p, 4);
}


/*
 * The unescaped value of a JSON string at p (at '"'), NUL-terminated; NULL
 * when it is not a string, a \u escape is not a character (a lone
 * surrogate, or U+0000: the value must stay one C string), or memory ran
 * out. \uXXXX becomes UTF-8 (at most 4 bytes for the 6 or 12 it takes).
 */
static char *
ngx_http_wsel_js_unescape(ngx_pool_t *pool, u_char *p, u_char *e)
{
    u_char     *end, *d;
    char       *out;
    ngx_int_t   c, lo;

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
            case 'u':
                c = ngx_http_wsel_js_hex4(p + 1, end - 1);
                if (c <= 0 || (c >= 0xdc00 && c <= 0xdfff)) {
                    return NULL;
                }
                p += 4;

                if (c >= 0xd800 && c <= 0xdbff) {
                    if (end - 1 - p < 7 || p[1] != '\\' || p[2] != 'u') {
                        return NULL;
                    }
                    lo = ngx_http_wsel_js_hex4(p + 3, end - 1);
                    if (lo < 0xdc00 || lo > 0xdfff) {
                        return NULL;
                    }
                    p += 6;
                    c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
                }

                if (c < 0x80) {
                    *d++ = (u_char) c;

                } else if (c < 0x800) {
                    *d++ = (u_char) (0xc0 | (c >> 6));
                    *d++ = (u_char) (0x80 | (c & 0x3f));

                } else if (c < 0x10000) {
                    *d++ = (u_char) (0xe0 | (c >> 12));
                    *d++ = (u_char) (0x80 | ((c >> 6) & 0x3f));
                    *d++ = (u_char) (0x80 | (c & 0x3f));

                } else {
                    *d++ = (u_char) (0xf0 | (c >> 18));
                    *d++ = (u_char) (0x80 | ((c >> 12) & 0x3f));
                    *d++ = (u_char) (0x80 | ((c >> 6) & 0x3f));
                    *d++ = (u_char) (0x80 | (c & 0x3f));
                }
                break;
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

    body = ngx_http_wsel_body(r, NULL, &len);
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
            if (path == NULL) {
                ngx_cpystrn((u_char *) err, (u_char *) "\"path\" has an "
                            "escape that is not a character", sizeof(err));
                goto answer;
            }

        } else if (ke - k == 6 && ngx_strncmp(k, "config", 6) == 0) {
            if (*v == '"') {
                /* never "{}" in its place: the policy would run on its
                 * defaults, not on the config sent */
                config = ngx_http_wsel_js_unescape(r->pool, v, e);
                if (config == NULL) {
                    ngx_cpystrn((u_char *) err, (u_char *) "\"config\" (a "
                                "string) has an escape that is not a "
                                "character", sizeof(err));
                    goto answer;
                }

            } else {
                config = ngx_pnalloc(r->pool, (size_t) (ve - v) + 1);
                if (config == NULL) {
                    ngx_cpystrn((u_char *) err, (u_char *) "no memory for "
                                "\"config\"", sizeof(err));
                    goto answer;
                }
                ngx_memcpy(config, v, ve - v);
                config[ve - v] = '\0';
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
