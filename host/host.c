// SPDX-License-Identifier: Apache-2.0
/*
 * host.c -- the host object: options, creation and destruction, the host
 * table handed to plugins, logging, counters and per-request streams.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void wsel_host_options_default(wsel_host_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
    opts->max_consecutive_failures = 16;
    opts->seed = 0;
    opts->log = NULL;
    opts->log_user = NULL;
    opts->trust.struct_size = sizeof(opts->trust);
    opts->trust.allowed_dirs = NULL;
}

static void host_log_message(const wsel_host *host, int32_t level, const char *msg)
{
    if (host->log != NULL) {
        host->log(host->log_user, level, msg);
        return;
    }
    if (level <= WSEL_LOG_WARN)
        fprintf(stderr, "wsel: %s: %s\n", level == WSEL_LOG_ERROR ? "error" : "warning",
                msg);
}

void wsel__host_log(const wsel_host *host, int32_t level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    host_log_message(host, level, msg);
}

/* A plugin's log level, clamped to the levels the sink knows. */
static int32_t known_level(int32_t level)
{
    if (level < WSEL_LOG_ERROR)
        return WSEL_LOG_ERROR;
    return level > WSEL_LOG_DEBUG ? WSEL_LOG_DEBUG : level;
}

/* wsel_host_api.log of the host's own table (host_ctx = the host): kept
 * for callers of host->api; plugins get their generation's table. */
static void api_log(const wsel_host_api *api, int32_t level, const char *msg)
{
    if (api == NULL || api->host_ctx == NULL || msg == NULL)
        return;
    host_log_message(api->host_ctx, known_level(level), msg);
}

static uint64_t monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec;
}

/*
 * The log rate limit: at most WSEL_HOST_LOG_PER_SECOND messages per
 * instance in each second of CLOCK_MONOTONIC; the rest are dropped and
 * counted (per window, for the summary line, and in the host's
 * log_dropped). Lock-free and allocation-free, so select may log: the
 * thread that moves the window on resets it and says how many the last
 * window dropped. A message racing that reset may be dropped although the
 * new window had room; every message is still either delivered or
 * counted.
 */
static int log_admit(wsel_host *host, wsel_generation *gen)
{
    wsel_log_limit *l = &gen->log_limit;
    uint64_t now = monotonic_s();
    uint64_t window = atomic_load_explicit(&l->window, memory_order_relaxed);
    if (window != now && atomic_compare_exchange_strong(&l->window, &window, now)) {
        uint32_t dropped = atomic_exchange(&l->dropped, 0);
        atomic_store(&l->used, 0);
        if (dropped != 0)
            wsel__host_log(host, WSEL_LOG_WARN,
                           "plugin %s: %u log messages dropped (at most %u a second)",
                           gen->name, dropped, WSEL_HOST_LOG_PER_SECOND);
    }
    if (atomic_fetch_add_explicit(&l->used, 1, memory_order_relaxed) <
        WSEL_HOST_LOG_PER_SECOND)
        return 1;
    atomic_fetch_add_explicit(&l->dropped, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&host->log_dropped, 1, memory_order_relaxed);
    return 0;
}

/* wsel_host_api.log as a plugin instance gets it: host_ctx is its
 * generation; rate-limited per instance. */
static void plugin_log(const wsel_host_api *api, int32_t level, const char *msg)
{
    if (api == NULL || api->host_ctx == NULL || msg == NULL)
        return;
    wsel_generation *gen = api->host_ctx;
    if (!log_admit(gen->host, gen))
        return;
    host_log_message(gen->host, known_level(level), msg);
}

void wsel__generation_api_init(wsel_host *host, wsel_generation *gen, const char *name)
{
    wsel_host_api_init(&gen->api, gen, plugin_log);
    wsel__child_api_init(&gen->api);
    gen->host = host;
    gen->name = name;
}

/* Copy the caller's allow-list so the host does not depend on its life. */
static int32_t copy_allowed_dirs(wsel_host *host, const char *const *dirs)
{
    if (dirs == NULL)
        return 0;
    size_t n = 0;
    while (dirs[n] != NULL)
        n++;
    host->allowed_dirs = calloc(n + 1, sizeof(char *));
    if (host->allowed_dirs == NULL)
        return WSEL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        host->allowed_dirs[i] = strdup(dirs[i]);
        if (host->allowed_dirs[i] == NULL)
            return WSEL_ENOMEM;
    }
    host->trust.allowed_dirs = (const char *const *)host->allowed_dirs;
    return 0;
}

static void free_allowed_dirs(wsel_host *host)
{
    if (host->allowed_dirs == NULL)
        return;
    for (size_t i = 0; host->allowed_dirs[i] != NULL; i++)
        free(host->allowed_dirs[i]);
    free(host->allowed_dirs);
}

/* Isolated mode: the options' tail with defaults for its zero fields, and
 * an owned copy of the helper path (isolated_options.h). */
static int32_t copy_isolated_options(wsel_host *host, const wsel_host_options *o)
{
    wsel_isolated_options *iso = &host->isolated;
    iso->enabled = o->isolated != 0;
    iso->select_deadline_us =
        o->select_deadline_us ? o->select_deadline_us : WSEL_ISOLATED_DEFAULT_DEADLINE_US;
    iso->restart_backoff_us =
        o->restart_backoff_us ? o->restart_backoff_us : WSEL_ISOLATED_DEFAULT_BACKOFF_US;
    iso->as_limit_mb =
        o->helper_as_limit_mb ? o->helper_as_limit_mb : WSEL_ISOLATED_DEFAULT_AS_MB;
    iso->cpu_limit_s =
        o->helper_cpu_limit_s ? o->helper_cpu_limit_s : WSEL_ISOLATED_DEFAULT_CPU_S;
    iso->hang_timeout_us =
        o->hang_timeout_us ? o->hang_timeout_us : WSEL_ISOLATED_DEFAULT_HANG_US;
    if (iso->hang_timeout_us < iso->select_deadline_us)
        iso->hang_timeout_us = iso->select_deadline_us;
    if (o->helper_path != NULL) {
        iso->helper_path = strdup(o->helper_path);
        if (iso->helper_path == NULL)
            return WSEL_ENOMEM;
    }
    return 0;
}

void wsel_host_api_init(wsel_host_api *api, void *host_ctx, wsel_api_log_fn log)
{
    if (api == NULL)
        return;
    memset(api, 0, sizeof(*api));
    api->struct_size = sizeof(*api);
    api->abi_major = WSEL_ABI_MAJOR;
    api->abi_minor = WSEL_ABI_MINOR;
    api->host_ctx = host_ctx;
    api->log = log;
    api->rng_u64 = wsel_rng_u64;
    api->rng_uniform = wsel_rng_uniform;
    api->softmax_sample = wsel_softmax_sample;
    api->argmin = wsel_argmin;
    api->rng_below = wsel_rng_below;
    api->eligible_skip = wsel_eligible_skip;
}

/* Defaults overlaid with the caller's struct up to its struct_size; a zero
 * field there means its default too. */
static void effective_options(const wsel_host_options *opts, wsel_host_options *out)
{
    wsel_host_options_default(out);
    if (opts == NULL)
        return;
    uint32_t default_failures = out->max_consecutive_failures;
    size_t n = opts->struct_size < sizeof(*out) ? opts->struct_size : sizeof(*out);
    memcpy(out, opts, n);
    out->struct_size = sizeof(*out);
    if (out->max_consecutive_failures == 0)
        out->max_consecutive_failures = default_failures;
}

int32_t wsel_host_create(const wsel_host_options *opts, wsel_host **out)
{
    if (out == NULL)
        return WSEL_EINVAL;
    wsel_host_options o;
    effective_options(opts, &o);

    size_t size =
        (sizeof(wsel_host) + WSEL_CACHE_LINE - 1) / WSEL_CACHE_LINE * WSEL_CACHE_LINE;
    wsel_host *host = aligned_alloc(WSEL_CACHE_LINE, size);
    if (host == NULL)
        return WSEL_ENOMEM;
    memset(host, 0, size);
    wsel_host_api_init(&host->api, host, api_log);
    host->log = o.log;
    host->log_user = o.log_user;
    /* Internally 0 = never eject (select.c). */
    host->max_consecutive_failures = o.max_consecutive_failures == WSEL_HOST_NEVER_EJECT
                                         ? 0
                                         : o.max_consecutive_failures;
    host->seed = o.seed;
    host->trust.struct_size = sizeof(host->trust);

    int32_t rc = WSEL_ENOMEM;
    if (copy_allowed_dirs(host, o.trust.allowed_dirs) < 0)
        goto out_free_dirs;
    if (copy_isolated_options(host, &o) < 0)
        goto out_free_dirs;
    if (pthread_mutex_init(&host->control, NULL) != 0)
        goto out_free_dirs;
    atomic_init(&host->live, NULL);
    *out = host;
    return 0;

out_free_dirs:
    free(host->isolated.helper_path);
    wsel__child_libs_free(host);
    free_allowed_dirs(host);
    free(host);
    return rc;
}

void wsel_host_destroy(wsel_host *host)
{
    if (host == NULL)
        return;
    pthread_mutex_lock(&host->control);
    wsel__host_reclaim_all(host);
    pthread_mutex_unlock(&host->control);
    wsel__generation_destroy(atomic_load(&host->live));
    pthread_mutex_destroy(&host->control);
    free(host->isolated.helper_path);
    wsel__child_libs_free(host);
    free_allowed_dirs(host);
    free(host);
}

void wsel_host_prepare_request_sized(const wsel_host *host, wsel_request *request,
                                     size_t request_size, wsel_rng *rng)
{
    if (host == NULL || request == NULL || rng == NULL ||
        request_size < WSEL_REQUEST_SIZE_1_0)
        return;
    /* Same derivation as the plugin test harness, so a decision can be
     * replayed there from (seed, request_id). */
    wsel_rng_seed(rng, host->seed ^ (request->request_id * 0x9e3779b97f4a7c15ull));
    request->struct_size =
        (uint32_t)(request_size < sizeof(*request) ? request_size : sizeof(*request));
    request->uniform = wsel_rng_uniform(rng);
    request->rng = rng;
}

void wsel_host_prepare_request(const wsel_host *host, wsel_request *request,
                               wsel_rng *rng)
{
    wsel_host_prepare_request_sized(host, request, WSEL_REQUEST_SIZE_1_0, rng);
}

void wsel_host_read_counters(const wsel_host *host, wsel_host_counters *out,
                             size_t out_size)
{
    if (host == NULL || out == NULL)
        return;
    wsel_host *h = (wsel_host *)host; /* atomics are read only */
    wsel_host_counters c;
    memset(&c, 0, sizeof(c));
    const wsel_answer_counters *k = &h->policy_counters;
    c.plugin_answers = atomic_load_explicit(&k->answers.n, memory_order_relaxed);
    for (uint32_t r = 0; r < WSEL_FALLBACK_REASONS_MAX; r++) {
        uint64_t n =
            atomic_load_explicit(&k->fallback_by_reason[r].n, memory_order_relaxed);
        if (r < WSEL_FALLBACK_REASONS)
            c.fallback_by_reason[r] = n;
        else
            c.fallback_by_reason_more[r - WSEL_FALLBACK_REASONS] = n;
        c.fallbacks += n;
    }
    c.selects = c.plugin_answers + c.fallbacks;
    c.switches = atomic_load_explicit(&h->switches, memory_order_relaxed);
    c.failed_switches = atomic_load_explicit(&h->failed_switches, memory_order_relaxed);
    c.ejections = atomic_load_explicit(&h->ejections, memory_order_relaxed);
    c.log_dropped = atomic_load_explicit(&h->log_dropped, memory_order_relaxed);
    for (uint32_t r = 0; r < WSEL_HOST_REASON_SLOTS; r++)
        c.answers_by_reason[r] =
            atomic_load_explicit(&k->answers_by_reason[r].n, memory_order_relaxed);
    memcpy(out, &c, out_size < sizeof(c) ? out_size : sizeof(c));
}

void wsel_host_get_counters(const wsel_host *host, wsel_host_counters *out)
{
    wsel_host_read_counters(host, out, WSEL_HOST_COUNTERS_SIZE_1_0);
}

const char *wsel_host_policy_name(const wsel_host *host)
{
    if (host == NULL)
        return "builtin";
    wsel_generation *gen = atomic_load(&((wsel_host *)host)->live);
    if (gen == NULL || wsel__unavailable(gen) >= 0)
        return "builtin";
    /* The name lives in the plugin's read-only data, which is never
     * unmapped (no dlclose). */
    return gen->plugin->name;
}
