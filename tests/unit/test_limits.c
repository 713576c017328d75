/* test_limits.c - the compiler's resource limits, and the small inputs that
 * once took exponential or quadratic time, unbounded memory or the whole C
 * stack.
 *
 * Every reproducer is generated here, compiled in memory through the
 * library (tc_compile), and must give the right result or the exact
 * diagnostic, fast: each is timed with clock_gettime against a generous
 * bound (they take milliseconds now; before, from seconds to minutes, and
 * some crashed). The limits themselves are listed in spec/diagnostics.md
 * ("Limits"); each has a test here that hits it and checks its message and
 * location, and, where it guards a previous blow-up, the input that blew up.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../compiler/include/tilec.h"
#include "../../compiler/ir/ir.h"
#include "../../compiler/util/strbuf.h"

/* Wall-clock bound of one compilation in these tests: far above what each
 * takes (at most a few hundred milliseconds), far below what the inputs
 * took before their fixes (seconds to minutes). Sanitizer builds run
 * several times slower, so they get more. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define LIMITS_MAX_SECONDS 10.0
#else
#define LIMITS_MAX_SECONDS 2.0
#endif

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Compiles src (with at most one define), failing the test when that takes
 * longer than LIMITS_MAX_SECONDS. len SIZE_MAX: strlen(src). */
static tc_compilation *compile_timed(const char *src, size_t len, const char *define_name, const char *define_value) {
  if (len == SIZE_MAX) len = strlen(src);
  tc_define d = {define_name, define_value};
  tc_options opt = {.defines = &d, .ndefines = define_name ? 1 : 0};
  double t0 = seconds_now();
  tc_compilation *c = tc_compile("t.tile", src, len, &opt);
  double t = seconds_now() - t0;
  cr_assert_not_null(c);
  cr_expect_lt(t, LIMITS_MAX_SECONDS, "compiling took %.2f s", t);
  return c;
}

/* The first line of the diagnostics ("" when there are none), malloc'd. */
static char *first_line(const tc_compilation *c) {
  const char *d = tc_diagnostics(c);
  return strndup(d, strcspn(d, "\n"));
}

/* Compiles src and checks its first diagnostic line. */
static void expect_first_error(const char *src, size_t len, const char *want) {
  tc_compilation *c = compile_timed(src, len, NULL, NULL);
  char *got = first_line(c);
  cr_expect_str_eq(got, want);
  cr_expect_gt(tc_error_count(c), 0);
  free(got);
  tc_free(c);
}

/* Compiles src, which must be free of errors, and returns its IR
 * (malloc'd): optimized, or with -O0 as the specializer made it. */
static char *ir_of(const char *src, size_t len, bool optimize) {
  tc_options opt = {.no_opt = !optimize, .verify_each_pass = true};
  double t0 = seconds_now();
  tc_compilation *c = tc_compile("t.tile", src, len == SIZE_MAX ? strlen(src) : len, &opt);
  double t = seconds_now() - t0;
  cr_expect_lt(t, LIMITS_MAX_SECONDS, "compiling took %.2f s", t);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  char *ir = tc_emit(c, TC_EMIT_IR);
  cr_assert_not_null(ir);
  tc_free(c);
  return ir;
}

static char *expect_ir(const char *src, size_t len) { return ir_of(src, len, true); }

/* Compiles src (NUL terminated), which must be free of errors, and checks
 * that its optimized IR contains `needle`. */
static void expect_ir_has(const char *src, const char *needle) {
  char *ir = expect_ir(src, SIZE_MAX);
  cr_expect(strstr(ir, needle) != NULL, "no '%s' in:\n%.3000s", needle, ir);
  free(ir);
}

/* 64 helpers, each calling the next inside `depth` copies of open and
 * close: "fn h<i>(PARAMS) { PREFIX open.. h<i+1>(ARGS)CALL_END ..close
 * SUFFIX }", into sb; the caller adds h64 and a kernel. */
typedef struct HelperChain {
  const char *params, *prefix, *open, *args, *call_end, *close, *suffix;
  int depth;
} HelperChain;

static void helper_chain(StrBuf *sb, const HelperChain *h) {
  for (int i = 0; i < 64; i++) {
    sb_printf(sb, "fn h%d(%s) { %s", i, h->params, h->prefix);
    for (int k = 0; k < h->depth; k++) sb_puts(sb, h->open);
    sb_printf(sb, "h%d(%s)%s", i + 1, h->args, h->call_end);
    for (int k = 0; k < h->depth; k++) sb_puts(sb, h->close);
    sb_printf(sb, "%s }\n", h->suffix);
  }
}

/* A helper chain followed by `tail` (h64 and a kernel) gives `want` first. */
static void expect_chain_error(const HelperChain *h, const char *tail, const char *want) {
  StrBuf sb;
  sb_init(&sb);
  helper_chain(&sb, h);
  sb_puts(&sb, tail);
  expect_first_error(sb.data, sb.len, want);
  sb_free(&sb);
}

/* const C0 = C1 + 1; ... const C<n> = 1; and a kernel storing C0
 * (malloc'd). */
static char *constant_chain(int n) {
  StrBuf sb;
  sb_init(&sb);
  for (int i = 0; i < n; i++) sb_printf(&sb, "const C%d = C%d + 1;\n", i, i + 1);
  sb_printf(&sb, "const C%d = 1;\nkernel k(p: *i32) { store(p, C0); }\n", n);
  return sb_take(&sb);
}

/* head, n copies of link, tail (malloc'd). */
static char *repeated(const char *head, const char *link, int n, const char *tail) {
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, head);
  for (int i = 0; i < n; i++) sb_puts(&sb, link);
  sb_puts(&sb, tail);
  return sb_take(&sb);
}

/* ---- constants: evaluated once per kernel ---------------------------------- */

/* const C0 = C1 + C1; ... const C<n> = 1;: 2^n if each use re-evaluated. */
static char *doubling_constants(int n, const char *kernel) {
  StrBuf sb;
  sb_init(&sb);
  for (int i = 0; i < n; i++) sb_printf(&sb, "const C%d = C%d + C%d;\n", i, i + 1, i + 1);
  sb_printf(&sb, "const C%d = 1;\n%s", n, kernel);
  return sb_take(&sb);
}

Test(limits, doubling_constant_chain_is_evaluated_once) {
  /* 1.7 KB, 22 levels: 11.7 s and 3.1 GB before (every use of a constant
   * evaluated it again). */
  char *src = doubling_constants(22, "kernel k(p: *i64) { store(p, C0 as i64); }\n");
  expect_ir_has(src, "const 4194304 : i64");
  free(src);
}

Test(limits, constants_are_evaluated_per_kernel_and_dominate_every_use) {
  /* A typed constant first used inside a branch and then after it, in two
   * kernels: its ops go to the start of each kernel, so both uses see
   * them (the verifier would reject a use outside the branch). -O0 keeps
   * every op as the specializer made it. */
  const char *src = "const T: f32 = 2.0 * 1.5;\n"
                    "const S = [T, T];\n"
                    "kernel a(p: *f32, n: i32) {\n"
                    "    if n > 0 { store(p, T); }\n"
                    "    store(p + 1, T + 1.0);\n"
                    "}\n"
                    "kernel b(p: *f32) { store(p, T); }\n";
  char *ir = ir_of(src, SIZE_MAX, false);
  /* Each kernel computes T once, as its first op. */
  const char *a = strstr(ir, "kernel @a"), *b = strstr(ir, "kernel @b");
  cr_assert(a && b, "%s", ir);
  cr_expect(strstr(a, "{\n  %0 = const 3.0 : f32") == strchr(a, '{'), "%s", ir);
  cr_expect(strstr(b, "{\n  %0 = const 3.0 : f32") == strchr(b, '{'), "%s", ir);
  free(ir);
}

Test(limits, a_constant_may_not_store_or_loop_at_run_time) {
  /* It runs once, at the start of the kernel: not where it is used. */
  const char *src = "fn f() { store(0 as *f32, 1.0); return 3; }\n"
                    "const X = f();\n"
                    "kernel k(p: *i32) { store(p, X); }\n";
  expect_first_error(src, strlen(src),
                     "t.tile:1:10: error: constant 'X' must be computed without loads, stores, atomics or while loops");
}

Test(limits, division_by_zero_in_a_constant_is_reported_at_the_operator) {
  /* It said "must be a compile-time constant" before. */
  expect_first_error("const Z: i32 = 0;\nconst A = 5 / Z;\nkernel k(p: *i32) { store(p, A); }\n", SIZE_MAX,
                     "t.tile:2:13: error: division by zero in a constant expression");
}

Test(limits, division_by_zero_where_a_constant_is_needed) {
  const char *cases[][2] = {
      {"const Z: i32 = 0;\nkernel k(p: *f32) { store(p + arange(0, 64 / Z), 1.0); }\n",
       "t.tile:2:44: error: division by zero in a constant expression"},
      {"const Z: i32 = 0;\nkernel k(p: *f32) { let t = zeros([64 % Z]); store(p, 1.0); }\n",
       "t.tile:2:39: error: division by zero in a constant expression"},
      {"const Z: i32 = 0;\nfn f(const N: i32) { return N; }\nkernel k(p: *i32) { store(p, f(1 / Z)); }\n",
       "t.tile:3:34: error: division by zero in a constant expression"},
      {"const Z: i32 = 0;\nkernel k(p: *i32, const N: i32 = 8 / Z) { store(p, N); }\n",
       "t.tile:2:36: error: division by zero in a constant expression"},
      {"const Z: i32 = 0;\nkernel k(p: *i32) { static_assert(1 / Z == 0); }\n",
       "t.tile:2:37: error: division by zero in a constant expression"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_first_error(cases[i][0], strlen(cases[i][0]), cases[i][1]);
  /* In kernel code it stays a run-time operation (spec/semantics.md). */
  expect_ir_has("const Z: i32 = 0;\nkernel k(p: *i32) { store(p, 5 / Z); }\n", " = div ");
}

/* ---- helper functions: the inlining budget --------------------------------- */

/* fn h0(x) { return h1(x) + h1(x); } ... fn h<n>(x) { return x * 2.0; } */
static void doubling_helpers(StrBuf *sb, int n) {
  for (int i = 0; i < n; i++) sb_printf(sb, "fn h%d(x) { return h%d(x) + h%d(x); }\n", i, i + 1, i + 1);
  sb_printf(sb, "fn h%d(x) { return x * 2.0; }\n", n);
}

Test(limits, doubling_helper_chain_hits_the_inlining_budget_at_a_call) {
  /* 18 levels: 1 s and 319 MB before, x4 per 2 levels more. */
  StrBuf sb;
  sb_init(&sb);
  doubling_helpers(&sb, 18);
  sb_puts(&sb, "kernel k(p: *f32) { store(p, h0(load(p))); }\n");
  expect_first_error(sb.data, sb.len,
                     "t.tile:17:29: error: inlined helper calls make more than 100000 operations in kernel 'k'");
  /* A chain that stays under the budget compiles and computes 2^10 * 2. */
  sb_free(&sb);
  doubling_helpers(&sb, 10);
  sb_puts(&sb, "kernel k(p: *f32) { store(p, h0(1.0)); }\n");
  expect_ir_has(sb.data, "const 2048.0 : f32");
  sb_free(&sb);
}

Test(limits, many_kernels_under_the_inlining_budget_hit_the_file_budget) {
  /* 14 levels make some 49,000 ops per kernel, under the budget of one
   * kernel; ten such kernels exceed the 400,000 of a file. */
  StrBuf sb;
  sb_init(&sb);
  doubling_helpers(&sb, 14);
  for (int k = 0; k < 10; k++) sb_printf(&sb, "kernel k%d(p: *f32) { store(p, h0(load(p))); }\n", k);
  tc_compilation *c = compile_timed(sb.data, sb.len, NULL, NULL);
  char *got = first_line(c);
  /* At the innermost call being inlined when the count went over. */
  cr_expect_str_eq(got, "t.tile:14:20: error: the kernels of this file make more than 400000 operations");
  cr_expect_eq(tc_error_count(c), 1, "reported once:\n%s", tc_diagnostics(c));
  free(got);
  tc_free(c);
  sb_free(&sb);
}

/* ---- nesting across helpers and constants: the C stack ---------------------- */

Test(limits, helper_chains_of_deep_expressions_do_not_overflow_the_stack) {
  /* 64 helpers, each 1,000 operators deep around the call of the next:
   * every one is within the parser's limits, together they crashed. */
  expect_chain_error(&(HelperChain){"x", "return ", "", "x", "", " + 1", ";", 1000},
                     "fn h64(x) { return x; }\nkernel k(p: *i32) { store(p, h0(1)); }\n",
                     "t.tile:3:3849: error: code is nested too deeply through helper calls and constants (more than "
                     "2048 levels)");
  /* The same through nested builtin calls (larger stack frames). */
  expect_chain_error(&(HelperChain){"x", "return ", "exp(", "x", "", ")", ";", 200},
                     "fn h64(x) { return x; }\nkernel k(p: *f32) { store(p, h0(1.0)); }\n",
                     "t.tile:11:160: error: code is nested too deeply through helper calls and constants (more than "
                     "2048 levels)");
}

Test(limits, long_constant_chains_do_not_overflow_the_stack) {
  /* const C0 = C1 + 1; ... 20,000 deep: crashed before. */
  char *src = constant_chain(20000);
  expect_first_error(src, SIZE_MAX,
                     "t.tile:1023:15: error: code is nested too deeply through helper calls and constants (more than "
                     "2048 levels)");
  free(src);
  /* 500 deep is fine. */
  src = constant_chain(500);
  expect_ir_has(src, "const 501 : i32");
  free(src);
}

Test(limits, control_flow_nests_at_most_256_deep_through_helpers) {
  /* Every kernel's IR must parse back (ir/parse.c reads 256 levels). */
  expect_chain_error(&(HelperChain){"x, n", "", "if n > 0 {", "x, n", ";", "}", "", 200},
                     "fn h64(x, n) { store(x, 1.0); }\nkernel k(p: *f32, n: i32) { h0(p, n); }\n",
                     "t.tile:2:575: error: control flow is nested too deeply (more than 256 levels, counting inlined "
                     "helper calls)");
}

/* ---- names: linear lookup ----------------------------------------------------- */

Test(limits, fifty_thousand_locals_in_one_scope) {
  /* 29 s before: every declaration and use searched all earlier ones. */
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, "kernel k(p: *i32) {\n");
  for (int i = 0; i < 50000; i++) sb_printf(&sb, "    let v%d = %d;\n", i, i);
  sb_puts(&sb, "    let v0 = 1;\n    store(p, v49999);\n}\n");
  /* The duplicate at the end is still found, with its note. */
  tc_compilation *c = compile_timed(sb.data, sb.len, NULL, NULL);
  cr_expect(strstr(tc_diagnostics(c), "t.tile:50002:9: error: 'v0' is already declared in this scope\n") != NULL, "%.300s",
            tc_diagnostics(c));
  cr_expect(strstr(tc_diagnostics(c), "t.tile:2:9: note: 'v0' was declared here\n") != NULL, "%.300s",
            tc_diagnostics(c));
  tc_free(c);
  sb_free(&sb);
  /* Shadowing in nested scopes still finds the innermost. */
  char *ir = expect_ir("kernel k(p: *i32) { let x = 1; { let x = 2; { let x = 3; store(p, x); } store(p + 1, x); } "
                       "store(p + 2, x); }\n",
                       SIZE_MAX);
  const char *s3 = strstr(ir, "const 3 : i32"), *s2 = strstr(ir, "const 2 : i32"), *s1 = strstr(ir, "const 1 : i32");
  cr_expect(s1 && s2 && s3, "%s", ir);
  free(ir);
}

Test(limits, long_call_chains_of_helpers_are_checked_for_recursion_in_linear_time) {
  /* 30,000 helpers, each calling the next, and one call back to the first:
   * the recursion check was quadratic (and recursive). */
  StrBuf sb;
  sb_init(&sb);
  for (int i = 0; i < 30000; i++) sb_printf(&sb, "fn g%d() { g%d(); }\n", i, i + 1);
  sb_puts(&sb, "fn g30000() { g0(); }\nkernel k(p: *i32) { store(p, 1); }\n");
  expect_first_error(sb.data, sb.len,
                     "t.tile:30001:15: error: recursive call to 'g0': helper functions are inlined and cannot recurse");
  sb_free(&sb);
}

Test(limits, long_annotation_lists_are_checked_in_linear_time) {
  /* 100,000 annotations: the duplicate check compared every pair. */
  StrBuf sb;
  sb_init(&sb);
  for (int i = 0; i < 100000; i++) sb_puts(&sb, "@warps(4) ");
  sb_puts(&sb, "kernel k(p: *i32) { store(p, 1); }\n");
  expect_first_error(sb.data, sb.len, "t.tile:1:11: error: '@warps' is given twice");
  sb_free(&sb);
}

/* ---- loops with many variables ------------------------------------------------- */

Test(limits, loops_carrying_thousands_of_variables) {
  /* v_i = v_i + v_{i+1}, none used after the loop: the dead iter args went
   * one per round, each round examining every arg: cubic (3,000 variables
   * took minutes). Now all go at once, and nothing is left in the loop
   * but its store. */
  StrBuf sb;
  sb_init(&sb);
  int n = 3000;
  sb_puts(&sb, "kernel k(p: *i32) {\n");
  for (int i = 0; i < n; i++) sb_printf(&sb, "    var v%d = 0;\n", i);
  sb_puts(&sb, "    for j in range(10) {\n        store(p, j);\n");
  for (int i = 0; i + 1 < n; i++) sb_printf(&sb, "        v%d = v%d + v%d;\n", i, i, i + 1);
  sb_printf(&sb, "        v%d = v%d + 1;\n    }\n}\n", n - 1, n - 1);
  char *ir = expect_ir(sb.data, sb.len);
  cr_expect(strstr(ir, "iter(") == NULL, "%.2000s", ir);
  free(ir);
  /* Two that feed each other and nothing else go too; one that reaches a
   * store stays. */
  ir = expect_ir("kernel k(p: *i32) {\n    var a = 0;\n    var b = 1;\n    var c = 2;\n"
                 "    for j in range(10) {\n        let t = a;\n        a = b;\n        b = t;\n"
                 "        c = c + 1;\n        store(p, c);\n    }\n}\n",
                 SIZE_MAX);
  const char *iter = strstr(ir, "iter("), *comma = iter ? strchr(iter, ',') : NULL;
  cr_expect(iter && (!comma || strchr(iter, ')') < comma), "one iter arg left:\n%s", ir);
  free(ir);
  sb_free(&sb);
  /* 20,000 variables assigned in one loop (the list of carried variables
   * searched itself on every assignment), all stored after it. */
  sb_init(&sb);
  n = 20000;
  sb_puts(&sb, "kernel k(p: *i32) {\n");
  for (int i = 0; i < n; i++) sb_printf(&sb, "    var v%d = 0;\n", i);
  sb_puts(&sb, "    for j in range(10) {\n");
  for (int i = 0; i < n; i++) sb_printf(&sb, "        v%d = v%d + j;\n", i, i);
  sb_puts(&sb, "    }\n");
  for (int i = 0; i < n; i += 1000) sb_printf(&sb, "    store(p + %d, v%d);\n", i, i);
  sb_puts(&sb, "}\n");
  ir = expect_ir(sb.data, sb.len);
  free(ir);
  sb_free(&sb);
}

/* ---- input size and tokens ----------------------------------------------------- */

Test(limits, sources_over_64_mib_are_refused_before_reading) {
  size_t len = TC_MAX_SOURCE_BYTES + 1;
  char *src = malloc(len);
  cr_assert_not_null(src);
  memset(src, ' ', len);
  expect_first_error(src, len, "t.tile: error: the source is 67108865 bytes, more than the limit of 67108864 (64 MiB)");
  /* Exactly the limit is read (blanks: a file with no items, and no error). */
  tc_compilation *c = compile_timed(src, len - 1, NULL, NULL);
  cr_expect_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_expect_eq(tc_kernel_count(c), 0);
  tc_free(c);
  free(src);
}

Test(limits, more_than_a_million_tokens) {
  /* "kernel k(p: *i32) {" is 9 tokens, then 7 per "store(p, 1);". */
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, "kernel k(p: *i32) {\n");
  int lines = 1000000 / 7 + 1;
  for (int i = 0; i < lines; i++) sb_puts(&sb, "store(p, 1);\n");
  sb_puts(&sb, "}\n");
  /* Token 1,000,001 (index 1,000,000) is index (1000000 - 9) % 7 = 6 of
   * line 2 + (1000000 - 9) / 7: the ';' at column 12. */
  char want[128];
  snprintf(want, sizeof want, "t.tile:%d:12: error: the file has more than 1000000 tokens", 2 + (1000000 - 9) / 7);
  expect_first_error(sb.data, sb.len, want);
  sb_free(&sb);
  /* A file of 64 MiB of '(' stops at the token limit, not at 67 million. */
  size_t len = TC_MAX_SOURCE_BYTES;
  char *parens = malloc(len);
  cr_assert_not_null(parens);
  memset(parens, '(', len);
  expect_first_error(parens, len, "t.tile:1:1000001: error: the file has more than 1000000 tokens");
  free(parens);
}

/* ---- echoed values and long lines --------------------------------------------- */

Test(limits, long_define_values_are_cut_in_messages) {
  size_t n = 100 * 1024;
  char *value = malloc(n + 1);
  cr_assert_not_null(value);
  memset(value, '9', n);
  value[n] = 0;
  tc_compilation *c = compile_timed("kernel k(p: *i32, const N: i32) { store(p, N); }\n", SIZE_MAX, "N", value);
  char *got = first_line(c);
  char want[512];
  snprintf(want, sizeof want, "t.tile:1:25: error: invalid value '%.128s...' for const parameter 'N' of type i32", value);
  cr_expect_str_eq(got, want);
  free(got);
  tc_free(c);
  /* A long -D name no kernel has. */
  memset(value, 'N', n);
  c = compile_timed("kernel k(p: *i32) { store(p, 1); }\n", SIZE_MAX, value, "1");
  got = first_line(c);
  snprintf(want, sizeof want, "t.tile: error: -D %.128s...: no kernel in this file has a const parameter named '%.128s...'",
           value, value);
  cr_expect_str_eq(got, want);
  free(got);
  tc_free(c);
  free(value);
}

Test(limits, long_source_lines_are_shown_as_a_window) {
  /* A diagnostic printed the whole line (and a caret line as long): 20
   * errors in a 64 MiB line were gigabytes of output. */
  char *src = repeated("kernel k() { let x = 1", " + 1", 3000, "; }\n");
  tc_compilation *c = compile_timed(src, SIZE_MAX, NULL, NULL);
  free(src);
  const char *d = tc_diagnostics(c);
  cr_expect_str_eq(d, "t.tile:1:4112: error: expression is too deeply nested (more than 1024 levels)\n"
                      "    ...+ 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 "
                      "+ 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 ...\n"
                      "                                                                   ^\n");
  tc_free(c);
  /* Short lines are printed whole, as always. */
  c = compile_timed("kernel k() { let x = $; }\n", SIZE_MAX, NULL, NULL);
  cr_expect_str_eq(tc_diagnostics(c), "t.tile:1:22: error: unexpected character '$'\n"
                                      "    kernel k() { let x = $; }\n"
                                      "                         ^\n");
  tc_free(c);
}

/* ---- IR text ------------------------------------------------------------------ */

/* IR text parsed by ir_parse, with its diagnostics. */
typedef struct ParsedIr {
  Arena arena;
  Source src;
  Diags diags;
  Module *m; /* NULL on an error */
} ParsedIr;

static void parse_ir_text(ParsedIr *p, const char *text, size_t len) {
  arena_init(&p->arena);
  p->src = (Source){"t.ir", text, len, 0};
  diags_init(&p->diags, &p->arena, &p->src);
  double t0 = seconds_now();
  p->m = ir_parse(&p->arena, &p->src, &p->diags);
  double t = seconds_now() - t0;
  cr_expect_lt(t, LIMITS_MAX_SECONDS, "parsing took %.2f s", t);
}

/* The one error of a parse that failed. */
static void expect_ir_error(ParsedIr *p, const char *want) {
  cr_expect_null(p->m);
  cr_assert_eq(p->diags.count, 1);
  cr_expect_str_eq(p->diags.items[0].msg, want);
}

Test(limits, ir_text_with_many_parameters_parses_in_linear_time) {
  /* Each parameter name was looked up in a list of all of them. */
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, "module \"t\"\n\nkernel @k(");
  for (int i = 0; i < 50000; i++) sb_printf(&sb, "%s%%p%d: i32", i ? ", " : "", i);
  sb_puts(&sb, ") {\n  %0 = add %p49999, %p0 : i32\n  return\n}\n");
  ParsedIr p;
  parse_ir_text(&p, sb.data, sb.len);
  cr_expect(p.m && p.m->nfuncs == 1 && p.m->funcs[0]->body.nargs == 50000, "%s",
            p.diags.count ? p.diags.items[0].msg : "");
  arena_free(&p.arena);
  sb_free(&sb);
}

Test(limits, ir_text_lists_and_size_are_limited) {
  /* One operand more than a list may hold. */
  char *text = repeated("module \"t\"\n\nkernel @k(%x: i32) {\n  yield %x", ", %x", 1 << 20, "\n}\n");
  ParsedIr p;
  parse_ir_text(&p, text, strlen(text));
  expect_ir_error(&p, "list too long (limit 1048576 entries)");
  cr_expect_eq(p.diags.items[0].loc.line, 4);
  arena_free(&p.arena);
  free(text);
  /* Text over 64 MiB is refused before it is read. */
  size_t len = ((size_t)64 << 20) + 1;
  text = malloc(len);
  cr_assert_not_null(text);
  memset(text, '\n', len);
  parse_ir_text(&p, text, len);
  expect_ir_error(&p, "input is larger than 64 MiB");
  arena_free(&p.arena);
  free(text);
}

/* ---- the other front-end limits ------------------------------------------------ */

Test(limits, argument_lists_parameters_call_depth_and_rank) {
  /* 1,026 arguments: the 1,025th, at column 30 + 3 * 1023, is reported. */
  char *src = repeated("kernel k(p: *i32) { store(p, 1", ", 1", 1024, "); }\n");
  expect_first_error(src, SIZE_MAX, "t.tile:1:3099: error: too many arguments (more than 1024)");
  free(src);
  /* 17 parameters of a helper called with named-argument binding. */
  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, "fn f(a0");
  for (int i = 1; i < 17; i++) sb_printf(&sb, ", a%d", i);
  sb_puts(&sb, ") { }\nkernel k(p: *i32) { f(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0); }\n");
  expect_first_error(sb.data, sb.len, "t.tile:2:21: error: function 'f' has more than 16 parameters");
  sb_free(&sb);
  /* 65 helpers deep. */
  sb_init(&sb);
  for (int i = 0; i < 65; i++) sb_printf(&sb, "fn h%d(x) { return h%d(x); }\n", i, i + 1);
  sb_puts(&sb, "fn h65(x) { return x; }\nkernel k(p: *i32) { store(p, h0(1)); }\n");
  expect_first_error(sb.data, sb.len, "t.tile:64:20: error: helper calls nest more than 64 deep");
  sb_free(&sb);
  /* A fifth dimension. */
  expect_first_error("kernel k(p: *f32) { let t = zeros([2, 2, 2, 2, 2]); }\n", SIZE_MAX,
                     "t.tile:1:35: error: the shape of zeros() has 5 entries; at most 4 are allowed");
}
