/*
 * sticky_table.h -- the hysteresis plugin's memory: affinity key -> the
 * (worker_id, dp_rank) it was last sent to, bounded, least recently used
 * entry evicted first.
 *
 * Chained hashing over a fixed entry pool with an intrusive LRU list: every
 * operation is O(1) expected and nothing allocates after init. Not
 * thread-safe: the plugin serialises calls with its own lock.
 */
#ifndef WSEL_HYSTERESIS_STICKY_TABLE_H
#define WSEL_HYSTERESIS_STICKY_TABLE_H

#include <stdint.h>

/* "No entry": end of a chain or of the LRU list. */
#define STICKY_NIL UINT32_MAX

/* One remembered key. 32 bytes. */
typedef struct sticky_entry {
    uint64_t key;
    uint64_t worker_id;
    uint32_t dp_rank;
    /* Next entry in the same bucket, STICKY_NIL at the end. */
    uint32_t chain;
    /* Neighbours in the LRU list: towards the least / most recently used. */
    uint32_t older;
    uint32_t newer;
} sticky_entry;

typedef struct sticky_table {
    /* `capacity` entries; the first `used` are live. */
    sticky_entry *entries;
    /* Power-of-two bucket heads (>= capacity, so chains stay short). */
    uint32_t *buckets;
    uint32_t capacity;
    uint32_t used;
    uint32_t bucket_mask;
    /* Least and most recently used entries, STICKY_NIL when empty. */
    uint32_t oldest;
    uint32_t newest;
} sticky_table;

/* Allocate room for `capacity` (>= 1) keys. Returns 0 or WSEL_ENOMEM; on
 * failure *table is left untouched. OWNERSHIP: the caller owns `table`;
 * release the storage with sticky_table_free. */
int32_t sticky_table_init(sticky_table *table, uint32_t capacity);

/* Release the storage; a zeroed table is a harmless no-op. */
void sticky_table_free(sticky_table *table);

/* The entry remembered for `key`, or NULL. Does not change the LRU order.
 * The pointer stays valid until the next sticky_table_put. */
const sticky_entry *sticky_table_find(const sticky_table *table, uint64_t key);

/* Remember (worker_id, dp_rank) for `key` and make it the most recently
 * used; when the key is new and the table full, the least recently used key
 * is forgotten first. Never allocates. */
void sticky_table_put(sticky_table *table, uint64_t key, uint64_t worker_id,
                      uint32_t dp_rank);

#endif
