// SPDX-License-Identifier: Apache-2.0
/*
 * test_cmd_eval.c -- `wsel eval` as a command: usage errors name the
 * option, and a tiny evaluation (64 generated requests, 2 policies, 2
 * seeds, 2 loads) prints the structure docs/evaluation.md describes, in
 * the table and in JSON. Runs the built binary; skips when it is absent.
 * Nothing here depends on timing: only the structure is checked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "metric_table.h"
#include "sim_fixture.h"

/* Run `wsel eval ARGS` (sim_fixture.c). */
static int run_eval(const char *args, char **out)
{
    return fixture_run_wsel("eval", args, out);
}

#define TINY                                                                             \
    "--workload shared-prefix --groups 4 --prompts 16 --workers 2 --dp 1 "               \
    "--plugin softmax --plugin roundrobin --seeds 2 --loads 50,90 --jobs 2"

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

static void test_usage_errors_name_the_option(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run_eval("--help", &out), 0);
    assert_non_null(strstr(out, "--seeds N"));
    assert_non_null(strstr(out, "--dp-mode")); /* wsel sim's options are named */
    free(out);
    assert_int_equal(run_eval("--seeds 1", &out), 2);
    assert_non_null(strstr(out, "--seeds '1'"));
    free(out);
    assert_int_equal(run_eval("--loads 30,x", &out), 2);
    assert_non_null(strstr(out, "--loads '30,x'"));
    free(out);
    assert_int_equal(run_eval("--metrics ttft,nope", &out), 2);
    assert_non_null(strstr(out, "unknown metric 'ttft'"));
    free(out);
    assert_int_equal(run_eval("--dp-mode sideways", &out), 2);
    assert_non_null(strstr(out, "--dp-mode 'sideways'"));
    free(out);
}

/* The search runs softmax until its mean TTFT doubles; the JSON has the
 * saturation, both loads, both policies with every metric's mean, CI,
 * paired difference, significance and one value per seed. */
static void test_tiny_eval_json_has_every_part(void **state)
{
    (void)state;
    char *out;
    int rc = run_eval(TINY " --json", &out);
    if (rc != 0)
        fail_msg("wsel eval failed:\n%s", out);
    assert_non_null(strstr(out, "\"saturation\":{\"speedup\":"));
    assert_non_null(strstr(out, "\"given\":false"));
    assert_non_null(strstr(out, "\"seeds\":[1,2]"));
    assert_non_null(strstr(out, "{\"percent\":50,"));
    assert_non_null(strstr(out, "{\"percent\":90,"));
    assert_int_equal(count(out, "{\"plugin\":\"softmax\""), 2);
    assert_int_equal(count(out, "{\"plugin\":\"roundrobin\""), 2);
    /* 2 loads x 2 policies, one entry per metric each. */
    assert_int_equal(count(out, "\"flicker_rate\":{\"mean\":"), 4);
    assert_int_equal(count(out, "\"prefix_copies\":{\"mean\":"), 4);
    assert_int_equal(count(out, "\"key_move_rate\":{\"mean\":"), 4);
    assert_non_null(strstr(out, "\"herding_index\":{\"mean\":"));
    int eval_metrics = 0;
    for (int k = 0; k < SIM_NUM_METRICS; k++)
        eval_metrics += (sim_metric_table[k].flags & SIM_MF_EVAL) != 0;
    assert_int_equal(count(out, "\"significant\":"), 4 * eval_metrics);
    assert_non_null(strstr(out, "\"ci95\":"));
    assert_non_null(strstr(out, "\"targets\":["));
    free(out);
}

/* With --saturation the search is one unloaded run; the table has one
 * section per load, a row per policy and mean +- CI cells. */
static void test_tiny_eval_table_has_a_section_per_load(void **state)
{
    (void)state;
    char *out;
    int rc = run_eval(TINY " --saturation 2 --metrics kv_hit_rate,ttft_p99_ms", &out);
    if (rc != 0)
        fail_msg("wsel eval failed:\n%s", out);
    assert_non_null(strstr(out, "saturation: speedup 2 "));
    assert_non_null(strstr(out, "50 % of saturation (speedup 1), 2 seeds:"));
    assert_non_null(strstr(out, "90 % of saturation (speedup 1.8), 2 seeds:"));
    assert_int_equal(count(out, "| policy | hit% | ttft_p99_ms |"), 2);
    assert_int_equal(count(out, "| softmax | "), 2);
    assert_int_equal(count(out, "| roundrobin | "), 2);
    assert_non_null(strstr(out, " ±"));
    assert_non_null(strstr(out, "paired t"));
    assert_non_null(strstr(out, "8 runs + 1 search runs"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors_name_the_option),
        cmocka_unit_test(test_tiny_eval_json_has_every_part),
        cmocka_unit_test(test_tiny_eval_table_has_a_section_per_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
