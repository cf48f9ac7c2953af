// SPDX-License-Identifier: Apache-2.0
/*
 * options.c -- `wsel sim` options: one table drives parsing and --help.
 */
#include "options.h"
#include "options_values.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
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

enum kind { K_U32, K_U64, K_DOUBLE, K_FLAG, K_STR, K_SPECIAL };

typedef struct option {
    const char *name;
    const char *arg;
    const char *def;
    const char *help;
    enum kind kind;
    size_t offset; /* into sim_options */
} option;

#define OFF(field) offsetof(sim_options, field)

static const option options[] = {
    {"--trace", "FILE", "(none: built-in workload)",
     "Mooncake JSONL trace; timestamps must not decrease", K_STR, OFF(trace)},
    {"--trace-block-size", "N", "512", "tokens per trace hash id", K_U32,
     OFF(trace_block_size)},
    {"--skip-bad-lines", NULL, "off",
     "count and skip bad trace lines instead of stopping", K_FLAG, OFF(skip_bad_lines)},
    {"--workload", "NAME", "shared-prefix",
     "built-in workload: shared-prefix, chat, agent, conversation", K_SPECIAL, 0},
    {"--requests", "N", "2000", "chat/agent/conversation: number of requests", K_U32,
     OFF(workload.requests)},
    {"--rate", "R", "40", "mean arrivals per second (Poisson)", K_DOUBLE,
     OFF(workload.rate)},
    {"--groups", "G", "64", "shared-prefix: groups", K_U32, OFF(workload.groups)},
    {"--prompts", "P", "16", "shared-prefix: prompts per group", K_U32,
     OFF(workload.prompts)},
    {"--prefix-tokens", "S", "2048", "shared-prefix: shared prefix length", K_U32,
     OFF(workload.prefix_tokens)},
    {"--question-tokens", "Q", "128", "shared-prefix: question length", K_U32,
     OFF(workload.question_tokens)},
    {"--output-tokens", "O", "256", "shared-prefix: output length", K_U32,
     OFF(workload.output_tokens)},
    {"--tools", "N", "4", "agent/conversation: shared tool prompts", K_U32,
     OFF(workload.tools)},
    {"--tool-tokens", "N", "8192", "agent/conversation: tool prompt length", K_U32,
     OFF(workload.tool_tokens)},
    {"--system-tokens", "N", "1024", "conversation: system prompt of every chat", K_U32,
     OFF(workload.system_tokens)},
    {"--agent-share", "F", "0.4", "conversation: share of sessions that are tool agents",
     K_DOUBLE, OFF(workload.agent_share)},
    {"--burst", "B", "8", "conversation: mean requests arriving at one instant (>= 1)",
     K_DOUBLE, OFF(workload.burst)},
    {"--speedup", "X", "1",
     "divide arrival times by X (clock starts at the first request)", K_DOUBLE,
     OFF(router.speedup)},
    {"--jitter-ms", "MS", "0",
     "move each arrival instant later by uniform [0, MS) ms (seeded by --seed)",
     K_SPECIAL, 0},
    {"--workers", "N", DEF_WORKERS, "workers (data-parallel engines)", K_SPECIAL, 0},
    {"--dp", "N|LIST", DEF_DP " (1 when only --workers is given)",
     "ranks per worker: one size for all, or one per worker", K_SPECIAL, 0},
    {"--kv-blocks", "N", "1024; with --trace 16384 (Dynamo mocker's)",
     "KV cache blocks per rank", K_U32, OFF(cluster.kv_blocks)},
    {"--block-size", "N", "64", "router and engine block size, tokens", K_U32,
     OFF(cluster.block_size)},
    {"--max-running", "N", "256", "running sequences per rank", K_U32,
     OFF(cluster.max_running)},
    {"--token-budget", "N", "8192", "batched tokens per rank step", K_U32,
     OFF(cluster.token_budget)},
    {"--cost-model", "NAME", "polynomial", "step time model: polynomial (mocker), linear",
     K_SPECIAL, 0},
    {"--dp-mode", "MODE", "lockstep",
     "ranks of a worker step in lockstep (wide-EP MoE) or independent", K_SPECIAL, 0},
    {"--step-fixed-ms", "MS", "5", "linear: fixed cost per step", K_DOUBLE,
     OFF(cluster.step_fixed_ms)},
    {"--prefill-token-ms", "MS", "0.015", "linear: cost per prefill token", K_DOUBLE,
     OFF(cluster.prefill_token_ms)},
    {"--decode-seq-ms", "MS", "0.1", "linear: cost per decoding sequence", K_DOUBLE,
     OFF(cluster.decode_seq_ms)},
    {"--kv-event-delay-ms", "MS", "0", "KV events reach the router this late", K_SPECIAL,
     0},
    {"--overlap-weight", "W", "1.0", "overlap_score_weight in every request", K_DOUBLE,
     OFF(router.overlap_weight)},
    {"--temperature", "T", "0.0", "temperature in every request", K_DOUBLE,
     OFF(router.temperature)},
    {"--affinity-blocks", "K", "4", "affinity key = hash of block min(K, n)", K_U32,
     OFF(router.affinity_blocks)},
    {"--busy-decode-blocks", "FRAC", "off",
     "Dynamo busy threshold: active KV blocks / capacity above FRAC (0..1)", K_DOUBLE,
     OFF(router.busy_decode_blocks)},
    {"--busy-prefill-tokens", "N", "off",
     "Dynamo busy threshold: prefill tokens queued or running above N", K_U64,
     OFF(router.busy_prefill_tokens)},
    {"--plugin", "NAME|PATH", "(every bundled policy)", "policy to compare; repeatable",
     K_SPECIAL, 0},
    {"--config", "JSON", "{}", "configuration of the preceding --plugin", K_SPECIAL, 0},
    {"--switch-at", "S:NAME|PATH", "(none)",
     "switch policy at S simulated seconds; repeatable; --config may follow", K_SPECIAL,
     0},
    {"--seed", "N", "1", "seed of the workload and of every host", K_U64, OFF(seed)},
    {"--isolated", NULL, "off",
     "run every policy in its own wsel-isolated-helper process (docs/isolated.md)",
     K_FLAG, OFF(isolated)},
    {"--isolated-deadline-us", "US", "5000",
     "isolated select deadline; a late answer falls back, the helper is kept", K_U32,
     OFF(isolated_deadline_us)},
    {"--json", NULL, "off", "print JSON instead of the table", K_FLAG, OFF(json)},
    {"--no-timing", NULL, "off", "print select_ns as 0 (byte-identical JSON)", K_SPECIAL,
     0},
    {"--analyze", NULL, "off", "statistics of the input alone, no routing", K_FLAG,
     OFF(analyze)},
    {"--explain", "N", "0 (off)",
     "explain N requests sampled over the run: the rows that mattered, why the "
     "answer won",
     K_U32, OFF(explain)},
    {"--plot", "DIR", "(none)", "write PNG charts to DIR (needs gnuplot)", K_STR,
     OFF(plot_dir)},
    {"--no-progress", NULL, "auto", "no progress line on stderr", K_SPECIAL, 0},
    {"--help", NULL, NULL, "print this help", K_FLAG, OFF(help)},
};
#define NUM_OPTIONS (sizeof(options) / sizeof(options[0]))

/*
 * The documented range of every numeric option (--help prints it). A value
 * outside is refused naming the option and the range, before it can
 * overflow a nanosecond clock (times), wrap a 32-bit token count, collide
 * with a "not set" marker (--kv-blocks) or size an allocation past reason.
 * Times stay below 1e9 s = 1e18 ns, inside int64 nanoseconds.
 */
typedef struct option_range {
    const char *name;
    double min, max;
} option_range;

static const option_range ranges[] = {
    {"--trace-block-size", 1, 1u << 20},
    {"--requests", 1, 1e8},
    {"--rate", 1e-3, 1e9},
    {"--groups", 1, 1e6},
    {"--prompts", 1, 1e6},
    {"--prefix-tokens", 0, 1u << 24},
    {"--question-tokens", 0, 1u << 24},
    {"--output-tokens", 0, 1u << 24},
    {"--tools", 0, 1e4},
    {"--tool-tokens", 0, 1u << 24},
    {"--system-tokens", 0, 1u << 24},
    {"--agent-share", 0, 1},
    {"--burst", 1, 1e6},
    {"--speedup", 1e-3, 1e6},
    {"--jitter-ms", 0, 1e9},
    {"--kv-blocks", 1, 1u << 28},
    {"--block-size", 1, 1u << 16},
    {"--max-running", 1, 1u << 20},
    {"--token-budget", 1, 1u << 24},
    {"--step-fixed-ms", 0, 1e6},
    {"--prefill-token-ms", 0, 1e6},
    {"--decode-seq-ms", 0, 1e6},
    {"--kv-event-delay-ms", 0, 1e9},
    {"--overlap-weight", 0, 1e6},
    {"--temperature", 0, 1e6},
    {"--affinity-blocks", 0, 1u << 20},
    {"--busy-decode-blocks", 0, 1},
    {"--busy-prefill-tokens", 0, 1e15},
    {"--explain", 0, 10000},
};
#define NUM_RANGES (sizeof(ranges) / sizeof(ranges[0]))

/* Most KV blocks over all ranks (--kv-blocks x ranks): the caches are
 * allocated up front. */
#define SIM_MAX_TOTAL_KV_BLOCKS (1u << 27)

static const option_range *range_of(const char *name)
{
    for (size_t i = 0; i < NUM_RANGES; i++)
        if (strcmp(ranges[i].name, name) == 0)
            return &ranges[i];
    return NULL;
}

/* 2 with a message naming the option and its range, or 0. */
static int check_range(const char *name, const char *val, char *err, size_t err_size)
{
    const option_range *r = range_of(name);
    if (r == NULL)
        return 0;
    char *end;
    double v = strtod(val, &end);
    if (*end != '\0' || !(v >= r->min && v <= r->max)) {
        snprintf(err, err_size, "%s '%s': out of range [%.17g, %.17g]", name, val, r->min,
                 r->max);
        return 2;
    }
    return 0;
}

void sim_options_usage(FILE *out)
{
    fprintf(out,
            "usage: wsel sim [OPTIONS]\n\n"
            "Replay a trace (or a built-in workload) through a simulated cluster of\n"
            "data-parallel workers once per policy, and compare the policies.\n\n");
    for (size_t i = 0; i < NUM_OPTIONS; i++) {
        char left[64];
        snprintf(left, sizeof(left), "%s%s%s", options[i].name, options[i].arg ? " " : "",
                 options[i].arg ? options[i].arg : "");
        fprintf(out, "  %-28s %s", left, options[i].help);
        if (options[i].def)
            fprintf(out, " [default: %s]", options[i].def);
        const option_range *r = range_of(options[i].name);
        if (r != NULL)
            fprintf(out, " [range: %g..%g]", r->min, r->max);
        fputc('\n', out);
    }
    fprintf(out, "\nExit status: 0 success, 1 failure, 2 bad usage. See docs/sim.md.\n");
}

static void set_defaults(sim_options *o)
{
    memset(o, 0, sizeof(*o));
    sim_cluster_default(&o->cluster);
    o->cluster.kv_blocks = UINT32_MAX; /* chosen in check() */
    sim_workload_default(&o->workload, SIM_WORKLOAD_SHARED_PREFIX);
    o->router.overlap_weight = 1.0;
    o->router.temperature = 0.0;
    o->router.affinity_blocks = 4;
    o->router.speedup = 1.0;
    o->trace_block_size = 512;
    o->seed = 1;
    o->timing = 1;
    o->progress = -1;
}

/* Options whose value needs more than a store. */
static int parse_special(sim_options *o, const char *name, const char *val,
                         uint32_t *workers, uint32_t *dp_count, int *last, char *err,
                         size_t err_size)
{
    uint64_t u;
    double d;
    if (strcmp(name, "--workload") == 0) {
        int k = sim_workload_kind(val);
        if (k < 0) {
            snprintf(
                err, err_size,
                "--workload '%s': expected shared-prefix, chat, agent or conversation",
                val);
            return 2;
        }
        o->workload.kind = (uint32_t)k;
    } else if (strcmp(name, "--workers") == 0) {
        if (!sim_parse_u64(val, &u) || u == 0 || u > SIM_MAX_RANKS) {
            snprintf(err, err_size, "--workers '%s': expected 1..%d", val, SIM_MAX_RANKS);
            return 2;
        }
        *workers = (uint32_t)u;
    } else if (strcmp(name, "--dp") == 0) {
        return sim_parse_dp(o, val, dp_count, err, err_size);
    } else if (strcmp(name, "--cost-model") == 0) {
        if (strcmp(val, "polynomial") != 0 && strcmp(val, "linear") != 0) {
            snprintf(err, err_size, "--cost-model '%s': expected polynomial or linear",
                     val);
            return 2;
        }
        o->cluster.cost_model =
            strcmp(val, "linear") == 0 ? SIM_COST_LINEAR : SIM_COST_POLYNOMIAL;
    } else if (strcmp(name, "--dp-mode") == 0) {
        if (strcmp(val, "lockstep") != 0 && strcmp(val, "independent") != 0) {
            snprintf(err, err_size, "--dp-mode '%s': expected lockstep or independent",
                     val);
            return 2;
        }
        o->cluster.dp_mode =
            strcmp(val, "independent") == 0 ? SIM_DP_INDEPENDENT : SIM_DP_LOCKSTEP;
    } else if (strcmp(name, "--jitter-ms") == 0) {
        if (!sim_parse_double(val, &d)) {
            snprintf(err, err_size, "--jitter-ms '%s': expected ms >= 0", val);
            return 2;
        }
        o->router.jitter_ns = (uint64_t)llround(d * 1e6);
    } else if (strcmp(name, "--kv-event-delay-ms") == 0) {
        if (!sim_parse_double(val, &d)) {
            snprintf(err, err_size, "--kv-event-delay-ms '%s': expected ms >= 0", val);
            return 2;
        }
        o->router.kv_event_delay_ns = (uint64_t)llround(d * 1e6);
    } else if (strcmp(name, "--plugin") == 0) {
        if (o->num_plugins == SIM_MAX_PLUGINS) {
            snprintf(err, err_size, "--plugin: at most %d plugins", SIM_MAX_PLUGINS);
            return 2;
        }
        o->plugins[o->num_plugins++] = (sim_plugin_spec){val, NULL};
        *last = 1;
    } else if (strcmp(name, "--switch-at") == 0) {
        *last = 2;
        return sim_parse_switch(o, val, err, err_size);
    } else if (strcmp(name, "--config") == 0) {
        /* Only whitespace means the defaults, as for the host; stored as ""
         * so the JSON report never pastes it as a value. */
        if (val[strspn(val, " \t\r\n")] == '\0')
            val = "";
        if (*last == 1 && !o->plugins[o->num_plugins - 1].config)
            o->plugins[o->num_plugins - 1].config = val;
        else if (*last == 2 && !o->switches[o->num_switches - 1].config)
            o->switches[o->num_switches - 1].config = val;
        else {
            snprintf(err, err_size, "--config '%s' must follow a --plugin or --switch-at",
                     val);
            return 2;
        }
    }
    return 0;
}

static int store(sim_options *o, const option *opt, const char *val, char *err,
                 size_t err_size)
{
    char *field = (char *)o + opt->offset;
    uint64_t u;
    double d;
    switch (opt->kind) {
    case K_U32:
        if (!sim_parse_u64(val, &u) || u > UINT32_MAX) {
            snprintf(err, err_size, "%s '%s': expected a non-negative integer", opt->name,
                     val);
            return 2;
        }
        *(uint32_t *)(void *)field = (uint32_t)u;
        return 0;
    case K_U64:
        if (!sim_parse_u64(val, &u)) {
            snprintf(err, err_size, "%s '%s': expected a non-negative integer", opt->name,
                     val);
            return 2;
        }
        *(uint64_t *)(void *)field = u;
        return 0;
    case K_DOUBLE:
        if (!sim_parse_double(val, &d)) {
            snprintf(err, err_size, "%s '%s': expected a number >= 0", opt->name, val);
            return 2;
        }
        *(double *)(void *)field = d;
        return 0;
    case K_STR:
        *(const char **)(void *)field = val;
        return 0;
    default:
        return 0;
    }
}

static int check(sim_options *o, uint32_t workers, uint32_t dp_count, char *err,
                 size_t err_size)
{
    if (dp_count == 0 && workers == 0)
        sim_parse_dp(o, DEF_DP, &dp_count, err, err_size); /* the default cluster */
    else if (dp_count == 0) {
        o->cluster.dp[0] = 1; /* --workers alone: one rank each */
        dp_count = 1;
    }
    if (workers == 0)
        workers = dp_count;
    if (dp_count == 1)
        for (uint32_t w = 1; w < workers; w++)
            o->cluster.dp[w] = o->cluster.dp[0];
    else if (dp_count != workers) {
        snprintf(err, err_size, "--dp lists %u sizes but --workers is %u", dp_count,
                 workers);
        return 2;
    }
    o->cluster.num_workers = workers;
    if (o->cluster.kv_blocks == UINT32_MAX)
        o->cluster.kv_blocks = o->trace ? DEF_KV_BLOCKS_TRACE : DEF_KV_BLOCKS;
    uint32_t ranks = sim_cluster_ranks(&o->cluster);
    if (ranks > SIM_MAX_RANKS) {
        snprintf(err, err_size, "--workers x --dp gives %u ranks; at most %d", ranks,
                 SIM_MAX_RANKS);
        return 2;
    }
    const struct {
        uint32_t v;
        const char *name;
    } positive[] = {{o->cluster.kv_blocks, "--kv-blocks"},
                    {o->cluster.block_size, "--block-size"},
                    {o->cluster.max_running, "--max-running"},
                    {o->cluster.token_budget, "--token-budget"},
                    {o->trace_block_size, "--trace-block-size"}};
    for (size_t i = 0; i < sizeof(positive) / sizeof(positive[0]); i++) {
        if (positive[i].v == 0) {
            snprintf(err, err_size, "%s must be at least 1", positive[i].name);
            return 2;
        }
    }
    if ((uint64_t)o->cluster.kv_blocks * ranks > SIM_MAX_TOTAL_KV_BLOCKS) {
        snprintf(err, err_size,
                 "--kv-blocks %u x %u ranks = %llu KV blocks, over the limit of %u",
                 o->cluster.kv_blocks, ranks,
                 (unsigned long long)o->cluster.kv_blocks * ranks,
                 SIM_MAX_TOTAL_KV_BLOCKS);
        return 2;
    }
    if (o->cluster.cost_model == SIM_COST_LINEAR && o->cluster.step_fixed_ms == 0 &&
        o->cluster.prefill_token_ms == 0 && o->cluster.decode_seq_ms == 0) {
        snprintf(err, err_size,
                 "--cost-model linear with --step-fixed-ms, --prefill-token-ms and "
                 "--decode-seq-ms all 0: a step would take no time; set one above 0");
        return 2;
    }
    if (o->workload.rate <= 0) {
        snprintf(err, err_size, "--rate must be above 0");
        return 2;
    }
    if (!(o->router.speedup > 0)) {
        snprintf(err, err_size, "--speedup must be above 0");
        return 2;
    }
    if (o->router.busy_decode_blocks > 1) {
        snprintf(err, err_size, "--busy-decode-blocks %g: expected a fraction 0..1",
                 o->router.busy_decode_blocks);
        return 2;
    }
    if (o->workload.agent_share > 1) {
        snprintf(err, err_size, "--agent-share %g: expected a fraction 0..1",
                 o->workload.agent_share);
        return 2;
    }
    if (o->workload.burst < 1) {
        snprintf(err, err_size, "--burst %g: expected at least 1", o->workload.burst);
        return 2;
    }
    o->workload.seed = o->seed;
    o->router.jitter_seed = o->seed;
    return 0;
}

static int parse_into(sim_options *o, int argc, char **argv, char *err, size_t err_size)
{
    set_defaults(o);
    uint32_t workers = 0, dp_count = 0;
    int last = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const option *opt = NULL;
        for (size_t k = 0; k < NUM_OPTIONS && !opt; k++)
            if (strcmp(arg, options[k].name) == 0)
                opt = &options[k];
        if (!opt) {
            snprintf(err, err_size, "unknown option '%s' (see wsel sim --help)", arg);
            return 2;
        }
        if (strcmp(arg, "--no-timing") == 0) {
            o->timing = 0;
            continue;
        }
        if (strcmp(arg, "--no-progress") == 0) {
            o->progress = 0;
            continue;
        }
        if (opt->kind == K_FLAG) {
            *(int *)(void *)((char *)o + opt->offset) = 1;
            if (o->help)
                return 0;
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, err_size, "%s needs a value (%s)", arg, opt->arg);
            return 2;
        }
        const char *val = argv[++i];
        int rc = opt->kind == K_SPECIAL ? parse_special(o, arg, val, &workers, &dp_count,
                                                        &last, err, err_size)
                                        : store(o, opt, val, err, err_size);
        if (rc == 0)
            rc = check_range(arg, val, err, err_size);
        if (rc != 0)
            return rc;
        if (strcmp(arg, "--config") != 0 && strcmp(arg, "--plugin") != 0 &&
            strcmp(arg, "--switch-at") != 0)
            last = 0;
    }
    return check(o, workers, dp_count, err, err_size);
}

int sim_options_parse(sim_options *o, int argc, char **argv, char *err, size_t err_size)
{
    sim_options parsed;
    int rc = parse_into(&parsed, argc, argv, err, err_size);
    if (rc == 0)
        *o = parsed;
    return rc;
}
