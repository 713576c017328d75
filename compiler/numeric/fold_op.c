/* fold_op.c - single-op constant folding: the constant an op computes
 * when its operands are all constants (fold_op.h says why this is not in
 * passes/).
 *
 * A pure op whose operands are all `const` ops (splats) computes the same
 * value in every element, so it is replaced by a `const` of its result
 * type holding that value.  The value is computed with the numeric.h
 * functions the interpreter uses, so folding never changes a result, not
 * even in the last bit (i8 wrap-around, bf16 rounding, NaN, -0.0).
 *
 * Not folded, on purpose:
 *   - integer division or remainder by zero: the interpreter reports it at
 *     run time, so the op must stay;
 *   - float sums: reduction order is unspecified and a sum of n copies of x
 *     is not n*x in floating point;
 *   - integer sums whose result type differs from the operand type (the
 *     widening is the interpreter's business);
 *   - dot, program ids, memory ops, control flow; anything on pointers.
 *
 * The op is rewritten into a const in place (fold_make_const), so its
 * result Value and all uses stay as they are.
 */
#include "fold_op.h"

#include <string.h>

/* ---- IR constants as slots ---------------------------------------------- */

bool fold_is_numeric(ScalarKind k) { return scalar_is_int(k) || scalar_is_float(k); }

bool fold_const_slot(const Value *v, Slot *out) {
  ScalarKind k = (ScalarKind)v->type.kind;
  if (!ir_is_const(v) || !fold_is_numeric(k)) return false;
  /* Normalize defensively, exactly as the interpreter reads a const. */
  if (scalar_is_float(k))
    out->f = num_round_float(v->def->fattr, k);
  else
    *out = num_wrap_int((uint64_t)v->def->attr[0], k);
  return true;
}

void fold_make_const(Op *op, Slot s) {
  ScalarKind k = (ScalarKind)op->results[0].type.kind;
  op->kind = OP_CONST;
  op->noperands = 0;
  memset(op->attr, 0, sizeof op->attr);
  op->fattr = 0.0;
  if (scalar_is_float(k))
    op->fattr = s.f;
  else
    op->attr[0] = s.i;
}

Slot fold_slot_int(int64_t i) {
  Slot s;
  s.i = i;
  return s;
}

Slot fold_slot_float(double f) {
  Slot s;
  s.f = f;
  return s;
}

/* ---- op kind -> numeric.h operation ------------------------------------ */

static bool binop_of(OpKind k, NumBinop *out) {
  switch (k) {
  case OP_ADD: *out = NUM_ADD; return true;
  case OP_SUB: *out = NUM_SUB; return true;
  case OP_MUL: *out = NUM_MUL; return true;
  case OP_DIV: *out = NUM_DIV; return true;
  case OP_REM: *out = NUM_REM; return true;
  case OP_AND: *out = NUM_AND; return true;
  case OP_OR: *out = NUM_OR; return true;
  case OP_XOR: *out = NUM_XOR; return true;
  case OP_SHL: *out = NUM_SHL; return true;
  case OP_SHR: *out = NUM_SHR; return true;
  case OP_MAX: *out = NUM_MAX; return true;
  case OP_MIN: *out = NUM_MIN; return true;
  default: return false;
  }
}

static bool cmp_of(OpKind k, NumCmp *out) {
  switch (k) {
  case OP_CMP_EQ: *out = NUM_EQ; return true;
  case OP_CMP_NE: *out = NUM_NE; return true;
  case OP_CMP_LT: *out = NUM_LT; return true;
  case OP_CMP_LE: *out = NUM_LE; return true;
  case OP_CMP_GT: *out = NUM_GT; return true;
  case OP_CMP_GE: *out = NUM_GE; return true;
  default: return false;
  }
}

static bool unop_of(OpKind k, NumUnop *out) {
  switch (k) {
  case OP_NEG: *out = NUM_NEG; return true;
  case OP_NOT: *out = NUM_NOT; return true;
  case OP_ABS: *out = NUM_ABS; return true;
  case OP_EXP: *out = NUM_EXP; return true;
  case OP_EXP2: *out = NUM_EXP2; return true;
  case OP_LOG: *out = NUM_LOG; return true;
  case OP_LOG2: *out = NUM_LOG2; return true;
  case OP_SQRT: *out = NUM_SQRT; return true;
  case OP_RSQRT: *out = NUM_RSQRT; return true;
  case OP_SIN: *out = NUM_SIN; return true;
  case OP_COS: *out = NUM_COS; return true;
  case OP_TANH: *out = NUM_TANH; return true;
  case OP_ERF: *out = NUM_ERF; return true;
  case OP_SIGMOID: *out = NUM_SIGMOID; return true;
  case OP_FLOOR: *out = NUM_FLOOR; return true;
  case OP_CEIL: *out = NUM_CEIL; return true;
  default: return false;
  }
}

/* ---- evaluation -------------------------------------------------------- */

/* Most operands of an op that folds (fma and select have three). */
#define FOLD_MAX_OPERANDS 3

/* Reads every operand of op as a constant; false if one is not. */
static bool const_operands(const Op *op, Slot *vals) {
  if (op->noperands > FOLD_MAX_OPERANDS) return false;
  for (uint32_t i = 0; i < op->noperands; i++)
    if (!fold_const_slot(op->operands[i], &vals[i])) return false;
  return true;
}

static ScalarKind operand_kind(const Op *op, int i) { return (ScalarKind)op->operands[i]->type.kind; }
static ScalarKind result_kind(const Op *op) { return (ScalarKind)op->results[0].type.kind; }

/* Elementwise ops: binary, comparisons, unary, conversions, fma, select. */
static bool eval_elementwise(const Op *op, const Slot *v, Slot *out) {
  NumBinop b;
  NumCmp c;
  NumUnop u;
  ScalarKind k = operand_kind(op, 0);
  if (binop_of(op->kind, &b)) {
    bool div_by_zero = false;
    *out = num_binop(b, v[0], v[1], k, &div_by_zero);
    return !div_by_zero; /* leave it to the run-time error */
  }
  if (cmp_of(op->kind, &c)) {
    *out = fold_slot_int(num_cmp(c, v[0], v[1], k) ? 1 : 0);
    return true;
  }
  if (unop_of(op->kind, &u)) {
    *out = num_unop(u, v[0], k);
    return true;
  }
  switch (op->kind) {
  case OP_CAST: *out = num_convert(v[0], k, result_kind(op)); return true;
  case OP_BITCAST:
    if (scalar_bits(k) != scalar_bits(result_kind(op))) return false;
    *out = num_bitcast(v[0], k, result_kind(op));
    return true;
  case OP_FMA: *out = num_fma(v[0], v[1], v[2], k); return true;
  case OP_SELECT: *out = v[0].u ? v[1] : v[2]; return true;
  default: return false;
  }
}

/* Reductions of a splat. max/min of equal elements is that element (not
 * folded for NaN, where the result would hang on how the interpreter seeds
 * its maxNum chain); argmax/argmin give the first index.  Integer sums wrap,
 * so n copies of x sum to n*x in the type exactly. */
static bool eval_reduction(const Op *op, const Slot *v, Slot *out) {
  ScalarKind k = operand_kind(op, 0);
  ScalarKind rk = result_kind(op);
  int64_t axis = op->attr[0];
  const TType *t = &op->operands[0]->type;
  switch (op->kind) {
  case OP_REDUCE_MAX:
  case OP_REDUCE_MIN:
    if (rk != k || (scalar_is_float(k) && v[0].f != v[0].f)) return false;
    *out = v[0];
    return true;
  case OP_ARGMAX:
  case OP_ARGMIN: *out = fold_slot_int(0); return true;
  case OP_REDUCE_SUM:
    if (rk != k || !scalar_is_int(k) || axis < 0 || axis >= t->rank) return false;
    *out = num_binop(NUM_MUL, v[0], num_wrap_int((uint64_t)t->shape[axis], k), k, NULL);
    return true;
  default: return false;
  }
}

/* Computes the constant op would produce; false when it must not fold. */
static bool eval_op(const Op *op, const Slot *v, Slot *out) {
  switch (op->kind) {
  case OP_ARANGE:
    if (type_numel(op->results[0].type) != 1) return false;
    *out = num_wrap_int((uint64_t)op->attr[0], result_kind(op));
    return true;
  case OP_BROADCAST:
  case OP_EXPAND_DIMS:
  case OP_RESHAPE:
  case OP_TRANS:
    if (result_kind(op) != operand_kind(op, 0)) return false;
    *out = v[0];
    return true;
  case OP_REDUCE_SUM:
  case OP_REDUCE_MAX:
  case OP_REDUCE_MIN:
  case OP_ARGMAX:
  case OP_ARGMIN: return eval_reduction(op, v, out);
  default: break;
  }
  if (!(ir_info(op)->flags & OPF_ELEM) || op->noperands == 0) return false;
  return eval_elementwise(op, v, out);
}

/* Whether op is a candidate at all: pure, one numeric result, no regions,
 * not already a const. */
static bool foldable(const Op *op) {
  if (op->kind == OP_CONST || op->kind == OP_DOT || op->nregions) return false;
  if (!(ir_info(op)->flags & OPF_PURE) || op->nresults != 1) return false;
  return fold_is_numeric(result_kind(op));
}

bool fold_op(Op *op) {
  Slot vals[FOLD_MAX_OPERANDS], result;
  if (!foldable(op) || !const_operands(op, vals)) return false;
  if (!eval_op(op, vals, &result)) return false;
  fold_make_const(op, result);
  return true;
}
