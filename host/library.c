// SPDX-License-Identifier: Apache-2.0
/*
 * library.c -- open a plugin shared object: trust-check it, load it through
 * the checked descriptor, find its descriptor and keep a host-sized copy.
 *
 * Libraries are never dlclose'd. Rationale: code of an old generation may
 * still be on a stack (a select that entered the old instance, a log call
 * in flight, a pointer to a parameter name kept by a tool); dlclose is
 * unreliable anyway (glibc keeps objects with unique symbols or TLS, and
 * constructors/destructors of a plugin are not ours to run twice). The cost
 * is one mapping per distinct file loaded during the life of the process.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct wsel_library {
    /* Host-sized copy of the plugin's descriptor; a shorter one is read
     * with a zero tail, a longer one's tail is ignored. */
    wsel_plugin desc;
    /* The path as given (owned). */
    char *path;
    /* dlopen handle, never closed. */
    void *handle;
};

/* Bytes of the descriptor the host must read before trusting struct_size. */
#define DESCRIPTOR_HEAD_SIZE (3u * sizeof(uint32_t))

/*
 * The one piece of process-wide state in libwsel-host: a serial that makes
 * every name handed to dlopen unique.
 *
 * Rationale: glibc's loader first looks an object up by the name it was
 * opened with. We load through "/proc/self/fd/N", and N is reused once the
 * descriptor is closed, so a later load of another file through the same N
 * would silently get the old object back. The loader's list is itself
 * process-wide, so the serial must be too. Each serial spells a different
 * but equivalent path: its bits as "./" (0) and ".//" (1) segments before N.
 */
static _Atomic uint64_t load_serial;

static void unique_fd_path(char *out, size_t size, int fd)
{
    uint64_t serial = atomic_fetch_add_explicit(&load_serial, 1, memory_order_relaxed);
    size_t n = (size_t)snprintf(out, size, "/proc/self/fd/");
    int started = 0;
    for (int bit = 63; bit >= 0; bit--) {
        int one = (int)((serial >> bit) & 1u);
        started |= one;
        if (!started)
            continue;
        n += (size_t)snprintf(out + n, size - n, "%s", one ? ".//" : "./");
    }
    snprintf(out + n, size - n, "%d", fd);
}

/* dlerror text without the loader's "<name>: " prefix (it names our
 * /proc/self/fd path, not the user's). */
static const char *dlerror_text(const char *fd_path)
{
    const char *e = dlerror();
    if (e == NULL)
        return "unknown error";
    size_t n = strlen(fd_path);
    if (strncmp(e, fd_path, n) == 0 && e[n] == ':' && e[n + 1] == ' ')
        return e + n + 2;
    return e;
}

/* Size of the dynamic symbol at `addr` as the ELF symbol table records it,
 * or 0 when unknown. */
static size_t symbol_size(const void *addr)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL)
        return 0;
    return (size_t)sym->st_size;
}

/* Read and check the descriptor head, then copy it host-sized into lib. */
static int32_t copy_descriptor(wsel_library *lib, const void *entry, char *err,
                               size_t err_size)
{
    size_t sym_size = symbol_size(entry);
    if (sym_size != 0 && sym_size < DESCRIPTOR_HEAD_SIZE) {
        wsel__set_error(err, err_size,
                        "%s: descriptor is %zu bytes, ABI 1.0 needs at least %u",
                        lib->path, sym_size, WSEL_PLUGIN_SIZE_1_0);
        return WSEL_EABI;
    }
    uint32_t head[3];
    memcpy(head, entry, sizeof(head));
    uint32_t major = head[0], size = head[2];
    if (major != WSEL_ABI_MAJOR) {
        wsel__set_error(err, err_size, "%s: ABI major %u, host supports %u", lib->path,
                        major, (unsigned)WSEL_ABI_MAJOR);
        return WSEL_EABI;
    }
    if (size < WSEL_PLUGIN_SIZE_1_0) {
        wsel__set_error(err, err_size,
                        "%s: descriptor is %u bytes, ABI 1.0 needs at least %u",
                        lib->path, size, WSEL_PLUGIN_SIZE_1_0);
        return WSEL_EABI;
    }
    if (sym_size != 0 && size > sym_size) {
        wsel__set_error(err, err_size,
                        "%s: descriptor claims %u bytes but its symbol holds %zu",
                        lib->path, size, sym_size);
        return WSEL_EABI;
    }
    memset(&lib->desc, 0, sizeof(lib->desc));
    memcpy(&lib->desc, entry, size < sizeof(lib->desc) ? size : sizeof(lib->desc));
    return 0;
}

int32_t wsel_library_open(const char *path, const wsel_trust_options *opts,
                          wsel_library **out, char *err, size_t err_size)
{
    if (path == NULL || out == NULL) {
        wsel__set_error(err, err_size, "wsel_library_open: NULL %s",
                        path == NULL ? "path" : "out");
        return WSEL_EINVAL;
    }
    int32_t rc = wsel_trust_open(path, opts, err, err_size);
    if (rc < 0)
        return rc;
    int fd = rc;

    wsel_library *lib = calloc(1, sizeof(*lib));
    if (lib == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        rc = WSEL_ENOMEM;
        goto out_close_fd;
    }
    lib->path = strdup(path);
    if (lib->path == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        rc = WSEL_ENOMEM;
        goto out_free_lib;
    }

    char fd_path[256];
    unique_fd_path(fd_path, sizeof(fd_path), fd);
    dlerror();
    lib->handle = dlopen(fd_path, RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == NULL) {
        wsel__set_error(err, err_size, "%s: dlopen failed: %s", path,
                        dlerror_text(fd_path));
        rc = WSEL_ELOAD;
        goto out_free_path;
    }
    /* From here on the object stays mapped even if we refuse it. */
    const void *entry = dlsym(lib->handle, WSEL_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL) {
        wsel__set_error(
            err, err_size,
            "%s: missing symbol " WSEL_PLUGIN_ENTRY_SYMBOL " (not a wsel plugin?)", path);
        rc = WSEL_ENOSYM;
        goto out_free_path;
    }
    rc = copy_descriptor(lib, entry, err, err_size);
    if (rc < 0)
        goto out_free_path;
    rc = wsel__descriptor_check(path, &lib->desc, err, err_size);
    if (rc < 0)
        goto out_free_path;

    close(fd);
    *out = lib;
    return 0;

out_free_path:
    free(lib->path);
out_free_lib:
    free(lib);
out_close_fd:
    close(fd);
    return rc;
}

const wsel_plugin *wsel_library_plugin(const wsel_library *lib)
{
    return &lib->desc;
}

const char *wsel_library_path(const wsel_library *lib)
{
    return lib == NULL ? NULL : lib->path;
}

const wsel_param_def *wsel_library_param(const wsel_library *lib, uint32_t i)
{
    return lib == NULL ? NULL : wsel__descriptor_param(&lib->desc, i);
}

void wsel_library_close(wsel_library *lib)
{
    if (lib == NULL)
        return;
    /* No dlclose: see the top of this file. */
    free(lib->path);
    free(lib);
}
