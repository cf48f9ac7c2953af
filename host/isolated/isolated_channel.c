// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_channel.c -- a policy's pair of helpers as the host sees it:
 * the first start-up handshake, a call on the active helper, failing over
 * to the hot spare, and restarting failed helpers with backoff.
 *
 * Every function but open and close runs with ch->mutex held and never
 * waits for a helper to start: a restart is advanced a step at a time by
 * the calls that find it under way (reap, then spawn once the backoff has
 * passed, then notice readiness).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "isolated_channel.h"

/* Longest backoff between restarts. */
#define MAX_BACKOFF_NS 1000000000ull
/* How long close() lets a helper run the plugin's destroy. */
#define EXIT_WAIT_NS 100000000ull
/* How long open() waits for the first helper. */
#define FIRST_START_NS (10ull * 1000000000ull)
/* How often an idle spare is checked for death (one waitpid). */
#define SPARE_CHECK_NS 1000000ull

static int32_t down_code(int32_t rc)
{
    return rc == WSEL_ISOLATED_ETIMEOUT ? WSEL_ISOLATED_ETIMEOUT : WSEL_ISOLATED_ECRASHED;
}

/* Kill `lane`'s helper and schedule its respawn after the backoff; a
 * failure that is not the plugin's doing (an idle spare killed from
 * outside) does not double the backoff. */
static void fail_lane_counted(wsel_isolated_channel *ch, wsel_iso_lane *lane,
                              const char *why, int counted)
{
    int was_alive = !wsel__lane_reap(ch, lane, 0);
    if (was_alive) {
        kill(lane->pid, SIGKILL);
        wsel__lane_reap(ch, lane, 1); /* usually not yet: a later call reaps it */
    }
    uint64_t backoff = (uint64_t)ch->host->isolated.restart_backoff_us * 1000u;
    backoff <<= ch->failures < 6 ? ch->failures : 6;
    if (backoff > MAX_BACKOFF_NS)
        backoff = MAX_BACKOFF_NS;
    if (counted)
        ch->failures++;
    lane->state = WSEL_LANE_DOWN;
    lane->pending = 0;
    lane->restart_at = wsel__iso_now_ns() + backoff;
    wsel__host_log(ch->host, WSEL_LOG_WARN,
                   "%s: isolated helper %s%s; respawning in %llu us", ch->plugin_path,
                   why, was_alive ? " (killed)" : "",
                   (unsigned long long)(backoff / 1000u));
}

static void fail_lane(wsel_isolated_channel *ch, wsel_iso_lane *lane, const char *why)
{
    fail_lane_counted(ch, lane, why, 1);
}

void wsel__channel_fail(wsel_isolated_channel *ch, int32_t rc, const char *why)
{
    ch->down_rc = down_code(rc);
    fail_lane(ch, &ch->lanes[ch->active], why);
}

/* Move a lane that is not ready one step on: reap, respawn, or notice its
 * report. Never waits. */
static void advance(wsel_isolated_channel *ch, wsel_iso_lane *lane)
{
    if (lane->state == WSEL_LANE_DOWN) {
        if (!wsel__lane_reap(ch, lane, 1) || wsel__iso_now_ns() < lane->restart_at)
            return;
        if (wsel__lane_start(lane) < 0) {
            fail_lane(ch, lane, "could not be spawned");
            return;
        }
    }
    if (lane->state != WSEL_LANE_STARTING)
        return;
    wsel_iso_slot *s = lane->slot;
    uint32_t st = atomic_load(&s->state);
    if (st == WSEL_ISO_READY) {
        /* A restart loads the file again: it must still be the same
         * plugin (a replaced file is a switch, not a restart). */
        if (strncmp(s->name, ch->name, sizeof(ch->name)) != 0) {
            fail_lane(ch, lane, "restarted as a different plugin");
        } else {
            lane->state = WSEL_LANE_READY;
            wsel__host_log(ch->host, WSEL_LOG_INFO, "%s: isolated helper (pid %d) ready",
                           ch->plugin_path, (int)lane->pid);
        }
    } else if (st == WSEL_ISO_FAILED) {
        char why[600];
        s->start_err[sizeof(s->start_err) - 1] = '\0';
        snprintf(why, sizeof(why), "failed to start: %s", s->start_err);
        fail_lane(ch, lane, why);
    } else if (wsel__lane_reap(ch, lane, 0)) {
        fail_lane(ch, lane, "ended before it was ready");
    } else if (wsel__iso_now_ns() > lane->start_limit) {
        fail_lane(ch, lane, "was not ready within 10 s");
    }
}

/* An idle spare that died (killed from outside, the OOM killer) is reaped
 * and respawned now, so the next failover does not land on a corpse. */
static void check_spare(wsel_isolated_channel *ch, wsel_iso_lane *spare, int force)
{
    if (spare->state != WSEL_LANE_READY)
        return;
    uint64_t now = wsel__iso_now_ns();
    if (!force && now < ch->spare_check_at)
        return;
    ch->spare_check_at = now + SPARE_CHECK_NS;
    if (wsel__lane_reap(ch, spare, 0))
        fail_lane_counted(ch, spare, "spare ended while idle", 0);
}

/* Wait (until `deadline`) for the active helper's call that missed its
 * own deadline. 0: answered (the answer is discarded), the helper is free.
 * WSEL_ISOLATED_ETIMEOUT with the helper kept: still late, but not yet
 * past the hang timeout. Otherwise the helper has been failed (crashed, or
 * stuck past the hang timeout) and the return says why. */
static int32_t drain_pending(wsel_isolated_channel *ch, wsel_iso_lane *lane,
                             uint64_t deadline)
{
    if (!lane->pending)
        return 0;
    uint64_t hang_at = lane->posted_at + ch->hang_ns;
    const char *why = NULL;
    int32_t rc = wsel__lane_wait(ch, lane, lane->seq,
                                 deadline < hang_at ? deadline : hang_at, &why);
    if (rc == 0) {
        lane->pending = 0;
        return 0;
    }
    if (rc == WSEL_ISOLATED_ETIMEOUT) {
        if (wsel__iso_now_ns() < hang_at)
            return rc;
        why = "was stuck in one call past its hang timeout";
    }
    wsel__channel_fail(ch, rc, why);
    return rc;
}

int32_t wsel__channel_ready(wsel_isolated_channel *ch, uint64_t deadline)
{
    wsel_iso_lane *active = &ch->lanes[ch->active];
    wsel_iso_lane *spare = &ch->lanes[ch->active ^ 1u];
    check_spare(ch, spare, 0);
    if (spare->state != WSEL_LANE_READY)
        advance(ch, spare);
    int32_t rc = 0;
    if (active->state == WSEL_LANE_READY) {
        rc = drain_pending(ch, active, deadline);
        if (rc == 0 || active->state == WSEL_LANE_READY)
            return rc; /* free, or late and kept */
    } else {
        advance(ch, active);
        if (active->state == WSEL_LANE_READY)
            return 0;
        rc = ch->down_rc;
    }
    check_spare(ch, spare, 1); /* about to hand it the calls */
    if (spare->state != WSEL_LANE_READY)
        return ch->down_rc;
    ch->active ^= 1u;
    /* A helper just failed while this call waited: answer it with that
     * failure if its deadline has passed, else let the spare take it. */
    return wsel__iso_now_ns() < deadline ? 0 : rc;
}

int32_t wsel__channel_call(wsel_isolated_channel *ch, uint64_t deadline)
{
    wsel_iso_lane *lane = &ch->lanes[ch->active];
    wsel_iso_slot *s = lane->slot;
    uint64_t posted_at = wsel__iso_now_ns();
    uint32_t seq = ++lane->seq;
    atomic_store(&s->req_seq, seq);
    if (atomic_load(&s->helper_sleeping))
        wsel__iso_futex_wake(&s->req_seq);
    const char *why = NULL;
    int32_t rc = wsel__lane_wait(ch, lane, seq, deadline, &why);
    if (rc == WSEL_ISOLATED_ETIMEOUT && posted_at + ch->hang_ns > deadline) {
        /* Late, not stuck: keep the helper; the next call waits for this
         * answer (and discards it) before it writes the slot. */
        lane->pending = 1;
        lane->posted_at = posted_at;
        return rc;
    }
    if (rc < 0)
        wsel__channel_fail(ch, rc, why);
    return rc;
}

/* Block until lane 0's first helper reports, dies or FIRST_START_NS. */
static int32_t await_first_start(wsel_isolated_channel *ch, char *err, size_t err_size)
{
    wsel_iso_lane *lane = &ch->lanes[0];
    wsel_iso_slot *s = lane->slot;
    uint64_t limit = wsel__iso_now_ns() + FIRST_START_NS;
    for (;;) {
        uint32_t st = atomic_load(&s->state);
        if (st == WSEL_ISO_READY)
            return 0;
        if (st == WSEL_ISO_FAILED) {
            s->start_err[sizeof(s->start_err) - 1] = '\0';
            wsel__set_error(err, err_size, "%s", s->start_err);
            return s->start_rc < 0 && s->start_rc > -1000 ? s->start_rc : WSEL_EPLUGIN;
        }
        if (wsel__lane_reap(ch, lane, 1)) {
            wsel__set_error(err, err_size,
                            "%s: isolated helper %s ended before it was ready",
                            ch->plugin_path, lane->spawn.helper);
            return WSEL_EPLUGIN;
        }
        if (wsel__iso_now_ns() > limit) {
            wsel__set_error(err, err_size,
                            "%s: isolated helper was not ready within 10 s",
                            ch->plugin_path);
            return WSEL_ETIMEDOUT;
        }
        wsel__iso_futex_wait(&s->state, WSEL_ISO_STARTING, 10000000); /* 10 ms */
    }
}

static void copy_report(wsel_isolated_channel *ch)
{
    const wsel_iso_slot *s = ch->lanes[0].slot;
    memcpy(ch->name, s->name, sizeof(ch->name));
    ch->name[sizeof(ch->name) - 1] = '\0';
    memcpy(ch->version, s->version, sizeof(ch->version));
    ch->version[sizeof(ch->version) - 1] = '\0';
    memcpy(ch->description, s->description, sizeof(ch->description));
    ch->description[sizeof(ch->description) - 1] = '\0';
    ch->desc.abi_major = WSEL_ABI_MAJOR;
    ch->desc.abi_minor = WSEL_ABI_MINOR;
    ch->desc.struct_size = sizeof(ch->desc);
    /* The channel serialises its callers itself (one slot per helper). */
    ch->desc.capabilities =
        (s->capabilities & WSEL_CAP_STATELESS) | WSEL_CAP_CONCURRENT_SELECT;
    ch->desc.name = ch->name;
    ch->desc.version = ch->version;
    ch->desc.description = ch->description;
}

int32_t wsel__channel_open(wsel_isolated_channel *ch, wsel_host *host, const char *path,
                           const char *config, char *err, size_t err_size)
{
    ch->host = host;
    ch->down_rc = WSEL_ISOLATED_ECRASHED;
    ch->deadline_ns = (uint64_t)host->isolated.select_deadline_us * 1000u;
    ch->hang_ns = (uint64_t)host->isolated.hang_timeout_us * 1000u;
    ch->plugin_path = strdup(path);
    if (ch->plugin_path == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        return WSEL_ENOMEM;
    }
    int32_t rc = wsel__lane_open(&ch->lanes[0], host, path, config, err, err_size);
    if (rc < 0)
        goto out_free_path;
    rc = wsel__lane_open(&ch->lanes[1], host, path, config, err, err_size);
    if (rc < 0)
        goto out_close_lane0;
    if (pthread_mutex_init(&ch->mutex, NULL) != 0) {
        wsel__set_error(err, err_size, "%s: cannot create the channel mutex", path);
        rc = WSEL_ENOMEM;
        goto out_close_lane1;
    }
    rc = wsel__lane_start(&ch->lanes[0]);
    if (rc < 0) {
        wsel__set_error(err, err_size, "%s: cannot start %s: %s", path,
                        ch->lanes[0].spawn.helper, strerror(errno));
        goto out_destroy_mutex;
    }
    rc = await_first_start(ch, err, err_size);
    if (rc < 0)
        goto out_destroy_mutex;
    copy_report(ch);
    ch->lanes[0].state = WSEL_LANE_READY;
    wsel__host_log(host, WSEL_LOG_INFO, "%s: isolated helper (pid %d) ready", path,
                   (int)ch->lanes[0].pid);
    /* The spare starts now and is noticed ready by a later call; if it
     * cannot be spawned, it is retried like any failed helper. */
    if (wsel__lane_start(&ch->lanes[1]) < 0)
        ch->lanes[1].restart_at = wsel__iso_now_ns();
    return 0;

out_destroy_mutex:
    pthread_mutex_destroy(&ch->mutex);
out_close_lane1:
    wsel__lane_close(&ch->lanes[1]);
out_close_lane0:
    wsel__lane_close(&ch->lanes[0]); /* kills a helper that did start */
out_free_path:
    free(ch->plugin_path);
    return rc;
}

/* Ask a ready helper to destroy its instance and exit, briefly. */
static void ask_exit(wsel_isolated_channel *ch, wsel_iso_lane *lane)
{
    if (lane->state != WSEL_LANE_READY || lane->pid <= 0)
        return;
    lane->slot->op = WSEL_ISO_OP_EXIT;
    uint32_t seq = ++lane->seq;
    atomic_store(&lane->slot->req_seq, seq);
    wsel__iso_futex_wake(&lane->slot->req_seq);
    const char *why = NULL;
    wsel__lane_wait(ch, lane, seq, wsel__iso_now_ns() + EXIT_WAIT_NS, &why);
}

void wsel__channel_close(wsel_isolated_channel *ch)
{
    for (int i = 0; i < 2; i++) {
        ask_exit(ch, &ch->lanes[i]);
        wsel__lane_close(&ch->lanes[i]);
    }
    pthread_mutex_destroy(&ch->mutex);
    free(ch->plugin_path);
}
