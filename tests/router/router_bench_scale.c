// SPDX-License-Identifier: Apache-2.0
/*
 * router_bench_scale.c -- router_bench's `scale` part: the whole route at
 * each size of WSEL_BENCH_ROWS (default 1,024, 16,384 and 65,536 rows,
 * workers of 8 ranks) in event mode, the index fed only by
 * wsel_router_apply_kv_message with vLLM-format batches:
 *   warm    every rank gets ceil(WSEL_BENCH_BLOCKS / rows) blocks
 *           (default 10,000,000 in all) in chains of up to 128 blocks,
 *           ranks in turn; then the prompts seen before (below) on one
 *           rank each. Capacity a rank: what it holds plus room for the
 *           events (capacity_for).
 *   events  3 passes of 4,096 messages to random ranks, each storing a new
 *           16-block chain and removing the rank's oldest block (the events
 *           part's shape): blocks stored per second, twice: right after the
 *           warm (the index's maps still moving their old tables out after
 *           their last growth) and after a churn of half the index's blocks
 *           stored and as many removed (the index at its size; a map
 *           moves its old table out within that many puts): the steady
 *           state.
 *   route   for each plugin: WSEL_BENCH_ROUTES routes (default 20,000) of
 *           32-block prompts (router_bench's route part: 8 shared system
 *           prompts, prompts drawn from 8,192, the first 4,096 cached),
 *           between two routes one event message storing a 16-block chain
 *           and removing the rank's 16 oldest blocks (the index stays at
 *           its size), each request finished after its route: p50 / p99
 *           of the route, and blocks stored per second by those messages.
 * Times are the calling thread's CPU time, as in the other parts; the
 * peak RSS is the process's high-water mark since the size began.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router_bench.h"

#define DP 8u
#define WARM_CHAIN 128u  /* blocks a warm message stores */
#define SIDE_BLOCKS 16u  /* blocks an event message stores and removes */
#define PROMPTS 8192u    /* the route's pool... */
#define SEEN 4096u       /* ...of which cached before the routes */
#define PROMPT_BLOCKS 32u
#define EVENT_PASSES 3
#define EVENT_MESSAGES 4096u

typedef struct scale {
    wsel_host *host;
    wsel_router *r;
    uint32_t rows;
    uint64_t *next, *oldest; /* per rank: block numbers stored, removed */
    uint64_t *seq;           /* per rank: the next batch's number */
    uint64_t chains;         /* chains started: each first block unique */
    uint32_t tokens[WARM_CHAIN * 64];
    msgpack_sbuffer sb;
    int failed;
} scale;

/* The engine's hash of rank k's block number j. */
static uint64_t ext_hash(uint32_t k, uint64_t j)
{
    return ((uint64_t)k + 1) << 36 | j;
}

/* Prompt p of the route's pool: 8 shared system prompts of 8 blocks, then
 * its own (router_bench.c's route part). */
static void prompt(uint32_t *t, uint32_t p)
{
    for (uint32_t i = 0; i < PROMPT_BLOCKS * 64; i++)
        t[i] = i < 8 * 64 ? (p % 8) * 100000 + i : p * 7919 + i;
}

/* A new chain of n blocks in s->tokens: its first block names the chain,
 * so no two chains share a block (ids of a 32k vocabulary). */
static void chain_tokens(scale *s, uint32_t n)
{
    uint64_t c = s->chains++;
    for (uint32_t i = 0; i < n * 64; i++)
        s->tokens[i] = (uint32_t)((c * 131 + i * 7) % 32000);
    s->tokens[0] = (uint32_t)(c % 32000);
    s->tokens[1] = (uint32_t)(c / 32000);
}

/* Into sb (cleared), rank k's message storing n blocks of tokens and
 * removing its m oldest; returns its sequence number. */
static uint64_t pack_for(scale *s, uint32_t k, const uint32_t *tokens, uint32_t n,
                         uint32_t m, msgpack_sbuffer *sb)
{
    rb_batch b = {.first_hash = ext_hash(k, s->next[k]),
                  .stored = n,
                  .tokens = tokens,
                  .removed_first = ext_hash(k, s->oldest[k]),
                  .removed = m,
                  .dp_rank = k % DP};
    msgpack_sbuffer_clear(sb);
    rb_pack_batch(sb, &b);
    s->next[k] += n;
    s->oldest[k] += m;
    return s->seq[k]++;
}

/* Apply rank k's message number seq, held in sb. */
static void apply_for(scale *s, uint32_t k, uint64_t seq, const msgpack_sbuffer *sb)
{
    int32_t rc = rb_apply(s->r, k / DP, k % DP, seq, sb);
    if (rc != 0 && !s->failed++)
        fprintf(stderr, "scale: apply_kv_message on rank %u: %d\n", k, rc);
}

/* Rank k stores n blocks of tokens and removes its m oldest, in one
 * message; *cpu_us gains the apply's CPU time. */
static void send_batch(scale *s, uint32_t k, const uint32_t *tokens, uint32_t n,
                       uint32_t m, double *cpu_us)
{
    uint64_t seq = pack_for(s, k, tokens, n, m, &s->sb);
    double t0 = rb_now_us();
    apply_for(s, k, seq, &s->sb);
    *cpu_us += rb_now_us() - t0;
}

/* The rank prompt p is cached on. */
static uint32_t home(const scale *s, uint32_t p)
{
    return (uint32_t)(((uint64_t)p * 2654435761u) % s->rows);
}

/* Fill the index: per_rank blocks a rank, then the seen prompts. */
static void warm(scale *s, uint32_t per_rank)
{
    double cpu = 0, t0 = rb_now_us();
    uint64_t blocks = 0;
    for (uint32_t done = 0; done < per_rank; done += WARM_CHAIN) {
        uint32_t n = per_rank - done < WARM_CHAIN ? per_rank - done : WARM_CHAIN;
        for (uint32_t k = 0; k < s->rows; k++) {
            chain_tokens(s, n);
            send_batch(s, k, s->tokens, n, 0, &cpu);
            blocks += n;
        }
    }
    uint32_t t[PROMPT_BLOCKS * 64];
    for (uint32_t p = 0; p < SEEN; p++) {
        prompt(t, p);
        send_batch(s, home(s, p), t, PROMPT_BLOCKS, 0, &cpu);
        blocks += PROMPT_BLOCKS;
    }
    printf("scale: %u rows: warmed with %llu blocks in %.1f s (%.1f s applying: %.2f M "
           "blocks/s as the index grew)\n",
           s->rows, (unsigned long long)blocks, (rb_now_us() - t0) / 1e6, cpu / 1e6,
           (double)blocks / cpu);
}

/* One message: a new 16-block chain on a random rank, its `removed`
 * oldest blocks removed. */
static void side_event(scale *s, uint32_t removed, double *cpu_us)
{
    uint32_t k = rb_rnd() % s->rows;
    chain_tokens(s, SIDE_BLOCKS);
    send_batch(s, k, s->tokens, SIDE_BLOCKS, removed, cpu_us);
}

/* Events alone at the warm size: the worst of the passes, blocks/s. */
static double bench_events_at_size(scale *s)
{
    double worst = 0;
    wsel_router_kv_cpu k0 = {.struct_size = sizeof(k0)}, k1 = k0;
    wsel_router_read_kv_cpu(s->r, &k0);
    printf("scale: %u rows: events, blocks/s stored (16 stored + 1 removed a message):",
           s->rows);
    msgpack_sbuffer *msg = calloc(EVENT_MESSAGES, sizeof(*msg));
    uint32_t *rank = calloc(EVENT_MESSAGES, sizeof(*rank));
    uint64_t *seq = calloc(EVENT_MESSAGES, sizeof(*seq));
    for (int pass = 0; pass < EVENT_PASSES; pass++) {
        /* Packed first, applied in one timed run (the events part's way). */
        for (uint32_t i = 0; i < EVENT_MESSAGES; i++) {
            rank[i] = rb_rnd() % s->rows;
            chain_tokens(s, SIDE_BLOCKS);
            seq[i] = pack_for(s, rank[i], s->tokens, SIDE_BLOCKS, 1, &msg[i]);
        }
        double t0 = rb_now_us();
        for (uint32_t i = 0; i < EVENT_MESSAGES; i++)
            apply_for(s, rank[i], seq[i], &msg[i]);
        double rate = (double)EVENT_MESSAGES * SIDE_BLOCKS / ((rb_now_us() - t0) / 1e6);
        worst = pass == 0 || rate < worst ? rate : worst;
        printf(" %.2f M", rate / 1e6);
    }
    for (uint32_t i = 0; i < EVENT_MESSAGES; i++)
        msgpack_sbuffer_destroy(&msg[i]);
    free(msg);
    free(rank);
    free(seq);
    wsel_router_read_kv_cpu(s->r, &k1);
    double msgs = (double)(k1.messages - k0.messages);
    printf("; a message: decoding %.1f us, applying %.1f us\n",
           (double)(k1.decode_ns - k0.decode_ns) / 1e3 / msgs,
           (double)(k1.apply_ns - k0.apply_ns) / 1e3 / msgs);
    return worst;
}

/* Store and remove `blocks` blocks in side events, the index at its size. */
static void churn(scale *s, uint64_t blocks)
{
    double cpu = 0;
    for (uint64_t done = 0; done < blocks; done += SIDE_BLOCKS)
        side_event(s, SIDE_BLOCKS, &cpu);
    printf("scale: %u rows: churned %llu blocks (%.2f M blocks/s stored)\n", s->rows,
           (unsigned long long)blocks, (double)blocks / cpu);
}

/* What one size measured, for the summary. */
typedef struct size_figures {
    uint32_t rows;
    double p50[8], p99[8];
    double events_growing, events, bytes_per_block;
    double rss_mib;
    uint64_t blocks;
} size_figures;

/* Routes with one side event message before each: p50 and p99. */
static void bench_routes(scale *s, uint32_t routes, double *p50, double *p99)
{
    uint32_t t[PROMPT_BLOCKS * 64];
    wsel_route_request q = {
        .struct_size = sizeof(q), .tokens = t, .num_tokens = PROMPT_BLOCKS * 64};
    wsel_route_result res;
    double *lat = malloc((size_t)routes * sizeof(*lat));
    double ev_cpu = 0;
    wsel_router_counters c0, c1;
    wsel_router_read_counters(s->r, &c0);
    for (uint32_t i = 0; i < routes + 256; i++) { /* the first 256 not timed */
        side_event(s, SIDE_BLOCKS, &ev_cpu);
        prompt(t, rb_rnd() % PROMPTS);
        double t0 = rb_now_us();
        int32_t rc = wsel_router_route(s->r, &q, &res);
        double us = rb_now_us() - t0;
        if (rc != 0) {
            if (!s->failed++)
                fprintf(stderr, "scale: route: %d\n", rc);
            continue;
        }
        if (i >= 256)
            lat[i - 256] = us;
        wsel_router_finished(s->r, res.request_id);
    }
    wsel_router_read_counters(s->r, &c1);
    qsort(lat, routes, sizeof(*lat), rb_cmp_double);
    *p50 = lat[routes / 2];
    *p99 = lat[(uint64_t)routes * 99 / 100];
    uint64_t n = c1.routes - c0.routes;
    printf("scale: %u rows: route %s: p50 %.1f us, p99 %.1f us, %.2f ns a row (%u "
           "routes; "
           "%.1f blocks cached on the chosen rank on average; %llu plugin answers, %llu "
           "fallbacks; the events between them %.2f M blocks/s stored, as many removed)\n",
           s->rows, wsel_host_policy_name(s->host), *p50, *p99,
           *p50 * 1e3 / s->rows, routes,
           n ? (double)(c1.overlap_blocks - c0.overlap_blocks) / (double)n : 0.0,
           (unsigned long long)(c1.plugin_answers - c0.plugin_answers),
           (unsigned long long)(c1.fallbacks - c0.fallbacks),
           (double)(routes + 256) * SIDE_BLOCKS / ev_cpu);
    if (c1.fallbacks != c0.fallbacks && !s->failed++)
        fprintf(stderr, "scale: the host fell back on %llu routes\n",
                (unsigned long long)(c1.fallbacks - c0.fallbacks));
    free(lat);
}

/* Restart the process's high-water mark of RSS (Linux: clear_refs 5). */
static void rss_peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* The process's high-water mark of RSS, MiB (VmHWM); 0 if unknown. */
static double rss_peak_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kib = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %lf", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib / 1024;
}

/* Capacity a rank: per_rank background blocks, the seen prompts of the
 * rank holding most of them, and what the events part adds (15 blocks a
 * message, messages to random ranks: twice the mean and 10 more). */
static uint32_t capacity_for(const scale *s, uint32_t per_rank)
{
    uint32_t *n = calloc(s->rows, sizeof(*n)), most = 0;
    for (uint32_t p = 0; p < SEEN; p++)
        if (++n[home(s, p)] > most)
            most = n[home(s, p)];
    free(n);
    uint32_t grown = EVENT_PASSES * EVENT_MESSAGES / s->rows;
    return per_rank + most * PROMPT_BLOCKS + (SIDE_BLOCKS - 1) * (2 * grown + 10) + 32;
}

/* Everything at one size; figures into *fig. */
static void bench_size(scale *s, uint64_t target, uint32_t routes, char *const *plugins,
                       int np, size_figures *fig)
{
    rss_peak_reset();
    uint32_t per_rank = (uint32_t)((target + s->rows - 1) / s->rows);
    uint32_t cap = capacity_for(s, per_rank);
    s->r = rb_make(s->host, WSEL_ROUTER_KV_EVENTS, s->rows / DP, DP, cap);
    s->next = calloc(s->rows, sizeof(*s->next));
    s->oldest = calloc(s->rows, sizeof(*s->oldest));
    s->seq = calloc(s->rows, sizeof(*s->seq));
    printf("scale: %u rows (%u workers x %u ranks), capacity %u blocks a rank\n", s->rows,
           s->rows / DP, DP, cap);
    warm(s, per_rank);
    wsel_router_counters c;
    wsel_router_read_counters(s->r, &c);
    fig->rows = s->rows;
    fig->blocks = c.index_blocks;
    fig->bytes_per_block = (double)c.index_bytes / (double)c.index_blocks;
    printf("scale: %u rows: index %llu blocks, %llu entries, %.2f GiB: %.1f bytes a "
           "block, %.1f an entry\n",
           s->rows, (unsigned long long)c.index_blocks,
           (unsigned long long)c.index_entries, (double)c.index_bytes / (1u << 30),
           fig->bytes_per_block, (double)c.index_bytes / (double)c.index_entries);
    if (c.index_blocks < target && !s->failed++)
        fprintf(stderr, "scale: the index holds fewer than %llu blocks\n",
                (unsigned long long)target);
    fig->events_growing = bench_events_at_size(s);
    churn(s, c.index_blocks / 2);
    fig->events = bench_events_at_size(s);
    for (int i = 0; i < np && i < 8; i++) {
        char err[512];
        if (plugins[i] && wsel_host_switch(s->host, plugins[i], "{}", err, sizeof(err))) {
            fprintf(stderr, "%s\n", err);
            s->failed++;
            break;
        }
        bench_routes(s, routes, &fig->p50[i], &fig->p99[i]);
    }
    wsel_router_read_counters(s->r, &c);
    for (int i = 0; i < WSEL_KV_SKIP_REASONS; i++)
        if (c.kv_skipped[i] && !s->failed++)
            fprintf(stderr, "scale: %llu KV messages skipped (reason %d)\n",
                    (unsigned long long)c.kv_skipped[i], i);
    printf("scale: %u rows: at the end, index %llu blocks, %llu evicted by the per-rank "
           "capacity\n",
           s->rows, (unsigned long long)c.index_blocks,
           (unsigned long long)c.index_evictions);
    wsel_router_destroy(s->r);
    free(s->next);
    free(s->oldest);
    free(s->seq);
    fig->rss_mib = rss_peak_mib();
    printf("scale: %u rows: peak RSS %.0f MiB\n", s->rows, fig->rss_mib);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* The summary: each figure at each size, and its growth from the first. */
static void print_summary(const size_figures *f, int nsizes, char *const *plugins,
                          int np)
{
    printf("scale: summary (route p50 us and ns a row; events M blocks/s, worst pass, "
           "steady and right after the warm; index bytes a block; peak RSS MiB; x = over "
           "the first size)\n");
    for (int k = 0; k < nsizes; k++) {
        printf("scale: %6u rows:", f[k].rows);
        for (int i = 0; i < np; i++)
            printf(" %s %.1f us %.2f ns/row (x%.2f a row),", plugins[i] ?
                   strrchr(plugins[i], '/') ? strrchr(plugins[i], '/') + 1 : plugins[i]
                   : "built-in", f[k].p50[i], f[k].p50[i] * 1e3 / f[k].rows,
                   f[k].p50[i] / f[k].rows / (f[0].p50[i] / f[0].rows));
        printf(" events %.2f M (x%.2f; %.2f M after the warm), %.1f B/block (x%.2f), "
               "RSS %.0f MiB\n",
               f[k].events / 1e6, f[k].events / f[0].events, f[k].events_growing / 1e6,
               f[k].bytes_per_block,
               f[k].bytes_per_block / f[0].bytes_per_block, f[k].rss_mib);
    }
}

int rb_bench_scale(wsel_host *host, char *const *plugins, int np)
{
    static char *const none[1] = {NULL};
    if (np == 0) {
        plugins = none;
        np = 1;
    }
    const char *list = getenv("WSEL_BENCH_ROWS");
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list && *list ? list : "1024,16384,65536");
    uint64_t target = env_u64("WSEL_BENCH_BLOCKS", 10000000);
    uint32_t routes = (uint32_t)env_u64("WSEL_BENCH_ROUTES", 20000);
    scale *s = calloc(1, sizeof(*s));
    size_figures figs[8];
    int nsizes = 0;
    s->host = host;
    msgpack_sbuffer_init(&s->sb);
    for (char *tok = strtok(buf, ","); tok && nsizes < 8 && !s->failed;
         tok = strtok(NULL, ",")) {
        s->rows = (uint32_t)strtoul(tok, NULL, 10);
        if (s->rows == 0 || s->rows % DP || routes == 0) {
            fprintf(stderr, "scale: rows must be a multiple of %u, routes > 0\n", DP);
            s->failed++;
            break;
        }
        memset(&figs[nsizes], 0, sizeof(figs[nsizes]));
        bench_size(s, target, routes, plugins, np, &figs[nsizes++]);
    }
    if (!s->failed)
        print_summary(figs, nsizes, plugins, np < 8 ? np : 8);
    int failed = s->failed != 0;
    msgpack_sbuffer_destroy(&s->sb);
    free(s);
    return failed;
}
