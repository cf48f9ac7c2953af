/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_prompt.c -- the request body as one buffer and the prompt
 * in it: a bounded JSON scanner that finds "prompt" or "messages" and
 * skips everything else; the token ids are read by wsel_token_ids.c into
 * the upstream's buffer.
 */

#include "ngx_http_wsel_module.h"


/* ------------------------------------------------------------------------ */
/* a bounded JSON scanner: finds the prompt, skips everything else          */
/* ------------------------------------------------------------------------ */

u_char *
ngx_http_wsel_js_ws(u_char *p, u_char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
        p++;
    }

    return p;
}


/* p at '"': returns the byte after the closing quote, or NULL */
u_char *
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


u_char *
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
 * An array of token ids (p at '['), read by wsel_token_ids.c into the
 * upstream's buffer (grown as needed, kept for the next request: no
 * per-request allocation). Returns the byte after the ']' with out->tokens
 * set, or NULL when the value is not such an array (or is empty);
 * NGX_ERROR in *rc when memory ran out.
 */
static u_char *
ngx_http_wsel_js_tokens(ngx_http_wsel_upstream_t *up, u_char *p, u_char *e,
    ngx_http_wsel_prompt_t *out, ngx_int_t *rc)
{
    int                   nomem;
    const unsigned char  *end;

    end = wsel_token_ids_parse(p, e, &up->tokens, up->token_reader, &nomem);
    if (nomem) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "wsel: no memory for a prompt's token ids");
        *rc = NGX_ERROR;
        return NULL;
    }

    if (end == NULL || up->tokens.n > 0xffffffffu) {
        return NULL;
    }

    out->tokens = up->tokens.ids;
    out->ntokens = (uint32_t) up->tokens.n;

    return (u_char *) end;
}


/*
 * The prompt of a /v1/completions or /v1/chat/completions body: "prompt" as
 * token ids (any mode) or as a string (text mode), or "messages" (text
 * mode: their JSON text, so conversations sharing a beginning share a
 * prefix). One pass: token ids are read where they stand, every other
 * value skipped. NGX_DECLINED: no usable prompt.
 */
ngx_int_t
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
                    out->chat = 0;
                    found = NGX_OK;
                }

            } else if (ke - k == 8 && ngx_strncmp(k, "messages", 8) == 0) {
                if (*v == '[' && text_mode && out->text == NULL) {
                    out->text = v;
                    out->text_len = (size_t) (ve - v);
                    out->chat = 1;
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


/*
 * The request body as one buffer (memory or temp file), or NULL. nginx
 * gives every read its own buffer; those that lie back to back in memory
 * (the whole body read into the header buffer, or after the headers) are
 * used where they are. A body in separate pieces (the part read with the
 * headers kept apart from the rest, or a temp file) is copied into `keep`
 * when given (grown as needed and kept for the next request: a large
 * prompt costs no fresh pages each time), else into the request's pool;
 * *copied says which happened.
 */
u_char *
ngx_http_wsel_body(ngx_http_request_t *r, ngx_http_wsel_bytes_t *keep,
    size_t *len, ngx_uint_t *copied)
{
    u_char       *buf, *d;
    size_t        n;
    ssize_t       got;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    *copied = 0;

    if (r->request_body == NULL || r->request_body->bufs == NULL) {
        return NULL;
    }

    b = r->request_body->bufs->buf;
    d = b->last;

    for (cl = r->request_body->bufs->next; cl && !b->in_file; cl = cl->next) {
        if (cl->buf->in_file || cl->buf->pos != d) {
            break;
        }
        d = cl->buf->last;
    }

    if (cl == NULL && !b->in_file) {
        *len = (size_t) (d - b->pos);
        return b->pos;
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

    if (keep == NULL) {
        buf = ngx_palloc(r->pool, n + 1);
        if (buf == NULL) {
            return NULL;
        }

    } else {
        if (keep->cap < n + 1) {
            buf = realloc(keep->data, n + 1);
            if (buf == NULL) {
                return NULL;
            }
            keep->data = buf;
            keep->cap = n + 1;
        }
        buf = keep->data;
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
    *copied = 1;
    return buf;
}
