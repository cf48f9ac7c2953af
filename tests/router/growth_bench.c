// SPDX-License-Identifier: Apache-2.0
/*
 * growth_bench.c -- the worst single route while the index grows
 * (docs/bench.md). sync_bench's set-up (1,024 rows, 32-block prompts,
 * block size 64, every prompt new, each request finished) with the
 * default capacity, so the history index grows with every route.
 * Prints, per power-of-two window [2^k, 2^(k+1)) of routes, the p50, p99
 * and max of the calling thread's CPU time per route, microseconds.
 * Usage: growth_bench [requests]   (default 131072)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wsel_router.h"

#define WORKERS 256u
#define DP      4u

static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static wsel_router *make(wsel_host **host)
{
    char err[256], addr[32];
    wsel_router *r;
    if (wsel_host_create(NULL, host) != 0)
        exit(1);
    wsel_router_options o = {
        .struct_size = sizeof(o), .block_size = 64, .max_rows = WORKERS * DP, .host = *host};
    if (wsel_router_create(&o, &r, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    for (uint64_t w = 0; w < WORKERS; w++) {
        snprintf(addr, sizeof(addr), "10.0.0.%llu:8000", (unsigned long long)w);
        wsel_router_worker wk = {.worker_id = w + 1, .address = addr, .dp_size = DP};
        if (wsel_router_add_worker(r, &wk, err, sizeof(err)) != 0)
            exit(1);
    }
    return r;
}

/* p50 / p99 / max of t[lo, hi) (sorted in place). */
static void window(double *t, uint32_t lo, uint32_t hi)
{
    uint32_t n = hi - lo;
    qsort(t + lo, n, sizeof(*t), cmp_double);
    printf("routes %7u..%7u  p50 %7.1f  p99 %7.1f  max %9.1f us\n", lo, hi - 1,
           t[lo + n / 2], t[lo + n * 99 / 100], t[hi - 1]);
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)atoi(argv[1]) : 131072;
    static uint32_t tokens[2048];
    double *t = malloc((size_t)n * sizeof(*t));
    wsel_host *h;
    wsel_router *r = make(&h);
    if (!t)
        return 1;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < 2048; k++)
            tokens[k] = i * 2048u + k;
        wsel_route_request q = {.struct_size = sizeof(q), .tokens = tokens, .num_tokens = 2048};
        wsel_route_result res;
        double c = cpu_us();
        if (wsel_router_route(r, &q, &res) != 0)
            return 1;
        t[i] = cpu_us() - c;
        wsel_router_first_token(r, res.request_id);
        wsel_router_finished(r, res.request_id);
    }
    for (uint32_t lo = 256; lo < n; lo *= 2)
        window(t, lo, lo * 2 < n ? lo * 2 : n);
    wsel_router_destroy(r);
    wsel_host_destroy(h);
    free(t);
    return 0;
}
