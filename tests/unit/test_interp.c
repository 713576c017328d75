/* test_interp.c - unit tests for the tile IR interpreter (compiler/interp).
 *
 * Kernels are built with the IR builder API through the helpers of
 * interp_kit.h (one helper per op shape) or written as IR text, checked
 * with the IR verifier, run on random host data, and compared with plain C
 * computations of the same thing. Error tests assert the whole message,
 * including location, element index, address and program.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/interp/interp.h"
#include "../../compiler/numeric/numeric.h"
#include "../../compiler/ir/ir.h"
#include "interp_kit.h"

/* ---- shared kernels -------------------------------------------------------- */

/* Block size of the vector kernels. */
#define VBLOCK 64

/* z[i] = x[i] + y[i] for i < n, BLOCK elements per program; without a mask
 * when `masked` is false. The load of x is at line 5, column 3. */
static void build_vadd(K *k, bool masked) {
  TType p = ts(SK_PTR);
  p.pointee = SK_F32;
  TType params[] = {p, p, p, ts(SK_I32)};
  kbegin(k, "add", 4, params, (const char *[]){"z", "x", "y", "n"});
  Value *start = bin(k, OP_MUL, pid(k, 0), cint(k, ts(SK_I32), VBLOCK));
  Value *offs = bin(k, OP_ADD, bcast(k, start, t1(SK_I32, VBLOCK)), arange(k, 0, VBLOCK));
  Value *mask = masked ? cmp(k, OP_CMP_LT, offs, bcast(k, arg(k, 3), offs->type)) : NULL;
  Value *zero = masked ? cflt(k, t1(SK_F32, VBLOCK), 0.0) : NULL;
  at(k, 5, 3);
  Value *x = load(k, ptr_add(k, arg(k, 1), offs), mask, zero);
  at(k, 6, 3);
  Value *y = load(k, ptr_add(k, arg(k, 2), offs), mask, zero);
  at(k, 7, 3);
  store(k, ptr_add(k, arg(k, 0), offs), bin(k, OP_ADD, x, y), mask);
  ret(k);
}

/* ---- tests: elementwise and memory ------------------------------------------- */

Test(interp, vector_add_masked) {
  enum { N = 1000 };
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = calloc(N + 8, sizeof *z);
  fill_random(x, N, 1);
  fill_random(y, N, 2);
  for (int i = N; i < N + 8; i++) z[i] = 42.0f;
  K k;
  build_vadd(&k, true);
  InterpArg args[] = {aptr(z), aptr(x), aptr(y), aint(N)};
  Buf bufs[] = {{z, (N + 8) * sizeof *z, "z"}, {x, N * sizeof *x, "x"}, {y, N * sizeof *y, "y"}};
  run_ok(&k, (N + VBLOCK - 1) / VBLOCK, args, 4, bufs, 3);
  for (int i = 0; i < N; i++) cr_assert_eq(z[i], x[i] + y[i], "z[%d]", i);
  for (int i = N; i < N + 8; i++) cr_assert_eq(z[i], 42.0f, "masked-off lane %d was written", i);
  kend(&k);
  free(x);
  free(y);
  free(z);
}

Test(interp, error_load_past_the_end) {
  enum { N = 100 };
  /* x is followed by unregistered padding, so the access past its end
   * cannot land in another registered buffer that happens to follow it. */
  float xpad[N + 2 * VBLOCK], y[2 * VBLOCK], z[2 * VBLOCK];
  float *x = xpad;
  memset(xpad, 0, sizeof xpad);
  memset(y, 0, sizeof y);
  K k;
  build_vadd(&k, false);
  InterpArg args[] = {aptr(z), aptr(x), aptr(y), aint(N)};
  Buf bufs[] = {{z, sizeof z, "z"}, {x, N * sizeof(float), "x"}, {y, sizeof y, "y"}};
  char *err = run(&k, 2, args, 4, bufs, 3);
  /* Program 1 loads x[64..127]; x[100] is the first element past the end,
   * at element [36] of the tile; x[104] would be 16 bytes past it. */
  char want[512];
  snprintf(want, sizeof want,
           "t.tile:5:3: error: out-of-bounds load of f32 at element [36] of the tile: address "
           "0x%llx is 0 bytes past the end of buffer 'x' (400 bytes) (program (1, 0, 0))",
           (unsigned long long)(uintptr_t)(x + N));
  assert_msg(err, want);
  kend(&k);
}

/* A kernel storing one f32 at p + off (scalar), at line 9 column 5. */
static void build_scalar_store(K *k) {
  TType p = ts(SK_PTR);
  p.pointee = SK_F32;
  TType params[] = {p, ts(SK_I64)};
  kbegin(k, "poke", 2, params, (const char *[]){"p", "off"});
  Value *q = OP(k, OP_PTR_ADD, p, arg(k, 0), arg(k, 1));
  at(k, 9, 5);
  store(k, q, cflt(k, ts(SK_F32), 1.5), NULL);
  ret(k);
}

Test(interp, error_store_before_the_start) {
  float buf[16] = {0};
  K k;
  build_scalar_store(&k);
  InterpArg args[] = {aptr(buf), aint(-2)};
  Buf bufs[] = {{buf, sizeof buf, "out"}};
  char *err = run(&k, 1, args, 2, bufs, 1);
  char want[512];
  snprintf(want, sizeof want,
           "t.tile:9:5: error: out-of-bounds store of f32: address 0x%llx is 8 bytes before the "
           "start of buffer 'out' (64 bytes) (program (0, 0, 0))",
           (unsigned long long)((uintptr_t)buf - 8));
  assert_msg(err, want);
  for (int i = 0; i < 16; i++) cr_assert_eq(buf[i], 0.0f);
  kend(&k);
}

Test(interp, error_address_in_no_buffer) {
  float buf[16] = {0};
  K k;
  build_scalar_store(&k);
  InterpArg args[] = {aptr((void *)(uintptr_t)0x100), aint(1)};
  Buf bufs[] = {{buf, sizeof buf, "out"}};
  char *err = run(&k, 1, args, 2, bufs, 1);
  assert_msg(err, "t.tile:9:5: error: out-of-bounds store of f32: address 0x104 is in no buffer "
                  "(program (0, 0, 0))");
  kend(&k);
}

Test(interp, error_misaligned_store) {
  _Alignas(16) unsigned char raw[64] = {0};
  K k;
  build_scalar_store(&k);
  InterpArg args[] = {aptr(raw + 2), aint(1)};
  Buf bufs[] = {{raw, sizeof raw, "raw"}};
  char *err = run(&k, 1, args, 2, bufs, 1);
  char want[512];
  snprintf(want, sizeof want,
           "t.tile:9:5: error: misaligned store of f32: address 0x%llx is not a multiple of 4 (in "
           "buffer 'raw') (program (0, 0, 0))",
           (unsigned long long)(uintptr_t)(raw + 6));
  assert_msg(err, want);
  kend(&k);
}

Test(interp, scalar_store_in_bounds) {
  float buf[16] = {0};
  K k;
  build_scalar_store(&k);
  InterpArg args[] = {aptr(buf), aint(15)};
  Buf bufs[] = {{buf, sizeof buf, "out"}};
  char *err = run(&k, 1, args, 2, bufs, 1);
  cr_assert_null(err, "%s", err);
  cr_assert_eq(buf[15], 1.5f);
  kend(&k);
}

Test(interp, error_integer_division_by_zero) {
  int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8] = {1, 1, 1, 0, 1, 1, 1, 1}, c[8];
  TType p = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {p, p, p};
  K k;
  kbegin(&k, "div", 3, params, (const char *[]){"c", "a", "b"});
  Value *offs = arange(&k, 0, 8);
  Value *va = load(&k, ptr_add(&k, arg(&k, 1), offs), NULL, NULL);
  Value *vb = load(&k, ptr_add(&k, arg(&k, 2), offs), NULL, NULL);
  at(&k, 12, 14);
  Value *q = bin(&k, OP_DIV, va, vb);
  store(&k, ptr_add(&k, arg(&k, 0), offs), q, NULL);
  ret(&k);
  InterpArg args[] = {aptr(c), aptr(a), aptr(b)};
  Buf bufs[] = {{a, sizeof a, "a"}, {b, sizeof b, "b"}, {c, sizeof c, "c"}};
  assert_msg(run(&k, 1, args, 3, bufs, 3),
             "t.tile:12:14: error: integer division by zero at element [3] (program (0, 0, 0))");
  b[3] = -1;
  a[3] = INT32_MIN;
  run_ok(&k, 1, args, 3, bufs, 3);
  cr_assert_eq(c[3], INT32_MIN); /* wraps */
  cr_assert_eq(c[7], 8);
  kend(&k);
}

Test(interp, bf16_store_rounds_to_nearest_even) {
  enum { N = 8 };
  /* f32 bit patterns and the bf16 they round to (ties to even). */
  const uint32_t in_bits[N] = {0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,
                               0xbf80c000, 0x7f7fffff, 0x00000001, 0x40490fdb};
  const uint16_t want[N] = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0xbf81, 0x7f80, 0x0000, 0x4049};
  float x[N];
  uint16_t y[N];
  float back[N];
  memcpy(x, in_bits, sizeof x);
  TType pf = ptr_of(ts(SK_PTR), SK_F32), pb = ptr_of(ts(SK_PTR), SK_BF16);
  TType params[] = {pb, pf, pf};
  K k;
  kbegin(&k, "tobf16", 3, params, (const char *[]){"y", "x", "back"});
  Value *offs = arange(&k, 0, N);
  Value *v = cast(&k, load(&k, ptr_add(&k, arg(&k, 1), offs), NULL, NULL), SK_BF16);
  store(&k, ptr_add(&k, arg(&k, 0), offs), v, NULL);
  Value *w = load(&k, ptr_add(&k, arg(&k, 0), offs), NULL, NULL);
  store(&k, ptr_add(&k, arg(&k, 2), offs), cast(&k, w, SK_F32), NULL);
  ret(&k);
  InterpArg args[] = {aptr(y), aptr(x), aptr(back)};
  Buf bufs[] = {{x, sizeof x, "x"}, {y, sizeof y, "y"}, {back, sizeof back, "back"}};
  run_ok(&k, 1, args, 3, bufs, 3);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(y[i], want[i], "element %d: 0x%04x, want 0x%04x", i, y[i], want[i]);
    uint32_t bits;
    memcpy(&bits, &back[i], sizeof bits);
    cr_assert_eq(bits, (uint32_t)want[i] << 16, "reloaded element %d", i);
  }
  kend(&k);
}

Test(interp, casts) {
  enum { N = 8 };
  float x[N] = {1.9f, -1.9f, 3e9f, -3e9f, NAN, 255.5f, -0.5f, 65520.0f};
  int32_t to_i32[N];
  uint8_t to_u8[N];
  uint16_t to_f16[N];
  int8_t trunc_i8[N];
  TType pf = ptr_of(ts(SK_PTR), SK_F32), pi = ptr_of(ts(SK_PTR), SK_I32);
  TType pu8 = ptr_of(ts(SK_PTR), SK_U8), ph = ptr_of(ts(SK_PTR), SK_F16);
  TType pi8 = ptr_of(ts(SK_PTR), SK_I8);
  TType params[] = {pf, pi, pu8, ph, pi8};
  K k;
  kbegin(&k, "casts", 5, params, (const char *[]){"x", "a", "b", "c", "d"});
  Value *offs = arange(&k, 0, N);
  Value *v = load(&k, ptr_add(&k, arg(&k, 0), offs), NULL, NULL);
  Value *vi = cast(&k, v, SK_I32);
  store(&k, ptr_add(&k, arg(&k, 1), offs), vi, NULL);
  store(&k, ptr_add(&k, arg(&k, 2), offs), cast(&k, v, SK_U8), NULL);
  store(&k, ptr_add(&k, arg(&k, 3), offs), cast(&k, v, SK_F16), NULL);
  store(&k, ptr_add(&k, arg(&k, 4), offs), cast(&k, vi, SK_I8), NULL);
  ret(&k);
  InterpArg args[] = {aptr(x), aptr(to_i32), aptr(to_u8), aptr(to_f16), aptr(trunc_i8)};
  Buf bufs[] = {{x, sizeof x, "x"},
                {to_i32, sizeof to_i32, "a"},
                {to_u8, sizeof to_u8, "b"},
                {to_f16, sizeof to_f16, "c"},
                {trunc_i8, sizeof trunc_i8, "d"}};
  run_ok(&k, 1, args, 5, bufs, 5);
  const int32_t wi[N] = {1, -1, INT32_MAX, INT32_MIN, 0, 255, 0, 65520};
  const uint8_t wu[N] = {1, 0, 255, 0, 0, 255, 0, 255};
  /* f16: 1.9 -> 0x3f9a, -1.9 -> 0xbf9a, 3e9 -> inf, -3e9 -> -inf, NaN,
   * 255.5 exact (0x5bfc), -0.5 (0xb800), 65520 rounds up to inf. */
  const uint16_t wh[N] = {0x3f9a, 0xbf9a, 0x7c00, 0xfc00, 0x7e00, 0x5bfc, 0xb800, 0x7c00};
  for (int i = 0; i < N; i++) {
    cr_assert_eq(to_i32[i], wi[i], "i32 %d: %d", i, to_i32[i]);
    cr_assert_eq(to_u8[i], wu[i], "u8 %d: %d", i, to_u8[i]);
    cr_assert_eq(to_f16[i], wh[i], "f16 %d: 0x%04x", i, to_f16[i]);
    cr_assert_eq(trunc_i8[i], (int8_t)(uint8_t)((uint32_t)wi[i] & 0xff), "i8 %d", i);
  }
  kend(&k);
}

Test(interp, math_and_bit_ops) {
  enum { N = 16 };
  float x[N], out[4][N];
  int32_t ii[N], iout[2][N];
  for (int i = 0; i < N; i++) {
    x[i] = 0.25f + (float)i * 0.5f;
    ii[i] = (i - 8) * 1000003;
  }
  TType pf = ptr_of(ts(SK_PTR), SK_F32), pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pf, pf, pi, pi};
  K k;
  kbegin(&k, "math", 4, params, (const char *[]){"x", "out", "i", "iout"});
  Value *offs = arange(&k, 0, N);
  Value *v = load(&k, ptr_add(&k, arg(&k, 0), offs), NULL, NULL);
  Value *outs[4] = {una(&k, OP_EXP, v), una(&k, OP_SQRT, v), una(&k, OP_LOG, v),
                    OP(&k, OP_FMA, v->type, v, v, v)};
  for (int j = 0; j < 4; j++) {
    Value *o = bin(&k, OP_ADD, offs, cint(&k, offs->type, j * N));
    store(&k, ptr_add(&k, arg(&k, 1), o), outs[j], NULL);
  }
  Value *iv = load(&k, ptr_add(&k, arg(&k, 2), offs), NULL, NULL);
  Value *sh = bin(&k, OP_SHR, iv, cint(&k, iv->type, 3));
  Value *rm = bin(&k, OP_REM, iv, cint(&k, iv->type, 7));
  store(&k, ptr_add(&k, arg(&k, 3), offs), sh, NULL);
  store(&k, ptr_add(&k, arg(&k, 3), bin(&k, OP_ADD, offs, cint(&k, offs->type, N))), rm, NULL);
  ret(&k);
  InterpArg args[] = {aptr(x), aptr(out), aptr(ii), aptr(iout)};
  Buf bufs[] = {{x, sizeof x, "x"}, {out, sizeof out, "out"}, {ii, sizeof ii, "i"},
                {iout, sizeof iout, "iout"}};
  run_ok(&k, 1, args, 4, bufs, 4);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(out[0][i], (float)exp((double)x[i]));
    cr_assert_eq(out[1][i], sqrtf(x[i]));
    cr_assert_eq(out[2][i], (float)log((double)x[i]));
    cr_assert_eq(out[3][i], fmaf(x[i], x[i], x[i]));
    cr_assert_eq(iout[0][i], ii[i] >> 3);
    cr_assert_eq(iout[1][i], ii[i] % 7);
  }
  kend(&k);
}

/* ---- tests: reductions ------------------------------------------------------ */

/* Loads an R x C f32 tile from x (row-major). */
static Value *load_2d(K *k, Value *base, int rows, int cols) {
  TType t = t2(SK_I32, rows, cols);
  Value *r = bcast(k, expand(k, arange(k, 0, rows), 1), t);
  Value *c = bcast(k, expand(k, arange(k, 0, cols), 0), t);
  Value *offs = bin(k, OP_ADD, bin(k, OP_MUL, r, cint(k, t, cols)), c);
  return load(k, ptr_add(k, base, offs), NULL, NULL);
}

static void store_1d(K *k, Value *base, Value *v) {
  store(k, ptr_add(k, base, arange(k, 0, v->type.shape[0])), v, NULL);
}

Test(interp, reductions_over_each_axis) {
  enum { R = 8, C = 16 };
  float x[R * C], sum0[C], sum1[R], max1[R], min0[C];
  fill_random(x, R * C, 7);
  TType pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {pf, pf, pf, pf, pf};
  K k;
  kbegin(&k, "red", 5, params, (const char *[]){"x", "s0", "s1", "m1", "n0"});
  Value *v = load_2d(&k, arg(&k, 0), R, C);
  store_1d(&k, arg(&k, 1), reduce(&k, OP_REDUCE_SUM, v, 0));
  store_1d(&k, arg(&k, 2), reduce(&k, OP_REDUCE_SUM, v, 1));
  store_1d(&k, arg(&k, 3), reduce(&k, OP_REDUCE_MAX, v, 1));
  store_1d(&k, arg(&k, 4), reduce(&k, OP_REDUCE_MIN, v, 0));
  ret(&k);
  InterpArg args[] = {aptr(x), aptr(sum0), aptr(sum1), aptr(max1), aptr(min0)};
  Buf bufs[] = {{x, sizeof x, "x"}, {sum0, sizeof sum0, "s0"}, {sum1, sizeof sum1, "s1"},
                {max1, sizeof max1, "m1"}, {min0, sizeof min0, "n0"}};
  run_ok(&k, 1, args, 5, bufs, 5);
  for (int c = 0; c < C; c++) {
    double s = 0;
    float mn = INFINITY;
    for (int r = 0; r < R; r++) {
      s += x[r * C + c];
      mn = fminf(mn, x[r * C + c]);
    }
    cr_assert_lt(rel_err(sum0[c], s), 1e-5);
    cr_assert_eq(min0[c], mn);
  }
  for (int r = 0; r < R; r++) {
    double s = 0;
    float mx = -INFINITY;
    for (int c = 0; c < C; c++) {
      s += x[r * C + c];
      mx = fmaxf(mx, x[r * C + c]);
    }
    cr_assert_lt(rel_err(sum1[r], s), 1e-5);
    cr_assert_eq(max1[r], mx);
  }
  kend(&k);
}

Test(interp, sum_uses_pairwise_order) {
  /* Sequentially ((1e8 + 1) - 1e8) + 1 = 1 in f32 (1e8 + 1 rounds to
   * 1e8); pairwise (1e8 + 1) + (-1e8 + 1) = 1e8 - 1e8 = 0. */
  float x[4] = {1e8f, 1.0f, -1e8f, 1.0f}, out[1];
  TType pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {pf, pf};
  K k;
  kbegin(&k, "sum", 2, params, (const char *[]){"x", "out"});
  Value *v = load(&k, ptr_add(&k, arg(&k, 0), arange(&k, 0, 4)), NULL, NULL);
  store(&k, arg(&k, 1), reduce(&k, OP_REDUCE_SUM, v, 0), NULL);
  ret(&k);
  InterpArg args[] = {aptr(x), aptr(out)};
  Buf bufs[] = {{x, sizeof x, "x"}, {out, sizeof out, "out"}};
  run_ok(&k, 1, args, 2, bufs, 2);
  cr_assert_eq(out[0], 0.0f);
  kend(&k);
}

Test(interp, argmax_argmin_ties_and_nans) {
  enum { R = 4, C = 8 };
  float x[R * C] = {
      1, 5, 3, 5, 0, -2, -2, 4,                    /* max 5 first at 1; min -2 first at 5 */
      NAN, 2, NAN, 7, 7, 1, NAN, 0,                /* NaNs skipped: max at 3, min at 7 */
      NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN,      /* all NaN: 0 */
      -0.0f, 0.0f, 0.0f, -0.0f, -1, -1, -3, -3};   /* +0 > -0: max at 1; min at 6 */
  int32_t amax[R], amin[R];
  TType pf = ptr_of(ts(SK_PTR), SK_F32), pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pf, pi, pi};
  K k;
  kbegin(&k, "arg", 3, params, (const char *[]){"x", "amax", "amin"});
  Value *v = load_2d(&k, arg(&k, 0), R, C);
  store_1d(&k, arg(&k, 1), reduce(&k, OP_ARGMAX, v, 1));
  store_1d(&k, arg(&k, 2), reduce(&k, OP_ARGMIN, v, 1));
  ret(&k);
  InterpArg args[] = {aptr(x), aptr(amax), aptr(amin)};
  Buf bufs[] = {{x, sizeof x, "x"}, {amax, sizeof amax, "amax"}, {amin, sizeof amin, "amin"}};
  run_ok(&k, 1, args, 3, bufs, 3);
  const int32_t wmax[R] = {1, 3, 0, 1}, wmin[R] = {5, 7, 0, 6};
  for (int r = 0; r < R; r++) {
    cr_assert_eq(amax[r], wmax[r], "argmax row %d: %d", r, amax[r]);
    cr_assert_eq(amin[r], wmin[r], "argmin row %d: %d", r, amin[r]);
  }
  kend(&k);
}

Test(interp, row_softmax) {
  enum { ROWS = 6, COLS = 50, STRIDE = 56, BLOCK = 64 };
  float x[ROWS * STRIDE], y[ROWS * STRIDE];
  fill_random(x, ROWS * STRIDE, 11);
  for (int i = 0; i < ROWS * STRIDE; i++) x[i] *= 4.0f;
  memset(y, 0, sizeof y);
  TType pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {pf, pf, ts(SK_I32), ts(SK_I32)};
  K k;
  kbegin(&k, "softmax", 4, params, (const char *[]){"y", "x", "stride", "ncols"});
  Value *row = bin(&k, OP_MUL, pid(&k, 0), arg(&k, 2));
  Value *cols = arange(&k, 0, BLOCK);
  Value *offs = bin_s(&k, OP_ADD, cols, row);
  Value *mask = cmp(&k, OP_CMP_LT, cols, bcast(&k, arg(&k, 3), cols->type));
  Value *v = load(&k, ptr_add(&k, arg(&k, 1), offs), mask, cflt(&k, t1(SK_F32, BLOCK), -INFINITY));
  Value *m = reduce(&k, OP_REDUCE_MAX, v, 0);
  Value *e = una(&k, OP_EXP, bin_s(&k, OP_SUB, v, m));
  Value *s = reduce(&k, OP_REDUCE_SUM, e, 0);
  store(&k, ptr_add(&k, arg(&k, 0), offs), bin_s(&k, OP_DIV, e, s), mask);
  ret(&k);
  InterpArg args[] = {aptr(y), aptr(x), aint(STRIDE), aint(COLS)};
  Buf bufs[] = {{x, sizeof x, "x"}, {y, sizeof y, "y"}};
  run_ok(&k, ROWS, args, 4, bufs, 2);
  for (int r = 0; r < ROWS; r++) {
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < COLS; c++) mx = fmax(mx, x[r * STRIDE + c]);
    for (int c = 0; c < COLS; c++) sum += exp(x[r * STRIDE + c] - mx);
    for (int c = 0; c < COLS; c++)
      cr_assert_lt(rel_err(y[r * STRIDE + c], exp(x[r * STRIDE + c] - mx) / sum), 1e-5);
    for (int c = COLS; c < STRIDE; c++) cr_assert_eq(y[r * STRIDE + c], 0.0f);
  }
  kend(&k);
}

/* ---- tests: dot ---------------------------------------------------------------- */

/* Offsets of a rows x cols tile at (r0, c0) of a row-major matrix with
 * `ld` columns: (r0 + i) * ld + c0 + j. r0, c0 scalars or NULL. */
static Value *tile_offsets(K *k, Value *r0, Value *c0, int rows, int cols, Value *ld) {
  TType t = t2(SK_I32, rows, cols);
  Value *ri = arange(k, 0, rows), *ci = arange(k, 0, cols);
  if (r0) ri = bin_s(k, OP_ADD, ri, r0);
  if (c0) ci = bin_s(k, OP_ADD, ci, c0);
  Value *r = bcast(k, expand(k, ri, 1), t), *c = bcast(k, expand(k, ci, 0), t);
  return bin(k, OP_ADD, bin(k, OP_MUL, r, bcast(k, ld, t)), c);
}

Test(interp, tiled_matmul_with_for_loop) {
  enum { M = 32, N = 48, KD = 64, BM = 16, BN = 16, BK = 16 };
  float *a = malloc(M * KD * sizeof *a), *b = malloc(KD * N * sizeof *b), *c = calloc(M * N, sizeof *c);
  fill_random(a, M * KD, 3);
  fill_random(b, KD * N, 4);
  TType pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {pf, pf, pf, ts(SK_I32), ts(SK_I32), ts(SK_I32)};
  K k;
  kbegin(&k, "matmul", 6, params, (const char *[]){"c", "a", "b", "m", "n", "k"});
  Value *m0 = bin(&k, OP_MUL, pid(&k, 0), cint(&k, ts(SK_I32), BM));
  Value *n0 = bin(&k, OP_MUL, pid(&k, 1), cint(&k, ts(SK_I32), BN));
  Value *acc0 = cflt(&k, t2(SK_F32, BM, BN), 0.0);
  Value *lo = cint(&k, ts(SK_I32), 0), *step = cint(&k, ts(SK_I32), BK);
  Op *loop = for_open(&k, lo, arg(&k, 5), step, 1, (Value *[]){acc0});
  {
    Value *k0 = for_iv(loop);
    Value *ao = tile_offsets(&k, m0, k0, BM, BK, arg(&k, 5));
    Value *bo = tile_offsets(&k, k0, n0, BK, BN, arg(&k, 4));
    Value *ta = load(&k, ptr_add(&k, arg(&k, 1), ao), NULL, NULL);
    Value *tb = load(&k, ptr_add(&k, arg(&k, 2), bo), NULL, NULL);
    Value *acc = OP(&k, OP_DOT, t2(SK_F32, BM, BN), ta, tb, for_iter(loop, 0));
    for_close(&k, 1, (Value *[]){acc});
  }
  Value *co = tile_offsets(&k, m0, n0, BM, BN, arg(&k, 4));
  store(&k, ptr_add(&k, arg(&k, 0), co), &loop->results[0], NULL);
  ret(&k);
  InterpArg args[] = {aptr(c), aptr(a), aptr(b), aint(M), aint(N), aint(KD)};
  Buf bufs[] = {{a, M * KD * sizeof *a, "a"}, {b, KD * N * sizeof *b, "b"}, {c, M * N * sizeof *c, "c"}};
  char *err = run_full(&k, M / BM, N / BN, 1, args, 6, bufs, 3, 0);
  cr_assert_null(err, "%s", err);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int l = 0; l < KD; l++) s += (double)a[i * KD + l] * b[l * N + j];
      cr_assert(fabs(c[i * N + j] - s) < 1e-5 * fmax(1.0, fabs(s)), "c[%d][%d] = %g, want %g", i, j,
                c[i * N + j], s);
    }
  kend(&k);
  free(a);
  free(b);
  free(c);
}

Test(interp, dot_accumulates_in_f32_in_k_order) {
  /* acc = 1; products 2^24, 1, -2^24 accumulated in order in f32:
   * 1 + 2^24 = 2^24 (ties to even), + 1 = 2^24, - 2^24 = 0 (a double sum
   * would give 2). Row 0 of a 16x16x16 dot; the rest is zero. */
  enum { D = 16 };
  float a[D * D] = {0}, b[D * D] = {0}, out[D * D];
  a[0] = 4096.0f, a[1] = 1.0f, a[2] = -4096.0f;
  b[0 * D] = 4096.0f, b[1 * D] = 1.0f, b[2 * D] = 4096.0f;
  TType pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {pf, pf, pf};
  K k;
  kbegin(&k, "dotk", 3, params, (const char *[]){"out", "a", "b"});
  Value *ta = load_2d(&k, arg(&k, 1), D, D), *tb = load_2d(&k, arg(&k, 2), D, D);
  Value *acc = OP(&k, OP_DOT, t2(SK_F32, D, D), ta, tb, cflt(&k, t2(SK_F32, D, D), 1.0));
  Value *o = tile_offsets(&k, NULL, NULL, D, D, cint(&k, ts(SK_I32), D));
  store(&k, ptr_add(&k, arg(&k, 0), o), acc, NULL);
  ret(&k);
  InterpArg args[] = {aptr(out), aptr(a), aptr(b)};
  Buf bufs[] = {{a, sizeof a, "a"}, {b, sizeof b, "b"}, {out, sizeof out, "out"}};
  run_ok(&k, 1, args, 3, bufs, 3);
  cr_assert_eq(out[0], 0.0f, "got %g", out[0]);
  cr_assert_eq(out[1], 1.0f);
  cr_assert_eq(out[D], 1.0f);
  kend(&k);
}

Test(interp, batched_bf16_dot_and_int8_dot) {
  enum { B = 2, D = 16 };
  uint16_t a[B * D * D], b[B * D * D];
  int8_t ia[D * D], ib[D * D];
  float out[B * D * D];
  int32_t iout[D * D];
  uint32_t seed = 5;
  for (int i = 0; i < B * D * D; i++) { /* the upper halves of random f32 values */
    float fa = frand(&seed), fb = frand(&seed);
    uint32_t ba, bb;
    memcpy(&ba, &fa, sizeof ba);
    memcpy(&bb, &fb, sizeof bb);
    a[i] = (uint16_t)(ba >> 16);
    b[i] = (uint16_t)(bb >> 16);
  }
  for (int i = 0; i < D * D; i++) {
    ia[i] = (int8_t)(i * 37 - 128);
    ib[i] = (int8_t)(i * 11 + 3);
  }
  TType pb = ptr_of(ts(SK_PTR), SK_BF16), pf = ptr_of(ts(SK_PTR), SK_F32);
  TType p8 = ptr_of(ts(SK_PTR), SK_I8), pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pf, pb, pb, pi, p8, p8};
  K k;
  kbegin(&k, "bdot", 6, params, (const char *[]){"out", "a", "b", "iout", "ia", "ib"});
  TType t3i = t3(SK_I32, B, D, D);
  Value *offs = bin(&k, OP_ADD,
                    bcast(&k, expand(&k, tile_offsets(&k, NULL, NULL, D, D, cint(&k, ts(SK_I32), D)), 0), t3i),
                    bin(&k, OP_MUL, bcast(&k, expand(&k, expand(&k, arange(&k, 0, B), 1), 2), t3i),
                        cint(&k, t3i, D * D)));
  Value *ta = load(&k, ptr_add(&k, arg(&k, 1), offs), NULL, NULL);
  Value *tb = load(&k, ptr_add(&k, arg(&k, 2), offs), NULL, NULL);
  Value *r = OP(&k, OP_DOT, t3(SK_F32, B, D, D), ta, tb, cflt(&k, t3(SK_F32, B, D, D), 0.0));
  store(&k, ptr_add(&k, arg(&k, 0), offs), r, NULL);
  Value *o2 = tile_offsets(&k, NULL, NULL, D, D, cint(&k, ts(SK_I32), D));
  Value *xa = load(&k, ptr_add(&k, arg(&k, 4), o2), NULL, NULL);
  Value *xb = load(&k, ptr_add(&k, arg(&k, 5), o2), NULL, NULL);
  Value *ir = OP(&k, OP_DOT, t2(SK_I32, D, D), xa, xb, cint(&k, t2(SK_I32, D, D), 7));
  store(&k, ptr_add(&k, arg(&k, 3), o2), ir, NULL);
  ret(&k);
  InterpArg args[] = {aptr(out), aptr(a), aptr(b), aptr(iout), aptr(ia), aptr(ib)};
  Buf bufs[] = {{a, sizeof a, "a"}, {b, sizeof b, "b"}, {out, sizeof out, "out"},
                {ia, sizeof ia, "ia"}, {ib, sizeof ib, "ib"}, {iout, sizeof iout, "iout"}};
  run_ok(&k, 1, args, 6, bufs, 6);
  for (int bi = 0; bi < B; bi++)
    for (int i = 0; i < D; i++)
      for (int j = 0; j < D; j++) {
        double s = 0;
        for (int l = 0; l < D; l++) {
          float x, y;
          memcpy(&x, &(uint32_t){(uint32_t)a[bi * D * D + i * D + l] << 16}, sizeof x);
          memcpy(&y, &(uint32_t){(uint32_t)b[bi * D * D + l * D + j] << 16}, sizeof y);
          s += (double)x * y;
        }
        cr_assert_lt(fabs(out[bi * D * D + i * D + j] - s), 1e-5 * fmax(1.0, fabs(s)));
      }
  for (int i = 0; i < D; i++)
    for (int j = 0; j < D; j++) {
      int32_t s = 7;
      for (int l = 0; l < D; l++) s += ia[i * D + l] * ib[l * D + j];
      cr_assert_eq(iout[i * D + j], s);
    }
  kend(&k);
}

/* ---- tests: shapes ------------------------------------------------------------- */

Test(interp, trans_broadcast_reshape) {
  enum { R = 4, C = 8 };
  float x[R * C], tr[C * R], rs[R * C], bc[R * C];
  fill_random(x, R * C, 9);
  TType pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {pf, pf, pf, pf};
  K k;
  kbegin(&k, "shapes", 4, params, (const char *[]){"x", "tr", "rs", "bc"});
  Value *v = load_2d(&k, arg(&k, 0), R, C);
  Value *t = trans2(&k, v);
  store(&k, ptr_add(&k, arg(&k, 1), tile_offsets(&k, NULL, NULL, C, R, cint(&k, ts(SK_I32), R))), t,
        NULL);
  /* reshape [4, 8] -> [8, 4] keeps the row-major order. */
  Value *r = OP(&k, OP_RESHAPE, t2(SK_F32, C, R), v);
  store(&k, ptr_add(&k, arg(&k, 2), tile_offsets(&k, NULL, NULL, C, R, cint(&k, ts(SK_I32), R))), r,
        NULL);
  /* row 0 broadcast over all rows: [1, 8] -> [4, 8] */
  Value *row0 = load(&k, ptr_add(&k, arg(&k, 0), expand(&k, arange(&k, 0, C), 0)), NULL, NULL);
  store(&k, ptr_add(&k, arg(&k, 3), tile_offsets(&k, NULL, NULL, R, C, cint(&k, ts(SK_I32), C))),
        bcast(&k, row0, t2(SK_F32, R, C)), NULL);
  ret(&k);
  InterpArg args[] = {aptr(x), aptr(tr), aptr(rs), aptr(bc)};
  Buf bufs[] = {{x, sizeof x, "x"}, {tr, sizeof tr, "tr"}, {rs, sizeof rs, "rs"}, {bc, sizeof bc, "bc"}};
  run_ok(&k, 1, args, 4, bufs, 4);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      cr_assert_eq(tr[j * R + i], x[i * C + j]);
      cr_assert_eq(rs[i * C + j], x[i * C + j]);
      cr_assert_eq(bc[i * C + j], x[j]);
    }
  kend(&k);
}

Test(interp, program_ids_over_3d_grid) {
  enum { GX = 3, GY = 2, GZ = 2 };
  int32_t out[GX * GY * GZ][4];
  memset(out, 0xff, sizeof out);
  TType pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pi};
  K k;
  kbegin(&k, "ids", 1, params, (const char *[]){"out"});
  Value *x = pid(&k, 0), *y = pid(&k, 1), *z = pid(&k, 2);
  Value *lin = bin(&k, OP_ADD, x, bin(&k, OP_MUL, nprog(&k, 0), bin(&k, OP_ADD, y, bin(&k, OP_MUL, nprog(&k, 1), z))));
  Value *base = bin(&k, OP_MUL, lin, cint(&k, ts(SK_I32), 4));
  Value *vals[4] = {x, y, z, nprog(&k, 2)};
  for (int i = 0; i < 4; i++)
    store(&k, OP(&k, OP_PTR_ADD, arg(&k, 0)->type, arg(&k, 0),
                 bin(&k, OP_ADD, base, cint(&k, ts(SK_I32), i))),
          vals[i], NULL);
  ret(&k);
  InterpArg args[] = {aptr(out)};
  Buf bufs[] = {{out, sizeof out, "out"}};
  char *err = run_full(&k, GX, GY, GZ, args, 1, bufs, 1, 0);
  cr_assert_null(err, "%s", err);
  for (int z = 0; z < GZ; z++)
    for (int y = 0; y < GY; y++)
      for (int x = 0; x < GX; x++) {
        int32_t *o = out[x + GX * (y + GY * z)];
        cr_assert(o[0] == x && o[1] == y && o[2] == z && o[3] == GZ);
      }
  kend(&k);
}

/* ---- tests: atomics -------------------------------------------------------------- */

Test(interp, atomic_add_counts_over_grid) {
  enum { G = 12, BLOCK = 16 };
  int32_t counters[4] = {0};
  float fsum[1] = {0};
  int32_t olds[G * BLOCK];
  TType pi = ptr_of(ts(SK_PTR), SK_I32), pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {pi, pf, pi};
  K k;
  kbegin(&k, "count", 3, params, (const char *[]){"cnt", "fsum", "olds"});
  /* every lane adds 1 to cnt[lane % 4]; lanes >= 12 masked off */
  Value *lane = arange(&k, 0, BLOCK);
  Value *slot = bin(&k, OP_AND, lane, cint(&k, lane->type, 3));
  Value *mask = cmp(&k, OP_CMP_LT, lane, cint(&k, lane->type, 12));
  Value *old = atomic(&k, OP_ATOMIC_ADD, ptr_add(&k, arg(&k, 0), slot), cint(&k, lane->type, 1), mask);
  Value *base = bin(&k, OP_MUL, pid(&k, 0), cint(&k, ts(SK_I32), BLOCK));
  store(&k, ptr_add(&k, arg(&k, 2), bin_s(&k, OP_ADD, lane, base)), old, NULL);
  atomic(&k, OP_ATOMIC_ADD, arg(&k, 1), cflt(&k, ts(SK_F32), 0.5), NULL);
  ret(&k);
  InterpArg args[] = {aptr(counters), aptr(fsum), aptr(olds)};
  Buf bufs[] = {{counters, sizeof counters, "cnt"}, {fsum, sizeof fsum, "fsum"}, {olds, sizeof olds, "olds"}};
  run_ok(&k, G, args, 3, bufs, 3);
  for (int i = 0; i < 4; i++) cr_assert_eq(counters[i], G * 3, "counter %d: %d", i, counters[i]);
  cr_assert_eq(fsum[0], 0.5f * G);
  /* program p's lanes 0..11 see 3p (first hit of a counter in program p),
   * 3p + 1, 3p + 2 in lane order; masked-off lanes return 0. */
  for (int p = 0; p < G; p++)
    for (int l = 0; l < BLOCK; l++)
      cr_assert_eq(olds[p * BLOCK + l], l < 12 ? 3 * p + l / 4 : 0, "p %d lane %d", p, l);
  kend(&k);
}

Test(interp, atomic_max_and_cas) {
  enum { G = 10 };
  int32_t mx[1] = {-100}, flag[1] = {0}, got[G];
  TType pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pi, pi, pi};
  K k;
  kbegin(&k, "amax", 3, params, (const char *[]){"mx", "flag", "got"});
  Value *p = pid(&k, 0);
  /* value (p * 7) % 10: the maximum 9 comes from program 7 */
  Value *v = bin(&k, OP_REM, bin(&k, OP_MUL, p, cint(&k, ts(SK_I32), 7)), cint(&k, ts(SK_I32), 10));
  atomic(&k, OP_ATOMIC_MAX, arg(&k, 0), v, NULL);
  /* cas(flag, 0, p + 1): only the first program wins */
  Value *old = OP(&k, OP_ATOMIC_CAS, ts(SK_I32), arg(&k, 1), cint(&k, ts(SK_I32), 0),
                  bin(&k, OP_ADD, p, cint(&k, ts(SK_I32), 1)));
  store(&k, OP(&k, OP_PTR_ADD, arg(&k, 2)->type, arg(&k, 2), p), old, NULL);
  ret(&k);
  InterpArg args[] = {aptr(mx), aptr(flag), aptr(got)};
  Buf bufs[] = {{mx, sizeof mx, "mx"}, {flag, sizeof flag, "flag"}, {got, sizeof got, "got"}};
  run_ok(&k, G, args, 3, bufs, 3);
  cr_assert_eq(mx[0], 9);
  cr_assert_eq(flag[0], 1);
  cr_assert_eq(got[0], 0);
  for (int i = 1; i < G; i++) cr_assert_eq(got[i], 1);
  kend(&k);
}

/* ---- tests: tensor descriptors --------------------------------------------------- */

Test(interp, block_load_zero_fills_outside) {
  enum { ROWS = 10, COLS = 12, BOX = 8 };
  float t[ROWS * COLS], out[BOX * BOX];
  for (int i = 0; i < ROWS * COLS; i++) t[i] = (float)(i + 1);
  TType pf = ptr_of(ts(SK_PTR), SK_F32);
  TType params[] = {desc_of(SK_F32, 2), pf, ts(SK_I32), ts(SK_I32)};
  K k;
  kbegin(&k, "bl", 4, params, (const char *[]){"t", "out", "r0", "c0"});
  Value *box = OP(&k, OP_BLOCK_LOAD, t2(SK_F32, BOX, BOX), arg(&k, 0), arg(&k, 2), arg(&k, 3));
  store(&k, ptr_add(&k, arg(&k, 1), tile_offsets(&k, NULL, NULL, BOX, BOX, cint(&k, ts(SK_I32), BOX))),
        box, NULL);
  ret(&k);
  InterpArg args[4];
  memset(args, 0, sizeof args);
  args[0].desc.base = t;
  args[0].desc.shape[0] = ROWS;
  args[0].desc.shape[1] = COLS;
  args[0].desc.strides[0] = COLS;
  args[0].desc.strides[1] = 1;
  args[1] = aptr(out);
  Buf bufs[] = {{t, sizeof t, "t"}, {out, sizeof out, "out"}};
  /* column offsets are multiples of 4 f32 (16 bytes: TMA rows) */
  const int offsets[][2] = {{4, 8}, {-3, -8}};
  for (int o = 0; o < 2; o++) {
    args[2] = aint(offsets[o][0]);
    args[3] = aint(offsets[o][1]);
    run_ok(&k, 1, args, 4, bufs, 2);
    for (int i = 0; i < BOX; i++)
      for (int j = 0; j < BOX; j++) {
        int r = offsets[o][0] + i, c = offsets[o][1] + j;
        float want = r >= 0 && r < ROWS && c >= 0 && c < COLS ? t[r * COLS + c] : 0.0f;
        cr_assert_eq(out[i * BOX + j], want, "offset set %d element [%d, %d]", o, i, j);
      }
  }
  kend(&k);
}

Test(interp, block_store_skips_outside) {
  enum { ROWS = 6, COLS = 6, BOX = 4 };
  float t[ROWS * COLS + 4];
  for (int i = 0; i < ROWS * COLS + 4; i++) t[i] = -1.0f;
  TType params[] = {desc_of(SK_F32, 2)};
  K k;
  kbegin(&k, "bs", 1, params, (const char *[]){"t"});
  Value *v = bin(&k, OP_ADD, cast(&k, tile_offsets(&k, NULL, NULL, BOX, BOX, cint(&k, ts(SK_I32), BOX)), SK_F32),
                 cflt(&k, t2(SK_F32, BOX, BOX), 100.0));
  emit(&k, OP_BLOCK_STORE, 0, NULL, OPS(arg(&k, 0), v, cint(&k, ts(SK_I32), 4), cint(&k, ts(SK_I32), 4)));
  ret(&k);
  InterpArg args[1];
  memset(args, 0, sizeof args);
  args[0].desc.base = t;
  args[0].desc.shape[0] = ROWS;
  args[0].desc.shape[1] = COLS;
  args[0].desc.strides[0] = COLS;
  args[0].desc.strides[1] = 1;
  Buf bufs[] = {{t, ROWS * COLS * sizeof(float), "t"}};
  run_ok(&k, 1, args, 1, bufs, 1);
  for (int r = 0; r < ROWS; r++)
    for (int c = 0; c < COLS; c++) {
      bool inside = r >= 4 && c >= 4;
      float want = inside ? 100.0f + (float)((r - 4) * BOX + (c - 4)) : -1.0f;
      cr_assert_eq(t[r * COLS + c], want, "[%d, %d]", r, c);
    }
  for (int i = ROWS * COLS; i < ROWS * COLS + 4; i++) cr_assert_eq(t[i], -1.0f);
  kend(&k);
}

/* The last offset of a block access must start rows on 16 bytes, as TMA
 * copies do on the GPU (which stops the kernel otherwise). */
Test(interp, block_offsets_start_rows_on_16_bytes) {
  float t[64];
  TType params[] = {desc_of(SK_F32, 2), ts(SK_I32)};
  K k;
  kbegin(&k, "bo", 2, params, (const char *[]){"t", "c0"});
  Value *box = OP(&k, OP_BLOCK_LOAD, t2(SK_F32, 4, 4), arg(&k, 0), cint(&k, ts(SK_I32), 0), arg(&k, 1));
  emit(&k, OP_BLOCK_STORE, 0, NULL, OPS(arg(&k, 0), box, cint(&k, ts(SK_I32), 4), cint(&k, ts(SK_I32), 0)));
  ret(&k);
  InterpArg args[2];
  memset(args, 0, sizeof args);
  args[0].desc.base = t;
  args[0].desc.shape[0] = 8;
  args[0].desc.shape[1] = 8;
  args[0].desc.strides[0] = 8;
  args[0].desc.strides[1] = 1;
  Buf bufs[] = {{t, sizeof t, "t"}};
  for (int i = 0; i < 64; i++) t[i] = (float)i;
  args[1] = aint(4);
  run_ok(&k, 1, args, 2, bufs, 1);
  cr_assert_eq(t[4 * 8 + 1], 5.0f, "row 0 of the box at (0, 4) stored at (4, 0)");
  args[1] = aint(3);
  char *err = run(&k, 1, args, 2, bufs, 1);
  cr_assert(err && strstr(err, "load_block offset 3 in the last dimension is not a multiple of 4 elements (16 bytes"),
            "%s", err ? err : "(no error)");
  free(err);
  kend(&k);
}

/* ---- tests: control flow ----------------------------------------------------------- */

Test(interp, if_yields_per_program) {
  enum { G = 6 };
  int32_t out[G];
  TType pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pi};
  K k;
  kbegin(&k, "iff", 1, params, (const char *[]){"out"});
  Value *p = pid(&k, 0);
  Value *even = cmp(&k, OP_CMP_EQ, bin(&k, OP_AND, p, cint(&k, ts(SK_I32), 1)), cint(&k, ts(SK_I32), 0));
  TType rt[] = {ts(SK_I32)};
  Op *op = if_open(&k, even, 1, rt);
  if_else(&k, op, 1, (Value *[]){bin(&k, OP_MUL, p, cint(&k, ts(SK_I32), 10))});
  if_close(&k, 1, (Value *[]){cint(&k, ts(SK_I32), -1)});
  store(&k, OP(&k, OP_PTR_ADD, pi, arg(&k, 0), p), &op->results[0], NULL);
  ret(&k);
  InterpArg args[] = {aptr(out)};
  Buf bufs[] = {{out, sizeof out, "out"}};
  run_ok(&k, G, args, 1, bufs, 1);
  for (int i = 0; i < G; i++) cr_assert_eq(out[i], i % 2 == 0 ? i * 10 : -1);
  kend(&k);
}

Test(interp, while_loop_collatz) {
  enum { N = 8 };
  int32_t start[N] = {1, 2, 3, 6, 7, 9, 27, 97}, steps[N];
  TType pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pi, pi};
  K k;
  kbegin(&k, "collatz", 2, params, (const char *[]){"start", "steps"});
  Value *p = pid(&k, 0);
  Value *x0 = load(&k, OP(&k, OP_PTR_ADD, pi, arg(&k, 0), p), NULL, NULL);
  TType i32 = ts(SK_I32);
  Op *w = while_open(&k, 2, (Value *[]){x0, cint(&k, i32, 0)});
  {
    Value *x = &w->regions[0].args[0];
    while_do(&k, w, cmp(&k, OP_CMP_NE, x, cint(&k, i32, 1)));
    Value *y = &w->regions[1].args[0], *n = &w->regions[1].args[1];
    Value *odd = cmp(&k, OP_CMP_EQ, bin(&k, OP_AND, y, cint(&k, i32, 1)), cint(&k, i32, 1));
    Value *up = bin(&k, OP_ADD, bin(&k, OP_MUL, y, cint(&k, i32, 3)), cint(&k, i32, 1));
    Value *down = bin(&k, OP_SHR, y, cint(&k, i32, 1));
    Value *next = OP(&k, OP_SELECT, i32, odd, up, down);
    yield(&k, 2, (Value *[]){next, bin(&k, OP_ADD, n, cint(&k, i32, 1))});
    pop(&k);
  }
  store(&k, OP(&k, OP_PTR_ADD, pi, arg(&k, 1), p), &w->results[1], NULL);
  ret(&k);
  InterpArg args[] = {aptr(start), aptr(steps)};
  Buf bufs[] = {{start, sizeof start, "start"}, {steps, sizeof steps, "steps"}};
  run_ok(&k, N, args, 2, bufs, 2);
  for (int i = 0; i < N; i++) {
    int64_t x = start[i], n = 0;
    while (x != 1) x = (x & 1) ? 3 * x + 1 : x / 2, n++;
    cr_assert_eq(steps[i], n, "start %d: %d steps, want %lld", start[i], steps[i], (long long)n);
  }
  kend(&k);
}

/* for loop over [lo, hi) by step summing iv, and carrying (a, b) -> (b, a)
 * swapped every iteration; stores sum, a, b, trip count. */
static void build_for_sum(K *k) {
  TType pi = ptr_of(ts(SK_PTR), SK_I32), i32 = ts(SK_I32);
  TType params[] = {pi, i32, i32, i32};
  kbegin(k, "forsum", 4, params, (const char *[]){"out", "lo", "hi", "step"});
  Value *zero = cint(k, i32, 0);
  at(k, 4, 7);
  Op *loop = for_open(k, arg(k, 1), arg(k, 2), arg(k, 3), 4,
                      (Value *[]){zero, cint(k, i32, 10), cint(k, i32, 20), zero});
  {
    Value *s = bin(k, OP_ADD, for_iter(loop, 0), for_iv(loop));
    Value *trips = bin(k, OP_ADD, for_iter(loop, 3), cint(k, i32, 1));
    for_close(k, 4, (Value *[]){s, for_iter(loop, 2), for_iter(loop, 1), trips});
  }
  at(k, 8, 1);
  for (int i = 0; i < 4; i++)
    store(k, OP(k, OP_PTR_ADD, pi, arg(k, 0), cint(k, i32, i)), &loop->results[i], NULL);
  ret(k);
}

Test(interp, for_loop_up_down_and_permuted_yield) {
  int32_t out[4];
  K k;
  build_for_sum(&k);
  Buf bufs[] = {{out, sizeof out, "out"}};
  const int32_t cases[][3] = {{0, 10, 3}, {10, 0, -3}, {5, 5, 1}, {5, 0, 1}, {-3, 4, 1},
                              {INT32_MAX - 5, INT32_MAX, 4}, {INT32_MIN + 5, INT32_MIN, -4}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int32_t lo = cases[c][0], hi = cases[c][1], step = cases[c][2];
    InterpArg args[] = {aptr(out), aint(lo), aint(hi), aint(step)};
    run_ok(&k, 1, args, 4, bufs, 1);
    int64_t sum = 0, trips = 0;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) sum += i, trips++;
    cr_assert_eq(out[0], (int32_t)(uint32_t)sum, "case %zu sum", c);
    cr_assert_eq(out[3], trips, "case %zu trips %d", c, out[3]);
    cr_assert_eq(out[1], trips % 2 ? 20 : 10, "case %zu a", c);
    cr_assert_eq(out[2], trips % 2 ? 10 : 20, "case %zu b", c);
  }
  kend(&k);
}

Test(interp, error_for_step_zero) {
  int32_t out[4];
  K k;
  build_for_sum(&k);
  Buf bufs[] = {{out, sizeof out, "out"}};
  InterpArg args[] = {aptr(out), aint(0), aint(10), aint(0)};
  assert_msg(run(&k, 1, args, 4, bufs, 1),
             "t.tile:4:7: error: for loop step is zero (program (0, 0, 0))");
  kend(&k);
}

Test(interp, error_step_limit_on_infinite_while) {
  TType params[] = {ts(SK_I32)};
  K k;
  kbegin(&k, "spin", 1, params, (const char *[]){"n"});
  TType i32 = ts(SK_I32);
  at(&k, 3, 5);
  Op *w = while_open(&k, 1, (Value *[]){arg(&k, 0)});
  {
    Value *x = &w->regions[0].args[0];
    while_do(&k, w, cmp(&k, OP_CMP_GE, x, cint(&k, i32, 0)));
    Value *y = &w->regions[1].args[0];
    Value *next = bin(&k, OP_AND, bin(&k, OP_ADD, y, cint(&k, i32, 1)), cint(&k, i32, 1023));
    yield(&k, 1, &next);
    pop(&k);
  }
  ret(&k);
  InterpArg args[] = {aint(0)};
  char *err = run_full(&k, 1, 1, 1, args, 1, NULL, 0, 10000);
  cr_assert_not_null(err);
  cr_assert(strstr(err, "error: execution limit of 10000 steps exceeded (program (0, 0, 0))"), "%s", err);
  cr_assert(strncmp(err, "t.tile:", 7) == 0, "%s", err);
  free(err);
  kend(&k);
}

/* ---- tests: arguments -------------------------------------------------------------- */

Test(interp, error_align_fact_violated) {
  _Alignas(64) float x[64] = {0}, y[64] = {0}, z[64 + 4];
  K k;
  build_vadd(&k, true);
  k.f->params[1].align = 16;
  k.f->params[3].multiple_of = 8;
  InterpArg args[] = {aptr(z), aptr(x + 1), aptr(y), aint(48)};
  Buf bufs[] = {{z, sizeof z, "z"}, {x, sizeof x, "x"}, {y, sizeof y, "y"}};
  char want[256];
  snprintf(want, sizeof want,
           "t.tile:1:1: error: argument 'x' violates align(16): address 0x%llx (kernel 'add')",
           (unsigned long long)(uintptr_t)(x + 1));
  assert_msg(run(&k, 1, args, 4, bufs, 3), want);
  args[1] = aptr(x);
  args[3] = aint(50);
  assert_msg(run(&k, 1, args, 4, bufs, 3),
             "t.tile:1:1: error: argument 'n' violates multiple_of(8): value 50 (kernel 'add')");
  args[3] = aint(48);
  run_ok(&k, 1, args, 4, bufs, 3);
  kend(&k);
}

Test(interp, error_wrong_argument_count) {
  K k;
  build_vadd(&k, true);
  InterpArg args[] = {aint(0)};
  assert_msg(run(&k, 1, args, 1, NULL, 0), "t.tile:1:1: error: kernel 'add' takes 4 arguments, 1 given");
  kend(&k);
}

Test(interp, masked_atomic_out_of_bounds_lane_is_not_touched) {
  /* The masked-off lanes point past the buffer: no error, result 0. */
  int32_t cnt[4] = {0}, olds[8];
  TType pi = ptr_of(ts(SK_PTR), SK_I32);
  TType params[] = {pi, pi};
  K k;
  kbegin(&k, "ma", 2, params, (const char *[]){"cnt", "olds"});
  Value *lane = arange(&k, 0, 8);
  Value *mask = cmp(&k, OP_CMP_LT, lane, cint(&k, lane->type, 4));
  Value *old = atomic(&k, OP_ATOMIC_XCHG, ptr_add(&k, arg(&k, 0), lane), bin(&k, OP_ADD, lane, cint(&k, lane->type, 5)), mask);
  store(&k, ptr_add(&k, arg(&k, 1), lane), old, NULL);
  ret(&k);
  cnt[2] = 77;
  InterpArg args[] = {aptr(cnt), aptr(olds)};
  Buf bufs[] = {{cnt, sizeof cnt, "cnt"}, {olds, sizeof olds, "olds"}};
  run_ok(&k, 1, args, 2, bufs, 2);
  for (int i = 0; i < 4; i++) cr_assert_eq(cnt[i], i + 5);
  for (int i = 0; i < 8; i++) cr_assert_eq(olds[i], i == 2 ? 77 : 0);
  kend(&k);
}

/* ---- tests: attention ---------------------------------------------------------------- */

/* Flash attention forward for one head: out = softmax(q k^T * scale) v with
 * the online softmax, one program per BM query rows, BN keys per iteration. */
enum { FA_SEQ = 256, FA_D = 64, FA_BM = 64, FA_BN = 64 };

static void build_flash_attention(K *k) {
  TType pf = ptr_of(ts(SK_PTR), SK_F32), i32 = ts(SK_I32);
  TType params[] = {pf, pf, pf, pf, i32};
  kbegin(k, "attn", 5, params, (const char *[]){"out", "q", "k", "v", "seq"});
  Value *d = cint(k, i32, FA_D);
  Value *m0 = bin(k, OP_MUL, pid(k, 0), cint(k, i32, FA_BM));
  Value *q = load(k, ptr_add(k, arg(k, 1), tile_offsets(k, m0, NULL, FA_BM, FA_D, d)), NULL, NULL);
  TType row = t1(SK_F32, FA_BM), tile = t2(SK_F32, FA_BM, FA_D);
  Value *inits[] = {cflt(k, row, -INFINITY), cflt(k, row, 0.0), cflt(k, tile, 0.0)};
  Op *loop = for_open(k, cint(k, i32, 0), arg(k, 4), cint(k, i32, FA_BN), 3, inits);
  {
    Value *n0 = for_iv(loop), *m = for_iter(loop, 0), *l = for_iter(loop, 1), *acc = for_iter(loop, 2);
    Value *kt = load(k, ptr_add(k, arg(k, 2), tile_offsets(k, n0, NULL, FA_BN, FA_D, d)), NULL, NULL);
    Value *vt = load(k, ptr_add(k, arg(k, 3), tile_offsets(k, n0, NULL, FA_BN, FA_D, d)), NULL, NULL);
    TType st = t2(SK_F32, FA_BM, FA_BN);
    Value *s = OP(k, OP_DOT, st, q, trans2(k, kt), cflt(k, st, 0.0));
    s = bin(k, OP_MUL, s, cflt(k, st, 0.125));
    Value *m_new = bin(k, OP_MAX, m, reduce(k, OP_REDUCE_MAX, s, 1));
    Value *p = una(k, OP_EXP, bin(k, OP_SUB, s, bcast(k, expand(k, m_new, 1), st)));
    Value *alpha = una(k, OP_EXP, bin(k, OP_SUB, m, m_new));
    Value *l_new = bin(k, OP_ADD, bin(k, OP_MUL, l, alpha), reduce(k, OP_REDUCE_SUM, p, 1));
    Value *scaled = bin(k, OP_MUL, acc, bcast(k, expand(k, alpha, 1), tile));
    Value *acc_new = OP(k, OP_DOT, tile, p, vt, scaled);
    for_close(k, 3, (Value *[]){m_new, l_new, acc_new});
  }
  Value *o = bin(k, OP_DIV, &loop->results[2], bcast(k, expand(k, &loop->results[1], 1), tile));
  store(k, ptr_add(k, arg(k, 0), tile_offsets(k, m0, NULL, FA_BM, FA_D, d)), o, NULL);
  ret(k);
}

Test(interp, flash_attention_matches_reference) {
  size_t n = FA_SEQ * FA_D;
  float *q = malloc(n * sizeof *q), *kk = malloc(n * sizeof *kk), *v = malloc(n * sizeof *v);
  float *out = calloc(n, sizeof *out);
  fill_random(q, (int)n, 21);
  fill_random(kk, (int)n, 22);
  fill_random(v, (int)n, 23);
  K k;
  build_flash_attention(&k);
  InterpArg args[] = {aptr(out), aptr(q), aptr(kk), aptr(v), aint(FA_SEQ)};
  Buf bufs[] = {{out, n * 4, "out"}, {q, n * 4, "q"}, {kk, n * 4, "k"}, {v, n * 4, "v"}};
  run_ok(&k, FA_SEQ / FA_BM, args, 5, bufs, 4);
  double *srow = malloc(FA_SEQ * sizeof *srow);
  for (int i = 0; i < FA_SEQ; i++) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < FA_SEQ; j++) {
      double s = 0;
      for (int c = 0; c < FA_D; c++) s += (double)q[i * FA_D + c] * kk[j * FA_D + c];
      srow[j] = s * 0.125;
      mx = fmax(mx, srow[j]);
    }
    for (int j = 0; j < FA_SEQ; j++) sum += srow[j] = exp(srow[j] - mx);
    for (int c = 0; c < FA_D; c++) {
      double o = 0;
      for (int j = 0; j < FA_SEQ; j++) o += srow[j] * v[j * FA_D + c];
      o /= sum;
      cr_assert_lt(fabs(out[i * FA_D + c] - o), 1e-5, "out[%d][%d] = %g, want %g", i, c,
                   out[i * FA_D + c], o);
    }
  }
  free(srow);
  kend(&k);
  free(q);
  free(kk);
  free(v);
  free(out);
}

/* ---- tests: kernels written as IR text ------------------------------------------- */

/* Each program p counts the positive x[i] for i = p, p + G, ... < n with a
 * while loop whose body branches with if. */
static const char *const strided_count_ir =
    "module \"t.tile\"\n"
    "\n"
    "kernel @count(%out: *i32 align(4), %x: *i32, %n: i32 multiple_of(4)) @1:1 {\n"
    "  %0 = program_id {axis = 0} : i32 @2:3\n"
    "  %1 = const 0 : i32 @2:3\n"
    "  %2 = const 1 : i32 @2:3\n"
    "  %3, %4 = while (%5 = %0, %6 = %1) @3:3 {\n"
    "    %7 = cmp_lt %5, %n : i1 @3:9\n"
    "    yield %7 @3:9\n"
    "  } do (%8, %9) {\n"
    "    %10 = ptr_add %x, %8 : *i32 @4:5\n"
    "    %11 = load %10 : i32 @4:5\n"
    "    %12 = cmp_gt %11, %1 : i1 @5:5\n"
    "    %13 = if %12 -> i32 @5:5 {\n"
    "      yield %2 @5:5\n"
    "    } else {\n"
    "      yield %1 @5:5\n"
    "    }\n"
    "    %14 = add %9, %13 : i32 @6:5\n"
    "    %15 = num_programs {axis = 0} : i32 @6:5\n"
    "    %16 = add %8, %15 : i32 @6:5\n"
    "    yield %16, %14 @6:5\n"
    "  }\n"
    "  %17 = ptr_add %out, %0 : *i32 @7:3\n"
    "  store %17, %4 @7:3\n"
    "  return @8:1\n"
    "}\n";

Test(interp, text_kernel_while_if_count) {
  enum { N = 20, G = 3 };
  int32_t x[N], out[G];
  for (int i = 0; i < N; i++) x[i] = (i * 7) % 5 - 2;
  K k;
  kparse(&k, strided_count_ir);
  InterpArg args[] = {aptr(out), aptr(x), aint(N)};
  Buf bufs[] = {{out, sizeof out, "out"}, {x, sizeof x, "x"}};
  run_ok(&k, G, args, 3, bufs, 2);
  for (int p = 0; p < G; p++) {
    int want = 0;
    for (int i = p; i < N; i += G) want += x[i] > 0;
    cr_assert_eq(out[p], want, "program %d: %d, want %d", p, out[p], want);
  }
  args[2] = aint(18);
  assert_msg(run(&k, G, args, 3, bufs, 2),
             "t.tile:1:1: error: argument 'n' violates multiple_of(4): value 18 (kernel 'count')");
  kend(&k);
}

/* Bitwise and min atomics on u32 lanes, i64 cas and add, shifts. */
static const char *const atomics_ir =
    "module \"t.tile\"\n"
    "\n"
    "kernel @bits(%a: *u32, %b: *i64, %o: *u32) @1:1 {\n"
    "  %0 = arange {start = 0, end = 8} : i32[8] @2:3\n"
    "  %1 = const 0 : i32[8] @2:3\n"
    "  %2 = cast %0 : u32[8] @2:3\n"
    "  %3 = const 1 : u32[8] @2:3\n"
    "  %4 = shl %3, %2 : u32[8] @3:3\n"
    "  %5 = broadcast %a : *u32[8] @3:3\n"
    "  %6 = ptr_add %5, %1 : *u32[8] @3:3\n"
    "  %7 = atomic_or %6, %4 : u32[8] @4:3\n"
    "  %8 = const 1 : i32[8] @4:3\n"
    "  %9 = ptr_add %6, %8 : *u32[8] @4:3\n"
    "  %10 = not %4 : u32[8] @4:3\n"
    "  %11 = atomic_and %9, %10 : u32[8] @5:3\n"
    "  %12 = ptr_add %9, %8 : *u32[8] @5:3\n"
    "  %13 = atomic_xor %12, %2 : u32[8] @6:3\n"
    "  %14 = ptr_add %12, %8 : *u32[8] @6:3\n"
    "  %15 = const 5 : u32[8] @6:3\n"
    "  %16 = add %2, %15 : u32[8] @6:3\n"
    "  %17 = atomic_min %14, %16 : u32[8] @7:3\n"
    "  %18 = const 0 : i64 @8:3\n"
    "  %19 = const 42 : i64 @8:3\n"
    "  %20 = atomic_cas %b, %18, %19 : i64 @8:3\n"
    "  %21 = const 1 : i64 @8:3\n"
    "  %22 = ptr_add %b, %21 : *i64 @8:3\n"
    "  %23 = const -3 : i64 @8:3\n"
    "  %24 = atomic_add %22, %23 : i64 @8:3\n"
    "  %25 = broadcast %o : *u32[8] @9:3\n"
    "  %26 = ptr_add %25, %0 : *u32[8] @9:3\n"
    "  %27 = const 30 : u32[8] @9:3\n"
    "  %28 = shl %7, %27 : u32[8] @9:3\n"
    "  %29 = xor %28, %17 : u32[8] @9:3\n"
    "  store %26, %29 @9:3\n"
    "  return @10:1\n"
    "}\n";

Test(interp, text_kernel_bitwise_atomics) {
  uint32_t a[4] = {0x100, 0xFFFF, 0xAB, 9}, o[8];
  int64_t b[2] = {0, 100};
  K k;
  kparse(&k, atomics_ir);
  InterpArg args[] = {aptr(a), aptr(b), aptr(o)};
  Buf bufs[] = {{a, sizeof a, "a"}, {b, sizeof b, "b"}, {o, sizeof o, "o"}};
  char *err = run_full(&k, 2, 1, 1, args, 3, bufs, 3, 0);
  cr_assert_null(err, "%s", err);
  cr_assert_eq(a[0], 0x1FFu);
  cr_assert_eq(a[1], 0xFF00u);
  cr_assert_eq(a[2], 0xABu); /* xor of 0..7 twice */
  cr_assert_eq(a[3], 5u);
  cr_assert_eq(b[0], 42);
  cr_assert_eq(b[1], 94);
  /* program 1 (run last): atomic_or's old value of lane l is 0x1FF (all
   * bits set by program 0), shifted by 30 keeps bit 0 as bit 30 and bit 1
   * as bit 31; atomic_min's old value is 5 for every lane. */
  for (int l = 0; l < 8; l++) cr_assert_eq(o[l], (0x1FFu << 30) ^ 5u, "lane %d: 0x%x", l, o[l]);
  kend(&k);
}

/* Block load of a 16x16 box from a descriptor whose base buffer holds only
 * 8 rows of the 16 the descriptor claims. */
static const char *const block_load_ir =
    "module \"t.tile\"\n"
    "\n"
    "kernel @bl(%t: tensor<f32, 2>, %out: *f32) @1:1 {\n"
    "  %0 = const 0 : i32 @2:3\n"
    "  %1 = block_load %t, %0, %0 : f32[16, 16] @3:11\n"
    "  %2 = reduce_sum %1 {axis = 1} : f32[16] @4:3\n"
    "  %3 = arange {start = 0, end = 16} : i32[16] @4:3\n"
    "  %4 = broadcast %out : *f32[16] @4:3\n"
    "  %5 = ptr_add %4, %3 : *f32[16] @4:3\n"
    "  store %5, %2 @4:3\n"
    "  return @5:1\n"
    "}\n";

Test(interp, error_block_load_past_the_end) {
  float t[8 * 16], out[16];
  for (int i = 0; i < 8 * 16; i++) t[i] = 1.0f;
  K k;
  kparse(&k, block_load_ir);
  InterpArg args[2];
  memset(args, 0, sizeof args);
  args[0].desc.base = t;
  args[0].desc.shape[0] = 8;
  args[0].desc.shape[1] = 16;
  args[0].desc.strides[0] = 16;
  args[0].desc.strides[1] = 1;
  args[1] = aptr(out);
  Buf bufs[] = {{t, sizeof t, "t"}, {out, sizeof out, "out"}};
  run_ok(&k, 1, args, 2, bufs, 2); /* rows 8..15 are outside the tensor: zeros */
  for (int r = 0; r < 16; r++) cr_assert_eq(out[r], r < 8 ? 16.0f : 0.0f);
  args[0].desc.shape[0] = 16; /* the descriptor now lies about its size */
  char want[512];
  snprintf(want, sizeof want,
           "t.tile:3:11: error: out-of-bounds block_load of f32 at element [8, 0] of the tile: "
           "address 0x%llx is 0 bytes past the end of buffer 't' (512 bytes) (program (0, 0, 0))",
           (unsigned long long)(uintptr_t)(t + 8 * 16));
  assert_msg(run(&k, 1, args, 2, bufs, 2), want);
  kend(&k);
}

/* ---- tests: robustness ------------------------------------------------------------ */

Test(interp, malformed_loop_is_reported_not_run) {
  /* A for loop whose body yields nothing for its one loop-carried value:
   * the verifier rejects it; the interpreter must report, not crash. */
  TType params[] = {ts(SK_I32)};
  K k;
  kbegin(&k, "bad", 1, params, (const char *[]){"n"});
  TType i32 = ts(SK_I32);
  at(&k, 6, 2);
  for_open(&k, cint(&k, i32, 0), arg(&k, 0), cint(&k, i32, 1), 1, (Value *[]){cint(&k, i32, 0)});
  for_close(&k, 0, NULL);
  ret(&k);
  Interp *ip = interp_new(k.f, "t.tile");
  cr_assert_not_null(ip);
  char *err = NULL;
  InterpArg args[] = {aint(4)};
  cr_assert(!interp_run(ip, (int64_t[]){1, 1, 1}, args, 1, &err));
  assert_msg(err, "t.tile:6:2: error: malformed op (operands, results or regions do not fit)");
  interp_free(ip);
  kend(&k);
}

Test(interp, error_element_straddles_buffer_end) {
  /* A 10-byte buffer holds two whole f32 and half of a third. */
  _Alignas(16) unsigned char raw[16] = {0};
  K k;
  build_scalar_store(&k);
  InterpArg args[] = {aptr(raw), aint(2)};
  Buf bufs[] = {{raw, 10, "raw"}};
  char want[512];
  snprintf(want, sizeof want,
           "t.tile:9:5: error: out-of-bounds store of f32: the 4 bytes at address 0x%llx end 2 "
           "bytes past the end of buffer 'raw' (10 bytes) (program (0, 0, 0))",
           (unsigned long long)(uintptr_t)(raw + 8));
  assert_msg(run(&k, 1, args, 2, bufs, 1), want);
  kend(&k);
}
