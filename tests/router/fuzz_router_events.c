// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_router_events.c -- libFuzzer harness for libwsel-router's KV event
 * decoder (router/events.c: msgpack-c unpacking, then the event walk).
 *
 * One router in event mode (block size 4, 64 blocks per rank) with one
 * worker of two ranks, made once. Each input: its first byte picks the
 * rank (bit 0) and the frames (bits 1-2: three well-formed frames, two
 * frames, four frames, a 7-byte sequence frame); the rest is the msgpack
 * payload, applied twice (the second time as the next sequence number, so
 * a stored batch finds its own parents). Properties checked, abort() on
 * breach:
 *   - wsel_router_apply_kv_message returns 0 or a negative code, and a
 *     refused message changes no index entry;
 *   - the ranks' cached blocks add up to the index's entries, each rank
 *     within its capacity;
 *   - a route still answers.
 * The worker is removed and added again after each input, so every input
 * starts from an empty index (a crash reproduces from its input alone).
 * Built with libFuzzer under clang -DWSEL_FUZZ=ON (the router's sources
 * compiled in, instrumented); otherwise as fuzz_router_events_replay over
 * tests/router/corpus/fuzz_router_events (tests/fuzz/replay_main.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wsel_router.h"

#define BS       4u
#define CAPACITY 64u

static wsel_host *fz_host;
static wsel_router *fz_router;

static void breach(const char *what)
{
    fprintf(stderr, "fuzz_router_events: %s\n", what);
    abort();
}

static void add_worker(void)
{
    char err[256];
    wsel_router_worker w = {.worker_id = 1, .address = "127.0.0.1:1", .dp_size = 2};
    if (wsel_router_add_worker(fz_router, &w, err, sizeof(err)) != 0)
        breach(err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char err[256];
    if (wsel_host_create(NULL, &fz_host) != 0)
        breach("no host");
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = BS,
                             .kv_source = WSEL_ROUTER_KV_EVENTS,
                             .capacity_blocks = CAPACITY,
                             .max_rows = 4,
                             .host = fz_host};
    if (wsel_router_create(&o, &fz_router, err, sizeof(err)) != 0)
        breach(err);
    add_worker();
    return 0;
}

static uint64_t entries(void)
{
    wsel_router_counters c;
    wsel_router_read_counters(fz_router, &c);
    wsel_router_rank_info ri[4];
    uint32_t n = wsel_router_read_ranks(fz_router, ri, 4);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n && i < 4; i++) {
        if (ri[i].cached_blocks > CAPACITY)
            breach("a rank over its capacity");
        sum += ri[i].cached_blocks;
    }
    if (sum != c.index_entries)
        breach("ranks' cached blocks do not add up to the index's entries");
    return c.index_entries;
}

static void apply(uint32_t rank, uint32_t layout, uint64_t seq, const uint8_t *payload,
                  size_t size)
{
    unsigned char sb[8];
    for (int i = 0; i < 8; i++)
        sb[i] = (unsigned char)(seq >> (56 - 8 * i));
    const void *f[4] = {"kv", sb, payload, payload};
    size_t s[4] = {2, 8, size, size};
    uint32_t n = 3;
    if (layout == 1)
        n = 2;
    else if (layout == 2)
        n = 4;
    else if (layout == 3)
        s[1] = 7;
    uint64_t before = entries();
    int32_t rc = wsel_router_apply_kv_message(fz_router, 1, rank, f, s, n);
    uint64_t after = entries();
    if (rc > 0)
        breach("a positive return");
    if (rc < 0 && after != before)
        breach("a refused message changed the index");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint32_t rank = data[0] & 1u, layout = (data[0] >> 1) & 3u;
    apply(rank, layout, 1, data + 1, size - 1);
    apply(rank, layout, 2, data + 1, size - 1);
    uint32_t t[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = 12};
    wsel_route_result res;
    if (wsel_router_route(fz_router, &q, &res) != 0)
        breach("no route");
    if (wsel_router_finished(fz_router, res.request_id) != 0)
        breach("no finish");
    if (wsel_router_remove_worker(fz_router, 1) != 0)
        breach("no remove");
    add_worker();
    if (entries() != 0)
        breach("a removed worker left entries");
    return 0;
}
