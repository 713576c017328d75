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

/* Deepest nesting of the expressions and statements being specialized at
 * one time, counted across inlined helper calls and top-level constants.
 * The parser bounds each function and constant on its own (1024 levels),
 * but a chain of helpers or of constants stacks them, and the specializer
 * recurses once per level: this bounds its C stack (at most about 1.2 KB
 * per level, see IRGEN_NOINLINE) to some 2.5 MB, well inside the 8 MiB of
 * a main thread, while any one item the parser accepts still fits. */
#define IRGEN_MAX_NESTING 2048

/* On the functions for one kind of expression, statement or builtin that
 * the recursive walk calls: each level of nesting then pays only for the
 * stack frame of its own kind (inlined into one dispatcher, their locals
 * together made every level of a nested expression cost kilobytes). */
#define IRGEN_NOINLINE __attribute__((noinline))

/* Deepest nesting of `if`, `for` and `while` bodies in one kernel,
 * counting the bodies of inlined helpers: the most that the IR text
 * parser reads back (ir/parse.c), so that every kernel's --emit=ir output
 * parses, and what keeps every recursive walk of the IR shallow. */
#define IRGEN_MAX_REGION_DEPTH 256

/* Operations that inlined helper calls may add to one kernel. Real
 * kernels inline a few hundred; a helper that calls the next one twice
 * doubles the code per level, so without a budget a 1 KB file of 20 such
 * helpers would take seconds and gigabytes. */
#define IRGEN_MAX_INLINED_OPS 100000

/* Operations the specializer may make for all the kernels of one
 * compilation together (an operation takes about 300 bytes with its
 * values): bounds the memory of a file of many kernels that each stay
 * under the inlining budget. */
#define IRGEN_MAX_MODULE_OPS 400000

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

/* Evaluation state of a top-level constant in one kernel. */
enum { CONST_UNSEEN, CONST_ACTIVE, CONST_DONE };

typedef struct Gen {
  Module *m;
  Func *f;
  Arena *arena;
  Diags *diags;
  Program *prog;
  Block *block; /* where ops are appended */
  Frame *frame;
  int inline_depth;
  Expr *call;       /* the innermost helper call being inlined, or NULL */
  int nesting;      /* expressions and statements being generated (IRGEN_MAX_NESTING) */
  int region_depth; /* enclosing if/for/while bodies (IRGEN_MAX_REGION_DEPTH) */
  uint32_t inlined_ops; /* ops made inside helper calls (IRGEN_MAX_INLINED_OPS) */
  bool halted;          /* a limit was hit (and reported): generate nothing more */
  /* Top-level constants are evaluated once per kernel, at their first use
   * (by item index: the value and the state). Their ops go to const_block,
   * which becomes the start of the kernel body, so that they dominate
   * every later use wherever the first one was. */
  SVal *const_values;
  uint8_t *const_state;
  Block const_block;
  int const_depth; /* constants being evaluated */
  Op *const_effect; /* first op with a memory access made while evaluating one */
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

/* Appends op to the current block, counting it against the budgets
 * (reports, and halts the kernel, when one is exceeded). Every op the
 * specializer makes goes through here. */
void gen_append(Gen *g, Op *op);
/* Enters one more level of a nesting limited to max levels (*depth counts
 * them): false at the limit, after reporting `message` (a format taking
 * the limit) at loc, which halts the kernel. */
bool gen_enter_nesting(Gen *g, int *depth, int max, SrcLoc loc, const char *message);
/* Enters one level of nesting (an expression or a statement); false, after
 * reporting at loc, when IRGEN_MAX_NESTING is reached. gen_leave undoes a
 * successful gen_enter. */
bool gen_enter(Gen *g, SrcLoc loc);
void gen_leave(Gen *g);
/* If v is not a constant because an integer division or remainder by a
 * constant zero stopped the folding of what it was computed from, reports
 * "division by zero in a constant expression" at that operator and returns
 * true; otherwise reports nothing. */
bool gen_explain_not_const(Gen *g, const Value *v);

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
/* Whether wait_turn and pass_turn alternate along every path of f,
 * beginning with wait_turn and ending without the turn (errors at the
 * misuse). */
bool gen_check_turns(const Func *f, Diags *diags);

/* ---- irgen.c ---- */
SVal gen_call_fn(Gen *g, Expr *call);
/* Reads a global const item, detecting cycles. */
SVal gen_global_const(Gen *g, Symbol *sym, SrcLoc loc);

#endif
