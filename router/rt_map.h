// SPDX-License-Identifier: Apache-2.0
/*
 * rt_map.h -- open addressing (linear probing, backward-shift deletion)
 * from uint64_t keys to uint32_t values, for the KV index and the table of
 * requests in flight. Grows at half full; never shrinks (the index bounds
 * how many keys it holds). Not thread-safe: the router's mutex guards it.
 */
#ifndef WSEL_ROUTER_RT_MAP_H
#define WSEL_ROUTER_RT_MAP_H

#include <stddef.h>
#include <stdint.h>

#define RT_MAP_NONE UINT32_MAX

typedef struct rt_map_slot {
    uint64_t key;
    uint32_t val; /* RT_MAP_NONE = empty */
    uint32_t pad;
} rt_map_slot;

typedef struct rt_map {
    rt_map_slot *slots;
    size_t mask;
    size_t count;
} rt_map;

/* splitmix64's finaliser, a bijection. */
static inline uint64_t rt_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Start loading key's home slot into the cache. */
static inline void rt_map_prefetch(const rt_map *m, uint64_t key)
{
    __builtin_prefetch(&m->slots[(size_t)rt_mix64(key) & m->mask]);
}

int rt_map_init(rt_map *m, size_t capacity);
void rt_map_free(rt_map *m);
/* The value of key, or RT_MAP_NONE. */
uint32_t rt_map_get(const rt_map *m, uint64_t key);
/* Insert or overwrite. 0 or WSEL_ENOMEM. */
int rt_map_put(rt_map *m, uint64_t key, uint32_t val);
/* Remove key if present. */
void rt_map_del(rt_map *m, uint64_t key);
size_t rt_map_bytes(const rt_map *m);

#endif
