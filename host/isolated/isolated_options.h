// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_options.h -- isolated-mode settings as the host keeps them
 * (internal.h embeds them in struct wsel_host; docs/isolated.md).
 */
#ifndef WSEL_HOST_ISOLATED_OPTIONS_H
#define WSEL_HOST_ISOLATED_OPTIONS_H

#include <stdint.h>

/* Isolated-mode settings, defaults applied (host.c fills them from
 * wsel_host_options). */
typedef struct wsel_isolated_options {
    uint32_t enabled;
    uint32_t select_deadline_us;
    uint32_t restart_backoff_us;
    uint32_t as_limit_mb;
    uint32_t cpu_limit_s;
    /* A helper inside one call longer than this is stuck: killed. */
    uint32_t hang_timeout_us;
    /* Owned copy of wsel_host_options.helper_path, or NULL. */
    char *helper_path;
} wsel_isolated_options;

/* Defaults for the zero fields of wsel_host_options' isolated tail. */
#define WSEL_ISOLATED_DEFAULT_DEADLINE_US 5000u
#define WSEL_ISOLATED_DEFAULT_BACKOFF_US  10000u
#define WSEL_ISOLATED_DEFAULT_AS_MB       1024u
#define WSEL_ISOLATED_DEFAULT_CPU_S       3600u
#define WSEL_ISOLATED_DEFAULT_HANG_US     1000000u

#endif
