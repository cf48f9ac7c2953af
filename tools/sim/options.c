// SPDX-License-Identifier: Apache-2.0
/*
 * options.c -- `wsel sim` options: one table drives parsing and --help
 * (cli/cli.h); the checks of options that hold together.
 */
#include "options.h"
#include "options_values.h"

#include <math.h>
#include <string.h>

/* The default run: one 8-rank worker beside eight 1-rank workers, so
 * rank-level scoring sees 16 candidates of which 8 share one lockstep
 * engine; 1,024 KV blocks per rank (64 Ki tokens) so the 64 shared 2 Ki
 * prefixes (128 Ki tokens) do not fit on one rank and routing decides the
 * hit rate. See docs/sim.md. */
#define DEF_WORKERS   "9"
#define DEF_DP        "8,1,1,1,1,1,1,1,1"
#define DEF_KV_BLOCKS 1024
/* With --trace: Dynamo mocker's 16,384 (real traces carry prompts of 100k
 * tokens and more, over 1,024 blocks of 64). */
#define DEF_KV_BLOCKS_TRACE 16384

#define OFF(field) offsetof(sim_options, field)

const char *const sim_plugin_set_names[] = {"default", "peers", "all", NULL};

/*
 * Every numeric option has a documented range (--help prints it). A value
 * outside is refused naming the option and the range, before it can
 * overflow a nanosecond clock (times), wrap a 32-bit token count, collide
 * with a "not set" marker (--kv-blocks) or size an allocation past reason.
 * Times stay below 1e9 s = 1e18 ns, inside int64 nanoseconds.
 */
static const cli_option sim_option_table[] = {
    {CLI_OPT("trace", "FILE", "Mooncake JSONL trace; timestamps must not decrease",
             "(none: built-in workload)"),
     CLI_AS_STR(OFF(trace))},
    {CLI_OPT("trace-block-size", "N", "tokens per trace hash id", "512"),
     CLI_AS_U32(OFF(trace_block_size), 1, 1u << 20)},
    {CLI_OPT("skip-bad-lines", NULL, "count and skip bad trace lines instead of stopping",
             "off"),
     CLI_AS_FLAG(OFF(skip_bad_lines))},
    {CLI_OPT("workload", "NAME",
             "built-in workload: shared-prefix, chat, agent, conversation",
             "shared-prefix"),
     CLI_AS_CALL(sim_set_workload)},
    {CLI_OPT("requests", "N", "chat/agent/conversation: number of requests", "2000"),
     CLI_AS_U32(OFF(workload.requests), 1, 1e8)},
    {CLI_OPT("rate", "R", "mean arrivals per second (Poisson)", "40"),
     CLI_AS_DOUBLE(OFF(workload.rate), 1e-3, 1e9)},
    {CLI_OPT("groups", "G", "shared-prefix: groups", "64"),
     CLI_AS_U32(OFF(workload.groups), 1, 1e6)},
    {CLI_OPT("prompts", "P", "shared-prefix: prompts per group", "16"),
     CLI_AS_U32(OFF(workload.prompts), 1, 1e6)},
    {CLI_OPT("prefix-tokens", "S", "shared-prefix: shared prefix length", "2048"),
     CLI_AS_U32(OFF(workload.prefix_tokens), 0, 1u << 24)},
    {CLI_OPT("question-tokens", "Q", "shared-prefix: question length", "128"),
     CLI_AS_U32(OFF(workload.question_tokens), 0, 1u << 24)},
    {CLI_OPT("output-tokens", "O", "shared-prefix: output length", "256"),
     CLI_AS_U32(OFF(workload.output_tokens), 0, 1u << 24)},
    {CLI_OPT("tools", "N", "agent/conversation: shared tool prompts", "4"),
     CLI_AS_U32(OFF(workload.tools), 0, 1e4)},
    {CLI_OPT("tool-tokens", "N", "agent/conversation: tool prompt length", "8192"),
     CLI_AS_U32(OFF(workload.tool_tokens), 0, 1u << 24)},
    {CLI_OPT("system-tokens", "N", "conversation: system prompt of every chat", "1024"),
     CLI_AS_U32(OFF(workload.system_tokens), 0, 1u << 24)},
    {CLI_OPT("agent-share", "F", "conversation: share of sessions that are tool agents",
             "0.4"),
     CLI_AS_DOUBLE(OFF(workload.agent_share), 0, 1)},
    {CLI_OPT("burst", "B", "conversation: mean requests arriving at one instant (>= 1)",
             "8"),
     CLI_AS_DOUBLE(OFF(workload.burst), 1, 1e6)},
    {CLI_OPT("speedup", "X",
             "divide arrival times by X (clock starts at the first request)", "1"),
     CLI_AS_DOUBLE(OFF(router.speedup), 1e-3, 1e6)},
    {CLI_OPT("jitter-ms", "MS",
             "move each arrival instant later by uniform [0, MS) ms (seeded by --seed)",
             "0"),
     CLI_AS_DOUBLE(OFF(jitter_ms), 0, 1e9)},
    {CLI_OPT("workers", "N", "workers (data-parallel engines)", DEF_WORKERS),
     CLI_AS_U32(OFF(workers_given), 1, SIM_MAX_RANKS)},
    {CLI_OPT("dp", "N|LIST", "ranks per worker: one size for all, or one per worker",
             DEF_DP " (1 when only --workers is given)"),
     CLI_AS_U32_LIST(OFF(cluster.dp), OFF(dp_given), SIM_MAX_RANKS, 1, SIM_MAX_RANKS)},
    {CLI_OPT("kv-blocks", "N", "KV cache blocks per rank",
             "1024; with --trace 16384 (Dynamo mocker's)"),
     CLI_AS_U32(OFF(cluster.kv_blocks), 1, 1u << 28)},
    {CLI_OPT("block-size", "N", "router and engine block size, tokens", "64"),
     CLI_AS_U32(OFF(cluster.block_size), 1, 1u << 16)},
    {CLI_OPT("max-running", "N", "running sequences per rank", "256"),
     CLI_AS_U32(OFF(cluster.max_running), 1, 1u << 20)},
    {CLI_OPT("token-budget", "N", "batched tokens per rank step", "8192"),
     CLI_AS_U32(OFF(cluster.token_budget), 1, 1u << 24)},
    {CLI_OPT("cost-model", "NAME", "step time model: polynomial (mocker), linear",
             "polynomial"),
     CLI_AS_CHOICE(OFF(cluster.cost_model), sim_cost_model_names)},
    {CLI_OPT("dp-mode", "MODE",
             "ranks of a worker step in lockstep (wide-EP MoE) or independent",
             "lockstep"),
     CLI_AS_CHOICE(OFF(cluster.dp_mode), sim_dp_mode_names)},
    {CLI_OPT("step-fixed-ms", "MS", "linear: fixed cost per step", "5"),
     CLI_AS_DOUBLE(OFF(cluster.step_fixed_ms), 0, 1e6)},
    {CLI_OPT("prefill-token-ms", "MS", "linear: cost per prefill token", "0.015"),
     CLI_AS_DOUBLE(OFF(cluster.prefill_token_ms), 0, 1e6)},
    {CLI_OPT("decode-seq-ms", "MS", "linear: cost per decoding sequence", "0.1"),
     CLI_AS_DOUBLE(OFF(cluster.decode_seq_ms), 0, 1e6)},
    {CLI_OPT("kv-event-delay-ms", "MS", "KV events reach the router this late", "0"),
     CLI_AS_DOUBLE(OFF(kv_event_delay_ms), 0, 1e9)},
    {CLI_OPT("overlap-weight", "W", "overlap_score_weight in every request", "1.0"),
     CLI_AS_DOUBLE(OFF(router.overlap_weight), 0, 1e6)},
    {CLI_OPT("temperature", "T", "temperature in every request", "0.0"),
     CLI_AS_DOUBLE(OFF(router.temperature), 0, 1e6)},
    {CLI_OPT("affinity-blocks", "K", "affinity key = hash of block min(K, n)", "4"),
     CLI_AS_U32(OFF(router.affinity_blocks), 0, 1u << 20)},
    {CLI_OPT("busy-decode-blocks", "FRAC",
             "Dynamo busy threshold: active KV blocks / capacity above FRAC (0..1)",
             "off"),
     CLI_AS_DOUBLE(OFF(router.busy_decode_blocks), 0, 1)},
    {CLI_OPT("busy-prefill-tokens", "N",
             "Dynamo busy threshold: prefill tokens queued or running above N", "off"),
     CLI_AS_U64(OFF(router.busy_prefill_tokens), 0, 1e15)},
    {CLI_OPT("replicas", "R",
             "router replicas, each with its own policy instance and load view", "1"),
     CLI_AS_U32(OFF(router.replicas), 1, SIM_MAX_REPLICAS)},
    {CLI_OPT("replica-spread", "HOW",
             "how arrivals reach the replicas: round-robin, random (seeded by --seed)",
             "round-robin"),
     CLI_AS_CHOICE(OFF(router.spread), sim_spread_names)},
    {CLI_OPT("sync", "MODE",
             "replicas see each other's load changes: lag (--sync-lag-ms late), none",
             "lag"),
     CLI_AS_CHOICE(OFF(router.sync), sim_sync_names)},
    {CLI_OPT("sync-lag-ms", "MS", "with --sync lag: how late a replica sees the others'",
             "0"),
     CLI_AS_DOUBLE(OFF(sync_lag_ms), 0, 1e9)},
    {CLI_OPT("sync-echo-ms", "MS",
             "with --sync lag: for MS after each route, its replica counts it once more\n"
             "per other replica (libwsel-router's echo; 0 = off)",
             "0"),
     CLI_AS_DOUBLE(OFF(sync_echo_ms), 0, 1e9)},
    {CLI_OPT("plugin", "NAME|PATH", "policy to compare; repeatable",
             "(the --plugins set)"),
     CLI_AS_CALL(sim_set_plugin)},
    {CLI_OPT("config", "JSON", "configuration of the preceding --plugin", "{}"),
     CLI_AS_CALL(sim_set_config)},
    {CLI_OPT("plugins", "SET",
             "bundled policies run without --plugin: default (softmax, baselines,\n"
             "wsel's), peers (softmax, the peer ports), all",
             "default"),
     CLI_AS_CHOICE(OFF(plugin_set), sim_plugin_set_names)},
    {CLI_OPT("switch-at", "S:NAME|PATH",
             "switch policy at S simulated seconds; repeatable; --config may follow",
             "(none)"),
     CLI_AS_CALL(sim_set_switch)},
    {CLI_OPT("seed", "N", "seed of the workload and of every host", "1"),
     CLI_AS_U64(OFF(seed), 0, 0)},
    {CLI_OPT(
         "isolated", NULL,
         "run every policy in its own wsel-isolated-helper process (docs/isolated.md)",
         "off"),
     CLI_AS_FLAG(OFF(isolated))},
    {CLI_OPT("isolated-deadline-us", "US",
             "isolated select deadline; a late answer falls back, the helper is kept",
             "5000"),
     CLI_AS_U32(OFF(isolated_deadline_us), 0, 0)},
    {CLI_OPT("json", NULL, "print JSON instead of the table", "off"),
     CLI_AS_FLAG(OFF(json))},
    {CLI_OPT("no-timing", NULL, "print select_ns as 0 (byte-identical JSON)", "off"),
     CLI_AS_CLEAR(OFF(timing))},
    {CLI_OPT("analyze", NULL, "statistics of the input alone, no routing", "off"),
     CLI_AS_FLAG(OFF(analyze))},
    {CLI_OPT("explain", "N",
             "explain N requests sampled over the run: the rows that mattered, why the "
             "answer won",
             "0 (off)"),
     CLI_AS_U32(OFF(explain), 0, 10000)},
    {CLI_OPT("plot", "DIR", "write PNG charts to DIR (needs gnuplot)", "(none)"),
     CLI_AS_STR(OFF(plot_dir))},
    {CLI_OPT("no-progress", NULL, "no progress line on stderr", "auto"),
     CLI_AS_CLEAR(OFF(progress))},
};

const cli_group sim_option_group = {NULL, CLI_TABLE(sim_option_table), 0};
static const cli_group *const sim_groups[] = {&sim_option_group};

static const cli_command sim_command = {
    .name = "wsel sim",
    .usage = "[OPTIONS]",
    .about = "Replay a trace (or a built-in workload) through a simulated cluster of\n"
             "data-parallel workers once per policy, and compare the policies.",
    CLI_GROUPS(sim_groups),
    .footer = "Exit status: 0 success, 1 failure, 2 bad usage. See docs/sim.md.",
};

/* Most KV blocks over all ranks (--kv-blocks x ranks): the caches are
 * allocated up front. */
#define SIM_MAX_TOTAL_KV_BLOCKS (1u << 27)

void sim_options_usage(FILE *out)
{
    cli_usage(out, &sim_command);
}

void sim_options_defaults(sim_options *o)
{
    memset(o, 0, sizeof(*o));
    sim_cluster_default(&o->cluster);
    o->cluster.kv_blocks = UINT32_MAX; /* chosen in sim_options_check() */
    sim_workload_default(&o->workload, SIM_WORKLOAD_SHARED_PREFIX);
    o->router.overlap_weight = 1.0;
    o->router.temperature = 0.0;
    o->router.affinity_blocks = 4;
    o->router.speedup = 1.0;
    o->router.replicas = 1;
    o->trace_block_size = 512;
    o->seed = 1;
    o->timing = 1;
    o->progress = -1;
    o->plugin_set = SIM_PLUGINS_UNSET;
}

/* The cluster's shape from --workers and --dp. 0 or 2 with a message. */
static int check_shape(sim_options *o, char *err, size_t err_size)
{
    uint32_t workers = o->workers_given;
    if (o->dp_given == 0 && workers == 0) {
        /* the default cluster */
        int n =
            cli_parse_u32_list(DEF_DP, o->cluster.dp, SIM_MAX_RANKS, 1, SIM_MAX_RANKS);
        o->dp_given = (uint32_t)n;
    } else if (o->dp_given == 0) {
        o->cluster.dp[0] = 1; /* --workers alone: one rank each */
        o->dp_given = 1;
    }
    if (workers == 0)
        workers = o->dp_given;
    if (o->dp_given == 1)
        for (uint32_t w = 1; w < workers; w++)
            o->cluster.dp[w] = o->cluster.dp[0];
    else if (o->dp_given != workers) {
        snprintf(err, err_size, "--dp lists %u sizes but --workers is %u", o->dp_given,
                 workers);
        return CLI_USAGE;
    }
    o->cluster.num_workers = workers;
    uint32_t ranks = sim_cluster_ranks(&o->cluster);
    if (ranks > SIM_MAX_RANKS) {
        snprintf(err, err_size, "--workers x --dp gives %u ranks; at most %d", ranks,
                 SIM_MAX_RANKS);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* The replica options hold together. 0 or 2 with a message. */
static int check_replicas(sim_options *o, char *err, size_t err_size)
{
    if (o->router.sync == SIM_SYNC_NONE && (o->sync_lag_ms > 0 || o->sync_echo_ms > 0)) {
        snprintf(err, err_size, "--sync-%s-ms needs --sync lag, not --sync none",
                 o->sync_lag_ms > 0 ? "lag" : "echo");
        return CLI_USAGE;
    }
    if (o->explain && o->router.replicas > 1) {
        snprintf(err, err_size, "--explain follows one router; give --replicas 1");
        return CLI_USAGE;
    }
    o->router.sync_lag_ns = (uint64_t)llround(o->sync_lag_ms * 1e6);
    o->router.echo_ns = (uint64_t)llround(o->sync_echo_ms * 1e6);
    o->router.spread_seed = o->seed;
    return CLI_OK;
}

/* What the table's ranges cannot say: options that hold together. */
int sim_options_check(sim_options *o, char *err, size_t err_size)
{
    if (check_shape(o, err, err_size) != CLI_OK)
        return CLI_USAGE;
    if (o->cluster.kv_blocks == UINT32_MAX)
        o->cluster.kv_blocks = o->trace ? DEF_KV_BLOCKS_TRACE : DEF_KV_BLOCKS;
    uint32_t ranks = sim_cluster_ranks(&o->cluster);
    if ((uint64_t)o->cluster.kv_blocks * ranks > SIM_MAX_TOTAL_KV_BLOCKS) {
        snprintf(err, err_size,
                 "--kv-blocks %u x %u ranks = %llu KV blocks, over the limit of %u",
                 o->cluster.kv_blocks, ranks,
                 (unsigned long long)o->cluster.kv_blocks * ranks,
                 SIM_MAX_TOTAL_KV_BLOCKS);
        return CLI_USAGE;
    }
    if (o->cluster.cost_model == SIM_COST_LINEAR && o->cluster.step_fixed_ms == 0 &&
        o->cluster.prefill_token_ms == 0 && o->cluster.decode_seq_ms == 0) {
        snprintf(err, err_size,
                 "--cost-model linear with --step-fixed-ms, --prefill-token-ms and "
                 "--decode-seq-ms all 0: a step would take no time; set one above 0");
        return CLI_USAGE;
    }
    if (o->plugin_set != SIM_PLUGINS_UNSET && o->num_plugins) {
        snprintf(err, err_size, "--plugins and --plugin exclude each other");
        return CLI_USAGE;
    }
    if (o->plugin_set == SIM_PLUGINS_UNSET)
        o->plugin_set = SIM_PLUGINS_DEFAULT;
    o->router.jitter_ns = (uint64_t)llround(o->jitter_ms * 1e6);
    o->router.kv_event_delay_ns = (uint64_t)llround(o->kv_event_delay_ms * 1e6);
    o->workload.seed = o->seed;
    o->router.jitter_seed = o->seed;
    return check_replicas(o, err, err_size);
}

int sim_options_parse(sim_options *o, int argc, char **argv, char *err, size_t err_size)
{
    sim_options parsed;
    sim_options_defaults(&parsed);
    int rc = cli_parse(&sim_command, &parsed, argc, argv, err, err_size);
    if (rc == CLI_HELP) {
        parsed.help = 1;
        rc = CLI_OK;
    } else if (rc == CLI_OK) {
        rc = sim_options_check(&parsed, err, err_size);
    }
    if (rc == CLI_OK)
        *o = parsed;
    return rc;
}
