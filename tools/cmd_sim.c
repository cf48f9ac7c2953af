/* cmd_sim.c -- `wsel sim` (placeholder until implemented). */
#include <stdio.h>

#include "commands.h"

int wsel_cmd_sim(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "wsel sim: not implemented yet\n");
    return WSEL_EXIT_FAILURE;
}
