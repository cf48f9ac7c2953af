// SPDX-License-Identifier: Apache-2.0
/*
 * test_pipeline.c -- the pipeline policy, twice over:
 *   - in process (the harness, a host table without children): no scorer
 *     means the default cost, filters, the all-excluded refusal;
 *   - loaded by libwsel-host from a private folder with its children
 *     (bundled plugins and fixtures copied beside it): children answer and
 *     are counted per child, a child whose score fails is answered for and
 *     counted (and ejected), a child refused by the trust rules or without
 *     a score function fails the switch and the old policy keeps serving,
 *     a picker plugin sees the combined score.
 * PIPE_PLUGIN_DIR and PIPE_FIXTURE_DIR say where the build put the .so files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "wsel_host.h"

/* --- in process ----------------------------------------------------------- */

static void test_without_scorers_picks_the_cheapest_row(void **state)
{
    (void)state;
    harness_table *t = harness_table_uniform(6, 1);
    const double costs[6] = {9, 4, 7, 2, 8, 5};
    for (uint32_t i = 0; i < 6; i++)
        t->cost[i] = costs[i];
    void *p = harness_create(NULL, NULL, 0);
    for (uint64_t id = 1; id <= 20; id++) {
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, 7, id, 0, NULL, 0);
        assert_int_equal(harness_select(p, &req, t), 3);
    }
    wsel_plugin_entry.destroy(p);
    harness_table_free(t);
}

static void test_filter_leaves_out_loaded_rows_unless_none_would_stay(void **state)
{
    (void)state;
    harness_table *t = harness_table_uniform(4, 1);
    const double costs[4] = {1, 2, 3, 4};
    const uint32_t active[4] = {10, 10, 2, 3};
    for (uint32_t i = 0; i < 4; i++) {
        t->cost[i] = costs[i];
        t->active_requests[i] = active[i];
    }
    static const char *const names[] = {"max_active_requests"};
    const double five = 5;
    void *p = harness_create(names, &five, 1);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 7, 1, 0, NULL, 0);
    assert_int_equal(harness_select(p, &req, t), 2);
    /* Every row over the limit: the filter is not applied. */
    for (uint32_t i = 0; i < 4; i++)
        t->active_requests[i] = 50;
    assert_int_equal(harness_select(p, &req, t), 0);
    wsel_plugin_entry.destroy(p);
    harness_table_free(t);
}

static void test_all_excluded_is_refused(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(5);
}

static void test_children_without_a_host_that_opens_them_are_refused(void **state)
{
    (void)state;
    /* The host passes 1.0 for a JSON key the configuration sets; this
     * host table cannot read it nor open children (isolated mode's
     * helper is such a host): refused, not silently dropped. */
    static const char *const keys[2] = {"scorers", "picker_plugin"};
    for (uint32_t k = 0; k < 2; k++) {
        double values[16];
        const double present = 1;
        harness_params(values, &keys[k], &present, 1);
        void *instance = NULL;
        assert_int_equal(wsel_plugin_entry.create(harness_host_api(), values,
                                                  wsel_plugin_entry.num_params,
                                                  &instance),
                         WSEL_ECONFIG);
    }
}

/* --- through libwsel-host, with children ---------------------------------- */

static char dir[64];

static void copy_file(const char *from, const char *to, mode_t mode)
{
    FILE *in = fopen(from, "rb");
    assert_non_null(in);
    FILE *out = fopen(to, "wb");
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    assert_int_equal(chmod(to, mode), 0);
}

static void put(const char *src_dir, const char *name, const char *as, mode_t mode)
{
    char from[1024], to[1024];
    snprintf(from, sizeof(from), "%s/%s.so", src_dir, name);
    snprintf(to, sizeof(to), "%s/%s.so", dir, as);
    copy_file(from, to, mode);
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/wsel-pipeline-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    put(PIPE_PLUGIN_DIR, "pipeline", "pipeline", 0755);
    put(PIPE_PLUGIN_DIR, "softmax", "softmax", 0755);
    put(PIPE_PLUGIN_DIR, "dpgroup", "dpgroup", 0755);
    put(PIPE_PLUGIN_DIR, "random", "random", 0755);
    put(PIPE_FIXTURE_DIR, "fx_score_error", "fx_score_error", 0755);
    /* The same file, writable by anyone: the trust rules refuse it. */
    put(PIPE_PLUGIN_DIR, "softmax", "loose", 0666);
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    const char *names[] = {"pipeline", "softmax",        "dpgroup",
                           "random",   "fx_score_error", "loose"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s.so", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}

static void quiet(void *user, int32_t level, const char *msg)
{
    (void)user, (void)level, (void)msg;
}

static wsel_host *new_host(uint32_t max_failures)
{
    wsel_host_options o;
    wsel_host_options_default(&o);
    o.log = quiet;
    o.max_consecutive_failures = max_failures;
    wsel_host *host = NULL;
    assert_int_equal(wsel_host_create(&o, &host), 0);
    return host;
}

static int32_t switch_pipeline(wsel_host *host, const char *config, char *err,
                               size_t err_size)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/pipeline.so", dir);
    return wsel_host_switch(host, path, config, err, err_size);
}

#define ROWS 8u

/* A table of ROWS one-rank workers with distinct costs, cheapest row 5. */
static harness_table *cost_table(void)
{
    harness_table *t = harness_table_uniform(ROWS, 1);
    const double costs[ROWS] = {80, 30, 70, 60, 50, 10, 40, 20};
    for (uint32_t i = 0; i < ROWS; i++) {
        t->cost[i] = costs[i];
        t->decode_blocks[i] = (uint64_t)costs[i];
        t->kv_capacity_blocks[i] = 1000;
    }
    return t;
}

static int32_t host_select(wsel_host *host, const harness_table *t, uint64_t id,
                           wsel_choice *choice)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 11, id, 0, NULL, 0);
    memset(choice, 0, sizeof(*choice));
    choice->struct_size = sizeof(*choice);
    return wsel_host_select(host, &req, &t->table, choice);
}

static void test_bundled_children_answer_and_are_counted_each(void **state)
{
    (void)state;
    wsel_host *host = new_host(0);
    char err[1024] = "";
    int32_t rc = switch_pipeline(host,
                                 "{\"scorers\": [{\"path\": \"softmax\", \"weight\": 2},"
                                 " {\"path\": \"dpgroup\", \"weight\": 1}]}",
                                 err, sizeof(err));
    assert_int_equal(rc, 0);
    harness_table *t = cost_table();
    for (uint64_t id = 1; id <= 50; id++) {
        wsel_choice c;
        assert_int_equal(host_select(host, t, id, &c), WSEL_ANSWER_PLUGIN);
        assert_int_equal(c.row, 5); /* both scorers favour the cheapest row */
        assert_int_equal(c.reason, WSEL_REASON_CHEAPEST);
        assert_true(c.flags & WSEL_CHOICE_SCORED);
    }
    wsel_child_counters k;
    assert_int_equal(wsel_host_read_child_counters(host, 0, &k, sizeof(k)), 0);
    assert_string_equal(k.name, "softmax");
    assert_int_equal(k.depth, 1);
    assert_int_equal(k.scores, 50);
    assert_int_equal(k.fallbacks, 0);
    assert_int_equal(wsel_host_read_child_counters(host, 1, &k, sizeof(k)), 0);
    assert_string_equal(k.name, "dpgroup");
    assert_int_equal(k.scores, 50);
    assert_int_equal(wsel_host_read_child_counters(host, 2, &k, sizeof(k)), WSEL_ENOENT);
    harness_table_free(t);
    wsel_host_destroy(host);
}

static void test_child_whose_score_fails_is_answered_for_and_ejected(void **state)
{
    (void)state;
    wsel_host *host = new_host(4);
    char err[1024] = "";
    assert_int_equal(switch_pipeline(host,
                                     "{\"scorers\": [{\"path\": \"fx_score_error\"},"
                                     " {\"path\": \"softmax\", \"weight\": 0.5}]}",
                                     err, sizeof(err)),
                     0);
    harness_table *t = cost_table();
    for (uint64_t id = 1; id <= 10; id++) {
        wsel_choice c;
        /* The pipeline still answers: the failing child's scores are the
         * default cost, the built-in policy's. */
        assert_int_equal(host_select(host, t, id, &c), WSEL_ANSWER_PLUGIN);
        assert_int_equal(c.row, 5);
    }
    wsel_child_counters k;
    assert_int_equal(wsel_host_read_child_counters(host, 0, &k, sizeof(k)), 0);
    assert_string_equal(k.name, "fx_score_error");
    assert_int_equal(k.scores, 0);
    assert_int_equal(k.fallbacks, 10);
    assert_int_equal(k.fallback_by_reason[WSEL_FALLBACK_ERROR], 4);
    assert_int_equal(k.fallback_by_reason[WSEL_FALLBACK_EJECTED], 6);
    assert_int_equal(k.ejected, 1);
    assert_int_equal(wsel_host_read_child_counters(host, 1, &k, sizeof(k)), 0);
    assert_int_equal(k.scores, 10);
    assert_int_equal(k.fallbacks, 0);
    /* The policy itself never failed. */
    wsel_host_counters hc;
    wsel_host_read_counters(host, &hc, sizeof(hc));
    assert_int_equal(hc.fallbacks, 0);
    assert_int_equal(hc.ejections, 0);
    harness_table_free(t);
    wsel_host_destroy(host);
}

static void test_child_refused_by_trust_rules_fails_the_switch(void **state)
{
    (void)state;
    wsel_host *host = new_host(0);
    char err[1024] = "";
    assert_int_equal(switch_pipeline(host, "{\"scorers\": [{\"path\": \"softmax\"}]}",
                                     err, sizeof(err)),
                     0);
    int32_t rc =
        switch_pipeline(host, "{\"scorers\": [{\"path\": \"loose\"}]}", err, sizeof(err));
    assert_true(rc < 0);
    /* The old pipeline and its child keep serving. */
    harness_table *t = cost_table();
    wsel_choice c;
    assert_int_equal(host_select(host, t, 1, &c), WSEL_ANSWER_PLUGIN);
    wsel_child_counters k;
    assert_int_equal(wsel_host_read_child_counters(host, 0, &k, sizeof(k)), 0);
    assert_string_equal(k.name, "softmax");
    assert_int_equal(k.scores, 1);
    wsel_host_counters hc;
    wsel_host_read_counters(host, &hc, sizeof(hc));
    assert_int_equal(hc.failed_switches, 1);
    harness_table_free(t);
    wsel_host_destroy(host);
}

static void test_child_without_score_or_bad_config_fails_the_switch(void **state)
{
    (void)state;
    wsel_host *host = new_host(0);
    char err[1024] = "";
    assert_true(switch_pipeline(host, "{\"scorers\": [{\"path\": \"random\"}]}", err,
                                sizeof(err)) < 0);
    assert_true(switch_pipeline(host,
                                "{\"scorers\": [{\"path\": \"softmax\", "
                                "\"config\": {\"temperature\": -1}}]}",
                                err, sizeof(err)) < 0);
    assert_true(
        switch_pipeline(host, "{\"scorers\": [{\"weight\": 1}]}", err, sizeof(err)) < 0);
    assert_true(switch_pipeline(host, "{\"scorers\": {\"path\": \"softmax\"}}", err,
                                sizeof(err)) < 0);
    assert_true(switch_pipeline(host, "{\"picker_plugin\": {\"path\": \"missing\"}}", err,
                                sizeof(err)) < 0);
    assert_int_equal(wsel_host_read_child_counters(host, 0, &(wsel_child_counters){0},
                                                   sizeof(wsel_child_counters)),
                     WSEL_ENOENT);
    wsel_host_destroy(host);
}

static void test_picker_plugin_sees_the_combined_score(void **state)
{
    (void)state;
    wsel_host *host = new_host(0);
    char err[1024] = "";
    /* dpgroup ranks rows by load; a softmax picker at T=0 takes the
     * argmin of what it is given: the combined score, so the answer is
     * the argmin picker's. */
    assert_int_equal(switch_pipeline(host,
                                     "{\"scorers\": [{\"path\": \"dpgroup\"}],"
                                     " \"picker_plugin\": {\"path\": \"softmax\"}}",
                                     err, sizeof(err)),
                     0);
    harness_table *t = cost_table();
    wsel_choice c;
    assert_int_equal(host_select(host, t, 1, &c), WSEL_ANSWER_PLUGIN);
    uint32_t picked = c.row;
    assert_int_equal(c.reason, WSEL_REASON_CHEAPEST);
    wsel_child_counters k;
    assert_int_equal(wsel_host_read_child_counters(host, 1, &k, sizeof(k)), 0);
    assert_string_equal(k.name, "softmax");
    assert_int_equal(k.answers, 1);
    assert_int_equal(switch_pipeline(host, "{\"scorers\": [{\"path\": \"dpgroup\"}]}",
                                     err, sizeof(err)),
                     0);
    assert_int_equal(host_select(host, t, 1, &c), WSEL_ANSWER_PLUGIN);
    assert_int_equal(c.row, picked);
    harness_table_free(t);
    wsel_host_destroy(host);
}

/* Configured at temperature 5, a request whose override says 0 still gets
 * the cheapest row, loaded and called through libwsel-host. */
static void test_override_of_zero_beats_a_configured_temperature(void **state)
{
    (void)state;
    const char *config = "{\"picker\": \"softmax\", \"temperature\": 5}";
    harness_expect_override_zero_is_cheapest("pipeline", config);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_without_scorers_picks_the_cheapest_row),
        cmocka_unit_test(test_filter_leaves_out_loaded_rows_unless_none_would_stay),
        cmocka_unit_test(test_all_excluded_is_refused),
        cmocka_unit_test(test_children_without_a_host_that_opens_them_are_refused),
        cmocka_unit_test(test_bundled_children_answer_and_are_counted_each),
        cmocka_unit_test(test_child_whose_score_fails_is_answered_for_and_ejected),
        cmocka_unit_test(test_child_refused_by_trust_rules_fails_the_switch),
        cmocka_unit_test(test_child_without_score_or_bad_config_fails_the_switch),
        cmocka_unit_test(test_picker_plugin_sees_the_combined_score),
        cmocka_unit_test(test_override_of_zero_beats_a_configured_temperature),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
