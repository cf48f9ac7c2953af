// SPDX-License-Identifier: Apache-2.0
/*
 * wsel_router.h -- libwsel-router, what a router without a KV indexer of its
 * own needs around libwsel-host: the topology, a KV index, block hashing,
 * load accounting, and one call that routes a request.
 *
 *   topology   workers (an address and a DP size each), their ranks in
 *              canonical order (worker id, then dp rank); add, drain, mark
 *              unavailable, remove; every change bumps the topology epoch.
 *   KV index   which (worker, rank) holds which block. Fed by KV events
 *              (vLLM's ZeroMQ/msgpack format, as wsel-engine publishes it;
 *              a SUB socket per rank; blocks re-hashed from their token ids
 *              so requests and events agree) or, without events, by routing
 *              history (the blocks of each routed request are assumed
 *              cached on its rank). Either way an LRU per rank bounded by
 *              `capacity_blocks`, so memory is bounded; a prompt's or a
 *              stored batch's blocks are recorded deepest first, so the
 *              LRU evicts a prefix from its tail; in event mode a route
 *              refreshes the prefix it hits on the rank it chooses.
 *   hashing    chained block hashes with xxHash's XXH3, Dynamo's way:
 *              local_i = XXH3_64(block i's token ids as little-endian
 *              uint32, seed 1337); hash_0 = local_0, hash_i =
 *              XXH3_64(hash_{i-1} || local_i as two little-endian uint64,
 *              seed 1337). Text prompts (approximate mode) hash fixed-size
 *              character chunks the same way.
 *   load       per rank: active prefill tokens (until the first token),
 *              active decode blocks and requests in flight, moved by
 *              route (started), wsel_router_first_token, wsel_router_finished.
 *   route      overlaps -> wsel_table_build -> wsel_host_select ->
 *              accounting, returning the worker and rank.
 *
 * Threads: every function may be called from any thread unless its tag says
 * [control thread]. The router serialises its state with one internal mutex
 * (a route holds it for the whole call, about 8 us at 1,024 rows). The KV
 * event thread (started by the first worker with KV endpoints), like any
 * caller of wsel_router_apply_kv_message, decodes a message without it
 * (under a decoder lock of its own, so messages are decoded one at a time)
 * and holds it only to apply the decoded batch, handing it to routes,
 * first tokens and finishes that wait for it between events and every 32
 * blocks: a route never waits for a decode, nor for more than a slice of a
 * large batch. Policy switches are libwsel-host's: call wsel_host_switch on
 * the host you passed in, from your control thread; the router never waits
 * for one.
 *
 * Errors: 0 or a negative WSEL_E* (wsel.h); `err`/`err_size` as in
 * wsel_host.h (caller's buffer, NUL-terminated message, may be NULL).
 *
 * OWNERSHIP: the router never takes ownership of a pointer passed in;
 * strings and arrays are copied or read during the call only. The host
 * passed in wsel_router_options stays the caller's and must outlive the
 * router.
 */
#ifndef WSEL_ROUTER_H
#define WSEL_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define WSEL_ROUTER_API __attribute__((visibility("default")))
#else
#define WSEL_ROUTER_API
#endif

typedef struct wsel_router wsel_router;

/* Where the KV index learns what each rank caches. */
#define WSEL_ROUTER_KV_HISTORY 0u /* routing history (approximate) */
#define WSEL_ROUTER_KV_EVENTS  1u /* vLLM KV events from each rank */

/* The CPU class of the threads that receive and decode KV events
 * (wsel_router_options.kv_threads). */
/* SCHED_BATCH, the decoding thread 10 above the caller's nice, at most 19
 * (the default) */
#define WSEL_ROUTER_KV_THREADS_LOW    0u
#define WSEL_ROUTER_KV_THREADS_NORMAL 1u /* the class of wsel_router_create's caller */

/* The seed of every XXH3 call (Dynamo's). */
#define WSEL_ROUTER_HASH_SEED 1337u

typedef struct wsel_router_options {
    /* sizeof(wsel_router_options); a zero field means its default. */
    uint32_t struct_size;
    /* Tokens per KV block; 0 = 64. Events with another block_size are
     * skipped and counted. */
    uint32_t block_size;
    /* WSEL_ROUTER_KV_HISTORY or WSEL_ROUTER_KV_EVENTS. */
    uint32_t kv_source;
    /* Most (worker, rank) rows at once; 0 = 1024. */
    uint32_t max_rows;
    /* Index capacity per rank, blocks (LRU beyond it); 0 = 16384. In
     * event mode the engine reports its own evictions; the LRU is
     * refreshed by stored events and by each route, for the cached prefix
     * it hits on the rank it chooses (the engine's use keeps it cached; no
     * event says so). Set it at least to the engine's KV blocks per rank:
     * a smaller index forgets the least recently used prefixes the engine
     * may still hold. */
    uint32_t capacity_blocks;
    /* Characters per block of a text prompt; 0 = 4 x block_size (at most
     * UINT32_MAX). */
    uint32_t text_chunk_chars;
    /* A rank is flagged busy at this many requests in flight; 0 = never. */
    uint32_t busy_active_requests;
    /* A prompt's blocks beyond this many are not hashed; 0 = 8192. */
    uint32_t max_prompt_blocks;
    /* A rank is flagged busy at this prefill backlog, tokens; 0 = never. */
    uint64_t busy_prefill_tokens;
    /* The host that selects (required). OWNERSHIP: caller's. */
    wsel_host *host;
    /* Log sink (wsel_host.h's type); NULL = warnings to stderr. */
    wsel_log_fn log;
    void *log_user;
    /* The router's clock, microseconds, never decreasing: route, first
     * token and finish are stamped with it and outcomes' times are
     * differences of it. NULL = CLOCK_MONOTONIC. Called under the router's
     * mutex; must not call the router. [any thread] */
    uint64_t (*clock_us)(void *user);
    void *clock_user;
    /* Event mode: the CPU class of the KV event threads (ZeroMQ's I/O
     * thread; the router's receiving thread, which decodes: most of the
     * events' cost; its applying thread, which holds the router's mutex
     * while it writes the index). LOW (0): Linux's SCHED_BATCH for all of
     * them (a thread woken by an event does not preempt a running route)
     * and nice +10 for the receiving thread (a route that wakes preempts
     * the decoding, which gets about a tenth of a core beside each busy
     * normal thread: the index lags under saturation, it is never
     * starved); the applying thread keeps the caller's nice, so a route
     * never waits long for a thread that others hold off the CPU. NORMAL:
     * the caller's class for every one. Where SCHED_BATCH does not exist,
     * LOW is NORMAL. */
    uint32_t kv_threads;
} wsel_router_options;

/* Create a router with no workers. [control thread] */
WSEL_ROUTER_API int32_t wsel_router_create(const wsel_router_options *opts,
                                           wsel_router **out, char *err, size_t err_size);
/* Stop the KV event thread and free everything; NULL is a no-op. No other
 * call may be running. [control thread] */
WSEL_ROUTER_API void wsel_router_destroy(wsel_router *router);

/* ===================================================================== */
/* Topology                                                               */
/* ===================================================================== */

typedef struct wsel_router_worker {
    /* Unique among the router's workers. */
    uint64_t worker_id;
    /* "127.0.0.1:8000" or anything the caller uses to reach it (< 256 bytes). */
    const char *address;
    /* Data-parallel ranks, 1..64. */
    uint32_t dp_size;
    /* KV event endpoint of each rank (dp_size entries, "tcp://H:P"), or NULL:
     * no events from this worker. Used with WSEL_ROUTER_KV_EVENTS only. */
    const char *const *kv_endpoints;
} wsel_router_worker;

/* Add a worker; its ranks become rows at once. WSEL_EINVAL (bad fields),
 * WSEL_ESTATE (the id exists), WSEL_ERANGE (more rows than max_rows).
 * Bumps the epoch. [any thread] */
WSEL_ROUTER_API int32_t wsel_router_add_worker(wsel_router *router,
                                               const wsel_router_worker *worker,
                                               char *err, size_t err_size);
/* Drain: its rows are flagged excluded at once; the worker is removed
 * when its last request in flight finishes (at once if none). Bumps the
 * epoch. WSEL_ENOENT if unknown. [any thread] */
WSEL_ROUTER_API int32_t wsel_router_drain_worker(wsel_router *router, uint64_t worker_id);
/* Remove now: its rows, index entries and KV subscriptions go; events its
 * subscriptions had already received are skipped (counted under
 * WSEL_KV_SKIP_RANK), even once a worker is added again under its id.
 * Requests still in flight there stay in flight until their finish, which
 * returns 0 and delivers no outcome; their first token and finish move no
 * load (a worker added again under the id starts from none). Bumps the
 * epoch. WSEL_ENOENT if unknown. [any thread] */
WSEL_ROUTER_API int32_t wsel_router_remove_worker(wsel_router *router,
                                                  uint64_t worker_id);
/* Mark a worker unavailable (available = 0: the caller found it down,
 * e.g. connections failing) or available again (1). While unavailable its
 * rows are flagged WSEL_ROW_EXCLUDED, as a draining worker's are, so the
 * policy does not choose them (if every row is excluded, a route answers
 * WSEL_ENOCANDIDATE); its requests in flight, load, KV index entries and
 * subscriptions stay, and it is not removed. A change bumps the epoch;
 * setting the state it has already is a no-op (0, epoch unchanged).
 * Independent of drain: a draining worker stays excluded whatever this
 * says. WSEL_ENOENT if unknown, WSEL_EINVAL for NULL. [any thread] */
WSEL_ROUTER_API int32_t wsel_router_set_worker_available(wsel_router *router,
                                                         uint64_t worker_id, int available);
/* The topology epoch (starts at 1, +1 per change); 0 for NULL.
 * [any thread] */
WSEL_ROUTER_API uint64_t wsel_router_epoch(const wsel_router *router);

/* ===================================================================== */
/* Hashing                                                                */
/* ===================================================================== */

/* Chained block hashes of the full blocks of `tokens` (n / block_size of
 * them, at most `max`) into out. Returns how many. [any thread] */
WSEL_ROUTER_API uint32_t wsel_router_hash_tokens(const uint32_t *tokens, uint32_t n,
                                                 uint32_t block_size, uint64_t *out,
                                                 uint32_t max);
/* The same over `chunk` characters at a time of text (full chunks only). */
WSEL_ROUTER_API uint32_t wsel_router_hash_text(const char *text, size_t len,
                                               uint32_t chunk, uint64_t *out,
                                               uint32_t max);

/* ===================================================================== */
/* Routing and load accounting                                            */
/* ===================================================================== */

/* wsel_route_request.overrides: which of the per-request fields are set. */
#define WSEL_ROUTE_SET_WEIGHT      0x1u
#define WSEL_ROUTE_SET_TEMPERATURE 0x2u
/* Answer with the host's built-in rule (argmin of the default cost over the
 * rows neither excluded nor busy, else the busy ones; random tie-break from
 * the request's stream) without asking the live policy: for a request
 * whose prompt could not be read. Accounted like any route; counted in
 * wsel_router_counters.builtin_routes, not in plugin_answers or fallbacks. */
#define WSEL_ROUTE_BUILTIN 0x4u
/* History mode: record the prompt's blocks on the chosen rank not during
 * this call but at the next wsel_router_flush, or at the start of the next
 * call that reads the index or the ranks (route, first token, finished,
 * counters, ranks), whichever comes first; one record waits at most, so
 * every later route sees it exactly as without the flag. For a caller that
 * has something better to do first (nginx: send the request upstream),
 * then flushes. Ignored in event mode. */
#define WSEL_ROUTE_DEFER_HISTORY 0x8u

typedef struct wsel_route_request {
    /* sizeof(wsel_route_request) as the caller compiled it. Smaller than
     * WSEL_ROUTE_REQUEST_SIZE_1_0 (the first version's): WSEL_EINVAL.
     * Fields appended later are read only when struct_size covers them,
     * as 0 otherwise; a caller built against a later header may pass its
     * larger struct, whose fields past this one's are not read. */
    uint32_t struct_size;
    /* WSEL_ROUTE_SET_* bits. */
    uint32_t overrides;
    /* The request's id, unique among requests in flight; 0 = the router
     * assigns one (returned in the result): 1, 2, ... skipping ids in
     * flight, so a caller that also sets ids of its own may later find one
     * taken (WSEL_ESTATE): use one scheme or the other. An id is free
     * again once its request finished. */
    uint64_t request_id;
    /* The prompt as token ids (exact blocks), or NULL... */
    const uint32_t *tokens;
    uint32_t num_tokens;
    /* ...as text (approximate: character chunks), when tokens is NULL. */
    uint32_t isl_tokens; /* text only: its length in tokens; 0 = len / 4 */
    const char *text;
    size_t text_len;
    /* Dynamo's overlap_score_weight (default 1.0) and temperature (0.0),
     * used when the matching override bit is set. */
    double overlap_score_weight;
    double temperature;
    /* ...or as a chat request: `chat_len` bytes of a /v1/chat/completions
     * body (JSON: "messages", "tools", ...), when tokens and text are NULL.
     * With a tokenizer (wsel_router_set_tokenizer) it is rendered by the
     * model's chat template and tokenized; without one, or if that fails,
     * its bytes are hashed as text (approximate). Read only when
     * struct_size covers it. */
    const char *chat;
    size_t chat_len;
} wsel_route_request;

/* The size of wsel_route_request's first version (every field above). */
#define WSEL_ROUTE_REQUEST_SIZE_1_0 (offsetof(wsel_route_request, temperature) + sizeof(double))

typedef struct wsel_route_result {
    uint64_t request_id;
    uint64_t worker_id;
    uint32_t dp_rank;
    /* WSEL_ANSWER_PLUGIN or WSEL_ANSWER_FALLBACK (wsel_host.h); FALLBACK
     * for a WSEL_ROUTE_BUILTIN route too. */
    uint32_t answer;
    /* Prompt blocks hashed, and how many of them the chosen rank holds. */
    uint32_t num_blocks;
    uint32_t overlap_blocks;
    /* The chosen worker's address, copied. */
    char address[256];
} wsel_route_result;

/*
 * Route one request: hash its prompt, compute every row's longest cached
 * prefix, build the table (wsel_table_build), select (wsel_host_select),
 * then account the request as started on the chosen rank:
 *   prefill += max(isl - overlap * block_size, 0)
 *   blocks  += max(isl / block_size - overlap, 0), requests += 1
 * and, in history mode, record its blocks on that rank. Returns 0 with
 * *result filled, WSEL_ENOCANDIDATE (no worker, or every row excluded),
 * WSEL_EINVAL (NULL, struct_size below WSEL_ROUTE_REQUEST_SIZE_1_0,
 * tokens NULL with num_tokens, an overlap weight negative or not finite), WSEL_ESTATE (request id in flight),
 * WSEL_ENOMEM, or wsel_host_select's WSEL_EREQUEST / WSEL_ETABLE; on an
 * error nothing is accounted or recorded. [any thread]
 */
WSEL_ROUTER_API int32_t wsel_router_route(wsel_router *router,
                                          const wsel_route_request *request,
                                          wsel_route_result *result);
/* ===================================================================== */
/* Tokenizing text and chat (libwsel-tokenizer, tokenizer/include)        */
/* ===================================================================== */

struct wsel_tokenizer;

/*
 * Give the router the model's tokenizer (wsel_tokenizer_open), or NULL to
 * take it away. From then on a route's `text` is tokenized as vLLM does a
 * /v1/completions string prompt (with the tokenizer's special tokens) and
 * its `chat` rendered and tokenized as a /v1/chat/completions request, so
 * their blocks hash like the engine's KV events: precise, not approximate.
 * The tokenizing runs in the routing thread before the router's mutex is
 * taken (it costs about 0.1 us per token: docs/tokenize.md). A prompt the
 * tokenizer refuses (not UTF-8, no chat template, a template error) is
 * hashed as text instead, counted in wsel_router_tokenize_counters.
 * WSEL_ESTATE if this libwsel-router was built without libwsel-tokenizer,
 * WSEL_EINVAL for a NULL router. OWNERSHIP: the tokenizer stays the
 * caller's and must outlive the router or the next call here. [control
 * thread, while no route runs]
 */
WSEL_ROUTER_API int32_t wsel_router_set_tokenizer(wsel_router *router,
                                                  const struct wsel_tokenizer *tok);

typedef struct wsel_router_tokenize_counters {
    uint64_t text_tokenized; /* text prompts routed by their token ids */
    uint64_t chat_tokenized; /* chat requests routed by their token ids */
    uint64_t fallbacks;      /* refused by the tokenizer: hashed as text */
    uint64_t tokens;         /* ids produced over all of them */
} wsel_router_tokenize_counters;

/* Snapshot of the tokenizing counters (zeros for NULL). [any thread] */
WSEL_ROUTER_API void wsel_router_read_tokenize_counters(wsel_router *router,
                                                        wsel_router_tokenize_counters *out);

/* Record the history a WSEL_ROUTE_DEFER_HISTORY route left waiting, if
 * any; a harmless no-op otherwise (and for NULL). [any thread] */
WSEL_ROUTER_API void wsel_router_flush(wsel_router *router);

/* The request's first token: its prefill leaves the rank's backlog.
 * WSEL_ENOENT if not in flight, WSEL_EINVAL for NULL. Idempotent.
 * [any thread] */
WSEL_ROUTER_API int32_t wsel_router_first_token(wsel_router *router, uint64_t request_id);
/* The request ended (done, failed or cancelled): all its load leaves the
 * rank and the policy is told its outcome (below), as by
 * wsel_router_finished_ex with info NULL: output tokens unknown (0), not
 * failed. WSEL_ENOENT if not in flight, WSEL_EINVAL for NULL.
 * [any thread] */
WSEL_ROUTER_API int32_t wsel_router_finished(wsel_router *router, uint64_t request_id);

/* wsel_router_finish.flags */
#define WSEL_ROUTER_FINISH_FAILED       0x1u /* upstream error, cancelled, client gone */
#define WSEL_ROUTER_FINISH_CACHED_KNOWN 0x2u /* cached_tokens is the engine's figure */

/* What the caller knows of how a request ended (wsel_router_finished_ex).
 * Appended to by later versions; a zero field means "unknown / the
 * router's own figure". */
typedef struct wsel_router_finish {
    /* sizeof(wsel_router_finish) as the caller compiled it. */
    uint32_t struct_size;
    /* WSEL_ROUTER_FINISH_* bits. */
    uint32_t flags;
    /* Output tokens generated (0 = unknown). */
    uint32_t output_tokens;
    /* With WSEL_ROUTER_FINISH_CACHED_KNOWN: prompt tokens the engine served
     * from its cache (e.g. vLLM's usage.prompt_tokens_details.cached_tokens),
     * capped at the prompt; without it the router's estimate is used. */
    uint32_t cached_tokens;
    /* Times the caller measured itself (e.g. a replayer in model time),
     * microseconds from the route; 0 = the router's clock. */
    uint64_t ttft_us;
    uint64_t e2e_us;
} wsel_router_finish;

/*
 * The request ended: its load leaves the rank as with wsel_router_finished,
 * then, after the router's mutex is released, the host is told with
 * wsel_host_request_outcome (the live policy's on_request_finished, then
 * its on_request_outcome hook, an isolated policy's too) with:
 *   worker_id, dp_rank  the row it was routed to;
 *   ttft_us             first token - route on the router's clock (0 if
 *                       wsel_router_first_token was never called);
 *   e2e_us              finish - route on the router's clock;
 *   finished_us         the finish on the router's clock;
 *   prompt_tokens       the request's isl (tokens, or a text's estimate);
 *   cached_tokens       overlap it was routed with x block_size, capped at
 *                       the prompt (or info's figure, see its flags);
 *   output_tokens       info's (0 = unknown);
 *   flags               WSEL_OUTCOME_FAILED when info says so.
 * ttft_us / e2e_us non-zero in info replace the router's. The route's
 * wsel_request.timestamp_us is the route time on the same clock. A request
 * whose worker was removed meanwhile is forgotten: nothing is delivered.
 * info may be NULL (as wsel_router_finished); fields past info->struct_size
 * read as 0. Returns 0, WSEL_ENOENT if not in flight, WSEL_EINVAL.
 * [any thread] OWNERSHIP: info is the caller's, read during the call.
 */
WSEL_ROUTER_API int32_t wsel_router_finished_ex(wsel_router *router, uint64_t request_id,
                                                const wsel_router_finish *info);

/* ===================================================================== */
/* KV events                                                              */
/* ===================================================================== */

/*
 * Apply one message as received from rank `dp_rank` of `worker_id`'s
 * socket: three frames, topic, 8-byte big-endian sequence number and the
 * msgpack KVEventBatch (engine/kv_events.h spells the encoding). What is
 * skipped is counted under its reason, at one of two levels:
 *   the whole message: a wrong frame count or sequence frame, bad msgpack,
 *     not a KVEventBatch, a bad field, a block size other than the
 *     router's, a stored block without token ids. The batch is decoded
 *     whole before any of it is applied, so such a message changes nothing;
 *   that one event only (the rest of the batch is applied): an event of an
 *     unknown type, a stored block whose parent the index does not know.
 * Returns 0 (the message was applied, perhaps minus skipped events) or a
 * negative code (the whole message skipped, counted). [any thread]
 */
WSEL_ROUTER_API int32_t wsel_router_apply_kv_message(wsel_router *router,
                                                     uint64_t worker_id, uint32_t dp_rank,
                                                     const void *const *frames,
                                                     const size_t *sizes,
                                                     uint32_t num_frames);

/* ===================================================================== */
/* Counters and state                                                     */
/* ===================================================================== */

/* Why a KV event message or event was skipped. */
#define WSEL_KV_SKIP_FRAMES       0 /* not three frames, or a bad seq frame */
#define WSEL_KV_SKIP_MSGPACK      1 /* not one msgpack value */
#define WSEL_KV_SKIP_SHAPE        2 /* not a KVEventBatch, or a bad field */
#define WSEL_KV_SKIP_UNKNOWN_TYPE 3 /* an event type other than the three */
#define WSEL_KV_SKIP_BLOCK_SIZE   4 /* block_size other than the router's */
#define WSEL_KV_SKIP_PARENT       5 /* a parent block the index does not know */
#define WSEL_KV_SKIP_TOKENS       6 /* no token ids (cannot be re-hashed) */
#define WSEL_KV_SKIP_RANK         7 /* unknown worker/rank or rank mismatch */
#define WSEL_KV_SKIP_REASONS      8

typedef struct wsel_router_counters {
    uint64_t routes;         /* answered routes */
    uint64_t plugin_answers; /* ...answered by the plugin */
    uint64_t fallbacks;      /* ...by the host's built-in policy */
    uint64_t no_candidate;   /* refused: no eligible row */
    uint64_t prompt_blocks;  /* blocks hashed over all routes */
    uint64_t overlap_blocks; /* of which cached on the chosen rank */
    uint64_t kv_messages;    /* KV messages applied */
    uint64_t kv_blocks_stored;
    uint64_t kv_blocks_removed;
    uint64_t kv_cleared;  /* ranks cleared: AllBlocksCleared, a restarted publisher */
    uint64_t kv_seq_gaps; /* sequence numbers skipped by a publisher */
    uint64_t kv_skipped[WSEL_KV_SKIP_REASONS]; /* by WSEL_KV_SKIP_* */
    uint64_t index_blocks;                     /* distinct blocks in the index now */
    uint64_t index_entries;                    /* (block, rank) pairs now */
    uint64_t index_evictions;                  /* entries dropped by the per-rank LRU */
    uint64_t index_bytes;                      /* memory the index holds now */
    uint64_t epoch;
    uint64_t builtin_routes; /* routes answered by WSEL_ROUTE_BUILTIN */
} wsel_router_counters;

/* Snapshot of the counters. [any thread] */
WSEL_ROUTER_API void wsel_router_read_counters(wsel_router *router,
                                               wsel_router_counters *out);

/* What KV events have cost the router, in CPU time, since it was created:
 * the bill for event mode (zero with routing history). Each part is the
 * CPU time (CLOCK_THREAD_CPUTIME_ID) of the thread that did it: the event
 * threads' with wsel_router_options.kv_source EVENTS, a caller's of
 * wsel_router_apply_kv_message otherwise. */
typedef struct wsel_router_kv_cpu {
    /* sizeof(wsel_router_kv_cpu); fields past it are not written. */
    uint32_t struct_size;
    uint32_t reserved;
    uint64_t messages;  /* messages decoded (applied or skipped) */
    uint64_t decode_ns; /* unpacking and re-hashing, no router lock held */
    uint64_t apply_ns;  /* writing the index, under the router's mutex */
} wsel_router_kv_cpu;

/* Snapshot of the KV events' CPU time into out (out->struct_size set by
 * the caller). Returns 0 or WSEL_EINVAL (NULL, or struct_size smaller
 * than the first two fields). [any thread] OWNERSHIP: out is the
 * caller's, written during the call. */
WSEL_ROUTER_API int32_t wsel_router_read_kv_cpu(wsel_router *router,
                                                wsel_router_kv_cpu *out);

typedef struct wsel_router_rank_info {
    uint64_t worker_id;
    uint32_t dp_rank;
    uint32_t active_requests;
    uint64_t active_prefill_tokens;
    uint64_t active_blocks;
    uint64_t cached_blocks; /* index entries of this rank */
    uint32_t flags;         /* WSEL_ROW_* as the next route would see it */
    uint32_t reserved;
} wsel_router_rank_info;

/* Copy up to `max` rows, canonical order, into out; returns the number of
 * rows (which may exceed max). [any thread] */
WSEL_ROUTER_API uint32_t wsel_router_read_ranks(wsel_router *router,
                                                wsel_router_rank_info *out, uint32_t max);
/* The prompt's overlap with every row, as the next route would see it,
 * without routing: out[i] = consecutive leading blocks of tokens[0..num_tokens)
 * (block_size, hashed as route hashes) cached on row i of
 * wsel_router_read_ranks's canonical order, for up to `max` rows. Returns
 * the number of rows (which may exceed max); 0 for a NULL router or NULL
 * tokens with num_tokens > 0. For routers that explain or check their index
 * (an oracle comparing it with another). [any thread]
 * OWNERSHIP: tokens and out are the caller's, used during the call only. */
WSEL_ROUTER_API uint32_t wsel_router_read_overlaps(wsel_router *router,
                                                   const uint32_t *tokens,
                                                   uint32_t num_tokens, uint32_t *out,
                                                   uint32_t max);
/* Static name of a WSEL_KV_SKIP_* reason. */
WSEL_ROUTER_API const char *wsel_router_kv_skip_name(uint32_t reason);

/* ===================================================================== */
/* Replica sync                                                           */
/* ===================================================================== */

/*
 * Several routers (replicas) in front of the same engines share their load
 * over NATS: each publishes its own per-rank load (requests in flight,
 * prefill tokens, decode blocks) and adds the others' to what its routes
 * see (the table's prefill, decode, active requests and the busy flags).
 * A replica's routes never wait on NATS: the load is published from a
 * thread of the sync's own. docs/replicas.md spells the protocol and its
 * bounds:
 *   a rank's change reaches the others in one message, batch_us after it
 *   (changes in between ride along);
 *   every period each replica publishes its whole contribution (a snapshot,
 *   also its heartbeat), so a late joiner or a reconnect converges within
 *   one period;
 *   a replica not heard for lease_periods x period is expired: its load
 *   leaves every other replica's view within (lease_periods + 1) x period;
 *   NATS unreachable: each replica routes on its own load (and what it
 *   heard less than a lease ago), counts the routes, loses none.
 * Optional: built when CMake finds libnats (Debian's libnats-dev);
 * otherwise wsel_router_sync_start answers WSEL_ESTATE.
 */

/* wsel_router_sync_options.flags: stop without a goodbye, as a crashed
 * replica would (the others expire its load after the lease). */
#define WSEL_ROUTER_SYNC_NO_GOODBYE 0x1u
/* wsel_router_sync_options.flags: no echo (echo_us below): this replica's
 * routes count once, as with no sync, until the others report theirs. */
#define WSEL_ROUTER_SYNC_NO_ECHO 0x2u

typedef struct wsel_router_sync_options {
    /* sizeof(wsel_router_sync_options); a zero field means its default. */
    uint32_t struct_size;
    /* WSEL_ROUTER_SYNC_* bits. */
    uint32_t flags;
    /* The NATS server, "nats://host:port" (required; < 512 bytes). */
    const char *url;
    /* The subject every replica of one fleet shares; NULL = "wsel.load"
     * (< 128 bytes). */
    const char *subject;
    /* This replica's id, unique in the fleet, non-zero. Its workers are
     * matched to the others' by worker id and rank. */
    uint64_t replica_id;
    /* Snapshot and heartbeat period, ms; 0 = 1000. */
    uint32_t period_ms;
    /* Periods without a message after which a replica's load is dropped;
     * 0 = 3. */
    uint32_t lease_periods;
    /* Most other replicas remembered at once; 0 = 64 (more are counted in
     * replicas_refused). */
    uint32_t max_replicas;
    /* Wait between NATS reconnect attempts, ms; 0 = 250. */
    uint32_t reconnect_ms;
    /* Changes are gathered this long after the first into one message,
     * us; 0 = 1000 (at most ~1,000 messages a second a replica). */
    uint32_t batch_us;
    /* Echo: for this long after each of its routes, this replica's own
     * later routes count that route's load once more for every other
     * replica live, standing in for the requests they route meanwhile on
     * the same view, which reach it only after a batch and a hop
     * (docs/replicas.md, "Herding"); us; 0 = 2 x batch_us. A slot's echo
     * ends sooner when another replica's figure for it arrives. Not in
     * the published load, nor in either read_ranks. */
    uint32_t echo_us;
} wsel_router_sync_options;

/* Start sharing load. Returns at once even when NATS is unreachable (the
 * client keeps trying; counted as disconnected). WSEL_EINVAL (bad
 * options), WSEL_ESTATE (already started, or built without libnats),
 * WSEL_ENOMEM, WSEL_EIO (the NATS client refused the options).
 * [control thread] OWNERSHIP: opts and its strings are copied. */
WSEL_ROUTER_API int32_t wsel_router_sync_start(wsel_router *router,
                                               const wsel_router_sync_options *opts,
                                               char *err, size_t err_size);
/* 1 when this libwsel-router was built with libnats (replica sync over
 * NATS can start), 0 when wsel_router_sync_start would answer
 * WSEL_ESTATE for it. [any thread] */
WSEL_ROUTER_API int32_t wsel_router_sync_available(void);
/* Stop sharing: say goodbye (unless WSEL_ROUTER_SYNC_NO_GOODBYE), close
 * the connection, drop the others' load from this router's view. A
 * harmless no-op when not started (and for NULL); wsel_router_destroy
 * calls it. [control thread] */
WSEL_ROUTER_API void wsel_router_sync_stop(wsel_router *router);

typedef struct wsel_router_sync_counters {
    /* sizeof(wsel_router_sync_counters); fields past it are not written. */
    uint32_t struct_size;
    /* 1 while connected to NATS. */
    uint32_t connected;
    uint64_t updates_sent;      /* messages of changed ranks published */
    uint64_t snapshots_sent;    /* periodic and reconnect snapshots */
    uint64_t publish_errors;    /* publishes the client refused (dropped) */
    uint64_t messages_applied;  /* the others' messages applied */
    uint64_t messages_bad;      /* malformed, skipped */
    uint64_t unknown_rows;      /* records of a (worker, rank) unknown here */
    uint64_t replicas_live;     /* others heard within the lease, now */
    uint64_t replicas_expired;  /* dropped when their lease ran out */
    uint64_t replicas_refused;  /* beyond max_replicas */
    uint64_t goodbyes;          /* others that stopped cleanly */
    uint64_t disconnects;       /* NATS connection lost */
    uint64_t reconnects;        /* ...and found again */
    uint64_t local_only_routes; /* routes while disconnected */
    uint64_t echo_routes;       /* routes echoed for the others (echo_us) */
} wsel_router_sync_counters;

/* Snapshot of the sync's counters (zeros when not started). 0 or
 * WSEL_EINVAL (NULL, or struct_size below the first two fields).
 * [any thread] OWNERSHIP: out is the caller's, written during the call. */
WSEL_ROUTER_API int32_t wsel_router_sync_read_counters(wsel_router *router,
                                                       wsel_router_sync_counters *out);
/* The other replicas' load per row, summed, as the next route adds it:
 * up to `max` rows in canonical order (wsel_router_read_ranks's), of
 * which active_requests, active_prefill_tokens and active_blocks are set
 * (the rest 0, flags too). Returns the number of rows. [any thread] */
WSEL_ROUTER_API uint32_t wsel_router_sync_read_ranks(wsel_router *router,
                                                     wsel_router_rank_info *out,
                                                     uint32_t max);

/* ===================================================================== */
/* Replica sync through shared memory                                     */
/* ===================================================================== */

/*
 * Processes of one machine (nginx's workers) that route to the same
 * engines share their load through a memory region they all map, instead
 * of NATS: the same per-replica contribution, summed the same way, read
 * back by wsel_router_sync_read_counters and wsel_router_sync_read_ranks
 * (a process is a replica there). Each process owns one slot of the
 * region, where every change of its own load rewrites its whole
 * contribution under the slot's sequence counter (a seqlock: the writer
 * never waits, a reader retries a torn copy a few times and otherwise
 * keeps its last view). wsel_router_shm_poll applies the slots that
 * changed since the last poll, so a route sees the others' load as of its
 * own poll: call it right before each route. Bounds:
 *   a change is in the slot when the call that made it returns;
 *   a process that stops (wsel_router_sync_stop, wsel_router_destroy)
 *   leaves its slot: its load leaves the others' view at their next poll;
 *   a process that dies without stopping is found at most check_ms after
 *   (at the first poll past it): a slot's owner is its process tag (pid
 *   and start time, wsel_router_shm_process_tag), so a pid that another
 *   process took over since, or a zombie, is no owner; a process that
 *   takes over its slot replaces its load at once (a new incarnation).
 * Cost: a change rewrites the process's loaded ranks (32 bytes each); a
 * poll reads one counter per slot and copies the slots that changed.
 * Exclusive with the NATS sync on one router (one contribution each).
 */

/* Bytes a region for max_processes processes of at most max_rows rows
 * each needs. [any thread] */
WSEL_ROUTER_API size_t wsel_router_shm_size(uint32_t max_processes, uint32_t max_rows);
/* Lay out a zeroed region of `size` bytes (at least wsel_router_shm_size)
 * once, before any process starts on it. 0 or WSEL_EINVAL.
 * [the region's creator, alone] OWNERSHIP: region stays the caller's. */
WSEL_ROUTER_API int32_t wsel_router_shm_format(void *region, size_t size,
                                               uint32_t max_processes, uint32_t max_rows);
/* Start sharing this router's load through region (formatted, mapped at
 * any address in each process): claims a free slot (or a dead process's)
 * and publishes. check_ms: how often a poll checks that the other slots'
 * processes live; 0 = 100. WSEL_EINVAL (not formatted), WSEL_ESTATE
 * (replica sync already started), WSEL_EBUSY (every slot live),
 * WSEL_ENOMEM. Stop with wsel_router_sync_stop. [control thread]
 * OWNERSHIP: region must stay mapped until the sync stops. */
WSEL_ROUTER_API int32_t wsel_router_shm_start(wsel_router *router, void *region,
                                              uint32_t check_ms, char *err,
                                              size_t err_size);
/* Process pid's tag: its pid and its start time (Linux's /proc/PID/stat;
 * where that cannot be read, the pid alone), or 0 when no such process
 * lives (a zombie neither). The region's owners are tags; a caller that
 * keeps per-process records beside the region uses the same check.
 * [any thread] */
WSEL_ROUTER_API uint64_t wsel_router_shm_process_tag(int pid);
/* 1 when the process tagged `tag` is gone: no process has its pid, it is
 * a zombie, or the one that has it started at another time (its pid was
 * reused); 0 while it lives, and for 0. [any thread] */
WSEL_ROUTER_API int wsel_router_shm_process_gone(uint64_t tag);
/* Apply the other processes' changed contributions, drop the dead ones'.
 * A no-op without a shared-memory sync. Never waits on another process
 * (takes this router's own mutex). [one thread at a time: the routing
 * thread] */
WSEL_ROUTER_API void wsel_router_shm_poll(wsel_router *router);

/* ===================================================================== */
/* Routing history through shared memory                                  */
/* ===================================================================== */

/*
 * Processes of one machine in history mode (WSEL_ROUTER_KV_HISTORY) that
 * route to the same engines share what they routed: each route's history
 * record (its rank and its prompt's block hashes) is appended to a ring in
 * a region they all map, and wsel_router_history_poll applies the other
 * processes' records to this router's index, so every index holds every
 * process's routes, as one router's index would. An entry holds up to
 * WSEL_ROUTER_HISTORY_ENTRY_BLOCKS hashes (a longer prompt takes several,
 * written deepest first, as a route records them). A writer reserves an
 * entry with one atomic add and never waits; a reader copies an entry
 * under its stamp (a seqlock) and keeps it only if no writer reused it
 * meanwhile. Call the poll right before each route (and from time to time
 * when idle, so the ring does not turn over under it). Bounds:
 *   a record is in the ring when the call that recorded it returns (the
 *   route, or the flush of a deferred one: WSEL_ROUTE_DEFER_HISTORY);
 *   a process that polls less often than the ring turns over misses the
 *   entries overwritten meanwhile (counted in `lost`);
 *   an entry whose writer died halfway is skipped once it has stayed
 *   unwritten for stall_ms (counted in `lost`);
 *   a process that starts applies the whole ring first: what the others
 *   routed recently (a reloaded or respawned worker starts warm).
 * Cost: a route writes its prompt's hashes once more (8 bytes a block,
 * 512 bytes an entry); every process applies every other process's
 * records to its own index (the index work of all routes, in each).
 * Records of a (worker, rank) this router does not have are skipped and
 * counted. Independent of the load sync (wsel_router_shm_*): use both.
 */

/* Block hashes per entry of the ring. */
#define WSEL_ROUTER_HISTORY_ENTRY_BLOCKS 60u

/* Bytes a ring of `entries` entries needs. [any thread] */
WSEL_ROUTER_API size_t wsel_router_history_size(uint32_t entries);
/* Lay out a zeroed region of `size` bytes (at least
 * wsel_router_history_size) as a ring of `entries` entries, once, before
 * any process starts on it. 0 or WSEL_EINVAL. [the region's creator,
 * alone] OWNERSHIP: region stays the caller's. */
WSEL_ROUTER_API int32_t wsel_router_history_format(void *region, size_t size,
                                                   uint32_t entries);
/* Share this router's routing history through region (formatted, mapped
 * at any address in each process) and apply what the ring holds.
 * stall_ms: how long an entry may stay half-written before a reader skips
 * it; 0 = 100. WSEL_EINVAL (not formatted), WSEL_ESTATE (event mode, or
 * already started), WSEL_ENOMEM. [control thread] OWNERSHIP: region must
 * stay mapped until wsel_router_history_stop or wsel_router_destroy. */
WSEL_ROUTER_API int32_t wsel_router_history_start(wsel_router *router, void *region,
                                                  uint32_t stall_ms, char *err,
                                                  size_t err_size);
/* Apply the other processes' entries written since the last poll (under
 * the router's mutex). A no-op when not started. Never waits on another
 * process. [any thread] */
WSEL_ROUTER_API void wsel_router_history_poll(wsel_router *router);
/* Stop sharing (the index keeps what it learnt). A harmless no-op when
 * not started, and for NULL. [control thread] */
WSEL_ROUTER_API void wsel_router_history_stop(wsel_router *router);

typedef struct wsel_router_history_counters {
    /* sizeof(wsel_router_history_counters); fields past it are not written. */
    uint32_t struct_size;
    uint32_t reserved;
    uint64_t published;    /* entries this router wrote */
    uint64_t applied;      /* the others' entries applied to the index */
    uint64_t lost;         /* the others' entries overwritten unread, or half-written */
    uint64_t unknown_rows; /* entries of a (worker, rank) unknown here */
} wsel_router_history_counters;

/* Snapshot of the shared history's counters (zeros when not started). 0
 * or WSEL_EINVAL (NULL, or struct_size below the first two fields).
 * [any thread] OWNERSHIP: out is the caller's, written during the call. */
WSEL_ROUTER_API int32_t wsel_router_history_read_counters(
    wsel_router *router, wsel_router_history_counters *out);

#ifdef __cplusplus
}
#endif
#endif /* WSEL_ROUTER_H */
