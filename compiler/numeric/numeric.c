/* numeric.c - exact scalar semantics of the element types (see numeric.h).
 *
 * The interpreter and the constant folder both evaluate through this file,
 * so it must give one bit-exact answer for every operation on every element
 * type, independent of the host compiler's choices:
 *
 *  - Floats of every width are held as doubles whose value is representable
 *    in the element type.  Rounding to a narrower format is done in ONE step
 *    straight from the double (scale the value so that the format's last
 *    place is 1, round to an integer with ties to even, scale back), never
 *    through float, so bf16/f16/fp8 results are not double-rounded.  That
 *    rounding uses only floor() and exact arithmetic, so it does not depend
 *    on the host's rounding mode (f32 is rounded by a (float) cast and f64
 *    arithmetic by the host, both in the default round-to-nearest mode).
 *  - Integer conversions to floats round the integer's bits directly, so
 *    64-bit integers are not double-rounded through double.
 *  - Integer arithmetic is done on uint64_t and then normalized with
 *    num_wrap_int, so it wraps and never invokes C undefined behaviour.
 *
 * The float formats are described by a small constant table (FloatFormat).
 */
#include "numeric.h"

#include <math.h>
#include <string.h>

/* ---- float formats ---------------------------------------------------- */

typedef struct FloatFormat {
  int mant_bits;     /* stored fraction bits */
  int exp_bits;      /* exponent field bits */
  int bias;          /* exponent bias */
  int min_exp;       /* exponent of the smallest normal, 1 - bias */
  double max_finite; /* largest finite value */
  bool has_inf;      /* IEEE-like: exponent all ones is inf/NaN.  Without
                        it (E4M3FN) only S.1111.111 is NaN and the other
                        patterns with exponent all ones are normal numbers */
  bool saturates;    /* conversion overflow gives +-max_finite, not inf */
  uint64_t nan_bits; /* canonical quiet NaN written by num_encode */
} FloatFormat;

static const FloatFormat FMT_E4M3 = {3, 4, 7, -6, 448.0, false, true, 0x7f};
static const FloatFormat FMT_E5M2 = {2, 5, 15, -14, 57344.0, true, true, 0x7e};
static const FloatFormat FMT_F16 = {10, 5, 15, -14, 65504.0, true, false, 0x7e00};
static const FloatFormat FMT_BF16 = {7, 8, 127, -126, 0x1.fep127, true, false, 0x7fc0};
static const FloatFormat FMT_F32 = {23, 8, 127, -126, 0x1.fffffep127, true, false,
                                    0x7fc00000};
static const FloatFormat FMT_F64 = {52, 11, 1023, -1022, 0x1.fffffffffffffp1023, true,
                                    false, 0x7ff8000000000000};

/* The format of a float kind; NULL for other kinds. */
static const FloatFormat *float_format(ScalarKind k) {
  switch (k) {
  case SK_F8E4M3: return &FMT_E4M3;
  case SK_F8E5M2: return &FMT_E5M2;
  case SK_F16: return &FMT_F16;
  case SK_BF16: return &FMT_BF16;
  case SK_F32: return &FMT_F32;
  case SK_F64: return &FMT_F64;
  default: return NULL;
  }
}

/* ---- small helpers ---------------------------------------------------- */

static bool is_float(ScalarKind k) { return float_format(k) != NULL; }
/* Integers, i1 and pointers (a pointer is a 64-bit unsigned integer here). */
static bool is_intlike(ScalarKind k) { return k == SK_PTR || scalar_is_int(k); }
/* scalar_is_signed is also true for floats; this is for integers only. */
static bool is_signed_int(ScalarKind k) { return scalar_is_int(k) && scalar_is_signed(k); }

static uint64_t width_mask(int bits) { return bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1; }

static Slot slot_u(uint64_t u) {
  Slot s;
  s.u = u;
  return s;
}

static Slot slot_f(double f) {
  Slot s;
  s.f = f;
  return s;
}

/* Number of significant bits of m (0 for 0). */
static int bit_length(uint64_t m) {
  int n = 0;
  while (m) {
    n++;
    m >>= 1;
  }
  return n;
}

/* ---- rounding --------------------------------------------------------- */

/* Rounds y >= 0 (below 2^53, or already an integer) to an integer, ties to
 * even.  floor() and the subtraction are exact, so this does not depend on
 * the rounding mode. */
static double round_half_even(double y) {
  double r = floor(y);
  double frac = y - r;
  if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

/* What an overflowing value (or inf) of x's sign becomes in format f. */
static double overflow_value(double x, const FloatFormat *f) {
  return copysign(f->saturates ? f->max_finite : INFINITY, x);
}

/* Rounds a finite nonzero x to format f with an unbounded exponent range
 * above, and the format's fixed last place below min_exp (subnormals). */
static double round_finite(double x, const FloatFormat *f) {
  int e;
  frexp(x, &e); /* |x| = m * 2^e with 0.5 <= m < 1, so x = 1.f * 2^(e-1) */
  int exp = e - 1 < f->min_exp ? f->min_exp : e - 1;
  int ulp_exp = exp - f->mant_bits; /* exponent of the last place */
  double units = round_half_even(fabs(ldexp(x, -ulp_exp)));
  return copysign(ldexp(units, ulp_exp), x);
}

/* Rounds x to format f (the body of num_round_float). */
static double round_to_format(double x, const FloatFormat *f) {
  if (isnan(x)) return x;
  if (isinf(x)) return overflow_value(x, f); /* no inf implies saturates */
  if (x == 0.0) return x;
  double r = round_finite(x, f);
  return fabs(r) > f->max_finite ? overflow_value(x, f) : r;
}

NumPrintKind num_print_kind(ScalarKind k) {
  if (scalar_is_float(k)) return NUM_PRINT_DOUBLE;
  return scalar_is_signed(k) && k != SK_I1 ? NUM_PRINT_SIGNED : NUM_PRINT_UNSIGNED;
}

const char *num_print_format(ScalarKind k) {
  switch (num_print_kind(k)) {
  case NUM_PRINT_DOUBLE: return k == SK_F64 ? "%.17g" : "%.9g";
  case NUM_PRINT_SIGNED: return "%lld";
  default: return "%llu";
  }
}

double num_round_float(double x, ScalarKind k) {
  const FloatFormat *f = float_format(k);
  if (!f || k == SK_F64) return x;
  if (k == SK_F32) return (double)(float)x; /* one IEEE rounding */
  return round_to_format(x, f);
}

double num_float_max(ScalarKind k) {
  const FloatFormat *f = float_format(k);
  return f ? f->max_finite : 0.0;
}

/* ---- integers --------------------------------------------------------- */

Slot num_wrap_int(uint64_t bits, ScalarKind k) {
  int w = scalar_bits(k);
  uint64_t mask = width_mask(w);
  uint64_t v = bits & mask;
  if (is_signed_int(k) && w < 64 && (v >> (w - 1)) & 1) v |= ~mask;
  return slot_u(v);
}

/* Magnitude of a normalized integer slot, and whether it is negative. */
static uint64_t int_magnitude(Slot v, ScalarKind k, bool *neg) {
  *neg = is_signed_int(k) && v.i < 0;
  return *neg ? (uint64_t)0 - v.u : v.u;
}

/* Rounds the integer m to `prec` significant bits (ties to even); the result
 * is exact as a double since prec <= 53. */
static double round_uint_to_prec(uint64_t m, int prec) {
  int drop = bit_length(m) - prec;
  if (drop <= 0) return (double)m;
  uint64_t kept = m >> drop;
  uint64_t rest = m & width_mask(drop);
  uint64_t half = (uint64_t)1 << (drop - 1);
  if (rest > half || (rest == half && (kept & 1))) kept++;
  return ldexp((double)kept, drop);
}

static Slot int_to_float(Slot v, ScalarKind from, ScalarKind to) {
  bool neg;
  uint64_t mag = int_magnitude(v, from, &neg);
  /* Integers are >= 1 in magnitude, never subnormal: rounding to the
   * precision is the whole rounding; num_round_float adds overflow. */
  double d = round_uint_to_prec(mag, float_format(to)->mant_bits + 1);
  return slot_f(num_round_float(neg ? -d : d, to));
}

/* float -> integer: truncate toward zero, saturate, NaN -> 0. */
static Slot float_to_int(double x, ScalarKind to) {
  if (to == SK_I1) return slot_u(x != 0.0); /* NaN != 0 is true */
  if (isnan(x)) return slot_u(0);
  int w = scalar_bits(to);
  double t = trunc(x);
  if (is_signed_int(to)) {
    double lim = ldexp(1.0, w - 1);
    if (t >= lim) return num_wrap_int(width_mask(w - 1), to);
    if (t <= -lim) return num_wrap_int((uint64_t)1 << (w - 1), to);
    Slot s;
    s.i = (int64_t)t;
    return s;
  }
  if (t <= 0.0) return slot_u(0);
  if (t >= ldexp(1.0, w)) return slot_u(width_mask(w));
  return slot_u((uint64_t)t);
}

Slot num_convert(Slot v, ScalarKind from, ScalarKind to) {
  bool from_int = is_intlike(from), to_int = is_intlike(to);
  if (from_int && to == SK_I1) return slot_u(v.u != 0);
  if (from_int && to_int) return num_wrap_int(v.u, to); /* v is already extended by from */
  if (from_int && is_float(to)) return int_to_float(v, from, to);
  if (is_float(from) && to_int) return float_to_int(v.f, to);
  if (is_float(from) && is_float(to)) return slot_f(num_round_float(v.f, to));
  return v;
}

/* ---- memory formats --------------------------------------------------- */


/* Bits of x in a narrow format (f16, bf16, fp8).  x is rounded first, so any
 * double is accepted; inf stays inf where the format has one (so decoded
 * bits round-trip) and becomes the largest finite value otherwise. */
static uint64_t encode_narrow(double x, const FloatFormat *f) {
  if (isnan(x)) return f->nan_bits;
  uint64_t sign = (uint64_t)(signbit(x) != 0) << (f->exp_bits + f->mant_bits);
  double a = fabs(isinf(x) ? x : round_to_format(x, f));
  if (isinf(a)) {
    if (f->has_inf) return sign | width_mask(f->exp_bits) << f->mant_bits;
    a = f->max_finite;
  }
  if (a == 0.0) return sign;
  int e;
  frexp(a, &e);
  int exp = e - 1;
  if (exp < f->min_exp) /* subnormal: exponent field 0, no implicit bit */
    return sign | (uint64_t)ldexp(a, f->mant_bits - f->min_exp);
  uint64_t frac = (uint64_t)ldexp(a, f->mant_bits - exp) & width_mask(f->mant_bits);
  return sign | (uint64_t)(exp + f->bias) << f->mant_bits | frac;
}

static double decode_narrow(uint64_t bits, const FloatFormat *f) {
  uint64_t frac = bits & width_mask(f->mant_bits);
  uint64_t field = (bits >> f->mant_bits) & width_mask(f->exp_bits);
  bool neg = (bits >> (f->exp_bits + f->mant_bits)) & 1;
  bool top = field == width_mask(f->exp_bits);
  double a;
  if (top && f->has_inf)
    a = frac ? NAN : INFINITY;
  else if (top && frac == width_mask(f->mant_bits)) /* E4M3FN: S.1111.111 */
    a = NAN;
  else if (field == 0)
    a = ldexp((double)frac, f->min_exp - f->mant_bits);
  else
    a = ldexp((double)(frac | (uint64_t)1 << f->mant_bits), (int)field - f->bias - f->mant_bits);
  return neg ? -a : a;
}

static uint64_t encode_f32(double x) {
  if (isnan(x)) return FMT_F32.nan_bits;
  float fl = (float)x;
  uint32_t b;
  memcpy(&b, &fl, sizeof b);
  return b;
}

static uint64_t encode_f64(double x) {
  if (isnan(x)) return FMT_F64.nan_bits;
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b;
}

uint64_t num_encode(Slot v, ScalarKind k) {
  if (k == SK_F32) return encode_f32(v.f);
  if (k == SK_F64) return encode_f64(v.f);
  if (is_float(k)) return encode_narrow(v.f, float_format(k));
  return v.u & width_mask(scalar_bits(k));
}

Slot num_decode(uint64_t bits, ScalarKind k) {
  if (k == SK_F32) {
    uint32_t b = (uint32_t)bits;
    float fl;
    memcpy(&fl, &b, sizeof fl);
    return slot_f(fl);
  }
  if (k == SK_F64) {
    double d;
    memcpy(&d, &bits, sizeof d);
    return slot_f(d);
  }
  if (is_float(k)) return slot_f(decode_narrow(bits, float_format(k)));
  return num_wrap_int(bits, k);
}

/* Memory is little endian; assembling bytes keeps that independent of the
 * host's byte order. */
Slot num_load(const void *p, ScalarKind k) {
  const unsigned char *bytes = p;
  uint64_t bits = 0;
  for (int i = 0; i < scalar_bytes(k); i++) bits |= (uint64_t)bytes[i] << (8 * i);
  return num_decode(bits, k);
}

void num_store(void *p, Slot v, ScalarKind k) {
  unsigned char *bytes = p;
  uint64_t bits = num_encode(v, k);
  for (int i = 0; i < scalar_bytes(k); i++) bytes[i] = (unsigned char)(bits >> (8 * i));
}

Slot num_bitcast(Slot v, ScalarKind from, ScalarKind to) {
  return num_decode(num_encode(v, from), to);
}

/* ---- binary operations ------------------------------------------------ */

static bool int_less(Slot a, Slot b, ScalarKind k) {
  return is_signed_int(k) ? a.i < b.i : a.u < b.u;
}

static Slot int_divrem(NumBinop op, Slot a, Slot b, ScalarKind k, bool *div_by_zero) {
  if (b.u == 0) {
    if (div_by_zero) *div_by_zero = true;
    return slot_u(0);
  }
  if (!is_signed_int(k)) return slot_u(op == NUM_DIV ? a.u / b.u : a.u % b.u);
  /* x / -1 = -x (wraps for INT_MIN), x % -1 = 0: no C overflow. */
  if (b.i == -1) return op == NUM_DIV ? num_wrap_int((uint64_t)0 - a.u, k) : slot_u(0);
  Slot r;
  r.i = op == NUM_DIV ? a.i / b.i : a.i % b.i;
  return r;
}

/* The amount is read as unsigned in k's width, so a "negative" amount is
 * huge; amounts >= the width give 0, or all sign bits for signed >>. */
static Slot int_shift(NumBinop op, Slot a, Slot b, ScalarKind k) {
  int w = scalar_bits(k);
  uint64_t amount = b.u & width_mask(w);
  bool negative = is_signed_int(k) && a.i < 0;
  bool fill = op == NUM_SHR && negative;
  if (amount >= (uint64_t)w) return fill ? num_wrap_int(~(uint64_t)0, k) : slot_u(0);
  if (op == NUM_SHL) return num_wrap_int(a.u << amount, k);
  return num_wrap_int(fill ? ~(~a.u >> amount) : a.u >> amount, k);
}

static Slot int_binop(NumBinop op, Slot a, Slot b, ScalarKind k, bool *div_by_zero) {
  switch (op) {
  case NUM_ADD: return num_wrap_int(a.u + b.u, k);
  case NUM_SUB: return num_wrap_int(a.u - b.u, k);
  case NUM_MUL: return num_wrap_int(a.u * b.u, k);
  case NUM_DIV:
  case NUM_REM: return int_divrem(op, a, b, k, div_by_zero);
  case NUM_AND: return num_wrap_int(a.u & b.u, k);
  case NUM_OR: return num_wrap_int(a.u | b.u, k);
  case NUM_XOR: return num_wrap_int(a.u ^ b.u, k);
  case NUM_SHL:
  case NUM_SHR: return int_shift(op, a, b, k);
  case NUM_MAX: return int_less(a, b, k) ? b : a;
  case NUM_MIN: return int_less(b, a, k) ? b : a;
  }
  return a;
}

/* IEEE maxNum / minNum: a single NaN operand is ignored; +0 > -0. */
static double max_num(double x, double y) {
  if (isnan(x)) return y;
  if (isnan(y)) return x;
  if (x == y) return signbit(x) ? y : x;
  return x > y ? x : y;
}

static double min_num(double x, double y) {
  if (isnan(x)) return y;
  if (isnan(y)) return x;
  if (x == y) return signbit(x) ? x : y;
  return x < y ? x : y;
}

/* The unsigned integer kind as wide as float kind k. */
static ScalarKind same_width_uint(ScalarKind k) {
  switch (scalar_bits(k)) {
  case 8: return SK_U8;
  case 16: return SK_U16;
  case 32: return SK_U32;
  default: return SK_U64;
  }
}

/* Bitwise operations and shifts on a float kind (not produced by the
 * language) act on the memory bit patterns. */
static Slot float_bits_binop(NumBinop op, Slot a, Slot b, ScalarKind k) {
  ScalarKind u = same_width_uint(k);
  Slot r = int_binop(op, num_bitcast(a, k, u), num_bitcast(b, k, u), u, NULL);
  return num_bitcast(r, u, k);
}

/* Exact operation in double, rounded once to k.  For + - * / the double
 * result is itself correctly rounded and 53 >= 2p + 2 for every narrower
 * format, so the second rounding gives the correctly rounded result. fmod
 * is exact. */
static Slot float_binop(NumBinop op, Slot a, Slot b, ScalarKind k) {
  double x = a.f, y = b.f, r;
  switch (op) {
  case NUM_ADD: r = x + y; break;
  case NUM_SUB: r = x - y; break;
  case NUM_MUL: r = x * y; break;
  case NUM_DIV: r = x / y; break;
  case NUM_REM: r = fmod(x, y); break;
  /* maximum and minimum return one of their operands, already a value of
   * k: no rounding (which would saturate an fp8 infinity, a rule of
   * conversions only) */
  case NUM_MAX: return slot_f(max_num(x, y));
  case NUM_MIN: return slot_f(min_num(x, y));
  default: return float_bits_binop(op, a, b, k);
  }
  return slot_f(num_round_float(r, k));
}

Slot num_binop(NumBinop op, Slot a, Slot b, ScalarKind k, bool *div_by_zero) {
  return is_float(k) ? float_binop(op, a, b, k) : int_binop(op, a, b, k, div_by_zero);
}

/* ---- comparisons ------------------------------------------------------ */

static bool float_cmp(NumCmp op, double x, double y) {
  switch (op) {
  case NUM_EQ: return x == y;
  case NUM_NE: return x != y;
  case NUM_LT: return x < y;
  case NUM_LE: return x <= y;
  case NUM_GT: return x > y;
  case NUM_GE: return x >= y;
  }
  return false;
}

bool num_cmp(NumCmp op, Slot a, Slot b, ScalarKind k) {
  if (is_float(k)) return float_cmp(op, a.f, b.f);
  switch (op) {
  case NUM_EQ: return a.u == b.u;
  case NUM_NE: return a.u != b.u;
  case NUM_LT: return int_less(a, b, k);
  case NUM_LE: return !int_less(b, a, k);
  case NUM_GT: return int_less(b, a, k);
  case NUM_GE: return !int_less(a, b, k);
  }
  return false;
}

/* ---- unary operations ------------------------------------------------- */

static double float_math(NumUnop op, double x) {
  switch (op) {
  case NUM_NEG: return -x;
  case NUM_ABS: return fabs(x);
  case NUM_EXP: return exp(x);
  case NUM_EXP2: return exp2(x);
  case NUM_LOG: return log(x);
  case NUM_LOG2: return log2(x);
  case NUM_SQRT: return sqrt(x);
  case NUM_RSQRT: return 1.0 / sqrt(x);
  case NUM_SIN: return sin(x);
  case NUM_COS: return cos(x);
  case NUM_TANH: return tanh(x);
  case NUM_ERF: return erf(x);
  case NUM_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case NUM_FLOOR: return floor(x);
  case NUM_CEIL: return ceil(x);
  case NUM_NOT: break; /* bitwise; handled by the callers */
  }
  return x;
}

static Slot float_unop(NumUnop op, Slot a, ScalarKind k) {
  if (op == NUM_NOT) {
    ScalarKind u = same_width_uint(k);
    return num_bitcast(num_wrap_int(~num_bitcast(a, k, u).u, u), u, k);
  }
  return slot_f(num_round_float(float_math(op, a.f), k));
}

/* Math functions on integers are not produced by the language; they are
 * computed in f64 and converted back (saturating). */
static Slot int_unop(NumUnop op, Slot a, ScalarKind k) {
  switch (op) {
  case NUM_NEG: return num_wrap_int((uint64_t)0 - a.u, k);
  case NUM_NOT: return num_wrap_int(~a.u, k); /* on i1: bit 0 flips */
  case NUM_ABS: return is_signed_int(k) && a.i < 0 ? num_wrap_int((uint64_t)0 - a.u, k) : a;
  default: {
    double x = num_convert(a, k, SK_F64).f;
    return num_convert(slot_f(float_math(op, x)), SK_F64, k);
  }
  }
}

Slot num_unop(NumUnop op, Slot a, ScalarKind k) {
  return is_float(k) ? float_unop(op, a, k) : int_unop(op, a, k);
}

/* ---- fma -------------------------------------------------------------- */

/* p + c rounded to double by round-to-odd: the exact sum if representable,
 * otherwise whichever of its two neighbouring doubles has an odd last bit.
 * Rounding that once more (ties to even) to a format of at most 51 bits
 * gives the correctly rounded exact sum. */
static double add_round_to_odd(double p, double c) {
  double s = p + c;
  if (!isfinite(s)) return s;
  double pv = s - c, cv = s - pv; /* two-sum: p + c == s + err exactly */
  double err = (p - pv) + (c - cv);
  uint64_t bits;
  memcpy(&bits, &s, sizeof bits);
  if (err == 0.0 || (bits & 1)) return s;
  return nextafter(s, err > 0.0 ? INFINITY : -INFINITY);
}

Slot num_fma(Slot a, Slot b, Slot c, ScalarKind k) {
  if (k == SK_F64) return slot_f(fma(a.f, b.f, c.f));
  if (k == SK_F32) return slot_f(fmaf((float)a.f, (float)b.f, (float)c.f));
  /* f16, bf16, fp8: the product of two significands of <= 11 bits is exact
   * in double, and the formats' exponents keep it far from double's
   * underflow, so only the sum needs care. */
  if (is_float(k)) return slot_f(num_round_float(add_round_to_odd(a.f * b.f, c.f), k));
  return num_wrap_int(a.u * b.u + c.u, k);
}
