// SPDX-License-Identifier: Apache-2.0
/*
 * elf.c -- read a plugin's ELF headers from its open descriptor before
 * dlopen: the file must be a shared object for this host's class, byte
 * order and machine, with every program header and loaded segment inside
 * the file (a truncated object makes the loader fault on pages past its
 * end: SIGBUS), and the folders its DT_RPATH/DT_RUNPATH entries name (and
 * any DT_NEEDED given as a path) must pass the trust rules, since the
 * loader would run code found there with the host's rights.
 *
 * Everything is read with pread and bounds-checked against the size
 * fstat reports: a malformed file gives a message, never a fault.
 */
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "trust.h"

#if UINTPTR_MAX == 0xffffffffffffffffu
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Phdr phdr_t;
typedef Elf64_Dyn dyn_t;
#define HOST_CLASS ELFCLASS64
#else
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Phdr phdr_t;
typedef Elf32_Dyn dyn_t;
#define HOST_CLASS ELFCLASS32
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#elif defined(__i386__)
#define HOST_MACHINE EM_386
#elif defined(__arm__)
#define HOST_MACHINE EM_ARM
#elif defined(__riscv)
#define HOST_MACHINE EM_RISCV
#elif defined(__powerpc64__)
#define HOST_MACHINE EM_PPC64
#elif defined(__s390x__)
#define HOST_MACHINE EM_S390
#elif defined(__loongarch__)
#define HOST_MACHINE 258 /* EM_LOONGARCH */
#else
#define HOST_MACHINE 0 /* unknown: the machine is not checked */
#endif

/* Most program headers and dynamic entries read (real objects have ~12
 * and ~40). */
#define MAX_PHDRS   256u
#define MAX_DYNAMIC 4096u

static const char *machine_name(unsigned m)
{
    switch (m) {
    case EM_X86_64:
        return "x86-64";
    case EM_AARCH64:
        return "AArch64";
    case EM_386:
        return "i386";
    case EM_ARM:
        return "ARM";
    case EM_RISCV:
        return "RISC-V";
    case EM_PPC64:
        return "PowerPC64";
    case EM_PPC:
        return "PowerPC";
    case EM_S390:
        return "s390";
    case EM_MIPS:
        return "MIPS";
    case EM_SPARCV9:
        return "SPARC V9";
    case 258:
        return "LoongArch";
    default:
        return "an unknown machine";
    }
}

static int in_file(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

static int32_t check_header(const ehdr_t *eh, uint64_t size, const char *path, char *err,
                            size_t err_size)
{
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
        wsel__set_error(err, err_size, "%s: not an ELF file (no \\177ELF magic)", path);
        return WSEL_ELOAD;
    }
    if (eh->e_ident[EI_CLASS] != HOST_CLASS) {
        wsel__set_error(err, err_size, "%s: built for %s-bit code; this host is %s-bit",
                        path, eh->e_ident[EI_CLASS] == ELFCLASS32 ? "32" : "64",
                        HOST_CLASS == ELFCLASS32 ? "32" : "64");
        return WSEL_ELOAD;
    }
    if (eh->e_ident[EI_DATA] != HOST_DATA) {
        wsel__set_error(
            err, err_size, "%s: built for %s byte order; this host is %s", path,
            eh->e_ident[EI_DATA] == ELFDATA2MSB ? "big-endian" : "little-endian",
            HOST_DATA == ELFDATA2MSB ? "big-endian" : "little-endian");
        return WSEL_ELOAD;
    }
    if (HOST_MACHINE != 0 && eh->e_machine != HOST_MACHINE) {
        wsel__set_error(
            err, err_size,
            "%s: built for %s (ELF machine %u); this host runs %s (machine %u)", path,
            machine_name(eh->e_machine), (unsigned)eh->e_machine,
            machine_name(HOST_MACHINE), (unsigned)HOST_MACHINE);
        return WSEL_ELOAD;
    }
    if (eh->e_type != ET_DYN) {
        wsel__set_error(err, err_size,
                        "%s: not a shared object (ELF type %u); build it with -shared",
                        path, (unsigned)eh->e_type);
        return WSEL_ELOAD;
    }
    if (eh->e_phentsize != sizeof(phdr_t) || eh->e_phnum == 0 ||
        eh->e_phnum > MAX_PHDRS ||
        !in_file(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(phdr_t), size)) {
        wsel__set_error(
            err, err_size,
            "%s: truncated or malformed: %u program headers at offset %llu do "
            "not fit a %llu-byte file (limit %u headers)",
            path, (unsigned)eh->e_phnum, (unsigned long long)eh->e_phoff,
            (unsigned long long)size, MAX_PHDRS);
        return WSEL_ELOAD;
    }
    return 0;
}

/* Every segment the loader maps or reads must lie inside the file. */
static int32_t check_segments(const phdr_t *ph, unsigned n, uint64_t size,
                              const char *path, char *err, size_t err_size)
{
    unsigned loads = 0;
    for (unsigned i = 0; i < n; i++) {
        if (ph[i].p_type != PT_LOAD && ph[i].p_type != PT_DYNAMIC &&
            ph[i].p_type != PT_INTERP && ph[i].p_type != PT_NOTE)
            continue;
        loads += ph[i].p_type == PT_LOAD;
        if (!in_file(ph[i].p_offset, ph[i].p_filesz, size) ||
            (ph[i].p_type == PT_LOAD && ph[i].p_filesz > ph[i].p_memsz)) {
            wsel__set_error(
                err, err_size,
                "%s: truncated: segment %u needs bytes %llu to %llu, the file "
                "has %llu",
                path, i, (unsigned long long)ph[i].p_offset,
                (unsigned long long)ph[i].p_offset + (unsigned long long)ph[i].p_filesz,
                (unsigned long long)size);
            return WSEL_ELOAD;
        }
    }
    if (loads == 0) {
        wsel__set_error(err, err_size, "%s: malformed: no loadable segment", path);
        return WSEL_ELOAD;
    }
    return 0;
}

/* File offset of virtual address `addr`, or UINT64_MAX. */
static uint64_t file_offset(const phdr_t *ph, unsigned n, uint64_t addr)
{
    for (unsigned i = 0; i < n; i++) {
        if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr &&
            addr - ph[i].p_vaddr < ph[i].p_filesz)
            return ph[i].p_offset + (addr - ph[i].p_vaddr);
    }
    return UINT64_MAX;
}

/* Check one RPATH/RUNPATH entry (`len` bytes at `entry`). */
static int32_t check_search_entry(const char *path, const char *tag, const char *entry,
                                  size_t len, const char *origin, char *err,
                                  size_t err_size)
{
    char dir[PATH_MAX], shown[PATH_MAX];
    snprintf(shown, sizeof(shown), "%.*s", (int)(len < 1024 ? len : 1024), entry);
    if (len == 0) {
        wsel__set_error(err, err_size,
                        "%s: refused: %s has an empty entry (the working folder); "
                        "libraries a plugin needs must come from trusted folders",
                        path, tag);
        return WSEL_EPERM;
    }
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        const char *tok = NULL;
        size_t skip = 0;
        if (len - i >= 7 && memcmp(entry + i, "$ORIGIN", 7) == 0)
            tok = origin, skip = 7;
        else if (len - i >= 9 && memcmp(entry + i, "${ORIGIN}", 9) == 0)
            tok = origin, skip = 9;
        else if (entry[i] == '$') {
            wsel__set_error(err, err_size,
                            "%s: refused: %s entry '%s' uses a substitution other than "
                            "$ORIGIN, which the trust rules cannot check",
                            path, tag, shown);
            return WSEL_EPERM;
        }
        if (tok != NULL) {
            size_t t = strlen(tok);
            if (k + t >= sizeof(dir))
                goto out_too_long;
            memcpy(dir + k, tok, t);
            k += t;
            i += skip;
        } else {
            if (k + 1 >= sizeof(dir))
                goto out_too_long;
            dir[k++] = entry[i++];
        }
    }
    dir[k] = '\0';
    if (dir[0] != '/') {
        wsel__set_error(err, err_size,
                        "%s: refused: %s entry '%s' is relative to the working folder; "
                        "libraries a plugin needs must come from trusted folders",
                        path, tag, shown);
        return WSEL_EPERM;
    }
    char why[1024];
    int32_t rc = wsel__trust_check_dir(dir, why, sizeof(why));
    if (rc < 0) {
        wsel__set_error(err, err_size, "%s: %s entry '%s': %s", path, tag, shown, why);
        return rc;
    }
    return 0;

out_too_long:
    wsel__set_error(err, err_size, "%s: refused: %s entry '%s' is too long", path, tag,
                    shown);
    return WSEL_EPERM;
}

static int32_t check_search_path(const char *path, const char *tag, const char *list,
                                 const char *origin, char *err, size_t err_size)
{
    for (const char *p = list;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon != NULL ? (size_t)(colon - p) : strlen(p);
        int32_t rc = check_search_entry(path, tag, p, len, origin, err, err_size);
        if (rc < 0)
            return rc;
        if (colon == NULL)
            return 0;
        p = colon + 1;
    }
}

/* A DT_NEEDED given as a path is opened by the loader as is. */
static int32_t check_needed(const char *path, const char *needed, char *err,
                            size_t err_size)
{
    if (strchr(needed, '/') == NULL)
        return 0; /* a name: found through the checked search path or the system's */
    if (needed[0] != '/') {
        wsel__set_error(err, err_size,
                        "%s: refused: DT_NEEDED '%s' is relative to the working folder; "
                        "libraries a plugin needs must come from trusted folders",
                        path, needed);
        return WSEL_EPERM;
    }
    wsel_trust_found found;
    char why[1024];
    int32_t rc = wsel__trust_walk_file(needed, "library", NULL, &found, why, sizeof(why));
    if (rc == WSEL_ENOENT)
        return 0; /* the loader will fail on it by itself */
    if (rc < 0) {
        wsel__set_error(err, err_size, "%s: DT_NEEDED %s", path, why);
        return rc;
    }
    close(found.fd);
    return 0;
}

/* The dynamic string table dyn[0..count) names (DT_STRTAB, DT_STRSZ),
 * read NUL-terminated into *out (str_size bytes and the NUL; free it).
 * 0 with *out NULL when there is none. */
static int32_t read_strtab(int fd, const phdr_t *ph, unsigned n, uint64_t size,
                           const dyn_t *dyn, uint64_t count, const char *path, char **out,
                           uint64_t *out_size, char *err, size_t err_size)
{
    *out = NULL;
    uint64_t str_addr = UINT64_MAX, str_size = 0;
    for (uint64_t i = 0; i < count && dyn[i].d_tag != DT_NULL; i++) {
        if (dyn[i].d_tag == DT_STRTAB)
            str_addr = dyn[i].d_un.d_ptr;
        else if (dyn[i].d_tag == DT_STRSZ)
            str_size = dyn[i].d_un.d_val;
    }
    if (str_addr == UINT64_MAX)
        return 0;
    uint64_t str_off = file_offset(ph, n, str_addr);
    if (str_off == UINT64_MAX || str_size == 0 || !in_file(str_off, str_size, size)) {
        wsel__set_error(err, err_size,
                        "%s: truncated or malformed: the dynamic string table lies "
                        "outside the file",
                        path);
        return WSEL_ELOAD;
    }
    char *strtab = malloc(str_size + 1);
    if (strtab == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        return WSEL_ENOMEM;
    }
    if (read_at(fd, strtab, str_size, str_off) != 0) {
        wsel__set_error(err, err_size, "%s: cannot read the dynamic string table", path);
        free(strtab);
        return WSEL_ELOAD;
    }
    strtab[str_size] = '\0';
    *out = strtab;
    *out_size = str_size;
    return 0;
}

/* Check each RPATH, RUNPATH and DT_NEEDED entry of dyn[0..count); an
 * entry pointing outside the string table is malformed. */
static int32_t check_entries(const dyn_t *dyn, uint64_t count, const char *strtab,
                             uint64_t str_size, const char *path, const char *origin,
                             char *err, size_t err_size)
{
    for (uint64_t i = 0; i < count && dyn[i].d_tag != DT_NULL; i++) {
        const char *tag = dyn[i].d_tag == DT_RPATH     ? "RPATH"
                          : dyn[i].d_tag == DT_RUNPATH ? "RUNPATH"
                          : dyn[i].d_tag == DT_NEEDED  ? "DT_NEEDED"
                                                       : NULL;
        if (tag == NULL)
            continue;
        if (dyn[i].d_un.d_val >= str_size) {
            wsel__set_error(err, err_size,
                            "%s: malformed: %s points outside the string "
                            "table",
                            path, tag);
            return WSEL_ELOAD;
        }
        const char *s = strtab + dyn[i].d_un.d_val;
        int32_t rc = dyn[i].d_tag == DT_NEEDED
                 ? check_needed(path, s, err, err_size)
                 : check_search_path(path, tag, s, origin, err, err_size);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int32_t check_dynamic(int fd, const phdr_t *ph, unsigned n, uint64_t size,
                             const char *path, const char *origin, char *err,
                             size_t err_size)
{
    const phdr_t *dynamic = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (ph[i].p_type == PT_DYNAMIC)
            dynamic = &ph[i];
    }
    if (dynamic == NULL)
        return 0; /* nothing to resolve */
    uint64_t count = dynamic->p_filesz / sizeof(dyn_t);
    if (count > MAX_DYNAMIC) {
        wsel__set_error(err, err_size, "%s: malformed: %llu dynamic entries (limit %u)",
                        path, (unsigned long long)count, MAX_DYNAMIC);
        return WSEL_ELOAD;
    }
    int32_t rc = WSEL_ELOAD;
    char *strtab = NULL;
    uint64_t str_size = 0;
    dyn_t *dyn = calloc(count + 1, sizeof(*dyn));
    if (dyn == NULL) {
        wsel__set_error(err, err_size, "%s: out of memory", path);
        return WSEL_ENOMEM;
    }
    if (read_at(fd, dyn, count * sizeof(*dyn), dynamic->p_offset) != 0) {
        wsel__set_error(err, err_size, "%s: cannot read the dynamic section", path);
        goto out_free_dyn;
    }
    rc =
        read_strtab(fd, ph, n, size, dyn, count, path, &strtab, &str_size, err, err_size);
    if (rc == 0 && strtab != NULL)
        rc = check_entries(dyn, count, strtab, str_size, path, origin, err, err_size);
    free(strtab);
out_free_dyn:
    free(dyn);
    return rc;
}

int32_t wsel__elf_check(int fd, const char *path, const char *origin, char *err,
                        size_t err_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        wsel__set_error(err, err_size, "%s: cannot stat: %s", path, strerror(errno));
        return WSEL_EIO;
    }
    uint64_t size = (uint64_t)st.st_size;
    ehdr_t eh;
    if (size < sizeof(eh) || read_at(fd, &eh, sizeof(eh), 0) != 0) {
        if (size >= SELFMAG && read_at(fd, &eh, SELFMAG, 0) == 0 &&
            memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0)
            wsel__set_error(err, err_size,
                            "%s: truncated: %llu bytes, shorter than an ELF header", path,
                            (unsigned long long)size);
        else
            wsel__set_error(err, err_size, "%s: not an ELF file (no \\177ELF magic)",
                            path);
        return WSEL_ELOAD;
    }
    int32_t rc = check_header(&eh, size, path, err, err_size);
    if (rc < 0)
        return rc;
    phdr_t ph[MAX_PHDRS];
    if (read_at(fd, ph, (size_t)eh.e_phnum * sizeof(phdr_t), eh.e_phoff) != 0) {
        wsel__set_error(err, err_size, "%s: cannot read the program headers", path);
        return WSEL_ELOAD;
    }
    rc = check_segments(ph, eh.e_phnum, size, path, err, err_size);
    if (rc < 0)
        return rc;
    return check_dynamic(fd, ph, eh.e_phnum, size, path, origin, err, err_size);
}
