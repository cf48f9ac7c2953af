// SPDX-License-Identifier: Apache-2.0
/*
 * commands.h -- the subcommands of `wsel`, one file each (cmd_NAME.c).
 *
 * Each takes the arguments after the subcommand name (argv[0] is the
 * subcommand itself) and returns the process exit code: 0 success,
 * 1 failure, 2 bad usage. `--help` prints usage to stdout and returns 0.
 */
#ifndef WSEL_TOOLS_COMMANDS_H
#define WSEL_TOOLS_COMMANDS_H

#define WSEL_EXIT_OK      0
#define WSEL_EXIT_FAILURE 1
#define WSEL_EXIT_USAGE   2

int wsel_cmd_info(int argc, char **argv);
int wsel_cmd_sim(int argc, char **argv);
int wsel_cmd_eval(int argc, char **argv);
int wsel_cmd_validate(int argc, char **argv);
int wsel_cmd_bench(int argc, char **argv);
/* tools/replay/, tools/cluster/: only with WSEL_REALTIME (HTTP, ZeroMQ). */
int wsel_cmd_replay(int argc, char **argv);
int wsel_cmd_cluster(int argc, char **argv);

#endif
