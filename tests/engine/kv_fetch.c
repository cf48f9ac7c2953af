// SPDX-License-Identifier: Apache-2.0
/*
 * kv_fetch.c -- test helper: ask a wsel-engine's KV event replay socket
 * (vLLM's ROUTER protocol) for every batch from a sequence number and
 * print one line per batch, "SEQ HEXPAYLOAD", until the end marker
 * (sequence -1). Decoding the payload is left to the test, so the check is
 * independent of the engine's msgpack encoder.
 *
 * usage: kv_fetch ENDPOINT START_SEQ TIMEOUT_MS   (exit 0, or 1 on timeout)
 *        kv_fetch --sub ENDPOINT TOPIC           subscribe to the PUB socket
 *
 *        kv_fetch --drain ENDPOINT...                  receive and drop
 *
 * With --sub it prints, for every message of exactly three frames whose
 * first is TOPIC and second 8 bytes, "SEQ HEXPAYLOAD" (flushed), and
 * "BAD" for any other message, until it is killed. With --drain it
 * subscribes to every ENDPOINT (up to 256) and receives every message
 * without looking at it, until it is killed: a bare subscriber, so that
 * engines publish their events in scripts/e2e.sh's baseline as they do
 * for the module (the latency bench's "plain, events drained").
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static void print_batch(const zmq_msg_t *seq_part, const zmq_msg_t *payload)
{
    const unsigned char *b = zmq_msg_data((zmq_msg_t *)seq_part);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    printf("%llu ", (unsigned long long)v);
    const unsigned char *p = zmq_msg_data((zmq_msg_t *)payload);
    for (size_t i = 0; i < zmq_msg_size((zmq_msg_t *)payload); i++)
        printf("%02x", p[i]);
    printf("\n");
    fflush(stdout);
}

static int subscribe(const char *endpoint, const char *topic)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_SUB);
    if (zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0) != 0 || zmq_connect(s, endpoint) != 0) {
        fprintf(stderr, "kv_fetch: %s: %s\n", endpoint, zmq_strerror(zmq_errno()));
        return 1;
    }
    for (;;) {
        zmq_msg_t part[4];
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, s, 0) < 0)
                return 1;
            more = zmq_msg_more(&m);
            if (n < 4)
                part[n++] = m;
            else
                zmq_msg_close(&m);
        }
        if (n == 3 && zmq_msg_size(&part[0]) == strlen(topic) &&
            memcmp(zmq_msg_data(&part[0]), topic, strlen(topic)) == 0 &&
            zmq_msg_size(&part[1]) == 8) {
            print_batch(&part[1], &part[2]);
        } else {
            printf("BAD\n");
            fflush(stdout);
        }
        for (int i = 0; i < n; i++)
            zmq_msg_close(&part[i]);
    }
}

static int drain(int n, char **endpoints)
{
    enum { MAX = 256 };
    zmq_pollitem_t items[MAX];
    if (n < 1 || n > MAX) {
        fprintf(stderr, "kv_fetch --drain: 1 to %d endpoints\n", MAX);
        return 2;
    }
    void *ctx = zmq_ctx_new();
    for (int i = 0; i < n; i++) {
        void *s = zmq_socket(ctx, ZMQ_SUB);
        if (!s || zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0) != 0 ||
            zmq_connect(s, endpoints[i]) != 0) {
            fprintf(stderr, "kv_fetch: %s: %s\n", endpoints[i],
                    zmq_strerror(zmq_errno()));
            return 1;
        }
        items[i] = (zmq_pollitem_t){s, 0, ZMQ_POLLIN, 0};
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    for (;;) {
        if (zmq_poll(items, n, -1) < 0)
            continue; /* EINTR */
        for (int i = 0; i < n; i++)
            if (items[i].revents & ZMQ_POLLIN)
                while (zmq_msg_recv(&m, items[i].socket, ZMQ_DONTWAIT) >= 0) {
                }
    }
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--sub") == 0)
        return subscribe(argv[2], argv[3]);
    if (argc >= 2 && strcmp(argv[1], "--drain") == 0)
        return drain(argc - 2, argv + 2);
    if (argc != 4) {
        fprintf(stderr, "usage: kv_fetch ENDPOINT START_SEQ TIMEOUT_MS\n");
        return 2;
    }
    uint64_t start = strtoull(argv[2], NULL, 10);
    int timeout = atoi(argv[3]), linger = 0, status = 1;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
    if (zmq_connect(s, argv[1]) != 0) {
        fprintf(stderr, "kv_fetch: %s: %s\n", argv[1], zmq_strerror(zmq_errno()));
        goto out_close;
    }
    unsigned char seq[8];
    for (int i = 0; i < 8; i++)
        seq[i] = (unsigned char)(start >> (56 - 8 * i));
    zmq_send(s, "", 0, ZMQ_SNDMORE);
    zmq_send(s, seq, 8, 0);
    for (;;) {
        zmq_msg_t part[3];
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, s, 0) < 0) {
                fprintf(stderr, "kv_fetch: no answer within %d ms\n", timeout);
                zmq_msg_close(&m);
                for (int i = 0; i < n; i++)
                    zmq_msg_close(&part[i]);
                goto out_close;
            }
            more = zmq_msg_more(&m);
            if (n < 3)
                part[n++] = m;
            else
                zmq_msg_close(&m);
        }
        int end = 0;
        if (n == 3 && zmq_msg_size(&part[1]) == 8) {
            const unsigned char *b = zmq_msg_data(&part[1]);
            uint64_t v = 0;
            for (int i = 0; i < 8; i++)
                v = v << 8 | b[i];
            end = v == UINT64_MAX;
            if (!end)
                print_batch(&part[1], &part[2]);
        } else {
            fprintf(stderr, "kv_fetch: a reply of %d frames\n", n);
            end = -1;
        }
        for (int i = 0; i < n; i++)
            zmq_msg_close(&part[i]);
        if (end) {
            status = end > 0 ? 0 : 1;
            break;
        }
    }
out_close:
    zmq_close(s);
    zmq_ctx_term(ctx);
    return status;
}
