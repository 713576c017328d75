/* fuzz_run_args.c - libFuzzer target over the command lines of `tilec run`
 * and `tilec tune` (compiler/driver/run.c, through run.h): the input is
 * split at newlines into an argument vector after "run" and parsed as
 * tilec run parses it (or, when the first byte is odd, as tilec tune
 * does), without compiling or running anything; then every --arg value is
 * read as each kind of buffer and scalar a kernel parameter can have, the
 * strides of every buffer shape are computed, and a tune --grid text is
 * evaluated (fully and check-only) with names of up to three characters
 * known. Nothing is allocated for a buffer and no file is read. Any crash,
 * sanitizer report, leak or timeout is a bug; usage errors are expected. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver/run.h"

/* Most arguments taken from one input: more than the parser's limits
 * (RUN_MAX_PARAMS --arg, CLI_MAX_DEFINES -D) can hold, so those are
 * exercised too. */
#define FUZZ_MAX_ARGV 600

/* Scalar parameters of every kind, signedness and size --arg values meet. */
static const tc_param scalar_params[] = {
    {"b", TC_PARAM_BOOL, "i1", 1, false, 0},   {"i8", TC_PARAM_INT, "i8", 1, true, 0},
    {"u8", TC_PARAM_INT, "u8", 1, false, 0},   {"i32", TC_PARAM_INT, "i32", 4, true, 0},
    {"u32", TC_PARAM_INT, "u32", 4, false, 0}, {"i64", TC_PARAM_INT, "i64", 8, true, 0},
    {"u64", TC_PARAM_INT, "u64", 8, false, 0}, {"f32", TC_PARAM_FLOAT, "f32", 4, true, 0},
};

static void check_values(const RunOptions *o) {
  for (int i = 0; i < o->nargs; i++) {
    const char *spec = o->args[i].spec;
    RunBufferSpec bs;
    if (run_parse_buffer_spec(spec, &bs) && bs.fill != RUN_FILL_FILE) {
      int64_t strides[RUN_MAX_RANK];
      if (bs.rank < 1 || bs.rank > RUN_MAX_RANK || bs.n < 1 || bs.n > RUN_MAX_BUFFER_ELEMS ||
          !run_row_major_strides(bs.shape, bs.rank, strides))
        abort(); /* a parsed shape always fits */
    }
    for (size_t k = 0; k < sizeof scalar_params / sizeof scalar_params[0]; k++) {
      tc_arg a = {0};
      (void)run_parse_scalar(spec, &scalar_params[k], &a);
    }
  }
}

/* Names of one to three characters have values (some large, to reach
 * the overflow checks); others are unknown. */
static bool fuzz_lookup(void *user, const char *name, size_t len, int64_t *value) {
  (void)user;
  if (len > 3) return false;
  *value = len == 3 ? INT64_MAX / 3 : (int64_t)(unsigned char)name[0] * (int64_t)len;
  return true;
}

static void check_grid(const char *text) {
  int64_t g[3];
  char msg[RUN_MESSAGE_BYTES];
  bool full = run_eval_grid(text, fuzz_lookup, NULL, false, g, msg, sizeof msg);
  if (full && (g[0] < 1 || g[1] < 1 || g[2] < 1 || g[0] > INT32_MAX || g[1] > INT32_MAX || g[2] > INT32_MAX))
    abort(); /* an accepted grid is in range */
  if (!full && strlen(msg) >= sizeof msg) abort();
  /* what a full evaluation accepts, the check of the text accepts */
  if (!run_eval_grid(text, fuzz_lookup, NULL, true, g, msg, sizeof msg) && full) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  char **argv = malloc(sizeof *argv * (FUZZ_MAX_ARGV + 2));
  if (!text || !argv) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  int argc = 0;
  argv[argc++] = "run";
  for (char *s = text; argc <= FUZZ_MAX_ARGV;) {
    argv[argc++] = s;
    char *nl = memchr(s, '\n', (size_t)(text + size - s));
    if (!nl) break;
    *nl = '\0';
    s = nl + 1;
  }
  argv[argc] = NULL;
  RunOptions *o = calloc(1, sizeof *o);
  if (!o) abort();
  o->tune = size > 0 && (data[0] & 1);
  char msg[RUN_MESSAGE_BYTES];
  RunParse r = run_parse_options(argc, argv, o, msg, sizeof msg);
  if (r == RUN_PARSE_USAGE && strlen(msg) >= sizeof msg) abort();
  check_values(o);
  if (o->grid_text) check_grid(o->grid_text);
  run_options_free(o);
  free(o);
  free(argv);
  free(text);
  return 0;
}
