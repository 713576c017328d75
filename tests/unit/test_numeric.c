/* test_numeric.c - unit tests for compiler/numeric/numeric.c.
 *
 * Expected values are independent facts: bit patterns from the format
 * definitions (worked out by hand in the comments), the compiler's own
 * _Float16 conversions, and small reference roundings written here on the
 * integer bits of a double.  No expectation is computed with numeric.c
 * itself except in round-trip tests.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../compiler/numeric/numeric.h"

/* ---- helpers ---------------------------------------------------------- */

static Slot sf(double f) {
  Slot s;
  s.f = f;
  return s;
}
static Slot si(int64_t i) {
  Slot s;
  s.i = i;
  return s;
}
static Slot su(uint64_t u) {
  Slot s;
  s.u = u;
  return s;
}

static uint64_t enc(double x, ScalarKind k) { return num_encode(sf(x), k); }
static double dec(uint64_t bits, ScalarKind k) { return num_decode(bits, k).f; }
static double rnd(double x, ScalarKind k) { return num_round_float(x, k); }
static uint64_t dbits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}
static bool same_double(double a, double b) { return dbits(a) == dbits(b); }

static Slot bin(NumBinop op, Slot a, Slot b, ScalarKind k) {
  bool dz = false;
  Slot r = num_binop(op, a, b, k, &dz);
  cr_assert(!dz, "unexpected division by zero");
  return r;
}
static int64_t ibin(NumBinop op, int64_t a, int64_t b, ScalarKind k) {
  return bin(op, si(a), si(b), k).i;
}
static uint64_t ubin(NumBinop op, uint64_t a, uint64_t b, ScalarKind k) {
  return bin(op, su(a), su(b), k).u;
}
static double fbin(NumBinop op, double a, double b, ScalarKind k) {
  return bin(op, sf(a), sf(b), k).f;
}
static double fun(NumUnop op, double a, ScalarKind k) { return num_unop(op, sf(a), k).f; }
static uint64_t conv_u(Slot v, ScalarKind from, ScalarKind to) { return num_convert(v, from, to).u; }
static int64_t conv_i(Slot v, ScalarKind from, ScalarKind to) { return num_convert(v, from, to).i; }

static uint64_t rng_next(uint64_t *state) { /* xorshift64 */
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

/* A random double 1.m * 2^e with e in [lo, hi] and random sign.  One time
 * in four the low mantissa bits are replaced by a single 1 (an exact tie at
 * some precision); one time in four by a 1, zeros, and a few random bits far
 * below (just above a tie: the case that double rounding gets wrong). */
static double random_double(uint64_t *st, int lo, int hi) {
  uint64_t r = rng_next(st);
  uint64_t mant = rng_next(st) & ((UINT64_C(1) << 52) - 1);
  if ((r & 3) < 2) {
    int keep = (int)((r >> 2) % 20) + 30; /* replace the low `keep` bits */
    uint64_t low = (r & 3) == 1 ? rng_next(st) & ((UINT64_C(1) << (keep - 25)) - 1) : 0;
    mant = (mant >> keep << keep) | (UINT64_C(1) << (keep - 1)) | low;
  }
  int e = lo + (int)((r >> 8) % (uint64_t)(hi - lo + 1));
  double x = ldexp(1.0 + ldexp((double)mant, -52), e);
  return (r >> 40) & 1 ? -x : x;
}

/* ---- bf16 ------------------------------------------------------------- */

Test(bf16, known_bit_patterns) {
  cr_assert_eq(enc(1.0, SK_BF16), 0x3f80);
  cr_assert_eq(enc(-2.0, SK_BF16), 0xc000);
  cr_assert_eq(enc(0x1.fep127, SK_BF16), 0x7f7f); /* max finite */
  cr_assert_eq(enc(0x1p-126, SK_BF16), 0x0080);   /* min normal */
  cr_assert_eq(enc(0x1p-133, SK_BF16), 0x0001);   /* min subnormal */
  cr_assert_eq(enc(-0.0, SK_BF16), 0x8000);
  cr_assert_eq(enc(INFINITY, SK_BF16), 0x7f80);
  cr_assert_eq(enc(-INFINITY, SK_BF16), 0xff80);
  cr_assert_eq(num_float_max(SK_BF16), 0x1.fep127);
}

Test(bf16, ties_to_even) {
  /* 1 + 2^-8 lies halfway between 1 (mantissa 0) and 1 + 2^-7 (mantissa 1). */
  cr_assert_eq(enc(1.0 + 0x1p-8, SK_BF16), 0x3f80);
  /* 1 + 3*2^-8 lies halfway between mantissa 1 and mantissa 2. */
  cr_assert_eq(enc(1.0 + 3 * 0x1p-8, SK_BF16), 0x3f82);
  cr_assert(rnd(1.0 + 0x1p-8 + 0x1p-40, SK_BF16) == 1.0 + 0x1p-7);
  cr_assert(rnd(1.0 + 0x1p-8 - 0x1p-40, SK_BF16) == 1.0);
  /* half the smallest subnormal is a tie with zero: rounds to (signed) 0 */
  cr_assert(same_double(rnd(0x1p-134, SK_BF16), 0.0));
  cr_assert(same_double(rnd(-0x1p-134, SK_BF16), -0.0));
  cr_assert(rnd(3 * 0x1p-134, SK_BF16) == 0x1p-132);
}

Test(bf16, no_double_rounding_through_float) {
  double x = 1.0 + 0x1p-8 + 0x1p-30;
  /* through float: 1 + 2^-8 exactly (2^-30 is below half an f32 ulp), then a
   * tie that goes to 1.0; the direct rounding sees it is above the tie. */
  cr_assert(rnd((double)(float)x, SK_BF16) == 1.0);
  cr_assert(rnd(x, SK_BF16) == 1.0 + 0x1p-7);
  cr_assert_eq(enc(x, SK_BF16), 0x3f81);
}

Test(bf16, overflow_to_inf) {
  /* the max is (2 - 2^-7) * 2^127; the halfway point to 2^128 rounds up */
  cr_assert(rnd(0x1.fep127 + 0x1p119, SK_BF16) == INFINITY);
  cr_assert(rnd(0x1.fep127 + 0x1p118, SK_BF16) == 0x1.fep127);
  cr_assert(rnd(-1e300, SK_BF16) == -INFINITY);
}

/* Reference: round a double in bf16's normal range by its integer bits. */
static uint64_t ref_bf16(double x) {
  uint64_t b = dbits(x);
  uint64_t sign = b >> 63, frac = b & ((UINT64_C(1) << 52) - 1);
  int e = (int)((b >> 52) & 0x7ff) - 1023 + 127;
  uint64_t mag = (uint64_t)e << 7 | frac >> 45;
  uint64_t rest = frac & ((UINT64_C(1) << 45) - 1), half = UINT64_C(1) << 44;
  if (rest > half || (rest == half && (mag & 1))) mag++; /* carries into exponent */
  return sign << 15 | mag;
}

Test(bf16, random_doubles_match_integer_reference) {
  uint64_t st = 0x9e3779b97f4a7c15u;
  for (int i = 0; i < 200000; i++) {
    double x = random_double(&st, -126, 127);
    cr_assert_eq(enc(x, SK_BF16), ref_bf16(x), "x = %a", x);
  }
}

Test(bf16, all_patterns_decode_as_upper_half_of_f32) {
  for (uint32_t b = 0; b < 0x10000; b++) {
    uint32_t w = b << 16;
    float fl;
    memcpy(&fl, &w, sizeof fl);
    double d = dec(b, SK_BF16);
    if (isnan(fl)) {
      cr_assert(isnan(d));
      cr_assert_eq(enc(d, SK_BF16), 0x7fc0);
    } else {
      cr_assert(same_double(d, fl), "pattern %#x", b);
      cr_assert_eq(enc(d, SK_BF16), b, "pattern %#x", b);
      cr_assert(same_double(dec(enc(d, SK_BF16), SK_BF16), d));
    }
  }
}

/* ---- f16 -------------------------------------------------------------- */

Test(f16, known_bit_patterns) {
  cr_assert_eq(enc(1.0, SK_F16), 0x3c00);
  cr_assert_eq(enc(-2.0, SK_F16), 0xc000);
  cr_assert_eq(enc(65504.0, SK_F16), 0x7bff);
  cr_assert_eq(enc(0.1, SK_F16), 0x2e66);
  cr_assert_eq(enc(1.0 / 3.0, SK_F16), 0x3555);
  cr_assert_eq(enc(3.14159265358979323846, SK_F16), 0x4248);
  cr_assert_eq(enc(0x1p-24, SK_F16), 0x0001);        /* min subnormal */
  cr_assert_eq(enc(1023 * 0x1p-24, SK_F16), 0x03ff); /* max subnormal */
  cr_assert_eq(enc(0x1p-14, SK_F16), 0x0400);        /* min normal */
  cr_assert_eq(enc(-0.0, SK_F16), 0x8000);
  cr_assert_eq(num_float_max(SK_F16), 65504.0);
}

Test(f16, overflow) {
  cr_assert(rnd(65519.0, SK_F16) == 65504.0);
  cr_assert(rnd(65520.0, SK_F16) == INFINITY); /* tie between 65504 (odd) and 2^16 */
  cr_assert_eq(enc(65520.0, SK_F16), 0x7c00);
  cr_assert_eq(enc(-65520.0, SK_F16), 0xfc00);
  cr_assert_eq(enc(1e6, SK_F16), 0x7c00);
}

Test(f16, subnormal_rounding) {
  cr_assert(same_double(rnd(0x1p-25, SK_F16), 0.0)); /* tie with 0 -> even */
  cr_assert(rnd(0x1p-25 + 0x1p-40, SK_F16) == 0x1p-24);
  cr_assert(rnd(3 * 0x1p-25, SK_F16) == 0x1p-23); /* tie between 1 and 2 units */
  cr_assert(rnd(5 * 0x1p-25, SK_F16) == 0x1p-23); /* tie between 2 and 3 units */
  cr_assert(same_double(rnd(-0x1p-26, SK_F16), -0.0));
  cr_assert_eq(enc(-0x1p-26, SK_F16), 0x8000);
  cr_assert(rnd(0x1p-14 - 0x1p-30, SK_F16) == 0x1p-14); /* rounds up into normals */
}

Test(f16, all_patterns_round_trip) {
  for (uint32_t b = 0; b < 0x10000; b++) {
    double d = dec(b, SK_F16);
    bool nan_pattern = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    cr_assert_eq(isnan(d) != 0, nan_pattern, "pattern %#x", b);
    if (nan_pattern) {
      cr_assert_eq(enc(d, SK_F16), 0x7e00);
      continue;
    }
    cr_assert_eq(enc(d, SK_F16), b, "pattern %#x", b);
    cr_assert(same_double(dec(enc(d, SK_F16), SK_F16), d));
    cr_assert(same_double(rnd(d, SK_F16), d));
  }
}

#ifdef __FLT16_MAX__
Test(f16, decode_matches_compiler_Float16) {
  for (uint32_t b = 0; b < 0x10000; b++) {
    uint16_t h16 = (uint16_t)b;
    _Float16 h;
    memcpy(&h, &h16, sizeof h);
    if (isnan((double)h)) continue;
    cr_assert(same_double(dec(b, SK_F16), (double)h), "pattern %#x", b);
  }
}

Test(f16, random_doubles_match_compiler_Float16) {
  uint64_t st = 0x0123456789abcdefu;
  for (int i = 0; i < 200000; i++) {
    double x = random_double(&st, -30, 17); /* subnormals to overflow */
    _Float16 h = (_Float16)x;
    uint16_t hb;
    memcpy(&hb, &h, sizeof hb);
    cr_assert_eq(enc(x, SK_F16), hb, "x = %a", x);
  }
}
#endif

/* ---- f32 / f64 -------------------------------------------------------- */

Test(f32, known_bit_patterns_and_limits) {
  cr_assert_eq(enc(1.0, SK_F32), 0x3f800000);
  cr_assert_eq(enc(0.1, SK_F32), 0x3dcccccd);
  cr_assert_eq(enc(0x1p-149, SK_F32), 0x00000001);
  cr_assert_eq(enc(1e39, SK_F32), 0x7f800000);
  cr_assert(same_double(rnd(1e-50, SK_F32), 0.0));
  cr_assert(same_double(rnd(-1e-50, SK_F32), -0.0));
  cr_assert(rnd(0x1p-150 + 0x1p-170, SK_F32) == 0x1p-149);
  cr_assert_eq(num_float_max(SK_F32), 0x1.fffffep127);
}

Test(f64, identity_and_bits) {
  cr_assert(same_double(rnd(0.1, SK_F64), 0.1));
  cr_assert(same_double(rnd(0x1p-1074, SK_F64), 0x1p-1074));
  cr_assert_eq(enc(1.0, SK_F64), UINT64_C(0x3ff0000000000000));
  cr_assert_eq(enc(-0.0, SK_F64), UINT64_C(0x8000000000000000));
  cr_assert(same_double(dec(UINT64_C(0x0000000000000001), SK_F64), 0x1p-1074));
}

Test(nan, canonical_encodings_and_propagation) {
  cr_assert_eq(enc(NAN, SK_F16), 0x7e00);
  cr_assert_eq(enc(NAN, SK_BF16), 0x7fc0);
  cr_assert_eq(enc(NAN, SK_F32), 0x7fc00000);
  cr_assert_eq(enc(NAN, SK_F64), UINT64_C(0x7ff8000000000000));
  cr_assert_eq(enc(NAN, SK_F8E4M3) & 0x7f, 0x7f);
  cr_assert_eq(enc(NAN, SK_F8E5M2), 0x7e);
  ScalarKind fk[] = {SK_F8E4M3, SK_F8E5M2, SK_F16, SK_BF16, SK_F32, SK_F64};
  for (size_t i = 0; i < sizeof fk / sizeof fk[0]; i++) {
    cr_assert(isnan(rnd(NAN, fk[i])));
    cr_assert(isnan(num_convert(sf(NAN), SK_F64, fk[i]).f));
  }
  cr_assert(isnan(dec(0xffc00000, SK_F32)));
}

/* ---- fp8 -------------------------------------------------------------- */

Test(e4m3, known_bit_patterns) {
  cr_assert_eq(enc(448.0, SK_F8E4M3), 0x7e);
  cr_assert_eq(enc(-448.0, SK_F8E4M3), 0xfe);
  cr_assert_eq(enc(1.0, SK_F8E4M3), 0x38);
  cr_assert_eq(enc(256.0, SK_F8E4M3), 0x78); /* exponent 15 is normal in E4M3FN */
  cr_assert_eq(enc(0x1p-6, SK_F8E4M3), 0x08);    /* min normal */
  cr_assert_eq(enc(7 * 0x1p-9, SK_F8E4M3), 0x07); /* max subnormal */
  cr_assert_eq(enc(0x1p-9, SK_F8E4M3), 0x01);     /* min subnormal */
  cr_assert(dec(0x7e, SK_F8E4M3) == 448.0);
  cr_assert(isnan(dec(0x7f, SK_F8E4M3)));
  cr_assert(isnan(dec(0xff, SK_F8E4M3)));
  cr_assert(same_double(dec(0x80, SK_F8E4M3), -0.0));
  cr_assert_eq(num_float_max(SK_F8E4M3), 448.0);
}

Test(e4m3, saturation) {
  cr_assert(rnd(1000.0, SK_F8E4M3) == 448.0);
  cr_assert(rnd(464.0, SK_F8E4M3) == 448.0);
  cr_assert(rnd(480.0, SK_F8E4M3) == 448.0);
  cr_assert(rnd(INFINITY, SK_F8E4M3) == 448.0);
  cr_assert(rnd(-INFINITY, SK_F8E4M3) == -448.0);
  cr_assert(rnd(-1e300, SK_F8E4M3) == -448.0);
  cr_assert_eq(enc(1000.0, SK_F8E4M3), 0x7e);
  cr_assert_eq(enc(INFINITY, SK_F8E4M3), 0x7e);
}

Test(e4m3, ties_to_even) {
  cr_assert(rnd(17.0, SK_F8E4M3) == 16.0); /* 16 = 1.000b*2^4, 18 = 1.001b*2^4 */
  cr_assert(rnd(19.0, SK_F8E4M3) == 20.0);
  cr_assert(same_double(rnd(0x1p-10, SK_F8E4M3), 0.0));
  cr_assert(rnd(1.5 * 0x1p-10, SK_F8E4M3) == 0x1p-9);
  cr_assert(rnd(3 * 0x1p-10, SK_F8E4M3) == 0x1p-8);
  cr_assert_eq(enc(-0x1p-11, SK_F8E4M3), 0x80);
}

Test(e5m2, known_bit_patterns_and_saturation) {
  cr_assert_eq(enc(57344.0, SK_F8E5M2), 0x7b);
  cr_assert_eq(enc(1.0, SK_F8E5M2), 0x3c);
  cr_assert_eq(enc(0x1p-14, SK_F8E5M2), 0x04); /* min normal */
  cr_assert_eq(enc(0x1p-16, SK_F8E5M2), 0x01); /* min subnormal */
  cr_assert(dec(0x7c, SK_F8E5M2) == INFINITY);
  cr_assert(dec(0xfc, SK_F8E5M2) == -INFINITY);
  cr_assert(isnan(dec(0x7d, SK_F8E5M2)) && isnan(dec(0x7e, SK_F8E5M2)) && isnan(dec(0x7f, SK_F8E5M2)));
  cr_assert_eq(enc(INFINITY, SK_F8E5M2), 0x7c); /* an inf slot keeps its pattern */
  cr_assert(rnd(1e6, SK_F8E5M2) == 57344.0);
  cr_assert(rnd(61440.0, SK_F8E5M2) == 57344.0);
  cr_assert(rnd(INFINITY, SK_F8E5M2) == 57344.0);
  cr_assert(rnd(-INFINITY, SK_F8E5M2) == -57344.0);
  cr_assert_eq(num_float_max(SK_F8E5M2), 57344.0);
}

/* The value of fp8 pattern b (sign clear) from the format definition. */
static double ref_fp8_value(unsigned b, int mant_bits, int bias) {
  unsigned m = b & ((1u << mant_bits) - 1), e = b >> mant_bits;
  if (e == 0) return ldexp(m, 1 - bias - mant_bits);
  return ldexp((double)(m | 1u << mant_bits), (int)e - bias - mant_bits);
}

static void check_fp8_patterns(ScalarKind k, int mant_bits, int bias, unsigned first_nan) {
  for (unsigned b = 0; b < 256; b++) {
    unsigned mag = b & 0x7f;
    double d = dec(b, k);
    if (mag >= first_nan) {
      cr_assert(isnan(d), "pattern %#x", b);
      continue;
    }
    if (k == SK_F8E5M2 && mag == 0x7c) {
      cr_assert(d == (b & 0x80 ? -INFINITY : INFINITY));
    } else {
      double v = ref_fp8_value(mag, mant_bits, bias);
      cr_assert(same_double(d, b & 0x80 ? -v : v), "pattern %#x", b);
    }
    cr_assert_eq(enc(d, k), b, "pattern %#x", b);
    cr_assert(same_double(dec(enc(d, k), k), d));
  }
}

Test(fp8, all_patterns_match_definition_and_round_trip) {
  check_fp8_patterns(SK_F8E4M3, 3, 7, 0x7f);
  check_fp8_patterns(SK_F8E5M2, 2, 15, 0x7d);
}

/* Brute force nearest fp8 value (positive x), ties to the even pattern. */
static double ref_fp8_round(double x, int mant_bits, int bias, unsigned max_pattern) {
  unsigned best = 0;
  for (unsigned b = 1; b <= max_pattern; b++) {
    double err = fabs(ref_fp8_value(b, mant_bits, bias) - x);
    double best_err = fabs(ref_fp8_value(best, mant_bits, bias) - x);
    if (err < best_err || (err == best_err && (b & 1) == 0)) best = b;
  }
  return ref_fp8_value(best, mant_bits, bias);
}

Test(fp8, rounding_matches_brute_force) {
  uint64_t st = 0xdeadbeefcafef00du;
  for (int i = 0; i < 20000; i++) {
    double x = fabs(random_double(&st, -18, 17));
    cr_assert(rnd(x, SK_F8E4M3) == ref_fp8_round(x, 3, 7, 0x7e), "x = %a", x);
    cr_assert(rnd(-x, SK_F8E4M3) == -ref_fp8_round(x, 3, 7, 0x7e), "x = %a", x);
    cr_assert(rnd(x, SK_F8E5M2) == ref_fp8_round(x, 2, 15, 0x7b), "x = %a", x);
  }
  for (int n = 0; n <= 1024; n++) { /* every multiple of 2^-11 up to 0.5 */
    double x = n * 0x1p-11;
    cr_assert(rnd(x, SK_F8E4M3) == ref_fp8_round(x, 3, 7, 0x7e), "x = %a", x);
  }
}

/* ---- int -> float ----------------------------------------------------- */

Test(int_to_float, u64_max_rounds_exactly) {
  Slot m = su(UINT64_MAX);
  cr_assert_eq(num_encode(num_convert(m, SK_U64, SK_F32), SK_F32), 0x5f800000); /* 2^64 */
  cr_assert_eq(num_encode(num_convert(m, SK_U64, SK_BF16), SK_BF16), 0x5f80);
  cr_assert(num_convert(m, SK_U64, SK_F64).f == 0x1p64);
  cr_assert(num_convert(m, SK_U64, SK_F16).f == INFINITY);
  cr_assert(num_convert(m, SK_U64, SK_F8E4M3).f == 448.0);
}

Test(int_to_float, no_double_rounding_from_64_bits) {
  /* 2^63 + 2^39 + 1: the f32 last place at 2^63 is 2^40, so this is just
   * above a tie and rounds up; through double (last place 2^11) the +1 is
   * lost and the tie would go down to 2^63. */
  Slot v = su((UINT64_C(1) << 63) + (UINT64_C(1) << 39) + 1);
  cr_assert_eq(num_encode(num_convert(v, SK_U64, SK_F32), SK_F32), 0x5f000001);
  Slot w = si(-((INT64_C(1) << 62) + (INT64_C(1) << 38) + 1));
  cr_assert_eq(num_encode(num_convert(w, SK_I64, SK_F32), SK_F32), 0xde800001);
  /* bf16: last place at 2^63 is 2^56 */
  Slot b = su((UINT64_C(1) << 63) + (UINT64_C(1) << 55) + 1);
  cr_assert_eq(num_encode(num_convert(b, SK_U64, SK_BF16), SK_BF16), 0x5f01);
  /* f64 from a 64-bit value: 2^63 + 2^10 + 1 is above the tie at 2^10 */
  Slot d = su((UINT64_C(1) << 63) + (UINT64_C(1) << 10) + 1);
  cr_assert(num_convert(d, SK_U64, SK_F64).f == 0x1p63 + 0x1p11);
}

Test(int_to_float, i64_near_2_pow_63) {
  cr_assert_eq(num_encode(num_convert(si(INT64_MAX), SK_I64, SK_F32), SK_F32), 0x5f000000);
  cr_assert_eq(num_encode(num_convert(si(INT64_MIN), SK_I64, SK_F32), SK_F32), 0xdf000000);
  /* below 2^63 the f32 last place is 2^39 */
  int64_t exact = INT64_MAX - ((INT64_C(1) << 39) - 1); /* 2^63 - 2^39 */
  cr_assert_eq(num_encode(num_convert(si(exact), SK_I64, SK_F32), SK_F32), 0x5effffff);
  int64_t tie = INT64_MAX - ((INT64_C(1) << 38) - 1); /* 2^63 - 2^38: tie, odd below */
  cr_assert_eq(num_encode(num_convert(si(tie), SK_I64, SK_F32), SK_F32), 0x5f000000);
  cr_assert(num_convert(si(INT64_MIN), SK_I64, SK_F64).f == -0x1p63);
}

Test(int_to_float, narrow_targets) {
  cr_assert_eq(num_encode(num_convert(si(257), SK_I32, SK_BF16), SK_BF16), 0x4380); /* tie -> 256 */
  cr_assert_eq(num_encode(num_convert(si(259), SK_I32, SK_BF16), SK_BF16), 0x4382); /* tie -> 260 */
  cr_assert(num_convert(si(65519), SK_I32, SK_F16).f == 65504.0);
  cr_assert(num_convert(si(65520), SK_I32, SK_F16).f == INFINITY);
  cr_assert(num_convert(su(70000), SK_U32, SK_F16).f == INFINITY);
  cr_assert(num_convert(si(-70000), SK_I32, SK_F16).f == -INFINITY);
  cr_assert(num_convert(si(1000), SK_I32, SK_F8E4M3).f == 448.0);
  cr_assert(num_convert(si(-100000), SK_I32, SK_F8E5M2).f == -57344.0);
  cr_assert(num_convert(si(16777217), SK_I32, SK_F32).f == 16777216.0);
  cr_assert(num_convert(su(0xffffffffu), SK_U32, SK_F64).f == 4294967295.0);
}

/* ---- float -> int ----------------------------------------------------- */

Test(float_to_int, truncates_toward_zero) {
  cr_assert_eq(conv_i(sf(3.99), SK_F32, SK_I32), 3);
  cr_assert_eq(conv_i(sf(-3.99), SK_F32, SK_I32), -3);
  cr_assert_eq(conv_i(sf(-0.9), SK_F32, SK_I32), 0);
  cr_assert_eq(conv_u(sf(0.9), SK_F32, SK_U8), 0);
  cr_assert_eq(conv_u(sf(-0.9), SK_F32, SK_U32), 0);
  cr_assert_eq(conv_i(sf(-2.5), SK_F16, SK_I8), -2);
}

Test(float_to_int, saturates) {
  cr_assert_eq(conv_i(sf(1e10), SK_F32, SK_I32), INT32_MAX);
  cr_assert_eq(conv_i(sf(-1e10), SK_F32, SK_I32), INT32_MIN);
  cr_assert_eq(conv_i(sf(2147483647.9), SK_F64, SK_I32), INT32_MAX);
  cr_assert_eq(conv_i(sf(-2147483648.9), SK_F64, SK_I32), INT32_MIN);
  cr_assert_eq(conv_i(sf(127.9), SK_F32, SK_I8), 127);
  cr_assert_eq(conv_i(sf(-129.0), SK_F32, SK_I8), -128);
  cr_assert_eq(conv_u(sf(300.5), SK_F32, SK_U8), 255);
  cr_assert_eq(conv_u(sf(-5.0), SK_F32, SK_U8), 0);
  cr_assert_eq(conv_u(sf(1e30), SK_F32, SK_U64), UINT64_MAX);
  cr_assert_eq(conv_u(sf(0x1p64), SK_F64, SK_U64), UINT64_MAX);
  cr_assert_eq(conv_u(sf(0x1p64 - 0x1p11), SK_F64, SK_U64), UINT64_C(0xfffffffffffff800));
  cr_assert_eq(conv_i(sf(0x1p63), SK_F64, SK_I64), INT64_MAX);
  cr_assert_eq(conv_i(sf(-0x1p63), SK_F64, SK_I64), INT64_MIN);
  cr_assert_eq(conv_i(sf(INFINITY), SK_F32, SK_I64), INT64_MAX);
  cr_assert_eq(conv_i(sf(-INFINITY), SK_F32, SK_I64), INT64_MIN);
  cr_assert_eq(conv_u(sf(INFINITY), SK_F32, SK_U16), 0xffff);
}

Test(float_to_int, nan_gives_zero) {
  cr_assert_eq(conv_i(sf(NAN), SK_F32, SK_I32), 0);
  cr_assert_eq(conv_u(sf(NAN), SK_F64, SK_U64), 0);
  cr_assert_eq(conv_i(sf(-NAN), SK_BF16, SK_I8), 0);
  cr_assert_eq(conv_i(sf(NAN), SK_F16, SK_I64), 0);
}

/* ---- i1, int -> int, pointers ------------------------------------------ */

Test(convert, to_i1_is_not_equal_zero) {
  cr_assert_eq(conv_u(sf(NAN), SK_F32, SK_I1), 1);
  cr_assert_eq(conv_u(sf(0.0), SK_F32, SK_I1), 0);
  cr_assert_eq(conv_u(sf(-0.0), SK_F32, SK_I1), 0);
  cr_assert_eq(conv_u(sf(0.25), SK_F16, SK_I1), 1);
  cr_assert_eq(conv_u(si(2), SK_I32, SK_I1), 1); /* not bit 0 */
  cr_assert_eq(conv_u(si(256), SK_I32, SK_I1), 1);
  cr_assert_eq(conv_u(si(-1), SK_I8, SK_I1), 1);
  cr_assert_eq(conv_u(si(0), SK_I64, SK_I1), 0);
}

Test(convert, from_i1_is_zero_or_one) {
  Slot t = su(1), f = su(0);
  cr_assert_eq(conv_i(t, SK_I1, SK_I8), 1); /* not -1 */
  cr_assert_eq(conv_i(t, SK_I1, SK_I32), 1);
  cr_assert_eq(conv_i(t, SK_I1, SK_I64), 1);
  cr_assert_eq(conv_u(t, SK_I1, SK_U8), 1);
  cr_assert(num_convert(t, SK_I1, SK_F32).f == 1.0);
  cr_assert(num_convert(t, SK_I1, SK_BF16).f == 1.0);
  cr_assert(same_double(num_convert(f, SK_I1, SK_F16).f, 0.0));
  cr_assert_eq(conv_i(f, SK_I1, SK_I32), 0);
}

Test(convert, int_to_int_by_source_signedness) {
  cr_assert_eq(conv_u(si(-1), SK_I32, SK_U64), UINT64_MAX);
  cr_assert_eq(conv_i(su(0xffffffffu), SK_U32, SK_I64), INT64_C(4294967295));
  cr_assert_eq(conv_i(si(300), SK_I32, SK_I8), 44);
  cr_assert_eq(conv_u(si(-1), SK_I32, SK_U8), 255);
  cr_assert_eq(conv_i(su(255), SK_U8, SK_I8), -1);
  cr_assert_eq(conv_u(si(-1), SK_I8, SK_U16), 0xffff);
  cr_assert_eq(conv_i(su(0xffff), SK_U16, SK_I32), 65535);
  cr_assert_eq(conv_i(si(INT64_C(0x100000005)), SK_I64, SK_I32), 5);
  cr_assert_eq(conv_i(si(-128), SK_I8, SK_I64), -128);
}

Test(convert, float_to_float) {
  cr_assert(num_convert(sf(INFINITY), SK_F32, SK_F8E4M3).f == 448.0);
  cr_assert(num_convert(sf(-INFINITY), SK_F32, SK_F8E5M2).f == -57344.0);
  cr_assert(num_convert(sf(65504.0), SK_F16, SK_F8E5M2).f == 57344.0);
  cr_assert(num_convert(sf(1e300), SK_F64, SK_F32).f == INFINITY);
  cr_assert(num_convert(sf(1e300), SK_F64, SK_BF16).f == INFINITY);
  cr_assert(num_convert(sf(INFINITY), SK_F32, SK_F16).f == INFINITY);
  cr_assert(isnan(num_convert(sf(NAN), SK_F32, SK_F16).f));
  cr_assert(num_convert(sf(448.0), SK_F8E4M3, SK_F32).f == 448.0);
  cr_assert(num_convert(sf(0.1), SK_F64, SK_BF16).f == 0x1.9ap-4); /* 0x3dcd */
}

Test(convert, pointer_copies) {
  uint64_t addr = UINT64_C(0xfedcba9876543210);
  cr_assert_eq(conv_u(su(addr), SK_PTR, SK_U64), addr);
  cr_assert_eq(conv_u(su(addr), SK_PTR, SK_I64), addr);
  cr_assert_eq(conv_u(su(addr), SK_I64, SK_PTR), addr);
  cr_assert_eq(num_bitcast(su(addr), SK_PTR, SK_I64).u, addr);
  cr_assert_eq(num_bitcast(su(addr), SK_U64, SK_PTR).u, addr);
}

Test(ints, wrap_int_normalizes) {
  cr_assert_eq(num_wrap_int(0x180, SK_I8).i, -128);
  cr_assert_eq(num_wrap_int(0x1ff, SK_U8).u, 255);
  cr_assert_eq(num_wrap_int(2, SK_I1).u, 0);
  cr_assert_eq(num_wrap_int(3, SK_I1).u, 1);
  cr_assert_eq(num_wrap_int(0x8000, SK_I16).i, -32768);
  cr_assert_eq(num_wrap_int(UINT64_C(0x80000000), SK_I32).i, INT32_MIN);
  cr_assert_eq(num_wrap_int(UINT64_C(0x123456789), SK_U32).u, 0x23456789);
  cr_assert_eq(num_wrap_int(UINT64_MAX, SK_I64).i, -1);
  cr_assert_eq(num_wrap_int(UINT64_MAX, SK_U64).u, UINT64_MAX);
}

/* ---- integer operations ----------------------------------------------- */

Test(ints, arithmetic_wraps) {
  cr_assert_eq(ibin(NUM_ADD, INT32_MAX, 1, SK_I32), INT32_MIN);
  cr_assert_eq(ubin(NUM_ADD, 255, 1, SK_U8), 0);
  cr_assert_eq(ibin(NUM_ADD, INT64_MAX, 1, SK_I64), INT64_MIN);
  cr_assert_eq(ibin(NUM_SUB, INT64_MIN, 1, SK_I64), INT64_MAX);
  cr_assert_eq(ibin(NUM_MUL, 16, 16, SK_I8), 0);
  cr_assert_eq(ibin(NUM_MUL, -128, -1, SK_I8), -128);
  cr_assert_eq(ibin(NUM_MUL, INT64_MIN, -1, SK_I64), INT64_MIN);
  cr_assert_eq(ubin(NUM_SUB, 0, 1, SK_U32), 0xffffffffu);
  cr_assert_eq(ubin(NUM_ADD, 1, 1, SK_I1), 0);
  cr_assert_eq(ibin(NUM_AND, -1, 0x0f, SK_I32), 0x0f);
  cr_assert_eq(ibin(NUM_XOR, -1, 1, SK_I8), -2);
  cr_assert_eq(num_fma(si(3), si(4), si(5), SK_I32).i, 17);
  cr_assert_eq(num_fma(si(INT32_MAX), si(2), si(2), SK_I32).i, 0);
}

Test(ints, int_min_divided_by_minus_one) {
  cr_assert_eq(ibin(NUM_DIV, INT32_MIN, -1, SK_I32), INT32_MIN);
  cr_assert_eq(ibin(NUM_REM, INT32_MIN, -1, SK_I32), 0);
  cr_assert_eq(ibin(NUM_DIV, INT64_MIN, -1, SK_I64), INT64_MIN);
  cr_assert_eq(ibin(NUM_REM, INT64_MIN, -1, SK_I64), 0);
  cr_assert_eq(ibin(NUM_DIV, -128, -1, SK_I8), -128);
  cr_assert_eq(ibin(NUM_DIV, 7, -1, SK_I32), -7);
}

Test(ints, division_truncates) {
  cr_assert_eq(ibin(NUM_DIV, -7, 2, SK_I32), -3);
  cr_assert_eq(ibin(NUM_REM, -7, 2, SK_I32), -1);
  cr_assert_eq(ibin(NUM_REM, 7, -2, SK_I32), 1);
  cr_assert_eq(ubin(NUM_DIV, 0xffffffffu, 2, SK_U32), 0x7fffffffu);
  cr_assert_eq(ubin(NUM_DIV, UINT64_MAX, 3, SK_U64), UINT64_MAX / 3);
  cr_assert_eq(ubin(NUM_REM, 200, 7, SK_U8), 4);
}

Test(ints, division_by_zero_is_reported) {
  bool dz = false;
  cr_assert_eq(num_binop(NUM_DIV, si(5), si(0), SK_I32, &dz).i, 0);
  cr_assert(dz);
  dz = false;
  cr_assert_eq(num_binop(NUM_REM, su(5), su(0), SK_U64, &dz).u, 0);
  cr_assert(dz);
  dz = false;
  cr_assert(num_binop(NUM_DIV, sf(1.0), sf(0.0), SK_F32, &dz).f == INFINITY);
  cr_assert(isnan(num_binop(NUM_DIV, sf(0.0), sf(0.0), SK_F32, &dz).f));
  cr_assert(isnan(num_binop(NUM_REM, sf(1.0), sf(0.0), SK_F32, &dz).f));
  cr_assert(!dz, "float division by zero is IEEE, not an error");
}

Test(ints, shifts_i32) {
  cr_assert_eq(ibin(NUM_SHL, 1, 31, SK_I32), INT32_MIN);
  cr_assert_eq(ibin(NUM_SHL, 1, 32, SK_I32), 0);
  cr_assert_eq(ibin(NUM_SHL, 1, 40, SK_I32), 0);
  cr_assert_eq(ibin(NUM_SHL, 1, -1, SK_I32), 0); /* amount 0xffffffff */
  cr_assert_eq(ibin(NUM_SHR, -8, 1, SK_I32), -4);
  cr_assert_eq(ibin(NUM_SHR, -8, 32, SK_I32), -1);
  cr_assert_eq(ibin(NUM_SHR, -8, 40, SK_I32), -1);
  cr_assert_eq(ibin(NUM_SHR, 8, 40, SK_I32), 0);
  cr_assert_eq(ibin(NUM_SHR, -8, -1, SK_I32), -1);
  cr_assert_eq(ibin(NUM_SHR, 8, -1, SK_I32), 0);
  cr_assert_eq(ibin(NUM_SHR, INT32_MIN, 31, SK_I32), -1);
}

Test(ints, shifts_u32) {
  cr_assert_eq(ubin(NUM_SHR, 0x80000000u, 31, SK_U32), 1);
  cr_assert_eq(ubin(NUM_SHR, 0x80000000u, 32, SK_U32), 0);
  cr_assert_eq(ubin(NUM_SHR, 0xffffffffu, 40, SK_U32), 0);
  cr_assert_eq(ubin(NUM_SHL, 1, 32, SK_U32), 0);
  cr_assert_eq(ubin(NUM_SHL, 1, 40, SK_U32), 0);
  cr_assert_eq(ubin(NUM_SHL, 0xffffffffu, 4, SK_U32), 0xfffffff0u);
  cr_assert_eq(ubin(NUM_SHR, 0xffffffffu, 0xffffffffu, SK_U32), 0);
}

Test(ints, shifts_i64_and_narrow) {
  cr_assert_eq(ibin(NUM_SHL, 1, 63, SK_I64), INT64_MIN);
  cr_assert_eq(ibin(NUM_SHL, 1, 64, SK_I64), 0);
  cr_assert_eq(ibin(NUM_SHL, 1, -1, SK_I64), 0);
  cr_assert_eq(ibin(NUM_SHR, -1, -5, SK_I64), -1);
  cr_assert_eq(ibin(NUM_SHR, INT64_MIN, 63, SK_I64), -1);
  cr_assert_eq(ibin(NUM_SHR, INT64_MAX, 64, SK_I64), 0);
  cr_assert_eq(ubin(NUM_SHR, UINT64_MAX, 63, SK_U64), 1);
  cr_assert_eq(ubin(NUM_SHR, UINT64_MAX, 64, SK_U64), 0);
  cr_assert_eq(ibin(NUM_SHL, 1, 7, SK_I8), -128);
  cr_assert_eq(ibin(NUM_SHL, 1, 8, SK_I8), 0);
  cr_assert_eq(ibin(NUM_SHL, 1, -1, SK_I8), 0); /* amount 255 */
  cr_assert_eq(ibin(NUM_SHR, -128, 9, SK_I8), -1);
  cr_assert_eq(ubin(NUM_SHL, 0x80, 1, SK_U8), 0);
}

Test(ints, unary_ops) {
  cr_assert_eq(num_unop(NUM_NEG, si(INT32_MIN), SK_I32).i, INT32_MIN);
  cr_assert_eq(num_unop(NUM_ABS, si(INT32_MIN), SK_I32).i, INT32_MIN);
  cr_assert_eq(num_unop(NUM_NEG, si(INT64_MIN), SK_I64).i, INT64_MIN);
  cr_assert_eq(num_unop(NUM_ABS, si(-5), SK_I8).i, 5);
  cr_assert_eq(num_unop(NUM_NEG, su(1), SK_U32).u, 0xffffffffu);
  cr_assert_eq(num_unop(NUM_ABS, su(0xffffffffu), SK_U32).u, 0xffffffffu);
  cr_assert_eq(num_unop(NUM_NOT, su(0), SK_I1).u, 1);
  cr_assert_eq(num_unop(NUM_NOT, su(1), SK_I1).u, 0);
  cr_assert_eq(num_unop(NUM_NOT, si(0), SK_I32).i, -1);
  cr_assert_eq(num_unop(NUM_NOT, su(0), SK_U8).u, 255);
}

Test(ints, comparisons_and_min_max_by_signedness) {
  cr_assert(num_cmp(NUM_LT, si(-1), si(1), SK_I32));
  cr_assert(num_cmp(NUM_GT, su(0xffffffffu), su(1), SK_U32));
  cr_assert(num_cmp(NUM_GT, su(UINT64_MAX), su(0), SK_U64));
  cr_assert(num_cmp(NUM_LE, si(3), si(3), SK_I8) && num_cmp(NUM_GE, si(3), si(3), SK_I8));
  cr_assert(!num_cmp(NUM_NE, si(3), si(3), SK_I16) && num_cmp(NUM_EQ, si(3), si(3), SK_I16));
  cr_assert_eq(ibin(NUM_MAX, -1, 1, SK_I32), 1);
  cr_assert_eq(ubin(NUM_MAX, UINT64_MAX, 1, SK_U64), UINT64_MAX);
  cr_assert_eq(ibin(NUM_MIN, INT64_MIN, 0, SK_I64), INT64_MIN);
  cr_assert_eq(ubin(NUM_MIN, 200, 100, SK_U8), 100);
}

/* ---- float operations ------------------------------------------------- */

Test(floats, comparisons_with_nan_and_zeros) {
  Slot n = sf(NAN), one = sf(1.0);
  for (int op = NUM_EQ; op <= NUM_GE; op++) {
    bool want = op == NUM_NE;
    cr_assert_eq(num_cmp((NumCmp)op, n, one, SK_F32), want);
    cr_assert_eq(num_cmp((NumCmp)op, one, n, SK_F32), want);
    cr_assert_eq(num_cmp((NumCmp)op, n, n, SK_F16), want);
  }
  cr_assert(num_cmp(NUM_EQ, sf(0.0), sf(-0.0), SK_F32));
  cr_assert(!num_cmp(NUM_LT, sf(-0.0), sf(0.0), SK_F32));
  cr_assert(num_cmp(NUM_LT, sf(-INFINITY), sf(-1e300), SK_F64));
}

Test(floats, maximum_minimum_are_maxnum_minnum) {
  cr_assert(fbin(NUM_MAX, NAN, 1.0, SK_F32) == 1.0);
  cr_assert(fbin(NUM_MAX, 1.0, NAN, SK_F32) == 1.0);
  cr_assert(fbin(NUM_MIN, NAN, -INFINITY, SK_F16) == -INFINITY);
  cr_assert(fbin(NUM_MIN, 2.0, NAN, SK_BF16) == 2.0);
  cr_assert(isnan(fbin(NUM_MAX, NAN, NAN, SK_F32)));
  cr_assert(isnan(fbin(NUM_MIN, NAN, NAN, SK_F64)));
  cr_assert(fbin(NUM_MAX, -3.0, 2.0, SK_F32) == 2.0);
  cr_assert(fbin(NUM_MIN, -3.0, 2.0, SK_F32) == -3.0);
}

Test(floats, maximum_minimum_signed_zeros) {
  cr_assert(same_double(fbin(NUM_MAX, 0.0, -0.0, SK_F32), 0.0));
  cr_assert(same_double(fbin(NUM_MAX, -0.0, 0.0, SK_F32), 0.0));
  cr_assert(same_double(fbin(NUM_MIN, 0.0, -0.0, SK_F32), -0.0));
  cr_assert(same_double(fbin(NUM_MIN, -0.0, 0.0, SK_F32), -0.0));
  cr_assert(same_double(fbin(NUM_MAX, -0.0, -0.0, SK_F16), -0.0));
}

Test(floats, arithmetic_rounds_once_to_the_kind) {
  cr_assert(fbin(NUM_ADD, 2048, 1, SK_F16) == 2048); /* f16 last place at 2048 is 2 */
  cr_assert(fbin(NUM_ADD, 2048, 3, SK_F16) == 2052);
  cr_assert(fbin(NUM_ADD, 65504, 16, SK_F16) == INFINITY);
  cr_assert_eq(enc(fbin(NUM_DIV, 1, 3, SK_F16), SK_F16), 0x3555);
  cr_assert(fbin(NUM_ADD, 256, 1, SK_BF16) == 256); /* bf16 last place at 256 is 2 */
  cr_assert(fbin(NUM_ADD, 256, 3, SK_BF16) == 260);
  cr_assert(fbin(NUM_ADD, 16777216, 1, SK_F32) == 16777216);
  cr_assert(fbin(NUM_MUL, 0x1p-100, 0x1p-100, SK_F32) == 0.0);
  cr_assert(fbin(NUM_SUB, 0.1, 0.1, SK_F64) == 0.0);
  cr_assert(fbin(NUM_REM, 5.5, 2, SK_F32) == 1.5);
  cr_assert(fbin(NUM_REM, -5.5, 2, SK_F32) == -1.5);
  cr_assert(fbin(NUM_ADD, 448, 448, SK_F8E4M3) == 448); /* fp8 saturates */
}

Test(floats, math_functions_round_once) {
  cr_assert_eq(enc(fun(NUM_EXP, 1.0, SK_F16), SK_F16), 0x4170);   /* 2.71875 */
  cr_assert_eq(enc(fun(NUM_SQRT, 2.0, SK_F16), SK_F16), 0x3da8);  /* 1.4140625 */
  cr_assert_eq(enc(fun(NUM_SQRT, 2.0, SK_BF16), SK_BF16), 0x3fb5); /* 1.4140625 */
  cr_assert_eq(enc(fun(NUM_EXP, 1.0, SK_F32), SK_F32), 0x402df854);
  cr_assert(fun(NUM_EXP, 12.0, SK_F16) == INFINITY);
  cr_assert(fun(NUM_SIGMOID, 0.0, SK_F32) == 0.5);
  cr_assert(fun(NUM_SIGMOID, -1000.0, SK_F32) == 0.0);
  cr_assert(fun(NUM_SIGMOID, 1000.0, SK_F32) == 1.0);
  cr_assert(fun(NUM_EXP2, 10.0, SK_F32) == 1024.0);
  cr_assert(fun(NUM_LOG2, 8.0, SK_BF16) == 3.0);
  cr_assert(fun(NUM_LOG, 0.0, SK_F32) == -INFINITY);
  cr_assert(isnan(fun(NUM_SQRT, -1.0, SK_F32)));
  cr_assert(fun(NUM_RSQRT, 4.0, SK_F32) == 0.5);
  cr_assert(fun(NUM_RSQRT, 0.0, SK_F32) == INFINITY);
  cr_assert(fun(NUM_TANH, 0.0, SK_F32) == 0.0 && fun(NUM_TANH, 100.0, SK_F32) == 1.0);
  cr_assert(fun(NUM_ERF, 0.0, SK_F32) == 0.0 && fun(NUM_ERF, 10.0, SK_F16) == 1.0);
  cr_assert(fun(NUM_SIN, 0.0, SK_F32) == 0.0 && fun(NUM_COS, 0.0, SK_F32) == 1.0);
}

Test(floats, floor_ceil_abs_neg) {
  cr_assert(fun(NUM_FLOOR, -1.5, SK_F32) == -2.0);
  cr_assert(fun(NUM_CEIL, -1.5, SK_F32) == -1.0);
  cr_assert(same_double(fun(NUM_CEIL, -0.5, SK_F16), -0.0));
  cr_assert(fun(NUM_FLOOR, 2.5, SK_BF16) == 2.0);
  cr_assert(same_double(fun(NUM_ABS, -0.0, SK_F32), 0.0));
  cr_assert(fun(NUM_ABS, -INFINITY, SK_F32) == INFINITY);
  cr_assert(same_double(fun(NUM_NEG, 0.0, SK_F32), -0.0));
  cr_assert(isnan(fun(NUM_NEG, NAN, SK_F32)));
  cr_assert(fun(NUM_NEG, 448.0, SK_F8E4M3) == -448.0);
}

Test(fma, f32_is_fused) {
  /* (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24; a separate f32 multiply would round
   * the 2^-24 away (a tie going to even) and the sum would be 0. */
  double a = 1.0 + 0x1p-12;
  cr_assert(num_fma(sf(a), sf(a), sf(-(1.0 + 0x1p-11)), SK_F32).f == 0x1p-24);
  cr_assert(num_fma(sf(2), sf(3), sf(4), SK_F64).f == 10);
  cr_assert(num_fma(sf(0.1), sf(10), sf(-1), SK_F64).f == fma(0.1, 10, -1));
}

Test(fma, f16_is_fused) {
  /* (1 + 2^-6)^2 = 1 + 2^-5 + 2^-12; 2^-12 is below half an f16 ulp at 1 */
  double a = 1.0 + 0x1p-6;
  cr_assert(num_fma(sf(a), sf(a), sf(-(1.0 + 0x1p-5)), SK_F16).f == 0x1p-12);
  cr_assert(num_fma(sf(65504), sf(2), sf(-65504), SK_F16).f == 65504); /* no overflow inside */
}

Test(fma, bf16_is_correctly_rounded) {
  /* 1.0625^2 = 1 + 2^-3 + 2^-8 is a bf16 tie (between 1.125, even, and
   * 1.125 + 2^-7).  Adding 2^-100 moves it just above the tie, which a
   * double fma cannot see (the sum rounds back to the tie in double). */
  Slot a = sf(1.0625);
  cr_assert_eq(num_encode(num_fma(a, a, sf(0x1p-100), SK_BF16), SK_BF16), 0x3f91);
  cr_assert_eq(num_encode(num_fma(a, a, sf(-0x1p-100), SK_BF16), SK_BF16), 0x3f90);
  cr_assert_eq(num_encode(num_fma(a, a, sf(0.0), SK_BF16), SK_BF16), 0x3f90);
  cr_assert_eq(num_encode(num_fma(sf(-1.0625), a, sf(-0x1p-100), SK_BF16), SK_BF16), 0xbf91);
}

Test(fma, special_values) {
  cr_assert(isnan(num_fma(sf(INFINITY), sf(0.0), sf(1.0), SK_F16).f));
  cr_assert(isnan(num_fma(sf(INFINITY), sf(1.0), sf(-INFINITY), SK_BF16).f));
  cr_assert(num_fma(sf(INFINITY), sf(2.0), sf(1.0), SK_F16).f == INFINITY);
  cr_assert(num_fma(sf(300), sf(300), sf(0), SK_F16).f == INFINITY);
  cr_assert(same_double(num_fma(sf(-0.0), sf(1.0), sf(-0.0), SK_BF16).f, -0.0));
  cr_assert(same_double(num_fma(sf(1.0), sf(1.0), sf(-1.0), SK_F16).f, 0.0));
}

/* ---- bitcast, load, store ------------------------------------------- */

Test(memory, bitcast) {
  cr_assert_eq(num_bitcast(sf(1.0), SK_F32, SK_I32).i, 0x3f800000);
  cr_assert_eq(num_bitcast(sf(-2.0), SK_F32, SK_U32).u, 0xc0000000u);
  cr_assert_eq(num_bitcast(sf(-2.0), SK_F32, SK_I32).i, (int32_t)-1073741824);
  cr_assert(num_bitcast(si(0x3c00), SK_I16, SK_F16).f == 1.0);
  cr_assert_eq(num_bitcast(sf(-1.0), SK_BF16, SK_I16).i, -16512); /* 0xbf80 */
  cr_assert(num_bitcast(su(0xbf80), SK_U16, SK_BF16).f == -1.0);
  cr_assert_eq(num_bitcast(sf(1.0), SK_F64, SK_U64).u, UINT64_C(0x3ff0000000000000));
  cr_assert(num_bitcast(si(0x7e), SK_I8, SK_F8E4M3).f == 448.0);
  cr_assert(num_bitcast(su(0x80000000u), SK_U32, SK_F32).f == 0.0);
  cr_assert(signbit(num_bitcast(su(0x80000000u), SK_U32, SK_F32).f));
}

Test(memory, store_writes_little_endian_bytes_only) {
  unsigned char buf[16];
  memset(buf, 0xaa, sizeof buf);
  num_store(buf + 1, sf(1.0), SK_F16);
  cr_assert(buf[0] == 0xaa && buf[1] == 0x00 && buf[2] == 0x3c && buf[3] == 0xaa);
  num_store(buf + 3, si(-2), SK_I32);
  cr_assert(buf[3] == 0xfe && buf[4] == 0xff && buf[5] == 0xff && buf[6] == 0xff && buf[7] == 0xaa);
  num_store(buf + 7, su(1), SK_I1);
  cr_assert(buf[7] == 1 && buf[8] == 0xaa);
  num_store(buf + 8, sf(1.0), SK_BF16);
  cr_assert(buf[8] == 0x80 && buf[9] == 0x3f && buf[10] == 0xaa);
  num_store(buf + 10, sf(-448.0), SK_F8E4M3);
  cr_assert(buf[10] == 0xfe && buf[11] == 0xaa);
  num_store(buf + 11, sf(1.0), SK_F32);
  cr_assert(buf[11] == 0 && buf[12] == 0 && buf[13] == 0x80 && buf[14] == 0x3f && buf[15] == 0xaa);
}

Test(memory, load_decodes_any_alignment) {
  unsigned char buf[24] = {0xff, 0xff, 0x00, 0x3c, 0xaa, 0x00, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0xf0, 0x3f, 0x7c, 0x01};
  cr_assert_eq(num_load(buf, SK_I8).i, -1);
  cr_assert_eq(num_load(buf, SK_U8).u, 255);
  cr_assert_eq(num_load(buf, SK_I16).i, -1);
  cr_assert(num_load(buf + 2, SK_F16).f == 1.0);
  cr_assert(num_load(buf + 5, SK_F64).f == 1.0); /* bytes 5..12: 00 x6, f0 3f */
  cr_assert(num_load(buf + 13, SK_F8E5M2).f == INFINITY);
  cr_assert_eq(num_load(buf + 14, SK_I1).u, 1);
  cr_assert_eq(num_load(buf + 1, SK_U32).u, 0xaa3c00ffu);
  /* store then load round-trips every kind */
  ScalarKind kinds[] = {SK_I8, SK_I16, SK_I32, SK_I64, SK_U8, SK_U16, SK_U32, SK_U64};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    Slot v = num_wrap_int(UINT64_C(0x8123456789abcdef), kinds[i]);
    num_store(buf + 3, v, kinds[i]);
    cr_assert_eq(num_load(buf + 3, kinds[i]).u, v.u);
  }
}
