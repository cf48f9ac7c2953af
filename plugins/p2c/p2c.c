// SPDX-License-Identifier: Apache-2.0
/*
 * p2c -- the power of d choices.
 *
 * What it does: draws d distinct eligible rows at random and answers the one
 * with the lowest value in a chosen column (cost by default), exact ties
 * broken at random. With fewer than d eligible rows it compares them all.
 *
 * Why: comparing two random candidates instead of all of them keeps almost
 * all the benefit of "least loaded" (with m = n balls the fraction of bins
 * holding 3 or more drops from 8 % to 0.9 %) while avoiding its herding:
 * when load information is stale, every router sending to the same global
 * minimum overloads it, but random pairs spread the traffic (Mitzenmacher,
 * "The power of two choices", 1996; "How useful is old information?", 2000).
 *
 * Every draw comes from the request's seeded stream (host->rng_u64), so a
 * decision is reproducible from (seed, request id). Eligible means not
 * WSEL_ROW_EXCLUDED, and not WSEL_ROW_BUSY unless every eligible row is
 * busy. select allocates nothing (at most 8 rows are kept, on the stack).
 * Stateless and safe to call concurrently: the instance is read-only after
 * create.
 */
#include <stdlib.h>

#include "wsel.h"

/* Largest d accepted; the candidates live in a fixed array of this size. */
#define P2C_MAX_D 8u
/* Random draws tried before falling back to one scan of the table. */
#define P2C_DRAW_BUDGET 64u

/* Indices of the `column` parameter, in the order of p2c_column_names. */
#define P2C_COLUMN_COST            0u
#define P2C_COLUMN_DECODE_BLOCKS   1u
#define P2C_COLUMN_PREFILL_TOKENS  2u
#define P2C_COLUMN_ACTIVE_REQUESTS 3u

static const char *const p2c_column_names[] = {
    "cost", "decode_blocks", "prefill_tokens", "active_requests", NULL,
};

static const wsel_param_def p2c_params[] = {
    {
        .name = "d",
        .doc = "number of distinct random candidates compared (1 = random)",
        .type = WSEL_PARAM_INT,
        .default_value = 2,
        .min_value = 1,
        .max_value = P2C_MAX_D,
    },
    {
        .name = "column",
        .doc = "column whose lowest value wins: cost, decode_blocks, "
               "prefill_tokens or active_requests",
        .type = WSEL_PARAM_ENUM,
        .default_value = P2C_COLUMN_COST,
        .min_value = P2C_COLUMN_COST,
        .max_value = P2C_COLUMN_ACTIVE_REQUESTS,
        .choices = p2c_column_names,
    },
};

#define P2C_NUM_PARAMS (sizeof(p2c_params) / sizeof(p2c_params[0]))

typedef struct p2c {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    uint32_t d;                /* candidates per request, 1 .. P2C_MAX_D */
    uint32_t column;           /* P2C_COLUMN_* */
} p2c;

/* [control thread] The host has checked the ranges already; the plugin
 * checks again because `d` sizes a fixed array. */
static int32_t p2c_create(const wsel_host_api *host, const double *params,
                          uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL ||
        num_params != P2C_NUM_PARAMS)
        return WSEL_EINVAL;
    double d = params[0], column = params[1];
    if (!(d >= 1 && d <= P2C_MAX_D) || d != (uint32_t)d)
        return WSEL_ECONFIG;
    if (!(column >= 0 && column <= P2C_COLUMN_ACTIVE_REQUESTS) ||
        column != (uint32_t)column)
        return WSEL_ECONFIG;
    p2c *p = malloc(sizeof(*p));
    if (p == NULL)
        return WSEL_ENOMEM;
    p->host = host;
    p->d = (uint32_t)d;
    p->column = (uint32_t)column;
    *out_instance = p;
    return 0;
}

/* [control thread] */
static void p2c_destroy(void *instance)
{
    free(instance);
}

/* Sign of a - b without overflow or loss of precision. */
#define P2C_SIGN(a, b) (((a) > (b)) - ((a) < (b)))

/* -1, 0 or 1 as row a's value in `column` is below, equal to or above row
 * b's. Each column is compared in its own type: no rounding to double. */
static int compare_rows(const wsel_table *t, uint32_t column, uint32_t a, uint32_t b)
{
    switch (column) {
    case P2C_COLUMN_DECODE_BLOCKS:
        return P2C_SIGN(t->decode_blocks[a], t->decode_blocks[b]);
    case P2C_COLUMN_PREFILL_TOKENS:
        return P2C_SIGN(t->prefill_tokens[a], t->prefill_tokens[b]);
    case P2C_COLUMN_ACTIVE_REQUESTS:
        return P2C_SIGN(t->active_requests[a], t->active_requests[b]);
    default:
        return P2C_SIGN(t->cost[a], t->cost[b]);
    }
}

static int contains(const uint32_t *rows, uint32_t count, uint32_t row)
{
    for (uint32_t i = 0; i < count; i++)
        if (rows[i] == row)
            return 1;
    return 0;
}

/*
 * The fast path: draw rows uniformly from the whole table and keep each one
 * that is eligible (flags miss `skip`) and not kept yet, until d are kept or
 * P2C_DRAW_BUDGET draws are spent. Returns the number kept.
 *
 * When it keeps d rows they are a uniform d-subset of the eligible rows:
 * each kept row is uniform over the eligible rows not yet kept, and the
 * number of draws each step needs depends only on how many rows are
 * eligible and kept, not on which, so running out of budget (after which
 * the caller starts over with draw_by_scan) favours no subset.
 */
static uint32_t draw_by_rejection(const p2c *p, const wsel_table *t, wsel_rng *rng,
                                  uint8_t skip, uint32_t *kept)
{
    uint32_t count = 0;
    for (uint32_t tries = 0; tries < P2C_DRAW_BUDGET && count < p->d; tries++) {
        uint32_t row = wsel_call_rng_below(p->host, rng, t->num_rows);
        if ((t->flags[row] & skip) == 0 && !contains(kept, count, row))
            kept[count++] = row;
    }
    return count;
}

/*
 * The exact path, for tables with few eligible rows: one scan with reservoir
 * sampling (Algorithm R). The first d eligible rows fill the reservoir;
 * each later one, the e-th eligible row (0-based), takes a random slot with
 * probability d / (e + 1). The result is a uniform d-subset, or every
 * eligible row when there are at most d. Returns how many rows were kept
 * (0 when none is eligible).
 */
static uint32_t draw_by_scan(const p2c *p, const wsel_table *t, wsel_rng *rng,
                             uint8_t skip, uint32_t *kept)
{
    uint32_t eligible = 0;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (t->flags[i] & skip)
            continue;
        if (eligible < p->d) {
            kept[eligible] = i;
        } else {
            uint32_t slot = wsel_call_rng_below(p->host, rng, eligible + 1);
            if (slot < p->d)
                kept[slot] = i;
        }
        eligible++;
    }
    return eligible < p->d ? eligible : p->d;
}

/* [select thread, concurrent] No allocation: candidates live in kept[]. */
static int32_t p2c_select(void *instance, const wsel_request *request,
                          const wsel_table *table, wsel_choice *choice)
{
    const p2c *p = instance;
    uint32_t kept[P2C_MAX_D];
    uint8_t skip;
    /* The host's eligible-row rule (inline in a 1.0 host): idle rows, or
     * the busy ones when every eligible row is busy. Without a count the
     * scan stops at the first idle row. */
    int32_t rc =
        wsel_call_eligible_skip(p->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;

    uint32_t count = draw_by_rejection(p, table, request->rng, skip, kept);
    if (count < p->d) /* few eligible rows: count them exactly */
        count = draw_by_scan(p, table, request->rng, skip, kept);
    if (count == 0) /* a host whose eligible_skip said otherwise */
        return WSEL_ENOCANDIDATE;

    /* The lowest value wins; among `ties` equal ones, each newcomer takes
     * over with probability 1 / ties, which leaves each of them equally
     * likely. */
    uint32_t best = kept[0], ties = 1;
    for (uint32_t i = 1; i < count; i++) {
        int order = compare_rows(table, p->column, kept[i], best);
        if (order < 0) {
            best = kept[i];
            ties = 1;
        } else if (order == 0 &&
                   wsel_call_rng_below(p->host, request->rng, ++ties) == 0) {
            best = kept[i];
        }
    }
    wsel_choice_answer(choice, best,
                       wsel_reason_unless_all_busy(skip, WSEL_REASON_SAMPLED_BEST));
    return 0;
}

/* [select thread, concurrent] Every row's value in the configured column,
 * lower better: what the d sampled rows are compared by. */
static int32_t p2c_score(void *instance, const wsel_request *request, const wsel_table *t,
                         double *scores)
{
    const p2c *p = instance;
    (void)request;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        switch (p->column) {
        case P2C_COLUMN_DECODE_BLOCKS:
            scores[i] = (double)t->decode_blocks[i];
            break;
        case P2C_COLUMN_PREFILL_TOKENS:
            scores[i] = (double)t->prefill_tokens[i];
            break;
        case P2C_COLUMN_ACTIVE_REQUESTS:
            scores[i] = (double)t->active_requests[i];
            break;
        default:
            scores[i] = t->cost[i];
        }
    }
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "p2c",
    .version = "1.0.0",
    .description = "power of d choices: the lowest of d distinct random eligible "
                   "ranks by a chosen column",
    .params = p2c_params,
    .num_params = P2C_NUM_PARAMS,
    .param_def_size = sizeof(wsel_param_def),
    .create = p2c_create,
    .destroy = p2c_destroy,
    .select = p2c_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
    .score = p2c_score,
};
