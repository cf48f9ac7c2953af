// SPDX-License-Identifier: Apache-2.0
/*
 * pipeline.h -- what the pipeline's two files share (not installed).
 */
#ifndef WSEL_PLUGIN_PIPELINE_H
#define WSEL_PLUGIN_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "wsel.h"

/* Most scorers one pipeline combines. */
#define PIPELINE_MAX_SCORERS 8u
/* Largest weight a scorer may have. */
#define PIPELINE_MAX_WEIGHT 1e6
/* Deepest nesting the config reader walks (the host's limit is 16). */
#define PIPELINE_JSON_DEPTH 32u

/* One child as configured. OWNERSHIP: `config` is the spec's (malloc'd,
 * NULL = the child's defaults); pipeline_spec_clear frees it. */
typedef struct pipeline_spec {
    char path[1024];
    double weight;
    char *config;
} pipeline_spec;

void pipeline_spec_clear(pipeline_spec *s);

/* Read the `scorers` array (text from param_json) into out[] (at most
 * PIPELINE_MAX_SCORERS) and *out_count. Returns 0, or WSEL_ECONFIG /
 * WSEL_ENOMEM after logging why (nothing to clear then). [control thread] */
int32_t pipeline_read_scorers(const wsel_host_api *host, const char *json,
                              pipeline_spec *out, uint32_t *out_count);

/* Read the `picker_plugin` object (no weight). Same returns. */
int32_t pipeline_read_picker(const wsel_host_api *host, const char *json,
                             pipeline_spec *out);

#endif
