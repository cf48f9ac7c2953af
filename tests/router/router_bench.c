// SPDX-License-Identifier: Apache-2.0
/*
 * router_bench.c -- libwsel-router's figures for docs/bench.md:
 *   route    wsel_router_route at 1,024 rows (256 workers x 4 ranks) with a
 *            32-block prompt (block size 64) against a warm history index;
 *            p50 / p99 of the call, microseconds (each request finished
 *            after it is routed, so load stays level).
 *   events   wsel_router_apply_kv_message on vLLM-format batches of 16
 *            stored blocks (plus a removal each), decode + re-hash + apply,
 *            blocks per second; then batches of 130 (an arxiv prompt's),
 *            microseconds a message.
 *   memory   a stream of unique 32-block prefixes in history mode: the
 *            index's bytes and entries at checkpoints, flat once full.
 *   scale    the whole route at 1,024, 16,384 and 65,536 rows with a warm
 *            index of 10 million blocks fed by KV events, events applied
 *            beside the routes (router_bench_scale.c).
 * Times are the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on a
 * machine shared with other jobs, wall time measures the scheduler.
 * Usage: router_bench [PLUGIN.so ...]   (no plugin: the built-in policy;
 *        the first runs route, events and memory, scale runs each in turn)
 *        WSEL_BENCH_ONLY=route|events|memory|scale runs one part; scale
 *        reads WSEL_BENCH_ROWS (a list), WSEL_BENCH_BLOCKS, WSEL_BENCH_ROUTES.
 * Exits 1 when the scale part meets an error or a fallback.
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router_bench.h"

double rb_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t rng = 12345;
uint32_t rb_rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

int rb_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

wsel_router *rb_make(wsel_host *host, uint32_t source, uint32_t workers, uint32_t dp,
                     uint32_t capacity)
{
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = 64,
                             .kv_source = source,
                             .capacity_blocks = capacity,
                             .max_rows = workers * dp,
                             .host = host};
    wsel_router *r;
    char err[256];
    if (wsel_router_create(&o, &r, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    for (uint32_t w = 0; w < workers; w++) {
        wsel_router_worker wk = {.worker_id = w, .address = "127.0.0.1:1", .dp_size = dp};
        if (wsel_router_add_worker(r, &wk, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s\n", err);
            exit(1);
        }
    }
    return r;
}

/* Prompt p of a pool: 8 shared system prompts of 8 blocks, then its own. */
static void prompt(uint32_t *t, uint32_t p, uint32_t blocks)
{
    for (uint32_t i = 0; i < blocks * 64; i++)
        t[i] = i < 8 * 64 ? (p % 8) * 100000 + i : p * 7919 + i;
}

static void bench_route(wsel_host *host)
{
    wsel_router *r = rb_make(host, WSEL_ROUTER_KV_HISTORY, 256, 4, 16384);
    uint32_t t[32 * 64];
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = 32 * 64};
    wsel_route_result res;
    /* Warm: 4,096 distinct prompts routed once each. */
    for (uint32_t p = 0; p < 4096; p++) {
        prompt(t, p, 32);
        wsel_router_route(r, &q, &res);
        wsel_router_finished(r, res.request_id);
    }
    enum { N = 20000 };
    static double lat[N];
    for (uint32_t i = 0; i < N; i++) {
        prompt(t, rb_rnd() % 8192, 32); /* half seen before, half new */
        double t0 = rb_now_us();
        wsel_router_route(r, &q, &res);
        lat[i] = rb_now_us() - t0;
        wsel_router_finished(r, res.request_id);
    }
    qsort(lat, N, sizeof(double), rb_cmp_double);
    /* The host's share: wsel_table_build + wsel_host_select alone on 1,024
     * idle rows with the same request shape. */
    static double host_lat[N];
    static wsel_rank_state st[1024];
    for (uint32_t i = 0; i < 1024; i++)
        st[i] = (wsel_rank_state){
            .worker_id = i / 4, .dp_rank = i % 4, .overlap_blocks = i % 7 == 0 ? 8 : 0};
    wsel_table_buf buf;
    wsel_table_buf_init(&buf, 1024);
    uint64_t hashes[32] = {0};
    for (uint32_t i = 0; i < N; i++) {
        wsel_rng rngs;
        wsel_request req = {.request_id = i + 1,
                            .isl_tokens = 2048,
                            .block_size = 64,
                            .num_block_hashes = 32,
                            .block_hashes = hashes,
                            .overlap_score_weight = 1.0};
        wsel_choice ch = {.struct_size = sizeof(ch)};
        double t0 = rb_now_us();
        wsel_host_prepare_request_sized(host, &req, sizeof(req), &rngs);
        wsel_table_build(&buf, &req, st, 1024, 1, NULL, 0);
        wsel_host_select(host, &req, &buf.table, &ch);
        host_lat[i] = rb_now_us() - t0;
    }
    wsel_table_buf_free(&buf);
    qsort(host_lat, N, sizeof(double), rb_cmp_double);
    printf("route: of which the host (table build + select alone): p50 %.2f us\n",
           host_lat[N / 2]);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    printf("route: 1024 rows, 32-block prompt: p50 %.2f us, p99 %.2f us "
           "(%llu plugin answers, %llu fallbacks; index %llu entries)\n",
           lat[N / 2], lat[N * 99 / 100], (unsigned long long)c.plugin_answers,
           (unsigned long long)c.fallbacks, (unsigned long long)c.index_entries);
    wsel_router_destroy(r);
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

void rb_pack_batch(msgpack_sbuffer *sb, const rb_batch *b)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pack_str(&pk, "ts");
    msgpack_pack_double(&pk, 1.0);
    pack_str(&pk, "events");
    msgpack_pack_array(&pk, b->removed ? 2 : 1);
    msgpack_pack_map(&pk, 8);
    pack_str(&pk, "type");
    pack_str(&pk, "BlockStored");
    pack_str(&pk, "block_hashes");
    msgpack_pack_array(&pk, b->stored);
    for (uint32_t i = 0; i < b->stored; i++)
        msgpack_pack_uint64(&pk, b->first_hash + i);
    pack_str(&pk, "parent_block_hash");
    msgpack_pack_nil(&pk);
    pack_str(&pk, "token_ids");
    msgpack_pack_array(&pk, b->stored * 64);
    for (uint32_t i = 0; i < b->stored * 64; i++)
        msgpack_pack_uint32(&pk, b->tokens[i]);
    pack_str(&pk, "block_size");
    msgpack_pack_uint32(&pk, 64);
    pack_str(&pk, "lora_id");
    msgpack_pack_nil(&pk);
    pack_str(&pk, "medium");
    pack_str(&pk, "GPU");
    pack_str(&pk, "lora_name");
    msgpack_pack_nil(&pk);
    if (b->removed) {
        msgpack_pack_map(&pk, 3);
        pack_str(&pk, "type");
        pack_str(&pk, "BlockRemoved");
        pack_str(&pk, "block_hashes");
        msgpack_pack_array(&pk, b->removed);
        for (uint32_t i = 0; i < b->removed; i++)
            msgpack_pack_uint64(&pk, b->removed_first + i);
        pack_str(&pk, "medium");
        pack_str(&pk, "GPU");
    }
    pack_str(&pk, "data_parallel_rank");
    msgpack_pack_uint32(&pk, b->dp_rank);
}

int32_t rb_apply(wsel_router *r, uint64_t worker, uint32_t rank, uint64_t seq,
                 const msgpack_sbuffer *sb)
{
    unsigned char seq_frame[8];
    for (int i = 0; i < 8; i++)
        seq_frame[i] = (unsigned char)(seq >> (56 - 8 * i));
    const void *f[3] = {"", seq_frame, sb->data};
    size_t s[3] = {0, 8, sb->size};
    return wsel_router_apply_kv_message(r, worker, rank, f, s, 3);
}

/* `batches` messages of `per` stored blocks (token ids below `vocab`) and
 * one removal each, applied to 64 workers in turn, best of 5 passes. */
static void bench_events(wsel_host *host, uint32_t batches, uint32_t per, uint32_t vocab)
{
    wsel_router *r = rb_make(host, WSEL_ROUTER_KV_EVENTS, 64, 16, 16384);
    msgpack_sbuffer *bufs = calloc(batches, sizeof(*bufs));
    uint32_t *tokens = malloc((size_t)per * 64 * sizeof(*tokens));
    uint64_t next_hash = 1;
    for (uint32_t b = 0; b < batches; b++) {
        for (uint32_t i = 0; i < per * 64; i++)
            tokens[i] = rb_rnd() % vocab;
        rb_batch bt = {.first_hash = next_hash, .stored = per, .tokens = tokens,
                       .removed_first = next_hash, .removed = 1};
        msgpack_sbuffer_init(&bufs[b]);
        rb_pack_batch(&bufs[b], &bt);
        next_hash += per;
    }
    free(tokens);
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = rb_now_us();
        for (uint32_t b = 0; b < batches; b++)
            rb_apply(r, b % 64, 0, 0, &bufs[b]);
        double rate = (double)batches * per / ((rb_now_us() - t0) / 1e6);
        best = rate > best ? rate : best;
    }
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    wsel_router_kv_cpu k = {.struct_size = sizeof(k)};
    wsel_router_read_kv_cpu(r, &k);
    printf("events: vocabulary %u: of which decoding %.1f us and applying %.1f us a "
           "message (all passes)\n",
           vocab, (double)k.decode_ns / 1e3 / (double)k.messages,
           (double)k.apply_ns / 1e3 / (double)k.messages);
    printf("events: %.2f M blocks/s stored, %.1f us a message (best of 5 x %u batches "
           "of %u blocks + 1 removal; %llu stored, %llu removed, %llu skipped as "
           "frames/shape)\n",
           best / 1e6, 1e6 * per / best, batches, per,
           (unsigned long long)c.kv_blocks_stored,
           (unsigned long long)c.kv_blocks_removed,
           (unsigned long long)(c.kv_skipped[0] + c.kv_skipped[2]));
    for (uint32_t b = 0; b < batches; b++)
        msgpack_sbuffer_destroy(&bufs[b]);
    free(bufs);
    wsel_router_destroy(r);
}

static void bench_memory(wsel_host *host)
{
    wsel_router *r = rb_make(host, WSEL_ROUTER_KV_HISTORY, 4, 4, 16384);
    uint32_t t[32 * 64];
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = t, .num_tokens = 32 * 64};
    wsel_route_result res;
    for (uint32_t p = 1; p <= 100000; p++) {
        for (uint32_t i = 0; i < 32 * 64; i++)
            t[i] = p * 2048 + i;
        wsel_router_route(r, &q, &res);
        wsel_router_finished(r, res.request_id);
        if (p == 5000 || p == 10000 || p == 25000 || p == 50000 || p == 100000) {
            wsel_router_counters c;
            wsel_router_read_counters(r, &c);
            printf("memory: %6u unique prompts (%7u blocks): %llu entries, %llu "
                   "evictions, index %.1f MiB\n",
                   p, p * 32, (unsigned long long)c.index_entries,
                   (unsigned long long)c.index_evictions,
                   (double)c.index_bytes / 1048576);
        }
    }
    wsel_router_destroy(r);
}

int main(int argc, char **argv)
{
    wsel_host *host;
    if (wsel_host_create(NULL, &host) != 0)
        return 1;
    if (argc > 1) {
        char err[512];
        if (wsel_host_switch(host, argv[1], "{}", err, sizeof(err)) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    }
    printf("policy: %s\n", wsel_host_policy_name(host));
    const char *only = getenv("WSEL_BENCH_ONLY"); /* route, events, memory, scale */
    if (!only || strcmp(only, "route") == 0)
        bench_route(host);
    if (!only || strcmp(only, "events") == 0) {
        bench_events(host, 4096, 16, 32000);
        /* A wsel-engine request's batch: the arxiv slice's mean prompt,
         * 130 blocks and 8,320 token ids (the nginx latency bench's), ids
         * of a 32k vocabulary (16-bit in msgpack) and of Llama 3's 128k
         * (16- and 32-bit mixed). */
        bench_events(host, 512, 130, 32000);
        bench_events(host, 512, 130, 128256);
    }
    if (!only || strcmp(only, "memory") == 0)
        bench_memory(host);
    int rc = 0;
    if (!only || strcmp(only, "scale") == 0)
        rc = rb_bench_scale(host, argv + 1, argc - 1);
    wsel_host_destroy(host);
    return rc;
}
