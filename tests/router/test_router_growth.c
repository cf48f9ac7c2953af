// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_growth.c -- the router's containers grow without an O(n)
 * step: rt_map answers as a plain map across incremental resizes
 * (rt_map.c compiled in), rt_seg's ids keep their elements where they
 * are, and a router in history mode routing 2^17 requests never moves
 * more than RT_MAP_STEP old map slots in one operation (counted by the
 * maps; a deterministic check where a timing one would measure the
 * machine's load).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "router_internal.h"
#include "wsel.h"

#define KEYS 5000u

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Every key's answer equals the reference's (RT_MAP_NONE = absent). */
static void assert_same(const rt_map *m, const uint32_t *ref)
{
    size_t n = 0;
    for (uint32_t k = 0; k < KEYS; k++) {
        assert_int_equal(rt_map_get(m, (uint64_t)k * 0x10001u), ref[k]);
        n += ref[k] != RT_MAP_NONE;
    }
    assert_int_equal(m->count, n);
}

static void test_map_answers_as_a_plain_map_across_resizes(void **state)
{
    (void)state;
    static uint32_t ref[KEYS];
    rt_map m;
    uint64_t seed = 7, resizes = 0;
    assert_int_equal(rt_map_init(&m, 4), 0);
    for (uint32_t k = 0; k < KEYS; k++)
        ref[k] = RT_MAP_NONE;
    for (uint32_t i = 0; i < 40000; i++) {
        uint32_t k = (uint32_t)(lcg(&seed) % KEYS);
        uint64_t key = (uint64_t)k * 0x10001u;
        size_t mask = m.mask;
        if (lcg(&seed) % 4 == 0) { /* a quarter deletes, so the map grows */
            rt_map_del(&m, key);
            ref[k] = RT_MAP_NONE;
        } else {
            uint32_t v = (uint32_t)lcg(&seed) % 1000000u;
            assert_int_equal(rt_map_put(&m, key, v), 0);
            ref[k] = v;
        }
        resizes += m.mask != mask;
        if (i % 97 == 0 || m.old)
            assert_same(&m, ref);
    }
    assert_same(&m, ref);
    assert_true(resizes >= 8);
    assert_int_equal(m.most_moved, RT_MAP_STEP);
    rt_map_free(&m);
}

static void test_seg_keeps_elements_in_place_as_it_grows(void **state)
{
    (void)state;
    rt_seg s;
    rt_seg_init(&s, 3); /* 16 elements first */
    uint64_t *first = NULL;
    for (uint32_t i = 0; i < 10000; i++) {
        uint32_t id;
        assert_int_equal(rt_seg_fresh(&s, sizeof(uint64_t), &id), 0);
        assert_int_equal(id, i);
        *RT_SEG_AT(&s, uint64_t, id) = (uint64_t)i * 3;
        if (i == 0)
            first = RT_SEG_AT(&s, uint64_t, 0);
    }
    assert_ptr_equal(RT_SEG_AT(&s, uint64_t, 0), first);
    for (uint32_t i = 0; i < 10000; i++)
        assert_int_equal(*RT_SEG_AT(&s, uint64_t, i), (uint64_t)i * 3);
    assert_int_equal(s.cap, 16384); /* doubles, as a realloc'd array */
    rt_seg_free(&s);
}

#define ROUTES (1u << 17)

/* Route ROUTES requests of 8 new blocks each in history mode, finishing
 * a third of them out of order. */
static void route_many(wsel_router *r)
{
    static uint32_t tokens[128];
    static uint64_t ids[ROUTES];
    for (uint32_t i = 0; i < ROUTES; i++) {
        for (uint32_t k = 0; k < 128; k++)
            tokens[k] = i * 128u + k;
        wsel_route_request q = {.struct_size = sizeof(q), .tokens = tokens, .num_tokens = 128};
        wsel_route_result res;
        assert_int_equal(wsel_router_route(r, &q, &res), 0);
        ids[i] = res.request_id;
        if (i % 3 == 0)
            assert_int_equal(wsel_router_finished(r, ids[i / 2]), 0);
    }
}

static void test_history_growth_moves_a_bounded_number_of_slots(void **state)
{
    (void)state;
    wsel_host *h;
    wsel_router *r;
    char err[256];
    assert_int_equal(wsel_host_create(NULL, &h), 0);
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = 16,
                             .max_rows = 4,
                             .capacity_blocks = 1u << 18,
                             .host = h};
    assert_int_equal(wsel_router_create(&o, &r, err, sizeof(err)), 0);
    wsel_router_worker wk = {.worker_id = 1, .address = "127.0.0.1:1", .dp_size = 4};
    assert_int_equal(wsel_router_add_worker(r, &wk, err, sizeof(err)), 0);
    route_many(r);
    /* The maps grew many times, each put moving at most RT_MAP_STEP. */
    assert_true(r->ix.blocks.mask + 1 >= 2u * ROUTES * 8);
    assert_int_equal(r->ix.blocks.most_moved, RT_MAP_STEP);
    assert_true(r->reqs.mask + 1 >= ROUTES);
    assert_int_equal(r->reqs.most_moved, RT_MAP_STEP);
    /* The arrays grew by segments (nothing moved), one per doubling. */
    assert_int_equal(r->ix.entries + r->ix.evictions, (uint64_t)ROUTES * 8);
    assert_int_equal(r->ix.e.cap, ROUTES * 8);
    assert_int_equal(r->ix.e.nseg, 11); /* 1,024 << 10 */
    assert_true(r->req.nseg > 5);
    wsel_router_destroy(r);
    wsel_host_destroy(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_answers_as_a_plain_map_across_resizes),
        cmocka_unit_test(test_seg_keeps_elements_in_place_as_it_grows),
        cmocka_unit_test(test_history_growth_moves_a_bounded_number_of_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
