/* lower_mma.c - dot on mma.sync m16n8k16 (bf16, f16; f32 accumulators),
 * for tiles too small for warpgroup products (M below 64, or fewer than
 * four warps).
 *
 * The operands are requested in the fragment layouts of layout/mma.h
 * (the layout machinery converts them from wherever they are, through
 * shared memory when needed), so each instruction only picks registers:
 * A's registers 8(kk + k_rep mi) .. +7 and B's 4(kk + k_rep ni) .. +3,
 * packed in pairs with the lower k in the low half, and the accumulator's
 * 4(ni + n_rep mi) .. +3, tied through.
 */
#include <stdio.h>

#include "../layout/mma.h"
#include "lower_internal.h"

static LLVMValueRef pack_pair(Lower *L, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMValueRef v = LLVMGetUndef(LLVMVectorType(LLVMTypeOf(lo), 2));
  v = LLVMBuildInsertElement(L->b, v, lo, const_i32(L, 0), "");
  v = LLVMBuildInsertElement(L->b, v, hi, const_i32(L, 1), "");
  return LLVMBuildBitCast(L->b, v, L->t_i32, "");
}

LTile *lower_mma_dot(Lower *L, const Op *op, const Layout *l) {
  const Value *av = op->operands[0], *bv = op->operands[1];
  MmaShape s;
  if (!mma_shape_of_acc(av->type.shape[0], bv->type.shape[1], av->type.shape[1], L->num_warps, l, &s)) {
    lower_error(L, op, "internal: mma.sync shape");
    return NULL;
  }
  Layout *la = ARENA_NEW(&L->arena, Layout), *lb = ARENA_NEW(&L->arena, Layout);
  *la = layout_mma_a(&s);
  *lb = layout_mma_b(&s);
  LTile *a = get_tile(L, av, la), *b = get_tile(L, bv, lb), *acc = get_tile(L, op->operands[2], l);
  if (!a || !b || !acc) return NULL;
  const char *ty = av->type.kind == SK_BF16 ? "bf16" : "f16";
  char text[256];
  snprintf(text, sizeof text,
           "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, "
           "{$10, $11, $12, $13};",
           ty, ty);
  LLVMTypeRef ft[4] = {L->t_f32, L->t_f32, L->t_f32, L->t_f32};
  LLVMTypeRef ret = LLVMStructTypeInContext(L->ctx, ft, 4, 0);
  LTile *out = lt_new(L, l);
  for (int r = 0; r < out->nregs; r++) out->regs[r] = acc->regs[r];
  for (int kk = 0; kk < s.k_rep; kk++)
    for (int mi = 0; mi < s.m_rep; mi++)
      for (int ni = 0; ni < s.n_rep; ni++) {
        LLVMValueRef args[14];
        int ab = 8 * (kk + s.k_rep * mi), bb = 4 * (kk + s.k_rep * ni), cb = 4 * (ni + s.n_rep * mi);
        for (int j = 0; j < 4; j++) args[j] = pack_pair(L, a->regs[ab + 2 * j], a->regs[ab + 2 * j + 1]);
        for (int j = 0; j < 2; j++) args[4 + j] = pack_pair(L, b->regs[bb + 2 * j], b->regs[bb + 2 * j + 1]);
        for (int j = 0; j < 4; j++) args[6 + j] = out->regs[cb + j];
        LLVMValueRef r = llvm_asm(L, text, "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", ret, args, 10, false);
        /* mma.sync.aligned needs the whole warp: LLVM must not sink it
         * into the branch of a masked store that alone uses the result */
        mark_convergent(L, r);
        for (int j = 0; j < 4; j++) out->regs[cb + j] = LLVMBuildExtractValue(L->b, r, (unsigned)j, "");
      }
  return out;
}
