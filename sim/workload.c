// SPDX-License-Identifier: Apache-2.0
/*
 * workload.c -- the built-in seeded workloads (shared-prefix, chat, agent,
 * conversation).
 *
 * Each workload first draws its whole arrival schedule (one small record
 * per request, sorted by time), then builds each request's block hashes on
 * demand, so memory stays at a few tens of bytes per request. Everything
 * derives from the seed: the same seed gives the same stream.
 */
#include "source.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "u64map.h"

/* Domain tags so hashes of different block kinds never meet. */
#define TAG_PREFIX   0x5052454649585f31ull
#define TAG_QUESTION 0x51554553543f5f32ull
#define TAG_CHAT     0x434841545f5f5f33ull
#define TAG_TOOL     0x544f4f4c5f5f5f34ull
#define TAG_CONTEXT  0x434f4e544558545full
#define TAG_SYSTEM   0x53595354454d5f35ull
#define TAG_SESSION  0x53455353494f4e36ull
#define TAG_AGENT    0x4147454e545f5f37ull

typedef struct item {
    int64_t time_ns;
    uint32_t a; /* group, session or tool */
    uint32_t b; /* prompt, turn or 0 */
    uint32_t isl;
    uint32_t osl;
    uint32_t c; /* conversation: 0 chat, 1 + tool group for agents */
} item;

struct sim_workload {
    sim_workload_config cfg;
    uint32_t block_size;
    item *items;
    uint32_t num_items;
    uint32_t next;
    uint64_t *blocks;
    uint32_t block_capacity;
};

static const char *const kind_names[] = {"shared-prefix", "chat", "agent",
                                         "conversation"};
#define NUM_KINDS 4

int sim_workload_kind(const char *name)
{
    for (int i = 0; i < NUM_KINDS; i++)
        if (strcmp(name, kind_names[i]) == 0)
            return i;
    return -1;
}

const char *sim_workload_name(uint32_t kind)
{
    return kind < NUM_KINDS ? kind_names[kind] : "unknown";
}

void sim_workload_default(sim_workload_config *w, uint32_t kind)
{
    memset(w, 0, sizeof(*w));
    w->kind = kind;
    w->seed = 1;
    w->rate = 40.0;
    w->requests = 2000;
    w->groups = 64;
    w->prompts = 16;
    w->prefix_tokens = 2048;
    w->question_tokens = 128;
    w->output_tokens = 256;
    w->tools = 4;
    w->tool_tokens = 8192;
    w->system_tokens = 1024;
    w->agent_share = 0.4;
    w->burst = 8;
}

static uint64_t h3(uint64_t tag, uint64_t a, uint64_t b)
{
    return sim_mix64(sim_mix64(sim_mix64(tag) + a) + b);
}

static int64_t exp_gap_ns(wsel_rng *rng, double rate)
{
    double u = wsel_rng_uniform(rng);
    return (int64_t)llround(-log1p(-u) / rate * 1e9);
}

static int cmp_item(const void *pa, const void *pb)
{
    const item *x = pa, *y = pb;
    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    return (x->b > y->b) - (x->b < y->b);
}

static int32_t plan_shared_prefix(sim_workload *g, wsel_rng *rng)
{
    const sim_workload_config *w = &g->cfg;
    uint64_t n = (uint64_t)w->groups * w->prompts;
    if (n == 0 || n > UINT32_MAX)
        return WSEL_ERANGE;
    g->items = malloc(n * sizeof(*g->items));
    if (!g->items)
        return WSEL_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        g->items[i].a = i / w->prompts;
        g->items[i].b = i % w->prompts;
    }
    for (uint32_t i = (uint32_t)n; i-- > 1;) { /* Fisher-Yates */
        uint32_t j = wsel_rng_below(rng, i + 1);
        item t = g->items[i];
        g->items[i] = g->items[j];
        g->items[j] = t;
    }
    int64_t now = 0;
    for (uint32_t i = 0; i < n; i++) {
        g->items[i].time_ns = now;
        g->items[i].isl = w->prefix_tokens + w->question_tokens;
        g->items[i].osl = w->output_tokens;
        now += exp_gap_ns(rng, w->rate);
    }
    g->num_items = (uint32_t)n;
    return 0;
}

/* Chat: sessions of 2..8 turns; each turn's prompt is the whole transcript
 * so far (first message 256..2047 tokens, answers 64..511, follow-ups
 * 32..511), sent 5 s plus an exponential think time (mean 10 s) after the
 * previous turn; sessions start as a Poisson process. */
static int32_t plan_chat(sim_workload *g, wsel_rng *rng)
{
    const sim_workload_config *w = &g->cfg;
    g->items = malloc((size_t)w->requests * sizeof(*g->items));
    if (!g->items)
        return WSEL_ENOMEM;
    uint32_t n = 0, session = 0;
    int64_t start = 0;
    while (n < w->requests) {
        uint32_t turns = 2 + wsel_rng_below(rng, 7);
        uint32_t isl = 256 + wsel_rng_below(rng, 1792);
        int64_t t = start;
        for (uint32_t turn = 0; turn < turns && n < w->requests; turn++) {
            uint32_t osl = 64 + wsel_rng_below(rng, 448);
            g->items[n++] = (item){t, session, turn, isl, osl, 0};
            isl += osl + 32 + wsel_rng_below(rng, 480);
            t += 5000000000ll + exp_gap_ns(rng, 0.1);
        }
        session++;
        start += exp_gap_ns(rng, w->rate / 5.0); /* ~5 turns per session */
    }
    g->num_items = n;
    qsort(g->items, n, sizeof(*g->items), cmp_item);
    return 0;
}

/* Agent: each request is one of `tools` shared tool prompts followed by
 * its own context of 1,024..16,383 tokens; answers 64..511 tokens. */
static int32_t plan_agent(sim_workload *g, wsel_rng *rng)
{
    const sim_workload_config *w = &g->cfg;
    if (w->tools == 0)
        return WSEL_ERANGE;
    g->items = malloc((size_t)w->requests * sizeof(*g->items));
    if (!g->items)
        return WSEL_ENOMEM;
    int64_t now = 0;
    for (uint32_t i = 0; i < w->requests; i++) {
        uint32_t tool = wsel_rng_below(rng, w->tools);
        uint32_t ctx = 1024 + wsel_rng_below(rng, 15360);
        uint32_t osl = 64 + wsel_rng_below(rng, 448);
        g->items[i] = (item){now, tool, i, w->tool_tokens + ctx, osl, 0};
        now += exp_gap_ns(rng, w->rate);
    }
    g->num_items = w->requests;
    return 0;
}

/*
 * Conversation: the shape of real traffic. Sessions start as a Poisson
 * process (rate / mean turns); a share `agent_share` of them are tool
 * agents, the rest chats.
 *   chat: the shared system prompt (system_tokens), then the session's own
 *     transcript: a first message of 128..1023 tokens, answers of 64..511,
 *     follow-ups of 32..511; 2..8 turns, each 5 s + exp(mean 10 s) after the
 *     previous one; each turn's prompt extends the previous turn's.
 *   agent: one of `tools` long tool prompts (tool_tokens, shared by its
 *     group), then the session's context: 1,024..4,095 tokens, then per
 *     step the previous answer (32..255 tokens) and a tool result of
 *     256..2,047; 2..10 steps, each 1 s + exp(mean 2 s) after the previous.
 * Bursts: arrival instants form a Poisson process of rate / burst; each
 * request is moved to the first instant at or after its own time, so
 * several requests (burst on average) arrive at one instant.
 */
static int32_t plan_conversation(sim_workload *g, wsel_rng *rng)
{
    const sim_workload_config *w = &g->cfg;
    if (w->tools == 0 || !(w->burst >= 1) || !(w->agent_share >= 0) || w->agent_share > 1)
        return WSEL_ERANGE;
    g->items = malloc((size_t)w->requests * sizeof(*g->items));
    if (!g->items)
        return WSEL_ENOMEM;
    uint32_t n = 0, session = 0;
    int64_t start = 0;
    while (n < w->requests) {
        int agent = wsel_rng_uniform(rng) < w->agent_share;
        uint32_t group = agent ? 1 + wsel_rng_below(rng, w->tools) : 0;
        uint32_t turns = agent ? 2 + wsel_rng_below(rng, 9) : 2 + wsel_rng_below(rng, 7);
        uint32_t isl = agent ? w->tool_tokens + 1024 + wsel_rng_below(rng, 3072)
                             : w->system_tokens + 128 + wsel_rng_below(rng, 896);
        int64_t t = start;
        for (uint32_t turn = 0; turn < turns && n < w->requests; turn++) {
            uint32_t osl =
                agent ? 32 + wsel_rng_below(rng, 224) : 64 + wsel_rng_below(rng, 448);
            g->items[n++] = (item){t, session, turn, isl, osl, group};
            isl += osl + (agent ? 256 + wsel_rng_below(rng, 1792)
                                : 32 + wsel_rng_below(rng, 480));
            t += agent ? 1000000000ll + exp_gap_ns(rng, 0.5)
                       : 5000000000ll + exp_gap_ns(rng, 0.1);
        }
        session++;
        start += exp_gap_ns(rng, w->rate / 5.0); /* ~5 turns per session */
    }
    g->num_items = n;
    qsort(g->items, n, sizeof(*g->items), cmp_item);
    /* Snap every request to the next burst instant. */
    int64_t instant = 0;
    double instant_rate = w->rate / w->burst;
    for (uint32_t i = 0; i < n; i++) {
        while (instant < g->items[i].time_ns)
            instant += exp_gap_ns(rng, instant_rate);
        g->items[i].time_ns = instant;
    }
    qsort(g->items, n, sizeof(*g->items), cmp_item);
    return 0;
}

int32_t sim_workload_open(sim_workload **out, const sim_workload_config *w,
                          uint32_t block_size, char *err, size_t err_size)
{
    if (!(w->rate > 0) || !isfinite(w->rate)) {
        snprintf(err, err_size, "--rate must be a positive number of requests/s");
        return WSEL_EINVAL;
    }
    sim_workload *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    g->cfg = *w;
    g->block_size = block_size;
    wsel_rng rng;
    wsel_rng_seed(&rng, w->seed);
    int32_t rc;
    if (w->kind == SIM_WORKLOAD_SHARED_PREFIX)
        rc = plan_shared_prefix(g, &rng);
    else if (w->kind == SIM_WORKLOAD_CHAT)
        rc = plan_chat(g, &rng);
    else if (w->kind == SIM_WORKLOAD_CONVERSATION)
        rc = plan_conversation(g, &rng);
    else
        rc = plan_agent(g, &rng);
    if (rc != 0) {
        snprintf(err, err_size, "workload %s: %s", sim_workload_name(w->kind),
                 rc == WSEL_ENOMEM ? "out of memory" : "a size is zero or too large");
        sim_workload_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

void sim_workload_close(sim_workload *g)
{
    if (!g)
        return;
    free(g->items);
    free(g->blocks);
    free(g);
}

static uint64_t block_hash(const sim_workload *g, const item *it, uint32_t id, uint32_t k)
{
    uint64_t end = (uint64_t)(k + 1) * g->block_size;
    switch (g->cfg.kind) {
    case SIM_WORKLOAD_SHARED_PREFIX:
        if (end <= g->cfg.prefix_tokens)
            return h3(TAG_PREFIX, it->a, k);
        return h3(TAG_QUESTION, (uint64_t)it->a * g->cfg.prompts + it->b, k);
    case SIM_WORKLOAD_CHAT:
        return h3(TAG_CHAT, it->a, k);
    case SIM_WORKLOAD_CONVERSATION:
        if (it->c == 0)
            return end <= g->cfg.system_tokens ? h3(TAG_SYSTEM, 0, k)
                                               : h3(TAG_SESSION, it->a, k);
        return end <= g->cfg.tool_tokens ? h3(TAG_TOOL, it->c, k)
                                         : h3(TAG_AGENT, it->a, k);
    default:
        if (end <= g->cfg.tool_tokens)
            return h3(TAG_TOOL, it->a, k);
        return h3(TAG_CONTEXT, id, k);
    }
}

int32_t sim_workload_next(sim_workload *g, sim_request *out)
{
    if (g->next >= g->num_items)
        return 0;
    uint32_t id = g->next++;
    const item *it = &g->items[id];
    uint32_t n = it->isl / g->block_size;
    if (n > g->block_capacity) {
        uint64_t *grown = realloc(g->blocks, (size_t)n * sizeof(*grown));
        if (!grown)
            return WSEL_ENOMEM;
        g->blocks = grown;
        g->block_capacity = n;
    }
    for (uint32_t k = 0; k < n; k++)
        g->blocks[k] = block_hash(g, it, id, k);
    out->id = id;
    out->arrival_ns = it->time_ns;
    out->isl = it->isl;
    out->osl = it->osl;
    out->num_blocks = n;
    out->blocks = g->blocks;
    return 1;
}
