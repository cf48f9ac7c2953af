// SPDX-License-Identifier: Apache-2.0
/*
 * test_validate_elf.c -- the ELF reader behind `wsel validate`'s
 * exports_one_symbol check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "validate.h"

static void test_counts_only_the_entry_symbol_of_a_scripted_plugin(void **state)
{
    (void)state;
    char names[256] = "", err[256] = "";
    uint32_t count = 0;
    assert_int_equal(velf_count_exports(FIXTURE_DIR "/fx_validate_excluded_row.so",
                                        &count, names, sizeof(names), err, sizeof(err)),
                     0);
    assert_int_equal(count, 1);
    assert_string_equal(names, "wsel_plugin_entry");
}

static void test_counts_and_names_an_extra_exported_function(void **state)
{
    (void)state;
    char names[256] = "", err[256] = "";
    uint32_t count = 0;
    assert_int_equal(velf_count_exports(FIXTURE_DIR "/fx_validate_extra_symbol.so",
                                        &count, names, sizeof(names), err, sizeof(err)),
                     0);
    assert_int_equal(count, 2);
    assert_non_null(strstr(names, "fx_leaked_helper"));
    assert_non_null(strstr(names, "wsel_plugin_entry"));
}

static void test_refuses_a_file_that_is_not_elf_naming_it(void **state)
{
    (void)state;
    char path[] = "/tmp/wsel-test-elf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "#!/bin/sh\necho not elf\n", 23), 23);
    close(fd);
    char names[64] = "untouched", err[256] = "";
    uint32_t count = 77;
    assert_int_equal(
        velf_count_exports(path, &count, names, sizeof(names), err, sizeof(err)),
        WSEL_EABI);
    assert_non_null(strstr(err, path));
    assert_int_equal(count, 77); /* outputs untouched on failure */
    assert_string_equal(names, "untouched");
    unlink(path);
}

static void test_refuses_a_truncated_elf_header(void **state)
{
    (void)state;
    char path[] = "/tmp/wsel-test-elf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unsigned char hdr[40] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    assert_int_equal(write(fd, hdr, sizeof(hdr)), (int)sizeof(hdr));
    close(fd);
    char names[64], err[256] = "";
    uint32_t count = 0;
    assert_int_equal(
        velf_count_exports(path, &count, names, sizeof(names), err, sizeof(err)),
        WSEL_EABI);
    unlink(path);
}

static void test_reports_a_missing_file_as_enoent(void **state)
{
    (void)state;
    char names[64], err[256] = "";
    uint32_t count = 0;
    assert_int_equal(velf_count_exports("/nonexistent/wsel/x.so", &count, names,
                                        sizeof(names), err, sizeof(err)),
                     WSEL_ENOENT);
    assert_non_null(strstr(err, "/nonexistent/wsel/x.so"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_only_the_entry_symbol_of_a_scripted_plugin),
        cmocka_unit_test(test_counts_and_names_an_extra_exported_function),
        cmocka_unit_test(test_refuses_a_file_that_is_not_elf_naming_it),
        cmocka_unit_test(test_refuses_a_truncated_elf_header),
        cmocka_unit_test(test_reports_a_missing_file_as_enoent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
