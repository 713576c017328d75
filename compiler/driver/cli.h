/* cli.h - pieces shared by the tilec command-line driver's files
 * (main.c: options and compiling; run.c: `tilec run`). */
#ifndef TILE_CLI_H
#define TILE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../util/diag.h" /* diag_quote: arguments are quoted in messages, cut when long */
#include "tilec.h"

/* Exit codes of tilec. */
enum { EXIT_OK = 0, EXIT_SOURCE_ERROR = 1, EXIT_USAGE = 2, EXIT_NO_GPU = 3 /* tilec tune */ };

/* Most -D and --arg options on one command line. */
#define CLI_MAX_DEFINES 256

/* Most -I options on one command line. */
#define CLI_MAX_INCLUDE_DIRS 64

/* Where imports are looked for after -I: the standard library's parent
 * directories (import "std/softmax.tile"): the installed one found from
 * tilec's own place (TILEC_IMPORT_DIR_FROM_BIN next to the executable:
 * an installed tree that was moved), the one the prefix names, and the one
 * in the source tree tilec was built from (meson defines all three). */
#define CLI_DEFAULT_INCLUDE_DIRS 3

/* Longest path of the directory found from tilec's own place. */
#define CLI_EXE_DIR_BYTES 4096

/* The include directories of a compilation: the user's (-I, in order),
 * then the defaults that exist (exe_dir, of CLI_EXE_DIR_BYTES, holds the
 * one found from the executable). dirs has room for CLI_MAX_INCLUDE_DIRS
 * + CLI_DEFAULT_INCLUDE_DIRS; returns the count. */
int cli_include_dirs(const char *const *user, int nuser, const char **dirs, char *exe_dir);

/* Largest file `tilec run` reads as a file: buffer: 1 GiB, a quarter of a
 * billion f32 elements, more than a run within the interpreter's default
 * step limit (10^9 element operations) gets through; reading stops there
 * instead of filling memory (a path like /dev/zero never ends). */
#define CLI_MAX_DATA_FILE_BYTES ((size_t)1 << 30)

/* Reads a whole file of at most max_bytes bytes (larger ones are an error,
 * found before reading them where the size is known); `what` names the
 * limit in that message ("a source file"). Returns NULL, after printing
 * why, on failure. */
char *cli_read_file_max(const char *path, size_t max_bytes, const char *what, size_t *len);
/* A source file, at most TC_MAX_SOURCE_BYTES. */
char *cli_read_source(const char *path, size_t *len);
/* A data file, at most CLI_MAX_DATA_FILE_BYTES. */
char *cli_read_file(const char *path, size_t *len);


/* The closest of known[0..n) to an unknown option a (its part before
 * any '='), for "did you mean"; NULL when none is close. buf (size bytes)
 * holds the part compared. */
const char *cli_suggest_option(const char *a, const char *const *known, int n, char *buf, size_t size);

/* Parses "-D NAME=VALUE"'s argument into d; false on a malformed one. */
bool cli_parse_define(const char *text, tc_define *d);

/* --color=WHEN: colours in diagnostics (color.c). */
typedef enum CliColor { CLI_COLOR_AUTO, CLI_COLOR_ALWAYS, CLI_COLOR_NEVER } CliColor;
/* "auto", "always" or "never"; false for anything else. */
bool cli_parse_color(const char *when, CliColor *out);
/* auto: f is a terminal, NO_COLOR is unset or empty and TERM is not
 * "dumb". */
bool cli_color_wanted(CliColor when, FILE *f);
/* Prints tilec's diagnostics text, coloured when color is true. */
void cli_print_diagnostics(FILE *f, const char *text, bool color);

/* `tilec run ...`: argv[0] is "run". Returns the exit code. */
int cli_run(int argc, char **argv);

/* `tilec tune ...`: argv[0] is "tune" (tune.c; tune_none.c in a build
 * without the GPU back end). Returns the exit code. */
int cli_tune(int argc, char **argv);

#endif
