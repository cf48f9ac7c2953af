/*
 * roundrobin -- each request goes to the next eligible row in turn.
 *
 * The shortest complete wsel plugin; read it first. No parameters, no host
 * helpers: the instance is one atomic ticket counter. Request k goes to the
 * (k mod m)-th of the m eligible rows, so each gets an equal share. Eligible
 * means not WSEL_ROW_EXCLUDED, and not WSEL_ROW_BUSY unless every one is.
 * Concurrent selects are safe: each takes its own ticket atomically.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "wsel.h"

typedef struct roundrobin {
    atomic_uint_fast64_t next_ticket;
} roundrobin;

/* [control thread] */
static int32_t rr_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    (void)host, (void)params, (void)num_params; /* nothing to configure */
    roundrobin *rr = malloc(sizeof(*rr));
    if (rr == NULL)
        return WSEL_ENOMEM;
    atomic_init(&rr->next_ticket, 0);
    *out_instance = rr;
    return 0;
}

/* [control thread] */
static void rr_destroy(void *instance)
{
    free(instance);
}

/* Number of rows whose flags miss `skip`; if `nth` is not NULL, stops at the
 * (*nth)-th such row (0-based) and writes its index to *nth instead. */
static uint32_t scan_rows(const wsel_table *t, uint8_t skip, uint32_t *nth)
{
    uint32_t seen = 0;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (t->flags[i] & skip)
            continue;
        if (nth != NULL && seen == *nth) {
            *nth = i;
            break;
        }
        seen++;
    }
    return seen;
}

/* [select thread, concurrent] Two scans of the flags column; no allocation. */
static int32_t rr_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    roundrobin *rr = instance;
    (void)request; /* the rotation ignores what is being routed */
    uint8_t skip = WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
    uint32_t m = scan_rows(table, skip, NULL);
    if (m == 0) { /* every eligible row is busy: a busy row beats none */
        skip = WSEL_ROW_EXCLUDED;
        m = scan_rows(table, skip, NULL);
    }
    if (m == 0)
        return WSEL_ENOCANDIDATE;
    uint32_t row = (uint32_t)(atomic_fetch_add(&rr->next_ticket, 1) % m);
    scan_rows(table, skip, &row);
    choice->row = row;
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT, /* not stateless: the ticket moves */
    .name = "roundrobin",
    .version = "1.0.0",
    .description = "each request to the next eligible rank in turn",
    .param_def_size = sizeof(wsel_param_def),
    .create = rr_create,
    .destroy = rr_destroy,
    .select = rr_select,
};
