// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_shm.h -- the shared-memory slot between libwsel-host and one
 * wsel-isolated-helper (isolated mode, docs/isolated.md).
 *
 * Shared by host/isolated/isolated_*.c and host/isolated/helper_main.c, nobody else. The
 * slot is a memfd the host creates, sizes to sizeof(wsel_iso_slot) and maps;
 * the helper maps the same file (descriptor 3, see WSEL_ISO_SHM_FD).
 *
 * Protocol (one call at a time; the host serialises its callers):
 *   host:   write op + inputs;  req_seq = s (seq_cst);
 *           if helper_sleeping: futex_wake(req_seq)
 *   helper: sees req_seq != last;  runs op;  writes outputs;
 *           ack_seq = s (seq_cst);  if host_waiting: futex_wake(ack_seq)
 *   host:   waits (spin, then futex with timeout) until ack_seq == s or the
 *           deadline passes or the helper is gone.
 * The *_sleeping / *_waiting flags are set before the sleeper re-checks its
 * sequence (both seq_cst, Dekker's pattern), so a wake is never lost, and
 * the common case (the other side is spinning) costs no system call.
 *
 * Everything the helper writes is untrusted: the host reads each output
 * once, checks it, and treats any inconsistency as a malformed answer.
 */
#ifndef WSEL_HOST_ISOLATED_SHM_H
#define WSEL_HOST_ISOLATED_SHM_H

#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wsel.h"

/* Largest table and hash list the slot carries; bigger requests are
 * answered by the built-in policy (counted as "error"). */
#define WSEL_ISO_MAX_ROWS   65536u
#define WSEL_ISO_MAX_HASHES 65536u

/* The descriptor number the helper finds the slot on. */
#define WSEL_ISO_SHM_FD 3

#define WSEL_ISO_MAGIC 0x31306f73696c7377ull /* "wsliso01" */

/* wsel_iso_slot.op */
#define WSEL_ISO_OP_SELECT   1u
#define WSEL_ISO_OP_FINISHED 2u
#define WSEL_ISO_OP_TOPOLOGY 3u
#define WSEL_ISO_OP_EXIT     4u
#define WSEL_ISO_OP_OUTCOME  5u /* ABI 1.1: on_request_outcome */

/* wsel_iso_slot.state: the helper's start-up (futex word). */
#define WSEL_ISO_STARTING 0u
#define WSEL_ISO_READY    1u
#define WSEL_ISO_FAILED   2u

typedef struct wsel_iso_slot {
    uint64_t magic;
    /* Written by the host. */
    _Alignas(64) _Atomic uint32_t req_seq;
    _Atomic uint32_t host_waiting;
    /* Written by the helper. */
    _Alignas(64) _Atomic uint32_t ack_seq;
    _Atomic uint32_t helper_sleeping;
    _Atomic uint32_t state;
    int32_t start_rc;

    /* Start-up report, written by the helper before state = READY/FAILED. */
    char start_err[512];
    char name[64];
    char version[32];
    char description[160];
    uint32_t capabilities;
    uint32_t has_finished;
    uint32_t has_topology;
    uint32_t as_limited;  /* 1 when RLIMIT_AS was applied */
    uint32_t has_outcome; /* ABI 1.1: on_request_outcome is set */

    /* The call. */
    _Alignas(64) uint32_t op;
    int32_t rc;   /* helper: select's return */
    uint32_t row; /* helper: choice.row */
    uint32_t dp_rank;
    uint64_t worker_id; /* OP_FINISHED */
    uint64_t request_id;
    uint64_t affinity_key;
    uint64_t timestamp_us;
    uint32_t isl_tokens;
    uint32_t block_size;
    uint32_t num_block_hashes;
    uint32_t num_rows;
    uint32_t num_groups;
    uint32_t overrides; /* wsel_request.overrides; 0 for a 1.0 request */
    /* helper: the explanation (wsel_choice.reason, .flags, .score) */
    uint32_t reason;
    uint32_t choice_flags;
    double score;
    wsel_outcome outcome; /* OP_OUTCOME */
    uint64_t topology_epoch;
    double overlap_score_weight;
    double temperature;
    double uniform;
    wsel_rng rng; /* in: the request's stream; out: as the plugin left it */

    /* Arrays, widest first. */
    uint64_t block_hashes[WSEL_ISO_MAX_HASHES];
    uint64_t worker_ids[WSEL_ISO_MAX_ROWS];
    uint64_t prefill_tokens[WSEL_ISO_MAX_ROWS];
    uint64_t decode_blocks[WSEL_ISO_MAX_ROWS];
    double cost[WSEL_ISO_MAX_ROWS];
    uint64_t kv_capacity_blocks[WSEL_ISO_MAX_ROWS];
    uint32_t dp_ranks[WSEL_ISO_MAX_ROWS];
    uint32_t overlap_blocks[WSEL_ISO_MAX_ROWS];
    uint32_t active_requests[WSEL_ISO_MAX_ROWS];
    uint32_t group_first_row[WSEL_ISO_MAX_ROWS];
    uint32_t group_row_count[WSEL_ISO_MAX_ROWS];
    uint8_t flags[WSEL_ISO_MAX_ROWS];
} wsel_iso_slot;

/* Sleep while *word == expected, at most timeout_ns (< 0: no limit).
 * Shared (not private) futex: the word lives in a mapping of two processes.
 * Returns when woken, on timeout, on a signal or when *word already
 * differs; callers re-check their condition. */
static inline void wsel__iso_futex_wait(_Atomic uint32_t *word, uint32_t expected,
                                        int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tp = &ts;
    }
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tp, NULL, 0);
}

/* Wake every sleeper on `word`. */
static inline void wsel__iso_futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* One step of a spin-wait: a CPU pause for the first `spins` steps, then
 * sched_yield, so that when the other side shares this core (more runnable
 * threads than cores) it gets to run instead of waiting for our slice to
 * end; on an idle core the yield returns at once. */
static inline void wsel__iso_spin_step(uint32_t step)
{
    if (step < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        return;
    }
    sched_yield();
}

static inline uint64_t wsel__iso_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
