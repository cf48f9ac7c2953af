// SPDX-License-Identifier: Apache-2.0
/*
 * router_internal.h -- libwsel-router's state, shared by its files (private).
 *
 * One mutex guards everything below. Rank slots are stable ids (a worker's
 * ranks keep their slots until it is removed); `rows` lists the live slots
 * in canonical order and is rebuilt on every topology change. A request in
 * flight remembers its slot and the slot's generation, so a finish that
 * arrives after its worker was removed is recognised and ignored.
 */
#ifndef WSEL_ROUTER_INTERNAL_H
#define WSEL_ROUTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "kv_index.h"
#include "wsel_router.h"

#define RT_MAX_DP 64u

typedef struct rt_slot {
    uint32_t worker; /* index into workers; RT_NIL = free */
    uint32_t rank;
    uint32_t gen; /* +1 each time the slot is freed */
    uint32_t has_seq;
    uint64_t last_seq; /* last KV batch sequence number seen */
} rt_slot;

/* A rank slot's own load (requests routed and not finished), apart from
 * rt_slot so that a route's pass over every row reads 24 bytes a row. */
typedef struct rt_load {
    uint64_t active_prefill_tokens;
    uint64_t active_blocks;
    uint32_t active_requests;
    uint32_t pad;
} rt_load;

typedef struct rt_worker {
    uint64_t id;
    uint32_t in_use;
    uint32_t draining;
    uint32_t unavailable; /* wsel_router_set_worker_available */
    uint32_t dp_size;
    uint32_t slots[RT_MAX_DP];
    char address[256];
    char **kv_endpoints; /* dp_size strings or NULL */
} rt_worker;

typedef struct rt_req {
    uint64_t id;
    uint64_t prefill;
    uint64_t blocks;
    uint64_t t_route, t_first; /* router clock, us; t_first 0 = not yet */
    uint32_t isl;
    uint32_t cached; /* overlap x block size, capped at isl */
    uint32_t slot, gen;
    uint32_t prefilling;
    uint32_t next_free;
} rt_req;

/* The candidate table's columns (table.c). */
typedef struct rt_table {
    wsel_table t; /* what the host and the plugin see */
    void *storage;
    uint64_t *worker_id, *prefill, *decode, *kvcap;
    double *cost;
    uint32_t *dp_rank, *overlap, *active, *gfirst, *gcount;
    uint32_t *slot;      /* row -> rank slot */
    uint32_t *row_of;    /* rank slot -> row, RT_NIL when not live */
    uint32_t *ov_rows;   /* rows whose overlap column is nonzero */
    uint32_t ov_nrows;
    uint8_t *flags;      /* as the route sees them */
    uint8_t *base_flags; /* WSEL_ROW_EXCLUDED of a draining or unavailable worker */
    uint32_t num_groups;
    uint32_t rows_are_slots; /* row i is slot i for every row */
    /* 1 while the active and flags columns hold every row's load: kept by
     * rt_table_note_load, not rewritten by a route (never with sync). */
    uint32_t load_cols;
    uint64_t epoch; /* of the static columns; 0 = never written */
} rt_table;

typedef struct rt_kvsub rt_kvsub;
struct rt_decoder;
struct rt_sync;
struct rt_hist;

struct wsel_router {
    pthread_mutex_t mu;
    /* Routes, first tokens and finishes waiting for mu: a KV batch being
     * applied hands mu over to them between events (events.c). */
    atomic_uint waiting;
    /* Guards dec: a KV message is decoded under dec_mu only, then applied
     * under mu (lock order: dec_mu, then mu). */
    pthread_mutex_t dec_mu;
    wsel_router_options opt;
    rt_worker *workers; /* max_rows of them */
    rt_map worker_ids;  /* worker id -> index */
    rt_slot *slots;     /* max_rows */
    rt_load *load;      /* max_rows, by slot; zeroed when a slot is taken or freed */
    uint32_t *rows;     /* live slots, canonical order */
    uint32_t num_rows;
    uint64_t epoch;
    rt_index ix;
    rt_map reqs; /* request id -> index into req */
    rt_seg req; /* rt_req, by index; grows by segments, never moved */
    uint32_t req_free;
    uint64_t next_request_id;
    /* Per-route scratch (under the mutex). */
    uint64_t *hashes; /* max_prompt_blocks */
    /* A history record a route deferred (WSEL_ROUTE_DEFER_HISTORY): its
     * blocks, for slot pend_slot of generation pend_gen. pend_n 0 = none. */
    uint64_t *pend_hashes; /* max_prompt_blocks */
    uint32_t pend_n, pend_slot, pend_gen;
    /* Per slot: the last overlaps computed (rt_overlaps), zero except at
     * the ov_n slots listed in ov_slots. */
    uint32_t *ov, *ov_slots;
    uint32_t ov_n;
    rt_table table;
    wsel_router_counters c;
    /* KV events' CPU time (wsel_router_read_kv_cpu), under mu. */
    uint64_t kv_cpu_messages, kv_decode_ns, kv_apply_ns;
    rt_kvsub *kvsub;
    struct rt_decoder *dec; /* KV messages are decoded under the mutex */
    struct rt_sync *sync;   /* replica sync (sync.h), NULL = off */
    struct rt_hist *hist;   /* shared routing history (history_shm.c) */
    /* tokenize.c: the tokenizer given (caller's) and its counters. */
    const struct wsel_tokenizer *tok;
    _Atomic uint64_t tok_text, tok_chat, tok_fallbacks, tok_tokens;
};

/* tokenize.c: before a route, q's text or chat becomes its token ids in a
 * malloc'd *ids (the caller frees it) when the router has a tokenizer;
 * else, or if the tokenizer refuses it, a chat body is hashed as text. */
void rt_tokenize_prompt(wsel_router *r, wsel_route_request *q, uint32_t **ids);

/* hash.c: the two halves of a chained hash. */
uint64_t rt_hash_local_tokens(const uint32_t *tokens, uint32_t block_size);
uint64_t rt_hash_chain(uint64_t parent, uint64_t local, int has_parent);

/* route.c: r->ov for the nb blocks in r->hashes (under the mutex). */
void rt_overlaps(wsel_router *r, uint32_t nb);

/* table.c */
int rt_table_init(rt_table *t, uint32_t max_rows);
void rt_table_free(rt_table *t);
/* The table for request q with the overlaps of rt_overlaps, every column
 * written; the static ones again when the epoch moved. num_rows >= 1. */
const wsel_table *rt_table_fill(wsel_router *r, const wsel_request *q);
/* Slot sid's load changed: its row's load columns, if the table keeps
 * them. [under the request lock] */
void rt_table_note_load(wsel_router *r, uint32_t sid);
/* The next fill rewrites the load columns (after an answer that was not
 * the plugin's: it may have written the flags). [under the request lock] */
void rt_table_distrust(wsel_router *r);

/* topology.c */
void rt_rebuild_rows(wsel_router *r);
/* Free the worker at index w: its slots, index entries, subscriptions. */
void rt_worker_free(wsel_router *r, uint32_t w);
/* The slot of (worker id, rank), or RT_NIL. */
uint32_t rt_slot_of(const wsel_router *r, uint64_t worker_id, uint32_t rank);
/* A draining worker with nothing in flight is removed. */
void rt_check_drained(wsel_router *r, uint32_t w);

/* events.c: a KV message in two halves. A decoder's buffers are reused
 * from message to message (nothing allocated once they fit). */
struct rt_decoder *rt_decoder_new(void);
void rt_decoder_free(struct rt_decoder *d);
/* Decode one message (wsel_router_apply_kv_message's frames) into d,
 * holding no router lock (reads only the options): -1 when decoded, a
 * WSEL_KV_SKIP_* reason, or WSEL_ENOMEM; *seq = its sequence number. */
int rt_kv_decode(const wsel_router *r, struct rt_decoder *d, uint32_t dp_rank,
                 const void *const *frames, const size_t *sizes, uint32_t num_frames,
                 uint64_t *seq);
/* Under the router's mutex (taken here): apply a decoded message to the
 * index, or count why it is skipped. With want_slot other than RT_NIL the
 * message is applied only while (worker_id, dp_rank) is still that slot of
 * generation want_gen, the incarnation whose socket received it (a worker
 * removed and re-added under its id is another; its old events are skipped
 * as an unknown rank). 0, WSEL_EINVAL or WSEL_ENOENT. */
int32_t rt_kv_commit(wsel_router *r, const struct rt_decoder *d, uint64_t worker_id,
                     uint32_t dp_rank, uint64_t seq, int reason, uint32_t want_slot,
                     uint32_t want_gen);

/* kvsub.c: the KV event thread (started with a router in event mode). */
int rt_kvsub_start(wsel_router *r);
/* Subscribe to a worker's ranks; slots[k] and gens[k] name rank k's slot
 * and its generation, so that its events reach this incarnation only. */
int rt_kvsub_add(wsel_router *r, uint64_t worker_id, uint32_t dp_size,
                 char *const *endpoints, const uint32_t *slots, const uint32_t *gens);
void rt_kvsub_remove(wsel_router *r, uint64_t worker_id);
void rt_kvsub_stop(wsel_router *r);

/* The router's clock (the options' or CLOCK_MONOTONIC), microseconds. */
uint64_t rt_now_us(const wsel_router *r);

/* Take the router's mutex as a route does: counted in `waiting` while
 * blocked, so a KV batch being applied yields to it. */
static inline void rt_lock_request(wsel_router *r)
{
    if (pthread_mutex_trylock(&r->mu) == 0)
        return;
    atomic_fetch_add_explicit(&r->waiting, 1, memory_order_relaxed);
    pthread_mutex_lock(&r->mu);
    atomic_fetch_sub_explicit(&r->waiting, 1, memory_order_relaxed);
}

/* Release what rt_lock_request took. */
static inline void rt_unlock_request(wsel_router *r)
{
    pthread_mutex_unlock(&r->mu);
}

/* Record a deferred history record now (under the mutex); every call
 * that reads the index or the ranks does this first. */
void rt_flush_pending(wsel_router *r);

/* route.c: record blocks hashes[0..n) on slot sid as routing history,
 * deepest first (under the mutex; not shared). */
void rt_record_history(wsel_router *r, uint32_t sid, const uint64_t *hashes, uint32_t n);

/* history_shm.c, under the mutex with r->hist set: share the history
 * record of slot sid with the other processes on the region. */
void rt_hist_publish(wsel_router *r, uint32_t sid, const uint64_t *hashes, uint32_t n);

/* Log through the options' sink. */
void rt_log(const wsel_router *r, int32_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
