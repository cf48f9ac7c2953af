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
#include "options_values.h"
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

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wsel eval [EVAL OPTIONS] [wsel sim OPTIONS]\n\n"
            "Find the saturation point of softmax on a trace or workload and a cluster\n"
            "shape, run every policy at fractions of it with several seeds, and print\n"
            "per load the mean and 95 %% CI of every metric, marking the differences\n"
            "from softmax that are significant (paired t over seeds).\n\n"
            "  --seeds N              seeds per policy and load (>= 2) [default: 5]\n"
            "  --loads LIST           percent of saturation [default: 30,60,80,95]\n"
            "  --jobs N               worker processes [default: 2]\n"
            "  --saturation X         skip the search: saturation is speedup X\n"
            "  --unloaded-speedup X   speedup of the unloaded run [default: 0.01]\n"
            "  --metrics LIST         table columns (JSON keys) [default: all]\n"
            "  --no-targets           do not print the issue-12 target checks\n"
            "  --json                 JSON document instead of the tables\n"
            "  --plot DIR             PNG charts against load (gnuplot)\n"
            "  --help                 this help\n\n"
            "Every `wsel sim` option is accepted (see wsel sim --help): --trace or\n"
            "--workload, --workers/--dp/--dp-mode, --plugin/--config, --seed (the\n"
            "first seed), --jitter-ms (for traces: what else a seed varies).\n"
            "Seeds vary the workload (generated input), the policies' random draws\n"
            "and tie breaks, and the jitter when --jitter-ms is given.\n\n"
            "Exit status: 0 success, 1 failure, 2 bad usage. See docs/evaluation.md.\n");
}

static int parse_loads(eval_options *o, const char *s, char *err, size_t err_size)
{
    uint32_t n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0) || v > 1000 || (*end && *end != ',') ||
            n == EVAL_MAX_LOADS) {
            snprintf(err, err_size,
                     "--loads '%s': expected up to %d percentages above 0, "
                     "separated by commas",
                     s, EVAL_MAX_LOADS);
            return 2;
        }
        o->loads[n++] = v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) {
        snprintf(err, err_size, "--loads: empty list");
        return 2;
    }
    o->num_loads = n;
    return 0;
}

/* Take eval's own options out of argv; the rest goes to wsel sim's parser. */
static int parse(eval_options *o, int argc, char **argv, char *err, size_t err_size)
{
    static char *rest[1024];
    int nrest = 0;
    memset(o, 0, sizeof(*o));
    o->seeds = 5;
    o->jobs = 2;
    o->unloaded = 0.01;
    o->targets = 1;
    parse_loads(o, "30,60,80,95", err, err_size);
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int takes = strcmp(a, "--seeds") == 0 || strcmp(a, "--loads") == 0 ||
                    strcmp(a, "--jobs") == 0 || strcmp(a, "--saturation") == 0 ||
                    strcmp(a, "--unloaded-speedup") == 0 || strcmp(a, "--metrics") == 0 ||
                    strcmp(a, "--plot") == 0;
        if (strcmp(a, "--help") == 0) {
            o->help = 1;
            return 0;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (strcmp(a, "--no-targets") == 0) {
            o->targets = 0;
            continue;
        }
        if (!takes) {
            if (nrest == 1023) {
                snprintf(err, err_size, "too many arguments");
                return 2;
            }
            rest[nrest++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, err_size, "%s needs a value", a);
            return 2;
        }
        const char *v = argv[++i];
        uint64_t u;
        double d;
        if (strcmp(a, "--seeds") == 0) {
            if (!sim_parse_u64(v, &u) || u < 2 || u > EVAL_MAX_SEEDS) {
                snprintf(err, err_size, "--seeds '%s': expected 2..%d", v,
                         EVAL_MAX_SEEDS);
                return 2;
            }
            o->seeds = (uint32_t)u;
        } else if (strcmp(a, "--jobs") == 0) {
            if (!sim_parse_u64(v, &u) || u < 1 || u > 64) {
                snprintf(err, err_size, "--jobs '%s': expected 1..64", v);
                return 2;
            }
            o->jobs = (uint32_t)u;
        } else if (strcmp(a, "--loads") == 0) {
            if (parse_loads(o, v, err, err_size) != 0)
                return 2;
        } else if (strcmp(a, "--saturation") == 0 ||
                   strcmp(a, "--unloaded-speedup") == 0) {
            if (!sim_parse_double(v, &d) || !(d > 0)) {
                snprintf(err, err_size, "%s '%s': expected a speedup above 0", a, v);
                return 2;
            }
            *(strcmp(a, "--saturation") == 0 ? &o->saturation : &o->unloaded) = d;
        } else if (strcmp(a, "--metrics") == 0) {
            for (const char *p = v; *p;) {
                const char *end = strchr(p, ',');
                size_t n = end ? (size_t)(end - p) : strlen(p);
                int found = 0;
                for (uint32_t k = 0; k < eval_num_metrics; k++)
                    found |= strlen(eval_metrics[k].key) == n &&
                             strncmp(eval_metrics[k].key, p, n) == 0;
                if (!found) {
                    int len =
                        snprintf(err, err_size,
                                 "--metrics '%s': unknown metric '%.*s'; the metrics:", v,
                                 (int)n, p);
                    for (uint32_t k = 0;
                         k < eval_num_metrics && len >= 0 && (size_t)len < err_size; k++)
                        len += snprintf(err + len, err_size - (size_t)len, "%s %s",
                                        k ? "," : "", eval_metrics[k].key);
                    return 2;
                }
                p += n + (end ? 1 : 0);
            }
            o->metrics = v;
        } else {
            o->plot_dir = v;
        }
    }
    return sim_options_parse(&o->sim, nrest, rest, err, err_size);
}

/* The policies: --plugin's, else every bundled one; softmax is the
 * reference and is added first when missing. */
static int resolve(const eval_options *o, eval_result *r)
{
    char err[1024];
    const sim_options *so = &o->sim;
    uint32_t max = (so->num_plugins ? so->num_plugins : wsel_num_bundled_plugins) + 1;
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
    uint32_t count = so->num_plugins ? so->num_plugins : wsel_num_bundled_plugins;
    for (uint32_t i = 0; i < count; i++) {
        const char *spec =
            so->num_plugins ? so->plugins[i].spec : wsel_bundled_plugins[i];
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
        usage(stdout);
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
