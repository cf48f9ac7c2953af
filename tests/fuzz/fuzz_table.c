// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_table.c -- candidate tables: validation, building, and the built-in
 * fallback policy.
 *
 * The first byte chooses the path:
 *   even: a raw wsel_table decoded from the input (mostly canonical, with
 *         corruptions chosen by a mode byte: order, group view, flags,
 *         costs, struct_size, reserved field, a NULL column), checked by
 *         wsel_table_validate;
 *   odd:  rank states and a request decoded from the input, turned into a
 *         table by wsel_table_build, whose output must then validate.
 * Every table that validates is routed through a host with no policy
 * loaded (the built-in fallback). Properties checked, abort() on breach:
 *   - validate and build refuse with a NUL-terminated message;
 *   - a table validate accepts is valid by an independent oracle
 *     (table_oracle.h): plugins index columns and groups on that promise;
 *   - a built table (from a valid request) always validates;
 *   - select answers WSEL_ANSWER_FALLBACK with a row in range, not
 *     excluded, of minimum cost when no row is busy; or, when every row is
 *     excluded, WSEL_ENOCANDIDATE with the choice untouched.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_reader.h"
#include "table_oracle.h"
#include "wsel_host.h"

#define MAX_ROWS 32

static wsel_host *fuzz_host;

static void breach(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_table: %s (%s)\n", what, detail ? detail : "");
    abort();
}

static void quiet_log(void *user, int32_t level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    wsel_host_options opts;

    (void)argc;
    (void)argv;
    wsel_host_options_default(&opts);
    opts.seed = 7;
    opts.log = quiet_log;
    if (wsel_host_create(&opts, &fuzz_host) != 0)
        breach("cannot create a host", NULL);
    return 0;
}

/* Column storage for a raw table. */
typedef struct raw_table {
    uint64_t worker_id[MAX_ROWS];
    uint32_t dp_rank[MAX_ROWS];
    uint32_t overlap_blocks[MAX_ROWS];
    uint64_t prefill_tokens[MAX_ROWS];
    uint64_t decode_blocks[MAX_ROWS];
    double cost[MAX_ROWS];
    uint64_t kv_capacity_blocks[MAX_ROWS];
    uint32_t active_requests[MAX_ROWS];
    uint8_t flags[MAX_ROWS];
    uint32_t group_first_row[MAX_ROWS];
    uint32_t group_row_count[MAX_ROWS];
} raw_table;

/* Mode bits for raw tables. */
#define RAW_ANY_ORDER   0x01u
#define RAW_ANY_COST    0x02u
#define RAW_ANY_FLAGS   0x04u
#define RAW_ANY_GROUPS  0x08u
#define RAW_ANY_SIZE    0x10u
#define RAW_RESERVED    0x20u
#define RAW_NULL_COLUMN 0x40u

static void decode_rows(fuzz_reader *r, uint8_t mode, uint32_t n, raw_table *c)
{
    uint64_t worker = fuzz_u8(r) % 4;
    uint32_t rank = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint8_t step = fuzz_u8(r);
        if (mode & RAW_ANY_ORDER) {
            c->worker_id[i] = step % 8;
            c->dp_rank[i] = fuzz_u8(r) % 4;
        } else {
            if (i > 0 && (step & 1)) {
                worker += 1 + (step >> 1) % 4;
                rank = 0;
            } else if (i > 0) {
                rank++;
            }
            c->worker_id[i] = worker;
            c->dp_rank[i] = rank;
        }
        c->overlap_blocks[i] = fuzz_u8(r);
        c->prefill_tokens[i] = fuzz_u32(r);
        c->decode_blocks[i] = fuzz_u32(r) % 100000;
        c->cost[i] = (mode & RAW_ANY_COST) ? fuzz_double(r) : (double)(fuzz_u8(r) % 16);
        c->kv_capacity_blocks[i] = fuzz_u32(r);
        c->active_requests[i] = fuzz_u8(r);
        c->flags[i] = (mode & RAW_ANY_FLAGS) ? fuzz_u8(r) : (uint8_t)(fuzz_u8(r) % 8);
    }
}

/* The group view that matches the rows (what a correct router writes). */
static uint32_t derive_groups(uint32_t n, raw_table *c)
{
    uint32_t g = 0;

    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || c->worker_id[i] != c->worker_id[i - 1]) {
            c->group_first_row[g] = i;
            c->group_row_count[g] = 0;
            g++;
        }
        c->group_row_count[g - 1]++;
    }
    return g;
}

static void decode_raw_table(fuzz_reader *r, wsel_table *t, raw_table *c)
{
    uint8_t mode = fuzz_u8(r);
    uint32_t n = 1 + fuzz_u8(r) % MAX_ROWS;

    memset(t, 0, sizeof *t);
    decode_rows(r, mode, n, c);
    t->struct_size = (mode & RAW_ANY_SIZE) ? fuzz_u32(r) : (uint32_t)sizeof *t;
    t->num_rows = n;
    t->reserved0 = (mode & RAW_RESERVED) ? fuzz_u8(r) : 0;
    t->topology_epoch = fuzz_u64(r);
    if (mode & RAW_ANY_GROUPS) {
        t->num_groups = fuzz_u8(r) % (MAX_ROWS + 2);
        for (uint32_t g = 0; g < MAX_ROWS; g++) {
            c->group_first_row[g] = fuzz_u8(r) % (MAX_ROWS + 2);
            c->group_row_count[g] = fuzz_u8(r) % 5;
        }
    } else {
        t->num_groups = derive_groups(n, c);
    }
    t->worker_id = c->worker_id;
    t->dp_rank = c->dp_rank;
    t->overlap_blocks = c->overlap_blocks;
    t->prefill_tokens = c->prefill_tokens;
    t->decode_blocks = c->decode_blocks;
    t->cost = c->cost;
    t->kv_capacity_blocks = c->kv_capacity_blocks;
    t->active_requests = c->active_requests;
    t->flags = c->flags;
    t->group_first_row = c->group_first_row;
    t->group_row_count = c->group_row_count;
    if (mode & RAW_NULL_COLUMN) {
        const void **columns[] = {
            (const void **)&t->worker_id,
            (const void **)&t->dp_rank,
            (const void **)&t->overlap_blocks,
            (const void **)&t->prefill_tokens,
            (const void **)&t->decode_blocks,
            (const void **)&t->cost,
            (const void **)&t->kv_capacity_blocks,
            (const void **)&t->active_requests,
            (const void **)&t->flags,
            (const void **)&t->group_first_row,
            (const void **)&t->group_row_count,
        };
        *columns[fuzz_u8(r) % (sizeof columns / sizeof columns[0])] = NULL;
    }
}

static void decode_request(fuzz_reader *r, wsel_request *req, wsel_rng *rng)
{
    memset(req, 0, sizeof *req);
    req->request_id = fuzz_u64(r);
    req->isl_tokens = fuzz_u32(r) % (1u << 20);
    req->block_size = fuzz_u8(r);
    req->overlap_score_weight = fuzz_double(r);
    wsel_host_prepare_request(fuzz_host, req, rng);
}

/* Build a table from decoded rank states; 1 if it built. */
static int build_table(fuzz_reader *r, wsel_table_buf *buf, wsel_request *req,
                       wsel_rng *rng)
{
    wsel_rank_state ranks[MAX_ROWS + 4];
    uint8_t mode = fuzz_u8(r);
    uint32_t n = fuzz_u8(r) % (MAX_ROWS + 4);
    uint64_t worker = 0;
    uint32_t rank = 0;
    char err[256];
    int32_t rc;

    decode_request(r, req, rng);
    memset(ranks, 0, sizeof ranks);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t step = fuzz_u8(r);
        if (mode & 1) {
            ranks[i].worker_id = step % 8;
            ranks[i].dp_rank = fuzz_u8(r) % 4;
        } else {
            if (i > 0 && (step & 1)) {
                worker += 1 + (step >> 1) % 4;
                rank = 0;
            } else if (i > 0) {
                rank++;
            }
            ranks[i].worker_id = worker;
            ranks[i].dp_rank = rank;
        }
        ranks[i].overlap_blocks = fuzz_u8(r);
        ranks[i].active_prefill_tokens = (mode & 2) ? fuzz_u64(r) : fuzz_u32(r);
        ranks[i].active_blocks = (mode & 2) ? fuzz_u64(r) : fuzz_u32(r);
        ranks[i].kv_capacity_blocks = fuzz_u32(r);
        ranks[i].active_requests = fuzz_u8(r);
        ranks[i].flags = (mode & 4) ? fuzz_u8(r) : (uint8_t)(fuzz_u8(r) % 8);
    }
    memset(err, 0, sizeof err);
    rc = wsel_table_build(buf, req, ranks, n, fuzz_u64(r), err, sizeof err);
    if (rc > 0)
        breach("wsel_table_build returned a positive value", NULL);
    if (rc < 0 && memchr(err, '\0', sizeof err) == NULL)
        breach("wsel_table_build left an unterminated message", NULL);
    return rc == 0;
}

static void route_through_fallback(const wsel_table *t, const wsel_request *req)
{
    const char *fault = oracle_table_fault(t);
    wsel_choice choice;
    uint32_t eligible = 0, busy = 0;
    double min_cost = INFINITY;
    int32_t rc;

    if (fault)
        breach("a table that passed validation is invalid", fault);
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (t->flags[i] & WSEL_ROW_EXCLUDED)
            continue;
        eligible++;
        busy += (t->flags[i] & WSEL_ROW_BUSY) != 0;
        min_cost = t->cost[i] < min_cost ? t->cost[i] : min_cost;
    }
    memset(&choice, 0, sizeof choice);
    choice.struct_size = sizeof choice;
    choice.row = 0xdeadbeefu;
    rc = wsel_host_select(fuzz_host, req, t, &choice);
    if (eligible == 0) {
        if (rc != WSEL_ENOCANDIDATE || choice.row != 0xdeadbeefu)
            breach("a table with every row excluded was answered", NULL);
        return;
    }
    if (rc != WSEL_ANSWER_FALLBACK)
        breach("a host with no policy did not answer with the fallback",
               rc < 0 ? wsel_errname(rc) : "plugin");
    if (choice.row >= t->num_rows || (t->flags[choice.row] & WSEL_ROW_EXCLUDED))
        breach("the fallback answered an invalid row", NULL);
    if (busy == 0 && t->cost[choice.row] != min_cost)
        breach("the fallback did not answer a minimum-cost row", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_reader r;
    wsel_request req;
    wsel_rng rng;
    char err[256];

    fuzz_reader_init(&r, data, size);
    if ((fuzz_u8(&r) & 1) == 0) {
        raw_table columns;
        wsel_table t;
        int32_t rc;

        memset(&columns, 0, sizeof columns);
        decode_raw_table(&r, &t, &columns);
        memset(err, 0, sizeof err);
        rc = wsel_table_validate(&t, err, sizeof err);
        if (rc != 0) {
            if (rc != WSEL_ETABLE || err[0] == '\0' ||
                memchr(err, '\0', sizeof err) == NULL)
                breach("a refused table has no WSEL_ETABLE and message", err);
            return 0;
        }
        memset(&req, 0, sizeof req);
        req.request_id = fuzz_u64(&r);
        req.isl_tokens = 1024;
        req.block_size = 16;
        req.overlap_score_weight = 1.0;
        wsel_host_prepare_request(fuzz_host, &req, &rng);
        route_through_fallback(&t, &req);
    } else {
        wsel_table_buf buf;

        memset(&buf, 0, sizeof buf);
        if (wsel_table_buf_init(&buf, MAX_ROWS) != 0)
            breach("cannot allocate a table buffer", NULL);
        /* A zero-row table is the router's "no candidates" case, which
         * select is never given; every other built table must be usable. */
        if (build_table(&r, &buf, &req, &rng) && buf.table.num_rows > 0 &&
            wsel_request_validate(&req, NULL, 0) == 0) {
            memset(err, 0, sizeof err);
            if (wsel_table_validate(&buf.table, err, sizeof err) != 0)
                breach("a table built from a valid request does not validate", err);
            route_through_fallback(&buf.table, &req);
        }
        wsel_table_buf_free(&buf);
    }
    return 0;
}
