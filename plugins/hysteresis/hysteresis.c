// SPDX-License-Identifier: Apache-2.0
/*
 * hysteresis -- sticky selection with a dead band and a load bound: the fix
 * for flicker that does not herd. A request's owner (the rank that last
 * received its deepest routed prefix block, sticky_table.h) keeps it while
 * eligible, inside the dead band on cost and inside the load bound;
 * otherwise it answers like softmax. Lock-free, no allocation in select.
 * The rules, the parameters and why: docs/policies.md, "hysteresis".
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "owner_hint.h"
#include "prefix_owner.h"
#include "prefix_owner_params.h"
#include "row_scan.h"
#include "sticky_table.h"
#include "wsel.h"

/* Parameter indices, in the order of the table below: append, never insert. */
enum {
    P_REL_MARGIN,
    P_ABS_MARGIN,
    P_LOAD_SLACK,
    P_TEMPERATURE,
    P_CAPACITY,
    P_AFFINITY,
    P_COUNT
};

static const wsel_param_def hysteresis_params[P_COUNT] = {
    [P_REL_MARGIN] = PREFIX_OWNER_PARAM_REL_MARGIN,
    [P_ABS_MARGIN] = PREFIX_OWNER_PARAM_ABS_MARGIN,
    [P_LOAD_SLACK] = {.name = "load_slack",
                      .doc = "load bound: keep the owner while its prefill_tokens <= "
                             "least + load_slack * (mean - least) over candidates",
                      .type = WSEL_PARAM_DOUBLE,
                      .default_value = 0.5,
                      .min_value = 0.0,
                      .max_value = 1e6},
    [P_TEMPERATURE] = PREFIX_OWNER_PARAM_TEMPERATURE,
    [P_CAPACITY] = PREFIX_OWNER_PARAM_CAPACITY,
    [P_AFFINITY] = {.name = "use_affinity_key",
                    .doc = "key on the request's affinity_key (a session id) instead "
                           "of its prefix blocks; off: the affinity key is used only "
                           "by requests without block hashes",
                    .type = WSEL_PARAM_BOOL,
                    .default_value = 0.0,
                    .min_value = 0.0,
                    .max_value = 1.0},
};

typedef struct hysteresis {
    const wsel_host_api *host;
    double rel_margin;
    double abs_margin;
    double load_slack;
    double temperature;
    uint32_t use_affinity_key;
    sticky_table owners;
    owner_hint rows; /* where each owner's row was last found */
} hysteresis;

static int32_t hysteresis_create(const wsel_host_api *host, const double *params,
                                 uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != P_COUNT)
        return WSEL_EINVAL;
    hysteresis *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return WSEL_ENOMEM;
    h->host = host;
    h->rel_margin = params[P_REL_MARGIN];
    h->abs_margin = params[P_ABS_MARGIN];
    h->load_slack = params[P_LOAD_SLACK];
    h->temperature = params[P_TEMPERATURE];
    h->use_affinity_key = params[P_AFFINITY] != 0.0;
    int32_t rc = sticky_table_init(&h->owners, (uint32_t)params[P_CAPACITY]);
    if (rc != 0)
        goto out_free_instance;
    rc = owner_hint_init(&h->rows);
    if (rc != 0)
        goto out_free_owners;
    *out_instance = h;
    return 0;

out_free_owners:
    sticky_table_free(&h->owners);
out_free_instance:
    free(h);
    return rc;
}

static void hysteresis_destroy(void *instance)
{
    hysteresis *h = instance;
    if (h == NULL)
        return;
    owner_hint_free(&h->rows);
    sticky_table_free(&h->owners);
    free(h);
}

/* --- the candidates ------------------------------------------------------- */

/* Which rows are candidates (the host's rule, eligible_skip: excluded
 * never, busy only when every non-excluded row is busy; inline in a 1.0
 * host), the best candidate cost and, when the same pass could tell, the
 * spread of candidate loads (row_scan.h). Returns 0, WSEL_ENOCANDIDATE,
 * or WSEL_EINVAL when a candidate cost is not finite (as softmax_sample
 * would). */
static int32_t scan_candidates(const wsel_host_api *host, const wsel_table *t,
                               uint8_t *out_skip, row_scan_result *out_scan)
{
    uint8_t skip;
    int32_t rc = wsel_call_eligible_skip(host, t->flags, t->num_rows, &skip, NULL);
    if (rc < 0)
        return rc;
    row_scan(t->flags, t->cost, t->prefill_tokens, t->num_rows, skip, out_scan);
    if (!out_scan->best_known) {
        rc = row_scan_best(t->flags, t->cost, t->num_rows, skip, &out_scan->best);
        if (rc != 0)
            return rc;
        out_scan->best_known = 1;
    }
    *out_skip = skip;
    return 0;
}

/* Row i's owner fingerprint (sticky_owner). */
static inline uint32_t row_owner(const wsel_table *t, uint32_t i)
{
    return sticky_owner(sticky_worker_mix(t->worker_id[i]), t->dp_rank[i]);
}

/*
 * The first candidate row whose owner fingerprint is `owner`, or
 * UINT32_MAX. Each worker's mix is computed only until the row is found,
 * and a row's flags are read only when its fingerprint matches: the
 * fingerprint's high 32 bits of mix64, with 0 stored as 1, equal
 * `owner` exactly when (bits | (owner == 1)) == owner.
 */
static uint32_t owner_row_scan(const wsel_table *t, uint32_t owner, uint8_t skip)
{
    const uint32_t zero_too = owner == 1u;
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
        uint64_t wm = sticky_worker_mix(t->worker_id[first]);
        for (uint32_t i = first; i < end; i++) {
            uint32_t fp = (uint32_t)(mix64(wm + t->dp_rank[i]) >> 32);
            if ((fp | zero_too) == owner && (t->flags[i] & skip) == 0)
                return i;
        }
    }
    return UINT32_MAX;
}

/* owner_row_scan, the hinted row checked first (one fingerprint): the
 * same row unless two of the table's ranks share the owner's 32-bit
 * fingerprint, when the hinted one of them may answer. */
static uint32_t owner_row(const owner_hint *hint, const wsel_table *t, uint32_t owner,
                          uint8_t skip)
{
    uint32_t r = owner_hint_get(hint, owner);
    if (r < t->num_rows && (t->flags[r] & skip) == 0 && row_owner(t, r) == owner)
        return r;
    r = owner_row_scan(t, owner, skip);
    if (r != UINT32_MAX)
        owner_hint_put(hint, owner, r);
    return r;
}

/* Whether row `row` (a candidate) has its load inside the bound:
 *     load <= least + load_slack * (mean - least) over candidates,
 * the load being prefill_tokens: the tokens a rank must prefill before
 * this request's first token (its queued prefill plus this request's
 * uncached tokens), which is what a request's time to first token grows
 * with. */
static int load_in_bound(const hysteresis *h, const wsel_table *t, uint8_t skip,
                         const row_scan_result *scan, uint32_t row)
{
    double min_load = scan->min_load, mean_load = scan->mean_load;
    if (!scan->loads_known)
        row_scan_loads(t->flags, t->prefill_tokens, t->num_rows, skip, &min_load,
                       &mean_load);
    double bound = min_load + h->load_slack * (mean_load - min_load);
    return (double)t->prefill_tokens[row] <= bound;
}

/*
 * The request's owner's row (the owner fingerprint found in *out_owner, 0:
 * none) when it is a candidate and its load is inside the bound, else
 * UINT32_MAX. Select keeps that row when its cost is also inside the dead
 * band: cost <= best + band_width(h, best).
 */
static uint32_t owner_in_bound(const hysteresis *h, const wsel_request *req,
                               const wsel_table *t, uint8_t skip,
                               const row_scan_result *scan, uint32_t *out_owner)
{
    uint32_t owner = prefix_owner_find(&h->owners, req, h->use_affinity_key);
    *out_owner = owner;
    if (owner == 0)
        return UINT32_MAX;
    uint32_t row = owner_row(&h->rows, t, owner, skip);
    return row != UINT32_MAX && load_in_bound(h, t, skip, scan, row) ? row : UINT32_MAX;
}

/* The dead band's width around the best candidate cost. */
static double band_width(const hysteresis *h, double best)
{
    return prefix_owner_band(h->rel_margin, h->abs_margin, best);
}

static int32_t hysteresis_select(void *instance, const wsel_request *req,
                                 const wsel_table *t, wsel_choice *choice)
{
    hysteresis *h = instance;
    uint8_t skip;
    row_scan_result scan;
    int32_t rc = scan_candidates(h->host, t, &skip, &scan);
    if (rc != 0)
        return rc;
    double best = scan.best;
    /* softmax_sample's own argument checks, so that keeping an owner
     * (which skips it) fails exactly where a fresh choice would. */
    double temperature = wsel_request_temperature(req, h->temperature);
    if (!isfinite(temperature) || temperature < 0.0 ||
        !(req->uniform >= 0.0 && req->uniform < 1.0) || req->block_size == 0)
        return WSEL_EINVAL;

    /* The owner's row, then the dead band (one compare), and only then the
     * load bound (a pass over the rows): the same rule as owner_in_bound,
     * its cheap test first. */
    uint32_t owner = prefix_owner_find(&h->owners, req, h->use_affinity_key);
    uint32_t kept = owner != 0 ? owner_row(&h->rows, t, owner, skip) : UINT32_MAX;
    if (kept != UINT32_MAX && t->cost[kept] <= best + band_width(h, best) &&
        load_in_bound(h, t, skip, &scan, kept)) {
        choice->row = kept;
        prefix_owner_record(&h->owners, req, owner, h->use_affinity_key);
        wsel_choice_explain(choice, WSEL_REASON_STICKY, t->cost[kept]);
        return 0;
    }

    uint32_t row;
    rc = h->host->softmax_sample(t->cost, t->flags, t->num_rows, skip, temperature,
                                 req->uniform, &row);
    if (rc != 0)
        return rc;
    uint32_t fp = row_owner(t, row);
    prefix_owner_record(&h->owners, req, fp, h->use_affinity_key);
    owner_hint_put(&h->rows, fp, row);
    choice->row = row;
    uint32_t reason = owner != 0          ? WSEL_REASON_SPILLED
                      : temperature > 0.0 ? WSEL_REASON_SAMPLED
                                          : WSEL_REASON_CHEAPEST;
    wsel_choice_explain(choice, wsel_reason_unless_all_busy(skip, reason), t->cost[row]);
    return 0;
}

/*
 * [select thread, concurrent] The score (ABI 1.1), lower is better, in
 * cost units: every row's default cost, except that the owner of the
 * request's deepest routed block, while its load is inside the bound, has
 * its cost less the dead band's width (rel_margin * |best| + abs_margin).
 * (whether or not its cost is inside the band). So the lowest score is the
 * row select takes at temperature 0: the owner whenever select keeps it
 * (cost <= best + band, so its score is <= the best cost; exactly equal, a
 * tie, only at the band's very edge), otherwise the cheapest row, which
 * the owner's score, above the best cost, does not undercut.
 * In `pipeline` the band is a stickiness bonus the other scorers can
 * outweigh. Reads the owner table, never writes it: a score is not a
 * routing. Rows select would never take (excluded; busy while another row
 * is not) score their cost, or DBL_MAX when it is not finite.
 */
static int32_t hysteresis_score(void *instance, const wsel_request *req,
                                const wsel_table *t, double *scores)
{
    const hysteresis *h = instance;
    uint8_t skip;
    row_scan_result scan;
    int32_t rc = scan_candidates(h->host, t, &skip, &scan);
    if (rc != 0)
        return rc;
    double best = scan.best;
    for (uint32_t i = 0; i < t->num_rows; i++)
        scores[i] = isfinite(t->cost[i]) ? t->cost[i] : DBL_MAX;
    uint32_t owner;
    uint32_t kept = owner_in_bound(h, req, t, skip, &scan, &owner);
    if (kept != UINT32_MAX)
        scores[kept] = t->cost[kept] - band_width(h, best);
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT,
    .name = "hysteresis",
    .version = "2.1.1",
    .description = "keeps a request on the owner of its deepest routed prefix block "
                   "while inside a dead band and a load bound",
    .params = hysteresis_params,
    .num_params = P_COUNT,
    .param_def_size = sizeof(wsel_param_def),
    .create = hysteresis_create,
    .destroy = hysteresis_destroy,
    .select = hysteresis_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
    .score = hysteresis_score,
};
