/* passutil.h - small helpers shared by the optimization passes (not part of
 * the public pass API in passes.h): following pending replacements, reading
 * splat constants as numeric.h slots, and turning an op into a constant.
 */
#ifndef TILE_PASSUTIL_H
#define TILE_PASSUTIL_H

#include <stdbool.h>

#include "../interp/numeric.h"
#include "../ir/ir.h"

/* The value v stands for once pending replacements (Value.repl chains) are
 * applied. */
Value *pass_resolve(Value *v);

/* Rewrites the operands of op through pending replacements; returns whether
 * any operand changed. */
bool pass_resolve_operands(Op *op);

/* Element kinds that numeric.h computes on: integers (i1 included) and
 * floats; not pointers, descriptors or type values. */
bool pass_is_numeric(ScalarKind k);

/* If v is a `const` op's result of a numeric element kind, stores its
 * normalized value (numeric.h slot form) in *out and returns true. */
bool pass_const_slot(const Value *v, Slot *out);

/* True when v is a numeric constant whose value has exactly the bits of
 * `s` (floats compared by bit pattern, so -0.0 differs from 0.0). */
bool pass_const_is(const Value *v, Slot s);

/* Turns op (one result) into a `const` op of its result type with value s,
 * in place: the result Value stays, so no use needs rewriting. */
void pass_make_const(Op *op, Slot s);

/* Slot helpers. */
Slot pass_slot_int(int64_t i);
Slot pass_slot_float(double f);

#endif
