// SPDX-License-Identifier: Apache-2.0
/*
 * format.c -- response bodies (format.h).
 */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *object_of(const eng_req *r, int chunk)
{
    if (r->api == ENG_API_CHAT)
        return chunk ? "chat.completion.chunk" : "chat.completion";
    return "text_completion";
}

static const char *id_prefix(const eng_req *r)
{
    return r->api == ENG_API_CHAT ? "chatcmpl" : "cmpl";
}

static int usage(char *out, size_t size, const eng_req *r)
{
    return snprintf(out, size,
                    "\"usage\":{\"prompt_tokens\":%u,\"total_tokens\":%u,"
                    "\"completion_tokens\":%u,\"prompt_tokens_details\":{"
                    "\"cached_tokens\":%u}}",
                    r->isl, r->isl + r->generated, r->generated, r->cached);
}

static size_t clamp(int n)
{
    return n < 0 ? 0 : (size_t)n;
}

size_t eng_fmt_role_event(char *out, size_t size, const eng_options *o, const eng_req *r)
{
    return clamp(
        snprintf(out, size,
                 "data: {\"id\":\"%s-%llu\",\"object\":\"%s\",\"created\":%lld,"
                 "\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
                 "\"assistant\",\"content\":\"\"},\"logprobs\":null,"
                 "\"finish_reason\":null}]}\n\n",
                 id_prefix(r), (unsigned long long)r->id, object_of(r, 1),
                 (long long)r->created, o->model));
}

size_t eng_fmt_token_event(char *out, size_t size, const eng_options *o, const eng_req *r,
                           uint32_t k)
{
    int last = r->done && k + 1 == r->generated;
    uint32_t tok = eng_output_token(r->id, k, o->vocab_size);
    char piece[64], use[256] = "";
    if (r->api == ENG_API_CHAT)
        snprintf(piece, sizeof(piece), "\"delta\":{\"content\":\" %u\"}", tok);
    else
        snprintf(piece, sizeof(piece), "\"text\":\" %u\"", tok);
    if (last && !r->include_usage) {
        use[0] = ',';
        usage(use + 1, sizeof(use) - 1, r);
    }
    return clamp(snprintf(
        out, size,
        "data: {\"id\":\"%s-%llu\",\"object\":\"%s\",\"created\":%lld,"
        "\"model\":\"%s\",\"choices\":[{\"index\":0,%s,\"logprobs\":null,"
        "\"finish_reason\":%s,\"stop_reason\":null}]%s}\n\n",
        id_prefix(r), (unsigned long long)r->id, object_of(r, 1), (long long)r->created,
        o->model, piece, last ? "\"length\"" : "null", use));
}

size_t eng_fmt_tail(char *out, size_t size, const eng_options *o, const eng_req *r)
{
    char use[256];
    usage(use, sizeof(use), r);
    if (!r->include_usage)
        return clamp(snprintf(out, size, "data: [DONE]\n\n"));
    return clamp(snprintf(out, size,
                          "data: {\"id\":\"%s-%llu\",\"object\":\"%s\",\"created\":%lld,"
                          "\"model\":\"%s\",\"choices\":[],%s}\n\ndata: [DONE]\n\n",
                          id_prefix(r), (unsigned long long)r->id, object_of(r, 1),
                          (long long)r->created, o->model, use));
}

char *eng_fmt_whole(const eng_options *o, const eng_req *r, size_t *len)
{
    size_t cap = 512 + (size_t)r->generated * 8;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t n = 0;
    n += clamp(snprintf(s + n, cap - n,
                        "{\"id\":\"%s-%llu\",\"object\":\"%s\",\"created\":%lld,"
                        "\"model\":\"%s\",\"choices\":[{\"index\":0,%s\"",
                        id_prefix(r), (unsigned long long)r->id, object_of(r, 0),
                        (long long)r->created, o->model,
                        r->api == ENG_API_CHAT
                            ? "\"message\":{\"role\":\"assistant\",\"content\":"
                            : "\"text\":"));
    for (uint32_t k = 0; k < r->generated && n < cap; k++)
        n += clamp(
            snprintf(s + n, cap - n, " %u", eng_output_token(r->id, k, o->vocab_size)));
    char use[256];
    usage(use, sizeof(use), r);
    if (n < cap)
        n += clamp(snprintf(s + n, cap - n,
                            "\"%s,\"logprobs\":null,\"finish_reason\":\"length\","
                            "\"stop_reason\":null}],%s}",
                            r->api == ENG_API_CHAT ? "}" : "", use));
    if (n >= cap) { /* cannot happen: 8 bytes per token cover " 31999" */
        free(s);
        return NULL;
    }
    *len = n;
    return s;
}

static const char *error_type(int status)
{
    switch (status) {
    case 400:
        return "BadRequestError";
    case 404:
        return "NotFoundError";
    case 405:
        return "MethodNotAllowed";
    case 413:
        return "RequestEntityTooLarge";
    default:
        return "InternalServerError";
    }
}

size_t eng_fmt_error(char *out, size_t size, int status, const char *message)
{
    char esc[512];
    size_t n = 0;
    for (const char *p = message; *p && n + 2 < sizeof(esc); p++) {
        if (*p == '"' || *p == '\\')
            esc[n++] = '\\';
        esc[n++] = (unsigned char)*p < 0x20 ? ' ' : *p;
    }
    esc[n] = '\0';
    return clamp(snprintf(out, size,
                          "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,"
                          "\"code\":%d}}",
                          esc, error_type(status), status));
}
