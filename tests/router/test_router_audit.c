// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_audit.c -- libwsel-router's edge cases, found by reading its
 * contract (wsel_router.h) against the code: capacity 1 with block size 1,
 * a prompt beyond max_prompt_blocks, empty prompts, request ids (0, reuse,
 * duplicates), huge token counts, in-flight accounting across drain,
 * remove and re-add of the same worker id, NULL handles. Exact answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_router.h"

typedef struct fx {
    wsel_host *host;
    wsel_router *router;
} fx;

static wsel_router *make(fx *f, uint32_t bs, uint32_t capacity, uint32_t max_blocks)
{
    assert_int_equal(wsel_host_create(NULL, &f->host), 0);
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = bs,
                             .kv_source = WSEL_ROUTER_KV_HISTORY,
                             .capacity_blocks = capacity,
                             .max_prompt_blocks = max_blocks,
                             .host = f->host};
    char err[256];
    assert_int_equal(wsel_router_create(&o, &f->router, err, sizeof(err)), 0);
    return f->router;
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

/* Capacity 1 and block size 1: the rank keeps the prompt's first block only
 * (history records deepest first), so the next route overlaps by 1. */
static void test_capacity_one_block_size_one(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, 1, 1, 0);
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
    wsel_router *r = make(&f, 4, 0, 2);
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
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    assert_int_equal(wsel_router_finished(r, b.request_id), 0);
    ri = rank0(r);
    assert_int_equal(ri.active_prefill_tokens, 0);
    assert_int_equal(ri.active_blocks, 0);
    assert_int_equal(ri.active_requests, 0);
    done(&f);
}

/* Empty prompts route (no blocks, no load but the request itself). */
static void test_empty_prompts(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, 4, 0, 0);
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
    wsel_router *r = make(&f, 4, 0, 0);
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
    wsel_router *r = make(&f, 1, 0, 0);
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
    assert_int_equal(wsel_router_finished(r, a.request_id), 0);
    assert_int_equal(wsel_router_finished(r, b.request_id), 0);
    ri = rank0(r);
    assert_int_equal(ri.active_prefill_tokens, 0);
    assert_int_equal(ri.active_blocks, 0);
    done(&f);
}

/* In flight across drain, remove and re-add of the same id: the old
 * incarnation's first token and finish touch nothing of the new one, and a
 * drain of the new one with nothing in flight removes it at once. */
static void test_readd_same_id_accounting(void **state)
{
    (void)state;
    fx f;
    wsel_router *r = make(&f, 4, 0, 0);
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
    wsel_router *r = make(&f, 0x40000001u, 0, 0);
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
        cmocka_unit_test(test_capacity_one_block_size_one),
        cmocka_unit_test(test_prompt_beyond_max_blocks),
        cmocka_unit_test(test_empty_prompts),
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_huge_token_counts),
        cmocka_unit_test(test_readd_same_id_accounting),
        cmocka_unit_test(test_null_router),
        cmocka_unit_test(test_text_chunk_of_huge_block_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
