// SPDX-License-Identifier: Apache-2.0
/*
 * kvcache.c -- per-rank prefix cache: hash map to slots, intrusive LRU list
 * of unreferenced slots, free list of empty slots.
 */
#include "kvcache.h"

#include <stdlib.h>

#include "wsel.h"

#define NIL UINT32_MAX

int32_t sim_kv_init(sim_kvcache *kv, uint32_t capacity)
{
    kv->capacity = capacity;
    kv->private_blocks = 0;
    kv->lru_size = 0;
    kv->lru_head = NIL;
    kv->lru_tail = NIL;
    kv->hash = malloc((size_t)capacity * sizeof(*kv->hash));
    kv->ref = malloc((size_t)capacity * sizeof(*kv->ref));
    kv->prev = malloc((size_t)capacity * sizeof(*kv->prev));
    kv->next = malloc((size_t)capacity * sizeof(*kv->next));
    if (!kv->hash || !kv->ref || !kv->prev || !kv->next)
        goto out_free_arrays;
    if (sim_u64map_init(&kv->index, capacity, 0) != 0)
        goto out_free_arrays;
    for (uint32_t i = 0; i < capacity; i++)
        kv->next[i] = i + 1 < capacity ? i + 1 : NIL;
    kv->free_head = capacity ? 0 : NIL;
    return 0;

out_free_arrays:
    free(kv->hash);
    free(kv->ref);
    free(kv->prev);
    free(kv->next);
    kv->hash = NULL;
    kv->ref = kv->prev = kv->next = NULL;
    return WSEL_ENOMEM;
}

void sim_kv_free(sim_kvcache *kv)
{
    free(kv->hash);
    free(kv->ref);
    free(kv->prev);
    free(kv->next);
    kv->hash = NULL;
    kv->ref = kv->prev = kv->next = NULL;
    sim_u64map_free(&kv->index);
}

uint32_t sim_kv_match(sim_kvcache *kv, const uint64_t *blocks, uint32_t n)
{
    uint32_t i = 0;
    while (i < n && sim_u64map_find(&kv->index, blocks[i]))
        i++;
    return i;
}

static void lru_unlink(sim_kvcache *kv, uint32_t s)
{
    if (kv->prev[s] != NIL)
        kv->next[kv->prev[s]] = kv->next[s];
    else
        kv->lru_head = kv->next[s];
    if (kv->next[s] != NIL)
        kv->prev[kv->next[s]] = kv->prev[s];
    else
        kv->lru_tail = kv->prev[s];
    kv->lru_size--;
}

static void lru_push_tail(sim_kvcache *kv, uint32_t s)
{
    kv->prev[s] = kv->lru_tail;
    kv->next[s] = NIL;
    if (kv->lru_tail != NIL)
        kv->next[kv->lru_tail] = s;
    else
        kv->lru_head = s;
    kv->lru_tail = s;
    kv->lru_size++;
}

static void evict_oldest(sim_kvcache *kv, sim_kv_evict_fn on_evict, void *ctx)
{
    uint32_t s = kv->lru_head;
    lru_unlink(kv, s);
    sim_u64map_erase(&kv->index, kv->hash[s]);
    if (on_evict)
        on_evict(ctx, kv->hash[s]);
    kv->next[s] = kv->free_head;
    kv->free_head = s;
}

int32_t sim_kv_admit(sim_kvcache *kv, const uint64_t *blocks, uint32_t n,
                     uint32_t private_blocks, uint32_t *slots, uint32_t *match,
                     uint32_t *shortfall, sim_kv_evict_fn on_evict, void *ctx)
{
    /* Look up the cached prefix: cached but unreferenced blocks will be
     * pinned and so stop being evictable. Past the first missing block
     * every block is missing: a block's prefix is held by every request
     * holding the block (ref(prefix) >= ref(block)), and release puts a
     * tail before its prefix on the LRU list, so a block is always evicted
     * before its prefix. (Should a trace break that, the insert loop below
     * still finds the block and merely over-counted `missing`.) */
    uint64_t pinned_from_lru = 0;
    uint32_t prefix = 0;
    for (uint32_t i = 0; i < n; i++)
        sim_u64map_prefetch(&kv->index, blocks[i]);
    for (; prefix < n; prefix++) {
        uint64_t *slot = sim_u64map_find(&kv->index, blocks[prefix]);
        if (!slot)
            break;
        slots[prefix] = (uint32_t)*slot;
        pinned_from_lru += kv->ref[*slot] == 0;
    }
    for (uint32_t i = prefix; i < n; i++)
        slots[i] = NIL;
    uint64_t missing = n - prefix;
    uint64_t free_blocks = kv->capacity - sim_kv_used(kv);
    uint64_t evictable = kv->lru_size - pinned_from_lru;
    if (missing + private_blocks > free_blocks + evictable) {
        *shortfall = (uint32_t)(missing + private_blocks - free_blocks - evictable);
        return WSEL_EBUSY;
    }

    /* Pin the cached ones first so eviction cannot take them. */
    for (uint32_t i = 0; i < n; i++)
        if (slots[i] != NIL && kv->ref[slots[i]]++ == 0)
            lru_unlink(kv, slots[i]);
    uint64_t need = missing + private_blocks;
    while (need > kv->capacity - sim_kv_used(kv))
        evict_oldest(kv, on_evict, ctx);
    for (uint32_t i = 0; i < n; i++) {
        if (slots[i] != NIL)
            continue;
        int inserted;
        uint64_t *slot = sim_u64map_upsert(&kv->index, blocks[i], &inserted);
        if (!inserted) { /* a duplicate hash in this request, or cached after all */
            slots[i] = (uint32_t)*slot;
            if (kv->ref[slots[i]]++ == 0)
                lru_unlink(kv, slots[i]);
            continue;
        }
        uint32_t s = kv->free_head;
        kv->free_head = kv->next[s];
        kv->hash[s] = blocks[i];
        kv->ref[s] = 1;
        *slot = s;
        slots[i] = s;
    }
    kv->private_blocks += private_blocks;
    *match = prefix;
    return 0;
}

void sim_kv_release(sim_kvcache *kv, const uint32_t *slots, uint32_t n,
                    uint32_t private_blocks)
{
    for (uint32_t i = n; i-- > 0;)
        if (--kv->ref[slots[i]] == 0)
            lru_push_tail(kv, slots[i]);
    kv->private_blocks -= private_blocks;
}
