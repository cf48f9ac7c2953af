// SPDX-License-Identifier: Apache-2.0
/*
 * cli.c -- one option table drives getopt_long, the values' checks, the
 * error messages and --help.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CLI_MAX_OPTIONS 128
#define CLI_FIRST_VAL   256 /* getopt_long's val of option i: 256 + i */
#define CLI_HELP_WIDTH  28  /* widest "--name ARG" column */

/* An option of the flattened command and the group it came from. */
typedef struct cli_entry {
    const cli_option *opt;
    const cli_group *group;
} cli_entry;

int cli_parse_u64(const char *s, int any_base, uint64_t *out)
{
    /* Digits first: strtoull would skip leading space and take a sign. */
    if (s == NULL || *s < '0' || *s > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, any_base ? 0 : 10);
    if (*end != '\0' || errno != 0)
        return 0;
    *out = v;
    return 1;
}

int cli_parse_double(const char *s, double *out)
{
    if (s == NULL || *s == '\0' || strchr(" \t\n\r\f\v", *s) != NULL)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || errno != 0 || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

int cli_parse_u32_list(const char *s, uint32_t *out, size_t max_count, uint32_t min,
                       uint32_t max)
{
    size_t n = 0;
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ",");
        char tok[24];
        uint64_t x;
        if (len == 0 || len >= sizeof(tok) || n == max_count)
            return -1;
        memcpy(tok, p, len);
        tok[len] = '\0';
        if (!cli_parse_u64(tok, 0, &x) || x < min || x > max)
            return -1;
        out[n++] = (uint32_t)x;
        p += len + (p[len] == ',');
    }
    return n > 0 ? (int)n : -1;
}

int cli_fail(const cli_value *v, const char *fmt, ...)
{
    int n = snprintf(v->err, v->err_size, "--%s '%s': ", v->opt->name, v->text);
    if (n >= 0 && (size_t)n < v->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->err + n, v->err_size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return CLI_USAGE;
}

static int has_range(const cli_option *o)
{
    return o->min != 0 || o->max != 0 || (o->flags & CLI_ABOVE_MIN);
}

static int check_range(const cli_value *v, double x)
{
    const cli_option *o = v->opt;
    if (!has_range(o))
        return CLI_OK;
    int low_ok = (o->flags & CLI_ABOVE_MIN) ? x > o->min : x >= o->min;
    if (low_ok && x <= o->max)
        return CLI_OK;
    return cli_fail(v, "out of range %c%.17g, %.17g]",
                    (o->flags & CLI_ABOVE_MIN) ? '(' : '[', o->min, o->max);
}

static int store_integer(void *field, const cli_value *v)
{
    const cli_option *o = v->opt;
    uint64_t u;
    if (!cli_parse_u64(v->text, (o->flags & CLI_ANY_BASE) != 0, &u))
        return cli_fail(v, "expected an integer");
    if (o->kind == CLI_U32 && !has_range(o) && u > UINT32_MAX)
        return cli_fail(v, "out of range [0, %u]", UINT32_MAX);
    if (check_range(v, (double)u) != CLI_OK)
        return CLI_USAGE;
    if (o->kind == CLI_U32)
        *(uint32_t *)field = (uint32_t)u;
    else
        *(uint64_t *)field = u;
    return CLI_OK;
}

static int store_choice(void *field, const cli_value *v)
{
    const char *const *c = v->opt->choices;
    for (uint32_t k = 0; c[k] != NULL; k++)
        if (strcmp(c[k], v->text) == 0) {
            *(uint32_t *)field = k;
            return CLI_OK;
        }
    char list[256] = "";
    size_t used = 0;
    for (uint32_t k = 0; c[k] != NULL && used < sizeof(list); k++) {
        const char *sep = k == 0 ? "" : (c[k + 1] == NULL ? " or " : ", ");
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", sep, c[k]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return cli_fail(v, "expected %s", list);
}

static int store_list(void *target, const cli_value *v)
{
    const cli_option *o = v->opt;
    int n = cli_parse_u32_list(v->text, (uint32_t *)((char *)target + o->offset),
                               o->max_count, (uint32_t)o->min, (uint32_t)o->max);
    if (n < 0)
        return cli_fail(v,
                        "expected up to %zu integers in [%.10g, %.10g], comma-separated",
                        o->max_count, o->min, o->max);
    *(uint32_t *)((char *)target + o->count_offset) = (uint32_t)n;
    return CLI_OK;
}

static int store(void *target, const cli_value *v)
{
    void *field = (char *)target + v->opt->offset;
    double d;
    switch (v->opt->kind) {
    case CLI_FLAG:
        *(int *)field = v->opt->value ? v->opt->value : 1;
        return CLI_OK;
    case CLI_CLEAR:
        *(int *)field = 0;
        return CLI_OK;
    case CLI_U32:
    case CLI_U64:
        return store_integer(field, v);
    case CLI_DOUBLE:
        if (!cli_parse_double(v->text, &d))
            return cli_fail(v, "expected a number");
        if (check_range(v, d) != CLI_OK)
            return CLI_USAGE;
        *(double *)field = d;
        return CLI_OK;
    case CLI_STR:
        *(const char **)field = v->text;
        return CLI_OK;
    case CLI_CHOICE:
        return store_choice(field, v);
    case CLI_U32_LIST:
        return store_list(target, v);
    case CLI_CALL:
        return v->opt->call(target, v);
    }
    return CLI_OK;
}

/* Flatten the groups into getopt_long's table; the count, or -1. */
static int flatten(const cli_command *cmd, struct option *longs, cli_entry *map)
{
    size_t n = 0;
    for (size_t g = 0; g < cmd->num_groups; g++)
        for (size_t i = 0; i < cmd->groups[g]->count; i++) {
            if (n == CLI_MAX_OPTIONS)
                return -1;
            const cli_option *o = &cmd->groups[g]->options[i];
            longs[n] = (struct option){o->name, o->arg ? required_argument : no_argument,
                                       NULL, CLI_FIRST_VAL + (int)n};
            map[n] = (cli_entry){o, cmd->groups[g]};
            n++;
        }
    longs[n] = (struct option){"help", no_argument, NULL, 'h'};
    longs[n + 1] = (struct option){NULL, 0, NULL, 0};
    return (int)n;
}

/* Was argv's element the option's whole name (not an abbreviation)? */
static int spelt_whole(const char *elem, const char *name)
{
    size_t n = strlen(name);
    return strncmp(elem, "--", 2) == 0 && strncmp(elem + 2, name, n) == 0 &&
           (elem[2 + n] == '\0' || elem[2 + n] == '=');
}

typedef struct cli_state {
    const cli_command *cmd;
    void *target;
    char **argv;
    int passed_upto; /* pass_unknown: argv elements before it are handed on */
    const cli_option *prev;
    int operands; /* seen */
    char *err;
    size_t err_size;
} cli_state;

static int operand(cli_state *s, const char *text)
{
    const cli_command *cmd = s->cmd;
    if (cmd->operand_name != NULL) {
        if (s->operands++ > 0) {
            snprintf(s->err, s->err_size, "one %s only ('%s' is extra)",
                     cmd->operand_name, text);
            return CLI_USAGE;
        }
        *(const char **)((char *)s->target + cmd->operand_offset) = text;
        return CLI_OK;
    }
    if (s->cmd->operand == NULL) {
        snprintf(s->err, s->err_size, "unexpected argument '%s' (see %s --help)", text,
                 s->cmd->name);
        return CLI_USAGE;
    }
    cli_value v = {NULL, text, s->prev, s->cmd, s->err, s->err_size};
    return s->cmd->operand(s->target, &v);
}

/* An unknown option at argv[at..optind): handed on, or refused. */
static int unknown(cli_state *s, int at, int short_opt)
{
    if (s->cmd->pass_unknown) {
        for (int k = at > s->passed_upto ? at : s->passed_upto; k < optind; k++) {
            int rc = operand(s, s->argv[k]);
            if (rc != CLI_OK)
                return rc;
        }
        if (optind > s->passed_upto)
            s->passed_upto = optind;
        return CLI_OK;
    }
    const char *elem = s->argv[at];
    if (short_opt)
        snprintf(s->err, s->err_size, "unknown option '-%c' (see %s --help)", short_opt,
                 s->cmd->name);
    else
        snprintf(s->err, s->err_size, "unknown option '%.*s' (see %s --help)",
                 (int)strcspn(elem, "="), elem, s->cmd->name);
    return CLI_USAGE;
}

/* One getopt_long answer c for argv[at...]. */
static int dispatch(cli_state *s, const cli_entry *map, int n, int c, int at)
{
    if (c == 1)
        return operand(s, optarg);
    if (c == 'h')
        return spelt_whole(s->argv[at], "help") || strcmp(s->argv[at], "-h") == 0
                   ? CLI_HELP
                   : unknown(s, at, 0);
    if (c == ':' || (c == '?' && optopt >= CLI_FIRST_VAL && optopt < CLI_FIRST_VAL + n)) {
        const cli_option *o = map[optopt - CLI_FIRST_VAL].opt;
        if (c == ':')
            snprintf(s->err, s->err_size, "missing value for --%s (%s)", o->name, o->arg);
        else
            snprintf(s->err, s->err_size, "--%s takes no value", o->name);
        return CLI_USAGE;
    }
    if (c < CLI_FIRST_VAL || c >= CLI_FIRST_VAL + n ||
        !spelt_whole(s->argv[at], map[c - CLI_FIRST_VAL].opt->name))
        return unknown(s, at, c == '?' && optopt > 0 && optopt < 256 ? optopt : 0);
    const cli_entry *e = &map[c - CLI_FIRST_VAL];
    cli_value v = {e->opt, optarg ? optarg : "", s->prev, s->cmd, s->err, s->err_size};
    int rc = store((char *)s->target + e->group->target_offset, &v);
    s->prev = e->opt;
    return rc;
}

int cli_parse(const cli_command *cmd, void *target, int argc, char **argv, char *err,
              size_t err_size)
{
    struct option longs[CLI_MAX_OPTIONS + 2];
    cli_entry map[CLI_MAX_OPTIONS];
    int n = flatten(cmd, longs, map);
    if (n < 0) {
        snprintf(err, err_size, "%s: more than %d options", cmd->name, CLI_MAX_OPTIONS);
        return CLI_USAGE;
    }
    cli_state s = {cmd, target, argv, 1, NULL, 0, err, err_size};
    /* "-": operands come back in order (code 1); ":": a missing value is ':'. */
    optind = 0;
    opterr = 0;
    for (;;) {
        int at = optind > 0 ? optind : 1;
        int c = getopt_long(argc, argv, "-:h", longs, NULL);
        if (c == -1)
            break;
        int rc = dispatch(&s, map, n, c, at);
        if (rc != CLI_OK)
            return rc;
    }
    for (int k = optind; k < argc; k++) { /* after "--" */
        int rc = operand(&s, argv[k]);
        if (rc != CLI_OK)
            return rc;
    }
    if (cmd->operand_name != NULL && s.operands == 0) {
        snprintf(err, err_size, "missing %s (see %s --help)", cmd->operand_name,
                 cmd->name);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* --help's line of one option. */
static void usage_line(FILE *out, const char *name, const char *arg, const char *help,
                       int width)
{
    char left[96];
    snprintf(left, sizeof(left), "--%s%s%s", name, arg ? " " : "", arg ? arg : "");
    fprintf(out, "  %-*s  ", width, left);
    for (const char *p = help; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fprintf(out, "%*s", width + 4, "");
    }
}

static void usage_suffix(FILE *out, const cli_option *o)
{
    if (o->def)
        fprintf(out, " [default: %s]", o->def);
    if (!has_range(o))
        return;
    if (!(o->flags & CLI_ABOVE_MIN))
        fprintf(out, " [range: %.10g..%.10g]", o->min, o->max);
    else if (isinf(o->max))
        fprintf(out, " [range: above %.10g]", o->min);
    else
        fprintf(out, " [range: above %.10g, up to %.10g]", o->min, o->max);
}

static int usage_width(const cli_command *cmd)
{
    int width = 6; /* "--help" */
    for (size_t g = 0; g + cmd->unlisted < cmd->num_groups; g++)
        for (size_t i = 0; i < cmd->groups[g]->count; i++) {
            const cli_option *o = &cmd->groups[g]->options[i];
            int w = 2 + (int)strlen(o->name) + (o->arg ? 1 + (int)strlen(o->arg) : 0);
            if (w > width && w <= CLI_HELP_WIDTH)
                width = w;
        }
    return width;
}

void cli_usage(FILE *out, const cli_command *cmd)
{
    int width = usage_width(cmd);
    fprintf(out, "usage: %s %s\n", cmd->name, cmd->usage);
    if (cmd->about)
        fprintf(out, "\n%s\n", cmd->about);
    int help_shown = 0;
    for (size_t g = 0; g + cmd->unlisted < cmd->num_groups; g++) {
        const cli_group *grp = cmd->groups[g];
        fputc('\n', out);
        if (grp->title)
            fprintf(out, "%s\n", grp->title);
        for (size_t i = 0; i < grp->count; i++) {
            usage_line(out, grp->options[i].name, grp->options[i].arg,
                       grp->options[i].help, width);
            usage_suffix(out, &grp->options[i]);
            fputc('\n', out);
        }
        if (!help_shown) {
            usage_line(out, "help", NULL, "print this help (also -h)", width);
            fputc('\n', out);
        }
        help_shown = 1;
    }
    if (!help_shown) {
        fputc('\n', out);
        usage_line(out, "help", NULL, "print this help (also -h)", width);
        fputc('\n', out);
    }
    if (cmd->footer)
        fprintf(out, "\n%s\n", cmd->footer);
}

int cli_report(const cli_command *cmd, int rc, const char *err)
{
    if (rc == CLI_HELP) {
        cli_usage(stdout, cmd);
        return 0;
    }
    fprintf(stderr, "%s: %s\n", cmd->name, err);
    return 2;
}
