// SPDX-License-Identifier: Apache-2.0
/*
 * session_binding.h -- what the session-affinity ports of Dynamo's
 * policies (dynamo_sticky_min_load, dynamo_soft_affinity) share: a row's
 * owner fingerprint in a sticky_table and the candidate a binding names.
 *
 * Pure functions over the table: any thread, no allocation. OWNERSHIP:
 * everything the caller's, read during the call.
 */
#ifndef WSEL_PLUGINS_SESSION_BINDING_H
#define WSEL_PLUGINS_SESSION_BINDING_H

#include <stdint.h>

#include "row_load.h"
#include "sticky_table.h"
#include "wsel.h"

/* The fingerprint a binding stores for `row`'s (worker_id, dp_rank). */
static inline uint32_t session_row_owner(const wsel_table *t, uint32_t row)
{
    return sticky_owner(sticky_worker_mix(t->worker_id[row]), t->dp_rank[row]);
}

/* The candidate whose fingerprint is `owner`, or ROW_LOAD_NONE. */
static inline uint32_t session_bound_row(const wsel_table *t, uint8_t skip, uint32_t owner)
{
    for (uint32_t i = 0; i < t->num_rows; i++)
        if (!(t->flags[i] & skip) && session_row_owner(t, i) == owner)
            return i;
    return ROW_LOAD_NONE;
}

#endif
