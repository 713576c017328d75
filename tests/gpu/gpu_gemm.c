/* gpu_gemm.c - the standard GEMMs on the GPU (part of `tile-gpu test`):
 * lang/std/gemm.tile (pointer loads: cp.async rings) and
 * lang/std/gemm_tma.tile (tensor descriptors: TMA rings and a TMA store),
 * over shapes that are not multiples of the blocks, every orientation of
 * A and B, bf16 and f16, 1 to 4 pipeline stages, and tiles small enough
 * for mma.sync; and lang/std/gemm_fp8.tile (e4m3 and e5m2 through TMA,
 * per-tensor scales).
 *
 * Each case: random inputs in [-1, 1] rounded to the input type, C
 * poisoned with NaN (including the padding columns past n, which must
 * stay NaN: TMA stores clip), one launch, then C against a float64
 * reference on the same rounded inputs (relative error max|d| / max|ref|
 * below 1e-2, 3e-2 for fp8: the tensor cores sum fp8 products less
 * exactly, HOPPER-FACTS.md section 2) and, for small shapes, against the
 * interpreter.
 *
 * lang/std/gemm_ws.tile (warp-specialized, persistent) runs with grids of
 * fewer programs than tiles (each program walks several) and of one
 * program per tile, cooperative consumers over every orientation; with
 * `unannotated` its C must be bit for bit that of the same source with
 * @warp_specialize replaced by @warps of its consumer warps.
 * gemm_ws_bias_act (the fused epilogue act(A @ B + bias)) is checked
 * against act(float64 product + bias) for each activation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "ir/types.h"
#include "../support/act_ref.h"

/* Error bounds for bf16/f16 and fp8 inputs with f32 accumulation. */
#define GEMM_TOL 1e-2
#define GEMM_FP8_TOL 3e-2
/* Per-tensor fp8 scales: powers of two whose product is not 1, so that a
 * kernel dropping one fails. */
#define FP8_SCALE_A 0.5
#define FP8_SCALE_B 0.25
/* Extra bytes per row so that leading dimensions differ from widths
 * (16 keeps rows 16-byte aligned, as TMA and cp.async need), and at least
 * GEMM_PAD_MIN elements (gemm.tile's leading dimensions are multiples of 8). */
#define GEMM_PAD_BYTES 16
#define GEMM_PAD_MIN 8
/* Problems up to this many multiply-adds also run in the interpreter. */
#define GEMM_INTERP_MAX_MACS (3u << 20)

typedef enum GemmKernel { K_PTR, K_TMA, K_FP8, K_WS, K_WS_BIAS, K_WS_PP } GemmKernel;

typedef struct GemmCase {
  const char *name;
  GemmKernel kernel;
  bool unannotated;         /* also without @pipeline: C must not change */
  const char *type, *out;   /* T, TC */
  int m, n, k;
  bool a_trans, b_trans;
  const char *extra[12];    /* further NAME, VALUE defines, NULL-terminated */
  int programs;             /* gemm_ws: the grid (0: min(tiles, programs resident at once)) */
} GemmCase;

/* A matrix of rows x cols stored row-major with a padded leading dimension. */
typedef struct Mat {
  DBuf buf;
  int rows, cols, ld;
  tile_tensor t;
} Mat;

static bool mat_new(Gpu *g, Mat *x, const char *name, const char *elem, int rows, int cols) {
  int pad = GEMM_PAD_BYTES / scalar_bytes(scalar_from_name(elem, strlen(elem)));
  if (pad < GEMM_PAD_MIN) pad = GEMM_PAD_MIN;
  x->rows = rows, x->cols = cols, x->ld = cols + pad;
  if (!dbuf_alloc(g, &x->buf, name, elem, (size_t)rows * x->ld)) return false;
  x->t = (tile_tensor){x->buf.dev, 2, {rows, cols}, {x->ld, 1}};
  return true;
}

static double mat_get(const Mat *x, int r, int c) { return dbuf_get(&x->buf, (size_t)r * x->ld + c); }

/* Relative error of C against the float64 product (a row at a time, in
 * an order that walks memory forward), plus bias and activation when
 * `bias` is given; padding must be NaN. */
static double check_c(const Mat *a, const Mat *b, const Mat *c, const GemmCase *gc, const DBuf *bias, int act,
                      bool *pad_ok) {
  double worst = 0, ref = 0, scale = gc->kernel == K_FP8 ? FP8_SCALE_A * FP8_SCALE_B : 1;
  *pad_ok = true;
  double *row = malloc(sizeof(double) * (size_t)(gc->n ? gc->n : 1));
  double *bt = malloc(sizeof(double) * (size_t)(gc->n ? gc->n : 1) * (size_t)(gc->k ? gc->k : 1));
  if (!row || !bt) {
    free(row), free(bt);
    return INFINITY;
  }
  for (int p = 0; p < gc->k; p++) /* B as [k][n] doubles */
    for (int j = 0; j < gc->n; j++) bt[(size_t)p * gc->n + j] = gc->b_trans ? mat_get(b, j, p) : mat_get(b, p, j);
  for (int i = 0; i < gc->m; i++) {
    for (int j = 0; j < gc->n; j++) row[j] = 0;
    for (int p = 0; p < gc->k; p++) {
      double x = gc->a_trans ? mat_get(a, p, i) : mat_get(a, i, p);
      const double *br = bt + (size_t)p * gc->n;
      for (int j = 0; j < gc->n; j++) row[j] += x * br[j];
    }
    for (int j = 0; j < gc->n; j++) {
      double s = row[j] * scale, got = mat_get(c, i, j);
      if (bias) s = act_ref(s + dbuf_get(bias, (size_t)j), act);
      if (isnan(got)) {
        free(row), free(bt);
        return INFINITY;
      }
      worst = fmax(worst, fabs(got - s));
      ref = fmax(ref, fabs(s));
    }
    for (int j = gc->n; j < c->ld; j++)
      if (!isnan(mat_get(c, i, j))) *pad_ok = false;
  }
  free(row), free(bt);
  return ref > 0 ? worst / ref : worst;
}

static void put_arg(tc_arg *ia, tile_arg *ta, const Mat *x, bool tma) {
  memset(ia, 0, sizeof *ia);
  ia->p = x->buf.host;
  if (tma) {
    *ta = tile_arg_tensor(&x->t);
    ia->shape[0] = x->rows, ia->shape[1] = x->cols;
    ia->strides[0] = x->ld, ia->strides[1] = 1;
  } else {
    *ta = tile_arg_ptr(x->buf.dev);
  }
}

static void put_int(tc_arg *ia, tile_arg *ta, int v) {
  memset(ia, 0, sizeof *ia);
  ia->i = v;
  *ta = tile_arg_i32(v);
}

/* The interpreter on copies of the inputs; C's error against the GPU's. */
static bool against_interpreter(const Variant *v, const Mat *a, const Mat *b, const Mat *c, const DBuf *extra,
                                int nextra, tc_arg *iargs, int nargs, int64_t grid, double *err) {
  size_t cb = c->buf.n * c->buf.elem_bytes;
  void *ch = malloc(cb);
  DBuf tmp = c->buf;
  tmp.host = ch;
  for (size_t i = 0; i < c->buf.n; i++) dbuf_set(&tmp, i, NAN);
  iargs[0].p = ch;
  tc_buffer bufs[5] = {{ch, cb, "c"},
                       {a->buf.host, a->buf.n * a->buf.elem_bytes, "a"},
                       {b->buf.host, b->buf.n * b->buf.elem_bytes, "b"}};
  int nbufs = 3;
  for (int i = 0; i < nextra; i++)
    bufs[nbufs++] = (tc_buffer){extra[i].host, extra[i].n * extra[i].elem_bytes, extra[i].name};
  char *msg = NULL;
  bool ok = tc_interpret(v->comp, 0, (int64_t[3]){grid, 1, 1}, iargs, nargs, bufs, nbufs, 0, &msg);
  if (!ok) printf("  interpreter: %s\n", msg);
  free(msg);
  double worst = 0, ref = 0;
  for (size_t i = 0; ok && i < c->buf.n; i++) {
    double x = dbuf_get(&c->buf, i), y = dbuf_get(&tmp, i);
    if (isnan(x) != isnan(y)) worst = INFINITY;
    if (isnan(x) || isnan(y)) continue;
    worst = fmax(worst, fabs(x - y));
    ref = fmax(ref, fabs(y));
  }
  *err = ref > 0 ? worst / ref : worst;
  free(ch);
  return ok;
}

/* Runs the case's kernel with an annotation removed (every @ann(...)),
 * and `warps` (e.g. "@warps(8)", the warps the consumers had) put before
 * the kernel, on the same inputs; C must be bit for bit what the
 * annotated kernel wrote. */
static bool same_without(Gpu *g, const char *file, const char *kernel, const char *const *defs, const char *ann,
                         const char *warps, tile_arg *ta, int na, const uint32_t grid[3], DBuf *c) {
  size_t len;
  char pat[64], head[96];
  snprintf(pat, sizeof pat, "@%s(", ann);
  snprintf(head, sizeof head, "kernel %s(", kernel);
  char *src = variant_read_source(g, file, &len), *bare = src ? replace_annotation(src, ann, "", &len) : NULL;
  free(src);
  if (!bare) return false;
  const char *at = strstr(bare, head);
  if (strstr(bare, pat) || !at) {
    printf("  %s is still there after removing it, or there is no '%s'\n", pat, head);
    free(bare);
    return false;
  }
  size_t pre = (size_t)(at - bare), wl = strlen(warps);
  char *text = malloc(len + wl + 2);
  memcpy(text, bare, pre);
  memcpy(text + pre, warps, wl);
  text[pre + wl] = '\n';
  memcpy(text + pre + wl + 1, bare + pre, len - pre + 1);
  free(bare);
  Variant v;
  bool ok = variant_build_text_kernel(g, file, text, len + wl + 1, kernel, defs, &v);
  free(text);
  size_t bytes = c->n * c->elem_bytes;
  void *annotated = malloc(bytes);
  memcpy(annotated, c->host, bytes);
  dbuf_poison(c);
  ok = ok && dbuf_upload(g, c);
  if (ok && (tile_launch(v.kernel, grid, NULL, ta, na) != TILE_OK || tile_synchronize(g->rt) != TILE_OK)) {
    printf("  launch without @%s failed: %s\n", ann, tile_last_error());
    ok = false;
  }
  ok = ok && dbuf_download(g, c);
  if (ok && memcmp(annotated, c->host, bytes)) {
    printf("  C differs without @%s\n", ann);
    ok = false;
  }
  free(annotated);
  variant_free(&v);
  return ok;
}

static const char *const kernel_files[] = {"lang/std/gemm.tile",    "lang/std/gemm_tma.tile", "lang/std/gemm_fp8.tile",
                                           "lang/std/gemm_ws.tile", "lang/std/gemm_ws.tile",  "lang/std/gemm_ws.tile"};
static const char *const kernel_names[] = {"gemm",    "gemm_tma",         "gemm_fp8",
                                           "gemm_ws", "gemm_ws_bias_act", "gemm_ws_pingpong"};

static bool run_gemm(Gpu *g, const GemmCase *gc, uint64_t seed) {
  const char *defs[24] = {"T", gc->type, "TC", gc->out};
  int nd = 4;
  if (gc->kernel != K_FP8) {
    defs[nd++] = "A_TRANS", defs[nd++] = gc->a_trans ? "true" : "false";
    defs[nd++] = "B_TRANS", defs[nd++] = gc->b_trans ? "true" : "false";
  }
  for (int i = 0; gc->extra[i]; i++) defs[nd++] = gc->extra[i];
  defs[nd] = NULL;
  bool tma = gc->kernel != K_PTR, fp8 = gc->kernel == K_FP8, ws = gc->kernel >= K_WS;
  Variant v;
  Mat a = {0}, b = {0}, c = {0};
  DBuf scales[2] = {{0}, {0}}, bias = {0};
  /* ping-pong kernels with the barrier debug mode: a protocol error
   * traps after a time-out instead of hanging the suite */
  tc_codegen_options go = {.linker = TC_LINKER_AUTO, .debug_barriers = gc->kernel == K_WS_PP};
  bool ok = variant_build_kernel_opts(g, kernel_files[gc->kernel], kernel_names[gc->kernel], defs, &go, &v);
  ok = ok && mat_new(g, &a, "a", gc->type, gc->a_trans ? gc->k : gc->m, gc->a_trans ? gc->m : gc->k) &&
       mat_new(g, &b, "b", gc->type, gc->b_trans ? gc->n : gc->k, gc->b_trans ? gc->k : gc->n) &&
       mat_new(g, &c, "c", gc->out, gc->m, gc->n);
  Rng rng = {seed};
  if (ok) {
    dbuf_fill(&a.buf, &rng, -1, 1);
    dbuf_fill(&b.buf, &rng, -1, 1);
    dbuf_poison(&c.buf);
    ok = dbuf_upload(g, &a.buf) && dbuf_upload(g, &b.buf) && dbuf_upload(g, &c.buf);
  }
  if (ok && gc->kernel == K_WS_BIAS) {
    ok = dbuf_alloc(g, &bias, "bias", "f32", (size_t)gc->n);
    if (ok) {
      dbuf_fill(&bias, &rng, -1, 1);
      ok = dbuf_upload(g, &bias);
    }
  }
  if (ok && fp8) {
    ok = dbuf_alloc(g, &scales[0], "scale_a", "f32", 1) && dbuf_alloc(g, &scales[1], "scale_b", "f32", 1);
    if (ok) {
      dbuf_set(&scales[0], 0, FP8_SCALE_A);
      dbuf_set(&scales[1], 0, FP8_SCALE_B);
      ok = dbuf_upload(g, &scales[0]) && dbuf_upload(g, &scales[1]);
    }
  }
  tc_arg ia[10];
  tile_arg ta[10];
  int na = 0;
  if (ok) {
    put_arg(&ia[na], &ta[na], &c, tma), na++;
    put_arg(&ia[na], &ta[na], &a, tma), na++;
    put_arg(&ia[na], &ta[na], &b, tma), na++;
    for (int i = 0; fp8 && i < 2; i++, na++) {
      memset(&ia[na], 0, sizeof ia[na]);
      ia[na].p = scales[i].host;
      ta[na] = tile_arg_ptr(scales[i].dev);
    }
    if (gc->kernel == K_WS_BIAS) {
      memset(&ia[na], 0, sizeof ia[na]);
      ia[na].p = bias.host;
      ta[na++] = tile_arg_ptr(bias.dev);
    }
    put_int(&ia[na], &ta[na], gc->m), na++;
    put_int(&ia[na], &ta[na], gc->n), na++;
    put_int(&ia[na], &ta[na], gc->k), na++;
    if (!tma) {
      put_int(&ia[na], &ta[na], a.ld), na++;
      put_int(&ia[na], &ta[na], b.ld), na++;
      put_int(&ia[na], &ta[na], c.ld), na++;
    }
  }
  int64_t bm = ok ? variant_const(&v, "BLOCK_M", 128) : 1, bn = ok ? variant_const(&v, "BLOCK_N", 128) : 1;
  /* gemm_ws with CLUSTER: a cluster takes CLUSTER tiles stacked along m
   * (along n with CLUSTER_N), and the grid is a multiple of it */
  int64_t C = ok ? variant_const(&v, "CLUSTER", 1) : 1, along_n = ok ? variant_const(&v, "CLUSTER_N", 0) : 0;
  int64_t cm = along_n ? 1 : C, cn = along_n ? C : 1;
  int64_t grid = C * ((gc->m + cm * bm - 1) / (cm * bm)) * ((gc->n + cn * bn - 1) / (cn * bn));
  if (ws) {
    uint32_t resident = 0;
    if (ok && !gc->programs && tile_kernel_resident_programs(v.kernel, &resident) != TILE_OK) {
      printf("  %s\n", tile_last_error());
      ok = false;
    }
    int64_t most = gc->programs ? (int64_t)gc->programs : (int64_t)resident;
    if (grid > most) grid = most;
  }
  if (ok && (tile_launch(v.kernel, (uint32_t[3]){(uint32_t)grid, 1, 1}, NULL, ta, na) != TILE_OK ||
             tile_synchronize(g->rt) != TILE_OK)) {
    printf("  launch failed: %s\n", tile_last_error());
    ok = false;
  }
  if (ok) ok = dbuf_download(g, &c.buf);
  if (ok) {
    bool pad_ok;
    double tol = fp8 ? GEMM_FP8_TOL : GEMM_TOL;
    int act = gc->kernel == K_WS_BIAS ? (int)variant_const(&v, "ACT", 0) : 0;
    double e = check_c(&a, &b, &c, gc, gc->kernel == K_WS_BIAS ? &bias : NULL, act, &pad_ok);
    if (!(e < tol)) printf("  relative error %.3g against float64 (limit %.3g)\n", e, tol);
    if (!pad_ok) printf("  a store wrote past column n\n");
    ok = e < tol && pad_ok;
    /* without @warp_specialize: the warps that computed (4 a warpgroup of
     * ping-pong consumers) */
    char warps[32] = "";
    int computing = gc->kernel == K_WS_PP ? 1 : (int)variant_const(&v, "CONSUMERS", 2);
    if (ws) snprintf(warps, sizeof warps, "@warps(%d)", 4 * computing);
    const char *ann = ws ? "warp_specialize" : "pipeline";
    if (ok && gc->unannotated)
      ok = same_without(g, kernel_files[gc->kernel], kernel_names[gc->kernel], defs, ann, warps, ta, na,
                        (uint32_t[3]){(uint32_t)grid, 1, 1}, &c.buf);
    if ((unsigned)gc->m * gc->n * gc->k <= GEMM_INTERP_MAX_MACS) {
      double ie;
      const DBuf *extra = fp8 ? scales : gc->kernel == K_WS_BIAS ? &bias : NULL;
      bool iok = against_interpreter(&v, &a, &b, &c, extra, fp8 ? 2 : extra ? 1 : 0, ia, na, grid, &ie);
      if (iok && !(ie < tol)) printf("  relative error %.3g against the interpreter\n", ie);
      ok = ok && iok && ie < tol;
    }
  }
  dbuf_free(g, &bias);
  dbuf_free(g, &scales[0]);
  dbuf_free(g, &scales[1]);
  dbuf_free(g, &a.buf);
  dbuf_free(g, &b.buf);
  dbuf_free(g, &c.buf);
  variant_free(&v);
  return ok;
}

#define PTR K_PTR
#define TMA K_TMA
#define FP8 K_FP8
#define WS K_WS
#define WSB K_WS_BIAS
#define WSP K_WS_PP

static const GemmCase cases[] = {
    /* pointer loads through cp.async rings: orientations, stages */
    {"gemm bf16 264x200x136", PTR, true, "bf16", "f32", 264, 200, 136, false, false, {NULL}, 0},
    {"gemm bf16 A^T", PTR, false, "bf16", "f32", 200, 136, 104, true, false, {NULL}, 0},
    {"gemm bf16 B^T", PTR, true, "bf16", "f32", 136, 264, 200, false, true, {NULL}, 0},
    {"gemm f16 A^T B^T", PTR, false, "f16", "f32", 136, 136, 264, true, true, {NULL}, 0},
    {"gemm bf16 1 stage", PTR, false, "bf16", "bf16", 192, 136, 200, false, false, {"STAGES", "1", NULL}, 0},
    {"gemm bf16 2 stages", PTR, false, "bf16", "f32", 192, 136, 200, false, true, {"STAGES", "2", NULL}, 0},
    {"gemm bf16 4 stages 128x256", PTR, false, "bf16", "f32", 264, 520, 328, false, false,
     {"STAGES", "4", "BLOCK_N", "256", NULL}, 0},
    {"gemm bf16 k 40 (BLOCK_K 32)", PTR, false, "bf16", "f32", 136, 72, 40, true, true, {"BLOCK_K", "32", NULL}, 0},
    /* mma.sync: tiles below 64 rows, fewer than 4 warps */
    {"gemm bf16 mma.sync 32x32", PTR, false, "bf16", "f32", 72, 56, 48, false, false,
     {"BLOCK_M", "32", "BLOCK_N", "32", "BLOCK_K", "16", "WARPS", "2", NULL}, 0},
    {"gemm f16 mma.sync 16x64 B^T", PTR, false, "f16", "f32", 40, 136, 64, false, true,
     {"BLOCK_M", "16", "BLOCK_N", "64", "BLOCK_K", "32", "WARPS", "4", NULL}, 0},
    /* descriptors: TMA rings and TMA stores, clipped edges */
    {"gemm_tma bf16 264x200x136", TMA, true, "bf16", "bf16", 264, 200, 136, false, false, {NULL}, 0},
    {"gemm_tma bf16 A^T", TMA, false, "bf16", "bf16", 200, 136, 104, true, false, {NULL}, 0},
    {"gemm_tma bf16 B^T", TMA, false, "bf16", "f32", 136, 264, 200, false, true, {NULL}, 0},
    {"gemm_tma f16 A^T B^T", TMA, true, "f16", "f16", 136, 136, 264, true, true, {NULL}, 0},
    {"gemm_tma bf16 1 stage", TMA, false, "bf16", "bf16", 192, 136, 200, false, false, {"STAGES", "1", NULL}, 0},
    {"gemm_tma bf16 2 stages", TMA, false, "bf16", "bf16", 192, 136, 200, false, false, {"STAGES", "2", NULL}, 0},
    {"gemm_tma bf16 3 stages 128x256", TMA, false, "bf16", "bf16", 264, 520, 328, false, false,
     {"STAGES", "3", "BLOCK_N", "256", NULL}, 0},
    {"gemm_tma bf16 k 40", TMA, false, "bf16", "bf16", 136, 72, 40, false, false, {NULL}, 0},
    /* fp8: A [m, k] and B^T [n, k], both K-major */
    {"gemm_fp8 e4m3 264x200x144", FP8, true, "f8e4m3", "bf16", 264, 200, 144, false, true, {NULL}, 0},
    {"gemm_fp8 e5m2 f32 out 2 stages", FP8, false, "f8e5m2", "f32", 200, 264, 400, false, true,
     {"STAGES", "2", "BLOCK_N", "128", NULL}, 0},
    {"gemm_fp8 e4m3 k 4096", FP8, false, "f8e4m3", "bf16", 136, 264, 4096, false, true, {NULL}, 0},
    /* warp-specialized persistent: 1 producer + CONSUMERS warpgroups */
    {"gemm_ws bf16 264x520x328 (6 tiles)", WS, true, "bf16", "bf16", 264, 520, 328, false, false, {NULL}, 0},
    {"gemm_ws bf16 A^T 3 programs, 20 tiles", WS, true, "bf16", "bf16", 600, 904, 200, true, false, {NULL}, 3},
    {"gemm_ws bf16 B^T f32 out 7 programs", WS, false, "bf16", "f32", 520, 600, 264, false, true,
     {"BLOCK_N", "128", NULL}, 7},
    {"gemm_ws f16 A^T B^T", WS, false, "f16", "f16", 264, 264, 200, true, true, {NULL}, 2},
    {"gemm_ws bf16 128x128 4 stages", WS, true, "bf16", "bf16", 392, 264, 520, false, false,
     {"BLOCK_N", "128", "STAGES", "4", NULL}, 5},
    {"gemm_ws bf16 1 consumer 5 stages", WS, true, "bf16", "bf16", 264, 392, 328, false, true,
     {"BLOCK_N", "128", "STAGES", "5", "CONSUMERS", "1", NULL}, 4},
    {"gemm_ws bf16 k 40", WS, false, "bf16", "bf16", 136, 520, 40, false, false, {NULL}, 2},
    {"gemm_ws bf16 3 stages", WS, true, "bf16", "bf16", 264, 520, 200, false, false, {"STAGES", "3", NULL}, 3},
    {"gemm_ws bf16 f32 out 128x256 (8 store pieces)", WS, false, "bf16", "f32", 392, 776, 136, true, false, {NULL}, 5},
    {"gemm_ws bf16 2176x2304x256 (153 tiles on all SMs)", WS, false, "bf16", "bf16", 2176, 2304, 256, false, false,
     {NULL}, 0},
    /* clusters of 2 (B multicast): an odd number of tile rows (the last
     * cluster's second tile past m), few programs (each walks several
     * tile pairs), A^T B^T (B^T's box one copy), and on all SMs */
    {"gemm_ws bf16 cluster 2, 3 tile rows, 4 programs", WS, true, "bf16", "bf16", 264, 776, 328, false, false,
     {"CLUSTER", "2", NULL}, 4},
    {"gemm_ws f16 cluster 2 A^T B^T 2 programs", WS, false, "f16", "f16", 520, 264, 200, true, true,
     {"CLUSTER", "2", NULL}, 2},
    {"gemm_ws bf16 cluster 2 128x128 f32 out", WS, false, "bf16", "f32", 392, 392, 136, false, false,
     {"CLUSTER", "2", "BLOCK_N", "128", NULL}, 6},
    /* 256 x 128: the store goes out in 256 x 32 columns (16 KiB slots), which leaves room for 4 stages */
    {"gemm_ws bf16 256x128 4 stages", WS, true, "bf16", "bf16", 520, 392, 200, false, false,
     {"BLOCK_M", "256", "BLOCK_N", "128", "STAGES", "4", NULL}, 3},
    {"gemm_ws f16 256x128 4 stages f32 out A^T", WS, false, "f16", "f32", 264, 264, 136, true, false,
     {"BLOCK_M", "256", "BLOCK_N", "128", "STAGES", "4", NULL}, 2},
    {"gemm_ws bf16 BLOCK_K 32 8 stages", WS, false, "bf16", "bf16", 392, 520, 328, false, false,
     {"BLOCK_K", "32", "STAGES", "8", NULL}, 3},
    {"gemm_ws bf16 BLOCK_K 32 8 stages cluster 2 A^T", WS, false, "bf16", "bf16", 392, 520, 328, true, false,
     {"BLOCK_K", "32", "STAGES", "8", "CLUSTER", "2", NULL}, 4},
    {"gemm_ws bf16 cluster 2 2176x2304x256 on all SMs", WS, false, "bf16", "bf16", 2176, 2304, 256, false, false,
     {"CLUSTER", "2", NULL}, 0},
    /* clusters of 2 along n (A multicast): an odd number of tile columns,
     * 256x128 tiles, A^T (A^T's box one copy), and on all SMs */
    {"gemm_ws bf16 cluster 2 along n, 3 tile columns, 4 programs", WS, true, "bf16", "bf16", 392, 776, 328, false,
     false, {"CLUSTER", "2", "CLUSTER_N", "true", NULL}, 4},
    {"gemm_ws bf16 cluster 2 along n 256x128 A^T", WS, false, "bf16", "bf16", 776, 392, 200, true, false,
     {"CLUSTER", "2", "CLUSTER_N", "true", "BLOCK_M", "256", "BLOCK_N", "128", "STAGES", "4", NULL}, 2},
    {"gemm_ws bf16 cluster 2 along n 256x128 2176x2304x256 on all SMs", WS, false, "bf16", "bf16", 2176, 2304, 256,
     false, true, {"CLUSTER", "2", "CLUSTER_N", "true", "BLOCK_M", "256", "BLOCK_N", "128", "STAGES", "4", NULL}, 0},
    /* the fused epilogue: act(A @ B + bias), each activation */
    {"gemm_ws_bias_act gelu (tanh)", WSB, true, "bf16", "bf16", 264, 520, 200, false, false, {NULL}, 3},
    {"gemm_ws_bias_act none f32 out", WSB, false, "bf16", "f32", 200, 392, 136, false, true,
     {"ACT", "0", "BLOCK_N", "128", NULL}, 2},
    {"gemm_ws_bias_act relu", WSB, false, "bf16", "bf16", 136, 264, 72, true, false, {"ACT", "1", NULL}, 2},
    {"gemm_ws_bias_act gelu (erf)", WSB, false, "f16", "f16", 136, 264, 72, false, false, {"ACT", "2", NULL}, 2},
    {"gemm_ws_bias_act silu", WSB, false, "bf16", "bf16", 136, 264, 72, false, false, {"ACT", "4", NULL}, 2},
    /* ping-pong consumers: alternate tiles, each on one warpgroup (last: in
     * the debug mode, a broken protocol traps and ends the context) */
    {"gemm_ws_pingpong bf16 264x520x328", WSP, true, "bf16", "bf16", 264, 520, 328, false, false, {NULL}, 0},
    {"gemm_ws_pingpong bf16 A^T B^T 3 programs", WSP, true, "bf16", "bf16", 392, 264, 200, true, true, {NULL}, 3},
    {"gemm_ws_pingpong f16 f32 out, odd tile count", WSP, false, "f16", "f32", 136, 392, 136, false, true, {NULL}, 2},
    {"gemm_ws_pingpong bf16 5 stages k 40", WSP, false, "bf16", "bf16", 264, 136, 40, false, false,
     {"STAGES", "5", NULL}, 1},
};

/* tests/kernels/gemm_streamk.tile (bf16, 128x256 tiles): C against
 * float64 on `programs` programs (0: as many as run at once), launched
 * twice on the same counters (the first launch must leave them at zero
 * for the second), poisoned before each launch. */
typedef struct StreamkCase {
  const char *name;
  int m, n, k, programs;
} StreamkCase;

static const StreamkCase streamk_cases[] = {
    {"gemm_streamk 264x520x328, 4 programs (4 whole tiles, 5 cut)", 264, 520, 328, 4},
    {"gemm_streamk 264x520x328, 7 programs (all cut)", 264, 520, 328, 7},
    {"gemm_streamk 264x520x328, resident programs (segments of one k-step)", 264, 520, 328, 0},
    {"gemm_streamk 2176x2304x256 on all SMs", 2176, 2304, 256, 0},
    {"gemm_streamk 4480x2304x520, resident programs (full waves and a tail)", 4480, 2304, 520, 0},
};

static bool run_streamk(Gpu *g, const StreamkCase *sc, uint64_t seed) {
  GemmCase gc = {.name = sc->name, .kernel = K_WS, .type = "bf16", .out = "bf16", .m = sc->m, .n = sc->n, .k = sc->k};
  Variant v = {0};
  Mat a = {0}, b = {0}, c = {0};
  uint64_t ws = 0, count = 0;
  bool built = variant_build(g, "tests/kernels/gemm_streamk.tile", NULL, &v), ok = built;
  uint32_t programs = (uint32_t)sc->programs;
  if (ok && !programs && tile_kernel_resident_programs(v.kernel, &programs) != TILE_OK) {
    printf("  %s\n", tile_last_error());
    ok = false;
  }
  uint32_t tiles = (uint32_t)(((sc->m + 127) / 128) * ((sc->n + 255) / 256));
  ok = ok && mat_new(g, &a, "a", "bf16", sc->m, sc->k) && mat_new(g, &b, "b", "bf16", sc->k, sc->n) &&
       mat_new(g, &c, "c", "bf16", sc->m, sc->n) &&
       tile_mem_alloc(g->rt, (size_t)2 * programs * 128 * 256 * 4, &ws) == TILE_OK &&
       tile_mem_alloc(g->rt, (size_t)tiles * 4, &count) == TILE_OK &&
       tile_memset_d8(g->rt, count, 0, (size_t)tiles * 4) == TILE_OK;
  Rng rng = {seed};
  if (ok) {
    dbuf_fill(&a.buf, &rng, -1, 1);
    dbuf_fill(&b.buf, &rng, -1, 1);
    ok = dbuf_upload(g, &a.buf) && dbuf_upload(g, &b.buf);
  }
  tile_arg ta[10] = {tile_arg_tensor(&c.t), tile_arg_ptr(c.buf.dev), tile_arg_i32(c.ld), tile_arg_tensor(&a.t),
                     tile_arg_tensor(&b.t), tile_arg_ptr(ws),      tile_arg_ptr(count), tile_arg_i32(sc->m),
                     tile_arg_i32(sc->n),   tile_arg_i32(sc->k)};
  for (int launch = 0; ok && launch < 2; launch++) {
    dbuf_poison(&c.buf);
    ok = dbuf_upload(g, &c.buf);
    if (ok && (tile_launch(v.kernel, (uint32_t[3]){programs, 1, 1}, NULL, ta, 10) != TILE_OK ||
               tile_synchronize(g->rt) != TILE_OK)) {
      printf("  launch %d failed: %s\n", launch + 1, tile_last_error());
      ok = false;
    }
    ok = ok && dbuf_download(g, &c.buf);
    if (ok) {
      bool pad_ok;
      double e = check_c(&a, &b, &c, &gc, NULL, 0, &pad_ok);
      if (!(e < GEMM_TOL)) printf("  launch %d: relative error %.3g against float64 (limit %.3g)\n", launch + 1, e, GEMM_TOL);
      if (!pad_ok) printf("  a store wrote past column n\n");
      ok = e < GEMM_TOL && pad_ok;
    }
  }
  if (ws) tile_mem_free(g->rt, ws);
  if (count) tile_mem_free(g->rt, count);
  dbuf_free(g, &a.buf);
  dbuf_free(g, &b.buf);
  dbuf_free(g, &c.buf);
  if (built) variant_free(&v);
  return ok;
}

int gpu_gemm_tests(Gpu *g, const char *only) {
  int failed = 0;
  for (size_t i = 0; i < sizeof streamk_cases / sizeof streamk_cases[0]; i++) {
    const StreamkCase *sc = &streamk_cases[i];
    if (only && !strstr(sc->name, only)) continue;
    double t0 = now_ms();
    bool ok = run_streamk(g, sc, 6000 + i);
    gpu_report(g, sc->name, ok, t0, &failed);
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const GemmCase *gc = &cases[i];
    if (only && !strstr(gc->name, only)) continue;
    double t0 = now_ms();
    bool ok = run_gemm(g, gc, 5000 + i);
    gpu_report(g, gc->name, ok, t0, &failed);
  }
  return failed;
}
