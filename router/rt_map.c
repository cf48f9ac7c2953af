// SPDX-License-Identifier: Apache-2.0
/* rt_map.c -- see rt_map.h. */
#include "rt_map.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "wsel.h"

#define NOT_FOUND SIZE_MAX
/* The old table is unmapped behind the moving cursor in pieces of this
 * many slots (64 KiB), so no put frees a whole table at once. */
#define RELEASE_SLOTS 4096u

/* n zeroed (empty) slots, mapped: pages are zeroed by the kernel as they
 * are first touched, so a table of any size costs nothing up front. */
static rt_map_slot *table_new(size_t n)
{
    void *p = mmap(NULL, n * sizeof(rt_map_slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Unmap slots [from, to) of table s. */
static void table_unmap(rt_map_slot *s, size_t from, size_t to)
{
    if (s && to > from)
        munmap(s + from, (to - from) * sizeof(*s));
}

int rt_map_init(rt_map *m, size_t capacity)
{
    size_t n = 16;
    while (n < capacity * 2)
        n *= 2;
    *m = (rt_map){0};
    m->slots = table_new(n);
    if (!m->slots)
        return WSEL_ENOMEM;
    m->mask = n - 1;
    return 0;
}

void rt_map_free(rt_map *m)
{
    table_unmap(m->slots, 0, m->mask + 1);
    table_unmap(m->old, m->old_released, m->old_mask + 1);
    *m = (rt_map){0};
}

/* key's slot in the new table, or NOT_FOUND. */
static size_t find(const rt_map *m, uint64_t key)
{
    for (size_t i = (size_t)rt_mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->slots[i].val1 == 0)
            return NOT_FOUND;
        if (m->slots[i].key == key)
            return i;
    }
}

/* key's slot in the old table, or NOT_FOUND. Slots below old_next hold
 * no key (moved, maybe unmapped): a probe skips them, and when it wraps,
 * it has seen every slot that may (a key found is the only copy, so a
 * probe that runs past its run's end still answers right). */
static size_t find_old(const rt_map *m, uint64_t key)
{
    size_t i = (size_t)rt_mix64(key) & m->old_mask;
    int wrapped = 0;
    if (i < m->old_next)
        i = m->old_next;
    for (;; i++) {
        if (i > m->old_mask) {
            if (wrapped++)
                return NOT_FOUND;
            i = m->old_next;
        }
        const rt_map_slot *s = &m->old[i];
        if (s->val1 == 0)
            return NOT_FOUND;
        if (s->key == key && !s->deleted)
            return i;
    }
}

uint32_t rt_map_get(const rt_map *m, uint64_t key)
{
    size_t i = find(m, key);
    if (i != NOT_FOUND)
        return m->slots[i].val1 - 1;
    if (m->old && (i = find_old(m, key)) != NOT_FOUND)
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

/* Move up to `budget` old slots into the new table, unmapping the old
 * one behind the cursor. A key is in one table only, so a move never
 * overwrites. */
static void move_old(rt_map *m, size_t budget)
{
    size_t visited = 0;
    for (; m->old && visited < budget; visited++) {
        rt_map_slot *s = &m->old[m->old_next++];
        if (s->val1 != 0 && !s->deleted) {
            place(m->slots, m->mask, s->key, s->val1);
            s->val1 = 0; /* skipped from now on (below old_next) */
        }
        if (m->old_next > m->old_mask) {
            table_unmap(m->old, m->old_released, m->old_mask + 1);
            m->old = NULL;
        } else if (m->old_next - m->old_released >= RELEASE_SLOTS) {
            table_unmap(m->old, m->old_released, m->old_next);
            m->old_released = m->old_next;
        }
    }
    if (visited > m->most_moved)
        m->most_moved = visited;
}

/* A table twice the size becomes the new one (mapped: no slot is written
 * now); the current one is moved out by later puts. */
static int grow(rt_map *m)
{
    move_old(m, SIZE_MAX); /* only if puts outran RT_MAP_STEP: never */
    size_t n = (m->mask + 1) * 2;
    rt_map_slot *s = table_new(n);
    if (!s)
        return WSEL_ENOMEM;
    m->old = m->slots;
    m->old_mask = m->mask;
    m->old_next = 0;
    m->old_released = 0;
    m->slots = s;
    m->mask = n - 1;
    return 0;
}

int rt_map_put(rt_map *m, uint64_t key, uint32_t val)
{
    size_t i = find(m, key);
    if (i != NOT_FOUND) {
        m->slots[i].val1 = val + 1;
        return 0;
    }
    if (m->old && (i = find_old(m, key)) != NOT_FOUND) {
        m->old[i].val1 = val + 1;
        return 0;
    }
    return rt_map_put_new(m, key, val);
}

int rt_map_put_new(rt_map *m, uint64_t key, uint32_t val)
{
    move_old(m, RT_MAP_STEP);
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
    size_t i = find(m, key);
    if (i != NOT_FOUND) {
        shift_out(m, i);
        m->count--;
        return;
    }
    /* The old table only loses keys: marked, so its runs stay whole. */
    if (m->old && (i = find_old(m, key)) != NOT_FOUND) {
        m->old[i].deleted = 1;
        m->count--;
    }
}

size_t rt_map_bytes(const rt_map *m)
{
    size_t n = m->mask + 1 + (m->old ? m->old_mask + 1 - m->old_released : 0);
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
        uint32_t first = s->nseg ? s->cap : 0; /* the segment's first id */
        uint32_t n = s->nseg ? s->cap : 2u << s->shift; /* doubles cap */
        if (s->cap > (1u << 31) - n || s->nseg == RT_SEG_MAX)
            return WSEL_ENOMEM;
        void *seg = malloc((size_t)n * size);
        if (!seg)
            return WSEL_ENOMEM;
        s->seg[s->nseg] = seg;
        s->base[s->nseg++] = (uintptr_t)seg - (uintptr_t)first * size;
        s->cap += n;
    }
    *id = s->used++;
    return 0;
}
