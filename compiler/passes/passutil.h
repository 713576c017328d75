/* passutil.h - small helpers shared by the optimization passes (not part of
 * the public pass API in passes.h): following pending replacements and
 * comparing splat constants.  Reading constants as numeric.h slots and
 * turning an op into a constant are shared with the single-op folder, so
 * they live in numeric/fold_op.h, which this header includes.
 */
#ifndef TILE_PASSUTIL_H
#define TILE_PASSUTIL_H

#include <stdbool.h>

#include "../ir/ir.h"
#include "../numeric/fold_op.h"
#include "../numeric/numeric.h"

/* The value v stands for once pending replacements (Value.repl chains) are
 * applied. */
Value *pass_resolve(Value *v);

/* Rewrites the operands of op through pending replacements; returns whether
 * any operand changed. */
bool pass_resolve_operands(Op *op);

/* True when v is a numeric constant whose value has exactly the bits of
 * `s` (floats compared by bit pattern, so -0.0 differs from 0.0). */
bool pass_const_is(const Value *v, Slot s);

#endif
