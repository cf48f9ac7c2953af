// SPDX-License-Identifier: Apache-2.0
/*
 * kvsub.c -- the KV event threads, started with the router in event mode:
 * the receiving thread holds one ZeroMQ SUB socket per (worker, rank) and
 * decodes each message (rt_kv_decode: the bulk of the work, no router
 * lock) into one of KV_PIPE decoders; the applying thread takes decoded
 * messages in order and applies them to the index under the router's
 * mutex (rt_kv_commit). With kv_threads LOW every one of them, and
 * ZeroMQ's I/O thread, runs in SCHED_BATCH (a thread woken by an event
 * does not preempt a running route), and the receiving thread, which does
 * most of the work, also 10 above the caller's nice, at most 19 (a route
 * preempts it); the applying thread keeps the caller's nice, so the thread
 * that holds the router's mutex is never one that others hold off the CPU
 * for long.
 *
 * A restarted engine starts with an empty cache, and the index must drop
 * what the old process held. Each SUB socket has a ZeroMQ monitor: once
 * its publisher has disconnected, the first batch whose sequence number
 * does not continue the old numbering (a new process numbers from 0,
 * and a fast one may be past the old count by the time the socket has
 * reconnected; a batch lost with the connection leaves a gap) clears the
 * rank before it is applied, so a rank is never shown warm with blocks an engine no
 * longer holds (an engine that only lost its connection is re-learned
 * from its next stores). rt_kv_commit also clears a rank whose numbering
 * goes back, for messages applied without this thread.
 *
 * Other threads ask the receiving thread to subscribe or unsubscribe
 * through a queue guarded by its own mutex and a wake-up over an inproc
 * PAIR; it never holds that mutex and the router's at once. They post
 * holding the router's mutex (lock order: the router's, then the queue's),
 * so requests queue in the order the topology changed. The two threads
 * share only the decoders' ring, under its own mutex.
 */
#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "router_internal.h"

typedef struct kv_op {
    int add;
    uint64_t worker_id;
    uint32_t dp_size;
    char **endpoints; /* owned by the op until the thread takes them */
    uint32_t slot[RT_MAX_DP], gen[RT_MAX_DP]; /* each rank's, when added */
    struct kv_op *next;
} kv_op;

typedef struct kv_sock {
    uint64_t worker_id;
    uint32_t rank;
    uint32_t slot, gen; /* the incarnation it was opened for */
    void *sock;
    void *mon;         /* its monitor's PAIR: disconnections */
    int lost;          /* disconnected since the last batch */
    int has_seq;
    uint64_t last_seq; /* the last batch received */
} kv_sock;

/* Decoded messages between the receiving and the applying thread. */
#define KV_PIPE 2

typedef struct kv_decoded {
    struct rt_decoder *d;
    uint64_t worker_id, seq;
    uint32_t rank;
    uint32_t slot, gen; /* the socket's incarnation */
    int reason;
    int restarted; /* clear the rank first: a new publisher */
} kv_decoded;

struct rt_kvsub {
    wsel_router *r;
    /* The ring: slots head .. head + count - 1 wait to be applied (the
     * applying thread's); the next one is the receiving thread's. */
    pthread_mutex_t pmu;
    pthread_cond_t pcv;
    kv_decoded pipe[KV_PIPE];
    unsigned head, count;
    int pipe_stop;
    pthread_t applier;
    void *ctx;
    void *wake_tx, *wake_rx;
    pthread_mutex_t kmu;
    kv_op *ops; /* pending, oldest first */
    kv_op **ops_tail;
    int stop;
    pthread_t thread;
    kv_sock *socks;
    size_t nsocks, cap;
};

static void free_op(kv_op *op)
{
    for (uint32_t i = 0; op->endpoints && i < op->dp_size; i++)
        free(op->endpoints[i]);
    free(op->endpoints);
    free(op);
}

static void close_sock(kv_sock *s)
{
    if (s->mon) {
        zmq_socket_monitor(s->sock, NULL, 0);
        zmq_close(s->mon);
    }
    zmq_close(s->sock);
}

/* A PAIR receiving sock's disconnections (NULL, logged, if none). */
static void *open_monitor(rt_kvsub *k, void *sock)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "inproc://wsel-kvmon-%p", sock);
    void *mon = zmq_socket(k->ctx, ZMQ_PAIR);
    if (!mon || zmq_socket_monitor(sock, addr, ZMQ_EVENT_DISCONNECTED) != 0 ||
        zmq_connect(mon, addr) != 0) {
        rt_log(k->r, WSEL_LOG_WARN, "KV events: no monitor (%s): a restarted engine "
               "is noticed only when its numbering goes back", zmq_strerror(zmq_errno()));
        if (mon)
            zmq_close(mon);
        return NULL;
    }
    return mon;
}

static void close_worker(rt_kvsub *k, uint64_t worker_id)
{
    size_t j = 0;
    for (size_t i = 0; i < k->nsocks; i++) {
        if (k->socks[i].worker_id == worker_id)
            close_sock(&k->socks[i]);
        else
            k->socks[j++] = k->socks[i];
    }
    k->nsocks = j;
}

static void open_worker(rt_kvsub *k, const kv_op *op)
{
    close_worker(k, op->worker_id);
    for (uint32_t rank = 0; rank < op->dp_size; rank++) {
        if (k->nsocks == k->cap) {
            size_t c = k->cap ? k->cap * 2 : 16;
            kv_sock *s = realloc(k->socks, c * sizeof(*s));
            if (!s)
                return;
            k->socks = s;
            k->cap = c;
        }
        void *sock = zmq_socket(k->ctx, ZMQ_SUB);
        int hwm = 100000, linger = 0;
        if (!sock || zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof(hwm)) != 0 ||
            zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
            zmq_setsockopt(sock, ZMQ_SUBSCRIBE, "", 0) != 0 ||
            zmq_connect(sock, op->endpoints[rank]) != 0) {
            rt_log(k->r, WSEL_LOG_ERROR, "KV events of worker %llu rank %u: %s: %s",
                   (unsigned long long)op->worker_id, rank, op->endpoints[rank],
                   zmq_strerror(zmq_errno()));
            if (sock)
                zmq_close(sock);
            continue;
        }
        k->socks[k->nsocks++] = (kv_sock){.worker_id = op->worker_id,
                                          .rank = rank,
                                          .slot = op->slot[rank],
                                          .gen = op->gen[rank],
                                          .sock = sock,
                                          .mon = open_monitor(k, sock)};
    }
}

static int take_ops(rt_kvsub *k)
{
    pthread_mutex_lock(&k->kmu);
    kv_op *ops = k->ops;
    int stop = k->stop;
    k->ops = NULL;
    k->ops_tail = &k->ops;
    pthread_mutex_unlock(&k->kmu);
    while (ops) {
        kv_op *next = ops->next;
        if (ops->add)
            open_worker(k, ops);
        else
            close_worker(k, ops->worker_id);
        free_op(ops);
        ops = next;
    }
    return stop;
}

/* A monitor event (two frames: event and value, then the endpoint). */
static void monitor_event(kv_sock *s)
{
    zmq_msg_t m;
    int more = 1;
    for (int i = 0; more; i++) {
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return;
        }
        if (i == 0 && zmq_msg_size(&m) >= 2) {
            uint16_t ev;
            memcpy(&ev, zmq_msg_data(&m), sizeof(ev));
            if (ev == ZMQ_EVENT_DISCONNECTED)
                s->lost = 1;
        }
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
}

/* After a disconnection, does this batch come from another publisher?
 * Batches that continue the numbering may still be the old connection's
 * (the monitor's event and the socket's input are not ordered), so the
 * mark stays until the numbering breaks. */
static int restarted(kv_sock *s, const kv_decoded *q)
{
    if (q->reason >= 0)
        return 0;
    int r = s->lost && s->has_seq && q->seq != s->last_seq + 1;
    if (r)
        s->lost = 0;
    s->has_seq = 1;
    s->last_seq = q->seq;
    return r;
}

static void receive(rt_kvsub *k, kv_sock *s)
{
    zmq_msg_t part[4];
    int n = 0, more = 1, extra = 0;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < 4)
            part[n++] = m;
        else {
            zmq_msg_close(&m);
            extra = 1;
        }
    }
    if (n > 0) {
        const void *frames[4];
        size_t sizes[4];
        for (int i = 0; i < n; i++) {
            frames[i] = zmq_msg_data(&part[i]);
            sizes[i] = zmq_msg_size(&part[i]);
        }
        /* The next slot, once the applying thread has freed one. */
        pthread_mutex_lock(&k->pmu);
        while (k->count == KV_PIPE)
            pthread_cond_wait(&k->pcv, &k->pmu);
        kv_decoded *q = &k->pipe[(k->head + k->count) % KV_PIPE];
        pthread_mutex_unlock(&k->pmu);
        q->worker_id = s->worker_id;
        q->rank = s->rank;
        q->slot = s->slot;
        q->gen = s->gen;
        q->reason = rt_kv_decode(k->r, q->d, s->rank, frames, sizes,
                                 extra ? 5u : (uint32_t)n, &q->seq);
        q->restarted = restarted(s, q);
        if (q->reason != WSEL_ENOMEM) { /* out of memory: dropped */
            pthread_mutex_lock(&k->pmu);
            k->count++;
            pthread_cond_broadcast(&k->pcv);
            pthread_mutex_unlock(&k->pmu);
        }
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&part[i]);
}

/* Drop what a rank's previous publisher held, if the rank is still the
 * one the socket was opened for. */
static void clear_rank(wsel_router *r, const kv_decoded *q)
{
    pthread_mutex_lock(&r->mu);
    uint32_t s = rt_slot_of(r, q->worker_id, q->rank);
    int cleared = s != RT_NIL && s == q->slot && r->slots[s].gen == q->gen;
    if (cleared) {
        rt_index_clear_slot(&r->ix, s);
        r->slots[s].has_seq = 0; /* the new numbering skips nothing */
        r->c.kv_cleared++;
    }
    pthread_mutex_unlock(&r->mu);
    if (cleared)
        rt_log(r, WSEL_LOG_INFO, "KV events of worker %llu rank %u: batch %llu does not "
               "continue the numbering after a disconnection: a new publisher, rank cleared",
               (unsigned long long)q->worker_id, q->rank, (unsigned long long)q->seq);
}

/* The applying thread: decoded messages in the order received, until
 * told to stop with none left. */
static void *applier_main(void *arg)
{
    rt_kvsub *k = arg;
    pthread_mutex_lock(&k->pmu);
    for (;;) {
        while (k->count == 0 && !k->pipe_stop)
            pthread_cond_wait(&k->pcv, &k->pmu);
        if (k->count == 0)
            break;
        kv_decoded *q = &k->pipe[k->head];
        pthread_mutex_unlock(&k->pmu);
        if (q->restarted)
            clear_rank(k->r, q);
        rt_kv_commit(k->r, q->d, q->worker_id, q->rank, q->seq, q->reason, q->slot,
                     q->gen);
        pthread_mutex_lock(&k->pmu);
        k->head = (k->head + 1) % KV_PIPE;
        k->count--;
        pthread_cond_broadcast(&k->pcv);
    }
    pthread_mutex_unlock(&k->pmu);
    return NULL;
}

static void *kvsub_main(void *arg)
{
    rt_kvsub *k = arg;
#ifdef SCHED_BATCH
    if (k->r->opt.kv_threads == WSEL_ROUTER_KV_THREADS_LOW) {
        /* 10 above the caller's nice (inherited), at most 19: never a
         * higher priority than the caller's, whatever its nice. */
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t)gettid());
        if (errno == 0)
            (void)setpriority(PRIO_PROCESS, (id_t)gettid(), nice < 9 ? nice + 10 : 19);
    }
#endif
    zmq_pollitem_t *items = NULL;
    size_t cap = 0;
    for (;;) {
        if (cap < 2 * k->nsocks + 1) {
            cap = 2 * k->nsocks + 16;
            zmq_pollitem_t *g = realloc(items, cap * sizeof(*g));
            if (!g)
                break;
            items = g;
        }
        items[0] = (zmq_pollitem_t){k->wake_rx, 0, ZMQ_POLLIN, 0};
        size_t n = k->nsocks;
        for (size_t i = 0; i < n; i++) {
            items[i + 1] = (zmq_pollitem_t){k->socks[i].sock, 0, ZMQ_POLLIN, 0};
            /* no monitor: a socket that never has input */
            items[n + i + 1] = (zmq_pollitem_t){
                k->socks[i].mon ? k->socks[i].mon : k->socks[i].sock, 0,
                k->socks[i].mon ? ZMQ_POLLIN : 0, 0};
        }
        if (zmq_poll(items, (int)(2 * n) + 1, -1) < 0)
            continue; /* EINTR */
        /* a disconnection first: it came before the batches that follow */
        for (size_t i = 0; i < n; i++)
            if (items[n + i + 1].revents & ZMQ_POLLIN)
                monitor_event(&k->socks[i]);
        for (size_t i = 0; i < n; i++)
            if (items[i + 1].revents & ZMQ_POLLIN)
                receive(k, &k->socks[i]);
        if (items[0].revents & ZMQ_POLLIN) {
            char b;
            while (zmq_recv(k->wake_rx, &b, 1, ZMQ_DONTWAIT) >= 0) {
            }
            if (take_ops(k))
                break;
        }
    }
    free(items);
    for (size_t i = 0; i < k->nsocks; i++)
        close_sock(&k->socks[i]);
    k->nsocks = 0;
    return NULL;
}

static void post(rt_kvsub *k, kv_op *op)
{
    pthread_mutex_lock(&k->kmu);
    if (op) {
        *k->ops_tail = op;
        k->ops_tail = &op->next;
    } else {
        k->stop = 1;
    }
    zmq_send(k->wake_tx, "w", 1, ZMQ_DONTWAIT);
    pthread_mutex_unlock(&k->kmu);
}

/* A KV thread in the class the router asks for: LOW is SCHED_BATCH, set
 * here (glibc's thread attributes take only OTHER, FIFO and RR; a refusal
 * is logged and the thread keeps the normal class); the receiving thread
 * then sets its own nice to +10 (raising it is always allowed). */
static void set_batch(rt_kvsub *k, pthread_t t)
{
#ifdef SCHED_BATCH
    if (k->r->opt.kv_threads == WSEL_ROUTER_KV_THREADS_LOW) {
        struct sched_param sp = {0};
        int e = pthread_setschedparam(t, SCHED_BATCH, &sp);
        if (e != 0)
            rt_log(k->r, WSEL_LOG_WARN, "KV event threads: SCHED_BATCH refused (%s)",
                   strerror(e));
    }
#else
    (void)k;
    (void)t;
#endif
}

static int start_thread(rt_kvsub *k)
{
    int rc = pthread_create(&k->thread, NULL, kvsub_main, k);
    if (rc == 0)
        set_batch(k, k->thread);
    return rc;
}

static void free_pipe(rt_kvsub *k)
{
    for (int i = 0; i < KV_PIPE; i++)
        rt_decoder_free(k->pipe[i].d);
    pthread_cond_destroy(&k->pcv);
    pthread_mutex_destroy(&k->pmu);
}

int rt_kvsub_start(wsel_router *r)
{
    int have_applier = 0;
    rt_kvsub *k = calloc(1, sizeof(*k));
    if (!k)
        return WSEL_ENOMEM;
    k->r = r;
    k->ops_tail = &k->ops;
    pthread_mutex_init(&k->kmu, NULL);
    pthread_mutex_init(&k->pmu, NULL);
    pthread_cond_init(&k->pcv, NULL);
    for (int i = 0; i < KV_PIPE; i++)
        if (!(k->pipe[i].d = rt_decoder_new()))
            goto fail;
    /* The applying thread first: SCHED_BATCH at the caller's nice when
     * LOW (it holds the router's mutex, so it must never be starved). */
    if (pthread_create(&k->applier, NULL, applier_main, k) != 0)
        goto fail;
    have_applier = 1;
    set_batch(k, k->applier);
    char name[64];
    snprintf(name, sizeof(name), "inproc://wsel-router-%p", (void *)k);
    k->ctx = zmq_ctx_new();
#ifdef SCHED_BATCH
    /* ZeroMQ starts its I/O thread with the first socket, in this class
     * (not ZMQ_THREAD_PRIORITY: libzmq 4.3 turns it into nice -20). */
    if (k->ctx && r->opt.kv_threads == WSEL_ROUTER_KV_THREADS_LOW)
        (void)zmq_ctx_set(k->ctx, ZMQ_THREAD_SCHED_POLICY, SCHED_BATCH);
#endif
    /* Linger 0: a wake byte still queued when the router stops is dropped,
     * so zmq_ctx_term never waits for it. */
    int unlimited = 0, linger = 0;
    if (!k->ctx || !(k->wake_rx = zmq_socket(k->ctx, ZMQ_PAIR)) ||
        !(k->wake_tx = zmq_socket(k->ctx, ZMQ_PAIR)) ||
        zmq_setsockopt(k->wake_tx, ZMQ_SNDHWM, &unlimited, sizeof(unlimited)) != 0 ||
        zmq_setsockopt(k->wake_tx, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_bind(k->wake_rx, name) != 0 || zmq_connect(k->wake_tx, name) != 0 ||
        start_thread(k) != 0)
        goto fail;
    r->kvsub = k;
    return 0;
fail:
    if (have_applier) {
        pthread_mutex_lock(&k->pmu);
        k->pipe_stop = 1;
        pthread_cond_broadcast(&k->pcv);
        pthread_mutex_unlock(&k->pmu);
        pthread_join(k->applier, NULL);
    }
    if (k->wake_rx)
        zmq_close(k->wake_rx);
    if (k->wake_tx)
        zmq_close(k->wake_tx);
    if (k->ctx)
        zmq_ctx_term(k->ctx);
    free_pipe(k);
    pthread_mutex_destroy(&k->kmu);
    free(k);
    return WSEL_EIO;
}

int rt_kvsub_add(wsel_router *r, uint64_t worker_id, uint32_t dp_size,
                 char *const *endpoints, const uint32_t *slots, const uint32_t *gens)
{
    if (!r->kvsub)
        return WSEL_ESTATE;
    kv_op *op = calloc(1, sizeof(*op));
    if (!op)
        return WSEL_ENOMEM;
    op->add = 1;
    op->worker_id = worker_id;
    op->dp_size = dp_size;
    memcpy(op->slot, slots, dp_size * sizeof(*slots));
    memcpy(op->gen, gens, dp_size * sizeof(*gens));
    op->endpoints = calloc(dp_size, sizeof(char *));
    if (!op->endpoints) {
        free(op);
        return WSEL_ENOMEM;
    }
    for (uint32_t i = 0; i < dp_size; i++) {
        if (!(op->endpoints[i] = strdup(endpoints[i]))) {
            free_op(op);
            return WSEL_ENOMEM;
        }
    }
    post(r->kvsub, op);
    return 0;
}

void rt_kvsub_remove(wsel_router *r, uint64_t worker_id)
{
    if (!r->kvsub)
        return;
    kv_op *op = calloc(1, sizeof(*op));
    if (!op)
        return; /* its messages are then skipped as an unknown worker's */
    op->worker_id = worker_id;
    post(r->kvsub, op);
}

void rt_kvsub_stop(wsel_router *r)
{
    rt_kvsub *k = r->kvsub;
    if (!k)
        return;
    post(k, NULL);
    pthread_join(k->thread, NULL);
    /* The receiving thread is gone: what it decoded is applied, then the
     * applying thread ends. */
    pthread_mutex_lock(&k->pmu);
    k->pipe_stop = 1;
    pthread_cond_broadcast(&k->pcv);
    pthread_mutex_unlock(&k->pmu);
    pthread_join(k->applier, NULL);
    free_pipe(k);
    kv_op *op = k->ops;
    while (op) {
        kv_op *next = op->next;
        free_op(op);
        op = next;
    }
    free(k->socks);
    zmq_close(k->wake_rx);
    zmq_close(k->wake_tx);
    zmq_ctx_term(k->ctx);
    pthread_mutex_destroy(&k->kmu);
    free(k);
    r->kvsub = NULL;
}
