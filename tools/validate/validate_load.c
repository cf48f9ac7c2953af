// SPDX-License-Identifier: Apache-2.0
/*
 * validate_load.c -- conformance checks up to a working instance: the file
 * passes the trust rules and loads, exports one symbol, carries a
 * well-formed descriptor and parameter table, creates with every parameter
 * at its bounds, and has its bad configurations refused.
 */
#include "validate.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void check_trust(const vcontext *ctx, vcheck_result *res)
{
    char err[512] = "";
    int32_t fd = wsel_trust_open(ctx->path, NULL, err, sizeof(err));
    if (fd < 0) {
        vfail(res, "%s", err);
        return;
    }
    close(fd);
}

static void check_load(const vcontext *ctx, vcheck_result *res)
{
    char err[512] = "";
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(ctx->path, NULL, &lib, err, sizeof(err));
    if (rc < 0) {
        vfail(res, "wsel_library_open returned %s: %s", wsel_errname(rc), err);
        return;
    }
    wsel_library_close(lib);
}

static void check_exports(const vcontext *ctx, vcheck_result *res)
{
    char err[512] = "", names[400] = "";
    uint32_t count = 0;
    if (velf_count_exports(ctx->path, &count, names, sizeof(names), err, sizeof(err)) <
        0) {
        vfail(res, "%s", err);
        return;
    }
    if (count != 1 || strcmp(names, WSEL_PLUGIN_ENTRY_SYMBOL) != 0)
        vfail(res, "exports %u symbols (%s); expected exactly " WSEL_PLUGIN_ENTRY_SYMBOL,
              count, names[0] ? names : "none");
}

/* Load the file the way the host does (the trust rules on one descriptor,
 * then dlopen through /proc/self/fd) and find the descriptor without the
 * host loader's descriptor checks, so they can be reported one by one. A
 * file the host refuses is never loaded. */
static const wsel_plugin *raw_descriptor(const vcontext *ctx, vcheck_result *res)
{
    char err[512] = "";
    int32_t fd = wsel_trust_open(ctx->path, NULL, err, sizeof(err));
    if (fd < 0) {
        vfail(res, "not loaded, the host refuses it: %s", err);
        return NULL;
    }
    /* The descriptor stays open until the child exits, so the name below
     * never names another file. */
    char fd_path[64];
    snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", (int)fd);
    void *handle = dlopen(fd_path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        vfail(res, "dlopen: %s", dlerror());
        return NULL;
    }
    const wsel_plugin *p = dlsym(handle, WSEL_PLUGIN_ENTRY_SYMBOL);
    if (p == NULL)
        vfail(res, "no symbol " WSEL_PLUGIN_ENTRY_SYMBOL " in %s", ctx->path);
    return p; /* the handle stays open until the child exits */
}

static void check_abi_version(const vcontext *ctx, vcheck_result *res)
{
    const wsel_plugin *p = raw_descriptor(ctx, res);
    if (p == NULL)
        return;
    if (p->abi_major != WSEL_ABI_MAJOR)
        vfail(res, "built for ABI %u.%u; this host speaks major %u", p->abi_major,
              p->abi_minor, WSEL_ABI_MAJOR);
}

static int is_name(const char *s, int allow_dash)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              (allow_dash && c == '-')))
            return 0;
    }
    return 1;
}

static void check_descriptor(const vcontext *ctx, vcheck_result *res)
{
    const wsel_plugin *p = raw_descriptor(ctx, res);
    if (p == NULL)
        return;
    if (p->struct_size < WSEL_PLUGIN_SIZE_1_0) {
        vfail(res, "struct_size %u is shorter than the 1.0 descriptor (%u)",
              p->struct_size, WSEL_PLUGIN_SIZE_1_0);
        return;
    }
    if (p->create == NULL || p->destroy == NULL || p->select == NULL) {
        vfail(res, "required function missing:%s%s%s", p->create ? "" : " create",
              p->destroy ? "" : " destroy", p->select ? "" : " select");
        return;
    }
    if (!is_name(p->name, 1))
        vfail(res, "name %s%s%s is not [a-z0-9_-]+", p->name ? "'" : "",
              p->name ? p->name : "NULL", p->name ? "'" : "");
    else if (p->version == NULL || p->version[0] == '\0')
        vfail(res, "version is missing");
    else if (p->description == NULL || p->description[0] == '\0')
        vfail(res, "description is missing");
    else if (p->abi_minor == 0 &&
             (p->capabilities & ~(WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS)))
        vfail(res, "capabilities 0x%x has bits unknown to ABI 1.0", p->capabilities);
    else if (p->num_params > 0 &&
             (p->params == NULL || p->param_def_size < WSEL_PARAM_DEF_SIZE_1_0))
        vfail(res, "%u parameters but params is %s and param_def_size %u (>= %u needed)",
              p->num_params, p->params ? "set" : "NULL", p->param_def_size,
              WSEL_PARAM_DEF_SIZE_1_0);
}

static int is_integral(double v)
{
    return isfinite(v) && v == floor(v);
}

/* Check one parameter definition; `i` and `p` for the messages. */
static void check_one_param(const wsel_plugin *p, uint32_t i, vcheck_result *res)
{
    const wsel_param_def *d =
        (const wsel_param_def *)((const char *)p->params + (size_t)i * p->param_def_size);
    const char *name = d->name ? d->name : "NULL";
    if (!is_name(d->name, 0)) {
        vfail(res, "parameter %u: name '%s' is not [a-z0-9_]+", i, name);
        return;
    }
    for (uint32_t j = 0; j < i; j++) {
        const wsel_param_def *o = (const wsel_param_def *)((const char *)p->params +
                                                           (size_t)j * p->param_def_size);
        if (o->name && strcmp(o->name, d->name) == 0)
            vfail(res, "parameter '%s' declared twice (entries %u and %u)", name, j, i);
    }
    if (d->doc == NULL || d->doc[0] == '\0')
        vfail(res, "parameter '%s' has no doc", name);
    if (d->reserved0 != 0)
        vfail(res, "parameter '%s': reserved0 is %u, must be 0", name, d->reserved0);
    if (!(d->min_value <= d->max_value))
        vfail(res, "parameter '%s': min %g > max %g", name, d->min_value, d->max_value);
    if (!(d->default_value >= d->min_value && d->default_value <= d->max_value))
        vfail(res, "parameter '%s': default %g outside [%g, %g]", name, d->default_value,
              d->min_value, d->max_value);
    switch (d->type) {
    case WSEL_PARAM_DOUBLE:
        if (!isfinite(d->default_value))
            vfail(res, "parameter '%s': default is not finite", name);
        break;
    case WSEL_PARAM_INT:
        if (!is_integral(d->default_value))
            vfail(res, "parameter '%s' (int): default %g is not an integer", name,
                  d->default_value);
        break;
    case WSEL_PARAM_BOOL:
        if (d->min_value != 0 || d->max_value != 1)
            vfail(res, "parameter '%s' (bool): bounds [%g, %g], must be [0, 1]", name,
                  d->min_value, d->max_value);
        break;
    case WSEL_PARAM_ENUM: {
        if (d->choices == NULL) {
            vfail(res, "parameter '%s' (enum): choices is NULL", name);
            break;
        }
        uint32_t k = 0;
        while (k < 1000 && d->choices[k] != NULL)
            k++;
        if (k == 0 || d->min_value < 0 || d->max_value > (double)(k - 1) ||
            !is_integral(d->default_value))
            vfail(res,
                  "parameter '%s' (enum): %u choices but bounds [%g, %g], default %g",
                  name, k, d->min_value, d->max_value, d->default_value);
        break;
    }
    case WSEL_PARAM_JSON: /* ABI 1.1 */
        if (d->min_value != 0 || d->default_value != 0 || d->max_value != 0)
            vfail(res, "parameter '%s' (json): min, default and max must be 0", name);
        break;
    default:
        vfail(res, "parameter '%s': unknown type %u", name, d->type);
    }
    if (d->type != WSEL_PARAM_ENUM && d->choices != NULL)
        vfail(res, "parameter '%s': choices set on a non-enum parameter", name);
}

static void check_params(const vcontext *ctx, vcheck_result *res)
{
    const wsel_plugin *p = raw_descriptor(ctx, res);
    if (p == NULL)
        return;
    /* The loader's own limits first: one source of truth (abi/wsel.h,
     * "Limits"), then the details one by one. */
    char err[512] = "";
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(ctx->path, NULL, &lib, err, sizeof(err));
    if (rc == WSEL_EABI) {
        vfail(res, "the loader refuses it: %s", err);
        return;
    }
    wsel_library_close(lib);
    if (p->struct_size < WSEL_PLUGIN_SIZE_1_0) {
        vfail(res, "descriptor too short to hold a parameter table");
        return;
    }
    if (p->num_params == 0)
        return;
    if (p->params == NULL || p->param_def_size < WSEL_PARAM_DEF_SIZE_1_0) {
        vfail(res, "params %s, param_def_size %u", p->params ? "set" : "NULL",
              p->param_def_size);
        return;
    }
    for (uint32_t i = 0; i < p->num_params; i++)
        check_one_param(p, i, res);
}

static void check_create_defaults(const vcontext *ctx, vcheck_result *res)
{
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    vtable vt;
    uint32_t dp[4] = {1, 2, 4, 1};
    if (vtable_init(&vt, 4, dp, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    vselect_all_valid(vi.plugin, vi.instance, &vt.t, ctx, 16, 0, "an 8-row table", res);
    vtable_free(&vt);
out_close_instance:
    vinstance_close(&vi);
}

/* Create with parameter i at `value`, select a few times, destroy. */
static void try_param_value(const vinstance *vi, uint32_t i, double value,
                            const char *which, const vtable *vt, const vcontext *ctx,
                            vcheck_result *res)
{
    const wsel_param_def *d = wsel_library_param(vi->lib, i);
    double *values = calloc(vi->plugin->num_params, sizeof(double));
    if (values == NULL) {
        vfail(res, "out of memory");
        return;
    }
    memcpy(values, vi->params, vi->plugin->num_params * sizeof(double));
    values[i] = value;
    void *instance = NULL;
    int32_t rc = vinstance_create(vi, values, &instance);
    if (rc < 0) {
        vfail(res, "create() with '%s' at its %s (%g) returned %d (%s)", d->name, which,
              value, rc, wsel_errname(rc));
        goto out_free_values;
    }
    char what[160];
    snprintf(what, sizeof(what), "an 8-row table with '%s' at its %s (%g)", d->name,
             which, value);
    /* At a bound a policy may refuse a table it cannot serve (e.g. more
     * workers than it was sized for): errors are tolerated, bad rows not. */
    vselect_all_valid(vi->plugin, instance, &vt->t, ctx, 8, 1, what, res);
    vi->plugin->destroy(instance);
out_free_values:
    free(values);
}

static void check_create_at_bounds(const vcontext *ctx, vcheck_result *res)
{
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    if (vi.plugin->num_params == 0) {
        vskip(res, "no parameters");
        goto out_close_instance;
    }
    vtable vt;
    uint32_t dp[4] = {1, 2, 4, 1};
    if (vtable_init(&vt, 4, dp, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    for (uint32_t i = 0; i < vi.plugin->num_params && res->status != VCHECK_FAIL; i++) {
        const wsel_param_def *d = wsel_library_param(vi.lib, i);
        try_param_value(&vi, i, d->min_value, "min", &vt, ctx, res);
        try_param_value(&vi, i, d->max_value, "max", &vt, ctx, res);
    }
    vtable_free(&vt);
out_close_instance:
    vinstance_close(&vi);
}

/* The host must refuse `json` with WSEL_ECONFIG and a message that
 * mentions `must_name` (when not NULL). */
static void expect_refused(const wsel_library *lib, const char *json,
                           const char *must_name, double *values, vcheck_result *res)
{
    char err[512] = "";
    int32_t rc = wsel_config_parse(lib, json, values, err, sizeof(err));
    if (rc >= 0)
        vfail(res, "config %s was accepted", json);
    else if (rc != WSEL_ECONFIG)
        vfail(res, "config %s refused with %s, expected WSEL_ECONFIG", json,
              wsel_errname(rc));
    else if (must_name != NULL && strstr(err, must_name) == NULL)
        vfail(res, "config %s refused, but the message does not name '%s': %s", json,
              must_name, err);
}

static void check_bad_config_refused(const vcontext *ctx, vcheck_result *res)
{
    char err[512] = "";
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(ctx->path, NULL, &lib, err, sizeof(err));
    if (rc < 0) {
        vfail(res, "cannot load: %s", err);
        return;
    }
    const wsel_plugin *p = wsel_library_plugin(lib);
    double *values = calloc(p->num_params + 1u, sizeof(double));
    if (values == NULL) {
        vfail(res, "out of memory");
        goto out_close_lib;
    }
    expect_refused(lib, "{\"wsel_validate_no_such_key\": 1}", "wsel_validate_no_such_key",
                   values, res);
    expect_refused(lib, "{", NULL, values, res);
    expect_refused(lib, "[1, 2]", NULL, values, res);
    char json[600];
    for (uint32_t i = 0; i < p->num_params; i++) {
        const wsel_param_def *d = wsel_library_param(lib, i);
        /* A JSON parameter takes an array: a number is its wrong type. */
        snprintf(json, sizeof(json), d->type == WSEL_PARAM_JSON ? "{\"%s\": 1}"
                                                                : "{\"%s\": [1, 2]}",
                 d->name);
        expect_refused(lib, json, d->name, values, res);
        if (d->type == WSEL_PARAM_ENUM) {
            snprintf(json, sizeof(json), "{\"%s\": \"wsel_validate_no_such_choice\"}",
                     d->name);
            expect_refused(lib, json, d->name, values, res);
        } else if (d->type != WSEL_PARAM_BOOL) {
            snprintf(json, sizeof(json), "{\"%s\": \"text\"}", d->name);
            expect_refused(lib, json, d->name, values, res);
        }
        if (d->type == WSEL_PARAM_DOUBLE || d->type == WSEL_PARAM_INT) {
            if (d->max_value < 1e300) {
                snprintf(json, sizeof(json), "{\"%s\": %.17g}", d->name,
                         d->max_value + fmax(1.0, fabs(d->max_value)));
                expect_refused(lib, json, d->name, values, res);
            }
            if (d->min_value > -1e300) {
                snprintf(json, sizeof(json), "{\"%s\": %.17g}", d->name,
                         d->min_value - fmax(1.0, fabs(d->min_value)));
                expect_refused(lib, json, d->name, values, res);
            }
        }
    }
    free(values);
out_close_lib:
    wsel_library_close(lib);
}

const vcheck vchecks_load[] = {
    {"trust_rules", check_trust},
    {"loads", check_load},
    {"exports_one_symbol", check_exports},
    {"abi_version", check_abi_version},
    {"descriptor", check_descriptor},
    {"param_table", check_params},
    {"create_defaults", check_create_defaults},
    {"create_params_at_bounds", check_create_at_bounds},
    {"bad_config_refused", check_bad_config_refused},
};
const unsigned vchecks_load_count = sizeof(vchecks_load) / sizeof(vchecks_load[0]);
