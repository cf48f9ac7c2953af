// SPDX-License-Identifier: Apache-2.0
/*
 * harness.c -- see harness.h.
 */
#include "harness.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wsel_host.h"

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

harness_table *harness_table_new(uint32_t num_workers, const uint32_t *dp_sizes)
{
    uint32_t rows = 0;
    for (uint32_t w = 0; w < num_workers; w++)
        rows += dp_sizes ? dp_sizes[w] : 1;
    assert_true(rows > 0);

    harness_table *t = xcalloc(1, sizeof(*t));
    t->worker_id = xcalloc(rows, sizeof(*t->worker_id));
    t->dp_rank = xcalloc(rows, sizeof(*t->dp_rank));
    t->overlap_blocks = xcalloc(rows, sizeof(*t->overlap_blocks));
    t->prefill_tokens = xcalloc(rows, sizeof(*t->prefill_tokens));
    t->decode_blocks = xcalloc(rows, sizeof(*t->decode_blocks));
    t->cost = xcalloc(rows, sizeof(*t->cost));
    t->kv_capacity_blocks = xcalloc(rows, sizeof(*t->kv_capacity_blocks));
    t->active_requests = xcalloc(rows, sizeof(*t->active_requests));
    t->flags = xcalloc(rows, sizeof(*t->flags));
    t->group_first_row = xcalloc(num_workers, sizeof(*t->group_first_row));
    t->group_row_count = xcalloc(num_workers, sizeof(*t->group_row_count));

    uint32_t row = 0;
    for (uint32_t w = 0; w < num_workers; w++) {
        uint32_t dp = dp_sizes ? dp_sizes[w] : 1;
        t->group_first_row[w] = row;
        t->group_row_count[w] = dp;
        for (uint32_t r = 0; r < dp; r++, row++) {
            t->worker_id[row] = w;
            t->dp_rank[row] = r;
        }
    }

    wsel_table *v = &t->table;
    v->struct_size = sizeof(*v);
    v->num_rows = rows;
    v->num_groups = num_workers;
    v->topology_epoch = 1;
    v->worker_id = t->worker_id;
    v->dp_rank = t->dp_rank;
    v->overlap_blocks = t->overlap_blocks;
    v->prefill_tokens = t->prefill_tokens;
    v->decode_blocks = t->decode_blocks;
    v->cost = t->cost;
    v->kv_capacity_blocks = t->kv_capacity_blocks;
    v->active_requests = t->active_requests;
    v->flags = t->flags;
    v->group_first_row = t->group_first_row;
    v->group_row_count = t->group_row_count;
    return t;
}

harness_table *harness_table_uniform(uint32_t num_workers, uint32_t dp)
{
    uint32_t *sizes = xcalloc(num_workers, sizeof(*sizes));
    for (uint32_t w = 0; w < num_workers; w++)
        sizes[w] = dp;
    harness_table *t = harness_table_new(num_workers, sizes);
    free(sizes);
    return t;
}

void harness_table_free(harness_table *t)
{
    if (t == NULL)
        return;
    free(t->worker_id);
    free(t->dp_rank);
    free(t->overlap_blocks);
    free(t->prefill_tokens);
    free(t->decode_blocks);
    free(t->cost);
    free(t->kv_capacity_blocks);
    free(t->active_requests);
    free(t->flags);
    free(t->group_first_row);
    free(t->group_row_count);
    free(t);
}

void harness_table_default_costs(harness_table *t, double overlap_weight,
                                 uint32_t block_size)
{
    for (uint32_t i = 0; i < t->table.num_rows; i++)
        t->cost[i] = overlap_weight * (double)t->prefill_tokens[i] / (double)block_size +
                     (double)t->decode_blocks[i];
}

static void harness_log(const wsel_host_api *host, int32_t level, const char *msg)
{
    (void)host;
    fprintf(stderr, "[plugin log %d] %s\n", (int)level, msg);
}

static wsel_host_api harness_api;

static void init_harness_api(void)
{
    wsel_host_api_init(&harness_api, NULL, harness_log);
}

const wsel_host_api *harness_host_api(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_harness_api);
    return &harness_api;
}

void harness_request(wsel_request *req, wsel_rng *rng, uint64_t seed, uint64_t request_id,
                     uint64_t affinity_key, const uint64_t *hashes, uint32_t num_hashes)
{
    memset(req, 0, sizeof(*req));
    wsel_rng_seed(rng, seed ^ (request_id * 0x9e3779b97f4a7c15ull));
    req->struct_size = sizeof(*req);
    req->request_id = request_id;
    req->affinity_key = affinity_key;
    req->isl_tokens = 16u * num_hashes;
    req->block_size = 16;
    req->num_block_hashes = num_hashes;
    req->block_hashes = num_hashes ? hashes : NULL;
    req->overlap_score_weight = 1.0;
    req->temperature = 0.0;
    req->uniform = wsel_rng_uniform(rng);
    req->rng = rng;
}

static void harness_quiet(void *user, int32_t level, const char *msg)
{
    (void)user, (void)level, (void)msg;
}

void harness_expect_override_zero_is_cheapest(const char *name, const char *config)
{
    enum { ROWS = 8, CHEAPEST = 5, REQUESTS = 200 };
    static const uint64_t decode[ROWS] = {80, 30, 70, 60, 50, 10, 40, 20};
    harness_table *t = harness_table_uniform(ROWS, 1);
    for (uint32_t i = 0; i < ROWS; i++) {
        t->decode_blocks[i] = decode[i];
        t->kv_capacity_blocks[i] = 1000;
    }
    harness_table_default_costs(t, 1.0, 16);

    wsel_host_options o;
    wsel_host_options_default(&o);
    o.log = harness_quiet;
    o.max_consecutive_failures = WSEL_HOST_NEVER_EJECT;
    wsel_host *host = NULL;
    assert_int_equal(wsel_host_create(&o, &host), 0);
    char path[1024], err[512] = "";
    snprintf(path, sizeof(path), "%s/%s.so", HARNESS_PLUGIN_DIR, name);
    int32_t rc = wsel_host_switch(host, path, config, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s: %s", path, err);

    for (uint64_t id = 1; id <= REQUESTS; id++) {
        wsel_request req;
        wsel_rng rng;
        harness_request(&req, &rng, 5, id, 0, NULL, 0);
        req.overrides = WSEL_OVERRIDE_TEMPERATURE;
        wsel_choice choice;
        memset(&choice, 0, sizeof(choice));
        choice.struct_size = sizeof(choice);
        assert_int_equal(wsel_host_select(host, &req, &t->table, &choice), 0);
        assert_int_equal(choice.row, CHEAPEST);
    }
    wsel_host_counters k;
    wsel_host_read_counters(host, &k, sizeof(k));
    assert_int_equal(k.plugin_answers, REQUESTS);
    wsel_host_destroy(host);
    harness_table_free(t);
}

void harness_params(double *values, const char *const *names, const double *overrides,
                    uint32_t num_overrides)
{
    const wsel_plugin *p = &wsel_plugin_entry;
    for (uint32_t i = 0; i < p->num_params; i++) {
        const wsel_param_def *d = (const wsel_param_def *)((const char *)p->params +
                                                           (size_t)i * p->param_def_size);
        values[i] = d->default_value;
    }
    for (uint32_t k = 0; k < num_overrides; k++) {
        int found = 0;
        for (uint32_t i = 0; i < p->num_params; i++) {
            const wsel_param_def *d =
                (const wsel_param_def *)((const char *)p->params +
                                         (size_t)i * p->param_def_size);
            if (strcmp(d->name, names[k]) == 0) {
                values[i] = overrides[k];
                found = 1;
            }
        }
        if (!found)
            fail_msg("unknown parameter '%s' for plugin %s", names[k], p->name);
    }
}

void *harness_create(const char *const *names, const double *overrides,
                     uint32_t num_overrides)
{
    const wsel_plugin *p = &wsel_plugin_entry;
    double values[64];
    assert_true(p->num_params <= 64);
    harness_params(values, names, overrides, num_overrides);
    void *instance = NULL;
    int32_t rc = p->create(harness_host_api(), values, p->num_params, &instance);
    if (rc != 0)
        fail_msg("%s: create failed: %d", p->name, (int)rc);
    assert_non_null(instance);
    return instance;
}

uint32_t harness_select(void *instance, const wsel_request *req, const harness_table *t)
{
    wsel_choice choice;
    memset(&choice, 0, sizeof(choice));
    choice.struct_size = sizeof(choice);
    int32_t rc = wsel_plugin_entry.select(instance, req, &t->table, &choice);
    if (rc != 0)
        fail_msg("%s: select failed: %d", wsel_plugin_entry.name, (int)rc);
    assert_true(choice.row < t->table.num_rows);
    assert_false(t->flags[choice.row] & WSEL_ROW_EXCLUDED);
    return choice.row;
}

uint32_t harness_route_overlap_active(void *instance, const uint32_t *overlap,
                                      const uint32_t *active, uint32_t n, uint64_t seed,
                                      uint64_t request_id)
{
    static const uint64_t hashes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    harness_table *t = harness_table_new(n, NULL);
    for (uint32_t i = 0; i < n; i++) {
        t->overlap_blocks[i] = overlap[i];
        t->active_requests[i] = active[i];
    }
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, seed, request_id, 0, hashes,
                    (uint32_t)(sizeof(hashes) / sizeof(hashes[0])));
    uint32_t row = harness_select(instance, &req, t);
    harness_table_free(t);
    return row;
}

void harness_expect_refusal(void *instance, const wsel_request *req,
                            const harness_table *t, int32_t expected_rc)
{
    const uint32_t sentinel = 77;
    wsel_choice choice;
    memset(&choice, 0, sizeof(choice));
    choice.struct_size = sizeof(choice);
    choice.row = sentinel;
    assert_int_equal(wsel_plugin_entry.select(instance, req, &t->table, &choice),
                     expected_rc);
    assert_int_equal(choice.row, sentinel);
}

void harness_expect_all_excluded_refused(uint32_t num_rows)
{
    harness_table *t = harness_table_new(num_rows, NULL);
    for (uint32_t i = 0; i < num_rows; i++)
        t->flags[i] = (i % 2) ? WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY : WSEL_ROW_EXCLUDED;
    void *instance = harness_create(NULL, NULL, 0);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 1, 1, 0, NULL, 0);
    harness_expect_refusal(instance, &req, t, WSEL_ENOCANDIDATE);
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

/* A wrong host: whatever the flags, "some row is idle" (skip excluded and
 * busy rows). */
static int32_t wrong_eligible_skip(const uint8_t *flags, uint32_t n, uint8_t *out_skip,
                                   uint32_t *out_count)
{
    (void)flags;
    *out_skip = WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
    if (out_count)
        *out_count = n;
    return WSEL_OK;
}

void harness_expect_wrong_host_refused(uint32_t num_rows, int score_too)
{
    wsel_host_api api = *harness_host_api();
    api.eligible_skip = wrong_eligible_skip;
    harness_table *t = harness_table_new(num_rows, NULL);
    for (uint32_t i = 0; i < num_rows; i++)
        t->flags[i] = WSEL_ROW_BUSY;
    double values[64];
    assert_true(wsel_plugin_entry.num_params <= 64);
    harness_params(values, NULL, NULL, 0);
    void *instance = NULL;
    assert_int_equal(
        wsel_plugin_entry.create(&api, values, wsel_plugin_entry.num_params, &instance),
        0);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 1, 1, 0, NULL, 0);
    harness_expect_refusal(instance, &req, t, WSEL_ENOCANDIDATE);
    if (score_too) {
        double scores[64];
        assert_true(num_rows <= 64);
        assert_int_equal(wsel_plugin_entry.score(instance, &req, &t->table, scores),
                         WSEL_ENOCANDIDATE);
    }
    wsel_plugin_entry.destroy(instance);
    harness_table_free(t);
}

void harness_assert_binomial(uint32_t count, uint32_t n, double p)
{
    double mean = n * p, sd = sqrt(n * p * (1 - p));
    if (fabs(count - mean) > 5 * sd)
        fail_msg("count %u, expected %.1f +- %.1f (5 sd)", count, mean, 5 * sd);
}
