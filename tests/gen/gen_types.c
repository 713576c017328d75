/* gen_types.c - the generator's model of the language's types: the element
 * types of spec/types.md, promotion, which untyped literals convert where,
 * shapes and broadcasting, and the value model (bounds on magnitudes and
 * on GPU-vs-interpreter differences) that makes the output tags sound.
 *
 * The tables are written from the spec, not taken from the compiler, so
 * that a compiler that disagrees with the spec shows up as a compile error
 * in the tests instead of being copied into the generator.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

/* Relative slack added to a bound after each rounding step, on top of the
 * type's own unit roundoff (bounds only need to be safe, not tight). */
#define BOUND_SLACK 1e-6

const ElemInfo et_info[E_COUNT] = {
    [E_I1] = {"i1", 1, false, false, false, 0, 1, 0, 0},
    [E_I8] = {"i8", 8, true, true, false, 0, 127, -128, 0},
    [E_I16] = {"i16", 16, true, true, false, 0, 32767, -32768, 0},
    [E_I32] = {"i32", 32, true, true, false, 0, 2147483647.0, -2147483648.0, 0},
    [E_I64] = {"i64", 64, true, true, false, 0, 9223372036854775807.0, -9223372036854775808.0, 0},
    [E_U8] = {"u8", 8, true, false, false, 0, 255, 0, 0},
    [E_U16] = {"u16", 16, true, false, false, 0, 65535, 0, 0},
    [E_U32] = {"u32", 32, true, false, false, 0, 4294967295.0, 0, 0},
    [E_U64] = {"u64", 64, true, false, false, 0, 18446744073709551615.0, 0, 0},
    [E_F8E4M3] = {"f8e4m3", 8, false, true, true, 4, 448, -448, 0x1p-9},
    [E_F8E5M2] = {"f8e5m2", 8, false, true, true, 3, 57344, -57344, 0x1p-16},
    [E_F16] = {"f16", 16, false, true, true, 11, 65504, -65504, 0x1p-24},
    [E_BF16] = {"bf16", 16, false, true, true, 8, 0x1.fep127, -0x1.fep127, 0x1p-133},
    [E_F32] = {"f32", 32, false, true, true, 24, FLT_MAX, -FLT_MAX, 0x1p-149},
    [E_F64] = {"f64", 64, false, true, true, 53, DBL_MAX, -DBL_MAX, 0x1p-1074},
};

bool et_is_int(Elem e) { return et_info[e].is_int; }
bool et_is_float(Elem e) { return et_info[e].is_float; }
bool et_is_fp8(Elem e) { return e == E_F8E4M3 || e == E_F8E5M2; }
double et_unit(Elem e) { return ldexp(1.0, -et_info[e].prec); }

Elem et_from_name(const char *name) {
  for (int e = 0; e < E_COUNT; e++)
    if (!strcmp(et_info[e].name, name)) return (Elem)e;
  return E_COUNT;
}

/* Magnitude limit of an integer type (the larger of |min| and max). */
static double int_limit(Elem e) { return fmax(et_info[e].max, -et_info[e].min); }

/* fp8 < 16-bit < f32 < f64 */
static int float_rank(Elem e) { return et_is_fp8(e) ? 0 : e == E_F16 || e == E_BF16 ? 1 : e == E_F32 ? 2 : 3; }

Elem et_promote(Elem a, Elem b) {
  if (a == b) return a;
  bool fa = et_is_float(a), fb = et_is_float(b);
  if (fa && fb) {
    if ((a == E_F16 && b == E_BF16) || (a == E_BF16 && b == E_F16)) return E_F32;
    if (et_is_fp8(a) && et_is_fp8(b)) return E_F16;
    return float_rank(a) >= float_rank(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  if (a == E_I1) return b;
  if (b == E_I1) return a;
  if (et_info[a].bits != et_info[b].bits) return et_info[a].bits > et_info[b].bits ? a : b;
  return et_info[a].is_signed ? b : a; /* the unsigned one */
}

Elem et_promote_literal(Elem t, bool lit_float) { return lit_float && !et_is_float(t) ? E_F32 : t; }

bool et_literal_fits(double v, bool lit_float, Elem t) {
  if (t == E_I1) return !lit_float && (v == 0 || v == 1);
  if (et_is_int(t)) return !lit_float && v >= et_info[t].min && v <= et_info[t].max;
  if (isnan(v) || isinf(v) || et_is_fp8(t)) return true; /* fp8 saturates */
  return fabs(v) <= et_info[t].max;
}

double et_literal_as(double v, Elem t) {
  if (!isfinite(v)) return et_is_fp8(t) ? et_info[t].max : 0; /* no finite element */
  if (et_is_fp8(t)) return fmin(fabs(v), et_info[t].max);
  return fabs(v);
}

/* ---- literals ---- */

/* Integer literals, by magnitude: the boundaries of every width and a few
 * ordinary values. Negative ones are formed with unary minus. */
static const double int_literals[] = {0, 1, 2, 3, 5, 7, 8, 15, 16, 31, 32, 33, 63, 64, 100, 127, 128, 255, 256,
                                      1000, 32767, 32768, 65535, 65536, 2147483647.0, 2147483648.0, 4294967295.0};
static const double float_literals[] = {0.0, 1.0, 0.5, 2.0, 3.0, 0.25, 1.5, 2.5, 10.0, 100.0, 0.1, 1e-3, 1e3,
                                        0.375, 7.0, 448.0, 1e-5, 65504.0, 1e5, 1e30};

/* The text of a whole number, spelled in one of the lexer's forms. */
static char *int_spelling(Gen *g, double v) {
  unsigned long long u = (unsigned long long)fabs(v);
  const char *sign = v < 0 ? "-" : "";
  switch (rnd_below(g, 8)) {
  case 0: return txt_fmt("%s0x%llX", sign, u);
  case 1:
    if (u < 256) {
      char bits[80] = {0};
      int n = 0;
      for (int b = 7; b >= 0; b--) bits[n++] = (char)('0' + ((u >> b) & 1));
      return txt_fmt("%s0b%s", sign, bits);
    }
    break;
  case 2:
    if (u >= 1000) return txt_fmt("%s%llu_%03llu", sign, u / 1000, u % 1000);
    break;
  default: break;
  }
  return txt_fmt("%s%llu", sign, u);
}

static Expr literal_new(char *text, double v, bool is_float) {
  Expr e = {0};
  e.text = text;
  e.lit = true;
  e.lit_float = is_float;
  e.lit_value = v;
  e.t = E_COUNT;
  e.info = vi_exact(isfinite(v) ? fabs(v) : 0, !isfinite(v));
  return e;
}

Expr make_literal(Gen *g, Elem t, int purpose) {
  if (purpose == 1) { /* shift amount: in range, at the width, beyond it */
    int bits = et_info[t].bits;
    static const int extra[] = {0, 1, 3, 100};
    double v = rnd_chance(g, 60) ? rnd_below(g, bits) : bits + extra[rnd_below(g, 4)];
    if (v > et_info[t].max) v = et_info[t].max;
    return literal_new(int_spelling(g, v), v, false);
  }
  if (et_is_float(t) && (purpose == 3 || rnd_chance(g, 70))) {
    if (purpose == 0 && rnd_chance(g, 6)) {
      static const char *const specials[] = {"inf", "-inf", "nan"};
      static const double values[] = {INFINITY, -INFINITY, NAN};
      int i = rnd_below(g, 3);
      return literal_new(txt_fmt("%s", specials[i]), values[i], true);
    }
    for (int tries = 0; tries < GEN_TRIES; tries++) {
      double v = float_literals[rnd_below(g, (int)(sizeof float_literals / sizeof float_literals[0]))];
      if (rnd_chance(g, 30)) v = -v;
      if ((purpose == 2 && v == 0) || !et_literal_fits(v, true, t)) continue;
      char *text = txt_fmt("%.6g", v);
      if (!strpbrk(text, ".e")) { /* a float literal needs a point or an exponent */
        char *t2 = txt_fmt("%s.0", text);
        free(text);
        text = t2;
      }
      return literal_new(text, v, true);
    }
  }
  if (purpose == 3) return literal_new(txt_fmt("0.5"), 0.5, true);
  for (int tries = 0; tries < GEN_TRIES; tries++) {
    double v = int_literals[rnd_below(g, (int)(sizeof int_literals / sizeof int_literals[0]))];
    if (rnd_chance(g, 25)) v = -v;
    if (t == E_I1) v = rnd_below(g, 2);
    if ((purpose == 2 && v == 0) || !et_literal_fits(v, false, t)) continue;
    return literal_new(int_spelling(g, v), v, false);
  }
  return literal_new(txt_fmt("1"), 1, false);
}

/* ---- shapes ---- */

Shape sh_scalar(void) { return (Shape){0, {0}}; }
Shape sh1(int a) { return (Shape){1, {a}}; }
Shape sh2(int a, int b) { return (Shape){2, {a, b}}; }

int sh_elems(const Shape *s) {
  int n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->d[i];
  return n;
}

bool sh_eq(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i] != b->d[i]) return false;
  return true;
}

bool sh_broadcast(const Shape *a, const Shape *b, Shape *out) {
  Shape r = {a->rank > b->rank ? a->rank : b->rank, {0}};
  for (int i = 0; i < r.rank; i++) {
    int ia = a->rank - r.rank + i, ib = b->rank - r.rank + i;
    int da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    r.d[i] = da > db ? da : db;
  }
  if (out) *out = r;
  return true;
}

bool sh_broadcasts_to(const Shape *from, const Shape *to) {
  Shape r;
  return sh_broadcast(from, to, &r) && sh_eq(&r, to);
}

const char *sh_text(const Shape *s, char *buf, int size) {
  int n = snprintf(buf, (size_t)size, "[");
  for (int i = 0; i < s->rank && n < size; i++) n += snprintf(buf + n, (size_t)(size - n), i ? ", %d" : "%d", s->d[i]);
  if (n < size) snprintf(buf + n, (size_t)(size - n), "]");
  return buf;
}

char *sh_index(const Shape *s) {
  switch (s->rank) {
  case 0: return txt_fmt("0");
  case 1: return txt_fmt("arange(0, %d)", s->d[0]);
  case 2: return txt_fmt("(arange(0, %d)[:, None] * %d + arange(0, %d)[None, :])", s->d[0], s->d[1], s->d[1]);
  default:
    return txt_fmt("(arange(0, %d)[:, None, None] * %d + arange(0, %d)[None, :, None] * %d + "
                    "arange(0, %d)[None, None, :])",
                    s->d[0], s->d[1] * s->d[2], s->d[1], s->d[2], s->d[2]);
  }
}

/* ---- the value model ---- */

Info vi_exact(double m, bool special) { return (Info){m, special, false, 0, 0, NULL}; }

double vi_abs_err(const Info *i) { return i->approx ? i->aerr + i->rerr * i->m : 0; }

void vi_clamp(Info *i, Elem t, double m, bool may_overflow) {
  if (t == E_I1) {
    i->m = 1;
    return;
  }
  if (et_is_int(t)) {
    i->m = fmin(m, int_limit(t));
    return;
  }
  m *= 1 + 2 * et_unit(t) + BOUND_SLACK;
  if (m >= et_info[t].max || isnan(m)) {
    if (may_overflow && !et_is_fp8(t)) i->special = true;
    m = et_info[t].max;
  }
  i->m = m;
}

bool vi_convert(const Info *x, Elem from, Elem to, Info *out) {
  *out = *x;
  if (from == to) return true;
  if (to == E_I1 || from == E_I1) {
    *out = vi_exact(1, false);
    return !x->approx || to != E_I1;
  }
  if (et_is_int(to)) {
    if (x->approx) return false;
    /* a signed value may be negative: it wraps into an unsigned type */
    bool wraps = et_is_int(from) && et_info[from].is_signed && !et_info[to].is_signed;
    *out = vi_exact(wraps ? int_limit(to) : fmin(x->m, int_limit(to)), false);
    return true;
  }
  /* to a float */
  if (et_is_int(from)) {
    *out = vi_exact(x->m, false);
    vi_clamp(out, to, x->m, true);
    return true;
  }
  bool narrower = et_info[to].prec < et_info[from].prec || et_info[to].max < et_info[from].max;
  if (!narrower) return true;
  double limit = et_info[to].max * (1 - et_unit(to));
  if (x->approx && !et_is_fp8(to) && x->m * (1 + x->rerr) + x->aerr >= limit) return false;
  vi_clamp(out, to, x->m, true);
  if (x->approx) {
    out->rerr += 2 * et_unit(to); /* one ulp: both sides round, to neighbours at worst */
    out->aerr += et_info[to].tiny;
  }
  if (from == E_F64 && et_is_fp8(to)) {
    /* semantics.md, On the GPU: f64 -> fp8 goes through f32 (two roundings) */
    if (!out->approx) out->why = "f64 to fp8 conversions round twice on the GPU (semantics.md, On the GPU)";
    out->approx = true;
    out->rerr += 2 * et_unit(to); /* one ulp: both sides round, to neighbours at worst */
    out->aerr += et_info[to].tiny;
  }
  return true;
}

Want want_any(void) { return (Want){0, false, false, 0, NULL, NULL, 0, GEN_MAX_RANK}; }

bool want_ok(const Want *w, Elem t, const Shape *s, const Info *i) {
  if (t >= E_COUNT) return false;
  if (w->elems && !(w->elems & ES(t))) return false;
  if (w->exact && i->approx) return false;
  if (w->finite && i->special) return false;
  if (w->max_m > 0 && !(i->m <= w->max_m)) return false;
  if (s->rank < w->min_rank || s->rank > w->max_rank) return false;
  if (w->with && !sh_broadcast(s, w->with, NULL)) return false;
  if (w->into && !sh_broadcasts_to(s, w->into)) return false;
  return true;
}
