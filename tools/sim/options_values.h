// SPDX-License-Identifier: Apache-2.0
/*
 * options_values.h -- the values of options.c that need more than a store
 * (not public): cli_option callbacks, 0 or CLI_USAGE after cli_fail;
 * outputs are written only on success. Not thread-safe.
 */
#ifndef WSEL_SIM_OPTIONS_VALUES_H
#define WSEL_SIM_OPTIONS_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* --switch-at "SECONDS:NAME|PATH", appended to o->switches (time order, at
 * most SIM_MAX_PHASES - 1). */
int sim_set_switch(void *o, const cli_value *v);
/* --plugin NAME|PATH, appended to o->plugins. */
int sim_set_plugin(void *o, const cli_value *v);
/* --config JSON of the --plugin or --switch-at just before. */
int sim_set_config(void *o, const cli_value *v);
/* --workload NAME. */
int sim_set_workload(void *o, const cli_value *v);

#endif
