// SPDX-License-Identifier: Apache-2.0
/* host_layout_current.c -- the same facts, measured on wsel_host.h now. */
#include "wsel_host.h"

#include "host_layout_fields.h"

HOST_DEFINE_FACTS_(host_facts_current)
