/* gpu_jit.c - libtile_jit on the GPU: a kernel compiled at run time into a
 * fresh cache, loaded with tile_jit_load (compiled, then from memory, then
 * from disk through a second tile_jit), launched, and checked element by
 * element each time; and the autotuner over the standard layernorm's
 * @config list and over a list of the caller's, the choice stored and
 * read back by a second tile_jit, each chosen kernel checked against
 * float64. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_common.h"
#include "tile_jit.h"

enum { JIT_N = 100003, JIT_BLOCK = 512 };
/* The tuned layernorm: rows of LN_COLS f32 (more than one BLOCK of every
 * candidate, so the chunk loop runs). */
enum { LN_ROWS = 2048, LN_COLS = 6000 };

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

/* A fresh cache directory (dir, a mkdtemp template) and two jits on it. */
static bool two_jits(char *dir, tile_jit **a, tile_jit **b) {
  tile_jit_options o = {.cache_dir = dir};
  return mkdtemp(dir) && tile_jit_create(&o, a) == TILE_OK && tile_jit_create(&o, b) == TILE_OK;
}

int gpu_jit_tests(Gpu *g, const char *only) {
  static const char *const name = "jit: saxpy compiled at run time, then from memory, then from disk";
  if (only && !strstr(name, only)) return 0;
  double t0 = now_ms();
  char dir[] = "/tmp/tile-gpu-jit-XXXXXX", path[4096];
  snprintf(path, sizeof path, "%s/examples/vector_add/vector_add.tile", g->source_root);
  tile_jit *a = NULL, *b = NULL;
  bool ok = two_jits(dir, &a, &b);
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
  gpu_report(g, name, ok, t0, NULL);
  return ok ? 0 : 1;
}

/* ---- autotuning ---------------------------------------------------------- */

typedef struct LnProblem {
  uint64_t y, x, w, b, mean, rstd;
  int launches;
} LnProblem;

/* One layernorm launch; the grid is the rows whatever the candidate. */
static tile_status ln_launch(void *user, tile_kernel *k, const tc_define *config, int nconfig, tile_stream *s) {
  (void)config, (void)nconfig;
  LnProblem *p = user;
  p->launches++;
  tile_arg args[9] = {tile_arg_ptr(p->y),    tile_arg_ptr(p->x),    tile_arg_ptr(p->w),
                      tile_arg_ptr(p->b),    tile_arg_ptr(p->mean), tile_arg_ptr(p->rstd),
                      tile_arg_i32(LN_COLS), tile_arg_i32(LN_COLS), tile_arg_f32(1e-5f)};
  uint32_t grid[3] = {LN_ROWS, 1, 1};
  return tile_launch(k, grid, s, args, 9);
}

/* Runs the chosen kernel on poisoned outputs and compares y with float64. */
static bool ln_check(Gpu *g, LnProblem *p, tile_kernel *k, const float *x, const float *w, const float *b) {
  size_t n = (size_t)LN_ROWS * LN_COLS;
  tile_memset_d8(g->rt, p->y, 0xFF, n * sizeof(float));
  if (ln_launch(p, k, NULL, 0, NULL) != TILE_OK || tile_synchronize(g->rt) != TILE_OK) {
    printf("  launch: %s\n", tile_last_error());
    return false;
  }
  float *y = malloc(n * sizeof(float));
  bool ok = y && tile_memcpy_dtoh(g->rt, y, p->y, n * sizeof(float)) == TILE_OK;
  double worst = 0, scale = 0;
  for (int r = 0; ok && r < LN_ROWS; r++) {
    const float *xr = x + (size_t)r * LN_COLS;
    double mu = 0, var = 0;
    for (int c = 0; c < LN_COLS; c++) mu += xr[c];
    mu /= LN_COLS;
    for (int c = 0; c < LN_COLS; c++) var += (xr[c] - mu) * (xr[c] - mu);
    double rstd = 1 / sqrt(var / LN_COLS + 1e-5);
    for (int c = 0; c < LN_COLS; c++) {
      double want = (xr[c] - mu) * rstd * w[c] + b[c], got = y[(size_t)r * LN_COLS + c];
      double e = fabs(got - want);
      if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
      if (fabs(want) > scale) scale = fabs(want);
    }
  }
  free(y);
  double rel = worst / scale;
  if (ok && !(rel < 1e-5)) printf("  relative error %.3g\n", rel);
  return ok && rel < 1e-5;
}

/* The fastest row must be the chosen one, and every row that ran has a
 * time. */
static bool chosen_is_fastest(const tile_jit_tune_result *r) {
  bool ok = r->chosen >= 0 && r->chosen < r->nrows && r->rows[r->chosen].status == TILE_OK;
  for (int i = 0; ok && i < r->nrows; i++) {
    printf("    %-28s %s %.4f ms\n", r->rows[i].config, r->rows[i].status == TILE_OK ? "ok  " : "fail", r->rows[i].ms);
    if (r->rows[i].status == TILE_OK && !(r->rows[i].ms > 0 && r->rows[i].ms >= r->rows[r->chosen].ms)) ok = false;
  }
  return ok;
}

/* Tunes through a (timing) and again through b (from the stored choice),
 * and checks both choices' kernels. configs NULL: the @config list. */
static bool tune_twice(Gpu *g, tile_jit *a, tile_jit *b, const tile_jit_source *src, const char *const *configs,
                       int nconfigs, int want_failures, LnProblem *p, const float *x, const float *w, const float *bias) {
  tile_jit_tune t = {.key = "rows=2048,cols=6000", .configs = configs, .nconfigs = nconfigs, .launch = ln_launch,
                     .user = p};
  tile_jit_tune_result r1, r2;
  p->launches = 0;
  if (tile_jit_autotune(a, g->rt, src, &t, &r1) != TILE_OK) {
    printf("  tile_jit_autotune: %s\n", tile_last_error());
    return false;
  }
  int failures = 0;
  for (int i = 0; i < r1.nrows; i++) failures += r1.rows[i].status != TILE_OK;
  int ran = r1.nrows - failures;
  bool ok = !r1.from_cache && chosen_is_fastest(&r1) && failures == want_failures &&
            p->launches == ran * (TILE_JIT_TUNE_WARMUP + TILE_JIT_TUNE_REPS);
  if (!ok) printf("  first tuning: from_cache %d, %d failures (wanted %d), %d launches\n", r1.from_cache, failures,
                  want_failures, p->launches);
  ok = ok && ln_check(g, p, r1.kernel, x, w, bias);
  tile_module_unload(r1.module);
  p->launches = 0;
  if (ok && tile_jit_autotune(b, g->rt, src, &t, &r2) != TILE_OK) {
    printf("  second tile_jit_autotune: %s\n", tile_last_error());
    return false;
  }
  if (ok) {
    bool same = r2.from_cache && r2.chosen == r1.chosen && p->launches == 0 && r2.nrows == r1.nrows &&
                strcmp(r2.rows[r2.chosen].config, r1.rows[r1.chosen].config) == 0;
    if (!same) printf("  second tuning: from_cache %d, chose %d (first %d), %d launches\n", r2.from_cache, r2.chosen,
                      r1.chosen, p->launches);
    ok = same && ln_check(g, p, r2.kernel, x, w, bias);
    tile_module_unload(r2.module);
  }
  return ok;
}

int gpu_tune_tests(Gpu *g, const char *only) {
  static const char *const name = "jit: autotuning layernorm over its @config list and a caller's list, stored and reused";
  if (only && !strstr(name, only)) return 0;
  double t0 = now_ms();
  char dir[] = "/tmp/tile-gpu-tune-XXXXXX", path[4096];
  snprintf(path, sizeof path, "%s/lang/std/layernorm.tile", g->source_root);
  tile_jit *a = NULL, *b = NULL;
  bool ok = two_jits(dir, &a, &b);
  size_t n = (size_t)LN_ROWS * LN_COLS;
  float *x = malloc(n * sizeof(float)), *w = malloc(LN_COLS * sizeof(float)), *bias = malloc(LN_COLS * sizeof(float));
  Rng rng = {977};
  for (size_t i = 0; ok && x && i < n; i++) x[i] = (float)rng_uniform(&rng, -3, 5);
  for (int i = 0; ok && w && bias && i < LN_COLS; i++)
    w[i] = (float)rng_uniform(&rng, 0.5, 1.5), bias[i] = (float)rng_uniform(&rng, -1, 1);
  LnProblem p = {0};
  uint64_t *bufs[6] = {&p.y, &p.x, &p.w, &p.b, &p.mean, &p.rstd};
  size_t sizes[6] = {n, n, LN_COLS, LN_COLS, LN_ROWS, LN_ROWS};
  for (int i = 0; i < 6; i++) ok = ok && tile_mem_alloc(g->rt, sizes[i] * sizeof(float), bufs[i]) == TILE_OK;
  ok = ok && x && w && bias && tile_memcpy_htod(g->rt, p.x, x, n * sizeof(float)) == TILE_OK &&
       tile_memcpy_htod(g->rt, p.w, w, LN_COLS * sizeof(float)) == TILE_OK &&
       tile_memcpy_htod(g->rt, p.b, bias, LN_COLS * sizeof(float)) == TILE_OK;
  if (!ok) printf("  setup: %s\n", tile_last_error());
  tile_jit_source src = {.filename = path, .kernel = "layernorm_fwd"};
  if (ok) printf("  the kernel's @config list:\n");
  ok = ok && tune_twice(g, a, b, &src, NULL, 0, 0, &p, x, w, bias);
  /* a list of the caller's, with a candidate the kernel refuses (a block
   * that is not a power of two) */
  static const char *const mine[] = {"BLOCK=512,WARPS=2", "BLOCK=3000,WARPS=4", "BLOCK=8192,WARPS=16"};
  if (ok) printf("  the caller's list:\n");
  ok = ok && tune_twice(g, a, b, &src, mine, 3, 1, &p, x, w, bias);
  for (int i = 0; i < 6; i++)
    if (*bufs[i]) tile_mem_free(g->rt, *bufs[i]);
  free(x), free(w), free(bias);
  int removed = 0;
  if (b) tile_jit_clear(b, &removed);
  tile_jit_destroy(a), tile_jit_destroy(b);
  rmdir(dir);
  gpu_report(g, name, ok, t0, NULL);
  return ok ? 0 : 1;
}
