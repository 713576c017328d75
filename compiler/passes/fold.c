/* fold.c - the constant-folding pass.
 *
 * Walks a function in program order and folds every op whose operands are
 * all constants with fold_op (numeric/fold_op.c, which says what folds and
 * what is left alone on purpose).  The op is rewritten into a const in
 * place, so its result Value and all uses stay as they are, and one walk
 * folds whole chains (a folded op is a const by the time its users are
 * visited).
 */
#include "../numeric/fold_op.h"
#include "passes.h"

static void fold_visit(Op *op, void *user) {
  if (fold_op(op)) *(bool *)user = true;
}

bool pass_fold(Func *f, Arena *a) {
  (void)a;
  bool changed = false;
  ir_walk_block(&f->body, fold_visit, &changed);
  return changed;
}
