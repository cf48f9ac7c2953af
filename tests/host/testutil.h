// SPDX-License-Identifier: Apache-2.0
/*
 * testutil.h -- what the host suites share: private temp folders, fixture
 * plugins copied into them, child processes for risky cases, a log sink
 * that remembers, and small candidate tables.
 */
#ifndef WSEL_TESTS_HOST_TESTUTIL_H
#define WSEL_TESTS_HOST_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "table_builder.h"
#include "wsel_host.h"

/* A fresh folder under /tmp (mode 0700), owned by the caller; remove it
 * with tu_remove_tree. Aborts on failure. */
char *tu_temp_dir(void);
/* rm -rf `dir` (never follows symlinks). */
void tu_remove_tree(const char *dir);

/* Copy the fixture build/tests/fixtures/NAME.so to DIR/AS (mode 0755) and
 * return the new path (caller frees). Aborts if the fixture is missing. */
char *tu_install_fixture(const char *dir, const char *name, const char *as);

/* Run fn(arg) in a child process with stdout and stderr captured into
 * `out` (NUL-terminated, truncated to out_size). Returns the wait status. */
int tu_run_in_child(void (*fn)(void *), void *arg, char *out, size_t out_size);

/* A log sink that keeps the last messages. Thread-safe. */
typedef struct tu_log {
    char lines[64][512];
    int count; /* total messages seen (may exceed 64) */
    void *mutex;
} tu_log;
void tu_log_init(tu_log *log);
void tu_log_free(tu_log *log);
void tu_log_sink(void *user, int32_t level, const char *msg);
/* Number of kept messages containing `needle`. */
int tu_log_count(tu_log *log, const char *needle);

/* A table of `workers` x `dp` ranks, every cost distinct and increasing
 * with the row (row 0 cheapest), flags from `flags` (NULL = all 0), built
 * by the suites' one table builder (tests/support). Aborts on failure. */
typedef ts_table tu_table;
void tu_table_init(tu_table *t, uint32_t workers, uint32_t dp, const uint8_t *flags);
void tu_table_free(tu_table *t);

#endif
