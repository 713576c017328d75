/* lower_tma.c - mbarriers and TMA copies (cp.async.bulk.tensor).
 *
 * mbarriers (HOPPER-FACTS.md section 9) are initialized once, by thread
 * 0, when the kernel starts (the allocations are the first ops of the
 * lowered IR), then `fence.mbarrier_init` and a barrier make them visible.
 * A wait spins on `mbarrier.try_wait.parity`. The parity it waits for is
 * the thread's count of the phases it has already waited for on that
 * barrier: one 32-bit tracker per mbarrier array, one bit per barrier,
 * kept in an alloca that LLVM turns into registers. Barriers that say "a
 * slot is free" start with their bits set, so the first wait on each
 * passes at once (the phase before the first counts as complete).
 *
 * With GpuOptions.debug_barriers every wait reads %globaltimer and, after
 * GPU_DEBUG_WAIT_NS, prints the kernel, barrier, index, parity, program
 * and thread, and traps instead of hanging.
 *
 * TMA copies move one box each (the descriptor's box, schedule.c); a tile
 * of several boxes lands box by box in the blocks of its shared layout
 * (layout/smem.h): boxes along the last dimension in consecutive atom
 * blocks, boxes along the first one in consecutive rows. Coordinates go
 * innermost first. One thread (tid 0) issues every copy.
 */
#include <stdio.h>
#include <string.h>

#include "lower_internal.h"

#define MBAR_BYTES 8
/* try_wait's suspend-time hint (ns): a waiting thread sleeps until the
 * phase completes or this long has passed, instead of polling (each poll
 * takes a slot of the SM's MIO queue, which the tensor-core instructions
 * of the other warps need). Far longer than any wait of a working kernel;
 * the debug mode's timeout still fires (it checks between sleeps). */
#define MBAR_SUSPEND_HINT_NS 10000000u
/* How long a debug-mode wait spins before it gives up (ns): far longer
 * than any wait of a working kernel, short enough for a test. */
#define GPU_DEBUG_WAIT_NS 2000000000ull
/* A tracker holds one parity bit per barrier of an array. */
#define TRACKER_BITS 32

typedef struct MbarInfo {
  LLVMValueRef tracker; /* alloca i32 */
  LLVMValueRef pos;     /* alloca i32: ring_next's position */
  int index_in_kernel;  /* for messages */
} MbarInfo;

static LLVMValueRef mbar_addr(Lower *L, const Value *bars, LLVMValueRef index) {
  LBuf *b = get_buf(L, bars);
  if (!b) return NULL;
  LLVMValueRef off = LLVMBuildMul(L->b, index, const_i32(L, MBAR_BYTES), "");
  return smem_addr32(L, LLVMBuildGEP2(L->b, L->t_i8, b->ptr, &off, 1, ""));
}

/* ---- allocation and initialization ---- */

typedef struct InitCtx {
  LLVMValueRef ptr;
  int n, count;
} InitCtx;

static void init_barriers(Lower *L, void *p) {
  InitCtx *c = p;
  for (int i = 0; i < c->n; i++) {
    LLVMValueRef off = const_i32(L, i * MBAR_BYTES);
    LLVMValueRef args[2] = {smem_addr32(L, LLVMBuildGEP2(L->b, L->t_i8, c->ptr, &off, 1, "")), const_i32(L, c->count)};
    llvm_asm(L, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}", L->t_void, args, 2, true);
  }
}

void lower_mbar_alloc(Lower *L, const Op *op) {
  TType t = op->results[0].type;
  if (t.shape[0] > TRACKER_BITS) {
    lower_error(L, op, "internal: more than %d mbarriers in one array", TRACKER_BITS);
    return;
  }
  LBuf *b = ARENA_NEW(&L->arena, LBuf);
  memset(b, 0, sizeof *b);
  b->ptr = smem_ptr(L, const_i32(L, op->attr[0]));
  ptrmap_put(&L->bufs, &op->results[0], b);
  MbarInfo *mi = ARENA_NEW(&L->arena, MbarInfo);
  mi->tracker = LLVMBuildAlloca(L->entry_b, L->t_i32, "phases");
  LLVMBuildStore(L->entry_b, const_i32(L, op->attr[2] ? -1 : 0), mi->tracker);
  mi->pos = LLVMBuildAlloca(L->entry_b, L->t_i32, "ring_pos");
  LLVMBuildStore(L->entry_b, const_i32(L, 0), mi->pos);
  mi->index_in_kernel = (int)op->scratch;
  ptrmap_put(&L->trackers, op, mi);
  InitCtx c = {b->ptr, t.shape[0], (int)op->attr[1]};
  guarded(L, is_elected(L), init_barriers, &c);
  L->mbar_inits = true;
}

void lower_mbar_init_done(Lower *L) {
  L->mbar_inits = false;
  llvm_asm(L, "fence.mbarrier_init.release.cluster;", "~{memory}", L->t_void, NULL, 0, true);
  /* in a cluster, the other programs' copies and arrivals reach these
   * barriers too: all of the cluster waits until every program has
   * initialized its own */
  if (func_cluster(L->f) > 1)
    lower_cluster_barrier(L);
  else
    barrier(L);
}

void lower_cluster_barrier(Lower *L) {
  llvm_asm(L, "barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;", "~{memory}", L->t_void, NULL, 0, true);
}

/* ---- arrivals ---- */

typedef struct ArriveCtx {
  LLVMValueRef addr;
  int64_t bytes;
} ArriveCtx;

static void expect_tx(Lower *L, void *p) {
  ArriveCtx *c = p;
  LLVMValueRef args[2] = {c->addr, const_i32(L, c->bytes)};
  llvm_asm(L, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}", L->t_void, args, 2, true);
}

static void arrive(Lower *L, void *p) {
  ArriveCtx *c = p;
  llvm_asm(L, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", L->t_void, &c->addr, 1, true);
}

/* On the barrier at the same offset in each of the cluster's `bytes`
 * (here: the cluster size) programs, this one included. */
static void arrive_cluster(Lower *L, void *p) {
  ArriveCtx *c = p;
  for (int r = 0; r < (int)c->bytes; r++) {
    LLVMValueRef args[2] = {c->addr, const_i32(L, r)};
    LLVMValueRef remote = llvm_asm(L, "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", L->t_i32, args, 2, false);
    llvm_asm(L, "mbarrier.arrive.shared::cluster.b64 _, [$0];", "r,~{memory}", L->t_void, &remote, 1,
             true);
  }
}

void lower_mbar_expect(Lower *L, const Op *op) {
  LTile *i = get_fixed(L, op->operands[1]);
  LLVMValueRef addr = i ? mbar_addr(L, op->operands[0], i->regs[0]) : NULL;
  if (!addr) return;
  /* The broken protocol of the debug-mode test: more bytes than arrive. */
  ArriveCtx c = {addr, op->attr[0] + (L->opt->break_barriers ? SMEM_CHUNK_BYTES : 0)};
  guarded(L, is_elected(L), expect_tx, &c);
}

void lower_mbar_arrive(Lower *L, const Op *op) {
  LTile *i = get_fixed(L, op->operands[1]);
  LLVMValueRef addr = i ? mbar_addr(L, op->operands[0], i->regs[0]) : NULL;
  if (!addr) return;
  ArriveCtx c = {addr, op->attr[0]};
  /* one thread of each warpgroup: its first */
  LLVMValueRef first = LLVMBuildICmp(L->b, LLVMIntEQ, LLVMBuildAnd(L->b, L->tid, const_i32(L, 127), ""), const_i32(L, 0), "");
  guarded(L, first, op->attr[0] > 1 ? arrive_cluster : arrive, &c);
}

/* ---- waits ---- */

typedef struct WaitCtx {
  const Op *op;
  LLVMValueRef addr, parity;
  MbarInfo *mi;
} WaitCtx;

static LLVMValueRef global_timer(Lower *L) {
  return llvm_asm(L, "mov.u64 $0, %globaltimer;", "=l", L->t_i64, NULL, 0, true);
}

/* The debug-mode message and trap. */
static void report_timeout(Lower *L, void *p) {
  WaitCtx *c = p;
  char fmt[512];
  snprintf(fmt, sizeof fmt,
           "tile: mbarrier wait timed out after %llu ns: kernel '%s', barrier array %d (shared offset %lld), index %%d, "
           "parity %%d, program (%%d, %%d, %%d), thread %%d\n",
           (unsigned long long)GPU_DEBUG_WAIT_NS, L->f->name, c->mi->index_in_kernel,
           (long long)c->op->operands[0]->def->attr[0]);
  LLVMValueRef vals[6];
  vals[0] = LLVMBuildUDiv(L->b, LLVMBuildSub(L->b, c->addr, smem_addr32(L, get_buf(L, c->op->operands[0])->ptr), ""),
                          const_i32(L, MBAR_BYTES), "");
  vals[1] = c->parity;
  vals[2] = call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.ctaid.x", L->t_i32, NULL, 0);
  vals[3] = call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.ctaid.y", L->t_i32, NULL, 0);
  vals[4] = call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.ctaid.z", L->t_i32, NULL, 0);
  vals[5] = L->tid_raw;
  lower_vprintf(L, fmt, vals, 6);
  call_intrinsic(L, "llvm.trap", L->t_void, NULL, 0);
}

static void spin(Lower *L, void *p) {
  WaitCtx *c = p;
  LLVMValueRef start = L->opt->debug_barriers ? global_timer(L) : NULL;
  LLVMBasicBlockRef loop = new_block(L, "mbar.wait"), done = new_block(L, "mbar.done");
  LLVMBuildBr(L->b, loop);
  LLVMPositionBuilderAtEnd(L->b, loop);
  LLVMValueRef args[2] = {c->addr, c->parity};
  char text[160], hint[24] = "";
  if (!L->opt->mbar_poll) snprintf(hint, sizeof hint, ", %u", MBAR_SUSPEND_HINT_NS);
  snprintf(text, sizeof text,
           "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2%s;\nselp.u32 $0, 1, 0, p;\n}",
           hint);
  LLVMValueRef ok = llvm_asm(L, text, "=r,r,r,~{memory}", L->t_i32, args, 2, true);
  LLVMValueRef ready = LLVMBuildICmp(L->b, LLVMIntNE, ok, const_i32(L, 0), "");
  if (!start) {
    LLVMBuildCondBr(L->b, ready, done, loop);
  } else {
    LLVMBasicBlockRef check = new_block(L, "mbar.check");
    LLVMBuildCondBr(L->b, ready, done, check);
    LLVMPositionBuilderAtEnd(L->b, check);
    LLVMValueRef waited = LLVMBuildSub(L->b, global_timer(L), start, "");
    LLVMValueRef late = LLVMBuildICmp(L->b, LLVMIntUGT, waited, LLVMConstInt(L->t_i64, GPU_DEBUG_WAIT_NS, 0), "");
    LLVMValueRef lane0 = LLVMBuildICmp(L->b, LLVMIntEQ, L->lane, const_i32(L, 0), "");
    LLVMBasicBlockRef fail = new_block(L, "mbar.timeout"), again = new_block(L, "mbar.again");
    LLVMBuildCondBr(L->b, late, fail, again);
    LLVMPositionBuilderAtEnd(L->b, fail);
    guarded(L, lane0, report_timeout, c);
    call_intrinsic(L, "llvm.trap", L->t_void, NULL, 0);
    LLVMBuildBr(L->b, again);
    LLVMPositionBuilderAtEnd(L->b, again);
    LLVMBuildBr(L->b, loop);
  }
  LLVMPositionBuilderAtEnd(L->b, done);
}

static MbarInfo *mbar_info(Lower *L, const Op *op) {
  const Op *alloc = op->operands[0]->def;
  MbarInfo *mi = alloc ? ptrmap_get(&L->trackers, alloc) : NULL;
  if (!mi && !L->failed) lower_error(L, op, "internal: an unknown mbarrier array");
  return mi;
}

LTile *lower_ring_next(Lower *L, const Op *op, const Layout *l) {
  MbarInfo *mi = mbar_info(L, op);
  LTile *adv = mi ? get_fixed(L, op->operands[1]) : NULL;
  if (!adv) return NULL;
  int n2 = 2 * op->operands[0]->type.shape[0];
  LTile *t = lt_new(L, l);
  t->regs[0] = LLVMBuildLoad2(L->b, L->t_i32, mi->pos, "ring_pos");
  LLVMValueRef next = LLVMBuildURem(L->b, LLVMBuildAdd(L->b, t->regs[0], adv->regs[0], ""), const_i32(L, n2), "");
  LLVMBuildStore(L->b, next, mi->pos);
  return t;
}

void lower_mbar_wait(Lower *L, const Op *op) {
  LTile *i = get_fixed(L, op->operands[1]);
  MbarInfo *mi = mbar_info(L, op);
  LLVMValueRef addr = i && mi ? mbar_addr(L, op->operands[0], i->regs[0]) : NULL;
  if (!addr) {
    if (!L->failed) lower_error(L, op, "internal: wait on an unknown mbarrier");
    return;
  }
  if (op->noperands == 3) { /* the parity given: nothing to count */
    LTile *par = get_fixed(L, op->operands[2]);
    if (!par) return;
    WaitCtx c = {op, addr, LLVMBuildAnd(L->b, par->regs[0], const_i32(L, 1), "parity"), mi};
    if (op->attr[0])
      guarded(L, is_elected(L), spin, &c);
    else
      spin(L, &c);
    return;
  }
  LLVMValueRef bits = LLVMBuildLoad2(L->b, L->t_i32, mi->tracker, "");
  LLVMValueRef parity = LLVMBuildAnd(L->b, LLVMBuildLShr(L->b, bits, i->regs[0], ""), const_i32(L, 1), "parity");
  WaitCtx c = {op, addr, parity, mi};
  if (op->attr[0])
    guarded(L, is_elected(L), spin, &c);
  else
    spin(L, &c);
  /* This thread now waits for the next phase of that barrier. Threads
   * that did not wait (elected waits) keep their bits; they never wait on
   * this array. */
  LLVMValueRef flipped = LLVMBuildXor(L->b, bits, LLVMBuildShl(L->b, const_i32(L, 1), i->regs[0], ""), "");
  if (op->attr[0]) flipped = LLVMBuildSelect(L->b, is_elected(L), flipped, bits, "");
  LLVMBuildStore(L->b, flipped, mi->tracker);
}

/* ---- TMA ---- */

typedef struct TmaCtx {
  const Op *op;
  LBuf *buf;
  LLVMValueRef map;   /* i64 generic address of the CUtensorMap */
  LLVMValueRef bar;   /* i32 shared address, loads */
  LLVMValueRef coords[TILE_MAX_RANK];
  const DescBox *box;
  int rank;
  bool store;
} TmaCtx;

/* One box of a copy: its shared-memory offset in the tile's buffer and
 * its coordinates' additions along the last and the first dimension. */
typedef struct BoxCtx {
  const TmaCtx *tma;
  const char *text, *cons;
  int64_t off, add_last, add_first;
  int multicast; /* programs the box lands in (0: this one only) */
} BoxCtx;

static void issue_box(Lower *L, void *p) {
  BoxCtx *b = p;
  const TmaCtx *c = b->tma;
  int R = c->rank;
  LLVMValueRef o = const_i32(L, b->off);
  LLVMValueRef sm = smem_addr32(L, LLVMBuildGEP2(L->b, L->t_i8, c->buf->ptr, &o, 1, ""));
  LLVMValueRef args[4 + TILE_MAX_RANK];
  int a = 0;
  if (c->store) {
    args[a++] = c->map;
    args[a++] = sm;
  } else {
    args[a++] = sm;
    args[a++] = c->map;
    args[a++] = c->bar;
  }
  for (int d = R - 1; d >= 0; d--) {
    LLVMValueRef x = c->coords[d];
    int64_t add = d == R - 1 ? b->add_last : (d == 0 && R > 1 ? b->add_first : 0);
    if (add) x = LLVMBuildAdd(L->b, x, const_i32(L, add), "");
    args[a++] = x;
  }
  if (b->multicast) args[a++] = LLVMConstInt(L->t_i16, (1u << b->multicast) - 1, 0); /* every program of the cluster */
  llvm_asm(L, b->text, b->cons, L->t_void, args, a, true);
}

/* The program of the cluster that issues box `i` of a multicast copy:
 * the boxes go round the programs, so each issues 1/C of them. */
static LLVMValueRef issues_box(Lower *L, int i, int C) {
  LLVMValueRef rank = call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.cluster.ctarank", L->t_i32, NULL, 0);
  return LLVMBuildICmp(L->b, LLVMIntEQ, rank, const_i32(L, i % C), "");
}

static void issue_boxes(Lower *L, void *p) {
  TmaCtx *c = p;
  const DescBox *db = c->box;
  TType t = c->op->operands[c->store ? 1 : 0]->type;
  int R = c->rank;
  int C = c->store ? 0 : (int)c->op->attr[0];
  if (C < 2) C = 0;
  int nj = t.shape[R - 1] / db->box[R - 1], nk = R > 1 ? t.shape[0] / db->box[0] : 1;
  int row_bytes = c->buf->layout.swizzle ? c->buf->layout.swizzle : db->box[R - 1] * db->elem_bytes;
  int64_t rows_per_d0 = 1;
  for (int d = 1; d + 1 < R; d++) rows_per_d0 *= t.shape[d];
  char text[320];
  size_t n = 0;
  if (c->store)
    n += (size_t)snprintf(text, sizeof text, "cp.async.bulk.tensor.%dd.global.shared::cta.bulk_group [$0, {", R);
  else
    n += (size_t)snprintf(text, sizeof text,
                          "cp.async.bulk.tensor.%dd.shared::cluster.global.mbarrier::complete_tx::bytes%s [$0], [$1, {",
                          R, C ? ".multicast::cluster" : "");
  int first = c->store ? 2 : 3;
  for (int d = 0; d < R; d++) n += (size_t)snprintf(text + n, sizeof text - n, d ? ", $%d" : "$%d", first + d);
  if (c->store)
    snprintf(text + n, sizeof text - n, "}], [$1];");
  else if (C)
    snprintf(text + n, sizeof text - n, "}], [$2], $%d;", first + R);
  else
    snprintf(text + n, sizeof text - n, "}], [$2];");
  char cons[96];
  size_t cn = (size_t)snprintf(cons, sizeof cons, c->store ? "l,r" : "r,l,r");
  for (int d = 0; d < R; d++) cn += (size_t)snprintf(cons + cn, sizeof cons - cn, ",r");
  snprintf(cons + cn, sizeof cons - cn, C ? ",h,~{memory}" : ",~{memory}");
  for (int k = 0; k < nk; k++)
    for (int j = 0; j < nj; j++) {
      int64_t off = (int64_t)j * smem_atom_block_bytes(&c->buf->layout) + (int64_t)k * db->box[0] * rows_per_d0 * row_bytes;
      if (R == 1) off = (int64_t)j * smem_atom_block_bytes(&c->buf->layout);
      BoxCtx b = {c, text, cons, off, (int64_t)j * db->box[R - 1], (int64_t)k * db->box[0], C};
      if (C)
        guarded(L, issues_box(L, k * nj + j, C), issue_box, &b);
      else
        issue_box(L, &b);
    }
  if (c->store) {
    llvm_asm(L, "cp.async.bulk.commit_group;", "~{memory}", L->t_void, NULL, 0, true);
    /* a store that is not deferred completes here, global writes
     * included (not only the read of its buffer): a later load_block of
     * the same bytes, issued by this thread, sees them (program order) */
    if (!c->op->attr[0]) llvm_asm(L, "cp.async.bulk.wait_group 0;", "~{memory}", L->t_void, NULL, 0, true);
  }
}

static void store_wait(Lower *L, void *p) {
  const Op *op = p;
  char text[64];
  snprintf(text, sizeof text, "cp.async.bulk.wait_group.read %d;", (int)op->attr[0]);
  llvm_asm(L, text, "~{memory}", L->t_void, NULL, 0, true);
}

void lower_tma_store_wait(Lower *L, const Op *op) { guarded(L, is_elected(L), store_wait, (void *)op); }

/* Debug mode: the row start of a box must be on 16 bytes (TMA traps with
 * an illegal instruction otherwise); say which copy and trap. */
typedef struct OffsetCtx {
  const TmaCtx *tma;
  LLVMValueRef inner;
} OffsetCtx;

static void report_offset(Lower *L, void *p) {
  OffsetCtx *c = p;
  const Value *desc = c->tma->op->operands[c->tma->store ? 0 : 1];
  char fmt[384];
  snprintf(fmt, sizeof fmt,
           "tile: %s offset %%d in the last dimension of '%s' is not a multiple of %d elements (16 bytes, TMA row "
           "alignment): kernel '%s', program (%%d, %%d, %%d)\n",
           c->tma->store ? "store_block" : "load_block", L->f->params[desc->index].name,
           16 / c->tma->box->elem_bytes, L->f->name);
  LLVMValueRef vals[4] = {c->inner, call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.ctaid.x", L->t_i32, NULL, 0),
                          call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.ctaid.y", L->t_i32, NULL, 0),
                          call_intrinsic(L, "llvm.nvvm.read.ptx.sreg.ctaid.z", L->t_i32, NULL, 0)};
  lower_vprintf(L, fmt, vals, 4);
  call_intrinsic(L, "llvm.trap", L->t_void, NULL, 0);
}

static void check_row_alignment(Lower *L, const TmaCtx *c) {
  OffsetCtx oc = {c, c->coords[c->rank - 1]};
  LLVMValueRef bytes = LLVMBuildMul(L->b, oc.inner, const_i32(L, c->box->elem_bytes), "");
  LLVMValueRef bad = LLVMBuildICmp(L->b, LLVMIntNE, LLVMBuildAnd(L->b, bytes, const_i32(L, 15), ""), const_i32(L, 0), "");
  guarded(L, bad, report_offset, &oc);
}

static bool tma_prepare(Lower *L, const Op *op, bool store, TmaCtx *c) {
  memset(c, 0, sizeof *c);
  c->op = op;
  c->store = store;
  const Value *desc = op->operands[store ? 0 : 1];
  c->buf = get_buf(L, op->operands[store ? 1 : 0]);
  LTile *d = get_fixed(L, desc);
  if (!c->buf || !d) return false;
  if (desc->def || (int)desc->index >= L->k->sched.nparams || !L->k->sched.descs[desc->index].used) {
    lower_error(L, op, "internal: TMA copy without a descriptor box");
    return false;
  }
  c->box = &L->k->sched.descs[desc->index];
  c->rank = desc->type.desc_rank;
  c->map = LLVMBuildPtrToInt(L->b, d->regs[0], L->t_i64, "tensor_map");
  uint32_t first = store ? 2 : 4;
  for (int i = 0; i < c->rank; i++) {
    LTile *x = get_fixed(L, op->operands[first + (uint32_t)i]);
    if (!x) return false;
    c->coords[i] = x->regs[0];
  }
  if (!store) {
    LTile *i = get_fixed(L, op->operands[3]);
    c->bar = i ? mbar_addr(L, op->operands[2], i->regs[0]) : NULL;
    if (!c->bar) return false;
  }
  return true;
}

static void checked_issue(Lower *L, void *p) {
  TmaCtx *c = p;
  if (L->opt->debug_barriers) check_row_alignment(L, c);
  issue_boxes(L, c);
}

void lower_tma_load(Lower *L, const Op *op) {
  TmaCtx c;
  if (tma_prepare(L, op, false, &c)) guarded(L, is_elected(L), checked_issue, &c);
}

void lower_tma_store(Lower *L, const Op *op) {
  TmaCtx c;
  if (tma_prepare(L, op, true, &c)) guarded(L, is_elected(L), checked_issue, &c);
}
