/* test_imports.c - `import "x.tile" [as name];` (driver/imports.c):
 * namespaces, nested imports, the search path, files of functions only,
 * what an imported file may see, and the errors, with the diagnostics
 * pointing into the imported file. Files are written to a fresh temporary
 * directory per test. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/tile-imports-XXXXXX");
  cr_assert(mkdtemp(dir), "mkdtemp failed");
}

/* Writes dir/name (creating dir/sub first when name has one directory). */
static void put(const char *name, const char *text) {
  char path[256];
  const char *slash = strchr(name, '/');
  if (slash) {
    snprintf(path, sizeof path, "%s/%.*s", dir, (int)(slash - name), name);
    if (access(path, F_OK) != 0) cr_assert_eq(mkdir(path, 0755), 0, "mkdir %s", path);
  }
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

/* Compiles dir/main.tile with the include directories (relative to dir). */
static tc_compilation *compile_main(const char *text, const char *const *includes, int nincludes) {
  put("main.tile", text);
  char path[256], inc[8][256];
  const char *dirs[8];
  for (int i = 0; i < nincludes; i++) {
    snprintf(inc[i], sizeof inc[i], "%s/%s", dir, includes[i]);
    dirs[i] = inc[i];
  }
  snprintf(path, sizeof path, "%s/main.tile", dir);
  tc_options o = {.include_dirs = dirs, .ninclude_dirs = nincludes};
  return tc_compile(path, text, strlen(text), &o);
}

/* The first diagnostic line with the directory cut off the file names. */
static char *first_error(tc_compilation *c) {
  const char *d = tc_diagnostics(c);
  static char line[1024];
  size_t n = strcspn(d, "\n");
  snprintf(line, sizeof line, "%.*s", (int)n, d);
  char *at = strstr(line, dir);
  if (at) memmove(at, at + strlen(dir) + 1, strlen(at + strlen(dir) + 1) + 1);
  return line;
}

/* Runs kernel 0 over one program with out: f32[16] and x = 0, 1, ..., 15. */
static void run16(tc_compilation *c, float out[16]) {
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)i, out[i] = -999;
  tc_arg args[2] = {{.p = out}, {.p = x}};
  tc_buffer bufs[2] = {{out, 16 * sizeof(float), "out"}, {x, sizeof x, "x"}};
  char *err = NULL;
  bool ok = tc_interpret_ex(c, 0, (int64_t[3]){1, 1, 1}, args, 2, bufs, 2, NULL, &err);
  cr_assert(ok, "%s", err ? err : "");
  free(err);
}

Test(imports, namespaces_nested_imports_and_constants) {
  make_dir();
  put("lib/scale.tile", "const FACTOR: f32 = 3.0;\n"
                        "fn scale(x) { return x * FACTOR; }\n");
  put("lib/ops.tile", "import \"scale.tile\";\n" /* next to ops.tile */
                      "const OFFSET: f32 = 0.5;\n"
                      "fn offset(x) { return x + OFFSET; }\n"
                      "fn both(x) { return offset(scale.scale(x)); }\n"
                      "kernel not_compiled(out: *f32) { store(out, 1.0); }\n");
  tc_compilation *c = compile_main("import \"lib/ops.tile\";\n"
                                   "import \"lib/ops.tile\" as again;\n"
                                   "fn offset(x) { return x - 100.0; }\n" /* no clash: ops' offset is ops.offset */
                                   "kernel k(out: *f32, x: *f32) {\n"
                                   "    let i = arange(0, 16);\n"
                                   "    let v = load(x + i);\n"
                                   "    store(out + i, ops.both(v) + again.scale.FACTOR + offset(200.0));\n"
                                   "}\n",
                                   NULL, 0);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_expect_eq(tc_kernel_count(c), 1, "the imported file's kernel is not compiled");
  cr_expect_eq(tc_import_count(c), 4);
  cr_expect(strstr(tc_import_path(c, 0), "lib/ops.tile") && strstr(tc_import_path(c, 1), "lib/scale.tile"),
            "%s %s", tc_import_path(c, 0), tc_import_path(c, 1));
  cr_expect_null(tc_import_path(c, 4));
  float out[16];
  run16(c, out);
  for (int i = 0; i < 16; i++) cr_expect_eq(out[i], (float)i * 3 + 0.5f + 3 + 100, "out[%d] = %g", i, out[i]);
  tc_free(c);
}

Test(imports, include_directories_in_order) {
  make_dir();
  put("a/h.tile", "fn f(x) { return x + 1.0; }\n");
  put("b/h.tile", "fn f(x) { return x + 2.0; }\n");
  const char *ab[] = {"a", "b"}, *ba[] = {"b", "a"};
  const char *src = "import \"h.tile\";\nkernel k(out: *f32, x: *f32) { store(out + arange(0, 16), "
                    "h.f(load(x + arange(0, 16)))); }\n";
  float out[16];
  tc_compilation *c = compile_main(src, ab, 2);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  run16(c, out);
  cr_expect_eq(out[5], 6.0f);
  tc_free(c);
  c = compile_main(src, ba, 2);
  run16(c, out);
  cr_expect_eq(out[5], 7.0f);
  tc_free(c);
}

Test(imports, a_file_of_functions_alone_checks_clean) {
  make_dir();
  const char *src = "const N: i32 = 4;\nfn twice(x) { return x * 2; }\n";
  tc_compilation *c = tc_compile("helpers.tile", src, strlen(src), NULL);
  cr_expect_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_expect_eq(tc_kernel_count(c), 0);
  tc_free(c);
  c = tc_compile("empty.tile", "", 0, NULL);
  cr_expect_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  tc_free(c);
}

Test(imports, errors_point_into_the_imported_file) {
  make_dir();
  put("bad.tile", "fn f(x) {\n    return x + missing;\n}\n");
  tc_compilation *c = compile_main("import \"bad.tile\";\nkernel k(out: *f32) { store(out, bad.f(1.0)); }\n", NULL, 0);
  cr_expect_str_eq(first_error(c), "bad.tile:2:16: error: unknown name 'missing'");
  cr_expect(strstr(tc_diagnostics(c), "    return x + missing;\n                   ^"), "%s", tc_diagnostics(c));
  tc_free(c);
  put("syntax.tile", "fn g( { }\n");
  c = compile_main("import \"syntax.tile\" as s;\nkernel k(out: *f32) { store(out, 1.0); }\n", NULL, 0);
  cr_expect(strncmp(first_error(c), "syntax.tile:1:7: error:", 23) == 0, "%s", first_error(c));
  tc_free(c);
}

Test(imports, an_imported_file_sees_only_its_own_names_and_the_builtins) {
  make_dir();
  put("lib.tile", "fn f(x) { return helper(x) + sum(x, 0); }\n");
  tc_compilation *c = compile_main("import \"lib.tile\";\nfn helper(x) { return x; }\n"
                                   "kernel k(out: *f32) { store(out, lib.f(zeros([4], f32))); }\n",
                                   NULL, 0);
  cr_expect_str_eq(first_error(c), "lib.tile:1:18: error: unknown function 'helper'");
  tc_free(c);
  /* and the importer does not see the imported names unqualified */
  put("good.tile", "fn f(x) { return x; }\n");
  c = compile_main("import \"good.tile\";\nkernel k(out: *f32) { store(out, f(1.0)); }\n", NULL, 0);
  cr_expect(strncmp(first_error(c), "main.tile:2:34: error: unknown function 'f'", 43) == 0, "%s", first_error(c));
  tc_free(c);
}

Test(imports, bad_imports) {
  make_dir();
  static const struct {
    const char *src, *error;
  } cases[] = {
      {"import \"nowhere.tile\";\n",
       "main.tile:1:8: error: cannot find 'nowhere.tile' (looked next to this file; add a directory with -I)"},
      {"import \"x-y.tile\";\n", "main.tile:1:8: error: the file name is not an identifier: name its namespace "
                                 "with 'as', as in import \"x-y.tile\" as xy;"},
      {"import \"self.tile\";\n", "self.tile:1:8: error: 'self.tile' imports itself: main.tile -> self.tile -> "
                                  "self.tile"},
      {"import \"main.tile\" as me;\n", "main.tile:1:23: error: 'main.tile' imports itself: main.tile -> main.tile"},
      /* a cycle of three files below the compiled one, and one through it */
      {"import \"ring/a.tile\";\n",
       "ring/c.tile:1:8: error: 'a.tile' imports itself: main.tile -> ring/a.tile -> b.tile -> c.tile -> a.tile"},
      {"import \"back.tile\";\n", "back2.tile:1:8: error: 'main.tile' imports itself: main.tile -> back.tile -> "
                                  "back2.tile -> main.tile"},
      {"import \"one.tile\" as n;\nimport \"two.tile\" as n;\n",
       "main.tile:2:22: error: namespace 'n' is already imported"},
      {"import one.tile;\n", "main.tile:1:8: error: expected the file to import, as a string, found 'one'"},
      {"@warps(4) import \"one.tile\";\n", "main.tile:1:11: error: expected 'kernel' or 'fn' after an annotation, "
                                           "found 'import'"},
      {"import \"one.tile\";\nkernel k(out: *f32) { store(out, one.nothing(1.0)); }\n",
       "main.tile:2:34: error: unknown function 'one.nothing'"},
  };
  put("self.tile", "import \"self.tile\";\n");
  put("ring/a.tile", "import \"b.tile\";\nfn fa() { }\n");
  put("ring/b.tile", "import \"c.tile\";\nfn fb() { }\n");
  put("ring/c.tile", "import \"a.tile\";\nfn fc() { }\n");
  put("back.tile", "import \"back2.tile\";\n");
  put("back2.tile", "import \"main.tile\";\n");
  put("one.tile", "fn a() { }\n");
  put("two.tile", "fn b() { }\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tc_compilation *c = compile_main(cases[i].src, NULL, 0);
    cr_expect_gt(tc_error_count(c), 0, "%s: no error", cases[i].src);
    cr_expect_str_eq(first_error(c), cases[i].error, "%s", cases[i].src);
    tc_free(c);
  }
}

/* Compiles src as dir/main.tile with the source tree's lang/ as the
 * include directory (what tilec adds), asserting it compiles. */
static tc_compilation *compile_with_std(const char *src) {
  const char *lang = TILE_SOURCE_ROOT "/lang";
  char path[256];
  snprintf(path, sizeof path, "%s/main.tile", dir);
  tc_options o = {.include_dirs = &lang, .ninclude_dirs = 1};
  tc_compilation *c = tc_compile(path, src, strlen(src), &o);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  return c;
}

/* The standard library's helpers from a user kernel: mlp.tile's gated
 * product (SwiGLU: silu(g) * u) through import "std/mlp.tile", with the
 * source tree's lang/ as the include directory (what tilec adds). */
Test(imports, the_standard_library_from_a_user_kernel) {
  make_dir();
  const char *src = "import \"std/mlp.tile\";\n"
                    "kernel k(out: *f32, x: *f32) {\n"
                    "    let i = arange(0, 16);\n"
                    "    let v = load(x + i) * 0.25;\n"
                    "    store(out + i, mlp.gated(v, v + 1.0, 0));\n"
                    "}\n";
  tc_compilation *c = compile_with_std(src);
  cr_expect_eq(tc_kernel_count(c), 1, "mlp.tile's kernels are not compiled");
  float out[16];
  run16(c, out);
  for (int i = 0; i < 16; i++) {
    double g = i * 0.25, want = g / (1 + exp(-g)) * (g + 1);
    cr_expect(fabs(out[i] - want) <= 1e-5 * fmax(1, fabs(want)), "out[%d] = %g, want %g", i, out[i], want);
  }
  tc_free(c);
}

/* The epilogue and softmax pieces of the standard library from a user
 * kernel: gemm_ws.activation (gelu, tanh form) and softmax.softmax_of,
 * checked against double. */
Test(imports, std_epilogues_and_softmax_pieces) {
  make_dir();
  const char *src = "import \"std/gemm_ws.tile\";\n"
                    "import \"std/softmax.tile\";\n"
                    "kernel k(out: *f32, x: *f32) {\n"
                    "    let i = arange(0, 16);\n"
                    "    let v = load(x + i) * 0.25 - 2.0;\n"
                    "    store(out + i, gemm_ws.activation(v, 3) + softmax.softmax_of(v) * softmax.LOG2E);\n"
                    "}\n";
  tc_compilation *c = compile_with_std(src);
  float out[16];
  run16(c, out);
  double sum = 0;
  for (int i = 0; i < 16; i++) sum += exp(i * 0.25 - 2.0);
  for (int i = 0; i < 16; i++) {
    double v = i * 0.25 - 2.0;
    double gelu = 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    double want = gelu + exp(v) / sum * 1.4426950408889634;
    cr_expect(fabs(out[i] - want) <= 1e-5 * fmax(1, fabs(want)), "out[%d] = %g, want %g", i, out[i], want);
  }
  tc_free(c);
}

/* A device_assert in an imported function names the imported file when it
 * fails on the GPU (the __assertfail call's file argument). Needs the GPU
 * back end (skipped in a build without LLVM). */
Test(imports, a_gpu_assert_names_the_imported_file) {
  make_dir();
  put("checks.tile", "fn positive(x) {\n    device_assert(x > 0.0, \"not positive\");\n    return x;\n}\n");
  tc_compilation *c = compile_main("import \"checks.tile\";\n"
                                   "kernel k(out: *f32, x: *f32) { let i = arange(0, 128); "
                                   "store(out + i, checks.positive(load(x + i))); }\n",
                                   NULL, 0);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  if (!tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE})) {
    tc_free(c);
    cr_skip_test("no GPU back end in this build");
  }
  char *ll = tc_emit(c, TC_EMIT_LLVM);
  cr_assert(ll);
  char want[128];
  snprintf(want, sizeof want, "%s/checks.tile", dir);
  cr_expect(strstr(ll, want), "the assert's file is not %s", want);
  free(ll);
  tc_free(c);
}
