// SPDX-License-Identifier: Apache-2.0
/*
 * kvcache.h -- one rank's KV cache: prefix caching with LRU eviction.
 *
 * Blocks are identified by their prefix hash. A block held by a running
 * request is pinned (reference count > 0); unreferenced blocks stay cached
 * on an LRU list and are evicted oldest first when room is needed. Blocks
 * that can never be shared (a partial last block, generated tokens) are
 * counted as private and never cached. Not thread-safe. OWNERSHIP: the
 * cache owns its arrays; sim_kv_free releases them.
 */
#ifndef WSEL_SIM_KVCACHE_H
#define WSEL_SIM_KVCACHE_H

#include <stdint.h>

#include "u64map.h"
#include "wsel.h"

typedef struct sim_kvcache {
    uint32_t capacity;
    uint32_t private_blocks;
    uint32_t lru_size; /* unreferenced cached blocks */
    uint32_t lru_head; /* oldest; UINT32_MAX when empty */
    uint32_t lru_tail;
    uint32_t free_head; /* free entry slots */
    uint64_t *hash;
    uint32_t *ref;
    uint32_t *prev;
    uint32_t *next;
    sim_u64map index; /* hash -> slot */
} sim_kvcache;

/* Called with each block hash the cache evicts. */
typedef void (*sim_kv_evict_fn)(void *ctx, uint64_t hash);

int32_t sim_kv_init(sim_kvcache *kv, uint32_t capacity);
void sim_kv_free(sim_kvcache *kv);

/* Consecutive prefix blocks of `blocks` cached (pinned or not). */
uint32_t sim_kv_match(sim_kvcache *kv, const uint64_t *blocks, uint32_t n);

/*
 * Admit a request: pin its n hashed blocks (cached ones are reused,
 * missing ones allocated, evicting LRU blocks through `on_evict`) and
 * reserve `private_blocks` more. On success writes each block's entry slot
 * to slots[0..n) (caller storage, kept for sim_kv_release), the number of
 * consecutive prefix blocks that were already cached to *match, and
 * returns 0; returns WSEL_EBUSY, writes how many blocks are missing to
 * *shortfall and changes nothing else but `slots` when free plus evictable
 * blocks do not suffice. While no other admission happens, the request
 * cannot fit before sim_kv_available() has grown by *shortfall.
 */
int32_t sim_kv_admit(sim_kvcache *kv, const uint64_t *blocks, uint32_t n,
                     uint32_t private_blocks, uint32_t *slots, uint32_t *match,
                     uint32_t *shortfall, sim_kv_evict_fn on_evict, void *ctx);

/* Undo an admit given the slots it wrote: unpin the blocks (the last block
 * becomes the oldest, so a prefix outlives its tail) and release the
 * private reservation. */
void sim_kv_release(sim_kvcache *kv, const uint32_t *slots, uint32_t n,
                    uint32_t private_blocks);

/* Blocks in use (cached or private). */
static inline uint32_t sim_kv_used(const sim_kvcache *kv)
{
    return (uint32_t)kv->index.size + kv->private_blocks;
}

/* Free plus unreferenced (evictable) blocks. */
static inline uint32_t sim_kv_available(const sim_kvcache *kv)
{
    return kv->capacity - sim_kv_used(kv) + kv->lru_size;
}

#endif
