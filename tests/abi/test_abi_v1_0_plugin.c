// SPDX-License-Identifier: Apache-2.0
/*
 * test_abi_v1_0_plugin.c -- a plugin built against the frozen v1.0 header
 * (fixture_v1_0.c) loads, parses its parameters and answers in the current
 * host. WSEL_V1_0_FIXTURE is the path of the built fixture.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_host.h"

/* Three workers with two ranks each; only worker 1 rank 1 (row 3) holds the
 * whole 4-block prompt, so its default cost (0) is the unique minimum. */
static const wsel_rank_state ranks[] = {
    {.worker_id = 10, .dp_rank = 0, .active_blocks = 2},
    {.worker_id = 10, .dp_rank = 1, .active_blocks = 2},
    {.worker_id = 11, .dp_rank = 0, .active_blocks = 1},
    {.worker_id = 11, .dp_rank = 1, .overlap_blocks = 4},
    {.worker_id = 12, .dp_rank = 0, .active_blocks = 3},
    {.worker_id = 12, .dp_rank = 1, .flags = WSEL_ROW_NO_LOAD},
};
#define NUM_RANKS (sizeof(ranks) / sizeof(ranks[0]))
#define BEST_ROW  3u

static void test_v1_0_plugin_answers_through_the_current_host(void **state)
{
    (void)state;
    char err[256] = "";
    wsel_host *host = NULL;
    assert_int_equal(wsel_host_create(NULL, &host), 0);
    int32_t rc = wsel_host_switch(host, WSEL_V1_0_FIXTURE, "{}", err, sizeof(err));
    if (rc != 0)
        print_error("switch to %s: %s\n", WSEL_V1_0_FIXTURE, err);
    assert_int_equal(rc, 0);
    assert_string_equal(wsel_host_policy_name(host), "v1_0_fixture");

    wsel_request request = {
        .request_id = 7, .isl_tokens = 64, .block_size = 16, .overlap_score_weight = 1.0};
    wsel_rng rng;
    wsel_host_prepare_request(host, &request, &rng);
    wsel_table_buf buf = {0};
    assert_int_equal(wsel_table_buf_init(&buf, NUM_RANKS), 0);
    rc = wsel_table_build(&buf, &request, ranks, NUM_RANKS, 1, err, sizeof(err));
    if (rc != 0)
        print_error("table: %s\n", err);
    assert_int_equal(rc, 0);

    for (int i = 0; i < 10; i++) {
        wsel_choice choice = {.struct_size = sizeof(wsel_choice)};
        assert_int_equal(wsel_host_select(host, &request, &buf.table, &choice),
                         WSEL_ANSWER_PLUGIN);
        assert_int_equal(choice.row, BEST_ROW);
    }
    wsel_host_counters counters;
    wsel_host_get_counters(host, &counters);
    assert_int_equal(counters.plugin_answers, 10);
    assert_int_equal(counters.fallbacks, 0);

    wsel_table_buf_free(&buf);
    wsel_host_destroy(host);
}

static void test_v1_0_descriptor_and_parameters_are_read_at_their_v1_0_size(void **state)
{
    (void)state;
    char err[256] = "";
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(WSEL_V1_0_FIXTURE, NULL, &lib, err, sizeof(err));
    if (rc != 0)
        print_error("open %s: %s\n", WSEL_V1_0_FIXTURE, err);
    assert_int_equal(rc, 0);

    const wsel_plugin *plugin = wsel_library_plugin(lib);
    assert_int_equal(plugin->abi_major, 1);
    assert_int_equal(plugin->abi_minor, 0);
    assert_int_equal(plugin->struct_size, WSEL_PLUGIN_SIZE_1_0);
    assert_int_equal(plugin->param_def_size, WSEL_PARAM_DEF_SIZE_1_0);
    assert_string_equal(wsel_library_param(lib, 0)->name, "temperature");
    assert_null(wsel_library_param(lib, 1));

    double value = -1.0;
    assert_int_equal(
        wsel_config_parse(lib, "{\"temperature\": 2.5}", &value, err, sizeof(err)), 0);
    assert_true(value == 2.5);
    assert_int_equal(wsel_config_parse(lib, "{\"temp\": 1}", &value, err, sizeof(err)),
                     WSEL_ECONFIG);
    assert_non_null(strstr(err, "temp"));
    assert_true(value == 2.5);

    wsel_library_close(lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_0_plugin_answers_through_the_current_host),
        cmocka_unit_test(test_v1_0_descriptor_and_parameters_are_read_at_their_v1_0_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
