// SPDX-License-Identifier: Apache-2.0
/*
 * host_layout_fields.h -- every struct a caller of libwsel-host.so.1
 * allocates, every field and constant of wsel_host.h 1.0, listed once.
 * host_layout_v1_0.c expands the lists against the frozen 1.0 header
 * (v1.0/wsel_host.h) and host_layout_current.c against
 * host/include/wsel_host.h; test_host_layout.c compares the two with the
 * same rules as the plugin ABI (layout_fields.h).
 *
 * Only ever append: these lists name what SONAME 1 promised.
 */
#ifndef WSEL_TESTS_ABI_HOST_LAYOUT_FIELDS_H
#define WSEL_TESTS_ABI_HOST_LAYOUT_FIELDS_H

#include "layout_fields.h"

#define HOST_V1_0_FIELDS(X)                                                              \
    X(wsel_rank_state, worker_id)                                                        \
    X(wsel_rank_state, dp_rank)                                                          \
    X(wsel_rank_state, overlap_blocks)                                                   \
    X(wsel_rank_state, active_prefill_tokens)                                            \
    X(wsel_rank_state, active_blocks)                                                    \
    X(wsel_rank_state, kv_capacity_blocks)                                               \
    X(wsel_rank_state, active_requests)                                                  \
    X(wsel_rank_state, flags)                                                            \
    X(wsel_rank_state, reserved)                                                         \
    X(wsel_table_buf, table)                                                             \
    X(wsel_table_buf, capacity_rows)                                                     \
    X(wsel_table_buf, reserved0)                                                         \
    X(wsel_table_buf, storage)                                                           \
    X(wsel_trust_options, struct_size)                                                   \
    X(wsel_trust_options, reserved0)                                                     \
    X(wsel_trust_options, allowed_dirs)                                                  \
    X(wsel_host_options, struct_size)                                                    \
    X(wsel_host_options, max_consecutive_failures)                                       \
    X(wsel_host_options, seed)                                                           \
    X(wsel_host_options, log)                                                            \
    X(wsel_host_options, log_user)                                                       \
    X(wsel_host_options, trust)                                                          \
    X(wsel_host_options, isolated)                                                       \
    X(wsel_host_options, select_deadline_us)                                             \
    X(wsel_host_options, restart_backoff_us)                                             \
    X(wsel_host_options, helper_as_limit_mb)                                             \
    X(wsel_host_options, helper_cpu_limit_s)                                             \
    X(wsel_host_options, reserved1)                                                      \
    X(wsel_host_options, sandbox_path)                                                   \
    X(wsel_host_counters, selects)                                                       \
    X(wsel_host_counters, plugin_answers)                                                \
    X(wsel_host_counters, fallbacks)                                                     \
    X(wsel_host_counters, fallback_by_reason)                                            \
    X(wsel_host_counters, switches)                                                      \
    X(wsel_host_counters, failed_switches)                                               \
    X(wsel_host_counters, ejections)

/* X(struct type, growable): the growable ones carry struct_size or are
 * written through a size the caller passes (wsel_host_read_counters). */
#define HOST_V1_0_STRUCTS(X)                                                             \
    X(wsel_rank_state, 0)                                                                \
    X(wsel_table_buf, 0)                                                                 \
    X(wsel_trust_options, 1)                                                             \
    X(wsel_host_options, 1)                                                              \
    X(wsel_host_counters, 1)

#define HOST_V1_0_CONSTANTS(X)                                                           \
    X(WSEL_ANSWER_PLUGIN)                                                                \
    X(WSEL_ANSWER_FALLBACK)                                                              \
    X(WSEL_FALLBACK_NO_POLICY)                                                           \
    X(WSEL_FALLBACK_ERROR)                                                               \
    X(WSEL_FALLBACK_OUT_OF_RANGE)                                                        \
    X(WSEL_FALLBACK_EXCLUDED)                                                            \
    X(WSEL_FALLBACK_EJECTED)                                                             \
    X(WSEL_FALLBACK_CRASHED)                                                             \
    X(WSEL_FALLBACK_TIMEOUT)                                                             \
    X(WSEL_FALLBACK_REASONS)

/* Facts of v1.0/wsel_host.h and of host/include/wsel_host.h (fields,
 * structs, constants; no error codes or entry symbol). */
const abi_facts *host_facts_v1_0(void);
const abi_facts *host_facts_current(void);

#define HOST_DEFINE_FACTS_(function)                                                     \
    const abi_facts *function(void)                                                      \
    {                                                                                    \
        static const abi_fact fields[] = {HOST_V1_0_FIELDS(ABI_FACT_FIELD_)};            \
        static const abi_fact structs[] = {HOST_V1_0_STRUCTS(ABI_FACT_STRUCT_)};         \
        static const abi_fact constants[] = {HOST_V1_0_CONSTANTS(ABI_FACT_CONSTANT_)};   \
        static const abi_facts facts = {                                                 \
            fields,    sizeof(fields) / sizeof(fields[0]),                               \
            structs,   sizeof(structs) / sizeof(structs[0]),                             \
            constants, sizeof(constants) / sizeof(constants[0]),                         \
            NULL,      0,                                                                \
            0,         NULL};                                                            \
        return &facts;                                                                   \
    }

#endif
