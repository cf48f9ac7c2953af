// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_info.c -- `wsel info PLUGIN`: print a plugin's descriptor and its
 * parameter table, as aligned text or as JSON. The plugin documents itself.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "json_write.h"
#include "options.h"
#include "plugin_path.h"
#include "wsel_host.h"

static const char *type_name(uint32_t type)
{
    switch (type) {
    case WSEL_PARAM_DOUBLE:
        return "double";
    case WSEL_PARAM_INT:
        return "int";
    case WSEL_PARAM_BOOL:
        return "bool";
    case WSEL_PARAM_ENUM:
        return "enum";
    case WSEL_PARAM_JSON:
        return "json";
    default:
        return "?";
    }
}

/* Name of ENUM choice `index`, or "?" when out of the choices. */
static const char *choice_name(const wsel_param_def *d, double index)
{
    if (d->choices == NULL || index < 0)
        return "?";
    for (uint32_t k = 0; d->choices[k] != NULL; k++)
        if ((double)k == index)
            return d->choices[k];
    return "?";
}

/* The default as text: a number, true/false, or the choice's name. */
static void format_default(const wsel_param_def *d, char *out, size_t size)
{
    if (d->type == WSEL_PARAM_BOOL)
        snprintf(out, size, "%s", d->default_value != 0 ? "true" : "false");
    else if (d->type == WSEL_PARAM_JSON)
        snprintf(out, size, "absent");
    else if (d->type == WSEL_PARAM_ENUM)
        snprintf(out, size, "%s", choice_name(d, d->default_value));
    else
        snprintf(out, size, "%.10g", d->default_value);
}

/* The accepted values as text: [min, max], or the choices a|b|c. */
static void format_range(const wsel_param_def *d, char *out, size_t size)
{
    out[0] = '\0';
    if (d->type == WSEL_PARAM_BOOL) {
        snprintf(out, size, "true|false");
    } else if (d->type == WSEL_PARAM_JSON) {
        snprintf(out, size, "object|array");
    } else if (d->type == WSEL_PARAM_ENUM) {
        size_t used = 0;
        for (uint32_t k = 0; d->choices && d->choices[k] && used + 1 < size; k++) {
            if ((double)k < d->min_value || (double)k > d->max_value)
                continue;
            int n =
                snprintf(out + used, size - used, "%s%s", used ? "|" : "", d->choices[k]);
            if (n < 0)
                break;
            used += (size_t)n;
        }
    } else {
        snprintf(out, size, "[%.10g, %.10g]", d->min_value, d->max_value);
    }
}

static void print_capabilities(FILE *out, uint32_t caps, int json)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } known[] = {
        {WSEL_CAP_CONCURRENT_SELECT, "concurrent_select"},
        {WSEL_CAP_STATELESS, "stateless"},
    };
    int first = 1;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (!(caps & known[i].bit))
            continue;
        fprintf(out, json ? "%s\"%s\"" : "%s%s", first ? "" : (json ? "," : ", "),
                known[i].name);
        first = 0;
        caps &= ~known[i].bit;
    }
    if (caps)
        fprintf(out, json ? "%s\"0x%x\"" : "%s0x%x", first ? "" : (json ? "," : ", "),
                caps);
    else if (first && !json)
        fprintf(out, "none");
}

static void print_text(const wsel_library *lib)
{
    const wsel_plugin *p = wsel_library_plugin(lib);
    printf("name:         %s\n", p->name);
    printf("version:      %s\n", p->version);
    printf("description:  %s\n", p->description);
    printf("abi:          %u.%u\n", p->abi_major, p->abi_minor);
    printf("capabilities: ");
    print_capabilities(stdout, p->capabilities, 0);
    printf("\npath:         %s\n", wsel_library_path(lib));
    if (p->num_params == 0) {
        printf("parameters:   none\n");
        return;
    }
    printf("parameters:\n");

    /* Column widths: the longest cell of each column, header included. */
    int wn = 4, wt = 4, wd = 7, wr = 5;
    char def[64], range[256];
    for (uint32_t i = 0; i < p->num_params; i++) {
        const wsel_param_def *d = wsel_library_param(lib, i);
        format_default(d, def, sizeof(def));
        format_range(d, range, sizeof(range));
        int n = (int)strlen(d->name), t = (int)strlen(type_name(d->type));
        int dl = (int)strlen(def), rl = (int)strlen(range);
        wn = n > wn ? n : wn;
        wt = t > wt ? t : wt;
        wd = dl > wd ? dl : wd;
        wr = rl > wr ? rl : wr;
    }
    printf("  %-*s  %-*s  %-*s  %-*s  %s\n", wn, "name", wt, "type", wd, "default", wr,
           "range", "doc");
    for (uint32_t i = 0; i < p->num_params; i++) {
        const wsel_param_def *d = wsel_library_param(lib, i);
        format_default(d, def, sizeof(def));
        format_range(d, range, sizeof(range));
        printf("  %-*s  %-*s  %-*s  %-*s  %s\n", wn, d->name, wt, type_name(d->type), wd,
               def, wr, range, d->doc ? d->doc : "");
    }
}

/* A JSON number; JSON has no infinities, so those become strings. */
static void print_json_number(double v)
{
    if (v != v)
        printf("\"nan\"");
    else if (v > 1.7976931348623157e308)
        printf("\"inf\"");
    else if (v < -1.7976931348623157e308)
        printf("\"-inf\"");
    else
        printf("%.17g", v);
}

static void print_json(const wsel_library *lib)
{
    const wsel_plugin *p = wsel_library_plugin(lib);
    printf("{\"name\":");
    wsel_json_write_string(stdout, p->name);
    printf(",\"version\":");
    wsel_json_write_string(stdout, p->version);
    printf(",\"description\":");
    wsel_json_write_string(stdout, p->description);
    printf(",\"abi\":{\"major\":%u,\"minor\":%u},\"capabilities\":[", p->abi_major,
           p->abi_minor);
    print_capabilities(stdout, p->capabilities, 1);
    printf("],\"path\":");
    wsel_json_write_string(stdout, wsel_library_path(lib));
    printf(",\"parameters\":[");
    for (uint32_t i = 0; i < p->num_params; i++) {
        const wsel_param_def *d = wsel_library_param(lib, i);
        printf("%s{\"name\":", i ? "," : "");
        wsel_json_write_string(stdout, d->name);
        printf(",\"type\":\"%s\",\"default\":", type_name(d->type));
        if (d->type == WSEL_PARAM_BOOL) {
            printf("%s", d->default_value != 0 ? "true" : "false");
        } else if (d->type == WSEL_PARAM_JSON) {
            printf("null"); /* absent: the plugin's own default applies */
        } else if (d->type == WSEL_PARAM_ENUM) {
            wsel_json_write_string(stdout, choice_name(d, d->default_value));
        } else {
            print_json_number(d->default_value);
        }
        if (d->type == WSEL_PARAM_ENUM) {
            printf(",\"choices\":[");
            int first = 1;
            for (uint32_t k = 0; d->choices && d->choices[k]; k++) {
                if ((double)k < d->min_value || (double)k > d->max_value)
                    continue;
                printf("%s", first ? "" : ",");
                wsel_json_write_string(stdout, d->choices[k]);
                first = 0;
            }
            printf("]");
        } else if (d->type != WSEL_PARAM_JSON) {
            printf(",\"min\":");
            print_json_number(d->min_value);
            printf(",\"max\":");
            print_json_number(d->max_value);
        }
        printf(",\"doc\":");
        wsel_json_write_string(stdout, d->doc);
        printf("}");
    }
    printf("]}\n");
}

typedef struct info_options {
    const char *spec;
    int json;
    int list;
    uint32_t set; /* --plugins, SIM_PLUGINS_UNSET when not given */
} info_options;

static int info_set_spec(void *target, const cli_value *v)
{
    info_options *o = target;
    if (o->spec != NULL)
        return cli_fail(v, "one PLUGIN only (got '%s' after '%s')", v->text, o->spec);
    o->spec = v->text;
    return CLI_OK;
}

static const cli_option info_option_table[] = {
    {CLI_OPT("json", NULL, "print as one JSON object", NULL),
     CLI_AS_FLAG(offsetof(info_options, json))},
    {CLI_OPT("list", NULL,
             "instead: the bundled plugins, one a line: NAME ROLE\n"
             "(roles: plugins/CMakeLists.txt)",
             NULL),
     CLI_AS_FLAG(offsetof(info_options, list))},
    {CLI_OPT("plugins", "SET", "with --list: only the names of SET (default, peers, all)",
             "every bundled plugin"),
     CLI_AS_CHOICE(offsetof(info_options, set), sim_plugin_set_names)},
};
static const cli_group info_options_group = {NULL, CLI_TABLE(info_option_table), 0};
static const cli_group *const info_groups[] = {&info_options_group};

static const cli_command info_command = {
    .name = "wsel info",
    .usage = "PLUGIN [--json] | --list [--plugins SET]",
    .about = "Print a plugin's descriptor and parameter table.\n"
             "PLUGIN is a bundled name (softmax, p2c, ...) or a path with '/'.",
    CLI_GROUPS(info_groups),
    .operand = info_set_spec,
};

/* --list: every bundled plugin with its role, or the names of one set. */
static void print_list(const info_options *o)
{
    if (o->set == SIM_PLUGINS_UNSET) {
        for (unsigned i = 0; i < wsel_num_bundled_plugins; i++)
            printf("%s %s\n", wsel_bundled_plugins[i].name,
                   wsel_plugin_role_name(wsel_bundled_plugins[i].role));
        return;
    }
    const char *names[64];
    uint32_t n = wsel_bundled_set(o->set, names, 64);
    for (uint32_t i = 0; i < n; i++)
        printf("%s\n", names[i]);
}

int wsel_cmd_info(int argc, char **argv)
{
    info_options o = {.set = SIM_PLUGINS_UNSET};
    char path[PATH_MAX], err[2400];
    int rc = cli_parse(&info_command, &o, argc, argv, err, sizeof(err));
    if (rc == CLI_OK && (o.list ? o.spec != NULL || o.json : o.spec == NULL || o.set != SIM_PLUGINS_UNSET)) {
        snprintf(err, sizeof(err), "give PLUGIN [--json] or --list [--plugins SET]");
        rc = CLI_USAGE;
    }
    if (rc != CLI_OK)
        return cli_report(&info_command, rc, err);
    if (o.list) {
        print_list(&o);
        return WSEL_EXIT_OK;
    }
    if (wsel_plugin_resolve(o.spec, path, sizeof(path), err, sizeof(err)) < 0) {
        fprintf(stderr, "wsel: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    wsel_library *lib = NULL;
    if (wsel_library_open(path, NULL, &lib, err, sizeof(err)) < 0) {
        fprintf(stderr, "wsel: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    if (o.json)
        print_json(lib);
    else
        print_text(lib);
    wsel_library_close(lib);
    return WSEL_EXIT_OK;
}
