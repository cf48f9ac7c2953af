// SPDX-License-Identifier: Apache-2.0
/*
 * test_replicas.c -- router replicas (sim/replicas.c): one replica is the
 * one router of before; replicas synced with no lag hand every policy the
 * table one router would; unsynced replicas (at light load) and lagged
 * ones herd more than synced ones on bursts; a lag longer than the run is
 * no sync at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "report.h"
#include "sim_fixture.h"
#include "source.h"

#define MAX_CALLS 4096

/* The stand-in policy, recording a hash of the loads of the table it was
 * given for each request (by request id). */
typedef struct recorder {
    standin st;
    sim_policy inner;
    uint64_t *table_hash; /* [request id], shared by the replicas of a run */
} recorder;

static uint64_t hash_loads(const wsel_rank_state *ranks, uint32_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v[3] = {ranks[i].active_prefill_tokens, ranks[i].active_blocks,
                         ranks[i].active_requests};
        for (int k = 0; k < 3; k++)
            h = (h ^ v[k]) * 1099511628211ull;
    }
    return h;
}

static int32_t rec_select(void *ctx, wsel_request *request, const wsel_rank_state *ranks,
                          uint32_t num_ranks, uint32_t *row, uint64_t *select_ns)
{
    recorder *r = ctx;
    if (request->request_id < MAX_CALLS)
        r->table_hash[request->request_id] = hash_loads(ranks, num_ranks);
    return r->inner.select(r->inner.ctx, request, ranks, num_ranks, row, select_ns);
}

static void rec_finished(void *ctx, uint64_t id, uint64_t worker, uint32_t rank)
{
    recorder *r = ctx;
    r->inner.finished(r->inner.ctx, id, worker, rank);
}

/* What one run gives: its JSON report and, per request id, the hash of
 * the loads its policy saw. */
typedef struct outcome {
    char *json;
    sim_metrics total;
    uint64_t table_hash[MAX_CALLS];
    uint32_t calls[SIM_MAX_REPLICAS]; /* selects per replica */
} outcome;

/* The conversation workload (bursts of about 8 simultaneous requests, 5
 * requests/s) on 2 workers of dp 4, through `rc->replicas` stand-in
 * policies. */
static void run(const sim_router_config *rc, outcome *out)
{
    sim_cluster c;
    sim_cluster_default(&c);
    c.num_workers = 2;
    c.dp[0] = c.dp[1] = 4;
    c.kv_blocks = 4096;
    sim_workload_config w;
    sim_workload_default(&w, SIM_WORKLOAD_CONVERSATION);
    w.requests = 600;
    w.rate = 5;
    w.seed = 3;
    char err[512];
    sim_source *src;
    assert_int_equal(sim_source_open_workload(&src, &w, c.block_size, err, sizeof(err)),
                     0);
    uint32_t n = rc->replicas > 1 ? rc->replicas : 1;
    static recorder recs[SIM_MAX_REPLICAS];
    sim_policy policies[SIM_MAX_REPLICAS];
    memset(out, 0, sizeof(*out));
    for (uint32_t k = 0; k < n; k++) {
        memset(&recs[k], 0, sizeof(recs[k]));
        standin_policy(&recs[k].st, &recs[k].inner);
        recs[k].table_hash = out->table_hash;
        policies[k] =
            (sim_policy){.ctx = &recs[k], .select = rec_select, .finished = rec_finished};
    }
    sim_run_args args = {.cluster = &c,
                         .router = rc,
                         .source = &sim_source_ops_default,
                         .source_ctx = src,
                         .policy = policies,
                         .first_label = "standin"};
    sim_report_row row;
    memset(&row, 0, sizeof(row));
    row.plugin = "standin";
    if (sim_run(&args, &row.result, err, sizeof(err)) != 0)
        fail_msg("sim_run: %s", err);
    sim_source_close(src);
    assert_int_equal(row.result.total.requests, 600);
    assert_int_equal(row.result.total.lost_requests, 0);
    for (uint32_t k = 0; k < n; k++) {
        out->calls[k] = recs[k].st.calls;
        assert_int_equal(recs[k].st.finished, recs[k].st.calls);
    }
    out->total = row.result.total;
    size_t len = 0;
    FILE *f = open_memstream(&out->json, &len);
    assert_non_null(f);
    sim_report_input in = {NULL, "conversation", 512, 3, 0, w.rate};
    sim_report_json(f, &in, &c, rc, &row, 1, 1);
    fclose(f);
}

static sim_router_config router(uint32_t replicas, uint32_t sync, double lag_ms)
{
    sim_router_config rc = {.overlap_weight = 1.0,
                            .kv_event_delay_ns = 1000000,
                            .affinity_blocks = 4,
                            .replicas = replicas,
                            .sync = sync,
                            .sync_lag_ns = (uint64_t)(lag_ms * 1e6),
                            .spread_seed = 3};
    return rc;
}

static void test_one_replica_is_the_router_without_replicas(void **state)
{
    (void)state;
    static outcome none, one, one_random;
    sim_router_config rc0 = router(0, SIM_SYNC_LAG, 0);
    sim_router_config rc1 = router(1, SIM_SYNC_NONE, 0);
    sim_router_config rc2 = router(1, SIM_SYNC_LAG, 50);
    rc2.spread = SIM_SPREAD_RANDOM;
    run(&rc0, &none);
    run(&rc1, &one);
    run(&rc2, &one_random);
    assert_string_equal(none.json, one.json);
    assert_string_equal(none.json, one_random.json);
    free(none.json);
    free(one.json);
    free(one_random.json);
}

/* Invariant: with --sync lag and a lag of 0, every replica's view of every
 * rank at every routing instant is the one router's (the sum of what all
 * replicas booked), so a policy whose answer depends only on the request
 * and the table (the stand-in: lowest cost, ties to the lowest row) is
 * handed, request by request, the very table of R = 1 and routes alike:
 * every figure equals R = 1's. */
static void test_zero_lag_replicas_see_the_one_router_view(void **state)
{
    (void)state;
    static outcome one, three;
    sim_router_config rc1 = router(1, SIM_SYNC_LAG, 0);
    sim_router_config rc3 = router(3, SIM_SYNC_LAG, 0);
    run(&rc1, &one);
    run(&rc3, &three);
    for (uint32_t id = 0; id < 600; id++)
        if (one.table_hash[id] != three.table_hash[id])
            fail_msg("request %u saw another table with 3 replicas", id);
    /* Round-robin: 200 requests each. */
    for (uint32_t k = 0; k < 3; k++)
        assert_int_equal(three.calls[k], 200);
    assert_memory_equal(&one.total, &three.total, sizeof(one.total));
    free(one.json);
    free(three.json);
}

/* At this light load (5 requests/s) every replica's own view is nearly
 * empty when a burst comes: unsynced replicas agree on the least loaded
 * rank and herd (1.86 against 1.39 synced with no lag, seed 3). */
static void test_unsynced_replicas_herd_more_than_synced(void **state)
{
    (void)state;
    static outcome synced, unsynced;
    sim_router_config rcs = router(3, SIM_SYNC_LAG, 0);
    sim_router_config rcu = router(3, SIM_SYNC_NONE, 0);
    run(&rcs, &synced);
    run(&rcu, &unsynced);
    if (!(unsynced.total.herding_index > synced.total.herding_index + 0.2))
        fail_msg("herding index unsynced %.3f, synced %.3f", unsynced.total.herding_index,
                 synced.total.herding_index);
    assert_true(synced.total.herding_index >= 1.0);
    free(synced.json);
    free(unsynced.json);
}

/* Replicas synced 10 ms late decide a burst on one stale picture, all
 * alike: they herd more than replicas synced at once (1.96 against 1.39). */
static void test_lagged_replicas_herd_more_than_synced(void **state)
{
    (void)state;
    static outcome synced, lagged;
    sim_router_config rcs = router(3, SIM_SYNC_LAG, 0);
    sim_router_config rcl = router(3, SIM_SYNC_LAG, 10);
    run(&rcs, &synced);
    run(&rcl, &lagged);
    if (!(lagged.total.herding_index > synced.total.herding_index + 0.2))
        fail_msg("herding index lagged %.3f, synced %.3f", lagged.total.herding_index,
                 synced.total.herding_index);
    free(synced.json);
    free(lagged.json);
}

/* A lag longer than the whole run delivers no delta before the last
 * arrival: the routing is --sync none's. */
static void test_a_lag_past_the_run_is_no_sync(void **state)
{
    (void)state;
    static outcome lagged, unsynced;
    sim_router_config rcl = router(3, SIM_SYNC_LAG, 1e9);
    sim_router_config rcu = router(3, SIM_SYNC_NONE, 0);
    run(&rcl, &lagged);
    run(&rcu, &unsynced);
    for (uint32_t id = 0; id < 600; id++)
        if (lagged.table_hash[id] != unsynced.table_hash[id])
            fail_msg("request %u saw another table", id);
    assert_memory_equal(&lagged.total, &unsynced.total, sizeof(lagged.total));
    free(lagged.json);
    free(unsynced.json);
}

/* Random spread: seeded, so the same seed splits alike; every replica
 * gets some of the arrivals. */
static void test_random_spread_is_seeded(void **state)
{
    (void)state;
    static outcome a, b;
    sim_router_config rc = router(3, SIM_SYNC_NONE, 0);
    rc.spread = SIM_SPREAD_RANDOM;
    run(&rc, &a);
    run(&rc, &b);
    assert_string_equal(a.json, b.json);
    assert_memory_equal(a.calls, b.calls, sizeof(a.calls));
    for (uint32_t k = 0; k < 3; k++)
        assert_true(a.calls[k] > 100 && a.calls[k] < 300);
    assert_non_null(strstr(a.json, "\"replicas\":3,\"replica_spread\":\"random\","
                                   "\"sync\":\"none\"}"));
    free(a.json);
    free(b.json);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_replica_is_the_router_without_replicas),
        cmocka_unit_test(test_zero_lag_replicas_see_the_one_router_view),
        cmocka_unit_test(test_unsynced_replicas_herd_more_than_synced),
        cmocka_unit_test(test_lagged_replicas_herd_more_than_synced),
        cmocka_unit_test(test_a_lag_past_the_run_is_no_sync),
        cmocka_unit_test(test_random_spread_is_seeded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
