// SPDX-License-Identifier: Apache-2.0
/*
 * test_model_greedy.c -- the evaluation's diagnostic router
 * (sim/model_greedy/): it picks the row whose first token the simulator's
 * lockstep engine model predicts earliest. Exact answers on hand-made
 * tables, each chosen where Dynamo's cost would answer otherwise:
 *   - a short request avoids an idle rank whose sibling prefills a long
 *     prompt (every lockstep step lasts as long as that sibling's chunk);
 *   - a long request rides along beside that sibling (its own chunks are
 *     as long), instead of queueing behind a short backlog;
 *   - a rank whose KV blocks are full is passed over;
 *   - busy rows serve only when all are busy; excluded ones never.
 * Block size 64, token budget 8,192 (the defaults of wsel sim).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"
#include "wsel.h"

#define BLOCK 64u

/* A request of `tokens` uncached tokens (no overlap anywhere). */
static void request(wsel_request *req, wsel_rng *rng, uint64_t id, uint32_t tokens)
{
    harness_request(req, rng, 5, id, 0, NULL, 0);
    req->isl_tokens = tokens;
    req->block_size = BLOCK;
}

/* Two workers of two ranks: worker 0's rank 0 idle beside a sibling with
 * 16,384 tokens queued (two full steps); both ranks of worker 1 with 1,000
 * tokens queued. Loads as the host writes them for this request (its own
 * tokens and blocks counted on every row), costs Dynamo's. */
static harness_table *two_workers(uint32_t tokens)
{
    harness_table *t = harness_table_uniform(2, 2);
    const uint64_t queued[4] = {0, 16384, 1000, 1000};
    for (uint32_t i = 0; i < 4; i++) {
        t->prefill_tokens[i] = queued[i] + tokens;
        t->decode_blocks[i] = tokens / BLOCK;
        t->kv_capacity_blocks[i] = 16384;
    }
    harness_table_default_costs(t, 1.0, BLOCK);
    return t;
}

static void *make(void)
{
    return harness_create(NULL, NULL, 0);
}

/* 1,000 tokens: worker 0's rank 0 costs least by Dynamo's formula (no
 * backlog of its own), but its step lasts as long as the sibling's
 * 8,192-token chunk (169 ms); on worker 1 the request's rank prefills 2,000
 * tokens beside its sibling's 1,000 (49 ms). Rows 2 and 3 predict and cost
 * the same: the first wins. */
static void test_short_request_avoids_long_sibling(void **state)
{
    (void)state;
    harness_table *t = two_workers(1000);
    void *m = make();
    wsel_request req;
    wsel_rng rng;
    request(&req, &rng, 1, 1000);
    assert_true(t->cost[0] < t->cost[2]);
    assert_int_equal(harness_select(m, &req, t), 2);
    wsel_plugin_entry.destroy(m);
    harness_table_free(t);
}

/* 20,000 tokens: beside the long sibling it takes two full steps the
 * sibling's chunks take anyway, then 3,616 tokens alone; on worker 1 it
 * first prefills the 1,000 queued: 8,192 + 8,192 + 4,616. */
static void test_long_request_rides_along(void **state)
{
    (void)state;
    harness_table *t = two_workers(20000);
    void *m = make();
    wsel_request req;
    wsel_rng rng;
    request(&req, &rng, 2, 20000);
    assert_int_equal(harness_select(m, &req, t), 0);
    wsel_plugin_entry.destroy(m);
    harness_table_free(t);
}

/* Four one-rank workers with one request each. Row 0 costs least by
 * Dynamo's formula but has a 16-block KV capacity and 10 blocks active:
 * the request's 10 do not fit. Of the others, the decode pass grows with
 * KV use, so row 1 (100 of 1,024 blocks active) predicts earliest. */
static void test_full_rank_passed_over(void **state)
{
    (void)state;
    harness_table *t = harness_table_uniform(4, 1);
    for (uint32_t i = 0; i < 4; i++) {
        t->prefill_tokens[i] = 640;
        t->decode_blocks[i] = 10 + 100 * i;
        t->kv_capacity_blocks[i] = 1024;
        t->active_requests[i] = 1;
    }
    t->decode_blocks[0] = 20;
    t->kv_capacity_blocks[0] = 16;
    harness_table_default_costs(t, 1.0, BLOCK);
    void *m = make();
    wsel_request req;
    wsel_rng rng;
    request(&req, &rng, 3, 640);
    assert_true(t->cost[0] < t->cost[1]);
    assert_int_equal(harness_select(m, &req, t), 1);
    wsel_plugin_entry.destroy(m);
    harness_table_free(t);
}

static void test_busy_and_excluded(void **state)
{
    (void)state;
    harness_table *t = harness_table_uniform(3, 1);
    for (uint32_t i = 0; i < 3; i++) {
        t->prefill_tokens[i] = 640 + 8192 * i;
        t->decode_blocks[i] = 10;
    }
    harness_table_default_costs(t, 1.0, BLOCK);
    t->flags[0] = WSEL_ROW_EXCLUDED;
    t->flags[1] = WSEL_ROW_BUSY;
    void *m = make();
    wsel_request req;
    wsel_rng rng;
    request(&req, &rng, 4, 640);
    assert_int_equal(harness_select(m, &req, t), 2);
    t->flags[2] = WSEL_ROW_BUSY;
    assert_int_equal(harness_select(m, &req, t), 1);
    t->flags[1] = t->flags[2] = WSEL_ROW_EXCLUDED;
    harness_expect_refusal(m, &req, t, WSEL_ENOCANDIDATE);
    wsel_plugin_entry.destroy(m);
    harness_table_free(t);
    harness_expect_all_excluded_refused(5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_request_avoids_long_sibling),
        cmocka_unit_test(test_long_request_rides_along),
        cmocka_unit_test(test_full_rank_passed_over),
        cmocka_unit_test(test_busy_and_excluded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
