/* gpu_jit.c - libtile_jit on the GPU: a kernel compiled at run time into a
 * fresh cache, loaded with tile_jit_load (compiled, then from memory, then
 * from disk through a second tile_jit), launched, and checked element by
 * element each time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_common.h"
#include "tile_jit.h"

enum { JIT_N = 100003, JIT_BLOCK = 512 };

/* Loads saxpy through jit, runs z = a x + y and compares every element. */
static bool run_once(Gpu *g, tile_jit *jit, const tile_jit_source *src, tile_jit_origin want, uint64_t dz, uint64_t dx,
                     uint64_t dy, const float *x, const float *y, float a) {
  const void *cubin;
  size_t size;
  tile_jit_origin from;
  if (tile_jit_cubin(jit, src, &cubin, &size, &from) != TILE_OK || from != want) {
    printf("  tile_jit_cubin: origin %d, wanted %d (%s)\n", (int)from, (int)want, tile_last_error());
    return false;
  }
  tile_module *mod;
  tile_kernel *k;
  if (tile_jit_load(jit, g->rt, src, &mod, &k) != TILE_OK) {
    printf("  tile_jit_load: %s\n", tile_last_error());
    return false;
  }
  tile_memset_d8(g->rt, dz, 0xFF, JIT_N * sizeof(float));
  tile_arg args[5] = {tile_arg_ptr(dz), tile_arg_ptr(dx), tile_arg_ptr(dy), tile_arg_f32(a), tile_arg_i32(JIT_N)};
  uint32_t grid[3] = {(JIT_N + JIT_BLOCK - 1) / JIT_BLOCK, 1, 1};
  bool ok = tile_launch(k, grid, NULL, args, 5) == TILE_OK && tile_synchronize(g->rt) == TILE_OK;
  float *z = malloc(JIT_N * sizeof(float));
  ok = ok && z && tile_memcpy_dtoh(g->rt, z, dz, JIT_N * sizeof(float)) == TILE_OK;
  int bad = 0;
  for (int i = 0; ok && i < JIT_N; i++) {
    volatile float ax = a * x[i]; /* the kernel's rounding: no fused multiply-add */
    if (z[i] != ax + y[i]) bad++;
  }
  if (bad) printf("  %d of %d elements wrong\n", bad, JIT_N);
  free(z);
  tile_module_unload(mod);
  return ok && bad == 0;
}

int gpu_jit_tests(Gpu *g, const char *only) {
  static const char *const name = "jit: saxpy compiled at run time, then from memory, then from disk";
  if (only && !strstr(name, only)) return 0;
  double t0 = now_ms();
  char dir[] = "/tmp/tile-gpu-jit-XXXXXX", path[4096];
  bool ok = mkdtemp(dir) != NULL;
  snprintf(path, sizeof path, "%s/examples/vector_add/vector_add.tile", g->source_root);
  tile_jit_options o = {.cache_dir = dir};
  tile_jit *a = NULL, *b = NULL;
  ok = ok && tile_jit_create(&o, &a) == TILE_OK && tile_jit_create(&o, &b) == TILE_OK;
  char block[16];
  snprintf(block, sizeof block, "%d", JIT_BLOCK);
  tc_define d[1] = {{"BLOCK", block}};
  tile_jit_source src = {.filename = path, .kernel = "saxpy", .defines = d, .ndefines = 1};
  float *x = malloc(JIT_N * sizeof(float)), *y = malloc(JIT_N * sizeof(float));
  Rng rng = {4242};
  for (int i = 0; ok && x && y && i < JIT_N; i++)
    x[i] = (float)rng_uniform(&rng, -2, 2), y[i] = (float)rng_uniform(&rng, -2, 2);
  uint64_t dx = 0, dy = 0, dz = 0;
  ok = ok && x && y && tile_mem_alloc(g->rt, JIT_N * sizeof(float), &dx) == TILE_OK &&
       tile_mem_alloc(g->rt, JIT_N * sizeof(float), &dy) == TILE_OK &&
       tile_mem_alloc(g->rt, JIT_N * sizeof(float), &dz) == TILE_OK &&
       tile_memcpy_htod(g->rt, dx, x, JIT_N * sizeof(float)) == TILE_OK &&
       tile_memcpy_htod(g->rt, dy, y, JIT_N * sizeof(float)) == TILE_OK;
  if (!ok) printf("  setup: %s\n", tile_last_error());
  ok = ok && run_once(g, a, &src, TILE_JIT_COMPILED, dz, dx, dy, x, y, 2.0f) &&
       run_once(g, a, &src, TILE_JIT_MEMORY, dz, dx, dy, x, y, -0.5f) &&
       run_once(g, b, &src, TILE_JIT_DISK, dz, dx, dy, x, y, 3.0f);
  if (dx) tile_mem_free(g->rt, dx);
  if (dy) tile_mem_free(g->rt, dy);
  if (dz) tile_mem_free(g->rt, dz);
  free(x), free(y);
  tile_jit_clear(b, NULL);
  tile_jit_destroy(a), tile_jit_destroy(b);
  rmdir(dir);
  printf("%s %s (%.0f ms)\n", ok ? "ok  " : "FAIL", name, now_ms() - t0);
  fflush(stdout);
  if (ok) g->passed++;
  else g->failed++;
  return ok ? 0 : 1;
}
