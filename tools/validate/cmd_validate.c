// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_validate.c -- `wsel validate PLUGIN`: the conformance suite.
 *
 * Runs every check of validate_load.c, validate_select.c and
 * validate_state.c in its own child process and prints one line per check,
 * then a summary; exit 0 when every check passed (skips count as passes).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "json_write.h"
#include "plugin_path.h"
#include "validate.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wsel validate PLUGIN [--config JSON] [--json] [--seed N] "
            "[--timeout S]\n\n"
            "Run the conformance checks on a plugin, each in its own process.\n\n"
            "  PLUGIN         a bundled name (softmax, p2c, ...) or a path with '/'\n"
            "  --config JSON  configuration for every instance (default {})\n"
            "  --json         print the results as JSON\n"
            "  --seed N       seed for tables and requests (default: from the clock);\n"
            "                 a failure prints the seed that reproduces it\n"
            "  --timeout S    seconds before a hung check is killed (default 60)\n");
}

/* --config is parsed once, before the suite: a refused configuration is
 * one failure, not one per check that creates an instance. In a child,
 * like every check, since it loads the plugin. */
static void check_config(const vcontext *ctx, vcheck_result *res)
{
    char err[512] = "";
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(ctx->path, NULL, &lib, err, sizeof(err));
    if (rc < 0) {
        vfail(res, "cannot load: %s", err);
        return;
    }
    double *values = calloc(wsel_library_plugin(lib)->num_params + 1u, sizeof(double));
    if (values == NULL) {
        vfail(res, "out of memory");
        goto out_close_lib;
    }
    rc = wsel_config_parse(lib, ctx->config, values, err, sizeof(err));
    if (rc < 0)
        vfail(res, "%s", err);
    free(values);
out_close_lib:
    wsel_library_close(lib);
}

typedef struct vsuite {
    const vcheck *checks;
    unsigned count;
} vsuite;

/* A decimal (or 0x) number and nothing else: strtoull alone would skip
 * leading space and take ' -1' as 2^64 - 1. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (s[0] < '0' || s[0] > '9')
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || *end != '\0' || errno != 0)
        return -1;
    *out = v;
    return 0;
}

int wsel_cmd_validate(int argc, char **argv)
{
    const char *spec = NULL;
    vcontext ctx = {.path = NULL, .config = NULL, .seed = 0};
    int json = 0, have_seed = 0;
    /* A ceiling for hung plugins, not a performance bound: a check that
     * takes 1 s alone can take ten times that under a sanitizer on a
     * loaded machine, and must not be killed for it. */
    uint64_t timeout_s = 60;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return WSEL_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--config") == 0 && i + 1 < argc) {
            ctx.config = argv[++i];
        } else if (strcmp(a, "--seed") == 0 && i + 1 < argc) {
            if (parse_u64(argv[++i], &ctx.seed) < 0) {
                fprintf(stderr, "wsel validate: --seed '%s' is not a number\n", argv[i]);
                return WSEL_EXIT_USAGE;
            }
            have_seed = 1;
        } else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
            if (parse_u64(argv[++i], &timeout_s) < 0 || timeout_s == 0 ||
                timeout_s > 3600) {
                fprintf(stderr, "wsel validate: --timeout '%s' is not 1..3600 s\n",
                        argv[i]);
                return WSEL_EXIT_USAGE;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "wsel validate: unknown option '%s'\n", a);
            usage(stderr);
            return WSEL_EXIT_USAGE;
        } else if (spec == NULL) {
            spec = a;
        } else {
            fprintf(stderr, "wsel validate: one PLUGIN only ('%s' is extra)\n", a);
            return WSEL_EXIT_USAGE;
        }
    }
    if (spec == NULL) {
        usage(stderr);
        return WSEL_EXIT_USAGE;
    }
    char path[PATH_MAX], err[2400];
    if (wsel_plugin_resolve(spec, path, sizeof(path), err, sizeof(err)) < 0) {
        fprintf(stderr, "wsel: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    ctx.path = path;
    if (!have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ctx.seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^
                   ((uint64_t)getpid() << 32);
    }

    /* Validate loads only what the host would load, the same way: a file
     * the trust rules refuse (file, folders, ELF headers, library search
     * path) is reported once and never dlopen'ed, so its constructor never
     * runs. wsel_trust_open only reads the file. */
    char refusal[1024] = "";
    int32_t fd = wsel_trust_open(path, NULL, refusal, sizeof(refusal));
    if (fd >= 0)
        close(fd);

    const vsuite suites[] = {
        {vchecks_load, vchecks_load_count},
        {vchecks_select, vchecks_select_count},
        {vchecks_state, vchecks_state_count},
    };
    unsigned passed = 0, failed = 0, skipped = 0;
    double p50 = 0, p99 = 0;
    if (json) {
        printf("{\"plugin\":");
        wsel_json_write_string(stdout, path);
        printf(",\"seed\":%" PRIu64 ",\"checks\":[", ctx.seed);
    }
    vcheck_result config_res = {.status = VCHECK_PASS};
    if (fd >= 0 && ctx.config != NULL) {
        static const vcheck config_check = {"config", check_config};
        vcheck_run_isolated(&config_check, &ctx, (unsigned)timeout_s, &config_res);
        if (config_res.status == VCHECK_FAIL)
            snprintf(refusal, sizeof(refusal), "%s", config_res.detail);
    }
    if (fd < 0 || config_res.status == VCHECK_FAIL) {
        const char *name = fd < 0 ? "trust_rules" : "config";
        const char *why =
            fd < 0 ? "the host refuses this file" : "the host refuses this configuration";
        if (json) {
            printf("{\"name\":\"%s\",\"passed\":false,\"skipped\":false,"
                   "\"detail\":",
                   name);
            wsel_json_write_string(stdout, refusal);
            printf(",\"seed\":%" PRIu64 "}],\"passed\":0,\"failed\":1,\"skipped\":0,"
                   "\"refused\":true}\n",
                   ctx.seed);
        } else {
            printf("FAIL %s: %s\n0 passed, 1 failed: %s; no other check ran\n", name,
                   refusal, why);
        }
        return WSEL_EXIT_FAILURE;
    }
    for (size_t s = 0; s < sizeof(suites) / sizeof(suites[0]); s++) {
        for (unsigned c = 0; c < suites[s].count; c++) {
            const vcheck *check = &suites[s].checks[c];
            vcheck_result r;
            vcheck_run_isolated(check, &ctx, (unsigned)timeout_s, &r);
            if (r.p50_ns > 0 || r.p99_ns > 0) {
                p50 = r.p50_ns;
                p99 = r.p99_ns;
            }
            passed += r.status == VCHECK_PASS;
            failed += r.status == VCHECK_FAIL;
            skipped += r.status == VCHECK_SKIP;
            if (json) {
                printf("%s{\"name\":\"%s\",\"passed\":%s,\"skipped\":%s,\"detail\":",
                       passed + failed + skipped > 1 ? "," : "", check->name,
                       r.status == VCHECK_FAIL ? "false" : "true",
                       r.status == VCHECK_SKIP ? "true" : "false");
                wsel_json_write_string(stdout, r.detail);
                printf(",\"seed\":%" PRIu64 "}", ctx.seed);
            } else if (r.status == VCHECK_FAIL) {
                printf("FAIL %s: %s (seed %" PRIu64 ")\n", check->name, r.detail,
                       ctx.seed);
            } else if (r.status == VCHECK_SKIP) {
                printf("SKIP %s: %s\n", check->name, r.detail);
            } else if (r.detail[0]) {
                printf("PASS %s: %s\n", check->name, r.detail);
            } else {
                printf("PASS %s\n", check->name);
            }
            fflush(stdout);
        }
    }
    if (json) {
        printf("],\"passed\":%u,\"failed\":%u,\"skipped\":%u,"
               "\"latency_ns\":{\"p50\":%.1f,\"p99\":%.1f}}\n",
               passed + skipped, failed, skipped, p50, p99);
    } else {
        printf("%u passed, %u failed", passed + skipped, failed);
        if (skipped)
            printf(" (%u skipped)", skipped);
        if (failed)
            printf("; reproduce with --seed %" PRIu64, ctx.seed);
        printf("\n");
    }
    return failed ? WSEL_EXIT_FAILURE : WSEL_EXIT_OK;
}
