// SPDX-License-Identifier: Apache-2.0
/*
 * validate_state.c -- checks across many calls: determinism, concurrent
 * select, memory over 10,000 create/destroy cycles, no allocation in
 * select, and (reported, not judged) p50/p99 select latency at 1,024 rows.
 */
#include "validate.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* A 1,024-row table of workers with 8 and 1 DP ranks (alternating). */
static int32_t table_1024(vtable *vt, uint64_t seed)
{
    uint32_t dp[228];
    uint32_t groups = 0, rows = 0;
    while (rows < 1024) {
        uint32_t d = (groups & 1) ? 1 : 8;
        if (rows + d > 1024)
            d = 1024 - rows;
        dp[groups++] = d;
        rows += d;
    }
    return vtable_init(vt, groups, dp, seed);
}

static int32_t select_one(const vinstance *vi, void *instance, const vtable *vt,
                          const vcontext *ctx, uint64_t id, uint32_t *out_row)
{
    vrequest vr;
    vrequest_make(&vr, ctx->seed, id, 32, (id % 3 == 0) ? 0.5 : 0.0);
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    int32_t rc = vi->plugin->select(instance, &vr.req, &vt->t, &c);
    if (rc == 0)
        *out_row = c.row;
    return rc;
}

/* Stateless: one long-lived instance and a fresh instance per request must
 * agree. Stateful: two fresh instances fed the same sequence (selects and
 * request-finished notices) must agree step by step. */
static void check_determinism(const vcontext *ctx, vcheck_result *res)
{
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    vtable vt;
    uint32_t dp[9] = {8, 1, 8, 1, 2, 8, 1, 4, 8};
    if (vtable_init(&vt, 9, dp, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    int stateless = (vi.plugin->capabilities & WSEL_CAP_STATELESS) != 0;
    void *other = NULL;
    if (!stateless && vinstance_create(&vi, vi.params, &other) < 0) {
        vfail(res, "second create() failed");
        goto out_free_table;
    }
    for (uint64_t id = 1; id <= 200 && res->status != VCHECK_FAIL; id++) {
        uint32_t a = 0, b = 0;
        void *fresh = other;
        if (stateless && vinstance_create(&vi, vi.params, &fresh) < 0) {
            vfail(res, "create() failed at request %llu", (unsigned long long)id);
            break;
        }
        int32_t ra = select_one(&vi, vi.instance, &vt, ctx, id, &a);
        int32_t rb = select_one(&vi, fresh, &vt, ctx, id, &b);
        if (ra != rb || (ra == 0 && a != b))
            vfail(res,
                  "request %llu on a 41-row table: %s instance answered %d/row %u, "
                  "%s answered %d/row %u",
                  (unsigned long long)id, stateless ? "a long-lived" : "instance A", ra,
                  a, stateless ? "a fresh one" : "instance B", rb, b);
        if (stateless) {
            vi.plugin->destroy(fresh);
        } else if (vi.plugin->on_request_finished && id > 5 && ra == 0) {
            uint32_t row = (uint32_t)((id * 7) % vt.t.num_rows);
            vi.plugin->on_request_finished(vi.instance, id - 5, vt.worker_id[row],
                                           vt.dp_rank[row]);
            vi.plugin->on_request_finished(other, id - 5, vt.worker_id[row],
                                           vt.dp_rank[row]);
        }
    }
    if (other != NULL)
        vi.plugin->destroy(other);
out_free_table:
    vtable_free(&vt);
out_close_instance:
    vinstance_close(&vi);
}

#define HAMMER_THREADS 8
#define HAMMER_SELECTS 4000

typedef struct hammer {
    const vinstance *vi;
    const vtable *vt;
    const vcontext *ctx;
    uint32_t thread;
    atomic_int *failed;
    char detail[200];
} hammer;

static void *hammer_run(void *arg)
{
    hammer *h = arg;
    for (uint32_t k = 0; k < HAMMER_SELECTS && !atomic_load(h->failed); k++) {
        uint64_t id = (uint64_t)h->thread * 1000000u + k + 1;
        uint32_t row = 0;
        int32_t rc = select_one(h->vi, h->vi->instance, h->vt, h->ctx, id, &row);
        const char *why = rc != 0                                 ? "an error"
                          : row >= h->vt->t.num_rows              ? "out of range"
                          : h->vt->flags[row] & WSEL_ROW_EXCLUDED ? "excluded"
                                                                  : NULL;
        if (why != NULL) {
            snprintf(h->detail, sizeof(h->detail),
                     "thread %u, request %llu: select returned %d, row %u (%s)",
                     h->thread, (unsigned long long)id, rc, row, why);
            atomic_store(h->failed, 1);
            break;
        }
        if (h->vi->plugin->on_request_finished && (k & 3) == 0)
            h->vi->plugin->on_request_finished(h->vi->instance, id, h->vt->worker_id[row],
                                               h->vt->dp_rank[row]);
    }
    return NULL;
}

static void check_concurrent_select(const vcontext *ctx, vcheck_result *res)
{
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    if (!(vi.plugin->capabilities & WSEL_CAP_CONCURRENT_SELECT)) {
        vskip(res, "WSEL_CAP_CONCURRENT_SELECT not declared");
        goto out_close_instance;
    }
    vtable vt;
    if (table_1024(&vt, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    for (uint32_t i = 0; i < vt.t.num_rows; i += 16)
        vt.flags[i] = WSEL_ROW_EXCLUDED;
    atomic_int failed = 0;
    hammer h[HAMMER_THREADS];
    pthread_t tid[HAMMER_THREADS];
    uint32_t started = 0;
    for (uint32_t t = 0; t < HAMMER_THREADS; t++) {
        h[t] = (hammer){.vi = &vi, .vt = &vt, .ctx = ctx, .thread = t, .failed = &failed};
        if (pthread_create(&tid[t], NULL, hammer_run, &h[t]) != 0)
            break;
        started++;
    }
    for (uint32_t t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    if (started < HAMMER_THREADS)
        vfail(res, "could start only %u threads", started);
    for (uint32_t t = 0; t < started; t++)
        if (h[t].detail[0])
            vfail(res, "%u threads x %u selects on one instance, 1,024 rows: %s",
                  HAMMER_THREADS, HAMMER_SELECTS, h[t].detail);
    vtable_free(&vt);
out_close_instance:
    vinstance_close(&vi);
}

/* Heap bytes in use (malloc'd and mmapped chunks) and resident pages. */
static void memory_now(size_t *heap, long *rss_kib)
{
    struct mallinfo2 mi = mallinfo2();
    *heap = mi.uordblks + mi.hblkhd;
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    *rss_kib = resident * 4;
}

/*
 * 10,000 create/select/destroy cycles must not grow memory. Slack: glibc's
 * smallest chunk is 32 bytes, so leaking even one allocation per cycle adds
 * 320,000 bytes of heap: a 64 KiB heap slack misses no per-cycle leak while
 * absorbing the allocator's own bookkeeping. RSS moves in pages and with
 * allocator caches; 1 MiB of RSS slack still catches a leak of 105 bytes
 * per cycle made outside malloc (e.g. direct mmap).
 *
 * In a sanitizer build (no malloc counting) the sanitizer's heap is
 * invisible to mallinfo2 and its quarantine inflates RSS, so memory is not
 * judged there: 200 cycles (after the 100 of warm-up) only look for the
 * errors a sanitizer reports on the first bad cycle. More would only slow
 * the check: a plugin that reserves megabytes at create (chash's ring)
 * costs TSan a shadow reset per free, and 1,100 cycles passed the 60 s
 * hang limit under TSan on busy cores.
 */
static void check_lifecycle_memory(const vcontext *ctx, vcheck_result *res)
{
    int judge_memory = bench_alloc_available();
    const uint32_t warmup = 100;
    uint32_t cycles = judge_memory ? 10000 : 200;
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    vtable vt;
    uint32_t dp[8] = {8, 1, 8, 1, 8, 1, 8, 1};
    if (vtable_init(&vt, 8, dp, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    size_t heap0 = 0, heap1 = 0;
    long rss0 = 0, rss1 = 0;
    for (uint32_t cycle = 0; cycle < warmup + cycles && res->status != VCHECK_FAIL;
         cycle++) {
        if (cycle == warmup)
            memory_now(&heap0, &rss0);
        void *instance = NULL;
        int32_t rc = vinstance_create(&vi, vi.params, &instance);
        if (rc < 0) {
            vfail(res, "create() failed at cycle %u: %s", cycle, wsel_errname(rc));
            break;
        }
        uint32_t row = 0;
        rc = select_one(&vi, instance, &vt, ctx, cycle + 1, &row);
        vi.plugin->destroy(instance);
        if (rc != 0)
            vfail(res, "select failed at cycle %u: %s", cycle, wsel_errname(rc));
    }
    memory_now(&heap1, &rss1);
    if (res->status == VCHECK_FAIL)
        goto out_free_table;
    if (!judge_memory)
        snprintf(res->detail, sizeof(res->detail),
                 "%u cycles; memory not judged in a sanitizer build",
                 (unsigned)(warmup + cycles));
    else if (heap1 > heap0 + 64 * 1024)
        vfail(res,
              "heap grew by %zu bytes over 10,000 create/destroy cycles (slack 64 KiB)",
              heap1 - heap0);
    else if (rss1 > rss0 + 1024)
        vfail(res, "RSS grew by %ld KiB over 10,000 create/destroy cycles (slack 1 MiB)",
              rss1 - rss0);
out_free_table:
    vtable_free(&vt);
out_close_instance:
    vinstance_close(&vi);
}

static void check_select_no_alloc(const vcontext *ctx, vcheck_result *res)
{
    if (!bench_alloc_available()) {
        vskip(res, "allocation counting unavailable in this build (sanitizers)");
        return;
    }
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    vtable vt;
    if (table_1024(&vt, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_close_instance;
    }
    uint32_t row = 0;
    for (uint64_t id = 1; id <= 16; id++) /* let lazy one-off setup happen */
        select_one(&vi, vi.instance, &vt, ctx, id, &row);
    bench_alloc_begin();
    for (uint64_t id = 17; id <= 1016; id++)
        select_one(&vi, vi.instance, &vt, ctx, id, &row);
    uint64_t n = bench_alloc_end();
    if (n != 0)
        vfail(res, "%llu heap allocations in 1,000 selects on 1,024 rows",
              (unsigned long long)n);
    vtable_free(&vt);
out_close_instance:
    vinstance_close(&vi);
}

static void check_latency(const vcontext *ctx, vcheck_result *res)
{
    enum { warmup = 2000, samples = 20000 };
    vinstance vi;
    if (vinstance_open(&vi, ctx, res) < 0)
        return;
    vtable vt;
    double *ns = malloc(samples * sizeof(double));
    if (ns == NULL || table_1024(&vt, ctx->seed) < 0) {
        vfail(res, "out of memory");
        goto out_free_samples;
    }
    double overhead = bench_timer_overhead_ns();
    for (uint32_t k = 0; k < warmup + samples; k++) {
        vrequest vr;
        vrequest_make(&vr, ctx->seed, k + 1, 32, 0.0);
        wsel_choice c;
        memset(&c, 0, sizeof(c));
        c.struct_size = sizeof(c);
        uint64_t t0 = bench_now_ns();
        int32_t rc = vi.plugin->select(vi.instance, &vr.req, &vt.t, &c);
        uint64_t t1 = bench_now_ns();
        if (rc != 0) {
            vfail(res, "select failed on request %u: %s", k + 1, wsel_errname(rc));
            break;
        }
        if (k >= warmup)
            ns[k - warmup] = (double)(t1 - t0) - overhead;
    }
    if (res->status != VCHECK_FAIL) {
        res->p50_ns = bench_quantile(ns, samples, 0.50);
        res->p99_ns = bench_quantile(ns, samples, 0.99);
        snprintf(res->detail, sizeof(res->detail),
                 "1,024 rows, direct select: p50 %.0f ns, p99 %.0f ns", res->p50_ns,
                 res->p99_ns);
    }
    vtable_free(&vt);
out_free_samples:
    free(ns);
    vinstance_close(&vi);
}

const vcheck vchecks_state[] = {
    {"deterministic", check_determinism},
    {"concurrent_select", check_concurrent_select},
    {"lifecycle_memory", check_lifecycle_memory},
    {"select_no_allocation", check_select_no_alloc},
    {"latency_1024_rows", check_latency},
};
const unsigned vchecks_state_count = sizeof(vchecks_state) / sizeof(vchecks_state[0]);
