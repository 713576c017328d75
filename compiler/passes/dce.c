/* dce.c - dead code elimination.
 *
 * Removes:
 *   - pure ops and loads (OPF_READ) whose results are all unused;
 *   - `for` and `if` ops whose results are all unused and whose regions
 *     contain no write (OPF_WRITE) and no `while` loop, at any depth;
 *   - iter args of `for` loops whose result is unused and whose value only
 *     feeds its own next iteration: the block argument and everything
 *     computed from it is used only by pure ops in that slice or by the
 *     body's yield at the arg's own position (a dead accumulator).
 * Never removed: writes, terminators, `while` loops (one that does not
 * terminate must keep not terminating).
 *
 * Linear time: one walk counts the uses of every value (in Value.id) and
 * records in Op.scratch whether a region op contains side effects; then
 * each block is swept from its last op to its first, removing dead ops and
 * decrementing the use counts of their operands (also of the ops inside a
 * removed region op), so that whole dead chains go in the same sweep: the
 * users of a value always come after it.
 */
#include "passes.h"
#include "passutil.h"

/* The bit of Value.id that marks a value as computed from the iter arg
 * being examined; the bits below hold the use count. */
#define DCE_TAINT_BIT 0x80000000u

/* ---- counting ------------------------------------------------------------ */

static void clear_args(Block *b) {
  for (uint32_t i = 0; i < b->nargs; i++) b->args[i].id = 0;
}

static bool has_own_effect(const Op *op) {
  return (ir_info(op)->flags & OPF_WRITE) || op->kind == OP_WHILE;
}

/* Zeroes the counts of the values defined in b, counts every use, and
 * stores in each region op's scratch whether its regions have effects.
 * Returns whether b has any effect. Definitions come before uses in this
 * order, so a count is never zeroed after being incremented. */
static bool count_block(Block *b) {
  bool effects = false;
  clear_args(b);
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->nresults; i++) op->results[i].id = 0;
    for (uint32_t i = 0; i < op->noperands; i++) op->operands[i]->id++;
    bool inner = false;
    for (int r = 0; r < op->nregions; r++)
      if (count_block(&op->regions[r])) inner = true;
    op->scratch = inner;
    if (inner || has_own_effect(op)) effects = true;
  }
  return effects;
}

/* Drops the uses an op (and everything inside it) makes. */
static void uncount_op(Op *op) {
  for (uint32_t i = 0; i < op->noperands; i++) op->operands[i]->id--;
  for (int r = 0; r < op->nregions; r++)
    for (Op *o = op->regions[r].first; o; o = o->next) uncount_op(o);
}

static bool results_unused(const Op *op) {
  for (uint32_t i = 0; i < op->nresults; i++)
    if (op->results[i].id != 0) return false;
  return true;
}

static bool removable(const Op *op) {
  unsigned flags = ir_info(op)->flags;
  if ((flags & (OPF_TERM | OPF_WRITE)) || !results_unused(op)) return false;
  if (op->nregions == 0) return (flags & (OPF_PURE | OPF_READ)) != 0;
  return (op->kind == OP_FOR || op->kind == OP_IF) && !op->scratch;
}

/* ---- dead iter args of for loops ------------------------------------------ */

static bool tainted(const Value *v) { return (v->id & DCE_TAINT_BIT) != 0; }

static bool slice_op(const Op *op) {
  return (ir_info(op)->flags & (OPF_PURE | OPF_READ)) && !(ir_info(op)->flags & OPF_TERM) &&
         op->nregions == 0;
}

/* Walks b marking results computed from tainted values; returns false if a
 * tainted value reaches anything but a slice op or position `pos` of the
 * loop body's yield. */
static bool taint_block(Block *b, const Block *body, uint32_t pos) {
  for (Op *op = b->first; op; op = op->next) {
    bool uses = false;
    for (uint32_t i = 0; i < op->noperands; i++) {
      if (!tainted(op->operands[i])) continue;
      uses = true;
      if (op->kind == OP_YIELD && (op->parent != body || i != pos)) return false;
    }
    if (uses && op->kind != OP_YIELD) {
      if (!slice_op(op)) return false;
      for (uint32_t i = 0; i < op->nresults; i++) op->results[i].id |= DCE_TAINT_BIT;
    }
    for (int r = 0; r < op->nregions; r++)
      if (!taint_block(&op->regions[r], body, pos)) return false;
  }
  return true;
}

/* Clears the taint marks of op results (the caller clears the arg's);
 * with `erase`, also removes the tainted ops. */
static void untaint_block(Block *b, bool erase) {
  for (Op *op = b->first, *next; op; op = next) {
    next = op->next;
    bool marked = op->nresults && tainted(&op->results[0]);
    for (uint32_t i = 0; i < op->nresults; i++) op->results[i].id &= ~DCE_TAINT_BIT;
    if (marked && erase) {
      uncount_op(op);
      ir_unlink(op);
      continue;
    }
    for (int r = 0; r < op->nregions; r++) untaint_block(&op->regions[r], erase);
  }
}

/* Removes entry `idx` of a Value array by building a new array; old values
 * point to their new copies through repl. */
static Value *values_without(Arena *a, Value *vals, uint32_t n, uint32_t idx) {
  Value *out = n > 1 ? ARENA_ARRAY(a, Value, n - 1) : NULL;
  for (uint32_t i = 0, j = 0; i < n; i++) {
    if (i == idx) continue;
    out[j] = vals[i];
    out[j].index = j;
    out[j].repl = NULL;
    vals[i].repl = &out[j];
    j++;
  }
  return out;
}

static void remove_operand(Op *op, uint32_t idx) {
  op->operands[idx]->id--;
  for (uint32_t i = idx + 1; i < op->noperands; i++) op->operands[i - 1] = op->operands[i];
  op->noperands--;
}

static void resolve_in_block(Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    pass_resolve_operands(op);
    for (int r = 0; r < op->nregions; r++) resolve_in_block(&op->regions[r]);
  }
}

/* Takes iter arg `it` (result it, body arg 1+it, operand 3+it, yield
 * operand it) out of the loop. */
static void drop_iter_arg(Arena *a, Op *loop, uint32_t it) {
  Block *body = &loop->regions[0];
  remove_operand(body->last, it); /* the yield (drop_dead_iter_args checked) */
  remove_operand(loop, 3 + it);
  loop->results = values_without(a, loop->results, loop->nresults, it);
  loop->nresults--;
  body->args = values_without(a, body->args, body->nargs, 1 + it);
  body->nargs--;
  for (uint32_t i = 0; i < body->nargs; i++) body->args[i].owner = body;
  resolve_in_block(body); /* the users after the loop: ir_apply_replacements */
}

/* Whether iter arg `it` of the loop is dead; removes it (and its slice) if
 * so. Must run before the body is swept: the counts are still complete. */
static bool try_drop_iter_arg(Arena *a, Op *loop, uint32_t it) {
  Block *body = &loop->regions[0];
  if (loop->results[it].id != 0 || body->nargs != loop->nresults + 1) return false;
  Value *arg = &body->args[1 + it];
  arg->id |= DCE_TAINT_BIT;
  bool dead = taint_block(body, body, it);
  arg->id &= ~DCE_TAINT_BIT;
  untaint_block(body, dead);
  if (!dead) return false;
  drop_iter_arg(a, loop, it);
  return true;
}

/* Repeats until no arg goes: dropping one can free another (two
 * accumulators feeding each other). Bounded by the number of iter args. */
static bool drop_dead_iter_args(Arena *a, Op *loop) {
  const Op *yield = loop->nregions == 1 ? loop->regions[0].last : NULL;
  if (!yield || yield->kind != OP_YIELD || yield->noperands != loop->nresults ||
      loop->noperands != 3 + loop->nresults)
    return false;
  bool changed = false, again = true;
  while (again) {
    again = false;
    for (uint32_t it = loop->nresults; it-- > 0;)
      if (try_drop_iter_arg(a, loop, it)) again = changed = true;
  }
  return changed;
}

/* ---- the sweep --------------------------------------------------------------- */

typedef struct DceState {
  Arena *arena;
  bool changed;
  bool replaced; /* iter args dropped: replacements pending */
} DceState;

static void sweep_block(DceState *s, Block *b) {
  for (Op *op = b->last, *prev; op; op = prev) {
    prev = op->prev;
    if (removable(op)) {
      uncount_op(op);
      ir_unlink(op);
      s->changed = true;
      continue;
    }
    if (op->kind == OP_FOR && drop_dead_iter_args(s->arena, op)) s->changed = s->replaced = true;
    for (int r = op->nregions; r-- > 0;) sweep_block(s, &op->regions[r]);
  }
}

bool pass_dce(Func *f, Arena *a) {
  DceState s = {a, false, false};
  count_block(&f->body);
  sweep_block(&s, &f->body);
  if (s.replaced) ir_apply_replacements(f);
  return s.changed;
}
