// SPDX-License-Identifier: Apache-2.0
/*
 * test_fidelity.c -- the model's timing rules and the routing metrics on
 * hand-made traces with exact answers: a burst admitted in one step,
 * independent DP ranks, the replay clock (--speedup, jitter), Dynamo's
 * busy flags, flicker_rate on prefix ownership against key_move_rate, and
 * prefix_copies.
 *
 * Cost model (Dynamo mocker's polynomial), in ms:
 *   P(T) = 4.209989e-7 T^2 + 1.518344e-2 T + 16.50142   (prefill of T tokens)
 *   D(u) = max(1, -25.74 u^2 + 54.01 u + 5.74)           (a decode pass)
 *   P(4) = 16.5621605, P(8) = 16.62291446, P(400) = 22.64215582,
 *   D(5/800) = 6.07655703, D(5/400) = 6.41110313.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sim_fixture.h"
#include "source.h"

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

/* Arrival times and flags seen by the policy, per routed request. */
typedef struct seen {
    int64_t at_ns[16];
    uint32_t n;
} seen;

static void on_route(void *ctx, int64_t now_ns, uint32_t worker, int flicker)
{
    (void)worker;
    (void)flicker;
    seen *s = ctx;
    if (s->n < 16)
        s->at_ns[s->n++] = now_ns;
}

static sim_result run_trace(const char *text, const sim_cluster *c,
                            const sim_router_config *rc, sim_policy *policy, seen *obs)
{
    const char *path = fixture_write(3, text);
    char err[512];
    sim_source *src;
    assert_int_equal(
        sim_source_open_trace(&src, path, 4, c->block_size, 0, err, sizeof(err)), 0);
    sim_observer ob = {obs, NULL, on_route, NULL, NULL};
    sim_run_args args = {.cluster = c,
                         .router = rc,
                         .source = &sim_source_ops_default,
                         .source_ctx = src,
                         .policy = policy,
                         .first_label = "test",
                         .observer = obs ? &ob : NULL};
    sim_result res;
    int32_t rc_run = sim_run(&args, &res, err, sizeof(err));
    if (rc_run != 0)
        fail_msg("sim_run: %s", err);
    sim_source_close(src);
    fixture_remove(path);
    return res;
}

/* R0 (isl 4, osl 2) to rank 1 and R1 (isl 400, osl 1) to rank 0 of one
 * 2-rank worker; R1 arrives at `r1_ms`. */
static sim_result two_ranks(uint32_t dp_mode, int r1_ms)
{
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 1, 2);
    c.kv_blocks = 200;
    c.dp_mode = dp_mode;
    default_router(&rc);
    static const uint32_t rows[] = {1, 0};
    standin st = {rows, 2, 0, {0}, {0}, 0, 0};
    sim_policy policy;
    standin_policy(&st, &policy);
    char trace[4096];
    int n = snprintf(trace, sizeof(trace),
                     "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 2, "
                     "\"hash_ids\": [7]}\n"
                     "{\"timestamp\": %d, \"input_length\": 400, \"output_length\": 1, "
                     "\"hash_ids\": [",
                     r1_ms);
    for (int i = 0; i < 100; i++)
        n += snprintf(trace + n, sizeof(trace) - (size_t)n, "%s%d", i ? ", " : "",
                      100 + i);
    snprintf(trace + n, sizeof(trace) - (size_t)n, "]}\n");
    sim_result r = run_trace(trace, &c, &rc, &policy, NULL);
    assert_int_equal(r.total.lost_requests, 0);
    return r;
}

/*
 * A burst: both requests arrive at t=0 and are admitted into the step that
 * starts then (not R0 alone, R1 one step later). Rank 0 prefills 400
 * tokens, rank 1 prefills 4; the lockstep step lasts P(400) = 22.64215582:
 * both first tokens then. R0's second token: D(5/800) later, 28.71871286.
 */
static void test_burst_is_admitted_in_one_step(void **state)
{
    (void)state;
    sim_result r = two_ranks(SIM_DP_LOCKSTEP, 0);
    assert_float_equal(r.total.ttft_ms.p50, 22.64215582, MS_TOL);
    assert_float_equal(r.total.ttft_ms.p99, 22.64215582, MS_TOL);
    assert_float_equal(r.total.e2e_ms.p99, 28.71871286, MS_TOL);
}

/*
 * Independent ranks (R1 at t=1): rank 1 runs R0's prefill P(4) and its
 * decode D(5/800) on its own, e2e0 = 16.5621605 + 6.07655703 = 22.63871753;
 * rank 0 starts R1 at once when it arrives: TTFT1 = P(400) = 22.64215582.
 * (test_model.c: in lockstep R1 waits for R0's step, TTFT1 = 38.20431632.)
 */
static void test_independent_ranks_step_on_their_own(void **state)
{
    (void)state;
    sim_result r = two_ranks(SIM_DP_INDEPENDENT, 1);
    assert_float_equal(r.total.ttft_ms.p50, 16.5621605, MS_TOL);
    assert_float_equal(r.total.ttft_ms.p99, 22.64215582, MS_TOL);
    assert_float_equal(r.total.e2e_ms.p50, 22.63871753, MS_TOL);
    sim_result l = two_ranks(SIM_DP_LOCKSTEP, 1);
    assert_float_equal(l.total.ttft_ms.p99, 38.20431632, MS_TOL);
}

static const char *const clock_trace = "{\"timestamp\": 5000, \"input_length\": 4, "
                                       "\"output_length\": 1, \"hash_ids\": [1]}\n"
                                       "{\"timestamp\": 5000, \"input_length\": 4, "
                                       "\"output_length\": 1, \"hash_ids\": [2]}\n"
                                       "{\"timestamp\": 9000, \"input_length\": 4, "
                                       "\"output_length\": 1, \"hash_ids\": [3]}\n"
                                       "{\"timestamp\": 9001, \"input_length\": 4, "
                                       "\"output_length\": 1, \"hash_ids\": [4]}\n";

/* The clock starts at the first request; --speedup 4 divides the rest:
 * 5000, 5000, 9000, 9001 ms -> 0, 0, 1000, 1000.25 ms. */
static void test_speedup_divides_time_from_the_first_request(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 1);
    default_router(&rc);
    rc.speedup = 4;
    standin st = {NULL, 0, 0, {0}, {0}, 0, 0};
    sim_policy policy;
    standin_policy(&st, &policy);
    seen obs = {{0}, 0};
    run_trace(clock_trace, &c, &rc, &policy, &obs);
    assert_int_equal(obs.n, 4);
    assert_int_equal(obs.at_ns[0], 0);
    assert_int_equal(obs.at_ns[1], 0);
    assert_int_equal(obs.at_ns[2], 1000000000);
    assert_int_equal(obs.at_ns[3], 1000250000);
}

/* Jitter moves each arrival instant as a whole, by [0, jitter), and keeps
 * the order; the same seed gives the same times. */
static void test_jitter_keeps_bursts_together(void **state)
{
    (void)state;
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 1);
    default_router(&rc);
    rc.jitter_ns = 500000000; /* 500 ms */
    rc.jitter_seed = 7;
    seen a = {{0}, 0}, b = {{0}, 0};
    for (int pass = 0; pass < 2; pass++) {
        standin st = {NULL, 0, 0, {0}, {0}, 0, 0};
        sim_policy policy;
        standin_policy(&st, &policy);
        run_trace(clock_trace, &c, &rc, &policy, pass ? &b : &a);
    }
    assert_int_equal(a.n, 4);
    assert_memory_equal(a.at_ns, b.at_ns, sizeof(a.at_ns));
    assert_true(a.at_ns[0] >= 0 && a.at_ns[0] < 500000000);
    assert_int_equal(a.at_ns[1], a.at_ns[0]);
    assert_true(a.at_ns[2] >= 4000000000 && a.at_ns[2] < 4500000000);
    assert_true(a.at_ns[3] >= a.at_ns[2]);
}

/* A policy that answers fixed rows and records the flags it was shown. */
typedef struct flag_policy {
    const uint32_t *rows;
    uint32_t calls;
    uint32_t flags[16][4];
} flag_policy;

static int32_t flag_select(void *ctx, wsel_request *request, const wsel_rank_state *ranks,
                           uint32_t num_ranks, uint32_t *row, uint64_t *select_ns)
{
    (void)request;
    flag_policy *fp = ctx;
    for (uint32_t i = 0; i < num_ranks && i < 4 && fp->calls < 16; i++)
        fp->flags[fp->calls][i] = ranks[i].flags;
    *row = fp->rows[fp->calls++];
    *select_ns = 0;
    return WSEL_ANSWER_PLUGIN;
}

static void flag_policy_init(flag_policy *fp, const uint32_t *rows, sim_policy *out)
{
    memset(fp, 0, sizeof(*fp));
    fp->rows = rows;
    memset(out, 0, sizeof(*out));
    out->ctx = fp;
    out->select = flag_select;
}

/*
 * Prefill threshold 10 tokens on one worker of two ranks: R0 (40 tokens)
 * to rank 0, then R1 sees rank 0 busy but rank 1 idle: no flag (Dynamo
 * flags a worker only when all its ranks are busy). R1 goes to rank 1, so
 * R2 (same instant) sees both busy: both rows flagged. R3, long after,
 * sees none. Off by default: the same run without thresholds flags nothing.
 */
static void test_busy_flags_follow_dynamo_prefill_threshold(void **state)
{
    (void)state;
    static const char *const trace =
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 1, \"hash_ids\": "
        "[1,2,3,4,5,6,7,8,9,10]}\n"
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 1, \"hash_ids\": "
        "[11,12,13,14,15,16,17,18,19,20]}\n"
        "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": "
        "[21]}\n"
        "{\"timestamp\": 1000, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": "
        "[22]}\n";
    static const uint32_t rows[] = {0, 1, 0, 1};
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 1, 2);
    for (int on = 0; on < 2; on++) {
        default_router(&rc);
        if (on)
            rc.busy_prefill_tokens = 10;
        flag_policy fp;
        sim_policy policy;
        flag_policy_init(&fp, rows, &policy);
        run_trace(trace, &c, &rc, &policy, NULL);
        assert_int_equal(fp.calls, 4);
        uint32_t busy = on ? WSEL_ROW_BUSY : 0;
        assert_int_equal(fp.flags[0][0] | fp.flags[0][1], 0);
        assert_int_equal(fp.flags[1][0] | fp.flags[1][1], 0);
        assert_int_equal(fp.flags[2][0], busy);
        assert_int_equal(fp.flags[2][1], busy);
        assert_int_equal(fp.flags[3][0] | fp.flags[3][1], 0);
    }
}

/* Decode threshold 0.05 of 100 blocks: two 40-token requests decoding
 * (10 prompt blocks + 25 private for 100 output tokens each) make both
 * ranks busy 100 ms later; a 2-rank worker with one busy rank is not. */
static void test_busy_flags_follow_dynamo_decode_threshold(void **state)
{
    (void)state;
    static const char *const trace =
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 100, \"hash_ids\": "
        "[1,2,3,4,5,6,7,8,9,10]}\n"
        "{\"timestamp\": 50, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": "
        "[30]}\n"
        "{\"timestamp\": 60, \"input_length\": 40, \"output_length\": 100, \"hash_ids\": "
        "[11,12,13,14,15,16,17,18,19,20]}\n"
        "{\"timestamp\": 150, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": "
        "[21]}\n";
    static const uint32_t rows[] = {0, 1, 1, 0};
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 1, 2);
    default_router(&rc);
    rc.busy_decode_blocks = 0.05;
    flag_policy fp;
    sim_policy policy;
    flag_policy_init(&fp, rows, &policy);
    run_trace(trace, &c, &rc, &policy, NULL);
    assert_int_equal(fp.flags[1][0] | fp.flags[1][1], 0); /* rank 1 idle */
    assert_int_equal(fp.flags[3][0], WSEL_ROW_BUSY);
    assert_int_equal(fp.flags[3][1], WSEL_ROW_BUSY);
}

/*
 * flicker_rate on prefix ownership, against key_move_rate (K = 1). Two
 * 1-rank workers, routed A0 B1 C1 D0 E0:
 *   A [1,2,3]   no owner
 *   B [1,2,3,4] deepest routed block 3 (depth 3), owner rank 0, sent to 1:
 *               3 blocks away; blocks 1-4 now owned by rank 1
 *   C [1,2,5]   depth 2, owner 1, kept: 2 blocks
 *   D [9]       no owner
 *   E [1,2,3,4] depth 4, owner 1 (B), sent to 0: 4 blocks away
 * flicker_rate = (3 + 4) / (3 + 2 + 4) = 7/9. Key (block 1) moves: B
 * (0 -> 1) and E (1 -> 0) of B, C, E: key_move_rate = 2/3.
 */
static void test_flicker_weighs_blocks_moved_away_from_their_owner(void **state)
{
    (void)state;
    static const char *const trace =
        "{\"timestamp\": 0, \"input_length\": 12, \"output_length\": 1, \"hash_ids\": "
        "[1,2,3]}\n"
        "{\"timestamp\": 100, \"input_length\": 16, \"output_length\": 1, \"hash_ids\": "
        "[1,2,3,4]}\n"
        "{\"timestamp\": 200, \"input_length\": 12, \"output_length\": 1, \"hash_ids\": "
        "[1,2,5]}\n"
        "{\"timestamp\": 300, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": "
        "[9]}\n"
        "{\"timestamp\": 400, \"input_length\": 16, \"output_length\": 1, \"hash_ids\": "
        "[1,2,3,4]}\n";
    static const uint32_t rows[] = {0, 1, 1, 0, 0};
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 1);
    default_router(&rc);
    rc.affinity_blocks = 1;
    standin st = {rows, 5, 0, {0}, {0}, 0, 0};
    sim_policy policy;
    standin_policy(&st, &policy);
    sim_result r = run_trace(trace, &c, &rc, &policy, NULL);
    assert_float_equal(r.total.flicker_rate, 7.0 / 9.0, 1e-12);
    assert_float_equal(r.total.key_move_rate, 2.0 / 3.0, 1e-12);
}

/*
 * prefix_copies, the time average of (ranks holding a block) / (distinct
 * blocks) over the run while anything is cached. R0 and R1 (the same two
 * blocks) to ranks 0 and 1 at t=0: both are stored at P(8) = 16.62291446
 * (2 blocks, 4 copies: 2.0). R2 (block 9, osl 2) to rank 0 at t=100 ms: its
 * first token at 100 + P(4) = 116.5621605 stores block 9 (3 blocks, 5
 * copies: 5/3) and its last comes D(5/400) = 6.41110313 later.
 *   (2 x 99.93924604 + 5/3 x 6.41110313) / 106.35034917 = 1.97990571
 */
static void test_prefix_copies_time_average(void **state)
{
    (void)state;
    static const char *const trace =
        "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": "
        "[1,2]}\n"
        "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": "
        "[1,2]}\n"
        "{\"timestamp\": 100, \"input_length\": 4, \"output_length\": 2, \"hash_ids\": "
        "[9]}\n";
    static const uint32_t rows[] = {0, 1, 0};
    sim_cluster c;
    sim_router_config rc;
    tiny_cluster(&c, 2, 1);
    default_router(&rc);
    standin st = {rows, 3, 0, {0}, {0}, 0, 0};
    sim_policy policy;
    standin_policy(&st, &policy);
    sim_result r = run_trace(trace, &c, &rc, &policy, NULL);
    assert_float_equal(r.total.prefix_copies, 1.9799057136, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_is_admitted_in_one_step),
        cmocka_unit_test(test_independent_ranks_step_on_their_own),
        cmocka_unit_test(test_speedup_divides_time_from_the_first_request),
        cmocka_unit_test(test_jitter_keeps_bursts_together),
        cmocka_unit_test(test_busy_flags_follow_dynamo_prefill_threshold),
        cmocka_unit_test(test_busy_flags_follow_dynamo_decode_threshold),
        cmocka_unit_test(test_flicker_weighs_blocks_moved_away_from_their_owner),
        cmocka_unit_test(test_prefix_copies_time_average),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
