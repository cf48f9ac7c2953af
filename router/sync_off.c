// SPDX-License-Identifier: Apache-2.0
/* sync_off.c -- replica sync's transport when libwsel-router is built
 * without libnats: starting says so. */
#include <stdio.h>

#include "sync.h"

int32_t wsel_router_sync_available(void)
{
    return 0;
}

int32_t rt_sync_transport_start(wsel_router *r, rt_sync *s, char *err, size_t err_size)
{
    (void)r;
    (void)s;
    if (err && err_size)
        snprintf(err, err_size,
                 "wsel_router_sync_start: built without libnats (libnats-dev)");
    return WSEL_ESTATE;
}

void rt_sync_transport_stop(wsel_router *r, rt_sync *s)
{
    (void)r;
    (void)s;
}

void rt_sync_transport_free(rt_sync *s)
{
    (void)s;
}

void rt_sync_transport_wake(rt_sync *s)
{
    (void)s;
}
