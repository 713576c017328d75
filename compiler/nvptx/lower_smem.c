/* lower_smem.c - operations that move data between threads: layout
 * conversions, reductions and dot on FMA units.
 *
 *   conversion  registers only when the plan allows (layout.h), otherwise
 *               every thread writes its elements to shared memory at their
 *               flat index, a barrier, and every thread reads the elements
 *               of the new layout;
 *   reduction   within a thread's registers, then across lanes with
 *               butterfly shuffles, then across warps through shared
 *               memory; the result has the slice layout (every replica
 *               holds the reduced value);
 *   dot         (where no tensor-core form applies: f32, f64 and i8
 *               operands) both operands go to shared memory row-major;
 *               each thread walks k in order and accumulates with fused
 *               multiply-adds, which computes exactly what the interpreter
 *               does (each product exact, each accumulation rounded once,
 *               k ascending). bf16/f16 dots too small for wgmma go to
 *               lower_mma.c; the others became wgmma in schedule.c.
 * Every use of shared memory starts with a barrier, so the uses can share
 * one scratch buffer (sized to the largest).
 */
#include <string.h>

#include "lower_internal.h"

/* Rows and columns of the result one thread may hold in the FMA dot: its
 * operand registers per k step (rows + columns) must stay few. */
#define FMA_DOT_MAX_ROWS 64
#define FMA_DOT_MAX_COLS 256

static LLVMValueRef smem_addr(Lower *L, ScalarKind k, unsigned byte_base, LLVMValueRef index) {
  LLVMValueRef base = byte_base ? smem_ptr(L, const_i32(L, byte_base)) : L->smem;
  return LLVMBuildGEP2(L->b, llvm_mem_type(L, k), base, &index, 1, "");
}

static void smem_store(Lower *L, ScalarKind k, unsigned byte_base, LLVMValueRef index, LLVMValueRef v) {
  if (k == SK_I1) v = LLVMBuildZExt(L->b, v, L->t_i8, "");
  LLVMBuildStore(L->b, v, smem_addr(L, k, byte_base, index));
}

static LLVMValueRef smem_load(Lower *L, ScalarKind k, unsigned byte_base, LLVMValueRef index) {
  LLVMValueRef v = LLVMBuildLoad2(L->b, llvm_mem_type(L, k), smem_addr(L, k, byte_base, index), "");
  return k == SK_I1 ? LLVMBuildTrunc(L->b, v, L->t_i1, "") : v;
}

/* ---- conversions ---- */

LTile *convert_tile(Lower *L, const LTile *src, const Layout *dst, ScalarKind k) {
  ConvertPlan *plan = ARENA_NEW(&L->arena, ConvertPlan);
  layout_convert_plan(src->layout, dst, plan);
  LTile *t = lt_new(L, dst);
  if (plan->kind == CONVERT_NONE) {
    memcpy(t->regs, src->regs, sizeof(LLVMValueRef) * (size_t)t->nregs);
    return t;
  }
  if (plan->kind == CONVERT_REGISTERS && plan->ndst_regs == t->nregs) {
    for (int r = 0; r < t->nregs; r++) t->regs[r] = src->regs[plan->src_reg[r]];
    return t;
  }
  /* Through shared memory (also for lane-only moves, for now), in the
   * scratch layout with the fewest bank conflicts (layout/exchange.h). */
  LBuf xb = {.here = true};
  if (!smem_exchange_layout(src->layout, dst, scalar_bytes(k), true, !L->opt->added_addresses, &xb.layout)) {
    lower_error(L, L->cur_op, "internal: conversion between layouts of different sizes");
    return NULL;
  }
  xb.ptr = smem_ptr(L, const_i32(L, smem_need(L, xb.layout.bytes)));
  barrier(L);
  lower_write_smem(L, &xb, src, k);
  barrier(L);
  return lower_read_smem(L, &xb, dst, k);
}

/* ---- shuffles ---- */

static LLVMValueRef shfl_i32(Lower *L, LLVMValueRef v, int lane_mask) {
  LLVMValueRef args[4] = {const_i32(L, (int32_t)FULL_WARP_MASK), v, const_i32(L, lane_mask), const_i32(L, SHFL_CLAMP)};
  return call_intrinsic(L, "llvm.nvvm.shfl.sync.bfly.i32", L->t_i32, args, 4);
}

/* Butterfly shuffle of any scalar: through one or two 32-bit moves. */
static LLVMValueRef shfl_xor(Lower *L, LLVMValueRef v, int lane_mask) {
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeKind tk = LLVMGetTypeKind(t);
  if (tk == LLVMPointerTypeKind) {
    LLVMValueRef i = shfl_xor(L, LLVMBuildPtrToInt(L->b, v, L->t_i64, ""), lane_mask);
    return LLVMBuildIntToPtr(L->b, i, t, "");
  }
  unsigned bits = tk == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t)
                  : tk == LLVMDoubleTypeKind ? 64 : tk == LLVMFloatTypeKind ? 32 : 16;
  LLVMTypeRef it = LLVMIntTypeInContext(L->ctx, bits);
  LLVMValueRef i = tk == LLVMIntegerTypeKind ? v : LLVMBuildBitCast(L->b, v, it, "");
  LLVMValueRef r;
  if (bits == 64) {
    LLVMValueRef lo = LLVMBuildTrunc(L->b, i, L->t_i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(L->b, LLVMBuildLShr(L->b, i, const_int(L, L->t_i64, 32), ""), L->t_i32, "");
    lo = LLVMBuildZExt(L->b, shfl_i32(L, lo, lane_mask), L->t_i64, "");
    hi = LLVMBuildZExt(L->b, shfl_i32(L, hi, lane_mask), L->t_i64, "");
    r = LLVMBuildOr(L->b, lo, LLVMBuildShl(L->b, hi, const_int(L, L->t_i64, 32), ""), "");
  } else if (bits == 32) {
    r = shfl_i32(L, i, lane_mask);
  } else {
    r = LLVMBuildTrunc(L->b, shfl_i32(L, LLVMBuildZExt(L->b, i, L->t_i32, ""), lane_mask), it, "");
  }
  return tk == LLVMIntegerTypeKind ? r : LLVMBuildBitCast(L->b, r, t, "");
}

/* ---- reductions ---- */

typedef struct RedVal {
  LLVMValueRef v, idx; /* idx: i32 position along the axis (arg reductions) */
} RedVal;

/* Compares work on f32 copies of narrow floats (fp8 values are bytes in
 * registers, and NVPTX compares no f16/bf16 on its own). */
static LLVMValueRef is_nan(Lower *L, LLVMValueRef v, ScalarKind k) {
  if (!scalar_is_float(k)) return LLVMConstInt(L->t_i1, 0, 0);
  v = lower_widen_float(L, v, k);
  return LLVMBuildFCmp(L->b, LLVMRealUNO, v, v, "");
}

static RedVal combine(Lower *L, OpKind kind, RedVal a, RedVal b, ScalarKind k) {
  switch (kind) {
  case OP_REDUCE_SUM: return (RedVal){lower_binary_scalar(L, OP_ADD, a.v, b.v, k), NULL};
  case OP_REDUCE_MAX: return (RedVal){lower_binary_scalar(L, OP_MAX, a.v, b.v, k), NULL};
  case OP_REDUCE_MIN: return (RedVal){lower_binary_scalar(L, OP_MIN, a.v, b.v, k), NULL};
  default: break;
  }
  /* argmax/argmin: the better value wins, ties go to the lower index, NaNs
   * lose to numbers (and between NaNs the lower index wins). */
  LLVMBuilderRef B = L->b;
  bool u = is_unsigned_kind(k), fl = scalar_is_float(k);
  bool want_max = kind == OP_ARGMAX;
  LLVMValueRef better, equal;
  if (fl) {
    LLVMValueRef wa = lower_widen_float(L, a.v, k), wb = lower_widen_float(L, b.v, k);
    better = LLVMBuildFCmp(B, want_max ? LLVMRealOGT : LLVMRealOLT, wb, wa, "");
    equal = LLVMBuildFCmp(B, LLVMRealOEQ, wb, wa, "");
  } else {
    better = LLVMBuildICmp(B, want_max ? (u ? LLVMIntUGT : LLVMIntSGT) : (u ? LLVMIntULT : LLVMIntSLT), b.v, a.v, "");
    equal = LLVMBuildICmp(B, LLVMIntEQ, b.v, a.v, "");
  }
  LLVMValueRef lower_idx = LLVMBuildICmp(B, LLVMIntSLT, b.idx, a.idx, "");
  if (fl) {
    /* +0 counts as greater than -0, as in maximum(): between equal values
     * of different signs the sign decides, not the index. */
    LLVMTypeRef it = LLVMIntTypeInContext(L->ctx, (unsigned)scalar_bits(k));
    LLVMValueRef sa = LLVMBuildICmp(B, LLVMIntSLT, LLVMBuildBitCast(B, a.v, it, ""), const_int(L, it, 0), "");
    LLVMValueRef sb = LLVMBuildICmp(B, LLVMIntSLT, LLVMBuildBitCast(B, b.v, it, ""), const_int(L, it, 0), "");
    LLVMValueRef signs_differ = LLVMBuildXor(B, sa, sb, "");
    LLVMValueRef b_wins_sign = want_max ? sa : sb; /* a is -0 (max) or b is -0 (min) */
    better = LLVMBuildOr(B, better, LLVMBuildAnd(B, LLVMBuildAnd(B, equal, signs_differ, ""), b_wins_sign, ""), "");
    equal = LLVMBuildAnd(B, equal, LLVMBuildNot(B, signs_differ, ""), "");
  }
  LLVMValueRef an = is_nan(L, a.v, k), bn = is_nan(L, b.v, k);
  LLVMValueRef take = LLVMBuildOr(B, better, LLVMBuildAnd(B, equal, lower_idx, ""), "");
  take = LLVMBuildOr(B, LLVMBuildAnd(B, LLVMBuildNot(B, bn, ""), LLVMBuildOr(B, an, take, ""), ""),
                     LLVMBuildAnd(B, LLVMBuildAnd(B, an, bn, ""), lower_idx, ""), "");
  return (RedVal){LLVMBuildSelect(B, take, b.v, a.v, ""), LLVMBuildSelect(B, take, b.idx, a.idx, "")};
}

/* Compresses the bits of x selected by mask into the low bits. */
static uint32_t compress_bits(uint32_t x, uint32_t mask) {
  uint32_t out = 0;
  for (int i = 0, o = 0; i < 32; i++)
    if (mask & (1u << i)) out |= ((x >> i) & 1u) << o++;
  return out;
}

/* Runtime compress of the warp bits selected by mask. */
static LLVMValueRef compress_warp(Lower *L, uint32_t mask) {
  LLVMValueRef out = const_i32(L, 0);
  for (int i = 0, o = 0; i < 32; i++) {
    if (!(mask & (1u << i))) continue;
    LLVMValueRef bit = LLVMBuildAnd(L->b, LLVMBuildLShr(L->b, L->warp, const_i32(L, i), ""), const_i32(L, 1), "");
    out = LLVMBuildOr(L->b, out, LLVMBuildShl(L->b, bit, const_i32(L, o++), ""), "");
  }
  return out;
}

/* Partial results of several warps combined through shared memory. */
static void reduce_warps(Lower *L, OpKind kind, const Layout *X, const Layout *S, RedVal *acc, int nacc, ScalarKind k,
                         uint32_t axis_mask, bool is_arg) {
  uint32_t wmask = 0;
  for (int j = 0; j < X->nwarp; j++)
    if (X->warp[j] & axis_mask) wmask |= 1u << j;
  if (!wmask) return;
  unsigned nw = 1u << __builtin_popcount(wmask);
  unsigned numel = 1u << layout_flat_bits(S);
  unsigned vbytes = (numel * nw * (unsigned)scalar_bytes(k) + 15) & ~15u;
  unsigned base = smem_need(L, vbytes + (is_arg ? numel * nw * 4 : 0));
  LLVMValueRef widx = compress_warp(L, wmask);
  barrier(L);
  LLVMValueRef *slot = ARENA_ARRAY(&L->arena, LLVMValueRef, nacc);
  for (int s = 0; s < nacc; s++) {
    slot[s] = LLVMBuildMul(L->b, flat_index(L, S, (uint32_t)s), const_i32(L, (int32_t)nw), "");
    LLVMValueRef at = LLVMBuildAdd(L->b, slot[s], widx, "");
    smem_store(L, k, base, at, acc[s].v);
    if (is_arg) smem_store(L, SK_I32, base + vbytes, at, acc[s].idx);
  }
  barrier(L);
  for (int s = 0; s < nacc; s++) {
    RedVal r = {NULL, NULL};
    for (unsigned w = 0; w < nw; w++) {
      LLVMValueRef at = LLVMBuildAdd(L->b, slot[s], const_i32(L, (int32_t)w), "");
      RedVal x = {smem_load(L, k, base, at), is_arg ? smem_load(L, SK_I32, base + vbytes, at) : NULL};
      r = w == 0 ? x : combine(L, kind, r, x, k);
    }
    acc[s] = r;
  }
}

LTile *lower_reduce(Lower *L, const Op *op, const Layout *l) {
  const Value *src = op->operands[0];
  LayoutInfo *info = layouts_get(L->layouts, src);
  const Layout *X = info && info->fixed ? info->fixed : layouts_canonical(L->layouts, src->type.rank, src->type.shape);
  LTile *in = get_tile(L, src, X);
  if (!in) return NULL;
  int axis = (int)op->attr[0];
  OpKind kind = (OpKind)op->kind;
  bool is_arg = kind == OP_ARGMAX || kind == OP_ARGMIN;
  ScalarKind k = (ScalarKind)src->type.kind;
  uint32_t axis_mask = layout_dim_mask(X, axis);
  uint32_t keep = 0; /* register bits outside the axis */
  for (int i = 0; i < X->nreg; i++)
    if (!(X->reg[i] & axis_mask)) keep |= 1u << i;
  int nacc = 1 << __builtin_popcount(keep);
  if (nacc != layout_regs(l)) {
    lower_error(L, op, "internal: reduction layout mismatch");
    return NULL;
  }
  RedVal *acc = ARENA_ARRAY(&L->arena, RedVal, nacc);
  /* 1. registers of the thread: each slot's registers (in register order)
   * combined pairwise, neighbours first, so that the chain of dependent
   * operations is log2(n) long, not n */
  int per = in->nregs / nacc;
  RedVal *vals = ARENA_ARRAY(&L->arena, RedVal, (size_t)in->nregs);
  int *fill = ARENA_ARRAY(&L->arena, int, nacc);
  for (int r = 0; r < in->nregs; r++) {
    int s = (int)compress_bits((uint32_t)r, keep);
    vals[s * per + fill[s]++] =
        (RedVal){in->regs[r], is_arg ? coord_of(L, X, flat_index(L, X, (uint32_t)r), axis) : NULL};
  }
  for (int s = 0; s < nacc; s++) {
    RedVal *v = vals + s * per;
    for (int n = per; n > 1; n = (n + 1) / 2) {
      for (int i = 0; i + 1 < n; i += 2) v[i / 2] = combine(L, kind, v[i], v[i + 1], k);
      if (n & 1) v[n / 2] = v[n - 1];
    }
    acc[s] = v[0];
  }
  /* 2. lanes of the warp */
  for (int j = 0; j < X->nlane; j++) {
    if (!(X->lane[j] & axis_mask)) continue;
    for (int s = 0; s < nacc; s++) {
      RedVal o = {shfl_xor(L, acc[s].v, 1 << j), is_arg ? shfl_xor(L, acc[s].idx, 1 << j) : NULL};
      acc[s] = combine(L, kind, acc[s], o, k);
    }
  }
  /* 3. warps of the block */
  reduce_warps(L, kind, X, l, acc, nacc, k, axis_mask, is_arg);
  LTile *t = lt_new(L, l);
  for (int s = 0; s < nacc; s++) t->regs[s] = is_arg ? acc[s].idx : acc[s].v;
  return t;
}

/* ---- prefix sums ---- */

/* cumsum along an axis of n elements: a Hillis-Steele scan through shared
 * memory, log2(n) rounds; in round d every element at position >= d adds
 * the one d before it (as of the previous round), the grouping the
 * interpreter uses. Rounds alternate between two buffers, so one barrier
 * per round suffices: a thread storing round d + 1 has passed round d's
 * barrier, after which nobody reads round d - 1's buffer. Elements held by
 * several threads are stored with the same value by each. */
LTile *lower_cumsum(Lower *L, const Op *op, const Layout *l) {
  const Value *src = op->operands[0];
  LTile *in = get_tile(L, src, l);
  if (!in) return NULL;
  ScalarKind k = (ScalarKind)src->type.kind;
  int axis = (int)op->attr[0], n = src->type.shape[axis];
  int32_t stride = 1;
  for (int d = axis + 1; d < src->type.rank; d++) stride *= src->type.shape[d];
  LTile *t = lt_new(L, l);
  memcpy(t->regs, in->regs, sizeof(LLVMValueRef) * (size_t)t->nregs);
  if (n == 1) return t;
  unsigned bytes = ((unsigned)type_numel(src->type) * (unsigned)scalar_bytes(k) + 15) & ~15u;
  unsigned base = smem_need(L, 2 * bytes);
  LLVMValueRef *flat = ARENA_ARRAY(&L->arena, LLVMValueRef, (size_t)t->nregs);
  LLVMValueRef *pos = ARENA_ARRAY(&L->arena, LLVMValueRef, (size_t)t->nregs);
  for (int r = 0; r < t->nregs; r++) {
    flat[r] = flat_index(L, l, (uint32_t)r);
    pos[r] = coord_of(L, l, flat[r], axis);
  }
  barrier(L);
  for (int d = 1, buf = 0; d < n; d *= 2, buf ^= 1) {
    unsigned at = base + (unsigned)buf * bytes;
    for (int r = 0; r < t->nregs; r++) smem_store(L, k, at, flat[r], t->regs[r]);
    barrier(L);
    for (int r = 0; r < t->nregs; r++) {
      LLVMValueRef has = LLVMBuildICmp(L->b, LLVMIntSGE, pos[r], const_i32(L, d), "");
      LLVMValueRef from = LLVMBuildSub(L->b, flat[r], const_i32(L, d * stride), "");
      LLVMValueRef prev = smem_load(L, k, at, LLVMBuildSelect(L->b, has, from, flat[r], ""));
      LLVMValueRef sum = lower_binary_scalar(L, OP_ADD, prev, t->regs[r], k);
      t->regs[r] = LLVMBuildSelect(L->b, has, sum, t->regs[r], "");
    }
  }
  return t;
}

/* ---- dot ---- */

/* Distinct values of `mask`-selected register flat bits, and for each
 * register the index of its value in that list. */
static int distinct_keys(const Layout *l, uint32_t mask, uint32_t *keys, int cap, int *which) {
  int n = 0;
  for (int r = 0; r < layout_regs(l); r++) {
    uint32_t key = layout_apply(l, (uint32_t)r, 0, 0) & mask;
    int k = 0;
    while (k < n && keys[k] != key) k++;
    if (k == n) {
      if (n == cap) return cap + 1; /* too many: the caller reports it */
      keys[n++] = key;
    }
    which[r] = k;
  }
  return n;
}

static void tile_to_smem(Lower *L, const LTile *t, ScalarKind k, unsigned base) {
  for (int r = 0; r < t->nregs; r++) smem_store(L, k, base, flat_index(L, t->layout, (uint32_t)r), t->regs[r]);
}

static LLVMValueRef dot_operand(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind acc) {
  return cast_scalar(L, v, from, acc);
}

LTile *lower_dot(Lower *L, const Op *op, const Layout *l) {
  const Value *a = op->operands[0], *b = op->operands[1];
  if (a->type.rank != 2) {
    lower_error(L, op, "batched dot (rank 3) is not supported yet");
    return NULL;
  }
  if (dot_engine(op, L->num_warps) == DOT_MMA) return lower_mma_dot(L, op, l);
  LayoutInfo *ia = layouts_get(L->layouts, a), *ib = layouts_get(L->layouts, b);
  const Layout *la = ia && ia->fixed ? ia->fixed : layouts_canonical(L->layouts, 2, a->type.shape);
  const Layout *lb = ib && ib->fixed ? ib->fixed : layouts_canonical(L->layouts, 2, b->type.shape);
  LTile *at = get_tile(L, a, la), *bt = get_tile(L, b, lb), *acc = get_tile(L, op->operands[2], l);
  if (!at || !bt || !acc) return NULL;
  ScalarKind ka = (ScalarKind)a->type.kind, kb = (ScalarKind)b->type.kind, kc = (ScalarKind)op->results[0].type.kind;
  int M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
  unsigned a_bytes = ((unsigned)(M * K * scalar_bytes(ka)) + 15) & ~15u;
  unsigned base = smem_need(L, a_bytes + (unsigned)(K * N * scalar_bytes(kb)));
  barrier(L);
  tile_to_smem(L, at, ka, base);
  tile_to_smem(L, bt, kb, base + a_bytes);
  barrier(L);

  int nregs = acc->nregs;
  uint32_t rows[FMA_DOT_MAX_ROWS], cols[FMA_DOT_MAX_COLS];
  int *row_of = ARENA_ARRAY(&L->arena, int, nregs), *col_of = ARENA_ARRAY(&L->arena, int, nregs);
  int nrows = distinct_keys(l, layout_dim_mask(l, 0), rows, FMA_DOT_MAX_ROWS, row_of);
  int ncols = distinct_keys(l, layout_dim_mask(l, 1), cols, FMA_DOT_MAX_COLS, col_of);
  if (nrows > FMA_DOT_MAX_ROWS || ncols > FMA_DOT_MAX_COLS) {
    lower_error(L, op, "dot tile too large for one thread (more than %d rows or %d columns of the result; use more "
                "warps or a smaller tile)", FMA_DOT_MAX_ROWS, FMA_DOT_MAX_COLS);
    return NULL;
  }
  /* Row and column coordinates of this thread's registers. */
  LLVMValueRef *row_base = ARENA_ARRAY(&L->arena, LLVMValueRef, nrows), *col_idx = ARENA_ARRAY(&L->arena, LLVMValueRef, ncols);
  for (int r = 0; r < nregs; r++) {
    LLVMValueRef flat = NULL;
    if (!row_base[row_of[r]] || !col_idx[col_of[r]]) flat = flat_index(L, l, (uint32_t)r);
    if (!row_base[row_of[r]])
      row_base[row_of[r]] = LLVMBuildMul(L->b, coord_of(L, l, flat, 0), const_i32(L, K), "");
    if (!col_idx[col_of[r]]) col_idx[col_of[r]] = coord_of(L, l, flat, 1);
  }
  /* for (kk = 0; kk < K; kk++) acc[r] = fma(A[i_r][kk], B[kk][j_r], acc[r]) */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b), loop = new_block(L, "dot.k"), done = new_block(L, "dot.end");
  LLVMBuildBr(L->b, loop);
  LLVMPositionBuilderAtEnd(L->b, loop);
  LLVMValueRef kk = LLVMBuildPhi(L->b, L->t_i32, "k");
  LLVMAddIncoming(kk, (LLVMValueRef[]){const_i32(L, 0)}, &pre, 1);
  LLVMTypeRef ct = llvm_elem_type(L, kc);
  LLVMValueRef *phis = ARENA_ARRAY(&L->arena, LLVMValueRef, nregs);
  for (int r = 0; r < nregs; r++) {
    phis[r] = LLVMBuildPhi(L->b, ct, "");
    LLVMAddIncoming(phis[r], &acc->regs[r], &pre, 1);
  }
  LLVMValueRef *av = ARENA_ARRAY(&L->arena, LLVMValueRef, nrows), *bv = ARENA_ARRAY(&L->arena, LLVMValueRef, ncols);
  for (int i = 0; i < nrows; i++)
    av[i] = dot_operand(L, smem_load(L, ka, base, LLVMBuildAdd(L->b, row_base[i], kk, "")), ka, kc);
  LLVMValueRef brow = LLVMBuildMul(L->b, kk, const_i32(L, N), "");
  for (int j = 0; j < ncols; j++)
    bv[j] = dot_operand(L, smem_load(L, kb, base + a_bytes, LLVMBuildAdd(L->b, brow, col_idx[j], "")), kb, kc);
  LLVMValueRef *next = ARENA_ARRAY(&L->arena, LLVMValueRef, nregs);
  for (int r = 0; r < nregs; r++) {
    LLVMValueRef x = av[row_of[r]], y = bv[col_of[r]];
    if (scalar_is_float(kc)) {
      LLVMValueRef args[3] = {x, y, phis[r]};
      next[r] = call_intrinsic(L, kc == SK_F64 ? "llvm.fma.f64" : "llvm.fma.f32", ct, args, 3);
    } else {
      next[r] = LLVMBuildAdd(L->b, phis[r], LLVMBuildMul(L->b, x, y, ""), "");
    }
  }
  LLVMValueRef kn = LLVMBuildAdd(L->b, kk, const_i32(L, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(L->b);
  LLVMAddIncoming(kk, &kn, &latch, 1);
  for (int r = 0; r < nregs; r++) LLVMAddIncoming(phis[r], &next[r], &latch, 1);
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntSLT, kn, const_i32(L, K), ""), loop, done);
  LLVMPositionBuilderAtEnd(L->b, done);
  LTile *t = lt_new(L, l);
  memcpy(t->regs, next, sizeof(LLVMValueRef) * (size_t)nregs);
  return t;
}
