// SPDX-License-Identifier: Apache-2.0
/*
 * options.h -- the command line of `wsel sim`: parse argv into
 * sim_options, print --help. Every option, its default and its meaning is
 * listed in one table (options.c), so --help and the parser agree.
 * Not thread-safe. OWNERSHIP: string fields point into argv.
 */
#ifndef WSEL_SIM_OPTIONS_H
#define WSEL_SIM_OPTIONS_H

#include <stdio.h>

#include "sim.h"
#include "source.h"

#define SIM_MAX_PLUGINS 32

typedef struct sim_plugin_spec {
    const char *spec;   /* NAME or PATH as given */
    const char *config; /* JSON or NULL */
} sim_plugin_spec;

typedef struct sim_switch_spec {
    double at_s;
    const char *spec;
    const char *config;
} sim_switch_spec;

typedef struct sim_options {
    sim_cluster cluster;
    sim_router_config router;
    sim_workload_config workload;
    const char *trace;
    uint32_t trace_block_size;
    int skip_bad_lines;
    sim_plugin_spec plugins[SIM_MAX_PLUGINS];
    uint32_t num_plugins;
    sim_switch_spec switches[SIM_MAX_PHASES - 1];
    uint32_t num_switches;
    uint64_t seed;
    int isolated; /* run every policy in a wsel-isolated-helper helper (docs/isolated.md)
                   */
    uint32_t isolated_deadline_us; /* 0 = the host's default */
    int json;
    int timing;
    int analyze;
    int help;
    int progress; /* -1 auto (terminal), 0 off */
    const char *plot_dir;
    uint32_t explain; /* --explain N: requests to explain, 0 = off */
} sim_options;

/* Parse argv (argv[0] is the subcommand) into *o, written only on
 * success. Returns 0, or 2 (bad usage) with a message naming the option
 * in err. */
int sim_options_parse(sim_options *o, int argc, char **argv, char *err, size_t err_size);
void sim_options_usage(FILE *out);

#endif
