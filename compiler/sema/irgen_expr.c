/* irgen_expr.c - expressions: typing, implicit promotion, broadcasting,
 * constants, and the IR they produce (see irgen.h).
 *
 * The typing rules are the spec's (spec/types.md): untyped literals adapt
 * to the other operand, element types promote to a common type, shapes
 * broadcast as in NumPy. Every op is built through emit(), which folds it
 * right away when all operands are constants; that is how const parameters,
 * shapes and `if` conditions become known at compile time.
 */
#include <math.h>
#include <string.h>

#include "../numeric/fold_op.h"
#include "irgen.h"

/* ---- SVal helpers ---- */

SVal sv_error(void) { return (SVal){.kind = SV_ERROR}; }

SVal sv_value(Value *v, SrcLoc loc) {
  if (!v) return sv_error();
  return (SVal){.kind = SV_VALUE, .loc = loc, .v = v};
}

SVal sv_weak_int(int64_t v, SrcLoc loc) {
  return (SVal){.kind = SV_VALUE, .loc = loc, .weak = true, .weak_i = v};
}

SVal sv_weak_float(double v, SrcLoc loc) {
  return (SVal){.kind = SV_VALUE, .loc = loc, .weak = true, .weak_float = true, .weak_f = v};
}

bool sv_ok(const SVal *s) { return s->kind != SV_ERROR; }

const char *type_name(Gen *g, TType t) {
  char buf[96];
  return arena_strdup(g->arena, type_str(t, buf, sizeof buf));
}

static const char *shape_name(Gen *g, int rank, const int32_t *shape) {
  StrBuf sb;
  sb_init(&sb);
  sb_putc(&sb, '[');
  for (int i = 0; i < rank; i++) sb_printf(&sb, i ? ", %d" : "%d", shape[i]);
  sb_putc(&sb, ']');
  const char *s = arena_strdup(g->arena, sb.data);
  sb_free(&sb);
  return s;
}

static ScalarKind weak_default_kind(const SVal *s) {
  if (s->weak_float) return SK_F32;
  if (s->weak_big) return SK_U64;
  return s->weak_i >= INT32_MIN && s->weak_i <= INT32_MAX ? SK_I32 : SK_I64;
}

TType sv_type(const SVal *s) {
  if (s->weak) return type_scalar(weak_default_kind(s));
  return s->v ? s->v->type : type_scalar(SK_VOID);
}

/* ---- budgets ---- */

static bool reads_or_writes(const Op *op) {
  return (ir_info(op)->flags & (OPF_READ | OPF_WRITE)) || op->kind == OP_WHILE;
}

void gen_append(Gen *g, Op *op) {
  ir_append(g->block, op);
  g->m->specialized_ops++;
  if (g->inline_depth > 0) g->inlined_ops++;
  if (g->const_depth > 0 && !g->const_effect && reads_or_writes(op)) g->const_effect = op;
  if (g->halted) return;
  if (g->inlined_ops > IRGEN_MAX_INLINED_OPS) {
    diag_error(g->diags, g->call->loc, "inlined helper calls make more than %d operations in kernel '%s'",
               IRGEN_MAX_INLINED_OPS, g->f->name);
    g->halted = true;
  } else if (g->m->specialized_ops > IRGEN_MAX_MODULE_OPS) {
    diag_error(g->diags, g->call ? g->call->loc : op->loc,
               "the kernels of this file make more than %d operations", IRGEN_MAX_MODULE_OPS);
    g->halted = true;
  }
}

bool gen_enter_nesting(Gen *g, int *depth, int max, SrcLoc loc, const char *message) {
  if (*depth < max) {
    ++*depth;
    return true;
  }
  if (!g->halted) diag_error(g->diags, loc, message, max);
  g->halted = true;
  return false;
}

bool gen_enter(Gen *g, SrcLoc loc) {
  return gen_enter_nesting(g, &g->nesting, IRGEN_MAX_NESTING, loc,
                           "code is nested too deeply through helper calls and constants (more than %d levels)");
}

void gen_leave(Gen *g) { g->nesting--; }

/* Finds a division or remainder by a constant zero, with constant
 * operands, among the pure ops that v is computed from (depth first, each
 * op once). */
static const Op *find_const_div0(Gen *g, const Value *v) {
  PtrMap seen;
  ptrmap_init(&seen, g->arena);
  const Op **stack = NULL;
  size_t n = 0, cap = 0;
  const Op *found = NULL;
  if (v->def) {
    stack = ARENA_ARRAY(g->arena, const Op *, cap = 16);
    stack[n++] = v->def;
    ptrmap_put(&seen, v->def, (void *)v->def);
  }
  while (n && !found) {
    const Op *op = stack[--n];
    unsigned flags = ir_info(op)->flags;
    if (!(flags & OPF_PURE) || op->nregions || op->kind == OP_CONST) continue;
    bool all_const = true;
    for (uint32_t i = 0; i < op->noperands; i++) all_const &= ir_is_const(op->operands[i]);
    int64_t d;
    if ((op->kind == OP_DIV || op->kind == OP_REM) && all_const && ir_const_int(op->operands[1], &d) && d == 0 &&
        op->results[0].type.rank == 0) {
      found = op;
      break;
    }
    for (uint32_t i = 0; i < op->noperands; i++) {
      const Op *def = op->operands[i]->def;
      if (!def || ptrmap_get(&seen, def)) continue;
      ptrmap_put(&seen, def, (void *)def);
      if (n == cap) {
        stack = arena_grow(g->arena, stack, sizeof *stack, cap, cap * 2);
        cap *= 2;
      }
      stack[n++] = def;
    }
  }
  return found;
}

bool gen_explain_not_const(Gen *g, const Value *v) {
  const Op *op = v ? find_const_div0(g, v) : NULL;
  if (!op) return false;
  diag_error(g->diags, op->loc, "division by zero in a constant expression");
  return true;
}

/* ---- emitting ops ---- */

Value *emit_attrs(Gen *g, OpKind kind, int nops, Value **ops, TType result, const int64_t *attrs, int nattrs,
                  SrcLoc loc) {
  for (int i = 0; i < nops; i++)
    if (!ops[i]) return NULL;
  Op *op = ir_op_make(g->arena, kind, nops, ops, 1, &result, loc);
  for (int i = 0; i < nattrs; i++) op->attr[i] = attrs[i];
  gen_append(g, op);
  fold_op(op);
  return &op->results[0];
}

Value *emit(Gen *g, OpKind kind, int nops, Value **ops, TType result, SrcLoc loc) {
  return emit_attrs(g, kind, nops, ops, result, NULL, 0, loc);
}

Value *emit1(Gen *g, OpKind kind, Value *a, TType result, SrcLoc loc) {
  return emit(g, kind, 1, &a, result, loc);
}

Value *emit2(Gen *g, OpKind kind, Value *a, Value *b, TType result, SrcLoc loc) {
  Value *ops[2] = {a, b};
  return emit(g, kind, 2, ops, result, loc);
}

Value *emit_const_int(Gen *g, TType t, int64_t v, SrcLoc loc) {
  Op *op = ir_op_new(g->arena, OP_CONST, 0, 1, &t, 0, loc);
  op->attr[0] = num_wrap_int((uint64_t)v, (ScalarKind)t.kind).i;
  gen_append(g, op);
  return &op->results[0];
}

Value *emit_const_float(Gen *g, TType t, double v, SrcLoc loc) {
  Op *op = ir_op_new(g->arena, OP_CONST, 0, 1, &t, 0, loc);
  op->fattr = num_round_float(v, (ScalarKind)t.kind);
  gen_append(g, op);
  return &op->results[0];
}

Value *emit_cast(Gen *g, Value *v, ScalarKind to, SrcLoc loc) {
  if (!v) return NULL;
  if (v->type.kind == to) return v;
  return emit1(g, OP_CAST, v, type_with_elem(v->type, to), loc);
}

/* A weak literal as a constant of kind k (the caller checked it fits). */
static double weak_value(const SVal *s) {
  return s->weak_float ? s->weak_f : s->weak_big ? (double)(uint64_t)s->weak_i : (double)s->weak_i;
}

static Value *weak_as(Gen *g, const SVal *s, ScalarKind k) {
  TType t = type_scalar(k);
  if (scalar_is_float(k)) return emit_const_float(g, t, weak_value(s), s->loc);
  return emit_const_int(g, t, s->weak_i, s->loc);
}

Value *gen_value(Gen *g, SVal s) {
  if (s.kind != SV_VALUE) {
    if (s.kind == SV_TYPE) diag_error(g->diags, s.loc, "a type is not a value here");
    else if (s.kind == SV_LIST) diag_error(g->diags, s.loc, "a list is not a value here");
    else if (s.kind == SV_STRING) diag_error(g->diags, s.loc, "a string is not a value here");
    else if (s.kind == SV_VOID) diag_error(g->diags, s.loc, "this call has no value");
    return NULL;
  }
  if (s.weak) return weak_as(g, &s, weak_default_kind(&s));
  return s.v;
}

/* Whether the integer literal v fits in integer kind k. */
static bool int_fits(int64_t v, bool big, ScalarKind k) {
  if (big) return k == SK_U64;
  int bits = scalar_bits(k);
  if (k == SK_I1) return v == 0 || v == 1;
  if (bits == 64) return scalar_is_signed(k) || v >= 0;
  if (scalar_is_signed(k)) return v >= -(INT64_C(1) << (bits - 1)) && v < (INT64_C(1) << (bits - 1));
  return v >= 0 && v < (INT64_C(1) << bits);
}

Value *gen_convert(Gen *g, SVal s, ScalarKind to, SrcLoc loc) {
  if (s.kind != SV_VALUE) return gen_value(g, s);
  if (!s.weak) {
    if (s.v->type.kind == SK_PTR || s.v->type.kind == SK_DESC) {
      if (to == s.v->type.kind) return s.v;
      diag_error(g->diags, loc, "cannot convert %s to %s", type_name(g, s.v->type), scalar_name(to));
      return NULL;
    }
    return emit_cast(g, s.v, to, loc);
  }
  if (to == SK_PTR || to == SK_DESC) {
    diag_error(g->diags, loc, "a number cannot be used as a %s", to == SK_PTR ? "pointer" : "tensor descriptor");
    return NULL;
  }
  if (scalar_is_float(to)) {
    double v = weak_value(&s);
    if (isfinite(v) && isinf(num_round_float(v, to)) && to != SK_F8E4M3 && to != SK_F8E5M2) {
      diag_error(g->diags, loc, "literal %g is out of range for %s", v, scalar_name(to));
      return NULL;
    }
    return weak_as(g, &s, to);
  }
  if (s.weak_float) {
    diag_error(g->diags, loc, "float literal %g cannot be converted implicitly to %s; use 'as %s'", s.weak_f,
               scalar_name(to), scalar_name(to));
    return NULL;
  }
  if (!int_fits(s.weak_i, s.weak_big, to)) {
    if (s.weak_big)
      diag_error(g->diags, loc, "literal %llu does not fit in %s", (unsigned long long)s.weak_i, scalar_name(to));
    else
      diag_error(g->diags, loc, "literal %lld does not fit in %s", (long long)s.weak_i, scalar_name(to));
    return NULL;
  }
  return weak_as(g, &s, to);
}

/* ---- shapes ---- */

bool gen_check_shape(Gen *g, int rank, const int32_t *shape, SrcLoc loc) {
  if (rank > TILE_MAX_RANK) {
    diag_error(g->diags, loc, "tiles have at most %d dimensions (got %d)", TILE_MAX_RANK, rank);
    return false;
  }
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 1 || (shape[i] & (shape[i] - 1)) != 0) {
      diag_error(g->diags, loc, "tile dimension %d is not a power of two", shape[i]);
      return false;
    }
    n *= shape[i];
    if (n > TILE_MAX_ELEMS) {
      diag_error(g->diags, loc, "tile %s has more than %d elements", shape_name(g, rank, shape), TILE_MAX_ELEMS);
      return false;
    }
  }
  return true;
}

bool gen_broadcast_shape(Gen *g, const TType *types, int n, TType *out, SrcLoc loc) {
  int rank = 0;
  for (int i = 0; i < n; i++)
    if (types[i].rank > rank) rank = types[i].rank;
  int32_t shape[TILE_MAX_RANK];
  for (int d = 0; d < rank; d++) shape[d] = 1;
  for (int i = 0; i < n; i++) {
    int off = rank - types[i].rank;
    for (int d = 0; d < types[i].rank; d++) {
      int32_t s = types[i].shape[d];
      if (s == shape[off + d] || s == 1) continue;
      if (shape[off + d] == 1) {
        shape[off + d] = s;
        continue;
      }
      /* Name the two shapes that clash. */
      int j = 0;
      while (j < i && (types[j].rank < rank - off - d || types[j].shape[types[j].rank - (rank - off - d)] == 1))
        j++;
      diag_error(g->diags, loc, "shapes %s and %s cannot be broadcast together",
                 shape_name(g, types[j < i ? j : 0].rank, types[j < i ? j : 0].shape),
                 shape_name(g, types[i].rank, types[i].shape));
      return false;
    }
  }
  *out = type_with_shape(types[0], rank, shape);
  return true;
}

Value *gen_broadcast(Gen *g, Value *v, int rank, const int32_t *shape, SrcLoc loc) {
  if (!v) return NULL;
  TType t = v->type;
  if (t.rank == rank && memcmp(t.shape, shape, sizeof(int32_t) * (size_t)rank) == 0) return v;
  if (t.rank > rank) goto fail;
  int off = rank - t.rank;
  for (int d = 0; d < t.rank; d++)
    if (t.shape[d] != 1 && t.shape[d] != shape[off + d]) goto fail;
  if (t.rank != 0 && t.rank < rank) {
    /* Prepend dimensions of size 1, then stretch. */
    int32_t padded[TILE_MAX_RANK];
    for (int d = 0; d < rank; d++) padded[d] = d < off ? 1 : t.shape[d - off];
    v = emit1(g, OP_RESHAPE, v, type_with_shape(t, rank, padded), loc);
  }
  return emit1(g, OP_BROADCAST, v, type_with_shape(t, rank, shape), loc);
fail:
  diag_error(g->diags, loc, "cannot broadcast %s to shape %s", type_name(g, t), shape_name(g, rank, shape));
  return NULL;
}

/* ---- promotion ---- */

/* Order of float kinds by width for promotion (fp8 < 16-bit < f32 < f64). */
static int float_rank(ScalarKind k) {
  switch (k) {
  case SK_F8E4M3: case SK_F8E5M2: return 1;
  case SK_F16: case SK_BF16: return 2;
  case SK_F32: return 3;
  default: return 4;
  }
}

static ScalarKind promote_floats(ScalarKind a, ScalarKind b) {
  if (a == b) return a;
  int ra = float_rank(a), rb = float_rank(b);
  if (ra != rb) return ra > rb ? a : b;
  return ra == 1 ? SK_F16 : SK_F32; /* e4m3+e5m2 -> f16; f16+bf16 -> f32 */
}

static ScalarKind promote_ints(ScalarKind a, ScalarKind b) {
  if (a == b) return a;
  if (a == SK_I1) return b;
  if (b == SK_I1) return a;
  int wa = scalar_bits(a), wb = scalar_bits(b);
  if (wa != wb) return wa > wb ? a : b;
  return scalar_is_signed(a) ? b : a; /* same width: the unsigned one */
}

ScalarKind promote_kinds(ScalarKind a, ScalarKind b) {
  if (scalar_is_float(a) && scalar_is_float(b)) return promote_floats(a, b);
  if (scalar_is_float(a)) return a;
  if (scalar_is_float(b)) return b;
  return promote_ints(a, b);
}

bool gen_promote(Gen *g, const SVal *a, const SVal *b, ScalarKind *out, SrcLoc loc, const char *op) {
  if (a->weak && b->weak) {
    ScalarKind ka = weak_default_kind(a), kb = weak_default_kind(b);
    *out = ka == SK_F32 || kb == SK_F32   ? SK_F32
           : ka == SK_U64 || kb == SK_U64 ? SK_U64
           : ka == SK_I64 || kb == SK_I64 ? SK_I64
                                          : SK_I32;
    return true;
  }
  const SVal *strong = a->weak ? b : a, *other = a->weak ? a : b;
  ScalarKind ks = (ScalarKind)sv_type(strong).kind;
  if (ks == SK_PTR || ks == SK_DESC) {
    diag_error(g->diags, loc, "operator '%s' cannot be applied to %s", op, type_name(g, sv_type(strong)));
    return false;
  }
  if (other->weak) {
    *out = other->weak_float && !scalar_is_float(ks) ? SK_F32 : ks;
    return true;
  }
  ScalarKind ko = (ScalarKind)sv_type(other).kind;
  if (ko == SK_PTR || ko == SK_DESC) {
    diag_error(g->diags, loc, "operator '%s' cannot be applied to %s", op, type_name(g, sv_type(other)));
    return false;
  }
  *out = promote_kinds(ks, ko);
  return true;
}

bool gen_unify(Gen *g, SVal a, SVal b, Value **va, Value **vb, SrcLoc loc, const char *op) {
  ScalarKind k;
  if (!gen_promote(g, &a, &b, &k, loc, op)) return false;
  /* A literal that does not fit is reported at the literal. */
  Value *x = gen_convert(g, a, k, a.weak ? a.loc : loc), *y = gen_convert(g, b, k, b.weak ? b.loc : loc);
  if (!x || !y) return false;
  TType types[2] = {x->type, y->type}, shape;
  if (!gen_broadcast_shape(g, types, 2, &shape, loc)) return false;
  *va = gen_broadcast(g, x, shape.rank, shape.shape, loc);
  *vb = gen_broadcast(g, y, shape.rank, shape.shape, loc);
  return *va && *vb;
}

/* ---- constants ---- */

bool gen_const_int(Gen *g, SVal s, int64_t *out, const char *what) {
  if (s.kind == SV_ERROR) return false;
  if (s.kind == SV_VALUE && s.weak && !s.weak_float) {
    *out = s.weak_i;
    return true;
  }
  if (s.kind == SV_VALUE && !s.weak && s.v->type.rank == 0 && ir_const_int(s.v, out)) return true;
  if (s.kind != SV_VALUE || s.weak || !gen_explain_not_const(g, s.v))
    diag_error(g->diags, s.loc, "%s must be a compile-time integer constant", what);
  return false;
}

bool gen_const_int_list(Gen *g, SVal s, int32_t *out, int *n, int max, const char *what) {
  if (s.kind == SV_ERROR) return false;
  if (s.kind != SV_LIST) {
    diag_error(g->diags, s.loc, "%s must be a list of constants such as [64, 128]", what);
    return false;
  }
  if (s.nitems > max) {
    diag_error(g->diags, s.loc, "%s has %d entries; at most %d are allowed", what, s.nitems, max);
    return false;
  }
  for (int i = 0; i < s.nitems; i++) {
    int64_t v;
    if (!gen_const_int(g, s.items[i], &v, what)) return false;
    if (v < INT32_MIN || v > INT32_MAX) {
      diag_error(g->diags, s.items[i].loc, "%s: %lld is out of range", what, (long long)v);
      return false;
    }
    out[i] = (int32_t)v;
  }
  *n = s.nitems;
  return true;
}

/* ---- types ---- */

static bool elem_type_of(Gen *g, const char *name, Symbol *sym, SrcLoc loc, ScalarKind *out) {
  if (sym) {
    if (!g->frame->bound[sym->slot]) {
      diag_error(g->diags, loc, "type parameter '%s' has no value here (parameters are bound in order)", name);
      return false;
    }
    SVal v = g->frame->slots[sym->slot];
    if (v.kind != SV_TYPE) {
      if (v.kind != SV_ERROR) diag_error(g->diags, loc, "'%s' is not a type", name);
      return false;
    }
    *out = (ScalarKind)v.type.kind;
    return true;
  }
  *out = scalar_from_name(name, strlen(name));
  if (*out == SK_VOID) {
    diag_error(g->diags, loc, "unknown type '%s'", name);
    return false;
  }
  return true;
}

bool gen_type(Gen *g, TypeExpr *t, TType *out) {
  ScalarKind k;
  switch (t->kind) {
  case TE_TYPE: *out = type_scalar(SK_TYPE); return true;
  case TE_PTR:
    if (!elem_type_of(g, t->name, t->sym, t->name_loc, &k)) return false;
    *out = type_ptr(k);
    return true;
  case TE_TENSOR:
    if (!elem_type_of(g, t->name, t->sym, t->name_loc, &k)) return false;
    *out = type_scalar(SK_DESC);
    out->pointee = (uint8_t)k;
    out->desc_rank = (uint8_t)t->desc_rank;
    return true;
  case TE_NAMED: break;
  }
  if (!elem_type_of(g, t->name, t->sym, t->name_loc, &k)) return false;
  int32_t shape[TILE_MAX_RANK];
  if (t->ndims > TILE_MAX_RANK) {
    diag_error(g->diags, t->loc, "tiles have at most %d dimensions (got %d)", TILE_MAX_RANK, t->ndims);
    return false;
  }
  for (int i = 0; i < t->ndims; i++) {
    int64_t d;
    if (!gen_const_int(g, gen_expr(g, t->dims[i]), &d, "a tile dimension")) return false;
    if (d < 1 || d > TILE_MAX_ELEMS) {
      diag_error(g->diags, t->dims[i]->loc, "tile dimension %lld is out of range", (long long)d);
      return false;
    }
    shape[i] = (int32_t)d;
  }
  if (!gen_check_shape(g, t->ndims, shape, t->loc)) return false;
  *out = type_tile(k, t->ndims, shape);
  return true;
}

/* ---- operators ---- */

static const char *op_text(TokKind op) { return token_kind_name(op); }

/* Both operands untyped literals: computed here, the result stays weak
 * (comparisons give a typed i1). Integers compute in i64, floats in f64. */
static SVal weak_binary(Gen *g, TokKind op, SVal a, SVal b, SrcLoc loc) {
  if (a.weak_big || b.weak_big) {
    diag_error(g->diags, loc, "a literal above 9223372036854775807 cannot be combined with another literal; "
                              "give it a type first ('as u64')");
    return sv_error();
  }
  bool is_float = a.weak_float || b.weak_float;
  ScalarKind k = is_float ? SK_F64 : SK_I64;
  Slot x, y;
  if (is_float) {
    x.f = a.weak_float ? a.weak_f : (double)a.weak_i;
    y.f = b.weak_float ? b.weak_f : (double)b.weak_i;
  } else {
    x.i = a.weak_i;
    y.i = b.weak_i;
  }
  NumCmp cmp;
  NumBinop bin;
  switch (op) {
  case TOK_EQ: cmp = NUM_EQ; goto compare;
  case TOK_NE: cmp = NUM_NE; goto compare;
  case TOK_LT: cmp = NUM_LT; goto compare;
  case TOK_LE: cmp = NUM_LE; goto compare;
  case TOK_GT: cmp = NUM_GT; goto compare;
  case TOK_GE: cmp = NUM_GE; goto compare;
  case TOK_PLUS: bin = NUM_ADD; break;
  case TOK_MINUS: bin = NUM_SUB; break;
  case TOK_STAR: bin = NUM_MUL; break;
  case TOK_SLASH: bin = NUM_DIV; break;
  case TOK_PERCENT: bin = NUM_REM; break;
  case TOK_AMP: bin = NUM_AND; break;
  case TOK_PIPE: bin = NUM_OR; break;
  case TOK_CARET: bin = NUM_XOR; break;
  case TOK_SHL: bin = NUM_SHL; break;
  case TOK_SHR: bin = NUM_SHR; break;
  default:
    diag_error(g->diags, loc, "operator '%s' needs i1 operands, not integer literals", op_text(op));
    return sv_error();
  }
  if (is_float && (bin == NUM_REM || bin >= NUM_AND)) {
    diag_error(g->diags, loc, "operator '%s' needs integer operands", op_text(op));
    return sv_error();
  }
  bool div0 = false;
  Slot r = num_binop(bin, x, y, k, &div0);
  if (div0) {
    diag_error(g->diags, loc, "division by zero in a constant expression");
    return sv_error();
  }
  return is_float ? sv_weak_float(r.f, loc) : sv_weak_int(r.i, loc);
compare:
  return sv_value(emit_const_int(g, type_scalar(SK_I1), num_cmp(cmp, x, y, k), loc), loc);
}

static OpKind arith_op(TokKind op) {
  switch (op) {
  case TOK_PLUS: return OP_ADD;
  case TOK_MINUS: return OP_SUB;
  case TOK_STAR: return OP_MUL;
  case TOK_SLASH: return OP_DIV;
  case TOK_PERCENT: return OP_REM;
  case TOK_AMP: case TOK_AND_AND: return OP_AND;
  case TOK_PIPE: case TOK_OR_OR: return OP_OR;
  case TOK_CARET: return OP_XOR;
  case TOK_SHL: return OP_SHL;
  case TOK_SHR: return OP_SHR;
  case TOK_EQ: return OP_CMP_EQ;
  case TOK_NE: return OP_CMP_NE;
  case TOK_LT: return OP_CMP_LT;
  case TOK_LE: return OP_CMP_LE;
  case TOK_GT: return OP_CMP_GT;
  case TOK_GE: return OP_CMP_GE;
  default: return OP_COUNT;
  }
}

static bool is_ptr(const SVal *s) { return !s->weak && s->v && s->v->type.kind == SK_PTR; }

/* p + n, n + p, p - n: pointer arithmetic in elements. */
static SVal gen_ptr_arith(Gen *g, TokKind op, SVal a, SVal b, SrcLoc loc) {
  SVal p = is_ptr(&a) ? a : b, n = is_ptr(&a) ? b : a;
  if ((op != TOK_PLUS && op != TOK_MINUS) || (op == TOK_MINUS && !is_ptr(&a)) || is_ptr(&n)) {
    diag_error(g->diags, loc, "operator '%s' cannot be applied to %s and %s", op_text(op), type_name(g, sv_type(&a)),
               type_name(g, sv_type(&b)));
    return sv_error();
  }
  ScalarKind nk = (ScalarKind)sv_type(&n).kind;
  if (n.weak_float || (!n.weak && (!scalar_is_int(nk) || nk == SK_I1))) {
    diag_error(g->diags, loc, "a pointer offset must be an integer, not %s", type_name(g, sv_type(&n)));
    return sv_error();
  }
  Value *off = n.weak ? gen_convert(g, n, n.weak_i >= INT32_MIN && n.weak_i <= INT32_MAX ? SK_I32 : SK_I64, loc)
                      : n.v;
  if (!off) return sv_error();
  if (op == TOK_MINUS) off = emit1(g, OP_NEG, off, off->type, loc);
  TType types[2] = {p.v->type, off->type}, shape;
  if (!gen_broadcast_shape(g, types, 2, &shape, loc)) return sv_error();
  Value *pv = gen_broadcast(g, p.v, shape.rank, shape.shape, loc);
  Value *ov = gen_broadcast(g, off, shape.rank, shape.shape, loc);
  return sv_value(emit2(g, OP_PTR_ADD, pv, ov, type_with_shape(p.v->type, shape.rank, shape.shape), loc), loc);
}

static bool check_operand_kind(Gen *g, TokKind op, ScalarKind k, SrcLoc loc) {
  bool is_cmp = op >= TOK_EQ && op <= TOK_GE;
  bool logical = op == TOK_AND_AND || op == TOK_OR_OR;
  bool bitwise = op == TOK_AMP || op == TOK_PIPE || op == TOK_CARET;
  bool shift = op == TOK_SHL || op == TOK_SHR;
  const char *why = NULL;
  if (logical && k != SK_I1) why = "i1 (boolean) operands";
  else if (bitwise && !scalar_is_int(k)) why = "integer or i1 operands";
  else if (shift && (!scalar_is_int(k) || k == SK_I1)) why = "integer operands";
  else if (!logical && !bitwise && !is_cmp && !shift && k == SK_I1) why = "numbers";
  else if (!is_cmp && (k == SK_F8E4M3 || k == SK_F8E5M2)) why = "f16, bf16, f32 or f64 (fp8 supports only conversions, loads, stores and dot)";
  else if (op == TOK_PERCENT && scalar_is_float(k)) why = "integer operands";
  if (!why) return true;
  diag_error(g->diags, loc, "operator '%s' needs %s, not %s", op_text(op), why, scalar_name(k));
  return false;
}

SVal gen_binary_op(Gen *g, TokKind op, SVal a, SVal b, SrcLoc loc) {
  if (!sv_ok(&a) || !sv_ok(&b)) return sv_error();
  if (a.kind != SV_VALUE || b.kind != SV_VALUE) {
    diag_error(g->diags, loc, "operator '%s' needs values", op_text(op));
    return sv_error();
  }
  if (a.weak && b.weak) return weak_binary(g, op, a, b, loc);
  if (is_ptr(&a) || is_ptr(&b)) {
    bool both = is_ptr(&a) && is_ptr(&b);
    if (!(both && (op == TOK_EQ || op == TOK_NE))) return gen_ptr_arith(g, op, a, b, loc);
  }
  /* fp8 operands are checked before promotion (f8e4m3 + f8e5m2 would
   * otherwise promote to f16 and pass). */
  const SVal *ops[2] = {&a, &b};
  for (int i = 0; i < 2; i++) {
    ScalarKind k = (ScalarKind)sv_type(ops[i]).kind;
    if (!ops[i]->weak && (k == SK_F8E4M3 || k == SK_F8E5M2) && !check_operand_kind(g, op, k, loc)) return sv_error();
  }
  Value *x, *y;
  if (is_ptr(&a)) {
    if (!type_elem_eq(a.v->type, b.v->type)) {
      diag_error(g->diags, loc, "cannot compare %s with %s", type_name(g, a.v->type), type_name(g, b.v->type));
      return sv_error();
    }
    TType types[2] = {a.v->type, b.v->type}, shape;
    if (!gen_broadcast_shape(g, types, 2, &shape, loc)) return sv_error();
    x = gen_broadcast(g, a.v, shape.rank, shape.shape, loc);
    y = gen_broadcast(g, b.v, shape.rank, shape.shape, loc);
  } else if (!gen_unify(g, a, b, &x, &y, loc, op_text(op))) {
    return sv_error();
  }
  if (!x || !y || !check_operand_kind(g, op, (ScalarKind)x->type.kind, loc)) return sv_error();
  OpKind k = arith_op(op);
  TType rt = x->type;
  if (op >= TOK_EQ && op <= TOK_GE) rt = type_with_elem(rt, SK_I1);
  return sv_value(emit2(g, k, x, y, rt, loc), loc);
}

IRGEN_NOINLINE static SVal gen_unary(Gen *g, Expr *e) {
  Expr *operand = e->unary.operand;
  TokKind op = e->unary.op;
  /* -9223372036854775808 is the negation of a literal one past INT64_MAX. */
  if (op == TOK_MINUS && operand->kind == EX_INT && operand->ival == (uint64_t)INT64_MAX + 1)
    return sv_weak_int(INT64_MIN, e->loc);
  SVal a = gen_expr(g, operand);
  if (!sv_ok(&a)) return a;
  if (a.kind != SV_VALUE) {
    diag_error(g->diags, e->loc, "operator '%s' needs a value", op_text(op));
    return sv_error();
  }
  if (a.weak && op == TOK_MINUS) {
    if (a.weak_float) return sv_weak_float(-a.weak_f, e->loc);
    if (a.weak_big) {
      diag_error(g->diags, e->loc, "literal -%llu is out of range", (unsigned long long)a.weak_i);
      return sv_error();
    }
    return sv_weak_int((int64_t)(0 - (uint64_t)a.weak_i), e->loc);
  }
  if (a.weak && op == TOK_TILDE && !a.weak_float && !a.weak_big) return sv_weak_int(~a.weak_i, e->loc);
  Value *v = gen_value(g, a);
  if (!v) return sv_error();
  ScalarKind k = (ScalarKind)v->type.kind;
  const char *why = NULL;
  if (op == TOK_BANG && k != SK_I1) why = "an i1 (boolean) operand";
  else if (op == TOK_TILDE && (!scalar_is_int(k) || k == SK_I1)) why = "an integer operand";
  else if (op == TOK_MINUS && (k == SK_I1 || k == SK_PTR || k == SK_DESC || k == SK_F8E4M3 || k == SK_F8E5M2))
    why = "a number";
  if (why) {
    diag_error(g->diags, e->loc, "operator '%s' needs %s, not %s", op_text(op), why, type_name(g, v->type));
    return sv_error();
  }
  return sv_value(emit1(g, op == TOK_MINUS ? OP_NEG : OP_NOT, v, v->type, e->loc), e->loc);
}

/* x[:, None]: each ':' keeps a dimension, each None inserts one of size 1. */
IRGEN_NOINLINE static SVal gen_index(Gen *g, Expr *e) {
  SVal base = gen_expr(g, e->index.base);
  Value *v = gen_value(g, base);
  if (!v) return sv_error();
  int slices = 0;
  for (int i = 0; i < e->index.nitems; i++) {
    Expr *it = e->index.items[i];
    if (it->kind == EX_SLICE) slices++;
    else if (it->kind != EX_NONE) {
      diag_error(g->diags, it->loc, "only ':' and 'None' can appear in an index; use load() to read elements");
      return sv_error();
    }
  }
  if (slices != v->type.rank) {
    diag_error(g->diags, e->loc, "index has %d ':' entr%s but the tile has %d dimension%s", slices,
               slices == 1 ? "y" : "ies", v->type.rank, v->type.rank == 1 ? "" : "s");
    return sv_error();
  }
  int rank = v->type.rank;
  for (int i = 0; i < e->index.nitems && v; i++) {
    if (e->index.items[i]->kind != EX_NONE) continue;
    if (rank + 1 > TILE_MAX_RANK) {
      diag_error(g->diags, e->loc, "tiles have at most %d dimensions", TILE_MAX_RANK);
      return sv_error();
    }
    int32_t shape[TILE_MAX_RANK];
    for (int d = 0, s = 0; d <= rank; d++) shape[d] = d == i ? 1 : v->type.shape[s++];
    int64_t axis = i;
    v = emit_attrs(g, OP_EXPAND_DIMS, 1, &v, type_with_shape(v->type, rank + 1, shape), &axis, 1, e->loc);
    rank++;
  }
  return sv_value(v, e->loc);
}

IRGEN_NOINLINE static SVal gen_cast(Gen *g, Expr *e) {
  SVal a = gen_expr(g, e->cast.operand);
  TType t;
  if (!sv_ok(&a) || !gen_type(g, e->cast.type, &t)) return sv_error();
  if (e->cast.type->ndims) {
    diag_error(g->diags, e->cast.type->loc, "a cast changes the element type only; use reshape() or broadcast_to() for shapes");
    return sv_error();
  }
  if (t.kind == SK_TYPE || t.kind == SK_DESC) {
    diag_error(g->diags, e->cast.type->loc, "cannot cast to %s", type_name(g, t));
    return sv_error();
  }
  /* A literal converts from its exact value: through i64 or f64, which
   * hold every literal, so `0.1 as f64` is the double nearest 0.1. */
  Value *v = a.kind == SV_VALUE && a.weak ? weak_as(g, &a, a.weak_float ? SK_F64 : a.weak_big ? SK_U64 : SK_I64)
                                          : gen_value(g, a);
  if (!v) return sv_error();
  TType from = v->type;
  bool from_ptr = from.kind == SK_PTR, to_ptr = t.kind == SK_PTR;
  bool int64_like = from.kind == SK_I64 || from.kind == SK_U64 || t.kind == SK_I64 || t.kind == SK_U64;
  if (from.kind == SK_DESC || ((from_ptr || to_ptr) && !(from_ptr && to_ptr) && !int64_like)) {
    diag_error(g->diags, e->loc, "cannot cast %s to %s", type_name(g, from), type_name(g, t));
    return sv_error();
  }
  TType rt = type_with_shape(t, from.rank, from.shape);
  if (type_eq(rt, from)) return sv_value(v, e->loc);
  return sv_value(emit1(g, OP_CAST, v, rt, e->loc), e->loc);
}

IRGEN_NOINLINE static SVal gen_list(Gen *g, Expr *e) {
  SVal s = {.kind = SV_LIST, .loc = e->loc, .nitems = e->list.nitems};
  s.items = ARENA_ARRAY(g->arena, SVal, e->list.nitems ? e->list.nitems : 1);
  for (int i = 0; i < e->list.nitems; i++) {
    s.items[i] = gen_expr(g, e->list.items[i]);
    if (!sv_ok(&s.items[i])) return sv_error();
  }
  return s;
}

IRGEN_NOINLINE static SVal gen_name(Gen *g, Expr *e) {
  Symbol *sym = e->name.sym;
  if (!sym) return sv_error();
  switch (sym->kind) {
  case SYM_LOCAL: {
    if (!g->frame->bound[sym->slot]) {
      /* Only reachable for names declared in a branch that was not
       * generated (a compile-time false `if`) and used after it. */
      diag_error(g->diags, e->loc, "'%s' has no value here", sym->name);
      return sv_error();
    }
    SVal v = g->frame->slots[sym->slot];
    v.loc = e->loc;
    return v;
  }
  case SYM_GLOBAL_CONST: return gen_global_const(g, sym, e->loc);
  case SYM_BUILTIN_CONST: return sv_weak_float(sym->id == BC_INF ? INFINITY : NAN, e->loc);
  case SYM_TYPE: return (SVal){.kind = SV_TYPE, .loc = e->loc, .type = type_scalar((ScalarKind)sym->id)};
  default: return sv_error();
  }
}

IRGEN_NOINLINE static SVal gen_binary(Gen *g, Expr *e) {
  SVal a = gen_expr(g, e->binary.lhs);
  SVal b = gen_expr(g, e->binary.rhs);
  return gen_binary_op(g, e->binary.op, a, b, e->loc);
}

static SVal expr_value(Gen *g, Expr *e) {
  switch (e->kind) {
  case EX_INT:
    if (e->ival > (uint64_t)INT64_MAX) {
      SVal s = sv_weak_int((int64_t)e->ival, e->loc);
      s.weak_big = true;
      return s;
    }
    return sv_weak_int((int64_t)e->ival, e->loc);
  case EX_FLOAT: return sv_weak_float(e->fval, e->loc);
  case EX_BOOL: return sv_value(emit_const_int(g, type_scalar(SK_I1), e->bval, e->loc), e->loc);
  case EX_STRING: return (SVal){.kind = SV_STRING, .loc = e->loc, .str = e->sval};
  case EX_NAME: return gen_name(g, e);
  case EX_UNARY: return gen_unary(g, e);
  case EX_BINARY: return gen_binary(g, e);
  case EX_CALL:
    if (!e->call.sym || !e->call.bound) return sv_error();
    if (e->call.sym->kind == SYM_BUILTIN) return gen_builtin(g, e);
    return gen_call_fn(g, e);
  case EX_INDEX: return gen_index(g, e);
  case EX_LIST: return gen_list(g, e);
  case EX_CAST: return gen_cast(g, e);
  case EX_SLICE:
  case EX_NONE:
    diag_error(g->diags, e->loc, "':' and 'None' are only allowed inside an index");
    return sv_error();
  }
  return sv_error();
}

SVal gen_expr(Gen *g, Expr *e) {
  if (diags_full(g->diags) || g->halted || !gen_enter(g, e->loc)) return sv_error();
  SVal v = expr_value(g, e);
  gen_leave(g);
  return v;
}
