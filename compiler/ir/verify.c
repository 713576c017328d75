/* verify.c - the tile IR verifier: structure, dominance and type rules.
 *
 * Every pass can assume verified IR, and a pass that breaks an invariant is
 * caught right after it runs instead of as a wrong result or a crash far
 * away.  Checked here:
 *   - structure: each block ends with exactly one terminator (yield in
 *     regions, return in the kernel body), none in the middle; region
 *     counts and block arguments of for/if/while; what regions yield;
 *   - dominance: every operand is defined earlier in the same block or in
 *     an enclosing block (Value.id is used as scratch for this);
 *   - operand and result counts and the type rules of every op (ir.h's
 *     header comment), and that every type is a valid tile type (dimensions
 *     powers of two, rank <= TILE_MAX_RANK, at most TILE_MAX_ELEMS elements).
 * Problems are reported with diag_error at the op's location, as
 * "invalid IR: <op>: <what is wrong>"; all of them, not only the first.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "verify_internal.h"

#define report verify_report

/* Room for a label like "region 1 argument". */
#define VERIFY_LABEL_BUF 32
/* Bits per entry of trans's packed perm attribute. */
#define VERIFY_PERM_BITS 4
/* Number of program_id / num_programs axes (x, y, z). */
#define VERIFY_GRID_AXES 3

/* Value.id marks during verification. */
enum { DOM_UNSEEN = 0, DOM_VISIBLE = 1, DOM_DEAD = 2 };



TypeText tt(TType t) {
  TypeText out;
  if (t.rank > TILE_MAX_RANK) t.rank = TILE_MAX_RANK;
  type_str(t, out.s, sizeof out.s);
  return out;
}

static const char *op_name(const Op *op) {
  return op->kind < OP_COUNT ? op_info[op->kind].name : "unknown op";
}

void verify_report(Verifier *v, const Op *op, const char *fmt, ...) {
  char msg[VERIFY_MAX_MESSAGE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(v->diags, op->loc, "invalid IR: %s: %s", op_name(op), msg);
  v->ok = false;
}

/* ---- types -------------------------------------------------------------- */

bool is_element_kind(unsigned k) { return k >= SK_I1 && k <= SK_F64; }

/* Why t is not a valid value type (written to why), or false when valid. */
static bool type_problem(TType t, char *why, size_t size) {
  int64_t numel = 1;
  if (type_is_buffer(t)) return verify_buffer_type_problem(t, why, size);
  if (!is_element_kind(t.kind) && t.kind != SK_PTR && t.kind != SK_DESC)
    return snprintf(why, size, "element type is not a value type"), true;
  if ((t.kind == SK_PTR || t.kind == SK_DESC) && !is_element_kind(t.pointee))
    return snprintf(why, size, "invalid pointee type"), true;
  if (t.kind == SK_DESC && (t.desc_rank < 1 || t.desc_rank > TILE_MAX_RANK))
    return snprintf(why, size, "descriptor rank %d is not in 1..%d", t.desc_rank, TILE_MAX_RANK), true;
  if (t.kind == SK_DESC && t.rank != 0)
    return snprintf(why, size, "tensor descriptors cannot form tiles"), true;
  if (t.rank > TILE_MAX_RANK)
    return snprintf(why, size, "rank %d exceeds the limit of %d", t.rank, TILE_MAX_RANK), true;
  for (int i = 0; i < t.rank; i++) {
    int32_t d = t.shape[i];
    if (d < 1 || (d & (d - 1)) != 0)
      return snprintf(why, size, "dimension %d is not a power of two", d), true;
    if (d > TILE_MAX_ELEMS || (numel *= d) > TILE_MAX_ELEMS)
      return snprintf(why, size, "more than %d elements", TILE_MAX_ELEMS), true;
  }
  return false;
}

static bool type_valid(TType t) {
  char why[VERIFY_MAX_MESSAGE];
  return !type_problem(t, why, sizeof why);
}

/* Element-kind predicates, on valid types. */
static bool is_int(TType t) { return is_element_kind(t.kind) && scalar_is_int(t.kind); }
static bool is_int_not_i1(TType t) { return is_int(t) && t.kind != SK_I1; }
static bool is_float(TType t) { return is_element_kind(t.kind) && scalar_is_float(t.kind); }
static bool is_num(TType t) { return is_int(t) || is_float(t); }
static bool is_ptr(TType t) { return t.kind == SK_PTR; }
static bool is_i1_scalar(TType t) { return t.kind == SK_I1 && t.rank == 0; }
static bool is_int_scalar(TType t) { return is_int_not_i1(t) && t.rank == 0; }

/* The tile of element kind k with the shape of t. */
static TType tile_like(TType t, ScalarKind k) { return type_with_shape(type_scalar(k), t.rank, t.shape); }
/* The values a pointer tile points to: pointee elements, same shape. */
static TType pointee_tile(TType ptr) { return tile_like(ptr, (ScalarKind)ptr.pointee); }

static TType operand_type(const Op *op, uint32_t i) { return op->operands[i]->type; }
static TType result_type(const Op *op) { return op->results[0].type; }

/* Reports unless the result type equals `want`. */
static void expect_result(Verifier *v, const Op *op, TType want) {
  if (!type_eq(result_type(op), want))
    report(v, op, "result type must be %s, got %s", tt(want).s, tt(result_type(op)).s);
}

/* ---- elementwise ops ---------------------------------------------------- */

typedef enum ElemClass { EC_ARITH, EC_BITWISE, EC_SHIFT, EC_CMP, EC_FLOAT } ElemClass;

static ElemClass elem_class(OpKind k) {
  switch (k) {
  case OP_AND: case OP_OR: case OP_XOR: case OP_NOT: return EC_BITWISE;
  case OP_SHL: case OP_SHR: return EC_SHIFT;
  case OP_CMP_EQ: case OP_CMP_NE: case OP_CMP_LT: case OP_CMP_LE: case OP_CMP_GT: case OP_CMP_GE:
    return EC_CMP;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_REM: case OP_MAX: case OP_MIN:
  case OP_NEG: case OP_ABS: case OP_FMA:
    return EC_ARITH;
  default: return EC_FLOAT; /* exp .. ceil */
  }
}

/* Whether element type t suits the class; *need describes the rule. */
static bool class_accepts(ElemClass c, TType t, const char **need) {
  switch (c) {
  case EC_ARITH: *need = "integer or float"; return is_num(t);
  case EC_BITWISE: *need = "integer"; return is_int(t);
  case EC_SHIFT: *need = "integer other than i1"; return is_int_not_i1(t);
  case EC_CMP: *need = "integer, float or pointer"; return is_num(t) || is_ptr(t);
  case EC_FLOAT: *need = "float"; return is_float(t);
  }
  return false;
}

/* add .. cmp_ge, neg .. ceil, fma: equal operand types of the class; the
 * result has the operand type (i1 of the same shape for cmp). */
static void check_elementwise(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0);
  for (uint32_t i = 1; i < op->noperands; i++)
    if (!type_eq(a, operand_type(op, i))) {
      report(v, op, "operand types differ (%s and %s)", tt(a).s, tt(operand_type(op, i)).s);
      return;
    }
  ElemClass c = elem_class((OpKind)op->kind);
  const char *need = "";
  if (!class_accepts(c, a, &need)) {
    report(v, op, "operand type must be %s, got %s", need, tt(a).s);
    return;
  }
  expect_result(v, op, c == EC_CMP ? tile_like(a, SK_I1) : a);
}

static void check_ptr_add(Verifier *v, const Op *op) {
  TType p = operand_type(op, 0), off = operand_type(op, 1);
  if (!is_ptr(p))
    report(v, op, "operand 0 must be a pointer or pointer tile, got %s", tt(p).s);
  else if (!is_int_not_i1(off))
    report(v, op, "offset must be an integer tile, got %s", tt(off).s);
  else if (!type_shape_eq(p, off))
    report(v, op, "operand shapes differ (%s and %s)", tt(p).s, tt(off).s);
  else
    expect_result(v, op, p);
}

static bool is_64bit_int(TType t) { return t.kind == SK_I64 || t.kind == SK_U64; }

static void check_cast(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0), r = result_type(op);
  bool ok = (is_num(a) && is_num(r)) || (is_ptr(a) && is_ptr(r)) ||
            (is_ptr(a) && is_64bit_int(r)) || (is_64bit_int(a) && is_ptr(r));
  if (!type_shape_eq(a, r))
    report(v, op, "result shape differs from operand shape (%s and %s)", tt(a).s, tt(r).s);
  else if (!ok)
    report(v, op, "cannot cast %s to %s", tt(a).s, tt(r).s);
}

static void check_bitcast(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0), r = result_type(op);
  if (!type_shape_eq(a, r))
    report(v, op, "result shape differs from operand shape (%s and %s)", tt(a).s, tt(r).s);
  else if (!(is_num(a) || is_ptr(a)) || !(is_num(r) || is_ptr(r)))
    report(v, op, "cannot bitcast %s to %s", tt(a).s, tt(r).s);
  else if (scalar_bits(a.kind) != scalar_bits(r.kind))
    report(v, op, "bit widths differ (%s and %s)", tt(a).s, tt(r).s);
}

static void check_select(Verifier *v, const Op *op) {
  TType c = operand_type(op, 0), a = operand_type(op, 1), b = operand_type(op, 2);
  if (!type_eq(a, b))
    report(v, op, "operand types differ (%s and %s)", tt(a).s, tt(b).s);
  else if (!type_eq(c, tile_like(a, SK_I1)))
    report(v, op, "condition must be %s, got %s", tt(tile_like(a, SK_I1)).s, tt(c).s);
  else
    expect_result(v, op, a);
}

/* ---- constants and indices ---------------------------------------------- */

static bool int_fits(int64_t x, ScalarKind k) {
  int bits = scalar_bits(k);
  if (k == SK_I1) return x == 0 || x == 1;
  if (bits >= 64) return true;
  if (scalar_is_signed(k)) return x >= -((int64_t)1 << (bits - 1)) && x < ((int64_t)1 << (bits - 1));
  return x >= 0 && x < ((int64_t)1 << bits);
}

static void check_const(Verifier *v, const Op *op) {
  TType t = result_type(op);
  if (is_float(t)) return;
  if (!is_int(t)) {
    report(v, op, "type %s cannot be a constant", tt(t).s);
  } else if (op->fattr != 0.0 || signbit(op->fattr)) {
    report(v, op, "float value %g given for integer type %s", op->fattr, tt(t).s);
  } else if (!int_fits(op->attr[0], (ScalarKind)t.kind)) {
    if (scalar_is_signed((ScalarKind)t.kind))
      report(v, op, "value %lld does not fit in %s", (long long)op->attr[0], tt(t).s);
    else
      report(v, op, "value %llu does not fit in %s", (unsigned long long)op->attr[0], tt(t).s);
  }
}

static void check_arange(Verifier *v, const Op *op) {
  int64_t start = op->attr[0], end = op->attr[1];
  if (end <= start) {
    report(v, op, "end (%lld) must be greater than start (%lld)", (long long)end, (long long)start);
    return;
  }
  if (start < INT32_MIN || end - 1 > INT32_MAX) {
    report(v, op, "range [%lld, %lld) does not fit in i32", (long long)start, (long long)end);
    return;
  }
  if (end - start > TILE_MAX_ELEMS) { /* both in i32 range: no overflow */
    report(v, op, "range [%lld, %lld) has more than %d elements", (long long)start, (long long)end,
           TILE_MAX_ELEMS);
    return;
  }
  int32_t len = (int32_t)(end - start);
  TType want = type_tile(SK_I32, 1, &len);
  if (!type_eq(result_type(op), want))
    report(v, op, "result type must be i32[%d], got %s", len, tt(result_type(op)).s);
}

static void check_grid_query(Verifier *v, const Op *op) {
  if (op->attr[0] < 0 || op->attr[0] >= VERIFY_GRID_AXES)
    report(v, op, "axis %lld is not in 0..%d", (long long)op->attr[0], VERIFY_GRID_AXES - 1);
  else
    expect_result(v, op, type_scalar(SK_I32));
}

/* ---- shapes ------------------------------------------------------------- */

static void check_broadcast(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0), r = result_type(op);
  bool ok = type_elem_eq(a, r) && (a.rank == 0 || a.rank == r.rank);
  for (int i = 0; ok && i < a.rank; i++) ok = a.shape[i] == r.shape[i] || a.shape[i] == 1;
  if (!ok) report(v, op, "cannot broadcast %s to %s", tt(a).s, tt(r).s);
}

static void check_expand_dims(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0);
  int64_t axis = op->attr[0];
  if (axis < 0 || axis > a.rank) {
    report(v, op, "axis %lld is not in 0..%d", (long long)axis, a.rank);
    return;
  }
  if (a.rank == TILE_MAX_RANK) {
    report(v, op, "cannot add a dimension to %s (rank limit %d)", tt(a).s, TILE_MAX_RANK);
    return;
  }
  int32_t shape[TILE_MAX_RANK];
  for (int i = 0, j = 0; i <= a.rank; i++) shape[i] = i == axis ? 1 : a.shape[j++];
  expect_result(v, op, type_with_shape(a, a.rank + 1, shape));
}

static void check_reshape(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0), r = result_type(op);
  if (!type_elem_eq(a, r))
    report(v, op, "element types differ (%s and %s)", tt(a).s, tt(r).s);
  else if (type_numel(a) != type_numel(r))
    report(v, op, "cannot reshape %s to %s (element counts differ)", tt(a).s, tt(r).s);
}

static void check_trans(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0);
  uint64_t packed = (uint64_t)op->attr[0];
  int32_t shape[TILE_MAX_RANK];
  unsigned seen = 0;
  bool ok = (packed >> (VERIFY_PERM_BITS * a.rank)) == 0;
  for (int i = 0; ok && i < a.rank; i++) {
    unsigned d = (unsigned)(packed >> (VERIFY_PERM_BITS * i)) & 0xf;
    ok = d < (unsigned)a.rank && !(seen & (1u << d));
    seen |= 1u << (d & 0xf);
    if (ok) shape[i] = a.shape[d];
  }
  if (!ok)
    report(v, op, "perm 0x%llx is not a permutation of the %d dimensions of %s",
           (unsigned long long)packed, a.rank, tt(a).s);
  else
    expect_result(v, op, type_with_shape(a, a.rank, shape));
}

/* reduce_*, argmax, argmin: remove dimension `axis`. */
static void check_reduce(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0);
  int64_t axis = op->attr[0];
  if (a.rank == 0) {
    report(v, op, "operand must be a tile, got %s", tt(a).s);
    return;
  }
  if (axis < 0 || axis >= a.rank) {
    report(v, op, "axis %lld is not in 0..%d", (long long)axis, a.rank - 1);
    return;
  }
  if (!is_num(a)) {
    report(v, op, "operand type must be integer or float, got %s", tt(a).s);
    return;
  }
  int32_t shape[TILE_MAX_RANK];
  for (int i = 0, j = 0; i < a.rank; i++)
    if (i != axis) shape[j++] = a.shape[i];
  bool arg = op->kind == OP_ARGMAX || op->kind == OP_ARGMIN;
  TType elem = arg ? type_scalar(SK_I32) : type_elem(a);
  expect_result(v, op, type_with_shape(elem, a.rank - 1, shape));
}

/* x: T[...] -> T[...] (the same type), axis in range. */
static void check_cumsum(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0);
  if (a.rank == 0 || !is_num(a)) {
    report(v, op, "operand must be an integer or float tile, got %s", tt(a).s);
    return;
  }
  if (op->attr[0] < 0 || op->attr[0] >= a.rank) {
    report(v, op, "axis %lld is not in 0..%d", (long long)op->attr[0], a.rank - 1);
    return;
  }
  expect_result(v, op, a);
}

/* a: T[M,K], b: T[K,N], acc: A[M,N] -> A[M,N], optionally batched. */
static void check_dot(Verifier *v, const Op *op) {
  TType a = operand_type(op, 0), b = operand_type(op, 1), c = operand_type(op, 2);
  int r = a.rank;
  if ((r != 2 && r != 3) || b.rank != r || c.rank != r) {
    report(v, op, "operands must all have rank 2 or all rank 3 (%s, %s, %s)", tt(a).s, tt(b).s,
           tt(c).s);
    return;
  }
  bool fp8_pair = (a.kind == SK_F8E4M3 || a.kind == SK_F8E5M2) && (b.kind == SK_F8E4M3 || b.kind == SK_F8E5M2);
  if ((!type_elem_eq(a, b) && !fp8_pair) || !is_num(a)) {
    report(v, op, "a and b must have one number element type, or both be fp8 (%s and %s)", tt(a).s, tt(b).s);
    return;
  }
  if (!(is_float(a) ? is_float(c) : is_int_not_i1(c))) {
    report(v, op, "accumulator %s does not suit inputs %s", tt(c).s, tt(a).s);
    return;
  }
  int m = r - 2, k = r - 1; /* dimension indices of M/K in a, K/N in b */
  bool batch_ok = r == 2 || (a.shape[0] == b.shape[0] && a.shape[0] == c.shape[0]);
  if (!batch_ok || a.shape[k] != b.shape[m] || c.shape[m] != a.shape[m] || c.shape[k] != b.shape[k])
    report(v, op, "shapes do not match (%s, %s, %s)", tt(a).s, tt(b).s, tt(c).s);
  else
    expect_result(v, op, c);
}

/* ---- memory ------------------------------------------------------------- */

static bool check_pointer_operand(Verifier *v, const Op *op) {
  if (is_ptr(operand_type(op, 0))) return true;
  report(v, op, "operand 0 must be a pointer or pointer tile, got %s", tt(operand_type(op, 0)).s);
  return false;
}

/* Operand i must be the i1 mask of the pointer tile's shape. */
static bool check_mask(Verifier *v, const Op *op, uint32_t i) {
  TType want = tile_like(operand_type(op, 0), SK_I1);
  if (type_eq(operand_type(op, i), want)) return true;
  report(v, op, "mask must be %s, got %s", tt(want).s, tt(operand_type(op, i)).s);
  return false;
}

static bool check_value_operand(Verifier *v, const Op *op, uint32_t i, const char *what) {
  TType want = pointee_tile(operand_type(op, 0));
  if (type_eq(operand_type(op, i), want)) return true;
  report(v, op, "%s must be %s, got %s", what, tt(want).s, tt(operand_type(op, i)).s);
  return false;
}

static void check_load(Verifier *v, const Op *op) {
  if (op->noperands != 1 && op->noperands != 3) {
    report(v, op, "expected 1 or 3 operands (ptr [, mask, other]), got %u", op->noperands);
    return;
  }
  if (!check_pointer_operand(v, op)) return;
  TType want = pointee_tile(operand_type(op, 0));
  if (op->noperands == 3 && (!check_mask(v, op, 1) || !check_value_operand(v, op, 2, "other")))
    return;
  expect_result(v, op, want);
}

static void check_store(Verifier *v, const Op *op) {
  if (op->noperands != 2 && op->noperands != 3) {
    report(v, op, "expected 2 or 3 operands (ptr, value [, mask]), got %u", op->noperands);
    return;
  }
  if (!check_pointer_operand(v, op) || !check_value_operand(v, op, 1, "value")) return;
  if (op->noperands == 3) check_mask(v, op, 2);
}

/* Element types each atomic supports (the GPU's atomics). */
static bool atomic_accepts(OpKind k, TType t) {
  int bits = scalar_bits(t.kind);
  switch (k) {
  case OP_ATOMIC_ADD: case OP_ATOMIC_MAX: case OP_ATOMIC_MIN: return is_int_not_i1(t) || is_float(t);
  case OP_ATOMIC_AND: case OP_ATOMIC_OR: case OP_ATOMIC_XOR: return is_int_not_i1(t);
  case OP_ATOMIC_XCHG: return is_num(t) && (bits == 32 || bits == 64);
  default: return is_int(t) && (bits == 32 || bits == 64); /* cas */
  }
}

static void check_atomic(Verifier *v, const Op *op) {
  uint32_t nvalues = op->kind == OP_ATOMIC_CAS ? 2 : 1; /* (cmp,) value */
  if (op->noperands != 1 + nvalues && op->noperands != 2 + nvalues) {
    report(v, op, "expected %u or %u operands, got %u", 1 + nvalues, 2 + nvalues, op->noperands);
    return;
  }
  if (!check_pointer_operand(v, op)) return;
  TType elem = pointee_tile(operand_type(op, 0));
  if (!atomic_accepts((OpKind)op->kind, elem)) {
    report(v, op, "element type %s is not supported", scalar_name(elem.kind));
    return;
  }
  for (uint32_t i = 1; i <= nvalues; i++)
    if (!check_value_operand(v, op, i, nvalues == 2 && i == 1 ? "cmp" : "value")) return;
  if (op->noperands == 2 + nvalues && !check_mask(v, op, 1 + nvalues)) return;
  expect_result(v, op, elem);
}

/* Descriptor operand 0, then `first` .. the desc_rank offsets. */
static bool check_block_operands(Verifier *v, const Op *op, uint32_t first) {
  TType d = operand_type(op, 0);
  if (d.kind != SK_DESC) {
    report(v, op, "operand 0 must be a tensor descriptor, got %s", tt(d).s);
    return false;
  }
  if (op->noperands != first + d.desc_rank) {
    report(v, op, "expected %u operands for %s, got %u", first + d.desc_rank, tt(d).s,
           op->noperands);
    return false;
  }
  for (uint32_t i = first; i < op->noperands; i++)
    if (!is_int_scalar(operand_type(op, i))) {
      report(v, op, "offset %u must be an integer scalar, got %s", i - first,
             tt(operand_type(op, i)).s);
      return false;
    }
  return true;
}

static void check_block_tile(Verifier *v, const Op *op, TType tile, const char *what) {
  TType d = operand_type(op, 0);
  if (tile.kind != d.pointee || tile.rank != d.desc_rank)
    report(v, op, "%s must be a %s tile of rank %d, got %s", what, scalar_name(d.pointee),
           d.desc_rank, tt(tile).s);
}

static void check_block_load(Verifier *v, const Op *op) {
  if (check_block_operands(v, op, 1)) check_block_tile(v, op, result_type(op), "result");
}

static void check_block_store(Verifier *v, const Op *op) {
  if (op->noperands < 2) {
    report(v, op, "expected at least 2 operands (descriptor, value, offsets), got %u", op->noperands);
    return;
  }
  if (check_block_operands(v, op, 2)) check_block_tile(v, op, operand_type(op, 1), "value");
}

/* device_print (a message, and at most one value: a scalar or a tile of
 * numbers); device_assert (a condition of i1, scalar or tile). */
static void check_debug(Verifier *v, const Op *op) {
  if (!op->text) report(v, op, "%s without a message", op_info[op->kind].name);
  if (op->kind == OP_DEVICE_PRINT && op->noperands > 1)
    report(v, op, "expected at most 1 operand (the value), got %u", op->noperands);
  if (op->noperands && (operand_type(op, 0).kind == SK_PTR || operand_type(op, 0).kind == SK_DESC))
    report(v, op, "%s takes numbers, not pointers or descriptors", op_info[op->kind].name);
  if (op->kind == OP_DEVICE_ASSERT && operand_type(op, 0).kind != SK_I1)
    report(v, op, "device_assert takes an i1 condition");
}

/* ---- control flow ------------------------------------------------------- */

/* The region's arguments must have the types of operands from..from+n-1
 * (the first `skip` arguments are checked by the caller). */
static void check_region_args(Verifier *v, const Op *op, int r, uint32_t skip, uint32_t from) {
  const Block *b = &op->regions[r];
  uint32_t n = op->noperands - from;
  if (b->nargs != skip + n) {
    report(v, op, "region %d has %u argument%s, expected %u", r, b->nargs, b->nargs == 1 ? "" : "s",
           skip + n);
    return;
  }
  for (uint32_t i = 0; i < n; i++)
    if (!type_eq(b->args[skip + i].type, operand_type(op, from + i)))
      report(v, op, "region %d argument %u has type %s, expected %s", r, skip + i,
             tt(b->args[skip + i].type).s, tt(operand_type(op, from + i)).s);
}

/* The results must have the types of operands from.. (for, while). */
static void check_results_match(Verifier *v, const Op *op, uint32_t from) {
  if (op->nresults != op->noperands - from) {
    report(v, op, "%u result%s for %u loop-carried value%s", op->nresults,
           op->nresults == 1 ? "" : "s", op->noperands - from, op->noperands - from == 1 ? "" : "s");
    return;
  }
  for (uint32_t i = 0; i < op->nresults; i++)
    if (!type_eq(op->results[i].type, operand_type(op, from + i)))
      report(v, op, "result %u has type %s, expected %s", i, tt(op->results[i].type).s,
             tt(operand_type(op, from + i)).s);
}

/* The yield ending region r must give values of the types `want`. */
static void check_yield(Verifier *v, const Op *op, int r, const char *what, uint32_t n,
                        TType (*want)(const Op *, uint32_t), uint32_t from) {
  const Op *y = op->regions[r].last;
  if (!y || y->kind != OP_YIELD) return; /* reported by the block check */
  if (y->noperands != n) {
    report(v, y, "%s yields %u value%s, expected %u", what, y->noperands, y->noperands == 1 ? "" : "s", n);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    if (!y->operands[i]) continue;
    TType w = want(op, from + i);
    if (!type_eq(y->operands[i]->type, w))
      report(v, y, "%s yields %s as value %u, expected %s", what, tt(y->operands[i]->type).s, i,
             tt(w).s);
  }
}

static TType nth_operand_type(const Op *op, uint32_t i) { return op->operands[i]->type; }
static TType nth_result_type(const Op *op, uint32_t i) { return op->results[i].type; }

static void check_for(Verifier *v, const Op *op) {
  if (op->noperands < 3) {
    report(v, op, "expected at least 3 operands (lo, hi, step), got %u", op->noperands);
    return;
  }
  TType lo = operand_type(op, 0), hi = operand_type(op, 1), st = operand_type(op, 2);
  if (!is_int_scalar(lo) || !type_eq(lo, hi) || !type_eq(lo, st)) {
    report(v, op, "lo, hi and step must have one integer scalar type (%s, %s, %s)", tt(lo).s,
           tt(hi).s, tt(st).s);
    return;
  }
  const char *name = op_info[OP_FOR].attrs;
  for (int i = 0; *name && i < IR_MAX_ATTRS; i++) {
    int len = (int)strcspn(name, ",");
    if (op->attr[i] < 0)
      report(v, op, "%.*s must be >= 0, got %lld", len, name, (long long)op->attr[i]);
    name += len + (name[len] == ',' ? 1 : 0);
  }
  check_results_match(v, op, 3);
  const Block *body = &op->regions[0];
  if (body->nargs >= 1 && !type_eq(body->args[0].type, lo))
    report(v, op, "induction variable has type %s, expected %s", tt(body->args[0].type).s, tt(lo).s);
  check_region_args(v, op, 0, 1, 3);
  check_yield(v, op, 0, "for body", op->noperands - 3, nth_operand_type, 3);
}

static void check_if(Verifier *v, const Op *op) {
  if (!is_i1_scalar(operand_type(op, 0))) {
    report(v, op, "condition must be a scalar i1, got %s", tt(operand_type(op, 0)).s);
    return;
  }
  for (int r = 0; r < 2; r++) {
    if (op->regions[r].nargs) report(v, op, "region %d must have no arguments", r);
    check_yield(v, op, r, r == 0 ? "if then-region" : "if else-region", op->nresults,
                nth_result_type, 0);
  }
}

static void check_while_condition(Verifier *v, const Op *op) {
  const Op *y = op->regions[0].last;
  if (!y || y->kind != OP_YIELD) return;
  if (y->noperands != 1)
    report(v, y, "while condition must yield one scalar i1, got %u values", y->noperands);
  else if (y->operands[0] && !is_i1_scalar(y->operands[0]->type))
    report(v, y, "while condition must yield one scalar i1, got %s", tt(y->operands[0]->type).s);
}

static void check_while(Verifier *v, const Op *op) {
  check_results_match(v, op, 0);
  check_region_args(v, op, 0, 0, 0);
  check_region_args(v, op, 1, 0, 0);
  check_while_condition(v, op);
  check_yield(v, op, 1, "while do-region", op->noperands, nth_operand_type, 0);
}

/* yield only in regions, return only in the kernel body. */
static void check_terminator_place(Verifier *v, const Op *op, const Block *b) {
  if (op->kind == OP_YIELD && !b->parent)
    report(v, op, "not allowed in the kernel body (use return)");
  if (op->kind == OP_RETURN && b->parent)
    report(v, op, "only allowed at the end of the kernel body");
  if (op->next) report(v, op, "terminator must be the last op of its block");
}

/* ---- per-op dispatch ---------------------------------------------------- */

static bool counts_ok(Verifier *v, const Op *op) {
  const OpInfo *info = ir_info(op);
  bool ok = true;
  if (info->noperands >= 0 && op->noperands != (uint32_t)info->noperands) {
    report(v, op, "expected %d operand%s, got %u", info->noperands, info->noperands == 1 ? "" : "s",
           op->noperands);
    ok = false;
  }
  if (info->nresults >= 0 && op->nresults != (uint32_t)info->nresults) {
    report(v, op, "expected %d result%s, got %u", info->nresults, info->nresults == 1 ? "" : "s",
           op->nresults);
    ok = false;
  }
  if (op->nregions != info->nregions) {
    report(v, op, "expected %d region%s, got %u", info->nregions, info->nregions == 1 ? "" : "s",
           op->nregions);
    ok = false;
  }
  return ok;
}

static void check_op_types(Verifier *v, const Op *op) {
  switch ((OpKind)op->kind) {
  case OP_CONST: check_const(v, op); break;
  case OP_ARANGE: check_arange(v, op); break;
  case OP_PROGRAM_ID: case OP_NUM_PROGRAMS: check_grid_query(v, op); break;
  case OP_PTR_ADD: check_ptr_add(v, op); break;
  case OP_CAST: check_cast(v, op); break;
  case OP_BITCAST: check_bitcast(v, op); break;
  case OP_SELECT: check_select(v, op); break;
  case OP_BROADCAST: check_broadcast(v, op); break;
  case OP_EXPAND_DIMS: check_expand_dims(v, op); break;
  case OP_RESHAPE: check_reshape(v, op); break;
  case OP_TRANS: check_trans(v, op); break;
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_ARGMAX: case OP_ARGMIN:
    check_reduce(v, op);
    break;
  case OP_CUMSUM: check_cumsum(v, op); break;
  case OP_DOT: check_dot(v, op); break;
  case OP_LOAD: check_load(v, op); break;
  case OP_STORE: check_store(v, op); break;
  case OP_ATOMIC_ADD: case OP_ATOMIC_MAX: case OP_ATOMIC_MIN: case OP_ATOMIC_AND:
  case OP_ATOMIC_OR: case OP_ATOMIC_XOR: case OP_ATOMIC_XCHG: case OP_ATOMIC_CAS:
    check_atomic(v, op);
    break;
  case OP_BLOCK_LOAD: check_block_load(v, op); break;
  case OP_BLOCK_STORE: check_block_store(v, op); break;
  case OP_DEVICE_PRINT: case OP_DEVICE_ASSERT: check_debug(v, op); break;
  case OP_FOR: check_for(v, op); break;
  case OP_IF: check_if(v, op); break;
  case OP_WHILE: check_while(v, op); break;
  case OP_YIELD: case OP_RETURN: case OP_FENCE: case OP_TURN_WAIT: case OP_TURN_PASS: case OP_COUNT: break;
  default:
    if (op_info[op->kind].flags & OPF_GPU) verify_gpu_op(v, op);
    else check_elementwise(v, op); /* add .. ceil, fma */
    break;
  }
}

/* ---- dominance and structure -------------------------------------------- */

static void reset_marks(const Block *b) {
  for (uint32_t i = 0; i < b->nargs; i++) b->args[i].id = DOM_UNSEEN;
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->nresults; i++) op->results[i].id = DOM_UNSEEN;
    for (int r = 0; r < op->nregions; r++) reset_marks(&op->regions[r]);
  }
}

static void mark_block(const Block *b, uint32_t mark) {
  for (uint32_t i = 0; i < b->nargs; i++) b->args[i].id = mark;
}

/* Whether block `def` is `use` or encloses it. */
static bool encloses(const Block *def, const Block *use) {
  for (const Block *b = use; b; b = b->parent ? b->parent->parent : NULL)
    if (b == def) return true;
  return false;
}

static bool dominates(const Value *x, const Block *use) {
  const Block *def = x->def ? x->def->parent : x->owner;
  return x->id == DOM_VISIBLE && def && encloses(def, use);
}

/* Operands are present and dominate the op; false if any is missing. */
static bool check_operands(Verifier *v, const Op *op, const Block *b) {
  bool present = true;
  for (uint32_t i = 0; i < op->noperands; i++) {
    const Value *x = op->operands[i];
    if (!x) {
      report(v, op, "operand %u is null", i);
      present = false;
    } else if (!dominates(x, b)) {
      report(v, op, "operand %u is not defined before this use", i);
    }
  }
  return present;
}

static bool value_types_valid(Verifier *v, const Op *op, const Value *vals, uint32_t n,
                              const char *what) {
  bool ok = true;
  for (uint32_t i = 0; i < n; i++) {
    char why[VERIFY_MAX_MESSAGE / 2];
    if (type_problem(vals[i].type, why, sizeof why)) {
      report(v, op, "%s %u has invalid type %s: %s", what, i, tt(vals[i].type).s, why);
      ok = false;
    } else if (type_is_buffer(vals[i].type) && !(v->lowered && (op_info[op->kind].flags & OPF_GPU) && vals == op->results)) {
      report(v, op, "%s %u: a shared-memory buffer can only be the result of a GPU operation of the lowered IR",
             what, i);
      ok = false;
    }
  }
  return ok;
}

static bool operand_types_valid(const Op *op) {
  for (uint32_t i = 0; i < op->noperands; i++)
    if (!type_valid(op->operands[i]->type)) return false; /* reported at its definition */
  return true;
}

static void verify_block(Verifier *v, const Block *b);

static void verify_regions(Verifier *v, const Op *op) {
  for (int r = 0; r < op->nregions; r++) {
    const Block *region = &op->regions[r];
    char what[VERIFY_LABEL_BUF];
    snprintf(what, sizeof what, "region %d argument", r);
    if (region->parent != op) report(v, op, "region %d is not linked to its op", r);
    value_types_valid(v, op, region->args, region->nargs, what);
    verify_block(v, region);
  }
}

static void verify_op(Verifier *v, const Op *op, const Block *b) {
  if (op->kind >= OP_COUNT) {
    report(v, op, "op kind %u does not exist", op->kind);
    return;
  }
  if (op->parent != b) report(v, op, "op is not linked to its block");
  if ((op_info[op->kind].flags & OPF_GPU) && !v->lowered)
    report(v, op, "GPU operations exist only in the lowered IR of the GPU back end");
  bool present = check_operands(v, op, b);
  verify_regions(v, op);
  bool valid = value_types_valid(v, op, op->results, op->nresults, "result");
  for (uint32_t i = 0; i < op->nresults; i++) {
    if (op->results[i].def != op) report(v, op, "result %u is not linked to its op", i);
    op->results[i].id = DOM_VISIBLE;
  }
  if (op_info[op->kind].flags & OPF_TERM) check_terminator_place(v, op, b);
  if (counts_ok(v, op) && present && valid && operand_types_valid(op)) check_op_types(v, op);
}

static void report_unterminated(Verifier *v, const Block *b) {
  if (b->parent) {
    report(v, b->parent, "region %d does not end with a terminator", (int)(b - b->parent->regions));
  } else {
    diag_error(v->diags, v->func->loc, "invalid IR: kernel @%s: body does not end with return",
               v->func->name ? v->func->name : "");
    v->ok = false;
  }
}

static void verify_block(Verifier *v, const Block *b) {
  mark_block(b, DOM_VISIBLE);
  for (const Op *op = b->first; op && !diags_full(v->diags); op = op->next) verify_op(v, op, b);
  if (!b->last || b->last->kind >= OP_COUNT || !(op_info[b->last->kind].flags & OPF_TERM))
    report_unterminated(v, b);
  /* Leaving the block: its values go out of scope. */
  mark_block(b, DOM_DEAD);
  for (const Op *op = b->first; op; op = op->next)
    for (uint32_t i = 0; i < op->nresults; i++) op->results[i].id = DOM_DEAD;
}

static void verify_params(Verifier *v) {
  const Func *f = v->func;
  for (uint32_t i = 0; i < f->body.nargs; i++) {
    char why[VERIFY_MAX_MESSAGE / 2];
    bool buffer = type_is_buffer(f->body.args[i].type);
    if (buffer) snprintf(why, sizeof why, "kernel parameters cannot be shared-memory buffers");
    if (buffer || type_problem(f->body.args[i].type, why, sizeof why)) {
      const char *name = f->params && f->params[i].name ? f->params[i].name : "?";
      diag_error(v->diags, f->loc, "invalid IR: kernel @%s: parameter %%%s has invalid type %s: %s",
                 f->name ? f->name : "", name, tt(f->body.args[i].type).s, why);
      v->ok = false;
    }
  }
}

static bool verify_func(const Func *f, Diags *diags, bool lowered) {
  Verifier v = {f, diags, true, lowered};
  reset_marks(&f->body);
  verify_params(&v);
  verify_block(&v, &f->body);
  if (lowered && v.ok) verify_gpu_uses(&v, &f->body);
  return v.ok;
}

bool ir_verify_func(const Func *f, Diags *diags) { return verify_func(f, diags, false); }
bool ir_verify_lowered(const Func *f, Diags *diags) { return verify_func(f, diags, true); }

bool ir_verify_module(const Module *m, Diags *diags) {
  bool ok = true;
  for (int i = 0; i < m->nfuncs; i++) ok = ir_verify_func(m->funcs[i], diags) && ok;
  return ok;
}
