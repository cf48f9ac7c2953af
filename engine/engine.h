// SPDX-License-Identifier: Apache-2.0
/*
 * engine.h -- wsel-engine: one emulated vLLM-like worker (docs/real-time.md).
 *
 * Three threads share the state below:
 *   - the HTTP thread(s) of libmicrohttpd (http.c) parse requests, queue
 *     them in the inbox and stream what the model produced;
 *   - the model thread (model.c) owns the sim_engine: it admits queued
 *     requests, ends steps when the wall clock reaches them (model time =
 *     wall time x time_scale), updates each request's progress and resumes
 *     its connection;
 *   - the KV event thread (kv_events.c) owns the ZeroMQ sockets.
 * Locks, never nested: `inbox_lock` (inbox, stop flag), `io_lock` (every
 * eng_req's progress fields, the request table), `model_lock` (the
 * sim_engine, for /metrics and /wsel/kv_blocks readers).
 */
#ifndef WSEL_ENGINE_ENGINE_H
#define WSEL_ENGINE_ENGINE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine_api.h"
#include "sim.h"
#include "u64map.h"

#define ENG_MAX_ENDPOINT 256

typedef struct eng_options {
    const char *host;
    uint32_t port; /* 0 = any free port */
    const char *port_file;
    const char *model;
    sim_cluster cluster; /* one worker of --dp ranks */
    uint32_t max_model_len;
    double time_scale;
    uint32_t vocab_size;
    uint32_t http_threads;
    uint64_t max_body;
    const char *kv_events;        /* PUB endpoint of rank 0, NULL = off */
    const char *kv_events_replay; /* ROUTER endpoint of rank 0, NULL = off */
    const char *kv_events_topic;
    uint32_t kv_events_batch; /* ENG_KV_BATCH_* (kv_events.h) */
    /* --tokenizer DIR: the model's tokenizer files; text and chat prompts
     * are then tokenized as vLLM does (hf_tokens.c), so KV events carry
     * the ids a real vLLM would publish. Opened by main.c. */
    const char *tokenizer_dir;
    const struct wsel_tokenizer *tokenizer;
    int quiet;
    int version; /* --version: print it and exit */
} eng_options;

/* Parse argv; 0, 1 after --help, or -1 after a message on stderr. */
int eng_options_parse(eng_options *o, int argc, char **argv);

#define ENG_API_COMPLETIONS 0
#define ENG_API_CHAT        1

/* One request, shared by its connection and the model (refs). */
typedef struct eng_req {
    uint64_t id;
    uint32_t api; /* ENG_API_* */
    int stream;
    int include_usage;
    uint32_t rank; /* UINT32_MAX until the model picks one */
    uint32_t isl;
    uint32_t osl;     /* max_tokens */
    uint32_t *tokens; /* the prompt */
    uint64_t *blocks; /* prefix hash of each full block */
    uint32_t num_blocks;
    int64_t created; /* unix seconds */
    /* Progress, under io_lock. */
    uint32_t generated;
    uint32_t cached;
    int admitted;
    int done;      /* the model has finished with it */
    int cancelled; /* the client went away */
    int suspended; /* its connection waits for progress */
    void *conn;    /* struct MHD_Connection * */
    /* Owned by the HTTP thread: what has been written. */
    uint32_t sent;
    int phase;  /* 0 head, 1 tokens, 2 tail written, 3 end */
    char *body; /* non-streaming: the whole answer */
    size_t body_len, body_off;
    int refs;             /* under io_lock */
    struct eng_req *next; /* inbox */
} eng_req;

typedef struct eng_rank_stats {
    uint64_t waiting, running;
    uint64_t prefix_queries, prefix_hits; /* tokens */
    uint64_t prompt_tokens, generation_tokens;
    uint64_t finished;
} eng_rank_stats;

typedef struct eng_kv eng_kv; /* kv_events.c */

typedef struct eng {
    eng_options opt;
    uint32_t num_ranks;
    sim_engine *model;
    pthread_mutex_t model_lock;
    /* Inbox: new requests and cancels for the model thread. */
    pthread_mutex_t inbox_lock;
    pthread_cond_t inbox_cond;
    eng_req *inbox_head, *inbox_tail;
    uint64_t *cancels;
    size_t num_cancels, cancel_cap;
    int stop;
    /* Requests the model holds, by id; progress; stats. */
    pthread_mutex_t io_lock;
    sim_u64map reqs; /* id -> eng_req * */
    eng_rank_stats stats[SIM_MAX_RANKS];
    uint64_t next_id;
    uint64_t rejected;
    /* Blocks of the requests in the model: hash -> eng_block * (model
     * thread only), so a BlockStored event can carry its tokens. */
    sim_u64map block_tokens;
    eng_kv *kv;
    pthread_t model_thread;
    int64_t t0_ns; /* wall clock at model time 0 */
    uint32_t port; /* the HTTP port, set by eng_http_start before any request */
} eng;

/* Monotonic wall clock, ns. */
int64_t eng_now_ns(void);

/* model.c */
int eng_model_start(eng *e, char *err, size_t err_size);
void eng_model_stop(eng *e);
/* Hand a parsed request to the model (takes a reference). */
void eng_model_submit(eng *e, eng_req *r);
/* The client went away: stop the request at its next token. */
void eng_model_cancel(eng *e, uint64_t id);
/* Drop one reference (under io_lock inside). */
void eng_req_release(eng *e, eng_req *r);

/* http.c: resume a suspended connection (any thread). */
void eng_http_resume(void *conn);

/* hf_tokens.c: --tokenizer. Open o->tokenizer from o->tokenizer_dir (0, or
 * -1 with a message in err); close it (NULL is a no-op). */
int eng_tokenizer_open(eng_options *o, char *err, size_t err_size);
void eng_tokenizer_close(eng_options *o);
/* The ids of a completions prompt (chat 0: n bytes of text) or of a chat
 * body (chat 1: n bytes of the request's JSON) into a malloc'd *ids, their
 * count in *count: 0, or -1 with a message in err (a 400). */
int eng_tokenizer_encode(const eng_options *o, int chat, const char *s, size_t n,
                         uint32_t **ids, uint32_t *count, char *err, size_t err_size);

/* tokens.c: the documented prompt rules. */
/* Text to token ids: one per whitespace-separated word (a decimal number
 * below the vocabulary size is that id; any other word the FNV-1a hash of
 * its bytes modulo the vocabulary). Returns the count written (<= max). */
uint32_t eng_tokenize(const char *text, size_t len, uint32_t vocab, uint32_t *out,
                      uint32_t max);
/* Words eng_tokenize would find (to size its output). */
uint32_t eng_count_words(const char *text, size_t len);
/* The k-th generated token of a request. */
uint32_t eng_output_token(uint64_t request_id, uint32_t k, uint32_t vocab);
/* Prefix hash of each full block: chained over the block's token ids. */
void eng_block_hashes(const uint32_t *tokens, uint32_t n, uint32_t block_size,
                      uint64_t *out);

#endif
