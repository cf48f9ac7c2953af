// SPDX-License-Identifier: Apache-2.0
/*
 * test_config.c -- wsel_config_parse against fx_good's parameter table:
 *   row (INT 0..1000, default 0), temperature (DOUBLE 0..10, default 0.5),
 *   d (INT 1..8, default 2), sticky (BOOL, default false),
 *   mode (ENUM fixed|argmin, default fixed).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "testutil.h"

#define NUM_PARAMS 5
#define SENTINEL   -12345.0

typedef struct fixture {
    char *dir;
    wsel_library *good;
    wsel_library *none; /* a plugin without parameters */
    double values[NUM_PARAMS];
    char err[1024];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = tu_temp_dir();
    char err[512];
    char *good = tu_install_fixture(f->dir, "fx_good", "good.so");
    char *none = tu_install_fixture(f->dir, "fx_returns_error", "none.so");
    if (wsel_library_open(good, NULL, &f->good, err, sizeof(err)) != 0 ||
        wsel_library_open(none, NULL, &f->none, err, sizeof(err)) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    free(good);
    free(none);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    wsel_library_close(f->good);
    wsel_library_close(f->none);
    tu_remove_tree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static int32_t parse(fixture *f, const char *json)
{
    for (int i = 0; i < NUM_PARAMS; i++)
        f->values[i] = SENTINEL;
    f->err[0] = '\0';
    return wsel_config_parse(f->good, json, f->values, f->err, sizeof(f->err));
}

static void expect_defaults(fixture *f)
{
    assert_true(f->values[0] == 0.0);
    assert_true(f->values[1] == 0.5);
    assert_true(f->values[2] == 2.0);
    assert_true(f->values[3] == 0.0);
    assert_true(f->values[4] == 0.0);
}

/* Refused with WSEL_ECONFIG, exactly `message`, values untouched. */
static void expect_refusal(fixture *f, const char *json, const char *message)
{
    assert_int_equal(parse(f, json), WSEL_ECONFIG);
    if (strcmp(f->err, message) != 0)
        fail_msg("for %s: got \"%s\", want \"%s\"", json, f->err, message);
    for (int i = 0; i < NUM_PARAMS; i++)
        assert_true(f->values[i] == SENTINEL);
}

static void test_null_empty_and_empty_object_give_defaults(void **state)
{
    fixture *f = *state;
    const char *inputs[] = {NULL, "", "{}", "  \n { } \t"};
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        assert_int_equal(parse(f, inputs[i]), 0);
        expect_defaults(f);
    }
}

static void test_every_type_is_read(void **state)
{
    fixture *f = *state;
    assert_int_equal(parse(f, "{\"row\": 7, \"temperature\": 2.5e0, \"d\": 8, "
                              "\"sticky\": true, \"mode\": \"argmin\"}"),
                     0);
    assert_true(f->values[0] == 7.0);
    assert_true(f->values[1] == 2.5);
    assert_true(f->values[2] == 8.0);
    assert_true(f->values[3] == 1.0);
    assert_true(f->values[4] == 1.0);
}

static void test_absent_keys_keep_their_defaults(void **state)
{
    fixture *f = *state;
    assert_int_equal(parse(f, "{\"d\": 3}"), 0);
    assert_true(f->values[2] == 3.0);
    assert_true(f->values[1] == 0.5);
}

static void test_integer_written_with_fraction_zero_is_an_integer(void **state)
{
    fixture *f = *state;
    assert_int_equal(parse(f, "{\"d\": 4.0, \"row\": 1e2}"), 0);
    assert_true(f->values[2] == 4.0);
    assert_true(f->values[0] == 100.0);
}

static void test_refuses_unknown_key_and_lists_accepted_ones(void **state)
{
    expect_refusal(*state, "{\"temprature\": 1}",
                   "config: unknown key 'temprature' (plugin fx_good accepts: row, "
                   "temperature, d, sticky, mode)");
}

static void test_refuses_any_key_for_plugin_without_parameters(void **state)
{
    fixture *f = *state;
    assert_int_equal(
        wsel_config_parse(f->none, "{\"x\": 1}", NULL, f->err, sizeof(f->err)),
        WSEL_ECONFIG);
    assert_string_equal(f->err,
                        "config: unknown key 'x' (plugin fx_returns_error accepts no "
                        "parameters)");
    assert_int_equal(wsel_config_parse(f->none, "{}", NULL, f->err, sizeof(f->err)), 0);
}

static void test_refuses_duplicate_key(void **state)
{
    expect_refusal(*state, "{\"d\": 2, \"d\": 3}", "config: duplicate key 'd'");
}

static void test_refuses_out_of_range_value(void **state)
{
    expect_refusal(*state, "{\"d\": 9}", "config: key 'd': 9 is out of range [1, 8]");
    expect_refusal(*state, "{\"temperature\": -0.1}",
                   "config: key 'temperature': -0.1 is out of range [0, 10]");
}

static void test_refuses_non_finite_value(void **state)
{
    expect_refusal(*state, "{\"temperature\": 1e999}",
                   "config: key 'temperature': 1e999 is not finite");
}

static void test_refuses_fraction_for_integer(void **state)
{
    expect_refusal(*state, "{\"d\": 2.5}", "config: key 'd': 2.5 is not an integer");
}

static void test_refuses_wrong_types(void **state)
{
    expect_refusal(*state, "{\"temperature\": \"hot\"}",
                   "config: key 'temperature': expected a number, got a string");
    expect_refusal(*state, "{\"d\": true}",
                   "config: key 'd': expected an integer, got a "
                   "boolean");
    expect_refusal(*state, "{\"sticky\": 1}",
                   "config: key 'sticky': expected true or false, got a number");
    expect_refusal(*state, "{\"mode\": 1}",
                   "config: key 'mode': expected a string, got a number");
    expect_refusal(*state, "{\"d\": null}",
                   "config: key 'd': expected an integer, got null");
    expect_refusal(*state, "{\"d\": [1]}",
                   "config: key 'd': expected an integer, got an array");
    expect_refusal(*state, "{\"d\": {\"x\": 1}}",
                   "config: key 'd': expected an integer, got an object");
}

static void test_refuses_enum_value_outside_choices(void **state)
{
    expect_refusal(*state, "{\"mode\": \"fastest\"}",
                   "config: key 'mode': 'fastest' is not one of: fixed, argmin");
}

static void test_refuses_numbers_outside_json_grammar(void **state)
{
    expect_refusal(*state, "{\"d\": 02}",
                   "config: malformed JSON (a number with a leading zero at byte 7)");
    expect_refusal(*state, "{\"d\": 2.}",
                   "config: malformed JSON (a '.' without digits after it at byte 8)");
    expect_refusal(*state, "{\"d\": -}",
                   "config: malformed JSON (a '-' without digits at byte 7)");
    expect_refusal(*state, "{\"d\": 0x10}",
                   "config: malformed JSON (a hex number (JSON numbers are decimal) at "
                   "byte 7)");
    expect_refusal(*state, "{\"d\": +2}",
                   "config: malformed JSON (an unexpected character at byte 6)");
}

/* Issue 13 item 16: string escapes are decoded, in keys and values. */
static void test_decodes_string_escapes(void **state)
{
    fixture *f = *state;
    assert_int_equal(parse(f, "{\"\\u0064\": 3, \"mode\": \"\\u0061rgmin\"}"), 0);
    assert_true(f->values[2] == 3.0);
    assert_true(f->values[4] == 1.0);
    assert_int_equal(parse(f, "{\"m\\u006fde\": \"fi\\u0078ed\"}"), 0);
    assert_true(f->values[4] == 0.0);
    /* An escaped NUL never matches a name. */
    assert_int_equal(parse(f, "{\"d\\u0000\": 3}"), WSEL_ECONFIG);
}

/* Issue 13 item 14: input limits, each refusal naming its limit, found in
 * one linear pass (a 320 KB nested config took 6.3 s with jsmn). */
static void test_refuses_inputs_over_the_limits(void **state)
{
    fixture *f = *state;
    size_t n = 30000; /* 60 KB, under the byte limit */
    char *deep = malloc(2 * n + 16);
    assert_non_null(deep);
    strcpy(deep, "{\"d\": ");
    size_t k = strlen(deep);
    memset(deep + k, '[', n);
    memset(deep + k + n, ']', n);
    strcpy(deep + k + 2 * n, "}");
    assert_int_equal(parse(f, deep), WSEL_ECONFIG);
    if (strstr(f->err, "nested deeper than 16 levels (limit 16)") == NULL)
        fail_msg("deep: %s", f->err);
    free(deep);

    char *wide = malloc(70000);
    assert_non_null(wide);
    strcpy(wide, "{\"d\": [");
    char *w = wide + strlen(wide);
    for (int i = 0; i < 4100; i++) {
        if (i)
            *w++ = ',';
        *w++ = '1';
    }
    strcpy(w, "]}");
    assert_int_equal(parse(f, wide), WSEL_ECONFIG);
    if (strstr(f->err, "more than 4096 JSON values (limit 4096)") == NULL)
        fail_msg("wide: %s", f->err);

    memset(wide, ' ', 69990);
    wide[0] = '{';
    strcpy(wide + 69990, "}");
    assert_int_equal(parse(f, wide), WSEL_ECONFIG);
    if (strstr(f->err, "text is 69991 bytes, over the limit of 65536") == NULL)
        fail_msg("long: %s", f->err);
    free(wide);
}

static void test_refuses_non_object(void **state)
{
    expect_refusal(*state, "[1, 2]", "config: expected a JSON object, got an array");
    expect_refusal(*state, "\"d\"", "config: expected a JSON object, got a string");
    expect_refusal(*state, "3 ", "config: expected a JSON object, got a number");
}

static void test_refuses_malformed_json(void **state)
{
    fixture *f = *state;
    const char *inputs[] = {"{",           "{\"d\": 2",    "{\"d\" 2}", "{\"d\": 2,}",
                            "{} {}",       "{\"d\": 2} x", "{d: 2}",    "}",
                            "{\"d\":: 2}", "nul"};
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        if (parse(f, inputs[i]) != WSEL_ECONFIG)
            fail_msg("accepted malformed %s", inputs[i]);
        assert_true(strncmp(f->err, "config: ", 8) == 0);
        assert_true(f->values[0] == SENTINEL);
    }
}

static void test_quotes_hostile_keys_safely(void **state)
{
    fixture *f = *state;
    assert_int_equal(
        parse(f, "{\"a\\u0000\\n\\tbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
                 "bbbbbbbbbbbbbbbbbbb\": 1}"),
        WSEL_ECONFIG);
    assert_non_null(strstr(f->err, "config: unknown key 'a\\u0000"));
    assert_non_null(strstr(f->err, "...'"));
    assert_true(strlen(f->err) < sizeof(f->err) - 1);
}

static void test_short_error_buffer_is_truncated_not_overrun(void **state)
{
    fixture *f = *state;
    char small[8];
    memset(small, 'z', sizeof(small));
    assert_int_equal(wsel_config_parse(f->good, "{\"d\": 9}", f->values, small, 5),
                     WSEL_ECONFIG);
    assert_string_equal(small, "conf");
    assert_int_equal(small[5], 'z');
    assert_int_equal(wsel_config_parse(f->good, "{\"d\": 9}", f->values, NULL, 0),
                     WSEL_ECONFIG);
}

/* Mutations of a valid configuration (fixed seed) must never crash and
 * must either succeed or explain themselves. Cheap in-suite robustness;
 * the libFuzzer harness in tests/fuzz goes further. */
static void test_survives_random_mutations(void **state)
{
    fixture *f = *state;
    static const char base[] = "{\"row\": 7, \"temperature\": 2.5, \"d\": 8, "
                               "\"sticky\": true, \"mode\": \"argmin\"}";
    static const char alphabet[] = "{}[]\":,.-+eE0123456789 truefalsnl\\abcdmo\t\n";
    wsel_rng rng;
    wsel_rng_seed(&rng, 2024);
    char buf[sizeof(base) + 16];
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(buf, base, sizeof(base));
        size_t len = sizeof(base) - 1;
        uint32_t edits = 1 + wsel_rng_below(&rng, 4);
        for (uint32_t e = 0; e < edits; e++) {
            uint32_t at = wsel_rng_below(&rng, (uint32_t)len);
            uint32_t op = wsel_rng_below(&rng, 3);
            char c = alphabet[wsel_rng_below(&rng, sizeof(alphabet) - 1)];
            if (op == 0) {
                buf[at] = c;
            } else if (op == 1 && len > 1) {
                memmove(buf + at, buf + at + 1, len - at);
                len--;
            } else if (len + 1 < sizeof(buf)) {
                memmove(buf + at + 1, buf + at, len - at + 1);
                buf[at] = c;
                len++;
            }
        }
        buf[len] = '\0';
        int32_t rc = parse(f, buf);
        assert_true(rc == 0 || rc == WSEL_ECONFIG);
        if (rc != 0)
            assert_true(strncmp(f->err, "config: ", 8) == 0);
    }
}

#define T(name) cmocka_unit_test(name)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_null_empty_and_empty_object_give_defaults),
        T(test_every_type_is_read),
        T(test_absent_keys_keep_their_defaults),
        T(test_integer_written_with_fraction_zero_is_an_integer),
        T(test_refuses_unknown_key_and_lists_accepted_ones),
        T(test_refuses_any_key_for_plugin_without_parameters),
        T(test_refuses_duplicate_key),
        T(test_refuses_out_of_range_value),
        T(test_refuses_non_finite_value),
        T(test_refuses_fraction_for_integer),
        T(test_refuses_wrong_types),
        T(test_refuses_enum_value_outside_choices),
        T(test_refuses_numbers_outside_json_grammar),
        T(test_decodes_string_escapes),
        T(test_refuses_inputs_over_the_limits),
        T(test_refuses_non_object),
        T(test_refuses_malformed_json),
        T(test_quotes_hostile_keys_safely),
        T(test_short_error_buffer_is_truncated_not_overrun),
        T(test_survives_random_mutations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
