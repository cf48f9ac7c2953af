// SPDX-License-Identifier: Apache-2.0
/*
 * validate.c -- full checks of a table or a request handed in by a router.
 *
 * These are the slow, complete checks a router runs when it builds its own
 * tables (or in debug builds); wsel_host_select runs only the cheap ones.
 * Every message names the column (or field) and the row.
 */
#include <math.h>

#include "internal.h"

static int32_t check_columns(const wsel_table *t, char *err, size_t err_size)
{
    const struct {
        const void *ptr;
        const char *name;
    } cols[] = {
        {t->worker_id, "worker_id"},
        {t->dp_rank, "dp_rank"},
        {t->overlap_blocks, "overlap_blocks"},
        {t->prefill_tokens, "prefill_tokens"},
        {t->decode_blocks, "decode_blocks"},
        {t->cost, "cost"},
        {t->kv_capacity_blocks, "kv_capacity_blocks"},
        {t->active_requests, "active_requests"},
        {t->flags, "flags"},
        {t->group_first_row, "group_first_row"},
        {t->group_row_count, "group_row_count"},
    };
    for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) {
        if (cols[k].ptr == NULL) {
            wsel__set_error(err, err_size, "table: column %s is NULL", cols[k].name);
            return WSEL_ETABLE;
        }
    }
    return 0;
}

static int32_t check_rows(const wsel_table *t, char *err, size_t err_size)
{
    for (uint32_t i = 0; i < t->num_rows; i++) {
        if (!isfinite(t->cost[i])) {
            wsel__set_error(err, err_size, "table: cost[%u] is not finite", i);
            return WSEL_ETABLE;
        }
        if (t->flags[i] & ~WSEL_ROW_FLAGS_KNOWN) {
            wsel__set_error(err, err_size, "table: flags[%u] has unknown bits 0x%02x", i,
                            (unsigned)(t->flags[i] & ~WSEL_ROW_FLAGS_KNOWN));
            return WSEL_ETABLE;
        }
        if (i == 0)
            continue;
        uint64_t wa = t->worker_id[i - 1], wb = t->worker_id[i];
        if (wb < wa || (wb == wa && t->dp_rank[i] <= t->dp_rank[i - 1])) {
            wsel__set_error(
                err, err_size,
                "table: row %u (worker_id %llu, dp_rank %u) is out of canonical "
                "order after row %u (worker_id %llu, dp_rank %u)",
                i, (unsigned long long)wb, t->dp_rank[i], i - 1, (unsigned long long)wa,
                t->dp_rank[i - 1]);
            return WSEL_ETABLE;
        }
    }
    return 0;
}

/* Groups cover the rows in order, once each, and split exactly where the
 * worker id changes. */
static int32_t check_groups(const wsel_table *t, char *err, size_t err_size)
{
    if (t->num_groups == 0 || t->num_groups > t->num_rows) {
        wsel__set_error(err, err_size, "table: num_groups %u is not in [1, num_rows %u]",
                        t->num_groups, t->num_rows);
        return WSEL_ETABLE;
    }
    uint32_t next = 0;
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
        if (first != next) {
            wsel__set_error(err, err_size,
                            "table: group_first_row[%u] is %u, expected %u (groups must "
                            "cover the rows in order)",
                            g, first, next);
            return WSEL_ETABLE;
        }
        if (count == 0 || count > t->num_rows - first) {
            wsel__set_error(err, err_size,
                            "table: group_row_count[%u] is %u, must be in [1, %u]", g,
                            count, t->num_rows - first);
            return WSEL_ETABLE;
        }
        for (uint32_t r = first + 1; r < first + count; r++) {
            if (t->worker_id[r] != t->worker_id[first]) {
                wsel__set_error(err, err_size,
                                "table: group %u mixes workers (worker_id[%u] %llu, "
                                "worker_id[%u] %llu)",
                                g, first, (unsigned long long)t->worker_id[first], r,
                                (unsigned long long)t->worker_id[r]);
                return WSEL_ETABLE;
            }
        }
        if (g > 0 && t->worker_id[first] == t->worker_id[first - 1]) {
            wsel__set_error(err, err_size,
                            "table: worker_id %llu is split across groups %u and %u",
                            (unsigned long long)t->worker_id[first], g - 1, g);
            return WSEL_ETABLE;
        }
        next = first + count;
    }
    if (next != t->num_rows) {
        wsel__set_error(err, err_size, "table: groups cover %u rows of %u", next,
                        t->num_rows);
        return WSEL_ETABLE;
    }
    return 0;
}

int32_t wsel_table_validate(const wsel_table *table, char *err, size_t err_size)
{
    if (table == NULL) {
        wsel__set_error(err, err_size, "table: NULL");
        return WSEL_ETABLE;
    }
    if (table->struct_size < WSEL_TABLE_SIZE_1_0) {
        wsel__set_error(err, err_size, "table: struct_size %u, ABI 1.0 needs at least %u",
                        table->struct_size, WSEL_TABLE_SIZE_1_0);
        return WSEL_ETABLE;
    }
    if (table->reserved0 != 0) {
        wsel__set_error(err, err_size, "table: reserved0 is %u, must be 0",
                        table->reserved0);
        return WSEL_ETABLE;
    }
    if (table->num_rows == 0) {
        wsel__set_error(err, err_size, "table: num_rows is 0");
        return WSEL_ETABLE;
    }
    int32_t rc = check_columns(table, err, err_size);
    if (rc == 0)
        rc = check_rows(table, err, err_size);
    if (rc == 0)
        rc = check_groups(table, err, err_size);
    return rc;
}

int32_t wsel_request_validate(const wsel_request *r, char *err, size_t err_size)
{
    const char *why = NULL;
    if (r == NULL)
        why = "is NULL";
    else if (r->struct_size < WSEL_REQUEST_SIZE_1_0)
        why = "struct_size is smaller than ABI 1.0's";
    else if (r->block_size == 0)
        why = "block_size is 0";
    else if (r->num_block_hashes > 0 && r->block_hashes == NULL)
        why = "block_hashes is NULL but num_block_hashes > 0";
    else if (!isfinite(r->overlap_score_weight) || r->overlap_score_weight < 0.0)
        why = "overlap_score_weight is negative or not finite";
    else if (!isfinite(r->temperature) || r->temperature < 0.0)
        why = "temperature is negative or not finite";
    else if (!(r->uniform >= 0.0 && r->uniform < 1.0))
        why = "uniform is not in [0, 1)";
    else if (r->rng == NULL)
        why = "rng is NULL";
    else if (r->struct_size >= offsetof(wsel_request, overrides) + sizeof(r->overrides) &&
             (r->overrides & ~(uint32_t)WSEL_OVERRIDE_TEMPERATURE) != 0)
        why = "overrides has a bit this host does not know"; /* like unknown row flags */
    if (why == NULL)
        return 0;
    if (r != NULL)
        wsel__set_error(err, err_size, "request %llu: %s",
                        (unsigned long long)r->request_id, why);
    else
        wsel__set_error(err, err_size, "request: %s", why);
    return WSEL_EREQUEST;
}
