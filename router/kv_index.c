// SPDX-License-Identifier: Apache-2.0
/* kv_index.c -- see kv_index.h. */
#include "kv_index.h"

#include <stdlib.h>
#include <string.h>

#include "wsel.h"

static uint64_t pair_key(uint64_t hash, uint32_t slot)
{
    return hash + 0x9e3779b97f4a7c15ull * ((uint64_t)slot + 1);
}

static inline rt_entry *ent(const rt_index *ix, uint32_t id)
{
    return RT_SEG_AT(&ix->e, rt_entry, id);
}

static inline rt_block *blk(const rt_index *ix, uint32_t id)
{
    return RT_SEG_AT(&ix->b, rt_block, id);
}

int rt_index_init(rt_index *ix, uint32_t num_slots, uint32_t capacity, int by_ext)
{
    memset(ix, 0, sizeof(*ix));
    ix->by_ext = by_ext;
    ix->num_slots = num_slots;
    ix->capacity = capacity;
    rt_seg_init(&ix->e, 9); /* 1,024 entries first */
    rt_seg_init(&ix->b, 9);
    ix->e_free = RT_NIL;
    ix->b_free = RT_NIL;
    ix->lru = malloc((size_t)num_slots * sizeof(*ix->lru));
    ix->ov_mask = calloc(num_slots, sizeof(*ix->ov_mask));
    ix->ov_seen = malloc((size_t)num_slots * sizeof(*ix->ov_seen));
    if (!ix->lru || !ix->ov_mask || !ix->ov_seen)
        goto fail;
    for (uint32_t s = 0; s < num_slots; s++)
        ix->lru[s] = (rt_lru){RT_NIL, RT_NIL, 0};
    if (rt_map_init(&ix->blocks, 1024) != 0 || rt_map_init(&ix->ext, 1024) != 0)
        goto fail;
    return 0;
fail:
    rt_index_free(ix);
    return WSEL_ENOMEM;
}

void rt_index_free(rt_index *ix)
{
    rt_seg_free(&ix->e);
    rt_seg_free(&ix->b);
    free(ix->lru);
    free(ix->ov_mask);
    free(ix->ov_seen);
    rt_map_free(&ix->blocks);
    rt_map_free(&ix->ext);
    memset(ix, 0, sizeof(*ix));
}

/* One more free entry: a fresh one (a new segment when full, nothing
 * moved). */
static int grow_entries(rt_index *ix)
{
    uint32_t id;
    if (rt_seg_fresh(&ix->e, sizeof(rt_entry), &id) != 0)
        return WSEL_ENOMEM;
    ent(ix, id)->block = RT_NIL;
    ent(ix, id)->lru_next = ix->e_free;
    ix->e_free = id;
    return 0;
}

/* One more free block, likewise. */
static int grow_blocks(rt_index *ix)
{
    uint32_t id;
    if (rt_seg_fresh(&ix->b, sizeof(rt_block), &id) != 0)
        return WSEL_ENOMEM;
    blk(ix, id)->count = 0;
    blk(ix, id)->first = ix->b_free;
    ix->b_free = id;
    return 0;
}

static void lru_unlink(rt_index *ix, uint32_t id)
{
    rt_entry *e = ent(ix, id);
    rt_lru *l = &ix->lru[e->slot];
    if (e->lru_prev != RT_NIL)
        ent(ix, e->lru_prev)->lru_next = e->lru_next;
    else
        l->head = e->lru_next;
    if (e->lru_next != RT_NIL)
        ent(ix, e->lru_next)->lru_prev = e->lru_prev;
    else
        l->tail = e->lru_prev;
    l->count--;
}

static void lru_push_front(rt_index *ix, uint32_t id)
{
    rt_entry *e = ent(ix, id);
    rt_lru *l = &ix->lru[e->slot];
    e->lru_prev = RT_NIL;
    e->lru_next = l->head;
    if (l->head != RT_NIL)
        ent(ix, l->head)->lru_prev = id;
    else
        l->tail = id;
    l->head = id;
    l->count++;
}

/* Remove entry id from every structure and free it (and its block when it
 * was the last holder). */
static void drop_entry(rt_index *ix, uint32_t id)
{
    rt_entry *e = ent(ix, id);
    rt_block *b = blk(ix, e->block);
    lru_unlink(ix, id);
    if (e->blk_prev != RT_NIL)
        ent(ix, e->blk_prev)->blk_next = e->blk_next;
    else
        b->first = e->blk_next;
    if (e->blk_next != RT_NIL)
        ent(ix, e->blk_next)->blk_prev = e->blk_prev;
    if (e->has_ext) {
        uint64_t xk = pair_key(e->ext_hash, e->slot);
        if (rt_map_get(&ix->ext, xk) == id)
            rt_map_del(&ix->ext, xk);
    }
    if (--b->count == 0) {
        rt_map_del(&ix->blocks, b->hash);
        b->first = ix->b_free;
        ix->b_free = e->block;
        ix->nblocks--;
    }
    e->block = RT_NIL;
    e->lru_next = ix->e_free;
    ix->e_free = id;
    ix->entries--;
}

/* slot's entry of block bid, or RT_NIL: a walk of the block's holders
 * (as short as rt_index_overlaps's walk of the same list). */
static uint32_t find_holder(const rt_index *ix, uint32_t bid, uint32_t slot)
{
    for (uint32_t id = blk(ix, bid)->first; id != RT_NIL; id = ent(ix, id)->blk_next)
        if (ent(ix, id)->slot == slot)
            return id;
    return RT_NIL;
}

/* Blocks whose holder lists rt_index_overlaps and rt_index_refresh_prefix
 * walk together. */
#define OV_WINDOW 8u

void rt_index_refresh_prefix(rt_index *ix, uint32_t slot, const uint64_t *hashes,
                             uint32_t n)
{
    for (uint32_t end = n; end > 0;) {
        uint32_t w = end < OV_WINDOW ? end : OV_WINDOW, cur[OV_WINDOW];
        const uint64_t *h = hashes + end - w;
        /* Slot's entry of each block: the w lists walked a step each in
         * turn, so that their cache misses overlap. */
        for (uint32_t j = 0; j < w; j++) {
            uint32_t bid = rt_map_get(&ix->blocks, h[j]);
            cur[j] = bid != RT_MAP_NONE ? blk(ix, bid)->first : RT_NIL;
        }
        for (uint32_t walking = w; walking > 0;) {
            walking = 0;
            for (uint32_t j = 0; j < w; j++)
                if (cur[j] != RT_NIL && ent(ix, cur[j])->slot != slot) {
                    cur[j] = ent(ix, cur[j])->blk_next;
                    walking++;
                }
        }
        for (uint32_t j = w; j-- > 0;)
            if (cur[j] != RT_NIL) {
                lru_unlink(ix, cur[j]);
                lru_push_front(ix, cur[j]);
            }
        end -= w;
    }
}

static int set_ext(rt_index *ix, uint32_t id, int has_ext, uint64_t ext_hash)
{
    rt_entry *e = ent(ix, id);
    if (e->has_ext && (!has_ext || e->ext_hash != ext_hash)) {
        uint64_t xk = pair_key(e->ext_hash, e->slot);
        if (rt_map_get(&ix->ext, xk) == id)
            rt_map_del(&ix->ext, xk);
        e->has_ext = 0;
    }
    if (!has_ext)
        return 0;
    /* Another entry of this slot known by the same engine hash goes. */
    uint32_t other = rt_map_get(&ix->ext, pair_key(ext_hash, e->slot));
    if (other != RT_MAP_NONE && other != id && ent(ix, other)->block != RT_NIL &&
        ent(ix, other)->slot == e->slot && ent(ix, other)->ext_hash == ext_hash)
        drop_entry(ix, other);
    e = ent(ix, id);
    e->has_ext = 1;
    e->ext_hash = ext_hash;
    return rt_map_put(&ix->ext, pair_key(ext_hash, e->slot), id);
}

static uint32_t find_ext(const rt_index *ix, uint32_t slot, uint64_t ext_hash);

int rt_index_touch(rt_index *ix, uint32_t slot, uint64_t hash, int has_ext,
                   uint64_t ext_hash)
{
    uint32_t id;
    uint32_t bid = RT_MAP_NONE;
    if (ix->by_ext) {
        id = has_ext ? find_ext(ix, slot, ext_hash) : RT_NIL;
        if (id != RT_NIL && blk(ix, ent(ix, id)->block)->hash != hash) {
            drop_entry(ix, id); /* the engine reused its hash for another block */
            id = RT_NIL;
        }
    } else {
        bid = rt_map_get(&ix->blocks, hash);
        id = bid != RT_MAP_NONE ? find_holder(ix, bid, slot) : RT_NIL;
    }
    if (id != RT_NIL) {
        lru_unlink(ix, id);
        lru_push_front(ix, id);
        return set_ext(ix, id, has_ext, ext_hash);
    }
    if (ix->capacity == 0)
        return 0;
    uint64_t evicted = 0;
    while (ix->lru[slot].count >= ix->capacity) {
        drop_entry(ix, ix->lru[slot].tail);
        ix->evictions++;
        evicted++;
    }
    if (ix->e_free == RT_NIL && grow_entries(ix) != 0)
        return WSEL_ENOMEM;
    /* An eviction may have freed the block itself. */
    if (ix->by_ext || evicted)
        bid = rt_map_get(&ix->blocks, hash);
    if (bid == RT_MAP_NONE) {
        if (ix->b_free == RT_NIL && grow_blocks(ix) != 0)
            return WSEL_ENOMEM;
        bid = ix->b_free;
        if (rt_map_put_new(&ix->blocks, hash, bid) != 0)
            return WSEL_ENOMEM;
        ix->b_free = blk(ix, bid)->first;
        *blk(ix, bid) = (rt_block){hash, RT_NIL, 0};
        ix->nblocks++;
    }
    id = ix->e_free;
    ix->e_free = ent(ix, id)->lru_next;
    rt_block *b = blk(ix, bid);
    rt_entry *e = ent(ix, id);
    *e = (rt_entry){.block = bid, .slot = slot, .blk_prev = RT_NIL, .blk_next = b->first};
    if (b->first != RT_NIL)
        ent(ix, b->first)->blk_prev = id;
    b->first = id;
    b->count++;
    lru_push_front(ix, id);
    ix->entries++;
    return set_ext(ix, id, has_ext, ext_hash);
}

static uint32_t find_ext(const rt_index *ix, uint32_t slot, uint64_t ext_hash)
{
    uint32_t id = rt_map_get(&ix->ext, pair_key(ext_hash, slot));
    if (id == RT_MAP_NONE || ent(ix, id)->block == RT_NIL || ent(ix, id)->slot != slot ||
        !ent(ix, id)->has_ext || ent(ix, id)->ext_hash != ext_hash)
        return RT_NIL;
    return id;
}

uint64_t rt_index_ext_lookup(const rt_index *ix, uint32_t slot, uint64_t ext_hash,
                             int *found)
{
    uint32_t id = find_ext(ix, slot, ext_hash);
    *found = id != RT_NIL;
    return id != RT_NIL ? blk(ix, ent(ix, id)->block)->hash : 0;
}

int rt_index_remove_ext(rt_index *ix, uint32_t slot, uint64_t ext_hash)
{
    uint32_t id = find_ext(ix, slot, ext_hash);
    if (id == RT_NIL)
        return 0;
    drop_entry(ix, id);
    return 1;
}

void rt_index_clear_slot(rt_index *ix, uint32_t slot)
{
    while (ix->lru[slot].head != RT_NIL)
        drop_entry(ix, ix->lru[slot].head);
}

/* Mark in ix->ov_mask, bit j, every slot holding block bids[j], j < w:
 * the w lists walked a step each in turn, so that their cache misses
 * overlap. Returns how many slots it listed in ix->ov_seen. */
static uint32_t mark_holders(const rt_index *ix, const uint32_t *bids, uint32_t w)
{
    uint32_t cur[OV_WINDOW], nseen = 0;
    for (uint32_t j = 0; j < w; j++)
        cur[j] = blk(ix, bids[j])->first;
    for (uint32_t walking = w; walking > 0;) {
        walking = 0;
        for (uint32_t j = 0; j < w; j++) {
            if (cur[j] == RT_NIL)
                continue;
            const rt_entry *e = ent(ix, cur[j]);
            cur[j] = e->blk_next;
            walking += cur[j] != RT_NIL;
            if (ix->ov_mask[e->slot] == 0)
                ix->ov_seen[nseen++] = e->slot;
            ix->ov_mask[e->slot] |= (uint8_t)(1u << j);
        }
    }
    return nseen;
}

/* Blocks are taken OV_WINDOW at a time: a slot whose overlap reached the
 * window's first block advances by the run of window blocks it holds from
 * there (the trailing ones of its mask). A slot's overlap ends where its
 * run does, so the first block no slot advances past ends them all, as a
 * block-by-block walk would stop; the window only walks up to
 * OV_WINDOW - 1 lists past it. */
uint32_t rt_index_overlaps(const rt_index *ix, const uint64_t *hashes, uint32_t n,
                           uint32_t *ov, uint32_t *touched)
{
    uint32_t nt = 0;
    for (uint32_t i0 = 0; i0 < n;) {
        uint32_t bids[OV_WINDOW], w = 0;
        while (w < OV_WINDOW && i0 + w < n &&
               (bids[w] = rt_map_get(&ix->blocks, hashes[i0 + w])) != RT_MAP_NONE)
            w++;
        if (w == 0)
            break;
        uint32_t nseen = mark_holders(ix, bids, w), through = 0;
        for (uint32_t k = 0; k < nseen; k++) {
            uint32_t s = ix->ov_seen[k];
            uint32_t run = (uint32_t)__builtin_ctz(~(uint32_t)ix->ov_mask[s]);
            ix->ov_mask[s] = 0;
            if (ov[s] != i0 || run == 0)
                continue;
            if (i0 == 0)
                touched[nt++] = s;
            ov[s] = i0 + (run < w ? run : w);
            through += run >= w;
        }
        if (through == 0 || w < OV_WINDOW)
            break;
        i0 += w;
    }
    return nt;
}

size_t rt_index_bytes(const rt_index *ix)
{
    return (size_t)ix->e.cap * sizeof(rt_entry) + (size_t)ix->b.cap * sizeof(rt_block) +
           (size_t)ix->num_slots * sizeof(rt_lru) + rt_map_bytes(&ix->blocks) +
           rt_map_bytes(&ix->ext);
}

void rt_index_prefetch(const rt_index *ix, uint32_t slot, const uint64_t *hashes,
                       const uint64_t *ext, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        rt_map_prefetch(&ix->blocks, hashes[i]);
        if (ext)
            rt_map_prefetch(&ix->ext, pair_key(ext[i], slot));
    }
}

void rt_index_prefetch_removal(const rt_index *ix, uint32_t slot, const uint64_t *ext,
                               uint32_t n)
{
    uint32_t ids[RT_INDEX_REMOVALS_AT_ONCE];
    for (uint32_t i0 = 0; i0 < n; i0 += RT_INDEX_REMOVALS_AT_ONCE) {
        const uint32_t m = n - i0 < RT_INDEX_REMOVALS_AT_ONCE ? n - i0
                                                               : RT_INDEX_REMOVALS_AT_ONCE;
        for (uint32_t i = 0; i < m; i++) {
            ids[i] = find_ext(ix, slot, ext[i0 + i]);
            if (ids[i] != RT_NIL)
                __builtin_prefetch(ent(ix, ids[i]));
        }
        for (uint32_t i = 0; i < m; i++) {
            if (ids[i] == RT_NIL)
                continue;
            const rt_entry *e = ent(ix, ids[i]);
            __builtin_prefetch(blk(ix, e->block));
            if (e->lru_prev != RT_NIL)
                __builtin_prefetch(ent(ix, e->lru_prev));
            if (e->lru_next != RT_NIL)
                __builtin_prefetch(ent(ix, e->lru_next));
        }
        for (uint32_t i = 0; i < m; i++)
            if (ids[i] != RT_NIL)
                rt_map_prefetch(&ix->blocks, blk(ix, ent(ix, ids[i])->block)->hash);
    }
}

void rt_index_prefetch_ext(const rt_index *ix, uint32_t slot, const uint64_t *ext,
                           uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        rt_map_prefetch(&ix->ext, pair_key(ext[i], slot));
}
