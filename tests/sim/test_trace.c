// SPDX-License-Identifier: Apache-2.0
/*
 * test_trace.c -- Mooncake trace reading: good lines parse, every kind of
 * bad line stops the run with "FILE:LINE: what is wrong", and
 * --skip-bad-lines counts them instead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim_fixture.h"
#include "source.h"
#include "trace.h"

#define GOOD                                                                             \
    "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1, "  \
    "2, 3]}\n"

/* Read `text` (block size 4) to the end; returns the first error code and
 * leaves its message in err, or 0 and the request count in *count. */
static int32_t read_all(const char *text, int skip, uint64_t *count, uint64_t *bad,
                        char *err, size_t err_size, const char **path_out)
{
    const char *path = fixture_write(0, text);
    *path_out = path;
    sim_trace_reader r;
    int32_t rc = sim_trace_open(&r, path, 4, skip, err, err_size);
    assert_int_equal(rc, 0);
    sim_trace_line line;
    *count = 0;
    while ((rc = sim_trace_next(&r, &line, err, err_size)) > 0)
        (*count)++;
    *bad = r.bad_lines;
    sim_trace_close(&r);
    fixture_remove(path);
    return rc;
}

/* Expect `text` to fail at `line_no` with a message containing `what`. */
static void expect_error(const char *text, int line_no, const char *what)
{
    char err[512], prefix[128];
    uint64_t count, bad;
    const char *path;
    int32_t rc = read_all(text, 0, &count, &bad, err, sizeof(err), &path);
    assert_true(rc < 0);
    if (line_no > 0)
        snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line_no);
    else
        snprintf(prefix, sizeof(prefix), "%s: ", path);
    if (strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, what))
        fail_msg("expected '%s...%s', got '%s'", prefix, what, err);
}

static void test_reads_good_lines_with_their_fields(void **state)
{
    (void)state;
    const char *path = fixture_write(0, GOOD "{\"timestamp\": 2.5, \"input_length\": 4, "
                                             "\"output_length\": 0, \"hash_ids\": [9], "
                                             "\"extra\": {\"a\": [1]}}\n");
    char err[256];
    sim_trace_reader r;
    assert_int_equal(sim_trace_open(&r, path, 4, 0, err, sizeof(err)), 0);
    sim_trace_line line;
    assert_int_equal(sim_trace_next(&r, &line, err, sizeof(err)), 1);
    assert_int_equal(line.input_length, 10);
    assert_int_equal(line.output_length, 2);
    assert_int_equal(line.num_hash_ids, 3);
    assert_int_equal(line.hash_ids[2], 3);
    assert_int_equal(sim_trace_next(&r, &line, err, sizeof(err)), 1);
    assert_true(line.timestamp_ms == 2.5);
    assert_int_equal(line.hash_ids[0], 9);
    assert_int_equal(sim_trace_next(&r, &line, err, sizeof(err)), 0);
    sim_trace_close(&r);
    fixture_remove(path);
}

static void test_missing_field_names_the_field_and_line(void **state)
{
    (void)state;
    expect_error(GOOD
                 "{\"timestamp\": 1, \"output_length\": 2, \"hash_ids\": [1, 2, 3]}\n",
                 2, "missing field \"input_length\"");
}

static void test_negative_length_is_refused(void **state)
{
    (void)state;
    expect_error("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": -2, "
                 "\"hash_ids\": [1, 2, 3]}\n",
                 1, "\"output_length\" is negative");
}

static void test_wrong_number_of_hash_ids_is_refused(void **state)
{
    (void)state;
    expect_error(GOOD GOOD
                 "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, "
                 "\"hash_ids\": [1, 2]}\n",
                 3, "has 2 ids but input_length 10 needs 3");
}

static void test_non_json_is_refused(void **state)
{
    (void)state;
    expect_error(GOOD "this is not json\n", 2, "not valid JSON");
    expect_error("[1, 2]\n", 1, "not a JSON object");
    expect_error("{\"timestamp\": 0, \"input_length\": \"10\", \"output_length\": 2, "
                 "\"hash_ids\": [1, 2, 3]}\n",
                 1, "\"input_length\" is not an integer");
}

/* Found by the fuzzer: jsmn accepted an object whose key had no value,
 * and the parser read past the tokens. */
static void test_key_without_value_is_refused_without_overread(void **state)
{
    (void)state;
    sim_trace_parser p;
    sim_trace_parser_init(&p, 3);
    static const char line[] = "{\"tihestamp\": 0, \"input_l\xff\xff\xff\xff"
                               "ength\"\", \xff 1-:o1l\xff\xff\xff\xff"
                               "ength\"\",  1-:ohash_ids: []}-h_ids\": []}";
    sim_trace_line out;
    char err[256];
    assert_int_equal(
        sim_trace_parse_line(&p, line, sizeof(line) - 1, &out, err, sizeof(err)),
        WSEL_EINVAL);
    assert_non_null(strstr(err, "JSON"));
    sim_trace_parser_free(&p);
}

static void test_empty_file_is_refused(void **state)
{
    (void)state;
    expect_error("", 0, "empty trace");
}

static void test_decreasing_timestamps_are_refused(void **state)
{
    (void)state;
    expect_error("{\"timestamp\": 5, \"input_length\": 4, \"output_length\": 1, "
                 "\"hash_ids\": [1]}\n"
                 "{\"timestamp\": 3, \"input_length\": 4, \"output_length\": 1, "
                 "\"hash_ids\": [1]}\n",
                 2, "before the previous request");
}

static void test_skip_bad_lines_counts_them(void **state)
{
    (void)state;
    char err[256];
    uint64_t count, bad;
    const char *path;
    assert_int_equal(
        read_all(GOOD "oops\n\n" GOOD, 1, &count, &bad, err, sizeof(err), &path), 0);
    assert_int_equal(count, 2);
    assert_int_equal(bad, 2);
}

static void test_router_blocks_split_trace_blocks_by_prefix(void **state)
{
    (void)state;
    /* Trace block 4, router block 2: two requests sharing trace id 1 share
     * router blocks 0-1; their second trace blocks differ, so router
     * blocks 2-3 differ; a partial last block gets no hash. */
    const char *path = fixture_write(1, "{\"timestamp\": 0, \"input_length\": 7, "
                                        "\"output_length\": 1, \"hash_ids\": [1, 2]}\n"
                                        "{\"timestamp\": 0, \"input_length\": 8, "
                                        "\"output_length\": 1, \"hash_ids\": [1, 3]}\n");
    char err[256];
    sim_source *src;
    assert_int_equal(sim_source_open_trace(&src, path, 4, 2, 0, err, sizeof(err)), 0);
    sim_request a, b;
    uint64_t first[4];
    assert_int_equal(sim_source_next(src, &a, err, sizeof(err)), 1);
    assert_int_equal(a.num_blocks, 3);
    memcpy(first, a.blocks, 3 * sizeof(uint64_t));
    assert_int_equal(sim_source_next(src, &b, err, sizeof(err)), 1);
    assert_int_equal(b.num_blocks, 4);
    assert_true(b.blocks[0] == first[0] && b.blocks[1] == first[1]);
    assert_true(b.blocks[2] != first[2]);
    sim_source_close(src);
    /* A router block that neither divides nor multiplies is refused. */
    assert_int_equal(sim_source_open_trace(&src, path, 4, 3, 0, err, sizeof(err)),
                     WSEL_EINVAL);
    assert_non_null(strstr(err, "--block-size 3"));
    fixture_remove(path);
}

/* Issue 13 item 16: the trace reads JSON as strictly as the config parser
 * (one reader, host/json/wsel_json.h). */
static void expect_line_refused(const char *line, size_t len, const char *what)
{
    sim_trace_parser p;
    sim_trace_parser_init(&p, 4);
    sim_trace_line out;
    char err[256] = "";
    int32_t rc = sim_trace_parse_line(&p, line, len, &out, err, sizeof(err));
    sim_trace_parser_free(&p);
    if (rc == 0)
        fail_msg("accepted %.*s", (int)len, line);
    if (strstr(err, what) == NULL)
        fail_msg("for %.*s: '%s' lacks '%s'", (int)len, line, err, what);
}

#define LINE_TAIL "\"input_length\": 4, \"output_length\": 2, \"hash_ids\": [1]"

static void test_invalid_json_is_refused_like_the_config_parser(void **state)
{
    (void)state;
    const char *lines[] = {
        "{\"timestamp\": 0, " LINE_TAIL ",}",
        "{\"timestamp\":: 0, " LINE_TAIL "}",
        "{\"timestamp\": 0x10, " LINE_TAIL "}",
        "{\"timestamp\": 007, " LINE_TAIL "}",
        "{\"timestamp\": 0, " LINE_TAIL ", \"x\": [1,]}",
        "{\"timestamp\": 0, " LINE_TAIL ", \"x\": tru}",
        "{\"timestamp\": 0, " LINE_TAIL ", \"x\": \"\\q\"}",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        expect_line_refused(lines[i], strlen(lines[i]), "not valid JSON: ");
    const char nul[] = "{\"timestamp\": 0, " LINE_TAIL "}\0{\"junk\": 1}";
    expect_line_refused(nul, sizeof(nul) - 1,
                        "not valid JSON: a NUL byte after the value");
}

static void test_string_escapes_in_keys_are_decoded(void **state)
{
    (void)state;
    const char line[] = "{\"time\\u0073tamp\": 5, " LINE_TAIL "}";
    sim_trace_parser p;
    sim_trace_parser_init(&p, 4);
    sim_trace_line out;
    char err[256] = "";
    assert_int_equal(sim_trace_parse_line(&p, line, strlen(line), &out, err, sizeof(err)),
                     0);
    assert_true(out.timestamp_ms == 5.0);
    sim_trace_parser_free(&p);
}

/* Issue 13 item 14: limits, named. */
static void test_deep_nesting_is_refused_naming_the_limit(void **state)
{
    (void)state;
    char line[512];
    int k = snprintf(line, sizeof(line), "{\"timestamp\": 0, " LINE_TAIL ", \"x\": ");
    for (int i = 0; i < 40; i++)
        line[k++] = '[';
    for (int i = 0; i < 40; i++)
        line[k++] = ']';
    line[k++] = '}';
    expect_line_refused(line, (size_t)k, "nested deeper than 32 levels (limit 32)");
}

static void test_over_long_line_ends_the_read_naming_the_limit(void **state)
{
    (void)state;
    size_t n = SIM_TRACE_MAX_LINE + 10;
    char *text = malloc(n + 1);
    assert_non_null(text);
    memset(text, ' ', n);
    text[n] = '\0';
    for (int skip = 0; skip <= 1; skip++) {
        char err[512];
        uint64_t count, bad;
        const char *path;
        int32_t rc = read_all(text, skip, &count, &bad, err, sizeof(err), &path);
        assert_true(rc < 0);
        if (strstr(err,
                   ":1: line longer than 1048576 bytes (limit SIM_TRACE_MAX_LINE)") ==
            NULL)
            fail_msg("got '%s'", err);
    }
    free(text);
}

/* Issue 13 item 15: trace fields have ranges; a timestamp past 9.22e12 ms
 * overflowed the nanosecond clock and was reported as out of order, and
 * input_length 0 reached memcpy with NULL. */
static void test_fields_out_of_range_are_refused_by_name(void **state)
{
    (void)state;
    const char far[] = "{\"timestamp\": 9.3e12, " LINE_TAIL "}";
    expect_line_refused(far, strlen(far),
                        "\"timestamp\" 9300000000000 ms is out of range");
    const char empty[] = "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 2, "
                         "\"hash_ids\": []}";
    expect_line_refused(empty, strlen(empty), "\"input_length\" is 0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_good_lines_with_their_fields),
        cmocka_unit_test(test_missing_field_names_the_field_and_line),
        cmocka_unit_test(test_negative_length_is_refused),
        cmocka_unit_test(test_wrong_number_of_hash_ids_is_refused),
        cmocka_unit_test(test_non_json_is_refused),
        cmocka_unit_test(test_key_without_value_is_refused_without_overread),
        cmocka_unit_test(test_empty_file_is_refused),
        cmocka_unit_test(test_decreasing_timestamps_are_refused),
        cmocka_unit_test(test_skip_bad_lines_counts_them),
        cmocka_unit_test(test_router_blocks_split_trace_blocks_by_prefix),
        cmocka_unit_test(test_invalid_json_is_refused_like_the_config_parser),
        cmocka_unit_test(test_string_escapes_in_keys_are_decoded),
        cmocka_unit_test(test_deep_nesting_is_refused_naming_the_limit),
        cmocka_unit_test(test_over_long_line_ends_the_read_naming_the_limit),
        cmocka_unit_test(test_fields_out_of_range_are_refused_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
