// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_validate.c -- `wsel validate PLUGIN`: the conformance suite.
 *
 * Runs every check of validate_load.c, validate_select.c and
 * validate_state.c in its own child process and prints one line per check,
 * then a summary; exit 0 when every check passed (skips count as passes).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "json_write.h"
#include "plugin_path.h"
#include "validate.h"

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

/* The command line, parsed. */
typedef struct voptions {
    const char *spec;
    const char *config;
    int json;
    uint64_t seed;
    int have_seed;
    uint64_t timeout_s;
} voptions;

static int set_seed(void *target, const cli_value *v)
{
    voptions *o = target;
    if (!cli_parse_u64(v->text, 1, &o->seed))
        return cli_fail(v, "expected an integer");
    o->have_seed = 1;
    return CLI_OK;
}

#define OFF(field) offsetof(voptions, field)

static const cli_option validate_option_table[] = {
    {CLI_OPT("config", "JSON", "configuration for every instance", "{}"),
     CLI_AS_STR(OFF(config))},
    {CLI_OPT("json", NULL, "print the results as JSON", NULL), CLI_AS_FLAG(OFF(json))},
    {CLI_OPT("seed", "N",
             "seed for tables and requests (0x for hex); a failure\n"
             "prints the seed that reproduces it",
             "from the clock"),
     CLI_AS_CALL(set_seed)},
    /* A ceiling for hung plugins, not a performance bound: a check that
     * takes 1 s alone can take ten times that under a sanitizer on a
     * loaded machine, and must not be killed for it. */
    {CLI_OPT("timeout", "S", "seconds before a hung check is killed", "60"),
     CLI_AS_U64(OFF(timeout_s), 1, 3600), .flags = CLI_ANY_BASE},
};
static const cli_group validate_options = {NULL, CLI_TABLE(validate_option_table), 0};
static const cli_group *const validate_groups[] = {&validate_options};

static const cli_command validate_command = {
    .name = "wsel validate",
    .usage = "PLUGIN [--config JSON] [--json] [--seed N] [--timeout S]",
    .about = "Run the conformance checks on a plugin, each in its own process.\n"
             "PLUGIN is a bundled name (softmax, p2c, ...) or a path with '/'.",
    CLI_GROUPS(validate_groups),
    .operand_name = "PLUGIN",
    .operand_offset = OFF(spec),
};

/* The seed when none is given: from the clock and the process. */
static uint64_t clock_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^
           ((uint64_t)getpid() << 32);
}

/* The plugin's path (into path[PATH_MAX]) and the run's seed. -1, or the
 * exit status after a message. */
static int prepare(const voptions *o, vcontext *ctx, char *path)
{
    char err[2400];
    if (wsel_plugin_resolve(o->spec, path, PATH_MAX, err, sizeof(err)) < 0) {
        fprintf(stderr, "wsel: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    *ctx = (vcontext){
        .path = path, .config = o->config, .seed = o->have_seed ? o->seed : clock_seed()};
    return -1;
}

/*
 * Is the plugin refused before any check runs? Validate loads only what
 * the host would load, the same way: a file the trust rules refuse (file,
 * folders, ELF headers, library search path) is reported once and never
 * dlopen'ed, so its constructor never runs (wsel_trust_open only reads
 * the file); a refused --config is one failure, not one per check. The
 * check's name, or NULL, with the reason in refusal.
 */
static const char *refusal_of(const vcontext *ctx, unsigned timeout_s, char *refusal,
                              size_t size)
{
    int32_t fd = wsel_trust_open(ctx->path, NULL, refusal, size);
    if (fd < 0)
        return "trust_rules";
    close(fd);
    if (ctx->config == NULL)
        return NULL;
    static const vcheck config_check = {"config", check_config};
    vcheck_result res = {.status = VCHECK_PASS};
    vcheck_run_isolated(&config_check, ctx, timeout_s, &res);
    if (res.status != VCHECK_FAIL)
        return NULL;
    snprintf(refusal, size, "%s", res.detail);
    return "config";
}

/* A refusal as the run's one failure (after the JSON header). */
static void print_refusal(const vcontext *ctx, int json, const char *name,
                          const char *refusal)
{
    const char *why = strcmp(name, "config") != 0 ? "the host refuses this file"
                                                  : "the host refuses this configuration";
    if (json) {
        printf("{\"name\":\"%s\",\"passed\":false,\"skipped\":false,"
               "\"detail\":",
               name);
        wsel_json_write_string(stdout, refusal);
        printf(",\"seed\":%" PRIu64 "}],\"passed\":0,\"failed\":1,\"skipped\":0,"
               "\"refused\":true}\n",
               ctx->seed);
    } else {
        printf("FAIL %s: %s\n0 passed, 1 failed: %s; no other check ran\n", name, refusal,
               why);
    }
}

/* What the checks came to. */
typedef struct vtally {
    unsigned passed, failed, skipped;
    double p50, p99; /* the latency check's */
} vtally;

static void print_result(const vcontext *ctx, int json, const vcheck *check,
                         const vcheck_result *r, int first)
{
    if (json) {
        printf("%s{\"name\":\"%s\",\"passed\":%s,\"skipped\":%s,\"detail\":",
               first ? "" : ",", check->name, r->status == VCHECK_FAIL ? "false" : "true",
               r->status == VCHECK_SKIP ? "true" : "false");
        wsel_json_write_string(stdout, r->detail);
        printf(",\"seed\":%" PRIu64 "}", ctx->seed);
    } else if (r->status == VCHECK_FAIL) {
        printf("FAIL %s: %s (seed %" PRIu64 ")\n", check->name, r->detail, ctx->seed);
    } else if (r->status == VCHECK_SKIP) {
        printf("SKIP %s: %s\n", check->name, r->detail);
    } else if (r->detail[0]) {
        printf("PASS %s: %s\n", check->name, r->detail);
    } else {
        printf("PASS %s\n", check->name);
    }
    fflush(stdout);
}

/* Every check of every suite, each in its own child, printed as it ends. */
static void run_suites(const vcontext *ctx, int json, unsigned timeout_s, vtally *t)
{
    const vsuite suites[] = {
        {vchecks_load, vchecks_load_count},
        {vchecks_select, vchecks_select_count},
        {vchecks_state, vchecks_state_count},
    };
    for (size_t s = 0; s < sizeof(suites) / sizeof(suites[0]); s++) {
        for (unsigned c = 0; c < suites[s].count; c++) {
            const vcheck *check = &suites[s].checks[c];
            vcheck_result r;
            vcheck_run_isolated(check, ctx, timeout_s, &r);
            if (r.p50_ns > 0 || r.p99_ns > 0) {
                t->p50 = r.p50_ns;
                t->p99 = r.p99_ns;
            }
            print_result(ctx, json, check, &r, t->passed + t->failed + t->skipped == 0);
            t->passed += r.status == VCHECK_PASS;
            t->failed += r.status == VCHECK_FAIL;
            t->skipped += r.status == VCHECK_SKIP;
        }
    }
}

static void print_summary(const vcontext *ctx, int json, const vtally *t)
{
    if (json) {
        printf("],\"passed\":%u,\"failed\":%u,\"skipped\":%u,"
               "\"latency_ns\":{\"p50\":%.1f,\"p99\":%.1f}}\n",
               t->passed + t->skipped, t->failed, t->skipped, t->p50, t->p99);
        return;
    }
    printf("%u passed, %u failed", t->passed + t->skipped, t->failed);
    if (t->skipped)
        printf(" (%u skipped)", t->skipped);
    if (t->failed)
        printf("; reproduce with --seed %" PRIu64, ctx->seed);
    printf("\n");
}

int wsel_cmd_validate(int argc, char **argv)
{
    voptions o = {.timeout_s = 60};
    char path[PATH_MAX], refusal[1024] = "";
    int status = cli_parse(&validate_command, &o, argc, argv, refusal, sizeof(refusal));
    if (status != CLI_OK)
        return cli_report(&validate_command, status, refusal);
    vcontext ctx;
    status = prepare(&o, &ctx, path);
    if (status >= 0)
        return status;
    const char *refused =
        refusal_of(&ctx, (unsigned)o.timeout_s, refusal, sizeof(refusal));
    if (o.json) {
        printf("{\"plugin\":");
        wsel_json_write_string(stdout, path);
        printf(",\"seed\":%" PRIu64 ",\"checks\":[", ctx.seed);
    }
    if (refused != NULL) {
        print_refusal(&ctx, o.json, refused, refusal);
        return WSEL_EXIT_FAILURE;
    }
    vtally t = {0};
    run_suites(&ctx, o.json, (unsigned)o.timeout_s, &t);
    print_summary(&ctx, o.json, &t);
    return t.failed ? WSEL_EXIT_FAILURE : WSEL_EXIT_OK;
}
