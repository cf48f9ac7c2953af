/* SPDX-License-Identifier: Apache-2.0 */

/*
 * ngx_http_wsel_plugin_path.c -- a policy given as `wsel sim` takes one:
 * a path (anything with a '/') as it is, a bare name (`hysteresis`) as
 * NAME.so in the plugin folder installed beside the module
 * (P/lib/wsel/plugins for P/lib/nginx/modules/), else in the build tree's
 * plugins/ folder. Both folders are relative to the module's own file, so
 * an install moved with `cmake --install --prefix` finds its plugins.
 */

#include "ngx_http_wsel_module.h"

#include <dlfcn.h>


/* nginx/CMakeLists.txt computes these; nginx's own build (./config) gets
 * the install layout */
#ifndef WSEL_NGINX_PLUGINDIR_INSTALLED
#define WSEL_NGINX_PLUGINDIR_INSTALLED  "../../wsel/plugins"
#endif
#ifndef WSEL_NGINX_PLUGINDIR_BUILD
#define WSEL_NGINX_PLUGINDIR_BUILD  WSEL_NGINX_PLUGINDIR_INSTALLED
#endif


static const char  *ngx_http_wsel_plugin_dirs[] = {
    WSEL_NGINX_PLUGINDIR_INSTALLED,
    WSEL_NGINX_PLUGINDIR_BUILD
};


/* The same characters as the wsel command's names (tools/plugin_path.c). */
static ngx_int_t
ngx_http_wsel_is_plugin_name(const char *name)
{
    const char  *p;

    if (*name == '\0') {
        return 0;
    }

    for (p = name; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'
              || *p == '.'))
        {
            return 0;
        }
    }

    return 1;
}


/* The folder of the module's own file, symlinks resolved (the host's
 * trust walk refuses a path through one). */
static ngx_int_t
ngx_http_wsel_module_dir(char *dir)
{
    char     *slash;
    Dl_info   info;

    if (dladdr((void *) &ngx_http_wsel_is_plugin_name, &info) == 0
        || info.dli_fname == NULL
        || realpath(info.dli_fname, dir) == NULL)
    {
        return NGX_ERROR;
    }

    slash = strrchr(dir, '/');
    if (slash == NULL) {
        return NGX_ERROR;
    }

    *slash = '\0';

    return NGX_OK;
}


const char *
ngx_http_wsel_plugin_path(ngx_pool_t *pool, const char *spec, char *err,
    size_t size)
{
    char        dir[PATH_MAX], candidate[PATH_MAX], found[PATH_MAX];
    char       *path;
    size_t      len;
    ngx_uint_t  i;

    if (strchr(spec, '/') != NULL) {
        return spec;
    }

    if (!ngx_http_wsel_is_plugin_name(spec)) {
        ngx_snprintf((u_char *) err, size - 1, "\"%s\" is neither a path nor "
                     "a plugin name (letters, digits, _ - .)%Z", spec);
        return NULL;
    }

    if (ngx_http_wsel_module_dir(dir) != NGX_OK) {
        ngx_snprintf((u_char *) err, size - 1, "no plugin named \"%s\": the "
                     "module's own folder is unknown%Z", spec);
        return NULL;
    }

    for (i = 0; i < sizeof(ngx_http_wsel_plugin_dirs) / sizeof(char *); i++) {
        ngx_snprintf((u_char *) candidate, sizeof(candidate) - 1, "%s/%s/%s.so%Z",
                     dir, ngx_http_wsel_plugin_dirs[i], spec);

        if (realpath(candidate, found) == NULL || access(found, R_OK) != 0) {
            continue;
        }

        len = ngx_strlen(found);
        path = ngx_pnalloc(pool, len + 1);
        if (path == NULL) {
            ngx_snprintf((u_char *) err, size - 1, "out of memory%Z");
            return NULL;
        }

        ngx_memcpy(path, found, len + 1);
        return path;
    }

    ngx_snprintf((u_char *) err, size - 1, "no plugin named \"%s\" (looked for "
                 "%s.so in %s/%s and %s/%s)%Z", spec, spec, dir,
                 ngx_http_wsel_plugin_dirs[0], dir,
                 ngx_http_wsel_plugin_dirs[1]);
    return NULL;
}
