/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_request.c -- the request path: the precontent phase that
 * routes (and the deferred history flush), $wsel_dp_rank, the body filter
 * (first token, the response's usage) and the request's end (its outcome).
 */

#include "ngx_http_wsel_module.h"

#include <time.h>


ngx_http_output_body_filter_pt  ngx_http_wsel_next_body_filter;


/* ------------------------------------------------------------------------ */
/* routing: precontent phase, variable, body filter, cleanup                */
/* ------------------------------------------------------------------------ */

static uint64_t
ngx_http_wsel_now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


/*
 * The routed request's end in the module's figures: its rank's counters,
 * the engine's prompt and cached tokens, the end-to-end time.
 */
static void
ngx_http_wsel_count_finish(ngx_http_wsel_ctx_t *ctx, ngx_uint_t failed)
{
    ngx_http_wsel_rank_counters_t  *rc;

    rc = ngx_http_wsel_rank_counters(&ctx->up->metrics, ctx->worker_id,
                                     ctx->dp_rank);
    if (rc == NULL) {
        return;
    }

    rc->finished++;

    if (failed) {
        rc->failed++;
        return;
    }

    if (ctx->have_cached && ctx->have_prompt) {
        rc->prompt_tokens += ctx->prompt_tokens;
        rc->cached_tokens += ngx_min(ctx->cached_tokens, ctx->prompt_tokens);
    }

    ngx_http_wsel_observe(&ctx->up->metrics, NGX_HTTP_WSEL_HIST_e2e,
                          ngx_http_wsel_now_ns() - ctx->routed_ns);
}


/*
 * The routed request ends: its outcome goes to the policy through
 * libwsel-router, with the response's completion_tokens (0 if it had none)
 * and cached_tokens (the engine's figure when the response says it), failed
 * when the client went away, the upstream failed, the status is not a
 * success, or no response byte came back.
 */
void
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

    ngx_http_wsel_count_finish(ctx, fin.flags & WSEL_ROUTER_FINISH_FAILED);

    (void) wsel_router_finished_ex(ctx->up->router, ctx->request_id, &fin);
    ctx->routed = 0;
}


/*
 * The request's end. A response a peer was tried for whose last buffer
 * never went by was cut (an engine died mid-response, or the client went
 * away): counted, whoever's fault, and a failed outcome (nginx sets no
 * error flag the finish could see when the upstream side cut it after the
 * header: the status sent stays 200).
 */
static void
ngx_http_wsel_cleanup(void *data)
{
    ngx_http_wsel_ctx_t  *ctx = data;

    ngx_uint_t  cut;

    cut = ctx->tried && !ctx->complete;

    if (cut) {
        ctx->up->responses_cut++;
    }

    ngx_http_wsel_finish(ctx->request, ctx, cut);
}


/* Route q (t0 the route's start), count it, keep the choice. */
static void
ngx_http_wsel_route_request(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx,
    wsel_route_request *q, uint64_t t0)
{
    int32_t                         rc;
    wsel_route_result               res;
    ngx_http_wsel_rank_counters_t  *cn;
    ngx_http_wsel_upstream_t       *up = ctx->up;

    if (!up->kv_events) {
        /* the history record waits until the request is on its way
         * upstream (the posted flush below, after this event's handlers) */
        q->overrides |= WSEL_ROUTE_DEFER_HISTORY;
    }

    if (up->ndown) {
        ngx_http_wsel_recheck_peers(up);
    }

    ngx_http_wsel_shared_sync(up, r->connection->log);

    rc = wsel_router_route(up->router, q, &res);

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

    ctx->routed = 1;
    ctx->request_id = res.request_id;
    ctx->worker_id = res.worker_id;
    ctx->dp_rank = res.dp_rank;
    ctx->rank_len = ngx_sprintf(ctx->rank_text, "%uD", res.dp_rank)
                    - ctx->rank_text;

    ctx->routed_ns = t0;

    cn = ngx_http_wsel_rank_counters(&up->metrics, res.worker_id,
                                     res.dp_rank);
    if (cn) {
        cn->routed++;
    }

    ngx_http_wsel_observe(&up->metrics, NGX_HTTP_WSEL_HIST_route,
                          ngx_http_wsel_now_ns() - t0);
}


/* Read the prompt and route: NGX_OK, or NGX_AGAIN when wsel_tokenizer's
 * task tokenizes it in the thread pool (ngx_http_wsel_route_tokens goes
 * on when it is done). */
static ngx_int_t
ngx_http_wsel_route(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx)
{
    u_char                    *body;
    size_t                     len;
    uint64_t                   t0;
    ngx_uint_t                 copied;
    wsel_route_request         q;
    ngx_http_wsel_prompt_t     prompt;
    ngx_http_wsel_upstream_t  *up = ctx->up;

    if (up->router == NULL) {
        return NGX_OK;
    }

    t0 = ngx_http_wsel_now_ns();
    up->requests++;

    ngx_memzero(&prompt, sizeof(prompt));
    ngx_memzero(&q, sizeof(q));
    q.struct_size = sizeof(q);

    /* a body the pool's thread reads must stay the request's own */
    body = ngx_http_wsel_body(r, up->tok ? NULL : &up->body, &len, &copied);
    up->body_copies += copied;

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

        if (up->tok
            && ngx_http_wsel_tokenize_post(r, ctx, &prompt, body, len)
               == NGX_AGAIN)
        {
            ctx->routed_ns = t0;
            return NGX_AGAIN;
        }
    }

    ngx_http_wsel_route_request(r, ctx, &q, t0);
    return NGX_OK;
}


/* Back to nginx's phases, past the precontent one. */
static void
ngx_http_wsel_resume(ngx_http_request_t *r, ngx_http_wsel_ctx_t *ctx)
{
    ctx->phase_status = NGX_DECLINED;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


void
ngx_http_wsel_route_tokens(ngx_http_request_t *r)
{
    wsel_route_request    q;
    ngx_http_wsel_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_upstream_wsel_module);

    /* a write event while the task runs */
    if (ctx == NULL || ctx->tok_task == NULL || r->aio) {
        return;
    }

    ngx_memzero(&q, sizeof(q));
    q.struct_size = sizeof(q);
    (void) ngx_http_wsel_tokenize_result(ctx, &q);

    ngx_http_wsel_route_request(r, ctx, &q, ctx->routed_ns);
    ngx_http_wsel_resume(r, ctx);
}


void
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

    if (ngx_http_wsel_route(r, ctx) == NGX_AGAIN) {
        return;
    }

    ngx_http_wsel_resume(r, ctx);
}


ngx_int_t
ngx_http_wsel_precontent_handler(ngx_http_request_t *r)
{
    ngx_int_t                   rc;
    ngx_pool_cleanup_t         *cln;
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

    /* the request's end: its outcome, a cut response (the cleanup is
     * added before the route, so a routed request always has it) */
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->up = up;
    ctx->request = r;
    ctx->phase_status = NGX_DONE;
    ngx_http_set_ctx(r, ctx, ngx_http_upstream_wsel_module);

    cln->handler = ngx_http_wsel_cleanup;
    cln->data = ctx;

    rc = ngx_http_read_client_request_body(r, ngx_http_wsel_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    ngx_http_finalize_request(r, NGX_DONE);
    return NGX_DONE;
}


ngx_int_t
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


/* Key k's value (keys[] below) read from the response. */
static void
ngx_http_wsel_usage_value(ngx_http_wsel_ctx_t *ctx, ngx_uint_t k,
    uint64_t value)
{
    uint32_t  v;

    v = value > 0xffffffffu ? 0xffffffffu : (uint32_t) value;

    if (k == 0) {
        ctx->output_tokens = v;

    } else if (k == 1) {
        ctx->cached_tokens = v;
        ctx->have_cached = 1;

    } else {
        ctx->prompt_tokens = v;
        ctx->have_prompt = 1;
    }
}


/*
 * The usage figures of an OpenAI-style response ("completion_tokens": N,
 * "cached_tokens": N, "prompt_tokens": N), wherever they are (a JSON body, the last SSE
 * chunk), matched byte by byte so a key or number split across buffers is
 * still read; the last value of each key wins.
 */
static void
ngx_http_wsel_scan_usage(ngx_http_wsel_ctx_t *ctx, u_char *p, u_char *e)
{
    static const ngx_str_t  keys[3] = {
        ngx_string("\"completion_tokens\":"),
        ngx_string("\"cached_tokens\":"),
        ngx_string("\"prompt_tokens\":")
    };

    u_char                 c;
    ngx_uint_t             k;
    ngx_http_wsel_scan_t  *sc;

    for ( /* void */ ; p < e; p++) {
        c = *p;

        for (k = 0; k < 3; k++) {
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
                ngx_http_wsel_usage_value(ctx, k, sc->value);
            }

            sc->matched = c == '"';
        }
    }
}


ngx_int_t
ngx_http_wsel_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_int_t             rc;
    ngx_chain_t          *cl;
    ngx_http_wsel_ctx_t  *ctx;

    ctx = NULL;

    if (r == r->main && in) {
        ctx = ngx_http_get_module_ctx(r, ngx_http_upstream_wsel_module);

        for (cl = in; ctx && cl; cl = cl->next) {
            if (cl->buf->last_buf) {
                ctx->complete = 1;
            }
        }

        /* the upstream's response only: not a page nginx makes itself (a
         * 502 or 504 when the peer failed before any response byte) */
        if (ctx && ctx->routed && r->upstream && r->upstream->header_sent) {
            for (cl = in; cl; cl = cl->next) {
                if (ngx_buf_size(cl->buf) <= 0) {
                    continue;
                }

                if (!ctx->first) {
                    ctx->first = 1;
                    (void) wsel_router_first_token(ctx->up->router,
                                                   ctx->request_id);
                    ngx_http_wsel_observe(&ctx->up->metrics,
                                          NGX_HTTP_WSEL_HIST_ttft,
                                          ngx_http_wsel_now_ns()
                                          - ctx->routed_ns);
                }

                if (ngx_buf_in_memory(cl->buf)) {
                    ngx_http_wsel_scan_usage(ctx, cl->buf->pos,
                                             cl->buf->last);
                }
            }
        }
    }

    rc = ngx_http_wsel_next_body_filter(r, in);

    /* the response's last buffer has gone by: the server is done with the
     * request, so is its rank's load; the pool cleanup would come only
     * once the client has read it all (send_timeout) or closed the
     * connection (a lingering close: lingering_timeout, lingering_time) */
    if (ctx && ctx->complete && ctx->routed) {
        ngx_http_wsel_finish(r, ctx, rc == NGX_ERROR);
    }

    return rc;
}
