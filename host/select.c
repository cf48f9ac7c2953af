/*
 * select.c -- the hot path: ask the live policy, check its answer, and
 * answer with the built-in policy whenever it cannot be used.
 *
 * Nothing here allocates, and nothing waits for a switch: the only lock
 * taken is the generation's own instance lock (exclusive for plugins that
 * do not declare WSEL_CAP_CONCURRENT_SELECT, shared for concurrent ones
 * with a topology hook, none otherwise), which the switcher never holds.
 */
#include <string.h>

#include "internal.h"
#include "isolated.h"

static void count(wsel_padded_counter *c)
{
    atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
}

/* The built-in policy: argmin of the default cost over rows that are
 * neither excluded nor busy (or, if every eligible row is busy, over the
 * busy ones), exact ties broken with the request's stream. */
static int32_t builtin_answer(wsel_host *host, const wsel_request *request,
                              const wsel_table *table, wsel_choice *choice,
                              uint32_t reason)
{
    uint32_t row;
    int32_t rc = wsel_argmin(table->cost, table->flags, table->num_rows,
                             WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY, request->rng, &row);
    if (rc == WSEL_ENOCANDIDATE)
        rc = wsel_argmin(table->cost, table->flags, table->num_rows, WSEL_ROW_EXCLUDED,
                         request->rng, &row);
    if (rc < 0)
        return rc == WSEL_EINVAL ? WSEL_ETABLE : rc;
    count(&host->fallback_by_reason[reason]);
    choice->row = row;
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

/* Ask the generation; returns the fallback reason, or -1 with *row set when
 * the plugin's answer is usable. */
static int ask_plugin(wsel_generation *gen, const wsel_request *request,
                      const wsel_table *table, uint32_t *row)
{
    if (atomic_load_explicit(&gen->ejected, memory_order_relaxed))
        return WSEL_FALLBACK_EJECTED;
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    lock_instance(gen);
    int32_t rc = gen->plugin->select(gen->instance, request, table, &c);
    unlock_instance(gen);
    if (rc < 0) /* an isolated helper's crash or timeout has its own reason */
        return gen->plugin->select == wsel_isolated_select ? wsel_isolated_reason(rc)
                                                           : WSEL_FALLBACK_ERROR;
    if (c.row >= table->num_rows)
        return WSEL_FALLBACK_OUT_OF_RANGE;
    if (table->flags[c.row] & WSEL_ROW_EXCLUDED)
        return WSEL_FALLBACK_EXCLUDED;
    *row = c.row;
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

    uint32_t idx = wsel_host_read_lock(host);
    wsel_generation *gen = wsel_host_live(host);
    int reason = WSEL_FALLBACK_NO_POLICY;
    uint32_t row = 0;
    if (gen != NULL) {
        reason = ask_plugin(gen, request, table, &row);
        if (reason < 0) {
            if (atomic_load_explicit(&gen->consecutive_failures, memory_order_relaxed))
                atomic_store_explicit(&gen->consecutive_failures, 0,
                                      memory_order_relaxed);
            wsel_host_read_unlock(host, idx);
            count(&host->plugin_answers);
            choice->row = row;
            return WSEL_ANSWER_PLUGIN;
        }
        /* A crashed or late helper is restarted with backoff instead of
         * ejected (isolated_channel.c). */
        if (reason != WSEL_FALLBACK_EJECTED && reason != WSEL_FALLBACK_CRASHED &&
            reason != WSEL_FALLBACK_TIMEOUT)
            note_failure(host, gen);
    }
    wsel_host_read_unlock(host, idx);
    return builtin_answer(host, request, table, choice, (uint32_t)reason);
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
