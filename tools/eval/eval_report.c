// SPDX-License-Identifier: Apache-2.0
/*
 * eval_report.c -- what `wsel eval` prints: one Markdown table per load
 * (mean +- 95 % CI per policy and metric, '*' on a significant difference
 * from softmax), the issue-12 target checks, the JSON document and the
 * gnuplot charts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval.h"
#include "json_write.h"
#include "report.h"

void eval_values(const eval_options *o, const eval_result *r, uint32_t k, uint32_t load,
                 uint32_t policy, double *v)
{
    for (uint32_t s = 0; s < o->seeds; s++)
        v[s] = sim_metric_table[k].get(
            &r->metrics[(load * r->num_policies + policy) * o->seeds + s]);
}

static int policy_index(const eval_result *r, const char *name)
{
    for (uint32_t p = 0; p < r->num_policies; p++)
        if (strcmp(r->policies[p].label, name) == 0 && !r->policies[p].config)
            return (int)p;
    return -1;
}

static eval_stat stat_of(const eval_options *o, const eval_result *r, uint32_t k,
                         uint32_t load, uint32_t p)
{
    double v[EVAL_MAX_SEEDS], ref[EVAL_MAX_SEEDS];
    int sm = policy_index(r, "softmax");
    eval_values(o, r, k, load, p, v);
    if (sm >= 0 && (uint32_t)sm != p)
        eval_values(o, r, k, load, (uint32_t)sm, ref);
    return eval_stat_paired(v, sm >= 0 && (uint32_t)sm != p ? ref : NULL, o->seeds);
}

int eval_metric_index(const char *name, size_t len)
{
    for (uint32_t k = 0; k < SIM_NUM_METRICS; k++) {
        const sim_metric_def *d = &sim_metric_table[k];
        if ((d->flags & SIM_MF_EVAL) && strlen(d->key) == len &&
            strncmp(d->key, name, len) == 0)
            return (int)k;
    }
    return -1;
}

/* Is metric k one of the --metrics columns? */
static int wanted(const eval_options *o, uint32_t k)
{
    if (!(sim_metric_table[k].flags & SIM_MF_EVAL))
        return 0;
    if (!o->metrics)
        return 1;
    for (const char *p = o->metrics; *p;) {
        size_t n = strcspn(p, ",");
        if (eval_metric_index(p, n) == (int)k)
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static void label_of(const eval_result *r, uint32_t p, char *buf, size_t size)
{
    if (r->policies[p].config)
        snprintf(buf, size, "%s %s", r->policies[p].label, r->policies[p].config);
    else
        snprintf(buf, size, "%s", r->policies[p].label);
}

void eval_print_tables(FILE *out, const eval_options *o, const eval_result *r)
{
    fprintf(
        out,
        "saturation: speedup %.4g (softmax's mean TTFT %.0f ms = 2 x unloaded %.0f ms; "
        "%s)\n",
        r->saturation, 2 * r->unloaded_ttft_ms, r->unloaded_ttft_ms,
        r->saturation_given ? "given by --saturation" : "found by search");
    sim_report_replicas_text(out, &o->sim.router);
    for (uint32_t l = 0; l < o->num_loads; l++) {
        fprintf(out, "\n%.0f %% of saturation (speedup %.4g), %u seeds:\n\n", o->loads[l],
                r->saturation * o->loads[l] / 100.0, o->seeds);
        fprintf(out, "| policy |");
        for (uint32_t k = 0; k < SIM_NUM_METRICS; k++)
            if (wanted(o, k))
                fprintf(out, " %s |", sim_metric_table[k].title);
        fprintf(out, "\n|---|");
        for (uint32_t k = 0; k < SIM_NUM_METRICS; k++)
            if (wanted(o, k))
                fprintf(out, "---:|");
        fputc('\n', out);
        for (uint32_t p = 0; p < r->num_policies; p++) {
            char name[256];
            label_of(r, p, name, sizeof(name));
            fprintf(out, "| %s |", name);
            for (uint32_t k = 0; k < SIM_NUM_METRICS; k++) {
                if (!wanted(o, k))
                    continue;
                const sim_metric_def *m = &sim_metric_table[k];
                eval_stat st = stat_of(o, r, k, l, p);
                char a[32], b[32];
                snprintf(a, sizeof(a), m->fmt, st.mean * m->scale);
                snprintf(b, sizeof(b), m->fmt, st.ci * m->scale);
                fprintf(out, " %s ±%s%s |", a, b, st.significant ? "*" : "");
            }
            fputc('\n', out);
        }
    }
    fprintf(out,
            "\nmean ±95 %% CI (Student t) over seeds %llu..%llu; * = differs from "
            "softmax at 95 %% (paired t on the per-seed differences).\n",
            (unsigned long long)o->sim.seed,
            (unsigned long long)(o->sim.seed + o->seeds - 1));
}

/*
 * Targets (issue 12) with significance: an "at most" bound fails only when
 * the policy is significantly above it; a "below" bound holds only when the
 * policy is significantly below. Per seed d = x - k * ref - c; CI of d.
 */
typedef struct check {
    const char *what;
    int ok;
    double value, bound;
} check;

static check bound_check(const eval_options *o, const eval_result *r, uint32_t load,
                         uint32_t metric, int p, int ref, double k, double c, int strict,
                         const char *what)
{
    double x[EVAL_MAX_SEEDS], y[EVAL_MAX_SEEDS], d[EVAL_MAX_SEEDS];
    eval_values(o, r, metric, load, (uint32_t)p, x);
    eval_values(o, r, metric, load, (uint32_t)ref, y);
    double mx = 0, bound = 0;
    for (uint32_t s = 0; s < o->seeds; s++) {
        d[s] = x[s] - (k * y[s] + c);
        mx += x[s];
        bound += k * y[s] + c;
    }
    eval_stat st = eval_stat_paired(d, NULL, o->seeds);
    int above = st.mean - st.ci > 1e-12;  /* significantly above */
    int below = st.mean + st.ci < -1e-12; /* significantly below */
    if (st.ci == 0) {                     /* identical seeds */
        above = st.mean > 1e-12;
        below = st.mean < -1e-12;
    }
    check ch = {what, strict ? below : !above, mx / o->seeds, bound / o->seeds};
    return ch;
}

static void emit(FILE *out, int json, int *first, double load, const char *policy,
                 check ch, double scale)
{
    if (json) {
        fprintf(out,
                "%s{\"load\":%.6g,\"policy\":\"%s\",\"target\":\"%s\",\"met\":%s,"
                "\"value\":%.6g,\"bound\":%.6g}",
                *first ? "" : ",", load, policy, ch.what, ch.ok ? "true" : "false",
                ch.value, ch.bound);
        *first = 0;
        return;
    }
    fprintf(out, "| %.0f %% | %s | %s | %.4g | %.4g | %s |\n", load, policy, ch.what,
            ch.value * scale, ch.bound * scale, ch.ok ? "met" : "**not met**");
}

/* When a target applies, beyond its load being 60 % or more. */
enum { T_ALWAYS, T_DP_LOCKSTEP_80, T_NO_DP };

/* One target: x <= k * y + c over the seeds (x < ... when strict), on
 * metric, shown * scale. x NULL: "not the worst", y against every other
 * policy. Rows whose policies did not run are left out. */
typedef struct target {
    const char *policy;
    int when;
    uint32_t metric;
    const char *x, *y;
    double k, c;
    int strict;
    double scale;
    const char *what;
} target;

static const target targets[] = {
    {"hysteresis", T_ALWAYS, SIM_METRIC_FLICKER, "hysteresis", "softmax", 1.0 / 3, 0, 0,
     100, "flicker <= 1/3 softmax"},
    {"hysteresis", T_ALWAYS, SIM_METRIC_KV_HIT_RATE, "softmax", "hysteresis", 1, 0.01, 0,
     100, "hit >= softmax - 1 pt (shown: softmax, hysteresis + 1 pt)"},
    {"hysteresis", T_ALWAYS, SIM_METRIC_TTFT_MEAN, "hysteresis", "softmax", 1.05, 0, 0, 1,
     "ttft mean <= 1.05 softmax"},
    {"hysteresis", T_ALWAYS, SIM_METRIC_TTFT_P99, "hysteresis", "softmax", 1.05, 0, 0, 1,
     "ttft p99 <= 1.05 softmax"},
    {"hysteresis", T_ALWAYS, SIM_METRIC_TTFT_P99, NULL, "hysteresis", 1, 0, 1, 1,
     "not the worst ttft p99"},
    {"dpgroup", T_DP_LOCKSTEP_80, SIM_METRIC_TTFT_P99, "dpgroup", "softmax", 0.95, 0, 0,
     1, "ttft p99 <= 0.95 softmax"},
    {"dpgroup", T_DP_LOCKSTEP_80, SIM_METRIC_GROUP_IMBALANCE, "dpgroup", "softmax", 1, 0,
     1, 1, "group imbalance below softmax"},
    {"dpgroup", T_NO_DP, SIM_METRIC_TTFT_MEAN, "dpgroup", "softmax", 1, 0, 0, 1,
     "ttft mean no worse than softmax"},
    {"dpgroup", T_NO_DP, SIM_METRIC_TTFT_P99, "dpgroup", "softmax", 1, 0, 0, 1,
     "ttft p99 no worse than softmax"},
    {"chash", T_ALWAYS, SIM_METRIC_KV_HIT_RATE, "softmax", "chash", 1, 0.05, 0, 100,
     "hit >= softmax - 5 pt (shown: softmax, chash + 5 pt)"},
    {"chash", T_ALWAYS, SIM_METRIC_TTFT_P99, "chash", "random", 1, 0, 1, 1,
     "ttft p99 below random"},
    {"chash", T_ALWAYS, SIM_METRIC_TTFT_P99, "chash", "roundrobin", 1, 0, 1, 1,
     "ttft p99 below roundrobin"},
};
#define NUM_TARGETS (sizeof(targets) / sizeof(targets[0]))

/* Target t at load l, or .what NULL when it does not apply. */
static check target_check(const eval_options *o, const eval_result *r, const target *t,
                          uint32_t l)
{
    check none = {NULL, 0, 0, 0};
    const sim_cluster *c = &o->sim.cluster;
    int dp_shape = 0;
    for (uint32_t w = 0; w < c->num_workers; w++)
        dp_shape |= c->dp[w] > 1;
    int y = policy_index(r, t->y);
    int x = t->x ? policy_index(r, t->x) : y;
    if (policy_index(r, t->policy) < 0 || x < 0 || y < 0 || o->loads[l] < 59 ||
        (t->when == T_NO_DP && dp_shape) ||
        (t->when == T_DP_LOCKSTEP_80 &&
         (!dp_shape || c->dp_mode != SIM_DP_LOCKSTEP || o->loads[l] < 79)))
        return none;
    if (t->x)
        return bound_check(o, r, l, t->metric, x, y, t->k, t->c, t->strict, t->what);
    int worst = 1;
    for (uint32_t p = 0; p < r->num_policies; p++)
        if ((int)p != y &&
            !bound_check(o, r, l, t->metric, (int)p, y, t->k, t->c, t->strict, "").ok)
            worst = 0; /* someone is not significantly below y */
    check w = {t->what, !worst, 0, 0};
    return w;
}

void eval_print_targets(FILE *out, const eval_options *o, const eval_result *r, int json)
{
    int any = 0;
    for (size_t t = 0; t < NUM_TARGETS; t++)
        any |= policy_index(r, targets[t].policy) >= 0;
    if (policy_index(r, "softmax") < 0 || (!json && !any))
        return; /* no policy with a target here: no empty table */
    if (json)
        fprintf(out, "[");
    else
        fprintf(out,
                "\ntargets (issue 12; at most = not significantly above, below = "
                "significantly below):\n\n| load | policy | target | value | bound | "
                "|\n|---:|---|---|---:|---:|---|\n");
    int first = 1;
    for (uint32_t l = 0; l < o->num_loads; l++)
        for (size_t t = 0; t < NUM_TARGETS; t++) {
            check ch = target_check(o, r, &targets[t], l);
            if (ch.what != NULL)
                emit(out, json, &first, o->loads[l], targets[t].policy, ch,
                     targets[t].scale);
        }
    if (json)
        fprintf(out, "]");
}

void eval_print_json(FILE *out, const eval_options *o, const eval_result *r)
{
    const sim_options *so = &o->sim;
    fprintf(out, "{\"input\":{");
    if (so->trace) {
        fprintf(out, "\"trace\":");
        wsel_json_write_string(out, so->trace);
    } else {
        fprintf(out, "\"workload\":");
        wsel_json_write_string(out, sim_workload_name(so->workload.kind));
        fprintf(out, ",\"rate\":%.6g", so->workload.rate);
    }
    fprintf(out, ",\"jitter_ms\":%.6g},\"cluster\":{\"workers\":%u,\"dp\":[",
            (double)so->router.jitter_ns / 1e6, so->cluster.num_workers);
    for (uint32_t w = 0; w < so->cluster.num_workers; w++)
        fprintf(out, "%s%u", w ? "," : "", so->cluster.dp[w]);
    fprintf(out, "],\"dp_mode\":\"%s\",\"kv_blocks\":%u,\"block_size\":%u",
            sim_dp_mode_names[so->cluster.dp_mode], so->cluster.kv_blocks,
            so->cluster.block_size);
    sim_report_replicas_json(out, &so->router);
    fprintf(out, "},");
    fprintf(out,
            "\"saturation\":{\"speedup\":%.6g,\"unloaded_ttft_ms\":%.6g,"
            "\"given\":%s,\"probes\":[",
            r->saturation, r->unloaded_ttft_ms, r->saturation_given ? "true" : "false");
    for (uint32_t i = 0; i < r->num_probes; i++)
        fprintf(out, "%s{\"speedup\":%.6g,\"ttft_mean_ms\":%.6g}", i ? "," : "",
                r->probes[i].speedup, r->probes[i].ttft_mean_ms);
    fprintf(out, "]},\"seeds\":[");
    for (uint32_t s = 0; s < o->seeds; s++)
        fprintf(out, "%s%llu", s ? "," : "", (unsigned long long)(so->seed + s));
    fprintf(out,
            "],\"test\":\"paired t on per-seed differences from softmax, 95 %%\","
            "\"t975\":%.6g,\"loads\":[",
            eval_t975(o->seeds - 1));
    for (uint32_t l = 0; l < o->num_loads; l++) {
        fprintf(out, "%s\n{\"percent\":%.6g,\"speedup\":%.6g,\"policies\":[",
                l ? "," : "", o->loads[l], r->saturation * o->loads[l] / 100.0);
        for (uint32_t p = 0; p < r->num_policies; p++) {
            fprintf(out, "%s{\"plugin\":", p ? "," : "");
            wsel_json_write_string(out, r->policies[p].label);
            fprintf(out, ",\"config\":%s,\"metrics\":{",
                    r->policies[p].config ? r->policies[p].config : "{}");
            int first = 1;
            for (uint32_t k = 0; k < SIM_NUM_METRICS; k++) {
                if (!(sim_metric_table[k].flags & SIM_MF_EVAL))
                    continue;
                eval_stat st = stat_of(o, r, k, l, p);
                double v[EVAL_MAX_SEEDS];
                eval_values(o, r, k, l, p, v);
                fprintf(out,
                        "%s\"%s\":{\"mean\":%.6g,\"ci95\":%.6g,\"diff\":%.6g,"
                        "\"diff_ci95\":%.6g,\"significant\":%s,\"values\":[",
                        first ? "" : ",", sim_metric_table[k].key, st.mean, st.ci,
                        st.diff, st.diff_ci, st.significant ? "true" : "false");
                first = 0;
                for (uint32_t s = 0; s < o->seeds; s++)
                    fprintf(out, "%s%.6g", s ? "," : "", v[s]);
                fprintf(out, "]}");
            }
            fprintf(out, "}}");
        }
        fprintf(out, "]}");
    }
    fprintf(out, "\n],\"targets\":");
    eval_print_targets(out, o, r, 1);
    fprintf(out, ",\"wall_s\":%.3f}\n", r->wall_s);
}

/* Charts: per metric, mean with its CI against load, one line per policy. */
int eval_plot(const eval_options *o, const eval_result *r)
{
    static const uint32_t charted[] = {SIM_METRIC_TTFT_MEAN, SIM_METRIC_TTFT_P99,
                                       SIM_METRIC_KV_HIT_RATE, SIM_METRIC_FLICKER};
    static const char *const files[] = {"eval_ttft_mean", "eval_ttft_p99", "eval_hit",
                                        "eval_flicker"};
    char path[PATH_MAX];
    if (mkdir(o->plot_dir, 0777) != 0 && access(o->plot_dir, W_OK) != 0) {
        fprintf(stderr, "wsel eval: --plot %s: cannot create the folder\n", o->plot_dir);
        return -1;
    }
    for (uint32_t p = 0; p < r->num_policies; p++) {
        snprintf(path, sizeof(path), "%s/eval_%u.dat", o->plot_dir, p);
        FILE *f = fopen(path, "w");
        if (!f) {
            fprintf(stderr, "wsel eval: cannot write %s\n", path);
            return -1;
        }
        for (uint32_t l = 0; l < o->num_loads; l++) {
            fprintf(f, "%g", o->loads[l]);
            for (size_t c = 0; c < sizeof(charted) / sizeof(charted[0]); c++) {
                eval_stat st = stat_of(o, r, charted[c], l, p);
                double sc = sim_metric_table[charted[c]].scale;
                fprintf(f, " %.6g %.6g", st.mean * sc, st.ci * sc);
            }
            fputc('\n', f);
        }
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/eval.gp", o->plot_dir);
    FILE *gp = fopen(path, "w");
    if (!gp) {
        fprintf(stderr, "wsel eval: cannot write %s\n", path);
        return -1;
    }
    fprintf(gp, "set terminal pngcairo size 900,560\nset key outside right\n"
                "set xlabel '%% of saturation'\nset grid\n");
    for (size_t c = 0; c < sizeof(charted) / sizeof(charted[0]); c++) {
        fprintf(gp, "set output '%s.png'\nset ylabel '%s'\nplot ", files[c],
                sim_metric_table[charted[c]].title);
        for (uint32_t p = 0; p < r->num_policies; p++)
            fprintf(gp,
                    "%s'eval_%u.dat' using 1:%zu:%zu with yerrorlines lw 2 title '%s'",
                    p ? ", " : "", p, 2 + 2 * c, 3 + 2 * c, r->policies[p].label);
        fputc('\n', gp);
    }
    fclose(gp);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(o->plot_dir) != 0)
            _exit(127);
        execlp("gnuplot", "gnuplot", "eval.gp", (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "wsel eval: gnuplot failed (is it installed?); data in %s\n",
                o->plot_dir);
        return -1;
    }
    fprintf(stderr,
            "wsel eval: charts in %s (eval_ttft_mean.png, eval_ttft_p99.png, "
            "eval_hit.png, eval_flicker.png)\n",
            o->plot_dir);
    return 0;
}
