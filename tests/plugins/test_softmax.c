// SPDX-License-Identifier: Apache-2.0
/*
 * test_softmax.c -- the softmax plugin against hand-computed cases.
 *
 * Every expected row below is derived by hand from Dynamo's rule (see
 * abi/wsel.h, softmax_sample): at T = 0 the cheapest row, exact ties split
 * by u into equal slices; at T > 0, p_i ~ exp(-(c_i - min) / ((max - min) T))
 * and the first row whose running sum of p reaches u. The exact arithmetic,
 * bit for bit, is checked against a reference written from Dynamo's source
 * in tests/host/test_softmax_parity.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

/* Choose with the plugin's temperature parameter `param_t`, the request's
 * temperature `request_t` and the uniform draw `u`. */
static uint32_t pick(harness_table *t, double param_t, double request_t, double u)
{
    static const char *const names[] = {"temperature"};
    void *instance = harness_create(names, &param_t, 1);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 1, 1, 0, NULL, 0);
    req.temperature = request_t;
    req.uniform = u;
    uint32_t row = harness_select(instance, &req, t);
    wsel_plugin_entry.destroy(instance);
    return row;
}

static harness_table *table_with_costs(const double *costs, uint32_t n)
{
    harness_table *t = harness_table_new(n, NULL);
    memcpy(t->cost, costs, n * sizeof(*costs));
    return t;
}

static void test_descriptor_declares_temperature_zero_within_0_to_100(void **state)
{
    (void)state;
    const wsel_plugin *p = &wsel_plugin_entry;
    assert_string_equal(p->name, "softmax");
    assert_int_equal(p->abi_major, WSEL_ABI_MAJOR);
    assert_int_equal(p->struct_size, sizeof(wsel_plugin));
    assert_int_equal(p->capabilities, WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS);
    assert_int_equal(p->num_params, 1);
    assert_string_equal(p->params[0].name, "temperature");
    assert_int_equal(p->params[0].type, WSEL_PARAM_DOUBLE);
    assert_true(p->params[0].default_value == 0.0);
    assert_true(p->params[0].min_value == 0.0);
    assert_true(p->params[0].max_value == 100.0);
    assert_null(p->on_request_finished);
    assert_null(p->on_topology_changed);
}

static void test_ties_at_zero_temperature_are_split_by_u_in_row_order(void **state)
{
    (void)state;
    /* Minimum 1 at rows 1, 2 and 4: u in [0, 1/3) -> row 1, [1/3, 2/3) ->
     * row 2, [2/3, 1) -> row 4 (floor(3u)-th tied row). */
    const double costs[] = {3, 1, 1, 2, 1};
    harness_table *t = table_with_costs(costs, 5);
    assert_int_equal(pick(t, 0, 0, 0.0), 1);
    assert_int_equal(pick(t, 0, 0, 0.333), 1);
    assert_int_equal(pick(t, 0, 0, 0.334), 2);
    assert_int_equal(pick(t, 0, 0, 0.666), 2);
    assert_int_equal(pick(t, 0, 0, 0.667), 4);
    assert_int_equal(pick(t, 0, 0, 0.999999), 4);
    harness_table_free(t);
}

static void test_equal_costs_are_uniform_at_positive_temperature(void **state)
{
    (void)state;
    /* Four equal costs: max - min = 0, so uniform: u in (k/4, (k+1)/4] ->
     * row k, whatever the temperature (u = 0 -> row 0). A u exactly on a
     * boundary belongs to the earlier row, as in Dynamo's running sum. */
    const double costs[] = {7, 7, 7, 7};
    harness_table *t = table_with_costs(costs, 4);
    assert_int_equal(pick(t, 1.0, 0, 0.0), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.249), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.251), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.499), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.501), 2);
    assert_int_equal(pick(t, 50.0, 0, 0.749), 2);
    assert_int_equal(pick(t, 50.0, 0, 0.751), 3);
    assert_int_equal(pick(t, 50.0, 0, 0.999), 3);
    assert_int_equal(pick(t, 1.0, 0, 0.25), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.5), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.75), 2);
    harness_table_free(t);
}

static void test_three_rows_at_unit_temperature_follow_hand_computed_sums(void **state)
{
    (void)state;
    /*
     * costs {12, 10, 14}, T = 1: range = 14 - 10 = 4,
     *   s = -(c / 4) = {-3, -2.5, -3.5};  s - max s = {-0.5, 0, -1}
     *   weights = {e^-0.5, 1, e^-1} = {0.60653066, 1, 0.36787944}
     *   sum = 1.97441010
     *   p = {0.30719589, 0.50648039, 0.18632372}
     *   running sum = {0.3071958857, 0.8136762768, 1}
     * So u <= 0.3071958857 -> row 0, u <= 0.8136762768 -> row 1, else row 2.
     */
    const double costs[] = {12, 10, 14};
    harness_table *t = table_with_costs(costs, 3);
    assert_int_equal(pick(t, 1.0, 0, 0.0), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.30719588), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.30719589), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.81367627), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.81367628), 2);
    assert_int_equal(pick(t, 1.0, 0, 0.9999999), 2);
    /* At T = 0 the same table answers the cheapest row whatever u is. */
    assert_int_equal(pick(t, 0.0, 0, 0.9999999), 1);
    harness_table_free(t);
}

static void test_negative_costs_rank_like_any_other_costs(void **state)
{
    (void)state;
    /*
     * costs {-5, -7, -6}: T = 0 -> row 1. T = 1: range 2,
     *   s = {2.5, 3.5, 3};  s - max s = {-1, 0, -0.5}
     *   p = {0.18632372, 0.50648039, 0.30719589}
     *   running sum = {0.1863237232, 0.6928041143, 1}
     */
    const double costs[] = {-5, -7, -6};
    harness_table *t = table_with_costs(costs, 3);
    assert_int_equal(pick(t, 0, 0, 0.5), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.18632372), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.18632373), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.69280411), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.69280412), 2);
    harness_table_free(t);
}

static void test_huge_costs_neither_overflow_nor_lose_the_order(void **state)
{
    (void)state;
    /*
     * costs {1e300, -1e300, 0}: range 2e300 is still finite, and
     *   s = {-0.5, 0.5, 0};  s - max s = {-1, 0, -0.5}
     * the same p and running sums as the negative-cost case.
     */
    const double costs[] = {1e300, -1e300, 0};
    harness_table *t = table_with_costs(costs, 3);
    assert_int_equal(pick(t, 0, 0, 0.999), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.18632372), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.18632373), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.69280411), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.69280412), 2);
    harness_table_free(t);
}

static void test_single_candidate_is_chosen_for_every_u(void **state)
{
    (void)state;
    const double costs[] = {42};
    harness_table *t = table_with_costs(costs, 1);
    assert_int_equal(pick(t, 0, 0, 0.0), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.5), 0);
    assert_int_equal(pick(t, 100.0, 0, 0.999999), 0);
    harness_table_free(t);
}

static void test_excluded_rows_are_never_chosen(void **state)
{
    (void)state;
    /*
     * costs {1, 5, 3} with row 0 excluded: T = 0 -> row 2. T = 1 over
     * {5, 3}: range 2, s - max s = {-1, 0}, p = {0.26894142, 0.73105858},
     * so u <= 0.2689 -> row 1, else row 2; never row 0, even at u = 0.
     */
    const double costs[] = {1, 5, 3};
    harness_table *t = table_with_costs(costs, 3);
    t->flags[0] = WSEL_ROW_EXCLUDED;
    assert_int_equal(pick(t, 0, 0, 0.0), 2);
    assert_int_equal(pick(t, 1.0, 0, 0.0), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.26894141), 1);
    assert_int_equal(pick(t, 1.0, 0, 0.26894143), 2);
    harness_table_free(t);
}

static void test_busy_rows_are_avoided_while_an_idle_row_is_eligible(void **state)
{
    (void)state;
    /* The cheapest row is busy: the cheapest idle row wins instead. */
    const double costs[] = {1, 5, 3};
    harness_table *t = table_with_costs(costs, 3);
    t->flags[0] = WSEL_ROW_BUSY;
    assert_int_equal(pick(t, 0, 0, 0.0), 2);
    assert_int_equal(pick(t, 0, 0, 0.999), 2);
    /* Row 2 excluded: row 1 is the only idle eligible row. */
    t->flags[2] = WSEL_ROW_EXCLUDED;
    assert_int_equal(pick(t, 1.0, 0, 0.0), 1);
    harness_table_free(t);
}

static void test_busy_rows_are_used_when_every_eligible_row_is_busy(void **state)
{
    (void)state;
    const double costs[] = {4, 1, 3};
    harness_table *t = table_with_costs(costs, 3);
    t->flags[0] = WSEL_ROW_BUSY;
    t->flags[1] = WSEL_ROW_EXCLUDED | WSEL_ROW_BUSY;
    t->flags[2] = WSEL_ROW_BUSY;
    assert_int_equal(pick(t, 0, 0, 0.5), 2);
    harness_table_free(t);
}

static void test_every_row_excluded_returns_enocandidate_and_writes_nothing(void **state)
{
    (void)state;
    harness_expect_all_excluded_refused(2);
}

static void test_request_temperature_overrides_the_parameter_when_nonzero(void **state)
{
    (void)state;
    /* costs {12, 10, 14}: at T = 1, u = 0.9 lies past 0.8137 -> row 2; at
     * T = 0 (or T = 0.01, where p(row 1) = 1 - O(e^-50)) it is row 1. */
    const double costs[] = {12, 10, 14};
    harness_table *t = table_with_costs(costs, 3);
    assert_int_equal(pick(t, 0.0, 1.0, 0.9), 2);  /* request T = 1 wins */
    assert_int_equal(pick(t, 1.0, 0.0, 0.9), 2);  /* request T = 0: parameter */
    assert_int_equal(pick(t, 1.0, 0.01, 0.9), 1); /* request T = 0.01 wins */
    assert_int_equal(pick(t, 0.0, 0.0, 0.9), 1);
    harness_table_free(t);
}

/* Choose with a request temperature given as a 1.1 override (the
 * WSEL_OVERRIDE_TEMPERATURE bit), in a request of `struct_size` bytes. */
static uint32_t pick_override(harness_table *t, double param_t, double request_t,
                              uint32_t struct_size, double u)
{
    static const char *const names[] = {"temperature"};
    void *instance = harness_create(names, &param_t, 1);
    wsel_request req;
    wsel_rng rng;
    harness_request(&req, &rng, 1, 1, 0, NULL, 0);
    req.struct_size = struct_size;
    req.overrides = WSEL_OVERRIDE_TEMPERATURE;
    req.temperature = request_t;
    req.uniform = u;
    uint32_t row = harness_select(instance, &req, t);
    wsel_plugin_entry.destroy(instance);
    return row;
}

static void test_request_override_of_zero_forces_the_cheapest_row(void **state)
{
    (void)state;
    /* costs {12, 10, 14}, u = 0.9: row 2 at T = 1, row 1 (cheapest) at T = 0. */
    const double costs[] = {12, 10, 14};
    harness_table *t = table_with_costs(costs, 3);
    /* Precedence: the override, 0 included, beats the parameter. */
    assert_int_equal(pick_override(t, 1.0, 0.0, sizeof(wsel_request), 0.9), 1);
    assert_int_equal(pick_override(t, 0.0, 1.0, sizeof(wsel_request), 0.9), 2);
    /* A 1.0 router's request ends before `overrides`: the bit is not read,
     * and the 1.0 rule gives the parameter for a temperature of 0. */
    assert_int_equal(pick_override(t, 1.0, 0.0, WSEL_REQUEST_SIZE_1_0, 0.9), 2);
    assert_int_equal(pick_override(t, 0.0, 1.0, WSEL_REQUEST_SIZE_1_0, 0.9), 2);
    harness_table_free(t);
}

static void test_infinite_range_keeps_the_cheapest_row_favoured(void **state)
{
    (void)state;
    /* costs {-DBL_MAX, DBL_MAX}: max - min is infinite, so costs are divided
     * by DBL_MAX first (Dynamo): {-1, 1}, range 2, T = 1: p(row 0) =
     * 1 / (1 + e^-1) = 0.7310585786. */
    const double costs[] = {-1.7976931348623157e308, 1.7976931348623157e308};
    harness_table *t = table_with_costs(costs, 2);
    assert_int_equal(pick(t, 1.0, 0, 0.6), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.73105857), 0);
    assert_int_equal(pick(t, 1.0, 0, 0.73105859), 1);
    harness_table_free(t);
}

static void test_create_refuses_a_wrong_parameter_count(void **state)
{
    (void)state;
    double values[2] = {0, 0};
    void *instance = (void *)&values;
    assert_int_equal(wsel_plugin_entry.create(harness_host_api(), values, 2, &instance),
                     WSEL_EINVAL);
    assert_ptr_equal(instance, (void *)&values);
}

/* Configured at temperature 5, a request whose override says 0 still gets
 * the cheapest row, loaded and called through libwsel-host. */
static void test_override_of_zero_beats_a_configured_temperature(void **state)
{
    (void)state;
    harness_expect_override_zero_is_cheapest("softmax", "{\"temperature\": 5}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_declares_temperature_zero_within_0_to_100),
        cmocka_unit_test(test_ties_at_zero_temperature_are_split_by_u_in_row_order),
        cmocka_unit_test(test_equal_costs_are_uniform_at_positive_temperature),
        cmocka_unit_test(test_three_rows_at_unit_temperature_follow_hand_computed_sums),
        cmocka_unit_test(test_negative_costs_rank_like_any_other_costs),
        cmocka_unit_test(test_huge_costs_neither_overflow_nor_lose_the_order),
        cmocka_unit_test(test_single_candidate_is_chosen_for_every_u),
        cmocka_unit_test(test_excluded_rows_are_never_chosen),
        cmocka_unit_test(test_busy_rows_are_avoided_while_an_idle_row_is_eligible),
        cmocka_unit_test(test_busy_rows_are_used_when_every_eligible_row_is_busy),
        cmocka_unit_test(test_every_row_excluded_returns_enocandidate_and_writes_nothing),
        cmocka_unit_test(test_request_temperature_overrides_the_parameter_when_nonzero),
        cmocka_unit_test(test_request_override_of_zero_forces_the_cheapest_row),
        cmocka_unit_test(test_infinite_range_keeps_the_cheapest_row_favoured),
        cmocka_unit_test(test_create_refuses_a_wrong_parameter_count),
        cmocka_unit_test(test_override_of_zero_beats_a_configured_temperature),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
