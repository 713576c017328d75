/* fold_op.h - constant folding of one op, and reading and writing IR
 * constants as numeric.h slots.
 *
 * Folding one op is a question of numeric semantics, not of optimization:
 * the front end folds ops as it builds them (sema/irgen_expr.c) and the
 * fold pass (passes/fold.c) folds what later rewrites expose, and both must
 * compute exactly what the interpreter computes.  So it lives here, next
 * to numeric.h and depending on ir/ only, and neither the front end nor
 * the optimizer needs the other (or the interpreter) to fold.  The slot
 * helpers are the ones the optimization passes use too (passes/passutil.h
 * includes this header).
 */
#ifndef TILE_FOLD_OP_H
#define TILE_FOLD_OP_H

#include <stdbool.h>

#include "../ir/ir.h"
#include "numeric.h"

/* Folds one op in place (it becomes a `const` of its result type) when it
 * is pure, its operands are all splat constants and its result may be
 * computed at compile time (see fold_op.c for what is left alone); returns
 * whether it did. */
bool fold_op(Op *op);

/* Element kinds that numeric.h computes on: integers (i1 included) and
 * floats; not pointers, descriptors or type values. */
bool fold_is_numeric(ScalarKind k);

/* If v is a `const` op's result of a numeric element kind, stores its
 * normalized value (numeric.h slot form) in *out and returns true. */
bool fold_const_slot(const Value *v, Slot *out);

/* Turns op (one result) into a `const` op of its result type with value s,
 * in place: the result Value stays, so no use needs rewriting. */
void fold_make_const(Op *op, Slot s);

/* Slot constructors. */
Slot fold_slot_int(int64_t i);
Slot fold_slot_float(double f);

#endif
