// SPDX-License-Identifier: Apache-2.0
/*
 * test_router_overlaps.c -- rt_index_overlaps (kv_index.c compiled in),
 * which walks the holder lists of several blocks at once, answers as a
 * block-by-block walk does: every slot's run of leading blocks held, on
 * random holdings with gaps, prompts shorter and longer than its window,
 * and blocks the index does not know.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_index.h"

enum { SLOTS = 48, CHAINS = 6, LEN = 41 };

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Block j of chain c's hash (chain 0 and 1 share their first 9 blocks). */
static uint64_t hash_of(uint32_t c, uint32_t j)
{
    return (c < 2 && j < 9 ? 1000u : 1000u * (c + 2)) + j;
}

static void test_overlaps_match_a_block_by_block_walk(void **state)
{
    (void)state;
    static uint8_t held[SLOTS][CHAINS][LEN];
    uint64_t seed = 7;
    for (int round = 0; round < 40; round++) {
        rt_index ix;
        assert_int_equal(rt_index_init(&ix, SLOTS, 1u << 20, 0), 0);
        memset(held, 0, sizeof(held));
        for (uint32_t k = 0; k < 400; k++) {
            uint32_t s = (uint32_t)(lcg(&seed) % SLOTS);
            uint32_t c = (uint32_t)(lcg(&seed) % CHAINS);
            uint32_t from = lcg(&seed) % 4 == 0 ? (uint32_t)(lcg(&seed) % LEN) : 0;
            uint32_t to = from + (uint32_t)(lcg(&seed) % (LEN - from + 1));
            for (uint32_t j = from; j < to; j++) {
                assert_int_equal(rt_index_touch(&ix, s, hash_of(c, j), 0, 0), 0);
                for (uint32_t d = 0; d < CHAINS; d++)
                    if (hash_of(d, j) == hash_of(c, j))
                        held[s][d][j] = 1;
            }
        }
        for (uint32_t c = 0; c < CHAINS; c++)
            for (uint32_t n = 0; n <= LEN + 1; n += 1 + (uint32_t)(lcg(&seed) % 5)) {
                uint64_t h[LEN + 2];
                for (uint32_t j = 0; j < n; j++)
                    h[j] = j < LEN ? hash_of(c, j) : 999999u + j; /* past: unknown */
                uint32_t ov[SLOTS] = {0}, touched[SLOTS];
                uint32_t nt = rt_index_overlaps(&ix, h, n, ov, touched), want_nt = 0;
                for (uint32_t s = 0; s < SLOTS; s++) {
                    uint32_t want = 0;
                    while (want < n && want < LEN && held[s][c][want])
                        want++;
                    assert_int_equal(ov[s], want);
                    want_nt += want > 0;
                }
                assert_int_equal(nt, want_nt);
                for (uint32_t k = 0; k < nt; k++)
                    assert_true(ov[touched[k]] > 0);
            }
        rt_index_free(&ix);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlaps_match_a_block_by_block_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
