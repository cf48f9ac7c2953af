/*
 * config.c -- parse a plugin's JSON configuration against its parameter
 * table (jsmn, strict mode).
 *
 * Accepts exactly one JSON object whose keys are parameter names. Every
 * refusal names the key and the rule. Written to be fuzzed: token counts
 * are checked before use, subtrees are skipped without recursion, numbers
 * are validated against the JSON grammar before strtod sees them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define JSMN_STATIC
#define JSMN_STRICT
#include <jsmn.h>

/* Longest key or value quoted back in a message. */
#define QUOTE_MAX 48

/* Longest number text accepted (JSON allows more; no parameter needs it). */
#define NUMBER_MAX 64

/* Copy token text for a message: printable ASCII, truncated with "...". */
static void quote(char *out, size_t size, const char *json, const jsmntok_t *t)
{
    size_t n = (size_t)(t->end - t->start), k = 0;
    for (size_t i = 0; i < n && k + 4 < size; i++) {
        char c = json[t->start + (int)i];
        out[k++] = (c >= 0x20 && c < 0x7f) ? c : '?';
        if (i + 1 == QUOTE_MAX && n > QUOTE_MAX) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
    }
    out[k] = '\0';
}

static int token_equals(const char *json, const jsmntok_t *t, const char *s)
{
    size_t n = (size_t)(t->end - t->start);
    return strlen(s) == n && memcmp(json + t->start, s, n) == 0;
}

/* Index of the first token after the subtree rooted at token i. Tokens
 * come in document order, so the subtree is every later token that starts
 * before this one ends. */
static int skip_subtree(const jsmntok_t *tok, int count, int i)
{
    int end = tok[i].end, j = i + 1;
    while (j < count && tok[j].start < end)
        j++;
    return j;
}

/* JSON number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        size_t digits = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == digits)
            return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t digits = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == digits)
            return 0;
    }
    return i == n;
}

static const char *type_name(uint32_t type)
{
    switch (type) {
    case WSEL_PARAM_INT:
        return "an integer";
    case WSEL_PARAM_BOOL:
        return "true or false";
    case WSEL_PARAM_ENUM:
        return "a string";
    default:
        return "a number";
    }
}

static const char *token_kind(const char *json, const jsmntok_t *t)
{
    switch (t->type) {
    case JSMN_OBJECT:
        return "an object";
    case JSMN_ARRAY:
        return "an array";
    case JSMN_STRING:
        return "a string";
    default:
        if (json[t->start] == 't' || json[t->start] == 'f')
            return "a boolean";
        if (json[t->start] == 'n')
            return "null";
        return "a number";
    }
}

/* List the ENUM's choices ("a, b, c") into out. */
static void list_choices(char *out, size_t size, const wsel_param_def *d)
{
    size_t k = 0;
    out[0] = '\0';
    for (uint32_t c = 0; d->choices[c] != NULL && k < size; c++)
        k += (size_t)snprintf(out + k, size - k, "%s%s", c ? ", " : "", d->choices[c]);
}

/* A value as a number: grammar, then strtod, then finiteness. */
static int32_t read_number(const char *json, const jsmntok_t *t, const char *key,
                           double *out, char *err, size_t err_size)
{
    char text[NUMBER_MAX + 1], q[QUOTE_MAX + 4];
    size_t n = (size_t)(t->end - t->start);
    if (n > NUMBER_MAX || !is_json_number(json + t->start, n)) {
        quote(q, sizeof(q), json, t);
        wsel_set_error(err, err_size, "config: key '%s': '%s' is not a JSON number", key,
                       q);
        return WSEL_ECONFIG;
    }
    memcpy(text, json + t->start, n);
    text[n] = '\0';
    double v = strtod(text, NULL);
    if (!isfinite(v)) {
        wsel_set_error(err, err_size, "config: key '%s': %s is not finite", key, text);
        return WSEL_ECONFIG;
    }
    *out = v;
    return 0;
}

/* Convert value token t for parameter d into *out. */
static int32_t read_value(const char *json, const jsmntok_t *t, const wsel_param_def *d,
                          double *out, char *err, size_t err_size)
{
    char q[QUOTE_MAX + 4];
    int is_number =
        t->type == JSMN_PRIMITIVE &&
        (json[t->start] == '-' || (json[t->start] >= '0' && json[t->start] <= '9'));
    double v;
    switch (d->type) {
    case WSEL_PARAM_DOUBLE:
    case WSEL_PARAM_INT:
        if (!is_number)
            goto out_wrong_type;
        if (read_number(json, t, d->name, &v, err, err_size) < 0)
            return WSEL_ECONFIG;
        if (d->type == WSEL_PARAM_INT && v != floor(v)) {
            quote(q, sizeof(q), json, t);
            wsel_set_error(err, err_size, "config: key '%s': %s is not an integer",
                           d->name, q);
            return WSEL_ECONFIG;
        }
        break;
    case WSEL_PARAM_BOOL:
        if (t->type != JSMN_PRIMITIVE)
            goto out_wrong_type;
        if (token_equals(json, t, "true"))
            v = 1.0;
        else if (token_equals(json, t, "false"))
            v = 0.0;
        else
            goto out_wrong_type;
        break;
    case WSEL_PARAM_ENUM: {
        if (t->type != JSMN_STRING)
            goto out_wrong_type;
        uint32_t c = 0;
        while (d->choices[c] != NULL && !token_equals(json, t, d->choices[c]))
            c++;
        if (d->choices[c] == NULL) {
            char list[256];
            quote(q, sizeof(q), json, t);
            list_choices(list, sizeof(list), d);
            wsel_set_error(err, err_size, "config: key '%s': '%s' is not one of: %s",
                           d->name, q, list);
            return WSEL_ECONFIG;
        }
        v = (double)c;
        break;
    }
    default:
        return WSEL_ECONFIG; /* unreachable: the descriptor was checked */
    }
    if (v < d->min_value || v > d->max_value) {
        if (d->type == WSEL_PARAM_ENUM) {
            wsel_set_error(err, err_size,
                           "config: key '%s': '%s' is not allowed (choices %g to %g)",
                           d->name, d->choices[(uint32_t)v], d->min_value, d->max_value);
        } else {
            quote(q, sizeof(q), json, t);
            wsel_set_error(err, err_size, "config: key '%s': %s is out of range [%g, %g]",
                           d->name, q, d->min_value, d->max_value);
        }
        return WSEL_ECONFIG;
    }
    *out = v;
    return 0;

out_wrong_type:
    wsel_set_error(err, err_size, "config: key '%s': expected %s, got %s", d->name,
                   type_name(d->type), token_kind(json, t));
    return WSEL_ECONFIG;
}

static int32_t unknown_key(const wsel_plugin *p, const char *json, const jsmntok_t *t,
                           char *err, size_t err_size)
{
    char q[QUOTE_MAX + 4], list[512];
    size_t k = 0;
    list[0] = '\0';
    for (uint32_t i = 0; i < p->num_params && k < sizeof(list); i++)
        k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s", i ? ", " : "",
                              wsel_descriptor_param(p, i)->name);
    quote(q, sizeof(q), json, t);
    if (p->num_params == 0)
        wsel_set_error(err, err_size,
                       "config: unknown key '%s' (plugin %s accepts no parameters)", q,
                       p->name);
    else
        wsel_set_error(err, err_size, "config: unknown key '%s' (plugin %s accepts: %s)",
                       q, p->name, list);
    return WSEL_ECONFIG;
}

/* Index just past the raw text of token t (a string's closing quote
 * included). */
static int raw_end(const jsmntok_t *t)
{
    return t->type == JSMN_STRING ? t->end + 1 : t->end;
}

static int skip_space(const char *json, int pos)
{
    while (json[pos] == ' ' || json[pos] == '\t' || json[pos] == '\n' ||
           json[pos] == '\r')
        pos++;
    return pos;
}

/* jsmn is lenient about colons ("{\"d\":: 2}"): exactly one ':' must sit
 * between a key and its value. */
static int32_t check_colon(const char *json, const jsmntok_t *key, const jsmntok_t *value,
                           char *err, size_t err_size)
{
    int pos = skip_space(json, raw_end(key));
    int value_start = value->type == JSMN_STRING ? value->start - 1 : value->start;
    if (json[pos] == ':' && skip_space(json, pos + 1) == value_start)
        return 0;
    char q[QUOTE_MAX + 4];
    quote(q, sizeof(q), json, key);
    wsel_set_error(err, err_size,
                   "config: malformed JSON (expected one ':' after key '%s')", q);
    return WSEL_ECONFIG;
}

/* jsmn accepts a trailing comma ("{\"d\": 2,}"); JSON does not. After each
 * value there must be a ',' and more pairs, or the object's closing '}'. */
static int32_t check_separator(const char *json, const jsmntok_t *object,
                               const jsmntok_t *value, int last, const char *key,
                               char *err, size_t err_size)
{
    int pos = raw_end(value);
    while (json[pos] == ' ' || json[pos] == '\t' || json[pos] == '\n' ||
           json[pos] == '\r')
        pos++;
    int ok = last ? (json[pos] == '}' && pos == object->end - 1) : json[pos] == ',';
    if (ok)
        return 0;
    wsel_set_error(err, err_size, "config: malformed JSON (expected '%c' after key '%s')",
                   last ? '}' : ',', key);
    return WSEL_ECONFIG;
}

/* Parse the tokens of one object into vals/seen. */
static int32_t parse_object(const wsel_plugin *p, const char *json, const jsmntok_t *tok,
                            int count, double *vals, char *err, size_t err_size)
{
    uint8_t seen[WSEL_MAX_PARAMS] = {0};
    if (tok[0].type != JSMN_OBJECT) {
        wsel_set_error(err, err_size, "config: expected a JSON object, got %s",
                       token_kind(json, &tok[0]));
        return WSEL_ECONFIG;
    }
    if (skip_subtree(tok, count, 0) != count) {
        wsel_set_error(err, err_size, "config: text after the JSON object");
        return WSEL_ECONFIG;
    }
    int i = 1;
    for (int pair = 0; pair < tok[0].size; pair++) {
        if (i + 1 >= count || tok[i].type != JSMN_STRING) {
            wsel_set_error(err, err_size, "config: malformed object (key %d)", pair);
            return WSEL_ECONFIG;
        }
        const jsmntok_t *key = &tok[i], *value = &tok[i + 1];
        int32_t rc = check_colon(json, key, value, err, err_size);
        if (rc < 0)
            return rc;
        uint32_t k = 0;
        while (k < p->num_params &&
               !token_equals(json, key, wsel_descriptor_param(p, k)->name))
            k++;
        if (k == p->num_params)
            return unknown_key(p, json, key, err, err_size);
        const wsel_param_def *d = wsel_descriptor_param(p, k);
        if (seen[k]) {
            wsel_set_error(err, err_size, "config: duplicate key '%s'", d->name);
            return WSEL_ECONFIG;
        }
        seen[k] = 1;
        rc = read_value(json, value, d, &vals[k], err, err_size);
        if (rc == 0)
            rc = check_separator(json, &tok[0], value, pair + 1 == tok[0].size, d->name,
                                 err, err_size);
        if (rc < 0)
            return rc;
        i = skip_subtree(tok, count, i + 1);
    }
    return 0;
}

static int only_space(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            return 0;
    }
    return 1;
}

int32_t wsel_config_parse(const wsel_library *lib, const char *json, double *values,
                          char *err, size_t err_size)
{
    if (lib == NULL || (values == NULL && wsel_library_plugin(lib)->num_params > 0)) {
        wsel_set_error(err, err_size, "config: NULL %s",
                       lib == NULL ? "library" : "values");
        return WSEL_EINVAL;
    }
    const wsel_plugin *p = wsel_library_plugin(lib);
    double vals[WSEL_MAX_PARAMS];
    for (uint32_t k = 0; k < p->num_params; k++)
        vals[k] = wsel_descriptor_param(p, k)->default_value;

    int32_t rc = 0;
    if (json != NULL && !only_space(json)) {
        size_t len = strlen(json);
        jsmn_parser parser;
        jsmn_init(&parser);
        int count = jsmn_parse(&parser, json, len, NULL, 0);
        if (count < 0) {
            wsel_set_error(err, err_size, "config: malformed JSON (%s)",
                           count == JSMN_ERROR_PART ? "truncated" : "invalid character");
            return WSEL_ECONFIG;
        }
        jsmntok_t *tok = calloc((size_t)count, sizeof(*tok));
        if (tok == NULL) {
            wsel_set_error(err, err_size, "config: out of memory");
            return WSEL_ENOMEM;
        }
        jsmn_init(&parser);
        count = jsmn_parse(&parser, json, len, tok, (unsigned)count);
        if (count <= 0) {
            wsel_set_error(err, err_size, "config: malformed JSON");
            rc = WSEL_ECONFIG;
        } else {
            rc = parse_object(p, json, tok, count, vals, err, err_size);
        }
        free(tok);
    }
    if (rc == 0 && p->num_params > 0)
        memcpy(values, vals, p->num_params * sizeof(double));
    return rc;
}
