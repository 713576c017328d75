/* masks.c - the warning for masks that cannot be false.
 *
 * A load, store or atomic whose mask is a comparison (or an `&&` of
 * comparisons) that holds for every element, by the ranges of its
 * operands, checks nothing: usually a bound written against the wrong
 * size. The ranges are integer intervals: constants, arange(a, b) is
 * [a, b - 1], program_id(axis) [0, 2^31 - 2], num_programs [1, 2^31 - 1],
 * sums, differences and products of known ranges (when they cannot wrap
 * in the value's type), and the shape ops that move elements around. Any
 * other value (a parameter, a load) has no range, and a comparison with
 * it is not judged. Each mask is reported once, however many
 * specializations share its source location.
 */
#include <stdint.h>
#include <string.h>

#include "../ir/ir.h"
#include "masks.h"

/* The deepest chain of operands followed: index arithmetic is a few ops
 * deep; past this a value has no range (never a false warning). */
#define MASK_MAX_DEPTH 64
/* Locations remembered for the once-per-location rule; past it, later
 * masks are still reported (a repeat is harmless). */
#define MASK_MAX_SEEN 256

typedef struct Range {
  bool known;
  int64_t lo, hi;
} Range;

static bool type_bounds(TType t, int64_t *lo, int64_t *hi) {
  int bits = scalar_bits((ScalarKind)t.kind);
  if (!scalar_is_int((ScalarKind)t.kind) || t.kind == SK_I1 || bits > 32) return false;
  if (scalar_is_signed((ScalarKind)t.kind)) {
    *hi = ((int64_t)1 << (bits - 1)) - 1;
    *lo = -*hi - 1;
  } else {
    *lo = 0;
    *hi = ((int64_t)1 << bits) - 1;
  }
  return true;
}

static Range range_of(const Value *v, int depth);

static Range fit(Range r, TType t) {
  int64_t lo, hi;
  if (!r.known || !type_bounds(t, &lo, &hi) || r.lo < lo || r.hi > hi) return (Range){false, 0, 0};
  return r;
}

static Range binary(const Op *op, int depth) {
  Range a = range_of(op->operands[0], depth + 1), b = range_of(op->operands[1], depth + 1);
  if (!a.known || !b.known) return (Range){false, 0, 0};
  /* operands of at most 32 bits (u32 up to 2^32 - 1): a product can pass
   * int64, so every step is checked */
  Range r = {true, 0, 0};
  bool over = false;
  switch (op->kind) {
  case OP_ADD:
    over = __builtin_add_overflow(a.lo, b.lo, &r.lo) || __builtin_add_overflow(a.hi, b.hi, &r.hi);
    break;
  case OP_SUB:
    over = __builtin_sub_overflow(a.lo, b.hi, &r.lo) || __builtin_sub_overflow(a.hi, b.lo, &r.hi);
    break;
  case OP_MUL: {
    int64_t p[4];
    over = __builtin_mul_overflow(a.lo, b.lo, &p[0]) || __builtin_mul_overflow(a.lo, b.hi, &p[1]) ||
           __builtin_mul_overflow(a.hi, b.lo, &p[2]) || __builtin_mul_overflow(a.hi, b.hi, &p[3]);
    r.lo = r.hi = p[0];
    for (int i = 1; i < 4 && !over; i++) r.lo = p[i] < r.lo ? p[i] : r.lo, r.hi = p[i] > r.hi ? p[i] : r.hi;
    break;
  }
  default: over = true;
  }
  return over ? (Range){false, 0, 0} : r;
}

static Range range_of(const Value *v, int depth) {
  const Op *op = v->def;
  int64_t lo, hi;
  if (!op || depth > MASK_MAX_DEPTH || !type_bounds(v->type, &lo, &hi)) return (Range){false, 0, 0};
  int64_t c;
  switch (op->kind) {
  case OP_CONST: return ir_const_int(v, &c) ? fit((Range){true, c, c}, v->type) : (Range){false, 0, 0};
  case OP_ARANGE: return fit((Range){true, op->attr[0], op->attr[1] - 1}, v->type);
  case OP_PROGRAM_ID: return fit((Range){true, 0, INT32_MAX - 1}, v->type);
  case OP_NUM_PROGRAMS: return fit((Range){true, 1, INT32_MAX}, v->type);
  case OP_BROADCAST: case OP_EXPAND_DIMS: case OP_RESHAPE: case OP_TRANS:
    return range_of(op->operands[0], depth + 1);
  case OP_CAST: return fit(range_of(op->operands[0], depth + 1), v->type);
  case OP_ADD: case OP_SUB: case OP_MUL: return fit(binary(op, depth), v->type);
  default: return (Range){false, 0, 0};
  }
}

/* Whether the mask is comparisons that hold everywhere. */
static bool always_true(const Value *m, int depth) {
  const Op *op = m->def;
  if (!op || depth > MASK_MAX_DEPTH) return false;
  if (op->kind == OP_AND) return always_true(op->operands[0], depth + 1) && always_true(op->operands[1], depth + 1);
  if (op->kind == OP_BROADCAST) return always_true(op->operands[0], depth + 1);
  Range a, b;
  switch (op->kind) {
  case OP_CMP_LT: case OP_CMP_LE: case OP_CMP_GT: case OP_CMP_GE:
    a = range_of(op->operands[0], depth + 1), b = range_of(op->operands[1], depth + 1);
    break;
  default: return false;
  }
  if (!a.known || !b.known) return false;
  switch (op->kind) {
  case OP_CMP_LT: return a.hi < b.lo;
  case OP_CMP_LE: return a.hi <= b.lo;
  case OP_CMP_GT: return a.lo > b.hi;
  default: return a.lo >= b.hi;
  }
}

/* The mask operand of a memory op, or NULL. */
static const Value *mask_of(const Op *op) {
  switch (op->kind) {
  case OP_LOAD: return op->noperands >= 2 ? op->operands[1] : NULL;
  case OP_STORE: return op->noperands >= 3 ? op->operands[2] : NULL;
  case OP_ATOMIC_CAS: return op->noperands >= 4 ? op->operands[3] : NULL;
  case OP_ATOMIC_ADD: case OP_ATOMIC_MAX: case OP_ATOMIC_MIN: case OP_ATOMIC_AND: case OP_ATOMIC_OR:
  case OP_ATOMIC_XOR: case OP_ATOMIC_XCHG: return op->noperands >= 3 ? op->operands[2] : NULL;
  default: return NULL;
  }
}

typedef struct Seen {
  SrcLoc locs[MASK_MAX_SEEN];
  int n;
} Seen;

static bool first_time(Seen *s, SrcLoc loc) {
  for (int i = 0; i < s->n; i++)
    if (s->locs[i].line == loc.line && s->locs[i].col == loc.col) return false;
  if (s->n < MASK_MAX_SEEN) s->locs[s->n++] = loc;
  return true;
}

static void walk(const Block *b, Diags *d, Seen *seen) {
  for (const Op *op = b->first; op; op = op->next) {
    const Value *m = mask_of(op);
    if (m && m->def && always_true(m, 0) && first_time(seen, m->def->loc))
      diag_warning(d, m->def->loc,
                   "this mask is true for every element (by the ranges of its operands), so it checks nothing; "
                   "drop it or compare with the bound that was meant");
    for (int r = 0; r < op->nregions; r++) walk(&op->regions[r], d, seen);
  }
}

void warn_constant_masks(const Module *m, Diags *d) {
  Seen seen;
  seen.n = 0;
  for (int i = 0; i < m->nfuncs; i++) walk(&m->funcs[i]->body, d, &seen);
}
