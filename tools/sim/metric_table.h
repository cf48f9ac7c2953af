// SPDX-License-Identifier: Apache-2.0
/*
 * metric_table.h -- every figure of sim_metrics that a report prints, in
 * one X-macro table: wsel sim's table columns and JSON members, wsel
 * eval's columns, JSON keys and --metrics names (and wsel replay's, which
 * prints wsel sim's report). Read-only: safe from any thread.
 */
#ifndef WSEL_SIM_METRIC_TABLE_H
#define WSEL_SIM_METRIC_TABLE_H

#include <stdint.h>

#include "sim.h"

/* How a figure appears in wsel sim's JSON. */
#define SIM_MJ_REAL  0 /* %.6g */
#define SIM_MJ_COUNT 1 /* an integer */

/* Flags. */
#define SIM_MF_EVAL   1u /* a wsel eval column, JSON key and --metrics name */
#define SIM_MF_TIMING 2u /* wall time: 0 under --no-timing, last in the JSON */

/*
 * X(ID, key, title, value, scale, fmt, higher_is_better, json_object,
 *   json_name, json_type, flags), in the table's column order:
 *   key      wsel eval's name for it
 *   title    wsel sim's and eval's column heading; NULL: JSON only
 *   value    an expression of `m`, a const sim_metrics *
 *   scale    the column shows value * scale, printf'd with fmt
 *   json_object, json_name: in wsel sim's JSON, the member json_name of
 *            the object json_object (NULL: at the top of the metrics);
 *            members of one object are consecutive rows
 */
#define SIM_METRIC_TABLE(X)                                                              \
    X(REQUESTS, "requests", NULL, m->requests, 1, "%.0f", 0, NULL, "requests",           \
      SIM_MJ_COUNT, 0)                                                                   \
    X(KV_HIT_RATE, "kv_hit_rate", "hit%", m->kv_hit_rate, 100, "%.1f", 1, NULL,          \
      "kv_hit_rate", SIM_MJ_REAL, SIM_MF_EVAL)                                           \
    X(TTFT_MEAN, "ttft_mean_ms", "ttft_mean_ms", m->ttft_ms.mean, 1, "%.0f", 0,          \
      "ttft_ms", "mean", SIM_MJ_REAL, SIM_MF_EVAL)                                       \
    X(TTFT_P50, "ttft_p50_ms", "ttft_p50_ms", m->ttft_ms.p50, 1, "%.0f", 0, "ttft_ms",   \
      "p50", SIM_MJ_REAL, SIM_MF_EVAL)                                                   \
    X(TTFT_P90, "ttft_p90_ms", NULL, m->ttft_ms.p90, 1, "%.0f", 0, "ttft_ms", "p90",     \
      SIM_MJ_REAL, 0)                                                                    \
    X(TTFT_P99, "ttft_p99_ms", "ttft_p99_ms", m->ttft_ms.p99, 1, "%.0f", 0, "ttft_ms",   \
      "p99", SIM_MJ_REAL, SIM_MF_EVAL)                                                   \
    X(E2E_MEAN, "e2e_mean_ms", NULL, m->e2e_ms.mean, 1e-3, "%.2f", 0, "e2e_ms", "mean",  \
      SIM_MJ_REAL, 0)                                                                    \
    X(E2E_P50, "e2e_p50_ms", "e2e_p50_s", m->e2e_ms.p50, 1e-3, "%.2f", 0, "e2e_ms",      \
      "p50", SIM_MJ_REAL, SIM_MF_EVAL)                                                   \
    X(E2E_P90, "e2e_p90_ms", NULL, m->e2e_ms.p90, 1e-3, "%.2f", 0, "e2e_ms", "p90",      \
      SIM_MJ_REAL, 0)                                                                    \
    X(E2E_P99, "e2e_p99_ms", "e2e_p99_s", m->e2e_ms.p99, 1e-3, "%.2f", 0, "e2e_ms",      \
      "p99", SIM_MJ_REAL, SIM_MF_EVAL)                                                   \
    X(THROUGHPUT, "throughput_tok_s", "tok/s", m->throughput_tok_s, 1, "%.0f", 1, NULL,  \
      "throughput_tok_s", SIM_MJ_REAL, SIM_MF_EVAL)                                      \
    X(FLICKER, "flicker_rate", "flicker%", m->flicker_rate, 100, "%.1f", 0, NULL,        \
      "flicker_rate", SIM_MJ_REAL, SIM_MF_EVAL)                                          \
    X(KEY_MOVE, "key_move_rate", "keymove%", m->key_move_rate, 100, "%.1f", 0, NULL,     \
      "key_move_rate", SIM_MJ_REAL, SIM_MF_EVAL)                                         \
    X(PREFIX_COPIES, "prefix_copies", "copies", m->prefix_copies, 1, "%.2f", 0, NULL,    \
      "prefix_copies", SIM_MJ_REAL, SIM_MF_EVAL)                                         \
    X(SHARE_VOLATILITY, "share_volatility", "share_vol", m->share_volatility, 1, "%.3f", \
      0, NULL, "share_volatility", SIM_MJ_REAL, SIM_MF_EVAL)                             \
    X(RANK_IMBALANCE, "rank_load_imbalance", "rank_imb", m->rank_load_imbalance, 1,      \
      "%.2f", 0, NULL, "rank_load_imbalance", SIM_MJ_REAL, SIM_MF_EVAL)                  \
    X(GROUP_IMBALANCE, "group_load_imbalance", "group_imb", m->group_load_imbalance, 1,  \
      "%.2f", 0, NULL, "group_load_imbalance", SIM_MJ_REAL, SIM_MF_EVAL)                 \
    X(HERDING, "herding_index", "herd", m->herding_index, 1, "%.2f", 0, NULL,            \
      "herding_index", SIM_MJ_REAL, SIM_MF_EVAL)                                         \
    X(FALLBACKS, "fallbacks", "fallbk", m->fallbacks, 1, "%.0f", 0, NULL, "fallbacks",   \
      SIM_MJ_COUNT, SIM_MF_EVAL)                                                         \
    X(SELECT_P50, "select_ns_p50", "sel_p50_ns", m->select_ns_p50, 1, "%.0f", 0,         \
      "select_ns", "p50", SIM_MJ_COUNT, SIM_MF_TIMING)                                   \
    X(SELECT_P99, "select_ns_p99", "sel_p99_ns", m->select_ns_p99, 1, "%.0f", 0,         \
      "select_ns", "p99", SIM_MJ_COUNT, SIM_MF_TIMING)                                   \
    X(LOST, "lost_requests", "lost", m->lost_requests, 1, "%.0f", 0, NULL,               \
      "lost_requests", SIM_MJ_COUNT, 0)

/* SIM_METRIC_REQUESTS, ...: a row's index in sim_metric_table. */
enum {
#define SIM_METRIC_ENUM(id, ...) SIM_METRIC_##id,
    SIM_METRIC_TABLE(SIM_METRIC_ENUM)
#undef SIM_METRIC_ENUM
        SIM_NUM_METRICS
};

typedef struct sim_metric_def {
    const char *key;
    const char *title; /* NULL: not a column */
    double (*get)(const sim_metrics *m);
    double scale;
    const char *fmt;
    int higher_is_better;
    const char *json_object; /* NULL: a top-level member */
    const char *json_name;
    int json_type;  /* SIM_MJ_* */
    unsigned flags; /* SIM_MF_* */
} sim_metric_def;

extern const sim_metric_def sim_metric_table[SIM_NUM_METRICS];

#endif
