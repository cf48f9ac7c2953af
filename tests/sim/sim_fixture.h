// SPDX-License-Identifier: Apache-2.0
/*
 * sim_fixture.h -- helpers shared by the sim suites: temporary trace files
 * and a stand-in policy compiled into the tests (no plugin, no host), so
 * the model is tested on its own.
 */
#ifndef WSEL_TESTS_SIM_FIXTURE_H
#define WSEL_TESTS_SIM_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "sim.h"

/* Write `text` to a new temporary file; returns its path (static buffer
 * per call slot 0..7). The test removes it with fixture_remove. */
const char *fixture_write(int slot, const char *text);
void fixture_remove(const char *path);

/* The built `wsel` command: $WSEL_BUILD_DIR/bin/wsel (static storage). */
const char *fixture_wsel_path(void);
/* Run `wsel SUBCOMMAND --no-progress ARGS` (ARGS a shell fragment); returns
 * its exit status and its combined stdout and stderr (malloc'd) in *out.
 * Skips the calling cmocka test when wsel is not built. */
int fixture_run_wsel(const char *subcommand, const char *args, char **out);

/*
 * Stand-in policy. With `rows` set it answers rows[i] for the i-th
 * request (cycling); otherwise the lowest Dynamo cost, ties to the lowest
 * row. Records the affinity keys and overlaps it was given; switch_to
 * counts calls and, from then on, answers the lowest cost.
 */
typedef struct standin {
    const uint32_t *rows;
    uint32_t num_rows;
    uint32_t calls;
    uint64_t keys[64];
    uint32_t max_overlap[64]; /* largest overlap_blocks offered, per call */
    uint32_t finished;
    uint32_t switches; /* switch_to calls */
} standin;

void standin_policy(standin *st, sim_policy *out);

#endif
