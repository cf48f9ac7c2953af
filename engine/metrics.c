// SPDX-License-Identifier: Apache-2.0
/*
 * metrics.c -- GET /metrics: the gauges and counters a vLLM dashboard
 * reads, per DP rank (label engine="R", as vLLM labels its DP engines),
 * plus the KV blocks in use per rank.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "http.h"

typedef struct page {
    char *s;
    size_t n, cap;
    int failed;
} page;

static void put(page *p, const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2 && !p->failed; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(p->s + p->n, p->cap - p->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < p->cap - p->n) {
            p->n += (size_t)k;
            return;
        }
        size_t cap = p->cap * 2 + (size_t)(k > 0 ? k : 0);
        char *g = realloc(p->s, cap);
        if (!g) {
            p->failed = 1;
            return;
        }
        p->s = g;
        p->cap = cap;
    }
}

typedef struct metric {
    const char *name;
    const char *type;
    const char *help;
} metric;

static const metric metrics[] = {
    {"vllm:num_requests_running", "gauge",
     "Number of requests in model execution batches."},
    {"vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."},
    {"vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."},
    {"wsel_engine_kv_blocks_used", "gauge", "KV blocks in use (cached or reserved)."},
    {"wsel_engine_kv_blocks_total", "gauge", "KV blocks of the rank."},
    {"vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in tokens."},
    {"vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in tokens."},
    {"vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed."},
    {"vllm:generation_tokens_total", "counter", "Number of generation tokens processed."},
    {"vllm:request_success_total", "counter", "Count of finished requests."},
};

char *eng_metrics_text(eng *e, size_t *len)
{
    page p = {malloc(8192), 0, 8192, 0};
    if (!p.s)
        return NULL;
    uint32_t used[SIM_MAX_RANKS], total[SIM_MAX_RANKS];
    eng_rank_stats st[SIM_MAX_RANKS];
    pthread_mutex_lock(&e->model_lock);
    for (uint32_t r = 0; r < e->num_ranks; r++)
        sim_engine_kv_usage(e->model, r, &used[r], &total[r]);
    pthread_mutex_unlock(&e->model_lock);
    pthread_mutex_lock(&e->io_lock);
    for (uint32_t r = 0; r < e->num_ranks; r++)
        st[r] = e->stats[r];
    pthread_mutex_unlock(&e->io_lock);
    for (size_t m = 0; m < sizeof(metrics) / sizeof(metrics[0]); m++) {
        put(&p, "# HELP %s %s\n# TYPE %s %s\n", metrics[m].name, metrics[m].help,
            metrics[m].name, metrics[m].type);
        for (uint32_t r = 0; r < e->num_ranks; r++) {
            double v = 0;
            switch (m) {
            case 0:
                v = (double)st[r].running;
                break;
            case 1:
                v = (double)st[r].waiting;
                break;
            case 2:
                v = total[r] ? (double)used[r] / total[r] : 0;
                break;
            case 3:
                v = used[r];
                break;
            case 4:
                v = total[r];
                break;
            case 5:
                v = (double)st[r].prefix_queries;
                break;
            case 6:
                v = (double)st[r].prefix_hits;
                break;
            case 7:
                v = (double)st[r].prompt_tokens;
                break;
            case 8:
                v = (double)st[r].generation_tokens;
                break;
            default:
                v = (double)st[r].finished;
                break;
            }
            put(&p, "%s{model_name=\"%s\",engine=\"%u\"%s} %.17g\n", metrics[m].name,
                e->opt.model, r, m == 9 ? ",finished_reason=\"length\"" : "", v);
        }
    }
    if (p.failed) {
        free(p.s);
        return NULL;
    }
    *len = p.n;
    return p.s;
}
