/*
 * isolated_channel.c -- one helper's life as the host sees it: the shared
 * slot, the start-up handshake, a call with a deadline, noticing a death,
 * killing, reaping and restarting with backoff.
 *
 * Death is noticed without SIGCHLD: the waiting host polls waitpid(pid,
 * WNOHANG) on its own helper's pid between futex sleeps of at most
 * WAIT_SLICE_NS, so the library installs no signal handler and a crashed
 * helper is reaped (no zombie) by the call that notices it, or by a later
 * call once SIGKILL has taken effect.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolated_channel.h"

/* Spin this long for an answer before sleeping on the futex: a helper that
 * is awake answers a small table in a few microseconds, and a futex wake
 * costs a context switch on each side. */
#define SPIN_NS 50000u
/* Longest futex sleep between two checks that the helper is alive. */
#define WAIT_SLICE_NS 200000u
/* A helper must report ready or failed within this. Generous: it loads a
 * shared object and, in sanitizer builds, an instrumented runtime. */
#define START_LIMIT_NS (10ull * 1000000000ull)
/* Longest backoff between restarts. */
#define MAX_BACKOFF_NS 1000000000ull
/* How long close() lets the helper run the plugin's destroy. */
#define EXIT_WAIT_NS 100000000ull

static int32_t down_code(int32_t rc)
{
    return rc == WSEL_ISOLATED_ETIMEOUT ? WSEL_ISOLATED_ETIMEOUT : WSEL_ISOLATED_ECRASHED;
}

/* Log how a reaped helper ended. */
static void log_exit(wsel_isolated_channel *ch, pid_t pid, int status)
{
    if (WIFSIGNALED(status))
        wsel_host_log(ch->host, WSEL_LOG_WARN,
                      "%s: isolated helper (pid %d) killed by signal %d (%s)",
                      ch->plugin_path, (int)pid, WTERMSIG(status),
                      strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        wsel_host_log(ch->host, WSEL_LOG_WARN,
                      "%s: isolated helper (pid %d) exited with status %d",
                      ch->plugin_path, (int)pid, WEXITSTATUS(status));
}

/* Reap the helper if it has ended; 1 when there is no helper process any
 * more. A parent that ignores SIGCHLD gets ECHILD: the kernel reaped it. */
static int reap(wsel_isolated_channel *ch, int quiet)
{
    if (ch->pid <= 0)
        return 1;
    int status = 0;
    pid_t r;
    do
        r = waitpid(ch->pid, &status, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return 0;
    if (r > 0 && !quiet)
        log_exit(ch, ch->pid, status);
    ch->pid = 0;
    return 1;
}

/* Kill and wait for the helper; only close() and a failed start wait. */
static void kill_and_wait(wsel_isolated_channel *ch)
{
    if (ch->pid <= 0)
        return;
    kill(ch->pid, SIGKILL);
    int status;
    while (waitpid(ch->pid, &status, 0) < 0 && errno == EINTR)
        ;
    ch->pid = 0;
}

void wsel_channel_fail(wsel_isolated_channel *ch, int32_t rc, const char *why)
{
    int was_alive = !reap(ch, 0);
    if (was_alive) {
        kill(ch->pid, SIGKILL);
        reap(ch, 1); /* usually not yet: a later call reaps it */
    }
    uint64_t backoff = (uint64_t)ch->host->isolated.restart_backoff_us * 1000u;
    backoff <<= ch->failures < 6 ? ch->failures : 6;
    if (backoff > MAX_BACKOFF_NS)
        backoff = MAX_BACKOFF_NS;
    ch->failures++;
    ch->state = WSEL_CH_DOWN;
    ch->down_rc = down_code(rc);
    ch->restart_at = wsel_iso_now_ns() + backoff;
    wsel_host_log(ch->host, WSEL_LOG_WARN,
                  "%s: isolated helper %s%s; restarting in %llu us, the built-in "
                  "policy answers meanwhile",
                  ch->plugin_path, why, was_alive ? " (killed)" : "",
                  (unsigned long long)(backoff / 1000u));
}

/* Reset the slot for a new helper: nothing old may still write to it (the
 * previous helper is reaped), sequences equal so it sees no call yet. */
static void reset_slot(wsel_isolated_channel *ch)
{
    wsel_iso_slot *s = ch->slot;
    s->magic = WSEL_ISO_MAGIC;
    atomic_store(&s->state, WSEL_ISO_STARTING);
    atomic_store(&s->helper_sleeping, 0);
    atomic_store(&s->host_waiting, 0);
    atomic_store(&s->req_seq, ch->seq);
    atomic_store(&s->ack_seq, ch->seq);
    s->start_rc = 0;
    s->start_err[0] = '\0';
}

static int32_t start_helper(wsel_isolated_channel *ch)
{
    reset_slot(ch);
    int32_t rc = wsel_spawn_start(&ch->spawn, &ch->pid);
    if (rc < 0) {
        ch->pid = 0;
        return rc;
    }
    ch->state = WSEL_CH_STARTING;
    ch->start_limit = wsel_iso_now_ns() + START_LIMIT_NS;
    return 0;
}

/* A starting helper's report: 1 ready, 0 not yet, -1 failed (with the
 * channel marked down). */
static int check_started(wsel_isolated_channel *ch)
{
    uint32_t st = atomic_load(&ch->slot->state);
    if (st == WSEL_ISO_READY) {
        /* A restart loads the file again: it must still be the same
         * plugin (a replaced file is a switch, not a restart). */
        if (strncmp(ch->slot->name, ch->name, sizeof(ch->name)) != 0 &&
            ch->name[0] != '\0') {
            wsel_channel_fail(ch, ch->down_rc, "restarted as a different plugin");
            return -1;
        }
        ch->state = WSEL_CH_RUNNING;
        return 1;
    }
    if (st == WSEL_ISO_FAILED) {
        char why[600];
        ch->slot->start_err[sizeof(ch->slot->start_err) - 1] = '\0';
        snprintf(why, sizeof(why), "failed to start: %s", ch->slot->start_err);
        wsel_channel_fail(ch, ch->down_rc, why);
        return -1;
    }
    if (reap(ch, 0)) {
        wsel_channel_fail(ch, ch->down_rc, "ended before it was ready");
        return -1;
    }
    if (wsel_iso_now_ns() > ch->start_limit) {
        wsel_channel_fail(ch, ch->down_rc, "was not ready within 10 s");
        return -1;
    }
    return 0;
}

int32_t wsel_channel_ready(wsel_isolated_channel *ch)
{
    if (ch->state == WSEL_CH_RUNNING)
        return 0;
    if (ch->state == WSEL_CH_DOWN) {
        if (!reap(ch, 1) || wsel_iso_now_ns() < ch->restart_at)
            return ch->down_rc;
        if (start_helper(ch) < 0) {
            wsel_channel_fail(ch, ch->down_rc, "could not be spawned");
            return ch->down_rc;
        }
    }
    return check_started(ch) == 1 ? 0 : ch->down_rc;
}

/* Wait until ack_seq == seq: 0, or a WSEL_ISOLATED_E* with `why` set. */
static int32_t wait_answer(wsel_isolated_channel *ch, uint32_t seq, uint64_t deadline,
                           const char **why)
{
    wsel_iso_slot *s = ch->slot;
    uint64_t now = wsel_iso_now_ns();
    uint64_t spin_end = now + SPIN_NS < deadline ? now + SPIN_NS : deadline;
    for (uint32_t step = 0;
         atomic_load_explicit(&s->ack_seq, memory_order_acquire) != seq; step++) {
        if (wsel_iso_now_ns() >= spin_end)
            goto sleep;
        wsel_iso_spin_step(step);
    }
    return 0;
sleep:
    for (;;) {
        uint32_t ack = atomic_load(&s->ack_seq);
        if (ack == seq)
            return 0;
        if (ack != seq - 1u) {
            *why = "answered out of sequence (malformed answer)";
            return WSEL_ISOLATED_ECRASHED;
        }
        if (reap(ch, 0)) {
            *why = "ended during a call";
            return WSEL_ISOLATED_ECRASHED;
        }
        now = wsel_iso_now_ns();
        if (now >= deadline) {
            *why = "missed its deadline";
            return WSEL_ISOLATED_ETIMEOUT;
        }
        uint64_t left = deadline - now;
        atomic_store(&s->host_waiting, 1);
        if (atomic_load(&s->ack_seq) == ack)
            wsel_iso_futex_wait(&s->ack_seq, ack,
                                (int64_t)(left < WAIT_SLICE_NS ? left : WAIT_SLICE_NS));
        atomic_store(&s->host_waiting, 0);
    }
}

int32_t wsel_channel_call(wsel_isolated_channel *ch, uint64_t timeout_ns)
{
    wsel_iso_slot *s = ch->slot;
    uint64_t deadline = wsel_iso_now_ns() + timeout_ns;
    uint32_t seq = ++ch->seq;
    atomic_store(&s->req_seq, seq);
    if (atomic_load(&s->helper_sleeping))
        wsel_iso_futex_wake(&s->req_seq);
    const char *why = NULL;
    int32_t rc = wait_answer(ch, seq, deadline, &why);
    if (rc < 0)
        wsel_channel_fail(ch, rc, why);
    return rc;
}

/* Block until the first helper reports (or dies, or START_LIMIT_NS). */
static int32_t await_first_start(wsel_isolated_channel *ch, char *err, size_t err_size)
{
    wsel_iso_slot *s = ch->slot;
    uint64_t limit = wsel_iso_now_ns() + START_LIMIT_NS;
    for (;;) {
        uint32_t st = atomic_load(&s->state);
        if (st == WSEL_ISO_READY)
            return 0;
        if (st == WSEL_ISO_FAILED) {
            s->start_err[sizeof(s->start_err) - 1] = '\0';
            wsel_set_error(err, err_size, "%s", s->start_err);
            return s->start_rc < 0 && s->start_rc > -1000 ? s->start_rc : WSEL_EPLUGIN;
        }
        int status = 0;
        pid_t r = waitpid(ch->pid, &status, WNOHANG);
        if (r == ch->pid || (r < 0 && errno == ECHILD)) {
            ch->pid = 0;
            wsel_set_error(err, err_size,
                           "%s: isolated helper %s ended before it was ready (%s %d)",
                           ch->plugin_path, ch->spawn.sandbox,
                           WIFSIGNALED(status) ? "signal" : "exit status",
                           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            return WSEL_EPLUGIN;
        }
        if (wsel_iso_now_ns() > limit) {
            wsel_set_error(err, err_size, "%s: isolated helper was not ready within 10 s",
                           ch->plugin_path);
            return WSEL_ETIMEDOUT;
        }
        wsel_iso_futex_wait(&s->state, WSEL_ISO_STARTING, 10000000); /* 10 ms */
    }
}

/* A memfd sized for the slot, on a descriptor >= 10, close-on-exec. */
static int create_memfd(void)
{
    int fd = memfd_create("wsel-isolated", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    if (high < 0)
        return -1;
    if (ftruncate(high, (off_t)sizeof(wsel_iso_slot)) != 0) {
        close(high);
        return -1;
    }
    return high;
}

static void copy_report(wsel_isolated_channel *ch)
{
    const wsel_iso_slot *s = ch->slot;
    memcpy(ch->name, s->name, sizeof(ch->name));
    ch->name[sizeof(ch->name) - 1] = '\0';
    memcpy(ch->version, s->version, sizeof(ch->version));
    ch->version[sizeof(ch->version) - 1] = '\0';
    memcpy(ch->description, s->description, sizeof(ch->description));
    ch->description[sizeof(ch->description) - 1] = '\0';
    ch->desc.abi_major = WSEL_ABI_MAJOR;
    ch->desc.abi_minor = WSEL_ABI_MINOR;
    ch->desc.struct_size = sizeof(ch->desc);
    /* The channel serialises its callers itself (one slot). */
    ch->desc.capabilities =
        (s->capabilities & WSEL_CAP_STATELESS) | WSEL_CAP_CONCURRENT_SELECT;
    ch->desc.name = ch->name;
    ch->desc.version = ch->version;
    ch->desc.description = ch->description;
}

int32_t wsel_channel_open(wsel_isolated_channel *ch, wsel_host *host, const char *path,
                          const char *config, char *err, size_t err_size)
{
    ch->host = host;
    ch->memfd = -1;
    ch->deadline_ns = (uint64_t)host->isolated.select_deadline_us * 1000u;
    ch->plugin_path = strdup(path);
    if (ch->plugin_path == NULL) {
        wsel_set_error(err, err_size, "%s: out of memory", path);
        return WSEL_ENOMEM;
    }
    int32_t rc = WSEL_EIO;
    ch->memfd = create_memfd();
    if (ch->memfd < 0) {
        wsel_set_error(err, err_size, "%s: isolated mode: cannot create the memfd: %s",
                       path, strerror(errno));
        goto out_free_path;
    }
    ch->slot = mmap(NULL, sizeof(wsel_iso_slot), PROT_READ | PROT_WRITE, MAP_SHARED,
                    ch->memfd, 0);
    if (ch->slot == MAP_FAILED) {
        wsel_set_error(err, err_size, "%s: isolated mode: cannot map the memfd: %s", path,
                       strerror(errno));
        goto out_close_memfd;
    }
    rc = wsel_spawn_prepare(&ch->spawn, host, path, config, ch->memfd, err, err_size);
    if (rc < 0)
        goto out_unmap;
    if (pthread_mutex_init(&ch->mutex, NULL) != 0) {
        wsel_set_error(err, err_size, "%s: cannot create the channel mutex", path);
        rc = WSEL_ENOMEM;
        goto out_release_spawn;
    }
    rc = start_helper(ch);
    if (rc < 0) {
        wsel_set_error(err, err_size, "%s: cannot start %s: %s", path, ch->spawn.sandbox,
                       strerror(errno));
        goto out_destroy_mutex;
    }
    rc = await_first_start(ch, err, err_size);
    if (rc < 0)
        goto out_kill_helper;
    copy_report(ch);
    ch->state = WSEL_CH_RUNNING;
    return 0;

out_kill_helper:
    kill_and_wait(ch);
out_destroy_mutex:
    pthread_mutex_destroy(&ch->mutex);
out_release_spawn:
    wsel_spawn_release(&ch->spawn);
out_unmap:
    munmap(ch->slot, sizeof(wsel_iso_slot));
out_close_memfd:
    close(ch->memfd);
out_free_path:
    free(ch->plugin_path);
    return rc;
}

void wsel_channel_close(wsel_isolated_channel *ch)
{
    if (ch->state == WSEL_CH_RUNNING && ch->pid > 0) {
        ch->slot->op = WSEL_ISO_OP_EXIT;
        uint32_t seq = ++ch->seq;
        atomic_store(&ch->slot->req_seq, seq);
        wsel_iso_futex_wake(&ch->slot->req_seq);
        const char *why = NULL;
        wait_answer(ch, seq, wsel_iso_now_ns() + EXIT_WAIT_NS, &why);
    }
    kill_and_wait(ch);
    pthread_mutex_destroy(&ch->mutex);
    wsel_spawn_release(&ch->spawn);
    munmap(ch->slot, sizeof(wsel_iso_slot));
    close(ch->memfd);
    free(ch->plugin_path);
}
