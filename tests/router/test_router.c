// SPDX-License-Identifier: Apache-2.0
/*
 * test_router.c -- libwsel-router with exact answers: hashing (pinned XXH3
 * values, the chaining rule), topology (epochs, limits, drain, remove,
 * unavailable), the route's overlaps and its load accounting, the history
 * index's LRU bound, a bundled plugin answering through the router, and the
 * outcomes a finished request delivers to the policy (a fixture plugin logs
 * them), and edge cases found by reading the contract against the code:
 * capacity 1 with block size 1, a prompt beyond max_prompt_blocks, empty
 * prompts, request ids (0, reuse, duplicates), huge token counts and block
 * sizes, in-flight accounting across drain, remove and re-add of one id,
 * NULL handles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "wsel_router.h"

#define BS 4u /* small blocks keep the prompts short */

typedef struct fx {
    wsel_host *host;
    wsel_router *router;
} fx;

/* A router with options o (its struct_size and host set here). */
static wsel_router *make_with(fx *f, wsel_router_options o)
{
    assert_int_equal(wsel_host_create(NULL, &f->host), 0);
    o.struct_size = sizeof(o);
    o.host = f->host;
    char err[256];
    assert_int_equal(wsel_router_create(&o, &f->router, err, sizeof(err)), 0);
    return f->router;
}

static wsel_router *make(fx *f, uint32_t kv_source, uint32_t capacity, uint32_t max_rows)
{
    return make_with(f, (wsel_router_options){.block_size = BS,
                                              .kv_source = kv_source,
                                              .capacity_blocks = capacity,
                                              .max_rows = max_rows});
}

static void done(fx *f)
{
    wsel_router_destroy(f->router);
    wsel_host_destroy(f->host);
}

static void add(wsel_router *r, uint64_t id, uint32_t dp)
{
    char addr[64], err[256];
    snprintf(addr, sizeof(addr), "127.0.0.1:%llu", (unsigned long long)(8000 + id));
    wsel_router_worker w = {.worker_id = id, .address = addr, .dp_size = dp};
    assert_int_equal(wsel_router_add_worker(r, &w, err, sizeof(err)), 0);
}

static int32_t route(wsel_router *r, const uint32_t *tokens, uint32_t n,
                     wsel_route_result *res)
{
    wsel_route_request q = {.struct_size = sizeof(q), .tokens = tokens, .num_tokens = n};
    return wsel_router_route(r, &q, res);
}

/* --- hashing ------------------------------------------------------------ */

static void test_hash_rule(void **state)
{
    (void)state;
    uint32_t t[12];
    for (uint32_t i = 0; i < 12; i++)
        t[i] = i * 1000 + 7;
    uint64_t h[4];
    /* 12 tokens, blocks of 4: three full blocks; max bounds the count. */
    assert_int_equal(wsel_router_hash_tokens(t, 12, 4, h, 4), 3);
    assert_int_equal(wsel_router_hash_tokens(t, 11, 4, h, 4), 2);
    assert_int_equal(wsel_router_hash_tokens(t, 12, 4, h, 1), 1);
    wsel_router_hash_tokens(t, 12, 4, h, 4);
    /* The documented rule, computed here independently. */
    unsigned char bytes[16];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            bytes[4 * i + k] = (unsigned char)(t[i] >> (8 * k));
    uint64_t l0 = XXH3_64bits_withSeed(bytes, 16, 1337);
    assert_true(h[0] == l0);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            bytes[4 * i + k] = (unsigned char)(t[4 + i] >> (8 * k));
    uint64_t l1 = XXH3_64bits_withSeed(bytes, 16, 1337);
    unsigned char pair[16];
    for (int k = 0; k < 8; k++) {
        pair[k] = (unsigned char)(h[0] >> (8 * k));
        pair[8 + k] = (unsigned char)(l1 >> (8 * k));
    }
    assert_true(h[1] == XXH3_64bits_withSeed(pair, 16, 1337));
    /* Pinned: a change of the hash is a change of every index. */
    assert_true(h[0] == UINT64_C(0xd6eb7d4235497338));
    assert_true(h[2] == UINT64_C(0x8bcc355af44ff022));
    /* Chained: the same block after another prefix hashes differently. */
    uint32_t u[8];
    memcpy(u, t + 4, 4 * sizeof(uint32_t));
    memcpy(u + 4, t + 4, 4 * sizeof(uint32_t));
    uint64_t g[2];
    wsel_router_hash_tokens(u, 8, 4, g, 2);
    assert_true(g[0] == l1);
    assert_true(g[1] != h[1]);
    /* Text: full chunks only, the same chaining. */
    uint64_t x[3];
    assert_int_equal(wsel_router_hash_text("abcdefghij", 10, 4, x, 3), 2);
    assert_true(x[0] == XXH3_64bits_withSeed("abcd", 4, 1337));
}

/* --- topology ----------------------------------------------------------- */

static void test_topology(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 5);
    char err[256];
    assert_int_equal(wsel_router_epoch(r), 1);
    add(r, 20, 2);
    add(r, 10, 2);
    assert_int_equal(wsel_router_epoch(r), 3);
    wsel_router_rank_info ri[8];
    assert_int_equal(wsel_router_read_ranks(r, ri, 8), 4);
    /* Canonical order whatever the order of addition. */
    assert_int_equal(ri[0].worker_id, 10);
    assert_int_equal(ri[1].dp_rank, 1);
    assert_int_equal(ri[2].worker_id, 20);
    /* Duplicate id, too many rows, bad dp sizes. */
    wsel_router_worker w = {.worker_id = 10, .address = "x", .dp_size = 1};
    assert_int_equal(wsel_router_add_worker(r, &w, err, sizeof(err)), WSEL_ESTATE);
    w.worker_id = 30;
    w.dp_size = 2;
    assert_int_equal(wsel_router_add_worker(r, &w, err, sizeof(err)), WSEL_ERANGE);
    assert_non_null(strstr(err, "max_rows"));
    w.dp_size = 0;
    assert_int_equal(wsel_router_add_worker(r, &w, err, sizeof(err)), WSEL_EINVAL);
    w.dp_size = 65;
    assert_int_equal(wsel_router_add_worker(r, &w, err, sizeof(err)), WSEL_EINVAL);
    assert_int_equal(wsel_router_epoch(r), 3);
    /* Remove frees its rows for another worker. */
    assert_int_equal(wsel_router_remove_worker(r, 20), 0);
    assert_int_equal(wsel_router_remove_worker(r, 20), WSEL_ENOENT);
    assert_int_equal(wsel_router_epoch(r), 4);
    add(r, 30, 3);
    assert_int_equal(wsel_router_read_ranks(r, ri, 8), 5);
    assert_int_equal(ri[4].worker_id, 30);
    assert_int_equal(ri[4].dp_rank, 2);
    done(&f);
}

static void test_drain(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 1);
    add(r, 2, 1);
    uint32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    wsel_route_result res;
    assert_int_equal(route(r, t, 8, &res), 0);
    uint64_t busy = res.worker_id, other = busy == 1 ? 2 : 1;
    assert_int_equal(wsel_router_drain_worker(r, busy), 0);
    assert_int_equal(wsel_router_epoch(r), 4);
    wsel_router_rank_info ri[2];
    assert_int_equal(wsel_router_read_ranks(r, ri, 2), 2);
    assert_int_equal(ri[busy - 1].flags & WSEL_ROW_EXCLUDED, WSEL_ROW_EXCLUDED);
    /* Every later request goes to the other worker, whatever its load. */
    for (int i = 0; i < 5; i++) {
        wsel_route_result o;
        assert_int_equal(route(r, t, 8, &o), 0);
        assert_int_equal(o.worker_id, other);
    }
    /* The last request ends: the drained worker goes, the epoch moves. */
    assert_int_equal(wsel_router_finished(r, res.request_id), 0);
    assert_int_equal(wsel_router_read_ranks(r, ri, 2), 1);
    assert_int_equal(ri[0].worker_id, other);
    assert_int_equal(wsel_router_epoch(r), 5);
    /* Removing the last worker leaves no candidate. */
    assert_int_equal(wsel_router_remove_worker(r, other), 0);
    assert_int_equal(route(r, t, 8, &res), WSEL_ENOCANDIDATE);
    done(&f);
}

/* Unavailable: excluded while marked, load and index kept, back as it was. */
static void test_unavailable(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 2); /* rows 0, 1 */
    add(r, 2, 1); /* row 2 */
    assert_int_equal(wsel_router_epoch(r), 3);
    uint32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    wsel_route_result a, o;
    /* The prompt's two blocks are cached where it went first. */
    assert_int_equal(route(r, t, 8, &a), 0);
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    const uint64_t home = a.worker_id, other = home == 1 ? 2 : 1;
    assert_int_equal(route(r, t, 8, &o), 0);
    assert_int_equal(o.worker_id, home);
    assert_int_equal(o.dp_rank, a.dp_rank);
    assert_int_equal(o.overlap_blocks, 2);
    /* o stays in flight on home. Home goes down: one epoch, rows excluded. */
    assert_int_equal(wsel_router_set_worker_available(r, home, 0), 0);
    assert_int_equal(wsel_router_epoch(r), 4);
    assert_int_equal(wsel_router_set_worker_available(r, home, 0), 0); /* no change */
    assert_int_equal(wsel_router_epoch(r), 4);
    wsel_router_rank_info ri[3];
    assert_int_equal(wsel_router_read_ranks(r, ri, 3), 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(ri[i].flags & WSEL_ROW_EXCLUDED,
                         ri[i].worker_id == home ? WSEL_ROW_EXCLUDED : 0);
    const uint32_t hrow = home == 1 ? a.dp_rank : 2;
    assert_int_equal(ri[hrow].active_requests, 1); /* its load stays */
    assert_int_equal(ri[hrow].cached_blocks, 2);   /* and its index */
    /* Every route goes to the other worker, though home holds the prefix. */
    for (int i = 0; i < 4; i++) {
        wsel_route_result b;
        assert_int_equal(route(r, t, 8, &b), 0);
        assert_int_equal(b.worker_id, other);
        assert_int_equal(b.overlap_blocks, i == 0 ? 0 : 2);
        assert_int_equal(wsel_router_finished(r, b.request_id), 0);
    }
    /* Its request in flight still finishes there. */
    assert_int_equal(wsel_router_finished(r, o.request_id), 0);
    /* Both down: no candidate. Unknown worker, NULL router. */
    assert_int_equal(wsel_router_set_worker_available(r, other, 0), 0);
    assert_int_equal(wsel_router_epoch(r), 5);
    assert_int_equal(route(r, t, 8, &o), WSEL_ENOCANDIDATE);
    assert_int_equal(wsel_router_set_worker_available(r, 9, 1), WSEL_ENOENT);
    assert_int_equal(wsel_router_set_worker_available(NULL, 1, 1), WSEL_EINVAL);
    /* Home back (one epoch): the prompt goes home again, to its prefix. */
    assert_int_equal(wsel_router_set_worker_available(r, home, 1), 0);
    assert_int_equal(wsel_router_epoch(r), 6);
    assert_int_equal(route(r, t, 8, &o), 0);
    assert_int_equal(o.worker_id, home);
    assert_int_equal(o.dp_rank, a.dp_rank);
    assert_int_equal(o.overlap_blocks, 2);
    /* Drained stays excluded whatever availability says. */
    assert_int_equal(wsel_router_set_worker_available(r, other, 1), 0);
    assert_int_equal(wsel_router_drain_worker(r, home), 0);
    assert_int_equal(wsel_router_set_worker_available(r, home, 1), 0);
    assert_int_equal(wsel_router_read_ranks(r, ri, 3), 3);
    assert_int_equal(ri[hrow].flags & WSEL_ROW_EXCLUDED, WSEL_ROW_EXCLUDED);
    assert_int_equal(route(r, t, 8, &a), 0);
    assert_int_equal(a.worker_id, other);
    done(&f);
}

/* --- route and accounting ----------------------------------------------- */

static void test_accounting(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 2);
    add(r, 2, 2);
    uint32_t t[18];
    for (uint32_t i = 0; i < 18; i++)
        t[i] = 100 + i;
    wsel_route_result a, b;
    /* 18 tokens = 4 full blocks + 2 tokens. */
    assert_int_equal(route(r, t, 18, &a), 0);
    assert_int_equal(a.num_blocks, 4);
    assert_int_equal(a.overlap_blocks, 0);
    assert_int_equal(a.answer, WSEL_ANSWER_FALLBACK); /* no policy loaded */
    wsel_router_rank_info ri[4];
    wsel_router_read_ranks(r, ri, 4);
    uint32_t row = (uint32_t)((a.worker_id - 1) * 2 + a.dp_rank);
    assert_int_equal(ri[row].active_prefill_tokens, 18);
    assert_int_equal(ri[row].active_blocks, 4);
    assert_int_equal(ri[row].active_requests, 1);
    assert_int_equal(ri[row].cached_blocks, 4); /* history: assumed cached */
    /* After its first token, the same prompt goes back to the same rank:
     * cost there 2/4 + 4 = 4.5, elsewhere 18/4 + 4 = 8.5. */
    assert_int_equal(wsel_router_first_token(r, a.request_id), 0);
    assert_int_equal(wsel_router_first_token(r, a.request_id), 0); /* idempotent */
    assert_int_equal(route(r, t, 18, &b), 0);
    assert_int_equal(b.worker_id, a.worker_id);
    assert_int_equal(b.dp_rank, a.dp_rank);
    assert_int_equal(b.overlap_blocks, 4);
    wsel_router_read_ranks(r, ri, 4);
    assert_int_equal(ri[row].active_prefill_tokens, 2);
    assert_int_equal(ri[row].active_blocks, 4);
    assert_int_equal(ri[row].active_requests, 2);
    /* Finishing both returns the rank to zero; a second finish is unknown. */
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    assert_int_equal(wsel_router_finished(r, b.request_id), 0);
    assert_int_equal(wsel_router_finished(r, b.request_id), WSEL_ENOENT);
    wsel_router_read_ranks(r, ri, 4);
    assert_int_equal(ri[row].active_prefill_tokens, 0);
    assert_int_equal(ri[row].active_blocks, 0);
    assert_int_equal(ri[row].active_requests, 0);
    /* A caller's id in flight is refused. */
    wsel_route_request q = {
        .struct_size = sizeof(q), .request_id = 77, .tokens = t, .num_tokens = 18};
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(a.request_id, 77);
    assert_int_equal(wsel_router_route(r, &q, &a), WSEL_ESTATE);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.routes, 3);
    assert_int_equal(c.fallbacks, 3);
    assert_int_equal(c.prompt_blocks, 12);
    assert_int_equal(c.overlap_blocks, 8);
    done(&f);
}

static void test_partial_overlap_and_text(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 1);
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = i;
    wsel_route_result a;
    assert_int_equal(route(r, t, 8, &a), 0);
    /* A longer prompt sharing two blocks; then one diverging in block 1. */
    assert_int_equal(route(r, t, 16, &a), 0);
    assert_int_equal(a.overlap_blocks, 2);
    t[5] = 999;
    assert_int_equal(route(r, t, 16, &a), 0);
    assert_int_equal(a.overlap_blocks, 1);
    /* Text prompts: chunks of 4 x 4 characters, isl = len / 4. */
    wsel_route_request q = {.struct_size = sizeof(q),
                            .text = "0123456789abcdefghijklmnopqrstuv",
                            .text_len = 32};
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(a.num_blocks, 2);
    assert_int_equal(a.overlap_blocks, 0);
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(a.overlap_blocks, 2);
    done(&f);
}

static void test_history_lru_bound(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 8, 0);
    add(r, 1, 2);
    uint32_t t[8];
    wsel_route_result a;
    for (uint32_t i = 0; i < 100; i++) {
        for (uint32_t k = 0; k < 8; k++)
            t[k] = i * 8 + k;
        assert_int_equal(route(r, t, 8, &a), 0);
        assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    }
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    /* 200 blocks routed, 8 kept per rank. */
    assert_int_equal(c.index_entries, 16);
    assert_int_equal(c.index_blocks, 16);
    assert_int_equal(c.index_evictions, 200 - 16);
    uint64_t bytes = c.index_bytes;
    for (uint32_t i = 100; i < 1100; i++) {
        for (uint32_t k = 0; k < 8; k++)
            t[k] = i * 8 + k;
        assert_int_equal(route(r, t, 8, &a), 0);
        assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    }
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.index_entries, 16);
    assert_int_equal(c.index_bytes, bytes); /* bounded: nothing grew */
    /* The most recent prompt is still there, the first long gone. */
    assert_int_equal(route(r, t, 8, &a), 0);
    assert_int_equal(a.overlap_blocks, 2);
    for (uint32_t k = 0; k < 8; k++)
        t[k] = k;
    assert_int_equal(route(r, t, 8, &a), 0);
    assert_int_equal(a.overlap_blocks, 0);
    done(&f);
}

/* A bundled plugin answers through the router. */
static void test_plugin(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    char err[512];
    assert_int_equal(wsel_host_switch(f.host, WSEL_TEST_SOFTMAX, "{}", err, sizeof(err)),
                     0);
    add(r, 1, 2);
    add(r, 2, 2);
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = i;
    wsel_route_result a, b;
    assert_int_equal(route(r, t, 16, &a), 0);
    assert_int_equal(a.answer, WSEL_ANSWER_PLUGIN);
    assert_int_equal(wsel_router_first_token(r, a.request_id), 0);
    assert_int_equal(route(r, t, 16, &b), 0);
    assert_int_equal(b.answer, WSEL_ANSWER_PLUGIN);
    assert_int_equal(b.worker_id, a.worker_id);
    assert_int_equal(b.dp_rank, a.dp_rank);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.plugin_answers, 2);
    done(&f);
}

/* A plugin writing the table (fx_clears_excluded clears the excluded flag
 * of an unavailable worker's row and answers it) is answered for by the host;
 * the router then rewrites the flags it keeps between routes, so every
 * route sees those rows excluded again and never lands on them. */
static void test_plugin_writing_the_flags(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    char err[512];
    assert_int_equal(
        wsel_host_switch(f.host, WSEL_TEST_CLEARS_EXCLUDED, "{}", err, sizeof(err)), 0);
    add(r, 1, 2);
    add(r, 2, 2);
    assert_int_equal(wsel_router_set_worker_available(r, 1, 0), 0);
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = 100 + i;
    for (int k = 0; k < 6; k++) {
        wsel_route_result a;
        assert_int_equal(route(r, t, 16, &a), 0);
        assert_int_equal(a.answer, WSEL_ANSWER_FALLBACK);
        assert_int_equal(a.worker_id, 2);
        if (k % 2)
            assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    }
    done(&f);
}

/* WSEL_ROUTE_BUILTIN answers with the built-in rule, never the plugin:
 * the idle rank, accounted, counted apart. */
static void test_builtin(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    char err[512];
    assert_int_equal(wsel_host_switch(f.host, WSEL_TEST_SOFTMAX, "{}", err, sizeof(err)),
                     0);
    add(r, 1, 1);
    add(r, 2, 1);
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = i;
    wsel_route_result a, b;
    assert_int_equal(route(r, t, 16, &a), 0);
    wsel_route_request q = {
        .struct_size = sizeof(q), .overrides = WSEL_ROUTE_BUILTIN, .isl_tokens = 8};
    assert_int_equal(wsel_router_route(r, &q, &b), 0);
    assert_int_equal(b.answer, WSEL_ANSWER_FALLBACK);
    assert_int_equal(b.num_blocks, 0);
    assert_int_not_equal(b.worker_id, a.worker_id); /* a's rank carries 16 tokens */
    wsel_router_rank_info ri[2];
    assert_int_equal(wsel_router_read_ranks(r, ri, 2), 2);
    assert_int_equal(ri[b.worker_id - 1].active_requests, 1);
    assert_int_equal(ri[b.worker_id - 1].active_prefill_tokens, 8);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.routes, 2);
    assert_int_equal(c.plugin_answers, 1);
    assert_int_equal(c.fallbacks, 0);
    assert_int_equal(c.builtin_routes, 1);
    assert_int_equal(wsel_router_finished(r, b.request_id), 0);
    done(&f);
}

/* WSEL_ROUTE_DEFER_HISTORY: the record waits for wsel_router_flush or the
 * next call, and every later route sees it as without the flag. */
static void test_deferred_history(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 2);
    uint32_t t[16];
    for (uint32_t i = 0; i < 16; i++)
        t[i] = 40 + i;
    wsel_route_request q = {.struct_size = sizeof(q),
                            .overrides = WSEL_ROUTE_DEFER_HISTORY,
                            .tokens = t,
                            .num_tokens = 16};
    wsel_route_result a, b;
    /* The next route records the waiting one first: full overlap. */
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(wsel_router_first_token(r, a.request_id), 0);
    assert_int_equal(wsel_router_route(r, &q, &b), 0);
    assert_int_equal(b.overlap_blocks, 4);
    assert_int_equal(b.dp_rank, a.dp_rank);
    /* An explicit flush, then the counters: b's blocks were already there. */
    wsel_router_flush(r);
    wsel_router_flush(r); /* nothing waits: a no-op */
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.index_entries, 4);
    /* A new prompt, deferred: the counters record it before reading. */
    for (uint32_t i = 0; i < 16; i++)
        t[i] = 900 + i;
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.index_entries, 8);
    /* A record for a worker removed meanwhile is dropped. */
    for (uint32_t i = 0; i < 16; i++)
        t[i] = 7000 + i;
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(wsel_router_remove_worker(r, 1), 0);
    add(r, 2, 2);
    wsel_router_flush(r);
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.index_entries, 0);
    wsel_router_flush(NULL);
    done(&f);
}

/* --- outcomes ------------------------------------------------------------ */

/* The test's clock (router option clock_us) and the host's log, where the
 * fixture plugin writes every hook call. */
static uint64_t fake_now_us;
static char logs[8][256];
static int nlogs;

static uint64_t fake_clock(void *user)
{
    (void)user;
    return fake_now_us;
}

static char last_table[2048];

static void capture_log(void *user, int32_t level, const char *msg)
{
    (void)user, (void)level;
    if (strncmp(msg, "table ", 6) == 0) {
        snprintf(last_table, sizeof(last_table), "%s", msg);
        return;
    }
    if (strncmp(msg, "finished ", 9) != 0 && strncmp(msg, "outcome ", 8) != 0)
        return; /* the host's own messages (switches) */
    if (nlogs < 8)
        snprintf(logs[nlogs++], sizeof(logs[0]), "%s", msg);
}

static wsel_router *make_fixture_router(fx *f, uint32_t busy_requests)
{
    wsel_host_options ho;
    wsel_host_options_default(&ho);
    ho.log = capture_log;
    assert_int_equal(wsel_host_create(&ho, &f->host), 0);
    char err[512];
    int32_t rc =
        wsel_host_switch(f->host, WSEL_TEST_OUTCOME_FIXTURE, "{}", err, sizeof(err));
    if (rc != 0)
        print_error("switch: %s\n", err);
    assert_int_equal(rc, 0);
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = BS,
                             .kv_source = WSEL_ROUTER_KV_HISTORY,
                             .host = f->host,
                             .busy_active_requests = busy_requests,
                             .clock_us = fake_clock};
    assert_int_equal(wsel_router_create(&o, &f->router, err, sizeof(err)), 0);
    nlogs = 0;
    return f->router;
}

static wsel_router *make_outcomes(fx *f)
{
    return make_fixture_router(f, 0);
}

/* The two lines the fixture logs for one finished request. */
static void expect_outcome(const wsel_route_result *a, uint64_t ttft, uint64_t e2e,
                           uint64_t fin, uint32_t prompt, uint32_t cached,
                           uint32_t output, uint32_t flags)
{
    char want[256];
    assert_int_equal(nlogs, 2);
    snprintf(want, sizeof(want), "finished %llu on %llu/%u",
             (unsigned long long)a->request_id, (unsigned long long)a->worker_id,
             a->dp_rank);
    assert_string_equal(logs[0], want);
    snprintf(want, sizeof(want),
             "outcome %llu on %llu/%u ttft=%llu e2e=%llu fin=%llu prompt=%u cached=%u "
             "output=%u flags=%u",
             (unsigned long long)a->request_id, (unsigned long long)a->worker_id,
             a->dp_rank, (unsigned long long)ttft, (unsigned long long)e2e,
             (unsigned long long)fin, prompt, cached, output, flags);
    assert_string_equal(logs[1], want);
    nlogs = 0;
}

/* A finished request reaches the policy with the row it ran on, its times
 * on the router's clock, its prompt, the cached tokens it was routed with,
 * and what the caller said (output tokens, failure). */
static void test_outcome_fields(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make_outcomes(&f);
    add(r, 1, 2);
    add(r, 2, 1);
    uint32_t t[18];
    for (uint32_t i = 0; i < 18; i++)
        t[i] = 300 + i;
    wsel_route_result a, b;
    /* Routed at 1000, first token at 1250, finished at 1900 with 7 output
     * tokens: 18 prompt tokens, nothing cached. */
    fake_now_us = 1000;
    assert_int_equal(route(r, t, 18, &a), 0);
    assert_int_equal(a.answer, WSEL_ANSWER_PLUGIN);
    fake_now_us = 1250;
    assert_int_equal(wsel_router_first_token(r, a.request_id), 0);
    fake_now_us = 1300;
    assert_int_equal(wsel_router_first_token(r, a.request_id), 0); /* the first counts */
    assert_int_equal(nlogs, 0);
    fake_now_us = 1900;
    wsel_router_finish fin = {.struct_size = sizeof(fin), .output_tokens = 7};
    assert_int_equal(wsel_router_finished_ex(r, a.request_id, &fin), 0);
    expect_outcome(&a, 250, 900, 1900, 18, 0, 7, 0);
    /* The same prompt again: the 4 blocks history put on that rank, 16
     * tokens cached. It fails before its first token: ttft unknown (0). */
    fake_now_us = 2000;
    assert_int_equal(route(r, t, 18, &b), 0);
    assert_int_equal(b.overlap_blocks, 4);
    fake_now_us = 2600;
    fin = (wsel_router_finish){.struct_size = sizeof(fin),
                               .flags = WSEL_ROUTER_FINISH_FAILED};
    assert_int_equal(wsel_router_finished_ex(r, b.request_id, &fin), 0);
    expect_outcome(&b, 0, 600, 2600, 18, 16, 0, WSEL_OUTCOME_FAILED);
    /* wsel_router_finished: output unknown, not failed; a first token in
     * the route's microsecond counts as 1 us, never as "unknown". */
    fake_now_us = 3000;
    assert_int_equal(route(r, t, 18, &b), 0);
    assert_int_equal(wsel_router_first_token(r, b.request_id), 0);
    fake_now_us = 3010;
    assert_int_equal(wsel_router_finished(r, b.request_id), 0);
    expect_outcome(&b, 1, 10, 3010, 18, 16, 0, 0);
    /* The caller's own figures: cached tokens (capped at the prompt) and
     * times replace the router's. */
    fake_now_us = 4000;
    assert_int_equal(route(r, t, 18, &b), 0);
    fin = (wsel_router_finish){.struct_size = sizeof(fin),
                               .flags = WSEL_ROUTER_FINISH_CACHED_KNOWN,
                               .output_tokens = 3,
                               .cached_tokens = 12,
                               .ttft_us = 55,
                               .e2e_us = 77};
    fake_now_us = 5000;
    assert_int_equal(wsel_router_finished_ex(r, b.request_id, &fin), 0);
    expect_outcome(&b, 55, 77, 5000, 18, 12, 3, 0);
    assert_int_equal(route(r, t, 18, &b), 0);
    fin.cached_tokens = 1000;
    fin.ttft_us = fin.e2e_us = 0;
    assert_int_equal(wsel_router_finished_ex(r, b.request_id, &fin), 0);
    expect_outcome(&b, 0, 0, 5000, 18, 18, 3, 0);
    /* A caller's shorter struct (no cached_tokens, no times) reads 0 there. */
    assert_int_equal(route(r, t, 18, &b), 0);
    fin = (wsel_router_finish){.struct_size = offsetof(wsel_router_finish, cached_tokens),
                               .flags = WSEL_ROUTER_FINISH_CACHED_KNOWN,
                               .output_tokens = 2,
                               .cached_tokens = 5,
                               .ttft_us = 99};
    fake_now_us = 5040;
    assert_int_equal(wsel_router_finished_ex(r, b.request_id, &fin), 0);
    expect_outcome(&b, 0, 40, 5040, 18, 0, 2, 0);
    /* Too short to hold its flags: refused, the request still in flight. */
    assert_int_equal(route(r, t, 18, &b), 0);
    fin.struct_size = 4;
    assert_int_equal(wsel_router_finished_ex(r, b.request_id, &fin), WSEL_EINVAL);
    assert_int_equal(nlogs, 0);
    assert_int_equal(wsel_router_finished_ex(r, b.request_id, NULL), 0);
    assert_int_equal(nlogs, 2);
    nlogs = 0;
    assert_int_equal(wsel_router_finished_ex(r, b.request_id, NULL), WSEL_ENOENT);
    assert_int_equal(nlogs, 0);
    done(&f);
}

/* Cached tokens are the overlap x block size capped at the prompt (a text
 * prompt's token estimate may be shorter than its chunks); a request whose
 * worker was removed is forgotten, its outcome never delivered. */
static void test_outcome_cap_and_removed_worker(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make_outcomes(&f);
    add(r, 1, 1);
    /* 32 characters = 2 chunks of 16; isl given as 5 tokens. */
    wsel_route_request q = {.struct_size = sizeof(q),
                            .isl_tokens = 5,
                            .text = "0123456789abcdefghijklmnopqrstuv",
                            .text_len = 32};
    wsel_route_result a;
    fake_now_us = 100;
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    expect_outcome(&a, 0, 0, 100, 5, 0, 0, 0);
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(a.overlap_blocks, 2);
    fake_now_us = 130;
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    expect_outcome(&a, 0, 30, 130, 5, 5, 0, 0);
    /* Removed while in flight: the finish is accepted, nothing delivered. */
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(wsel_router_remove_worker(r, 1), 0);
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    assert_int_equal(nlogs, 0);
    done(&f);
}

/* --- the table the policy sees --------------------------------------------- */

/* The fixture's "table ..." line for a table (same format). */
static void format_table(char *out, size_t size, const wsel_table *t)
{
    size_t n =
        (size_t)snprintf(out, size, "table rows=%u groups=%u epoch=%llu", t->num_rows,
                         t->num_groups, (unsigned long long)t->topology_epoch);
    for (uint32_t i = 0; i < t->num_rows && n < size; i++)
        n += (size_t)snprintf(
            out + n, size - n, " | %llu/%u o=%u p=%llu d=%llu c=%a f=%u a=%u k=%llu",
            (unsigned long long)t->worker_id[i], t->dp_rank[i], t->overlap_blocks[i],
            (unsigned long long)t->prefill_tokens[i],
            (unsigned long long)t->decode_blocks[i], t->cost[i], t->flags[i],
            t->active_requests[i], (unsigned long long)t->kv_capacity_blocks[i]);
    for (uint32_t g = 0; g < t->num_groups && n < size; g++)
        n += (size_t)snprintf(out + n, size - n, " g%u+%u", t->group_first_row[g],
                              t->group_row_count[g]);
}

/* Full blocks two prompts share from the start. */
static uint32_t common_blocks(const uint32_t *a, uint32_t na, const uint32_t *b,
                              uint32_t nb)
{
    uint32_t k = 0;
    while ((k + 1) * BS <= na && (k + 1) * BS <= nb &&
           memcmp(a + k * BS, b + k * BS, BS * sizeof(uint32_t)) == 0)
        k++;
    return k;
}

/* The table libwsel-router hands the policy is, column for column and bit
 * for bit, wsel_table_build's from the same rank states: overlaps from the
 * history, loads, busy and excluded flags, a weight override, the group
 * view and the epoch. */
static void test_table_matches_wsel_table_build(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make_fixture_router(&f, 2);
    add(r, 3, 2);
    add(r, 1, 2);
    add(r, 2, 1);
    enum { P = 10, ROWS = 5 };
    uint32_t prompts[P][32], len[P];
    for (uint32_t k = 0; k < P; k++) {
        len[k] = 9 + (k * 7) % 23;
        for (uint32_t i = 0; i < 32; i++)
            prompts[k][i] = i < (k % 4) * 4 ? 500 + i : 10000 * (k + 1) + i;
    }
    /* Which prompts each row holds (history: every routed prompt). */
    int held[ROWS][P];
    memset(held, 0, sizeof(held));
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, ROWS), 0);
    wsel_route_result res[P];
    for (uint32_t k = 0; k < P; k++) {
        if (k == 6) /* the first request's worker drains: its rows excluded */
            assert_int_equal(wsel_router_drain_worker(r, res[0].worker_id), 0);
        wsel_router_rank_info ri[ROWS];
        uint32_t n = wsel_router_read_ranks(r, ri, ROWS);
        wsel_rank_state st[ROWS];
        for (uint32_t i = 0; i < n; i++) {
            uint32_t ov = 0;
            for (uint32_t j = 0; j < k; j++)
                if (held[i][j]) {
                    uint32_t c = common_blocks(prompts[j], len[j], prompts[k], len[k]);
                    ov = c > ov ? c : ov;
                }
            st[i] =
                (wsel_rank_state){.worker_id = ri[i].worker_id,
                                  .dp_rank = ri[i].dp_rank,
                                  .overlap_blocks = ov,
                                  .active_prefill_tokens = ri[i].active_prefill_tokens,
                                  .active_blocks = ri[i].active_blocks,
                                  .kv_capacity_blocks = 16384,
                                  .active_requests = ri[i].active_requests,
                                  .flags = (uint8_t)ri[i].flags};
        }
        wsel_request req = {.request_id = k + 1,
                            .isl_tokens = len[k],
                            .block_size = BS,
                            .overlap_score_weight = 2.5};
        char err[256], want[2048];
        assert_int_equal(
            wsel_table_build(&buf, &req, st, n, wsel_router_epoch(r), err, sizeof(err)),
            0);
        format_table(want, sizeof(want), &buf.table);
        wsel_route_request q = {.struct_size = sizeof(q),
                                .overrides = WSEL_ROUTE_SET_WEIGHT,
                                .request_id = k + 1,
                                .tokens = prompts[k],
                                .num_tokens = len[k],
                                .overlap_score_weight = 2.5};
        last_table[0] = '\0';
        assert_int_equal(wsel_router_route(r, &q, &res[k]), 0);
        assert_string_equal(last_table, want);
        for (uint32_t i = 0; i < n; i++)
            if (ri[i].worker_id == res[k].worker_id && ri[i].dp_rank == res[k].dp_rank)
                held[i][k] = 1;
        /* The first token of every other request: prefill leaves; every
         * third request finishes two routes later: its load leaves. */
        if (k % 2)
            assert_int_equal(wsel_router_first_token(r, res[k].request_id), 0);
        if (k % 3 == 2)
            assert_int_equal(wsel_router_finished(r, res[k - 2].request_id), 0);
    }
    /* A weight the host would refuse is refused. */
    wsel_route_request q = {.struct_size = sizeof(q),
                            .overrides = WSEL_ROUTE_SET_WEIGHT,
                            .tokens = prompts[0],
                            .num_tokens = len[0],
                            .overlap_score_weight = -1.0};
    wsel_route_result bad;
    assert_int_equal(wsel_router_route(r, &q, &bad), WSEL_EINVAL);
    wsel_table_buf_free(&buf);
    done(&f);
}

/* --- edge cases (an audit of the contract against the code) ---------- */

static int32_t route_id(wsel_router *r, uint64_t id, const uint32_t *tokens, uint32_t n,
                        wsel_route_result *res)
{
    wsel_route_request q = {
        .struct_size = sizeof(q), .request_id = id, .tokens = tokens, .num_tokens = n};
    return wsel_router_route(r, &q, res);
}

static wsel_router_rank_info rank0(wsel_router *r)
{
    wsel_router_rank_info ri;
    memset(&ri, 0, sizeof(ri));
    assert_true(wsel_router_read_ranks(r, &ri, 1) >= 1);
    return ri;
}

/* Finish requests a and b, the only ones in flight on the first rank:
 * it is left with no load. */
static void finish_idle(wsel_router *r, uint64_t a, uint64_t b)
{
    assert_int_equal(wsel_router_finished(r, a), 0);
    assert_int_equal(wsel_router_finished(r, b), 0);
    wsel_router_rank_info ri = rank0(r);
    assert_int_equal(ri.active_prefill_tokens, 0);
    assert_int_equal(ri.active_blocks, 0);
    assert_int_equal(ri.active_requests, 0);
}

/* Capacity 1 and block size 1: the rank keeps the prompt's first block only
 * (history records deepest first), so the next route overlaps by 1. */
static void test_capacity_one_block_size_one(void **state)
{
    (void)state;
    fx f;
    wsel_router *r =
        make_with(&f, (wsel_router_options){
                          .block_size = 1, .capacity_blocks = 1, .max_prompt_blocks = 0});
    add(r, 1, 1);
    const uint32_t t[3] = {7, 8, 9};
    wsel_route_result a;
    assert_int_equal(route_id(r, 0, t, 3, &a), 0);
    assert_int_equal(a.num_blocks, 3);
    assert_int_equal(a.overlap_blocks, 0);
    assert_int_equal(rank0(r).cached_blocks, 1);
    assert_int_equal(route_id(r, 0, t, 3, &a), 0);
    assert_int_equal(a.overlap_blocks, 1);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.index_entries, 1);
    /* Deepest first: the second route evicts block 0 for block 2, then
     * block 2 for block 1, then block 1 for block 0 again. */
    assert_int_equal(c.index_evictions, 2 + 3);
    done(&f);
}

/* A prompt beyond max_prompt_blocks: only the first blocks are hashed, the
 * load counts the whole prompt. */
static void test_prompt_beyond_max_blocks(void **state)
{
    (void)state;
    fx f;
    wsel_router *r =
        make_with(&f, (wsel_router_options){
                          .block_size = 4, .capacity_blocks = 0, .max_prompt_blocks = 2});
    add(r, 1, 1);
    uint32_t t[18];
    for (uint32_t i = 0; i < 18; i++)
        t[i] = i;
    wsel_route_result a, b;
    assert_int_equal(route_id(r, 0, t, 18, &a), 0);
    assert_int_equal(a.num_blocks, 2);
    wsel_router_rank_info ri = rank0(r);
    assert_int_equal(ri.active_prefill_tokens, 18);
    assert_int_equal(ri.active_blocks, 4);
    assert_int_equal(ri.cached_blocks, 2);
    assert_int_equal(route_id(r, 0, t, 18, &b), 0);
    assert_int_equal(b.overlap_blocks, 2);
    ri = rank0(r);
    assert_int_equal(ri.active_prefill_tokens, 18 + 10);
    assert_int_equal(ri.active_blocks, 4 + 2);
    finish_idle(r, a.request_id, b.request_id);
    done(&f);
}

/* Empty prompts route (no blocks, no load but the request itself). */
static void test_empty_prompts(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 1);
    const uint32_t t[1] = {1};
    wsel_route_result a, b;
    assert_int_equal(route_id(r, 0, t, 0, &a), 0);
    assert_int_equal(a.num_blocks, 0);
    wsel_route_request q = {.struct_size = sizeof(q), .text = "", .text_len = 0};
    assert_int_equal(wsel_router_route(r, &q, &b), 0);
    assert_int_equal(b.num_blocks, 0);
    wsel_router_rank_info ri = rank0(r);
    assert_int_equal(ri.active_requests, 2);
    assert_int_equal(ri.active_prefill_tokens, 0);
    assert_int_equal(ri.active_blocks, 0);
    assert_int_equal(ri.cached_blocks, 0);
    /* Tokens NULL with a count is refused, nothing accounted. */
    wsel_route_request bad = {.struct_size = sizeof(bad), .num_tokens = 4};
    assert_int_equal(wsel_router_route(r, &bad, &b), WSEL_EINVAL);
    assert_int_equal(rank0(r).active_requests, 2);
    done(&f);
}

/* Request ids: 0 is assigned, never one in flight; an id is free again
 * once finished; a duplicate in flight changes nothing. */
static void test_request_ids(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 1);
    uint32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    wsel_route_result a, b, c;
    assert_int_equal(route_id(r, 2, t, 8, &a), 0); /* the caller takes 2 */
    assert_int_equal(route_id(r, 0, t, 8, &b), 0);
    assert_int_equal(b.request_id, 1);
    assert_int_equal(route_id(r, 0, t, 8, &c), 0);
    assert_int_equal(c.request_id, 3); /* 2 is in flight: skipped */
    wsel_router_rank_info before = rank0(r);
    wsel_router_counters c0, c1;
    wsel_router_read_counters(r, &c0);
    assert_int_equal(route_id(r, 2, t, 8, &a), WSEL_ESTATE);
    wsel_router_rank_info after = rank0(r);
    wsel_router_read_counters(r, &c1);
    assert_memory_equal(&before, &after, sizeof(before));
    assert_int_equal(c1.routes, c0.routes);
    assert_int_equal(wsel_router_finished(r, 2), 0);
    assert_int_equal(wsel_router_first_token(r, 2), WSEL_ENOENT);
    assert_int_equal(route_id(r, 2, t, 8, &a), 0); /* reused after finish */
    assert_int_equal(a.request_id, 2);
    assert_int_equal(rank0(r).active_requests, 3);
    done(&f);
}

/* Huge token counts: a text prompt claiming UINT32_MAX tokens, block size 1,
 * twice: the 64-bit load sums do not wrap. */
static void test_huge_token_counts(void **state)
{
    (void)state;
    fx f;
    wsel_router *r =
        make_with(&f, (wsel_router_options){
                          .block_size = 1, .capacity_blocks = 0, .max_prompt_blocks = 0});
    add(r, 1, 1);
    wsel_route_request q = {.struct_size = sizeof(q),
                            .isl_tokens = UINT32_MAX,
                            .text = "abcdefgh",
                            .text_len = 8};
    wsel_route_result a, b;
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(wsel_router_route(r, &q, &b), 0);
    assert_int_equal(b.overlap_blocks, 2); /* two chunks of 4 characters */
    wsel_router_rank_info ri = rank0(r);
    assert_int_equal(ri.active_prefill_tokens, 2ull * UINT32_MAX - 2 * 1);
    assert_int_equal(ri.active_blocks, 2ull * UINT32_MAX - 2);
    finish_idle(r, a.request_id, b.request_id);
    done(&f);
}

/* In flight across drain, remove and re-add of the same id: the old
 * incarnation's first token and finish touch nothing of the new one, and a
 * drain of the new one with nothing in flight removes it at once. */
static void test_readd_same_id_accounting(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 0, 0);
    add(r, 1, 1);
    uint32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    wsel_route_result a, b;
    assert_int_equal(route_id(r, 0, t, 8, &a), 0);
    assert_int_equal(wsel_router_drain_worker(r, 1), 0);
    assert_int_equal(wsel_router_read_ranks(r, NULL, 0), 1); /* kept: a in flight */
    assert_int_equal(wsel_router_remove_worker(r, 1), 0);
    add(r, 1, 1);
    assert_int_equal(rank0(r).cached_blocks, 0); /* the index went with it */
    assert_int_equal(route_id(r, 0, t, 8, &b), 0);
    assert_int_equal(b.overlap_blocks, 0);
    assert_int_equal(wsel_router_first_token(r, a.request_id), 0);
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    wsel_router_rank_info ri = rank0(r);
    assert_int_equal(ri.active_requests, 1);
    assert_int_equal(ri.active_prefill_tokens, 8);
    assert_int_equal(ri.active_blocks, 2);
    assert_int_equal(ri.flags & WSEL_ROW_EXCLUDED, 0); /* not draining */
    assert_int_equal(wsel_router_finished(r, b.request_id), 0);
    assert_int_equal(wsel_router_drain_worker(r, 1), 0);
    assert_int_equal(wsel_router_read_ranks(r, NULL, 0), 0);
    done(&f);
}

/* struct_size: below the first version's refused, accounting nothing; a
 * caller built against a later header passes a larger struct whose extra
 * bytes are not read. */
static void test_route_request_struct_size(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, WSEL_ROUTER_KV_HISTORY, 64, 4);
    add(r, 1, 1);
    const uint32_t t[2 * BS] = {1, 2, 3, 4, 5, 6, 7, 8};
    wsel_route_result res;
    wsel_route_request q = {.struct_size = 0, .tokens = t, .num_tokens = 2 * BS};
    assert_int_equal(wsel_router_route(r, &q, &res), WSEL_EINVAL);
    q.struct_size = (uint32_t)WSEL_ROUTE_REQUEST_SIZE_1_0 - 1;
    assert_int_equal(wsel_router_route(r, &q, &res), WSEL_EINVAL);
    wsel_router_counters c;
    wsel_router_read_counters(r, &c);
    assert_int_equal(c.routes, 0);
    struct {
        wsel_route_request v1;
        uint64_t later; /* a field a later header appends */
    } bigger;
    memset(&bigger, 0xff, sizeof(bigger));
    bigger.v1 = (wsel_route_request){
        .struct_size = sizeof(bigger), .tokens = t, .num_tokens = 2 * BS};
    assert_int_equal(wsel_router_route(r, &bigger.v1, &res), 0);
    assert_int_equal(res.num_blocks, 2);
    assert_int_equal(wsel_router_finished(r, res.request_id), 0);
    done(&f);
}

/* NULL handles: every call answers (an error, 0 or nothing), none crashes. */
static void test_null_router(void **state)
{
    (void)state;
    wsel_route_request q = {.struct_size = sizeof(q)};
    wsel_route_result res;
    wsel_router_counters c;
    wsel_router_kv_cpu kc = {.struct_size = sizeof(kc)};
    assert_int_equal(wsel_router_route(NULL, &q, &res), WSEL_EINVAL);
    assert_int_equal(wsel_router_first_token(NULL, 1), WSEL_EINVAL);
    assert_int_equal(wsel_router_finished(NULL, 1), WSEL_EINVAL);
    assert_int_equal(wsel_router_drain_worker(NULL, 1), WSEL_EINVAL);
    assert_int_equal(wsel_router_remove_worker(NULL, 1), WSEL_EINVAL);
    assert_int_equal(wsel_router_set_worker_available(NULL, 1, 1), WSEL_EINVAL);
    assert_int_equal(wsel_router_apply_kv_message(NULL, 1, 0, NULL, NULL, 0),
                     WSEL_EINVAL);
    assert_int_equal(wsel_router_read_kv_cpu(NULL, &kc), WSEL_EINVAL);
    assert_int_equal(wsel_router_read_ranks(NULL, NULL, 0), 0);
    wsel_router_read_counters(NULL, &c);
    wsel_router_flush(NULL);
    wsel_router_destroy(NULL);
    assert_int_equal(wsel_router_epoch(NULL), 0);
}

/* A block size whose default text chunk (4 x block_size characters) does
 * not fit 32 bits: the chunk saturates instead of wrapping to a few
 * characters (block size 2^30 + 1 made it 4, so an 8-character text was
 * two "blocks" of 2^30 tokens, its whole prompt counted as cached). */
static void test_text_chunk_of_huge_block_size(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make_with(&f, (wsel_router_options){.block_size = 0x40000001u,
                                                         .capacity_blocks = 0,
                                                         .max_prompt_blocks = 0});
    add(r, 1, 1);
    wsel_route_request q = {.struct_size = sizeof(q), .text = "abcdefgh", .text_len = 8};
    wsel_route_result a;
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(wsel_router_route(r, &q, &a), 0);
    assert_int_equal(a.num_blocks, 0);
    assert_int_equal(a.overlap_blocks, 0);
    assert_int_equal(rank0(r).active_prefill_tokens, 2 * 2); /* isl = 8 / 4, twice */
    done(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_rule),
        cmocka_unit_test(test_topology),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_unavailable),
        cmocka_unit_test(test_accounting),
        cmocka_unit_test(test_partial_overlap_and_text),
        cmocka_unit_test(test_history_lru_bound),
        cmocka_unit_test(test_plugin),
        cmocka_unit_test(test_builtin),
        cmocka_unit_test(test_deferred_history),
        cmocka_unit_test(test_outcome_fields),
        cmocka_unit_test(test_outcome_cap_and_removed_worker),
        cmocka_unit_test(test_table_matches_wsel_table_build),
        cmocka_unit_test(test_plugin_writing_the_flags),
        cmocka_unit_test(test_capacity_one_block_size_one),
        cmocka_unit_test(test_prompt_beyond_max_blocks),
        cmocka_unit_test(test_empty_prompts),
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_huge_token_counts),
        cmocka_unit_test(test_readd_same_id_accounting),
        cmocka_unit_test(test_route_request_struct_size),
        cmocka_unit_test(test_null_router),
        cmocka_unit_test(test_text_chunk_of_huge_block_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
