// SPDX-License-Identifier: Apache-2.0
/*
 * fixture_v1_0.c -- a plugin built against the frozen v1.0 header, to prove
 * that today's host still loads and runs what was built for 1.0.
 *
 * Policy: Dynamo's softmax_sample over the default cost, through the host
 * table, with its own `temperature` parameter (0 = argmin). create() checks
 * the host table the way a 1.0 plugin must: major 1, at least the 1.0 size.
 */
#include <stdlib.h>

#include "v1.0/wsel.h"

#if WSEL_ABI_MAJOR != 1 || WSEL_ABI_MINOR != 0
#error "the fixture must be built against the frozen v1.0 header"
#endif

struct fixture {
    const wsel_host_api *host;
    double temperature;
};

static const wsel_param_def fixture_params[] = {
    {"temperature", "softmax temperature over the default cost; 0 = argmin",
     WSEL_PARAM_DOUBLE, 0, 0.0, 0.0, 100.0, NULL},
};

static int32_t fixture_create(const wsel_host_api *host, const double *params,
                              uint32_t num_params, void **out_instance)
{
    if (host == NULL || host->abi_major != WSEL_ABI_MAJOR ||
        host->struct_size < WSEL_HOST_API_SIZE_1_0 || num_params != 1)
        return WSEL_EABI;
    struct fixture *self = malloc(sizeof(*self));
    if (self == NULL)
        return WSEL_ENOMEM;
    self->host = host;
    self->temperature = params[0];
    host->log(host, WSEL_LOG_DEBUG, "v1_0_fixture: created");
    *out_instance = self;
    return 0;
}

static void fixture_destroy(void *instance)
{
    free(instance);
}

static int32_t fixture_select(void *instance, const wsel_request *request,
                              const wsel_table *table, wsel_choice *choice)
{
    const struct fixture *self = instance;
    uint32_t row;
    int32_t rc = self->host->softmax_sample(table->cost, table->flags, table->num_rows,
                                            WSEL_ROW_EXCLUDED, self->temperature,
                                            request->uniform, &row);
    if (rc != 0)
        return rc;
    choice->row = row;
    return 0;
}

WSEL_PLUGIN_EXPORT const wsel_plugin wsel_plugin_entry = {
    WSEL_ABI_MAJOR,
    WSEL_ABI_MINOR,
    sizeof(wsel_plugin),
    WSEL_CAP_CONCURRENT_SELECT | WSEL_CAP_STATELESS,
    "v1_0_fixture",
    "1.0.0",
    "softmax over the default cost, built against the frozen v1.0 header",
    fixture_params,
    sizeof(fixture_params) / sizeof(fixture_params[0]),
    sizeof(wsel_param_def),
    fixture_create,
    fixture_destroy,
    fixture_select,
    NULL,
    NULL,
};
