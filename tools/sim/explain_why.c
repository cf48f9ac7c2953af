// SPDX-License-Identifier: Apache-2.0
/*
 * explain_why.c -- which rows mattered for one request and why the answer
 * won.
 */
#include "explain_why.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

const char *sim_explain_reason_name(uint32_t reason)
{
    static const char *const names[] = {
        [WSEL_REASON_NONE] = "none",         [WSEL_REASON_CHEAPEST] = "cheapest",
        [WSEL_REASON_SAMPLED] = "sampled",   [WSEL_REASON_STICKY] = "sticky",
        [WSEL_REASON_SPILLED] = "spilled",   [WSEL_REASON_HASHED] = "hashed",
        [WSEL_REASON_RANDOM] = "random",     [WSEL_REASON_SAMPLED_BEST] = "sampled_best",
        [WSEL_REASON_ROTATION] = "rotation", [WSEL_REASON_ALL_BUSY] = "all_busy",
        [WSEL_REASON_GROUP] = "group",
    };
    if (reason >= WSEL_REASON_PLUGIN)
        return "plugin";
    if (reason >= sizeof(names) / sizeof(names[0]) || names[reason] == NULL)
        return "unknown";
    return names[reason];
}

/* The sort key and eligibility of every row. */
typedef struct keys {
    const wsel_table *t;
    const double *scores; /* NULL: costs */
    uint8_t skip;
} keys;

static double key_of(const keys *k, uint32_t i)
{
    return k->scores ? k->scores[i] : k->t->cost[i];
}

static int eligible(const keys *k, uint32_t i)
{
    return (k->t->flags[i] & k->skip) == 0;
}

/* a before b: eligible first, then the lower key, then the lower row. */
static int before(const keys *k, uint32_t a, uint32_t b)
{
    int ea = eligible(k, a), eb = eligible(k, b);
    if (ea != eb)
        return ea;
    double ka = key_of(k, a), kb = key_of(k, b);
    if (ka != kb)
        return ka < kb;
    return a < b;
}

/* Insertion sort: tables here have at most SIM_MAX_RANKS rows. */
static void sort_rows(const keys *k, uint32_t *order, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = i, j = i;
        while (j > 0 && before(k, v, order[j - 1])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

/* Softmax probability of `row` among the eligible rows at temperature t,
 * on keys min-max normalised as Dynamo's softmax_sample does. */
static double probability(const keys *k, uint32_t n, uint32_t row, double t)
{
    double lo = INFINITY, hi = -INFINITY;
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!eligible(k, i))
            continue;
        count++;
        lo = fmin(lo, key_of(k, i));
        hi = fmax(hi, key_of(k, i));
    }
    if (count == 0 || !eligible(k, row))
        return 0.0;
    if (!(hi > lo) || !isfinite(hi - lo))
        return 1.0 / count;
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++)
        if (eligible(k, i))
            sum += exp(-((key_of(k, i) - lo) / (hi - lo)) / t);
    return exp(-((key_of(k, row) - lo) / (hi - lo)) / t) / sum;
}

/* Append to the record's why. */
static void say(sim_explain_record *r, const char *fmt, ...)
{
    size_t used = strlen(r->why);
    if (used + 1 >= sizeof(r->why))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why + used, sizeof(r->why) - used, fmt, ap);
    va_end(ap);
}

/* The plugin's reason in words (nothing for WSEL_REASON_NONE). */
static void say_reason(sim_explain_record *r)
{
    if (r->answer == WSEL_ANSWER_FALLBACK) {
        say(r, "the host answered (fallback: %s) with argmin of the default cost",
            r->fallback >= 0 ? wsel_fallback_reason_name((uint32_t)r->fallback)
                             : "unknown");
        say(r, "; ");
        return;
    }
    switch (r->reason) {
    case WSEL_REASON_NONE:
        return;
    case WSEL_REASON_CHEAPEST:
        say(r, "cheapest");
        break;
    case WSEL_REASON_SAMPLED:
        say(r, "sampled at temperature %.3g with p = %.3f", r->temperature,
            r->probability);
        break;
    case WSEL_REASON_STICKY:
        say(r, "sticky: kept where its prefix or session went before");
        break;
    case WSEL_REASON_SPILLED:
        say(r, "spilled: moved away from where it would have stuck (owner too loaded)");
        break;
    case WSEL_REASON_HASHED:
        say(r, "hashed: the owner its key hashes to");
        break;
    case WSEL_REASON_RANDOM:
        say(r, "a random draw among %u eligible rows", r->eligible);
        break;
    case WSEL_REASON_SAMPLED_BEST:
        say(r, "the better of a few random candidates");
        break;
    case WSEL_REASON_ROTATION:
        say(r, "next in the rotation");
        break;
    case WSEL_REASON_ALL_BUSY:
        say(r, "every eligible row was busy: a busy row beats no answer");
        break;
    case WSEL_REASON_GROUP:
        say(r, "the least loaded worker group");
        break;
    default:
        say(r, "reason %u (%s)", r->reason, sim_explain_reason_name(r->reason));
        break;
    }
    say(r, "; ");
}

/* What sets the chosen row apart: its place by the key, its cache. */
static void say_distinction(sim_explain_record *r, const keys *k, const uint32_t *order,
                            const uint32_t *place)
{
    const char *kn = k->scores ? "score" : "cost";
    const uint32_t n = k->t->num_rows, row = r->row;
    double best = key_of(k, order[0]), mine = key_of(k, row);
    if (eligible(k, row) && mine == best) {
        uint32_t ties = 0;
        for (uint32_t i = 0; i < n; i++)
            ties += eligible(k, i) && key_of(k, i) == best;
        if (ties > 1)
            say(r, "lowest %s (%.4g), tied with %u other row%s", kn, mine, ties - 1,
                ties == 2 ? "" : "s");
        else if (n > 1 && eligible(k, order[1]))
            say(r, "lowest %s (%.4g; next %.4g)", kn, mine, key_of(k, order[1]));
        else
            say(r, "the only eligible row (%s %.4g)", kn, mine);
    } else {
        say(r, "place %u of %u by %s (%.4g; best %.4g)", place[row], n, kn, mine, best);
    }
    uint32_t most = 0, most_row = row;
    for (uint32_t i = 0; i < n; i++)
        if (k->t->overlap_blocks[i] > most) {
            most = k->t->overlap_blocks[i];
            most_row = i;
        }
    uint32_t have = k->t->overlap_blocks[row];
    if (most > 0 && have == most)
        say(r, ", most cached blocks (%u of %u)", have, r->blocks);
    else if (most > 0)
        say(r, ", %u cached blocks here (most: %u on row %u)", have, most, most_row);
    if (k->t->flags[row] & WSEL_ROW_BUSY)
        say(r, ", busy");
    if (r->reason == WSEL_REASON_NONE && r->answer == WSEL_ANSWER_PLUGIN &&
        !isnan(r->probability))
        say(r, "; at temperature %.3g its probability was %.3f", r->temperature,
            r->probability);
}

static void copy_row(sim_explain_row *d, const keys *k, uint32_t i, uint32_t place)
{
    const wsel_table *t = k->t;
    d->row = i;
    d->worker_id = t->worker_id[i];
    d->dp_rank = t->dp_rank[i];
    d->overlap_blocks = t->overlap_blocks[i];
    d->prefill_tokens = t->prefill_tokens[i];
    d->decode_blocks = t->decode_blocks[i];
    d->cost = t->cost[i];
    d->score = k->scores ? k->scores[i] : NAN;
    d->flags = t->flags[i];
    d->place = place;
}

void sim_explain_fill(sim_explain_record *r, const wsel_request *request,
                      const wsel_table *table, const wsel_choice *choice,
                      const double *scores, uint32_t *order, int has_temperature,
                      double temperature)
{
    const uint32_t n = table->num_rows;
    r->request_id = request->request_id;
    r->arrival_us = request->timestamp_us;
    r->isl = request->isl_tokens;
    r->blocks = request->num_block_hashes;
    r->num_rows = n;
    r->row = choice->row;
    r->reason = r->answer == WSEL_ANSWER_PLUGIN ? choice->reason : WSEL_REASON_NONE;
    r->choice_flags = r->answer == WSEL_ANSWER_PLUGIN ? choice->flags : 0;
    r->choice_score = r->choice_flags & WSEL_CHOICE_SCORED ? choice->score : NAN;
    r->has_scores = scores != NULL;
    keys k = {table, scores, WSEL_ROW_EXCLUDED};
    uint32_t count = 0;
    if (wsel_eligible_skip(table->flags, n, &k.skip, &count) != 0)
        k.skip = WSEL_ROW_EXCLUDED;
    r->eligible = count;
    r->temperature = wsel_request_temperature(request, has_temperature ? temperature : 0.0);
    r->probability = NAN;
    if (r->temperature > 0.0 && r->answer == WSEL_ANSWER_PLUGIN &&
        (r->reason == WSEL_REASON_SAMPLED || r->reason == WSEL_REASON_NONE))
        r->probability = probability(&k, n, r->row, r->temperature);

    sort_rows(&k, order, n);
    uint32_t place[SIM_MAX_RANKS];
    for (uint32_t p = 0; p < n && p < SIM_MAX_RANKS; p++)
        place[order[p]] = p + 1;
    /* The rows shown: the best, the chosen, the most cached; by place. */
    uint32_t most = 0, most_row = n;
    for (uint32_t p = 0; p < n; p++)
        if (table->overlap_blocks[order[p]] > most) {
            most = table->overlap_blocks[order[p]];
            most_row = order[p];
        }
    r->num_shown = 0;
    for (uint32_t p = 0; p < n; p++) {
        uint32_t i = order[p];
        if (p < SIM_EXPLAIN_TOP || i == r->row || i == most_row) {
            sim_explain_row *d = &r->rows[r->num_shown++];
            copy_row(d, &k, i, p + 1);
            d->chosen = i == r->row;
            d->most_cached = i == most_row;
        }
    }
    r->why[0] = '\0';
    say_reason(r);
    say_distinction(r, &k, order, place);
}
