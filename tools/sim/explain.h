// SPDX-License-Identifier: Apache-2.0
/*
 * explain.h -- `wsel sim --explain N`: for N requests sampled
 * deterministically over the run, the candidate rows that mattered and why
 * the answer won.
 *
 * The explainer wraps the sim_policy of one sim_host_policy: every select
 * goes to the host as before; for a sampled request it copies the rows
 * that mattered (the best by the plugin's score, or by the default cost
 * when the plugin has no score function; the chosen row; the row with the
 * most cached blocks) and the host's answer (sim_host_policy.choice: the
 * plugin's reason and score), and writes a one-line "why".
 *
 * Scores: the live instance is the host's, so the explainer opens the
 * same plugin file with the same configuration a second time, in this
 * process, and calls its score function. A plugin that keeps state (not
 * WSEL_CAP_STATELESS) gets every select, finish and outcome the live one
 * gets, on the same table and a request stream prepared from the same
 * (seed, request id), so its state and scores follow the live instance's.
 *
 * Not thread-safe (the sim is single-threaded). OWNERSHIP: the caller owns
 * the sim_explain struct; sim_explain_close frees what open allocated.
 */
#ifndef WSEL_SIM_EXPLAIN_H
#define WSEL_SIM_EXPLAIN_H

#include <stdio.h>

#include "host_policy.h"

/* Most requests one run explains. */
#define SIM_EXPLAIN_MAX 10000u
/* The best rows shown for each request, besides the chosen one and the
 * most cached one. */
#define SIM_EXPLAIN_TOP  5u
#define SIM_EXPLAIN_ROWS (SIM_EXPLAIN_TOP + 2u)

/* One row of the table as it was when the request was routed. */
typedef struct sim_explain_row {
    uint32_t row;
    uint32_t dp_rank;
    uint64_t worker_id;
    uint32_t overlap_blocks;
    uint32_t place; /* 1-based, in the order described at sim_explain_record */
    uint64_t prefill_tokens;
    uint64_t decode_blocks;
    double cost;
    double score;  /* valid when the record has_scores */
    uint8_t flags; /* WSEL_ROW_* */
    uint8_t chosen;
    uint8_t most_cached;
} sim_explain_row;

/*
 * One explained request. Rows are ordered eligible first (the host's
 * rule: not excluded; busy only when every eligible row is busy), then by
 * the key (the plugin's score when has_scores, else the default cost),
 * then by row; `place` is a row's position in that order.
 */
typedef struct sim_explain_record {
    uint64_t index; /* 0-based, in routing order */
    uint64_t request_id;
    uint64_t arrival_us;
    uint32_t isl;
    uint32_t blocks;
    uint32_t num_rows;
    uint32_t eligible;
    char policy[64];  /* the live policy's name (wsel_host_policy_name) */
    uint32_t answer;  /* WSEL_ANSWER_PLUGIN or WSEL_ANSWER_FALLBACK */
    int32_t fallback; /* the WSEL_FALLBACK_* reason of a fallback, else -1 */
    uint32_t row;     /* chosen row */
    uint32_t reason;  /* wsel_choice.reason */
    uint32_t choice_flags;
    double choice_score;
    int has_scores;
    double temperature; /* effective, as the plugin would see it */
    double probability; /* of the chosen row at that temperature; NAN if not sampled */
    /* The scoring instance's own answer when it follows the live one
     * (sim_explain.mirror), else -1: a row other than `row` means its
     * state, and so its scores, parted from the live instance's. */
    int32_t mirror_row;
    uint32_t num_shown;
    sim_explain_row rows[SIM_EXPLAIN_ROWS];
    char why[320];
} sim_explain_record;

typedef struct sim_explain {
    /* The sample: routing indices in increasing order. */
    uint64_t *picks;
    uint32_t num_picks;
    uint32_t next_pick;
    uint64_t routed;
    uint64_t total; /* requests in the input */
    sim_explain_record *records;
    uint32_t num_records;
    /* The policy wrapped and its host. */
    sim_policy inner;
    sim_host_policy *hp;
    uint32_t max_rows;
    /* The scoring instance (NULL when the plugin has no score function or
     * could not be opened a second time; then keys are costs). */
    wsel_library *lib;
    const wsel_plugin *plugin;
    wsel_host *child_host;
    wsel_plugin_context *pctx;
    double *params;
    void *instance;
    int mirror;          /* 1: the instance gets every select, finish and outcome */
    int has_temperature; /* the plugin has a "temperature" parameter */
    double temperature;  /* ...configured to this */
    double *scores;      /* max_rows */
    uint32_t *order;     /* max_rows */
    char warning[256];   /* why scores are missing, when they are */
} sim_explain;

/*
 * Explain `n` requests of `total` (n = 0: none; n >= total: every one),
 * one drawn uniformly from each of n equal stretches of the run, seeded by
 * `seed`. Wraps *policy (filled by sim_host_policy_open* for `hp`, from
 * `path` and `config`): on return *policy routes through the explainer.
 * Returns 0 or a negative code with a message in err. [control thread]
 */
int32_t sim_explain_open(sim_explain *ex, uint32_t n, uint64_t total, uint64_t seed,
                         sim_host_policy *hp, sim_policy *policy, const char *path,
                         const char *config, uint32_t max_rows, char *err,
                         size_t err_size);
void sim_explain_close(sim_explain *ex);

/* explain_report.c: the records as text, or as a JSON array. */
void sim_explain_print(FILE *out, const sim_explain *ex, const char *label);
void sim_explain_json(FILE *out, const sim_explain *ex);

/* Static name of a WSEL_REASON_* code ("cheapest", ...; "plugin" from
 * WSEL_REASON_PLUGIN up, "unknown" for an unassigned one). */
const char *sim_explain_reason_name(uint32_t reason);

#endif
