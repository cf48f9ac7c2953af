// SPDX-License-Identifier: Apache-2.0
/*
 * child.c -- composing policies (ABI 1.1): the plugin-side functions a
 * generation's host table carries for opening other plugins as children
 * (param_json, child_open, child_finished, child_outcome,
 * child_topology_changed, child_close), their counters, and the plugin
 * context that lets a tool create instances the way a switch does.
 *
 * A child is a wsel_generation of its own (its library, its instance, its
 * lock, its consecutive-failure count) hung under the generation whose
 * instance opened it. So it is loaded through the same trust, ELF,
 * descriptor and configuration checks as a policy, and destroyed with its
 * parent: a switch publishes and retires the parent and its children as
 * one. The checked score and select live in select.c, beside the checks
 * they share with a policy's select.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* One library of the host's child cache (internal.h, child_libs). */
struct wsel_child_lib {
    struct wsel_child_lib *next;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    wsel_library *lib;
};

int32_t wsel__child_library(wsel_host *host, const char *path, wsel_library **out,
                            char *err, size_t err_size)
{
    /* The trust rules run on every open, cached or not. */
    int fd = wsel_trust_open(path, &host->trust, err, err_size);
    if (fd < 0)
        return fd;
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    close(fd);
    if (!ok) {
        wsel__set_error(err, err_size, "%s: cannot stat", path);
        return WSEL_EIO;
    }
    for (struct wsel_child_lib *c = host->child_libs; c != NULL; c = c->next) {
        if (c->dev == st.st_dev && c->ino == st.st_ino && c->size == st.st_size &&
            c->mtime.tv_sec == st.st_mtim.tv_sec &&
            c->mtime.tv_nsec == st.st_mtim.tv_nsec) {
            *out = c->lib;
            return 0;
        }
    }
    struct wsel_child_lib *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        return WSEL_ENOMEM;
    }
    int32_t rc = wsel_library_open(path, &host->trust, &c->lib, err, err_size);
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    c->size = st.st_size;
    c->mtime = st.st_mtim;
    c->next = host->child_libs;
    host->child_libs = c;
    *out = c->lib;
    return 0;
}

void wsel__child_libs_free(wsel_host *host)
{
    struct wsel_child_lib *c = host->child_libs;
    host->child_libs = NULL;
    while (c != NULL) {
        struct wsel_child_lib *next = c->next;
        wsel_library_close(c->lib);
        free(c);
        c = next;
    }
}

struct wsel_plugin_context {
    wsel_generation *gen; /* no instance, no lock: a table and a child list */
};

static wsel_generation *api_gen(const wsel_host_api *api)
{
    return api != NULL ? (wsel_generation *)api->host_ctx : NULL;
}

static const char *api_param_json(const wsel_host_api *api, uint32_t index)
{
    wsel_generation *gen = api_gen(api);
    if (gen == NULL || gen->param_texts == NULL || index >= gen->num_param_texts)
        return NULL;
    const wsel_param_def *d = wsel__descriptor_param(gen->plugin, index);
    if (d == NULL || d->type != WSEL_PARAM_JSON)
        return NULL;
    return gen->param_texts[index];
}

/* `path` as given, or NAME.so beside the parent's own file when it has no
 * '/'. Returns 0 or WSEL_ERANGE (too long). */
static int32_t child_path(const wsel_generation *parent, const char *path, char *out,
                          size_t size)
{
    if (strchr(path, '/') != NULL || parent->lib == NULL) {
        if (strlen(path) >= size)
            return WSEL_ERANGE;
        memcpy(out, path, strlen(path) + 1);
        return 0;
    }
    const char *own = wsel_library_path(parent->lib);
    const char *slash = strrchr(own, '/');
    size_t dir = slash != NULL ? (size_t)(slash - own) : 0;
    int n = slash != NULL ? snprintf(out, size, "%.*s/%s.so", (int)dir, own, path)
                          : snprintf(out, size, "%s.so", path);
    return n < 0 || (size_t)n >= size ? WSEL_ERANGE : 0;
}

static int32_t api_child_open(const wsel_host_api *api, const char *path,
                              const char *config_json, wsel_child **out_child,
                              uint32_t *out_features, char *err, size_t err_size)
{
    wsel_generation *parent = api_gen(api);
    if (parent == NULL || path == NULL || out_child == NULL || path[0] == '\0') {
        wsel__set_error(err, err_size, "child_open: NULL or empty argument");
        return WSEL_EINVAL;
    }
    if (parent->depth + 1 > WSEL_CHILD_MAX_DEPTH) {
        wsel__set_error(err, err_size, "%s: children nest at most %u deep", path,
                        WSEL_CHILD_MAX_DEPTH);
        return WSEL_ECONFIG;
    }
    char full[4096];
    if (child_path(parent, path, full, sizeof(full)) < 0) {
        wsel__set_error(err, err_size, "child_open: path too long");
        return WSEL_ERANGE;
    }
    wsel_generation *child = NULL;
    int32_t rc = wsel__generation_open(parent->host, parent, full, config_json, &child,
                                       err, err_size);
    if (rc < 0)
        return rc;
    /* Append: counters list children in the order they were opened. */
    wsel_generation **tail = &parent->first_child;
    while (*tail != NULL)
        tail = &(*tail)->next_child;
    *tail = child;
    if (out_features != NULL) {
        uint32_t f = 0;
        if (child->plugin->score != NULL)
            f |= WSEL_CHILD_HAS_SCORE;
        if (child->plugin->capabilities & WSEL_CAP_STATELESS)
            f |= WSEL_CHILD_STATELESS;
        *out_features = f;
    }
    *out_child = (wsel_child *)child;
    return 0;
}

static int child_usable(const wsel_generation *c)
{
    return c != NULL && wsel__unavailable(c) < 0;
}

static void api_child_finished(const wsel_host_api *api, wsel_child *child,
                               uint64_t request_id, uint64_t worker_id, uint32_t dp_rank)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (!child_usable(c) || c->plugin->on_request_finished == NULL)
        return;
    wsel__instance_lock(c, 0);
    c->plugin->on_request_finished(c->instance, request_id, worker_id, dp_rank);
    wsel__instance_unlock(c);
}

static void api_child_outcome(const wsel_host_api *api, wsel_child *child,
                              const wsel_outcome *outcome)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (!child_usable(c) || outcome == NULL || c->plugin->on_request_outcome == NULL)
        return;
    wsel_outcome o;
    wsel__outcome_copy(&o, outcome);
    wsel__instance_lock(c, 0);
    c->plugin->on_request_outcome(c->instance, &o);
    wsel__instance_unlock(c);
}

static void api_child_topology_changed(const wsel_host_api *api, wsel_child *child,
                                       const wsel_table *table)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (c == NULL || c->closed || table == NULL || c->plugin->on_topology_changed == NULL)
        return;
    wsel__instance_lock(c, 1);
    c->plugin->on_topology_changed(c->instance, table);
    wsel__instance_unlock(c);
}

/* Destroy a child's instance, then its own children. */
static void close_child(wsel_generation *c)
{
    if (c->closed)
        return;
    c->plugin->destroy(c->instance);
    c->instance = NULL;
    c->closed = 1;
    wsel__children_destroy(c);
}

/* Unlink a child from its parent's list and free it entirely: a pipeline
 * created and destroyed many times (validate's lifecycle check) must not
 * grow. Its counters go with it. */
static void api_child_close(const wsel_host_api *api, wsel_child *child)
{
    (void)api;
    wsel_generation *c = (wsel_generation *)child;
    if (c == NULL)
        return;
    if (c->parent != NULL) {
        wsel_generation **link = &c->parent->first_child;
        while (*link != NULL && *link != c)
            link = &(*link)->next_child;
        if (*link == c)
            *link = c->next_child;
    }
    close_child(c);
    c->next_child = NULL;
    wsel__generation_destroy(c);
}

void wsel__children_destroy(wsel_generation *gen)
{
    wsel_generation *c = gen->first_child;
    gen->first_child = NULL;
    while (c != NULL) {
        wsel_generation *next = c->next_child;
        close_child(c);
        c->next_child = NULL;
        wsel__generation_destroy(c); /* closed: frees without destroy() */
        c = next;
    }
}

void wsel__child_api_init(wsel_host_api *api)
{
    api->param_json = api_param_json;
    api->child_open = api_child_open;
    api->child_score = wsel__child_score_checked;
    api->child_select = wsel__child_select_checked;
    api->child_finished = api_child_finished;
    api->child_outcome = api_child_outcome;
    api->child_topology_changed = api_child_topology_changed;
    api->child_close = api_child_close;
}

/* --- counters ------------------------------------------------------------ */

/* The index-th child below gen, depth first; *index counts down. */
static wsel_generation *nth_child(wsel_generation *gen, uint32_t *index)
{
    for (wsel_generation *c = gen->first_child; c != NULL; c = c->next_child) {
        if (*index == 0)
            return c;
        (*index)--;
        wsel_generation *deeper = nth_child(c, index);
        if (deeper != NULL)
            return deeper;
    }
    return NULL;
}

static int32_t read_child(wsel_generation *gen, uint32_t index, wsel_child_counters *out,
                          size_t out_size)
{
    wsel_generation *c = gen != NULL ? nth_child(gen, &index) : NULL;
    if (c == NULL)
        return WSEL_ENOENT;
    wsel_child_counters k;
    memset(&k, 0, sizeof(k));
    k.struct_size = sizeof(k);
    k.depth = c->depth;
    snprintf(k.name, sizeof(k.name), "%s", c->plugin->name);
    wsel_answer_counters *a = &c->child_counters;
    k.scores = atomic_load_explicit(&a->scores.n, memory_order_relaxed);
    k.answers = atomic_load_explicit(&a->answers.n, memory_order_relaxed);
    for (uint32_t r = 0; r < WSEL_FALLBACK_REASONS_MAX; r++) {
        k.fallback_by_reason[r] =
            atomic_load_explicit(&a->fallback_by_reason[r].n, memory_order_relaxed);
        k.fallbacks += k.fallback_by_reason[r];
    }
    k.ejected = atomic_load_explicit(&c->ejected, memory_order_relaxed);
    memcpy(out, &k, out_size < sizeof(k) ? out_size : sizeof(k));
    return 0;
}

int32_t wsel_host_read_child_counters(wsel_host *host, uint32_t index,
                                      wsel_child_counters *out, size_t out_size)
{
    if (host == NULL || out == NULL || out_size == 0)
        return WSEL_EINVAL;
    uint32_t idx = wsel__host_read_lock(host);
    int32_t rc = read_child(wsel__host_live(host), index, out, out_size);
    wsel__host_read_unlock(host, idx);
    return rc;
}

/* --- plugin contexts ------------------------------------------------------ */

int32_t wsel_plugin_context_open(wsel_host *host, wsel_library *lib, const char *config,
                                 double *values, wsel_plugin_context **out, char *err,
                                 size_t err_size)
{
    if (host == NULL || lib == NULL || out == NULL ||
        (values == NULL && wsel_library_plugin(lib)->num_params > 0)) {
        wsel__set_error(err, err_size, "plugin context: NULL argument");
        return WSEL_EINVAL;
    }
    wsel_plugin_context *ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        wsel__set_error(err, err_size, "plugin context: out of memory");
        return WSEL_ENOMEM;
    }
    int32_t rc =
        wsel__generation_prepare(host, lib, 1, config, values, &ctx->gen, err, err_size);
    if (rc < 0) {
        free(ctx);
        return rc;
    }
    ctx->gen->closed = 1; /* no instance of its own to destroy */
    *out = ctx;
    return 0;
}

const wsel_host_api *wsel_plugin_context_api(wsel_plugin_context *ctx)
{
    return ctx != NULL ? &ctx->gen->api : NULL;
}

int32_t wsel_plugin_context_child_counters(wsel_plugin_context *ctx, uint32_t index,
                                           wsel_child_counters *out, size_t out_size)
{
    if (ctx == NULL || out == NULL || out_size == 0)
        return WSEL_EINVAL;
    return read_child(ctx->gen, index, out, out_size);
}

void wsel_plugin_context_close(wsel_plugin_context *ctx)
{
    if (ctx == NULL)
        return;
    /* closed, no lock initialised: free what it owns without destroy(). */
    wsel_generation *gen = ctx->gen;
    wsel__children_destroy(gen);
    wsel__config_texts_free(gen->param_texts, gen->num_param_texts);
    free(gen->param_texts);
    free(gen);
    free(ctx);
}
