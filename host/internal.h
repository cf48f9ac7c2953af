// SPDX-License-Identifier: Apache-2.0
/*
 * internal.h -- what the files of libwsel-host share and nobody else sees.
 *
 * Nothing here is exported (the library is built with hidden visibility);
 * only wsel_host.h is API.
 */
#ifndef WSEL_HOST_INTERNAL_H
#define WSEL_HOST_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isolated_options.h"
#include "wsel_host.h"

/* Every row flag this host knows; a table carrying another is refused
 * (wsel_table_build, wsel_table_validate). */
#define WSEL_ROW_FLAGS_KNOWN (WSEL_ROW_BUSY | WSEL_ROW_EXCLUDED | WSEL_ROW_NO_LOAD)

/* Most parameters a plugin may declare: bounds the config parser's stack
 * arrays. A plugin declaring more is refused at load. */
#define WSEL_MAX_PARAMS 256u
/* Most choices one ENUM parameter may list. */
#define WSEL_MAX_CHOICES 256u

/* printf into the caller's error buffer; a harmless no-op when err is NULL
 * or err_size is 0. Always NUL-terminates (truncating if needed). */
void wsel__set_error(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Check a descriptor (host-sized copy `p`) and its parameter table; on
 * refusal write "PATH: ..." to err and return WSEL_EABI. */
int32_t wsel__descriptor_check(const char *path, const wsel_plugin *p, char *err,
                               size_t err_size);

/* Parameter i of descriptor `p` read through its stride, or NULL. */
const wsel_param_def *wsel__descriptor_param(const wsel_plugin *p, uint32_t i);

/* ===================================================================== */
/* The host object (host.c, generation.c, select.c, switch.c)             */
/* ===================================================================== */

/*
 * One generation: a loaded library, its descriptor and one live instance.
 * Created and destroyed by the control thread; read by select threads
 * between wsel__host_read_lock and wsel__host_read_unlock.
 */
#define WSEL_LOCK_NONE      0u
#define WSEL_LOCK_SHARED    1u
#define WSEL_LOCK_EXCLUSIVE 2u

#define WSEL_CACHE_LINE 64

/* A counter alone on its cache line, so threads bumping one do not slow
 * threads bumping another. */
typedef struct wsel_padded_counter {
    _Alignas(WSEL_CACHE_LINE) _Atomic uint64_t n;
} wsel_padded_counter;

/* What one asker's answers came to, relaxed: the host's for every policy
 * it served (wsel_host_counters), a child's own (wsel_child_counters).
 * select.c counts; host.c and child.c read. A struct holding it must be
 * allocated WSEL_CACHE_LINE-aligned (wsel__generation_alloc). */
typedef struct wsel_answer_counters {
    wsel_padded_counter answers; /* selects the plugin answered */
    wsel_padded_counter scores;  /* scores a child answered */
    wsel_padded_counter answers_by_reason[WSEL_HOST_REASON_SLOTS];
    wsel_padded_counter fallback_by_reason[WSEL_FALLBACK_REASONS_MAX];
} wsel_answer_counters;

/* Per-instance log rate limit (host.c): a fixed one-second window. */
typedef struct wsel_log_limit {
    _Atomic uint64_t window;  /* CLOCK_MONOTONIC second of the current window */
    _Atomic uint32_t used;    /* messages seen in it (delivered or not) */
    _Atomic uint32_t dropped; /* dropped in it, reported when it ends */
} wsel_log_limit;

typedef struct wsel_generation {
    /* What this instance's create() received: the host's table with
     * host_ctx = this generation, so log() knows whose message it is. */
    wsel_host_api api;
    struct wsel_host *host;
    const char *name; /* plugin name, for log summaries */
    wsel_log_limit log_limit;
    wsel_library *lib;
    const wsel_plugin *plugin; /* the library's host-sized descriptor copy */
    void *instance;
    /* How select and on_request_finished take `lock` (WSEL_LOCK_*):
     * exclusively when the plugin lacks WSEL_CAP_CONCURRENT_SELECT; shared
     * when it is concurrent but has on_topology_changed, which takes the
     * lock exclusively (the ABI promises that hook never runs concurrently
     * with select); not at all otherwise, since there is nothing to
     * exclude. The switcher never takes this lock. */
    uint32_t lock_mode;
    pthread_rwlock_t lock;
    _Atomic uint32_t consecutive_failures;
    _Atomic uint32_t ejected;
    /* Next in the host's retired or grace-period list (control thread). */
    struct wsel_generation *next_retired;

    /* ABI 1.1, composing policies (child.c). The texts of the plugin's
     * WSEL_PARAM_JSON parameters (num_params entries, NULL when absent),
     * served by param_json. */
    char **param_texts;
    uint32_t num_param_texts;
    /* 0 for a policy; 1 + the parent's for a child (WSEL_CHILD_MAX_DEPTH). */
    uint32_t depth;
    /* The instance whose child_open opened this one, and its children in
     * open order (first_child, then next_child). Written on the control
     * thread before the parent is published; read by counters afterwards.
     * child_close unlinks and frees one (from the parent's destroy). */
    struct wsel_generation *parent;
    struct wsel_generation *first_child;
    struct wsel_generation *next_child;
    uint32_t closed;
    /* 1 when lib is not this generation's to close (a plugin context). */
    uint32_t borrowed_lib;
    /* As a child: its answers and fallbacks (wsel_child_counters). */
    wsel_answer_counters child_counters;
} wsel_generation;

struct wsel_host {
    /* The table handed to every plugin instance; host_ctx = this host. */
    wsel_host_api api;
    wsel_log_fn log;
    void *log_user;
    uint32_t max_consecutive_failures; /* 0 = never eject */
    uint64_t seed;
    wsel_trust_options trust; /* allowed_dirs points at owned copies */
    char **allowed_dirs;
    /* Serialises switch, topology changes and destroy; selects never
     * touch it. */
    pthread_mutex_t control;

    /* Read side of the switch: see generation.c. */
    _Alignas(WSEL_CACHE_LINE) _Atomic(wsel_generation *) live;
    _Atomic uint64_t epoch;
    wsel_padded_counter readers[2];

    /* Deferred reclamation (generation.c), control thread only: generations
     * replaced but not yet in a grace period, those whose grace period is
     * under way, its phase (0 idle, 1 or 2 = waiting after flip 1 or 2) and
     * the reader counter it waits on. */
    wsel_generation *retired;
    wsel_generation *in_grace;
    uint32_t grace_phase;
    uint32_t grace_counter;

    /* Counters, relaxed. selects is derived (plugin + fallbacks). */
    wsel_answer_counters policy_counters;
    _Alignas(WSEL_CACHE_LINE) _Atomic uint64_t switches;
    _Atomic uint64_t failed_switches;
    _Atomic uint64_t ejections;
    _Atomic uint64_t log_dropped;

    /* Isolated mode (isolated_*.c), read-only after create. */
    wsel_isolated_options isolated;

    /* Libraries opened as children (child.c), control thread only: one
     * per file, reused while the checked file is the same (device, inode,
     * size, mtime), so a policy switched or created again and again does
     * not dlopen its children again (each dlopen under a new name costs
     * the loader memory that is never returned). Closed with the host. */
    struct wsel_child_lib *child_libs;
};

/* child.c: release the host's child library cache. [control thread] */
void wsel__child_libs_free(wsel_host *host);
/* child.c: the library for a child at `path`: trust-checked on every
 * call, loaded once per file. OWNERSHIP: the host's (borrowed). */
int32_t wsel__child_library(wsel_host *host, const char *path, wsel_library **out,
                            char *err, size_t err_size);

/* Fill gen->api (host_ctx = gen, log = the rate-limited plugin log, the
 * param_json and child_* functions of child.c) and gen->host before the
 * instance is created. */
void wsel__generation_api_init(wsel_host *host, wsel_generation *gen, const char *name);

/* child.c: the 1.1 functions of a generation's table, and closing every
 * child of `gen` still open (generation destroy). */
void wsel__child_api_init(wsel_host_api *api);
void wsel__children_destroy(wsel_generation *gen);
/* select.c: a child's checked score and select (wsel_host_api). */
int32_t wsel__child_score_checked(const wsel_host_api *api, wsel_child *child,
                                  const wsel_request *request, const wsel_table *table,
                                  double *scores);
int32_t wsel__child_select_checked(const wsel_host_api *api, wsel_child *child,
                                   const wsel_request *request, const wsel_table *table,
                                   wsel_choice *choice);
/* config.c: parse like wsel_config_parse, also copying each
 * WSEL_PARAM_JSON value's text into texts[k] (num_params entries, zeroed
 * by the caller; free with wsel__config_texts_free). texts may be NULL. */
int32_t wsel__config_parse_texts(const wsel_library *lib, const char *json,
                                 double *values, char **texts, char *err,
                                 size_t err_size);
void wsel__config_texts_free(char **texts, uint32_t n);

/* Log through the host's sink (or stderr). [any thread] */
void wsel__host_log(const wsel_host *host, int32_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Enter / leave a read-side section; the generation loaded in between
 * (wsel__host_live) stays alive until the matching unlock. [any thread]
 * Why this is safe: ARCHITECTURE.md, "Concurrency".
 */
static inline uint32_t wsel__host_read_lock(wsel_host *host)
{
    uint32_t idx = (uint32_t)(atomic_load(&host->epoch) & 1u);
    atomic_fetch_add(&host->readers[idx].n, 1);
    return idx;
}

static inline void wsel__host_read_unlock(wsel_host *host, uint32_t idx)
{
    atomic_fetch_sub_explicit(&host->readers[idx].n, 1, memory_order_release);
}

static inline wsel_generation *wsel__host_live(wsel_host *host)
{
    return atomic_load(&host->live);
}

/* Why gen's plugin must not be called (WSEL_FALLBACK_NO_POLICY: a child
 * its parent closed; WSEL_FALLBACK_EJECTED), or -1 when it may be.
 * [any thread] */
static inline int wsel__unavailable(const wsel_generation *gen)
{
    if (gen->closed)
        return WSEL_FALLBACK_NO_POLICY;
    if (atomic_load_explicit(&gen->ejected, memory_order_relaxed))
        return WSEL_FALLBACK_EJECTED;
    return -1;
}

/* The full-size outcome a plugin gets: the caller's `in` up to its
 * struct_size, zero past it. */
static inline void wsel__outcome_copy(wsel_outcome *o, const wsel_outcome *in)
{
    memset(o, 0, sizeof(*o));
    memcpy(o, in, in->struct_size < sizeof(*o) ? in->struct_size : sizeof(*o));
    o->struct_size = sizeof(*o);
}

/* Take gen's instance lock as its lock_mode says (WSEL_LOCK_*), or
 * exclusively when `exclusive` (on_topology_changed, which never runs
 * with a select) and the plugin has a lock to take. [any thread] */
static inline void wsel__instance_lock(wsel_generation *gen, int exclusive)
{
    if (gen->lock_mode == WSEL_LOCK_EXCLUSIVE ||
        (exclusive && gen->lock_mode != WSEL_LOCK_NONE))
        pthread_rwlock_wrlock(&gen->lock);
    else if (gen->lock_mode == WSEL_LOCK_SHARED)
        pthread_rwlock_rdlock(&gen->lock);
}

static inline void wsel__instance_unlock(wsel_generation *gen)
{
    if (gen->lock_mode != WSEL_LOCK_NONE)
        pthread_rwlock_unlock(&gen->lock);
}

/* Hand a generation that is no longer live to deferred reclamation and
 * advance the grace period without waiting. [control thread, with
 * host->control held] */
void wsel__host_retire(wsel_host *host, wsel_generation *gen);

/* Advance the grace period as far as it can go without waiting, destroying
 * the generations whose grace period has ended. Returns how many retired
 * generations are still alive. [control thread, with host->control held] */
uint32_t wsel__host_poll_grace(wsel_host *host);

/* Wait out every grace period and destroy every retired generation.
 * [control thread, with host->control held] */
void wsel__host_reclaim_all(wsel_host *host);

/* Load, configure and create a generation; nothing is published. */
int32_t wsel__generation_create(wsel_host *host, const char *path, const char *config,
                                wsel_generation **out, char *err, size_t err_size);
/* The non-isolated part of wsel__generation_create: load `path` through
 * the host's trust rules, parse, create; `parent` (NULL for a policy) makes
 * it a child one level deeper. */
int32_t wsel__generation_open(wsel_host *host, wsel_generation *parent, const char *path,
                              const char *config, wsel_generation **out, char *err,
                              size_t err_size);
/* A generation without an instance or lock: `lib` (closed with it unless
 * borrowed; closed on failure too unless borrowed), its configuration
 * parsed into values (num_params doubles) and its JSON texts kept, the
 * table initialised. What a plugin context is (child.c). */
int32_t wsel__generation_prepare(wsel_host *host, wsel_library *lib, int borrowed,
                                 const char *config, double *values,
                                 wsel_generation **out, char *err, size_t err_size);
/* A zeroed generation, WSEL_CACHE_LINE-aligned for its counters; NULL
 * when out of memory. Freed with free(). */
wsel_generation *wsel__generation_alloc(void);
/* Destroy the instance and free the generation; NULL is a no-op. No
 * select may still be inside it. */
void wsel__generation_destroy(wsel_generation *gen);

#endif
