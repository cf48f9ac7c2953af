// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_sim.c -- `wsel sim`: replay one request stream through a simulated
 * cluster once per policy, each through its own libwsel-host, and print
 * the comparison. The model lives in sim/; this file wires options,
 * plugin paths, progress, the report and the charts together.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyze.h"
#include "commands.h"
#include "explain.h"
#include "host_policy.h"
#include "options.h"
#include "plot.h"
#include "plugin_path.h"
#include "report.h"

typedef struct progress {
    int enabled;
    int shown;
    double start_s;
    double last_s; /* last repaint */
    const char *label;
    uint32_t index, count;
} progress;

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Observer context: the progress line and, with --plot, the charts. */
typedef struct watch {
    progress *prog;
    sim_plot *plot;
} watch;

static void on_progress(void *ctx, int64_t now_ns, uint64_t routed)
{
    progress *p = ((watch *)ctx)->prog;
    if (!p->enabled)
        return;
    double now = wall_s();
    if (now - p->start_s < 1.0 || now - p->last_s < 0.1)
        return; /* quiet for short runs; at most 10 repaints a second */
    p->last_s = now;
    fprintf(stderr, "\r[%u/%u] %-12s %10llu requests routed, %8.1f s simulated",
            p->index + 1, p->count, p->label, (unsigned long long)routed,
            (double)now_ns / 1e9);
    p->shown = 1;
}

static void on_ttft(void *ctx, double ttft_ms)
{
    sim_plot_ttft(((watch *)ctx)->plot, ttft_ms);
}

static void on_route(void *ctx, int64_t now_ns, uint32_t worker, int flicker)
{
    sim_plot_route(((watch *)ctx)->plot, now_ns, worker, flicker);
}

static void on_load(void *ctx, int64_t now_ns, const uint64_t *tokens, uint32_t n)
{
    sim_plot_load(((watch *)ctx)->plot, now_ns, tokens, n);
}

static void clear_progress(progress *p)
{
    if (p->shown)
        fprintf(stderr, "\r%*s\r", 72, "");
    p->shown = 0;
}

static void print_analysis(const sim_options *o, const sim_analysis *a)
{
    if (o->json) {
        printf("{\"requests\":%llu,\"input_tokens\":%llu,\"output_tokens\":%llu,"
               "\"duration_s\":%.6g,\"blocks\":%llu,\"unique_blocks\":%llu,"
               "\"infinite_cache_hit_rate\":%.6g,\"bad_lines\":%llu}\n",
               (unsigned long long)a->requests, (unsigned long long)a->input_tokens,
               (unsigned long long)a->output_tokens, a->duration_s,
               (unsigned long long)a->blocks, (unsigned long long)a->unique_blocks,
               a->infinite_cache_hit_rate, (unsigned long long)a->bad_lines);
        return;
    }
    printf("input                    %s\n",
           o->trace ? o->trace : sim_workload_name(o->workload.kind));
    printf("requests                 %llu\n", (unsigned long long)a->requests);
    printf("input_tokens             %llu (mean %.0f)\n",
           (unsigned long long)a->input_tokens,
           a->requests ? (double)a->input_tokens / (double)a->requests : 0.0);
    printf("output_tokens            %llu (mean %.0f)\n",
           (unsigned long long)a->output_tokens,
           a->requests ? (double)a->output_tokens / (double)a->requests : 0.0);
    printf("duration_s               %.1f\n", a->duration_s);
    printf("blocks                   %llu\n", (unsigned long long)a->blocks);
    printf("unique_blocks            %llu\n", (unsigned long long)a->unique_blocks);
    printf("infinite_cache_hit_rate  %.4f\n", a->infinite_cache_hit_rate);
    if (a->bad_lines)
        printf("bad_lines                %llu (skipped)\n",
               (unsigned long long)a->bad_lines);
}

typedef struct policy_entry {
    const char *label;
    const char *config;
    char path[PATH_MAX];
} policy_entry;

/* Resolve the policies to compare; bundled ones whose .so is missing are
 * skipped with a warning. Returns the count, or -1 after a message. */
static int resolve_policies(const sim_options *o, policy_entry *out)
{
    char err[1024];
    int n = 0;
    if (o->num_plugins == 0) {
        const char *names[SIM_MAX_PLUGINS];
        uint32_t count = wsel_bundled_set(o->plugin_set, names, SIM_MAX_PLUGINS);
        for (uint32_t i = 0; i < count; i++) {
            const char *name = names[i];
            if (wsel_plugin_resolve(name, out[n].path, sizeof(out[n].path), err,
                                    sizeof(err)) != 0) {
                fprintf(stderr, "wsel sim: warning: skipping %s: %s\n", name, err);
                continue;
            }
            out[n].label = name;
            out[n].config = NULL;
            n++;
        }
        if (n == 0)
            fprintf(stderr,
                    "wsel sim: no bundled plugin found; build them or use --plugin\n");
        return n > 0 ? n : -1;
    }
    for (uint32_t i = 0; i < o->num_plugins; i++) {
        if (wsel_plugin_resolve(o->plugins[i].spec, out[n].path, sizeof(out[n].path), err,
                                sizeof(err)) != 0) {
            fprintf(stderr, "wsel sim: --plugin %s: %s\n", o->plugins[i].spec, err);
            return -1;
        }
        out[n].label = o->plugins[i].spec;
        out[n].config = o->plugins[i].config;
        n++;
    }
    return n;
}

static int resolve_switches(const sim_options *o, sim_switch *out,
                            char (*paths)[PATH_MAX])
{
    char err[1024];
    for (uint32_t i = 0; i < o->num_switches; i++) {
        if (wsel_plugin_resolve(o->switches[i].spec, paths[i], PATH_MAX, err,
                                sizeof(err)) != 0) {
            fprintf(stderr, "wsel sim: --switch-at %s: %s\n", o->switches[i].spec, err);
            return -1;
        }
        out[i].at_ns = (int64_t)(o->switches[i].at_s * 1e9);
        out[i].label = o->switches[i].spec;
        out[i].path = paths[i];
        out[i].config = o->switches[i].config;
    }
    return 0;
}

/* One policy over a fresh copy of the request stream. The host stays open
 * in *hp (its counters go into the report) until the caller has printed
 * the results: a plugin whose destroy crashes must not take the run's
 * output with it. */
/* Print a policy's error once: the host's messages already start with the
 * plugin's path, so the label is added only when they do not name it. */
static void report_policy_error(const policy_entry *pe, const char *err)
{
    size_t n = strlen(pe->path);
    if (strncmp(err, pe->path, n) == 0 && err[n] == ':')
        fprintf(stderr, "wsel sim: %s\n", err);
    else
        fprintf(stderr, "wsel sim: %s: %s\n", pe->label, err);
}

/* A fresh copy of the request stream; 0 or an exit status after a message. */
static int open_source(const sim_options *o, sim_source **src)
{
    char err[1024];
    int32_t rc = o->trace
                     ? sim_source_open_trace(src, o->trace, o->trace_block_size,
                                             o->cluster.block_size, o->skip_bad_lines,
                                             err, sizeof(err))
                     : sim_source_open_workload(src, &o->workload, o->cluster.block_size,
                                                err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "wsel sim: %s\n", err);
        return rc == WSEL_EINVAL && !o->trace ? WSEL_EXIT_USAGE : WSEL_EXIT_FAILURE;
    }
    return WSEL_EXIT_OK;
}

/* --explain samples over the whole run, so it needs the number of
 * requests first: one pass over a copy of the stream. */
static int count_requests(const sim_options *o, uint64_t *total)
{
    sim_source *src = NULL;
    int status = open_source(o, &src);
    if (status != WSEL_EXIT_OK)
        return status;
    char err[1024];
    sim_request req;
    int32_t rc;
    *total = 0;
    while ((rc = sim_source_next(src, &req, err, sizeof(err))) == 1)
        (*total)++;
    sim_source_close(src);
    if (rc < 0) {
        fprintf(stderr, "wsel sim: %s\n", err);
        return WSEL_EXIT_FAILURE;
    }
    return WSEL_EXIT_OK;
}

/* Router replicas of a run: one host (and policy) each. */
static uint32_t num_replicas(const sim_options *o)
{
    return o->router.replicas > 1 ? o->router.replicas : 1;
}

/* hp: num_replicas(o) hosts, replica k's at hp[k]. */
static int run_one(const sim_options *o, const policy_entry *pe, const sim_switch *sw,
                   sim_observer *ob, sim_host_policy *hp, sim_explain *ex, uint64_t total,
                   sim_result *res, uint64_t *bad_lines)
{
    char err[1024];
    sim_source *src = NULL;
    int status = open_source(o, &src);
    if (status != WSEL_EXIT_OK)
        return status;
    int32_t rc;
    sim_policy policy[SIM_MAX_REPLICAS];
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.seed = o->seed;
    opts.isolated = (uint32_t)o->isolated;
    opts.select_deadline_us = o->isolated_deadline_us;
    rc = sim_host_policy_open_replicas(hp, policy, num_replicas(o), pe->path, pe->config,
                                       &opts, sim_cluster_ranks(&o->cluster), err,
                                       sizeof(err));
    if (rc != 0) {
        report_policy_error(pe, err);
        sim_source_close(src);
        return WSEL_EXIT_FAILURE;
    }
    if (ex != NULL && /* one replica: options.c refuses --explain with more */
        sim_explain_open(ex, o->explain, total, o->seed, hp, &policy[0], pe->path,
                         pe->config, sim_cluster_ranks(&o->cluster), err,
                         sizeof(err)) != 0) {
        fprintf(stderr, "wsel sim: %s\n", err);
        sim_source_close(src);
        return WSEL_EXIT_FAILURE;
    }
    sim_run_args args = {
        .cluster = &o->cluster,
        .router = &o->router,
        .source = &sim_source_ops_default,
        .source_ctx = src,
        .policy = policy,
        .switches = sw,
        .num_switches = o->num_switches,
        .first_label = pe->label,
        .observer = ob,
    };
    rc = sim_run(&args, res, err, sizeof(err));
    *bad_lines = sim_source_bad_lines(src);
    sim_source_close(src);
    if (rc != 0) {
        report_policy_error(pe, err);
        return WSEL_EXIT_FAILURE;
    }
    if (res->total.lost_requests != 0) {
        fprintf(stderr, "wsel sim: %s: %llu requests lost\n", pe->label,
                (unsigned long long)res->total.lost_requests);
        return WSEL_EXIT_FAILURE;
    }
    return WSEL_EXIT_OK;
}

/* One comparison: the policies, their hosts and results. */
typedef struct comparison {
    policy_entry *policies;
    int n;
    sim_switch switches[SIM_MAX_PHASES];
    sim_report_row *rows;
    sim_host_policy *hosts; /* policy i's replicas at [i * replicas, ...) */
    uint32_t replicas;
    sim_explain *explains; /* with --explain, else NULL */
    sim_plot *plot;        /* with --plot, else NULL */
    int opened;            /* hosts[0..opened) may be open */
    uint64_t total;        /* requests, with --explain */
    uint64_t bad_lines;
} comparison;

/* The counters of a policy's replicas, added up (every member a count). */
static void read_counters(const sim_host_policy *hp, uint32_t replicas,
                          wsel_host_counters *sum)
{
    _Static_assert(sizeof(*sum) % sizeof(uint64_t) == 0, "counters are uint64_t");
    wsel_host_read_counters(hp[0].host, sum, sizeof(*sum));
    for (uint32_t k = 1; k < replicas; k++) {
        wsel_host_counters one;
        wsel_host_read_counters(hp[k].host, &one, sizeof(one));
        uint64_t *to = (uint64_t *)(void *)sum;
        const uint64_t *from = (const uint64_t *)(const void *)&one;
        for (size_t j = 0; j < sizeof(one) / sizeof(uint64_t); j++)
            to[j] += from[j];
    }
}

/* Run every policy in turn, with a progress line. An exit status. */
static int run_policies(const sim_options *o, comparison *c)
{
    progress prog;
    memset(&prog, 0, sizeof(prog));
    prog.enabled = o->progress != 0 && isatty(STDERR_FILENO);
    prog.count = (uint32_t)c->n;
    int status = WSEL_EXIT_OK;
    for (int i = 0; i < c->n && status == WSEL_EXIT_OK; i++) {
        sim_report_row *row = &c->rows[i];
        watch w = {&prog, c->plot};
        sim_observer ob = {&w, NULL, NULL, NULL, on_progress};
        if (c->plot) {
            ob.on_ttft = on_ttft;
            ob.on_route = on_route;
            ob.on_load = on_load;
            if (sim_plot_begin(c->plot, c->policies[i].label) != 0)
                return WSEL_EXIT_FAILURE;
        }
        prog.label = c->policies[i].label;
        prog.index = (uint32_t)i;
        prog.start_s = wall_s();
        sim_host_policy *hp = &c->hosts[(size_t)i * c->replicas];
        status = run_one(o, &c->policies[i], c->switches, &ob, hp,
                         c->explains ? &c->explains[i] : NULL, c->total, &row->result,
                         &c->bad_lines);
        if (c->explains)
            row->explain = &c->explains[i];
        if (hp[0].host != NULL) {
            c->opened = i + 1;
            read_counters(hp, c->replicas, &row->counters);
            row->has_counters = 1;
        }
        clear_progress(&prog);
        row->plugin = c->policies[i].label;
        row->config = c->policies[i].config;
    }
    return status;
}

/* What the input did that the figures alone would not say. */
static void warn_about_input(const sim_options *o, const comparison *c)
{
    if (c->bad_lines)
        fprintf(stderr, "wsel sim: skipped %llu bad lines of %s\n",
                (unsigned long long)c->bad_lines, o->trace);
    /* A switch after the input's last arrival leaves its phase all zeros:
     * say why rather than let the row read as a policy that did nothing. */
    for (uint32_t p = 1; c->n > 0 && p < c->rows[0].result.num_phases; p++)
        if (c->rows[0].result.phase[p].requests == 0)
            fprintf(stderr,
                    "wsel sim: warning: phase %u (%s) routed no request: its --switch-at "
                    "came after the input's last arrival\n",
                    p, c->rows[0].result.phase_label[p]);
}

static void print_results(const sim_options *o, const comparison *c)
{
    if (o->json) {
        sim_report_input in = {o->trace,
                               sim_workload_name(o->workload.kind),
                               o->trace_block_size,
                               o->seed,
                               c->bad_lines,
                               o->workload.rate};
        sim_report_json(stdout, &in, &o->cluster, &o->router, c->rows, (uint32_t)c->n,
                        o->timing);
        return;
    }
    sim_report_table(stdout, c->rows, (uint32_t)c->n);
    for (int i = 0; c->explains && i < c->n; i++) {
        char label[PATH_MAX + 16];
        const char *config = c->rows[i].config;
        if (config && config[0] && strcmp(config, "{}") != 0)
            snprintf(label, sizeof(label), "%s [%d]", c->policies[i].label, i + 1);
        else
            snprintf(label, sizeof(label), "%s", c->policies[i].label);
        sim_explain_print(stdout, &c->explains[i], label);
    }
}

/* The results are out before any plugin's destroy runs. */
static void close_comparison(comparison *c)
{
    sim_plot_close(c->plot);
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; c->explains && i < c->n; i++)
        sim_explain_close(&c->explains[i]);
    free(c->explains);
    for (int i = 0; i < c->opened; i++)
        sim_host_policy_close_replicas(&c->hosts[(size_t)i * c->replicas], c->replicas);
    free(c->hosts);
    free(c->rows);
}

static int compare(const sim_options *o)
{
    static policy_entry policies[SIM_MAX_PLUGINS];
    static char switch_paths[SIM_MAX_PHASES][PATH_MAX];
    comparison c;
    memset(&c, 0, sizeof(c));
    c.policies = policies;
    c.n = resolve_policies(o, policies);
    if (c.n < 0 || resolve_switches(o, c.switches, switch_paths) != 0)
        return WSEL_EXIT_FAILURE;
    c.replicas = num_replicas(o);
    c.rows = calloc((size_t)c.n, sizeof(*c.rows));
    c.hosts = calloc((size_t)c.n * c.replicas, sizeof(*c.hosts));
    c.explains = o->explain ? calloc((size_t)c.n, sizeof(*c.explains)) : NULL;
    int status = WSEL_EXIT_FAILURE;
    if (!c.rows || !c.hosts || (o->explain && !c.explains))
        goto out_close;
    status = o->explain ? count_requests(o, &c.total) : WSEL_EXIT_OK;
    if (status != WSEL_EXIT_OK)
        goto out_close;
    if (o->plot_dir && sim_plot_open(&c.plot, o->plot_dir, o->cluster.num_workers) != 0) {
        status = WSEL_EXIT_FAILURE;
        goto out_close;
    }
    status = run_policies(o, &c);
    if (status != WSEL_EXIT_OK)
        goto out_close;
    warn_about_input(o, &c);
    print_results(o, &c);
    if (c.plot && sim_plot_render(c.plot) != 0)
        status = WSEL_EXIT_FAILURE;
out_close:
    close_comparison(&c);
    return status;
}

int wsel_cmd_sim(int argc, char **argv)
{
    static sim_options o; /* large; one per process */
    char err[512];
    if (sim_options_parse(&o, argc, argv, err, sizeof(err)) != 0) {
        fprintf(stderr, "wsel sim: %s\n", err);
        return WSEL_EXIT_USAGE;
    }
    if (o.help) {
        sim_options_usage(stdout);
        return WSEL_EXIT_OK;
    }
    if (o.analyze) {
        sim_analysis a;
        if (sim_analyze(&o, &a, err, sizeof(err)) != 0) {
            fprintf(stderr, "wsel sim: %s\n", err);
            return WSEL_EXIT_FAILURE;
        }
        print_analysis(&o, &a);
        return WSEL_EXIT_OK;
    }
    return compare(&o);
}
