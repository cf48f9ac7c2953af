// SPDX-License-Identifier: Apache-2.0
/*
 * owner_hint.h -- where each owner fingerprint (sticky_owner) was last
 * found in the table: a row to check first, so finding an owner's row
 * costs one fingerprint instead of a scan of the rows before it. A hint
 * is only a guess: the caller checks that the row still has the owner's
 * fingerprint, and scans when it does not (the worker set changed, or two
 * owners share a slot). Direct-mapped, one relaxed atomic word a slot:
 * any thread, never blocks, never allocates after init.
 */
#ifndef WSEL_PLUGINS_OWNER_HINT_H
#define WSEL_PLUGINS_OWNER_HINT_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "wsel.h"

/* Slots of an owner_hint: 16 KiB. */
#define OWNER_HINT_SLOTS 4096u

typedef struct owner_hint {
    _Atomic uint32_t *rows; /* row + 1 per slot; 0: none */
} owner_hint;

/* Returns 0 or WSEL_ENOMEM. OWNERSHIP: the caller owns `hint`; release
 * with owner_hint_free. */
static inline int32_t owner_hint_init(owner_hint *hint)
{
    hint->rows = calloc(OWNER_HINT_SLOTS, sizeof(*hint->rows));
    if (hint->rows == NULL)
        return WSEL_ENOMEM;
    for (uint32_t i = 0; i < OWNER_HINT_SLOTS; i++)
        atomic_init(&hint->rows[i], 0);
    return 0;
}

/* A zeroed hint is a harmless no-op. */
static inline void owner_hint_free(owner_hint *hint)
{
    free((void *)hint->rows);
    hint->rows = NULL;
}

/* The row last noted for `owner`, or UINT32_MAX. */
static inline uint32_t owner_hint_get(const owner_hint *hint, uint32_t owner)
{
    uint32_t v = atomic_load_explicit(&hint->rows[owner % OWNER_HINT_SLOTS],
                                      memory_order_relaxed);
    return v - 1u; /* 0 - 1 = UINT32_MAX */
}

/* Note that `owner` is at `row` (a write through a const hint: the slots
 * are atomics); skips the store when already noted. */
static inline void owner_hint_put(const owner_hint *hint, uint32_t owner, uint32_t row)
{
    _Atomic uint32_t *slot = &hint->rows[owner % OWNER_HINT_SLOTS];
    if (atomic_load_explicit(slot, memory_order_relaxed) != row + 1u)
        atomic_store_explicit(slot, row + 1u, memory_order_relaxed);
}

#endif
