// SPDX-License-Identifier: Apache-2.0
/*
 * events.c -- vLLM KV event messages (wsel_router.h, "KV events"; the
 * encoding is engine/kv_events.h's): decode a whole batch first, without
 * the router's mutex, re-hashing each stored block's token ids, under the
 * decoder's own mutex, so routes never wait for a decode; then apply it to
 * the index under the router's mutex, handing it to waiting routes between
 * events and every APPLY_CHUNK blocks. The msgpack is unpacked by msgpack-c's
 * parser (mp_unpack.c) into one zone per decoder, cleared after each
 * message, whose first chunk grows to hold the largest message seen, so
 * the steady state allocates nothing; the object tree is walked once, token
 * ids hashed as they are read. Both of vLLM's encodings are read: msgspec
 * structs as named-field maps (vLLM today, and wsel-engine) and as
 * positional arrays tagged with the type (vLLM before pull request 42892).
 */
#include <msgpack.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "mp_unpack.h"
#include "router_internal.h"

enum { EV_STORED = 1, EV_REMOVED = 2, EV_CLEARED = 3 };

/* The zone's first chunk (one msgpack_object, 24 bytes, per element): a
 * batch of 16 blocks of 64 tokens (some 1,100 objects) fits; a larger
 * message takes more chunks once, then the first grows, by doubling, to
 * hold it (zone_fit): a wsel-engine request's batch of 130 blocks and
 * 8,300 token ids takes 256 KiB, kept. */
#define ZONE_CHUNK (64u * 1024u)

typedef struct dec_event {
    int type;
    int has_parent;
    uint64_t parent;
    size_t first; /* index into hashes / locals */
    size_t count;
} dec_event;

typedef struct rt_decoder decoder;
struct rt_decoder {
    dec_event *ev;
    size_t nev, cap_ev;
    uint64_t *hashes; /* the engine's */
    uint64_t *locals; /* XXH3 of each stored block's tokens */
    size_t nh, cap_h;
    uint32_t *tokens; /* one block's ids */
    size_t cap_t;
    int has_rank;
    uint64_t rank;
    uint64_t unknown;  /* events of an unknown type */
    uint64_t *chained; /* one stored event's router hashes */
    size_t cap_c;
    msgpack_zone zone; /* one chunk, cleared after each message */
    int has_zone;
    uint64_t decode_ns; /* the last rt_kv_decode's CPU time */
};

void rt_decoder_free(decoder *d)
{
    if (!d)
        return;
    if (d->has_zone)
        msgpack_zone_destroy(&d->zone);
    free(d->chained);
    free(d->ev);
    free(d->hashes);
    free(d->locals);
    free(d->tokens);
    free(d);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *g = realloc(*p, c * elem);
    if (!g)
        return WSEL_ENOMEM;
    *p = g;
    *cap = c;
    return 0;
}

/* A zone whose first chunk holds `bytes` of objects: unpacking as many
 * never asks for another chunk, and msgpack_zone_clear keeps the first.
 * On failure there is no zone (has_zone 0). */
static int zone_fit(decoder *d, size_t bytes)
{
    if (d->has_zone && bytes <= d->zone.chunk_size)
        return 0;
    size_t c = d->has_zone ? d->zone.chunk_size : ZONE_CHUNK;
    while (c < bytes)
        c *= 2;
    if (d->has_zone)
        msgpack_zone_destroy(&d->zone);
    d->has_zone = msgpack_zone_init(&d->zone, c);
    return d->has_zone ? 0 : WSEL_ENOMEM;
}

#define IS_STR(o, s) is_str(o, s, sizeof(s) - 1)

static int is_str(const msgpack_object *o, const char *s, size_t n)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           memcmp(o->via.str.ptr, s, n) == 0;
}

/* An ExternalBlockHash: an integer (its 64 bits) or bytes (their XXH3). */
static int to_hash(const msgpack_object *o, uint64_t *out)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *out = o->via.u64;
        return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *out = (uint64_t)o->via.i64;
        return 0;
    case MSGPACK_OBJECT_BIN:
        *out =
            XXH3_64bits_withSeed(o->via.bin.ptr, o->via.bin.size, WSEL_ROUTER_HASH_SEED);
        return 0;
    default:
        return -1;
    }
}

/* The fields of one event, however encoded (a later duplicate key wins). */
typedef struct ev_fields {
    const msgpack_object *type, *hashes, *parent, *tokens, *block_size;
} ev_fields;

static int event_fields(const msgpack_object *o, ev_fields *f)
{
    memset(f, 0, sizeof(*f));
    if (o->type == MSGPACK_OBJECT_MAP) {
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object *k = &o->via.map.ptr[i].key;
            const msgpack_object *v = &o->via.map.ptr[i].val;
            if (IS_STR(k, "type"))
                f->type = v;
            else if (IS_STR(k, "block_hashes"))
                f->hashes = v;
            else if (IS_STR(k, "parent_block_hash"))
                f->parent = v;
            else if (IS_STR(k, "token_ids"))
                f->tokens = v;
            else if (IS_STR(k, "block_size"))
                f->block_size = v;
        }
    } else if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 1) {
        const msgpack_object *a = o->via.array.ptr;
        uint32_t n = o->via.array.size;
        f->type = &a[0];
        if (IS_STR(&a[0], "BlockStored") && n >= 5) {
            f->hashes = &a[1];
            f->parent = &a[2];
            f->tokens = &a[3];
            f->block_size = &a[4];
        } else if (IS_STR(&a[0], "BlockRemoved") && n >= 2) {
            f->hashes = &a[1];
        }
    } else {
        return -1;
    }
    return f->type && f->type->type == MSGPACK_OBJECT_STR ? 0 : -1;
}

/* decode_event's and decode_batch's answer when a buffer could not grow:
 * the batch is dropped as out of memory, not counted as a bad shape. */
#define DEC_NOMEM (1 + WSEL_KV_SKIP_REASONS)

/* Decode one event into d; returns 0, a WSEL_KV_SKIP_* reason + 1 for the
 * whole batch, or DEC_NOMEM. */
static int decode_event(decoder *d, const msgpack_object *o, uint32_t block_size)
{
    ev_fields f;
    if (event_fields(o, &f) != 0)
        return 1 + WSEL_KV_SKIP_SHAPE;
    int type = IS_STR(f.type, "BlockStored")        ? EV_STORED
               : IS_STR(f.type, "BlockRemoved")     ? EV_REMOVED
               : IS_STR(f.type, "AllBlocksCleared") ? EV_CLEARED
                                                    : 0;
    if (type == 0) {
        d->unknown++;
        return 0;
    }
    dec_event e = {.type = type, .first = d->nh};
    if (type != EV_CLEARED) {
        if (!f.hashes || f.hashes->type != MSGPACK_OBJECT_ARRAY)
            return 1 + WSEL_KV_SKIP_SHAPE;
        e.count = f.hashes->via.array.size;
    }
    if (type == EV_STORED) {
        if (!f.block_size || f.block_size->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return 1 + WSEL_KV_SKIP_SHAPE;
        if (f.block_size->via.u64 != block_size)
            return 1 + WSEL_KV_SKIP_BLOCK_SIZE;
        if (!f.tokens || f.tokens->type != MSGPACK_OBJECT_ARRAY)
            return 1 + WSEL_KV_SKIP_SHAPE;
        if ((uint64_t)f.tokens->via.array.size != (uint64_t)e.count * block_size)
            return 1 + (f.tokens->via.array.size == 0 ? WSEL_KV_SKIP_TOKENS
                                                      : WSEL_KV_SKIP_SHAPE);
        if (f.parent && f.parent->type != MSGPACK_OBJECT_NIL) {
            if (to_hash(f.parent, &e.parent) != 0)
                return 1 + WSEL_KV_SKIP_SHAPE;
            e.has_parent = 1;
        }
    }
    if (grow((void **)&d->hashes, &d->cap_h, d->nh + e.count, sizeof(uint64_t)) != 0)
        return DEC_NOMEM;
    if (type == EV_STORED) {
        uint64_t *l = realloc(d->locals, d->cap_h * sizeof(uint64_t));
        if (!l)
            return DEC_NOMEM;
        d->locals = l;
        if (grow((void **)&d->tokens, &d->cap_t, block_size, sizeof(uint32_t)) != 0 ||
            grow((void **)&d->chained, &d->cap_c, e.count, sizeof(uint64_t)) != 0)
            return DEC_NOMEM;
    }
    const msgpack_object *h = e.count ? f.hashes->via.array.ptr : NULL;
    const msgpack_object *t =
        type == EV_STORED && e.count ? f.tokens->via.array.ptr : NULL;
    for (size_t i = 0; i < e.count; i++) {
        if (to_hash(&h[i], &d->hashes[d->nh + i]) != 0)
            return 1 + WSEL_KV_SKIP_SHAPE;
        if (type != EV_STORED)
            continue;
        /* This block's token ids, read once and hashed. */
        uint32_t *ids = d->tokens;
        for (uint32_t k = 0; k < block_size; k++, t++) {
            if (t->type != MSGPACK_OBJECT_POSITIVE_INTEGER || t->via.u64 > UINT32_MAX)
                return 1 + WSEL_KV_SKIP_SHAPE;
            ids[k] = (uint32_t)t->via.u64;
        }
        d->locals[d->nh + i] = rt_hash_local_tokens(ids, block_size);
    }
    d->nh += e.count;
    if (grow((void **)&d->ev, &d->cap_ev, d->nev + 1, sizeof(*d->ev)) != 0)
        return DEC_NOMEM;
    d->ev[d->nev++] = e;
    return 0;
}

/* Decode a KVEventBatch; 0, a WSEL_KV_SKIP_* reason + 1 or DEC_NOMEM. A
 * bad rank is reported before a bad event. */
static int decode_batch(decoder *d, const msgpack_object *o, uint32_t block_size)
{
    const msgpack_object *events = NULL, *rank = NULL;
    if (o->type == MSGPACK_OBJECT_MAP) {
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object *k = &o->via.map.ptr[i].key;
            if (IS_STR(k, "events"))
                events = &o->via.map.ptr[i].val;
            else if (IS_STR(k, "data_parallel_rank"))
                rank = &o->via.map.ptr[i].val;
        }
    } else if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 2) {
        events = &o->via.array.ptr[1];
        if (o->via.array.size >= 3)
            rank = &o->via.array.ptr[2];
    }
    if (!events || events->type != MSGPACK_OBJECT_ARRAY)
        return 1 + WSEL_KV_SKIP_SHAPE;
    if (rank && rank->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        d->has_rank = 1;
        d->rank = rank->via.u64;
    } else if (rank && rank->type != MSGPACK_OBJECT_NIL) {
        return 1 + WSEL_KV_SKIP_SHAPE;
    }
    for (uint32_t i = 0; i < events->via.array.size; i++) {
        int rc = decode_event(d, &events->via.array.ptr[i], block_size);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/*
 * Let waiting routes (and first tokens, finishes) take the mutex, then
 * take it back. Returns 0 when slot s is still the rank it was (gen), -1
 * when a topology change freed it meanwhile (the rest of the batch is
 * dropped). Safe mid-batch: in event mode a route reads the index but
 * never writes it.
 */
static int yield_to_requests(wsel_router *r, uint32_t s, uint32_t gen)
{
    if (atomic_load_explicit(&r->waiting, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_unlock(&r->mu);
    /* Until they have it: then queue behind them. Bounded by their count. */
    for (int spins = 0;
         atomic_load_explicit(&r->waiting, memory_order_relaxed) != 0 && spins < 1000;
         spins++)
        sched_yield();
    pthread_mutex_lock(&r->mu);
    return r->slots[s].worker != RT_NIL && r->slots[s].gen == gen ? 0 : -1;
}

/* Blocks applied between two looks at waiting requests. */
#define APPLY_CHUNK 32u

/* The batch's removals after their map slots: gathered across its events
 * (vLLM's are one block each), so each stage of the prefetch covers many. */
static void prefetch_removals(const rt_index *ix, uint32_t s, const decoder *d)
{
    uint64_t rm[RT_INDEX_REMOVALS_AT_ONCE];
    uint32_t n = 0;
    for (size_t i = 0; i < d->nev; i++) {
        if (d->ev[i].type != EV_REMOVED)
            continue;
        for (size_t k = 0; k < d->ev[i].count; k++) {
            rm[n++] = d->hashes[d->ev[i].first + k];
            if (n == RT_INDEX_REMOVALS_AT_ONCE) {
                rt_index_prefetch_removal(ix, s, rm, n);
                n = 0;
            }
        }
    }
    rt_index_prefetch_removal(ix, s, rm, n);
}

/* Apply a decoded batch to slot s (under the lock, which it may hand to
 * waiting requests between chunks). */
static void apply(wsel_router *r, uint32_t s, const decoder *d)
{
    const uint32_t gen = r->slots[s].gen;
    /* Every removal's lookup started at once: vLLM sends one BlockRemoved
     * per evicted block, so a batch holds many one-block events. Then
     * what the removals read next, in stages, so that their cache misses
     * overlap instead of following one another. */
    for (size_t i = 0; i < d->nev; i++)
        if (d->ev[i].type == EV_REMOVED)
            rt_index_prefetch_ext(&r->ix, s, d->hashes + d->ev[i].first,
                                  (uint32_t)d->ev[i].count);
    prefetch_removals(&r->ix, s, d);
    for (size_t i = 0; i < d->nev; i++) {
        const dec_event *e = &d->ev[i];
        if (i > 0 && yield_to_requests(r, s, gen) != 0)
            return;
        if (e->type == EV_CLEARED) {
            rt_index_clear_slot(&r->ix, s);
            r->c.kv_cleared++;
            continue;
        }
        if (e->type == EV_REMOVED) {
            for (size_t k = 0; k < e->count; k++)
                r->c.kv_blocks_removed +=
                    (uint64_t)rt_index_remove_ext(&r->ix, s, d->hashes[e->first + k]);
            continue;
        }
        uint64_t parent = 0;
        if (e->has_parent) {
            int found = 0;
            parent = rt_index_ext_lookup(&r->ix, s, e->parent, &found);
            if (!found) {
                r->c.kv_skipped[WSEL_KV_SKIP_PARENT]++;
                continue;
            }
        }
        int has_parent = e->has_parent;
        uint64_t *h = d->chained;
        for (size_t k = 0; k < e->count; k++) {
            h[k] = rt_hash_chain(parent, d->locals[e->first + k], has_parent);
            parent = h[k];
            has_parent = 1;
        }
        /* Deepest slice first, each deepest block first, as history
         * records a prompt: the prefix head ends most recent, so the
         * per-rank LRU evicts a prefix from its tail (a batch beyond the
         * capacity keeps its head, not blocks no request can reach). */
        const size_t slices = (e->count + APPLY_CHUNK - 1) / APPLY_CHUNK;
        for (size_t c = slices; c-- > 0;) {
            const size_t k0 = c * APPLY_CHUNK;
            const size_t k1 = e->count - k0 < APPLY_CHUNK ? e->count : k0 + APPLY_CHUNK;
            if (c + 1 < slices && yield_to_requests(r, s, gen) != 0)
                return;
            rt_index_prefetch(&r->ix, s, h + k0, d->hashes + e->first + k0,
                              (uint32_t)(k1 - k0));
            for (size_t k = k1; k-- > k0;) {
                if (rt_index_touch(&r->ix, s, h[k], 1, d->hashes[e->first + k]) != 0)
                    return;
                r->c.kv_blocks_stored++;
            }
        }
    }
}

/* Unpack and decode the message into d; -1 or a WSEL_KV_SKIP_* reason;
 * *nomem set when memory ran out. */
static int decode_message(decoder *d, const unsigned char *msg, size_t len,
                          uint32_t block_size, uint32_t dp_rank, int *nomem)
{
    if (zone_fit(d, ZONE_CHUNK) != 0) {
        *nomem = 1;
        return -1;
    }
    msgpack_object obj;
    size_t objects = 0;
    int reason = -1;
    int rc = rt_mp_unpack(msg, len, &d->zone, &obj, &objects);
    if (rc == RT_MP_NOMEM) {
        *nomem = 1;
    } else if (rc != 0) {
        reason = WSEL_KV_SKIP_MSGPACK;
    } else {
        rc = decode_batch(d, &obj, block_size);
        if (rc == DEC_NOMEM)
            *nomem = 1;
        else if (rc != 0)
            reason = rc - 1;
        else if (d->has_rank && d->rank != dp_rank)
            reason = WSEL_KV_SKIP_RANK;
    }
    /* The decoded batch holds no pointer into the zone: clear it now, and
     * give it a first chunk that holds this message's objects (a failure
     * leaves no zone, made again at the next message). */
    msgpack_zone_clear(&d->zone);
    (void)zone_fit(d, objects * sizeof(msgpack_object));
    return reason;
}

/* rt_kv_decode's answers: -1 decoded, a reason >= 0, or WSEL_ENOMEM. */
_Static_assert(WSEL_ENOMEM < -1, "WSEL_ENOMEM must not read as decoded (-1)");

/* The calling thread's CPU time, nanoseconds. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

decoder *rt_decoder_new(void)
{
    return calloc(1, sizeof(decoder));
}

static int decode_frames(const wsel_router *r, decoder *d, uint32_t dp_rank,
                         const void *const *frames, const size_t *sizes,
                         uint32_t num_frames, uint64_t *seq)
{
    *seq = 0;
    d->nev = d->nh = 0;
    d->has_rank = 0;
    d->unknown = 0;
    if (!frames || !sizes || num_frames != 3 || !frames[1] || sizes[1] != 8 ||
        (!frames[2] && sizes[2]))
        return WSEL_KV_SKIP_FRAMES;
    const unsigned char *sb = frames[1];
    for (int i = 0; i < 8; i++)
        *seq = *seq << 8 | sb[i];
    int nomem = 0;
    int reason =
        decode_message(d, frames[2], sizes[2], r->opt.block_size, dp_rank, &nomem);
    return nomem ? WSEL_ENOMEM : reason;
}

int rt_kv_decode(const wsel_router *r, decoder *d, uint32_t dp_rank,
                 const void *const *frames, const size_t *sizes, uint32_t num_frames,
                 uint64_t *seq)
{
    uint64_t t0 = thread_cpu_ns();
    int rc = decode_frames(r, d, dp_rank, frames, sizes, num_frames, seq);
    d->decode_ns = thread_cpu_ns() - t0;
    return rc;
}

int32_t rt_kv_commit(wsel_router *r, const decoder *d, uint64_t worker_id,
                     uint32_t dp_rank, uint64_t seq, int reason, uint32_t want_slot,
                     uint32_t want_gen)
{
    int32_t ret = 0, renumbered = 0;
    uint64_t last = 0;
    pthread_mutex_lock(&r->mu);
    r->kv_cpu_messages++;
    r->kv_decode_ns += d->decode_ns;
    uint32_t s = rt_slot_of(r, worker_id, dp_rank);
    if (want_slot != RT_NIL && s != RT_NIL &&
        (s != want_slot || r->slots[s].gen != want_gen))
        s = RT_NIL; /* received for an incarnation of the worker that is gone */
    if (reason < 0 && s == RT_NIL)
        reason = WSEL_KV_SKIP_RANK;
    if (reason >= 0) {
        r->c.kv_skipped[reason]++;
        ret = reason == WSEL_KV_SKIP_RANK ? WSEL_ENOENT : WSEL_EINVAL;
    } else {
        rt_slot *sl = &r->slots[s];
        if (sl->has_seq && seq <= sl->last_seq) {
            /* Numbered from 0 again: a new publisher, so a restarted
             * engine (vLLM numbers each process's batches from 0) whose
             * cache started empty; what the old one held is gone. */
            rt_index_clear_slot(&r->ix, s);
            r->c.kv_cleared++;
            renumbered = 1;
            last = sl->last_seq;
        } else if (sl->has_seq && seq > sl->last_seq + 1) {
            r->c.kv_seq_gaps += seq - sl->last_seq - 1;
        }
        sl->last_seq = seq;
        sl->has_seq = 1;
        uint64_t t0 = thread_cpu_ns();
        apply(r, s, d);
        r->kv_apply_ns += thread_cpu_ns() - t0;
        r->c.kv_skipped[WSEL_KV_SKIP_UNKNOWN_TYPE] += d->unknown;
        r->c.kv_messages++;
    }
    pthread_mutex_unlock(&r->mu);
    if (renumbered)
        rt_log(r, WSEL_LOG_INFO, "KV events of worker %llu rank %u: batch %llu after %llu: "
               "numbered again, a new publisher, rank cleared", (unsigned long long)worker_id,
               dp_rank, (unsigned long long)seq, (unsigned long long)last);
    return ret;
}

int32_t wsel_router_apply_kv_message(wsel_router *r, uint64_t worker_id, uint32_t dp_rank,
                                     const void *const *frames, const size_t *sizes,
                                     uint32_t num_frames)
{
    if (!r)
        return WSEL_EINVAL;
    pthread_mutex_lock(&r->dec_mu);
    if (!r->dec && !(r->dec = rt_decoder_new())) {
        pthread_mutex_unlock(&r->dec_mu);
        return WSEL_ENOMEM;
    }
    uint64_t seq;
    int reason = rt_kv_decode(r, r->dec, dp_rank, frames, sizes, num_frames, &seq);
    int32_t ret = reason == WSEL_ENOMEM ? WSEL_ENOMEM
                                        : rt_kv_commit(r, r->dec, worker_id, dp_rank, seq,
                                                       reason, RT_NIL, 0);
    pthread_mutex_unlock(&r->dec_mu);
    return ret;
}
