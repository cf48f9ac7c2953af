// SPDX-License-Identifier: Apache-2.0
/*
 * report.c -- the table and the JSON document.
 */
#include "report.h"
#include "explain.h"
#include "json_write.h"
#include "metric_table.h"

#include <math.h>
#include <string.h>

/* The value as printed, so "best" agrees with what the reader sees. */
static double shown(const sim_metric_def *c, const sim_metrics *m)
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
    double best[SIM_NUM_METRICS];
    for (size_t c = 0; c < SIM_NUM_METRICS; c++) {
        const sim_metric_def *col = &sim_metric_table[c];
        best[c] = col->higher_is_better ? -INFINITY : INFINITY;
        for (uint32_t i = 0; col->title && i < n; i++) {
            double v = shown(col, &rows[i].result.total);
            if (col->higher_is_better ? v > best[c] : v < best[c])
                best[c] = v;
        }
    }
    fprintf(out, "%-*s", label_width, "plugin");
    for (size_t c = 0; c < SIM_NUM_METRICS; c++)
        if (sim_metric_table[c].title)
            fprintf(out, " %*s", (int)strlen(sim_metric_table[c].title) + 1,
                    sim_metric_table[c].title);
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
            for (size_t c = 0; c < SIM_NUM_METRICS; c++) {
                const sim_metric_def *col = &sim_metric_table[c];
                if (!col->title)
                    continue;
                char cell[64];
                snprintf(cell, sizeof(cell), col->fmt, col->get(m) * col->scale);
                int mark =
                    n > 1 && rows[i].result.num_phases == 1 && shown(col, m) == best[c];
                fprintf(out, " %*s%c", (int)strlen(col->title), cell, mark ? '*' : ' ');
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

static void json_member(FILE *out, const sim_metric_def *d, const sim_metrics *m,
                        int timing)
{
    double v = (d->flags & SIM_MF_TIMING) && !timing ? 0 : d->get(m);
    if (d->json_type == SIM_MJ_COUNT)
        fprintf(out, "\"%s\":%llu", d->json_name, (unsigned long long)v);
    else
        fprintf(out, "\"%s\":%.6g", d->json_name, v);
}

/* The timing rows (or the others) as members: an object opens at its
 * first row and closes after its last. */
static void json_rows(FILE *out, const sim_metrics *m, int timing, unsigned timing_rows,
                      int *first)
{
    const char *open = NULL;
    for (size_t k = 0; k < SIM_NUM_METRICS; k++) {
        const sim_metric_def *d = &sim_metric_table[k];
        if ((d->flags & SIM_MF_TIMING) != timing_rows)
            continue;
        if (open && d->json_object && strcmp(open, d->json_object) == 0) {
            fputc(',', out);
        } else {
            fputs(open ? "}" : "", out);
            fputs(*first ? "" : ",", out);
            if (d->json_object)
                fprintf(out, "\"%s\":{", d->json_object);
            open = d->json_object;
        }
        *first = 0;
        json_member(out, d, m, timing);
    }
    fputs(open ? "}" : "", out);
}

/* Every figure; the timing ones last, as 0 unless timing. */
static void json_metrics(FILE *out, const sim_metrics *m, int timing)
{
    int first = 1;
    json_rows(out, m, timing, 0, &first);
    json_rows(out, m, timing, SIM_MF_TIMING, &first);
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
            "\"busy_prefill_tokens\":%llu,\"speedup\":%.6g,\"jitter_ms\":%.6g",
            sim_dp_mode_names[c->dp_mode], (double)rc->kv_event_delay_ns / 1e6,
            rc->overlap_weight, rc->temperature, rc->affinity_blocks,
            rc->busy_decode_blocks, (unsigned long long)rc->busy_prefill_tokens,
            rc->speedup, (double)rc->jitter_ns / 1e6);
    sim_report_replicas_json(out, rc);
    fputc('}', out);
}

void sim_report_replicas_json(FILE *out, const sim_router_config *rc)
{
    if (rc->replicas <= 1)
        return;
    fprintf(out, ",\"replicas\":%u,\"replica_spread\":\"%s\",\"sync\":\"%s\"",
            rc->replicas, sim_spread_names[rc->spread], sim_sync_names[rc->sync]);
    if (rc->sync == SIM_SYNC_LAG)
        fprintf(out, ",\"sync_lag_ms\":%.6g", (double)rc->sync_lag_ns / 1e6);
    if (rc->echo_ns > 0)
        fprintf(out, ",\"sync_echo_ms\":%.6g", (double)rc->echo_ns / 1e6);
}

void sim_report_replicas_text(FILE *out, const sim_router_config *rc)
{
    if (rc->replicas <= 1)
        return;
    fprintf(out, "router replicas: %u, arrivals spread %s, ", rc->replicas,
            sim_spread_names[rc->spread]);
    if (rc->sync == SIM_SYNC_NONE)
        fprintf(out, "load views not synced\n");
    else if (rc->echo_ns == 0)
        fprintf(out, "load views synced %.6g ms late\n", (double)rc->sync_lag_ns / 1e6);
    else
        fprintf(out, "load views synced %.6g ms late, routes echoed %.6g ms\n",
                (double)rc->sync_lag_ns / 1e6, (double)rc->echo_ns / 1e6);
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
