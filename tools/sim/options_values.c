// SPDX-License-Identifier: Apache-2.0
/*
 * options_values.c -- turn option values that need more than a store
 * (SECONDS:NAME switches, plugins and their configurations)
 * into fields of sim_options.
 */
#include "options_values.h"

#include <string.h>

/* Latest switch time: 1e9 s = 1e18 ns, inside the int64 nanosecond clock. */
#define SIM_MAX_SWITCH_S 1e9

int sim_set_switch(void *target, const cli_value *v)
{
    sim_options *o = target;
    const char *s = v->text, *colon = strchr(s, ':');
    char num[64];
    double at;
    if (!colon || (size_t)(colon - s) >= sizeof(num) || !colon[1])
        return cli_fail(v, "expected SECONDS:NAME|PATH");
    memcpy(num, s, (size_t)(colon - s));
    num[colon - s] = '\0';
    if (!cli_parse_double(num, &at) || at < 0)
        return cli_fail(v, "'%s' is not a number of seconds", num);
    if (at > SIM_MAX_SWITCH_S)
        return cli_fail(v, "%g s is out of range [0, %g]", at, SIM_MAX_SWITCH_S);
    if (o->num_switches == SIM_MAX_PHASES - 1)
        return cli_fail(v, "at most %d switches", SIM_MAX_PHASES - 1);
    if (o->num_switches > 0 && at < o->switches[o->num_switches - 1].at_s)
        return cli_fail(v, "switches must be in time order");
    o->switches[o->num_switches++] = (sim_switch_spec){at, colon + 1, NULL};
    return CLI_OK;
}

int sim_set_plugin(void *target, const cli_value *v)
{
    sim_options *o = target;
    if (o->num_plugins == SIM_MAX_PLUGINS)
        return cli_fail(v, "at most %d plugins", SIM_MAX_PLUGINS);
    o->plugins[o->num_plugins++] = (sim_plugin_spec){v->text, NULL};
    return CLI_OK;
}

int sim_set_config(void *target, const cli_value *v)
{
    sim_options *o = target;
    /* Only whitespace means the defaults, as for the host; stored as "" so
     * the JSON report never pastes it as a value. */
    const char *val = v->text[strspn(v->text, " \t\r\n")] == '\0' ? "" : v->text;
    const char *prev = v->prev ? v->prev->name : "";
    if (strcmp(prev, "plugin") == 0 && !o->plugins[o->num_plugins - 1].config)
        o->plugins[o->num_plugins - 1].config = val;
    else if (strcmp(prev, "switch-at") == 0 && !o->switches[o->num_switches - 1].config)
        o->switches[o->num_switches - 1].config = val;
    else
        return cli_fail(v, "must follow a --plugin or --switch-at");
    return CLI_OK;
}

int sim_set_workload(void *target, const cli_value *v)
{
    sim_options *o = target;
    int k = sim_workload_kind(v->text);
    if (k < 0)
        return cli_fail(
            v, "expected %s, %s, %s or %s", sim_workload_name(SIM_WORKLOAD_SHARED_PREFIX),
            sim_workload_name(SIM_WORKLOAD_CHAT), sim_workload_name(SIM_WORKLOAD_AGENT),
            sim_workload_name(SIM_WORKLOAD_CONVERSATION));
    o->workload.kind = (uint32_t)k;
    return CLI_OK;
}
