// SPDX-License-Identifier: Apache-2.0
/*
 * test_analyze.c -- `--analyze`: input statistics with no routing.
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

#include "analyze.h"
#include "sim_fixture.h"

static sim_analysis analyze_trace(const char *path, const char *block_size)
{
    char *argv[] = {"sim",        "--analyze",          "--trace",
                    (char *)path, "--trace-block-size", (char *)block_size,
                    NULL};
    sim_options o;
    char err[512];
    assert_int_equal(sim_options_parse(&o, 6, argv, err, sizeof(err)), 0);
    sim_analysis a;
    if (sim_analyze(&o, &a, err, sizeof(err)) != 0)
        fail_msg("sim_analyze: %s", err);
    return a;
}

/*
 * Ids per request: [1,2,3] [1,2,4] [5,5] [1]. Blocks 9; ids seen in an
 * earlier request: 1,2 of the 2nd and 1 of the 4th (the repeated 5 is in
 * the same request, so not a hit): 3 / 9. Unique ids 1..5: 5.
 */
static void test_counts_hits_of_one_infinite_shared_cache(void **state)
{
    (void)state;
    const char *path = fixture_write(0, "{\"timestamp\": 0, \"input_length\": 12, "
                                        "\"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n"
                                        "{\"timestamp\": 1000, \"input_length\": 10, "
                                        "\"output_length\": 5, \"hash_ids\": [1, 2, 4]}\n"
                                        "{\"timestamp\": 2000, \"input_length\": 8, "
                                        "\"output_length\": 5, \"hash_ids\": [5, 5]}\n"
                                        "{\"timestamp\": 3500, \"input_length\": 1, "
                                        "\"output_length\": 5, \"hash_ids\": [1]}\n");
    sim_analysis a = analyze_trace(path, "4");
    fixture_remove(path);
    assert_int_equal(a.requests, 4);
    assert_int_equal(a.input_tokens, 31);
    assert_int_equal(a.output_tokens, 20);
    assert_int_equal(a.blocks, 9);
    assert_int_equal(a.unique_blocks, 5);
    assert_float_equal(a.infinite_cache_hit_rate, 3.0 / 9.0, 1e-12);
    assert_float_equal(a.duration_s, 3.5, 1e-12);
}

/* The public Mooncake synthetic trace: 3,993 requests, 121,877 blocks,
 * 63.96 % hits with one infinite cache (DESIGN.md reference figures). */
static void test_matches_the_published_figures_of_the_shared_trace(void **state)
{
    (void)state;
    char path[4096];
    const char *src = getenv("WSEL_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/../shared/traces/mooncake_synthetic_trace.jsonl",
             src ? src : ".");
    if (access(path, R_OK) != 0)
        snprintf(path, sizeof(path),
                 "/work/shared/traces/mooncake_synthetic_trace.jsonl");
    if (access(path, R_OK) != 0) {
        print_message("shared trace not found; skipping\n");
        skip();
    }
    sim_analysis a = analyze_trace(path, "512");
    assert_int_equal(a.requests, 3993);
    assert_int_equal(a.blocks, 121877);
    assert_float_equal(a.infinite_cache_hit_rate, 0.6396, 0.00005);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_hits_of_one_infinite_shared_cache),
        cmocka_unit_test(test_matches_the_published_figures_of_the_shared_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
