// SPDX-License-Identifier: Apache-2.0
/*
 * wsel_host.h -- libwsel-host, the router side of wsel.
 *
 * A router links libwsel-host to load policy plugins (wsel.h) by path,
 * switch them under live traffic, build and validate candidate tables, and
 * get an answer for every request even when a plugin misbehaves.
 *
 * Threads:
 *   [control thread]  one thread at a time per host object: create, switch,
 *                     topology changes, destroy.
 *   [any thread]      select, request_finished, counters: any number of
 *                     threads at once, never blocked by a switch.
 *
 * Errors: functions return 0 or a negative WSEL_E* (see wsel.h); those that
 * can fail for a reason a person must read take `err`/`err_size`, a buffer
 * the caller owns, and write a NUL-terminated message naming the cause
 * (the offending path, key or column). `err` may be NULL.
 *
 * All state lives in the objects below: several hosts may coexist in one
 * process.
 *
 * Stability (docs/abi-stability.md): libwsel-host.so.1 keeps every 1.0
 * function, struct layout and constant for the life of SONAME 1. A struct
 * the caller allocates either carries `struct_size` (a zero-filled tail, or
 * a zero field, means the default) and may grow at its end, or has a frozen
 * layout pinned by static assertions below and in tests/abi. Fields are
 * appended, never inserted or renamed; a renamed field keeps its old name
 * as an alias. An incompatible change would take SONAME 2.
 */
#ifndef WSEL_HOST_H
#define WSEL_HOST_H

#include "wsel.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define WSEL_HOST_API __attribute__((visibility("default")))
#else
#define WSEL_HOST_API
#endif

/* ===================================================================== */
/* Errors                                                                 */
/* ===================================================================== */

/* Static message for a WSEL_E* code; "unknown error" for anything else.
 * Never NULL. [any thread] */
WSEL_HOST_API const char *wsel_strerror(int32_t code);

/* Static name of a WSEL_E* code, e.g. "WSEL_ECONFIG". [any thread] */
WSEL_HOST_API const char *wsel_errname(int32_t code);

/* ===================================================================== */
/* Shared helpers (also offered to plugins through wsel_host_api)         */
/* ===================================================================== */

/* Seed `rng` from a 64-bit seed (splitmix64 expansion; never all-zero).
 * [any thread] */
WSEL_HOST_API void wsel_rng_seed(wsel_rng *rng, uint64_t seed);
/* Next 64 bits (xoshiro256**). [any thread; one rng per thread] */
WSEL_HOST_API uint64_t wsel_rng_u64(wsel_rng *rng);
/* Uniform double in [0, 1), 53 bits. [any thread; one rng per thread] */
WSEL_HOST_API double wsel_rng_uniform(wsel_rng *rng);
/* Uniform integer in [0, n) without modulo bias; 0 without a draw when n
 * is 0. Contract in wsel_host_api.rng_below. [any thread; one rng per thread] */
WSEL_HOST_API uint32_t wsel_rng_below(wsel_rng *rng, uint32_t n);

/* Dynamo's softmax_sample; contract in wsel_host_api.softmax_sample. */
WSEL_HOST_API int32_t wsel_softmax_sample(const double *costs, const uint8_t *flags,
                                          uint32_t n, uint8_t skip_mask,
                                          double temperature, double u,
                                          uint32_t *out_row);
/* Argmin with random tie-break; contract in wsel_host_api.argmin. */
WSEL_HOST_API int32_t wsel_argmin(const double *costs, const uint8_t *flags, uint32_t n,
                                  uint8_t skip_mask, wsel_rng *rng, uint32_t *out_row);

/* "Not excluded; busy only when every eligible row is busy" as a skip
 * mask; contract in wsel_host_api.eligible_skip. [any thread] */
WSEL_HOST_API int32_t wsel_eligible_skip(const uint8_t *flags, uint32_t n,
                                         uint8_t *out_skip, uint32_t *out_count);

/* Signature of wsel_host_api.log. */
typedef void (*wsel_api_log_fn)(const wsel_host_api *host, int32_t level,
                                const char *msg);

/*
 * Fill the table of host functions a plugin's create() receives: this
 * library's ABI version and struct_size, its helpers (RNG, softmax_sample,
 * argmin, and whatever later minors append), and the caller's `log` and
 * `host_ctx`. wsel_host_create fills its own with it; a program that hosts
 * plugins by itself (the isolated helper, a validator, a test harness) calls
 * it instead of listing the helpers, so every host hands plugins the same
 * table. [any thread, own api]
 * OWNERSHIP: `api` is the caller's; it must outlive every instance created
 * with it. `host_ctx` is stored as is.
 */
WSEL_HOST_API void wsel_host_api_init(wsel_host_api *api, void *host_ctx,
                                      wsel_api_log_fn log);

/* ===================================================================== */
/* Candidate tables                                                       */
/* ===================================================================== */

/*
 * wsel_rank_state: what a router knows about one (worker, dp_rank), the raw
 * input from which wsel_table_build computes the table's columns.
 */
typedef struct wsel_rank_state {
    uint64_t worker_id;
    uint32_t dp_rank;
    /* Consecutive prefix blocks of the request cached on this rank. */
    uint32_t overlap_blocks;
    /* Prefill tokens already queued on the rank (its backlog). */
    uint64_t active_prefill_tokens;
    /* KV blocks active on the rank. */
    uint64_t active_blocks;
    /* KV capacity in blocks, 0 = unknown. */
    uint64_t kv_capacity_blocks;
    /* Requests in flight on the rank. */
    uint32_t active_requests;
    /* WSEL_ROW_BUSY / WSEL_ROW_EXCLUDED as the router sees the rank; set
     * WSEL_ROW_NO_LOAD when it has no load record (then the two active_*
     * fields are ignored and Dynamo's defaults used). */
    uint8_t flags;
    uint8_t reserved[3];
} wsel_rank_state;
/* Frozen layout: routers pass arrays of it, so its size is the stride. A
 * rank field added later comes with a new build function taking a stride. */

/*
 * wsel_table_buf: storage for a wsel_table, allocated once and reused for
 * every request (no allocation per request).
 * OWNERSHIP: the caller owns the struct; wsel_table_buf_init allocates the
 * columns, wsel_table_buf_free releases them. `table` points into it and is
 * valid until the next build or free.
 */
typedef struct wsel_table_buf {
    wsel_table table;
    uint32_t capacity_rows;
    uint32_t reserved0;
    void *storage; /* one allocation holding every column */
} wsel_table_buf;
/* Frozen layout (it embeds the 1.0 wsel_table). A table that grows in a
 * later ABI minor gets a new buffer type; this one stays as it is. */

/* Allocate columns for up to `capacity_rows` rows. [any thread, own buf] */
WSEL_HOST_API int32_t wsel_table_buf_init(wsel_table_buf *buf, uint32_t capacity_rows);
/* Release the columns; a zeroed or already freed buf is a harmless no-op. */
WSEL_HOST_API void wsel_table_buf_free(wsel_table_buf *buf);

/*
 * Fill buf->table from `num_ranks` rank states for `request` (which supplies
 * isl_tokens, block_size and overlap_score_weight):
 *   prefill_tokens = max(isl - overlap_blocks * block_size, 0)
 *                    + active_prefill_tokens
 *   decode_blocks  = active_blocks + max(isl / block_size - overlap_blocks, 0)
 *   cost = overlap_score_weight * (prefill_tokens / block_size) + decode_blocks
 * and, for a rank flagged WSEL_ROW_NO_LOAD, prefill_tokens = isl and
 * decode_blocks = isl / block_size (Dynamo's defaults). A cost that would
 * overflow (absurd weights) saturates at DBL_MAX, so costs stay finite. Ranks must arrive
 * in canonical order (worker_id, then dp_rank, strictly increasing); the group view and
 * `topology_epoch` (copied from the argument) are filled too. Returns 0, WSEL_EINVAL,
 * WSEL_ERANGE (more ranks than capacity) or WSEL_ETABLE (order, with a message in err).
 * No allocation.
 */
WSEL_HOST_API int32_t wsel_table_build(wsel_table_buf *buf, const wsel_request *request,
                                       const wsel_rank_state *ranks, uint32_t num_ranks,
                                       uint64_t topology_epoch, char *err,
                                       size_t err_size);

/*
 * Check a table handed in by a router: struct_size, non-NULL columns,
 * num_rows >= 1, canonical order, a group view that matches the rows,
 * finite costs, no unknown flag bits, reserved fields zero. Returns 0 or
 * WSEL_ETABLE with a message naming the column and row. [any thread]
 */
WSEL_HOST_API int32_t wsel_table_validate(const wsel_table *table, char *err,
                                          size_t err_size);

/* Check a request: struct_size, block_size > 0, block_hashes present when
 * counted, finite non-negative weight and temperature, uniform in [0,1),
 * rng non-NULL. Returns 0 or WSEL_EREQUEST. [any thread] */
WSEL_HOST_API int32_t wsel_request_validate(const wsel_request *request, char *err,
                                            size_t err_size);

/* ===================================================================== */
/* Plugin libraries and configuration (lower level than wsel_host)        */
/* ===================================================================== */

/* Trust options for opening a plugin file. */
typedef struct wsel_trust_options {
    uint32_t struct_size;
    uint32_t reserved0;
    /* NULL-terminated list of folders a plugin must live in (after
     * resolving symlinks in the folder part); NULL = any folder.
     * OWNERSHIP: caller's; read during each call (wsel_host_create copies
     * it, so a host does not depend on it afterwards). A zeroed struct
     * (struct_size 0) is read as this layout, so the list is never
     * silently ignored. */
    const char *const *allowed_dirs;
} wsel_trust_options;

/*
 * Check `path` against the trust rules (OpenSSH StrictModes): a regular
 * file owned by root or the current user, not group- or world-writable;
 * every folder on the path likewise, except that a world-writable folder
 * with the sticky bit set (like /tmp) is accepted. The path is walked from
 * "/" one component at a time on descriptors (openat, O_NOFOLLOW), so a
 * folder swapped during the walk cannot redirect it, and the file is opened
 * relative to its checked folder. Then the opened file's ELF headers are
 * read: it must be a whole shared object for this machine (a truncated file
 * or another architecture is refused, named), and every folder its
 * RPATH/RUNPATH (with $ORIGIN expanded) or a path-form DT_NEEDED names must
 * pass the same folder rules. On success returns the open descriptor
 * (>= 0), which the caller closes; otherwise a negative WSEL_ENOENT /
 * WSEL_EPERM / WSEL_EIO with a message naming the offending path and rule.
 * [any thread]
 */
WSEL_HOST_API int32_t wsel_trust_open(const char *path, const wsel_trust_options *opts,
                                      char *err, size_t err_size);

/* A loaded plugin shared object. Opaque. */
typedef struct wsel_library wsel_library;

/*
 * Open a plugin: trust checks, dlopen(RTLD_NOW | RTLD_LOCAL) through the
 * checked descriptor, find wsel_plugin_entry, check ABI major, descriptor
 * size, required functions and the parameter table. Refusals name the cause
 * (missing file, untrusted, dlerror text, missing symbol, ABI major, short
 * descriptor, missing function). `opts` may be NULL. [control thread]
 * OWNERSHIP: *out is the caller's; release it with wsel_library_close.
 */
WSEL_HOST_API int32_t wsel_library_open(const char *path, const wsel_trust_options *opts,
                                        wsel_library **out, char *err, size_t err_size);

/* The plugin's descriptor, valid until wsel_library_close. Never NULL. */
WSEL_HOST_API const wsel_plugin *wsel_library_plugin(const wsel_library *lib);

/* The path the library was opened from (as given). */
WSEL_HOST_API const char *wsel_library_path(const wsel_library *lib);

/* Parameter i of the plugin (stride-aware), or NULL if i is out of range. */
WSEL_HOST_API const wsel_param_def *wsel_library_param(const wsel_library *lib,
                                                       uint32_t i);

/* Release the library. The code stays mapped (no dlclose; see README:
 * "Switching"), so pointers into it stay valid, but the handle is freed.
 * NULL is a harmless no-op. Each load maps the file under a name unique in
 * the process, so a file replaced by rename and opened again brings its
 * new code, while the same unchanged file is mapped once. [control thread] */
WSEL_HOST_API void wsel_library_close(wsel_library *lib);

/*
 * Parse a JSON configuration object (`json` may be NULL or "" for {})
 * against the plugin's parameter table, writing one value per parameter to
 * `values` (num_params entries, caller-owned). Refuses malformed JSON, a
 * non-object, unknown keys, duplicate keys, wrong types and out-of-range
 * values with WSEL_ECONFIG and a message naming the key. [any thread]
 */
WSEL_HOST_API int32_t wsel_config_parse(const wsel_library *lib, const char *json,
                                        double *values, char *err, size_t err_size);

/* ===================================================================== */
/* The host: a live policy with fallback, switching and counters          */
/* ===================================================================== */

typedef struct wsel_host wsel_host;

/* Log sink: `level` is WSEL_LOG_*, `msg` NUL-terminated, valid during the
 * call. May be called from any thread. */
typedef void (*wsel_log_fn)(void *user, int32_t level, const char *msg);

typedef struct wsel_host_options {
    /* sizeof(wsel_host_options); 0-filled tail = defaults. */
    uint32_t struct_size;
    /* After this many consecutive failed answers the plugin is ejected and
     * the built-in policy serves until the next switch. 0 = the default
     * (16); WSEL_HOST_NEVER_EJECT = never eject.
     * Rationale: in 1.0, 0 meant "never eject", so a zero-filled options
     * struct silently disabled ejection; every zero now means a default. */
    uint32_t max_consecutive_failures;
    /* Seed for the host's random streams (fallback tie-breaks, per-request
     * streams made by wsel_host_prepare_request). */
    uint64_t seed;
    /* Log sink; NULL = warnings and errors to stderr. */
    wsel_log_fn log;
    void *log_user;
    /* Trust rules for every plugin this host loads. */
    wsel_trust_options trust;

    /* --- Isolated mode (docs/isolated.md). Appended; zero = default. --- */
    /* 1: every policy this host loads runs in its own wsel-isolated-helper
     * process, reached through shared memory; a crash, an exit, a missed
     * deadline or a malformed answer costs only that select (the built-in
     * policy answers it, counted as WSEL_FALLBACK_CRASHED / _TIMEOUT) and
     * the helper is restarted. 0: plugins load into this process. */
    uint32_t isolated;
    /* Deadline of one isolated select, microseconds; 0 = 5000 (1000 in
     * 1.0: on two busy cores 2 % of answers missed 1 ms, 0 % missed 5 ms,
     * docs/isolated.md). A helper
     * that misses it costs that select only (WSEL_FALLBACK_TIMEOUT): it is
     * kept, its late answer is discarded, and the next select waits for it
     * (within its own deadline) before posting. Only a helper silent for
     * `hang_timeout_us` is killed and replaced. */
    uint32_t select_deadline_us;
    /* Each policy has two helpers: a hot spare, started in advance, takes
     * over at once when the active one fails. A failed helper is respawned
     * after this wait, microseconds, doubled after each failure without a
     * good answer in between (at most 64 times the base, capped at 1 s);
     * 0 = 10000. */
    uint32_t restart_backoff_us;
    /* The helper's RLIMIT_AS in MiB; 0 = 1024; UINT32_MAX = no limit. */
    uint32_t helper_as_limit_mb;
    /* The helper's RLIMIT_CPU in seconds; 0 = 3600; UINT32_MAX = none. */
    uint32_t helper_cpu_limit_s;
    /* How long a helper may stay inside one call before it is taken as
     * stuck, killed and replaced by its spare, microseconds; 0 = 1000000
     * (1 s). Values below select_deadline_us act as the deadline (killed at
     * the first miss, the 1.0 behaviour). It takes the place of 1.0's
     * `reserved1` (zero there = the default; the old name stays an alias)
     * rather than growing the struct, which wsel_host_options_default
     * fills whole and a 1.0 program allocates at its 1.0 size. */
    union {
        uint32_t hang_timeout_us;
        uint32_t reserved1;
    };
    /* The wsel-isolated-helper executable; NULL = $WSEL_ISOLATED_HELPER,
     * else $WSEL_SANDBOX (its old name), else wsel-isolated-helper next to
     * the running executable, else ../bin/ from it. `sandbox_path` is the
     * field's 1.0 name, kept as an alias (same storage).
     * OWNERSHIP: caller's, copied by wsel_host_create. */
    union {
        const char *helper_path;
        const char *sandbox_path;
    };
} wsel_host_options;

/* wsel_host_options.max_consecutive_failures: never eject the plugin. */
#define WSEL_HOST_NEVER_EJECT UINT32_MAX

/* Fill `opts` with defaults: seed 0, eject after 16 consecutive failures,
 * log to stderr, no allow-list. A zero-filled struct (struct_size set or
 * not) means the same defaults; this function just spells them out. */
WSEL_HOST_API void wsel_host_options_default(wsel_host_options *opts);

/* Create a host with no policy loaded (the built-in policy serves).
 * `opts` may be NULL for defaults. [control thread] */
WSEL_HOST_API int32_t wsel_host_create(const wsel_host_options *opts, wsel_host **out);

/* Destroy the host and every policy instance it holds, live or replaced.
 * No select may be running. NULL is a harmless no-op. [control thread] */
WSEL_HOST_API void wsel_host_destroy(wsel_host *host);

/*
 * Load the plugin at `path` with JSON `config` and make it the live policy.
 * Load, check and create happen off the hot path; publication is one atomic
 * store; selects already inside the old policy finish on it; the old
 * instance is destroyed once no select can still be using it. On any error
 * the old policy keeps serving and the message says why. [control thread]
 * Neither side waits: selects never wait for a switch, and the switch does
 * not wait for selects still inside the old instance; it retires it, and
 * the old instance is destroyed (its destroy() called on this control
 * thread) by this or a later switch, wsel_host_reclaim or wsel_host_destroy
 * once its grace period has passed. A successful switch clears an ejection.
 * `config` may be NULL (defaults).
 * OWNERSHIP: path and config are read during the call only.
 */
WSEL_HOST_API int32_t wsel_host_switch(wsel_host *host, const char *path,
                                       const char *config, char *err, size_t err_size);

/*
 * Destroy the replaced policy instances whose grace period has passed,
 * without waiting for the others. Returns how many replaced instances are
 * still alive (0 = none). Switches do this too; call it from a timer to
 * release an old policy's memory sooner when switches are rare.
 * [control thread]
 */
WSEL_HOST_API uint32_t wsel_host_reclaim(wsel_host *host);

/* Prepare `request` for select: set struct_size from `request_size` (pass
 * sizeof(*request); at most this library's sizeof(wsel_request) is kept),
 * seed request->rng (caller storage) from (host seed, request_id) and draw
 * request->uniform, so every decision is reproducible from the seed.
 * Fields past `request_size` are neither read nor written. [any thread]
 * OWNERSHIP: request and rng are the caller's; rng must outlive the select. */
WSEL_HOST_API void wsel_host_prepare_request_sized(const wsel_host *host,
                                                   wsel_request *request,
                                                   size_t request_size, wsel_rng *rng);

/* The 1.0 entry point: wsel_host_prepare_request_sized(host, request,
 * WSEL_REQUEST_SIZE_1_0, rng). It labels every request as a 1.0 one, because
 * it cannot know how large the caller's struct is: a program built against
 * 1.0 and linked to a later library must not have its request read past its
 * end. A router that sets fields appended after 1.0 (such as `overrides`)
 * calls wsel_host_prepare_request_sized instead. [any thread] */
WSEL_HOST_API void wsel_host_prepare_request(const wsel_host *host, wsel_request *request,
                                             wsel_rng *rng);

/* Who produced an answer (positive returns of wsel_host_select). */
#define WSEL_ANSWER_PLUGIN   0
#define WSEL_ANSWER_FALLBACK 1

/*
 * Choose a row. Calls the live policy, validates its answer and, on any
 * error or invalid answer, answers with the built-in policy (argmin of the
 * default cost over the rows neither excluded nor busy, else the busy
 * ones; random tie-break) and counts the reason. Returns
 * WSEL_ANSWER_PLUGIN or WSEL_ANSWER_FALLBACK with choice->row set (and,
 * when the caller's choice->struct_size covers them, the plugin's
 * explanation in reason / flags / score; zero for a fallback), or a
 * negative code (WSEL_EREQUEST, WSEL_ETABLE, WSEL_ENOCANDIDATE when every
 * row is excluded) with *choice untouched.
 *
 * What the host does not trust (each a bad answer, counted under its
 * WSEL_FALLBACK_* reason and towards ejection):
 *   - a return other than 0 (a positive one included);
 *   - a row out of range, excluded, or busy while an eligible row is not;
 *   - a write past choice->struct_size: the plugin gets a host-owned
 *     choice followed by WSEL_HOST_CHOICE_GUARD zeroed and guard bytes,
 *     checked after every call (a write further out than that is beyond
 *     what the host can catch);
 *   - a write to the table's flags or cost column. For tables of up to
 *     WSEL_HOST_SNAPSHOT_ROWS rows the host copies both columns to its
 *     stack before the call, checks the answer and runs the fallback on the
 *     copy, so a plugin that clears WSEL_ROW_EXCLUDED or writes NaN costs
 *     changes nothing. Up to 9 x WSEL_HOST_SNAPSHOT_ROWS rows the flags are
 *     still copied (into the same 9 KiB) and the costs checksummed: the
 *     write is caught, answers and the fallback are checked against the
 *     flags as handed in, and the fallback ranks the costs as the plugin
 *     left them (non-finite ones count as the most expensive). Past that,
 *     both columns are checksummed: the write is caught, but the fallback
 *     reads the flags as the plugin left them too (it can then refuse with
 *     WSEL_ENOCANDIDATE only if the plugin excluded every row). The
 *     checksum (a multi-lane Fletcher sum) catches what a bug writes, not
 *     a collision forged on purpose.
 * The table is trusted to be valid as handed in (see wsel_table_validate).
 * Never allocates; never waits for a switch. [any thread]
 */
WSEL_HOST_API int32_t wsel_host_select(wsel_host *host, const wsel_request *request,
                                       const wsel_table *table, wsel_choice *choice);

/* Bytes after the plugin's wsel_choice that the host checks after select. */
#define WSEL_HOST_CHOICE_GUARD 256u
/* Largest table whose flags and costs select copies before the call
 * (9 bytes a row on the calling thread's stack, 9 KiB at most; larger
 * tables' flags are copied into the same space, up to 9x this many rows). */
#define WSEL_HOST_SNAPSHOT_ROWS 1024u
/* Most log messages one plugin instance gets through in one second; the
 * rest are dropped and counted (wsel_host_counters.log_dropped). */
#define WSEL_HOST_LOG_PER_SECOND 100u

/* Tell the live policy a request finished (its on_request_finished hook,
 * if any). [any thread] */
WSEL_HOST_API void wsel_host_request_finished(wsel_host *host, uint64_t request_id,
                                              uint64_t worker_id, uint32_t dp_rank);

/* Tell the live policy a request finished and what it cost (ABI 1.1): its
 * on_request_finished hook, then its on_request_outcome hook, each if it
 * has one (an isolated policy's too). A router that knows the figures
 * calls this instead of wsel_host_request_finished, never both for one
 * request. NULL host or outcome, or an outcome shorter than its 1.0-era
 * identity fields (struct_size < 24), is a harmless no-op; fields past
 * outcome->struct_size reach the plugin as 0. [any thread]
 * OWNERSHIP: outcome is the caller's, read during the call. */
WSEL_HOST_API void wsel_host_request_outcome(wsel_host *host,
                                             const wsel_outcome *outcome);

/* Tell the live policy the topology changed (its on_topology_changed hook,
 * if any). [control thread] */
WSEL_HOST_API void wsel_host_topology_changed(wsel_host *host, const wsel_table *table);

/* Why the host replaced an answer (index into fallback_by_reason). */
#define WSEL_FALLBACK_NO_POLICY    0 /* nothing loaded */
#define WSEL_FALLBACK_ERROR        1 /* select returned an error code */
#define WSEL_FALLBACK_OUT_OF_RANGE 2 /* row >= num_rows */
#define WSEL_FALLBACK_EXCLUDED     3 /* row flagged WSEL_ROW_EXCLUDED */
#define WSEL_FALLBACK_EJECTED      4 /* plugin ejected after repeated failures */
#define WSEL_FALLBACK_CRASHED      5 /* isolated plugin crashed / exited */
#define WSEL_FALLBACK_TIMEOUT      6 /* isolated plugin missed its deadline */
#define WSEL_FALLBACK_REASONS      8 /* size of the 1.0 fallback_by_reason */
/* Appended after 1.0. 7 fits fallback_by_reason; 8 and up are counted in
 * fallback_by_reason_more[reason - 8], read with wsel_host_read_counters. */
#define WSEL_FALLBACK_CHOICE_OVERRUN 7  /* wrote past choice->struct_size */
#define WSEL_FALLBACK_BUSY           8  /* busy row while an eligible one is not */
#define WSEL_FALLBACK_TABLE_WRITTEN  9  /* wrote the table's flags or costs */
#define WSEL_FALLBACK_HOST_LIMIT     10 /* the host's limit, not the plugin's fault */
#define WSEL_FALLBACK_BAD_SCORE      11 /* a child's score failed or was not finite */
#define WSEL_FALLBACK_REASONS_MAX    16 /* room for every reason, appended ones too */

/* Static name of a fallback reason ("error", "out_of_range", ...), for
 * every reason below WSEL_FALLBACK_REASONS_MAX; "unknown" otherwise. */
WSEL_HOST_API const char *wsel_fallback_reason_name(uint32_t reason);

/*
 * wsel_host_counters: what the host has done, for a router's metrics.
 * Grows by appending counters. The caller says how much room it has
 * (wsel_host_read_counters' `out_size`), so a program built against an
 * older, shorter struct is never written past.
 */
typedef struct wsel_host_counters {
    uint64_t selects; /* answered selects (plugin + fallback) */
    uint64_t plugin_answers;
    uint64_t fallbacks; /* every fallback, appended reasons included */
    uint64_t fallback_by_reason[WSEL_FALLBACK_REASONS];
    uint64_t switches;        /* successful switches */
    uint64_t failed_switches; /* refused switches (old policy kept) */
    uint64_t ejections;
    /* --- appended after 1.0 go here; read them with wsel_host_read_counters */
    /* Fallbacks for reasons 8 .. WSEL_FALLBACK_REASONS_MAX - 1. */
    uint64_t fallback_by_reason_more[WSEL_FALLBACK_REASONS_MAX - WSEL_FALLBACK_REASONS];
    /* Plugin log messages dropped by the rate limit (WSEL_HOST_LOG_PER_SECOND
     * per instance). */
    uint64_t log_dropped;
    /* Plugin answers by the reason the plugin gave (wsel_choice.reason,
     * ABI 1.1): [r] for r < WSEL_HOST_REASON_SLOTS - 1; the last slot counts
     * every larger code (plugin-specific ones). A 1.0 plugin's answers all
     * land in [WSEL_REASON_NONE]. */
    uint64_t answers_by_reason[16];
} wsel_host_counters;

/* Slots of wsel_host_counters.answers_by_reason. */
#define WSEL_HOST_REASON_SLOTS 16u

/* Size of the 1.0 wsel_host_counters: what wsel_host_get_counters writes. */
#define WSEL_HOST_COUNTERS_SIZE_1_0 112u

/* Snapshot of the counters into `out`, writing min(out_size,
 * sizeof(wsel_host_counters)) bytes (pass sizeof(*out)); each counter is
 * read atomically, the set not as a whole. NULL host or out is a harmless
 * no-op. [any thread]
 * OWNERSHIP: out is the caller's. */
WSEL_HOST_API void wsel_host_read_counters(const wsel_host *host, wsel_host_counters *out,
                                           size_t out_size);

/* The 1.0 entry point: wsel_host_read_counters(host, out,
 * WSEL_HOST_COUNTERS_SIZE_1_0). Kept for programs built against 1.0;
 * counters appended later are not written. [any thread] */
WSEL_HOST_API void wsel_host_get_counters(const wsel_host *host, wsel_host_counters *out);

/* Name of the live policy ("builtin" when none or ejected). The string
 * stays valid until the host is destroyed. [control thread] */
WSEL_HOST_API const char *wsel_host_policy_name(const wsel_host *host);

/* ===================================================================== */
/* Children: plugins a composing policy opened (ABI 1.1)                  */
/* ===================================================================== */

/*
 * wsel_child_counters: one child of a policy (a plugin the policy opened
 * with wsel_host_api.child_open, such as a pipeline's scorers) and how
 * often the host had to answer for it. Counted as for a policy: each
 * fallback by WSEL_FALLBACK_* reason. Grows by appending; the reader
 * passes its size.
 */
typedef struct wsel_child_counters {
    uint32_t struct_size;
    /* 1 for a policy's own child, 2 for a child's child, ... */
    uint32_t depth;
    /* The child's plugin name (wsel_plugin.name), NUL-terminated. */
    char name[72];
    /* Scores and selects the child answered itself. */
    uint64_t scores;
    uint64_t answers;
    /* Scores and selects the host answered instead, by reason. */
    uint64_t fallbacks;
    uint64_t fallback_by_reason[WSEL_FALLBACK_REASONS_MAX];
    /* 1 once the child was ejected after repeated failures (until its
     * policy is switched). */
    uint32_t ejected;
    uint32_t reserved0;
} wsel_child_counters;

/*
 * Counters of child `index` of the live policy (depth first, in the order
 * the policy opened them), writing min(out_size, sizeof(*out)) bytes.
 * Returns 0, WSEL_EINVAL, or WSEL_ENOENT past the last child (and when no
 * policy is loaded). [any thread]
 */
WSEL_HOST_API int32_t wsel_host_read_child_counters(wsel_host *host, uint32_t index,
                                                    wsel_child_counters *out,
                                                    size_t out_size);

/*
 * A plugin context: what a host does to create a policy, without the
 * switch. For tools that create instances themselves (`wsel validate`,
 * tests): the configuration parsed as a switch parses it (typed values to
 * `values`, num_params doubles; WSEL_PARAM_JSON texts kept) and a host
 * table bound to the context whose param_json and child_* functions work,
 * children going through `host`'s trust rules, ejection limit and log.
 * Every instance created with the table is the context's: children are
 * listed under it (wsel_plugin_context_child_counters).
 * [control thread] OWNERSHIP: `lib` and `host` the caller's, and must
 * outlive the context; the context the caller's, closed with
 * wsel_plugin_context_close after every instance created from its table
 * is destroyed.
 */
typedef struct wsel_plugin_context wsel_plugin_context;

WSEL_HOST_API int32_t wsel_plugin_context_open(wsel_host *host, wsel_library *lib,
                                               const char *config, double *values,
                                               wsel_plugin_context **out, char *err,
                                               size_t err_size);
/* The context's host table, valid until wsel_plugin_context_close. */
WSEL_HOST_API const wsel_host_api *wsel_plugin_context_api(wsel_plugin_context *ctx);
/* As wsel_host_read_child_counters, for the context's children. */
WSEL_HOST_API int32_t wsel_plugin_context_child_counters(wsel_plugin_context *ctx,
                                                         uint32_t index,
                                                         wsel_child_counters *out,
                                                         size_t out_size);
/* Close the context and every child still open; NULL is a no-op. */
WSEL_HOST_API void wsel_plugin_context_close(wsel_plugin_context *ctx);

/* ===================================================================== */
/* Frozen layouts (checked against the 1.0 header in tests/abi)           */
/* ===================================================================== */

#if UINTPTR_MAX == 0xffffffffffffffffu
WSEL_STATIC_ASSERT_(sizeof(wsel_rank_state) == 48, "wsel_rank_state is frozen");
WSEL_STATIC_ASSERT_(offsetof(wsel_rank_state, flags) == 44, "wsel_rank_state.flags");
WSEL_STATIC_ASSERT_(sizeof(wsel_table_buf) == WSEL_TABLE_SIZE_1_0 + 16,
                    "wsel_table_buf is frozen");
WSEL_STATIC_ASSERT_(offsetof(wsel_host_counters, ejections) ==
                        WSEL_HOST_COUNTERS_SIZE_1_0 - 8,
                    "wsel_host_counters: the 1.0 prefix");
#endif

#ifdef __cplusplus
}
#endif
#endif /* WSEL_HOST_H */
