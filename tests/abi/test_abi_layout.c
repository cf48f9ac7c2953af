// SPDX-License-Identifier: Apache-2.0
/*
 * test_abi_layout.c -- abi/wsel.h keeps every promise of ABI v1.0 and v1.1.
 *
 * The same lists (layout_fields.h) are measured on the frozen v1.0 header
 * and on the current one, in two translation units; every mismatch is
 * printed with the field's name before the test fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "layout_fields.h"

static void test_every_v1_0_field_keeps_its_offset_and_size(void **state)
{
    (void)state;
    const abi_facts *old = abi_facts_v1_0();
    const abi_facts *now = abi_facts_current();
    assert_int_equal(abi_count_mismatches("fields", old->fields, old->num_fields,
                                          now->fields, now->num_fields),
                     0);
}

static void test_structs_only_grow_and_fixed_ones_keep_their_size(void **state)
{
    (void)state;
    const abi_facts *old = abi_facts_v1_0();
    const abi_facts *now = abi_facts_current();
    assert_int_equal(abi_count_mismatches("structs", old->structs, old->num_structs,
                                          now->structs, now->num_structs),
                     0);
}

static void test_every_v1_0_constant_keeps_its_value(void **state)
{
    (void)state;
    const abi_facts *old = abi_facts_v1_0();
    const abi_facts *now = abi_facts_current();
    assert_int_equal(abi_count_mismatches("constants", old->constants, old->num_constants,
                                          now->constants, now->num_constants),
                     0);
}

static void test_every_v1_0_error_code_keeps_its_name_and_value(void **state)
{
    (void)state;
    const abi_facts *old = abi_facts_v1_0();
    const abi_facts *now = abi_facts_current();
    /* A minor may append codes: compare the v1.0 prefix of the list. */
    assert_true(now->num_errors >= old->num_errors);
    assert_int_equal(abi_count_mismatches("error codes", old->errors, old->num_errors,
                                          now->errors, old->num_errors),
                     0);
}

static void test_minor_version_never_goes_back_and_entry_symbol_stays(void **state)
{
    (void)state;
    const abi_facts *old = abi_facts_v1_0();
    const abi_facts *now = abi_facts_current();
    assert_int_equal(old->abi_minor, 0);
    assert_true(now->abi_minor >= old->abi_minor);
    assert_string_equal(now->entry_symbol, old->entry_symbol);
}

static void test_v1_0_sizes_match_the_literal_pins(void **state)
{
    (void)state;
    /* The frozen header's numbers, written out once more so that a change
     * to both headers at once (say, a bad copy) still fails somewhere. */
    static const struct {
        const char *name;
        uint64_t size;
    } pinned[] = {
        {"sizeof(wsel_rng)", 32},      {"sizeof(wsel_request)", 88},
        {"sizeof(wsel_table)", 112},   {"sizeof(wsel_choice)", 32},
        {"sizeof(wsel_host_api)", 64}, {"sizeof(wsel_param_def)", 56},
        {"sizeof(wsel_plugin)", 96},
    };
    const abi_facts *old = abi_facts_v1_0();
    assert_int_equal(old->num_structs, sizeof(pinned) / sizeof(pinned[0]));
    for (size_t i = 0; i < old->num_structs; i++) {
        assert_string_equal(old->structs[i].name, pinned[i].name);
        assert_int_equal(old->structs[i].size, pinned[i].size);
    }
}

/* ABI 1.1 appended wsel_request.overrides (and reserved2) and two constants:
 * the frozen v1.1 header and the current one agree on every v1.0 and v1.1
 * fact. */
static void test_every_v1_1_fact_keeps_its_offset_size_and_value(void **state)
{
    (void)state;
    const abi_facts *old = abi_facts_v1_1();
    const abi_facts *now = abi_facts_current_v1_1();
    int bad = abi_count_mismatches("fields", old->fields, old->num_fields, now->fields,
                                   now->num_fields);
    bad += abi_count_mismatches("structs", old->structs, old->num_structs, now->structs,
                                now->num_structs);
    bad += abi_count_mismatches("constants", old->constants, old->num_constants,
                                now->constants, now->num_constants);
    assert_true(now->num_errors >= old->num_errors);
    bad += abi_count_mismatches("error codes", old->errors, old->num_errors, now->errors,
                                old->num_errors);
    assert_int_equal(bad, 0);
    assert_int_equal(old->abi_minor, 1);
    assert_true(now->abi_minor >= old->abi_minor);
}

static void test_v1_1_tails_match_the_literal_pins(void **state)
{
    (void)state;
    /* What 1.1 appended, each after its struct's 1.0 end (request 88,
     * choice 32, host table 64, plugin 96), and the new wsel_outcome. */
    static const struct {
        const char *name;
        uint64_t offset, size;
    } pinned[] = {
        {"wsel_request.overrides", 88, 4},     {"wsel_request.reserved2", 92, 4},
        {"wsel_choice.reason", 32, 4},         {"wsel_choice.flags", 36, 4},
        {"wsel_choice.score", 40, 8},          {"wsel_outcome.struct_size", 0, 4},
        {"wsel_outcome.dp_rank", 4, 4},        {"wsel_outcome.request_id", 8, 8},
        {"wsel_outcome.worker_id", 16, 8},     {"wsel_outcome.ttft_us", 24, 8},
        {"wsel_outcome.e2e_us", 32, 8},        {"wsel_outcome.finished_us", 40, 8},
        {"wsel_outcome.prompt_tokens", 48, 4}, {"wsel_outcome.cached_tokens", 52, 4},
        {"wsel_outcome.output_tokens", 56, 4}, {"wsel_outcome.flags", 60, 4},
        {"wsel_host_api.rng_below", 64, 8},    {"wsel_host_api.eligible_skip", 72, 8},
        {"wsel_host_api.param_json", 80, 8},   {"wsel_host_api.child_open", 88, 8},
        {"wsel_host_api.child_score", 96, 8},  {"wsel_host_api.child_select", 104, 8},
        {"wsel_host_api.child_finished", 112, 8},
        {"wsel_host_api.child_outcome", 120, 8},
        {"wsel_host_api.child_topology_changed", 128, 8},
        {"wsel_host_api.child_close", 136, 8},
        {"wsel_plugin.score", 96, 8},          {"wsel_plugin.on_request_outcome", 104, 8},
    };
    const abi_facts *v1_0 = abi_facts_v1_0();
    const abi_facts *v1_1 = abi_facts_v1_1();
    size_t first = v1_0->num_fields; /* the v1.1 fields follow the v1.0 ones */
    assert_int_equal(v1_1->num_fields, first + sizeof(pinned) / sizeof(pinned[0]));
    for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) {
        assert_string_equal(v1_1->fields[first + i].name, pinned[i].name);
        assert_int_equal(v1_1->fields[first + i].offset, pinned[i].offset);
        assert_int_equal(v1_1->fields[first + i].size, pinned[i].size);
    }
    static const struct {
        const char *name;
        uint64_t size;
    } sizes[] = {
        {"sizeof(wsel_request)", 96},  {"sizeof(wsel_choice)", 48},
        {"sizeof(wsel_host_api)", 144}, {"sizeof(wsel_plugin)", 112},
        {"sizeof(wsel_outcome)", 64},
    };
    size_t found = 0;
    for (size_t i = 0; i < v1_1->num_structs; i++)
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
            if (strcmp(v1_1->structs[i].name, sizes[k].name) == 0) {
                assert_int_equal(v1_1->structs[i].size, sizes[k].size);
                found++;
            }
    assert_int_equal(found, sizeof(sizes) / sizeof(sizes[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_v1_0_field_keeps_its_offset_and_size),
        cmocka_unit_test(test_structs_only_grow_and_fixed_ones_keep_their_size),
        cmocka_unit_test(test_every_v1_0_constant_keeps_its_value),
        cmocka_unit_test(test_every_v1_0_error_code_keeps_its_name_and_value),
        cmocka_unit_test(test_minor_version_never_goes_back_and_entry_symbol_stays),
        cmocka_unit_test(test_v1_0_sizes_match_the_literal_pins),
        cmocka_unit_test(test_every_v1_1_fact_keeps_its_offset_size_and_value),
        cmocka_unit_test(test_v1_1_tails_match_the_literal_pins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
