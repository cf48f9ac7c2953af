// SPDX-License-Identifier: Apache-2.0
/*
 * trust.c -- decide whether a plugin file may be loaded, the way OpenSSH's
 * StrictModes decides whether to read authorized_keys.
 *
 * The path is walked from "/" one component at a time (trust.h): each
 * folder is opened with openat(O_NOFOLLOW) relative to the folder above
 * and checked on that descriptor (fstat), and the file is opened relative
 * to its checked folder, so nothing checked by path can be swapped before
 * use. The file checked is the file the loader later maps through
 * /proc/self/fd/N; elf.c then reads it before dlopen.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "trust.h"

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
static int32_t check_file(const char *path, const char *what, const struct stat *st,
                          char *err, size_t err_size)
{
    if (!S_ISREG(st->st_mode)) {
        wsel__set_error(err, err_size, "%s: refused: %s; a %s must be a regular file",
                        path, file_kind(st->st_mode), what);
        return WSEL_EPERM;
    }
    if (!owner_ok(st->st_uid)) {
        wsel__set_error(err, err_size,
                        "%s: refused: owned by uid %u; %ss must be owned by root or "
                        "uid %u",
                        path, (unsigned)st->st_uid, what, (unsigned)geteuid());
        return WSEL_EPERM;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        wsel__set_error(err, err_size,
                        "%s: refused: %s (mode %04o); %ss must not be writable by "
                        "others",
                        path,
                        (st->st_mode & S_IWOTH) ? "world-writable" : "group-writable",
                        (unsigned)(st->st_mode & 07777), what);
        return WSEL_EPERM;
    }
    return 0;
}

/* "PATH: " before a message, or nothing when the walk has no file. */
static const char *prefix_of(const char *label)
{
    return label != NULL ? label : "";
}

static const char *colon_of(const char *label)
{
    return label != NULL ? ": " : "";
}

/* Rules for one folder on the walk, on its descriptor's stat. A sticky
 * folder writable by others (like /tmp) is accepted: others may add
 * entries there but not rename or remove ours. */
static int32_t check_folder(const char *label, const char *what, const char *dir,
                            const struct stat *st, char *err, size_t err_size)
{
    if (!S_ISDIR(st->st_mode)) {
        wsel__set_error(err, err_size, "%s%srefused: %s is not a folder",
                        prefix_of(label), colon_of(label), dir);
        return WSEL_EPERM;
    }
    if (!owner_ok(st->st_uid)) {
        wsel__set_error(err, err_size,
                        "%s%srefused: folder %s owned by uid %u; folders above a %s "
                        "must be owned by root or uid %u",
                        prefix_of(label), colon_of(label), dir, (unsigned)st->st_uid,
                        what, (unsigned)geteuid());
        return WSEL_EPERM;
    }
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX)) {
        wsel__set_error(err, err_size,
                        "%s%srefused: folder %s is %s without the sticky bit (mode "
                        "%04o); others could replace the %s",
                        prefix_of(label), colon_of(label), dir,
                        (st->st_mode & S_IWOTH) ? "world-writable" : "group-writable",
                        (unsigned)(st->st_mode & 07777), what);
        return WSEL_EPERM;
    }
    return 0;
}

static int32_t open_error(const char *path, int e, char *err, size_t err_size)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        wsel__set_error(err, err_size, "%s: no such file", path);
        return WSEL_ENOENT;
    case ELOOP:
        wsel__set_error(
            err, err_size,
            "%s: refused: is a symbolic link; give the path of the file itself", path);
        return WSEL_EPERM;
    case EACCES:
    case EPERM:
        wsel__set_error(err, err_size, "%s: refused: cannot open: %s", path, strerror(e));
        return WSEL_EPERM;
    default:
        wsel__set_error(err, err_size, "%s: cannot open: %s", path, strerror(e));
        return WSEL_EIO;
    }
}

/* One walk in progress: the folder reached, its resolved path and the
 * folders from "/" down to it (for the allow-list). */
typedef struct walk {
    const char *label; /* the path as given, or NULL (folder walks) */
    const char *what;  /* "plugin", "helper program", ... */
    int fd;            /* the folder reached, O_PATH */
    char resolved[PATH_MAX];
    struct {
        dev_t dev;
        ino_t ino;
    } chain[WSEL_TRUST_MAX_DEPTH];
    uint32_t depth;
    uint32_t links;
} walk;

/* Check the folder just opened as `fd` (named w->resolved) and make it the
 * walk's current folder, its (dev, ino) at chain[slot]. Closes fd on
 * refusal. */
static int32_t enter_folder(walk *w, int fd, uint32_t slot, char *err, size_t err_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        wsel__set_error(err, err_size, "%s%scannot stat folder %s: %s",
                        prefix_of(w->label), colon_of(w->label), w->resolved,
                        strerror(errno));
        close(fd);
        return WSEL_EIO;
    }
    int32_t rc = check_folder(w->label, w->what, w->resolved, &st, err, err_size);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    if (w->fd >= 0)
        close(w->fd);
    w->fd = fd;
    w->chain[slot].dev = st.st_dev;
    w->chain[slot].ino = st.st_ino;
    w->depth = slot + 1;
    return 0;
}

static int32_t walk_root(walk *w, char *err, size_t err_size)
{
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        wsel__set_error(err, err_size, "%s%scannot open /: %s", prefix_of(w->label),
                        colon_of(w->label), strerror(errno));
        return WSEL_EIO;
    }
    strcpy(w->resolved, "/");
    return enter_folder(w, fd, 0, err, err_size);
}

static int32_t too_long(const walk *w, char *err, size_t err_size)
{
    wsel__set_error(err, err_size, "%s%spath too long (limit %u bytes, %u folders)",
                    prefix_of(w->label), colon_of(w->label), (unsigned)PATH_MAX,
                    WSEL_TRUST_MAX_DEPTH);
    return WSEL_EINVAL;
}

/* Step into "..": the real parent of the current folder, checked again. */
static int32_t walk_up(walk *w, char *err, size_t err_size)
{
    if (w->depth <= 1)
        return 0; /* "/.." is "/" */
    int fd = openat(w->fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return open_error(w->label != NULL ? w->label : w->resolved, errno, err,
                          err_size);
    char *slash = strrchr(w->resolved, '/');
    if (slash == w->resolved)
        slash[1] = '\0';
    else
        *slash = '\0';
    return enter_folder(w, fd, w->depth - 2, err, err_size);
}

/* Append "/name" to the resolved path. */
static int32_t push_name(walk *w, const char *name, char *err, size_t err_size)
{
    size_t n = strlen(w->resolved), k = strlen(name);
    size_t sep = strcmp(w->resolved, "/") != 0;
    if (n + sep + k + 1 > sizeof(w->resolved) || w->depth >= WSEL_TRUST_MAX_DEPTH)
        return too_long(w, err, err_size);
    if (sep)
        w->resolved[n++] = '/';
    memcpy(w->resolved + n, name, k + 1);
    return 0;
}

/*
 * Follow the symbolic link `name` in the current (checked) folder: the rest
 * of the walk becomes its target followed by `rest`. In a folder others may
 * write to (sticky), the link must be owned by root or the caller.
 */
static int32_t follow_link(walk *w, const char *name, const struct stat *lst, char *rest,
                           size_t rest_size, const char *after, char *err,
                           size_t err_size)
{
    if (++w->links > WSEL_TRUST_MAX_SYMLINKS) {
        wsel__set_error(err, err_size, "%s%srefused: more than %u symbolic links",
                        prefix_of(w->label), colon_of(w->label), WSEL_TRUST_MAX_SYMLINKS);
        return WSEL_EPERM;
    }
    if (!owner_ok(lst->st_uid)) {
        wsel__set_error(err, err_size,
                        "%s%srefused: symbolic link %s/%s owned by uid %u; links on the "
                        "way to a %s must be owned by root or uid %u",
                        prefix_of(w->label), colon_of(w->label),
                        strcmp(w->resolved, "/") == 0 ? "" : w->resolved, name,
                        (unsigned)lst->st_uid, w->what, (unsigned)geteuid());
        return WSEL_EPERM;
    }
    char target[PATH_MAX];
    ssize_t n = readlinkat(w->fd, name, target, sizeof(target) - 1);
    if (n < 0) {
        wsel__set_error(err, err_size, "%s%scannot read symbolic link %s/%s: %s",
                        prefix_of(w->label), colon_of(w->label), w->resolved, name,
                        strerror(errno));
        return WSEL_EIO;
    }
    target[n] = '\0';
    size_t k = strlen(after);
    if ((size_t)n + 1 + k + 1 > rest_size)
        return too_long(w, err, err_size);
    /* `after` points into `rest`: move it first. */
    memmove(rest + n + 1, after, k + 1);
    memcpy(rest, target, (size_t)n);
    rest[n] = '/';
    if (target[0] == '/')
        return walk_root(w, err, err_size);
    return 0;
}

/* The walk's modes: a file at the end, or folders all the way (a missing
 * component ends a folder walk successfully). */
enum { WALK_FILE, WALK_DIR };

/* The component starting at p into name (NAME_MAX at most); *after is
 * its end, *last says only '/' follows it. */
static int32_t take_name(walk *w, char *p, char *name, char **after, int *last, char *err,
                         size_t err_size)
{
    char *end = strchr(p, '/');
    *after = end != NULL ? end : p + strlen(p);
    size_t n = (size_t)(*after - p);
    if (n > NAME_MAX)
        return too_long(w, err, err_size);
    memcpy(name, p, n);
    name[n] = '\0';
    const char *q = *after;
    while (*q == '/')
        q++;
    *last = *q == '\0';
    return 0;
}

/* The walk's last component, opened relative to its folder into *file_fd
 * with *file_st. */
static int32_t open_last(walk *w, const char *name, int *file_fd, struct stat *file_st,
                         char *err, size_t err_size)
{
    int fd = openat(w->fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return open_error(w->label, errno, err, err_size);
    if (fstat(fd, file_st) != 0) {
        wsel__set_error(err, err_size, "%s: cannot stat: %s", w->label, strerror(errno));
        close(fd);
        return WSEL_EIO;
    }
    int32_t rc = push_name(w, name, err, err_size);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *file_fd = fd;
    return 0;
}

/* What one step of the walk leads to. */
enum { STEP_NEXT, STEP_LINK, STEP_END };

/* One folder component: ".", "..", a link (rewritten into rest, which
 * the walk then reads from its start) or a folder entered. STEP_END when
 * a folder walk meets a missing component. */
static int32_t step(walk *w, const char *name, const char *path, int mode, char *rest,
                    size_t rest_size, const char *after, char *err, size_t err_size)
{
    if (strcmp(name, ".") == 0)
        return STEP_NEXT;
    if (strcmp(name, "..") == 0) {
        int32_t rc = walk_up(w, err, err_size);
        return rc < 0 ? rc : STEP_NEXT;
    }
    struct stat lst;
    if (fstatat(w->fd, name, &lst, AT_SYMLINK_NOFOLLOW) != 0) {
        if (mode == WALK_DIR && errno == ENOENT)
            return STEP_END;
        return open_error(w->label != NULL ? w->label : path, errno, err, err_size);
    }
    if (S_ISLNK(lst.st_mode)) {
        int32_t rc = follow_link(w, name, &lst, rest, rest_size, after, err, err_size);
        return rc < 0 ? rc : STEP_LINK;
    }
    int fd = openat(w->fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (mode == WALK_DIR && errno == ENOENT)
            return STEP_END;
        return open_error(w->label != NULL ? w->label : path, errno, err, err_size);
    }
    int32_t rc = push_name(w, name, err, err_size);
    if (rc == 0)
        rc = enter_folder(w, fd, w->depth, err, err_size);
    else
        close(fd);
    return rc < 0 ? rc : STEP_NEXT;
}

/*
 * Walk `path` (absolute). For WALK_FILE, opens the last component relative
 * to its folder into *file_fd and fills *file_st.
 */
static int32_t walk_path(walk *w, const char *path, int mode, int *file_fd,
                         struct stat *file_st, char *err, size_t err_size)
{
    char rest[2 * PATH_MAX];
    if (strlen(path) >= sizeof(rest) / 2)
        return too_long(w, err, err_size);
    strcpy(rest, path);
    int32_t rc = walk_root(w, err, err_size);
    if (rc < 0)
        return rc;
    char *p = rest;
    for (;;) {
        while (*p == '/')
            p++;
        if (*p == '\0') {
            if (mode == WALK_DIR)
                return 0;
            /* "dir/" or "/": a folder where a file was expected. */
            wsel__set_error(err, err_size,
                            "%s: refused: a directory; a %s must be a "
                            "regular file",
                            w->label, w->what);
            return WSEL_EPERM;
        }
        char name[NAME_MAX + 1];
        char *after;
        int last;
        rc = take_name(w, p, name, &after, &last, err, err_size);
        if (rc < 0)
            return rc;
        if (last && mode == WALK_FILE)
            return open_last(w, name, file_fd, file_st, err, err_size);
        rc = step(w, name, path, mode, rest, sizeof(rest), after, err, err_size);
        if (rc < 0)
            return rc;
        if (rc == STEP_END)
            return 0;
        p = rc == STEP_LINK ? rest : after;
    }
}

/* `path` made absolute against the working folder, into out. */
static int32_t absolute(const char *path, char *out, size_t size, char *err,
                        size_t err_size)
{
    if (path[0] == '/') {
        if (strlen(path) >= size)
            goto out_too_long;
        strcpy(out, path);
        return 0;
    }
    if (getcwd(out, size) == NULL) {
        wsel__set_error(err, err_size, "%s: cannot read the working folder: %s", path,
                        strerror(errno));
        return WSEL_EIO;
    }
    size_t n = strlen(out);
    if (n + 1 + strlen(path) + 1 > size)
        goto out_too_long;
    out[n] = '/';
    strcpy(out + n + 1, path);
    return 0;

out_too_long:
    wsel__set_error(err, err_size, "%s: path too long (limit %u bytes)", path,
                    (unsigned)PATH_MAX);
    return WSEL_EINVAL;
}

/* Is one folder on the walk's chain one of the allowed folders? */
static int in_allowed_dirs(const walk *w, const char *const *allowed)
{
    for (; *allowed != NULL; allowed++) {
        struct stat st;
        if (stat(*allowed, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        for (uint32_t i = 0; i < w->depth; i++) {
            if (w->chain[i].dev == st.st_dev && w->chain[i].ino == st.st_ino)
                return 1;
        }
    }
    return 0;
}

int32_t wsel__trust_walk_file(const char *path, const char *what,
                              const char *const *allowed, wsel_trust_found *out,
                              char *err, size_t err_size)
{
    if (path == NULL || path[0] == '\0') {
        wsel__set_error(err, err_size, "%s path is empty", what);
        return WSEL_EINVAL;
    }
    char abs[PATH_MAX];
    int32_t rc = absolute(path, abs, sizeof(abs), err, err_size);
    if (rc < 0)
        return rc;
    walk *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        return WSEL_ENOMEM;
    }
    w->label = path;
    w->what = what;
    w->fd = -1;
    int fd = -1;
    struct stat st;
    rc = walk_path(w, abs, WALK_FILE, &fd, &st, err, err_size);
    if (rc < 0)
        goto out_free_walk;
    rc = check_file(path, what, &st, err, err_size);
    if (rc < 0)
        goto out_close_file;
    /* The folder holding the file is the walk's current folder. */
    if (allowed != NULL && !in_allowed_dirs(w, allowed)) {
        char *slash = strrchr(w->resolved, '/');
        *slash = '\0';
        wsel__set_error(err, err_size,
                        "%s: refused: folder %s is not in the allowed plugin folders",
                        path, w->resolved[0] ? w->resolved : "/");
        rc = WSEL_EPERM;
        goto out_close_file;
    }
    out->fd = fd;
    snprintf(out->resolved, sizeof(out->resolved), "%s", w->resolved);
    snprintf(out->folder, sizeof(out->folder), "%s", w->resolved);
    char *slash = strrchr(out->folder, '/');
    if (slash == out->folder)
        slash[1] = '\0';
    else
        *slash = '\0';
    close(w->fd);
    free(w);
    return 0;

out_close_file:
    close(fd);
out_free_walk:
    if (w->fd >= 0)
        close(w->fd);
    free(w);
    return rc;
}

int32_t wsel__trust_check_dir(const char *dir, char *err, size_t err_size)
{
    walk *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        wsel__set_error(err, err_size, "out of memory");
        return WSEL_ENOMEM;
    }
    w->what = "library";
    w->fd = -1;
    int32_t rc = walk_path(w, dir, WALK_DIR, NULL, NULL, err, err_size);
    if (w->fd >= 0)
        close(w->fd);
    free(w);
    return rc;
}

int32_t wsel_trust_open(const char *path, const wsel_trust_options *opts, char *err,
                        size_t err_size)
{
    const char *const *allowed = NULL;
    /* struct_size 0 (a zeroed struct) is read as the 1.0 layout: silently
     * ignoring an allow-list would be the unsafe reading. */
    if (opts != NULL && (opts->struct_size == 0 ||
                         opts->struct_size >=
                             offsetof(wsel_trust_options, allowed_dirs) + sizeof(void *)))
        allowed = opts->allowed_dirs;

    wsel_trust_found *found = malloc(sizeof(*found));
    if (found == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path != NULL ? path : "");
        return WSEL_ENOMEM;
    }
    int32_t rc = wsel__trust_walk_file(path, "plugin", allowed, found, err, err_size);
    if (rc < 0)
        goto out_free_found;
    rc = wsel__elf_check(found->fd, path, found->folder, err, err_size);
    if (rc < 0) {
        close(found->fd);
        goto out_free_found;
    }
    rc = found->fd;

out_free_found:
    free(found);
    return rc;
}
