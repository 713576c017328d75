/* passutil.c - helpers shared by the optimization passes (see
 * passutil.h). */
#include "passutil.h"

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

bool pass_const_is(const Value *v, Slot s) {
  Slot c;
  if (!fold_const_slot(v, &c)) return false;
  return c.u == s.u; /* the union's bits: exact for ints and floats */
}
