// SPDX-License-Identifier: Apache-2.0
/* sync_nats.c -- replica sync's transport over NATS (libnats, the C
 * client): a publisher thread of its own (routes only mark slots and wake
 * it), the subscription that applies the other replicas' messages, and the
 * connection's callbacks. */
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sync.h"

struct rt_sync_transport {
    wsel_router *r;
    rt_sync *s;
    pthread_mutex_t mu; /* guards the flags below; taken after the router's */
    pthread_cond_t cv;  /* on CLOCK_MONOTONIC */
    int wake, stop, snapshot_now, sub_done, closed;
    int thread_started;
    pthread_t thread;
    natsOptions *no;
    natsConnection *nc;
    natsSubscription *sub;
    uint8_t *buf; /* rt_sync_buf_size */
};

/* Set one of tp's flags and wake whoever waits. */
static void tp_flag(rt_sync_transport *tp, int *flag)
{
    pthread_mutex_lock(&tp->mu);
    *flag = 1;
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
}

void rt_sync_transport_wake(rt_sync *s)
{
    tp_flag(s->tp, &s->tp->wake);
}

static void on_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *tp_)
{
    rt_sync_transport *tp = tp_;
    (void)nc;
    (void)sub;
    rt_sync_apply(tp->r, (const uint8_t *)natsMsg_GetData(msg),
                  (size_t)natsMsg_GetDataLength(msg));
    natsMsg_Destroy(msg);
}

/* Connected (first time or again): publish a snapshot at once. */
static void on_connected(natsConnection *nc, void *tp_)
{
    rt_sync_transport *tp = tp_;
    (void)nc;
    atomic_store(&tp->s->connected, 1);
    tp_flag(tp, &tp->snapshot_now);
}

static void on_reconnected(natsConnection *nc, void *tp_)
{
    rt_sync_transport *tp = tp_;
    pthread_mutex_lock(&tp->r->mu);
    tp->s->c.reconnects++;
    pthread_mutex_unlock(&tp->r->mu);
    on_connected(nc, tp);
}

static void on_disconnected(natsConnection *nc, void *tp_)
{
    rt_sync_transport *tp = tp_;
    (void)nc;
    if (!atomic_exchange(&tp->s->connected, 0))
        return;
    pthread_mutex_lock(&tp->r->mu);
    tp->s->c.disconnects++;
    pthread_mutex_unlock(&tp->r->mu);
}

static void on_closed(natsConnection *nc, void *tp_)
{
    rt_sync_transport *tp = tp_;
    (void)nc;
    atomic_store(&tp->s->connected, 0);
    tp_flag(tp, &tp->closed);
}

static void on_sub_done(void *tp_)
{
    rt_sync_transport *tp = tp_;
    tp_flag(tp, &tp->sub_done);
}

/* Encode (under the router's mutex) and publish a message of `kind`;
 * nothing while disconnected (the reconnect's snapshot says it all).
 * Returns 1 while changes keep coming (the publisher then ticks every
 * batch_us and routes need not wake it), 0 once an update finds none
 * (pending cleared: the next change wakes it). */
static int publish(rt_sync_transport *tp, uint32_t kind)
{
    wsel_router *r = tp->r;
    rt_sync *s = tp->s;
    pthread_mutex_lock(&r->mu);
    size_t len = rt_sync_encode(r, kind, tp->buf);
    int empty = kind == RT_SYNC_UPDATE && len == RT_SYNC_HDR;
    if (empty)
        atomic_store(&s->pending, 0);
    int ticking = (int)atomic_load(&s->pending);
    pthread_mutex_unlock(&r->mu);
    if (empty || !atomic_load(&s->connected))
        return ticking;
    natsStatus st = natsConnection_Publish(tp->nc, s->subject, tp->buf, (int)len);
    pthread_mutex_lock(&r->mu);
    if (st != NATS_OK)
        s->c.publish_errors++;
    else if (kind == RT_SYNC_SNAPSHOT)
        s->c.snapshots_sent++;
    else
        s->c.updates_sent++;
    pthread_mutex_unlock(&r->mu);
    return ticking;
}

static struct timespec ts_of(uint64_t us)
{
    return (struct timespec){.tv_sec = (time_t)(us / 1000000u),
                             .tv_nsec = (long)(us % 1000000u) * 1000};
}

/* Under tp->mu: wait until until_us, or a stop or a snapshot, or (wake
 * set) a change. */
static void wait_until(rt_sync_transport *tp, uint64_t until_us, int wake)
{
    struct timespec until = ts_of(until_us);
    while (!tp->stop && !tp->snapshot_now && !(wake && tp->wake) &&
           rt_sync_now_us() < until_us)
        pthread_cond_timedwait(&tp->cv, &tp->mu, &until);
}

/* The publisher. Idle, it sleeps until a change wakes it, gathers
 * batch_us of changes into one update, then ticks every batch_us while
 * changes keep coming (under steady load no route wakes it: a wake-up is
 * a system call, and an inter-processor interrupt on a VM). A snapshot
 * (and the peers' leases checked) every period and after each
 * (re)connect. */
static void *publisher(void *tp_)
{
    rt_sync_transport *tp = tp_;
    const uint64_t period = (uint64_t)tp->s->opt.period_ms * 1000u;
    const uint64_t batch = tp->s->opt.batch_us;
    uint64_t next = rt_sync_now_us() + period;
    int ticking = 1; /* pending starts set (wsel_router_sync_start) */
    pthread_mutex_lock(&tp->mu);
    while (!tp->stop) {
        uint64_t tick = rt_sync_now_us() + batch;
        wait_until(tp, ticking && tick < next ? tick : next, !ticking);
        if (tp->stop)
            break;
        uint64_t now = rt_sync_now_us();
        int periodic = now >= next, snap = periodic || tp->snapshot_now;
        if (!snap && !ticking) /* a first change: let others join it */
            wait_until(tp, now + batch, 0);
        tp->wake = tp->snapshot_now = 0;
        pthread_mutex_unlock(&tp->mu);
        ticking = publish(tp, snap ? RT_SYNC_SNAPSHOT : RT_SYNC_UPDATE);
        if (periodic) {
            rt_sync_expire(tp->r);
            while (next <= now)
                next += period;
        }
        pthread_mutex_lock(&tp->mu);
    }
    pthread_mutex_unlock(&tp->mu);
    return NULL;
}

/* The client's options for s: reconnect forever, no echo, callbacks. */
static natsStatus make_options(rt_sync_transport *tp, const rt_sync *s)
{
    const int64_t period = s->opt.period_ms;
    natsStatus st = natsOptions_Create(&tp->no);
    if (st == NATS_OK)
        st = natsOptions_SetURL(tp->no, s->url);
    if (st == NATS_OK)
        st = natsOptions_SetName(tp->no, "wsel-router");
    if (st == NATS_OK)
        st = natsOptions_SetNoEcho(tp->no, true);
    if (st == NATS_OK) /* written by the publisher itself: no flusher wake-up */
        st = natsOptions_SetSendAsap(tp->no, true);
    if (st == NATS_OK)
        st = natsOptions_SetMaxReconnect(tp->no, -1);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectWait(tp->no, s->opt.reconnect_ms);
    if (st == NATS_OK)
        st = natsOptions_SetTimeout(tp->no, period);
    if (st == NATS_OK) /* a silent server is found within ~3 periods */
        st = natsOptions_SetPingInterval(tp->no, period);
    if (st == NATS_OK)
        st = natsOptions_SetMaxPingsOut(tp->no, 2);
    if (st == NATS_OK)
        st = natsOptions_SetDisconnectedCB(tp->no, on_disconnected, tp);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectedCB(tp->no, on_reconnected, tp);
    if (st == NATS_OK)
        st = natsOptions_SetClosedCB(tp->no, on_closed, tp);
    if (st == NATS_OK)
        st = natsOptions_SetRetryOnFailedConnect(tp->no, true, on_connected, tp);
    return st;
}

static rt_sync_transport *tp_new(wsel_router *r, rt_sync *s)
{
    rt_sync_transport *tp = calloc(1, sizeof(*tp));
    if (!tp)
        return NULL;
    tp->buf = malloc(rt_sync_buf_size(r));
    if (!tp->buf) {
        free(tp);
        return NULL;
    }
    tp->r = r;
    tp->s = s;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tp->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&tp->mu, NULL);
    return tp;
}

int32_t wsel_router_sync_available(void)
{
    return 1;
}

int32_t rt_sync_transport_start(wsel_router *r, rt_sync *s, char *err, size_t err_size)
{
    s->tp = tp_new(r, s);
    if (!s->tp)
        return WSEL_ENOMEM;
    rt_sync_transport *tp = s->tp;
    natsStatus st = make_options(tp, s);
    if (st == NATS_OK) {
        st = natsConnection_Connect(&tp->nc, tp->no);
        if (st == NATS_OK) {
            atomic_store(&s->connected, 1);
            tp->snapshot_now = 1; /* the load routed before the start */
        }
        else if (st == NATS_NOT_YET_CONNECTED)
            st = NATS_OK; /* the client keeps trying; on_connected says when */
    }
    if (st == NATS_OK)
        st = natsConnection_Subscribe(&tp->sub, tp->nc, s->subject, on_msg, tp);
    if (st == NATS_OK)
        st = natsSubscription_SetOnCompleteCB(tp->sub, on_sub_done, tp);
    if (st == NATS_OK && pthread_create(&tp->thread, NULL, publisher, tp) == 0) {
        tp->thread_started = 1;
        return 0;
    }
    if (err && err_size)
        snprintf(err, err_size, "wsel_router_sync_start: NATS: %s",
                 st != NATS_OK ? natsStatus_GetText(st) : "cannot start a thread");
    rt_sync_transport_stop(r, s);
    return WSEL_EIO;
}

/* Wait (bounded) for the subscription's and the connection's last
 * callbacks. */
static void wait_closed(rt_sync_transport *tp)
{
    struct timespec until = ts_of(rt_sync_now_us() + 5000000u);
    pthread_mutex_lock(&tp->mu);
    while ((!tp->sub_done && tp->sub) || (!tp->closed && tp->nc))
        if (pthread_cond_timedwait(&tp->cv, &tp->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&tp->mu);
}

void rt_sync_transport_stop(wsel_router *r, rt_sync *s)
{
    rt_sync_transport *tp = s->tp;
    if (!tp)
        return;
    if (tp->thread_started) {
        tp_flag(tp, &tp->stop);
        pthread_join(tp->thread, NULL);
        tp->thread_started = 0;
    }
    if (tp->nc && !(s->opt.flags & WSEL_ROUTER_SYNC_NO_GOODBYE) &&
        atomic_load(&s->connected)) {
        pthread_mutex_lock(&r->mu);
        size_t len = rt_sync_encode(r, RT_SYNC_BYE, tp->buf);
        pthread_mutex_unlock(&r->mu);
        if (natsConnection_Publish(tp->nc, s->subject, tp->buf, (int)len) == NATS_OK)
            natsConnection_FlushTimeout(tp->nc, s->opt.period_ms);
    }
    if (tp->sub)
        natsSubscription_Unsubscribe(tp->sub);
    if (tp->nc)
        natsConnection_Close(tp->nc);
    wait_closed(tp);
    natsSubscription_Destroy(tp->sub);
    natsConnection_Destroy(tp->nc);
    natsOptions_Destroy(tp->no);
    tp->sub = NULL;
    tp->nc = NULL;
    tp->no = NULL;
}

void rt_sync_transport_free(rt_sync *s)
{
    rt_sync_transport *tp = s->tp;
    if (!tp)
        return;
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp->buf);
    free(tp);
    s->tp = NULL;
}
