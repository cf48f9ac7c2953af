// SPDX-License-Identifier: Apache-2.0
/*
 * source.c -- the requests of `wsel replay` (replay.h): a trace read line
 * by line (sim's reader, so bad input is named by file and line) or one of
 * wsel sim's generated workloads, each turned into token ids, or words
 * (words.h) with the model's ids for them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "u64map.h"
#include "words.h"

struct replay_source {
    const replay_options *o;
    sim_trace_reader trace;
    int trace_open;
    sim_source *workload;
    replay_wordmap *map; /* --tokenizer: the model's ids for the words */
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
    if (o->tokenizer && (!(s->map = malloc(sizeof(*s->map))) ||
                         replay_wordmap_open(s->map, o->tokenizer,
                                             o->prompt_text == REPLAY_PROMPT_CHAT, err,
                                             err_size) != 0)) {
        if (!s->map)
            snprintf(err, err_size, "out of memory");
        free(s->map);
        free(s);
        return -1;
    }
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
        free(s->map);
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
    free(s->map);
    free(s);
}

void replay_request_free(replay_request *q)
{
    free(q->tokens);
    free(q->words);
    q->tokens = q->words = NULL;
}

uint64_t replay_source_bad_lines(const replay_source *s)
{
    return s->trace_open ? s->trace.bad_lines : 0;
}

/* The prompt's position p: block p / tb's id and its token p % tb, mixed.
 * Blocks past the ids given (a workload's partial tail) take ids unique
 * to the request. */
static uint64_t position_mix(const replay_options *o, const uint64_t *ids, uint32_t n_ids,
                             uint64_t request, uint32_t p)
{
    const uint32_t tb = o->trace_block_size;
    uint32_t b = p / tb;
    uint64_t id = b < n_ids ? ids[b] : sim_mix64(~request) + b;
    return sim_mix64(id * tb + p % tb);
}

static int build_tokens(replay_request *q, const replay_options *o, const uint64_t *ids,
                        uint32_t n_ids)
{
    q->tokens = malloc(((size_t)q->isl + 1) * sizeof(uint32_t));
    if (!q->tokens)
        return -1;
    for (uint32_t p = 0; p < q->isl; p++)
        q->tokens[p] = (uint32_t)(position_mix(o, ids, n_ids, q->index, p) % o->vocab_size);
    q->num_tokens = q->isl;
    return 0;
}

/* Words at the positions the model leaves them (words.h), at least one;
 * tokens: the model's ids of the whole prompt, or the word indexes. */
static int build_words(replay_request *q, const replay_options *o, const replay_wordmap *m,
                       const uint64_t *ids, uint32_t n_ids)
{
    uint32_t pre = m ? m->num_prefix : 0, suf = m ? m->num_suffix : 0;
    uint32_t n = q->isl > pre + suf ? q->isl - pre - suf : 1;
    q->words = malloc((size_t)n * sizeof(uint32_t));
    q->tokens = malloc(((size_t)pre + n + suf) * sizeof(uint32_t));
    if (!q->words || !q->tokens)
        return -1;
    q->num_words = n;
    for (uint32_t i = 0; i < n; i++)
        q->words[i] =
            (uint32_t)(position_mix(o, ids, n_ids, q->index, pre + i) % REPLAY_WORDS);
    if (!m) {
        memcpy(q->tokens, q->words, (size_t)n * sizeof(uint32_t));
        q->num_tokens = n;
        return 0;
    }
    memcpy(q->tokens, m->prefix, pre * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++)
        q->tokens[pre + i] = (i ? m->next : m->first)[q->words[i]];
    memcpy(q->tokens + pre + n, m->suffix, suf * sizeof(uint32_t));
    q->num_tokens = pre + n + suf;
    return 0;
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
    out->tokens = out->words = NULL;
    out->num_words = 0;
    int text = o->prompt_text == REPLAY_PROMPT_WORDS || o->prompt_text == REPLAY_PROMPT_CHAT;
    if ((text ? build_words(out, o, s->map, ids, n_ids) : build_tokens(out, o, ids, n_ids)) !=
        0) {
        replay_request_free(out);
        snprintf(err, err_size, "out of memory for request %llu",
                 (unsigned long long)out->index);
        return -1;
    }
    return 1;
}
