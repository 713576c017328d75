/* irgen_builtins.c - the builtin functions: argument checking, typing and
 * the IR each one produces. The exact semantics are in spec/builtins.md;
 * the argument lists are the table in sema.h (the resolver has already
 * bound arguments to parameter positions). */
#include <string.h>

#include "irgen.h"

/* Smallest dot dimension: the tensor-core instructions work on 16-wide
 * fragments (spec/builtins.md, dot). */
#define DOT_MIN_DIM 16

typedef struct Call {
  Gen *g;
  Expr *e;
  const char *name;
  SrcLoc loc;
} Call;

static bool has(const Call *c, int i) { return i < c->e->call.nbound && c->e->call.bound[i] != NULL; }

static SVal arg(const Call *c, int i) { return gen_expr(c->g, c->e->call.bound[i]); }

static SrcLoc arg_loc(const Call *c, int i) { return has(c, i) ? c->e->call.bound[i]->loc : c->loc; }

static SVal fail(const Call *c, SrcLoc loc, const char *msg) {
  diag_error(c->g->diags, loc, "%s() %s", c->name, msg);
  return sv_error();
}

static const char *tn(const Call *c, TType t) { return type_name(c->g, t); }

/* A value argument (weak literals get their default type). */
static Value *value_arg(const Call *c, int i) { return gen_value(c->g, arg(c, i)); }

static bool const_arg(const Call *c, int i, int64_t *out, const char *what) {
  return gen_const_int(c->g, arg(c, i), out, arena_printf(c->g->arena, "%s() argument '%s'", c->name, what));
}

static Op *emit_op(Gen *g, OpKind kind, int nops, Value **ops, int nres, TType res, SrcLoc loc) {
  Op *op = ir_op_new(g->arena, kind, nops, nres, &res, 0, loc);
  for (int i = 0; i < nops; i++) op->operands[i] = ops[i];
  gen_append(g, op);
  return op;
}

static bool is_pointer(const Value *v) { return v->type.kind == SK_PTR; }

/* An i1 mask argument, or NULL when absent (sets *ok = false on error). */
static Value *mask_arg(const Call *c, int i, bool *ok) {
  if (!has(c, i)) return NULL;
  Value *m = value_arg(c, i);
  if (!m) {
    *ok = false;
    return NULL;
  }
  if (m->type.kind != SK_I1) {
    fail(c, arg_loc(c, i), arena_printf(c->g->arena, "mask must be i1, not %s", tn(c, m->type)));
    *ok = false;
    return NULL;
  }
  return m;
}

/* Broadcasts all non-NULL values to their common shape. */
static bool broadcast_all(const Call *c, Value **vals, int n) {
  TType types[4];
  int k = 0;
  for (int i = 0; i < n; i++)
    if (vals[i]) types[k++] = vals[i]->type;
  TType shape;
  if (!gen_broadcast_shape(c->g, types, k, &shape, c->loc)) return false;
  for (int i = 0; i < n; i++)
    if (vals[i] && !(vals[i] = gen_broadcast(c->g, vals[i], shape.rank, shape.shape, c->loc))) return false;
  return true;
}

static Value *pointer_arg(const Call *c, int i) {
  Value *p = value_arg(c, i);
  if (p && !is_pointer(p)) {
    fail(c, arg_loc(c, i), arena_printf(c->g->arena, "needs a pointer or a tile of pointers, not %s", tn(c, p->type)));
    return NULL;
  }
  return p;
}

/* ---- programs and tiles ---- */

IRGEN_NOINLINE static SVal bi_program_id(const Call *c, OpKind kind) {
  int64_t axis;
  if (!const_arg(c, 0, &axis, "axis")) return sv_error();
  if (axis < 0 || axis > 2) return fail(c, arg_loc(c, 0), "axis must be 0, 1 or 2");
  return sv_value(emit_attrs(c->g, kind, 0, NULL, type_scalar(SK_I32), &axis, 1, c->loc), c->loc);
}

/* The cluster queries, in terms of axis 0 of the grid: a cluster is C
 * consecutive programs along it (@cluster(C)), so cluster_id is
 * program_id(0) / C, cluster_rank program_id(0) % C, num_clusters
 * num_programs(0) / C (the launch makes the grid a multiple of C), and
 * cluster_size C. Without @cluster, C is 1. */
IRGEN_NOINLINE static SVal bi_cluster(const Call *c, BuiltinId id) {
  int C = func_cluster(c->g->f);
  TType i32 = type_scalar(SK_I32);
  if (id == BI_CLUSTER_SIZE || (id == BI_CLUSTER_RANK && C == 1))
    return sv_value(emit_const_int(c->g, i32, id == BI_CLUSTER_SIZE ? C : 0, c->loc), c->loc);
  int64_t axis = 0;
  Value *grid = emit_attrs(c->g, id == BI_NUM_CLUSTERS ? OP_NUM_PROGRAMS : OP_PROGRAM_ID, 0, NULL, i32, &axis, 1, c->loc);
  if (C == 1) return sv_value(grid, c->loc);
  Value *size = emit_const_int(c->g, i32, C, c->loc);
  return sv_value(emit2(c->g, id == BI_CLUSTER_RANK ? OP_REM : OP_DIV, grid, size, i32, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_arange(const Call *c) {
  int64_t a[2];
  if (!const_arg(c, 0, &a[0], "start") || !const_arg(c, 1, &a[1], "end")) return sv_error();
  if (a[0] < INT32_MIN || a[1] > INT32_MAX) return fail(c, c->loc, "bounds must fit in i32");
  if (a[1] <= a[0]) return fail(c, c->loc, arena_printf(c->g->arena, "needs end > start (got %lld, %lld)", (long long)a[0], (long long)a[1]));
  int64_t n = a[1] - a[0];
  if (n & (n - 1))
    return fail(c, c->loc, arena_printf(c->g->arena, "length %lld is not a power of two", (long long)n));
  if (n > TILE_MAX_ELEMS) return fail(c, c->loc, arena_printf(c->g->arena, "length %lld is too large", (long long)n));
  int32_t shape[1] = {(int32_t)n};
  return sv_value(emit_attrs(c->g, OP_ARANGE, 0, NULL, type_tile(SK_I32, 1, shape), a, 2, c->loc), c->loc);
}

static bool shape_arg(const Call *c, int i, TType *t) {
  int32_t shape[TILE_MAX_RANK];
  int n;
  SVal s = arg(c, i);
  if (!gen_const_int_list(c->g, s, shape, &n, TILE_MAX_RANK, arena_printf(c->g->arena, "the shape of %s()", c->name)))
    return false;
  if (!gen_check_shape(c->g, n, shape, arg_loc(c, i))) return false;
  *t = type_with_shape(*t, n, shape);
  return true;
}

static bool dtype_arg(const Call *c, int i, ScalarKind *k) {
  SVal t = arg(c, i);
  if (!sv_ok(&t)) return false;
  if (t.kind != SV_TYPE) {
    fail(c, arg_loc(c, i), "dtype must be a type such as f32");
    return false;
  }
  *k = (ScalarKind)t.type.kind;
  return true;
}

IRGEN_NOINLINE static SVal bi_zeros(const Call *c) {
  ScalarKind k = SK_F32;
  TType t = type_scalar(SK_F32);
  if (!shape_arg(c, 0, &t)) return sv_error();
  if (has(c, 1) && !dtype_arg(c, 1, &k)) return sv_error();
  t = type_with_elem(t, k);
  Value *v = scalar_is_float(k) ? emit_const_float(c->g, t, 0.0, c->loc) : emit_const_int(c->g, t, 0, c->loc);
  return sv_value(v, c->loc);
}

IRGEN_NOINLINE static SVal bi_full(const Call *c) {
  TType t = type_scalar(SK_F32);
  if (!shape_arg(c, 0, &t)) return sv_error();
  SVal v = arg(c, 1);
  if (!sv_ok(&v)) return v;
  Value *x;
  if (has(c, 2)) {
    ScalarKind k;
    if (!dtype_arg(c, 2, &k)) return sv_error();
    x = gen_convert(c->g, v, k, arg_loc(c, 1));
  } else {
    x = gen_value(c->g, v);
  }
  if (!x) return sv_error();
  if (x->type.rank != 0) return fail(c, arg_loc(c, 1), arena_printf(c->g->arena, "value must be a scalar, not %s", tn(c, x->type)));
  return sv_value(gen_broadcast(c->g, x, t.rank, t.shape, c->loc), c->loc);
}

/* ---- memory ---- */

IRGEN_NOINLINE static SVal bi_load(const Call *c) {
  bool ok = true;
  Value *p = pointer_arg(c, 0);
  Value *m = mask_arg(c, 1, &ok);
  if (!p || !ok) return sv_error();
  ScalarKind elem = (ScalarKind)p->type.pointee;
  Value *other = NULL;
  if (has(c, 2)) {
    if (!m) return fail(c, arg_loc(c, 2), "'other' needs a 'mask'");
    if (!(other = gen_convert(c->g, arg(c, 2), elem, arg_loc(c, 2)))) return sv_error();
  }
  Value *vals[3] = {p, m, other};
  if (!broadcast_all(c, vals, 3)) return sv_error();
  TType rt = type_with_elem(vals[0]->type, elem);
  if (m && !other) {
    TType zt = type_elem(rt);
    other = scalar_is_float(elem) ? emit_const_float(c->g, zt, 0.0, c->loc) : emit_const_int(c->g, zt, 0, c->loc);
    vals[2] = gen_broadcast(c->g, other, rt.rank, rt.shape, c->loc);
  }
  Op *op = emit_op(c->g, OP_LOAD, m ? 3 : 1, vals, 1, rt, c->loc);
  return sv_value(&op->results[0], c->loc);
}

IRGEN_NOINLINE static SVal bi_store(const Call *c) {
  bool ok = true;
  Value *p = pointer_arg(c, 0);
  Value *m = mask_arg(c, 2, &ok);
  if (!p || !ok) return sv_error();
  Value *v = gen_convert(c->g, arg(c, 1), (ScalarKind)p->type.pointee, arg_loc(c, 1));
  if (!v) return sv_error();
  Value *vals[3] = {p, v, m};
  if (!broadcast_all(c, vals, 3)) return sv_error();
  emit_op(c->g, OP_STORE, m ? 3 : 2, vals, 0, type_scalar(SK_VOID), c->loc);
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

static bool atomic_type_ok(BuiltinId id, ScalarKind k) {
  bool is_int = scalar_is_int(k) && k != SK_I1;
  int bits = scalar_bits(k);
  switch (id) {
  case BI_ATOMIC_ADD: return (is_int && bits >= 32) || k == SK_F16 || k == SK_BF16 || k == SK_F32 || k == SK_F64;
  case BI_ATOMIC_MAX:
  case BI_ATOMIC_MIN: return (is_int && bits >= 32) || k == SK_F32 || k == SK_F64;
  case BI_ATOMIC_AND:
  case BI_ATOMIC_OR:
  case BI_ATOMIC_XOR: return is_int && bits >= 32;
  case BI_ATOMIC_XCHG: return bits == 32 || bits == 64;
  default: return is_int && (bits == 32 || bits == 64);
  }
}

IRGEN_NOINLINE static SVal bi_atomic(const Call *c, BuiltinId id) {
  static const OpKind kinds[] = {OP_ATOMIC_ADD, OP_ATOMIC_MAX, OP_ATOMIC_MIN,  OP_ATOMIC_AND,
                                 OP_ATOMIC_OR,  OP_ATOMIC_XOR, OP_ATOMIC_XCHG, OP_ATOMIC_CAS};
  bool is_cas = id == BI_ATOMIC_CAS;
  bool ok = true;
  Value *p = pointer_arg(c, 0);
  Value *m = mask_arg(c, is_cas ? 3 : 2, &ok);
  if (!p || !ok) return sv_error();
  ScalarKind elem = (ScalarKind)p->type.pointee;
  if (!atomic_type_ok(id, elem))
    return fail(c, c->loc, arena_printf(c->g->arena, "is not supported on %s", scalar_name(elem)));
  Value *vals[4] = {p, NULL, NULL, NULL};
  int n = 1;
  for (int i = 1; i <= (is_cas ? 2 : 1); i++)
    if (!(vals[n++] = gen_convert(c->g, arg(c, i), elem, arg_loc(c, i)))) return sv_error();
  if (m) vals[n++] = m;
  if (!broadcast_all(c, vals, n)) return sv_error();
  Op *op = emit_op(c->g, kinds[id - BI_ATOMIC_ADD], n, vals, 1, type_with_elem(vals[0]->type, elem), c->loc);
  return sv_value(&op->results[0], c->loc);
}

/* Offsets of a block access: a list of desc_rank integer scalars (i32). */
static bool block_offsets(const Call *c, int i, int rank, Value **offs) {
  SVal l = arg(c, i);
  if (!sv_ok(&l)) return false;
  if (l.kind != SV_LIST || l.nitems != rank) {
    fail(c, arg_loc(c, i), arena_printf(c->g->arena, "offsets must be a list of %d integers", rank));
    return false;
  }
  for (int k = 0; k < rank; k++) {
    SVal o = l.items[k];
    TType t = sv_type(&o);
    if (o.kind != SV_VALUE || o.weak_float || !scalar_is_int((ScalarKind)t.kind) || t.kind == SK_I1 || t.rank) {
      fail(c, o.loc, "offsets must be integer scalars");
      return false;
    }
    if (!o.weak && scalar_bits((ScalarKind)t.kind) > 32) {
      fail(c, o.loc, arena_printf(c->g->arena, "offsets are 32-bit; convert this %s with 'as i32'", tn(c, t)));
      return false;
    }
    if (!(offs[k] = gen_convert(c->g, o, SK_I32, o.loc))) return false;
  }
  return true;
}

static Value *desc_arg(const Call *c) {
  Value *d = value_arg(c, 0);
  if (d && d->type.kind != SK_DESC) {
    fail(c, arg_loc(c, 0), arena_printf(c->g->arena, "needs a tensor descriptor parameter, not %s", tn(c, d->type)));
    return NULL;
  }
  return d;
}

IRGEN_NOINLINE static SVal bi_load_block(const Call *c) {
  Value *ops[1 + TILE_MAX_RANK];
  if (!(ops[0] = desc_arg(c))) return sv_error();
  int rank = ops[0]->type.desc_rank;
  if (!block_offsets(c, 1, rank, ops + 1)) return sv_error();
  TType t = type_scalar((ScalarKind)ops[0]->type.pointee);
  if (!shape_arg(c, 2, &t)) return sv_error();
  if (t.rank != rank) return fail(c, arg_loc(c, 2), arena_printf(c->g->arena, "shape must have %d entries", rank));
  Op *op = emit_op(c->g, OP_BLOCK_LOAD, 1 + rank, ops, 1, t, c->loc);
  return sv_value(&op->results[0], c->loc);
}

IRGEN_NOINLINE static SVal bi_store_block(const Call *c) {
  Value *ops[2 + TILE_MAX_RANK];
  if (!(ops[0] = desc_arg(c))) return sv_error();
  int rank = ops[0]->type.desc_rank;
  if (!(ops[1] = gen_convert(c->g, arg(c, 2), (ScalarKind)ops[0]->type.pointee, arg_loc(c, 2)))) return sv_error();
  if (ops[1]->type.rank != rank)
    return fail(c, arg_loc(c, 2), arena_printf(c->g->arena, "value must be a tile of rank %d, not %s", rank, tn(c, ops[1]->type)));
  if (!block_offsets(c, 1, rank, ops + 2)) return sv_error();
  emit_op(c->g, OP_BLOCK_STORE, 2 + rank, ops, 0, type_scalar(SK_VOID), c->loc);
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

/* ---- dot ---- */

static bool dot_input_ok(ScalarKind k) {
  return k == SK_F16 || k == SK_BF16 || k == SK_F32 || k == SK_F64 || k == SK_F8E4M3 || k == SK_F8E5M2 || k == SK_I8;
}

static bool is_fp8(ScalarKind k) { return k == SK_F8E4M3 || k == SK_F8E5M2; }

IRGEN_NOINLINE static SVal bi_dot(const Call *c) {
  Value *a = value_arg(c, 0), *b = value_arg(c, 1);
  if (!a || !b) return sv_error();
  ScalarKind ka = (ScalarKind)a->type.kind, kb = (ScalarKind)b->type.kind;
  if (!dot_input_ok(ka) || !dot_input_ok(kb) || (ka != kb && !(is_fp8(ka) && is_fp8(kb))))
    return fail(c, c->loc, arena_printf(c->g->arena, "inputs must both be f16, bf16, f32, f64, i8 or fp8; got %s and %s",
                                        scalar_name(ka), scalar_name(kb)));
  int r = a->type.rank;
  if ((r != 2 && r != 3) || b->type.rank != r)
    return fail(c, c->loc, arena_printf(c->g->arena, "needs two tiles of rank 2 (or 3, batched); got %s and %s",
                                        tn(c, a->type), tn(c, b->type)));
  const int32_t *sa = a->type.shape, *sb = b->type.shape;
  int32_t M = sa[r - 2], K = sa[r - 1], N = sb[r - 1];
  if (sb[r - 2] != K || (r == 3 && sa[0] != sb[0]))
    return fail(c, c->loc, arena_printf(c->g->arena, "shapes do not match: %s times %s", tn(c, a->type), tn(c, b->type)));
  if (M < DOT_MIN_DIM || N < DOT_MIN_DIM || K < DOT_MIN_DIM)
    return fail(c, c->loc, arena_printf(c->g->arena, "needs M, N and K of at least %d (got %s times %s)", DOT_MIN_DIM,
                                        tn(c, a->type), tn(c, b->type)));
  ScalarKind acck = ka == SK_I8 ? SK_I32 : ka == SK_F64 ? SK_F64 : SK_F32;
  int32_t shape[3] = {sa[0], M, N};
  if (r == 2) shape[0] = M, shape[1] = N;
  TType at = type_tile(acck, r, shape);
  Value *acc;
  if (has(c, 2)) {
    SVal s = arg(c, 2);
    if (!sv_ok(&s)) return s;
    if (s.kind == SV_VALUE && !s.weak && s.v->type.kind != acck)
      return fail(c, arg_loc(c, 2), arena_printf(c->g->arena, "accumulator must be %s for %s inputs, not %s",
                                                 scalar_name(acck), scalar_name(ka), tn(c, s.v->type)));
    acc = gen_convert(c->g, s, acck, arg_loc(c, 2));
    if (acc && acc->type.rank > r)
      return fail(c, arg_loc(c, 2), arena_printf(c->g->arena, "accumulator %s does not match the result %s",
                                                 tn(c, acc->type), tn(c, at)));
    acc = gen_broadcast(c->g, acc, r, at.shape, arg_loc(c, 2));
  } else {
    acc = acck == SK_I32 ? emit_const_int(c->g, at, 0, c->loc) : emit_const_float(c->g, at, 0.0, c->loc);
  }
  if (!acc) return sv_error();
  Value *ops[3] = {a, b, acc};
  return sv_value(emit(c->g, OP_DOT, 3, ops, at, c->loc), c->loc);
}

/* ---- reductions ---- */

static bool axis_arg(const Call *c, int i, int rank, int64_t *axis) {
  if (!const_arg(c, i, axis, "axis")) return false;
  if (*axis < -rank || *axis >= rank) {
    fail(c, arg_loc(c, i), arena_printf(c->g->arena, "axis %lld is out of range for a tile of rank %d", (long long)*axis, rank));
    return false;
  }
  if (*axis < 0) *axis += rank;
  return true;
}

/* Element type a sum accumulates in: narrow integers widen to 32 bits,
 * narrow floats to f32. */
static ScalarKind sum_kind(ScalarKind k) {
  if (k == SK_I1 || k == SK_I8 || k == SK_I16) return SK_I32;
  if (k == SK_U8 || k == SK_U16) return SK_U32;
  if (k == SK_F16 || k == SK_BF16 || k == SK_F8E4M3 || k == SK_F8E5M2) return SK_F32;
  return k;
}

IRGEN_NOINLINE static SVal bi_reduce(const Call *c, BuiltinId id) {
  Value *x = value_arg(c, 0);
  if (!x) return sv_error();
  ScalarKind k = (ScalarKind)x->type.kind;
  if (x->type.rank == 0) return fail(c, arg_loc(c, 0), "needs a tile, not a scalar");
  if (k == SK_PTR || k == SK_DESC || (k == SK_I1 && id != BI_SUM))
    return fail(c, arg_loc(c, 0), arena_printf(c->g->arena, "cannot reduce %s", tn(c, x->type)));
  int64_t axis = 0;
  if (has(c, 1)) {
    if (!axis_arg(c, 1, x->type.rank, &axis)) return sv_error();
  } else if (x->type.rank > 1) {
    int32_t n = (int32_t)type_numel(x->type);
    x = emit1(c->g, OP_RESHAPE, x, type_with_shape(x->type, 1, &n), c->loc);
  }
  if (id == BI_SUM) x = emit_cast(c->g, x, sum_kind(k), c->loc);
  static const OpKind kinds[] = {OP_REDUCE_SUM, OP_REDUCE_MAX, OP_REDUCE_MIN, OP_ARGMAX, OP_ARGMIN};
  TType rt = x->type;
  for (int d = (int)axis; d + 1 < rt.rank; d++) rt.shape[d] = rt.shape[d + 1];
  rt.shape[--rt.rank] = 0;
  if (id == BI_ARGMAX || id == BI_ARGMIN) rt = type_with_elem(rt, SK_I32);
  return sv_value(emit_attrs(c->g, kinds[id - BI_SUM], 1, &x, rt, &axis, 1, c->loc), c->loc);
}

/* cumsum(x, axis): inclusive prefix sums along axis (optional for rank
 * 1), in sum's accumulation type; the shape stays. */
IRGEN_NOINLINE static SVal bi_cumsum(const Call *c) {
  Value *x = value_arg(c, 0);
  if (!x) return sv_error();
  ScalarKind k = (ScalarKind)x->type.kind;
  if (x->type.rank == 0) return fail(c, arg_loc(c, 0), "needs a tile, not a scalar");
  if (k == SK_PTR || k == SK_DESC)
    return fail(c, arg_loc(c, 0), arena_printf(c->g->arena, "cannot sum %s", tn(c, x->type)));
  int64_t axis = 0;
  if (has(c, 1)) {
    if (!axis_arg(c, 1, x->type.rank, &axis)) return sv_error();
  } else if (x->type.rank > 1) {
    return fail(c, c->loc, arena_printf(c->g->arena, "of a rank-%d tile needs an axis", x->type.rank));
  }
  x = emit_cast(c->g, x, sum_kind(k), c->loc);
  return sv_value(emit_attrs(c->g, OP_CUMSUM, 1, &x, x->type, &axis, 1, c->loc), c->loc);
}

/* ---- elementwise ---- */

IRGEN_NOINLINE static SVal bi_minmax(const Call *c, OpKind kind) {
  Value *a, *b;
  if (!gen_unify(c->g, arg(c, 0), arg(c, 1), &a, &b, c->loc, c->name)) return sv_error();
  ScalarKind k = (ScalarKind)a->type.kind;
  if (k == SK_I1) return fail(c, c->loc, "needs numbers, not i1");
  return sv_value(emit2(c->g, kind, a, b, a->type, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_where(const Call *c) {
  Value *cond = value_arg(c, 0), *a, *b;
  if (!cond) return sv_error();
  if (cond->type.kind != SK_I1)
    return fail(c, arg_loc(c, 0), arena_printf(c->g->arena, "condition must be i1, not %s", tn(c, cond->type)));
  if (!gen_unify(c->g, arg(c, 1), arg(c, 2), &a, &b, c->loc, c->name)) return sv_error();
  Value *vals[3] = {cond, a, b};
  if (!broadcast_all(c, vals, 3)) return sv_error();
  return sv_value(emit(c->g, OP_SELECT, 3, vals, vals[1]->type, c->loc), c->loc);
}

/* A float argument for math functions: literals become f32. */
static Value *float_arg(const Call *c, int i, ScalarKind want) {
  SVal s = arg(c, i);
  if (!sv_ok(&s)) return NULL;
  if (s.kind == SV_VALUE && s.weak) return gen_convert(c->g, s, want != SK_VOID ? want : SK_F32, arg_loc(c, i));
  Value *v = gen_value(c->g, s);
  if (!v) return NULL;
  ScalarKind k = (ScalarKind)v->type.kind;
  if (!scalar_is_float(k) || is_fp8(k)) {
    fail(c, arg_loc(c, i), arena_printf(c->g->arena, "needs a f16, bf16, f32 or f64 argument, not %s; convert with 'as f32'",
                                       tn(c, v->type)));
    return NULL;
  }
  if (want != SK_VOID && k != want) return emit_cast(c->g, v, want, arg_loc(c, i));
  return v;
}

IRGEN_NOINLINE static SVal bi_math(const Call *c, OpKind kind) {
  Value *x;
  if (kind == OP_ABS) {
    x = value_arg(c, 0);
    if (!x) return sv_error();
    ScalarKind k = (ScalarKind)x->type.kind;
    if (k == SK_I1 || k == SK_PTR || k == SK_DESC || is_fp8(k))
      return fail(c, arg_loc(c, 0), arena_printf(c->g->arena, "needs a number, not %s", tn(c, x->type)));
  } else if (!(x = float_arg(c, 0, SK_VOID))) {
    return sv_error();
  }
  return sv_value(emit1(c->g, kind, x, x->type, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_fma(const Call *c) {
  Value *a, *b;
  if (!gen_unify(c->g, arg(c, 0), arg(c, 1), &a, &b, c->loc, c->name)) return sv_error();
  ScalarKind k = (ScalarKind)a->type.kind;
  if (!scalar_is_float(k) || is_fp8(k)) return fail(c, c->loc, arena_printf(c->g->arena, "needs float arguments, not %s", scalar_name(k)));
  Value *x = float_arg(c, 2, k);
  if (!x) return sv_error();
  Value *vals[3] = {a, b, x};
  if (!broadcast_all(c, vals, 3)) return sv_error();
  return sv_value(emit(c->g, OP_FMA, 3, vals, vals[0]->type, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_cdiv(const Call *c) {
  SVal a = arg(c, 0), b = arg(c, 1);
  if (!sv_ok(&a) || !sv_ok(&b)) return sv_error();
  TType ta = sv_type(&a), tb = sv_type(&b);
  if (a.weak_float || b.weak_float || (!a.weak && !scalar_is_int((ScalarKind)ta.kind)) ||
      (!b.weak && !scalar_is_int((ScalarKind)tb.kind)))
    return fail(c, c->loc, "needs integer arguments");
  SVal t = gen_binary_op(c->g, TOK_PLUS, a, b, c->loc);
  t = gen_binary_op(c->g, TOK_MINUS, t, sv_weak_int(1, c->loc), c->loc);
  return gen_binary_op(c->g, TOK_SLASH, t, b, c->loc);
}

/* ---- shapes ---- */

IRGEN_NOINLINE static SVal bi_broadcast_to(const Call *c) {
  Value *x = value_arg(c, 0);
  TType t = type_scalar(SK_VOID);
  if (!x || !shape_arg(c, 1, &t)) return sv_error();
  return sv_value(gen_broadcast(c->g, x, t.rank, t.shape, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_reshape(const Call *c) {
  Value *x = value_arg(c, 0);
  TType t = type_scalar(SK_VOID);
  if (!x || !shape_arg(c, 1, &t)) return sv_error();
  if (type_numel(t) != type_numel(x->type))
    return fail(c, c->loc, arena_printf(c->g->arena, "cannot reshape %s (%lld elements) to %lld elements", tn(c, x->type),
                                        (long long)type_numel(x->type), (long long)type_numel(t)));
  TType rt = type_with_shape(x->type, t.rank, t.shape);
  if (type_eq(rt, x->type)) return sv_value(x, c->loc);
  return sv_value(emit1(c->g, OP_RESHAPE, x, rt, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_trans(const Call *c) {
  Value *x = value_arg(c, 0);
  if (!x) return sv_error();
  int rank = x->type.rank, n = rank;
  int32_t perm[TILE_MAX_RANK] = {1, 0};
  if (has(c, 1)) {
    if (!gen_const_int_list(c->g, arg(c, 1), perm, &n, TILE_MAX_RANK, "the permutation of trans()")) return sv_error();
  } else if (rank != 2) {
    return fail(c, c->loc, arena_printf(c->g->arena, "of a tile of rank %d needs a permutation such as [1, 0, 2]", rank));
  }
  bool seen[TILE_MAX_RANK] = {false};
  bool ok = n == rank;
  for (int i = 0; i < n && ok; i++) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) return fail(c, c->loc, arena_printf(c->g->arena, "permutation is not a permutation of the %d dimensions of %s", rank, tn(c, x->type)));
  int64_t packed = 0;
  int32_t shape[TILE_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    packed |= (int64_t)perm[i] << (4 * i);
    shape[i] = x->type.shape[perm[i]];
  }
  return sv_value(emit_attrs(c->g, OP_TRANS, 1, &x, type_with_shape(x->type, rank, shape), &packed, 1, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_expand_dims(const Call *c) {
  Value *x = value_arg(c, 0);
  int64_t axis;
  if (!x) return sv_error();
  int rank = x->type.rank;
  if (rank >= TILE_MAX_RANK) return fail(c, c->loc, arena_printf(c->g->arena, "tiles have at most %d dimensions", TILE_MAX_RANK));
  if (!const_arg(c, 1, &axis, "axis")) return sv_error();
  if (axis < -(rank + 1) || axis > rank)
    return fail(c, arg_loc(c, 1), arena_printf(c->g->arena, "axis %lld is out of range: a tile of rank %d has insertion points -%d..%d",
                                               (long long)axis, rank, rank + 1, rank));
  if (axis < 0) axis += rank + 1;
  int32_t shape[TILE_MAX_RANK];
  for (int d = 0, s = 0; d <= rank; d++) shape[d] = d == axis ? 1 : x->type.shape[s++];
  return sv_value(emit_attrs(c->g, OP_EXPAND_DIMS, 1, &x, type_with_shape(x->type, rank + 1, shape), &axis, 1, c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_bitcast(const Call *c) {
  Value *x = value_arg(c, 0);
  ScalarKind k;
  if (!x || !dtype_arg(c, 1, &k)) return sv_error();
  ScalarKind from = (ScalarKind)x->type.kind;
  if (from == SK_DESC || scalar_bits(from) != scalar_bits(k) || from == SK_I1 || k == SK_I1)
    return fail(c, c->loc, arena_printf(c->g->arena, "needs types of equal bit width, other than i1 (%s has %d bit%s, %s has %d)",
                                        scalar_name(from), scalar_bits(from), scalar_bits(from) == 1 ? "" : "s",
                                        scalar_name(k), scalar_bits(k)));
  if (from == k) return sv_value(x, c->loc);
  return sv_value(emit1(c->g, OP_BITCAST, x, type_with_elem(x->type, k), c->loc), c->loc);
}

IRGEN_NOINLINE static SVal bi_static_assert(const Call *c) {
  Value *v = value_arg(c, 0);
  if (!v) return sv_error();
  int64_t ok;
  if (v->type.kind != SK_I1 || v->type.rank != 0 || !ir_const_int(v, &ok)) {
    if (v->type.kind == SK_I1 && v->type.rank == 0 && gen_explain_not_const(c->g, v)) return sv_error();
    return fail(c, arg_loc(c, 0), "condition must be a compile-time i1 constant");
  }
  const char *msg = NULL;
  if (has(c, 1)) {
    SVal m = arg(c, 1);
    if (m.kind != SV_STRING) return fail(c, arg_loc(c, 1), "message must be a string");
    msg = m.str;
  }
  if (!ok) {
    if (msg) diag_error(c->g->diags, c->loc, "static assertion failed: %s", msg);
    else diag_error(c->g->diags, c->loc, "static assertion failed");
    return sv_error();
  }
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

/* static_print(value [, message]): a note at the call with the value of
 * a compile-time constant, or the type of any other value (once per
 * specialization, so that it shows the const parameters it was made
 * with). */
IRGEN_NOINLINE static SVal bi_static_print(const Call *c) {
  SVal v = arg(c, 0);
  if (v.kind == SV_ERROR) return sv_error();
  const char *msg = NULL;
  if (has(c, 1)) {
    SVal m = arg(c, 1);
    if (m.kind != SV_STRING) return fail(c, arg_loc(c, 1), "message must be a string");
    msg = m.str;
  }
  const char *text = NULL;
  if (v.kind == SV_STRING) {
    text = v.str;
  } else if (v.kind == SV_TYPE) {
    text = arena_printf(c->g->arena, "type %s", type_name(c->g, v.type));
  } else if (v.kind == SV_VALUE && v.weak) {
    text = v.weak_float ? arena_printf(c->g->arena, "%.17g (a float literal)", v.weak_f)
                        : arena_printf(c->g->arena, "%lld (an integer literal)", (long long)v.weak_i);
  } else if (v.kind == SV_VALUE && v.v) {
    Value *x = v.v;
    int64_t i;
    const char *ty = type_name(c->g, x->type);
    if (x->type.rank == 0 && x->type.kind == SK_I1 && ir_const_int(x, &i))
      text = arena_printf(c->g->arena, "%s (%s)", i ? "true" : "false", ty);
    else if (x->type.rank == 0 && ir_const_int(x, &i))
      text = arena_printf(c->g->arena, "%lld (%s)", (long long)i, ty);
    else if (x->type.rank == 0 && x->def && x->def->kind == OP_CONST && scalar_is_float((ScalarKind)x->type.kind))
      text = arena_printf(c->g->arena, "%.17g (%s)", x->def->fattr, ty);
    else
      text = arena_printf(c->g->arena, "a value of type %s (not a compile-time constant)", ty);
  } else {
    return fail(c, arg_loc(c, 0), "value must be a value, a type or a string");
  }
  if (msg) diag_note(c->g->diags, c->loc, "static_print: %s: %s", msg, text);
  else diag_note(c->g->diags, c->loc, "static_print: %s", text);
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

/* Largest message of device_print and device_assert: a line of output,
 * kept well below vprintf's per-call buffer. */
#define DEVICE_MESSAGE_MAX 256

static const char *device_message(const Call *c, int i, const char *dflt) {
  if (!has(c, i)) return dflt;
  SVal m = arg(c, i);
  if (m.kind == SV_ERROR) return NULL;
  if (m.kind != SV_STRING) {
    fail(c, arg_loc(c, i), "message must be a string");
    return NULL;
  }
  if (strlen(m.str) > DEVICE_MESSAGE_MAX) {
    fail(c, arg_loc(c, i), arena_printf(c->g->arena, "message is longer than %d bytes", DEVICE_MESSAGE_MAX));
    return NULL;
  }
  return m.str;
}

/* device_print(message [, value]): when the program runs, a line per
 * element of the value (or one line) with the program and the index. */
IRGEN_NOINLINE static SVal bi_device_print(const Call *c) {
  const char *msg = device_message(c, 0, NULL);
  if (!msg) return sv_error();
  Value *v = NULL;
  if (has(c, 1)) {
    if (!(v = value_arg(c, 1))) return sv_error();
    if (v->type.kind == SK_PTR || v->type.kind == SK_DESC || v->type.kind == SK_VOID)
      return fail(c, arg_loc(c, 1), arena_printf(c->g->arena, "device_print prints numbers, not %s", tn(c, v->type)));
  }
  Op *op = emit_op(c->g, OP_DEVICE_PRINT, v ? 1 : 0, &v, 0, type_scalar(SK_VOID), c->loc);
  if (op) op->text = arena_strdup(c->g->arena, msg);
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

/* device_assert(cond [, message]): the run stops where cond is false. A
 * condition known true at compile time makes no op; one known false is
 * still a run-time failure (the op may sit in code that never runs). */
IRGEN_NOINLINE static SVal bi_device_assert(const Call *c) {
  Value *v = value_arg(c, 0);
  if (!v) return sv_error();
  if (v->type.kind != SK_I1)
    return fail(c, arg_loc(c, 0), arena_printf(c->g->arena, "condition must be i1, not %s", tn(c, v->type)));
  const char *msg = device_message(c, 1, "assertion failed");
  if (!msg) return sv_error();
  int64_t k;
  if (v->type.rank == 0 && ir_const_int(v, &k) && k) return (SVal){.kind = SV_VOID, .loc = c->loc};
  Op *op = emit_op(c->g, OP_DEVICE_ASSERT, 1, &v, 0, type_scalar(SK_VOID), c->loc);
  if (op) op->text = arena_strdup(c->g->arena, msg);
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

/* fence(): the program's memory operations before it are seen by every
 * program before those after it (spec/builtins.md, fence). */
IRGEN_NOINLINE static SVal bi_fence(const Call *c) {
  emit_op(c->g, OP_FENCE, 0, NULL, 0, type_scalar(SK_VOID), c->loc);
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

/* wait_turn(), pass_turn(): the consumer warpgroups' turn
 * (spec/builtins.md); gen_check_turns checks their order. */
IRGEN_NOINLINE static SVal bi_turn(const Call *c, OpKind kind) {
  emit_op(c->g, kind, 0, NULL, 0, type_scalar(SK_VOID), c->loc);
  return (SVal){.kind = SV_VOID, .loc = c->loc};
}

typedef struct TurnWalk {
  Diags *diags;
  bool failed; /* a misuse was reported: the walk stops */
} TurnWalk;

/* The turn along every path of block b, entered holding the turn taken
 * by `held` (NULL: not holding it); returns the op that took the turn
 * held at the block's end. Reports the first misuse and stops. */
static const Op *turn_walk(TurnWalk *w, const Block *b, const Op *held) {
  for (const Op *op = b->first; op && !w->failed; op = op->next) {
    if (op->kind == OP_TURN_WAIT) {
      if (held) {
        diag_error(w->diags, op->loc,
                   "wait_turn(): the turn is already held here (taken at %d:%d); pass it with pass_turn() first",
                   held->loc.line, held->loc.col);
        w->failed = true;
      }
      held = op;
    } else if (op->kind == OP_TURN_PASS) {
      if (!held) {
        diag_error(w->diags, op->loc, "pass_turn(): the turn is not held here; take it with wait_turn() first");
        w->failed = true;
      }
      held = NULL;
    } else if (op->kind == OP_IF) {
      const Op *then_end = turn_walk(w, &op->regions[0], held);
      const Op *else_end = w->failed ? then_end : turn_walk(w, &op->regions[1], held);
      if (!w->failed && !then_end != !else_end) {
        diag_error(w->diags, op->loc,
                   "the branches of this 'if' leave the turn differently (held after the %s branch only); take and "
                   "pass it alike in both",
                   then_end ? "then" : "else");
        w->failed = true;
      }
      held = then_end ? then_end : else_end;
    } else {
      for (int r = 0; r < op->nregions && !w->failed; r++) {
        const Op *end = turn_walk(w, &op->regions[r], held);
        if (!w->failed && !end != !held) {
          if (end)
            diag_error(w->diags, op->loc,
                       "an iteration of this loop ends holding the turn taken at %d:%d but begins without it: each "
                       "iteration must leave the turn as it found it",
                       end->loc.line, end->loc.col);
          else
            diag_error(w->diags, op->loc,
                       "an iteration of this loop begins holding the turn (taken at %d:%d) and ends without it: each "
                       "iteration must leave the turn as it found it",
                       held->loc.line, held->loc.col);
          w->failed = true;
        }
      }
    }
  }
  return held;
}

bool gen_check_turns(const Func *f, Diags *diags) {
  TurnWalk w = {diags, false};
  const Op *end = turn_walk(&w, &f->body, NULL);
  if (!w.failed && end) {
    diag_error(diags, end->loc, "the turn taken here is still held where kernel '%s' ends; pass it with pass_turn()",
               f->name);
    w.failed = true;
  }
  return !w.failed;
}

SVal gen_builtin(Gen *g, Expr *e) {
  BuiltinId id = (BuiltinId)e->call.sym->id;
  Call c = {g, e, builtin_info[id].name, e->loc};
  switch (id) {
  case BI_PROGRAM_ID: return bi_program_id(&c, OP_PROGRAM_ID);
  case BI_NUM_PROGRAMS: return bi_program_id(&c, OP_NUM_PROGRAMS);
  case BI_CLUSTER_ID: case BI_NUM_CLUSTERS: case BI_CLUSTER_RANK: case BI_CLUSTER_SIZE: return bi_cluster(&c, id);
  case BI_ARANGE: return bi_arange(&c);
  case BI_ZEROS: return bi_zeros(&c);
  case BI_FULL: return bi_full(&c);
  case BI_LOAD: return bi_load(&c);
  case BI_STORE: return bi_store(&c);
  case BI_DOT: return bi_dot(&c);
  case BI_SUM: case BI_MAX: case BI_MIN: case BI_ARGMAX: case BI_ARGMIN: return bi_reduce(&c, id);
  case BI_CUMSUM: return bi_cumsum(&c);
  case BI_MAXIMUM: return bi_minmax(&c, OP_MAX);
  case BI_MINIMUM: return bi_minmax(&c, OP_MIN);
  case BI_WHERE: return bi_where(&c);
  case BI_FMA: return bi_fma(&c);
  case BI_CDIV: return bi_cdiv(&c);
  case BI_EXP: return bi_math(&c, OP_EXP);
  case BI_EXP2: return bi_math(&c, OP_EXP2);
  case BI_LOG: return bi_math(&c, OP_LOG);
  case BI_LOG2: return bi_math(&c, OP_LOG2);
  case BI_SQRT: return bi_math(&c, OP_SQRT);
  case BI_RSQRT: return bi_math(&c, OP_RSQRT);
  case BI_SIN: return bi_math(&c, OP_SIN);
  case BI_COS: return bi_math(&c, OP_COS);
  case BI_TANH: return bi_math(&c, OP_TANH);
  case BI_ERF: return bi_math(&c, OP_ERF);
  case BI_SIGMOID: return bi_math(&c, OP_SIGMOID);
  case BI_FLOOR: return bi_math(&c, OP_FLOOR);
  case BI_CEIL: return bi_math(&c, OP_CEIL);
  case BI_ABS: return bi_math(&c, OP_ABS);
  case BI_BROADCAST_TO: return bi_broadcast_to(&c);
  case BI_RESHAPE: return bi_reshape(&c);
  case BI_TRANS: return bi_trans(&c);
  case BI_EXPAND_DIMS: return bi_expand_dims(&c);
  case BI_BITCAST: return bi_bitcast(&c);
  case BI_ATOMIC_ADD: case BI_ATOMIC_MAX: case BI_ATOMIC_MIN: case BI_ATOMIC_AND: case BI_ATOMIC_OR:
  case BI_ATOMIC_XOR: case BI_ATOMIC_XCHG: case BI_ATOMIC_CAS: return bi_atomic(&c, id);
  case BI_LOAD_BLOCK: return bi_load_block(&c);
  case BI_STORE_BLOCK: return bi_store_block(&c);
  case BI_STATIC_ASSERT: return bi_static_assert(&c);
  case BI_DEVICE_PRINT: return bi_device_print(&c);
  case BI_DEVICE_ASSERT: return bi_device_assert(&c);
  case BI_STATIC_PRINT: return bi_static_print(&c);
  case BI_FENCE: return bi_fence(&c);
  case BI_WAIT_TURN: return bi_turn(&c, OP_TURN_WAIT);
  case BI_PASS_TURN: return bi_turn(&c, OP_TURN_PASS);
  case BI_COUNT: break;
  }
  return sv_error();
}
