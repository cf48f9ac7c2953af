// SPDX-License-Identifier: Apache-2.0
/* The upward edge check_includes.py must refuse: the model reaching into the command. */
#include "report.h"
