/* test_debug.c - device_print and device_assert in the interpreter
 * (sema/irgen_builtins.c, interp/interp_ops.c): the exact lines printed
 * for messages, scalars and tiles of each kind of element, the failure of
 * an assertion with its index, and the errors of bad calls. The GPU side
 * prints the same lines (tests/gpu/gpu_debug.c compares them).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Room for everything one run prints. */
#define OUTPUT_MAX 8192

/* Runs kernel 0 of src over `programs` programs with one f32 buffer x
 * (16 elements, x[i] = i / 4) and `limit`; returns what it printed
 * (malloc'd) and whether it succeeded, the error in *error. */
static char *run_printing(const char *src, int64_t programs, double limit, bool *ok, char **error) {
  tc_compilation *c = tc_compile("debug.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i / 4;
  tc_arg args[2] = {{.p = x}, {.f = limit}};
  tc_buffer buf = {x, sizeof x, "x"};
  FILE *out = tmpfile();
  cr_assert(out);
  tc_interp_options o = {.print_to = out};
  *ok = tc_interpret_ex(c, 0, (int64_t[3]){programs, 1, 1}, args, 2, &buf, 1, &o, error);
  tc_free(c);
  char *text = calloc(OUTPUT_MAX, 1);
  rewind(out);
  size_t n = fread(text, 1, OUTPUT_MAX - 1, out);
  text[n] = 0;
  fclose(out);
  return text;
}

Test(device_print, messages_scalars_and_tiles) {
  const char *src = "kernel k(x: *f32, limit: f32) {\n"
                    "    let idx = arange(0, 2)[:, None] * 2 + arange(0, 2)[None, :];\n"
                    "    let v = load(x + program_id(0) * 4 + idx);\n"
                    "    device_print(\"start\");\n"
                    "    device_print(\"limit\", limit);\n"
                    "    device_print(\"v\", v);\n"
                    "    device_print(\"bf16\", (v * 3.0) as bf16);\n"
                    "    device_print(\"i8 50%\", (idx - 2) as i8);\n"
                    "    device_print(\"u64\", idx as u64 * 6000000000);\n"
                    "    device_print(\"ok\", v < 0.5);\n"
                    "}\n";
  bool ok;
  char *err = NULL;
  char *out = run_printing(src, 2, 1.5, &ok, &err);
  cr_assert(ok, "%s", err);
  const char *want = "pid (0, 0, 0) start\n"
                     "pid (0, 0, 0) limit: 1.5\n"
                     "pid (0, 0, 0) idx (0, 0) v: 0\n"
                     "pid (0, 0, 0) idx (0, 1) v: 0.25\n"
                     "pid (0, 0, 0) idx (1, 0) v: 0.5\n"
                     "pid (0, 0, 0) idx (1, 1) v: 0.75\n"
                     "pid (0, 0, 0) idx (0, 0) bf16: 0\n"
                     "pid (0, 0, 0) idx (0, 1) bf16: 0.75\n"
                     "pid (0, 0, 0) idx (1, 0) bf16: 1.5\n"
                     "pid (0, 0, 0) idx (1, 1) bf16: 2.25\n"
                     "pid (0, 0, 0) idx (0, 0) i8 50%: -2\n"
                     "pid (0, 0, 0) idx (0, 1) i8 50%: -1\n"
                     "pid (0, 0, 0) idx (1, 0) i8 50%: 0\n"
                     "pid (0, 0, 0) idx (1, 1) i8 50%: 1\n"
                     "pid (0, 0, 0) idx (0, 0) u64: 0\n"
                     "pid (0, 0, 0) idx (0, 1) u64: 6000000000\n"
                     "pid (0, 0, 0) idx (1, 0) u64: 12000000000\n"
                     "pid (0, 0, 0) idx (1, 1) u64: 18000000000\n"
                     "pid (0, 0, 0) idx (0, 0) ok: 1\n"
                     "pid (0, 0, 0) idx (0, 1) ok: 1\n"
                     "pid (0, 0, 0) idx (1, 0) ok: 0\n"
                     "pid (0, 0, 0) idx (1, 1) ok: 0\n"
                     "pid (1, 0, 0) start\n"
                     "pid (1, 0, 0) limit: 1.5\n"
                     "pid (1, 0, 0) idx (0, 0) v: 1\n";
  cr_expect(strncmp(out, want, strlen(want)) == 0, "printed:\n%s", out);
  cr_expect_eq(harness_count(out, "\n"), 2 * 22, "%s", out);
  free(out);
}

Test(device_assert, stops_at_the_first_false_element) {
  const char *src = "kernel k(x: *f32, limit: f32) {\n"
                    "    let i = arange(0, 4);\n"
                    "    let v = load(x + program_id(0) * 4 + i);\n"
                    "    device_assert(v <= limit, \"x <= limit\");\n"
                    "    device_print(\"after\", program_id(0));\n"
                    "}\n";
  bool ok;
  char *err = NULL;
  char *out = run_printing(src, 4, 1.5, &ok, &err);
  cr_assert(!ok, "the assertion held");
  /* x = 0, 0.25, ...: program 1 holds 1, 1.25, 1.5, 1.75; index 3 fails */
  cr_expect(err && strstr(err, "debug.tile:4:5: error: device_assert failed at idx (3): x <= limit (program (1, 0, 0))"),
            "%s", err ? err : "(none)");
  cr_expect_str_eq(out, "pid (0, 0, 0) after: 0\n");
  free(err);
  free(out);
  out = run_printing(src, 4, 10, &ok, &err);
  cr_expect(ok, "%s", err);
  cr_expect_eq(harness_count(out, "after"), 4);
  free(out);
}

Test(device_assert, scalar_and_default_message) {
  const char *src = "kernel k(x: *f32, limit: f32) { device_assert(limit > 2.0); }\n";
  bool ok;
  char *err = NULL;
  char *out = run_printing(src, 1, 1, &ok, &err);
  cr_expect(!ok && err && strstr(err, "error: device_assert failed: assertion failed (program (0, 0, 0))"), "%s",
            err ? err : "(none)");
  free(err);
  free(out);
}

static void expect_error(const char *src, const char *part) {
  tc_compilation *c = tc_compile("debug.tile", src, strlen(src), NULL);
  cr_expect(strstr(tc_diagnostics(c), part), "expected '%s' in:\n%s", part, tc_diagnostics(c));
  tc_free(c);
}

Test(device_print, bad_calls) {
  expect_error("kernel k(x: *f32) { device_print(x); }", "message must be a string");
  expect_error("kernel k(x: *f32) { device_print(\"p\", x); }", "device_print prints numbers, not *f32");
  expect_error("kernel k(x: *f32) { device_assert(1.0); }", "condition must be i1, not f32");
  expect_error("kernel k(x: *f32) { device_assert(true, 3); }", "message must be a string");
  char src[600];
  snprintf(src, sizeof src, "kernel k(x: *f32) { device_print(\"%0300d\"); }", 0);
  expect_error(src, "message is longer than 256 bytes");
}

/* A condition true at compile time leaves nothing; the IR carries the
 * messages. */
Test(device_assert, in_the_ir) {
  const char *src = "kernel k(x: *f32, n: i32) { device_assert(1 < 2, \"always\"); device_assert(n > 0, \"n \\\"positive\\\"\");"
                    " device_print(\"n\", n); }";
  tc_compilation *c = tc_compile("debug.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  char *ir = tc_emit(c, TC_EMIT_IR);
  tc_free(c);
  cr_assert(ir);
  cr_expect(!strstr(ir, "always"), "%s", ir);
  cr_expect(strstr(ir, "device_assert %") && strstr(ir, "\"n \\\"positive\\\"\""), "%s", ir);
  cr_expect(strstr(ir, "device_print %n \"n\""), "%s", ir);
  free(ir);
}
