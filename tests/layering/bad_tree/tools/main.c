// SPDX-License-Identifier: Apache-2.0
/* The command reaching a private host header. */
#include "internal.h"
