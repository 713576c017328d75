/* test_passes_text.c - the optimization passes on kernels written in the
 * IR's textual form (compiler/ir/parse.c), checked by the verifier before
 * and after each pass and compared as printed text.  The builder-based unit
 * tests of each pass are in test_passes.c; these check that the passes
 * leave valid IR behind on realistic shapes (tiles, nested loops and ifs,
 * iter args) and show the expected result at a glance.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/ir/ir.h"
#include "../../compiler/passes/passes.h"

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

/* ---- harness ------------------------------------------------------------ */

typedef bool (*PassFn)(Func *f, Arena *a);

static void assert_valid(const Func *f, Arena *a, const char *when) {
  Diags d;
  diags_init(&d, a, NULL);
  bool ok = ir_verify_func(f, &d);
  StrBuf sb;
  sb_init(&sb);
  diags_render_all(&d, &sb);
  ir_print_func(f, &sb);
  cr_assert(ok, "invalid IR %s:\n%s", when, sb.data);
  sb_free(&sb);
}

/* Parses one kernel (the module line is added), checks it is valid, runs
 * `pass`, checks again and compares the printed kernel with `expected`.
 * Returns whether the pass reported a change. */
static bool run_text(PassFn pass, const char *kernel, const char *expected) {
  static const char header[] = "module \"t\"\n\n";
  size_t n = strlen(header) + strlen(kernel);
  char *text = malloc(n + 1);
  snprintf(text, n + 1, "%s%s", header, kernel);
  Arena a;
  arena_init(&a);
  Source src = {"t.ir", text, n, 0};
  Diags d;
  diags_init(&d, &a, &src);
  Module *m = ir_parse(&a, &src, &d);
  if (!m) {
    StrBuf sb;
    sb_init(&sb);
    diags_render_all(&d, &sb);
    cr_assert_fail("parse error:\n%s", sb.data);
  }
  assert_valid(m->funcs[0], &a, "before the pass");
  bool changed = pass(m->funcs[0], &a);
  assert_valid(m->funcs[0], &a, "after the pass");
  assert_text(m->funcs[0], expected);
  arena_free(&a);
  free(text);
  return changed;
}

/* The whole pipeline as one PassFn, verifying after every pass. */
static bool pipeline_verified(Func *f, Arena *a) {
  Diags d;
  diags_init(&d, a, NULL);
  PassOptions opt = {.verify_each = true, .diags = &d};
  bool ok = passes_run_func(f, a, &opt);
  StrBuf sb;
  sb_init(&sb);
  diags_render_all(&d, &sb);
  cr_assert(ok, "pipeline produced invalid IR:\n%s", sb.data);
  sb_free(&sb);
  return true;
}

/* ---- tests -------------------------------------------------------------- */

Test(text, fold_on_tiles_and_broadcasts) {
  const char *in =
      "kernel @k(%x: i8[16], %p: *i8[16]) {\n"
      "  %0 = const 120 : i8\n"
      "  %1 = const 10 : i8\n"
      "  %2 = add %0, %1 : i8\n"
      "  %3 = broadcast %2 : i8[16]\n"
      "  %4 = const 0 : i8[16]\n"
      "  %5 = mul %3, %4 : i8[16]\n"
      "  %6 = add %x, %5 : i8[16]\n"
      "  %7 = add %6, %3 : i8[16]\n"
      "  store %p, %7\n"
      "  return\n"
      "}\n";
  /* 120 + 10 = 130 wraps to -126; (-126) * 0 folds to 0; x + 0 is x */
  run_text(pass_fold, in,
           "kernel @k(%x: i8[16], %p: *i8[16]) {\n"
           "  %0 = const 120 : i8\n"
           "  %1 = const 10 : i8\n"
           "  %2 = const -126 : i8\n"
           "  %3 = const -126 : i8[16]\n"
           "  %4 = const 0 : i8[16]\n"
           "  %5 = const 0 : i8[16]\n"
           "  %6 = add %x, %5 : i8[16]\n"
           "  %7 = add %6, %3 : i8[16]\n"
           "  store %p, %7\n"
           "  return\n"
           "}\n");
}

Test(text, canon_const_if_inside_a_loop) {
  const char *in =
      "kernel @k(%x: f32, %p: *f32, %n: i32) {\n"
      "  %0 = const 0 : i32\n"
      "  %1 = const 1 : i32\n"
      "  %2 = const true : i1\n"
      "  %3 = for %4 = %0 to %n step %1 iter(%5 = %x) {\n"
      "    %6 = if %2 -> f32 {\n"
      "      %7 = mul %5, %x : f32\n"
      "      yield %7\n"
      "    } else {\n"
      "      yield %5\n"
      "    }\n"
      "    %8 = const 1.0 : f32\n"
      "    %9 = mul %8, %6 : f32\n"
      "    yield %9\n"
      "  }\n"
      "  store %p, %3\n"
      "  return\n"
      "}\n";
  cr_assert(run_text(pass_canon, in,
                     "kernel @k(%x: f32, %p: *f32, %n: i32) {\n"
                     "  %0 = const 0 : i32\n"
                     "  %1 = const 1 : i32\n"
                     "  %2 = const true : i1\n"
                     "  %3 = for %4 = %0 to %n step %1 iter(%5 = %x) {\n"
                     "    %6 = mul %5, %x : f32\n"
                     "    %7 = const 1.0 : f32\n"
                     "    yield %6\n"
                     "  }\n"
                     "  store %p, %3\n"
                     "  return\n"
                     "}\n"));
}

Test(text, dce_iter_args_stay_valid) {
  const char *in =
      "kernel @k(%x: f32[8], %p: *f32[8], %n: i32) {\n"
      "  %0 = const 0 : i32\n"
      "  %1 = const 1 : i32\n"
      "  %2, %3, %4 = for %5 = %0 to %n step %1 iter(%6 = %x, %7 = %x, %8 = %x) {\n"
      "    %9 = exp %6 : f32[8]\n"
      "    %10 = load %p : f32[8]\n"
      "    %11 = add %7, %10 : f32[8]\n"
      "    %12 = mul %8, %8 : f32[8]\n"
      "    yield %9, %11, %12\n"
      "  }\n"
      "  store %p, %3\n"
      "  return\n"
      "}\n";
  cr_assert(run_text(pass_dce, in,
                     "kernel @k(%x: f32[8], %p: *f32[8], %n: i32) {\n"
                     "  %0 = const 0 : i32\n"
                     "  %1 = const 1 : i32\n"
                     "  %2 = for %3 = %0 to %n step %1 iter(%4 = %x) {\n"
                     "    %5 = load %p : f32[8]\n"
                     "    %6 = add %4, %5 : f32[8]\n"
                     "    yield %6\n"
                     "  }\n"
                     "  store %p, %2\n"
                     "  return\n"
                     "}\n"));
}

Test(text, dce_removes_a_loop_left_without_results) {
  const char *in =
      "kernel @k(%x: i32, %p: *i32, %n: i32) {\n"
      "  %0 = const 0 : i32\n"
      "  %1 = const 1 : i32\n"
      "  %2 = for %3 = %0 to %n step %1 iter(%4 = %x) {\n"
      "    %5 = add %4, %3 : i32\n"
      "    yield %5\n"
      "  }\n"
      "  store %p, %x\n"
      "  return\n"
      "}\n";
  cr_assert(run_text(pass_dce, in,
                     "kernel @k(%x: i32, %p: *i32, %n: i32) {\n"
                     "  store %p, %x\n"
                     "  return\n"
                     "}\n"));
}

Test(text, pipeline_end_to_end_with_verification) {
  const char *in =
      "kernel @k(%x: f32[16], %p: *f32[16], %n: i32, %c: i1) {\n"
      "  %0 = const 0 : i32\n"
      "  %1 = const 1 : i32\n"
      "  %2 = const 4 : i32\n"
      "  %3 = for %4 = %0 to %n step %1 iter(%5 = %x) {\n"
      "    %6 = for %7 = %0 to %2 step %1 iter(%8 = %5) {\n"
      "      %9 = const 2.0 : f32[16]\n"
      "      %10 = mul %x, %9 : f32[16]\n"
      "      %11 = mul %x, %9 : f32[16]\n"
      "      %12 = add %10, %11 : f32[16]\n"
      "      %13 = add %8, %12 : f32[16]\n"
      "      yield %13\n"
      "    }\n"
      "    %14 = for %15 = %2 to %0 step %1 iter(%16 = %6) {\n"
      "      %17 = neg %16 : f32[16]\n"
      "      yield %17\n"
      "    }\n"
      "    %18 = if %c -> f32[16] {\n"
      "      %19 = const 2.0 : f32[16]\n"
      "      %20 = mul %x, %19 : f32[16]\n"
      "      yield %20\n"
      "    } else {\n"
      "      yield %14\n"
      "    }\n"
      "    yield %18\n"
      "  }\n"
      "  store %p, %3\n"
      "  return\n"
      "}\n";
  run_text(pipeline_verified, in,
           "kernel @k(%x: f32[16], %p: *f32[16], %n: i32, %c: i1) {\n"
           "  %0 = const 0 : i32\n"
           "  %1 = const 1 : i32\n"
           "  %2 = const 4 : i32\n"
           "  %3 = const 2.0 : f32[16]\n"
           "  %4 = mul %x, %3 : f32[16]\n"
           "  %5 = add %4, %4 : f32[16]\n"
           "  %6 = for %7 = %0 to %n step %1 iter(%8 = %x) {\n"
           "    %9 = for %10 = %0 to %2 step %1 iter(%11 = %8) {\n"
           "      %12 = add %11, %5 : f32[16]\n"
           "      yield %12\n"
           "    }\n"
           "    %13 = if %c -> f32[16] {\n"
           "      yield %4\n"
           "    } else {\n"
           "      yield %9\n"
           "    }\n"
           "    yield %13\n"
           "  }\n"
           "  store %p, %6\n"
           "  return\n"
           "}\n");
}

Test(text, canon_forwards_iter_args_the_body_yields_unchanged) {
  const char *in =
      "kernel @k(%x: i32, %p: *i32, %n: i32) {\n"
      "  %0 = const 0 : i32\n"
      "  %1 = const 1 : i32\n"
      "  %2, %3 = for %4 = %0 to %n step %1 iter(%5 = %x, %6 = %n) {\n"
      "    %7 = add %5, %6 : i32\n"
      "    store %p, %7\n"
      "    yield %7, %6\n"
      "  }\n"
      "  %8 = mul %2, %3 : i32\n"
      "  store %p, %8\n"
      "  return\n"
      "}\n";
  /* canon: %6 is %n everywhere; dce (the pipeline) then drops the iter arg */
  cr_assert(run_text(pass_canon, in,
                     "kernel @k(%x: i32, %p: *i32, %n: i32) {\n"
                     "  %0 = const 0 : i32\n"
                     "  %1 = const 1 : i32\n"
                     "  %2, %3 = for %4 = %0 to %n step %1 iter(%5 = %x, %6 = %n) {\n"
                     "    %7 = add %5, %n : i32\n"
                     "    store %p, %7\n"
                     "    yield %7, %n\n"
                     "  }\n"
                     "  %8 = mul %2, %n : i32\n"
                     "  store %p, %8\n"
                     "  return\n"
                     "}\n"));
  run_text(pipeline_verified, in,
           "kernel @k(%x: i32, %p: *i32, %n: i32) {\n"
           "  %0 = const 0 : i32\n"
           "  %1 = const 1 : i32\n"
           "  %2 = for %3 = %0 to %n step %1 iter(%4 = %x) {\n"
           "    %5 = add %4, %n : i32\n"
           "    store %p, %5\n"
           "    yield %5\n"
           "  }\n"
           "  %6 = mul %2, %n : i32\n"
           "  store %p, %6\n"
           "  return\n"
           "}\n");
}
