// SPDX-License-Identifier: Apache-2.0
/*
 * test_abi_v1_1_plugin.c -- every bundled plugin (built against the 1.1
 * header) works in a 1.0 host: handed a wsel_host_api of the 1.0 size,
 * whose appended helpers must not be called, and a choice of the 1.0 size
 * followed by guard bytes, it answers exactly what it answers in this
 * host, and writes nothing past the 1.0 choice.
 *
 * There is no 1.0 host binary to load them into, so this test is one: it
 * opens each plugin with libwsel-host (trust, descriptor, config), then
 * creates two instances itself, one per host table, and feeds both the
 * same requests. WSEL_BUNDLED_PATHS lists the plugins, '|'-separated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_host.h"

#define ROWS       24u
#define REQUESTS   400u
#define GUARD      64u
#define GUARD_BYTE 0xa5u

/* A 1.0 host's helpers end at argmin; these sit where 1.1's would be and
 * count calls that a correct plugin never makes. */
static unsigned trap_calls;

static uint32_t trap_rng_below(wsel_rng *rng, uint32_t n)
{
    (void)rng, (void)n;
    trap_calls++;
    return 0;
}

static int32_t trap_eligible_skip(const uint8_t *flags, uint32_t n, uint8_t *out_skip,
                                  uint32_t *out_count)
{
    (void)flags, (void)n, (void)out_skip, (void)out_count;
    trap_calls++;
    return WSEL_EINVAL;
}

static void quiet_log(const wsel_host_api *api, int32_t level, const char *msg)
{
    (void)api, (void)level, (void)msg;
}

/* Table for request k: loads move with k, a few rows busy or excluded,
 * sometimes every eligible row busy. */
static void ranks_for(uint32_t k, wsel_rank_state *ranks)
{
    for (uint32_t i = 0; i < ROWS; i++) {
        uint32_t h = (k * 2654435761u) ^ (i * 40503u);
        ranks[i] = (wsel_rank_state){
            .worker_id = 100 + i / 3,
            .dp_rank = i % 3,
            .overlap_blocks = (h >> 3) % 5,
            .active_prefill_tokens = (h >> 7) % 700,
            .active_blocks = (h >> 11) % 90,
            .active_requests = (h >> 17) % 9,
        };
        if ((h >> 21) % 11 == 0)
            ranks[i].flags |= WSEL_ROW_EXCLUDED;
        if ((h >> 25) % 5 == 0 || k % 37 == 0)
            ranks[i].flags |= WSEL_ROW_BUSY;
    }
    ranks[k % ROWS].flags &= (uint8_t)~WSEL_ROW_EXCLUDED; /* never all excluded */
}

static void check_plugin(const char *path)
{
    char err[256] = "";
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(path, NULL, &lib, err, sizeof(err));
    if (rc != 0)
        print_error("open %s: %s\n", path, err);
    assert_int_equal(rc, 0);
    const wsel_plugin *p = wsel_library_plugin(lib);
    double params[256];
    assert_int_equal(wsel_config_parse(lib, "{}", params, err, sizeof(err)), 0);

    wsel_host_api now, old;
    wsel_host_api_init(&now, NULL, quiet_log);
    wsel_host_api_init(&old, NULL, quiet_log);
    old.struct_size = WSEL_HOST_API_SIZE_1_0;
    old.abi_minor = 0;
    old.rng_below = trap_rng_below;
    old.eligible_skip = trap_eligible_skip;

    void *a = NULL, *b = NULL;
    assert_int_equal(p->create(&now, params, p->num_params, &a), 0);
    assert_int_equal(p->create(&old, params, p->num_params, &b), 0);

    wsel_table_buf buf = {0};
    assert_int_equal(wsel_table_buf_init(&buf, ROWS), 0);
    wsel_rank_state ranks[ROWS];
    uint64_t hashes[6];
    trap_calls = 0;
    for (uint32_t k = 0; k < REQUESTS; k++) {
        for (uint32_t j = 0; j < 6; j++)
            hashes[j] = 0x9e3779b97f4a7c15ull * (k % 13 + 1) + j;
        wsel_request req = {
            .struct_size = sizeof(wsel_request),
            .request_id = k + 1,
            .isl_tokens = 96,
            .block_size = 16,
            .num_block_hashes = 6,
            .block_hashes = hashes,
            .overlap_score_weight = 1.0,
        };
        ranks_for(k, ranks);
        assert_int_equal(wsel_table_build(&buf, &req, ranks, ROWS, 1, err, sizeof(err)),
                         0);
        wsel_rng rng_a, rng_b;
        wsel_rng_seed(&rng_a, k);
        rng_b = rng_a;
        req.uniform = wsel_rng_uniform(&rng_a);
        (void)wsel_rng_uniform(&rng_b);

        wsel_choice ca = {.struct_size = sizeof(wsel_choice)};
        req.rng = &rng_a;
        int32_t ra = p->select(a, &req, &buf.table, &ca);

        unsigned char room[sizeof(wsel_choice) + GUARD];
        memset(room, 0, WSEL_CHOICE_SIZE_1_0);
        memset(room + WSEL_CHOICE_SIZE_1_0, GUARD_BYTE,
               sizeof(room) - WSEL_CHOICE_SIZE_1_0);
        wsel_choice *cb = (wsel_choice *)(void *)room;
        cb->struct_size = WSEL_CHOICE_SIZE_1_0;
        req.rng = &rng_b;
        int32_t rb = p->select(b, &req, &buf.table, cb);

        assert_int_equal(ra, rb);
        if (ra == 0) {
            if (ca.row != cb->row)
                print_error("%s: request %u: row %u in 1.1, %u in 1.0\n", p->name, k,
                            ca.row, cb->row);
            assert_int_equal(ca.row, cb->row);
        }
        for (size_t i = WSEL_CHOICE_SIZE_1_0; i < sizeof(room); i++)
            if (room[i] != GUARD_BYTE) {
                print_error("%s: wrote byte %zu of a 32-byte choice\n", p->name, i);
                fail();
            }
        if (p->on_request_finished != NULL && ra == 0) {
            p->on_request_finished(a, k + 1, buf.table.worker_id[ca.row],
                                   buf.table.dp_rank[ca.row]);
            p->on_request_finished(b, k + 1, buf.table.worker_id[ca.row],
                                   buf.table.dp_rank[ca.row]);
        }
    }
    assert_int_equal(trap_calls, 0);
    p->destroy(a);
    p->destroy(b);
    wsel_table_buf_free(&buf);
    wsel_library_close(lib);
}

static void test_every_bundled_plugin_answers_the_same_in_a_v1_0_host(void **state)
{
    (void)state;
    char *paths = strdup(WSEL_BUNDLED_PATHS);
    assert_non_null(paths);
    unsigned n = 0;
    for (char *save = NULL, *path = strtok_r(paths, "|", &save); path != NULL;
         path = strtok_r(NULL, "|", &save), n++)
        check_plugin(path);
    free(paths);
    assert_true(n >= 7);
}

/* The helpers a 1.1 host appends and their inline fallbacks in wsel.h give
 * the same answers, so a plugin answers alike in either host. */
static void test_host_helpers_and_inline_fallbacks_agree(void **state)
{
    (void)state;
    wsel_host_api api;
    wsel_host_api_init(&api, NULL, quiet_log);
    assert_true(WSEL_HOST_HAS(&api, rng_below));
    assert_true(WSEL_HOST_HAS(&api, eligible_skip));
    wsel_rng r1, r2;
    wsel_rng_seed(&r1, 42);
    r2 = r1;
    for (uint32_t n = 0; n < 3000; n++) {
        uint32_t bound = n < 1000 ? n : 0xffffffffu - n;
        uint32_t x = api.rng_below(&r1, bound),
                 y = wsel_inline_rng_below(&api, &r2, bound);
        assert_int_equal(x, y);
        assert_true(bound == 0 ? x == 0 : x < bound);
    }
    uint8_t flags[9];
    for (uint32_t mask = 0; mask < 4096; mask++) {
        for (uint32_t i = 0; i < 9; i++)
            flags[i] = (uint8_t)((mask * 2654435761u >> (i * 3)) & 7u);
        uint32_t n = mask % 10;
        uint8_t s1 = 0xee, s2 = 0xee;
        uint32_t c1 = 777, c2 = 777;
        int32_t a = api.eligible_skip(flags, n, &s1, &c1);
        int32_t b = wsel_inline_eligible_skip(flags, n, &s2, &c2);
        assert_int_equal(a, b);
        assert_int_equal(s1, s2);
        assert_int_equal(c1, c2);
        /* the rule itself, spelled out */
        uint32_t idle = 0, usable = 0;
        for (uint32_t i = 0; i < n; i++) {
            usable += !(flags[i] & WSEL_ROW_EXCLUDED);
            idle += !(flags[i] & (WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY));
        }
        if (usable == 0) {
            assert_int_equal(a, WSEL_ENOCANDIDATE);
            assert_int_equal(s1, 0xee);
        } else {
            assert_int_equal(a, 0);
            assert_int_equal(s1, idle ? (WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY)
                                      : WSEL_ROW_EXCLUDED);
            assert_int_equal(c1, idle ? idle : usable);
        }
    }
    assert_int_equal(api.eligible_skip(NULL, 3, &(uint8_t){0}, NULL), WSEL_EINVAL);
}

/* The host's log, as the test's sink sees it. */
static char last_log[256];

static void capture_log(void *user, int32_t level, const char *msg)
{
    (void)user, (void)level;
    snprintf(last_log, sizeof(last_log), "%s", msg);
}

static void outcome_reaches_the_plugin(uint32_t isolated)
{
    char err[256] = "";
    wsel_host_options opts;
    wsel_host_options_default(&opts);
    opts.log = capture_log;
    opts.isolated = isolated;
    /* What is checked is the pass-through, not the deadline: a helper late
     * by 5 ms on two busy cores (3 runs in 100 at load 3) must not turn
     * the answer into a fallback. */
    opts.select_deadline_us = 10u * 1000 * 1000;
    opts.hang_timeout_us = 20u * 1000 * 1000;
    wsel_host *host = NULL;
    assert_int_equal(wsel_host_create(&opts, &host), 0);
    int32_t rc = wsel_host_switch(host, WSEL_V1_1_FIXTURE, "{}", err, sizeof(err));
    if (rc != 0)
        print_error("switch: %s\n", err);
    assert_int_equal(rc, 0);

    wsel_rank_state ranks[ROWS];
    ranks_for(1, ranks);
    wsel_request req = {
        .request_id = 5, .isl_tokens = 64, .block_size = 16, .overlap_score_weight = 1.0};
    wsel_rng rng;
    wsel_host_prepare_request_sized(host, &req, sizeof(req), &rng);
    wsel_table_buf buf = {0};
    assert_int_equal(wsel_table_buf_init(&buf, ROWS), 0);
    assert_int_equal(wsel_table_build(&buf, &req, ranks, ROWS, 1, err, sizeof(err)), 0);
    wsel_choice choice = {.struct_size = sizeof(choice)};
    assert_int_equal(wsel_host_select(host, &req, &buf.table, &choice),
                     WSEL_ANSWER_PLUGIN);
    assert_int_equal(choice.reason, WSEL_REASON_CHEAPEST);
    assert_int_equal(choice.flags, WSEL_CHOICE_SCORED);
    assert_true(choice.score == buf.table.cost[choice.row]);
    wsel_host_counters c;
    wsel_host_read_counters(host, &c, sizeof(c));
    assert_int_equal(c.answers_by_reason[WSEL_REASON_CHEAPEST], 1);

    /* A caller's outcome of 1.0-era length: the plugin reads 0 past it. */
    wsel_outcome o = {
        .struct_size = sizeof(o),
        .request_id = 5,
        .worker_id = 101,
        .dp_rank = 2,
        .ttft_us = 1234,
        .e2e_us = 5678,
        .prompt_tokens = 64,
        .cached_tokens = 32,
        .output_tokens = 9,
    };
    last_log[0] = '\0';
    wsel_host_request_outcome(host, &o);
    if (!isolated)
        assert_string_equal(
            last_log,
            "outcome 5 ttft=1234 e2e=5678 prompt=64 cached=32 output=9 on 101/2");
    /* What the plugin learnt shows in its next explanation: 1234 % 64 = 18. */
    choice = (wsel_choice){.struct_size = sizeof(choice)};
    assert_int_equal(wsel_host_select(host, &req, &buf.table, &choice),
                     WSEL_ANSWER_PLUGIN);
    assert_int_equal(choice.reason, WSEL_REASON_PLUGIN + 18);
    wsel_host_read_counters(host, &c, sizeof(c));
    assert_int_equal(c.answers_by_reason[WSEL_HOST_REASON_SLOTS - 1], 1);
    o.struct_size = (uint32_t)offsetof(wsel_outcome, prompt_tokens);
    last_log[0] = '\0';
    wsel_host_request_outcome(host, &o);
    if (!isolated)
        assert_string_equal(
            last_log, "outcome 5 ttft=1234 e2e=5678 prompt=0 cached=0 output=0 on 101/2");
    wsel_table_buf_free(&buf);
    wsel_host_destroy(host);
}

static void test_outcome_and_explanation_pass_through_the_host(void **state)
{
    (void)state;
    outcome_reaches_the_plugin(0);
}

static void test_outcome_and_explanation_pass_through_an_isolated_helper(void **state)
{
    (void)state;
    outcome_reaches_the_plugin(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_helpers_and_inline_fallbacks_agree),
        cmocka_unit_test(test_outcome_and_explanation_pass_through_the_host),
        cmocka_unit_test(test_outcome_and_explanation_pass_through_an_isolated_helper),
        cmocka_unit_test(test_every_bundled_plugin_answers_the_same_in_a_v1_0_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
