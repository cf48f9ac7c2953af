/* cmd_bench.c -- `wsel bench` (placeholder until implemented). */
#include <stdio.h>

#include "commands.h"

int wsel_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsel bench: not implemented yet\n");
    return WSEL_EXIT_FAILURE;
}
