// SPDX-License-Identifier: Apache-2.0
/*
 * test_softmax_parity.c -- wsel's softmax gives Dynamo's row.
 *
 * A small reference written in C from Dynamo's current selector (ai-dynamo/
 * dynamo, lib/kv-router/src/scheduling/selector/default.rs:
 * softmax_sample_index, minimum_cost_index and the temperature choice in
 * pick_default_worker / DefaultWorkerPicker::pick; the cost in
 * selector/mod.rs, WorkerSelectionInput::row, and default.rs,
 * DefaultWorkerScorer::worker_logit) is compared, on random cases from a
 * fixed seed, with
 *   - wsel_softmax_sample, the helper every plugin gets as softmax_sample;
 *   - the softmax plugin through the host (wsel_host_select), with the
 *     temperature given as a request override, as a 1.0 non-zero request
 *     temperature, or left to the plugin's parameter;
 *   - the default cost column of wsel_table_build, from random raw inputs.
 *
 * Every difference is a failure except the two wsel documents (abi/wsel.h,
 * softmax_sample; docs/policies.md, softmax), which the reference applies
 * explicitly and the test counts apart:
 *   1. where Dynamo's own arithmetic breaks (its denominator overflows and
 *      it samples uniformly, or its weights are NaN and it answers the last
 *      candidate), wsel uses exp(-((c - min) / range) / T) (ref_fallback);
 *   2. a cost over DBL_MAX (absurd weights) saturates at DBL_MAX, since
 *      the ABI promises finite costs; Dynamo's would be infinite.
 * At T = 0 Dynamo breaks exact ties with draws from its own stream
 * (reservoir: random_index(ties) per tie); wsel's contract maps its one
 * draw u to the floor(u * ties)-th tie. Both are uniform over the ties;
 * the reference uses wsel's mapping, so T = 0 checks the minimum and the
 * tie set. Candidates are in row order, Dynamo's order in its seeded
 * selector (sorted by worker id, then dp rank).
 *
 * WSEL_SOFTMAX_PLUGIN is the path of the built softmax plugin.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_host.h"

#define MAX_ROWS      1024u
#define SELECT_CASES  100000u
#define COLUMN_TABLES 4000u
#define PARAM_T       0.5 /* the plugin's configured temperature */
#define SHOW_MISMATCH 10

static const double temperatures[] = {0.0, 0.01, 0.5, 1.0, 10.0};
#define NUM_TEMPERATURES (sizeof(temperatures) / sizeof(temperatures[0]))

/* ===================================================================== */
/* The reference                                                          */
/* ===================================================================== */

/*
 * Dynamo's probabilities for candidate costs c[0..n) at T > 0
 * (softmax_sample_index): the running sums of the normalised weights go to
 * cum[]. Returns 1 when Dynamo's arithmetic broke: the denominator
 * overflowed (scale == 0, every weight 1) or a weight is NaN.
 */
static int ref_dynamo(const double *c, size_t n, double t, double *p, double *cum)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, c[i]);
        hi = fmax(hi, c[i]);
    }
    int broken = 0;
    if (lo == hi) {
        for (size_t i = 0; i < n; i++)
            p[i] = 1.0 / (double)n;
    } else {
        double range = hi - lo;
        double magnitude = isfinite(range) ? 1.0 : fmax(fabs(lo), fabs(hi));
        double min_normalized = lo / magnitude;
        double scale = -1.0 / ((hi / magnitude - min_normalized) * t);
        double max_scaled = min_normalized * scale;
        for (size_t i = 0; i < n; i++)
            p[i] = exp(c[i] / magnitude * scale - max_scaled);
        broken = scale == 0.0;
    }
    double sum = -0.0; /* Rust's f64 Sum: a fold from -0.0 */
    for (size_t i = 0; i < n; i++)
        sum += p[i];
    broken |= isnan(sum);
    double cumulative = 0.0;
    for (size_t i = 0; i < n; i++) {
        p[i] /= sum;
        cumulative += p[i];
        cum[i] = cumulative;
    }
    return broken;
}

/* wsel's documented weights where Dynamo's arithmetic breaks. */
static void ref_fallback(const double *c, size_t n, double t, double *p, double *cum)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, c[i]);
        hi = fmax(hi, c[i]);
    }
    double magnitude = isfinite(hi - lo) ? 1.0 : fmax(fabs(lo), fabs(hi));
    double min_n = lo / magnitude, range_n = hi / magnitude - min_n;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        p[i] = exp(-((c[i] / magnitude - min_n) / range_n) / t);
        sum += p[i];
    }
    double cumulative = 0.0;
    for (size_t i = 0; i < n; i++) {
        cumulative += p[i] / sum;
        cum[i] = cumulative;
    }
}

/* The first candidate whose running sum reaches u (`sample <= cumulative`),
 * else the last. */
static size_t ref_walk(const double *cum, size_t n, double u)
{
    for (size_t i = 0; i < n; i++)
        if (u <= cum[i])
            return i;
    return n - 1;
}

/* T = 0 (minimum_cost_index): the minimum; ties by wsel's mapping of u. */
static size_t ref_argmin(const double *c, size_t n, double u, size_t *ties_out)
{
    double best = INFINITY;
    size_t ties = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i] < best) {
            best = c[i];
            ties = 1;
        } else if (c[i] == best) {
            ties++;
        }
    }
    size_t k = (size_t)(u * (double)ties);
    if (k >= ties)
        k = ties - 1;
    *ties_out = ties;
    for (size_t i = 0; i < n; i++)
        if (c[i] == best && k-- == 0)
            return i;
    return n - 1; /* not reached */
}

/* The default cost (WorkerSelectionInput::row, worker_logit, with the
 * overlap credit already taken out of prefill_tokens as wsel's table does):
 * weight * (prefill_tokens / block_size) + decode_blocks. */
static double ref_cost(double weight, uint64_t prefill, uint32_t block_size,
                       uint64_t decode)
{
    return weight * ((double)prefill / (double)block_size) + (double)decode;
}

/* ===================================================================== */
/* Random cases                                                           */
/* ===================================================================== */

/* A case: n rows, their costs and flags, a temperature and a draw. */
typedef struct pcase {
    uint32_t n;
    double cost[MAX_ROWS];
    uint8_t flags[MAX_ROWS];
    double t, u;
} pcase;

/* Scratch shared by the checks (large; kept off the stack). */
typedef struct scratch {
    double c[MAX_ROWS], p[MAX_ROWS], cum[MAX_ROWS];
    uint32_t row_of[MAX_ROWS]; /* candidate index -> table row */
    /* A table for the host: every column, one row per worker. */
    uint64_t worker_id[MAX_ROWS], prefill[MAX_ROWS], decode[MAX_ROWS], kv[MAX_ROWS];
    uint32_t dp_rank[MAX_ROWS], overlap[MAX_ROWS], active[MAX_ROWS];
    uint32_t group_first[MAX_ROWS], group_count[MAX_ROWS];
} scratch;

static double uniform(wsel_rng *rng)
{
    return wsel_rng_uniform(rng);
}

/* 1..1024, log-uniform (most tables small, every size reached). */
static uint32_t random_rows(wsel_rng *rng)
{
    if (wsel_rng_below(rng, 20) == 0)
        return MAX_ROWS;
    uint32_t n = (uint32_t)exp2(uniform(rng) * 10.0);
    return n < 1 ? 1 : n > MAX_ROWS ? MAX_ROWS : n;
}

static const char *const cost_kinds[] = {
    "small integers (ties)",
    "all equal",
    "uniform [-1e3, 1e3]",
    "negative",
    "huge, any sign",
    "extremes (infinite range)",
    "[0, 1e308]",
    "subnormal range",
    "loads",
    "near DBL_MAX",
};
#define NUM_COST_KINDS (sizeof(cost_kinds) / sizeof(cost_kinds[0]))

static double random_cost(wsel_rng *rng, uint32_t kind, double base)
{
    static const double extremes[] = {-DBL_MAX, DBL_MAX, 0.0, -1.0, 1.0, 1e300, -1e300};
    switch (kind) {
    case 0:
        return (double)wsel_rng_below(rng, 8);
    case 1:
        return base;
    case 2:
        return uniform(rng) * 2e3 - 1e3;
    case 3:
        return -1.0 - uniform(rng) * 1e6;
    case 4:
        return (uniform(rng) * 2.0 - 1.0) * 1e308;
    case 5:
        return extremes[wsel_rng_below(rng, 7)];
    case 6:
        return uniform(rng) * 1e308;
    case 7: { /* a few ulps from a base: the range may be subnormal */
        if (base == 0.0)
            return wsel_rng_below(rng, 4) * 4.9406564584124654e-324;
        for (uint32_t k = wsel_rng_below(rng, 3); k > 0; k--)
            base = nextafter(base, 0.0);
        return base;
    }
    case 8:
        return (double)wsel_rng_below(rng, 64) + (double)wsel_rng_below(rng, 4096) /
                                                     16.0 *
                                                     (wsel_rng_below(rng, 2) ? 1 : 0.7);
    default:
        return DBL_MAX - (double)wsel_rng_below(rng, 8) * 1.99584030953472e292;
    }
}

static void random_case(wsel_rng *rng, pcase *pc, uint32_t *kind_out)
{
    uint32_t kind = wsel_rng_below(rng, NUM_COST_KINDS);
    pc->n = random_rows(rng);
    static const double bases[] = {0.0, 1.0, -3.5, 1e300, -DBL_MAX, DBL_MAX, 7.0};
    double base = bases[wsel_rng_below(rng, 7)];
    for (uint32_t i = 0; i < pc->n; i++) {
        pc->cost[i] = random_cost(rng, kind, base);
        pc->flags[i] = 0;
    }
    /* Rows excluded or busy in a third of the cases. */
    if (wsel_rng_below(rng, 3) == 0)
        for (uint32_t i = 0; i < pc->n; i++) {
            uint32_t r = wsel_rng_below(rng, 10);
            pc->flags[i] = r < 2 ? WSEL_ROW_EXCLUDED : r < 3 ? WSEL_ROW_BUSY : 0;
        }
    pc->t = temperatures[wsel_rng_below(rng, NUM_TEMPERATURES)];
    *kind_out = kind;
}

/* The plugin's candidates: neither excluded nor busy, or, if none is, not
 * excluded. Returns the mask the helper must skip and writes the costs of
 * the candidates to s->c, their rows to s->row_of. */
static uint8_t candidates(const pcase *pc, scratch *s, size_t *count)
{
    uint8_t mask = WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
    for (int pass = 0; pass < 2; pass++) {
        size_t k = 0;
        for (uint32_t i = 0; i < pc->n; i++)
            if ((pc->flags[i] & mask) == 0) {
                s->c[k] = pc->cost[i];
                s->row_of[k++] = i;
            }
        if (k > 0 || pass == 1) {
            *count = k;
            return mask;
        }
        mask = WSEL_ROW_EXCLUDED;
    }
    return mask; /* not reached */
}

/* Pick a draw: uniform, 0, the largest below 1, or on or one ulp beside a
 * boundary of the running sums (cum, n entries) or of the tie slices. */
static double random_draw(wsel_rng *rng, const double *cum, size_t n, size_t ties)
{
    double b;
    switch (wsel_rng_below(rng, 6)) {
    case 0:
        return uniform(rng);
    case 1:
        return 0.0;
    case 2:
        return nextafter(1.0, 0.0);
    default:
        if (cum != NULL)
            b = cum[wsel_rng_below(rng, (uint32_t)n)];
        else
            b = (double)wsel_rng_below(rng, (uint32_t)ties) / (double)ties;
        break;
    }
    uint32_t side = wsel_rng_below(rng, 3);
    if (side == 1)
        b = nextafter(b, 0.0);
    else if (side == 2)
        b = nextafter(b, 2.0);
    return b >= 0.0 && b < 1.0 ? b : uniform(rng);
}

/* ===================================================================== */
/* The checks                                                             */
/* ===================================================================== */

typedef struct tally {
    uint64_t cases, broken, broken_differs, mismatches;
    uint64_t per_kind[NUM_COST_KINDS];
    uint64_t per_t[NUM_TEMPERATURES];
} tally;

static void report(tally *ty, const char *what, const pcase *pc, double t, uint32_t want,
                   uint32_t got, int32_t rc)
{
    if (ty->mismatches++ >= SHOW_MISMATCH)
        return;
    print_error("%s: n %u, T %g (case T %g), u %.17g: expected row %u, got %u (rc %d)\n",
                what, pc->n, t, pc->t, pc->u, want, got, rc);
    for (uint32_t i = 0; i < pc->n && i < 8; i++)
        print_error("  row %u: cost %.17g flags %u\n", i, pc->cost[i], pc->flags[i]);
}

/* The expected row for the case's candidates at temperature t and draw u:
 * Dynamo's, or wsel's documented fallback where Dynamo's arithmetic broke. */
static uint32_t expected_row(scratch *s, size_t k, double t, double u, tally *ty,
                             int count)
{
    size_t ties;
    if (t == 0.0)
        return s->row_of[ref_argmin(s->c, k, u, &ties)];
    int broken = ref_dynamo(s->c, k, t, s->p, s->cum);
    size_t dynamo = ref_walk(s->cum, k, u);
    if (!broken)
        return s->row_of[dynamo];
    ref_fallback(s->c, k, t, s->p, s->cum);
    size_t ours = ref_walk(s->cum, k, u);
    if (count) {
        ty->broken++;
        ty->broken_differs += ours != dynamo;
    }
    return s->row_of[ours];
}

/* A host with the softmax plugin, its `temperature` parameter PARAM_T. */
static wsel_host *softmax_host(void)
{
    char err[256] = "";
    wsel_host *host = NULL;
    assert_int_equal(wsel_host_create(NULL, &host), 0);
    char config[64];
    snprintf(config, sizeof(config), "{\"temperature\": %g}", PARAM_T);
    int32_t rc = wsel_host_switch(host, WSEL_SOFTMAX_PLUGIN, config, err, sizeof(err));
    if (rc != 0)
        print_error("switch to %s: %s\n", WSEL_SOFTMAX_PLUGIN, err);
    assert_int_equal(rc, 0);
    return host;
}

/* The case as a table the host accepts: one worker per row. */
static wsel_table case_table(const pcase *pc, scratch *s)
{
    wsel_table t;
    memset(&t, 0, sizeof(t));
    t.struct_size = sizeof(t);
    t.num_rows = pc->n;
    t.num_groups = pc->n;
    t.topology_epoch = 1;
    for (uint32_t i = 0; i < pc->n; i++) {
        s->worker_id[i] = i + 1;
        s->group_first[i] = i;
        s->group_count[i] = 1;
    }
    t.worker_id = s->worker_id;
    t.dp_rank = s->dp_rank;
    t.overlap_blocks = s->overlap;
    t.prefill_tokens = s->prefill;
    t.decode_blocks = s->decode;
    t.cost = pc->cost;
    t.kv_capacity_blocks = s->kv;
    t.active_requests = s->active;
    t.flags = pc->flags;
    t.group_first_row = s->group_first;
    t.group_row_count = s->group_count;
    return t;
}

/* How the plugin is told the temperature; each way has its own expected T. */
enum { BY_OVERRIDE, BY_OVERRIDE_OLD_ROUTER, BY_NONZERO, BY_PARAMETER, NUM_WAYS };

/* The plugin through the host at the case's temperature, told one way;
 * returns the temperature the plugin must have used. */
static double plugin_row(wsel_host *host, const pcase *pc, scratch *s, int way,
                         uint32_t *row, int32_t *rc)
{
    wsel_rng rng;
    wsel_rng_seed(&rng, 1);
    wsel_request req;
    memset(&req, 0, sizeof(req));
    req.struct_size = sizeof(req);
    req.request_id = 1;
    req.isl_tokens = 16;
    req.block_size = 16;
    req.overlap_score_weight = 1.0;
    req.uniform = pc->u;
    req.rng = &rng;
    double t = pc->t;
    switch (way) {
    case BY_OVERRIDE: /* 1.1: any T, 0 included, wins over the parameter */
        req.overrides = WSEL_OVERRIDE_TEMPERATURE;
        req.temperature = t;
        break;
    case BY_OVERRIDE_OLD_ROUTER: /* a 1.0 request: the bit is past its end */
        req.struct_size = WSEL_REQUEST_SIZE_1_0;
        req.overrides = WSEL_OVERRIDE_TEMPERATURE;
        req.temperature = t;
        if (t == 0.0)
            t = PARAM_T;
        break;
    case BY_NONZERO: /* the 1.0 rule: a non-zero temperature wins */
        req.temperature = t;
        if (t == 0.0)
            t = PARAM_T;
        break;
    default: /* no override: the parameter */
        t = PARAM_T;
        break;
    }
    wsel_table table = case_table(pc, s);
    wsel_choice choice;
    memset(&choice, 0, sizeof(choice));
    choice.struct_size = sizeof(choice);
    *rc = wsel_host_select(host, &req, &table, &choice);
    *row = choice.row;
    return t;
}

static void test_helper_and_plugin_give_dynamos_row(void **state)
{
    (void)state;
    scratch *s = calloc(1, sizeof(*s));
    pcase *pc = calloc(1, sizeof(*pc));
    assert_non_null(s);
    assert_non_null(pc);
    wsel_host *host = softmax_host();
    wsel_rng rng;
    wsel_rng_seed(&rng, 20261130);
    tally helper = {0}, plugin = {0};

    uint64_t refused = 0;
    while (helper.cases < SELECT_CASES) {
        uint32_t kind;
        random_case(&rng, pc, &kind);
        size_t k;
        uint8_t mask = candidates(pc, s, &k);
        if (k == 0) { /* every row excluded: refused, nothing written */
            uint32_t row = 12345;
            assert_int_equal(
                wsel_softmax_sample(pc->cost, pc->flags, pc->n, mask, pc->t, 0.5, &row),
                WSEL_ENOCANDIDATE);
            assert_int_equal(row, 12345);
            refused++;
            continue;
        }
        /* The draw, placed on the boundaries of the case's own sums. */
        size_t ties = 1;
        if (pc->t == 0.0) {
            ref_argmin(s->c, k, 0.0, &ties);
            pc->u = random_draw(&rng, NULL, k, ties);
        } else {
            if (ref_dynamo(s->c, k, pc->t, s->p, s->cum))
                ref_fallback(s->c, k, pc->t, s->p, s->cum);
            pc->u = random_draw(&rng, s->cum, k, ties);
        }

        uint32_t want = expected_row(s, k, pc->t, pc->u, &helper, 1);
        uint32_t got = UINT32_MAX;
        int32_t rc =
            wsel_softmax_sample(pc->cost, pc->flags, pc->n, mask, pc->t, pc->u, &got);
        helper.cases++;
        helper.per_kind[kind]++;
        for (size_t i = 0; i < NUM_TEMPERATURES; i++)
            helper.per_t[i] += temperatures[i] == pc->t;
        if (rc != 0 || got != want)
            report(&helper, "helper", pc, pc->t, want, got, rc);

        /* The plugin, told the temperature one of four ways. */
        int way = (int)wsel_rng_below(&rng, NUM_WAYS);
        uint32_t prow = UINT32_MAX;
        int32_t prc;
        double used = plugin_row(host, pc, s, way, &prow, &prc);
        uint32_t pwant =
            used == pc->t ? want : expected_row(s, k, used, pc->u, &plugin, 0);
        plugin.cases++;
        if (prc != WSEL_ANSWER_PLUGIN || prow != pwant)
            report(&plugin, "plugin", pc, used, pwant, prow, prc);
    }

    print_message(
        "softmax parity: %llu cases (%llu through the plugin; %llu more with every "
        "row excluded, refused), %llu where Dynamo's arithmetic breaks (wsel's row "
        "differs from Dynamo's in %llu), %llu helper and %llu plugin mismatches\n",
        (unsigned long long)helper.cases, (unsigned long long)plugin.cases,
        (unsigned long long)refused, (unsigned long long)helper.broken,
        (unsigned long long)helper.broken_differs, (unsigned long long)helper.mismatches,
        (unsigned long long)plugin.mismatches);
    for (size_t i = 0; i < NUM_COST_KINDS; i++)
        if (helper.per_kind[i] == 0)
            fail_msg("no case with costs of kind '%s'", cost_kinds[i]);
    for (size_t i = 0; i < NUM_TEMPERATURES; i++)
        assert_true(helper.per_t[i] > 0);
    assert_true(helper.broken > 0); /* the documented deviation was exercised */
    assert_int_equal(helper.mismatches, 0);
    assert_int_equal(plugin.mismatches, 0);
    wsel_host_destroy(host);
    free(pc);
    free(s);
}

/* The four cases of issue 14, each by hand. */
static void test_the_four_reported_differences(void **state)
{
    (void)state;
    uint32_t row = 0;
    /* 1. Infinite range: Dynamo rescales by the largest magnitude and keeps
     *    the cheaper row favoured: p(row 0) = 1 / (1 + e^-1) = 0.731. */
    const double wide[] = {-DBL_MAX, DBL_MAX};
    assert_int_equal(wsel_softmax_sample(wide, NULL, 2, 0, 1.0, 0.6, &row), 0);
    assert_int_equal(row, 0);
    assert_int_equal(wsel_softmax_sample(wide, NULL, 2, 0, 1.0, 0.74, &row), 0);
    assert_int_equal(row, 1);
    /* 2. All equal at T > 0: u exactly on the boundary 1/2 is row 0. */
    const double equal[] = {1, 1};
    assert_int_equal(wsel_softmax_sample(equal, NULL, 2, 0, 1.0, 0.5, &row), 0);
    assert_int_equal(row, 0);
    assert_int_equal(wsel_softmax_sample(equal, NULL, 2, 0, 1.0, nextafter(0.5, 1), &row),
                     0);
    assert_int_equal(row, 1);
    /* 3. The cost's evaluation order: isl 64, block size 3, weight 0.1. */
    wsel_rng rng;
    wsel_request req;
    memset(&req, 0, sizeof(req));
    req.struct_size = sizeof(req);
    req.isl_tokens = 64;
    req.block_size = 3;
    req.overlap_score_weight = 0.1;
    req.rng = &rng;
    wsel_rank_state ranks[64];
    memset(ranks, 0, sizeof(ranks));
    for (uint32_t i = 0; i < 64; i++) {
        ranks[i].worker_id = i + 1;
        ranks[i].active_prefill_tokens = i * 7u;
        ranks[i].active_blocks = 64 - i / 3;
    }
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 64), 0);
    assert_int_equal(wsel_table_build(&buf, &req, ranks, 64, 1, NULL, 0), 0);
    uint32_t differ_from_old_order = 0;
    for (uint32_t i = 0; i < 64; i++) {
        uint64_t p = buf.table.prefill_tokens[i], d = buf.table.decode_blocks[i];
        assert_true(buf.table.cost[i] == ref_cost(0.1, p, 3, d));
        differ_from_old_order += buf.table.cost[i] != 0.1 * (double)p / 3.0 + (double)d;
    }
    assert_true(differ_from_old_order > 0); /* the order matters here */
    wsel_table_buf_free(&buf);
    /* 4. A request override of 0 forces T = 0 over the plugin's parameter:
     *    see test_helper_and_plugin_give_dynamos_row (BY_OVERRIDE). */
}

/* ===================================================================== */
/* The default cost column                                                */
/* ===================================================================== */

static void test_cost_column_is_dynamos_logit(void **state)
{
    (void)state;
    static const uint32_t block_sizes[] = {1, 2, 4, 8,  16, 32, 64, 128,
                                           3, 5, 7, 10, 12, 24, 48, 100};
    static const double weights[] = {0.0, 0.5, 1.0, 2.0, 0.1, 0.3, 0.7, 1.5, 1e300};
    wsel_rng rng;
    wsel_rng_seed(&rng, 14);
    wsel_table_buf buf;
    assert_int_equal(wsel_table_buf_init(&buf, 64), 0);
    wsel_rank_state ranks[64];
    double ref[64];
    uint64_t rows = 0, saturated = 0, mismatches = 0, odd_bs = 0, select_mismatches = 0;
    for (uint32_t c = 0; c < COLUMN_TABLES; c++) {
        int table_saturated = 0;
        wsel_request req;
        memset(&req, 0, sizeof(req));
        req.struct_size = sizeof(req);
        req.block_size = wsel_rng_below(&rng, 4) == 0
                             ? 1 + wsel_rng_below(&rng, 1024)
                             : block_sizes[wsel_rng_below(&rng, 16)];
        req.isl_tokens = 1 + wsel_rng_below(&rng, 65536);
        uint32_t w = wsel_rng_below(&rng, 10);
        req.overlap_score_weight = w < 9 ? weights[w] : uniform(&rng) * 4.0;
        if (w == 8 && wsel_rng_below(&rng, 4) != 0)
            req.overlap_score_weight = 1.0; /* keep the saturating weight rare */
        req.rng = &rng;
        odd_bs += (req.block_size & (req.block_size - 1)) != 0;
        uint32_t n = 1 + wsel_rng_below(&rng, 64);
        uint32_t blocks = req.isl_tokens / req.block_size;
        memset(ranks, 0, sizeof(ranks));
        for (uint32_t i = 0; i < n; i++) {
            ranks[i].worker_id = 1 + i / 4;
            ranks[i].dp_rank = i % 4;
            ranks[i].overlap_blocks = wsel_rng_below(&rng, blocks + 3);
            ranks[i].active_prefill_tokens = wsel_rng_below(&rng, 50) == 0
                                                 ? wsel_rng_u64(&rng) >> 4
                                                 : wsel_rng_below(&rng, 100000);
            ranks[i].active_blocks = wsel_rng_below(&rng, 20000);
            ranks[i].flags = wsel_rng_below(&rng, 16) == 0 ? WSEL_ROW_NO_LOAD : 0;
        }
        assert_int_equal(wsel_table_build(&buf, &req, ranks, n, 1, NULL, 0), 0);
        const wsel_table *t = &buf.table;
        for (uint32_t i = 0; i < n; i++) {
            ref[i] = ref_cost(req.overlap_score_weight, t->prefill_tokens[i],
                              req.block_size, t->decode_blocks[i]);
            double want = ref[i];
            if (!(want <= DBL_MAX)) { /* documented: saturate, stay finite */
                want = DBL_MAX;
                saturated++;
                table_saturated = 1;
            }
            rows++;
            if (t->cost[i] != want && mismatches++ < SHOW_MISMATCH)
                print_error("bs %u, w %.17g, prefill %llu, decode %llu: cost %.17g, "
                            "Dynamo %.17g\n",
                            req.block_size, req.overlap_score_weight,
                            (unsigned long long)t->prefill_tokens[i],
                            (unsigned long long)t->decode_blocks[i], t->cost[i], want);
        }
        /* The pick on the built column is Dynamo's pick on its logits. */
        double temp = temperatures[wsel_rng_below(&rng, NUM_TEMPERATURES)];
        double u = uniform(&rng);
        uint32_t got = 0;
        assert_int_equal(wsel_softmax_sample(t->cost, NULL, n, 0, temp, u, &got), 0);
        size_t ties, want;
        if (temp == 0.0) {
            want = ref_argmin(ref, n, u, &ties);
        } else {
            double p[64], cum[64];
            int broken = ref_dynamo(ref, n, temp, p, cum);
            if (broken || table_saturated) /* covered by the selection test */
                continue;
            want = ref_walk(cum, n, u);
        }
        select_mismatches += got != want;
    }
    wsel_table_buf_free(&buf);
    print_message(
        "cost column: %llu rows in %u tables (%llu with a block size that is not "
        "a power of two), %llu saturated at DBL_MAX, %llu mismatches, %llu "
        "selection mismatches\n",
        (unsigned long long)rows, COLUMN_TABLES, (unsigned long long)odd_bs,
        (unsigned long long)saturated, (unsigned long long)mismatches,
        (unsigned long long)select_mismatches);
    assert_true(odd_bs > 0);
    assert_int_equal(mismatches, 0);
    assert_int_equal(select_mismatches, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_four_reported_differences),
        cmocka_unit_test(test_helper_and_plugin_give_dynamos_row),
        cmocka_unit_test(test_cost_column_is_dynamos_logit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
