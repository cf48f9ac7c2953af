// SPDX-License-Identifier: Apache-2.0
/*
 * test_explain.c -- `wsel sim --explain N`: on a three-request trace over
 * two one-rank workers whose overlaps are known, the chosen row, its place
 * and the reason are exact; the host's fallback is explained as the
 * host's; the JSON carries an `explain` array; the sample is spread over
 * the run and the same seed gives the same document.
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

#include "sim_fixture.h"

/*
 * Block size 64 for the trace and the router. Request 0 (4 blocks) goes to
 * one of two empty workers (a tie: cost 256/64 + 4 = 8 on both). Request 1
 * extends its prefix by one block: the worker that holds 4 of its 5
 * blocks costs 64/64 + 1 = 2, the other 320/64 + 5 = 10. Request 2 shares
 * nothing: 128/64 + 2 = 4 on the idle worker, and the other still has
 * request 1's prefill and blocks queued (192 tokens, 7 blocks: 10).
 */
static const char trace[] =
    "{\"timestamp\": 0, \"input_length\": 256, \"output_length\": 2, "
    "\"hash_ids\": [1, 2, 3, 4]}\n"
    "{\"timestamp\": 1000, \"input_length\": 320, \"output_length\": 2, "
    "\"hash_ids\": [1, 2, 3, 4, 5]}\n"
    "{\"timestamp\": 1000, \"input_length\": 128, \"output_length\": 2, "
    "\"hash_ids\": [9, 10]}\n";

static const char cluster[] = "--trace-block-size 64 --block-size 64 --workers 2 --dp 1 "
                              "--kv-blocks 64";

static int plugin_built(const char *rel, char *path, size_t size)
{
    const char *build = getenv("WSEL_BUILD_DIR");
    snprintf(path, size, "%s/%s", build ? build : ".", rel);
    if (access(path, R_OK) != 0) {
        print_message("%s not built; skipping\n", path);
        return 0;
    }
    return 1;
}

/* Run `wsel sim` on the trace with `extra` options; returns the output. */
static char *explain_trace(const char *extra, int expect_exit)
{
    const char *path = fixture_write(0, trace);
    char args[4096], *out = NULL;
    int n = snprintf(args, sizeof(args), "--trace %s %s %s", path, cluster, extra);
    if (n < 0 || (size_t)n >= sizeof(args)) {
        fixture_remove(path);
        fail_msg("wsel sim's arguments need more than %zu bytes", sizeof(args));
    }
    int rc = fixture_run_wsel("sim", args, &out);
    fixture_remove(path);
    if (rc != expect_exit)
        fail_msg("exit %d, expected %d:\n%s", rc, expect_exit, out);
    return out;
}

/* The line of `out` after `from` that starts with `prefix`, copied to line. */
static void line_after(const char *out, const char *from, const char *prefix, char *line,
                       size_t size)
{
    const char *p = strstr(out, from);
    if (p == NULL)
        fail_msg("no '%s' in:\n%s", from, out);
    for (p = strchr(p, '\n'); p != NULL; p = strchr(p + 1, '\n')) {
        if (strncmp(p + 1, prefix, strlen(prefix)) == 0) {
            size_t n = strcspn(p + 1, "\n");
            snprintf(line, size, "%.*s", (int)n, p + 1);
            return;
        }
    }
    fail_msg("no line '%s' after '%s' in:\n%s", prefix, from, out);
}

static void expect(const char *out, const char *text)
{
    if (strstr(out, text) == NULL)
        fail_msg("expected '%s' in:\n%s", text, out);
}

static void test_cached_row_wins_as_the_cheapest(void **state)
{
    (void)state;
    char so[4200], line[512];
    if (!plugin_built("plugins/softmax.so", so, sizeof(so)))
        skip();
    char *out = explain_trace("--explain 3 --plugin softmax", 0);
    expect(out, "explain softmax: 3 of 3 requests");
    expect(out, "#1 request 0 (routed 1) at 0.000 s: isl 256 tokens, 4 blocks; 2 rows, "
                "2 eligible; policy softmax");
    expect(out, "why: cheapest; lowest score (8), tied with 1 other row\n");
    expect(out, "#2 request 1 (routed 2) at 1.000 s: isl 320 tokens, 5 blocks; 2 rows, "
                "2 eligible; policy softmax");
    /* The chosen row comes first: 4 blocks cached, 64 tokens to prefill,
     * 1 new block, cost and score 2; the other row second at 10. */
    line_after(out, "#2 request 1", "  *", line, sizeof(line));
    if (strncmp(line, "  *     1 ", 10) != 0 ||
        strstr(line, "   0        4       64       1           2           2") == NULL)
        fail_msg("chosen row of request 1: '%s'", line);
    line_after(out, "#2 request 1", "        2 ", line, sizeof(line));
    if (strstr(line, "   0        0      320       5          10          10") == NULL)
        fail_msg("other row of request 1: '%s'", line);
    expect(out,
           "reason cheapest, score 2\n"
           "  why: cheapest; lowest score (2; next 10), most cached blocks (4 of 5)\n");
    /* Request 2: the idle worker, no cache anywhere. */
    line_after(out, "#3 request 2", "  *", line, sizeof(line));
    if (strstr(line, "   0        0      128       2           4           4") == NULL)
        fail_msg("chosen row of request 2: '%s'", line);
    expect(out, "why: cheapest; lowest score (4; next 10)\n");
    free(out);
}

static void test_sampled_answer_gives_its_probability(void **state)
{
    (void)state;
    char so[4200];
    if (!plugin_built("plugins/softmax.so", so, sizeof(so)))
        skip();
    /* Request 0's two rows tie: at any temperature each has p = 1/2. */
    char *out = explain_trace("--explain 3 --plugin softmax --config "
                              "'{\"temperature\": 0.5}'",
                              0);
    expect(out, "explain softmax [1]: 3 of 3 requests");
    expect(out, "why: sampled at temperature 0.5 with p = 0.500; lowest score (8), tied "
                "with 1 other row\n");
    free(out);
}

static void test_fallback_is_explained_as_the_hosts(void **state)
{
    (void)state;
    char so[4200], args[4400];
    if (!plugin_built("tests/fixtures/fx_returns_error.so", so, sizeof(so)))
        skip();
    snprintf(args, sizeof(args), "--explain 3 --plugin %s", so);
    char *out = explain_trace(args, 0);
    /* No score function: the rows are ordered by the default cost. */
    expect(out, "rows by place: eligible first, then by the default cost");
    expect(out,
           "by the host, reason none\n  why: the host answered (fallback: error) with "
           "argmin of the default cost; lowest cost (2; next 10), most cached "
           "blocks (4 of 5)\n");
    free(out);
}

static void test_json_has_an_explain_array(void **state)
{
    (void)state;
    char so[4200];
    if (!plugin_built("plugins/softmax.so", so, sizeof(so)))
        skip();
    char *out = explain_trace("--explain 3 --plugin softmax --json --no-timing", 0);
    expect(out, "\"answers_by_reason\":{\"cheapest\":3},\"explain\":[\n{\"routed\":1,"
                "\"request_id\":0,");
    expect(out, "\"routed\":2,\"request_id\":1,\"arrival_us\":1000000,\"isl\":320,"
                "\"blocks\":5,\"rows\":2,\"eligible\":2,\"policy\":\"softmax\","
                "\"answer\":\"plugin\",\"fallback\":null,");
    expect(out,
           "\"reason\":\"cheapest\",\"reason_code\":1,\"score\":2,\"temperature\":0,"
           "\"probability\":null,\"why\":\"cheapest; lowest score (2; next 10), most "
           "cached blocks (4 of 5)\"");
    expect(out, "\"dp_rank\":0,\"overlap_blocks\":4,\"prefill_tokens\":64,"
                "\"decode_blocks\":1,\"cost\":2,\"score\":2,\"busy\":false,"
                "\"excluded\":false,\"no_load\":false,\"chosen\":true}");
    free(out);
}

static const char workload[] = "--workload conversation --requests 400 --explain 4 "
                               "--plugin softmax --plugin hysteresis --plugin random";

static void test_sample_is_spread_over_the_run(void **state)
{
    (void)state;
    char so[4200], *out;
    if (!plugin_built("plugins/hysteresis.so", so, sizeof(so)))
        skip();
    assert_int_equal(fixture_run_wsel("sim", workload, &out), 0);
    /* 4 of 400: one in each quarter, per plugin, the same requests. */
    const char *p = out;
    for (int plugin = 0; plugin < 3; plugin++) {
        p = strstr(p, "\nexplain ");
        assert_non_null(p);
        for (unsigned k = 1; k <= 4; k++) {
            char head[32];
            snprintf(head, sizeof(head), "\n#%u request ", k);
            p = strstr(p, head);
            assert_non_null(p);
            const char *r = strstr(p, "(routed ");
            assert_non_null(r);
            unsigned routed = (unsigned)strtoul(r + 8, NULL, 10);
            if (routed < (k - 1) * 100 + 1 || routed > k * 100)
                fail_msg("sample %u is request %u, outside its quarter", k, routed);
        }
    }
    expect(out, "explain random: 4 of 400 requests");
    expect(out, "then by the default cost"); /* random has no score function */
    free(out);
}

static void test_same_seed_gives_the_same_explanations(void **state)
{
    (void)state;
    char so[4200], args[512], *a, *b;
    if (!plugin_built("plugins/hysteresis.so", so, sizeof(so)))
        skip();
    snprintf(args, sizeof(args), "%s --json --no-timing --seed 7", workload);
    assert_int_equal(fixture_run_wsel("sim", args, &a), 0);
    assert_int_equal(fixture_run_wsel("sim", args, &b), 0);
    expect(a, "\"explain\":[");
    assert_string_equal(a, b);
    free(a);
    free(b);
}

static void test_explain_out_of_range_is_bad_usage(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(fixture_run_wsel("sim", "--explain 10001", &out), 2);
    expect(out, "--explain");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_row_wins_as_the_cheapest),
        cmocka_unit_test(test_sampled_answer_gives_its_probability),
        cmocka_unit_test(test_fallback_is_explained_as_the_hosts),
        cmocka_unit_test(test_json_has_an_explain_array),
        cmocka_unit_test(test_sample_is_spread_over_the_run),
        cmocka_unit_test(test_same_seed_gives_the_same_explanations),
        cmocka_unit_test(test_explain_out_of_range_is_bad_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
