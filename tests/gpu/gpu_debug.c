/* gpu_debug.c - device_print and device_assert on the GPU
 * (tests/kernels/device_print.tile, 2 programs):
 *   - the lines the GPU prints, sorted, are the interpreter's on the same
 *     inputs, sorted (each element of the replicated tiles once);
 *   - a failing assertion prints its line (program and index) and stops
 *     the kernel with CUDA's assert error.
 * Each runs in a child (`tile-gpu debug-print print|assert`): the GPU's
 * printf buffer goes to the child's stdout, which the parent reads, and a
 * failed assertion leaves the child's context unusable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_common.h"

#define DEBUG_KERNEL "tests/kernels/device_print.tile"
/* x[i] = i / 4 for 2 programs of 8 elements. */
#define DEBUG_N 16
/* Everything the kernel prints, and room for the driver's messages. */
#define DEBUG_OUTPUT_BYTES 65536
#define DEBUG_MAX_LINES 512
/* The assertion's limit: program 1 holds 2 .. 3.75, so it fails there. */
#define DEBUG_ASSERT_LIMIT 2.5

static void fill_x(float *x) {
  for (int i = 0; i < DEBUG_N; i++) x[i] = (float)i / 4;
}

int gpu_debug_child(const char *what, const char *source_root) {
  Gpu g;
  if (!gpu_open(&g, source_root)) return EXIT_SKIP;
  bool fail = what && !strcmp(what, "assert");
  Variant v;
  DBuf x;
  if (!variant_build(&g, DEBUG_KERNEL, NULL, &v) || !dbuf_alloc(&g, &x, "x", "f32", DEBUG_N)) return 2;
  fill_x(x.host);
  if (!dbuf_upload(&g, &x)) return 2;
  tile_arg args[2] = {tile_arg_ptr(x.dev), tile_arg_f32(fail ? DEBUG_ASSERT_LIMIT : 100)};
  tile_status st = tile_launch(v.kernel, (uint32_t[3]){2, 1, 1}, NULL, args, 2);
  if (st == TILE_OK) st = tile_synchronize(g.rt);
  fflush(stdout);
  printf("device-print: launch %s (%s)\n", st == TILE_OK ? "completed" : "failed", st == TILE_OK ? "" : tile_last_error());
  fflush(stdout);
  return fail ? st != TILE_OK ? 0 : 1 : st == TILE_OK ? 0 : 1;
}

/* The child's output (malloc'd) and whether it exited with 0. */
static char *run_child(Gpu *g, const char *what, bool *exited0) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "timeout 60 /proc/%d/exe --root '%s' debug-print %s 2>&1", (int)getpid(), g->source_root,
           what);
  FILE *p = popen(cmd, "r");
  char *out = calloc(DEBUG_OUTPUT_BYTES, 1);
  if (!p || !out) {
    if (p) pclose(p);
    *exited0 = false;
    return out;
  }
  size_t n = fread(out, 1, DEBUG_OUTPUT_BYTES - 1, p);
  out[n] = 0;
  int status = pclose(p);
  *exited0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return out;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The lines of text that start with "pid (", sorted (pointers into text,
 * which is cut at the line ends). */
static int pid_lines(char *text, char **lines) {
  int n = 0;
  for (char *line = strtok(text, "\n"); line && n < DEBUG_MAX_LINES; line = strtok(NULL, "\n"))
    if (!strncmp(line, "pid (", 5)) lines[n++] = line;
  qsort(lines, (size_t)n, sizeof *lines, cmp_str);
  return n;
}

/* What the interpreter prints for the same launch (malloc'd). */
static char *interpreter_output(Gpu *g) {
  Variant v;
  if (!variant_build(g, DEBUG_KERNEL, NULL, &v)) return NULL;
  float x[DEBUG_N];
  fill_x(x);
  tc_arg args[2] = {{.p = x}, {.f = 100}};
  tc_buffer buf = {x, sizeof x, "x"};
  FILE *f = tmpfile();
  char *text = calloc(DEBUG_OUTPUT_BYTES, 1);
  char *err = NULL;
  tc_interp_options o = {.print_to = f};
  bool ok = f && text && tc_interpret_ex(v.comp, 0, (int64_t[3]){2, 1, 1}, args, 2, &buf, 1, &o, &err);
  if (ok) {
    rewind(f);
    text[fread(text, 1, DEBUG_OUTPUT_BYTES - 1, f)] = 0;
  } else {
    printf("  interpreter: %s\n", err ? err : "failed");
  }
  free(err);
  if (f) fclose(f);
  variant_free(&v);
  if (!ok) free(text);
  return ok ? text : NULL;
}

static bool check_print(Gpu *g) {
  bool exited0;
  char *gpu = run_child(g, "print", &exited0), *ref = interpreter_output(g);
  bool ok = gpu && ref && exited0;
  if (!exited0) printf("  child failed:\n%s\n", gpu ? gpu : "");
  char *a[DEBUG_MAX_LINES], *b[DEBUG_MAX_LINES];
  int na = ok ? pid_lines(gpu, a) : 0, nb = ok ? pid_lines(ref, b) : 0;
  if (ok && na != nb) printf("  the GPU printed %d lines, the interpreter %d\n", na, nb);
  ok = ok && na == nb && nb > 0;
  for (int i = 0; ok && i < na; i++)
    if (strcmp(a[i], b[i])) {
      printf("  line %d: GPU '%s', interpreter '%s'\n", i, a[i], b[i]);
      ok = false;
    }
  if (ok) printf("  %d lines, as the interpreter prints them\n", na);
  free(gpu);
  free(ref);
  return ok;
}

static bool check_assert(Gpu *g) {
  bool exited0;
  char *out = run_child(g, "assert", &exited0);
  /* program 1's elements above the limit (idx (0, 3) and all of row 1)
   * fail, in threads that race to the trap: at least one line is there */
  const char *line = out ? strstr(out, "device_assert failed: x <= limit") : NULL;
  bool program1 = false, program0 = false;
  for (const char *l = out; l && (l = strstr(l, "device_assert failed")); l++) {
    const char *start = l;
    while (start > out && start[-1] != '\n') start--;
    program1 |= !strncmp(start, "pid (1, 0, 0) idx (", 19);
    program0 |= !strncmp(start, "pid (0, 0, 0)", 13);
  }
  bool ok = line && exited0 && program1 && !program0 && strstr(out, "device-print: launch failed");
  if (!ok) printf("  child output:\n%s\n", out ? out : "");
  free(out);
  return ok;
}

int gpu_debug_tests(Gpu *g, const char *only) {
  static const char *const names[] = {"device_print: the interpreter's lines", "device_assert stops the kernel"};
  int failed = 0;
  for (int i = 0; i < 2; i++) {
    if (only && !strstr(names[i], only)) continue;
    double t0 = now_ms();
    bool ok = i == 0 ? check_print(g) : check_assert(g);
    gpu_report(g, names[i], ok, t0, &failed);
  }
  return failed;
}
