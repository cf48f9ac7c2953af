// SPDX-License-Identifier: Apache-2.0
/*
 * source.c -- the requests of `wsel replay` (replay.h): a trace read line
 * by line (sim's reader, so bad input is named by file and line) or one of
 * wsel sim's generated workloads, each turned into token ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "u64map.h"

struct replay_source {
    const replay_options *o;
    sim_trace_reader trace;
    int trace_open;
    sim_source *workload;
    uint64_t count;
    double first_ms;
};

int replay_source_open(replay_source **out, const replay_options *o, char *err,
                       size_t err_size)
{
    replay_source *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, err_size, "out of memory");
        return -1;
    }
    s->o = o;
    int32_t rc;
    if (o->use_workload) {
        rc = sim_source_open_workload(&s->workload, &o->workload, o->trace_block_size,
                                      err, err_size);
    } else {
        rc = sim_trace_open(&s->trace, o->trace, o->trace_block_size, o->skip_bad_lines,
                            err, err_size);
        s->trace_open = rc == 0;
    }
    if (rc != 0) {
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void replay_source_close(replay_source *s)
{
    if (!s)
        return;
    if (s->trace_open)
        sim_trace_close(&s->trace);
    sim_source_close(s->workload);
    free(s);
}

uint64_t replay_source_bad_lines(const replay_source *s)
{
    return s->trace_open ? s->trace.bad_lines : 0;
}

/* Tokens of the prompt: block b's token t from the block's id. Blocks
 * past the ids given (a workload's partial tail) take ids unique to the
 * request. */
static uint32_t *build_tokens(const replay_options *o, const uint64_t *ids,
                              uint32_t n_ids, uint64_t request, uint32_t isl)
{
    uint32_t *tok = malloc(((size_t)isl + 1) * sizeof(uint32_t));
    if (!tok)
        return NULL;
    const uint32_t tb = o->trace_block_size;
    for (uint32_t p = 0; p < isl; p++) {
        uint32_t b = p / tb;
        uint64_t id = b < n_ids ? ids[b] : sim_mix64(~request) + b;
        tok[p] = (uint32_t)(sim_mix64(id * tb + p % tb) % o->vocab_size);
    }
    return tok;
}

int replay_source_next(replay_source *s, replay_request *out, char *err, size_t err_size)
{
    const replay_options *o = s->o;
    if (o->max_requests && s->count >= o->max_requests)
        return 0;
    double ms;
    uint32_t isl, osl, n_ids;
    const uint64_t *ids;
    if (s->workload) {
        sim_request req;
        int32_t rc = sim_source_next(s->workload, &req, err, err_size);
        if (rc <= 0)
            return rc;
        ms = (double)req.arrival_ns / 1e6;
        isl = req.isl;
        osl = req.osl;
        ids = req.blocks;
        n_ids = req.num_blocks;
    } else {
        sim_trace_line line;
        int32_t rc = sim_trace_next(&s->trace, &line, err, err_size);
        if (rc <= 0)
            return rc;
        if (line.input_length > UINT32_MAX || line.output_length > UINT32_MAX) {
            snprintf(err, err_size, "%s:%llu: a length does not fit 32 bits", o->trace,
                     (unsigned long long)s->trace.line_no);
            return -1;
        }
        ms = line.timestamp_ms;
        isl = (uint32_t)line.input_length;
        osl = (uint32_t)line.output_length;
        ids = line.hash_ids;
        n_ids = line.num_hash_ids;
    }
    if (s->count == 0)
        s->first_ms = ms;
    out->index = s->count++;
    out->arrival_s = (ms - s->first_ms) / 1e3;
    out->isl = isl;
    out->osl = osl ? osl : 1;
    out->tokens = build_tokens(o, ids, n_ids, out->index, isl);
    if (!out->tokens) {
        snprintf(err, err_size, "out of memory for request %llu",
                 (unsigned long long)out->index);
        return -1;
    }
    return 1;
}
