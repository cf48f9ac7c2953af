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

#include "commands.h"

#define MAX_WORKERS 256
#define MAX_ARGS    128

static const char usage_text[] =
    "usage: wsel cluster [--workers N] [--dp D] [--kv-events] [--engine PATH] "
    "[ENGINE OPTIONS...]\n"
    "\n"
    "Start N wsel-engine workers (default 1) on free 127.0.0.1 ports and print, per\n"
    "worker, its URL and (with --kv-events) the KV event endpoints of its ranks.\n"
    "Other options go to every engine unchanged (see wsel-engine --help), e.g.\n"
    "--time-scale 10 --kv-blocks 4096. Ctrl-C stops them all.\n"
    "\n"
    "  --workers N     engines to start (1)\n"
    "  --dp D          data-parallel ranks per engine (1)\n"
    "  --kv-events     each engine publishes KV events (and replays) on free ports\n"
    "  --engine PATH   the wsel-engine program (default: $WSEL_ENGINE, else the\n"
    "                  one beside wsel, else the build tree's)\n"
    "  --ready-file F  write every worker's lines to F once all listen\n";

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

int wsel_cmd_cluster(int argc, char **argv)
{
    long workers = 1;
    const char *dp = "1", *engine = NULL, *ready = NULL;
    int kv = 0;
    char *pass[MAX_ARGS];
    int npass = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return WSEL_EXIT_OK;
        }
        if (strcmp(a, "--kv-events") == 0) {
            kv = 1;
        } else if (strcmp(a, "--workers") == 0 && i + 1 < argc) {
            char *end;
            workers = strtol(argv[++i], &end, 10);
            if (*end || workers < 1 || workers > MAX_WORKERS) {
                fprintf(stderr, "wsel cluster: --workers 1 to %d\n", MAX_WORKERS);
                return WSEL_EXIT_USAGE;
            }
        } else if (strcmp(a, "--dp") == 0 && i + 1 < argc) {
            dp = argv[++i];
        } else if (strcmp(a, "--engine") == 0 && i + 1 < argc) {
            engine = argv[++i];
        } else if (strcmp(a, "--ready-file") == 0 && i + 1 < argc) {
            ready = argv[++i];
        } else if (npass < MAX_ARGS - 24) {
            pass[npass++] = argv[i];
        } else {
            fprintf(stderr, "wsel cluster: too many engine options\n");
            return WSEL_EXIT_USAGE;
        }
    }
    char exe[PATH_MAX];
    engine_path(exe, sizeof(exe), engine);
    char dir[] = "/tmp/wsel-cluster-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "wsel cluster: cannot create a folder in /tmp: %s\n",
                strerror(errno));
        return WSEL_EXIT_FAILURE;
    }
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGCHLD);
    sigprocmask(SIG_BLOCK, &stop, &old);

    pid_t pids[MAX_WORKERS] = {0};
    char port_file[MAX_WORKERS][PATH_MAX + 32];
    int status = WSEL_EXIT_FAILURE, started = 0;
    for (long w = 0; w < workers; w++) {
        snprintf(port_file[w], sizeof(port_file[w]), "%s/worker-%ld.port", dir, w);
        char *args[MAX_ARGS];
        int n = 0;
        args[n++] = exe;
        args[n++] = "--port";
        args[n++] = "0";
        args[n++] = "--port-file";
        args[n++] = port_file[w];
        args[n++] = "--dp";
        args[n++] = (char *)dp;
        if (kv) {
            args[n++] = "--kv-events";
            args[n++] = "tcp://127.0.0.1:0";
            args[n++] = "--kv-events-replay";
            args[n++] = "tcp://127.0.0.1:0";
        }
        for (int k = 0; k < npass; k++)
            args[n++] = pass[k];
        args[n] = NULL;
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "wsel cluster: fork: %s\n", strerror(errno));
            goto out_stop;
        }
        if (pid == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            /* The cluster prints every worker's lines itself. */
            if (!freopen("/dev/null", "w", stdout))
                _exit(127);
            execv(exe, args);
            fprintf(stderr, "wsel cluster: cannot run %s: %s\n", exe, strerror(errno));
            _exit(127);
        }
        pids[w] = pid;
        started++;
    }
    /* Wait for every port file (an engine writes it once listening). */
    for (long w = 0; w < workers; w++) {
        struct timespec tick = {0, 20000000};
        int waited = 0;
        while (access(port_file[w], R_OK) != 0) {
            if (waitpid(pids[w], NULL, WNOHANG) == pids[w]) {
                pids[w] = 0;
                fprintf(stderr, "wsel cluster: worker %ld exited before listening\n", w);
                goto out_stop;
            }
            if (++waited > 3000) { /* 60 s */
                fprintf(stderr, "wsel cluster: worker %ld did not listen within 60 s\n",
                        w);
                goto out_stop;
            }
            nanosleep(&tick, NULL);
        }
    }
    FILE *rf = ready ? fopen(ready, "w") : NULL;
    for (long w = 0; w < workers; w++) {
        FILE *f = fopen(port_file[w], "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) {
            printf("worker %ld %s", w, line);
            if (rf)
                fprintf(rf, "worker %ld %s", w, line);
        }
        if (f)
            fclose(f);
    }
    if (rf)
        fclose(rf);
    printf("wsel cluster: %ld worker(s) up; Ctrl-C stops them\n", workers);
    fflush(stdout);
    for (;;) {
        int sig;
        sigwait(&stop, &sig);
        if (sig != SIGCHLD) {
            status = WSEL_EXIT_OK;
            break;
        }
        int gone = 0;
        for (long w = 0; w < workers; w++)
            if (pids[w] > 0 && waitpid(pids[w], NULL, WNOHANG) == pids[w]) {
                fprintf(stderr, "wsel cluster: worker %ld exited; stopping the others\n",
                        w);
                pids[w] = 0;
                gone = 1;
            }
        if (gone)
            break;
    }

out_stop:
    stop_all(pids, started);
    for (long w = 0; w < workers; w++)
        unlink(port_file[w]);
    rmdir(dir);
    return status;
}
