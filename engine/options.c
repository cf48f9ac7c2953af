// SPDX-License-Identifier: Apache-2.0
/*
 * options.c -- wsel-engine's command line (cli/ drives it).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "engine.h"
#include "kv_events.h"

#define OFF(field) offsetof(eng_options, field)

static const cli_option engine_option_table[] = {
    {CLI_OPT("host", "ADDR", "IPv4 address to listen on", "127.0.0.1"),
     CLI_AS_STR(OFF(host))},
    {CLI_OPT("port", "N", "HTTP port, 0 = any free one", "8000"),
     CLI_AS_U32(OFF(port), 0, 65535)},
    {CLI_OPT("port-file", "FILE",
             "write 'http URL' and 'kv_events R ENDPOINT' lines\n"
             "there once listening (atomically: written, renamed)",
             NULL),
     CLI_AS_STR(OFF(port_file))},
    {CLI_OPT("model", "NAME", "model name served", "wsel-engine"),
     CLI_AS_STR(OFF(model))},
    {CLI_OPT("dp", "N", "data-parallel ranks", "1"),
     CLI_AS_U32(OFF(cluster.dp[0]), 1, SIM_MAX_RANKS)},
    {CLI_OPT("dp-mode", "MODE", "lockstep (one step for all ranks) or independent",
             "lockstep"),
     CLI_AS_CHOICE(OFF(cluster.dp_mode), sim_dp_mode_names)},
    {CLI_OPT("kv-blocks", "N", "KV cache blocks per rank", "16384"),
     CLI_AS_U32(OFF(cluster.kv_blocks), 1, UINT32_MAX)},
    {CLI_OPT("block-size", "N", "tokens per KV block", "64"),
     CLI_AS_U32(OFF(cluster.block_size), 1, UINT32_MAX)},
    {CLI_OPT("max-num-seqs", "N", "running sequences per rank", "256"),
     CLI_AS_U32(OFF(cluster.max_running), 1, UINT32_MAX)},
    {CLI_OPT("max-num-batched-tokens", "N", "token budget per step", "8192"),
     CLI_AS_U32(OFF(cluster.token_budget), 1, UINT32_MAX)},
    {CLI_OPT("max-model-len", "N", "prompt + completion limit", "kv-blocks x block-size"),
     CLI_AS_U32(OFF(max_model_len), 2, UINT32_MAX)},
    {CLI_OPT("cost-model", "M", "polynomial (Dynamo mocker's) or linear", "polynomial"),
     CLI_AS_CHOICE(OFF(cluster.cost_model), sim_cost_model_names)},
    {CLI_OPT("time-scale", "X", "model ms per wall ms (1000 = 1000x faster)", "1"),
     CLI_AS_DOUBLE(OFF(time_scale), 0, 1e6), .flags = CLI_ABOVE_MIN},
    {CLI_OPT("vocab-size", "N", "token ids accepted and generated", "32000"),
     CLI_AS_U32(OFF(vocab_size), 2, UINT32_MAX)},
    {CLI_OPT("kv-events", "ENDPOINT",
             "publish KV events: tcp://HOST:PORT, rank R on\n"
             "PORT + R; PORT 0 = any free port per rank",
             NULL),
     CLI_AS_STR(OFF(kv_events))},
    {CLI_OPT("kv-events-replay", "ENDPOINT", "ROUTER for replays, likewise", NULL),
     CLI_AS_STR(OFF(kv_events_replay))},
    {CLI_OPT("kv-events-topic", "T", "topic frame", "''"),
     CLI_AS_STR(OFF(kv_events_topic))},
    {CLI_OPT("kv-events-batch", "FORM",
             "a batch as a map (vLLM's) or as the array\n"
             "[ts, events, rank] (vllm-router 0.1.17 reads only that)",
             "map"),
     CLI_AS_CHOICE(OFF(kv_events_batch), eng_kv_batch_names)},
    {CLI_OPT("http-threads", "N", "HTTP threads", "1"),
     CLI_AS_U32(OFF(http_threads), 1, 64)},
    {CLI_OPT("max-body", "BYTES", "largest request body", "67108864"),
     CLI_AS_U64(OFF(max_body), 1024, UINT32_MAX)},
    {CLI_OPT("tokenizer", "DIR",
             "tokenize text and chat with the model's files\n"
             "(tokenizer.json, tokenizer_config.json) as vLLM",
             "the fixed word rule"),
     CLI_AS_STR(OFF(tokenizer_dir))},
    {CLI_OPT("quiet", NULL, "no log lines on stderr", NULL), CLI_AS_FLAG(OFF(quiet))},
    {CLI_OPT("version", NULL, "print the version and exit", NULL), CLI_AS_FLAG(OFF(version))},
};
static const cli_group engine_options = {NULL, CLI_TABLE(engine_option_table), 0};
static const cli_group *const engine_groups[] = {&engine_options};

static const cli_command engine_command = {
    .name = "wsel-engine",
    .usage = "[OPTIONS]",
    .about =
        "An emulated vLLM-like worker: OpenAI completions and chat over HTTP with\n"
        "server-sent events, data-parallel ranks, Prometheus /metrics and vLLM's KV\n"
        "events over ZeroMQ, its engine being wsel sim's model run in real time.",
    CLI_GROUPS(engine_groups),
};

static void set_defaults(eng_options *o)
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
}

/* What the table's ranges cannot say. 0, or -1 after a message. */
static int check(eng_options *o)
{
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
    if (o->max_model_len == 0)
        o->max_model_len = (uint32_t)(capacity > UINT32_MAX ? UINT32_MAX : capacity);
    return 0;
}

int eng_options_parse(eng_options *o, int argc, char **argv)
{
    char err[512];
    set_defaults(o);
    int rc = cli_parse(&engine_command, o, argc, argv, err, sizeof(err));
    if (rc != CLI_OK)
        return cli_report(&engine_command, rc, err) == 0 ? 1 : -1;
    return check(o);
}
