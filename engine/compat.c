// SPDX-License-Identifier: Apache-2.0
/*
 * compat.c -- what vLLM and SGLang answer beyond the OpenAI API, for the
 * routers that probe it (compat.h).
 */
#include "compat.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "request.h"

#define ENG_VERSION "wsel-engine"

/* printf into a new reply body. 0 or -1 when out of memory. */
static int reply(eng_compat_reply *out, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    out->body = malloc((size_t)n + 1);
    if (!out->body)
        return -1;
    va_start(ap, fmt);
    vsnprintf(out->body, (size_t)n + 1, fmt, ap);
    va_end(ap);
    out->status = status;
    out->len = (size_t)n;
    return 0;
}

static int error_reply(eng_compat_reply *out, unsigned status, const char *msg)
{
    char b[768];
    size_t n = eng_fmt_error(b, sizeof(b), (int)status, msg);
    return reply(out, status, "%.*s", (int)(n < sizeof(b) ? n : sizeof(b) - 1), b);
}

/* vLLM's GET /version. */
static int version(eng *e, const char *body, size_t len, eng_compat_reply *out)
{
    (void)e, (void)body, (void)len;
    return reply(out, 200, "{\"version\":\"%s\"}", ENG_VERSION);
}

/* SGLang's GET /health_generate: healthy once the model runs. */
static int health_generate(eng *e, const char *body, size_t len, eng_compat_reply *out)
{
    (void)e, (void)body, (void)len;
    return reply(out, 200, "");
}

/* SGLang's GET /get_model_info. */
static int model_info(eng *e, const char *body, size_t len, eng_compat_reply *out)
{
    (void)body, (void)len;
    return reply(out, 200,
                 "{\"model_path\":\"%s\",\"tokenizer_path\":null,\"is_generation\":true,"
                 "\"preferred_sampling_params\":null,\"weight_version\":\"default\"}",
                 e->opt.model);
}

/* SGLang's GET /get_server_info: the server arguments routers read. */
static int server_info(eng *e, const char *body, size_t len, eng_compat_reply *out)
{
    (void)body, (void)len;
    const sim_cluster *c = &e->opt.cluster;
    return reply(out, 200,
                 "{\"model_path\":\"%s\",\"served_model_name\":\"%s\",\"tp_size\":1,"
                 "\"dp_size\":%u,\"page_size\":%u,\"max_running_requests\":%u,"
                 "\"max_total_num_tokens\":%llu,\"context_length\":%u,"
                 "\"chunked_prefill_size\":%u,\"disaggregation_mode\":\"null\","
                 "\"version\":\"%s\"}",
                 e->opt.model, e->opt.model, e->num_ranks, c->block_size, c->max_running,
                 (unsigned long long)c->kv_blocks * c->block_size, e->opt.max_model_len,
                 c->token_budget, ENG_VERSION);
}

/* vLLM's POST /tokenize: a completions or chat body's prompt token ids. */
static int tokenize(eng *e, const char *body, size_t len, eng_compat_reply *out)
{
    eng_parse_result res;
    eng_req *r;
    if (eng_request_parse(&e->opt, ENG_API_COMPLETIONS, body ? body : "", len, &r, &res) != 0 &&
        eng_request_parse(&e->opt, ENG_API_CHAT, body ? body : "", len, &r, &res) != 0)
        return error_reply(out, (unsigned)res.status, res.message);
    size_t cap = 64 + (size_t)r->isl * 11;
    out->body = malloc(cap);
    if (!out->body) {
        eng_req_release(e, r);
        return -1;
    }
    size_t n = (size_t)snprintf(out->body, cap, "{\"count\":%u,\"max_model_len\":%u,\"tokens\":[",
                                r->isl, e->opt.max_model_len);
    for (uint32_t i = 0; i < r->isl; i++)
        n += (size_t)snprintf(out->body + n, cap - n, i ? ",%u" : "%u", r->tokens[i]);
    n += (size_t)snprintf(out->body + n, cap - n, "],\"token_strs\":null}");
    out->status = 200;
    out->len = n;
    eng_req_release(e, r);
    return 0;
}

typedef int (*compat_fn)(eng *e, const char *body, size_t len, eng_compat_reply *out);

/* path, method, handler: one row per endpoint. */
#define COMPAT_ENDPOINTS(X)                                                              \
    X("/version", "GET", version)                                                       \
    X("/health_generate", "GET", health_generate)                                       \
    X("/get_model_info", "GET", model_info)                                             \
    X("/get_server_info", "GET", server_info)                                           \
    X("/tokenize", "POST", tokenize)

static const struct {
    const char *path, *method;
    compat_fn fn;
} endpoints[] = {
#define ROW(path, method, fn) {path, method, fn},
    COMPAT_ENDPOINTS(ROW)
#undef ROW
};

int eng_compat_answer(eng *e, const char *url, const char *method, const char *body,
                      size_t len, eng_compat_reply *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < sizeof(endpoints) / sizeof(endpoints[0]); i++) {
        if (strcmp(url, endpoints[i].path) != 0)
            continue;
        int rc = strcmp(method, endpoints[i].method) == 0
                     ? endpoints[i].fn(e, body, len, out)
                     : error_reply(out, 405, "Method Not Allowed");
        return rc == 0 ? 1 : -1;
    }
    return 0;
}
