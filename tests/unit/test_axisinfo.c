/* test_axisinfo.c - the axis analysis (compiler/analysis/axisinfo.c):
 * contiguity, divisibility and constancy of index and pointer tiles, and
 * the vector widths the GPU back end derives from them.
 *
 * Kernels come either from .tile source (compiled by tc_compile with the
 * optimizer on, printed as IR and read back with ir_parse, which is what
 * the back end will see) or directly from IR text, where each rule can be
 * aimed at precisely. Values are found by their textual number (%N), by
 * parameter name, or as an operand of the n-th op of a kind.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/analysis/axisinfo.h"
#include "../../compiler/include/tilec.h"
#include "../../compiler/ir/ir.h"

#ifndef TILE_SOURCE_ROOT
#define TILE_SOURCE_ROOT "."
#endif

/* The divisibility cap, as written in the tests. */
#define CAP AXIS_MAX_DIVISIBILITY
/* Per-thread element counts passed to axis_vector_width. */
#define WIDE 16
#define PER_THREAD_2 2

/* ---- harness ------------------------------------------------------------ */

typedef struct Fx {
  Arena arena;
  char *text; /* the IR text (kept alive as long as the module) */
  Func *f;
  AxisAnalysis *an;
} Fx;

static void fail_diags(const Diags *d, const char *what, const char *text) {
  StrBuf sb;
  sb_init(&sb);
  diags_render_all(d, &sb);
  cr_assert_fail("%s:\n%s\n%s", what, sb.data ? sb.data : "", text);
}

/* Parses a module's text, verifies the kernel named `kernel` (NULL: the
 * first) and analyzes it. Takes ownership of `text`. */
static void fx_module(Fx *fx, char *text, const char *kernel) {
  arena_init(&fx->arena);
  fx->text = text;
  Source src = {"t.ir", text, strlen(text), 0};
  Diags d;
  diags_init(&d, &fx->arena, &src);
  Module *m = ir_parse(&fx->arena, &src, &d);
  if (!m) fail_diags(&d, "parse error", text);
  fx->f = NULL;
  for (int i = 0; i < m->nfuncs && !fx->f; i++)
    if (!kernel || strcmp(m->funcs[i]->name, kernel) == 0) fx->f = m->funcs[i];
  cr_assert_not_null(fx->f, "no kernel %s in\n%s", kernel, text);
  if (!ir_verify_func(fx->f, &d)) fail_diags(&d, "invalid IR", text);
  fx->an = axis_analyze(fx->f, &fx->arena);
}

/* One kernel in IR text (the module line is added). */
static void fx_ir(Fx *fx, const char *kernel_text) {
  static const char header[] = "module \"t\"\n\n";
  size_t n = strlen(header) + strlen(kernel_text) + 1;
  char *text = malloc(n);
  snprintf(text, n, "%s%s", header, kernel_text);
  fx_module(fx, text, NULL);
}

/* A .tile source, compiled and optimized; analyzes kernel `kernel`. */
static void fx_tile(Fx *fx, const char *source, const char *kernel) {
  tc_options opt = {0};
  tc_compilation *c = tc_compile("t.tile", source, strlen(source), &opt);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  char *ir = tc_emit(c, TC_EMIT_IR);
  tc_free(c);
  cr_assert_not_null(ir);
  fx_module(fx, ir, kernel);
}

static void fx_free(Fx *fx) {
  arena_free(&fx->arena);
  free(fx->text);
}

/* Textual numbering: an op's results, then per region its arguments and
 * its ops. Counts down *k and returns the value when it reaches it. */
static Value *nth_in_block(const Block *b, int *k) {
  for (Op *op = b->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->nresults; i++)
      if ((*k)-- == 0) return &op->results[i];
    for (int r = 0; r < op->nregions; r++) {
      for (uint32_t i = 0; i < op->regions[r].nargs; i++)
        if ((*k)-- == 0) return &op->regions[r].args[i];
      Value *v = nth_in_block(&op->regions[r], k);
      if (v) return v;
    }
  }
  return NULL;
}

/* %N of the printed kernel. */
static const Value *val(const Fx *fx, int n) {
  int k = n;
  Value *v = nth_in_block(&fx->f->body, &k);
  cr_assert_not_null(v, "no value %%%d", n);
  return v;
}

static const Value *param(const Fx *fx, const char *name) {
  for (uint32_t i = 0; i < fx->f->body.nargs; i++)
    if (strcmp(fx->f->params[i].name, name) == 0) return &fx->f->body.args[i];
  cr_assert_fail("no parameter %s", name);
  return NULL;
}

typedef struct OpSearch {
  OpKind kind;
  int skip;
  const Op *found;
} OpSearch;

static void find_visit(Op *op, void *user) {
  OpSearch *s = user;
  if (!s->found && op->kind == s->kind && s->skip-- == 0) s->found = op;
}

/* The n-th op of a kind, depth first in textual order. */
static const Op *nth_op(const Fx *fx, OpKind kind, int n) {
  OpSearch s = {kind, n, NULL};
  ir_walk_block(&fx->f->body, find_visit, &s);
  cr_assert_not_null(s.found, "no %s number %d", op_info[kind].name, n);
  return s.found;
}

static const Value *load_ptr(const Fx *fx, int n) { return nth_op(fx, OP_LOAD, n)->operands[0]; }
static const Value *load_mask(const Fx *fx, int n) {
  const Op *op = nth_op(fx, OP_LOAD, n);
  cr_assert_eq(op->noperands, 3, "load %d has no mask", n);
  return op->operands[1];
}

static void expect(const Fx *fx, const Value *v, int d, int64_t contig, int64_t div, int64_t constancy) {
  AxisInfo x = axis_info(fx->an, v);
  cr_expect_eq(x.contiguity[d], contig, "contiguity[%d] = %lld, expected %lld", d, (long long)x.contiguity[d],
               (long long)contig);
  cr_expect_eq(x.divisibility[d], div, "divisibility[%d] = %lld, expected %lld", d,
               (long long)x.divisibility[d], (long long)div);
  cr_expect_eq(x.constancy[d], constancy, "constancy[%d] = %lld, expected %lld", d, (long long)x.constancy[d],
               (long long)constancy);
}

static int64_t contig(const Fx *fx, const Value *v, int d) { return axis_info(fx->an, v).contiguity[d]; }
static int64_t divis(const Fx *fx, const Value *v, int d) { return axis_info(fx->an, v).divisibility[d]; }
static int64_t constancy(const Fx *fx, const Value *v, int d) { return axis_info(fx->an, v).constancy[d]; }

/* ---- 1-D pointer tiles from source --------------------------------------- */

static const char vadd_aligned[] =
    "kernel vadd(z: *f32 align(16), x: *f32 align(16), n: i32, const BLOCK: i32 = 1024) {\n"
    "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    store(z + offs, load(x + offs) + 1.0);\n"
    "}\n";

Test(axisinfo, aligned_contiguous_pointer_gives_vector_of_four) {
  Fx fx;
  fx_tile(&fx, vadd_aligned, "vadd");
  const Value *p = load_ptr(&fx, 0);
  expect(&fx, p, 0, 1024, 16, 1);
  cr_expect_eq(axis_vector_width(fx.an, p, NULL, WIDE), 4);
  cr_expect_eq(axis_vector_width(fx.an, p, NULL, PER_THREAD_2), 2);
  cr_expect_eq(axis_vector_width(fx.an, p, NULL, 1), 1);
  fx_free(&fx);
}

Test(axisinfo, unaligned_pointer_gives_scalar_access) {
  Fx fx;
  fx_tile(&fx,
          "kernel vadd(z: *f32, x: *f32, const BLOCK: i32 = 1024) {\n"
          "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
          "    store(z + offs, load(x + offs));\n"
          "}\n",
          "vadd");
  const Value *p = load_ptr(&fx, 0);
  expect(&fx, p, 0, 1024, 1, 1);
  cr_expect_eq(axis_vector_width(fx.an, p, NULL, WIDE), 1);
  fx_free(&fx);
}

Test(axisinfo, odd_offset_breaks_alignment_not_contiguity) {
  Fx fx;
  fx_tile(&fx,
          "kernel k(z: *f32 align(16), x: *f32 align(16), const BLOCK: i32 = 1024) {\n"
          "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
          "    store(z + offs, load(x + offs + 1) + load(x + (offs + 3)));\n"
          "}\n",
          "k");
  for (int i = 0; i < 2; i++) {
    const Value *p = load_ptr(&fx, i);
    expect(&fx, p, 0, 1024, 4, 1);
    cr_expect_eq(axis_vector_width(fx.an, p, NULL, WIDE), 1);
  }
  fx_free(&fx);
}

Test(axisinfo, element_size_sets_the_vector_width) {
  Fx fx;
  fx_tile(&fx,
          "kernel k(a: *bf16 align(16), b: *f64 align(16), c: *i8 align(16), d: *bf16 align(8)) {\n"
          "    let i = arange(0, 256);\n"
          "    store(a + i, load(a + i));\n"
          "    store(b + i, load(b + i));\n"
          "    store(c + i, load(c + i));\n"
          "    store(d + i, load(d + i));\n"
          "}\n",
          "k");
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 0), NULL, WIDE), 8);
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 0), NULL, 4), 4);
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 1), NULL, WIDE), 2);
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 2), NULL, WIDE), 16);
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 3), NULL, WIDE), 4);
  fx_free(&fx);
}

/* ---- masks --------------------------------------------------------------- */

static const char masked_vadd[] =
    "kernel vadd(z: *f32 align(16), x: *f32 align(16), n: i32 %s, const BLOCK: i32 = 1024) {\n"
    "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    let mask = offs < n;\n"
    "    store(z + offs, load(x + offs, mask, 0.0), mask);\n"
    "}\n";

static void masked_fixture(Fx *fx, const char *fact) {
  char src[sizeof masked_vadd + 32];
  snprintf(src, sizeof src, masked_vadd, fact);
  fx_tile(fx, src, "vadd");
}

Test(axisinfo, mask_against_multiple_of_16_is_constant_over_16) {
  Fx fx;
  masked_fixture(&fx, "multiple_of(16)");
  cr_expect_eq(constancy(&fx, load_mask(&fx, 0), 0), 16);
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 0), load_mask(&fx, 0), WIDE), 4);
  fx_free(&fx);
}

Test(axisinfo, mask_against_unknown_bound_limits_the_vector) {
  Fx fx;
  masked_fixture(&fx, "");
  cr_expect_eq(constancy(&fx, load_mask(&fx, 0), 0), 1);
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 0), load_mask(&fx, 0), WIDE), 1);
  cr_expect_eq(axis_vector_width(fx.an, load_ptr(&fx, 0), NULL, WIDE), 4);
  fx_free(&fx);
}

Test(axisinfo, comparison_direction_matters) {
  /* %1 = offs (runs of 64 starting at multiples of 64), %2 = n (multiple
   * of 16) broadcast: offs < n and offs >= n flip at a multiple of 16;
   * offs <= n and offs > n flip one element later. */
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%n: i32 multiple_of(16), %p: *i1[64]) {\n"
        "  %0 = arange {start = 64, end = 128} : i32[64]\n"
        "  %1 = add %0, %0 : i32[64]\n"
        "  %2 = broadcast %n : i32[64]\n"
        "  %3 = cmp_lt %0, %2 : i1[64]\n"
        "  %4 = cmp_ge %0, %2 : i1[64]\n"
        "  %5 = cmp_le %0, %2 : i1[64]\n"
        "  %6 = cmp_gt %0, %2 : i1[64]\n"
        "  %7 = cmp_gt %2, %0 : i1[64]\n"
        "  %8 = cmp_le %2, %0 : i1[64]\n"
        "  %9 = cmp_eq %0, %2 : i1[64]\n"
        "  %10 = cmp_lt %2, %0 : i1[64]\n"
        "  %11 = cmp_lt %1, %2 : i1[64]\n"
        "  %12 = cmp_lt %2, %2 : i1[64]\n"
        "  store %p, %3\n"
        "  return\n"
        "}\n");
  int64_t expected[] = {16, 16, 1, 1, 16, 16, 1, 1, 1, 64};
  for (int i = 0; i < 10; i++)
    cr_expect_eq(constancy(&fx, val(&fx, 3 + i), 0), expected[i], "%%%d: constancy %lld, expected %lld", 3 + i,
                 (long long)constancy(&fx, val(&fx, 3 + i), 0), (long long)expected[i]);
  fx_free(&fx);
}

/* ---- 2-D pointer tiles --------------------------------------------------- */

static const char tile2d[] =
    "kernel k(out: *f32 align(16), p: *f32 align(16), stride: i32 multiple_of(8),\n"
    "         const BM: i32 = 32, const BN: i32 = 64) {\n"
    "    let rows = arange(0, BM);\n"
    "    let cols = arange(0, BN);\n"
    "    let a = load(p + rows[:, None] * stride + cols[None, :]);\n"
    "    let b = load(p + rows[:, None] + cols[None, :] * stride);\n"
    "    store(out + rows[:, None] * stride + cols[None, :], a + b);\n"
    "}\n";

Test(axisinfo, row_major_2d_tile_is_contiguous_along_columns) {
  Fx fx;
  fx_tile(&fx, tile2d, "k");
  const Value *p = load_ptr(&fx, 0);
  expect(&fx, p, 1, 64, 16, 1);
  cr_expect_eq(contig(&fx, p, 0), 1);
  cr_expect_eq(axis_vector_width(fx.an, p, NULL, WIDE), 4);
  fx_free(&fx);
}

Test(axisinfo, transposed_2d_access_is_not_contiguous_along_the_last_dim) {
  Fx fx;
  fx_tile(&fx, tile2d, "k");
  const Value *p = load_ptr(&fx, 1);
  cr_expect_eq(contig(&fx, p, 1), 1);
  cr_expect_eq(contig(&fx, p, 0), 32);
  cr_expect_eq(divis(&fx, p, 0), 16);
  cr_expect_eq(axis_vector_width(fx.an, p, NULL, WIDE), 1);
  fx_free(&fx);
}

Test(axisinfo, stride_without_multiple_of_loses_row_alignment) {
  Fx fx;
  fx_tile(&fx,
          "kernel k(p: *f32 align(16), stride: i32, const BM: i32 = 8, const BN: i32 = 32) {\n"
          "    let ptrs = p + arange(0, BM)[:, None] * stride + arange(0, BN)[None, :];\n"
          "    store(ptrs, load(ptrs) * 2.0);\n"
          "}\n",
          "k");
  const Value *p = load_ptr(&fx, 0);
  expect(&fx, p, 1, 32, 4, 1);
  cr_expect_eq(axis_vector_width(fx.an, p, NULL, WIDE), 1);
  fx_free(&fx);
}

/* ---- loops --------------------------------------------------------------- */

static const char bf16_loop[] =
    "kernel k(out: *bf16 align(16), p: *bf16 align(16), n: i32, const STEP: i32 = %d) {\n"
    "    var q = p + arange(0, 128);\n"
    "    var acc = arange(0, 128) as f32;\n"
    "    for i in range(0, n, 1) {\n"
    "        acc = acc + load(q) as f32;\n"
    "        q = q + STEP;\n"
    "    }\n"
    "    store(out + arange(0, 128), acc as bf16);\n"
    "    store(out + arange(0, 128), load(q));\n"
    "}\n";

static void loop_fixture(Fx *fx, int step) {
  char src[sizeof bf16_loop + 16];
  snprintf(src, sizeof src, bf16_loop, step);
  fx_tile(fx, src, "k");
}

Test(axisinfo, loop_carried_pointer_advanced_by_16_bytes_keeps_alignment) {
  Fx fx;
  loop_fixture(&fx, 8); /* 8 bf16 = 16 bytes */
  const Value *in_loop = load_ptr(&fx, 0), *after = load_ptr(&fx, 1);
  cr_assert_null(in_loop->def, "the loaded pointer should be the iter arg");
  expect(&fx, in_loop, 0, 128, 16, 1);
  expect(&fx, after, 0, 128, 16, 1);
  cr_expect_eq(axis_vector_width(fx.an, in_loop, NULL, WIDE), 8);
  fx_free(&fx);
}

Test(axisinfo, loop_carried_pointer_advanced_by_one_element_is_misaligned) {
  Fx fx;
  loop_fixture(&fx, 1);
  const Value *in_loop = load_ptr(&fx, 0), *after = load_ptr(&fx, 1);
  expect(&fx, in_loop, 0, 128, 2, 1);
  expect(&fx, after, 0, 128, 2, 1);
  cr_expect_eq(axis_vector_width(fx.an, in_loop, NULL, WIDE), 1);
  fx_free(&fx);
}

Test(axisinfo, induction_variable_divisibility_and_nested_fixpoint) {
  /* %8 = iv (lo 32, step 16); the outer loop carries %9, which the inner
   * loop advances by 12 floats (48 bytes): 16-byte alignment survives both
   * loops; the carried index %10 gains 2 per trip: divisibility 2. */
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%p: *f32 align(64), %n: i32) {\n"
        "  %0 = const 32 : i32\n"
        "  %1 = const 16 : i32\n"
        "  %2 = arange {start = 0, end = 64} : i32[64]\n"
        "  %3 = broadcast %p : *f32[64]\n"
        "  %4 = ptr_add %3, %2 : *f32[64]\n"
        "  %5 = const 12 : i32[64]\n"
        "  %6, %7 = for %8 = %0 to %n step %1 iter(%9 = %4, %10 = %0) {\n"
        "    %11, %12 = for %13 = %0 to %n step %1 iter(%14 = %9, %15 = %10) {\n"
        "      %16 = load %14 : f32[64]\n"
        "      store %14, %16\n"
        "      %17 = ptr_add %14, %5 : *f32[64]\n"
        "      %18 = const 2 : i32\n"
        "      %19 = add %15, %18 : i32\n"
        "      yield %17, %19\n"
        "    }\n"
        "    yield %11, %12\n"
        "  }\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 8), 0, 1, 16, 1);   /* outer iv */
  expect(&fx, val(&fx, 13), 0, 1, 16, 1);  /* inner iv */
  expect(&fx, val(&fx, 9), 0, 64, 16, 1);  /* outer iter pointer */
  expect(&fx, val(&fx, 10), 0, 1, 2, 1);   /* outer iter index */
  expect(&fx, val(&fx, 14), 0, 64, 16, 1); /* inner iter pointer */
  expect(&fx, val(&fx, 15), 0, 1, 2, 1);
  expect(&fx, val(&fx, 6), 0, 64, 16, 1); /* results */
  expect(&fx, val(&fx, 7), 0, 1, 2, 1);
  cr_expect_eq(axis_vector_width(fx.an, val(&fx, 14), NULL, WIDE), 4);
  fx_free(&fx);
}

Test(axisinfo, while_and_if_meet_their_inputs) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%p: *f32 align(16), %c: i1, %n: i32) {\n"
        "  %0 = arange {start = 0, end = 64} : i32[64]\n"
        "  %1 = arange {start = 16, end = 80} : i32[64]\n"
        "  %2 = if %c -> i32[64] {\n"
        "    yield %0\n"
        "  } else {\n"
        "    yield %1\n"
        "  }\n"
        "  %3 = broadcast %p : *f32[64]\n"
        "  %4 = ptr_add %3, %2 : *f32[64]\n"
        "  %5 = const 8 : i32[64]\n"
        "  %6 = const 2 : i32[64]\n"
        "  %7, %8 = while (%9 = %4, %10 = %4) {\n"
        "    %11 = load %9 : f32[64]\n"
        "    store %10, %11\n"
        "    yield %c\n"
        "  } do (%12, %13) {\n"
        "    %14 = ptr_add %12, %5 : *f32[64]\n"
        "    %15 = ptr_add %13, %6 : *f32[64]\n"
        "    yield %14, %15\n"
        "  }\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 2), 0, 64, 16, 1);
  expect(&fx, val(&fx, 4), 0, 64, 16, 1);
  expect(&fx, val(&fx, 9), 0, 64, 16, 1); /* advanced by 32 bytes */
  expect(&fx, val(&fx, 7), 0, 64, 16, 1);
  expect(&fx, val(&fx, 10), 0, 64, 8, 1); /* advanced by 8 bytes */
  expect(&fx, val(&fx, 13), 0, 64, 8, 1);
  expect(&fx, val(&fx, 8), 0, 64, 8, 1);
  fx_free(&fx);
}

/* ---- sources and shapes ---------------------------------------------------- */

Test(axisinfo, constants_and_parameters) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%a: i32 multiple_of(24), %b: i32, %c: i64 multiple_of(4096), %x: *f16 align(32), "
        "%y: *f16, %f: f32) {\n"
        "  %0 = const 48 : i32[64]\n"
        "  %1 = const 0 : i32[4, 8]\n"
        "  %2 = const -8 : i32\n"
        "  %3 = const 3 : i32[16]\n"
        "  %4 = const 2.0 : f32[16]\n"
        "  %5 = program_id {axis = 0} : i32\n"
        "  return\n"
        "}\n");
  expect(&fx, param(&fx, "a"), 0, 1, 8, 1);
  expect(&fx, param(&fx, "b"), 0, 1, 1, 1);
  expect(&fx, param(&fx, "c"), 0, 1, CAP, 1);
  expect(&fx, param(&fx, "x"), 0, 1, 32, 1);
  expect(&fx, param(&fx, "y"), 0, 1, 1, 1);
  expect(&fx, param(&fx, "f"), 0, 1, 1, 1);
  expect(&fx, val(&fx, 0), 0, 1, 16, 64);
  expect(&fx, val(&fx, 1), 0, 1, CAP, 4);
  expect(&fx, val(&fx, 1), 1, 1, CAP, 8);
  expect(&fx, val(&fx, 2), 0, 1, 8, 1);
  expect(&fx, val(&fx, 3), 0, 1, 1, 16);
  expect(&fx, val(&fx, 4), 0, 1, 1, 16);
  expect(&fx, val(&fx, 5), 0, 1, 1, 1);
  fx_free(&fx);
}

Test(axisinfo, arange_broadcast_expand_dims_and_trans) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%n: i32 multiple_of(4), %o: *i32[16, 8]) {\n"
        "  %0 = arange {start = 8, end = 24} : i32[16]\n"
        "  %1 = arange {start = 0, end = 8} : i32[8]\n"
        "  %2 = broadcast %n : i32[16, 8]\n"
        "  %3 = expand_dims %1 {axis = 0} : i32[1, 8]\n"
        "  %4 = broadcast %3 : i32[16, 8]\n"
        "  %5 = trans %4 {perm = [1, 0]} : i32[8, 16]\n"
        "  %6 = expand_dims %0 {axis = 1} : i32[16, 1]\n"
        "  store %o, %4\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 0), 0, 16, 8, 1);
  expect(&fx, val(&fx, 1), 0, 8, CAP, 1);
  expect(&fx, val(&fx, 2), 0, 1, 4, 16);
  expect(&fx, val(&fx, 2), 1, 1, 4, 8);
  expect(&fx, val(&fx, 3), 0, 1, 1, 1); /* the new dim: elements 0..7 */
  expect(&fx, val(&fx, 3), 1, 8, CAP, 1);
  expect(&fx, val(&fx, 4), 0, 1, 1, 16);
  expect(&fx, val(&fx, 4), 1, 8, CAP, 1);
  expect(&fx, val(&fx, 5), 0, 8, CAP, 1);
  expect(&fx, val(&fx, 5), 1, 1, 1, 16);
  expect(&fx, val(&fx, 6), 0, 16, 8, 1);
  expect(&fx, val(&fx, 6), 1, 1, 1, 1);
  fx_free(&fx);
}

Test(axisinfo, reshape_maps_unit_dims_and_keeps_unchanged_rows) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%n: i32 multiple_of(8), %o: *i32[64]) {\n"
        "  %0 = arange {start = 0, end = 16} : i32[16]\n"
        "  %1 = reshape %0 : i32[1, 16, 1]\n"
        "  %2 = broadcast %1 : i32[4, 16, 1]\n"
        "  %3 = reshape %2 : i32[64]\n"
        "  %4 = reshape %2 : i32[4, 4, 4]\n"
        "  %5 = broadcast %n : i32[4, 16]\n"
        "  %6 = reshape %5 : i32[64]\n"
        "  %7 = arange {start = 0, end = 32} : i32[32]\n"
        "  %8 = reshape %7 : i32[2, 16]\n"
        "  %9 = reshape %8 : i32[2, 2, 8]\n"
        "  store %o, %3\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 1), 1, 16, CAP, 1);
  expect(&fx, val(&fx, 1), 0, 1, 1, 1);
  expect(&fx, val(&fx, 3), 0, 1, 1, 1);  /* rows folded into one: reset */
  expect(&fx, val(&fx, 4), 2, 1, 1, 1);  /* last dim changed: reset */
  expect(&fx, val(&fx, 6), 0, 1, 8, 64); /* a splat stays a splat */
  expect(&fx, val(&fx, 8), 1, 16, 16, 1); /* the second row starts at 16 */
  expect(&fx, val(&fx, 9), 2, 8, 8, 1); /* split rows: runs cut to 8 */
  expect(&fx, val(&fx, 9), 1, 1, 1, 1);
  fx_free(&fx);
}

/* ---- arithmetic ------------------------------------------------------------ */

Test(axisinfo, add_sub_mul) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%n: i32 multiple_of(32), %o: *i32[64]) {\n"
        "  %0 = arange {start = 0, end = 64} : i32[64]\n"
        "  %1 = const 8 : i32[64]\n"
        "  %2 = sub %0, %1 : i32[64]\n"
        "  %3 = sub %1, %0 : i32[64]\n"
        "  %4 = const 1 : i32[64]\n"
        "  %5 = mul %0, %4 : i32[64]\n"
        "  %6 = const 4 : i32[64]\n"
        "  %7 = mul %0, %6 : i32[64]\n"
        "  %8 = broadcast %n : i32[64]\n"
        "  %9 = mul %8, %6 : i32[64]\n"
        "  %10 = add %0, %0 : i32[64]\n"
        "  %11 = add %8, %0 : i32[64]\n"
        "  %12 = add %8, %1 : i32[64]\n"
        "  store %o, %2\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 2), 0, 64, 8, 1);
  expect(&fx, val(&fx, 3), 0, 1, 1, 1);
  expect(&fx, val(&fx, 5), 0, 64, CAP, 1);
  expect(&fx, val(&fx, 7), 0, 1, 4, 1);
  expect(&fx, val(&fx, 9), 0, 1, 128, 64);
  expect(&fx, val(&fx, 10), 0, 1, 1, 1);
  expect(&fx, val(&fx, 11), 0, 64, 32, 1);
  expect(&fx, val(&fx, 12), 0, 1, 8, 64);
  fx_free(&fx);
}

Test(axisinfo, division_and_remainder_by_powers_of_two) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%n: i32, %m: u32, %o: *i32[64]) {\n"
        "  %0 = arange {start = 0, end = 64} : i32[64]\n"
        "  %1 = const 4 : i32[64]\n"
        "  %2 = div %0, %1 : i32[64]\n"
        "  %3 = const 8 : i32[64]\n"
        "  %4 = rem %0, %3 : i32[64]\n"
        "  %5 = broadcast %n : i32[64]\n"
        "  %6 = add %5, %0 : i32[64]\n"
        "  %7 = div %6, %1 : i32[64]\n"
        "  %8 = rem %6, %3 : i32[64]\n"
        "  %9 = const 3 : i32[64]\n"
        "  %10 = div %0, %9 : i32[64]\n"
        "  %11 = arange {start = 32, end = 96} : i32[64]\n"
        "  %12 = mul %11, %1 : i32[64]\n"
        "  %13 = rem %12, %1 : i32[64]\n"
        "  %14 = div %12, %1 : i32[64]\n"
        "  store %o, %2\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 2), 0, 1, 1, 4);
  expect(&fx, val(&fx, 4), 0, 8, CAP, 1);
  expect(&fx, val(&fx, 7), 0, 1, 1, 1); /* n may be negative: truncation */
  expect(&fx, val(&fx, 8), 0, 1, 1, 1);
  expect(&fx, val(&fx, 10), 0, 1, 1, 1);
  expect(&fx, val(&fx, 13), 0, 1, CAP, 64); /* all zero */
  expect(&fx, val(&fx, 14), 0, 1, 1, 1);
  fx_free(&fx);
}

Test(axisinfo, shifts_and_bitwise_ops) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%n: i32 multiple_of(4), %o: *i32[64]) {\n"
        "  %0 = broadcast %n : i32[64]\n"
        "  %1 = const 3 : i32[64]\n"
        "  %2 = shl %0, %1 : i32[64]\n"
        "  %3 = arange {start = -64, end = 0} : i32[64]\n"
        "  %4 = const 2 : i32[64]\n"
        "  %5 = shr %3, %4 : i32[64]\n"
        "  %6 = shl %3, %4 : i32[64]\n"
        "  %7 = const -16 : i32[64]\n"
        "  %8 = and %3, %7 : i32[64]\n"
        "  %9 = or %0, %2 : i32[64]\n"
        "  %10 = xor %3, %0 : i32[64]\n"
        "  store %o, %2\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 2), 0, 1, 32, 64);
  expect(&fx, val(&fx, 5), 0, 1, 1, 4); /* arithmetic shift: floor, also for negatives */
  expect(&fx, val(&fx, 6), 0, 1, 4, 1);
  expect(&fx, val(&fx, 8), 0, 1, 16, 1);
  expect(&fx, val(&fx, 9), 0, 1, 4, 64);
  expect(&fx, val(&fx, 10), 0, 1, 1, 1);
  fx_free(&fx);
}

Test(axisinfo, select_and_casts) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%c: i1, %m: i1[64], %o: *i32[64]) {\n"
        "  %0 = arange {start = 0, end = 64} : i32[64]\n"
        "  %1 = arange {start = 64, end = 128} : i32[64]\n"
        "  %2 = broadcast %c : i1[64]\n"
        "  %3 = select %2, %0, %1 : i32[64]\n"
        "  %4 = select %m, %0, %1 : i32[64]\n"
        "  %5 = cast %0 : i64[64]\n"
        "  %6 = cast %0 : f32[64]\n"
        "  %7 = cast %0 : i8[64]\n"
        "  %8 = const 5 : i32[64]\n"
        "  %9 = cast %8 : f32[64]\n"
        "  %10 = arange {start = 100, end = 164} : i32[64]\n"
        "  %11 = cast %10 : i8[64]\n"
        "  %12 = cast %11 : i32[64]\n"
        "  store %o, %3\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 3), 0, 64, 64, 1);
  expect(&fx, val(&fx, 4), 0, 1, 1, 1);
  expect(&fx, val(&fx, 5), 0, 64, CAP, 1);
  expect(&fx, val(&fx, 6), 0, 1, 1, 1);
  expect(&fx, val(&fx, 7), 0, 64, CAP, 1);
  expect(&fx, val(&fx, 9), 0, 1, 1, 64);
  expect(&fx, val(&fx, 11), 0, 64, 4, 1); /* wraps at 127 -> -128, modulo 2^8 */
  expect(&fx, val(&fx, 12), 0, 4, 4, 1);  /* sign extension keeps aligned runs of 4 only */
  fx_free(&fx);
}

Test(axisinfo, narrowing_casts_cut_runs_to_half_the_range) {
  /* 256..511 as i8 is 0..127, -128..-1: two runs of 128, the second
   * starting at -128, which is a multiple of 128 but not of 256. */
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%o: *i8[256]) {\n"
        "  %0 = arange {start = 256, end = 512} : i32[256]\n"
        "  %1 = cast %0 : i8[256]\n"
        "  %2 = cast %1 : i64[256]\n"
        "  %3 = cast %0 : i16[256]\n"
        "  store %o, %1\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 0), 0, 256, 256, 1);
  expect(&fx, val(&fx, 1), 0, 128, 128, 1);
  expect(&fx, val(&fx, 2), 0, 128, 128, 1);
  expect(&fx, val(&fx, 3), 0, 256, 256, 1);
  fx_free(&fx);
}

Test(axisinfo, loads_of_one_address_are_constant) {
  Fx fx;
  fx_ir(&fx,
        "kernel @k(%p: *f32, %o: *f32[32]) {\n"
        "  %0 = broadcast %p : *f32[32]\n"
        "  %1 = load %0 : f32[32]\n"
        "  %2 = arange {start = 0, end = 32} : i32[32]\n"
        "  %3 = ptr_add %0, %2 : *f32[32]\n"
        "  %4 = load %3 : f32[32]\n"
        "  store %o, %1\n"
        "  return\n"
        "}\n");
  expect(&fx, val(&fx, 1), 0, 1, 1, 32);
  expect(&fx, val(&fx, 4), 0, 1, 1, 1);
  fx_free(&fx);
}

/* ---- keying and robustness --------------------------------------------------- */

static void clobber_id(Op *op, void *user) {
  (void)user;
  op->scratch = 0;
  for (uint32_t i = 0; i < op->nresults; i++) op->results[i].id = 0;
  for (int r = 0; r < op->nregions; r++)
    for (uint32_t i = 0; i < op->regions[r].nargs; i++) op->regions[r].args[i].id = 0;
}

Test(axisinfo, facts_survive_renumbering_and_unknown_values_are_conservative) {
  Fx fx;
  fx_tile(&fx, vadd_aligned, "vadd");
  ir_walk_block(&fx.f->body, clobber_id, NULL);
  StrBuf sb;
  sb_init(&sb);
  ir_print_func(fx.f, &sb); /* the printer renumbers too */
  sb_free(&sb);
  const Value *p = load_ptr(&fx, 0);
  expect(&fx, p, 0, 1024, 16, 1);
  Value stranger = {.type = p->type};
  expect(&fx, &stranger, 0, 1, 1, 1);
  cr_expect_eq(axis_vector_width(fx.an, &stranger, NULL, WIDE), 1);
  fx_free(&fx);
}

/* Every kernel of the standard library analyzes (under the sanitizers) and
 * gives widths between 1 and 16 bytes' worth for every load and store. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  buf[got] = 0;
  fclose(f);
  return buf;
}

static char *copy_text(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(malloc(n), s, n);
}

static void check_widths(Op *op, void *user) {
  const AxisAnalysis *an = user;
  if (op->kind != OP_LOAD && op->kind != OP_STORE) return;
  const Value *ptr = op->operands[0];
  const Value *mask = op->noperands == 3 ? op->operands[op->kind == OP_LOAD ? 1 : 2] : NULL;
  int w = axis_vector_width(an, ptr, mask, WIDE);
  int most = 16 / scalar_bytes((ScalarKind)ptr->type.pointee);
  cr_expect(w >= 1 && w <= (most > 1 ? most : 1), "width %d", w);
}

Test(axisinfo, standard_library_kernels) {
  static const char *const files[] = {"softmax", "layernorm", "gemm", "flash_attention"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/lang/std/%s.tile", TILE_SOURCE_ROOT, files[i]);
    char *src = read_file(path);
    tc_options opt = {0};
    tc_compilation *c = tc_compile(path, src, strlen(src), &opt);
    cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
    char *ir = tc_emit(c, TC_EMIT_IR);
    int nkernels = tc_kernel_count(c);
    for (int k = 0; k < nkernels; k++) {
      Fx fx;
      fx_module(&fx, copy_text(ir), tc_kernel_name(c, k));
      ir_walk_block(&fx.f->body, check_widths, fx.an);
      fx_free(&fx);
    }
    tc_free(c);
    free(ir);
    free(src);
  }
}
