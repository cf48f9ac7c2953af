// SPDX-License-Identifier: Apache-2.0
/*
 * metric_table.c -- sim_metric_table from SIM_METRIC_TABLE: a getter per
 * row, then the rows.
 */
#include "metric_table.h"

#define SIM_METRIC_GETTER(id, key, title, value, ...)                                    \
    static double get_##id(const sim_metrics *m)                                         \
    {                                                                                    \
        return (double)(value);                                                          \
    }
SIM_METRIC_TABLE(SIM_METRIC_GETTER)
#undef SIM_METRIC_GETTER

#define SIM_METRIC_ROW(id, key, title, value, scale, fmt, better, object, name, type,    \
                       flags)                                                            \
    {key, title, get_##id, scale, fmt, better, object, name, type, flags},
const sim_metric_def sim_metric_table[SIM_NUM_METRICS] = {
    SIM_METRIC_TABLE(SIM_METRIC_ROW)};
#undef SIM_METRIC_ROW
