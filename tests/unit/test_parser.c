/* test_parser.c - tests of the parser (compiler/front/parser.c) through
 * the AST it prints (tc_emit(TC_EMIT_AST), compiler/front/ast_print.c).
 *
 * The printed S-expressions make the tree's shape explicit, so comparing
 * them against expected text checks what the parser decided: operator
 * precedence and associativity (the table in spec/NOTES.md: bitwise
 * operators bind tighter than comparisons, unary binds tighter than `as`,
 * comparisons do not chain), postfix calls and indexing, named arguments,
 * annotations on kernels and loops, else-if chains, the three forms of
 * range(), let/var with types, const items and parameters with facts and
 * defaults. The error tests check panic-mode recovery: independent syntax
 * errors in one file are all reported, each once, at the offending token,
 * and the statements and items around them survive; and the nesting limit
 * sits exactly at 256 levels.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../compiler/include/tilec.h"
#include "harness.h"

/* ---- harness ------------------------------------------------------------ */

/* The AST of src (malloc'd), whatever the later stages said. */
static char *ast_of(const char *src) {
  tc_options opt = {0};
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), &opt);
  cr_assert_not_null(c);
  char *text = tc_emit(c, TC_EMIT_AST);
  tc_free(c);
  cr_assert_not_null(text, "no AST for:\n%s", src);
  return text;
}

static void expect_ast(const char *src, const char *expected) {
  char *text = ast_of(src);
  cr_expect_str_eq(text, expected, "source:\n%s\ngot:\n%s\nexpected:\n%s", src, text, expected);
  free(text);
}

/* Compiles src; returns the compilation for the caller to inspect. */
/* Without warnings: the sources here bind values they do not use (the
 * unused-value warning has its own tests, in test_cli.c). */
static tc_compilation *compile(const char *src) {
  tc_options opt = {.no_warnings = true};
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), &opt);
  cr_assert_not_null(c);
  return c;
}

/* A valid program: compiles without any diagnostic, and prints as expected. */
static void expect_valid_ast(const char *src, const char *expected) {
  tc_compilation *c = compile(src);
  cr_expect_eq(tc_error_count(c), 0, "source:\n%s\ndiagnostics:\n%s", src, tc_diagnostics(c));
  tc_free(c);
  expect_ast(src, expected);
}

/* An expression, parsed as the initializer of `let r` in a kernel with
 * i32 parameters a, b, c, d and x. */
static void expect_expr(const char *expr, const char *sexpr) {
  char src[1024], expected[1024];
  snprintf(src, sizeof src, "kernel k(a: i32, b: i32, c: i32, d: i32, x: i32) {\n    let r = %s;\n}\n", expr);
  snprintf(expected, sizeof expected, "(kernel k (a i32) (b i32) (c i32) (d i32) (x i32)\n  (let r _ %s)\n)\n",
           sexpr);
  expect_ast(src, expected);
}

/* The header lines ("file:L:C: error: msg") of the diagnostics, joined
 * with newlines (malloc'd); source and caret lines are dropped. */
static char *error_lines(tc_compilation *c) {
  const char *d = tc_diagnostics(c);
  size_t n = strlen(d);
  char *out = malloc(n + 1);
  if (!out) abort();
  size_t o = 0;
  for (const char *line = d; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (line[0] != ' ') {
      memcpy(out + o, line, len);
      o += len;
      out[o++] = '\n';
    }
    line += len + (end ? 1 : 0);
  }
  out[o] = 0;
  return out;
}

static void expect_errors(const char *src, int count, const char *lines) {
  tc_compilation *c = compile(src);
  char *got = error_lines(c);
  cr_expect_eq(tc_error_count(c), count, "source:\n%s\n%d errors:\n%s", src, tc_error_count(c), got);
  cr_expect_str_eq(got, lines, "source:\n%s\ngot:\n%s\nexpected:\n%s", src, got, lines);
  free(got);
  tc_free(c);
}

/* Only the first diagnostic's header line. */
static void expect_first_error(const char *src, const char *line) {
  tc_compilation *c = compile(src);
  char *got = error_lines(c);
  char *nl = strchr(got, '\n');
  if (nl) nl[1] = 0;
  cr_expect_gt(tc_error_count(c), 0, "source:\n%s", src);
  cr_expect_str_eq(got, line, "source:\n%s\ngot:\n%s\nexpected:\n%s", src, got, line);
  free(got);
  tc_free(c);
}

/* ---- precedence and associativity --------------------------------------- */

Test(parser, multiplicative_binds_tighter_than_additive) {
  expect_expr("a + b * c", "(+ a (* b c))");
  expect_expr("a * b + c", "(+ (* a b) c)");
  expect_expr("a - b / c % d", "(- a (% (/ b c) d))");
  expect_expr("(a + b) * c", "(* (+ a b) c)");
}

Test(parser, binary_operators_associate_left) {
  expect_expr("a - b - c", "(- (- a b) c)");
  expect_expr("a / b / c", "(/ (/ a b) c)");
  expect_expr("a << b >> c", "(>> (<< a b) c)");
  expect_expr("a && b && c", "(&& (&& a b) c)");
  expect_expr("a || b || c", "(|| (|| a b) c)");
  expect_expr("a - (b - c)", "(- a (- b c))");
}

Test(parser, bitwise_binds_tighter_than_comparison) {
  expect_expr("a & b == c", "(== (& a b) c)");
  expect_expr("a == b & c", "(== a (& b c))");
  expect_expr("a | b < c", "(< (| a b) c)");
  expect_expr("a ^ b != c ^ d", "(!= (^ a b) (^ c d))");
  expect_expr("a & 3 == 0", "(== (& a 3) 0)");
}

Test(parser, bitwise_operator_levels) {
  /* | below ^ below & below shifts below + -. */
  expect_expr("a | b ^ c & d", "(| a (^ b (& c d)))");
  expect_expr("a & b ^ c | d", "(| (^ (& a b) c) d)");
  expect_expr("a << b + c", "(<< a (+ b c))");
  expect_expr("a + b << c", "(<< (+ a b) c)");
  expect_expr("a >> b & c", "(& (>> a b) c)");
  expect_expr("a & b >> c", "(& a (>> b c))");
}

Test(parser, logical_operators) {
  expect_expr("a || b && c", "(|| a (&& b c))");
  expect_expr("a && b || c", "(|| (&& a b) c)");
  expect_expr("a < b || c > d && a != b", "(|| (< a b) (&& (> c d) (!= a b)))");
  expect_expr("!(a < b) && c >= d", "(&& (! (< a b)) (>= c d))");
  expect_expr("(a <= b) == (c > d)", "(== (<= a b) (> c d))");
}

Test(parser, unary_binds_tighter_than_as) {
  expect_expr("-a as f32", "(as (- a) f32)");
  expect_expr("-(a as f32)", "(- (as a f32))");
  expect_expr("!a && b", "(&& (! a) b)");
  expect_expr("~a & b", "(& (~ a) b)");
  expect_expr("- -a", "(- (- a))");
  expect_expr("-~!a", "(- (~ (! a)))");
  expect_expr("-a * b", "(* (- a) b)");
}

Test(parser, as_binds_tighter_than_binary_operators) {
  expect_expr("a as f32 * b", "(* (as a f32) b)");
  expect_expr("a * b as f32", "(* a (as b f32))");
  expect_expr("a + b as i64", "(+ a (as b i64))");
  expect_expr("a as i64 as f32", "(as (as a i64) f32)");
  expect_expr("(a + b) as f32", "(as (+ a b) f32)");
  expect_expr("x as *bf16", "(as x *bf16)");
  expect_expr("a as T", "(as a T)");
}

Test(parser, postfix_binds_tightest) {
  expect_expr("-f(a)", "(- (call f a))");
  expect_expr("-x[:, None]", "(- (index x : None))");
  expect_expr("f(a)[:, None] as f32", "(as (index (call f a) : None) f32)");
  expect_expr("x[:][None, :]", "(index (index x :) None :)");
}

/* ---- primaries, calls and indexing --------------------------------------- */

Test(parser, literals) {
  expect_expr("42", "42");
  expect_expr("0x1F", "31");
  expect_expr("0b101", "5");
  expect_expr("1_000", "1000");
  expect_expr("18446744073709551615", "18446744073709551615");
  expect_expr("2.5", "2.5");
  expect_expr("1e-3", "0.001");
  expect_expr("0.1", "0.10000000000000001");
  expect_expr("true", "true");
  expect_expr("false", "false");
  expect_expr("\"text\"", "\"text\"");
  expect_expr("-inf", "(- inf)");
}

Test(parser, index_with_slices_and_none) {
  expect_expr("x[:, None]", "(index x : None)");
  expect_expr("x[None, :]", "(index x None :)");
  expect_expr("x[None, :, None]", "(index x None : None)");
  expect_expr("x[:]", "(index x :)");
  expect_expr("x[:, None] + x[None, :]", "(+ (index x : None) (index x None :))");
  expect_expr("x[:, None,]", "(index x : None)");
}

Test(parser, calls_and_named_arguments) {
  expect_expr("f()", "(call f)");
  expect_expr("f(a)", "(call f a)");
  expect_expr("f(a, b + c)", "(call f a (+ b c))");
  expect_expr("f(a,)", "(call f a)");
  expect_expr("f(a, b = 2)", "(call f a b=2)");
  expect_expr("f(x = a == b, y = c)", "(call f x=(== a b) y=c)");
  expect_expr("zeros([16, 32], dtype = f32)", "(call zeros [16 32] dtype=f32)");
  expect_expr("f(g(h(a)))", "(call f (call g (call h a)))");
}

Test(parser, lists) {
  expect_expr("[a, b, 3]", "[a b 3]");
  expect_expr("[]", "[]");
  expect_expr("[a + 1, [b]]", "[(+ a 1) [b]]");
  expect_expr("[a, b,]", "[a b]");
}

/* ---- statements ------------------------------------------------------- */

Test(parser, let_and_var_with_types) {
  expect_valid_ast("kernel k(q: *f32) {\n"
                   "    let a = 1;\n"
                   "    let b: i64 = 2;\n"
                   "    var c: f32[16, 16] = zeros([16, 16], f32);\n"
                   "    var d = 0.5;\n"
                   "    let p: *f32 = q;\n"
                   "    let e: i1 = true;\n"
                   "}\n",
                   "(kernel k (q *f32)\n"
                   "  (let a _ 1)\n"
                   "  (let b i64 2)\n"
                   "  (var c f32[16, 16] (call zeros [16 16] f32))\n"
                   "  (var d _ 0.5)\n"
                   "  (let p *f32 q)\n"
                   "  (let e i1 true)\n"
                   ")\n");
}

Test(parser, assignments) {
  expect_valid_ast("kernel k() {\n"
                   "    var z = 0;\n"
                   "    z = 3; z += 1; z -= 1; z *= 2; z /= 2; z %= 5;\n"
                   "    z &= 7; z |= 1; z ^= 2; z <<= 1; z >>= 1;\n"
                   "}\n",
                   "(kernel k\n"
                   "  (var z _ 0)\n"
                   "  (= z 3)\n  (+= z 1)\n  (-= z 1)\n  (*= z 2)\n  (/= z 2)\n  (%= z 5)\n"
                   "  (&= z 7)\n  (|= z 1)\n  (^= z 2)\n  (<<= z 1)\n  (>>= z 1)\n"
                   ")\n");
}

Test(parser, if_else_if_chains) {
  /* `else if` becomes an else block holding one if. */
  expect_valid_ast("kernel k(n: i32) {\n"
                   "    var z = 0;\n"
                   "    if n < 1 {\n"
                   "        z = 1;\n"
                   "    } else if n < 2 {\n"
                   "        z = 2;\n"
                   "    } else if n < 3 {\n"
                   "    } else {\n"
                   "        z = 4;\n"
                   "    }\n"
                   "    if n == 0 { z = 5; }\n"
                   "}\n",
                   "(kernel k (n i32)\n"
                   "  (var z _ 0)\n"
                   "  (if (< n 1)\n"
                   "    (= z 1)\n"
                   "   else\n"
                   "    (if (< n 2)\n"
                   "      (= z 2)\n"
                   "     else\n"
                   "      (if (< n 3)\n"
                   "       else\n"
                   "        (= z 4)\n"
                   "      )\n"
                   "    )\n"
                   "  )\n"
                   "  (if (== n 0)\n"
                   "    (= z 5)\n"
                   "  )\n"
                   ")\n");
}

Test(parser, for_with_one_two_and_three_range_arguments) {
  /* Absent start and step print as _. */
  expect_valid_ast("kernel k(n: i32) {\n"
                   "    for i in range(4) { }\n"
                   "    for i in range(1, n) { }\n"
                   "    for i in range(n - 1, -1, -1) {\n"
                   "        let j = i;\n"
                   "    }\n"
                   "}\n",
                   "(kernel k (n i32)\n"
                   "  (for i _ 4 _\n"
                   "  )\n"
                   "  (for i 1 n _\n"
                   "  )\n"
                   "  (for i (- n 1) (- 1) (- 1)\n"
                   "    (let j _ i)\n"
                   "  )\n"
                   ")\n");
}

Test(parser, while_and_blocks) {
  expect_valid_ast("kernel k() {\n"
                   "    var z = 10;\n"
                   "    while z > 0 { z -= 1; }\n"
                   "    { let w = 1.5; { } }\n"
                   "}\n",
                   "(kernel k\n"
                   "  (var z _ 10)\n"
                   "  (while (> z 0)\n"
                   "    (-= z 1)\n"
                   "  )\n"
                   "  (block\n"
                   "    (let w _ 1.5)\n"
                   "    (block\n"
                   "    )\n"
                   "  )\n"
                   ")\n");
}

Test(parser, expression_statements_and_return) {
  expect_valid_ast("fn twice(x) -> f32 {\n"
                   "    return x * 2.0;\n"
                   "}\n"
                   "fn nothing() {\n"
                   "    return;\n"
                   "}\n"
                   "kernel k(p: *f32) {\n"
                   "    store(p, twice(1.0));\n"
                   "    nothing();\n"
                   "}\n",
                   "(fn twice (x _) -> f32\n"
                   "  (return (* x 2))\n"
                   ")\n"
                   "(fn nothing\n"
                   "  (return)\n"
                   ")\n"
                   "(kernel k (p *f32)\n"
                   "  (call store p (call twice 1))\n"
                   "  (call nothing)\n"
                   ")\n");
}

/* ---- annotations -------------------------------------------------------- */

Test(parser, annotations_on_kernels) {
  expect_valid_ast("@warps(8)\n"
                   "kernel a() { }\n"
                   "@warp_specialize(producers = 1, consumers = 2, producer_registers = 40)\n"
                   "kernel b() { }\n"
                   "@warp_specialize kernel c() { }\n",
                   "(@warps 8)\n"
                   "(kernel a\n"
                   ")\n"
                   "(@warp_specialize producers=1 consumers=2 producer_registers=40)\n"
                   "(kernel b\n"
                   ")\n"
                   "(@warp_specialize)\n"
                   "(kernel c\n"
                   ")\n");
}

Test(parser, annotations_on_loops) {
  expect_valid_ast("kernel k(n: i32) {\n"
                   "    @pipeline(stages = 3)\n"
                   "    for i in range(0, n, 2) { }\n"
                   "    @pipeline(stages = 2) @warp_specialize(consumers = 1)\n"
                   "    for i in range(n) { }\n"
                   "}\n",
                   "(kernel k (n i32)\n"
                   "  (@pipeline stages=3)\n"
                   "  (for i 0 n 2\n"
                   "  )\n"
                   "  (@pipeline stages=2)\n"
                   "  (@warp_specialize consumers=1)\n"
                   "  (for i _ n _\n"
                   "  )\n"
                   ")\n");
}

/* ---- items and parameters ----------------------------------------------- */

Test(parser, const_items) {
  expect_valid_ast("const N: i32 = 64;\n"
                   "const M = N * 2;\n"
                   "const SCALE: f32 = 0.5;\n"
                   "kernel k() { let x = M; }\n",
                   "(const N i32 64)\n"
                   "(const M _ (* N 2))\n"
                   "(const SCALE f32 0.5)\n"
                   "(kernel k\n"
                   "  (let x _ M)\n"
                   ")\n");
}

Test(parser, parameters_with_facts_and_const_defaults) {
  /* R has no value, so this does not compile; it parses. */
  expect_ast("kernel k(p: *T align(16), q: *bf16 align(8), n: i32 multiple_of(16),\n"
                   "         m: i64 multiple_of(4) , d: tensor<f16, 2>, flag: i1,\n"
                   "         const T: type = f32, const B: i32 = 1 << 4, const F: bool = true,\n"
                   "         const E: f32 = 1e-5, const R: i32,) {\n"
                   "}\n",
                   "(kernel k (p *T align=16) (q *bf16 align=8) (n i32 multiple_of=16) (m i64 multiple_of=4) "
                   "(d tensor<f16, 2>) (flag i1) (const T type = f32) (const B i32 = (<< 1 4)) "
                   "(const F bool = true) (const E f32 = 1.0000000000000001e-05) (const R i32)\n"
                   ")\n");
}

Test(parser, both_facts_on_one_parameter) {
  /* Semantically wrong (multiple_of needs an integer), but it parses. */
  expect_ast("kernel k(p: *f32 multiple_of(2) align(4)) { }\n",
             "(kernel k (p *f32 align=4 multiple_of=2)\n"
             ")\n");
}

Test(parser, helper_functions) {
  expect_valid_ast("fn add(a, b: f32, const N: i32 = 4) -> f32 {\n"
                   "    return a + b * N;\n"
                   "}\n"
                   "kernel k(p: *f32) { store(p, add(1.0, 2.0, N = 2)); }\n",
                   "(fn add (a _) (b f32) (const N i32 = 4) -> f32\n"
                   "  (return (+ a (* b N)))\n"
                   ")\n"
                   "(kernel k (p *f32)\n"
                   "  (call store p (call add 1 2 N=2))\n"
                   ")\n");
}

Test(parser, tile_types) {
  expect_ast("kernel k() { let x: f32[16] = 0.0; let y: bf16[4, 8, 2, 2] = 0.0; let z: T[B, 2 * B] = 0.0; }\n",
             "(kernel k\n"
             "  (let x f32[16] 0)\n"
             "  (let y bf16[4, 8, 2, 2] 0)\n"
             "  (let z T[B, (* 2 B)] 0)\n"
             ")\n");
}

/* ---- error recovery ----------------------------------------------------- */

Test(parser, three_independent_errors_in_one_kernel) {
  static const char src[] =
      "kernel k(n: i32) {\n"
      "    let x = n +;\n"
      "    let y = n;\n"
      "    let z = y y;\n"
      "    let w = (n * 2;\n"
      "    let v = n;\n"
      "}\n";
  expect_errors(src, 3,
                "t.tile:2:16: error: expected an expression, found ';'\n"
                "t.tile:4:15: error: expected ';', found 'y'\n"
                "t.tile:5:19: error: expected ')', found ';'\n");
  /* The statements between the errors are kept. */
  expect_ast(src,
             "(kernel k (n i32)\n"
             "  (let y _ n)\n"
             "  (let v _ n)\n"
             ")\n");
}

Test(parser, three_independent_errors_in_three_items) {
  static const char src[] =
      "const A = 1 +;\n"
      "kernel k(n: i32) {\n"
      "    store(n 3);\n"
      "}\n"
      "fn f(a) { return a a; }\n"
      "const B = 2;\n";
  expect_errors(src, 3,
                "t.tile:1:14: error: expected an expression, found ';'\n"
                "t.tile:3:13: error: expected ',' or ')', found '3'\n"
                "t.tile:5:20: error: expected ';', found 'a'\n");
  /* The broken const is dropped; the kernel keeps its other statements. */
  expect_ast(src,
             "(kernel k (n i32)\n"
             ")\n"
             "(fn f (a _)\n"
             ")\n"
             "(const B _ 2)\n");
}

Test(parser, errors_inside_nested_blocks) {
  expect_errors("kernel k(n: i32) {\n"
                "    if n > 0 {\n"
                "        let a = );\n"
                "    }\n"
                "    for i in range(n) {\n"
                "        let b = [1, 2;\n"
                "    }\n"
                "    while n < 0 { let c = 1 let d = 2; }\n"
                "}\n",
                3,
                "t.tile:3:17: error: expected an expression, found ')'\n"
                "t.tile:6:22: error: expected ',' or ']', found ';'\n"
                "t.tile:8:29: error: expected ';', found 'let'\n");
}

Test(parser, one_error_per_bad_statement) {
  /* Panic mode: the rest of a broken statement adds no errors. */
  expect_errors("kernel k() {\n"
                "    let x = ) ) ) + + ;\n"
                "    let y = 1;\n"
                "}\n",
                1, "t.tile:2:13: error: expected an expression, found ')'\n");
}

Test(parser, lexer_errors_are_not_reported_twice) {
  /* The parser stays quiet about ERROR tokens the lexer already reported. */
  expect_errors("kernel k() {\n"
                "    let x = $;\n"
                "    let y = 1 + \xff;\n"
                "}\n",
                2,
                "t.tile:2:13: error: unexpected character '$'\n"
                "t.tile:3:17: error: invalid UTF-8 byte 0xff\n");
}

Test(parser, missing_closing_brace) {
  expect_errors("kernel k() {\n    let x = 1;\n", 1, "t.tile:3:1: error: expected '}', found end of file\n");
  expect_errors("kernel k(a: i32, { }\n", 1, "t.tile:1:18: error: expected a parameter name, found '{'\n");
}

Test(parser, misplaced_items_and_statements) {
  /* Only the first error is checked here: the parser then also reports a
   * spurious "expected ';', found '{'" at 1:21 (reported as a bug). */
  expect_first_error("kernel k() { fn g() { } }\n", "t.tile:1:14: error: 'fn' must be at the top level of a file\n");
  expect_errors("let x = 1;\nkernel k() { }\n", 1,
                "t.tile:1:1: error: expected 'kernel', 'fn', 'const' or 'import', found 'let'\n");
  expect_errors("kernel k() { @pipeline(stages = 2) let x = 1; }\n", 1,
                "t.tile:1:36: error: expected a 'for' or 'while' loop after a statement annotation\n");
  expect_errors("@warps(4) const X = 1;\nkernel k() { }\n", 1,
                "t.tile:1:11: error: expected 'kernel' or 'fn' after an annotation, found 'const'\n");
}

Test(parser, chained_comparisons_are_rejected) {
  expect_errors("kernel k(a: i32) { let x = 0 < a < 5; }\n", 1,
                "t.tile:1:34: error: comparison operators cannot be chained; use && to combine comparisons\n");
  expect_errors("kernel k(a: i32) { let x = a == a != a; }\n", 1,
                "t.tile:1:35: error: comparison operators cannot be chained; use && to combine comparisons\n");
  expect_errors("kernel k(a: i32) { let x = a <= a == (a > a); }\n", 1,
                "t.tile:1:35: error: comparison operators cannot be chained; use && to combine comparisons\n");
}

/* ---- nesting limit ------------------------------------------------------- */

static char *nested_parens(int n) { return harness_nested("kernel k() {\n    let x = ", '(', "1", ')', ";\n}\n", n); }
static char *nested_blocks(int n) { return harness_nested("kernel k() {\n", '{', "", '}', "\n}\n", n); }

Test(parser, nesting_limit_is_256_levels) {
  /* The kernel body is one level and the initializer another, so 254
   * parentheses make 256 levels: accepted; one more is rejected. */
  char *ok = nested_parens(254), *bad = nested_parens(255);
  expect_errors(ok, 0, "");
  expect_errors(bad, 1, "t.tile:2:268: error: nesting is too deep (more than 256 levels)\n");
  free(ok);
  free(bad);
  /* Blocks: the body plus 255 braces is 256 levels. */
  ok = nested_blocks(255);
  bad = nested_blocks(256);
  expect_errors(ok, 0, "");
  expect_errors(bad, 1, "t.tile:2:257: error: nesting is too deep (more than 256 levels)\n");
  free(ok);
  free(bad);
}

Test(parser, unary_operators_count_towards_nesting) {
  char *src = harness_nested("kernel k() {\n    let x = ", '-', "1;\n}\n", ' ', "", 300);
  expect_errors(src, 1, "t.tile:2:267: error: nesting is too deep (more than 256 levels)\n");
  free(src);
}

/* Found by fuzz_frontend (reproducer in
 * tests/fuzz/crashes-found/frontend-range-args-ast-print.tile): after a
 * malformed range() the loop has no end expression, and printing the tree
 * crashed. The parts a syntax error left out print as <missing>. */
Test(parser, malformed_range_prints_its_ast) {
  char *text = ast_of("kernel{for in range(,,,{8}}");
  cr_expect(strstr(text, "<missing>"), "got:\n%s", text);
  free(text);
}
