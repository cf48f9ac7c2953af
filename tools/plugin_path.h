// SPDX-License-Identifier: Apache-2.0
/*
 * plugin_path.h -- turn `--plugin NAME|PATH` into a file path.
 *
 * Anything containing '/' is a path and returned as is. A bare NAME is
 * looked up, first match wins, as NAME.so in:
 *   1. each folder of $WSEL_PLUGIN_PATH (colon-separated);
 *   2. <dir of the wsel executable>/../plugins      (the build tree);
 *   3. <dir of the wsel executable>/../lib/wsel/plugins (an install).
 */
#ifndef WSEL_TOOLS_PLUGIN_PATH_H
#define WSEL_TOOLS_PLUGIN_PATH_H

#include <stddef.h>
#include <stdint.h>

/* A bundled plugin's role (plugins/CMakeLists.txt documents each). */
typedef enum wsel_plugin_role {
    WSEL_ROLE_REFERENCE,
    WSEL_ROLE_BASELINE,
    WSEL_ROLE_WSEL,
    WSEL_ROLE_COMPOSER,
    WSEL_ROLE_PEER,
} wsel_plugin_role;

typedef struct wsel_bundled_plugin {
    const char *name;
    wsel_plugin_role role;
} wsel_bundled_plugin;

/* Every bundled plugin, in the order `wsel sim` compares them: generated
 * (bundled_plugins.c) from the list in plugins/CMakeLists.txt. */
extern const wsel_bundled_plugin wsel_bundled_plugins[];
extern const unsigned wsel_num_bundled_plugins;

/* The names of the bundled plugins in `set` (a sim_plugin_set: default,
 * peers or all), in order, into out[0..max). Returns their count. The
 * strings are static. */
uint32_t wsel_bundled_set(uint32_t set, const char **out, uint32_t max);
/* The role's name as plugins/CMakeLists.txt spells it. */
const char *wsel_plugin_role_name(wsel_plugin_role role);

/* Resolve `spec` into `out` (out_size bytes). Returns 0, or -1 with a
 * message in err naming every folder searched. */
int wsel_plugin_resolve(const char *spec, char *out, size_t out_size, char *err,
                        size_t err_size);

#endif
