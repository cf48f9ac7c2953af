// SPDX-License-Identifier: Apache-2.0
/*
 * kv_index.h -- which rank slot holds which block: one entry per (block,
 * slot), on two lists: the block's holders (for overlaps) and the slot's
 * LRU (for the per-slot capacity). Keyed two ways: the router's block
 * hash, and in event mode (engine hash, slot), because a BlockRemoved
 * names only the engine's hash; a (block, slot) entry is found by walking
 * the block's holders. Not thread-safe: the router's mutex guards it.
 */
#ifndef WSEL_ROUTER_KV_INDEX_H
#define WSEL_ROUTER_KV_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "rt_map.h"

#define RT_NIL UINT32_MAX

typedef struct rt_entry {
    uint64_t ext_hash; /* the engine's hash (event mode) */
    uint32_t block;    /* index into blocks; RT_NIL = free */
    uint32_t slot;
    uint32_t lru_prev, lru_next; /* the slot's list, head = most recent */
    uint32_t blk_prev, blk_next; /* the block's holders */
    uint32_t has_ext;
    uint32_t pad;
} rt_entry;

typedef struct rt_block {
    uint64_t hash;
    uint32_t first; /* first holder; free list link when unused */
    uint32_t count;
} rt_block;

typedef struct rt_lru {
    uint32_t head, tail, count;
} rt_lru;

typedef struct rt_index {
    /* 1: entries are known by the engine's hash (event mode). */
    int by_ext;
    rt_seg e; /* rt_entry; grows by segments, never moved */
    uint32_t e_free;
    rt_seg b; /* rt_block, likewise */
    uint32_t b_free;
    rt_map blocks; /* hash -> block */
    rt_map ext;    /* (engine hash, slot) -> entry */
    rt_lru *lru;   /* per slot */
    /* rt_index_overlaps's scratch: per slot, the blocks of the window it
     * holds (a bit each, zero between calls), and the slots set. */
    uint8_t *ov_mask;
    uint32_t *ov_seen;
    uint32_t num_slots;
    uint32_t capacity; /* per slot */
    uint64_t entries, nblocks, evictions;
} rt_index;

int rt_index_init(rt_index *ix, uint32_t num_slots, uint32_t capacity, int by_ext);
void rt_index_free(rt_index *ix);
/* Record `hash` on `slot` as most recently used (inserting it, evicting
 * the slot's least recent entry beyond capacity). With has_ext, the
 * engine's hash for it too. 0 or WSEL_ENOMEM. */
int rt_index_touch(rt_index *ix, uint32_t slot, uint64_t hash, int has_ext,
                   uint64_t ext_hash);
/* Make slot's entries for blocks hashes[n - 1], ..., hashes[0], in that
 * order, its most recently used (the prefix head ends the most recent),
 * skipping blocks it does not hold; never inserts, evicts or changes the
 * engine's hash. */
void rt_index_refresh_prefix(rt_index *ix, uint32_t slot, const uint64_t *hashes,
                             uint32_t n);
/* The router hash of the block the engine calls ext_hash on slot; 0 and
 * *found = 0 when unknown. */
uint64_t rt_index_ext_lookup(const rt_index *ix, uint32_t slot, uint64_t ext_hash,
                             int *found);
/* Drop the entry the engine calls ext_hash on slot; 1 if there was one. */
int rt_index_remove_ext(rt_index *ix, uint32_t slot, uint64_t ext_hash);
/* Drop every entry of slot. */
void rt_index_clear_slot(rt_index *ix, uint32_t slot);
/* ov[slot] = consecutive leading blocks of hashes[0..n) held by slot, for
 * every slot (ov has num_slots entries, zeroed by the caller); the slots
 * given a nonzero overlap go to touched (num_slots entries), their count
 * returned. */
uint32_t rt_index_overlaps(const rt_index *ix, const uint64_t *hashes, uint32_t n,
                           uint32_t *ov, uint32_t *touched);
static inline uint32_t rt_index_slot_count(const rt_index *ix, uint32_t slot)
{
    return ix->lru[slot].count;
}
size_t rt_index_bytes(const rt_index *ix);
/* Prefetch the engine-hash map slots of these blocks on slot (removals). */
void rt_index_prefetch_ext(const rt_index *ix, uint32_t slot, const uint64_t *ext,
                           uint32_t n);
/* Removals rt_index_prefetch_removal takes a stage at a time. */
#define RT_INDEX_REMOVALS_AT_ONCE 64u
/* Prefetch what removing these blocks from slot will read past the map
 * slots rt_index_prefetch_ext asked for (call it some work later): their
 * entries, then (once those arrived) their blocks, LRU neighbours and
 * block-map slots, RT_INDEX_REMOVALS_AT_ONCE blocks a stage. A hint:
 * nothing is changed. */
void rt_index_prefetch_removal(const rt_index *ix, uint32_t slot, const uint64_t *ext,
                               uint32_t n);
/* Prefetch what touching / looking up these blocks on slot will read. */
void rt_index_prefetch(const rt_index *ix, uint32_t slot, const uint64_t *hashes,
                       const uint64_t *ext, uint32_t n);

#endif
