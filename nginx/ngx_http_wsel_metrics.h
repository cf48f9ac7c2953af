/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_metrics.h -- every figure the status location prints, one
 * list each (X-macros, as abi/wsel.h's WSEL_ERRNO_MAP), read by both the
 * JSON and the Prometheus writers (ngx_http_wsel_status.c), and the
 * module's own histograms and per-rank counters (ngx_http_wsel_metrics.c).
 * nginx/README.md's "Status" section documents each list's entries;
 * tests/nginx/nginx_metrics_test.py reads this file to check both outputs.
 *
 * Every counter (type "counter", the reasons, the histograms, the ranks'
 * counters) is the whole upstream's: every worker's, the exited ones'
 * included, summed in the zone the workers share (ngx_http_wsel_totals.c)
 * from start_time on. The load gauges (active_requests, the ranks'
 * active_*) are the whole upstream's too; the other gauges are the
 * answering worker's (worker_pid).
 */

#ifndef NGX_HTTP_WSEL_METRICS_H_INCLUDED_
#define NGX_HTTP_WSEL_METRICS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "wsel_router.h"


/* How a value is printed: as it is, or nanoseconds as seconds (Prometheus
 * only; the JSON keeps nanoseconds, its key says so). */
#define NGX_HTTP_WSEL_ONE  0
#define NGX_HTTP_WSEL_NS   1


/*
 * The upstream's scalars: X(json key, Prometheus name without "wsel_",
 * type, unit, help, value). A value reads the status snapshot `s`
 * (ngx_http_wsel_status.c): s->up the upstream, s->hc the host's counters,
 * s->rcn the router's, s->kc the KV events' CPU time, s->nats wsel_sync's
 * (zeros without it), s->hcn the shared history's.
 */
#define NGX_HTTP_WSEL_SCALARS(X)                                              \
    X("start_time", "start_time_seconds", "gauge", NGX_HTTP_WSEL_ONE,         \
      "Unix time the upstream's counters started (its zone's creation).",    \
      s->started)                                                             \
    X("workers", "workers", "gauge", NGX_HTTP_WSEL_ONE,                       \
      "nginx workers whose load the routes add up (this one "                 \
      "included; with wsel_sync, every instance's).",                         \
      s->sc.replicas_live + 1)                                                \
    X("active_requests", "active_requests", "gauge", NGX_HTTP_WSEL_ONE,       \
      "Requests in flight on all ranks, every worker's.", s->active)          \
    X("worker_routes", "worker_routes", "gauge", NGX_HTTP_WSEL_ONE,           \
      "Routes the answering worker made itself (its share of routes).",       \
      s->rcn.routes)                                                          \
    X("history_applied", "history_applied_total", "counter",                  \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Other workers' history records applied to a worker's index.",          \
      s->hcn.applied)                                                         \
    X("history_lost", "history_lost_total", "counter", NGX_HTTP_WSEL_ONE,     \
      "Other workers' history records a worker missed (ring overrun).",       \
      s->hcn.lost)                                                            \
    X("shared_switches", "shared_switches_total", "counter",                  \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Policy switches another worker's admin location made, taken here.",    \
      s->up->shared_switches)                                                 \
    X("selects", "selects_total", "counter", NGX_HTTP_WSEL_ONE,               \
      "Selects answered by the host (the policy or its fallback).",           \
      s->hc.selects)                                                          \
    X("plugin_answers", "plugin_answers_total", "counter", NGX_HTTP_WSEL_ONE, \
      "Selects answered by the policy plugin itself.", s->hc.plugin_answers)  \
    X("ejections", "ejections_total", "counter", NGX_HTTP_WSEL_ONE,           \
      "Policies ejected by the host after repeated failures.",                \
      s->hc.ejections)                                                        \
    X("switches", "switches_total", "counter", NGX_HTTP_WSEL_ONE,             \
      "Policy switches the host accepted.", s->hc.switches)                   \
    X("failed_switches", "failed_switches_total", "counter",                  \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Policy switches the host refused (the old policy kept serving).",      \
      s->hc.failed_switches)                                                  \
    X("log_dropped", "log_dropped_total", "counter", NGX_HTTP_WSEL_ONE,       \
      "Plugin log messages dropped by the host's rate limit.",                \
      s->hc.log_dropped)                                                      \
    X("requests", "requests_total", "counter", NGX_HTTP_WSEL_ONE,             \
      "Requests that reached the module's route step.", s->up->requests)     \
    X("routes", "routes_total", "counter", NGX_HTTP_WSEL_ONE,                 \
      "Requests the router answered with a server and rank.", s->rcn.routes)  \
    X("builtin_routes", "builtin_routes_total", "counter", NGX_HTTP_WSEL_ONE, \
      "Routes answered by the built-in policy (no usable prompt).",           \
      s->rcn.builtin_routes)                                                  \
    X("no_prompt", "no_prompt_total", "counter", NGX_HTTP_WSEL_ONE,           \
      "Requests without a usable prompt.", s->up->no_prompt)                  \
    X("body_copies", "body_copies_total", "counter", NGX_HTTP_WSEL_ONE,       \
      "Request bodies nginx read in pieces, joined into one buffer.",         \
      s->up->body_copies)                                                     \
    X("tokenized_text", "tokenized_text_total", "counter", NGX_HTTP_WSEL_ONE, \
      "Text prompts wsel_tokenizer turned into token ids.", s->up->tok_text)  \
    X("tokenized_chat", "tokenized_chat_total", "counter", NGX_HTTP_WSEL_ONE, \
      "Chat requests wsel_tokenizer rendered and turned into token ids.",     \
      s->up->tok_chat)                                                        \
    X("tokenize_fallbacks", "tokenize_fallbacks_total", "counter",            \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Prompts wsel_tokenizer refused, hashed as text (approximate).",        \
      s->up->tok_fallbacks)                                                   \
    X("tokenized_tokens", "tokenized_tokens_total", "counter",                \
      NGX_HTTP_WSEL_ONE, "Token ids wsel_tokenizer produced.",                \
      s->up->tok_tokens)                                                      \
    X("tokenize_cache_hits", "tokenize_cache_hits_total", "counter",          \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Chat requests whose leading messages' ids came from the cache.",       \
      s->up->tok_cache_hits)                                                  \
    X("tokenize_cache_misses", "tokenize_cache_misses_total", "counter",      \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Chat requests with leading system messages not in the cache.",         \
      s->up->tok_cache_misses)                                                \
    X("tokenize_cache_tokens", "tokenize_cache_tokens_total", "counter",      \
      NGX_HTTP_WSEL_ONE, "Token ids taken from the cache, not encoded.",      \
      s->up->tok_cache_tokens)                                                \
    X("route_errors", "route_errors_total", "counter", NGX_HTTP_WSEL_ONE,     \
      "Routes the router refused (round-robin served).", s->up->route_errors) \
    X("retries", "retries_total", "counter", NGX_HTTP_WSEL_ONE,               \
      "Upstream tries after the first (round-robin chose).", s->up->retries)  \
    X("peer_unavailable", "peer_unavailable_total", "counter",                \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Routed servers nginx held down (round-robin served).",                 \
      s->up->peer_unavailable)                                                \
    X("upstream_failures", "upstream_failures_total", "counter",              \
      NGX_HTTP_WSEL_ONE, "Upstream tries nginx counted failed.",              \
      s->up->upstream_failures)                                               \
    X("failed_outcomes", "failed_outcomes_total", "counter",                  \
      NGX_HTTP_WSEL_ONE, "Routed requests that ended failed.",                \
      s->up->failed_outcomes)                                                 \
    X("responses_cut", "responses_cut_total", "counter", NGX_HTTP_WSEL_ONE,   \
      "Responses whose end never reached the client.", s->up->responses_cut)  \
    X("peers_down", "peers_down", "gauge", NGX_HTTP_WSEL_ONE,                 \
      "Servers nginx holds down now, excluded from the policy's table.",      \
      s->up->ndown)                                                           \
    X("peers_marked_down", "peers_marked_down_total", "counter",              \
      NGX_HTTP_WSEL_ONE, "Times a server was excluded as down.",              \
      s->up->peers_marked_down)                                               \
    X("admin_switches", "admin_switches_total", "counter", NGX_HTTP_WSEL_ONE, \
      "Policy switches accepted by the admin location.",                      \
      s->up->admin_switches)                                                  \
    X("admin_refused", "admin_refused_total", "counter", NGX_HTTP_WSEL_ONE,   \
      "Policy switches refused by the admin location.", s->up->admin_refused) \
    X("prompt_blocks", "prompt_blocks_total", "counter", NGX_HTTP_WSEL_ONE,   \
      "Prompt blocks hashed by the router over all routes.",                  \
      s->rcn.prompt_blocks)                                                   \
    X("overlap_blocks", "overlap_blocks_total", "counter", NGX_HTTP_WSEL_ONE, \
      "Prompt blocks the router predicted cached on the chosen rank.",        \
      s->rcn.overlap_blocks)                                                  \
    X("engine_prompt_tokens", "engine_prompt_tokens_total", "counter",        \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Prompt tokens of responses that reported cached_tokens.",              \
      s->engine.prompt_tokens)                                                \
    X("engine_cached_tokens", "engine_cached_tokens_total", "counter",        \
      NGX_HTTP_WSEL_ONE,                                                      \
      "Prompt tokens the engines served from their prefix cache.",            \
      s->engine.cached_tokens)                                                \
    X("kv_messages", "kv_messages_total", "counter", NGX_HTTP_WSEL_ONE,       \
      "KV event messages applied to the index.", s->rcn.kv_messages)          \
    X("kv_blocks_stored", "kv_blocks_stored_total", "counter",                \
      NGX_HTTP_WSEL_ONE, "Blocks KV events stored in the index.",             \
      s->rcn.kv_blocks_stored)                                                \
    X("kv_blocks_removed", "kv_blocks_removed_total", "counter",              \
      NGX_HTTP_WSEL_ONE, "Blocks KV events removed from the index.",          \
      s->rcn.kv_blocks_removed)                                               \
    X("kv_cleared", "kv_cleared_total", "counter", NGX_HTTP_WSEL_ONE,         \
      "Ranks cleared: AllBlocksCleared, a restarted publisher.",              \
      s->rcn.kv_cleared)                                                      \
    X("kv_seq_gaps", "kv_seq_gaps_total", "counter", NGX_HTTP_WSEL_ONE,       \
      "KV event sequence numbers a publisher skipped.", s->rcn.kv_seq_gaps)   \
    X("kv_cpu_messages", "kv_cpu_messages_total", "counter",                  \
      NGX_HTTP_WSEL_ONE, "KV event messages decoded (applied or skipped).",   \
      s->kc.messages)                                                         \
    X("kv_decode_ns", "kv_decode_seconds_total", "counter", NGX_HTTP_WSEL_NS, \
      "CPU time unpacking and re-hashing KV events, off the router's lock.",  \
      s->kc.decode_ns)                                                        \
    X("kv_apply_ns", "kv_apply_seconds_total", "counter", NGX_HTTP_WSEL_NS,   \
      "CPU time writing KV events into the index, under the router's lock.",  \
      s->kc.apply_ns)                                                         \
    X("index_blocks", "index_blocks", "gauge", NGX_HTTP_WSEL_ONE,             \
      "Distinct blocks in the router's index.", s->rcn.index_blocks)          \
    X("index_entries", "index_entries", "gauge", NGX_HTTP_WSEL_ONE,           \
      "Block and rank pairs in the router's index.", s->rcn.index_entries)    \
    X("index_evictions", "index_evictions_total", "counter",                  \
      NGX_HTTP_WSEL_ONE, "Index entries dropped by the per-rank LRU.",        \
      s->rcn.index_evictions)                                                 \
    X("index_bytes", "index_bytes", "gauge", NGX_HTTP_WSEL_ONE,               \
      "Memory the router's index holds.", s->rcn.index_bytes)                 \
    X("sync_replica_id", "sync_replica_id", "gauge",                          \
      NGX_HTTP_WSEL_ONE, "This worker's replica id on NATS (0: none).",       \
      s->up->sync.replica_id)                                                 \
    X("sync_connected", "sync_connected", "gauge",                            \
      NGX_HTTP_WSEL_ONE, "1 while this worker's replica is on NATS.",         \
      s->nats.connected)                                                      \
    X("sync_replicas_live", "sync_replicas_live", "gauge",                    \
      NGX_HTTP_WSEL_ONE, "Other replicas (any instance's workers) live.",     \
      s->nats.replicas_live)                                                  \
    X("sync_replicas_expired", "sync_replicas_expired_total", "counter",      \
      NGX_HTTP_WSEL_ONE, "Replicas dropped when their lease ran out.",        \
      s->nats.replicas_expired)                                               \
    X("sync_replicas_refused", "sync_replicas_refused_total", "counter",      \
      NGX_HTTP_WSEL_ONE, "Replicas not followed (beyond 256).",               \
      s->nats.replicas_refused)                                               \
    X("sync_goodbyes", "sync_goodbyes_total", "counter",                      \
      NGX_HTTP_WSEL_ONE, "Replicas that stopped cleanly (a goodbye).",        \
      s->nats.goodbyes)                                                       \
    X("sync_local_only_routes", "sync_local_only_routes_total", "counter",    \
      NGX_HTTP_WSEL_ONE, "Routes made while disconnected from NATS.",         \
      s->nats.local_only_routes)                                              \
    X("sync_echo_routes", "sync_echo_routes_total", "counter",                \
      NGX_HTTP_WSEL_ONE, "Routes echoed for the other replicas (echo_us).",   \
      s->nats.echo_routes)                                                    \
    X("sync_disconnects", "sync_disconnects_total", "counter",                \
      NGX_HTTP_WSEL_ONE, "NATS connections lost.",                            \
      s->nats.disconnects)                                                    \
    X("sync_reconnects", "sync_reconnects_total", "counter",                  \
      NGX_HTTP_WSEL_ONE, "NATS connections found again.",                     \
      s->nats.reconnects)                                                     \
    X("sync_updates_sent", "sync_updates_sent_total", "counter",              \
      NGX_HTTP_WSEL_ONE, "Messages of changed ranks published.",              \
      s->nats.updates_sent)                                                   \
    X("sync_snapshots_sent", "sync_snapshots_sent_total", "counter",          \
      NGX_HTTP_WSEL_ONE, "Whole-load snapshots (heartbeats) published.",      \
      s->nats.snapshots_sent)                                                 \
    X("sync_publish_errors", "sync_publish_errors_total", "counter",          \
      NGX_HTTP_WSEL_ONE, "Publishes the NATS client refused.",                \
      s->nats.publish_errors)                                                 \
    X("sync_messages_applied", "sync_messages_applied_total", "counter",      \
      NGX_HTTP_WSEL_ONE, "Other replicas' messages applied.",                 \
      s->nats.messages_applied)                                               \
    X("sync_messages_bad", "sync_messages_bad_total", "counter",              \
      NGX_HTTP_WSEL_ONE, "Malformed messages on the subject, skipped.",       \
      s->nats.messages_bad)                                                   \
    X("sync_unknown_rows", "sync_unknown_rows_total", "counter",              \
      NGX_HTTP_WSEL_ONE, "Records of a server or rank unknown here.",         \
      s->nats.unknown_rows)


/*
 * Counters by reason: X(json total key, json object key, Prometheus name,
 * help, reasons, name of reason r, value for reason r). The JSON has the
 * total and an object by reason; Prometheus a `reason` label. A reason
 * the library names "unknown" is none (not printed).
 */
#define NGX_HTTP_WSEL_BY_REASON(X)                                            \
    X("fallbacks", "fallbacks_by_reason", "fallbacks_total",                  \
      "Selects the host's built-in policy answered, by reason.",              \
      WSEL_FALLBACK_REASONS_MAX, wsel_fallback_reason_name(r),             \
      r < WSEL_FALLBACK_REASONS ? s->hc.fallback_by_reason[r]                 \
      : s->hc.fallback_by_reason_more[r - WSEL_FALLBACK_REASONS])             \
    X("kv_skipped", "kv_skipped_by_reason", "kv_skipped_total",               \
      "KV events the router could not apply, by reason.",                     \
      WSEL_KV_SKIP_REASONS, wsel_router_kv_skip_name(r), s->rcn.kv_skipped[r])


/*
 * The module's histograms: X(field, json prefix, Prometheus name, help).
 * JSON: PREFIX_count, PREFIX_ns_sum, PREFIX_us_p50 (the upper bound of
 * the bucket holding the median); Prometheus: NAME_bucket, _sum, _count.
 * Bucket bounds: ngx_http_wsel_metrics.c.
 */
#define NGX_HTTP_WSEL_HISTOGRAMS(X)                                           \
    X(route, "route_time", "route_duration_seconds",                          \
      "Time the module spent routing a request (prompt, hashes, policy; "     \
      "with wsel_tokenizer, the wait for its task).")                         \
    X(ttft, "ttft", "time_to_first_token_seconds",                            \
      "Time from the route to the response's first byte.")                    \
    X(e2e, "e2e", "request_duration_seconds",                                 \
      "Time from the route to the end of a response that did not fail.")


/*
 * Per server and rank: X(json key, Prometheus name without "wsel_", type,
 * help, value). A value reads `ri` (the router's wsel_router_rank_info),
 * `oi` (the part of ri's load the other workers and replicas add), `rc`
 * (the module's ngx_http_wsel_rank_counters_t) and `down` (nginx holds
 * the rank's server down). Prometheus labels: server, dp_rank.
 */
#define NGX_HTTP_WSEL_RANKS(X)                                                \
    X("active_requests", "rank_active_requests", "gauge",                     \
      "Requests in flight on the rank.", ri->active_requests)                 \
    X("active_prefill_tokens", "rank_active_prefill_tokens", "gauge",         \
      "Prompt tokens waiting for prefill on the rank.",                       \
      ri->active_prefill_tokens)                                              \
    X("active_blocks", "rank_active_blocks", "gauge",                         \
      "KV blocks the rank's requests in flight hold.", ri->active_blocks)     \
    X("cached_blocks", "rank_cached_blocks", "gauge",                         \
      "Blocks the router's index lists on the rank.", ri->cached_blocks)      \
    X("flags", "rank_flags", "gauge",                                         \
      "The rank's WSEL_ROW_* bits as the next route sees them.", ri->flags)   \
    X("others_active_requests",                                               \
      "rank_others_active_requests", "gauge",                                 \
      "Of active_requests, other workers' and replicas'.",                    \
      oi->active_requests)                                                    \
    X("others_active_prefill_tokens",                                         \
      "rank_others_active_prefill_tokens", "gauge",                           \
      "Of active_prefill_tokens, the others'.",                               \
      oi->active_prefill_tokens)                                              \
    X("others_active_blocks",                                                 \
      "rank_others_active_blocks", "gauge",                                   \
      "Of active_blocks, other workers' and replicas'.",                      \
      oi->active_blocks)                                                      \
    X("busy", "rank_busy", "gauge",                                           \
      "1 when the rank is busy (WSEL_ROW_BUSY).",                             \
      (ri->flags & WSEL_ROW_BUSY) != 0)                                       \
    X("excluded", "rank_excluded", "gauge",                                   \
      "1 when the rank is excluded from the policy (WSEL_ROW_EXCLUDED).",     \
      (ri->flags & WSEL_ROW_EXCLUDED) != 0)                                   \
    X("down", "rank_down", "gauge",                                           \
      "1 when nginx holds the rank's server down.", down)                     \
    X("routed", "rank_routed_total", "counter",                               \
      "Requests routed to the rank.", rc->routed)                             \
    X("finished", "rank_finished_total", "counter",                           \
      "Routed requests that ended (failed or not).", rc->finished)            \
    X("failed", "rank_failed_total", "counter",                               \
      "Routed requests that ended failed.", rc->failed)                       \
    X("engine_prompt_tokens", "rank_engine_prompt_tokens_total", "counter",   \
      "Prompt tokens of the rank's responses that reported cached_tokens.",   \
      rc->prompt_tokens)                                                      \
    X("engine_cached_tokens", "rank_engine_cached_tokens_total", "counter",   \
      "Prompt tokens the rank's engine served from its prefix cache.",        \
      rc->cached_tokens)


#define NGX_HTTP_WSEL_HIST_ENUM(field, json, prom, help)                      \
    NGX_HTTP_WSEL_HIST_##field,

enum {
    NGX_HTTP_WSEL_HISTOGRAMS(NGX_HTTP_WSEL_HIST_ENUM)
    NGX_HTTP_WSEL_HISTS
};

#undef NGX_HTTP_WSEL_HIST_ENUM


/* Most finite bucket bounds of a histogram. */
#define NGX_HTTP_WSEL_BOUNDS_MAX  16


/* Observations by bucket (not cumulative; the last is +Inf). */
typedef struct {
    uint64_t                        count[NGX_HTTP_WSEL_BOUNDS_MAX + 1];
    uint64_t                        sum_ns;
} ngx_http_wsel_hist_t;


/* A rank's requests as the module saw them. */
typedef struct {
    uint64_t                        routed;
    uint64_t                        finished;
    uint64_t                        failed;
    uint64_t                        prompt_tokens; /* of responses with */
    uint64_t                        cached_tokens; /* cached_tokens */
} ngx_http_wsel_rank_counters_t;


/* The module's own measurements of one upstream, in the worker. */
typedef struct {
    ngx_http_wsel_hist_t            hist[NGX_HTTP_WSEL_HISTS];
    ngx_http_wsel_rank_counters_t  *rank;      /* nranks, by rank_base */
    ngx_uint_t                     *rank_base; /* by worker id - 1 */
    ngx_uint_t                     *rank_dp;   /* by worker id - 1 */
    ngx_uint_t                      nworkers;
    time_t                          started;
} ngx_http_wsel_metrics_t;


/* The ranks' counters for router's current ranks, from pool, zeroed;
 * NGX_OK or NGX_ERROR. [worker start] */
ngx_int_t ngx_http_wsel_metrics_init(ngx_http_wsel_metrics_t *m,
    ngx_pool_t *pool, wsel_router *router);

/* A rank's counters, or NULL for a rank the router did not have at the
 * worker's start. [the worker's thread] */
ngx_http_wsel_rank_counters_t *ngx_http_wsel_rank_counters(
    ngx_http_wsel_metrics_t *m, uint64_t worker_id, uint32_t dp_rank);

/* One observation of ns nanoseconds into histogram h (NGX_HTTP_WSEL_HIST_*).
 * [the worker's thread] */
void ngx_http_wsel_observe(ngx_http_wsel_metrics_t *m, ngx_uint_t h,
    uint64_t ns);

/* Histogram h's finite bounds, in nanoseconds, ascending; *n their number. */
const uint64_t *ngx_http_wsel_bounds(ngx_uint_t h, ngx_uint_t *n);


#endif /* NGX_HTTP_WSEL_METRICS_H_INCLUDED_ */
