/* axisinfo.c - contiguity, divisibility and constancy of integer and
 * pointer tiles (see axisinfo.h for what the three facts mean).
 *
 * One forward walk over the function computes the facts of every value from
 * those of its operands; loops and ifs meet the facts of all values that can
 * reach a block argument or result (their inits and yields) and iterate to a
 * fixpoint. The facts are lower bounds that only ever get weaker (smaller),
 * so every rule below must be sound: when a rule does not apply, the answer
 * is 1 (nothing known), never a guess.
 *
 * Conventions used by all rules:
 *   - a rank-0 value is treated as one dimension of size 1 (slot 0), so its
 *     divisibility lives in divisibility[0];
 *   - along a dimension whose contiguity is 1, the divisibility holds for
 *     every element; in general, an aligned sub-run of g elements of a run of
 *     c > g starts at run start + k*g, hence is only known to be divisible by
 *     min(div, g * unit) (div_at below), where the unit is the element size
 *     in bytes for pointers and 1 for integers;
 *   - contiguity is modular (values increase by one modulo 2^bits), which is
 *     what address arithmetic needs; the rules that need exact values
 *     (division, comparison) only use runs whose first value is aligned to
 *     the run length, which cannot wrap inside the run.
 *
 * Division and remainder truncate toward zero, so the "aligned values share
 * a quotient" rules need non-negative dividends: a small "non-negative" bit
 * per value (unsigned types; program ids, non-negative constants and
 * aranges, and sums and products of non-negative values) tracks that. Like
 * Triton, it assumes that index arithmetic on non-negative values does not
 * overflow.
 *
 * The results live in an open-addressing hash table keyed by Value pointer
 * (Value.id belongs to the printer and other passes), allocated once in the
 * caller's arena and sized from the number of values, so it never grows.
 */
#include "axisinfo.h"

#include <stddef.h>

/* Rounds of a loop's fixpoint before its carried values fall back to
 * "nothing known". Facts only decrease, by halving, so real loops settle
 * in a few rounds; the cap only bounds pathological nesting. */
#define AXIS_MAX_FIXPOINT_ROUNDS 32
/* Widest vector access in bytes (ld.global.v4.b32). */
#define AXIS_VECTOR_BYTES 16
/* Shape ops (broadcast, expand_dims, reshape, trans) looked through when
 * searching for the constant behind a value. */
#define AXIS_CONST_LOOKTHROUGH 16
/* Hash slots per value (load factor at most one half) and the least slots. */
#define AXIS_SLOTS_PER_VALUE 2
#define AXIS_MIN_SLOTS 16
/* Fibonacci hashing multiplier (2^64 / golden ratio). */
#define AXIS_HASH_MULT 0x9e3779b97f4a7c15ULL
/* log2(AXIS_MAX_DIVISIBILITY): shifting by more saturates at the cap. */
#define AXIS_MAX_DIV_LOG2 12
/* Integer types wider than this have half ranges (2^(bits-1)) longer than
 * any tile dimension (TILE_MAX_ELEMS = 2^20): run_cap only limits narrower
 * ones. */
#define AXIS_MAX_RUN_LOG2 21
/* Shifts by more than this are floor divisions by at least 2^this, which
 * say nothing more than a division by 2^this (and 2^63 is not an int64). */
#define AXIS_MAX_SHIFT 62

typedef struct AxisEntry {
  const Value *key; /* NULL: empty slot */
  AxisInfo info;
  bool nonneg; /* every element is >= 0 (integers only) */
} AxisEntry;

struct AxisAnalysis {
  AxisEntry *slots;
  size_t mask; /* number of slots - 1 (a power of two) */
};

/* ---- powers of two ------------------------------------------------------ */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Largest power of two <= v (1 for v < 1). */
static int64_t floor_pow2(int64_t v) {
  int64_t p = 1;
  while (p <= v / 2) p *= 2;
  return p;
}

/* A run length or constancy as a power of two in [1, hi]. */
static int64_t clamp_run(int64_t v, int64_t hi) { return floor_pow2(min64(v, hi)); }

/* A divisibility as a power of two in [1, AXIS_MAX_DIVISIBILITY]. */
static int64_t clamp_div(int64_t v) { return floor_pow2(min64(v, AXIS_MAX_DIVISIBILITY)); }

/* Largest power of two dividing v (capped); 0 is divisible by everything. */
static int64_t pow2_factor(int64_t v) {
  uint64_t u = (uint64_t)v;
  uint64_t low = u & (~u + 1);
  if (u == 0 || low > (uint64_t)AXIS_MAX_DIVISIBILITY) return AXIS_MAX_DIVISIBILITY;
  return (int64_t)low;
}

/* ---- types -------------------------------------------------------------- */

static int ndims(TType t) { return t.rank ? t.rank : 1; }
static int64_t dim_size(TType t, int d) { return t.rank ? t.shape[d] : 1; }
static bool is_ptr(TType t) { return t.kind == SK_PTR; }
static bool is_int(TType t) { return scalar_is_int((ScalarKind)t.kind) && t.kind != SK_I1; }
/* Types whose contiguity and divisibility mean something. */
static bool is_index(TType t) { return is_ptr(t) || is_int(t); }
/* Bytes per step of contiguity: the element size for pointers. */
static int64_t unit_of(TType t) { return is_ptr(t) ? scalar_bytes((ScalarKind)t.pointee) : 1; }

/* ---- facts -------------------------------------------------------------- */

static AxisInfo info_unknown(void) {
  AxisInfo x;
  for (int d = 0; d < TILE_MAX_RANK; d++) x.contiguity[d] = x.divisibility[d] = x.constancy[d] = 1;
  return x;
}

/* Every element divisible by `div`, nothing else known. */
static AxisInfo info_elementwise(TType t, int64_t div) {
  AxisInfo x = info_unknown();
  for (int d = 0; d < ndims(t); d++) x.divisibility[d] = div;
  return x;
}

/* A splat: constant over the whole tile, every element divisible by `div`. */
static AxisInfo info_splat(TType t, int64_t div) {
  AxisInfo x = info_elementwise(t, div);
  for (int d = 0; d < ndims(t); d++) x.constancy[d] = dim_size(t, d);
  return x;
}

/* Only the constancy of `src` kept. */
static AxisInfo info_constancy_of(const AxisInfo *src, TType t) {
  AxisInfo x = info_unknown();
  for (int d = 0; d < ndims(t); d++) x.constancy[d] = src->constancy[d];
  return x;
}

/* Longest run of an integer type: half its range, so that a run whose
 * first value is aligned to its length never crosses a wrap-around point
 * (2^bits - 1 -> 0, or the signed maximum -> minimum). */
static int64_t run_cap(TType t) {
  int bits = scalar_bits((ScalarKind)t.kind);
  return is_int(t) && bits <= AXIS_MAX_RUN_LOG2 ? (int64_t)1 << (bits - 1) : TILE_MAX_ELEMS;
}

/* Brings facts into range: powers of two, runs within the dimension. Runs
 * cut by run_cap start inside the original runs: their divisibility drops
 * accordingly. */
static AxisInfo normalize(AxisInfo x, TType t) {
  AxisInfo r = info_unknown();
  for (int d = 0; d < ndims(t); d++) {
    int64_t c = clamp_run(x.contiguity[d], dim_size(t, d));
    r.contiguity[d] = min64(c, run_cap(t));
    r.constancy[d] = clamp_run(x.constancy[d], dim_size(t, d));
    r.divisibility[d] = clamp_div(x.divisibility[d]);
    if (r.contiguity[d] < c) r.divisibility[d] = clamp_div(min64(r.divisibility[d], r.contiguity[d]));
  }
  return r;
}

static bool info_eq(const AxisInfo *a, const AxisInfo *b) {
  for (int d = 0; d < TILE_MAX_RANK; d++)
    if (a->contiguity[d] != b->contiguity[d] || a->divisibility[d] != b->divisibility[d] ||
        a->constancy[d] != b->constancy[d])
      return false;
  return true;
}

/* Divisibility of the first element of every aligned run of g elements
 * along d (runs of at most x's contiguity start inside x's runs). */
static int64_t div_at(const AxisInfo *x, int d, int64_t g, int64_t unit) {
  if (g >= x->contiguity[d]) return x->divisibility[d];
  return clamp_div(min64(x->divisibility[d], g * unit));
}

/* A divisibility that holds for every element: along any dimension with
 * contiguity 1 the divisibility covers every element. */
static int64_t elem_div(const AxisInfo *x, TType t) {
  int64_t best = 1;
  for (int d = 0; d < ndims(t); d++) best = max64(best, div_at(x, d, 1, unit_of(t)));
  return best;
}

static bool fully_constant(const AxisInfo *x, TType t) {
  for (int d = 0; d < ndims(t); d++)
    if (x->constancy[d] < dim_size(t, d)) return false;
  return true;
}

/* The facts that hold for both a and b (values of type t). */
static AxisInfo meet(const AxisInfo *a, const AxisInfo *b, TType t) {
  AxisInfo r = info_unknown();
  for (int d = 0; d < ndims(t); d++) {
    int64_t c = min64(a->contiguity[d], b->contiguity[d]);
    r.contiguity[d] = c;
    r.constancy[d] = min64(a->constancy[d], b->constancy[d]);
    r.divisibility[d] = min64(div_at(a, d, c, unit_of(t)), div_at(b, d, c, unit_of(t)));
  }
  return r;
}

/* ---- the table ---------------------------------------------------------- */

static size_t slot_index(const AxisAnalysis *an, const Value *v) {
  uint64_t h = (uint64_t)(uintptr_t)v * AXIS_HASH_MULT;
  size_t i = (size_t)(h >> 32) & an->mask;
  while (an->slots[i].key && an->slots[i].key != v) i = (i + 1) & an->mask;
  return i;
}

static const AxisEntry *lookup(const AxisAnalysis *an, const Value *v) {
  const AxisEntry *e = &an->slots[slot_index(an, v)];
  return e->key ? e : NULL;
}

static void put(AxisAnalysis *an, const Value *v, AxisInfo info, bool nonneg) {
  AxisEntry *e = &an->slots[slot_index(an, v)];
  e->key = v;
  e->info = normalize(info, v->type);
  e->nonneg = nonneg && is_int(v->type);
}

static AxisInfo facts(const AxisAnalysis *an, const Value *v) {
  const AxisEntry *e = lookup(an, v);
  return e ? e->info : info_unknown();
}

static bool nonneg(const AxisAnalysis *an, const Value *v) {
  const AxisEntry *e = lookup(an, v);
  return e ? e->nonneg : !scalar_is_signed((ScalarKind)v->type.kind) && is_int(v->type);
}

/* ---- constants behind values -------------------------------------------- */

/* The integer splat value of v, looking through shape ops. */
static bool const_int_of(const Value *v, int64_t *out) {
  for (int i = 0; i < AXIS_CONST_LOOKTHROUGH && v->def; i++) {
    switch (v->def->kind) {
    case OP_CONST: return ir_const_int(v, out);
    case OP_BROADCAST:
    case OP_EXPAND_DIMS:
    case OP_RESHAPE:
    case OP_TRANS: v = v->def->operands[0]; break;
    default: return false;
    }
  }
  return false;
}

/* A positive power-of-two constant. */
static bool const_pow2_of(const Value *v, int64_t *out) {
  int64_t c;
  if (!const_int_of(v, &c) || c <= 0 || (c & (c - 1)) != 0) return false;
  *out = c;
  return true;
}

static bool is_const_one(const Value *v) {
  int64_t c;
  return const_int_of(v, &c) && c == 1;
}

/* ---- sources: parameters, constants, indices ---------------------------- */

static AxisInfo param_facts(const Func *f, uint32_t i) {
  TType t = f->body.args[i].type;
  ParamInfo p = f->params ? f->params[i] : (ParamInfo){0};
  int64_t div = 1;
  if (is_int(t) && p.multiple_of != 0) div = pow2_factor(p.multiple_of);
  if (is_ptr(t) && p.align > 0) div = pow2_factor(p.align);
  return info_elementwise(t, div);
}

static AxisInfo xfer_const(const Op *op) {
  TType t = op->results[0].type;
  return info_splat(t, is_int(t) ? pow2_factor(op->attr[0]) : 1);
}

static AxisInfo xfer_arange(const Op *op) {
  AxisInfo r = info_elementwise(op->results[0].type, pow2_factor(op->attr[0]));
  r.contiguity[0] = dim_size(op->results[0].type, 0);
  return r;
}

/* ---- shape ops ---------------------------------------------------------- */

static AxisInfo xfer_broadcast(const AxisAnalysis *an, const Op *op) {
  TType s = op->operands[0]->type, t = op->results[0].type;
  AxisInfo a = facts(an, op->operands[0]);
  int64_t e = elem_div(&a, s);
  if (s.rank == 0) return info_splat(t, e);
  AxisInfo r = a;
  for (int d = 0; d < t.rank; d++) {
    if (s.shape[d] != 1 || t.shape[d] == 1) continue;
    r.contiguity[d] = 1;
    r.constancy[d] = t.shape[d];
    r.divisibility[d] = e;
  }
  return r;
}

static AxisInfo xfer_expand_dims(const AxisAnalysis *an, const Op *op) {
  TType s = op->operands[0]->type, t = op->results[0].type;
  AxisInfo a = facts(an, op->operands[0]);
  AxisInfo r = info_elementwise(t, elem_div(&a, s));
  for (int d = 0, j = 0; d < t.rank && s.rank > 0; d++) {
    if (d == op->attr[0]) continue;
    r.contiguity[d] = a.contiguity[j];
    r.divisibility[d] = a.divisibility[j];
    r.constancy[d] = a.constancy[j];
    j++;
  }
  return r;
}

/* When reshape s -> t only inserts or removes dimensions of size 1, sets
 * map[d] to the source dimension of t's dimension d (-1 for a new size-1
 * dimension) and returns true. */
static bool squeeze_map(TType s, TType t, int map[TILE_MAX_RANK]) {
  int j = 0;
  for (int d = 0; d < t.rank; d++) {
    map[d] = -1;
    if (t.shape[d] == 1) continue;
    while (j < s.rank && s.shape[j] == 1) j++;
    if (j == s.rank || s.shape[j] != t.shape[d]) return false;
    map[d] = j++;
  }
  while (j < s.rank && s.shape[j] == 1) j++;
  return j == s.rank;
}

static AxisInfo xfer_reshape(const AxisAnalysis *an, const Op *op) {
  TType s = op->operands[0]->type, t = op->results[0].type;
  AxisInfo a = facts(an, op->operands[0]);
  AxisInfo r = info_elementwise(t, elem_div(&a, s)); /* elements keep their divisibility */
  int map[TILE_MAX_RANK];
  if (squeeze_map(s, t, map)) {
    for (int d = 0; d < t.rank; d++) {
      if (map[d] < 0) continue;
      r.contiguity[d] = a.contiguity[map[d]];
      r.divisibility[d] = a.divisibility[map[d]];
      r.constancy[d] = a.constancy[map[d]];
    }
    return r;
  }
  if (fully_constant(&a, s)) return info_splat(t, elem_div(&a, s));
  if (s.rank == 0 || t.rank == 0) return r;
  /* Runs along the last dimension are aligned runs of the flat
   * (row-major) index, and reshape keeps the flat index: the runs of the
   * source's last dimension stay runs of the result's, cut to its length. */
  int ls = s.rank - 1, lt = t.rank - 1;
  r.contiguity[lt] = min64(a.contiguity[ls], t.shape[lt]);
  r.constancy[lt] = min64(a.constancy[ls], t.shape[lt]);
  r.divisibility[lt] = div_at(&a, ls, r.contiguity[lt], unit_of(s));
  if (r.contiguity[lt] == 1) r.divisibility[lt] = max64(r.divisibility[lt], elem_div(&a, s));
  return r;
}

/* Result dimension i is operand dimension (perm >> 4i) & 15. */
static AxisInfo xfer_trans(const AxisAnalysis *an, const Op *op) {
  AxisInfo a = facts(an, op->operands[0]);
  AxisInfo r = info_unknown();
  for (int d = 0; d < op->results[0].type.rank; d++) {
    int j = (int)((op->attr[0] >> (4 * d)) & 0xf) % TILE_MAX_RANK;
    r.contiguity[d] = a.contiguity[j];
    r.divisibility[d] = a.divisibility[j];
    r.constancy[d] = a.constancy[j];
  }
  return r;
}

/* ---- arithmetic --------------------------------------------------------- */

/* Elementwise ops in general: equal operands give equal results. */
static AxisInfo xfer_elementwise(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  AxisInfo r = info_unknown();
  for (int d = 0; d < ndims(t); d++) r.constancy[d] = dim_size(t, d);
  for (uint32_t i = 0; i < op->noperands; i++) {
    AxisInfo a = facts(an, op->operands[i]);
    for (int d = 0; d < ndims(t); d++) r.constancy[d] = min64(r.constancy[d], a.constancy[d]);
  }
  return r;
}

/* add, sub, ptr_add: a contiguous run plus a constant run stays a run
 * (sub: only minus a constant); divisibility of the run starts is that of
 * both operands there (offsets scaled to bytes for ptr_add). */
static AxisInfo xfer_add(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  if (!is_index(t)) return xfer_elementwise(an, op);
  AxisInfo a = facts(an, op->operands[0]), b = facts(an, op->operands[1]);
  int64_t unit = unit_of(t), scale = op->kind == OP_PTR_ADD ? unit : 1;
  int64_t b_unit = op->kind == OP_PTR_ADD ? 1 : unit;
  AxisInfo r = info_unknown();
  for (int d = 0; d < ndims(t); d++) {
    int64_t c = min64(a.contiguity[d], b.constancy[d]);
    if (op->kind != OP_SUB) c = max64(c, min64(a.constancy[d], b.contiguity[d]));
    r.contiguity[d] = c;
    r.constancy[d] = min64(a.constancy[d], b.constancy[d]);
    r.divisibility[d] = min64(div_at(&a, d, c, unit), clamp_div(div_at(&b, d, c, b_unit) * scale));
  }
  return r;
}

static AxisInfo xfer_mul(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  if (!is_index(t)) return xfer_elementwise(an, op);
  if (is_const_one(op->operands[1])) return facts(an, op->operands[0]);
  if (is_const_one(op->operands[0])) return facts(an, op->operands[1]);
  AxisInfo a = facts(an, op->operands[0]), b = facts(an, op->operands[1]);
  AxisInfo r = xfer_elementwise(an, op);
  for (int d = 0; d < ndims(t); d++) r.divisibility[d] = clamp_div(elem_div(&a, t) * elem_div(&b, t));
  return r;
}

/* a / c (floor) for a power of two c: an aligned run of g values with g
 * dividing c and the run's first value lies in one block of c values, so
 * they share the quotient. */
static AxisInfo floor_quotient(const AxisInfo *a, TType t, int64_t c) {
  int64_t e = elem_div(a, t);
  AxisInfo r = info_elementwise(t, e >= c ? e / c : 1);
  for (int d = 0; d < ndims(t); d++) {
    int64_t g = min64(min64(a->contiguity[d], c), a->divisibility[d]);
    r.constancy[d] = max64(a->constancy[d], g);
  }
  return r;
}

/* a % c for a power of two c and a >= 0: aligned runs of g values stay
 * runs; multiples of c give 0. */
static AxisInfo floor_remainder(const AxisInfo *a, TType t, int64_t c) {
  if (elem_div(a, t) >= c) return info_splat(t, AXIS_MAX_DIVISIBILITY);
  AxisInfo r = info_unknown();
  for (int d = 0; d < ndims(t); d++) {
    int64_t g = min64(min64(a->contiguity[d], c), a->divisibility[d]);
    int64_t start = div_at(a, d, g, 1);
    r.contiguity[d] = g;
    r.constancy[d] = a->constancy[d];
    r.divisibility[d] = start >= c ? AXIS_MAX_DIVISIBILITY : start;
  }
  return r;
}

/* Unsigned values and non-negative signed ones divide as floor. */
static bool floor_semantics(const AxisAnalysis *an, const Value *v) {
  return !scalar_is_signed((ScalarKind)v->type.kind) || nonneg(an, v);
}

static AxisInfo xfer_div_rem(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  int64_t c;
  if (!is_int(t) || !const_pow2_of(op->operands[1], &c) || !floor_semantics(an, op->operands[0]))
    return xfer_elementwise(an, op);
  AxisInfo a = facts(an, op->operands[0]);
  if (op->kind == OP_REM) return floor_remainder(&a, t, c);
  return c == 1 ? a : floor_quotient(&a, t, c);
}

/* Shifts by a constant: shl multiplies by 2^k; shr is a floor division by
 * 2^k for both signed (arithmetic) and unsigned values. */
static AxisInfo xfer_shift(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  int64_t k;
  if (!is_int(t) || !const_int_of(op->operands[1], &k) || k < 0 ||
      k >= scalar_bits((ScalarKind)t.kind))
    return xfer_elementwise(an, op);
  AxisInfo a = facts(an, op->operands[0]);
  if (k == 0) return a;
  if (op->kind == OP_SHR) return floor_quotient(&a, t, (int64_t)1 << min64(k, AXIS_MAX_SHIFT));
  AxisInfo r = info_constancy_of(&a, t);
  int64_t div = k > AXIS_MAX_DIV_LOG2 ? AXIS_MAX_DIVISIBILITY : clamp_div(elem_div(&a, t) << k);
  for (int d = 0; d < ndims(t); d++) r.divisibility[d] = div;
  return r;
}

/* and: the low zero bits of either side; or, xor, max, min: of both. */
static AxisInfo xfer_bits(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  AxisInfo r = xfer_elementwise(an, op);
  if (!is_int(t)) return r;
  AxisInfo a = facts(an, op->operands[0]), b = facts(an, op->operands[1]);
  int64_t ea = elem_div(&a, t), eb = elem_div(&b, t);
  int64_t div = op->kind == OP_AND ? max64(ea, eb) : min64(ea, eb);
  for (int d = 0; d < ndims(t); d++) r.divisibility[d] = div;
  return r;
}

/* neg and abs keep the power of two dividing each element. */
static AxisInfo xfer_neg_abs(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  AxisInfo a = facts(an, op->operands[0]);
  AxisInfo r = info_constancy_of(&a, t);
  if (!is_int(t)) return r;
  for (int d = 0; d < ndims(t); d++) r.divisibility[d] = elem_div(&a, t);
  return r;
}

/* ---- comparisons and select --------------------------------------------- */

/* Length of the aligned runs along d over which `run` (contiguous) compared
 * with `level` (constant there) cannot change: the run's first value and
 * the level are both multiples of the run length, so the level lies before
 * the whole run or after it (for a < b, a >= b). */
static int64_t aligned_run(const AxisInfo *run, const AxisInfo *level, int d, int64_t unit) {
  int64_t g = min64(run->contiguity[d], level->constancy[d]);
  g = min64(g, max64(1, run->divisibility[d] / unit));
  g = min64(g, max64(1, div_at(level, d, 1, unit) / unit));
  return g;
}

static AxisInfo xfer_cmp(const AxisAnalysis *an, const Op *op) {
  AxisInfo r = xfer_elementwise(an, op);
  TType s = op->operands[0]->type;
  if (!is_index(s)) return r;
  AxisInfo a = facts(an, op->operands[0]), b = facts(an, op->operands[1]);
  bool left_runs = op->kind == OP_CMP_LT || op->kind == OP_CMP_GE;
  bool right_runs = op->kind == OP_CMP_GT || op->kind == OP_CMP_LE;
  for (int d = 0; d < ndims(s); d++) {
    if (left_runs) r.constancy[d] = max64(r.constancy[d], aligned_run(&a, &b, d, unit_of(s)));
    if (right_runs) r.constancy[d] = max64(r.constancy[d], aligned_run(&b, &a, d, unit_of(s)));
  }
  return r;
}

/* A condition constant over a run picks one side for the whole run. */
static AxisInfo xfer_select(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  AxisInfo r = xfer_elementwise(an, op);
  if (!is_index(t)) return r;
  AxisInfo c = facts(an, op->operands[0]);
  AxisInfo a = facts(an, op->operands[1]), b = facts(an, op->operands[2]);
  for (int d = 0; d < ndims(t); d++) {
    int64_t g = min64(c.constancy[d], min64(a.contiguity[d], b.contiguity[d]));
    r.contiguity[d] = g;
    r.divisibility[d] = min64(div_at(&a, d, g, unit_of(t)), div_at(&b, d, g, unit_of(t)));
  }
  return r;
}

/* ---- conversions -------------------------------------------------------- */

/* Widening an integer: a run stays a run unless it crosses the source
 * type's wrap-around point, which a run aligned to its length (at most half
 * the range, see run_cap) cannot do, and neither can exact non-negative
 * signed values (no overflow assumed, as for all index arithmetic). */
static AxisInfo widen_int(const AxisAnalysis *an, const Value *src, TType t) {
  AxisInfo a = facts(an, src);
  if (scalar_is_signed((ScalarKind)src->type.kind) && nonneg(an, src)) return a;
  AxisInfo r = a;
  for (int d = 0; d < ndims(t); d++) {
    if (a.contiguity[d] == 1) continue;
    int64_t c = min64(a.contiguity[d], a.divisibility[d]);
    r.contiguity[d] = c;
    r.divisibility[d] = div_at(&a, d, c, 1);
  }
  return r;
}

/* Integer <-> pointer or pointer <-> pointer: the byte address (or value)
 * keeps its divisibility; runs survive only if the step stays the same. */
static AxisInfo change_unit(const AxisInfo *a, TType s, TType t) {
  if (unit_of(s) == unit_of(t)) return *a;
  AxisInfo r = info_constancy_of(a, t);
  for (int d = 0; d < ndims(t); d++) r.divisibility[d] = div_at(a, d, 1, unit_of(s));
  return r;
}

static AxisInfo xfer_cast(const AxisAnalysis *an, const Op *op) {
  TType s = op->operands[0]->type, t = op->results[0].type;
  AxisInfo a = facts(an, op->operands[0]);
  if (is_int(s) && is_int(t)) {
    bool widens = scalar_bits((ScalarKind)t.kind) > scalar_bits((ScalarKind)s.kind);
    return widens ? widen_int(an, op->operands[0], t) : a; /* truncation keeps values mod 2^bits */
  }
  if (is_index(s) && is_index(t)) return change_unit(&a, s, t);
  return info_constancy_of(&a, t);
}

/* ---- memory and reductions ---------------------------------------------- */

/* One load reads one address once: equal pointers (and masks and
 * fallbacks) give equal values. */
static AxisInfo xfer_load(const AxisAnalysis *an, const Op *op) { return xfer_elementwise(an, op); }

/* Rows that are equal along a kept dimension reduce to equal values
 * (not for float sums, whose order the back end may vary). */
static AxisInfo xfer_reduce(const AxisAnalysis *an, const Op *op) {
  TType s = op->operands[0]->type, t = op->results[0].type;
  if (op->kind == OP_REDUCE_SUM && !is_int(s)) return info_unknown();
  AxisInfo a = facts(an, op->operands[0]);
  bool keeps_div = is_int(t) && op->kind != OP_ARGMAX && op->kind != OP_ARGMIN;
  AxisInfo r = info_elementwise(t, keeps_div ? elem_div(&a, s) : 1);
  for (int d = 0; d < t.rank; d++) r.constancy[d] = a.constancy[d < op->attr[0] ? d : d + 1];
  return r;
}

/* ---- non-negative values ------------------------------------------------ */

static bool nonneg_cast(const AxisAnalysis *an, const Op *op) {
  const Value *src = op->operands[0];
  if (!is_int(src->type)) return false;
  int sb = scalar_bits((ScalarKind)src->type.kind), tb = scalar_bits((ScalarKind)op->results[0].type.kind);
  if (!scalar_is_signed((ScalarKind)src->type.kind)) return sb < tb;
  return nonneg(an, src) && sb <= tb;
}

static bool nonneg_result(const AxisAnalysis *an, const Op *op) {
  TType t = op->results[0].type;
  if (!is_int(t)) return false;
  if (!scalar_is_signed((ScalarKind)t.kind)) return true;
  Value *const *o = op->operands;
  switch (op->kind) {
  case OP_CONST:
  case OP_ARANGE: return op->attr[0] >= 0;
  case OP_PROGRAM_ID:
  case OP_NUM_PROGRAMS:
  case OP_ARGMAX:
  case OP_ARGMIN: return true;
  case OP_BROADCAST:
  case OP_EXPAND_DIMS:
  case OP_RESHAPE:
  case OP_TRANS:
  case OP_REM:
  case OP_SHR:
  case OP_REDUCE_SUM:
  case OP_REDUCE_MAX:
  case OP_REDUCE_MIN: return nonneg(an, o[0]);
  case OP_ADD:
  case OP_MUL:
  case OP_DIV:
  case OP_MIN:
  case OP_OR: return nonneg(an, o[0]) && nonneg(an, o[1]);
  case OP_MAX:
  case OP_AND: return nonneg(an, o[0]) || nonneg(an, o[1]);
  case OP_SELECT: return nonneg(an, o[1]) && nonneg(an, o[2]);
  case OP_CAST: return nonneg_cast(an, op);
  default: return false;
  }
}

/* ---- the walk ----------------------------------------------------------- */

static AxisInfo transfer(const AxisAnalysis *an, const Op *op) {
  switch (op->kind) {
  case OP_CONST: return xfer_const(op);
  case OP_ARANGE: return xfer_arange(op);
  case OP_BROADCAST: return xfer_broadcast(an, op);
  case OP_EXPAND_DIMS: return xfer_expand_dims(an, op);
  case OP_RESHAPE: return xfer_reshape(an, op);
  case OP_TRANS: return xfer_trans(an, op);
  case OP_ADD:
  case OP_SUB:
  case OP_PTR_ADD: return xfer_add(an, op);
  case OP_MUL: return xfer_mul(an, op);
  case OP_DIV:
  case OP_REM: return xfer_div_rem(an, op);
  case OP_SHL:
  case OP_SHR: return xfer_shift(an, op);
  case OP_AND:
  case OP_OR:
  case OP_XOR:
  case OP_MAX:
  case OP_MIN: return xfer_bits(an, op);
  case OP_NEG:
  case OP_ABS: return xfer_neg_abs(an, op);
  case OP_CMP_EQ:
  case OP_CMP_NE:
  case OP_CMP_LT:
  case OP_CMP_LE:
  case OP_CMP_GT:
  case OP_CMP_GE: return xfer_cmp(an, op);
  case OP_SELECT: return xfer_select(an, op);
  case OP_CAST:
  case OP_BITCAST: return xfer_cast(an, op);
  case OP_LOAD: return xfer_load(an, op);
  case OP_REDUCE_SUM:
  case OP_REDUCE_MAX:
  case OP_REDUCE_MIN:
  case OP_ARGMAX:
  case OP_ARGMIN: return xfer_reduce(an, op);
  default: break;
  }
  if (ir_info(op)->flags & OPF_PURE && ir_info(op)->flags & OPF_ELEM) return xfer_elementwise(an, op);
  return info_unknown(); /* program_id, dot, atomics, block_load, ... */
}

static void analyze_block(AxisAnalysis *an, const Block *b);

/* The region's yield when it yields at least n values, else NULL. */
static const Op *yield_of(const Block *b, uint32_t n) {
  const Op *y = b->last;
  return y && y->kind == OP_YIELD && y->noperands >= n ? y : NULL;
}

/* args[i] = facts of vals[i]. */
static void seed_args(AxisAnalysis *an, const Value *args, Value *const *vals, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) put(an, &args[i], facts(an, vals[i]), nonneg(an, vals[i]));
}

static void forget_args(AxisAnalysis *an, const Value *args, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) put(an, &args[i], info_unknown(), false);
}

/* args[i] = meet(args[i], vals[i]); true if any fact got weaker. A missing
 * yield (invalid IR) forgets everything and reports no change. */
static bool meet_args(AxisAnalysis *an, const Value *args, const Op *yield, uint32_t n) {
  if (!yield) {
    forget_args(an, args, n);
    return false;
  }
  bool changed = false;
  for (uint32_t i = 0; i < n; i++) {
    const Value *v = yield->operands[i];
    AxisInfo old = facts(an, &args[i]), val = facts(an, v);
    AxisInfo m = normalize(meet(&old, &val, args[i].type), args[i].type);
    bool nn = nonneg(an, &args[i]) && nonneg(an, v);
    changed |= !info_eq(&m, &old) || nn != nonneg(an, &args[i]);
    put(an, &args[i], m, nn);
  }
  return changed;
}

static void set_results_from(AxisAnalysis *an, const Op *op, const Value *args) {
  for (uint32_t i = 0; i < op->nresults; i++)
    put(an, &op->results[i], facts(an, &args[i]), nonneg(an, &args[i]));
}

/* The induction variable lo, lo + step, ...: multiples of both. */
static void seed_induction(AxisAnalysis *an, const Op *op, const Value *iv) {
  const Value *lo = op->operands[0], *step = op->operands[2];
  AxisInfo l = facts(an, lo), s = facts(an, step);
  int64_t div = min64(elem_div(&l, lo->type), elem_div(&s, step->type));
  put(an, iv, info_elementwise(iv->type, div), nonneg(an, lo) && nonneg(an, step));
}

static void analyze_for(AxisAnalysis *an, const Op *op) {
  const Block *body = &op->regions[0];
  uint32_t n = op->nresults;
  if (op->noperands < 3 || body->nargs != n + 1 || op->noperands != n + 3) {
    for (uint32_t i = 0; i < body->nargs; i++) put(an, &body->args[i], info_unknown(), false);
    analyze_block(an, body);
    for (uint32_t i = 0; i < n; i++) put(an, &op->results[i], info_unknown(), false);
    return;
  }
  seed_induction(an, op, &body->args[0]);
  seed_args(an, body->args + 1, op->operands + 3, n);
  int round = 0;
  do analyze_block(an, body);
  while (meet_args(an, body->args + 1, yield_of(body, n), n) && ++round < AXIS_MAX_FIXPOINT_ROUNDS);
  if (round == AXIS_MAX_FIXPOINT_ROUNDS) {
    forget_args(an, body->args + 1, n);
    analyze_block(an, body);
  }
  set_results_from(an, op, body->args + 1);
}

static void analyze_if(AxisAnalysis *an, const Op *op) {
  analyze_block(an, &op->regions[0]);
  analyze_block(an, &op->regions[1]);
  const Op *y0 = yield_of(&op->regions[0], op->nresults), *y1 = yield_of(&op->regions[1], op->nresults);
  for (uint32_t i = 0; i < op->nresults; i++) {
    const Value *res = &op->results[i];
    if (!y0 || !y1) {
      put(an, res, info_unknown(), false);
      continue;
    }
    AxisInfo a = facts(an, y0->operands[i]), b = facts(an, y1->operands[i]);
    put(an, res, meet(&a, &b, res->type), nonneg(an, y0->operands[i]) && nonneg(an, y1->operands[i]));
  }
}

/* while: `before` sees the inits and every `do` yield; `do` sees the same
 * values as `before`'s arguments, and so do the results. */
static void analyze_while_once(AxisAnalysis *an, const Op *op) {
  const Block *before = &op->regions[0], *after = &op->regions[1];
  analyze_block(an, before);
  for (uint32_t i = 0; i < after->nargs && i < before->nargs; i++)
    put(an, &after->args[i], facts(an, &before->args[i]), nonneg(an, &before->args[i]));
  analyze_block(an, after);
}

static void analyze_while(AxisAnalysis *an, const Op *op) {
  const Block *before = &op->regions[0], *after = &op->regions[1];
  uint32_t n = op->noperands;
  if (before->nargs != n || after->nargs != n || op->nresults != n) {
    forget_args(an, before->args, before->nargs);
    forget_args(an, after->args, after->nargs);
    analyze_block(an, before);
    analyze_block(an, after);
    for (uint32_t i = 0; i < op->nresults; i++) put(an, &op->results[i], info_unknown(), false);
    return;
  }
  seed_args(an, before->args, op->operands, n);
  int round = 0;
  do analyze_while_once(an, op);
  while (meet_args(an, before->args, yield_of(after, n), n) && ++round < AXIS_MAX_FIXPOINT_ROUNDS);
  if (round == AXIS_MAX_FIXPOINT_ROUNDS) {
    forget_args(an, before->args, n);
    analyze_while_once(an, op);
  }
  set_results_from(an, op, before->args);
}

static void analyze_op(AxisAnalysis *an, const Op *op) {
  switch (op->kind) {
  case OP_FOR: analyze_for(an, op); return;
  case OP_IF: analyze_if(an, op); return;
  case OP_WHILE: analyze_while(an, op); return;
  default: break;
  }
  for (uint32_t i = 0; i < op->nregions; i++) analyze_block(an, &op->regions[i]);
  if (op->nresults == 0) return;
  put(an, &op->results[0], transfer(an, op), nonneg_result(an, op));
  for (uint32_t i = 1; i < op->nresults; i++) put(an, &op->results[i], info_unknown(), false);
}

static void analyze_block(AxisAnalysis *an, const Block *b) {
  for (const Op *op = b->first; op; op = op->next) analyze_op(an, op);
}

/* ---- the interface ------------------------------------------------------ */

AxisAnalysis *axis_analyze(const Func *f, Arena *arena) {
  AxisAnalysis *an = ARENA_NEW(arena, AxisAnalysis);
  size_t want = ir_count_values(&f->body) * AXIS_SLOTS_PER_VALUE, slots = AXIS_MIN_SLOTS;
  while (slots < want) slots *= 2;
  an->slots = ARENA_ARRAY(arena, AxisEntry, slots);
  an->mask = slots - 1;
  for (uint32_t i = 0; i < f->body.nargs; i++) {
    const Value *p = &f->body.args[i];
    put(an, p, param_facts(f, i), is_int(p->type) && !scalar_is_signed((ScalarKind)p->type.kind));
  }
  analyze_block(an, &f->body);
  return an;
}

AxisInfo axis_info(const AxisAnalysis *a, const Value *v) {
  if (!a || !v) return info_unknown();
  return facts(a, v);
}

int axis_vector_width(const AxisAnalysis *a, const Value *ptr, const Value *mask, int per_thread) {
  TType t = ptr->type;
  if (!is_ptr(t) || per_thread < 1) return 1;
  AxisInfo p = axis_info(a, ptr);
  int d = ndims(t) - 1;
  int64_t e = unit_of(t);
  int64_t w = min64(p.contiguity[d], max64(1, p.divisibility[d] / e));
  w = min64(w, max64(1, AXIS_VECTOR_BYTES / e));
  w = min64(w, per_thread);
  if (mask) w = min64(w, axis_info(a, mask).constancy[d]);
  return (int)floor_pow2(w);
}
