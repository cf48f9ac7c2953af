// SPDX-License-Identifier: Apache-2.0
/* history_shm.c -- routing history shared by processes through a ring in
 * a memory region they all map (nginx's workers in history mode). Writers
 * reserve an entry with one atomic add on the ring's head (an index that
 * never wraps) and write it under its stamp: 0 while written, then the
 * entry's index (xor a constant). Each reader keeps its own cursor, copies
 * the entry whose stamp names the cursor and keeps the copy only if the
 * stamp still does afterwards (a seqlock). wsel_router.h has the bounds. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "router_internal.h"

#define HIST_MAGIC 0x31485357u            /* "WSH1" */
#define HIST_STAMP 0x5753454c48495354ull  /* xor'd into an index: never 0 */
#define HIST_N     WSEL_ROUTER_HISTORY_ENTRY_BLOCKS

typedef struct hist_head {
    atomic_uint magic;
    uint32_t entries;
    uint8_t pad[56];     /* the head on a cache line of its own */
    atomic_ullong head;  /* the next entry to reserve */
} hist_head;

typedef struct hist_entry {
    atomic_ullong stamp;
    uint64_t writer; /* the router that wrote it (its start's id) */
    uint64_t worker_id;
    uint32_t rank, n;
    uint64_t hashes[HIST_N];
} hist_entry;

_Static_assert(sizeof(hist_entry) == 512, "an entry is 512 bytes");

struct rt_hist {
    hist_head *h;
    hist_entry *e;
    uint64_t me;     /* this router's writer id */
    uint64_t cursor; /* the next entry to read */
    uint64_t stall_us;
    uint64_t stuck_at, stuck_since_us; /* an unwritten entry and since when */
    hist_entry copy;
    wsel_router_history_counters c;
};

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static size_t head_bytes(void)
{
    return (sizeof(hist_head) + 63u) / 64u * 64u;
}

size_t wsel_router_history_size(uint32_t entries)
{
    return head_bytes() + (size_t)entries * sizeof(hist_entry);
}

int32_t wsel_router_history_format(void *region, size_t size, uint32_t entries)
{
    if (!region || !entries || size < wsel_router_history_size(entries))
        return WSEL_EINVAL;
    memset(region, 0, wsel_router_history_size(entries));
    hist_head *h = region;
    h->entries = entries;
    atomic_store_explicit(&h->magic, HIST_MAGIC, memory_order_release);
    return 0;
}

/* Write one entry: slot sid's hashes[0..n), n <= HIST_N. */
static void entry_write(wsel_router *r, struct rt_hist *m, uint32_t sid,
                        const uint64_t *hashes, uint32_t n)
{
    uint64_t i = atomic_fetch_add_explicit(&m->h->head, 1, memory_order_relaxed);
    hist_entry *e = &m->e[i % m->h->entries];
    atomic_store_explicit(&e->stamp, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    e->writer = m->me;
    e->worker_id = r->workers[r->slots[sid].worker].id;
    e->rank = r->slots[sid].rank;
    e->n = n;
    memcpy(e->hashes, hashes, (size_t)n * sizeof(*hashes));
    atomic_store_explicit(&e->stamp, i ^ HIST_STAMP, memory_order_release);
    m->c.published++;
}

void rt_hist_publish(wsel_router *r, uint32_t sid, const uint64_t *hashes, uint32_t n)
{
    /* Deepest chunk first: a reader records them in the route's order. */
    for (uint32_t end = n; end > 0;) {
        uint32_t start = end > HIST_N ? end - HIST_N : 0;
        entry_write(r, r->hist, sid, hashes + start, end - start);
        end = start;
    }
}

/* Copy entry i into m->copy: 1 when it is whole, 0 when not written yet,
 * -1 when it was overwritten by a later lap. */
static int entry_read(struct rt_hist *m, uint64_t i)
{
    hist_entry *e = &m->e[i % m->h->entries];
    uint64_t want = i ^ HIST_STAMP;
    uint64_t s = atomic_load_explicit(&e->stamp, memory_order_acquire);
    if (s != want)
        return atomic_load_explicit(&m->h->head, memory_order_acquire) - i >
                       m->h->entries
                   ? -1
                   : 0;
    memcpy(&m->copy, e, sizeof(m->copy));
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->stamp, memory_order_relaxed) != want ||
        m->copy.n > HIST_N)
        return -1;
    return 1;
}

/* Apply the entry copied last, unless it is this router's own. */
static void entry_apply(wsel_router *r, struct rt_hist *m)
{
    if (m->copy.writer == m->me)
        return;
    uint32_t sid = rt_slot_of(r, m->copy.worker_id, m->copy.rank);
    if (sid == RT_NIL) {
        m->c.unknown_rows++;
        return;
    }
    rt_record_history(r, sid, m->copy.hashes, m->copy.n);
    m->c.applied++;
}

/* An entry not yet written: 1 to skip it (stalled past stall_us). */
static int stalled(struct rt_hist *m, uint64_t i)
{
    uint64_t now = mono_us();
    if (m->stuck_at != i) {
        m->stuck_at = i;
        m->stuck_since_us = now;
        return 0;
    }
    return now - m->stuck_since_us >= m->stall_us;
}

/* Under the mutex: read and apply entries up to the head. */
static void poll_locked(wsel_router *r, struct rt_hist *m)
{
    uint64_t head = atomic_load_explicit(&m->h->head, memory_order_acquire);
    if (head - m->cursor > m->h->entries) { /* lapped */
        m->c.lost += head - m->h->entries - m->cursor;
        m->cursor = head - m->h->entries;
    }
    while (m->cursor < head) {
        int rc = entry_read(m, m->cursor);
        if (rc == 0 && !stalled(m, m->cursor))
            return; /* its writer is still at it: next poll */
        if (rc == 1)
            entry_apply(r, m);
        else
            m->c.lost++;
        m->cursor++;
    }
}

void wsel_router_history_poll(wsel_router *r)
{
    if (!r)
        return;
    rt_lock_request(r);
    rt_flush_pending(r);
    if (r->hist)
        poll_locked(r, r->hist);
    rt_unlock_request(r);
}

static void set_err(char *err, size_t size, const char *msg)
{
    if (err && size)
        snprintf(err, size, "wsel_router_history_start: %s", msg);
}

int32_t wsel_router_history_start(wsel_router *r, void *region, uint32_t stall_ms,
                                  char *err, size_t err_size)
{
    hist_head *h = region;
    if (!r || !h || atomic_load_explicit(&h->magic, memory_order_acquire) != HIST_MAGIC) {
        set_err(err, err_size, "a router and a formatted region are required");
        return WSEL_EINVAL;
    }
    if (r->opt.kv_source != WSEL_ROUTER_KV_HISTORY || r->hist) {
        set_err(err, err_size, r->hist ? "already started"
                                       : "the router learns from KV events, not history");
        return WSEL_ESTATE;
    }
    struct rt_hist *m = calloc(1, sizeof(*m));
    if (!m) {
        set_err(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    m->h = h;
    m->e = (hist_entry *)((uint8_t *)region + head_bytes());
    m->me = mono_us() ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)m;
    m->me |= 1u; /* never 0, an unwritten entry's */
    m->stall_us = (uint64_t)(stall_ms ? stall_ms : 100u) * 1000u;
    m->stuck_at = UINT64_MAX;
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    m->cursor = head > h->entries ? head - h->entries : 0; /* the whole ring */
    pthread_mutex_lock(&r->mu);
    r->hist = m;
    pthread_mutex_unlock(&r->mu);
    wsel_router_history_poll(r);
    return 0;
}

void wsel_router_history_stop(wsel_router *r)
{
    if (!r || !r->hist)
        return;
    pthread_mutex_lock(&r->mu);
    rt_flush_pending(r); /* a deferred record is shared too */
    struct rt_hist *m = r->hist;
    r->hist = NULL;
    pthread_mutex_unlock(&r->mu);
    free(m);
}

int32_t wsel_router_history_read_counters(wsel_router *r,
                                          wsel_router_history_counters *out)
{
    if (!r || !out ||
        out->struct_size < offsetof(wsel_router_history_counters, published))
        return WSEL_EINVAL;
    wsel_router_history_counters v = {0};
    pthread_mutex_lock(&r->mu);
    if (r->hist)
        v = r->hist->c;
    pthread_mutex_unlock(&r->mu);
    v.struct_size = out->struct_size;
    memcpy(out, &v, out->struct_size < sizeof(v) ? out->struct_size : sizeof(v));
    return 0;
}
