// SPDX-License-Identifier: Apache-2.0
/*
 * trust.h -- the trust walk (trust.c) and the ELF checks (elf.c) that
 * decide whether a file may be loaded or executed. Private to libwsel-host.
 *
 * Every path is walked component by component from "/" with
 * openat(O_NOFOLLOW); each folder is checked on its open descriptor before
 * the next component is opened relative to it, and the file itself is
 * opened relative to its folder's descriptor. A symbolic link is followed
 * only when the folder holding it passed the rules (so nobody but its
 * owner or root can have placed it) and, in a sticky folder, when the link
 * is owned by root or the caller.
 */
#ifndef WSEL_HOST_TRUST_H
#define WSEL_HOST_TRUST_H

#include <stddef.h>
#include <stdint.h>

#include "wsel_host.h"

/* Most components and symbolic links one path may walk through. */
#define WSEL_TRUST_MAX_DEPTH    256u
#define WSEL_TRUST_MAX_SYMLINKS 40u

/* What a walk found: the open file (or folder) and its resolved path. */
typedef struct wsel_trust_found {
    int fd;              /* the file, O_RDONLY | O_CLOEXEC (caller closes) */
    char resolved[4096]; /* the file's path, symbolic links resolved */
    char folder[4096];   /* its folder, likewise */
} wsel_trust_found;

/*
 * Walk `path` and open the file at its end: every folder on the way must
 * pass the folder rules, the file the file rules; when `allowed` is not
 * NULL, one folder on the way must be one of them. `what` names the file
 * in messages ("plugin", "helper"). Returns 0 with *out filled, or a
 * negative WSEL_E* with "PATH: refused: ..." in err.
 */
int32_t wsel__trust_walk_file(const char *path, const char *what,
                              const char *const *allowed, wsel_trust_found *out,
                              char *err, size_t err_size);

/*
 * Check the folder `dir` (absolute) and every folder above it by the folder
 * rules. A component that does not exist ends the walk successfully: the
 * folder it would be created in passed. Returns 0 or WSEL_EPERM/WSEL_EIO
 * with "refused: folder F ..." in err (no path prefix).
 */
int32_t wsel__trust_check_dir(const char *dir, char *err, size_t err_size);

/*
 * The ELF checks on an open plugin file, before dlopen: an ELF shared
 * object of this host's class, byte order and machine, whose program
 * headers and segments lie inside the file, and whose DT_RPATH/DT_RUNPATH
 * folders and path-named DT_NEEDED entries pass the trust rules ($ORIGIN
 * read as `origin`, the plugin's resolved folder). Returns 0, WSEL_ELOAD
 * (malformed, truncated, wrong architecture) or WSEL_EPERM (untrusted
 * dependency) with "PATH: ..." in err.
 */
int32_t wsel__elf_check(int fd, const char *path, const char *origin, char *err,
                        size_t err_size);

#endif
