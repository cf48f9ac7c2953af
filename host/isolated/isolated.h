// SPDX-License-Identifier: Apache-2.0
/*
 * isolated.h -- isolated mode inside libwsel-host (docs/isolated.md).
 *
 * With wsel_host_options.isolated set, a generation does not load its
 * plugin into the router's process: it starts a wsel-isolated-helper helper that
 * loads it, and presents the helper to the rest of the host as a plugin
 * whose descriptor (wsel_isolated_channel.desc) forwards every call through
 * shared memory. select.c recognises that descriptor by its select function
 * (wsel__isolated_select) to count a crash or a missed deadline under its own
 * reason. Nothing here is exported.
 */
#ifndef WSEL_HOST_ISOLATED_H
#define WSEL_HOST_ISOLATED_H

#include "internal.h"

/* Returns of wsel__isolated_select outside the WSEL_E* range: the helper
 * died, exited or answered garbage / missed its deadline. A plugin's own
 * error codes pass through, clamped into the WSEL_E* range. */
#define WSEL_ISOLATED_ECRASHED (-1001)
#define WSEL_ISOLATED_ETIMEOUT (-1002)
/* The request or table exceeds what the slot carries (WSEL_ISO_MAX_*): the
 * host's limit, never counted against the plugin. */
#define WSEL_ISOLATED_EHOSTLIMIT (-1003)

/*
 * Start a helper for the plugin at `path` with JSON `config` and wait until
 * it has loaded and created its instance. On success *out is a generation
 * whose plugin is the forwarding descriptor and whose instance is the
 * channel; it is destroyed by wsel__generation_destroy like any other (the
 * descriptor's destroy stops the helper). On failure the message names the
 * plugin path and the helper's reason. [control thread]
 */
int32_t wsel__isolated_generation_create(wsel_host *host, const char *path,
                                         const char *config, wsel_generation **out,
                                         char *err, size_t err_size);

/* The forwarding select (the descriptor's select): a wsel_plugin.select
 * that returns WSEL_ISOLATED_E* for helper failures. [any thread] */
int32_t wsel__isolated_select(void *channel, const wsel_request *request,
                              const wsel_table *table, wsel_choice *choice);

/* The fallback reason for a negative return of wsel__isolated_select. */
static inline int wsel__isolated_reason(int32_t rc)
{
    if (rc == WSEL_ISOLATED_ETIMEOUT)
        return WSEL_FALLBACK_TIMEOUT;
    if (rc == WSEL_ISOLATED_ECRASHED)
        return WSEL_FALLBACK_CRASHED;
    if (rc == WSEL_ISOLATED_EHOSTLIMIT)
        return WSEL_FALLBACK_HOST_LIMIT;
    return WSEL_FALLBACK_ERROR;
}

#endif
