/* cmd_validate.c -- `wsel validate` (placeholder until implemented). */
#include <stdio.h>

#include "commands.h"

int wsel_cmd_validate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsel validate: not implemented yet\n");
    return WSEL_EXIT_FAILURE;
}
