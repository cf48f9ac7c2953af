// SPDX-License-Identifier: Apache-2.0
/* header_alone.c -- abi/wsel.h compiles with nothing before it (C99/C11). */
#include "wsel.h"

/* Touch the main types so a broken declaration cannot hide. */
int32_t header_alone_row(const wsel_table *t, const wsel_request *r, wsel_choice *c,
                         const wsel_host_api *h, const wsel_plugin *p);
int32_t header_alone_row(const wsel_table *t, const wsel_request *r, wsel_choice *c,
                         const wsel_host_api *h, const wsel_plugin *p)
{
    (void)h;
    (void)p;
    c->row = t->num_rows > 0 ? 0u : (uint32_t)r->isl_tokens;
    return WSEL_OK;
}
