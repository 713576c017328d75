/* gen_expr.c - random expressions of the tile language: arithmetic,
 * bitwise operators, shifts, comparisons, logic, maximum/minimum, where,
 * fma, casts, bitcasts, math functions, reductions and shape functions,
 * each with its operands drawn from the values in scope (or nested
 * expressions, or untyped literals) so that the result is well-typed by
 * the spec's promotion rules.
 *
 * Alongside the text, each operation computes the result's Info (see
 * gen_internal.h): integer results wrap, float results may overflow to
 * infinity, and the few operations the GPU may compute differently from
 * the interpreter (spec/builtins.md, "On the GPU") give approximate
 * results with an error bound. An approximate operand is accepted only
 * where that bound stays finite and sound.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

/* Approximate arithmetic is only done on values whose magnitude bound is
 * this fraction of the type's largest value or less, so that neither side
 * can overflow where the other does not. */
#define APPROX_HEADROOM 0.125

/* GPU accuracy of the approximate math functions, as relative errors
 * (spec/builtins.md, On the GPU: "about 2^-22" for ex2.approx, "a few ulp"
 * for libdevice), with a margin: the interpreter is correctly rounded, so
 * the two differ by at most the GPU's error plus half an ulp. */
#define MATH_REL_F32 0x1p-20
#define MATH_REL_F64 0x1p-46
/* exp(x) rounds x * log2(e) to f32 first: about |x| * 2^-24 more. */
#define EXP_ARG_REL 0x1p-22
/* Absolute error floor for functions whose results pass through zero
 * (sin, cos, tanh, erf, log, log2): a few ulp of 1. */
#define MATH_ABS_F32 0x1p-22
#define MATH_ABS_F64 0x1p-50
/* Float sums only of values below this magnitude, so that their
 * tolerances stay meaningful. */
#define SUM_INPUT_BOUND 1e9

void xp_free(Expr *e) {
  free(e->text);
  e->text = NULL;
}

static bool is_simple(const char *t) {
  if (!*t) return false;
  for (const char *p = t; *p; p++)
    if (!(p[0] == '_' || (p[0] >= '0' && p[0] <= '9') || (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z')))
      return false;
  return true;
}

char *xp_operand(const Expr *e) { return is_simple(e->text) ? txt_fmt("%s", e->text) : txt_fmt("(%s)", e->text); }

Expr xp_of_val(const Val *v) {
  Expr e = {0};
  e.text = txt_fmt("%s", v->name);
  e.t = v->t;
  e.s = v->s;
  e.info = v->info;
  return e;
}

Val *pool_pick(Gen *g, const Want *w) {
  int idx[GEN_MAX_POOL], n = 0;
  for (int i = 0; i < g->npool; i++)
    if (want_ok(w, g->pool[i].t, &g->pool[i].s, &g->pool[i].info)) idx[n++] = i;
  if (!n) return NULL;
  /* recent values more often, so that chains of operations form */
  int k = n > 6 && rnd_chance(g, 50) ? n - 1 - rnd_below(g, 6) : rnd_below(g, n);
  return &g->pool[idx[k]];
}

bool make_operand(Gen *g, int depth, const Want *w, Expr *out) {
  if (depth > 0 && rnd_chance(g, 30)) {
    for (int t = 0; t < 3; t++) {
      Expr e;
      if (!make_expr(g, depth - 1, &e)) continue;
      if (want_ok(w, e.t, &e.s, &e.info) && sh_elems(&e.s) <= g->cfg->max_elems) {
        *out = e;
        return true;
      }
      xp_free(&e);
    }
  }
  Val *v = pool_pick(g, w);
  if (!v) return false;
  *out = xp_of_val(v);
  return true;
}

/* The Info of operand x (an expression or a literal) converted to t. */
static Info operand_info(const Expr *x, Elem t) {
  if (x->lit) return vi_exact(et_literal_as(x->lit_value, t), x->info.special);
  Info r;
  if (!vi_convert(&x->info, x->t, t, &r)) r = vi_exact(et_info[t].max, true);
  return r;
}

static bool shapes_fit(Gen *g, const Shape *a, const Shape *b, Shape *out) {
  return sh_broadcast(a, b, out) && sh_elems(out) <= g->cfg->max_elems;
}

/* The second operand of a binary operation: a literal that converts to
 * a's type (lit_percent of the time) or a value that broadcasts with a. */
static bool second_operand(Gen *g, int depth, const Expr *a, uint32_t elems, bool exact, int lit_percent,
                           int lit_purpose, Expr *b) {
  if (rnd_chance(g, lit_percent)) {
    *b = make_literal(g, a->t, lit_purpose);
    return true;
  }
  Want w = want_any();
  w.elems = rnd_chance(g, 50) && (elems & ES(a->t)) ? ES(a->t) : elems;
  w.exact = exact;
  w.with = &a->s;
  return make_operand(g, depth, &w, b);
}

static void finish(Expr *out, char *text, Elem t, const Shape *s, Info info) {
  memset(out, 0, sizeof *out);
  out->text = text;
  out->t = t;
  out->s = *s;
  out->info = info;
}

static bool fail2(Expr *a, Expr *b) {
  xp_free(a);
  xp_free(b);
  return false;
}

/* The operands of a binary operation: a (of the types `elems`, a value or
 * a nested expression), b (a literal lit_percent of the time, see
 * second_operand), and their broadcast shape. */
static bool pick_pair(Gen *g, int depth, uint32_t elems, bool exact, int lit_percent, int purpose, Expr *a, Expr *b,
                      Shape *s) {
  Want w = want_any();
  w.elems = elems;
  w.exact = exact;
  if (!make_operand(g, depth, &w, a)) return false;
  if (!second_operand(g, depth, a, elems, exact, lit_percent, purpose, b)) {
    xp_free(a);
    return false;
  }
  return shapes_fit(g, &a->s, &b->s, s) || fail2(a, b);
}

/* The result "a op b" (or "fn(a, b)" when op is a name) of type t, shape
 * s, info r; frees the operands. */
static bool finish_pair(Expr *out, Expr *a, const char *op, Expr *b, Elem t, const Shape *s, Info r) {
  char *ta = xp_operand(a), *tb = xp_operand(b);
  bool call = op[0] >= 'a' && op[0] <= 'z';
  finish(out, call ? txt_fmt("%s(%s, %s)", op, a->text, b->text) : txt_fmt("%s %s %s", ta, op, tb), t, s, r);
  free(ta), free(tb), xp_free(a), xp_free(b);
  return true;
}

/* Info of an approximate +, - or * in float type t (gen_internal.h). */
static bool approx_arith(int op, const Info *a, const Info *b, Elem t, Info *r) {
  double u = et_unit(t);
  *r = (Info){0, false, true, 0, 0, a->approx ? a->why : b->why};
  if (op < 2) {
    r->m = a->m + b->m;
    r->aerr = vi_abs_err(a) + vi_abs_err(b) + 2 * u * r->m;
  } else {
    r->m = a->m * b->m;
    r->aerr = a->aerr * (b->m + vi_abs_err(b)) + b->aerr * a->m;
    r->rerr = a->rerr + b->rerr + a->rerr * b->rerr + 2 * u;
  }
  r->m *= 1 + 2 * u;
  return r->m * (1 + r->rerr) + r->aerr < et_info[t].max * APPROX_HEADROOM;
}

/* The info of an exact a op b in type t (op: + - * / % cdiv). */
static Info exact_arith(int op, const Info *ia, const Info *ib, Elem t) {
  Info r = vi_exact(0, ia->special || ib->special);
  double m = op < 2 ? ia->m + ib->m : op == 2 ? ia->m * ib->m : op == 3 ? ia->m : op == 4 ? fmin(ia->m, ib->m) : ia->m + ib->m;
  if (op == 3 && et_is_float(t)) r.special = true, m = et_info[t].max; /* x / 0 */
  vi_clamp(&r, t, m, true);
  return r;
}

/* + - * / % cdiv */
static bool ex_arith(Gen *g, int depth, Expr *out) {
  Expr a, b;
  Shape s;
  if (!pick_pair(g, depth, ES_INT | ES_FARITH, false, 30, 0, &a, &b, &s)) return false;
  if (et_is_int(a.t) && rnd_chance(g, 8)) { /* a float literal meeting an integer: computed in f32 */
    xp_free(&b);
    b = make_literal(g, E_F32, 3);
    s = a.s;
  }
  Elem t = b.lit ? et_promote_literal(a.t, b.lit_float) : et_promote(a.t, b.t);
  bool approx = a.info.approx || b.info.approx;
  if (approx && (!et_is_float(t) || a.info.special || b.info.special)) return fail2(&a, &b);
  static const char *const ops[] = {"+", "-", "*", "/", "%", "cdiv"};
  int op = rnd_below(g, et_is_int(t) ? 6 : approx ? 3 : 4);
  bool int_div = op >= 3 && et_is_int(t);
  if (int_div && b.lit && b.lit_value == 0) return fail2(&a, &b);
  Info ia = operand_info(&a, t), ib = operand_info(&b, t), r;
  if (approx ? !approx_arith(op, &ia, &ib, t, &r) : (r = exact_arith(op, &ia, &ib, t), false)) return fail2(&a, &b);
  if (int_div && !b.lit) { /* never zero: the low bit is set, in b's type and after promotion */
    char *nz = txt_fmt("%s | 1", b.text);
    free(b.text);
    b.text = nz;
  }
  if (op < 3 && rnd_chance(g, 25)) return finish_pair(out, &b, ops[op], &a, t, &s, r);
  return finish_pair(out, &a, ops[op], &b, t, &s, r);
}

/* & | ^ on integers and masks */
static bool ex_bitwise(Gen *g, int depth, Expr *out) {
  Expr a, b;
  Shape s;
  if (!pick_pair(g, depth, ES_INT | ES_BOOL, true, 30, 0, &a, &b, &s)) return false;
  Elem t = b.lit ? a.t : et_promote(a.t, b.t);
  static const char *const ops[] = {"&", "|", "^"};
  int op = rnd_below(g, 3);
  Info ia = operand_info(&a, t), ib = operand_info(&b, t), r = vi_exact(0, false);
  vi_clamp(&r, t, op == 0 && !et_info[t].is_signed ? fmin(ia.m, ib.m) : et_info[t].max * 2, false);
  return finish_pair(out, &a, ops[op], &b, t, &s, r);
}

/* << >>: any amount is defined (at least the width gives 0 or -1) */
static bool ex_shift(Gen *g, int depth, Expr *out) {
  Expr a, b;
  Shape s;
  if (!pick_pair(g, depth, ES_INT, true, 55, 1, &a, &b, &s)) return false;
  Elem t = b.lit ? a.t : et_promote(a.t, b.t);
  bool left = rnd_chance(g, 50);
  Info ia = operand_info(&a, t), r = vi_exact(0, false);
  vi_clamp(&r, t, left ? et_info[t].max * 2 : fmax(ia.m, 1), false);
  return finish_pair(out, &a, left ? "<<" : ">>", &b, t, &s, r);
}

/* == != < <= > >= on any element types (fp8 and i1 included) */
static bool ex_compare(Gen *g, int depth, Expr *out) {
  Expr a, b;
  Shape s;
  if (!pick_pair(g, depth, ES_ALL, true, 35, 0, &a, &b, &s)) return false;
  static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
  return finish_pair(out, &a, ops[rnd_below(g, 6)], &b, E_I1, &s, vi_exact(1, false));
}

/* && || ! on masks (no literals) */
static bool ex_logic(Gen *g, int depth, Expr *out) {
  Expr a, b;
  Shape s;
  if (!pick_pair(g, depth, ES_BOOL, true, 0, 0, &a, &b, &s)) return false;
  if (rnd_chance(g, 25)) {
    char *ta = xp_operand(&a);
    finish(out, txt_fmt("!%s", ta), E_I1, &a.s, vi_exact(1, false));
    free(ta), fail2(&a, &b);
    return true;
  }
  return finish_pair(out, &a, rnd_chance(g, 50) ? "&&" : "||", &b, E_I1, &s, vi_exact(1, false));
}

/* unary -, ~, abs */
static bool ex_unary(Gen *g, int depth, Expr *out) {
  int kind = rnd_below(g, 3); /* 0: -x, 1: ~x, 2: abs(x) */
  Want w = want_any();
  w.elems = kind == 1 ? ES_INT : ES_INT | ES_FARITH;
  w.exact = kind == 1;
  Expr a;
  if (!make_operand(g, depth, &w, &a)) return false;
  char *ta = xp_operand(&a);
  char *text = kind == 0 ? txt_fmt("-%s", ta) : kind == 1 ? txt_fmt("~%s", ta) : txt_fmt("abs(%s)", ta);
  free(ta);
  Info r = a.info;
  if (et_is_int(a.t) && (kind == 1 || !et_info[a.t].is_signed)) vi_clamp(&r, a.t, et_info[a.t].max * 2, false);
  Elem t = a.t;
  Shape s = a.s;
  xp_free(&a);
  finish(out, text, t, &s, r);
  return true;
}

/* An approximate value may meet only finite values in maximum/where, so
 * that the result stays finite (approximate values are never special). */
static bool approx_mix_ok(const Expr *a, const Expr *b) {
  return !((a->info.approx && b->info.special) || (b->info.approx && a->info.special));
}

/* The info of a selection between a and b (where, maximum, minimum). */
static Info select_info(const Info *ia, const Info *ib, bool lipschitz) {
  Info r = vi_exact(fmax(ia->m, ib->m), ia->special || ib->special);
  if (ia->approx || ib->approx) {
    r.approx = true;
    r.aerr = lipschitz ? fmax(vi_abs_err(ia), vi_abs_err(ib)) : fmax(ia->aerr, ib->aerr);
    r.rerr = lipschitz ? 0 : fmax(ia->rerr, ib->rerr);
    r.why = ia->approx ? ia->why : ib->why;
  }
  return r;
}

/* Whether a maximum/minimum in type t of a value with info i would hit
 * KG_BUG_FP8_MINMAX_INF (an f8e5m2 infinity). */
static bool e5m2_inf_bug(const Gen *g, Elem t, const Info *i) {
  return (g->cfg->avoid & KG_BUG_FP8_MINMAX_INF) && t == E_F8E5M2 && i->special;
}

/* maximum, minimum (fp8 allowed) */
static bool ex_minmax(Gen *g, int depth, Expr *out) {
  Expr a, b;
  Shape s;
  if (!pick_pair(g, depth, ES_NUM, false, 30, 0, &a, &b, &s)) return false;
  Elem t = b.lit ? et_promote_literal(a.t, b.lit_float) : et_promote(a.t, b.t);
  if (!approx_mix_ok(&a, &b) || ((a.info.approx || b.info.approx) && !et_is_float(t))) return fail2(&a, &b);
  if (e5m2_inf_bug(g, t, &a.info) || e5m2_inf_bug(g, t, &b.info)) return fail2(&a, &b);
  Info ia = operand_info(&a, t), ib = operand_info(&b, t);
  const char *fn = rnd_chance(g, 50) ? "maximum" : "minimum";
  if (rnd_chance(g, 15)) { /* named arguments */
    char *na = txt_fmt("a = %s", a.text), *nb = txt_fmt("b = %s", b.text);
    free(a.text), free(b.text);
    a.text = na, b.text = nb;
  }
  return finish_pair(out, &a, fn, &b, t, &s, select_info(&ia, &ib, true));
}

bool make_condition(Gen *g, const Shape *s, Expr *out) {
  Want w = want_any();
  w.elems = ES_BOOL;
  w.exact = true;
  if (s) w.with = s;
  else w.max_rank = 0;
  Val *v = rnd_chance(g, 40) ? pool_pick(g, &w) : NULL;
  if (v) {
    *out = xp_of_val(v);
    if (rnd_chance(g, 20)) {
      char *t = txt_fmt("!%s", out->text);
      free(out->text);
      out->text = t;
    }
    return true;
  }
  w.elems = ES_ALL;
  Expr a, b;
  if (!make_operand(g, 0, &w, &a)) return false;
  b = make_literal(g, a.t, 0);
  static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
  Shape sa = a.s;
  return finish_pair(out, &a, ops[rnd_below(g, 6)], &b, E_I1, &sa, vi_exact(1, false));
}

/* where(cond, a, b) */
static bool ex_where(Gen *g, int depth, Expr *out) {
  Expr a, b, c;
  Shape s, s2;
  if (!pick_pair(g, depth, ES_ALL, false, 30, 0, &a, &b, &s)) return false;
  Elem t = b.lit ? et_promote_literal(a.t, b.lit_float) : et_promote(a.t, b.t);
  if (!approx_mix_ok(&a, &b) || ((a.info.approx || b.info.approx) && !et_is_float(t))) return fail2(&a, &b);
  if (!make_condition(g, &s, &c)) return fail2(&a, &b);
  if (!shapes_fit(g, &s, &c.s, &s2)) {
    xp_free(&c);
    return fail2(&a, &b);
  }
  Info ia = operand_info(&a, t), ib = operand_info(&b, t);
  char *ca = txt_fmt("%s, %s", c.text, a.text);
  free(a.text);
  a.text = ca;
  xp_free(&c);
  return finish_pair(out, &a, "where", &b, t, &s2, select_info(&ia, &ib, false));
}

/* fma(a, b, c): one rounding for f32 and f64; two on the GPU for f16 and
 * bf16 (builtins.md, On the GPU), which makes those approximate */
static bool ex_fma(Gen *g, int depth, Expr *out) {
  Expr a, b, c;
  Shape s, s2;
  if (!pick_pair(g, depth, ES_FARITH, true, 20, 0, &a, &b, &s)) return false;
  Elem t = b.lit ? et_promote_literal(a.t, b.lit_float) : et_promote(a.t, b.t);
  Want w = want_any();
  w.elems = ES_FARITH;
  w.exact = true;
  w.with = &s;
  if (rnd_chance(g, 40)) c = make_literal(g, t, 3); /* c must be a float or a float literal */
  else if (!make_operand(g, depth, &w, &c)) return fail2(&a, &b);
  if (!shapes_fit(g, &s, &c.s, &s2)) {
    xp_free(&c);
    return fail2(&a, &b);
  }
  Info ia = operand_info(&a, t), ib = operand_info(&b, t), ic = operand_info(&c, t);
  Info r = vi_exact(0, ia.special || ib.special || ic.special);
  double m = ia.m * ib.m + ic.m;
  if (t == E_F16 || t == E_BF16) {
    if (r.special || m >= et_info[t].max * APPROX_HEADROOM) {
      xp_free(&c);
      return fail2(&a, &b);
    }
    r = (Info){m, false, true, et_info[t].tiny, 2 * et_unit(t),
               "f16/bf16 fma rounds twice on the GPU (builtins.md, On the GPU)"};
  } else {
    vi_clamp(&r, t, m, true);
  }
  char *bc = txt_fmt("%s, %s", b.text, c.text);
  free(b.text);
  b.text = bc;
  xp_free(&c);
  return finish_pair(out, &a, "fma", &b, t, &s2, r);
}

/* The element types a value may be converted to (fp8 only with the
 * feature). */
static uint32_t et_allowed(const Gen *g, uint32_t set) {
  return g->cfg->features & KG_F_FP8 ? set : set & ~ES_FP8;
}

/* x as T (approximate values only to float types) */
static bool ex_cast(Gen *g, int depth, Expr *out) {
  Want w = want_any();
  w.elems = ES_ALL;
  Expr a;
  if (!make_operand(g, depth, &w, &a)) return false;
  Elem t = (Elem)rnd_elem_in(g, et_allowed(g, a.info.approx ? ES_FLOAT : ES_ALL));
  Info r;
  if (!vi_convert(&a.info, a.t, t, &r)) {
    xp_free(&a);
    return false;
  }
  char *ta = xp_operand(&a);
  char *text = txt_fmt("%s as %s", ta, et_info[t].name);
  free(ta);
  Shape s = a.s;
  xp_free(&a);
  finish(out, text, t, &s, r);
  return true;
}

/* bitcast(x, T) between types of one width; never of a possible NaN,
 * whose bits are unspecified (semantics.md, Bit casts) */
static bool ex_bitcast(Gen *g, int depth, Expr *out) {
  Want w = want_any();
  w.elems = et_allowed(g, ES_NUM);
  w.exact = true;
  Expr a;
  if (!make_operand(g, depth, &w, &a)) return false;
  uint32_t same = 0;
  for (int e = 0; e < E_COUNT; e++)
    if (e != E_I1 && e != (int)a.t && et_info[e].bits == et_info[a.t].bits) same |= ES(e);
  if (g->cfg->avoid & KG_BUG_BITCAST_HALF) { /* no 16-bit float on either side */
    same &= ~(ES(E_F16) | ES(E_BF16));
    if (a.t == E_F16 || a.t == E_BF16) same = 0;
  }
  same = et_allowed(g, same);
  if (!same || (et_is_float(a.t) && a.info.special)) {
    xp_free(&a);
    return false;
  }
  Elem t = (Elem)rnd_elem_in(g, same);
  char *text = txt_fmt("bitcast(%s, %s)", a.text, et_info[t].name);
  Info r = vi_exact(et_info[t].max, et_is_float(t));
  if (et_is_int(t)) vi_clamp(&r, t, et_info[t].max * 2, false);
  Shape s = a.s;
  xp_free(&a);
  finish(out, text, t, &s, r);
  return true;
}

typedef enum MathKind { M_CLAMPED, M_POSITIVE, M_EXACT } MathKind;

typedef struct MathFn {
  const char *name;
  MathKind kind;
  double limit[4]; /* M_CLAMPED: input range per type (f16, bf16, f32, f64) */
  bool zero_crossing;
} MathFn;

/* Inputs are clamped so that results stay normal and far from overflow
 * in each type (exp: e^8 < 65504 and e^-8 above f16's smallest normal). */
static const MathFn math_fns[] = {
    {"exp", M_CLAMPED, {8, 30, 30, 100}, false},   {"exp2", M_CLAMPED, {12, 40, 40, 200}, false},
    {"sin", M_CLAMPED, {20, 100, 100, 1000}, true}, {"cos", M_CLAMPED, {20, 100, 100, 1000}, true},
    {"tanh", M_CLAMPED, {10, 10, 10, 10}, true},   {"erf", M_CLAMPED, {10, 10, 10, 10}, true},
    {"sigmoid", M_CLAMPED, {10, 20, 20, 20}, false}, {"log", M_POSITIVE, {0}, true},
    {"log2", M_POSITIVE, {0}, true},              {"rsqrt", M_POSITIVE, {0}, false},
    {"sqrt", M_EXACT, {0}, false},                {"floor", M_EXACT, {0}, false},
    {"ceil", M_EXACT, {0}, false},
};

static int farith_index(Elem t) { return t == E_F16 ? 0 : t == E_BF16 ? 1 : t == E_F32 ? 2 : 3; }

/* The result bound of a clamped or positive-argument function. */
static double math_bound(const MathFn *f, double limit, double offset) {
  if (!strcmp(f->name, "exp")) return exp(limit);
  if (!strcmp(f->name, "exp2")) return exp2(limit);
  if (!strcmp(f->name, "log") || !strcmp(f->name, "log2")) return fmax(fabs(log(offset)), log(limit + offset)) * 1.5;
  if (!strcmp(f->name, "rsqrt")) return 1 / sqrt(offset);
  return 1;
}

static bool ex_math(Gen *g, int depth, Expr *out) {
  const MathFn *f = &math_fns[rnd_below(g, (int)(sizeof math_fns / sizeof math_fns[0]))];
  Want w = want_any();
  w.elems = ES_FARITH;
  w.exact = true;
  Expr a;
  if (!make_operand(g, depth, &w, &a)) return false;
  Elem t = a.t;
  char *ta = xp_operand(&a), *text;
  Info r;
  if (f->kind == M_EXACT) {
    bool via_abs = !strcmp(f->name, "sqrt") && rnd_chance(g, 50);
    text = via_abs ? txt_fmt("sqrt(abs(%s))", a.text) : txt_fmt("%s(%s)", f->name, a.text);
    r = vi_exact(strcmp(f->name, "sqrt") ? a.info.m + 1 : sqrt(a.info.m) + 1, a.info.special);
    if (!strcmp(f->name, "sqrt") && !via_abs) r.special = true; /* sqrt(-1) is NaN */
    vi_clamp(&r, t, r.m, false);
  } else {
    double limit = f->limit[farith_index(t)], offset = 0;
    if (f->kind == M_CLAMPED) {
      text = txt_fmt("%s(minimum(maximum(%s, -%.1f), %.1f))", f->name, a.text, limit, limit);
    } else {
      static const double offsets[] = {0.5, 1.0, 2.0, 0.125};
      offset = offsets[rnd_below(g, 4)];
      limit = t == E_F16 ? 1000 : 1e6;
      text = txt_fmt("%s(minimum(abs(%s), %.1f) + %g)", f->name, a.text, limit, offset);
    }
    double rel = t == E_F64 ? MATH_REL_F64 : MATH_REL_F32;
    if (!strcmp(f->name, "exp") || !strcmp(f->name, "sigmoid")) rel += limit * (t == E_F64 ? 0x1p-50 : EXP_ARG_REL);
    double abs_err = f->zero_crossing ? (t == E_F64 ? MATH_ABS_F64 : MATH_ABS_F32) : 0;
    if (t == E_F16 || t == E_BF16) rel += 2 * et_unit(t); /* the f32 result rounded once more: one ulp */
    r = (Info){math_bound(f, limit, offset), false, true, abs_err + 2 * et_info[t].tiny, rel,
               "exp, log, sin and the like are approximate on the GPU (builtins.md, Math functions)"};
  }
  free(ta);
  Shape s = a.s;
  xp_free(&a);
  finish(out, text, t, &s, r);
  return true;
}

/* The accumulation type of sum (builtins.md, Reductions). */
static Elem sum_type(Elem t) {
  if (t == E_I1 || t == E_I8 || t == E_I16) return E_I32;
  if (t == E_U8 || t == E_U16) return E_U32;
  if (et_is_fp8(t) || t == E_F16 || t == E_BF16) return E_F32;
  return t;
}

/* sum, max, min, argmax, argmin over an axis or everything */
static bool ex_reduce(Gen *g, int depth, Expr *out) {
  static const char *const fns[] = {"sum", "max", "min", "argmax", "argmin"};
  static const int weights[] = {40, 20, 15, 15, 10};
  int fn = rnd_weighted(g, weights, 5);
  Want w = want_any();
  w.elems = fn == 0 ? ES_ALL : ES_NUM;
  if (fn >= 3 && (g->cfg->avoid & KG_BUG_FP8_ARGMAX)) w.elems &= ~ES_FP8;
  w.exact = fn >= 3;
  w.min_rank = 1;
  Expr a;
  if (!make_operand(g, depth, &w, &a)) return false;
  int axis = rnd_chance(g, 25) ? -1 : rnd_below(g, a.s.rank), n = axis < 0 ? sh_elems(&a.s) : a.s.d[axis];
  Shape s = sh_scalar();
  if (axis >= 0)
    for (int i = 0; i < a.s.rank; i++)
      if (i != axis) s.d[s.rank++] = a.s.d[i];
  Elem t = fn == 0 ? sum_type(a.t) : fn >= 3 ? E_I32 : a.t;
  if ((fn == 1 || fn == 2) && e5m2_inf_bug(g, t, &a.info)) {
    xp_free(&a);
    return false;
  }
  Info ia = operand_info(&a, t), r = ia;
  if (fn == 0 && et_is_float(t)) {
    double bound = n * ia.m, u = et_unit(t);
    if (ia.special || !(ia.m <= SUM_INPUT_BOUND) || !(bound * 8 < et_info[t].max * APPROX_HEADROOM)) {
      xp_free(&a);
      return false;
    }
    /* any two orders differ by at most 2 (n - 1) u sum |x| */
    r = (Info){bound * (1 + n * u), false, true, n * vi_abs_err(&ia) + 2 * (n - 1) * u * bound, 0,
               ia.approx ? ia.why : "float sums add in another order on the GPU (builtins.md, Reductions)"};
    if (n == 1) r.approx = ia.approx;
  } else if (fn == 0) {
    vi_clamp(&r, t, n * ia.m, false);
  } else if (fn >= 3) {
    r = vi_exact(n - 1, false);
  } else if (ia.approx) {
    r.aerr = vi_abs_err(&ia), r.rerr = 0;
  }
  char *ta = xp_operand(&a), *text;
  if (axis < 0) text = txt_fmt("%s(%s)", fns[fn], a.text);
  else {
    int ax = rnd_chance(g, 30) ? axis - a.s.rank : axis;
    text = rnd_chance(g, 25) ? txt_fmt("%s(%s, axis = %d)", fns[fn], a.text, ax) : txt_fmt("%s(%s, %d)", fns[fn], a.text, ax);
  }
  free(ta), xp_free(&a);
  finish(out, text, t, &s, r);
  return true;
}

/* A random shape with the same number of elements (powers of two). */
static Shape reshaped(Gen *g, int elems) {
  int lg = 0;
  while ((1 << lg) < elems) lg++;
  Shape s = {1 + rnd_below(g, lg >= 2 ? GEN_MAX_RANK : lg + 1), {0}};
  int left = lg;
  for (int i = 0; i < s.rank; i++) {
    int b = i == s.rank - 1 ? left : rnd_below(g, left + 1);
    if (b > 6) b = 6; /* dims of at most 64 */
    s.d[i] = 1 << b;
    left -= b;
  }
  if (left > 0) return sh1(elems);
  return s;
}

/* expand_dims / x[:, None], broadcast_to, reshape, trans */
static bool ex_shape(Gen *g, int depth, Expr *out) {
  int kind = rnd_below(g, 4);
  Want w = want_any();
  if (kind == 0) w.max_rank = GEN_MAX_RANK - 1;
  if (kind == 2) w.min_rank = 1;
  if (kind == 3) w.min_rank = 2;
  Expr a;
  if (!make_operand(g, depth, &w, &a)) return false;
  char *ta = xp_operand(&a), *text = NULL, buf[64];
  Shape s = a.s;
  if (kind == 0) {
    int axis = rnd_below(g, a.s.rank + 1);
    for (int i = s.rank; i > axis; i--) s.d[i] = s.d[i - 1];
    s.d[axis] = 1;
    s.rank++;
    if (rnd_chance(g, 50)) {
      text = txt_fmt("expand_dims(%s, %d)", a.text, rnd_chance(g, 30) ? axis - a.s.rank - 1 : axis);
    } else {
      char items[64] = "";
      for (int i = 0; i < s.rank; i++)
        strcat(items, i == axis ? (i ? ", None" : "None") : (i ? ", :" : ":"));
      text = txt_fmt("%s[%s]", ta, items);
    }
  } else if (kind == 1) {
    Want wv = want_any();
    wv.min_rank = 1;
    Val *v = pool_pick(g, &wv);
    if (!v || !sh_broadcasts_to(&a.s, &v->s) || sh_eq(&a.s, &v->s)) goto fail;
    s = v->s;
    text = txt_fmt("broadcast_to(%s, %s)", a.text, sh_text(&s, buf, sizeof buf));
  } else if (kind == 2) {
    s = reshaped(g, sh_elems(&a.s));
    text = txt_fmt("reshape(%s, %s)", a.text, sh_text(&s, buf, sizeof buf));
  } else {
    int perm[GEN_MAX_RANK] = {1, 0, 2};
    if (a.s.rank == 3) {
      static const int perms[5][3] = {{0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
      memcpy(perm, perms[rnd_below(g, 5)], sizeof perm);
    }
    for (int i = 0; i < a.s.rank; i++) s.d[i] = a.s.d[perm[i]];
    if (a.s.rank == 2 && rnd_chance(g, 60)) text = txt_fmt("trans(%s)", a.text);
    else if (a.s.rank == 2) text = txt_fmt("trans(%s, [1, 0])", a.text);
    else text = txt_fmt("trans(%s, [%d, %d, %d])", a.text, perm[0], perm[1], perm[2]);
  }
  free(ta);
  Info r = a.info;
  Elem t = a.t;
  xp_free(&a);
  finish(out, text, t, &s, r);
  return true;
fail:
  free(ta);
  xp_free(&a);
  return false;
}

/* zeros, full, arange */
static bool ex_const(Gen *g, int depth, Expr *out) {
  (void)depth;
  Want w = want_any();
  Val *like = pool_pick(g, &w);
  Shape s = like ? like->s : g->base;
  char buf[64];
  Elem t = (Elem)rnd_elem_in(g, et_allowed(g, ES_ALL));
  int kind = rnd_below(g, 10);
  if (kind < 3) {
    bool dflt = t == E_F32 && rnd_chance(g, 50);
    finish(out, dflt ? txt_fmt("zeros(%s)", sh_text(&s, buf, sizeof buf))
                     : txt_fmt("zeros(%s, %s)", sh_text(&s, buf, sizeof buf), et_info[t].name),
           t, &s, vi_exact(0, false));
    return true;
  }
  if (kind < 8) {
    Want ws = want_any();
    ws.max_rank = 0;
    ws.exact = !et_is_float(t);
    Val *v = rnd_chance(g, 50) ? pool_pick(g, &ws) : NULL;
    Info r;
    if (v && vi_convert(&v->info, v->t, t, &r)) {
      finish(out, txt_fmt("full(%s, %s, %s)", sh_text(&s, buf, sizeof buf), v->name, et_info[t].name), t, &s, r);
      return true;
    }
    Expr lit = make_literal(g, t, 0);
    finish(out, txt_fmt("full(%s, %s, %s)", sh_text(&s, buf, sizeof buf), lit.text, et_info[t].name), t, &s,
           operand_info(&lit, t));
    xp_free(&lit);
    return true;
  }
  int len = 1 << (1 + rnd_below(g, 6)), start = rnd_chance(g, 60) ? 0 : rnd_below(g, 40) - 20;
  s = sh1(len);
  finish(out, txt_fmt("arange(%d, %d)", start, start + len), E_I32, &s,
         vi_exact(fmax(fabs((double)start), fabs(start + len - 1.0)), false));
  return true;
}

static bool ex_helper(Gen *g, int depth, Expr *out) {
  (void)depth;
  return make_helper_call(g, out);
}

typedef struct ExprOp {
  bool (*fn)(Gen *g, int depth, Expr *out);
  int weight;
  unsigned feature; /* 0: always */
} ExprOp;

static const ExprOp expr_ops[] = {
    {ex_arith, 24, 0},         {ex_bitwise, 7, 0},    {ex_shift, 5, 0},           {ex_compare, 8, 0},
    {ex_logic, 3, 0},          {ex_unary, 5, 0},      {ex_minmax, 6, 0},          {ex_where, 6, 0},
    {ex_fma, 3, 0},            {ex_cast, 12, 0},      {ex_bitcast, 2, 0},         {ex_math, 9, KG_F_MATH},
    {ex_reduce, 8, KG_F_REDUCE}, {ex_shape, 6, KG_F_SHAPES}, {ex_const, 3, 0},    {ex_helper, 2, KG_F_HELPERS},
};

bool make_expr(Gen *g, int depth, Expr *out) {
  enum { N = sizeof expr_ops / sizeof expr_ops[0] };
  int weights[N];
  for (int i = 0; i < N; i++)
    weights[i] = !expr_ops[i].feature || (g->cfg->features & expr_ops[i].feature) ? expr_ops[i].weight : 0;
  for (int t = 0; t < GEN_TRIES; t++) {
    const ExprOp *op = &expr_ops[rnd_weighted(g, weights, N)];
    if (op->fn(g, depth, out)) {
      if (sh_elems(&out->s) <= g->cfg->max_elems) return true;
      xp_free(out);
    }
  }
  return false;
}

bool xp_coerce(Gen *g, Expr *e, Elem t, const Shape *s) {
  (void)g;
  if (!sh_broadcasts_to(&e->s, s)) return false;
  if (e->t == t) return true;
  Info r;
  if (!vi_convert(&e->info, e->t, t, &r) || r.approx != e->info.approx) return false;
  char *op = xp_operand(e), *text = txt_fmt("%s as %s", op, et_info[t].name);
  free(op);
  free(e->text);
  e->text = text;
  e->t = t;
  e->info = r;
  return true;
}
