/* test_passes.c - unit tests for the optimization passes in
 * compiler/passes/ (fold, canon, cse, dce, licm and the pipeline) and of
 * single-op folding (compiler/numeric/fold_op.c).
 *
 * Each test builds a small kernel with the IR builder API, runs one pass
 * (or the pipeline) and checks the result: op counts by kind, constant
 * values and their exact bits, where ops ended up, or the printed text.
 * Expected constants are worked out by hand in the comments, not computed
 * with numeric.c.  test_passes_text.c runs the passes on parsed text with
 * the verifier before and after.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/ir/ir.h"
#include "../../compiler/numeric/fold_op.h"
#include "../../compiler/passes/passes.h"

/* ---- building kernels ------------------------------------------------- */

/* Most parameters a test kernel has. */
#define TEST_MAX_PARAMS 4
/* Most iter args of a test loop. */
#define TEST_MAX_ITERS 8

typedef struct Ctx {
  Arena arena;
  Module *m;
  Func *f;
  Block *b; /* the kernel body */
} Ctx;

static const char *const param_names[TEST_MAX_PARAMS] = {"x", "p", "y", "q"};

static void ctx_init(Ctx *c, int nparams, const TType *types) {
  arena_init(&c->arena);
  c->m = ir_module_new(&c->arena, "test.tile");
  c->f = ir_func_new(c->m, "k", nparams, types, (SrcLoc){0, 0, 0});
  for (int i = 0; i < nparams; i++) c->f->params[i].name = param_names[i];
  c->b = &c->f->body;
}

static void ctx_free(Ctx *c) { arena_free(&c->arena); }

static Value *param(Ctx *c, int i) { return &c->b->args[i]; }

static TType sc(ScalarKind k) { return type_scalar(k); }
static TType t1(ScalarKind k, int n) { return type_tile(k, 1, (int32_t[]){n}); }
static TType t2(ScalarKind k, int a, int b) { return type_tile(k, 2, (int32_t[]){a, b}); }

static Op *emit(Ctx *c, Block *b, OpKind k, int nres, const TType *types, int n, Value *x,
                Value *y, Value *z) {
  Value *ops[3] = {x, y, z};
  Op *op = ir_op_make(&c->arena, k, n, ops, nres, types, (SrcLoc){0, 0, 0});
  ir_append(b, op);
  return op;
}

static Value *op1(Ctx *c, Block *b, OpKind k, TType t, Value *x) {
  return &emit(c, b, k, 1, &t, 1, x, NULL, NULL)->results[0];
}
static Value *op2(Ctx *c, Block *b, OpKind k, TType t, Value *x, Value *y) {
  return &emit(c, b, k, 1, &t, 2, x, y, NULL)->results[0];
}
static Value *op3(Ctx *c, Block *b, OpKind k, TType t, Value *x, Value *y, Value *z) {
  return &emit(c, b, k, 1, &t, 3, x, y, z)->results[0];
}

static Value *cint(Ctx *c, Block *b, TType t, int64_t v) {
  Op *op = emit(c, b, OP_CONST, 1, &t, 0, NULL, NULL, NULL);
  op->attr[0] = v;
  return &op->results[0];
}

static Value *cflt(Ctx *c, Block *b, TType t, double v) {
  Op *op = emit(c, b, OP_CONST, 1, &t, 0, NULL, NULL, NULL);
  op->fattr = v;
  return &op->results[0];
}

static Value *load(Ctx *c, Block *b, TType t, Value *ptr) { return op1(c, b, OP_LOAD, t, ptr); }

static void store(Ctx *c, Block *b, Value *ptr, Value *v) {
  emit(c, b, OP_STORE, 0, NULL, 2, ptr, v, NULL);
}

static void ret(Ctx *c) { emit(c, c->b, OP_RETURN, 0, NULL, 0, NULL, NULL, NULL); }

static void yield(Ctx *c, Block *b, int n, Value *const *vals) {
  Op *op = ir_op_make(&c->arena, OP_YIELD, n, vals, 0, NULL, (SrcLoc){0, 0, 0});
  ir_append(b, op);
}

/* for iv = lo to hi step st iter(inits): region 0 args (iv, iters). */
static Op *emit_for(Ctx *c, Block *b, Value *lo, Value *hi, Value *st, int n, Value *const *inits) {
  TType types[TEST_MAX_ITERS], args[TEST_MAX_ITERS + 1];
  cr_assert(n <= TEST_MAX_ITERS);
  args[0] = lo->type;
  for (int i = 0; i < n; i++) args[i + 1] = types[i] = inits[i]->type;
  Op *op = ir_op_new(&c->arena, OP_FOR, 3 + n, n, types, 1, (SrcLoc){0, 0, 0});
  op->operands[0] = lo;
  op->operands[1] = hi;
  op->operands[2] = st;
  for (int i = 0; i < n; i++) op->operands[3 + i] = inits[i];
  ir_block_set_args(&c->arena, &op->regions[0], n + 1, args);
  ir_append(b, op);
  return op;
}

static Op *emit_if(Ctx *c, Block *b, Value *cond, int nres, const TType *types) {
  Op *op = ir_op_new(&c->arena, OP_IF, 1, nres, types, 2, (SrcLoc){0, 0, 0});
  op->operands[0] = cond;
  ir_append(b, op);
  return op;
}

/* while (inits): region 0 (args iters) yields an i1, region 1 (args iters)
 * yields the iters. */
static Op *emit_while(Ctx *c, Block *b, int n, Value *const *inits) {
  TType types[TEST_MAX_ITERS];
  cr_assert(n <= TEST_MAX_ITERS);
  for (int i = 0; i < n; i++) types[i] = inits[i]->type;
  Op *op = ir_op_new(&c->arena, OP_WHILE, n, n, types, 2, (SrcLoc){0, 0, 0});
  for (int i = 0; i < n; i++) op->operands[i] = inits[i];
  ir_block_set_args(&c->arena, &op->regions[0], n, types);
  ir_block_set_args(&c->arena, &op->regions[1], n, types);
  ir_append(b, op);
  return op;
}

/* ---- inspecting results ------------------------------------------------ */

typedef struct KindCount {
  OpKind kind;
  int n;
} KindCount;

static void count_visit(Op *op, void *user) {
  KindCount *kc = user;
  if (op->kind == kc->kind) kc->n++;
}

static int count_ops(Func *f, OpKind k) {
  KindCount kc = {k, 0};
  ir_walk_block(&f->body, count_visit, &kc);
  return kc.n;
}

static int count_in_block(const Block *b, OpKind k) {
  int n = 0;
  for (Op *op = b->first; op; op = op->next) n += op->kind == k;
  return n;
}

static int block_len(const Block *b) {
  int n = 0;
  for (Op *op = b->first; op; op = op->next) n++;
  return n;
}

/* The value a store (the first, depth first) writes. */
static Op *first_op(Func *f, OpKind k);
static Value *stored(Func *f) { return first_op(f, OP_STORE)->operands[1]; }

typedef struct FindOp {
  OpKind kind;
  Op *found;
} FindOp;

static void find_visit(Op *op, void *user) {
  FindOp *fo = user;
  if (!fo->found && op->kind == fo->kind) fo->found = op;
}

static Op *first_op(Func *f, OpKind k) {
  FindOp fo = {k, NULL};
  ir_walk_block(&f->body, find_visit, &fo);
  return fo.found;
}

/* The value the i-th store of the kernel body writes. */
static Value *stored_nth(const Block *b, int i) {
  for (Op *op = b->first; op; op = op->next)
    if (op->kind == OP_STORE && i-- == 0) return op->operands[1];
  cr_assert_fail("no store %d", i);
  return NULL;
}

static int64_t const_ival(const Value *v) {
  cr_assert(v->def && v->def->kind == OP_CONST, "expected a const, got op %d",
            v->def ? v->def->kind : -1);
  return v->def->attr[0];
}

static double const_fval(const Value *v) {
  cr_assert(v->def && v->def->kind == OP_CONST);
  return v->def->fattr;
}

static uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* The printed kernel (malloc'd). */
static char *dump(const Func *f) {
  StrBuf sb;
  sb_init(&sb);
  ir_print_func(f, &sb);
  return sb_take(&sb);
}

static void assert_text(const Func *f, const char *expected) {
  char *text = dump(f);
  cr_assert_str_eq(text, expected, "got:\n%s\nexpected:\n%s", text, expected);
  free(text);
}

/* A kernel (x: T, p: *T). */
static void ctx_init_xp(Ctx *c, ScalarKind k) {
  TType types[2] = {sc(k), type_ptr(k)};
  ctx_init(c, 2, types);
}

/* A tile of pointers to k. */
static TType ptr_tile(ScalarKind k, int rank, const int32_t *shape) {
  return type_with_shape(type_ptr(k), rank, shape);
}

/* ---- fold -------------------------------------------------------------- */

Test(fold, i8_add_wraps) {
  Ctx c;
  ctx_init_xp(&c, SK_I8);
  Value *a = cint(&c, c.b, sc(SK_I8), 100);
  Value *s = op2(&c, c.b, OP_ADD, sc(SK_I8), a, a); /* 200 wraps to 200-256 = -56 */
  store(&c, c.b, param(&c, 1), s);
  ret(&c);
  cr_assert(pass_fold(c.f, &c.arena));
  cr_assert_eq(const_ival(stored(c.f)), -56);
  cr_assert_eq(count_ops(c.f, OP_ADD), 0);
  cr_assert_not(pass_fold(c.f, &c.arena), "a second run finds nothing");
  ctx_free(&c);
}

Test(fold, i8_mul_and_neg_wrap) {
  Ctx c;
  ctx_init_xp(&c, SK_I8);
  Value *m = op2(&c, c.b, OP_MUL, sc(SK_I8), cint(&c, c.b, sc(SK_I8), 16), cint(&c, c.b, sc(SK_I8), 9));
  Value *n = op1(&c, c.b, OP_NEG, sc(SK_I8), cint(&c, c.b, sc(SK_I8), -128));
  store(&c, c.b, param(&c, 1), m); /* 144 - 256 = -112 */
  store(&c, c.b, param(&c, 1), n); /* -(-128) wraps to -128 */
  ret(&c);
  pass_fold(c.f, &c.arena);
  cr_assert_eq(const_ival(m), -112);
  cr_assert_eq(const_ival(n), -128);
  ctx_free(&c);
}

Test(fold, u32_division_is_unsigned) {
  Ctx c;
  ctx_init_xp(&c, SK_U32);
  /* 0xffffffff / 3 = 0x55555555 unsigned (signed it would be -1/3 = 0) */
  Value *q = op2(&c, c.b, OP_DIV, sc(SK_U32), cint(&c, c.b, sc(SK_U32), 0xffffffffLL),
                 cint(&c, c.b, sc(SK_U32), 3));
  Value *r = op2(&c, c.b, OP_REM, sc(SK_U32), cint(&c, c.b, sc(SK_U32), 0xffffffffLL),
                 cint(&c, c.b, sc(SK_U32), 10));
  store(&c, c.b, param(&c, 1), q);
  store(&c, c.b, param(&c, 1), r);
  ret(&c);
  cr_assert(pass_fold(c.f, &c.arena));
  cr_assert_eq(const_ival(q), 0x55555555LL);
  cr_assert_eq(const_ival(r), 5); /* 4294967295 = 429496729*10 + 5 */
  ctx_free(&c);
}

Test(fold, u32_result_zero_extended) {
  Ctx c;
  ctx_init_xp(&c, SK_U32);
  /* 0 - 1 in u32 is 0xffffffff, stored zero-extended (not as -1) */
  Value *d = op2(&c, c.b, OP_SUB, sc(SK_U32), cint(&c, c.b, sc(SK_U32), 0), cint(&c, c.b, sc(SK_U32), 1));
  store(&c, c.b, param(&c, 1), d);
  ret(&c);
  pass_fold(c.f, &c.arena);
  cr_assert_eq(const_ival(d), 0xffffffffLL);
  ctx_free(&c);
}

Test(fold, int_division_by_zero_not_folded) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *q = op2(&c, c.b, OP_DIV, sc(SK_I32), cint(&c, c.b, sc(SK_I32), 7), cint(&c, c.b, sc(SK_I32), 0));
  Value *r = op2(&c, c.b, OP_REM, sc(SK_I32), cint(&c, c.b, sc(SK_I32), 7), cint(&c, c.b, sc(SK_I32), 0));
  store(&c, c.b, param(&c, 1), q);
  store(&c, c.b, param(&c, 1), r);
  ret(&c);
  cr_assert_not(pass_fold(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_DIV), 1);
  cr_assert_eq(count_ops(c.f, OP_REM), 1);
  ctx_free(&c);
}

Test(fold, int_min_div_minus_one_wraps) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *q = op2(&c, c.b, OP_DIV, sc(SK_I32), cint(&c, c.b, sc(SK_I32), INT32_MIN),
                 cint(&c, c.b, sc(SK_I32), -1));
  store(&c, c.b, param(&c, 1), q);
  ret(&c);
  cr_assert(pass_fold(c.f, &c.arena));
  cr_assert_eq(const_ival(q), INT32_MIN);
  ctx_free(&c);
}

Test(fold, float_division_by_zero_folds_to_inf) {
  Ctx c;
  ctx_init_xp(&c, SK_F32);
  Value *q = op2(&c, c.b, OP_DIV, sc(SK_F32), cflt(&c, c.b, sc(SK_F32), 1.0), cflt(&c, c.b, sc(SK_F32), -0.0));
  store(&c, c.b, param(&c, 1), q);
  ret(&c);
  cr_assert(pass_fold(c.f, &c.arena));
  cr_assert(isinf(const_fval(q)) && const_fval(q) < 0);
  ctx_free(&c);
}

Test(fold, f32_to_bf16_cast_rounds_exactly) {
  Ctx c;
  ctx_init_xp(&c, SK_BF16);
  /* bf16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 and
   * 1 + 2^-7 and goes to the even one, 1.0; 1 + 3*2^-8 is halfway between
   * 1 + 2^-7 and 1 + 2^-6 and goes to the even one, 1 + 2^-6 = 1.015625. */
  Value *a = op1(&c, c.b, OP_CAST, sc(SK_BF16), cflt(&c, c.b, sc(SK_F32), 1.00390625));
  Value *b = op1(&c, c.b, OP_CAST, sc(SK_BF16), cflt(&c, c.b, sc(SK_F32), 1.01171875));
  /* f32 max (2 - 2^-23) * 2^127 is above the bf16 overflow threshold
   * (2 - 2^-8) * 2^127, so it rounds to +inf. */
  Value *big = op1(&c, c.b, OP_CAST, sc(SK_BF16), cflt(&c, c.b, sc(SK_F32), 0x1.fffffep+127));
  store(&c, c.b, param(&c, 1), a);
  store(&c, c.b, param(&c, 1), b);
  store(&c, c.b, param(&c, 1), big);
  ret(&c);
  cr_assert(pass_fold(c.f, &c.arena));
  cr_assert_eq(bits_of(const_fval(a)), bits_of(1.0));
  cr_assert_eq(bits_of(const_fval(b)), bits_of(1.015625));
  cr_assert(isinf(const_fval(big)) && const_fval(big) > 0);
  cr_assert_eq(count_ops(c.f, OP_CAST), 0);
  ctx_free(&c);
}

Test(fold, f32_add_rounds_once) {
  Ctx c;
  ctx_init_xp(&c, SK_F32);
  /* 2^24 + 1 is not an f32: ties to even give 2^24 */
  Value *s = op2(&c, c.b, OP_ADD, sc(SK_F32), cflt(&c, c.b, sc(SK_F32), 16777216.0),
                 cflt(&c, c.b, sc(SK_F32), 1.0));
  store(&c, c.b, param(&c, 1), s);
  ret(&c);
  pass_fold(c.f, &c.arena);
  cr_assert_eq(const_fval(s), 16777216.0);
  ctx_free(&c);
}

Test(fold, float_to_int_cast_saturates_and_nan_is_zero) {
  Ctx c;
  ctx_init_xp(&c, SK_I8);
  Value *a = op1(&c, c.b, OP_CAST, sc(SK_I8), cflt(&c, c.b, sc(SK_F32), 300.5));
  Value *b = op1(&c, c.b, OP_CAST, sc(SK_I8), cflt(&c, c.b, sc(SK_F32), NAN));
  Value *d = op1(&c, c.b, OP_CAST, sc(SK_I8), cflt(&c, c.b, sc(SK_F32), -7.9));
  store(&c, c.b, param(&c, 1), a);
  store(&c, c.b, param(&c, 1), b);
  store(&c, c.b, param(&c, 1), d);
  ret(&c);
  pass_fold(c.f, &c.arena);
  cr_assert_eq(const_ival(a), 127);
  cr_assert_eq(const_ival(b), 0);
  cr_assert_eq(const_ival(d), -7);
  ctx_free(&c);
}

Test(fold, comparisons_follow_signedness) {
  TType types[2] = {sc(SK_I1), type_ptr(SK_I1)};
  Ctx c;
  ctx_init(&c, 2, types);
  /* as u8, 200 > 100; as i8 the same bits (-56) are < 100 */
  Value *u = op2(&c, c.b, OP_CMP_GT, sc(SK_I1), cint(&c, c.b, sc(SK_U8), 200), cint(&c, c.b, sc(SK_U8), 100));
  Value *s = op2(&c, c.b, OP_CMP_GT, sc(SK_I1), cint(&c, c.b, sc(SK_I8), -56), cint(&c, c.b, sc(SK_I8), 100));
  Value *n = op2(&c, c.b, OP_CMP_EQ, sc(SK_I1), cflt(&c, c.b, sc(SK_F32), NAN), cflt(&c, c.b, sc(SK_F32), NAN));
  store(&c, c.b, param(&c, 1), u);
  store(&c, c.b, param(&c, 1), s);
  store(&c, c.b, param(&c, 1), n);
  ret(&c);
  pass_fold(c.f, &c.arena);
  cr_assert_eq(const_ival(u), 1);
  cr_assert_eq(const_ival(s), 0);
  cr_assert_eq(const_ival(n), 0);
  ctx_free(&c);
}

Test(fold, chains_fold_in_one_walk_and_shifts_clamp) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *s = op2(&c, c.b, OP_ADD, sc(SK_I32), cint(&c, c.b, sc(SK_I32), 2), cint(&c, c.b, sc(SK_I32), 3));
  Value *m = op2(&c, c.b, OP_MUL, sc(SK_I32), s, cint(&c, c.b, sc(SK_I32), 4));
  Value *sh = op2(&c, c.b, OP_SHL, sc(SK_I32), m, cint(&c, c.b, sc(SK_I32), 40)); /* >= width: 0 */
  Value *sr = op2(&c, c.b, OP_SHR, sc(SK_I32), cint(&c, c.b, sc(SK_I32), -8), cint(&c, c.b, sc(SK_I32), 99));
  store(&c, c.b, param(&c, 1), m);
  store(&c, c.b, param(&c, 1), sh);
  store(&c, c.b, param(&c, 1), sr);
  ret(&c);
  cr_assert(pass_fold(c.f, &c.arena));
  cr_assert_eq(const_ival(m), 20);
  cr_assert_eq(const_ival(sh), 0);
  cr_assert_eq(const_ival(sr), -1); /* signed >> past the width: all sign bits */
  ctx_free(&c);
}

Test(fold, non_const_operand_not_folded) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *s = op2(&c, c.b, OP_ADD, sc(SK_I32), param(&c, 0), cint(&c, c.b, sc(SK_I32), 3));
  Value *l = load(&c, c.b, sc(SK_I32), param(&c, 1));
  store(&c, c.b, param(&c, 1), op2(&c, c.b, OP_ADD, sc(SK_I32), s, l));
  ret(&c);
  cr_assert_not(pass_fold(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_ADD), 2);
  ctx_free(&c);
}

Test(fold, shape_ops_of_splats) {
  TType types[2] = {sc(SK_F32), type_ptr(SK_F32)};
  Ctx c;
  ctx_init(&c, 2, types);
  Value *k = cflt(&c, c.b, sc(SK_F32), 2.5);
  Value *bc = op1(&c, c.b, OP_BROADCAST, t2(SK_F32, 4, 8), k);
  Op *tr = emit(&c, c.b, OP_TRANS, 1, (TType[]){t2(SK_F32, 8, 4)}, 1, bc, NULL, NULL);
  tr->attr[0] = 1 | (0 << 4);
  Value *rs = op1(&c, c.b, OP_RESHAPE, t1(SK_F32, 32), &tr->results[0]);
  Op *ex = emit(&c, c.b, OP_EXPAND_DIMS, 1, (TType[]){t2(SK_F32, 1, 32)}, 1, rs, NULL, NULL);
  Value *ptrs = op1(&c, c.b, OP_BROADCAST, ptr_tile(SK_F32, 2, (int32_t[]){1, 32}), param(&c, 1));
  store(&c, c.b, ptrs, &ex->results[0]);
  ret(&c);
  cr_assert(pass_fold(c.f, &c.arena));
  Value *v = stored(c.f);
  cr_assert_eq(const_fval(v), 2.5);
  cr_assert(type_eq(v->type, t2(SK_F32, 1, 32)));
  cr_assert_eq(count_ops(c.f, OP_TRANS) + count_ops(c.f, OP_RESHAPE) + count_ops(c.f, OP_EXPAND_DIMS), 0);
  cr_assert_eq(count_ops(c.f, OP_BROADCAST), 1, "the pointer broadcast stays");
  ctx_free(&c);
}

Test(fold, reductions_of_splats) {
  TType types[2] = {sc(SK_F32), type_ptr(SK_F32)};
  Ctx c;
  ctx_init(&c, 2, types);
  Value *fi = cint(&c, c.b, t2(SK_I32, 4, 8), 3);
  Op *isum = emit(&c, c.b, OP_REDUCE_SUM, 1, (TType[]){t1(SK_I32, 4)}, 1, fi, NULL, NULL);
  isum->attr[0] = 1; /* 8 copies of 3 */
  Value *ff = cflt(&c, c.b, t1(SK_F32, 8), 0.1f);
  Op *fsum = emit(&c, c.b, OP_REDUCE_SUM, 1, (TType[]){sc(SK_F32)}, 1, ff, NULL, NULL);
  Op *fmax = emit(&c, c.b, OP_REDUCE_MAX, 1, (TType[]){sc(SK_F32)}, 1, ff, NULL, NULL);
  Op *amax = emit(&c, c.b, OP_ARGMAX, 1, (TType[]){sc(SK_I32)}, 1, ff, NULL, NULL);
  Value *i8s = cint(&c, c.b, t1(SK_I8, 64), 4);
  Op *wsum = emit(&c, c.b, OP_REDUCE_SUM, 1, (TType[]){sc(SK_I8)}, 1, i8s, NULL, NULL);
  Op *users[] = {isum, fsum, fmax, amax, wsum};
  for (int i = 0; i < 5; i++) emit(&c, c.b, OP_STORE, 0, NULL, 2, param(&c, 1), &users[i]->results[0], NULL);
  ret(&c);
  pass_fold(c.f, &c.arena);
  cr_assert_eq(const_ival(&isum->results[0]), 24);
  cr_assert_eq(fsum->kind, OP_REDUCE_SUM, "float sums are not folded");
  cr_assert_eq(bits_of(const_fval(&fmax->results[0])), bits_of(0.1f));
  cr_assert_eq(const_ival(&amax->results[0]), 0);
  cr_assert_eq(const_ival(&wsum->results[0]), 0); /* 64*4 = 256 wraps to 0 in i8 */
  ctx_free(&c);
}

Test(fold, arange_of_one_element_and_select_fma) {
  TType types[2] = {sc(SK_F32), type_ptr(SK_F32)};
  Ctx c;
  ctx_init(&c, 2, types);
  Op *one = emit(&c, c.b, OP_ARANGE, 1, (TType[]){t1(SK_I32, 1)}, 0, NULL, NULL, NULL);
  one->attr[0] = 5;
  one->attr[1] = 6;
  Op *many = emit(&c, c.b, OP_ARANGE, 1, (TType[]){t1(SK_I32, 4)}, 0, NULL, NULL, NULL);
  many->attr[1] = 4;
  /* fma rounds once: 0.1f*10f+(-1f) is 2^-26 + 2^-27... not 0 */
  float tenth = 0.1f;
  Value *fm = op3(&c, c.b, OP_FMA, sc(SK_F32), cflt(&c, c.b, sc(SK_F32), tenth),
                  cflt(&c, c.b, sc(SK_F32), 10.0), cflt(&c, c.b, sc(SK_F32), -1.0));
  Value *sel = op3(&c, c.b, OP_SELECT, sc(SK_F32), cint(&c, c.b, sc(SK_I1), 0), fm,
                   cflt(&c, c.b, sc(SK_F32), 7.0));
  emit(&c, c.b, OP_STORE, 0, NULL, 2, param(&c, 1), &one->results[0], NULL);
  emit(&c, c.b, OP_STORE, 0, NULL, 2, param(&c, 1), &many->results[0], NULL);
  store(&c, c.b, param(&c, 1), fm);
  store(&c, c.b, param(&c, 1), sel);
  ret(&c);
  pass_fold(c.f, &c.arena);
  cr_assert_eq(const_ival(&one->results[0]), 5);
  cr_assert_eq(many->kind, OP_ARANGE);
  /* exact: 0.1f = 13421773 * 2^-27, times 10 = 134217730 * 2^-27
   * = 1 + 2 * 2^-27; minus 1 = 2^-26, representable in f32 */
  cr_assert_eq(const_fval(fm), 0x1p-26);
  cr_assert_eq(const_fval(sel), 7.0);
  ctx_free(&c);
}

Test(fold, single_op_entry_point) {
  Ctx c;
  ctx_init_xp(&c, SK_U8);
  Value *k = cint(&c, c.b, sc(SK_U8), 250);
  Value *s = op2(&c, c.b, OP_ADD, sc(SK_U8), k, cint(&c, c.b, sc(SK_U8), 10));
  cr_assert(fold_op(s->def));
  cr_assert_eq(const_ival(s), 4); /* 260 mod 256 */
  cr_assert_not(fold_op(s->def), "already a const");
  Value *t = op2(&c, c.b, OP_ADD, sc(SK_U8), k, param(&c, 0));
  cr_assert_not(fold_op(t->def));
  ctx_free(&c);
}

/* ---- canon ------------------------------------------------------------- */

Test(canon, integer_identities_disappear) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *x = param(&c, 0), *v = x;
  TType i32 = sc(SK_I32);
  v = op2(&c, c.b, OP_ADD, i32, v, cint(&c, c.b, i32, 0));
  v = op2(&c, c.b, OP_SUB, i32, v, cint(&c, c.b, i32, 0));
  v = op2(&c, c.b, OP_MUL, i32, v, cint(&c, c.b, i32, 1));
  v = op2(&c, c.b, OP_DIV, i32, v, cint(&c, c.b, i32, 1));
  v = op2(&c, c.b, OP_OR, i32, v, cint(&c, c.b, i32, 0));
  v = op2(&c, c.b, OP_AND, i32, v, cint(&c, c.b, i32, -1));
  v = op2(&c, c.b, OP_XOR, i32, v, cint(&c, c.b, i32, 0));
  v = op2(&c, c.b, OP_SHL, i32, v, cint(&c, c.b, i32, 0));
  v = op2(&c, c.b, OP_SHR, i32, v, cint(&c, c.b, i32, 0));
  v = op2(&c, c.b, OP_ADD, i32, cint(&c, c.b, i32, 0), v); /* 0 + x */
  v = op2(&c, c.b, OP_MAX, i32, v, v);
  store(&c, c.b, param(&c, 1), v);
  ret(&c);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(stored(c.f), x);
  cr_assert_eq(block_len(c.b) - count_in_block(c.b, OP_CONST), 2, "store and return left");
  ctx_free(&c);
}

Test(canon, integer_absorbing_constants) {
  Ctx c;
  ctx_init_xp(&c, SK_U16);
  TType u16 = sc(SK_U16);
  Value *zero = cint(&c, c.b, u16, 0), *ones = cint(&c, c.b, u16, 0xffff);
  Value *m = op2(&c, c.b, OP_MUL, u16, param(&c, 0), zero);
  Value *a = op2(&c, c.b, OP_AND, u16, param(&c, 0), zero);
  Value *o = op2(&c, c.b, OP_OR, u16, param(&c, 0), ones);
  store(&c, c.b, param(&c, 1), m);
  store(&c, c.b, param(&c, 1), a);
  store(&c, c.b, param(&c, 1), o);
  ret(&c);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(stored_nth(c.b, 0), zero);
  cr_assert_eq(stored_nth(c.b, 1), zero);
  cr_assert_eq(stored_nth(c.b, 2), ones);
  ctx_free(&c);
}

Test(canon, float_identities_only_where_exact) {
  Ctx c;
  ctx_init_xp(&c, SK_F32);
  TType f32 = sc(SK_F32);
  Value *x = param(&c, 0);
  Value *plus0 = op2(&c, c.b, OP_ADD, f32, x, cflt(&c, c.b, f32, 0.0));   /* -0+0 = +0: kept */
  Value *mul0 = op2(&c, c.b, OP_MUL, f32, x, cflt(&c, c.b, f32, 0.0));    /* NaN*0: kept */
  Value *plusm0 = op2(&c, c.b, OP_ADD, f32, x, cflt(&c, c.b, f32, -0.0)); /* exact */
  Value *minus0 = op2(&c, c.b, OP_SUB, f32, x, cflt(&c, c.b, f32, 0.0));  /* exact */
  Value *times1 = op2(&c, c.b, OP_MUL, f32, x, cflt(&c, c.b, f32, 1.0));  /* exact */
  Value *by1 = op2(&c, c.b, OP_DIV, f32, x, cflt(&c, c.b, f32, 1.0));     /* exact */
  Value *vals[] = {plus0, mul0, plusm0, minus0, times1, by1};
  for (int i = 0; i < 6; i++) store(&c, c.b, param(&c, 1), vals[i]);
  ret(&c);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(stored_nth(c.b, 0), plus0);
  cr_assert_eq(stored_nth(c.b, 1), mul0);
  for (int i = 2; i < 6; i++) cr_assert_eq(stored_nth(c.b, i), x, "store %d", i);
  ctx_free(&c);
}

Test(canon, commutative_const_goes_second) {
  Ctx c;
  ctx_init_xp(&c, SK_F32);
  TType f32 = sc(SK_F32);
  Value *k = cflt(&c, c.b, f32, 3.0);
  Value *m = op2(&c, c.b, OP_MUL, f32, k, param(&c, 0));
  Value *s = op2(&c, c.b, OP_SUB, f32, k, param(&c, 0)); /* not commutative */
  store(&c, c.b, param(&c, 1), m);
  store(&c, c.b, param(&c, 1), s);
  ret(&c);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(m->def->operands[0], param(&c, 0));
  cr_assert_eq(m->def->operands[1], k);
  cr_assert_eq(s->def->operands[0], k);
  ctx_free(&c);
}

Test(canon, select_negation_and_same_type_casts) {
  TType types[3] = {sc(SK_F32), sc(SK_I1), type_ptr(SK_F32)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType f32 = sc(SK_F32);
  Value *x = param(&c, 0), *cond = param(&c, 1), *p = param(&c, 2);
  Value *y = op2(&c, c.b, OP_ADD, f32, x, x);
  store(&c, c.b, p, op3(&c, c.b, OP_SELECT, f32, cint(&c, c.b, sc(SK_I1), 1), x, y));
  store(&c, c.b, p, op3(&c, c.b, OP_SELECT, f32, cint(&c, c.b, sc(SK_I1), 0), x, y));
  store(&c, c.b, p, op3(&c, c.b, OP_SELECT, f32, cond, y, y));
  store(&c, c.b, p, op1(&c, c.b, OP_NEG, f32, op1(&c, c.b, OP_NEG, f32, y)));
  store(&c, c.b, p, op1(&c, c.b, OP_CAST, f32, op1(&c, c.b, OP_BITCAST, f32, y)));
  store(&c, c.b, p, op1(&c, c.b, OP_BROADCAST, f32, y));
  Value *h = op1(&c, c.b, OP_CAST, sc(SK_F16), y); /* a real conversion stays */
  store(&c, c.b, p, op1(&c, c.b, OP_CAST, f32, h));
  ret(&c);
  cr_assert(pass_canon(c.f, &c.arena));
  Value *expect[] = {x, y, y, y, y, y};
  for (int i = 0; i < 6; i++) cr_assert_eq(stored_nth(c.b, i), expect[i], "store %d", i);
  cr_assert_eq(stored_nth(c.b, 6)->def->kind, OP_CAST);
  pass_dce(c.f, &c.arena); /* the inner neg is dead now */
  cr_assert_eq(count_ops(c.f, OP_SELECT) + count_ops(c.f, OP_NEG) + count_ops(c.f, OP_BITCAST), 0);
  cr_assert_eq(count_ops(c.f, OP_CAST), 2);
  ctx_free(&c);
}

Test(canon, expand_dims_reshape_chain_becomes_one_reshape) {
  TType types[2] = {t1(SK_F32, 16), type_ptr(SK_F32)};
  Ctx c;
  ctx_init(&c, 2, types);
  Value *x = param(&c, 0);
  Op *e1 = emit(&c, c.b, OP_EXPAND_DIMS, 1, (TType[]){t2(SK_F32, 1, 16)}, 1, x, NULL, NULL);
  Value *r1 = op1(&c, c.b, OP_RESHAPE, t2(SK_F32, 4, 4), &e1->results[0]);
  Op *e2 = emit(&c, c.b, OP_EXPAND_DIMS, 1, (TType[]){type_tile(SK_F32, 3, (int32_t[]){4, 1, 4})}, 1, r1,
                NULL, NULL);
  e2->attr[0] = 1;
  Value *back = op1(&c, c.b, OP_RESHAPE, t1(SK_F32, 16), &e2->results[0]);
  Value *ptrs = op1(&c, c.b, OP_BROADCAST, ptr_tile(SK_F32, 3, (int32_t[]){4, 1, 4}), param(&c, 1));
  store(&c, c.b, ptrs, &e2->results[0]);
  store(&c, c.b, param(&c, 1), back);
  ret(&c);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(e2->kind, OP_RESHAPE);
  cr_assert_eq(e2->operands[0], x, "the chain now starts at x");
  cr_assert_eq(e2->attr[0], 0);
  cr_assert_eq(stored_nth(c.b, 1), x, "reshape back to x's type is x");
  cr_assert(pass_dce(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_EXPAND_DIMS), 0);
  cr_assert_eq(count_ops(c.f, OP_RESHAPE), 1);
  ctx_free(&c);
}

Test(canon, self_comparisons_of_ints_only_and_rem_by_one) {
  TType types[3] = {sc(SK_I32), sc(SK_F32), type_ptr(SK_I1)};
  Ctx c;
  ctx_init(&c, 3, types);
  Value *i = param(&c, 0), *f = param(&c, 1);
  Value *eq = op2(&c, c.b, OP_CMP_EQ, sc(SK_I1), i, i);
  Value *lt = op2(&c, c.b, OP_CMP_LT, sc(SK_I1), i, i);
  Value *ge = op2(&c, c.b, OP_CMP_GE, sc(SK_I1), i, i);
  Value *feq = op2(&c, c.b, OP_CMP_EQ, sc(SK_I1), f, f); /* false for NaN: kept */
  Value *d = op2(&c, c.b, OP_SUB, sc(SK_I32), i, i);
  Value *r1 = op2(&c, c.b, OP_REM, sc(SK_I32), i, cint(&c, c.b, sc(SK_I32), 1));
  Value *r2 = op2(&c, c.b, OP_REM, sc(SK_I32), i, cint(&c, c.b, sc(SK_I32), 2)); /* kept */
  store(&c, c.b, param(&c, 2), op2(&c, c.b, OP_CMP_EQ, sc(SK_I1), r1, r2));
  Value *vals[] = {eq, lt, ge, feq};
  for (int k = 0; k < 4; k++) store(&c, c.b, param(&c, 2), vals[k]);
  store(&c, c.b, param(&c, 2), op2(&c, c.b, OP_CMP_EQ, sc(SK_I1), d, cint(&c, c.b, sc(SK_I32), 0)));
  ret(&c);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(const_ival(eq), 1);
  cr_assert_eq(const_ival(lt), 0);
  cr_assert_eq(const_ival(ge), 1);
  cr_assert_eq(feq->def->kind, OP_CMP_EQ);
  cr_assert_eq(const_ival(d), 0);
  cr_assert_eq(const_ival(r1), 0, "x % 1 is 0");
  cr_assert_eq(r2->def->kind, OP_REM);
  ctx_free(&c);
}

/* if %cond -> i32 { store p, 1; yield a } else { yield b } */
static Op *build_if(Ctx *c, Value *cond, Value **a_out, Value **b_out) {
  TType i32 = sc(SK_I32);
  Op *iff = emit_if(c, c->b, cond, 1, &i32);
  Block *then = &iff->regions[0], *els = &iff->regions[1];
  Value *a = op2(c, then, OP_ADD, i32, param(c, 0), cint(c, then, i32, 1));
  store(c, then, param(c, 1), a);
  yield(c, then, 1, &a);
  Value *b = op2(c, els, OP_MUL, i32, param(c, 0), cint(c, els, i32, 3));
  yield(c, els, 1, &b);
  store(c, c->b, param(c, 1), &iff->results[0]);
  ret(c);
  *a_out = a;
  *b_out = b;
  return iff;
}

Test(canon, if_with_true_condition_is_inlined) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *a, *b;
  build_if(&c, cint(&c, c.b, sc(SK_I1), 1), &a, &b);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_IF), 0);
  cr_assert_eq(count_ops(c.f, OP_MUL), 0);
  cr_assert_eq(count_in_block(c.b, OP_STORE), 2, "the then-branch store moved out");
  cr_assert_eq(c.b->last->prev->operands[1], a);
  cr_assert_eq(a->def->parent, c.b);
  ctx_free(&c);
}

Test(canon, if_with_false_condition_takes_else) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *a, *b;
  build_if(&c, cint(&c, c.b, sc(SK_I1), 0), &a, &b);
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_IF), 0);
  cr_assert_eq(count_ops(c.f, OP_STORE), 1);
  cr_assert_eq(stored(c.f), b);
  ctx_free(&c);
}

Test(canon, if_with_unknown_condition_stays) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I1)};
  Ctx c;
  ctx_init(&c, 3, types);
  Value *a, *b;
  build_if(&c, param(&c, 2), &a, &b);
  cr_assert_not(pass_canon(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_IF), 1);
  ctx_free(&c);
}

/* for i = lo to hi step st iter(acc = x) { store p, acc; yield acc + i } */
static Op *build_counting_for(Ctx *c, Value *lo, Value *hi, Value *st) {
  Value *x = param(c, 0);
  Op *loop = emit_for(c, c->b, lo, hi, st, 1, &x);
  Block *body = &loop->regions[0];
  store(c, body, param(c, 1), &body->args[1]);
  Value *n = op2(c, body, OP_ADD, sc(SK_I32), &body->args[1], &body->args[0]);
  yield(c, body, 1, &n);
  store(c, c->b, param(c, 1), &loop->results[0]);
  ret(c);
  return loop;
}

Test(canon, zero_trip_for_is_replaced_by_its_inits) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  TType i32 = sc(SK_I32);
  build_counting_for(&c, cint(&c, c.b, i32, 5), cint(&c, c.b, i32, 5), cint(&c, c.b, i32, 1));
  cr_assert(pass_canon(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_FOR), 0);
  cr_assert_eq(count_ops(c.f, OP_STORE), 1, "the body's store went with the loop");
  cr_assert_eq(stored(c.f), param(&c, 0));
  ctx_free(&c);
}

Test(canon, counting_down_zero_trip_and_nonzero_trips) {
  TType i32 = sc(SK_I32);
  struct {
    int lo, hi, step;
    bool zero;
  } cases[] = {{10, 20, -1, true}, {20, 10, -1, false}, {0, 10, 1, false},
               {10, 0, 1, true},   {0, 10, 0, false} /* step 0 left for the error */};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    Ctx c;
    ctx_init_xp(&c, SK_I32);
    build_counting_for(&c, cint(&c, c.b, i32, cases[k].lo), cint(&c, c.b, i32, cases[k].hi),
                       cint(&c, c.b, i32, cases[k].step));
    pass_canon(c.f, &c.arena);
    cr_assert_eq(count_ops(c.f, OP_FOR), cases[k].zero ? 0 : 1, "case %zu", k);
    ctx_free(&c);
  }
}

/* ---- cse --------------------------------------------------------------- */

Test(cse, merges_equal_pure_ops_including_swapped_commutative) {
  TType types[3] = {sc(SK_I32), sc(SK_I32), type_ptr(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *x = param(&c, 0), *y = param(&c, 1), *p = param(&c, 2);
  Value *a1 = op2(&c, c.b, OP_ADD, i32, x, y);
  Value *a2 = op2(&c, c.b, OP_ADD, i32, y, x);
  Value *s1 = op2(&c, c.b, OP_SUB, i32, x, y);
  Value *s2 = op2(&c, c.b, OP_SUB, i32, y, x); /* not the same */
  Value *m1 = op2(&c, c.b, OP_MUL, i32, a1, s1);
  Value *m2 = op2(&c, c.b, OP_MUL, i32, a2, s1); /* equal once a2 -> a1 */
  Value *vals[] = {m1, m2, s2};
  for (int i = 0; i < 3; i++) store(&c, c.b, p, vals[i]);
  ret(&c);
  cr_assert(pass_cse(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_ADD), 1);
  cr_assert_eq(count_ops(c.f, OP_SUB), 2);
  cr_assert_eq(count_ops(c.f, OP_MUL), 1);
  cr_assert_eq(stored_nth(c.b, 0), m1);
  cr_assert_eq(stored_nth(c.b, 1), m1);
  ctx_free(&c);
}

Test(cse, does_not_merge_loads) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *p = param(&c, 1);
  Value *l1 = load(&c, c.b, sc(SK_I32), p);
  store(&c, c.b, p, cint(&c, c.b, sc(SK_I32), 5));
  Value *l2 = load(&c, c.b, sc(SK_I32), p);
  store(&c, c.b, p, op2(&c, c.b, OP_ADD, sc(SK_I32), l1, l2));
  ret(&c);
  cr_assert_not(pass_cse(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_LOAD), 2);
  ctx_free(&c);
}

Test(cse, constants_compared_by_bits_and_type) {
  Ctx c;
  ctx_init_xp(&c, SK_F32);
  TType f32 = sc(SK_F32);
  Value *p = param(&c, 1);
  Value *vals[] = {cflt(&c, c.b, f32, 0.0),  cflt(&c, c.b, f32, -0.0), cflt(&c, c.b, f32, NAN),
                   cflt(&c, c.b, f32, NAN),  cflt(&c, c.b, f32, 0.0),  cflt(&c, c.b, t1(SK_F32, 4), 0.0),
                   cflt(&c, c.b, sc(SK_F64), 0.0)};
  for (int i = 0; i < 7; i++) store(&c, c.b, p, vals[i]);
  ret(&c);
  cr_assert(pass_cse(c.f, &c.arena));
  /* 0.0 twice and NaN twice merge; -0.0, f32[4] and f64 stay apart */
  cr_assert_eq(count_ops(c.f, OP_CONST), 5);
  Value *got[7];
  for (int i = 0; i < 7; i++) got[i] = stored_nth(c.b, i);
  cr_assert_eq(got[4], got[0]);
  cr_assert_eq(got[3], got[2]);
  cr_assert_neq(got[1], got[0]);
  cr_assert_neq(got[5], got[0]);
  cr_assert_neq(got[6], got[0]);
  ctx_free(&c);
}

Test(cse, attributes_distinguish_ops) {
  TType types[2] = {t2(SK_I32, 4, 4), type_ptr(SK_I32)};
  Ctx c;
  ctx_init(&c, 2, types);
  Op *r0 = emit(&c, c.b, OP_REDUCE_SUM, 1, (TType[]){t1(SK_I32, 4)}, 1, param(&c, 0), NULL, NULL);
  Op *r1 = emit(&c, c.b, OP_REDUCE_SUM, 1, (TType[]){t1(SK_I32, 4)}, 1, param(&c, 0), NULL, NULL);
  Op *r2 = emit(&c, c.b, OP_REDUCE_SUM, 1, (TType[]){t1(SK_I32, 4)}, 1, param(&c, 0), NULL, NULL);
  r1->attr[0] = 1;
  Value *a = op2(&c, c.b, OP_ADD, t1(SK_I32, 4), &r0->results[0], &r1->results[0]);
  Value *ptrs = op1(&c, c.b, OP_BROADCAST, ptr_tile(SK_I32, 1, (int32_t[]){4}), param(&c, 1));
  store(&c, c.b, ptrs, op2(&c, c.b, OP_ADD, t1(SK_I32, 4), a, &r2->results[0]));
  ret(&c);
  cr_assert(pass_cse(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_REDUCE_SUM), 2, "axis 0 twice merges, axis 1 stays");
  ctx_free(&c);
}

Test(cse, reuses_outer_ops_inside_regions_but_not_the_reverse) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I1)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *x = param(&c, 0), *p = param(&c, 1);
  Value *outer = op2(&c, c.b, OP_MUL, i32, x, x);
  Op *iff = emit_if(&c, c.b, param(&c, 2), 0, NULL);
  Block *then = &iff->regions[0], *els = &iff->regions[1];
  Value *inner = op2(&c, then, OP_MUL, i32, x, x);          /* = outer: merged */
  Value *then_only = op2(&c, then, OP_ADD, i32, x, x);      /* stays */
  store(&c, then, p, op2(&c, then, OP_SUB, i32, inner, then_only));
  yield(&c, then, 0, NULL);
  Value *else_add = op2(&c, els, OP_ADD, i32, x, x);        /* sibling region: stays */
  store(&c, els, p, else_add);
  yield(&c, els, 0, NULL);
  Value *after = op2(&c, c.b, OP_ADD, i32, x, x);           /* after the if: stays */
  store(&c, c.b, p, op2(&c, c.b, OP_ADD, i32, after, outer));
  ret(&c);
  cr_assert(pass_cse(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_MUL), 1);
  cr_assert_eq(count_in_block(then, OP_MUL), 0);
  cr_assert_eq(first_op(c.f, OP_SUB)->operands[0], outer);
  cr_assert_eq(count_in_block(then, OP_ADD), 1);
  cr_assert_eq(count_in_block(els, OP_ADD), 1);
  cr_assert_eq(count_in_block(c.b, OP_ADD), 2, "x+x after the if and the final add");
  ctx_free(&c);
}

Test(cse, inside_loop_bodies_and_nested_loops) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  TType i32 = sc(SK_I32);
  Value *x = param(&c, 0), *p = param(&c, 1);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Op *outer = emit_for(&c, c.b, k0, k8, k1, 0, NULL);
  Block *ob = &outer->regions[0];
  Value *t1v = op2(&c, ob, OP_ADD, i32, x, &ob->args[0]);
  Op *inner = emit_for(&c, ob, k0, k8, k1, 0, NULL);
  Block *ib = &inner->regions[0];
  Value *t2v = op2(&c, ib, OP_ADD, i32, x, &ob->args[0]); /* = t1v */
  Value *k8b = cint(&c, ib, i32, 8);                          /* = k8 */
  store(&c, ib, p, op2(&c, ib, OP_MUL, i32, t2v, k8b));
  yield(&c, ib, 0, NULL);
  store(&c, ob, p, t1v);
  yield(&c, ob, 0, NULL);
  ret(&c);
  cr_assert(pass_cse(c.f, &c.arena));
  cr_assert_eq(count_in_block(ib, OP_ADD), 0);
  cr_assert_eq(count_in_block(ib, OP_CONST), 0);
  cr_assert_eq(first_op(c.f, OP_MUL)->operands[0], t1v);
  cr_assert_eq(first_op(c.f, OP_MUL)->operands[1], k8);
  ctx_free(&c);
}

/* ---- dce --------------------------------------------------------------- */

Test(dce, removes_unused_pure_ops_and_loads_keeps_stores) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  TType i32 = sc(SK_I32);
  Value *p = param(&c, 1);
  Value *l = load(&c, c.b, i32, p);
  Value *a = op2(&c, c.b, OP_ADD, i32, l, cint(&c, c.b, i32, 1));
  op2(&c, c.b, OP_MUL, i32, a, a); /* dead, and so are a, l and the const */
  store(&c, c.b, p, param(&c, 0));
  Op *at = emit(&c, c.b, OP_ATOMIC_ADD, 1, &i32, 2, p, param(&c, 0), NULL); /* result unused */
  ret(&c);
  cr_assert(pass_dce(c.f, &c.arena));
  cr_assert_eq(block_len(c.b), 3);
  cr_assert_eq(c.b->first->kind, OP_STORE);
  cr_assert_eq(c.b->first->next, at);
  cr_assert_not(pass_dce(c.f, &c.arena));
  ctx_free(&c);
}

Test(dce, keeps_while_loops_with_unused_results) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  Value *x = param(&c, 0);
  Op *w = emit_while(&c, c.b, 1, &x);
  Block *cond = &w->regions[0], *body = &w->regions[1];
  Value *t = op2(&c, cond, OP_CMP_NE, sc(SK_I1), &cond->args[0], cint(&c, cond, sc(SK_I32), 0));
  yield(&c, cond, 1, &t);
  Value *n = op2(&c, body, OP_SUB, sc(SK_I32), &body->args[0], cint(&c, body, sc(SK_I32), 1));
  op2(&c, body, OP_MUL, sc(SK_I32), n, n); /* dead inside the while */
  yield(&c, body, 1, &n);
  ret(&c);
  cr_assert(pass_dce(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_WHILE), 1);
  cr_assert_eq(count_ops(c.f, OP_MUL), 0);
  cr_assert_eq(count_ops(c.f, OP_SUB), 1);
  ctx_free(&c);
}

Test(dce, removes_effect_free_loops_keeps_loops_that_store) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I1)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  /* loop 1: sums into an unused result, no effects: removed whole */
  Value *x = param(&c, 0);
  Op *l1 = emit_for(&c, c.b, k0, k8, k1, 1, &x);
  Block *b1 = &l1->regions[0];
  Value *s = op2(&c, b1, OP_ADD, i32, &b1->args[1], load(&c, b1, i32, param(&c, 1)));
  yield(&c, b1, 1, &s);
  /* loop 2: a store inside an if inside: kept */
  Op *l2 = emit_for(&c, c.b, k0, k8, k1, 0, NULL);
  Block *b2 = &l2->regions[0];
  Op *iff = emit_if(&c, b2, param(&c, 2), 0, NULL);
  store(&c, &iff->regions[0], param(&c, 1), &b2->args[0]);
  yield(&c, &iff->regions[0], 0, NULL);
  yield(&c, &iff->regions[1], 0, NULL);
  yield(&c, b2, 0, NULL);
  /* an if without effects and unused results: removed */
  Op *if2 = emit_if(&c, c.b, param(&c, 2), 1, &i32);
  yield(&c, &if2->regions[0], 1, &k1);
  yield(&c, &if2->regions[1], 1, &k8);
  ret(&c);
  cr_assert(pass_dce(c.f, &c.arena));
  cr_assert_eq(count_ops(c.f, OP_FOR), 1);
  cr_assert_eq(c.b->first->next->next->next, l2, "consts then loop 2");
  cr_assert_eq(count_ops(c.f, OP_IF), 1);
  cr_assert_eq(count_ops(c.f, OP_LOAD), 0);
  ctx_free(&c);
}

Test(dce, drops_pass_through_iter_arg) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_F32)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Value *inits[3] = {param(&c, 0), param(&c, 2), param(&c, 0)};
  Op *loop = emit_for(&c, c.b, k0, k8, k1, 3, inits);
  Block *b = &loop->regions[0];
  /* iter 0: acc + iv (used after); iter 1: passed through (unused);
   * iter 2: stored in the body, result unused: must stay */
  Value *acc = op2(&c, b, OP_ADD, i32, &b->args[1], &b->args[0]);
  store(&c, b, param(&c, 1), &b->args[3]);
  Value *ys[3] = {acc, &b->args[2], &b->args[3]};
  yield(&c, b, 3, ys);
  store(&c, c.b, param(&c, 1), &loop->results[0]);
  ret(&c);
  cr_assert(pass_dce(c.f, &c.arena));
  assert_text(c.f,
              "kernel @k(%x: i32, %p: *i32, %y: f32) {\n"
              "  %0 = const 0 : i32\n"
              "  %1 = const 8 : i32\n"
              "  %2 = const 1 : i32\n"
              "  %3, %4 = for %5 = %0 to %1 step %2 iter(%6 = %x, %7 = %x) {\n"
              "    %8 = add %6, %5 : i32\n"
              "    store %p, %7\n"
              "    yield %8, %7\n"
              "  }\n"
              "  store %p, %3\n"
              "  return\n"
              "}\n");
  cr_assert_eq(loop->results[1].index, 1);
  cr_assert_eq(b->args[2].index, 2);
  cr_assert_eq(b->args[2].owner, b);
  ctx_free(&c);
}

Test(dce, drops_dead_accumulators_including_mutual_ones) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Value *x = param(&c, 0), *p = param(&c, 1);
  Value *inits[3] = {x, x, x};
  Op *loop = emit_for(&c, c.b, k0, k8, k1, 3, inits);
  Block *b = &loop->regions[0];
  /* a' = a + b; b' = b * 2 (both unused after); c' = c + 1 is stored */
  Value *a = op2(&c, b, OP_ADD, i32, &b->args[1], &b->args[2]);
  Value *bb = op2(&c, b, OP_MUL, i32, &b->args[2], cint(&c, b, i32, 2));
  Value *cc = op2(&c, b, OP_ADD, i32, &b->args[3], k1);
  store(&c, b, p, cc);
  Value *ys[3] = {a, bb, cc};
  yield(&c, b, 3, ys);
  ret(&c);
  cr_assert(pass_dce(c.f, &c.arena));
  cr_assert_eq(loop->nresults, 1);
  cr_assert_eq(loop->noperands, 4);
  cr_assert_eq(b->nargs, 2);
  cr_assert_eq(count_in_block(b, OP_MUL), 0);
  cr_assert_eq(count_in_block(b, OP_ADD), 1);
  cr_assert_eq(b->last->noperands, 1);
  cr_assert_eq(b->last->operands[0], cc);
  cr_assert_eq(cc->def->operands[0], &b->args[1], "the body now uses the new arg");
  ctx_free(&c);
}

Test(dce, keeps_iter_arg_that_reaches_a_store_or_another_result) {
  Ctx c;
  ctx_init_xp(&c, SK_I32);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Value *x = param(&c, 0), *p = param(&c, 1);
  Value *inits[2] = {x, x};
  Op *loop = emit_for(&c, c.b, k0, k8, k1, 2, inits);
  Block *b = &loop->regions[0];
  /* iter 0 (unused result) flows into iter 1's yield; iter 1 is used */
  Value *a = op2(&c, b, OP_ADD, i32, &b->args[1], k1);
  Value *s = op2(&c, b, OP_ADD, i32, &b->args[2], a);
  Value *ys[2] = {a, s};
  yield(&c, b, 2, ys);
  store(&c, c.b, p, &loop->results[1]);
  ret(&c);
  cr_assert_not(pass_dce(c.f, &c.arena));
  cr_assert_eq(loop->nresults, 2);
  ctx_free(&c);
}

/* ---- licm -------------------------------------------------------------- */

Test(licm, hoists_invariant_chains_keeps_iv_and_iter_arg_users) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Value *x = param(&c, 0), *y = param(&c, 2), *p = param(&c, 1);
  Op *loop = emit_for(&c, c.b, k0, k8, k1, 1, &x);
  Block *b = &loop->regions[0];
  Value *t = op2(&c, b, OP_MUL, i32, x, y);             /* invariant */
  Value *u = op2(&c, b, OP_ADD, i32, t, cint(&c, b, i32, 3)); /* invariant chain */
  Value *v = op2(&c, b, OP_ADD, i32, u, &b->args[0]);    /* uses iv */
  Value *w = op2(&c, b, OP_ADD, i32, &b->args[1], u);    /* uses iter arg */
  Value *l = load(&c, b, i32, p);                        /* load: stays */
  store(&c, b, p, op2(&c, b, OP_ADD, i32, v, l));
  yield(&c, b, 1, &w);
  ret(&c);
  cr_assert(pass_licm(c.f, &c.arena));
  cr_assert_eq(t->def->parent, c.b);
  cr_assert_eq(u->def->parent, c.b);
  cr_assert_eq(v->def->parent, b);
  cr_assert_eq(w->def->parent, b);
  cr_assert_eq(l->def->parent, b);
  cr_assert_eq(count_in_block(b, OP_CONST), 0, "the const moved with its user");
  cr_assert_eq(loop->prev, u->def, "hoisted in order, right before the loop");
  cr_assert_not(pass_licm(c.f, &c.arena));
  ctx_free(&c);
}

Test(licm, integer_division_moves_only_by_nonzero_constants) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Value *x = param(&c, 0), *y = param(&c, 2), *p = param(&c, 1);
  Value *k4 = cint(&c, c.b, i32, 4);
  Value *xf = op1(&c, c.b, OP_CAST, sc(SK_F32), x), *f0 = cflt(&c, c.b, sc(SK_F32), 0.0);
  Op *loop = emit_for(&c, c.b, k0, k8, k1, 0, NULL);
  Block *b = &loop->regions[0];
  Value *by_param = op2(&c, b, OP_DIV, i32, x, y);
  Value *rem_param = op2(&c, b, OP_REM, i32, x, y);
  Value *by_four = op2(&c, b, OP_DIV, i32, x, k4);
  Value *by_zero = op2(&c, b, OP_DIV, i32, x, k0);
  Value *fdiv = op2(&c, b, OP_DIV, sc(SK_F32), xf, f0);
  Value *vals[] = {by_param, rem_param, by_four, by_zero};
  for (int i = 0; i < 4; i++) store(&c, b, p, vals[i]);
  store(&c, b, p, op1(&c, b, OP_CAST, i32, fdiv));
  yield(&c, b, 0, NULL);
  ret(&c);
  cr_assert(pass_licm(c.f, &c.arena));
  cr_assert_eq(by_param->def->parent, b);
  cr_assert_eq(rem_param->def->parent, b);
  cr_assert_eq(by_four->def->parent, c.b);
  cr_assert_eq(by_zero->def->parent, b);
  cr_assert_eq(fdiv->def->parent, c.b, "float division cannot trap");
  ctx_free(&c);
}

Test(licm, nested_loops_hoist_from_the_inside_out) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Value *x = param(&c, 0), *y = param(&c, 2), *p = param(&c, 1);
  Op *outer = emit_for(&c, c.b, k0, k8, k1, 0, NULL);
  Block *ob = &outer->regions[0];
  Op *inner = emit_for(&c, ob, k0, k8, k1, 0, NULL);
  Block *ib = &inner->regions[0];
  Value *both = op2(&c, ib, OP_MUL, i32, x, y);               /* out of both */
  Value *outer_dep = op2(&c, ib, OP_ADD, i32, both, &ob->args[0]); /* to the outer body */
  Value *inner_dep = op2(&c, ib, OP_ADD, i32, outer_dep, &ib->args[0]); /* stays */
  store(&c, ib, p, inner_dep);
  yield(&c, ib, 0, NULL);
  yield(&c, ob, 0, NULL);
  ret(&c);
  cr_assert(pass_licm(c.f, &c.arena));
  cr_assert_eq(both->def->parent, c.b);
  cr_assert_eq(outer_dep->def->parent, ob);
  cr_assert_eq(outer_dep->def->next, inner);
  cr_assert_eq(inner_dep->def->parent, ib);
  ctx_free(&c);
}

Test(licm, while_regions) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *x = param(&c, 0), *y = param(&c, 2);
  Op *w = emit_while(&c, c.b, 1, &x);
  Block *cond = &w->regions[0], *body = &w->regions[1];
  Value *lim = op2(&c, cond, OP_MUL, i32, y, y); /* invariant in the condition */
  Value *t = op2(&c, cond, OP_CMP_LT, sc(SK_I1), &cond->args[0], lim);
  yield(&c, cond, 1, &t);
  Value *step = op2(&c, body, OP_ADD, i32, y, y);          /* invariant in the body */
  Value *n = op2(&c, body, OP_ADD, i32, &body->args[0], step);
  yield(&c, body, 1, &n);
  store(&c, c.b, param(&c, 1), &w->results[0]);
  ret(&c);
  cr_assert(pass_licm(c.f, &c.arena));
  cr_assert_eq(lim->def->parent, c.b);
  cr_assert_eq(step->def->parent, c.b);
  cr_assert_eq(t->def->parent, cond);
  cr_assert_eq(n->def->parent, body);
  ctx_free(&c);
}

Test(licm, ops_in_an_if_inside_a_loop_stay) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I1)};
  Ctx c;
  ctx_init(&c, 3, types);
  TType i32 = sc(SK_I32);
  Value *k0 = cint(&c, c.b, i32, 0), *k8 = cint(&c, c.b, i32, 8), *k1 = cint(&c, c.b, i32, 1);
  Op *loop = emit_for(&c, c.b, k0, k8, k1, 0, NULL);
  Block *b = &loop->regions[0];
  Op *iff = emit_if(&c, b, param(&c, 2), 0, NULL);
  Value *m = op2(&c, &iff->regions[0], OP_MUL, i32, param(&c, 0), param(&c, 0));
  store(&c, &iff->regions[0], param(&c, 1), m);
  yield(&c, &iff->regions[0], 0, NULL);
  yield(&c, &iff->regions[1], 0, NULL);
  yield(&c, b, 0, NULL);
  ret(&c);
  cr_assert_not(pass_licm(c.f, &c.arena));
  cr_assert_eq(m->def->parent, &iff->regions[0]);
  ctx_free(&c);
}

/* ---- pipeline ---------------------------------------------------------- */

/* Pass runs a HookLog records, and the room for one pass name. */
#define HOOK_LOG_MAX 64
#define HOOK_NAME_MAX 16

typedef struct HookLog {
  char names[HOOK_LOG_MAX][HOOK_NAME_MAX];
  int n;
} HookLog;

static void log_pass(const char *pass, const Func *f, bool changed, void *user) {
  (void)f;
  (void)changed;
  HookLog *log = user;
  if (log->n < HOOK_LOG_MAX) snprintf(log->names[log->n++], sizeof log->names[0], "%s", pass);
}

/* for i in 0..n { store p + ..., (x * (2 + 3)) + 0 }: everything folds,
 * the multiply leaves the loop, the dead add disappears. */
static Op *build_pipeline_kernel(Ctx *c) {
  TType i32 = sc(SK_I32);
  Value *x = param(c, 0), *p = param(c, 1);
  Value *k0 = cint(c, c->b, i32, 0), *k1 = cint(c, c->b, i32, 1);
  Op *loop = emit_for(c, c->b, k0, param(c, 2), k1, 0, NULL);
  Block *b = &loop->regions[0];
  Value *five = op2(c, b, OP_ADD, i32, cint(c, b, i32, 2), cint(c, b, i32, 3));
  Value *m = op2(c, b, OP_MUL, i32, five, x);
  Value *z = op2(c, b, OP_ADD, i32, m, cint(c, b, i32, 0));
  op2(c, b, OP_SUB, i32, z, &b->args[0]); /* dead */
  store(c, b, p, op2(c, b, OP_ADD, i32, z, &b->args[0]));
  yield(c, b, 0, NULL);
  ret(c);
  return loop;
}

Test(pipeline, optimizes_and_reports_each_pass) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  build_pipeline_kernel(&c);
  HookLog log = {.n = 0};
  PassOptions opt = {.after_pass = log_pass, .user = &log};
  cr_assert(passes_run(c.m, &opt));
  assert_text(c.f,
              "kernel @k(%x: i32, %p: *i32, %y: i32) {\n"
              "  %0 = const 0 : i32\n"
              "  %1 = const 1 : i32\n"
              "  %2 = const 5 : i32\n"
              "  %3 = mul %x, %2 : i32\n"
              "  for %4 = %0 to %y step %1 {\n"
              "    %5 = add %3, %4 : i32\n"
              "    store %p, %5\n"
              "    yield\n"
              "  }\n"
              "  return\n"
              "}\n");
  cr_assert_geq(log.n, 6);
  cr_assert_str_eq(log.names[0], "fold");
  cr_assert_str_eq(log.names[1], "canon");
  cr_assert_str_eq(log.names[log.n - 1], "dce");
  ctx_free(&c);
}

Test(pipeline, no_opt_leaves_the_function_alone) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  build_pipeline_kernel(&c);
  char *before = dump(c.f);
  HookLog log = {.n = 0};
  PassOptions opt = {.no_opt = true, .after_pass = log_pass, .user = &log};
  cr_assert(passes_run(c.m, &opt));
  assert_text(c.f, before);
  cr_assert_eq(log.n, 0);
  free(before);
  ctx_free(&c);
}

Test(pipeline, null_options_mean_defaults) {
  TType types[3] = {sc(SK_I32), type_ptr(SK_I32), sc(SK_I32)};
  Ctx c;
  ctx_init(&c, 3, types);
  build_pipeline_kernel(&c);
  cr_assert(passes_run(c.m, NULL));
  cr_assert_eq(count_ops(c.f, OP_SUB), 0);
  cr_assert_eq(count_ops(c.f, OP_MUL), 1);
  ctx_free(&c);
}
