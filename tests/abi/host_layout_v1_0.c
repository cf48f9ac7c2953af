// SPDX-License-Identifier: Apache-2.0
/* host_layout_v1_0.c -- the libwsel-host 1.0 facts, on the frozen header. */
#include "v1.0/wsel_host.h"

#include "host_layout_fields.h"

HOST_DEFINE_FACTS_(host_facts_v1_0)
