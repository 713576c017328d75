/* gpu_bench.c - GPU benchmarks (`tile-gpu bench`). Each figure is a ratio
 * to its anchor measured in the same run (see ../shared/ANCHORS.md):
 *
 *   memory-bound kernels   GB/s (bytes each kernel must read + write, once)
 *                          over a device-to-device copy's GB/s
 *   launch cost            host time of one tile_launch over one bare
 *                          cuLaunchKernel of the same function
 *   compile time           tc_compile + tc_generate (source to cubin), ms
 *
 * Timing: CUDA events around each launch after warm-up, median of the
 * repetitions; buffers are far larger than the 50 MB L2, so no input is
 * served from cache across repetitions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"

#define WARMUP 5
#define REPS 30
#define LAUNCH_REPS 20000
#define COMPILE_REPS 5

typedef struct Row {
  char name[96];
  double value, anchor, ratio;
  const char *unit;
} Row;

static Row rows[64];
static int nrows;

static void add_row(const char *name, double value, double anchor, const char *unit) {
  Row *r = &rows[nrows++];
  snprintf(r->name, sizeof r->name, "%s", name);
  r->value = value;
  r->anchor = anchor;
  r->ratio = anchor > 0 ? value / anchor : 0;
  r->unit = unit;
  printf("%-44s %10.2f %-6s anchor %10.2f  ratio %.3f\n", name, value, unit, anchor, r->ratio);
  fflush(stdout);
}

/* Median milliseconds of `reps` timed calls of fn. */
typedef bool (*LaunchFn)(void *ctx);

static double time_ms(Gpu *g, LaunchFn fn, void *ctx) {
  tile_event *a, *b;
  tile_event_create(g->rt, &a);
  tile_event_create(g->rt, &b);
  for (int i = 0; i < WARMUP; i++) fn(ctx);
  double t[REPS];
  for (int i = 0; i < REPS; i++) {
    tile_event_record(a, NULL);
    if (!fn(ctx)) return -1;
    tile_event_record(b, NULL);
    tile_event_synchronize(b);
    float ms;
    tile_event_elapsed_ms(a, b, &ms);
    t[i] = ms;
  }
  tile_event_destroy(a);
  tile_event_destroy(b);
  qsort(t, REPS, sizeof(double), cmp_double);
  return t[REPS / 2];
}

/* ---- the copy anchor ---- */

typedef struct CopyCtx {
  Gpu *g;
  uint64_t dst, src;
  size_t bytes;
} CopyCtx;

static bool do_copy(void *p) {
  CopyCtx *c = p;
  return tile_memcpy_dtod(c->g->rt, c->dst, c->src, c->bytes, NULL) == TILE_OK;
}

static double copy_gbps(Gpu *g, size_t bytes) {
  CopyCtx c = {g, 0, 0, bytes};
  tile_mem_alloc(g->rt, bytes, &c.src);
  tile_mem_alloc(g->rt, bytes, &c.dst);
  tile_memset_d8(g->rt, c.src, 1, bytes);
  double ms = time_ms(g, do_copy, &c);
  tile_mem_free(g->rt, c.src);
  tile_mem_free(g->rt, c.dst);
  return 2.0 * (double)bytes / (ms * 1e6);
}

/* ---- kernels ---- */

typedef struct LaunchCtx {
  const tile_kernel *k;
  uint32_t grid[3];
  tile_arg args[16];
  int nargs;
} LaunchCtx;

static bool do_launch(void *p) {
  LaunchCtx *c = p;
  tile_status st = tile_launch(c->k, c->grid, NULL, c->args, c->nargs);
  if (st != TILE_OK) printf("  launch failed: %s\n", tile_last_error());
  return st == TILE_OK;
}

static uint64_t dev_random(Gpu *g, size_t n, const char *elem) {
  DBuf b;
  dbuf_alloc(g, &b, "x", elem, n);
  Rng r = {n};
  dbuf_fill(&b, &r, -1, 1);
  dbuf_upload(g, &b);
  uint64_t dev = b.dev;
  free(b.host);
  return dev;
}

static void bench_vector_add(Gpu *g, double copy) {
  const size_t n = (size_t)1 << 28;
  Variant v;
  if (!variant_build(g, "tests/kernels/vector_add.tile", (const char *[]){"BLOCK", "2048", "WARPS", "8", NULL}, &v)) return;
  LaunchCtx c = {v.kernel, {(uint32_t)(n / 2048), 1, 1}, {{0}}, 4};
  uint64_t x = dev_random(g, n, "f32"), y = dev_random(g, n, "f32"), z;
  tile_mem_alloc(g->rt, n * 4, &z);
  c.args[0] = tile_arg_ptr(z), c.args[1] = tile_arg_ptr(x), c.args[2] = tile_arg_ptr(y), c.args[3] = tile_arg_i32((int32_t)n);
  double ms = time_ms(g, do_launch, &c);
  add_row("vector add f32, 2^28 elements (GB/s)", 12.0 * (double)n / (ms * 1e6), copy, "GB/s");
  tile_mem_free(g->rt, x), tile_mem_free(g->rt, y), tile_mem_free(g->rt, z);
  variant_free(&v);
}

/* Kernels with a WARPS parameter are timed with 4, 8, 16 and 32 warps
 * (while each thread keeps at least one 16-byte vector of the row); the
 * best is reported, with its warp count. */
#define MIN_ELEMS_PER_THREAD 4

typedef struct RowKernel {
  const char *label, *file;
  bool layernorm;
} RowKernel;

static double time_row_kernel(Gpu *g, const RowKernel *rk, int n, int blk, int warps, uint64_t *bufs, size_t rows) {
  char block[16], w[16];
  snprintf(block, sizeof block, "%d", blk);
  snprintf(w, sizeof w, "%d", warps);
  Variant v;
  if (!variant_build(g, rk->file, (const char *[]){"BLOCK", block, "WARPS", w, NULL}, &v)) return -1;
  LaunchCtx c = {v.kernel, {(uint32_t)rows, 1, 1}, {{0}}, 0};
  if (rk->layernorm) {
    tile_arg a[9] = {tile_arg_ptr(bufs[0]), tile_arg_ptr(bufs[1]), tile_arg_ptr(bufs[2]), tile_arg_ptr(bufs[3]),
                     tile_arg_ptr(bufs[4]), tile_arg_ptr(bufs[5]), tile_arg_i32(n), tile_arg_i32(n), tile_arg_f32(1e-5f)};
    memcpy(c.args, a, sizeof a);
    c.nargs = 9;
  } else {
    tile_arg a[4] = {tile_arg_ptr(bufs[0]), tile_arg_ptr(bufs[1]), tile_arg_i32(n), tile_arg_i32(n)};
    memcpy(c.args, a, sizeof a);
    c.nargs = 4;
  }
  double ms = time_ms(g, do_launch, &c);
  variant_free(&v);
  return ms;
}

static void bench_rows(Gpu *g, double copy, const RowKernel *rk, int n) {
  const size_t total = (size_t)1 << 28;
  size_t rows = total / (size_t)n;
  uint64_t bufs[6];
  tile_mem_alloc(g->rt, total * 4, &bufs[0]);
  bufs[1] = dev_random(g, total, "f32");
  if (rk->layernorm) {
    bufs[2] = dev_random(g, (size_t)n, "f32"), bufs[3] = dev_random(g, (size_t)n, "f32");
    tile_mem_alloc(g->rt, rows * 4, &bufs[4]);
    tile_mem_alloc(g->rt, rows * 4, &bufs[5]);
  }
  double best = INFINITY;
  int best_warps = 0, best_block = n;
  /* softmax needs the whole row in one tile; layernorm may take it in
   * BLOCK-sized pieces (the first kept in registers). */
  for (int blk = n; blk >= (rk->layernorm ? n / 8 : n); blk /= 2)
    for (int w = 4; w <= 32; w *= 2) {
      if (blk / (32 * w) < MIN_ELEMS_PER_THREAD) break;
      double ms = time_row_kernel(g, rk, n, blk, w, bufs, rows);
      if (ms > 0 && ms < best) best = ms, best_warps = w, best_block = blk;
    }
  /* Bytes each row must move: read x once, write the output once (plus
   * the two per-row statistics of layernorm). */
  double bytes = 8.0 * (double)total + (rk->layernorm ? 8.0 * (double)rows : 0);
  char name[96];
  snprintf(name, sizeof name, "%s f32, rows of %d, BLOCK %d, %d warps (GB/s)", rk->label, n, best_block, best_warps);
  add_row(name, bytes / (best * 1e6), copy, "GB/s");
  for (int i = 0; i < (rk->layernorm ? 6 : 2); i++) tile_mem_free(g->rt, bufs[i]);
}

/* ---- launch cost ---- */

typedef int (*CuLaunchKernelFn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                unsigned shared, void *stream, void **params, void **extra);

static void bench_launch(Gpu *g) {
  Variant v;
  if (!variant_build(g, "tests/kernels/vector_add.tile", NULL, &v)) return;
  uint64_t buf;
  tile_mem_alloc(g->rt, 4096 * 4, &buf);
  int32_t n = 0; /* every lane masked off: the launch is all there is */
  tile_arg args[4] = {tile_arg_ptr(buf), tile_arg_ptr(buf), tile_arg_ptr(buf), tile_arg_i32(n)};
  const uint32_t grid[3] = {1, 1, 1};
  CuLaunchKernelFn bare = (CuLaunchKernelFn)tile_driver_function(g->rt, "cuLaunchKernel");
  void *fn = tile_kernel_handle(v.kernel);
  void *params[4] = {&buf, &buf, &buf, &n};
  double best_tile = INFINITY, best_bare = INFINITY;
  /* Alternate the two a few times; keep each one's best. */
  for (int round = 0; round < 5; round++) {
    tile_synchronize(g->rt);
    double t0 = now_ms();
    for (int i = 0; i < LAUNCH_REPS; i++) tile_launch(v.kernel, grid, NULL, args, 4);
    double t1 = now_ms();
    tile_synchronize(g->rt);
    double t2 = now_ms();
    for (int i = 0; i < LAUNCH_REPS; i++) bare(fn, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL);
    double t3 = now_ms();
    tile_synchronize(g->rt);
    best_tile = fmin(best_tile, (t1 - t0) * 1e3 / LAUNCH_REPS);
    best_bare = fmin(best_bare, (t3 - t2) * 1e3 / LAUNCH_REPS);
  }
  add_row("launch host cost, tile_launch (us)", best_tile, best_bare, "us");
  tile_mem_free(g->rt, buf);
  variant_free(&v);
}

/* ---- compile time ---- */

static void bench_compile(Gpu *g) {
  static const char *const files[] = {"lang/std/softmax.tile", "lang/std/layernorm.tile", "lang/std/gemm.tile",
                                      "lang/std/flash_attention.tile"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    double t[COMPILE_REPS];
    for (int r = 0; r < COMPILE_REPS; r++) {
      Variant v;
      if (!variant_build(g, files[i], NULL, &v)) return;
      t[r] = v.compile_ms;
      variant_free(&v);
    }
    qsort(t, COMPILE_REPS, sizeof(double), cmp_double);
    char name[96];
    snprintf(name, sizeof name, "compile %s to cubin (ms)", strrchr(files[i], '/') + 1);
    add_row(name, t[COMPILE_REPS / 2], 0, "ms");
  }
}

int gpu_bench_main(int argc, char **argv, const char *source_root) {
  (void)argc, (void)argv;
  Gpu g;
  if (!gpu_open(&g, source_root)) return EXIT_SKIP;
  double copy = copy_gbps(&g, (size_t)1 << 30);
  add_row("device-to-device copy, 1 GiB (GB/s)", copy, copy, "GB/s");
  bench_vector_add(&g, copy);
  const RowKernel softmax = {"softmax", "lang/std/softmax.tile", false};
  const RowKernel layernorm = {"layernorm", "lang/std/layernorm.tile", true};
  for (int n = 4096; n <= 32768; n *= 2) bench_rows(&g, copy, &softmax, n);
  for (int n = 4096; n <= 16384; n *= 2) bench_rows(&g, copy, &layernorm, n);
  bench_launch(&g);
  bench_compile(&g);
  printf("\n| benchmark | value | anchor | ratio |\n|---|---|---|---|\n");
  for (int i = 0; i < nrows; i++)
    printf("| %s | %.2f %s | %.2f | %.3f |\n", rows[i].name, rows[i].value, rows[i].unit, rows[i].anchor, rows[i].ratio);
  gpu_close(&g);
  return 0;
}
