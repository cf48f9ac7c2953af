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

/* The built-in policy: argmin of the default cost over rows that are
 * neither excluded nor busy (or, if every eligible row is busy, over the
 * busy ones), exact ties broken with the request's stream. Reads the
 * snapshot, never what the plugin may have written. */
static int32_t builtin_answer(wsel_host *host, const wsel_request *request,
                              const wsel_table *table, const snapshot *snap,
                              wsel_choice *choice, uint32_t reason)
{
    uint32_t row;
    uint32_t n = table->num_rows;
    int32_t rc = wsel_argmin(snap->cost, snap->flags, n,
                             WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY, request->rng, &row);
    if (rc == WSEL_ENOCANDIDATE)
        rc = wsel_argmin(snap->cost, snap->flags, n, WSEL_ROW_EXCLUDED, request->rng,
                         &row);
    if (rc < 0) {
        /* Costs wsel_argmin refuses (a large table a plugin wrote NaN
         * into): still answer an eligible row if there is one. */
        rc = robust_argmin(snap->cost, snap->flags, n, WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY,
                           request->rng, &row);
        if (rc == WSEL_ENOCANDIDATE)
            rc = robust_argmin(snap->cost, snap->flags, n, WSEL_ROW_EXCLUDED,
                               request->rng, &row);
    }
    if (rc < 0)
        return rc == WSEL_EINVAL ? WSEL_ETABLE : rc;
    count(&host->fallback_by_reason[reason]);
    choice->row = row;
    if (WSEL_CHOICE_HAS(choice, score)) { /* the host's answer explains nothing */
        choice->reason = WSEL_REASON_NONE;
        choice->flags = 0;
        choice->score = 0.0;
    }
    return WSEL_ANSWER_FALLBACK;
}

/* A failed answer: count towards ejection, eject (and say so) once. */
static void note_failure(wsel_host *host, wsel_generation *gen)
{
    uint32_t max = host->max_consecutive_failures;
    if (max == 0)
        return;
    uint32_t n =
        atomic_fetch_add_explicit(&gen->consecutive_failures, 1, memory_order_relaxed) +
        1;
    if (n < max)
        return;
    uint32_t expected = 0;
    if (!atomic_compare_exchange_strong(&gen->ejected, &expected, 1))
        return;
    atomic_fetch_add_explicit(&host->ejections, 1, memory_order_relaxed);
    wsel_host_log(host, WSEL_LOG_WARN,
                  "%s: plugin %s ejected after %u consecutive failed answers; the "
                  "built-in policy serves until the next switch",
                  gen->lib != NULL ? wsel_library_path(gen->lib) : "isolated",
                  gen->plugin->name, n);
}

/* Reasons that are not the plugin's fault, or are already handled by the
 * isolated helper's restart and backoff: they do not count towards
 * ejection. */
static int counts_towards_ejection(int reason)
{
    return reason != WSEL_FALLBACK_EJECTED && reason != WSEL_FALLBACK_CRASHED &&
           reason != WSEL_FALLBACK_TIMEOUT && reason != WSEL_FALLBACK_HOST_LIMIT;
}

static void lock_instance(wsel_generation *gen)
{
    if (gen->lock_mode == WSEL_LOCK_EXCLUSIVE)
        pthread_rwlock_wrlock(&gen->lock);
    else if (gen->lock_mode == WSEL_LOCK_SHARED)
        pthread_rwlock_rdlock(&gen->lock);
}

static void unlock_instance(wsel_generation *gen)
{
    if (gen->lock_mode != WSEL_LOCK_NONE)
        pthread_rwlock_unlock(&gen->lock);
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

/* Ask the generation; returns the fallback reason, or -1 with *out set
 * (row and explanation) when the plugin's answer is usable. Checks run
 * against `snap`. */
static int ask_plugin(wsel_generation *gen, const wsel_request *request,
                      const wsel_table *table, snapshot *snap, wsel_choice *out)
{
    if (atomic_load_explicit(&gen->ejected, memory_order_relaxed))
        return WSEL_FALLBACK_EJECTED;
    int isolated = gen->plugin->select == wsel_isolated_select;
    snapshot_take(snap, table, isolated);
    guarded_choice g;
    guard_init(&g);
    lock_instance(gen);
    int32_t rc = gen->plugin->select(gen->instance, request, table, &g.c);
    unlock_instance(gen);
    if (!guard_intact(&g))
        return WSEL_FALLBACK_CHOICE_OVERRUN;
    if (snapshot_changed(snap, table, isolated))
        return WSEL_FALLBACK_TABLE_WRITTEN;
    if (rc < 0) /* an isolated helper's crash or timeout has its own reason */
        return isolated ? wsel_isolated_reason(rc) : WSEL_FALLBACK_ERROR;
    if (rc != 0) /* only 0 is success */
        return WSEL_FALLBACK_ERROR;
    uint32_t r = g.c.row;
    if (r >= table->num_rows)
        return WSEL_FALLBACK_OUT_OF_RANGE;
    if (snap->flags[r] & WSEL_ROW_EXCLUDED)
        return WSEL_FALLBACK_EXCLUDED;
    if (busy_while_free(snap->flags, table->num_rows, r))
        return WSEL_FALLBACK_BUSY;
    *out = g.c;
    /* A score the plugin says it set must be finite to be passed on. */
    if ((out->flags & WSEL_CHOICE_SCORED) && !isfinite(out->score))
        out->flags &= ~WSEL_CHOICE_SCORED;
    if (!(out->flags & WSEL_CHOICE_SCORED))
        out->score = 0.0;
    return -1;
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

    snapshot snap;
    snap.flags = table->flags;
    snap.cost = table->cost;
    uint32_t idx = wsel_host_read_lock(host);
    wsel_generation *gen = wsel_host_live(host);
    int reason = WSEL_FALLBACK_NO_POLICY;
    wsel_choice answer = {0}; /* written by ask_plugin on success only */
    if (gen != NULL) {
        reason = ask_plugin(gen, request, table, &snap, &answer);
        if (reason < 0) {
            if (atomic_load_explicit(&gen->consecutive_failures, memory_order_relaxed))
                atomic_store_explicit(&gen->consecutive_failures, 0,
                                      memory_order_relaxed);
            wsel_host_read_unlock(host, idx);
            count(&host->plugin_answers);
            count(&host->answers_by_reason[answer.reason < WSEL_HOST_REASON_SLOTS
                                               ? answer.reason
                                               : WSEL_HOST_REASON_SLOTS - 1]);
            choice->row = answer.row;
            if (WSEL_CHOICE_HAS(choice, score)) {
                choice->reason = answer.reason;
                choice->flags = answer.flags & WSEL_CHOICE_SCORED;
                choice->score = answer.score;
            }
            return WSEL_ANSWER_PLUGIN;
        }
        /* A crashed or late helper is restarted with backoff instead of
         * ejected (isolated_channel.c); a host limit is not the plugin's. */
        if (counts_towards_ejection(reason))
            note_failure(host, gen);
    }
    wsel_host_read_unlock(host, idx);
    return builtin_answer(host, request, table, &snap, choice, (uint32_t)reason);
}

void wsel_host_request_outcome(wsel_host *host, const wsel_outcome *outcome)
{
    if (host == NULL || outcome == NULL ||
        outcome->struct_size < offsetof(wsel_outcome, ttft_us))
        return;
    /* The plugin gets a full-size copy: a shorter caller's tail reads 0. */
    wsel_outcome o;
    memset(&o, 0, sizeof(o));
    memcpy(&o, outcome,
           outcome->struct_size < sizeof(o) ? outcome->struct_size : sizeof(o));
    o.struct_size = sizeof(o);
    uint32_t idx = wsel_host_read_lock(host);
    wsel_generation *gen = wsel_host_live(host);
    if (gen != NULL && !atomic_load_explicit(&gen->ejected, memory_order_relaxed) &&
        (gen->plugin->on_request_finished != NULL ||
         gen->plugin->on_request_outcome != NULL)) {
        lock_instance(gen);
        if (gen->plugin->on_request_finished != NULL)
            gen->plugin->on_request_finished(gen->instance, o.request_id, o.worker_id,
                                             o.dp_rank);
        if (gen->plugin->on_request_outcome != NULL)
            gen->plugin->on_request_outcome(gen->instance, &o);
        unlock_instance(gen);
    }
    wsel_host_read_unlock(host, idx);
}

void wsel_host_request_finished(wsel_host *host, uint64_t request_id, uint64_t worker_id,
                                uint32_t dp_rank)
{
    if (host == NULL)
        return;
    uint32_t idx = wsel_host_read_lock(host);
    wsel_generation *gen = wsel_host_live(host);
    if (gen != NULL && gen->plugin->on_request_finished != NULL &&
        !atomic_load_explicit(&gen->ejected, memory_order_relaxed)) {
        lock_instance(gen);
        gen->plugin->on_request_finished(gen->instance, request_id, worker_id, dp_rank);
        unlock_instance(gen);
    }
    wsel_host_read_unlock(host, idx);
}

/* --- children (ABI 1.1, wsel_host_api.child_score / child_select) ------- */

/* A child's failed answer: towards its own ejection, logged once. */
static void note_child_failure(wsel_generation *c)
{
    uint32_t max = c->host->max_consecutive_failures;
    if (max == 0)
        return;
    uint32_t n =
        atomic_fetch_add_explicit(&c->consecutive_failures, 1, memory_order_relaxed) + 1;
    if (n < max)
        return;
    uint32_t expected = 0;
    if (!atomic_compare_exchange_strong(&c->ejected, &expected, 1))
        return;
    wsel_host_log(c->host, WSEL_LOG_WARN,
                  "%s: child %s of plugin %s ejected after %u consecutive failed "
                  "answers; the built-in answer stands in for it until the next switch",
                  wsel_library_path(c->lib), c->plugin->name,
                  c->parent != NULL ? c->parent->plugin->name : "?", n);
}

static void child_succeeded(wsel_generation *c, _Atomic uint64_t *counter)
{
    if (atomic_load_explicit(&c->consecutive_failures, memory_order_relaxed))
        atomic_store_explicit(&c->consecutive_failures, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

static void child_failed(wsel_generation *c, int reason)
{
    if (counts_towards_ejection(reason) && reason != WSEL_FALLBACK_NO_POLICY)
        note_child_failure(c);
    atomic_fetch_add_explicit(&c->child_fallbacks[reason], 1, memory_order_relaxed);
}

/* Why a child cannot be asked at all, or -1. */
static int child_unavailable(const wsel_generation *c)
{
    if (c->closed)
        return WSEL_FALLBACK_NO_POLICY;
    if (atomic_load_explicit(&c->ejected, memory_order_relaxed))
        return WSEL_FALLBACK_EJECTED;
    return -1;
}

int32_t wsel_child_score_checked(const wsel_host_api *api, wsel_child *child,
                                 const wsel_request *request, const wsel_table *table,
                                 double *scores)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (c == NULL || request == NULL || table == NULL || scores == NULL ||
        table->num_rows == 0 || table->cost == NULL)
        return WSEL_EINVAL;
    uint32_t n = table->num_rows;
    int reason = child_unavailable(c);
    if (reason < 0 && c->plugin->score == NULL)
        reason = WSEL_FALLBACK_BAD_SCORE;
    if (reason < 0) {
        lock_instance(c);
        int32_t rc = c->plugin->score(c->instance, request, table, scores);
        unlock_instance(c);
        if (rc != 0) {
            reason = WSEL_FALLBACK_ERROR;
        } else {
            for (uint32_t i = 0; i < n; i++) {
                if (!isfinite(scores[i])) {
                    reason = WSEL_FALLBACK_BAD_SCORE;
                    break;
                }
            }
        }
    }
    if (reason < 0) {
        child_succeeded(c, &c->child_scores);
        return WSEL_CHILD_ANSWERED;
    }
    child_failed(c, reason);
    memcpy(scores, table->cost, n * sizeof(double));
    return WSEL_CHILD_FALLBACK;
}

/* The built-in answer on the child's table (cost may be the caller's own
 * scores; non-finite ones rank last). */
static int32_t child_builtin(const wsel_request *request, const wsel_table *table,
                             uint32_t *row)
{
    uint32_t n = table->num_rows;
    int32_t rc = robust_argmin(table->cost, table->flags, n,
                               WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY, request->rng, row);
    if (rc == WSEL_ENOCANDIDATE)
        rc = robust_argmin(table->cost, table->flags, n, WSEL_ROW_EXCLUDED, request->rng,
                           row);
    return rc;
}

int32_t wsel_child_select_checked(const wsel_host_api *api, wsel_child *child,
                                  const wsel_request *request, const wsel_table *table,
                                  wsel_choice *choice)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (c == NULL || request == NULL || request->rng == NULL || table == NULL ||
        choice == NULL || choice->struct_size < WSEL_CHOICE_SIZE_1_0 ||
        table->num_rows == 0 || table->cost == NULL || table->flags == NULL)
        return WSEL_EINVAL;
    uint32_t n = table->num_rows;
    int reason = child_unavailable(c);
    guarded_choice g;
    guard_init(&g);
    if (reason < 0) {
        lock_instance(c);
        int32_t rc = c->plugin->select(c->instance, request, table, &g.c);
        unlock_instance(c);
        if (!guard_intact(&g))
            reason = WSEL_FALLBACK_CHOICE_OVERRUN;
        else if (rc != 0)
            reason = WSEL_FALLBACK_ERROR;
        else if (g.c.row >= n)
            reason = WSEL_FALLBACK_OUT_OF_RANGE;
        else if (table->flags[g.c.row] & WSEL_ROW_EXCLUDED)
            reason = WSEL_FALLBACK_EXCLUDED;
        else if (busy_while_free(table->flags, n, g.c.row))
            reason = WSEL_FALLBACK_BUSY;
    }
    uint32_t size = choice->struct_size;
    memset(choice, 0, size < sizeof(*choice) ? size : sizeof(*choice));
    choice->struct_size = size;
    if (reason < 0) {
        child_succeeded(c, &c->child_answers);
        choice->row = g.c.row;
        if (WSEL_CHOICE_HAS(choice, score)) {
            choice->reason = g.c.reason;
            if ((g.c.flags & WSEL_CHOICE_SCORED) && isfinite(g.c.score)) {
                choice->flags = WSEL_CHOICE_SCORED;
                choice->score = g.c.score;
            }
        }
        return WSEL_CHILD_ANSWERED;
    }
    uint32_t row;
    int32_t rc = child_builtin(request, table, &row);
    if (rc < 0)
        return rc;
    child_failed(c, reason);
    choice->row = row;
    return WSEL_CHILD_FALLBACK;
}
