/* cmd_info.c -- `wsel info` (placeholder until implemented). */
#include <stdio.h>

#include "commands.h"

int wsel_cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsel info: not implemented yet\n");
    return WSEL_EXIT_FAILURE;
}
