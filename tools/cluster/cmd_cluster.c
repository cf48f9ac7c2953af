// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_cluster.c -- `wsel cluster`: start N wsel-engine processes on free
 * localhost ports, print where each listens, stop them all on Ctrl-C
 * (SIGINT or SIGTERM) or when one of them exits.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

#define MAX_WORKERS 256
#define MAX_ARGS    128

/* The command line, parsed. */
typedef struct cluster_options {
    uint32_t workers;
    const char *dp, *engine, *ready;
    int kv;
    char *pass[MAX_ARGS]; /* to every engine, unchanged */
    int npass;
} cluster_options;

static int pass_on(void *target, const cli_value *v)
{
    cluster_options *o = target;
    if (o->npass == MAX_ARGS - 24) {
        snprintf(v->err, v->err_size, "too many engine options");
        return CLI_USAGE;
    }
    o->pass[o->npass++] = (char *)v->text;
    return CLI_OK;
}

#define OFF(field) offsetof(cluster_options, field)

static const cli_option cluster_option_table[] = {
    {CLI_OPT("workers", "N", "engines to start", "1"),
     CLI_AS_U32(OFF(workers), 1, MAX_WORKERS)},
    {CLI_OPT("dp", "D", "data-parallel ranks per engine", "1"), CLI_AS_STR(OFF(dp))},
    {CLI_OPT("kv-events", NULL,
             "each engine publishes KV events (and replays) on free ports", NULL),
     CLI_AS_FLAG(OFF(kv))},
    {CLI_OPT("engine", "PATH", "the wsel-engine program",
             "$WSEL_ENGINE, else beside wsel, else the build tree's"),
     CLI_AS_STR(OFF(engine))},
    {CLI_OPT("ready-file", "F", "write every worker's lines to F once all listen", NULL),
     CLI_AS_STR(OFF(ready))},
};
static const cli_group cluster_options_group = {NULL, CLI_TABLE(cluster_option_table), 0};
static const cli_group *const cluster_groups[] = {&cluster_options_group};

static const cli_command cluster_command = {
    .name = "wsel cluster",
    .usage = "[--workers N] [--dp D] [--kv-events] [--engine PATH] [ENGINE OPTIONS...]",
    .about =
        "Start N wsel-engine workers (default 1) on free 127.0.0.1 ports and print, per\n"
        "worker, its URL and (with --kv-events) the KV event endpoints of its ranks.\n"
        "Other options go to every engine unchanged (see wsel-engine --help), e.g.\n"
        "--time-scale 10 --kv-blocks 4096. Ctrl-C stops them all.",
    CLI_GROUPS(cluster_groups),
    .operand = pass_on,
    .pass_unknown = 1,
};

static void engine_path(char *out, size_t size, const char *given)
{
    if (given) {
        snprintf(out, size, "%s", given);
        return;
    }
    const char *env = getenv("WSEL_ENGINE");
    if (env && *env) {
        snprintf(out, size, "%s", env);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            snprintf(out, size, "%.*s/wsel-engine", (int)(slash - self), self);
            if (access(out, X_OK) == 0)
                return;
        }
    }
    snprintf(out, size, "%s", WSEL_ENGINE_DEFAULT_PATH);
}

static void stop_all(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    /* Engines stop within moments; after 10 s they are killed. */
    for (int i = 0; i < n; i++) {
        if (pids[i] <= 0)
            continue;
        int done = 0;
        for (int k = 0; k < 1000 && !done; k++) {
            done = waitpid(pids[i], NULL, WNOHANG) == pids[i];
            if (!done)
                usleep(10000);
        }
        if (!done) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    }
}

/* The workers run and what waits for them. */
typedef struct cluster {
    const cluster_options *o;
    char exe[PATH_MAX];
    char dir[32]; /* the port files' folder */
    char port_file[MAX_WORKERS][PATH_MAX + 32];
    pid_t pids[MAX_WORKERS];
    int started;
    sigset_t stop, old; /* blocked while the cluster runs; the mask before */
} cluster;

/* Worker w's command line into args[MAX_ARGS]. */
static void worker_args(cluster *c, uint32_t w, char **args)
{
    int n = 0;
    args[n++] = c->exe;
    args[n++] = "--port";
    args[n++] = "0";
    args[n++] = "--port-file";
    args[n++] = c->port_file[w];
    args[n++] = "--dp";
    args[n++] = (char *)c->o->dp;
    if (c->o->kv) {
        args[n++] = "--kv-events";
        args[n++] = "tcp://127.0.0.1:0";
        args[n++] = "--kv-events-replay";
        args[n++] = "tcp://127.0.0.1:0";
    }
    for (int k = 0; k < c->o->npass; k++)
        args[n++] = c->o->pass[k];
    args[n] = NULL;
}

/* Fork and exec every worker. 0, or -1 after a message. */
static int start_workers(cluster *c)
{
    for (uint32_t w = 0; w < c->o->workers; w++) {
        snprintf(c->port_file[w], sizeof(c->port_file[w]), "%s/worker-%u.port", c->dir,
                 w);
        char *args[MAX_ARGS];
        worker_args(c, w, args);
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "wsel cluster: fork: %s\n", strerror(errno));
            return -1;
        }
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &c->old, NULL);
            /* The cluster prints every worker's lines itself. */
            if (!freopen("/dev/null", "w", stdout))
                _exit(127);
            execv(c->exe, args);
            fprintf(stderr, "wsel cluster: cannot run %s: %s\n", c->exe, strerror(errno));
            _exit(127);
        }
        c->pids[w] = pid;
        c->started++;
    }
    return 0;
}

/* Wait for every port file (an engine writes it once listening). 0 or -1. */
static int wait_listening(cluster *c)
{
    for (uint32_t w = 0; w < c->o->workers; w++) {
        struct timespec tick = {0, 20000000};
        int waited = 0;
        while (access(c->port_file[w], R_OK) != 0) {
            if (waitpid(c->pids[w], NULL, WNOHANG) == c->pids[w]) {
                c->pids[w] = 0;
                fprintf(stderr, "wsel cluster: worker %u exited before listening\n", w);
                return -1;
            }
            if (++waited > 3000) { /* 60 s */
                fprintf(stderr, "wsel cluster: worker %u did not listen within 60 s\n",
                        w);
                return -1;
            }
            nanosleep(&tick, NULL);
        }
    }
    return 0;
}

/* Every worker's lines, on stdout and in --ready-file. */
static void print_ready(const cluster *c)
{
    FILE *rf = c->o->ready ? fopen(c->o->ready, "w") : NULL;
    for (uint32_t w = 0; w < c->o->workers; w++) {
        FILE *f = fopen(c->port_file[w], "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) {
            printf("worker %u %s", w, line);
            if (rf)
                fprintf(rf, "worker %u %s", w, line);
        }
        if (f)
            fclose(f);
    }
    if (rf)
        fclose(rf);
    printf("wsel cluster: %u worker(s) up; Ctrl-C stops them\n", c->o->workers);
    fflush(stdout);
}

/* Until SIGINT or SIGTERM (exit 0) or a worker's exit (1). */
static int wait_for_stop(cluster *c)
{
    for (;;) {
        int sig;
        sigwait(&c->stop, &sig);
        if (sig != SIGCHLD)
            return WSEL_EXIT_OK;
        int gone = 0;
        for (uint32_t w = 0; w < c->o->workers; w++)
            if (c->pids[w] > 0 && waitpid(c->pids[w], NULL, WNOHANG) == c->pids[w]) {
                fprintf(stderr, "wsel cluster: worker %u exited; stopping the others\n",
                        w);
                c->pids[w] = 0;
                gone = 1;
            }
        if (gone)
            return WSEL_EXIT_FAILURE;
    }
}

int wsel_cmd_cluster(int argc, char **argv)
{
    static cluster_options o;
    static cluster c;
    char err[512];
    o = (cluster_options){.workers = 1, .dp = "1"};
    int rc = cli_parse(&cluster_command, &o, argc, argv, err, sizeof(err));
    if (rc != CLI_OK)
        return cli_report(&cluster_command, rc, err);
    memset(&c, 0, sizeof(c));
    c.o = &o;
    engine_path(c.exe, sizeof(c.exe), o.engine);
    snprintf(c.dir, sizeof(c.dir), "/tmp/wsel-cluster-XXXXXX");
    if (!mkdtemp(c.dir)) {
        fprintf(stderr, "wsel cluster: cannot create a folder in /tmp: %s\n",
                strerror(errno));
        return WSEL_EXIT_FAILURE;
    }
    sigemptyset(&c.stop);
    sigaddset(&c.stop, SIGINT);
    sigaddset(&c.stop, SIGTERM);
    sigaddset(&c.stop, SIGCHLD);
    sigprocmask(SIG_BLOCK, &c.stop, &c.old);
    int status = WSEL_EXIT_FAILURE;
    if (start_workers(&c) == 0 && wait_listening(&c) == 0) {
        print_ready(&c);
        status = wait_for_stop(&c);
    }
    stop_all(c.pids, c.started);
    for (uint32_t w = 0; w < o.workers; w++)
        unlink(c.port_file[w]);
    rmdir(c.dir);
    return status;
}
