/* run.h - the command line of `tilec run`, parsed without running
 * anything: run.c uses these functions, and so does the fuzz target
 * tests/fuzz/fuzz_run_args.c, which feeds them arbitrary argument vectors.
 * Nothing here prints, reads a file or allocates a buffer. */
#ifndef TILE_RUN_H
#define TILE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

/* Most kernel parameters `tilec run` handles (and so --arg options). */
#define RUN_MAX_PARAMS 64

/* Dimensions of a buffer shape ("AxBxCxD"): the largest descriptor rank. */
#define RUN_MAX_RANK 4

/* Most elements of one buffer (2^40): far above what a host holds, and
 * small enough that the element count times an element size (at most 8
 * bytes) and every row-major stride fit in 64 bits. */
#define RUN_MAX_BUFFER_ELEMS ((int64_t)1 << 40)

/* Wall-clock limit of one run unless --timeout says otherwise: long enough
 * for every kernel of the test suites on a small machine, short enough
 * that a runaway loop is reported within a minute. */
#define RUN_DEFAULT_TIMEOUT_SECONDS 60.0

/* Longest usage message run_parse_options writes. */
#define RUN_MESSAGE_BYTES 512

typedef struct RunArg {
  const char *name; /* malloc'd */
  const char *spec; /* points into argv */
} RunArg;

/* Most --config options of `tilec tune` (TILE_JIT_TUNE_MAX_CONFIGS of
 * runtime/jit/tile_jit.h, which this header does not include). */
#define RUN_MAX_CONFIGS 64

/* Most timed launches per candidate `tilec tune` takes (--warmup, --reps):
 * a thousand launches of a second-long kernel are a quarter of an hour. */
#define RUN_MAX_TUNE_LAUNCHES 1000

typedef struct RunOptions {
  const char *file, *kernel, *dump;
  int64_t grid[3];
  /* `tilec tune` (set before parsing): --grid is kept as text, an
   * expression per axis (run_eval_grid), and the tuning options are
   * accepted; --dump, --max-steps and --timeout are not. */
  bool tune;
  const char *grid_text;
  const char *configs[RUN_MAX_CONFIGS]; /* --config, pointing into argv */
  int nconfigs;
  const char *key, *key_args, *cache_dir; /* key_args: "m,n,k" */
  bool retune, time_defaults;
  int warmup, reps; /* 0: the tuner's defaults */
  uint64_t seed, max_steps; /* max_steps 0: the interpreter's default */
  double timeout_seconds;   /* 0: no time limit */
  bool no_opt;
  tc_define defines[CLI_MAX_DEFINES]; /* names malloc'd */
  int ndefines;
  RunArg args[RUN_MAX_PARAMS];
  int nargs;
  const char *include_dirs[CLI_MAX_INCLUDE_DIRS]; /* -I */
  int ninclude_dirs;
} RunOptions;

/* What run_parse_options found. */
typedef enum RunParse {
  RUN_PARSE_OK,    /* the options are complete: run */
  RUN_PARSE_HELP,  /* -h or --help: print the usage, exit 0 */
  RUN_PARSE_USAGE, /* a usage error, described in msg: exit 2 */
} RunParse;

/* Parses argv[1..argc-1] (argv[0] is "run") into *o, which must be zeroed.
 * On RUN_PARSE_USAGE, msg (msg_size > 0) holds the message without the
 * "tilec run: " prefix. Free *o with run_options_free whatever the result. */
RunParse run_parse_options(int argc, char **argv, RunOptions *o, char *msg, size_t msg_size);
void run_options_free(RunOptions *o);

/* The text of the --arg named name, or NULL. */
const char *run_find_arg(const RunOptions *o, const char *name);

/* The usage texts of `tilec run --help` and `tilec tune --help`. */
const char *run_usage_text(void);
const char *tune_usage_text(void);

/* Looks up a name of a --grid expression (len bytes at name, not
 * NUL-terminated) for `tilec tune`; false if there is no such name. */
typedef bool (*RunGridLookup)(void *user, const char *name, size_t len, int64_t *value);

/* Evaluates `tilec tune`'s --grid text: one to three expressions separated
 * by commas, each of decimal integers, names (lookup), + - * / % (integer
 * division, rounding toward zero), unary -, parentheses, and cdiv(a, b),
 * min(a, b), max(a, b). With check_only, only the text and its names are
 * checked (the values may be placeholders): no division by zero, overflow
 * or size out of range is reported. Otherwise each size must be 1 to
 * 2^31 - 1. On failure, writes why to msg (msg_size > 0). */
bool run_eval_grid(const char *text, RunGridLookup lookup, void *user, bool check_only, int64_t grid[3], char *msg,
                   size_t msg_size);

/* Longest SHAPE text of file:SHAPE:PATH looked at: four sizes of 2^40
 * (13 digits each) and their separators. */
#define RUN_SHAPE_TEXT_BYTES 64

/* A buffer argument: "rand:SHAPE", "zeros:SHAPE", "range:SHAPE",
 * "file:PATH" or "file:SHAPE:PATH" (when the text before the second ':'
 * is a shape), with SHAPE "N" or "AxB..." (at most RUN_MAX_RANK sizes,
 * each at least 1, RUN_MAX_BUFFER_ELEMS elements in all). */
typedef enum RunFill { RUN_FILL_RAND, RUN_FILL_ZEROS, RUN_FILL_RANGE, RUN_FILL_FILE } RunFill;

typedef struct RunBufferSpec {
  RunFill fill;
  const char *path; /* RUN_FILL_FILE: points into the spec */
  int rank;         /* 0 for a file without a shape (its size decides) */
  int64_t shape[RUN_MAX_RANK];
  int64_t n; /* elements */
} RunBufferSpec;

bool run_parse_buffer_spec(const char *spec, RunBufferSpec *out);

/* A buffer made from its --arg text, in host memory (data malloc'd). */
typedef struct RunBuffer {
  void *data;
  size_t bytes;
  int64_t n;
  int64_t shape[RUN_MAX_RANK];
  int rank;
} RunBuffer;

/* Makes parameter p's buffer from spec (rand: draws from *rng). False on a
 * malformed spec, when memory runs out or when a file cannot be read
 * (printed), or, with *size_error set, when a file does not hold its
 * shape's elements (printed). */
bool run_fill_buffer(const char *spec, const tc_param *p, uint64_t *rng, RunBuffer *b, bool *size_error);

/* The value of a scalar parameter p (TC_PARAM_INT, _FLOAT or _BOOL) from
 * its --arg text, into a->i or a->f; false if the text is not a number of
 * p's type (see spec/diagnostics.md). */
bool run_parse_scalar(const char *spec, const tc_param *p, tc_arg *a);

/* Row-major strides, in elements, of a contiguous array of the given shape
 * (sizes at least 1); false if one does not fit in 64 bits. */
bool run_row_major_strides(const int64_t *shape, int rank, int64_t *strides);

#endif
