// SPDX-License-Identifier: Apache-2.0
/*
 * wsel.h -- the worker-selection plugin ABI, version 1.1.
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
 *   5. the choice           (what the plugin answers) and the outcome
 *                           (what the request cost, told afterwards)
 *   6. the host table       (what the host provides:   wsel_host_api)
 *   7. parameters           (what the plugin declares: wsel_param_def)
 *   8. the plugin descriptor and entry symbol (what the plugin implements)
 *   9. calling what an older host may lack (WSEL_HOST_HAS and fallbacks)
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
 * Every rule a plugin must follow says who enforces it:
 *   [host checks]     libwsel-host checks it on every call; a plugin that
 *                     breaks it gets the built-in policy's answer instead,
 *                     counted by reason (wsel_host.h, WSEL_FALLBACK_*), and
 *                     is ejected after repeated failures.
 *   [validate checks] `wsel validate` tests it before deployment (the check
 *                     named in brackets); the host does not at run time.
 *   [not checked]     nothing can check it; breaking it is a bug that may
 *                     hurt the router (isolated mode contains the crashes).
 *
 * "Must not block" (select and the hooks on the select thread) means: no
 * I/O, no sleep, no wait on a condition, another thread's progress or
 * another process. A lock held by the plugin's own threads only around
 * short in-memory work (no I/O, no allocation, bounded by the table's
 * size) is allowed; the bundled chash takes its ring's reader lock so.
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
 * ignored when read [not checked: ignoring them is what lets a later minor
 * give them a meaning].
 *
 * Types crossing the boundary are fixed-width integers, double, and pointers
 * only: no bool, enum, long, bitfield or packing, so every compiler lays the
 * structs out the same way. The offsets are pinned by _Static_assert at the
 * end of this file.
 */
#define WSEL_ABI_MAJOR 1
#define WSEL_ABI_MINOR 1

/* ===================================================================== */
/* 2. Error codes and log levels                                          */
/* ===================================================================== */

/*
 * Error codes. Every function that can fail returns int32_t: 0 on success,
 * a negative WSEL_E* code on failure. Outputs are written only on success.
 * Nothing may unwind (no C++ exception, no longjmp) across this boundary.
 *
 * A plugin returns only these: EINVAL (a bad argument), ENOMEM, ECONFIG
 * (create: parameters it cannot work with), ERANGE, ENOCANDIDATE (select:
 * no row it may answer) and EPLUGIN (anything else). The host treats every
 * negative code from select alike (its fallback, reason "error"); the
 * code only reaches the logs. The others are the host's own: ENOENT,
 * EPERM, ELOAD, ENOSYM, EABI (loading), ETABLE, EREQUEST (bad input from
 * the router), EBUSY, EIO, ESTATE, ETIMEDOUT.
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
 * allocating; a plugin must not read or write `state` directly [not
 * checked] and draws
 * only through wsel_host_api.rng_u64 / rng_uniform. Two calls given streams
 * in the same state produce the same draws: this is what makes every
 * decision reproducible from (seed, request id).
 */
typedef struct wsel_rng {
    uint64_t state[4];
} wsel_rng;

/* Request override bits (wsel_request.overrides, ABI 1.1). */
/* `temperature` is this request's own override (Dynamo's per-request
 * router_temperature) and applies as it is, 0 included: 0 asks for the
 * cheapest row on this request whatever the plugin is configured with. */
#define WSEL_OVERRIDE_TEMPERATURE 0x1u

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
    /* Softmax temperature (>= 0, finite; default 0.0, Dynamo's). Which
     * temperature a plugin applies, given its own parameter or none, is
     * wsel_request_temperature() (section 9): call it, never restate it. */
    double temperature;
    /* One uniform draw in [0, 1) taken for this request: enough for one
     * softmax_sample. */
    double uniform;
    /* A random stream seeded for this request, for plugins that need more
     * than one draw. Never NULL. OWNERSHIP: host; valid during select; the
     * plugin may advance it (through rng_u64 / rng_uniform) but not keep it. */
    wsel_rng *rng;

    /* --- appended in 1.1: read them only when struct_size covers them
     * (WSEL_REQUEST_HAS; a 1.0 router's request ends before them; they
     * are then 0) --- */
    /* WSEL_OVERRIDE_* bits: which fields above hold this request's own
     * override. 0 (also what a 1.0 router means): none beyond the 1.0 rule
     * for `temperature`. */
    uint32_t overrides;
    /* Reserved, zero. */
    uint32_t reserved2;
} wsel_request;

/* 1 when `request` (a router's, of any minor) carries `member`. */
#define WSEL_REQUEST_HAS(request, member)                                         \
    ((request)->struct_size >=                                                    \
     offsetof(wsel_request, member) + sizeof((request)->member))

/* ===================================================================== */
/* 4. The candidate table                                                 */
/* ===================================================================== */

/* Row flags (wsel_table.flags). */
/* The rank reports itself busy (e.g. queue over its limit). Plugins must not
 * answer a busy row unless every eligible row is busy. [host checks:
 * WSEL_FALLBACK_BUSY; validate checks: select_avoids_busy_rows,
 * select_all_busy] */
#define WSEL_ROW_BUSY     0x01u
/* The row must not be chosen (draining, unhealthy, filtered by the router).
 * An answer naming an excluded row is refused by the host. [host checks:
 * WSEL_FALLBACK_EXCLUDED, against its own copy of the flags] */
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
 *   cost = overlap_score_weight * (prefill_tokens / block_size) + decode_blocks
 * A plugin may use it or compute its own from the raw columns.
 *
 * OWNERSHIP: host-owned; valid only during the call it is passed to.
 * Plugins must not write to any column. [host checks: flags and cost are
 * compared with the host's copy after select (WSEL_FALLBACK_TABLE_WRITTEN);
 * validate checks every column: select_* checksums]
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
     * that caches row indices must drop them when the epoch changes
     * [not checked]. */
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
    /* Dynamo's default cost (lower is better). Finite whenever the host
     * built the table (wsel_table_build saturates at DBL_MAX); a router
     * that builds its own table keeps it finite (wsel_table_validate
     * checks; select does not re-check, for speed). */
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

/* Why an answer won (wsel_choice.reason, ABI 1.1). The host counts answers
 * by reason (libwsel-host: wsel_host_counters.answers_by_reason); codes
 * from WSEL_REASON_PLUGIN up are the plugin's own and counted together. */
/* No reason given (what every 1.0 plugin answers). */
#define WSEL_REASON_NONE 0u
/* The lowest cost or score among the eligible rows. */
#define WSEL_REASON_CHEAPEST 1u
/* Drawn from a distribution over the rows' costs or scores (softmax). */
#define WSEL_REASON_SAMPLED 2u
/* Kept where the request's prefix or session went before (stickiness). */
#define WSEL_REASON_STICKY 3u
/* Moved away from where it would have stuck (owner too loaded). */
#define WSEL_REASON_SPILLED 4u
/* The owner a hash of the request's key names. */
#define WSEL_REASON_HASHED 5u
/* A random draw among the eligible rows (load- and cache-blind). */
#define WSEL_REASON_RANDOM 6u
/* The better of a few random candidates (power of d choices). */
#define WSEL_REASON_SAMPLED_BEST 7u
/* Next in a rotation. */
#define WSEL_REASON_ROTATION 8u
/* Every eligible row was busy: a busy row beats no answer. */
#define WSEL_REASON_ALL_BUSY 9u
/* The least loaded worker group (data-parallel aware). */
#define WSEL_REASON_GROUP 10u
/* Codes from here to 255 are plugin-specific (document them). */
#define WSEL_REASON_PLUGIN 64u

/* Choice flags (wsel_choice.flags, ABI 1.1). */
/* `score` holds the chosen row's score (the plugin's score function's
 * value for that row, or the policy's own cost when it has none). */
#define WSEL_CHOICE_SCORED 0x1u

/*
 * wsel_choice: the plugin's answer.  [select thread]
 *
 * The host zeroes the struct and sets struct_size before calling select.
 * On success the plugin writes `row`; it writes nothing on failure.
 * Write only fields that lie within choice->struct_size: a plugin built
 * against a later minor must check struct_size before writing a field
 * appended after the host's version (WSEL_CHOICE_HAS below). The host
 * follows the struct with guard bytes and checks them after every call; a
 * write past struct_size is a bad answer (the host answers with its
 * fallback and counts it).
 * OWNERSHIP: host-owned, valid during select.
 */
typedef struct wsel_choice {
    /* sizeof(wsel_choice) as compiled by the host. */
    uint32_t struct_size;
    /* Index into the table's rows: 0 <= row < num_rows, not excluded. */
    uint32_t row;
    /* Reserved, zero. Room for later answers (e.g. a second-best row). */
    uint32_t reserved[6];

    /* --- appended in 1.1 (the explanation): write them only when
     * struct_size covers them; a 1.0 host's choice ends before them --- */
    /* WSEL_REASON_*: why `row` won. 0 = none given. */
    uint32_t reason;
    /* WSEL_CHOICE_* bits. 0 = `score` not set. */
    uint32_t flags;
    /* The chosen row's score when flags has WSEL_CHOICE_SCORED (finite;
     * lower is better, as for wsel_plugin.score). */
    double score;
} wsel_choice;

/* 1 when `choice` (a host's, of any minor) has room for `member`. */
#define WSEL_CHOICE_HAS(choice, member)                                           \
    ((choice)->struct_size >=                                                     \
     offsetof(wsel_choice, member) + sizeof((choice)->member))

/*
 * wsel_choice_answer: write the answer into `choice`: `row`, and
 * `reason` (ABI 1.1) when the host's choice has room for it (a 1.0
 * host's does not). [select thread] No allocation. OWNERSHIP: `choice`
 * is the host's, written during select only.
 */
static inline void wsel_choice_answer(wsel_choice *choice, uint32_t row,
                                      uint32_t reason)
{
    choice->row = row;
    if (WSEL_CHOICE_HAS(choice, reason))
        choice->reason = reason;
}

/*
 * wsel_choice_explain: write the explanation (ABI 1.1) into `choice`:
 * `reason`, WSEL_CHOICE_SCORED and `score`, or nothing when the host's
 * choice ends before them (a 1.0 host's). [select thread] No allocation.
 * OWNERSHIP: `choice` is the host's, written during select only.
 */
static inline void wsel_choice_explain(wsel_choice *choice, uint32_t reason,
                                       double score)
{
    if (!WSEL_CHOICE_HAS(choice, score))
        return;
    choice->reason = reason;
    choice->flags = WSEL_CHOICE_SCORED;
    choice->score = score;
}

/*
 * wsel_reason_unless_all_busy: the reason for an answer taken among the
 * rows `skip` leaves (the mask wsel_call_eligible_skip gives): `reason`,
 * or WSEL_REASON_ALL_BUSY when the mask lets busy rows through, which it
 * does only when every eligible row is busy. [any thread]
 */
static inline uint32_t wsel_reason_unless_all_busy(uint8_t skip, uint32_t reason)
{
    return (skip & WSEL_ROW_BUSY) ? reason : WSEL_REASON_ALL_BUSY;
}

/* Outcome flags (wsel_outcome.flags). */
/* The request failed or was cancelled; the times run to the failure. */
#define WSEL_OUTCOME_FAILED 0x1u

/*
 * wsel_outcome: what a finished request cost (ABI 1.1).  [select thread]
 *
 * Passed to wsel_plugin.on_request_outcome once per routed request, after
 * it finished, by routers that know the figures (wsel sim from its model,
 * wsel replay from the engine's answers). Times are microseconds on the
 * router's clock, measured from the request's arrival (its
 * wsel_request.timestamp_us). A time or count the router could not
 * measure is 0.
 * Read only fields within struct_size; a later minor may append.
 * OWNERSHIP: host-owned, valid during the call; copy what you keep.
 */
typedef struct wsel_outcome {
    /* sizeof(wsel_outcome) as compiled by the host. */
    uint32_t struct_size;
    /* Data-parallel rank the request ran on. */
    uint32_t dp_rank;
    /* The request id the request was routed with. */
    uint64_t request_id;
    /* Worker the request ran on: with dp_rank, the row it was routed to. */
    uint64_t worker_id;
    /* Time to first token: arrival to the first output token. */
    uint64_t ttft_us;
    /* End to end: arrival to the last output token. */
    uint64_t e2e_us;
    /* When it finished, microseconds on the router's monotonic clock. */
    uint64_t finished_us;
    /* Prompt tokens (the request's isl). */
    uint32_t prompt_tokens;
    /* Prompt tokens served from the rank's KV cache (not prefilled). */
    uint32_t cached_tokens;
    /* Output tokens generated. */
    uint32_t output_tokens;
    /* WSEL_OUTCOME_* bits. */
    uint32_t flags;
} wsel_outcome;

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
/*
 * wsel_child: a plugin opened by another plugin through
 * wsel_host_api.child_open (ABI 1.1). Opaque. OWNERSHIP: the host's; the
 * opening instance holds the handle until child_close or its destroy().
 */
typedef struct wsel_child wsel_child;

/* wsel_host_api.child_open's out_features bits. */
/* The child has a score function (wsel_plugin.score). */
#define WSEL_CHILD_HAS_SCORE 0x1u
/* The child declares WSEL_CAP_STATELESS. */
#define WSEL_CHILD_STATELESS 0x2u

/* What child_score and child_select return on success. */
/* The child answered; its answer was used. */
#define WSEL_CHILD_ANSWERED 0
/* The child failed; the host's built-in answer was used and counted. */
#define WSEL_CHILD_FALLBACK 1

/* Most levels of children below one policy (a pipeline inside a
 * pipeline...); child_open refuses deeper ones with WSEL_ECONFIG. */
#define WSEL_CHILD_MAX_DEPTH 4u

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
     * rarely: the host rate-limits it per plugin instance (libwsel-host:
     * 100 messages a second), dropping and counting the rest [host checks].
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
     * may be NULL (every row a candidate). Candidates are taken in row
     * order (Dynamo's order when its candidates are sorted by worker id,
     * then dp rank), and the answer is the row Dynamo's current selector
     * (kv-router selector/default.rs, softmax_sample_index) gives for the
     * same costs, temperature and draw u: at temperature 0 the minimum
     * cost, exact ties going to the k-th tied candidate with
     * k = floor(u * ties); above 0, the first candidate whose running sum
     * of softmax probabilities reaches u. Where Dynamo's own arithmetic
     * overflows, the answer is still finite and favours the cheapest.
     * The exact arithmetic: docs/policies.md, "How the row is chosen".
     * `u` must be in [0, 1). Writes the chosen row to *out_row.
     * Returns 0, WSEL_EINVAL (NULL pointer, non-finite or negative
     * temperature, non-finite candidate cost, u outside [0,1)) or
     * WSEL_ENOCANDIDATE.
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

    /* --- appended in 1.1: absent from a 1.0 host's table. Check with
     * WSEL_HOST_HAS (section 9) or call through the wsel_call_* wrappers
     * there, which fall back to the same arithmetic inline --- */

    /*
     * A uniform integer in [0, n) from `rng`, without modulo bias.
     * [any thread; one rng per thread]
     * Exactly (Lemire's multiply-shift): m = (rng_u64(rng) >> 32) * n as a
     * 64-bit product; while the low 32 bits of m are below (2^32 - n) mod n,
     * draw again; the answer is m >> 32. So one draw, almost always, and
     * the same answer as wsel_inline_rng_below (section 9) for the same
     * stream. n == 0 answers 0 and draws nothing. No allocation.
     */
    uint32_t (*rng_below)(wsel_rng *rng, uint32_t n);

    /*
     * The rows a plugin may answer: "not excluded; busy only when every
     * eligible row is busy" (WSEL_ROW_BUSY). [any thread]
     * Writes to *out_skip the skip mask that selects them, for
     * softmax_sample, argmin or a loop testing (flags[i] & skip) == 0:
     * WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY when some row is neither excluded
     * nor busy, else WSEL_ROW_EXCLUDED. When out_count is not NULL, also
     * writes how many rows pass that mask (otherwise the scan may stop at
     * the first free row). Returns 0, WSEL_EINVAL (flags or out_skip
     * NULL) or WSEL_ENOCANDIDATE (n == 0 or every row excluded; nothing
     * written). No allocation.
     * Rationale: the host's helper knows every row flag of the host's
     * minor, so a flag a later minor adds is honoured by plugins built
     * before it; the inline fallback knows this header's flags only.
     * OWNERSHIP: all pointers caller's, used during the call.
     */
    int32_t (*eligible_skip)(const uint8_t *flags, uint32_t n, uint8_t *out_skip,
                             uint32_t *out_count);

    /* --- appended in 1.1 for composing policies: a plugin that opens
     * other plugins (the bundled `pipeline`). NULL in a host that cannot
     * open children (libwsel-host's isolated helper, a 1.0 host, a
     * router's own table): check with WSEL_HOST_HAS and refuse in
     * create() (WSEL_ECONFIG) when a configuration needs them --- */

    /*
     * The configured text of parameter `index`, a WSEL_PARAM_JSON
     * parameter (section 7): the JSON object or array as it appeared in
     * the configuration, already checked by the host's strict reader,
     * NUL-terminated. NULL when the configuration left the key out, the
     * index is out of range or the parameter is of another type.
     * [control thread; only during create()]
     * OWNERSHIP: host; valid until create() returns: copy what you keep.
     */
    const char *(*param_json)(const struct wsel_host_api *host, uint32_t index);

    /*
     * Open another plugin as a child of this instance: the same trust
     * rules, ELF, descriptor and configuration checks as a switch, then
     * the child's create(). A `path` without '/' names NAME.so in the
     * folder of the plugin calling child_open. `config_json` is the
     * child's JSON object (NULL = defaults). On success writes the child
     * to *out_child and, when out_features is not NULL, WSEL_CHILD_*
     * bits; otherwise returns a negative WSEL_E* with a message naming
     * the file and rule in `err` (err_size bytes; may be NULL / 0) and
     * writes nothing else. Children nest at most WSEL_CHILD_MAX_DEPTH deep.
     * The child is switched with its parent: it lives until child_close
     * or until the parent instance is destroyed, whichever comes first.
     * [control thread; only during create()]
     * OWNERSHIP: the child is the host's, a handle for the calling
     * instance only; `path`, `config_json` and `err` the caller's.
     */
    int32_t (*child_open)(const struct wsel_host_api *host, const char *path,
                          const char *config_json, wsel_child **out_child,
                          uint32_t *out_features, char *err, size_t err_size);

    /*
     * The child's score function (wsel_plugin.score), checked: when the
     * child fails (a negative return, a non-finite score, no score
     * function, ejected after repeated failures) the host writes the
     * table's `cost` column instead, the built-in policy's cost, and
     * counts the fallback against this child by reason, as it does for a
     * failing plugin. Returns WSEL_CHILD_ANSWERED or WSEL_CHILD_FALLBACK
     * with num_rows scores written, or WSEL_EINVAL (a NULL argument;
     * nothing written). [select thread; the child's own lock is taken as
     * the host takes a plugin's] No allocation.
     * OWNERSHIP: as for wsel_plugin.score; `child` the host's.
     */
    int32_t (*child_score)(const struct wsel_host_api *host, wsel_child *child,
                           const wsel_request *request, const wsel_table *table,
                           double *scores);

    /*
     * The child's select, checked like a plugin's answer (error, row out
     * of range, excluded, busy while a free row exists, a write past the
     * choice): on failure the host's built-in policy answers (argmin of
     * `cost` over the eligible rows) and the fallback is counted against
     * this child. `choice` is the caller's, zeroed by the host first;
     * the explanation fields are copied when choice->struct_size covers
     * them. Returns WSEL_CHILD_ANSWERED or WSEL_CHILD_FALLBACK with
     * choice->row set, WSEL_EINVAL or WSEL_ENOCANDIDATE (every row
     * excluded). [select thread] No allocation.
     * OWNERSHIP: as for wsel_plugin.select; `child` the host's.
     */
    int32_t (*child_select)(const struct wsel_host_api *host, wsel_child *child,
                            const wsel_request *request, const wsel_table *table,
                            wsel_choice *choice);

    /* Pass on_request_finished to the child (nothing when it has none or
     * is ejected). [select thread] */
    void (*child_finished)(const struct wsel_host_api *host, wsel_child *child,
                           uint64_t request_id, uint64_t worker_id, uint32_t dp_rank);

    /* Pass on_request_outcome to the child (nothing when it has none or
     * is ejected). [select thread] OWNERSHIP: `outcome` the caller's. */
    void (*child_outcome)(const struct wsel_host_api *host, wsel_child *child,
                          const wsel_outcome *outcome);

    /* Pass on_topology_changed to the child. [control thread] */
    void (*child_topology_changed)(const struct wsel_host_api *host, wsel_child *child,
                                   const wsel_table *table);

    /* Destroy the child now, and its counters with it. [control thread;
     * from destroy() or a failing create() only, never while a select may
     * use the child] NULL is a no-op. A child not closed is destroyed
     * right after its parent's destroy() returns. */
    void (*child_close)(const struct wsel_host_api *host, wsel_child *child);
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
/* ABI 1.1: a JSON object or array, for structured configuration (the
 * bundled pipeline's list of children). create() gets 1.0 when the
 * configuration sets the key and 0.0 when not, and reads the text with
 * wsel_host_api.param_json during create(); a host without param_json
 * (isolated mode's helper) still passes the 1.0, so the plugin can refuse
 * what it cannot read. Default, bounds and choices are 0 / NULL. A 1.0
 * host refuses a plugin declaring one (unknown type): declare one only
 * when the plugin needs a 1.1 host. */
#define WSEL_PARAM_JSON   5u

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

/*
 * Limits: everything the host's loader enforces before a plugin runs (a
 * plugin over any of them is refused, the message naming the rule).
 * `wsel validate` checks the same rules.
 *
 *   File, ELF, Libraries  the plugin file, its folders, its ELF headers
 *            and its RPATH / RUNPATH folders: the loader's trust rules,
 *            listed in docs/embedding.md, "Trusting plugin files".
 *   Descriptor abi_major == WSEL_ABI_MAJOR, struct_size >=
 *            WSEL_PLUGIN_SIZE_1_0 and no larger than the exported symbol;
 *            create, destroy and select set; name 1 to 64 characters of
 *            [a-z0-9_-].
 *   Parameters at most 256; param_def_size >= WSEL_PARAM_DEF_SIZE_1_0;
 *            names 1 to 64 characters of [a-z0-9_], unique, with a doc;
 *            min <= default <= max, finite, integral for INT/BOOL/ENUM;
 *            ENUM: 1 to 256 choices of [a-z0-9_-], unique.
 *   Configuration one JSON object (RFC 8259, strict: no trailing comma,
 *            no hex or leading zeros, escapes decoded) of at most 65,536
 *            bytes, nesting 16, 4,096 values; numbers at most 64
 *            characters and finite.
 */

/* ===================================================================== */
/* 8. The plugin descriptor: what the plugin implements                   */
/* ===================================================================== */

/* Capability bits (wsel_plugin.capabilities). */
/* select() may run on several threads at once on one instance. Without
 * this bit the host serialises calls into one instance.
 * [validate checks: concurrent_select] */
#define WSEL_CAP_CONCURRENT_SELECT 0x1u
/* Same request, table and random stream give the same answer (the plugin
 * keeps no state that changes its answers, e.g. no stickiness).
 * [validate checks: deterministic] */
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
 * create() [not checked: a constructor runs before any check can]. It must
 * keep no global mutable state: all of it lives in the instance, so several
 * instances (and several hosts) can coexist [not checked; validate's
 * deterministic and concurrent_select catch some consequences].
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
     * WSEL_CAP_CONCURRENT_SELECT. Must not allocate [validate checks:
     * select_no_allocation], block (see the top of this file) [not checked;
     * validate times every check out, isolated mode has a deadline], or
     * call anything but the host table [not checked]. On success writes
     * choice->row (0 <= row < num_rows, not excluded) and returns 0;
     * otherwise returns a negative WSEL_E* and the host answers with its
     * built-in policy. Only 0 is success: a positive return is an error
     * [host checks, with the row's range and flags: WSEL_FALLBACK_ERROR,
     * _OUT_OF_RANGE, _EXCLUDED]. Required.
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

    /* --- appended in 1.1: optional (may be NULL); a 1.0 host never calls
     * them, so a policy must work without them --- */

    /*
     * Optional: score every row of `table` for `request`. [select thread;
     * same concurrency rule as select]
     * Writes exactly table->num_rows values to `scores` (scores[i] for row
     * i), every one finite, excluded rows included (their value is
     * ignored). Direction and scale:
     *   - LOWER IS BETTER, like the table's `cost` (a score is a cost: the
     *     row the plugin's select would favour has the lowest score);
     *   - the scale is the plugin's own: only differences between rows of
     *     one table mean anything. A composer normalises each scorer over
     *     the eligible rows, n_i = (s_i - min) / (max - min) (0 when all are
     *     equal), before weighting; that is the one mapping to llm-d's
     *     scorer convention (a score in [0, 1], higher better: 1 - n_i) and
     *     to Dynamo's (a logit, lower better: s_i itself, or n_i).
     * Must not allocate, block, or record the request as routed: score
     * answers a question, and the answer actually taken reaches the plugin
     * only through on_request_finished / on_request_outcome. Must not
     * write to the table. Returns 0, or a negative WSEL_E* with `scores`
     * left in any state (the caller discards it).
     * OWNERSHIP: `scores` is caller-owned, num_rows doubles, valid during
     * the call; request and table as for select.
     */
    int32_t (*score)(void *instance, const wsel_request *request,
                     const wsel_table *table, double *scores);

    /*
     * Optional: a request this instance routed (or that was routed while it
     * was live) has finished and `outcome` says what it cost. [select
     * thread; same concurrency rule as on_request_finished; called after
     * it for the same request]
     * Must not allocate on every call nor block; a policy that learns from
     * outcomes keeps bounded state.
     * OWNERSHIP: `outcome` is host-owned, valid during the call.
     */
    void (*on_request_outcome)(void *instance, const wsel_outcome *outcome);
} wsel_plugin;

/*
 * The one symbol a plugin exports. Define it with WSEL_PLUGIN_EXPORT and
 * designated initialisers (fields left out are zero, which is what every
 * reserved field and absent optional hook must be):
 *
 *     static const wsel_param_def mine_params[] = {
 *         {
 *             .name = "slack",
 *             .doc = "what the parameter does, in one line",
 *             .type = WSEL_PARAM_INT,
 *             .default_value = 0,
 *             .min_value = 0,
 *             .max_value = 1024,
 *         },
 *     };
 *
 *     WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
 *         .abi_major = WSEL_ABI_MAJOR,
 *         .abi_minor = WSEL_ABI_MINOR,
 *         .struct_size = sizeof(wsel_plugin),
 *         .capabilities = WSEL_CAP_CONCURRENT_SELECT,
 *         .name = "mine",
 *         .version = "1.0.0",
 *         .description = "what it does, in one line",
 *         .params = mine_params,
 *         .num_params = sizeof(mine_params) / sizeof(mine_params[0]),
 *         .param_def_size = sizeof(wsel_param_def),
 *         .create = mine_create,
 *         .destroy = mine_destroy,
 *         .select = mine_select,
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
/* 9. Calling what an older host may lack                                 */
/* ===================================================================== */

/*
 * A plugin built against this header may be loaded by a host of an older
 * minor, whose wsel_host_api ends before the members appended since. The
 * rule (docs/abi-stability.md): check, once in create(), that the host's
 * struct_size covers the member and that it is not NULL, and fall back to
 * an inline version when it does not.
 *
 * WSEL_HOST_HAS(host, member): 1 when `host` provides `member`.
 */
#define WSEL_HOST_HAS(host, member)                                               \
    ((host)->struct_size >=                                                       \
         offsetof(wsel_host_api, member) + sizeof((host)->member) &&              \
     (host)->member != NULL)

/*
 * The 1.1 helpers' arithmetic, inline, for hosts that lack them: each
 * gives exactly the host helper's answer (same draws from the same
 * stream), so a plugin answers the same in a 1.0 and a 1.1 host. A plugin
 * calls the wsel_call_* wrappers, which use the host's helper when it has
 * one. [any thread] No allocation.
 */
static inline uint32_t wsel_inline_rng_below(const wsel_host_api *host,
                                             wsel_rng *rng, uint32_t n)
{
    if (n == 0)
        return 0;
    uint64_t m = (uint64_t)(uint32_t)(host->rng_u64(rng) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(0u - n) % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(host->rng_u64(rng) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

static inline int32_t wsel_inline_eligible_skip(const uint8_t *flags,
                                                uint32_t n, uint8_t *out_skip,
                                                uint32_t *out_count)
{
    if (flags == NULL || out_skip == NULL)
        return WSEL_EINVAL;
    uint32_t free_rows = 0, usable = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (flags[i] & WSEL_ROW_EXCLUDED)
            continue;
        usable++;
        if (!(flags[i] & WSEL_ROW_BUSY)) {
            free_rows++;
            if (out_count == NULL)
                break;
        }
    }
    if (usable == 0)
        return WSEL_ENOCANDIDATE;
    *out_skip = (uint8_t)(free_rows != 0 ? (WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY)
                                         : WSEL_ROW_EXCLUDED);
    if (out_count != NULL)
        *out_count = free_rows != 0 ? free_rows : usable;
    return WSEL_OK;
}

/* host->rng_below when the host has it, else the same draw inline. */
static inline uint32_t wsel_call_rng_below(const wsel_host_api *host,
                                           wsel_rng *rng, uint32_t n)
{
    if (WSEL_HOST_HAS(host, rng_below))
        return host->rng_below(rng, n);
    return wsel_inline_rng_below(host, rng, n);
}

/* host->eligible_skip when the host has it, else the same rule inline. */
static inline int32_t wsel_call_eligible_skip(const wsel_host_api *host,
                                              const uint8_t *flags, uint32_t n,
                                              uint8_t *out_skip, uint32_t *out_count)
{
    if (WSEL_HOST_HAS(host, eligible_skip))
        return host->eligible_skip(flags, n, out_skip, out_count);
    return wsel_inline_eligible_skip(flags, n, out_skip, out_count);
}

/*
 * wsel_request_temperature: the temperature a plugin applies to `request`.
 * [any thread] No allocation.
 *
 * `configured` is the plugin's own temperature parameter as configured,
 * or 0.0 (its default, Dynamo's router_temperature) for a plugin without
 * one. First match wins:
 *   1. `overrides` has WSEL_OVERRIDE_TEMPERATURE: request->temperature,
 *      0 included (0 asks for the cheapest row on this request);
 *   2. request->temperature when it is not 0 (the 1.0 rule: a 1.0 router
 *      can only override with a non-zero temperature);
 *   3. `configured`.
 * `overrides` is read only when the request carries it (WSEL_REQUEST_HAS:
 * a 1.0 router's request ends before it). The value is returned as it
 * is, unchecked (the host refuses a negative or non-finite one).
 * OWNERSHIP: `request` is the caller's, read during the call only.
 */
static inline double wsel_request_temperature(const wsel_request *request,
                                              double configured)
{
    if (request->temperature != 0.0)
        return request->temperature;
    if (WSEL_REQUEST_HAS(request, overrides) &&
        (request->overrides & WSEL_OVERRIDE_TEMPERATURE))
        return request->temperature;
    return configured;
}

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
/* Sizes of the structs that grew, as of the minor that grew them. */
#define WSEL_REQUEST_SIZE_1_1   96u
#define WSEL_CHOICE_SIZE_1_1   48u
#define WSEL_HOST_API_SIZE_1_1 144u
#define WSEL_PLUGIN_SIZE_1_1   112u
/* wsel_outcome is new in 1.1. */
#define WSEL_OUTCOME_SIZE_1_1 64u

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
WSEL_PIN_(wsel_request, overrides, 88);
WSEL_PIN_(wsel_request, reserved2, 92);
WSEL_STATIC_ASSERT_(sizeof(wsel_request) == WSEL_REQUEST_SIZE_1_1, "wsel_request");

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
WSEL_PIN_(wsel_choice, reserved, 8);
WSEL_PIN_(wsel_choice, reason, 32);
WSEL_PIN_(wsel_choice, flags, 36);
WSEL_PIN_(wsel_choice, score, 40);
WSEL_STATIC_ASSERT_(sizeof(wsel_choice) == WSEL_CHOICE_SIZE_1_1, "wsel_choice");

WSEL_PIN_(wsel_outcome, dp_rank, 4);
WSEL_PIN_(wsel_outcome, request_id, 8);
WSEL_PIN_(wsel_outcome, worker_id, 16);
WSEL_PIN_(wsel_outcome, ttft_us, 24);
WSEL_PIN_(wsel_outcome, e2e_us, 32);
WSEL_PIN_(wsel_outcome, finished_us, 40);
WSEL_PIN_(wsel_outcome, prompt_tokens, 48);
WSEL_PIN_(wsel_outcome, cached_tokens, 52);
WSEL_PIN_(wsel_outcome, output_tokens, 56);
WSEL_PIN_(wsel_outcome, flags, 60);
WSEL_STATIC_ASSERT_(sizeof(wsel_outcome) == WSEL_OUTCOME_SIZE_1_1,
                    "wsel_outcome");

WSEL_PIN_(wsel_host_api, abi_major, 4);
WSEL_PIN_(wsel_host_api, host_ctx, 16);
WSEL_PIN_(wsel_host_api, log, 24);
WSEL_PIN_(wsel_host_api, rng_u64, 32);
WSEL_PIN_(wsel_host_api, rng_uniform, 40);
WSEL_PIN_(wsel_host_api, softmax_sample, 48);
WSEL_PIN_(wsel_host_api, argmin, 56);
WSEL_PIN_(wsel_host_api, rng_below, 64);
WSEL_PIN_(wsel_host_api, eligible_skip, 72);
WSEL_PIN_(wsel_host_api, param_json, 80);
WSEL_PIN_(wsel_host_api, child_open, 88);
WSEL_PIN_(wsel_host_api, child_score, 96);
WSEL_PIN_(wsel_host_api, child_select, 104);
WSEL_PIN_(wsel_host_api, child_finished, 112);
WSEL_PIN_(wsel_host_api, child_outcome, 120);
WSEL_PIN_(wsel_host_api, child_topology_changed, 128);
WSEL_PIN_(wsel_host_api, child_close, 136);
WSEL_STATIC_ASSERT_(sizeof(wsel_host_api) == WSEL_HOST_API_SIZE_1_1, "wsel_host_api");

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
WSEL_PIN_(wsel_plugin, score, 96);
WSEL_PIN_(wsel_plugin, on_request_outcome, 104);
WSEL_STATIC_ASSERT_(sizeof(wsel_plugin) == WSEL_PLUGIN_SIZE_1_1, "wsel_plugin");

#undef WSEL_PIN_
#endif /* 64-bit layout pins */

#ifdef __cplusplus
}
#endif
#endif /* WSEL_H */
