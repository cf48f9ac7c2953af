// SPDX-License-Identifier: Apache-2.0
/*
 * test_model.c -- golden runs of the cluster model on tiny traces, with the
 * expected figures worked out by hand from the cost model below.
 *
 * Polynomial cost model (Dynamo mocker), in ms:
 *   P(T) = 4.209989e-7 T^2 + 1.518344e-2 T + 16.50142   (prefill of T tokens)
 *   D(u) = max(1, -25.74 u^2 + 54.01 u + 5.74)           (a decode pass)
 * A rank's step = P(T) if it prefills + D(u) if it decodes; a worker's
 * step = its slowest rank's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sim_fixture.h"
#include "source.h"

/* Stored as float: compare to 1e-3 ms. */
#define MS_TOL 1e-3

static void tiny_cluster(sim_cluster *c, uint32_t workers, uint32_t dp)
{
    sim_cluster_default(c);
    c->num_workers = workers;
    for (uint32_t w = 0; w < workers; w++)
        c->dp[w] = dp;
    c->kv_blocks = 100;
    c->block_size = 4;
}

static void default_router(sim_router_config *rc)
{
    memset(rc, 0, sizeof(*rc));
    rc->overlap_weight = 1.0;
    rc->affinity_blocks = 4;
}

static sim_result run_trace(const char *text, const sim_cluster *c,
                            const sim_router_config *rc, standin *st)
{
    const char *path = fixture_write(2, text);
    char err[512];
    sim_source *src;
    assert_int_equal(
        sim_source_open_trace(&src, path, 4, c->block_size, 0, err, sizeof(err)), 0);
    sim_policy policy;
    standin_policy(st, &policy);
    sim_run_args args = {.cluster = c,
                         .router = rc,
                         .source = &sim_source_ops_default,
                         .source_ctx = src,
                         .policy = &policy,
                         .first_label = "standin"};
    sim_result res;
    int32_t rc_run = sim_run(&args, &res, err, sizeof(err));
    if (rc_run != 0)
        fail_msg("sim_run: %s", err);
    sim_source_close(src);
    fixture_remove(path);
    return res;
}

/*
 * One worker, one rank, block 4, 100 KV blocks (400 tokens).
 *   R0 t=0    isl 8  osl 2  ids [1,2]
 *   R1 t=5    isl 8  osl 1  ids [1,2]
 *   R2 t=100  isl 12 osl 1  ids [1,2,3]
 * Step 1 at 0: R0 prefills 8 tokens: P(8) = 2.694e-5 + 0.12146752 + 16.50142
 *   = 16.62291446 ms. R0's first token at 16.62291446: TTFT0 = 16.62291.
 * Step 2 at 16.62291446: R0 decodes (u = 9 tokens / 400 = 0.0225:
 *   D = -0.013030875 + 1.215225 + 5.74 = 6.942194125); R1 is admitted with
 *   blocks 1,2 cached (8 tokens), but the last token is always computed:
 *   cached 7, prefill 1: P(1) = 16.51660386. Step = 23.45879799 ms, ends
 *   at 40.08171245: TTFT1 = 40.08171245 - 5 = 35.08171245; R0 has its 2nd
 *   token and both finish.
 * Step 3 at 100: R2 finds blocks 1,2 cached (released, still in LRU):
 *   cached 8, prefill 4: P(4) = 6.736e-6 + 0.06073376 + 16.50142
 *   = 16.56216050 ms: TTFT2 = 16.56216050.
 * kv_hit_rate = (0 + 7 + 8) / (8 + 8 + 12) = 15 / 28.
 * TTFT sorted: 16.56216, 16.62291, 35.08171; nearest rank p50 = 2nd,
 * p99 = 3rd; mean = 68.26678741 / 3 = 22.75559580.
 */
static void test_three_requests_match_the_hand_computed_ttft(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 1, 1);
    default_router(&rc);
    standin st = {0};
    sim_result r =
        run_trace("{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 2, "
                  "\"hash_ids\": [1, 2]}\n"
                  "{\"timestamp\": 5, \"input_length\": 8, \"output_length\": 1, "
                  "\"hash_ids\": [1, 2]}\n"
                  "{\"timestamp\": 100, \"input_length\": 12, \"output_length\": 1, "
                  "\"hash_ids\": [1, 2, 3]}\n",
                  &c, &rc, &st);
    assert_int_equal(r.total.requests, 3);
    assert_int_equal(r.total.lost_requests, 0);
    assert_int_equal(st.finished, 3);
    assert_float_equal(r.total.kv_hit_rate, 15.0 / 28.0, 1e-12);
    assert_float_equal(r.total.ttft_ms.p50, 16.62291446, MS_TOL);
    assert_float_equal(r.total.ttft_ms.p99, 35.08171245, MS_TOL);
    assert_float_equal(r.total.ttft_ms.mean, 22.75559580, MS_TOL);
    /* E2E: R0 and R1 end at 40.08171245, R2 at 116.56216050. */
    assert_float_equal(r.total.e2e_ms.p99, 40.08171245, MS_TOL);
    assert_int_equal(r.total.output_tokens, 4);
}

/*
 * Lockstep: one worker with two ranks, block 4, 200 KV blocks each (800
 * tokens):
 *   R0 at t=0 -> rank 1: isl 4, osl 2. It starts the worker's first step
 *     alone: P(4) = 6.7359824e-6 + 0.06073376 + 16.50142 = 16.56216050 =
 *     TTFT0.
 *   R1 at t=1 -> rank 0: isl 400, osl 1. It waits for that step, then
 *     prefills 400 tokens: P(400) = 0.067359824 + 6.073376 + 16.50142 =
 *     22.64215582, while rank 1 only decodes R0's second token:
 *     D(5 / 800) = 6.0765...
 * The worker's step is the slower rank's, 22.64215582 ms, so both R1's
 * first token and R0's second come at 16.56216050 + 22.64215582 =
 * 39.20431632 ms (TTFT1 = 38.20431632), not 6.08 ms after R0's first.
 * (test_fidelity.c has the same requests with independent ranks.)
 */
static void test_ranks_of_one_worker_step_in_lockstep(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 1, 2);
    c.kv_blocks = 200;
    default_router(&rc);
    static const uint32_t rows[] = {1, 0};
    standin st = {rows, 2, 0, {0}, {0}, 0, 0};
    char trace[4096];
    int n = snprintf(trace, sizeof(trace),
                     "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 2, "
                     "\"hash_ids\": [7]}\n"
                     "{\"timestamp\": 1, \"input_length\": 400, \"output_length\": 1, "
                     "\"hash_ids\": [");
    for (int i = 0; i < 100; i++)
        n += snprintf(trace + n, sizeof(trace) - (size_t)n, "%s%d", i ? ", " : "",
                      100 + i);
    snprintf(trace + n, sizeof(trace) - (size_t)n, "]}\n");
    sim_result r = run_trace(trace, &c, &rc, &st);
    assert_int_equal(r.total.lost_requests, 0);
    assert_float_equal(r.total.ttft_ms.p50, 16.56216050, MS_TOL);
    assert_float_equal(r.total.ttft_ms.p99, 38.20431632, MS_TOL);
    assert_float_equal(r.total.e2e_ms.p99, 39.20431632, MS_TOL); /* R0 ends with R1 */
}

/*
 * Flicker: two workers of one rank, affinity key = block 1 (K = 1).
 * Keys X X Y X Y routed to workers 0 1 0 1 0: the 2nd request moves X
 * (0 -> 1), the 4th keeps X on 1, the 5th keeps Y on 0; the 1st and 3rd
 * are first sightings. key_move_rate = 1 moved / 3 seen. With one block per
 * prompt, flicker_rate (prefix ownership, block-weighted) is the same 1/3;
 * test_fidelity.c has a case where the two differ.
 */
static void test_flicker_counts_moves_of_a_seen_key(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 1);
    default_router(&rc);
    rc.affinity_blocks = 1;
    static const uint32_t rows[] = {0, 1, 0, 1, 0};
    standin st = {rows, 5, 0, {0}, {0}, 0, 0};
    sim_result r = run_trace("{\"timestamp\": 0, \"input_length\": 4, \"output_length\": "
                             "1, \"hash_ids\": [11]}\n"
                             "{\"timestamp\": 1000, \"input_length\": 4, "
                             "\"output_length\": 1, \"hash_ids\": [11]}\n"
                             "{\"timestamp\": 2000, \"input_length\": 4, "
                             "\"output_length\": 1, \"hash_ids\": [22]}\n"
                             "{\"timestamp\": 3000, \"input_length\": 4, "
                             "\"output_length\": 1, \"hash_ids\": [11]}\n"
                             "{\"timestamp\": 4000, \"input_length\": 4, "
                             "\"output_length\": 1, \"hash_ids\": [22]}\n",
                             &c, &rc, &st);
    assert_float_equal(r.total.key_move_rate, 1.0 / 3.0, 1e-12);
    assert_float_equal(r.total.flicker_rate, 1.0 / 3.0, 1e-12);
    /* The key passed to the policy is the block hash itself. */
    assert_int_equal(st.keys[0], 11);
    assert_int_equal(st.keys[2], 22);
    /* Hit rate: request 2 (X again on worker 1) misses, request 4 (X on
     * worker 1 again) hits 3 of 4 tokens (the last one is recomputed),
     * request 5 (Y on worker 0 again) likewise: 6 / 20. */
    assert_float_equal(r.total.kv_hit_rate, 6.0 / 20.0, 1e-12);
}

/* KV events reach the router's index only after --kv-event-delay-ms: a
 * request 100 ms after its twin finished sees the twin's 2 blocks with no
 * delay, and nothing when events take a second. */
static void test_stale_kv_events_hide_cached_blocks(void **state)
{
    (void)state;
    const char *trace = "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, "
                        "\"hash_ids\": [1, 2]}\n"
                        "{\"timestamp\": 100, \"input_length\": 8, \"output_length\": 1, "
                        "\"hash_ids\": [1, 2]}\n";
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 1);
    default_router(&rc);
    standin fresh = {0};
    run_trace(trace, &c, &rc, &fresh);
    assert_int_equal(fresh.max_overlap[0], 0);
    assert_int_equal(fresh.max_overlap[1], 2);
    rc.kv_event_delay_ns = 1000000000ull;
    standin stale = {0};
    sim_result r = run_trace(trace, &c, &rc, &stale);
    assert_int_equal(stale.max_overlap[1], 0);
    assert_int_equal(r.total.lost_requests, 0);
}

/* --switch-at: requests are counted in the phase they arrive in, the
 * phases add up to the whole run, and nothing is lost across the switch. */
static void test_switch_splits_metrics_into_phases(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 1);
    default_router(&rc);
    static const uint32_t rows[] = {1};
    standin st = {rows, 1, 0, {0}, {0}, 0, 0};
    char trace[4096];
    size_t n = 0;
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(
            trace + n, sizeof(trace) - n,
            "{\"timestamp\": %d, \"input_length\": 8, \"output_length\": 3, "
            "\"hash_ids\": [%d, %d]}\n",
            i * 100, i % 3, 10 + i);
    const char *path = fixture_write(4, trace);
    char err[512];
    sim_source *src;
    assert_int_equal(sim_source_open_trace(&src, path, 4, 4, 0, err, sizeof(err)), 0);
    sim_policy policy;
    standin_policy(&st, &policy);
    sim_switch sw = {950000000, "other", "/nowhere/other.so", NULL}; /* at 0.95 s */
    sim_run_args args = {.cluster = &c,
                         .router = &rc,
                         .source = &sim_source_ops_default,
                         .source_ctx = src,
                         .policy = &policy,
                         .switches = &sw,
                         .num_switches = 1,
                         .first_label = "standin"};
    sim_result r;
    assert_int_equal(sim_run(&args, &r, err, sizeof(err)), 0);
    sim_source_close(src);
    fixture_remove(path);
    assert_int_equal(st.switches, 1);
    assert_int_equal(r.num_phases, 2);
    assert_string_equal(r.phase_label[1], "other");
    assert_int_equal(r.phase[0].requests, 10); /* arrivals 0 .. 900 ms */
    assert_int_equal(r.phase[1].requests, 10);
    assert_int_equal(r.total.requests, 20);
    assert_int_equal(r.total.lost_requests, 0);
    assert_int_equal(r.phase[0].lost_requests + r.phase[1].lost_requests, 0);
}

/* Every request admitted finishes, also when KV blocks are scarce and
 * requests queue for them. */
static void test_no_request_is_lost_under_kv_pressure(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 2);
    c.kv_blocks = 12;
    c.max_running = 3;
    default_router(&rc);
    standin st = {0};
    char trace[8192];
    size_t n = 0;
    for (int i = 0; i < 60; i++)
        n += (size_t)snprintf(
            trace + n, sizeof(trace) - n,
            "{\"timestamp\": %d, \"input_length\": 16, \"output_length\": "
            "%d, \"hash_ids\": [%d, %d, %d, %d]}\n",
            i, 1 + i % 13, i % 5, 100 + i % 7, 200 + i, 300 + i);
    sim_result r = run_trace(trace, &c, &rc, &st);
    assert_int_equal(r.total.requests, 60);
    assert_int_equal(r.total.lost_requests, 0);
    assert_int_equal(st.finished, 60);
}

/* A request larger than a rank's KV cache is refused with a clear error
 * rather than waiting forever. */
static void test_oversized_request_is_an_error(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 1, 1);
    c.kv_blocks = 2;
    default_router(&rc);
    const char *path = fixture_write(
        3, "{\"timestamp\": 0, \"input_length\": 12, \"output_length\": 1, \"hash_ids\": "
           "[1, 2, 3]}\n");
    char err[512];
    sim_source *src;
    assert_int_equal(sim_source_open_trace(&src, path, 4, 4, 0, err, sizeof(err)), 0);
    standin st = {0};
    sim_policy policy;
    standin_policy(&st, &policy);
    sim_run_args args = {.cluster = &c,
                         .router = &rc,
                         .source = &sim_source_ops_default,
                         .source_ctx = src,
                         .policy = &policy,
                         .first_label = "standin"};
    sim_result res;
    assert_int_equal(sim_run(&args, &res, err, sizeof(err)), WSEL_ERANGE);
    assert_non_null(strstr(err, "--kv-blocks"));
    sim_source_close(src);
    fixture_remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_requests_match_the_hand_computed_ttft),
        cmocka_unit_test(test_ranks_of_one_worker_step_in_lockstep),
        cmocka_unit_test(test_flicker_counts_moves_of_a_seen_key),
        cmocka_unit_test(test_stale_kv_events_hide_cached_blocks),
        cmocka_unit_test(test_switch_splits_metrics_into_phases),
        cmocka_unit_test(test_no_request_is_lost_under_kv_pressure),
        cmocka_unit_test(test_oversized_request_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
