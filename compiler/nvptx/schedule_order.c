/* schedule_order.c - memory order within a program (semantics.md,
 * Memory: "a load sees the values stored by earlier stores of the same
 * program").
 *
 * The threads of a block hold different elements of a tile, so an element
 * stored by one thread may be loaded by another. PTX orders one thread's
 * own accesses, but another thread's load sees the store only after a
 * barrier between them (bar.sync orders the memory accesses of the
 * threads it joins). This pass walks each kernel in program order, keeps
 * the set of buffers written since the last barrier, and puts a barrier
 * before a load or atomic that may read one of them.
 *
 * A buffer is the kernel parameter a pointer is derived from (through
 * ptr_add, shape ops, select and loop-carried values); the spec makes
 * accesses through different parameters independent (semantics.md,
 * Memory: Parameters), so only a write and a later read of the same
 * parameter, or of a pointer whose parameter is not known, are ordered.
 * Loops are walked to a fixed point (a write late in one iteration is
 * pending at the top of the next), ifs join both branches.
 *
 * TMA copies (load_block, store_block) are outside this pass: their
 * rewrites order them with fences and barriers of their own.
 */
#include <string.h>

#include "schedule_internal.h"

/* Pending writes as a set of parameter indices: one bit per parameter
 * below ORDER_MAX_TRACKED, ORDER_ANY for a pointer of unknown origin (or a
 * parameter beyond the tracked ones). */
#define ORDER_MAX_TRACKED 63
#define ORDER_ANY (1ull << ORDER_MAX_TRACKED)
/* Base of a pointer: a parameter index, unknown, or "the loop argument
 * being resolved" (no constraint from a back edge). */
#define BASE_UNKNOWN (-1)
#define BASE_SELF (-2)
/* How deep the origin of a pointer is traced (def chains are short: an
 * add, a broadcast, a loop argument). */
#define BASE_MAX_DEPTH 32

typedef struct OrderWalk {
  Sched *s;
  const Value *resolving[BASE_MAX_DEPTH]; /* loop arguments on the trace */
  int nresolving;
  int inserted; /* barriers put in */
} OrderWalk;

static int join_base(int a, int b) {
  if (a == BASE_SELF) return b;
  if (b == BASE_SELF) return a;
  return a == b ? a : BASE_UNKNOWN;
}

static int base_of(OrderWalk *w, const Value *v, int depth);

/* A value yielded by region r at position i. */
static const Value *yielded(const Block *r, uint32_t i) {
  const Op *y = r->last;
  return y && y->kind == OP_YIELD && i < y->noperands ? y->operands[i] : NULL;
}

static int base_of_arg(OrderWalk *w, const Value *v, int depth) {
  const Block *b = v->owner;
  if (!b) return BASE_UNKNOWN;
  if (!b->parent) return (int)v->index; /* a kernel parameter */
  const Op *loop = b->parent;
  if (loop->kind != OP_FOR || v->index == 0) return BASE_UNKNOWN;
  for (int i = 0; i < w->nresolving; i++)
    if (w->resolving[i] == v) return BASE_SELF;
  if (w->nresolving == BASE_MAX_DEPTH) return BASE_UNKNOWN;
  uint32_t k = v->index - 1; /* iter k: init operand 3 + k, yield k */
  if (3 + k >= loop->noperands) return BASE_UNKNOWN;
  const Value *next = yielded(b, k);
  if (!next) return BASE_UNKNOWN;
  w->resolving[w->nresolving++] = v;
  int r = join_base(base_of(w, loop->operands[3 + k], depth + 1), base_of(w, next, depth + 1));
  w->nresolving--;
  return r;
}

static int base_of(OrderWalk *w, const Value *v, int depth) {
  if (!v || depth > BASE_MAX_DEPTH || v->type.kind != SK_PTR) return BASE_UNKNOWN;
  if (!v->def) return base_of_arg(w, v, depth);
  const Op *op = v->def;
  switch (op->kind) {
  case OP_PTR_ADD:
    return base_of(w, op->operands[0]->type.kind == SK_PTR ? op->operands[0] : op->operands[1], depth + 1);
  case OP_BROADCAST: case OP_EXPAND_DIMS: case OP_RESHAPE: case OP_TRANS:
    return base_of(w, op->operands[0], depth + 1);
  case OP_SELECT: return join_base(base_of(w, op->operands[1], depth + 1), base_of(w, op->operands[2], depth + 1));
  case OP_IF: {
    const Value *a = yielded(&op->regions[0], v->index), *b = yielded(&op->regions[1], v->index);
    return a && b ? join_base(base_of(w, a, depth + 1), base_of(w, b, depth + 1)) : BASE_UNKNOWN;
  }
  case OP_FOR: {
    const Value *next = yielded(&op->regions[0], v->index);
    if (!next || 3 + v->index >= op->noperands) return BASE_UNKNOWN;
    return join_base(base_of(w, op->operands[3 + v->index], depth + 1), base_of(w, next, depth + 1));
  }
  default: return BASE_UNKNOWN;
  }
}

static uint64_t base_bits(int base) {
  return base >= 0 && base < ORDER_MAX_TRACKED ? 1ull << base : ORDER_ANY;
}

static bool is_atomic(unsigned k) { return k >= OP_ATOMIC_ADD && k <= OP_ATOMIC_CAS; }

static uint64_t walk_block(OrderWalk *w, Block *b, uint64_t pending, bool insert);

/* A loop body entered with `pending`: the state at its top is the join of
 * the entry and the end of an iteration, found by iterating (bits only
 * grow, so at most ORDER_MAX_TRACKED + 1 rounds). Returns the top state. */
static uint64_t loop_top(OrderWalk *w, Block *body, uint64_t pending) {
  uint64_t top = pending;
  for (int round = 0; round <= ORDER_MAX_TRACKED + 1; round++) {
    uint64_t next = pending | walk_block(w, body, top, false);
    if (next == top) break;
    top = next;
  }
  return top;
}

static uint64_t walk_op(OrderWalk *w, Op *op, uint64_t pending, bool insert) {
  unsigned k = op->kind;
  /* (a staging barrier may order one warpgroup only: lower.c) */
  if (k == OP_BARRIER && !op->attr[0]) return 0;
  if (k == OP_LOAD || is_atomic(k)) {
    uint64_t bits = base_bits(base_of(w, op->operands[0], 0));
    bool conflict = (pending & ORDER_ANY) || (bits & ORDER_ANY ? pending != 0 : (pending & bits) != 0);
    if (conflict) {
      if (insert) {
        IrBuilder ib = irb_before(w->s->a, op);
        ib.loc = op->loc;
        sched_barrier(&ib);
        w->inserted++;
      }
      pending = 0;
    }
    return is_atomic(k) ? pending | bits : pending;
  }
  if (k == OP_STORE) return pending | base_bits(base_of(w, op->operands[0], 0));
  if (k == OP_FOR) {
    uint64_t top = loop_top(w, &op->regions[0], pending);
    if (insert) walk_block(w, &op->regions[0], top, true);
    return top; /* the loop leaves from its top */
  }
  if (k == OP_WHILE) {
    /* before -> (do -> before)*: the state at the top of `before` */
    uint64_t top = pending;
    for (int round = 0; round <= ORDER_MAX_TRACKED + 1; round++) {
      uint64_t after_before = walk_block(w, &op->regions[0], top, false);
      uint64_t next = pending | walk_block(w, &op->regions[1], after_before, false);
      if (next == top) break;
      top = next;
    }
    uint64_t after_before = walk_block(w, &op->regions[0], top, insert);
    if (insert) walk_block(w, &op->regions[1], after_before, true);
    return after_before;
  }
  if (k == OP_IF) return walk_block(w, &op->regions[0], pending, insert) | walk_block(w, &op->regions[1], pending, insert);
  for (uint16_t r = 0; r < op->nregions; r++) pending = walk_block(w, &op->regions[r], pending, insert);
  return pending;
}

static uint64_t walk_block(OrderWalk *w, Block *b, uint64_t pending, bool insert) {
  for (Op *op = b->first; op;) {
    Op *next = op->next; /* a barrier goes before op, never after */
    pending = walk_op(w, op, pending, insert);
    op = next;
  }
  return pending;
}

int sched_order_memory(Sched *s) {
  OrderWalk w;
  memset(&w, 0, sizeof w);
  w.s = s;
  walk_block(&w, &s->f->body, 0, true);
  return w.inserted;
}
