// SPDX-License-Identifier: Apache-2.0
/*
 * test_validate_run.c -- each conformance check runs in its own process:
 * a crash, an exit, a hang or a verdict all come back as a result.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "validate.h"

static const vcontext ctx = {.path = "/nonexistent.so", .config = NULL, .seed = 7};

static void passes_with_a_note(const vcontext *c, vcheck_result *res)
{
    res->p50_ns = 12.5;
    snprintf(res->detail, sizeof(res->detail), "seed %llu", (unsigned long long)c->seed);
}

static void fails_twice(const vcontext *c, vcheck_result *res)
{
    (void)c;
    vfail(res, "first %d", 1);
    vfail(res, "second %d", 2);
}

static void skips(const vcontext *c, vcheck_result *res)
{
    (void)c;
    vskip(res, "not declared");
}

static void crashes(const vcontext *c, vcheck_result *res)
{
    (void)c;
    (void)res;
    raise(SIGSEGV);
}

static void exits(const vcontext *c, vcheck_result *res)
{
    (void)c;
    (void)res;
    _exit(3);
}

static void hangs(const vcontext *c, vcheck_result *res)
{
    (void)c;
    (void)res;
    for (;;)
        pause();
}

/* A ceiling no check that ends can reach, however loaded the machine: only
 * the hang waits for its (short) timeout. */
#define NEVER_REACHED_S 60

static void run(vcheck_fn fn, unsigned timeout_s, vcheck_result *out)
{
    const vcheck check = {"under_test", fn};
    vcheck_run_isolated(&check, &ctx, timeout_s, out);
}

static void test_a_passing_check_returns_its_verdict_and_figures(void **state)
{
    (void)state;
    vcheck_result r;
    run(passes_with_a_note, NEVER_REACHED_S, &r);
    assert_int_equal(r.status, VCHECK_PASS);
    assert_true(r.p50_ns == 12.5);
    assert_string_equal(r.detail, "seed 7");
}

static void test_the_first_failure_is_the_one_reported(void **state)
{
    (void)state;
    vcheck_result r;
    run(fails_twice, NEVER_REACHED_S, &r);
    assert_int_equal(r.status, VCHECK_FAIL);
    assert_string_equal(r.detail, "first 1");
}

static void test_a_skip_is_reported_with_its_reason(void **state)
{
    (void)state;
    vcheck_result r;
    run(skips, NEVER_REACHED_S, &r);
    assert_int_equal(r.status, VCHECK_SKIP);
    assert_string_equal(r.detail, "not declared");
}

static void test_a_crash_fails_the_check_naming_the_signal(void **state)
{
    (void)state;
    vcheck_result r;
    run(crashes, NEVER_REACHED_S, &r);
    assert_int_equal(r.status, VCHECK_FAIL);
    assert_non_null(strstr(r.detail, "signal 11"));
}

static void test_an_exit_without_verdict_fails_the_check(void **state)
{
    (void)state;
    vcheck_result r;
    run(exits, NEVER_REACHED_S, &r);
    assert_int_equal(r.status, VCHECK_FAIL);
    assert_non_null(strstr(r.detail, "status 3"));
}

static void test_a_hang_is_killed_after_the_timeout(void **state)
{
    (void)state;
    vcheck_result r;
    run(hangs, 1, &r);
    assert_int_equal(r.status, VCHECK_FAIL);
    assert_non_null(strstr(r.detail, "timed out"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_passing_check_returns_its_verdict_and_figures),
        cmocka_unit_test(test_the_first_failure_is_the_one_reported),
        cmocka_unit_test(test_a_skip_is_reported_with_its_reason),
        cmocka_unit_test(test_a_crash_fails_the_check_naming_the_signal),
        cmocka_unit_test(test_an_exit_without_verdict_fails_the_check),
        cmocka_unit_test(test_a_hang_is_killed_after_the_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
