// SPDX-License-Identifier: Apache-2.0
/*
 * options.c -- `wsel replay`'s command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

static const char usage_text[] =
    "usage: wsel replay --url URL [--url URL ...] (--trace FILE | --workload NAME) "
    "[OPTIONS]\n"
    "\n"
    "Send a Mooncake trace or a generated workload to OpenAI-compatible engines\n"
    "(wsel-engine, vLLM) as streamed /v1/completions with token-id prompts, and\n"
    "report wsel sim's table (or --json keys) measured from the client side;\n"
    "'lost' counts requests that failed (by status below the table).\n"
    "\n"
    "  --url URL               an engine's base URL; request i goes to URL i mod N\n"
    "                          (unless --plugin routes)\n"
    "  --trace FILE            Mooncake JSONL (timestamp, input_length,\n"
    "                          output_length, hash_ids)\n"
    "  --trace-block-size N    tokens per hash id (512)\n"
    "  --skip-bad-lines        count and skip bad trace lines\n"
    "  --workload NAME         shared-prefix, chat, agent or conversation\n"
    "  --rate R                workload arrivals per second\n"
    "  --requests N            send at most N requests (workloads: how many)\n"
    "  --seed S                workload seed (1)\n"
    "  --speedup X             arrival times divided by X (1)\n"
    "  --time-scale X          the engines' --time-scale: arrivals come X times\n"
    "                          sooner still and times are reported x X, in model\n"
    "                          time, comparable with wsel sim (1)\n"
    "  --concurrency N         requests in flight at most (256)\n"
    "  --model NAME            the \"model\" field (left out by default)\n"
    "  --vocab-size N          token ids below N (32000)\n"
    "  --timeout S             give up on a request after S seconds (0 = never)\n"
    "  --requests-out FILE     one JSON line per request: status, usage, timings\n"
    "  --plot DIR              TTFT chart (gnuplot) into DIR\n"
    "  --json                  the JSON document instead of the table\n"
    "  --no-progress           no progress line on stderr\n"
    "\n"
    "Routing (docs/real-time.md): the replay routes each request itself through\n"
    "libwsel-router and the policy gets every request's outcome.\n"
    "  --plugin NAME|PATH      route with this policy (seeded by --seed)\n"
    "  --config JSON           its configuration ({})\n"
    "  --dp N|LIST             ranks of each URL's engine: one size for all, or\n"
    "                          one per --url (1); sent as X-data-parallel-rank\n"
    "  --kv-events LIST        the preceding --url's KV event endpoints, one per\n"
    "                          rank (tcp://H:P,...): the KV index follows them\n"
    "                          instead of the routing history\n"
    "  --block-size N          the engines' KV block, tokens (64)\n";

/* "4" or "2,1,4": one size for every URL, or one per URL. */
static int parse_dp(replay_options *o, const char *v, uint32_t *count, char *err,
                    size_t err_size)
{
    const char *p = v;
    *count = 0;
    while (*p) {
        char *end;
        errno = 0;
        unsigned long x = strtoul(p, &end, 10);
        if (errno || end == p || x < 1 || x > 64 || (*end && *end != ',') ||
            *count == REPLAY_MAX_URLS || *p == '-') {
            snprintf(err, err_size, "--dp %s: expected sizes 1..64, comma-separated", v);
            return -1;
        }
        o->dp[(*count)++] = (uint32_t)x;
        p = *end ? end + 1 : end;
    }
    if (*count == 0) {
        snprintf(err, err_size, "--dp %s: expected sizes 1..64, comma-separated", v);
        return -1;
    }
    return 0;
}

/* The routing options hold together. 0 or 2 with a message. */
static int check_routing(replay_options *o, uint32_t dp_count, int routing_flags,
                         char *err, size_t err_size)
{
    if (o->plugin == NULL) {
        if (routing_flags) {
            snprintf(err, err_size,
                     "--config, --dp, --kv-events and --block-size need --plugin");
            return 2;
        }
        return 0;
    }
    if (dp_count == 0)
        o->dp[0] = 1;
    if (dp_count <= 1)
        for (uint32_t i = 1; i < o->num_urls; i++)
            o->dp[i] = o->dp[0];
    else if (dp_count != o->num_urls) {
        snprintf(err, err_size, "--dp lists %u sizes for %u --url", dp_count,
                 o->num_urls);
        return 2;
    }
    return 0;
}

static int num(const char *name, const char *v, double min, double max, double *out,
               char *err, size_t err_size)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || !*v || !(x >= min && x <= max)) {
        snprintf(err, err_size, "%s %s: expected a number in [%g, %g]", name, v, min,
                 max);
        return -1;
    }
    *out = x;
    return 0;
}

int replay_options_parse(replay_options *o, int argc, char **argv, char *err,
                         size_t err_size)
{
    memset(o, 0, sizeof(*o));
    o->trace_block_size = 512;
    o->speedup = 1;
    o->time_scale = 1;
    o->concurrency = 256;
    o->vocab_size = 32000;
    o->progress = -1;
    o->block_size = 64;
    uint32_t dp_count = 0;
    int routing_flags = 0;
    const char *workload = NULL;
    double rate = -1, requests = -1, seed = 1, x;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (strcmp(a, "--skip-bad-lines") == 0) {
            o->skip_bad_lines = 1;
            continue;
        }
        if (strcmp(a, "--no-progress") == 0) {
            o->progress = 0;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, err_size, "%s: unknown option or missing its value", a);
            return 2;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--url") == 0) {
            if (o->num_urls == REPLAY_MAX_URLS) {
                snprintf(err, err_size, "--url: at most %d", REPLAY_MAX_URLS);
                return 2;
            }
            o->urls[o->num_urls++] = v;
        } else if (strcmp(a, "--plugin") == 0) {
            o->plugin = v;
        } else if (strcmp(a, "--config") == 0) {
            o->config = v;
            routing_flags = 1;
        } else if (strcmp(a, "--dp") == 0) {
            if (parse_dp(o, v, &dp_count, err, err_size) != 0)
                return 2;
            routing_flags = 1;
        } else if (strcmp(a, "--kv-events") == 0) {
            if (o->num_urls == 0) {
                snprintf(err, err_size, "--kv-events %s must follow its --url", v);
                return 2;
            }
            o->kv_events[o->num_urls - 1] = v;
            routing_flags = 1;
        } else if (strcmp(a, "--block-size") == 0) {
            rc = num(a, v, 1, 1 << 16, &x, err, err_size);
            o->block_size = (uint32_t)x;
            routing_flags = 1;
        } else if (strcmp(a, "--trace") == 0) {
            o->trace = v;
        } else if (strcmp(a, "--workload") == 0) {
            workload = v;
        } else if (strcmp(a, "--model") == 0) {
            o->model = v;
        } else if (strcmp(a, "--requests-out") == 0) {
            o->requests_out = v;
        } else if (strcmp(a, "--plot") == 0) {
            o->plot_dir = v;
        } else if (strcmp(a, "--trace-block-size") == 0) {
            rc = num(a, v, 1, 1 << 20, &x, err, err_size);
            o->trace_block_size = (uint32_t)x;
        } else if (strcmp(a, "--rate") == 0) {
            rc = num(a, v, 1e-6, 1e9, &rate, err, err_size);
        } else if (strcmp(a, "--requests") == 0) {
            rc = num(a, v, 1, 1e9, &requests, err, err_size);
        } else if (strcmp(a, "--seed") == 0) {
            rc = num(a, v, 0, 1e18, &seed, err, err_size);
        } else if (strcmp(a, "--speedup") == 0) {
            rc = num(a, v, 1e-6, 1e9, &o->speedup, err, err_size);
        } else if (strcmp(a, "--time-scale") == 0) {
            rc = num(a, v, 1e-6, 1e6, &o->time_scale, err, err_size);
        } else if (strcmp(a, "--concurrency") == 0) {
            rc = num(a, v, 1, 1e6, &x, err, err_size);
            o->concurrency = (uint32_t)x;
        } else if (strcmp(a, "--vocab-size") == 0) {
            rc = num(a, v, 2, 4e9, &x, err, err_size);
            o->vocab_size = (uint32_t)x;
        } else if (strcmp(a, "--timeout") == 0) {
            rc = num(a, v, 0, 1e9, &o->timeout_s, err, err_size);
        } else {
            snprintf(err, err_size, "%s: unknown option (see wsel replay --help)", a);
            return 2;
        }
        if (rc != 0)
            return 2;
    }
    if (o->num_urls == 0 || (!o->trace) == (!workload)) {
        snprintf(err, err_size, "give --url and exactly one of --trace or --workload");
        return 2;
    }
    for (uint32_t i = 0; i < o->num_urls; i++)
        if (strncmp(o->urls[i], "http://", 7) != 0 &&
            strncmp(o->urls[i], "https://", 8) != 0) {
            snprintf(err, err_size, "--url %s: expected http://HOST:PORT", o->urls[i]);
            return 2;
        }
    if (workload) {
        int kind = sim_workload_kind(workload);
        if (kind < 0) {
            snprintf(err, err_size, "--workload %s: unknown", workload);
            return 2;
        }
        sim_workload_default(&o->workload, (uint32_t)kind);
        o->workload.seed = (uint64_t)seed;
        if (rate > 0)
            o->workload.rate = rate;
        if (requests > 0)
            o->workload.requests = (uint32_t)requests;
        o->use_workload = 1;
    }
    if (requests > 0)
        o->max_requests = (uint32_t)requests;
    o->seed = (uint64_t)seed;
    return check_routing(o, dp_count, routing_flags, err, err_size);
}
