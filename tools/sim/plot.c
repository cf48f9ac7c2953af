// SPDX-License-Identifier: Apache-2.0
/*
 * plot.c -- collect chart data during runs, then draw it with gnuplot.
 */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SERIES       32
#define FLICKER_WINDOW_S 10

typedef struct series {
    const char *label;
    char file[64]; /* label made safe for a file name */
    float *ttft;
    size_t n_ttft, cap_ttft;
    FILE *load;
    int64_t next_load_ns;
    int64_t window;
    uint64_t routed, flickers;
    FILE *flicker;
} series;

struct sim_plot {
    char dir[PATH_MAX];
    uint32_t num_workers;
    series s[MAX_SERIES];
    uint32_t n;
};

/* Run argv with `dir` as working folder and stdout/stderr to /dev/null
 * unless `verbose`; returns its exit status, or -1 if it could not run. */
static int run_in(const char *dir, char *const argv[], int verbose)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (dir && chdir(dir) != 0)
            _exit(127);
        if (!verbose) {
            int fd = open("/dev/null", O_WRONLY);
            if (fd >= 0) {
                dup2(fd, STDOUT_FILENO);
                dup2(fd, STDERR_FILENO);
            }
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int sim_plot_open(sim_plot **out, const char *dir, uint32_t num_workers)
{
    char *const probe[] = {"gnuplot", "--version", NULL};
    if (run_in(NULL, probe, 0) != 0) {
        fprintf(stderr, "wsel sim: --plot needs gnuplot, which was not found in PATH "
                        "(Debian: apt-get install gnuplot-nox)\n");
        return -1;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "wsel sim: --plot %s: %s\n", dir, strerror(errno));
        return -1;
    }
    sim_plot *p = calloc(1, sizeof(*p));
    if (!p || strlen(dir) >= sizeof(p->dir)) {
        free(p);
        fprintf(stderr, "wsel sim: --plot %s: out of memory or path too long\n", dir);
        return -1;
    }
    strcpy(p->dir, dir);
    p->num_workers = num_workers;
    *out = p;
    return 0;
}

static FILE *open_data(const sim_plot *p, const char *stem, const char *suffix)
{
    char path[PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/%s_%s.dat", p->dir, stem, suffix);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "wsel sim: --plot: %s: %s\n", path, strerror(errno));
    return f;
}

int sim_plot_begin(sim_plot *p, const char *label)
{
    if (p->n == MAX_SERIES) {
        fprintf(stderr, "wsel sim: --plot draws at most %d policies\n", MAX_SERIES);
        return -1;
    }
    series *s = &p->s[p->n];
    memset(s, 0, sizeof(*s));
    s->label = label;
    snprintf(s->file, sizeof(s->file), "%u_", p->n);
    size_t k = strlen(s->file);
    const char *base = strrchr(label, '/') ? strrchr(label, '/') + 1 : label;
    for (; *base && k + 1 < sizeof(s->file); base++)
        s->file[k++] = (*base >= 'a' && *base <= 'z') || (*base >= '0' && *base <= '9') ||
                               (*base >= 'A' && *base <= 'Z')
                           ? *base
                           : '_';
    s->file[k] = '\0';
    s->load = open_data(p, s->file, "load");
    s->flicker = open_data(p, s->file, "flicker");
    s->window = -1;
    p->n++;
    return s->load && s->flicker ? 0 : -1;
}

void sim_plot_ttft(sim_plot *p, double ttft_ms)
{
    series *s = &p->s[p->n - 1];
    if (s->n_ttft == s->cap_ttft) {
        size_t cap = s->cap_ttft ? s->cap_ttft * 2 : 4096;
        float *grown = realloc(s->ttft, cap * sizeof(*grown));
        if (!grown)
            return; /* a thinner chart, not a failed run */
        s->ttft = grown;
        s->cap_ttft = cap;
    }
    s->ttft[s->n_ttft++] = (float)ttft_ms;
}

static void flush_window(series *s)
{
    if (s->window >= 0 && s->routed > 0)
        fprintf(s->flicker, "%lld %.6f\n", (long long)(s->window * FLICKER_WINDOW_S),
                (double)s->flickers / (double)s->routed);
    s->routed = s->flickers = 0;
}

void sim_plot_route(sim_plot *p, int64_t now_ns, uint32_t worker, int flicker)
{
    (void)worker;
    series *s = &p->s[p->n - 1];
    int64_t window = now_ns / (FLICKER_WINDOW_S * 1000000000ll);
    if (window != s->window) {
        flush_window(s);
        s->window = window;
    }
    /* Block-weighted as flicker_rate: |flicker| owned blocks, moved when > 0
     * (sim_observer.on_route). */
    s->routed += (uint64_t)(flicker < 0 ? -(int64_t)flicker : flicker);
    s->flickers += flicker > 0 ? (uint64_t)flicker : 0;
}

void sim_plot_load(sim_plot *p, int64_t now_ns, const uint64_t *worker_tokens,
                   uint32_t num_workers)
{
    series *s = &p->s[p->n - 1];
    if (now_ns < s->next_load_ns)
        return;
    s->next_load_ns = now_ns + 1000000000ll;
    fprintf(s->load, "%.3f", (double)now_ns / 1e9);
    for (uint32_t w = 0; w < num_workers; w++)
        fprintf(s->load, " %llu", (unsigned long long)worker_tokens[w]);
    fputc('\n', s->load);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static int write_ttft_cdf(sim_plot *p, series *s)
{
    FILE *f = open_data(p, s->file, "ttft");
    if (!f)
        return -1;
    qsort(s->ttft, s->n_ttft, sizeof(float), cmp_float);
    size_t step = s->n_ttft > 2000 ? s->n_ttft / 2000 : 1;
    for (size_t i = 0; i < s->n_ttft; i += step)
        fprintf(f, "%.3f %.6f\n", s->ttft[i], (double)(i + 1) / (double)s->n_ttft);
    if (s->n_ttft)
        fprintf(f, "%.3f 1\n", s->ttft[s->n_ttft - 1]);
    return fclose(f) == 0 ? 0 : -1;
}

static int write_script(sim_plot *p)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/charts.gp", p->dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "wsel sim: --plot: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f,
            "set terminal png size 1000,600 noenhanced\nset key outside right\nset grid\n"
            "set output 'ttft_cdf.png'\nset title 'TTFT CDF'\n"
            "set xlabel 'TTFT (ms)'\nset ylabel 'fraction of requests'\nset logscale x\n"
            "plot ");
    for (uint32_t i = 0; i < p->n; i++)
        fprintf(f, "%s'%s_ttft.dat' using 1:2 with lines lw 2 title '%s'", i ? ", " : "",
                p->s[i].file, p->s[i].file);
    fprintf(f, "\nunset logscale x\nset output 'flicker.png'\n"
               "set title 'Flicker (affinity key moved worker) per 10 s window'\n"
               "set xlabel 'simulated time (s)'\nset ylabel 'flicker rate'\nplot ");
    for (uint32_t i = 0; i < p->n; i++)
        fprintf(f, "%s'%s_flicker.dat' using 1:2 with lines lw 2 title '%s'",
                i ? ", " : "", p->s[i].file, p->s[i].file);
    fprintf(f, "\nset ylabel 'active tokens of the busiest rank'\n");
    for (uint32_t i = 0; i < p->n; i++) {
        fprintf(f,
                "set output 'load_%s.png'\nset title 'Per-worker load (busiest rank; "
                "lockstep pace): %s'\nplot ",
                p->s[i].file, p->s[i].file);
        for (uint32_t w = 0; w < p->num_workers; w++)
            fprintf(f, "%s'%s_load.dat' using 1:%u with lines title 'worker %u'",
                    w ? ", " : "", p->s[i].file, w + 2, w);
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : -1;
}

int sim_plot_render(sim_plot *p)
{
    for (uint32_t i = 0; i < p->n; i++) {
        series *s = &p->s[i];
        flush_window(s);
        if (fclose(s->load) != 0 || fclose(s->flicker) != 0)
            return -1;
        s->load = s->flicker = NULL;
        if (write_ttft_cdf(p, s) != 0)
            return -1;
    }
    if (write_script(p) != 0)
        return -1;
    char *const argv[] = {"gnuplot", "charts.gp", NULL};
    if (run_in(p->dir, argv, 1) != 0) {
        fprintf(stderr, "wsel sim: gnuplot failed on %s/charts.gp\n", p->dir);
        return -1;
    }
    fprintf(stderr, "wsel sim: charts in %s (ttft_cdf.png, flicker.png, load_*.png)\n",
            p->dir);
    return 0;
}

void sim_plot_close(sim_plot *p)
{
    if (!p)
        return;
    for (uint32_t i = 0; i < p->n; i++) {
        if (p->s[i].load)
            fclose(p->s[i].load);
        if (p->s[i].flicker)
            fclose(p->s[i].flicker);
        free(p->s[i].ttft);
    }
    free(p);
}
