// SPDX-License-Identifier: Apache-2.0
/*
 * stress_util.h -- what the switching stress tests share: a clock, the
 * scale knob, the candidate table, a log sink that counts instance
 * lifecycles, and the paths of the stress plugins.
 */
#ifndef WSEL_TESTS_STRESS_UTIL_H
#define WSEL_TESTS_STRESS_UTIL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

/* Request shape used by every select in these tests. */
#define STRESS_ISL        1024u
#define STRESS_BLOCK_SIZE 16u

/* Monotonic time in seconds. [any thread] */
double stress_now(void);

/* Sleep `us` microseconds, resuming after signals. [any thread] */
void stress_sleep_us(uint32_t us);

/* WSEL_STRESS_SCALE from the environment (default 1.0; e.g. 0.05 for the
 * ThreadSanitizer run), clamped to [0.001, 100]. [any thread] */
double stress_scale(void);

/* `base * scale`, at least `floor`. [any thread] */
uint64_t stress_scaled(uint64_t base, uint64_t floor);

/*
 * Build the shared table into `buf`: 6 workers x 2 ranks = 12 rows, where
 * row 3 (the cheapest) and rows 7 and 11 (the last) are WSEL_ROW_EXCLUDED
 * and row 5 has no load record. Returns 0 or a WSEL_E* code (then buf
 * holds nothing). [any thread, own buf]
 * OWNERSHIP: the caller owns buf and frees it with wsel_table_buf_free.
 */
int32_t stress_table_build(wsel_table_buf *buf);

/* First and last row that is not excluded in stress_table_build's table. */
#define STRESS_FIRST_ELIGIBLE_ROW 0u
#define STRESS_LAST_ELIGIBLE_ROW  10u

/* Lifecycle lines the stress plugins log through the host, counted. */
typedef struct stress_log_counts {
    atomic_uint created;
    atomic_uint destroyed;
    atomic_uint gated;  /* "<name>: waiting at the gate": a create() held */
    atomic_uint errors; /* WSEL_LOG_ERROR lines of any origin */
} stress_log_counts;

/* wsel_log_fn that counts into the stress_log_counts passed as `user` and
 * echoes warnings and errors to stderr. [any thread] */
void stress_log_sink(void *user, int32_t level, const char *msg);

/* Host options for the stress tests: seed 42, never eject, log to
 * stress_log_sink with `counts` (caller-owned, must outlive the host).
 * [control thread] */
void stress_host_options(wsel_host_options *opts, stress_log_counts *counts);

/* Absolute path of stress plugin `name` ("stress_a", ...) in the build
 * tree, written to `buf` (caller-owned). Returns 0 or WSEL_ERANGE if it
 * does not fit. [any thread] */
int32_t stress_plugin_path(char *buf, size_t size, const char *name);

#endif
