// SPDX-License-Identifier: Apache-2.0
/*
 * chash -- consistent hashing with bounded loads (Mirrokni, Thorup,
 * Zadimoghaddam), keyed on the request's own prefix (request_key, shares
 * counted in sketch.h), weighted by ranks and bounded by work; a spill
 * stays inside the bound (spill_row, scan.h). The ring is rebuilt in place
 * when the worker set changes, under the write side of a reader lock.
 * The bound, the key, the spill order and why: docs/policies.md, "chash".
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "depth_grid.h"
#include "mix64.h"
#include "ring.h"
#include "scan.h"
#include "sketch.h"
#include "wsel.h"

/* Parameter indices, in the order of the table below: append, never insert. */
enum {
    P_VNODES,
    P_EPSILON,
    P_MAX_WORKERS,
    P_WINDOW,
    P_SKETCH_WIDTH,
    P_AFFINITY,
    P_LOAD,
    P_SPILL,
    P_COUNT
};

/* What a worker's load counts (P_LOAD): scan.h's CHASH_LOAD_*. */
#define LOAD_REQUESTS CHASH_LOAD_REQUESTS
#define LOAD_BLOCKS   CHASH_LOAD_BLOCKS
static const char *const load_names[] = {"requests", "blocks", NULL};
/* Which rank inside the bound a spill takes (P_SPILL). */
enum { SPILL_COST, SPILL_OVERLAP };
static const char *const spill_names[] = {"cost", "overlap", NULL};

/* Largest max_workers at create (the ring grows past it on a topology
 * change): max_workers * vnodes points must fit a uint32_t. */
#define CHASH_MAX_WORKERS 65536u

static const wsel_param_def chash_params[P_COUNT] = {
    [P_VNODES] = {.name = "vnodes",
                  .doc = "points per rank of a worker on the hash ring",
                  .type = WSEL_PARAM_INT,
                  .default_value = 100.0,
                  .min_value = 1.0,
                  .max_value = 1000.0},
    [P_EPSILON] = {.name = "epsilon",
                   .doc = "load bound: a worker takes a request while its load "
                          "stays within (1 + epsilon) times its share of the total, a "
                          "share being its ranks / all ranks",
                   .type = WSEL_PARAM_DOUBLE,
                   .default_value = 0.25,
                   .min_value = 0.0,
                   .max_value = 10.0},
    [P_MAX_WORKERS] = {.name = "max_workers",
                       .doc = "ring points reserved at create: max_workers x vnodes; "
                              "past them each worker gets fewer points (still per "
                              "rank), and past max_workers x vnodes workers the ring "
                              "grows on a topology change",
                       .type = WSEL_PARAM_INT,
                       .default_value = 4096.0,
                       .min_value = 1.0,
                       .max_value = (double)CHASH_MAX_WORKERS},
    [P_WINDOW] = {.name = "window",
                  .doc = "requests over which a block's share of recent traffic is "
                         "counted (half-life; rounded down to a power of two)",
                  .type = WSEL_PARAM_INT,
                  .default_value = 1024.0,
                  .min_value = 1.0,
                  .max_value = 16777216.0},
    [P_SKETCH_WIDTH] = {.name = "sketch_width",
                        .doc = "counters of recent block shares (4 bytes each; rounded "
                               "up to a power of two)",
                        .type = WSEL_PARAM_INT,
                        .default_value = 262144.0,
                        .min_value = 1.0,
                        .max_value = 16777216.0},
    [P_AFFINITY] = {.name = "use_affinity_key",
                    .doc = "key on the request's affinity_key (a session id) instead of "
                           "its prefix blocks; off: only requests without block hashes "
                           "use it",
                    .type = WSEL_PARAM_BOOL,
                    .default_value = 0.0,
                    .min_value = 0.0,
                    .max_value = 1.0},
    [P_LOAD] = {.name = "load",
                .doc = "what the bound counts: blocks (the KV blocks the worker's "
                       "ranks would hold with the request, decode_blocks) or requests "
                       "(active requests, MTZ's count)",
                .type = WSEL_PARAM_ENUM,
                .default_value = LOAD_BLOCKS,
                .min_value = LOAD_REQUESTS,
                .max_value = LOAD_BLOCKS,
                .choices = load_names},
    [P_SPILL] = {.name = "spill",
                 .doc = "where a spill goes among the workers inside the bound: cost "
                        "(the lowest default cost) or overlap (the deepest cached "
                        "prefix, then the lowest cost)",
                 .type = WSEL_PARAM_ENUM,
                 .default_value = SPILL_OVERLAP,
                 .min_value = SPILL_COST,
                 .max_value = SPILL_OVERLAP,
                 .choices = spill_names},
};

typedef struct chash {
    const wsel_host_api *host;
    double epsilon;
    uint32_t use_affinity_key;
    uint32_t load_kind;  /* LOAD_* */
    uint32_t spill_kind; /* SPILL_* */
    /* Readers: selects on a current ring. Writer: a rebuild. */
    pthread_rwlock_t lock;
    chash_ring ring;
    /* Recent traffic per prefix block; lock-free, outside `lock`. */
    chash_sketch recent;
} chash;

static int32_t chash_create(const wsel_host_api *host, const double *params,
                            uint32_t num_params, void **out_instance)
{
    if (host == NULL || params == NULL || out_instance == NULL || num_params != P_COUNT)
        return WSEL_EINVAL;
    chash *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return WSEL_ENOMEM;
    c->host = host;
    c->epsilon = params[P_EPSILON];
    c->use_affinity_key = params[P_AFFINITY] != 0.0;
    c->load_kind = (uint32_t)params[P_LOAD];
    c->spill_kind = (uint32_t)params[P_SPILL];

    int32_t rc = chash_ring_init(&c->ring, (uint32_t)params[P_MAX_WORKERS],
                                 (uint32_t)params[P_VNODES]);
    if (rc != 0)
        goto out_free_instance;
    rc = chash_sketch_init(&c->recent, (uint32_t)params[P_SKETCH_WIDTH],
                           (uint32_t)params[P_WINDOW]);
    if (rc != 0)
        goto out_free_ring_only;
    /* Prefer the writer: a rebuild must not starve behind a stream of
     * selects. */
    pthread_rwlockattr_t attr;
    if (pthread_rwlockattr_init(&attr) != 0) {
        rc = WSEL_ENOMEM;
        goto out_free_ring;
    }
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int failed = pthread_rwlock_init(&c->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (failed) {
        rc = WSEL_ENOMEM;
        goto out_free_ring;
    }
    *out_instance = c;
    return 0;

out_free_ring:
    chash_sketch_free(&c->recent);
out_free_ring_only:
    chash_ring_free(&c->ring);
out_free_instance:
    free(c);
    return rc;
}

static void chash_destroy(void *instance)
{
    chash *c = instance;
    if (c == NULL)
        return;
    pthread_rwlock_destroy(&c->lock);
    chash_sketch_free(&c->recent);
    chash_ring_free(&c->ring);
    free(c);
}

/* --- the key ------------------------------------------------------------ */

/* The depths the sketch counts and the key search probes:
 * plugins/common/depth_grid.h. */

/*
 * The request's own prefix: its shallowest block that is NOT common, a
 * block being common when more than one worker's share (1 / n_workers) of
 * recent requests contained it. A prefix that common cannot live on one
 * worker anyway (it is more than that worker's whole share of the
 * traffic), so keying on it would only pile requests onto one worker and
 * leave the bound to scatter them; the first block past it is where the
 * request's own content (a conversation, a document, an agent's task)
 * starts, and every later request extending that content maps to the same
 * worker. Shares only shrink with depth (a request containing block d
 * contains every block before it), so a binary search over the grid finds
 * the boundary in O(log n) sketch reads. A request whose every block is
 * common (a prompt many requests repeat whole) keys on its last block.
 *
 * Without block hashes: the affinity key, else the request id. With
 * use_affinity_key: the affinity key whenever it is set.
 */
static uint64_t request_key(const chash *c, const wsel_request *req, uint32_t n_workers,
                            uint32_t *out_depth)
{
    *out_depth = 0;
    if (c->use_affinity_key && req->affinity_key != 0)
        return req->affinity_key;
    uint32_t n = req->block_hashes != NULL ? req->num_block_hashes : 0;
    if (n == 0)
        return req->affinity_key != 0 ? req->affinity_key : req->request_id;
    const uint64_t *b = req->block_hashes;
    double common = 1.0 / (double)(n_workers > 0 ? n_workers : 1);
    /* Smallest d in [1, n] whose depth_grid_floor(d) is not common; n + 1: none. */
    uint32_t lo = 1, hi = n + 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (chash_sketch_share(&c->recent, b[depth_grid_floor(mid) - 1]) > common)
            lo = mid + 1;
        else
            hi = mid;
    }
    *out_depth = lo <= n ? depth_grid_floor(lo) : n;
    return b[*out_depth - 1];
}

/* Count the request's blocks (at the grid depths and its last) in the
 * sketch of recent traffic. */
static void count_request(chash *c, const wsel_request *req)
{
    if (c->use_affinity_key && req->affinity_key != 0)
        return;
    uint32_t n = req->block_hashes != NULL ? req->num_block_hashes : 0;
    if (n == 0)
        return;
    for (uint32_t d = 1; d <= n && d != UINT32_MAX; d = depth_grid_next(d))
        chash_sketch_add(&c->recent, req->block_hashes[d - 1]);
    if (depth_grid_floor(n) != n)
        chash_sketch_add(&c->recent, req->block_hashes[n - 1]);
    chash_sketch_request(&c->recent);
}

/* What a walk needs to know about the table, computed once per request. */
typedef struct walk_state {
    uint8_t skip;       /* the host's eligible-row rule */
    uint32_t load_kind; /* LOAD_*: what a worker's load counts */
    uint64_t weight;    /* the request's own load outside the rows: 1 or 0 */
    uint64_t total;     /* load over workers with an eligible rank */
    uint32_t capacity;  /* eligible ranks */
    uint64_t key;       /* the request's key (request_key) */
    uint32_t start;     /* its first point on the ring */
    uint32_t depth;     /* the key's depth (1-based block), 0: not a block */
} walk_state;

static inline uint64_t row_load(const wsel_table *t, uint32_t i, const walk_state *w)
{
    return chash_row_load(t, i, w->load_kind);
}

/* Group g's load (row_load over all its ranks); returns how many
 * eligible ranks it has (its capacity). */
static uint32_t worker_state(const wsel_table *t, uint32_t g, const walk_state *w,
                             uint64_t *out_load)
{
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    uint64_t load = 0;
    uint32_t eligible = 0;
    for (uint32_t i = first; i < first + count; i++) {
        load += row_load(t, i, w);
        eligible += (t->flags[i] & w->skip) == 0;
    }
    *out_load = load;
    return eligible;
}

/* Whether group g has an eligible rank. */
static int group_eligible(const wsel_table *t, uint32_t g, uint8_t skip)
{
    uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
    for (uint32_t i = first; i < end; i++)
        if ((t->flags[i] & skip) == 0)
            return 1;
    return 0;
}

/* walk_ring's answer when the ring was built for other workers than the
 * table's: the caller rebuilds it and walks again. */
#define RING_STALE 1

/* Workers with an ineligible first row eligible_load notes before it
 * judges every worker instead. */
#define DOUBTFUL 64u

/*
 * The load over workers with an eligible rank, how many they are, and how
 * many eligible ranks they have (the cluster's capacity); or RING_STALE
 * when the ring does not hold exactly the table's workers and rank counts
 * (the check chash_ring_matches makes: the workers' fingerprint, folded
 * in the same pass over the groups). The sum over every row is one
 * vectorised loop; the loads of the (rare) workers without an eligible rank are then
 * taken back out, which is the same sum in uint64_t arithmetic, wrap-around included. A
 * worker whose first row is eligible needs no other look, so most cost one flag test and
 * one id comparison.
 */
static int32_t eligible_load(const chash_ring *ring, const wsel_table *t,
                             const walk_state *w, uint64_t *out_total,
                             uint32_t *out_workers, uint32_t *out_ranks)
{
    uint32_t groups = t->num_groups;
    if (ring->num_workers != groups)
        return RING_STALE;
    const uint8_t skip = w->skip;
    const uint8_t *flags = t->flags;
    const uint32_t *first_row = t->group_first_row;
    uint64_t total = chash_scan_total(t, w->load_kind);
    uint32_t workers = groups;
    /* No branch per worker: a worker whose first row is not eligible (the
     * only kind that may have no eligible rank) is noted in doubtful[] (slot
     * DOUBTFUL takes the writes past it), and judged after the pass; past
     * DOUBTFUL of them, every worker is. */
    uint32_t doubtful[DOUBTFUL + 1], num_doubtful = 0;
    const uint32_t *counts = t->group_row_count;
    uint64_t fp = 0;
    for (uint32_t g = 0; g < groups; g++) {
        uint32_t first = first_row[g];
        fp = chash_ring_fold(fp, g, t->worker_id[first], counts[g]);
        doubtful[num_doubtful < DOUBTFUL ? num_doubtful : DOUBTFUL] = g;
        num_doubtful += (flags[first] & skip) != 0;
    }
    if (chash_ring_finish(fp, groups) != ring->fingerprint)
        return RING_STALE;
    uint32_t judge = num_doubtful <= DOUBTFUL ? num_doubtful : groups;
    for (uint32_t k = 0; k < judge; k++) {
        uint32_t g = num_doubtful <= DOUBTFUL ? doubtful[k] : k;
        if ((flags[first_row[g]] & skip) == 0 || group_eligible(t, g, skip))
            continue;
        uint64_t load;
        worker_state(t, g, w, &load);
        total -= load;
        workers--;
    }
    uint32_t ranks = chash_scan_eligible(t->flags, t->num_rows, skip);
    *out_total = total;
    *out_workers = workers;
    *out_ranks = ranks;
    return 0;
}

/*
 * The MTZ bound of a worker with `ranks` of the cluster's `capacity`
 * eligible ranks: (1 + epsilon) times its share of the load,
 * (1 + epsilon) * (total + weight) * ranks / capacity. Loads in requests
 * (weight 1: the request is not in the table yet): the worker takes the
 * request while its load is below the bound, which is MTZ's load + 1 <=
 * ceil((1 + epsilon) * (total + 1) * ranks / capacity) exactly (load + 1 <=
 * ceil(x) if and only if load < x, for a whole load). Loads in blocks
 * (weight 0: decode_blocks already holds the request on every rank): the
 * worker's blocks with the request may reach the bound (so with epsilon 0
 * and every worker equal, every worker is inside it).
 */
static double load_bound(double epsilon, const walk_state *w, uint32_t ranks)
{
    return (1.0 + epsilon) * (double)(w->total + w->weight) * (double)ranks /
           (double)w->capacity;
}

static int fits_bound(double epsilon, const walk_state *w, uint64_t load, uint32_t ranks)
{
    if (ranks == 0)
        return 0;
    double bound = load_bound(epsilon, w, ranks);
    return w->load_kind == LOAD_REQUESTS ? (double)load < bound : (double)load <= bound;
}

/* Group g's eligible rank with the lowest default cost (the rank holding
 * most of the request's prefix, unless its load outweighs that), then the
 * fewest active requests, then the lowest row. g has an eligible rank. */
static uint32_t cheapest_rank(const wsel_table *t, uint32_t g, uint8_t skip)
{
    uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
    uint32_t best = UINT32_MAX;
    for (uint32_t i = first; i < first + count; i++) {
        if (t->flags[i] & skip)
            continue;
        if (best == UINT32_MAX || t->cost[i] < t->cost[best] ||
            (t->cost[i] == t->cost[best] &&
             t->active_requests[i] < t->active_requests[best]))
            best = i;
    }
    return best;
}

/* Fill *w for `req` on `t`. Returns 0, WSEL_ENOCANDIDATE or RING_STALE. */
static int32_t walk_begin(const chash *c, const wsel_request *req, const wsel_table *t,
                          walk_state *w)
{
    /* The host's eligible-row rule (inline in a 1.0 host): excluded rows
     * never, busy ones only when every other is excluded or busy. */
    if (wsel_call_eligible_skip(c->host, t->flags, t->num_rows, &w->skip, NULL) < 0)
        return chash_ring_matches(&c->ring, t) ? WSEL_ENOCANDIDATE : RING_STALE;
    w->load_kind = c->load_kind;
    w->weight = c->load_kind == LOAD_REQUESTS;
    uint32_t n_eligible;
    int32_t rc = eligible_load(&c->ring, t, w, &w->total, &n_eligible, &w->capacity);
    if (rc != 0)
        return rc;
    if (n_eligible == 0)
        return WSEL_ENOCANDIDATE;
    w->key = request_key(c, req, n_eligible, &w->depth);
    w->start = chash_ring_find(&c->ring, mix64(w->key));
    return 0;
}

/* The ring's k-th point from the walk's start. */
static uint32_t walk_owner(const chash_ring *ring, const walk_state *w, uint32_t k)
{
    uint32_t idx =
        w->start + k < ring->num_points ? w->start + k : w->start + k - ring->num_points;
    return ring->points[idx].owner;
}

/* The key's home: the first worker with an eligible rank on the walk
 * (every worker has points, and some worker has an eligible rank). */
static uint32_t walk_home(const chash *c, const wsel_table *t, const walk_state *w)
{
    for (uint32_t k = 0; k < c->ring.num_points; k++) {
        uint32_t g = walk_owner(&c->ring, w, k);
        uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
        for (uint32_t i = first; i < end; i++)
            if ((t->flags[i] & w->skip) == 0)
                return g;
    }
    return walk_owner(&c->ring, w, 0); /* not reached: eligible_load saw one */
}

/* Whether group g (with an eligible rank) is inside the load bound. */
static int in_bound(const chash *c, const wsel_table *t, const walk_state *w, uint32_t g)
{
    uint64_t load;
    uint32_t ranks = worker_state(t, g, w, &load);
    return fits_bound(c->epsilon, w, load, ranks);
}

/* Max overlap over group g's eligible ranks. */
static uint32_t group_overlap(const wsel_table *t, uint32_t g, uint8_t skip)
{
    uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
    uint32_t best = 0;
    for (uint32_t i = first; i < end; i++)
        if ((t->flags[i] & skip) == 0 && t->overlap_blocks[i] > best)
            best = t->overlap_blocks[i];
    return best;
}

/*
 * Whether the home lacks the request's own content (its eligible ranks
 * hold fewer than the key's depth of its blocks) while a worker inside the
 * bound holds it. The key stands for that content; a home without it is
 * just a cold worker (the content went elsewhere while the home was over
 * the bound, or was evicted there), so the request follows the content
 * (spill_row) instead of copying it back home.
 */
static int held_elsewhere(const chash *c, const wsel_table *t, const walk_state *w,
                          uint32_t home)
{
    if (w->depth == 0 || group_overlap(t, home, w->skip) >= w->depth)
        return 0;
    for (uint32_t g = 0; g < t->num_groups; g++)
        if (g != home && group_overlap(t, g, w->skip) >= w->depth && in_bound(c, t, w, g))
            return 1;
    return 0;
}

/*
 * Where a request whose home is over the bound goes: the eligible rank
 * with the lowest default cost among the workers inside the bound (the
 * rank holding most of the request's prefix at least load: a
 * conversation's later turns follow its earlier ones there while its home
 * stays full), equal costs broken by the highest rendezvous hash of (key,
 * worker), so that a burst of cold requests spreads instead of piling onto
 * one worker. When no worker is inside the bound (busy or excluded ranks
 * carrying load): the cheapest rank of the worker with the least load per
 * eligible rank, rendezvous hash again breaking ties.
 */
static uint64_t rendezvous(const wsel_table *t, const walk_state *w, uint32_t g)
{
    return mix64(w->key ^ mix64(t->worker_id[t->group_first_row[g]]));
}

/* load_bound for a worker of `ranks` eligible ranks, remembered per rank
 * count for one request (memo: 0 = not yet; a bound is > 0): a spill asks
 * it for every worker, and workers share a few rank counts. */
#define CAP_MEMO 65u
static double bound_of(const chash *c, const walk_state *w, double *memo, uint32_t ranks)
{
    if (ranks >= CAP_MEMO)
        return load_bound(c->epsilon, w, ranks);
    if (memo[ranks] == 0.0)
        memo[ranks] = load_bound(c->epsilon, w, ranks);
    return memo[ranks];
}

/* Whether a spill prefers candidate (ov, cost) to the best so far
 * (best_ov, best_cost): 1 better, 0 equal, -1 worse. */
static int spill_better(uint32_t spill_kind, uint32_t ov, double cost, uint32_t best_ov,
                        double best_cost)
{
    if (spill_kind == SPILL_OVERLAP && ov != best_ov)
        return ov > best_ov ? 1 : -1;
    return cost < best_cost ? 1 : cost == best_cost ? 0 : -1;
}

/*
 * One pass over the rows (a spill judges every worker): each worker's
 * load, eligible ranks and preferred eligible rank (the spill's order:
 * with spill=overlap the deepest overlap first; then the lowest cost, the
 * fewer requests, the lower row) in the same loop; rendezvous hashes only
 * for exact ties between workers. With `home` a worker (not UINT32_MAX) it
 * also answers held_elsewhere(home) into *out_holder, the holders'
 * overlaps read only for workers inside the bound until one holds the
 * content. The workers' loads per rank (the fallback when none is inside
 * the bound) only when that happens, in a second pass.
 */
static uint32_t spill_pass(const chash *c, const wsel_table *t, const walk_state *w,
                           uint32_t home, int *out_holder)
{
    const uint8_t *flags = t->flags;
    const double *cost = t->cost;
    const uint32_t *active = t->active_requests;
    const uint32_t *overlap = t->overlap_blocks;
    const uint8_t skip = w->skip;
    const uint32_t kind = c->spill_kind;
    double memo[CAP_MEMO];
    memset(memo, 0, sizeof(memo));
    int need = home != UINT32_MAX && w->depth > 0, holder = 0;
    uint32_t best = UINT32_MAX, best_g = 0, best_ov = 0;
    double best_cost = 0.0;
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint32_t first = t->group_first_row[g], count = t->group_row_count[g];
        uint64_t load = 0;
        uint32_t ranks = 0, pick = first, pick_ov = 0, pick_active = 0;
        double pick_cost = 0.0;
        for (uint32_t i = first; i < first + count; i++) {
            load += row_load(t, i, w);
            if (flags[i] & skip)
                continue;
            int b = ranks++ == 0
                        ? 1
                        : spill_better(kind, overlap[i], cost[i], pick_ov, pick_cost);
            if (b > 0 || (b == 0 && active[i] < pick_active)) {
                pick = i;
                pick_cost = cost[i];
                pick_ov = overlap[i];
                pick_active = active[i];
            }
        }
        if (ranks == 0)
            continue;
        double bound = bound_of(c, w, memo, ranks);
        if (w->load_kind == LOAD_REQUESTS ? !((double)load < bound)
                                          : !((double)load <= bound))
            continue;
        int b = best == UINT32_MAX
                    ? 1
                    : spill_better(kind, pick_ov, pick_cost, best_ov, best_cost);
        if (b > 0 || (b == 0 && rendezvous(t, w, g) > rendezvous(t, w, best_g))) {
            best = pick;
            best_g = g;
            best_cost = pick_cost;
            best_ov = pick_ov;
        }
        if (need && !holder && g != home && group_overlap(t, g, skip) >= w->depth)
            holder = 1;
    }
    *out_holder = holder;
    if (best != UINT32_MAX)
        return best;
    /* No worker inside the bound: the least load per eligible rank. */
    uint32_t lightest = UINT32_MAX;
    double lightest_load = 0.0;
    for (uint32_t g = 0; g < t->num_groups; g++) {
        uint64_t load;
        uint32_t ranks = worker_state(t, g, w, &load);
        if (ranks == 0)
            continue;
        double relative = (double)load / (double)ranks;
        if (lightest == UINT32_MAX || relative < lightest_load ||
            (relative == lightest_load &&
             rendezvous(t, w, g) > rendezvous(t, w, lightest))) {
            lightest = g;
            lightest_load = relative;
        }
    }
    return cheapest_rank(t, lightest, skip);
}

/* Leader rows (or holder workers) a shortcut judges before it hands over
 * to spill_pass: past that many, ties are so common that one pass over
 * every row is cheaper. */
#define SHORTCUT_LIMIT 32u
/* Rows at the deepest overlap (so far) the one-pass search judges one by
 * one before it hands over to the passes of chash_scan_leaders. */
#define JUDGE_LIMIT 128u

/*
 * spill_pass's answer without judging every worker, when possible: the
 * rows that lead the spill's order (chash_scan_leaders: the deepest
 * overlap with spill=overlap, then the least cost) are found by passes over
 * the columns alone, and only their workers' bounds are judged; rows
 * [xf, xe) (a worker known to be over the bound) are left out. Among the
 * leaders inside the bound, spill_pass's ties: fewer requests, then the
 * lower row inside a worker; the higher rendezvous hash between workers.
 * Returns 1 with *out_row set, or 0 when no leader's worker is inside the
 * bound (or the leaders are too many, or a leader's cost is not finite):
 * then only spill_pass can answer.
 */
static int spill_shortcut(const chash *c, const wsel_table *t, const walk_state *w,
                          uint32_t xf, uint32_t xe, uint32_t *out_row)
{
    const int by_overlap = c->spill_kind == SPILL_OVERLAP;
    uint32_t rows[SHORTCUT_LIMIT];
    int found = by_overlap ? chash_scan_deepest_rows(t, w->skip, xf, xe, JUDGE_LIMIT,
                                                     rows, SHORTCUT_LIMIT)
                           : -1;
    uint32_t ov = 0;
    double cost = 0.0;
    if (found < 0 && chash_scan_leaders(t, w->skip, by_overlap, xf, xe, &ov, &cost) != 0)
        return 0;
    uint32_t best = UINT32_MAX, best_g = 0, g = UINT32_MAX, seen = 0;
    int g_in = 0;
    for (uint32_t r = found >= 0 ? rows[0]
                                 : chash_scan_next_leader(t, w->skip, by_overlap, ov,
                                                          cost, 0, xf, xe);
         r != UINT32_MAX;
         r = found >= 0 ? (++seen < (uint32_t)found ? rows[seen] : UINT32_MAX)
                        : chash_scan_next_leader(t, w->skip, by_overlap, ov, cost, r + 1,
                                                 xf, xe)) {
        if (found < 0 && ++seen > SHORTCUT_LIMIT)
            return 0;
        if (g == UINT32_MAX || r >= t->group_first_row[g] + t->group_row_count[g]) {
            g = chash_group_of_row(t, r);
            g_in = in_bound(c, t, w, g);
        }
        if (!g_in)
            continue;
        if (best == UINT32_MAX ||
            (g == best_g ? t->active_requests[r] < t->active_requests[best]
                         : rendezvous(t, w, g) > rendezvous(t, w, best_g))) {
            best = r;
            best_g = g;
        }
    }
    if (best == UINT32_MAX)
        return 0;
    *out_row = best;
    return 1;
}

/*
 * held_elsewhere's answer for a home inside the bound without judging
 * every worker, when possible: the eligible rows outside the home holding
 * the request's content (overlap >= the key's depth) are found by a pass
 * over the overlaps, and only their workers' bounds are judged, up to the
 * first inside it. Returns 1 with *out_holder set, or 0 when it judged
 * SHORTCUT_LIMIT workers without an answer.
 */
static int holder_shortcut(const chash *c, const wsel_table *t, const walk_state *w,
                           uint32_t home, int *out_holder)
{
    uint32_t xf = t->group_first_row[home], xe = xf + t->group_row_count[home];
    uint32_t g = UINT32_MAX, judged = 0;
    for (uint32_t r = chash_scan_next_holder(t, w->skip, w->depth, 0, xf, xe);
         r != UINT32_MAX;
         r = chash_scan_next_holder(t, w->skip, w->depth, r + 1, xf, xe)) {
        if (g != UINT32_MAX && r < t->group_first_row[g] + t->group_row_count[g])
            continue; /* this worker was judged: over the bound */
        if (++judged > SHORTCUT_LIMIT)
            return 0;
        g = chash_group_of_row(t, r);
        if (in_bound(c, t, w, g)) {
            *out_holder = 1;
            return 1;
        }
    }
    *out_holder = 0;
    return 1;
}

static uint32_t spill_row(const chash *c, const wsel_table *t, const walk_state *w)
{
    int holder;
    return spill_pass(c, t, w, UINT32_MAX, &holder);
}

/* The walk, under the lock (shared or exclusive): the home's cheapest rank
 * while the home is inside the bound and holds the request's own content
 * or nobody inside the bound does (held_elsewhere), else spill_row.
 * Returns 0 with *out_row set, WSEL_ENOCANDIDATE, or RING_STALE when the
 * ring must be rebuilt for `t` first. */
static int32_t walk_ring(const chash *c, const wsel_request *req, const wsel_table *t,
                         uint32_t *out_row)
{
    walk_state w;
    int32_t rc = walk_begin(c, req, t, &w);
    if (rc != 0)
        return rc;
    uint32_t home = walk_home(c, t, &w);
    int home_in = in_bound(c, t, &w, home);
    if (home_in && (w.depth == 0 || group_overlap(t, home, w.skip) >= w.depth)) {
        *out_row = cheapest_rank(t, home, w.skip);
        return 0;
    }
    int holder = 0;
    if (home_in && !holder_shortcut(c, t, &w, home, &holder)) {
        /* held_elsewhere and spill_row in one pass over the rows. */
        uint32_t spill = spill_pass(c, t, &w, home, &holder);
        *out_row = holder ? spill : cheapest_rank(t, home, w.skip);
        return 0;
    }
    if (home_in && !holder) {
        *out_row = cheapest_rank(t, home, w.skip);
        return 0;
    }
    /* The spill: a home over the bound is left out of the shortcut. */
    uint32_t xf = home_in ? 0 : t->group_first_row[home];
    uint32_t xe = home_in ? 0 : xf + t->group_row_count[home];
    if (!spill_shortcut(c, t, &w, xf, xe, out_row))
        *out_row = spill_row(c, t, &w);
    return 0;
}

/* Mark group g met: its rows score `value`. */
static void set_unmet_scores(const wsel_table *t, uint32_t g, double *scores, double value)
{
    uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
    for (uint32_t i = first; i < end; i++)
        scores[i] = value;
}

/*
 * The score (ABI 1.1), under the lock, lower is better; the row select
 * takes always has the single lowest score.
 *
 * When select takes the key's home (inside the bound, not held_elsewhere),
 * the ring walk's order of preference. With W workers on the ring and a
 * worker met k-th on the walk (k = 0, 1, ...):
 *
 *   a worker within the load bound:      k
 *   a worker over it (load L, r ranks):  W + (L / r) * W + k
 *   a worker without an eligible rank:   W + (total + 1) * W + W
 *
 * and inside a worker, its rank select would take (cheapest_rank) scores
 * that value, every other rank that value + 0.5 + 0.25 * (its cost's place
 * between the worker's cheapest and dearest costs, 0 to 1).
 *
 * Otherwise (select spills, spill_row): the row spill_row takes 0; every
 * other row of a worker inside the bound 1 + its cost's place (0 to 1)
 * between the lowest and highest such cost; a row of a worker over the
 * bound 3 + L / r; a worker without an eligible rank 4 + total.
 *
 * Returns 0, WSEL_ENOCANDIDATE or RING_STALE.
 */
static int32_t score_ring(const chash *c, const wsel_request *req, const wsel_table *t,
                          double *scores)
{
    walk_state w;
    int32_t rc = walk_begin(c, req, t, &w);
    if (rc != 0)
        return rc;
    const chash_ring *ring = &c->ring;
    uint32_t home = walk_home(c, t, &w);
    if (!in_bound(c, t, &w, home) || held_elsewhere(c, t, &w, home)) {
        uint32_t pick = spill_row(c, t, &w);
        double lo = t->cost[pick], hi = lo;
        for (uint32_t g = 0; g < t->num_groups; g++) {
            uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
            uint64_t load;
            uint32_t ranks = worker_state(t, g, &w, &load);
            int fits = fits_bound(c->epsilon, &w, load, ranks);
            for (uint32_t i = first; i < end; i++) {
                int eligible = (t->flags[i] & w.skip) == 0;
                scores[i] = ranks == 0  ? 4.0 + (double)w.total
                            : !fits     ? 3.0 + (double)load / (double)ranks
                            : !eligible ? 2.0
                                        : -1.0; /* in bound: set below */
                if (fits && eligible) {
                    lo = t->cost[i] < lo ? t->cost[i] : lo;
                    hi = t->cost[i] > hi ? t->cost[i] : hi;
                }
            }
        }
        for (uint32_t i = 0; i < t->num_rows; i++)
            if (scores[i] == -1.0)
                scores[i] = 1.0 + (hi > lo ? (t->cost[i] - lo) / (hi - lo) : 0.0);
        scores[pick] = 0.0;
        return 0;
    }

    double n = (double)ring->num_workers;
    /* UNMET until the walk meets the worker (every score it writes is >=
     * 0); the ones it never meets have no eligible rank. */
    const double UNMET = -1.0;
    for (uint32_t i = 0; i < t->num_rows; i++)
        scores[i] = UNMET;
    uint32_t judged = 0;
    for (uint32_t k = 0; k < ring->num_points && judged < ring->num_workers; k++) {
        uint32_t g = walk_owner(ring, &w, k);
        if (scores[t->group_first_row[g]] != UNMET)
            continue;
        double order = (double)judged++;
        uint64_t load;
        uint32_t ranks = worker_state(t, g, &w, &load);
        if (ranks == 0) {
            set_unmet_scores(t, g, scores, n + ((double)w.total + 1.0) * n + n);
            continue;
        }
        double base = fits_bound(c->epsilon, &w, load, ranks)
                          ? order
                          : n + (double)load / (double)ranks * n + order;
        uint32_t pick = cheapest_rank(t, g, w.skip);
        uint32_t first = t->group_first_row[g], end = first + t->group_row_count[g];
        double lo = t->cost[pick], hi = lo;
        for (uint32_t i = first; i < end; i++)
            if ((t->flags[i] & w.skip) == 0 && t->cost[i] > hi)
                hi = t->cost[i];
        for (uint32_t i = first; i < end; i++) {
            double place = 0.0;
            if (hi > lo && (t->flags[i] & w.skip) == 0 && t->cost[i] > lo)
                place = (t->cost[i] - lo) / (hi - lo);
            scores[i] = i == pick ? base : base + 0.5 + 0.25 * place;
        }
    }
    for (uint32_t i = 0; i < t->num_rows; i++)
        if (scores[i] == UNMET)
            scores[i] = n + ((double)w.total + 1.0) * n + n;
    return 0;
}

/* [select thread, concurrent] The walk's order as a score (score_ring);
 * reads the sketch of recent traffic, never counts the request in it. */
static int32_t chash_score(void *instance, const wsel_request *req, const wsel_table *t,
                           double *scores)
{
    chash *c = instance;
    pthread_rwlock_rdlock(&c->lock);
    int32_t rc = score_ring(c, req, t, scores);
    pthread_rwlock_unlock(&c->lock);
    if (rc == RING_STALE) {
        pthread_rwlock_wrlock(&c->lock);
        rc = chash_ring_matches(&c->ring, t) ? 0 : chash_ring_build(&c->ring, t);
        if (rc == 0)
            rc = score_ring(c, req, t, scores);
        pthread_rwlock_unlock(&c->lock);
    }
    return rc;
}

static int32_t chash_select(void *instance, const wsel_request *req, const wsel_table *t,
                            wsel_choice *choice)
{
    chash *c = instance;
    uint32_t row;
    int32_t rc;
    pthread_rwlock_rdlock(&c->lock);
    rc = walk_ring(c, req, t, &row);
    pthread_rwlock_unlock(&c->lock);
    if (rc == RING_STALE) {
        /* The worker set changed: rebuild (rare), then walk under the same
         * exclusive hold so a concurrent rebuild cannot slip in between. */
        pthread_rwlock_wrlock(&c->lock);
        rc = chash_ring_matches(&c->ring, t) ? 0 : chash_ring_build(&c->ring, t);
        if (rc == 0)
            rc = walk_ring(c, req, t, &row);
        pthread_rwlock_unlock(&c->lock);
    }
    if (rc != 0)
        return rc;
    count_request(c, req);
    wsel_choice_answer(choice, row, WSEL_REASON_HASHED);
    return 0;
}

/* [control thread] Grow the ring to the table (the only place it
 * allocates after create), then rebuild it off the select path. */
static void chash_on_topology_changed(void *instance, const wsel_table *t)
{
    chash *c = instance;
    pthread_rwlock_wrlock(&c->lock);
    if (chash_ring_reserve(&c->ring, t->num_groups) != 0)
        c->host->log(c->host, WSEL_LOG_WARN, "chash: out of memory growing the ring");
    else if (!chash_ring_matches(&c->ring, t))
        chash_ring_build(&c->ring, t);
    pthread_rwlock_unlock(&c->lock);
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    .abi_major = WSEL_ABI_MAJOR,
    .abi_minor = WSEL_ABI_MINOR,
    .struct_size = sizeof(wsel_plugin),
    .capabilities = WSEL_CAP_CONCURRENT_SELECT,
    .name = "chash",
    .version = "3.1.0",
    .description = "consistent hashing with bounded loads: sticky keys, no worker "
                   "above (1 + epsilon) x mean",
    .params = chash_params,
    .num_params = P_COUNT,
    .param_def_size = sizeof(wsel_param_def),
    .create = chash_create,
    .destroy = chash_destroy,
    .select = chash_select,
    .on_request_finished = NULL,
    .on_topology_changed = chash_on_topology_changed,
    .score = chash_score,
};
