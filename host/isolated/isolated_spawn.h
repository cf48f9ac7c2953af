// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_spawn.h -- how a wsel-isolated-helper helper is started (isolated mode).
 */
#ifndef WSEL_HOST_ISOLATED_SPAWN_H
#define WSEL_HOST_ISOLATED_SPAWN_H

#include <spawn.h>
#include <sys/types.h>

#include "internal.h"
#include "isolated_shm.h"

/* Everything posix_spawn needs, prepared once per generation. */
typedef struct wsel_spawn {
    char *helper; /* owned path of wsel-isolated-helper */
    char **argv;  /* owned, NULL-terminated */
    char **envp;  /* the process environment at prepare time, not owned */
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
} wsel_spawn;

/* Locate wsel-isolated-helper and build its argv (plugin path, config, limits,
 * trust allow-list) and spawn attributes for the slot on `memfd` (>= 10).
 * Returns 0, WSEL_ENOENT (helper not found, message says where it looked)
 * or WSEL_ENOMEM. [control thread] */
int32_t wsel__spawn_prepare(wsel_spawn *sp, const wsel_host *host, const char *path,
                            const char *config, int memfd, char *err, size_t err_size);

/* Start one helper; *pid on success. No allocation by this code (posix_spawn
 * maps its own child stack). Returns 0 or WSEL_EIO with errno set. */
int32_t wsel__spawn_start(wsel_spawn *sp, pid_t *pid);

/* Release what prepare built. */
void wsel__spawn_release(wsel_spawn *sp);

#endif
