/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_prompt.c -- the request body as one buffer and the prompt
 * in it: a bounded JSON scanner that finds "prompt" or "messages" and
 * skips everything else, the token ids parsed in one pass (SSE2 + SWAR)
 * into the upstream's buffer.
 */

#include "ngx_http_wsel_module.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif


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
u_char *
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
