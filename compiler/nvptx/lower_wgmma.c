/* lower_wgmma.c - warpgroup tensor-core products (wgmma.mma_async) and
 * their waits.
 *
 * A wgmma op of the lowered IR is one batch: `wgmma.fence`, then for every
 * k step and every instruction tile of the warpgroup (mma.h: m_rep x n_rep
 * instructions of m64 x inst_n) one `wgmma.mma_async` with the
 * accumulator registers tied through, then `wgmma.commit_group`. Shared
 * operands are described by 64-bit matrix descriptors (HOPPER-FACTS.md
 * section 3):
 *     bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
 *     62-63 swizzle (1: 128B, 2: 64B, 3: 32B)
 * An operand whose K is the buffer's contiguous dimension ("K-major") has
 * SBO = 8 rows and no LBO; one whose M or N is contiguous ("MN-major",
 * the transposed forms) has LBO = the distance between atoms along M/N and
 * SBO = 8 rows of K. The start of an instruction's operand is the offset
 * of its first element in the shared layout, whose row is a multiple of 8:
 * the swizzle does not move it, the hardware applies the swizzle to the
 * rows after it.
 *
 * wgmma_wait is `wgmma.wait_group N` with every accumulator register tied
 * through, so that nothing computed from the accumulators can move above
 * it (they are the asm's outputs).
 */
#include <stdio.h>
#include <string.h>

#include "../layout/mma.h"
#include "lower_internal.h"

/* K of one instruction: 16 for 16-bit inputs, 32 for fp8. */
#define WGMMA_K_HALF 16
/* Rows of K (or M/N) between two SBO steps. */
#define CORE_ROWS 8
/* Registers one asm statement ties through in a wait (one n256 tile). */
#define WAIT_MAX_REGS 128

static int swizzle_code(int swizzle) { return swizzle == 128 ? 1 : swizzle == 64 ? 2 : swizzle == 32 ? 3 : 0; }

static const char *ptx_type(ScalarKind k) {
  switch (k) {
  case SK_BF16: return "bf16";
  case SK_F16: return "f16";
  case SK_F8E4M3: return "e4m3";
  case SK_F8E5M2: return "e5m2";
  default: return "?";
  }
}

/* The constant fields of a descriptor, and the 64-bit descriptor for a
 * start address (i32 shared address). */
static uint64_t desc_fields(const SmemLayout *sl, bool mn_major) {
  uint64_t sbo = (uint64_t)CORE_ROWS * (uint64_t)sl->swizzle, lbo = mn_major ? smem_atom_block_bytes(sl) : 16;
  return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | (uint64_t)swizzle_code(sl->swizzle) << 62;
}

/* A descriptor's start address field (its low 14 bits) is the shared
 * address over 16; every shared address of a block (at most 228 KB)
 * fits, so no sum below carries out of it: the low word of the
 * descriptor of base + off is the low word of base's plus off / 16 for
 * 16-byte aligned offsets, one 32-bit add per instruction (the high word
 * is a constant). */
static LLVMValueRef desc_low_word(Lower *L, LLVMValueRef addr32, uint64_t fields) {
  LLVMValueRef a = LLVMBuildAnd(L->b, LLVMBuildLShr(L->b, addr32, const_i32(L, 4), ""), const_i32(L, 0x3FFF), "");
  return LLVMBuildOr(L->b, a, const_i32(L, (int64_t)(fields & 0xFFFFFFFFu)), "");
}

static LLVMValueRef make_desc(Lower *L, LLVMValueRef low, uint64_t fields) {
  return LLVMBuildOr(L->b, LLVMBuildZExt(L->b, low, L->t_i64, ""), LLVMConstInt(L->t_i64, fields >> 32 << 32, 0),
                     "desc");
}

/* One shared operand: its buffer, whether it is MN-major, and the runtime
 * offset of this warpgroup's part. */
typedef struct Operand {
  LBuf *buf;
  bool trans;         /* buffer holds the operand transposed */
  int cols;           /* the buffer's last dimension */
  uint64_t fields;
  LLVMValueRef base_low; /* i32: descriptor low word of this warpgroup's part */
} Operand;

/* Byte offset of operand element (row, k) (row: M for A, N for B). */
static uint32_t operand_offset(const Operand *o, bool is_a, int row, int k) {
  /* A: buffer [M, K] (or [K, M] when transposed); B: [N, K] when
   * transposed (K-major), else [K, N]. */
  bool k_contiguous = is_a ? !o->trans : o->trans;
  int r = k_contiguous ? row : k, c = k_contiguous ? k : row;
  return smem_offset(&o->buf->layout, (uint32_t)r * (uint32_t)o->cols + (uint32_t)c);
}

/* Operand offsets are 16-byte aligned: the layouts' swizzle atoms are
 * 128-byte aligned and a k step moves 32 bytes (16 bf16, 32 fp8). */
static LLVMValueRef operand_desc(Lower *L, const Operand *o, bool is_a, int row, int k) {
  uint32_t off = operand_offset(o, is_a, row, k);
  LLVMValueRef low = LLVMBuildAdd(L->b, o->base_low, const_i32(L, (int64_t)(off >> 4)), "");
  return make_desc(L, low, o->fields);
}

/* The warpgroup's coordinates (runtime): g_m along M, g_n along N. */
static void warpgroup_coords(Lower *L, const WgmmaShape *ws, LLVMValueRef *gm, LLVMValueRef *gn) {
  LLVMValueRef wg = LLVMBuildLShr(L->b, L->warp, const_i32(L, 2), "wg");
  *gm = LLVMBuildURem(L->b, wg, const_i32(L, ws->gm), "");
  *gn = LLVMBuildURem(L->b, LLVMBuildUDiv(L->b, wg, const_i32(L, ws->gm), ""), const_i32(L, ws->gn), "");
}

static bool prepare_operand(Lower *L, const Op *op, Operand *o, const Value *v, bool trans, bool is_a, LLVMValueRef g,
                            int g_step) {
  o->buf = get_buf(L, v);
  if (!o->buf) return false;
  o->trans = trans;
  o->cols = v->type.shape[1];
  if (!o->buf->layout.swizzle) {
    lower_error(L, op, "internal: wgmma operand without a swizzle");
    return false;
  }
  bool mn_major = is_a ? trans : !trans;
  o->fields = desc_fields(&o->buf->layout, mn_major);
  LLVMValueRef wg_off = LLVMBuildMul(L->b, g, const_i32(L, operand_offset(o, is_a, g_step, 0)), "");
  o->base_low = desc_low_word(L, LLVMBuildAdd(L->b, smem_addr32(L, o->buf->ptr), wg_off, ""), o->fields);
  return true;
}

/* Registers j..j+3 of the A fragment (m tile mi, k step kk) packed in
 * pairs: lower k in the low half. */
static void a_fragment(Lower *L, const LTile *a, const WgmmaShape *ws, int mi, int kk, bool fp8, LLVMValueRef *out) {
  if (fp8) { /* layout_wgmma_a_8bit: register j packs the four k of its bytes, lowest k in the low byte */
    for (int j = 0; j < 4; j++) {
      int r = ws->K / 2 * mi + 16 * kk + 4 * j;
      /* by halves, as integers: bytes that one cvt made as a pair
       * (lower_elem.c) fold back into its 16 bits */
      LLVMValueRef half[2];
      for (int h = 0; h < 2; h++) {
        LLVMValueRef b0 = LLVMBuildZExt(L->b, a->regs[r + 2 * h], L->t_i16, "");
        LLVMValueRef b1 = LLVMBuildZExt(L->b, a->regs[r + 2 * h + 1], L->t_i16, "");
        b1 = LLVMBuildShl(L->b, b1, LLVMConstInt(L->t_i16, 8, 0), "");
        half[h] = LLVMBuildZExt(L->b, LLVMBuildOr(L->b, b0, b1, ""), L->t_i32, "");
      }
      out[j] = LLVMBuildOr(L->b, half[0], LLVMBuildShl(L->b, half[1], const_i32(L, 16), ""), "");
    }
    return;
  }
  LLVMTypeRef pair = LLVMVectorType(LLVMTypeOf(a->regs[0]), 2);
  for (int j = 0; j < 4; j++) {
    int r = ws->K / 2 * mi + 8 * kk + 2 * j;
    LLVMValueRef v = LLVMGetUndef(pair);
    v = LLVMBuildInsertElement(L->b, v, a->regs[r], const_i32(L, 0), "");
    v = LLVMBuildInsertElement(L->b, v, a->regs[r + 1], const_i32(L, 1), "");
    out[j] = LLVMBuildBitCast(L->b, v, L->t_i32, "");
  }
}

/* The asm text and constraints of one instruction with n accumulators. */
static void instruction_text(char *text, size_t tsize, char *cons, size_t csize, const WgmmaShape *ws, int kstep,
                             ScalarKind ka, ScalarKind kb, bool a_regs, bool ta, bool tb) {
  int n = ws->inst_n / 2;
  int in = 2 * n; /* operands after the outputs and the tied accumulators */
  bool fp8 = kstep == WGMMA_K_8BIT;
  size_t t = (size_t)snprintf(text, tsize, "{\n.reg .pred p;\nsetp.ne.b32 p, $%d, 0;\nwgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {",
                              in + (a_regs ? 5 : 2), ws->inst_n, kstep, ptx_type(ka), ptx_type(kb));
  for (int i = 0; i < n; i++) t += (size_t)snprintf(text + t, tsize - t, i ? ", $%d" : "$%d", i);
  if (a_regs)
    t += (size_t)snprintf(text + t, tsize - t, "}, {$%d, $%d, $%d, $%d}, $%d, p, 1, 1", in, in + 1, in + 2, in + 3, in + 4);
  else
    t += (size_t)snprintf(text + t, tsize - t, "}, $%d, $%d, p, 1, 1", in, in + 1);
  if (!fp8) {
    if (a_regs)
      t += (size_t)snprintf(text + t, tsize - t, ", %d", tb ? 0 : 1);
    else
      t += (size_t)snprintf(text + t, tsize - t, ", %d, %d", ta ? 1 : 0, tb ? 0 : 1);
  }
  snprintf(text + t, tsize - t, ";\n}");
  size_t c = 0;
  for (int i = 0; i < n; i++) c += (size_t)snprintf(cons + c, csize - c, "=f,");
  for (int i = 0; i < n; i++) c += (size_t)snprintf(cons + c, csize - c, "%d,", i);
  c += (size_t)snprintf(cons + c, csize - c, a_regs ? "r,r,r,r,l,n,~{memory}" : "l,l,n,~{memory}");
}

/* The second wgmma of a pair (schedule_pair.c) and its accumulator. */
typedef struct Partner {
  const Op *op;
  LTile *acc, *out;
} Partner;

static bool pair_partner(Lower *L, const Op *op, const WgmmaShape *ws, Partner *p) {
  memset(p, 0, sizeof *p);
  if (op->attr[2] != 1) return true;
  const Op *w2 = op->next;
  if (!w2 || w2->kind != OP_WGMMA || w2->attr[2] != 2 || ws->gn != 1 || ws->n_rep != 1 ||
      2 * ws->inst_n > WGMMA_MAX_N || ir_is_float_zeros(op->operands[2]) != ir_is_float_zeros(w2->operands[2])) {
    lower_error(L, op, "internal: a wgmma pair that is not one instruction");
    return false;
  }
  const Layout *l2 = layout_of_result(L, &w2->results[0]);
  p->op = w2;
  p->acc = get_tile(L, w2->operands[2], l2);
  if (!p->acc) return false;
  p->out = lt_new(L, l2);
  memcpy(p->out->regs, p->acc->regs, sizeof(LLVMValueRef) * (size_t)p->out->nregs);
  return true;
}

LTile *lower_wgmma(Lower *L, const Op *op, const Layout *l) {
  if (op->attr[2] == 2) return NULL; /* issued and committed with the previous wgmma, which set the result */
  const Value *av = op->operands[0], *bv = op->operands[1], *cv = op->operands[2];
  bool a_regs = av->type.kind != SK_SMEM, ta = op->attr[0], tb = op->attr[1];
  ScalarKind ka = a_regs ? (ScalarKind)av->type.kind : (ScalarKind)av->type.pointee, kb = (ScalarKind)bv->type.pointee;
  int M = cv->type.shape[0], N = cv->type.shape[1];
  int K = a_regs || !ta ? av->type.shape[1] : av->type.shape[0];
  WgmmaShape ws;
  if (!wgmma_shape(M, N, K, L->num_warps, &ws)) {
    lower_error(L, op, "internal: wgmma shape");
    return NULL;
  }
  bool fp8 = ka == SK_F8E4M3 || ka == SK_F8E5M2;
  int kstep = fp8 ? WGMMA_K_8BIT : WGMMA_K_HALF;
  LTile *acc = get_tile(L, cv, l);
  LTile *a = NULL;
  if (a_regs) {
    Layout *al = ARENA_NEW(&L->arena, Layout);
    *al = fp8 ? layout_wgmma_a_8bit(&ws) : layout_wgmma_a(&ws);
    a = get_tile(L, av, al);
  }
  Partner pair;
  if (!acc || (a_regs && !a) || !pair_partner(L, op, &ws, &pair)) return NULL;
  LLVMValueRef gm, gn;
  warpgroup_coords(L, &ws, &gm, &gn);
  Operand A = {0}, B;
  if (!a_regs && !prepare_operand(L, op, &A, av, ta, true, gm, WGMMA_M)) return NULL;
  if (!prepare_operand(L, op, &B, bv, tb, false, gn, N / ws.gn)) return NULL;
  if (!tb && smem_atom_elems(&B.buf->layout) > ws.inst_n) {
    lower_error(L, op, "internal: an N-major B operand needs instructions at least one swizzle atom wide");
    return NULL;
  }
  /* A pair's instruction is twice as wide: its first n registers are this
   * op's accumulator, the next n the partner's, and its B operand runs on
   * into the partner's tile, the next one in shared memory. */
  WgmmaShape wi = ws;
  if (pair.op) wi.inst_n *= 2;
  int n = ws.inst_n / 2, parts = pair.op ? 2 : 1;
  char *text = ARENA_ARRAY(&L->arena, char, 4096), *cons = ARENA_ARRAY(&L->arena, char, 2048);
  instruction_text(text, 4096, cons, 2048, &wi, kstep, ka, kb, a_regs, ta, tb);
  LLVMTypeRef *ft = ARENA_ARRAY(&L->arena, LLVMTypeRef, n * parts);
  for (int i = 0; i < n * parts; i++) ft[i] = L->t_f32;
  LLVMTypeRef ret = LLVMStructTypeInContext(L->ctx, ft, (unsigned)(n * parts), 0);
  LTile *out = lt_new(L, l);
  memcpy(out->regs, acc->regs, sizeof(LLVMValueRef) * (size_t)out->nregs);
  LTile *outs[2] = {out, pair.out};
  /* Operands first (A fragments packed, descriptors built), so that only
   * wgmma instructions follow the fence. */
  int nk = K / kstep, na = a_regs ? 4 : 1;
  LLVMValueRef *aops = ARENA_ARRAY(&L->arena, LLVMValueRef, (size_t)(nk * ws.m_rep * na));
  LLVMValueRef *bops = ARENA_ARRAY(&L->arena, LLVMValueRef, (size_t)(nk * ws.n_rep));
  for (int kk = 0; kk < nk; kk++) {
    for (int mi = 0; mi < ws.m_rep; mi++) {
      LLVMValueRef *dst = aops + (kk * ws.m_rep + mi) * na;
      if (a_regs)
        a_fragment(L, a, &ws, mi, kk, fp8, dst);
      else
        dst[0] = operand_desc(L, &A, true, WGMMA_M * ws.gm * mi, kk * kstep);
    }
    for (int ni = 0; ni < ws.n_rep; ni++) bops[kk * ws.n_rep + ni] = operand_desc(L, &B, false, ni * ws.inst_n, kk * kstep);
  }
  /* A product from a tile of zeros (dot without an accumulator) starts
   * with scale-d 0 and undefined inputs: no zeros are materialized, and
   * nothing writes the registers between the fence and the wgmma (ptxas
   * answers such writes with an injected warpgroup.arrive, C7519). */
  bool fresh = ir_is_float_zeros(cv);
  llvm_asm(L, "wgmma.fence.sync.aligned;", "~{memory}", L->t_void, NULL, 0, true);
  LLVMValueRef args[LOWER_MAX_ASM_ARGS];
  for (int kk = 0; kk < nk; kk++)
    for (int mi = 0; mi < ws.m_rep; mi++)
      for (int ni = 0; ni < ws.n_rep; ni++) {
        int base = n * (ni + ws.n_rep * mi), nargs = 0;
        bool first = fresh && kk == 0;
        for (int p = 0; p < parts; p++)
          for (int i = 0; i < n; i++) args[nargs++] = first ? LLVMGetUndef(L->t_f32) : outs[p]->regs[base + i];
        for (int i = 0; i < na; i++) args[nargs++] = aops[(kk * ws.m_rep + mi) * na + i];
        args[nargs++] = bops[kk * ws.n_rep + ni];
        args[nargs++] = const_i32(L, first ? 0 : 1); /* scale-d: 0 overwrites, 1 accumulates */
        LLVMValueRef r = llvm_asm(L, text, cons, ret, args, nargs, true);
        for (int p = 0; p < parts; p++)
          for (int i = 0; i < n; i++)
            outs[p]->regs[base + i] = LLVMBuildExtractValue(L->b, r, (unsigned)(p * n + i), "");
      }
  llvm_asm(L, "wgmma.commit_group.sync.aligned;", "~{memory}", L->t_void, NULL, 0, true);
  if (pair.op) set_tile(L, &pair.op->results[0], pair.out);
  return out;
}

/* Ties `n` registers through one asm statement (the text waits or is
 * empty); regs are replaced by the outputs. */
void tie_through(Lower *L, const char *text, LLVMValueRef *regs, int n) {
  char cons[WAIT_MAX_REGS * 8 + 16];
  size_t c = 0;
  for (int i = 0; i < n; i++) c += (size_t)snprintf(cons + c, sizeof cons - c, "=f,");
  for (int i = 0; i < n; i++) c += (size_t)snprintf(cons + c, sizeof cons - c, "%d,", i);
  snprintf(cons + c, sizeof cons - c, "~{memory}");
  LLVMTypeRef ft[WAIT_MAX_REGS];
  for (int i = 0; i < n; i++) ft[i] = LLVMTypeOf(regs[i]);
  LLVMTypeRef ret = n == 1 ? ft[0] : LLVMStructTypeInContext(L->ctx, ft, (unsigned)n, 0);
  LLVMValueRef r = llvm_asm(L, text, cons, ret, regs, n, true);
  for (int i = 0; i < n; i++) regs[i] = n == 1 ? r : LLVMBuildExtractValue(L->b, r, (unsigned)i, "");
}

void opaque_regs(Lower *L, LLVMValueRef *regs, int n) {
  for (int r = 0; r < n; r += WAIT_MAX_REGS) tie_through(L, "", regs + r, n - r < WAIT_MAX_REGS ? n - r : WAIT_MAX_REGS);
}

void emit_wgmma_wait(Lower *L, const Op *op, LTile *t) {
  char text[64];
  snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", (int)op->attr[0]);
  if (!t || !t->nregs) {
    llvm_asm(L, text, "~{memory}", L->t_void, NULL, 0, true);
    return;
  }
  int n = t->nregs < WAIT_MAX_REGS ? t->nregs : WAIT_MAX_REGS;
  tie_through(L, text, t->regs, n);
  opaque_regs(L, t->regs + n, t->nregs - n);
}

/* A wait whose one result is used only by the next op, a rescale of a dot
 * accumulator that only dots use: the rescale emits the wait on the path
 * that multiplies, and where every factor is 1 the accumulator goes on to
 * the next product still in flight (chained wgmma need no wait). */
static bool defer_to_rescale(Lower *L, const Op *op) {
  bool only_dots = false;
  return op->noperands == 1 && use_count(L, &op->results[0]) == 1 && op->next &&
         op->next->noperands > 0 && op->next->operands[0] == &op->results[0] &&
         is_skippable_rescale(L, op->next, &only_dots) && only_dots;
}

/* The wait goes through the first operand's registers; the others pass
 * through empty asm statements after it. */
void lower_wgmma_wait(Lower *L, const Op *op) {
  bool defer = defer_to_rescale(L, op);
  for (uint32_t i = 0; i < op->noperands && !L->failed; i++) {
    LTile *in = get_fixed(L, op->operands[i]);
    if (!in) return;
    LTile *t = lt_copy(L, in);
    if (!defer && i == 0)
      emit_wgmma_wait(L, op, t);
    else if (!defer)
      opaque_regs(L, t->regs, t->nregs);
    set_tile(L, &op->results[i], t);
  }
  if (defer)
    ptrmap_put(&L->deferred_waits, &op->results[0], (void *)op);
  else if (!op->noperands)
    emit_wgmma_wait(L, op, NULL);
}
