// SPDX-License-Identifier: Apache-2.0
/*
 * bench_isolated.c -- the figures of docs/isolated.md (a program, not a
 * test: timings on a shared machine are reported, never asserted).
 *
 *   build/tests/isolated/bench_isolated [selects]
 *
 * 1. Round trip: median and 99th percentile of wsel_host_select for the
 *    iso_good fixture in process and isolated, at 8 and 1,024 rows.
 * 2. Recovery (iso_segv): an isolated crash, where the hot spare takes
 *    over, and a crash loop, bounded by the backoff (10 ms and 1 ms) and a
 *    helper's start-up.
 * 3. Concurrency: 1, 2 and 4 threads selecting through one helper.
 * 4. Deadlines under load: 2,000 selects of iso_good with two busy-looping
 *    processes on the machine, at the default 1 ms deadline, once killing
 *    the helper at its first miss (hang timeout = deadline, the 1.0
 *    behaviour) and once keeping it (the default 1 s hang timeout).
 *
 *   build/tests/isolated/bench_isolated --load [selects [deadline_us]]   part 4 only
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iso_util.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static wsel_host *make_host(const char *path, int isolated, uint32_t backoff_us,
                            const char *config)
{
    wsel_host_options opts;
    iso_options(&opts, 1000000, backoff_us);
    opts.isolated = (uint32_t)isolated;
    wsel_host *host = NULL;
    char err[512];
    if (wsel_host_create(&opts, &host) != 0 ||
        wsel_host_switch(host, path, config, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench_isolated: cannot load %s: %s\n", path, err);
        exit(1);
    }
    return host;
}

static int32_t one_select(wsel_host *host, iso_table *t, uint64_t id)
{
    t->request.request_id = id;
    wsel_host_prepare_request(host, &t->request, &t->rng);
    wsel_choice c;
    memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    return wsel_host_select(host, &t->request, &t->buf.table, &c);
}

/* Median and p99 of `n` timed selects, ns. */
static void time_selects(wsel_host *host, uint32_t workers, uint32_t n, uint64_t *median,
                         uint64_t *p99)
{
    iso_table t;
    if (iso_table_init(&t, workers, 1, 1) != 0)
        exit(1);
    uint64_t *ns = malloc(n * sizeof(uint64_t));
    for (uint32_t i = 0; i < n / 10; i++) /* warm up */
        one_select(host, &t, i);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t t0 = iso_now_ns();
        one_select(host, &t, i);
        ns[i] = iso_now_ns() - t0;
    }
    qsort(ns, n, sizeof(uint64_t), cmp_u64);
    *median = ns[n / 2];
    *p99 = ns[(uint64_t)n * 99 / 100];
    free(ns);
    iso_table_free(&t);
}

static void round_trip(const char *good, uint32_t n)
{
    wsel_host *local = make_host(good, 0, 0, NULL);
    wsel_host *iso = make_host(good, 1, 0, NULL);
    printf("round trip (%u selects each), ns:\n", n);
    printf("  %6s %12s %12s %12s %12s %12s\n", "rows", "in-proc p50", "p99",
           "isolated p50", "p99", "added p50");
    const uint32_t rows[] = {8, 1024};
    for (size_t r = 0; r < 2; r++) {
        uint64_t lm, lp, im, ip;
        time_selects(local, rows[r], n, &lm, &lp);
        time_selects(iso, rows[r], n, &im, &ip);
        printf("  %6u %12llu %12llu %12llu %12llu %12lld\n", rows[r],
               (unsigned long long)lm, (unsigned long long)lp, (unsigned long long)im,
               (unsigned long long)ip, (long long)im - (long long)lm);
    }
    wsel_host_destroy(local);
    wsel_host_destroy(iso);
}

/* Crash loop: the plugin crashes on every 4th select of each helper's life,
 * so the spare has crashed too before its replacement is up: from the
 * first fallback to the next plugin answer is bounded by the backoff and a
 * helper's start-up. */
static void recovery_crash_loop(const char *segv, uint32_t backoff_us, uint32_t rounds)
{
    wsel_host *host = make_host(segv, 1, backoff_us, "{\"n\": 4}");
    iso_table t;
    if (iso_table_init(&t, 8, 1, 1) != 0)
        exit(1);
    uint64_t *ns = malloc(rounds * sizeof(uint64_t));
    uint64_t id = 0;
    for (uint32_t r = 0; r < rounds; r++) {
        while (one_select(host, &t, ++id) == WSEL_ANSWER_PLUGIN)
            ;
        uint64_t t0 = iso_now_ns();
        while (one_select(host, &t, ++id) != WSEL_ANSWER_PLUGIN)
            ;
        ns[r] = iso_now_ns() - t0;
    }
    qsort(ns, rounds, sizeof(uint64_t), cmp_u64);
    printf(
        "  crash loop, backoff %5u us: fallback -> next plugin answer: median %.2f ms, "
        "max %.2f ms (%u rounds)\n",
        backoff_us, ns[rounds / 2] / 1e6, ns[rounds - 1] / 1e6, rounds);
    free(ns);
    iso_table_free(&t);
    wsel_host_destroy(host);
}

/* Isolated crashes (every 200th select, one select every 200 us, so the
 * spare is ready each time): the crashed select's own latency, and how
 * many selects each crash cost. */
static void recovery_isolated(const char *segv, uint32_t rounds)
{
    wsel_host *host = make_host(segv, 1, 10000, "{\"n\": 200}");
    iso_table t;
    if (iso_table_init(&t, 8, 1, 1) != 0)
        exit(1);
    uint64_t *ns = malloc(rounds * sizeof(uint64_t));
    uint64_t id = 0, fallbacks = 0;
    for (uint32_t r = 0; r < rounds;) {
        struct timespec pace = {0, 200000};
        nanosleep(&pace, NULL);
        uint64_t t0 = iso_now_ns();
        int32_t rc = one_select(host, &t, ++id);
        uint64_t dt = iso_now_ns() - t0;
        if (rc == WSEL_ANSWER_FALLBACK) {
            fallbacks++;
            ns[r++] = dt;
        }
    }
    wsel_host_counters c;
    wsel_host_get_counters(host, &c);
    qsort(ns, rounds, sizeof(uint64_t), cmp_u64);
    printf(
        "  isolated crashes: crashed select answered by the fallback in median %.1f us, "
        "max %.1f us; %llu fallbacks for %u crashes (%llu selects)\n",
        ns[rounds / 2] / 1e3, ns[rounds - 1] / 1e3, (unsigned long long)fallbacks, rounds,
        (unsigned long long)c.selects);
    free(ns);
    iso_table_free(&t);
    wsel_host_destroy(host);
}

typedef struct thread_arg {
    wsel_host *host;
    uint32_t n;
    uint64_t median;
} thread_arg;

static void *thread_main(void *p)
{
    thread_arg *a = p;
    uint64_t p99;
    time_selects(a->host, 8, a->n, &a->median, &p99);
    return NULL;
}

static void concurrency(const char *good, uint32_t n)
{
    wsel_host *iso = make_host(good, 1, 0, NULL);
    printf("concurrency (8 rows, %u selects per thread, one helper):\n", n);
    for (uint32_t threads = 1; threads <= 4; threads *= 2) {
        pthread_t tid[4];
        thread_arg args[4];
        uint64_t t0 = iso_now_ns();
        for (uint32_t i = 0; i < threads; i++) {
            args[i] = (thread_arg){iso, n, 0};
            pthread_create(&tid[i], NULL, thread_main, &args[i]);
        }
        uint64_t worst = 0;
        for (uint32_t i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            if (args[i].median > worst)
                worst = args[i].median;
        }
        double s = (double)(iso_now_ns() - t0) / 1e9;
        printf(
            "  %u thread(s): %9.0f selects/s in all, worst per-thread median %llu ns\n",
            threads, threads * (n * 1.1) / s, (unsigned long long)worst);
    }
    wsel_host_destroy(iso);
}

static void count_kills(void *user, int32_t level, const char *msg)
{
    (void)level;
    if (strstr(msg, "(killed)") != NULL)
        (*(uint64_t *)user)++;
}

static void deadlines_under_load(const char *good, uint32_t n, uint32_t deadline_us)
{
    pid_t busy[2];
    for (int i = 0; i < 2; i++) {
        busy[i] = fork();
        if (busy[i] == 0)
            for (volatile uint64_t x = 0;; x++)
                ;
    }
    printf("deadlines under load (two busy processes, %u selects, deadline %u us):\n", n,
           deadline_us);
    const uint32_t hangs[] = {deadline_us, 0};
    for (size_t h = 0; h < 2; h++) {
        uint64_t kills = 0;
        wsel_host_options opts;
        iso_options(&opts, deadline_us, 0);
        opts.hang_timeout_us = hangs[h];
        opts.max_consecutive_failures = WSEL_HOST_NEVER_EJECT;
        opts.log = count_kills;
        opts.log_user = &kills;
        wsel_host *host = NULL;
        char err[512];
        if (wsel_host_create(&opts, &host) != 0 ||
            wsel_host_switch(host, good, NULL, err, sizeof(err)) != 0) {
            fprintf(stderr, "bench_isolated: %s\n", err);
            exit(1);
        }
        iso_table t;
        if (iso_table_init(&t, 8, 1, 1) != 0)
            exit(1);
        for (uint32_t i = 0; i < n; i++)
            one_select(host, &t, i);
        wsel_host_counters c;
        wsel_host_read_counters(host, &c, sizeof(c));
        printf("  %-34s %5llu fallbacks (%.2f %%: timeout %llu, crashed %llu), %llu "
               "helpers killed\n",
               h == 0 ? "killed at first miss (1.0):" : "late kept, 1 s hang timeout:",
               (unsigned long long)c.fallbacks, 100.0 * (double)c.fallbacks / n,
               (unsigned long long)c.fallback_by_reason[WSEL_FALLBACK_TIMEOUT],
               (unsigned long long)c.fallback_by_reason[WSEL_FALLBACK_CRASHED],
               (unsigned long long)kills);
        iso_table_free(&t);
        wsel_host_destroy(host);
    }
    for (int i = 0; i < 2; i++) {
        kill(busy[i], SIGKILL);
        waitpid(busy[i], NULL, 0);
    }
}

int main(int argc, char **argv)
{
    int load_only = argc > 1 && strcmp(argv[1], "--load") == 0;
    if (load_only) {
        argc--;
        argv++;
    }
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 20000;
    char *dir = iso_temp_dir();
    char *good = dir ? iso_install(dir, "iso_good") : NULL;
    char *segv = dir ? iso_install(dir, "iso_segv") : NULL;
    if (good == NULL || segv == NULL) {
        fprintf(stderr, "bench_isolated: cannot install the fixtures\n");
        return 1;
    }
    if (load_only) {
        uint32_t deadline = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 1000;
        deadlines_under_load(good, n, deadline);
        free(good);
        free(segv);
        iso_remove_dir(dir);
        return 0;
    }
    round_trip(good, n);
    printf("recovery:\n");
    recovery_isolated(segv, 20);
    recovery_crash_loop(segv, 10000, 20);
    recovery_crash_loop(segv, 1000, 20);
    concurrency(good, n / 4);
    free(good);
    free(segv);
    iso_remove_dir(dir);
    return 0;
}
