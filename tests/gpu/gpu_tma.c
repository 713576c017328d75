/* gpu_tma.c - tensor descriptors on the GPU (part of `tile-gpu test`):
 *
 *   - tests/kernels/tma_copy.tile copies windows of a tensor at offsets
 *     inside, across and outside its edges (negative ones too): load_block
 *     must read 0 outside the tensor and store_block must write nothing
 *     outside; the result is compared element by element with the
 *     interpreter;
 *   - the debug mode (`debug_barriers`): the same kernel with a
 *     deliberately broken barrier protocol (every TMA barrier expects more
 *     bytes than arrive) must trap instead of hanging, printing the kernel,
 *     the barrier and the program; and a copy whose inner offset is not a
 *     multiple of 16 bytes (which TMA cannot do) must say so and trap; so
 *     must the warp-specialized GEMM with its barriers broken (its
 *     consumers time out waiting for the producer's copies). Each runs in
 *     a child process (`tile-gpu debug-trap WHAT`), since a trap ends the
 *     CUDA context of the process it runs in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_common.h"

/* The child's output we read, at most. */
#define TRAP_OUTPUT_BYTES 65536

typedef struct CopyCase {
  const char *name;
  const char *type;
  int rows, cols;    /* src */
  int drows, dcols;  /* dst */
  int r0, c0;        /* offset of the window in src */
  const char *defines[8];
} CopyCase;

static const CopyCase copy_cases[] = {
    {"tma_copy f32 inside", "f32", 100, 200, 64, 128, 8, 16, {NULL}},
    {"tma_copy f32 across the edges", "f32", 100, 200, 96, 192, 40, 96, {NULL}},
    {"tma_copy f32 negative offsets", "f32", 70, 92, 64, 128, -5, -32, {NULL}},
    {"tma_copy f32 inner offset 4", "f32", 70, 92, 64, 64, 1, 4, {NULL}},
    {"tma_copy bf16 128x128 boxes", "bf16", 300, 264, 256, 256, 20, 8, {"T", "bf16", "BR", "128", "BC", "128", NULL}},
};

static bool run_copy(Gpu *g, const CopyCase *cc, uint64_t seed) {
  Variant v;
  const char *const *defs = cc->defines[0] ? cc->defines : NULL;
  if (!variant_build(g, "tests/kernels/tma_copy.tile", defs, &v)) return false;
  int br = (int)variant_const(&v, "BR", 32), bc = (int)variant_const(&v, "BC", 64);
  int sld = cc->cols + 8, dld = cc->dcols + 8; /* rows of 16-byte multiples for f32 and bf16 */
  DBuf src, dst;
  bool ok = dbuf_alloc(g, &src, "src", cc->type, (size_t)cc->rows * sld) &&
            dbuf_alloc(g, &dst, "dst", cc->type, (size_t)cc->drows * dld);
  Rng rng = {seed};
  if (ok) {
    dbuf_fill(&src, &rng, -8, 8);
    dbuf_poison(&dst);
    ok = dbuf_upload(g, &src) && dbuf_upload(g, &dst);
  }
  /* dst's rows are 8 elements longer than the tensor, so a store that
   * does not clip at the tensor's edge shows in the padding. */
  tile_tensor ts = {src.dev, 2, {cc->rows, cc->cols}, {sld, 1}}, td = {dst.dev, 2, {cc->drows, cc->dcols}, {dld, 1}};
  const double scale = 2.0;
  tile_arg ta[6] = {tile_arg_tensor(&td), tile_arg_tensor(&ts), tile_arg_i32(cc->r0), tile_arg_i32(cc->c0),
                    tile_arg_f64(scale),  tile_arg_i32(1)};
  uint32_t grid[3] = {(uint32_t)((cc->drows + br - 1) / br), (uint32_t)((cc->dcols + bc - 1) / bc), 1};
  if (ok && (tile_launch(v.kernel, grid, NULL, ta, 6) != TILE_OK || tile_synchronize(g->rt) != TILE_OK)) {
    printf("  launch failed: %s\n", tile_last_error());
    ok = false;
  }
  if (ok) ok = dbuf_download(g, &dst);
  /* The interpreter on the same src, into its own poisoned dst. */
  void *idst = ok ? malloc(dst.n * dst.elem_bytes) : NULL;
  if (ok) {
    DBuf t = dst;
    t.host = idst;
    dbuf_poison(&t);
    tc_arg ia[6] = {{.p = idst, .shape = {cc->drows, cc->dcols}, .strides = {dld, 1}},
                    {.p = src.host, .shape = {cc->rows, cc->cols}, .strides = {sld, 1}},
                    {.i = cc->r0},
                    {.i = cc->c0},
                    {.f = scale},
                    {.i = 1}};
    tc_buffer bufs[2] = {{idst, dst.n * dst.elem_bytes, "dst"}, {src.host, src.n * src.elem_bytes, "src"}};
    char *err = NULL;
    if (!tc_interpret(v.comp, 0, (int64_t[3]){grid[0], grid[1], 1}, ia, 6, bufs, 2, 0, &err)) {
      printf("  interpreter: %s\n", err);
      ok = false;
    }
    free(err);
    size_t bad = 0;
    for (size_t i = 0; ok && i < dst.n; i++) {
      double x = dbuf_get(&dst, i), y = dbuf_get(&t, i);
      if (!(x == y || (isnan(x) && isnan(y)))) {
        if (bad++ < 4) printf("  dst[%zu, %zu] = %g, interpreter %g\n", i / (size_t)dld, i % (size_t)dld, x, y);
      }
    }
    if (bad) printf("  %zu elements differ from the interpreter\n", bad);
    ok = ok && !bad;
  }
  free(idst);
  dbuf_free(g, &src);
  dbuf_free(g, &dst);
  variant_free(&v);
  return ok;
}

/* ---- the barrier debug mode ---- */

/* The warp-specialized GEMM (lang/std/gemm_ws.tile, one 128 x 256 tile)
 * in debug mode with broken barriers: its producer announces more bytes
 * than arrive, so the consumers' waits time out and trap. */
static int debug_trap_ws(Gpu *g, const tc_codegen_options *go) {
  Variant v;
  const char *defs[] = {"CONSUMERS", "2", NULL};
  if (!variant_build_opts(g, "lang/std/gemm_ws.tile", defs, go, &v)) return 2;
  DBuf a, b, c;
  if (!dbuf_alloc(g, &a, "a", "bf16", 128 * 64) || !dbuf_alloc(g, &b, "b", "bf16", 64 * 256) ||
      !dbuf_alloc(g, &c, "c", "bf16", 128 * 256))
    return 2;
  tile_tensor ta = {a.dev, 2, {128, 64}, {64, 1}}, tb = {b.dev, 2, {64, 256}, {256, 1}},
              tcm = {c.dev, 2, {128, 256}, {256, 1}};
  tile_arg args[6] = {tile_arg_tensor(&tcm), tile_arg_tensor(&ta), tile_arg_tensor(&tb),
                      tile_arg_i32(128),     tile_arg_i32(256),    tile_arg_i32(64)};
  tile_status st = tile_launch(v.kernel, (uint32_t[3]){1, 1, 1}, NULL, args, 6);
  if (st == TILE_OK) st = tile_synchronize(g->rt);
  printf("debug-trap: launch %s (%s)\n", st == TILE_OK ? "completed" : "failed", st == TILE_OK ? "" : tile_last_error());
  fflush(stdout);
  return st == TILE_OK ? 1 : 0;
}

/* `tile-gpu debug-trap barrier|offset|ws`: runs tma_copy in debug mode
 * with broken barriers, or with an inner offset of 3 f32, or gemm_ws with
 * broken barriers. Exits 0 when the launch failed (as it must), 1 when it
 * completed. */
int gpu_debug_trap_child(const char *what, const char *source_root) {
  Gpu g;
  if (!gpu_open(&g, source_root)) return EXIT_SKIP;
  bool offset = what && !strcmp(what, "offset");
  tc_codegen_options go = {.linker = TC_LINKER_AUTO, .debug_barriers = true, .debug_break_tma_barriers = !offset};
  if (what && !strcmp(what, "ws")) return debug_trap_ws(&g, &go);
  Variant v;
  if (!variant_build_opts(&g, "tests/kernels/tma_copy.tile", NULL, &go, &v)) return 2;
  DBuf a;
  if (!dbuf_alloc(&g, &a, "a", "f32", 64 * 72)) return 2;
  tile_tensor t = {a.dev, 2, {64, 64}, {72, 1}};
  tile_arg ta[6] = {tile_arg_tensor(&t), tile_arg_tensor(&t), tile_arg_i32(0), tile_arg_i32(offset ? 3 : 0),
                    tile_arg_f64(1), tile_arg_i32(1)};
  tile_status st = tile_launch(v.kernel, (uint32_t[3]){2, 1, 1}, NULL, ta, 6);
  if (st == TILE_OK) st = tile_synchronize(g.rt);
  printf("debug-trap: launch %s (%s)\n", st == TILE_OK ? "completed" : "failed", st == TILE_OK ? "" : tile_last_error());
  fflush(stdout);
  return st == TILE_OK ? 1 : 0;
}

static bool run_debug_trap(Gpu *g, const char *what, const char *kernel, const char *must_say) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "timeout 60 /proc/%d/exe --root '%s' debug-trap %s 2>&1", (int)getpid(), g->source_root,
           what);
  FILE *p = popen(cmd, "r");
  if (!p) {
    printf("  cannot start the child: %s\n", cmd);
    return false;
  }
  char *out = calloc(TRAP_OUTPUT_BYTES, 1);
  size_t n = fread(out, 1, TRAP_OUTPUT_BYTES - 1, p);
  out[n] = 0;
  int status = pclose(p);
  bool exited0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  char named[96];
  snprintf(named, sizeof named, "kernel '%s'", kernel);
  bool message = strstr(out, must_say) && strstr(out, named) && strstr(out, "program (");
  if (!exited0 || !message) {
    printf("  child exit status %d, output:\n%s\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  } else {
    const char *line = strstr(out, "tile: ");
    const char *end = line ? strchr(line, '\n') : NULL;
    printf("  %.*s\n", line ? (int)(end ? end - line : (long)strlen(line)) : 0, line ? line : "");
  }
  free(out);
  return exited0 && message;
}

int gpu_tma_tests(Gpu *g, const char *only) {
  int failed = 0;
  size_t ncopy = sizeof copy_cases / sizeof copy_cases[0];
  /* Under compute-sanitizer the traps would be reported as the errors
   * they are meant to be: scripts/gpu-run.sh --sanitize skips them. */
  bool traps = !getenv("TILE_GPU_SKIP_TRAPS");
  static const char *const trap_names[] = {"debug mode: broken barriers trap",
                                           "debug mode: misaligned TMA offset traps",
                                           "debug mode: broken barriers of a warp-specialized kernel trap"};
  for (size_t i = 0; i < ncopy + (traps ? 3 : 0); i++) {
    const char *name = i < ncopy ? copy_cases[i].name : trap_names[i - ncopy];
    if (only && !strstr(name, only)) continue;
    double t0 = now_ms();
    bool ok = i < ncopy        ? run_copy(g, &copy_cases[i], 7000 + i)
              : i == ncopy     ? run_debug_trap(g, "barrier", "tma_copy", "mbarrier wait timed out")
              : i == ncopy + 1 ? run_debug_trap(g, "offset", "tma_copy", "load_block offset 3 in the last dimension of 'src'")
                               : run_debug_trap(g, "ws", "gemm_ws", "mbarrier wait timed out");
    gpu_report(g, name, ok, t0, &failed);
  }
  return failed;
}
