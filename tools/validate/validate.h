// SPDX-License-Identifier: Apache-2.0
/*
 * validate.h -- the pieces of `wsel validate` (internal to the wsel command).
 *
 * `wsel validate` runs a list of conformance checks on one plugin file.
 * Every check runs in its own child process (validate_run.c), loads the
 * plugin itself and reports a vcheck_result through a pipe, so a crash or a
 * hang fails that check and not the run.
 *
 *   validate_run.c     fork, pipe, per-check timeout, signal reporting
 *   validate_elf.c     count the dynamic symbols a shared object exports
 *   validate_fixture.c owned candidate tables, requests and the host table
 *   validate_load.c    trust, load, exports, descriptor, parameters, config
 *   validate_select.c  select on edge tables
 *   validate_temperature.c  a request's temperature override of 0 is obeyed
 *   validate_state.c   determinism, concurrency, lifecycle memory, latency
 *
 * Threads: everything here is called by one thread (the parent, or one
 * check's child) unless marked [any thread]. Pointers passed in stay the
 * caller's; buffers named in a comment are caller-owned and written only
 * on success.
 */
#ifndef WSEL_TOOLS_VALIDATE_H
#define WSEL_TOOLS_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

/* What every check knows: the plugin and how to reproduce the run. */
typedef struct vcontext {
    const char *path;   /* plugin file, resolved */
    const char *config; /* JSON config for every create(), NULL = defaults */
    uint64_t seed;      /* seeds every table and request of the run */
} vcontext;

#define VCHECK_PASS 0
#define VCHECK_FAIL 1
#define VCHECK_SKIP 2

/* A check's verdict, written by the child and read by the parent. */
typedef struct vcheck_result {
    int32_t status; /* VCHECK_* */
    uint32_t reserved0;
    double p50_ns; /* latency check only, else 0 */
    double p99_ns;
    char detail[480]; /* what was tried and what went wrong; "" on a pass */
} vcheck_result;

/* A check: fills `res` (status starts as PASS). Runs in a child process. */
typedef void (*vcheck_fn)(const vcontext *ctx, vcheck_result *res);

typedef struct vcheck {
    const char *name;
    vcheck_fn run;
} vcheck;

/* Record a failure (first one wins) with a printf-style detail. */
void vfail(vcheck_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Record a skip with a reason. */
void vskip(vcheck_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Run `check` in a child process, killing it after timeout_s seconds.
 * Always fills `out` (a crash, a hang or a silent exit become failures). */
void vcheck_run_isolated(const vcheck *check, const vcontext *ctx, unsigned timeout_s,
                         vcheck_result *out);

/* --- validate_elf.c ------------------------------------------------------ */

/*
 * Count the symbols the ELF64 shared object at `path` exports: entries of
 * .dynsym that are defined (not SHN_UNDEF), global, weak or unique, and not
 * sections, files or version-definition markers. Writes the count to
 * *out_count and the first names, comma-separated, to `names`. Returns 0,
 * or a negative WSEL_E* with a message in `err` naming the path and what
 * is malformed. No run-time dependency on binutils.
 */
int32_t velf_count_exports(const char *path, uint32_t *out_count, char *names,
                           size_t names_size, char *err, size_t err_size);

/* --- validate_fixture.c -------------------------------------------------- */

/* A candidate table with owned columns. OWNERSHIP: vtable_init allocates
 * every column, vtable_free releases them; `t` points into them. */
typedef struct vtable {
    wsel_table t;
    uint64_t *worker_id;
    uint32_t *dp_rank;
    uint32_t *overlap_blocks;
    uint64_t *prefill_tokens;
    uint64_t *decode_blocks;
    double *cost;
    uint64_t *kv_capacity_blocks;
    uint32_t *active_requests;
    uint8_t *flags;
    uint32_t *group_first_row;
    uint32_t *group_row_count;
} vtable;

/* Canonical table of `num_groups` workers with dp_sizes[g] ranks each
 * (NULL = 1 each), plausible load columns and Dynamo costs drawn from
 * `seed`. Returns 0 or WSEL_ENOMEM (then nothing to free). */
int32_t vtable_init(vtable *vt, uint32_t num_groups, const uint32_t *dp_sizes,
                    uint64_t seed);
void vtable_free(vtable *vt);

/* A request and the storage it points to (req.rng and req.block_hashes
 * point into the struct itself: do not copy it while in use). */
typedef struct vrequest {
    wsel_request req;
    wsel_rng rng;
    uint64_t hashes[32];
} vrequest;

/* Request `id` of a run seeded `seed`: 32 block hashes (0 when
 * num_hashes is 0), block size 16, weight 1, the given temperature, an
 * affinity key among 16 sessions, rng and uniform drawn from (seed, id). */
void vrequest_make(vrequest *vr, uint64_t seed, uint64_t id, uint32_t num_hashes,
                   double temperature);

/* The host table built the way libwsel-host builds it (its exported
 * helpers), logging to stderr. Static, read-only: safe from any thread. */
const wsel_host_api *vhost_api(void);

/* An instance of a loaded plugin. OWNERSHIP: vinstance_open fills it,
 * vinstance_close destroys the instance and releases the rest. */
typedef struct vinstance {
    wsel_library *lib;
    const wsel_plugin *plugin;
    void *instance;
    int has_instance; /* create() succeeded (instance may be NULL) */
    double *params;   /* num_params values: the config applied to defaults */
    /* ABI 1.1: the host table every create() gets, with the config's JSON
     * parameters and children (wsel_plugin_context) through `host`. */
    wsel_host *host;
    wsel_plugin_context *pctx;
} vinstance;

/* Open ctx->path, parse ctx->config and create an instance. On failure
 * records it in `res` and returns a negative code (nothing to close). */
int32_t vinstance_open(vinstance *vi, const vcontext *ctx, vcheck_result *res);
/* Create another instance with the same values into *out. */
int32_t vinstance_create(const vinstance *vi, const double *params, void **out);
void vinstance_close(vinstance *vi);

/* --- validate_select.c -------------------------------------------------- */

/*
 * Send requests 1..count (seeded from ctx->seed, temperatures alternating
 * 0 and 0.7) to `instance` with `table`; record in `res` the first answer
 * that is out of range, excluded or (unless allow_errors) an error, naming
 * `what` (the table) and the request. Returns 1 if every answer passed.
 */
int vselect_all_valid(const wsel_plugin *plugin, void *instance, const wsel_table *table,
                      const vcontext *ctx, uint32_t count, int allow_errors,
                      const char *what, vcheck_result *res);

/* --- validate_temperature.c --------------------------------------------- */

/* The check select_temperature_override_zero (listed in vchecks_select):
 * a plugin with a `temperature` parameter, configured high, answers every
 * request whose override says temperature 0 with the cheapest row. Skips
 * a plugin without one. */
void vcheck_temperature_override(const vcontext *ctx, vcheck_result *res);

/* --- the checks, in the order they run ------------------------------------ */

extern const vcheck vchecks_load[];
extern const unsigned vchecks_load_count;
extern const vcheck vchecks_select[];
extern const unsigned vchecks_select_count;
extern const vcheck vchecks_state[];
extern const unsigned vchecks_state_count;

#endif
