// SPDX-License-Identifier: Apache-2.0
/*
 * testutil.c -- helpers for the host suites (see testutil.h).
 */
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#ifndef WSEL_TEST_FIXTURE_DIR
#error "WSEL_TEST_FIXTURE_DIR must name the fixture build folder"
#endif

static void die(const char *what)
{
    perror(what);
    abort();
}

char *tu_temp_dir(void)
{
    char *dir = strdup("/tmp/wsel-host-test-XXXXXX");
    if (dir == NULL || mkdtemp(dir) == NULL)
        die("mkdtemp");
    return dir;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void tu_remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *tu_install_fixture(const char *dir, const char *name, const char *as)
{
    char src[1024];
    snprintf(src, sizeof(src), "%s/%s.so", WSEL_TEST_FIXTURE_DIR, name);
    size_t n = strlen(dir) + strlen(as) + 2;
    char *dst = malloc(n);
    if (dst == NULL)
        die("malloc");
    snprintf(dst, n, "%s/%s", dir, as);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        die(src);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0)
        die(dst);
    char buf[65536];
    ssize_t r;
    while ((r = read(in, buf, sizeof(buf))) > 0) {
        if (write(out, buf, (size_t)r) != r)
            die("write");
    }
    close(in);
    if (fchmod(out, 0755) != 0)
        die("fchmod");
    close(out);
    return dst;
}

int tu_run_in_child(void (*fn)(void *), void *arg, char *out, size_t out_size)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        die("pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(pipefd[0]);
        dup2(pipefd[1], STDOUT_FILENO);
        dup2(pipefd[1], STDERR_FILENO);
        fn(arg);
        fflush(NULL);
        _exit(0);
    }
    close(pipefd[1]);
    size_t used = 0;
    char sink[4096];
    for (;;) {
        char *dst = used + 1 < out_size ? out + used : sink;
        size_t room = used + 1 < out_size ? out_size - 1 - used : sizeof(sink);
        ssize_t r = read(pipefd[0], dst, room);
        if (r <= 0)
            break;
        if (dst != sink)
            used += (size_t)r;
    }
    if (out_size > 0)
        out[used] = '\0';
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

void tu_log_init(tu_log *log)
{
    memset(log, 0, sizeof(*log));
    log->mutex = malloc(sizeof(pthread_mutex_t));
    if (log->mutex == NULL)
        die("malloc");
    pthread_mutex_init(log->mutex, NULL);
}

void tu_log_free(tu_log *log)
{
    pthread_mutex_destroy(log->mutex);
    free(log->mutex);
}

void tu_log_sink(void *user, int32_t level, const char *msg)
{
    (void)level;
    tu_log *log = user;
    pthread_mutex_lock(log->mutex);
    snprintf(log->lines[log->count % 64], sizeof(log->lines[0]), "%s", msg);
    log->count++;
    pthread_mutex_unlock(log->mutex);
}

int tu_log_count(tu_log *log, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(log->mutex);
    int kept = log->count < 64 ? log->count : 64;
    for (int i = 0; i < kept; i++)
        n += strstr(log->lines[i], needle) != NULL;
    pthread_mutex_unlock(log->mutex);
    return n;
}

/* Row i: 10 * i active blocks (row 0 cheapest, all distinct), flags[i]. */
static void fill_increasing(wsel_rank_state *ranks, uint32_t n, uint32_t dp, void *ctx)
{
    const uint8_t *flags = ctx;
    (void)dp;
    for (uint32_t i = 0; i < n; i++) {
        ranks[i].active_blocks = 10u * i;
        ranks[i].flags = flags ? flags[i] : 0;
    }
}

void tu_table_init(tu_table *t, uint32_t workers, uint32_t dp, const uint8_t *flags)
{
    char err[256];
    if (ts_table_init(t, workers, dp, 64, 16, 0, 1, fill_increasing, (void *)flags, err,
                      sizeof(err)) != 0) {
        fprintf(stderr, "tu_table_init: %s\n", err);
        abort();
    }
}

void tu_table_free(tu_table *t)
{
    ts_table_free(t);
}
