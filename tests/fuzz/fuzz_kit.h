/* fuzz_kit.h - what several libFuzzer targets share: a deterministic
 * generator seeded from the input bytes, running every kernel of a
 * compilation in the interpreter on small buffers, and the std and test
 * kernels' sources. */
#ifndef TILE_FUZZ_KIT_H
#define TILE_FUZZ_KIT_H

#include <stddef.h>
#include <stdint.h>

#include "tilec.h"

/* Elements of each pointer buffer, and most elements of a descriptor's
 * tensor: a gemm with M = N = K = 64 or a softmax row of 4096 fits, while
 * an allocation stays at 32 KiB (f64), cheap at thousands of runs a
 * second. */
#define FUZZ_BUFFER_ELEMS 4096

/* Element operations per interpreter run: about a millisecond or two, so a
 * runaway loop costs little, yet enough for a few loop iterations of the
 * std kernels at small tile sizes. */
#define FUZZ_MAX_STEPS ((uint64_t)1 << 17)

/* Wall-clock limit per run, a safety net under the step limit (a single
 * op, such as a dot of large tiles, may run long). */
#define FUZZ_MAX_SECONDS 2.0

/* Largest grid dimension: a few programs, so that program_id varies. */
#define FUZZ_MAX_GRID 3

/* splitmix64 over state, seeded by fuzz_seed. */
uint64_t fuzz_next(uint64_t *state);
/* A seed that depends on every byte (FNV-1a). */
uint64_t fuzz_seed(const uint8_t *data, size_t size);

/* Runs every kernel of the compilation over a small grid with buffers and
 * arguments drawn from *rng, under FUZZ_MAX_STEPS and FUZZ_MAX_SECONDS;
 * errors of the kernel (out of bounds, limits) are expected outcomes. */
void fuzz_run_kernels(const tc_compilation *c, uint64_t *rng);

/* The std and test kernels, read from the source tree once. */
typedef struct FuzzSource {
  const char *name; /* "lang/std/gemm.tile" */
  char *text;
  size_t len;
} FuzzSource;

/* The sources (count in *n); NULL if the tree is not where the build said. */
const FuzzSource *fuzz_sources(int *n);

#endif
