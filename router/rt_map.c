// SPDX-License-Identifier: Apache-2.0
/* rt_map.c -- see rt_map.h. */
#include "rt_map.h"

#include <stdlib.h>

#include "wsel.h"

static rt_map_slot *alloc_slots(size_t n)
{
    rt_map_slot *s = malloc(n * sizeof(*s));
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++)
        s[i].val = RT_MAP_NONE;
    return s;
}

int rt_map_init(rt_map *m, size_t capacity)
{
    size_t n = 16;
    while (n < capacity * 2)
        n *= 2;
    m->slots = alloc_slots(n);
    if (!m->slots)
        return WSEL_ENOMEM;
    m->mask = n - 1;
    m->count = 0;
    return 0;
}

void rt_map_free(rt_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
    m->count = 0;
}

uint32_t rt_map_get(const rt_map *m, uint64_t key)
{
    size_t i = (size_t)rt_mix64(key) & m->mask;
    for (;;) {
        const rt_map_slot *s = &m->slots[i];
        if (s->val == RT_MAP_NONE)
            return RT_MAP_NONE;
        if (s->key == key)
            return s->val;
        i = (i + 1) & m->mask;
    }
}

static void place(rt_map_slot *slots, size_t mask, uint64_t key, uint32_t val)
{
    size_t i = (size_t)rt_mix64(key) & mask;
    while (slots[i].val != RT_MAP_NONE)
        i = (i + 1) & mask;
    slots[i].key = key;
    slots[i].val = val;
}

static int grow(rt_map *m)
{
    size_t n = (m->mask + 1) * 2;
    rt_map_slot *s = alloc_slots(n);
    if (!s)
        return WSEL_ENOMEM;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].val != RT_MAP_NONE)
            place(s, n - 1, m->slots[i].key, m->slots[i].val);
    free(m->slots);
    m->slots = s;
    m->mask = n - 1;
    return 0;
}

int rt_map_put(rt_map *m, uint64_t key, uint32_t val)
{
    size_t i = (size_t)rt_mix64(key) & m->mask;
    for (;;) {
        rt_map_slot *s = &m->slots[i];
        if (s->val == RT_MAP_NONE)
            break;
        if (s->key == key) {
            s->val = val;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
    if ((m->count + 1) * 2 > m->mask + 1) {
        int rc = grow(m);
        if (rc != 0)
            return rc;
    }
    place(m->slots, m->mask, key, val);
    m->count++;
    return 0;
}

void rt_map_del(rt_map *m, uint64_t key)
{
    size_t i = (size_t)rt_mix64(key) & m->mask;
    for (;;) {
        rt_map_slot *s = &m->slots[i];
        if (s->val == RT_MAP_NONE)
            return;
        if (s->key == key)
            break;
        i = (i + 1) & m->mask;
    }
    /* Backward shift: pull later entries of the run into the hole. */
    size_t hole = i;
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        rt_map_slot *s = &m->slots[j];
        if (s->val == RT_MAP_NONE)
            break;
        size_t home = (size_t)rt_mix64(s->key) & m->mask;
        /* Movable if its home is not in (hole, j] cyclically. */
        int in_range =
            hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            m->slots[hole] = *s;
            hole = j;
        }
    }
    m->slots[hole].val = RT_MAP_NONE;
    m->count--;
}

size_t rt_map_bytes(const rt_map *m)
{
    return (m->mask + 1) * sizeof(rt_map_slot);
}
