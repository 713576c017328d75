/* fuzz_interp.c - libFuzzer target over the interpreter: every input is
 * compiled as a .tile file (front end and passes; the optimizer is
 * skipped for one input in four, so that the interpreter also sees
 * unoptimized IR) and each kernel that compiles runs in the interpreter
 * on a small grid, with small buffers and arguments derived from the
 * input's bytes (fuzz_kit.c), under a small step and time limit. Errors
 * of the kernel are expected; any crash, sanitizer report, leak or
 * timeout is a bug. Seeds: tests/fuzz/corpus/fuzz_interp (the std and
 * test kernels at small tile sizes). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_kit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t rng = fuzz_seed(data, size);
  tc_options opt = {0};
  opt.no_opt = fuzz_next(&rng) % 4 == 0;
  tc_compilation *c = tc_compile("fuzz.tile", (const char *)data, size, &opt);
  if (!c) return 0;
  if (tc_error_count(c) == 0) fuzz_run_kernels(c, &rng);
  tc_free(c);
  return 0;
}
