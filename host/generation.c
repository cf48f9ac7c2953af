// SPDX-License-Identifier: Apache-2.0
/*
 * generation.c -- a policy generation's life (load, configure, create,
 * destroy) and the grace period that separates publishing a new one from
 * destroying the old: two reader counters per epoch parity, advanced by
 * later polls so that neither a switch nor a select waits for the other.
 * Why that is safe: ARCHITECTURE.md, "Concurrency".
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "isolated.h"

/* Wait for one counter to read zero: spin a little, then sleep-yield. */
static void wait_drained(wsel_padded_counter *c)
{
    for (unsigned spins = 0; atomic_load(&c->n) != 0; spins++) {
        if (spins < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50 * 1000}; /* 50 us */
            nanosleep(&ts, NULL);
        }
    }
}

/* Flip the epoch; the grace period then waits for the old parity. */
static void flip(wsel_host *host)
{
    uint64_t old_epoch = atomic_fetch_add(&host->epoch, 1);
    host->grace_counter = (uint32_t)(old_epoch & 1u);
}

static void destroy_list(wsel_generation *gen)
{
    while (gen != NULL) {
        wsel_generation *next = gen->next_retired;
        wsel__generation_destroy(gen);
        gen = next;
    }
}

static uint32_t count_list(const wsel_generation *gen)
{
    uint32_t n = 0;
    for (; gen != NULL; gen = gen->next_retired)
        n++;
    return n;
}

uint32_t wsel__host_poll_grace(wsel_host *host)
{
    for (;;) {
        if (host->grace_phase == 0) {
            if (host->retired == NULL)
                break;
            host->in_grace = host->retired;
            host->retired = NULL;
            flip(host);
            host->grace_phase = 1;
        }
        if (atomic_load(&host->readers[host->grace_counter].n) != 0)
            break;
        if (host->grace_phase == 1) {
            flip(host);
            host->grace_phase = 2;
            continue;
        }
        destroy_list(host->in_grace);
        host->in_grace = NULL;
        host->grace_phase = 0;
    }
    return count_list(host->retired) + count_list(host->in_grace);
}

void wsel__host_retire(wsel_host *host, wsel_generation *gen)
{
    if (gen != NULL) {
        gen->next_retired = host->retired;
        host->retired = gen;
    }
    wsel__host_poll_grace(host);
}

void wsel__host_reclaim_all(wsel_host *host)
{
    while (wsel__host_poll_grace(host) != 0)
        wait_drained(&host->readers[host->grace_counter]);
}

static int32_t create_instance(wsel_host *host, wsel_generation *gen,
                               const double *values, char *err, size_t err_size)
{
    const wsel_plugin *p = gen->plugin;
    void *instance = NULL;
    wsel__generation_api_init(host, gen, p->name);
    int32_t rc = p->create(&gen->api, values, p->num_params, &instance);
    if (rc != 0) {
        wsel__set_error(err, err_size, "%s: plugin %s create failed: %s (%d)",
                        wsel_library_path(gen->lib), p->name, wsel_strerror(rc), (int)rc);
        return rc < 0 ? rc : WSEL_EPLUGIN;
    }
    gen->instance = instance;
    return 0;
}

wsel_generation *wsel__generation_alloc(void)
{
    wsel_generation *gen = aligned_alloc(WSEL_CACHE_LINE, sizeof(*gen));
    if (gen != NULL)
        memset(gen, 0, sizeof(*gen));
    return gen;
}

/* Free what a generation owns besides its instance and lock. */
static void generation_free(wsel_generation *gen)
{
    wsel__children_destroy(gen);
    if (gen->param_texts != NULL) {
        wsel__config_texts_free(gen->param_texts, gen->num_param_texts);
        free(gen->param_texts);
    }
    if (gen->lib != NULL && !gen->borrowed_lib)
        wsel_library_close(gen->lib);
    free(gen);
}

int32_t wsel__generation_prepare(wsel_host *host, wsel_library *lib, int borrowed,
                                 const char *config, double *values,
                                 wsel_generation **out, char *err, size_t err_size)
{
    const char *path = wsel_library_path(lib);
    const wsel_plugin *p = wsel_library_plugin(lib);
    wsel_generation *gen = wsel__generation_alloc();
    char **texts = p->num_params ? calloc(p->num_params, sizeof(char *)) : NULL;
    if (gen == NULL || (p->num_params && texts == NULL)) {
        free(gen);
        free(texts);
        wsel__set_error(err, err_size, "%s: out of memory", path);
        if (!borrowed)
            wsel_library_close(lib);
        return WSEL_ENOMEM;
    }
    gen->lib = lib;
    gen->borrowed_lib = borrowed ? 1u : 0u;
    gen->plugin = p;
    gen->param_texts = texts;
    gen->num_param_texts = p->num_params;
    int32_t rc = wsel__config_parse_texts(lib, config, values, texts, err, err_size);
    if (rc < 0) {
        generation_free(gen);
        return rc;
    }
    wsel__generation_api_init(host, gen, p->name);
    *out = gen;
    return 0;
}

int32_t wsel__generation_open(wsel_host *host, wsel_generation *parent, const char *path,
                              const char *config, wsel_generation **out, char *err,
                              size_t err_size)
{
    double values[WSEL_MAX_PARAMS];
    wsel_library *lib = NULL;
    /* A child's library comes from the host's cache (child.c). */
    int32_t rc = parent != NULL
                     ? wsel__child_library(host, path, &lib, err, err_size)
                     : wsel_library_open(path, &host->trust, &lib, err, err_size);
    if (rc < 0)
        return rc;
    wsel_generation *gen = NULL;
    rc = wsel__generation_prepare(host, lib, parent != NULL, config, values, &gen, err,
                                  err_size);
    if (rc < 0)
        return rc;
    if (parent != NULL) {
        gen->parent = parent;
        gen->depth = parent->depth + 1;
    }
    if ((gen->plugin->capabilities & WSEL_CAP_CONCURRENT_SELECT) == 0)
        gen->lock_mode = WSEL_LOCK_EXCLUSIVE;
    else if (gen->plugin->on_topology_changed != NULL)
        gen->lock_mode = WSEL_LOCK_SHARED;
    else
        gen->lock_mode = WSEL_LOCK_NONE;

    /* Prefer writers: on_topology_changed must not starve behind a steady
     * stream of shared selects. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int prc = pthread_rwlock_init(&gen->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (prc != 0) {
        wsel__set_error(err, err_size, "%s: cannot create the instance lock", path);
        rc = WSEL_ENOMEM;
        goto out_free_gen;
    }
    rc = create_instance(host, gen, values, err, err_size);
    if (rc < 0)
        goto out_destroy_lock;
    *out = gen;
    return 0;

out_destroy_lock:
    pthread_rwlock_destroy(&gen->lock);
out_free_gen:
    generation_free(gen);
    return rc;
}

int32_t wsel__generation_create(wsel_host *host, const char *path, const char *config,
                                wsel_generation **out, char *err, size_t err_size)
{
    /* Isolated mode: the plugin loads in a helper process (isolated.h). */
    if (host->isolated.enabled)
        return wsel__isolated_generation_create(host, path, config, out, err, err_size);
    return wsel__generation_open(host, NULL, path, config, out, err, err_size);
}

void wsel__generation_destroy(wsel_generation *gen)
{
    if (gen == NULL)
        return;
    if (!gen->closed)
        gen->plugin->destroy(gen->instance);
    pthread_rwlock_destroy(&gen->lock);
    generation_free(gen);
}
