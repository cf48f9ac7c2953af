// SPDX-License-Identifier: Apache-2.0
/*
 * u64map.c -- open addressing with linear probing over mixed keys and
 * backward-shift deletion.
 */
#include "u64map.h"

#include <stdlib.h>

#include "wsel.h"

static int32_t alloc_slots(sim_u64map *map, size_t capacity)
{
    map->slots = calloc(capacity, sizeof(*map->slots));
    if (!map->slots)
        return WSEL_ENOMEM;
    map->mask = capacity - 1;
    map->size = 0;
    map->has_zero = 0;
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
    free(map->slots);
    map->slots = NULL;
    map->size = 0;
    map->has_zero = 0;
}

uint64_t *sim_u64map_find(sim_u64map *map, uint64_t key)
{
    uint64_t m = sim_mix64(key);
    if (m == 0)
        return map->has_zero ? &map->zero_value : NULL;
    for (size_t i = (size_t)m & map->mask;; i = (i + 1) & map->mask) {
        sim_u64map_slot *s = &map->slots[i];
        if (s->mixed == m)
            return &s->value;
        if (s->mixed == 0)
            return NULL;
    }
}

/* Insert mixed key m (absent, non-zero) into a map with room. */
static sim_u64map_slot *place(sim_u64map *map, uint64_t m)
{
    size_t i = (size_t)m & map->mask;
    while (map->slots[i].mixed != 0)
        i = (i + 1) & map->mask;
    map->slots[i].mixed = m;
    map->slots[i].value = 0;
    map->size++;
    return &map->slots[i];
}

static int32_t grow(sim_u64map *map)
{
    sim_u64map old = *map;
    if (alloc_slots(map, (old.mask + 1) * 2) != 0) {
        *map = old;
        return WSEL_ENOMEM;
    }
    for (size_t i = 0; i <= old.mask; i++)
        if (old.slots[i].mixed != 0)
            place(map, old.slots[i].mixed)->value = old.slots[i].value;
    map->has_zero = old.has_zero;
    map->zero_value = old.zero_value;
    map->size += (size_t)old.has_zero;
    free(old.slots);
    return 0;
}

uint64_t *sim_u64map_upsert(sim_u64map *map, uint64_t key, int *inserted)
{
    uint64_t m = sim_mix64(key);
    if (m == 0) {
        *inserted = !map->has_zero;
        if (!map->has_zero) {
            map->has_zero = 1;
            map->zero_value = 0;
            map->size++;
        }
        return &map->zero_value;
    }
    size_t i = (size_t)m & map->mask;
    for (;; i = (i + 1) & map->mask) { /* one probe run: found, or its end */
        if (map->slots[i].mixed == m) {
            *inserted = 0;
            return &map->slots[i].value;
        }
        if (map->slots[i].mixed == 0)
            break;
    }
    if ((map->size + 1) * 2 > map->mask + 1) {
        if (!map->growable) {
            if (map->size + 1 > map->mask)
                return NULL;
        } else {
            if (grow(map) != 0)
                return NULL;
            *inserted = 1;
            return &place(map, m)->value;
        }
    }
    map->slots[i].mixed = m;
    map->slots[i].value = 0;
    map->size++;
    *inserted = 1;
    return &map->slots[i].value;
}

/* Backward shift from the emptied slot `hole`: pull later members of the
 * probe run into it so every key stays reachable. */
static void erase_slot(sim_u64map *map, size_t hole)
{
    for (size_t j = (hole + 1) & map->mask; map->slots[j].mixed != 0;
         j = (j + 1) & map->mask) {
        size_t home = (size_t)map->slots[j].mixed & map->mask;
        /* j stays if its home lies cyclically in (hole, j]. */
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (stays)
            continue;
        map->slots[hole] = map->slots[j];
        hole = j;
    }
    map->slots[hole].mixed = 0;
    map->size--;
}

void sim_u64map_erase_found(sim_u64map *map, uint64_t *value)
{
    if (value == &map->zero_value) {
        map->has_zero = 0;
        map->size--;
        return;
    }
    sim_u64map_slot *slot =
        (sim_u64map_slot *)(void *)((char *)value - offsetof(sim_u64map_slot, value));
    erase_slot(map, (size_t)(slot - map->slots));
}

int sim_u64map_erase(sim_u64map *map, uint64_t key)
{
    uint64_t m = sim_mix64(key);
    if (m == 0) {
        if (!map->has_zero)
            return 0;
        map->has_zero = 0;
        map->size--;
        return 1;
    }
    size_t i = (size_t)m & map->mask;
    for (;; i = (i + 1) & map->mask) {
        if (map->slots[i].mixed == 0)
            return 0;
        if (map->slots[i].mixed == m)
            break;
    }
    erase_slot(map, i);
    return 1;
}
