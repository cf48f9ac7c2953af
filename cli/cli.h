// SPDX-License-Identifier: Apache-2.0
/*
 * cli.h -- the command-line parser of `wsel` and `wsel-engine`.
 *
 * A command is a table of options (cli_option). cli_parse drives
 * getopt_long from it, stores each value into the caller's struct and
 * words every error the same way; cli_usage prints --help from the same
 * table. Every command accepts -h and --help.
 *
 * Errors, written to err without the program's name:
 *   unknown option '--x' (see wsel sim --help)
 *   missing value for --x (N)
 *   --x 'v': expected an integer | expected a number | out of range [a, b]
 *   --x takes no value
 *   unexpected argument 'a' (see wsel sim --help)
 *   missing PLUGIN (see wsel info --help)
 *   one PLUGIN only ('a' is extra)
 * Long options must be spelt whole (getopt_long's abbreviations are
 * refused as unknown); `--x=v` is the same as `--x v`.
 *
 * Not thread-safe (getopt_long's state is global). OWNERSHIP: tables are
 * static; string values stored point into argv.
 */
#ifndef WSEL_CLI_H
#define WSEL_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_OK    0
#define CLI_HELP  1 /* -h or --help was given: print cli_usage, exit 0 */
#define CLI_USAGE 2 /* bad usage, message in err: exit 2 */

typedef enum cli_kind {
    CLI_FLAG,     /* no value: stores .value (1 when 0) into an int */
    CLI_CLEAR,    /* no value: stores 0 into an int (--no-X) */
    CLI_U32,      /* a decimal integer into a uint32_t */
    CLI_U64,      /* a decimal integer into a uint64_t */
    CLI_DOUBLE,   /* a finite number into a double */
    CLI_STR,      /* the text itself into a const char * */
    CLI_CHOICE,   /* one of .choices: its index into a uint32_t */
    CLI_U32_LIST, /* "N,N,...": up to .max_count integers in [min, max] into a
                   * uint32_t array, their count into the uint32_t at .count_offset */
    CLI_CALL,     /* handed to .call (with or without a value, as .arg says) */
} cli_kind;

/* Option flags. */
#define CLI_ANY_BASE  1u /* integers: 0x hex and 0 octal too (strtoull base 0) */
#define CLI_ABOVE_MIN 2u /* numbers: min itself is refused: (min, max] */

struct cli_value;

typedef struct cli_option {
    const char *name; /* long name, without "--" */
    const char *arg;  /* the value's name in --help; NULL: takes no value */
    const char *help; /* '\n' starts a continuation line */
    const char *def;  /* shown as [default: DEF]; NULL: not shown */
    cli_kind kind;
    size_t offset;   /* of the field in the group's target */
    double min, max; /* numbers: accepted range, shown in --help; both 0: any */
    unsigned flags;  /* CLI_ANY_BASE, CLI_ABOVE_MIN */
    int value;       /* CLI_FLAG: stored value, 0 meaning 1 */
    const char *const *choices;     /* CLI_CHOICE: NULL-terminated */
    size_t count_offset, max_count; /* CLI_U32_LIST */
    /* CLI_CALL: 0, or CLI_USAGE after cli_fail. */
    int (*call)(void *target, const struct cli_value *v);
} cli_option;

/* {options, count} of a table, in a cli_group's initializer. */
#define CLI_TABLE(t) (t), sizeof(t) / sizeof((t)[0])

/* A group: a table and where its fields live (cli_parse's target +
 * target_offset). One group may serve several commands (wsel eval parses
 * wsel sim's beside its own). */
typedef struct cli_group {
    const char *title; /* --help heading paragraph; NULL: none */
    const cli_option *options;
    size_t count;
    size_t target_offset;
} cli_group;

typedef struct cli_command {
    const char *name;               /* "wsel sim": in messages and the usage line */
    const char *usage;              /* after "usage: NAME "; may hold '\n' */
    const char *about;              /* paragraph after the usage line; NULL: none */
    const cli_group *const *groups; /* an option in two: the first wins */
    size_t num_groups;
    size_t unlisted;    /* the last `unlisted` groups are left out of --help */
    const char *footer; /* after the options; NULL: none */
    /* One operand, required (wsel info PLUGIN): its name in messages and
     * the const char * field it is stored in. NULL: none. */
    const char *operand_name;
    size_t operand_offset;
    /*
     * Otherwise: arguments that are not options, in order. NULL: refused
     * as unexpected. With pass_unknown, unknown options (and their values,
     * which arrive as operands) come here too, in order.
     */
    int (*operand)(void *target, const struct cli_value *v);
    int pass_unknown;
} cli_command;

/* .groups and .num_groups of a cli_command, from an array. */
#define CLI_GROUPS(g) .groups = (g), .num_groups = sizeof(g) / sizeof((g)[0])

/*
 * Entries read as {CLI_OPT(name, arg, help, default), CLI_AS_...(...)}:
 * OFF is the field's offsetof in the group's target.
 */
#define CLI_OPT(n, a, h, d)     .name = (n), .arg = (a), .help = (h), .def = (d)
#define CLI_AS_FLAG(off)        .kind = CLI_FLAG, .offset = (off)
#define CLI_AS_CLEAR(off)       .kind = CLI_CLEAR, .offset = (off)
#define CLI_AS_STR(off)         .kind = CLI_STR, .offset = (off)
#define CLI_AS_U32(off, lo, hi) .kind = CLI_U32, .offset = (off), .min = (lo), .max = (hi)
#define CLI_AS_U64(off, lo, hi) .kind = CLI_U64, .offset = (off), .min = (lo), .max = (hi)
#define CLI_AS_DOUBLE(off, lo, hi)                                                       \
    .kind = CLI_DOUBLE, .offset = (off), .min = (lo), .max = (hi)
#define CLI_AS_CHOICE(off, list) .kind = CLI_CHOICE, .offset = (off), .choices = (list)
#define CLI_AS_CALL(fn)          .kind = CLI_CALL, .call = (fn)
#define CLI_AS_U32_LIST(off, count_off, max_n, lo, hi)                                   \
    .kind = CLI_U32_LIST, .offset = (off), .count_offset = (count_off),                  \
    .max_count = (max_n), .min = (lo), .max = (hi)

/* What a callback gets: the option (NULL for an operand), its text, the
 * option given just before it (NULL if none), where errors go. */
typedef struct cli_value {
    const cli_option *opt;
    const char *text;
    const cli_option *prev;
    const cli_command *cmd;
    char *err;
    size_t err_size;
} cli_value;

/* Parse argv[1..argc) into target. CLI_OK, CLI_HELP or CLI_USAGE (with a
 * message in err). Fields of options not given are left as they are:
 * set the defaults first. */
int cli_parse(const cli_command *cmd, void *target, int argc, char **argv, char *err,
              size_t err_size);

/* Print --help: usage, about, every listed option, footer. */
void cli_usage(FILE *out, const cli_command *cmd);

/* What a command does with cli_parse's CLI_HELP (usage on stdout) or
 * CLI_USAGE ("NAME: err" on stderr); the exit status, 0 or 2. */
int cli_report(const cli_command *cmd, int rc, const char *err);

/* Write "--NAME 'TEXT': " + fmt into v->err; returns CLI_USAGE. */
int cli_fail(const cli_value *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The number parsers behind the option kinds, for list values. 1 when
 * the whole of s is a number of that kind, else 0; *out written only then. */
int cli_parse_u64(const char *s, int any_base, uint64_t *out);
int cli_parse_double(const char *s, double *out);
/* "N,N,...": up to max_count decimal integers in [min, max] into out. The
 * count (at least 1), or -1 (out then partly written). */
int cli_parse_u32_list(const char *s, uint32_t *out, size_t max_count, uint32_t min,
                       uint32_t max);

#endif
