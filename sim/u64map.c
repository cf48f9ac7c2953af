/*
 * u64map.c -- open addressing with linear probing and backward-shift
 * deletion.
 */
#include "u64map.h"

#include <stdlib.h>

#include "wsel.h"

static size_t slot_of(const sim_u64map *map, uint64_t key)
{
    return (size_t)sim_mix64(key) & map->mask;
}

static int32_t alloc_slots(sim_u64map *map, size_t capacity)
{
    map->keys = malloc(capacity * sizeof(*map->keys));
    map->values = malloc(capacity * sizeof(*map->values));
    map->used = calloc(capacity, 1);
    if (!map->keys || !map->values || !map->used) {
        free(map->keys);
        free(map->values);
        free(map->used);
        map->keys = NULL;
        map->values = NULL;
        map->used = NULL;
        return WSEL_ENOMEM;
    }
    map->mask = capacity - 1;
    map->size = 0;
    return 0;
}

int32_t sim_u64map_init(sim_u64map *map, size_t expected, int growable)
{
    size_t capacity = 16;
    while (capacity < expected * 2)
        capacity *= 2;
    map->growable = growable;
    return alloc_slots(map, capacity);
}

void sim_u64map_free(sim_u64map *map)
{
    free(map->keys);
    free(map->values);
    free(map->used);
    map->keys = NULL;
    map->values = NULL;
    map->used = NULL;
    map->size = 0;
}

uint64_t *sim_u64map_find(const sim_u64map *map, uint64_t key)
{
    for (size_t i = slot_of(map, key);; i = (i + 1) & map->mask) {
        if (!map->used[i])
            return NULL;
        if (map->keys[i] == key)
            return &map->values[i];
    }
}

static int32_t grow(sim_u64map *map)
{
    sim_u64map old = *map;
    if (alloc_slots(map, (old.mask + 1) * 2) != 0) {
        *map = old;
        return WSEL_ENOMEM;
    }
    for (size_t i = 0; i <= old.mask; i++) {
        if (!old.used[i])
            continue;
        int inserted;
        *sim_u64map_upsert(map, old.keys[i], &inserted) = old.values[i];
    }
    sim_u64map_free(&old);
    return 0;
}

uint64_t *sim_u64map_upsert(sim_u64map *map, uint64_t key, int *inserted)
{
    size_t i = slot_of(map, key);
    for (;; i = (i + 1) & map->mask) {
        if (!map->used[i])
            break;
        if (map->keys[i] == key) {
            *inserted = 0;
            return &map->values[i];
        }
    }
    if ((map->size + 1) * 2 > map->mask + 1) {
        if (!map->growable) {
            if (map->size + 1 > map->mask)
                return NULL;
        } else {
            if (grow(map) != 0)
                return NULL;
            return sim_u64map_upsert(map, key, inserted);
        }
    }
    map->used[i] = 1;
    map->keys[i] = key;
    map->values[i] = 0;
    map->size++;
    *inserted = 1;
    return &map->values[i];
}

int sim_u64map_erase(sim_u64map *map, uint64_t key)
{
    size_t i = slot_of(map, key);
    for (;; i = (i + 1) & map->mask) {
        if (!map->used[i])
            return 0;
        if (map->keys[i] == key)
            break;
    }
    /* Backward shift: pull later members of the probe run into the hole. */
    size_t hole = i;
    for (size_t j = (hole + 1) & map->mask; map->used[j]; j = (j + 1) & map->mask) {
        size_t home = slot_of(map, map->keys[j]);
        /* j may move to hole if home is not cyclically in (hole, j]. */
        int stays = (hole <= j) ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays)
            continue;
        map->keys[hole] = map->keys[j];
        map->values[hole] = map->values[j];
        hole = j;
    }
    map->used[hole] = 0;
    map->size--;
    return 1;
}
