// SPDX-License-Identifier: Apache-2.0
/*
 * events.c -- vLLM KV event messages (wsel_router.h, "KV events"; the
 * encoding is engine/kv_events.h's): decode a whole batch first, without
 * anything, re-hashing each stored block's token ids, under the decoder's
 * own mutex, so routes never wait for a decode; then apply it to the index
 * under the router's mutex, handing it to waiting routes between events
 * and every APPLY_CHUNK blocks. The msgpack is read in place (mp_reader.h:
 * no object per element, nothing allocated but the decoder's buffers,
 * reused from one message to the next). Both of vLLM's encodings are read: msgspec
 * structs as named-field maps (vLLM today, and wsel-engine) and as positional arrays
 * tagged with the type (vLLM before pull request 42892).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "mp_reader.h"
#include "router_internal.h"

enum { EV_STORED = 1, EV_REMOVED = 2, EV_CLEARED = 3 };

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
    uint32_t *tokens; /* one event's token ids, read with its fields */
    size_t cap_t;
    int has_rank;
    uint64_t rank;
    uint64_t unknown;  /* events of an unknown type */
    uint64_t *chained; /* one stored event's router hashes */
    size_t cap_c;
};

void rt_decoder_free(decoder *d)
{
    if (!d)
        return;
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

/* An ExternalBlockHash: an integer (its 64 bits) or bytes (their XXH3). */
static int to_hash(mp_cursor *c, uint64_t *out)
{
    switch (mp_peek(c)) {
    case MP_UINT:
    case MP_NINT:
        return mp_int(c, out);
    case MP_BIN: {
        const unsigned char *b;
        uint32_t n;
        if (mp_bytes(c, MP_BIN, &b, &n) != 0)
            return -1;
        *out = XXH3_64bits_withSeed(b, n, WSEL_ROUTER_HASH_SEED);
        return 0;
    }
    default:
        return -1;
    }
}

/* Where the fields of one event start (NULL: absent), however encoded;
 * a later duplicate key wins, as it did with msgpack-c's objects. The
 * token ids are read into d->tokens as the fields are found (one pass over
 * them): ntok of them, tokens_ok 0 when one is not an integer below 2^32. */
typedef struct ev_fields {
    const unsigned char *type, *hashes, *parent, *tokens, *block_size;
    uint32_t ntok;
    int tokens_ok;
} ev_fields;

#define KEY(c, s) mp_is_str(c, s, sizeof(s) - 1)

/* An array of token ids at the cursor into d->tokens (the cursor moved
 * past it). -1 only when the bytes are not msgpack (or memory ran out). */
static int read_tokens(decoder *d, mp_cursor *c, ev_fields *f)
{
    f->tokens = c->p;
    f->ntok = 0;
    f->tokens_ok = 0;
    uint32_t n;
    if (mp_peek(c) != MP_ARRAY)
        return mp_skip(c);
    if (mp_container(c, MP_ARRAY, &n) != 0 ||
        grow((void **)&d->tokens, &d->cap_t, n, sizeof(uint32_t)) != 0)
        return -1;
    f->ntok = n;
    f->tokens_ok = 1;
    uint32_t *t = d->tokens;
    for (uint32_t i = 0; i < n; i++) {
        if (c->p >= c->e)
            return -1;
        unsigned b = *c->p;
        if (b <= 0x7f) { /* positive fixint */
            t[i] = b;
            c->p++;
            continue;
        }
        if (b == 0xcd && c->e - c->p >= 3) { /* uint16: most vocabularies */
            t[i] = (uint32_t)c->p[1] << 8 | c->p[2];
            c->p += 3;
            continue;
        }
        uint64_t v;
        if (mp_peek(c) == MP_UINT && mp_int(c, &v) == 0 && v <= UINT32_MAX) {
            t[i] = (uint32_t)v;
            continue;
        }
        f->tokens_ok = 0;
        if (mp_skip(c) != 0)
            return -1;
    }
    return 0;
}

static int event_fields(decoder *d, mp_cursor *c, ev_fields *f)
{
    memset(f, 0, sizeof(*f));
    uint32_t n;
    if (mp_peek(c) == MP_MAP) {
        if (mp_container(c, MP_MAP, &n) != 0)
            return -1;
        for (uint32_t i = 0; i < n; i++) {
            const unsigned char **slot = NULL;
            int tokens = 0;
            if (KEY(c, "type"))
                slot = &f->type;
            else if (KEY(c, "block_hashes"))
                slot = &f->hashes;
            else if (KEY(c, "parent_block_hash"))
                slot = &f->parent;
            else if (KEY(c, "token_ids"))
                tokens = 1;
            else if (KEY(c, "block_size"))
                slot = &f->block_size;
            if (mp_skip(c) != 0)
                return -1;
            if (tokens) {
                if (read_tokens(d, c, f) != 0)
                    return -1;
                continue;
            }
            if (slot)
                *slot = c->p;
            if (mp_skip(c) != 0)
                return -1;
        }
    } else if (mp_peek(c) == MP_ARRAY) {
        if (mp_container(c, MP_ARRAY, &n) != 0 || n < 1)
            return -1;
        const unsigned char *a[5] = {0};
        int stored = KEY(c, "BlockStored") && n >= 5;
        for (uint32_t i = 0; i < n; i++) {
            if (i < 5)
                a[i] = c->p;
            if (i == 3 && stored) {
                if (read_tokens(d, c, f) != 0)
                    return -1;
                continue;
            }
            if (mp_skip(c) != 0)
                return -1;
        }
        mp_cursor t = {a[0], c->e};
        f->type = a[0];
        if (stored) {
            f->hashes = a[1];
            f->parent = a[2];
            f->block_size = a[4];
        } else if (KEY(&t, "BlockRemoved") && n >= 2) {
            f->hashes = a[1];
        }
    } else {
        return -1;
    }
    if (!f->type)
        return -1;
    mp_cursor t = {f->type, c->e};
    return mp_peek(&t) == MP_STR ? 0 : -1;
}

/* Decode one event (the cursor at it, moved past it) into d; returns 0
 * or a WSEL_KV_SKIP_* reason + 1 for the whole batch. */
static int decode_event(decoder *d, mp_cursor *c, uint32_t block_size)
{
    ev_fields f;
    if (event_fields(d, c, &f) != 0)
        return 1 + WSEL_KV_SKIP_SHAPE;
    const unsigned char *end = c->e;
    mp_cursor ty = {f.type, end};
    int type = KEY(&ty, "BlockStored")        ? EV_STORED
               : KEY(&ty, "BlockRemoved")     ? EV_REMOVED
               : KEY(&ty, "AllBlocksCleared") ? EV_CLEARED
                                              : 0;
    if (type == 0) {
        d->unknown++;
        return 0;
    }
    dec_event e = {.type = type, .first = d->nh};
    mp_cursor hc = {f.hashes, end}, tc = {f.tokens, end};
    uint32_t n = 0;
    if (type != EV_CLEARED) {
        if (!f.hashes || mp_container(&hc, MP_ARRAY, &n) != 0)
            return 1 + WSEL_KV_SKIP_SHAPE;
        e.count = n;
    }
    if (type == EV_STORED) {
        mp_cursor bc = {f.block_size, end};
        uint64_t bs;
        if (!f.block_size || mp_peek(&bc) != MP_UINT || mp_int(&bc, &bs) != 0)
            return 1 + WSEL_KV_SKIP_SHAPE;
        if (bs != block_size)
            return 1 + WSEL_KV_SKIP_BLOCK_SIZE;
        if (!f.tokens || mp_peek(&tc) != MP_ARRAY)
            return 1 + WSEL_KV_SKIP_SHAPE;
        if ((uint64_t)f.ntok != (uint64_t)e.count * block_size)
            return 1 + (f.ntok == 0 ? WSEL_KV_SKIP_TOKENS : WSEL_KV_SKIP_SHAPE);
        mp_cursor pc = {f.parent, end};
        if (f.parent && mp_peek(&pc) != MP_NIL) {
            if (to_hash(&pc, &e.parent) != 0)
                return 1 + WSEL_KV_SKIP_SHAPE;
            e.has_parent = 1;
        }
    }
    if (grow((void **)&d->hashes, &d->cap_h, d->nh + e.count, sizeof(uint64_t)) != 0)
        return 1 + WSEL_KV_SKIP_SHAPE;
    size_t cap_l = d->cap_h;
    if (type == EV_STORED) {
        uint64_t *l = realloc(d->locals, cap_l * sizeof(uint64_t));
        if (!l)
            return 1 + WSEL_KV_SKIP_SHAPE;
        d->locals = l;
    }
    for (size_t i = 0; i < e.count; i++)
        if (to_hash(&hc, &d->hashes[d->nh + i]) != 0)
            return 1 + WSEL_KV_SKIP_SHAPE;
    if (type == EV_STORED) {
        if (!f.tokens_ok)
            return 1 + WSEL_KV_SKIP_SHAPE;
        for (size_t i = 0; i < e.count; i++)
            d->locals[d->nh + i] =
                rt_hash_local_tokens(d->tokens + i * block_size, block_size);
    }
    d->nh += e.count;
    if (grow((void **)&d->ev, &d->cap_ev, d->nev + 1, sizeof(*d->ev)) != 0 ||
        (type == EV_STORED &&
         grow((void **)&d->chained, &d->cap_c, e.count, sizeof(uint64_t)) != 0))
        return 1 + WSEL_KV_SKIP_SHAPE;
    d->ev[d->nev++] = e;
    return 0;
}

/* The events array at the cursor into d (replacing what d held: a later
 * duplicate "events" key wins); the cursor past it on success. 0 or a
 * WSEL_KV_SKIP_* reason + 1. */
static int decode_events(decoder *d, mp_cursor *c, uint32_t block_size)
{
    uint32_t nev;
    d->nev = d->nh = 0;
    d->unknown = 0;
    if (mp_container(c, MP_ARRAY, &nev) != 0)
        return 1 + WSEL_KV_SKIP_SHAPE;
    for (uint32_t i = 0; i < nev; i++) {
        int rc = decode_event(d, c, block_size);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Decode the events where they stand (their token ids are read once);
 * the cursor past them whether they decoded or not. */
static int decode_events_at(decoder *d, mp_cursor *c, uint32_t block_size)
{
    mp_cursor ec = *c;
    int rc = decode_events(d, &ec, block_size);
    if (rc == 0)
        *c = ec;
    else if (mp_skip(c) != 0)
        return -1;
    return rc;
}

/* Decode a KVEventBatch (the whole message at the cursor); 0 or a
 * WSEL_KV_SKIP_* reason + 1. A bad rank is reported before a bad event. */
static int decode_batch(decoder *d, mp_cursor *c, uint32_t block_size)
{
    const unsigned char *rank = NULL;
    int ev_rc = -1; /* -1: no events */
    uint32_t n;
    if (mp_peek(c) == MP_MAP) {
        if (mp_container(c, MP_MAP, &n) != 0)
            return 1 + WSEL_KV_SKIP_SHAPE;
        for (uint32_t i = 0; i < n; i++) {
            int is_events = KEY(c, "events"), is_rank = KEY(c, "data_parallel_rank");
            if (mp_skip(c) != 0)
                return 1 + WSEL_KV_SKIP_SHAPE;
            if (is_events) {
                if ((ev_rc = decode_events_at(d, c, block_size)) < 0)
                    return 1 + WSEL_KV_SKIP_SHAPE;
                continue;
            }
            if (is_rank)
                rank = c->p;
            if (mp_skip(c) != 0)
                return 1 + WSEL_KV_SKIP_SHAPE;
        }
    } else if (mp_peek(c) == MP_ARRAY) {
        if (mp_container(c, MP_ARRAY, &n) != 0)
            return 1 + WSEL_KV_SKIP_SHAPE;
        for (uint32_t i = 0; i < n; i++) {
            if (i == 1) {
                if ((ev_rc = decode_events_at(d, c, block_size)) < 0)
                    return 1 + WSEL_KV_SKIP_SHAPE;
                continue;
            }
            if (i == 2)
                rank = c->p;
            if (mp_skip(c) != 0)
                return 1 + WSEL_KV_SKIP_SHAPE;
        }
    }
    if (ev_rc < 0)
        return 1 + WSEL_KV_SKIP_SHAPE;
    if (rank) {
        mp_cursor rc = {rank, c->e};
        uint64_t v;
        if (mp_peek(&rc) == MP_UINT && mp_int(&rc, &v) == 0) {
            d->has_rank = 1;
            d->rank = v;
        } else if (mp_peek(&rc) != MP_NIL) {
            return 1 + WSEL_KV_SKIP_SHAPE;
        }
    }
    return ev_rc;
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

/* Apply a decoded batch to slot s (under the lock, which it may hand to
 * waiting requests between chunks). */
static void apply(wsel_router *r, uint32_t s, const decoder *d)
{
    const uint32_t gen = r->slots[s].gen;
    /* Every removal's lookup started at once: vLLM sends one BlockRemoved
     * per evicted block, so a batch holds many one-block events. */
    for (size_t i = 0; i < d->nev; i++)
        if (d->ev[i].type == EV_REMOVED)
            rt_index_prefetch_ext(&r->ix, s, d->hashes + d->ev[i].first,
                                  (uint32_t)d->ev[i].count);
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
        for (size_t k0 = 0; k0 < e->count; k0 += APPLY_CHUNK) {
            size_t k1 = e->count - k0 < APPLY_CHUNK ? e->count : k0 + APPLY_CHUNK;
            if (k0 > 0 && yield_to_requests(r, s, gen) != 0)
                return;
            rt_index_prefetch(&r->ix, s, h + k0, d->hashes + e->first + k0,
                              (uint32_t)(k1 - k0));
            for (size_t k = k0; k < k1; k++) {
                if (rt_index_touch(&r->ix, s, h[k], 1, d->hashes[e->first + k]) != 0)
                    return;
                r->c.kv_blocks_stored++;
            }
        }
    }
}

/* Big-endian unsigned of n bytes at p. */
static uint64_t be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/*
 * The message is one msgpack object, every declared count and length
 * within the bytes that follow (every element takes at least one): one
 * pass over the headers (no recursion, nothing allocated) before the
 * decoder reads anything, so a bad message is counted as bad msgpack
 * whatever its shape, and a 5-byte array32 header claiming 2^32 elements
 * is refused before anything is sized from it. Returns 1 when `len` bytes
 * hold exactly one object.
 */
static int msgpack_sizes_fit(const unsigned char *b, size_t len)
{
    /* Header length after the type byte, by type 0xc0..0xdf (-1: invalid);
     * what follows it is decided below. */
    static const signed char extra[32] = {
        0, -1, 0, 0, 1, 2, 4, 2, 3, 5, 4, 8, 1, 2, 4, 8, /* c0..cf */
        1, 2,  4, 8, 1, 1, 1, 1, 1, 1, 2, 4, 2, 4, 2, 4, /* d0..df */
    };
    uint64_t pending = 1; /* objects still to read */
    size_t pos = 0;
    while (pending > 0) {
        if (pos >= len)
            return 0;
        unsigned t = b[pos++];
        pending--;
        uint64_t items = 0, payload = 0;
        if (t <= 0x7f || t >= 0xe0) {
            continue;
        } else if (t >= 0xcc && t <= 0xcf) { /* uint 8..64: token ids, hashes */
            size_t k = (size_t)1 << (t - 0xcc);
            if (k > len - pos)
                return 0;
            pos += k;
            continue;
        } else if (t <= 0x8f) {
            items = 2u * (t & 0x0f);
        } else if (t <= 0x9f) {
            items = t & 0x0f;
        } else if (t <= 0xbf) {
            payload = t & 0x1f;
        } else {
            int n = extra[t - 0xc0];
            if (n < 0 || (size_t)n > len - pos)
                return 0;
            const unsigned char *h = b + pos;
            pos += (size_t)n;
            switch (t) {
            case 0xc4:
            case 0xc5:
            case 0xc6: /* bin */
            case 0xd9:
            case 0xda:
            case 0xdb: /* str */
                payload = be(h, n);
                break;
            case 0xc7:
            case 0xc8:
            case 0xc9: /* ext: length, then type */
                payload = be(h, n - 1);
                break;
            case 0xd4:
            case 0xd5:
            case 0xd6:
            case 0xd7:
            case 0xd8: /* fixext */
                payload = 1u << (t - 0xd4);
                break;
            case 0xdc:
            case 0xdd: /* array */
                items = be(h, n);
                break;
            case 0xde:
            case 0xdf: /* map */
                items = 2u * be(h, n);
                break;
            default: /* nil, bool, numbers: the header is all */
                break;
            }
        }
        if (payload > len - pos || items > len - pos)
            return 0;
        pos += (size_t)payload;
        pending += items;
    }
    return pos == len; /* one object, nothing after it */
}

static int32_t skip(wsel_router *r, int reason)
{
    pthread_mutex_lock(&r->mu);
    r->c.kv_skipped[reason]++;
    pthread_mutex_unlock(&r->mu);
    return reason == WSEL_KV_SKIP_RANK ? WSEL_ENOENT : WSEL_EINVAL;
}

int32_t wsel_router_apply_kv_message(wsel_router *r, uint64_t worker_id, uint32_t dp_rank,
                                     const void *const *frames, const size_t *sizes,
                                     uint32_t num_frames)
{
    if (!r)
        return WSEL_EINVAL;
    if (!frames || !sizes || num_frames != 3 || !frames[1] || sizes[1] != 8 ||
        (!frames[2] && sizes[2]))
        return skip(r, WSEL_KV_SKIP_FRAMES);
    const unsigned char *sb = frames[1];
    uint64_t seq = 0;
    for (int i = 0; i < 8; i++)
        seq = seq << 8 | sb[i];

    int32_t ret = 0;
    int reason = -1;
    pthread_mutex_lock(&r->dec_mu);
    decoder *d = r->dec;
    if (!d) {
        d = r->dec = calloc(1, sizeof(*d));
        if (!d) {
            pthread_mutex_unlock(&r->dec_mu);
            return WSEL_ENOMEM;
        }
    }
    d->nev = d->nh = 0;
    d->has_rank = 0;
    d->unknown = 0;
    if (sizes[2] == 0 || !msgpack_sizes_fit(frames[2], sizes[2]))
        reason = WSEL_KV_SKIP_MSGPACK;
    else {
        const unsigned char *msg = frames[2];
        mp_cursor c = {msg, msg + sizes[2]};
        int rc = decode_batch(d, &c, r->opt.block_size);
        if (rc != 0)
            reason = rc - 1;
        else if (d->has_rank && d->rank != dp_rank)
            reason = WSEL_KV_SKIP_RANK;
    }
    pthread_mutex_lock(&r->mu);
    uint32_t s = rt_slot_of(r, worker_id, dp_rank);
    if (reason < 0 && s == RT_NIL)
        reason = WSEL_KV_SKIP_RANK;
    if (reason >= 0) {
        r->c.kv_skipped[reason]++;
        ret = reason == WSEL_KV_SKIP_RANK ? WSEL_ENOENT : WSEL_EINVAL;
    } else {
        rt_slot *sl = &r->slots[s];
        if (sl->has_seq && seq > sl->last_seq + 1)
            r->c.kv_seq_gaps += seq - sl->last_seq - 1;
        sl->last_seq = seq;
        sl->has_seq = 1;
        apply(r, s, d);
        r->c.kv_skipped[WSEL_KV_SKIP_UNKNOWN_TYPE] += d->unknown;
        r->c.kv_messages++;
    }
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_unlock(&r->dec_mu);
    return ret;
}
