// SPDX-License-Identifier: Apache-2.0
/* rt_map.c -- see rt_map.h. */
#include "rt_map.h"

#include <stdlib.h>

#include "wsel.h"

#define NOT_FOUND SIZE_MAX

int rt_map_init(rt_map *m, size_t capacity)
{
    size_t n = 16;
    while (n < capacity * 2)
        n *= 2;
    *m = (rt_map){0};
    m->slots = calloc(n, sizeof(*m->slots));
    if (!m->slots)
        return WSEL_ENOMEM;
    m->mask = n - 1;
    return 0;
}

void rt_map_free(rt_map *m)
{
    free(m->slots);
    free(m->old);
    *m = (rt_map){0};
}

/* key's slot in table s, or NOT_FOUND; a moved slot is passed over. */
static size_t find(const rt_map_slot *s, size_t mask, uint64_t key)
{
    for (size_t i = (size_t)rt_mix64(key) & mask;; i = (i + 1) & mask) {
        if (s[i].val1 == 0)
            return NOT_FOUND;
        if (s[i].key == key && !s[i].moved)
            return i;
    }
}

uint32_t rt_map_get(const rt_map *m, uint64_t key)
{
    size_t i = find(m->slots, m->mask, key);
    if (i != NOT_FOUND)
        return m->slots[i].val1 - 1;
    if (m->old && (i = find(m->old, m->old_mask, key)) != NOT_FOUND)
        return m->old[i].val1 - 1;
    return RT_MAP_NONE;
}

static void place(rt_map_slot *slots, size_t mask, uint64_t key, uint32_t val1)
{
    size_t i = (size_t)rt_mix64(key) & mask;
    while (slots[i].val1 != 0)
        i = (i + 1) & mask;
    slots[i].key = key;
    slots[i].val1 = val1;
}

/* Move up to `budget` old slots into the new table; the old one is freed
 * once all are. A key is in one table only, so a move never overwrites. */
static void move_old(rt_map *m, size_t budget)
{
    size_t visited = 0;
    for (; m->old && visited < budget; visited++) {
        rt_map_slot *s = &m->old[m->old_next];
        if (s->val1 != 0 && !s->moved) {
            place(m->slots, m->mask, s->key, s->val1);
            s->moved = 1;
        }
        if (m->old_next++ == m->old_mask) {
            free(m->old);
            m->old = NULL;
        }
    }
    if (visited > m->most_moved)
        m->most_moved = visited;
}

/* A table twice the size becomes the new one; calloc'd, so no slot is
 * written now. The current one is moved out by later puts. */
static int grow(rt_map *m)
{
    move_old(m, SIZE_MAX); /* only if puts outran RT_MAP_STEP: never */
    size_t n = (m->mask + 1) * 2;
    rt_map_slot *s = calloc(n, sizeof(*s));
    if (!s)
        return WSEL_ENOMEM;
    m->old = m->slots;
    m->old_mask = m->mask;
    m->old_next = 0;
    m->slots = s;
    m->mask = n - 1;
    return 0;
}

int rt_map_put(rt_map *m, uint64_t key, uint32_t val)
{
    move_old(m, RT_MAP_STEP);
    size_t i = find(m->slots, m->mask, key);
    if (i != NOT_FOUND) {
        m->slots[i].val1 = val + 1;
        return 0;
    }
    if (m->old && (i = find(m->old, m->old_mask, key)) != NOT_FOUND) {
        m->old[i].val1 = val + 1;
        return 0;
    }
    if ((m->count + 1) * 2 > m->mask + 1) {
        int rc = grow(m);
        if (rc != 0)
            return rc;
    }
    place(m->slots, m->mask, key, val + 1);
    m->count++;
    return 0;
}

/* Backward shift from slot i of the new table: pull later entries of
 * the run into the hole. */
static void shift_out(rt_map *m, size_t i)
{
    size_t hole = i;
    size_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        rt_map_slot *s = &m->slots[j];
        if (s->val1 == 0)
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
    m->slots[hole].val1 = 0;
}

void rt_map_del(rt_map *m, uint64_t key)
{
    size_t i = find(m->slots, m->mask, key);
    if (i != NOT_FOUND) {
        shift_out(m, i);
        m->count--;
        return;
    }
    /* The old table only loses keys: marked, so its runs stay whole. */
    if (m->old && (i = find(m->old, m->old_mask, key)) != NOT_FOUND) {
        m->old[i].moved = 1;
        m->count--;
    }
}

size_t rt_map_bytes(const rt_map *m)
{
    size_t n = m->mask + 1 + (m->old ? m->old_mask + 1 : 0);
    return n * sizeof(rt_map_slot);
}

void rt_seg_init(rt_seg *s, uint32_t shift)
{
    *s = (rt_seg){.shift = shift};
}

void rt_seg_free(rt_seg *s)
{
    for (uint32_t k = 0; k < s->nseg; k++)
        free(s->seg[k]);
    *s = (rt_seg){.shift = s->shift};
}

int rt_seg_fresh(rt_seg *s, size_t size, uint32_t *id)
{
    if (s->used == s->cap) {
        uint32_t n = s->nseg ? s->cap : 1u << s->shift; /* doubles cap */
        if (s->cap > (1u << 31) - n || s->nseg == RT_SEG_MAX)
            return WSEL_ENOMEM;
        void *seg = malloc((size_t)n * size);
        if (!seg)
            return WSEL_ENOMEM;
        s->seg[s->nseg++] = seg;
        s->cap += n;
    }
    *id = s->used++;
    return 0;
}
