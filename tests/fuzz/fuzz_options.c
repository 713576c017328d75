/* fuzz_options.c - libFuzzer target over the compile options: the input
 * chooses one of the std and test kernels' sources (read from the tree)
 * and the options it is compiled with, then each kernel that compiles runs
 * briefly in the interpreter (fuzz_kit.c). Any crash, sanitizer report,
 * leak or timeout is a bug; diagnostics are expected.
 *
 * Input: text lines, as a tilec command line would give them:
 *   line 1    the source, by its file name without ".tile" ("gemm",
 *             "vector_add"); any other text picks one by its hash
 *   then      "-O0" (no_opt), "--verify-each" (verify_each_pass),
 *             "-k NAME" (only that kernel), "-DNAME=VALUE" (a define, as
 *             tilec takes it: "-DBLOCK=64", "-DT=f16"); other lines are
 *             ignored, so that a mutation rarely wastes the input.
 * Seeds in tests/fuzz/corpus/fuzz_options give each source its consts at
 * small sizes; the dictionary (fuzz_options.dict) has the const names. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_kit.h"

/* As tilec's own limit on -D options (compiler/driver/cli.h). */
#define FUZZ_MAX_DEFINES 256

/* Most lines read from one input: the source line, the defines and a few
 * options. */
#define FUZZ_MAX_LINES (FUZZ_MAX_DEFINES + 8)

/* Splits text (NUL-terminated, modified) into lines. */
static int split_lines(char *text, char **lines, int max) {
  int n = 0;
  for (char *s = text; n < max;) {
    lines[n++] = s;
    char *nl = strchr(s, '\n');
    if (!nl) break;
    *nl = '\0';
    s = nl + 1;
  }
  return n;
}

/* The source whose file name, without directory and ".tile", is name. */
static const FuzzSource *pick_source(const FuzzSource *sources, int n, const char *name) {
  size_t len = strlen(name);
  for (int i = 0; i < n; i++) {
    const char *base = strrchr(sources[i].name, '/');
    base = base ? base + 1 : sources[i].name;
    if (strncmp(base, name, len) == 0 && strcmp(base + len, ".tile") == 0) return &sources[i];
  }
  return &sources[fuzz_seed((const uint8_t *)name, len) % (uint64_t)n];
}

/* Applies one option line to opt (defines into defines[*ndefines]). */
static void apply_line(char *line, tc_options *opt, tc_define *defines, int *ndefines) {
  if (!strcmp(line, "-O0")) opt->no_opt = true;
  else if (!strcmp(line, "--verify-each")) opt->verify_each_pass = true;
  else if (!strncmp(line, "-k ", 3)) opt->kernel = line + 3;
  else if (!strncmp(line, "-D", 2) && *ndefines < FUZZ_MAX_DEFINES) {
    char *eq = strchr(line + 2, '=');
    if (eq) *eq = '\0';
    defines[(*ndefines)++] = (tc_define){line + 2, eq ? eq + 1 : ""};
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int nsources;
  const FuzzSource *sources = fuzz_sources(&nsources);
  if (!sources) return 0;
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *lines[FUZZ_MAX_LINES];
  int nlines = split_lines(text, lines, FUZZ_MAX_LINES);
  const FuzzSource *src = pick_source(sources, nsources, lines[0]);
  tc_define defines[FUZZ_MAX_DEFINES];
  int ndefines = 0;
  tc_options opt = {0};
  for (int i = 1; i < nlines; i++) apply_line(lines[i], &opt, defines, &ndefines);
  opt.defines = defines;
  opt.ndefines = ndefines;
  tc_compilation *c = tc_compile(src->name, src->text, src->len, &opt);
  if (c) {
    (void)tc_diagnostics(c);
    free(tc_emit(c, TC_EMIT_IR));
    uint64_t rng = fuzz_seed(data, size);
    if (tc_error_count(c) == 0) fuzz_run_kernels(c, &rng);
    tc_free(c);
  }
  free(text);
  return 0;
}
