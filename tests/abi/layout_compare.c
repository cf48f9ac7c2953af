// SPDX-License-Identifier: Apache-2.0
/* layout_compare.c -- compare two lists of measured facts (layout_fields.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "layout_fields.h"

/* Compare two lists fact by fact; returns the number of mismatches. */
int abi_count_mismatches(const char *what, const abi_fact *old, size_t num_old,
                         const abi_fact *now, size_t num_now)
{
    int bad = 0;
    if (num_now != num_old) {
        print_error("%s: %zu in v1.0, %zu now\n", what, num_old, num_now);
        return 1;
    }
    for (size_t i = 0; i < num_old; i++) {
        if (strcmp(old[i].name, now[i].name) != 0) {
            print_error("%s %zu: '%s' in v1.0, '%s' now\n", what, i, old[i].name,
                        now[i].name);
            bad++;
            continue;
        }
        if (old[i].offset != now[i].offset) {
            print_error("%s: offset %llu in v1.0, %llu now\n", old[i].name,
                        (unsigned long long)old[i].offset,
                        (unsigned long long)now[i].offset);
            bad++;
        }
        if (old[i].value != now[i].value) {
            print_error("%s: value %lld in v1.0, %lld now\n", old[i].name,
                        (long long)old[i].value, (long long)now[i].value);
            bad++;
        }
        int grew = old[i].growable && now[i].size > old[i].size;
        if (old[i].size != now[i].size && !grew) {
            print_error("%s: size %llu in v1.0, %llu now\n", old[i].name,
                        (unsigned long long)old[i].size, (unsigned long long)now[i].size);
            bad++;
        }
    }
    return bad;
}
