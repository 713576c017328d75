/* lower_mem.c - loads, stores and atomics through tiles of pointers.
 *
 * Registers that hold consecutive elements of the last dimension are
 * accessed together as one vector (up to 16 bytes) when the pointer tile is
 * contiguous and aligned enough (axisinfo.c). Masks become branches around
 * the access (ptxas turns these into predicated instructions): one per
 * vector when the mask is constant over it, otherwise a fast path for
 * vectors entirely in bounds and element-wise accesses for the rest.
 * Stores and atomics run only in the first thread of each group of
 * replicas (threads that hold the same elements), so nothing is written
 * twice; atomic results are then shared with the replicas.
 */
#include <string.h>

#include "lower_internal.h"

/* ---- vector width ---- */

/* Registers 0..run-1 hold consecutive elements of the last dimension. */
static int register_run(const Layout *l) {
  int run = 1;
  for (int i = 0; i < l->nreg && l->reg[i] == (1u << i); i++) run <<= 1;
  return run;
}

static int vector_width(Lower *L, const Op *op, const Layout *l, const Value *mask, bool *mask_uniform) {
  int vec = 1;
  if (l->rank > 0) {
    int run = register_run(l);
    vec = axis_vector_width(L->axes, op->operands[0], NULL, run);
    if (vec < 1) vec = 1;
    if (vec > run) vec = run;
  }
  *mask_uniform = true;
  if (mask && vec > 1) {
    AxisInfo mi = axis_info(L->axes, mask);
    *mask_uniform = mi.constancy[l->rank - 1] >= vec;
  }
  return vec;
}

/* ---- guarded accesses ---- */

static LLVMValueRef to_register(Lower *L, LLVMValueRef v, ScalarKind k) {
  return k == SK_I1 ? LLVMBuildTrunc(L->b, v, L->t_i1, "") : v;
}

static LLVMValueRef to_memory(Lower *L, LLVMValueRef v, ScalarKind k) {
  return k == SK_I1 ? LLVMBuildZExt(L->b, v, L->t_i8, "") : v;
}

/* Loads `vec` elements at p into out[] (register types). */
static void load_vector(Lower *L, LLVMValueRef p, int vec, ScalarKind k, LLVMValueRef *out) {
  LLVMTypeRef mt = llvm_mem_type(L, k);
  unsigned eb = (unsigned)scalar_bytes(k);
  if (vec == 1) {
    LLVMValueRef v = LLVMBuildLoad2(L->b, mt, p, "");
    LLVMSetAlignment(v, eb);
    out[0] = to_register(L, v, k);
    return;
  }
  LLVMValueRef v = LLVMBuildLoad2(L->b, LLVMVectorType(mt, (unsigned)vec), p, "");
  LLVMSetAlignment(v, eb * (unsigned)vec);
  for (int i = 0; i < vec; i++) out[i] = to_register(L, LLVMBuildExtractElement(L->b, v, const_i32(L, i), ""), k);
}

static void store_vector(Lower *L, LLVMValueRef p, int vec, ScalarKind k, LLVMValueRef *vals) {
  LLVMTypeRef mt = llvm_mem_type(L, k);
  unsigned eb = (unsigned)scalar_bytes(k);
  if (vec == 1) {
    LLVMValueRef s = LLVMBuildStore(L->b, to_memory(L, vals[0], k), p);
    LLVMSetAlignment(s, eb);
    return;
  }
  LLVMValueRef v = LLVMGetUndef(LLVMVectorType(mt, (unsigned)vec));
  for (int i = 0; i < vec; i++) v = LLVMBuildInsertElement(L->b, v, to_memory(L, vals[i], k), const_i32(L, i), "");
  LLVMValueRef s = LLVMBuildStore(L->b, v, p);
  LLVMSetAlignment(s, eb * (unsigned)vec);
}

/* out[i] = a[i] coming from block ba, b[i] from bb (phis at the current
 * position, the start of the join block). */
static void merge_values(Lower *L, int n, ScalarKind k, LLVMValueRef *a, LLVMBasicBlockRef ba, LLVMValueRef *b,
                         LLVMBasicBlockRef bb, LLVMValueRef *out) {
  for (int i = 0; i < n; i++) {
    LLVMValueRef phi = LLVMBuildPhi(L->b, llvm_elem_type(L, k), "");
    LLVMValueRef vals[2] = {a[i], b[i]};
    LLVMBasicBlockRef bbs[2] = {ba, bb};
    LLVMAddIncoming(phi, vals, bbs, 2);
    out[i] = phi;
  }
}

/* if (pred) out = load(p) else out = other, elementwise over the vector. */
static void guarded_load(Lower *L, LLVMValueRef pred, LLVMValueRef p, int vec, ScalarKind k, LLVMValueRef *other,
                         LLVMValueRef *out) {
  LLVMBasicBlockRef from = LLVMGetInsertBlock(L->b), ld = new_block(L, "ld"), join = new_block(L, "ld.end");
  LLVMBuildCondBr(L->b, pred, ld, join);
  LLVMPositionBuilderAtEnd(L->b, ld);
  LLVMValueRef loaded[16];
  load_vector(L, p, vec, k, loaded);
  LLVMBasicBlockRef ld_end = LLVMGetInsertBlock(L->b);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, join);
  merge_values(L, vec, k, loaded, ld_end, other, from, out);
}

static void guarded_store(Lower *L, LLVMValueRef pred, LLVMValueRef p, int vec, ScalarKind k, LLVMValueRef *vals) {
  LLVMBasicBlockRef st = new_block(L, "st"), join = new_block(L, "st.end");
  LLVMBuildCondBr(L->b, pred, st, join);
  LLVMPositionBuilderAtEnd(L->b, st);
  store_vector(L, p, vec, k, vals);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, join);
}

static LLVMValueRef and_all(Lower *L, LLVMValueRef *m, int n) {
  LLVMValueRef a = m[0];
  for (int i = 1; i < n; i++) a = LLVMBuildAnd(L->b, a, m[i], "");
  return a;
}

/* One vector group of a masked load whose mask varies inside the group:
 * a full vector when every lane is in bounds, elements otherwise. */
static void split_load(Lower *L, LLVMValueRef *ptrs, LLVMValueRef *mask, LLVMValueRef *other, int vec, ScalarKind k,
                       LLVMValueRef *out) {
  LLVMBasicBlockRef fast = new_block(L, "ld.full"), slow = new_block(L, "ld.part"), join = new_block(L, "ld.join");
  LLVMBuildCondBr(L->b, and_all(L, mask, vec), fast, slow);
  LLVMPositionBuilderAtEnd(L->b, fast);
  LLVMValueRef a[16], b[16];
  load_vector(L, ptrs[0], vec, k, a);
  LLVMBasicBlockRef fast_end = LLVMGetInsertBlock(L->b);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, slow);
  for (int i = 0; i < vec; i++) guarded_load(L, mask[i], ptrs[i], 1, k, &other[i], &b[i]);
  LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(L->b);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, join);
  merge_values(L, vec, k, a, fast_end, b, slow_end, out);
}

static void split_store(Lower *L, LLVMValueRef *ptrs, LLVMValueRef *mask, LLVMValueRef *vals, int vec, ScalarKind k) {
  LLVMBasicBlockRef fast = new_block(L, "st.full"), slow = new_block(L, "st.part"), join = new_block(L, "st.join");
  LLVMBuildCondBr(L->b, and_all(L, mask, vec), fast, slow);
  LLVMPositionBuilderAtEnd(L->b, fast);
  store_vector(L, ptrs[0], vec, k, vals);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, slow);
  for (int i = 0; i < vec; i++) guarded_store(L, mask[i], ptrs[i], 1, k, &vals[i]);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, join);
}

/* ---- operand tiles ---- */

static LTile *operand(Lower *L, const Value *v, const Layout *l) {
  return v->type.rank ? get_tile(L, v, l) : get_fixed(L, v);
}

static LLVMValueRef reg_of(const LTile *t, int r) { return t->regs[t->nregs == 1 ? 0 : r]; }

/* ---- load ---- */

LTile *lower_load(Lower *L, const Op *op, const Layout *l) {
  bool masked = op->noperands == 3;
  LTile *p = operand(L, op->operands[0], l);
  LTile *m = masked ? operand(L, op->operands[1], l) : NULL;
  LTile *o = masked ? operand(L, op->operands[2], l) : NULL;
  if (!p || (masked && (!m || !o))) return NULL;
  ScalarKind k = (ScalarKind)op->results[0].type.kind;
  bool uniform;
  int vec = vector_width(L, op, l, masked ? op->operands[1] : NULL, &uniform);
  LTile *t = lt_new(L, l);
  for (int g = 0; g < t->nregs; g += vec) {
    LLVMValueRef ptrs[16], mask[16], other[16];
    for (int i = 0; i < vec; i++) {
      ptrs[i] = reg_of(p, g + i);
      if (masked) mask[i] = reg_of(m, g + i), other[i] = reg_of(o, g + i);
    }
    if (!masked) load_vector(L, ptrs[0], vec, k, &t->regs[g]);
    else if (uniform) guarded_load(L, mask[0], ptrs[0], vec, k, other, &t->regs[g]);
    else split_load(L, ptrs, mask, other, vec, k, &t->regs[g]);
  }
  return t;
}

/* ---- store ---- */

void lower_store(Lower *L, const Op *op) {
  bool masked = op->noperands == 3;
  const Layout *l = op->operands[0]->type.rank ? layouts_of_store(L->layouts, op) : layouts_canonical(L->layouts, 0, NULL);
  LTile *p = operand(L, op->operands[0], l), *v = operand(L, op->operands[1], l);
  LTile *m = masked ? operand(L, op->operands[2], l) : NULL;
  if (!p || !v || (masked && !m)) return;
  ScalarKind k = (ScalarKind)op->operands[1]->type.kind;
  bool uniform;
  int vec = vector_width(L, op, l, masked ? op->operands[2] : NULL, &uniform);
  ThreadInfo *ti = thread_info(L, l);
  bool replicated = layout_lane_replication(l) || layout_warp_replication(l);
  int nregs = layout_regs(l);
  for (int g = 0; g < nregs; g += vec) {
    LLVMValueRef ptrs[16], mask[16], vals[16];
    for (int i = 0; i < vec; i++) {
      ptrs[i] = reg_of(p, g + i);
      vals[i] = reg_of(v, g + i);
      if (masked) {
        mask[i] = reg_of(m, g + i);
        if (replicated) mask[i] = LLVMBuildAnd(L->b, mask[i], ti->owner, "");
      }
    }
    if (!masked && !replicated) store_vector(L, ptrs[0], vec, k, vals);
    else if (!masked) guarded_store(L, ti->owner, ptrs[0], vec, k, vals);
    else if (uniform) guarded_store(L, mask[0], ptrs[0], vec, k, vals);
    else split_store(L, ptrs, mask, vals, vec, k);
  }
}

/* ---- atomics ---- */

static bool atomic_binop(OpKind kind, ScalarKind k, LLVMAtomicRMWBinOp *out) {
  bool fl = scalar_is_float(k), u = is_unsigned_kind(k);
  switch (kind) {
  case OP_ATOMIC_ADD: *out = fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; return true;
  case OP_ATOMIC_MAX: *out = fl ? LLVMAtomicRMWBinOpFMax : u ? LLVMAtomicRMWBinOpUMax : LLVMAtomicRMWBinOpMax; return true;
  case OP_ATOMIC_MIN: *out = fl ? LLVMAtomicRMWBinOpFMin : u ? LLVMAtomicRMWBinOpUMin : LLVMAtomicRMWBinOpMin; return true;
  case OP_ATOMIC_AND: *out = LLVMAtomicRMWBinOpAnd; return true;
  case OP_ATOMIC_OR: *out = LLVMAtomicRMWBinOpOr; return true;
  case OP_ATOMIC_XOR: *out = LLVMAtomicRMWBinOpXor; return true;
  case OP_ATOMIC_XCHG: *out = LLVMAtomicRMWBinOpXchg; return true;
  default: return false;
  }
}

/* One element: old = atomic(p, v [, cmp]) when pred, else 0. */
static LLVMValueRef atomic_element(Lower *L, const Op *op, LLVMValueRef pred, LLVMValueRef p, LLVMValueRef v,
                                   LLVMValueRef cmp, ScalarKind k) {
  LLVMBasicBlockRef from = LLVMGetInsertBlock(L->b), run = new_block(L, "atom"), join = new_block(L, "atom.end");
  LLVMBuildCondBr(L->b, pred, run, join);
  LLVMPositionBuilderAtEnd(L->b, run);
  LLVMValueRef old;
  if (op->kind == OP_ATOMIC_CAS) {
    LLVMValueRef pair = LLVMBuildAtomicCmpXchg(L->b, p, cmp, v, LLVMAtomicOrderingMonotonic,
                                               LLVMAtomicOrderingMonotonic, 0);
    old = LLVMBuildExtractValue(L->b, pair, 0, "");
  } else {
    LLVMAtomicRMWBinOp bop;
    atomic_binop((OpKind)op->kind, k, &bop);
    old = LLVMBuildAtomicRMW(L->b, bop, p, v, LLVMAtomicOrderingMonotonic, 0);
  }
  LLVMBasicBlockRef run_end = LLVMGetInsertBlock(L->b);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, join);
  LLVMTypeRef t = llvm_elem_type(L, k);
  LLVMValueRef phi = LLVMBuildPhi(L->b, t, "");
  LLVMValueRef zero = scalar_is_float(k) ? LLVMConstReal(t, 0.0) : const_int(L, t, 0);
  LLVMValueRef vals[2] = {old, zero};
  LLVMBasicBlockRef bbs[2] = {run_end, from};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

/* Replicas did not run the atomic: give them the owner's result through
 * shared memory. */
static void share_with_replicas(Lower *L, LTile *t, ScalarKind k) {
  const Layout *l = t->layout;
  ThreadInfo *ti = thread_info(L, l);
  LLVMTypeRef mt = llvm_mem_type(L, k);
  unsigned eb = (unsigned)scalar_bytes(k);
  LLVMValueRef base = smem_ptr(L, const_i32(L, smem_need(L, (1u << layout_flat_bits(l)) * eb)));
  barrier(L);
  LLVMValueRef *addr = ARENA_ARRAY(&L->arena, LLVMValueRef, t->nregs);
  for (int r = 0; r < t->nregs; r++) {
    LLVMValueRef flat = flat_index(L, l, (uint32_t)r);
    addr[r] = LLVMBuildGEP2(L->b, mt, base, &flat, 1, "");
    LLVMValueRef one[1] = {t->regs[r]};
    guarded_store(L, ti->owner, addr[r], 1, k, one);
  }
  barrier(L);
  for (int r = 0; r < t->nregs; r++) load_vector(L, addr[r], 1, k, &t->regs[r]);
}

LTile *lower_atomic(Lower *L, const Op *op, const Layout *l) {
  bool is_cas = op->kind == OP_ATOMIC_CAS;
  int nvals = is_cas ? 2 : 1;
  bool masked = (int)op->noperands == 2 + nvals;
  LTile *p = operand(L, op->operands[0], l);
  LTile *a = operand(L, op->operands[1], l), *b = is_cas ? operand(L, op->operands[2], l) : NULL;
  LTile *m = masked ? operand(L, op->operands[1 + nvals], l) : NULL;
  if (!p || !a || (is_cas && !b) || (masked && !m)) return NULL;
  ScalarKind k = (ScalarKind)op->results[0].type.kind;
  LLVMAtomicRMWBinOp unused;
  if (!is_cas && !atomic_binop((OpKind)op->kind, k, &unused)) {
    lower_error(L, op, "unsupported atomic");
    return NULL;
  }
  ThreadInfo *ti = thread_info(L, l);
  bool replicated = layout_lane_replication(l) || layout_warp_replication(l);
  LTile *t = lt_new(L, l);
  for (int r = 0; r < t->nregs; r++) {
    LLVMValueRef pred = replicated ? ti->owner : LLVMConstInt(L->t_i1, 1, 0);
    if (masked) pred = LLVMBuildAnd(L->b, pred, reg_of(m, r), "");
    /* cas(ptr, cmp, value): the new value is operand 2. */
    LLVMValueRef v = is_cas ? reg_of(b, r) : reg_of(a, r), cmp = is_cas ? reg_of(a, r) : NULL;
    t->regs[r] = atomic_element(L, op, pred, reg_of(p, r), v, cmp, k);
  }
  if (replicated && use_count(L, &op->results[0]) > 0) share_with_replicas(L, t, k);
  return t;
}

/* The elected thread's TMA stores written to global memory and made
 * visible to the generic proxy. */
static void finish_tma_stores(Lower *L, void *unused) {
  (void)unused;
  llvm_asm(L, "cp.async.bulk.wait_group 0;", "~{memory}", L->t_void, NULL, 0, true);
  llvm_asm(L, "fence.proxy.async.global;", "~{memory}", L->t_void, NULL, 0, true);
}

/* fence(): every thread's memory operations before it are ordered, at GPU
 * scope, before every thread's after it. TMA stores (store_block) are
 * waited for first. Each thread fences its own accesses, the barrier
 * makes the others' its own (CTA scope), and the second fence carries
 * them to GPU scope for what follows (cumulativity): writes before the
 * fence, then an atomic by one thread, publish the writes to a program
 * that sees the atomic and then fences. */
void lower_fence(Lower *L) {
  if (ir_block_has(&L->f->body, OP_TMA_STORE)) guarded(L, is_elected(L), finish_tma_stores, NULL);
  llvm_asm(L, "fence.acq_rel.gpu;", "~{memory}", L->t_void, NULL, 0, true);
  barrier(L);
  llvm_asm(L, "fence.acq_rel.gpu;", "~{memory}", L->t_void, NULL, 0, true);
}
