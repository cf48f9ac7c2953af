// SPDX-License-Identifier: Apache-2.0
/*
 * options.h -- the command line of `wsel sim`: parse argv into
 * sim_options, print --help. Every option, its default, range and meaning
 * is listed in one table (options.c, read by cli/), so --help and the
 * parser agree; `wsel eval` parses the same table beside its own.
 * Not thread-safe. OWNERSHIP: string fields point into argv.
 */
#ifndef WSEL_SIM_OPTIONS_H
#define WSEL_SIM_OPTIONS_H

#include <stdio.h>

#include "cli.h"
#include "sim.h"
#include "source.h"

#define SIM_MAX_PLUGINS 32

typedef struct sim_plugin_spec {
    const char *spec;   /* NAME or PATH as given */
    const char *config; /* JSON or NULL */
} sim_plugin_spec;

/* --plugins: which bundled plugins run when no --plugin is given. */
typedef enum sim_plugin_set {
    SIM_PLUGINS_DEFAULT, /* softmax, the baselines and wsel's policies */
    SIM_PLUGINS_PEERS,   /* softmax and the peer ports */
    SIM_PLUGINS_ALL,     /* all but the composers (pipeline) */
} sim_plugin_set;
#define SIM_PLUGINS_UNSET UINT32_MAX /* before sim_options_check: not given */
/* Their names, in the enum's order, NULL-terminated. */
extern const char *const sim_plugin_set_names[];

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
    uint32_t plugin_set; /* a sim_plugin_set, when num_plugins is 0 */
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
    /* As given, before sim_options_check: 0 = not given. */
    uint32_t workers_given, dp_given;
    double jitter_ms, kv_event_delay_ms, sync_lag_ms, sync_echo_ms;
} sim_options;

/* Parse argv (argv[0] is the subcommand) into *o, written only on
 * success. Returns 0 (o->help set after --help), or 2 (bad usage) with a
 * message naming the option in err. */
int sim_options_parse(sim_options *o, int argc, char **argv, char *err, size_t err_size);
void sim_options_usage(FILE *out);

/* For a command that takes wsel sim's options beside its own (wsel
 * eval): the table (a group whose target is a sim_options, offset 0), the
 * defaults to set before parsing and the checks to run after. check: 0 or
 * 2 with a message in err. */
extern const cli_group sim_option_group;
void sim_options_defaults(sim_options *o);
int sim_options_check(sim_options *o, char *err, size_t err_size);

#endif
