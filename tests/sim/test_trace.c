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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
