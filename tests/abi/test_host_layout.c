// SPDX-License-Identifier: Apache-2.0
/*
 * test_host_layout.c -- host/include/wsel_host.h keeps every promise that
 * libwsel-host.so.1 made in 1.0: the layout of every struct a caller
 * allocates, and every constant. Programs built against 1.0 keep working.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_layout_fields.h"

static void test_every_1_0_host_field_keeps_its_offset_and_size(void **state)
{
    (void)state;
    const abi_facts *old = host_facts_v1_0();
    const abi_facts *now = host_facts_current();
    assert_int_equal(abi_count_mismatches("fields", old->fields, old->num_fields,
                                          now->fields, now->num_fields),
                     0);
}

static void test_host_structs_only_grow_and_frozen_ones_keep_their_size(void **state)
{
    (void)state;
    const abi_facts *old = host_facts_v1_0();
    const abi_facts *now = host_facts_current();
    assert_int_equal(abi_count_mismatches("structs", old->structs, old->num_structs,
                                          now->structs, now->num_structs),
                     0);
}

static void test_every_1_0_host_constant_keeps_its_value(void **state)
{
    (void)state;
    const abi_facts *old = host_facts_v1_0();
    const abi_facts *now = host_facts_current();
    assert_int_equal(abi_count_mismatches("constants", old->constants, old->num_constants,
                                          now->constants, now->num_constants),
                     0);
}

static void test_1_0_host_sizes_match_the_literal_pins(void **state)
{
    (void)state;
    /* Written out once more, so that a bad copy of both headers still fails. */
    static const struct {
        const char *name;
        uint64_t size;
    } pinned[] = {
        {"sizeof(wsel_rank_state)", 48},     {"sizeof(wsel_table_buf)", 128},
        {"sizeof(wsel_trust_options)", 16},  {"sizeof(wsel_host_options)", 80},
        {"sizeof(wsel_host_counters)", 112},
    };
    const abi_facts *old = host_facts_v1_0();
    assert_int_equal(old->num_structs, sizeof(pinned) / sizeof(pinned[0]));
    for (size_t i = 0; i < old->num_structs; i++) {
        assert_string_equal(old->structs[i].name, pinned[i].name);
        assert_int_equal(old->structs[i].size, pinned[i].size);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_1_0_host_field_keeps_its_offset_and_size),
        cmocka_unit_test(test_host_structs_only_grow_and_frozen_ones_keep_their_size),
        cmocka_unit_test(test_every_1_0_host_constant_keeps_its_value),
        cmocka_unit_test(test_1_0_host_sizes_match_the_literal_pins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
