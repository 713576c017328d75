/* test_cli.c - the tilec command-line driver (compiler/driver/main.c and
 * run.c), run as a separate process.
 *
 * Scripts and build systems depend on the driver's contract more than on
 * its wording: the exit status (0 success, 1 errors in the source, 2 bad
 * usage), diagnostics on stderr in the "file:line:col: error:" form with
 * the source line and a caret, --emit output on stdout or in the -o file,
 * and `tilec run` running a kernel in the interpreter with --arg inputs and
 * printing one summary line per buffer. These tests spawn the built binary
 * (its path in the environment variable TILEC, default
 * build/compiler/driver/tilec, relative to the working directory) with
 * posix_spawn, capture stdout and stderr in files of a private temporary
 * directory, and check the status and the output.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* posix_spawn, mkdtemp */
#endif

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../compiler/include/tilec.h"

extern char **environ;

/* ---- harness ------------------------------------------------------------ */

#define MAX_PATHS 64
/* Most arguments of one run: room for the limits on -D and --arg. */
#define MAX_ARGS 600

static char tmpdir[64];
static char *created[MAX_PATHS]; /* files to remove at the end */
static int ncreated;

static const char *tilec_path(void) {
  const char *p = getenv("TILEC");
  return p && *p ? p : "build/compiler/driver/tilec";
}

/* A path inside the test's temporary directory (remembered for cleanup). */
static const char *tmp_path(const char *name) {
  cr_assert_lt(ncreated, MAX_PATHS);
  size_t n = strlen(tmpdir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p) abort();
  snprintf(p, n, "%s/%s", tmpdir, name);
  created[ncreated++] = p;
  return p;
}

static const char *write_file(const char *name, const char *text) {
  const char *path = tmp_path(name);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot create %s", path);
  fputs(text, f);
  fclose(f);
  return path;
}

/* The whole file (malloc'd, NUL terminated); NULL if it cannot be read. */
static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  if (!buf) abort();
  size_t got;
  while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap && !(buf = realloc(buf, (cap *= 2) + 1))) abort();
  }
  fclose(f);
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

/* Element i of a dumped f32 buffer. */
static float float_at(const char *buf, int i) {
  float v;
  memcpy(&v, buf + 4 * i, sizeof v);
  return v;
}

static void setup(void) {
  strcpy(tmpdir, "/tmp/tilec_cli_XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp failed");
  ncreated = 0;
}

static void teardown(void) {
  for (int i = ncreated - 1; i >= 0; i--) {
    remove(created[i]);
    free(created[i]);
  }
  ncreated = 0;
  rmdir(tmpdir);
}

TestSuite(cli, .init = setup, .fini = teardown);

typedef struct Result {
  int status; /* exit status; 128 + signal number if killed */
  char *out, *err;
} Result;

/* Runs tilec with args (NULL terminated, without argv[0]); stdin is
 * the file `in` (/dev/null when NULL), stdout and stderr are captured. */
static Result run_argv_in(const char *in, const char *const *args) {
  static int serial;
  char name[32];
  snprintf(name, sizeof name, "stdout.%d", serial);
  const char *out_path = tmp_path(name);
  snprintf(name, sizeof name, "stderr.%d", serial++);
  const char *err_path = tmp_path(name);

  const char *argv[MAX_ARGS];
  int argc = 0;
  argv[argc++] = tilec_path();
  for (int i = 0; args[i]; i++) {
    cr_assert_lt(argc, MAX_ARGS - 1);
    argv[argc++] = args[i];
  }
  argv[argc] = NULL;

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in ? in : "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  cr_assert_eq(rc, 0, "cannot run %s (set TILEC to the tilec binary): %s", argv[0], strerror(rc));
  int ws;
  cr_assert_eq(waitpid(pid, &ws, 0), pid);
  Result r;
  r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
  r.out = read_file(out_path, NULL);
  r.err = read_file(err_path, NULL);
  cr_assert(r.out && r.err);
  return r;
}

static Result run_argv(const char *const *args) { return run_argv_in(NULL, args); }

#define RUN(...) run_argv((const char *const[]){__VA_ARGS__, NULL})

static void result_free(Result *r) {
  free(r->out);
  free(r->err);
}

static void expect_status(const Result *r, int status) {
  cr_expect_eq(r->status, status, "exit status %d, expected %d\nstdout:\n%s\nstderr:\n%s", r->status, status, r->out,
               r->err);
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* ---- kernels ------------------------------------------------------------ */

static const char good_src[] = "// z = x + y, BLOCK elements per program\n"
                               "kernel add(z: *f32, x: *f32, y: *f32, n: i32, const BLOCK: i32 = 64) {\n"
                               "    let i = program_id(0) * BLOCK + arange(0, BLOCK);\n"
                               "    let m = i < n;\n"
                               "    store(z + i, load(x + i, m) + load(y + i, m), m);\n"
                               "}\n";

static const char bad_src[] = "kernel k(n: i32) {\n"
                              "    let x = n + ;\n"
                              "}\n";

/* Stores 64 elements whatever the buffer's size. */
static const char oob_src[] = "kernel fill(z: *f32) {\n"
                              "    let i = arange(0, 64);\n"
                              "    store(z + i, 1.0);\n"
                              "}\n";

static const char two_src[] = "kernel one(p: *i32) { store(p + arange(0, 4), 1); }\n"
                              "kernel two(p: *i32) { store(p + arange(0, 4), 2); }\n";

/* ---- compiling ------------------------------------------------------------ */

Test(cli, good_file_exits_0_silently) {
  const char *f = write_file("add.tile", good_src);
  Result r = RUN(f);
  expect_status(&r, 0);
  cr_expect_str_eq(r.out, "");
  cr_expect_str_eq(r.err, "");
  result_free(&r);
}

Test(cli, source_error_exits_1_with_caret) {
  const char *f = write_file("bad.tile", bad_src);
  Result r = RUN(f);
  expect_status(&r, 1);
  cr_expect_str_eq(r.out, "");
  char expected[512];
  snprintf(expected, sizeof expected,
           "%s:2:17: error: expected an expression, found ';'\n"
           "        let x = n + ;\n"
           "                    ^\n",
           f);
  cr_expect_str_eq(r.err, expected);
  result_free(&r);
}

/* -DNAME is NAME=true; a typo in a name gets a "did you mean" note at
 * the declaration it probably meant. */
Test(cli, bare_define_is_true_and_unknown_names_get_suggestions) {
  const char *f = write_file("flag.tile", "kernel k(x: *f32, const FLAG: bool = false) {\n"
                                          "    let offs = arange(0, 16);\n"
                                          "    store(x + offs, where(FLAG, 1.0, 0.0));\n"
                                          "}\n");
  Result r = RUN(f, "-DFLAG", "--emit=ir");
  expect_status(&r, 0);
  cr_expect(strstr(r.out, "FLAG: i1 = true"), "FLAG is true:\n%s", r.out);
  result_free(&r);
  r = RUN(f, "-D", "FLAG", "--emit=ir");
  expect_status(&r, 0);
  cr_expect(strstr(r.out, "FLAG: i1 = true"), "-D FLAG too:\n%s", r.out);
  result_free(&r);
  const char *g = write_file("typo.tile", "kernel k(x: *f32) {\n"
                                          "    let offs = arange(0, 16);\n"
                                          "    store(x + ofs, lod(x + offs));\n"
                                          "}\n");
  r = RUN(g);
  expect_status(&r, 1);
  char want[1024];
  snprintf(want, sizeof want,
           "%s:3:15: error: unknown name 'ofs'\n"
           "        store(x + ofs, lod(x + offs));\n"
           "                  ^\n"
           "%s:2:9: note: did you mean 'offs'?\n"
           "        let offs = arange(0, 16);\n"
           "            ^\n"
           "%s:3:20: error: unknown function 'lod'\n"
           "        store(x + ofs, lod(x + offs));\n"
           "                       ^\n"
           "%s:3:20: note: did you mean 'load'?\n"
           "        store(x + ofs, lod(x + offs));\n"
           "                       ^\n",
           g, g, g, g);
  cr_expect_str_eq(r.err, want);
  result_free(&r);
}

/* --color=always colours the location, the severity, the message and the
 * caret; without the colours the text is the plain one. The default (auto)
 * is plain when stderr is not a terminal, as here. */
Test(cli, colour_on_request_plain_otherwise) {
  const char *f = write_file("sem.tile", "kernel k() {\n    let x = y;\n}\n");
  Result plain = RUN(f), never = RUN(f, "--color=never"), col = RUN(f, "--color=always");
  expect_status(&col, 1);
  cr_expect(!strchr(plain.err, '\033') && !strcmp(plain.err, never.err), "plain by default and with never:\n%s",
            plain.err);
  char want[512];
  snprintf(want, sizeof want, "\033[1m%s:2:13:\033[0m \033[1;31merror:\033[0m \033[1munknown name 'y'\033[0m\n", f);
  cr_expect(!strncmp(col.err, want, strlen(want)), "coloured:\n%s", col.err);
  cr_expect(strstr(col.err, "\033[1;32m                ^\033[0m"), "a green caret:\n%s", col.err);
  /* the same text without the escapes */
  char stripped[2048];
  size_t n = 0;
  for (const char *p = col.err; *p && n + 1 < sizeof stripped; p++) {
    if (*p == '\033') {
      while (*p && *p != 'm') p++;
      continue;
    }
    stripped[n++] = *p;
  }
  stripped[n] = 0;
  cr_expect_str_eq(stripped, plain.err);
  result_free(&plain), result_free(&never), result_free(&col);
  Result bad = RUN(f, "--color=sometimes");
  expect_status(&bad, 2);
  cr_expect(strstr(bad.err, "tilec: unknown --color 'sometimes' (expected auto, always or never)"), "%s", bad.err);
  result_free(&bad);
}

/* -MD writes OUT.d, -MF FILE names it: "OUT: INPUT" in make's syntax
 * (blanks escaped); both need -o. */
Test(cli, dependency_files) {
  const char *f = write_file("dep src.tile", good_src);
  const char *out = tmp_path("dep out.tir"), *d = tmp_path("dep out.tir.d"), *mf = tmp_path("named.d");
  Result r = RUN(f, "-o", out, "-MD");
  expect_status(&r, 0);
  result_free(&r);
  char *text = read_file(d, NULL);
  cr_assert_not_null(text, "no %s", d);
  char want[1100], eo[512], ef[512];
  size_t k = 0;
  for (const char *p = out; *p; p++) { if (*p == ' ') eo[k++] = '\\'; eo[k++] = *p; }
  eo[k] = 0, k = 0;
  for (const char *p = f; *p; p++) { if (*p == ' ') ef[k++] = '\\'; ef[k++] = *p; }
  ef[k] = 0;
  snprintf(want, sizeof want, "%s: %s\n", eo, ef);
  cr_expect_str_eq(text, want);
  free(text);
  r = RUN(f, "-o", out, "-MF", mf);
  expect_status(&r, 0);
  result_free(&r);
  text = read_file(mf, NULL);
  cr_expect(text && !strcmp(text, want), "-MF: %s", text ? text : "(none)");
  free(text);
  r = RUN(f, "-MD");
  expect_status(&r, 2);
  cr_expect(strstr(r.err, "tilec: -MD, -MF and -MP need -o FILE"), "%s", r.err);
  result_free(&r);
}

/* import: the depfile names the imported file; from stdin an import is
 * found only through -I (both spellings); a file of functions checks
 * clean but has nothing to compile. */
Test(cli, imports_search_path_and_dependency_files) {
  const char *h = write_file("cli_helpers.tile", "fn twice(x) { return x * 2.0; }\n");
  static const char main_src[] = "import \"cli_helpers.tile\" as h;\n"
                                 "kernel k(p: *f32) { store(p, h.twice(1.0)); }\n";
  const char *m = write_file("cli_main.tile", main_src);
  const char *out = tmp_path("cli_main.tir"), *d = tmp_path("cli_main.tir.d");
  Result r = RUN(m, "-o", out, "-MD");
  expect_status(&r, 0);
  result_free(&r);
  char *text = read_file(d, NULL), want[600];
  snprintf(want, sizeof want, "%s: %s %s\n", out, m, h);
  cr_expect(text && !strcmp(text, want), "depfile: %s, want %s", text ? text : "(none)", want);
  free(text);
  /* -MP: a rule of its own for the imported file */
  r = RUN(m, "-o", out, "-MP");
  expect_status(&r, 0);
  result_free(&r);
  text = read_file(d, NULL);
  snprintf(want, sizeof want, "%s: %s %s\n\n%s:\n", out, m, h, h);
  cr_expect(text && !strcmp(text, want), "depfile with -MP: %s, want %s", text ? text : "(none)", want);
  free(text);
  r = run_argv_in(m, (const char *const[]){"-", NULL}); /* the same text on stdin */
  expect_status(&r, 1);
  cr_expect(strstr(r.err, "cannot find 'cli_helpers.tile'"), "%s", r.err);
  result_free(&r);
  r = run_argv_in(m, (const char *const[]){"-", "-I", tmpdir, NULL});
  expect_status(&r, 0);
  result_free(&r);
  char joined[80];
  snprintf(joined, sizeof joined, "-I%s", tmpdir);
  r = run_argv_in(m, (const char *const[]){"-", joined, NULL});
  expect_status(&r, 0);
  result_free(&r);
  r = RUN(h);
  expect_status(&r, 0);
  result_free(&r);
  r = RUN(h, "-o", tmp_path("cli_helpers.ptx"));
  expect_status(&r, 1);
  cr_expect(strstr(r.err, "has no kernel to compile (a file of functions and constants is for importing)"), "%s",
            r.err);
  result_free(&r);
}

Test(cli, semantic_error_exits_1) {
  const char *f = write_file("sem.tile", "kernel k() {\n    let x = y;\n}\n");
  Result r = RUN(f);
  expect_status(&r, 1);
  char expected[256];
  snprintf(expected, sizeof expected, "%s:2:13: error: unknown name 'y'\n", f);
  cr_expect(starts_with(r.err, expected), "stderr:\n%s", r.err);
  cr_expect(strstr(r.err, "\n        let x = y;\n                ^\n") != NULL, "no caret in:\n%s", r.err);
  result_free(&r);
}

Test(cli, define_values) {
  const char *f = write_file("add.tile", good_src);
  /* Both spellings of -D; a good value compiles, a bad one is a source error. */
  Result r = RUN(f, "-D", "BLOCK=128");
  expect_status(&r, 0);
  result_free(&r);
  r = RUN(f, "-DBLOCK=32");
  expect_status(&r, 0);
  result_free(&r);
  r = RUN(f, "-D", "BLOCK=100");
  expect_status(&r, 1);
  char expected[256];
  snprintf(expected, sizeof expected, "%s:3:37: error: arange() length 100 is not a power of two\n", f);
  cr_expect(starts_with(r.err, expected), "stderr:\n%s", r.err);
  result_free(&r);
  /* -D of a name no kernel has is an error too (without a location). */
  r = RUN(f, "-D", "NOPE=1");
  expect_status(&r, 1);
  snprintf(expected, sizeof expected, "%s: error: -D NOPE: no kernel in this file has a const parameter named 'NOPE'\n",
           f);
  cr_expect_str_eq(r.err, expected);
  result_free(&r);
}

Test(cli, unknown_kernel_is_a_source_error) {
  const char *f = write_file("add.tile", good_src);
  Result r = RUN(f, "-k", "nope");
  expect_status(&r, 1);
  char expected[256];
  snprintf(expected, sizeof expected, "%s: error: no kernel named 'nope' in this file\n", f);
  cr_expect_str_eq(r.err, expected);
  result_free(&r);
  r = RUN(f, "--kernel", "add");
  expect_status(&r, 0);
  result_free(&r);
}

Test(cli, emit_ast_and_tokens) {
  const char *f = write_file("small.tile", "kernel k(n: i32) { let _x = n + 1; }\n");
  Result r = RUN(f, "--emit=ast");
  expect_status(&r, 0);
  cr_expect_str_eq(r.out, "(kernel k (n i32)\n  (let _x _ (+ n 1))\n)\n");
  cr_expect_str_eq(r.err, "");
  result_free(&r);
  r = RUN(f, "--emit=tokens");
  expect_status(&r, 0);
  cr_expect(starts_with(r.out, "1:1 KW_KERNEL kernel\n1:8 IDENT k\n1:9 LPAREN (\n"), "stdout:\n%s", r.out);
  cr_expect(strstr(r.out, "1:33 INT 1\n") && strstr(r.out, "2:1 EOF\n"), "stdout:\n%s", r.out);
  result_free(&r);
}

/* Unused let/var bindings: a warning (exit 0), an error under -Werror,
 * nothing under -w or for a name starting with '_'; none when the file
 * has errors (they would bury them). */
static const char unused_src[] = "kernel k(p: *f32) {\n"
                                 "    let a = 1.0;\n"
                                 "    var b = 2.0;\n"
                                 "    let _c = 3;\n"
                                 "    let d = 4.0;\n"
                                 "    store(p + arange(0, 4), d);\n"
                                 "}\n";

Test(cli, unused_values_warn_and_werror_makes_them_errors) {
  const char *f = write_file("unused.tile", unused_src);
  char a[256], b[256];
  snprintf(a, sizeof a, "%s:2:9: warning: unused value 'a' (its value is never read; call it '_a' if that is meant)\n",
           f);
  snprintf(b, sizeof b, "%s:3:9: warning: unused variable 'b' (its value is never read; call it '_b' if that is meant)\n",
           f);
  Result r = RUN(f);
  expect_status(&r, 0);
  cr_expect(starts_with(r.err, a) && strstr(r.err, b) && strstr(r.err, a) < strstr(r.err, b), "stderr:\n%s", r.err);
  cr_expect(strstr(r.err, "'_c'") == NULL && strstr(r.err, "'d'") == NULL, "stderr:\n%s", r.err);
  result_free(&r);
  r = RUN(f, "-Werror", "--emit=ir");
  expect_status(&r, 1);
  snprintf(a, sizeof a, "%s:2:9: error: unused value 'a' (its value is never read; call it '_a' if that is meant) [-Werror]\n",
           f);
  cr_expect(starts_with(r.err, a), "stderr:\n%s", r.err);
  cr_expect_str_eq(r.out, "", "no output after an error");
  result_free(&r);
  r = RUN(f, "-w");
  expect_status(&r, 0);
  cr_expect_str_eq(r.err, "");
  result_free(&r);
  /* with an error in the file: only the error */
  const char *g = write_file("unused_bad.tile", "kernel k(p: *f32) {\n    let a = 1.0;\n    let b = q;\n}\n");
  r = RUN(g);
  expect_status(&r, 1);
  cr_expect(strstr(r.err, "unknown name 'q'") != NULL && strstr(r.err, "warning") == NULL, "stderr:\n%s", r.err);
  result_free(&r);
}

Test(cli, emit_tokens_of_a_bad_file_still_exits_1) {
  /* Tokens are printed even though the file does not compile. */
  const char *f = write_file("bad.tile", bad_src);
  Result r = RUN(f, "--emit=tokens");
  expect_status(&r, 1);
  cr_expect(strstr(r.out, "2:17 SEMI ;\n") != NULL, "stdout:\n%s", r.out);
  cr_expect(strstr(r.err, ":2:17: error: expected an expression, found ';'") != NULL, "stderr:\n%s", r.err);
  result_free(&r);
}

Test(cli, emit_ir) {
  const char *f = write_file("add.tile", good_src);
  Result r = RUN(f, "--emit=ir");
  expect_status(&r, 0);
  cr_expect(strstr(r.out, "kernel @add(%z: *f32, %x: *f32, %y: *f32, %n: i32) consts(BLOCK: i32 = 64)") != NULL,
            "stdout:\n%s", r.out);
  result_free(&r);
  /* A bad file prints no IR. */
  f = write_file("bad.tile", bad_src);
  r = RUN(f, "--emit=ir");
  expect_status(&r, 1);
  cr_expect_str_eq(r.out, "");
  result_free(&r);
}

Test(cli, output_file) {
  const char *f = write_file("small.tile", "kernel k(n: i32) { let _x = n + 1; }\n");
  const char *o = tmp_path("out.ast");
  Result r = RUN(f, "--emit=ast", "-o", o);
  expect_status(&r, 0);
  cr_expect_str_eq(r.out, "");
  char *text = read_file(o, NULL);
  cr_assert_not_null(text, "no output file");
  cr_expect_str_eq(text, "(kernel k (n i32)\n  (let _x _ (+ n 1))\n)\n");
  free(text);
  result_free(&r);
}

/* What gcc and nvcc users type: -oFILE, -o - (stdout), - (stdin),
 * --kernel=NAME, -O2, and -o NAME.ptx without --emit (the stage from the
 * name; a name that tells none is a usage error, not a silent exit 0). */
Test(cli, compiler_command_line_habits) {
  const char *f = write_file("two.tile", two_src);
  const char *ptx = tmp_path("two.ptx");
  Result r = RUN(f, "-o", ptx, "-k", "one");
  expect_status(&r, 0);
  char *text = read_file(ptx, NULL);
  cr_expect(text && strstr(text, ".entry one") && !strstr(text, ".entry two"), "-o NAME.ptx writes PTX:\n%s",
            text ? text : "(none)");
  free(text);
  result_free(&r);
  const char *ir = tmp_path("two.tir");
  char attached[300];
  snprintf(attached, sizeof attached, "-o%s", ir);
  r = RUN(f, attached, "--kernel=two", "-O2");
  expect_status(&r, 0);
  text = read_file(ir, NULL);
  cr_expect(text && strstr(text, "kernel @two") && !strstr(text, "kernel @one"), "-oNAME.tir writes the IR:\n%s",
            text ? text : "(none)");
  free(text);
  result_free(&r);
  r = RUN(f, "--emit=ir", "-o", "-");
  expect_status(&r, 0);
  cr_expect(strstr(r.out, "kernel @one") && strstr(r.out, "kernel @two"), "-o - is stdout:\n%s", r.out);
  result_free(&r);
  r = run_argv_in(f, (const char *const[]){"-", "--emit=ir", NULL});
  expect_status(&r, 0);
  cr_expect(strstr(r.out, "module \"<stdin>\"") && strstr(r.out, "kernel @one"), "- reads stdin:\n%s", r.out);
  result_free(&r);
  const char *bad = write_file("bad_stdin.tile", bad_src);
  r = run_argv_in(bad, (const char *const[]){"-", NULL});
  expect_status(&r, 1);
  cr_expect(starts_with(r.err, "<stdin>:"), "diagnostics name stdin:\n%s", r.err);
  result_free(&r);
  char msg[300];
  const char *bin = tmp_path("two.bin");
  snprintf(msg, sizeof msg, "tilec: -o '%s' needs --emit=STAGE (or a name ending in .cubin, .ptx, .ll, .h or .tir)", bin);
  r = RUN(f, "-o", bin);
  expect_status(&r, 2);
  cr_expect(starts_with(r.err, msg), "stderr:\n%s", r.err);
  cr_expect(!read_file(bin, NULL), "nothing written");
  result_free(&r);
}

Test(cli, options_after_the_file) {
  const char *f = write_file("add.tile", good_src);
  Result r = RUN("-O0", "--verify-each", f, "--emit=ir", "-D", "BLOCK=16");
  expect_status(&r, 0);
  cr_expect(strstr(r.out, "consts(BLOCK: i32 = 16)") != NULL, "stdout:\n%s", r.out);
  result_free(&r);
}

/* ---- the GPU back end's report (-v) ------------------------------------ */

/* The toolkit's ptxas, which the stand-in below wraps. */
#define REAL_PTXAS "/usr/local/cuda/bin/ptxas"

/* ptxas prints its C75xx notes (wgmma serialized, waits inserted) only
 * for wgmma code that the back end does not emit, so a stand-in toolkit
 * (CUDA_HOME=<tmp>: tilec runs <tmp>/bin/ptxas) runs the real ptxas and
 * adds one such note, worded as ptxas words them. */
static const char noting_ptxas[] =
    "#!/bin/sh\n"
    "\"" REAL_PTXAS "\" \"$@\" || exit $?\n"
    "echo \"ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
    "the presence of Extern calls in the function 'add'\"\n";

Test(cli, verbose_warns_when_ptxas_notes_wgmma_trouble) {
  if (access(REAL_PTXAS, X_OK) != 0) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  const char *f = write_file("add.tile", good_src);
  Result r = RUN(f, "-v", "--linker=ptxas");
  if (r.status == 1 && strstr(r.err, "no GPU back end")) {
    result_free(&r);
    cr_skip_test("tilec was built without the GPU back end");
  }
  expect_status(&r, 0);
  cr_expect(starts_with(r.err, "add: 4 warps, 0 bytes shared memory, "), "stderr:\n%s", r.err);
  cr_expect(strstr(r.err, "warning") == NULL, "the real ptxas notes nothing about add:\n%s", r.err);
  result_free(&r);

  cr_assert_eq(mkdir(tmp_path("bin"), 0700), 0);
  cr_assert_eq(chmod(write_file("bin/ptxas", noting_ptxas), 0700), 0);
  cr_assert_eq(setenv("CUDA_HOME", tmpdir, 1), 0); /* this test's own process */
  r = RUN(f, "-v", "--linker=ptxas");
  expect_status(&r, 0);
  cr_expect(strstr(r.err, "add: warning: ptxas reported 1 wgmma note (C75xx: serialized or fenced tensor-core code);"
                          " see ptxas -v\n") != NULL,
            "stderr:\n%s", r.err);
  result_free(&r);
}

/* Register spills are warnings on a successful compilation, errors with
 * -Werror=spills; the epilogue with erf spills (bench/RESULTS.md). */
Test(cli, spills_warn_or_fail_with_werror) {
  if (access(REAL_PTXAS, X_OK) != 0) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  /* an int4 decode over 128-key blocks with 4 warps spills at 255 registers */
  const char *f = TILE_SOURCE_ROOT "/lang/std/paged_decode.tile";
  Result r = RUN(f, "-k", "paged_decode", "-D", "KV=u8", "-D", "INT4=true", "-D", "WARPS=4", "-D", "BLOCK_N=128",
                 "--linker=ptxas", "--emit=cubin", "-o", tmp_path("k.cubin"));
  if (r.status == 1 && strstr(r.err, "no GPU back end")) {
    result_free(&r);
    cr_skip_test("tilec was built without the GPU back end");
  }
  expect_status(&r, 0);
  cr_expect(strstr(r.err, ": warning: GPU back end: kernel 'paged_decode' spills registers"), "stderr:\n%s", r.err);
  result_free(&r);
  r = RUN(f, "-k", "paged_decode", "-D", "KV=u8", "-D", "INT4=true", "-D", "WARPS=4", "-D", "BLOCK_N=128",
          "--linker=ptxas", "-Werror=spills");
  expect_status(&r, 1);
  cr_expect(strstr(r.err, ": error: GPU back end: kernel 'paged_decode' spills registers"), "stderr:\n%s", r.err);
  result_free(&r);
  /* a kernel that does not spill compiles as before */
  r = RUN(f, "-k", "paged_decode", "--linker=ptxas", "-Werror=spills");
  expect_status(&r, 0);
  cr_expect_str_eq(r.err, "");
  result_free(&r);
}

/* ---- usage ----------------------------------------------------------------- */

Test(cli, help_and_version_exit_0) {
  Result r = RUN("--help");
  expect_status(&r, 0);
  cr_expect(starts_with(r.out, "usage: tilec FILE.tile [options]"), "stdout:\n%s", r.out);
  cr_expect(strstr(r.out, "Exit status: 0 success, 1 errors in the source, 2 bad usage.") != NULL);
  cr_expect_str_eq(r.err, "");
  result_free(&r);
  r = RUN("-h");
  expect_status(&r, 0);
  cr_expect(starts_with(r.out, "usage: tilec"));
  result_free(&r);
  r = RUN("--version");
  expect_status(&r, 0);
  /* "tilec VERSION", maybe followed by build details, on one line. */
  cr_expect(starts_with(r.out, "tilec " TILEC_VERSION) && strchr(r.out, '\n') == r.out + strlen(r.out) - 1,
            "stdout:\n%s", r.out);
  result_free(&r);
  r = RUN("run", "--help");
  expect_status(&r, 0);
  cr_expect(starts_with(r.out, "usage: tilec run FILE.tile"), "stdout:\n%s", r.out);
  result_free(&r);
}

/* Asserts exit status 2 and the first line of stderr. */
static void expect_usage(Result r, const char *first_line) {
  expect_status(&r, 2);
  size_t n = strcspn(r.err, "\n");
  cr_expect(strlen(first_line) == n && strncmp(r.err, first_line, n) == 0, "stderr:\n%s\nexpected first line:\n%s",
            r.err, first_line);
  cr_expect_str_eq(r.out, "");
  result_free(&r);
}

Test(cli, usage_errors_exit_2) {
  const char *f = write_file("add.tile", good_src);
  expect_usage(RUN(f, "--bogus"), "tilec: unknown option '--bogus'");
  expect_usage(RUN(f, "--emit=pdf"), "tilec: unknown --emit stage 'pdf' (expected tokens, ast, ir, lowered, llvm, ptx, cubin or header)");
  expect_usage(RUN(f, "-D"), "tilec: option '-D' needs an argument");
  expect_usage(RUN(f, "-D", "9BLOCK"), "tilec: -D needs NAME=VALUE, got '9BLOCK'");
  expect_usage(RUN(f, "-DBLOCK="), "tilec: -D needs NAME=VALUE, got 'BLOCK='");
  expect_usage(RUN(f, "-D", "=5"), "tilec: -D needs NAME=VALUE, got '=5'");
  expect_usage(RUN(f, "-k"), "tilec: option '-k' needs an argument");
  expect_usage(RUN(f, "-o"), "tilec: option '-o' needs an argument");
  char msg[256];
  snprintf(msg, sizeof msg, "tilec: more than one input file ('%s')", f);
  expect_usage(RUN(f, f), msg);
}

Test(cli, no_input_file_exits_2) {
  Result r = RUN("-O0");
  expect_status(&r, 2);
  cr_expect(starts_with(r.err, "tilec: no input file\n"), "stderr:\n%s", r.err);
  cr_expect(strstr(r.err, "tilec --help") != NULL, "stderr:\n%s", r.err);
  result_free(&r);
  r = run_argv((const char *const[]){NULL});
  expect_status(&r, 2);
  result_free(&r);
}

Test(cli, nonexistent_file_exits_2) {
  const char *f = tmp_path("missing.tile");
  Result r = RUN(f);
  expect_status(&r, 2);
  char expected[256];
  snprintf(expected, sizeof expected, "tilec: cannot open '%s': No such file or directory\n", f);
  cr_expect_str_eq(r.err, expected);
  result_free(&r);
}

/* ---- tilec run ------------------------------------------------------------- */

Test(cli, run_prints_buffer_summaries) {
  const char *f = write_file("add.tile", good_src);
  Result r = RUN("run", f, "--grid", "2", "--arg", "z=zeros:100", "--arg", "x=range:100", "--arg", "y=range:100",
                 "--arg", "n=100");
  expect_status(&r, 0);
  cr_expect_str_eq(r.out, "z: f32[100] min=0 max=198 mean=99 nan=0\n"
                          "x: f32[100] min=0 max=99 mean=49.5 nan=0\n"
                          "y: f32[100] min=0 max=99 mean=49.5 nan=0\n");
  cr_expect_str_eq(r.err, "");
  result_free(&r);
}

Test(cli, run_masks_the_tail) {
  /* n = 70: the second program's lanes past 70 must not be written. */
  const char *f = write_file("add.tile", good_src);
  Result r = RUN("run", f, "-D", "BLOCK=32", "--grid", "4", "--arg", "z=zeros:100", "--arg", "x=range:100", "--arg",
                 "y=range:100", "--arg", "n=70");
  expect_status(&r, 0);
  cr_expect(starts_with(r.out, "z: f32[100] min=0 max=138 mean=48.3 nan=0\n"), "stdout:\n%s", r.out);
  result_free(&r);
}

Test(cli, run_dump_and_seed) {
  const char *f = write_file("add.tile", good_src);
  const char *dir = tmp_path("dump");
  const char *zbin = tmp_path("dump/z.bin");
  tmp_path("dump/x.bin");
  tmp_path("dump/y.bin");
  Result a = RUN("run", f, "--grid", "2", "--arg", "z=zeros:100", "--arg", "x=rand:100", "--arg", "y=range:100",
                 "--arg", "n=100", "--seed", "7", "--dump", dir);
  expect_status(&a, 0);
  size_t len;
  char *z = read_file(zbin, &len);
  cr_assert_not_null(z, "no %s", zbin);
  cr_expect_eq(len, 100 * sizeof(float));
  /* y = range: z[i] - i is x[i], in [-1, 1). */
  for (int i = 0; i < 100 && len == 400; i++) {
    float v = float_at(z, i);
    cr_expect(v - (float)i >= -1.0f && v - (float)i < 1.0f, "z[%d] = %g", i, v);
  }
  free(z);
  /* The same seed gives the same inputs, another seed others. */
  Result b = RUN("run", f, "--grid", "2", "--arg", "z=zeros:100", "--arg", "x=rand:100", "--arg", "y=range:100",
                 "--arg", "n=100", "--seed", "7");
  Result c = RUN("run", f, "--grid", "2", "--arg", "z=zeros:100", "--arg", "x=rand:100", "--arg", "y=range:100",
                 "--arg", "n=100", "--seed", "8");
  expect_status(&b, 0);
  expect_status(&c, 0);
  cr_expect_str_eq(a.out, b.out);
  cr_expect_str_neq(a.out, c.out);
  result_free(&a);
  result_free(&b);
  result_free(&c);
}

Test(cli, run_out_of_bounds_exits_1_with_location) {
  const char *f = write_file("oob.tile", oob_src);
  Result r = RUN("run", f, "--grid", "1", "--arg", "z=zeros:10");
  expect_status(&r, 1);
  char prefix[256];
  snprintf(prefix, sizeof prefix, "%s:3:5: error: out-of-bounds store of f32", f);
  cr_expect(starts_with(r.err, prefix), "stderr:\n%s\nexpected it to start with:\n%s", r.err, prefix);
  cr_expect(strstr(r.err, "buffer 'z' (40 bytes)") != NULL, "stderr:\n%s", r.err);
  cr_expect_str_eq(r.out, "", "no summaries after a failed run");
  result_free(&r);
  /* A buffer large enough makes the same kernel run. */
  r = RUN("run", f, "--grid", "1", "--arg", "z=zeros:64");
  expect_status(&r, 0);
  cr_expect_str_eq(r.out, "z: f32[64] min=1 max=1 mean=1 nan=0\n");
  result_free(&r);
}

/* --dump also after a failed run: the buffers as the run left them. The
 * kernel writes 7 to z[0..3], then stores 64 elements past them, out of
 * bounds of a 10-element buffer. */
static const char write_then_fail_src[] = "kernel fill(z: *f32) {\n"
                                          "    store(z + arange(0, 4), 7.0);\n"
                                          "    store(z + 4 + arange(0, 64), 1.0);\n"
                                          "}\n";

Test(cli, run_dump_after_a_failed_run) {
  const char *f = write_file("wfail.tile", write_then_fail_src);
  const char *dir = tmp_path("faildump");
  const char *zbin = tmp_path("faildump/z.bin");
  Result r = RUN("run", f, "--grid", "1", "--arg", "z=range:10", "--dump", dir);
  expect_status(&r, 1);
  cr_expect(strstr(r.err, ":3:5: error: out-of-bounds store of f32") != NULL, "stderr:\n%s", r.err);
  char note[256];
  snprintf(note, sizeof note, "tilec run: the buffers go to '%s' as they were when the run stopped\n", dir);
  cr_expect(strstr(r.err, note) != NULL, "stderr:\n%s", r.err);
  cr_expect_str_eq(r.out, "", "no summaries after a failed run");
  size_t len;
  char *z = read_file(zbin, &len);
  cr_assert_not_null(z, "no %s after the failed run", zbin);
  cr_expect_eq(len, 10 * sizeof(float));
  for (int i = 0; i < 4 && len == 40; i++)
    cr_expect_eq(float_at(z, i), 7.0f, "z[%d] = %g: the store before the error is in the dump", i, float_at(z, i));
  free(z);
  result_free(&r);
}

/* file:SHAPE:PATH: a descriptor (or pointer) from a file, its size checked
 * against the shape. */
static const char desc_copy_src[] = "kernel copy(dst: tensor<f32, 2>, src: tensor<f32, 2>) {\n"
                                    "    let t = load_block(src, [0, 0], [4, 8]);\n"
                                    "    store_block(dst, [0, 0], t * 2.0);\n"
                                    "}\n";

Test(cli, run_descriptor_from_a_file) {
  const char *f = write_file("dcopy.tile", desc_copy_src);
  const char *bin = tmp_path("src.bin");
  float data[32];
  for (int i = 0; i < 32; i++) data[i] = 0.25f * (float)i - 3.0f;
  FILE *fp = fopen(bin, "wb");
  cr_assert_not_null(fp);
  cr_assert_eq(fwrite(data, sizeof data, 1, fp), 1u);
  fclose(fp);
  char arg[512];
  snprintf(arg, sizeof arg, "src=file:4x8:%s", bin);
  const char *dir = tmp_path("ddump");
  const char *dbin = tmp_path("ddump/dst.bin");
  tmp_path("ddump/src.bin");
  Result r = RUN("run", f, "--grid", "1", "--arg", "dst=zeros:4x8", "--arg", arg, "--dump", dir);
  expect_status(&r, 0);
  cr_expect_str_eq(r.out, "dst: f32[32] min=-6 max=9.5 mean=1.75 nan=0\n"
                          "src: f32[32] min=-3 max=4.75 mean=0.875 nan=0\n");
  size_t len;
  char *d = read_file(dbin, &len);
  cr_assert_not_null(d);
  cr_expect_eq(len, sizeof data);
  for (int i = 0; i < 32 && len == sizeof data; i++)
    cr_expect_eq(float_at(d, i), 2.0f * data[i], "dst[%d] = %g", i, float_at(d, i));
  free(d);
  result_free(&r);
  /* a size that is not the shape's */
  snprintf(arg, sizeof arg, "src=file:4x9:%s", bin);
  char msg[512];
  snprintf(msg, sizeof msg, "tilec run: '%s' holds 128 bytes; 36 elements of f32 need 144", bin);
  expect_usage(RUN("run", f, "--grid", "1", "--arg", "dst=zeros:4x8", "--arg", arg), msg);
  /* a descriptor needs the shape */
  snprintf(arg, sizeof arg, "src=file:%s", bin);
  expect_usage(RUN("run", f, "--grid", "1", "--arg", "dst=zeros:4x8", "--arg", arg),
               "tilec run: bad buffer for 'src' (expected rand:N, zeros:N, range:N, file:PATH or file:SHAPE:PATH; "
               "descriptors need a shape of their rank, e.g. rand:64x32 or file:64x32:PATH)");
}

Test(cli, run_source_error_exits_1) {
  const char *f = write_file("bad.tile", bad_src);
  Result r = RUN("run", f, "--grid", "1", "--arg", "n=1");
  expect_status(&r, 1);
  cr_expect(strstr(r.err, ":2:17: error: expected an expression, found ';'") != NULL, "stderr:\n%s", r.err);
  result_free(&r);
}

Test(cli, run_usage_errors_exit_2) {
  const char *f = write_file("add.tile", good_src);
  expect_usage(RUN("run", f, "--grid", "2", "--arg", "z=zeros:100", "--arg", "x=range:100", "--arg", "y=range:100"),
               "tilec run: missing --arg for parameter 'n'");
  expect_usage(RUN("run", f, "--arg", "z=zeros:100"), "tilec run: --grid is required");
  expect_usage(RUN("run", f, "--grid", "0"), "tilec run: --grid needs X[,Y[,Z]] with positive sizes, got '0'");
  expect_usage(RUN("run", f, "--grid", "1,2,3,4"),
               "tilec run: --grid needs X[,Y[,Z]] with positive sizes, got '1,2,3,4'");
  expect_usage(RUN("run", f, "--grid", "2", "--arg", "z=zeros:100", "--arg", "x=range:100", "--arg", "y=range:100",
                   "--arg", "n=100", "--arg", "q=1"),
               "tilec run: kernel has no runtime parameter 'q'");
  expect_usage(RUN("run", f, "--grid", "2", "--arg", "z=zeros:100", "--arg", "x=range:100", "--arg", "y=range:100",
                   "--arg", "n=abc"),
               "tilec run: bad value for scalar parameter 'n'");
  expect_usage(RUN("run", f, "--grid", "2", "--arg", "z=ones:100", "--arg", "x=range:100", "--arg", "y=range:100",
                   "--arg", "n=1"),
               "tilec run: bad buffer for 'z' (expected rand:N, zeros:N, range:N, file:PATH or file:SHAPE:PATH; "
               "descriptors need a shape of their rank, e.g. rand:64x32 or file:64x32:PATH)");
  expect_usage(RUN("run", f, "--grid", "1", "--arg", "noequals"), "tilec run: --arg needs NAME=VALUE, got 'noequals'");
  expect_usage(RUN("run", f, "--grid"), "tilec run: option '--grid' needs an argument");
  expect_usage(RUN("run", f, "--bogus"), "tilec run: unknown option '--bogus'");
  expect_usage(RUN("run", "--grid", "1"), "tilec run: no input file");
}

Test(cli, run_needs_k_with_several_kernels) {
  const char *f = write_file("two.tile", two_src);
  expect_usage(RUN("run", f, "--grid", "1", "--arg", "p=zeros:4"),
               "tilec run: the file has several kernels; choose one with -k");
  Result r = RUN("run", f, "-k", "two", "--grid", "1", "--arg", "p=zeros:4");
  expect_status(&r, 0);
  cr_expect_str_eq(r.out, "p: i32[4] min=2 max=2 mean=2 nan=0\n");
  result_free(&r);
}

Test(cli, run_nonexistent_file_exits_2) {
  const char *f = tmp_path("missing.tile");
  Result r = RUN("run", f, "--grid", "1");
  expect_status(&r, 2);
  cr_expect(starts_with(r.err, "tilec: cannot open '"), "stderr:\n%s", r.err);
  result_free(&r);
}

/* ---- tilec run: limits ------------------------------------------------------ */

/* i stays in 0 .. 4: the loop never ends. */
static const char spin_src[] = "kernel spin(z: *f32) {\n"
                               "    var i = 1;\n"
                               "    while i < 10 {\n"
                               "        i = (i * 7) % 5;\n"
                               "    }\n"
                               "    store(z, 1.0);\n"
                               "}\n";

Test(cli, run_timeout_stops_a_runaway_loop_with_its_location) {
  const char *f = write_file("spin.tile", spin_src);
  Result r = RUN("run", f, "--grid", "1", "--arg", "z=zeros:1", "--timeout", "0.3");
  expect_status(&r, 1);
  /* At whichever op of the loop (line 3 or 4) was running when the clock
   * was read. */
  char prefix[256];
  snprintf(prefix, sizeof prefix, "%s:", f);
  cr_expect(starts_with(r.err, prefix), "stderr:\n%s", r.err);
  const char *loc = r.err + strlen(prefix);
  cr_expect(loc[0] == '3' || loc[0] == '4', "stderr:\n%s", r.err);
  cr_expect(strstr(r.err, ": error: time limit of 0.3 seconds exceeded after ") != NULL, "stderr:\n%s", r.err);
  cr_expect(strstr(r.err, " steps (program (0, 0, 0))\n") != NULL, "stderr:\n%s", r.err);
  cr_expect_str_eq(r.out, "");
  result_free(&r);
  /* The step limit is reported as before when it comes first. */
  r = RUN("run", f, "--grid", "1", "--arg", "z=zeros:1", "--max-steps", "1000", "--timeout", "100");
  expect_status(&r, 1);
  cr_expect(strstr(r.err, ": error: execution limit of 1000 steps exceeded (program (0, 0, 0))") != NULL,
            "stderr:\n%s", r.err);
  result_free(&r);
  /* --timeout 0: no time limit. */
  const char *add = write_file("add.tile", good_src);
  r = RUN("run", add, "--timeout", "0", "--grid", "1", "--arg", "z=zeros:4", "--arg", "x=range:4", "--arg", "y=range:4",
          "--arg", "n=4");
  cr_expect_str_eq(r.out, "z: f32[4] min=0 max=6 mean=3 nan=0\nx: f32[4] min=0 max=3 mean=1.5 nan=0\n"
                          "y: f32[4] min=0 max=3 mean=1.5 nan=0\n");
  result_free(&r);
}

Test(cli, run_limit_usage_errors_exit_2) {
  const char *f = write_file("spin.tile", spin_src);
  expect_usage(RUN("run", f, "--grid", "1", "--timeout", "-1"),
               "tilec run: --timeout needs a number of seconds (0: no limit), got '-1'");
  expect_usage(RUN("run", f, "--grid", "1", "--timeout", "inf"),
               "tilec run: --timeout needs a number of seconds (0: no limit), got 'inf'");
  expect_usage(RUN("run", f, "--grid", "1", "--timeout"), "tilec run: option '--timeout' needs an argument");
  /* strtoull skips blanks and then takes a sign: " -1" is not 2^64 - 1. */
  expect_usage(RUN("run", f, "--grid", "1", "--seed", " -1"), "tilec run: --seed needs a non-negative integer, got ' -1'");
  expect_usage(RUN("run", f, "--grid", "1", "--max-steps", " -5"),
               "tilec run: --max-steps needs a positive integer, got ' -5'");
}

Test(cli, run_buffer_shapes_are_checked_before_multiplying) {
  /* Four sizes of 2^40 multiply past 2^63: a usage error, not an overflow. */
  const char *f = write_file("spin.tile", spin_src);
  expect_usage(RUN("run", f, "--grid", "1", "--arg", "z=zeros:1099511627776x1099511627776x1099511627776"),
               "tilec run: bad buffer for 'z' (expected rand:N, zeros:N, range:N, file:PATH or file:SHAPE:PATH; "
               "descriptors need a shape of their rank, e.g. rand:64x32 or file:64x32:PATH)");
}

/* ---- inputs and echoed arguments ------------------------------------------- */

Test(cli, output_that_would_overwrite_the_input_is_refused) {
  const char *f = write_file("keep.tile", good_src);
  char msg[512];
  snprintf(msg, sizeof msg, "tilec: -o '%s' would overwrite the input", f);
  expect_usage(RUN(f, "--emit=ir", "-o", f), msg);
  /* Another name of the same file. */
  const char *link = tmp_path("link.tile");
  cr_assert_eq(symlink(f, link), 0);
  snprintf(msg, sizeof msg, "tilec: -o '%s' would overwrite the input", link);
  expect_usage(RUN(f, "--emit=ast", "-o", link), msg);
  char *text = read_file(f, NULL);
  cr_expect_str_eq(text, good_src, "the source was changed");
  free(text);
}

Test(cli, sources_over_64_mib_are_refused_without_reading_them) {
  /* /dev/zero never ends: reading stops at the limit (it grew to 7.9 GB). */
  expect_usage(RUN("/dev/zero"), "tilec: '/dev/zero' is larger than 64 MiB (the limit of a source file)");
  /* A (sparse) regular file one byte over: refused from its size. */
  const char *f = write_file("big.tile", "");
  cr_assert_eq(truncate(f, ((off_t)64 << 20) + 1), 0);
  char msg[512];
  snprintf(msg, sizeof msg, "tilec: '%s' is larger than 64 MiB (the limit of a source file)", f);
  expect_usage(RUN(f), msg);
}

/* "NAME=" followed by n copies of c (malloc'd). */
static char *long_define(const char *name, char c, size_t n) {
  size_t l = strlen(name);
  char *s = malloc(l + n + 1);
  cr_assert_not_null(s);
  memcpy(s, name, l);
  memset(s + l, c, n);
  s[l + n] = 0;
  return s;
}

Test(cli, long_define_values_are_cut_in_messages) {
  const char *f = write_file("add.tile", good_src);
  char *value = long_define("BLOCK=", '9', 100 * 1024);
  Result r = RUN(f, "-D", value);
  expect_status(&r, 1);
  char want[512];
  snprintf(want, sizeof want, "error: invalid value '%.128s...' for const parameter 'BLOCK' of type i32\n", value + 6);
  cr_expect(strstr(r.err, want) != NULL, "stderr:\n%.1000s", r.err);
  cr_expect_lt(strlen(r.err), 1000, "the value came back whole");
  result_free(&r);
  free(value);
  /* A malformed one (a name that starts with a digit) is a usage error,
   * cut the same way. */
  value = long_define("9", 'N', 100 * 1024);
  snprintf(want, sizeof want, "tilec: -D needs NAME=VALUE, got '%.128s...'", value);
  expect_usage(RUN(f, "-D", value), want);
  free(value);
}

Test(cli, run_refuses_an_argument_given_twice) {
  /* The second one was silently used before. */
  const char *f = write_file("add.tile", good_src);
  expect_usage(RUN("run", f, "--grid", "1", "--arg", "n=4", "--arg", "z=zeros:4", "--arg", "n=5"),
               "tilec run: --arg 'n' is given twice");
}

Test(cli, run_cuts_long_arguments_in_messages) {
  const char *f = write_file("add.tile", good_src);
  char *grid = long_define("", '7', 100 * 1024);
  char want[512];
  snprintf(want, sizeof want, "tilec run: --grid needs X[,Y[,Z]] with positive sizes, got '%.128s...'", grid);
  expect_usage(RUN("run", f, "--grid", grid), want);
  free(grid);
  char *arg = long_define("", 'q', 100 * 1024);
  arg[100 * 1024 - 2] = '=';
  snprintf(want, sizeof want, "tilec run: kernel has no runtime parameter '%.128s...'", arg);
  expect_usage(RUN("run", f, "--grid", "1", "--arg", arg), want);
  free(arg);
}

Test(cli, define_and_arg_counts_are_limited) {
  const char *f = write_file("add.tile", good_src);
  static const char *args[MAX_ARGS];
  int n = 0;
  args[n++] = f;
  for (int i = 0; i < 257; i++) args[n++] = "-DBLOCK=64"; /* CLI_MAX_DEFINES is 256 */
  args[n] = NULL;
  expect_usage(run_argv(args), "tilec: too many -D options");
  n = 0;
  args[n++] = "run";
  args[n++] = f;
  args[n++] = "--grid";
  args[n++] = "1";
  static char names[65][16];
  for (int i = 0; i < 65; i++) { /* RUN_MAX_PARAMS is 64 */
    snprintf(names[i], sizeof names[i], "p%d=1", i);
    args[n++] = "--arg";
    args[n++] = names[i];
  }
  args[n] = NULL;
  expect_usage(run_argv(args), "tilec run: more than 64 --arg options");
}

Test(cli, run_file_buffers_over_1_gib_are_refused_without_reading_them) {
  const char *f = write_file("add.tile", good_src);
  const char *big = write_file("big.bin", "");
  if (truncate(big, ((off_t)1 << 30) + 1) != 0) cr_skip_test("no sparse files here");
  char arg[600];
  snprintf(arg, sizeof arg, "x=file:%s", big);
  Result r = RUN("run", f, "--grid", "1", "--arg", "z=zeros:4", "--arg", arg, "--arg", "y=zeros:4", "--arg", "n=4");
  expect_status(&r, 2);
  char want[600];
  snprintf(want, sizeof want, "tilec: '%s' is larger than 1024 MiB (the limit of a file: buffer)\n", big);
  cr_expect(starts_with(r.err, want), "stderr:\n%s", r.err);
  result_free(&r);
}

/* ---- tilec tune -------------------------------------------------------------
 * Everything up to the GPU: the options, the candidates, the front end and
 * the --grid expressions are checked before a runtime is made, so these
 * run without one. (The GPU suite tunes for real: tests/gpu.) */

static const char tune_src[] = "@config(BLOCK = 32)\n"
                               "@config(BLOCK = 128)\n"
                               "kernel add(z: *f32, x: *f32, y: *f32, n: i32, const BLOCK: i32 = 64) {\n"
                               "    let i = program_id(0) * BLOCK + arange(0, BLOCK);\n"
                               "    let m = i < n;\n"
                               "    store(z + i, load(x + i, m) + load(y + i, m), m);\n"
                               "}\n";

#define TUNE_ARGS "--arg", "z=zeros:1000", "--arg", "x=rand:1000", "--arg", "y=rand:1000", "--arg", "n=1000"

Test(cli, tune_help_and_usage_errors) {
  Result r = RUN("tune", "--help");
  expect_status(&r, 0);
  cr_expect(starts_with(r.out, "usage: tilec tune FILE.tile"), "stdout:\n%s", r.out);
  cr_expect(strstr(r.out, "3 no GPU") != NULL, "stdout:\n%s", r.out);
  result_free(&r);
  const char *f = write_file("tune.tile", tune_src);
  expect_usage(RUN("tune", f, TUNE_ARGS), "tilec tune: --grid is required");
  expect_usage(RUN("tune", f, "--grid", "", TUNE_ARGS), "tilec tune: --grid needs X[,Y[,Z]], got ''");
  expect_usage(RUN("tune", f, "--grid", "4", "--dump", "d"), "tilec tune: '--dump' is an option of tilec run, not of tilec tune");
  expect_usage(RUN("tune", f, "--grid", "4", "--timeout", "1"),
               "tilec tune: '--timeout' is an option of tilec run, not of tilec tune");
  expect_usage(RUN("run", f, "--grid", "4", "--retune"), "tilec run: '--retune' is an option of tilec tune, not of tilec run");
  expect_usage(RUN("run", f, "--grid", "4", "--config", "BLOCK=32"),
               "tilec run: '--config' is an option of tilec tune, not of tilec run");
  expect_usage(RUN("tune", f, "--grid", "4", "--reps", "0"), "tilec tune: --reps needs 1 to 1000 launches, got '0'");
  expect_usage(RUN("tune", f, "--grid", "4", "--warmup", "1001"),
               "tilec tune: --warmup needs 0 to 1000 launches, got '1001'");
  expect_usage(RUN("tune", f, "--grid", "4", "--config"), "tilec tune: option '--config' needs an argument");
  expect_usage(RUN("tune", f, "--grid", "4", "--config", "BLOCK=32,,X=1", TUNE_ARGS),
               "tilec tune: --config needs NAME=VALUE,NAME=VALUE... (at most 32), got 'BLOCK=32,,X=1'");
  expect_usage(RUN("tune", f, "--grid", "4", "--config", "BLOCK", TUNE_ARGS),
               "tilec tune: --config needs NAME=VALUE,NAME=VALUE... (at most 32), got 'BLOCK'");
  expect_usage(RUN("tune", f, "--grid", "4", "--arg", "z=zeros:1000"), "tilec tune: missing --arg for parameter 'x'");
  expect_usage(RUN("tune", f, "--grid", "4", TUNE_ARGS, "--arg", "w=1"),
               "tilec tune: kernel has no runtime parameter 'w'");
  expect_usage(RUN("tune", f, "--grid", "4", "--arg", "z=zeros:1000", "--arg", "x=rand:1000", "--arg", "y=rand:1000",
                   "--arg", "n=many"),
               "tilec tune: bad value for scalar parameter 'n'");
  /* no @config and no --config: nothing to choose from */
  const char *plain = write_file("plain.tile", good_src);
  expect_usage(RUN("tune", plain, "--grid", "4", TUNE_ARGS),
               "tilec tune: kernel 'add' declares no @config: give the candidates with --config");
  const char *two = write_file("two.tile", two_src);
  expect_usage(RUN("tune", two, "--grid", "1", "--config", "A=1", "--arg", "p=zeros:4"),
               "tilec tune: the file has several kernels; choose one with -k");
  /* the key: --key-args names --args or -D values, checked before the GPU */
  expect_usage(RUN("tune", f, "--grid", "4", "--key-args", "n,m", TUNE_ARGS),
               "tilec tune: --key-args names 'm', which is no --arg or -D");
  expect_usage(RUN("tune", f, "--grid", "4", "--key-args", "n", "--key", "x", TUNE_ARGS),
               "tilec tune: --key and --key-args: give one of them");
}

Test(cli, tune_source_errors_exit_1) {
  const char *bad = write_file("bad.tile", bad_src);
  Result r = RUN("tune", bad, "--grid", "1", "--arg", "n=1");
  expect_status(&r, 1);
  cr_expect(strstr(r.err, "bad.tile:2:") != NULL, "stderr:\n%s", r.err);
  result_free(&r);
  /* every candidate refused by the front end (BLOCK must be a power of two) */
  const char *f = write_file("tune.tile", tune_src);
  r = RUN("tune", f, "--grid", "4", "--config", "BLOCK=3", "--config", "BLOCK=5", TUNE_ARGS);
  expect_status(&r, 1);
  cr_expect(starts_with(r.err, "tilec tune: no candidate compiles; the first one's diagnostics:\n"), "stderr:\n%s",
            r.err);
  result_free(&r);
}

Test(cli, tune_grid_expressions_are_checked_before_the_gpu) {
  const char *f = write_file("tune.tile", tune_src);
  expect_usage(RUN("tune", f, "--grid", "cdiv(n, BLOCKS)", TUNE_ARGS),
               "tilec tune: --grid 'cdiv(n, BLOCKS)': unknown name 'BLOCKS' (names are the kernel's integer const "
               "parameters, its integer scalar --args and num_sms) at offset 8");
  expect_usage(RUN("tune", f, "--grid", "cdiv(n, ", TUNE_ARGS),
               "tilec tune: --grid 'cdiv(n, ': expected a number, a name or '(' at the end");
  expect_usage(RUN("tune", f, "--grid", "n / BLOCK)", TUNE_ARGS),
               "tilec tune: --grid 'n / BLOCK)': expected ',' or the end at offset 9");
  expect_usage(RUN("tune", f, "--grid", "1,2,3,4", TUNE_ARGS),
               "tilec tune: --grid '1,2,3,4': more than three sizes at offset 6");
  expect_usage(RUN("tune", f, "--grid", "min(n)", TUNE_ARGS),
               "tilec tune: --grid 'min(n)': expected ',' between the two arguments at offset 5");
  /* x is a buffer, not a number */
  expect_usage(RUN("tune", f, "--grid", "x", TUNE_ARGS),
               "tilec tune: --grid 'x': unknown name 'x' (names are the kernel's integer const parameters, its "
               "integer scalar --args and num_sms) at offset 0");
}

Test(cli, tune_without_a_gpu_exits_3) {
  /* a complete tuning: on a machine without a GPU (CI) it stops at the
   * runtime with status 3; with one, it tunes and prints the table */
  const char *f = write_file("tune.tile", tune_src);
  const char *cache = tmp_path("cache");
  Result r = RUN("tune", f, "--grid", "cdiv(n, BLOCK), 1", "--cache", cache, "--key-args", "n", TUNE_ARGS);
  if (r.status == 3) {
    cr_expect(starts_with(r.err, "tilec tune: no GPU to run on: "), "stderr:\n%s", r.err);
    cr_expect_str_eq(r.out, "");
  } else {
    expect_status(&r, 0);
    cr_expect(strstr(r.out, "chosen: BLOCK=") != NULL, "stdout:\n%s", r.out);
    cr_expect(strstr(r.out, "key 'n=1000'") != NULL, "stdout:\n%s", r.out);
  }
  result_free(&r);
  rmdir(cache); /* made only with a GPU: tile_jit's files are removed by no one here */
}

/* Misspelt options, stages, kernels and const parameters get the closest
 * known name; names with nothing close get none. */
Test(cli, did_you_mean_on_the_command_line) {
  const char *f = write_file("two.tile", "kernel add(z: *f32, const BLOCK: i32 = 64) { store(z, 1.0); }\n"
                                          "kernel sub(z: *f32) { store(z, 2.0); }\n");
  expect_usage(RUN(f, "--emitt=ptx"), "tilec: unknown option '--emitt=ptx'; did you mean '--emit'?");
  expect_usage(RUN(f, "--embd"), "tilec: unknown option '--embd'; did you mean '--embed'?");
  expect_usage(RUN(f, "--emit=ptxx"), "tilec: unknown --emit stage 'ptxx' (expected tokens, ast, ir, lowered, llvm, "
                                      "ptx, cubin or header); did you mean 'ptx'?");
  expect_usage(RUN(f, "--zzzzzz"), "tilec: unknown option '--zzzzzz'");
  expect_usage(RUN("run", f, "--gird", "4"), "tilec run: unknown option '--gird'; did you mean '--grid'?");
  expect_usage(RUN("run", f, "--retun"), "tilec run: unknown option '--retun'"); /* tune's option: not offered */
  expect_usage(RUN("tune", f, "--retun"), "tilec tune: unknown option '--retun'; did you mean '--retune'?");
  expect_usage(RUN("tune", f, "--dumpp"), "tilec tune: unknown option '--dumpp'"); /* run's option: not offered */
  Result r = RUN(f, "-k", "ad");
  expect_status(&r, 1);
  cr_expect(strstr(r.err, "error: no kernel named 'ad' in this file\n") != NULL, "stderr:\n%s", r.err);
  cr_expect(strstr(r.err, "note: did you mean 'add'?\n") != NULL, "stderr:\n%s", r.err);
  result_free(&r);
  r = RUN(f, "-D", "BLOKC=32");
  expect_status(&r, 1);
  cr_expect(strstr(r.err, "note: did you mean 'BLOCK'?\n") != NULL, "stderr:\n%s", r.err);
  result_free(&r);
  r = RUN(f, "-D", "WARPS=8");
  expect_status(&r, 1);
  cr_expect(strstr(r.err, "did you mean") == NULL, "stderr:\n%s", r.err);
  result_free(&r);
}
