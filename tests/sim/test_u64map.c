// SPDX-License-Identifier: Apache-2.0
/*
 * test_u64map.c -- the open-addressing map agrees with a plain array under
 * random inserts and erases (backward shift keeps every key findable).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "u64map.h"

static void test_finds_what_was_inserted_and_forgets_what_was_erased(void **state)
{
    (void)state;
    enum { KEYS = 4096 };
    static uint64_t present[KEYS]; /* value + 1, or 0 when absent */
    memset(present, 0, sizeof(present));
    sim_u64map map;
    assert_int_equal(sim_u64map_init(&map, 16, 1), 0);
    uint64_t x = 12345;
    for (int step = 0; step < 200000; step++) {
        x = sim_mix64(x);
        uint64_t key = x % KEYS; /* small keys: many share probe runs */
        if ((x >> 32) % 3 == 0) {
            assert_int_equal(sim_u64map_erase(&map, key), present[key] != 0);
            present[key] = 0;
        } else if ((x >> 32) % 3 == 1 && (x >> 40) % 2 == 0) {
            uint64_t *v = sim_u64map_find(&map, key); /* the one-probe erase */
            assert_int_equal(v != NULL, present[key] != 0);
            if (v)
                sim_u64map_erase_found(&map, v);
            present[key] = 0;
        } else {
            int inserted;
            uint64_t *v = sim_u64map_upsert(&map, key, &inserted);
            assert_non_null(v);
            assert_int_equal(inserted, present[key] == 0);
            *v = step;
            present[key] = (uint64_t)step + 1;
        }
    }
    size_t count = 0;
    for (uint64_t k = 0; k < KEYS; k++) {
        uint64_t *v = sim_u64map_find(&map, k);
        if (present[k]) {
            assert_non_null(v);
            assert_int_equal(*v, present[k] - 1);
            count++;
        } else {
            assert_null(v);
        }
    }
    assert_int_equal(map.size, count);
    sim_u64map_free(&map);
}

/* Inverse of odd a modulo 2^64 (Newton: each step doubles the bits). */
static uint64_t inverse(uint64_t a)
{
    uint64_t x = a;
    for (int i = 0; i < 6; i++)
        x *= 2 - a * x;
    return x;
}

/* The key k with sim_mix64(k) == 0, by undoing each step of splitmix64. */
static uint64_t key_mixing_to_zero(void)
{
    uint64_t x = 0;
    x ^= (x >> 31) ^ (x >> 62);
    x *= inverse(0x94d049bb133111ebull);
    x ^= (x >> 27) ^ (x >> 54);
    x *= inverse(0xbf58476d1ce4e5b9ull);
    x ^= (x >> 30) ^ (x >> 60);
    return x - 0x9e3779b97f4a7c15ull;
}

static void test_the_key_that_mixes_to_zero_is_a_key_like_any_other(void **state)
{
    (void)state;
    uint64_t k = key_mixing_to_zero();
    assert_true(sim_mix64(k) == 0);
    sim_u64map map;
    assert_int_equal(sim_u64map_init(&map, 4, 1), 0);
    assert_null(sim_u64map_find(&map, k));
    int inserted;
    *sim_u64map_upsert(&map, k, &inserted) = 42;
    assert_true(inserted);
    *sim_u64map_upsert(&map, 7, &inserted) = 7;
    assert_int_equal(map.size, 2);
    assert_int_equal(*sim_u64map_find(&map, k), 42);
    for (uint64_t i = 100; i < 200; i++) /* force growth */
        *sim_u64map_upsert(&map, i, &inserted) = i;
    assert_int_equal(*sim_u64map_find(&map, k), 42);
    sim_u64map_erase_found(&map, sim_u64map_find(&map, k));
    assert_null(sim_u64map_find(&map, k));
    assert_int_equal(sim_u64map_erase(&map, k), 0);
    assert_int_equal(map.size, 101);
    sim_u64map_free(&map);
}

static void test_fixed_map_refuses_inserts_when_full(void **state)
{
    (void)state;
    sim_u64map map;
    assert_int_equal(sim_u64map_init(&map, 4, 0), 0); /* 16 slots */
    int inserted;
    uint64_t k = 0;
    while (sim_u64map_upsert(&map, k, &inserted))
        k++;
    assert_true(k >= 4);
    assert_true(k < 16);
    assert_non_null(sim_u64map_find(&map, 0));
    sim_u64map_free(&map);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_what_was_inserted_and_forgets_what_was_erased),
        cmocka_unit_test(test_the_key_that_mixes_to_zero_is_a_key_like_any_other),
        cmocka_unit_test(test_fixed_map_refuses_inserts_when_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
