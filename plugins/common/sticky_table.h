// SPDX-License-Identifier: Apache-2.0
/*
 * sticky_table.h -- the memory of the prefix-owner policies (hysteresis,
 * adaptive): prefix block hash -> a fingerprint of the (worker_id, dp_rank)
 * that most recently received a request containing that block (the block's
 * "owner"). Compiled into each plugin that uses it (plugins/common/ is
 * source shared at build time, not a library: every plugin stays one .so
 * exporting one symbol).
 *
 * Direct-mapped and bounded: `capacity` slots (a power of two), one 64-bit
 * word each, {32-bit tag of the key, 32-bit owner fingerprint}. A new key
 * overwrites whatever shared its slot, so the table forgets old blocks in
 * roughly least-recently-written order without any bookkeeping. Every slot
 * is one atomic word read and written with relaxed ordering: lookups and
 * updates run from any number of threads at once, never block and never
 * allocate. A torn update cannot happen (one word); a lost race only means
 * one of two concurrent writers' owner is remembered, which is what either
 * order of the two requests would have left.
 */
#ifndef WSEL_PLUGINS_STICKY_TABLE_H
#define WSEL_PLUGINS_STICKY_TABLE_H

#include <stdatomic.h>
#include <stdint.h>

#include "mix64.h"

typedef struct sticky_table {
    _Atomic uint64_t *slots;
    uint64_t mask; /* slots - 1 */
} sticky_table;

/* Allocate max(capacity rounded up to a power of two, 1) empty slots.
 * Returns 0, WSEL_EINVAL (capacity 0 or above 2^30) or WSEL_ENOMEM; on
 * failure *table is left untouched. OWNERSHIP: the caller owns `table`;
 * release the storage with sticky_table_free. */
int32_t sticky_table_init(sticky_table *table, uint32_t capacity);

/* Release the storage; a zeroed table is a harmless no-op. */
void sticky_table_free(sticky_table *table);

/* The owner fingerprint remembered for `key`, or 0 when none is. */
uint32_t sticky_table_get(const sticky_table *table, uint64_t key);

/* Remember `owner` (non-zero) for `key`, replacing the slot's content. */
void sticky_table_put(sticky_table *table, uint64_t key, uint32_t owner);


/* The non-zero fingerprint of (worker_id, dp_rank) stored as an owner;
 * `worker_mix` is sticky_worker_mix(worker_id), computed once per worker.
 * Inline: a select computes them row after row until it meets the owner. */
static inline uint64_t sticky_worker_mix(uint64_t worker_id)
{
    return mix64(worker_id ^ 0x6a09e667f3bcc909ull);
}

static inline uint32_t sticky_owner(uint64_t worker_mix, uint32_t dp_rank)
{
    uint32_t fp = (uint32_t)(mix64(worker_mix + dp_rank) >> 32);
    return fp != 0 ? fp : 1u;
}

#endif
