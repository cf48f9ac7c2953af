// SPDX-License-Identifier: Apache-2.0
/*
 * source.c -- the trace source with its block remapping, and dispatch to
 * the generated workloads.
 */
#include "source.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "u64map.h"

struct sim_source {
    int is_trace;
    sim_trace_reader reader;
    sim_workload *workload;
    uint32_t trace_block_size;
    uint32_t block_size;
    uint64_t next_id;
    uint64_t *blocks;
    uint32_t block_capacity;
};

const sim_source_ops sim_source_ops_default = {sim_source_next};

int32_t sim_source_open_trace(sim_source **out, const char *path,
                              uint32_t trace_block_size, uint32_t block_size,
                              int skip_bad_lines, char *err, size_t err_size)
{
    if (trace_block_size % block_size != 0 && block_size % trace_block_size != 0) {
        snprintf(err, err_size,
                 "--block-size %u must divide or be a multiple of --trace-block-size %u",
                 block_size, trace_block_size);
        return WSEL_EINVAL;
    }
    sim_source *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    int32_t rc =
        sim_trace_open(&s->reader, path, trace_block_size, skip_bad_lines, err, err_size);
    if (rc != 0) {
        free(s);
        return rc;
    }
    s->is_trace = 1;
    s->trace_block_size = trace_block_size;
    s->block_size = block_size;
    *out = s;
    return 0;
}

int32_t sim_source_open_workload(sim_source **out, const sim_workload_config *w,
                                 uint32_t block_size, char *err, size_t err_size)
{
    sim_source *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    int32_t rc = sim_workload_open(&s->workload, w, block_size, err, err_size);
    if (rc != 0) {
        free(s);
        return rc;
    }
    s->block_size = block_size;
    *out = s;
    return 0;
}

void sim_source_close(sim_source *s)
{
    if (!s)
        return;
    if (s->is_trace)
        sim_trace_close(&s->reader);
    sim_workload_close(s->workload);
    free(s->blocks);
    free(s);
}

uint64_t sim_source_bad_lines(const sim_source *s)
{
    return s->is_trace ? s->reader.bad_lines : 0;
}

/* Router block k's hash from the trace ids (see the header comment). */
static uint64_t remap_block(const sim_source *s, const uint64_t *ids, uint32_t k)
{
    uint32_t tb = s->trace_block_size, b = s->block_size;
    if (tb == b)
        return ids[k];
    if (tb % b == 0) {
        uint32_t m = tb / b;
        return sim_mix64(sim_mix64(ids[k / m]) + k % m);
    }
    uint32_t m = b / tb;
    return sim_mix64(ids[(uint64_t)k * m + m - 1]);
}

static int32_t next_from_trace(sim_source *s, sim_request *out, char *err,
                               size_t err_size)
{
    sim_trace_line line;
    int32_t rc = sim_trace_next(&s->reader, &line, err, err_size);
    if (rc <= 0)
        return rc;
    uint32_t n = (uint32_t)(line.input_length / s->block_size);
    if (n > s->block_capacity) {
        uint64_t *grown = realloc(s->blocks, (size_t)n * sizeof(*grown));
        if (!grown) {
            snprintf(err, err_size, "%s:%llu: out of memory for %u blocks",
                     s->reader.path, (unsigned long long)s->reader.line_no, n);
            return WSEL_ENOMEM;
        }
        s->blocks = grown;
        s->block_capacity = n;
    }
    for (uint32_t k = 0; k < n; k++)
        s->blocks[k] = remap_block(s, line.hash_ids, k);
    out->id = s->next_id++;
    out->arrival_ns = (int64_t)llround(line.timestamp_ms * 1e6);
    out->isl = (uint32_t)line.input_length;
    out->osl = (uint32_t)line.output_length;
    out->num_blocks = n;
    out->blocks = s->blocks;
    return 1;
}

int32_t sim_source_next(void *ctx, sim_request *out, char *err, size_t err_size)
{
    sim_source *s = ctx;
    if (s->is_trace)
        return next_from_trace(s, out, err, err_size);
    int32_t rc = sim_workload_next(s->workload, out);
    if (rc < 0)
        snprintf(err, err_size, "workload: out of memory for a request's blocks");
    return rc;
}
