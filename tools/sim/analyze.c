// SPDX-License-Identifier: Apache-2.0
/*
 * analyze.c -- input statistics: a map from block id to the last request
 * that used it gives the infinite-cache hit rate in one streaming pass.
 */
#include "analyze.h"

#include <stdio.h>
#include <string.h>

#include "u64map.h"

/* Count one request's ids: a hit when the id was seen in an earlier
 * request (repeats within the request do not count). */
static int32_t count_ids(sim_u64map *seen, sim_analysis *a, const uint64_t *ids,
                         uint32_t n)
{
    uint64_t request = a->requests; /* 1-based index of this request */
    for (uint32_t i = 0; i < n; i++) {
        int inserted;
        uint64_t *last = sim_u64map_upsert(seen, ids[i], &inserted);
        if (!last)
            return WSEL_ENOMEM;
        if (!inserted && *last < request)
            a->hit_blocks++;
        if (inserted)
            a->unique_blocks++;
        *last = request;
    }
    a->blocks += n;
    return 0;
}

static int32_t analyze_trace(const sim_options *o, sim_u64map *seen, sim_analysis *a,
                             char *err, size_t err_size)
{
    sim_trace_reader r;
    int32_t rc = sim_trace_open(&r, o->trace, o->trace_block_size, o->skip_bad_lines, err,
                                err_size);
    if (rc != 0)
        return rc;
    double first = 0, last = 0;
    sim_trace_line line;
    while ((rc = sim_trace_next(&r, &line, err, err_size)) > 0) {
        if (a->requests == 0)
            first = line.timestamp_ms;
        last = line.timestamp_ms;
        a->requests++;
        a->input_tokens += line.input_length;
        a->output_tokens += line.output_length;
        rc = count_ids(seen, a, line.hash_ids, line.num_hash_ids);
        if (rc != 0) {
            snprintf(err, err_size, "%s: out of memory", o->trace);
            break;
        }
    }
    a->duration_s = (last - first) / 1e3;
    a->bad_lines = r.bad_lines;
    sim_trace_close(&r);
    return rc < 0 ? rc : 0;
}

static int32_t analyze_workload(const sim_options *o, sim_u64map *seen, sim_analysis *a,
                                char *err, size_t err_size)
{
    sim_workload *g;
    int32_t rc =
        sim_workload_open(&g, &o->workload, o->cluster.block_size, err, err_size);
    if (rc != 0)
        return rc;
    sim_request req;
    int64_t first = 0, last = 0;
    while ((rc = sim_workload_next(g, &req)) > 0) {
        if (a->requests == 0)
            first = req.arrival_ns;
        last = req.arrival_ns;
        a->requests++;
        a->input_tokens += req.isl;
        a->output_tokens += req.osl;
        rc = count_ids(seen, a, req.blocks, req.num_blocks);
        if (rc != 0)
            break;
    }
    if (rc < 0)
        snprintf(err, err_size, "workload: out of memory");
    a->duration_s = (double)(last - first) / 1e9;
    sim_workload_close(g);
    return rc < 0 ? rc : 0;
}

int32_t sim_analyze(const sim_options *o, sim_analysis *out, char *err, size_t err_size)
{
    sim_analysis a;
    memset(&a, 0, sizeof(a));
    sim_u64map seen;
    if (sim_u64map_init(&seen, 1 << 16, 1) != 0) {
        snprintf(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    int32_t rc = o->trace ? analyze_trace(o, &seen, &a, err, err_size)
                          : analyze_workload(o, &seen, &a, err, err_size);
    sim_u64map_free(&seen);
    if (rc != 0)
        return rc;
    a.infinite_cache_hit_rate = a.blocks ? (double)a.hit_blocks / (double)a.blocks : 0;
    *out = a;
    return 0;
}
