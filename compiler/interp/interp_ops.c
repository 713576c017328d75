/* interp_ops.c - the interpreter's computing ops: constants and ids,
 * elementwise arithmetic, comparisons, casts, shape changes, reductions and
 * dot, all with the element semantics of numeric.h.
 *
 * Each function decides everything that depends on the op and the element
 * kind before its element loop, so the loops stay short (dot and f32
 * arithmetic, the hot paths of attention kernels, have loops of their own).
 * Operand shapes were checked when the function was translated (interp.c)
 * for elementwise ops; the other ops check what they index with.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp_internal.h"

/* Longest "[i, j, k, l]" element index text. */
#define INDEX_TEXT_BYTES 96

static Slot slot_zero(void) {
  Slot s;
  s.u = 0;
  return s;
}

static void fill(Tile *t, Slot v) {
  for (int64_t i = 0; i < t->n; i++) t->data[i] = v;
}

static bool internal_error(Interp *ip, const XOp *xo) {
  return interp_fail(ip, xo, "malformed '%s' op (operand shapes do not fit)",
                     op_info[xo->kind].name);
}

/* ---- constants and ids ----------------------------------------------- */

static bool exec_const(Interp *ip, const XOp *xo) {
  Tile *r = interp_out(ip, xo, 0);
  ScalarKind k = (ScalarKind)r->type.kind;
  Slot v = slot_zero();
  if (scalar_is_float(k)) v.f = num_round_float(xo->op->fattr, k);
  else if (scalar_is_int(k) || k == SK_PTR) v = num_wrap_int((uint64_t)xo->op->attr[0], k);
  fill(r, v);
  return true;
}

static bool exec_arange(Interp *ip, const XOp *xo) {
  Tile *r = interp_out(ip, xo, 0);
  ScalarKind k = (ScalarKind)r->type.kind;
  uint64_t start = (uint64_t)xo->op->attr[0];
  for (int64_t i = 0; i < r->n; i++) r->data[i] = num_wrap_int(start + (uint64_t)i, k);
  return true;
}

static bool exec_program_id(Interp *ip, const XOp *xo) {
  int64_t axis = xo->op->attr[0];
  if (axis < 0 || axis > 2) return interp_fail(ip, xo, "program axis %lld is not 0, 1 or 2", (long long)axis);
  Tile *r = interp_out(ip, xo, 0);
  int64_t v = xo->kind == OP_PROGRAM_ID ? ip->pid[axis] : ip->grid[axis];
  fill(r, num_wrap_int((uint64_t)v, (ScalarKind)r->type.kind));
  return true;
}

/* ---- elementwise binary ----------------------------------------------- */

static NumBinop binop_of(OpKind k) {
  switch (k) {
  case OP_SUB: return NUM_SUB;
  case OP_MUL: return NUM_MUL;
  case OP_DIV: return NUM_DIV;
  case OP_REM: return NUM_REM;
  case OP_AND: return NUM_AND;
  case OP_OR: return NUM_OR;
  case OP_XOR: return NUM_XOR;
  case OP_SHL: return NUM_SHL;
  case OP_SHR: return NUM_SHR;
  case OP_MAX: return NUM_MAX;
  case OP_MIN: return NUM_MIN;
  default: return NUM_ADD;
  }
}

/* f32 + - * /: the double result rounded to f32 is the correctly rounded
 * f32 result (as num_binop computes it). False for other operations. */
static bool binop_f32(NumBinop op, const Slot *a, const Slot *b, Slot *r, int64_t n) {
  switch (op) {
  case NUM_ADD:
    for (int64_t i = 0; i < n; i++) r[i].f = (float)(a[i].f + b[i].f);
    return true;
  case NUM_SUB:
    for (int64_t i = 0; i < n; i++) r[i].f = (float)(a[i].f - b[i].f);
    return true;
  case NUM_MUL:
    for (int64_t i = 0; i < n; i++) r[i].f = (float)(a[i].f * b[i].f);
    return true;
  case NUM_DIV:
    for (int64_t i = 0; i < n; i++) r[i].f = (float)(a[i].f / b[i].f);
    return true;
  default: return false;
  }
}

/* Integer + - *: wrapping arithmetic on the 64-bit patterns. */
static bool binop_int(NumBinop op, const Slot *a, const Slot *b, Slot *r, int64_t n, ScalarKind k) {
  switch (op) {
  case NUM_ADD:
    for (int64_t i = 0; i < n; i++) r[i] = num_wrap_int(a[i].u + b[i].u, k);
    return true;
  case NUM_SUB:
    for (int64_t i = 0; i < n; i++) r[i] = num_wrap_int(a[i].u - b[i].u, k);
    return true;
  case NUM_MUL:
    for (int64_t i = 0; i < n; i++) r[i] = num_wrap_int(a[i].u * b[i].u, k);
    return true;
  default: return false;
  }
}

static bool exec_binary(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *b = interp_in(ip, xo, 1), *r = interp_out(ip, xo, 0);
  ScalarKind k = (ScalarKind)a->type.kind;
  NumBinop op = binop_of(xo->kind);
  if (k == SK_F32 && binop_f32(op, a->data, b->data, r->data, r->n)) return true;
  if (scalar_is_int(k) && binop_int(op, a->data, b->data, r->data, r->n, k)) return true;
  bool div_by_zero = false;
  for (int64_t i = 0; i < r->n; i++) {
    r->data[i] = num_binop(op, a->data[i], b->data[i], k, &div_by_zero);
    if (!div_by_zero) continue;
    if (a->type.rank == 0) return interp_fail(ip, xo, "integer division by zero");
    char index[INDEX_TEXT_BYTES];
    interp_format_index(a->type, i, index, sizeof index);
    return interp_fail(ip, xo, "integer division by zero at element %s", index);
  }
  return true;
}

static NumCmp cmp_of(OpKind k) {
  switch (k) {
  case OP_CMP_NE: return NUM_NE;
  case OP_CMP_LT: return NUM_LT;
  case OP_CMP_LE: return NUM_LE;
  case OP_CMP_GT: return NUM_GT;
  case OP_CMP_GE: return NUM_GE;
  default: return NUM_EQ;
  }
}

static bool exec_compare(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *b = interp_in(ip, xo, 1), *r = interp_out(ip, xo, 0);
  ScalarKind k = (ScalarKind)a->type.kind;
  NumCmp op = cmp_of(xo->kind);
  for (int64_t i = 0; i < r->n; i++) r->data[i].u = num_cmp(op, a->data[i], b->data[i], k);
  return true;
}

/* pointer + integer offset in elements of the pointee (either order). */
static bool exec_ptr_add(Interp *ip, const XOp *xo) {
  Tile *p = interp_in(ip, xo, 0), *off = interp_in(ip, xo, 1), *r = interp_out(ip, xo, 0);
  if (p->type.kind != SK_PTR) {
    Tile *t = p;
    p = off;
    off = t;
  }
  uint64_t bytes = (uint64_t)scalar_bytes((ScalarKind)p->type.pointee);
  for (int64_t i = 0; i < r->n; i++) r->data[i].u = p->data[i].u + off->data[i].u * bytes;
  return true;
}

/* ---- elementwise unary and ternary ------------------------------------ */

static NumUnop unop_of(OpKind k) {
  switch (k) {
  case OP_NOT: return NUM_NOT;
  case OP_ABS: return NUM_ABS;
  case OP_EXP: return NUM_EXP;
  case OP_EXP2: return NUM_EXP2;
  case OP_LOG: return NUM_LOG;
  case OP_LOG2: return NUM_LOG2;
  case OP_SQRT: return NUM_SQRT;
  case OP_RSQRT: return NUM_RSQRT;
  case OP_SIN: return NUM_SIN;
  case OP_COS: return NUM_COS;
  case OP_TANH: return NUM_TANH;
  case OP_ERF: return NUM_ERF;
  case OP_SIGMOID: return NUM_SIGMOID;
  case OP_FLOOR: return NUM_FLOOR;
  case OP_CEIL: return NUM_CEIL;
  default: return NUM_NEG;
  }
}

static bool exec_unary(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  ScalarKind k = (ScalarKind)a->type.kind;
  NumUnop op = unop_of(xo->kind);
  for (int64_t i = 0; i < r->n; i++) r->data[i] = num_unop(op, a->data[i], k);
  return true;
}

static bool exec_cast(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  ScalarKind from = (ScalarKind)a->type.kind, to = (ScalarKind)r->type.kind;
  if (from == to || (from == SK_PTR && to == SK_PTR)) {
    memcpy(r->data, a->data, sizeof(Slot) * (size_t)r->n);
    return true;
  }
  if (xo->kind == OP_BITCAST) {
    if (scalar_bits(from) != scalar_bits(to)) return internal_error(ip, xo);
    for (int64_t i = 0; i < r->n; i++) r->data[i] = num_bitcast(a->data[i], from, to);
  } else {
    for (int64_t i = 0; i < r->n; i++) r->data[i] = num_convert(a->data[i], from, to);
  }
  return true;
}

static bool exec_fma(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *b = interp_in(ip, xo, 1), *c = interp_in(ip, xo, 2);
  Tile *r = interp_out(ip, xo, 0);
  ScalarKind k = (ScalarKind)r->type.kind;
  for (int64_t i = 0; i < r->n; i++) r->data[i] = num_fma(a->data[i], b->data[i], c->data[i], k);
  return true;
}

static bool exec_select(Interp *ip, const XOp *xo) {
  Tile *c = interp_in(ip, xo, 0), *a = interp_in(ip, xo, 1), *b = interp_in(ip, xo, 2);
  Tile *r = interp_out(ip, xo, 0);
  for (int64_t i = 0; i < r->n; i++) r->data[i] = (c->data[i].u & 1) ? a->data[i] : b->data[i];
  return true;
}

/* ---- shapes ------------------------------------------------------------- */

/* Row-major element strides of a type. */
static void row_major_strides(TType t, int64_t *strides) {
  int64_t s = 1;
  for (int d = t.rank - 1; d >= 0; d--) {
    strides[d] = s;
    s *= t.shape[d];
  }
}

/* dst (row-major, `shape`) [i] = src[sum of index_d * strides[d]]. */
static void gather(Slot *dst, const Slot *src, const TType *shape, const int64_t *strides) {
  int64_t idx[TILE_MAX_RANK] = {0};
  int64_t n = type_numel(*shape), off = 0;
  for (int64_t i = 0; i < n; i++) {
    dst[i] = src[off];
    for (int d = shape->rank - 1; d >= 0; d--) {
      idx[d]++;
      off += strides[d];
      if (idx[d] < shape->shape[d]) break;
      off -= strides[d] * shape->shape[d];
      idx[d] = 0;
    }
  }
}

/* broadcast: a scalar, or a tile of at most the result's rank (aligned to
 * the right) whose dimensions are equal to the result's or 1. */
static bool exec_broadcast(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  if (a->n == 1) {
    fill(r, a->data[0]);
    return true;
  }
  int lead = r->type.rank - a->type.rank;
  if (lead < 0) return internal_error(ip, xo);
  int64_t astrides[TILE_MAX_RANK], strides[TILE_MAX_RANK] = {0};
  row_major_strides(a->type, astrides);
  for (int d = 0; d < a->type.rank; d++) {
    int32_t ad = a->type.shape[d], rd = r->type.shape[d + lead];
    if (ad != rd && ad != 1) return internal_error(ip, xo);
    strides[d + lead] = ad == 1 ? 0 : astrides[d];
  }
  gather(r->data, a->data, &r->type, strides);
  return true;
}

/* expand_dims, reshape: the row-major element order is kept. */
static bool exec_reshape(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  if (a->n != r->n) return internal_error(ip, xo);
  memcpy(r->data, a->data, sizeof(Slot) * (size_t)r->n);
  return true;
}

/* Bits per entry of trans's packed perm attribute. */
#define TRANS_PERM_BITS 4

static bool exec_trans(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  int rank = r->type.rank;
  if (a->type.rank != rank) return internal_error(ip, xo);
  int64_t astrides[TILE_MAX_RANK], strides[TILE_MAX_RANK];
  row_major_strides(a->type, astrides);
  for (int i = 0; i < rank; i++) {
    int p = (int)(((uint64_t)xo->op->attr[0] >> (TRANS_PERM_BITS * i)) & 0xF);
    if (p >= rank || a->type.shape[p] != r->type.shape[i]) return internal_error(ip, xo);
    strides[i] = astrides[p];
  }
  gather(r->data, a->data, &r->type, strides);
  return true;
}

/* ---- reductions ----------------------------------------------------- */

/* A reduction's iteration space: out[o, i] = reduce over j of
 * in[o, j, i], with len values of j spaced `inner` apart. */
typedef struct ReduceShape {
  int64_t outer, len, inner;
} ReduceShape;

static bool reduce_shape(const Tile *a, const Tile *r, int64_t axis, ReduceShape *rs) {
  int rank = a->type.rank;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  rs->outer = rs->inner = 1;
  for (int d = 0; d < axis; d++) rs->outer *= a->type.shape[d];
  for (int d = (int)axis + 1; d < rank; d++) rs->inner *= a->type.shape[d];
  rs->len = a->type.shape[axis];
  return rs->outer * rs->inner == r->n;
}

/* Pairwise (tree) sum: each half summed recursively, then added. */
static Slot pairwise_sum(const Slot *x, int64_t n, ScalarKind k) {
  if (n == 1) return x[0];
  int64_t half = n / 2;
  return num_binop(NUM_ADD, pairwise_sum(x, half, k), pairwise_sum(x + half, n - half, k), k, NULL);
}

/* Whether v beats the best so far for argmax (want_max) or argmin. Floats:
 * +0 counts as greater than -0, as in maximum(). */
static bool beats(Slot v, Slot best, ScalarKind k, bool want_max) {
  if (num_cmp(want_max ? NUM_GT : NUM_LT, v, best, k)) return true;
  if (!scalar_is_float(k) || v.f != 0.0 || best.f != 0.0) return false;
  return want_max ? (!signbit(v.f) && signbit(best.f)) : (signbit(v.f) && !signbit(best.f));
}

/* Index of the first extreme element; NaNs are skipped; all NaN gives 0. */
static int64_t arg_extreme(const Slot *x, int64_t n, ScalarKind k, bool want_max) {
  int64_t best = -1;
  bool is_float = scalar_is_float(k);
  for (int64_t j = 0; j < n; j++) {
    if (is_float && isnan(x[j].f)) continue;
    if (best < 0 || beats(x[j], x[best], k, want_max)) best = j;
  }
  return best < 0 ? 0 : best;
}

static Slot reduce_lane(OpKind op, const Slot *x, int64_t n, ScalarKind k) {
  switch (op) {
  case OP_REDUCE_SUM: return pairwise_sum(x, n, k);
  case OP_REDUCE_MAX:
  case OP_REDUCE_MIN: {
    NumBinop b = op == OP_REDUCE_MAX ? NUM_MAX : NUM_MIN;
    Slot acc = x[0];
    for (int64_t j = 1; j < n; j++) acc = num_binop(b, acc, x[j], k, NULL);
    return acc;
  }
  default: {
    Slot idx;
    idx.u = (uint64_t)arg_extreme(x, n, k, op == OP_ARGMAX);
    return idx;
  }
  }
}

static bool exec_reduce(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  ReduceShape rs;
  if (!reduce_shape(a, r, xo->op->attr[0], &rs)) return internal_error(ip, xo);
  bool is_arg = xo->kind == OP_ARGMAX || xo->kind == OP_ARGMIN;
  ScalarKind from = (ScalarKind)a->type.kind, rk = (ScalarKind)r->type.kind;
  /* Sums and extremes compute in the result's kind; arg* compare in the
   * operand's kind and give an index. */
  ScalarKind k = is_arg ? from : rk;
  Slot *lane = malloc(sizeof(Slot) * (size_t)rs.len);
  if (!lane) return interp_fail(ip, xo, "out of memory");
  for (int64_t o = 0; o < rs.outer; o++)
    for (int64_t i = 0; i < rs.inner; i++) {
      const Slot *src = a->data + o * rs.len * rs.inner + i;
      for (int64_t j = 0; j < rs.len; j++)
        lane[j] = from == k ? src[j * rs.inner] : num_convert(src[j * rs.inner], from, k);
      Slot v = reduce_lane((OpKind)xo->kind, lane, rs.len, k);
      r->data[o * rs.inner + i] = is_arg ? num_wrap_int(v.u, rk) : v;
    }
  free(lane);
  return true;
}

/* Inclusive prefix sums along the axis, in the grouping the GPU uses (a
 * Hillis-Steele scan: in round d = 1, 2, 4, ... every element at position
 * j >= d adds the element d before it, both as of the previous round), so
 * that float results are the same on both targets. */
static bool exec_cumsum(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *r = interp_out(ip, xo, 0);
  ScalarKind k = (ScalarKind)r->type.kind;
  int rank = a->type.rank, axis = (int)xo->op->attr[0];
  if (axis < 0 || axis >= rank || a->n != r->n) return internal_error(ip, xo);
  int64_t len = a->type.shape[axis], inner = 1;
  for (int d = axis + 1; d < rank; d++) inner *= a->type.shape[d];
  memcpy(r->data, a->data, sizeof(Slot) * (size_t)r->n);
  for (int64_t o = 0; o < r->n / (len * inner); o++)
    for (int64_t i = 0; i < inner; i++) {
      Slot *x = r->data + o * len * inner + i;
      /* descending j: x[j - d] is still the previous round's value */
      for (int64_t d = 1; d < len; d *= 2)
        for (int64_t j = len - 1; j >= d; j--) x[j * inner] = num_binop(NUM_ADD, x[(j - d) * inner], x[j * inner], k, NULL);
    }
  return true;
}

/* ---- dot ---------------------------------------------------------------- */

/* Shapes of one dot: batch x (M x K) . (K x N). */
typedef struct DotShape {
  int64_t batch, m, n, k;
} DotShape;

static bool dot_shape(const Tile *a, const Tile *b, const Tile *c, const Tile *r, DotShape *ds) {
  int rank = a->type.rank;
  if ((rank != 2 && rank != 3) || b->type.rank != rank || c->type.rank != rank) return false;
  if (!type_shape_eq(c->type, r->type)) return false;
  int o = rank - 2;
  ds->batch = rank == 3 ? a->type.shape[0] : 1;
  ds->m = a->type.shape[o];
  ds->k = a->type.shape[o + 1];
  ds->n = b->type.shape[o + 1];
  if (rank == 3 && (b->type.shape[0] != ds->batch || c->type.shape[0] != ds->batch)) return false;
  return b->type.shape[o] == ds->k && c->type.shape[o] == ds->m && c->type.shape[o + 1] == ds->n;
}

/* c + p rounded to double by round-to-odd: the exact sum when it is a
 * double, else the neighbour with an odd last bit. Rounding that once more
 * to a format of at most 51 significant bits gives the correctly rounded
 * exact sum (no double-rounding error). */
static double sum_round_to_odd(double c, double p) {
  double s = c + p;
  double pv = s - c, cv = s - pv;
  double err = (c - cv) + (p - pv); /* c + p == s + err exactly */
  if (err == 0.0 || !isfinite(s)) return s;
  uint64_t bits;
  memcpy(&bits, &s, sizeof bits);
  if (bits & 1) return s;
  bits += (err > 0.0) == (s > 0.0) ? 1 : (uint64_t)-1; /* one ulp toward the exact sum */
  memcpy(&s, &bits, sizeof s);
  return s;
}

/* Float dot: each product exact (inputs of at most 24 significant bits),
 * added to the accumulator in increasing k, each sum rounded once to the
 * accumulator kind (f64 accumulators use fma). a is m x k, bt is n x k. */
static void dot_float_tile(const Slot *a, const Slot *bt, const Slot *acc, Slot *r,
                           const DotShape *ds, ScalarKind k) {
  for (int64_t i = 0; i < ds->m; i++)
    for (int64_t j = 0; j < ds->n; j++) {
      const Slot *ar = a + i * ds->k, *br = bt + j * ds->k;
      double c = acc[i * ds->n + j].f;
      if (k == SK_F32) {
        for (int64_t l = 0; l < ds->k; l++) c = (float)sum_round_to_odd(c, ar[l].f * br[l].f);
      } else if (k == SK_F64) {
        for (int64_t l = 0; l < ds->k; l++) c = fma(ar[l].f, br[l].f, c);
      } else {
        for (int64_t l = 0; l < ds->k; l++)
          c = num_round_float(sum_round_to_odd(c, ar[l].f * br[l].f), k);
      }
      r[i * ds->n + j].f = c;
    }
}

/* Integer dot: wrapping products and sums in the accumulator's kind. */
static void dot_int_tile(const Slot *a, const Slot *bt, const Slot *acc, Slot *r, const DotShape *ds,
                         ScalarKind k) {
  for (int64_t i = 0; i < ds->m; i++)
    for (int64_t j = 0; j < ds->n; j++) {
      const Slot *ar = a + i * ds->k, *br = bt + j * ds->k;
      uint64_t c = acc[i * ds->n + j].u;
      for (int64_t l = 0; l < ds->k; l++) c = num_wrap_int(c + ar[l].u * br[l].u, k).u;
      r[i * ds->n + j].u = c;
    }
}

/* Copies a (m x k) and b transposed (n x k) into work buffers, converting
 * to the accumulator's domain (double for floats, the integer otherwise). */
static void dot_stage(const Slot *a, const Slot *b, ScalarKind ka, ScalarKind kb, bool is_float,
                      const DotShape *ds, Slot *wa, Slot *wbt) {
  for (int64_t i = 0; i < ds->m * ds->k; i++)
    wa[i] = is_float && !scalar_is_float(ka) ? num_convert(a[i], ka, SK_F64) : a[i];
  for (int64_t l = 0; l < ds->k; l++)
    for (int64_t j = 0; j < ds->n; j++) {
      Slot v = b[l * ds->n + j];
      wbt[j * ds->k + l] = is_float && !scalar_is_float(kb) ? num_convert(v, kb, SK_F64) : v;
    }
}

static bool exec_dot(Interp *ip, const XOp *xo) {
  Tile *a = interp_in(ip, xo, 0), *b = interp_in(ip, xo, 1), *c = interp_in(ip, xo, 2);
  Tile *r = interp_out(ip, xo, 0);
  DotShape ds;
  if (!dot_shape(a, b, c, r, &ds)) return internal_error(ip, xo);
  if (!interp_charge(ip, xo, (uint64_t)(ds.batch * ds.m * ds.n * ds.k))) return false;
  ScalarKind k = (ScalarKind)r->type.kind;
  bool is_float = scalar_is_float(k);
  Slot *wa = malloc(sizeof(Slot) * (size_t)(ds.m * ds.k));
  Slot *wbt = malloc(sizeof(Slot) * (size_t)(ds.n * ds.k));
  if (!wa || !wbt) {
    free(wa);
    free(wbt);
    return interp_fail(ip, xo, "out of memory");
  }
  for (int64_t bi = 0; bi < ds.batch; bi++) {
    const Slot *ab = a->data + bi * ds.m * ds.k, *bb = b->data + bi * ds.k * ds.n;
    const Slot *cb = c->data + bi * ds.m * ds.n;
    Slot *rb = r->data + bi * ds.m * ds.n;
    dot_stage(ab, bb, (ScalarKind)a->type.kind, (ScalarKind)b->type.kind, is_float, &ds, wa, wbt);
    if (is_float)
      dot_float_tile(wa, wbt, cb, rb, &ds, k);
    else
      dot_int_tile(wa, wbt, cb, rb, &ds, k);
  }
  free(wa);
  free(wbt);
  return true;
}

/* ---- device_print, device_assert --------------------------------------- */

/* "pid (x, y, z)" (with pid) and, for an element of a tile, " idx (i, j)". */
static void where_text(const Interp *ip, bool pid, TType t, int64_t i, char *buf, size_t size) {
  int n = pid ? snprintf(buf, size, "pid (%lld, %lld, %lld) ", (long long)ip->pid[0], (long long)ip->pid[1],
                         (long long)ip->pid[2])
              : 0;
  if (n < 0 || (size_t)n >= size) n = 0;
  buf[n] = 0;
  if (t.rank == 0) return;
  int64_t coord[TILE_MAX_RANK];
  for (int d = t.rank - 1; d >= 0; d--) {
    coord[d] = i % t.shape[d];
    i /= t.shape[d];
  }
  n += snprintf(buf + n, size - (size_t)n, "idx (");
  for (int d = 0; d < t.rank && (size_t)n < size; d++)
    n += snprintf(buf + n, size - (size_t)n, d ? ", %lld" : "%lld", (long long)coord[d]);
  if ((size_t)n < size) snprintf(buf + n, size - (size_t)n, ") ");
}

static void print_value(FILE *out, ScalarKind k, Slot v) {
  const char *fmt = num_print_format(k);
  switch (num_print_kind(k)) {
  case NUM_PRINT_DOUBLE: fprintf(out, fmt, v.f); break;
  case NUM_PRINT_SIGNED: fprintf(out, fmt, (long long)v.i); break;
  default: fprintf(out, fmt, (unsigned long long)v.u); break;
  }
}

/* Room for "pid (...) idx (...)" with 2^31 - 1 in every field. */
#define WHERE_TEXT_MAX 160

static bool exec_device_print(Interp *ip, const XOp *xo) {
  const char *msg = xo->op->text ? xo->op->text : "";
  char where[WHERE_TEXT_MAX];
  if (!xo->nin) {
    where_text(ip, true, (TType){0}, 0, where, sizeof where);
    fprintf(ip->out, "%s%s\n", where, msg);
    return true;
  }
  const Tile *t = interp_in(ip, xo, 0);
  for (int64_t i = 0; i < t->n; i++) {
    where_text(ip, true, t->type, i, where, sizeof where);
    fprintf(ip->out, "%s%s: ", where, msg);
    print_value(ip->out, (ScalarKind)t->type.kind, t->data[i]);
    fputc('\n', ip->out);
  }
  fflush(ip->out);
  return true;
}

static bool exec_device_assert(Interp *ip, const XOp *xo) {
  const Tile *t = interp_in(ip, xo, 0);
  for (int64_t i = 0; i < t->n; i++) {
    if (t->data[i].i) continue;
    char where[WHERE_TEXT_MAX];
    where_text(ip, false, t->type, i, where, sizeof where);
    size_t n = strlen(where);
    if (n) where[n - 1] = 0; /* "idx (i, j)" without its space */
    return interp_fail(ip, xo, "device_assert failed%s%s: %s", n ? " at " : "", where, xo->op->text ? xo->op->text : "");
  }
  return true;
}

/* ---- dispatch ------------------------------------------------------------ */

bool interp_exec_compute(Interp *ip, const XOp *xo) {
  switch (xo->kind) {
  case OP_CONST: return exec_const(ip, xo);
  case OP_ARANGE: return exec_arange(ip, xo);
  case OP_PROGRAM_ID:
  case OP_NUM_PROGRAMS: return exec_program_id(ip, xo);
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_REM: case OP_AND: case OP_OR:
  case OP_XOR: case OP_SHL: case OP_SHR: case OP_MAX: case OP_MIN: return exec_binary(ip, xo);
  case OP_CMP_EQ: case OP_CMP_NE: case OP_CMP_LT: case OP_CMP_LE: case OP_CMP_GT:
  case OP_CMP_GE: return exec_compare(ip, xo);
  case OP_PTR_ADD: return exec_ptr_add(ip, xo);
  case OP_NEG: case OP_NOT: case OP_ABS: case OP_EXP: case OP_EXP2: case OP_LOG: case OP_LOG2:
  case OP_SQRT: case OP_RSQRT: case OP_SIN: case OP_COS: case OP_TANH: case OP_ERF:
  case OP_SIGMOID: case OP_FLOOR: case OP_CEIL: return exec_unary(ip, xo);
  case OP_CAST:
  case OP_BITCAST: return exec_cast(ip, xo);
  case OP_FMA: return exec_fma(ip, xo);
  case OP_SELECT: return exec_select(ip, xo);
  case OP_BROADCAST: return exec_broadcast(ip, xo);
  case OP_EXPAND_DIMS:
  case OP_RESHAPE: return exec_reshape(ip, xo);
  case OP_TRANS: return exec_trans(ip, xo);
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_ARGMAX:
  case OP_ARGMIN: return exec_reduce(ip, xo);
  case OP_CUMSUM: return exec_cumsum(ip, xo);
  case OP_DOT: return exec_dot(ip, xo);
  case OP_LOAD: return interp_exec_load(ip, xo);
  case OP_STORE: return interp_exec_store(ip, xo);
  case OP_ATOMIC_ADD: case OP_ATOMIC_MAX: case OP_ATOMIC_MIN: case OP_ATOMIC_AND:
  case OP_ATOMIC_OR: case OP_ATOMIC_XOR: case OP_ATOMIC_XCHG:
  case OP_ATOMIC_CAS: return interp_exec_atomic(ip, xo);
  case OP_BLOCK_LOAD: return interp_exec_block_load(ip, xo);
  case OP_BLOCK_STORE: return interp_exec_block_store(ip, xo);
  case OP_DEVICE_PRINT: return exec_device_print(ip, xo);
  case OP_DEVICE_ASSERT: return exec_device_assert(ip, xo);
  case OP_FENCE: return true; /* programs run one after another: every write is seen */
  case OP_TURN_WAIT: case OP_TURN_PASS: return true; /* an order of warpgroups' work: no value changes */
  default: return interp_fail(ip, xo, "op '%s' cannot be interpreted here", op_info[xo->kind].name);
  }
}
