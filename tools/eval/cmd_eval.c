// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_eval.c -- `wsel eval`: its options (its own, then every `wsel sim`
 * option for the input, the cluster and the policies), the saturation
 * search, the grid of runs and the report. docs/evaluation.md describes
 * the protocol.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "eval.h"
#include "plugin_path.h"

/* Twice the unloaded TTFT is saturation; the search brackets it by
 * doubling or halving the speedup, then bisects (geometrically) the bracket
 * BISECT times: the saturation speedup is known within 2^(1/2^BISECT). */
#define SEARCH_STEPS 12
#define BISECT       5

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int set_loads(void *target, const cli_value *v)
{
    eval_options *o = target;
    uint32_t n = 0;
    const char *p = v->text;
    while (*p) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || !(x > 0) || x > 1000 || (*end && *end != ',') ||
            n == EVAL_MAX_LOADS)
            return cli_fail(v,
                            "expected up to %d percentages above 0, separated by commas",
                            EVAL_MAX_LOADS);
        o->loads[n++] = x;
        p = *end ? end + 1 : end;
    }
    if (n == 0)
        return cli_fail(v, "empty list");
    o->num_loads = n;
    return CLI_OK;
}

/* --metrics: every name a key of an SIM_MF_EVAL row of sim_metric_table. */
static int set_metrics(void *target, const cli_value *v)
{
    for (const char *p = v->text; *p;) {
        size_t n = strcspn(p, ",");
        if (eval_metric_index(p, n) < 0) {
            char names[512];
            size_t used = 0;
            for (uint32_t k = 0; k < SIM_NUM_METRICS && used < sizeof(names); k++) {
                if (!(sim_metric_table[k].flags & SIM_MF_EVAL))
                    continue;
                int w = snprintf(names + used, sizeof(names) - used, "%s %s",
                                 used ? "," : "", sim_metric_table[k].key);
                used += w > 0 ? (size_t)w : 0;
            }
            return cli_fail(v, "unknown metric '%.*s'; the metrics:%s", (int)n, p, names);
        }
        p += n + (p[n] == ',');
    }
    ((eval_options *)target)->metrics = v->text;
    return CLI_OK;
}

#define OFF(field) offsetof(eval_options, field)

static const cli_option eval_option_table[] = {
    {CLI_OPT("seeds", "N", "seeds per policy and load", "5"),
     CLI_AS_U32(OFF(seeds), 2, EVAL_MAX_SEEDS)},
    {CLI_OPT("loads", "LIST", "percent of saturation", "30,60,80,95"),
     CLI_AS_CALL(set_loads)},
    {CLI_OPT("jobs", "N", "worker processes", "2"), CLI_AS_U32(OFF(jobs), 1, 64)},
    {CLI_OPT("saturation", "X", "skip the search: saturation is speedup X", NULL),
     CLI_AS_DOUBLE(OFF(saturation), 0, INFINITY), .flags = CLI_ABOVE_MIN},
    {CLI_OPT("unloaded-speedup", "X", "speedup of the unloaded run", "0.01"),
     CLI_AS_DOUBLE(OFF(unloaded), 0, INFINITY), .flags = CLI_ABOVE_MIN},
    {CLI_OPT("metrics", "LIST", "table columns (JSON keys)", "all"),
     CLI_AS_CALL(set_metrics)},
    {CLI_OPT("no-targets", NULL, "do not print the issue-12 target checks", NULL),
     CLI_AS_CLEAR(OFF(targets))},
    {CLI_OPT("json", NULL, "JSON document instead of the tables", NULL),
     CLI_AS_FLAG(OFF(json))},
    {CLI_OPT("plot", "DIR", "PNG charts against load (gnuplot)", NULL),
     CLI_AS_STR(OFF(plot_dir))},
};

static const cli_group eval_option_group = {NULL, CLI_TABLE(eval_option_table), 0};
/* sim_option_group's target is the sim_options at the start of eval_options. */
_Static_assert(offsetof(eval_options, sim) == 0, "eval_options starts with sim");
/* Eval's own options first: --json and --plot are eval's, not wsel sim's. */
static const cli_group *const eval_groups[] = {&eval_option_group, &sim_option_group};

static const cli_command eval_command = {
    .name = "wsel eval",
    .usage = "[EVAL OPTIONS] [wsel sim OPTIONS]",
    .about = "Find the saturation point of softmax on a trace or workload and a cluster\n"
             "shape, run every policy at fractions of it with several seeds, and print\n"
             "per load the mean and 95 % CI of every metric, marking the differences\n"
             "from softmax that are significant (paired t over seeds).",
    CLI_GROUPS(eval_groups),
    .unlisted = 1,
    .footer = "Every `wsel sim` option is accepted (see wsel sim --help): --trace or\n"
              "--workload, --workers/--dp/--dp-mode, --plugin/--config, --seed (the\n"
              "first seed), --jitter-ms (for traces: what else a seed varies).\n"
              "Seeds vary the workload (generated input), the policies' random draws\n"
              "and tie breaks, the jitter when --jitter-ms is given, and the spread\n"
              "over replicas with --replica-spread random. With --replicas, the\n"
              "search finds the replicas' saturation: give --saturation to compare\n"
              "replica setups at one speed.\n\n"
              "Exit status: 0 success, 1 failure, 2 bad usage. See docs/evaluation.md.",
};

/* Eval's options and wsel sim's, in one pass. 0 or 2 with a message. */
static int parse(eval_options *o, int argc, char **argv, char *err, size_t err_size)
{
    memset(o, 0, sizeof(*o));
    sim_options_defaults(&o->sim);
    o->seeds = 5;
    o->jobs = 2;
    o->unloaded = 0.01;
    o->targets = 1;
    static const double default_loads[] = {30, 60, 80, 95};
    memcpy(o->loads, default_loads, sizeof(default_loads));
    o->num_loads = sizeof(default_loads) / sizeof(default_loads[0]);
    int rc = cli_parse(&eval_command, o, argc, argv, err, err_size);
    if (rc == CLI_HELP) {
        o->help = 1;
        return CLI_OK;
    }
    return rc == CLI_OK ? sim_options_check(&o->sim, err, err_size) : rc;
}

/* The policies: --plugin's, else the bundled --plugins set; softmax is the
 * reference and is added first when missing. */
static int resolve(const eval_options *o, eval_result *r)
{
    char err[1024];
    const sim_options *so = &o->sim;
    const char *bundled[SIM_MAX_PLUGINS];
    uint32_t num_bundled = wsel_bundled_set(so->plugin_set, bundled, SIM_MAX_PLUGINS);
    uint32_t max = (so->num_plugins ? so->num_plugins : num_bundled) + 1;
    r->policies = calloc(max, sizeof(*r->policies));
    if (!r->policies)
        return -1;
    uint32_t n = 0;
    int has_softmax = 0;
    for (uint32_t i = 0; i < so->num_plugins; i++)
        has_softmax |= strcmp(so->plugins[i].spec, "softmax") == 0 &&
                       (!so->plugins[i].config || !strcmp(so->plugins[i].config, "{}"));
    if (so->num_plugins && !has_softmax) {
        r->policies[n].label = "softmax";
        if (wsel_plugin_resolve("softmax", r->policies[n].path, PATH_MAX, err,
                                sizeof(err)) != 0) {
            fprintf(stderr, "wsel eval: softmax (the reference): %s\n", err);
            return -1;
        }
        n++;
    }
    uint32_t count = so->num_plugins ? so->num_plugins : num_bundled;
    for (uint32_t i = 0; i < count; i++) {
        const char *spec = so->num_plugins ? so->plugins[i].spec : bundled[i];
        const char *config = so->num_plugins ? so->plugins[i].config : NULL;
        if (config && strcmp(config, "{}") == 0)
            config = NULL;
        if (wsel_plugin_resolve(spec, r->policies[n].path, PATH_MAX, err, sizeof(err)) !=
            0) {
            if (!so->num_plugins) {
                fprintf(stderr, "wsel eval: warning: skipping %s: %s\n", spec, err);
                continue;
            }
            fprintf(stderr, "wsel eval: --plugin %s: %s\n", spec, err);
            return -1;
        }
        r->policies[n].label = spec;
        r->policies[n].config = config;
        n++;
    }
    r->num_policies = n;
    for (uint32_t p = 0; p < n; p++)
        if (strcmp(r->policies[p].label, "softmax") == 0 && !r->policies[p].config)
            return 0;
    fprintf(stderr, "wsel eval: softmax (the reference) was not found\n");
    return -1;
}

static int probe(const eval_options *o, eval_result *r, double speedup, double *ttft)
{
    int sm = 0;
    while (strcmp(r->policies[sm].label, "softmax") != 0 || r->policies[sm].config)
        sm++;
    sim_metrics m;
    if (eval_run_one(o, &r->policies[sm], speedup, o->sim.seed, &m) != 0)
        return -1;
    *ttft = m.ttft_ms.mean;
    if (r->num_probes < EVAL_MAX_SEARCH)
        r->probes[r->num_probes++] = (eval_probe){speedup, m.ttft_ms.mean};
    if (o->sim.progress != 0)
        fprintf(stderr, "wsel eval: softmax at speedup %.4g: mean TTFT %.1f ms\n",
                speedup, m.ttft_ms.mean);
    return 0;
}

/* Saturation: the speedup where softmax's mean TTFT (first seed) reaches
 * twice its value at --unloaded-speedup. */
static int find_saturation(const eval_options *o, eval_result *r)
{
    double t0, t;
    if (probe(o, r, o->unloaded, &t0) != 0)
        return -1;
    r->unloaded_ttft_ms = t0;
    if (o->saturation > 0) {
        r->saturation = o->saturation;
        r->saturation_given = 1;
        return 0;
    }
    double target = 2 * t0, lo = 0, hi = 0, s = 1;
    if (probe(o, r, s, &t) != 0)
        return -1;
    int up = t < target;
    for (int i = 0; i < SEARCH_STEPS; i++) {
        if (up && t < target)
            lo = s;
        else if (!up && t >= target)
            hi = s;
        else
            break;
        s = up ? s * 2 : s / 2;
        if (probe(o, r, s, &t) != 0)
            return -1;
    }
    if (up ? t < target : t >= target) {
        fprintf(stderr,
                "wsel eval: softmax's mean TTFT does not cross %.1f ms (twice %.1f) "
                "between speedup %.4g and %.4g; give --saturation\n",
                target, t0, up ? 1.0 : s, up ? s : 1.0);
        return -1;
    }
    if (up)
        hi = s;
    else
        lo = s;
    for (int i = 0; i < BISECT; i++) {
        double mid = sqrt(lo * hi);
        if (probe(o, r, mid, &t) != 0)
            return -1;
        if (t < target)
            lo = mid;
        else
            hi = mid;
    }
    r->saturation = sqrt(lo * hi);
    return 0;
}

int wsel_cmd_eval(int argc, char **argv)
{
    static eval_options o;
    char err[512];
    if (parse(&o, argc, argv, err, sizeof(err)) != 0) {
        fprintf(stderr, "wsel eval: %s\n", err);
        return WSEL_EXIT_USAGE;
    }
    if (o.help) {
        cli_usage(stdout, &eval_command);
        return WSEL_EXIT_OK;
    }
    if (o.sim.num_switches || o.sim.analyze) {
        fprintf(stderr, "wsel eval: --switch-at and --analyze belong to wsel sim\n");
        return WSEL_EXIT_USAGE;
    }
    eval_result r;
    memset(&r, 0, sizeof(r));
    double start = wall_s();
    int status = WSEL_EXIT_FAILURE;
    if (resolve(&o, &r) != 0 || find_saturation(&o, &r) != 0)
        goto out;
    size_t n = (size_t)o.num_loads * r.num_policies * o.seeds;
    r.metrics = calloc(n, sizeof(*r.metrics));
    if (!r.metrics) {
        fprintf(stderr, "wsel eval: out of memory\n");
        goto out;
    }
    if (o.sim.progress != 0)
        fprintf(stderr,
                "wsel eval: saturation at speedup %.4g; %zu runs on %u processes\n",
                r.saturation, n, o.jobs);
    if (eval_run_grid(&o, &r) != 0)
        goto out;
    r.wall_s = wall_s() - start;
    if (o.json) {
        eval_print_json(stdout, &o, &r);
    } else {
        eval_print_tables(stdout, &o, &r);
        if (o.targets)
            eval_print_targets(stdout, &o, &r, 0);
        printf("\n%zu runs + %u search runs in %.1f s\n", n, r.num_probes, r.wall_s);
    }
    status = WSEL_EXIT_OK;
    if (o.plot_dir && eval_plot(&o, &r) != 0)
        status = WSEL_EXIT_FAILURE;
out:
    free(r.metrics);
    free(r.policies);
    return status;
}
