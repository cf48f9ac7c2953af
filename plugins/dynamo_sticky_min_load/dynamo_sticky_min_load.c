// SPDX-License-Identifier: Apache-2.0
/*
 * dynamo_sticky_min_load -- Dynamo's selectable worker-selection policy
 * `dynamo-sticky-min-load`, as a wsel plugin. Ported from NVIDIA Dynamo's
 * policy of that type (ai-dynamo/dynamo, StickyMinLoadPicker; see
 * docs/policies.md for the source read and how it maps).
 *
 * What it does, the session being the request's affinity_key:
 *   - a session's first request takes the row with the fewest requests in
 *     flight (ties at random) and binds the session to it;
 *   - later requests return to the bound row while it is a candidate,
 *     whatever its load or cache; a session is rebound (to the least
 *     loaded row) only when its row is no longer a candidate;
 *   - a request without a session takes the least loaded row, unbound.
 * Bindings live in a direct-mapped table of `max_sessions` slots
 * (sticky_table.h): a new session may overwrite an older one sharing its
 * slot, where Dynamo's table, once full, leaves new sessions unbound.
 *
 * Safe to call concurrently (the table is lock-free); select allocates
 * nothing.
 */
#include <stdlib.h>

#include "row_load.h"
#include "session_binding.h"
#include "wsel.h"

static const wsel_param_def sml_params[] = {
    {.name = "max_sessions",
     .doc = "session bindings kept (Dynamo's MAX_SESSION_AFFINITY_ENTRIES; rounded "
            "up to a power of two, 8 bytes each)",
     .type = WSEL_PARAM_INT,
     .default_value = 65536,
     .min_value = 1,
     .max_value = 1 << 26},
};

typedef struct sticky_min_load {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    sticky_table bindings;     /* session key -> sticky_owner of the row */
} sticky_min_load;

/* [control thread] */
static int32_t sml_create(const wsel_host_api *host, const double *params,
                          uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != 1)
        return WSEL_EINVAL;
    sticky_min_load *s = malloc(sizeof(*s));
    if (s == NULL)
        return WSEL_ENOMEM;
    s->host = host;
    int32_t rc = sticky_table_init(&s->bindings, (uint32_t)params[0]);
    if (rc < 0)
        goto out_free_instance;
    *out_instance = s;
    return 0;

out_free_instance:
    free(s);
    return rc;
}

/* [control thread] */
static void sml_destroy(void *instance)
{
    sticky_min_load *s = instance;
    sticky_table_free(&s->bindings);
    free(s);
}

/* [select thread, concurrent] */
static int32_t sml_select(void *instance, const wsel_request *request,
                          const wsel_table *table, wsel_choice *choice)
{
    sticky_min_load *s = instance;
    uint8_t skip;
    int32_t rc =
        wsel_call_eligible_skip(s->host, table->flags, table->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    uint64_t key = request->affinity_key;
    uint32_t owner = key != 0 ? sticky_table_get(&s->bindings, key) : 0;
    uint32_t row = owner != 0 ? session_bound_row(table, skip, owner) : ROW_LOAD_NONE;
    uint32_t reason = WSEL_REASON_STICKY;
    if (row == ROW_LOAD_NONE) {
        row = row_load_least_active(s->host, table, skip, 0, request->rng);
        if (row == ROW_LOAD_NONE)
            return WSEL_ENOCANDIDATE;
        if (key != 0)
            sticky_table_put(&s->bindings, key, session_row_owner(table, row));
        reason = owner != 0 ? WSEL_REASON_SPILLED : WSEL_REASON_CHEAPEST;
    }
    wsel_choice_answer(choice, row, reason);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT,
    .name = "dynamo_sticky_min_load",
    .version = "1.0.0",
    .description = "Dynamo's sticky-min-load: a session stays on the row it first "
                   "took (the least loaded) while that row is a candidate",
    .params = sml_params,
    .num_params = 1,
    .param_def_size = sizeof(wsel_param_def),
    .create = sml_create,
    .destroy = sml_destroy,
    .select = sml_select,
};
