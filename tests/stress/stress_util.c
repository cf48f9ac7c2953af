// SPDX-License-Identifier: Apache-2.0
/*
 * stress_util.c -- clock, scale, table, log sink and paths for the
 * switching stress tests.
 */
#include "stress_util.h"
#include "table_builder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef WSEL_STRESS_PLUGIN_DIR
#error "WSEL_STRESS_PLUGIN_DIR must be defined by the build"
#endif

double stress_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void stress_sleep_us(uint32_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

double stress_scale(void)
{
    const char *text = getenv("WSEL_STRESS_SCALE");
    char *end;
    double scale;

    if (!text || !*text)
        return 1.0;
    scale = strtod(text, &end);
    if (*end != '\0' || !(scale > 0)) {
        fprintf(stderr, "stress: ignoring WSEL_STRESS_SCALE=%s (not a positive number)\n",
                text);
        return 1.0;
    }
    if (scale < 0.001)
        return 0.001;
    return scale > 100 ? 100 : scale;
}

uint64_t stress_scaled(uint64_t base, uint64_t floor)
{
    uint64_t n = (uint64_t)((double)base * stress_scale());

    return n < floor ? floor : n;
}

/* Six workers x two ranks, ids from 100, loads spread; row 3 is made the
 * cheapest and excluded: a policy that ignores the flag would pick it, and
 * the host must refuse that answer. */
static void fill_stress(wsel_rank_state *ranks, uint32_t n, uint32_t dp, void *ctx)
{
    (void)ctx;
    for (uint32_t r = 0; r < n; r++) {
        ranks[r].worker_id = 100 + r / dp;
        ranks[r].overlap_blocks = (r * 7) % 5;
        ranks[r].active_prefill_tokens = 256u * ((r * 5) % 7);
        ranks[r].active_blocks = 40u + 9u * ((r * 3) % 11);
        ranks[r].kv_capacity_blocks = 16384;
        ranks[r].active_requests = r % 4;
    }
    ranks[3].overlap_blocks = 60;
    ranks[3].active_prefill_tokens = 0;
    ranks[3].active_blocks = 0;
    ranks[3].flags = WSEL_ROW_EXCLUDED;
    ranks[7].flags = WSEL_ROW_EXCLUDED;
    ranks[11].flags = WSEL_ROW_EXCLUDED;
    ranks[5].flags = WSEL_ROW_NO_LOAD;
}

int32_t stress_table_build(wsel_table_buf *buf)
{
    wsel_request req;
    char err[256];
    memset(&req, 0, sizeof req);
    req.struct_size = sizeof req;
    req.isl_tokens = STRESS_ISL;
    req.block_size = STRESS_BLOCK_SIZE;
    req.overlap_score_weight = 1.0;
    int32_t rc = ts_table_build(buf, &req, 6, 2, fill_stress, NULL, err, sizeof err);
    if (rc < 0)
        fprintf(stderr, "stress: %s\n", err);
    return rc;
}

void stress_log_sink(void *user, int32_t level, const char *msg)
{
    stress_log_counts *counts = user;

    if (strstr(msg, "stress") && strstr(msg, ": created instance"))
        atomic_fetch_add(&counts->created, 1);
    else if (strstr(msg, "stress") && strstr(msg, ": destroyed instance"))
        atomic_fetch_add(&counts->destroyed, 1);
    else if (strstr(msg, "stress") && strstr(msg, ": waiting at the gate"))
        atomic_fetch_add(&counts->gated, 1);
    if (level == WSEL_LOG_ERROR)
        atomic_fetch_add(&counts->errors, 1);
    if (level <= WSEL_LOG_WARN)
        fprintf(stderr, "host log[%d]: %s\n", (int)level, msg);
}

void stress_host_options(wsel_host_options *opts, stress_log_counts *counts)
{
    wsel_host_options_default(opts);
    opts->seed = 42;
    opts->max_consecutive_failures = WSEL_HOST_NEVER_EJECT;
    opts->log = stress_log_sink;
    opts->log_user = counts;
}

int32_t stress_plugin_path(char *buf, size_t size, const char *name)
{
    int n = snprintf(NULL, 0, "%s/%s.so", WSEL_STRESS_PLUGIN_DIR, name);

    if (n < 0 || (size_t)n >= size)
        return WSEL_ERANGE;
    snprintf(buf, size, "%s/%s.so", WSEL_STRESS_PLUGIN_DIR, name);
    return 0;
}
