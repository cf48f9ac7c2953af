// SPDX-License-Identifier: Apache-2.0
/*
 * test_chash.c -- the chash plugin: keys stick to their worker while loads
 * are in bound, a shared system prompt does not collapse the keys, no worker ever exceeds
 * the MTZ bound, removing one of n workers moves only that worker's keys (about 1/n of
 * them), and selects from several threads agree with a single-threaded run.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "wsel.h"
#include "wsel_host.h"

#define SEED 4242u

static uint32_t pick(void *c, const harness_table *t, uint64_t request_id, uint64_t key)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, request_id, key, NULL, 0);
    return harness_select(c, &req, t);
}

static uint32_t group_of(const harness_table *t, uint32_t row)
{
    uint32_t g = 0;
    while (g + 1 < t->table.num_groups && t->group_first_row[g + 1] <= row)
        g++;
    return g;
}

static uint64_t worker_load(const harness_table *t, uint32_t g)
{
    uint64_t load = 0;
    for (uint32_t r = 0; r < t->group_row_count[g]; r++)
        load += t->active_requests[t->group_first_row[g] + r];
    return load;
}

static void test_a_key_stays_on_its_worker_while_loads_are_in_bound(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(10, 2);
    uint32_t home[1000];
    for (uint64_t k = 0; k < 1000; k++)
        home[k] = group_of(t, pick(c, t, k, k + 1));

    /* Uneven but in-bound loads: 8..15 per worker (mean <= 15, total <= 150),
     * cap = ceil(1.25 * 151 / 10) >= 19 > 15 + 1. */
    wsel_rng noise;
    wsel_rng_seed(&noise, SEED);
    for (uint32_t i = 0; i < t->table.num_rows; i++)
        t->active_requests[i] = 4 + (uint32_t)wsel_rng_below(&noise, 4);
    uint32_t spread = 0;
    for (uint64_t k = 0; k < 1000; k++) {
        uint32_t row = pick(c, t, 5000 + k, k + 1);
        assert_int_equal(group_of(t, row), home[k]);
        assert_int_equal(pick(c, t, 9000 + k, k + 1), row); /* deterministic */
        spread |= 1u << home[k];
    }
    assert_int_equal(spread, 0x3ff);

    /* Without hashes and without an affinity key: the request id. */
    assert_int_equal(pick(c, t, 123, 0), pick(c, t, 123, 0));
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/*
 * A system prompt every request opens with must not become everyone's key
 * (the collapse on real traces, where 45 % of requests share their first
 * block). 400 requests share blocks 1..8 and then have 3 blocks of their
 * own: after the first, the prompt's blocks are in far more than 1 / 10 of
 * recent requests, so each request keys on its first own block and the
 * keys spread over the ring like 400 random ones. Loads stay 0, so the
 * bound never interferes: each of the 10 workers' share is Binomial(400,
 * about 1/10), and with 100 vnodes a worker's ring share is within 10 % of
 * 1/10, so none may be empty and none above 3 times its share. A
 * conversation's next turn (its prompt extended) lands where the turn
 * before it did, because it keys on the same first own block.
 */
static void expect_a_shared_prompt_spreads(uint32_t prompt_blocks)
{
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(10, 1);
    uint32_t count[10] = {0};
    uint64_t p[256], q[256];
    assert_true(prompt_blocks + 6 <= 256);
    for (uint32_t j = 0; j < prompt_blocks; j++)
        p[j] = q[j] = j + 1;
    wsel_request req;
    wsel_rng rng;
    for (uint64_t i = 0; i < 400; i++) {
        for (uint32_t j = 0; j < 3; j++)
            p[prompt_blocks + j] = 1000 * (i + 1) + j;
        harness_request(&req, &rng, SEED, i, 0, p, prompt_blocks + 3);
        uint32_t row = harness_select(c, &req, t);
        count[row]++;
        if (i % 50 == 49) {
            /* The next turn of conversation i. */
            for (uint32_t j = 0; j < 6; j++)
                q[prompt_blocks + j] = 1000 * (i + 1) + j;
            harness_request(&req, &rng, SEED, 100000 + i, 0, q, prompt_blocks + 6);
            assert_int_equal(harness_select(c, &req, t), row);
        }
    }
    for (uint32_t w = 0; w < 10; w++) {
        assert_true(count[w] > 0);
        assert_true(count[w] <= 120);
    }
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

static void test_a_shared_system_prompt_does_not_collapse_the_keys(void **state)
{
    (void)state;
    expect_a_shared_prompt_spreads(8);
}

/* The same past depth 64, where the sketch counts every 2nd block (every
 * 4th past 128): a 150-block tool prompt is counted at the very depths the
 * key search probes, so it is common there too. */
static void test_a_long_shared_prompt_does_not_collapse_the_keys(void **state)
{
    (void)state;
    expect_a_shared_prompt_spreads(150);
}

/* A prompt repeated whole by every request keys on its last block: they
 * all land on one worker while loads allow (the bound spreads them). Loads
 * stay 0 here, so the bound never interferes. */
static void test_a_prompt_everyone_repeats_keys_on_its_last_block(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(10, 1);
    const uint64_t p[] = {1, 2, 3};
    wsel_request req;
    wsel_rng rng;
    /* The first time, nothing is common yet: it keys on its first block.
     * From the second on every block is in every recent request. */
    harness_request(&req, &rng, SEED, 1, 0, p, 3);
    harness_select(c, &req, t);
    harness_request(&req, &rng, SEED, 2, 0, p, 3);
    uint32_t first = harness_select(c, &req, t);
    for (uint64_t i = 3; i < 50; i++) {
        harness_request(&req, &rng, SEED, i, 0, p, 3);
        assert_int_equal(harness_select(c, &req, t), first);
    }
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

static void test_the_cheapest_eligible_rank_of_the_worker_is_chosen(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(1, 4);
    const uint32_t active[4] = {0, 5, 2, 1};
    const double cost[4] = {1, 3, 2, 2};
    memcpy(t->active_requests, active, sizeof(active));
    memcpy(t->cost, cost, sizeof(cost));
    t->flags[0] = WSEL_ROW_EXCLUDED;
    assert_int_equal(pick(c, t, 1, 77), 3); /* cost 2, then fewer requests */
    t->flags[3] = WSEL_ROW_BUSY;
    assert_int_equal(pick(c, t, 2, 77), 2);
    t->flags[2] = WSEL_ROW_BUSY;
    assert_int_equal(pick(c, t, 3, 77), 1);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

static void test_an_excluded_worker_passes_its_keys_clockwise(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(6, 1);
    uint32_t home = pick(c, t, 1, 31337);
    t->flags[home] = WSEL_ROW_EXCLUDED;
    uint32_t next = pick(c, t, 2, 31337);
    assert_int_not_equal(next, home);
    t->flags[home] = 0;
    assert_int_equal(pick(c, t, 3, 31337), home);

    memset(t->flags, WSEL_ROW_EXCLUDED, t->table.num_rows);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, 4, 31337, NULL, 0);
    wsel_choice choice = {.struct_size = sizeof(choice), .row = 55};
    assert_int_equal(wsel_plugin_entry.select(c, &req, &t->table, &choice),
                     WSEL_ENOCANDIDATE);
    assert_int_equal(choice.row, 55);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

static void test_more_workers_than_max_workers_still_answer(void **state)
{
    (void)state;
    const char *names[] = {"max_workers"};
    const double four[] = {4};
    void *c = harness_create(names, four, 1);
    harness_table *t = harness_table_uniform(300, 1);
    assert_true(pick(c, t, 2, 9) < 300);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/* One point reserved: a second worker is refused until the topology hook
 * grows the ring (select never allocates); then both answer. */
static void test_topology_change_grows_the_ring_past_its_points(void **state)
{
    (void)state;
    const char *names[] = {"max_workers", "vnodes"};
    const double one[] = {1, 1};
    void *c = harness_create(names, one, 2);
    harness_table *t = harness_table_uniform(3, 1);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, 1, 9, NULL, 0);
    wsel_choice choice = {.struct_size = sizeof(choice), .row = 55};
    assert_int_equal(wsel_plugin_entry.select(c, &req, &t->table, &choice), WSEL_ERANGE);
    assert_int_equal(choice.row, 55);
    wsel_plugin_entry.on_topology_changed(c, &t->table);
    assert_true(pick(c, t, 2, 9) < 3);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/*
 * 100,000 requests over 10 workers x 2 ranks; each adds 1 to its rank's
 * active_requests and finishes, FIFO, LIFETIME requests later, so
 * total + 1 <= LIFETIME. Keys are skewed (key = floor(1000 u^4): key 0
 * alone is about 18 % of the traffic) so hot keys must spill. After every
 * decision the chosen worker's load (this request counted) must be at most
 * ceil((1 + epsilon) * (total + 1) / 10).
 */
#define LIFETIME 200u
#define REQUESTS 100000u

static void run_bounded_load(double epsilon, uint32_t *out_spilled)
{
    const char *names[] = {"epsilon", "load"};
    const double values[] = {epsilon, 0.0}; /* load: requests */
    void *c = harness_create(names, values, 2);
    harness_table *t = harness_table_uniform(10, 2);
    void *free_of_load = harness_create(names, values, 2);
    harness_table *idle = harness_table_uniform(10, 2);
    uint32_t fifo[LIFETIME];
    uint64_t total = 0;
    uint32_t spilled = 0;
    wsel_rng keys;
    wsel_rng_seed(&keys, SEED);
    for (uint32_t n = 0; n < REQUESTS; n++) {
        if (n >= LIFETIME) {
            t->active_requests[fifo[n % LIFETIME]]--;
            total--;
        }
        double u = wsel_rng_uniform(&keys);
        uint64_t key = 1 + (uint64_t)(1000.0 * u * u * u * u);
        uint32_t row = pick(c, t, n, key);
        t->active_requests[row]++;
        total++;
        fifo[n % LIFETIME] = row;
        uint32_t g = group_of(t, row);
        double x = (1.0 + epsilon) * (double)total / 10.0;
        uint64_t cap = (uint64_t)ceil(x);
        if (worker_load(t, g) > cap)
            fail_msg("request %u (key %llu): worker %u has %llu > cap %llu", n,
                     (unsigned long long)key, g, (unsigned long long)worker_load(t, g),
                     (unsigned long long)cap);
        spilled += g != group_of(idle, pick(free_of_load, idle, n, key));
    }
    *out_spilled = spilled;
    harness_table_free(idle);
    harness_table_free(t);
    wsel_plugin_entry.destroy(free_of_load);
    wsel_plugin_entry.destroy(c);
}

static void test_no_worker_exceeds_the_bound_under_a_skewed_load(void **state)
{
    (void)state;
    const double epsilons[] = {0.25, 0.0, 1.0};
    for (size_t i = 0; i < 3; i++) {
        uint32_t spilled;
        run_bounded_load(epsilons[i], &spilled);
        print_message("epsilon %.2f: %u of %u requests spilled off their home worker\n",
                      epsilons[i], spilled, REQUESTS);
        assert_true(spilled > 0);        /* the bound did bite */
        assert_true(spilled < REQUESTS); /* ... and affinity survived */
    }
}

/*
 * Remove worker n/2 of n (n = 10, 50; 100 vnodes each): keys of the other
 * workers must not move at all, and the removed worker's share is about 1/n.
 * Its arc is the sum of V = 100 gaps between N = nV uniform points, each
 * about Exp(mean 1/N), variance 1/N^2: variance V/N^2 = 1/(n^2 V). Sampling
 * K = 10,000 keys adds p(1-p)/K. Tolerance 5 sigma with
 * sigma = sqrt(1/(n^2 V) + p(1-p)/K): 0.052 at n = 10, 0.012 at n = 50.
 */
#define KEYS 10000u

static void check_removal(uint32_t n)
{
    void *c = harness_create(NULL, NULL, 0);
    harness_table *all = harness_table_uniform(n, 1);
    harness_table *rest = harness_table_uniform(n - 1, 1);
    uint64_t gone = n / 2;
    for (uint32_t g = 0; g < n - 1; g++)
        rest->worker_id[g] = g < gone ? g : g + 1;
    rest->table.topology_epoch = 2;

    uint32_t *before = malloc(KEYS * sizeof(*before));
    assert_non_null(before);
    for (uint32_t k = 0; k < KEYS; k++)
        before[k] = (uint32_t)all->worker_id[pick(c, all, k, 1000003u * (k + 1))];
    wsel_plugin_entry.on_topology_changed(c, &rest->table);
    uint32_t moved = 0;
    for (uint32_t k = 0; k < KEYS; k++) {
        uint64_t after = rest->worker_id[pick(c, rest, k, 1000003u * (k + 1))];
        if (after != before[k]) {
            assert_int_equal(before[k], gone);
            moved++;
        } else {
            assert_int_not_equal(before[k], gone);
        }
    }
    /* And back: the ring is a function of the worker set. */
    for (uint32_t k = 0; k < KEYS; k += 97)
        assert_int_equal(all->worker_id[pick(c, all, k, 1000003u * (k + 1))], before[k]);

    double p = 1.0 / n;
    double sigma = sqrt(1.0 / ((double)n * n * 100.0) + p * (1.0 - p) / KEYS);
    double frac = (double)moved / KEYS;
    print_message("n = %u: %.4f of keys moved (expected %.4f +- %.4f)\n", n, frac, p,
                  5 * sigma);
    assert_true(fabs(frac - p) <= 5 * sigma);
    free(before);
    harness_table_free(rest);
    harness_table_free(all);
    wsel_plugin_entry.destroy(c);
}

static void test_removing_one_of_n_workers_moves_only_its_keys_about_one_nth(void **state)
{
    (void)state;
    check_removal(10);
    check_removal(50);
}

/* --- concurrency: two topologies in flight at once --------------------- */

#define THREADS    4
#define PER_THREAD 1500u

typedef struct thread_arg {
    void *instance;
    const harness_table *tables[2];
    const uint32_t *expected[2];
    uint32_t mismatches;
} thread_arg;

static void *select_many(void *p)
{
    thread_arg *a = p;
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        uint32_t which = (i / 7) & 1, k = i % 256;
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, SEED, i, k + 1, NULL, 0);
        wsel_choice choice = {.struct_size = sizeof(choice)};
        if (wsel_plugin_entry.select(a->instance, &req, &a->tables[which]->table,
                                     &choice) != 0 ||
            choice.row != a->expected[which][k])
            a->mismatches++;
    }
    return NULL;
}

static void test_threads_on_two_topologies_agree_with_a_single_thread(void **state)
{
    (void)state;
    assert_true(wsel_plugin_entry.capabilities & WSEL_CAP_CONCURRENT_SELECT);
    void *c = harness_create(NULL, NULL, 0);
    harness_table *a = harness_table_uniform(12, 2);
    harness_table *b = harness_table_uniform(11, 2);
    uint32_t expected[2][256];
    for (uint32_t k = 0; k < 256; k++) {
        expected[0][k] = pick(c, a, 0, k + 1);
        expected[1][k] = pick(c, b, 0, k + 1);
    }
    pthread_t threads[THREADS];
    thread_arg args[THREADS];
    for (uint32_t i = 0; i < THREADS; i++) {
        args[i] = (thread_arg){c, {a, b}, {expected[0], expected[1]}, 0};
        assert_int_equal(pthread_create(&threads[i], NULL, select_many, &args[i]), 0);
    }
    for (uint32_t i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        assert_int_equal(args[i].mismatches, 0);
    }
    harness_table_free(b);
    harness_table_free(a);
    wsel_plugin_entry.destroy(c);
}

/*
 * A worker's capacity is its rank count. On the mixed cluster (one 8-rank
 * worker, eight 1-rank ones; 16 ranks) the 8-rank worker holds 800 of the
 * ring's 1,600 points, so with idle workers it takes about half of 1,600
 * keys (its ring share is within a few points of 1/2; 1/9 = 11 % before);
 * and its bound is 8/16 of the load: with 30 requests on it and 3 on each
 * small worker (total 54), its cap is ceil(1.25 * 55 * 8 / 16) = 35 >= 31,
 * a small one's ceil(1.25 * 55 / 16) = 5 >= 4, so nothing spills (a
 * per-worker bound, ceil(1.25 * 55 / 9) = 8, would push the big worker's
 * keys away).
 */
static void test_a_worker_weighs_as_many_ranks_as_it_has(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    const uint32_t dp[9] = {8, 1, 1, 1, 1, 1, 1, 1, 1};
    harness_table *t = harness_table_new(9, dp);
    uint32_t big = 0, home[1600];
    for (uint64_t k = 0; k < 1600; k++) {
        home[k] = group_of(t, pick(c, t, k, k + 1));
        big += home[k] == 0;
    }
    assert_true(big > 640 && big < 960);
    for (uint32_t i = 0; i < 8; i++)
        t->active_requests[i] = i < 6 ? 4 : 3; /* 30 on the big worker */
    for (uint32_t i = 8; i < 16; i++)
        t->active_requests[i] = 3;
    for (uint64_t k = 0; k < 1600; k++)
        assert_int_equal(group_of(t, pick(c, t, 5000 + k, k + 1)), home[k]);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/*
 * A home without the request's own content, while a worker inside the
 * bound holds it, is bypassed: the request follows its content. A prompt of
 * 3 blocks is sent again and again (after its first time all 3 are common,
 * so it keys on its last block: depth 3). 4 idle one-rank workers.
 */
static void test_a_home_without_the_content_yields_to_a_worker_holding_it(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(4, 1);
    const uint64_t p[3] = {1001, 1002, 1003};
    wsel_request req;
    wsel_rng rng;
    for (uint32_t i = 0; i < 4; i++)
        t->cost[i] = 10.0;
    harness_request(&req, &rng, SEED, 1, 0, p, 3);
    harness_select(c, &req, t);
    harness_request(&req, &rng, SEED, 2, 0, p, 3);
    uint32_t home = harness_select(c, &req, t);
    uint32_t other = (home + 1) % 4;
    /* Another worker holds all 3 blocks and is cheaper; the home none. */
    t->overlap_blocks[other] = 3;
    t->cost[other] = 7.0;
    harness_request(&req, &rng, SEED, 3, 0, p, 3);
    assert_int_equal(harness_select(c, &req, t), other);
    /* The home holds them too (depth 3 reached): it keeps the key, cheaper
     * or not. */
    t->overlap_blocks[home] = 3;
    harness_request(&req, &rng, SEED, 4, 0, p, 3);
    assert_int_equal(harness_select(c, &req, t), home);
    /* Holding only 2 of the 3 is not holding the content. */
    t->overlap_blocks[home] = 2;
    harness_request(&req, &rng, SEED, 5, 0, p, 3);
    assert_int_equal(harness_select(c, &req, t), other);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/* score() for `key` (affinity key, no hashes); fails the test if it fails. */
static void score_key(void *c, const harness_table *t, uint64_t request_id, uint64_t key,
                      double *scores)
{
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, SEED, request_id, key, NULL, 0);
    assert_int_equal(wsel_plugin_entry.score(c, &req, &t->table, scores), 0);
}

/*
 * The score is select's order of preference. While the home is inside the
 * bound, the walk's order: 4 idle workers of 2 ranks (rank costs 10
 * and 20) get 0, 1, 2, 3 on their cheaper rank, + 0.75 on the dearer one
 * (0.5 + 0.25 * 1), and the row scoring 0 is select's. Then the worker the
 * key lands on (its home) carries 10 requests: total 10, cap
 * ceil(1.25 * 11 * 2 / 8) = 4 (its share: 2 of 8 ranks), so it is over the
 * bound and the request spills to the cheapest rank of a worker inside the
 * bound: the one whose cheaper rank now costs 5. Scores: that row 0; the
 * other rows inside the bound 1 + (cost - 5) / (20 - 5): 1 + 1/3 at cost
 * 10, 2 at cost 20; the home's rows 3 + L / ranks = 3 + 5 = 8.
 */
static void test_the_score_is_select_s_order_of_preference(void **state)
{
    (void)state;
    /* Loads in requests, spills to the cheapest rank (spill: cost). */
    const char *names[] = {"load", "spill"};
    const double values[] = {0.0, 0.0};
    void *c = harness_create(names, values, 2);
    harness_table *t = harness_table_uniform(4, 2);
    for (uint32_t i = 0; i < 8; i++)
        t->cost[i] = i % 2 == 0 ? 20.0 : 10.0;
    double scores[8];
    score_key(c, t, 1, 99, scores);
    uint32_t seen = 0, first = UINT32_MAX, second = UINT32_MAX;
    for (uint32_t g = 0; g < 4; g++) {
        double base = scores[2 * g + 1];
        assert_true(base == floor(base) && base >= 0.0 && base <= 3.0);
        assert_true(scores[2 * g] == base + 0.75);
        seen |= 1u << (uint32_t)base;
        if (base == 0.0)
            first = 2 * g + 1;
        if (base == 1.0)
            second = 2 * g + 1;
    }
    assert_int_equal(seen, 0xf);
    assert_int_equal(pick(c, t, 2, 99), first);

    t->active_requests[first] = 10;
    t->cost[second] = 5.0;
    score_key(c, t, 3, 99, scores);
    assert_true(scores[first] == 8.0 && scores[first - 1] == 8.0);
    assert_true(scores[second] == 0.0);
    for (uint32_t i = 0; i < 8; i++) {
        if (i == first || i == first - 1 || i == second)
            continue;
        if (t->cost[i] == 20.0)
            assert_true(scores[i] == 2.0);
        else
            assert_true(fabs(scores[i] - (1.0 + 1.0 / 3.0)) < 1e-12);
    }
    assert_int_equal(pick(c, t, 4, 99), second);

    /* Only the loaded worker eligible: the bound is its own (cap
     * ceil(1.25 * 11 * 2 / 2) = 14), so it takes the key, and the excluded
     * workers score above it. */
    for (uint32_t i = 0; i < 8; i++)
        if (group_of(t, i) != group_of(t, first))
            t->flags[i] = WSEL_ROW_EXCLUDED;
    score_key(c, t, 5, 99, scores);
    uint32_t best = 0;
    for (uint32_t i = 1; i < 8; i++)
        if (scores[i] < scores[best])
            best = i;
    assert_int_equal(best, first);
    assert_int_equal(pick(c, t, 6, 99), first);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/*
 * load: blocks (the default). 10 one-rank workers, each rank's decode_blocks
 * its active blocks plus the request's 4 blocks (no overlap anywhere).
 * Requests of 4 blocks, or 400 for one in ten (prompts differing 100-fold),
 * each staying LIFETIME requests; keys skewed as above. After every decision
 * the chosen worker's decode_blocks, as the table gave them, must be at most
 * (1 + epsilon) times its share (1/10) of their sum, unless no worker was
 * inside the bound (then the least loaded takes it: never over the mean).
 */
static void test_the_bound_counts_blocks_when_prompts_differ_in_size(void **state)
{
    (void)state;
    void *c = harness_create(NULL, NULL, 0);
    harness_table *t = harness_table_uniform(10, 1);
    uint64_t active[10] = {0};
    uint32_t fifo_row[LIFETIME];
    uint64_t fifo_blocks[LIFETIME];
    uint64_t hashes[400];
    wsel_rng keys;
    wsel_rng_seed(&keys, SEED);
    uint32_t spilled = 0;
    for (uint32_t n = 0; n < 20000; n++) {
        if (n >= LIFETIME)
            active[fifo_row[n % LIFETIME]] -= fifo_blocks[n % LIFETIME];
        double u = wsel_rng_uniform(&keys);
        uint64_t key = 1 + (uint64_t)(1000.0 * u * u * u * u);
        uint32_t blocks = n % 10 == 0 ? 400 : 4;
        for (uint32_t b = 0; b < blocks; b++)
            hashes[b] = key * 1000003u + b;
        uint64_t sum = 0, least = UINT64_MAX;
        for (uint32_t i = 0; i < 10; i++) {
            t->decode_blocks[i] = active[i] + blocks;
            sum += t->decode_blocks[i];
            least = t->decode_blocks[i] < least ? t->decode_blocks[i] : least;
        }
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, SEED, n, 0, hashes, blocks);
        uint32_t row = harness_select(c, &req, t);
        double cap = 1.25 * (double)sum / 10.0;
        if ((double)t->decode_blocks[row] > cap && t->decode_blocks[row] != least)
            fail_msg("request %u: worker %u holds %llu blocks > bound %.1f", n, row,
                     (unsigned long long)t->decode_blocks[row], cap);
        spilled += (double)least > cap;
        active[row] += blocks;
        fifo_row[n % LIFETIME] = row;
        fifo_blocks[n % LIFETIME] = blocks;
    }
    print_message("%u of 20000 decisions had no worker inside the bound\n", spilled);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/*
 * spill: overlap (the default). The home is over the bound; of the workers
 * inside it, the one holding the deepest prefix of the request takes it,
 * though another is cheaper; among equally deep holders, the cheaper one.
 * 4 one-rank workers, loads in requests so the bound is easy to state.
 */
static void test_a_spill_goes_to_the_deepest_overlap_inside_the_bound(void **state)
{
    (void)state;
    const char *names[] = {"load"};
    const double values[] = {0.0};
    void *c = harness_create(names, values, 1);
    harness_table *t = harness_table_uniform(4, 1);
    wsel_request req;
    wsel_rng rng;
    for (uint32_t i = 0; i < 4; i++)
        t->cost[i] = 10.0;
    uint32_t home = pick(c, t, 1, 77);
    /* Home: 10 requests (total 10, cap ceil(1.25 * 11 / 4) = 4). */
    t->active_requests[home] = 10;
    uint32_t a = (home + 1) % 4, b = (home + 2) % 4, d = (home + 3) % 4;
    t->overlap_blocks[a] = 2;
    t->cost[a] = 30.0;
    t->overlap_blocks[b] = 5;
    t->cost[b] = 40.0;
    t->cost[d] = 1.0;
    harness_request(&req, &rng, SEED, 2, 77, NULL, 0);
    assert_int_equal(harness_select(c, &req, t), b);
    t->overlap_blocks[a] = 5;
    harness_request(&req, &rng, SEED, 3, 77, NULL, 0);
    assert_int_equal(harness_select(c, &req, t), a);
    /* The deepest holder over the bound too: the next deepest inside it. */
    t->active_requests[a] = 10;
    t->overlap_blocks[b] = 1;
    harness_request(&req, &rng, SEED, 4, 77, NULL, 0);
    assert_int_equal(harness_select(c, &req, t), b);
    harness_table_free(t);
    wsel_plugin_entry.destroy(c);
}

/*
 * Workers without an eligible rank are out of the bound's total: E
 * excluded one-rank workers carrying 10 requests each, then 5 eligible
 * ones, the key's home among them carrying 3. The bound's total is 3 (cap
 * ceil(1.25 * 4 / 5) = 1), so the home spills; counting the excluded
 * workers' 10 * E would let it keep the key. E = 10 and E = 70 (past the
 * workers select notes one by one).
 */
static void test_workers_without_an_eligible_rank_are_out_of_the_total(void **state)
{
    (void)state;
    const char *names[] = {"load"};
    const double values[] = {0.0};
    const uint32_t excluded[] = {10, 70};
    for (uint32_t k = 0; k < 2; k++) {
        void *c = harness_create(names, values, 1);
        uint32_t e = excluded[k];
        harness_table *t = harness_table_uniform(e + 5, 1);
        for (uint32_t i = 0; i < e; i++) {
            t->flags[i] = WSEL_ROW_EXCLUDED;
            t->active_requests[i] = 10;
        }
        uint32_t home = pick(c, t, 1, 4242);
        assert_true(home >= e);
        t->active_requests[home] = 3;
        assert_int_not_equal(pick(c, t, 2, 4242), home);
        harness_table_free(t);
        wsel_plugin_entry.destroy(c);
    }
}

/*
 * select takes shortcuts (passes over the columns, then only the leading
 * rows' workers judged); score ranks every row by the full walk. The row
 * select takes must have score's single lowest score on random tables built
 * to defeat the shortcuts: mixed rank counts (1 to 19, so the 16-row steps
 * and their tails both occur), few distinct costs and overlaps (ties across
 * and inside workers), excluded and busy rows, loads that put many workers
 * over the bound, now and then a NaN or infinite cost or an overlap past
 * 32,767; both load kinds and both spill orders.
 */
static void test_select_agrees_with_the_score_on_random_tables(void **state)
{
    (void)state;
    const char *names[] = {"load", "spill"};
    wsel_rng r;
    wsel_rng_seed(&r, SEED);
    uint32_t disagreements = 0, trials = 0;
    for (uint32_t config = 0; config < 4; config++) {
        const double values[] = {(double)(config & 1), (double)(config >> 1)};
        void *c = harness_create(names, values, 2);
        for (uint32_t table = 0; table < 60; table++) {
            /* One table in 6: 150 one-rank workers, a third excluded (more
             * workers without an eligible rank than select notes one by
             * one). */
            int wide = table % 6 == 5;
            uint32_t workers = wide ? 150 : 1 + wsel_rng_below(&r, 40), dp[150];
            for (uint32_t g = 0; g < workers; g++)
                dp[g] =
                    wide ? 1
                         : 1 + (wsel_rng_below(&r, 3) == 0 ? wsel_rng_below(&r, 19) : 0);
            harness_table *t = harness_table_new(workers, dp);
            for (uint32_t k = 0; k < 20; k++, trials++) {
                uint32_t n = t->table.num_rows;
                uint32_t spread = 1 + wsel_rng_below(&r, 6);
                for (uint32_t i = 0; i < n; i++) {
                    t->overlap_blocks[i] = wsel_rng_below(&r, spread);
                    t->cost[i] = (double)wsel_rng_below(&r, spread * 2);
                    t->active_requests[i] = wsel_rng_below(&r, 8);
                    t->decode_blocks[i] = wsel_rng_below(&r, 64);
                    uint32_t f = wsel_rng_below(&r, wide ? 3 : 16);
                    t->flags[i] = f == 0 ? WSEL_ROW_EXCLUDED : f == 1 ? WSEL_ROW_BUSY : 0;
                }
                if (wsel_rng_below(&r, 4) == 0) { /* one worker far over the bound */
                    uint32_t i = wsel_rng_below(&r, n);
                    t->active_requests[i] += 100;
                    t->decode_blocks[i] += 1000;
                }
                if (wsel_rng_below(&r, 10) == 0)
                    t->cost[wsel_rng_below(&r, n)] = NAN;
                if (wsel_rng_below(&r, 10) == 0)
                    t->cost[wsel_rng_below(&r, n)] = INFINITY;
                if (wsel_rng_below(&r, 10) == 0)
                    t->overlap_blocks[wsel_rng_below(&r, n)] = 40000;
                uint64_t hashes[6];
                uint32_t blocks = wsel_rng_below(&r, 7);
                for (uint32_t b = 0; b < blocks; b++)
                    hashes[b] = 1 + wsel_rng_below(&r, 3) * 100 + b;
                wsel_request req;
                wsel_rng rng;
                harness_request(&req, &rng, SEED, trials, 1 + wsel_rng_below(&r, 5),
                                hashes, blocks);
                double scores[40 * 19];
                if (wsel_plugin_entry.score(c, &req, &t->table, scores) != 0)
                    continue; /* every row excluded */
                uint32_t row = harness_select(c, &req, t);
                for (uint32_t i = 0; i < n; i++)
                    if (i != row && scores[i] <= scores[row]) {
                        disagreements++;
                        print_message("config %u trial %u: select %u (score %g), row %u "
                                      "scores %g\n",
                                      config, trials, row, scores[row], i, scores[i]);
                        break;
                    }
            }
            harness_table_free(t);
        }
        wsel_plugin_entry.destroy(c);
    }
    assert_int_equal(disagreements, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_key_stays_on_its_worker_while_loads_are_in_bound),
        cmocka_unit_test(test_the_bound_counts_blocks_when_prompts_differ_in_size),
        cmocka_unit_test(test_a_spill_goes_to_the_deepest_overlap_inside_the_bound),
        cmocka_unit_test(test_select_agrees_with_the_score_on_random_tables),
        cmocka_unit_test(test_workers_without_an_eligible_rank_are_out_of_the_total),
        cmocka_unit_test(test_the_score_is_select_s_order_of_preference),
        cmocka_unit_test(test_a_worker_weighs_as_many_ranks_as_it_has),
        cmocka_unit_test(test_a_home_without_the_content_yields_to_a_worker_holding_it),
        cmocka_unit_test(test_a_shared_system_prompt_does_not_collapse_the_keys),
        cmocka_unit_test(test_a_long_shared_prompt_does_not_collapse_the_keys),
        cmocka_unit_test(test_a_prompt_everyone_repeats_keys_on_its_last_block),
        cmocka_unit_test(test_the_cheapest_eligible_rank_of_the_worker_is_chosen),
        cmocka_unit_test(test_an_excluded_worker_passes_its_keys_clockwise),
        cmocka_unit_test(test_more_workers_than_max_workers_still_answer),
        cmocka_unit_test(test_topology_change_grows_the_ring_past_its_points),
        cmocka_unit_test(test_no_worker_exceeds_the_bound_under_a_skewed_load),
        cmocka_unit_test(
            test_removing_one_of_n_workers_moves_only_its_keys_about_one_nth),
        cmocka_unit_test(test_threads_on_two_topologies_agree_with_a_single_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
