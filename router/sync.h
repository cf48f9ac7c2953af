// SPDX-License-Identifier: Apache-2.0
/*
 * sync.h -- replica sync's state and its hooks into the router (private).
 *
 * The other replicas' load is kept per replica (a peer) and per local rank
 * slot, and summed per slot (agg) for the routes; a peer's rows can so be
 * dropped as a whole (goodbye, lease expired, new incarnation). Rows carry
 * their slot's generation + 1 (0 = unset): a row of a slot freed since is
 * stale and reads as 0. Everything here is guarded by the router's mutex
 * except the transport (sync_nats.c), which has its own.
 */
#ifndef WSEL_ROUTER_SYNC_H
#define WSEL_ROUTER_SYNC_H

#include <stdatomic.h>
#include <stdint.h>

#include "router_internal.h"

/* Wire format (little-endian): a header, then n records. */
#define RT_SYNC_MAGIC    0x31595357u /* "WSY1" */
#define RT_SYNC_UPDATE   1u          /* the listed ranks changed */
#define RT_SYNC_SNAPSHOT 2u          /* the whole contribution: unlisted = 0 */
#define RT_SYNC_BYE      3u          /* the replica stopped: drop it */
#define RT_SYNC_HDR      32u         /* magic, kind, replica, incarnation, n, pad */
#define RT_SYNC_REC      32u         /* worker, rank, requests, prefill, blocks */

typedef struct rt_sync_row {
    uint32_t gen1; /* slot generation + 1; 0 = unset */
    uint32_t requests;
    uint64_t prefill;
    uint64_t blocks;
} rt_sync_row;

typedef struct rt_sync_peer {
    uint64_t id, incarnation;
    uint64_t last_us; /* CLOCK_MONOTONIC of its last message */
    rt_sync_row *rows; /* max_rows, by slot; NULL = free peer */
} rt_sync_peer;

/* A slot's echo: this replica's routes of the last echo_us, counted
 * once more per live peer (wsel_router_sync_options.echo_us). */
typedef struct rt_sync_echo {
    uint64_t until_us; /* CLOCK_MONOTONIC; past it the echo is 0 */
    uint64_t prefill;
    uint64_t blocks;
    uint32_t requests;
} rt_sync_echo;

typedef struct rt_sync_transport rt_sync_transport;

typedef struct rt_sync {
    wsel_router_sync_options opt; /* url and subject point into the copies */
    char url[512], subject[128];
    uint64_t incarnation;
    /* Under the router's mutex. */
    rt_sync_row *agg;  /* max_rows, by slot: the peers' sum */
    rt_sync_peer *peers; /* max_replicas */
    uint32_t peers_live; /* peers with rows */
    rt_sync_echo *echo;  /* max_rows, by slot; NULL = no echo */
    uint64_t *dirty;   /* bitmap of slots whose own load changed */
    wsel_router_sync_counters c;
    /* Set by the transport. */
    atomic_uint connected;
    atomic_uint pending; /* a wake-up is on its way to the publisher */
    rt_sync_transport *tp;
    struct rt_sync_shm *shm; /* set: a shared-memory region instead (sync_shm.c) */
} rt_sync;

/* CLOCK_MONOTONIC, microseconds (leases never follow the router's clock,
 * which may be a model's). */
uint64_t rt_sync_now_us(void);

/* Hooks, under the router's mutex. Slot sid's own load changed (a route
 * when is_route): mark it for the publisher. */
void rt_sync_changed(wsel_router *r, uint32_t sid, int is_route);
static inline void rt_sync_note(wsel_router *r, uint32_t sid, int is_route)
{
    if (r->sync)
        rt_sync_changed(r, sid, is_route);
}
/* A synced replica's draws are its own: the host seeds a request's stream
 * from its id, which every replica counts from 1 alike, so replicas
 * routing their n-th requests on the same view would break ties, and
 * sample, alike (docs/replicas.md, "Herding"). Without sync: unchanged. */
static inline void rt_sync_salt(const wsel_router *r, wsel_request *req, wsel_rng *rng)
{
    if (!r->sync || r->sync->shm)
        return;
    wsel_rng_seed(rng, wsel_rng_u64(rng) ^ (r->sync->opt.replica_id * 0x9e3779b97f4a7c15ull));
    req->uniform = wsel_rng_uniform(rng);
}

/* Whether routes are echoed now: sync with the echo on and a peer live. */
static inline int rt_sync_echoing(const wsel_router *r)
{
    return r->sync && r->sync->echo && r->sync->peers_live;
}
/* Book a route's load on slot sid in its echo (sync.c). */
void rt_sync_echo_route(rt_sync *s, uint32_t sid, uint64_t prefill, uint64_t blocks);
static inline void rt_sync_note_route(wsel_router *r, uint32_t sid, uint64_t prefill,
                                      uint64_t blocks)
{
    if (rt_sync_echoing(r))
        rt_sync_echo_route(r->sync, sid, prefill, blocks);
}
/* The peers' load on slot sid (0 without sync). */
static inline const rt_sync_row *rt_sync_load(const wsel_router *r, uint32_t sid)
{
    static const rt_sync_row none;
    if (!r->sync)
        return &none;
    const rt_sync_row *a = &r->sync->agg[sid];
    return a->gen1 == r->slots[sid].gen + 1u ? a : &none;
}
/* The time a route's echoes are read at (rt_sync_now_us), or 0 when there
 * is no echo to read. */
static inline uint64_t rt_sync_echo_now(const wsel_router *r)
{
    return rt_sync_echoing(r) ? rt_sync_now_us() : 0;
}
/* The load routes add to slot sid's own: the peers' plus, at echo_now
 * (rt_sync_echo_now), the echo, in *out (0 without sync). */
static inline void rt_sync_load_echo(const wsel_router *r, uint32_t sid, uint64_t echo_now,
                                     rt_sync_row *out)
{
    *out = *rt_sync_load(r, sid);
    if (echo_now == 0)
        return;
    const rt_sync_echo *e = &r->sync->echo[sid];
    if (echo_now < e->until_us) {
        out->requests += e->requests;
        out->prefill += e->prefill;
        out->blocks += e->blocks;
    }
}

/* sync.c, under the router's mutex: encode into buf (room for the header
 * and max_rows records) the dirty slots (UPDATE) or every loaded slot
 * (SNAPSHOT); returns the length. */
size_t rt_sync_encode(wsel_router *r, uint32_t kind, uint8_t *buf);
/* Apply another replica's message (takes the router's mutex). */
void rt_sync_apply(wsel_router *r, const uint8_t *msg, size_t len);
/* Drop the peers not heard since the lease (takes the router's mutex). */
void rt_sync_expire(wsel_router *r);
size_t rt_sync_buf_size(const wsel_router *r);

/* The transport (sync_nats.c; sync_off.c without libnats): start with
 * r->sync set; stop says goodbye unless told not to and returns once no
 * thread or callback of it runs; free (after r->sync is cleared) frees
 * what wake uses. */
int32_t rt_sync_transport_start(wsel_router *r, rt_sync *s, char *err, size_t err_size);
void rt_sync_transport_stop(wsel_router *r, rt_sync *s);
void rt_sync_transport_free(rt_sync *s);
/* Wake the publisher (a slot is dirty). */
void rt_sync_transport_wake(rt_sync *s);

/* sync_shm.c, with s->shm set: write this process's whole contribution
 * into its slot (under the router's mutex, for rt_sync_changed); leave
 * the slot (takes the mutex, for wsel_router_sync_stop); free the shm
 * state (NULL: nothing), with s. */
void rt_sync_shm_publish(wsel_router *r, rt_sync *s);
void rt_sync_shm_stop(wsel_router *r, rt_sync *s);
void rt_sync_shm_free(struct rt_sync_shm *m);

#endif
