// SPDX-License-Identifier: Apache-2.0
/*
 * roundrobin -- each request goes to the next eligible row in turn.
 *
 * The shortest complete wsel plugin; read it first. No parameters; one
 * host helper (eligible_skip, the eligible-row rule, inline in a 1.0 host);
 * the instance is one atomic ticket counter. Request k goes to the
 * (k mod m)-th of the m eligible rows, so each gets an equal share. Eligible
 * means not WSEL_ROW_EXCLUDED, and not WSEL_ROW_BUSY unless every one is.
 * Concurrent selects are safe: each takes its own ticket atomically.
 *
 * Score (ABI 1.1): each eligible row's distance ahead of the cursor in the
 * rotation, 0 for the row the next select answers, 1 for the one after,
 * ... m - 1; rows outside the rotation (excluded, or busy while an idle row
 * is eligible) score m. So argmin of the scores is what select would
 * answer now. Score reads the ticket and never moves it (a score records
 * no request as routed): only this plugin's own select turns the rotation.
 * In a pipeline, where only score is called, the scores therefore stay the
 * same from request to request, a fixed order rather than a rotation;
 * docs/policies.md ("roundrobin") says so.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "wsel.h"

typedef struct roundrobin {
    const wsel_host_api *host; /* OWNERSHIP: host's, valid until destroy */
    atomic_uint_fast64_t next_ticket;
} roundrobin;

/* [control thread] */
static int32_t rr_create(const wsel_host_api *host, const double *params,
                         uint32_t num_params, void **out_instance)
{
    (void)params, (void)num_params; /* nothing to configure */
    if (host == NULL || out_instance == NULL)
        return WSEL_EINVAL;
    roundrobin *rr = malloc(sizeof(*rr));
    if (rr == NULL)
        return WSEL_ENOMEM;
    rr->host = host;
    atomic_init(&rr->next_ticket, 0);
    *out_instance = rr;
    return 0;
}

/* [control thread] */
static void rr_destroy(void *instance)
{
    free(instance);
}

/* How many of the 8 flags at `f` miss `skip`. A fixed count: compilers
 * turn it into a few vector instructions. */
static uint32_t eligible_in_8(const uint8_t *f, uint8_t skip)
{
    uint32_t m = 0;
    for (uint32_t j = 0; j < 8; j++)
        m += (f[j] & skip) == 0;
    return m;
}

/* Number of rows whose flags miss `skip`, 8 at a time. */
static uint32_t count_rows(const wsel_table *t, uint8_t skip)
{
    uint32_t n = t->num_rows, m = 0, i = 0;
    for (; i + 8 <= n; i += 8)
        m += eligible_in_8(t->flags + i, skip);
    for (; i < n; i++)
        m += (t->flags[i] & skip) == 0;
    return m;
}

/* The k-th (0-based) row whose flags miss `skip`; k < count_rows(t, skip).
 * Whole blocks of 8 rows are counted and passed over. */
static uint32_t nth_row(const wsel_table *t, uint8_t skip, uint32_t k)
{
    uint32_t n = t->num_rows, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t m = eligible_in_8(t->flags + i, skip);
        if (k < m)
            break;
        k -= m;
    }
    for (;; i++)
        if ((t->flags[i] & skip) == 0 && k-- == 0)
            return i;
}

/* The host's eligible-row rule (inline in a 1.0 host: idle rows, or the
 * busy ones when every eligible row is busy) into *skip, and how many rows
 * it leaves into *m (at least one: a host whose answer leaves none gets
 * WSEL_ENOCANDIDATE, not a division by zero). The rule stops at the first
 * idle row; the count is the vectorised pass. */
static int32_t eligible_rows(const roundrobin *rr, const wsel_table *table, uint8_t *skip,
                             uint32_t *m)
{
    int32_t rc =
        wsel_call_eligible_skip(rr->host, table->flags, table->num_rows, skip, NULL);
    if (rc < 0)
        return rc;
    *m = count_rows(table, *skip);
    return *m ? WSEL_OK : WSEL_ENOCANDIDATE;
}

/* [select thread, concurrent] Two scans of the flags column, the second
 * stopping at the answer; no allocation. */
static int32_t rr_select(void *instance, const wsel_request *request,
                         const wsel_table *table, wsel_choice *choice)
{
    roundrobin *rr = instance;
    (void)request; /* the rotation ignores what is being routed */
    uint8_t skip;
    uint32_t m;
    int32_t rc = eligible_rows(rr, table, &skip, &m);
    if (rc < 0)
        return rc;
    uint32_t k = (uint32_t)(atomic_fetch_add(&rr->next_ticket, 1) % m);
    choice->row = nth_row(table, skip, k);
    /* 0.0: rr_score's value for the row it answers. */
    wsel_choice_explain(choice, wsel_reason_unless_all_busy(skip, WSEL_REASON_ROTATION),
                        0.0);
    return 0;
}

/* [select thread, concurrent] Distance ahead of the cursor: argmin is the
 * row the next select answers. Reads the ticket, never takes one; no
 * allocation. */
static int32_t rr_score(void *instance, const wsel_request *request,
                        const wsel_table *table, double *scores)
{
    roundrobin *rr = instance;
    (void)request;
    uint8_t skip;
    uint32_t m;
    int32_t rc = eligible_rows(rr, table, &skip, &m);
    if (rc < 0)
        return rc;
    uint32_t k =
        (uint32_t)(atomic_load_explicit(&rr->next_ticket, memory_order_relaxed) % m);
    /* The eligible row with index e in the rotation is (e - k) mod m ahead. */
    uint32_t e = 0;
    for (uint32_t i = 0; i < table->num_rows; i++) {
        if (table->flags[i] & skip) {
            scores[i] = (double)m;
            continue;
        }
        scores[i] = (double)(e >= k ? e - k : e + m - k);
        e++;
    }
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT, /* not stateless: the ticket moves */
    .name = "roundrobin",
    .version = "1.1.0",
    .description = "each request to the next eligible rank in turn",
    .param_def_size = sizeof(wsel_param_def),
    .create = rr_create,
    .destroy = rr_destroy,
    .select = rr_select,
    .score = rr_score,
};
