// SPDX-License-Identifier: Apache-2.0
/* layout_current.c -- the same facts, measured on abi/wsel.h. */
#include "wsel.h"

#include "layout_fields.h"

ABI_DEFINE_FACTS_(abi_facts_current)
ABI_DEFINE_FACTS_V1_1_(abi_facts_current_v1_1)
