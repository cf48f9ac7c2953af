// SPDX-License-Identifier: Apache-2.0
/*
 * layout_fields.h -- every struct, field and constant of ABI v1.0, listed
 * once, then what v1.1 appended. layout_v1_0.c expands the v1.0 lists
 * against the frozen v1.0 header, layout_v1_1.c the v1.0 and v1.1 lists
 * against the frozen v1.1 header, and layout_current.c both against
 * abi/wsel.h; test_abi_layout.c compares each frozen header with the
 * current one.
 *
 * Only ever append to these lists in a later minor: they name what each
 * minor promised, and every later 1.x header must keep it.
 */
#ifndef WSEL_TESTS_ABI_LAYOUT_FIELDS_H
#define WSEL_TESTS_ABI_LAYOUT_FIELDS_H

#include <stddef.h>
#include <stdint.h>

/* X(struct type, field) for every field of every v1.0 struct. */
#define ABI_V1_0_FIELDS(X)                                                               \
    X(wsel_rng, state)                                                                   \
    X(wsel_request, struct_size)                                                         \
    X(wsel_request, reserved0)                                                           \
    X(wsel_request, request_id)                                                          \
    X(wsel_request, affinity_key)                                                        \
    X(wsel_request, timestamp_us)                                                        \
    X(wsel_request, isl_tokens)                                                          \
    X(wsel_request, block_size)                                                          \
    X(wsel_request, num_block_hashes)                                                    \
    X(wsel_request, reserved1)                                                           \
    X(wsel_request, block_hashes)                                                        \
    X(wsel_request, overlap_score_weight)                                                \
    X(wsel_request, temperature)                                                         \
    X(wsel_request, uniform)                                                             \
    X(wsel_request, rng)                                                                 \
    X(wsel_table, struct_size)                                                           \
    X(wsel_table, num_rows)                                                              \
    X(wsel_table, num_groups)                                                            \
    X(wsel_table, reserved0)                                                             \
    X(wsel_table, topology_epoch)                                                        \
    X(wsel_table, worker_id)                                                             \
    X(wsel_table, dp_rank)                                                               \
    X(wsel_table, overlap_blocks)                                                        \
    X(wsel_table, prefill_tokens)                                                        \
    X(wsel_table, decode_blocks)                                                         \
    X(wsel_table, cost)                                                                  \
    X(wsel_table, kv_capacity_blocks)                                                    \
    X(wsel_table, active_requests)                                                       \
    X(wsel_table, flags)                                                                 \
    X(wsel_table, group_first_row)                                                       \
    X(wsel_table, group_row_count)                                                       \
    X(wsel_choice, struct_size)                                                          \
    X(wsel_choice, row)                                                                  \
    X(wsel_choice, reserved)                                                             \
    X(wsel_host_api, struct_size)                                                        \
    X(wsel_host_api, abi_major)                                                          \
    X(wsel_host_api, abi_minor)                                                          \
    X(wsel_host_api, reserved0)                                                          \
    X(wsel_host_api, host_ctx)                                                           \
    X(wsel_host_api, log)                                                                \
    X(wsel_host_api, rng_u64)                                                            \
    X(wsel_host_api, rng_uniform)                                                        \
    X(wsel_host_api, softmax_sample)                                                     \
    X(wsel_host_api, argmin)                                                             \
    X(wsel_param_def, name)                                                              \
    X(wsel_param_def, doc)                                                               \
    X(wsel_param_def, type)                                                              \
    X(wsel_param_def, reserved0)                                                         \
    X(wsel_param_def, default_value)                                                     \
    X(wsel_param_def, min_value)                                                         \
    X(wsel_param_def, max_value)                                                         \
    X(wsel_param_def, choices)                                                           \
    X(wsel_plugin, abi_major)                                                            \
    X(wsel_plugin, abi_minor)                                                            \
    X(wsel_plugin, struct_size)                                                          \
    X(wsel_plugin, capabilities)                                                         \
    X(wsel_plugin, name)                                                                 \
    X(wsel_plugin, version)                                                              \
    X(wsel_plugin, description)                                                          \
    X(wsel_plugin, params)                                                               \
    X(wsel_plugin, num_params)                                                           \
    X(wsel_plugin, param_def_size)                                                       \
    X(wsel_plugin, create)                                                               \
    X(wsel_plugin, destroy)                                                              \
    X(wsel_plugin, select)                                                               \
    X(wsel_plugin, on_request_finished)                                                  \
    X(wsel_plugin, on_topology_changed)

/* X(struct type, growable): growable structs carry a size the writer sets
 * (struct_size or param_def_size) and may gain a tail in a later minor; the
 * others must keep their exact v1.0 size. */
#define ABI_V1_0_STRUCTS(X)                                                              \
    X(wsel_rng, 0)                                                                       \
    X(wsel_request, 1)                                                                   \
    X(wsel_table, 1)                                                                     \
    X(wsel_choice, 1)                                                                    \
    X(wsel_host_api, 1)                                                                  \
    X(wsel_param_def, 1)                                                                 \
    X(wsel_plugin, 1)

/* X(constant) for every v1.0 constant except the error codes, which
 * WSEL_ERRNO_MAP lists in each header. WSEL_ABI_MINOR is checked apart: it
 * may only grow. */
#define ABI_V1_0_CONSTANTS(X)                                                            \
    X(WSEL_ABI_MAJOR)                                                                    \
    X(WSEL_LOG_ERROR)                                                                    \
    X(WSEL_LOG_WARN)                                                                     \
    X(WSEL_LOG_INFO)                                                                     \
    X(WSEL_LOG_DEBUG)                                                                    \
    X(WSEL_ROW_BUSY)                                                                     \
    X(WSEL_ROW_EXCLUDED)                                                                 \
    X(WSEL_ROW_NO_LOAD)                                                                  \
    X(WSEL_PARAM_DOUBLE)                                                                 \
    X(WSEL_PARAM_INT)                                                                    \
    X(WSEL_PARAM_BOOL)                                                                   \
    X(WSEL_PARAM_ENUM)                                                                   \
    X(WSEL_CAP_CONCURRENT_SELECT)                                                        \
    X(WSEL_CAP_STATELESS)                                                                \
    X(WSEL_PLUGIN_SIZE_1_0)                                                              \
    X(WSEL_REQUEST_SIZE_1_0)                                                             \
    X(WSEL_TABLE_SIZE_1_0)                                                               \
    X(WSEL_CHOICE_SIZE_1_0)                                                              \
    X(WSEL_HOST_API_SIZE_1_0)                                                            \
    X(WSEL_PARAM_DEF_SIZE_1_0)

/* X(struct type, field) for every field ABI 1.1 appended. */
#define ABI_V1_1_FIELDS(X)                                                               \
    X(wsel_request, overrides)                                                           \
    X(wsel_request, reserved2)                                                           \
    X(wsel_choice, reason)                                                               \
    X(wsel_choice, flags)                                                                \
    X(wsel_choice, score)                                                                \
    X(wsel_outcome, struct_size)                                                         \
    X(wsel_outcome, dp_rank)                                                             \
    X(wsel_outcome, request_id)                                                          \
    X(wsel_outcome, worker_id)                                                           \
    X(wsel_outcome, ttft_us)                                                             \
    X(wsel_outcome, e2e_us)                                                              \
    X(wsel_outcome, finished_us)                                                         \
    X(wsel_outcome, prompt_tokens)                                                       \
    X(wsel_outcome, cached_tokens)                                                       \
    X(wsel_outcome, output_tokens)                                                       \
    X(wsel_outcome, flags)                                                               \
    X(wsel_host_api, rng_below)                                                          \
    X(wsel_host_api, eligible_skip)                                                      \
    X(wsel_host_api, param_json)                                                         \
    X(wsel_host_api, child_open)                                                         \
    X(wsel_host_api, child_score)                                                        \
    X(wsel_host_api, child_select)                                                       \
    X(wsel_host_api, child_finished)                                                     \
    X(wsel_host_api, child_outcome)                                                      \
    X(wsel_host_api, child_topology_changed)                                             \
    X(wsel_host_api, child_close)                                                        \
    X(wsel_plugin, score)                                                                \
    X(wsel_plugin, on_request_outcome)

/* X(struct type, growable) for every struct ABI 1.1 added. */
#define ABI_V1_1_STRUCTS(X) X(wsel_outcome, 1)

/* X(constant) for every constant ABI 1.1 added. */
#define ABI_V1_1_CONSTANTS(X)                                                            \
    X(WSEL_OVERRIDE_TEMPERATURE)                                                         \
    X(WSEL_REQUEST_SIZE_1_1)                                                             \
    X(WSEL_CHOICE_SIZE_1_1)                                                              \
    X(WSEL_HOST_API_SIZE_1_1)                                                            \
    X(WSEL_PLUGIN_SIZE_1_1)                                                              \
    X(WSEL_OUTCOME_SIZE_1_1)                                                             \
    X(WSEL_CHILD_HAS_SCORE)                                                              \
    X(WSEL_CHILD_STATELESS)                                                              \
    X(WSEL_CHILD_ANSWERED)                                                               \
    X(WSEL_CHILD_FALLBACK)                                                               \
    X(WSEL_CHILD_MAX_DEPTH)                                                              \
    X(WSEL_PARAM_JSON)                                                                   \
    X(WSEL_REASON_NONE)                                                                  \
    X(WSEL_REASON_CHEAPEST)                                                              \
    X(WSEL_REASON_SAMPLED)                                                               \
    X(WSEL_REASON_STICKY)                                                                \
    X(WSEL_REASON_SPILLED)                                                               \
    X(WSEL_REASON_HASHED)                                                                \
    X(WSEL_REASON_RANDOM)                                                                \
    X(WSEL_REASON_SAMPLED_BEST)                                                          \
    X(WSEL_REASON_ROTATION)                                                              \
    X(WSEL_REASON_ALL_BUSY)                                                              \
    X(WSEL_REASON_GROUP)                                                                 \
    X(WSEL_REASON_PLUGIN)                                                                \
    X(WSEL_CHOICE_SCORED)                                                                \
    X(WSEL_OUTCOME_FAILED)

/* One measured fact: a field's offset and size, a struct's size (offset 0),
 * or a constant's value (in `value`). */
typedef struct abi_fact {
    const char *name;
    uint64_t offset;
    uint64_t size;
    int64_t value;
    int growable;
} abi_fact;

/* The facts of one header, in list order: fields, then structs, then
 * constants, then error codes. Static storage; never NULL. */
typedef struct abi_facts {
    const abi_fact *fields;
    size_t num_fields;
    const abi_fact *structs;
    size_t num_structs;
    const abi_fact *constants;
    size_t num_constants;
    const abi_fact *errors;
    size_t num_errors;
    int64_t abi_minor;
    const char *entry_symbol;
} abi_facts;

/* Compare `now` with `old` fact by fact: same names in the same order,
 * same offsets and values, same sizes unless a growable struct grew. Prints
 * each mismatch naming the fact; returns how many there were. */
int abi_count_mismatches(const char *what, const abi_fact *old, size_t num_old,
                         const abi_fact *now, size_t num_now);

/* Facts measured against tests/abi/v1.0/wsel.h (layout_v1_0.c). */
const abi_facts *abi_facts_v1_0(void);
/* Facts measured against abi/wsel.h (layout_current.c). */
const abi_facts *abi_facts_current(void);
/* The v1.0 lists followed by the v1.1 ones, measured against
 * tests/abi/v1.1/wsel.h (layout_v1_1.c) and against abi/wsel.h
 * (layout_current.c). */
const abi_facts *abi_facts_v1_1(void);
const abi_facts *abi_facts_current_v1_1(void);

/* The body of both: expands the lists against whichever wsel.h was
 * included before. */
#define ABI_FACT_FIELD_(type, field)                                                     \
    {#type "." #field, offsetof(type, field), sizeof(((type *)0)->field), 0, 0},
#define ABI_FACT_STRUCT_(type, growable)                                                 \
    {"sizeof(" #type ")", 0, sizeof(type), 0, growable},
#define ABI_FACT_CONSTANT_(name)          {#name, 0, 0, (int64_t)(name), 0},
#define ABI_FACT_ERROR_(name, value, msg) {"WSEL_" #name, 0, 0, (int64_t)(value), 0},
#define ABI_DEFINE_FACTS_(function)                                                      \
    const abi_facts *function(void)                                                      \
    {                                                                                    \
        static const abi_fact fields[] = {ABI_V1_0_FIELDS(ABI_FACT_FIELD_)};             \
        static const abi_fact structs[] = {ABI_V1_0_STRUCTS(ABI_FACT_STRUCT_)};          \
        static const abi_fact constants[] = {ABI_V1_0_CONSTANTS(ABI_FACT_CONSTANT_)};    \
        static const abi_fact errors[] = {WSEL_ERRNO_MAP(ABI_FACT_ERROR_)};              \
        static const abi_facts facts = {                                                 \
            fields,         sizeof(fields) / sizeof(fields[0]),                          \
            structs,        sizeof(structs) / sizeof(structs[0]),                        \
            constants,      sizeof(constants) / sizeof(constants[0]),                    \
            errors,         sizeof(errors) / sizeof(errors[0]),                          \
            WSEL_ABI_MINOR, WSEL_PLUGIN_ENTRY_SYMBOL};                                   \
        return &facts;                                                                   \
    }

/* The same for the v1.1 lists: every v1.0 fact, then 1.1's additions. */
#define ABI_DEFINE_FACTS_V1_1_(function)                                                 \
    const abi_facts *function(void)                                                      \
    {                                                                                    \
        static const abi_fact fields[] = {ABI_V1_0_FIELDS(ABI_FACT_FIELD_)               \
                                              ABI_V1_1_FIELDS(ABI_FACT_FIELD_)};         \
        static const abi_fact structs[] = {ABI_V1_0_STRUCTS(ABI_FACT_STRUCT_)            \
                                               ABI_V1_1_STRUCTS(ABI_FACT_STRUCT_)};      \
        static const abi_fact constants[] = {ABI_V1_0_CONSTANTS(                         \
            ABI_FACT_CONSTANT_) ABI_V1_1_CONSTANTS(ABI_FACT_CONSTANT_)};                 \
        static const abi_fact errors[] = {WSEL_ERRNO_MAP(ABI_FACT_ERROR_)};              \
        static const abi_facts facts = {                                                 \
            fields,         sizeof(fields) / sizeof(fields[0]),                          \
            structs,        sizeof(structs) / sizeof(structs[0]),                        \
            constants,      sizeof(constants) / sizeof(constants[0]),                    \
            errors,         sizeof(errors) / sizeof(errors[0]),                          \
            WSEL_ABI_MINOR, WSEL_PLUGIN_ENTRY_SYMBOL};                                   \
        return &facts;                                                                   \
    }

#endif
