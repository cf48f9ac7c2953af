// SPDX-License-Identifier: Apache-2.0
/*
 * select.c -- the hot path: ask the live policy, check its answer, and
 * answer with the built-in policy whenever it cannot be used.
 *
 * Nothing here allocates, and nothing waits for a switch: the only lock
 * taken is the generation's own instance lock (exclusive for plugins that
 * do not declare WSEL_CAP_CONCURRENT_SELECT, shared for concurrent ones
 * with a topology hook, none otherwise), which the switcher never holds.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "isolated.h"
#include "table_guard.h"

static void count(wsel_padded_counter *c)
{
    atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
}

/* What the plugin cannot have changed: table_guard.c, on the calling
 * thread's stack. An isolated plugin writes only its slot's copy of the
 * table, so it needs none. */
typedef wsel_table_guard snapshot;

static void snapshot_take(snapshot *s, const wsel_table *table, int isolated)
{
    if (isolated) {
        s->flags = table->flags;
        s->cost = table->cost;
        return;
    }
    wsel_table_guard_take(s, table);
}

/* 1 when the plugin wrote the table's flags or cost column. */
static int snapshot_changed(const snapshot *s, const wsel_table *table, int isolated)
{
    return !isolated && wsel_table_guard_changed(s, table);
}

/* Argmin that cannot fail on costs a plugin wrote: a non-finite cost ranks
 * after every finite one (and all non-finite ones tie). Exact ties are
 * broken with the request's stream. WSEL_ENOCANDIDATE when no row passes
 * the mask. */
static int32_t robust_argmin(const double *cost, const uint8_t *flags, uint32_t n,
                             uint8_t skip, wsel_rng *rng, uint32_t *out)
{
    double best = 0.0;
    int best_finite = 0;
    uint32_t ties = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (flags[i] & skip)
            continue;
        int finite = isfinite(cost[i]);
        if (ties == 0 || (finite && !best_finite) ||
            (finite && best_finite && cost[i] < best)) {
            best = cost[i];
            best_finite = finite;
            ties = 1;
        } else if (finite == best_finite && (!finite || cost[i] == best)) {
            ties++;
        }
    }
    if (ties == 0)
        return WSEL_ENOCANDIDATE;
    uint32_t k = ties == 1 ? 0 : wsel_rng_below(rng, ties);
    for (uint32_t i = 0; i < n; i++) {
        if (flags[i] & skip)
            continue;
        int finite = isfinite(cost[i]);
        if (finite == best_finite && (!finite || cost[i] == best) && k-- == 0) {
            *out = i;
            return 0;
        }
    }
    return WSEL_ENOCANDIDATE; /* not reached */
}

/* The built-in rule's row: argmin of `cost` over rows neither excluded
 * nor busy (or, if every eligible row is busy, over the busy ones), exact
 * ties broken with the request's stream; a non-finite cost ranks last.
 * 0, or WSEL_ENOCANDIDATE when every row is excluded. */
static int32_t builtin_row(const double *cost, const uint8_t *flags, uint32_t n,
                           wsel_rng *rng, uint32_t *row)
{
    int32_t rc = wsel_argmin(cost, flags, n, WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY, rng, row);
    if (rc == WSEL_ENOCANDIDATE)
        rc = wsel_argmin(cost, flags, n, WSEL_ROW_EXCLUDED, rng, row);
    if (rc < 0) {
        /* Costs wsel_argmin refuses (a large table a plugin wrote NaN
         * into): still answer an eligible row if there is one. */
        rc = robust_argmin(cost, flags, n, WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY, rng, row);
        if (rc == WSEL_ENOCANDIDATE)
            rc = robust_argmin(cost, flags, n, WSEL_ROW_EXCLUDED, rng, row);
    }
    return rc;
}

/* The host's answer for `reason`: builtin_row, counted in k by reason;
 * the explanation is zeroed (the host's answer explains nothing). The
 * choice is untouched on failure. */
static int32_t fall_back(wsel_answer_counters *k, int reason, const double *cost,
                         const uint8_t *flags, uint32_t n, wsel_rng *rng,
                         wsel_choice *choice)
{
    uint32_t row;
    int32_t rc = builtin_row(cost, flags, n, rng, &row);
    if (rc < 0)
        return rc == WSEL_EINVAL ? WSEL_ETABLE : rc;
    count(&k->fallback_by_reason[reason]);
    choice->row = row;
    if (WSEL_CHOICE_HAS(choice, score)) {
        choice->reason = WSEL_REASON_NONE;
        choice->flags = 0;
        choice->score = 0.0;
    }
    return 0;
}

/* Reasons that are not the plugin's fault (nothing to ask, a host limit),
 * or already handled by the isolated helper's restart and backoff: they
 * do not count towards ejection. */
static int counts_towards_ejection(int reason)
{
    return reason != WSEL_FALLBACK_NO_POLICY && reason != WSEL_FALLBACK_EJECTED &&
           reason != WSEL_FALLBACK_CRASHED && reason != WSEL_FALLBACK_TIMEOUT &&
           reason != WSEL_FALLBACK_HOST_LIMIT;
}

/* A failed answer of a policy or a child (gen->parent set): count it
 * towards ejection; eject (and say so) once. */
static void note_failure(wsel_host *host, wsel_generation *gen, int reason)
{
    uint32_t max = host->max_consecutive_failures;
    if (max == 0 || !counts_towards_ejection(reason))
        return;
    uint32_t n =
        atomic_fetch_add_explicit(&gen->consecutive_failures, 1, memory_order_relaxed) +
        1;
    if (n < max)
        return;
    uint32_t expected = 0;
    if (!atomic_compare_exchange_strong(&gen->ejected, &expected, 1))
        return;
    if (gen->parent != NULL) {
        wsel__host_log(host, WSEL_LOG_WARN,
                       "%s: child %s of plugin %s ejected after %u consecutive failed "
                       "answers; the built-in answer stands in for it until the next "
                       "switch",
                       wsel_library_path(gen->lib), gen->plugin->name,
                       gen->parent->plugin->name, n);
        return;
    }
    atomic_fetch_add_explicit(&host->ejections, 1, memory_order_relaxed);
    wsel__host_log(host, WSEL_LOG_WARN,
                   "%s: plugin %s ejected after %u consecutive failed answers; the "
                   "built-in policy serves until the next switch",
                   gen->lib != NULL ? wsel_library_path(gen->lib) : "isolated",
                   gen->plugin->name, n);
}

/* A usable answer: the failure streak ends; counted in `counter`. */
static void note_success(wsel_generation *gen, wsel_padded_counter *counter)
{
    if (atomic_load_explicit(&gen->consecutive_failures, memory_order_relaxed))
        atomic_store_explicit(&gen->consecutive_failures, 0, memory_order_relaxed);
    count(counter);
}

/*
 * The choice the plugin writes: the host's wsel_choice followed by
 * WSEL_HOST_CHOICE_GUARD bytes, the first half zeroed room for growth (what
 * a plugin built against a later minor, writing an appended field without
 * checking struct_size, writes into), the second half a pattern. Every
 * byte past struct_size must come back as it went in.
 */
#define GUARD_ROOM    (WSEL_HOST_CHOICE_GUARD / 2u)
#define GUARD_PATTERN 0xa5u

typedef struct guarded_choice {
    wsel_choice c;
    unsigned char guard[WSEL_HOST_CHOICE_GUARD];
} guarded_choice;

/* The guard as it goes in: GUARD_ROOM zeros, then the pattern. One
 * memcpy fills it and one memcmp checks it, cheaper than byte loops. */
#define P4  GUARD_PATTERN, GUARD_PATTERN, GUARD_PATTERN, GUARD_PATTERN
#define P16 P4, P4, P4, P4
static const unsigned char guard_template[WSEL_HOST_CHOICE_GUARD] = {
    [GUARD_ROOM] = P16, P16, P16, P16, P16, P16, P16, P16};
_Static_assert(WSEL_HOST_CHOICE_GUARD - GUARD_ROOM == 8 * 16,
               "guard_template spells out 128 pattern bytes");

static void guard_init(guarded_choice *g)
{
    memset(&g->c, 0, sizeof(g->c));
    g->c.struct_size = sizeof(g->c);
    memcpy(g->guard, guard_template, sizeof(g->guard));
}

static int guard_intact(const guarded_choice *g)
{
    return memcmp(g->guard, guard_template, sizeof(g->guard)) == 0 &&
           g->c.struct_size == sizeof(g->c);
}

/* "Busy only when every eligible row is busy": 1 when `row` (busy) was
 * answered while a row neither excluded nor busy exists. */
static int busy_while_free(const uint8_t *flags, uint32_t n, uint32_t row)
{
    if (!(flags[row] & WSEL_ROW_BUSY))
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (!(flags[i] & (WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY)))
            return 1;
    return 0;
}

/* The one check of a select's answer, a policy's or a child's, in this
 * order: the fallback reason, or -1 when g->c.row is usable. `flags` are
 * the n rows' flags as handed in; `written` says the plugin wrote the
 * table; an isolated plugin's crash or timeout has its own reason. */
static int check_answer(const guarded_choice *g, int32_t rc, int isolated, int written,
                        const uint8_t *flags, uint32_t n)
{
    if (!guard_intact(g))
        return WSEL_FALLBACK_CHOICE_OVERRUN;
    if (written)
        return WSEL_FALLBACK_TABLE_WRITTEN;
    if (rc < 0 && isolated)
        return wsel__isolated_reason(rc);
    if (rc != 0) /* only 0 is success */
        return WSEL_FALLBACK_ERROR;
    if (g->c.row >= n)
        return WSEL_FALLBACK_OUT_OF_RANGE;
    if (flags[g->c.row] & WSEL_ROW_EXCLUDED)
        return WSEL_FALLBACK_EXCLUDED;
    if (busy_while_free(flags, n, g->c.row))
        return WSEL_FALLBACK_BUSY;
    return -1;
}

/* Ask `gen` to select and check its answer: the fallback reason, or -1
 * with *out the answer (a score only when flagged and finite). `snap`
 * (a policy's) catches a write to the table, and the answer is checked
 * against it; NULL (a child's, on its parent's table) checks against the
 * table as it is. */
static int ask_select(wsel_generation *gen, const wsel_request *request,
                      const wsel_table *table, snapshot *snap, wsel_choice *out)
{
    int reason = wsel__unavailable(gen);
    if (reason >= 0)
        return reason;
    int isolated = gen->plugin->select == wsel__isolated_select;
    if (snap != NULL)
        snapshot_take(snap, table, isolated);
    guarded_choice g;
    guard_init(&g);
    wsel__instance_lock(gen, 0);
    int32_t rc = gen->plugin->select(gen->instance, request, table, &g.c);
    wsel__instance_unlock(gen);
    int written = snap != NULL && snapshot_changed(snap, table, isolated);
    reason = check_answer(&g, rc, isolated, written,
                          snap != NULL ? snap->flags : table->flags, table->num_rows);
    if (reason >= 0)
        return reason;
    *out = g.c;
    if ((out->flags & WSEL_CHOICE_SCORED) && !isfinite(out->score))
        out->flags &= ~WSEL_CHOICE_SCORED;
    if (!(out->flags & WSEL_CHOICE_SCORED))
        out->score = 0.0;
    return -1;
}

/* A checked answer into the caller's choice (the explanation only when
 * it has room), counted in k by the plugin's reason. */
static void pass_answer(wsel_answer_counters *k, const wsel_choice *answer,
                        wsel_choice *choice)
{
    count(&k->answers_by_reason[answer->reason < WSEL_HOST_REASON_SLOTS
                                    ? answer->reason
                                    : WSEL_HOST_REASON_SLOTS - 1]);
    choice->row = answer->row;
    if (WSEL_CHOICE_HAS(choice, score)) {
        choice->reason = answer->reason;
        choice->flags = answer->flags & WSEL_CHOICE_SCORED;
        choice->score = answer->score;
    }
}

int32_t wsel_host_select(wsel_host *host, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    if (host == NULL || choice == NULL)
        return WSEL_EINVAL;
    if (request == NULL || request->struct_size < WSEL_REQUEST_SIZE_1_0 ||
        request->rng == NULL || request->block_size == 0)
        return WSEL_EREQUEST;
    if (table == NULL || table->struct_size < WSEL_TABLE_SIZE_1_0 ||
        table->num_rows == 0 || table->cost == NULL || table->flags == NULL)
        return WSEL_ETABLE;

    wsel_answer_counters *k = &host->policy_counters;
    snapshot snap;
    snap.flags = table->flags;
    snap.cost = table->cost;
    uint32_t idx = wsel__host_read_lock(host);
    wsel_generation *gen = wsel__host_live(host);
    int reason = WSEL_FALLBACK_NO_POLICY;
    wsel_choice answer = {0}; /* written by ask_select on success only */
    if (gen != NULL) {
        reason = ask_select(gen, request, table, &snap, &answer);
        /* Noted before the generation may go: even when no row is
         * eligible and the fallback below fails too. */
        if (reason < 0)
            note_success(gen, &k->answers);
        else
            note_failure(host, gen, reason);
    }
    wsel__host_read_unlock(host, idx);
    if (reason < 0) {
        pass_answer(k, &answer, choice);
        return WSEL_ANSWER_PLUGIN;
    }
    int32_t rc = fall_back(k, reason, snap.cost, snap.flags, table->num_rows,
                           request->rng, choice);
    return rc < 0 ? rc : WSEL_ANSWER_FALLBACK;
}

void wsel_host_request_outcome(wsel_host *host, const wsel_outcome *outcome)
{
    if (host == NULL || outcome == NULL ||
        outcome->struct_size < offsetof(wsel_outcome, ttft_us))
        return;
    wsel_outcome o;
    wsel__outcome_copy(&o, outcome);
    uint32_t idx = wsel__host_read_lock(host);
    wsel_generation *gen = wsel__host_live(host);
    if (gen != NULL && wsel__unavailable(gen) < 0 &&
        (gen->plugin->on_request_finished != NULL ||
         gen->plugin->on_request_outcome != NULL)) {
        wsel__instance_lock(gen, 0);
        if (gen->plugin->on_request_finished != NULL)
            gen->plugin->on_request_finished(gen->instance, o.request_id, o.worker_id,
                                             o.dp_rank);
        if (gen->plugin->on_request_outcome != NULL)
            gen->plugin->on_request_outcome(gen->instance, &o);
        wsel__instance_unlock(gen);
    }
    wsel__host_read_unlock(host, idx);
}

void wsel_host_request_finished(wsel_host *host, uint64_t request_id, uint64_t worker_id,
                                uint32_t dp_rank)
{
    if (host == NULL)
        return;
    uint32_t idx = wsel__host_read_lock(host);
    wsel_generation *gen = wsel__host_live(host);
    if (gen != NULL && gen->plugin->on_request_finished != NULL &&
        wsel__unavailable(gen) < 0) {
        wsel__instance_lock(gen, 0);
        gen->plugin->on_request_finished(gen->instance, request_id, worker_id, dp_rank);
        wsel__instance_unlock(gen);
    }
    wsel__host_read_unlock(host, idx);
}

/* --- children (ABI 1.1, wsel_host_api.child_score / child_select) ------- */

/* Scores every row into `scores`: the fallback reason, or -1. */
static int ask_score(wsel_generation *c, const wsel_request *request,
                     const wsel_table *table, double *scores)
{
    int reason = wsel__unavailable(c);
    if (reason >= 0)
        return reason;
    if (c->plugin->score == NULL)
        return WSEL_FALLBACK_BAD_SCORE;
    wsel__instance_lock(c, 0);
    int32_t rc = c->plugin->score(c->instance, request, table, scores);
    wsel__instance_unlock(c);
    if (rc != 0)
        return WSEL_FALLBACK_ERROR;
    for (uint32_t i = 0; i < table->num_rows; i++)
        if (!isfinite(scores[i]))
            return WSEL_FALLBACK_BAD_SCORE;
    return -1;
}

int32_t wsel__child_score_checked(const wsel_host_api *api, wsel_child *child,
                                  const wsel_request *request, const wsel_table *table,
                                  double *scores)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (c == NULL || request == NULL || table == NULL || scores == NULL ||
        table->num_rows == 0 || table->cost == NULL)
        return WSEL_EINVAL;
    wsel_answer_counters *k = &c->child_counters;
    int reason = ask_score(c, request, table, scores);
    if (reason < 0) {
        note_success(c, &k->scores);
        return WSEL_CHILD_ANSWERED;
    }
    note_failure(c->host, c, reason);
    count(&k->fallback_by_reason[reason]);
    memcpy(scores, table->cost, table->num_rows * sizeof(double));
    return WSEL_CHILD_FALLBACK;
}

int32_t wsel__child_select_checked(const wsel_host_api *api, wsel_child *child,
                                   const wsel_request *request, const wsel_table *table,
                                   wsel_choice *choice)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (c == NULL || request == NULL || request->rng == NULL || table == NULL ||
        choice == NULL || choice->struct_size < WSEL_CHOICE_SIZE_1_0 ||
        table->num_rows == 0 || table->cost == NULL || table->flags == NULL)
        return WSEL_EINVAL;
    wsel_answer_counters *k = &c->child_counters;
    wsel_choice answer;
    int reason = ask_select(c, request, table, NULL, &answer);
    uint32_t size = choice->struct_size;
    memset(choice, 0, size < sizeof(*choice) ? size : sizeof(*choice));
    choice->struct_size = size;
    if (reason < 0) {
        note_success(c, &k->answers);
        pass_answer(k, &answer, choice);
        return WSEL_CHILD_ANSWERED;
    }
    /* The cost may be the caller's own scores. A child's failure counts
     * only when the host could answer for it. */
    int32_t rc = fall_back(k, reason, table->cost, table->flags, table->num_rows,
                           request->rng, choice);
    if (rc < 0)
        return rc;
    note_failure(c->host, c, reason);
    return WSEL_CHILD_FALLBACK;
}
