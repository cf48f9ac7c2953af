// SPDX-License-Identifier: Apache-2.0
/*
 * plugin_path.c -- find a bundled or installed plugin by name.
 */
#include "plugin_path.h"
#include "options.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Is a plugin of `role` in `set`? default: what wsel is and is measured
 * against; peers: the ports beside the reference; all: every plugin that
 * runs without a configuration. */
static int role_in_set(wsel_plugin_role role, uint32_t set)
{
    switch (set) {
    case SIM_PLUGINS_DEFAULT:
        return role == WSEL_ROLE_REFERENCE || role == WSEL_ROLE_BASELINE ||
               role == WSEL_ROLE_WSEL;
    case SIM_PLUGINS_PEERS:
        return role == WSEL_ROLE_REFERENCE || role == WSEL_ROLE_PEER;
    default:
        return role != WSEL_ROLE_COMPOSER;
    }
}

uint32_t wsel_bundled_set(uint32_t set, const char **out, uint32_t max)
{
    uint32_t n = 0;
    for (unsigned i = 0; i < wsel_num_bundled_plugins && n < max; i++)
        if (role_in_set(wsel_bundled_plugins[i].role, set))
            out[n++] = wsel_bundled_plugins[i].name;
    return n;
}

const char *wsel_plugin_role_name(wsel_plugin_role role)
{
    static const char *const names[] = {"reference", "baseline", "wsel", "composer",
                                        "peer"};
    return (unsigned)role < sizeof(names) / sizeof(names[0]) ? names[role] : "?";
}

static int is_readable_file(const char *path)
{
    return access(path, R_OK) == 0;
}

/* Try DIR/NAME.so; on a hit copy it to out. Appends DIR to `tried`. */
static int try_dir(const char *dir, size_t dir_len, const char *name, char *out,
                   size_t out_size, char *tried, size_t tried_size)
{
    char candidate[PATH_MAX];
    int n = snprintf(candidate, sizeof(candidate), "%.*s/%s.so", (int)dir_len, dir, name);
    if (n < 0 || (size_t)n >= sizeof(candidate))
        return 0;
    size_t used = strlen(tried);
    if (used < tried_size)
        snprintf(tried + used, tried_size - used, "%s%.*s", used ? ", " : "",
                 (int)dir_len, dir);
    if (!is_readable_file(candidate) || (size_t)n >= out_size)
        return 0;
    memcpy(out, candidate, (size_t)n + 1);
    return 1;
}

static int is_valid_name(const char *name)
{
    if (*name == '\0')
        return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

int wsel_plugin_resolve(const char *spec, char *out, size_t out_size, char *err,
                        size_t err_size)
{
    if (strchr(spec, '/') != NULL) {
        if (strlen(spec) >= out_size) {
            snprintf(err, err_size, "%s: path too long", spec);
            return -1;
        }
        strcpy(out, spec);
        return 0;
    }
    if (!is_valid_name(spec)) {
        snprintf(err, err_size, "'%s' is not a plugin name (use a path with '/')", spec);
        return -1;
    }

    char tried[2048] = "";
    const char *env = getenv("WSEL_PLUGIN_PATH");
    if (env != NULL) {
        for (const char *p = env; *p;) {
            size_t len = strcspn(p, ":");
            if (len > 0 && try_dir(p, len, spec, out, out_size, tried, sizeof(tried)))
                return 0;
            p += len;
            if (*p == ':')
                p++;
        }
    }

    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            char dir[PATH_MAX];
            static const char *const relative[] = {"/../plugins", "/../lib/wsel/plugins"};
            for (size_t i = 0; i < sizeof(relative) / sizeof(relative[0]); i++) {
                int m = snprintf(dir, sizeof(dir), "%s%s", exe, relative[i]);
                if (m < 0 || (size_t)m >= sizeof(dir))
                    continue;
                char resolved[PATH_MAX];
                const char *use = realpath(dir, resolved) ? resolved : dir;
                if (try_dir(use, strlen(use), spec, out, out_size, tried, sizeof(tried)))
                    return 0;
            }
        }
    }
    snprintf(err, err_size, "no plugin named '%s' (looked for %s.so in: %s)", spec, spec,
             tried[0] ? tried : "nowhere");
    return -1;
}
