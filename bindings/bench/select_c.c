// SPDX-License-Identifier: Apache-2.0
/*
 * select_c.c -- the baseline of bindings/bench/run.sh: wsel_host_select
 * called from C, each call timed with CLOCK_MONOTONIC.
 *   select_c PLUGIN ROWS ITERATIONS   prints "c p50_ns p99_ns"
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <wsel_host.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: select_c PLUGIN ROWS ITERATIONS\n");
        return 2;
    }
    uint32_t rows = (uint32_t)atoi(argv[2]);
    size_t iters = (size_t)atol(argv[3]);
    char err[512];
    wsel_host *host = NULL;
    if (wsel_host_create(NULL, &host) != 0 ||
        wsel_host_switch(host, argv[1], NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "select_c: %s\n", err);
        return 1;
    }
    wsel_rank_state *ranks = calloc(rows, sizeof(*ranks));
    uint64_t *ns = calloc(iters, sizeof(*ns));
    for (uint32_t i = 0; i < rows; i++) {
        ranks[i].worker_id = i;
        ranks[i].active_blocks = (i * 7919u) % 1000u;
    }
    wsel_request req = {0};
    wsel_rng rng;
    req.request_id = 1;
    wsel_host_prepare_request_sized(host, &req, sizeof(req), &rng);
    req.isl_tokens = 1024;
    req.block_size = 64;
    req.overlap_score_weight = 1.0;
    wsel_table_buf buf;
    wsel_table_buf_init(&buf, rows);
    if (wsel_table_build(&buf, &req, ranks, rows, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "select_c: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < iters / 10; i++) { /* warm-up */
        wsel_choice c = {.struct_size = sizeof(c)};
        wsel_host_select(host, &req, &buf.table, &c);
    }
    for (size_t i = 0; i < iters; i++) {
        wsel_choice c = {.struct_size = sizeof(c)};
        uint64_t t0 = now_ns();
        wsel_host_select(host, &req, &buf.table, &c);
        ns[i] = now_ns() - t0;
    }
    qsort(ns, iters, sizeof(*ns), cmp_u64);
    printf("c %llu %llu\n", (unsigned long long)ns[iters / 2],
           (unsigned long long)ns[iters * 99 / 100]);
    wsel_table_buf_free(&buf);
    wsel_host_destroy(host);
    free(ranks);
    free(ns);
    return 0;
}
