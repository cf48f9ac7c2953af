// SPDX-License-Identifier: Apache-2.0
/*
 * report.c -- the table and the JSON document.
 */
#include "report.h"
#include "explain.h"
#include "json_write.h"

#include <math.h>
#include <string.h>

typedef struct column {
    const char *title;
    int higher_is_better;
    double (*get)(const sim_metrics *m);
    const char *fmt; /* printf format of one double */
    double scale;
} column;

#define GETTER(name, expr)                                                               \
    static double name(const sim_metrics *m)                                             \
    {                                                                                    \
        return (double)(expr);                                                           \
    }
GETTER(get_hit, m->kv_hit_rate)
GETTER(get_ttft_mean, m->ttft_ms.mean)
GETTER(get_ttft_p50, m->ttft_ms.p50)
GETTER(get_ttft_p99, m->ttft_ms.p99)
GETTER(get_e2e_p50, m->e2e_ms.p50)
GETTER(get_e2e_p99, m->e2e_ms.p99)
GETTER(get_tput, m->throughput_tok_s)
GETTER(get_flicker, m->flicker_rate)
GETTER(get_key_move, m->key_move_rate)
GETTER(get_copies, m->prefix_copies)
GETTER(get_vol, m->share_volatility)
GETTER(get_rank_imb, m->rank_load_imbalance)
GETTER(get_group_imb, m->group_load_imbalance)
GETTER(get_fallbacks, m->fallbacks)
GETTER(get_sel_p50, m->select_ns_p50)
GETTER(get_sel_p99, m->select_ns_p99)
GETTER(get_lost, m->lost_requests)

static const column columns[] = {
    {"hit%", 1, get_hit, "%.1f", 100},
    {"ttft_mean_ms", 0, get_ttft_mean, "%.0f", 1},
    {"ttft_p50_ms", 0, get_ttft_p50, "%.0f", 1},
    {"ttft_p99_ms", 0, get_ttft_p99, "%.0f", 1},
    {"e2e_p50_s", 0, get_e2e_p50, "%.2f", 1e-3},
    {"e2e_p99_s", 0, get_e2e_p99, "%.2f", 1e-3},
    {"tok/s", 1, get_tput, "%.0f", 1},
    {"flicker%", 0, get_flicker, "%.1f", 100},
    {"keymove%", 0, get_key_move, "%.1f", 100},
    {"copies", 0, get_copies, "%.2f", 1},
    {"share_vol", 0, get_vol, "%.3f", 1},
    {"rank_imb", 0, get_rank_imb, "%.2f", 1},
    {"group_imb", 0, get_group_imb, "%.2f", 1},
    {"fallbk", 0, get_fallbacks, "%.0f", 1},
    {"sel_p50_ns", 0, get_sel_p50, "%.0f", 1},
    {"sel_p99_ns", 0, get_sel_p99, "%.0f", 1},
    {"lost", 0, get_lost, "%.0f", 1},
};
#define NUM_COLUMNS (sizeof(columns) / sizeof(columns[0]))

/* The value as printed, so "best" agrees with what the reader sees. */
static double shown(const column *c, const sim_metrics *m)
{
    char buf[64];
    snprintf(buf, sizeof(buf), c->fmt, c->get(m) * c->scale);
    double v = 0;
    sscanf(buf, "%lf", &v);
    return v;
}

/* A row configured with something other than the defaults: its label gets
 * a [k] mark and the configuration a footnote, so two rows of one plugin
 * can be told apart. */
static int has_config(const sim_report_row *row)
{
    return row->config != NULL && row->config[0] != '\0' &&
           strcmp(row->config, "{}") != 0;
}

/* The label of row i's phase p, as the table's first column shows it. */
static void row_label(const sim_report_row *rows, uint32_t i, uint32_t p, char *name,
                      size_t size)
{
    if (rows[i].result.num_phases > 1)
        snprintf(name, size, " %u:%s", p, rows[i].result.phase_label[p]);
    else if (has_config(&rows[i]))
        snprintf(name, size, "%s [%u]", rows[i].plugin, i + 1);
    else
        snprintf(name, size, "%s", rows[i].plugin);
}

void sim_report_table(FILE *out, const sim_report_row *rows, uint32_t n)
{
    /* The first column is as wide as its longest label (a plugin given by
     * path), so every row's figures stay under their titles. */
    char name[512];
    int label_width = 14;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t p = 0; p < rows[i].result.num_phases; p++) {
            row_label(rows, i, p, name, sizeof(name));
            if ((int)strlen(name) > label_width)
                label_width = (int)strlen(name);
        }
    double best[NUM_COLUMNS];
    for (size_t c = 0; c < NUM_COLUMNS; c++) {
        best[c] = columns[c].higher_is_better ? -INFINITY : INFINITY;
        for (uint32_t i = 0; i < n; i++) {
            double v = shown(&columns[c], &rows[i].result.total);
            if (columns[c].higher_is_better ? v > best[c] : v < best[c])
                best[c] = v;
        }
    }
    fprintf(out, "%-*s", label_width, "plugin");
    for (size_t c = 0; c < NUM_COLUMNS; c++)
        fprintf(out, " %*s", (int)strlen(columns[c].title) + 1, columns[c].title);
    fputc('\n', out);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t p = 0; p < rows[i].result.num_phases; p++) {
            const sim_metrics *m = rows[i].result.num_phases > 1
                                       ? &rows[i].result.phase[p]
                                       : &rows[i].result.total;
            row_label(rows, i, p, name, sizeof(name));
            if (p == 0 && rows[i].result.num_phases > 1) {
                fprintf(out, "%s (phases)\n", rows[i].plugin);
            }
            fprintf(out, "%-*s", label_width, name);
            for (size_t c = 0; c < NUM_COLUMNS; c++) {
                char cell[64];
                snprintf(cell, sizeof(cell), columns[c].fmt,
                         columns[c].get(m) * columns[c].scale);
                int mark = n > 1 && rows[i].result.num_phases == 1 &&
                           shown(&columns[c], m) == best[c];
                fprintf(out, " %*s%c", (int)strlen(columns[c].title), cell,
                        mark ? '*' : ' ');
            }
            fputc('\n', out);
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (has_config(&rows[i]))
            fprintf(out, "[%u] %s %s\n", i + 1, rows[i].plugin, rows[i].config);
    fprintf(out, "* best in column. hit%% = prefix tokens cached / input tokens; "
                 "flicker%% = prefix blocks sent away from their owner rank; keymove%% = "
                 "affinity key moved worker;\n  copies = ranks per cached block; imb = "
                 "max/mean active tokens. See docs/sim.md.\n");
}

static void json_pct(FILE *out, const char *name, const sim_percentiles *p)
{
    fprintf(out, "\"%s\":{\"mean\":%.6g,\"p50\":%.6g,\"p90\":%.6g,\"p99\":%.6g}", name,
            p->mean, p->p50, p->p90, p->p99);
}

static void json_metrics(FILE *out, const sim_metrics *m, int timing)
{
    fprintf(out, "\"requests\":%llu,\"kv_hit_rate\":%.6g,",
            (unsigned long long)m->requests, m->kv_hit_rate);
    json_pct(out, "ttft_ms", &m->ttft_ms);
    fputc(',', out);
    json_pct(out, "e2e_ms", &m->e2e_ms);
    fprintf(out,
            ",\"throughput_tok_s\":%.6g,\"flicker_rate\":%.6g,\"key_move_rate\":%.6g,"
            "\"prefix_copies\":%.6g,\"share_volatility\":%.6g,"
            "\"rank_load_imbalance\":%.6g,\"group_load_imbalance\":%.6g,"
            "\"fallbacks\":%llu,\"lost_requests\":%llu,"
            "\"select_ns\":{\"p50\":%llu,\"p99\":%llu}",
            m->throughput_tok_s, m->flicker_rate, m->key_move_rate, m->prefix_copies,
            m->share_volatility, m->rank_load_imbalance, m->group_load_imbalance,
            (unsigned long long)m->fallbacks, (unsigned long long)m->lost_requests,
            (unsigned long long)(timing ? m->select_ns_p50 : 0),
            (unsigned long long)(timing ? m->select_ns_p99 : 0));
}

/* The host's own account: every fallback reason by name, and ejections. */
static void json_counters(FILE *out, const wsel_host_counters *k)
{
    fprintf(out, ",\"fallbacks_by_reason\":{");
    for (uint32_t r = 0; r < WSEL_FALLBACK_REASONS_MAX; r++) {
        const char *name = wsel_fallback_reason_name(r);
        if (strcmp(name, "unknown") == 0)
            continue;
        uint64_t n = r < WSEL_FALLBACK_REASONS
                         ? k->fallback_by_reason[r]
                         : k->fallback_by_reason_more[r - WSEL_FALLBACK_REASONS];
        fprintf(out, "%s\"%s\":%llu", r ? "," : "", name, (unsigned long long)n);
    }
    fprintf(out, "},\"ejections\":%llu", (unsigned long long)k->ejections);
    /* The plugin's answers by the reason it gave (ABI 1.1); codes past the
     * named ones count in the last slot, "plugin". */
    fprintf(out, ",\"answers_by_reason\":{");
    int first = 1;
    for (uint32_t r = 0; r < WSEL_HOST_REASON_SLOTS; r++) {
        if (k->answers_by_reason[r] == 0)
            continue;
        fprintf(out, "%s\"%s\":%llu", first ? "" : ",",
                r + 1 == WSEL_HOST_REASON_SLOTS ? "plugin" : sim_explain_reason_name(r),
                (unsigned long long)k->answers_by_reason[r]);
        first = 0;
    }
    fputc('}', out);
}

static void json_cluster(FILE *out, const sim_cluster *c, const sim_router_config *rc)
{
    fprintf(out, "\"cluster\":{\"workers\":%u,\"dp\":[", c->num_workers);
    for (uint32_t w = 0; w < c->num_workers; w++)
        fprintf(out, "%s%u", w ? "," : "", c->dp[w]);
    fprintf(out,
            "],\"kv_blocks\":%u,\"block_size\":%u,\"max_running\":%u,\"token_budget\":%u,"
            "\"cost_model\":\"%s\"",
            c->kv_blocks, c->block_size, c->max_running, c->token_budget,
            sim_cost_model_names[c->cost_model]);
    if (c->cost_model == SIM_COST_LINEAR)
        fprintf(
            out,
            ",\"step_fixed_ms\":%.6g,\"prefill_token_ms\":%.6g,\"decode_seq_ms\":%.6g",
            c->step_fixed_ms, c->prefill_token_ms, c->decode_seq_ms);
    fprintf(out,
            ",\"dp_mode\":\"%s\",\"kv_event_delay_ms\":%.6g,\"overlap_weight\":%.6g,"
            "\"temperature\":%.6g,\"affinity_blocks\":%u,\"busy_decode_blocks\":%.6g,"
            "\"busy_prefill_tokens\":%llu,\"speedup\":%.6g,\"jitter_ms\":%.6g}",
            sim_dp_mode_names[c->dp_mode],
            (double)rc->kv_event_delay_ns / 1e6, rc->overlap_weight, rc->temperature,
            rc->affinity_blocks, rc->busy_decode_blocks,
            (unsigned long long)rc->busy_prefill_tokens, rc->speedup,
            (double)rc->jitter_ns / 1e6);
}

void sim_report_json(FILE *out, const sim_report_input *in, const sim_cluster *c,
                     const sim_router_config *rc, const sim_report_row *rows, uint32_t n,
                     int timing)
{
    fprintf(out, "{\"input\":{");
    if (in->trace) {
        fprintf(out, "\"trace\":");
        wsel_json_write_string(out, in->trace);
        fprintf(out, ",\"trace_block_size\":%u,\"bad_lines\":%llu", in->trace_block_size,
                (unsigned long long)in->bad_lines);
    } else {
        fprintf(out, "\"workload\":");
        wsel_json_write_string(out, in->workload);
        fprintf(out, ",\"rate\":%.6g", in->rate);
    }
    fprintf(out, ",\"requests\":%llu,\"seed\":%llu},",
            (unsigned long long)(n ? rows[0].result.total.requests : 0),
            (unsigned long long)in->seed);
    json_cluster(out, c, rc);
    fprintf(out, ",\"results\":[");
    for (uint32_t i = 0; i < n; i++) {
        const sim_result *r = &rows[i].result;
        fprintf(out, "%s\n{\"plugin\":", i ? "," : "");
        wsel_json_write_string(out, rows[i].plugin);
        fprintf(out, ",\"config\":%s,",
                rows[i].config && *rows[i].config ? rows[i].config : "{}");
        json_metrics(out, &r->total, timing);
        if (rows[i].has_counters)
            json_counters(out, &rows[i].counters);
        if (r->num_phases > 1) {
            fprintf(out, ",\"phases\":[");
            for (uint32_t p = 0; p < r->num_phases; p++) {
                fprintf(out, "%s{\"plugin\":", p ? "," : "");
                wsel_json_write_string(out, r->phase_label[p]);
                fputc(',', out);
                json_metrics(out, &r->phase[p], timing);
                fputc('}', out);
            }
            fputc(']', out);
        }
        if (rows[i].explain) {
            fputs(",\"explain\":", out);
            sim_explain_json(out, rows[i].explain);
        }
        fputc('}', out);
    }
    fprintf(out, "\n]}\n");
}
