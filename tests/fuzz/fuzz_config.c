// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_config.c -- wsel_config_parse against a real plugin's parameters.
 *
 * The plugin (by default tests/stress/stress_a.so, which declares one
 * parameter of every type; WSEL_FUZZ_PLUGIN overrides the path) is opened
 * once. Each input is a JSON text. Properties checked, abort() on any
 * breach:
 *   - success writes every value, each within its declared range and of
 *     its type (integer, 0/1, enum index), and nothing past num_params;
 *   - failure returns a negative WSEL_E*, writes no value and leaves a
 *     non-empty NUL-terminated message inside the buffer;
 *   - the message never runs past err_size, however small, and err may
 *     be NULL;
 *   - the same input gives the same answer.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wsel_host.h"

#ifndef WSEL_FUZZ_PLUGIN
#error "WSEL_FUZZ_PLUGIN must be defined by the build"
#endif

#define MAX_PARAMS 64
#define SENTINEL   -12345.678

static wsel_library *fuzz_lib;

static void breach(const char *what, const char *json)
{
    fprintf(stderr, "fuzz_config: %s (input: %.200s)\n", what, json);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *path = getenv("WSEL_FUZZ_PLUGIN");
    char err[512] = "";
    int32_t rc;

    (void)argc;
    (void)argv;
    if (!path || !*path)
        path = WSEL_FUZZ_PLUGIN;
    rc = wsel_library_open(path, NULL, &fuzz_lib, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "fuzz_config: cannot open %s: %s\n", path, err);
        abort();
    }
    if (wsel_library_plugin(fuzz_lib)->num_params >= MAX_PARAMS) {
        fprintf(stderr, "fuzz_config: %s has too many parameters\n", path);
        abort();
    }
    return 0;
}

static int value_fits(const wsel_param_def *def, double v)
{
    uint32_t choices = 0;

    if (!isfinite(v) || v < def->min_value || v > def->max_value)
        return 0;
    switch (def->type) {
    case WSEL_PARAM_INT:
        return v == floor(v);
    case WSEL_PARAM_BOOL:
        return v == 0.0 || v == 1.0;
    case WSEL_PARAM_ENUM:
        while (def->choices && def->choices[choices])
            choices++;
        return v == floor(v) && v >= 0 && v < choices;
    default:
        return 1;
    }
}

static void check_small_buffers(const char *json, int32_t expected)
{
    double values[MAX_PARAMS];
    char err[64];

    for (size_t size = 0; size <= 8; size++) {
        memset(err, 0xa5, sizeof err);
        if (wsel_config_parse(fuzz_lib, json, values, size ? err : NULL, size) !=
            expected)
            breach("the answer depends on the error buffer", json);
        for (size_t i = size; i < sizeof err; i++)
            if ((unsigned char)err[i] != 0xa5)
                breach("the message ran past err_size", json);
        if (expected != 0 && size > 0 && memchr(err, '\0', size) == NULL)
            breach("the message is not NUL-terminated within err_size", json);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint32_t n = wsel_library_plugin(fuzz_lib)->num_params;
    double values[MAX_PARAMS + 1], again[MAX_PARAMS + 1];
    char err[256];
    char *json;
    int32_t rc;

    json = malloc(size + 1);
    if (!json)
        return 0;
    memcpy(json, data, size);
    json[size] = '\0';

    for (uint32_t i = 0; i <= n; i++)
        values[i] = again[i] = SENTINEL;
    memset(err, 0, sizeof err);
    rc = wsel_config_parse(fuzz_lib, json, values, err, sizeof err);
    if (values[n] != SENTINEL)
        breach("a value was written past num_params", json);
    if (rc == 0) {
        for (uint32_t i = 0; i < n; i++)
            if (!value_fits(wsel_library_param(fuzz_lib, i), values[i]))
                breach("an accepted value is outside its declared type or range", json);
    } else {
        if (rc > 0 || rc <= -1000)
            breach("the return is neither 0 nor a WSEL_E* code", json);
        for (uint32_t i = 0; i < n; i++)
            if (values[i] != SENTINEL)
                breach("a refused configuration wrote a value", json);
        if (err[0] == '\0' || memchr(err, '\0', sizeof err) == NULL)
            breach("a refusal left no NUL-terminated message", json);
    }

    if (wsel_config_parse(fuzz_lib, json, again, NULL, 0) != rc)
        breach("the same input gave another answer", json);
    if (rc == 0 && memcmp(values, again, n * sizeof values[0]) != 0)
        breach("the same input gave other values", json);
    check_small_buffers(json, rc);

    free(json);
    return 0;
}
