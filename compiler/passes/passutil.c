/* passutil.c - helpers shared by the optimization passes (see
 * passutil.h). */
#include "passutil.h"

#include <string.h>

Value *pass_resolve(Value *v) {
  while (v->repl) v = v->repl;
  return v;
}

bool pass_resolve_operands(Op *op) {
  bool changed = false;
  for (uint32_t i = 0; i < op->noperands; i++) {
    if (op->operands[i]->repl) {
      op->operands[i] = pass_resolve(op->operands[i]);
      changed = true;
    }
  }
  return changed;
}

bool pass_is_numeric(ScalarKind k) { return scalar_is_int(k) || scalar_is_float(k); }

bool pass_const_slot(const Value *v, Slot *out) {
  ScalarKind k = (ScalarKind)v->type.kind;
  if (!ir_is_const(v) || !pass_is_numeric(k)) return false;
  /* Normalize defensively, exactly as the interpreter reads a const. */
  if (scalar_is_float(k))
    out->f = num_round_float(v->def->fattr, k);
  else
    *out = num_wrap_int((uint64_t)v->def->attr[0], k);
  return true;
}

bool pass_const_is(const Value *v, Slot s) {
  Slot c;
  if (!pass_const_slot(v, &c)) return false;
  return c.u == s.u; /* the union's bits: exact for ints and floats */
}

void pass_make_const(Op *op, Slot s) {
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

Slot pass_slot_int(int64_t i) {
  Slot s;
  s.i = i;
  return s;
}

Slot pass_slot_float(double f) {
  Slot s;
  s.f = f;
  return s;
}
