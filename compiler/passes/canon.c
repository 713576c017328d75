/* canon.c - canonicalization: local rewrites that make the IR simpler and
 * more uniform for the other passes, without changing any result bit.
 *
 *   x+0 x-0 x*1 x/1 x|0 x&~0 x^0 x<<0 x>>0  -> x       (integers)
 *   x*0 x&0 x|~0                           -> the const (integers)
 *   x+(-0.0) x-(+0.0) x*1.0 x/1.0          -> x       (floats: exact in
 *                                                      IEEE; x+0.0 is not,
 *                                                      -0.0+0.0 = +0.0)
 *   x&x x|x max(x,x) min(x,x)              -> x
 *   x-x x^x x%1                            -> 0       (integers)
 *   cmp x,x                                -> true/false (integers)
 *   neg(neg x) not(not x)                  -> x
 *   cast/bitcast/broadcast/reshape to the operand's own type, identity
 *   trans                                  -> x
 *   reshape/expand_dims of reshape/expand_dims -> one reshape
 *   broadcast(broadcast x)                 -> broadcast x
 *   select(const c, a, b) -> a or b;  select(c, a, a) -> a
 *   if with a const condition              -> the taken region's ops
 *   for with a constant zero trip count    -> its inits
 *   for iter arg that the body yields unchanged -> its init (inside the
 *                                         body and after the loop; dce
 *                                         then drops the unused iter arg)
 *   commutative op with a const first operand -> const second
 *
 * Replaced results get Value.repl; operands are resolved as the walk
 * (program order) reaches each op, so one walk sees the effect of earlier
 * rewrites, and ir_apply_replacements runs once at the end.
 */
#include "passes.h"
#include "passutil.h"

/* ---- constant tests ---------------------------------------------------- */

static bool is_int(const Value *v) { return scalar_is_int((ScalarKind)v->type.kind); }
static bool is_float(const Value *v) { return scalar_is_float((ScalarKind)v->type.kind); }

static bool const_int_is(const Value *v, int64_t x) {
  return is_int(v) && pass_const_is(v, num_wrap_int((uint64_t)x, (ScalarKind)v->type.kind));
}

static bool const_all_ones(const Value *v) { return const_int_is(v, -1); }

static bool const_float_is(const Value *v, double x) {
  return is_float(v) && pass_const_is(v, fold_slot_float(x));
}

/* Integer 1 or float 1.0: the identity of * and /. */
static bool const_one(const Value *v) { return const_int_is(v, 1) || const_float_is(v, 1.0); }

/* ---- identities: the value an op's result equals, or NULL -------------- */

static Value *identity_binary(const Op *op) {
  Value *x = op->operands[0], *c = op->operands[1];
  switch (op->kind) {
  case OP_ADD: return const_int_is(c, 0) || const_float_is(c, -0.0) ? x : NULL;
  case OP_SUB: return const_int_is(c, 0) || const_float_is(c, 0.0) ? x : NULL;
  case OP_MUL:
    if (const_one(c)) return x;
    return const_int_is(c, 0) ? c : NULL;
  case OP_DIV: return const_one(c) ? x : NULL;
  case OP_OR:
    if (const_int_is(c, 0) || (x == c && is_int(x))) return x;
    return const_all_ones(c) ? c : NULL;
  case OP_AND:
    if (const_all_ones(c) || (x == c && is_int(x))) return x;
    return const_int_is(c, 0) ? c : NULL;
  case OP_XOR:
  case OP_SHL:
  case OP_SHR: return const_int_is(c, 0) ? x : NULL;
  case OP_MAX:
  case OP_MIN: return x == c ? x : NULL;
  default: return NULL;
  }
}

/* Bits per entry of trans's packed perm attribute (ir.h), and the mask of
 * one entry. */
#define CANON_PERM_BITS 4
#define CANON_PERM_MASK 0xf

/* trans whose permutation is the identity. */
static bool identity_perm(const Op *op) {
  int rank = op->results[0].type.rank;
  for (int i = 0; i < rank; i++)
    if (((op->attr[0] >> (CANON_PERM_BITS * i)) & CANON_PERM_MASK) != i) return false;
  return true;
}

static Value *identity_unary(const Op *op) {
  Value *x = op->operands[0];
  const Op *inner = x->def;
  switch (op->kind) {
  case OP_NEG:
  case OP_NOT: return inner && inner->kind == op->kind ? inner->operands[0] : NULL;
  case OP_CAST:
  case OP_BITCAST:
  case OP_BROADCAST:
  case OP_RESHAPE: return type_eq(x->type, op->results[0].type) ? x : NULL;
  case OP_TRANS: return identity_perm(op) ? x : NULL;
  default: return NULL;
  }
}

static Value *identity_select(const Op *op) {
  Slot c;
  if (op->operands[1] == op->operands[2]) return op->operands[1];
  if (!fold_const_slot(op->operands[0], &c)) return NULL;
  return c.u ? op->operands[1] : op->operands[2];
}

static Value *identity(const Op *op) {
  if (!(ir_info(op)->flags & OPF_PURE) || op->nresults != 1 || op->nregions) return NULL;
  if (op->kind == OP_SELECT && op->noperands == 3) return identity_select(op);
  if (op->noperands == 2) return identity_binary(op);
  if (op->noperands == 1) return identity_unary(op);
  return NULL;
}

/* ---- in-place rewrites ------------------------------------------------- */

static bool swap_commutative(Op *op) {
  if (!(ir_info(op)->flags & OPF_COMM) || op->noperands != 2) return false;
  if (!ir_is_const(op->operands[0]) || ir_is_const(op->operands[1])) return false;
  Value *t = op->operands[0];
  op->operands[0] = op->operands[1];
  op->operands[1] = t;
  return true;
}

/* The constant an integer op gives whatever its operand's value: of a
 * value with itself (x-x, x^x, x cmp x), or x%1; false when op is not
 * one of those. */
static bool self_result(const Op *op, Slot *out) {
  if (op->noperands != 2 || !is_int(op->operands[0])) return false;
  if (op->kind == OP_REM && const_int_is(op->operands[1], 1)) {
    *out = fold_slot_int(0);
    return true;
  }
  if (op->operands[0] != op->operands[1]) return false;
  switch (op->kind) {
  case OP_SUB:
  case OP_XOR:
  case OP_CMP_NE:
  case OP_CMP_LT:
  case OP_CMP_GT: *out = fold_slot_int(0); return true;
  case OP_CMP_EQ:
  case OP_CMP_LE:
  case OP_CMP_GE: *out = fold_slot_int(1); return true;
  default: return false;
  }
}

static bool fold_self(Op *op) {
  Slot s;
  if (!self_result(op, &s)) return false;
  fold_make_const(op, s);
  return true;
}

static bool is_reshape_like(OpKind k) { return k == OP_RESHAPE || k == OP_EXPAND_DIMS; }

/* reshape/expand_dims of a reshape/expand_dims -> reshape of the inner
 * operand; broadcast of a broadcast -> broadcast of the inner operand.
 * The inner op stays for its other users (dce removes it otherwise). */
static bool collapse_chain(Op *op) {
  if (op->noperands != 1 || !op->operands[0]->def) return false;
  const Op *inner = op->operands[0]->def;
  if (is_reshape_like(op->kind) && is_reshape_like(inner->kind)) {
    op->kind = OP_RESHAPE;
    op->attr[0] = 0;
  } else if (!(op->kind == OP_BROADCAST && inner->kind == OP_BROADCAST)) {
    return false;
  }
  op->operands[0] = inner->operands[0];
  return true;
}

/* ---- control flow ------------------------------------------------------ */

/* `if` with a const condition: the taken region's ops move before the if,
 * its results become the region's yields. *next is where the walk goes on
 * (the first moved op, so that it is canonicalized too). */
static bool inline_const_if(Op *op, Op **next) {
  Slot c;
  if (op->noperands != 1 || op->nregions != 2 || !fold_const_slot(op->operands[0], &c))
    return false;
  Block *taken = &op->regions[c.u ? 0 : 1];
  Op *yield = taken->last && taken->last->kind == OP_YIELD ? taken->last : NULL;
  uint32_t nyield = yield ? yield->noperands : 0;
  if (nyield != op->nresults) return false;
  for (uint32_t i = 0; i < op->nresults; i++) op->results[i].repl = pass_resolve(yield->operands[i]);
  Op *first = NULL;
  for (Op *o = taken->first, *n; o && o != yield; o = n) {
    n = o->next;
    ir_unlink(o);
    ir_insert_before(op, o);
    if (!first) first = o;
  }
  *next = first ? first : op->next;
  ir_unlink(op);
  return true;
}

/* lo, hi, step all constant and the loop runs zero times (a constant zero
 * step is left for the error it is). */
static bool zero_trip(const Op *op) {
  Slot lo, hi, step;
  if (op->noperands < 3 + op->nresults) return false;
  ScalarKind k = (ScalarKind)op->operands[0]->type.kind;
  if (!scalar_is_int(k) || !fold_const_slot(op->operands[0], &lo) ||
      !fold_const_slot(op->operands[1], &hi) || !fold_const_slot(op->operands[2], &step))
    return false;
  if (step.u == 0) return false;
  bool down = scalar_is_signed(k) && step.i < 0;
  return down ? num_cmp(NUM_LE, lo, hi, k) : num_cmp(NUM_GE, lo, hi, k);
}

/* Iter args the body yields back unchanged hold their init throughout. */
static bool forward_invariant_iters(Op *op) {
  Block *body = &op->regions[0];
  Op *yield = body->last;
  if (!yield || yield->kind != OP_YIELD || yield->noperands != op->nresults ||
      body->nargs != op->nresults + 1 || op->noperands != 3 + op->nresults)
    return false;
  bool changed = false;
  for (uint32_t i = 0; i < op->nresults; i++) {
    Value *arg = &body->args[1 + i];
    if (pass_resolve(yield->operands[i]) != arg || arg->repl) continue;
    Value *init = pass_resolve(op->operands[3 + i]);
    arg->repl = init;
    op->results[i].repl = init;
    changed = true;
  }
  return changed;
}

static bool canon_for(Op *op, Op **next) {
  if (op->nregions != 1) return false;
  if (!zero_trip(op)) return forward_invariant_iters(op);
  for (uint32_t i = 0; i < op->nresults; i++) op->results[i].repl = pass_resolve(op->operands[3 + i]);
  *next = op->next;
  ir_unlink(op);
  return true;
}

/* ---- driver ------------------------------------------------------------ */

/* Applies every rule to op; *next may be redirected. */
static bool canon_op(Op *op, Op **next) {
  if (op->kind == OP_IF) return inline_const_if(op, next);
  if (op->kind == OP_FOR) return canon_for(op, next);
  bool changed = swap_commutative(op);
  if (fold_self(op)) return true;
  if (collapse_chain(op)) changed = true;
  Value *r = identity(op);
  if (r && type_eq(r->type, op->results[0].type)) {
    op->results[0].repl = r;
    ir_unlink(op);
    return true;
  }
  return changed;
}

static bool canon_block(Block *b) {
  bool changed = false;
  for (Op *op = b->first, *next; op; op = next) {
    next = op->next;
    pass_resolve_operands(op);
    if (canon_op(op, &next)) changed = true;
    if (!op->parent) continue; /* removed */
    for (int r = 0; r < op->nregions; r++)
      if (canon_block(&op->regions[r])) changed = true;
  }
  return changed;
}

bool pass_canon(Func *f, Arena *a) {
  (void)a;
  bool changed = canon_block(&f->body);
  if (changed) ir_apply_replacements(f);
  return changed;
}
