/* test_mlp.c - lang/std/mlp.tile in the interpreter against float64 on the
 * same rounded inputs: the fused gate/up projection with each activation
 * product, the down projection with and without the residual, and the
 * activation product's backward (against the derivative in double, and
 * against a central difference of the forward). Sizes are not multiples of
 * the blocks; the persistent kernels run on more programs than tiles. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "act_ref.h"
#include "harness.h"

#define BF16_TOL 1e-2
#define F32_TOL 1e-5
/* Programs of the persistent GEMMs: more than the tiles of the shapes
 * here, so some walk none and the tile loop is checked. */
#define MLP_PROGRAMS 5


/* mlp.tile's ACT: 0 SwiGLU, 1 GeGLU erf, 2 GeGLU tanh, as act_ref's. */
static double gate_ref(double g, int act) { return act_ref(g, act == 0 ? 4 : act == 1 ? 2 : 3); }

static tc_arg matrix(const HBuf *b, int rows, int cols) {
  tc_arg a = {.p = b->data, .shape = {rows, cols}, .strides = {cols, 1}};
  return a;
}

static void check_gate_up(int tokens, int d_model, int d_ff, int act, uint64_t seed) {
  char a[4];
  snprintf(a, sizeof a, "%d", act);
  const char *defs[] = {"ACT", a, NULL};
  tc_compilation *c = harness_compile("lang/std/mlp.tile", "mlp_gate_up", defs);
  Rng rng = {seed};
  HBuf x = hbuf_new("bf16", (size_t)tokens * d_model, "x"), wg = hbuf_new("bf16", (size_t)d_model * d_ff, "w_gate");
  HBuf wu = hbuf_new("bf16", (size_t)d_model * d_ff, "w_up"), h = hbuf_new("bf16", (size_t)tokens * d_ff, "h");
  hbuf_fill_uniform(&x, &rng, -1, 1), hbuf_fill_uniform(&wg, &rng, -0.2, 0.2), hbuf_fill_uniform(&wu, &rng, -0.2, 0.2);
  hbuf_poison(&h);
  tc_arg args[7] = {matrix(&h, tokens, d_ff), matrix(&x, tokens, d_model), matrix(&wg, d_model, d_ff),
                    matrix(&wu, d_model, d_ff), {.i = tokens}, {.i = d_model}, {.i = d_ff}};
  const HBuf *bufs[] = {&h, &x, &wg, &wu};
  harness_run(c, (int64_t[3]){MLP_PROGRAMS, 1, 1}, args, 7, bufs, 4);
  double *want = malloc(sizeof(double) * h.n);
  for (int i = 0; i < tokens; i++)
    for (int j = 0; j < d_ff; j++) {
      double g = 0, u = 0;
      for (int t = 0; t < d_model; t++) {
        g += hbuf_get(&x, (size_t)i * d_model + t) * hbuf_get(&wg, (size_t)t * d_ff + j);
        u += hbuf_get(&x, (size_t)i * d_model + t) * hbuf_get(&wu, (size_t)t * d_ff + j);
      }
      want[(size_t)i * d_ff + j] = gate_ref(g, act) * u;
    }
  double e = rel_error(&h, want, h.n);
  cr_expect_lt(e, BF16_TOL, "gate_up %dx%dx%d act %d: rel error %g", tokens, d_model, d_ff, act, e);
  free(want);
  hbuf_free(&x), hbuf_free(&wg), hbuf_free(&wu), hbuf_free(&h);
  tc_free(c);
}

Test(mlp, gate_up_swiglu) { check_gate_up(70, 72, 136, 0, 91); }
Test(mlp, gate_up_geglu_erf) { check_gate_up(130, 64, 200, 1, 92); }
Test(mlp, gate_up_geglu_tanh) { check_gate_up(9, 136, 72, 2, 93); }

static void check_down(int tokens, int d_ff, int d_model, bool residual, uint64_t seed) {
  const char *defs[] = {"RESIDUAL", residual ? "true" : "false", NULL};
  tc_compilation *c = harness_compile("lang/std/mlp.tile", "mlp_down", defs);
  Rng rng = {seed};
  HBuf h = hbuf_new("bf16", (size_t)tokens * d_ff, "h"), wd = hbuf_new("bf16", (size_t)d_ff * d_model, "w_down");
  HBuf res = hbuf_new("bf16", (size_t)tokens * d_model, "residual"), y = hbuf_new("bf16", (size_t)tokens * d_model, "y");
  hbuf_fill_uniform(&h, &rng, -1, 1), hbuf_fill_uniform(&wd, &rng, -0.2, 0.2), hbuf_fill_uniform(&res, &rng, -2, 2);
  hbuf_poison(&y);
  tc_arg args[8] = {matrix(&y, tokens, d_model), matrix(&h, tokens, d_ff), matrix(&wd, d_ff, d_model),
                    {.p = res.data}, {.i = d_model}, {.i = tokens}, {.i = d_ff}, {.i = d_model}};
  const HBuf *bufs[] = {&y, &h, &wd, &res};
  harness_run(c, (int64_t[3]){MLP_PROGRAMS, 1, 1}, args, 8, bufs, 4);
  double *want = malloc(sizeof(double) * y.n);
  for (int i = 0; i < tokens; i++)
    for (int j = 0; j < d_model; j++) {
      double s = residual ? hbuf_get(&res, (size_t)i * d_model + j) : 0;
      for (int t = 0; t < d_ff; t++) s += hbuf_get(&h, (size_t)i * d_ff + t) * hbuf_get(&wd, (size_t)t * d_model + j);
      want[(size_t)i * d_model + j] = s;
    }
  double e = rel_error(&y, want, y.n);
  cr_expect_lt(e, BF16_TOL, "down %dx%dx%d residual %d: rel error %g", tokens, d_ff, d_model, residual, e);
  free(want);
  hbuf_free(&h), hbuf_free(&wd), hbuf_free(&res), hbuf_free(&y);
  tc_free(c);
}

Test(mlp, down_with_residual) { check_down(70, 136, 200, true, 94); }
Test(mlp, down_without_residual) { check_down(130, 72, 264, false, 95); }

/* ---- the tensor-parallel split (runtime/mlp/tile_tp.h) ----
 *
 * What tile_tp_mlp_forward computes on N ranks, with the same kernels in
 * the interpreter: rank r runs mlp_gate_up on its columns of w_gate and
 * w_up and mlp_down on the same rows of w_down (the residual on rank 0
 * only), and the all-reduce sums the ranks' bf16 outputs (in f32, then
 * bf16, as NCCL's bf16 sum does for two ranks). The sum must be the
 * whole layer (float64). */
static void check_tp_split(int ranks, int tokens, int d_model, int d_ff, uint64_t seed) {
  const int slice = d_ff / ranks;
  cr_assert_eq(slice % 8, 0, "each slice a multiple of 8");
  Rng rng = {seed};
  HBuf x = hbuf_new("bf16", (size_t)tokens * d_model, "x"), res = hbuf_new("bf16", (size_t)tokens * d_model, "res");
  HBuf wg = hbuf_new("bf16", (size_t)d_model * d_ff, "w_gate"), wu = hbuf_new("bf16", (size_t)d_model * d_ff, "w_up");
  HBuf wd = hbuf_new("bf16", (size_t)d_ff * d_model, "w_down");
  hbuf_fill_uniform(&x, &rng, -1, 1), hbuf_fill_uniform(&res, &rng, -1, 1);
  hbuf_fill_uniform(&wg, &rng, -0.2, 0.2), hbuf_fill_uniform(&wu, &rng, -0.2, 0.2), hbuf_fill_uniform(&wd, &rng, -0.2, 0.2);
  const char *up_defs[] = {"ACT", "0", NULL}, *res_defs[] = {"RESIDUAL", "true", NULL};
  const char *plain_defs[] = {"RESIDUAL", "false", NULL};
  tc_compilation *up = harness_compile("lang/std/mlp.tile", "mlp_gate_up", up_defs);
  tc_compilation *down_res = harness_compile("lang/std/mlp.tile", "mlp_down", res_defs);
  tc_compilation *down = harness_compile("lang/std/mlp.tile", "mlp_down", plain_defs);
  size_t ny = (size_t)tokens * d_model;
  double *sum = calloc(ny, sizeof(double));
  for (int r = 0; r < ranks; r++) {
    HBuf g = hbuf_new("bf16", (size_t)d_model * slice, "w_gate_r"), u = hbuf_new("bf16", (size_t)d_model * slice, "w_up_r");
    HBuf d = hbuf_new("bf16", (size_t)slice * d_model, "w_down_r"), h = hbuf_new("bf16", (size_t)tokens * slice, "h_r");
    HBuf y = hbuf_new("bf16", ny, "y_r");
    for (int i = 0; i < d_model; i++)
      for (int j = 0; j < slice; j++) {
        hbuf_set(&g, (size_t)i * slice + j, hbuf_get(&wg, (size_t)i * d_ff + r * slice + j));
        hbuf_set(&u, (size_t)i * slice + j, hbuf_get(&wu, (size_t)i * d_ff + r * slice + j));
      }
    for (int j = 0; j < slice; j++)
      for (int c = 0; c < d_model; c++) hbuf_set(&d, (size_t)j * d_model + c, hbuf_get(&wd, (size_t)(r * slice + j) * d_model + c));
    hbuf_poison(&h), hbuf_poison(&y);
    tc_arg ua[7] = {matrix(&h, tokens, slice), matrix(&x, tokens, d_model), matrix(&g, d_model, slice),
                    matrix(&u, d_model, slice), {.i = tokens}, {.i = d_model}, {.i = slice}};
    const HBuf *ub[] = {&h, &x, &g, &u};
    harness_run(up, (int64_t[3]){MLP_PROGRAMS, 1, 1}, ua, 7, ub, 4);
    tc_arg da[8] = {matrix(&y, tokens, d_model), matrix(&h, tokens, slice), matrix(&d, slice, d_model),
                    {.p = r == 0 ? res.data : y.data}, {.i = d_model}, {.i = tokens}, {.i = slice}, {.i = d_model}};
    const HBuf *db[] = {&y, &h, &d, r == 0 ? &res : &y};
    harness_run(r == 0 ? down_res : down, (int64_t[3]){MLP_PROGRAMS, 1, 1}, da, 8, db, 4);
    for (size_t i = 0; i < ny; i++) sum[i] = (double)(float)(sum[i] + hbuf_get(&y, i)); /* NCCL: f32 adds */
    hbuf_free(&g), hbuf_free(&u), hbuf_free(&d), hbuf_free(&h), hbuf_free(&y);
  }
  HBuf got = hbuf_new("bf16", ny, "y"); /* the reduced y, in bf16 */
  for (size_t i = 0; i < ny; i++) hbuf_set(&got, i, sum[i]);
  double *want = malloc(sizeof(double) * ny), *hrow = malloc(sizeof(double) * (size_t)d_ff);
  for (int t = 0; t < tokens; t++) {
    for (int j = 0; j < d_ff; j++) {
      double gv = 0, uv = 0;
      for (int c = 0; c < d_model; c++) {
        double xv = hbuf_get(&x, (size_t)t * d_model + c);
        gv += xv * hbuf_get(&wg, (size_t)c * d_ff + j), uv += xv * hbuf_get(&wu, (size_t)c * d_ff + j);
      }
      hrow[j] = gate_ref(gv, 0) * uv;
    }
    for (int c = 0; c < d_model; c++) {
      double acc = hbuf_get(&res, (size_t)t * d_model + c);
      for (int j = 0; j < d_ff; j++) acc += hrow[j] * hbuf_get(&wd, (size_t)j * d_model + c);
      want[(size_t)t * d_model + c] = acc;
    }
  }
  double e = rel_error(&got, want, ny);
  cr_expect_lt(e, BF16_TOL, "%d ranks, %dx%dx%d: the reduced y against the whole layer: rel error %g", ranks, tokens,
               d_model, d_ff, e);
  free(sum), free(want), free(hrow);
  hbuf_free(&got), hbuf_free(&x), hbuf_free(&res), hbuf_free(&wg), hbuf_free(&wu), hbuf_free(&wd);
  tc_free(up), tc_free(down_res), tc_free(down);
}

Test(mlp, tensor_parallel_slices_sum_to_the_layer) {
  check_tp_split(2, 70, 72, 288, 98);
  check_tp_split(4, 9, 64, 288, 99);
}

/* d/dg of gate_ref(g) (the activation alone). */
static double gate_ref_deriv(double g, int act) {
  if (act == 0) {
    double s = 1 / (1 + exp(-g));
    return s * (1 + g * (1 - s));
  }
  if (act == 1) return 0.5 * (1 + erf(g / sqrt(2.0))) + g * exp(-0.5 * g * g) / sqrt(2 * M_PI);
  double k = ACT_REF_GELU_TANH_K, t = tanh(k * (g + 0.044715 * g * g * g));
  return 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * k * (1 + 3 * 0.044715 * g * g);
}

static void check_act_backward(int act, uint64_t seed) {
  const int tokens = 5, d_ff = 1500, stride = 1504;
  char a[4];
  snprintf(a, sizeof a, "%d", act);
  const char *defs[] = {"T", "f32", "ACT", a, NULL};
  tc_compilation *c = harness_compile("lang/std/mlp.tile", "mlp_act_backward", defs);
  Rng rng = {seed};
  size_t n = (size_t)tokens * stride;
  HBuf dg = hbuf_new("f32", n, "dg"), du = hbuf_new("f32", n, "du"), dh = hbuf_new("f32", n, "dh");
  HBuf g = hbuf_new("f32", n, "g"), u = hbuf_new("f32", n, "u");
  hbuf_fill_uniform(&dh, &rng, -1, 1), hbuf_fill_uniform(&g, &rng, -6, 6), hbuf_fill_uniform(&u, &rng, -2, 2);
  hbuf_poison(&dg), hbuf_poison(&du);
  tc_arg args[7] = {{.p = dg.data}, {.p = du.data}, {.p = dh.data}, {.p = g.data}, {.p = u.data}, {.i = stride}, {.i = d_ff}};
  const HBuf *bufs[] = {&dg, &du, &dh, &g, &u};
  harness_run(c, (int64_t[3]){harness_cdiv(d_ff, 1024), tokens, 1}, args, 7, bufs, 5);
  double *want_g = malloc(sizeof(double) * n), *want_u = malloc(sizeof(double) * n);
  double fd_err = 0;
  for (size_t i = 0; i < n; i++) {
    double x = hbuf_get(&g, i), up = hbuf_get(&u, i), d = hbuf_get(&dh, i);
    want_g[i] = d * up * gate_ref_deriv(x, act);
    want_u[i] = d * gate_ref(x, act);
    /* the derivative itself against a central difference of the forward */
    const double step = 1e-5;
    double fd = (gate_ref(x + step, act) - gate_ref(x - step, act)) / (2 * step);
    fd_err = fmax(fd_err, fabs(fd - gate_ref_deriv(x, act)));
  }
  /* the padding past d_ff in each row is never written */
  for (int r = 0; r < tokens; r++) cr_assert(isnan(hbuf_get(&dg, (size_t)r * stride + d_ff)), "row %d padding", r);
  cr_expect_lt(fd_err, 1e-6, "act %d: the reference derivative is off by %g", act, fd_err);
  double eg = 0, eu = 0, rg = 0, ru = 0;
  for (int r = 0; r < tokens; r++)
    for (int j = 0; j < d_ff; j++) {
      size_t i = (size_t)r * stride + j;
      eg = fmax(eg, fabs(hbuf_get(&dg, i) - want_g[i])), rg = fmax(rg, fabs(want_g[i]));
      eu = fmax(eu, fabs(hbuf_get(&du, i) - want_u[i])), ru = fmax(ru, fabs(want_u[i]));
    }
  cr_expect_lt(eg / rg, F32_TOL, "act %d: dg rel error %g", act, eg / rg);
  cr_expect_lt(eu / ru, F32_TOL, "act %d: du rel error %g", act, eu / ru);
  free(want_g), free(want_u);
  hbuf_free(&dg), hbuf_free(&du), hbuf_free(&dh), hbuf_free(&g), hbuf_free(&u);
  tc_free(c);
}

Test(mlp, act_backward_each_activation) {
  for (int act = 0; act <= 2; act++) check_act_backward(act, 96 + (uint64_t)act);
}

/* ---- fp8: per-token activation scales, per-channel weight scales ---- */

/* The quantization of x [rows, n]: q exactly (x * (1 / s)) rounded to
 * e4m3, s = max |x[row]| / 448 (in f32, as the kernel computes them). */
static void quantize(HBuf *q, HBuf *s, const HBuf *x, int rows, int n) {
  tc_compilation *c = harness_compile("lang/std/mlp.tile", "mlp_quantize_fp8", NULL);
  hbuf_poison(q), hbuf_poison(s);
  tc_arg args[4] = {{.p = q->data}, {.p = s->data}, {.p = x->data}, {.i = n}};
  const HBuf *bufs[] = {q, s, x};
  harness_run(c, (int64_t[3]){rows, 1, 1}, args, 4, bufs, 3);
  tc_free(c);
  HBuf want = hbuf_new("f8e4m3", (size_t)n, "q");
  for (int r = 0; r < rows; r++) {
    float m = 0;
    for (int j = 0; j < n; j++) m = fmaxf(m, fabsf((float)hbuf_get(x, (size_t)r * n + j)));
    float scale = m > 0 ? m / 448.0f : 1.0f, inv = 1.0f / scale;
    cr_expect_eq((float)hbuf_get(s, r), scale, "scale of row %d", r);
    for (int j = 0; j < n; j++) hbuf_set(&want, j, (double)((float)hbuf_get(x, (size_t)r * n + j) * inv));
    for (int j = 0; j < n; j++)
      cr_expect_eq(hbuf_get(q, (size_t)r * n + j), hbuf_get(&want, j), "q[%d][%d]", r, j);
  }
  hbuf_free(&want);
}

static void check_fp8_layer(int tokens, int d_model, int d_ff, int act, uint64_t seed) {
  Rng rng = {seed};
  size_t nx = (size_t)tokens * d_model, nh = (size_t)tokens * d_ff;
  HBuf x = hbuf_new("bf16", nx, "x"), xq = hbuf_new("f8e4m3", nx, "xq"), xs = hbuf_new("f32", (size_t)tokens, "xs");
  HBuf wg = hbuf_new("f8e4m3", (size_t)d_ff * d_model, "w_gate"), wu = hbuf_new("f8e4m3", (size_t)d_ff * d_model, "w_up");
  HBuf gs = hbuf_new("f32", (size_t)d_ff, "gate_scale"), us = hbuf_new("f32", (size_t)d_ff, "up_scale");
  HBuf wd = hbuf_new("f8e4m3", (size_t)d_model * d_ff, "w_down"), ds = hbuf_new("f32", (size_t)d_model, "down_scale");
  HBuf h = hbuf_new("bf16", nh, "h"), hq = hbuf_new("f8e4m3", nh, "hq"), hs = hbuf_new("f32", (size_t)tokens, "hs");
  HBuf res = hbuf_new("bf16", nx, "residual"), y = hbuf_new("bf16", nx, "y");
  hbuf_fill_uniform(&x, &rng, -3, 3), hbuf_fill_uniform(&wg, &rng, -200, 200), hbuf_fill_uniform(&wu, &rng, -200, 200);
  hbuf_fill_uniform(&wd, &rng, -200, 200), hbuf_fill_uniform(&res, &rng, -1, 1);
  hbuf_fill_uniform(&gs, &rng, 1e-4, 5e-4), hbuf_fill_uniform(&us, &rng, 1e-4, 5e-4), hbuf_fill_uniform(&ds, &rng, 1e-4, 5e-4);
  for (int j = 0; j < d_model; j++) hbuf_set(&x, j, 0); /* a row of zeros: scale 1 */
  hbuf_poison(&h), hbuf_poison(&y);
  quantize(&xq, &xs, &x, tokens, d_model);
  cr_expect_eq(hbuf_get(&xs, 0), 1.0, "a row of zeros has scale 1");

  char a[4];
  snprintf(a, sizeof a, "%d", act);
  tc_compilation *c = harness_compile("lang/std/mlp.tile", "mlp_gate_up_fp8", (const char *const[]){"ACT", a, NULL});
  tc_arg ua[10] = {matrix(&h, tokens, d_ff), matrix(&xq, tokens, d_model), matrix(&wg, d_ff, d_model),
                   matrix(&wu, d_ff, d_model), {.p = xs.data}, {.p = gs.data}, {.p = us.data},
                   {.i = tokens}, {.i = d_model}, {.i = d_ff}};
  const HBuf *ub[] = {&h, &xq, &wg, &wu, &xs, &gs, &us};
  harness_run(c, (int64_t[3]){MLP_PROGRAMS, 1, 1}, ua, 10, ub, 7);
  tc_free(c);
  double *want_h = malloc(sizeof(double) * nh);
  for (int i = 0; i < tokens; i++)
    for (int j = 0; j < d_ff; j++) {
      double g = 0, u = 0;
      for (int t = 0; t < d_model; t++) {
        double xv = hbuf_get(&xq, (size_t)i * d_model + t);
        g += xv * hbuf_get(&wg, (size_t)j * d_model + t), u += xv * hbuf_get(&wu, (size_t)j * d_model + t);
      }
      g *= hbuf_get(&xs, i) * hbuf_get(&gs, j), u *= hbuf_get(&xs, i) * hbuf_get(&us, j);
      want_h[(size_t)i * d_ff + j] = gate_ref(g, act) * u;
    }
  double eh = rel_error(&h, want_h, nh);
  cr_expect_lt(eh, BF16_TOL, "gate_up_fp8 %dx%dx%d act %d: rel error %g", tokens, d_model, d_ff, act, eh);

  quantize(&hq, &hs, &h, tokens, d_ff);
  c = harness_compile("lang/std/mlp.tile", "mlp_down_fp8", NULL);
  tc_arg da[10] = {matrix(&y, tokens, d_model), matrix(&hq, tokens, d_ff), matrix(&wd, d_model, d_ff),
                   {.p = hs.data},  {.p = ds.data}, {.p = res.data}, {.i = d_model},
                   {.i = tokens},   {.i = d_ff},    {.i = d_model}};
  const HBuf *db[] = {&y, &hq, &wd, &hs, &ds, &res};
  harness_run(c, (int64_t[3]){MLP_PROGRAMS, 1, 1}, da, 10, db, 6);
  tc_free(c);
  double *want_y = malloc(sizeof(double) * nx);
  for (int i = 0; i < tokens; i++)
    for (int j = 0; j < d_model; j++) {
      double s = 0;
      for (int t = 0; t < d_ff; t++) s += hbuf_get(&hq, (size_t)i * d_ff + t) * hbuf_get(&wd, (size_t)j * d_ff + t);
      want_y[(size_t)i * d_model + j] = s * hbuf_get(&hs, i) * hbuf_get(&ds, j) + hbuf_get(&res, (size_t)i * d_model + j);
    }
  double ey = rel_error(&y, want_y, nx);
  cr_expect_lt(ey, BF16_TOL, "down_fp8 %dx%dx%d: rel error %g", tokens, d_ff, d_model, ey);
  free(want_h), free(want_y);
  HBuf *all[] = {&x, &xq, &xs, &wg, &wu, &gs, &us, &wd, &ds, &h, &hq, &hs, &res, &y};
  for (int i = 0; i < 14; i++) hbuf_free(all[i]);
}

Test(mlp, fp8_layer_swiglu) { check_fp8_layer(70, 136, 264, 0, 96); }
Test(mlp, fp8_layer_geglu_erf) { check_fp8_layer(9, 64, 200, 1, 97); }
