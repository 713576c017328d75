/* main.c - the compiler inside a C program (libtile_jit).
 *
 * Compiles examples/vector_add/vector_add.tile at run time for a BLOCK
 * given on the command line, into a fresh cache directory, then asks
 * again from the memory cache and from the disk cache (a new tile_jit, as
 * a later process would) and prints the median time of each. With a GPU
 * it loads the kernel, runs z = 2x + y and checks every element; without
 * one it stops after the timings and exits 77 (meson's "skipped").
 *
 *   jit [--source FILE] [--block N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tile_jit.h"

#define N 1000003
#define REPS 101

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, tile_last_error());
  return 1;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median microseconds of REPS lookups, each through a jit from make(). */
static double median_lookup_us(tile_jit *shared, const tile_jit_options *o, const tile_jit_source *src,
                               tile_jit_origin want) {
  double t[REPS];
  for (int i = 0; i < REPS; i++) {
    tile_jit *j = shared;
    if (!j && tile_jit_create(o, &j) != TILE_OK) return -1;
    const void *p;
    size_t n;
    tile_jit_origin from;
    double t0 = now_us();
    tile_status st = tile_jit_cubin(j, src, &p, &n, &from);
    t[i] = now_us() - t0;
    if (!shared) tile_jit_destroy(j);
    if (st != TILE_OK || from != want) return -1;
  }
  qsort(t, REPS, sizeof t[0], cmp_double);
  return t[REPS / 2];
}

int main(int argc, char **argv) {
  const char *file = TILE_EXAMPLE_SOURCE, *block = "1024";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--source")) file = argv[i + 1];
    else if (!strcmp(argv[i], "--block")) block = argv[i + 1];
    else {
      fprintf(stderr, "usage: %s [--source FILE] [--block N]\n", argv[0]);
      return 2;
    }
  }
  char dir[] = "/tmp/tile-jit-example-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  tile_jit_options o = {.cache_dir = dir};
  tile_jit *jit;
  if (tile_jit_create(&o, &jit) != TILE_OK) return fail("tile_jit_create");
  tc_define defs[1] = {{"BLOCK", block}};
  tile_jit_source src = {.filename = file, .kernel = "saxpy", .defines = defs, .ndefines = 1};
  const void *cubin;
  size_t size;
  tile_jit_origin from;
  double t0 = now_us();
  if (tile_jit_cubin(jit, &src, &cubin, &size, &from) != TILE_OK) return fail("compiling");
  double compile_us = now_us() - t0;
  double mem_us = median_lookup_us(jit, &o, &src, TILE_JIT_MEMORY);
  double disk_us = median_lookup_us(NULL, &o, &src, TILE_JIT_DISK);
  printf("saxpy (BLOCK %s) from %s: compiled in %.1f ms (%zu-byte cubin); median of %d lookups: memory cache %.1f us, "
         "disk cache %.1f us (cache %s)\n",
         block, file, compile_us / 1e3, size, REPS, mem_us, disk_us, dir);
  if (mem_us < 0 || disk_us < 0) {
    fprintf(stderr, "a lookup did not hit its cache: %s\n", tile_last_error());
    return 1;
  }

  tile_config cfg;
  tile_config_init(&cfg);
  tile_runtime *rt;
  tile_status st = tile_runtime_create(&cfg, &rt);
  if (st == TILE_ERROR_NO_DRIVER || st == TILE_ERROR_NO_DEVICE) {
    printf("no GPU here (%s): nothing to run\n", tile_last_error());
    tile_jit_clear(jit, NULL);
    tile_jit_destroy(jit);
    rmdir(dir);
    return 77;
  }
  if (st != TILE_OK) return fail("tile_runtime_create");
  tile_module *mod;
  tile_kernel *k;
  if (tile_jit_load(jit, rt, &src, &mod, &k) != TILE_OK) return fail("tile_jit_load");
  float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *z = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 1001) / 1001.0f - 0.5f, y[i] = (float)(i % 13) - 6.0f;
  uint64_t dx, dy, dz;
  if (tile_mem_alloc(rt, N * sizeof(float), &dx) || tile_mem_alloc(rt, N * sizeof(float), &dy) ||
      tile_mem_alloc(rt, N * sizeof(float), &dz))
    return fail("tile_mem_alloc");
  tile_memcpy_htod(rt, dx, x, N * sizeof(float));
  tile_memcpy_htod(rt, dy, y, N * sizeof(float));
  tile_memset_d8(rt, dz, 0xFF, N * sizeof(float)); /* NaN: every element must be written */
  int b = atoi(block);
  tile_arg args[5] = {tile_arg_ptr(dz), tile_arg_ptr(dx), tile_arg_ptr(dy), tile_arg_f32(2.0f), tile_arg_i32(N)};
  uint32_t grid[3] = {(uint32_t)((N + b - 1) / b), 1, 1};
  if (tile_launch(k, grid, NULL, args, 5) != TILE_OK || tile_synchronize(rt) != TILE_OK) return fail("launch");
  tile_memcpy_dtoh(rt, z, dz, N * sizeof(float));
  double e = 0;
  for (int i = 0; i < N; i++) {
    volatile float ax = 2.0f * x[i]; /* the kernel's rounding: no fused multiply-add */
    e = fmax(e, fabs((double)z[i] - (double)(ax + y[i])));
    if (isnan(z[i])) e = INFINITY;
  }
  printf("saxpy on the GPU through the JIT: %d elements, max error %g\n%s\n", N, e, e == 0 ? "PASS" : "FAIL");
  tile_mem_free(rt, dx), tile_mem_free(rt, dy), tile_mem_free(rt, dz);
  free(x), free(y), free(z);
  tile_module_unload(mod);
  tile_runtime_destroy(rt);
  tile_jit_clear(jit, NULL); /* the example's cache directory is temporary */
  tile_jit_destroy(jit);
  rmdir(dir);
  return e == 0 ? 0 : 1;
}
