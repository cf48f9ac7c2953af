// SPDX-License-Identifier: Apache-2.0
/*
 * test_cmd_sim.c -- `wsel sim` as a command: exit codes, messages and the
 * --analyze JSON. Runs the built binary; skips politely when it is absent.
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

#include "sim_fixture.h"

/* Run `wsel sim ARGS` (sim_fixture.c). */
static int run_sim(const char *args, char **out)
{
    return fixture_run_wsel("sim", args, out);
}

static void test_help_lists_every_option_with_its_default(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run_sim("--help", &out), 0);
    assert_non_null(strstr(out, "--kv-event-delay-ms MS"));
    assert_non_null(strstr(out, "[default: 8192]"));
    assert_non_null(strstr(out, "--switch-at"));
    free(out);
}

static void test_bad_usage_exits_2_naming_the_option(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run_sim("--frobnicate", &out), 2);
    assert_non_null(strstr(out, "--frobnicate"));
    free(out);
    assert_int_equal(run_sim("--workers 3 --dp 2,2", &out), 2);
    assert_non_null(strstr(out, "--dp lists 2 sizes but --workers is 3"));
    free(out);
    assert_int_equal(run_sim("--block-size 0", &out), 2);
    assert_non_null(strstr(out, "--block-size"));
    free(out);
}

static void test_bad_trace_line_exits_1_with_file_and_line(void **state)
{
    (void)state;
    /* The trace is read while replaying, so a policy (softmax, always
     * built with the command) must load. */
    const char *path =
        fixture_write(5, "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1, "
                         "\"hash_ids\": [1]}\n"
                         "{\"timestamp\": 1, \"input_length\": 4, \"hash_ids\": [1]}\n");
    char args[512], expected[512], *out;
    snprintf(args, sizeof(args),
             "--plugin softmax --trace %s --trace-block-size 4 --block-size 4", path);
    assert_int_equal(run_sim(args, &out), 1);
    snprintf(expected, sizeof(expected), "%s:2: missing field \"output_length\"", path);
    if (!strstr(out, expected))
        fail_msg("expected '%s' in '%s'", expected, out);
    free(out);
    fixture_remove(path);
}

static void test_analyze_prints_json_statistics(void **state)
{
    (void)state;
    const char *path = fixture_write(6, "{\"timestamp\": 0, \"input_length\": 8, "
                                        "\"output_length\": 1, \"hash_ids\": [1, 2]}\n"
                                        "{\"timestamp\": 2000, \"input_length\": 8, "
                                        "\"output_length\": 3, \"hash_ids\": [1, 3]}\n");
    char args[512], *out;
    snprintf(args, sizeof(args), "--analyze --json --trace %s --trace-block-size 4",
             path);
    assert_int_equal(run_sim(args, &out), 0);
    assert_non_null(strstr(out, "\"requests\":2,"));
    assert_non_null(strstr(out, "\"unique_blocks\":3,"));
    assert_non_null(strstr(out, "\"infinite_cache_hit_rate\":0.25,"));
    assert_non_null(strstr(out, "\"duration_s\":2,"));
    free(out);
    fixture_remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_every_option_with_its_default),
        cmocka_unit_test(test_bad_usage_exits_2_naming_the_option),
        cmocka_unit_test(test_bad_trace_line_exits_1_with_file_and_line),
        cmocka_unit_test(test_analyze_prints_json_statistics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
