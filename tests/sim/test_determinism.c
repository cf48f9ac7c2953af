// SPDX-License-Identifier: Apache-2.0
/*
 * test_determinism.c -- the same inputs and seed give byte-identical JSON;
 * another seed gives another stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "report.h"
#include "sim_fixture.h"
#include "source.h"

/* Run a small shared-prefix workload with the stand-in policy; returns
 * the JSON report (malloc'd). */
static char *run_json(uint64_t seed)
{
    sim_cluster c;
    sim_cluster_default(&c);
    c.num_workers = 3;
    c.dp[0] = 4;
    c.dp[1] = 2;
    c.dp[2] = 1;
    c.kv_blocks = 512;
    sim_router_config rc = {.overlap_weight = 1.0,
                            .kv_event_delay_ns = 2000000, /* 2 ms stale KV events */
                            .affinity_blocks = 4};
    sim_workload_config w;
    sim_workload_default(&w, SIM_WORKLOAD_SHARED_PREFIX);
    w.groups = 8;
    w.prompts = 8;
    w.rate = 30;
    w.seed = seed;
    char err[512];
    sim_source *src;
    assert_int_equal(sim_source_open_workload(&src, &w, c.block_size, err, sizeof(err)),
                     0);
    standin st = {0};
    sim_policy policy;
    standin_policy(&st, &policy);
    sim_run_args args = {.cluster = &c,
                         .router = &rc,
                         .source = &sim_source_ops_default,
                         .source_ctx = src,
                         .policy = &policy,
                         .first_label = "standin"};
    sim_report_row row;
    memset(&row, 0, sizeof(row));
    row.plugin = "standin";
    if (sim_run(&args, &row.result, err, sizeof(err)) != 0)
        fail_msg("sim_run: %s", err);
    sim_source_close(src);
    assert_int_equal(row.result.total.requests, 64);
    assert_int_equal(row.result.total.lost_requests, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    sim_report_input in = {NULL, "shared-prefix", 512, seed, 0, w.rate};
    sim_report_json(f, &in, &c, &rc, &row, 1, 1);
    fclose(f);
    return buf;
}

static void test_same_seed_gives_identical_json(void **state)
{
    (void)state;
    char *a = run_json(7), *b = run_json(7), *c = run_json(8);
    assert_string_equal(a, b);
    assert_true(strcmp(a, c) != 0);
    free(a);
    free(b);
    free(c);
}

static char *run_command(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        fwrite(chunk, 1, n, out);
    fclose(out);
    assert_int_equal(pclose(p), 0);
    return buf;
}

/* Through the real host and plugins, when the build tree has them:
 * --no-timing zeroes the only measured figures (select_ns). */
static void test_wsel_sim_json_is_identical_across_runs(void **state)
{
    (void)state;
    const char *build = getenv("WSEL_BUILD_DIR");
    char wsel[4096], plugin[4096], cmd[9000];
    snprintf(wsel, sizeof(wsel), "%s/bin/wsel", build ? build : ".");
    char plugin2[4096];
    snprintf(plugin, sizeof(plugin), "%s/plugins/hysteresis.so", build ? build : ".");
    snprintf(plugin2, sizeof(plugin2), "%s/plugins/softmax.so", build ? build : ".");
    if (!build || access(wsel, X_OK) != 0 || access(plugin, R_OK) != 0 ||
        access(plugin2, R_OK) != 0) {
        print_message("wsel or the bundled plugins not built; skipping\n");
        skip();
    }
    snprintf(
        cmd, sizeof(cmd),
        "'%s' sim --json --no-timing --no-progress --plugin softmax --plugin hysteresis "
        "--groups 16 --prompts 8 --seed 3",
        wsel);
    char *a = run_command(cmd), *b = run_command(cmd);
    assert_true(strlen(a) > 100);
    assert_string_equal(a, b);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_gives_identical_json),
        cmocka_unit_test(test_wsel_sim_json_is_identical_across_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
