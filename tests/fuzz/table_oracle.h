// SPDX-License-Identifier: Apache-2.0
/*
 * table_oracle.h -- an independent statement of what a valid wsel_table
 * is, written from wsel.h and wsel_host.h rather than from the host's code.
 *
 * The fuzzers check one direction: a table wsel_table_validate accepts must
 * satisfy this oracle, since plugins index columns and the group view on
 * the strength of that acceptance. (The other direction is left alone: the
 * host may be stricter than the letter of the contract.)
 * Header-only: each harness is one translation unit plus its headers.
 */
#ifndef WSEL_TESTS_FUZZ_TABLE_ORACLE_H
#define WSEL_TESTS_FUZZ_TABLE_ORACLE_H

#include <math.h>
#include <stdint.h>

#include "wsel.h"

#define ORACLE_KNOWN_FLAGS (WSEL_ROW_BUSY | WSEL_ROW_EXCLUDED | WSEL_ROW_NO_LOAD)

/* NULL if `t` is valid, else what is wrong with it (a static string). */
static inline const char *oracle_table_fault(const wsel_table *t)
{
    uint32_t group = 0;

    if (t->struct_size < WSEL_TABLE_SIZE_1_0)
        return "struct_size shorter than 1.0";
    if (t->reserved0 != 0)
        return "reserved0 not zero";
    if (t->num_rows == 0 || t->num_groups == 0 || t->num_groups > t->num_rows)
        return "row or group count out of range";
    if (!t->worker_id || !t->dp_rank || !t->overlap_blocks || !t->prefill_tokens ||
        !t->decode_blocks || !t->cost || !t->kv_capacity_blocks || !t->active_requests ||
        !t->flags || !t->group_first_row || !t->group_row_count)
        return "a NULL column";
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (!isfinite(t->cost[i]))
            return "a cost that is not finite";
        if (t->flags[i] & (uint8_t)~ORACLE_KNOWN_FLAGS)
            return "an unknown flag bit";
        if (i > 0 && (t->worker_id[i] < t->worker_id[i - 1] ||
                      (t->worker_id[i] == t->worker_id[i - 1] &&
                       t->dp_rank[i] <= t->dp_rank[i - 1])))
            return "rows not in canonical (worker_id, dp_rank) order";
        if (i == 0 || t->worker_id[i] != t->worker_id[i - 1]) {
            /* Row i opens group `group`. */
            if (group >= t->num_groups || t->group_first_row[group] != i)
                return "group view does not start a group where a worker starts";
            if (group > 0 &&
                t->group_first_row[group - 1] + t->group_row_count[group - 1] != i)
                return "group view row count does not match the rows";
            group++;
        }
    }
    if (group != t->num_groups)
        return "num_groups differs from the number of workers";
    if (t->group_first_row[group - 1] + t->group_row_count[group - 1] != t->num_rows)
        return "last group does not end at the last row";
    return NULL;
}

#endif
