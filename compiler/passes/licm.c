/* licm.c - loop-invariant code motion.
 *
 * A pure op directly in a loop region (the body of a `for`, either region of
 * a `while`) whose operands are all defined outside the loop computes the
 * same value in every iteration, so it moves in front of the loop and runs
 * once.  Moving it runs it even when the loop runs zero times, which is
 * harmless for pure ops except integer division and remainder: those could
 * raise a division by zero the original program never reaches, so they move
 * only when the divisor is a nonzero constant.  Loads are not hoisted (a
 * store in the loop may change what they read).
 *
 * The region is scanned in order and a hoisted op's results count as
 * defined outside from then on, so whole invariant chains move in one scan.
 * Regions are processed inside out: ops hoisted out of an inner loop land
 * in the outer loop's body and are considered again for the outer loop.
 *
 * Only the loop region's own ops are candidates (not ops nested in an `if`
 * inside it): those would become unconditional, which costs work the
 * program may never have done.  Because of that, an operand of a candidate
 * that is defined inside the loop is defined in the region block itself (an
 * op result or a block argument of it), which makes the test O(1).
 */
#include "passes.h"
#include "passutil.h"

static bool defined_in(const Value *v, const Block *b) {
  return v->def ? v->def->parent == b : v->owner == b;
}

/* Integer div/rem by something that may be zero. */
static bool may_trap(const Op *op) {
  if (op->kind != OP_DIV && op->kind != OP_REM) return false;
  if (!scalar_is_int((ScalarKind)op->results[0].type.kind)) return false;
  Slot d;
  return !fold_const_slot(op->operands[1], &d) || d.u == 0;
}

static bool hoistable(const Op *op, const Block *region) {
  unsigned flags = ir_info(op)->flags;
  if (!(flags & OPF_PURE) || (flags & (OPF_READ | OPF_WRITE | OPF_TERM)) || op->nregions)
    return false;
  for (uint32_t i = 0; i < op->noperands; i++)
    if (defined_in(op->operands[i], region)) return false;
  return !may_trap(op);
}

/* Moves the invariant ops of one loop region in front of the loop. */
static bool hoist_region(Op *loop, Block *region) {
  bool changed = false;
  for (Op *op = region->first, *next; op; op = next) {
    next = op->next;
    if (!hoistable(op, region)) continue;
    ir_unlink(op);
    ir_insert_before(loop, op);
    changed = true;
  }
  return changed;
}

static bool licm_block(Block *b) {
  bool changed = false;
  for (Op *op = b->first; op; op = op->next) {
    for (int r = 0; r < op->nregions; r++)
      if (licm_block(&op->regions[r])) changed = true;
    if (op->kind != OP_FOR && op->kind != OP_WHILE) continue;
    for (int r = 0; r < op->nregions; r++)
      if (hoist_region(op, &op->regions[r])) changed = true;
  }
  return changed;
}

bool pass_licm(Func *f, Arena *a) {
  (void)a;
  return licm_block(&f->body);
}
