/* irgen.c - kernel specialization: const parameters, statements, structured
 * control flow and inlining of helper functions (see irgen.h).
 *
 * Mutable variables become SSA values by construction: a `var` holds its
 * current IR value in the frame; an `if`, `for` or `while` that assigns
 * variables declared outside it gets them as results (and, for loops, as
 * loop-carried block arguments), found by scanning the statement's body for
 * assignments before generating it. An `if` whose condition is a
 * compile-time constant generates only the branch taken.
 *
 * Top-level constants are evaluated once per kernel, at their first use,
 * into a block that becomes the start of the kernel (so the value serves
 * every later use, wherever the first one was). Everything that can grow
 * faster than the source is bounded (irgen.h): the code inlined per kernel
 * and per file, and the nesting of expressions, statements and control
 * flow across helper calls and constants.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "irgen.h"

/* Limits of the annotations (spec/annotations.md). */
#define MAX_PIPELINE_STAGES 8
#define MAX_WARPS 32
#define WARPGROUP_WARPS 4
#define MIN_WS_REGISTERS 24
#define MAX_WS_REGISTERS 256
#define SM_REGISTERS 65536

static void gen_block(Gen *g, AstBlock *b);

static Frame *frame_new(Gen *g, Item *item) {
  Frame *f = ARENA_NEW(g->arena, Frame);
  f->item = item;
  int n = item->nlocals ? item->nlocals : 1;
  f->slots = ARENA_ARRAY(g->arena, SVal, n);
  f->bound = ARENA_ARRAY(g->arena, bool, n);
  return f;
}

static void bind(Gen *g, Symbol *sym, SVal v) {
  if (!sym) return;
  g->frame->slots[sym->slot] = v;
  g->frame->bound[sym->slot] = true;
}

/* ---- assigned-variable scan ---- */

/* A set of symbols in insertion order; `members` makes adding one
 * constant time however many variables a loop carries. */
typedef struct SymList {
  Symbol **items;
  int n, cap;
  PtrMap members;
} SymList;

static void symlist_add(Gen *g, SymList *l, Symbol *s) {
  if (!l->members.arena) ptrmap_init(&l->members, g->arena);
  if (ptrmap_put(&l->members, s, s)) return; /* already in */
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 8;
    l->items = arena_grow(g->arena, l->items, sizeof(Symbol *), (size_t)l->cap, (size_t)cap);
    l->cap = cap;
  }
  l->items[l->n++] = s;
}

static void scan_assigned(Gen *g, AstBlock *b, SymList *out);

static void scan_stmt(Gen *g, Stmt *s, SymList *out) {
  switch (s->kind) {
  case ST_ASSIGN:
    /* Only variables that exist before the statement are carried. */
    if (s->assign.sym && g->frame->bound[s->assign.sym->slot]) symlist_add(g, out, s->assign.sym);
    break;
  case ST_IF:
    scan_assigned(g, s->if_.then_block, out);
    if (s->if_.else_block) scan_assigned(g, s->if_.else_block, out);
    break;
  case ST_FOR: scan_assigned(g, s->for_.body, out); break;
  case ST_WHILE: scan_assigned(g, s->while_.body, out); break;
  case ST_BLOCK: scan_assigned(g, s->block, out); break;
  default: break;
  }
}

static void scan_assigned(Gen *g, AstBlock *b, SymList *out) {
  for (int i = 0; i < b->nstmts; i++) scan_stmt(g, b->stmts[i], out);
}

/* Current values (and their types, if `types` is not NULL) of carried
 * variables; false if one of them holds an error. */
static bool carried_values(Gen *g, const SymList *l, Value **vals, TType *types) {
  for (int i = 0; i < l->n; i++) {
    SVal cur = g->frame->slots[l->items[i]->slot];
    if (!sv_ok(&cur)) return false;
    vals[i] = cur.v;
    if (types) types[i] = vals[i]->type;
  }
  return true;
}

static void emit_yield(Gen *g, const SymList *carried, SrcLoc loc) {
  Op *y = ir_op_new(g->arena, OP_YIELD, carried->n, 0, NULL, 0, loc);
  if (carried_values(g, carried, y->operands, NULL)) gen_append(g, y);
}

static void bind_carried(Gen *g, const SymList *carried, Value *vals) {
  for (int i = 0; i < carried->n; i++) bind(g, carried->items[i], sv_value(&vals[i], vals[i].def ? vals[i].def->loc : (SrcLoc){0, 0, 0}));
}

/* ---- statements ---- */

/* Coerces v to a variable's type: literals adapt (and broadcast); other
 * values must have the same element type and a shape that broadcasts. */
static Value *coerce_to(Gen *g, SVal v, TType t, SrcLoc loc, const char *what) {
  if (!sv_ok(&v)) return NULL;
  if (v.kind != SV_VALUE) {
    gen_value(g, v);
    return NULL;
  }
  if (!v.weak && !type_elem_eq(v.v->type, t)) {
    diag_error(g->diags, loc, "cannot assign %s to %s of type %s", type_name(g, v.v->type), what, type_name(g, t));
    return NULL;
  }
  Value *x = v.weak ? gen_convert(g, v, (ScalarKind)t.kind, loc) : v.v;
  if (!x) return NULL;
  bool fits = x->type.rank <= t.rank;
  for (int d = 0; fits && d < x->type.rank; d++) {
    int32_t s = x->type.shape[d], want = t.shape[t.rank - x->type.rank + d];
    fits = s == want || s == 1;
  }
  if (!fits) {
    diag_error(g->diags, loc, "cannot assign %s to %s of type %s", type_name(g, x->type), what, type_name(g, t));
    return NULL;
  }
  return gen_broadcast(g, x, t.rank, t.shape, loc);
}

IRGEN_NOINLINE static void gen_let(Gen *g, Stmt *s) {
  SVal v = gen_expr(g, s->let.init);
  if (!sv_ok(&v)) {
    bind(g, s->let.sym, sv_error());
    return;
  }
  if (v.kind == SV_VOID) {
    diag_error(g->diags, s->let.init->loc, "this call has no value to bind to '%s'", s->let.name);
    bind(g, s->let.sym, sv_error());
    return;
  }
  if (s->let.type) {
    TType t;
    Value *x = gen_type(g, s->let.type, &t) ? coerce_to(g, v, t, s->let.init->loc, arena_printf(g->arena, "'%s'", s->let.name)) : NULL;
    v = x ? sv_value(x, s->let.name_loc) : sv_error();
  } else if (s->let.is_var) {
    if (v.kind != SV_VALUE) {
      diag_error(g->diags, s->let.init->loc, "a variable declared with 'var' must hold a value");
      v = sv_error();
    } else {
      v = sv_value(gen_value(g, v), s->let.name_loc); /* literals get their default type */
    }
  }
  bind(g, s->let.sym, v);
}

IRGEN_NOINLINE static void gen_assign(Gen *g, Stmt *s) {
  Symbol *sym = s->assign.sym;
  SVal v = gen_expr(g, s->assign.value);
  if (!sym || !sv_ok(&v)) return;
  SVal cur = g->frame->slots[sym->slot];
  if (!sv_ok(&cur)) return;
  if (s->assign.op != TOK_ASSIGN) {
    static const TokKind binops[] = {TOK_PLUS, TOK_MINUS, TOK_STAR, TOK_SLASH, TOK_PERCENT,
                                     TOK_AMP,  TOK_PIPE,  TOK_CARET, TOK_SHL, TOK_SHR};
    v = gen_binary_op(g, binops[s->assign.op - TOK_PLUS_ASSIGN], cur, v, s->loc);
    if (!sv_ok(&v)) return;
  }
  Value *x = coerce_to(g, v, cur.v->type, s->assign.value->loc, arena_printf(g->arena, "variable '%s'", sym->name));
  if (x) bind(g, sym, sv_value(x, s->loc));
}

/* A scalar i1 condition; *is_const and *const_val tell a known value. */
static Value *gen_condition(Gen *g, Expr *e, const char *construct, bool *is_const, int64_t *const_val) {
  SVal c = gen_expr(g, e);
  if (!sv_ok(&c)) return NULL;
  Value *v = gen_value(g, c);
  if (!v) return NULL;
  if (v->type.kind != SK_I1 || v->type.rank != 0) {
    if (v->type.rank != 0)
      diag_error(g->diags, e->loc, "%s condition must be a scalar i1, not %s; use where() to select between tiles",
                 construct, type_name(g, v->type));
    else
      diag_error(g->diags, e->loc, "%s condition must be i1 (a comparison or a bool), not %s", construct,
                 type_name(g, v->type));
    return NULL;
  }
  *is_const = ir_const_int(v, const_val);
  return v;
}

/* Enters the bodies of an if/for/while op; false, after reporting, when
 * IRGEN_MAX_REGION_DEPTH is reached. region_leave undoes it. */
static bool region_enter(Gen *g, SrcLoc loc) {
  return gen_enter_nesting(g, &g->region_depth, IRGEN_MAX_REGION_DEPTH, loc,
                           "control flow is nested too deeply (more than %d levels, counting inlined helper calls)");
}

static void region_leave(Gen *g) { g->region_depth--; }

IRGEN_NOINLINE static void gen_if(Gen *g, Stmt *s) {
  bool is_const = false;
  int64_t cval = 0;
  Value *cond = gen_condition(g, s->if_.cond, "'if'", &is_const, &cval);
  if (!cond) return;
  if (is_const) {
    AstBlock *taken = cval ? s->if_.then_block : s->if_.else_block;
    if (taken) gen_block(g, taken);
    return;
  }
  if (!region_enter(g, s->loc)) return;
  SymList carried = {0};
  scan_stmt(g, s, &carried);
  TType *types = ARENA_ARRAY(g->arena, TType, carried.n + 1);
  Value **saved = ARENA_ARRAY(g->arena, Value *, carried.n + 1);
  if (!carried_values(g, &carried, saved, types)) {
    region_leave(g);
    return;
  }
  Op *op = ir_op_new(g->arena, OP_IF, 1, carried.n, types, 2, s->loc);
  op->operands[0] = cond;
  gen_append(g, op);
  Block *outer = g->block;
  for (int r = 0; r < 2; r++) {
    AstBlock *b = r == 0 ? s->if_.then_block : s->if_.else_block;
    g->block = &op->regions[r];
    for (int i = 0; i < carried.n; i++) bind(g, carried.items[i], sv_value(saved[i], s->loc));
    if (b) gen_block(g, b);
    emit_yield(g, &carried, b ? b->loc : s->loc);
  }
  g->block = outer;
  bind_carried(g, &carried, op->results);
  region_leave(g);
}

/* The annotation argument at position k as a constant integer, or dflt. */
static bool annot_int(Gen *g, Annotation *a, int k, int64_t dflt, int64_t *out) {
  if (!a->bound || k >= a->nbound || !a->bound[k]) {
    *out = dflt;
    return true;
  }
  return gen_const_int(g, gen_expr(g, a->bound[k]), out, arena_printf(g->arena, "the argument of '@%s'", a->name));
}

static Annotation *find_annot(Annotation *a, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(a[i].name, name) == 0) return &a[i];
  return NULL;
}

/* Reads and checks @warp_specialize; false after reporting. */
static bool gen_warp_specialize(Gen *g, Annotation *a, WarpSpec *ws) {
  int64_t p, c, rp, rc;
  if (!annot_int(g, a, 0, 1, &p) || !annot_int(g, a, 1, 2, &c) || !annot_int(g, a, 2, 40, &rp) ||
      !annot_int(g, a, 3, 232, &rc))
    return false;
  const char *err = NULL;
  if (p < 1 || c < 1) err = "needs at least one producer and one consumer warpgroup";
  else if (WARPGROUP_WARPS * (p + c) > MAX_WARPS)
    err = arena_printf(g->arena, "needs %lld warps; a block has at most %d (4 warps per warpgroup)",
                       (long long)(WARPGROUP_WARPS * (p + c)), MAX_WARPS);
  else if (rp % 8 || rc % 8 || rp < MIN_WS_REGISTERS || rc < MIN_WS_REGISTERS || rp > MAX_WS_REGISTERS ||
           rc > MAX_WS_REGISTERS)
    err = arena_printf(g->arena, "register counts must be multiples of 8 between %d and %d", MIN_WS_REGISTERS,
                       MAX_WS_REGISTERS);
  else if (32 * WARPGROUP_WARPS * (p * rp + c * rc) > SM_REGISTERS)
    err = arena_printf(g->arena, "needs %lld registers; an SM has %d",
                       (long long)(32 * WARPGROUP_WARPS * (p * rp + c * rc)), SM_REGISTERS);
  if (err) {
    diag_error(g->diags, a->loc, "'@warp_specialize' %s", err);
    return false;
  }
  *ws = (WarpSpec){(int)p, (int)c, (int)rp, (int)rc};
  return true;
}

/* Start, end and step of a range, converted to one integer type: the
 * promotion of the typed operands, or i32 (i64 if needed) for literals. */
static bool gen_range(Gen *g, Stmt *s, Value **lo, Value **hi, Value **step) {
  SrcLoc loc = s->loc;
  SVal v[3] = {s->for_.start ? gen_expr(g, s->for_.start) : sv_weak_int(0, loc), gen_expr(g, s->for_.end),
               s->for_.step ? gen_expr(g, s->for_.step) : sv_weak_int(1, loc)};
  ScalarKind k = SK_VOID;
  bool wide = false;
  for (int i = 0; i < 3; i++) {
    if (!sv_ok(&v[i])) return false;
    if (v[i].kind != SV_VALUE) {
      gen_value(g, v[i]); /* reports what it is instead */
      return false;
    }
    TType t = sv_type(&v[i]);
    if (v[i].weak_float || (!v[i].weak && (!scalar_is_int((ScalarKind)t.kind) || t.kind == SK_I1 || t.rank))) {
      diag_error(g->diags, v[i].loc, "range() bounds must be integer scalars, not %s", type_name(g, t));
      return false;
    }
    if (v[i].weak && t.kind == SK_U64) k = SK_U64; /* a literal >= 2^63 */
    else if (v[i].weak) wide |= t.kind == SK_I64;
    else k = k == SK_VOID ? (ScalarKind)t.kind : promote_kinds(k, (ScalarKind)t.kind);
  }
  if (k == SK_VOID) k = wide ? SK_I64 : SK_I32;
  Value **out[3] = {lo, hi, step};
  for (int i = 0; i < 3; i++)
    if (!(*out[i] = gen_convert(g, v[i], k, v[i].loc))) return false;
  int64_t sv;
  if (ir_const_int(*step, &sv) && sv == 0) {
    diag_error(g->diags, v[2].loc, "range() step must not be zero");
    return false;
  }
  return true;
}

static bool gen_loop_annotations(Gen *g, Stmt *s, Op *op) {
  Annotation *pipe = find_annot(s->annots, s->nannots, "pipeline");
  if (pipe) {
    int64_t stages;
    if (!annot_int(g, pipe, 0, 1, &stages)) return false;
    if (stages < 1 || stages > MAX_PIPELINE_STAGES) {
      diag_error(g->diags, pipe->loc, "'@pipeline' stages must be between 1 and %d (got %lld)", MAX_PIPELINE_STAGES,
                 (long long)stages);
      return false;
    }
    op->attr[0] = stages;
  }
  Annotation *wsa = find_annot(s->annots, s->nannots, "warp_specialize");
  if (wsa) {
    WarpSpec ws;
    if (!gen_warp_specialize(g, wsa, &ws)) return false;
    op->attr[1] = ws.producers;
    op->attr[2] = ws.consumers;
    op->attr[3] = ws.producer_registers;
    op->attr[4] = ws.consumer_registers;
  }
  return true;
}

IRGEN_NOINLINE static void gen_for(Gen *g, Stmt *s) {
  Value *lo, *hi, *step;
  if (!gen_range(g, s, &lo, &hi, &step)) return;
  SymList carried = {0};
  scan_stmt(g, s, &carried);
  int n = carried.n;
  TType *types = ARENA_ARRAY(g->arena, TType, n + 1);
  Value **inits = ARENA_ARRAY(g->arena, Value *, n + 1);
  if (!carried_values(g, &carried, inits, types + 1)) return;
  Op *op = ir_op_new(g->arena, OP_FOR, 3 + n, n, types + 1, 1, s->loc);
  op->operands[0] = lo;
  op->operands[1] = hi;
  op->operands[2] = step;
  for (int i = 0; i < n; i++) op->operands[3 + i] = inits[i];
  types[0] = lo->type;
  if (!gen_loop_annotations(g, s, op)) return;
  gen_append(g, op);
  ir_block_set_args(g->arena, &op->regions[0], n + 1, types);
  Block *outer = g->block;
  g->block = &op->regions[0];
  bind(g, s->for_.sym, sv_value(&op->regions[0].args[0], s->for_.var_loc));
  bind_carried(g, &carried, op->regions[0].args + 1);
  gen_block(g, s->for_.body);
  emit_yield(g, &carried, s->loc);
  g->block = outer;
  bind_carried(g, &carried, op->results);
}

IRGEN_NOINLINE static void gen_while(Gen *g, Stmt *s) {
  SymList carried = {0};
  scan_stmt(g, s, &carried);
  int n = carried.n;
  TType *types = ARENA_ARRAY(g->arena, TType, n + 1);
  Value **inits = ARENA_ARRAY(g->arena, Value *, n + 1);
  if (!carried_values(g, &carried, inits, types)) return;
  Op *op = ir_op_new(g->arena, OP_WHILE, n, n, types, 2, s->loc);
  for (int i = 0; i < n; i++) op->operands[i] = inits[i];
  gen_append(g, op);
  Block *outer = g->block;
  /* Region 0: the condition, from the current values. */
  ir_block_set_args(g->arena, &op->regions[0], n, types);
  g->block = &op->regions[0];
  bind_carried(g, &carried, op->regions[0].args);
  bool is_const;
  int64_t cval;
  Value *cond = gen_condition(g, s->while_.cond, "'while'", &is_const, &cval);
  if (!cond) {
    g->block = outer;
    return;
  }
  Op *y = ir_op_new(g->arena, OP_YIELD, 1, 0, NULL, 0, s->while_.cond->loc);
  y->operands[0] = cond;
  gen_append(g, y);
  /* Region 1: the body. */
  ir_block_set_args(g->arena, &op->regions[1], n, types);
  g->block = &op->regions[1];
  bind_carried(g, &carried, op->regions[1].args);
  gen_block(g, s->while_.body);
  emit_yield(g, &carried, s->loc);
  g->block = outer;
  bind_carried(g, &carried, op->results);
}

static void gen_stmt(Gen *g, Stmt *s) {
  if (!gen_enter(g, s->loc)) return;
  switch (s->kind) {
  case ST_LET: gen_let(g, s); break;
  case ST_ASSIGN: gen_assign(g, s); break;
  case ST_EXPR: gen_expr(g, s->expr); break;
  case ST_IF: gen_if(g, s); break;
  case ST_FOR:
  case ST_WHILE:
    if (!region_enter(g, s->loc)) break;
    if (s->kind == ST_FOR) gen_for(g, s);
    else gen_while(g, s);
    region_leave(g);
    break;
  case ST_BLOCK: gen_block(g, s->block); break;
  case ST_RETURN: break; /* handled by gen_call_fn */
  }
  gen_leave(g);
}

/* Whether statements should still be generated: no error cap, no limit. */
static bool generating(const Gen *g) { return !diags_full(g->diags) && !g->halted; }

static void gen_block(Gen *g, AstBlock *b) {
  for (int i = 0; i < b->nstmts && generating(g); i++) gen_stmt(g, b->stmts[i]);
}

/* ---- helper functions and global constants ---- */

/* Binds one argument to a helper parameter. */
static bool bind_fn_param(Gen *g, Frame *callee, Param *p, SVal arg, const char *fname) {
  if (!sv_ok(&arg)) return false;
  Frame *caller = g->frame;
  g->frame = callee; /* parameter types may name earlier type parameters */
  SVal v = arg;
  bool ok = true;
  if (p->type) {
    TType t;
    ok = gen_type(g, p->type, &t);
    if (ok && t.kind == SK_TYPE) {
      if (arg.kind != SV_TYPE) {
        diag_error(g->diags, arg.loc, "argument '%s' of '%s' must be a type", p->name, fname);
        ok = false;
      }
    } else if (ok) {
      Value *x = NULL;
      if (arg.kind == SV_VALUE && !arg.weak && !type_eq(arg.v->type, t))
        diag_error(g->diags, arg.loc, "argument '%s' of '%s' has type %s, expected %s", p->name, fname,
                   type_name(g, arg.v->type), type_name(g, t));
      else
        x = coerce_to(g, arg, t, arg.loc, arena_printf(g->arena, "parameter '%s'", p->name));
      ok = x != NULL;
      v = sv_value(x, arg.loc);
    }
  }
  if (ok && p->is_const && v.kind == SV_VALUE && !v.weak && !ir_is_const(v.v)) {
    if (!gen_explain_not_const(g, v.v))
      diag_error(g->diags, arg.loc, "argument '%s' of '%s' must be a compile-time constant", p->name, fname);
    ok = false;
  }
  g->frame = caller;
  if (ok) {
    callee->slots[p->sym->slot] = v;
    callee->bound[p->sym->slot] = true;
  }
  return ok;
}

SVal gen_call_fn(Gen *g, Expr *call) {
  Item *fn = call->call.sym->item;
  if (g->inline_depth >= IRGEN_MAX_INLINE_DEPTH) {
    diag_error(g->diags, call->loc, "helper calls nest more than %d deep", IRGEN_MAX_INLINE_DEPTH);
    return sv_error();
  }
  Frame *callee = frame_new(g, fn);
  bool ok = true;
  for (int i = 0; i < fn->nparams; i++) {
    SVal arg;
    if (call->call.bound[i]) {
      arg = gen_expr(g, call->call.bound[i]);
    } else {
      /* A default, evaluated where the earlier parameters are bound. */
      Frame *caller = g->frame;
      g->frame = callee;
      arg = gen_expr(g, fn->params[i].default_value);
      g->frame = caller;
    }
    ok &= bind_fn_param(g, callee, &fn->params[i], arg, fn->name);
  }
  if (!ok) return sv_error();
  Frame *caller = g->frame;
  Expr *outer_call = g->call;
  g->frame = callee;
  g->call = call;
  g->inline_depth++;
  AstBlock *body = fn->body;
  int n = body->nstmts;
  Stmt *last = n ? body->stmts[n - 1] : NULL;
  bool has_return = last && last->kind == ST_RETURN;
  for (int i = 0; i < n - (has_return ? 1 : 0) && generating(g); i++) gen_stmt(g, body->stmts[i]);
  SVal result = (SVal){.kind = SV_VOID, .loc = call->loc};
  if (has_return && last->expr) {
    result = gen_expr(g, last->expr);
    if (fn->ret && sv_ok(&result)) {
      TType t;
      Value *x = gen_type(g, fn->ret, &t)
                     ? coerce_to(g, result, t, last->expr->loc, arena_printf(g->arena, "the result of '%s'", fn->name))
                     : NULL;
      result = x ? sv_value(x, call->loc) : sv_error();
    }
  }
  g->inline_depth--;
  g->call = outer_call;
  g->frame = caller;
  if (g->halted) return sv_error();
  if (result.kind != SV_ERROR) result.loc = call->loc;
  return result;
}

/* Evaluates a top-level constant's value, with its ops in the kernel's
 * const_block. */
static SVal eval_global_const(Gen *g, Item *it) {
  if (!it->const_value) return sv_error();
  Frame *saved_frame = g->frame;
  Block *saved_block = g->block;
  Op *saved_effect = g->const_effect;
  g->frame = frame_new(g, it);
  g->block = &g->const_block;
  g->const_effect = NULL;
  g->const_depth++;
  SVal v = gen_expr(g, it->const_value);
  if (it->const_type && sv_ok(&v)) {
    TType t;
    Value *x = gen_type(g, it->const_type, &t)
                   ? coerce_to(g, v, t, it->const_value->loc, arena_printf(g->arena, "constant '%s'", it->name))
                   : NULL;
    v = x ? sv_value(x, it->const_value->loc) : sv_error();
  }
  g->const_depth--;
  Op *effect = g->const_effect;
  g->const_effect = saved_effect;
  g->frame = saved_frame;
  g->block = saved_block;
  if (!sv_ok(&v)) return v;
  if (effect) {
    /* It runs once at the start of the kernel, not at each use. */
    diag_error(g->diags, effect->loc, "constant '%s' must be computed without loads, stores, atomics or while loops",
               it->name);
    return sv_error();
  }
  if (v.kind == SV_VALUE && !v.weak && !ir_is_const(v.v)) {
    if (!gen_explain_not_const(g, v.v))
      diag_error(g->diags, it->const_value->loc, "the value of constant '%s' must be a compile-time constant",
                 it->name);
    return sv_error();
  }
  return v;
}

SVal gen_global_const(Gen *g, Symbol *sym, SrcLoc loc) {
  int id = sym->id; /* the item's index */
  if (g->const_state[id] == CONST_ACTIVE) {
    diag_error(g->diags, loc, "constant '%s' depends on itself", sym->item->name);
    return sv_error();
  }
  if (g->const_state[id] == CONST_UNSEEN) {
    g->const_state[id] = CONST_ACTIVE;
    g->const_values[id] = eval_global_const(g, sym->item);
    g->const_state[id] = CONST_DONE;
  }
  SVal v = g->const_values[id];
  if (v.kind != SV_ERROR) v.loc = loc;
  return v;
}

/* ---- kernels ---- */

/* Parses a -D value for a const parameter of type t. */
static bool parse_define(Gen *g, Param *p, TType t, const char *text, SVal *out) {
  SrcLoc loc = p->loc;
  ScalarKind k = (ScalarKind)t.kind;
  char *end = NULL;
  errno = 0;
  if (k == SK_TYPE) {
    ScalarKind sk = scalar_from_name(text, strlen(text));
    if (sk == SK_VOID) goto bad;
    *out = (SVal){.kind = SV_TYPE, .loc = loc, .type = type_scalar(sk)};
    return true;
  }
  if (k == SK_I1) {
    if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0) *out = sv_weak_int(1, loc);
    else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0) *out = sv_weak_int(0, loc);
    else goto bad;
  } else if (scalar_is_float(k)) {
    double d = strtod(text, &end);
    if (end == text || *end || (errno == ERANGE && (d > 1 || d < -1))) goto bad;
    *out = sv_weak_float(d, loc);
  } else if (scalar_is_int(k)) {
    /* Decimal, 0x hex or 0b binary, as in source (a leading 0 is not octal). */
    const char *digits = text + (text[0] == '-' || text[0] == '+');
    int base = digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X') ? 16
               : digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B') ? 2 : 10;
    const char *num = base == 10 ? digits : digits + 2;
    if (!*num || *num == '-' || *num == '+' || *num == ' ') goto bad;
    unsigned long long mag = strtoull(num, &end, base);
    if (end == num || *end || errno == ERANGE) goto bad;
    if (text[0] == '-') {
      if (mag > (unsigned long long)INT64_MAX + 1) goto bad;
      *out = sv_weak_int((int64_t)(0 - mag), loc);
    } else if (mag > (unsigned long long)INT64_MAX) {
      if (k != SK_U64) goto bad;
      Value *x = emit_const_int(g, type_scalar(SK_U64), (int64_t)mag, loc);
      *out = sv_value(x, loc);
      return true;
    } else {
      *out = sv_weak_int((int64_t)mag, loc);
    }
  } else {
    goto bad;
  }
  Value *x = gen_convert(g, *out, k, loc);
  if (!x) return false;
  *out = sv_value(x, loc);
  return true;
bad:;
  char q[DIAG_QUOTE_BUF];
  diag_error(g->diags, loc, "invalid value '%s' for const parameter '%s' of type %s", diag_quote(q, text), p->name,
             type_name(g, t));
  return false;
}

static const char *find_define(const ConstDef *defs, int n, const char *name) {
  const char *v = NULL;
  for (int i = 0; i < n; i++)
    if (strcmp(defs[i].name, name) == 0) v = defs[i].value; /* the last one wins */
  return v;
}

static bool gen_const_param(Gen *g, Param *p, const ConstDef *defs, int ndefs, ConstInfo *info) {
  TType t;
  if (!p->type || !gen_type(g, p->type, &t)) return false;
  if (t.rank != 0 || t.kind == SK_PTR || t.kind == SK_DESC) {
    diag_error(g->diags, p->type->loc, "const parameters must be scalars or types, not %s", type_name(g, t));
    return false;
  }
  const char *def = find_define(defs, ndefs, p->name);
  SVal v;
  if (def) {
    if (!parse_define(g, p, t, def, &v)) return false;
  } else if (p->default_value) {
    v = gen_expr(g, p->default_value);
    if (!sv_ok(&v)) return false;
    if (t.kind == SK_TYPE) {
      if (v.kind != SV_TYPE) {
        diag_error(g->diags, p->default_value->loc, "the default of '%s' must be a type", p->name);
        return false;
      }
    } else {
      Value *x = coerce_to(g, v, t, p->default_value->loc, arena_printf(g->arena, "const parameter '%s'", p->name));
      if (!x) return false;
      if (!ir_is_const(x)) {
        if (!gen_explain_not_const(g, x))
          diag_error(g->diags, p->default_value->loc, "the default of '%s' must be a compile-time constant", p->name);
        return false;
      }
      v = sv_value(x, p->loc);
    }
  } else {
    diag_error(g->diags, p->loc, "const parameter '%s' has no value (give one with -D %s=...)", p->name, p->name);
    return false;
  }
  bind(g, p->sym, v);
  info->name = p->name;
  info->type = t;
  if (v.kind == SV_TYPE) info->tval = v.type.kind;
  else if (scalar_is_float((ScalarKind)t.kind)) info->fval = v.v->def->fattr;
  else info->ival = v.v->def->attr[0];
  return true;
}

/* A parameter fact (align or multiple_of) as a positive constant. */
static bool gen_fact(Gen *g, Expr *e, const char *what, int64_t *out) {
  *out = 0;
  if (!e) return true;
  if (!gen_const_int(g, gen_expr(g, e), out, arena_printf(g->arena, "the argument of %s", what))) return false;
  if (*out < 1 || (strcmp(what, "align") == 0 && ((*out & (*out - 1)) || *out > 256))) {
    diag_error(g->diags, e->loc, strcmp(what, "align") == 0 ? "align() needs a power of two between 1 and 256 (got %lld)"
                                                           : "multiple_of() needs a positive integer (got %lld)",
               (long long)*out);
    return false;
  }
  return true;
}

static bool gen_runtime_param(Gen *g, Param *p, TType *type, ParamInfo *info) {
  if (!gen_type(g, p->type, type)) return false;
  if (type->rank != 0) {
    diag_error(g->diags, p->type->loc, "kernel parameters must be scalars, pointers or tensor descriptors, not tiles");
    return false;
  }
  info->name = p->name;
  if (!gen_fact(g, p->align, "align", &info->align) || !gen_fact(g, p->multiple_of, "multiple_of", &info->multiple_of))
    return false;
  if (p->align && type->kind != SK_PTR) {
    diag_error(g->diags, p->align->loc, "align() applies to pointer parameters, not %s", type_name(g, *type));
    return false;
  }
  if (p->multiple_of && (!scalar_is_int((ScalarKind)type->kind) || type->kind == SK_I1)) {
    diag_error(g->diags, p->multiple_of->loc, "multiple_of() applies to integer parameters, not %s", type_name(g, *type));
    return false;
  }
  return true;
}

static bool gen_kernel_annotations(Gen *g, Item *k, Func *f) {
  Annotation *w = find_annot(k->annots, k->nannots, "warps");
  Annotation *wsa = find_annot(k->annots, k->nannots, "warp_specialize");
  Annotation *cl = find_annot(k->annots, k->nannots, "cluster");
  f->cluster = 1;
  if (cl) {
    int64_t n;
    if (!annot_int(g, cl, 0, 1, &n)) return false;
    if (n < 1 || n > TILE_MAX_CLUSTER) {
      diag_error(g->diags, cl->loc, "'@cluster' needs a cluster size between 1 and %d (got %lld)", TILE_MAX_CLUSTER,
                 (long long)n);
      return false;
    }
    f->cluster = (int)n;
  }
  if (w) {
    int64_t n;
    if (!annot_int(g, w, 0, 4, &n)) return false;
    if (n < 1 || n > MAX_WARPS || (n & (n - 1))) {
      diag_error(g->diags, w->loc, "'@warps' needs a power of two between 1 and %d (got %lld)", MAX_WARPS, (long long)n);
      return false;
    }
    f->warps = (int)n;
  }
  if (wsa) {
    if (!gen_warp_specialize(g, wsa, &f->ws)) return false;
    int need = WARPGROUP_WARPS * (f->ws.producers + f->ws.consumers);
    if (w && f->warps != need) {
      diag_error(g->diags, w->loc, "'@warps(%d)' conflicts with '@warp_specialize', which needs %d warps", f->warps, need);
      return false;
    }
    f->warps = need;
  }
  return true;
}

/* Moves the ops of the constants evaluated for the kernel to the start of
 * its body, in the order they were made. */
static void splice_consts(Gen *g) {
  Op *first = g->f->body.first;
  for (Op *op = g->const_block.first, *next; op; op = next) {
    next = op->next;
    ir_unlink(op);
    if (first) ir_insert_before(first, op);
    else ir_append(&g->f->body, op);
  }
}

Func *specialize_kernel(Module *m, Program *prog, Item *kernel, const ConstDef *defs, int ndefs, Diags *diags) {
  /* Over the budget of the whole file: reported with an earlier kernel. */
  if (m->specialized_ops > IRGEN_MAX_MODULE_OPS) return NULL;
  int errors_before = diags->errors;
  Gen g = {0};
  g.m = m;
  g.arena = m->arena;
  g.diags = diags;
  g.prog = prog;
  g.const_values = ARENA_ARRAY(m->arena, SVal, prog->nitems + 1);
  g.const_state = ARENA_ARRAY(m->arena, uint8_t, prog->nitems + 1);
  g.frame = frame_new(&g, kernel);
  Func *f = ir_func_new(m, kernel->name, 0, NULL, kernel->loc);
  g.f = f;
  g.block = &f->body;

  int nruntime = 0;
  for (int i = 0; i < kernel->nparams; i++) nruntime += !kernel->params[i].is_const;
  f->consts = ARENA_ARRAY(m->arena, ConstInfo, kernel->nparams - nruntime + 1);
  f->params = ARENA_ARRAY(m->arena, ParamInfo, nruntime + 1);
  TType *types = ARENA_ARRAY(m->arena, TType, nruntime + 1);
  /* Const parameters first (runtime parameter types may use them). */
  for (int i = 0; i < kernel->nparams; i++)
    if (kernel->params[i].is_const) gen_const_param(&g, &kernel->params[i], defs, ndefs, &f->consts[f->nconsts++]);
  if (diags->errors != errors_before) return NULL;
  for (int i = 0, r = 0; i < kernel->nparams; i++)
    if (!kernel->params[i].is_const) gen_runtime_param(&g, &kernel->params[i], &types[r], &f->params[r]), r++;
  if (diags->errors != errors_before) return NULL;
  ir_block_set_args(m->arena, &f->body, nruntime, types);
  for (int i = 0, r = 0; i < kernel->nparams; i++)
    if (!kernel->params[i].is_const) bind(&g, kernel->params[i].sym, sv_value(&f->body.args[r++], kernel->params[i].loc));
  if (!gen_kernel_annotations(&g, kernel, f)) return NULL;

  gen_block(&g, kernel->body);
  Op *ret = ir_op_new(m->arena, OP_RETURN, 0, 0, NULL, 0, kernel->loc);
  ir_append(&f->body, ret);
  splice_consts(&g);
  if (diags->errors == errors_before) gen_check_turns(f, diags);
  if (diags->errors != errors_before) {
    m->nfuncs--; /* drop the partial function */
    return NULL;
  }
  return f;
}
