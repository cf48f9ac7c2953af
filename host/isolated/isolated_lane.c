// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_lane.c -- one helper process and its slot: create the memfd,
 * spawn, wait for an answer with a deadline, notice death, kill, reap.
 *
 * Death is noticed without SIGCHLD: the waiting host polls waitpid(pid,
 * WNOHANG) on its own helper's pid between futex sleeps of at most
 * WAIT_SLICE_NS, so the library installs no signal handler, and a crashed
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

/* Spin (pause, then yield) this long for an answer before sleeping on the
 * futex: an awake helper answers a small table in a few microseconds, and
 * a futex wake costs a context switch on each side. */
#define SPIN_NS 50000u
/* Longest futex sleep between two checks that the helper is alive. */
#define WAIT_SLICE_NS 200000u
/* A helper must report ready or failed within this. Generous: it loads a
 * shared object and, in sanitizer builds, an instrumented runtime. */
#define START_LIMIT_NS (10ull * 1000000000ull)

static void log_exit(wsel_isolated_channel *ch, pid_t pid, int status)
{
    if (WIFSIGNALED(status))
        wsel__host_log(ch->host, WSEL_LOG_WARN,
                       "%s: isolated helper (pid %d) killed by signal %d (%s)",
                       ch->plugin_path, (int)pid, WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        wsel__host_log(ch->host, WSEL_LOG_WARN,
                       "%s: isolated helper (pid %d) exited with status %d",
                       ch->plugin_path, (int)pid, WEXITSTATUS(status));
}

/* A parent that ignores SIGCHLD gets ECHILD: the kernel reaped it. */
int wsel__lane_reap(wsel_isolated_channel *ch, wsel_iso_lane *lane, int quiet)
{
    if (lane->pid <= 0)
        return 1;
    int status = 0;
    pid_t r;
    do
        r = waitpid(lane->pid, &status, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return 0;
    if (r > 0 && !quiet)
        log_exit(ch, lane->pid, status);
    lane->pid = 0;
    return 1;
}

void wsel__lane_kill_and_wait(wsel_iso_lane *lane)
{
    if (lane->pid <= 0)
        return;
    kill(lane->pid, SIGKILL);
    int status;
    while (waitpid(lane->pid, &status, 0) < 0 && errno == EINTR)
        ;
    lane->pid = 0;
}

/* Reset the slot for a new helper: nothing old may still write to it (the
 * previous helper is reaped), sequences equal so it sees no call yet. */
static void reset_slot(wsel_iso_lane *lane)
{
    wsel_iso_slot *s = lane->slot;
    s->magic = WSEL_ISO_MAGIC;
    atomic_store(&s->state, WSEL_ISO_STARTING);
    atomic_store(&s->helper_sleeping, 0);
    atomic_store(&s->host_waiting, 0);
    atomic_store(&s->req_seq, lane->seq);
    atomic_store(&s->ack_seq, lane->seq);
    s->start_rc = 0;
    s->start_err[0] = '\0';
}

int32_t wsel__lane_start(wsel_iso_lane *lane)
{
    reset_slot(lane);
    int32_t rc = wsel__spawn_start(&lane->spawn, &lane->pid);
    if (rc < 0) {
        lane->pid = 0;
        return rc;
    }
    lane->state = WSEL_LANE_STARTING;
    lane->start_limit = wsel__iso_now_ns() + START_LIMIT_NS;
    return 0;
}

int32_t wsel__lane_wait(wsel_isolated_channel *ch, wsel_iso_lane *lane, uint32_t seq,
                        uint64_t deadline, const char **why)
{
    wsel_iso_slot *s = lane->slot;
    uint64_t now = wsel__iso_now_ns();
    uint64_t spin_end = now + SPIN_NS < deadline ? now + SPIN_NS : deadline;
    for (uint32_t step = 0;
         atomic_load_explicit(&s->ack_seq, memory_order_acquire) != seq; step++) {
        if (wsel__iso_now_ns() >= spin_end)
            goto sleep;
        wsel__iso_spin_step(step);
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
        if (wsel__lane_reap(ch, lane, 0)) {
            *why = "ended during a call";
            return WSEL_ISOLATED_ECRASHED;
        }
        now = wsel__iso_now_ns();
        if (now >= deadline) {
            *why = "missed its deadline";
            return WSEL_ISOLATED_ETIMEOUT;
        }
        uint64_t left = deadline - now;
        atomic_store(&s->host_waiting, 1);
        if (atomic_load(&s->ack_seq) == ack)
            wsel__iso_futex_wait(&s->ack_seq, ack,
                                 (int64_t)(left < WAIT_SLICE_NS ? left : WAIT_SLICE_NS));
        atomic_store(&s->host_waiting, 0);
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

int32_t wsel__lane_open(wsel_iso_lane *lane, wsel_host *host, const char *path,
                        const char *config, char *err, size_t err_size)
{
    int32_t rc = WSEL_EIO;
    lane->pid = 0;
    lane->state = WSEL_LANE_DOWN;
    lane->memfd = create_memfd();
    if (lane->memfd < 0) {
        wsel__set_error(err, err_size, "%s: isolated mode: cannot create the memfd: %s",
                        path, strerror(errno));
        return WSEL_EIO;
    }
    lane->slot = mmap(NULL, sizeof(wsel_iso_slot), PROT_READ | PROT_WRITE, MAP_SHARED,
                      lane->memfd, 0);
    if (lane->slot == MAP_FAILED) {
        wsel__set_error(err, err_size, "%s: isolated mode: cannot map the memfd: %s",
                        path, strerror(errno));
        goto out_close_memfd;
    }
    rc =
        wsel__spawn_prepare(&lane->spawn, host, path, config, lane->memfd, err, err_size);
    if (rc < 0)
        goto out_unmap;
    return 0;

out_unmap:
    munmap(lane->slot, sizeof(wsel_iso_slot));
out_close_memfd:
    close(lane->memfd);
    return rc;
}

void wsel__lane_close(wsel_iso_lane *lane)
{
    wsel__lane_kill_and_wait(lane);
    wsel__spawn_release(&lane->spawn);
    munmap(lane->slot, sizeof(wsel_iso_slot));
    close(lane->memfd);
}
