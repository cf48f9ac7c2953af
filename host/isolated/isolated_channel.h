// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_channel.h -- one wsel-isolated-helper helper and the slot it shares
 * with the host: start, call with a deadline, notice death, restart.
 *
 * Used by isolated_forward.c only. Every function but open and close must
 * be called with `mutex` held: the channel has one slot, so calls into one
 * helper are serialised (docs/isolated.md, "Concurrency").
 */
#ifndef WSEL_HOST_ISOLATED_CHANNEL_H
#define WSEL_HOST_ISOLATED_CHANNEL_H

#include <pthread.h>
#include <sys/types.h>

#include "isolated.h"
#include "isolated_shm.h"
#include "isolated_spawn.h"

/* wsel_iso_lane.state */
#define WSEL_LANE_READY    0u /* the helper is ready for calls */
#define WSEL_LANE_STARTING 1u /* a helper has not reported yet */
#define WSEL_LANE_DOWN     2u /* failed; waiting to be reaped and restarted */

/*
 * One helper process and its own slot. A channel has two: the active one
 * serves calls, the other is a hot spare, started in advance, that takes
 * over the moment the active one fails, so a crash costs one select rather
 * than a restart's worth (docs/isolated.md, "Restart").
 */
typedef struct wsel_iso_lane {
    wsel_iso_slot *slot; /* shared mapping of memfd */
    int memfd;
    pid_t pid; /* > 0 while a helper exists and is not reaped */
    uint32_t state;
    uint32_t seq;         /* last request sequence posted on this slot */
    uint32_t pending;     /* 1: call `seq` missed its deadline, still unanswered */
    uint64_t posted_at;   /* ns: when call `seq` was posted */
    uint64_t restart_at;  /* ns, CLOCK_MONOTONIC: earliest respawn */
    uint64_t start_limit; /* ns: a starting helper must be ready by then */
    wsel_spawn spawn;
} wsel_iso_lane;

typedef struct wsel_isolated_channel {
    /* The descriptor the rest of the host sees (generation.plugin); its
     * strings point at the arrays below. */
    wsel_plugin desc;
    char name[64];
    char version[32];
    char description[160];

    wsel_host *host;
    char *plugin_path; /* owned */
    pthread_mutex_t mutex;

    wsel_iso_lane lanes[2];
    uint32_t active;         /* index of the lane serving calls */
    int32_t down_rc;         /* WSEL_ISOLATED_E* answered while none is ready */
    uint32_t failures;       /* consecutive failures, for the backoff */
    uint64_t deadline_ns;    /* per select */
    uint64_t hang_ns;        /* inside one call longer than this: stuck, killed */
    uint64_t spare_check_at; /* ns: next check that the idle spare lives */
} wsel_isolated_channel;

/* The active lane's slot, where a caller writes a call. [mutex held] */
static inline wsel_iso_slot *wsel__channel_slot(wsel_isolated_channel *ch)
{
    return ch->lanes[ch->active].slot;
}

/* --- one lane (isolated_lane.c) --- */

/* Create the lane's memfd and mapping and prepare its spawn. */
int32_t wsel__lane_open(wsel_iso_lane *lane, wsel_host *host, const char *path,
                        const char *config, char *err, size_t err_size);
/* Kill and reap the helper, release everything. */
void wsel__lane_close(wsel_iso_lane *lane);
/* Reset the slot and spawn a helper: state STARTING. 0 or WSEL_EIO. */
int32_t wsel__lane_start(wsel_iso_lane *lane);
/* Reap the helper if it has ended (logging how, unless quiet); 1 when no
 * helper process is left. */
int wsel__lane_reap(wsel_isolated_channel *ch, wsel_iso_lane *lane, int quiet);
/* Wait until the lane's ack_seq == seq or `deadline`: 0, or a
 * WSEL_ISOLATED_E* with `why` set. */
int32_t wsel__lane_wait(wsel_isolated_channel *ch, wsel_iso_lane *lane, uint32_t seq,
                        uint64_t deadline, const char **why);
/* Kill the helper and reap it, waiting. */
void wsel__lane_kill_and_wait(wsel_iso_lane *lane);

/* Create the slot, start the helper and wait (bounded) until it has
 * created its instance; fill desc from its report. [control thread] */
int32_t wsel__channel_open(wsel_isolated_channel *ch, wsel_host *host, const char *path,
                           const char *config, char *err, size_t err_size);

/* Ask the helper to destroy its instance and exit; kill it if it does not
 * within a short wait; reap it; release everything. [control thread] */
void wsel__channel_close(wsel_isolated_channel *ch);

/* 0 when the helper can take a call now; otherwise the WSEL_ISOLATED_E*
 * code to answer with, after advancing a restart (reap, spawn, notice
 * readiness) as far as it can go without waiting. An earlier call that
 * missed its deadline is waited for until `deadline` (absolute ns): if it
 * is answered the helper is free again; if not, the return is
 * WSEL_ISOLATED_ETIMEOUT and the helper is kept, unless it has been inside
 * that call for longer than the hang timeout, when it is killed and the
 * spare takes over. The idle spare is checked for death (at most once a
 * millisecond) and replaced when it has died. [mutex held] */
int32_t wsel__channel_ready(wsel_isolated_channel *ch, uint64_t deadline);

/* Post the call already written into the slot (op and inputs) and wait for
 * the answer until `deadline` (absolute ns). 0 on an answer. A crash or a
 * malformed answer kills the helper and schedules its restart:
 * WSEL_ISOLATED_ECRASHED. A missed deadline is WSEL_ISOLATED_ETIMEOUT: the
 * helper is kept with the call pending (wsel__channel_ready waits for it),
 * unless the hang timeout is no longer than the deadline, when it is killed
 * at once. [mutex held] */
int32_t wsel__channel_call(wsel_isolated_channel *ch, uint64_t deadline);

/* Treat the active helper as failed (e.g. a malformed answer): kill it,
 * schedule its restart, and let the spare take over if it is ready; calls
 * answer `rc` while no helper is. [mutex held] */
void wsel__channel_fail(wsel_isolated_channel *ch, int32_t rc, const char *why);

/* A good answer arrived: the next failure backs off from the base again. */
static inline void wsel__channel_note_success(wsel_isolated_channel *ch)
{
    ch->failures = 0;
}

#endif
