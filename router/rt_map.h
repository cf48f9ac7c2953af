// SPDX-License-Identifier: Apache-2.0
/*
 * rt_map.h -- open addressing (linear probing, backward-shift deletion)
 * from uint64_t keys to uint32_t values, for the KV index and the table of
 * requests in flight. Grows at half full into a table twice the size,
 * incrementally: each insert moves at most RT_MAP_STEP slots of the old
 * table while the two coexist (a get looks in both), so no operation
 * rehashes the whole map. Tables are mmap'd (zero pages, nothing written
 * up front) and the old one unmapped in 64 KiB pieces as it empties. Never shrinks (the index bounds how many keys it
 * holds). Also rt_seg, a growable array whose growth moves nothing. Not
 * thread-safe: the router's mutex guards both.
 */
#ifndef WSEL_ROUTER_RT_MAP_H
#define WSEL_ROUTER_RT_MAP_H

#include <stddef.h>
#include <stdint.h>

#define RT_MAP_NONE UINT32_MAX
/* Old slots an insert visits at most. A table of n slots grows at n / 2 keys
 * and its successor at n, so n / 2 inserts come in between: 2 an insert
 * would move the old table in time; 4 leave a margin. */
#define RT_MAP_STEP 4u

typedef struct rt_map_slot {
    uint64_t key;
    uint32_t val1;    /* the value + 1; 0 = empty, so zeroed slots are */
    uint32_t deleted; /* 1 = deleted from the old table (its run goes on) */
} rt_map_slot;

typedef struct rt_map {
    rt_map_slot *slots;
    size_t mask;
    size_t count;      /* keys in both tables */
    rt_map_slot *old;  /* the table being moved out; NULL = none */
    size_t old_mask;
    size_t old_next;    /* its next slot to move */
    size_t old_released; /* its slots [0, old_released) are unmapped */
    size_t most_moved; /* most old slots one operation visited (tests) */
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
/* Insert key, known to be absent (rt_map_get said so), without searching
 * for it: 0 or WSEL_ENOMEM. */
int rt_map_put_new(rt_map *m, uint64_t key, uint32_t val);
/* Remove key if present. */
void rt_map_del(rt_map *m, uint64_t key);
size_t rt_map_bytes(const rt_map *m);

/* A growable array of fixed-size elements whose growth adds a segment and
 * moves nothing (ids and pointers stay valid). Segment 0 holds ids
 * [0, 2c), segment k >= 1 ids [c << k, c << (k + 1)), c = 1 << shift, so
 * the capacity doubles as a realloc'd array's would, and an id's segment
 * is the top bit of (id >> shift) | 1. */
#define RT_SEG_MAX 32
typedef struct rt_seg {
    /* Segment k's address less its first id's offset (id * size added
     * gives the element), and the segment as allocated. */
    uintptr_t base[RT_SEG_MAX];
    void *seg[RT_SEG_MAX];
    uint32_t shift, nseg;
    uint32_t cap;  /* elements in the segments */
    uint32_t used; /* ids [0, used) were handed out by rt_seg_fresh */
} rt_seg;

void rt_seg_init(rt_seg *s, uint32_t shift);
void rt_seg_free(rt_seg *s);
/* A never used id, adding a segment when full (its elements are not
 * initialised): 0 or WSEL_ENOMEM. Ids stay below 2^31. */
int rt_seg_fresh(rt_seg *s, size_t size, uint32_t *id);

/* Element i (< used) of elements of `size` bytes; RT_SEG_AT types it. */
static inline void *rt_seg_at(const rt_seg *s, uint32_t i, size_t size)
{
    uint32_t k = 31u - (uint32_t)__builtin_clz((i >> s->shift) | 1u);
    return (void *)(s->base[k] + (uintptr_t)i * size);
}
#define RT_SEG_AT(s, type, i) ((type *)rt_seg_at((s), (i), sizeof(type)))

#endif
