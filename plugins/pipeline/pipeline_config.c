// SPDX-License-Identifier: Apache-2.0
/*
 * pipeline_config.c -- read the pipeline's JSON parameters (`scorers`,
 * `picker_plugin`) into child specifications.
 *
 * The host has already checked the text with its strict RFC 8259 reader
 * (wsel_host_api.param_json hands over only what passed), so this reader
 * only walks a well-formed value; it is still bounded everywhere (every
 * loop stops at the terminating NUL, nesting is capped) so that a host
 * bug cannot make it read past the text. A plugin depends on wsel.h only,
 * hence this small reader of its own rather than the host's.
 *
 * Every refusal is logged through the host naming the key and the rule,
 * and returned as WSEL_ECONFIG.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

typedef struct cursor {
    const char *p;
    const wsel_host_api *host;
} cursor;

static int32_t refuse(const cursor *c, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "pipeline: config: %s", what);
    c->host->log(c->host, WSEL_LOG_ERROR, msg);
    return WSEL_ECONFIG;
}

static void skip_ws(cursor *c)
{
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')
        c->p++;
}

static int accept(cursor *c, char ch)
{
    skip_ws(c);
    if (*c->p != ch)
        return 0;
    c->p++;
    return 1;
}

static int hex(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* A string into out (size bytes, NUL-terminated). Escapes are decoded;
 * \u escapes only below 0x80 (names and paths here are ASCII). */
static int32_t read_string(cursor *c, char *out, size_t size)
{
    skip_ws(c);
    if (*c->p != '"')
        return refuse(c, "expected a string");
    c->p++;
    size_t k = 0;
    while (*c->p != '"') {
        char ch = *c->p;
        if (ch == '\0')
            return refuse(c, "unterminated string");
        c->p++;
        if (ch == '\\') {
            char e = *c->p;
            if (e == '\0')
                return refuse(c, "unterminated string");
            c->p++;
            switch (e) {
            case 'n':
                ch = '\n';
                break;
            case 't':
                ch = '\t';
                break;
            case 'r':
                ch = '\r';
                break;
            case 'b':
                ch = '\b';
                break;
            case 'f':
                ch = '\f';
                break;
            case 'u': {
                int v = 0;
                for (int i = 0; i < 4; i++) {
                    int h = hex(*c->p);
                    if (h < 0)
                        return refuse(c, "bad \\u escape");
                    v = v * 16 + h;
                    c->p++;
                }
                if (v == 0 || v >= 0x80)
                    return refuse(c, "a \\u escape outside ASCII in a name or path");
                ch = (char)v;
                break;
            }
            default:
                ch = e; /* \" \\ \/ */
            }
        }
        if (k + 1 >= size)
            return refuse(c, "a string is too long");
        out[k++] = ch;
    }
    c->p++;
    out[k] = '\0';
    return 0;
}

/* Skip one value, of any kind, nested at most PIPELINE_JSON_DEPTH. */
static int32_t skip_value(cursor *c, unsigned depth)
{
    skip_ws(c);
    if (depth > PIPELINE_JSON_DEPTH)
        return refuse(c, "nested too deep");
    char ch = *c->p;
    if (ch == '"') {
        c->p++;
        while (*c->p != '"') {
            if (*c->p == '\0')
                return refuse(c, "unterminated string");
            if (*c->p == '\\' && c->p[1] != '\0')
                c->p++;
            c->p++;
        }
        c->p++;
        return 0;
    }
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->p++;
        if (accept(c, close))
            return 0;
        for (;;) {
            if (ch == '{') { /* the key, then ':' */
                if (skip_value(c, depth + 1) < 0)
                    return WSEL_ECONFIG;
                if (!accept(c, ':'))
                    return refuse(c, "expected ':'");
            }
            if (skip_value(c, depth + 1) < 0)
                return WSEL_ECONFIG;
            if (accept(c, close))
                return 0;
            if (!accept(c, ','))
                return refuse(c, "expected ',' or the end of a list");
        }
    }
    if (ch == '\0')
        return refuse(c, "unexpected end");
    /* number, true, false, null */
    while (*c->p != '\0' && *c->p != ',' && *c->p != '}' && *c->p != ']' &&
           *c->p != ' ' && *c->p != '\t' && *c->p != '\n' && *c->p != '\r')
        c->p++;
    return 0;
}

static int32_t read_number(cursor *c, const char *key, double *out)
{
    skip_ws(c);
    char *end = NULL;
    double v = strtod(c->p, &end);
    if (end == c->p) {
        char msg[96];
        snprintf(msg, sizeof(msg), "key '%s': expected a number", key);
        return refuse(c, msg);
    }
    c->p = end;
    *out = v;
    return 0;
}

/* The object value at the cursor, copied into a fresh string. */
static int32_t copy_object(cursor *c, char **out)
{
    skip_ws(c);
    if (*c->p != '{')
        return refuse(c, "key 'config': expected an object");
    const char *start = c->p;
    if (skip_value(c, 1) < 0)
        return WSEL_ECONFIG;
    size_t n = (size_t)(c->p - start);
    char *s = malloc(n + 1);
    if (s == NULL)
        return WSEL_ENOMEM;
    memcpy(s, start, n);
    s[n] = '\0';
    *out = s;
    return 0;
}

void pipeline_spec_clear(pipeline_spec *s)
{
    free(s->config);
    memset(s, 0, sizeof(*s));
}

/* One child object: {"path": ..., "weight": ..., "config": {...}}. */
static int32_t read_spec(cursor *c, int with_weight, pipeline_spec *out)
{
    pipeline_spec s;
    memset(&s, 0, sizeof(s));
    s.weight = 1.0;
    if (!accept(c, '{'))
        return refuse(c, "every child is an object with a \"path\"");
    int32_t rc = 0;
    if (accept(c, '}'))
        goto out_no_path;
    for (;;) {
        char key[32];
        rc = read_string(c, key, sizeof(key));
        if (rc < 0)
            goto out_clear;
        if (!accept(c, ':')) {
            rc = refuse(c, "expected ':'");
            goto out_clear;
        }
        if (strcmp(key, "path") == 0) {
            rc = read_string(c, s.path, sizeof(s.path));
        } else if (strcmp(key, "weight") == 0 && with_weight) {
            rc = read_number(c, "weight", &s.weight);
            if (rc == 0 && !(s.weight >= 0.0 && s.weight <= PIPELINE_MAX_WEIGHT))
                rc = refuse(c, "key 'weight': outside [0, 1e6]");
        } else if (strcmp(key, "config") == 0) {
            free(s.config);
            s.config = NULL;
            rc = copy_object(c, &s.config);
        } else {
            char msg[96];
            snprintf(msg, sizeof(msg),
                     "unknown key '%s' in a child (accepts: path, %sconfig)", key,
                     with_weight ? "weight, " : "");
            rc = refuse(c, msg);
        }
        if (rc < 0)
            goto out_clear;
        if (accept(c, '}'))
            break;
        if (!accept(c, ',')) {
            rc = refuse(c, "expected ',' or '}'");
            goto out_clear;
        }
    }
    if (s.path[0] == '\0')
        goto out_no_path;
    *out = s;
    return 0;

out_no_path:
    rc = refuse(c, "a child without \"path\"");
out_clear:
    pipeline_spec_clear(&s);
    return rc;
}

int32_t pipeline_read_scorers(const wsel_host_api *host, const char *json,
                              pipeline_spec *out, uint32_t *out_count)
{
    cursor c = {.p = json, .host = host};
    uint32_t n = 0;
    int32_t rc = 0;
    if (!accept(&c, '['))
        return refuse(&c, "key 'scorers': expected an array of children");
    if (accept(&c, ']'))
        goto out_done;
    for (;;) {
        if (n == PIPELINE_MAX_SCORERS) {
            rc = refuse(&c, "key 'scorers': more than 8 scorers");
            goto out_clear;
        }
        rc = read_spec(&c, 1, &out[n]);
        if (rc < 0)
            goto out_clear;
        n++;
        if (accept(&c, ']'))
            break;
        if (!accept(&c, ',')) {
            rc = refuse(&c, "key 'scorers': expected ',' or ']'");
            goto out_clear;
        }
    }
out_done:
    *out_count = n;
    return 0;

out_clear:
    for (uint32_t i = 0; i < n; i++)
        pipeline_spec_clear(&out[i]);
    return rc;
}

int32_t pipeline_read_picker(const wsel_host_api *host, const char *json,
                             pipeline_spec *out)
{
    cursor c = {.p = json, .host = host};
    return read_spec(&c, 0, out);
}
