// SPDX-License-Identifier: Apache-2.0
/*
 * options.c -- `wsel replay`'s command line (cli/ drives it).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "replay.h"

/* The options as given: counts are read as numbers in a range (1e3 is a
 * count too) and converted once all are in; -1 = not given. */
typedef struct replay_args {
    replay_options o;
    const char *workload;
    double trace_block_size, concurrency, vocab_size, block_size;
    double rate, requests, seed, ranks;
    uint32_t dp_count;
} replay_args;

static int add_url(void *target, const cli_value *v)
{
    replay_options *o = &((replay_args *)target)->o;
    if (o->num_urls == REPLAY_MAX_URLS)
        return cli_fail(v, "at most %d --url", REPLAY_MAX_URLS);
    o->urls[o->num_urls++] = v->text;
    return CLI_OK;
}

static int set_kv_events(void *target, const cli_value *v)
{
    replay_options *o = &((replay_args *)target)->o;
    if (o->num_urls == 0)
        return cli_fail(v, "must follow its --url");
    o->kv_events[o->num_urls - 1] = v->text;
    return CLI_OK;
}

#define OFF(field) offsetof(replay_args, field)

static const cli_option replay_option_table[] = {
    {CLI_OPT("url", "URL",
             "an engine's base URL; request i goes to URL i mod N\n"
             "(unless --plugin routes)",
             NULL),
     CLI_AS_CALL(add_url)},
    {CLI_OPT("trace", "FILE",
             "Mooncake JSONL (timestamp, input_length,\n"
             "output_length, hash_ids)",
             NULL),
     CLI_AS_STR(OFF(o.trace))},
    {CLI_OPT("trace-block-size", "N", "tokens per hash id", "512"),
     CLI_AS_DOUBLE(OFF(trace_block_size), 1, 1 << 20)},
    {CLI_OPT("skip-bad-lines", NULL, "count and skip bad trace lines", NULL),
     CLI_AS_FLAG(OFF(o.skip_bad_lines))},
    {CLI_OPT("workload", "NAME", "shared-prefix, chat, agent or conversation", NULL),
     CLI_AS_STR(OFF(workload))},
    {CLI_OPT("rate", "R", "workload arrivals per second", NULL),
     CLI_AS_DOUBLE(OFF(rate), 1e-6, 1e9)},
    {CLI_OPT("requests", "N", "send at most N requests (workloads: how many)", NULL),
     CLI_AS_DOUBLE(OFF(requests), 1, 1e9)},
    {CLI_OPT("seed", "S", "workload seed", "1"), CLI_AS_DOUBLE(OFF(seed), 0, 1e18)},
    {CLI_OPT("speedup", "X", "arrival times divided by X", "1"),
     CLI_AS_DOUBLE(OFF(o.speedup), 1e-6, 1e9)},
    {CLI_OPT("time-scale", "X",
             "the engines' --time-scale: arrivals come X times\n"
             "sooner still and times are reported x X, in model\n"
             "time, comparable with wsel sim",
             "1"),
     CLI_AS_DOUBLE(OFF(o.time_scale), 1e-6, 1e6)},
    {CLI_OPT("concurrency", "N", "requests in flight at most", "256"),
     CLI_AS_DOUBLE(OFF(concurrency), 1, 1e6)},
    {CLI_OPT("model", "NAME", "the \"model\" field", "left out"),
     CLI_AS_STR(OFF(o.model))},
    {CLI_OPT("prompt", "FORM",
             "token ids sent as a JSON array (tokens) or as\n"
             "a string of decimal ids (text); or words, one\n"
             "token each for the model (words), or those words\n"
             "as a chat request's user message (chat)",
             "tokens"),
     CLI_AS_CHOICE(OFF(o.prompt_text), replay_prompt_names)},
    {CLI_OPT("tokenizer", "DIR",
             "words/chat: the model's tokenizer files; what it\n"
             "adds (BOS, chat header) takes the first positions,\n"
             "so its KV blocks line up with the trace's",
             NULL),
     CLI_AS_STR(OFF(o.tokenizer))},
    {CLI_OPT("vocab-size", "N", "token ids below N", "32000"),
     CLI_AS_DOUBLE(OFF(vocab_size), 2, 4e9)},
    {CLI_OPT("timeout", "S", "give up on a request after S seconds (0 = never)", "0"),
     CLI_AS_DOUBLE(OFF(o.timeout_s), 0, 1e9)},
    {CLI_OPT("requests-out", "FILE", "one JSON line per request: status, usage, timings",
             NULL),
     CLI_AS_STR(OFF(o.requests_out))},
    {CLI_OPT("plot", "DIR", "TTFT chart (gnuplot) into DIR", NULL),
     CLI_AS_STR(OFF(o.plot_dir))},
    {CLI_OPT("failover", NULL,
             "the URLs are router replicas behind a round-robin\n"
             "balancer: a request whose transfer fails is sent\n"
             "again to the next URL, each URL once at most",
             NULL),
     CLI_AS_FLAG(OFF(o.failover))},
    {CLI_OPT("ranks", "N",
             "engine ranks behind the URLs, for the herding\n"
             "index (engines name theirs in X-wsel-served-by)",
             "the ranks seen"),
     CLI_AS_DOUBLE(OFF(ranks), 1, 64)},
    {CLI_OPT("json", NULL, "the JSON document instead of the table", NULL),
     CLI_AS_FLAG(OFF(o.json))},
    {CLI_OPT("no-progress", NULL, "no progress line on stderr", NULL),
     CLI_AS_CLEAR(OFF(o.progress))},
};

static const cli_option routing_option_table[] = {
    {CLI_OPT("plugin", "NAME|PATH", "route with this policy (seeded by --seed)", NULL),
     CLI_AS_STR(OFF(o.plugin))},
    {CLI_OPT("config", "JSON", "its configuration", "{}"), CLI_AS_STR(OFF(o.config))},
    {CLI_OPT("dp", "N|LIST",
             "ranks of each URL's engine: one size for all, or\n"
             "one per --url; sent as X-data-parallel-rank",
             "1"),
     CLI_AS_U32_LIST(OFF(o.dp), OFF(dp_count), REPLAY_MAX_URLS, 1, 64)},
    {CLI_OPT("kv-events", "LIST",
             "the preceding --url's KV event endpoints, one per\n"
             "rank (tcp://H:P,...): the KV index follows them\n"
             "instead of the routing history",
             NULL),
     CLI_AS_CALL(set_kv_events)},
    {CLI_OPT("block-size", "N", "the engines' KV block, tokens", "64"),
     CLI_AS_DOUBLE(OFF(block_size), 1, 1 << 16)},
};

static const cli_group replay_group = {NULL, CLI_TABLE(replay_option_table), 0};
static const cli_group routing_group = {
    "Routing (docs/real-time.md): the replay routes each request itself through\n"
    "libwsel-router and the policy gets every request's outcome.",
    CLI_TABLE(routing_option_table), 0};
static const cli_group *const replay_groups[] = {&replay_group, &routing_group};

const cli_command replay_command = {
    .name = "wsel replay",
    .usage = "--url URL [--url URL ...] (--trace FILE | --workload NAME) [OPTIONS]",
    .about =
        "Send a Mooncake trace or a generated workload to OpenAI-compatible engines\n"
        "(wsel-engine, vLLM) as streamed /v1/completions with token-id prompts, and\n"
        "report wsel sim's table (or --json keys) measured from the client side;\n"
        "'lost' counts requests that failed (by status below the table).",
    CLI_GROUPS(replay_groups),
};

static void set_defaults(replay_args *a)
{
    memset(a, 0, sizeof(*a));
    a->o.speedup = 1;
    a->o.time_scale = 1;
    a->o.progress = -1;
    a->trace_block_size = 512;
    a->concurrency = 256;
    a->vocab_size = 32000;
    a->block_size = -1;
    a->rate = -1;
    a->requests = -1;
    a->seed = 1;
    a->ranks = -1;
}

/* The input: URLs and exactly one of a trace or a workload. 0 or 2. */
static int check_input(replay_args *a, char *err, size_t err_size)
{
    replay_options *o = &a->o;
    if (o->num_urls == 0 || (!o->trace) == (!a->workload)) {
        snprintf(err, err_size, "give --url and exactly one of --trace or --workload");
        return CLI_USAGE;
    }
    for (uint32_t i = 0; i < o->num_urls; i++)
        if (strncmp(o->urls[i], "http://", 7) != 0 &&
            strncmp(o->urls[i], "https://", 8) != 0) {
            snprintf(err, err_size, "--url %s: expected http://HOST:PORT", o->urls[i]);
            return CLI_USAGE;
        }
    if (a->workload) {
        int kind = sim_workload_kind(a->workload);
        if (kind < 0) {
            snprintf(err, err_size, "--workload %s: unknown", a->workload);
            return CLI_USAGE;
        }
        sim_workload_default(&o->workload, (uint32_t)kind);
        o->workload.seed = (uint64_t)a->seed;
        if (a->rate > 0)
            o->workload.rate = a->rate;
        if (a->requests > 0)
            o->workload.requests = (uint32_t)a->requests;
        o->use_workload = 1;
    }
    if (o->tokenizer && o->prompt_text != REPLAY_PROMPT_WORDS &&
        o->prompt_text != REPLAY_PROMPT_CHAT) {
        snprintf(err, err_size, "--tokenizer needs --prompt words or chat");
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* The routing options hold together. 0 or 2 with a message. */
static int check_routing(replay_args *a, char *err, size_t err_size)
{
    replay_options *o = &a->o;
    int routing_flags = o->config != NULL || a->dp_count > 0 || a->block_size > 0;
    for (uint32_t i = 0; i < o->num_urls; i++)
        routing_flags |= o->kv_events[i] != NULL;
    if (o->plugin != NULL && o->failover) {
        snprintf(err, err_size, "--failover is for router replicas, not with --plugin");
        return CLI_USAGE;
    }
    if (o->plugin == NULL) {
        if (routing_flags) {
            snprintf(err, err_size,
                     "--config, --dp, --kv-events and --block-size need --plugin");
            return CLI_USAGE;
        }
        return CLI_OK;
    }
    if (a->dp_count == 0)
        o->dp[0] = 1;
    if (a->dp_count <= 1)
        for (uint32_t i = 1; i < o->num_urls; i++)
            o->dp[i] = o->dp[0];
    else if (a->dp_count != o->num_urls) {
        snprintf(err, err_size, "--dp lists %u sizes for %u --url", a->dp_count,
                 o->num_urls);
        return CLI_USAGE;
    }
    return CLI_OK;
}

int replay_options_parse(replay_options *o, int argc, char **argv, char *err,
                         size_t err_size)
{
    static replay_args a;
    set_defaults(&a);
    int rc = cli_parse(&replay_command, &a, argc, argv, err, err_size);
    if (rc == CLI_OK)
        rc = check_input(&a, err, err_size);
    if (rc == CLI_OK)
        rc = check_routing(&a, err, err_size);
    if (rc != CLI_OK)
        return rc;
    a.o.trace_block_size = (uint32_t)a.trace_block_size;
    a.o.concurrency = (uint32_t)a.concurrency;
    a.o.vocab_size = (uint32_t)a.vocab_size;
    a.o.block_size = a.block_size > 0 ? (uint32_t)a.block_size : 64;
    a.o.max_requests = a.requests > 0 ? (uint32_t)a.requests : 0;
    a.o.seed = (uint64_t)a.seed;
    a.o.ranks = a.ranks > 0 ? (uint32_t)a.ranks : 0;
    *o = a.o;
    return CLI_OK;
}
