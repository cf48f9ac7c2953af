// SPDX-License-Identifier: Apache-2.0
/*
 * json_write.c -- see json_write.h.
 */
#include "json_write.h"

void wsel_json_write_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; s != NULL && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}
