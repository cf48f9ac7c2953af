// SPDX-License-Identifier: Apache-2.0
/* sync_shm.c -- replica sync through a memory region that processes share
 * (nginx's workers): each process owns a slot where it writes its whole
 * contribution as a SNAPSHOT message (sync.h's wire format) under a
 * per-slot seqlock; the others read the slots that changed and apply them
 * as the NATS transport's messages, so one mechanism (sync.c's peers) sums
 * the others' load. A slot's owner is a process tag (its pid and start
 * time); a slot whose process is gone, or whose pid another process now
 * holds, is dropped with a BYE. Writers never wait; readers retry a torn
 * copy a few times, then keep their last view until the next poll. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync.h"

#define SHM_MAGIC 0x324d5357u /* "WSM2" */
#define PID_BITS  22u         /* Linux's PID_MAX_LIMIT is 2^22 */
#define SHM_LINE  64u
#define SHM_TRIES 4

typedef struct shm_head {
    atomic_uint magic;
    uint32_t max_slots, max_rows, slot_bytes;
} shm_head;

typedef struct shm_slot {
    atomic_uint seq;     /* odd while its owner writes */
    atomic_uint len;     /* of the message after this header */
    atomic_ullong owner; /* wsel_router_shm_process_tag; 0 = free */
} shm_slot;

struct rt_sync_shm {
    uint8_t *region;
    uint32_t me, max_slots, cap, check_us;
    uint64_t last_check_us;
    uint8_t *buf;       /* rt_sync_buf_size: encode (under the mutex) */
    uint8_t *rbuf;      /* the same: a slot's copy (the polling thread) */
    uint32_t *seen;     /* by slot: the seq last applied */
    uint8_t *live;      /* by slot: its load is in the peers */
};

static size_t round_line(size_t n)
{
    return (n + SHM_LINE - 1) / SHM_LINE * SHM_LINE;
}

static size_t slot_bytes(uint32_t max_rows)
{
    return round_line(sizeof(shm_slot)) + round_line(RT_SYNC_HDR + (size_t)max_rows * RT_SYNC_REC);
}

size_t wsel_router_shm_size(uint32_t max_processes, uint32_t max_rows)
{
    return round_line(sizeof(shm_head)) + (size_t)max_processes * slot_bytes(max_rows);
}

int32_t wsel_router_shm_format(void *region, size_t size, uint32_t max_processes,
                               uint32_t max_rows)
{
    if (!region || !max_processes || !max_rows ||
        size < wsel_router_shm_size(max_processes, max_rows))
        return WSEL_EINVAL;
    memset(region, 0, wsel_router_shm_size(max_processes, max_rows));
    shm_head *h = region;
    h->max_slots = max_processes;
    h->max_rows = max_rows;
    h->slot_bytes = (uint32_t)slot_bytes(max_rows);
    atomic_store_explicit(&h->magic, SHM_MAGIC, memory_order_release);
    return 0;
}

static shm_slot *slot_at(const struct rt_sync_shm *m, uint32_t i)
{
    const shm_head *h = (const shm_head *)m->region;
    return (shm_slot *)(m->region + round_line(sizeof(shm_head)) + (size_t)i * h->slot_bytes);
}

static uint8_t *slot_msg(shm_slot *sl)
{
    return (uint8_t *)sl + round_line(sizeof(shm_slot));
}

/* Process pid's start time, clock ticks after boot (/proc/PID/stat's
 * 22nd field), 0 if unknown; *state its 3rd (Z: a zombie). */
static uint64_t start_ticks(int pid, char *state)
{
    char path[64], buf[1024];
    *state = '?';
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command may hold spaces */
    if (p && p[1] == ' ')
        *state = p[2];
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

uint64_t wsel_router_shm_process_tag(int pid)
{
    if (pid <= 0 || (uint64_t)pid >= (1ull << PID_BITS))
        return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return 0;
    char state;
    uint64_t start = start_ticks(pid, &state);
    return state == 'Z' || state == 'X' ? 0 : start << PID_BITS | (uint64_t)pid;
}

int wsel_router_shm_process_gone(uint64_t tag)
{
    int pid = (int)(tag & ((1ull << PID_BITS) - 1));
    if (tag == 0 || pid == 0)
        return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return 1;
    uint64_t now = wsel_router_shm_process_tag(pid);
    /* a start time read both times that differs: the pid was reused */
    return now == 0 || ((tag >> PID_BITS) && (now >> PID_BITS) && now != tag);
}

/* Claim a free slot, or one whose owner is gone; its index or -1. */
static int32_t claim(uint8_t *region)
{
    struct rt_sync_shm m = {.region = region};
    const shm_head *h = (const shm_head *)region;
    unsigned long long me = wsel_router_shm_process_tag((int)getpid());
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < h->max_slots; i++) {
            shm_slot *sl = slot_at(&m, i);
            unsigned long long o = atomic_load(&sl->owner);
            if ((pass == 0 && o == 0) || (pass == 1 && wsel_router_shm_process_gone(o)))
                if (atomic_compare_exchange_strong(&sl->owner, &o, me))
                    return (int32_t)i;
        }
    return -1;
}

/* Copy len bytes of msg into slot sl under its seqlock (one writer). */
static void slot_write(shm_slot *sl, const uint8_t *msg, size_t len)
{
    unsigned seq = atomic_load_explicit(&sl->seq, memory_order_relaxed);
    seq += seq & 1u; /* a previous owner died mid-write */
    atomic_store_explicit(&sl->seq, seq + 1u, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(slot_msg(sl), msg, len);
    atomic_store_explicit(&sl->len, (unsigned)len, memory_order_relaxed);
    atomic_store_explicit(&sl->seq, seq + 2u, memory_order_release);
}

void rt_sync_shm_publish(wsel_router *r, rt_sync *s)
{
    struct rt_sync_shm *m = s->shm;
    size_t len = rt_sync_encode(r, RT_SYNC_SNAPSHOT, m->buf);
    if (len > m->cap) {
        s->c.publish_errors++; /* more loaded ranks than the region holds */
        return;
    }
    slot_write(slot_at(m, m->me), m->buf, len);
    s->c.snapshots_sent++;
}

void rt_sync_shm_free(struct rt_sync_shm *m)
{
    if (!m)
        return;
    free(m->buf);
    free(m->rbuf);
    free(m->seen);
    free(m->live);
    free(m);
}

static void set_err(char *err, size_t size, const char *msg)
{
    if (err && size)
        snprintf(err, size, "wsel_router_shm_start: %s", msg);
}

/* The sync with its shm state for slot `me`, or NULL (no memory). */
static rt_sync *shm_alloc(const wsel_router *r, const shm_head *h, uint32_t me)
{
    rt_sync *s = calloc(1, sizeof(*s));
    struct rt_sync_shm *m = calloc(1, sizeof(*m));
    if (s && m) {
        s->agg = calloc(r->opt.max_rows, sizeof(*s->agg));
        s->peers = calloc(h->max_slots, sizeof(*s->peers));
        s->dirty = calloc((r->opt.max_rows + 63) / 64, sizeof(*s->dirty));
        m->buf = malloc(rt_sync_buf_size(r));
        m->rbuf = malloc(rt_sync_buf_size(r));
        m->seen = calloc(h->max_slots, sizeof(*m->seen));
        m->live = calloc(h->max_slots, 1);
    }
    if (!s || !m || !s->agg || !s->peers || !s->dirty || !m->buf || !m->rbuf || !m->seen || !m->live) {
        if (s) {
            free(s->agg);
            free(s->peers);
            free(s->dirty);
        }
        rt_sync_shm_free(m);
        free(s);
        return NULL;
    }
    m->me = me;
    m->max_slots = h->max_slots;
    m->cap = h->slot_bytes - (uint32_t)round_line(sizeof(shm_slot));
    s->shm = m;
    s->opt.replica_id = (uint64_t)me + 1u;
    s->opt.max_replicas = h->max_slots;
    s->incarnation = rt_sync_now_us() ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)s;
    atomic_store(&s->connected, 1);
    return s;
}

int32_t wsel_router_shm_start(wsel_router *r, void *region, uint32_t check_ms, char *err,
                              size_t err_size)
{
    const shm_head *h = region;
    if (!r || !h || atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_MAGIC) {
        set_err(err, err_size, "a router and a formatted region are required");
        return WSEL_EINVAL;
    }
    if (r->sync) {
        set_err(err, err_size, "replica sync already started");
        return WSEL_ESTATE;
    }
    int32_t me = claim(region);
    if (me < 0) {
        set_err(err, err_size, "every slot of the region is taken by a live process");
        return WSEL_EBUSY;
    }
    rt_sync *s = shm_alloc(r, h, (uint32_t)me);
    if (!s) {
        struct rt_sync_shm m = {.region = region};
        atomic_store(&slot_at(&m, (uint32_t)me)->owner, 0);
        set_err(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    s->shm->region = region;
    s->shm->check_us = (check_ms ? check_ms : 100u) * 1000u;
    pthread_mutex_lock(&r->mu);
    r->sync = s;
    rt_sync_shm_publish(r, s); /* the new incarnation: a dead owner's load goes */
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void rt_sync_shm_stop(wsel_router *r, rt_sync *s)
{
    struct rt_sync_shm *m = s->shm;
    pthread_mutex_lock(&r->mu); /* no publish after this */
    atomic_store_explicit(&slot_at(m, m->me)->owner, 0, memory_order_release);
    pthread_mutex_unlock(&r->mu);
}

/* Little-endian, as sync.c's wire format. */
static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Drop slot i's load from this router's view. */
static void drop(wsel_router *r, struct rt_sync_shm *m, uint32_t i)
{
    uint8_t bye[RT_SYNC_HDR] = {0};
    put_le(bye, RT_SYNC_MAGIC, 4);
    put_le(bye + 4, RT_SYNC_BYE, 4);
    put_le(bye + 8, (uint64_t)i + 1u, 8);
    rt_sync_apply(r, bye, sizeof(bye));
    m->live[i] = 0;
}

/* Apply slot i's message if it changed since seen; a torn copy is retried
 * SHM_TRIES times, then left for the next poll. */
static void read_slot(wsel_router *r, struct rt_sync_shm *m, uint32_t i)
{
    shm_slot *sl = slot_at(m, i);
    for (int t = 0; t < SHM_TRIES; t++) {
        unsigned seq = atomic_load_explicit(&sl->seq, memory_order_acquire);
        if (seq == m->seen[i] && m->live[i])
            return;
        if (seq & 1u)
            continue;
        unsigned len = atomic_load_explicit(&sl->len, memory_order_relaxed);
        if (len < RT_SYNC_HDR) /* nothing published yet */
            return;
        if (len > m->cap)
            continue;
        memcpy(m->rbuf, slot_msg(sl), len);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&sl->seq, memory_order_relaxed) != seq)
            continue;
        m->seen[i] = seq;
        m->live[i] = 1;
        rt_sync_apply(r, m->rbuf, len);
        return;
    }
}

void wsel_router_shm_poll(wsel_router *r)
{
    struct rt_sync_shm *m = r && r->sync ? r->sync->shm : NULL;
    if (!m)
        return;
    uint64_t now = rt_sync_now_us();
    int check = now - m->last_check_us >= m->check_us;
    if (check)
        m->last_check_us = now;
    for (uint32_t i = 0; i < m->max_slots; i++) {
        if (i == m->me)
            continue;
        shm_slot *sl = slot_at(m, i);
        unsigned long long o = atomic_load_explicit(&sl->owner, memory_order_acquire);
        if (o == 0 || (check && wsel_router_shm_process_gone(o))) {
            if (m->live[i])
                drop(r, m, i);
            if (o)
                atomic_compare_exchange_strong(&sl->owner, &o, 0); /* free it */
            continue;
        }
        read_slot(r, m, i);
    }
}
