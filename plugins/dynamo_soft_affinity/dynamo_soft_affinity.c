// SPDX-License-Identifier: Apache-2.0
/*
 * dynamo_soft_affinity -- Dynamo's selectable worker-selection policy
 * `dynamo-soft-affinity-load-guard` with its soft session binding, as a
 * wsel plugin. Ported from NVIDIA Dynamo (ai-dynamo/dynamo,
 * SoftAffinityLoadGuardPicker; docs/policies.md says what was read and
 * how it maps).
 *
 * What it does, the session being the request's affinity_key and a row's
 * load its requests in flight:
 *   - a session's bound row keeps the request while its load is at most
 *     `max_active_requests`;
 *   - above that, the request moves to the least loaded other row only if
 *     that row holds at least `move_margin` fewer requests; otherwise it
 *     stays;
 *   - a request without a binding (or whose row is no longer a
 *     candidate) takes the least loaded row;
 *   - ties go to the lowest (worker_id, dp_rank), as Dynamo's picker
 *     orders them;
 *   - the session is bound to the row each answer names (Dynamo's soft
 *     affinity commits the binding to where a request was dispatched).
 * Bindings live in a direct-mapped table of `max_sessions` slots
 * (sticky_table.h), as dynamo_sticky_min_load's.
 *
 * Safe to call concurrently (the table is lock-free); select allocates
 * nothing.
 */
#include <stdlib.h>

#include "row_load.h"
#include "session_binding.h"
#include "wsel.h"

enum { PARAM_MAX_ACTIVE, PARAM_MARGIN, PARAM_SESSIONS, NUM_PARAMS };

static const wsel_param_def sa_params[NUM_PARAMS] = {
    [PARAM_MAX_ACTIVE] = {.name = "max_active_requests",
                          .doc = "requests the bound row may hold and still keep the "
                                 "session (inclusive)",
                          .type = WSEL_PARAM_INT,
                          .default_value = 32,
                          .min_value = 0,
                          .max_value = 4294967295.0},
    [PARAM_MARGIN] = {.name = "move_margin",
                      .doc = "how many fewer requests another row must hold before a "
                             "session over the bound moves to it",
                      .type = WSEL_PARAM_INT,
                      .default_value = 2,
                      .min_value = 1,
                      .max_value = 4294967295.0},
    [PARAM_SESSIONS] = {.name = "max_sessions",
                        .doc = "session bindings kept (rounded up to a power of two, "
                               "8 bytes each)",
                        .type = WSEL_PARAM_INT,
                        .default_value = 65536,
                        .min_value = 1,
                        .max_value = 1 << 26},
};

typedef struct soft_affinity {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    uint32_t max_active;
    uint32_t margin;
    sticky_table bindings; /* session key -> session_row_owner of the row */
} soft_affinity;

/* [control thread] */
static int32_t sa_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != NUM_PARAMS)
        return WSEL_EINVAL;
    soft_affinity *s = malloc(sizeof(*s));
    if (s == NULL)
        return WSEL_ENOMEM;
    s->host = host;
    s->max_active = (uint32_t)params[PARAM_MAX_ACTIVE];
    s->margin = (uint32_t)params[PARAM_MARGIN];
    int32_t rc = sticky_table_init(&s->bindings, (uint32_t)params[PARAM_SESSIONS]);
    if (rc < 0)
        goto out_free_instance;
    *out_instance = s;
    return 0;

out_free_instance:
    free(s);
    return rc;
}

/* [control thread] */
static void sa_destroy(void *instance)
{
    soft_affinity *s = instance;
    sticky_table_free(&s->bindings);
    free(s);
}

/* The load guard over bound candidate `bound`: `bound` itself, or the
 * least loaded other row when the bound row is over the limit and that
 * row is at least the margin lighter. Sets *reason. */
static uint32_t sa_guard(const soft_affinity *s, const wsel_table *t, uint8_t skip,
                         uint32_t bound, uint32_t *reason)
{
    uint32_t load = t->active_requests[bound];
    *reason = WSEL_REASON_STICKY;
    if (load <= s->max_active)
        return bound;
    uint32_t other = row_load_least_active_lowest_id(t, skip, bound);
    if (other == ROW_LOAD_NONE || t->active_requests[other] > load ||
        load - t->active_requests[other] < s->margin)
        return bound;
    *reason = WSEL_REASON_SPILLED;
    return other;
}

/* [select thread, concurrent] */
static int32_t sa_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    soft_affinity *s = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(s->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    uint64_t key = request->affinity_key;
    uint32_t owner = key != 0 ? sticky_table_get(&s->bindings, key) : 0;
    uint32_t bound = owner != 0 ? session_bound_row(table, skip, owner) : ROW_LOAD_NONE;
    uint32_t row, reason;
    if (bound != ROW_LOAD_NONE) {
        row = sa_guard(s, table, skip, bound, &reason);
    } else {
        row = row_load_least_active_lowest_id(table, skip, ROW_LOAD_NONE);
        if (row == ROW_LOAD_NONE)
            return WSEL_ENOCANDIDATE;
        reason = owner != 0 ? WSEL_REASON_SPILLED : WSEL_REASON_CHEAPEST;
    }
    if (key != 0 && row != bound)
        sticky_table_put(&s->bindings, key, session_row_owner(table, row));
    wsel_choice_answer(choice, row, reason);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT,
    .name = "dynamo_soft_affinity",
    .version = "1.0.0",
    .description = "Dynamo's soft-affinity load guard: a session stays on its row up "
                   "to a load limit, then moves only to a row lighter by a margin",
    .params = sa_params,
    .num_params = NUM_PARAMS,
    .param_def_size = sizeof(wsel_param_def),
    .create = sa_create,
    .destroy = sa_destroy,
    .select = sa_select,
};
