/*
 * hysteresis -- sticky selection with a dead band: the fix for flicker.
 *
 * When every rank's cost is nearly the same (high cache-hit rates), the
 * argmin flips on any tiny load change and the softmax magnifies the noise,
 * so one session's requests jump between workers and lose their cache.
 * This policy remembers, per affinity key, the (worker_id, dp_rank) it chose
 * last and keeps it while it stays eligible and its cost is within a dead
 * band of the best candidate's:
 *
 *     keep  iff  cost_incumbent <= cost_best + rel_margin * |cost_best|
 *                                            + abs_margin
 *
 * Without an incumbent (or when it must move) it answers like the softmax
 * policy. The memory is a bounded LRU table behind one instance lock, so
 * select is safe from many threads at once.
 *
 * Cost of a select: one pass over the rows for the best candidate cost,
 * then, for a key whose incumbent stays, two binary searches; the softmax
 * (a second pass, and an exp per row at T > 0) runs only for fresh
 * choices.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sticky_table.h"
#include "wsel.h"

/* Parameter indices, in the order of the table below. */
enum { P_KEY_BLOCKS, P_REL_MARGIN, P_ABS_MARGIN, P_TEMPERATURE, P_CAPACITY, P_COUNT };

static const wsel_param_def hysteresis_params[P_COUNT] = {
    [P_KEY_BLOCKS] = {"key_blocks",
                      "without an affinity key, key on the hash of the first N blocks",
                      WSEL_PARAM_INT, 0, 4.0, 1.0, 1048576.0, NULL},
    [P_REL_MARGIN] =
        {"rel_margin",
         "dead band: stay while cost <= best * (1 + rel_margin) + abs_margin",
         WSEL_PARAM_DOUBLE, 0, 1.0, 0.0, 100.0, NULL},
    [P_ABS_MARGIN] = {"abs_margin", "dead band: absolute slack, in cost units (blocks)",
                      WSEL_PARAM_DOUBLE, 0, 64.0, 0.0, 1e9, NULL},
    [P_TEMPERATURE] = {"temperature",
                       "softmax temperature for fresh choices; a request's own "
                       "temperature > 0 wins",
                       WSEL_PARAM_DOUBLE, 0, 0.0, 0.0, 100.0, NULL},
    [P_CAPACITY] = {"capacity", "keys remembered; the least recently used is forgotten",
                    WSEL_PARAM_INT, 0, 65536.0, 1.0, 16777216.0, NULL},
};

typedef struct hysteresis {
    const wsel_host_api *host;
    uint32_t key_blocks;
    double rel_margin;
    double abs_margin;
    double temperature;
    /* Guards `memory`; held only for a lookup, a binary search and a put. */
    pthread_mutex_t lock;
    sticky_table memory;
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
    h->key_blocks = (uint32_t)params[P_KEY_BLOCKS];
    h->rel_margin = params[P_REL_MARGIN];
    h->abs_margin = params[P_ABS_MARGIN];
    h->temperature = params[P_TEMPERATURE];

    int32_t rc = sticky_table_init(&h->memory, (uint32_t)params[P_CAPACITY]);
    if (rc != 0)
        goto out_free_instance;
    if (pthread_mutex_init(&h->lock, NULL) != 0) {
        rc = WSEL_ENOMEM;
        goto out_free_memory;
    }
    *out_instance = h;
    return 0;

out_free_memory:
    sticky_table_free(&h->memory);
out_free_instance:
    free(h);
    return rc;
}

static void hysteresis_destroy(void *instance)
{
    hysteresis *h = instance;
    if (h == NULL)
        return;
    pthread_mutex_destroy(&h->lock);
    sticky_table_free(&h->memory);
    free(h);
}

/* The stickiness key: the affinity key, else the hash standing for the first
 * key_blocks blocks, else 0 (no stickiness). */
static uint64_t request_key(const wsel_request *req, uint32_t key_blocks)
{
    if (req->affinity_key != 0)
        return req->affinity_key;
    if (req->num_block_hashes == 0 || req->block_hashes == NULL)
        return 0;
    uint32_t n = key_blocks < req->num_block_hashes ? key_blocks : req->num_block_hashes;
    return req->block_hashes[n - 1];
}

/* Row of (worker_id, dp_rank) in `t`, or STICKY_NIL if it is gone: binary
 * search over the group view, then over that worker's ranks. */
static uint32_t find_row(const wsel_table *t, uint64_t worker_id, uint32_t dp_rank)
{
    uint32_t lo = 0, hi = t->num_groups;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->worker_id[t->group_first_row[mid]] < worker_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == t->num_groups || t->worker_id[t->group_first_row[lo]] != worker_id)
        return STICKY_NIL;
    uint32_t first = t->group_first_row[lo];
    uint32_t rlo = first, rhi = first + t->group_row_count[lo];
    while (rlo < rhi) {
        uint32_t mid = rlo + (rhi - rlo) / 2;
        if (t->dp_rank[mid] < dp_rank)
            rlo = mid + 1;
        else
            rhi = mid;
    }
    if (rlo == first + t->group_row_count[lo] || t->dp_rank[rlo] != dp_rank)
        return STICKY_NIL;
    return rlo;
}

/* The bits of c - c: zero when c is finite, a NaN's otherwise (x - x is
 * +0.0 for every finite x), so OR-ing them over many costs is one
 * branch-free finiteness test. */
static uint64_t nonfinite_bits(double c)
{
    double z = c - c;
    uint64_t bits;
    memcpy(&bits, &z, sizeof(bits));
    return bits;
}

/* What one pass over the rows learns: which rows are not candidates
 * (excluded always, busy unless every non-excluded row is busy) and the best
 * candidate cost. Returns 0, WSEL_ENOCANDIDATE, or WSEL_EINVAL when a
 * candidate cost is not finite (as softmax_sample would).
 *
 * Each row feeds one set, free (neither busy nor excluded, the common case,
 * one test) or busy; the non-excluded rows are their union. The minimum is
 * written `best < c ? best : c`, the operand order of x86's minsd, so it
 * updates in place; on a tie it takes c, which differs from best at most in
 * the sign of a zero, and the dead band is the same for both. */
static int32_t scan_candidates(const wsel_table *t, uint8_t *out_skip, double *out_best)
{
    double best_free = INFINITY, best_busy = INFINITY;
    uint32_t n_free = 0, n_busy = 0;
    uint64_t bad_free = 0, bad_busy = 0;
    const uint8_t *flags = t->flags;
    const double *cost = t->cost;
    for (uint32_t i = 0; i < t->num_rows; i++) {
        uint8_t f = flags[i];
        double c = cost[i];
        if ((f & (WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY)) == 0) {
            n_free++;
            bad_free |= nonfinite_bits(c);
            best_free = best_free < c ? best_free : c;
        } else if ((f & WSEL_ROW_EXCLUDED) == 0) {
            n_busy++;
            bad_busy |= nonfinite_bits(c);
            best_busy = best_busy < c ? best_busy : c;
        }
    }
    if (n_free + n_busy == 0)
        return WSEL_ENOCANDIDATE;
    if (n_free == 0) {
        if (bad_busy != 0)
            return WSEL_EINVAL;
        *out_skip = WSEL_ROW_EXCLUDED;
        *out_best = best_busy;
        return 0;
    }
    if (bad_free != 0)
        return WSEL_EINVAL;
    *out_skip = (uint8_t)(WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY);
    *out_best = best_free;
    return 0;
}

/* The row of the incumbent remembered for `key` if it stays: present in
 * `t`, a candidate, its cost within `limit`. Returns 1 with *out_row set,
 * else 0. The caller holds h->lock. */
static int incumbent_stays(const hysteresis *h, const wsel_table *t, uint64_t key,
                           uint8_t skip, double limit, uint32_t *out_row)
{
    const sticky_entry *e = sticky_table_find(&h->memory, key);
    if (e == NULL)
        return 0;
    uint32_t inc = find_row(t, e->worker_id, e->dp_rank);
    if (inc == STICKY_NIL || (t->flags[inc] & skip) != 0 || !(t->cost[inc] <= limit))
        return 0;
    *out_row = inc;
    return 1;
}

static int32_t hysteresis_select(void *instance, const wsel_request *req,
                                 const wsel_table *t, wsel_choice *choice)
{
    hysteresis *h = instance;
    uint8_t skip;
    double best;
    int32_t rc = scan_candidates(t, &skip, &best);
    if (rc != 0)
        return rc;
    /* softmax_sample's own argument checks, so that keeping an incumbent
     * (which skips it) fails exactly where a fresh choice would. */
    double temperature = req->temperature > 0.0 ? req->temperature : h->temperature;
    if (!isfinite(temperature) || temperature < 0.0 ||
        !(req->uniform >= 0.0 && req->uniform < 1.0))
        return WSEL_EINVAL;

    uint64_t key = request_key(req, h->key_blocks);
    double limit = best + h->rel_margin * (best < 0.0 ? -best : best) + h->abs_margin;
    uint32_t row;
    if (key != 0) {
        pthread_mutex_lock(&h->lock);
        int stays = incumbent_stays(h, t, key, skip, limit, &row);
        if (stays)
            sticky_table_put(&h->memory, key, t->worker_id[row], t->dp_rank[row]);
        pthread_mutex_unlock(&h->lock);
        if (stays) {
            choice->row = row;
            return 0;
        }
    }

    /* A fresh choice, computed outside the lock. */
    rc = h->host->softmax_sample(t->cost, t->flags, t->num_rows, skip, temperature,
                                 req->uniform, &row);
    if (rc != 0)
        return rc;
    if (key != 0) {
        /* Another thread may have chosen for this key meanwhile: its choice,
         * if it stays, wins, so one key never splits across rows. */
        pthread_mutex_lock(&h->lock);
        uint32_t inc;
        if (incumbent_stays(h, t, key, skip, limit, &inc))
            row = inc;
        sticky_table_put(&h->memory, key, t->worker_id[row], t->dp_rank[row]);
        pthread_mutex_unlock(&h->lock);
    }
    choice->row = row;
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT,
    .name = "hysteresis",
    .version = "1.0.0",
    .description = "sticky per-key choice, kept until it leaves a dead band around "
                   "the best cost",
    .params = hysteresis_params,
    .num_params = P_COUNT,
    .param_def_size = sizeof(wsel_param_def),
    .create = hysteresis_create,
    .destroy = hysteresis_destroy,
    .select = hysteresis_select,
    .on_request_finished = NULL,
    .on_topology_changed = NULL,
};
