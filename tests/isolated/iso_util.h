// SPDX-License-Identifier: Apache-2.0
/*
 * iso_util.h -- what the isolated-mode suite and benchmark share: private
 * plugin folders, isolated host options, and candidate tables.
 */
#ifndef WSEL_TESTS_ISO_UTIL_H
#define WSEL_TESTS_ISO_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "table_builder.h"
#include "wsel_host.h"

/* A fresh private folder under /tmp (mode 0700); NULL on failure. */
char *iso_temp_dir(void);
/* Remove the folder and the plugins installed in it. */
void iso_remove_dir(char *dir);

/* Copy the fixture NAME.so (build/tests/isolated) into `dir` as NAME.so,
 * mode 0755, so the trust checks see a private file. Returns the new path
 * (caller frees) or NULL. */
char *iso_install(const char *dir, const char *name);

/* Options for an isolated host using the wsel-isolated-helper of this build. */
void iso_options(wsel_host_options *opts, uint32_t deadline_us, uint32_t backoff_us);

/* In sanitizer builds, keep a crashing helper's report short (no
 * symbolisation), so it dies well within a deadline. */
void iso_quiet_sanitizer(void);

/* A table of `workers` x `dp` ranks with loads drawn from `seed`; costs
 * repeat on purpose (ties exercise the random stream). */
typedef ts_table iso_table;
int iso_table_init(iso_table *t, uint32_t workers, uint32_t dp, uint64_t seed);
void iso_table_free(iso_table *t);

/* Monotonic nanoseconds. */
uint64_t iso_now_ns(void);

#endif
