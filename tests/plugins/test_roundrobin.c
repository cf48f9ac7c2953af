// SPDX-License-Identifier: Apache-2.0
/*
 * test_roundrobin.c -- the roundrobin plugin: fair rotation over eligible
 * rows, flag handling, an exact share under concurrent selects, and the
 * score (distance ahead of the cursor) whose argmin is the next answer.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

/* Select `count` times and compare with `expected`. */
static void expect_rows(void *instance, harness_table *t, const uint32_t *expected,
                        uint32_t count)
{
    for (uint32_t k = 0; k < count; k++) {
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, 7, k, 0, NULL, 0);
        assert_int_equal(harness_select(instance, &req, t), expected[k]);
    }
}

static void test_descriptor_is_concurrent_without_parameters(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "roundrobin");
    assert_int_equal(p->abi_major, WSEL_ABI_MAJOR);
    assert_int_equal(p->struct_size, sizeof(wsel_plugin));
    /* Not WSEL_CAP_STATELESS: the same request gets a different row later. */
    assert_int_equal(p->capabilities, WSEL_CAP_CONCURRENT_SELECT);
    assert_int_equal(p->num_params, 0);
}

static void test_rows_are_visited_in_turn(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(3, NULL);
    void *instance = harness_create(NULL, NULL, 0);
    const uint32_t expected[] = {0, 1, 2, 0, 1, 2, 0};
    expect_rows(instance, t, expected, 7);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_excluded_rows_are_left_out_of_the_rotation(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(4, NULL);
    t->flags[1] = WSEL_ROW_EXCLUDED;
    void *instance = harness_create(NULL, NULL, 0);
    const uint32_t expected[] = {0, 2, 3, 0, 2, 3};
    expect_rows(instance, t, expected, 6);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_busy_rows_are_left_out_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(3, NULL);
    t->flags[0] = WSEL_ROW_BUSY;
    void *instance = harness_create(NULL, NULL, 0);
    const uint32_t expected[] = {1, 2, 1, 2};
    expect_rows(instance, t, expected, 4);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_busy_rows_rotate_when_every_eligible_row_is_busy(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(4, NULL);
    t->flags[0] = WSEL_ROW_BUSY;
    t->flags[1] = WSEL_ROW_BUSY | WSEL_ROW_EXCLUDED;
    t->flags[2] = WSEL_ROW_EXCLUDED;
    t->flags[3] = WSEL_ROW_BUSY;
    void *instance = harness_create(NULL, NULL, 0);
    const uint32_t expected[] = {0, 3, 0, 3};
    expect_rows(instance, t, expected, 4);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_every_row_excluded_returns_enocandidate_and_writes_nothing(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(2);
}

static void test_a_host_whose_eligible_rule_leaves_no_row_is_refused(void **state)
{
    (void)state;
    harness_expect_wrong_host_refused(40, 1);
}

static void test_two_instances_keep_separate_turns(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(3, NULL);
    void *a = harness_create(NULL, NULL, 0);
    void *b = harness_create(NULL, NULL, 0);
    const uint32_t first_two[] = {0, 1};
    const uint32_t first_one[] = {0};
    expect_rows(a, t, first_two, 2);
    expect_rows(b, t, first_one, 1);
    const uint32_t next[] = {2};
    expect_rows(a, t, next, 1);
    wsel_plugin_entry.destroy(a);
    wsel_plugin_entry.destroy(b);
    harness_table_free(t);
}

/* score() into `scores` (num_rows doubles); fails the test unless it
 * returns 0. */
static void score_rows(void *instance, const harness_table *t, double *scores)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 7, 99, 0, NULL, 0);
    assert_int_equal(wsel_plugin_entry.score(instance, &req, &t->table, scores), 0);
}

static void assert_scores(const double *scores, const double *expected, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        assert_true(scores[i] == expected[i]);
}

static void test_score_is_the_distance_ahead_of_the_cursor(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(4, NULL);
    void *instance = harness_create(NULL, NULL, 0);
    double scores[4];
    score_rows(instance, t, scores);
    assert_scores(scores, (const double[]){0, 1, 2, 3}, 4);
    /* Scoring takes no ticket: the same scores again, and the next select
     * still answers row 0. */
    score_rows(instance, t, scores);
    assert_scores(scores, (const double[]){0, 1, 2, 3}, 4);
    const uint32_t first[] = {0, 1, 2};
    expect_rows(instance, t, first, 3);
    score_rows(instance, t, scores); /* cursor at ticket 3: row 3 next */
    assert_scores(scores, (const double[]){1, 2, 3, 0}, 4);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_rows_outside_the_rotation_score_the_rotation_length(void **state)
{
    (void)state;
    /* Rows 1 excluded and 3 busy: the rotation is rows 0, 2, 4 (m = 3). */
    harness_table *t = harness_table_new(5, NULL);
    t->flags[1] = WSEL_ROW_EXCLUDED;
    t->flags[3] = WSEL_ROW_BUSY;
    void *instance = harness_create(NULL, NULL, 0);
    const uint32_t first[] = {0, 2, 4, 0};
    expect_rows(instance, t, first, 4); /* ticket 4: k = 4 mod 3 = 1 */
    double scores[5];
    score_rows(instance, t, scores);
    assert_scores(scores, (const double[]){2, 3, 0, 3, 1}, 5);
    /* Every eligible row busy: the busy ones rotate, and score alike. */
    t->flags[0] = t->flags[2] = t->flags[4] = WSEL_ROW_BUSY;
    score_rows(instance, t, scores); /* m = 4, k = 4 mod 4 = 0 */
    assert_scores(scores, (const double[]){0, 4, 1, 2, 3}, 5);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

/* Over many tables and cursors, the unique minimum of the scores is the
 * row the following select answers, and the choice explains it. */
static void test_argmin_of_the_scores_is_the_next_answer(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(37, NULL);
    void *instance = harness_create(NULL, NULL, 0);
    double scores[37];
    for (uint32_t k = 0; k < 500; k++) {
        for (uint32_t i = 0; i < 37; i++) /* a pattern that changes with k */
            t->flags[i] = (uint8_t)(((i * 7 + k) % 5 == 0 ? WSEL_ROW_EXCLUDED : 0) |
                                    ((i + k) % 3 == 0 ? WSEL_ROW_BUSY : 0));
        score_rows(instance, t, scores);
        uint32_t best = 0, at_best = 0;
        for (uint32_t i = 0; i < 37; i++) {
            if (scores[i] < scores[best])
                best = i;
        }
        for (uint32_t i = 0; i < 37; i++)
            at_best += scores[i] == scores[best];
        assert_int_equal(at_best, 1);
        assert_true(scores[best] == 0.0);
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, 7, k, 0, NULL, 0);
        wsel_choice choice = {.struct_size = sizeof(choice)};
        assert_int_equal(wsel_plugin_entry.select(instance, &req, &t->table, &choice), 0);
        assert_int_equal(choice.row, best);
        assert_int_equal(choice.reason, WSEL_REASON_ROTATION);
        assert_int_equal(choice.flags, WSEL_CHOICE_SCORED);
        assert_true(choice.score == 0.0);
    }
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

static void test_score_of_a_table_with_every_row_excluded_fails(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(3, NULL);
    t->flags[0] = t->flags[1] = t->flags[2] = WSEL_ROW_EXCLUDED;
    void *instance = harness_create(NULL, NULL, 0);
    double scores[3];
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 7, 1, 0, NULL, 0);
    assert_int_equal(wsel_plugin_entry.score(instance, &req, &t->table, scores),
                     WSEL_ENOCANDIDATE);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

/* Concurrency: THREADS threads select PER_THREAD times each on one
 * instance. Tickets 0 .. THREADS * PER_THREAD - 1 are each taken exactly
 * once, so each of ROWS rows is chosen exactly THREADS * PER_THREAD / ROWS
 * times, however the threads interleave. */
#define THREADS    4
#define PER_THREAD 30000
#define ROWS       3

typedef struct worker_arg {
    void *instance;
    const harness_table *table;
    uint32_t counts[ROWS];
    int32_t failures;
} worker_arg;

static void *select_many(void *p)
{
    worker_arg *w = p;
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 3, 1, 0, NULL, 0);
    for (uint32_t k = 0; k < PER_THREAD; k++) {
        wsel_choice choice = {.struct_size = sizeof(choice)};
        if (wsel_plugin_entry.select(w->instance, &req, &w->table->table, &choice) != 0 ||
            choice.row >= ROWS) {
            w->failures++;
            continue;
        }
        w->counts[choice.row]++;
    }
    return NULL;
}

static void test_concurrent_selects_share_rows_exactly_evenly(void **state)
{
    (void)state;
    harness_table *t = harness_table_new(ROWS, NULL);
    void *instance = harness_create(NULL, NULL, 0);
    pthread_t threads[THREADS];
    worker_arg args[THREADS];
    memset(args, 0, sizeof(args));
    for (int i = 0; i < THREADS; i++) {
        args[i].instance = instance;
        args[i].table = t;
        assert_int_equal(pthread_create(&threads[i], NULL, select_many, &args[i]), 0);
    }
    uint32_t total[ROWS] = {0};
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        assert_int_equal(args[i].failures, 0);
        for (int r = 0; r < ROWS; r++)
            total[r] += args[i].counts[r];
    }
    for (int r = 0; r < ROWS; r++)
        assert_int_equal(total[r], THREADS * PER_THREAD / ROWS);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_is_concurrent_without_parameters),
        cmocka_unit_test(test_rows_are_visited_in_turn),
        cmocka_unit_test(test_excluded_rows_are_left_out_of_the_rotation),
        cmocka_unit_test(test_busy_rows_are_left_out_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_busy_rows_rotate_when_every_eligible_row_is_busy),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_a_host_whose_eligible_rule_leaves_no_row_is_refused),
        cmocka_unit_test(test_two_instances_keep_separate_turns),
        cmocka_unit_test(test_concurrent_selects_share_rows_exactly_evenly),
        cmocka_unit_test(test_score_is_the_distance_ahead_of_the_cursor),
        cmocka_unit_test(test_rows_outside_the_rotation_score_the_rotation_length),
        cmocka_unit_test(test_argmin_of_the_scores_is_the_next_answer),
        cmocka_unit_test(test_score_of_a_table_with_every_row_excluded_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
