// SPDX-License-Identifier: Apache-2.0
/*
 * request.c -- request bodies (jsmn) to eng_req (request.h).
 */
#define JSMN_STATIC
#define JSMN_STRICT
#include <jsmn.h>

#include "request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct body {
    const char *js;
    jsmntok_t *t;
    int n;
} body;

static int fail(eng_parse_result *res, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->message, sizeof(res->message), fmt, ap);
    va_end(ap);
    res->status = status;
    return -1;
}

/* Index after the value at i. */
static int skip(const jsmntok_t *t, int i)
{
    int pending = 1;
    while (pending > 0) {
        pending += t[i].size - 1;
        i++;
    }
    return i;
}

static int eq(const body *b, int i, const char *s)
{
    size_t n = strlen(s);
    return b->t[i].type == JSMN_STRING && (size_t)(b->t[i].end - b->t[i].start) == n &&
           memcmp(b->js + b->t[i].start, s, n) == 0;
}

static int is_null(const body *b, int i)
{
    return b->t[i].type == JSMN_PRIMITIVE && b->js[b->t[i].start] == 'n';
}

static int get_bool(const body *b, int i, int *out)
{
    if (b->t[i].type != JSMN_PRIMITIVE)
        return -1;
    char c = b->js[b->t[i].start];
    if (c != 't' && c != 'f')
        return -1;
    *out = c == 't';
    return 0;
}

/* An integer in [-2^62, 2^62]; -1 if not one. */
static int get_int(const body *b, int i, int64_t *out)
{
    const jsmntok_t *t = &b->t[i];
    if (t->type != JSMN_PRIMITIVE)
        return -1;
    const char *p = b->js + t->start, *end = b->js + t->end;
    int neg = p < end && *p == '-';
    p += neg;
    if (p == end)
        return -1;
    int64_t v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        if (v > (INT64_C(1) << 62) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

/* A JSON string's text, unescaped (UTF-8), malloc'd; NULL on a bad escape
 * or out of memory. */
static char *get_string(const body *b, int i, size_t *len)
{
    const char *p = b->js + b->t[i].start, *end = b->js + b->t[i].end;
    char *out = malloc((size_t)(end - p) + 1), *o = out;
    if (!out)
        return NULL;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        p++;
        char c = *p++;
        switch (c) {
        case 'n':
            *o++ = '\n';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'u': {
            unsigned v = 0;
            for (int k = 0; k < 4; k++, p++) {
                char h = *p;
                v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
            }
            /* Surrogates count as their own code points here: a word's id
             * only needs to be stable, not a faithful decoding. */
            if (v < 0x80) {
                *o++ = (char)v;
            } else if (v < 0x800) {
                *o++ = (char)(0xc0 | v >> 6);
                *o++ = (char)(0x80 | (v & 0x3f));
            } else {
                *o++ = (char)(0xe0 | v >> 12);
                *o++ = (char)(0x80 | ((v >> 6) & 0x3f));
                *o++ = (char)(0x80 | (v & 0x3f));
            }
            break;
        }
        default:
            *o++ = c;
            break; /* " \ / */
        }
    }
    *o = '\0';
    *len = (size_t)(o - out);
    return out;
}

/* Append text to a growing buffer. */
typedef struct text {
    char *s;
    size_t n, cap;
} text;

static int text_add(text *t, const char *s, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->n + n + 1)
            cap *= 2;
        char *g = realloc(t->s, cap);
        if (!g)
            return -1;
        t->s = g;
        t->cap = cap;
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = '\0';
    return 0;
}

/* --tokenizer: text (chat 0) or a chat body (1) to the model's ids. */
static int hf_tokenize(const eng_options *o, int chat, const char *s, size_t n, eng_req *r,
                       eng_parse_result *res)
{
    char why[400];
    if (eng_tokenizer_encode(o, chat, s, n, &r->tokens, &r->isl, why, sizeof(why)))
        return fail(res, 400, "%s", why);
    return 0;
}

/* Text to tokens into r->tokens. */
static int tokenize_into(const eng_options *o, eng_req *r, const char *s, size_t n,
                         eng_parse_result *res)
{
    if (o->tokenizer) /* --tokenizer: the model's own ids */
        return hf_tokenize(o, 0, s, n, r, res);
    uint32_t words = eng_count_words(s, n);
    r->tokens = malloc(((size_t)words + 1) * sizeof(uint32_t));
    if (!r->tokens)
        return fail(res, 500, "out of memory");
    r->isl = eng_tokenize(s, n, o->vocab_size, r->tokens, words);
    return 0;
}

static int parse_prompt(const eng_options *o, const body *b, int i, eng_req *r,
                        eng_parse_result *res)
{
    const jsmntok_t *t = &b->t[i];
    if (t->type == JSMN_STRING) {
        size_t n;
        char *s = get_string(b, i, &n);
        if (!s)
            return fail(res, 500, "out of memory");
        int rc = tokenize_into(o, r, s, n, res);
        free(s);
        return rc;
    }
    if (t->type != JSMN_ARRAY)
        return fail(res, 400, "'prompt' must be a string or an array of token ids");
    if (t->size > 0 && b->t[i + 1].type != JSMN_PRIMITIVE)
        return fail(res, 400, "batched prompts are not supported: send one per request");
    r->tokens = malloc(((size_t)t->size + 1) * sizeof(uint32_t));
    if (!r->tokens)
        return fail(res, 500, "out of memory");
    for (int k = 0; k < t->size; k++) {
        int64_t v;
        if (get_int(b, i + 1 + k, &v) != 0)
            return fail(res, 400, "'prompt' element %d is not an integer token id", k);
        if (v < 0 || v >= (int64_t)o->vocab_size)
            return fail(res, 400, "token id %lld is out of vocabulary (size %u)",
                        (long long)v, o->vocab_size);
        r->tokens[k] = (uint32_t)v;
    }
    r->isl = (uint32_t)t->size;
    return 0;
}

/* messages: joined as "<|role|> content" per message, then "<|assistant|>". */
static int parse_messages(const eng_options *o, const body *b, int i, eng_req *r,
                          eng_parse_result *res)
{
    if (b->t[i].type != JSMN_ARRAY || b->t[i].size == 0)
        return fail(res, 400, "'messages' must be a non-empty array");
    if (o->tokenizer) /* --tokenizer: the model's chat template, the whole body */
        return hf_tokenize(o, 1, b->js, (size_t)b->t[0].end, r, res);
    text all = {0};
    int count = b->t[i].size, k = i + 1, rc = -1;
    for (int m = 0; m < count; m++) {
        if (b->t[k].type != JSMN_OBJECT) {
            fail(res, 400, "messages[%d] must be an object", m);
            goto out_free_text;
        }
        int keys = b->t[k].size, j = k + 1, have_role = 0;
        for (int f = 0; f < keys; f++) {
            int v = j + 1;
            if (eq(b, j, "role")) {
                if (b->t[v].type != JSMN_STRING) {
                    fail(res, 400, "messages[%d].role must be a string", m);
                    goto out_free_text;
                }
                have_role = 1;
                if (text_add(&all, " <|", 3) ||
                    text_add(&all, b->js + b->t[v].start,
                             (size_t)(b->t[v].end - b->t[v].start)) ||
                    text_add(&all, "|> ", 3))
                    goto out_nomem;
            } else if (eq(b, j, "content")) {
                if (b->t[v].type == JSMN_STRING) {
                    size_t n;
                    char *s = get_string(b, v, &n);
                    if (!s || text_add(&all, s, n) || text_add(&all, " ", 1)) {
                        free(s);
                        goto out_nomem;
                    }
                    free(s);
                } else if (b->t[v].type == JSMN_ARRAY) {
                    /* [{"type": "text", "text": "..."}]: the texts in order */
                    int parts = b->t[v].size, p = v + 1;
                    for (int q = 0; q < parts; q++) {
                        int pk = b->t[p].type == JSMN_OBJECT ? b->t[p].size : 0;
                        for (int x = 0, y = p + 1; x < pk; x++) {
                            if (eq(b, y, "text") && b->t[y + 1].type == JSMN_STRING) {
                                size_t n;
                                char *s = get_string(b, y + 1, &n);
                                if (!s || text_add(&all, s, n) ||
                                    text_add(&all, " ", 1)) {
                                    free(s);
                                    goto out_nomem;
                                }
                                free(s);
                            }
                            y = skip(b->t, y + 1);
                        }
                        p = skip(b->t, p);
                    }
                } else if (!is_null(b, v)) {
                    fail(res, 400, "messages[%d].content must be a string or parts", m);
                    goto out_free_text;
                }
            }
            j = skip(b->t, v);
        }
        if (!have_role) {
            fail(res, 400, "messages[%d] has no role", m);
            goto out_free_text;
        }
        k = j;
    }
    if (text_add(&all, "<|assistant|>", 13))
        goto out_nomem;
    rc = tokenize_into(o, r, all.s, all.n, res);
    goto out_free_text;

out_nomem:
    fail(res, 500, "out of memory");
out_free_text:
    free(all.s);
    return rc;
}

static void note_unknown(eng_parse_result *res, const body *b, int i)
{
    if (res->unknown[0])
        return;
    int n = b->t[i].end - b->t[i].start;
    snprintf(res->unknown, sizeof(res->unknown), "%.*s", n < 60 ? n : 60,
             b->js + b->t[i].start);
}

static int parse_fields(const eng_options *o, uint32_t api, const body *b, eng_req *r,
                        int64_t *max_tokens, eng_parse_result *res)
{
    int have_prompt = 0, keys = b->t[0].size, j = 1;
    for (int f = 0; f < keys; f++) {
        int v = j + 1;
        int64_t iv;
        if (eq(b, j, "model")) {
            if (b->t[v].type != JSMN_STRING)
                return fail(res, 400, "'model' must be a string");
            size_t n = (size_t)(b->t[v].end - b->t[v].start);
            if (n != strlen(o->model) || memcmp(b->js + b->t[v].start, o->model, n) != 0)
                return fail(res, 404,
                            "The model does not exist: this engine serves '%s'.",
                            o->model);
        } else if ((api == ENG_API_COMPLETIONS && eq(b, j, "prompt")) ||
                   (api == ENG_API_CHAT && eq(b, j, "messages"))) {
            if (have_prompt)
                return fail(res, 400, "the prompt is given twice");
            have_prompt = 1;
            int rc = api == ENG_API_CHAT ? parse_messages(o, b, v, r, res)
                                         : parse_prompt(o, b, v, r, res);
            if (rc != 0)
                return rc;
        } else if (eq(b, j, "max_tokens") || eq(b, j, "max_completion_tokens")) {
            if (!is_null(b, v) && get_int(b, v, &iv) != 0)
                return fail(res, 400, "'max_tokens' must be an integer");
            if (!is_null(b, v))
                *max_tokens = iv;
        } else if (eq(b, j, "stream")) {
            if (!is_null(b, v) && get_bool(b, v, &r->stream) != 0)
                return fail(res, 400, "'stream' must be a boolean");
        } else if (eq(b, j, "stream_options")) {
            if (b->t[v].type == JSMN_OBJECT) {
                for (int x = 0, y = v + 1; x < b->t[v].size; x++) {
                    if (eq(b, y, "include_usage") &&
                        get_bool(b, y + 1, &r->include_usage) != 0)
                        return fail(res, 400, "'include_usage' must be a boolean");
                    y = skip(b->t, y + 1);
                }
            } else if (!is_null(b, v)) {
                return fail(res, 400, "'stream_options' must be an object");
            }
        } else if (eq(b, j, "n")) {
            if (!is_null(b, v) && (get_int(b, v, &iv) != 0 || iv != 1))
                return fail(res, 400, "only n = 1 is supported");
        } else if (eq(b, j, "ignore_eos") || eq(b, j, "temperature") ||
                   eq(b, j, "top_p") || eq(b, j, "top_k") || eq(b, j, "seed") ||
                   eq(b, j, "stop") || eq(b, j, "user") || eq(b, j, "min_tokens") ||
                   eq(b, j, "logprobs") || eq(b, j, "echo") ||
                   eq(b, j, "frequency_penalty") || eq(b, j, "presence_penalty")) {
            /* known, and without effect on an emulated engine */
        } else {
            note_unknown(res, b, j);
        }
        j = skip(b->t, v);
    }
    if (!have_prompt)
        return fail(res, 400, "'%s' is required",
                    api == ENG_API_CHAT ? "messages" : "prompt");
    return 0;
}

static int check_lengths(const eng_options *o, eng_req *r, int64_t max_tokens,
                         eng_parse_result *res)
{
    if (r->isl == 0)
        return fail(res, 400, "The prompt cannot be empty.");
    if (r->isl >= o->max_model_len)
        return fail(res, 400,
                    "This model's maximum context length is %u tokens. However, your "
                    "prompt has %u tokens.",
                    o->max_model_len, r->isl);
    if (max_tokens == INT64_MIN)
        max_tokens = (int64_t)o->max_model_len - r->isl;
    if (max_tokens < 1)
        return fail(res, 400, "max_tokens must be at least 1, got %lld.",
                    (long long)max_tokens);
    if (max_tokens > (int64_t)o->max_model_len - r->isl)
        return fail(res, 400,
                    "This model's maximum context length is %u tokens. However, you "
                    "requested %lld tokens (%u in the prompt, %lld for the completion).",
                    o->max_model_len, (long long)(r->isl + max_tokens), r->isl,
                    (long long)max_tokens);
    r->osl = (uint32_t)max_tokens;
    if (sim_engine_blocks_needed(&o->cluster, r->isl, r->osl) > o->cluster.kv_blocks)
        return fail(res, 400,
                    "prompt and completion need more KV blocks than a rank holds (%u "
                    "of %u tokens)",
                    o->cluster.kv_blocks, o->cluster.block_size);
    return 0;
}

int eng_request_parse(const eng_options *o, uint32_t api, const char *js, size_t len,
                      eng_req **out, eng_parse_result *res)
{
    memset(res, 0, sizeof(*res));
    jsmn_parser p;
    jsmn_init(&p);
    int n = jsmn_parse(&p, js, len, NULL, 0);
    if (n < 1)
        return fail(res, 400, "the body is not valid JSON");
    body b = {js, malloc((size_t)n * sizeof(jsmntok_t)), n};
    if (!b.t)
        return fail(res, 500, "out of memory");
    eng_req *r = calloc(1, sizeof(*r));
    int rc = -1;
    if (!r) {
        fail(res, 500, "out of memory");
        goto out_free_tokens;
    }
    jsmn_init(&p);
    if (jsmn_parse(&p, js, len, b.t, (unsigned)n) != n || b.t[0].type != JSMN_OBJECT ||
        skip(b.t, 0) != n) {
        fail(res, 400, "the body is not a valid JSON object");
        goto out_free_req;
    }
    r->api = api;
    r->rank = UINT32_MAX;
    r->refs = 1;
    r->created = (int64_t)time(NULL);
    int64_t max_tokens = INT64_MIN;
    if (parse_fields(o, api, &b, r, &max_tokens, res) != 0 ||
        check_lengths(o, r, max_tokens, res) != 0)
        goto out_free_req;
    r->num_blocks = r->isl / o->cluster.block_size;
    r->blocks = malloc(((size_t)r->num_blocks + 1) * sizeof(uint64_t));
    if (!r->blocks) {
        fail(res, 500, "out of memory");
        goto out_free_req;
    }
    eng_block_hashes(r->tokens, r->isl, o->cluster.block_size, r->blocks);
    *out = r;
    r = NULL;
    rc = 0;

out_free_req:
    if (r) {
        free(r->tokens);
        free(r->blocks);
        free(r);
    }
out_free_tokens:
    free(b.t);
    return rc;
}
