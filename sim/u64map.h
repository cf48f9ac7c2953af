// SPDX-License-Identifier: Apache-2.0
/*
 * u64map.h -- an open-addressing hash map from uint64_t keys to uint64_t
 * values, used for the KV caches, the router's block index, the flicker
 * table and --analyze.
 *
 * Keys are stored mixed (sim_mix64 is a bijection), so the home slot needs
 * no rehash and mixed value 0 marks an empty slot; the one key that mixes
 * to 0 lives in a side slot. Linear probing over {key, value} pairs (one
 * cache line per probe) with backward-shift deletion (no tombstones), so a
 * map whose size stays bounded never degrades. Any key is valid.
 * Not thread-safe: one owner at a time. OWNERSHIP: the map owns its slots;
 * sim_u64map_free releases them.
 */
#ifndef WSEL_SIM_U64MAP_H
#define WSEL_SIM_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_u64map_slot {
    uint64_t mixed; /* sim_mix64(key); 0 = empty */
    uint64_t value;
} sim_u64map_slot;

typedef struct sim_u64map {
    sim_u64map_slot *slots;
    size_t mask; /* capacity - 1; capacity is a power of two */
    size_t size; /* keys, the side slot included */
    int growable;
    int has_zero; /* the key whose mix is 0 is present */
    uint64_t zero_value;
} sim_u64map;

/* Prepare a map for at least `expected` keys at <= 50 % load. A growable
 * map doubles when it passes that load; a fixed one refuses inserts beyond
 * its capacity. Returns 0 or WSEL_ENOMEM. */
int32_t sim_u64map_init(sim_u64map *map, size_t expected, int growable);
/* Release the slots; a zeroed map is a harmless no-op. */
void sim_u64map_free(sim_u64map *map);
/* Pointer to the value of `key`, or NULL when absent. Valid until the next
 * insert or erase. */
uint64_t *sim_u64map_find(sim_u64map *map, uint64_t key);
/* Pointer to the value of `key`, inserting it with value 0 when absent
 * (*inserted says which). NULL when a fixed map is full or growth fails. */
uint64_t *sim_u64map_upsert(sim_u64map *map, uint64_t key, int *inserted);
/* Remove `key`; returns 1 if it was present. */
int sim_u64map_erase(sim_u64map *map, uint64_t key);
/* Remove the key whose value pointer a find or upsert just returned (no
 * insert or erase in between): saves the second probe. */
void sim_u64map_erase_found(sim_u64map *map, uint64_t *value);

/* Hint that `key` will be looked up soon (touches its home slot's cache
 * line), so a loop can overlap the memory latency of many lookups. */
static inline void sim_u64map_prefetch(const sim_u64map *map, uint64_t key);

/* splitmix64 finaliser: the mixer used for slots and generated hashes. */
static inline uint64_t sim_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline void sim_u64map_prefetch(const sim_u64map *map, uint64_t key)
{
    __builtin_prefetch(&map->slots[(size_t)sim_mix64(key) & map->mask]);
}

#endif
