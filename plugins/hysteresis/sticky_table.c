/*
 * sticky_table.c -- see sticky_table.h.
 */
#include "sticky_table.h"

#include <stdlib.h>

#include "wsel.h"

/* splitmix64's finaliser: a well-mixed bucket index from any key. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint32_t bucket_of(const sticky_table *table, uint64_t key)
{
    return (uint32_t)(mix64(key) & table->bucket_mask);
}

int32_t sticky_table_init(sticky_table *table, uint32_t capacity)
{
    if (capacity == 0 || capacity > (1u << 30))
        return WSEL_EINVAL;
    uint32_t buckets = 1;
    while (buckets < capacity)
        buckets <<= 1;

    sticky_entry *entries = malloc((size_t)capacity * sizeof(*entries));
    if (entries == NULL)
        goto out_fail;
    uint32_t *heads = malloc((size_t)buckets * sizeof(*heads));
    if (heads == NULL)
        goto out_free_entries;
    for (uint32_t b = 0; b < buckets; b++)
        heads[b] = STICKY_NIL;

    table->entries = entries;
    table->buckets = heads;
    table->capacity = capacity;
    table->used = 0;
    table->bucket_mask = buckets - 1;
    table->oldest = STICKY_NIL;
    table->newest = STICKY_NIL;
    return 0;

out_free_entries:
    free(entries);
out_fail:
    return WSEL_ENOMEM;
}

void sticky_table_free(sticky_table *table)
{
    free(table->entries);
    free(table->buckets);
    table->entries = NULL;
    table->buckets = NULL;
    table->capacity = 0;
    table->used = 0;
}

static uint32_t find_index(const sticky_table *table, uint64_t key)
{
    if (table->used == 0)
        return STICKY_NIL;
    uint32_t i = table->buckets[bucket_of(table, key)];
    while (i != STICKY_NIL && table->entries[i].key != key)
        i = table->entries[i].chain;
    return i;
}

const sticky_entry *sticky_table_find(const sticky_table *table, uint64_t key)
{
    uint32_t i = find_index(table, key);
    return i == STICKY_NIL ? NULL : &table->entries[i];
}

static void lru_unlink(sticky_table *table, uint32_t i)
{
    sticky_entry *e = &table->entries[i];
    if (e->older != STICKY_NIL)
        table->entries[e->older].newer = e->newer;
    else
        table->oldest = e->newer;
    if (e->newer != STICKY_NIL)
        table->entries[e->newer].older = e->older;
    else
        table->newest = e->older;
}

static void lru_push_newest(sticky_table *table, uint32_t i)
{
    sticky_entry *e = &table->entries[i];
    e->older = table->newest;
    e->newer = STICKY_NIL;
    if (table->newest != STICKY_NIL)
        table->entries[table->newest].newer = i;
    else
        table->oldest = i;
    table->newest = i;
}

static void chain_unlink(sticky_table *table, uint32_t i)
{
    uint32_t *link = &table->buckets[bucket_of(table, table->entries[i].key)];
    while (*link != i)
        link = &table->entries[*link].chain;
    *link = table->entries[i].chain;
}

/* A free slot for a new key: a never-used one, else the oldest, forgotten. */
static uint32_t take_slot(sticky_table *table)
{
    if (table->used < table->capacity)
        return table->used++;
    uint32_t i = table->oldest;
    lru_unlink(table, i);
    chain_unlink(table, i);
    return i;
}

void sticky_table_put(sticky_table *table, uint64_t key, uint64_t worker_id,
                      uint32_t dp_rank)
{
    uint32_t i = find_index(table, key);
    if (i != STICKY_NIL) {
        lru_unlink(table, i);
    } else {
        i = take_slot(table);
        uint32_t b = bucket_of(table, key);
        table->entries[i].key = key;
        table->entries[i].chain = table->buckets[b];
        table->buckets[b] = i;
    }
    table->entries[i].worker_id = worker_id;
    table->entries[i].dp_rank = dp_rank;
    lru_push_newest(table, i);
}
