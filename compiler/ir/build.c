/* build.c - inserting ops at a cursor (see build.h). */
#include "build.h"

IrBuilder irb_before(Arena *a, Op *op) { return (IrBuilder){a, op->parent, op, op->loc}; }

IrBuilder irb_at_end(Arena *a, Block *b) {
  Op *term = b->last && (op_info[b->last->kind].flags & OPF_TERM) ? b->last : NULL;
  SrcLoc loc = term ? term->loc : (b->parent ? b->parent->loc : (SrcLoc){0, 0, 0});
  return (IrBuilder){a, b, term, loc};
}

Op *irb_op(IrBuilder *b, OpKind kind, int noperands, Value *const *operands, const TType *rt) {
  Op *op = ir_op_make(b->arena, kind, noperands, operands, rt ? 1 : 0, rt, b->loc);
  if (b->before)
    ir_insert_before(b->before, op);
  else
    ir_append(b->block, op);
  return op;
}

Value *irb_value(IrBuilder *b, OpKind kind, int noperands, Value *const *operands, TType rt) {
  return &irb_op(b, kind, noperands, operands, &rt)->results[0];
}

Value *irb_const_int(IrBuilder *b, ScalarKind k, int64_t v) {
  TType t = type_scalar(k);
  Op *op = irb_op(b, OP_CONST, 0, NULL, &t);
  op->attr[0] = v;
  return &op->results[0];
}

Value *irb_binary(IrBuilder *b, OpKind kind, Value *x, Value *y) {
  return irb_value(b, kind, 2, (Value *[]){x, y}, x->type);
}

Value *irb_cmp(IrBuilder *b, OpKind kind, Value *x, Value *y) {
  return irb_value(b, kind, 2, (Value *[]){x, y}, type_with_elem(x->type, SK_I1));
}

Value *irb_select(IrBuilder *b, Value *cond, Value *x, Value *y) {
  return irb_value(b, OP_SELECT, 3, (Value *[]){cond, x, y}, x->type);
}

Value *irb_cast(IrBuilder *b, Value *x, TType to) {
  if (type_eq(x->type, to)) return x;
  return irb_value(b, OP_CAST, 1, (Value *[]){x}, to);
}

IrBuilder irb_if(IrBuilder *b, Value *cond) {
  Op *op = ir_op_new(b->arena, OP_IF, 1, 0, NULL, 2, b->loc);
  op->operands[0] = cond;
  for (int r = 0; r < 2; r++) {
    ir_block_set_args(b->arena, &op->regions[r], 0, NULL);
    ir_append(&op->regions[r], ir_op_new(b->arena, OP_YIELD, 0, 0, NULL, 0, b->loc));
  }
  if (b->before)
    ir_insert_before(b->before, op);
  else
    ir_append(b->block, op);
  IrBuilder in = irb_at_end(b->arena, &op->regions[0]);
  in.loc = b->loc;
  return in;
}
