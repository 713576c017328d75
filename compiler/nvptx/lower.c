/* lower.c - tile IR to per-thread LLVM IR: the kernel function and its
 * ABI, value bookkeeping (tiles per layout, conversions), structured
 * control flow (for, if, while) and the dispatch of ops to lower_elem.c,
 * lower_mem.c and lower_smem.c. See lower.h for the model.
 *
 * The kernel is one LLVM function with the PTX kernel calling convention.
 * Its entry block computes per-thread constants (thread id, lane, warp, and
 * each layout's thread part of the flat index); the body follows it. Every
 * rank-0 value is uniform (all threads hold the same value), so branches on
 * scalar conditions never diverge and barriers inside them are safe.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../layout/mma.h"
#include "lower_internal.h"

/* LLVM's calling convention number for PTX kernels. */
#define PTX_KERNEL_CC 71
/* A CUtensorMap parameter: 128 bytes, 64-byte aligned (CUDA's rule). */
#define TENSOR_MAP_BYTES 128
#define TENSOR_MAP_ALIGN 64
/* Address spaces on NVPTX. */
#define ADDRSPACE_GLOBAL 1
#define ADDRSPACE_SHARED 3

static void lower_block(Lower *L, const Block *b);

/* ---- small helpers ---- */

void lower_error(Lower *L, const Op *op, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!L->failed) diag_error(L->diags, op ? op->loc : L->f->loc, "GPU back end: %s", msg);
  L->failed = true;
}

LTile *lt_new(Lower *L, const Layout *layout) {
  LTile *t = ARENA_NEW(&L->arena, LTile);
  t->layout = layout;
  t->nregs = layout_regs(layout);
  t->regs = ARENA_ARRAY(&L->arena, LLVMValueRef, t->nregs);
  return t;
}

LTile *lt_copy(Lower *L, const LTile *t) {
  LTile *c = lt_new(L, t->layout);
  memcpy(c->regs, t->regs, sizeof(LLVMValueRef) * (size_t)c->nregs);
  return c;
}

LLVMValueRef const_int(Lower *L, LLVMTypeRef t, int64_t v) { (void)L; return LLVMConstInt(t, (unsigned long long)v, 1); }
LLVMValueRef const_i32(Lower *L, int64_t v) { return const_int(L, L->t_i32, v); }

LLVMTypeRef llvm_elem_type(Lower *L, ScalarKind k) {
  switch (k) {
  case SK_I1: return L->t_i1;
  case SK_I8: case SK_U8: case SK_F8E4M3: case SK_F8E5M2: return L->t_i8;
  case SK_I16: case SK_U16: return L->t_i16;
  case SK_I32: case SK_U32: return L->t_i32;
  case SK_I64: case SK_U64: return L->t_i64;
  case SK_F16: return L->t_f16;
  case SK_BF16: return L->t_bf16;
  case SK_F32: return L->t_f32;
  case SK_F64: return L->t_f64;
  case SK_PTR: return L->t_ptr;
  default: return L->t_i32;
  }
}

LLVMTypeRef llvm_mem_type(Lower *L, ScalarKind k) { return k == SK_I1 ? L->t_i8 : llvm_elem_type(L, k); }

LLVMValueRef call_intrinsic(Lower *L, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int nargs) {
  LLVMTypeRef params[8];
  for (int i = 0; i < nargs; i++) params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(ret, params, (unsigned)nargs, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(L->mod, name);
  if (!fn) fn = LLVMAddFunction(L->mod, name, fty);
  return LLVMBuildCall2(L->b, fty, fn, args, (unsigned)nargs, "");
}

/* Whether the consumer warpgroups take turns (wait_turn, pass_turn): split
 * cooperative consumers, more than one. */
static bool takes_turns(Lower *L) {
  return L->role == ROLE_CONSUMER && L->k->roles.consumers > 1 && !L->k->roles.pingpong;
}

LLVMValueRef warpgroup_of(Lower *L, LLVMValueRef tid) {
  return LLVMBuildUDiv(L->b, tid, const_i32(L, 32 * WARPGROUP_WARPS), "warpgroup");
}

LLVMValueRef warpgroup_barrier_id(Lower *L) {
  return LLVMBuildAdd(L->b, warpgroup_of(L, L->tid_raw), const_i32(L, BARRIER_VOTE_FIRST), "wg_barrier");
}

bool warpgroup_barriers_fit(Lower *L) {
  return L->k->roles.block_warps <= BARRIER_VOTE_WARPGROUPS * WARPGROUP_WARPS;
}

void barrier(Lower *L) {
  if (L->role == ROLE_NONE) {
    call_intrinsic(L, "llvm.nvvm.barrier0", L->t_void, NULL, 0);
    return;
  }
  if (L->role == ROLE_PRODUCER) {
    lower_error(L, L->cur_op, "internal: a barrier in the producer warps' code");
    return;
  }
  /* the consumer warpgroups only: the producers never arrive; ping-pong
   * warpgroups each on a barrier of their own. A warpgroup holding the
   * turn would wait here for one waiting for the turn. */
  if (L->turn_held && takes_turns(L)) {
    lower_error(L, L->cur_op,
                "this op needs a barrier of all consumer warpgroups (a layout conversion, a reduction across warps or "
                "a store through shared memory) while its warpgroup holds the turn taken at %d:%d, which the others "
                "wait for: move it out of the turn",
                L->turn_held->loc.line, L->turn_held->loc.col);
    return;
  }
  LLVMValueRef id = const_i32(L, BARRIER_CONSUMERS);
  if (L->k->roles.pingpong) {
    LLVMValueRef wg = warpgroup_of(L, L->tid_raw);
    id = LLVMBuildAdd(L->b, LLVMBuildSub(L->b, wg, const_i32(L, L->k->roles.producers), ""),
                      const_i32(L, BARRIER_PINGPONG_FIRST), "barrier_id");
  }
  LLVMValueRef args[2] = {id, const_i32(L, 32 * L->num_warps)};
  call_intrinsic(L, "llvm.nvvm.barrier.sync.cnt", L->t_void, args, 2);
}

/* ---- staging barriers of a wgmma's A operand ----
 *
 * barrier {operand = 1} sits before or after the store of a product's A
 * operand into shared memory (schedule.c). When each cooperative consumer
 * warpgroup stores exactly the rows its own wgmma reads (one instruction
 * row block of 64 rows per warpgroup, and the stored tile's layout giving
 * warpgroup g rows 64g .. 64g + 63), the barrier need order that
 * warpgroup only: its own named barrier (the vote's id, 10 + warpgroup),
 * so that the consumers do not wait for each other there and may take
 * turns across it. Otherwise a barrier of all consumers. */

/* The wgmma after a staging barrier, and the store of its A operand. */
static bool staging_ops(const Op *op, const Op **store, const Op **mma) {
  *mma = NULL;
  for (const Op *o = op->next; o && !*mma; o = o->next) {
    if (o->kind == OP_WGMMA) *mma = o;
    else if (o->kind != OP_SMEM_STORE && o->kind != OP_FENCE_ASYNC && o->kind != OP_BARRIER) return false;
  }
  if (!*mma || (*mma)->attr[0] || (*mma)->operands[0]->type.kind != SK_SMEM) return false;
  for (const Op *o = (*mma)->prev; o; o = o->prev)
    if (o->kind == OP_SMEM_STORE && o->operands[0] == (*mma)->operands[0]) {
      *store = o;
      return true;
    }
  return false;
}

/* Whether every base of l other than the warpgroup's warp bits stays in
 * the first `rows` rows of a tile `cols` wide, and warp bit 2 + i moves
 * rows << i. */
static bool rows_by_warpgroup(const Layout *l, int cols, int rows, int wg_bits) {
  uint32_t limit = (uint32_t)rows * (uint32_t)cols;
  if (l->nwarp != 2 + wg_bits) return false;
  for (int i = 0; i < l->nreg; i++)
    if (l->reg[i] >= limit) return false;
  for (int i = 0; i < l->nlane; i++)
    if (l->lane[i] >= limit) return false;
  for (int i = 0; i < l->nwarp; i++)
    if (i < 2 ? l->warp[i] >= limit : l->warp[i] != limit << (i - 2)) return false;
  return true;
}

static bool staging_is_warpgroup_local(Lower *L, const Op *op) {
  const WarpRoles *r = &L->k->roles;
  if (!op->attr[0] || L->role != ROLE_CONSUMER || r->pingpong || r->consumers < 2 || !warpgroup_barriers_fit(L))
    return false;
  const Op *store, *mma;
  if (!staging_ops(op, &store, &mma)) return false;
  const Value *v = store->operands[1], *acc = mma->operands[2];
  if (v->type.rank != 2 || store->operands[0]->type.shape[1] != v->type.shape[1]) return false;
  WgmmaShape ws;
  if (!wgmma_shape(acc->type.shape[0], acc->type.shape[1], v->type.shape[1], L->num_warps, &ws) || ws.m_rep != 1 ||
      ws.gm != r->consumers || (ws.gm & (ws.gm - 1)))
    return false;
  LTile *t = get_fixed(L, v);
  int wg_bits = 0;
  while ((1 << wg_bits) < ws.gm) wg_bits++;
  return t && rows_by_warpgroup(t->layout, v->type.shape[1], WGMMA_M, wg_bits);
}

/* A barrier of the thread's own warpgroup (128 threads). */
static void warpgroup_barrier(Lower *L) {
  LLVMValueRef args[2] = {warpgroup_barrier_id(L), const_i32(L, 32 * WARPGROUP_WARPS)};
  call_intrinsic(L, "llvm.nvvm.barrier.sync.cnt", L->t_void, args, 2);
}

LLVMBasicBlockRef new_block(Lower *L, const char *name) { return LLVMAppendBasicBlockInContext(L->ctx, L->fn, name); }

unsigned smem_need(Lower *L, unsigned bytes) {
  if (L->role == ROLE_CONSUMER && L->k->roles.pingpong)
    lower_error(L, L->cur_op,
                "this op needs scratch shared memory (a layout conversion or a reduction across warps), which "
                "ping-pong consumer warpgroups would share; use cooperative consumers (@warp_specialize on the kernel "
                "only)");
  return smem_scratch(L->k->plan, L->cur_op ? L->cur_op->scratch : 0, bytes);
}

LLVMValueRef smem_ptr(Lower *L, LLVMValueRef offset) { return LLVMBuildGEP2(L->b, L->t_i8, L->smem, &offset, 1, ""); }

LLVMValueRef llvm_asm(Lower *L, const char *text, const char *constraints, LLVMTypeRef ret, LLVMValueRef *args, int nargs,
                      bool side_effects) {
  LLVMTypeRef params[LOWER_MAX_ASM_ARGS];
  for (int i = 0; i < nargs; i++) params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(ret, params, (unsigned)nargs, 0);
  LLVMValueRef a = LLVMGetInlineAsm(fty, text, strlen(text), constraints, strlen(constraints), side_effects, 0,
                                    LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(L->b, fty, a, args, (unsigned)nargs, "");
}

void mark_convergent(Lower *L, LLVMValueRef call) {
  unsigned kind = LLVMGetEnumAttributeKindForName("convergent", strlen("convergent"));
  LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(L->ctx, kind, 0));
}

LLVMValueRef is_elected(Lower *L) {
  /* consumers: thread 0 of the consumers (of each warpgroup, ping-pong);
   * otherwise thread 0 of the block */
  LLVMValueRef t = L->role == ROLE_CONSUMER ? L->tid : L->tid_raw;
  return LLVMBuildICmp(L->b, LLVMIntEQ, t, const_i32(L, 0), "elected");
}

void guarded(Lower *L, LLVMValueRef pred, GuardedFn fn, void *ctx) {
  LLVMBasicBlockRef then = new_block(L, "guard"), done = new_block(L, "guard.end");
  LLVMBuildCondBr(L->b, pred, then, done);
  LLVMPositionBuilderAtEnd(L->b, then);
  fn(L, ctx);
  LLVMBuildBr(L->b, done);
  LLVMPositionBuilderAtEnd(L->b, done);
}

int use_count(Lower *L, const Value *v) { return (int)(uintptr_t)ptrmap_get(&L->uses, v); }

static void count_uses(Lower *L, const Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++) {
      uintptr_t n = (uintptr_t)ptrmap_get(&L->uses, op->operands[i]);
      ptrmap_put(&L->uses, op->operands[i], (void *)(n + 1));
    }
    for (int r = 0; r < op->nregions; r++) count_uses(L, &op->regions[r]);
  }
}

/* ---- per-thread constants of a layout ---- */

/* XOR of the bases of the set bits of `bits` (a runtime value). */
static LLVMValueRef bits_to_flat(Lower *L, LLVMBuilderRef b, LLVMValueRef bits, const uint32_t *bases, int n) {
  LLVMValueRef acc = const_i32(L, 0);
  for (int i = 0; i < n; i++) {
    if (!bases[i]) continue;
    LLVMValueRef bit = LLVMBuildAnd(b, LLVMBuildLShr(b, bits, const_i32(L, i), ""), const_i32(L, 1), "");
    acc = LLVMBuildXor(b, acc, LLVMBuildMul(b, bit, const_i32(L, bases[i]), ""), "");
  }
  return acc;
}

ThreadInfo *thread_info(Lower *L, const Layout *l) {
  for (int i = 0; i < L->nthreads; i++)
    if (L->threads[i].layout == l || layout_equal(L->threads[i].layout, l)) return &L->threads[i];
  if (L->nthreads == L->capthreads) {
    int cap = L->capthreads ? L->capthreads * 2 : 16;
    L->threads = arena_grow(&L->arena, L->threads, sizeof(ThreadInfo), (size_t)L->capthreads, (size_t)cap);
    L->capthreads = cap;
  }
  ThreadInfo *t = &L->threads[L->nthreads++];
  LLVMBuilderRef b = L->entry_b;
  t->layout = l;
  LLVMValueRef lf = bits_to_flat(L, b, L->lane, l->lane, l->nlane);
  LLVMValueRef wf = bits_to_flat(L, b, L->warp, l->warp, l->nwarp);
  t->flat = LLVMBuildXor(b, lf, wf, "thread_flat");
  uint32_t lrep = layout_lane_replication(l), wrep = layout_warp_replication(l);
  LLVMValueRef lz = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, L->lane, const_i32(L, lrep), ""), const_i32(L, 0), "");
  LLVMValueRef wz = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, L->warp, const_i32(L, wrep), ""), const_i32(L, 0), "");
  t->owner = LLVMBuildAnd(b, lz, wz, "owner");
  return t;
}

LLVMValueRef flat_index(Lower *L, const Layout *l, uint32_t r) {
  uint32_t reg_flat = layout_apply(l, r, 0, 0);
  ThreadInfo *t = thread_info(L, l);
  if (!reg_flat) return t->flat;
  uint32_t thread_bits = 0;
  for (int i = 0; i < l->nlane; i++) thread_bits |= l->lane[i];
  for (int i = 0; i < l->nwarp; i++) thread_bits |= l->warp[i];
  /* Disjoint bits: XOR is an add, which LLVM folds into address offsets
   * (base + thread part + constant). */
  if (!(reg_flat & thread_bits)) return LLVMBuildNUWAdd(L->b, t->flat, const_i32(L, reg_flat), "");
  return LLVMBuildXor(L->b, t->flat, const_i32(L, reg_flat), "");
}

LLVMValueRef coord_of(Lower *L, const Layout *l, LLVMValueRef flat, int dim) {
  int shift = 0;
  for (int d = l->rank - 1; d > dim; d--) shift += __builtin_ctz((unsigned)l->shape[d]);
  LLVMValueRef v = shift ? LLVMBuildLShr(L->b, flat, const_i32(L, shift), "") : flat;
  return LLVMBuildAnd(L->b, v, const_i32(L, l->shape[dim] - 1), "");
}

/* ---- tiles of values ---- */

void set_tile(Lower *L, const Value *v, LTile *t) {
  LayoutInfo *info = layouts_get(L->layouts, v);
  if (v->type.rank > 0 && info && !info->fixed) {
    FlexTiles *ft = ptrmap_get(&L->flexible, v);
    if (!ft) {
      ft = ARENA_NEW(&L->arena, FlexTiles);
      ptrmap_put(&L->flexible, v, ft);
    }
    if (ft->n == ft->cap) {
      int cap = ft->cap ? ft->cap * 2 : 2;
      ft->tiles = arena_grow(&L->arena, ft->tiles, sizeof(LTile *), (size_t)ft->cap, (size_t)cap);
      ft->cap = cap;
    }
    ft->tiles[ft->n++] = t;
    return;
  }
  ptrmap_put(&L->fixed, v, t);
}

LTile *get_fixed(Lower *L, const Value *v) {
  LTile *t = ptrmap_get(&L->fixed, v);
  if (!t) {
    LayoutInfo *info = layouts_get(L->layouts, v);
    const Layout *l = info && info->fixed ? info->fixed : layouts_canonical(L->layouts, v->type.rank, v->type.shape);
    return get_tile(L, v, l);
  }
  return t;
}

static LTile *cached_conversion(Lower *L, const Value *v, const Layout *want) {
  for (int i = L->nconv - 1; i >= 0; i--)
    if (L->conv[i].value == v && layout_equal(L->conv[i].layout, want)) return L->conv[i].tile;
  return NULL;
}

static void cache_conversion(Lower *L, const Value *v, const Layout *want, LTile *t) {
  if (L->nconv == L->capconv) {
    int cap = L->capconv ? L->capconv * 2 : 32;
    L->conv = arena_grow(&L->arena, L->conv, sizeof(ConvEntry), (size_t)L->capconv, (size_t)cap);
    L->capconv = cap;
  }
  L->conv[L->nconv++] = (ConvEntry){v, want, t};
}

LTile *get_tile(Lower *L, const Value *v, const Layout *want) {
  if (L->failed) return NULL;
  if (v->type.rank == 0) {
    LTile *t = ptrmap_get(&L->fixed, v);
    if (!t) lower_error(L, v->def, "internal: scalar used before it is defined");
    return t;
  }
  LayoutInfo *info = layouts_get(L->layouts, v);
  if (info && !info->fixed) {
    FlexTiles *ft = ptrmap_get(&L->flexible, v);
    for (int i = 0; ft && i < ft->n; i++)
      if (layout_equal(ft->tiles[i]->layout, want)) return ft->tiles[i];
    /* Not requested ahead (should not happen): compute it here. */
    if (!v->def) {
      lower_error(L, NULL, "internal: flexible block argument");
      return NULL;
    }
    LTile *t = lower_value_op(L, v->def, want);
    if (t) set_tile(L, v, t);
    return t;
  }
  LTile *t = ptrmap_get(&L->fixed, v);
  if (!t) {
    lower_error(L, v->def, "internal: value used before it is defined");
    return NULL;
  }
  if (t->layout == want || layout_equal(t->layout, want)) return t;
  LTile *c = cached_conversion(L, v, want);
  if (c) return c;
  c = convert_tile(L, t, want, (ScalarKind)v->type.kind);
  if (c) cache_conversion(L, v, want, c);
  return c;
}

/* ---- control flow ---- */

/* One phi per register of a tile in layout l. */
static LTile *phi_tile(Lower *L, const Layout *l, ScalarKind k) {
  LTile *t = lt_new(L, l);
  for (int r = 0; r < t->nregs; r++) t->regs[r] = LLVMBuildPhi(L->b, llvm_elem_type(L, k), "");
  return t;
}

static void add_incoming(LTile *phis, const LTile *vals, LLVMBasicBlockRef from) {
  for (int r = 0; r < phis->nregs; r++) {
    LLVMValueRef v = vals->regs[r];
    LLVMAddIncoming(phis->regs[r], &v, &from, 1);
  }
}

const Layout *layout_of_result(Lower *L, const Value *v) {
  LayoutInfo *info = layouts_get(L->layouts, v);
  return info && info->fixed ? info->fixed : layouts_canonical(L->layouts, v->type.rank, v->type.shape);
}

/* Lowers a region's ops; returns its yield op (not lowered). */
static const Op *lower_region(Lower *L, const Block *b) {
  int saved = L->nconv;
  lower_block(L, b);
  L->nconv = saved;
  return b->last && b->last->kind == OP_YIELD ? b->last : NULL;
}

/* Tiles of a yield's operands in the layouts of `targets`' values. */
static LTile **yield_tiles(Lower *L, const Op *y, const Value *targets, int n) {
  LTile **out = ARENA_ARRAY(&L->arena, LTile *, n ? n : 1);
  for (int i = 0; i < n && !L->failed; i++) out[i] = get_tile(L, y->operands[i], layout_of_result(L, &targets[i]));
  return out;
}

/* Whether a loop-carried value is the accumulator of a wgmma in the body. */
static bool wgmma_accumulator(const Block *body, const Value *arg) {
  for (const Op *o = body->first; o; o = o->next)
    if (o->kind == OP_WGMMA && o->operands[2] == arg) return true;
  return false;
}

/* When `for i in range(lo, hi, step)` runs and when it goes on, without
 * an induction value that wraps (semantics.md): it runs at all when lo is
 * before hi in the step's direction; after the trip with value iv it goes
 * on while the distance from lo, taken unsigned (iv - lo upward, lo - iv
 * downward), is below limit = span - |step| (0 when the span is not
 * larger than the step), span the unsigned distance from lo to hi: then
 * iv + step is still before hi, so it is in range. A step of 0,
 * undefined in the language, makes no trips. */
typedef struct ForBounds {
  LLVMValueRef run, limit, upward;
} ForBounds;

static ForBounds for_bounds(Lower *L, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step, bool is_unsigned) {
  LLVMTypeRef t = LLVMTypeOf(lo);
  LLVMValueRef zero = const_int(L, t, 0);
  LLVMValueRef up = is_unsigned ? LLVMBuildICmp(L->b, LLVMIntNE, step, zero, "")
                                : LLVMBuildICmp(L->b, LLVMIntSGT, step, zero, "");
  LLVMValueRef up_run = LLVMBuildAnd(L->b, up, LLVMBuildICmp(L->b, is_unsigned ? LLVMIntULT : LLVMIntSLT, lo, hi, ""), "");
  LLVMValueRef up_span = LLVMBuildSub(L->b, hi, lo, "");
  LLVMValueRef up_limit = LLVMBuildSelect(L->b, LLVMBuildICmp(L->b, LLVMIntUGT, up_span, step, ""),
                                          LLVMBuildSub(L->b, up_span, step, ""), zero, "");
  ForBounds f = {up_run, up_limit, up};
  if (is_unsigned) return f;
  LLVMValueRef down = LLVMBuildICmp(L->b, LLVMIntSLT, step, zero, "");
  LLVMValueRef down_run = LLVMBuildAnd(L->b, down, LLVMBuildICmp(L->b, LLVMIntSGT, lo, hi, ""), "");
  LLVMValueRef down_span = LLVMBuildSub(L->b, lo, hi, ""), magnitude = LLVMBuildNeg(L->b, step, "");
  LLVMValueRef down_limit = LLVMBuildSelect(L->b, LLVMBuildICmp(L->b, LLVMIntUGT, down_span, magnitude, ""),
                                            LLVMBuildSub(L->b, down_span, magnitude, ""), zero, "");
  f.run = LLVMBuildOr(L->b, up_run, down_run, "for.runs");
  f.limit = LLVMBuildSelect(L->b, up, up_limit, down_limit, "for.limit");
  return f;
}

static void lower_for(Lower *L, const Op *op) {
  LTile *lo = get_fixed(L, op->operands[0]), *hi = get_fixed(L, op->operands[1]), *step = get_fixed(L, op->operands[2]);
  int n = (int)op->nresults;
  LTile **inits = ARENA_ARRAY(&L->arena, LTile *, n ? n : 1);
  for (int i = 0; i < n && !L->failed; i++) {
    inits[i] = get_tile(L, op->operands[3 + i], layout_of_result(L, &op->results[i]));
    /* A wgmma chain across iterations (wgmma_wait {pending = 1}) must not
     * see its accumulator set on the path that skips the loop: ptxas
     * would serialize every wgmma (C7515). */
    if (inits[i] && wgmma_accumulator(&op->regions[0], &op->regions[0].args[1 + i])) {
      LTile *t = lt_new(L, inits[i]->layout);
      memcpy(t->regs, inits[i]->regs, sizeof(LLVMValueRef) * (size_t)t->nregs);
      opaque_regs(L, t->regs, t->nregs);
      inits[i] = t;
    }
  }
  if (L->failed) return;
  /* A guarded loop with its test at the end (the form LLVM's loop passes
   * expect): pre -> body when it runs at all, latch -> body while it goes
   * on (for_bounds), the results merged in exit. */
  ScalarKind ik = (ScalarKind)op->operands[0]->type.kind;
  bool is_unsigned = is_unsigned_kind(ik);
  ForBounds fb = for_bounds(L, lo->regs[0], hi->regs[0], step->regs[0], is_unsigned);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b), body = new_block(L, "for.body"), exit = new_block(L, "for.exit");
  LLVMBuildCondBr(L->b, fb.run, body, exit);
  LLVMPositionBuilderAtEnd(L->b, body);
  LLVMTypeRef it = llvm_elem_type(L, ik);
  LLVMValueRef iv = LLVMBuildPhi(L->b, it, "iv");
  LLVMAddIncoming(iv, &lo->regs[0], &pre, 1);
  LTile **phis = ARENA_ARRAY(&L->arena, LTile *, n ? n : 1);
  for (int i = 0; i < n; i++) {
    phis[i] = phi_tile(L, layout_of_result(L, &op->results[i]), (ScalarKind)op->results[i].type.kind);
    add_incoming(phis[i], inits[i], pre);
  }
  const Block *blk = &op->regions[0];
  LTile *ivt = lt_new(L, layout_of_result(L, &blk->args[0]));
  ivt->regs[0] = iv;
  set_tile(L, &blk->args[0], ivt);
  for (int i = 0; i < n; i++) set_tile(L, &blk->args[1 + i], phis[i]);
  const Op *y = lower_region(L, blk);
  if (L->failed || !y) return;
  LTile **next = yield_tiles(L, y, op->results, n);
  if (L->failed) return;
  LLVMValueRef from_lo = LLVMBuildSelect(L->b, fb.upward, LLVMBuildSub(L->b, iv, lo->regs[0], ""),
                                         LLVMBuildSub(L->b, lo->regs[0], iv, ""), "");
  LLVMValueRef more = LLVMBuildICmp(L->b, LLVMIntULT, from_lo, fb.limit, "for.more");
  /* (only taken when more: then the add stays in range) */
  LLVMValueRef iv_next = LLVMBuildAdd(L->b, iv, step->regs[0], "iv.next");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(L->b);
  LLVMAddIncoming(iv, &iv_next, &latch, 1);
  for (int i = 0; i < n; i++) add_incoming(phis[i], next[i], latch);
  LLVMBuildCondBr(L->b, more, body, exit);
  LLVMPositionBuilderAtEnd(L->b, exit);
  for (int i = 0; i < n; i++) {
    LTile *r = phi_tile(L, layout_of_result(L, &op->results[i]), (ScalarKind)op->results[i].type.kind);
    add_incoming(r, inits[i], pre);
    add_incoming(r, next[i], latch);
    set_tile(L, &op->results[i], r);
  }
}

static void lower_if(Lower *L, const Op *op) {
  LTile *c = get_fixed(L, op->operands[0]);
  if (!c) return;
  int n = (int)op->nresults;
  LLVMBasicBlockRef then_bb = new_block(L, "if.then"), else_bb = new_block(L, "if.else"),
                    merge = new_block(L, "if.end");
  LLVMBuildCondBr(L->b, c->regs[0], then_bb, else_bb);
  LTile **vals[2];
  LLVMBasicBlockRef ends[2];
  LLVMBasicBlockRef starts[2] = {then_bb, else_bb};
  const Op *held = L->turn_held; /* (both branches leave the turn alike) */
  for (int r = 0; r < 2; r++) {
    L->turn_held = held;
    LLVMPositionBuilderAtEnd(L->b, starts[r]);
    const Op *y = lower_region(L, &op->regions[r]);
    if (L->failed || !y) return;
    vals[r] = yield_tiles(L, y, op->results, n);
    if (L->failed) return;
    ends[r] = LLVMGetInsertBlock(L->b);
    LLVMBuildBr(L->b, merge);
  }
  LLVMPositionBuilderAtEnd(L->b, merge);
  for (int i = 0; i < n; i++) {
    LTile *p = phi_tile(L, layout_of_result(L, &op->results[i]), (ScalarKind)op->results[i].type.kind);
    add_incoming(p, vals[0][i], ends[0]);
    add_incoming(p, vals[1][i], ends[1]);
    set_tile(L, &op->results[i], p);
  }
}

static void lower_while(Lower *L, const Op *op) {
  int n = (int)op->nresults;
  LTile **inits = ARENA_ARRAY(&L->arena, LTile *, n ? n : 1);
  for (int i = 0; i < n && !L->failed; i++) inits[i] = get_tile(L, op->operands[i], layout_of_result(L, &op->results[i]));
  if (L->failed) return;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b), header = new_block(L, "while.cond"),
                    body = new_block(L, "while.body"), exit = new_block(L, "while.exit");
  LLVMBuildBr(L->b, header);
  LLVMPositionBuilderAtEnd(L->b, header);
  LTile **phis = ARENA_ARRAY(&L->arena, LTile *, n ? n : 1);
  for (int i = 0; i < n; i++) {
    phis[i] = phi_tile(L, layout_of_result(L, &op->results[i]), (ScalarKind)op->results[i].type.kind);
    add_incoming(phis[i], inits[i], pre);
    set_tile(L, &op->regions[0].args[i], phis[i]);
    set_tile(L, &op->regions[1].args[i], phis[i]);
  }
  const Op *cy = lower_region(L, &op->regions[0]);
  if (L->failed || !cy) return;
  LTile *cond = get_fixed(L, cy->operands[0]);
  if (!cond) return;
  LLVMBuildCondBr(L->b, cond->regs[0], body, exit);
  LLVMPositionBuilderAtEnd(L->b, body);
  const Op *y = lower_region(L, &op->regions[1]);
  if (L->failed || !y) return;
  LTile **next = yield_tiles(L, y, op->results, n);
  if (L->failed) return;
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(L->b);
  for (int i = 0; i < n; i++) add_incoming(phis[i], next[i], latch);
  LLVMBuildBr(L->b, header);
  LLVMPositionBuilderAtEnd(L->b, exit);
  for (int i = 0; i < n; i++) set_tile(L, &op->results[i], phis[i]);
}

/* ---- ops ---- */

/* GPU operations without a tile result (true when op was one). */
static bool lower_gpu_op(Lower *L, const Op *op) {
  switch (op->kind) {
  case OP_SMEM_ALLOC: lower_smem_alloc(L, op); break;
  case OP_SMEM_INDEX: lower_smem_index(L, op); break;
  case OP_SMEM_STORE: lower_smem_store(L, op); break;
  case OP_MBAR_ALLOC: lower_mbar_alloc(L, op); break;
  case OP_MBAR_EXPECT: lower_mbar_expect(L, op); break;
  case OP_MBAR_ARRIVE: lower_mbar_arrive(L, op); break;
  case OP_MBAR_WAIT: lower_mbar_wait(L, op); break;
  case OP_TMA_LOAD: lower_tma_load(L, op); break;
  case OP_TMA_STORE: lower_tma_store(L, op); break;
  case OP_ASYNC_COPY: lower_async_copy(L, op); break;
  case OP_ASYNC_COMMIT: lower_async_commit(L); break;
  case OP_ASYNC_WAIT: lower_async_wait(L, op); break;
  case OP_FENCE_ASYNC: lower_fence_async(L); break;
  case OP_BARRIER:
    if (staging_is_warpgroup_local(L, op))
      warpgroup_barrier(L);
    else
      barrier(L);
    break;
  case OP_WGMMA_WAIT: lower_wgmma_wait(L, op); break;
  case OP_TMA_STORE_WAIT: lower_tma_store_wait(L, op); break;
  case OP_WARP_SPLIT: lower_warp_split(L, op); break;
  default: return false;
  }
  return true;
}

static void lower_op(Lower *L, const Op *op) {
  L->cur_op = op;
  /* Barriers are initialized by the allocations at the top of the body;
   * the first other op makes them visible to every thread. */
  if (L->mbar_inits && op->kind != OP_SMEM_ALLOC && op->kind != OP_MBAR_ALLOC) lower_mbar_init_done(L);
  switch (op->kind) {
  case OP_FOR: lower_for(L, op); return;
  case OP_IF: lower_if(L, op); return;
  case OP_WHILE: lower_while(L, op); return;
  case OP_YIELD: return; /* handled by the parent */
  case OP_RETURN:
    /* no program of a cluster leaves while another may still arrive on
     * its barriers or copy into its shared memory */
    if (func_cluster(L->f) > 1) lower_cluster_barrier(L);
    LLVMBuildRetVoid(L->b);
    return;
  case OP_STORE: lower_store(L, op); return;
  case OP_FENCE: lower_fence(L); return;
  case OP_TURN_WAIT:
  case OP_TURN_PASS: lower_turn(L, op); return;
  case OP_DEVICE_PRINT:
  case OP_DEVICE_ASSERT: lower_device_debug(L, op); return;
  case OP_BLOCK_LOAD:
  case OP_BLOCK_STORE:
    lower_error(L, op, "internal: load_block/store_block left after scheduling");
    return;
  default: break;
  }
  if (lower_gpu_op(L, op)) return;
  const Value *res = &op->results[0];
  LayoutInfo *info = layouts_get(L->layouts, res);
  if (res->type.rank > 0 && info && !info->fixed) {
    /* Flexible: once per layout its users need. */
    for (int i = 0; i < info->nwanted && !L->failed; i++) {
      LTile *t = lower_value_op(L, op, info->wanted[i]);
      if (t) set_tile(L, res, t);
    }
    return;
  }
  const Layout *l = layout_of_result(L, res);
  LTile *t = NULL;
  switch (op->kind) {
  case OP_LOAD: t = lower_load(L, op, l); break;
  case OP_ATOMIC_ADD: case OP_ATOMIC_MAX: case OP_ATOMIC_MIN: case OP_ATOMIC_AND: case OP_ATOMIC_OR:
  case OP_ATOMIC_XOR: case OP_ATOMIC_XCHG: case OP_ATOMIC_CAS: t = lower_atomic(L, op, l); break;
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_ARGMAX: case OP_ARGMIN:
    t = lower_reduce(L, op, l);
    break;
  case OP_CUMSUM: t = lower_cumsum(L, op, l); break;
  case OP_DOT: t = lower_dot(L, op, l); break;
  case OP_SMEM_LOAD: t = lower_smem_load(L, op, l); break;
  case OP_RING_NEXT: t = lower_ring_next(L, op, l); break;
  case OP_CONSUMER_ID: {
    t = lt_new(L, l);
    LLVMValueRef wg = warpgroup_of(L, L->tid_raw);
    t->regs[0] = LLVMBuildSub(L->b, wg, const_i32(L, L->k->roles.producers), "consumer_id");
    break;
  }
  case OP_WGMMA: t = lower_wgmma(L, op, l); break;
  default: t = lower_value_op(L, op, l); break;
  }
  if (t) set_tile(L, res, t);
}

static void lower_block(Lower *L, const Block *b) {
  for (Op *op = b->first; op && !L->failed; op = op->next) lower_op(L, op);
}

/* ---- the consumers' turn (wait_turn, pass_turn) ----
 *
 * Consumer warpgroup i waits for its turn on named barrier T + i and
 * passes it to warpgroup i + 1 (mod consumers) by arriving on T + i + 1,
 * each barrier counting 256 threads: the 128 that wait and the 128 that
 * pass. Warpgroup 0 starts with the turn (it arrives on its own barrier
 * first) and, where the consumers end, takes the last warpgroup's final
 * pass, so that every barrier ends where it began. Nothing without a split
 * or with one consumer warpgroup. */

/* A turn barrier (sync or arrive) on barrier `id`, where `pred` (or
 * always). The barrier sits behind a branch of its own (taken only for an
 * id of 0, which no turn has): ptxas schedules instructions across a
 * barrier within a basic block, and moved a whole softmax below the
 * wait_turn that was to follow it. */
static void turn_barrier(Lower *L, bool sync, LLVMValueRef id, LLVMValueRef pred) {
  if (pred) id = LLVMBuildSelect(L->b, pred, id, const_i32(L, 0), "");
  LLVMValueRef args[1] = {id};
  char text[200];
  snprintf(text, sizeof text,
           "{ .reg .pred p; setp.eq.u32 p, $0, 0; @p bra $$turn_${:uid}; barrier.%s $0, %d; $$turn_${:uid}: }",
           sync ? "sync" : "arrive", 2 * 32 * WARPGROUP_WARPS);
  mark_convergent(L, llvm_asm(L, text, "r,~{memory}", L->t_void, args, 1, true));
}

void lower_turn(Lower *L, const Op *op) {
  if (L->role == ROLE_CONSUMER && L->k->roles.pingpong) {
    lower_error(L, op,
                "%s(): the consumer warpgroups of this kernel take the iterations of its tile loop in turn "
                "(ping-pong), so they share no loop to take turns in; use cooperative consumers (@warp_specialize "
                "on the kernel only)",
                op->kind == OP_TURN_WAIT ? "wait_turn" : "pass_turn");
    return;
  }
  L->turn_held = op->kind == OP_TURN_WAIT ? op : NULL;
  if (!takes_turns(L)) return;
  LLVMValueRef wg = warpgroup_of(L, L->tid);
  if (op->kind == OP_TURN_PASS)
    wg = LLVMBuildURem(L->b, LLVMBuildAdd(L->b, wg, const_i32(L, 1), ""), const_i32(L, L->k->roles.consumers), "");
  turn_barrier(L, op->kind == OP_TURN_WAIT, LLVMBuildAdd(L->b, wg, const_i32(L, BARRIER_TURN_FIRST), "turn_id"),
               NULL);
}

/* Warpgroup 0's part at the consumers' start (first) and end. */
static void turn_ends(Lower *L, const Block *consumers, bool first) {
  if (!takes_turns(L) || !ir_block_has(consumers, OP_TURN_WAIT)) return;
  LLVMValueRef zero = LLVMBuildICmp(L->b, LLVMIntEQ, warpgroup_of(L, L->tid), const_i32(L, 0), "");
  turn_barrier(L, !first, const_i32(L, BARRIER_TURN_FIRST), zero);
}

/* ---- warp specialization ---- */

/* The register count ptxas gives each thread at entry when one block of
 * `threads` fills the SM (65536 registers, granule 8, at most 255). */
static int entry_registers(int threads) {
  int r = (SM_REGISTERS / threads) & ~(WS_REG_GRANULE - 1);
  return r > THREAD_REGISTERS ? THREAD_REGISTERS & ~(WS_REG_GRANULE - 1) : r;
}

static void set_registers(Lower *L, int want, int entry) {
  if (want == entry) return;
  char text[64];
  snprintf(text, sizeof text, "setmaxnreg.%s.sync.aligned.u32 %d;", want < entry ? "dec" : "inc", want);
  llvm_asm(L, text, "~{memory}", L->t_void, NULL, 0, true);
}

/* Warpgroups below `producers` run region 0 (its first warp: the copies
 * are one thread's work; the others leave after giving registers back),
 * the rest region 1. */
void lower_warp_split(Lower *L, const Op *op) {
  const WarpRoles *r = &L->k->roles;
  int entry = entry_registers(32 * r->block_warps);
  LLVMValueRef wg = warpgroup_of(L, L->tid_raw);
  LLVMValueRef producer = LLVMBuildICmp(L->b, LLVMIntULT, wg, const_i32(L, op->attr[0]), "");
  LLVMBasicBlockRef pb = new_block(L, "producer"), pw = new_block(L, "producer.warp"), cb = new_block(L, "consumer"),
                    done = new_block(L, "split.end");
  LLVMBuildCondBr(L->b, producer, pb, cb);
  LLVMPositionBuilderAtEnd(L->b, pb);
  set_registers(L, (int)op->attr[2], entry);
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntULT, L->tid_raw, const_i32(L, 32), ""), pw, done);
  LLVMPositionBuilderAtEnd(L->b, pw);
  L->role = ROLE_PRODUCER;
  lower_block(L, &op->regions[0]);
  LLVMBuildBr(L->b, done);
  LLVMPositionBuilderAtEnd(L->b, cb);
  set_registers(L, (int)op->attr[3], entry);
  L->role = ROLE_CONSUMER;
  turn_ends(L, &op->regions[1], true);
  lower_block(L, &op->regions[1]);
  if (!L->failed) turn_ends(L, &op->regions[1], false);
  LLVMBuildBr(L->b, done);
  LLVMPositionBuilderAtEnd(L->b, done);
  L->role = ROLE_NONE;
}

/* ---- the kernel ---- */

static void init_types(Lower *L) {
  LLVMContextRef c = L->ctx;
  L->t_void = LLVMVoidTypeInContext(c);
  L->t_i1 = LLVMInt1TypeInContext(c);
  L->t_i8 = LLVMInt8TypeInContext(c);
  L->t_i16 = LLVMInt16TypeInContext(c);
  L->t_i32 = LLVMInt32TypeInContext(c);
  L->t_i64 = LLVMInt64TypeInContext(c);
  L->t_f16 = LLVMHalfTypeInContext(c);
  L->t_bf16 = LLVMBFloatTypeInContext(c);
  L->t_f32 = LLVMFloatTypeInContext(c);
  L->t_f64 = LLVMDoubleTypeInContext(c);
  L->t_ptr = LLVMPointerTypeInContext(c, ADDRSPACE_GLOBAL);
  L->t_sptr = LLVMPointerTypeInContext(c, ADDRSPACE_SHARED);
}

/* ABI type of a kernel parameter: i1 travels as a byte. */
static LLVMTypeRef param_type(Lower *L, TType t) { return t.kind == SK_I1 ? L->t_i8 : llvm_elem_type(L, (ScalarKind)t.kind); }

static void add_annotation(Lower *L, const char *key, int value) {
  LLVMMetadataRef md[3] = {LLVMValueAsMetadata(L->fn), LLVMMDStringInContext2(L->ctx, key, strlen(key)),
                           LLVMValueAsMetadata(const_i32(L, value))};
  LLVMAddNamedMetadataOperand(L->mod, "nvvm.annotations", LLVMMetadataAsValue(L->ctx, LLVMMDNodeInContext2(L->ctx, md, 3)));
}

/* A tensor-descriptor parameter: the 128-byte CUtensorMap by value
 * (byval, 64-byte aligned). With the grid_constant annotation NVPTX takes
 * its address in the parameter space (cvta.param) instead of copying it to
 * local memory, which TMA could not read. */
static void mark_tensor_map_param(Lower *L, unsigned index) {
  LLVMTypeRef map = LLVMArrayType2(L->t_i8, TENSOR_MAP_BYTES);
  unsigned byval = LLVMGetEnumAttributeKindForName("byval", 5);
  unsigned align = LLVMGetEnumAttributeKindForName("align", 5);
  LLVMAddAttributeAtIndex(L->fn, index + 1, LLVMCreateTypeAttribute(L->ctx, byval, map));
  LLVMAddAttributeAtIndex(L->fn, index + 1, LLVMCreateEnumAttribute(L->ctx, align, TENSOR_MAP_ALIGN));
}

static void add_grid_constants(Lower *L, const unsigned *indices, int n) {
  if (!n) return;
  LLVMMetadataRef idx[LOWER_MAX_TENSOR_PARAMS];
  for (int i = 0; i < n; i++) idx[i] = LLVMValueAsMetadata(const_i32(L, indices[i] + 1)); /* 1-based */
  LLVMMetadataRef md[3] = {LLVMValueAsMetadata(L->fn), LLVMMDStringInContext2(L->ctx, "grid_constant", 13),
                           LLVMMDNodeInContext2(L->ctx, idx, (size_t)n)};
  LLVMAddNamedMetadataOperand(L->mod, "nvvm.annotations", LLVMMetadataAsValue(L->ctx, LLVMMDNodeInContext2(L->ctx, md, 3)));
}

static bool create_kernel(Lower *L) {
  const Func *f = L->f;
  int n = (int)f->body.nargs;
  LLVMTypeRef *params = ARENA_ARRAY(&L->arena, LLVMTypeRef, n ? n : 1);
  unsigned tensors[LOWER_MAX_TENSOR_PARAMS];
  int ntensors = 0;
  for (int i = 0; i < n; i++) {
    if (f->body.args[i].type.kind == SK_DESC) {
      if (ntensors == LOWER_MAX_TENSOR_PARAMS) {
        lower_error(L, NULL, "a kernel takes at most %d tensor descriptors", LOWER_MAX_TENSOR_PARAMS);
        return false;
      }
      tensors[ntensors++] = (unsigned)i;
      params[i] = LLVMPointerTypeInContext(L->ctx, 0);
    } else {
      params[i] = param_type(L, f->body.args[i].type);
    }
  }
  LLVMTypeRef fty = LLVMFunctionType(L->t_void, params, (unsigned)n, 0);
  L->fn = LLVMAddFunction(L->mod, f->name, fty);
  LLVMSetFunctionCallConv(L->fn, PTX_KERNEL_CC);
  add_annotation(L, "kernel", 1);
  add_annotation(L, "maxntidx", 32 * L->k->roles.block_warps);
  /* With setmaxnreg, ptxas needs the register count at entry fixed: one
   * block per SM pins it (HOPPER-FACTS.md section 11). */
  if (L->k->roles.producers) add_annotation(L, "minctasm", 1);
  add_grid_constants(L, tensors, ntensors);
  for (int i = 0; i < ntensors; i++) mark_tensor_map_param(L, tensors[i]);
  for (int i = 0; i < n; i++) {
    LLVMValueRef p = LLVMGetParam(L->fn, (unsigned)i);
    LLVMSetValueName2(p, f->params[i].name, strlen(f->params[i].name));
    if (f->body.args[i].type.kind == SK_PTR && f->params[i].align > 1) {
      unsigned kind = LLVMGetEnumAttributeKindForName("align", 5);
      LLVMAddAttributeAtIndex(L->fn, (unsigned)i + 1, LLVMCreateEnumAttribute(L->ctx, kind, (uint64_t)f->params[i].align));
    }
  }
  L->entry_bb = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "entry");
  L->body_bb = LLVMAppendBasicBlockInContext(L->ctx, L->fn, "body");
  L->entry_b = LLVMCreateBuilderInContext(L->ctx);
  LLVMPositionBuilderAtEnd(L->entry_b, L->entry_bb);
  LLVMPositionBuilderAtEnd(L->b, L->entry_bb);
  L->tid_raw = call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.tid.x", L->t_i32, NULL, 0);
  /* Tile layouts number the threads that compute: with producer
   * warpgroups, the consumers from 0 (the producers' numbers are unused). */
  int first = 32 * WARPGROUP_WARPS * L->k->roles.producers;
  L->tid = first ? LLVMBuildSub(L->b, L->tid_raw, const_i32(L, first), "ctid") : L->tid_raw;
  /* ping-pong: within each consumer warpgroup */
  if (L->k->roles.pingpong) L->tid = LLVMBuildAnd(L->b, L->tid, const_i32(L, 32 * WARPGROUP_WARPS - 1), "wgtid");
  L->lane = LLVMBuildAnd(L->b, L->tid, const_i32(L, 31), "lane");
  /* The warp number through a shuffle from lane 0: the same value, but
   * ptxas then knows it is uniform across the warp and keeps what is
   * computed from it (a warpgroup's shared operand addresses, its wgmma
   * descriptors) in uniform registers. */
  LLVMValueRef shfl[4] = {const_i32(L, (int32_t)FULL_WARP_MASK), LLVMBuildLShr(L->b, L->tid, const_i32(L, 5), ""),
                          const_i32(L, 0), const_i32(L, SHFL_CLAMP)};
  L->warp = call_intrinsic(L, "llvm.nvvm.shfl.sync.idx.i32", L->t_i32, shfl, 4);
  LLVMTypeRef smem_ty = LLVMArrayType2(L->t_i8, 0);
  L->smem = LLVMAddGlobalInAddressSpace(L->mod, smem_ty, "__tile_smem", ADDRSPACE_SHARED);
  LLVMSetLinkage(L->smem, LLVMExternalLinkage);
  LLVMSetAlignment(L->smem, SMEM_SWIZZLE_ALIGN);
  /* Parameters become scalar tiles. */
  LLVMPositionBuilderAtEnd(L->b, L->body_bb);
  const Layout *scalar = layouts_canonical(L->layouts, 0, NULL);
  for (int i = 0; i < n; i++) {
    LTile *t = lt_new(L, scalar);
    LLVMValueRef p = LLVMGetParam(L->fn, (unsigned)i);
    if (f->body.args[i].type.kind == SK_I1) p = LLVMBuildTrunc(L->b, p, L->t_i1, "");
    t->regs[0] = p;
    set_tile(L, &f->body.args[i], t);
  }
  return true;
}

bool lower_func(const GpuKernel *k, LLVMContextRef ctx, Diags *diags, const GpuOptions *opt, LowerResult *out) {
  GpuOptions no_options = {0};
  Lower L;
  memset(&L, 0, sizeof L);
  const Func *f = k->f;
  L.f = f;
  L.k = k;
  L.opt = opt ? opt : &no_options;
  L.diags = diags;
  arena_init(&L.arena);
  L.ctx = ctx;
  L.num_warps = k->num_warps;
  L.mod = LLVMModuleCreateWithNameInContext(f->name, ctx);
  L.b = LLVMCreateBuilderInContext(ctx);
  init_types(&L);
  ptrmap_init(&L.fixed, &L.arena);
  ptrmap_init(&L.flexible, &L.arena);
  ptrmap_init(&L.uses, &L.arena);
  ptrmap_init(&L.bufs, &L.arena);
  ptrmap_init(&L.trackers, &L.arena);
  ptrmap_init(&L.deferred_waits, &L.arena);
  count_uses(&L, &f->body);
  L.axes = k->axes;
  L.layouts = k->layouts;
  bool ok = create_kernel(&L);
  if (ok) {
    lower_block(&L, &f->body);
    LLVMBuildBr(L.entry_b, L.body_bb); /* the entry block falls into the body */
  }
  if (ok && !L.failed && !smem_check_budget(k->plan, f, diags)) L.failed = true;
  ok = ok && !L.failed;
  out->module = L.mod;
  out->shared_bytes = k->plan->top;
  out->num_warps = k->roles.block_warps;
  LLVMDisposeBuilder(L.b);
  if (L.entry_b) LLVMDisposeBuilder(L.entry_b);
  arena_free(&L.arena);
  if (!ok) {
    LLVMDisposeModule(L.mod);
    out->module = NULL;
  }
  return ok;
}
