// SPDX-License-Identifier: Apache-2.0
/*
 * prefix_owner.h -- a request's prefix owner in a sticky_table: who most
 * recently received the request's deepest routed block, and naming the
 * chosen rank the owner of every block of the request. Shared by the
 * prefix-owner policies (hysteresis, adaptive), compiled into each.
 *
 * Blocks are recorded at the depths of depth_grid.h plus the request's
 * last block; without block hashes, the affinity key stands for the
 * request. Thread rules: those of sticky_table (any thread, never blocks,
 * never allocates).
 */
#ifndef WSEL_PLUGINS_PREFIX_OWNER_H
#define WSEL_PLUGINS_PREFIX_OWNER_H

#include <stdint.h>

#include "sticky_table.h"
#include "wsel.h"

/* The owner fingerprint (sticky_owner) of the request's deepest remembered
 * block, 0 when none. by_affinity_key != 0 with a non-zero affinity key:
 * the key's owner alone, the blocks unread. OWNERSHIP: reads req only
 * during the call. */
uint32_t prefix_owner_find(const sticky_table *owners, const wsel_request *req,
                           int by_affinity_key);

/* Name `owner` the owner of every recorded depth of the request (or of its
 * affinity key, as prefix_owner_find reads it). */
void prefix_owner_record(sticky_table *owners, const wsel_request *req, uint32_t owner,
                         int by_affinity_key);

#endif
