/* test_roundtrip.c - print, parse, print is the identity on the IR of every
 * kernel of lang/std and tests/kernels (optimized and unoptimized, and in
 * several specializations), and the parsed IR passes the verifier. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/ir.h"

static const char *const kernel_files[] = {
    "lang/std/softmax.tile",         "lang/std/layernorm.tile",     "lang/std/gemm.tile",
    "lang/std/flash_attention.tile", "tests/kernels/vector_add.tile", "tests/kernels/reductions.tile",
    "tests/kernels/casts.tile",      "tests/kernels/atomics.tile",   "tests/kernels/naive_attention.tile",
    "tests/kernels/scans.tile",
};

static void check_roundtrip(const char *path, bool no_opt, const tc_define *defs, int ndefs) {
  size_t len;
  char *src = harness_read_source(path, &len);
  tc_options opt = {.defines = defs, .ndefines = ndefs, .no_opt = no_opt, .verify_each_pass = true};
  tc_compilation *c = tc_compile(path, src, len, &opt);
  free(src);
  cr_assert(tc_error_count(c) == 0, "%s:\n%s", path, tc_diagnostics(c));
  char *first = tc_emit(c, TC_EMIT_IR);
  cr_assert(first);

  Arena arena;
  arena_init(&arena);
  Source text = {"roundtrip.ir", first, strlen(first), 0};
  Diags diags;
  diags_init(&diags, &arena, &text);
  Module *m = ir_parse(&arena, &text, &diags);
  StrBuf errs;
  sb_init(&errs);
  diags_render_all(&diags, &errs);
  cr_assert(m && diags.errors == 0, "%s: parsing the printed IR failed:\n%s", path, errs.data ? errs.data : "");
  cr_assert(ir_verify_module(m, &diags), "%s: the parsed IR does not verify", path);
  StrBuf second;
  sb_init(&second);
  ir_print_module(m, &second);
  cr_assert_str_eq(second.data, first, "%s: print(parse(print(ir))) differs", path);
  sb_free(&second);
  sb_free(&errs);
  arena_free(&arena);
  free(first);
  tc_free(c);
}

Test(roundtrip, every_kernel_optimized) {
  for (size_t i = 0; i < sizeof kernel_files / sizeof kernel_files[0]; i++) check_roundtrip(kernel_files[i], false, NULL, 0);
}

Test(roundtrip, every_kernel_unoptimized) {
  for (size_t i = 0; i < sizeof kernel_files / sizeof kernel_files[0]; i++) check_roundtrip(kernel_files[i], true, NULL, 0);
}

Test(roundtrip, specializations) {
  const tc_define causal[] = {{"CAUSAL", "true"}, {"HEAD_DIM", "128"}, {"T", "f16"}};
  check_roundtrip("lang/std/flash_attention.tile", false, causal, 3);
  const tc_define gemm[] = {{"T", "f8e4m3"}, {"TC", "bf16"}, {"BLOCK_K", "64"}};
  check_roundtrip("lang/std/gemm.tile", false, gemm, 3);
  const tc_define ln[] = {{"T", "bf16"}, {"BLOCK", "256"}};
  check_roundtrip("lang/std/layernorm.tile", true, ln, 2);
}
