// SPDX-License-Identifier: Apache-2.0
/*
 * tokenize.c -- a route's text or chat prompt turned into the engine's
 * token ids (libwsel-tokenizer) before the route takes the router's mutex,
 * so its blocks hash like the KV events'. Built without the tokenizer
 * (WSEL_ROUTER_TOKENIZER undefined), text and chat stay approximate.
 */
#include <stdlib.h>

#include "router_internal.h"
#ifdef WSEL_ROUTER_TOKENIZER
#include "wsel_tokenizer.h"
#endif

int32_t wsel_router_set_tokenizer(wsel_router *r, const struct wsel_tokenizer *tok)
{
    if (!r)
        return WSEL_EINVAL;
#ifndef WSEL_ROUTER_TOKENIZER
    if (tok)
        return WSEL_ESTATE;
#endif
    r->tok = tok;
    return 0;
}

void wsel_router_read_tokenize_counters(wsel_router *r, wsel_router_tokenize_counters *out)
{
    if (!out)
        return;
    *out = (wsel_router_tokenize_counters){0};
    if (!r)
        return;
    out->text_tokenized = atomic_load(&r->tok_text);
    out->chat_tokenized = atomic_load(&r->tok_chat);
    out->fallbacks = atomic_load(&r->tok_fallbacks);
    out->tokens = atomic_load(&r->tok_tokens);
}

#ifdef WSEL_ROUTER_TOKENIZER
/* Encode q's text or chat into a malloc'd *ids: 0, a negative
 * WSEL_TOKENIZER_E*, or WSEL_TOKENIZER_EINTERNAL when out of memory. */
static int32_t encode(const wsel_tokenizer *tok, const wsel_route_request *q, uint32_t **ids,
                      size_t *n)
{
    size_t len = q->text ? q->text_len : q->chat_len;
    size_t cap = len + 16;
    int32_t rc;
    for (;;) {
        uint32_t *buf = realloc(*ids, cap * sizeof(uint32_t));
        if (!buf)
            return WSEL_TOKENIZER_EINTERNAL;
        *ids = buf;
        if (q->text)
            rc = wsel_tokenizer_encode(tok, q->text, q->text_len, WSEL_TOKENIZER_ADD_SPECIAL,
                                       buf, cap, n);
        else
            rc = wsel_tokenizer_encode_chat(tok, q->chat, q->chat_len, buf, cap, n, NULL, 0);
        if (rc != WSEL_TOKENIZER_ERANGE)
            return rc;
        cap = *n;
    }
}
#endif

void rt_tokenize_prompt(wsel_router *r, wsel_route_request *q, uint32_t **ids)
{
    *ids = NULL;
    if (q->tokens || (!q->text && !q->chat))
        return;
#ifdef WSEL_ROUTER_TOKENIZER
    if (r->tok) {
        size_t n = 0;
        if (encode(r->tok, q, ids, &n) == 0) {
            atomic_fetch_add(q->text ? &r->tok_text : &r->tok_chat, 1);
            atomic_fetch_add(&r->tok_tokens, n);
            q->tokens = *ids;
            q->num_tokens = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
            return;
        }
        atomic_fetch_add(&r->tok_fallbacks, 1);
    }
#else
    (void)r;
#endif
    if (!q->text) { /* a chat body hashed as text (approximate) */
        q->text = q->chat;
        q->text_len = q->chat_len;
    }
}
