// SPDX-License-Identifier: Apache-2.0
/*
 * cmd_replay.c -- `wsel replay`: options, the run, and the report (wsel
 * sim's table and JSON, through tools/sim/report.c), with the routing
 * when --plugin routes (route.h).
 */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "commands.h"
#include "metrics.h"
#include "plot.h"
#include "replay.h"
#include "report.h"
#include "route.h"

#define MAX_STATUS 16

typedef struct tally {
    const replay_options *o;
    sim_acc acc;
    FILE *out;
    sim_plot *plot;
    uint64_t done, ok, errors;
    long status[MAX_STATUS];
    uint64_t status_count[MAX_STATUS];
    double itl_sum;
    uint64_t itl_n;
    int progress;
    uint64_t retries, resent; /* --failover */
    replay_herd herd;
    int herd_failed;
} tally;

static void count_status(tally *t, long status)
{
    for (int i = 0; i < MAX_STATUS; i++) {
        if (t->status_count[i] && t->status[i] != status)
            continue;
        t->status[i] = status;
        t->status_count[i]++;
        return;
    }
}

static void on_result(void *ctx, const replay_result *r)
{
    tally *t = ctx;
    t->done++;
    t->retries += r->retries;
    t->resent += r->resent;
    int ok = r->status == 200 && !r->protocol_error && r->usage;
    if (ok && replay_herd_add(&t->herd, r->start_s, r->served_by) != 0)
        t->herd_failed = 1;
    if (ok) {
        t->ok++;
        int64_t start_ns = (int64_t)(r->start_s * 1e9);
        sim_acc_route(&t->acc, start_ns, r->url, r->prompt_tokens, 0);
        sim_acc_admitted(&t->acc, r->cached_tokens);
        sim_acc_first_token(&t->acc, r->ttft_ms);
        sim_acc_finished(&t->acc, start_ns + (int64_t)(r->e2e_ms * 1e6), r->e2e_ms,
                         r->completion_tokens);
        if (r->tokens > 1) {
            t->itl_sum += r->itl_ms;
            t->itl_n++;
        }
        if (t->plot)
            sim_plot_ttft(t->plot, r->ttft_ms);
    } else {
        t->errors++;
        count_status(t, r->status == 200 ? -1 : r->status);
    }
    if (t->out && r->routed)
        fprintf(t->out, "{\"dp_rank\":%u,", r->dp_rank);
    else if (t->out)
        fputc('{', t->out);
    if (t->out && r->served_by[0])
        fprintf(t->out, "\"served_by\":\"%s\",", r->served_by);
    if (t->out && t->o->failover)
        fprintf(t->out, "\"retries\":%u,\"resent\":%u,", r->retries, r->resent);
    if (t->out)
        fprintf(
            t->out,
            "\"index\":%llu,\"url\":%u,\"status\":%ld,\"ok\":%d,\"isl\":%u,\"osl\":%u,"
            "\"prompt_tokens\":%u,\"cached_tokens\":%u,\"completion_tokens\":%u,"
            "\"tokens_received\":%u,\"start_s\":%.6f,\"ttft_ms\":%.3f,\"itl_ms\":%.3f,"
            "\"e2e_ms\":%.3f}\n",
            (unsigned long long)r->index, r->url, r->status, ok, r->isl, r->osl,
            r->prompt_tokens, r->cached_tokens, r->completion_tokens, r->tokens,
            r->start_s, r->ttft_ms, r->itl_ms, r->e2e_ms);
    if (t->progress && (t->done & 63) == 0)
        fprintf(stderr, "\rreplay: %llu done, %llu errors", (unsigned long long)t->done,
                (unsigned long long)t->errors);
}

/* The replay's own figures: failover and the herding index's ranks. */
static void json_replay(FILE *out, const tally *t)
{
    fprintf(out,
            ",\"replay\":{\"failover\":%d,\"retries\":%llu,\"resent\":%llu,"
            "\"ranks_named\":%u,\"unnamed\":%llu}",
            t->o->failover, (unsigned long long)t->retries, (unsigned long long)t->resent,
            t->herd.num_names, (unsigned long long)t->herd.unnamed);
}

/* wsel sim's JSON document with "replay" and "routing" members added at
 * its end. */
static void json_with_members(const sim_report_input *in, const sim_cluster *c,
                              const sim_router_config *rc, const sim_report_row *row,
                              const tally *t, const replay_route *route)
{
    char *doc = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&doc, &len);
    if (mem == NULL) {
        fprintf(stderr, "wsel replay: out of memory for the JSON\n");
        return;
    }
    sim_report_json(mem, in, c, rc, row, 1, 1);
    fclose(mem);
    /* The document ends with "}\n": reopen it. */
    while (len > 0 && (doc[len - 1] == '\n' || doc[len - 1] == '}'))
        if (doc[--len] == '}')
            break;
    fwrite(doc, 1, len, stdout);
    json_replay(stdout, t);
    if (route) {
        fputs(",\"routing\":", stdout);
        replay_route_json(stdout, route);
    }
    fputs("}\n", stdout);
    free(doc);
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void print_statuses(FILE *f, const tally *t)
{
    if (t->errors == 0)
        return;
    fprintf(f, "errors by status:");
    for (int i = 0; i < MAX_STATUS && t->status_count[i]; i++) {
        if (t->status[i] == 0)
            fprintf(f, " no-answer:%llu", (unsigned long long)t->status_count[i]);
        else if (t->status[i] < 0)
            fprintf(f, " bad-stream:%llu", (unsigned long long)t->status_count[i]);
        else
            fprintf(f, " %ld:%llu", t->status[i], (unsigned long long)t->status_count[i]);
    }
    fputc('\n', f);
}

/* The run as one row of wsel sim's table or JSON, then the statuses (and
 * the routing). 0, or -1 after a message. */
static int print_report(const replay_options *o, tally *t, replay_source *src,
                        replay_route *route)
{
    static sim_report_row row;
    memset(&row, 0, sizeof(row));
    row.plugin = route ? o->plugin : "replay";
    replay_herd_feed(&t->herd, &t->acc, o->ranks);
    if (t->herd_failed || sim_acc_finish(&t->acc, o->num_urls, &row.result.total) != 0) {
        fprintf(stderr, "wsel replay: out of memory for the metrics\n");
        return -1;
    }
    row.result.total.requests = t->done;
    row.result.total.lost_requests = t->errors;
    row.result.num_phases = 1;
    row.result.phase[0] = row.result.total;
    row.result.phase_label[0] = "replay";
    if (o->json) {
        sim_report_input in = {
            .trace = o->trace,
            .workload = o->use_workload ? sim_workload_name(o->workload.kind) : NULL,
            .trace_block_size = o->trace_block_size,
            .seed = o->workload.seed,
            .bad_lines = replay_source_bad_lines(src),
            .rate = o->workload.rate};
        sim_cluster c;
        memset(&c, 0, sizeof(c));
        c.num_workers = o->num_urls; /* the targets; their engines are not known here */
        sim_router_config rc_cfg;
        memset(&rc_cfg, 0, sizeof(rc_cfg));
        rc_cfg.speedup = o->speedup;
        json_with_members(&in, &c, &rc_cfg, &row, t, route);
        print_statuses(stderr, t);
        return 0;
    }
    sim_report_table(stdout, &row, 1);
    printf("replay: %llu requests to %u URL(s), %llu failed; inter-token latency mean "
           "%.2f ms\n",
           (unsigned long long)t->done, o->num_urls, (unsigned long long)t->errors,
           t->itl_n ? t->itl_sum / (double)t->itl_n : 0.0);
    print_statuses(stdout, t);
    if (o->failover)
        printf("failover: %llu retries (no response byte), %llu resent (stream broken)\n",
               (unsigned long long)t->retries, (unsigned long long)t->resent);
    if (t->herd.num_names > 0)
        printf("herding index over %u ranks named by the engines (X-wsel-served-by); "
           "%llu answers named none\n",
           t->acc.num_ranks, (unsigned long long)t->herd.unnamed);
    if (route)
        replay_route_report(stdout, route);
    return 0;
}

int wsel_cmd_replay(int argc, char **argv)
{
    replay_options o;
    char err[1024];
    int rc = replay_options_parse(&o, argc, argv, err, sizeof(err));
    if (rc != CLI_OK)
        return cli_report(&replay_command, rc, err);
    raise_fd_limit();
    int status = WSEL_EXIT_FAILURE;
    tally t;
    memset(&t, 0, sizeof(t));
    t.o = &o;
    t.progress = o.progress < 0 ? isatty(2) : o.progress;
    sim_acc_init(&t.acc);
    replay_source *src = NULL;
    replay_route *route = NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "wsel replay: curl_global_init failed\n");
        goto out_free_acc;
    }
    if (replay_source_open(&src, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "wsel replay: %s\n", err);
        goto out_curl;
    }
    if (o.requests_out && !(t.out = fopen(o.requests_out, "w"))) {
        fprintf(stderr, "wsel replay: cannot write %s\n", o.requests_out);
        goto out_close_source;
    }
    if (o.plot_dir && (sim_plot_open(&t.plot, o.plot_dir, o.num_urls) != 0 ||
                       sim_plot_begin(t.plot, "replay") != 0))
        goto out_close_out;
    if (o.plugin && replay_route_open(&route, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "wsel replay: %s\n", err);
        goto out_close_plot;
    }
    if (replay_run(&o, src, route, on_result, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "%swsel replay: %s\n", t.progress ? "\n" : "", err);
        goto out_close_plot;
    }
    if (t.progress)
        fputc('\n', stderr);
    if (print_report(&o, &t, src, route) != 0)
        goto out_close_plot;
    status = WSEL_EXIT_OK;
    if (t.plot && sim_plot_render(t.plot) != 0)
        status = WSEL_EXIT_FAILURE;

out_close_plot:
    replay_route_close(route);
    sim_plot_close(t.plot);
out_close_out:
    if (t.out)
        fclose(t.out);
out_close_source:
    replay_source_close(src);
out_curl:
    curl_global_cleanup();
out_free_acc:
    replay_herd_free(&t.herd);
    sim_acc_free(&t.acc);
    return status;
}
