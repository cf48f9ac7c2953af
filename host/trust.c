/*
 * trust.c -- decide whether a plugin file may be loaded, the way OpenSSH's
 * StrictModes decides whether to read authorized_keys.
 *
 * The file is opened once, with O_NOFOLLOW, and every check on the file
 * itself runs on that descriptor (fstat), so the file checked is the file
 * the loader later maps through /proc/self/fd/N. The folders above it are
 * checked by path, after resolving symlinks (realpath), from the file's
 * folder up to "/".
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static int owner_ok(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a fifo";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "not a regular file";
}

/* Rules for the file itself, on the open descriptor's stat. */
static int32_t check_file(const char *path, const struct stat *st, char *err,
                          size_t err_size)
{
    if (!S_ISREG(st->st_mode)) {
        wsel_set_error(err, err_size, "%s: refused: %s; a plugin must be a regular file",
                       path, file_kind(st->st_mode));
        return WSEL_EPERM;
    }
    if (!owner_ok(st->st_uid)) {
        wsel_set_error(err, err_size,
                       "%s: refused: owned by uid %u; plugins must be owned by root or "
                       "uid %u",
                       path, (unsigned)st->st_uid, (unsigned)geteuid());
        return WSEL_EPERM;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        wsel_set_error(err, err_size,
                       "%s: refused: %s (mode %04o); plugins must not be writable by "
                       "others",
                       path,
                       (st->st_mode & S_IWOTH) ? "world-writable" : "group-writable",
                       (unsigned)(st->st_mode & 07777));
        return WSEL_EPERM;
    }
    return 0;
}

/* Rules for one folder above the file. A sticky folder writable by others
 * (like /tmp) is accepted: others may add files there but not rename or
 * remove ours. */
static int32_t check_folder(const char *path, const char *dir, char *err, size_t err_size)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        wsel_set_error(err, err_size, "%s: cannot stat folder %s: %s", path, dir,
                       strerror(errno));
        return WSEL_EIO;
    }
    if (!S_ISDIR(st.st_mode)) {
        wsel_set_error(err, err_size, "%s: refused: %s is not a folder", path, dir);
        return WSEL_EPERM;
    }
    if (!owner_ok(st.st_uid)) {
        wsel_set_error(err, err_size,
                       "%s: refused: folder %s owned by uid %u; folders above a plugin "
                       "must be owned by root or uid %u",
                       path, dir, (unsigned)st.st_uid, (unsigned)geteuid());
        return WSEL_EPERM;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        wsel_set_error(err, err_size,
                       "%s: refused: folder %s is %s without the sticky bit (mode "
                       "%04o); others could replace the plugin",
                       path, dir,
                       (st.st_mode & S_IWOTH) ? "world-writable" : "group-writable",
                       (unsigned)(st.st_mode & 07777));
        return WSEL_EPERM;
    }
    return 0;
}

/* Walk `dir` (absolute, resolved, modified in place) and each parent up to
 * "/". */
static int32_t check_folders(const char *path, char *dir, char *err, size_t err_size)
{
    for (;;) {
        int32_t rc = check_folder(path, dir, err, err_size);
        if (rc < 0)
            return rc;
        if (strcmp(dir, "/") == 0)
            return 0;
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
}

/* Is resolved folder `dir` equal to or inside one of the allowed folders? */
static int in_allowed_dirs(const char *dir, const char *const *allowed)
{
    for (; *allowed != NULL; allowed++) {
        char real[PATH_MAX];
        if (realpath(*allowed, real) == NULL)
            continue;
        size_t n = strlen(real);
        if (strcmp(real, "/") == 0)
            return 1;
        if (strncmp(dir, real, n) == 0 && (dir[n] == '\0' || dir[n] == '/'))
            return 1;
    }
    return 0;
}

/* The resolved folder holding `path` into `out` (PATH_MAX bytes). */
static int32_t resolve_folder(const char *path, char *out, char *err, size_t err_size)
{
    char folder[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        strcpy(folder, ".");
    } else if (slash == path) {
        strcpy(folder, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= sizeof(folder)) {
            wsel_set_error(err, err_size, "%s: path too long", path);
            return WSEL_EINVAL;
        }
        memcpy(folder, path, n);
        folder[n] = '\0';
    }
    if (realpath(folder, out) == NULL) {
        wsel_set_error(err, err_size, "%s: cannot resolve folder %s: %s", path, folder,
                       strerror(errno));
        return WSEL_EIO;
    }
    return 0;
}

static int32_t open_error(const char *path, int e, char *err, size_t err_size)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        wsel_set_error(err, err_size, "%s: no such file", path);
        return WSEL_ENOENT;
    case ELOOP:
        wsel_set_error(
            err, err_size,
            "%s: refused: is a symbolic link; give the path of the file itself", path);
        return WSEL_EPERM;
    case EACCES:
    case EPERM:
        wsel_set_error(err, err_size, "%s: refused: cannot open: %s", path, strerror(e));
        return WSEL_EPERM;
    default:
        wsel_set_error(err, err_size, "%s: cannot open: %s", path, strerror(e));
        return WSEL_EIO;
    }
}

int32_t wsel_trust_open(const char *path, const wsel_trust_options *opts, char *err,
                        size_t err_size)
{
    if (path == NULL || path[0] == '\0') {
        wsel_set_error(err, err_size, "plugin path is empty");
        return WSEL_EINVAL;
    }
    const char *const *allowed = NULL;
    /* struct_size 0 (a zeroed struct) is read as the 1.0 layout: silently
     * ignoring an allow-list would be the unsafe reading. */
    if (opts != NULL && (opts->struct_size == 0 ||
                         opts->struct_size >=
                             offsetof(wsel_trust_options, allowed_dirs) + sizeof(void *)))
        allowed = opts->allowed_dirs;

    /* O_NONBLOCK: opening a fifo must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return open_error(path, errno, err, err_size);

    int32_t rc;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        wsel_set_error(err, err_size, "%s: cannot stat: %s", path, strerror(errno));
        rc = WSEL_EIO;
        goto out_close_fd;
    }
    rc = check_file(path, &st, err, err_size);
    if (rc < 0)
        goto out_close_fd;

    char dir[PATH_MAX];
    rc = resolve_folder(path, dir, err, err_size);
    if (rc < 0)
        goto out_close_fd;
    if (allowed != NULL && !in_allowed_dirs(dir, allowed)) {
        wsel_set_error(err, err_size,
                       "%s: refused: folder %s is not in the allowed plugin folders",
                       path, dir);
        rc = WSEL_EPERM;
        goto out_close_fd;
    }
    rc = check_folders(path, dir, err, err_size);
    if (rc < 0)
        goto out_close_fd;
    return fd;

out_close_fd:
    close(fd);
    return rc;
}
