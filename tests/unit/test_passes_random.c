/* test_passes_random.c - randomized differential test of the pass pipeline.
 *
 * Generates many small random kernels over i32 and f32 scalars
 * (arithmetic, bit operations, conversions, fma, comparisons and selects,
 * division by nonzero constants, constants such as -0.0, inf and NaN,
 * nested for loops with iter args, ifs with results, counted while loops,
 * stores), evaluates each with a small reference evaluator written here,
 * runs the whole pipeline with the verifier after every pass, evaluates
 * again and requires the same sequence of stored values.  The generator
 * produces many constants, repeated expressions and dead values, so that
 * every pass has something to do.
 *
 * The evaluator keeps each value in Value.id in its 32-bit memory encoding
 * (Value.id is free between passes), computes with numeric.h like the
 * real interpreter, and compares stores by their bits.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/numeric/numeric.h"
#include "../../compiler/ir/ir.h"
#include "../../compiler/passes/passes.h"

/* Number of random kernels. */
#define GEN_PROGRAMS 1000
/* Most values the generator keeps in scope. */
#define GEN_MAX_POOL 256
/* Ops generated per block, at most. */
#define GEN_MAX_BLOCK_OPS 14
/* Deepest nesting of loops and ifs. */
#define GEN_MAX_DEPTH 3
/* Most iter args or if results. */
#define GEN_MAX_CARRIED 3
/* Stored values the evaluator records (later ones are only counted). */
#define EVAL_MAX_LOG 4096
/* Inputs (x, y) each kernel runs with. */
#define EVAL_INPUTS 4
/* Most values a yield passes back. */
#define EVAL_MAX_YIELD 8

/* ---- random kernels ---------------------------------------------------- */

typedef struct Gen {
  Arena *arena;
  uint64_t rng;
  Value *pool[GEN_MAX_POOL]; /* i32 and f32 values in scope */
  int npool;
  Value *iptr, *fptr; /* *i32 and *f32 parameters */
} Gen;

static uint32_t rnd(Gen *g, uint32_t n) {
  g->rng ^= g->rng << 13;
  g->rng ^= g->rng >> 7;
  g->rng ^= g->rng << 17;
  return (uint32_t)(g->rng % n);
}

static const SrcLoc noloc = {0};

static Value *push(Gen *g, Value *v) {
  if (g->npool < GEN_MAX_POOL) g->pool[g->npool++] = v;
  return v;
}

/* A random value of kind k in scope (the parameters guarantee one). */
static Value *pick(Gen *g, ScalarKind k) {
  int start = (int)rnd(g, (uint32_t)g->npool);
  for (int i = 0; i < g->npool; i++) {
    Value *v = g->pool[(start + i) % g->npool];
    if (v->type.kind == k) return v;
  }
  cr_assert_fail("no value of kind %d in scope", k);
  return NULL;
}

static ScalarKind pick_kind(Gen *g) { return rnd(g, 3) ? SK_I32 : SK_F32; }

static Value *emit(Gen *g, Block *b, OpKind k, TType t, int n, Value *x, Value *y, Value *z) {
  Value *ops[3] = {x, y, z};
  Op *op = ir_op_make(g->arena, k, n, ops, t.kind == SK_VOID ? 0 : 1, &t, noloc);
  ir_append(b, op);
  return op->nresults ? &op->results[0] : NULL;
}

static Value *gen_const(Gen *g, Block *b, ScalarKind k, int64_t v) {
  Value *c = emit(g, b, OP_CONST, type_scalar(k), 0, NULL, NULL, NULL);
  c->def->attr[0] = v;
  return c;
}

static Value *gen_fconst(Gen *g, Block *b, double v) {
  Value *c = emit(g, b, OP_CONST, type_scalar(SK_F32), 0, NULL, NULL, NULL);
  c->def->fattr = v;
  return c;
}

static Value *small_const(Gen *g, Block *b, ScalarKind k) {
  static const int64_t ints[] = {0, 1, -1, 2, 3, 7, 31, 32, 100, -5, INT32_MIN, INT32_MAX};
  static const double floats[] = {0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e30, -2.5, INFINITY, NAN};
  if (k == SK_F32) return gen_fconst(g, b, floats[rnd(g, sizeof floats / sizeof floats[0])]);
  return gen_const(g, b, SK_I32, ints[rnd(g, sizeof ints / sizeof ints[0])]);
}

static Value *gen_binary(Gen *g, Block *b, ScalarKind k) {
  static const OpKind ikinds[] = {OP_ADD, OP_SUB, OP_MUL, OP_AND, OP_OR,
                                  OP_XOR, OP_SHL, OP_SHR, OP_MAX, OP_MIN};
  static const OpKind fkinds[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN};
  OpKind op = k == SK_F32 ? fkinds[rnd(g, sizeof fkinds / sizeof fkinds[0])]
                          : ikinds[rnd(g, sizeof ikinds / sizeof ikinds[0])];
  /* often an operand is a constant, so that identities come up */
  Value *y = rnd(g, 3) ? pick(g, k) : small_const(g, b, k);
  return emit(g, b, op, type_scalar(k), 2, pick(g, k), y, NULL);
}

static Value *gen_cond(Gen *g, Block *b) {
  if (rnd(g, 4) == 0) return gen_const(g, b, SK_I1, rnd(g, 2));
  ScalarKind k = pick_kind(g);
  OpKind op = (OpKind)(OP_CMP_EQ + rnd(g, 6));
  Value *x = pick(g, k);
  return emit(g, b, op, type_scalar(SK_I1), 2, x, rnd(g, 4) ? pick(g, k) : x, NULL);
}

static Value *gen_unary(Gen *g, Block *b, ScalarKind k) {
  TType t = type_scalar(k);
  switch (rnd(g, 4)) {
  case 0: return emit(g, b, OP_NEG, t, 1, pick(g, k), NULL, NULL);
  case 1:
    if (k == SK_I32) return emit(g, b, OP_NOT, t, 1, pick(g, k), NULL, NULL);
    return emit(g, b, OP_FMA, t, 3, pick(g, k), pick(g, k), pick(g, k));
  case 2: return emit(g, b, OP_CAST, t, 1, pick(g, k == SK_I32 ? SK_F32 : SK_I32), NULL, NULL);
  default: return emit(g, b, OP_CAST, t, 1, pick(g, k), NULL, NULL); /* to its own type */
  }
}

static void gen_store(Gen *g, Block *b) {
  ScalarKind k = pick_kind(g);
  emit(g, b, OP_STORE, type_scalar(SK_VOID), 2, k == SK_F32 ? g->fptr : g->iptr, pick(g, k), NULL);
}

static void gen_block(Gen *g, Block *b, int depth);

/* Fills a region and ends it with a yield of values of the given types. */
static void gen_region(Gen *g, Block *b, int depth, int n, const TType *types) {
  int saved = g->npool;
  for (uint32_t i = 0; i < b->nargs; i++) push(g, &b->args[i]);
  gen_block(g, b, depth);
  Value *vals[GEN_MAX_CARRIED];
  for (int i = 0; i < n; i++) vals[i] = pick(g, (ScalarKind)types[i].kind);
  ir_append(b, ir_op_make(g->arena, OP_YIELD, n, vals, 0, NULL, noloc));
  g->npool = saved;
}

/* Loop bounds: a small constant or a parameter-dependent value & 3. */
static Value *gen_bound(Gen *g, Block *b) {
  if (rnd(g, 2)) return gen_const(g, b, SK_I32, rnd(g, 5));
  Value *three = gen_const(g, b, SK_I32, 3);
  return emit(g, b, OP_AND, type_scalar(SK_I32), 2, pick(g, SK_I32), three, NULL);
}

static void gen_for(Gen *g, Block *b, int depth) {
  int n = (int)rnd(g, GEN_MAX_CARRIED + 1);
  Value *lo = gen_const(g, b, SK_I32, rnd(g, 3));
  Value *hi = gen_bound(g, b);
  Value *step = gen_const(g, b, SK_I32, rnd(g, 4) ? 1 : -1);
  TType args[GEN_MAX_CARRIED + 1];
  args[0] = type_scalar(SK_I32);
  for (int i = 1; i <= n; i++) args[i] = type_scalar(pick_kind(g));
  Op *op = ir_op_new(g->arena, OP_FOR, 3 + n, n, args + 1, 1, noloc);
  op->operands[0] = lo;
  op->operands[1] = hi;
  op->operands[2] = step;
  for (int i = 0; i < n; i++) op->operands[3 + i] = pick(g, (ScalarKind)args[1 + i].kind);
  ir_block_set_args(g->arena, &op->regions[0], n + 1, args);
  ir_append(b, op);
  gen_region(g, &op->regions[0], depth + 1, n, args + 1);
  for (int i = 0; i < n; i++) push(g, &op->results[i]);
}

static void gen_if(Gen *g, Block *b, int depth) {
  int n = (int)rnd(g, GEN_MAX_CARRIED + 1);
  TType types[GEN_MAX_CARRIED] = {0};
  for (int i = 0; i < n; i++) types[i] = type_scalar(pick_kind(g));
  Op *op = ir_op_new(g->arena, OP_IF, 1, n, types, 2, noloc);
  op->operands[0] = gen_cond(g, b);
  ir_append(b, op);
  gen_region(g, &op->regions[0], depth + 1, n, types);
  gen_region(g, &op->regions[1], depth + 1, n, types);
  for (int i = 0; i < n; i++) push(g, &op->results[i]);
}

/* while (i = 0) { yield i < K } do (i) { ...; yield i + 1 }: terminates. */
static void gen_while(Gen *g, Block *b, int depth) {
  TType i32 = type_scalar(SK_I32);
  Value *zero = gen_const(g, b, SK_I32, 0);
  Op *op = ir_op_new(g->arena, OP_WHILE, 1, 1, &i32, 2, noloc);
  op->operands[0] = zero;
  ir_block_set_args(g->arena, &op->regions[0], 1, &i32);
  ir_block_set_args(g->arena, &op->regions[1], 1, &i32);
  ir_append(b, op);
  Block *cb = &op->regions[0], *body = &op->regions[1];
  Value *lim = gen_const(g, cb, SK_I32, rnd(g, 4));
  Value *c = emit(g, cb, OP_CMP_LT, type_scalar(SK_I1), 2, &cb->args[0], lim, NULL);
  ir_append(cb, ir_op_make(g->arena, OP_YIELD, 1, &c, 0, NULL, noloc));
  int saved = g->npool;
  gen_block(g, body, depth + 1);
  g->npool = saved;
  Value *one = gen_const(g, body, SK_I32, 1);
  Value *next = emit(g, body, OP_ADD, i32, 2, &body->args[0], one, NULL);
  ir_append(body, ir_op_make(g->arena, OP_YIELD, 1, &next, 0, NULL, noloc));
  push(g, &op->results[0]);
}

/* An exact copy of the previous op (for cse), when that is a pure op. */
static void gen_copy(Gen *g, Block *b) {
  Op *prev = b->last;
  if (!prev || prev->nresults != 1 || prev->nregions || !(ir_info(prev)->flags & OPF_PURE))
    return;
  Value *ops[3] = {NULL, NULL, NULL};
  for (uint32_t i = 0; i < prev->noperands; i++) ops[i] = prev->operands[i];
  Value *v = emit(g, b, (OpKind)prev->kind, prev->results[0].type, (int)prev->noperands, ops[0],
                  ops[1], ops[2]);
  memcpy(v->def->attr, prev->attr, sizeof prev->attr);
  v->def->fattr = prev->fattr;
  if (v->type.kind != SK_I1) push(g, v);
}

static void gen_op(Gen *g, Block *b, int depth) {
  ScalarKind k = pick_kind(g);
  uint32_t r = rnd(g, 100);
  if (r < 28) {
    push(g, gen_binary(g, b, k));
  } else if (r < 36) {
    push(g, small_const(g, b, k));
  } else if (r < 44) {
    push(g, gen_unary(g, b, k));
  } else if (r < 52) {
    push(g, emit(g, b, OP_SELECT, type_scalar(k), 3, gen_cond(g, b), pick(g, k), pick(g, k)));
  } else if (r < 57) {
    static const int64_t divisors[] = {1, -1, 3, 8};
    Value *d = gen_const(g, b, SK_I32, divisors[rnd(g, 4)]);
    push(g, emit(g, b, rnd(g, 2) ? OP_DIV : OP_REM, type_scalar(SK_I32), 2, pick(g, SK_I32), d, NULL));
  } else if (r < 70) {
    gen_store(g, b);
  } else if (r < 78 && depth < GEN_MAX_DEPTH) {
    gen_for(g, b, depth);
  } else if (r < 86 && depth < GEN_MAX_DEPTH) {
    gen_if(g, b, depth);
  } else if (r < 89 && depth < GEN_MAX_DEPTH) {
    gen_while(g, b, depth);
  } else {
    gen_copy(g, b);
  }
}

static void gen_block(Gen *g, Block *b, int depth) {
  int n = 1 + (int)rnd(g, GEN_MAX_BLOCK_OPS);
  for (int i = 0; i < n; i++) gen_op(g, b, depth);
}

/* Kernel parameters: x, y: i32; z: f32; p: *i32; q: *f32. */
#define GEN_NPARAMS 5

static Func *gen_kernel(Arena *a, uint64_t seed) {
  TType params[GEN_NPARAMS] = {type_scalar(SK_I32), type_scalar(SK_I32), type_scalar(SK_F32),
                               type_ptr(SK_I32), type_ptr(SK_F32)};
  Module *m = ir_module_new(a, "random.tile");
  Func *f = ir_func_new(m, "k", GEN_NPARAMS, params, noloc);
  Gen g = {.arena = a, .rng = seed * 0x9e3779b97f4a7c15ULL + 1};
  g.iptr = &f->body.args[3];
  g.fptr = &f->body.args[4];
  for (int i = 0; i < 3; i++) push(&g, &f->body.args[i]);
  gen_block(&g, &f->body, 0);
  gen_store(&g, &f->body);
  ir_append(&f->body, ir_op_make(a, OP_RETURN, 0, NULL, 0, NULL, noloc));
  return f;
}

/* ---- reference evaluator ----------------------------------------------- */

typedef struct Eval {
  int64_t log[EVAL_MAX_LOG];
  int nlog; /* stores executed, also those past EVAL_MAX_LOG */
} Eval;

/* Values live in Value.id in their memory encoding (32 bits suffice). */
static Slot get(const Value *v) { return num_decode(v->id, (ScalarKind)v->type.kind); }
static void set(Value *v, Slot s) { v->id = (uint32_t)num_encode(s, (ScalarKind)v->type.kind); }

static NumBinop binop_of(OpKind k) {
  static const OpKind kinds[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_REM, OP_AND,
                                 OP_OR,  OP_XOR, OP_SHL, OP_SHR, OP_MAX, OP_MIN};
  static const NumBinop ops[] = {NUM_ADD, NUM_SUB, NUM_MUL, NUM_DIV, NUM_REM, NUM_AND,
                                 NUM_OR,  NUM_XOR, NUM_SHL, NUM_SHR, NUM_MAX, NUM_MIN};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (kinds[i] == k) return ops[i];
  cr_assert_fail("no binop for op %d", k);
  return NUM_ADD;
}

static void eval_block(Eval *e, Block *b, Slot *yielded);

static void eval_region(Eval *e, Block *b, const Slot *args, Slot *yielded) {
  for (uint32_t i = 0; i < b->nargs; i++) set(&b->args[i], args[i]);
  eval_block(e, b, yielded);
}

static void eval_for(Eval *e, Op *op) {
  Slot carried[EVAL_MAX_YIELD + 1];
  int32_t lo = (int32_t)get(op->operands[0]).i, hi = (int32_t)get(op->operands[1]).i;
  int32_t step = (int32_t)get(op->operands[2]).i;
  for (uint32_t i = 0; i < op->nresults; i++) carried[1 + i] = get(op->operands[3 + i]);
  for (int32_t iv = lo; step > 0 ? iv < hi : iv > hi; iv += step) {
    carried[0].i = iv;
    eval_region(e, &op->regions[0], carried, carried + 1);
  }
  for (uint32_t i = 0; i < op->nresults; i++) set(&op->results[i], carried[1 + i]);
}

static void eval_while(Eval *e, Op *op) {
  Slot carried[EVAL_MAX_YIELD], cond;
  for (uint32_t i = 0; i < op->noperands; i++) carried[i] = get(op->operands[i]);
  for (;;) {
    eval_region(e, &op->regions[0], carried, &cond);
    if (!cond.u) break;
    eval_region(e, &op->regions[1], carried, carried);
  }
  for (uint32_t i = 0; i < op->nresults; i++) set(&op->results[i], carried[i]);
}

static void eval_op(Eval *e, Op *op, Slot *yielded) {
  ScalarKind k = op->noperands ? (ScalarKind)op->operands[0]->type.kind : SK_I32;
  Slot r = {0}, branch[EVAL_MAX_YIELD];
  switch (op->kind) {
  case OP_CONST:
    if (op->results[0].type.kind == SK_F32)
      r.f = op->fattr;
    else
      r.i = op->attr[0];
    break;
  case OP_NEG: r = num_unop(NUM_NEG, get(op->operands[0]), k); break;
  case OP_CAST: r = num_convert(get(op->operands[0]), k, (ScalarKind)op->results[0].type.kind); break;
  case OP_FMA: r = num_fma(get(op->operands[0]), get(op->operands[1]), get(op->operands[2]), k); break;
  case OP_NOT: r = num_unop(NUM_NOT, get(op->operands[0]), k); break;
  case OP_SELECT: r = get(op->operands[0]).u ? get(op->operands[1]) : get(op->operands[2]); break;
  case OP_STORE:
    if (e->nlog < EVAL_MAX_LOG) e->log[e->nlog] = (int64_t)op->operands[1]->id;
    e->nlog++;
    return;
  case OP_FOR: eval_for(e, op); return;
  case OP_WHILE: eval_while(e, op); return;
  case OP_IF:
    eval_region(e, &op->regions[get(op->operands[0]).u ? 0 : 1], NULL, branch);
    for (uint32_t i = 0; i < op->nresults; i++) set(&op->results[i], branch[i]);
    return;
  case OP_YIELD:
    for (uint32_t i = 0; i < op->noperands; i++) yielded[i] = get(op->operands[i]);
    return;
  case OP_RETURN: return;
  default:
    if (op->kind >= OP_CMP_EQ && op->kind <= OP_CMP_GE) {
      r.u = num_cmp((NumCmp)(NUM_EQ + (op->kind - OP_CMP_EQ)), get(op->operands[0]), get(op->operands[1]), k);
    } else {
      bool div_by_zero = false;
      r = num_binop(binop_of((OpKind)op->kind), get(op->operands[0]), get(op->operands[1]), k, &div_by_zero);
      cr_assert_not(div_by_zero);
    }
  }
  set(&op->results[0], r);
}

static void eval_block(Eval *e, Block *b, Slot *yielded) {
  for (Op *op = b->first; op; op = op->next) eval_op(e, op, yielded);
}

static void eval_kernel(Eval *e, Func *f, int32_t x, int32_t y, double z) {
  Slot args[GEN_NPARAMS] = {{.i = x}, {.i = y}, {.f = z}, {.i = 0}, {.i = 0}};
  e->nlog = 0;
  eval_region(e, &f->body, args, NULL);
}

/* ---- the test ----------------------------------------------------------- */

static void count_op(Op *op, void *user) {
  (void)op;
  (*(int *)user)++;
}

static int op_count(Func *f) {
  int n = 0;
  ir_walk_block(&f->body, count_op, &n);
  return n;
}

static bool same_log(const Eval *a, const Eval *b) {
  int n = a->nlog < EVAL_MAX_LOG ? a->nlog : EVAL_MAX_LOG;
  return a->nlog == b->nlog && memcmp(a->log, b->log, sizeof(int64_t) * (size_t)n) == 0;
}

/* Generates kernel `seed`, evaluates it, optimizes it (verifying after each
 * pass), evaluates again; evals has EVAL_INPUTS + 1 entries. Returns the op
 * counts before and after through *before and *after. */
static void check_seed(uint64_t seed, Eval *evals, int *before, int *after) {
  static const struct {
    int32_t x, y;
    double z;
  } inputs[EVAL_INPUTS] = {{0, 0, 0.0}, {5, -3, -0.0}, {-7, 2, 1.5}, {123456, 3, NAN}};
  Arena a;
  arena_init(&a);
  Func *f = gen_kernel(&a, seed);
  Diags d;
  diags_init(&d, &a, NULL);
  cr_assert(ir_verify_func(f, &d), "seed %llu: the generator made invalid IR", (unsigned long long)seed);
  *before += op_count(f);
  for (int i = 0; i < EVAL_INPUTS; i++) eval_kernel(&evals[i], f, inputs[i].x, inputs[i].y, inputs[i].z);
  PassOptions opt = {.verify_each = true, .diags = &d};
  StrBuf sb;
  sb_init(&sb);
  if (!passes_run_func(f, &a, &opt)) {
    diags_render_all(&d, &sb);
    ir_print_func(f, &sb);
    cr_assert_fail("seed %llu: invalid IR after a pass:\n%s", (unsigned long long)seed, sb.data);
  }
  *after += op_count(f);
  Eval *now = &evals[EVAL_INPUTS];
  for (int i = 0; i < EVAL_INPUTS; i++) {
    eval_kernel(now, f, inputs[i].x, inputs[i].y, inputs[i].z);
    if (same_log(&evals[i], now)) continue;
    ir_print_func(f, &sb);
    cr_assert_fail("seed %llu input %d: stores differ (%d vs %d); optimized:\n%s",
                   (unsigned long long)seed, i, evals[i].nlog, now->nlog, sb.data);
  }
  sb_free(&sb);
  arena_free(&a);
}

Test(random, pipeline_keeps_what_kernels_store) {
  Eval *evals = calloc(EVAL_INPUTS + 1, sizeof *evals);
  int before = 0, after = 0;
  for (uint64_t seed = 1; seed <= GEN_PROGRAMS; seed++) check_seed(seed, evals, &before, &after);
  free(evals);
  cr_assert_lt(after, before, "the passes removed something overall (%d -> %d ops)", before, after);
}
