// SPDX-License-Identifier: Apache-2.0
/*
 * main.c -- `wsel`: dispatch to a subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "wsel_version.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"sim", wsel_cmd_sim, "replay a trace through a simulated cluster, compare policies"},
    {"eval", wsel_cmd_eval, "compare policies at several loads and seeds, with CIs"},
#ifdef WSEL_HAVE_REALTIME
    {"replay", wsel_cmd_replay, "send a trace over HTTP to engines, report as wsel sim"},
    {"cluster", wsel_cmd_cluster, "start N wsel-engine workers on free localhost ports"},
#endif
    {"bench", wsel_cmd_bench, "measure select latency and allocations per plugin"},
    {"validate", wsel_cmd_validate, "run the conformance checks on a plugin"},
    {"info", wsel_cmd_info, "print a plugin's descriptor and parameter table"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: wsel COMMAND [ARGS...]\n"
                 "       wsel --help | --version\n\n"
                 "Pluggable worker selection for KV-cache-aware LLM routers.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\nRun 'wsel COMMAND --help' for a command's options.\n"
            "A PLUGIN is a bundled name (softmax, p2c, ...) or a path containing '/'.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return WSEL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--version") == 0) {
        wsel_version_print(stdout, "wsel");
        return WSEL_EXIT_OK;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return WSEL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "wsel: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return WSEL_EXIT_USAGE;
}
