// SPDX-License-Identifier: Apache-2.0
/*
 * explain_report.c -- the explained requests as text (after the
 * comparison table) or as the `explain` array of a --json result.
 */
#include "explain.h"
#include "json_write.h"

#include <math.h>
#include <string.h>

static void flag_text(uint8_t flags, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s", flags & WSEL_ROW_BUSY ? "busy " : "",
             flags & WSEL_ROW_EXCLUDED ? "excluded " : "",
             flags & WSEL_ROW_NO_LOAD ? "no_load " : "");
    size_t n = strlen(buf);
    if (n > 0)
        buf[n - 1] = '\0';
}

static void print_record(FILE *out, const sim_explain_record *r, uint32_t k)
{
    fprintf(out,
            "#%u request %llu (routed %llu) at %.3f s: isl %u tokens, %u blocks; "
            "%u rows, %u eligible; policy %s\n",
            k + 1, (unsigned long long)r->request_id, (unsigned long long)r->index + 1,
            (double)r->arrival_us / 1e6, r->isl, r->blocks, r->num_rows, r->eligible,
            r->policy);
    fprintf(out,
            "    place  row  worker  dp  overlap  prefill  decode        cost%s  flags\n",
            r->has_scores ? "       score" : "");
    for (uint32_t i = 0; i < r->num_shown; i++) {
        const sim_explain_row *w = &r->rows[i];
        char flags[32], score[32] = "";
        flag_text(w->flags, flags, sizeof(flags));
        if (r->has_scores)
            snprintf(score, sizeof(score), " %11.4g", w->score);
        fprintf(out, "  %c %5u %4u %7llu %3u %8u %8llu %7llu %11.4g%s%s%s\n",
                w->chosen        ? '*'
                : w->most_cached ? '+'
                                 : ' ',
                w->place, w->row, (unsigned long long)w->worker_id, w->dp_rank,
                w->overlap_blocks, (unsigned long long)w->prefill_tokens,
                (unsigned long long)w->decode_blocks, w->cost, score,
                flags[0] ? "  " : "", flags);
    }
    const sim_explain_row *c = NULL;
    for (uint32_t i = 0; i < r->num_shown; i++)
        if (r->rows[i].chosen)
            c = &r->rows[i];
    fprintf(out, "  answer: row %u (worker %llu, dp %u) by the %s, reason %s", r->row,
            c ? (unsigned long long)c->worker_id : 0ull, c ? c->dp_rank : 0u,
            r->answer == WSEL_ANSWER_PLUGIN ? "plugin" : "host",
            sim_explain_reason_name(r->reason));
    if (r->choice_flags & WSEL_CHOICE_SCORED)
        fprintf(out, ", score %.4g", r->choice_score);
    fprintf(out, "\n  why: %s\n", r->why);
    if (r->answer == WSEL_ANSWER_PLUGIN && r->mirror_row >= 0 &&
        (uint32_t)r->mirror_row != r->row)
        fprintf(out,
                "  note: the scoring instance answered row %d: its state, and the "
                "scores above, differ from the live instance's\n",
                r->mirror_row);
}

void sim_explain_print(FILE *out, const sim_explain *ex, const char *label)
{
    fprintf(out,
            "\nexplain %s: %u of %llu requests (one drawn from each of %u equal "
            "parts of the run, seeded by --seed)\n",
            label, ex->num_records, (unsigned long long)ex->total, ex->num_picks);
    fprintf(out, "  * chosen, + most cached; rows by place: eligible first, then by %s\n",
            ex->instance ? "the plugin's score (lower better)" : "the default cost");
    if (ex->warning[0])
        fprintf(out, "  (%s)\n", ex->warning);
    for (uint32_t k = 0; k < ex->num_records; k++)
        print_record(out, &ex->records[k], k);
}

static void json_double(FILE *out, const char *name, double v)
{
    if (isfinite(v))
        fprintf(out, ",\"%s\":%.6g", name, v);
    else
        fprintf(out, ",\"%s\":null", name);
}

static void json_row(FILE *out, const sim_explain_record *r, const sim_explain_row *w)
{
    fprintf(out,
            "{\"place\":%u,\"row\":%u,\"worker\":%llu,\"dp_rank\":%u,"
            "\"overlap_blocks\":%u,\"prefill_tokens\":%llu,\"decode_blocks\":%llu",
            w->place, w->row, (unsigned long long)w->worker_id, w->dp_rank,
            w->overlap_blocks, (unsigned long long)w->prefill_tokens,
            (unsigned long long)w->decode_blocks);
    json_double(out, "cost", w->cost);
    json_double(out, "score", r->has_scores ? w->score : NAN);
    fprintf(out, ",\"busy\":%s,\"excluded\":%s,\"no_load\":%s,\"chosen\":%s}",
            w->flags & WSEL_ROW_BUSY ? "true" : "false",
            w->flags & WSEL_ROW_EXCLUDED ? "true" : "false",
            w->flags & WSEL_ROW_NO_LOAD ? "true" : "false", w->chosen ? "true" : "false");
}

void sim_explain_json(FILE *out, const sim_explain *ex)
{
    fputc('[', out);
    for (uint32_t k = 0; k < ex->num_records; k++) {
        const sim_explain_record *r = &ex->records[k];
        fprintf(out,
                "%s\n{\"routed\":%llu,\"request_id\":%llu,\"arrival_us\":%llu,"
                "\"isl\":%u,\"blocks\":%u,\"rows\":%u,\"eligible\":%u,\"policy\":",
                k ? "," : "", (unsigned long long)r->index + 1,
                (unsigned long long)r->request_id, (unsigned long long)r->arrival_us,
                r->isl, r->blocks, r->num_rows, r->eligible);
        wsel_json_write_string(out, r->policy);
        fprintf(out, ",\"answer\":\"%s\",\"fallback\":",
                r->answer == WSEL_ANSWER_PLUGIN ? "plugin" : "fallback");
        if (r->fallback >= 0)
            wsel_json_write_string(out, wsel_fallback_reason_name((uint32_t)r->fallback));
        else
            fputs("null", out);
        fprintf(out, ",\"row\":%u,\"reason\":\"%s\",\"reason_code\":%u", r->row,
                sim_explain_reason_name(r->reason), r->reason);
        json_double(out, "score",
                    r->choice_flags & WSEL_CHOICE_SCORED ? r->choice_score : NAN);
        json_double(out, "temperature", r->temperature);
        json_double(out, "probability", r->probability);
        fputs(",\"why\":", out);
        wsel_json_write_string(out, r->why);
        fprintf(out, ",\"scores_follow_live\":%s",
                r->mirror_row < 0 || (uint32_t)r->mirror_row == r->row ? "true"
                                                                       : "false");
        fputs(",\"top\":[", out);
        for (uint32_t i = 0; i < r->num_shown; i++) {
            if (i)
                fputc(',', out);
            json_row(out, r, &r->rows[i]);
        }
        fputs("]}", out);
    }
    fputs("]", out);
}
