// SPDX-License-Identifier: Apache-2.0
/*
 * kv_events.c -- the KV event publisher (kv_events.h): msgpack-c encodes
 * each rank's batch on the model thread; the publisher thread owns the
 * ZeroMQ sockets, numbers the batches and keeps them for replay.
 */
#include "kv_events.h"

#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define REPLAY_KEEP 10000 /* vLLM's buffer_steps */
#define STOP_RANK   UINT32_MAX
#define MAX_RANKS   64

typedef struct pending_event {
    int stored;
    int has_parent;
    int has_tokens;
    uint64_t parent;
    size_t hash_off, num_hashes;
    size_t token_off;
} pending_event;

typedef struct rank_queue {
    pending_event *ev;
    size_t n, cap;
    uint64_t *hashes;
    size_t nh, caph;
    uint32_t *tokens;
    size_t nt, capt;
    int failed; /* out of memory: the batch is dropped, as a full queue would */
} rank_queue;

typedef struct kept_batch {
    uint64_t seq;
    void *data;
    size_t size;
} kept_batch;

typedef struct rank_pub {
    void *pub;
    void *replay;
    char endpoint[256];
    char replay_endpoint[256];
    uint64_t next_seq;
    kept_batch *kept; /* ring of REPLAY_KEEP */
    size_t kept_head, kept_count;
} rank_pub;

struct eng_kv {
    void *ctx;
    void *in;  /* model thread's end of the inproc pair */
    void *out; /* publisher thread's end */
    char topic[256];
    uint32_t num_ranks;
    uint32_t block_size;
    uint32_t batch_form; /* ENG_KV_BATCH_* */
    rank_queue queue[MAX_RANKS];
    rank_pub rank[MAX_RANKS];
    pthread_t thread;
    int started;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *g = realloc(*p, c * elem);
    if (!g)
        return -1;
    *p = g;
    *cap = c;
    return 0;
}

/* "tcp://host:port" with port + offset; port 0 or * stays "*". */
static int offset_endpoint(const char *ep, uint32_t offset, char *out, size_t size)
{
    const char *colon = strrchr(ep, ':');
    if (strncmp(ep, "tcp://", 6) != 0 || !colon || colon < ep + 6)
        return -1;
    const char *port = colon + 1;
    if (strcmp(port, "*") == 0 || strcmp(port, "0") == 0) {
        snprintf(out, size, "%.*s:*", (int)(colon - ep), ep);
        return 0;
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (*end || p <= 0 || p + offset > 65535)
        return -1;
    snprintf(out, size, "%.*s:%ld", (int)(colon - ep), ep, p + (long)offset);
    return 0;
}

static int bind_socket(void *ctx, int type, const char *ep, uint32_t rank, void **sock,
                       char *bound, size_t bound_size, char *err, size_t err_size)
{
    char want[256];
    if (offset_endpoint(ep, rank, want, sizeof(want)) != 0) {
        snprintf(err, err_size, "%s: not tcp://HOST:PORT (PORT 0 or * = any)", ep);
        return -1;
    }
    *sock = zmq_socket(ctx, type);
    int hwm = 100000, linger = 0;
    if (!*sock || zmq_setsockopt(*sock, ZMQ_SNDHWM, &hwm, sizeof(hwm)) != 0 ||
        zmq_setsockopt(*sock, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_bind(*sock, want) != 0) {
        snprintf(err, err_size, "%s: %s", want, zmq_strerror(zmq_errno()));
        return -1;
    }
    size_t len = bound_size;
    if (zmq_getsockopt(*sock, ZMQ_LAST_ENDPOINT, bound, &len) != 0)
        snprintf(bound, bound_size, "%s", want);
    return 0;
}

static void keep(rank_pub *rp, uint64_t seq, const void *data, size_t size)
{
    void *copy = malloc(size ? size : 1);
    if (!copy)
        return;
    memcpy(copy, data, size);
    size_t slot;
    if (rp->kept_count == REPLAY_KEEP) {
        slot = rp->kept_head;
        free(rp->kept[slot].data);
        rp->kept_head = (rp->kept_head + 1) % REPLAY_KEEP;
    } else {
        slot = (rp->kept_head + rp->kept_count++) % REPLAY_KEEP;
    }
    rp->kept[slot] = (kept_batch){seq, copy, size};
}

static void seq_bytes(uint64_t seq, unsigned char out[8])
{
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(seq >> (56 - 8 * i));
}

/* One batch from the model thread: number it, publish it, keep it. */
static int publish_one(eng_kv *kv)
{
    uint32_t rank;
    if (zmq_recv(kv->out, &rank, sizeof(rank), 0) != (int)sizeof(rank))
        return -1;
    if (rank == STOP_RANK)
        return 1;
    zmq_msg_t payload;
    zmq_msg_init(&payload);
    if (zmq_msg_recv(&payload, kv->out, 0) < 0) {
        zmq_msg_close(&payload);
        return -1;
    }
    rank_pub *rp = &kv->rank[rank];
    uint64_t seq = rp->next_seq++;
    unsigned char sb[8];
    seq_bytes(seq, sb);
    keep(rp, seq, zmq_msg_data(&payload), zmq_msg_size(&payload));
    zmq_send(rp->pub, kv->topic, strlen(kv->topic), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(rp->pub, sb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(rp->pub, zmq_msg_data(&payload), zmq_msg_size(&payload), ZMQ_DONTWAIT);
    zmq_msg_close(&payload);
    return 0;
}

/* A replay request [identity, "", start seq]: every kept batch from there,
 * then sequence -1 with an empty payload. */
static void serve_replay(rank_pub *rp)
{
    zmq_msg_t part[3];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, rp->replay, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < 3)
            part[n++] = m;
        else
            zmq_msg_close(&m);
    }
    if (n == 3 && zmq_msg_size(&part[1]) == 0 && zmq_msg_size(&part[2]) == 8) {
        const unsigned char *b = zmq_msg_data(&part[2]);
        uint64_t start = 0;
        for (int i = 0; i < 8; i++)
            start = start << 8 | b[i];
        for (size_t i = 0; i < rp->kept_count; i++) {
            const kept_batch *k = &rp->kept[(rp->kept_head + i) % REPLAY_KEEP];
            if (k->seq < start)
                continue;
            unsigned char sb[8];
            seq_bytes(k->seq, sb);
            zmq_send(rp->replay, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]),
                     ZMQ_SNDMORE);
            zmq_send(rp->replay, "", 0, ZMQ_SNDMORE);
            zmq_send(rp->replay, sb, 8, ZMQ_SNDMORE);
            zmq_send(rp->replay, k->data, k->size, 0);
        }
        unsigned char end[8];
        memset(end, 0xff, sizeof(end)); /* -1, big-endian */
        zmq_send(rp->replay, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), ZMQ_SNDMORE);
        zmq_send(rp->replay, "", 0, ZMQ_SNDMORE);
        zmq_send(rp->replay, end, 8, ZMQ_SNDMORE);
        zmq_send(rp->replay, "", 0, 0);
    }
    for (int i = 0; i < n; i++)
        zmq_msg_close(&part[i]);
}

static void *publisher_main(void *arg)
{
    eng_kv *kv = arg;
    zmq_pollitem_t items[1 + MAX_RANKS];
    int n = 0;
    items[n++] = (zmq_pollitem_t){kv->out, 0, ZMQ_POLLIN, 0};
    for (uint32_t r = 0; r < kv->num_ranks; r++)
        if (kv->rank[r].replay)
            items[n++] = (zmq_pollitem_t){kv->rank[r].replay, 0, ZMQ_POLLIN, 0};
    for (;;) {
        if (zmq_poll(items, n, -1) < 0)
            continue; /* EINTR */
        if (items[0].revents & ZMQ_POLLIN) {
            int rc = publish_one(kv);
            if (rc > 0)
                break;
        }
        for (int i = 1, r = 0; i < n; i++, r++) {
            while (!kv->rank[r].replay)
                r++;
            if (items[i].revents & ZMQ_POLLIN)
                serve_replay(&kv->rank[r]);
        }
    }
    return NULL;
}

void eng_kv_close(eng_kv *kv)
{
    if (!kv)
        return;
    if (kv->started) {
        uint32_t stop = STOP_RANK;
        zmq_send(kv->in, &stop, sizeof(stop), 0);
        pthread_join(kv->thread, NULL);
    }
    for (uint32_t r = 0; r < MAX_RANKS; r++) {
        rank_pub *rp = &kv->rank[r];
        if (rp->pub)
            zmq_close(rp->pub);
        if (rp->replay)
            zmq_close(rp->replay);
        for (size_t i = 0; rp->kept && i < rp->kept_count; i++)
            free(rp->kept[(rp->kept_head + i) % REPLAY_KEEP].data);
        free(rp->kept);
        free(kv->queue[r].ev);
        free(kv->queue[r].hashes);
        free(kv->queue[r].tokens);
    }
    if (kv->in)
        zmq_close(kv->in);
    if (kv->out)
        zmq_close(kv->out);
    if (kv->ctx)
        zmq_ctx_term(kv->ctx);
    free(kv);
}

int eng_kv_open(eng_kv **out, const char *endpoint, const char *replay_endpoint,
                const char *topic, uint32_t num_ranks, uint32_t block_size, char *err,
                size_t err_size)
{
    eng_kv *kv = calloc(1, sizeof(*kv));
    if (!kv) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    kv->num_ranks = num_ranks;
    kv->block_size = block_size;
    snprintf(kv->topic, sizeof(kv->topic), "%s", topic ? topic : "");
    kv->ctx = zmq_ctx_new();
    if (!kv->ctx)
        goto fail_close;
    for (uint32_t r = 0; r < num_ranks; r++) {
        rank_pub *rp = &kv->rank[r];
        rp->kept = calloc(REPLAY_KEEP, sizeof(*rp->kept));
        if (!rp->kept) {
            snprintf(err, err_size, "out of memory");
            goto fail_close;
        }
        if (bind_socket(kv->ctx, ZMQ_PUB, endpoint, r, &rp->pub, rp->endpoint,
                        sizeof(rp->endpoint), err, err_size) != 0)
            goto fail_close;
        if (replay_endpoint &&
            bind_socket(kv->ctx, ZMQ_ROUTER, replay_endpoint, r, &rp->replay,
                        rp->replay_endpoint, sizeof(rp->replay_endpoint), err,
                        err_size) != 0)
            goto fail_close;
    }
    /* Linger 0 on the sending end: what is still queued at close is
     * dropped, so zmq_ctx_term never waits for it. */
    int unlimited = 0, linger = 0;
    kv->in = zmq_socket(kv->ctx, ZMQ_PAIR);
    kv->out = zmq_socket(kv->ctx, ZMQ_PAIR);
    if (!kv->in || !kv->out ||
        zmq_setsockopt(kv->in, ZMQ_SNDHWM, &unlimited, sizeof(unlimited)) != 0 ||
        zmq_setsockopt(kv->in, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
        zmq_setsockopt(kv->out, ZMQ_RCVHWM, &unlimited, sizeof(unlimited)) != 0 ||
        zmq_bind(kv->out, "inproc://wsel-kv-events") != 0 ||
        zmq_connect(kv->in, "inproc://wsel-kv-events") != 0) {
        snprintf(err, err_size, "inproc socket: %s", zmq_strerror(zmq_errno()));
        goto fail_close;
    }
    if (pthread_create(&kv->thread, NULL, publisher_main, kv) != 0) {
        snprintf(err, err_size, "cannot start the KV event thread");
        goto fail_close;
    }
    kv->started = 1;
    *out = kv;
    return 0;

fail_close:
    if (!kv->ctx)
        snprintf(err, err_size, "zmq: %s", zmq_strerror(zmq_errno()));
    eng_kv_close(kv);
    return -1;
}

const char *eng_kv_endpoint(const eng_kv *kv, uint32_t rank)
{
    return kv->rank[rank].endpoint;
}

const char *eng_kv_replay_endpoint(const eng_kv *kv, uint32_t rank)
{
    return kv->rank[rank].replay_endpoint;
}

void eng_kv_stored(eng_kv *kv, uint32_t rank, uint64_t hash, int has_parent,
                   uint64_t parent, const uint32_t *tokens)
{
    rank_queue *q = &kv->queue[rank];
    const size_t bs = kv->block_size;
    if (grow((void **)&q->hashes, &q->caph, q->nh + 1, sizeof(*q->hashes)) != 0 ||
        grow((void **)&q->tokens, &q->capt, q->nt + bs, sizeof(*q->tokens)) != 0 ||
        grow((void **)&q->ev, &q->cap, q->n + 1, sizeof(*q->ev)) != 0) {
        q->failed = 1;
        return;
    }
    pending_event *last = q->n ? &q->ev[q->n - 1] : NULL;
    int joins = last && last->stored && has_parent &&
                last->has_tokens == (tokens != NULL) &&
                q->hashes[last->hash_off + last->num_hashes - 1] == parent;
    if (!joins) {
        last = &q->ev[q->n++];
        *last = (pending_event){.stored = 1,
                                .has_parent = has_parent,
                                .has_tokens = tokens != NULL,
                                .parent = parent,
                                .hash_off = q->nh,
                                .token_off = q->nt};
    }
    q->hashes[q->nh++] = hash;
    last->num_hashes++;
    if (tokens) {
        memcpy(q->tokens + q->nt, tokens, bs * sizeof(*tokens));
        q->nt += bs;
    }
}

void eng_kv_removed(eng_kv *kv, uint32_t rank, uint64_t hash)
{
    rank_queue *q = &kv->queue[rank];
    if (grow((void **)&q->hashes, &q->caph, q->nh + 1, sizeof(*q->hashes)) != 0 ||
        grow((void **)&q->ev, &q->cap, q->n + 1, sizeof(*q->ev)) != 0) {
        q->failed = 1;
        return;
    }
    q->ev[q->n++] = (pending_event){.hash_off = q->nh, .num_hashes = 1};
    q->hashes[q->nh++] = hash;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void pack_event(msgpack_packer *pk, const rank_queue *q, const pending_event *ev,
                       uint32_t block_size)
{
    msgpack_pack_map(pk, ev->stored ? 8 : 3);
    pack_str(pk, "type");
    pack_str(pk, ev->stored ? "BlockStored" : "BlockRemoved");
    pack_str(pk, "block_hashes");
    msgpack_pack_array(pk, ev->num_hashes);
    for (size_t i = 0; i < ev->num_hashes; i++)
        msgpack_pack_uint64(pk, q->hashes[ev->hash_off + i]);
    if (ev->stored) {
        pack_str(pk, "parent_block_hash");
        if (ev->has_parent)
            msgpack_pack_uint64(pk, ev->parent);
        else
            msgpack_pack_nil(pk);
        pack_str(pk, "token_ids");
        size_t nt = ev->has_tokens ? ev->num_hashes * block_size : 0;
        msgpack_pack_array(pk, nt);
        for (size_t i = 0; i < nt; i++)
            msgpack_pack_uint32(pk, q->tokens[ev->token_off + i]);
        pack_str(pk, "block_size");
        msgpack_pack_uint32(pk, block_size);
        pack_str(pk, "lora_id");
        msgpack_pack_nil(pk);
    }
    pack_str(pk, "medium");
    pack_str(pk, "GPU");
    if (ev->stored) {
        pack_str(pk, "lora_name");
        msgpack_pack_nil(pk);
    }
}

const char *const eng_kv_batch_names[] = {"map", "array", NULL};

void eng_kv_set_batch_form(eng_kv *kv, uint32_t form)
{
    kv->batch_form = form;
}

void eng_kv_flush(eng_kv *kv)
{
    int array = kv->batch_form == ENG_KV_BATCH_ARRAY;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    for (uint32_t r = 0; r < kv->num_ranks; r++) {
        rank_queue *q = &kv->queue[r];
        if (q->n > 0 && !q->failed) {
            msgpack_sbuffer buf;
            msgpack_packer pk;
            msgpack_sbuffer_init(&buf);
            msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
            if (array) {
                msgpack_pack_array(&pk, 3);
            } else {
                msgpack_pack_map(&pk, 3);
                pack_str(&pk, "ts");
            }
            msgpack_pack_double(&pk, now);
            if (!array)
                pack_str(&pk, "events");
            msgpack_pack_array(&pk, q->n);
            for (size_t i = 0; i < q->n; i++)
                pack_event(&pk, q, &q->ev[i], kv->block_size);
            if (!array)
                pack_str(&pk, "data_parallel_rank");
            msgpack_pack_uint32(&pk, r);
            if (buf.data) {
                zmq_send(kv->in, &r, sizeof(r), ZMQ_SNDMORE);
                zmq_send(kv->in, buf.data, buf.size, 0);
            }
            msgpack_sbuffer_destroy(&buf);
        }
        q->n = q->nh = q->nt = 0;
        q->failed = 0;
    }
}
