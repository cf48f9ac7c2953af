// SPDX-License-Identifier: Apache-2.0
/*
 * test_cli.c -- cli/: values stored by kind, every error worded once,
 * --help from the table, unknown options handed on in order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"

typedef struct target {
    int flag, on;
    uint32_t u32;
    uint64_t u64;
    double d;
    const char *str;
    uint32_t choice;
    const char *after; /* the option before --after */
    const char *operand;
    uint32_t list[3], list_count;
    char passed[256];
} target;

static const char *const colours[] = {"red", "green", "blue", NULL};

static int note_prev(void *t, const cli_value *v)
{
    ((target *)t)->after = v->prev ? v->prev->name : "(none)";
    return CLI_OK;
}

static int pass(void *t, const cli_value *v)
{
    target *x = t;
    size_t n = strlen(x->passed);
    snprintf(x->passed + n, sizeof(x->passed) - n, "%s%s", n ? " " : "", v->text);
    return CLI_OK;
}

#define OFF(f) offsetof(target, f)
static const cli_option table[] = {
    {CLI_OPT("flag", NULL, "a flag", NULL), CLI_AS_FLAG(OFF(flag))},
    {CLI_OPT("no-on", NULL, "clears on", NULL), CLI_AS_CLEAR(OFF(on))},
    {CLI_OPT("count", "N", "a count", "3"), CLI_AS_U32(OFF(u32), 1, 10)},
    {CLI_OPT("seed", "N", "a seed", NULL), CLI_AS_U64(OFF(u64), 0, 0),
     .flags = CLI_ANY_BASE},
    {CLI_OPT("rate", "R", "a rate", NULL), CLI_AS_DOUBLE(OFF(d), 0, 1),
     .flags = CLI_ABOVE_MIN},
    {CLI_OPT("name", "S", "a name", NULL), CLI_AS_STR(OFF(str))},
    {CLI_OPT("colour", "C", "a colour", "red"), CLI_AS_CHOICE(OFF(choice), colours)},
    {CLI_OPT("sizes", "LIST", "up to 3 sizes", NULL),
     CLI_AS_U32_LIST(OFF(list), OFF(list_count), 3, 1, 9)},
    {CLI_OPT("after", "X", "notes the option before", NULL), CLI_AS_CALL(note_prev)},
    {CLI_OPT("counter", "N", "shares a prefix with --count", NULL),
     CLI_AS_U32(OFF(u32), 0, 0)},
};
static const cli_group group = {NULL, table, sizeof(table) / sizeof(table[0]), 0};
static const cli_group *const groups[] = {&group};
static const cli_command cmd = {
    .name = "wsel test", .usage = "[OPTIONS]", .groups = groups, .num_groups = 1};

/* Parse a space-separated line (argv[0] added) into *t with command c. */
static int parse_with(const cli_command *c, target *t, const char *line, char *err,
                      size_t size)
{
    static char buf[512];
    static char *argv[32];
    int argc = 0;
    snprintf(buf, sizeof(buf), "%s", line);
    argv[argc++] = "test";
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    memset(t, 0, sizeof(*t));
    t->on = 1;
    err[0] = '\0';
    return cli_parse(c, t, argc, argv, err, size);
}

static int parse(target *t, const char *line, char *err)
{
    return parse_with(&cmd, t, line, err, 256);
}

static void test_stores_every_kind_of_value(void **state)
{
    (void)state;
    target t;
    char err[256];
    assert_int_equal(parse(&t,
                           "--flag --no-on --count 7 --seed 0x10 --rate=0.5 --name x "
                           "--colour blue --sizes 4,5",
                           err),
                     CLI_OK);
    assert_int_equal(t.flag, 1);
    assert_int_equal(t.on, 0);
    assert_int_equal(t.u32, 7);
    assert_int_equal(t.u64, 16);
    assert_true(t.d == 0.5);
    assert_string_equal(t.str, "x");
    assert_int_equal(t.choice, 2);
    assert_int_equal(t.list_count, 2);
    assert_int_equal(t.list[1], 5);
}

static void test_words_each_error_once(void **state)
{
    (void)state;
    static const struct {
        const char *line, *message;
    } cases[] = {
        {"--frob", "unknown option '--frob' (see wsel test --help)"},
        {"--cou 3", "unknown option '--cou' (see wsel test --help)"},
        {"-x", "unknown option '-x' (see wsel test --help)"},
        {"--count", "missing value for --count (N)"},
        {"--count 11", "--count '11': out of range [1, 10]"},
        {"--count +3", "--count '+3': expected an integer"},
        {"--rate 0", "--rate '0': out of range (0, 1]"},
        {"--rate x", "--rate 'x': expected a number"},
        {"--colour pink", "--colour 'pink': expected red, green or blue"},
        {"--flag=1", "--flag takes no value"},
        {"--sizes 1,2,3,4", "--sizes '1,2,3,4': expected up to 3 integers in [1, 9], "
                            "comma-separated"},
        {"stray", "unexpected argument 'stray' (see wsel test --help)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        target t;
        char err[256];
        assert_int_equal(parse(&t, cases[i].line, err), CLI_USAGE);
        assert_string_equal(err, cases[i].message);
    }
}

static void test_help_is_asked_with_h_or_help(void **state)
{
    (void)state;
    target t;
    char err[256];
    assert_int_equal(parse(&t, "--count 2 --help", err), CLI_HELP);
    assert_int_equal(parse(&t, "-h", err), CLI_HELP);
}

static void test_callback_sees_the_option_before(void **state)
{
    (void)state;
    target t;
    char err[256];
    assert_int_equal(parse(&t, "--name a --after 1", err), CLI_OK);
    assert_string_equal(t.after, "name");
    assert_int_equal(parse(&t, "--after 1", err), CLI_OK);
    assert_string_equal(t.after, "(none)");
}

static void test_hands_unknown_options_on_in_order(void **state)
{
    (void)state;
    cli_command c = cmd;
    c.operand = pass;
    c.pass_unknown = 1;
    target t;
    char err[256];
    assert_int_equal(
        parse_with(&c, &t, "--time-scale 10 --count 2 -q --x=1 file", err, sizeof(err)),
        CLI_OK);
    assert_string_equal(t.passed, "--time-scale 10 -q --x=1 file");
    assert_int_equal(t.u32, 2);
}

static void test_requires_its_one_operand(void **state)
{
    (void)state;
    cli_command c = cmd;
    c.operand_name = "PLUGIN";
    c.operand_offset = OFF(operand);
    target t;
    char err[256];
    assert_int_equal(parse_with(&c, &t, "--flag p2c", err, sizeof(err)), CLI_OK);
    assert_string_equal(t.operand, "p2c");
    assert_int_equal(parse_with(&c, &t, "--flag", err, sizeof(err)), CLI_USAGE);
    assert_string_equal(err, "missing PLUGIN (see wsel test --help)");
    assert_int_equal(parse_with(&c, &t, "a b", err, sizeof(err)), CLI_USAGE);
    assert_string_equal(err, "one PLUGIN only ('b' is extra)");
}

static void test_first_group_wins_a_shared_name(void **state)
{
    (void)state;
    static const cli_option first[] = {
        {CLI_OPT("flag", NULL, "the first group's", NULL), CLI_AS_FLAG(OFF(on))},
    };
    static const cli_group first_group = {NULL, CLI_TABLE(first), 0};
    static const cli_group *const both[] = {&first_group, &group};
    cli_command c = cmd;
    c.groups = both;
    c.num_groups = 2;
    target t;
    char err[256];
    assert_int_equal(parse_with(&c, &t, "--no-on --flag --count 2", err, sizeof(err)),
                     CLI_OK);
    assert_int_equal(t.on, 1);
    assert_int_equal(t.flag, 0);
    assert_int_equal(t.u32, 2);
}

static void test_usage_comes_from_the_table(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    cli_usage(f, &cmd);
    fclose(f);
    assert_non_null(strstr(text, "usage: wsel test [OPTIONS]\n"));
    assert_non_null(
        strstr(text, "  --count N     a count [default: 3] [range: 1..10]\n"));
    assert_non_null(strstr(text, "--rate R      a rate [range: above 0, up to 1]\n"));
    assert_non_null(strstr(text, "--help        print this help (also -h)\n"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stores_every_kind_of_value),
        cmocka_unit_test(test_words_each_error_once),
        cmocka_unit_test(test_help_is_asked_with_h_or_help),
        cmocka_unit_test(test_callback_sees_the_option_before),
        cmocka_unit_test(test_hands_unknown_options_on_in_order),
        cmocka_unit_test(test_requires_its_one_operand),
        cmocka_unit_test(test_first_group_wins_a_shared_name),
        cmocka_unit_test(test_usage_comes_from_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
