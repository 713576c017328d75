/* cli.h - pieces shared by the tilec command-line driver's files
 * (main.c: options and compiling; run.c: `tilec run`). */
#ifndef TILE_CLI_H
#define TILE_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "tilec.h"

/* Exit codes of tilec. */
enum { EXIT_OK = 0, EXIT_SOURCE_ERROR = 1, EXIT_USAGE = 2 };

/* Most -D and --arg options on one command line. */
#define CLI_MAX_DEFINES 256

/* Reads a whole file; returns NULL (after printing why) on failure. */
char *cli_read_file(const char *path, size_t *len);

/* Parses "-D NAME=VALUE"'s argument into d; false on a malformed one. */
bool cli_parse_define(const char *text, tc_define *d);

/* `tilec run ...`: argv[0] is "run". Returns the exit code. */
int cli_run(int argc, char **argv);

#endif
