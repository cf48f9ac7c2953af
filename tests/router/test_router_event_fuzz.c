// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_event_fuzz.c -- the KV event decoder under malformed input:
 * a seeded stream of valid batches, each mutated (bytes flipped, cut,
 * extended, spliced with another, random bytes, wrong frame counts). After
 * every message the index must still be consistent: the cached blocks of
 * the ranks add up to the index's entries, every rank within capacity,
 * routes still answer, and a known prefix stored afresh is found whole.
 * Reproducible: a fixed seed, no clock. (Run under the sanitizer builds,
 * it is the decoder's memory-safety check too.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_router.h"

#include "kvmsg.h"
#include "test_rng.h"

#define BS       4u
#define CAPACITY 64u
#define ROUNDS   20000u


/* A plausible batch: stores (chained or not), removals, clears, unknown
 * types, wrong block sizes; token ids of a tiny vocabulary (msgpack
 * fixints), of one below 65,536 (16-bit runs) or above it (16- and 32-bit
 * mixed), each width of msgpack integer. */
static int valid_batch(kvmsg *m) /* 0 when a store has the wrong block size */
{
    int ok = 1;
    static const uint32_t vocab[3] = {50, 65536, 1u << 20};
    uint32_t v = vocab[below(3)];
    uint32_t n = 1 + below(4);
    kv_begin(m, n, below(8) == 0 ? 1 : 0);
    for (uint32_t e = 0; e < n; e++) {
        uint32_t kind = below(10);
        if (kind < 6) {
            uint32_t nb = 1 + below(3);
            uint64_t h[3];
            /* A wrong block size (BS + 1) sends that many tokens per block. */
            uint32_t bs = below(20) ? BS : BS + 1;
            ok &= bs == BS;
            uint32_t t[3 * (BS + 1)];
            for (uint32_t i = 0; i < nb; i++)
                h[i] = below(200);
            for (uint32_t i = 0; i < nb * bs; i++)
                t[i] = below(v);
            kv_stored(m, h, nb, (int)below(2), below(200), t, bs);
        } else if (kind < 9) {
            kv_removed(m, below(200));
        } else {
            kv_typed(m, below(2) ? "AllBlocksCleared" : "Mystery");
        }
    }
    kv_end(m, 0);
    return ok;
}

static void check_consistent(wsel_router *r)
{
    wsel_router_rank_info ri[4];
    uint32_t n = wsel_router_read_ranks(r, ri, 4);
    assert_int_equal(n, 2);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        assert_true(ri[i].cached_blocks <= CAPACITY);
        sum += ri[i].cached_blocks;
    }
    assert_int_equal(sum, c.index_entries);
    assert_true(c.index_blocks <= c.index_entries);
}

static void test_fuzz(void **state)
{
    (void)state;
    wsel_host *host;
    assert_int_equal(wsel_host_create(NULL, &host), 0);
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = BS,
                             .kv_source = WSEL_ROUTER_KV_EVENTS,
                             .capacity_blocks = CAPACITY,
                             .host = host};
    wsel_router *r;
    char err[256];
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), 0);
    wsel_router_worker w = {.worker_id = 1, .address = "127.0.0.1:1", .dp_size = 2};
    assert_int_equal(wsel_router_add_worker(r, &w, err, sizeof(err)), 0);

    unsigned char *buf = malloc(1 << 16);
    assert_non_null(buf);
    uint64_t applied = 0;
    for (uint32_t round = 0; round < ROUNDS; round++) {
        kvmsg m, other;
        int whole = valid_batch(&m);
        size_t len = m.buf.size;
        memcpy(buf, m.buf.data, len);
        msgpack_sbuffer_destroy(&m.buf);
        uint32_t frames = 3, mutation = below(8);
        switch (mutation) {
        case 0: /* untouched */
            break;
        case 1: /* flip bytes */
            for (uint32_t k = 1 + below(4); k > 0; k--)
                buf[below((uint32_t)len)] ^= (unsigned char)(1u << below(8));
            break;
        case 2: /* cut */
            len = below((uint32_t)len);
            break;
        case 3: /* trailing garbage */
            for (uint32_t k = 1 + below(8); k > 0; k--)
                buf[len++] = (unsigned char)next();
            break;
        case 4: /* splice another batch's tail */
            valid_batch(&other);
            {
                size_t cut = below((uint32_t)len), from = below((uint32_t)other.buf.size);
                memcpy(buf + cut, other.buf.data + from, other.buf.size - from);
                len = cut + other.buf.size - from;
            }
            msgpack_sbuffer_destroy(&other.buf);
            break;
        case 5: /* random bytes */
            len = below(64);
            for (size_t i = 0; i < len; i++)
                buf[i] = (unsigned char)next();
            break;
        case 6: /* overwrite one byte with a msgpack type marker */
            buf[below((uint32_t)len)] = (unsigned char)(0xc0 + below(64));
            break;
        default: /* wrong frame count */
            frames = below(6);
            break;
        }
        unsigned char sb[8] = {
            0, 0, 0, 0, 0, 0, (unsigned char)(round >> 8), (unsigned char)round};
        const void *f[6] = {"", sb, buf, buf, buf, buf};
        size_t s[6] = {0, 8, len, len, len, len};
        uint32_t rank = below(2);
        int32_t rc = wsel_router_apply_kv_message(r, 1, rank, f, s, frames);
        if (rc == 0)
            applied++;
        /* A batch left whole reaches its own rank (0) applied. */
        if (mutation == 0 && whole && rank == 0)
            assert_int_equal(rc, 0);
        check_consistent(r);
    }
    free(buf);
    /* The decoder still works: a fresh chain is found whole. */
    uint32_t t[3 * BS];
    for (uint32_t i = 0; i < 3 * BS; i++)
        t[i] = 1000 + i;
    uint64_t h[3] = {5000, 5001, 5002};
    kvmsg m;
    kv_begin(&m, 2, 1);
    kv_typed(&m, "AllBlocksCleared");
    kv_stored(&m, h, 3, 0, 0, t, BS);
    kv_end(&m, 1);
    assert_int_equal(kv_send(r, 1, 1, &m, 70000), 0);
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = 3 * BS};
    wsel_route_result res;
    assert_int_equal(wsel_router_route(r, &q, &res), 0);
    assert_int_equal(res.dp_rank, 1);
    assert_int_equal(res.overlap_blocks, 3);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    uint64_t skipped = 0;
    for (int i = 0; i < WSEL_KV_SKIP_REASONS; i++)
        if (i != WSEL_KV_SKIP_UNKNOWN_TYPE && i != WSEL_KV_SKIP_PARENT)
            skipped += c.kv_skipped[i];
    /* Every message was either applied or skipped under a reason. */
    assert_int_equal(c.kv_messages, applied + 1);
    assert_int_equal(c.kv_messages + skipped, ROUNDS + 1);
    print_message("fuzz: %u messages, %llu applied, %llu skipped\n", ROUNDS,
                  (unsigned long long)applied, (unsigned long long)skipped);
    wsel_router_destroy(r);
    wsel_host_destroy(host);
}

int main(void)
{
    rng_state = 0x9e3779b97f4a7c15ull;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fuzz)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
