// SPDX-License-Identifier: Apache-2.0
/*
 * sticky_table.c -- see sticky_table.h.
 */
#include "sticky_table.h"

#include <stdlib.h>

#include "wsel.h"

int32_t sticky_table_init(sticky_table *table, uint32_t capacity)
{
    if (capacity == 0 || capacity > (1u << 30))
        return WSEL_EINVAL;
    uint64_t slots = 1;
    while (slots < capacity)
        slots <<= 1;
    _Atomic uint64_t *s = calloc((size_t)slots, sizeof(*s));
    if (s == NULL)
        return WSEL_ENOMEM;
    /* calloc's zero bits are a valid 0 for a lock-free atomic word, but
     * initialise explicitly so no reader depends on that. */
    for (uint64_t i = 0; i < slots; i++)
        atomic_init(&s[i], 0);
    table->slots = s;
    table->mask = slots - 1;
    return 0;
}

void sticky_table_free(sticky_table *table)
{
    free(table->slots);
    table->slots = NULL;
    table->mask = 0;
}

/* The slot index comes from the low bits of the mixed key, the tag from its
 * high 32 bits with the lowest forced to 1, so an empty slot (0) never
 * matches and a 2^k-slot table tells keys apart by k + 31 bits. */
static uint32_t tag_of(uint64_t mixed)
{
    return (uint32_t)(mixed >> 32) | 1u;
}

uint32_t sticky_table_get(const sticky_table *table, uint64_t key)
{
    uint64_t m = mix64(key);
    uint64_t v =
        atomic_load_explicit(&table->slots[m & table->mask], memory_order_relaxed);
    return (uint32_t)(v >> 32) == tag_of(m) ? (uint32_t)v : 0;
}

void sticky_table_put(sticky_table *table, uint64_t key, uint32_t owner)
{
    uint64_t m = mix64(key);
    uint64_t v = (uint64_t)tag_of(m) << 32 | owner;
    _Atomic uint64_t *slot = &table->slots[m & table->mask];
    /* Skip the store (and the cache line's invalidation on other cores)
     * when the slot already says so: the common case for a hot prefix. */
    if (atomic_load_explicit(slot, memory_order_relaxed) != v)
        atomic_store_explicit(slot, v, memory_order_relaxed);
}
