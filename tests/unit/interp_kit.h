/* interp_kit.h - helpers for the interpreter's unit tests: building
 * kernels with the IR builder API (one small function per op shape),
 * parsing kernels from IR text, and running them on host buffers.
 *
 * Header-only (static functions) because test_interp.c is its only user;
 * it keeps that file to the tests themselves.
 */
#ifndef TILE_TEST_INTERP_KIT_H
#define TILE_TEST_INTERP_KIT_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/interp/interp.h"
#include "../../compiler/ir/ir.h"
#include "../../compiler/util/strbuf.h"

/* ---- kernel building helpers ------------------------------------------- */

/* Deepest region nesting the helpers track. */
#define K_MAX_DEPTH 16

typedef struct K {
  Arena arena;
  Module *m;
  Func *f;
  Block *stack[K_MAX_DEPTH];
  int depth;
  SrcLoc loc; /* location given to the next ops */
} K;

static void kbegin(K *k, const char *name, int n, const TType *types, const char *const *names) {
  arena_init(&k->arena);
  k->m = ir_module_new(&k->arena, "t.tile");
  k->f = ir_func_new(k->m, name, n, types, (SrcLoc){1, 1, 0});
  for (int i = 0; i < n; i++) k->f->params[i].name = names[i];
  k->depth = 0;
  k->stack[0] = &k->f->body;
  k->loc = (SrcLoc){2, 3, 0};
}

static void kend(K *k) { arena_free(&k->arena); }
static void at(K *k, uint32_t line, uint32_t col) { k->loc = (SrcLoc){line, col, 0}; }
static Block *cur(K *k) { return k->stack[k->depth]; }
static Value *arg(K *k, int i) { return &k->f->body.args[i]; }

static TType ts(ScalarKind s) { return type_scalar(s); }
static TType t1(ScalarKind s, int a) { return type_tile(s, 1, (int32_t[]){a}); }
static TType t2(ScalarKind s, int a, int b) { return type_tile(s, 2, (int32_t[]){a, b}); }
static TType t3(ScalarKind s, int a, int b, int c) { return type_tile(s, 3, (int32_t[]){a, b, c}); }
static TType ptr_of(TType shape, ScalarKind pointee) {
  shape.kind = SK_PTR;
  shape.pointee = (uint8_t)pointee;
  return shape;
}
static TType desc_of(ScalarKind elem, int rank) {
  TType t = ts(SK_DESC);
  t.pointee = (uint8_t)elem;
  t.desc_rank = (uint8_t)rank;
  return t;
}

static Op *emit(K *k, OpKind kind, int nres, const TType *rt, int nops, Value *const *ops) {
  Op *op = ir_op_make(&k->arena, kind, nops, ops, nres, rt, k->loc);
  ir_append(cur(k), op);
  return op;
}

static Value *opv(K *k, OpKind kind, TType t, int nops, Value *const *ops) {
  return &emit(k, kind, 1, &t, nops, ops)->results[0];
}

#define OPS(...) (int)(sizeof((Value *[]){__VA_ARGS__}) / sizeof(Value *)), (Value *[]){__VA_ARGS__}
#define OP(k, kind, t, ...) opv(k, kind, t, OPS(__VA_ARGS__))

static Value *cint(K *k, TType t, int64_t v) {
  Value *r = opv(k, OP_CONST, t, 0, NULL);
  r->def->attr[0] = v;
  return r;
}
static Value *cflt(K *k, TType t, double v) {
  Value *r = opv(k, OP_CONST, t, 0, NULL);
  r->def->fattr = v;
  return r;
}
static Value *with_attr(Value *v, int64_t a) {
  v->def->attr[0] = a;
  return v;
}
static Value *pid(K *k, int axis) { return with_attr(opv(k, OP_PROGRAM_ID, ts(SK_I32), 0, NULL), axis); }
static Value *nprog(K *k, int axis) {
  return with_attr(opv(k, OP_NUM_PROGRAMS, ts(SK_I32), 0, NULL), axis);
}
static Value *arange(K *k, int start, int end) {
  Value *r = opv(k, OP_ARANGE, t1(SK_I32, end - start), 0, NULL);
  r->def->attr[0] = start;
  r->def->attr[1] = end;
  return r;
}
static Value *bin(K *k, OpKind kind, Value *a, Value *b) { return OP(k, kind, a->type, a, b); }
static Value *cmp(K *k, OpKind kind, Value *a, Value *b) {
  return OP(k, kind, type_with_elem(a->type, SK_I1), a, b);
}
static Value *una(K *k, OpKind kind, Value *a) { return OP(k, kind, a->type, a); }
static Value *cast(K *k, Value *a, ScalarKind to) { return OP(k, OP_CAST, type_with_elem(a->type, to), a); }
static Value *bcast(K *k, Value *v, TType shape) {
  return OP(k, OP_BROADCAST, type_with_shape(v->type, shape.rank, shape.shape), v);
}
static Value *expand(K *k, Value *v, int axis) {
  TType t = v->type;
  for (int d = t.rank; d > axis; d--) t.shape[d] = t.shape[d - 1];
  t.shape[axis] = 1;
  t.rank++;
  return with_attr(OP(k, OP_EXPAND_DIMS, t, v), axis);
}
/* Scalar s broadcast to v's shape, then combined with v. */
static Value *bin_s(K *k, OpKind kind, Value *v, Value *s) { return bin(k, kind, v, bcast(k, s, v->type)); }
static Value *ptr_add(K *k, Value *p, Value *offs) {
  Value *pt = p->type.rank == offs->type.rank ? p : bcast(k, p, offs->type);
  return OP(k, OP_PTR_ADD, pt->type, pt, offs);
}
static Value *reduce(K *k, OpKind kind, Value *a, int axis) {
  TType t = a->type;
  for (int d = axis; d + 1 < t.rank; d++) t.shape[d] = t.shape[d + 1];
  t.shape[--t.rank] = 0;
  if (kind == OP_ARGMAX || kind == OP_ARGMIN) t.kind = SK_I32;
  return with_attr(OP(k, kind, t, a), axis);
}
static Value *trans2(K *k, Value *a) {
  TType t = a->type;
  t.shape[0] = a->type.shape[1];
  t.shape[1] = a->type.shape[0];
  /* perm [1, 0]: entry i in bits 4i..4i+3 */
  return with_attr(OP(k, OP_TRANS, t, a), 1 | (0 << 4));
}
static Value *load(K *k, Value *p, Value *mask, Value *other) {
  TType t = type_with_elem(p->type, (ScalarKind)p->type.pointee);
  if (!mask) return OP(k, OP_LOAD, t, p);
  if (!other) return OP(k, OP_LOAD, t, p, mask);
  return OP(k, OP_LOAD, t, p, mask, other);
}
static void store(K *k, Value *p, Value *v, Value *mask) {
  if (mask) emit(k, OP_STORE, 0, NULL, OPS(p, v, mask));
  else emit(k, OP_STORE, 0, NULL, OPS(p, v));
}
static Value *atomic(K *k, OpKind kind, Value *p, Value *v, Value *mask) {
  if (mask) return OP(k, kind, v->type, p, v, mask);
  return OP(k, kind, v->type, p, v);
}
static void ret(K *k) { emit(k, OP_RETURN, 0, NULL, 0, NULL); }
static void yield(K *k, int n, Value *const *vals) { emit(k, OP_YIELD, 0, NULL, n, vals); }

static void push(K *k, Block *b) {
  cr_assert(k->depth + 1 < K_MAX_DEPTH);
  k->stack[++k->depth] = b;
}
static void pop(K *k) { k->depth--; }

static void block_args_of(K *k, Block *b, int n, Value *const *vals, const TType *first) {
  TType types[16];
  int m = 0;
  if (first) types[m++] = *first;
  for (int i = 0; i < n; i++) types[m++] = vals[i]->type;
  ir_block_set_args(&k->arena, b, m, types);
}

/* for iv in [lo, hi) by step with n loop-carried values; the body is
 * built between for_open and for_close. */
static Op *for_open(K *k, Value *lo, Value *hi, Value *step, int n, Value *const *inits) {
  TType rt[16];
  for (int i = 0; i < n; i++) rt[i] = inits[i]->type;
  Op *op = ir_op_new(&k->arena, OP_FOR, 3 + n, n, rt, 1, k->loc);
  op->operands[0] = lo;
  op->operands[1] = hi;
  op->operands[2] = step;
  for (int i = 0; i < n; i++) op->operands[3 + i] = inits[i];
  ir_append(cur(k), op);
  block_args_of(k, &op->regions[0], n, inits, &lo->type);
  push(k, &op->regions[0]);
  return op;
}
static Value *for_iv(Op *op) { return &op->regions[0].args[0]; }
static Value *for_iter(Op *op, int i) { return &op->regions[0].args[1 + i]; }
static void for_close(K *k, int n, Value *const *yields) {
  yield(k, n, yields);
  pop(k);
}

static Op *if_open(K *k, Value *cond, int n, const TType *types) {
  Op *op = ir_op_new(&k->arena, OP_IF, 1, n, types, 2, k->loc);
  op->operands[0] = cond;
  ir_append(cur(k), op);
  push(k, &op->regions[0]);
  return op;
}
static void if_else(K *k, Op *op, int n, Value *const *yields) {
  yield(k, n, yields);
  pop(k);
  push(k, &op->regions[1]);
}
static void if_close(K *k, int n, Value *const *yields) {
  yield(k, n, yields);
  pop(k);
}

/* while: region 0 computes the condition from the iter values, region 1
 * the next values. */
static Op *while_open(K *k, int n, Value *const *inits) {
  TType rt[16];
  for (int i = 0; i < n; i++) rt[i] = inits[i]->type;
  Op *op = ir_op_new(&k->arena, OP_WHILE, n, n, rt, 2, k->loc);
  for (int i = 0; i < n; i++) op->operands[i] = inits[i];
  ir_append(cur(k), op);
  block_args_of(k, &op->regions[0], n, inits, NULL);
  block_args_of(k, &op->regions[1], n, inits, NULL);
  push(k, &op->regions[0]);
  return op;
}
static void while_do(K *k, Op *op, Value *cond) {
  yield(k, 1, &cond);
  pop(k);
  push(k, &op->regions[1]);
}

/* ---- running helpers ----------------------------------------------------- */

typedef struct Buf {
  void *p;
  size_t bytes;
  const char *name;
} Buf;

/* Asserts that the kernel passes the IR verifier (the interpreter's
 * contract), printing the verifier's messages otherwise. */
static void assert_verified(K *k) {
  Diags diags;
  diags_init(&diags, &k->arena, NULL);
  bool ok = ir_verify_func(k->f, &diags);
  if (!ok) {
    StrBuf sb;
    sb_init(&sb);
    diags_render_all(&diags, &sb);
    cr_assert_fail("kernel does not verify:\n%s", sb.data ? sb.data : "");
  }
}

/* Runs k's kernel; returns NULL on success or the error message (the
 * caller frees it). */
static char *run_full(K *k, int64_t gx, int64_t gy, int64_t gz, const InterpArg *args, int nargs,
                      const Buf *bufs, int nbufs, uint64_t max_steps) {
  assert_verified(k);
  Interp *ip = interp_new(k->f, "t.tile");
  cr_assert(ip);
  for (int i = 0; i < nbufs; i++) interp_add_buffer(ip, bufs[i].p, bufs[i].bytes, bufs[i].name);
  if (max_steps) interp_set_max_steps(ip, max_steps);
  char *err = NULL;
  int64_t grid[3] = {gx, gy, gz};
  bool ok = interp_run(ip, grid, args, nargs, &err);
  cr_assert_eq(ok, err == NULL);
  interp_free(ip);
  return err;
}

static char *run(K *k, int64_t gx, const InterpArg *args, int nargs, const Buf *bufs, int nbufs) {
  return run_full(k, gx, 1, 1, args, nargs, bufs, nbufs, 0);
}

static void run_ok(K *k, int64_t gx, const InterpArg *args, int nargs, const Buf *bufs, int nbufs) {
  char *err = run(k, gx, args, nargs, bufs, nbufs);
  cr_assert_null(err, "unexpected error: %s", err ? err : "");
}

static InterpArg aptr(void *p) {
  InterpArg a;
  memset(&a, 0, sizeof a);
  a.p = p;
  return a;
}
static InterpArg aint(int64_t v) {
  InterpArg a;
  memset(&a, 0, sizeof a);
  a.i = v;
  return a;
}

/* Deterministic pseudo-random floats in [-1, 1). */
static float frand(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((*state >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static void fill_random(float *x, int n, uint32_t seed) {
  for (int i = 0; i < n; i++) x[i] = frand(&seed);
}

static void assert_msg(char *err, const char *expected) {
  cr_assert_not_null(err, "expected error: %s", expected);
  cr_assert_str_eq(err, expected);
  free(err);
}

static double rel_err(double got, double want) {
  double d = fabs(got - want);
  return d / (fabs(want) > 1e-30 ? fabs(want) : 1.0);
}

/* Parses the one kernel of `text` into k (asserting it parses). */
static void kparse(K *k, const char *text) {
  arena_init(&k->arena);
  Source src = {"t.ir", text, strlen(text), 0};
  Diags diags;
  diags_init(&diags, &k->arena, &src);
  k->m = ir_parse(&k->arena, &src, &diags);
  if (!k->m) {
    StrBuf sb;
    sb_init(&sb);
    diags_render_all(&diags, &sb);
    cr_assert_fail("IR text does not parse:\n%s", sb.data ? sb.data : "");
  }
  cr_assert_eq(k->m->nfuncs, 1);
  k->f = k->m->funcs[0];
}

#endif
