// SPDX-License-Identifier: Apache-2.0
/*
 * trace.c -- the Mooncake JSONL line parser, on the strict JSON reader the
 * host's configuration parser uses (wsel_json.h): one JSON grammar for
 * every wsel input, linear in the line, with its limits named.
 */
#include "trace.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wsel.h"
#include "wsel_json.h"

void sim_trace_parser_init(sim_trace_parser *p, uint32_t trace_block_size)
{
    memset(p, 0, sizeof(*p));
    p->trace_block_size = trace_block_size;
}

void sim_trace_parser_free(sim_trace_parser *p)
{
    if (p->json != NULL)
        wsel_json_doc_free(p->json);
    free(p->json);
    free(p->ids);
    p->json = NULL;
    p->ids = NULL;
    p->id_capacity = 0;
}

static int key_is(const char *js, const wsel_json_token *t, const char *key)
{
    return wsel_json_string_is(js, t, key);
}

/* Parse a JSON integer token into *out; 1 ok, 0 not an integer, -1 negative. */
static int parse_uint(const char *js, const wsel_json_token *t, uint64_t *out)
{
    if (t->type != WSEL_JSON_NUMBER)
        return 0;
    const char *s = js + t->start, *end = js + t->end;
    int negative = 0;
    if (s < end && *s == '-') {
        negative = 1;
        s++;
    }
    if (s == end)
        return 0;
    uint64_t v = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (negative)
        return v == 0 ? (*out = 0, 1) : -1;
    *out = v;
    return 1;
}

/* Parse a JSON number token; 1 ok, 0 not a number. */
static int parse_number(const char *js, const wsel_json_token *t, double *out)
{
    if (t->type != WSEL_JSON_NUMBER)
        return 0;
    char tmp[64];
    size_t n = (size_t)(t->end - t->start);
    if (n == 0 || n >= sizeof(tmp))
        return 0;
    memcpy(tmp, js + t->start, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (*end != '\0' || errno != 0 || !isfinite(v) ||
        !(tmp[0] == '-' || (tmp[0] >= '0' && tmp[0] <= '9')))
        return 0;
    *out = v;
    return 1;
}

static int32_t tokenize(sim_trace_parser *p, const char *js, size_t len, char *err,
                        size_t err_size)
{
    if (p->json == NULL) {
        p->json = calloc(1, sizeof(wsel_json_doc));
        if (p->json == NULL) {
            snprintf(err, err_size, "out of memory");
            return WSEL_ENOMEM;
        }
    }
    size_t i = 0;
    while (i < len && (js[i] == ' ' || js[i] == '\t' || js[i] == '\r' || js[i] == '\n'))
        i++;
    if (i == len) {
        snprintf(err, err_size, "empty line (expected a JSON object)");
        return WSEL_EINVAL;
    }
    static const wsel_json_limits limits = {SIM_TRACE_MAX_LINE, SIM_TRACE_MAX_DEPTH,
                                            SIM_TRACE_MAX_TOKENS};
    char why[160];
    int32_t rc = wsel_json_parse(p->json, js, len, &limits, why, sizeof(why));
    if (rc == WSEL_ENOMEM) {
        snprintf(err, err_size, "%s", why);
        return rc;
    }
    if (rc < 0) {
        snprintf(err, err_size, "%s: %s",
                 rc == WSEL_ERANGE ? "refused" : "not valid JSON", why);
        return WSEL_EINVAL;
    }
    return 0;
}

static int32_t parse_hash_ids(sim_trace_parser *p, const char *js,
                              const wsel_json_token *t, uint32_t i, char *err,
                              size_t err_size)
{
    if (t[i].type != WSEL_JSON_ARRAY) {
        snprintf(err, err_size, "\"hash_ids\" is not an array");
        return WSEL_EINVAL;
    }
    uint32_t n = (uint32_t)t[i].size;
    if (n > p->id_capacity) {
        uint64_t *grown = realloc(p->ids, (size_t)n * sizeof(*grown));
        if (!grown) {
            snprintf(err, err_size, "out of memory for %u hash ids", n);
            return WSEL_ENOMEM;
        }
        p->ids = grown;
        p->id_capacity = n;
    }
    for (uint32_t k = 0, j = i + 1; k < n; k++, j = t[j].next) {
        if (parse_uint(js, &t[j], &p->ids[k]) != 1) {
            snprintf(err, err_size, "\"hash_ids\"[%u] is not a non-negative integer", k);
            return WSEL_EINVAL;
        }
    }
    return 0;
}

enum { F_TIMESTAMP, F_INPUT, F_OUTPUT, F_HASH_IDS, F_COUNT };
static const char *const field_names[F_COUNT] = {"timestamp", "input_length",
                                                 "output_length", "hash_ids"};

static int32_t parse_length(const char *js, const wsel_json_token *t, const char *key,
                            uint64_t *out, char *err, size_t err_size)
{
    int r = parse_uint(js, t, out);
    if (r == 1)
        return 0;
    snprintf(err, err_size, r < 0 ? "\"%s\" is negative" : "\"%s\" is not an integer",
             key);
    return WSEL_EINVAL;
}

int32_t sim_trace_parse_line(sim_trace_parser *p, const char *line, size_t len,
                             sim_trace_line *out, char *err, size_t err_size)
{
    int32_t rc = tokenize(p, line, len, err, err_size);
    if (rc != 0)
        return rc;
    const wsel_json_token *t = ((wsel_json_doc *)p->json)->tokens;
    if (t[0].type != WSEL_JSON_OBJECT) {
        snprintf(err, err_size, "not a JSON object");
        return WSEL_EINVAL;
    }
    sim_trace_line v = {0};
    int seen[F_COUNT] = {0};
    uint32_t i = 1;
    for (uint32_t pair = 0; pair < t[0].size; pair++) {
        int f = 0;
        while (f < F_COUNT && !key_is(line, &t[i], field_names[f]))
            f++;
        if (f < F_COUNT && seen[f]++) {
            snprintf(err, err_size, "key \"%s\" appears twice", field_names[f]);
            return WSEL_EINVAL;
        }
        const wsel_json_token *val = &t[i + 1];
        if (f == F_TIMESTAMP) {
            if (!parse_number(line, val, &v.timestamp_ms)) {
                snprintf(err, err_size, "\"timestamp\" is not a number");
                return WSEL_EINVAL;
            }
            if (v.timestamp_ms < 0) {
                snprintf(err, err_size, "\"timestamp\" is negative");
                return WSEL_EINVAL;
            }
            if (v.timestamp_ms > SIM_TRACE_MAX_TIMESTAMP_MS) {
                snprintf(err, err_size,
                         "\"timestamp\" %.17g ms is out of range [0, %g] (ms since the "
                         "trace's start)",
                         v.timestamp_ms, SIM_TRACE_MAX_TIMESTAMP_MS);
                return WSEL_EINVAL;
            }
        } else if (f == F_INPUT || f == F_OUTPUT) {
            rc = parse_length(line, val, field_names[f],
                              f == F_INPUT ? &v.input_length : &v.output_length, err,
                              err_size);
            if (rc != 0)
                return rc;
        } else if (f == F_HASH_IDS) {
            rc = parse_hash_ids(p, line, t, i + 1, err, err_size);
            if (rc != 0)
                return rc;
            v.num_hash_ids = val->size;
        }
        i = val->next;
    }
    for (int f = 0; f < F_COUNT; f++) {
        if (!seen[f]) {
            snprintf(err, err_size, "missing field \"%s\"", field_names[f]);
            return WSEL_EINVAL;
        }
    }
    if (v.input_length == 0) {
        snprintf(err, err_size, "\"input_length\" is 0; a request has at least 1 token");
        return WSEL_EINVAL;
    }
    if (v.input_length > UINT32_MAX || v.output_length > UINT32_MAX) {
        snprintf(err, err_size, "\"%s\" is over 2^32 tokens",
                 v.input_length > UINT32_MAX ? "input_length" : "output_length");
        return WSEL_EINVAL;
    }
    uint64_t expected = (v.input_length + p->trace_block_size - 1) / p->trace_block_size;
    if (v.num_hash_ids != expected) {
        snprintf(err, err_size,
                 "\"hash_ids\" has %u ids but input_length %llu needs %llu "
                 "(ceil(input_length / %u))",
                 v.num_hash_ids, (unsigned long long)v.input_length,
                 (unsigned long long)expected, p->trace_block_size);
        return WSEL_EINVAL;
    }
    v.hash_ids = p->ids;
    *out = v;
    return 0;
}
