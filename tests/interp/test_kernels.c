/* test_kernels.c - the kernels of tests/kernels run in the interpreter on
 * fresh random inputs (outputs poisoned first) against C references in
 * double, on at least three shapes each, including sizes that are not
 * multiples of the block. The cast test checks against conversions written
 * here independently of the compiler's numeric code. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "act_ref.h"

#define F32_TOL 1e-5
#define BF16_TOL 1e-2

/* ---- vector add ---- */

static void check_vector_add(const char *type, int n, const char *block, uint64_t seed) {
  const char *defs[] = {"T", type, "BLOCK", block, NULL};
  tc_compilation *c = harness_compile("tests/kernels/vector_add.tile", NULL, defs);
  Rng rng = {seed};
  HBuf z = hbuf_new(type, n, "z"), x = hbuf_new(type, n, "x"), y = hbuf_new(type, n, "y");
  hbuf_fill_uniform(&x, &rng, -100, 100);
  hbuf_fill_uniform(&y, &rng, -100, 100);
  hbuf_poison(&z);
  tc_arg args[4] = {{.p = z.data}, {.p = x.data}, {.p = y.data}, {.i = n}};
  const HBuf *bufs[] = {&z, &x, &y};
  int b = atoi(block);
  harness_run(c, (int64_t[3]){(n + b - 1) / b, 1, 1}, args, 4, bufs, 3);
  double *want = malloc(sizeof(double) * n);
  for (int i = 0; i < n; i++) want[i] = hbuf_get(&x, i) + hbuf_get(&y, i);
  double err = rel_error(&z, want, n);
  cr_expect(err < (strcmp(type, "bf16") ? F32_TOL : BF16_TOL), "vector_add %s n=%d: error %g", type, n, err);
  free(want);
  hbuf_free(&z), hbuf_free(&x), hbuf_free(&y);
  tc_free(c);
}

Test(kernel_vector_add, f32) { check_vector_add("f32", 1000, "256", 1); }
Test(kernel_vector_add, i32_exact) { check_vector_add("i32", 4097, "1024", 2); }
Test(kernel_vector_add, bf16_one_element) { check_vector_add("bf16", 1, "64", 3); check_vector_add("bf16", 333, "64", 4); }

/* ---- reductions ---- */

static void check_reductions(int rows, int cols, uint64_t seed) {
  tc_compilation *c = harness_compile("tests/kernels/reductions.tile", NULL, NULL);
  Rng rng = {seed};
  HBuf x = hbuf_new("f32", (size_t)rows * cols, "x"), rs = hbuf_new("f32", rows, "row_sum"),
       rm = hbuf_new("f32", rows, "row_max"), ra = hbuf_new("i32", rows, "row_argmax"),
       cs = hbuf_new("f32", cols, "col_sum"), tot = hbuf_new("f32", 1, "total");
  hbuf_fill_uniform(&x, &rng, -10, 10);
  /* A tie for the maximum in row 0: argmax must give the first index. */
  if (cols > 3) hbuf_set(&x, 3, 50), hbuf_set(&x, cols - 1, 50);
  hbuf_poison(&rs), hbuf_poison(&rm), hbuf_poison(&ra);
  memset(cs.data, 0, cols * sizeof(float));
  memset(tot.data, 0, sizeof(float));
  tc_arg args[8] = {{.p = rs.data}, {.p = rm.data}, {.p = ra.data}, {.p = cs.data},
                    {.p = tot.data}, {.p = x.data}, {.i = rows}, {.i = cols}};
  const HBuf *bufs[] = {&rs, &rm, &ra, &cs, &tot, &x};
  harness_run(c, (int64_t[3]){(rows + 15) / 16, 1, 1}, args, 8, bufs, 6);
  double *wrs = calloc(rows, sizeof(double)), *wrm = calloc(rows, sizeof(double)), *wcs = calloc(cols, sizeof(double));
  double total = 0;
  for (int r = 0; r < rows; r++) {
    double m = -INFINITY;
    int am = 0;
    for (int j = 0; j < cols; j++) {
      double v = hbuf_get(&x, (size_t)r * cols + j);
      wrs[r] += v, wcs[j] += v, total += v;
      if (v > m) m = v, am = j;
    }
    wrm[r] = m;
    cr_expect(hbuf_get(&ra, r) == am, "row %d argmax %g, expected %d", r, hbuf_get(&ra, r), am);
  }
  cr_expect(rel_error(&rs, wrs, rows) < F32_TOL);
  cr_expect(rel_error(&rm, wrm, rows) == 0);
  cr_expect(rel_error(&cs, wcs, cols) < F32_TOL, "col sums: %g", rel_error(&cs, wcs, cols));
  cr_expect(fabs(hbuf_get(&tot, 0) - total) <= 1e-5 * fmax(1, fabs(total)) + 1e-4, "total %g vs %g", hbuf_get(&tot, 0), total);
  free(wrs), free(wrm), free(wcs);
  hbuf_free(&x), hbuf_free(&rs), hbuf_free(&rm), hbuf_free(&ra), hbuf_free(&cs), hbuf_free(&tot);
  tc_free(c);
}

Test(kernel_reductions, exact_tiles) { check_reductions(16, 64, 5); }
Test(kernel_reductions, ragged) { check_reductions(33, 50, 6); }
Test(kernel_reductions, one_column) { check_reductions(5, 1, 7); }

/* ---- casts: references written independently of numeric.c ---- */

/* Nearest value on a float grid with `mbits` mantissa bits, exponent range
 * [emin, ...], ties to even, computed by scaling into an integer. */
static double round_grid(double x, int mbits, int emin) {
  if (x == 0 || isnan(x) || isinf(x)) return x;
  int e;
  frexp(x, &e); /* x = f * 2^e, 0.5 <= |f| < 1 */
  e -= 1;
  if (e < emin) e = emin;
  double scale = ldexp(1.0, mbits - e);
  double r = x * scale, fl = floor(r), diff = r - fl;
  double q = diff > 0.5 ? fl + 1 : diff < 0.5 ? fl : (fmod(fl, 2) == 0 ? fl : fl + 1);
  return copysign(q / scale, x); /* keeps the sign of values that round to zero */
}

static double ref_bf16(double x) {
  double r = round_grid(x, 7, -126);
  return fabs(r) > 0x1.fep127 ? copysign(INFINITY, x) : r;
}
static double ref_f16(double x) {
  double r = round_grid(x, 10, -14);
  return fabs(r) > 65504 ? copysign(INFINITY, x) : r;
}
/* fp8 conversions saturate: overflow and infinity give the largest finite. */
static double ref_fp8(double x, int mbits, int emin, double maxv) {
  if (isnan(x)) return x;
  if (isinf(x)) return copysign(maxv, x);
  double r = round_grid(x, mbits, emin);
  return fabs(r) > maxv ? copysign(maxv, x) : r;
}
static double ref_int(double x, double lo, double hi) {
  if (isnan(x)) return 0;
  double t = trunc(x);
  return t < lo ? lo : t > hi ? hi : t + 0.0; /* +0.0: integers have no -0 */
}

static void check_casts(int n, uint64_t seed) {
  tc_compilation *c = harness_compile("tests/kernels/casts.tile", NULL, NULL);
  Rng rng = {seed};
  HBuf x = hbuf_new("f32", n, "x");
  const char *types[] = {"bf16", "f16", "f8e4m3", "f8e5m2", "i32", "u8", "f32"};
  const char *names[] = {"to_bf16", "to_f16", "to_e4m3", "to_e5m2", "to_i32", "to_u8", "back"};
  HBuf out[7];
  for (int i = 0; i < 7; i++) out[i] = hbuf_new(types[i], n, names[i]);
  static const double specials[] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, 448, 464, 480, 65504, 65520, 3e9,
                                    -3e9, 255.5, 256, -0.0, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 1e-40, 0x1p-10, 0x1p-17};
  for (int i = 0; i < n; i++) {
    double v = (rng_next(&rng) & 1) ? rng_uniform(&rng, -300, 300) : rng_uniform(&rng, -2, 2);
    hbuf_set(&x, i, i < (int)(sizeof specials / sizeof specials[0]) ? specials[i] : v);
  }
  for (int i = 0; i < 7; i++) hbuf_poison(&out[i]);
  tc_arg args[9];
  const HBuf *bufs[8];
  for (int i = 0; i < 7; i++) args[i] = (tc_arg){.p = out[i].data}, bufs[i] = &out[i];
  args[7] = (tc_arg){.p = x.data}, bufs[7] = &x;
  args[8] = (tc_arg){.i = n};
  harness_run(c, (int64_t[3]){(n + 255) / 256, 1, 1}, args, 9, bufs, 8);
  for (int i = 0; i < n; i++) {
    double v = hbuf_get(&x, i);
    double want[7] = {ref_bf16(v), ref_f16(v), ref_fp8(v, 3, -6, 448), ref_fp8(v, 2, -14, 57344),
                      ref_int(v, -2147483648.0, 2147483647.0), ref_int(v, 0, 255), ref_bf16(v)};
    for (int t = 0; t < 7; t++) {
      double got = hbuf_get(&out[t], i);
      bool same = (isnan(got) && isnan(want[t])) || (got == want[t] && signbit(got) == signbit(want[t]));
      cr_expect(same, "%s of %a: got %a, expected %a", names[t], v, got, want[t]);
    }
  }
  for (int i = 0; i < 7; i++) hbuf_free(&out[i]);
  hbuf_free(&x);
  tc_free(c);
}

Test(kernel_casts, specials_and_random) { check_casts(256, 8); }
Test(kernel_casts, ragged) { check_casts(1000, 9); }
Test(kernel_casts, short) { check_casts(7, 10); }

/* ---- atomics ---- */

static void check_histogram(int n, int bins, uint64_t seed) {
  tc_compilation *c = harness_compile("tests/kernels/atomics.tile", NULL, NULL);
  Rng rng = {seed};
  HBuf hist = hbuf_new("i32", bins, "hist"), gmax = hbuf_new("i32", 1, "gmax"), x = hbuf_new("i32", n, "x");
  /* Some values fall outside [0, bins) and must be ignored. */
  hbuf_fill_uniform(&x, &rng, -2, bins + 2);
  memset(hist.data, 0, (size_t)bins * 4);
  hbuf_set(&gmax, 0, -2147483648.0);
  tc_arg args[5] = {{.p = hist.data}, {.p = gmax.data}, {.p = x.data}, {.i = n}, {.i = bins}};
  const HBuf *bufs[] = {&hist, &gmax, &x};
  harness_run(c, (int64_t[3]){(n + 127) / 128, 1, 1}, args, 5, bufs, 3);
  int *want = calloc(bins, sizeof(int));
  int mx = -2147483647 - 1;
  for (int i = 0; i < n; i++) {
    int v = (int)hbuf_get(&x, i);
    if (v >= 0 && v < bins) want[v]++;
    if (v > mx) mx = v;
  }
  for (int b = 0; b < bins; b++) cr_expect(hbuf_get(&hist, b) == want[b], "bin %d: %g vs %d", b, hbuf_get(&hist, b), want[b]);
  cr_expect(hbuf_get(&gmax, 0) == mx);
  free(want);
  hbuf_free(&hist), hbuf_free(&gmax), hbuf_free(&x);
  tc_free(c);
}

Test(kernel_atomics, one_block) { check_histogram(128, 17, 11); }
Test(kernel_atomics, ragged) { check_histogram(1000, 17, 12); }
Test(kernel_atomics, few) { check_histogram(5, 3, 13); }

/* ---- a split reduction merged by the last program (fence) ---- */

static void check_split_rowsum(int rows, int cols, uint64_t seed) {
  tc_compilation *c = harness_compile("tests/kernels/split_reduce.tile", NULL, NULL);
  const int block = 256, splits = (cols + block - 1) / block;
  Rng rng = {seed};
  HBuf out = hbuf_new("f32", rows, "out"), part = hbuf_new("f32", (size_t)rows * splits, "part");
  HBuf count = hbuf_new("i32", rows, "count"), x = hbuf_new("f32", (size_t)rows * cols, "x");
  hbuf_fill_uniform(&x, &rng, -1, 1);
  hbuf_poison(&out), hbuf_poison(&part);
  memset(count.data, 0, (size_t)rows * 4);
  tc_arg args[5] = {{.p = out.data}, {.p = part.data}, {.p = count.data}, {.p = x.data}, {.i = cols}};
  const HBuf *bufs[] = {&out, &part, &count, &x};
  harness_run(c, (int64_t[3]){rows, splits, 1}, args, 5, bufs, 4);
  for (int r = 0; r < rows; r++) {
    double want = 0, mag = 0;
    for (int j = 0; j < cols; j++) {
      double v = hbuf_get(&x, (size_t)r * cols + j);
      want += v, mag += fabs(v);
    }
    double got = hbuf_get(&out, r);
    cr_expect(fabs(got - want) <= 1e-5 * mag, "row %d: %.9g, expected %.9g", r, got, want);
    cr_expect(hbuf_get(&count, r) == 0, "row %d: the counter is left at %g", r, hbuf_get(&count, r));
  }
  hbuf_free(&out), hbuf_free(&part), hbuf_free(&count), hbuf_free(&x);
  tc_free(c);
}

Test(kernel_fence, split_rows) { check_split_rowsum(5, 1000, 21); }
Test(kernel_fence, one_split) { check_split_rowsum(3, 200, 22); }
Test(kernel_fence, many_splits) { check_split_rowsum(2, 64 * 256, 23); }

/* ---- naive attention ---- */

static void check_naive_attention(int bh, int seqlen, bool causal, uint64_t seed) {
  const char *defs[] = {"CAUSAL", causal ? "true" : "false", NULL};
  tc_compilation *c = harness_compile("tests/kernels/naive_attention.tile", NULL, defs);
  Rng rng = {seed};
  const int D = 64;
  size_t total = (size_t)bh * seqlen * D;
  HBuf o = hbuf_new("f32", total, "out"), q = hbuf_new("bf16", total, "q"), k = hbuf_new("bf16", total, "k"),
       v = hbuf_new("bf16", total, "v");
  hbuf_fill_uniform(&q, &rng, -1, 1), hbuf_fill_uniform(&k, &rng, -1, 1), hbuf_fill_uniform(&v, &rng, -1, 1);
  hbuf_poison(&o);
  float scale = 0.125f;
  tc_arg args[6] = {{.p = o.data}, {.p = q.data}, {.p = k.data}, {.p = v.data}, {.i = seqlen}, {.f = scale}};
  const HBuf *bufs[] = {&o, &q, &k, &v};
  harness_run(c, (int64_t[3]){bh, 1, 1}, args, 6, bufs, 4);
  double *want = malloc(sizeof(double) * total), *p = malloc(sizeof(double) * seqlen);
  for (int b = 0; b < bh; b++)
    for (int i = 0; i < seqlen; i++) {
      size_t qi = ((size_t)b * seqlen + i) * D;
      double m = -INFINITY, l = 0;
      int last = causal ? i : seqlen - 1;
      for (int j = 0; j <= last; j++) {
        double s = 0;
        for (int d = 0; d < D; d++) s += hbuf_get(&q, qi + d) * hbuf_get(&k, ((size_t)b * seqlen + j) * D + d);
        m = fmax(m, p[j] = s * scale);
      }
      for (int j = 0; j <= last; j++) l += (p[j] = exp(p[j] - m));
      for (int d = 0; d < D; d++) {
        double acc = 0;
        for (int j = 0; j <= last; j++) acc += p[j] * hbuf_get(&v, ((size_t)b * seqlen + j) * D + d);
        want[qi + d] = acc / l;
      }
    }
  double err = rel_error(&o, want, total);
  cr_expect(err < F32_TOL, "naive attention bh %d n %d causal %d: %g", bh, seqlen, causal, err);
  free(want), free(p);
  hbuf_free(&o), hbuf_free(&q), hbuf_free(&k), hbuf_free(&v);
  tc_free(c);
}

Test(kernel_naive_attention, ragged) { check_naive_attention(2, 100, false, 14); }
Test(kernel_naive_attention, full_block_causal) { check_naive_attention(1, 128, true, 15); }
Test(kernel_naive_attention, short_causal) { check_naive_attention(3, 17, true, 16); }

/* ---- tma_copy: load_block / store_block windows ---- */

/* dst[i, j] = 2 * src[r0 + i, c0 + j] where that is inside src, 0 where
 * it is outside; dst's padding columns (past its described width) stay
 * poisoned. */
static void check_tma_copy(const char *type, int rows, int cols, int drows, int dcols, int r0, int c0,
                           const char *const *defs, uint64_t seed) {
  tc_compilation *c = harness_compile("tests/kernels/tma_copy.tile", NULL, defs);
  Rng rng = {seed};
  int sld = cols + 8, dld = dcols + 8;
  HBuf src = hbuf_new(type, (size_t)rows * sld, "src"), dst = hbuf_new(type, (size_t)drows * dld, "dst");
  hbuf_fill_uniform(&src, &rng, -8, 8);
  hbuf_poison(&dst);
  tc_arg args[6] = {{.p = dst.data, .shape = {drows, dcols}, .strides = {dld, 1}},
                    {.p = src.data, .shape = {rows, cols}, .strides = {sld, 1}},
                    {.i = r0},
                    {.i = c0},
                    {.f = 2.0},
                    {.i = 1}};
  const HBuf *bufs[] = {&dst, &src};
  int64_t br = 32, bc = 64;
  for (int i = 0; defs && defs[i]; i += 2) {
    if (!strcmp(defs[i], "BR")) br = atoi(defs[i + 1]);
    if (!strcmp(defs[i], "BC")) bc = atoi(defs[i + 1]);
  }
  harness_run(c, (int64_t[3]){(drows + br - 1) / br, (dcols + bc - 1) / bc, 1}, args, 6, bufs, 2);
  for (int i = 0; i < drows; i++)
    for (int j = 0; j < dld; j++) {
      double got = hbuf_get(&dst, (size_t)i * dld + j);
      if (j >= dcols) {
        cr_assert(isnan(got), "[%d, %d] is past the tensor's width and must not be written", i, j);
        continue;
      }
      int r = r0 + i, s = c0 + j;
      double want = r >= 0 && r < rows && s >= 0 && s < cols ? 2 * hbuf_get(&src, (size_t)r * sld + s) : 0;
      /* bf16: 2x is exact, the copy rounds nothing */
      cr_assert_eq(got, want, "[%d, %d]: %g, expected %g", i, j, got, want);
    }
  hbuf_free(&src), hbuf_free(&dst);
  tc_free(c);
}

Test(kernel_tma_copy, inside) { check_tma_copy("f32", 100, 200, 64, 128, 8, 16, NULL, 41); }
Test(kernel_tma_copy, across_and_outside_the_edges) {
  check_tma_copy("f32", 70, 92, 96, 192, -5, -32, NULL, 42);
  check_tma_copy("f32", 100, 200, 96, 192, 40, 96, NULL, 43);
}
Test(kernel_tma_copy, bf16_big_boxes) {
  const char *defs[] = {"T", "bf16", "BR", "128", "BC", "128", NULL};
  check_tma_copy("bf16", 300, 264, 256, 256, 20, 8, defs, 44);
}

/* ---- loop_limits: loops end where the next induction value would wrap ---- */

static void check_loop_limits(int32_t lo, int32_t hi, int32_t step, uint32_t ulo, uint32_t uhi, uint32_t ustep) {
  tc_compilation *c = harness_compile("tests/kernels/loop_limits.tile", NULL, NULL);
  HBuf out = hbuf_new("i32", 6, "out");
  hbuf_poison(&out);
  tc_arg args[7] = {{.p = out.data}, {.i = lo}, {.i = hi}, {.i = step}, {.i = ulo}, {.i = uhi}, {.i = ustep}};
  const HBuf *bufs[] = {&out};
  harness_run(c, (int64_t[3]){1, 1, 1}, args, 7, bufs, 1);
  /* the reference counts in 64 bits: no wrap-around at all */
  int64_t n = 0, un = 0, dn = 0;
  uint32_t s = 0, us = 0, ds = 0;
  for (int64_t i = lo; i < hi; i += step) n++, s += (uint32_t)i;
  for (int64_t j = ulo; j < uhi; j += ustep) un++, us += (uint32_t)j;
  for (int64_t k = -(int64_t)lo; k > -(int64_t)hi - 1; k -= step) dn++, ds += (uint32_t)k;
  const int64_t want[6] = {n, un, dn, (int32_t)s, (int32_t)us, (int32_t)ds};
  for (int i = 0; i < 6; i++) cr_expect_eq((int64_t)hbuf_get(&out, i), want[i], "out[%d]", i);
  hbuf_free(&out);
  tc_free(c);
}

Test(kernel_loop_limits, near_the_top_of_i32_and_u32) {
  check_loop_limits(2147483640, 2147483647, 5, 4294967290u, 4294967295u, 4);
}
Test(kernel_loop_limits, exact_ends_and_big_steps) {
  check_loop_limits(2147483600, 2147483647, 47, 4000000000u, 4294967295u, 100000000);
}
Test(kernel_loop_limits, ordinary_ranges) { check_loop_limits(-20, 37, 3, 5, 100, 7); }

/* ---- gpu_regressions: what tile-gpu diff found, in the interpreter ---- */

Test(kernels, gpu_regressions_values) {
  tc_compilation *c = harness_compile("tests/kernels/gpu_regressions.tile", NULL, NULL);
  Rng rng = {77};
  HBuf h = hbuf_new("i16", 64, "h"), w = hbuf_new("i32", 65, "w"), b = hbuf_new("i8", 33, "b");
  HBuf x16 = hbuf_new("f16", 512, "x16"), y16 = hbuf_new("f16", 256, "y16"), tmp = hbuf_new("f32", 512, "tmp");
  HBuf t_out = hbuf_new("f32", 512, "t_out"), neg = hbuf_new("i32", 32, "neg_out"), abs_ = hbuf_new("i32", 32, "abs_out");
  HBuf absw = hbuf_new("i32", 32, "absw_out"), f16o = hbuf_new("f16", 32, "f16_out"), bfo = hbuf_new("bf16", 32, "bf_out");
  HBuf mma = hbuf_new("f32", 512, "mma_out"), loop = hbuf_new("i8", 1, "loop_out");
  HBuf f = hbuf_new("f32", 32, "f"), bf = hbuf_new("bf16", 32, "bf"), shr = hbuf_new("f32", 32, "shr_out");
  HBuf mix = hbuf_new("f16", 32, "mix_out");
  hbuf_fill_uniform(&f, &rng, 0, 20);
  hbuf_fill_uniform(&bf, &rng, 65536, 80000);
  hbuf_fill_uniform(&h, &rng, -1000, 1000);
  hbuf_fill_uniform(&w, &rng, -1000, 1000);
  hbuf_fill_uniform(&b, &rng, -100, 100);
  hbuf_fill_uniform(&x16, &rng, -2, 2);
  hbuf_fill_uniform(&y16, &rng, -2, 2);
  hbuf_set(&h, 3, -32768), hbuf_set(&h, 32 + 5, -32768), hbuf_set(&h, 7, 32767);
  hbuf_set(&w, 4, -2147483648.0), hbuf_set(&w, 32, 100000), hbuf_set(&w, 33, -70000), hbuf_set(&w, 34, 65520), hbuf_set(&w, 35, 65519);
  hbuf_set(&w, 64, 300);
  hbuf_set(&b, 2, -3), hbuf_set(&b, 32, 1);
  HBuf *all[] = {&h,    &w,   &b,    &x16, &y16, &tmp, &t_out, &neg, &abs_,
                 &absw, &f16o, &bfo, &mma, &loop, &f,   &bf,    &shr, &mix};
  enum { NARGS = sizeof all / sizeof all[0] };
  tc_arg args[NARGS];
  for (int i = 0; i < NARGS; i++) {
    if ((i >= 5 && i < 14) || i >= 16) hbuf_poison(all[i]);
    args[i] = (tc_arg){.p = all[i]->data};
  }
  harness_run(c, (int64_t[3]){1, 1, 1}, args, NARGS, (const HBuf *const *)all, NARGS);
  for (int i = 0; i < 512; i++)
    cr_expect_eq(hbuf_get(&t_out, i), ((i % 32) * 16 + i / 32) * 0.5, "t_out[%d]", i);
  cr_expect_eq(hbuf_get(&neg, 3), -32768, "-(-32768) wraps in i16");
  cr_expect_eq(hbuf_get(&neg, 7), -32767);
  cr_expect_eq(hbuf_get(&abs_, 5), -32768, "abs(-32768) wraps in i16");
  for (int i = 0; i < 32; i++) cr_expect_eq(hbuf_get(&absw, i), i == 4 ? 1 : 0, "absw_out[%d]", i);
  cr_expect(isinf(hbuf_get(&f16o, 0)) && hbuf_get(&f16o, 0) > 0, "100000 as f16 is inf");
  cr_expect(isinf(hbuf_get(&f16o, 1)) && hbuf_get(&f16o, 1) < 0, "-70000 as f16 is -inf");
  cr_expect(isinf(hbuf_get(&f16o, 2)), "65520 rounds (to even) to inf");
  cr_expect_eq(hbuf_get(&f16o, 3), 65504, "65519 rounds down");
  cr_expect_eq(hbuf_get(&bfo, 2), 4294967296.0, "-3 as u32 is 4294967293, as bf16 2^32");
  double want[512];
  for (int i = 0; i < 32; i++)
    for (int j = 0; j < 16; j++) {
      double acc = 3.0;
      for (int t = 0; t < 16; t++) acc += hbuf_get(&x16, i * 16 + t) * hbuf_get(&y16, t * 16 + j);
      want[i * 16 + j] = acc;
    }
  cr_expect_lt(rel_error(&mma, want, 60), 1e-5, "the product's stored elements");
  cr_expect(isnan(hbuf_get(&mma, 60)) && isnan(hbuf_get(&mma, 511)), "masked-off elements keep the poison (NaN)");
  cr_expect_eq(hbuf_get(&loop, 0), 7, "1 + 1 + 2 + 3");
  int finite_mix = 0;
  for (int j = 0; j < 32; j++) {
    double fv = hbuf_get(&f, j);
    cr_expect_eq(hbuf_get(&shr, j), fv > 10 ? 0.0 : -1.0, "shr_out[%d]", j);
    double p = hbuf_get(&x16, j) * hbuf_get(&bf, j); /* exact in double; f32 rounding then f16 rounding */
    double want_mix = fabs((double)(float)p) >= 65520 ? copysign(INFINITY, p) : p;
    if (isfinite(want_mix)) {
      finite_mix++;
      cr_expect_leq(fabs(hbuf_get(&mix, j) - p), fabs(p) * 0x1p-11, "mix_out[%d]: %g * %g", j, hbuf_get(&x16, j),
                    hbuf_get(&bf, j));
    } else {
      cr_expect_eq(hbuf_get(&mix, j), want_mix, "mix_out[%d]", j);
    }
  }
  cr_expect_gt(finite_mix, 8, "products below the f16 range from bf16 operands above it");
  for (int i = 0; i < NARGS; i++) hbuf_free(all[i]);
  tc_free(c);
}

Test(kernels, gpu_regressions_minmax_values) {
  tc_compilation *c = harness_compile("tests/kernels/gpu_regressions_minmax.tile", NULL, NULL);
  Rng rng = {78};
  HBuf m = hbuf_new("i32", 512, "m"), wide = hbuf_new("f64", 256, "wide");
  HBuf mino = hbuf_new("f32", 32, "min_out"), maxo = hbuf_new("i32", 32, "max_out");
  hbuf_fill_uniform(&m, &rng, -300, 300);
  hbuf_poison(&wide), hbuf_poison(&mino), hbuf_poison(&maxo);
  const HBuf *all[] = {&m, &wide, &mino, &maxo};
  tc_arg args[5] = {{.p = m.data}, {.i = 7}, {.p = wide.data}, {.p = mino.data}, {.p = maxo.data}};
  harness_run(c, (int64_t[3]){1, 1, 1}, args, 5, all, 4);
  for (int j = 0; j < 32; j++) {
    double lo = 1e300, hi = -1e300;
    for (int i = 0; i < 8; i++)
      lo = fmin(lo, -64 * hbuf_get(&m, (size_t)i * 32 + j)), hi = fmax(hi, -hbuf_get(&m, 256 + (size_t)i * 32 + j));
    cr_expect_eq(hbuf_get(&mino, j), lo, "min_out[%d]", j);
    cr_expect_eq(hbuf_get(&maxo, j), hi, "max_out[%d]", j);
  }
  for (int i = 0; i < 256; i++) cr_expect_eq(hbuf_get(&wide, i), 7, "wide[%d]", i);
  hbuf_free(&m), hbuf_free(&wide), hbuf_free(&mino), hbuf_free(&maxo);
  tc_free(c);
}

/* ---- prefix sums (tests/kernels/scans.tile) ---- */

static void check_scans(int rows, int cols, int n, uint64_t seed) {
  tc_compilation *c = harness_compile("tests/kernels/scans.tile", NULL, NULL);
  Rng rng = {seed};
  enum { BLOCK_R = 16, BLOCK_V = 128, VALUES = 8 };
  int programs = (rows + BLOCK_R - 1) / BLOCK_R;
  if ((n + BLOCK_V - 1) / BLOCK_V > programs) programs = (n + BLOCK_V - 1) / BLOCK_V;
  size_t cells = (size_t)rows * cols;
  HBuf rs = hbuf_new("f32", cells, "row_scan"), cs = hbuf_new("f32", cells, "col_scan"), rk = hbuf_new("i32", n, "ranks"),
       cnt = hbuf_new("u32", programs, "counts"), x = hbuf_new("f32", cells, "x"), v = hbuf_new("i32", n, "v"),
       by = hbuf_new("u8", n, "bytes");
  hbuf_fill_uniform(&x, &rng, -10, 10);
  for (int i = 0; i < n; i++) hbuf_set(&v, i, (int)rng_uniform(&rng, 0, VALUES));
  hbuf_fill_uniform(&by, &rng, 0, 8);
  hbuf_poison(&rs), hbuf_poison(&cs), hbuf_poison(&rk), hbuf_poison(&cnt);
  tc_arg args[10] = {{.p = rs.data}, {.p = cs.data}, {.p = rk.data}, {.p = cnt.data}, {.p = x.data},
                     {.p = v.data},  {.p = by.data}, {.i = rows},     {.i = cols},     {.i = n}};
  const HBuf *bufs[] = {&rs, &cs, &rk, &cnt, &x, &v, &by};
  harness_run(c, (int64_t[3]){programs, 1, 1}, args, 10, bufs, 7);
  double *wr = calloc(cells, sizeof(double)), *wc = calloc(cells, sizeof(double));
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < cols; j++) {
      double xv = hbuf_get(&x, (size_t)r * cols + j);
      wr[(size_t)r * cols + j] = xv + (j ? wr[(size_t)r * cols + j - 1] : 0);
      wc[(size_t)r * cols + j] = xv + (r % BLOCK_R ? wc[(size_t)(r - 1) * cols + j] : 0);
    }
  cr_expect(rel_error(&rs, wr, cells) < F32_TOL, "row scans: %g", rel_error(&rs, wr, cells));
  cr_expect(rel_error(&cs, wc, cells) < F32_TOL, "column scans: %g", rel_error(&cs, wc, cells));
  for (int i = 0; i < n; i++) {
    int want = 0;
    for (int j = i - i % BLOCK_V; j < i; j++) want += hbuf_get(&v, j) == hbuf_get(&v, i);
    cr_expect_eq(hbuf_get(&rk, i), want, "ranks[%d] = %g, want %d", i, hbuf_get(&rk, i), want);
  }
  for (int p = 0; p < programs; p++) {
    int want = 0;
    for (int i = p * BLOCK_V; i < n && i < (p + 1) * BLOCK_V; i++) want += hbuf_get(&by, i) < 4;
    cr_expect_eq(hbuf_get(&cnt, p), want, "counts[%d] = %g, want %d", p, hbuf_get(&cnt, p), want);
  }
  free(wr), free(wc);
  hbuf_free(&rs), hbuf_free(&cs), hbuf_free(&rk), hbuf_free(&cnt), hbuf_free(&x), hbuf_free(&v), hbuf_free(&by);
  tc_free(c);
}

Test(kernel_scans, ragged) { check_scans(40, 50, 300, 81); }
Test(kernel_scans, exact_tiles) { check_scans(16, 64, 128, 82); }
Test(kernel_scans, few) { check_scans(5, 1, 7, 83); }

/* bias_act: C = act(C + bias) in place, the GEMM epilogue as a kernel. */
Test(kernels, bias_act_applies_bias_and_activation_in_place) {
  const int m = 3, n = 2056, ldc = 2064;
  for (int act = 0; act <= 4; act++) {
    char act_s[8];
    snprintf(act_s, sizeof act_s, "%d", act);
    const char *defs[] = {"T", "f32", "ACT", act_s, NULL};
    tc_compilation *c = harness_compile("tests/kernels/bias_act.tile", NULL, defs);
    HBuf cm = hbuf_new("f32", (size_t)m * ldc, "c"), bias = hbuf_new("f32", (size_t)n, "bias");
    Rng rng = {70 + (uint64_t)act};
    hbuf_fill_uniform(&cm, &rng, -2, 2);
    hbuf_fill_uniform(&bias, &rng, -1, 1);
    double *before = malloc(sizeof(double) * (size_t)m * ldc);
    for (size_t i = 0; i < (size_t)m * ldc; i++) before[i] = hbuf_get(&cm, i);
    tc_arg args[5] = {{.p = cm.data}, {.p = bias.data}, {.i = m}, {.i = n}, {.i = ldc}};
    const HBuf *bufs[] = {&cm, &bias};
    harness_run(c, (int64_t[3]){2, m, 1}, args, 5, bufs, 2);
    double worst = 0;
    for (int i = 0; i < m; i++)
      for (int j = 0; j < ldc; j++) {
        double x = before[(size_t)i * ldc + j], got = hbuf_get(&cm, (size_t)i * ldc + j);
        if (j >= n) {
          cr_expect_eq(got, x, "padding column %d changed", j);
          continue;
        }
        x += hbuf_get(&bias, (size_t)j);
        double want = act_ref(x, act);
        worst = fmax(worst, fabs(got - want) / fmax(fabs(want), 1e-3));
      }
    cr_expect(worst < 1e-5, "act %d: relative error %g", act, worst);
    free(before);
    hbuf_free(&cm), hbuf_free(&bias);
    tc_free(c);
  }
}

/* tests/kernels/dot_fp8_reshaped_a.tile: both operands of an fp8 product
 * with k reordered the same way (k_order) give the plain product (to f32
 * rounding: the products are exact, their sums are not). */
Test(kernels, fp8_product_with_both_operands_in_k_order_is_the_product) {
  for (int warps = 4; warps <= 8; warps *= 2) {
    char w[4];
    snprintf(w, sizeof w, "%d", warps);
    const char *defs[] = {"WARPS", w, NULL};
    tc_compilation *c = harness_compile("tests/kernels/dot_fp8_reshaped_a.tile", NULL, defs);
    const int m = 128, n = 64, k = 64;
    HBuf a = hbuf_new("f8e4m3", (size_t)m * k, "a"), bt = hbuf_new("f8e4m3", (size_t)n * k, "bt");
    HBuf out = hbuf_new("f32", (size_t)m * n, "c");
    Rng rng = {90 + (uint64_t)warps};
    hbuf_fill_uniform(&a, &rng, -8, 8), hbuf_fill_uniform(&bt, &rng, -8, 8);
    hbuf_poison(&out);
    tc_arg args[3] = {{.p = out.data}, {.p = a.data}, {.p = bt.data}};
    const HBuf *bufs[] = {&out, &a, &bt};
    harness_run(c, (int64_t[3]){1, 1, 1}, args, 3, bufs, 3);
    double *want = malloc(sizeof(double) * (size_t)m * n);
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int kk = 0; kk < k; kk++) acc += hbuf_get(&a, (size_t)i * k + kk) * hbuf_get(&bt, (size_t)j * k + kk);
        want[(size_t)i * n + j] = acc;
      }
    double e = rel_error(&out, want, (size_t)m * n);
    cr_expect_lt(e, 1e-5, "warps %d: relative error %g", warps, e);
    free(want);
    hbuf_free(&a), hbuf_free(&bt), hbuf_free(&out);
    tc_free(c);
  }
}
