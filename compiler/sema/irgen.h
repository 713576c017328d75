/* irgen.h - internals shared by the kernel specializer's files:
 * irgen.c (kernels, statements, control flow), irgen_expr.c (expressions,
 * typing, broadcasting, constants) and irgen_builtins.c (builtin calls).
 *
 * The specializer walks the AST of one kernel with its const parameters
 * bound and emits tile IR directly. Every expression evaluates to an SVal:
 * an IR value, a type, a string or a list. Constants are ordinary `const`
 * ops; ops whose operands are all constants are folded as they are built,
 * so "is this a compile-time constant" is "is it defined by a const op".
 * Untyped literals stay "weak" (no IR value yet) until they meet a typed
 * operand, whose element type they take.
 */
#ifndef TILE_IRGEN_H
#define TILE_IRGEN_H

#include "../numeric/numeric.h"
#include "sema.h"

/* Deepest chain of inlined helper calls. Recursion is rejected by the
 * resolver; this bounds the C stack for long non-recursive chains. */
#define IRGEN_MAX_INLINE_DEPTH 64

typedef enum SValKind { SV_ERROR, SV_VALUE, SV_TYPE, SV_STRING, SV_LIST, SV_VOID } SValKind;

typedef struct SVal SVal;
struct SVal {
  SValKind kind;
  SrcLoc loc;
  Value *v;        /* SV_VALUE; NULL for a weak literal */
  bool weak;       /* SV_VALUE: an untyped literal */
  bool weak_float; /* weak: a float literal (else an integer) */
  bool weak_big;   /* weak integer in [2^63, 2^64): weak_i holds its bits */
  int64_t weak_i;
  double weak_f;
  TType type;      /* SV_TYPE: the type named */
  const char *str; /* SV_STRING */
  SVal *items;     /* SV_LIST */
  int nitems;
};

/* Variable bindings of one item instance (a kernel or an inlined call). */
typedef struct Frame {
  Item *item;
  SVal *slots; /* by Symbol.slot */
  bool *bound;
} Frame;

typedef struct Gen {
  Module *m;
  Func *f;
  Arena *arena;
  Diags *diags;
  Program *prog;
  Block *block; /* where ops are appended */
  Frame *frame;
  int inline_depth;
} Gen;

/* ---- irgen_expr.c ---- */
SVal sv_error(void);
SVal sv_value(Value *v, SrcLoc loc);
SVal sv_weak_int(int64_t v, SrcLoc loc);
SVal sv_weak_float(double v, SrcLoc loc);
bool sv_ok(const SVal *s);

SVal gen_expr(Gen *g, Expr *e);
/* The IR value of s (materializing a weak literal with its default type:
 * i32, i64 when it does not fit, f32 for floats). NULL after an error. */
Value *gen_value(Gen *g, SVal s);
/* The type of an SV_VALUE (default type for weak literals). */
TType sv_type(const SVal *s);
/* Converts s to element type `to` as an implicit conversion would: weak
 * literals must fit; other values are cast. `what` names the context for
 * errors. */
Value *gen_convert(Gen *g, SVal s, ScalarKind to, SrcLoc loc);
/* Broadcasts v to `shape` (NumPy rules); reports and returns NULL if it
 * cannot. */
Value *gen_broadcast(Gen *g, Value *v, int rank, const int32_t *shape, SrcLoc loc);
/* The broadcast shape of several types; false (after reporting) if they
 * do not broadcast. */
bool gen_broadcast_shape(Gen *g, const TType *types, int n, TType *out, SrcLoc loc);
/* The common element type of two typed operands (spec's promotion). */
ScalarKind promote_kinds(ScalarKind a, ScalarKind b);
/* Element type two operands are promoted to (the spec's rules). */
bool gen_promote(Gen *g, const SVal *a, const SVal *b, ScalarKind *out, SrcLoc loc, const char *op);
/* Promotes and broadcasts a and b to one type; returns false on error. */
bool gen_unify(Gen *g, SVal a, SVal b, Value **va, Value **vb, SrcLoc loc, const char *op);
/* A compile-time integer (weak literal or integer/bool const op). */
bool gen_const_int(Gen *g, SVal s, int64_t *out, const char *what);
/* A compile-time list of integers (a shape or a permutation). */
bool gen_const_int_list(Gen *g, SVal s, int32_t *out, int *n, int max, const char *what);
/* Resolves a type expression; false after reporting. */
bool gen_type(Gen *g, TypeExpr *t, TType *out);
/* Checks a tile shape: power-of-two dims, rank, element count. */
bool gen_check_shape(Gen *g, int rank, const int32_t *shape, SrcLoc loc);

/* Op construction with folding of constant operands. */
Value *emit_attrs(Gen *g, OpKind kind, int nops, Value **ops, TType result, const int64_t *attrs, int nattrs,
                  SrcLoc loc);
Value *emit(Gen *g, OpKind kind, int nops, Value **ops, TType result, SrcLoc loc);
Value *emit1(Gen *g, OpKind kind, Value *a, TType result, SrcLoc loc);
Value *emit2(Gen *g, OpKind kind, Value *a, Value *b, TType result, SrcLoc loc);
Value *emit_const_int(Gen *g, TType t, int64_t v, SrcLoc loc);
Value *emit_const_float(Gen *g, TType t, double v, SrcLoc loc);
Value *emit_cast(Gen *g, Value *v, ScalarKind to, SrcLoc loc);
/* Binary operator `op` (a token kind) on two values. */
SVal gen_binary_op(Gen *g, TokKind op, SVal a, SVal b, SrcLoc loc);
const char *type_name(Gen *g, TType t);

/* ---- irgen_builtins.c ---- */
SVal gen_builtin(Gen *g, Expr *call);

/* ---- irgen.c ---- */
SVal gen_call_fn(Gen *g, Expr *call);
/* Reads a global const item, detecting cycles. */
SVal gen_global_const(Gen *g, Symbol *sym, SrcLoc loc);

#endif
