/* dce.c - dead code elimination.
 *
 * Removes:
 *   - pure ops and loads (OPF_READ) whose results are all unused;
 *   - `for` and `if` ops whose results are all unused and whose regions
 *     contain no write (OPF_WRITE) and no `while` loop, at any depth;
 *   - iter args of `for` loops that nothing needs: the result is unused
 *     after the loop, and the block argument and everything computed from
 *     it feed only pure ops and loads in that slice and the body's yield at
 *     the positions of such iter args (dead accumulators, also several
 *     that feed each other).
 * Never removed: writes, terminators, `while` loops (one that does not
 * terminate must keep not terminating).
 *
 * Linear time: one walk counts the uses of every value (in Value.id) and
 * records in Op.scratch whether a region op contains side effects; then
 * each block is swept from its last op to its first, removing dead ops and
 * decrementing the use counts of their operands (also of the ops inside a
 * removed region op), so that whole dead chains go in the same sweep: the
 * users of a value always come after it. The iter args of a loop are
 * decided by one backward walk of its body before it is swept (so a loop
 * costs its size times its nesting depth, never the number of iter args
 * times anything).
 */
#include "passes.h"
#include "passutil.h"

#include <stdlib.h>

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

/* Value.id bits while one loop's iter args are examined (the bits below
 * hold the use count): the value is defined in the loop body, at any
 * depth; something that stays needs it. */
#define DCE_INSIDE_BIT 0x80000000u
#define DCE_NEEDED_BIT 0x40000000u
#define DCE_COUNT_MASK 0x3fffffffu

static bool slice_op(const Op *op) {
  return (ir_info(op)->flags & (OPF_PURE | OPF_READ)) && !(ir_info(op)->flags & OPF_TERM) &&
         op->nregions == 0;
}

/* Sets (or clears) DCE_INSIDE_BIT on every value defined in b; returns
 * how many there are. */
static size_t mark_inside(Block *b, bool set) {
  size_t n = b->nargs;
  for (uint32_t i = 0; i < b->nargs; i++) b->args[i].id = set ? b->args[i].id | DCE_INSIDE_BIT : b->args[i].id & DCE_COUNT_MASK;
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->nresults; i++)
      op->results[i].id = set ? op->results[i].id | DCE_INSIDE_BIT : op->results[i].id & DCE_COUNT_MASK;
    n += op->nresults;
    for (int r = 0; r < op->nregions; r++) n += mark_inside(&op->regions[r], set);
  }
  return n;
}

/* Which iter args of one loop something that stays needs: a backward walk
 * from what must stay (every op in the body but the pure ops and loads, and
 * the results used after the loop) through the operands of pure ops and
 * loads, where the body argument of an iter arg needs that iter arg's
 * yielded value. Each value is visited once: linear in the body. */
typedef struct IterLiveness {
  Op *loop;
  Block *body;
  Value **work;
  size_t nwork;
  bool *live; /* per iter arg */
} IterLiveness;

static void need(IterLiveness *l, Value *v) {
  if (!(v->id & DCE_INSIDE_BIT) || (v->id & DCE_NEEDED_BIT)) return;
  v->id |= DCE_NEEDED_BIT;
  l->work[l->nwork++] = v;
}

static void make_live(IterLiveness *l, uint32_t it) {
  if (l->live[it]) return;
  l->live[it] = true;
  need(l, l->body->last->operands[it]);
}

/* The roots: operands of the ops that stay whatever the iter args are. */
static void need_roots(IterLiveness *l, Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    if (!(op == l->body->last && b == l->body) && !slice_op(op))
      for (uint32_t i = 0; i < op->noperands; i++) need(l, op->operands[i]);
    for (int r = 0; r < op->nregions; r++) need_roots(l, &op->regions[r]);
  }
}

static void propagate(IterLiveness *l) {
  while (l->nwork) {
    Value *v = l->work[--l->nwork];
    if (!v->def && v->owner == l->body && v->index >= 1) {
      make_live(l, v->index - 1);
    } else if (v->def && slice_op(v->def)) {
      for (uint32_t i = 0; i < v->def->noperands; i++) need(l, v->def->operands[i]);
    }
  }
}

static void resolve_in_block(Block *b) {
  for (Op *op = b->first; op; op = op->next) {
    pass_resolve_operands(op);
    for (int r = 0; r < op->nregions; r++) resolve_in_block(&op->regions[r]);
  }
}

/* Keeps the first `keep` values of vals (the caller moved the ones to keep
 * to the front) in a new array, numbered from 0; the old values point to
 * their copies through repl. */
static Value *values_kept(Arena *a, Value *vals, const uint32_t *from, uint32_t keep) {
  Value *out = keep ? ARENA_ARRAY(a, Value, keep) : NULL;
  for (uint32_t j = 0; j < keep; j++) {
    out[j] = vals[from[j]];
    out[j].index = j;
    out[j].repl = NULL;
    vals[from[j]].repl = &out[j];
  }
  return out;
}

/* Takes the iter args that are not live (result, body arg, init operand,
 * yield operand) out of the loop, all at once. Their slices are left
 * unused, for the sweep. */
static void drop_iter_args(Arena *a, Op *loop, const bool *live, uint32_t *from) {
  Block *body = &loop->regions[0];
  Op *yield = body->last;
  uint32_t n = loop->nresults, keep = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!live[i]) {
      yield->operands[i]->id--;
      loop->operands[3 + i]->id--;
      continue;
    }
    yield->operands[keep] = yield->operands[i];
    loop->operands[3 + keep] = loop->operands[3 + i];
    from[keep++] = i;
  }
  yield->noperands = keep;
  loop->noperands = 3 + keep;
  loop->results = values_kept(a, loop->results, from, keep);
  loop->nresults = keep;
  /* Body arguments: the induction variable, then the kept iter args. */
  for (uint32_t j = keep; j-- > 0;) from[j + 1] = from[j] + 1;
  from[0] = 0;
  body->args = values_kept(a, body->args, from, keep + 1);
  body->nargs = keep + 1;
  for (uint32_t i = 0; i < body->nargs; i++) body->args[i].owner = body;
  resolve_in_block(body); /* the users after the loop: ir_apply_replacements */
}

/* Removes the iter args of a for loop that nothing needs: a result unused
 * after the loop whose value feeds only pure ops and loads that feed,
 * in turn, only such iter args (dead accumulators, also ones that feed
 * each other). Must run before the body is swept: the counts are still
 * complete. */
static bool drop_dead_iter_args(Arena *a, Op *loop) {
  Block *body = loop->nregions == 1 ? &loop->regions[0] : NULL;
  const Op *yield = body ? body->last : NULL;
  uint32_t n = loop->nresults;
  if (!n || !yield || yield->kind != OP_YIELD || yield->noperands != n || loop->noperands != 3 + n ||
      body->nargs != n + 1)
    return false;
  size_t nvalues = mark_inside(body, true);
  IterLiveness l = {loop, body, malloc(nvalues * sizeof(Value *)), 0, calloc(n, sizeof(bool))};
  uint32_t *from = malloc((n + 1) * sizeof *from);
  bool dropped = false;
  if (l.work && l.live && from) {
    need_roots(&l, body);
    for (uint32_t i = 0; i < n; i++)
      if (loop->results[i].id != 0) make_live(&l, i);
    propagate(&l);
  }
  mark_inside(body, false); /* clears the needed marks too */
  if (l.work && l.live && from) {
    for (uint32_t i = 0; i < n && !dropped; i++) dropped = !l.live[i];
    if (dropped) drop_iter_args(a, loop, l.live, from);
  }
  free(l.work);
  free(l.live);
  free(from);
  return dropped;
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
