// SPDX-License-Identifier: Apache-2.0
/*
 * test_library.c -- wsel_library_open: one test per refusal, each loading
 * the fixture with that one defect and reading the message; plus the
 * descriptors it must accept (longer, from a newer minor).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <elf.h>

#include "testutil.h"

typedef struct fixture {
    char *dir;
    char err[1024];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = tu_temp_dir();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tu_remove_tree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Install fixture `name` and expect wsel_library_open to refuse it with
 * `code` and the message "<path>: <tail>". */
static void expect_refusal(fixture *f, const char *name, int32_t code, const char *tail)
{
    char as[128];
    snprintf(as, sizeof(as), "%s.so", name);
    char *path = tu_install_fixture(f->dir, name, as);
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)), code);
    assert_null(lib);
    char want[2048];
    snprintf(want, sizeof(want), "%s: %s", path, tail);
    if (strstr(f->err, want) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", f->err, want);
    free(path);
}

static void test_refuses_missing_file(void **state)
{
    fixture *f = *state;
    char path[512];
    snprintf(path, sizeof(path), "%s/absent.so", f->dir);
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)),
                     WSEL_ENOENT);
    char want[600];
    snprintf(want, sizeof(want), "%s: no such file", path);
    assert_string_equal(f->err, want);
}

static void test_refuses_untrusted_file_before_running_its_code(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_good", "p.so");
    assert_int_equal(chmod(path, 0666), 0);
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)),
                     WSEL_EPERM);
    assert_non_null(strstr(f->err, "refused: world-writable (mode 0666)"));
    free(path);
}

static void test_refuses_file_that_is_not_a_shared_object(void **state)
{
    fixture *f = *state;
    char path[512];
    snprintf(path, sizeof(path), "%s/text.so", f->dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
    close(fd);
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)),
                     WSEL_ELOAD);
    char want[600];
    /* Read before dlopen, so the reason is ours, not the loader's. */
    snprintf(want, sizeof(want), "%s: not an ELF file", path);
    assert_memory_equal(f->err, want, strlen(want));
    assert_null(strstr(f->err, "/proc/self/fd"));
}

/* Issue 13 item 12: a truncated object must be refused before dlopen (the
 * loader faults on pages past the end of the file: SIGBUS). Run in a child
 * so a crash fails this test only. */
typedef struct truncated {
    const char *path;
    char err[1024];
} truncated;

static void open_truncated(void *arg)
{
    truncated *t = arg;
    wsel_library *lib = NULL;
    int32_t rc = wsel_library_open(t->path, NULL, &lib, t->err, sizeof(t->err));
    printf("rc %d: %s\n", rc, t->err);
    exit(rc == WSEL_ELOAD ? 0 : 1);
}

static void expect_truncated_refused(fixture *f, off_t size, const char *needle)
{
    char *path = tu_install_fixture(f->dir, "fx_good", "t.so");
    assert_int_equal(truncate(path, size), 0);
    truncated t = {.path = path};
    char out[2048];
    int status = tu_run_in_child(open_truncated, &t, out, sizeof(out));
    free(path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("truncated to %lld bytes: status 0x%x, output: %s", (long long)size,
                 status, out);
    if (strstr(out, needle) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", out, needle);
}

static void test_refuses_truncated_object(void **state)
{
    fixture *f = *state;
    expect_truncated_refused(f, 4096, "truncated: segment ");
    expect_truncated_refused(f, 200, "truncated or malformed: ");
    expect_truncated_refused(f, 40, "truncated: 40 bytes, shorter than an ELF header");
}

/* Issue 13 item 13: another architecture's object is refused naming it. */
static void test_names_the_architecture_of_a_foreign_object(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_good", "arm.so");
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    const unsigned char aarch64[2] = {183, 0}; /* e_machine, little-endian */
    assert_int_equal(pwrite(fd, aarch64, 2, 18), 2);
    close(fd);
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)),
                     WSEL_ELOAD);
    char want[1024];
    snprintf(want, sizeof(want),
             "%s: built for AArch64 (ELF machine 183); this host runs", path);
    if (strstr(f->err, want) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", f->err, want);
    free(path);
}

/* Open `path` in a child (a malformed object must never reach dlopen)
 * and expect WSEL_ELOAD with `needle` in the message. */
static void expect_refused_in_child(const char *path, const char *needle)
{
    truncated t = {.path = path};
    char out[2048];
    int status = tu_run_in_child(open_truncated, &t, out, sizeof(out));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s: status 0x%x, output: %s", path, status, out);
    if (strstr(out, needle) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", out, needle);
}

/* A DT_NEEDED entry past the string table is refused even when an entry
 * before it passed its check. */
static void test_refuses_needed_entry_outside_string_table(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_good", "needed.so");
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    Elf64_Ehdr eh;
    assert_int_equal(pread(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
    Elf64_Phdr ph;
    off_t dyn_off = -1;
    for (unsigned i = 0; i < eh.e_phnum && dyn_off < 0; i++) {
        off_t at = (off_t)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize);
        assert_int_equal(pread(fd, &ph, sizeof(ph), at), (ssize_t)sizeof(ph));
        if (ph.p_type == PT_DYNAMIC)
            dyn_off = (off_t)ph.p_offset;
    }
    assert_true(dyn_off >= 0);
    Elf64_Dyn d;
    unsigned i = 0, needed = 0;
    for (;; i++) { /* the first entry after a DT_NEEDED that passes */
        assert_int_equal(pread(fd, &d, sizeof(d), dyn_off + (off_t)(i * sizeof(d))),
                         (ssize_t)sizeof(d));
        assert_true(d.d_tag != DT_NULL);
        if (needed && d.d_tag != DT_NEEDED)
            break;
        needed |= d.d_tag == DT_NEEDED;
    }
    d.d_tag = DT_NEEDED;
    d.d_un.d_val = 0x7fffffff;
    assert_int_equal(pwrite(fd, &d, sizeof(d), dyn_off + (off_t)(i * sizeof(d))),
                     (ssize_t)sizeof(d));
    close(fd);
    expect_refused_in_child(path, "malformed: DT_NEEDED points outside the string table");
    free(path);
}

/* Issue 13 item 10: the folders a plugin's RUNPATH/RPATH name are where
 * the loader finds its libraries; they must pass the folder rules. */
static void expect_search_path(fixture *f, const char *name, const char *tag)
{
    char as[128];
    snprintf(as, sizeof(as), "%s.so", name);
    char *path = tu_install_fixture(f->dir, name, as);
    wsel_library *lib = NULL;
    /* No libs folder yet: it would be created in a trusted folder. */
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)), 0);
    wsel_library_close(lib);
    char libs[1024];
    snprintf(libs, sizeof(libs), "%s/libs", f->dir);
    assert_int_equal(mkdir(libs, 0755), 0);
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)), 0);
    wsel_library_close(lib);
    assert_int_equal(chmod(libs, 0777), 0);
    lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)),
                     WSEL_EPERM);
    assert_null(lib);
    char want[2048];
    snprintf(want, sizeof(want),
             "%s: %s entry '$ORIGIN/libs': refused: folder %s is world-writable without "
             "the sticky bit",
             path, tag, libs);
    if (strstr(f->err, want) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", f->err, want);
    free(path);
}

static void test_refuses_runpath_into_world_writable_folder(void **state)
{
    expect_search_path(*state, "fx_runpath_origin", "RUNPATH");
}

static void test_refuses_rpath_into_world_writable_folder(void **state)
{
    expect_search_path(*state, "fx_rpath_origin", "RPATH");
}

static void test_refuses_object_without_entry_symbol(void **state)
{
    expect_refusal(*state, "fx_no_entry", WSEL_ENOSYM,
                   "missing symbol wsel_plugin_entry (not a wsel plugin?)");
}

static void test_refuses_other_abi_major(void **state)
{
    expect_refusal(*state, "fx_abi_major2", WSEL_EABI, "ABI major 2, host supports 1");
}

static void test_refuses_descriptor_shorter_than_1_0(void **state)
{
    expect_refusal(*state, "fx_short_descriptor", WSEL_EABI,
                   "descriptor is 24 bytes, ABI 1.0 needs at least 96");
}

static void test_refuses_descriptor_without_select(void **state)
{
    expect_refusal(*state, "fx_null_select", WSEL_EABI,
                   "plugin fx_null_select has no select function");
}

static void test_refuses_parameter_declared_twice(void **state)
{
    expect_refusal(*state, "fx_bad_params_1", WSEL_EABI,
                   "parameter 1: name 'alpha' declared twice");
}

static void test_refuses_parameter_of_unknown_type(void **state)
{
    expect_refusal(*state, "fx_bad_params_2", WSEL_EABI,
                   "parameter 1 ('beta'): unknown type 9");
}

static void test_refuses_parameter_without_doc(void **state)
{
    expect_refusal(*state, "fx_bad_params_3", WSEL_EABI,
                   "parameter 1 ('beta'): no doc string");
}

static void test_refuses_parameter_with_min_above_default(void **state)
{
    expect_refusal(*state, "fx_bad_params_4", WSEL_EABI,
                   "parameter 1 ('beta'): needs min <= default <= max, got 3, 1, 8");
}

static void test_refuses_enum_without_choices(void **state)
{
    expect_refusal(*state, "fx_bad_params_5", WSEL_EABI,
                   "parameter 1 ('beta'): enum without choices");
}

static void test_refuses_parameter_name_with_capitals(void **state)
{
    expect_refusal(*state, "fx_bad_params_6", WSEL_EABI,
                   "parameter 1: name is not [a-z0-9_]+");
}

static void test_refuses_parameter_stride_below_1_0(void **state)
{
    expect_refusal(*state, "fx_bad_params_7", WSEL_EABI,
                   "param_def_size is 8 bytes, ABI 1.0 needs at least 56");
}

static void test_refuses_enum_default_past_last_choice(void **state)
{
    expect_refusal(*state, "fx_bad_params_8", WSEL_EABI,
                   "parameter 1 ('beta'): default 2 is outside [0, 1] for its type");
}

static void test_opens_good_plugin_and_reads_its_parameters(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_good", "good.so");
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)), 0);
    const wsel_plugin *p = wsel_library_plugin(lib);
    assert_string_equal(p->name, "fx_good");
    assert_int_equal(p->num_params, 5);
    assert_string_equal(wsel_library_path(lib), path);
    assert_string_equal(wsel_library_param(lib, 2)->name, "d");
    assert_string_equal(wsel_library_param(lib, 4)->choices[1], "argmin");
    assert_null(wsel_library_param(lib, 5));
    wsel_library_close(lib);
    free(path);
}

static void test_reads_longer_descriptor_of_newer_minor(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_long_descriptor", "long.so");
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)), 0);
    const wsel_plugin *p = wsel_library_plugin(lib);
    assert_int_equal(p->abi_minor, WSEL_ABI_MINOR + 1);
    assert_int_equal(p->struct_size, sizeof(wsel_plugin) + 32);
    assert_string_equal(p->name, "fx_long_descriptor");
    assert_null(p->on_topology_changed);
    wsel_library_close(lib);
    free(path);
}

static void test_applies_allow_list_from_options(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_good", "good.so");
    const char *const dirs[] = {"/usr/lib", NULL};
    wsel_trust_options opts = {sizeof(opts), 0, dirs};
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, &opts, &lib, f->err, sizeof(f->err)),
                     WSEL_EPERM);
    assert_non_null(strstr(f->err, "is not in the allowed plugin folders"));
    free(path);
}

static void test_extra_exported_symbols_do_not_interpose_on_host(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_extra_symbols", "extra.so");
    wsel_library *lib = NULL;
    assert_int_equal(wsel_library_open(path, NULL, &lib, f->err, sizeof(f->err)), 0);
    /* The fixture exports a wsel_rng_u64 that returns 0; RTLD_LOCAL keeps
     * the host's own. */
    wsel_rng rng;
    wsel_rng_seed(&rng, 1);
    assert_true(wsel_rng_u64(&rng) != 0 || wsel_rng_u64(&rng) != 0);
    wsel_library_close(lib);
    free(path);
}

/* In a child: open the constructor fixture twice (same file). */
static void open_constructor_twice(void *arg)
{
    const char *path = arg;
    char err[512];
    for (int i = 0; i < 2; i++) {
        wsel_library *lib = NULL;
        if (wsel_library_open(path, NULL, &lib, err, sizeof(err)) != 0) {
            printf("open failed: %s\n", err);
            fflush(stdout);
            _exit(1);
        }
        wsel_library_close(lib);
    }
}

static void test_constructor_runs_once_per_file_and_plugin_still_loads(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_constructor", "ctor.so");
    char out[4096];
    int status = tu_run_in_child(open_constructor_twice, path, out, sizeof(out));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    const char *first = strstr(out, "constructor ran");
    assert_non_null(first);
    assert_null(strstr(first + 1, "constructor ran"));
    free(path);
}

static void test_refused_untrusted_file_never_runs_its_constructor(void **state)
{
    fixture *f = *state;
    char *path = tu_install_fixture(f->dir, "fx_constructor", "ctor.so");
    assert_int_equal(chmod(path, 0664), 0);
    char out[4096];
    int status = tu_run_in_child(open_constructor_twice, path, out, sizeof(out));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_null(strstr(out, "constructor ran"));
    assert_non_null(strstr(out, "group-writable"));
    free(path);
}

static void test_close_of_null_is_harmless(void **state)
{
    (void)state;
    wsel_library_close(NULL);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_refuses_missing_file),
        T(test_refuses_untrusted_file_before_running_its_code),
        T(test_refuses_file_that_is_not_a_shared_object),
        T(test_refuses_truncated_object),
        T(test_names_the_architecture_of_a_foreign_object),
        T(test_refuses_needed_entry_outside_string_table),
        T(test_refuses_runpath_into_world_writable_folder),
        T(test_refuses_rpath_into_world_writable_folder),
        T(test_refuses_object_without_entry_symbol),
        T(test_refuses_other_abi_major),
        T(test_refuses_descriptor_shorter_than_1_0),
        T(test_refuses_descriptor_without_select),
        T(test_refuses_parameter_declared_twice),
        T(test_refuses_parameter_of_unknown_type),
        T(test_refuses_parameter_without_doc),
        T(test_refuses_parameter_with_min_above_default),
        T(test_refuses_enum_without_choices),
        T(test_refuses_parameter_name_with_capitals),
        T(test_refuses_parameter_stride_below_1_0),
        T(test_refuses_enum_default_past_last_choice),
        T(test_opens_good_plugin_and_reads_its_parameters),
        T(test_reads_longer_descriptor_of_newer_minor),
        T(test_applies_allow_list_from_options),
        T(test_extra_exported_symbols_do_not_interpose_on_host),
        T(test_constructor_runs_once_per_file_and_plugin_still_loads),
        T(test_refused_untrusted_file_never_runs_its_constructor),
        T(test_close_of_null_is_harmless),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
