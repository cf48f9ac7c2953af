// SPDX-License-Identifier: Apache-2.0
/* sync.c -- replica sync's accounting: the other replicas' load per slot,
 * the wire format, start/stop, counters. The transport is sync_nats.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sync.h"

uint64_t rt_sync_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void rt_sync_changed(wsel_router *r, uint32_t sid, int is_route)
{
    rt_sync *s = r->sync;
    s->dirty[sid / 64] |= 1ull << (sid % 64);
    if (s->shm) {
        rt_sync_shm_publish(r, s);
        return;
    }
    if (is_route && !atomic_load_explicit(&s->connected, memory_order_relaxed))
        s->c.local_only_routes++;
    if (!atomic_exchange_explicit(&s->pending, 1, memory_order_acq_rel))
        rt_sync_transport_wake(s);
}

void rt_sync_echo_route(rt_sync *s, uint32_t sid, uint64_t prefill, uint64_t blocks)
{
    rt_sync_echo *e = &s->echo[sid];
    uint64_t now = rt_sync_now_us();
    if (now >= e->until_us)
        *e = (rt_sync_echo){0};
    e->until_us = now + s->opt.echo_us;
    e->prefill += prefill * s->peers_live;
    e->blocks += blocks * s->peers_live;
    e->requests += s->peers_live;
    s->c.echo_routes++;
}

size_t rt_sync_buf_size(const wsel_router *r)
{
    return RT_SYNC_HDR + (size_t)r->opt.max_rows * RT_SYNC_REC;
}

/* Append slot sid's own load as a record at p. */
static void put_record(const wsel_router *r, uint32_t sid, uint8_t *p)
{
    const rt_slot *sl = &r->slots[sid];
    const rt_load *ld = &r->load[sid];
    put64(p, r->workers[sl->worker].id);
    put32(p + 8, sl->rank);
    put32(p + 12, ld->active_requests);
    put64(p + 16, ld->active_prefill_tokens);
    put64(p + 24, ld->active_blocks);
}

size_t rt_sync_encode(wsel_router *r, uint32_t kind, uint8_t *buf)
{
    rt_sync *s = r->sync;
    uint32_t n = 0;
    uint8_t *p = buf + RT_SYNC_HDR;
    if (kind == RT_SYNC_SNAPSHOT) {
        for (uint32_t i = 0; i < r->num_rows; i++) {
            const rt_load *ld = &r->load[r->rows[i]];
            if (ld->active_requests || ld->active_prefill_tokens || ld->active_blocks)
                put_record(r, r->rows[i], p + (size_t)RT_SYNC_REC * n++);
        }
    } else if (kind == RT_SYNC_UPDATE) {
        for (uint32_t w = 0; w < (r->opt.max_rows + 63) / 64; w++)
            for (uint64_t bits = s->dirty[w]; bits; bits &= bits - 1) {
                uint32_t sid = w * 64 + (uint32_t)__builtin_ctzll(bits);
                if (r->slots[sid].worker != RT_NIL)
                    put_record(r, sid, p + (size_t)RT_SYNC_REC * n++);
            }
    }
    memset(s->dirty, 0, (size_t)(r->opt.max_rows + 63) / 64 * sizeof(*s->dirty));
    put32(buf, RT_SYNC_MAGIC);
    put32(buf + 4, kind);
    put64(buf + 8, s->opt.replica_id);
    put64(buf + 16, s->incarnation);
    put32(buf + 24, n);
    put32(buf + 28, 0);
    return RT_SYNC_HDR + (size_t)RT_SYNC_REC * n;
}

/* Set peer p's row of slot sid (generation gen) to v, keeping agg the sum. */
static void row_set(rt_sync *s, rt_sync_peer *p, uint32_t sid, uint32_t gen,
                    const rt_sync_row *v)
{
    rt_sync_row *a = &s->agg[sid], *o = &p->rows[sid];
    if (a->gen1 != gen + 1u)
        *a = (rt_sync_row){.gen1 = gen + 1u};
    if (o->gen1 != gen + 1u)
        *o = (rt_sync_row){.gen1 = gen + 1u};
    a->requests += v->requests - o->requests;
    a->prefill += v->prefill - o->prefill;
    a->blocks += v->blocks - o->blocks;
    *o = *v;
    o->gen1 = gen + 1u;
}

/* Take all of peer p's load out of the sum. */
static void peer_clear(const wsel_router *r, rt_sync *s, rt_sync_peer *p)
{
    for (uint32_t sid = 0; sid < r->opt.max_rows; sid++) {
        rt_sync_row *o = &p->rows[sid], *a = &s->agg[sid];
        if (o->gen1 && o->gen1 == a->gen1) {
            a->requests -= o->requests;
            a->prefill -= o->prefill;
            a->blocks -= o->blocks;
        }
        *o = (rt_sync_row){0};
    }
}

static void peer_free(const wsel_router *r, rt_sync *s, rt_sync_peer *p)
{
    peer_clear(r, s, p);
    free(p->rows);
    *p = (rt_sync_peer){0};
    s->peers_live--;
}

/* The peer of replica id (a new one unless `existing`), or NULL. */
static rt_sync_peer *peer_find(wsel_router *r, rt_sync *s, uint64_t id, int existing)
{
    rt_sync_peer *free_p = NULL;
    for (uint32_t i = 0; i < s->opt.max_replicas; i++) {
        rt_sync_peer *p = &s->peers[i];
        if (p->rows && p->id == id)
            return p;
        if (!p->rows && !free_p)
            free_p = p;
    }
    if (existing)
        return NULL;
    if (free_p)
        free_p->rows = calloc(r->opt.max_rows, sizeof(*free_p->rows));
    if (!free_p || !free_p->rows) {
        s->c.replicas_refused++;
        return NULL;
    }
    free_p->id = id;
    s->peers_live++;
    return free_p;
}

/* Apply n records at p to peer pe. */
static void apply_records(wsel_router *r, rt_sync *s, rt_sync_peer *pe, const uint8_t *p,
                          uint32_t n)
{
    for (uint32_t i = 0; i < n; i++, p += RT_SYNC_REC) {
        uint32_t sid = rt_slot_of(r, get64(p), get32(p + 8));
        if (sid == RT_NIL) {
            s->c.unknown_rows++;
            continue;
        }
        rt_sync_row v = {.requests = get32(p + 12),
                         .prefill = get64(p + 16),
                         .blocks = get64(p + 24)};
        row_set(s, pe, sid, r->slots[sid].gen, &v);
        /* A peer's own figure for the slot replaces the stand-in. */
        if (s->echo)
            s->echo[sid].until_us = 0;
    }
}

/* A message's header checked: its kind, or 0. */
static uint32_t check_msg(const uint8_t *m, size_t len, uint32_t *n)
{
    if (len < RT_SYNC_HDR || get32(m) != RT_SYNC_MAGIC)
        return 0;
    uint32_t kind = get32(m + 4);
    *n = get32(m + 24);
    if (kind < RT_SYNC_UPDATE || kind > RT_SYNC_BYE ||
        (len - RT_SYNC_HDR) / RT_SYNC_REC != *n || (len - RT_SYNC_HDR) % RT_SYNC_REC)
        return 0;
    return kind;
}

void rt_sync_apply(wsel_router *r, const uint8_t *m, size_t len)
{
    uint32_t n = 0;
    uint32_t kind = check_msg(m, len, &n);
    pthread_mutex_lock(&r->mu);
    rt_sync *s = r->sync;
    if (!s)
        goto out_unlock;
    if (kind == 0) {
        s->c.messages_bad++;
        goto out_unlock;
    }
    uint64_t id = get64(m + 8), inc = get64(m + 16);
    if (id == s->opt.replica_id)
        goto out_unlock;
    rt_sync_peer *pe = peer_find(r, s, id, kind == RT_SYNC_BYE);
    if (!pe)
        goto out_unlock;
    s->c.messages_applied++;
    if (kind == RT_SYNC_BYE) {
        s->c.goodbyes++;
        peer_free(r, s, pe);
        goto out_unlock;
    }
    if (pe->incarnation != inc || kind == RT_SYNC_SNAPSHOT)
        peer_clear(r, s, pe);
    pe->incarnation = inc;
    pe->last_us = rt_sync_now_us();
    apply_records(r, s, pe, m + RT_SYNC_HDR, n);
out_unlock:
    pthread_mutex_unlock(&r->mu);
}

void rt_sync_expire(wsel_router *r)
{
    uint64_t now = rt_sync_now_us();
    pthread_mutex_lock(&r->mu);
    rt_sync *s = r->sync;
    uint64_t lease = s ? (uint64_t)s->opt.lease_periods * s->opt.period_ms * 1000u : 0;
    for (uint32_t i = 0; s && i < s->opt.max_replicas; i++) {
        rt_sync_peer *p = &s->peers[i];
        if (p->rows && now - p->last_us > lease) {
            peer_free(r, s, p);
            s->c.replicas_expired++;
        }
    }
    pthread_mutex_unlock(&r->mu);
}

static void set_err(char *err, size_t size, const char *msg)
{
    if (err && size)
        snprintf(err, size, "wsel_router_sync_start: %s", msg);
}

/* Copy opts into s with defaults; 0 or WSEL_EINVAL. */
static int32_t copy_options(rt_sync *s, const wsel_router_sync_options *opts, char *err,
                            size_t err_size)
{
    size_t n = opts->struct_size < sizeof(s->opt) ? opts->struct_size : sizeof(s->opt);
    memcpy(&s->opt, opts, n);
    wsel_router_sync_options *o = &s->opt;
    const char *subject = o->subject ? o->subject : "wsel.load";
    if (!o->url || strlen(o->url) >= sizeof(s->url) ||
        strlen(subject) >= sizeof(s->subject) || !*subject || o->replica_id == 0) {
        set_err(err, err_size, "a url, a subject and a non-zero replica_id are required");
        return WSEL_EINVAL;
    }
    snprintf(s->url, sizeof(s->url), "%s", o->url);
    snprintf(s->subject, sizeof(s->subject), "%s", subject);
    o->url = s->url;
    o->subject = s->subject;
    o->period_ms = o->period_ms ? o->period_ms : 1000;
    o->lease_periods = o->lease_periods ? o->lease_periods : 3;
    o->max_replicas = o->max_replicas ? o->max_replicas : 64;
    o->reconnect_ms = o->reconnect_ms ? o->reconnect_ms : 250;
    o->batch_us = o->batch_us ? o->batch_us : 1000;
    o->echo_us = o->echo_us ? o->echo_us : 2 * o->batch_us;
    return 0;
}

static void sync_free(const wsel_router *r, rt_sync *s)
{
    for (uint32_t i = 0; s->peers && i < s->opt.max_replicas; i++)
        free(s->peers[i].rows);
    free(s->peers);
    free(s->echo);
    free(s->agg);
    free(s->dirty);
    rt_sync_shm_free(s->shm);
    free(s);
    (void)r;
}

int32_t wsel_router_sync_start(wsel_router *r, const wsel_router_sync_options *opts,
                               char *err, size_t err_size)
{
    if (!r || !opts || opts->struct_size < offsetof(wsel_router_sync_options, period_ms)) {
        set_err(err, err_size, "a router and options are required");
        return WSEL_EINVAL;
    }
    if (r->sync) {
        set_err(err, err_size, "already started");
        return WSEL_ESTATE;
    }
    rt_sync *s = calloc(1, sizeof(*s));
    if (!s)
        goto nomem;
    int32_t rc = copy_options(s, opts, err, err_size);
    if (rc < 0) {
        free(s);
        return rc;
    }
    /* A new incarnation per start: a restarted replica's old load goes. */
    s->incarnation = rt_sync_now_us() ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)s;
    s->agg = calloc(r->opt.max_rows, sizeof(*s->agg));
    s->peers = calloc(s->opt.max_replicas, sizeof(*s->peers));
    s->dirty = calloc((r->opt.max_rows + 63) / 64, sizeof(*s->dirty));
    const int echo = !(s->opt.flags & WSEL_ROUTER_SYNC_NO_ECHO);
    if (echo)
        s->echo = calloc(r->opt.max_rows, sizeof(*s->echo));
    if (!s->agg || !s->peers || !s->dirty || (echo && !s->echo))
        goto nomem;
    /* Routes wake nobody until the publisher, ticking first, clears it. */
    atomic_init(&s->pending, 1);
    pthread_mutex_lock(&r->mu);
    r->sync = s;
    pthread_mutex_unlock(&r->mu);
    rc = rt_sync_transport_start(r, s, err, err_size);
    if (rc == 0)
        return 0;
    pthread_mutex_lock(&r->mu);
    r->sync = NULL;
    pthread_mutex_unlock(&r->mu);
    rt_sync_transport_free(s);
    sync_free(r, s);
    return rc;
nomem:
    if (s)
        sync_free(r, s);
    set_err(err, err_size, "out of memory");
    return WSEL_ENOMEM;
}

void wsel_router_sync_stop(wsel_router *r)
{
    if (!r || !r->sync)
        return;
    rt_sync *s = r->sync;
    if (s->shm)
        rt_sync_shm_stop(r, s);
    else
        rt_sync_transport_stop(r, s);
    pthread_mutex_lock(&r->mu);
    r->sync = NULL;
    pthread_mutex_unlock(&r->mu);
    if (!s->shm)
        rt_sync_transport_free(s);
    sync_free(r, s);
}

int32_t wsel_router_sync_read_counters(wsel_router *r, wsel_router_sync_counters *out)
{
    if (!r || !out || out->struct_size < offsetof(wsel_router_sync_counters, updates_sent))
        return WSEL_EINVAL;
    wsel_router_sync_counters v = {0};
    pthread_mutex_lock(&r->mu);
    rt_sync *s = r->sync;
    if (s) {
        v = s->c;
        v.connected = atomic_load(&s->connected);
        for (uint32_t i = 0; i < s->opt.max_replicas; i++)
            v.replicas_live += s->peers[i].rows != NULL;
    }
    pthread_mutex_unlock(&r->mu);
    v.struct_size = out->struct_size;
    memcpy(out, &v, out->struct_size < sizeof(v) ? out->struct_size : sizeof(v));
    return 0;
}

uint32_t wsel_router_sync_read_ranks(wsel_router *r, wsel_router_rank_info *out,
                                     uint32_t max)
{
    if (!r)
        return 0;
    pthread_mutex_lock(&r->mu);
    uint32_t n = r->num_rows;
    for (uint32_t i = 0; out && i < n && i < max; i++) {
        uint32_t sid = r->rows[i];
        const rt_sync_row *l = rt_sync_load(r, sid);
        out[i] = (wsel_router_rank_info){
            .worker_id = r->workers[r->slots[sid].worker].id,
            .dp_rank = r->slots[sid].rank,
            .active_requests = l->requests,
            .active_prefill_tokens = l->prefill,
            .active_blocks = l->blocks,
        };
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}
