// SPDX-License-Identifier: Apache-2.0
/*
 * eval_run.c -- one simulation per (policy, speedup, seed), and the grid of
 * them spread over forked worker processes: runs are independent, so each
 * worker takes every jobs-th run and sends back its sim_metrics through a
 * pipe (fixed-size records, read to the end by the parent).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eval.h"
#include "host_policy.h"

int eval_run_one(const eval_options *o, const eval_policy *pol, double speedup,
                 uint64_t seed, sim_metrics *out)
{
    char err[1024];
    sim_options so = o->sim; /* a copy: seed and clock differ per run */
    so.workload.seed = seed;
    so.router.speedup = speedup;
    so.router.jitter_seed = seed;
    so.router.spread_seed = seed;
    sim_source *src = NULL;
    int32_t rc = so.trace
                     ? sim_source_open_trace(&src, so.trace, so.trace_block_size,
                                             so.cluster.block_size, so.skip_bad_lines,
                                             err, sizeof(err))
                     : sim_source_open_workload(&src, &so.workload, so.cluster.block_size,
                                                err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "wsel eval: %s\n", err);
        return -1;
    }
    sim_host_policy hp[SIM_MAX_REPLICAS];
    sim_policy policy[SIM_MAX_REPLICAS];
    uint32_t replicas = so.router.replicas > 1 ? so.router.replicas : 1;
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.seed = seed;
    opts.isolated = (uint32_t)so.isolated;
    rc =
        sim_host_policy_open_replicas(hp, policy, replicas, pol->path, pol->config, &opts,
                                      sim_cluster_ranks(&so.cluster), err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "wsel eval: %s: %s\n", pol->label, err);
        sim_source_close(src);
        return -1;
    }
    sim_run_args args = {
        .cluster = &so.cluster,
        .router = &so.router,
        .source = &sim_source_ops_default,
        .source_ctx = src,
        .policy = policy,
        .first_label = pol->label,
    };
    sim_result res;
    rc = sim_run(&args, &res, err, sizeof(err));
    sim_host_policy_close_replicas(hp, replicas);
    sim_source_close(src);
    if (rc != 0) {
        fprintf(stderr, "wsel eval: %s: %s\n", pol->label, err);
        return -1;
    }
    if (res.total.lost_requests != 0) {
        fprintf(stderr, "wsel eval: %s: %llu requests lost\n", pol->label,
                (unsigned long long)res.total.lost_requests);
        return -1;
    }
    *out = res.total;
    return 0;
}

typedef struct record {
    uint32_t job;
    int32_t status;
    sim_metrics m;
} record;

static void job_params(const eval_options *o, const eval_result *r, uint32_t job,
                       uint32_t *policy, double *speedup, uint64_t *seed)
{
    uint32_t per_load = r->num_policies * o->seeds;
    uint32_t load = job / per_load;
    *policy = (job / o->seeds) % r->num_policies;
    *seed = o->sim.seed + job % o->seeds;
    *speedup = r->saturation * o->loads[load] / 100.0;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static size_t read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t rd = read(fd, p + got, n - got);
        if (rd < 0 && errno == EINTR)
            continue;
        if (rd <= 0)
            break;
        got += (size_t)rd;
    }
    return got;
}

static void child(const eval_options *o, const eval_result *r, uint32_t k, uint32_t jobs,
                  uint32_t n, int fd)
{
    for (uint32_t i = k; i < n; i += jobs) {
        record rec;
        memset(&rec, 0, sizeof(rec));
        uint32_t p;
        double speedup;
        uint64_t seed;
        job_params(o, r, i, &p, &speedup, &seed);
        rec.job = i;
        rec.status = eval_run_one(o, &r->policies[p], speedup, seed, &rec.m);
        if (write_all(fd, &rec, sizeof(rec)) != 0 || rec.status != 0)
            break;
    }
    close(fd);
}

int eval_run_grid(const eval_options *o, eval_result *r)
{
    uint32_t n = o->num_loads * r->num_policies * o->seeds;
    uint32_t jobs = o->jobs ? o->jobs : 1;
    if (jobs > n)
        jobs = n;
    unsigned char *done = calloc(n, 1);
    if (!done)
        return -1;
    int status = 0;
    if (jobs == 1) {
        for (uint32_t i = 0; i < n && status == 0; i++) {
            uint32_t p;
            double speedup;
            uint64_t seed;
            job_params(o, r, i, &p, &speedup, &seed);
            status = eval_run_one(o, &r->policies[p], speedup, seed, &r->metrics[i]);
            done[i] = status == 0;
        }
        free(done);
        return status;
    }
    int fds[64];
    pid_t pids[64];
    uint32_t started = 0;
    fflush(NULL);
    for (uint32_t k = 0; k < jobs && k < 64; k++) {
        int pfd[2];
        if (pipe(pfd) != 0) {
            status = -1;
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            close(pfd[0]);
            close(pfd[1]);
            status = -1;
            break;
        }
        if (pid == 0) {
            close(pfd[0]);
            for (uint32_t j = 0; j < started; j++)
                close(fds[j]);
            child(o, r, k, jobs, n, pfd[1]);
            _exit(0);
        }
        close(pfd[1]);
        fds[started] = pfd[0];
        pids[started++] = pid;
    }
    for (uint32_t k = 0; k < started; k++) {
        record rec;
        while (read_all(fds[k], &rec, sizeof(rec)) == sizeof(rec)) {
            if (rec.job >= n || rec.status != 0) {
                status = -1;
                continue;
            }
            r->metrics[rec.job] = rec.m;
            done[rec.job] = 1;
        }
        close(fds[k]);
    }
    for (uint32_t k = 0; k < started; k++) {
        int ws;
        while (waitpid(pids[k], &ws, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            status = -1;
    }
    for (uint32_t i = 0; i < n && status == 0; i++)
        if (!done[i]) {
            fprintf(stderr, "wsel eval: run %u did not report\n", i);
            status = -1;
        }
    free(done);
    return status;
}
