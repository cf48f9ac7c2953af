// SPDX-License-Identifier: Apache-2.0
/*
 * report.h -- print the comparison: a human table (best value per column
 * marked '*') or JSON. Not thread-safe. OWNERSHIP: all arguments are the
 * caller's, read during the call.
 */
#ifndef WSEL_SIM_REPORT_H
#define WSEL_SIM_REPORT_H

#include <stdio.h>

#include "sim.h"

struct sim_explain;

typedef struct sim_report_row {
    const char *plugin;
    const char *config; /* NULL = {} */
    sim_result result;
    /* The host's counters at the end of the run (fallbacks by reason,
     * ejections), when has_counters. */
    wsel_host_counters counters;
    int has_counters;
    /* With --explain: the explained requests (explain.h), else NULL. */
    const struct sim_explain *explain;
} sim_report_row;

typedef struct sim_report_input {
    const char *trace;    /* NULL for a workload */
    const char *workload; /* name when trace is NULL */
    uint32_t trace_block_size;
    uint64_t seed;
    uint64_t bad_lines;
    double rate; /* workloads */
} sim_report_input;

void sim_report_table(FILE *out, const sim_report_row *rows, uint32_t n);

/* The router replicas as JSON members (`,"replicas":R,...`) or a line of
 * text; both print nothing for one router, whose reports stay as they
 * were before replicas were modelled. */
void sim_report_replicas_json(FILE *out, const sim_router_config *rc);
void sim_report_replicas_text(FILE *out, const sim_router_config *rc);

/* JSON document; with timing == 0 the select_ns figures print as 0 so the
 * output is byte-identical across runs. */
void sim_report_json(FILE *out, const sim_report_input *in, const sim_cluster *c,
                     const sim_router_config *rc, const sim_report_row *rows, uint32_t n,
                     int timing);

#endif
