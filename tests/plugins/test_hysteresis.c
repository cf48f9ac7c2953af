/*
 * test_hysteresis.c -- the hysteresis plugin: keys stay put inside the dead
 * band, move at once outside it, are forgotten least recently used first,
 * leave excluded, busy or removed rows, and survive 8 threads at once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "wsel.h"
#include "wsel_host.h"

#define SEED 20261129u

/* One select for `key` (affinity key, no block hashes). */
static uint32_t pick(void *h, const harness_table *t, uint64_t request_id, uint64_t key)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, request_id, key, NULL, 0);
    return harness_select(h, &req, t);
}

/* An instance with the band these cases were computed for (rel 0.10, abs 4),
 * so they test the mechanism, not the tuned defaults. */
static void *create_with_band(void)
{
    const char *names[] = {"rel_margin", "abs_margin"};
    const double values[] = {0.10, 4.0};
    return harness_create(names, values, 2);
}

static void fill_costs(harness_table *t, double value)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++)
        t->cost[i] = value;
}

static void test_jitter_inside_the_dead_band_never_moves_a_key(void **state)
{
    (void)state;
    void *h = create_with_band();
    harness_table *t = harness_table_uniform(8, 2);
    wsel_rng noise;
    wsel_rng_seed(&noise, SEED);

    /* Band: rel 0.10, abs 4. Costs in [100, 108): the incumbent's cost is
     * at most 108 < 100 * 1.1 + 4 = 114, so the band always holds, while
     * the argmin itself changes on almost every decision. */
    fill_costs(t, 100.0);
    uint32_t first = pick(h, t, 0, 42);
    uint32_t argmin_changes = 0, last_argmin = 0;
    for (uint64_t i = 1; i <= 10000; i++) {
        uint32_t best = 0;
        for (uint32_t r = 0; r < t->table.num_rows; r++) {
            t->cost[r] = 100.0 + 8.0 * wsel_rng_uniform(&noise);
            if (t->cost[r] < t->cost[best])
                best = r;
        }
        argmin_changes += best != last_argmin;
        last_argmin = best;
        assert_int_equal(pick(h, t, i, 42), first);
    }
    assert_true(argmin_changes > 5000); /* the flicker it suppresses */
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

static void
test_an_overload_beyond_the_band_moves_the_key_on_the_first_decision(void **state)
{
    (void)state;
    void *h = create_with_band();
    harness_table *t = harness_table_uniform(4, 1);
    fill_costs(t, 50.0);
    t->cost[2] = 40.0;
    assert_int_equal(pick(h, t, 1, 7), 2);

    /* Exactly on the edge of the band: 40 * 1.1 + 4 = 48 keeps it. */
    fill_costs(t, 40.0);
    t->cost[2] = 48.0;
    assert_int_equal(pick(h, t, 2, 7), 2);

    /* Just past it: moves at once, to the best row. */
    t->cost[2] = 48.001;
    t->cost[3] = 39.0;
    assert_int_equal(pick(h, t, 3, 7), 3);
    /* ... and the new choice is the incumbent from then on. */
    fill_costs(t, 40.0);
    t->cost[3] = 42.0;
    assert_int_equal(pick(h, t, 4, 7), 3);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

/* Send `key` to `row` by making it the one cheap row. */
static void pin(void *h, harness_table *t, uint64_t key, uint32_t row)
{
    fill_costs(t, 100.0);
    t->cost[row] = 0.0;
    assert_int_equal(pick(h, t, key * 100, key), row);
}

static void test_a_full_table_forgets_the_least_recently_used_key(void **state)
{
    (void)state;
    const char *names[] = {"capacity", "rel_margin", "abs_margin"};
    const double values[] = {4, 0.10, 4.0};
    void *h = harness_create(names, values, 3);
    harness_table *t = harness_table_uniform(5, 1);

    for (uint32_t k = 1; k <= 4; k++)
        pin(h, t, k, k - 1); /* LRU order: 1 2 3 4 */

    /* From here on row 4 is the best by 2 and every row within the band:
     * a remembered key stays on its row, a forgotten one goes to row 4. */
    fill_costs(t, 12.0);
    t->cost[4] = 10.0;
    assert_int_equal(pick(h, t, 11, 1), 0); /* touch 1:  2 3 4 1 */
    assert_int_equal(pick(h, t, 12, 5), 4); /* new 5 evicts 2: 3 4 1 5 */
    assert_int_equal(pick(h, t, 13, 4), 3); /* touch 4:  3 1 5 4 */
    assert_int_equal(pick(h, t, 14, 2), 4); /* 2 forgotten; evicts 3: 1 5 4 2 */
    assert_int_equal(pick(h, t, 15, 1), 0); /* 1 remembered: 5 4 2 1 */
    assert_int_equal(pick(h, t, 16, 3), 4); /* 3 forgotten; evicts 5: 4 2 1 3 */
    assert_int_equal(pick(h, t, 17, 4), 3); /* 4 remembered */
    assert_int_equal(pick(h, t, 18, 1), 0); /* 1 remembered */
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

static void test_a_capacity_of_one_remembers_only_the_last_key(void **state)
{
    (void)state;
    const char *names[] = {"capacity", "rel_margin", "abs_margin"};
    const double values[] = {1, 0.10, 4.0};
    void *h = harness_create(names, values, 3);
    harness_table *t = harness_table_uniform(3, 1);
    pin(h, t, 1, 0);
    pin(h, t, 2, 1);
    fill_costs(t, 12.0);
    t->cost[2] = 10.0;
    assert_int_equal(pick(h, t, 5, 2), 1);
    assert_int_equal(pick(h, t, 6, 1), 2);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

static void test_an_excluded_or_busy_incumbent_is_replaced(void **state)
{
    (void)state;
    void *h = create_with_band();
    harness_table *t = harness_table_uniform(4, 2);
    pin(h, t, 9, 5);
    fill_costs(t, 10.0);
    t->cost[6] = 9.0;
    t->flags[5] = WSEL_ROW_EXCLUDED;
    assert_int_equal(pick(h, t, 1, 9), 6);

    pin(h, t, 10, 1);
    fill_costs(t, 10.0);
    t->flags[5] = 0;
    t->flags[1] = WSEL_ROW_BUSY;
    t->cost[3] = 9.5;
    assert_int_equal(pick(h, t, 2, 10), 3);

    /* When every eligible row is busy, busy rows are fair game again, so a
     * busy incumbent may stay. */
    pin(h, t, 11, 4);
    fill_costs(t, 10.0);
    memset(t->flags, WSEL_ROW_BUSY, t->table.num_rows);
    assert_int_equal(pick(h, t, 3, 11), 4);

    /* Everything excluded: no candidate. */
    memset(t->flags, WSEL_ROW_EXCLUDED, t->table.num_rows);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, 4, 11, NULL, 0);
    harness_expect_refusal(h, &req, t, WSEL_ENOCANDIDATE);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

static void test_a_removed_incumbent_is_replaced_and_a_moved_one_followed(void **state)
{
    (void)state;
    void *h = create_with_band();
    harness_table *t = harness_table_uniform(5, 1);
    pin(h, t, 1, 3); /* key 1 on worker 3 */
    pin(h, t, 2, 1); /* key 2 on worker 1 */

    /* Worker 1 leaves: workers 0 2 3 4 now sit in rows 0..3. Key 1 follows
     * worker 3 to row 2; key 2 must find a new home. */
    harness_table *u = harness_table_uniform(4, 1);
    const uint64_t ids[] = {0, 2, 3, 4};
    memcpy(u->worker_id, ids, sizeof(ids));
    u->table.topology_epoch = 2;
    fill_costs(u, 10.0);
    u->cost[0] = 9.0;
    assert_int_equal(pick(h, u, 3, 1), 2);
    assert_int_equal(pick(h, u, 4, 2), 0);
    harness_table_free(u);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

static void test_block_hashes_key_a_request_without_affinity(void **state)
{
    (void)state;
    void *h = create_with_band();
    harness_table *t = harness_table_uniform(6, 1);
    /* key_blocks = 4: two prompts sharing their first 4 blocks share a key. */
    const uint64_t a[] = {11, 12, 13, 14, 15, 16};
    const uint64_t b[] = {11, 12, 13, 14, 99};
    const uint64_t c[] = {11, 12, 77};
    wsel_request req;
    wsel_rng rng;
    fill_costs(t, 100.0);
    t->cost[4] = 0.0;
    harness_request(&req, &rng, SEED, 1, 0, a, 6);
    assert_int_equal(harness_select(h, &req, t), 4);
    fill_costs(t, 10.0);
    t->cost[1] = 9.0;
    harness_request(&req, &rng, SEED, 2, 0, b, 5);
    assert_int_equal(harness_select(h, &req, t), 4);
    harness_request(&req, &rng, SEED, 3, 0, c, 3); /* a shorter prompt: its own key */
    assert_int_equal(harness_select(h, &req, t), 1);

    /* Neither an affinity key nor hashes: no memory, every tie is fresh. */
    fill_costs(t, 10.0);
    uint32_t seen = 0;
    for (uint64_t i = 0; i < 64; i++)
        seen |= 1u << pick(h, t, 100 + i, 0);
    assert_int_equal(seen, 0x3f);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

/* --- concurrency ---------------------------------------------------------- */

#define THREADS     8
#define OWN_KEYS    64
#define SHARED_KEYS 32
#define ROUNDS      40

typedef struct worker_arg {
    void *instance;
    const harness_table *table;
    uint32_t thread;
    /* First row seen per key, and whether any later answer differed. */
    uint32_t own_row[OWN_KEYS];
    uint32_t shared_row[SHARED_KEYS];
    uint32_t changes;
} worker_arg;

static void *select_many(void *p)
{
    worker_arg *a = p;
    uint64_t id = (uint64_t)a->thread << 32;
    for (uint32_t round = 0; round < ROUNDS; round++) {
        for (uint32_t k = 0; k < OWN_KEYS + SHARED_KEYS; k++) {
            int own = k < OWN_KEYS;
            uint64_t key = own ? 1000000u * (a->thread + 1) + k : 1 + (k - OWN_KEYS);
            uint32_t *slot = own ? &a->own_row[k] : &a->shared_row[k - OWN_KEYS];
            wsel_request req;
            wsel_rng rng;
            harness_request(&req, &rng, SEED, id++, key, NULL, 0);
            wsel_choice choice = {.struct_size = sizeof(choice)};
            if (wsel_plugin_entry.select(a->instance, &req, &a->table->table, &choice) !=
                0)
                a->changes++;
            else if (round == 0)
                *slot = choice.row;
            else
                a->changes += *slot != choice.row;
        }
    }
    return NULL;
}

static void test_eight_threads_at_once_keep_every_key_on_one_row(void **state)
{
    (void)state;
    assert_true(wsel_plugin_entry.capabilities & WSEL_CAP_CONCURRENT_SELECT);
    void *h = create_with_band();
    /* All costs equal: every first choice is a random tie-break, so a key
     * keeps one row only if every thread sees the same memory. */
    harness_table *t = harness_table_uniform(8, 2);
    fill_costs(t, 5.0);
    pthread_t threads[THREADS];
    worker_arg args[THREADS];
    memset(args, 0, sizeof(args));
    for (uint32_t i = 0; i < THREADS; i++) {
        args[i].instance = h;
        args[i].table = t;
        args[i].thread = i;
        assert_int_equal(pthread_create(&threads[i], NULL, select_many, &args[i]), 0);
    }
    for (uint32_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);

    uint32_t spread = 0;
    for (uint32_t i = 0; i < THREADS; i++) {
        assert_int_equal(args[i].changes, 0);
        for (uint32_t k = 0; k < SHARED_KEYS; k++)
            assert_int_equal(args[i].shared_row[k], args[0].shared_row[k]);
        for (uint32_t k = 0; k < OWN_KEYS; k++)
            spread |= 1u << args[i].own_row[k];
    }
    assert_int_equal(spread, 0xffff); /* the first choices did spread out */

    /* Afterwards, from one thread: every key still answers its row. */
    for (uint32_t i = 0; i < THREADS; i++)
        for (uint32_t k = 0; k < OWN_KEYS; k++)
            assert_int_equal(pick(h, t, 1u << 20, 1000000u * (i + 1) + k),
                             args[i].own_row[k]);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jitter_inside_the_dead_band_never_moves_a_key),
        cmocka_unit_test(
            test_an_overload_beyond_the_band_moves_the_key_on_the_first_decision),
        cmocka_unit_test(test_a_full_table_forgets_the_least_recently_used_key),
        cmocka_unit_test(test_a_capacity_of_one_remembers_only_the_last_key),
        cmocka_unit_test(test_an_excluded_or_busy_incumbent_is_replaced),
        cmocka_unit_test(test_a_removed_incumbent_is_replaced_and_a_moved_one_followed),
        cmocka_unit_test(test_block_hashes_key_a_request_without_affinity),
        cmocka_unit_test(test_eight_threads_at_once_keep_every_key_on_one_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
