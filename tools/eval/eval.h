// SPDX-License-Identifier: Apache-2.0
/*
 * eval.h -- `wsel eval`: the evaluation protocol of docs/evaluation.md as a
 * command. For one input (trace or workload) and one cluster shape it finds
 * the saturation point (the speedup at which softmax's mean TTFT reaches
 * twice its unloaded value), runs every policy at fractions of it with
 * several seeds, and reports the mean and 95 % confidence interval of every
 * metric, marking the differences from softmax that are significant.
 *
 * Not thread-safe; runs may be spread over forked worker processes.
 * OWNERSHIP: every structure here is the caller's; strings point into argv.
 */
#ifndef WSEL_TOOLS_EVAL_H
#define WSEL_TOOLS_EVAL_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "metric_table.h"
#include "options.h"

#define EVAL_MAX_LOADS  8
#define EVAL_MAX_SEEDS  32
#define EVAL_MAX_SEARCH 24 /* saturation search runs at most */

typedef struct eval_policy {
    const char *label;
    const char *config;
    char path[PATH_MAX];
} eval_policy;

typedef struct eval_options {
    sim_options sim;              /* input, cluster, router, plugins, base seed */
    uint32_t seeds;               /* --seeds */
    uint32_t num_loads;           /* --loads */
    double loads[EVAL_MAX_LOADS]; /* percent of saturation */
    uint32_t jobs;                /* --jobs: worker processes */
    double saturation;            /* --saturation: skip the search when > 0 */
    double unloaded;              /* --unloaded-speedup */
    const char *metrics;          /* --metrics: columns of the tables, NULL = all */
    int json;
    int targets; /* print the issue-12 target checks */
    const char *plot_dir;
    int help;
} eval_options;

/* One search run. */
typedef struct eval_probe {
    double speedup;
    double ttft_mean_ms;
} eval_probe;

typedef struct eval_result {
    uint32_t num_policies;
    eval_policy *policies;
    double unloaded_ttft_ms;
    double saturation; /* speedup */
    int saturation_given;
    uint32_t num_probes;
    eval_probe probes[EVAL_MAX_SEARCH];
    /* metrics[(load * num_policies + policy) * seeds + seed] */
    sim_metrics *metrics;
    double wall_s;
} eval_result;

/* eval_run.c: one simulation of `pol` at `speedup` with `seed`. Returns 0
 * or -1 after a message on stderr. */
int eval_run_one(const eval_options *o, const eval_policy *pol, double speedup,
                 uint64_t seed, sim_metrics *out);
/* Run jobs [0, n): job i is (load i / (P*S), policy (i / S) % P, seed i % S)
 * over o->jobs worker processes; fills r->metrics. 0 or -1. */
int eval_run_grid(const eval_options *o, eval_result *r);

/* eval_stats.c */
/* Two-sided 95 % Student t quantile for df degrees of freedom. */
double eval_t975(uint32_t df);
typedef struct eval_stat {
    double mean, ci;      /* mean and half-width of its 95 % CI */
    double diff, diff_ci; /* paired difference from the reference */
    int significant;      /* the CI of the difference excludes 0 */
} eval_stat;
/* x[0..n) against the reference ref[0..n) paired by seed (ref may be
 * NULL: no difference). */
eval_stat eval_stat_paired(const double *x, const double *ref, uint32_t n);

/* eval_report.c: the metrics are sim_metric_table's rows flagged
 * SIM_MF_EVAL, in its order. */
/* The row whose key is name[0..len) (an SIM_MF_EVAL one), or -1. */
int eval_metric_index(const char *name, size_t len);
/* Values of sim_metric_table row k for (load, policy) across seeds into v[seeds]. */
void eval_values(const eval_options *o, const eval_result *r, uint32_t k, uint32_t load,
                 uint32_t policy, double *v);
void eval_print_tables(FILE *out, const eval_options *o, const eval_result *r);
void eval_print_targets(FILE *out, const eval_options *o, const eval_result *r, int json);
void eval_print_json(FILE *out, const eval_options *o, const eval_result *r);
int eval_plot(const eval_options *o, const eval_result *r);

#endif
