// SPDX-License-Identifier: Apache-2.0
/*
 * options_values.c -- turn option values (numbers, DP size lists,
 * SECONDS:NAME switches) into fields of sim_options.
 */
#include "options_values.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Latest switch time: 1e9 s = 1e18 ns, inside the int64 nanosecond clock. */
#define SIM_MAX_SWITCH_S 1e9

int sim_parse_u64(const char *s, uint64_t *out)
{
    /* Digits only: strtoull would skip leading space and take a sign. */
    if (!s || *s < '0' || *s > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return 0;
    *out = v;
    return 1;
}

int sim_parse_double(const char *s, double *out)
{
    if (!s || !((*s >= '0' && *s <= '9') || *s == '.'))
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v) || v < 0)
        return 0;
    *out = v;
    return 1;
}

int sim_parse_dp(sim_options *o, const char *s, uint32_t *count, char *err,
                 size_t err_size)
{
    uint32_t n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || errno || v == 0 || v > SIM_MAX_RANKS || (*end && *end != ',') ||
            n == SIM_MAX_RANKS) {
            snprintf(err, err_size, "--dp '%s': expected sizes 1..%d separated by commas",
                     s, SIM_MAX_RANKS);
            return 2;
        }
        o->cluster.dp[n++] = (uint32_t)v;
        p = *end ? end + 1 : end;
    }
    *count = n;
    return 0;
}

int sim_parse_switch(sim_options *o, const char *s, char *err, size_t err_size)
{
    const char *colon = strchr(s, ':');
    char num[64];
    double at;
    if (!colon || (size_t)(colon - s) >= sizeof(num) || !colon[1]) {
        snprintf(err, err_size, "--switch-at '%s': expected SECONDS:NAME|PATH", s);
        return 2;
    }
    memcpy(num, s, (size_t)(colon - s));
    num[colon - s] = '\0';
    if (!sim_parse_double(num, &at)) {
        snprintf(err, err_size, "--switch-at '%s': '%s' is not a number of seconds", s,
                 num);
        return 2;
    }
    if (at > SIM_MAX_SWITCH_S) {
        snprintf(err, err_size, "--switch-at '%s': %g s is out of range [0, %g]", s, at,
                 SIM_MAX_SWITCH_S);
        return 2;
    }
    if (o->num_switches == SIM_MAX_PHASES - 1) {
        snprintf(err, err_size, "--switch-at: at most %d switches", SIM_MAX_PHASES - 1);
        return 2;
    }
    if (o->num_switches > 0 && at < o->switches[o->num_switches - 1].at_s) {
        snprintf(err, err_size, "--switch-at '%s': switches must be in time order", s);
        return 2;
    }
    o->switches[o->num_switches++] = (sim_switch_spec){at, colon + 1, NULL};
    return 0;
}
