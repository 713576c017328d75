/* lower_shared.c - shared-memory buffers of the lowered IR: allocation
 * (an address: the allocator placed it), ring slots, stores of register
 * tiles into swizzled tiles and loads back, cp.async copies from global
 * memory, and the proxy fence.
 *
 * Addresses: the byte offset of an element in a shared tile is a linear
 * map of its flat index (layout/smem.h), and so is the flat index of a
 * register of a layout; the offset of register r of a thread is then
 * offset(thread part) XOR offset(register part). The thread part is
 * computed once per (register layout, shared layout) in the kernel's entry
 * block; the register part is a constant, which LLVM folds into the
 * address when the two touch different bits. Registers that land on
 * consecutive bytes (up to 16) move as one vector.
 */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

/* Widest shared-memory access and cp.async copy. */
#define VECTOR_BYTES 16
#define CP_ASYNC_MIN_BYTES 4

LBuf *get_buf(Lower *L, const Value *v) {
  LBuf *b = ptrmap_get(&L->bufs, v);
  if (!b) lower_error(L, v->def, "internal: shared buffer used before it is allocated");
  return b;
}

LLVMValueRef smem_addr32(Lower *L, LLVMValueRef ptr) { return LLVMBuildPtrToInt(L->b, ptr, L->t_i32, ""); }

static bool tile_layout(LBuf *b, TType t, int swizzle) {
  return smem_layout(t.rank, t.shape, scalar_bytes((ScalarKind)t.pointee), swizzle, &b->layout);
}

void lower_smem_alloc(Lower *L, const Op *op) {
  TType t = op->results[0].type;
  LBuf *b = ARENA_NEW(&L->arena, LBuf);
  b->ptr = smem_ptr(L, const_i32(L, op->attr[0]));
  bool ok = op->attr[2] ? tile_layout(b, type_smem((ScalarKind)t.pointee, t.rank - 1, t.shape + 1), (int)op->attr[1])
                        : tile_layout(b, t, (int)op->attr[1]);
  if (!ok) {
    lower_error(L, op, "internal: no shared layout for this buffer");
    return;
  }
  ptrmap_put(&L->bufs, &op->results[0], b);
}

void lower_smem_index(Lower *L, const Op *op) {
  LBuf *ring = get_buf(L, op->operands[0]);
  LTile *i = get_fixed(L, op->operands[1]);
  if (!ring || !i) return;
  LBuf *b = ARENA_NEW(&L->arena, LBuf);
  b->layout = ring->layout;
  LLVMValueRef off = LLVMBuildMul(L->b, i->regs[0], const_i32(L, ring->layout.bytes), "");
  b->ptr = LLVMBuildGEP2(L->b, L->t_i8, ring->ptr, &off, 1, "slot");
  ptrmap_put(&L->bufs, &op->results[0], b);
}

/* ---- register tiles <-> shared tiles ---- */

typedef struct ThreadOffset {
  LLVMValueRef off;   /* i32: this thread's part of the byte offset */
  uint32_t bits;      /* bits it can have */
} ThreadOffset;

/* XOR of the offsets of the lane and warp bases of this thread (entry block). */
static ThreadOffset thread_offset(Lower *L, const Layout *l, const SmemLayout *sl, bool here) {
  LLVMBuilderRef b = here ? L->b : L->entry_b;
  ThreadOffset t = {const_i32(L, 0), 0};
  const uint32_t *bases[2] = {l->lane, l->warp};
  int counts[2] = {l->nlane, l->nwarp};
  LLVMValueRef ids[2] = {L->lane, L->warp};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < counts[k]; i++) {
      uint32_t o = smem_offset(sl, bases[k][i]);
      if (!o) continue;
      LLVMValueRef bit = LLVMBuildAnd(b, LLVMBuildLShr(b, ids[k], const_i32(L, i), ""), const_i32(L, 1), "");
      t.off = LLVMBuildXor(b, t.off, LLVMBuildMul(b, bit, const_i32(L, (int64_t)o), ""), "");
      t.bits |= o;
    }
  return t;
}

/* Pointer to the register group starting at register r. */
static LLVMValueRef reg_ptr(Lower *L, const LBuf *b, const Layout *l, ThreadOffset t, int r) {
  uint32_t c = smem_offset(&b->layout, layout_apply(l, (uint32_t)r, 0, 0));
  LLVMValueRef off = (c & t.bits) ? LLVMBuildXor(L->b, t.off, const_i32(L, c), "")
                                  : LLVMBuildNUWAdd(L->b, t.off, const_i32(L, c), "");
  return LLVMBuildGEP2(L->b, L->t_i8, b->ptr, &off, 1, "");
}

/* A column range of a tile: the registers whose last coordinate is in
 * [first, first + width) go to a buffer `width` wide. In flat indices
 * (row-major, power-of-two dimensions) the bits of the column below
 * log2(width) stay, the bits from there to log2(cols) select the range
 * (they must equal first's), the row bits above move down. */
typedef struct Part {
  uint32_t select;  /* flat bits that select the range */
  uint32_t want;    /* their value for this range */
  int low, high;    /* log2(width), log2(cols) */
} Part;

static uint32_t part_map(const Part *pt, uint32_t x) {
  return ((x >> pt->high) << pt->low) | (x & ((1u << pt->low) - 1));
}

static int log2i(int x) {
  int n = 0;
  while ((1 << n) < x) n++;
  return n;
}

/* The layout of the part as a tile of the buffer's shape. */
static Layout part_layout(const Layout *l, const Part *pt, int width) {
  Layout d = *l;
  d.shape[d.rank - 1] = width;
  for (int i = 0; i < d.nreg; i++) d.reg[i] = part_map(pt, l->reg[i]);
  for (int i = 0; i < d.nlane; i++) d.lane[i] = part_map(pt, l->lane[i]);
  for (int i = 0; i < d.nwarp; i++) d.warp[i] = part_map(pt, l->warp[i]);
  return d;
}

/* This thread's share of the selecting bits (entry block), and whether
 * any lane or warp bit has one. */
static LLVMValueRef thread_select(Lower *L, const Layout *l, const Part *pt, bool *varies) {
  LLVMBuilderRef b = L->entry_b;
  LLVMValueRef acc = const_i32(L, 0);
  const uint32_t *bases[2] = {l->lane, l->warp};
  int counts[2] = {l->nlane, l->nwarp};
  LLVMValueRef ids[2] = {L->lane, L->warp};
  *varies = false;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < counts[k]; i++) {
      uint32_t sel = bases[k][i] & pt->select;
      if (!sel) continue;
      *varies = true;
      LLVMValueRef bit = LLVMBuildAnd(b, LLVMBuildLShr(b, ids[k], const_i32(L, i), ""), const_i32(L, 1), "");
      acc = LLVMBuildXor(b, acc, LLVMBuildMul(b, bit, const_i32(L, (int64_t)sel), ""), "");
    }
  return acc;
}

/* stmatrix, when smem_stmatrix chooses it: the registers of instruction
 * g are g * f.regs and on, two to a 32-bit operand (low half first), as
 * ldmatrix delivers them. With a part, every instruction's registers must
 * lie in one part (no matrix basis selects), and instructions outside the
 * part are skipped; a part chosen by lane or warp bits (`varies`) keeps
 * st.shared, since stmatrix is executed by the whole warp. */
static bool write_stmatrix(Lower *L, const LBuf *b, const LTile *t, ScalarKind k, const Layout *l, const Part *pt) {
  SmemLdsm f;
  if (scalar_bits(k) != 16 || !smem_stmatrix(l, &b->layout, &f)) return false;
  int m = f.matrices;
  if (pt)
    for (int i = 0; i < t->layout->nreg && (1 << i) < f.regs; i++)
      if (t->layout->reg[i] & pt->select) return false;
  ThreadOffset to = thread_offset(L, &f.addr, &b->layout, b->here);
  static const char *const operands[SMEM_LDSM_MAX_MATRICES + 1] = {"", "$1", "$1, $2", "", "$1, $2, $3, $4"};
  char text[128];
  snprintf(text, sizeof text, "stmatrix.sync.aligned.m8n8.x%d%s.shared.b16 [$0], {%s};", m,
           f.kind == SMEM_LDSM_TRANS ? ".trans" : "", operands[m]);
  static const char *const constraints[SMEM_LDSM_MAX_MATRICES + 1] = {
      "", "r,r,~{memory}", "r,r,r,~{memory}", "", "r,r,r,r,r,~{memory}"};
  LLVMTypeRef pair = LLVMVectorType(llvm_mem_type(L, k), 2);
  for (int g = 0; g * f.regs < t->nregs; g++) {
    int r = g * f.regs;
    if (pt && (layout_apply(t->layout, (uint32_t)r, 0, 0) & pt->select) != pt->want) continue;
    LLVMValueRef args[SMEM_LDSM_MAX_MATRICES + 1];
    args[0] = smem_addr32(L, reg_ptr(L, b, &f.addr, to, g));
    for (int j = 0; j < m; j++) {
      LLVMValueRef v = LLVMGetUndef(pair);
      for (int h = 0; h < 2; h++) v = LLVMBuildInsertElement(L->b, v, t->regs[r + 2 * j + h], const_i32(L, h), "");
      args[1 + j] = LLVMBuildBitCast(L->b, v, L->t_i32, "");
    }
    mark_convergent(L, llvm_asm(L, text, constraints[m], L->t_void, args, 1 + m, true));
  }
  return true;
}

/* Writes t into b; with `pt`, only the part it selects. */
static void write_tile_part(Lower *L, const LBuf *b, const LTile *t, ScalarKind k, const Part *pt) {
  int eb = scalar_bytes(k);
  Layout part;
  const Layout *l = t->layout;
  bool varies = false;
  LLVMValueRef tsel = NULL;
  if (pt) {
    part = part_layout(t->layout, pt, 1 << pt->low);
    l = &part;
    tsel = thread_select(L, t->layout, pt, &varies);
  }
  if (!varies && write_stmatrix(L, b, t, k, l, pt)) return;
  ThreadOffset to = thread_offset(L, l, &b->layout, b->here);
  int v = smem_vector_elems(l, &b->layout);
  LLVMTypeRef et = llvm_mem_type(L, k);
  for (int r = 0; r < t->nregs; r += v) {
    LLVMBasicBlockRef skip = NULL;
    if (pt) {
      uint32_t rsel = layout_apply(t->layout, (uint32_t)r, 0, 0) & pt->select;
      if (!varies && rsel != pt->want) continue;
      if (varies) {
        LLVMValueRef mine = LLVMBuildICmp(L->b, LLVMIntEQ, LLVMBuildXor(L->b, tsel, const_i32(L, rsel), ""),
                                          const_i32(L, pt->want), "");
        LLVMBasicBlockRef put = new_block(L, "part.store");
        skip = new_block(L, "part.next");
        LLVMBuildCondBr(L->b, mine, put, skip);
        LLVMPositionBuilderAtEnd(L->b, put);
      }
    }
    LLVMValueRef p = reg_ptr(L, b, l, to, r), val;
    if (v == 1) {
      val = k == SK_I1 ? LLVMBuildZExt(L->b, t->regs[r], L->t_i8, "") : t->regs[r];
    } else {
      val = LLVMGetUndef(LLVMVectorType(et, (unsigned)v));
      for (int i = 0; i < v; i++) {
        LLVMValueRef x = k == SK_I1 ? LLVMBuildZExt(L->b, t->regs[r + i], L->t_i8, "") : t->regs[r + i];
        val = LLVMBuildInsertElement(L->b, val, x, const_i32(L, i), "");
      }
    }
    LLVMSetAlignment(LLVMBuildStore(L->b, val, p), (unsigned)(v * eb));
    if (skip) {
      LLVMBuildBr(L->b, skip);
      LLVMPositionBuilderAtEnd(L->b, skip);
    }
  }
}

static void write_tile(Lower *L, const LBuf *b, const LTile *t, ScalarKind k) { write_tile_part(L, b, t, k, NULL); }

/* ldmatrix: each lane gives the address of one 16-byte matrix row; result
 * register j of the instruction holds elements 2j and 2j + 1 of its group
 * of registers (low half first). The NVVM intrinsic reads memory like a
 * load, so LLVM orders it after the barriers and ptxas may schedule it. */
static void read_ldmatrix(Lower *L, const LBuf *b, const SmemLdsm *f, ScalarKind k, LTile *t) {
  ThreadOffset to = thread_offset(L, &f->addr, &b->layout, b->here);
  char name[96];
  int m = f->matrices;
  snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%d%s.b16.p3", m,
           f->kind == SMEM_LDSM_TRANS ? ".trans" : "");
  LLVMTypeRef it[SMEM_LDSM_MAX_MATRICES] = {L->t_i32, L->t_i32, L->t_i32, L->t_i32};
  LLVMTypeRef ret = m == 1 ? L->t_i32 : LLVMStructTypeInContext(L->ctx, it, (unsigned)m, 0);
  LLVMTypeRef pair = LLVMVectorType(llvm_mem_type(L, k), 2);
  for (int g = 0; g * f->regs < t->nregs; g++) {
    LLVMValueRef p = reg_ptr(L, b, &f->addr, to, g);
    LLVMValueRef r = call_intrinsic(L, name, ret, &p, 1);
    mark_convergent(L, r);
    for (int j = 0; j < m; j++) {
      LLVMValueRef w = m == 1 ? r : LLVMBuildExtractValue(L->b, r, (unsigned)j, "");
      LLVMValueRef v = LLVMBuildBitCast(L->b, w, pair, "");
      for (int h = 0; h < 2; h++)
        t->regs[g * f->regs + 2 * j + h] = LLVMBuildExtractElement(L->b, v, const_i32(L, h), "");
    }
  }
}

static LTile *read_tile(Lower *L, const LBuf *b, const Layout *l, ScalarKind k) {
  int eb = scalar_bytes(k);
  LTile *t = lt_new(L, l);
  SmemLdsm f;
  if (scalar_bits(k) == 16 && smem_ldmatrix(l, &b->layout, &f)) {
    read_ldmatrix(L, b, &f, k, t);
    return t;
  }
  ThreadOffset to = thread_offset(L, l, &b->layout, b->here);
  int v = smem_vector_elems(l, &b->layout);
  LLVMTypeRef et = llvm_mem_type(L, k);
  for (int r = 0; r < t->nregs; r += v) {
    LLVMValueRef p = reg_ptr(L, b, l, to, r);
    LLVMValueRef x = LLVMBuildLoad2(L->b, v == 1 ? et : LLVMVectorType(et, (unsigned)v), p, "");
    LLVMSetAlignment(x, (unsigned)(v * eb));
    if (v == 1) {
      t->regs[r] = k == SK_I1 ? LLVMBuildTrunc(L->b, x, L->t_i1, "") : x;
      continue;
    }
    for (int i = 0; i < v; i++) {
      LLVMValueRef e = LLVMBuildExtractElement(L->b, x, const_i32(L, i), "");
      t->regs[r + i] = k == SK_I1 ? LLVMBuildTrunc(L->b, e, L->t_i1, "") : e;
    }
  }
  return t;
}

void lower_write_smem(Lower *L, const LBuf *b, const LTile *t, ScalarKind k) { write_tile(L, b, t, k); }

LTile *lower_read_smem(Lower *L, const LBuf *b, const Layout *l, ScalarKind k) { return read_tile(L, b, l, k); }

void lower_smem_store(Lower *L, const Op *op) {
  LBuf *b = get_buf(L, op->operands[0]);
  const Value *v = op->operands[1];
  LTile *t = b ? get_fixed(L, v) : NULL;
  if (!t) return;
  TType bt = op->operands[0]->type, vt = v->type;
  int width = bt.shape[bt.rank - 1], cols = vt.shape[vt.rank - 1];
  if (width == cols) {
    write_tile(L, b, t, (ScalarKind)vt.kind);
    return;
  }
  /* columns [column, column + width) of a wider tile (the verifier checked
   * the shapes: powers of two, column a multiple of width) */
  Part pt = {(uint32_t)(cols - 1) & ~(uint32_t)(width - 1), (uint32_t)op->attr[0], log2i(width), log2i(cols)};
  write_tile_part(L, b, t, (ScalarKind)vt.kind, &pt);
}

LTile *lower_smem_load(Lower *L, const Op *op, const Layout *l) {
  LBuf *b = get_buf(L, op->operands[0]);
  return b ? read_tile(L, b, l, (ScalarKind)op->results[0].type.kind) : NULL;
}

/* ---- cp.async ---- */

void lower_async_copy(Lower *L, const Op *op) {
  LBuf *b = get_buf(L, op->operands[0]);
  const Value *pv = op->operands[1], *mv = op->noperands > 2 ? op->operands[2] : NULL;
  const Layout *l = layouts_canonical(L->layouts, pv->type.rank, pv->type.shape);
  LTile *p = b ? get_tile(L, pv, l) : NULL, *m = mv && p ? get_tile(L, mv, l) : NULL;
  if (!p || (mv && !m)) return;
  ScalarKind k = (ScalarKind)pv->type.pointee;
  int eb = scalar_bytes(k);
  int v = smem_vector_elems(l, &b->layout);
  int w = axis_vector_width(L->axes, pv, mv, v);
  if (w > v) w = v;
  if (w * eb < CP_ASYNC_MIN_BYTES) {
    lower_error(L, op, "internal: cp.async pieces of %d bytes", w * eb);
    return;
  }
  int bytes = w * eb;
  char text[96];
  snprintf(text, sizeof text, "cp.async.%s.shared.global [$0], [$1], %d, $2;", bytes == VECTOR_BYTES ? "cg" : "ca", bytes);
  ThreadOffset to = thread_offset(L, l, &b->layout, b->here);
  for (int r = 0; r < p->nregs; r += w) {
    LLVMValueRef dst = smem_addr32(L, reg_ptr(L, b, l, to, r));
    LLVMValueRef size = const_i32(L, bytes);
    if (m) size = LLVMBuildSelect(L->b, m->regs[r], size, const_i32(L, 0), "");
    LLVMValueRef args[3] = {dst, p->regs[r], size};
    llvm_asm(L, text, "r,l,r,~{memory}", L->t_void, args, 3, true);
  }
}

void lower_async_commit(Lower *L) { llvm_asm(L, "cp.async.commit_group;", "~{memory}", L->t_void, NULL, 0, true); }

void lower_async_wait(Lower *L, const Op *op) {
  char text[64];
  snprintf(text, sizeof text, "cp.async.wait_group %d;", (int)op->attr[0]);
  llvm_asm(L, text, "~{memory}", L->t_void, NULL, 0, true);
}

void lower_fence_async(Lower *L) {
  llvm_asm(L, "fence.proxy.async.shared::cta;", "~{memory}", L->t_void, NULL, 0, true);
}
