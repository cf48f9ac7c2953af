// SPDX-License-Identifier: Apache-2.0
/* layout_v1_0.c -- the v1.0 facts, measured on the frozen v1.0 header. */
#include "v1.0/wsel.h"

#include "layout_fields.h"

#if WSEL_ABI_MAJOR != 1 || WSEL_ABI_MINOR != 0
#error "tests/abi/v1.0/wsel.h must stay the v1.0 header"
#endif

ABI_DEFINE_FACTS_(abi_facts_v1_0)
