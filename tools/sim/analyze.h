// SPDX-License-Identifier: Apache-2.0
/*
 * analyze.h -- `wsel sim --analyze`: statistics of the input alone, with no
 * routing: requests, tokens, duration, unique blocks and the hit rate of
 * one infinite shared cache. Not thread-safe.
 */
#ifndef WSEL_SIM_ANALYZE_H
#define WSEL_SIM_ANALYZE_H

#include <stdint.h>

#include "options.h"

typedef struct sim_analysis {
    uint64_t requests;
    uint64_t input_tokens;
    uint64_t output_tokens;
    double duration_s;
    uint64_t blocks; /* all block ids, repeats included */
    uint64_t unique_blocks;
    uint64_t hit_blocks; /* ids seen in an earlier request */
    double infinite_cache_hit_rate;
    uint64_t bad_lines;
} sim_analysis;

/* Analyse the trace (its own hash ids, trace blocks) or the workload (its
 * router blocks) described by `o`. Returns 0 or a negative code with a
 * message in err. */
int32_t sim_analyze(const sim_options *o, sim_analysis *out, char *err, size_t err_size);

#endif
