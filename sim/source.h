// SPDX-License-Identifier: Apache-2.0
/*
 * source.h -- where requests come from: a Mooncake trace or a built-in
 * seeded workload, both turned into sim_request with prefix hashes at the
 * router's block size.
 *
 * Trace blocks are remapped to router blocks (see docs/sim.md): when the
 * router block divides the trace block, each trace block splits into
 * pieces whose hashes derive from that block's id and the piece index;
 * when it is a multiple, a router block takes the id of its last trace
 * block (which stands for the whole prefix). Only full router blocks get a
 * hash, as in Dynamo. Not thread-safe; one source per run. OWNERSHIP: a
 * source owns everything it hands out until its next call.
 */
#ifndef WSEL_SIM_SOURCE_H
#define WSEL_SIM_SOURCE_H

#include "sim.h"
#include "trace.h"

#define SIM_WORKLOAD_SHARED_PREFIX 0
#define SIM_WORKLOAD_CHAT          1
#define SIM_WORKLOAD_AGENT         2
#define SIM_WORKLOAD_CONVERSATION  3

typedef struct sim_workload_config {
    uint32_t kind; /* SIM_WORKLOAD_* */
    uint64_t seed;
    double rate;       /* mean arrivals per second (Poisson) */
    uint32_t requests; /* chat and agent: total requests */
    /* shared-prefix: G groups x P prompts, S-token prefix, Q-token
     * question, O output tokens. */
    uint32_t groups, prompts, prefix_tokens, question_tokens, output_tokens;
    /* agent, conversation: number of shared tool prompts and their length. */
    uint32_t tools, tool_tokens;
    /* conversation: the system prompt every chat session opens with, the
     * share of sessions that are tool agents, and the mean number of
     * requests arriving at one instant. */
    uint32_t system_tokens;
    double agent_share;
    double burst;
} sim_workload_config;

/* Defaults for `kind` (see docs/sim.md for the reasoning). */
void sim_workload_default(sim_workload_config *w, uint32_t kind);
/* "shared-prefix", "chat", "agent", "conversation" -> kind; -1 if unknown. */
int sim_workload_kind(const char *name);
const char *sim_workload_name(uint32_t kind);

typedef struct sim_source sim_source;

/* Open a trace. err says "PATH: ..." on failure. */
int32_t sim_source_open_trace(sim_source **out, const char *path,
                              uint32_t trace_block_size, uint32_t block_size,
                              int skip_bad_lines, char *err, size_t err_size);
/* A generated workload (deterministic from w->seed). */
int32_t sim_source_open_workload(sim_source **out, const sim_workload_config *w,
                                 uint32_t block_size, char *err, size_t err_size);
/* NULL is a harmless no-op. */
void sim_source_close(sim_source *s);

/* sim_source_ops.next for a sim_source context. */
int32_t sim_source_next(void *ctx, sim_request *out, char *err, size_t err_size);
extern const sim_source_ops sim_source_ops_default;

/* Lines skipped by --skip-bad-lines so far (0 for workloads). */
uint64_t sim_source_bad_lines(const sim_source *s);

/* Generated workloads, one per kind (workload.c). */
typedef struct sim_workload sim_workload;
int32_t sim_workload_open(sim_workload **out, const sim_workload_config *w,
                          uint32_t block_size, char *err, size_t err_size);
void sim_workload_close(sim_workload *g);
int32_t sim_workload_next(sim_workload *g, sim_request *out);

#endif
