/* clone.c - copying ops and functions (see ir.h).
 *
 * The GPU back end rewrites a kernel into its lowered form on a copy, so
 * that the compilation's tile IR (which the interpreter and --emit=ir
 * still use) is never changed; the pipeliner copies the address
 * arithmetic of a load to issue it ahead of its iteration. Operands are
 * mapped through a value map: values defined inside the copied ops map to
 * their copies, values defined outside map to what the map says (or to
 * themselves when it says nothing).
 */
#include "../util/ptrmap.h"
#include "ir.h"

static Value *mapped(PtrMap *map, Value *v) {
  Value *m = ptrmap_get(map, v);
  return m ? m : v;
}

static void clone_block_into(Arena *a, const Block *src, Block *dst, PtrMap *map);

Op *ir_clone_op(Arena *a, const Op *src, PtrMap *map) {
  TType types[1];
  TType *rt = src->nresults <= 1 ? types : ARENA_ARRAY(a, TType, src->nresults);
  for (uint32_t i = 0; i < src->nresults; i++) rt[i] = src->results[i].type;
  Op *op = ir_op_new(a, (OpKind)src->kind, (int)src->noperands, (int)src->nresults, rt, src->nregions, src->loc);
  for (uint32_t i = 0; i < src->noperands; i++) op->operands[i] = mapped(map, src->operands[i]);
  for (int i = 0; i < IR_MAX_ATTRS; i++) op->attr[i] = src->attr[i];
  op->fattr = src->fattr;
  op->text = src->text;
  for (uint32_t i = 0; i < src->nresults; i++) ptrmap_put(map, &src->results[i], &op->results[i]);
  for (int r = 0; r < src->nregions; r++) clone_block_into(a, &src->regions[r], &op->regions[r], map);
  return op;
}

static void clone_block_into(Arena *a, const Block *src, Block *dst, PtrMap *map) {
  TType *types = ARENA_ARRAY(a, TType, src->nargs ? src->nargs : 1);
  for (uint32_t i = 0; i < src->nargs; i++) types[i] = src->args[i].type;
  ir_block_set_args(a, dst, (int)src->nargs, types);
  for (uint32_t i = 0; i < src->nargs; i++) ptrmap_put(map, &src->args[i], &dst->args[i]);
  for (const Op *op = src->first; op; op = op->next) ir_append(dst, ir_clone_op(a, op, map));
}

Func *ir_clone_func(Arena *a, const Func *src) {
  Func *f = ARENA_NEW(a, Func);
  *f = *src;
  f->body = (Block){0};
  PtrMap map;
  ptrmap_init(&map, a);
  clone_block_into(a, &src->body, &f->body, &map);
  return f;
}
