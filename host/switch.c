// SPDX-License-Identifier: Apache-2.0
/*
 * switch.c -- the control-thread operations on a live host: switching the
 * policy and telling it the topology changed.
 *
 * A switch does everything that can fail (trust, load, checks, config,
 * create) before publishing; publication is one atomic exchange; the old
 * generation is retired and destroyed once its grace period has passed
 * (generation.c), at this or a later poll. Neither selects nor the switch
 * wait for it.
 */
#include "internal.h"

int32_t wsel_host_switch(wsel_host *host, const char *path, const char *config, char *err,
                         size_t err_size)
{
    if (host == NULL || path == NULL) {
        wsel__set_error(err, err_size, "switch: NULL %s", host == NULL ? "host" : "path");
        return WSEL_EINVAL;
    }
    char local_err[512];
    if (err == NULL || err_size == 0) {
        err = local_err;
        err_size = sizeof(local_err);
    }
    err[0] = '\0';

    pthread_mutex_lock(&host->control);
    wsel_generation *gen = NULL;
    int32_t rc = wsel__generation_create(host, path, config, &gen, err, err_size);
    if (rc < 0) {
        atomic_fetch_add_explicit(&host->failed_switches, 1, memory_order_relaxed);
        wsel__host_log(host, WSEL_LOG_INFO, "switch refused, previous policy kept: %s",
                       err);
        pthread_mutex_unlock(&host->control);
        return rc;
    }
    wsel_generation *old = atomic_exchange(&host->live, gen);
    wsel__host_retire(host, old);
    atomic_fetch_add_explicit(&host->switches, 1, memory_order_relaxed);
    wsel__host_log(host, WSEL_LOG_INFO, "switched to plugin %s %s from %s",
                   gen->plugin->name, gen->plugin->version, path);
    pthread_mutex_unlock(&host->control);
    return 0;
}

uint32_t wsel_host_reclaim(wsel_host *host)
{
    if (host == NULL)
        return 0;
    pthread_mutex_lock(&host->control);
    uint32_t pending = wsel__host_poll_grace(host);
    pthread_mutex_unlock(&host->control);
    return pending;
}

void wsel_host_topology_changed(wsel_host *host, const wsel_table *table)
{
    if (host == NULL || table == NULL)
        return;
    pthread_mutex_lock(&host->control);
    /* The control mutex keeps the generation alive: only a switch, which
     * holds it too, could destroy it. */
    wsel_generation *gen = atomic_load(&host->live);
    if (gen != NULL && gen->plugin->on_topology_changed != NULL &&
        wsel__unavailable(gen) < 0) {
        /* Exclusive: the ABI promises this hook never runs concurrently
         * with select on the instance. */
        wsel__instance_lock(gen, 1);
        gen->plugin->on_topology_changed(gen->instance, table);
        wsel__instance_unlock(gen);
    }
    pthread_mutex_unlock(&host->control);
}
