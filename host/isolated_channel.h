/*
 * isolated_channel.h -- one wsel-sandbox helper and the slot it shares
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

/* wsel_isolated_channel.state */
#define WSEL_CH_RUNNING  0u /* the helper is ready for calls */
#define WSEL_CH_STARTING 1u /* a restarted helper has not reported yet */
#define WSEL_CH_DOWN     2u /* failed; waiting to be reaped and restarted */

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

    wsel_iso_slot *slot; /* shared mapping of memfd */
    int memfd;
    pid_t pid; /* > 0 while a helper exists and is not reaped */
    uint32_t state;
    uint32_t seq;         /* last request sequence posted */
    int32_t down_rc;      /* WSEL_ISOLATED_E* answered while not running */
    uint32_t failures;    /* consecutive failures, for the backoff */
    uint64_t restart_at;  /* ns, CLOCK_MONOTONIC */
    uint64_t start_limit; /* ns: a starting helper must be ready by then */
    uint64_t deadline_ns; /* per select */

    wsel_spawn spawn;
} wsel_isolated_channel;

/* Create the slot, start the helper and wait (bounded) until it has
 * created its instance; fill desc from its report. [control thread] */
int32_t wsel_channel_open(wsel_isolated_channel *ch, wsel_host *host, const char *path,
                          const char *config, char *err, size_t err_size);

/* Ask the helper to destroy its instance and exit; kill it if it does not
 * within a short wait; reap it; release everything. [control thread] */
void wsel_channel_close(wsel_isolated_channel *ch);

/* 0 when the helper can take a call now; otherwise the WSEL_ISOLATED_E*
 * code to answer with, after advancing a restart (reap, spawn, notice
 * readiness) as far as it can go without waiting. [mutex held] */
int32_t wsel_channel_ready(wsel_isolated_channel *ch);

/* Post the call already written into the slot (op and inputs) and wait for
 * the answer until `timeout_ns` from now. 0 on an answer; otherwise the
 * helper has been killed, a restart scheduled, and the return is
 * WSEL_ISOLATED_ECRASHED or WSEL_ISOLATED_ETIMEOUT. [mutex held] */
int32_t wsel_channel_call(wsel_isolated_channel *ch, uint64_t timeout_ns);

/* Treat the helper as failed (e.g. a malformed answer): kill it and
 * schedule a restart; calls answer `rc` meanwhile. [mutex held] */
void wsel_channel_fail(wsel_isolated_channel *ch, int32_t rc, const char *why);

/* A good answer arrived: the next failure backs off from the base again. */
static inline void wsel_channel_note_success(wsel_isolated_channel *ch)
{
    ch->failures = 0;
}

#endif
