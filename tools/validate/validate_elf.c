// SPDX-License-Identifier: Apache-2.0
/*
 * validate_elf.c -- count the dynamic symbols a plugin exports, reading the
 * ELF64 headers ourselves (<elf.h>), so `wsel validate` needs no binutils.
 *
 * Everything read from the file is bounds-checked against its size: a
 * malformed object yields WSEL_EABI with a message, never a crash.
 */
#include "validate.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Does [off, off + len) lie inside a file of `size` bytes? */
static int in_file(uint64_t off, uint64_t len, size_t size)
{
    return off <= size && len <= size - off;
}

/* Is this .dynsym entry something the object offers to the outside? */
static int is_export(const Elf64_Sym *sym)
{
    unsigned bind = ELF64_ST_BIND(sym->st_info);
    unsigned type = ELF64_ST_TYPE(sym->st_info);
    if (sym->st_shndx == SHN_UNDEF)
        return 0;
    if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
        return 0;
    if (type == STT_SECTION || type == STT_FILE)
        return 0;
    if (ELF64_ST_VISIBILITY(sym->st_other) == STV_HIDDEN ||
        ELF64_ST_VISIBILITY(sym->st_other) == STV_INTERNAL)
        return 0;
    /* A named version node (VERS_1.0 { ... }) appears as an absolute,
     * zero-sized object at address 0: a marker, not an export. */
    if (sym->st_shndx == SHN_ABS && sym->st_value == 0 && sym->st_size == 0)
        return 0;
    return 1;
}

/* AddressSanitizer emits one ODR indicator per exported global
 * (__odr_asan.NAME) in an instrumented build: not part of the interface. */
static int is_sanitizer_marker(const char *name)
{
    return strncmp(name, "__odr_asan", 10) == 0;
}

static void append_name(char *names, size_t names_size, const char *name)
{
    size_t used = strlen(names);
    if (used + 1 >= names_size)
        return;
    snprintf(names + used, names_size - used, "%s%s", used ? ", " : "", name);
}

/* Walk the section headers of the mapped image. */
static int32_t count_in_image(const unsigned char *img, size_t size, const char *path,
                              uint32_t *out_count, char *names, size_t names_size,
                              char *err, size_t err_size)
{
    if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) != 0) {
        snprintf(err, err_size, "%s: not an ELF file", path);
        return WSEL_EABI;
    }
    if (img[EI_CLASS] != ELFCLASS64) {
        snprintf(err, err_size, "%s: not a 64-bit ELF object (class %u)", path,
                 img[EI_CLASS]);
        return WSEL_EABI;
    }
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof(eh));
    if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !in_file(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), size)) {
        snprintf(err, err_size, "%s: section header table out of bounds", path);
        return WSEL_EABI;
    }

    uint32_t count = 0;
    int found = 0;
    char found_names[512] = "";
    for (uint32_t s = 0; s < eh.e_shnum; s++) {
        Elf64_Shdr sh;
        memcpy(&sh, img + eh.e_shoff + (uint64_t)s * sizeof(sh), sizeof(sh));
        if (sh.sh_type != SHT_DYNSYM)
            continue;
        found = 1;
        if (sh.sh_entsize != sizeof(Elf64_Sym) ||
            !in_file(sh.sh_offset, sh.sh_size, size) || sh.sh_link >= eh.e_shnum) {
            snprintf(err, err_size, "%s: .dynsym (section %u) out of bounds", path, s);
            return WSEL_EABI;
        }
        Elf64_Shdr strtab;
        memcpy(&strtab, img + eh.e_shoff + (uint64_t)sh.sh_link * sizeof(strtab),
               sizeof(strtab));
        if (!in_file(strtab.sh_offset, strtab.sh_size, size) || strtab.sh_size == 0 ||
            img[strtab.sh_offset + strtab.sh_size - 1] != '\0') {
            snprintf(err, err_size, "%s: .dynstr (section %u) malformed", path,
                     sh.sh_link);
            return WSEL_EABI;
        }
        const char *str = (const char *)img + strtab.sh_offset;
        uint64_t n = sh.sh_size / sizeof(Elf64_Sym);
        for (uint64_t i = 1; i < n; i++) {
            Elf64_Sym sym;
            memcpy(&sym, img + sh.sh_offset + i * sizeof(sym), sizeof(sym));
            if (!is_export(&sym))
                continue;
            if (sym.st_name >= strtab.sh_size) {
                snprintf(err, err_size, "%s: .dynsym entry %llu has a bad name offset",
                         path, (unsigned long long)i);
                return WSEL_EABI;
            }
            if (is_sanitizer_marker(str + sym.st_name))
                continue;
            count++;
            append_name(found_names, sizeof(found_names), str + sym.st_name);
        }
    }
    if (!found) {
        snprintf(err, err_size, "%s: no .dynsym section (not a shared object?)", path);
        return WSEL_EABI;
    }
    *out_count = count;
    snprintf(names, names_size, "%s", found_names);
    return 0;
}

int32_t velf_count_exports(const char *path, uint32_t *out_count, char *names,
                           size_t names_size, char *err, size_t err_size)
{
    int32_t rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_size, "%s: %s", path, strerror(errno));
        return errno == ENOENT ? WSEL_ENOENT : WSEL_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        snprintf(err, err_size, "%s: empty or unreadable file", path);
        rc = WSEL_EIO;
        goto out_close_fd;
    }
    size_t size = (size_t)st.st_size;
    void *img = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (img == MAP_FAILED) {
        snprintf(err, err_size, "%s: mmap: %s", path, strerror(errno));
        rc = WSEL_EIO;
        goto out_close_fd;
    }
    rc = count_in_image(img, size, path, out_count, names, names_size, err, err_size);
    munmap(img, size);
out_close_fd:
    close(fd);
    return rc;
}
