/* schedule.c - the scheduling pass (see schedule.h): tensor-core dots,
 * their operand buffers, and TMA block loads and stores.
 *
 * Order of work on one kernel:
 *   1. decide every tensor descriptor's box and swizzle from all its uses
 *      (one CUtensorMap serves every load_block/store_block of it);
 *   2. rewrite @pipeline loops (schedule_pipeline.c), which fill their
 *      dots' operand buffers from rings;
 *   3. rewrite the remaining wgmma dots: each operand gets a buffer filled
 *      where its value is made (a TMA load_block, or registers stored once
 *      after their definition when that is outside the dot's loop, else
 *      right before the dot), then wgmma + wgmma_wait;
 *   4. rewrite the remaining load_block (TMA into a buffer, wait, read into
 *      registers) and every store_block (registers into a buffer, fence,
 *      barrier, TMA store).
 * Barriers: a buffer is only written after a barrier (earlier readers,
 * such as the previous iteration's wgmma, are done) and only read by the
 * async proxy after the writers' proxy fence and a barrier.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../layout/mma.h"
#include "../layout/smem.h"
#include "schedule_internal.h"

/* TMA boxes: at most 256 elements per dimension (cuTensorMapEncodeTiled),
 * the innermost at most one 128-byte swizzle span and at least 16 bytes. */
#define TMA_MAX_BOX 256
#define TMA_MIN_INNER_BYTES 16

/* ---- engines ---- */

static bool is_half(unsigned k) { return k == SK_BF16 || k == SK_F16; }
static bool is_fp8(unsigned k) { return k == SK_F8E4M3 || k == SK_F8E5M2; }

DotEngine dot_engine(const Op *dot, int num_warps) {
  const TType *a = &dot->operands[0]->type, *b = &dot->operands[1]->type, *c = &dot->results[0].type;
  if (a->rank != 2 || c->kind != SK_F32) return DOT_FMA;
  int M = a->shape[0], K = a->shape[1], N = b->shape[1];
  bool half = is_half(a->kind) && a->kind == b->kind;
  bool fp8 = is_fp8(a->kind) && is_fp8(b->kind);
  WgmmaShape ws;
  if ((half || (fp8 && K >= 32)) && wgmma_shape(M, N, K, num_warps, &ws)) return DOT_WGMMA;
  MmaShape ms;
  if (half && mma_shape(M, N, K, num_warps, &ms)) return DOT_MMA;
  return DOT_FMA;
}

/* ---- helpers shared with the pipeliner ---- */

void sched_error(Sched *s, const Op *op, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!s->failed) diag_error(s->diags, op ? op->loc : s->f->loc, "GPU back end: %s", msg);
  s->failed = true;
}

/* Allocations go to the top of the kernel, in the order they are made
 * (after the last one; the ops around may have been rewritten since). */
static IrBuilder alloc_point(Sched *s) {
  Block *body = &s->f->body;
  Op *next = s->last_alloc ? s->last_alloc->next : body->first;
  return next ? irb_before(s->a, next) : irb_at_end(s->a, body);
}

Value *sched_alloc_smem(Sched *s, SrcLoc loc, ScalarKind elem, int rank, const int32_t *shape, int swizzle) {
  IrBuilder b = alloc_point(s);
  b.loc = loc;
  TType t = type_smem(elem, rank, shape);
  Op *op = irb_op(&b, OP_SMEM_ALLOC, 0, NULL, &t);
  op->attr[1] = swizzle;
  s->last_alloc = op;
  return &op->results[0];
}

Value *sched_alloc_mbar(Sched *s, SrcLoc loc, int n, int count, int first_parity) {
  IrBuilder b = alloc_point(s);
  b.loc = loc;
  TType t = type_mbar(n);
  Op *op = irb_op(&b, OP_MBAR_ALLOC, 0, NULL, &t);
  op->attr[1] = count;
  op->attr[2] = first_parity;
  s->last_alloc = op;
  return &op->results[0];
}

void sched_void(IrBuilder *b, OpKind kind, int n, Value *const *ops, int64_t attr0) {
  Op *op = irb_op(b, kind, n, ops, NULL);
  op->attr[0] = attr0;
}

void sched_barrier(IrBuilder *b) {
  Op *prev = b->before ? b->before->prev : b->block->last;
  if (prev && prev->kind == OP_BARRIER && !prev->attr[0]) return;
  irb_op(b, OP_BARRIER, 0, NULL, NULL);
}

Value *sched_strip_trans(Value *v, bool *trans) {
  *trans = false;
  while (v->def && v->def->kind == OP_TRANS && v->type.rank == 2) {
    *trans = !*trans;
    v = v->def->operands[0];
  }
  return v;
}

const DescBox *sched_desc_box(Sched *s, const Value *desc) {
  if (desc->def || desc->owner != &s->f->body) return NULL;
  return &s->res->descs[desc->index];
}

Op *sched_tma_load(IrBuilder *b, Value *buf, Value *desc, Value *bars, Value *index, Value *const *coords, int rank) {
  Value *ops[4 + TILE_MAX_RANK] = {buf, desc, bars, index};
  for (int i = 0; i < rank; i++) ops[4 + i] = coords[i];
  return irb_op(b, OP_TMA_LOAD, 4 + rank, ops, NULL);
}

/* ---- descriptors: one box per tensor ---- */

static int imin(int a, int b) { return a < b ? a : b; }

/* The largest slot of a store that goes out in pieces: 16 KiB, one
 * 128-row column of 128-byte rows, so that two slots and four 48 KiB
 * stages of a 128 x 256 or 256 x 128 GEMM fit in 227 KiB. */
#define STORE_PART_BYTES 16384
static Op *enclosing_loop(const Op *op);

static void note_desc_use(Sched *s, const Op *op, TType tile) {
  const Value *d = op->operands[0];
  DescBox *db = (DescBox *)sched_desc_box(s, d);
  if (!db) {
    sched_error(s, op, "tensor descriptors must be kernel parameters");
    return;
  }
  int rank = d->type.desc_rank, eb = scalar_bytes((ScalarKind)d->type.pointee);
  if (tile.shape[rank - 1] * eb < TMA_MIN_INNER_BYTES) {
    sched_error(s, op, "a TMA copy moves rows of at least %d bytes; this tile's rows are %d bytes (make the last "
                "dimension wider)", TMA_MIN_INNER_BYTES, tile.shape[rank - 1] * eb);
    return;
  }
  int32_t box[TILE_MAX_RANK] = {0};
  for (int i = 0; i < rank; i++) box[i] = imin(tile.shape[i], TMA_MAX_BOX);
  box[rank - 1] = imin(tile.shape[rank - 1], SMEM_MAX_SWIZZLE / eb);
  /* a store in a loop goes out box column by box column through small
   * slots (store_in_parts): narrower boxes when a whole-height column
   * would make a slot larger than STORE_PART_BYTES */
  if (op->kind == OP_BLOCK_STORE && rank == 2 && enclosing_loop(op))
    while (box[0] * box[1] * eb > STORE_PART_BYTES && box[1] * eb > TMA_MIN_INNER_BYTES) box[1] /= 2;
  if (!db->used) {
    db->used = true;
    db->rank = rank;
    db->elem_bytes = eb;
    memcpy(db->box, box, sizeof box);
  }
  for (int i = 0; i < rank; i++) db->box[i] = imin(db->box[i], box[i]);
}

static void collect_descs(Sched *s, Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    if (op->kind == OP_BLOCK_LOAD) note_desc_use(s, op, op->results[0].type);
    if (op->kind == OP_BLOCK_STORE) note_desc_use(s, op, op->operands[1]->type);
    for (int r = 0; r < op->nregions; r++) collect_descs(s, &op->regions[r]);
  }
}

/* Every use must be whole boxes in the middle dimensions (a box there is
 * a dense block of rows), and unswizzled boxes must span the tile's row. */
static void check_desc_use(Sched *s, const Op *op, TType tile) {
  const DescBox *db = sched_desc_box(s, op->operands[0]);
  if (!db) return;
  for (int i = 1; i + 1 < db->rank; i++)
    if (db->box[i] != tile.shape[i])
      sched_error(s, op, "a TMA tile must match the descriptor's other uses in dimension %d (%d against %d)", i,
                  tile.shape[i], db->box[i]);
  if (!db->swizzle && db->box[db->rank - 1] != tile.shape[db->rank - 1])
    sched_error(s, op, "tiles of %d-byte rows cannot be combined with wider tiles of the same descriptor",
                db->box[db->rank - 1] * db->elem_bytes);
}

static void check_descs(Sched *s, Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    if (op->kind == OP_BLOCK_LOAD) check_desc_use(s, op, op->results[0].type);
    if (op->kind == OP_BLOCK_STORE) check_desc_use(s, op, op->operands[1]->type);
    for (int r = 0; r < op->nregions; r++) check_descs(s, &op->regions[r]);
  }
}

static void plan_descs(Sched *s) {
  collect_descs(s, &s->f->body);
  for (int i = 0; i < s->res->nparams; i++) {
    DescBox *db = &s->res->descs[i];
    if (db->used) db->swizzle = smem_pick_swizzle(db->elem_bytes, db->box[db->rank - 1]);
  }
  check_descs(s, &s->f->body);
}

/* ---- operands of wgmma ---- */

static Block *value_block(const Value *v) { return v->def ? v->def->parent : v->owner; }

static bool encloses(const Block *outer, const Block *inner) {
  for (const Block *b = inner; b; b = b->parent ? b->parent->parent : NULL)
    if (b == outer) return true;
  return false;
}

/* Integer offsets of a block op as i32 (TMA coordinates are 32-bit). */
static void block_coords(IrBuilder *b, const Op *op, uint32_t first, Value **out) {
  for (uint32_t i = first; i < op->noperands; i++) out[i - first] = irb_cast(b, op->operands[i], type_scalar(SK_I32));
}

/* A load_block into a buffer of its own, waited for; the op is replaced
 * by a read of the buffer (which goes away when nothing else uses it). */
static Value *block_load_to_buffer(Sched *s, Op *bl) {
  const DescBox *db = sched_desc_box(s, bl->operands[0]);
  if (!db) return NULL;
  TType t = bl->results[0].type;
  Value *buf = sched_alloc_smem(s, bl->loc, (ScalarKind)t.kind, t.rank, t.shape, db->swizzle);
  Value *bars = sched_alloc_mbar(s, bl->loc, 1, 1, 0);
  IrBuilder b = irb_before(s->a, bl);
  Value *zero = irb_const_int(&b, SK_I32, 0);
  Value *coords[TILE_MAX_RANK];
  block_coords(&b, bl, 1, coords);
  sched_barrier(&b); /* earlier readers of the buffer are done */
  Op *ex = irb_op(&b, OP_MBAR_EXPECT, 2, (Value *[]){bars, zero}, NULL);
  ex->attr[0] = type_numel(t) * scalar_bytes((ScalarKind)t.kind);
  sched_tma_load(&b, buf, bl->operands[0], bars, zero, coords, t.rank);
  irb_op(&b, OP_MBAR_WAIT, 2, (Value *[]){bars, zero}, NULL);
  Value *regs = irb_value(&b, OP_SMEM_LOAD, 1, (Value *[]){buf}, t);
  bl->results[0].repl = regs;
  ir_unlink(bl);
  ir_apply_replacements(s->f);
  return buf;
}

/* The buffer a smem_load reads, when v is one (a rewritten load_block). */
static Value *buffer_of_read(Value *v) {
  return v->def && v->def->kind == OP_SMEM_LOAD ? v->def->operands[0] : NULL;
}

/* Where registers are stored for a dot: once, after their definition,
 * when that is outside the dot's block; else right before the dot. */
static IrBuilder staging_point(Sched *s, Op *dot, Value *v, bool *hoisted) {
  Block *vb = value_block(v);
  *hoisted = vb != dot->parent && encloses(vb, dot->parent);
  if (!*hoisted) return irb_before(s->a, dot);
  IrBuilder b = v->def ? (v->def->next ? irb_before(s->a, v->def->next) : irb_at_end(s->a, vb))
                       : (vb->first ? irb_before(s->a, vb->first) : irb_at_end(s->a, vb));
  b.loc = dot->loc; /* the ops serve the dot */
  return b;
}

/* An operand in a buffer: the buffer holds it, or its transpose. */
typedef struct StagedOperand {
  Value *buf;
  bool trans;
} StagedOperand;

typedef struct Staging {
  Value *buf[2], *val[2];
  int n;
} Staging;

/* A buffer for register tile v (shape as given). Stores at the dot are
 * collected in `late` and written together. */
static Value *stage_registers(Sched *s, Op *dot, Value *v, Staging *late) {
  int eb = scalar_bytes((ScalarKind)v->type.kind);
  Value *buf = sched_alloc_smem(s, v->def ? v->def->loc : dot->loc, (ScalarKind)v->type.kind, 2, v->type.shape,
                                smem_pick_swizzle(eb, v->type.shape[1]));
  bool hoisted;
  IrBuilder b = staging_point(s, dot, v, &hoisted);
  if (!hoisted) {
    late->buf[late->n] = buf;
    late->val[late->n++] = v;
    return buf;
  }
  sched_barrier(&b);
  sched_void(&b, OP_SMEM_STORE, 2, (Value *[]){buf, v}, 0);
  sched_void(&b, OP_FENCE_ASYNC, 0, NULL, 0);
  sched_barrier(&b);
  return buf;
}

/* An operand (the value under any trans) into a buffer. `need_trans` < 0:
 * any orientation; else the buffer must hold the operand transposed
 * (1) or not (0), as fp8 requires K-major operands. */
static StagedOperand stage_operand(Sched *s, Op *dot, Value *operand, int need_trans, Staging *late) {
  bool trans;
  Value *src = sched_strip_trans(operand, &trans);
  if (need_trans < 0 || trans == (bool)need_trans) {
    if (src->def && src->def->kind == OP_BLOCK_LOAD) {
      Value *buf = block_load_to_buffer(s, src->def);
      return (StagedOperand){buf, trans};
    }
    Value *read = buffer_of_read(src);
    if (read) return (StagedOperand){read, trans};
    return (StagedOperand){stage_registers(s, dot, src, late), trans};
  }
  /* The other orientation: store the registers of the operand itself
   * (need_trans 0) or of its transpose (1); trans is a relabelling of the
   * layout, so either is a plain store. */
  Value *v = operand;
  if (need_trans) {
    IrBuilder b = irb_before(s->a, dot);
    TType t = operand->type;
    int32_t tshape[2] = {t.shape[1], t.shape[0]};
    v = irb_value(&b, OP_TRANS, 1, (Value *[]){operand}, type_with_shape(t, 2, tshape));
    v->def->attr[0] = 0x01; /* perm (1, 0): bits 4i..4i+3 hold perm[i] */
  }
  return (StagedOperand){stage_registers(s, dot, v, late), need_trans == 1};
}

/* A is read from registers when it is computed (not loaded): that saves
 * the trip through shared memory (flash attention's P). A value carried
 * by a `for` loop (a body argument other than the induction variable)
 * counts as computed: the P of the previous key block in a
 * software-pipelined attention loop. An 8-bit A is read from registers
 * only when a reshape computes it: its register layout is not an
 * accumulator's (four consecutive k per register against two), and the
 * kernel that reorders k with reshape and trans
 * (flash_attention_ws_fp8.tile's P_IN_REGISTERS) makes the accumulator's
 * registers the operand's; any other 8-bit A goes through shared memory,
 * which costs no more than the conversion would. */
bool sched_a_in_registers(const Value *a) {
  if (is_fp8(a->type.kind)) return a->def && a->def->kind == OP_RESHAPE;
  if (!a->def) return a->owner && a->owner->parent && a->owner->parent->kind == OP_FOR && a->index > 0;
  switch (a->def->kind) {
  case OP_LOAD: case OP_BLOCK_LOAD: case OP_SMEM_LOAD: case OP_TRANS: return false;
  default: return true;
  }
}

Op *sched_wgmma_dot(Sched *s, Op *dot, int pending) {
  Value *a = dot->operands[0], *b = dot->operands[1], *acc = dot->operands[2];
  WgmmaShape ws;
  wgmma_shape(a->type.shape[0], b->type.shape[1], a->type.shape[1], s->num_warps, &ws);
  if (wgmma_acc_regs(&ws) > WGMMA_MAX_ACC_REGS) {
    sched_error(s, dot, "the accumulator of this %dx%d dot needs %d registers per thread with %d warps (at most %d): "
                "use more warps or a smaller block", ws.M, ws.N, wgmma_acc_regs(&ws), s->num_warps, WGMMA_MAX_ACC_REGS);
    return NULL;
  }
  bool fp8 = is_fp8(a->type.kind);
  Staging late = {0};
  StagedOperand A = {0}, B;
  Value *a_regs = NULL;
  if (sched_a_in_registers(a))
    a_regs = a;
  else
    A = stage_operand(s, dot, a, fp8 ? 0 : -1, &late);
  B = stage_operand(s, dot, b, fp8 ? 1 : -1, &late);
  if (s->failed) return NULL;
  IrBuilder ib = irb_before(s->a, dot);
  if (late.n) {
    /* an A operand staged alone: barriers the lowering may narrow to each
     * warpgroup, when each writes the rows its own product reads
     * (barrier {operand = 1}, lower.c) */
    bool a_only = late.n == 1 && late.buf[0] == A.buf && !A.trans;
    Op *before = dot->prev;
    sched_barrier(&ib);
    if (a_only && dot->prev != before) dot->prev->attr[0] = 1;
    for (int i = 0; i < late.n; i++) sched_void(&ib, OP_SMEM_STORE, 2, (Value *[]){late.buf[i], late.val[i]}, 0);
    sched_void(&ib, OP_FENCE_ASYNC, 0, NULL, 0);
    irb_op(&ib, OP_BARRIER, 0, NULL, NULL)->attr[0] = a_only;
  }
  Value *aop = a_regs ? a_regs : A.buf;
  Op *mma = irb_op(&ib, OP_WGMMA, 3, (Value *[]){aop, B.buf, acc}, &acc->type);
  mma->attr[0] = !a_regs && A.trans;
  mma->attr[1] = B.trans;
  Op *w = irb_op(&ib, OP_WGMMA_WAIT, 1, (Value *[]){&mma->results[0]}, &acc->type);
  w->attr[0] = pending;
  dot->results[0].repl = &w->results[0];
  ir_unlink(dot);
  ir_apply_replacements(s->f);
  return w;
}

/* ---- the walk ---- */

typedef void (*OpVisit)(Sched *s, Op *op);

/* Visits ops of a kind (ops may be rewritten while visited). */
static void visit_kind(Sched *s, Block *b, OpKind kind, OpVisit fn) {
  for (Op *op = b->first, *next; op && !s->failed; op = next) {
    next = op->next;
    for (int r = 0; r < op->nregions; r++) visit_kind(s, &op->regions[r], kind, fn);
    if (op->kind == kind) fn(s, op);
  }
}

static void visit_pipeline(Sched *s, Op *op) {
  if (op->attr[0] >= 2) sched_pipeline_loop(s, op);
}

static void visit_dot(Sched *s, Op *op) {
  if (op->operands[0]->type.rank == 2 && dot_engine(op, s->num_warps) == DOT_WGMMA) sched_wgmma_dot(s, op, 0);
}

static void visit_block_load(Sched *s, Op *op) { block_load_to_buffer(s, op); }

static Op *enclosing_loop(const Op *op) {
  for (Block *b = op->parent; b && b->parent; b = b->parent->parent)
    if (b->parent->kind == OP_FOR || b->parent->kind == OP_WHILE) return b->parent;
  return NULL;
}

/* A store_block in a loop of a tile wider than 2 boxes goes out box
 * column by box column through a ring of 2 box-wide slots: before a slot
 * is written, all stores but the newest have read theirs (the columns
 * are a power of two of boxes, so the slot's last store is the one before
 * the newest). The epilogue of a persistent kernel then takes 2 boxes of
 * shared memory instead of the whole tile, which leaves room for another
 * stage of the ring. */
#define STORE_PART_SLOTS 2

static void store_in_parts(Sched *s, Op *op, Op *loop, const DescBox *db) {
  Value *v = op->operands[1];
  TType t = v->type;
  int width = db->box[1], parts = t.shape[1] / width;
  int32_t shape[3] = {STORE_PART_SLOTS, t.shape[0], width};
  Value *ring = sched_alloc_smem(s, op->loc, (ScalarKind)t.kind, 3, shape, db->swizzle);
  ring->def->attr[2] = 1;
  IrBuilder b = irb_before(s->a, op);
  Value *coords[2];
  block_coords(&b, op, 2, coords);
  for (int j = 0; j < parts; j++) {
    Value *slot = irb_const_int(&b, SK_I32, j % STORE_PART_SLOTS);
    Value *view = irb_value(&b, OP_SMEM_INDEX, 2, (Value *[]){ring, slot},
                            type_smem((ScalarKind)t.kind, 2, (int32_t[]){t.shape[0], width}));
    sched_void(&b, OP_TMA_STORE_WAIT, 1, (Value *[]){ring}, STORE_PART_SLOTS - 1);
    sched_barrier(&b);
    sched_void(&b, OP_SMEM_STORE, 2, (Value *[]){view, v}, (int64_t)j * width);
    sched_void(&b, OP_FENCE_ASYNC, 0, NULL, 0);
    sched_barrier(&b);
    Value *col = j ? irb_binary(&b, OP_ADD, coords[1], irb_const_int(&b, SK_I32, (int64_t)j * width)) : coords[1];
    Op *st = irb_op(&b, OP_TMA_STORE, 4, (Value *[]){op->operands[0], view, coords[0], col}, NULL);
    st->attr[0] = 1; /* deferred */
  }
  ir_unlink(op);
  IrBuilder post = loop->next ? irb_before(s->a, loop->next) : irb_at_end(s->a, loop->parent);
  post.loc = op->loc;
  sched_void(&post, OP_TMA_STORE_WAIT, 1, (Value *[]){ring}, 0);
}

/* registers -> buffer -> TMA store. In a loop (a persistent kernel's
 * tiles) the store is not waited for where it is issued: the next
 * iteration waits before it writes the buffer again, and after the loop
 * the last store is waited for, so the store of one tile overlaps the
 * work of the next. */
static void visit_block_store(Sched *s, Op *op) {
  const DescBox *db = sched_desc_box(s, op->operands[0]);
  if (!db) return;
  Value *v = op->operands[1];
  TType t = v->type;
  Op *in_loop = enclosing_loop(op);
  if (in_loop && t.rank == 2 && db->swizzle && t.shape[1] > STORE_PART_SLOTS * db->box[1] && db->box[0] == t.shape[0]) {
    store_in_parts(s, op, in_loop, db);
    return;
  }
  Value *buf = sched_alloc_smem(s, op->loc, (ScalarKind)t.kind, t.rank, t.shape, db->swizzle);
  IrBuilder b = irb_before(s->a, op);
  Value *ops[2 + TILE_MAX_RANK] = {op->operands[0], buf};
  block_coords(&b, op, 2, ops + 2);
  Op *loop = in_loop;
  if (loop) sched_void(&b, OP_TMA_STORE_WAIT, 1, (Value *[]){buf}, 0);
  sched_barrier(&b);
  sched_void(&b, OP_SMEM_STORE, 2, (Value *[]){buf, v}, 0);
  sched_void(&b, OP_FENCE_ASYNC, 0, NULL, 0);
  sched_barrier(&b);
  Op *st = irb_op(&b, OP_TMA_STORE, 2 + t.rank, ops, NULL);
  ir_unlink(op);
  if (!loop) return;
  st->attr[0] = 1; /* deferred */
  IrBuilder post = loop->next ? irb_before(s->a, loop->next) : irb_at_end(s->a, loop->parent);
  post.loc = op->loc;
  sched_void(&post, OP_TMA_STORE_WAIT, 1, (Value *[]){buf}, 0);
}

/* smem_load results nothing uses (the dot took the buffer itself). */
static void count_uses(Block *b, PtrMap *uses) {
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++)
      ptrmap_put(uses, op->operands[i], (void *)((uintptr_t)ptrmap_get(uses, op->operands[i]) + 1));
    for (int r = 0; r < op->nregions; r++) count_uses(&op->regions[r], uses);
  }
}

static bool drop_unused_reads(Block *b, PtrMap *uses) {
  bool dropped = false;
  for (Op *op = b->first, *next; op; op = next) {
    next = op->next;
    for (int r = 0; r < op->nregions; r++) dropped |= drop_unused_reads(&op->regions[r], uses);
    if ((op->kind == OP_SMEM_LOAD || op->kind == OP_TRANS) && !ptrmap_get(uses, &op->results[0])) {
      ir_unlink(op);
      dropped = true;
    }
  }
  return dropped;
}

/* ---- deferred wgmma waits ---- */

/* Operands of one wgmma_wait: the accumulators of a few dots and the
 * tiles tied through it (tie_operands; past this many, the rest are not
 * tied, which only loses the ordering hint). */
#define WAIT_TIE_MAX 16

static bool op_uses(const Op *op, const Value *v) {
  for (uint32_t i = 0; i < op->noperands; i++)
    if (op->operands[i] == v) return true;
  for (int r = 0; r < op->nregions; r++)
    for (const Op *o = op->regions[r].first; o; o = o->next)
      if (op_uses(o, v)) return true;
  return false;
}

static bool uses_result(const Op *op, const Op *def) {
  for (uint32_t i = 0; i < def->nresults; i++)
    if (op_uses(op, &def->results[i])) return true;
  return false;
}

/* An op that only computes registers: pure, or an `if` whose branches
 * only compute (the yields included). */
static bool only_computes(const Op *op) {
  if (op->kind == OP_YIELD) return true;
  if (op->kind == OP_IF) {
    for (int r = 0; r < op->nregions; r++)
      for (const Op *o = op->regions[r].first; o; o = o->next)
        if (!only_computes(o)) return false;
    return true;
  }
  return (op_info[op->kind].flags & OPF_PURE) != 0;
}

/* The op of block `b` (a `for` body) that computes the next iteration's
 * value of the register A operand of the wgmma that `w` waits for, when
 * that operand is carried by the loop; NULL otherwise. ptxas gives the
 * carried value and its next one the same registers, so the next one
 * may only be written once the wgmma has read them: ptxas moves the wait
 * up to before the first write, above whatever was meant to overlap. */
static Op *next_register_a(Block *b, const Op *w) {
  const Op *mma = w->noperands ? w->operands[0]->def : NULL;
  if (!mma || mma->kind != OP_WGMMA || !b->parent || b->parent->kind != OP_FOR || !b->last ||
      b->last->kind != OP_YIELD)
    return NULL;
  const Value *a = mma->operands[0];
  if (a->def || a->owner != b || a->index == 0 || a->index > b->last->noperands) return NULL;
  Op *def = b->last->operands[a->index - 1]->def;
  return def && def->parent == b ? def : NULL;
}

/* Passes the f32 tile operands of `op` through the wait `w` (a new wait
 * with more operands and results takes its place), so that `op`, reading
 * the wait's results, comes after the wait in the PTX too. Returns the
 * new wait. */
static Op *tie_operands(Sched *s, Op *w, Op *op) {
  Value *vals[WAIT_TIE_MAX];
  uint32_t n = w->noperands;
  if (n >= WAIT_TIE_MAX) return w;
  TType types[WAIT_TIE_MAX];
  for (uint32_t i = 0; i < n; i++) vals[i] = w->operands[i], types[i] = w->results[i].type;
  for (uint32_t i = 0; i < op->noperands && n < WAIT_TIE_MAX; i++)
    if (op->operands[i]->type.rank > 0 && op->operands[i]->type.kind == SK_F32)
      vals[n] = op->operands[i], types[n++] = op->operands[i]->type;
  if (n == w->noperands) return w;
  Op *nw = ir_op_make(s->a, OP_WGMMA_WAIT, (int)n, vals, (int)n, types, w->loc);
  nw->attr[0] = w->attr[0];
  ir_insert_before(w, nw);
  ir_unlink(w);
  for (uint32_t i = 0; i < w->nresults; i++) w->results[i].repl = &nw->results[i];
  ir_apply_replacements(s->f);
  for (uint32_t i = w->noperands; i < n; i++)
    for (uint32_t j = 0; j < op->noperands; j++)
      if (op->operands[j] == vals[i]) op->operands[j] = &nw->results[i];
  return nw;
}

/* Moves each wgmma_wait of a block down to the first op that reads what
 * it waits for, past ops that only compute, past the consumers' turn (a
 * pass_turn passes it once the products are issued) and past other wgmmas
 * (each one more group that may stay pending), so that what is
 * independent of a product runs while the tensor cores compute it: flash
 * attention's softmax of key block j under the P.V product of block j - 1.
 * A wait never passes memory effects (stores, barriers, copies) or another
 * wait; the releases of ring stages that follow it (mbar_arrive) go down
 * with it, which only hands the stage back later. The block's waits are
 * moved last first, so that a later wait is out of the way of an earlier
 * one. */
static void defer_waits(Sched *s, Block *b) {
  enum { MAX_WAITS = 64 };
  Op *waits[MAX_WAITS];
  int n = 0;
  for (Op *op = b->first; op; op = op->next) {
    for (int r = 0; r < op->nregions; r++) defer_waits(s, &op->regions[r]);
    if (op->kind == OP_WGMMA_WAIT && n < MAX_WAITS) waits[n++] = op;
  }
  for (int i = n - 1; i >= 0; i--) {
    Op *w = waits[i];
    /* the releases of ring stages right after the wait (what the wgmmas
     * read is free once they are done) move with it */
    Op *tail = w;
    while (tail->next && tail->next->kind == OP_MBAR_ARRIVE) tail = tail->next;
    Op *stop = tail->next;
    int passed = 0;
    while (stop && !uses_result(stop, w) && stop->kind != OP_WGMMA_WAIT &&
           (only_computes(stop) ? stop->kind != OP_YIELD : stop->kind == OP_WGMMA || stop->kind == OP_TURN_PASS ||
                                    stop->kind == OP_TURN_WAIT)) {
      passed += stop->kind == OP_WGMMA;
      stop = stop->next;
    }
    /* the op that writes the next A stays after the wait */
    Op *next_a = next_register_a(b, w);
    bool tie = false;
    for (Op *o = tail->next; next_a && o != stop; o = o->next)
      if (o == next_a) {
        stop = o, tie = true;
        break;
      }
    if (stop == tail->next || !stop) continue; /* (a block ends in its terminator) */
    if (passed && tail != w) continue; /* a release stays before later wgmmas' issue */
    for (Op *o = w, *next; o != stop; o = next) {
      next = o == tail ? stop : o->next;
      ir_unlink(o);
      ir_insert_before(stop, o);
    }
    w->attr[0] += passed;
    if (tie) tie_operands(s, w, next_a);
  }
}

bool schedule_func(Func *f, const WarpRoles *roles, const AxisAnalysis *axes, Arena *a, Diags *diags,
                   bool pair_products, ScheduleResult *out) {
  Sched s = {f, a, diags, roles->compute_warps, axes, NULL, out, false, roles, {0}, 0, 0};
  ptrmap_init(&s.producer_ops, a);
  out->nparams = (int)f->body.nargs;
  out->descs = ARENA_ARRAY(a, DescBox, out->nparams ? out->nparams : 1);
  memset(out->descs, 0, sizeof(DescBox) * (size_t)(out->nparams ? out->nparams : 1));
  if (!f->body.first) return true;
  plan_descs(&s);
  if (!s.failed) visit_kind(&s, &f->body, OP_FOR, visit_pipeline);
  /* a cluster's only use here is sharing copies: say when none is */
  if (!s.failed && func_cluster(f) > 1 && !s.multicast_loads)
    diag_warning(diags, f->loc,
                 "GPU back end: kernel '%s' has '@cluster(%d)' but no pipelined load_block is the same in every program "
                 "of a cluster, so nothing is shared (derive its coordinates from cluster_id(): spec/annotations.md)",
                 f->name, f->cluster);
  if (!s.failed) visit_kind(&s, &f->body, OP_DOT, visit_dot);
  if (!s.failed) visit_kind(&s, &f->body, OP_BLOCK_LOAD, visit_block_load);
  if (!s.failed) visit_kind(&s, &f->body, OP_BLOCK_STORE, visit_block_store);
  /* A trans dropped can leave the read under it unused: until nothing
   * changes (a few rounds: reads are at most two deep). */
  for (bool again = true; again;) {
    PtrMap uses;
    ptrmap_init(&uses, a);
    count_uses(&f->body, &uses);
    again = drop_unused_reads(&f->body, &uses);
  }
  if (!s.failed) defer_waits(&s, &f->body);
  if (!s.failed) sched_order_memory(&s);
  sched_split_warps(&s);
  if (!s.failed && pair_products) sched_pair_products(&s);
  return !s.failed;
}
