// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_events.c -- KV events into the router's index, exact: stored
 * blocks re-hashed from their token ids match a request's own hashes;
 * parents chain across batches; removals, clears, sequence gaps; each
 * malformed or unknown input counted under its reason and nothing applied;
 * the ZeroMQ subscriber receiving from a PUB socket on 127.0.0.1
 * (waiting for a condition, never for a time), and routes running while
 * another thread applies large batches; the event threads' CPU class and
 * the CPU time events cost (wsel_router_read_kv_cpu).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <zmq.h>

#include "wsel_router.h"

#include "kvmsg.h"

#define BS 4u

static wsel_host *host;

/* An event-mode router with capacity_blocks `capacity` (0: the default). */
static wsel_router *make_cap(uint32_t capacity)
{
    assert_int_equal(wsel_host_create(NULL, &host), 0);
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = BS,
                             .kv_source = WSEL_ROUTER_KV_EVENTS,
                             .capacity_blocks = capacity,
                             .host = host};
    wsel_router *r;
    char err[256];
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), 0);
    return r;
}

static wsel_router *make(void)
{
    return make_cap(0);
}

static void done(wsel_router *r)
{
    wsel_router_destroy(r);
    wsel_host_destroy(host);
}

static void add(wsel_router *r, uint64_t id, uint32_t dp, const char *const *eps)
{
    char err[256];
    wsel_router_worker w = {
        .worker_id = id, .address = "127.0.0.1:1", .dp_size = dp, .kv_endpoints = eps};
    assert_int_equal(wsel_router_add_worker(r, &w, err, sizeof(err)), 0);
}

static uint32_t overlap_on(wsel_router *r, const uint32_t *t, uint32_t n, uint64_t worker,
                           uint32_t rank)
{
    /* Route, read which rank won and with what overlap, then finish. */
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = n};
    wsel_route_result res;
    assert_int_equal(wsel_router_route(r, &q, &res), 0);
    assert_int_equal(wsel_router_finished(r, res.request_id), 0);
    if (res.worker_id != worker || res.dp_rank != rank)
        return UINT32_MAX;
    return res.overlap_blocks;
}

static uint32_t cached(wsel_router *r, uint32_t row)
{
    wsel_router_rank_info ri[8];
    wsel_router_read_ranks(r, ri, 8);
    return (uint32_t)ri[row].cached_blocks;
}

/* The nice the receiving thread takes: 10 above the test's, at most 19. */
static int low_nice(void)
{
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    assert_int_equal(errno, 0);
    return nice < 9 ? nice + 10 : 19;
}

/* Threads of this process; *low = how many are in SCHED_BATCH, *niced =
 * how many of those at low_nice(). */
static int threads(int *low, int *niced)
{
    int want = low_nice();
    int n = 0;
    *low = *niced = 0;
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int tid = atoi(e->d_name);
        if (tid <= 0)
            continue;
        n++;
        if (sched_getscheduler(tid) == SCHED_BATCH) {
            (*low)++;
            errno = 0;
            if (getpriority(PRIO_PROCESS, (id_t)tid) == want && errno == 0)
                (*niced)++;
        }
    }
    closedir(d);
    return n;
}

/* By default every KV thread runs in SCHED_BATCH (the receiving one, the
 * applying one, ZeroMQ's) and the receiving thread alone 10 above the
 * caller's nice (at most 19: under `nice -n 10` too); with
 * WSEL_ROUTER_KV_THREADS_NORMAL every one keeps the caller's class; another
 * value is refused. The receiving thread sets its nice and ZeroMQ's threads
 * their class once they run: waited for. */
static void test_event_threads_class(void **state)
{
    (void)state;
    char err[256];
    wsel_router *r;
    assert_int_equal(wsel_host_create(NULL, &host), 0);
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = BS,
                             .kv_source = WSEL_ROUTER_KV_EVENTS,
                             .host = host};
    int low, niced, before = threads(&low, &niced); /* this one, a sanitizer's own */
    assert_int_equal(low, 0);

    o.kv_threads = WSEL_ROUTER_KV_THREADS_NORMAL + 1;
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), WSEL_EINVAL);
    assert_non_null(strstr(err, "kv_threads"));

    o.kv_threads = WSEL_ROUTER_KV_THREADS_NORMAL;
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), 0);
    add(r, 1, 1, (const char *const[]){"tcp://127.0.0.1:1"});
    threads(&low, &niced);
    assert_int_equal(low, 0);
    wsel_router_destroy(r);

    o.kv_threads = WSEL_ROUTER_KV_THREADS_LOW;
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), 0);
    add(r, 1, 1, (const char *const[]){"tcp://127.0.0.1:1"});
    /* Run at nice 19 (ctest under `nice -n 19`), every thread already has
     * the receiving thread's nice: only the class tells them apart. */
    errno = 0;
    int at_19 = getpriority(PRIO_PROCESS, 0) == 19 && errno == 0;
    while (threads(&low, &niced) - low != before || (!at_19 && niced != 1))
        sched_yield();
    assert_true(low >= 3); /* receiving, applying, ZeroMQ's I/O thread */
    wsel_router_destroy(r);
    /* Joined threads may stay listed in /proc for a moment: waited for (a
     * thread that outlived destroy would hang here until CTest's timeout). */
    while (threads(&low, &niced), low != 0)
        sched_yield();
    wsel_host_destroy(host);
}
static void test_stored_matches_request(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 7, 2, NULL);
    add(r, 9, 1, NULL);
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = 500 + i;
    uint64_t eh[4] = {0x1111, 0x2222, 0x3333, 0x4444}; /* the engine's own hashes */
    kvmsg m;
    kv_begin(&m, 1, 1);
    kv_stored(&m, eh, 2, 0, 0, t, BS);
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 7, 1, &m, 0), 0);
    assert_int_equal(cached(r, 1), 2);
    /* The request hashes its own tokens: rank (7, 1) holds its first two. */
    assert_int_equal(overlap_on(r, t, 16, 7, 1), 2);
    /* The next blocks arrive in a later batch, parent = the engine's hash. */
    kv_begin(&m, 1, 1);
    kv_stored(&m, eh + 2, 2, 1, eh[1], t + 8, BS);
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 7, 1, &m, 1), 0);
    assert_int_equal(overlap_on(r, t, 16, 7, 1), 4);
    /* Removing block 2 cuts the prefix at 2 (block 3 stays cached). */
    kv_begin(&m, 1, 1);
    kv_removed(&m, eh[2]);
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 7, 1, &m, 2), 0);
    assert_int_equal(cached(r, 1), 3);
    assert_int_equal(overlap_on(r, t, 16, 7, 1), 2);
    /* A parent the index does not know: that event is skipped, counted. */
    kv_begin(&m, 1, 1);
    kv_stored(&m, eh + 2, 1, 1, 0xdead, t + 8, BS);
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 7, 1, &m, 3), 0);
    assert_int_equal(cached(r, 1), 3);
    /* Sequence 3 -> 7: three batches lost. */
    kv_begin(&m, 1, 1);
    kv_typed(&m, "AllBlocksCleared");
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 7, 1, &m, 7), 0);
    assert_int_equal(cached(r, 1), 0);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.kv_messages, 5);
    assert_int_equal(c.kv_blocks_stored, 4);
    assert_int_equal(c.kv_blocks_removed, 1);
    assert_int_equal(c.kv_cleared, 1);
    assert_int_equal(c.kv_seq_gaps, 3);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_PARENT], 1);
    assert_int_equal(c.index_entries, 0);
    done(r);
}

/* read_overlaps answers each row's overlap of a prompt in canonical order,
 * up to max rows, without routing (no route counted, no load moved). */
static void test_read_overlaps_every_row_without_routing(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 9, 1, NULL);
    add(r, 7, 2, NULL);
    uint32_t t[12];
    for (uint32_t i = 0; i < 12; i++)
        t[i] = 900 + i;
    uint64_t eh[2] = {0x51, 0x52};
    kvmsg m;
    kv_begin(&m, 1, 1);
    kv_stored(&m, eh, 2, 0, 0, t, BS);
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 7, 1, &m, 0), 0);
    uint32_t ov[3] = {99, 99, 99};
    assert_int_equal(wsel_router_read_overlaps(r, t, 12, ov, 3), 3);
    assert_int_equal(ov[0], 0); /* (7, 0) */
    assert_int_equal(ov[1], 2); /* (7, 1) */
    assert_int_equal(ov[2], 0); /* (9, 0) */
    uint32_t one[1] = {99};
    assert_int_equal(wsel_router_read_overlaps(r, t + 4, 8, one, 1), 3);
    assert_int_equal(one[0], 0); /* the prefix starts at block 0 */
    assert_int_equal(wsel_router_read_overlaps(r, NULL, 4, ov, 3), 0);
    assert_int_equal(wsel_router_read_overlaps(r, t, 12, NULL, 0), 3);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.routes, 0);
    done(r);
}

/* Token ids of every msgpack width in one batch (positive fixint, uint 8,
 * 16 and 32: a vocabulary above 65,536 mixes the last two), in runs and
 * mixed id by id: re-hashed, they match the request's own hashes. */
static void test_ids_of_every_width(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 7, 1, NULL);
    add(r, 9, 1, NULL);
    enum { N = 16 * BS };
    uint32_t t[N];
    for (uint32_t i = 0; i < N; i++)
        t[i] = i < 24       ? 300 + i                          /* uint 16 run */
               : i < 40     ? (i % 2 ? 70000u + i : 1000u + i) /* 32 / 16 mixed */
               : i % 4 == 0 ? 5                                /* fixint */
               : i % 4 == 1 ? 200                              /* uint 8 */
               : i % 4 == 2 ? 4000000000u - i                  /* uint 32 */
                            : 65535;                           /* uint 16 */
    uint64_t eh[16];
    for (uint32_t i = 0; i < 16; i++)
        eh[i] = 0x7000 + i;
    kvmsg m;
    kv_begin(&m, 1, 0);
    kv_stored(&m, eh, 16, 0, 0, t, BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 7, 0, &m, 0), 0);
    assert_int_equal(cached(r, 0), 16);
    assert_int_equal(overlap_on(r, t, N, 7, 0), 16);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.kv_blocks_stored, 16);
    done(r);
}

/* The KV events' CPU bill: every message counted, applied or skipped;
 * some CPU time spent; a caller's older, shorter struct written only as
 * far as its struct_size; zero with routing history. */
static void test_kv_cpu_bill(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 7, 1, NULL);
    uint32_t t[8];
    for (uint32_t i = 0; i < 8; i++)
        t[i] = 900 + i;
    uint64_t eh[2] = {0x51, 0x52};
    kvmsg m;
    for (uint64_t seq = 0; seq < 3; seq++) {
        kv_begin(&m, 1, 0);
        kv_stored(&m, eh, 2, 0, 0, t, BS);
        kv_end(&m, 0);
        assert_int_equal(kv_send(r, 7, 0, &m, seq), 0);
    }
    const void *f[3] = {"", "12345678", "\xc1"}; /* 0xc1: never valid msgpack */
    size_t sz[3] = {0, 8, 1};
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f, sz, 3), WSEL_EINVAL);
    wsel_router_kv_cpu k = {.struct_size = sizeof(k)};
    assert_int_equal(wsel_router_read_kv_cpu(r, &k), 0);
    assert_int_equal(k.struct_size, sizeof(k));
    assert_int_equal(k.messages, 4);
    assert_true(k.decode_ns + k.apply_ns > 0);
    /* A struct that ends after `messages`: decode_ns is not written. */
    wsel_router_kv_cpu old = {.struct_size = offsetof(wsel_router_kv_cpu, decode_ns),
                              .decode_ns = 12345};
    assert_int_equal(wsel_router_read_kv_cpu(r, &old), 0);
    assert_int_equal(old.messages, 4);
    assert_int_equal(old.decode_ns, 12345);
    wsel_router_kv_cpu tiny = {.struct_size = 4};
    assert_int_equal(wsel_router_read_kv_cpu(r, &tiny), WSEL_EINVAL);
    assert_int_equal(wsel_router_read_kv_cpu(r, NULL), WSEL_EINVAL);
    done(r);

    assert_int_equal(wsel_host_create(NULL, &host), 0);
    wsel_router_options o = {.struct_size = sizeof(o), .block_size = BS, .host = host};
    char err[256];
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), 0);
    add(r, 7, 1, NULL);
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = 8};
    wsel_route_result res;
    assert_int_equal(wsel_router_route(r, &q, &res), 0);
    k = (wsel_router_kv_cpu){.struct_size = sizeof(k)};
    assert_int_equal(wsel_router_read_kv_cpu(r, &k), 0);
    assert_int_equal(k.messages + k.decode_ns + k.apply_ns, 0);
    done(r);
}

static void test_bad_input_counted(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 7, 2, NULL);
    uint32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t eh[2] = {1, 2};
    kvmsg m;
    /* Unknown type between two good events: skipped alone. */
    kv_begin(&m, 3, 0);
    kv_stored(&m, eh, 1, 0, 0, t, BS);
    kv_typed(&m, "BlockMoved");
    kv_stored(&m, eh + 1, 1, 1, eh[0], t + 4, BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 7, 0, &m, 0), 0);
    assert_int_equal(cached(r, 0), 2);
    /* A whole batch is refused for one bad event, even after good ones. */
    uint64_t more[2] = {10, 11};
    kv_begin(&m, 2, 0);
    kv_stored(&m, more, 1, 0, 0, t, BS);
    kv_stored(&m, more + 1, 1, 0, 0, t, BS + 1); /* another block size */
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 7, 0, &m, 1), WSEL_EINVAL);
    kv_begin(&m, 1, 0);
    kv_stored(&m, more, 1, 0, 0, NULL, BS); /* no token ids */
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 7, 0, &m, 2), WSEL_EINVAL);
    /* The payload names rank 1 on rank 0's socket; an unknown worker. */
    kv_begin(&m, 1, 1);
    kv_stored(&m, more, 1, 0, 0, t, BS);
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 7, 0, &m, 3), WSEL_ENOENT);
    kv_begin(&m, 1, 0);
    kv_stored(&m, more, 1, 0, 0, t, BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 8, 0, &m, 0), WSEL_ENOENT);
    /* Not msgpack; two values; not a batch; wrong frames. */
    unsigned char sb[8] = {0};
    const void *f3[3] = {"", sb, "\xc1"};
    size_t s3[3] = {0, 8, 1};
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f3, s3, 3), WSEL_EINVAL);
    f3[2] = "\x01\x02";
    s3[2] = 2;
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f3, s3, 3), WSEL_EINVAL);
    f3[2] = "\x93\x01\x02\x03"; /* [1, 2, 3]: events not an array */
    s3[2] = 4;
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f3, s3, 3), WSEL_EINVAL);
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f3, s3, 2), WSEL_EINVAL);
    s3[1] = 4;
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f3, s3, 3), WSEL_EINVAL);
    /* An array32 header claiming 2^32 - 1 elements in a 5-byte message:
     * refused before msgpack would allocate 64 GiB for it. */
    s3[1] = 8;
    f3[2] = "\xdd\xff\xff\xff\xff";
    s3[2] = 5;
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f3, s3, 3), WSEL_EINVAL);
    /* A str32 claiming 4 GiB inside a fixarray. */
    f3[2] = "\x91\xdb\xff\xff\xff\xff";
    s3[2] = 6;
    assert_int_equal(wsel_router_apply_kv_message(r, 7, 0, f3, s3, 3), WSEL_EINVAL);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.kv_messages, 1);
    assert_int_equal(c.kv_blocks_stored, 2);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_UNKNOWN_TYPE], 1);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_BLOCK_SIZE], 1);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_TOKENS], 1);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_RANK], 2);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_MSGPACK], 4);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_SHAPE], 1);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_FRAMES], 2);
    /* Nothing refused reached the index. */
    assert_int_equal(c.index_entries, 2);
    assert_int_equal(cached(r, 0), 2);
    assert_int_equal(cached(r, 1), 0);
    done(r);
}

/* vLLM's older positional encoding is read too. */
static void test_positional(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 7, 1, NULL);
    uint32_t t[4] = {9, 8, 7, 6};
    kvmsg m;
    msgpack_sbuffer_init(&m.buf);
    msgpack_packer_init(&m.pk, &m.buf, msgpack_sbuffer_write);
    msgpack_pack_array(&m.pk, 3);
    msgpack_pack_double(&m.pk, 1.0);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_array(&m.pk, 7);
    kv_str(&m, "BlockStored");
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_int64(&m.pk, -5); /* a signed hash, as Python ints can be */
    msgpack_pack_nil(&m.pk);
    msgpack_pack_array(&m.pk, 4);
    for (int i = 0; i < 4; i++)
        msgpack_pack_uint32(&m.pk, t[i]);
    msgpack_pack_uint32(&m.pk, BS);
    msgpack_pack_nil(&m.pk);
    kv_str(&m, "GPU");
    msgpack_pack_uint32(&m.pk, 0);
    assert_int_equal(kv_send(r, 7, 0, &m, 0), 0);
    assert_int_equal(overlap_on(r, t, 4, 7, 0), 1);
    done(r);
}

/* A message whose last objects are a run of small integers (vLLM's older
 * positional BlockRemoved, [tag, hashes] with no rank after it, of eight
 * hashes below 65,536): the parser reaches the end of the message on an
 * integer and must accept it, not read on. */
static void test_message_ending_in_a_run(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 7, 1, NULL);
    uint32_t t[8 * BS];
    for (uint32_t i = 0; i < 8 * BS; i++)
        t[i] = 40 + i;
    uint64_t eh[8];
    for (uint32_t i = 0; i < 8; i++)
        eh[i] = 300 + i;
    kvmsg m;
    kv_begin(&m, 1, 0);
    kv_stored(&m, eh, 8, 0, 0, t, BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 7, 0, &m, 0), 0);
    assert_int_equal(cached(r, 0), 8);
    msgpack_sbuffer_init(&m.buf);
    msgpack_packer_init(&m.pk, &m.buf, msgpack_sbuffer_write);
    msgpack_pack_array(&m.pk, 2);
    msgpack_pack_double(&m.pk, 1.0);
    msgpack_pack_array(&m.pk, 1);
    msgpack_pack_array(&m.pk, 2);
    kv_str(&m, "BlockRemoved");
    msgpack_pack_array(&m.pk, 8);
    for (uint32_t i = 0; i < 8; i++)
        msgpack_pack_uint64(&m.pk, eh[i]); /* 0xcd and two bytes each */
    assert_int_equal(kv_send(r, 7, 0, &m, 1), 0);
    assert_int_equal(cached(r, 0), 0);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.kv_blocks_removed, 8);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_MSGPACK], 0);
    done(r);
}

/* A PUB socket (pub_new), bound to a free loopback port (pub_at: its
 * endpoint in ep). Linger 0: what it still queues when closed is dropped,
 * so zmq_ctx_term never waits on a subscriber that is gone (it could wait
 * forever). */
static void *pub_new(void *ctx)
{
    void *pub = zmq_socket(ctx, ZMQ_PUB);
    assert_non_null(pub);
    int linger = 0;
    assert_int_equal(zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof(linger)), 0);
    return pub;
}

static void *pub_at(void *ctx, char *ep, size_t size)
{
    void *pub = pub_new(ctx);
    assert_int_equal(zmq_bind(pub, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(pub, ZMQ_LAST_ENDPOINT, ep, &size), 0);
    return pub;
}

/* The subscriber: a PUB socket here, the router's SUB connecting to it. */
static void test_zmq_subscriber(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pub = pub_at(ctx, ep, sizeof(ep));
    wsel_router *r = make();
    const char *eps[1] = {ep};
    add(r, 3, 1, eps);
    uint32_t t[8] = {11, 12, 13, 14, 15, 16, 17, 18};
    /* A slow joiner misses what is sent before it connects: resend a
     * clear-and-store batch until the router has applied one. */
    wsel_router_counters c;
    uint64_t seq = 0;
    do {
        uint64_t eh[2] = {100, 200};
        kvmsg m;
        kv_begin(&m, 2, 0);
        kv_typed(&m, "AllBlocksCleared");
        kv_stored(&m, eh, 2, 0, 0, t, BS);
        kv_end(&m, 0);
        unsigned char sb[8];
        for (int i = 0; i < 8; i++)
            sb[i] = (unsigned char)(seq >> (56 - 8 * i));
        seq++;
        zmq_send(pub, "", 0, ZMQ_SNDMORE);
        zmq_send(pub, sb, 8, ZMQ_SNDMORE);
        zmq_send(pub, m.buf.data, m.buf.size, 0);
        msgpack_sbuffer_destroy(&m.buf);
        zmq_pollitem_t none[1] = {{NULL, -1, 0, 0}};
        zmq_poll(none, 0, 5); /* pace the resends; correctness waits on the counter */
        wsel_router_read_counters(r, &c);
    } while (c.kv_messages == 0);
    assert_int_equal(cached(r, 0), 2);
    assert_int_equal(overlap_on(r, t, 8, 3, 0), 2);
    /* Removing the worker drops its subscription; later sends are ignored. */
    assert_int_equal(wsel_router_remove_worker(r, 3), 0);
    done(r);
    zmq_close(pub);
    zmq_ctx_term(ctx);
}

/* --- routes while large batches apply ------------------------------------ */

enum { BIG_MSGS = 16, BIG_BLOCKS = 256, BIG_ROUTES = 2000 };

typedef struct big_job {
    wsel_router *r;
    int32_t rc[BIG_MSGS];
} big_job;

/* The event side: BIG_MSGS batches of BIG_BLOCKS chained blocks each, one
 * per message, all on worker 1 rank 0, applied one after the other. */
static void *apply_big(void *arg)
{
    big_job *j = arg;
    static uint32_t t[BIG_BLOCKS * BS];
    uint64_t h[BIG_BLOCKS];
    for (uint32_t m = 0; m < BIG_MSGS; m++) {
        for (uint32_t i = 0; i < BIG_BLOCKS * BS; i++)
            t[i] = 1000000 * (m + 1) + i;
        for (uint32_t i = 0; i < BIG_BLOCKS; i++)
            h[i] = (uint64_t)m * BIG_BLOCKS + i + 1;
        kvmsg km;
        kv_begin(&km, 1, 0);
        kv_stored(&km, h, BIG_BLOCKS, 0, 0, t, BS);
        kv_end(&km, 0);
        j->rc[m] = kv_send(j->r, 1, 0, &km, m);
    }
    return NULL;
}

/* Routes, first tokens and finishes on one thread while another applies
 * large KV batches (which hand the mutex to waiting routes between slices
 * of 32 blocks): every block and every route counted, no load left, the
 * last batch found whole. Correct in any interleaving; under TSan the
 * check that the hand-over races with nothing. */
static void test_routes_while_large_batches_apply(void **state)
{
    (void)state;
    wsel_router *r = make();
    add(r, 1, 2, NULL);
    add(r, 2, 2, NULL);
    big_job j = {.r = r};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, apply_big, &j), 0);
    uint32_t t[8 * BS];
    for (uint32_t i = 0; i < 8 * BS; i++)
        t[i] = 7 + i;
    for (uint32_t k = 0; k < BIG_ROUTES; k++) {
        wsel_route_request q = {
            .struct_size = sizeof(q), .tokens = t, .num_tokens = 8 * BS};
        wsel_route_result res;
        assert_int_equal(wsel_router_route(r, &q, &res), 0);
        assert_int_equal(wsel_router_first_token(r, res.request_id), 0);
        assert_int_equal(wsel_router_finished(r, res.request_id), 0);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    for (uint32_t m = 0; m < BIG_MSGS; m++)
        assert_int_equal(j.rc[m], 0);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.kv_messages, BIG_MSGS);
    assert_int_equal(c.kv_blocks_stored, BIG_MSGS * BIG_BLOCKS);
    assert_int_equal(c.index_entries, BIG_MSGS * BIG_BLOCKS);
    assert_int_equal(c.routes, BIG_ROUTES);
    wsel_router_rank_info ri[4];
    assert_int_equal(wsel_router_read_ranks(r, ri, 4), 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ri[i].active_requests, 0);
        assert_int_equal(ri[i].active_prefill_tokens, 0);
        assert_int_equal(ri[i].active_blocks, 0);
    }
    /* The last batch's prompt is cached whole on worker 1 rank 0. */
    static uint32_t last[BIG_BLOCKS * BS];
    for (uint32_t i = 0; i < BIG_BLOCKS * BS; i++)
        last[i] = 1000000 * BIG_MSGS + i;
    assert_int_equal(overlap_on(r, last, BIG_BLOCKS * BS, 1, 0), BIG_BLOCKS);
    done(r);
}

/* --- a worker removed and re-added under the same id ---------------------- */

/* Publish one batch of one stored block (engine hash h, tokens from base). */
static void pub_block(void *pub, uint64_t h, uint32_t base, uint64_t seq)
{
    uint32_t t[BS];
    for (uint32_t i = 0; i < BS; i++)
        t[i] = base + i;
    kvmsg m;
    kv_begin(&m, 1, 0);
    kv_stored(&m, &h, 1, 0, 0, t, BS);
    kv_end(&m, 0);
    unsigned char sb[8];
    for (int i = 0; i < 8; i++)
        sb[i] = (unsigned char)(seq >> (56 - 8 * i));
    zmq_send(pub, "", 0, ZMQ_SNDMORE);
    zmq_send(pub, sb, 8, ZMQ_SNDMORE);
    zmq_send(pub, m.buf.data, m.buf.size, 0);
    msgpack_sbuffer_destroy(&m.buf);
}

/* Publish fresh blocks on pub until row `row` caches more than `have`
 * (a slow joiner misses the first ones); returns the new count. */
static uint32_t pub_until_cached(wsel_router *r, void *pub, uint32_t row, uint32_t have,
                                 uint64_t *seq)
{
    uint32_t n;
    do {
        pub_block(pub, 1000000 + *seq, 5000000 + (uint32_t)*seq * BS, *seq);
        (*seq)++;
        zmq_pollitem_t none[1] = {{NULL, -1, 0, 0}};
        zmq_poll(none, 0, 1); /* pace the resends; correctness waits on the count */
    } while ((n = cached(r, row)) <= have);
    return n;
}

/* Publish block (h, base) with numbers from *seq on until row 0 holds it:
 * then everything published before it on that connection is applied. */
static void pub_marker(wsel_router *r, void *pub, uint64_t h, uint32_t base, uint64_t *seq)
{
    uint32_t t[BS], ov[8];
    for (uint32_t i = 0; i < BS; i++)
        t[i] = base + i;
    do {
        pub_block(pub, h, base, (*seq)++);
        zmq_pollitem_t none[1] = {{NULL, -1, 0, 0}};
        zmq_poll(none, 0, 1); /* pace the resends; correctness waits on the index */
        wsel_router_read_overlaps(r, t, BS, ov, 8);
    } while (ov[0] != 1);
}

/* An engine restarted on the same port: each new process's numbering goes
 * back (from 0) or past the old one (a fast publisher). Its first batch
 * clears the rank, counted once, and skips no number; what the old one
 * stored is gone. */
static void test_restarted_publisher_cleared_once(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pub = pub_at(ctx, ep, sizeof(ep));
    wsel_router *r = make();
    const char *eps[1] = {ep};
    add(r, 3, 1, eps);
    uint64_t seq = 0;
    pub_marker(r, pub, 1, 100000, &seq);
    const uint64_t first_seq[2] = {0, 1000000};
    for (uint32_t life = 0; life < 2; life++) {
        zmq_close(pub);
        pub = pub_new(ctx);
        while (zmq_bind(pub, ep) != 0) { /* until the old listener has closed */
            assert_int_equal(zmq_errno(), EADDRINUSE);
            zmq_pollitem_t none[1] = {{NULL, -1, 0, 0}};
            zmq_poll(none, 0, 1);
        }
        seq = first_seq[life];
        pub_marker(r, pub, 2 + life, 200000 + 100000 * life, &seq);
        wsel_router_counters c;
        wsel_router_read_counters(r, &c);
        assert_int_equal(c.kv_cleared, life + 1);
        assert_int_equal(c.kv_seq_gaps, 0);
        assert_int_equal(cached(r, 0), 1); /* the marker, resent: one entry */
    }
    done(r);
    zmq_close(pub);
    zmq_ctx_term(ctx);
}

enum { READD_ROUNDS = 8, READD_BURST = 32 };

/* Worker 3 publishes a burst of stored blocks and is at once removed and
 * re-added under the same id without KV endpoints: its new incarnation
 * must never receive its old one's events, whatever the KV threads had
 * queued or decoded (they are skipped as an unknown rank). Worker 9's
 * events, sent after the re-add and applied in order behind anything of
 * worker 3's that was still on its way, tell when there is nothing left to
 * wait for: two of them, one after the other (the first may be read in the
 * receiving thread's pass that reads the removal's request). */
static void test_readd_drops_old_events(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    char epx[256], epz[256];
    void *px = pub_at(ctx, epx, sizeof(epx));
    void *pz = pub_at(ctx, epz, sizeof(epz));
    wsel_router *r = make();
    const char *ex[1] = {epx}, *ez[1] = {epz};
    add(r, 3, 1, NULL); /* row 0 */
    add(r, 9, 1, ez);   /* row 1 */
    uint64_t seq = 0, zseq = 0;
    uint32_t zc = pub_until_cached(r, pz, 1, 0, &zseq);
    for (uint32_t round = 0; round < READD_ROUNDS; round++) {
        assert_int_equal(wsel_router_remove_worker(r, 3), 0);
        add(r, 3, 1, ex);
        pub_until_cached(r, px, 0, 0, &seq);
        for (uint32_t i = 0; i < READD_BURST; i++, seq++)
            pub_block(px, 1000000 + seq, 5000000 + (uint32_t)seq * BS, seq);
        assert_int_equal(wsel_router_remove_worker(r, 3), 0);
        add(r, 3, 1, NULL);
        zc = pub_until_cached(r, pz, 1, zc, &zseq);
        zc = pub_until_cached(r, pz, 1, zc, &zseq);
        assert_int_equal(cached(r, 0), 0);
    }
    done(r);
    zmq_close(px);
    zmq_close(pz);
    zmq_ctx_term(ctx);
}

enum { CHURN_OPS = 200 };

typedef struct churn_job {
    wsel_router *r;
    const char *ep;
    int adder;
} churn_job;

/* One thread removes worker 3 over and over, another adds it back. */
static void *churn(void *arg)
{
    churn_job *j = arg;
    const char *eps[1] = {j->ep};
    wsel_router_worker w = {
        .worker_id = 3, .address = "127.0.0.1:1", .dp_size = 1, .kv_endpoints = eps};
    for (int i = 0; i < CHURN_OPS; i++) {
        int32_t rc = j->adder ? wsel_router_add_worker(j->r, &w, NULL, 0)
                              : wsel_router_remove_worker(j->r, 3);
        if (rc != 0 && rc != WSEL_ESTATE && rc != WSEL_ENOENT)
            return (void *)1;
    }
    return NULL;
}

/* Adds and removes of one id racing on two threads: the KV thread takes
 * the subscriptions in the order the topology changed, so the worker left
 * in place at the end receives its events (before, a remove could post its
 * unsubscription after a concurrent re-add's subscription, leaving the
 * worker present and deaf: a window too narrow to hit at will; under TSan
 * this is the check that posting under the router's mutex orders the
 * locks one way only). */
static void test_add_remove_race(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *pub = pub_at(ctx, ep, sizeof(ep));
    wsel_router *r = make();
    churn_job a = {.r = r, .ep = ep, .adder = 1}, b = {.r = r, .ep = ep, .adder = 0};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, churn, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, churn, &b), 0);
    void *ra, *rb;
    assert_int_equal(pthread_join(ta, &ra), 0);
    assert_int_equal(pthread_join(tb, &rb), 0);
    assert_null(ra);
    assert_null(rb);
    if (wsel_router_read_ranks(r, NULL, 0) == 0)
        add(r, 3, 1, (const char *const[]){ep});
    uint64_t seq = 0;
    assert_true(pub_until_cached(r, pub, 0, 0, &seq) > 0);
    done(r);
    zmq_close(pub);
    zmq_ctx_term(ctx);
}

/* A stored batch beyond the rank's capacity keeps its prefix head, as
 * history mode keeps a routed prompt's: recorded deepest block first, the
 * LRU evicts from the tail. 70 blocks (three slices of 32) into a capacity
 * of 40: blocks 0..39 stay, a request overlaps 40 of them; a later batch
 * chained to block 39 applies, one chained to block 69 (evicted) is
 * skipped. (Recorded head first, the index kept blocks 30..69, which no
 * request can reach: overlap 0.) */
static void test_batch_beyond_capacity_keeps_head(void **state)
{
    (void)state;
    enum { N = 70, CAP = 40 };
    wsel_router *r = make_cap(CAP);
    add(r, 1, 1, NULL);
    static uint32_t t[(N + 1) * BS];
    uint64_t eh[N + 1];
    for (uint32_t i = 0; i < (N + 1) * BS; i++)
        t[i] = 900 + i;
    for (uint32_t i = 0; i <= N; i++)
        eh[i] = 0x5000 + i;
    kvmsg m;
    kv_begin(&m, 1, 0);
    kv_stored(&m, eh, N, 0, 0, t, BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 1, 0, &m, 0), 0);
    assert_int_equal(cached(r, 0), CAP);
    assert_int_equal(overlap_on(r, t, N * BS, 1, 0), CAP);
    /* Chained to block 69, evicted: skipped. Chained to block 39, kept:
     * applied. */
    kv_begin(&m, 1, 0);
    kv_stored(&m, eh + N, 1, 1, eh[N - 1], t + N * BS, BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 1, 0, &m, 1), 0);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_PARENT], 1);
    kv_begin(&m, 1, 0);
    kv_stored(&m, eh + N, 1, 1, eh[CAP - 1], t + CAP * BS, BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 1, 0, &m, 2), 0);
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.kv_skipped[WSEL_KV_SKIP_PARENT], 1);
    assert_int_equal(c.kv_blocks_stored, N + 1);
    assert_int_equal(cached(r, 0), CAP);
    done(r);
}

/* A route that hits a cached prefix refreshes it in the router's LRU, as
 * the engine's use refreshes it in the engine's cache (KV events say
 * nothing of a hit): with room for 4 blocks, prefix A stored, then B, then
 * A routed, a third prefix C evicts B, not A. */
static void test_route_refreshes_hit_prefix(void **state)
{
    (void)state;
    wsel_router *r = make_cap(4);
    add(r, 1, 1, NULL);
    uint32_t ta[2 * BS], tb[2 * BS], tc[2 * BS];
    for (uint32_t i = 0; i < 2 * BS; i++) {
        ta[i] = 100 + i;
        tb[i] = 200 + i;
        tc[i] = 300 + i;
    }
    const uint64_t ea[2] = {0xa0, 0xa1}, eb[2] = {0xb0, 0xb1}, ec[2] = {0xc0, 0xc1};
    kvmsg m;
    const uint64_t *eh[3] = {ea, eb, ec};
    const uint32_t *tt[3] = {ta, tb, tc};
    for (uint64_t k = 0; k < 2; k++) {
        kv_begin(&m, 1, 0);
        kv_stored(&m, eh[k], 2, 0, 0, tt[k], BS);
        kv_end(&m, 0);
        assert_int_equal(kv_send(r, 1, 0, &m, k), 0);
    }
    assert_int_equal(cached(r, 0), 4);
    assert_int_equal(overlap_on(r, ta, 2 * BS, 1, 0), 2); /* the hit */
    kv_begin(&m, 1, 0);
    kv_stored(&m, eh[2], 2, 0, 0, tt[2], BS);
    kv_end(&m, 0);
    assert_int_equal(kv_send(r, 1, 0, &m, 2), 0);
    assert_int_equal(cached(r, 0), 4);
    assert_int_equal(overlap_on(r, tc, 2 * BS, 1, 0), 2);
    assert_int_equal(overlap_on(r, ta, 2 * BS, 1, 0), 2);
    assert_int_equal(overlap_on(r, tb, 2 * BS, 1, 0), 0);
    done(r);
}

typedef struct stream_job {
    void *pub;
    atomic_int stop;
} stream_job;

/* Publish fresh stored blocks until told to stop. */
static void *stream(void *arg)
{
    stream_job *j = arg;
    for (uint64_t seq = 0; !atomic_load(&j->stop); seq++)
        pub_block(j->pub, 1000000 + seq, 5000000 + (uint32_t)seq * BS, seq);
    return NULL;
}

/* Destroyed while a worker's events pour in (the receiving thread busy,
 * the ring full or not, decoded messages waiting to be applied): the KV
 * threads stop and everything is freed (ASan: no leak; TSan: no race). */
static void test_destroy_while_events_stream(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    char ep[256];
    stream_job j = {.pub = pub_at(ctx, ep, sizeof(ep))};
    atomic_init(&j.stop, 0);
    wsel_router *r = make();
    add(r, 3, 1, (const char *const[]){ep});
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stream, &j), 0);
    wsel_router_counters c;
    do
        wsel_router_read_counters(r, &c);
    while (c.kv_messages < 64);
    done(r);
    atomic_store(&j.stop, 1);
    assert_int_equal(pthread_join(th, NULL), 0);
    zmq_close(j.pub);
    zmq_ctx_term(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stored_matches_request),
        cmocka_unit_test(test_read_overlaps_every_row_without_routing),
        cmocka_unit_test(test_batch_beyond_capacity_keeps_head),
        cmocka_unit_test(test_route_refreshes_hit_prefix),
        cmocka_unit_test(test_ids_of_every_width),
        cmocka_unit_test(test_kv_cpu_bill),
        cmocka_unit_test(test_bad_input_counted),
        cmocka_unit_test(test_positional),
        cmocka_unit_test(test_message_ending_in_a_run),
        cmocka_unit_test(test_zmq_subscriber),
        cmocka_unit_test(test_restarted_publisher_cleared_once),
        cmocka_unit_test(test_readd_drops_old_events),
        cmocka_unit_test(test_add_remove_race),
        cmocka_unit_test(test_destroy_while_events_stream),
        cmocka_unit_test(test_routes_while_large_batches_apply),
        cmocka_unit_test(test_event_threads_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
