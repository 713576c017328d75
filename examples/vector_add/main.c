/* main.c - using tilec as a build step and libtile to launch.
 *
 * meson runs `tilec vector_add.tile --emit=header --embed -o saxpy_kernels.h`
 * (see meson.build); this program includes the header, loads the embedded
 * cubin, launches the kernel through its typed launch function, checks the
 * result, then captures ten launches into a CUDA graph and replays it.
 * Without a GPU it says so and exits 77 (meson's "skipped").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "saxpy_kernels.h"

#define N 1000003
#define BLOCK 1024
#define GRAPH_LAUNCHES 10

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, tile_last_error());
  return 1;
}

/* Largest |z - expected| over all elements; expected is computed as the
 * kernel defines it, in f32 with each operation rounded. */
static double max_error(const float *z, const float *x, const float *y, float a) {
  double e = 0;
  for (int i = 0; i < N; i++) {
    volatile float ax = a * x[i]; /* volatile: no fused multiply-add here */
    e = fmax(e, fabs((double)z[i] - (double)(ax + y[i])));
  }
  return e;
}

int main(void) {
  tile_config cfg;
  tile_config_init(&cfg);
  tile_runtime *rt;
  tile_status st = tile_runtime_create(&cfg, &rt);
  if (st == TILE_ERROR_NO_DRIVER || st == TILE_ERROR_NO_DEVICE) {
    printf("no GPU here (%s): nothing to run\n", tile_last_error());
    return 77;
  }
  if (st != TILE_OK) return fail("tile_runtime_create");

  tile_module *mod;
  tile_kernel *k;
  if (saxpy_kernels_load(rt, &mod) != TILE_OK) return fail("loading the module");
  if (tile_kernel_get(mod, "saxpy", &k) != TILE_OK) return fail("tile_kernel_get");

  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *z = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)(i % 1000) / 1000.0f, y[i] = (float)(i % 7);
  uint64_t dx, dy, dz;
  if (tile_mem_alloc(rt, N * sizeof(float), &dx) || tile_mem_alloc(rt, N * sizeof(float), &dy) ||
      tile_mem_alloc(rt, N * sizeof(float), &dz))
    return fail("tile_mem_alloc");
  tile_memcpy_htod(rt, dx, x, N * sizeof(float));
  tile_memcpy_htod(rt, dy, y, N * sizeof(float));
  tile_memset_d8(rt, dz, 0xFF, N * sizeof(float)); /* NaN: every element must be written */

  const uint32_t blocks = (N + BLOCK - 1) / BLOCK;
  if (saxpy_kernels_saxpy_launch(k, blocks, 1, 1, NULL, dz, dx, dy, 2.0f, N) != TILE_OK) return fail("launch");
  if (tile_synchronize(rt) != TILE_OK) return fail("synchronize");
  tile_memcpy_dtoh(rt, z, dz, N * sizeof(float));
  double e1 = max_error(z, x, y, 2.0f);
  printf("saxpy on the GPU: %d elements, max error %g\n", N, e1);

  /* A wrong call is an error value, not a crash: a misaligned pointer. */
  st = saxpy_kernels_saxpy_launch(k, blocks, 1, 1, NULL, dz + 4, dx, dy, 2.0f, N);
  printf("launch with a misaligned pointer: %s (%s)\n", tile_status_name(st), tile_last_error());

  /* Capture ten launches (z = 3x + y each time) into a graph, replay it. */
  tile_stream *s;
  tile_graph *g;
  if (tile_stream_create(rt, &s) != TILE_OK) return fail("tile_stream_create");
  if (tile_graph_begin_capture(s) != TILE_OK) return fail("begin capture");
  for (int i = 0; i < GRAPH_LAUNCHES; i++) saxpy_kernels_saxpy_launch(k, blocks, 1, 1, s, dz, dx, dy, 3.0f, N);
  if (tile_graph_end_capture(s, &g) != TILE_OK) return fail("end capture");
  if (tile_graph_launch(g, s) != TILE_OK || tile_stream_synchronize(s) != TILE_OK) return fail("graph launch");
  tile_memcpy_dtoh(rt, z, dz, N * sizeof(float));
  double e2 = max_error(z, x, y, 3.0f);
  printf("saxpy through a CUDA graph of %d launches: max error %g\n", GRAPH_LAUNCHES, e2);

  tile_graph_destroy(g);
  tile_stream_destroy(s);
  tile_mem_free(rt, dx), tile_mem_free(rt, dy), tile_mem_free(rt, dz);
  free(x), free(y), free(z);
  tile_module_unload(mod);
  tile_runtime_destroy(rt);
  bool ok = e1 == 0 && e2 == 0 && st == TILE_ERROR_INVALID_ARGUMENT;
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
