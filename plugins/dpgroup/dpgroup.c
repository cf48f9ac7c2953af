// SPDX-License-Identifier: Apache-2.0
/*
 * dpgroup -- score workers as the lockstep engines they are: the fix for
 * data-parallel over-subscription.
 *
 * A data-parallel engine steps all its ranks together, so a worker is as
 * slow as its busiest rank. Rank-level policies see a worker with 8 ranks
 * as 8 independent candidates and keep feeding its idle ranks while one
 * saturated rank stretches every shared step. This policy aggregates load
 * per worker (the group view) and
 *   - lockstep (default; see below): picks the row minimising the wait;
 *   - two-level: picks the worker by
 *       aggregate(decode_blocks over its ranks)
 *       + overlap_score_weight * prefill_tokens / block_size
 *     (prefill of its best-overlap eligible rank), then the cheapest
 *     eligible rank inside it;
 *   - blend: picks the row minimising cost + alpha * mean rank load of its
 *     worker;
 *   - lockstep: chooses in two stages. Stage 1 keeps the rows where the
 *     request's prefill wait on a lockstep engine (the worker's current
 *     step, paced by the largest prefill chunk on any of its ranks, at most
 *     token_budget tokens; its own rank's remaining backlog; its own
 *     uncached tokens) is within one token budget of the least (band_limit);
 *     stage 2 picks among them the row minimising that wait plus a decode
 *     load that is half its own rank's and half its worker's pace (the
 *     busiest rank; see lockstep_score). On a one-rank worker stage 2's
 *     score is exactly Dynamo's cost.
 * Exact ties are broken uniformly at random with the request's stream.
 * Eligible rows follow the host's rule (eligible_skip; inline in a 1.0
 * host). The score function (ABI 1.1) gives every row the value its mode
 * minimises (two-level: its worker's load plus its own prefill), so the
 * policy composes in `pipeline`.
 * Keeps no state: safe from any number of threads.
 */
#include <math.h> /* signbit */
#include <stdlib.h>

#include "row_find.h"
#include "wsel.h"

/* The table's order is what a config maps to: append, never insert. */
enum { P_MODE, P_AGGREGATE, P_ALPHA, P_TOKEN_BUDGET, P_COUNT };
enum { MODE_TWO_LEVEL, MODE_BLEND, MODE_LOCKSTEP };
enum { AGG_MAX, AGG_MEAN, AGG_SUM };

static const char *const mode_names[] = {"two-level", "blend", "lockstep", NULL};
static const char *const aggregate_names[] = {"max", "mean", "sum", NULL};

static const wsel_param_def dpgroup_params[P_COUNT] = {
    [P_MODE] = {.name = "mode",
                .doc = "two-level: choose the worker, then its rank; blend: rank cost + "
                       "alpha * worker load; lockstep: the row's wait on its worker's "
                       "lockstep steps",
                .type = WSEL_PARAM_ENUM,
                .default_value = MODE_LOCKSTEP,
                .min_value = MODE_TWO_LEVEL,
                .max_value = MODE_LOCKSTEP,
                .choices = mode_names},
    [P_AGGREGATE] = {.name = "aggregate",
                     .doc = "two-level: a worker's load from its ranks' decode_blocks",
                     .type = WSEL_PARAM_ENUM,
                     .default_value = AGG_MAX,
                     .min_value = AGG_MAX,
                     .max_value = AGG_SUM,
                     .choices = aggregate_names},
    [P_ALPHA] = {.name = "alpha",
                 .doc = "blend: weight of the worker's mean rank load (blocks)",
                 .type = WSEL_PARAM_DOUBLE,
                 .default_value = 1.0,
                 .min_value = 0.0,
                 .max_value = 100.0},
    /* 8,192 = Dynamo mocker's max batched tokens per step. */
    [P_TOKEN_BUDGET] = {.name = "token_budget",
                        .doc = "lockstep: tokens a rank prefills per engine step",
                        .type = WSEL_PARAM_INT,
                        .default_value = 8192.0,
                        .min_value = 1.0,
                        .max_value = 1048576.0},
};

typedef struct dpgroup {
    const wsel_host_api *host;
    uint32_t mode;
    uint32_t aggregate;
    double alpha;
    uint64_t token_budget;
} dpgroup;

static int32_t dpgroup_create(const wsel_host_api *host, const double *params,
                              uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != P_COUNT)
        return WSEL_EINVAL;
    dpgroup *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return WSEL_ENOMEM;
    d->host = host;
    d->mode = (uint32_t)params[P_MODE];
    d->aggregate = (uint32_t)params[P_AGGREGATE];
    d->alpha = params[P_ALPHA];
    d->token_budget = (uint64_t)params[P_TOKEN_BUDGET];
    *out_instance = d;
    return 0;
}

static void dpgroup_destroy(void *instance)
{
    free(instance);
}

/* Uniform random tie-break over a stream of equal scores (reservoir of one):
 * the k-th tie (k >= 2) replaces the kept one with probability 1/k. */
typedef struct tie_break {
    const wsel_host_api *host;
    wsel_rng *rng;
    double best;
    uint32_t ties;
    uint32_t pick;
} tie_break;

static void tie_offer(tie_break *tb, double score, uint32_t index)
{
    if (tb->ties == 0 || score < tb->best) {
        tb->best = score;
        tb->ties = 1;
        tb->pick = index;
        return;
    }
    if (score > tb->best)
        return;
    tb->ties++;
    /* floor(r * ties / 2^32) with r uniform on 32 bits: 1/ties, within 2^-32. */
    uint64_t r = tb->host->rng_u64(tb->rng) >> 32;
    if (((r * tb->ties) >> 32) == 0)
        tb->pick = index;
}

/* A worker's load from all its ranks' decode_blocks: a rank the router may
 * not use still steps in lockstep with the others. */
static double worker_load(const wsel_table *t, uint32_t g, uint32_t aggregate)
{
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    double sum = 0.0, max = 0.0;
    for (uint32_t i = first; i < first + count; i++) {
        double load = (double)t->decode_blocks[i];
        sum += load;
        if (load > max)
            max = load;
    }
    if (aggregate == AGG_MAX)
        return max;
    return aggregate == AGG_MEAN ? sum / (double)count : sum;
}

/* Cheapest eligible row of group g, ties at random; returns 0 when the
 * group has none. */
static int cheapest_row(const dpgroup *d, const wsel_request *req, const wsel_table *t,
                        uint32_t g, uint8_t skip, uint32_t *out_row)
{
    tie_break tb = {d->host, req->rng, 0.0, 0, 0};
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    for (uint32_t i = first; i < first + count; i++)
        if ((t->flags[i] & skip) == 0)
            tie_offer(&tb, t->cost[i], i);
    if (tb.ties == 0)
        return 0;
    *out_row = tb.pick;
    return 1;
}

/* Prefill work of group g's best-overlap eligible rank (fewest prefill
 * tokens among equal overlaps), in cost units; returns 0 when the group has
 * no eligible rank. */
static int best_overlap_prefill(const wsel_request *req, const wsel_table *t, uint32_t g,
                                uint8_t skip, double *out_prefill)
{
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    uint32_t best = UINT32_MAX;
    for (uint32_t i = first; i < first + count; i++) {
        if (t->flags[i] & skip)
            continue;
        if (best == UINT32_MAX || t->overlap_blocks[i] > t->overlap_blocks[best] ||
            (t->overlap_blocks[i] == t->overlap_blocks[best] &&
             t->prefill_tokens[i] < t->prefill_tokens[best]))
            best = i;
    }
    if (best == UINT32_MAX)
        return 0;
    *out_prefill = req->overlap_score_weight * (double)t->prefill_tokens[best] /
                   (double)req->block_size;
    return 1;
}

static int32_t select_two_level(const dpgroup *d, const wsel_request *req,
                                const wsel_table *t, uint8_t skip, uint32_t *out_row)
{
    tie_break tb = {d->host, req->rng, 0.0, 0, 0};
    for (uint32_t g = 0; g < t->num_groups; g++) {
        double prefill;
        if (!best_overlap_prefill(req, t, g, skip, &prefill))
            continue;
        tie_offer(&tb, worker_load(t, g, d->aggregate) + prefill, g);
    }
    if (tb.ties == 0 || !cheapest_row(d, req, t, tb.pick, skip, out_row))
        return WSEL_ENOCANDIDATE;
    return 0;
}

static int32_t select_blend(const dpgroup *d, const wsel_request *req,
                            const wsel_table *t, uint8_t skip, uint32_t *out_row)
{
    tie_break tb = {d->host, req->rng, 0.0, 0, 0};
    for (uint32_t g = 0; g < t->num_groups; g++) {
        double penalty = d->alpha * worker_load(t, g, AGG_MEAN);
        uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
        for (uint32_t i = first; i < first + count; i++)
            if ((t->flags[i] & skip) == 0)
                tie_offer(&tb, t->cost[i] + penalty, i);
    }
    if (tb.ties == 0)
        return WSEL_ENOCANDIDATE;
    *out_row = tb.pick;
    return 0;
}

/* The request's size, read and divided once per select. */
typedef struct request_size {
    uint64_t tokens; /* isl */
    uint64_t block;  /* tokens per block */
    uint64_t blocks; /* whole blocks: isl / block */
} request_size;

/* What one rank holds for and besides this request. */
typedef struct rank_load {
    uint64_t uncached; /* tokens of this request the rank must prefill */
    uint64_t backlog;  /* its queued prefill without this request (tokens) */
    uint64_t active;   /* its active decode without this request (blocks) */
} rank_load;

/* Splits row i's predictive load (which already counts this request) into
 * this request's part and the rest, clamping at 0. A row without a load
 * record holds Dynamo's defaults (isl, isl / block_size), which describe
 * this request alone on an idle rank: no backlog, nothing active. */
static inline rank_load rank_load_of(const request_size *req, const wsel_table *t,
                                     uint32_t i)
{
    uint64_t overlap = t->overlap_blocks[i], cached = overlap * req->block;
    uint64_t uncached = req->tokens > cached ? req->tokens - cached : 0;
    uint64_t new_blocks = req->blocks > overlap ? req->blocks - overlap : 0;
    if (t->flags[i] & WSEL_ROW_NO_LOAD) {
        uncached = t->prefill_tokens[i];
        new_blocks = t->decode_blocks[i];
    }
    rank_load l = {uncached, 0, 0};
    if (t->prefill_tokens[i] > uncached)
        l.backlog = t->prefill_tokens[i] - uncached;
    if (t->decode_blocks[i] > new_blocks)
        l.active = t->decode_blocks[i] - new_blocks;
    return l;
}

/* a + b, or UINT64_MAX where that would wrap (only absurd loads reach it). */
static inline uint64_t add_saturating(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* What paces a worker's lockstep steps, over ALL its ranks (excluded and
 * busy ones still step with the others): its largest prefill backlog, and
 * its two largest active decodes, so that the largest among a row's
 * siblings is found in O(1). */
typedef struct group_pace {
    uint64_t max_backlog;
    uint64_t top_active;
    uint64_t second_active; /* 0 for a one-rank worker */
    uint32_t top_row;
} group_pace;

/* Ranks of a group whose loads a pass computes once, on the stack; a
 * larger group's are computed again per row. */
#define GROUP_CHUNK 64u

/* Row i's load into its group's pace (first: the group's first row). */
static inline void group_pace_add(group_pace *p, rank_load l, uint32_t i, uint32_t first)
{
    p->max_backlog = l.backlog > p->max_backlog ? l.backlog : p->max_backlog;
    if (i == first || l.active > p->top_active) {
        p->second_active = i == first ? 0 : p->top_active;
        p->top_active = l.active;
        p->top_row = i;
    } else if (l.active > p->second_active) {
        p->second_active = l.active;
    }
}

/* Group g's pace; when `loads` is not NULL (the group has at most
 * GROUP_CHUNK ranks) also each rank's load, loads[i - first]. */
static group_pace group_pace_of(const request_size *req, const wsel_table *restrict t, uint32_t g,
                                rank_load *restrict loads)
{
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    group_pace p = {0, 0, 0, first};
    for (uint32_t i = first; i < first + count; i++) {
        rank_load l = rank_load_of(req, t, i);
        if (loads != NULL)
            loads[i - first] = l;
        group_pace_add(&p, l, i, first);
    }
    return p;
}

/* Row r's load: from the pass's buffer when the group has one. */
static inline rank_load load_at(const request_size *req, const wsel_table *t,
                                const rank_load *loads, uint32_t first, uint32_t r)
{
    return loads != NULL ? loads[r - first] : rank_load_of(req, t, r);
}

/* The request's wait on a row of load l in tokens: the worker's current
 * step (its largest backlog, at most token_budget), then the rest of its
 * own rank's backlog, then its own uncached tokens. Saturates (only absurd
 * loads reach UINT64_MAX). */
static inline uint64_t lockstep_wait(const dpgroup *d, const group_pace *p, rank_load l)
{
    uint64_t step = p->max_backlog < d->token_budget ? p->max_backlog : d->token_budget;
    uint64_t rest = l.backlog > d->token_budget ? l.backlog - d->token_budget : 0;
    return add_saturating(add_saturating(step, rest), l.uncached);
}

/*
 * The lockstep score of row r (lower is better), in Dynamo's cost units:
 *   overlap_score_weight * wait_r / block_size
 *   + (decode_blocks_r + max(decode_blocks_r, max over siblings i of active_i)) / 2
 * where wait_r = min(L, budget) + max(backlog_r - budget, 0) + uncached_r
 * (lockstep_wait, passed in as `tokens`: every caller needs it too) and L
 * is the worker's largest backlog. The request first
 * waits for the worker's current step, paced by the largest prefill chunk
 * on any of its ranks (at most one token budget), then for its own rank's
 * remaining backlog, then prefills its own uncached tokens.
 * The decode part weighs two loads equally: the rank's own
 * (decode_blocks_r, Dynamo's term: its KV room and its own sequences) and
 * the worker's pace after the request lands (its busiest rank, which every
 * lockstep step waits for). The pace alone makes every rank below the
 * busiest look equally free, so a worker's ranks fill unevenly and run out
 * of KV room; the own load alone is Dynamo's cost, blind to the lockstep.
 * (No charge for blocks beyond kv_capacity_blocks: a router's active blocks
 * count a shared prefix once per request, so on shared prompts that charge
 * pushed requests off the ranks caching them.)
 * When the ranks are even, or on a one-rank worker (no siblings), the
 * half-sum is decode_blocks_r, Dynamo's term. With a backlog of at most
 * token_budget a one-rank worker's score is Dynamo's cost: L = backlog_r,
 * so the prefill part is prefill_tokens_r.
 */
static inline double lockstep_score(const wsel_request *req, const wsel_table *t,
                             const group_pace *p, uint32_t r, uint64_t tokens)
{
    uint64_t sibling = r == p->top_row ? p->second_active : p->top_active;
    uint64_t own = t->decode_blocks[r];
    uint64_t pace = own > sibling ? own : sibling;
    return req->overlap_score_weight * (double)tokens / (double)req->block_size +
           ((double)own + (double)pace) / 2.0;
}

/* The part of row i's wait that is its own (lockstep_wait without the
 * worker's step): the rest of its backlog past one budget, then its
 * uncached tokens. Saturating addition is associative on these
 * non-negative counts, so wait = add_saturating(step, tail). */
static inline uint64_t wait_tail(const dpgroup *d, rank_load l)
{
    uint64_t rest = l.backlog > d->token_budget ? l.backlog - d->token_budget : 0;
    return add_saturating(rest, l.uncached);
}

/* The worker's step: its largest backlog, at most one token budget. */
static inline uint64_t step_of(const dpgroup *d, uint64_t max_backlog)
{
    return max_backlog < d->token_budget ? max_backlog : d->token_budget;
}

/* Group g's least wait over the rows the host lets the policy use: its
 * step plus its least tail, in one read of the group. Returns 0 when no
 * row of it is usable. */
static int group_least_wait(const dpgroup *d, const request_size *size, const wsel_table *t,
                            uint32_t g, uint8_t skip, uint64_t *out_wait)
{
    uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
    uint64_t max_backlog = 0, least_tail = UINT64_MAX;
    int usable = 0;
    for (uint32_t r = first; r < end; r++) {
        rank_load l = rank_load_of(size, t, r);
        max_backlog = l.backlog > max_backlog ? l.backlog : max_backlog;
        if (t->flags[r] & skip)
            continue;
        uint64_t tail = wait_tail(d, l);
        least_tail = tail < least_tail ? tail : least_tail;
        usable = 1;
    }
    *out_wait = add_saturating(step_of(d, max_backlog), least_tail);
    return usable;
}

/*
 * The band of the two-stage choice: the least wait over rows the host lets
 * the policy use, plus one token budget (one full engine step of prefill).
 * Stage 1 keeps the rows whose wait is within it, so no request queues
 * more than one step behind the shortest queue it could join (the long
 * prompts that set TTFT p99); stage 2 takes the lowest lockstep score among
 * them (the decode pace and KV room that set group balance). A group's
 * least wait is at least the prefill_tokens of the row giving it (that
 * row's step share plus its tail: docs/bench.md, "Scaling"), so once one
 * group is usable only groups with a row below the best wait so far are
 * read. Returns 0 when no row is usable.
 */
static int band_limit(const dpgroup *d, const request_size *size, const wsel_table *t,
                      uint8_t skip, uint64_t *out_limit)
{
    uint64_t best = UINT64_MAX;
    int any = 0;
    for (uint32_t g = 0; g < t->num_groups; g++) {
        if (any) {
            if (best == 0)
                break;
            uint32_t row = row_find_at_most_u64(t->prefill_tokens, t->group_first_row[g],
                                                t->num_rows, best - 1);
            if (row == t->num_rows)
                break;
            g = row_find_group(t, g, row);
        }
        uint64_t w;
        if (!group_least_wait(d, size, t, g, skip, &w))
            continue;
        best = w < best ? w : best;
        any = 1;
    }
    *out_limit = add_saturating(best, d->token_budget);
    return any;
}

/* A row of a group as stage 2 reads it: its tail (UINT64_MAX + skipped
 * flag for a row the host's rule skips) and its active decode. */
typedef struct stage2_row {
    uint64_t tail;
    uint64_t active;
    uint32_t skipped;
} stage2_row;

/* 1 when every row of a group scores above `best`, the prefill weight
 * being >= 0. A score is at least its decode part, (own + pace) / 2 as
 * computed: own is at least the group's least decode load, and a rank's
 * pace at least its own load and the group's second largest active
 * decode, which is at least that of the loads less the request's blocks
 * (0 for a row without a load record). Reads one column and the flags. */
static int group_scores_above(const request_size *size, const wsel_table *t,
                              uint32_t first, uint32_t count, double best)
{
    uint64_t least = UINT64_MAX, top = 0, second = 0;
    for (uint32_t i = first; i < first + count; i++) {
        uint64_t load = t->decode_blocks[i];
        least = load < least ? load : least;
        uint64_t active = load > size->blocks ? load - size->blocks : 0;
        active = t->flags[i] & WSEL_ROW_NO_LOAD ? 0 : active;
        second = active > top ? top : active > second ? active : second;
        top = active > top ? active : top;
    }
    uint64_t pace = second > least ? second : least;
    return ((double)least + (double)pace) / 2.0 > best;
}

/* Stage 2 over group g: the pace and every row's tail in one read of the
 * group (GROUP_CHUNK ranks at a time on the stack), then the rows in the
 * band offered in row order. */
static void choose_in_group(const dpgroup *d, const wsel_request *req,
                            const request_size *size, const wsel_table *t, uint32_t g,
                            uint8_t skip, uint64_t limit, tie_break *tb)
{
    stage2_row rows[GROUP_CHUNK];
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    int prune = req->overlap_score_weight >= 0.0;
    if (prune && tb->ties != 0 && group_scores_above(size, t, first, count, tb->best))
        return;
    int buffered = count <= GROUP_CHUNK;
    group_pace p = {0, 0, 0, first};
    for (uint32_t i = first; i < first + count; i++) {
        rank_load l = rank_load_of(size, t, i);
        if (buffered)
            rows[i - first] = (stage2_row){wait_tail(d, l), l.active,
                                           (t->flags[i] & skip) != 0};
        group_pace_add(&p, l, i, first);
    }
    uint64_t step = step_of(d, p.max_backlog);
    for (uint32_t r = first; r < first + count; r++) {
        stage2_row s = buffered ? rows[r - first]
                                : (stage2_row){wait_tail(d, rank_load_of(size, t, r)), 0,
                                               (t->flags[r] & skip) != 0};
        if (s.skipped)
            continue;
        /* A score is at least its own decode load when the prefill weight
         * is >= 0 (pace >= own, rounding is monotone): skip what loses. */
        if (prune && tb->ties != 0 && (double)t->decode_blocks[r] > tb->best)
            continue;
        uint64_t wait = add_saturating(step, s.tail);
        if (wait > limit)
            continue;
        double score = lockstep_score(req, t, &p, r, wait);
        if (tb->ties == 0 || score <= tb->best) /* tie_offer's own test, inline */
            tie_offer(tb, score, r);
    }
}

/* What a row needs for stage 2 to read it: prefill_tokens at most
 * `prefill` and decode_blocks at most `decode`; with `weighted`, also
 * prefill_tokens * per_token + decode_blocks at most `score`
 * (row_weighted_at_most). */
typedef struct stage2_bounds {
    uint64_t prefill;
    uint64_t decode;
    int weighted;
    double per_token;
    double score;
} stage2_bounds;

/*
 * The bounds outside which a row cannot change stage 2's choice. A row's
 * wait is at least its prefill_tokens (see band_limit), so a row above
 * the band's limit is out of it. Once a row is offered and the prefill
 * weight w is >= 0, a row's score is at least
 *   L = w * prefill_tokens / block_size + decode_blocks
 * as computed in that order (its wait is at least its prefill, its pace
 * at least its own load, rounding is monotone), so a row with L above the
 * best scores above it and draws nothing. Each term alone bounds L:
 * below 2^53 for the decode load; a margin of 2^-40 for the prefill (the
 * rounding of three operations is below 2^-51). Their sum: the scan
 * computes prefill * (w / block_size) + decode instead, within 6.1 units
 * of 2^-53 of L (every term >= 0, no underflow for w of 0 or in
 * [2^-500, 2^500]), and keeps the rows at most best * (1 + 2^-40).
 */
static stage2_bounds stage2_bounds_of(const wsel_request *req, const tie_break *tb,
                                      uint64_t limit)
{
    stage2_bounds b = {limit, UINT64_MAX, 0, 0.0, 0.0};
    double w = req->overlap_score_weight, best = tb->best;
    if (tb->ties == 0 || !(w >= 0.0) || !(best >= 0.0 && best < 0x1p53))
        return b;
    b.decode = (uint64_t)best; /* floor; exact below 2^53 */
    if (w == 0.0 || (w >= 0x1p-500 && w <= 0x1p500)) {
        b.weighted = 1;
        b.per_token = w / (double)req->block_size;
        b.score = best * (1.0 + 0x1p-40);
    }
    if (w >= 0x1p-500 && w <= 0x1p500) {
        double most = best * (double)req->block_size / w * (1.0 + 0x1p-40);
        if (most < 0x1p62 && (uint64_t)most + 1 < b.prefill)
            b.prefill = (uint64_t)most + 1;
    }
    return b;
}

/* Rows the sum's scan reads after each row inside both columns' bounds. */
#define STAGE2_SPAN 16u

/* The next row from `from` on that stage 2 may need (stage2_bounds_of),
 * or num_rows: the columns' bounds first (the cheaper scan, which skips
 * most rows of a loaded table), then their sum over the next
 * STAGE2_SPAN rows (which skips the rows of an idle one). */
static uint32_t stage2_next(const wsel_table *t, const stage2_bounds *b, uint32_t from)
{
    const uint32_t n = t->num_rows;
    for (;;) {
        uint32_t row = row_find_both_at_most_u64(t->prefill_tokens, b->prefill,
                                                 t->decode_blocks, b->decode, from, n);
        if (!b->weighted || row == n)
            return row;
        uint32_t stop = n - row > STAGE2_SPAN ? row + STAGE2_SPAN : n;
        row = row_find_weighted_at_most(t->prefill_tokens, b->prefill, b->per_token,
                                        t->decode_blocks, b->score, row, stop);
        if (row < stop)
            return row;
        from = stop;
    }
}

/* The two stages as two passes: the band, then the choice inside it,
 * reading only the groups holding a row inside stage2_bounds_of. (One
 * pass, replaying stage 2 whenever a smaller wait shrank the band past a
 * row already offered, took fewer instructions but more time from 16,384
 * rows: docs/bench.md, "Scaling".) */
static int32_t select_lockstep(const dpgroup *d, const wsel_request *req,
                               const wsel_table *t, uint8_t skip, uint32_t *out_row)
{
    if (req->block_size == 0) /* the ABI says > 0; never divide by it */
        return WSEL_EINVAL;
    tie_break tb = {d->host, req->rng, 0.0, 0, 0};
    request_size size = {req->isl_tokens, req->block_size,
                         req->isl_tokens / req->block_size};
    uint64_t limit;
    if (!band_limit(d, &size, t, skip, &limit))
        return WSEL_ENOCANDIDATE;
    for (uint32_t g = 0; g < t->num_groups; g++) {
        stage2_bounds b = stage2_bounds_of(req, &tb, limit);
        uint32_t row = stage2_next(t, &b, t->group_first_row[g]);
        if (row == t->num_rows)
            break;
        g = row_find_group(t, g, row);
        choose_in_group(d, req, &size, t, g, skip, limit, &tb);
    }
    if (tb.ties == 0)
        return WSEL_ENOCANDIDATE;
    *out_row = tb.pick;
    return 0;
}

/* Lockstep scores in the order select uses them: a row outside the band
 * scores above every row inside it (the band's highest score M, plus one,
 * plus its own score), so the least score is select's choice. The band is
 * taken over the rows the host's rule lets the policy use. */
static int32_t score_lockstep(const dpgroup *d, const wsel_request *req,
                              const wsel_table *t, double *scores)
{
    request_size size = {req->isl_tokens, req->block_size,
                         req->isl_tokens / req->block_size};
    uint8_t skip;
    int32_t erc = wsel_call_eligible_skip(d->host, t->flags, t->num_rows, &skip, NULL);
    if (erc < 0)
        return erc;
    uint64_t limit = UINT64_MAX;
    (void)band_limit(d, &size, t, skip, &limit);
    /* Scores are >= 0: a row outside the band is written negated (-0.0
     * for 0, so the sign bit marks it exactly) until the band's highest
     * score is known, then moved above it. */
    double top = 0.0;
    rank_load loads[GROUP_CHUNK];
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
        rank_load *buf = count <= GROUP_CHUNK ? loads : NULL;
        group_pace p = group_pace_of(&size, t, g, buf);
        for (uint32_t r = first; r < first + count; r++) {
            uint64_t wait = lockstep_wait(d, &p, load_at(&size, t, buf, first, r));
            double score = lockstep_score(req, t, &p, r, wait);
            scores[r] = wait <= limit ? score : -score;
            if (wait <= limit && score > top)
                top = score;
        }
    }
    for (uint32_t r = 0; r < t->num_rows; r++)
        if (signbit(scores[r]))
            scores[r] = -scores[r] + (top + 1.0);
    return 0;
}

/* [select thread, concurrent] Every row's value in the configured mode,
 * lower is better; no allocation. */
static int32_t dpgroup_score(void *instance, const wsel_request *req, const wsel_table *t,
                             double *scores)
{
    const dpgroup *d = instance;
    if (req->block_size == 0)
        return WSEL_EINVAL;
    if (d->mode == MODE_LOCKSTEP)
        return score_lockstep(d, req, t, scores);
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
        if (d->mode == MODE_BLEND) {
            double penalty = d->alpha * worker_load(t, g, AGG_MEAN);
            for (uint32_t r = first; r < first + count; r++)
                scores[r] = t->cost[r] + penalty;
        } else {
            double load = worker_load(t, g, d->aggregate);
            for (uint32_t r = first; r < first + count; r++)
                scores[r] = load + req->overlap_score_weight *
                                       (double)t->prefill_tokens[r] /
                                       (double)req->block_size;
        }
    }
    return 0;
}

static int32_t dpgroup_select(void *instance, const wsel_request *req,
                              const wsel_table *t, wsel_choice *choice)
{
    const dpgroup *d = instance;
    uint8_t skip;
    int32_t erc = wsel_call_eligible_skip(d->host, t->flags, t->num_rows, &skip, NULL);
    if (erc < 0)
        return erc;
    uint32_t row;
    int32_t rc;
    if (d->mode == MODE_LOCKSTEP)
        rc = select_lockstep(d, req, t, skip, &row);
    else if (d->mode == MODE_BLEND)
        rc = select_blend(d, req, t, skip, &row);
    else
        rc = select_two_level(d, req, t, skip, &row);
    if (rc != 0)
        return rc;
    wsel_choice_answer(choice, row,
                       wsel_reason_unless_all_busy(skip, d->mode == MODE_TWO_LEVEL
                                                             ? WSEL_REASON_GROUP
                                                             : WSEL_REASON_CHEAPEST));
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    .name = "dpgroup",
    .version = "1.5.2",
    .description = "data-parallel workers as the lockstep engines they are: ranks "
                   "within one engine step of the shortest prefill wait, then the "
                   "lowest wait plus decode pace",
    .params = dpgroup_params,
    .num_params = P_COUNT,
    .param_def_size = sizeof(wsel_param_def),
    .create = dpgroup_create,
    .destroy = dpgroup_destroy,
    .select = dpgroup_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
    .score = dpgroup_score,
};
