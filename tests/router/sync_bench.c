// SPDX-License-Identifier: Apache-2.0
/*
 * sync_bench.c -- what replica sync costs a request (docs/replicas.md).
 * Replica A routes, takes the first token and finishes requests at 1,024
 * rows (256 workers x 4 ranks, 32-block prompts, block size 64, a
 * history index of 64 blocks a rank, full after a warm-up so it no longer
 * grows), first unsynced, then synced with replica B (in this process,
 * applying A's messages) over the NATS server at URL:
 *   route     wall time of wsel_router_route, p50 / p99, microseconds;
 *   caller    the calling thread's CPU per request (route + first token +
 *             finish), p50, microseconds;
 *   process   the whole process's CPU per request (A's publisher, the NATS
 *             client's threads, B's applying), microseconds;
 *   messages  A's messages published per request.
 * Two paces: back to back (the publisher coalesces changes), and one
 * request every 500 us (about one message per change).
 * Usage: sync_bench nats://127.0.0.1:PORT [requests]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wsel_router.h"

#define WORKERS 256u
#define DP      4u

static double clock_us(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
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
    wsel_router_options o = {.struct_size = sizeof(o),
                             .block_size = 64,
                             .max_rows = WORKERS * DP,
                             .capacity_blocks = 64, /* full after the warm-up */
                             .host = *host};
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

static void start_sync(wsel_router *r, const char *url, uint64_t id)
{
    char err[256];
    wsel_router_sync_options so = {
        .struct_size = sizeof(so), .url = url, .subject = "bench", .replica_id = id};
    if (wsel_router_sync_start(r, &so, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    wsel_router_sync_counters c = {.struct_size = sizeof(c)};
    for (int i = 0; i < 5000 && !c.connected; i++) {
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        wsel_router_sync_read_counters(r, &c);
    }
    if (!c.connected) {
        fprintf(stderr, "sync_bench: cannot reach %s\n", url);
        exit(1);
    }
}

/* n requests on r, one every pace_us (0 = back to back); prints a line
 * unless label is NULL (a warm-up: the index fills first). */
static void run(const char *label, wsel_router *r, uint32_t n, uint32_t pace_us)
{
    static uint32_t tokens[2048];
    static uint32_t seq; /* every prompt new: a miss, as a cold index sees */
    double *lat = malloc(n * sizeof(*lat)), *cpus = malloc(n * sizeof(*cpus));
    double thread0 = clock_us(CLOCK_THREAD_CPUTIME_ID);
    double proc0 = clock_us(CLOCK_PROCESS_CPUTIME_ID);
    wsel_router_sync_counters c0 = {.struct_size = sizeof(c0)}, c1 = c0;
    wsel_router_sync_read_counters(r, &c0);
    double next = clock_us(CLOCK_MONOTONIC);
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < 2048; k++)
            tokens[k] = (seq + i) * 2048u + k;
        wsel_route_request q = {.struct_size = sizeof(q), .tokens = tokens, .num_tokens = 2048};
        wsel_route_result res;
        double c = clock_us(CLOCK_THREAD_CPUTIME_ID);
        double t0 = clock_us(CLOCK_MONOTONIC);
        if (wsel_router_route(r, &q, &res) != 0)
            exit(1);
        lat[i] = clock_us(CLOCK_MONOTONIC) - t0;
        wsel_router_first_token(r, res.request_id);
        wsel_router_finished(r, res.request_id);
        cpus[i] = clock_us(CLOCK_THREAD_CPUTIME_ID) - c;
        for (next += pace_us; pace_us && clock_us(CLOCK_MONOTONIC) < next;)
            ; /* paced: spin to the next slot (a sleep would be the scheduler's) */
    }
    seq += n;
    double thread = clock_us(CLOCK_THREAD_CPUTIME_ID) - thread0;
    double proc = clock_us(CLOCK_PROCESS_CPUTIME_ID) - proc0;
    wsel_router_sync_read_counters(r, &c1);
    qsort(lat, n, sizeof(*lat), cmp_double);
    qsort(cpus, n, sizeof(*cpus), cmp_double);
    double others = proc > thread ? (proc - thread) / n : 0.0;
    if (!label) {
        free(lat);
        free(cpus);
        return;
    }
    /* others: every thread but the caller (its spin excluded too). */
    printf("%-22s route p50 %6.2f p99 %6.2f us  caller %6.2f us/req  "
           "others %6.2f us/req  messages %.2f/req\n",
           label, lat[n / 2], lat[n * 99 / 100], cpus[n / 2], others, (double)(c1.updates_sent + c1.snapshots_sent -
                                     c0.updates_sent - c0.snapshots_sent) / n);
    free(lat);
    free(cpus);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sync_bench nats://HOST:PORT [requests]\n");
        return 2;
    }
    uint32_t n = argc > 2 ? (uint32_t)atoi(argv[2]) : 20000;
    wsel_host *ha, *hb;
    wsel_router *a = make(&ha), *b = make(&hb);
    run(NULL, a, n, 0);
    run("unsynced, back to back", a, n, 0);
    run("unsynced, 500 us pace", a, n / 4, 500);
    start_sync(a, argv[1], 1);
    start_sync(b, argv[1], 2);
    run("synced, back to back", a, n, 0);
    run("synced, 500 us pace", a, n / 4, 500);
    wsel_router_destroy(a);
    wsel_router_destroy(b);
    wsel_host_destroy(ha);
    wsel_host_destroy(hb);
    return 0;
}
