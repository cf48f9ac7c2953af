// SPDX-License-Identifier: Apache-2.0
/* A plugin reaching the host. */
#include <wsel_host.h>
