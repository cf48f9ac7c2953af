// SPDX-License-Identifier: Apache-2.0
/*
 * isolated_spawn.c -- find wsel-isolated-helper, build its command line once, and
 * start it with a clean set of descriptors and default signal dispositions.
 *
 * Everything that allocates happens in wsel__spawn_prepare, at switch time;
 * wsel__spawn_start (which a select may call to restart a helper) only
 * calls posix_spawn with what was prepared.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolated_spawn.h"
#include "trust.h"

/* The executable's own folder (from /proc/self/exe), or "" if unknown. */
static void exe_dir(char *out, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    if (n <= 0) {
        out[0] = '\0';
        return;
    }
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        out[0] = '\0';
}

/*
 * The helper runs the plugin with the router's rights, so it passes the
 * plugins' trust rules (trust.h): a regular file owned by root or us, not
 * writable by others, in folders likewise, walked from "/" on descriptors;
 * and executable. Its resolved path (owned) goes to *out, and every spawn
 * uses it: no folder on it can be changed by anyone but root or us.
 */
static int32_t trusted_helper(const char *path, char **out, char *err, size_t err_size)
{
    wsel_trust_found *found = malloc(sizeof(*found));
    if (found == NULL)
        return WSEL_ENOMEM;
    char why[1024];
    int32_t rc =
        wsel__trust_walk_file(path, "helper program", NULL, found, why, sizeof(why));
    if (rc < 0) {
        wsel__set_error(err, err_size, "isolated mode: helper %s", why);
        goto out_free_found;
    }
    if (faccessat(found->fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) != 0) {
        wsel__set_error(err, err_size,
                        "isolated mode: helper %s: refused: not executable", path);
        rc = WSEL_EPERM;
        goto out_close_fd;
    }
    *out = strdup(found->resolved);
    rc = *out != NULL ? 0 : WSEL_ENOMEM;

out_close_fd:
    close(found->fd);
out_free_found:
    free(found);
    return rc;
}

/* Where wsel-isolated-helper is: the option, $WSEL_ISOLATED_HELPER,
 * $WSEL_SANDBOX (the 1.0 name), next to the running executable, or ../bin/
 * from it; then checked by trusted_helper. Returns 0 with an owned
 * resolved path in *out, or a negative code with a message naming the
 * places looked at or the rule broken. */
static int32_t locate_helper(const wsel_host *host, char **out, char *err,
                             size_t err_size)
{
    if (host->isolated.helper_path != NULL)
        return trusted_helper(host->isolated.helper_path, out, err, err_size);
    const char *const env_names[] = {"WSEL_ISOLATED_HELPER", "WSEL_SANDBOX"};
    for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++) {
        const char *env = getenv(env_names[i]);
        if (env != NULL && env[0] != '\0')
            return trusted_helper(env, out, err, err_size);
    }
    char dir[PATH_MAX];
    exe_dir(dir, sizeof(dir));
    const char *const suffixes[] = {"/wsel-isolated-helper",
                                    "/../bin/wsel-isolated-helper"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s%s", dir, suffixes[i]);
        if (access(path, X_OK) == 0)
            return trusted_helper(path, out, err, err_size);
    }
    wsel__set_error(err, err_size,
                    "isolated mode: wsel-isolated-helper not found (no helper_path "
                    "option, no $WSEL_ISOLATED_HELPER, not in %s/ nor %s/../bin/)",
                    dir, dir);
    return WSEL_ENOENT;
}

static void free_argv(char **argv)
{
    if (argv == NULL)
        return;
    for (size_t i = 0; argv[i] != NULL; i++)
        free(argv[i]);
    free(argv);
}

static char *u32_text(uint32_t v)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%u", v);
    return strdup(buf);
}

/* wsel-isolated-helper --plugin P [--config J] --as-mb N --cpu-s N [--allow D]... */
static char **build_argv(const wsel_host *host, const char *helper, const char *path,
                         const char *config)
{
    size_t dirs = 0;
    if (host->trust.allowed_dirs != NULL)
        while (host->trust.allowed_dirs[dirs] != NULL)
            dirs++;
    size_t n = 9 + 2 * dirs + 1;
    char **argv = calloc(n, sizeof(char *));
    if (argv == NULL)
        return NULL;
    size_t i = 0;
    argv[i++] = strdup(helper);
    argv[i++] = strdup("--plugin");
    argv[i++] = strdup(path);
    if (config != NULL) {
        argv[i++] = strdup("--config");
        argv[i++] = strdup(config);
    }
    argv[i++] = strdup("--as-mb");
    argv[i++] = u32_text(host->isolated.as_limit_mb);
    argv[i++] = strdup("--cpu-s");
    argv[i++] = u32_text(host->isolated.cpu_limit_s);
    for (size_t d = 0; d < dirs; d++) {
        argv[i++] = strdup("--allow");
        argv[i++] = strdup(host->trust.allowed_dirs[d]);
    }
    for (size_t k = 0; k < i; k++) {
        if (argv[k] == NULL) {
            free_argv(argv);
            return NULL;
        }
    }
    return argv;
}

extern char **environ;

int32_t wsel__spawn_prepare(wsel_spawn *sp, const wsel_host *host, const char *path,
                            const char *config, int memfd, char *err, size_t err_size)
{
    memset(sp, 0, sizeof(*sp));
    int32_t rc = locate_helper(host, &sp->helper, err, err_size);
    if (rc == WSEL_ENOMEM)
        wsel__set_error(err, err_size,
                        "%s: isolated mode: out of memory locating the helper", path);
    if (rc < 0)
        return rc;
    sp->argv = build_argv(host, sp->helper, path, config);
    if (sp->argv == NULL)
        goto out_free_helper;
    sp->envp = environ;

    /* Descriptors: the slot on 3, /dev/null on 0 and 1 (a plugin writing to
     * stdout must not reach the router's output), stderr shared, nothing
     * else (closefrom 4). memfd is >= 10 (see wsel__channel_open), so the
     * dup2 below always clears its close-on-exec flag. */
    if (posix_spawn_file_actions_init(&sp->actions) != 0)
        goto out_free_argv;
    if (posix_spawn_file_actions_adddup2(&sp->actions, memfd, WSEL_ISO_SHM_FD) != 0 ||
        posix_spawn_file_actions_addopen(&sp->actions, 0, "/dev/null", O_RDONLY, 0) !=
            0 ||
        posix_spawn_file_actions_addopen(&sp->actions, 1, "/dev/null", O_WRONLY, 0) !=
            0 ||
        posix_spawn_file_actions_addclosefrom_np(&sp->actions, WSEL_ISO_SHM_FD + 1) != 0)
        goto out_destroy_actions;

    /* Signals: default dispositions and an empty mask, whatever the router
     * set up, so a crashing plugin dies of its own signal. */
    if (posix_spawnattr_init(&sp->attr) != 0)
        goto out_destroy_actions;
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    if (posix_spawnattr_setsigdefault(&sp->attr, &all) != 0 ||
        posix_spawnattr_setsigmask(&sp->attr, &none) != 0 ||
        posix_spawnattr_setflags(&sp->attr,
                                 POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) != 0)
        goto out_destroy_attr;
    return 0;

out_destroy_attr:
    posix_spawnattr_destroy(&sp->attr);
out_destroy_actions:
    posix_spawn_file_actions_destroy(&sp->actions);
out_free_argv:
    free_argv(sp->argv);
out_free_helper:
    free(sp->helper);
    wsel__set_error(err, err_size,
                    "%s: isolated mode: out of memory preparing the helper", path);
    return WSEL_ENOMEM;
}

int32_t wsel__spawn_start(wsel_spawn *sp, pid_t *pid)
{
    int rc = posix_spawn(pid, sp->helper, &sp->actions, &sp->attr, sp->argv, sp->envp);
    if (rc != 0) {
        errno = rc;
        return WSEL_EIO;
    }
    return 0;
}

void wsel__spawn_release(wsel_spawn *sp)
{
    posix_spawnattr_destroy(&sp->attr);
    posix_spawn_file_actions_destroy(&sp->actions);
    free_argv(sp->argv);
    free(sp->helper);
    memset(sp, 0, sizeof(*sp));
}
