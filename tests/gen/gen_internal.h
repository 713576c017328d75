/* gen_internal.h - the pieces of the kernel generator shared by its files:
 *
 *   gen_types.c   element types (the spec's tables, written out again here
 *                 on purpose: the generator is an oracle, so it does not ask
 *                 the compiler what is valid), promotion, literals, shapes,
 *                 the value model (bounds and GPU error bounds)
 *   gen_expr.c    expressions: operators, casts, math, reductions, shapes
 *   kernel_gen.c  statements (loads, stores, atomics, dot, loops, ifs,
 *                 helper functions), kernels and programs
 *   gen_run.c     buffers, comparison, the interpreter, descriptions
 *   gen_reduce.c  shrinking a failing program
 *
 * Every generated value carries an Info: a bound on the magnitude of its
 * finite elements, whether it may hold inf or NaN, and, for values the GPU
 * may compute differently from the interpreter (approximate math, float
 * reductions, tensor-core products, the documented double roundings), a
 * bound on that difference. Approximate values only flow into operations
 * whose error can be bounded (+, -, *, where, maximum, sum, stores, ...),
 * never into comparisons, conversions to integers, indices or conditions,
 * so every output buffer gets a sound tag.
 */
#ifndef TILE_GEN_INTERNAL_H
#define TILE_GEN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernel_gen.h"
#include "util/strbuf.h"

/* Highest rank the generator builds (the language allows 4). */
#define GEN_MAX_RANK 3
/* Values in scope at once; older ones are forgotten when the pool is full. */
#define GEN_MAX_POOL 160
/* Bytes of a value's name ("v123", "acc4"). */
#define GEN_NAME_BYTES 16
/* Sub-expressions nested in one expression: enough for mixed chains,
 * small enough to keep each line readable in a reproducer. */
#define GEN_MAX_DEPTH 2
/* Retries when a random choice does not fit (an operand of the wanted
 * kind, a shape that broadcasts): after these, the caller picks another
 * operation. */
#define GEN_TRIES 12

typedef enum Elem {
  E_I1, E_I8, E_I16, E_I32, E_I64, E_U8, E_U16, E_U32, E_U64,
  E_F8E4M3, E_F8E5M2, E_F16, E_BF16, E_F32, E_F64,
  E_COUNT
} Elem;

/* Sets of element types, as bit masks over Elem. */
#define ES(e) (1u << (e))
#define ES_BOOL ES(E_I1)
#define ES_SINT (ES(E_I8) | ES(E_I16) | ES(E_I32) | ES(E_I64))
#define ES_UINT (ES(E_U8) | ES(E_U16) | ES(E_U32) | ES(E_U64))
#define ES_INT (ES_SINT | ES_UINT)
#define ES_FP8 (ES(E_F8E4M3) | ES(E_F8E5M2))
#define ES_FARITH (ES(E_F16) | ES(E_BF16) | ES(E_F32) | ES(E_F64)) /* floats with arithmetic */
#define ES_FLOAT (ES_FARITH | ES_FP8)
#define ES_NUM (ES_INT | ES_FLOAT)
#define ES_ALL (ES_NUM | ES_BOOL)

typedef struct ElemInfo {
  const char *name;
  int bits;
  bool is_int, is_signed, is_float; /* i1 is neither int nor float here */
  int prec;       /* floats: significand bits including the implicit one */
  double max;     /* largest finite value (integers: the type's maximum) */
  double min;     /* integers: the type's minimum; floats: -max */
  double tiny;    /* floats: the smallest positive subnormal */
} ElemInfo;

extern const ElemInfo et_info[E_COUNT];

typedef struct Shape {
  int rank;
  int d[GEN_MAX_RANK];
} Shape;

/* What the generator knows about a value (see the top of this file). */
typedef struct Info {
  double m;      /* |x| <= m for every finite element */
  bool special;  /* may hold inf or NaN */
  bool approx;   /* the GPU may compute other bits */
  double aerr;   /* if approx: |gpu - interp| <= aerr + rerr * |interp| */
  double rerr;
  const char *why; /* if approx: the spec's reason (static text) */
} Info;

/* Flags of a value in the pool. */
enum {
  VAL_VAR = 1 << 0,     /* declared with var: may be assigned */
  VAL_LOOPVAR = 1 << 1, /* a for loop's variable */
  VAL_STORED = 1 << 2,  /* already written to an output */
  VAL_INDEX = 1 << 3,   /* an index tile of the preamble (pid, r, c, rc) */
  VAL_LOADED = 1 << 4,  /* straight from a load (less worth storing) */
};

typedef struct Val {
  char name[GEN_NAME_BYTES];
  Elem t;
  Shape s;
  Info info;
  int depth;       /* the block nesting it was declared at */
  unsigned flags;
} Val;

/* An expression being built: its text and what it is. An untyped literal
 * (lit) has no type of its own until it meets one. */
typedef struct Expr {
  char *text; /* malloc'd */
  Elem t;
  Shape s;
  Info info;
  bool lit, lit_float;
  double lit_value;
} Expr;

/* A filter for picking operands. */
typedef struct Want {
  uint32_t elems;     /* allowed element types (0: any) */
  bool exact;         /* not approximate */
  bool finite;        /* no inf or NaN */
  double max_m;       /* a bound on |x| (0: none) */
  const Shape *with;  /* must broadcast with this shape */
  const Shape *into;  /* must broadcast to this shape */
  int min_rank, max_rank;
} Want;

/* A kernel's generation state. */
typedef struct Gen {
  uint64_t rng;
  const KgConfig *cfg;
  KgKernel *k;
  StrBuf *out;        /* where statements go */
  int depth;          /* block nesting (indentation and scopes) */
  Val *pool;
  int npool;
  int next_name;
  Shape base;         /* the kernel's main tile shape [R, C] */
  int programs;       /* grid size */
  int stmts;          /* statements emitted */
  int nest;           /* loops and ifs around the current statement */
  StrBuf *helpers;    /* helper functions of this kernel, emitted before it */
  int nhelpers;
  bool in_helper;     /* inside a helper's body: no memory, no kernel names */
  bool have_put;      /* the kernel's store helper is written */
  int nin, nout, nacc, ntmp, nscalar;
} Gen;

/* ---- random numbers (kernel_gen.c) ---- */
uint32_t rnd_u32(Gen *g);
int rnd_below(Gen *g, int n); /* 0 .. n-1 */
bool rnd_chance(Gen *g, int percent);
/* An index into weights[0..n-1] with probability proportional to each. */
int rnd_weighted(Gen *g, const int *weights, int n);
/* One element of a set of element types (uniformly), or -1 when empty. */
int rnd_elem_in(Gen *g, uint32_t set);

/* ---- text ---- */
char *txt_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Indents by the block depth and appends one line. */
void txt_line(Gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void xp_free(Expr *e);
/* The text of e as an operand: parenthesized unless it is a name or literal. */
char *xp_operand(const Expr *e);

/* ---- element types, promotion, literals (gen_types.c) ---- */
bool et_is_int(Elem e);   /* integers, not i1 */
bool et_is_float(Elem e); /* fp8 included */
bool et_is_fp8(Elem e);
Elem et_from_name(const char *name);
/* The common type of two typed operands (types.md, Promotion). */
Elem et_promote(Elem a, Elem b);
/* The type a binary operator computes in when one side is an untyped
 * literal (int or float) and the other has type t. */
Elem et_promote_literal(Elem t, bool lit_float);
/* Whether a literal value converts implicitly to t (rule 3). */
bool et_literal_fits(double v, bool lit_float, Elem t);
/* A random literal that converts to t, for an operand of an operator
 * (purpose 0), a shift amount (1), a divisor (2: nonzero), or a float
 * literal of any value (3). */
Expr make_literal(Gen *g, Elem t, int purpose);
/* The value of a literal after conversion to t (for bounds). */
double et_literal_as(double v, Elem t);
/* 2^-prec: the unit roundoff of a float type. */
double et_unit(Elem e);

/* ---- shapes ---- */
Shape sh_scalar(void);
Shape sh1(int a);
Shape sh2(int a, int b);
int sh_elems(const Shape *s);
bool sh_eq(const Shape *a, const Shape *b);
/* NumPy broadcasting; false when the shapes do not broadcast. */
bool sh_broadcast(const Shape *a, const Shape *b, Shape *out);
bool sh_broadcasts_to(const Shape *from, const Shape *to);
/* "[16, 32]" into buf. */
const char *sh_text(const Shape *s, char *buf, int size);
/* The row-major index tile of shape s (an i32 expression of that shape). */
char *sh_index(const Shape *s);

/* ---- the value model ---- */
Info vi_exact(double m, bool special);
/* Worst absolute error of an approximate value: aerr + rerr * m. */
double vi_abs_err(const Info *i);
/* The info of x converted to t (as, or an implicit conversion); false if
 * an approximate x cannot be converted with a bounded error. */
bool vi_convert(const Info *x, Elem from, Elem to, Info *out);
/* Bounds of an elementwise result in type t for magnitude m. */
void vi_clamp(Info *i, Elem t, double m, bool may_overflow);
/* Whether a value fits the wanted filter. */
bool want_ok(const Want *w, Elem t, const Shape *s, const Info *i);
Want want_any(void);

/* ---- expressions (gen_expr.c) ---- */
/* A random expression (depth: how many nested operations it may have). */
bool make_expr(Gen *g, int depth, Expr *out);
/* An expression satisfying w (tries expressions, then picks from the
 * pool); false when nothing fits. */
bool make_operand(Gen *g, int depth, const Want *w, Expr *out);
/* A value of the pool that satisfies w (NULL if none). */
Val *pool_pick(Gen *g, const Want *w);
Expr xp_of_val(const Val *v);
/* An exact i1 condition: a scalar (s NULL, for if) or one that
 * broadcasts with s (for where). */
bool make_condition(Gen *g, const Shape *s, Expr *out);
/* e converted to type t and broadcast to shape s, if that is possible
 * without losing a sound bound (false otherwise). */
bool xp_coerce(Gen *g, Expr *e, Elem t, const Shape *s);

/* ---- statements (kernel_gen.c) ---- */
/* Declares `let NAME = e;` and adds the value to the pool. */
Val *bind_value(Gen *g, Expr *e, bool var);
/* A call of a new helper function, as an expression (false if none fits). */
bool make_helper_call(Gen *g, Expr *out);

#endif
