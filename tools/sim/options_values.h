// SPDX-License-Identifier: Apache-2.0
/*
 * options_values.h -- value parsers behind options.c (not public). Each
 * returns 1/0 (numbers: parsed or not) or 0/2 (lists: ok or bad usage with
 * a message naming the option in err); outputs are written only on
 * success. Not thread-safe.
 */
#ifndef WSEL_SIM_OPTIONS_VALUES_H
#define WSEL_SIM_OPTIONS_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* A non-negative decimal integer. */
int sim_parse_u64(const char *s, uint64_t *out);
/* A finite number >= 0. */
int sim_parse_double(const char *s, double *out);
/* "N" or "N,N,...": DP sizes 1..SIM_MAX_RANKS into o->cluster.dp. */
int sim_parse_dp(sim_options *o, const char *s, uint32_t *count, char *err,
                 size_t err_size);
/* "SECONDS:NAME|PATH", appended to o->switches (time order, at most
 * SIM_MAX_PHASES - 1). */
int sim_parse_switch(sim_options *o, const char *s, char *err, size_t err_size);

#endif
