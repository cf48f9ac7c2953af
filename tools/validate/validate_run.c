// SPDX-License-Identifier: Apache-2.0
/*
 * validate_run.c -- run one conformance check in a child process.
 *
 * The child loads the plugin itself, runs the check and writes its
 * vcheck_result into a pipe. The parent reads with a deadline: a child that
 * dies on a signal, exits without a verdict or outlives the timeout (then
 * SIGKILL) fails its check, and the run goes on.
 */
#include "validate.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void vset(vcheck_result *res, int32_t status, const char *fmt, va_list ap)
{
    if (res->status == VCHECK_FAIL)
        return; /* the first failure is the one worth reading */
    res->status = status;
    vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
}

void vfail(vcheck_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(res, VCHECK_FAIL, fmt, ap);
    va_end(ap);
}

void vskip(vcheck_result *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(res, VCHECK_SKIP, fmt, ap);
    va_end(ap);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

/* Read up to `len` bytes before `deadline_ms`. Returns bytes read, or -1 on
 * timeout. Stops early at end of file. */
static ssize_t read_until(int fd, void *buf, size_t len, int64_t deadline_ms)
{
    size_t got = 0;
    while (got < len) {
        int64_t left = deadline_ms - now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = poll(&pfd, 1, left > 1000 ? 1000 : (int)left);
        if (rc < 0 && errno != EINTR)
            break;
        if (rc <= 0)
            continue;
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static void run_child(const vcheck *check, const vcontext *ctx, int fd)
{
    /* A crash must end the child with its signal, whatever handlers the
     * parent inherited (a test framework's, a sanitizer's), so the parent
     * can name it. */
    static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); i++)
        signal(crash_signals[i], SIG_DFL);
    vcheck_result res;
    memset(&res, 0, sizeof(res));
    res.status = VCHECK_PASS;
    check->run(ctx, &res);
    write_all(fd, &res, sizeof(res));
    close(fd);
    _exit(0);
}

static void describe_exit(int status, vcheck_result *out)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        vfail(out, "crashed: killed by signal %d (%s)", sig, strsignal(sig));
    } else if (WIFEXITED(status)) {
        vfail(out, "exited with status %d before reporting a verdict",
              WEXITSTATUS(status));
    } else {
        vfail(out, "ended without reporting a verdict");
    }
}

void vcheck_run_isolated(const vcheck *check, const vcontext *ctx, unsigned timeout_s,
                         vcheck_result *out)
{
    memset(out, 0, sizeof(*out));
    int fds[2];
    if (pipe(fds) != 0) {
        vfail(out, "cannot create a pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        vfail(out, "cannot fork: %s", strerror(errno));
        goto out_close_pipe;
    }
    if (pid == 0) {
        close(fds[0]);
        run_child(check, ctx, fds[1]);
    }
    close(fds[1]);
    fds[1] = -1;

    vcheck_result res;
    ssize_t got =
        read_until(fds[0], &res, sizeof(res), now_ms() + (int64_t)timeout_s * 1000);
    if (got < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        vfail(out, "timed out: no verdict after %u s (killed)", timeout_s);
        goto out_close_pipe;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if ((size_t)got == sizeof(res)) {
        *out = res;
        out->detail[sizeof(out->detail) - 1] = '\0';
    } else {
        describe_exit(status, out);
    }

out_close_pipe:
    close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
}
