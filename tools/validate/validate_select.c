// SPDX-License-Identifier: Apache-2.0
/*
 * validate_select.c -- select on edge tables: one row, 4,096 rows, equal,
 * negative, huge and zero costs, mixed DP groups, no block hashes, busy
 * rows, one eligible row, no eligible row. Every answer must be a valid,
 * non-excluded row (and not busy while an idle row exists); a table with no
 * eligible row must get a negative error.
 */
#include "validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one edge case expects beyond "a valid row". */
typedef struct vexpect {
    uint32_t num_hashes; /* block hashes per request */
    int64_t only_row;    /* >= 0: the one acceptable answer */
    int avoid_busy;      /* answers must not be busy rows */
    int expect_error;    /* every row excluded: select must fail */
    int allow_error;     /* an error is acceptable, an invalid row is not */
} vexpect;

static const vexpect default_expect = {32, -1, 0, 0, 0};

static uint32_t count_idle(const wsel_table *t)
{
    uint32_t idle = 0;
    for (uint32_t i = 0; i < t->num_rows; i++)
        idle += (t->flags[i] & (WSEL_ROW_BUSY | WSEL_ROW_EXCLUDED)) == 0;
    return idle;
}

static int is_zero(const uint32_t *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (words[i] != 0)
            return 0;
    return 1;
}

/* Check one answer; returns 1 if acceptable. */
static int judge(const vexpect *ex, const wsel_table *t, const vrequest *vr, int32_t rc,
                 const wsel_choice *c, const char *what, vcheck_result *res)
{
    unsigned long long id = (unsigned long long)vr->req.request_id;
    double temp = vr->req.temperature;
    if (ex->expect_error) {
        if (rc >= 0)
            vfail(res,
                  "request %llu (T=%.1f) on %s: select returned %d (row %u); "
                  "expected a negative error",
                  id, temp, what, rc, c->row);
        return rc < 0;
    }
    if (rc < 0 && ex->allow_error)
        return 1;
    if (rc != 0) {
        vfail(res, "request %llu (T=%.1f) on %s: select returned %d (%s)", id, temp, what,
              rc, wsel_errname(rc));
        return 0;
    }
    if (!is_zero(c->reserved, sizeof(c->reserved) / sizeof(c->reserved[0]))) {
        vfail(res, "request %llu on %s: select wrote the reserved fields of the choice",
              id, what);
        return 0;
    }
    if (c->row >= t->num_rows) {
        vfail(res, "request %llu (T=%.1f) on %s: row %u is out of range (%u rows)", id,
              temp, what, c->row, t->num_rows);
        return 0;
    }
    if (t->flags[c->row] & WSEL_ROW_EXCLUDED) {
        vfail(res, "request %llu (T=%.1f) on %s: row %u is excluded", id, temp, what,
              c->row);
        return 0;
    }
    if (ex->only_row >= 0 && c->row != (uint32_t)ex->only_row) {
        vfail(res, "request %llu (T=%.1f) on %s: row %u, but only row %lld is eligible",
              id, temp, what, c->row, (long long)ex->only_row);
        return 0;
    }
    if (ex->avoid_busy && (t->flags[c->row] & WSEL_ROW_BUSY)) {
        vfail(res, "request %llu (T=%.1f) on %s: row %u is busy while %u rows are idle",
              id, temp, what, c->row, count_idle(t));
        return 0;
    }
    return 1;
}

/* FNV-1a over `n` bytes, continuing from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#define VCOLUMNS 12

/* One checksum per column of the table (and its header), so a write
 * names the column it hit. The host snapshots or checksums the same
 * columns after each select (host/select.c): a plugin must not write any. */
static void table_sums(const wsel_table *t, uint64_t sums[VCOLUMNS])
{
    const uint64_t seed = 0xcbf29ce484222325ull;
    size_t n = t->num_rows, g = t->num_groups;
    sums[0] = fnv(seed, t, sizeof(*t));
    sums[1] = fnv(seed, t->worker_id, n * sizeof(*t->worker_id));
    sums[2] = fnv(seed, t->dp_rank, n * sizeof(*t->dp_rank));
    sums[3] = fnv(seed, t->overlap_blocks, n * sizeof(*t->overlap_blocks));
    sums[4] = fnv(seed, t->prefill_tokens, n * sizeof(*t->prefill_tokens));
    sums[5] = fnv(seed, t->decode_blocks, n * sizeof(*t->decode_blocks));
    sums[6] = fnv(seed, t->cost, n * sizeof(*t->cost));
    sums[7] = fnv(seed, t->kv_capacity_blocks, n * sizeof(*t->kv_capacity_blocks));
    sums[8] = fnv(seed, t->active_requests, n * sizeof(*t->active_requests));
    sums[9] = fnv(seed, t->flags, n * sizeof(*t->flags));
    sums[10] = fnv(seed, t->group_first_row, g * sizeof(*t->group_first_row));
    sums[11] = fnv(seed, t->group_row_count, g * sizeof(*t->group_row_count));
}

static const char *const column_names[VCOLUMNS] = {
    "header",         "worker_id",          "dp_rank",
    "overlap_blocks", "prefill_tokens",     "decode_blocks",
    "cost",           "kv_capacity_blocks", "active_requests",
    "flags",          "group_first_row",    "group_row_count"};

/* Room after the choice that select must leave alone: a plugin writes
 * only fields within choice->struct_size (abi/wsel.h). */
#define VGUARD_BYTES 256
#define VGUARD_BYTE  0xa5

typedef struct vguarded_choice {
    wsel_choice c;
    unsigned char guard[VGUARD_BYTES];
} vguarded_choice;

/* Bytes written past the choice (the furthest one), or 0. */
static size_t guard_written(const vguarded_choice *g)
{
    for (size_t i = VGUARD_BYTES; i > 0; i--) {
        if (g->guard[i - 1] != VGUARD_BYTE)
            return i;
    }
    return 0;
}

static int select_many(const wsel_plugin *plugin, void *instance, const wsel_table *table,
                       const vcontext *ctx, uint32_t count, const char *what,
                       const vexpect *ex, vcheck_result *res)
{
    uint64_t before[VCOLUMNS], after[VCOLUMNS];
    table_sums(table, before);
    for (uint32_t r = 1; r <= count; r++) {
        vrequest vr;
        vrequest_make(&vr, ctx->seed, r, ex->num_hashes, (r & 1) ? 0.0 : 0.7);
        vguarded_choice g;
        memset(&g.c, 0, sizeof(g.c));
        memset(g.guard, VGUARD_BYTE, sizeof(g.guard));
        g.c.struct_size = sizeof(g.c);
        int32_t rc = plugin->select(instance, &vr.req, table, &g.c);
        size_t past = guard_written(&g);
        if (past > 0) {
            vfail(res,
                  "request %llu on %s: select wrote %zu bytes past the wsel_choice "
                  "(struct_size %u); a plugin may write only fields within "
                  "choice->struct_size",
                  (unsigned long long)r, what, past, g.c.struct_size);
            return 0;
        }
        table_sums(table, after);
        for (int k = 0; k < VCOLUMNS; k++) {
            if (after[k] != before[k]) {
                vfail(res,
                      "request %llu on %s: select wrote the table's %s column; the "
                      "table is read-only to plugins",
                      (unsigned long long)r, what, column_names[k]);
                return 0;
            }
        }
        if (!judge(ex, table, &vr, rc, &g.c, what, res))
            return 0;
    }
    return 1;
}

int vselect_all_valid(const wsel_plugin *plugin, void *instance, const wsel_table *table,
                      const vcontext *ctx, uint32_t count, int allow_errors,
                      const char *what, vcheck_result *res)
{
    vexpect ex = default_expect;
    ex.allow_error = allow_errors;
    return select_many(plugin, instance, table, ctx, count, what, &ex, res);
}

/* Edit a freshly drawn table into an edge case; may adjust the expectation. */
typedef void (*vtable_edit)(vtable *vt, vexpect *ex, uint64_t seed);

/* Load, build the table, edit it, send 64 requests, judge each. */
static void run_edge(const vcontext *ctx, vcheck_result *res, uint32_t num_groups,
                     const uint32_t *dp_sizes, vtable_edit edit, const char *what)
{
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    vtable vt;
    if (vtable_init(&vt, num_groups, dp_sizes, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    vexpect ex = default_expect;
    if (edit)
        edit(&vt, &ex, ctx->seed);
    select_many(vi.plugin, vi.instance, &vt.t, ctx, 64, what, &ex, res);
    vtable_free(&vt);
out_close_instance:
    vinstance_close(&vi);
}

static void check_one_row(const vcontext *ctx, vcheck_result *res)
{
    run_edge(ctx, res, 1, NULL, NULL, "a 1-row table");
}

static void check_4096_rows(const vcontext *ctx, vcheck_result *res)
{
    uint32_t dp[1024];
    for (uint32_t g = 0; g < 1024; g++)
        dp[g] = 4;
    run_edge(ctx, res, 1024, dp, NULL, "a 4096-row table (1024 workers x 4 ranks)");
}

static void edit_equal(vtable *vt, vexpect *ex, uint64_t seed)
{
    (void)ex;
    (void)seed;
    for (uint32_t i = 0; i < vt->t.num_rows; i++) {
        vt->cost[i] = 42.0;
        vt->overlap_blocks[i] = 4;
        vt->prefill_tokens[i] = 448;
        vt->decode_blocks[i] = 14;
        vt->active_requests[i] = 3;
    }
}

static void check_equal_costs(const vcontext *ctx, vcheck_result *res)
{
    uint32_t dp[16];
    for (uint32_t g = 0; g < 16; g++)
        dp[g] = 2;
    run_edge(ctx, res, 16, dp, edit_equal, "a 32-row table of equal rows");
}

static void edit_one_eligible(vtable *vt, vexpect *ex, uint64_t seed)
{
    uint32_t keep = (uint32_t)(seed % vt->t.num_rows);
    for (uint32_t i = 0; i < vt->t.num_rows; i++)
        vt->flags[i] = i == keep ? 0 : WSEL_ROW_EXCLUDED;
    /* Make the survivor the worst row by cost, so a policy that ignores
     * the flags is caught. */
    vt->cost[keep] = 1e9;
    vt->prefill_tokens[keep] = 1000000;
    vt->decode_blocks[keep] = 1000000;
    ex->only_row = keep;
}

static void check_one_eligible(const vcontext *ctx, vcheck_result *res)
{
    uint32_t dp[8] = {1, 8, 8, 8, 8, 8, 8, 15};
    run_edge(ctx, res, 8, dp, edit_one_eligible,
             "a 64-row table with all rows but one excluded");
}

static void edit_negative(vtable *vt, vexpect *ex, uint64_t seed)
{
    (void)ex;
    (void)seed;
    for (uint32_t i = 0; i < vt->t.num_rows; i++)
        vt->cost[i] = -vt->cost[i] - 1.0;
}

static void check_negative_costs(const vcontext *ctx, vcheck_result *res)
{
    run_edge(ctx, res, 32, NULL, edit_negative, "a 32-row table of negative costs");
}

static void edit_huge(vtable *vt, vexpect *ex, uint64_t seed)
{
    (void)ex;
    (void)seed;
    for (uint32_t i = 0; i < vt->t.num_rows; i++)
        vt->cost[i] = 1e300 * (1.0 + vt->cost[i] / 1e5);
    vt->prefill_tokens[0] = UINT64_MAX / 2;
    vt->decode_blocks[0] = UINT64_MAX / 2;
}

static void check_huge_costs(const vcontext *ctx, vcheck_result *res)
{
    run_edge(ctx, res, 32, NULL, edit_huge, "a 32-row table of costs near 1e300");
}

static void edit_zero(vtable *vt, vexpect *ex, uint64_t seed)
{
    (void)ex;
    (void)seed;
    for (uint32_t i = 0; i < vt->t.num_rows; i += 2) {
        vt->cost[i] = 0.0;
        vt->prefill_tokens[i] = 0;
        vt->decode_blocks[i] = 0;
    }
}

static void check_zero_costs(const vcontext *ctx, vcheck_result *res)
{
    run_edge(ctx, res, 32, NULL, edit_zero, "a 32-row table, every other cost zero");
}

static void check_mixed_dp_groups(const vcontext *ctx, vcheck_result *res)
{
    uint32_t dp[7] = {1, 8, 2, 16, 3, 1, 4};
    run_edge(ctx, res, 7, dp, NULL, "a table of DP groups of 1, 8, 2, 16, 3, 1, 4 ranks");
}

static void edit_no_hashes(vtable *vt, vexpect *ex, uint64_t seed)
{
    (void)seed;
    for (uint32_t i = 0; i < vt->t.num_rows; i++)
        vt->overlap_blocks[i] = 0;
    ex->num_hashes = 0;
}

static void check_no_block_hashes(const vcontext *ctx, vcheck_result *res)
{
    run_edge(ctx, res, 16, NULL, edit_no_hashes,
             "a 16-row table, requests with no block hashes");
}

static void edit_all_busy(vtable *vt, vexpect *ex, uint64_t seed)
{
    (void)ex;
    (void)seed;
    for (uint32_t i = 0; i < vt->t.num_rows; i++)
        vt->flags[i] = WSEL_ROW_BUSY;
}

static void check_all_busy(const vcontext *ctx, vcheck_result *res)
{
    uint32_t dp[4] = {2, 2, 8, 1};
    run_edge(ctx, res, 4, dp, edit_all_busy, "a 13-row table with every row busy");
}

static void edit_mostly_busy(vtable *vt, vexpect *ex, uint64_t seed)
{
    /* Three idle rows, all with the worst costs; the rest busy. */
    uint32_t n = vt->t.num_rows;
    for (uint32_t i = 0; i < n; i++)
        vt->flags[i] = WSEL_ROW_BUSY;
    for (uint32_t k = 0; k < 3; k++) {
        uint32_t i = (uint32_t)((seed + 17u * k) % n);
        vt->flags[i] = 0;
        vt->cost[i] = 1e9 + k;
    }
    ex->avoid_busy = 1;
}

static void check_avoids_busy(const vcontext *ctx, vcheck_result *res)
{
    run_edge(ctx, res, 48, NULL, edit_mostly_busy,
             "a 48-row table with all but 3 rows busy");
}

static void edit_all_excluded(vtable *vt, vexpect *ex, uint64_t seed)
{
    (void)seed;
    for (uint32_t i = 0; i < vt->t.num_rows; i++)
        vt->flags[i] = WSEL_ROW_EXCLUDED | (i & 1 ? WSEL_ROW_BUSY : 0);
    ex->expect_error = 1;
}

static void check_all_excluded(const vcontext *ctx, vcheck_result *res)
{
    uint32_t dp[3] = {1, 4, 2};
    run_edge(ctx, res, 3, dp, edit_all_excluded, "a 7-row table with every row excluded");
}

/* Scores (ABI 1.1): on each shape, one finite score per row (the array
 * is pre-filled with NaN, so a row left unwritten shows), nothing written
 * past num_rows, and the table unchanged. Skipped without a score function. */
static void check_scores(const vcontext *ctx, vcheck_result *res)
{
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    if (vi.plugin->score == NULL) {
        vskip(res, "no score function (optional, ABI 1.1)");
        goto out_close_instance;
    }
    static const uint32_t shapes[][2] = {{1, 1}, {3, 2}, {7, 3}, {1024, 4}};
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        uint32_t dp[1024];
        for (uint32_t g = 0; g < shapes[k][0]; g++)
            dp[g] = 1 + (g % shapes[k][1]);
        vtable vt;
        if (vtable_init(&vt, shapes[k][0], dp, ctx->seed + k) < 0) {
            vfail(res, "out of memory");
            goto out_close_instance;
        }
        uint32_t n = vt.t.num_rows;
        if (k == 2) { /* busy and excluded rows still get a score */
            vt.flags[0] |= WSEL_ROW_EXCLUDED;
            vt.flags[n - 1] |= WSEL_ROW_BUSY;
        }
        double *scores = malloc(((size_t)n + 8) * sizeof(double));
        if (scores == NULL) {
            vtable_free(&vt);
            vfail(res, "out of memory");
            goto out_close_instance;
        }
        for (uint32_t r = 0; r < 8 && res->status == VCHECK_PASS; r++) {
            for (uint32_t i = 0; i < n; i++)
                scores[i] = NAN;
            for (uint32_t i = n; i < n + 8; i++)
                scores[i] = -12345.0;
            uint64_t before[VCOLUMNS], after[VCOLUMNS];
            table_sums(&vt.t, before);
            vrequest vr;
            vrequest_make(&vr, ctx->seed, r + 1, r % 2 ? 0 : 32, 0.0);
            int32_t rc = vi.plugin->score(vi.instance, &vr.req, &vt.t, scores);
            table_sums(&vt.t, after);
            for (uint32_t c = 0; c < VCOLUMNS; c++)
                if (before[c] != after[c]) {
                    vfail(res, "score on a %u-row table wrote the table's %s", n,
                          column_names[c]);
                    break;
                }
            if (rc != 0) {
                vfail(res, "score on a %u-row table returned %d (%s)", n, rc,
                      wsel_errname(rc));
                break;
            }
            for (uint32_t i = 0; i < n; i++)
                if (!isfinite(scores[i])) {
                    vfail(res,
                          "score on a %u-row table: row %u is %g (want one finite "
                          "score per row)",
                          n, i, scores[i]);
                    break;
                }
            for (uint32_t i = n; i < n + 8; i++)
                if (scores[i] != -12345.0) {
                    vfail(res, "score on a %u-row table wrote past num_rows (index %u)",
                          n, i);
                    break;
                }
        }
        free(scores);
        vtable_free(&vt);
        if (res->status != VCHECK_PASS)
            break;
    }
out_close_instance:
    vinstance_close(&vi);
}

const vcheck vchecks_select[] = {
    {"select_one_row", check_one_row},
    {"select_4096_rows", check_4096_rows},
    {"select_equal_costs", check_equal_costs},
    {"select_only_eligible_row", check_one_eligible},
    {"select_negative_costs", check_negative_costs},
    {"select_huge_costs", check_huge_costs},
    {"select_zero_costs", check_zero_costs},
    {"select_mixed_dp_groups", check_mixed_dp_groups},
    {"select_no_block_hashes", check_no_block_hashes},
    {"select_all_busy", check_all_busy},
    {"select_avoids_busy_rows", check_avoids_busy},
    {"select_all_excluded_fails", check_all_excluded},
    {"score_finite_one_per_row", check_scores},
    {"select_temperature_override_zero", vcheck_temperature_override},
};
const unsigned vchecks_select_count = sizeof(vchecks_select) / sizeof(vchecks_select[0]);
