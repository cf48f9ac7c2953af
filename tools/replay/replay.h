// SPDX-License-Identifier: Apache-2.0
/*
 * replay.h -- `wsel replay`: a Mooncake trace or a generated workload sent
 * over HTTP to OpenAI-compatible engines (wsel-engine, vLLM), measured
 * from the client side and reported with wsel sim's table and JSON keys.
 *
 * Prompts are token ids built from the trace's hash_ids: token t of a
 * trace block with id H is mix64(H * trace_block + t) mod the vocabulary,
 * so equal leading ids give equal token prefixes; the last block is cut
 * to input_length. As text (--prompt words|chat) position t holds a word
 * instead (words.h). max_tokens = output_length. Not thread-safe.
 */
#ifndef WSEL_TOOLS_REPLAY_H
#define WSEL_TOOLS_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "source.h"
#include "trace.h"

#define REPLAY_MAX_URLS 64

/* How a prompt is sent: token ids as a JSON array, or as a string of the
 * ids in decimal separated by spaces (wsel-engine reads a word that is a
 * number below the vocabulary as that token id: the same prompt, for
 * routers that accept only text); or as text a model's tokenizer reads
 * (words.h): a /v1/completions string of words, or a /v1/chat/completions
 * request whose one user message is that string. */
#define REPLAY_PROMPT_TOKENS 0
#define REPLAY_PROMPT_TEXT   1
#define REPLAY_PROMPT_WORDS  2
#define REPLAY_PROMPT_CHAT   3
extern const char *const replay_prompt_names[];

typedef struct replay_options {
    const char *urls[REPLAY_MAX_URLS];
    uint32_t num_urls;
    const char *trace;
    uint32_t trace_block_size;
    int skip_bad_lines;
    sim_workload_config workload;
    int use_workload;
    double speedup;
    double time_scale; /* the engines' --time-scale: arrivals / it, times x it */
    uint32_t concurrency;
    uint32_t vocab_size;
    uint32_t max_requests; /* 0 = all */
    const char *model;     /* NULL = leave "model" out */
    uint32_t prompt_text;  /* REPLAY_PROMPT_*: how the prompt is sent */
    const char *tokenizer; /* words/chat: the model's folder, or NULL */
    const char *requests_out;
    const char *plot_dir;
    double timeout_s;
    int json;
    int progress; /* -1 auto */
    /* --failover: URL i mod N are router replicas; a request whose
     * transfer fails goes to the next URL (each URL once at most). */
    int failover;
    uint32_t ranks; /* ranks behind the URLs, for the herding index; 0 = seen */
    /* Routing (route.h): with a plugin, each request goes to the (URL,
     * rank) libwsel-router chooses instead of URL i mod N. */
    const char *plugin;                     /* NAME or PATH; NULL = no routing */
    const char *config;                     /* its JSON, NULL = {} */
    uint32_t dp[REPLAY_MAX_URLS];           /* ranks of each URL's engine */
    const char *kv_events[REPLAY_MAX_URLS]; /* its ranks' KV endpoints, or NULL */
    uint32_t block_size;                    /* the router's (the engines') block */
    uint64_t seed;                          /* workload and host seed */
} replay_options;

/* The command line (options.c). CLI_OK, CLI_HELP or CLI_USAGE with a
 * message in err: cli_report(&replay_command, ...) says either. */
extern const cli_command replay_command;
int replay_options_parse(replay_options *o, int argc, char **argv, char *err,
                         size_t err_size);

/* One request to send. OWNERSHIP: tokens and words are the caller's
 * until freed (replay_request_free). */
typedef struct replay_request {
    uint64_t index;
    double arrival_s; /* from the first request, before --speedup */
    uint32_t isl, osl;
    uint32_t *tokens;    /* the ids the router hashes */
    uint32_t num_tokens; /* isl, or with --tokenizer the model's count */
    uint32_t *words;     /* words/chat: indexes into replay_words, else NULL */
    uint32_t num_words;
} replay_request;
void replay_request_free(replay_request *q);

typedef struct replay_source replay_source;
int replay_source_open(replay_source **out, const replay_options *o, char *err,
                       size_t err_size);
/* 1 with *out filled (tokens malloc'd), 0 at the end, negative with err. */
int replay_source_next(replay_source *s, replay_request *out, char *err, size_t err_size);
uint64_t replay_source_bad_lines(const replay_source *s);
void replay_source_close(replay_source *s);

/* What one request measured. */
typedef struct replay_result {
    uint64_t index;
    uint32_t url;
    long status; /* HTTP status; 0 = no answer (refused, timed out) */
    uint32_t isl, osl;
    uint32_t tokens; /* token events received */
    int usage;       /* a usage object was read */
    uint32_t prompt_tokens, completion_tokens, cached_tokens;
    double start_s;                 /* from the replay's start */
    double ttft_ms, e2e_ms, itl_ms; /* itl: mean gap between tokens */
    int protocol_error;             /* 200, but the stream did not end with [DONE] */
    int routed;                     /* sent where the router chose */
    uint32_t dp_rank;               /* ...to this rank (X-data-parallel-rank) */
    char served_by[64];             /* X-wsel-served-by (HOST:PORT/RANK), or "" */
    /* --failover: sent again after the transfer failed before any
     * response byte (retries) or after some (resent, a broken stream). */
    uint32_t retries, resent;
} replay_result;

typedef void (*replay_result_fn)(void *ctx, const replay_result *r);

struct replay_route;

/* Send everything; calls fn once per request as it ends. With `route`
 * (route.h; NULL = URL i mod N) each request is routed before it is sent
 * and its first token and end are reported to the router. A request the
 * router refuses is a result with status 0, never sent. Returns 0, or -1
 * with err (a source error; failed requests are results, not errors). */
int replay_run(const replay_options *o, replay_source *src, struct replay_route *route,
               replay_result_fn fn, void *ctx, char *err, size_t err_size);

/* The herding index of what the engines report (herd.c): each request's
 * start and the rank that served it (X-wsel-served-by), fed to wsel sim's
 * accumulator in start order, so the index is sim_acc_herd's definition.
 * OWNERSHIP: the herd owns its samples; replay_herd_free frees them. */
struct sim_acc;
typedef struct replay_herd {
    char names[SIM_MAX_RANKS][64]; /* the served_by seen, index = rank */
    uint32_t num_names;
    struct replay_herd_sample *v;
    size_t n, cap;
    uint64_t unnamed; /* requests with no served_by, or past SIM_MAX_RANKS */
} replay_herd;
/* Record one served request (served_by "" counts as unnamed). 0 or -1
 * when out of memory. */
int replay_herd_add(replay_herd *h, double start_s, const char *served_by);
/* Sort and feed every sample to `acc` with `ranks` ranks (0: those seen). */
void replay_herd_feed(replay_herd *h, struct sim_acc *acc, uint32_t ranks);
void replay_herd_free(replay_herd *h);

#endif
