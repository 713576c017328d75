/* test_regressions.c - inputs that once crashed the front end, were
 * accepted silently, or got a wrong message or location. Each test pins the
 * fixed behaviour: the exact first diagnostic, or the IR/AST produced. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"

/* First line of the diagnostics (malloc'd), "" when there are none. */
static char *first_error(const char *src, const tc_define *defs, int ndefs) {
  tc_options opt = {.defines = defs, .ndefines = ndefs};
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), &opt);
  const char *d = tc_diagnostics(c);
  size_t n = strcspn(d, "\n");
  char *out = strndup(d, n);
  tc_free(c);
  return out;
}

static void expect_error(const char *src, const char *want) {
  char *got = first_error(src, NULL, 0);
  cr_expect_str_eq(got, want, "for:\n%s", src);
  free(got);
}

/* The optimized IR of src, asserting it compiles. */
static char *ir_of(const char *src) {
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  char *ir = tc_emit(c, TC_EMIT_IR);
  tc_free(c);
  return ir;
}

/* A chain of `n` copies of `link` after `head`, inside a kernel. */
static char *chain(const char *head, const char *link, int n) {
  size_t hl = strlen(head), ll = strlen(link);
  char *s = malloc(64 + hl + ll * (size_t)n);
  char *p = s + sprintf(s, "kernel k() {\n let x = %s", head);
  for (int i = 0; i < n; i++, p += ll) memcpy(p, link, ll);
  strcpy(p, ";\n}\n");
  return s;
}

Test(regressions, long_operator_chains_are_limited_not_crashing) {
  const char *links[][2] = {{"1", " + 1"}, {"1", " as i32"}, {"arange(0, 16)", "[:]"}};
  for (int i = 0; i < 3; i++) {
    char *src = chain(links[i][0], links[i][1], 50000);
    char *got = first_error(src, NULL, 0);
    cr_expect(strstr(got, "error: expression is too deeply nested (more than 1024 levels)") != NULL, "%s", got);
    free(got);
    free(src);
  }
  /* A long but reasonable chain compiles and folds. */
  char *src = chain("1", " + 1", 1000);
  char *ir = ir_of(src);
  free(ir);
  free(src);
}

Test(regressions, literal_errors_point_at_the_literal) {
  expect_error("kernel k(a: i8) { let x = a + 300; }", "t.tile:1:31: error: literal 300 does not fit in i8");
}

Test(regressions, literals_beyond_i64) {
  expect_error("kernel k(p: *i32) { store(p, 9223372036854775808); }",
               "t.tile:1:30: error: literal 9223372036854775808 does not fit in i32");
  expect_error("kernel k(p: *i64) { store(p, -9223372036854775809); }",
               "t.tile:1:30: error: literal -9223372036854775809 is out of range");
  char *ir = ir_of("kernel k(p: *u64, q: *f32) { store(p, 18446744073709551615); store(q, 18446744073709551615 as f32); }");
  cr_expect(strstr(ir, "const 18446744073709551615 : u64") != NULL, "%s", ir);
  cr_expect(strstr(ir, "const 1.8446744e+19 : f32") != NULL || strstr(ir, "const 18446744073709552000") != NULL ||
                strstr(ir, "e+19 : f32") != NULL, "%s", ir);
  free(ir);
}

Test(regressions, assignment_shape_message) {
  expect_error("kernel k() { var a = zeros([16]); a = zeros([32]); }",
               "t.tile:1:39: error: cannot assign f32[32] to variable 'a' of type f32[16]");
}

Test(regressions, nested_function_reports_one_error) {
  tc_compilation *c = tc_compile("t.tile", "kernel k() { fn g() { } }\n", 26, NULL);
  cr_expect_eq(tc_error_count(c), 1, "%s", tc_diagnostics(c));
  tc_free(c);
}

Test(regressions, type_errors_point_at_the_name) {
  expect_error("kernel k(p: *f33) { }", "t.tile:1:14: error: unknown type 'f33'");
  expect_error("kernel k(p: tensor<f33, 2>) { }", "t.tile:1:20: error: unknown type 'f33'");
}

Test(regressions, del_byte_is_a_control_character) {
  expect_error("kernel k() { let x = 1\x7f; }", "t.tile:1:23: error: unexpected control character 0x7f");
}

Test(regressions, long_literals) {
  char src[512] = "kernel k() { let x = ";
  size_t o = strlen(src);
  memset(src + o, '9', 250);
  strcpy(src + o + 250, "; }");
  expect_error(src, "t.tile:1:22: error: integer literal is too large (maximum is 18446744073709551615)");
  /* A long but valid float literal is accepted. */
  strcpy(src, "kernel k(p: *f32) { store(p, 0.");
  o = strlen(src);
  memset(src + o, '0', 240);
  strcpy(src + o + 240, "1); }");
  char *ir = ir_of(src);
  free(ir);
}

Test(regressions, hex_separators) {
  char *ir = ir_of("kernel k(p: *i32) { store(p, 0xA_E); store(p, 0xb_1); store(p, 0b1_0); }");
  cr_expect(strstr(ir, "const 174 : i32") && strstr(ir, "const 177 : i32") && strstr(ir, "const 2 : i32"), "%s", ir);
  free(ir);
}

Test(regressions, ast_escapes_strings) {
  const char *src = "kernel k() { static_assert(true, \"a\\\"b\"); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  char *ast = tc_emit(c, TC_EMIT_AST);
  cr_expect(strstr(ast, "\"a\\\"b\"") != NULL, "%s", ast);
  free(ast);
  tc_free(c);
}

Test(regressions, positional_after_named) {
  expect_error("kernel k(p: *f32) { store(p, maximum(a = 5.0, 3.0)); }",
               "t.tile:1:47: error: a positional argument cannot follow a named argument");
}

Test(regressions, helper_const_defaults) {
  char *ir = ir_of("fn add(a, const N: i32 = 4) { return a + N; }\n"
                   "kernel k(p: *i32) { store(p, add(1)); store(p + 1, add(1, N = 10)); }");
  cr_expect(strstr(ir, "const 5 : i32") && strstr(ir, "const 11 : i32"), "%s", ir);
  free(ir);
}

Test(regressions, type_parameter_used_before_bound) {
  expect_error("kernel k(p: *f32, const X: T = 1, const T: type = f32) { }",
               "t.tile:1:28: error: type parameter 'T' has no value here (parameters are bound in order)");
}

Test(regressions, literal_cast_is_exact) {
  char *ir = ir_of("kernel k(p: *f64) { store(p, 0.1 as f64); store(p + 1, 1e40 as f64); }");
  cr_expect(strstr(ir, "const 0.1 : f64") && strstr(ir, "const 1e+40 : f64"), "%s", ir);
  free(ir);
}

Test(regressions, float_literal_overflow) {
  expect_error("kernel k(p: *f32) { store(p, 1e40); }", "t.tile:1:30: error: literal 1e+40 is out of range for f32");
}

Test(regressions, fp8_mixed_arithmetic) {
  expect_error("kernel k(a: *f8e4m3, b: *f8e5m2) { let x = load(a) + load(b); }",
               "t.tile:1:52: error: operator '+' needs f16, bf16, f32 or f64 (fp8 supports only conversions, "
               "loads, stores and dot), not f8e4m3");
}

Test(regressions, narrow_integer_atomics) {
  expect_error("kernel k(p: *i8) { atomic_add(p, 1); }", "t.tile:1:20: error: atomic_add() is not supported on i8");
}

Test(regressions, wide_block_offsets) {
  expect_error("kernel k(d: tensor<f32, 1>, o: i64) { let t = load_block(d, [o], [16]); }",
               "t.tile:1:62: error: load_block() offsets are 32-bit; convert this i64 with 'as i32'");
}

Test(regressions, binding_a_call_without_value) {
  expect_error("kernel k(p: *f32) { let a = store(p, 1.0); }",
               "t.tile:1:29: error: this call has no value to bind to 'a'");
}

Test(regressions, too_many_errors_line_for_every_stage) {
  /* 30 unknown names: the resolver stops at the cap; the line still shows. */
  char src[4096];
  int o = sprintf(src, "kernel k() {\n");
  for (int i = 0; i < 30; i++) o += sprintf(src + o, "  let v%d = q%d;\n", i, i);
  sprintf(src + o, "}\n");
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_expect_eq(tc_error_count(c), 20);
  cr_expect(strstr(tc_diagnostics(c), "t.tile: error: too many errors (20), stopping\n") != NULL);
  tc_free(c);
}

Test(regressions, define_integers_are_decimal) {
  const tc_define d[] = {{"N", "010"}};
  tc_options opt = {.defines = d, .ndefines = 1};
  const char *src = "kernel k(p: *i32, const N: i32 = 1) { store(p, N); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), &opt);
  char *ir = tc_emit(c, TC_EMIT_IR);
  cr_expect(ir && strstr(ir, "const 10 : i32"), "%s", ir ? ir : tc_diagnostics(c));
  free(ir);
  tc_free(c);
}

Test(regressions, caret_on_an_empty_last_line) {
  const char *src = "kernel k() {\n";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_expect_str_eq(tc_diagnostics(c), "t.tile:2:1: error: expected '}', found end of file\n    \n    ^\n");
  tc_free(c);
}
