// SPDX-License-Identifier: Apache-2.0
/*
 * wsel.h -- the worker-selection plugin ABI, version 1.0.
 *
 * This header is the whole contract between a router ("the host") and a
 * worker-selection policy ("the plugin"). A plugin is a shared object built
 * against this header alone: it links against nothing, exports exactly one
 * symbol (wsel_plugin_entry) and reaches the host only through the function
 * table it is handed at creation (wsel_host_api).
 *
 * The header reads top to bottom as the plugin author's manual:
 *   1. versioning and growth rules
 *   2. error codes and log levels
 *   3. the request          (what is being routed)
 *   4. the candidate table  (where it can go)
 *   5. the choice           (what the plugin answers)
 *   6. the host table       (what the host provides:   wsel_host_api)
 *   7. parameters           (what the plugin declares: wsel_param_def)
 *   8. the plugin descriptor and entry symbol (what the plugin implements)
 *
 * Conventions used in every comment below:
 *   [any thread]      may be called from several threads at once.
 *   [control thread]  called by the one thread that loads, switches and
 *                     destroys policies; never concurrently with itself for
 *                     one instance.
 *   [select thread]   a thread that routes requests; see WSEL_CAP_CONCURRENT
 *                     for whether several may call into one instance at once.
 *   OWNERSHIP:        who owns a pointer and until when it stays valid.
 *
 * Depends only on <stdint.h> and <stddef.h>. Compiles as C99, C11 and C++.
 */
#ifndef WSEL_H
#define WSEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* 1. Versioning                                                          */
/* ===================================================================== */

/*
 * ABI version of this header.
 *
 * A MAJOR change is a new ABI: a host refuses a plugin whose major differs
 * from its own. A MINOR change only ever
 *   - appends fields at the end of a struct that carries a struct_size, or
 *   - adds new constants (flags, capability bits, error codes, column kinds).
 * Nothing is ever removed, reordered or resized within a major.
 *
 * Reading a struct written by the other side: every growable struct starts
 * with (or carries) `struct_size`, the sizeof() the writer was compiled
 * with. A reader that knows more fields than the writer wrote treats the
 * missing tail as zero, and zero always means "the 1.0 behaviour". A reader
 * that knows fewer fields ignores the extra tail.
 *
 * Every field documented "reserved" must be written as zero and must be
 * ignored when read.
 *
 * Types crossing the boundary are fixed-width integers, double, and pointers
 * only: no bool, enum, long, bitfield or packing, so every compiler lays the
 * structs out the same way. The offsets are pinned by _Static_assert at the
 * end of this file.
 */
#define WSEL_ABI_MAJOR 1
#define WSEL_ABI_MINOR 0

/* ===================================================================== */
/* 2. Error codes and log levels                                          */
/* ===================================================================== */

/*
 * Error codes. Every function that can fail returns int32_t: 0 on success,
 * a negative WSEL_E* code on failure. Outputs are written only on success.
 * Nothing may unwind (no C++ exception, no longjmp) across this boundary.
 *
 * WSEL_ERRNO_MAP(X) lists every code once: X(NAME, value, message). Hosts
 * build their strerror from it; plugins may too.
 */
#define WSEL_ERRNO_MAP(X)                                                         \
    X(OK, 0, "success")                                                           \
    X(EINVAL, -1, "invalid argument")                                             \
    X(ENOMEM, -2, "out of memory")                                                \
    X(ENOENT, -3, "no such file")                                                 \
    X(EPERM, -4, "refused by the trust rules")                                    \
    X(ELOAD, -5, "the shared object could not be loaded")                         \
    X(ENOSYM, -6, "the entry symbol wsel_plugin_entry is missing")                \
    X(EABI, -7, "incompatible ABI version or descriptor")                         \
    X(ECONFIG, -8, "invalid configuration")                                       \
    X(ETABLE, -9, "invalid candidate table")                                      \
    X(EREQUEST, -10, "invalid request")                                           \
    X(ENOCANDIDATE, -11, "no eligible candidate")                                 \
    X(EPLUGIN, -12, "the plugin failed")                                          \
    X(EBUSY, -13, "resource busy")                                                \
    X(EIO, -14, "input/output error")                                             \
    X(ERANGE, -15, "value out of range")                                          \
    X(ESTATE, -16, "operation not valid in this state")                           \
    X(ETIMEDOUT, -17, "deadline exceeded")

#define WSEL_ERRNO_DEFINE_(name, value, msg) WSEL_##name = (value),
enum wsel_errno_ { WSEL_ERRNO_MAP(WSEL_ERRNO_DEFINE_) WSEL_ERRNO_END_ = -1000 };
#undef WSEL_ERRNO_DEFINE_
/* Rationale: the enum only names constants; no ABI struct stores an enum. */

/* Log levels for wsel_host_api.log. Lower is more severe. */
#define WSEL_LOG_ERROR 0
#define WSEL_LOG_WARN  1
#define WSEL_LOG_INFO  2
#define WSEL_LOG_DEBUG 3

/* ===================================================================== */
/* 3. The request                                                         */
/* ===================================================================== */

/*
 * wsel_rng: a random stream, owned by whoever passes it.
 *
 * The state is plain data so the host can seed it per request without
 * allocating; a plugin must not read or write `state` directly and draws
 * only through wsel_host_api.rng_u64 / rng_uniform. Two calls given streams
 * in the same state produce the same draws: this is what makes every
 * decision reproducible from (seed, request id).
 */
typedef struct wsel_rng {
    uint64_t state[4];
} wsel_rng;

/*
 * wsel_request: the request being routed. [select thread]
 *
 * OWNERSHIP: host-owned; the struct and everything it points to is valid
 * only for the duration of the select call. A plugin that wants to remember
 * something copies it.
 */
typedef struct wsel_request {
    /* sizeof(wsel_request) as compiled by the host. */
    uint32_t struct_size;
    /* Reserved, zero. */
    uint32_t reserved0;
    /* The router's request id. Unique among requests in flight. */
    uint64_t request_id;
    /* Key for stickiness: a session id or a prefix hash chosen by the
     * router. 0 means "none" (derive one from block_hashes if needed). */
    uint64_t affinity_key;
    /* Arrival time, microseconds on the router's monotonic clock. */
    uint64_t timestamp_us;
    /* Input sequence length in tokens. */
    uint32_t isl_tokens;
    /* KV block size in tokens (> 0). */
    uint32_t block_size;
    /* Number of entries in block_hashes (may be 0). */
    uint32_t num_block_hashes;
    /* Reserved, zero. */
    uint32_t reserved1;
    /* Hash of each block of the prompt, in order; entry i stands for
     * blocks 0..i (a prefix hash). NULL when num_block_hashes is 0. */
    const uint64_t *block_hashes;
    /* Effective weight of prefill in the default cost, after the request's
     * own overrides (Dynamo's overlap_score_weight; default 1.0). */
    double overlap_score_weight;
    /* Effective softmax temperature after overrides (default 0.0).
     * A plugin may have its own temperature parameter; when this is the
     * request's override it wins (see the plugin's docs). */
    double temperature;
    /* One uniform draw in [0, 1) taken for this request: enough for one
     * softmax_sample. */
    double uniform;
    /* A random stream seeded for this request, for plugins that need more
     * than one draw. Never NULL. OWNERSHIP: host; valid during select; the
     * plugin may advance it (through rng_u64 / rng_uniform) but not keep it. */
    wsel_rng *rng;
} wsel_request;

/* ===================================================================== */
/* 4. The candidate table                                                 */
/* ===================================================================== */

/* Row flags (wsel_table.flags). */
/* The rank reports itself busy (e.g. queue over its limit). Plugins must not
 * answer a busy row unless every eligible row is busy. */
#define WSEL_ROW_BUSY     0x01u
/* The row must not be chosen (draining, unhealthy, filtered by the router).
 * An answer naming an excluded row is refused by the host. */
#define WSEL_ROW_EXCLUDED 0x02u
/* The router has no load record for this rank yet; its prefill_tokens and
 * decode_blocks hold Dynamo's defaults (isl and isl / block_size). */
#define WSEL_ROW_NO_LOAD  0x04u

/*
 * wsel_table: every (worker, dp_rank) the request may go to.  [select thread]
 *
 * Columnar: each column is an array of num_rows elements, one per row, so
 * a policy's inner loop reads one contiguous array. Rows are in canonical
 * order: by worker_id ascending, then dp_rank ascending; the ranks of one
 * worker are contiguous and form a group.
 *
 * The group view lists each worker once: group g covers rows
 * [group_first_row[g], group_first_row[g] + group_row_count[g]).
 * Groups are in row order, cover every row once, and each has >= 1 row.
 *
 * The host always fills `cost` with Dynamo's default cost:
 *   cost = overlap_score_weight * prefill_tokens / block_size + decode_blocks
 * A plugin may use it or compute its own from the raw columns.
 *
 * OWNERSHIP: host-owned; valid only during the call it is passed to.
 * Plugins must not write to any column.
 */
typedef struct wsel_table {
    /* sizeof(wsel_table) as compiled by the host. */
    uint32_t struct_size;
    /* Number of rows (>= 1 when passed to select). */
    uint32_t num_rows;
    /* Number of groups (workers), 1 <= num_groups <= num_rows. */
    uint32_t num_groups;
    /* Reserved, zero. */
    uint32_t reserved0;
    /* Increments whenever the set of (worker, dp_rank) changes. A plugin
     * that caches row indices must drop them when the epoch changes. */
    uint64_t topology_epoch;

    /* --- row columns (num_rows entries each) --- */
    /* Worker id. */
    const uint64_t *worker_id;
    /* Data-parallel rank within the worker (0-based). */
    const uint32_t *dp_rank;
    /* Consecutive prefix blocks of this request already cached there. */
    const uint32_t *overlap_blocks;
    /* Tokens this rank would prefill if chosen: uncached tokens of this
     * request plus the rank's active prefill backlog. */
    const uint64_t *prefill_tokens;
    /* KV blocks active on the rank if chosen: its active blocks plus this
     * request's blocks not already active there. */
    const uint64_t *decode_blocks;
    /* Dynamo's default cost (lower is better); always finite. */
    const double *cost;
    /* KV capacity of the rank in blocks; 0 = unknown. */
    const uint64_t *kv_capacity_blocks;
    /* Requests in flight on the rank (routed, not finished). */
    const uint32_t *active_requests;
    /* WSEL_ROW_* bits. */
    const uint8_t *flags;

    /* --- group view (num_groups entries each) --- */
    /* First row of each worker's group. */
    const uint32_t *group_first_row;
    /* Rows in each worker's group (its dp size as seen by this table). */
    const uint32_t *group_row_count;
} wsel_table;

/* ===================================================================== */
/* 5. The choice                                                          */
/* ===================================================================== */

/*
 * wsel_choice: the plugin's answer.  [select thread]
 *
 * The host zeroes the struct and sets struct_size before calling select.
 * On success the plugin writes `row`; it writes nothing on failure.
 * OWNERSHIP: host-owned, valid during select.
 */
typedef struct wsel_choice {
    /* sizeof(wsel_choice) as compiled by the host. */
    uint32_t struct_size;
    /* Index into the table's rows: 0 <= row < num_rows, not excluded. */
    uint32_t row;
    /* Reserved, zero. Room for later answers (e.g. a second-best row). */
    uint32_t reserved[6];
} wsel_choice;

/* ===================================================================== */
/* 6. The host table: what the host provides                              */
/* ===================================================================== */

/*
 * wsel_host_api: the functions a plugin may call, passed to create().
 *
 * OWNERSHIP: host-owned; valid from create() until destroy() returns. A
 * plugin keeps the pointer in its instance. Every function pointer is
 * non-NULL in a 1.0 host; fields a newer minor appends are NULL (or beyond
 * struct_size) on an older host, so check struct_size before using them.
 */
typedef struct wsel_host_api {
    /* sizeof(wsel_host_api) as compiled by the host. */
    uint32_t struct_size;
    /* The host's ABI version. */
    uint32_t abi_major;
    uint32_t abi_minor;
    /* Reserved, zero. */
    uint32_t reserved0;
    /* Opaque host context. The plugin passes `host` itself back; it never
     * dereferences this. */
    void *host_ctx;

    /*
     * Log a message through the host. [any thread]
     * `level` is a WSEL_LOG_*; `msg` is NUL-terminated UTF-8, copied before
     * return (OWNERSHIP: caller). Must not be called from select more than
     * rarely: the host may rate-limit it.
     */
    void (*log)(const struct wsel_host_api *host, int32_t level, const char *msg);

    /* Next 64 random bits from `rng`. [any thread; one rng per thread] */
    uint64_t (*rng_u64)(wsel_rng *rng);

    /* A uniform double in [0, 1) from `rng`, 53 bits of precision.
     * [any thread; one rng per thread] */
    double (*rng_uniform)(wsel_rng *rng);

    /*
     * Dynamo's softmax_sample over the eligible rows of `costs`. [any thread]
     *
     * Rows i with (flags[i] & skip_mask) != 0 are not candidates; `flags`
     * may be NULL (every row a candidate). Among candidates, in row order:
     *   - temperature == 0: the minimum cost; exact ties broken uniformly at
     *     random using `u`;
     *   - all candidate costs equal: uniform, using `u`;
     *   - otherwise s_i = -(c_i / (max - min)) / temperature,
     *     p_i = exp(s_i - max_j s_j) / sum, and the answer is the first
     *     candidate whose running sum of p reaches `u` (the last candidate
     *     if rounding leaves the sum short).
     * `u` must be in [0, 1). Writes the chosen row to *out_row.
     * Returns 0, WSEL_EINVAL (NULL pointer, non-finite or negative
     * temperature, u outside [0,1)) or WSEL_ENOCANDIDATE.
     * No allocation. OWNERSHIP: all pointers caller's, read during the call.
     */
    int32_t (*softmax_sample)(const double *costs, const uint8_t *flags, uint32_t n,
                              uint8_t skip_mask, double temperature, double u,
                              uint32_t *out_row);

    /*
     * Index of the minimum of `costs` among eligible rows, exact ties
     * broken uniformly at random with draws from `rng`. [any thread]
     * Eligibility and `flags` as for softmax_sample. Returns 0,
     * WSEL_EINVAL or WSEL_ENOCANDIDATE. No allocation.
     */
    int32_t (*argmin)(const double *costs, const uint8_t *flags, uint32_t n,
                      uint8_t skip_mask, wsel_rng *rng, uint32_t *out_row);
} wsel_host_api;

/* ===================================================================== */
/* 7. Parameters: what the plugin declares                                */
/* ===================================================================== */

/* Parameter types (wsel_param_def.type). Every value reaches create() as a
 * double: */
/* A finite real number. */
#define WSEL_PARAM_DOUBLE 1u
/* An integer in [-2^53, 2^53], passed as a double holding that integer. */
#define WSEL_PARAM_INT    2u
/* true / false, passed as 1.0 / 0.0. */
#define WSEL_PARAM_BOOL   3u
/* One string among `choices`, passed as its index (0.0, 1.0, ...). */
#define WSEL_PARAM_ENUM   4u

/*
 * wsel_param_def: one configuration parameter the plugin accepts.
 *
 * The host parses the JSON configuration object, rejects unknown keys,
 * wrong types and values outside [min_value, max_value] with a message
 * naming the key, fills absent keys with default_value, and hands create()
 * one double per parameter, in the order of the plugin's table.
 *
 * For WSEL_PARAM_ENUM, `choices` is a NULL-terminated array of names, the
 * default and bounds are indices, and the JSON value is the name. For
 * other types `choices` is NULL. For WSEL_PARAM_BOOL the bounds are 0 and 1.
 *
 * OWNERSHIP: plugin-owned static data, valid while the plugin is loaded.
 * Rationale: the array stride is wsel_plugin.param_def_size, so a later
 * minor can append fields here.
 */
typedef struct wsel_param_def {
    /* JSON key: lowercase ASCII letters, digits and '_', unique. */
    const char *name;
    /* One line for `wsel info`: what the parameter does and its unit. */
    const char *doc;
    /* WSEL_PARAM_*. */
    uint32_t type;
    /* Reserved, zero. */
    uint32_t reserved0;
    /* Default, smallest and largest accepted value (inclusive). */
    double default_value;
    double min_value;
    double max_value;
    /* Names for WSEL_PARAM_ENUM, NULL-terminated; NULL otherwise. */
    const char *const *choices;
} wsel_param_def;

/* ===================================================================== */
/* 8. The plugin descriptor: what the plugin implements                   */
/* ===================================================================== */

/* Capability bits (wsel_plugin.capabilities). */
/* select() may run on several threads at once on one instance. Without
 * this bit the host serialises calls into one instance. */
#define WSEL_CAP_CONCURRENT_SELECT 0x1u
/* Same request, table and random stream give the same answer (the plugin
 * keeps no state that changes its answers, e.g. no stickiness). */
#define WSEL_CAP_STATELESS         0x2u

/*
 * wsel_plugin: the plugin descriptor, exported as wsel_plugin_entry.
 *
 * OWNERSHIP: plugin-owned static const data, valid while loaded. The host
 * reads abi_major, abi_minor and struct_size before calling any plugin code,
 * and refuses the plugin if abi_major differs or struct_size is smaller than
 * the 1.0 size (WSEL_PLUGIN_SIZE_1_0).
 *
 * The plugin must do no work in ELF constructors: everything happens in
 * create(). It must keep no global mutable state: all of it lives in the
 * instance, so several instances (and several hosts) can coexist.
 */
typedef struct wsel_plugin {
    /* WSEL_ABI_MAJOR / WSEL_ABI_MINOR the plugin was built against. */
    uint32_t abi_major;
    uint32_t abi_minor;
    /* sizeof(wsel_plugin) the plugin was built with. */
    uint32_t struct_size;
    /* WSEL_CAP_* bits. */
    uint32_t capabilities;

    /* Short name ([a-z0-9_-]+), e.g. "softmax". Non-NULL. */
    const char *name;
    /* Plugin's own version, e.g. "1.2.0". Non-NULL. */
    const char *version;
    /* One-line description for `wsel info`. Non-NULL. */
    const char *description;

    /* Parameter table: num_params entries of param_def_size bytes each
     * (sizeof(wsel_param_def) when built against this header). May be NULL
     * when num_params is 0. */
    const wsel_param_def *params;
    uint32_t num_params;
    uint32_t param_def_size;

    /*
     * Create an instance. [control thread]
     * `host` stays valid until destroy() returns. `params` holds num_params
     * values, validated by the host against the table, in table order
     * (OWNERSHIP: host; valid during the call only: copy what you need).
     * On success writes the new instance to *out_instance and returns 0;
     * otherwise returns a negative WSEL_E* and writes nothing. Required.
     */
    int32_t (*create)(const wsel_host_api *host, const double *params,
                      uint32_t num_params, void **out_instance);

    /*
     * Destroy an instance and free everything it owns. [control thread]
     * Called once, when no select on this instance is running or will run.
     * Required.
     */
    void (*destroy)(void *instance);

    /*
     * Choose a row for `request` from `table`. [select thread]
     * Concurrent calls on one instance happen only when capabilities has
     * WSEL_CAP_CONCURRENT_SELECT. Must not allocate, block, or call back
     * into anything but the host table. On success writes choice->row
     * (a non-excluded row) and returns 0; otherwise returns a negative
     * WSEL_E* and the host answers with its built-in policy. Required.
     */
    int32_t (*select)(void *instance, const wsel_request *request,
                      const wsel_table *table, wsel_choice *choice);

    /*
     * Optional (may be NULL): request `request_id`, earlier routed to
     * (worker_id, dp_rank), has finished. [select thread; same concurrency
     * rule as select]
     */
    void (*on_request_finished)(void *instance, uint64_t request_id,
                                uint64_t worker_id, uint32_t dp_rank);

    /*
     * Optional (may be NULL): the set of (worker, dp_rank) changed; `table`
     * holds the new topology (its load columns may be zero). A plugin that
     * keeps per-worker state prunes it here. [control thread; never
     * concurrent with select on this instance]
     */
    void (*on_topology_changed)(void *instance, const wsel_table *table);
} wsel_plugin;

/*
 * The one symbol a plugin exports. Define it with WSEL_PLUGIN_EXPORT:
 *
 *     WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
 *         WSEL_ABI_MAJOR, WSEL_ABI_MINOR, sizeof(wsel_plugin), 0,
 *         "mine", "1.0.0", "what it does", ...
 *     };
 */
#define WSEL_PLUGIN_ENTRY_SYMBOL "wsel_plugin_entry"
#if defined(__GNUC__) || defined(__clang__)
#define WSEL_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define WSEL_PLUGIN_EXPORT
#endif
#ifdef __cplusplus
#define WSEL_PLUGIN_EXTERN_ extern "C"
#else
#define WSEL_PLUGIN_EXTERN_ extern
#endif
WSEL_PLUGIN_EXTERN_ WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry;

/* ===================================================================== */
/* Layout pins: these never change within major 1.                        */
/* ===================================================================== */

/* Sizes as of 1.0; a host refuses anything shorter. */
#define WSEL_PLUGIN_SIZE_1_0    96u
#define WSEL_REQUEST_SIZE_1_0   88u
#define WSEL_TABLE_SIZE_1_0     112u
#define WSEL_CHOICE_SIZE_1_0    32u
#define WSEL_HOST_API_SIZE_1_0  64u
#define WSEL_PARAM_DEF_SIZE_1_0 56u

#if UINTPTR_MAX == 0xffffffffffffffffu
#if defined(__cplusplus)
#define WSEL_STATIC_ASSERT_(expr, msg) static_assert(expr, msg)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define WSEL_STATIC_ASSERT_(expr, msg) _Static_assert(expr, msg)
#else
#define WSEL_CAT2_(a, b) a##b
#define WSEL_CAT_(a, b)  WSEL_CAT2_(a, b)
#define WSEL_STATIC_ASSERT_(expr, msg)                                            \
    typedef char WSEL_CAT_(wsel_static_assert_, __LINE__)[(expr) ? 1 : -1]
#endif
#define WSEL_PIN_(type, field, off)                                               \
    WSEL_STATIC_ASSERT_(offsetof(type, field) == (off), #type "." #field)

WSEL_PIN_(wsel_request, struct_size, 0);
WSEL_PIN_(wsel_request, request_id, 8);
WSEL_PIN_(wsel_request, affinity_key, 16);
WSEL_PIN_(wsel_request, timestamp_us, 24);
WSEL_PIN_(wsel_request, isl_tokens, 32);
WSEL_PIN_(wsel_request, block_size, 36);
WSEL_PIN_(wsel_request, num_block_hashes, 40);
WSEL_PIN_(wsel_request, block_hashes, 48);
WSEL_PIN_(wsel_request, overlap_score_weight, 56);
WSEL_PIN_(wsel_request, temperature, 64);
WSEL_PIN_(wsel_request, uniform, 72);
WSEL_PIN_(wsel_request, rng, 80);
WSEL_STATIC_ASSERT_(sizeof(wsel_request) == WSEL_REQUEST_SIZE_1_0, "wsel_request");

WSEL_PIN_(wsel_table, num_rows, 4);
WSEL_PIN_(wsel_table, num_groups, 8);
WSEL_PIN_(wsel_table, topology_epoch, 16);
WSEL_PIN_(wsel_table, worker_id, 24);
WSEL_PIN_(wsel_table, dp_rank, 32);
WSEL_PIN_(wsel_table, overlap_blocks, 40);
WSEL_PIN_(wsel_table, prefill_tokens, 48);
WSEL_PIN_(wsel_table, decode_blocks, 56);
WSEL_PIN_(wsel_table, cost, 64);
WSEL_PIN_(wsel_table, kv_capacity_blocks, 72);
WSEL_PIN_(wsel_table, active_requests, 80);
WSEL_PIN_(wsel_table, flags, 88);
WSEL_PIN_(wsel_table, group_first_row, 96);
WSEL_PIN_(wsel_table, group_row_count, 104);
WSEL_STATIC_ASSERT_(sizeof(wsel_table) == WSEL_TABLE_SIZE_1_0, "wsel_table");

WSEL_PIN_(wsel_choice, row, 4);
WSEL_STATIC_ASSERT_(sizeof(wsel_choice) == WSEL_CHOICE_SIZE_1_0, "wsel_choice");

WSEL_PIN_(wsel_host_api, abi_major, 4);
WSEL_PIN_(wsel_host_api, host_ctx, 16);
WSEL_PIN_(wsel_host_api, log, 24);
WSEL_PIN_(wsel_host_api, rng_u64, 32);
WSEL_PIN_(wsel_host_api, rng_uniform, 40);
WSEL_PIN_(wsel_host_api, softmax_sample, 48);
WSEL_PIN_(wsel_host_api, argmin, 56);
WSEL_STATIC_ASSERT_(sizeof(wsel_host_api) == WSEL_HOST_API_SIZE_1_0, "wsel_host_api");

WSEL_PIN_(wsel_param_def, doc, 8);
WSEL_PIN_(wsel_param_def, type, 16);
WSEL_PIN_(wsel_param_def, default_value, 24);
WSEL_PIN_(wsel_param_def, min_value, 32);
WSEL_PIN_(wsel_param_def, max_value, 40);
WSEL_PIN_(wsel_param_def, choices, 48);
WSEL_STATIC_ASSERT_(sizeof(wsel_param_def) == WSEL_PARAM_DEF_SIZE_1_0, "wsel_param_def");

WSEL_PIN_(wsel_plugin, abi_minor, 4);
WSEL_PIN_(wsel_plugin, struct_size, 8);
WSEL_PIN_(wsel_plugin, capabilities, 12);
WSEL_PIN_(wsel_plugin, name, 16);
WSEL_PIN_(wsel_plugin, version, 24);
WSEL_PIN_(wsel_plugin, description, 32);
WSEL_PIN_(wsel_plugin, params, 40);
WSEL_PIN_(wsel_plugin, num_params, 48);
WSEL_PIN_(wsel_plugin, param_def_size, 52);
WSEL_PIN_(wsel_plugin, create, 56);
WSEL_PIN_(wsel_plugin, destroy, 64);
WSEL_PIN_(wsel_plugin, select, 72);
WSEL_PIN_(wsel_plugin, on_request_finished, 80);
WSEL_PIN_(wsel_plugin, on_topology_changed, 88);
WSEL_STATIC_ASSERT_(sizeof(wsel_plugin) == WSEL_PLUGIN_SIZE_1_0, "wsel_plugin");

#undef WSEL_PIN_
#endif /* 64-bit layout pins */

#ifdef __cplusplus
}
#endif
#endif /* WSEL_H */
