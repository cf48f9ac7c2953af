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

/* The bundled policies, in the order `wsel sim` compares them. */
extern const char *const wsel_bundled_plugins[];
extern const unsigned wsel_num_bundled_plugins;

/* Resolve `spec` into `out` (out_size bytes). Returns 0, or -1 with a
 * message in err naming every folder searched. */
int wsel_plugin_resolve(const char *spec, char *out, size_t out_size, char *err,
                        size_t err_size);

#endif
