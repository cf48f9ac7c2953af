// SPDX-License-Identifier: Apache-2.0
/*
 * test_switch.c -- switching the live policy: success, refusal keeping the
 * old policy, switching under concurrent selects, and reloading a file
 * replaced by rename.
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "testutil.h"

typedef struct fixture {
    char *dir;
    tu_log log;
    wsel_host *host;
    tu_table table;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = tu_temp_dir();
    tu_log_init(&f->log);
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.log = tu_log_sink;
    opts.log_user = &f->log;
    opts.seed = 7;
    assert_int_equal(wsel_host_create(&opts, &f->host), 0);
    tu_table_init(&f->table, 4, 2, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    wsel_host_destroy(f->host);
    tu_table_free(&f->table);
    tu_log_free(&f->log);
    tu_remove_tree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static int32_t select_row(fixture *f, uint32_t *row)
{
    wsel_choice c = {0};
    int32_t rc = wsel_host_select(f->host, &f->table.request, &f->table.buf.table, &c);
    *row = c.row;
    return rc;
}

static void test_switch_makes_the_plugin_answer(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_good", "good.so");
    char err[512];
    assert_int_equal(wsel_host_switch(f->host, path, "{\"row\": 3}", err, sizeof(err)),
                     0);
    assert_string_equal(wsel_host_policy_name(f->host), "fx_good");
    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 3);
    wsel_host_counters c;
    wsel_host_get_counters(f->host, &c);
    assert_int_equal(c.switches, 1);
    assert_int_equal(c.plugin_answers, 1);
    assert_int_equal(c.selects, 1);
    assert_int_equal(tu_log_count(&f->log, "fx_good: created (row 3"), 1);
    free(path);
}

static void test_failed_switch_keeps_the_old_policy(void **state)
{
    fixture *f = *state;
    char *good = tu_install_fixture(f->dir, "fx_good", "good.so");
    char *bad = tu_install_fixture(f->dir, "fx_create_fails", "bad.so");
    char err[512];
    assert_int_equal(wsel_host_switch(f->host, good, "{\"row\": 2}", err, sizeof(err)),
                     0);

    assert_int_equal(wsel_host_switch(f->host, bad, NULL, err, sizeof(err)), WSEL_ENOMEM);
    assert_non_null(strstr(err, "bad.so: plugin fx_create_fails create failed"));
    assert_int_equal(
        wsel_host_switch(f->host, good, "{\"row\": 99999}", err, sizeof(err)),
        WSEL_ECONFIG);
    assert_non_null(strstr(err, "config: key 'row'"));
    assert_int_equal(
        wsel_host_switch(f->host, "/nonexistent/p.so", NULL, err, sizeof(err)),
        WSEL_ENOENT);

    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 2);
    assert_string_equal(wsel_host_policy_name(f->host), "fx_good");
    wsel_host_counters c;
    wsel_host_get_counters(f->host, &c);
    assert_int_equal(c.switches, 1);
    assert_int_equal(c.failed_switches, 3);
    free(good);
    free(bad);
}

static void test_switch_replaces_one_plugin_by_another(void **state)
{
    fixture *f = *state;
    char *a = tu_install_fixture(f->dir, "fx_reload_a", "a.so");
    char *b = tu_install_fixture(f->dir, "fx_reload_b", "b.so");
    char err[512];
    uint32_t row;
    assert_int_equal(wsel_host_switch(f->host, a, NULL, err, sizeof(err)), 0);
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 0);
    assert_int_equal(wsel_host_switch(f->host, b, NULL, err, sizeof(err)), 0);
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 1);
    free(a);
    free(b);
}

static void test_switch_to_a_file_replaced_by_rename_loads_the_new_code(void **state)
{
    fixture *f = *state;
    char *a = tu_install_fixture(f->dir, "fx_reload_a", "policy.so");
    char *b = tu_install_fixture(f->dir, "fx_reload_b", "policy.so.new");
    char *a2 = tu_install_fixture(f->dir, "fx_reload_a", "policy.so.old");
    char err[512];
    uint32_t row;
    assert_int_equal(wsel_host_switch(f->host, a, NULL, err, sizeof(err)), 0);
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 0);

    /* Replace by rename (new inode), switch to the same path: new code. */
    assert_int_equal(rename(b, a), 0);
    assert_int_equal(wsel_host_switch(f->host, a, NULL, err, sizeof(err)), 0);
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 1);

    /* And back again: the first build under the same path once more. */
    assert_int_equal(rename(a2, a), 0);
    assert_int_equal(wsel_host_switch(f->host, a, NULL, err, sizeof(err)), 0);
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 0);
    free(a);
    free(b);
    free(a2);
}

static void test_two_hosts_keep_their_own_policies_and_logs(void **state)
{
    fixture *f = *state;
    tu_log other_log;
    tu_log_init(&other_log);
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.log = tu_log_sink;
    opts.log_user = &other_log;
    wsel_host *other = NULL;
    assert_int_equal(wsel_host_create(&opts, &other), 0);

    char *path = tu_install_fixture(f->dir, "fx_good", "good.so");
    char err[512];
    assert_int_equal(wsel_host_switch(f->host, path, "{\"row\": 5}", err, sizeof(err)),
                     0);
    assert_int_equal(wsel_host_switch(other, path, "{\"row\": 6}", err, sizeof(err)), 0);
    assert_int_equal(tu_log_count(&f->log, "fx_good: created (row 5"), 1);
    assert_int_equal(tu_log_count(&f->log, "fx_good: created (row 6"), 0);
    assert_int_equal(tu_log_count(&other_log, "fx_good: created (row 6"), 1);

    uint32_t row;
    assert_int_equal(select_row(f, &row), WSEL_ANSWER_PLUGIN);
    assert_int_equal(row, 5);
    wsel_choice c;
    assert_int_equal(wsel_host_select(other, &f->table.request, &f->table.buf.table, &c),
                     WSEL_ANSWER_PLUGIN);
    assert_int_equal(c.row, 6);
    wsel_host_destroy(other);
    tu_log_free(&other_log);
    free(path);
}

typedef struct selector {
    fixture *f;
    atomic_int *stop;
    /* Written by the select thread only; read by the switching thread. */
    atomic_uint_fast64_t answers;
    uint64_t bad;
} selector;

#define SELECT_THREADS 4
/* Switches the test makes at least, and at most while it waits for every
 * select thread to answer during the switching. */
#define MIN_SWITCHES 200
#define MAX_SWITCHES 1000000

static void *select_loop(void *arg)
{
    selector *s = arg;
    wsel_rng rng;
    wsel_request req = s->f->table.request;
    uint64_t answers = 0;
    while (!atomic_load(s->stop)) {
        req.request_id++;
        wsel_host_prepare_request(s->f->host, &req, &rng);
        wsel_choice c = {0};
        int32_t rc = wsel_host_select(s->f->host, &req, &s->f->table.buf.table, &c);
        /* Every answer comes from a live fx_good instance: row 0 or 1. */
        if (rc != WSEL_ANSWER_PLUGIN || c.row > 1)
            s->bad++;
        atomic_store_explicit(&s->answers, ++answers, memory_order_release);
    }
    return NULL;
}

static uint64_t answers_of(selector *s)
{
    return atomic_load_explicit(&s->answers, memory_order_acquire);
}

/* Whether every select thread has answered more than `since[i]` selects. */
static int all_answered_since(selector *sel, const uint64_t *since)
{
    for (int i = 0; i < SELECT_THREADS; i++)
        if (answers_of(&sel[i]) <= since[i])
            return 0;
    return 1;
}

static void test_switch_while_four_threads_select_never_falls_back(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_good", "good.so");
    char err[512];
    assert_int_equal(wsel_host_switch(f->host, path, "{\"row\": 0}", err, sizeof(err)),
                     0);

    atomic_int stop = 0;
    selector sel[SELECT_THREADS];
    pthread_t threads[SELECT_THREADS];
    uint64_t before[SELECT_THREADS] = {0};
    for (int i = 0; i < SELECT_THREADS; i++) {
        sel[i].f = f;
        sel[i].stop = &stop;
        atomic_init(&sel[i].answers, 0);
        sel[i].bad = 0;
        assert_int_equal(pthread_create(&threads[i], NULL, select_loop, &sel[i]), 0);
    }
    /* Every thread is selecting before the switching starts: on a busy
     * machine a thread may wait a while for a core, and switches made
     * before it ran would prove nothing. A host that never answers hangs
     * here and the test's timeout reports it. */
    while (!all_answered_since(sel, before))
        sched_yield();
    for (int i = 0; i < SELECT_THREADS; i++)
        before[i] = answers_of(&sel[i]);

    /* Each switch destroys the previous instance; fx_good answers an error
     * if a select ever reaches a destroyed one (and ASan would report the
     * use after free). Switch at least MIN_SWITCHES times, and on until
     * every thread has answered selects during the switching, whatever
     * the scheduler did. */
    int switches = 0;
    while (switches < MIN_SWITCHES || !all_answered_since(sel, before)) {
        if (switches == MAX_SWITCHES) {
            for (int i = 0; i < SELECT_THREADS; i++)
                if (answers_of(&sel[i]) <= before[i])
                    fail_msg("select thread %d answered no select during %d switches", i,
                             switches);
        }
        const char *config = (switches & 1) ? "{\"row\": 1}" : "{\"row\": 0}";
        assert_int_equal(wsel_host_switch(f->host, path, config, err, sizeof(err)), 0);
        switches++;
        if (switches >= MIN_SWITCHES)
            sched_yield(); /* let a thread still waiting for a core have it */
    }
    atomic_store(&stop, 1);
    uint64_t answers = 0, bad = 0;
    for (int i = 0; i < SELECT_THREADS; i++) {
        pthread_join(threads[i], NULL);
        answers += answers_of(&sel[i]);
        bad += sel[i].bad;
    }
    assert_int_equal(bad, 0);
    assert_true(answers > 0);
    wsel_host_counters c;
    wsel_host_get_counters(f->host, &c);
    assert_int_equal(c.switches, (uint64_t)switches + 1);
    assert_int_equal(c.fallbacks, 0);
    assert_int_equal(c.selects, answers);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_switch_makes_the_plugin_answer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failed_switch_keeps_the_old_policy, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_switch_replaces_one_plugin_by_another, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_switch_to_a_file_replaced_by_rename_loads_the_new_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_hosts_keep_their_own_policies_and_logs,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_switch_while_four_threads_select_never_falls_back, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
