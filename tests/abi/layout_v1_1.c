// SPDX-License-Identifier: Apache-2.0
/* layout_v1_1.c -- the v1.1 facts, measured on the frozen v1.1 header. */
#include "v1.1/wsel.h"

#include "layout_fields.h"

#if WSEL_ABI_MAJOR != 1 || WSEL_ABI_MINOR != 1
#error "tests/abi/v1.1/wsel.h must stay the v1.1 header"
#endif

ABI_DEFINE_FACTS_V1_1_(abi_facts_v1_1)
