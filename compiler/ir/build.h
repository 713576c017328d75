/* build.h - inserting new ops into existing tile IR at a cursor.
 *
 * Passes that rewrite IR (the GPU back end's scheduling pass above all)
 * create many small ops: constants, index arithmetic, GPU operations,
 * `if` regions around work that only some iterations do. An IrBuilder
 * inserts each new op before a cursor op (or at the end of a block) with
 * one source location, so the rewriting code reads as the IR it makes.
 */
#ifndef TILE_IR_BUILD_H
#define TILE_IR_BUILD_H

#include "ir.h"

typedef struct IrBuilder {
  Arena *arena;
  Block *block;  /* where ops go */
  Op *before;    /* insert before this op; NULL: append to block */
  SrcLoc loc;
} IrBuilder;

/* A builder inserting before `op` (in op's block). */
IrBuilder irb_before(Arena *a, Op *op);
/* A builder appending to the end of `b` (before its terminator if it has one). */
IrBuilder irb_at_end(Arena *a, Block *b);

/* Inserts an op with the given operands and (up to one) result; returns
 * the op. `rt` may be NULL for no result. */
Op *irb_op(IrBuilder *b, OpKind kind, int noperands, Value *const *operands, const TType *rt);
/* The result of a one-result op. */
Value *irb_value(IrBuilder *b, OpKind kind, int noperands, Value *const *operands, TType rt);
Value *irb_const_int(IrBuilder *b, ScalarKind k, int64_t v);
Value *irb_binary(IrBuilder *b, OpKind kind, Value *x, Value *y);
/* A compare (i1 result). */
Value *irb_cmp(IrBuilder *b, OpKind kind, Value *x, Value *y);
Value *irb_select(IrBuilder *b, Value *cond, Value *x, Value *y);
Value *irb_cast(IrBuilder *b, Value *x, TType to);
/* `if cond { }` with no results; returns a builder appending inside the
 * then-region (before its yield). */
IrBuilder irb_if(IrBuilder *b, Value *cond);

#endif
