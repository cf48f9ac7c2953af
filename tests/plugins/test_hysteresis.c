// SPDX-License-Identifier: Apache-2.0
/*
 * test_hysteresis.c -- the hysteresis plugin: a request follows the owner of
 * its deepest routed prefix block (not a shared system prompt), stays put
 * inside the dead band, moves at once outside it or when the owner's load
 * leaves the bound, forgets when its table is full, leaves excluded, busy or
 * removed rows, and survives 8 threads at once.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "row_scan.h"
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

/* One select for a request made of `hashes` (no affinity key). */
static uint32_t pick_blocks(void *h, const harness_table *t, uint64_t request_id,
                            const uint64_t *hashes, uint32_t n)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, request_id, 0, hashes, n);
    return harness_select(h, &req, t);
}

static void test_a_request_follows_the_owner_of_its_deepest_routed_block(void **state)
{
    (void)state;
    void *h = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(6, 1);
    /* A system prompt (blocks 1 2) every request shares, then each
     * conversation's own blocks. */
    const uint64_t a1[] = {1, 2, 10, 11};
    const uint64_t b1[] = {1, 2, 20, 21, 22};
    const uint64_t a2[] = {1, 2, 10, 11, 12, 13}; /* a1's next turn */
    const uint64_t c1[] = {1, 2, 30};             /* shares only the prompt */
    fill_costs(t, 100.0);
    t->cost[4] = 0.0;
    assert_int_equal(pick_blocks(h, t, 1, a1, 4), 4);
    fill_costs(t, 100.0);
    t->cost[1] = 0.0;
    assert_int_equal(pick_blocks(h, t, 2, b1, 5), 1);

    /* Now row 2 is the cheapest by a little (inside the default band) and
     * every load is equal: a2's deepest routed block is a1's 11, owned by
     * row 4, so it goes there although the first blocks were last sent to
     * row 1 (b1); c1's deepest routed block is the prompt, owned by row 1. */
    fill_costs(t, 10.0);
    t->cost[2] = 9.0;
    assert_int_equal(pick_blocks(h, t, 3, a2, 6), 4);
    assert_int_equal(pick_blocks(h, t, 4, c1, 3), 4); /* a2 took the prompt last */
    /* A prompt nobody sent before has no owner: the cheapest row. */
    const uint64_t d1[] = {7, 8, 9};
    assert_int_equal(pick_blocks(h, t, 5, d1, 3), 2);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

/*
 * The bound: load = prefill_tokens; with rows [x, 0, 0, 400] the least load
 * is 0 and the mean (x + 400) / 4, so the default load_slack 0.5 keeps the
 * owner (row 0) iff x <= (x + 400) / 8, i.e. x <= 57.14. The costs stay
 * inside the dead band throughout: only the load bound moves the request.
 */
static void test_an_owner_whose_load_leaves_the_bound_is_released(void **state)
{
    (void)state;
    void *h = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(4, 1);
    const uint64_t p[] = {5, 6, 7};
    fill_costs(t, 100.0);
    t->cost[0] = 0.0;
    assert_int_equal(pick_blocks(h, t, 1, p, 3), 0);

    fill_costs(t, 10.0);
    t->cost[0] = 11.0; /* 11 <= 10 * 2 + 64: inside the band */
    t->prefill_tokens[3] = 400;
    t->prefill_tokens[0] = 57;
    assert_int_equal(pick_blocks(h, t, 2, p, 3), 0);
    t->prefill_tokens[0] = 58;
    uint32_t moved = pick_blocks(h, t, 3, p, 3);
    assert_true(moved == 1 || moved == 2);
    /* The new rank owns the prefix from then on. */
    memset(t->prefill_tokens, 0, 4 * sizeof(t->prefill_tokens[0]));
    fill_costs(t, 10.0);
    t->cost[3] = 9.0;
    assert_int_equal(pick_blocks(h, t, 4, p, 3), moved);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

/*
 * Never herd: requests that share only a system prompt arrive while every
 * routed request adds its tokens to its rank's prefill load. The owner of
 * the prompt is always the last rank it went to; the bound hands the next
 * request to another rank as soon as that rank has more queued than the
 * less loaded half of the spread, so the 16 ranks share the traffic: after
 * 1,600 requests no rank may hold more than twice its share.
 */
static void test_a_shared_system_prompt_does_not_pile_onto_one_rank(void **state)
{
    (void)state;
    void *h = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(16, 1);
    uint32_t count[16] = {0};
    for (uint64_t i = 0; i < 1600; i++) {
        const uint64_t prompt[] = {1, 2, 3, 1000 + i};
        for (uint32_t r = 0; r < 16; r++) {
            t->prefill_tokens[r] = 16 * count[r] + 16;
            t->cost[r] = (double)t->prefill_tokens[r] / 16.0;
        }
        uint32_t row = pick_blocks(h, t, i, prompt, 4);
        count[row]++;
    }
    for (uint32_t r = 0; r < 16; r++)
        assert_true(count[r] <= 200);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

static void test_a_capacity_of_one_remembers_only_the_last_block_written(void **state)
{
    (void)state;
    const char *names[] = {"capacity"};
    const double values[] = {1};
    void *h = harness_create(names, values, 1);
    harness_table *t = harness_table_uniform(3, 1);
    const uint64_t a[] = {1, 2};
    const uint64_t b[] = {3, 4};
    fill_costs(t, 100.0);
    t->cost[0] = 0.0;
    assert_int_equal(pick_blocks(h, t, 1, a, 2), 0);
    fill_costs(t, 100.0);
    t->cost[1] = 0.0;
    assert_int_equal(pick_blocks(h, t, 2, b, 2), 1); /* overwrites a's slot */
    fill_costs(t, 12.0);
    t->cost[2] = 10.0;
    assert_int_equal(pick_blocks(h, t, 3, a, 2), 2); /* a forgotten */
    assert_int_equal(pick_blocks(h, t, 4, a, 2), 2); /* ... and now on row 2 */
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

static void test_the_affinity_key_is_used_only_without_blocks_or_when_asked(void **state)
{
    (void)state;
    void *h = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(6, 1);
    const uint64_t a[] = {11, 12, 13};
    const uint64_t b[] = {21, 22};
    wsel_request req;
    wsel_rng rng;
    /* Same affinity key, different prompts: by default the prompts decide. */
    fill_costs(t, 100.0);
    t->cost[4] = 0.0;
    harness_request(&req, &rng, SEED, 1, 77, a, 3);
    assert_int_equal(harness_select(h, &req, t), 4);
    fill_costs(t, 10.0);
    t->cost[1] = 9.0;
    harness_request(&req, &rng, SEED, 2, 77, b, 2);
    assert_int_equal(harness_select(h, &req, t), 1);
    wsel_plugin_entry.destroy(h);

    /* use_affinity_key: the session decides. */
    const char *names[] = {"use_affinity_key"};
    const double values[] = {1};
    h = harness_create(names, values, 1);
    fill_costs(t, 100.0);
    t->cost[4] = 0.0;
    harness_request(&req, &rng, SEED, 1, 77, a, 3);
    assert_int_equal(harness_select(h, &req, t), 4);
    fill_costs(t, 10.0);
    t->cost[1] = 9.0;
    harness_request(&req, &rng, SEED, 2, 77, b, 2);
    assert_int_equal(harness_select(h, &req, t), 4);

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
    pthread_barrier_t *after_first_round;
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
        if (round == 1)
            pthread_barrier_wait(a->after_first_round);
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
            else if (round == (own ? 0u : 1u))
                *slot = choice.row;
            else if (round > (own ? 0u : 1u))
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
     * keeps one row only if every thread sees the same memory. A shared
     * key's first choices race (each thread's fresh answer is written as
     * the owner, the last write wins), so shared keys are compared from
     * the second round on, after a barrier: from then on every thread
     * must answer the one owner left. */
    pthread_barrier_t barrier;
    assert_int_equal(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    harness_table *t = harness_table_uniform(8, 2);
    fill_costs(t, 5.0);
    pthread_t threads[THREADS];
    worker_arg args[THREADS];
    memset(args, 0, sizeof(args));
    for (uint32_t i = 0; i < THREADS; i++) {
        args[i].after_first_round = &barrier;
        args[i].instance = h;
        args[i].table = t;
        args[i].thread = i;
        assert_int_equal(pthread_create(&threads[i], NULL, select_many, &args[i]), 0);
    }
    for (uint32_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    pthread_barrier_destroy(&barrier);

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

/*
 * Past depth 64 the table records every 2nd depth (every 4th past 128):
 * the depths recorded must be the ones the search probes. A 128-block tool
 * prompt is shared by two agents; the first agent's next step must follow
 * its own deepest block (row 1), not the tool prompt's last recipient
 * (row 2), although row 3 is the cheapest by a little.
 */
static void test_a_long_prompt_follows_its_own_deepest_block_past_depth_64(void **state)
{
    (void)state;
    void *h = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(4, 1);
    uint64_t a[200], b[200];
    for (uint32_t j = 0; j < 128; j++)
        a[j] = b[j] = j + 1;
    for (uint32_t j = 128; j < 200; j++) {
        a[j] = 1000 + j;
        b[j] = 2000 + j;
    }
    fill_costs(t, 100.0);
    t->cost[1] = 0.0;
    assert_int_equal(pick_blocks(h, t, 1, a, 150), 1); /* agent A, step 1 */
    fill_costs(t, 100.0);
    t->cost[2] = 0.0;
    assert_int_equal(pick_blocks(h, t, 2, b, 150), 2); /* agent B, step 1 */
    fill_costs(t, 10.0);
    t->cost[3] = 9.0;
    assert_int_equal(pick_blocks(h, t, 3, a, 200), 1); /* agent A, step 2 */
    assert_int_equal(pick_blocks(h, t, 4, b, 181), 2); /* agent B, step 2 */
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

/* score() for a request made of `hashes`; fails the test if it fails. */
static void score_blocks(void *h, const harness_table *t, uint64_t request_id,
                         const uint64_t *hashes, uint32_t n, double *scores)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, request_id, 0, hashes, n);
    assert_int_equal(wsel_plugin_entry.score(h, &req, &t->table, scores), 0);
}

/*
 * The score is the cost, with the band taken off the owner's while its
 * load is inside the bound; its lowest row is the one select then takes.
 * Band: rel 0.10, abs 4; best cost 10, so the width is 10 * 0.1 + 4 = 5.
 */
static void
test_the_score_takes_the_band_off_the_owner_and_its_argmin_is_select(void **state)
{
    (void)state;
    void *h = create_with_band();
    harness_table *t = harness_table_uniform(4, 1);
    const uint64_t p[] = {5, 6, 7};
    double scores[4];

    /* No owner yet: the score is the cost. */
    fill_costs(t, 100.0);
    t->cost[2] = 0.0;
    score_blocks(h, t, 1, p, 3, scores);
    for (uint32_t i = 0; i < 4; i++)
        assert_true(scores[i] == t->cost[i]);
    /* Scoring routes nothing: the request still has no owner, so the
     * cheapest row takes it (row 2, which then owns it). */
    assert_int_equal(pick_blocks(h, t, 2, p, 3), 2);

    /* Owner row 2 at cost 14 <= 10 + 5: score 9, the lowest; select keeps it. */
    fill_costs(t, 20.0);
    t->cost[0] = 10.0;
    t->cost[2] = 14.0;
    score_blocks(h, t, 3, p, 3, scores);
    assert_true(scores[0] == 10.0 && scores[1] == 20.0 && scores[3] == 20.0);
    assert_true(scores[2] == 9.0);
    assert_int_equal(pick_blocks(h, t, 4, p, 3), 2);

    /* At 16 > 15 its score 11 is above row 0's 10, and select moves to row 0. */
    t->cost[2] = 16.0;
    score_blocks(h, t, 5, p, 3, scores);
    assert_true(scores[2] == 11.0 && scores[0] == 10.0);
    assert_int_equal(pick_blocks(h, t, 6, p, 3), 0);

    /* Row 0 owns it now; outside the load bound it gets no discount
     * (loads [58, 0, 0, 400]: bound 0 + 0.5 * 114.5 = 57.25). */
    fill_costs(t, 10.0);
    t->prefill_tokens[0] = 58;
    t->prefill_tokens[3] = 400;
    score_blocks(h, t, 7, p, 3, scores);
    for (uint32_t i = 0; i < 4; i++)
        assert_true(scores[i] == 10.0);
    t->prefill_tokens[0] = 57;
    score_blocks(h, t, 8, p, 3, scores);
    assert_true(scores[0] == 5.0);
    harness_table_free(t);
    wsel_plugin_entry.destroy(h);
}

/* Configured at temperature 5, a request whose override says 0 still gets
 * the cheapest row, loaded and called through libwsel-host. */
static void test_override_of_zero_beats_a_configured_temperature(void **state)
{
    (void)state;
    harness_expect_override_zero_is_cheapest("hysteresis", "{\"temperature\": 5}");
}

/* --- row_scan.h: the SSE2 passes against the row-order loops ----------- */

static uint64_t scan_draw(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A table of n rows for scan case `k`: some rows skipped, a few costs not
 * finite, some loads past 2^52 (where the SSE2 passes hand over). */
static void scan_table(uint64_t *x, uint32_t n, uint32_t k, uint8_t *flags, double *cost,
                       uint64_t *load)
{
    for (uint32_t i = 0; i < n; i++) {
        flags[i] = scan_draw(x) % 8 < k % 8 ? (uint8_t)(scan_draw(x) % 4) : 0;
        cost[i] = (double)(scan_draw(x) % 1000) - (k % 3 == 0 ? 500.0 : 0.0);
        if (scan_draw(x) % 700 == 0)
            cost[i] = scan_draw(x) % 2 ? NAN : INFINITY;
        load[i] = scan_draw(x) % 100000;
        if (k % 5 == 4 && scan_draw(x) % 40 == 0)
            load[i] = scan_draw(x) >> (scan_draw(x) % 16);
    }
}

static void test_row_scan_gives_what_the_row_order_loops_give(void **state)
{
    (void)state;
    enum { MAX_ROWS = 4200 };
    static uint8_t flags[MAX_ROWS];
    static double cost[MAX_ROWS];
    static uint64_t load[MAX_ROWS];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    uint32_t skipped_least = 0; /* tables whose least load is a skipped row's */
    for (uint32_t k = 0; k < 3000; k++) {
        uint32_t n = (uint32_t)(scan_draw(&x) % (k % 16 == 0 ? MAX_ROWS : 80));
        uint8_t skip = k % 2 ? WSEL_ROW_EXCLUDED : WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
        scan_table(&x, n, k, flags, cost, load);
        double best = INFINITY, least = INFINITY, sum = 0.0;
        uint32_t count = 0;
        int finite = 1;
        for (uint32_t i = 0; i < n; i++) {
            if (flags[i] & skip)
                continue;
            finite &= isfinite(cost[i]) != 0;
            best = cost[i] < best ? cost[i] : best;
            least = (double)load[i] < least ? (double)load[i] : least;
            sum += (double)load[i];
            count++;
        }
        double mean = count > 0 ? sum / (double)count : 0.0, got, got_min, got_mean;
        int32_t rc = row_scan_best(flags, cost, n, skip, &got);
        assert_int_equal(rc, finite ? 0 : WSEL_EINVAL);
        if (rc == 0)
            assert_true(got == best);
        row_scan_loads(flags, load, n, skip, &got_min, &got_mean);
        assert_true(got_min == least && got_mean == mean);
        row_scan_result r;
        row_scan(flags, cost, load, n, skip, &r);
        assert_true(!r.best_known || (finite && r.best == best));
        assert_true(!r.loads_known || (r.min_load == least && r.mean_load == mean));
        /* The one pass answers whenever every load is exact, whichever
         * rows are skipped (a skipped row's load the least included), and
         * the best too when every cost is finite. */
        int exact = 1, all_finite = 1;
        uint64_t total = 0, least_all = UINT64_MAX;
        for (uint32_t i = 0; i < n; i++) {
            exact &= load[i] < (1ull << 52);
            total += exact ? load[i] : 0;
            all_finite &= isfinite(cost[i]) != 0;
            least_all = load[i] < least_all ? load[i] : least_all;
        }
        exact &= total < (1ull << 53);
        assert_int_equal(r.loads_known, exact);
        assert_true(exact ? r.best_known == all_finite : !r.best_known || all_finite);
        skipped_least += exact && count > 0 && (double)least_all < least;
    }
    assert_true(skipped_least > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jitter_inside_the_dead_band_never_moves_a_key),
        cmocka_unit_test(
            test_an_overload_beyond_the_band_moves_the_key_on_the_first_decision),
        cmocka_unit_test(test_a_request_follows_the_owner_of_its_deepest_routed_block),
        cmocka_unit_test(test_a_long_prompt_follows_its_own_deepest_block_past_depth_64),
        cmocka_unit_test(test_an_owner_whose_load_leaves_the_bound_is_released),
        cmocka_unit_test(test_a_shared_system_prompt_does_not_pile_onto_one_rank),
        cmocka_unit_test(test_a_capacity_of_one_remembers_only_the_last_block_written),
        cmocka_unit_test(test_an_excluded_or_busy_incumbent_is_replaced),
        cmocka_unit_test(test_a_removed_incumbent_is_replaced_and_a_moved_one_followed),
        cmocka_unit_test(test_the_affinity_key_is_used_only_without_blocks_or_when_asked),
        cmocka_unit_test(test_eight_threads_at_once_keep_every_key_on_one_row),
        cmocka_unit_test(
            test_the_score_takes_the_band_off_the_owner_and_its_argmin_is_select),
        cmocka_unit_test(test_override_of_zero_beats_a_configured_temperature),
        cmocka_unit_test(test_row_scan_gives_what_the_row_order_loops_give),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
