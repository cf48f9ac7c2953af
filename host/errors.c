// SPDX-License-Identifier: Apache-2.0
/*
 * errors.c -- names and messages of the WSEL_E* codes, from the one table in
 * wsel.h (WSEL_ERRNO_MAP), and of the fallback reasons; and the one helper
 * that writes a message into a caller's error buffer.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

const char *wsel_strerror(int32_t code)
{
    switch (code) {
#define WSEL_STRERROR_CASE_(name, value, msg)                                            \
    case value:                                                                          \
        return msg;
        WSEL_ERRNO_MAP(WSEL_STRERROR_CASE_)
#undef WSEL_STRERROR_CASE_
    default:
        return "unknown error";
    }
}

const char *wsel_errname(int32_t code)
{
    switch (code) {
#define WSEL_ERRNAME_CASE_(name, value, msg)                                             \
    case value:                                                                          \
        return "WSEL_" #name;
        WSEL_ERRNO_MAP(WSEL_ERRNAME_CASE_)
#undef WSEL_ERRNAME_CASE_
    default:
        return "WSEL_E?";
    }
}

const char *wsel_fallback_reason_name(uint32_t reason)
{
    static const char *const names[WSEL_FALLBACK_REASONS_MAX] = {
        [WSEL_FALLBACK_NO_POLICY] = "no_policy",
        [WSEL_FALLBACK_ERROR] = "error",
        [WSEL_FALLBACK_OUT_OF_RANGE] = "out_of_range",
        [WSEL_FALLBACK_EXCLUDED] = "excluded",
        [WSEL_FALLBACK_EJECTED] = "ejected",
        [WSEL_FALLBACK_CRASHED] = "crashed",
        [WSEL_FALLBACK_TIMEOUT] = "timeout",
        [WSEL_FALLBACK_CHOICE_OVERRUN] = "choice_overrun",
        [WSEL_FALLBACK_BUSY] = "busy",
        [WSEL_FALLBACK_TABLE_WRITTEN] = "table_written",
        [WSEL_FALLBACK_HOST_LIMIT] = "host_limit",
        [WSEL_FALLBACK_BAD_SCORE] = "bad_score",
    };
    if (reason >= WSEL_FALLBACK_REASONS_MAX || names[reason] == NULL)
        return "unknown";
    return names[reason];
}

void wsel__set_error(char *err, size_t err_size, const char *fmt, ...)
{
    if (err == NULL || err_size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}
