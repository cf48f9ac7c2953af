// SPDX-License-Identifier: Apache-2.0
/*
 * test_kvcache.c -- one rank's prefix cache: reuse, pinning, LRU order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kvcache.h"

typedef struct evictions {
    uint64_t hash[16];
    int n;
} evictions;

static void record(void *ctx, uint64_t hash)
{
    evictions *e = ctx;
    e->hash[e->n++] = hash;
}

static void test_reuses_a_cached_prefix(void **state)
{
    (void)state;
    sim_kvcache kv;
    assert_int_equal(sim_kv_init(&kv, 8), 0);
    uint64_t a[3] = {10, 11, 12}, b[3] = {10, 11, 99};
    uint32_t sa[3], sb[3], match, shortfall;
    assert_int_equal(sim_kv_admit(&kv, a, 3, 1, sa, &match, &shortfall, NULL, NULL), 0);
    assert_int_equal(match, 0);
    assert_int_equal(sim_kv_used(&kv), 4);
    assert_int_equal(sim_kv_admit(&kv, b, 3, 0, sb, &match, &shortfall, NULL, NULL), 0);
    assert_int_equal(match, 2);
    assert_int_equal(sim_kv_used(&kv), 5); /* only block 99 is new */
    sim_kv_release(&kv, sb, 3, 0);
    sim_kv_release(&kv, sa, 3, 1);
    assert_int_equal(sim_kv_used(&kv), 4);
    assert_int_equal(kv.lru_size, 4);
    assert_int_equal(sim_kv_match(&kv, b, 3), 3);
    sim_kv_free(&kv);
}

static void test_pinned_blocks_are_never_evicted(void **state)
{
    (void)state;
    sim_kvcache kv;
    assert_int_equal(sim_kv_init(&kv, 4), 0);
    uint64_t a[3] = {1, 2, 3}, b[2] = {7, 8};
    uint32_t sa[3], sb[2], match, shortfall = 0;
    evictions ev = {{0}, 0};
    assert_int_equal(sim_kv_admit(&kv, a, 3, 0, sa, &match, &shortfall, record, &ev), 0);
    /* 1 free block, nothing evictable: two more blocks cannot fit. */
    assert_int_equal(sim_kv_admit(&kv, b, 2, 0, sb, &match, &shortfall, record, &ev),
                     WSEL_EBUSY);
    assert_int_equal(ev.n, 0);
    assert_int_equal(shortfall, 1); /* needs 2, has 1 free */
    assert_int_equal(sim_kv_used(&kv), 3);
    sim_kv_release(&kv, sa, 3, 0); /* now 1 free + 3 evictable */
    assert_int_equal(sim_kv_available(&kv), 4);
    assert_int_equal(sim_kv_admit(&kv, b, 2, 0, sb, &match, &shortfall, record, &ev), 0);
    assert_int_equal(ev.n, 1); /* one evicted: a's tail block */
    assert_int_equal(ev.hash[0], 3);
    sim_kv_free(&kv);
}

static void test_evicts_the_oldest_release_tail_block_first(void **state)
{
    (void)state;
    sim_kvcache kv;
    assert_int_equal(sim_kv_init(&kv, 4), 0);
    uint64_t a[2] = {1, 2}, b[2] = {5, 6}, c[3] = {7, 8, 9};
    uint32_t sa[2], sb[2], sc[3], match, shortfall;
    evictions ev = {{0}, 0};
    assert_int_equal(sim_kv_admit(&kv, a, 2, 0, sa, &match, &shortfall, record, &ev), 0);
    assert_int_equal(sim_kv_admit(&kv, b, 2, 0, sb, &match, &shortfall, record, &ev), 0);
    sim_kv_release(&kv, sa, 2, 0); /* LRU: 2, 1 */
    sim_kv_release(&kv, sb, 2, 0); /* LRU: 2, 1, 6, 5 */
    assert_int_equal(sim_kv_admit(&kv, c, 3, 0, sc, &match, &shortfall, record, &ev), 0);
    assert_int_equal(ev.n, 3);
    assert_int_equal(ev.hash[0], 2); /* a's tail before its prefix */
    assert_int_equal(ev.hash[1], 1);
    assert_int_equal(ev.hash[2], 6);
    assert_int_equal(sim_kv_match(&kv, b, 2), 1); /* 5 survives */
    sim_kv_free(&kv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuses_a_cached_prefix),
        cmocka_unit_test(test_pinned_blocks_are_never_evicted),
        cmocka_unit_test(test_evicts_the_oldest_release_tail_block_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
