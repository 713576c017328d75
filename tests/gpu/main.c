/* main.c - tile-gpu: the GPU test suite and the GPU benchmarks in one
 * program, so that one statically linked binary carries the compiler (with
 * LLVM) to a GPU machine that has no LLVM installed.
 *
 *   tile-gpu test [NAME]   run the GPU tests (those whose name contains NAME)
 *   tile-gpu bench [SECTION] run the benchmarks (memory, gemm, launch,
 *                          attention, decode, prefill, mlp, compile); last a Markdown table;
 *                          `bench gemm MxNxK` one GEMM shape only
 *   tile-gpu diff [--count N] [--seed S] [--jobs J] [--seconds T] ...
 *                          random kernels on the GPU and in the interpreter,
 *                          compared as the spec allows (gpu_diff.c)
 *   tile-gpu debug-trap barrier|offset|ws
 *                          (used by the tests) a kernel in the debug mode
 *                          with a broken barrier protocol or a misaligned
 *                          TMA offset, or the warp-specialized GEMM with
 *                          a broken protocol
 *   tile-gpu debug-print print|assert
 *                          (used by the tests) tests/kernels/device_print.tile
 *                          on the GPU, its assertion holding or failing
 *
 * Sources (.tile files) are read from TILE_SOURCE_ROOT, or the directory
 * given by --root DIR before the command. Exits 77 (skipped) without a GPU.
 */
#include <stdio.h>
#include <string.h>

#ifndef TILE_SOURCE_ROOT
#define TILE_SOURCE_ROOT "."
#endif

int gpu_tests_main(int argc, char **argv, const char *source_root);
int gpu_bench_main(int argc, char **argv, const char *source_root);
int gpu_debug_trap_child(const char *what, const char *source_root);
int gpu_diff_main(int argc, char **argv, const char *source_root);
int gpu_debug_child(const char *what, const char *source_root);

int main(int argc, char **argv) {
  const char *root = TILE_SOURCE_ROOT;
  int i = 1;
  if (i + 1 < argc && !strcmp(argv[i], "--root")) root = argv[i + 1], i += 2;
  if (i < argc && !strcmp(argv[i], "test")) return gpu_tests_main(argc - i - 1, argv + i + 1, root);
  if (i < argc && !strcmp(argv[i], "bench")) return gpu_bench_main(argc - i - 1, argv + i + 1, root);
  if (i < argc && !strcmp(argv[i], "diff")) return gpu_diff_main(argc - i - 1, argv + i + 1, root);
  if (i < argc && !strcmp(argv[i], "debug-trap")) return gpu_debug_trap_child(i + 1 < argc ? argv[i + 1] : NULL, root);
  if (i < argc && !strcmp(argv[i], "debug-print")) return gpu_debug_child(i + 1 < argc ? argv[i + 1] : NULL, root);
  fprintf(stderr, "usage: tile-gpu [--root DIR] test [NAME] | bench [SECTION] | diff [OPTIONS]\n");
  return 2;
}
