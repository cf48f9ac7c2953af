// SPDX-License-Identifier: Apache-2.0
/*
 * descriptor.c -- check a plugin descriptor and its parameter table before
 * any of the plugin's functions is called.
 *
 * Every refusal names the file, the field and the rule, so the author of a
 * broken plugin reads what to fix.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* Largest magnitude an INT parameter may take (exact in a double). */
#define INT_PARAM_LIMIT 9007199254740992.0 /* 2^53 */

static int is_name_char(char c, int allow_dash)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           (allow_dash && c == '-');
}

/* Non-empty, at most 64 characters of [a-z0-9_] (plus '-' if allowed). */
static int valid_name(const char *s, int allow_dash)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        if (n >= 64 || !is_name_char(s[n], allow_dash))
            return 0;
    }
    return n > 0;
}

const wsel_param_def *wsel__descriptor_param(const wsel_plugin *p, uint32_t i)
{
    if (p == NULL || p->params == NULL || i >= p->num_params)
        return NULL;
    return (const wsel_param_def *)((const char *)p->params +
                                    (size_t)i * p->param_def_size);
}

/* Count an ENUM's choices (bounded); checks each is a unique valid name. */
static int32_t check_choices(const char *path, const wsel_param_def *d, uint32_t i,
                             uint32_t *out_count, char *err, size_t err_size)
{
    if (d->choices == NULL) {
        wsel__set_error(err, err_size, "%s: parameter %u ('%s'): enum without choices",
                        path, i, d->name);
        return WSEL_EABI;
    }
    uint32_t n = 0;
    for (; d->choices[n] != NULL; n++) {
        if (n >= WSEL_MAX_CHOICES) {
            wsel__set_error(err, err_size,
                            "%s: parameter %u ('%s'): more than %u choices", path, i,
                            d->name, WSEL_MAX_CHOICES);
            return WSEL_EABI;
        }
        if (!valid_name(d->choices[n], 1)) {
            wsel__set_error(err, err_size,
                            "%s: parameter %u ('%s'): choice %u is not [a-z0-9_-]+", path,
                            i, d->name, n);
            return WSEL_EABI;
        }
        for (uint32_t k = 0; k < n; k++) {
            if (strcmp(d->choices[k], d->choices[n]) == 0) {
                wsel__set_error(err, err_size,
                                "%s: parameter %u ('%s'): choice '%s' listed twice", path,
                                i, d->name, d->choices[n]);
                return WSEL_EABI;
            }
        }
    }
    if (n == 0) {
        wsel__set_error(err, err_size, "%s: parameter %u ('%s'): enum without choices",
                        path, i, d->name);
        return WSEL_EABI;
    }
    *out_count = n;
    return 0;
}

/* Type-specific bounds: INT and ENUM values are integers, BOOL is 0..1,
 * ENUM indices name a choice. */
static int32_t check_type_bounds(const char *path, const wsel_param_def *d, uint32_t i,
                                 char *err, size_t err_size)
{
    double lo = 0.0, hi = INT_PARAM_LIMIT;
    int integral = 1;
    switch (d->type) {
    case WSEL_PARAM_DOUBLE:
        return 0;
    case WSEL_PARAM_JSON: /* ABI 1.1: the text reaches create() aside */
        if (d->min_value != 0.0 || d->default_value != 0.0 || d->max_value != 0.0 ||
            d->choices != NULL) {
            wsel__set_error(err, err_size,
                            "%s: parameter %u ('%s'): a JSON parameter has min, default "
                            "and max 0 and no choices",
                            path, i, d->name);
            return WSEL_EABI;
        }
        return 0;
    case WSEL_PARAM_INT:
        lo = -INT_PARAM_LIMIT;
        break;
    case WSEL_PARAM_BOOL:
        hi = 1.0;
        break;
    case WSEL_PARAM_ENUM: {
        uint32_t n = 0;
        int32_t rc = check_choices(path, d, i, &n, err, err_size);
        if (rc < 0)
            return rc;
        hi = (double)(n - 1);
        break;
    }
    default:
        wsel__set_error(err, err_size, "%s: parameter %u ('%s'): unknown type %u", path,
                        i, d->name, d->type);
        return WSEL_EABI;
    }
    const double v[3] = {d->min_value, d->default_value, d->max_value};
    static const char *const what[3] = {"min", "default", "max"};
    for (int k = 0; k < 3; k++) {
        if (integral && v[k] != floor(v[k])) {
            wsel__set_error(err, err_size,
                            "%s: parameter %u ('%s'): %s %g is not an integer", path, i,
                            d->name, what[k], v[k]);
            return WSEL_EABI;
        }
        if (v[k] < lo || v[k] > hi) {
            wsel__set_error(
                err, err_size,
                "%s: parameter %u ('%s'): %s %g is outside [%g, %g] for its type", path,
                i, d->name, what[k], v[k], lo, hi);
            return WSEL_EABI;
        }
    }
    return 0;
}

static int32_t check_param(const char *path, const wsel_plugin *p, uint32_t i, char *err,
                           size_t err_size)
{
    const wsel_param_def *d = wsel__descriptor_param(p, i);
    if (d->name == NULL || !valid_name(d->name, 0)) {
        wsel__set_error(err, err_size, "%s: parameter %u: name %s", path, i,
                        d->name == NULL ? "is NULL" : "is not [a-z0-9_]+ (64 at most)");
        return WSEL_EABI;
    }
    for (uint32_t k = 0; k < i; k++) {
        if (strcmp(wsel__descriptor_param(p, k)->name, d->name) == 0) {
            wsel__set_error(err, err_size, "%s: parameter %u: name '%s' declared twice",
                            path, i, d->name);
            return WSEL_EABI;
        }
    }
    if (d->doc == NULL || d->doc[0] == '\0') {
        wsel__set_error(err, err_size, "%s: parameter %u ('%s'): no doc string", path, i,
                        d->name);
        return WSEL_EABI;
    }
    if (!isfinite(d->min_value) || !isfinite(d->default_value) ||
        !isfinite(d->max_value)) {
        wsel__set_error(err, err_size,
                        "%s: parameter %u ('%s'): min, default and max must be finite",
                        path, i, d->name);
        return WSEL_EABI;
    }
    if (!(d->min_value <= d->default_value && d->default_value <= d->max_value)) {
        wsel__set_error(
            err, err_size,
            "%s: parameter %u ('%s'): needs min <= default <= max, got %g, %g, "
            "%g",
            path, i, d->name, d->min_value, d->default_value, d->max_value);
        return WSEL_EABI;
    }
    return check_type_bounds(path, d, i, err, err_size);
}

static int32_t check_params(const char *path, const wsel_plugin *p, char *err,
                            size_t err_size)
{
    if (p->num_params == 0)
        return 0;
    if (p->num_params > WSEL_MAX_PARAMS) {
        wsel__set_error(err, err_size, "%s: %u parameters, at most %u are supported",
                        path, p->num_params, WSEL_MAX_PARAMS);
        return WSEL_EABI;
    }
    if (p->params == NULL) {
        wsel__set_error(err, err_size, "%s: %u parameters declared but the table is NULL",
                        path, p->num_params);
        return WSEL_EABI;
    }
    if (p->param_def_size < WSEL_PARAM_DEF_SIZE_1_0) {
        wsel__set_error(err, err_size,
                        "%s: param_def_size is %u bytes, ABI 1.0 needs at least %u", path,
                        p->param_def_size, WSEL_PARAM_DEF_SIZE_1_0);
        return WSEL_EABI;
    }
    for (uint32_t i = 0; i < p->num_params; i++) {
        int32_t rc = check_param(path, p, i, err, err_size);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int32_t wsel__descriptor_check(const char *path, const wsel_plugin *p, char *err,
                               size_t err_size)
{
    static const char *const text_field[3] = {"name", "version", "description"};
    const char *const text[3] = {p->name, p->version, p->description};
    for (int k = 0; k < 3; k++) {
        if (text[k] == NULL) {
            wsel__set_error(err, err_size, "%s: descriptor has no %s", path,
                            text_field[k]);
            return WSEL_EABI;
        }
    }
    if (!valid_name(p->name, 1)) {
        wsel__set_error(err, err_size, "%s: plugin name is not [a-z0-9_-]+ (64 at most)",
                        path);
        return WSEL_EABI;
    }
    static const char *const fn_field[3] = {"create", "select", "destroy"};
    const int missing[3] = {p->create == NULL, p->select == NULL, p->destroy == NULL};
    for (int k = 0; k < 3; k++) {
        if (missing[k]) {
            wsel__set_error(err, err_size, "%s: plugin %s has no %s function", path,
                            p->name, fn_field[k]);
            return WSEL_EABI;
        }
    }
    return check_params(path, p, err, err_size);
}
