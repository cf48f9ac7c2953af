// SPDX-License-Identifier: Apache-2.0
/*
 * test_table.c -- wsel_table_build (Dynamo's formulas, NO_LOAD defaults,
 * clamps, group view, refusals) and the full table / request validators,
 * every failure named.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "testutil.h"

static wsel_request make_request(uint32_t isl, uint32_t block_size, double weight)
{
    static wsel_rng rng;
    wsel_request r;
    memset(&r, 0, sizeof(r));
    r.struct_size = sizeof(r);
    r.isl_tokens = isl;
    r.block_size = block_size;
    r.overlap_score_weight = weight;
    r.rng = &rng;
    return r;
}

static wsel_rank_state rank(uint64_t worker, uint32_t dp, uint32_t overlap,
                            uint64_t prefill, uint64_t blocks, uint8_t flags)
{
    wsel_rank_state s;
    memset(&s, 0, sizeof(s));
    s.worker_id = worker;
    s.dp_rank = dp;
    s.overlap_blocks = overlap;
    s.active_prefill_tokens = prefill;
    s.active_blocks = blocks;
    s.kv_capacity_blocks = 1000 + worker;
    s.active_requests = (uint32_t)(3 * worker + dp);
    s.flags = flags;
    return s;
}

static void test_build_applies_dynamo_formulas(void **state)
{
    (void)state;
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 4), 0);
    /* isl 100 tokens, block 16: 6 whole blocks. */
    wsel_request req = make_request(100, 16, 1.0);
    wsel_rank_state ranks[] = {rank(5, 0, 2, 10, 5, 0)};
    assert_int_equal(wsel_table_build(&buf, &req, ranks, 1, 9, NULL, 0), 0);
    const wsel_table *t = &buf.table;
    /* prefill = (100 - 2*16) + 10 = 78; decode = 5 + (6 - 2) = 9;
     * cost = 1.0 * 78 / 16 + 9 = 13.875 (exact in binary). */
    assert_int_equal(t->prefill_tokens[0], 78);
    assert_int_equal(t->decode_blocks[0], 9);
    assert_true(t->cost[0] == 13.875);
    assert_int_equal(t->num_rows, 1);
    assert_int_equal(t->topology_epoch, 9);
    assert_int_equal(t->struct_size, sizeof(wsel_table));
    assert_int_equal(t->worker_id[0], 5);
    assert_int_equal(t->kv_capacity_blocks[0], 1005);
    assert_int_equal(t->active_requests[0], 15);
    wsel_table_buf_free(&buf);
}

static void test_build_scales_prefill_by_overlap_weight(void **state)
{
    (void)state;
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 1), 0);
    wsel_request req = make_request(64, 16, 2.0);
    wsel_rank_state ranks[] = {rank(0, 0, 1, 0, 0, 0)};
    assert_int_equal(wsel_table_build(&buf, &req, ranks, 1, 0, NULL, 0), 0);
    /* prefill 48, decode 3: cost = 2 * 48 / 16 + 3 = 9. */
    assert_true(buf.table.cost[0] == 9.0);
    wsel_table_buf_free(&buf);
}

static void test_build_uses_dynamo_defaults_for_ranks_without_load(void **state)
{
    (void)state;
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 2), 0);
    wsel_request req = make_request(100, 16, 1.0);
    /* Overlap and loads are ignored for a NO_LOAD rank. */
    wsel_rank_state ranks[] = {rank(0, 0, 3, 500, 70, WSEL_ROW_NO_LOAD),
                               rank(0, 1, 3, 500, 70, 0)};
    assert_int_equal(wsel_table_build(&buf, &req, ranks, 2, 0, NULL, 0), 0);
    const wsel_table *t = &buf.table;
    assert_int_equal(t->prefill_tokens[0], 100);
    assert_int_equal(t->decode_blocks[0], 6);
    assert_true(t->cost[0] == 100.0 / 16.0 + 6.0);
    assert_int_equal(t->flags[0], WSEL_ROW_NO_LOAD);
    assert_int_equal(t->prefill_tokens[1], 52 + 500);
    assert_int_equal(t->decode_blocks[1], 73);
    wsel_table_buf_free(&buf);
}

static void test_build_clamps_overlap_longer_than_the_request(void **state)
{
    (void)state;
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 1), 0);
    wsel_request req = make_request(100, 16, 1.0);
    wsel_rank_state ranks[] = {rank(0, 0, 10, 7, 4, 0)};
    assert_int_equal(wsel_table_build(&buf, &req, ranks, 1, 0, NULL, 0), 0);
    assert_int_equal(buf.table.prefill_tokens[0], 7);
    assert_int_equal(buf.table.decode_blocks[0], 4);
    assert_true(buf.table.cost[0] == 7.0 / 16.0 + 4.0);
    wsel_table_buf_free(&buf);
}

static void test_build_saturates_overflowing_costs_at_dbl_max(void **state)
{
    (void)state;
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 2), 0);
    wsel_request req = make_request(64, 1, 1e300);
    wsel_rank_state ranks[] = {rank(0, 0, 0, UINT64_MAX / 2, 0, 0),
                               rank(0, 1, 64, 0, 0, 0)};
    assert_int_equal(wsel_table_build(&buf, &req, ranks, 2, 0, NULL, 0), 0);
    assert_true(buf.table.cost[0] == DBL_MAX);
    assert_true(buf.table.cost[1] == 0.0);
    assert_int_equal(wsel_table_validate(&buf.table, NULL, 0), 0);
    wsel_table_buf_free(&buf);
}

static void test_build_fills_group_view(void **state)
{
    (void)state;
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 8), 0);
    wsel_request req = make_request(32, 16, 1.0);
    wsel_rank_state ranks[] = {rank(1, 0, 0, 0, 0, 0),
                               rank(1, 1, 0, 0, 0, 0),
                               rank(4, 0, 0, 0, 0, WSEL_ROW_BUSY),
                               rank(7, 0, 0, 0, 0, 0),
                               rank(7, 2, 0, 0, 0, 0),
                               rank(7, 5, 0, 0, 0, WSEL_ROW_EXCLUDED)};
    assert_int_equal(wsel_table_build(&buf, &req, ranks, 6, 0, NULL, 0), 0);
    const wsel_table *t = &buf.table;
    assert_int_equal(t->num_groups, 3);
    const uint32_t first[] = {0, 2, 3}, count[] = {2, 1, 3};
    for (int g = 0; g < 3; g++) {
        assert_int_equal(t->group_first_row[g], first[g]);
        assert_int_equal(t->group_row_count[g], count[g]);
    }
    assert_int_equal(t->flags[2], WSEL_ROW_BUSY);
    assert_int_equal(t->dp_rank[5], 5);
    assert_int_equal(wsel_table_validate(t, NULL, 0), 0);
    wsel_table_buf_free(&buf);
}

/* A refused build leaves the previous table untouched. */
static void expect_build_refusal(const wsel_rank_state *ranks, uint32_t n, uint32_t cap,
                                 wsel_request req, int32_t code, const char *message)
{
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, cap), 0);
    wsel_table before = buf.table;
    char err[512] = "";
    assert_int_equal(wsel_table_build(&buf, &req, ranks, n, 0, err, sizeof(err)), code);
    if (strstr(err, message) == NULL)
        fail_msg("got \"%s\", want \"%s\"", err, message);
    assert_memory_equal(&before, &buf.table, sizeof(before));
    wsel_table_buf_free(&buf);
}

static void test_build_refuses_ranks_out_of_order(void **state)
{
    (void)state;
    wsel_rank_state ranks[] = {rank(0, 0, 0, 0, 0, 0), rank(1, 1, 0, 0, 0, 0),
                               rank(1, 0, 0, 0, 0, 0)};
    expect_build_refusal(ranks, 3, 3, make_request(16, 16, 1.0), WSEL_ETABLE,
                         "ranks[2]: (worker 1, dp_rank 0) does not follow (worker 1, "
                         "dp_rank 1)");
    wsel_rank_state workers[] = {rank(2, 0, 0, 0, 0, 0), rank(1, 0, 0, 0, 0, 0)};
    expect_build_refusal(workers, 2, 2, make_request(16, 16, 1.0), WSEL_ETABLE,
                         "ranks[1]: (worker 1, dp_rank 0) does not follow (worker 2");
}

static void test_build_refuses_repeated_rank(void **state)
{
    (void)state;
    wsel_rank_state ranks[] = {rank(3, 1, 0, 0, 0, 0), rank(3, 1, 0, 0, 0, 0)};
    expect_build_refusal(ranks, 2, 2, make_request(16, 16, 1.0), WSEL_ETABLE,
                         "without repeats");
}

static void test_build_refuses_unknown_flag_bits(void **state)
{
    (void)state;
    wsel_rank_state ranks[] = {rank(0, 0, 0, 0, 0, 0x40)};
    expect_build_refusal(ranks, 1, 1, make_request(16, 16, 1.0), WSEL_ETABLE,
                         "ranks[0].flags: unknown bits 0x40");
}

static void test_build_refuses_more_ranks_than_capacity(void **state)
{
    (void)state;
    wsel_rank_state ranks[] = {rank(0, 0, 0, 0, 0, 0), rank(1, 0, 0, 0, 0, 0)};
    expect_build_refusal(ranks, 2, 1, make_request(16, 16, 1.0), WSEL_ERANGE,
                         "2 ranks, buffer holds 1");
}

static void test_build_refuses_bad_request_and_empty_input(void **state)
{
    (void)state;
    wsel_rank_state ranks[] = {rank(0, 0, 0, 0, 0, 0)};
    expect_build_refusal(ranks, 1, 1, make_request(16, 0, 1.0), WSEL_EINVAL,
                         "block_size is 0");
    expect_build_refusal(ranks, 1, 1, make_request(16, 16, -1.0), WSEL_EINVAL,
                         "overlap_score_weight is negative or not finite");
    expect_build_refusal(ranks, 1, 1, make_request(16, 16, NAN), WSEL_EINVAL,
                         "overlap_score_weight");
    expect_build_refusal(ranks, 0, 1, make_request(16, 16, 1.0), WSEL_EINVAL, "no ranks");
}

static void test_buffer_init_and_free_edge_cases(void **state)
{
    (void)state;
    wsel_table_buf buf;
    memset(&buf, 0, sizeof(buf));
    assert_int_equal(wsel_table_buf_init(&buf, 0), WSEL_EINVAL);
    assert_int_equal(wsel_table_buf_init(NULL, 4), WSEL_EINVAL);
    wsel_table_buf_free(&buf); /* zeroed: no-op */
    assert_int_equal(wsel_table_buf_init(&buf, 4), 0);
    wsel_table_buf_free(&buf);
    wsel_table_buf_free(&buf); /* already freed: no-op */
    wsel_table_buf_free(NULL);
}

/* ---- wsel_table_validate: a good table, then one defect at a time ---- */

typedef struct mutable_table {
    wsel_table t;
    uint64_t worker_id[4];
    uint32_t dp_rank[4];
    double cost[4];
    uint8_t flags[4];
    uint32_t group_first_row[2];
    uint32_t group_row_count[2];
    uint32_t zeros32[4];
    uint64_t zeros64[4];
} mutable_table;

/* Two workers (0: ranks 0,1; 1: ranks 0,1). */
static void good_table(mutable_table *m)
{
    memset(m, 0, sizeof(*m));
    const uint64_t w[4] = {0, 0, 1, 1};
    const uint32_t d[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        m->worker_id[i] = w[i];
        m->dp_rank[i] = d[i];
        m->cost[i] = i;
    }
    m->group_first_row[0] = 0;
    m->group_row_count[0] = 2;
    m->group_first_row[1] = 2;
    m->group_row_count[1] = 2;
    m->t.struct_size = sizeof(wsel_table);
    m->t.num_rows = 4;
    m->t.num_groups = 2;
    m->t.worker_id = m->worker_id;
    m->t.dp_rank = m->dp_rank;
    m->t.overlap_blocks = m->zeros32;
    m->t.prefill_tokens = m->zeros64;
    m->t.decode_blocks = m->zeros64;
    m->t.cost = m->cost;
    m->t.kv_capacity_blocks = m->zeros64;
    m->t.active_requests = m->zeros32;
    m->t.flags = m->flags;
    m->t.group_first_row = m->group_first_row;
    m->t.group_row_count = m->group_row_count;
}

static void expect_invalid(const mutable_table *m, const char *message)
{
    char err[512] = "";
    assert_int_equal(wsel_table_validate(&m->t, err, sizeof(err)), WSEL_ETABLE);
    if (strstr(err, message) == NULL)
        fail_msg("got \"%s\", want \"%s\"", err, message);
}

static void test_validate_accepts_good_table(void **state)
{
    (void)state;
    mutable_table m;
    good_table(&m);
    assert_int_equal(wsel_table_validate(&m.t, NULL, 0), 0);
}

static void test_validate_names_each_defect(void **state)
{
    (void)state;
    mutable_table m;
    assert_int_equal(wsel_table_validate(NULL, NULL, 0), WSEL_ETABLE);

    good_table(&m);
    m.t.struct_size = 64;
    expect_invalid(&m, "table: struct_size 64, ABI 1.0 needs at least 112");
    good_table(&m);
    m.t.reserved0 = 1;
    expect_invalid(&m, "table: reserved0 is 1, must be 0");
    good_table(&m);
    m.t.num_rows = 0;
    expect_invalid(&m, "table: num_rows is 0");
    good_table(&m);
    m.t.kv_capacity_blocks = NULL;
    expect_invalid(&m, "table: column kv_capacity_blocks is NULL");
    good_table(&m);
    m.cost[2] = INFINITY;
    expect_invalid(&m, "table: cost[2] is not finite");
    good_table(&m);
    m.cost[1] = NAN;
    expect_invalid(&m, "table: cost[1] is not finite");
    good_table(&m);
    m.flags[3] = 0x80;
    expect_invalid(&m, "table: flags[3] has unknown bits 0x80");
    good_table(&m);
    m.dp_rank[1] = 0;
    expect_invalid(&m, "table: row 1 (worker_id 0, dp_rank 0) is out of canonical order "
                       "after row 0");
    good_table(&m);
    m.worker_id[2] = 0;
    m.worker_id[3] = 0;
    m.dp_rank[2] = 2;
    m.dp_rank[3] = 3;
    expect_invalid(&m, "table: worker_id 0 is split across groups 0 and 1");
    good_table(&m);
    m.t.num_groups = 0;
    expect_invalid(&m, "table: num_groups 0 is not in [1, num_rows 4]");
    good_table(&m);
    m.group_first_row[1] = 1;
    expect_invalid(&m, "table: group_first_row[1] is 1, expected 2");
    good_table(&m);
    m.group_row_count[0] = 0;
    expect_invalid(&m, "table: group_row_count[0] is 0, must be in [1, 4]");
    good_table(&m);
    m.t.num_groups = 1;
    m.group_row_count[0] = 4;
    expect_invalid(&m, "table: group 0 mixes workers (worker_id[0] 0, worker_id[2] 1)");
    good_table(&m);
    m.group_row_count[1] = 1;
    expect_invalid(&m, "table: groups cover 3 rows of 4");
}

/* ---- wsel_request_validate ---- */

static void expect_bad_request(const wsel_request *r, const char *message)
{
    char err[256] = "";
    assert_int_equal(wsel_request_validate(r, err, sizeof(err)), WSEL_EREQUEST);
    if (strstr(err, message) == NULL)
        fail_msg("got \"%s\", want \"%s\"", err, message);
}

static void test_request_validation_names_each_defect(void **state)
{
    (void)state;
    wsel_request r = make_request(64, 16, 1.0);
    r.request_id = 42;
    assert_int_equal(wsel_request_validate(&r, NULL, 0), 0);
    expect_bad_request(NULL, "request: is NULL");

    wsel_request b = r;
    b.struct_size = 40;
    expect_bad_request(&b, "request 42: struct_size is smaller than ABI 1.0's");
    b = r;
    b.block_size = 0;
    expect_bad_request(&b, "request 42: block_size is 0");
    b = r;
    b.num_block_hashes = 3;
    expect_bad_request(&b, "block_hashes is NULL but num_block_hashes > 0");
    b = r;
    b.overlap_score_weight = INFINITY;
    expect_bad_request(&b, "overlap_score_weight is negative or not finite");
    b = r;
    b.temperature = -0.5;
    expect_bad_request(&b, "temperature is negative or not finite");
    b = r;
    b.uniform = 1.0;
    expect_bad_request(&b, "uniform is not in [0, 1)");
    b = r;
    b.uniform = NAN;
    expect_bad_request(&b, "uniform is not in [0, 1)");
    b = r;
    b.rng = NULL;
    expect_bad_request(&b, "rng is NULL");
}

#define T(name) cmocka_unit_test(name)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_build_applies_dynamo_formulas),
        T(test_build_scales_prefill_by_overlap_weight),
        T(test_build_uses_dynamo_defaults_for_ranks_without_load),
        T(test_build_clamps_overlap_longer_than_the_request),
        T(test_build_saturates_overflowing_costs_at_dbl_max),
        T(test_build_fills_group_view),
        T(test_build_refuses_ranks_out_of_order),
        T(test_build_refuses_repeated_rank),
        T(test_build_refuses_unknown_flag_bits),
        T(test_build_refuses_more_ranks_than_capacity),
        T(test_build_refuses_bad_request_and_empty_input),
        T(test_buffer_init_and_free_edge_cases),
        T(test_validate_accepts_good_table),
        T(test_validate_names_each_defect),
        T(test_request_validation_names_each_defect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
