// SPDX-License-Identifier: Apache-2.0
/*
 * options.c -- wsel-engine's command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static const char usage_text[] =
    "usage: wsel-engine [OPTIONS]\n"
    "\n"
    "An emulated vLLM-like worker: OpenAI completions and chat over HTTP with\n"
    "server-sent events, data-parallel ranks, Prometheus /metrics and vLLM's KV\n"
    "events over ZeroMQ, its engine being wsel sim's model run in real time.\n"
    "\n"
    "  --host ADDR             IPv4 address to listen on (127.0.0.1)\n"
    "  --port N                HTTP port, 0 = any free one (8000)\n"
    "  --port-file FILE        write 'http URL' and 'kv_events R ENDPOINT' lines\n"
    "                          there once listening (atomically: written, renamed)\n"
    "  --model NAME            model name served (wsel-engine)\n"
    "  --dp N                  data-parallel ranks (1)\n"
    "  --dp-mode MODE          lockstep (one step for all ranks) or independent\n"
    "  --kv-blocks N           KV cache blocks per rank (16384)\n"
    "  --block-size N          tokens per KV block (64)\n"
    "  --max-num-seqs N        running sequences per rank (256)\n"
    "  --max-num-batched-tokens N  token budget per step (8192)\n"
    "  --max-model-len N       prompt + completion limit (kv-blocks x block-size)\n"
    "  --cost-model M          polynomial (Dynamo mocker's) or linear\n"
    "  --time-scale X          model ms per wall ms (1; 1000 = 1000x faster)\n"
    "  --vocab-size N          token ids accepted and generated (32000)\n"
    "  --kv-events ENDPOINT    publish KV events: tcp://HOST:PORT, rank R on\n"
    "                          PORT + R; PORT 0 = any free port per rank\n"
    "  --kv-events-replay ENDPOINT  ROUTER for replays, likewise\n"
    "  --kv-events-topic T     topic frame ('')\n"
    "  --http-threads N        HTTP threads (1)\n"
    "  --max-body BYTES        largest request body (67108864)\n"
    "  --quiet                 no log lines on stderr\n"
    "  --version               print the version and exit\n";

static int parse_u32(const char *name, const char *v, uint32_t min, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || !*v || v[0] == '-' || x < min || x > UINT32_MAX) {
        fprintf(stderr, "wsel-engine: %s %s: expected an integer >= %u\n", name, v, min);
        return -1;
    }
    *out = (uint32_t)x;
    return 0;
}

int eng_options_parse(eng_options *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->port = 8000;
    o->model = "wsel-engine";
    sim_cluster_default(&o->cluster);
    o->cluster.dp[0] = 1;
    o->time_scale = 1;
    o->vocab_size = 32000;
    o->http_threads = 1;
    o->max_body = 64u << 20;
    o->kv_events_topic = "";
    uint32_t max_model_len = 0, u;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 1;
        }
        if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
            continue;
        }
        if (i + 1 >= argc || strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "wsel-engine: %s: unknown or missing its value\n%s", a,
                    usage_text);
            return -1;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--host") == 0)
            o->host = v;
        else if (strcmp(a, "--port") == 0)
            rc = parse_u32(a, v, 0, &o->port) != 0 || o->port > 65535 ? -1 : 0;
        else if (strcmp(a, "--port-file") == 0)
            o->port_file = v;
        else if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--dp") == 0)
            rc = parse_u32(a, v, 1, &o->cluster.dp[0]) != 0 ||
                         o->cluster.dp[0] > SIM_MAX_RANKS
                     ? -1
                     : 0;
        else if (strcmp(a, "--dp-mode") == 0) {
            if (strcmp(v, "lockstep") == 0)
                o->cluster.dp_mode = SIM_DP_LOCKSTEP;
            else if (strcmp(v, "independent") == 0)
                o->cluster.dp_mode = SIM_DP_INDEPENDENT;
            else
                rc = -1;
        } else if (strcmp(a, "--kv-blocks") == 0)
            rc = parse_u32(a, v, 1, &o->cluster.kv_blocks);
        else if (strcmp(a, "--block-size") == 0)
            rc = parse_u32(a, v, 1, &o->cluster.block_size);
        else if (strcmp(a, "--max-num-seqs") == 0)
            rc = parse_u32(a, v, 1, &o->cluster.max_running);
        else if (strcmp(a, "--max-num-batched-tokens") == 0)
            rc = parse_u32(a, v, 1, &o->cluster.token_budget);
        else if (strcmp(a, "--max-model-len") == 0)
            rc = parse_u32(a, v, 2, &max_model_len);
        else if (strcmp(a, "--cost-model") == 0) {
            if (strcmp(v, "polynomial") == 0)
                o->cluster.cost_model = SIM_COST_POLYNOMIAL;
            else if (strcmp(v, "linear") == 0)
                o->cluster.cost_model = SIM_COST_LINEAR;
            else
                rc = -1;
        } else if (strcmp(a, "--time-scale") == 0) {
            char *end;
            o->time_scale = strtod(v, &end);
            rc = *end || !(o->time_scale > 0 && o->time_scale <= 1e6) ? -1 : 0;
        } else if (strcmp(a, "--vocab-size") == 0)
            rc = parse_u32(a, v, 2, &o->vocab_size);
        else if (strcmp(a, "--kv-events") == 0)
            o->kv_events = v;
        else if (strcmp(a, "--kv-events-replay") == 0)
            o->kv_events_replay = v;
        else if (strcmp(a, "--kv-events-topic") == 0)
            o->kv_events_topic = v;
        else if (strcmp(a, "--http-threads") == 0)
            rc = parse_u32(a, v, 1, &o->http_threads) != 0 || o->http_threads > 64 ? -1
                                                                                   : 0;
        else if (strcmp(a, "--max-body") == 0) {
            rc = parse_u32(a, v, 1024, &u);
            if (rc == 0)
                o->max_body = u; /* on a bad value u is unset */
        } else {
            fprintf(stderr, "wsel-engine: unknown option %s\n%s", a, usage_text);
            return -1;
        }
        if (rc != 0) {
            fprintf(stderr, "wsel-engine: %s %s: bad value (see --help)\n", a, v);
            return -1;
        }
    }
    if (o->cluster.token_budget < o->cluster.max_running) {
        fprintf(stderr, "wsel-engine: --max-num-batched-tokens must be at least "
                        "--max-num-seqs\n");
        return -1;
    }
    if (o->kv_events_replay && !o->kv_events) {
        fprintf(stderr, "wsel-engine: --kv-events-replay needs --kv-events\n");
        return -1;
    }
    uint64_t capacity = (uint64_t)o->cluster.kv_blocks * o->cluster.block_size;
    o->max_model_len = max_model_len
                           ? max_model_len
                           : (uint32_t)(capacity > UINT32_MAX ? UINT32_MAX : capacity);
    return 0;
}
