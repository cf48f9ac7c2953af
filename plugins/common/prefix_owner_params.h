// SPDX-License-Identifier: Apache-2.0
/*
 * prefix_owner_params.h -- the parameters the prefix-owner policies
 * (hysteresis, adaptive) share: the dead band on cost, the temperature of
 * a fresh choice and the size of the owner table. Each macro is a
 * wsel_param_def initialiser for the plugin's own table, so a name, doc or
 * range is written once.
 */
#ifndef WSEL_PLUGINS_PREFIX_OWNER_PARAMS_H
#define WSEL_PLUGINS_PREFIX_OWNER_PARAMS_H

#include <math.h>

#include "wsel.h"

#define PREFIX_OWNER_PARAM_REL_MARGIN                                                    \
    {                                                                                    \
        .name = "rel_margin",                                                            \
        .doc = "dead band: keep the owner while cost <= best * (1 + rel_margin) + "      \
               "abs_margin",                                                             \
        .type = WSEL_PARAM_DOUBLE, .default_value = 1.0, .min_value = 0.0,               \
        .max_value = 100.0,                                                              \
    }

#define PREFIX_OWNER_PARAM_ABS_MARGIN                                                    \
    {                                                                                    \
        .name = "abs_margin",                                                            \
        .doc = "dead band: absolute slack, in cost units (blocks)",                      \
        .type = WSEL_PARAM_DOUBLE, .default_value = 64.0, .min_value = 0.0,              \
        .max_value = 1e9,                                                                \
    }

/* The dead band's width around the best candidate cost: an owner whose
 * cost is at most best + this stays (with the parameters above). */
static inline double prefix_owner_band(double rel_margin, double abs_margin, double best)
{
    return rel_margin * fabs(best) + abs_margin;
}

/* Applied through wsel_request_temperature (abi/wsel.h). */
#define PREFIX_OWNER_PARAM_TEMPERATURE                                                   \
    {                                                                                    \
        .name = "temperature",                                                           \
        .doc = "softmax temperature for fresh choices; a request's temperature "         \
               "override (0 included) or non-zero temperature wins",                     \
        .type = WSEL_PARAM_DOUBLE, .default_value = 0.0, .min_value = 0.0,               \
        .max_value = 100.0,                                                              \
    }

/* The sticky_table's capacity (sticky_table_init). */
#define PREFIX_OWNER_PARAM_CAPACITY                                                      \
    {                                                                                    \
        .name = "capacity",                                                              \
        .doc = "prefix blocks remembered (rounded up to a power of two; 8 bytes "        \
               "each); older blocks are overwritten",                                    \
        .type = WSEL_PARAM_INT, .default_value = 262144.0, .min_value = 1.0,             \
        .max_value = 16777216.0,                                                         \
    }

#endif
