/* test_ir_text.c - tests of the tile IR's textual form (print.c, parse.c)
 * and of the verifier (verify.c).
 *
 * Round trips: functions built with the builder API print, parse back and
 * print to the identical text, and verify.  Rejections: hand-written texts
 * that the parser must refuse with an exact message and line:col, and
 * malformed functions (parsed or built in memory) that the verifier must
 * refuse with an exact message.  Robustness: random mutations and every
 * prefix of a valid text go through the parser (under ASan/UBSan) without
 * crashing.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/ir/ir.h"

/* ---- helpers ------------------------------------------------------------ */

/* Builds ops into one block; locations count lines up from *line (no
 * locations when line is NULL). */
typedef struct Build {
  Arena *arena;
  Block *block;
  uint32_t *line;
} Build;

static SrcLoc next_loc(Build *b) {
  if (!b->line) return (SrcLoc){0, 0, 0};
  return (SrcLoc){(*b->line)++, 3, 0};
}

static TType T(ScalarKind k) { return type_scalar(k); }
static TType T1(ScalarKind k, int32_t d0) { return type_tile(k, 1, (int32_t[]){d0}); }
static TType T2(ScalarKind k, int32_t d0, int32_t d1) { return type_tile(k, 2, (int32_t[]){d0, d1}); }
static TType T3(ScalarKind k, int32_t d0, int32_t d1, int32_t d2) {
  return type_tile(k, 3, (int32_t[]){d0, d1, d2});
}
static TType P(ScalarKind k) { return type_ptr(k); }
static TType P1(ScalarKind k, int32_t d0) { return type_with_shape(type_ptr(k), 1, (int32_t[]){d0}); }
static TType DESC(ScalarKind k, int rank) {
  TType t = type_scalar(SK_DESC);
  t.pointee = (uint8_t)k;
  t.desc_rank = (uint8_t)rank;
  return t;
}

#define OPS(...) (int)(sizeof((Value *[]){__VA_ARGS__}) / sizeof(Value *)), (Value *[]){__VA_ARGS__}
#define NO_OPS 0, NULL

static Op *emit_op(Build *b, OpKind kind, int nops, Value *const *ops, int nres, const TType *types) {
  Op *op = ir_op_make(b->arena, kind, nops, ops, nres, types, next_loc(b));
  ir_append(b->block, op);
  return op;
}

static Value *emit(Build *b, OpKind kind, TType t, int nops, Value *const *ops) {
  return &emit_op(b, kind, nops, ops, 1, &t)->results[0];
}

static Value *emit_attr(Build *b, OpKind kind, TType t, int64_t attr, int nops, Value *const *ops) {
  Op *op = emit_op(b, kind, nops, ops, 1, &t);
  op->attr[0] = attr;
  return &op->results[0];
}

static Value *const_int(Build *b, TType t, int64_t v) {
  Op *op = emit_op(b, OP_CONST, 0, NULL, 1, &t);
  op->attr[0] = v;
  return &op->results[0];
}

static Value *const_float(Build *b, TType t, double v) {
  Op *op = emit_op(b, OP_CONST, 0, NULL, 1, &t);
  op->fattr = v;
  return &op->results[0];
}

static void emit_void(Build *b, OpKind kind, int nops, Value *const *ops) {
  emit_op(b, kind, nops, ops, 0, NULL);
}

/* A control op with regions; result types are the given types. */
static Op *emit_region_op(Build *b, OpKind kind, int nops, Value *const *ops, int nres,
                          const TType *types, int nregions) {
  Op *op = ir_op_new(b->arena, kind, nops, nres, types, nregions, next_loc(b));
  for (int i = 0; i < nops; i++) op->operands[i] = ops[i];
  ir_append(b->block, op);
  return op;
}

static Build sub_build(Build *b, Block *block) { return (Build){b->arena, block, b->line}; }

/* for lo..hi step st with iter values; *body receives a builder of the
 * body (args: iv, iters). */
static Op *emit_for(Build *b, Value *lo, Value *hi, Value *st, int n, Value *const *inits, Build *body) {
  Value *ops[16] = {lo, hi, st};
  TType types[16];
  types[0] = lo->type;
  for (int i = 0; i < n; i++) ops[3 + i] = inits[i], types[1 + i] = inits[i]->type;
  Op *op = emit_region_op(b, OP_FOR, 3 + n, ops, n, types + 1, 1);
  ir_block_set_args(b->arena, &op->regions[0], n + 1, types);
  *body = sub_build(b, &op->regions[0]);
  return op;
}

static Func *new_kernel(Module *m, const char *name, int n, const TType *types,
                        const char *const *names, Build *b, uint32_t *line) {
  Func *f = ir_func_new(m, name, n, types, line ? (SrcLoc){(*line)++, 1, 0} : (SrcLoc){0, 0, 0});
  for (int i = 0; i < n; i++) f->params[i].name = names[i];
  *b = (Build){m->arena, &f->body, line};
  return f;
}

static char *print_module(const Module *m) {
  StrBuf sb;
  sb_init(&sb);
  ir_print_module(m, &sb);
  return sb_take(&sb);
}

/* A parse with its own diagnostics; `src` must outlive `diags`. */
typedef struct Parsed {
  Arena arena;
  Source src;
  Diags diags;
  Module *m;
} Parsed;

static void parse_into(Parsed *p, const char *text, size_t len) {
  arena_init(&p->arena);
  p->src = (Source){"test.ir", text, len, 0};
  diags_init(&p->diags, &p->arena, &p->src);
  p->m = ir_parse(&p->arena, &p->src, &p->diags);
}

static char *render(const Diags *d) {
  StrBuf sb;
  sb_init(&sb);
  diags_render_all(d, &sb);
  return sb_take(&sb);
}

/* print -> parse -> print is the identity, and both modules verify. */
static void check_round_trip(const Module *m) {
  Arena arena;
  arena_init(&arena);
  Diags d;
  diags_init(&d, &arena, NULL);
  bool ok = ir_verify_module(m, &d);
  char *msgs = render(&d);
  cr_assert(ok, "built module does not verify:\n%s", msgs);
  free(msgs);
  char *text = print_module(m);
  Parsed p;
  parse_into(&p, text, strlen(text));
  msgs = render(&p.diags);
  cr_assert_not_null(p.m, "printed text does not parse:\n%s\n%s", msgs, text);
  free(msgs);
  char *again = print_module(p.m);
  cr_assert_str_eq(again, text);
  ok = ir_verify_module(p.m, &p.diags);
  msgs = render(&p.diags);
  cr_assert(ok, "parsed module does not verify:\n%s", msgs);
  free(msgs);
  free(again);
  free(text);
  arena_free(&p.arena);
  arena_free(&arena);
}

/* The text parses and prints back to itself. */
static void check_text_identity(const char *text) {
  Parsed p;
  parse_into(&p, text, strlen(text));
  char *msgs = render(&p.diags);
  cr_assert_not_null(p.m, "text does not parse:\n%s", msgs);
  free(msgs);
  char *again = print_module(p.m);
  cr_assert_str_eq(again, text);
  cr_assert(ir_verify_module(p.m, &p.diags));
  free(again);
  arena_free(&p.arena);
}

static void expect_parse_error(const char *text, uint32_t line, uint32_t col, const char *msg) {
  Parsed p;
  parse_into(&p, text, strlen(text));
  cr_assert_null(p.m, "accepted: %s", text);
  cr_assert_eq(p.diags.count, 1);
  cr_assert_str_eq(p.diags.items[0].msg, msg);
  cr_assert_eq(p.diags.items[0].loc.line, line, "line %u, expected %u (%s)",
               p.diags.items[0].loc.line, line, msg);
  cr_assert_eq(p.diags.items[0].loc.col, col, "col %u, expected %u (%s)",
               p.diags.items[0].loc.col, col, msg);
  arena_free(&p.arena);
}

/* Kernel text around body lines: the first body line is line 4. */
static char *kernel_text(const char *params, const char *body) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "module \"t.tile\"\n\nkernel @k(%s) {\n%s}\n", params, body);
  return sb_take(&sb);
}

static void expect_body_parse_error(const char *params, const char *body, uint32_t line,
                                    uint32_t col, const char *msg) {
  char *text = kernel_text(params, body);
  expect_parse_error(text, line, col, msg);
  free(text);
}

/* Text that parses but fails verification with `msg` (first error) at the
 * op's @line:col. */
static void expect_verify_error(const char *params, const char *body, uint32_t line, uint32_t col,
                                const char *msg) {
  char *text = kernel_text(params, body);
  Parsed p;
  parse_into(&p, text, strlen(text));
  char *msgs = render(&p.diags);
  cr_assert_not_null(p.m, "does not parse:\n%s\n%s", msgs, text);
  free(msgs);
  cr_assert(!ir_verify_module(p.m, &p.diags), "verifier accepted:\n%s", text);
  cr_assert_geq(p.diags.count, 1);
  cr_assert_str_eq(p.diags.items[0].msg, msg);
  cr_assert_eq(p.diags.items[0].loc.line, line, "line %u (%s)", p.diags.items[0].loc.line, msg);
  cr_assert_eq(p.diags.items[0].loc.col, col, "col %u (%s)", p.diags.items[0].loc.col, msg);
  arena_free(&p.arena);
  free(text);
}

static void expect_verify_ok(const char *params, const char *body) {
  char *text = kernel_text(params, body);
  Parsed p;
  parse_into(&p, text, strlen(text));
  cr_assert_not_null(p.m, "does not parse: %s", text);
  bool ok = ir_verify_module(p.m, &p.diags);
  char *msgs = render(&p.diags);
  cr_assert(ok, "rejected:\n%s\n%s", msgs, text);
  free(msgs);
  arena_free(&p.arena);
  free(text);
}

/* Verifies an in-memory function and checks the first message. */
static void expect_func_error(const Func *f, const char *msg) {
  Arena arena;
  arena_init(&arena);
  Diags d;
  diags_init(&d, &arena, NULL);
  cr_assert(!ir_verify_func(f, &d));
  cr_assert_geq(d.count, 1);
  cr_assert_str_eq(d.items[0].msg, msg);
  arena_free(&arena);
}

/* ---- modules built with the builder API --------------------------------- */

static void build_softmax(Module *m, uint32_t *line) {
  Build b;
  TType params[] = {P(SK_F32), P(SK_F32), T(SK_I32), T(SK_I32)};
  const char *names[] = {"out", "x", "n", "stride"};
  Func *f = new_kernel(m, "softmax", 4, params, names, &b, line);
  f->params[0].align = 16;
  f->params[2].multiple_of = 16;
  f->warps = 4;
  f->ws = (WarpSpec){1, 2, 40, 232};
  ConstInfo *c = ARENA_ARRAY(m->arena, ConstInfo, 4);
  c[0] = (ConstInfo){"BLOCK", T(SK_I32), 1024, 0, 0};
  c[1] = (ConstInfo){"T", T(SK_TYPE), 0, 0, SK_F32};
  c[2] = (ConstInfo){"EPS", T(SK_F32), 0, 1e-05, 0};
  c[3] = (ConstInfo){"CAUSAL", T(SK_I1), 1, 0, 0};
  f->consts = c;
  f->nconsts = 4;
  Value *out = &f->body.args[0], *x = &f->body.args[1], *n = &f->body.args[2];
  Value *stride = &f->body.args[3];
  Value *pid = emit_attr(&b, OP_PROGRAM_ID, T(SK_I32), 0, NO_OPS);
  Value *row = emit(&b, OP_MUL, T(SK_I32), OPS(pid, stride));
  Value *base = emit(&b, OP_PTR_ADD, P(SK_F32), OPS(x, row));
  Op *ar = emit_op(&b, OP_ARANGE, 0, NULL, 1, (TType[]){T1(SK_I32, 1024)});
  ar->attr[1] = 1024;
  Value *cols = &ar->results[0];
  Value *bases = emit(&b, OP_BROADCAST, P1(SK_F32, 1024), OPS(base));
  Value *ptrs = emit(&b, OP_PTR_ADD, P1(SK_F32, 1024), OPS(bases, cols));
  Value *nn = emit(&b, OP_BROADCAST, T1(SK_I32, 1024), OPS(n));
  Value *mask = emit(&b, OP_CMP_LT, T1(SK_I1, 1024), OPS(cols, nn));
  Value *ninf = const_float(&b, T1(SK_F32, 1024), -INFINITY);
  Value *xs = emit(&b, OP_LOAD, T1(SK_F32, 1024), OPS(ptrs, mask, ninf));
  Value *mx = emit_attr(&b, OP_REDUCE_MAX, T(SK_F32), 0, OPS(xs));
  Value *mxs = emit(&b, OP_BROADCAST, T1(SK_F32, 1024), OPS(mx));
  Value *sh = emit(&b, OP_SUB, T1(SK_F32, 1024), OPS(xs, mxs));
  Value *e = emit(&b, OP_EXP, T1(SK_F32, 1024), OPS(sh));
  Value *sum = emit_attr(&b, OP_REDUCE_SUM, T(SK_F32), 0, OPS(e));
  Value *sums = emit(&b, OP_BROADCAST, T1(SK_F32, 1024), OPS(sum));
  Value *y = emit(&b, OP_DIV, T1(SK_F32, 1024), OPS(e, sums));
  Value *obase = emit(&b, OP_PTR_ADD, P(SK_F32), OPS(out, row));
  Value *obases = emit(&b, OP_BROADCAST, P1(SK_F32, 1024), OPS(obase));
  Value *optrs = emit(&b, OP_PTR_ADD, P1(SK_F32, 1024), OPS(obases, cols));
  emit_void(&b, OP_STORE, OPS(optrs, y, mask));
  emit_void(&b, OP_RETURN, NO_OPS);
}

/* for i in lo..hi with two iter values, stages = 3. */
static void build_for_loop(Module *m, uint32_t *line) {
  Build b, body;
  TType params[] = {T(SK_I32), P(SK_F32)};
  const char *names[] = {"n", "p"};
  Func *f = new_kernel(m, "loop", 2, params, names, &b, line);
  Value *n = &f->body.args[0], *p = &f->body.args[1];
  Value *zero = const_int(&b, T(SK_I32), 0);
  Value *one = const_int(&b, T(SK_I32), 1);
  Value *acc0 = const_float(&b, T1(SK_F32, 64), 0.0);
  Value *cnt0 = const_int(&b, T(SK_I64), -5);
  Op *loop = emit_for(&b, zero, n, one, 2, (Value *[]){acc0, cnt0}, &body);
  loop->attr[0] = 3;
  Value *iv = &loop->regions[0].args[0], *acc = &loop->regions[0].args[1];
  Value *cnt = &loop->regions[0].args[2];
  Value *ivs = emit(&body, OP_CAST, T(SK_F32), OPS(iv));
  Value *ivt = emit(&body, OP_BROADCAST, T1(SK_F32, 64), OPS(ivs));
  Value *acc2 = emit(&body, OP_ADD, T1(SK_F32, 64), OPS(acc, ivt));
  Value *one64 = const_int(&body, T(SK_I64), 1);
  Value *cnt2 = emit(&body, OP_ADD, T(SK_I64), OPS(cnt, one64));
  emit_void(&body, OP_YIELD, OPS(acc2, cnt2));
  Value *ps = emit(&b, OP_BROADCAST, P1(SK_F32, 64), OPS(p));
  emit_void(&b, OP_STORE, OPS(ps, &loop->results[0]));
  emit_void(&b, OP_RETURN, NO_OPS);
}

/* An if with results inside a for, and an if without results. */
static void build_nested_if(Module *m, uint32_t *line) {
  Build b, body, then_b, else_b;
  TType params[] = {T(SK_I32), T(SK_I1)};
  const char *names[] = {"n", "flag"};
  Func *f = new_kernel(m, "nested", 2, params, names, &b, line);
  Value *n = &f->body.args[0], *flag = &f->body.args[1];
  Value *zero = const_int(&b, T(SK_I32), 0);
  Value *one = const_int(&b, T(SK_I32), 1);
  Value *x0 = const_float(&b, T(SK_F16), 0.5);
  Op *loop = emit_for(&b, zero, n, one, 1, (Value *[]){x0}, &body);
  Value *iv = &loop->regions[0].args[0], *x = &loop->regions[0].args[1];
  Value *two = const_int(&body, T(SK_I32), 2);
  Value *r = emit(&body, OP_REM, T(SK_I32), OPS(iv, two));
  Value *even = emit(&body, OP_CMP_EQ, T(SK_I1), OPS(r, zero));
  Op *cond = emit_region_op(&body, OP_IF, OPS(even), 2, (TType[]){T(SK_F16), T(SK_I32)}, 2);
  then_b = sub_build(&body, &cond->regions[0]);
  else_b = sub_build(&body, &cond->regions[1]);
  Value *dbl = emit(&then_b, OP_ADD, T(SK_F16), OPS(x, x));
  emit_void(&then_b, OP_YIELD, OPS(dbl, iv));
  Value *ng = emit(&else_b, OP_NEG, T(SK_F16), OPS(x));
  emit_void(&else_b, OP_YIELD, OPS(ng, two));
  emit_void(&body, OP_YIELD, OPS(&cond->results[0]));
  Op *side = emit_region_op(&b, OP_IF, OPS(flag), 0, NULL, 2);
  then_b = sub_build(&b, &side->regions[0]);
  else_b = sub_build(&b, &side->regions[1]);
  emit_void(&then_b, OP_YIELD, NO_OPS);
  emit_void(&else_b, OP_YIELD, NO_OPS);
  emit_void(&b, OP_RETURN, NO_OPS);
}

/* while (i < n) i = i * 2, with a second carried value. */
static void build_while(Module *m, uint32_t *line) {
  Build b;
  TType params[] = {T(SK_U32)};
  const char *names[] = {"n"};
  Func *f = new_kernel(m, "grow", 1, params, names, &b, line);
  Value *n = &f->body.args[0];
  Value *i0 = const_int(&b, T(SK_U32), 1);
  Value *s0 = const_float(&b, T(SK_F64), 0.1);
  TType types[] = {T(SK_U32), T(SK_F64)};
  Op *w = emit_region_op(&b, OP_WHILE, OPS(i0, s0), 2, types, 2);
  ir_block_set_args(m->arena, &w->regions[0], 2, types);
  ir_block_set_args(m->arena, &w->regions[1], 2, types);
  Build before = sub_build(&b, &w->regions[0]), after = sub_build(&b, &w->regions[1]);
  Value *c = emit(&before, OP_CMP_LT, T(SK_I1), OPS(&w->regions[0].args[0], n));
  emit_void(&before, OP_YIELD, OPS(c));
  Value *two = const_int(&after, T(SK_U32), 2);
  Value *i2 = emit(&after, OP_MUL, T(SK_U32), OPS(&w->regions[1].args[0], two));
  Value *s2 = emit(&after, OP_SQRT, T(SK_F64), OPS(&w->regions[1].args[1]));
  emit_void(&after, OP_YIELD, OPS(i2, s2));
  emit_void(&b, OP_RETURN, NO_OPS);
}

/* dot with trans of the right operand, a batched dot and a rank-3 trans. */
static void build_dot(Module *m, uint32_t *line) {
  Build b;
  Func *f = new_kernel(m, "mm", 0, NULL, NULL, &b, line);
  (void)f;
  Value *a = const_float(&b, T2(SK_BF16, 16, 32), 1.0);
  Value *bt = const_float(&b, T2(SK_BF16, 16, 32), 2.0);
  Value *bb = emit_attr(&b, OP_TRANS, T2(SK_BF16, 32, 16), 1 | (0 << 4), OPS(bt));
  Value *acc = const_float(&b, T2(SK_F32, 16, 16), 0.0);
  Value *c = emit(&b, OP_DOT, T2(SK_F32, 16, 16), OPS(a, bb, acc));
  Value *x3 = const_float(&b, T3(SK_F16, 2, 16, 32), 3.0);
  Value *y3 = emit_attr(&b, OP_TRANS, T3(SK_F16, 32, 2, 16), 2 | (0 << 4) | (1 << 8), OPS(x3));
  Value *a8 = const_int(&b, T3(SK_I8, 2, 16, 32), -1);
  Value *b8 = const_int(&b, T3(SK_I8, 2, 32, 16), 1);
  Value *acc32 = const_int(&b, T3(SK_I32, 2, 16, 16), 0);
  emit(&b, OP_DOT, T3(SK_I32, 2, 16, 16), OPS(a8, b8, acc32));
  (void)c;
  (void)y3;
  emit_void(&b, OP_RETURN, NO_OPS);
}

/* Constants of every element type and ConstInfo of every kind. */
static void build_consts(Module *m, uint32_t *line) {
  Build b;
  Func *f = new_kernel(m, "consts", 0, NULL, NULL, &b, line);
  const_int(&b, T(SK_I1), 1);
  const_int(&b, T1(SK_I1, 4), 0);
  const_int(&b, T(SK_I8), -128);
  const_int(&b, T(SK_I16), 32767);
  const_int(&b, T(SK_I32), INT32_MIN);
  const_int(&b, T(SK_I64), INT64_MIN);
  const_int(&b, T(SK_I64), INT64_MAX);
  const_int(&b, T(SK_U8), 255);
  const_int(&b, T(SK_U16), 65535);
  const_int(&b, T(SK_U32), UINT32_MAX);
  const_int(&b, T(SK_U64), (int64_t)UINT64_MAX);
  const_float(&b, T(SK_F32), -INFINITY);
  const_float(&b, T(SK_F32), INFINITY);
  const_float(&b, T(SK_F64), NAN);
  const_float(&b, T(SK_F32), 1e-05);
  const_float(&b, T(SK_F64), 0.1);
  const_float(&b, T(SK_F64), -0.0);
  const_float(&b, T(SK_F64), 0.0);
  const_float(&b, T(SK_F64), 1.0);
  const_float(&b, T(SK_F64), 100.0);
  const_float(&b, T(SK_F64), 1024.0);
  const_float(&b, T(SK_F64), 5e-324);
  const_float(&b, T(SK_F64), 1.7976931348623157e308);
  const_float(&b, T(SK_F64), 1.0 / 3.0);
  const_float(&b, T(SK_F16), 65504.0);
  const_float(&b, T(SK_BF16), -2.5);
  const_float(&b, T(SK_F8E4M3), 448.0);
  const_float(&b, T(SK_F8E5M2), 0.0078125);
  emit_void(&b, OP_RETURN, NO_OPS);
  ConstInfo *c = ARENA_ARRAY(m->arena, ConstInfo, 8);
  c[0] = (ConstInfo){"A", T(SK_I8), -128, 0, 0};
  c[1] = (ConstInfo){"B", T(SK_U64), (int64_t)UINT64_MAX, 0, 0};
  c[2] = (ConstInfo){"C", T(SK_I1), 0, 0, 0};
  c[3] = (ConstInfo){"D", T(SK_F64), 0, NAN, 0};
  c[4] = (ConstInfo){"E", T(SK_F32), 0, -INFINITY, 0};
  c[5] = (ConstInfo){"F", T(SK_TYPE), 0, 0, SK_BF16};
  c[6] = (ConstInfo){"G", T(SK_F16), 0, 1.0, 0};
  c[7] = (ConstInfo){"H_2", T(SK_I64), INT64_MIN, 0, 0};
  f->consts = c;
  f->nconsts = 8;
}

/* Tensor descriptor parameter with block_load / block_store. */
static void build_desc(Module *m, uint32_t *line) {
  Build b;
  TType params[] = {DESC(SK_BF16, 2), DESC(SK_F32, 1)};
  const char *names[] = {"a", "out"};
  Func *f = new_kernel(m, "tma", 2, params, names, &b, line);
  Value *a = &f->body.args[0], *out = &f->body.args[1];
  Value *pid = emit_attr(&b, OP_PROGRAM_ID, T(SK_I32), 1, NO_OPS);
  Value *np = emit_attr(&b, OP_NUM_PROGRAMS, T(SK_I32), 2, NO_OPS);
  Value *tile = emit(&b, OP_BLOCK_LOAD, T2(SK_BF16, 64, 32), OPS(a, pid, np));
  Value *wide = emit(&b, OP_CAST, T2(SK_F32, 64, 32), OPS(tile));
  Value *row = emit_attr(&b, OP_REDUCE_SUM, T1(SK_F32, 64), 1, OPS(wide));
  emit_void(&b, OP_BLOCK_STORE, OPS(out, row, pid));
  emit_void(&b, OP_RETURN, NO_OPS);
}

/* Atomics, masks and the remaining elementwise and shape ops. */
static void build_misc(Module *m, uint32_t *line) {
  Build b;
  TType params[] = {P(SK_I32), P(SK_F32)};
  const char *names[] = {"ip", "_fp9"};
  Func *f = new_kernel(m, "misc", 2, params, names, &b, line);
  Value *ip = &f->body.args[0], *fp = &f->body.args[1];
  Op *ar = emit_op(&b, OP_ARANGE, 0, NULL, 1, (TType[]){T1(SK_I32, 8)});
  ar->attr[0] = -4;
  ar->attr[1] = 4;
  Value *idx = &ar->results[0];
  Value *ips = emit(&b, OP_BROADCAST, P1(SK_I32, 8), OPS(ip));
  Value *ptrs = emit(&b, OP_PTR_ADD, P1(SK_I32, 8), OPS(ips, idx));
  Value *zero = const_int(&b, T1(SK_I32, 8), 0);
  Value *mask = emit(&b, OP_CMP_GE, T1(SK_I1, 8), OPS(idx, zero));
  Value *nm = emit(&b, OP_NOT, T1(SK_I1, 8), OPS(mask));
  Value *old = emit(&b, OP_ATOMIC_ADD, T1(SK_I32, 8), OPS(ptrs, idx, mask));
  Value *cas = emit(&b, OP_ATOMIC_CAS, T1(SK_I32, 8), OPS(ptrs, old, idx, nm));
  Value *xch = emit(&b, OP_ATOMIC_XCHG, T1(SK_I32, 8), OPS(ptrs, cas));
  Value *sl = emit(&b, OP_SHL, T1(SK_I32, 8), OPS(xch, idx));
  Value *fl = emit(&b, OP_BITCAST, T1(SK_F32, 8), OPS(sl));
  Value *fm = emit(&b, OP_FMA, T1(SK_F32, 8), OPS(fl, fl, fl));
  Value *sel = emit(&b, OP_SELECT, T1(SK_F32, 8), OPS(mask, fm, fl));
  Value *r2 = emit(&b, OP_RESHAPE, T2(SK_F32, 2, 4), OPS(sel));
  Value *e3 = emit_attr(&b, OP_EXPAND_DIMS, T3(SK_F32, 2, 1, 4), 1, OPS(r2));
  Value *am = emit_attr(&b, OP_ARGMAX, T2(SK_I32, 2, 1), 2, OPS(e3));
  (void)am;
  Value *pi = emit(&b, OP_CAST, T(SK_I64), OPS(fp));
  Value *pp = emit(&b, OP_CAST, P(SK_F32), OPS(pi));
  Value *pb = emit(&b, OP_CAST, P(SK_BF16), OPS(pp));
  Value *v = emit(&b, OP_LOAD, T(SK_BF16), OPS(pb));
  emit_void(&b, OP_STORE, OPS(pb, v));
  emit_void(&b, OP_RETURN, NO_OPS);
}

static Module *new_module(Arena *arena, const char *name) {
  arena_init(arena);
  return ir_module_new(arena, name);
}

/* ---- round trips ---------------------------------------------------------- */

Test(ir_text, softmax_round_trip) {
  Arena a;
  Module *m = new_module(&a, "softmax.tile");
  uint32_t line = 1;
  build_softmax(m, &line);
  check_round_trip(m);
  arena_free(&a);
}

Test(ir_text, for_loop_round_trip) {
  Arena a;
  Module *m = new_module(&a, "loop.tile");
  uint32_t line = 1;
  build_for_loop(m, &line);
  check_round_trip(m);
  arena_free(&a);
}

Test(ir_text, nested_if_round_trip) {
  Arena a;
  Module *m = new_module(&a, "nested.tile");
  uint32_t line = 10;
  build_nested_if(m, &line);
  check_round_trip(m);
  arena_free(&a);
}

Test(ir_text, while_round_trip) {
  Arena a;
  Module *m = new_module(&a, "w.tile");
  build_while(m, NULL); /* no locations at all */
  check_round_trip(m);
  arena_free(&a);
}

Test(ir_text, dot_trans_round_trip) {
  Arena a;
  Module *m = new_module(&a, "mm.tile");
  uint32_t line = 1;
  build_dot(m, &line);
  check_round_trip(m);
  arena_free(&a);
}

Test(ir_text, consts_round_trip) {
  Arena a;
  Module *m = new_module(&a, "c.tile");
  uint32_t line = 1;
  build_consts(m, &line);
  check_round_trip(m);
  char *text = print_module(m);
  cr_assert(strstr(text, "%2 = const -128 : i8 @4:3\n"));
  cr_assert(strstr(text, "%10 = const 18446744073709551615 : u64 @12:3\n"));
  cr_assert(strstr(text, "%11 = const -inf : f32 @13:3\n"));
  cr_assert(strstr(text, "%13 = const nan : f64 @15:3\n"));
  cr_assert(strstr(text, "%14 = const 1e-05 : f32 @16:3\n"));
  cr_assert(strstr(text, "%16 = const -0.0 : f64 @18:3\n"));
  cr_assert(strstr(text, "%18 = const 1.0 : f64 @20:3\n"));
  cr_assert(strstr(text, "%19 = const 1e+02 : f64 @21:3\n"));
  cr_assert(strstr(text, "%20 = const 1024.0 : f64 @22:3\n"));
  cr_assert(strstr(text, "%21 = const 5e-324 : f64 @23:3\n"));
  cr_assert(strstr(text, "%23 = const 0.3333333333333333 : f64 @25:3\n"));
  cr_assert(strstr(text, "%0 = const true : i1 @2:3\n"));
  cr_assert(strstr(text, "%1 = const false : i1[4] @3:3\n"));
  cr_assert(strstr(text, "consts(A: i8 = -128, B: u64 = 18446744073709551615, C: i1 = false, "
                         "D: f64 = nan, E: f32 = -inf, F: type = bf16, G: f16 = 1.0, "
                         "H_2: i64 = -9223372036854775808) @1:1 {\n"),
            "%s", text);
  free(text);
  arena_free(&a);
}

Test(ir_text, desc_round_trip) {
  Arena a;
  Module *m = new_module(&a, "tma.tile");
  uint32_t line = 1;
  build_desc(m, &line);
  check_round_trip(m);
  char *text = print_module(m);
  cr_assert(strstr(text, "kernel @tma(%a: tensor<bf16, 2>, %out: tensor<f32, 1>) @1:1 {\n"), "%s", text);
  cr_assert(strstr(text, "  %2 = block_load %a, %0, %1 : bf16[64, 32] @4:3\n"), "%s", text);
  free(text);
  arena_free(&a);
}

Test(ir_text, misc_round_trip) {
  Arena a;
  Module *m = new_module(&a, "misc.tile");
  uint32_t line = 1;
  build_misc(m, &line);
  check_round_trip(m);
  arena_free(&a);
}

Test(ir_text, module_of_many_kernels_round_trip) {
  Arena a;
  Module *m = new_module(&a, "dir\\sub \"quoted\".tile");
  uint32_t line = 1;
  build_softmax(m, &line);
  build_for_loop(m, NULL);
  build_nested_if(m, &line);
  build_while(m, &line);
  build_dot(m, NULL);
  build_consts(m, &line);
  build_desc(m, &line);
  build_misc(m, &line);
  check_round_trip(m);
  char *text = print_module(m);
  const char *head = "module \"dir\\\\sub \\\"quoted\\\".tile\"\n\nkernel @softmax(";
  cr_assert(strncmp(text, head, strlen(head)) == 0, "%s", text);
  free(text);
  arena_free(&a);
}

/* The exact text of control flow (pins the format). */
static const char *const golden_control =
    "module \"g.tile\"\n"
    "\n"
    "kernel @g(%n: i32 multiple_of(16), %p: *f32 align(16) multiple_of(2)) warps(8) @1:1 {\n"
    "  %0 = const 0 : i32 @2:3\n"
    "  %1 = const 1 : i32 @3:3\n"
    "  %2 = const 0.0 : f32[64] @4:3\n"
    "  %3, %4 = for %5 = %0 to %n step %1 iter(%6 = %2, %7 = %0) {stages = 3, consumers = 2} @5:3 {\n"
    "    %8 = cmp_eq %5, %1 : i1 @6:5\n"
    "    %9 = if %8 -> i32 @7:5 {\n"
    "      yield %5 @8:7\n"
    "    } else {\n"
    "      yield %7 @9:7\n"
    "    }\n"
    "    yield %6, %9 @10:5\n"
    "  }\n"
    "  for %10 = %0 to %n step %1 {\n"
    "    yield\n"
    "  }\n"
    "  %11, %12 = while (%13 = %4, %14 = %3) @11:3 {\n"
    "    %15 = cmp_lt %13, %n : i1 @12:5\n"
    "    yield %15 @13:5\n"
    "  } do (%16, %17) {\n"
    "    %18 = add %16, %1 : i32 @14:5\n"
    "    %19 = trans %17 {perm = [0]} : f32[64]\n"
    "    yield %18, %19 @15:5\n"
    "  }\n"
    "  %20 = expand_dims %12 {axis = 0} : f32[1, 64]\n"
    "  %21 = trans %20 {perm = [1, 0]} : f32[64, 1]\n"
    "  %22 = reduce_max %21 {axis = 1} : f32[64]\n"
    "  %23 = broadcast %p : *f32[64]\n"
    "  store %23, %22 @16:3\n"
    "  return @17:1\n"
    "}\n"
    "\n"
    "kernel @empty() {\n"
    "  while () {\n"
    "    %0 = const false : i1\n"
    "    yield %0\n"
    "  } do () {\n"
    "    yield\n"
    "  }\n"
    "  return\n"
    "}\n";

Test(ir_text, golden_control_flow_text) { check_text_identity(golden_control); }

Test(ir_text, golden_softmax_text) {
  Arena a;
  Module *m = new_module(&a, "softmax.tile");
  uint32_t line = 1;
  build_softmax(m, &line);
  char *text = print_module(m);
  const char *want =
      "module \"softmax.tile\"\n"
      "\n"
      "kernel @softmax(%out: *f32 align(16), %x: *f32, %n: i32 multiple_of(16), %stride: i32) "
      "consts(BLOCK: i32 = 1024, T: type = f32, EPS: f32 = 1e-05, CAUSAL: i1 = true) warps(4) "
      "warp_specialize(1, 2, 40, 232) @1:1 {\n"
      "  %0 = program_id {axis = 0} : i32 @2:3\n"
      "  %1 = mul %0, %stride : i32 @3:3\n"
      "  %2 = ptr_add %x, %1 : *f32 @4:3\n"
      "  %3 = arange {start = 0, end = 1024} : i32[1024] @5:3\n"
      "  %4 = broadcast %2 : *f32[1024] @6:3\n"
      "  %5 = ptr_add %4, %3 : *f32[1024] @7:3\n"
      "  %6 = broadcast %n : i32[1024] @8:3\n"
      "  %7 = cmp_lt %3, %6 : i1[1024] @9:3\n"
      "  %8 = const -inf : f32[1024] @10:3\n"
      "  %9 = load %5, %7, %8 : f32[1024] @11:3\n"
      "  %10 = reduce_max %9 {axis = 0} : f32 @12:3\n"
      "  %11 = broadcast %10 : f32[1024] @13:3\n"
      "  %12 = sub %9, %11 : f32[1024] @14:3\n"
      "  %13 = exp %12 : f32[1024] @15:3\n"
      "  %14 = reduce_sum %13 {axis = 0} : f32 @16:3\n"
      "  %15 = broadcast %14 : f32[1024] @17:3\n"
      "  %16 = div %13, %15 : f32[1024] @18:3\n"
      "  %17 = ptr_add %out, %1 : *f32 @19:3\n"
      "  %18 = broadcast %17 : *f32[1024] @20:3\n"
      "  %19 = ptr_add %18, %3 : *f32[1024] @21:3\n"
      "  store %19, %16, %7 @22:3\n"
      "  return @23:3\n"
      "}\n";
  cr_assert_str_eq(text, want);
  free(text);
  arena_free(&a);
}

Test(ir_text, parser_accepts_blank_lines_and_spacing) {
  const char *text = "\nmodule   \"x\"\n\n\n\nkernel @k( %a :  i32 )  {\n\n  return\n\n}\n\n";
  Parsed p;
  parse_into(&p, text, strlen(text));
  cr_assert_not_null(p.m);
  char *again = print_module(p.m);
  cr_assert_str_eq(again, "module \"x\"\n\nkernel @k(%a: i32) {\n  return\n}\n");
  free(again);
  arena_free(&p.arena);
}

Test(ir_text, parser_accepts_text_without_final_newline) {
  const char *text = "module \"x\"\n\nkernel @k() {\n  return\n}";
  Parsed p;
  parse_into(&p, text, strlen(text));
  cr_assert_not_null(p.m);
  arena_free(&p.arena);
}

Test(ir_text, empty_module) { check_text_identity("module \"\"\n"); }

/* ---- parse errors --------------------------------------------------------- */

Test(ir_parse_errors, undefined_value) {
  expect_body_parse_error("", "  %1 = add %0, %0 : f32\n  return\n", 4, 12, "undefined value %0");
}

Test(ir_parse_errors, undefined_param_name) {
  expect_body_parse_error("%a: i32", "  %1 = add %a, %b : i32\n  return\n", 4, 16,
                          "undefined value %b");
}

Test(ir_parse_errors, redefinition) {
  expect_body_parse_error("", "  %0 = const 1 : i32\n  %0 = const 2 : i32\n  return\n", 5, 3,
                          "redefinition of value %0");
}

Test(ir_parse_errors, redefinition_of_param) {
  expect_parse_error("module \"t\"\n\nkernel @k(%a: i32, %a: f32) {\n  return\n}\n", 3, 20,
                     "redefinition of value %a");
}

Test(ir_parse_errors, redefinition_in_region_of_outer_value) {
  expect_body_parse_error("%n: i32",
                          "  %0 = const 0 : i32\n"
                          "  for %0 = %0 to %n step %0 {\n"
                          "    yield\n"
                          "  }\n"
                          "  return\n",
                          5, 7, "redefinition of value %0");
}

Test(ir_parse_errors, use_after_region_scope) {
  expect_body_parse_error("%n: i32",
                          "  %0 = const 0 : i32\n"
                          "  for %1 = %0 to %n step %n {\n"
                          "    %2 = add %1, %1 : i32\n"
                          "    yield\n"
                          "  }\n"
                          "  %3 = add %2, %2 : i32\n"
                          "  return\n",
                          9, 12, "undefined value %2");
}

Test(ir_parse_errors, use_before_definition) {
  expect_body_parse_error("", "  %0 = add %1, %1 : i32\n  %1 = const 0 : i32\n  return\n", 4, 12,
                          "undefined value %1");
}

Test(ir_parse_errors, self_use) {
  expect_body_parse_error("", "  %0 = neg %0 : i32\n  return\n", 4, 12, "undefined value %0");
}

Test(ir_parse_errors, unknown_op) {
  expect_body_parse_error("", "  %0 = frobnicate : i32\n  return\n", 4, 8, "unknown op 'frobnicate'");
}

Test(ir_parse_errors, bad_type_name) {
  expect_body_parse_error("", "  %0 = const 1 : f33\n  return\n", 4, 18, "unknown type 'f33'");
}

Test(ir_parse_errors, bad_type_syntax) {
  expect_body_parse_error("", "  %0 = const 1 : i32[4,]\n  return\n", 4, 24,
                          "expected an integer, found ']'");
}

Test(ir_parse_errors, too_many_dimensions) {
  expect_body_parse_error("", "  %0 = const 1 : i32[1, 1, 1, 1, 2]\n  return\n", 4, 34,
                          "too many dimensions (limit 4)");
}

Test(ir_parse_errors, bad_descriptor_rank) {
  expect_parse_error("module \"t\"\n\nkernel @k(%d: tensor<f32, 5>) {\n  return\n}\n", 3, 27,
                     "integer out of range (1..4)");
}

Test(ir_parse_errors, missing_close_brace) {
  expect_parse_error("module \"t\"\n\nkernel @k() {\n  return\n", 5, 1,
                     "unexpected end of input (missing '}')");
}

Test(ir_parse_errors, missing_close_brace_of_region) {
  expect_body_parse_error("%c: i1", "  if %c {\n    yield\n  } else {\n    yield\n  return\n", 10, 1,
                          "unexpected end of input (missing '}')");
}

Test(ir_parse_errors, wrong_operand_count) {
  expect_body_parse_error("%a: i32", "  %0 = add %a : i32\n  return\n", 4, 8,
                          "add expects 2 operands, got 1");
}

Test(ir_parse_errors, wrong_result_count) {
  expect_body_parse_error("%p: *f32, %v: f32", "  %0 = store %p, %v : f32\n  return\n", 4, 8,
                          "store expects 0 results, got 1");
}

Test(ir_parse_errors, missing_result) {
  expect_body_parse_error("%a: i32", "  neg %a\n  return\n", 4, 3, "neg expects 1 result, got 0");
}

Test(ir_parse_errors, junk_after_op) {
  expect_body_parse_error("", "  return junk\n}\n", 4, 10, "expected end of line, found 'junk'");
}

Test(ir_parse_errors, junk_after_location) {
  expect_body_parse_error("", "  %0 = const 1 : i32 @3:4 ,\n  return\n", 4, 27,
                          "expected end of line, found ','");
}

Test(ir_parse_errors, unterminated_string) {
  expect_parse_error("module \"abc\n\nkernel @k() {\n  return\n}\n", 1, 8, "unterminated string");
}

Test(ir_parse_errors, bad_string_escape) {
  expect_parse_error("module \"a\\qb\"\n", 1, 10, "invalid escape in string");
}

Test(ir_parse_errors, missing_terminator) {
  expect_body_parse_error("", "  %0 = const 1 : i32\n", 5, 1,
                          "block does not end with a terminator (yield or return)");
}

Test(ir_parse_errors, trailing_garbage) {
  expect_parse_error("module \"t\"\n\nkernel @k() {\n  return\n}\ngarbage\n", 6, 1,
                     "expected 'kernel' or end of input, found 'garbage'");
}

Test(ir_parse_errors, missing_module_header) {
  expect_parse_error("kernel @k() {\n  return\n}\n", 1, 1, "expected 'module', found 'kernel'");
}

Test(ir_parse_errors, nul_byte) {
  const char text[] = "module \"t\"\n\nkernel @k() {\n  return \0\n}\n";
  Parsed p;
  parse_into(&p, text, sizeof text - 1);
  cr_assert_null(p.m);
  cr_assert_str_eq(p.diags.items[0].msg, "NUL byte in input");
  cr_assert_eq(p.diags.items[0].loc.line, 4);
  cr_assert_eq(p.diags.items[0].loc.col, 10);
  arena_free(&p.arena);
}

Test(ir_parse_errors, unexpected_character) {
  expect_body_parse_error("", "  $\n  return\n", 4, 3, "unexpected character '$'");
}

Test(ir_parse_errors, unexpected_byte) {
  expect_body_parse_error("", "  \x01\n  return\n", 4, 3, "unexpected byte 0x01");
}

Test(ir_parse_errors, negative_unsigned_constant) {
  expect_body_parse_error("", "  %0 = const -1 : u8\n  return\n", 4, 14,
                          "negative constant for unsigned type u8");
}

Test(ir_parse_errors, integer_literal_for_float) {
  expect_body_parse_error("", "  %0 = const 1 : f32\n  return\n", 4, 14,
                          "expected a float constant (like 1.0) for f32, found '1'");
}

Test(ir_parse_errors, bool_literal_for_i1) {
  expect_body_parse_error("", "  %0 = const 1 : i1\n  return\n", 4, 14,
                          "expected true or false for i1, found '1'");
}

Test(ir_parse_errors, integer_too_large) {
  expect_body_parse_error("", "  %0 = const 9223372036854775808 : i64\n  return\n", 4, 14,
                          "integer out of range");
}

Test(ir_parse_errors, float_out_of_range) {
  expect_body_parse_error("", "  %0 = const 1e999 : f64\n  return\n", 4, 14,
                          "float constant out of range");
}

Test(ir_parse_errors, missing_attribute) {
  expect_body_parse_error("%a: f32[4]", "  %0 = reduce_sum %a : f32\n  return\n", 4, 8,
                          "missing attribute 'axis' for reduce_sum");
}

Test(ir_parse_errors, unknown_attribute) {
  expect_body_parse_error("%a: f32[4]", "  %0 = reduce_sum %a {axes = 0} : f32\n  return\n", 4, 23,
                          "unknown attribute 'axes' for reduce_sum");
}

Test(ir_parse_errors, attributes_out_of_order) {
  expect_body_parse_error("", "  %0 = arange {end = 4, start = 0} : i32[4]\n  return\n", 4, 25,
                          "attribute 'start' repeated or out of order");
}

Test(ir_parse_errors, perm_length) {
  expect_body_parse_error("%a: f32[4, 2]", "  %0 = trans %a {perm = [1, 0, 2]} : f32[2, 4]\n  return\n",
                          4, 25, "perm has 3 entries for an operand of rank 2");
}

Test(ir_parse_errors, result_type_count) {
  expect_body_parse_error("%a: i32", "  %0 = neg %a : i32, i32\n  return\n", 4, 15,
                          "neg has 1 result but 2 types");
}

Test(ir_parse_errors, for_result_count) {
  expect_body_parse_error("%n: i32",
                          "  %0 = for %1 = %n to %n step %n {\n    yield\n  }\n  return\n", 4, 8,
                          "for has 1 result but 0 iter values");
}

Test(ir_parse_errors, if_result_types) {
  expect_body_parse_error("%c: i1",
                          "  %0 = if %c {\n    yield\n  } else {\n    yield\n  }\n  return\n", 4,
                          8, "if has 1 result but 0 result types");
}

Test(ir_parse_errors, missing_else) {
  expect_body_parse_error("%c: i1", "  if %c {\n    yield\n  }\n  return\n", 6, 4,
                          "expected 'else', found end of line");
}

Test(ir_parse_errors, while_do_arguments) {
  expect_body_parse_error("%c: i1",
                          "  %0 = while (%1 = %c) {\n    yield %1\n  } do () {\n    yield %c\n  }\n"
                          "  return\n",
                          6, 5, "while 'do' region has 0 arguments, expected 1");
}

Test(ir_parse_errors, named_result) {
  expect_body_parse_error("", "  %x = const 1 : i32\n  return\n", 4, 3,
                          "only kernel parameters are named; values are numbered (%0, %1, ...)");
}

Test(ir_parse_errors, numbered_parameter) {
  expect_parse_error("module \"t\"\n\nkernel @k(%0: i32) {\n  return\n}\n", 3, 11,
                     "parameter names must be identifiers (like %x)");
}

Test(ir_parse_errors, value_number_too_large) {
  expect_body_parse_error("", "  %12345678901 = const 1 : i32\n  return\n", 4, 3,
                          "value number too large (limit 999999999)");
}

Test(ir_parse_errors, region_brace_not_at_line_end) {
  expect_body_parse_error("%c: i1", "  if %c { yield\n  } else {\n    yield\n  }\n  return\n", 4, 11,
                          "expected end of line, found 'yield'");
}

Test(ir_parse_errors, nesting_too_deep) {
  StrBuf body;
  sb_init(&body);
  int levels = 300;
  for (int i = 0; i < levels; i++) sb_puts(&body, "if %c {\n");
  for (int i = 0; i < levels; i++) sb_puts(&body, "yield\n} else {\nyield\n}\n");
  sb_puts(&body, "return\n");
  /* Region 257 opens on body line 257 (line 260 of the text). */
  expect_body_parse_error("%c: i1", body.data, 260, 7, "regions nested too deeply (limit 256)");
  sb_free(&body);
}

Test(ir_parse_errors, nesting_at_limit_is_fine) {
  StrBuf body;
  sb_init(&body);
  int levels = 256;
  for (int i = 0; i < levels; i++) sb_puts(&body, "if %c {\n");
  sb_puts(&body, "yield\n");
  for (int i = 0; i < levels; i++) sb_puts(&body, "} else {\nyield\n}\nyield\n");
  sb_puts(&body, "return\n");
  /* Every level but the outermost ends with an extra yield: drop that one. */
  char *text = kernel_text("%c: i1", body.data);
  char *last = strstr(text, "}\nyield\nreturn\n");
  cr_assert_not_null(last);
  memmove(last + 2, last + 8, strlen(last + 8) + 1);
  Parsed p;
  parse_into(&p, text, strlen(text));
  char *msgs = render(&p.diags);
  cr_assert_not_null(p.m, "%s", msgs);
  free(msgs);
  cr_assert(ir_verify_module(p.m, &p.diags));
  arena_free(&p.arena);
  free(text);
  sb_free(&body);
}

Test(ir_parse_errors, rendered_with_file_line_col) {
  Parsed p;
  const char *text = "module \"t\"\n\nkernel @k() {\n  %0 = bogus\n}\n";
  parse_into(&p, text, strlen(text));
  char *msgs = render(&p.diags);
  cr_assert_str_eq(msgs, "test.ir:4:8: error: unknown op 'bogus'\n      %0 = bogus\n           ^\n");
  free(msgs);
  arena_free(&p.arena);
}

/* ---- verifier ----------------------------------------------------------- */

Test(ir_verify, valid_kernels_accepted) {
  expect_verify_ok("%a: f32[64], %b: i32[64]",
                   "  %0 = add %a, %a : f32[64]\n"
                   "  %1 = cast %b : f32[64]\n"
                   "  %2 = and %b, %b : i32[64]\n"
                   "  %3 = cmp_ne %a, %1 : i1[64]\n"
                   "  %4 = xor %3, %3 : i1[64]\n"
                   "  %5 = select %4, %a, %1 : f32[64]\n"
                   "  %6 = reshape %5 : f32[8, 8]\n"
                   "  %7 = argmin %6 {axis = 0} : i32[8]\n"
                   "  %8 = bitcast %a : u32[64]\n"
                   "  return\n");
  check_text_identity(golden_control);
}

Test(ir_verify, operand_types_differ) {
  expect_verify_error("%a: f32[64], %b: i32[64]", "  %0 = add %a, %b : f32[64] @7:9\n  return\n", 7,
                      9, "invalid IR: add: operand types differ (f32[64] and i32[64])");
}

Test(ir_verify, result_type_differs) {
  expect_verify_error("%a: f32[64]", "  %0 = mul %a, %a : f32[32] @2:2\n  return\n", 2, 2,
                      "invalid IR: mul: result type must be f32[64], got f32[32]");
}

Test(ir_verify, shift_on_float) {
  expect_verify_error("%a: f32", "  %0 = shl %a, %a : f32 @1:5\n  return\n", 1, 5,
                      "invalid IR: shl: operand type must be integer other than i1, got f32");
}

Test(ir_verify, math_on_int) {
  expect_verify_error("%a: i32[64]", "  %0 = exp %a : i32[64] @3:1\n  return\n", 3, 1,
                      "invalid IR: exp: operand type must be float, got i32[64]");
}

Test(ir_verify, arithmetic_on_pointer) {
  expect_verify_error("%p: *f32", "  %0 = add %p, %p : *f32 @3:1\n  return\n", 3, 1,
                      "invalid IR: add: operand type must be integer or float, got *f32");
}

Test(ir_verify, cmp_result_not_i1) {
  expect_verify_error("%a: f32[4]", "  %0 = cmp_lt %a, %a : f32[4] @3:1\n  return\n", 3, 1,
                      "invalid IR: cmp_lt: result type must be i1[4], got f32[4]");
}

Test(ir_verify, select_condition) {
  expect_verify_error("%a: f32[4], %c: i1", "  %0 = select %c, %a, %a : f32[4] @3:1\n  return\n", 3,
                      1, "invalid IR: select: condition must be i1[4], got i1");
}

Test(ir_verify, ptr_add_float_offset) {
  expect_verify_error("%p: *f32, %o: f32", "  %0 = ptr_add %p, %o : *f32 @3:1\n  return\n", 3, 1,
                      "invalid IR: ptr_add: offset must be an integer tile, got f32");
}

Test(ir_verify, cast_pointer_to_i32) {
  expect_verify_error("%p: *f32", "  %0 = cast %p : i32 @3:1\n  return\n", 3, 1,
                      "invalid IR: cast: cannot cast *f32 to i32");
}

Test(ir_verify, bitcast_widths) {
  expect_verify_error("%a: f32[2]", "  %0 = bitcast %a : i64[2] @3:1\n  return\n", 3, 1,
                      "invalid IR: bitcast: bit widths differ (f32[2] and i64[2])");
}

Test(ir_verify, broadcast_shapes) {
  expect_verify_error("%a: f32[4, 2]", "  %0 = broadcast %a : f32[4, 8] @3:1\n  return\n", 3, 1,
                      "invalid IR: broadcast: cannot broadcast f32[4, 2] to f32[4, 8]");
}

Test(ir_verify, expand_dims_result) {
  expect_verify_error("%a: f32[4]", "  %0 = expand_dims %a {axis = 1} : f32[1, 4] @3:1\n  return\n",
                      3, 1, "invalid IR: expand_dims: result type must be f32[4, 1], got f32[1, 4]");
}

Test(ir_verify, reshape_count) {
  expect_verify_error("%a: f32[4]", "  %0 = reshape %a : f32[2, 4] @3:1\n  return\n", 3, 1,
                      "invalid IR: reshape: cannot reshape f32[4] to f32[2, 4] (element counts differ)");
}

Test(ir_verify, trans_not_a_permutation) {
  expect_verify_error("%a: f32[4, 2]", "  %0 = trans %a {perm = [0, 0]} : f32[4, 4] @3:1\n  return\n",
                      3, 1,
                      "invalid IR: trans: perm 0x0 is not a permutation of the 2 dimensions of f32[4, 2]");
}

Test(ir_verify, trans_result) {
  expect_verify_error("%a: f32[4, 2]", "  %0 = trans %a {perm = [1, 0]} : f32[4, 2] @3:1\n  return\n",
                      3, 1, "invalid IR: trans: result type must be f32[2, 4], got f32[4, 2]");
}

Test(ir_verify, reduce_axis) {
  expect_verify_error("%a: f32[4, 2]", "  %0 = reduce_sum %a {axis = 2} : f32[4] @3:1\n  return\n",
                      3, 1, "invalid IR: reduce_sum: axis 2 is not in 0..1");
}

Test(ir_verify, argmax_result) {
  expect_verify_error("%a: f32[4, 2]", "  %0 = argmax %a {axis = 1} : f32[4] @3:1\n  return\n", 3,
                      1, "invalid IR: argmax: result type must be i32[4], got f32[4]");
}

Test(ir_verify, dot_shapes) {
  expect_verify_error("%a: f16[16, 32], %b: f16[16, 16], %c: f32[16, 16]",
                      "  %0 = dot %a, %b, %c : f32[16, 16] @3:1\n  return\n", 3, 1,
                      "invalid IR: dot: shapes do not match (f16[16, 32], f16[16, 16], f32[16, 16])");
}

Test(ir_verify, dot_accumulator) {
  expect_verify_error("%a: f16[16, 16], %c: i32[16, 16]",
                      "  %0 = dot %a, %a, %c : i32[16, 16] @3:1\n  return\n", 3, 1,
                      "invalid IR: dot: accumulator i32[16, 16] does not suit inputs f16[16, 16]");
}

Test(ir_verify, load_result) {
  expect_verify_error("%p: *f32[8]", "  %0 = load %p : f16[8] @3:1\n  return\n", 3, 1,
                      "invalid IR: load: result type must be f32[8], got f16[8]");
}

Test(ir_verify, load_operand_count) {
  expect_verify_error("%p: *f32[8], %m: i1[8]", "  %0 = load %p, %m : f32[8] @3:1\n  return\n", 3, 1,
                      "invalid IR: load: expected 1 or 3 operands (ptr [, mask, other]), got 2");
}

Test(ir_verify, load_mask) {
  expect_verify_error("%p: *f32[8], %m: i1[4], %o: f32[8]",
                      "  %0 = load %p, %m, %o : f32[8] @3:1\n  return\n", 3, 1,
                      "invalid IR: load: mask must be i1[8], got i1[4]");
}

Test(ir_verify, store_value) {
  expect_verify_error("%p: *f32[8], %v: f32", "  store %p, %v @3:1\n  return\n", 3, 1,
                      "invalid IR: store: value must be f32[8], got f32");
}

Test(ir_verify, atomic_and_on_float) {
  expect_verify_error("%p: *f32, %v: f32", "  %0 = atomic_and %p, %v : f32 @3:1\n  return\n", 3, 1,
                      "invalid IR: atomic_and: element type f32 is not supported");
}

Test(ir_verify, atomic_cas_operands) {
  expect_verify_error("%p: *i32, %v: i32", "  %0 = atomic_cas %p, %v : i32 @3:1\n  return\n", 3, 1,
                      "invalid IR: atomic_cas: expected 3 or 4 operands, got 2");
}

Test(ir_verify, block_load_offsets) {
  expect_verify_error("%d: tensor<bf16, 2>, %i: i32",
                      "  %0 = block_load %d, %i : bf16[64, 64] @3:1\n  return\n", 3, 1,
                      "invalid IR: block_load: expected 3 operands for tensor<bf16, 2>, got 2");
}

Test(ir_verify, block_load_result) {
  expect_verify_error("%d: tensor<bf16, 2>, %i: i32",
                      "  %0 = block_load %d, %i, %i : f32[64, 64] @3:1\n  return\n", 3, 1,
                      "invalid IR: block_load: result must be a bf16 tile of rank 2, got f32[64, 64]");
}

Test(ir_verify, block_store_value_rank) {
  expect_verify_error("%d: tensor<f32, 2>, %i: i32, %v: f32[64]",
                      "  block_store %d, %v, %i, %i @3:1\n  return\n", 3, 1,
                      "invalid IR: block_store: value must be a f32 tile of rank 2, got f32[64]");
}

Test(ir_verify, for_bounds_types) {
  expect_verify_error("%a: i32, %b: i64",
                      "  for %0 = %a to %b step %a @3:1 {\n    yield\n  }\n  return\n", 3, 1,
                      "invalid IR: for: lo, hi and step must have one integer scalar type (i32, i64, i32)");
}

Test(ir_verify, for_float_bounds) {
  expect_verify_error("%a: f32", "  for %0 = %a to %a step %a @3:1 {\n    yield\n  }\n  return\n", 3,
                      1, "invalid IR: for: lo, hi and step must have one integer scalar type (f32, f32, f32)");
}

Test(ir_verify, for_yield_types) {
  expect_verify_error("%n: i32, %x: f32",
                      "  %0 = for %1 = %n to %n step %n iter(%2 = %x) @3:1 {\n"
                      "    yield %1 @4:7\n"
                      "  }\n"
                      "  return\n",
                      4, 7, "invalid IR: yield: for body yields i32 as value 0, expected f32");
}

Test(ir_verify, for_yield_count) {
  expect_verify_error("%n: i32, %x: f32",
                      "  %0 = for %1 = %n to %n step %n iter(%2 = %x) @3:1 {\n"
                      "    yield @4:7\n"
                      "  }\n"
                      "  return\n",
                      4, 7, "invalid IR: yield: for body yields 0 values, expected 1");
}

Test(ir_verify, if_condition) {
  expect_verify_error("%c: i1[4]",
                      "  if %c @3:1 {\n    yield\n  } else {\n    yield\n  }\n  return\n", 3, 1,
                      "invalid IR: if: condition must be a scalar i1, got i1[4]");
}

Test(ir_verify, if_yield_types) {
  expect_verify_error("%c: i1, %a: f32, %b: i32",
                      "  %0 = if %c -> f32 @3:1 {\n    yield %a\n  } else {\n    yield %b @6:5\n  }\n"
                      "  return\n",
                      6, 5, "invalid IR: yield: if else-region yields i32 as value 0, expected f32");
}

Test(ir_verify, while_condition_type) {
  expect_verify_error("%a: i32",
                      "  %0 = while (%1 = %a) @3:1 {\n    yield %1 @4:5\n  } do (%2) {\n    yield %2\n"
                      "  }\n  return\n",
                      4, 5, "invalid IR: yield: while condition must yield one scalar i1, got i32");
}

Test(ir_verify, while_do_yield) {
  expect_verify_error("%a: i32, %c: i1",
                      "  %0 = while (%1 = %a) @3:1 {\n    yield %c\n  } do (%2) {\n    yield %c @6:5\n"
                      "  }\n  return\n",
                      6, 5, "invalid IR: yield: while do-region yields i1 as value 0, expected i32");
}

Test(ir_verify, const_does_not_fit) {
  expect_verify_error("", "  %0 = const 300 : i8 @3:1\n  return\n", 3, 1,
                      "invalid IR: const: value 300 does not fit in i8");
}

Test(ir_verify, const_unsigned_does_not_fit) {
  expect_verify_error("", "  %0 = const 256 : u8 @3:1\n  return\n", 3, 1,
                      "invalid IR: const: value 256 does not fit in u8");
}

Test(ir_verify, const_pointer) {
  expect_verify_error("", "  %0 = const 0 : *f32 @3:1\n  return\n", 3, 1,
                      "invalid IR: const: type *f32 cannot be a constant");
}

Test(ir_verify, arange_result) {
  expect_verify_error("", "  %0 = arange {start = 4, end = 8} : i32[8] @3:1\n  return\n", 3, 1,
                      "invalid IR: arange: result type must be i32[4], got i32[8]");
}

Test(ir_verify, arange_empty) {
  expect_verify_error("", "  %0 = arange {start = 4, end = 4} : i32[1] @3:1\n  return\n", 3, 1,
                      "invalid IR: arange: end (4) must be greater than start (4)");
}

Test(ir_verify, program_id_axis) {
  expect_verify_error("", "  %0 = program_id {axis = 3} : i32 @3:1\n  return\n", 3, 1,
                      "invalid IR: program_id: axis 3 is not in 0..2");
}

Test(ir_verify, num_programs_type) {
  expect_verify_error("", "  %0 = num_programs {axis = 0} : i64 @3:1\n  return\n", 3, 1,
                      "invalid IR: num_programs: result type must be i32, got i64");
}

Test(ir_verify, dimension_not_power_of_two) {
  expect_verify_error("", "  %0 = const 1.0 : f32[3] @3:1\n  return\n", 3, 1,
                      "invalid IR: const: result 0 has invalid type f32[3]: dimension 3 is not a power of two");
}

Test(ir_verify, too_many_elements) {
  expect_verify_error("", "  %0 = const 1.0 : f32[2048, 1024] @3:1\n  return\n", 3, 1,
                      "invalid IR: const: result 0 has invalid type f32[2048, 1024]: more than 1048576 elements");
}

Test(ir_verify, parameter_type) {
  expect_verify_error("%a: f32[0]", "  return\n", 0, 0,
                      "invalid IR: kernel @k: parameter %a has invalid type f32[0]: dimension 0 is not a power of two");
}

Test(ir_verify, terminator_in_middle) {
  expect_verify_error("", "  return @3:1\n  return @4:1\n", 3, 1,
                      "invalid IR: return: terminator must be the last op of its block");
}

Test(ir_verify, yield_in_kernel_body) {
  expect_verify_error("", "  yield @3:1\n", 3, 1,
                      "invalid IR: yield: not allowed in the kernel body (use return)");
}

Test(ir_verify, return_in_region) {
  expect_verify_error("%c: i1", "  if %c {\n    return @4:5\n  } else {\n    yield\n  }\n  return\n",
                      4, 5, "invalid IR: return: only allowed at the end of the kernel body");
}

/* In-memory malformations the parser cannot produce. */

Test(ir_verify, use_before_definition_in_memory) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b;
  Func *f = new_kernel(m, "k", 0, NULL, NULL, &b, NULL);
  Value *one = const_int(&b, T(SK_I32), 1);
  Op *add = emit_op(&b, OP_ADD, OPS(one, one), 1, (TType[]){T(SK_I32)});
  Op *later = ir_op_make(&a, OP_CONST, 0, NULL, 1, (TType[]){T(SK_I32)}, (SrcLoc){0, 0, 0});
  ir_append(&f->body, later);
  add->operands[1] = &later->results[0];
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: add: operand 1 is not defined before this use");
  arena_free(&a);
}

Test(ir_verify, region_value_used_outside) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b, body;
  TType params[] = {T(SK_I32)};
  const char *names[] = {"n"};
  Func *f = new_kernel(m, "k", 1, params, names, &b, NULL);
  Value *n = &f->body.args[0];
  Op *loop = emit_for(&b, n, n, n, 0, NULL, &body);
  Value *inner = emit(&body, OP_ADD, T(SK_I32), OPS(n, n));
  emit_void(&body, OP_YIELD, NO_OPS);
  emit(&b, OP_NEG, T(SK_I32), OPS(inner));
  emit(&b, OP_NEG, T(SK_I32), OPS(&loop->regions[0].args[0]));
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: neg: operand 0 is not defined before this use");
  arena_free(&a);
}

Test(ir_verify, value_of_other_function) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b1, b2;
  TType params[] = {T(SK_I32)};
  const char *names[] = {"n"};
  Func *f1 = new_kernel(m, "k1", 1, params, names, &b1, NULL);
  emit_void(&b1, OP_RETURN, NO_OPS);
  Func *f2 = new_kernel(m, "k2", 0, NULL, NULL, &b2, NULL);
  emit(&b2, OP_NEG, T(SK_I32), OPS(&f1->body.args[0]));
  emit_void(&b2, OP_RETURN, NO_OPS);
  cr_assert(ir_verify_func(f1, &(Diags){.arena = &a}));
  expect_func_error(f2, "invalid IR: neg: operand 0 is not defined before this use");
  arena_free(&a);
}

Test(ir_verify, region_without_terminator) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b;
  TType params[] = {T(SK_I1)};
  const char *names[] = {"c"};
  Func *f = new_kernel(m, "k", 1, params, names, &b, NULL);
  Op *cond = emit_region_op(&b, OP_IF, OPS(&f->body.args[0]), 0, NULL, 2);
  cond->loc = (SrcLoc){5, 6, 0};
  Build else_b = sub_build(&b, &cond->regions[1]);
  emit_void(&else_b, OP_YIELD, NO_OPS);
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: if: region 0 does not end with a terminator");
  arena_free(&a);
}

Test(ir_verify, body_without_return) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b;
  Func *f = new_kernel(m, "k", 0, NULL, NULL, &b, NULL);
  const_int(&b, T(SK_I32), 1);
  expect_func_error(f, "invalid IR: kernel @k: body does not end with return");
  arena_free(&a);
}

Test(ir_verify, null_operand) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b;
  Func *f = new_kernel(m, "k", 0, NULL, NULL, &b, NULL);
  Value *one = const_int(&b, T(SK_I32), 1);
  Op *add = emit_op(&b, OP_ADD, OPS(one, one), 1, (TType[]){T(SK_I32)});
  add->operands[0] = NULL;
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: add: operand 0 is null");
  /* The printer still prints it. */
  StrBuf sb;
  sb_init(&sb);
  ir_print_func(f, &sb);
  cr_assert(strstr(sb.data, "%1 = add %<null>, %0 : i32\n"), "%s", sb.data);
  sb_free(&sb);
  arena_free(&a);
}

Test(ir_verify, operand_count_in_memory) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b;
  Func *f = new_kernel(m, "k", 0, NULL, NULL, &b, NULL);
  Value *one = const_int(&b, T(SK_I32), 1);
  emit(&b, OP_SUB, T(SK_I32), OPS(one, one, one));
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: sub: expected 2 operands, got 3");
  arena_free(&a);
}

Test(ir_verify, float_value_on_integer_const) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b;
  Func *f = new_kernel(m, "k", 0, NULL, NULL, &b, NULL);
  Op *c = emit_op(&b, OP_CONST, 0, NULL, 1, (TType[]){T(SK_I32)});
  c->fattr = 1.5;
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: const: float value 1.5 given for integer type i32");
  arena_free(&a);
}

Test(ir_verify, for_region_arguments) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b, body;
  TType params[] = {T(SK_I32), T(SK_F32)};
  const char *names[] = {"n", "x"};
  Func *f = new_kernel(m, "k", 2, params, names, &b, NULL);
  Value *n = &f->body.args[0], *x = &f->body.args[1];
  Op *loop = emit_for(&b, n, n, n, 1, (Value *[]){x}, &body);
  loop->regions[0].args[1].type = T(SK_F16);
  emit_void(&body, OP_YIELD, OPS(x));
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: for: region 0 argument 1 has type f16, expected f32");
  arena_free(&a);
}

Test(ir_verify, bad_rank_type_does_not_crash) {
  Arena a;
  Module *m = new_module(&a, "t");
  Build b;
  Func *f = new_kernel(m, "k", 0, NULL, NULL, &b, NULL);
  TType t = T1(SK_F32, 2);
  t.rank = 9; /* invalid: beyond shape[] */
  Op *c = emit_op(&b, OP_CONST, 0, NULL, 1, &t);
  (void)c;
  emit_void(&b, OP_RETURN, NO_OPS);
  expect_func_error(f, "invalid IR: const: result 0 has invalid type f32[2, 0, 0, 0]: rank 9 exceeds the limit of 4");
  StrBuf sb;
  sb_init(&sb);
  ir_print_func(f, &sb); /* must not read past shape[] */
  sb_free(&sb);
  arena_free(&a);
}

Test(ir_verify, errors_rendered_at_op_location) {
  char *text = kernel_text("%a: f32", "  %0 = shl %a, %a : f32 @1:5\n  return\n");
  Parsed p;
  parse_into(&p, text, strlen(text));
  cr_assert_not_null(p.m);
  cr_assert(!ir_verify_module(p.m, &p.diags));
  char *msgs = render(&p.diags);
  cr_assert(strncmp(msgs, "test.ir:1:5: error: invalid IR: shl: operand type must be integer other than i1, got f32\n", 87) == 0, "%s", msgs);
  free(msgs);
  arena_free(&p.arena);
  free(text);
}

/* ---- robustness ----------------------------------------------------------- */

/* A small deterministic generator (xorshift), local to each test. */
static uint32_t next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (uint32_t)(*state >> 32);
}

/* Parses exactly len bytes from a heap copy (so that ASan sees any read
 * past the end); if accepted, printing is a fixed point after one round. */
static void parse_survives(const char *text, size_t len) {
  char *copy = malloc(len ? len : 1);
  memcpy(copy, text, len);
  Parsed p;
  parse_into(&p, copy, len);
  if (p.m) {
    ir_verify_module(p.m, &p.diags);
    char *once = print_module(p.m);
    Parsed q;
    parse_into(&q, once, strlen(once));
    char *msgs = render(&q.diags);
    cr_assert_not_null(q.m, "printed text of an accepted input does not parse:\n%s\n%s", msgs, once);
    free(msgs);
    char *twice = print_module(q.m);
    cr_assert_str_eq(twice, once);
    free(twice);
    free(once);
    arena_free(&q.arena);
  }
  arena_free(&p.arena);
  free(copy);
}

static char *all_kernels_text(void) {
  Arena a;
  Module *m = new_module(&a, "fuzz.tile");
  uint32_t line = 1;
  build_softmax(m, &line);
  build_for_loop(m, &line);
  build_nested_if(m, &line);
  build_while(m, &line);
  build_dot(m, &line);
  build_consts(m, &line);
  build_desc(m, &line);
  build_misc(m, &line);
  char *text = print_module(m);
  arena_free(&a);
  return text;
}

Test(ir_fuzz, every_prefix) {
  char *text = all_kernels_text();
  size_t len = strlen(text);
  for (size_t n = 0; n <= len; n++) parse_survives(text, n);
  free(text);
}

/* Bytes that matter to the grammar, to mutate into. */
static const char fuzz_alphabet[] = "%@{}()[],:=*<>-\n \"\\0123456789.eiftruxyz_\0\x01\xff";

Test(ir_fuzz, random_mutations) {
  char *golden = all_kernels_text();
  size_t glen = strlen(golden);
  const char *texts[] = {golden, golden_control};
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int iter = 0; iter < 4000; iter++) {
    const char *src = texts[iter % 2];
    size_t len = iter % 2 ? strlen(golden_control) : glen;
    char *buf = malloc(len + 64);
    memcpy(buf, src, len);
    int edits = 1 + (int)(next_random(&state) % 4);
    for (int e = 0; e < edits && len > 0; e++) {
      size_t at = next_random(&state) % len;
      uint32_t what = next_random(&state) % 4;
      char c = fuzz_alphabet[next_random(&state) % (sizeof fuzz_alphabet - 1)];
      if (what == 0) {
        buf[at] = c; /* replace */
      } else if (what == 1) {
        memmove(buf + at, buf + at + 1, len - at - 1); /* delete */
        len--;
      } else if (what == 2 && len < glen + 60) {
        memmove(buf + at + 1, buf + at, len - at); /* insert */
        buf[at] = c;
        len++;
      } else {
        len = at; /* truncate */
      }
    }
    parse_survives(buf, len);
    free(buf);
  }
  free(golden);
}

Test(ir_fuzz, random_bytes) {
  uint64_t state = 12345;
  char buf[256];
  for (int iter = 0; iter < 2000; iter++) {
    size_t len = next_random(&state) % sizeof buf;
    memcpy(buf, "module \"r\"\n\nkernel @k() {\n", 26);
    for (size_t i = 26; i < len; i++)
      buf[i] = fuzz_alphabet[next_random(&state) % (sizeof fuzz_alphabet - 1)];
    parse_survives(buf, len);
  }
}
