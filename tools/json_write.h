// SPDX-License-Identifier: Apache-2.0
/*
 * json_write.h -- the one JSON string writer behind every `--json` output
 * (wsel info, validate and sim).
 */
#ifndef WSEL_TOOLS_JSON_WRITE_H
#define WSEL_TOOLS_JSON_WRITE_H

#include <stdio.h>

/* Write `s` as a JSON string literal, quotes included: '"' and '\' are
 * backslash-escaped, control characters written as \u00XX, other bytes
 * (UTF-8) as they are. NULL writes "". */
void wsel_json_write_string(FILE *out, const char *s);

#endif
