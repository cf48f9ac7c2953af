// SPDX-License-Identifier: Apache-2.0
/*
 * config.c -- parse a plugin's JSON configuration against its parameter
 * table, with the strict JSON reader every wsel input uses (wsel_json.h).
 *
 * Accepts exactly one JSON object whose keys are parameter names (string
 * escapes decoded, so "soft\u006dax" is softmax). Every refusal names the
 * key and the rule; every input limit (WSEL_CONFIG_MAX_*) names itself.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "wsel_json.h"

/* Input limits of wsel_config_parse (abi/wsel.h, "Limits"): a
 * configuration is one flat object of at most WSEL_MAX_PARAMS keys. */
#define WSEL_CONFIG_MAX_BYTES  65536u
#define WSEL_CONFIG_MAX_DEPTH  16u
#define WSEL_CONFIG_MAX_TOKENS 4096u

/* Longest key or value quoted back in a message. */
#define QUOTE_MAX 48

/* Longest number text accepted (JSON allows more; no parameter needs it). */
#define NUMBER_MAX 64

/* Copy token text for a message: printable ASCII, truncated with "...". */
static void quote(char *out, size_t size, const char *json, const wsel_json_token *t)
{
    size_t n = (size_t)(t->end - t->start), k = 0;
    for (size_t i = 0; i < n && k + 4 < size; i++) {
        char c = json[t->start + i];
        out[k++] = (c >= 0x20 && c < 0x7f) ? c : '?';
        if (i + 1 == QUOTE_MAX && n > QUOTE_MAX) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
    }
    out[k] = '\0';
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
    case WSEL_PARAM_JSON:
        return "an object or an array";
    default:
        return "a number";
    }
}

static const char *token_kind(const wsel_json_token *t)
{
    switch (t->type) {
    case WSEL_JSON_OBJECT:
        return "an object";
    case WSEL_JSON_ARRAY:
        return "an array";
    case WSEL_JSON_STRING:
        return "a string";
    case WSEL_JSON_TRUE:
    case WSEL_JSON_FALSE:
        return "a boolean";
    case WSEL_JSON_NULL:
        return "null";
    default:
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

/* A number token (grammar checked by the reader) as a finite double. */
static int32_t read_number(const char *json, const wsel_json_token *t, const char *key,
                           double *out, char *err, size_t err_size)
{
    char text[NUMBER_MAX + 1], q[QUOTE_MAX + 4];
    size_t n = (size_t)(t->end - t->start);
    if (n > NUMBER_MAX) {
        quote(q, sizeof(q), json, t);
        wsel__set_error(err, err_size,
                        "config: key '%s': '%s' is longer than %u characters (limit)",
                        key, q, NUMBER_MAX);
        return WSEL_ECONFIG;
    }
    memcpy(text, json + t->start, n);
    text[n] = '\0';
    double v = strtod(text, NULL);
    if (!isfinite(v)) {
        wsel__set_error(err, err_size, "config: key '%s': %s is not finite", key, text);
        return WSEL_ECONFIG;
    }
    *out = v;
    return 0;
}

static int32_t wrong_type(const wsel_json_token *t, const wsel_param_def *d, char *err,
                          size_t err_size)
{
    wsel__set_error(err, err_size, "config: key '%s': expected %s, got %s", d->name,
                    type_name(d->type), token_kind(t));
    return WSEL_ECONFIG;
}

/* The index of enum string t among d's choices into *v. */
static int32_t read_choice(const char *json, const wsel_json_token *t,
                           const wsel_param_def *d, double *v, char *err, size_t err_size)
{
    if (t->type != WSEL_JSON_STRING)
        return wrong_type(t, d, err, err_size);
    uint32_t c = 0;
    while (d->choices[c] != NULL && !wsel_json_string_is(json, t, d->choices[c]))
        c++;
    if (d->choices[c] == NULL) {
        char q[QUOTE_MAX + 4];
        char list[256];
        quote(q, sizeof(q), json, t);
        list_choices(list, sizeof(list), d);
        wsel__set_error(err, err_size, "config: key '%s': '%s' is not one of: %s",
                        d->name, q, list);
        return WSEL_ECONFIG;
    }
    *v = (double)c;
    return 0;
}

/* v (read from token t) within d's bounds, or WSEL_ECONFIG said. */
static int32_t check_bounds(const char *json, const wsel_json_token *t,
                            const wsel_param_def *d, double v, char *err, size_t err_size)
{
    if (!(v < d->min_value || v > d->max_value))
        return 0;
    if (d->type == WSEL_PARAM_ENUM) {
        wsel__set_error(err, err_size,
                        "config: key '%s': '%s' is not allowed (choices %g to %g)",
                        d->name, d->choices[(uint32_t)v], d->min_value, d->max_value);
    } else {
        char q[QUOTE_MAX + 4];
        quote(q, sizeof(q), json, t);
        wsel__set_error(err, err_size, "config: key '%s': %s is out of range [%g, %g]",
                        d->name, q, d->min_value, d->max_value);
    }
    return WSEL_ECONFIG;
}

/* Convert value token t for parameter d into *out. */
static int32_t read_value(const char *json, const wsel_json_token *t,
                          const wsel_param_def *d, double *out, char *err,
                          size_t err_size)
{
    double v = 0.0;
    switch (d->type) {
    case WSEL_PARAM_DOUBLE:
    case WSEL_PARAM_INT:
        if (t->type != WSEL_JSON_NUMBER)
            return wrong_type(t, d, err, err_size);
        if (read_number(json, t, d->name, &v, err, err_size) < 0)
            return WSEL_ECONFIG;
        if (d->type == WSEL_PARAM_INT && v != floor(v)) {
            char q[QUOTE_MAX + 4];
            quote(q, sizeof(q), json, t);
            wsel__set_error(err, err_size, "config: key '%s': %s is not an integer",
                            d->name, q);
            return WSEL_ECONFIG;
        }
        break;
    case WSEL_PARAM_BOOL:
        if (t->type != WSEL_JSON_TRUE && t->type != WSEL_JSON_FALSE)
            return wrong_type(t, d, err, err_size);
        v = t->type == WSEL_JSON_TRUE ? 1.0 : 0.0;
        break;
    case WSEL_PARAM_ENUM:
        if (read_choice(json, t, d, &v, err, err_size) < 0)
            return WSEL_ECONFIG;
        break;
    case WSEL_PARAM_JSON: /* the text is kept aside by parse_object */
        if (t->type != WSEL_JSON_OBJECT && t->type != WSEL_JSON_ARRAY)
            return wrong_type(t, d, err, err_size);
        *out = 1.0; /* present; create() reads the text with param_json */
        return 0;
    default:
        return WSEL_ECONFIG; /* unreachable: the descriptor was checked */
    }
    if (check_bounds(json, t, d, v, err, err_size) < 0)
        return WSEL_ECONFIG;
    *out = v;
    return 0;
}

static int32_t unknown_key(const wsel_plugin *p, const char *json,
                           const wsel_json_token *t, char *err, size_t err_size)
{
    char q[QUOTE_MAX + 4], list[512];
    size_t k = 0;
    list[0] = '\0';
    for (uint32_t i = 0; i < p->num_params && k < sizeof(list); i++)
        k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s", i ? ", " : "",
                              wsel__descriptor_param(p, i)->name);
    quote(q, sizeof(q), json, t);
    if (p->num_params == 0)
        wsel__set_error(err, err_size,
                        "config: unknown key '%s' (plugin %s accepts no parameters)", q,
                        p->name);
    else
        wsel__set_error(err, err_size, "config: unknown key '%s' (plugin %s accepts: %s)",
                        q, p->name, list);
    return WSEL_ECONFIG;
}

/* Copy the text of a JSON parameter's value into texts[k]. */
static int32_t keep_text(const char *json, const wsel_json_token *t, char **texts,
                         uint32_t k, char *err, size_t err_size)
{
    size_t n = (size_t)(t->end - t->start);
    char *copy = malloc(n + 1);
    if (copy == NULL) {
        wsel__set_error(err, err_size, "config: out of memory");
        return WSEL_ENOMEM;
    }
    memcpy(copy, json + t->start, n);
    copy[n] = '\0';
    texts[k] = copy;
    return 0;
}

/* Parse the tokens of one object into vals (and texts, when not NULL). */
static int32_t parse_object(const wsel_plugin *p, const char *json,
                            const wsel_json_doc *doc, double *vals, char **texts,
                            char *err, size_t err_size)
{
    uint8_t seen[WSEL_MAX_PARAMS] = {0};
    const wsel_json_token *tok = doc->tokens;
    if (tok[0].type != WSEL_JSON_OBJECT) {
        wsel__set_error(err, err_size, "config: expected a JSON object, got %s",
                        token_kind(&tok[0]));
        return WSEL_ECONFIG;
    }
    uint32_t i = 1;
    for (uint32_t pair = 0; pair < tok[0].size; pair++) {
        const wsel_json_token *key = &tok[i], *value = &tok[i + 1];
        uint32_t k = 0;
        while (k < p->num_params &&
               !wsel_json_string_is(json, key, wsel__descriptor_param(p, k)->name))
            k++;
        if (k == p->num_params)
            return unknown_key(p, json, key, err, err_size);
        const wsel_param_def *d = wsel__descriptor_param(p, k);
        if (seen[k]) {
            wsel__set_error(err, err_size, "config: duplicate key '%s'", d->name);
            return WSEL_ECONFIG;
        }
        seen[k] = 1;
        int32_t rc = read_value(json, value, d, &vals[k], err, err_size);
        if (rc == 0 && d->type == WSEL_PARAM_JSON && texts != NULL)
            rc = keep_text(json, value, texts, k, err, err_size);
        if (rc < 0)
            return rc;
        i = value->next;
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

void wsel__config_texts_free(char **texts, uint32_t n)
{
    if (texts == NULL)
        return;
    for (uint32_t k = 0; k < n; k++) {
        free(texts[k]);
        texts[k] = NULL;
    }
}

int32_t wsel_config_parse(const wsel_library *lib, const char *json, double *values,
                          char *err, size_t err_size)
{
    return wsel__config_parse_texts(lib, json, values, NULL, err, err_size);
}

int32_t wsel__config_parse_texts(const wsel_library *lib, const char *json,
                                 double *values, char **texts, char *err, size_t err_size)
{
    if (lib == NULL || (values == NULL && wsel_library_plugin(lib)->num_params > 0)) {
        wsel__set_error(err, err_size, "config: NULL %s",
                        lib == NULL ? "library" : "values");
        return WSEL_EINVAL;
    }
    const wsel_plugin *p = wsel_library_plugin(lib);
    double vals[WSEL_MAX_PARAMS];
    for (uint32_t k = 0; k < p->num_params; k++)
        vals[k] = wsel__descriptor_param(p, k)->default_value;

    int32_t rc = 0;
    if (json != NULL && !only_space(json)) {
        static const wsel_json_limits limits = {
            WSEL_CONFIG_MAX_BYTES, WSEL_CONFIG_MAX_DEPTH, WSEL_CONFIG_MAX_TOKENS};
        wsel_json_doc doc = {0};
        char why[256];
        rc = wsel_json_parse(&doc, json, strlen(json), &limits, why, sizeof(why));
        if (rc == WSEL_ENOMEM) {
            wsel__set_error(err, err_size, "config: %s", why);
        } else if (rc == WSEL_ERANGE) {
            wsel__set_error(err, err_size, "config: refused: %s", why);
            rc = WSEL_ECONFIG;
        } else if (rc < 0) {
            wsel__set_error(err, err_size, "config: malformed JSON (%s)", why);
            rc = WSEL_ECONFIG;
        } else {
            rc = parse_object(p, json, &doc, vals, texts, err, err_size);
        }
        wsel_json_doc_free(&doc);
    }
    if (rc < 0)
        wsel__config_texts_free(texts, p->num_params);
    if (rc == 0 && p->num_params > 0)
        memcpy(values, vals, p->num_params * sizeof(double));
    return rc;
}
