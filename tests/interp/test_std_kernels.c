/* test_std_kernels.c - the standard library's kernels (lang/std) run in the
 * interpreter on fresh random inputs, outputs poisoned first, against plain
 * C references computed in double. Each kernel runs on at least three
 * shapes, including sizes that are not multiples of its block sizes.
 * Tolerances (norm-wise relative error): 1e-5 for f32 math, 1e-2 for bf16
 * inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "act_ref.h"

#define F32_TOL 1e-5
#define BF16_TOL 1e-2


/* ---- softmax ---- */

static void check_softmax(int rows, int n, int stride, const char *block, uint64_t seed) {
  const char *defs[] = {"BLOCK", block, NULL};
  tc_compilation *c = harness_compile("lang/std/softmax.tile", NULL, defs);
  Rng rng = {seed};
  HBuf x = hbuf_new("f32", (size_t)rows * stride, "x"), out = hbuf_new("f32", (size_t)rows * stride, "out");
  hbuf_fill_uniform(&x, &rng, -4, 4);
  hbuf_poison(&out);
  tc_arg args[4] = {{.p = out.data}, {.p = x.data}, {.i = n}, {.i = stride}};
  const HBuf *bufs[] = {&out, &x};
  harness_run(c, (int64_t[3]){rows, 1, 1}, args, 4, bufs, 2);
  double *want = malloc(sizeof(double) * rows * n);
  HBuf got = hbuf_new("f32", (size_t)rows * n, "got");
  for (int r = 0; r < rows; r++) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < n; j++) m = fmax(m, hbuf_get(&x, (size_t)r * stride + j));
    for (int j = 0; j < n; j++) s += exp(hbuf_get(&x, (size_t)r * stride + j) - m);
    for (int j = 0; j < n; j++) {
      want[r * n + j] = exp(hbuf_get(&x, (size_t)r * stride + j) - m) / s;
      hbuf_set(&got, (size_t)r * n + j, hbuf_get(&out, (size_t)r * stride + j));
    }
    /* Padding between rows must be untouched (still poisoned). */
    for (int j = n; j < stride; j++) cr_assert(isnan(hbuf_get(&out, (size_t)r * stride + j)));
  }
  double err = rel_error(&got, want, (size_t)rows * n);
  cr_expect(err < F32_TOL, "softmax %dx%d: rel error %g", rows, n, err);
  free(want);
  hbuf_free(&x), hbuf_free(&out), hbuf_free(&got);
  tc_free(c);
}

Test(std_softmax, row_shorter_than_block) { check_softmax(3, 1000, 1008, "1024", 1); }
Test(std_softmax, padded_rows) { check_softmax(7, 37, 48, "64", 2); }
Test(std_softmax, full_block_single_element) { check_softmax(5, 1024, 1024, "1024", 3); check_softmax(2, 1, 16, "16", 4); }

/* ---- layernorm ---- */

static void check_layernorm(const char *type, int rows, int n, const char *block, double tol, uint64_t seed) {
  const char *defs[] = {"T", type, "BLOCK", block, NULL};
  tc_compilation *c = harness_compile("lang/std/layernorm.tile", NULL, defs);
  Rng rng = {seed};
  int stride = (n + 15) & ~15; /* the kernel's stride is a multiple of 16 */
  size_t total = (size_t)rows * stride;
  HBuf y = hbuf_new(type, total, "y"), x = hbuf_new(type, total, "x"), w = hbuf_new(type, n, "w"),
       b = hbuf_new(type, n, "b"), mean = hbuf_new("f32", rows, "mean"), rstd = hbuf_new("f32", rows, "rstd");
  hbuf_fill_uniform(&x, &rng, -2, 3);
  hbuf_fill_uniform(&w, &rng, 0.5, 1.5);
  hbuf_fill_uniform(&b, &rng, -1, 1);
  hbuf_poison(&y), hbuf_poison(&mean), hbuf_poison(&rstd);
  double eps = 1e-5;
  tc_arg args[9] = {{.p = y.data}, {.p = x.data}, {.p = w.data}, {.p = b.data}, {.p = mean.data},
                    {.p = rstd.data}, {.i = n}, {.i = stride}, {.f = eps}};
  const HBuf *bufs[] = {&y, &x, &w, &b, &mean, &rstd};
  harness_run(c, (int64_t[3]){rows, 1, 1}, args, 9, bufs, 6);
  double *wy = malloc(sizeof(double) * total), *wm = malloc(sizeof(double) * rows), *wr = malloc(sizeof(double) * rows);
  for (int r = 0; r < rows; r++) {
    double mu = 0, var = 0;
    for (int j = 0; j < n; j++) mu += hbuf_get(&x, (size_t)r * stride + j);
    mu /= n;
    for (int j = 0; j < n; j++) var += pow(hbuf_get(&x, (size_t)r * stride + j) - mu, 2);
    double rs = 1.0 / sqrt(var / n + (double)(float)eps);
    wm[r] = mu, wr[r] = rs;
    for (int j = 0; j < stride; j++)
      wy[(size_t)r * stride + j] =
          j < n ? (hbuf_get(&x, (size_t)r * stride + j) - mu) * rs * hbuf_get(&w, j) + hbuf_get(&b, j) : NAN;
  }
  double e1 = rel_error(&y, wy, total), e2 = rel_error(&mean, wm, rows), e3 = rel_error(&rstd, wr, rows);
  cr_expect(e1 < tol && e2 < F32_TOL && e3 < F32_TOL, "layernorm %s %dx%d: errors y %g mean %g rstd %g", type, rows,
            n, e1, e2, e3);
  free(wy), free(wm), free(wr);
  hbuf_free(&y), hbuf_free(&x), hbuf_free(&w), hbuf_free(&b), hbuf_free(&mean), hbuf_free(&rstd);
  tc_free(c);
}

Test(std_layernorm, f32_one_block) { check_layernorm("f32", 4, 1000, "1024", F32_TOL, 11); }
Test(std_layernorm, f32_several_blocks) { check_layernorm("f32", 3, 2500, "1024", F32_TOL, 12); }
Test(std_layernorm, f32_tiny_rows) { check_layernorm("f32", 5, 37, "16", F32_TOL, 13); }
Test(std_layernorm, bf16) { check_layernorm("bf16", 3, 777, "256", BF16_TOL, 14); }

/* ---- gemm ---- */

/* C = A @ B; A stored m x k (or k x m with a_trans), B stored k x n (or
 * n x k with b_trans), leading dimensions padded to `pad` extra elements
 * so that they differ from the logical widths. */
static void check_gemm(const char *type, int m, int n, int k, bool a_trans, bool b_trans, const char *const *blocks,
                       double tol, uint64_t seed) {
  const char *defs[24] = {"T", type, "A_TRANS", a_trans ? "true" : "false", "B_TRANS", b_trans ? "true" : "false"};
  int nd = 6;
  for (int i = 0; blocks && blocks[i]; i++) defs[nd++] = blocks[i];
  defs[nd] = NULL;
  tc_compilation *c = harness_compile("lang/std/gemm.tile", NULL, defs);
  Rng rng = {seed};
  const int pad = 8;
  int lda = (a_trans ? m : k) + pad, ldb = (b_trans ? k : n) + pad, ldc = n + pad;
  HBuf a = hbuf_new(type, (size_t)(a_trans ? k : m) * lda, "a"), b = hbuf_new(type, (size_t)(b_trans ? n : k) * ldb, "b");
  HBuf cc = hbuf_new("f32", (size_t)m * ldc, "c");
  hbuf_fill_uniform(&a, &rng, -1, 1);
  hbuf_fill_uniform(&b, &rng, -1, 1);
  hbuf_poison(&cc);
  tc_arg args[9] = {{.p = cc.data}, {.p = a.data}, {.p = b.data}, {.i = m},   {.i = n},
                    {.i = k},       {.i = lda},    {.i = ldb},    {.i = ldc}};
  const HBuf *bufs[] = {&cc, &a, &b};
  int bm = 128, bn = 128;
  for (int i = 0; blocks && blocks[i]; i += 2) {
    if (!strcmp(blocks[i], "BLOCK_M")) bm = atoi(blocks[i + 1]);
    if (!strcmp(blocks[i], "BLOCK_N")) bn = atoi(blocks[i + 1]);
  }
  harness_run(c, (int64_t[3]){harness_cdiv(m, bm) * harness_cdiv(n, bn), 1, 1}, args, 9, bufs, 3);
  double *want = calloc((size_t)m * n, sizeof(double)), worst = 0, ref = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double sum = 0;
      for (int p = 0; p < k; p++)
        sum += hbuf_get(&a, a_trans ? (size_t)p * lda + i : (size_t)i * lda + p) *
               hbuf_get(&b, b_trans ? (size_t)j * ldb + p : (size_t)p * ldb + j);
      double got = hbuf_get(&cc, (size_t)i * ldc + j);
      worst = isnan(got) ? INFINITY : fmax(worst, fabs(got - sum));
      ref = fmax(ref, fabs(sum));
    }
  double err = worst / ref;
  cr_expect(err < tol, "gemm %s %dx%dx%d (a_trans %d, b_trans %d): rel error %g", type, m, n, k, a_trans, b_trans, err);
  free(want);
  hbuf_free(&a), hbuf_free(&b), hbuf_free(&cc);
  tc_free(c);
}

static const char *const small_blocks[] = {"BLOCK_M", "32", "BLOCK_N", "32", "BLOCK_K", "16", "GROUP_M", "2", NULL};

Test(std_gemm, bf16_ragged) { check_gemm("bf16", 104, 72, 56, false, false, NULL, BF16_TOL, 21); }
Test(std_gemm, f32_small_blocks_grouped) { check_gemm("f32", 136, 96, 128, false, false, small_blocks, F32_TOL, 22); }
Test(std_gemm, bf16_transposed_b) { check_gemm("bf16", 64, 160, 48, false, true, small_blocks, BF16_TOL, 23); }
Test(std_gemm, bf16_transposed_a) { check_gemm("bf16", 72, 64, 40, true, false, small_blocks, BF16_TOL, 25); }
Test(std_gemm, f16_both_transposed) { check_gemm("f16", 48, 40, 72, true, true, small_blocks, BF16_TOL, 26); }
Test(std_gemm, f16_exact_tiles) { check_gemm("f16", 128, 128, 64, false, false, NULL, BF16_TOL, 24); }

/* ---- gemm_tma and gemm_fp8: tensor descriptors ---- */

/* A row-major rows x cols matrix with a padded leading dimension, also
 * described as a tensor argument. */
typedef struct TMat {
  HBuf b;
  int rows, cols, ld;
} TMat;

static TMat tmat_new(const char *type, int rows, int cols, int pad, const char *name) {
  TMat t = {hbuf_new(type, (size_t)rows * (cols + pad), name), rows, cols, cols + pad};
  return t;
}

static tc_arg tmat_arg(const TMat *t) {
  tc_arg a = {.p = t->b.data, .shape = {t->rows, t->cols}, .strides = {t->ld, 1}};
  return a;
}

static double tmat_get(const TMat *t, int r, int c) { return hbuf_get(&t->b, (size_t)r * t->ld + c); }

/* C = scale * A @ B from matrices stored as the kernels take them, on a
 * grid of one program per tile or (programs > 0, the persistent gemm_ws)
 * that many programs; cluster (gemm_ws's CLUSTER: "2", or "2n" along n)
 * NULL for the default. */
static void check_tma_gemm_on(const char *file, const char *type, const char *out, int m, int n, int k, bool a_trans,
                              bool b_trans, double scale_a, double scale_b, double tol, uint64_t seed, int64_t programs,
                              const char *cluster) {
  bool fp8 = strstr(file, "fp8") != NULL;
  const char *defs[14] = {"T", type, "TC", out};
  int nd = 4;
  char csize[8] = "";
  if (cluster) { /* "2": CLUSTER 2 (along m); "2n": along n (CLUSTER_N) */
    snprintf(csize, sizeof csize, "%d", atoi(cluster));
    defs[nd++] = "CLUSTER", defs[nd++] = csize;
    if (strchr(cluster, 'n')) defs[nd++] = "CLUSTER_N", defs[nd++] = "true";
  }
  if (!fp8) {
    defs[nd++] = "A_TRANS", defs[nd++] = a_trans ? "true" : "false";
    defs[nd++] = "B_TRANS", defs[nd++] = b_trans ? "true" : "false";
  }
  defs[nd] = NULL;
  tc_compilation *c = harness_compile(file, NULL, defs);
  Rng rng = {seed};
  TMat a = tmat_new(type, a_trans ? k : m, a_trans ? m : k, 16, "a"), b = tmat_new(type, b_trans ? n : k, b_trans ? k : n, 16, "b");
  TMat cm = tmat_new(out, m, n, 8, "c");
  HBuf sa = hbuf_new("f32", 1, "scale_a"), sb = hbuf_new("f32", 1, "scale_b");
  hbuf_fill_uniform(&a.b, &rng, -1, 1);
  hbuf_fill_uniform(&b.b, &rng, -1, 1);
  hbuf_poison(&cm.b);
  hbuf_set(&sa, 0, scale_a), hbuf_set(&sb, 0, scale_b);
  tc_arg args[8];
  int na = 0;
  args[na++] = tmat_arg(&cm), args[na++] = tmat_arg(&a), args[na++] = tmat_arg(&b);
  if (fp8) args[na++] = (tc_arg){.p = sa.data}, args[na++] = (tc_arg){.p = sb.data};
  args[na++] = (tc_arg){.i = m}, args[na++] = (tc_arg){.i = n}, args[na++] = (tc_arg){.i = k};
  const HBuf *bufs[] = {&cm.b, &a.b, &b.b, &sa, &sb};
  int64_t bm = 128, bn = fp8 || strstr(file, "gemm_ws") ? 256 : 128;
  int64_t grid = programs ? programs : harness_cdiv(m, bm) * harness_cdiv(n, bn);
  harness_run(c, (int64_t[3]){grid, 1, 1}, args, na, bufs, fp8 ? 5 : 3);
  double worst = 0, ref = 0;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < n; j++) {
      double sum = 0;
      for (int p = 0; p < k; p++)
        sum += (a_trans ? tmat_get(&a, p, i) : tmat_get(&a, i, p)) * (b_trans ? tmat_get(&b, j, p) : tmat_get(&b, p, j));
      sum *= scale_a * scale_b;
      double got = tmat_get(&cm, i, j);
      worst = isnan(got) ? INFINITY : fmax(worst, fabs(got - sum));
      ref = fmax(ref, fabs(sum));
    }
    for (int j = n; j < cm.ld; j++) cr_assert(isnan(tmat_get(&cm, i, j)), "the store is clipped at column n");
  }
  cr_expect(worst / ref < tol, "%s %s %dx%dx%d: rel error %g", file, type, m, n, k, worst / ref);
  hbuf_free(&a.b), hbuf_free(&b.b), hbuf_free(&cm.b), hbuf_free(&sa), hbuf_free(&sb);
  tc_free(c);
}

/* tests/kernels/gemm_streamk.tile on `programs` programs: C against
 * float64, the clipped columns untouched, the tail tiles' counters back at
 * zero. */
static void check_streamk(int m, int n, int k, int64_t programs, uint64_t seed) {
  tc_compilation *c = harness_compile("tests/kernels/gemm_streamk.tile", NULL, NULL);
  Rng rng = {seed};
  TMat a = tmat_new("bf16", m, k, 16, "a"), b = tmat_new("bf16", k, n, 16, "b"), cm = tmat_new("bf16", m, n, 8, "c");
  int tiles = (int)(harness_cdiv(m, 128) * harness_cdiv(n, 256));
  HBuf ws = hbuf_new("f32", (size_t)2 * programs * 128 * 256, "ws"), count = hbuf_new("i32", (size_t)tiles, "count");
  hbuf_fill_uniform(&a.b, &rng, -1, 1);
  hbuf_fill_uniform(&b.b, &rng, -1, 1);
  hbuf_poison(&cm.b), hbuf_poison(&ws);
  memset(count.data, 0, (size_t)tiles * 4);
  tc_arg args[10] = {tmat_arg(&cm), {.p = cm.b.data}, {.i = cm.ld}, tmat_arg(&a), tmat_arg(&b), {.p = ws.data},
                     {.p = count.data}, {.i = m}, {.i = n}, {.i = k}};
  const HBuf *bufs[] = {&cm.b, &a.b, &b.b, &ws, &count};
  harness_run(c, (int64_t[3]){programs, 1, 1}, args, 10, bufs, 5);
  double worst = 0, ref = 0;
  for (int i = 0; i < m; i++) {
    for (int j = 0; j < n; j++) {
      double sum = 0;
      for (int p = 0; p < k; p++) sum += tmat_get(&a, i, p) * tmat_get(&b, p, j);
      double got = tmat_get(&cm, i, j);
      worst = isnan(got) ? INFINITY : fmax(worst, fabs(got - sum));
      ref = fmax(ref, fabs(sum));
    }
    for (int j = n; j < cm.ld; j++) cr_assert(isnan(tmat_get(&cm, i, j)), "the store is clipped at column n");
  }
  cr_expect(worst / ref < BF16_TOL, "stream-K %dx%dx%d on %d programs: rel error %g", m, n, k, (int)programs,
            worst / ref);
  for (int t = 0; t < tiles; t++) cr_expect(hbuf_get(&count, t) == 0, "counter %d left at %g", t, hbuf_get(&count, t));
  hbuf_free(&a.b), hbuf_free(&b.b), hbuf_free(&cm.b), hbuf_free(&ws), hbuf_free(&count);
  tc_free(c);
}

/* 9 tiles of 128 x 256, 4 k-steps: on 4 programs 4 whole tiles and 5
 * cut into segments across programs; on 2 the tail is 3 tiles; on 9 and
 * 1 there is no tail (all stream-K, all whole tiles); on 7 segments of
 * 5 and 6 k-steps; on 40, more programs than the 36 k-steps (segments of
 * one k-step, 4 programs with nothing to do); on 16, 4 tiles of one
 * k-step each (whole tiles only). */
Test(std_gemm_streamk, tail_over_4_programs) { check_streamk(300, 520, 200, 4, 61); }
Test(std_gemm_streamk, tail_over_2_programs) { check_streamk(300, 520, 200, 2, 62); }
Test(std_gemm_streamk, all_streamed) { check_streamk(300, 520, 200, 9, 63); }
Test(std_gemm_streamk, one_program) { check_streamk(300, 520, 200, 1, 64); }
Test(std_gemm_streamk, seven_programs) { check_streamk(300, 520, 200, 7, 65); }
Test(std_gemm_streamk, more_programs_than_k_steps) { check_streamk(300, 520, 200, 40, 67); }
Test(std_gemm_streamk, more_programs_than_units) { check_streamk(130, 260, 64, 16, 66); }

static void check_tma_gemm(const char *file, const char *type, const char *out, int m, int n, int k, bool a_trans,
                           bool b_trans, double scale_a, double scale_b, double tol, uint64_t seed) {
  check_tma_gemm_on(file, type, out, m, n, k, a_trans, b_trans, scale_a, scale_b, tol, seed, 0, NULL);
}

Test(std_gemm_tma, bf16_ragged) {
  check_tma_gemm("lang/std/gemm_tma.tile", "bf16", "bf16", 136, 72, 40, false, false, 1, 1, BF16_TOL, 31);
}
Test(std_gemm_tma, f16_transposed_a_f32_out) {
  check_tma_gemm("lang/std/gemm_tma.tile", "f16", "f32", 72, 136, 72, true, false, 1, 1, BF16_TOL, 32);
}
Test(std_gemm_tma, bf16_transposed_b_two_tiles) {
  check_tma_gemm("lang/std/gemm_tma.tile", "bf16", "bf16", 200, 136, 64, false, true, 1, 1, BF16_TOL, 33);
}
/* fp8: B is given as B^T; the scales are powers of two whose product is not 1 */
Test(std_gemm_fp8, e4m3_ragged) {
  check_tma_gemm("lang/std/gemm_fp8.tile", "f8e4m3", "bf16", 136, 72, 144, false, true, 0.5, 0.25, BF16_TOL, 34);
}
Test(std_gemm_fp8, e5m2_f32_out) {
  check_tma_gemm("lang/std/gemm_fp8.tile", "f8e5m2", "f32", 64, 264, 48, false, true, 2, 0.125, BF16_TOL, 35);
}
Test(std_gemm_fp8, e4m3_one_tile) {
  check_tma_gemm("lang/std/gemm_fp8.tile", "f8e4m3", "bf16", 128, 256, 128, false, true, 1, 1, BF16_TOL, 36);
}

/* gemm_ws: each program walks tiles program_id(0), + num_programs(0), ... */
Test(std_gemm_ws, bf16_one_program_many_tiles) {
  check_tma_gemm_on("lang/std/gemm_ws.tile", "bf16", "bf16", 264, 520, 72, false, false, 1, 1, BF16_TOL, 37, 1, NULL);
}
Test(std_gemm_ws, f16_transposed_a_and_b_f32_out) {
  check_tma_gemm_on("lang/std/gemm_ws.tile", "f16", "f32", 136, 264, 40, true, true, 1, 1, BF16_TOL, 38, 2, NULL);
}
Test(std_gemm_ws, bf16_more_programs_than_tiles) {
  check_tma_gemm_on("lang/std/gemm_ws.tile", "bf16", "bf16", 72, 136, 64, false, true, 1, 1, BF16_TOL, 39, 3, NULL);
}
/* with clusters of 2 (tiles paired along m, B's copies multicast on the
 * GPU): one cluster walking 3 tile rows (the last pair half past m), and
 * more clusters than pairs */
Test(std_gemm_ws, bf16_cluster_2_one_cluster_odd_tile_rows) {
  check_tma_gemm_on("lang/std/gemm_ws.tile", "bf16", "bf16", 264, 520, 72, false, false, 1, 1, BF16_TOL, 40, 2, "2");
}
Test(std_gemm_ws, f16_cluster_2_transposed_more_clusters_than_pairs) {
  check_tma_gemm_on("lang/std/gemm_ws.tile", "f16", "f32", 136, 264, 40, true, true, 1, 1, BF16_TOL, 41, 6, "2");
}
/* clusters of 2 along n (A's copies multicast on the GPU): one cluster
 * walking 3 tile columns (the last pair half past n), and more clusters
 * than pairs */
Test(std_gemm_ws, bf16_cluster_2_along_n_one_cluster_odd_tile_columns) {
  check_tma_gemm_on("lang/std/gemm_ws.tile", "bf16", "bf16", 264, 776, 72, false, false, 1, 1, BF16_TOL, 42, 2, "2n");
}
Test(std_gemm_ws, f16_cluster_2_along_n_transposed_more_clusters_than_pairs) {
  check_tma_gemm_on("lang/std/gemm_ws.tile", "f16", "f32", 136, 264, 40, true, true, 1, 1, BF16_TOL, 43, 6, "2n");
}

/* gemm_ws_bias_act: act(A @ B + bias) against float64 */
static void check_ws_bias_act(int act, int m, int n, int k, uint64_t seed) {
  char act_s[8];
  snprintf(act_s, sizeof act_s, "%d", act);
  const char *defs[] = {"ACT", act_s, NULL};
  tc_compilation *c = harness_compile("lang/std/gemm_ws.tile", "gemm_ws_bias_act", defs);
  Rng rng = {seed};
  TMat a = tmat_new("bf16", m, k, 16, "a"), b = tmat_new("bf16", k, n, 16, "b"), cm = tmat_new("bf16", m, n, 8, "c");
  HBuf bias = hbuf_new("f32", (size_t)n, "bias");
  hbuf_fill_uniform(&a.b, &rng, -1, 1);
  hbuf_fill_uniform(&b.b, &rng, -1, 1);
  hbuf_fill_uniform(&bias, &rng, -1, 1);
  hbuf_poison(&cm.b);
  tc_arg args[7] = {tmat_arg(&cm), tmat_arg(&a), tmat_arg(&b), {.p = bias.data}, {.i = m}, {.i = n}, {.i = k}};
  const HBuf *bufs[] = {&cm.b, &a.b, &b.b, &bias};
  harness_run(c, (int64_t[3]){2, 1, 1}, args, 7, bufs, 4);
  double worst = 0, ref = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double sum = 0;
      for (int p = 0; p < k; p++) sum += tmat_get(&a, i, p) * tmat_get(&b, p, j);
      double want = act_ref(sum + hbuf_get(&bias, (size_t)j), act), got = tmat_get(&cm, i, j);
      worst = isnan(got) ? INFINITY : fmax(worst, fabs(got - want));
      ref = fmax(ref, fabs(want));
    }
  cr_expect(worst / ref < BF16_TOL, "act %d %dx%dx%d: rel error %g", act, m, n, k, worst / ref);
  hbuf_free(&a.b), hbuf_free(&b.b), hbuf_free(&cm.b), hbuf_free(&bias);
  tc_free(c);
}

Test(std_gemm_ws, bias_and_each_activation) {
  for (int act = 0; act <= 4; act++) check_ws_bias_act(act, 136, 264, 40, 40 + (uint64_t)act);
}

/* ---- flash attention ---- */

typedef struct AttnShape {
  int batch, heads, seqlen, dim;
  bool causal, bshd; /* layout: [b, s, h, d] instead of [b, h, s, d] */
} AttnShape;

/* Reference attention in double; q/k/v/out share the strides. */
static void attention_ref(const HBuf *q, const HBuf *k, const HBuf *v, double *out, AttnShape s, int64_t sb, int64_t sh,
                          int64_t sn, double scale) {
  double *p = malloc(sizeof(double) * s.seqlen);
  for (int b = 0; b < s.batch; b++)
    for (int h = 0; h < s.heads; h++)
      for (int i = 0; i < s.seqlen; i++) {
        int64_t qi = b * sb + h * sh + i * sn;
        double m = -INFINITY, l = 0;
        int last = s.causal ? i : s.seqlen - 1;
        for (int j = 0; j <= last; j++) {
          double dotv = 0;
          for (int d = 0; d < s.dim; d++) dotv += hbuf_get(q, qi + d) * hbuf_get(k, b * sb + h * sh + j * sn + d);
          p[j] = dotv * scale;
          m = fmax(m, p[j]);
        }
        for (int j = 0; j <= last; j++) l += (p[j] = exp(p[j] - m));
        for (int d = 0; d < s.dim; d++) {
          double o = 0;
          for (int j = 0; j <= last; j++) o += p[j] * hbuf_get(v, b * sb + h * sh + j * sn + d);
          out[qi + d] = o / l;
        }
      }
  free(p);
}

static void check_flash(AttnShape s, const char *const *blocks, uint64_t seed) {
  char dim[8];
  snprintf(dim, sizeof dim, "%d", s.dim);
  const char *defs[16] = {"HEAD_DIM", dim, "CAUSAL", s.causal ? "true" : "false"};
  int nd = 4;
  for (int i = 0; blocks && blocks[i]; i += 2) defs[nd++] = blocks[i], defs[nd++] = blocks[i + 1];
  defs[nd] = NULL;
  tc_compilation *c = harness_compile("lang/std/flash_attention.tile", NULL, defs);
  int64_t block_m;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK_M", &block_m));
  Rng rng = {seed};
  size_t total = (size_t)s.batch * s.heads * s.seqlen * s.dim;
  HBuf q = hbuf_new("bf16", total, "q"), k = hbuf_new("bf16", total, "k"), v = hbuf_new("bf16", total, "v"),
       o = hbuf_new("bf16", total, "out");
  hbuf_fill_uniform(&q, &rng, -1, 1);
  hbuf_fill_uniform(&k, &rng, -1, 1);
  hbuf_fill_uniform(&v, &rng, -1, 1);
  hbuf_poison(&o);
  int64_t sn = s.bshd ? (int64_t)s.heads * s.dim : s.dim;
  int64_t sh = s.bshd ? s.dim : (int64_t)s.seqlen * s.dim;
  int64_t sb = (int64_t)s.heads * s.seqlen * s.dim;
  double scale = 1.0 / sqrt((double)s.dim);
  tc_arg args[10] = {{.p = o.data}, {.p = q.data},        {.p = k.data}, {.p = v.data}, {.i = s.seqlen},
                     {.i = s.heads}, {.f = (float)scale}, {.i = sb},     {.i = sh},     {.i = sn}};
  const HBuf *bufs[] = {&o, &q, &k, &v};
  harness_run(c, (int64_t[3]){harness_cdiv(s.seqlen, block_m), (int64_t)s.batch * s.heads, 1}, args, 10, bufs, 4);
  double *want = malloc(sizeof(double) * total);
  attention_ref(&q, &k, &v, want, s, sb, sh, sn, (float)scale);
  double err = rel_error(&o, want, total);
  cr_expect(err < BF16_TOL, "flash attention b%d h%d n%d d%d causal %d: rel error %g", s.batch, s.heads, s.seqlen,
            s.dim, s.causal, err);
  free(want);
  hbuf_free(&q), hbuf_free(&k), hbuf_free(&v), hbuf_free(&o);
  tc_free(c);
}

static const char *const fa_small[] = {"BLOCK_M", "64", "BLOCK_N", "32", NULL};

Test(std_flash_attention, d64_full_ragged) { check_flash((AttnShape){1, 2, 200, 64, false, false}, NULL, 31); }
Test(std_flash_attention, d128_causal_bshd) { check_flash((AttnShape){2, 1, 130, 128, true, true}, NULL, 32); }
Test(std_flash_attention, d64_causal_small_blocks) { check_flash((AttnShape){1, 3, 97, 64, true, false}, fa_small, 33); }
Test(std_flash_attention, d128_full_exact_blocks) { check_flash((AttnShape){1, 1, 128, 128, false, true}, fa_small, 34); }
