/* schedule_pingpong.c - ping-pong consumers: with @warp_specialize on a
 * tile loop (a loop around pipelined loops, schedule_ws.c), the consumer
 * warpgroups take the loop's iterations in turn instead of sharing each.
 *
 * The producer walks every iteration as before, filling the rings in
 * order. In the consumer region the tile loop's body becomes
 *
 *   if (iteration % consumers == consumer_id) { the body, on 4 warps }
 *   else { the producer's walk of the body with only its ring positions:
 *          ring_next advances over the slots another warpgroup uses }
 *
 * so every consumer warpgroup's ring positions stay those of the
 * producer. A wait on an mbarrier names only the parity of the phase it
 * waits for, so no waiter may be two phases ahead of a barrier: a
 * warpgroup starts the pipelined loops of its iteration only after the
 * warpgroup of the previous iteration has finished its own (an order
 * barrier per warpgroup: wait on order[me] unless it is the loop's first
 * iteration; arrive on order[next] after the loops). That alternation is
 * the point of the form: one warpgroup's products run while the other
 * stores its tile. Everything else a consumer warpgroup uses is its own:
 * buffers and mbarriers only the consumers touch are made `consumers`
 * times larger and indexed by consumer_id; barriers synchronize one
 * warpgroup (lower.c); an op that needs the lowering's scratch shared
 * memory is an error (the warpgroups would share it).
 */
#include <string.h>

#include "schedule_internal.h"

static Op *find_tile_loop(Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    if (sched_is_tile_loop(op)) return op;
    for (int r = 0; r < op->nregions; r++) {
      Op *inner = find_tile_loop(&op->regions[r]);
      if (inner) return inner;
    }
  }
  return NULL;
}

/* ---- per-warpgroup buffers ---- */

typedef struct Uses {
  bool producer, consumer, ring_next;
} Uses;

static void note_uses(const Block *b, const Value *v, bool producer, Uses *u) {
  for (const Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->noperands; i++)
      if (op->operands[i] == v) {
        *(producer ? &u->producer : &u->consumer) = true;
        if (op->kind == OP_RING_NEXT) u->ring_next = true;
      }
    for (int r = 0; r < op->nregions; r++) note_uses(&op->regions[r], v, producer, u);
  }
}

/* Rewrites the slot index of every smem_index of `buf` in b, and the
 * barrier index of every mbarrier op on it, to cid * n + index. */
static void offset_indices(Sched *s, Block *b, Value *buf, Value *cid, int n) {
  for (Op *op = b->first; op; op = op->next) {
    for (int r = 0; r < op->nregions; r++) offset_indices(s, &op->regions[r], buf, cid, n);
    int at = -1;
    if (op->kind == OP_SMEM_INDEX && op->operands[0] == buf) at = 1;
    if ((op->kind == OP_MBAR_WAIT || op->kind == OP_MBAR_EXPECT || op->kind == OP_MBAR_ARRIVE) && op->operands[0] == buf)
      at = 1;
    if (op->kind == OP_TMA_LOAD && op->operands[2] == buf) at = 3;
    if (at < 0) continue;
    IrBuilder ib = irb_before(s->a, op);
    Value *base = irb_binary(&ib, OP_MUL, cid, irb_const_int(&ib, SK_I32, n));
    op->operands[at] = irb_binary(&ib, OP_ADD, base, op->operands[at]);
  }
}

/* A buffer of the consumers only becomes `consumers` copies. */
static void replicate(Sched *s, Op *alloc, Block *cons, Value *cid, IrBuilder *views) {
  int C = s->roles->consumers;
  Value *v = &alloc->results[0];
  TType t = v->type;
  if (alloc->kind == OP_MBAR_ALLOC) {
    int n = t.shape[0];
    v->type = type_mbar(C * n);
    offset_indices(s, cons, v, cid, n);
    return;
  }
  if (alloc->attr[2]) { /* a ring: C x its slots */
    int n = t.shape[0];
    v->type.shape[0] = C * n;
    offset_indices(s, cons, v, cid, n);
    return;
  }
  /* one tile: a ring of C slots, and this warpgroup's slot in its place */
  int32_t shape[TILE_MAX_RANK + 1] = {C};
  memcpy(shape + 1, t.shape, sizeof(int32_t) * (size_t)t.rank);
  Value *view = irb_value(views, OP_SMEM_INDEX, 2, (Value *[]){v, cid}, t);
  v->repl = view;
  ir_apply_replacements(s->f);
  v->repl = NULL;
  view->def->operands[0] = v;
  v->type = type_smem((ScalarKind)t.pointee, t.rank + 1, shape);
  alloc->attr[2] = 1;
}

static void replicate_consumer_buffers(Sched *s, Op *split, Value *cid, IrBuilder *views) {
  Block *body = &s->f->body;
  for (Op *op = body->first; op && op != split && !s->failed; op = op->next) {
    if (op->kind != OP_SMEM_ALLOC && op->kind != OP_MBAR_ALLOC) continue;
    Uses u = {false, false, false};
    note_uses(&split->regions[0], &op->results[0], true, &u);
    note_uses(&split->regions[1], &op->results[0], false, &u);
    if (u.producer || !u.consumer) continue; /* a ring the producer fills is shared */
    if (u.ring_next) {
      sched_error(s, op,
                  "ping-pong consumers: a ring that the consumers fill themselves (a pipelined loop of pointer loads) "
                  "cannot be shared by warpgroups that take turns; load with load_block");
      return;
    }
    replicate(s, op, &split->regions[1], cid, views);
  }
}

/* ---- the skipping walk ---- */

typedef struct Skip {
  Sched *s;
  PtrMap *original_of;
  PtrMap map; /* producer value -> its copy in the walk */
} Skip;

static Value *walk_value(Skip *k, Value *v) {
  Value *m = ptrmap_get(&k->map, v);
  if (m) return m;
  m = ptrmap_get(k->original_of, v);
  return m ? m : v;
}

static bool skipped(const Op *op) {
  switch (op->kind) {
  case OP_MBAR_WAIT: case OP_MBAR_EXPECT: case OP_TMA_LOAD: case OP_SMEM_INDEX: case OP_YIELD: return true;
  default: return false;
  }
}

static void end_block(Arena *a, Block *b, SrcLoc loc) { ir_append(b, ir_op_new(a, OP_YIELD, 0, 0, NULL, 0, loc)); }

/* The producer's ops of src without its copies into dst: loops, ifs,
 * scalar arithmetic and ring positions. */
static void walk(Skip *k, const Block *src, Block *dst) {
  Arena *a = k->s->a;
  for (Op *op = src->first; op; op = op->next) {
    if (skipped(op)) continue;
    Op *c;
    if (op->kind == OP_FOR || op->kind == OP_IF) {
      int nops = op->kind == OP_FOR ? 3 : 1;
      c = ir_op_new(a, (OpKind)op->kind, nops, 0, NULL, op->nregions, op->loc);
      for (int i = 0; i < nops; i++) c->operands[i] = walk_value(k, op->operands[i]);
      if (op->kind == OP_FOR) {
        TType iv = op->regions[0].args[0].type;
        ir_block_set_args(a, &c->regions[0], 1, &iv);
        ptrmap_put(&k->map, &op->regions[0].args[0], &c->regions[0].args[0]);
      }
      for (int r = 0; r < op->nregions; r++) {
        walk(k, &op->regions[r], &c->regions[r]);
        end_block(a, &c->regions[r], op->loc);
      }
    } else {
      TType rt = op->nresults ? op->results[0].type : (TType){0};
      c = ir_op_new(a, (OpKind)op->kind, (int)op->noperands, (int)op->nresults, op->nresults ? &rt : NULL, 0, op->loc);
      for (uint32_t i = 0; i < op->noperands; i++) c->operands[i] = walk_value(k, op->operands[i]);
      memcpy(c->attr, op->attr, sizeof c->attr);
      c->fattr = op->fattr;
      c->text = op->text;
      if (op->nresults) ptrmap_put(&k->map, &op->results[0], &c->results[0]);
    }
    ir_append(dst, c);
  }
}

/* ---- the order of the warpgroups ---- */

/* The op of b that is or holds a loop the producers feed. */
static bool holds_split_loop(Sched *s, const Op *op) {
  if (op->kind == OP_FOR && (uintptr_t)ptrmap_get(&s->producer_ops, op) == 2) return true;
  for (int r = 0; r < op->nregions; r++)
    for (const Op *in = op->regions[r].first; in; in = in->next)
      if (holds_split_loop(s, in)) return true;
  return false;
}

/* Before the first pipelined loop of the warpgroup's iteration: wait for
 * the previous iteration's warpgroup (not on the loop's first iteration);
 * after the last: let the next warpgroup go. */
static void order_turns(Sched *s, Block *mine, Value *cid, Value *not_first, SrcLoc loc) {
  Op *first = NULL, *last = NULL;
  for (Op *op = mine->first; op; op = op->next)
    if (holds_split_loop(s, op)) {
      if (!first) first = op;
      last = op;
    }
  if (!first) return;
  int C = s->roles->consumers;
  Value *order = sched_alloc_mbar(s, loc, C, 1, 0);
  IrBuilder b = irb_before(s->a, first);
  b.loc = loc;
  IrBuilder w = irb_if(&b, not_first);
  irb_op(&w, OP_MBAR_WAIT, 2, (Value *[]){order, cid}, NULL);
  IrBuilder a = last->next ? irb_before(s->a, last->next) : irb_at_end(s->a, mine);
  a.loc = loc;
  Value *next = irb_binary(&a, OP_REM, irb_binary(&a, OP_ADD, cid, irb_const_int(&a, SK_I32, 1)),
                           irb_const_int(&a, SK_I32, C));
  irb_op(&a, OP_MBAR_ARRIVE, 2, (Value *[]){order, next}, NULL);
}

/* ---- the tile loop ---- */

void sched_pingpong(Sched *s, Op *split, PtrMap *producer_of, PtrMap *original_of) {
  Block *cons = &split->regions[1];
  Op *loop = find_tile_loop(cons);
  Op *ploop = loop ? ptrmap_get(producer_of, loop) : NULL;
  if (!loop || !ploop) {
    sched_error(s, loop, "internal: the tile loop of the ping-pong consumers is missing");
    return;
  }
  if (loop->nresults) {
    sched_error(s, loop,
                "ping-pong consumers take the iterations of this loop in turn, so it cannot carry values from one "
                "iteration to the next");
    return;
  }
  IrBuilder views = irb_before(s->a, cons->first);
  views.loc = loop->loc;
  Value *cid = irb_value(&views, OP_CONSUMER_ID, 0, NULL, type_scalar(SK_I32));
  replicate_consumer_buffers(s, split, cid, &views);
  if (s->failed) return;
  /* mine = ((iv - lo) / step) % consumers == consumer_id, in i64 */
  Block *body = &loop->regions[0];
  Op *first = body->first;
  IrBuilder b = irb_before(s->a, first);
  b.loc = loop->loc;
  TType i64 = type_scalar(SK_I64);
  Value *t = irb_binary(&b, OP_DIV,
                        irb_binary(&b, OP_SUB, irb_cast(&b, &body->args[0], i64), irb_cast(&b, loop->operands[0], i64)),
                        irb_cast(&b, loop->operands[2], i64));
  Value *turn = irb_cast(&b, irb_binary(&b, OP_REM, t, irb_const_int(&b, SK_I64, s->roles->consumers)),
                         type_scalar(SK_I32));
  Value *mine = irb_cmp(&b, OP_CMP_EQ, turn, cid);
  Op *iff = ir_op_new(s->a, OP_IF, 1, 0, NULL, 2, loop->loc);
  iff->operands[0] = mine;
  Op *y = body->last;
  for (Op *op = first, *next; op && op != y; op = next) {
    next = op->next;
    ir_unlink(op);
    ir_append(&iff->regions[0], op);
  }
  end_block(s->a, &iff->regions[0], loop->loc);
  order_turns(s, &iff->regions[0], cid, irb_cmp(&b, OP_CMP_NE, t, irb_const_int(&b, SK_I64, 0)), loop->loc);
  Skip k = {s, original_of, {0}};
  ptrmap_init(&k.map, s->a);
  ptrmap_put(&k.map, &ploop->regions[0].args[0], &body->args[0]);
  walk(&k, &ploop->regions[0], &iff->regions[1]);
  end_block(s->a, &iff->regions[1], loop->loc);
  ir_insert_before(y, iff);
}
