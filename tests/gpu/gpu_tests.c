/* gpu_tests.c - the GPU test suite (`tile-gpu test`): every kernel of
 * lang/std and tests/kernels compiled in process, launched through libtile
 * on fresh random inputs with outputs poisoned first (sizes that are not
 * multiples of the blocks), and compared with the interpreter run on the
 * same inputs. The interpreter itself is checked against C references in
 * double by the CPU suites, so agreement here closes the chain.
 *
 * Several cases are also checked against a plain C reference in double
 * (the `reference` hook), so the GPU result is tied to the math directly.
 *
 * Tolerances (norm-wise relative error against the interpreter): exact for
 * integer results and conversions, 1e-5 for f32 math (the GPU's exp is
 * ex2.approx and log comes from libdevice, within a few ulp, and
 * reductions add in another order), 1e-2 for results stored as bf16.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "numeric/numeric.h"

/* Arguments of a case's kernel (paged_prefill has 21). */
#define MAX_ARGS 24
#define F32_TOL 1e-5
#define BF16_TOL 1e-2
/* fp8 attention, GPU against the interpreter: P rounded to e4m3 on both,
 * the products summed in another order (a unit of e4m3 in a few P). */
#define FP8_ATTN_TOL 2e-2
/* An fp8 product, GPU against the interpreter: exact products, the
 * tensor core's f32 sums less exact than f32 additions
 * (../shared/HOPPER-FACTS.md: 7e-5 to 4e-4 of the largest value). */
#define FP8_DOT_TOL 1e-3

typedef enum Role { IN, OUT, ZERO, SCALAR } Role;

typedef struct Arg {
  const char *name;
  Role role;
  size_t n;      /* elements (buffers) */
  double lo, hi; /* IN: uniform range */
  double value;  /* SCALAR */
  double tol;    /* OUT/ZERO: allowed relative error, 0 = exact */
} Arg;

typedef struct Case {
  const char *name, *file;
  const char *defines[16];
  int64_t grid_count;     /* grid x = cdiv(grid_count, const grid_const) ... */
  const char *grid_const; /* ... or grid_count itself when NULL */
  int64_t grid_y;
  Arg args[MAX_ARGS];
  void (*prepare)(DBuf *bufs, int n); /* optional: special input values */
  /* optional: relative error of the GPU outputs against a C reference in
   * double computed from the inputs; `tol` is the limit */
  double (*reference)(DBuf *bufs, int n);
  double ref_tol;
  /* also run the kernel with its @pipeline annotations removed: every
   * output must be bit for bit the same */
  bool unannotated;
  /* optional: the kernel of the file to run (its first otherwise) */
  const char *kernel;
} Case;

/* The buffer of parameter `name`. */
static DBuf *buf(DBuf *bufs, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (bufs[i].name && !strcmp(bufs[i].name, name)) return &bufs[i];
  return NULL;
}

/* Norm-wise relative error of b's first n elements against want. */
static double error_vs(const DBuf *b, const double *want, size_t n) {
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; i++) {
    double g = dbuf_get(b, i);
    if (isnan(g)) return INFINITY;
    max_err = fmax(max_err, fabs(g - want[i]));
    max_ref = fmax(max_ref, fabs(want[i]));
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

static double ref_vector_add(DBuf *bufs, int n) {
  DBuf *z = buf(bufs, n, "z"), *x = buf(bufs, n, "x"), *y = buf(bufs, n, "y");
  double *want = malloc(sizeof(double) * z->n);
  for (size_t i = 0; i < z->n; i++) want[i] = dbuf_get(x, i) + dbuf_get(y, i);
  double e = error_vs(z, want, z->n);
  free(want);
  return e;
}

/* softmax over rows of `cols` valid elements, `stride` apart */
static double ref_softmax_rows(DBuf *bufs, int n, size_t rows, size_t cols, size_t stride) {
  DBuf *out = buf(bufs, n, "out"), *x = buf(bufs, n, "x");
  double worst = 0, *want = malloc(sizeof(double) * cols);
  DBuf row = *out;
  for (size_t r = 0; r < rows; r++) {
    double m = -INFINITY, s = 0;
    for (size_t j = 0; j < cols; j++) m = fmax(m, dbuf_get(x, r * stride + j));
    for (size_t j = 0; j < cols; j++) s += exp(dbuf_get(x, r * stride + j) - m);
    for (size_t j = 0; j < cols; j++) want[j] = exp(dbuf_get(x, r * stride + j) - m) / s;
    row.host = (char *)out->host + r * stride * out->elem_bytes;
    worst = fmax(worst, error_vs(&row, want, cols));
  }
  free(want);
  return worst;
}
static double ref_softmax_37(DBuf *bufs, int n) { return ref_softmax_rows(bufs, n, 37, 1000, 1024); }

/* Attention over [bh][seqlen][d] tensors (BHSD, contiguous). */
static double ref_attention(DBuf *bufs, int n, size_t bh, size_t seqlen, size_t d, double scale, bool causal) {
  DBuf *o = buf(bufs, n, "out"), *q = buf(bufs, n, "q"), *k = buf(bufs, n, "k"), *v = buf(bufs, n, "v");
  double *want = malloc(sizeof(double) * o->n), *p = malloc(sizeof(double) * seqlen);
  for (size_t h = 0; h < bh; h++)
    for (size_t i = 0; i < seqlen; i++) {
      size_t base = h * seqlen * d, last = causal ? i : seqlen - 1;
      double m = -INFINITY, l = 0;
      for (size_t j = 0; j <= last; j++) {
        double s = 0;
        for (size_t t = 0; t < d; t++) s += dbuf_get(q, base + i * d + t) * dbuf_get(k, base + j * d + t);
        m = fmax(m, p[j] = s * scale);
      }
      for (size_t j = 0; j <= last; j++) l += (p[j] = exp(p[j] - m));
      for (size_t t = 0; t < d; t++) {
        double acc = 0;
        for (size_t j = 0; j <= last; j++) acc += p[j] * dbuf_get(v, base + j * d + t);
        want[base + i * d + t] = acc / l;
      }
    }
  double e = error_vs(o, want, o->n);
  free(want), free(p);
  return e;
}
static double ref_flash_d64(DBuf *bufs, int n) { return ref_attention(bufs, n, 6, 300, 64, 0.125, false); }
static double ref_naive(DBuf *bufs, int n) { return ref_attention(bufs, n, 2, 100, 64, 0.125, false); }

/* tests/kernels/split_reduce.tile: row sums of x [SPLIT_ROWS, SPLIT_COLS]. */
#define SPLIT_ROWS 7
#define SPLIT_COLS 5000
#define SPLIT_BLOCK 256
static double ref_split_rowsum(DBuf *bufs, int n) {
  DBuf *out = buf(bufs, n, "out"), *x = buf(bufs, n, "x");
  double want[SPLIT_ROWS];
  for (size_t r = 0; r < SPLIT_ROWS; r++) {
    want[r] = 0;
    for (size_t j = 0; j < SPLIT_COLS; j++) want[r] += dbuf_get(x, r * SPLIT_COLS + j);
  }
  return error_vs(out, want, SPLIT_ROWS);
}

/* tests/kernels/rescaled_accumulator.tile: (a @ b1) * r + a @ b2 with
 * r = f on rows r % 4 == 1 and 1 elsewhere; a [128, 64], b1 and b2 [64, 64]. */
#define RESCALE_M 128
#define RESCALE_N 64
static double ref_rescaled(DBuf *bufs, int n) {
  DBuf *out = buf(bufs, n, "out"), *a = buf(bufs, n, "a"), *b1 = buf(bufs, n, "b1"), *b2 = buf(bufs, n, "b2");
  DBuf *f = buf(bufs, n, "f");
  double *want = malloc(sizeof *want * RESCALE_M * RESCALE_N);
  if (!want) return INFINITY;
  for (size_t i = 0; i < RESCALE_M; i++)
    for (size_t j = 0; j < RESCALE_N; j++) {
      double p1 = 0, p2 = 0;
      for (size_t k = 0; k < RESCALE_N; k++) {
        p1 += dbuf_get(a, i * RESCALE_N + k) * dbuf_get(b1, k * RESCALE_N + j);
        p2 += dbuf_get(a, i * RESCALE_N + k) * dbuf_get(b2, k * RESCALE_N + j);
      }
      want[i * RESCALE_N + j] = p1 * (i % 4 == 1 ? dbuf_get(f, i) : 1.0) + p2;
    }
  double e = error_vs(out, want, RESCALE_M * RESCALE_N);
  free(want);
  return e;
}

static const Arg *find_arg(const Case *c, const char *name) {
  for (int i = 0; i < MAX_ARGS && c->args[i].name; i++)
    if (!strcmp(c->args[i].name, name)) return &c->args[i];
  return NULL;
}

/* Norm-wise relative error of the GPU result against the interpreter's;
 * NaN must match NaN. */
static double compare(const DBuf *gpu, const void *interp_host, double *max_ref) {
  DBuf ib = *gpu;
  ib.host = (void *)interp_host;
  double max_err = 0;
  *max_ref = 0;
  for (size_t i = 0; i < gpu->n; i++) {
    double a = dbuf_get(gpu, i), b = dbuf_get(&ib, i);
    if (isnan(a) || isnan(b)) {
      if (isnan(a) != isnan(b)) return INFINITY;
      continue;
    }
    max_err = fmax(max_err, fabs(a - b));
    *max_ref = fmax(*max_ref, fabs(b));
  }
  return *max_ref > 0 ? max_err / *max_ref : max_err;
}

static void set_tile_arg(tile_arg *t, tc_arg *ia, const tc_param *p, const Arg *a, const DBuf *b) {
  memset(ia, 0, sizeof *ia);
  if (p->kind == TC_PARAM_PTR) {
    *t = tile_arg_ptr(b->dev);
    ia->p = b->host;
  } else if (p->kind == TC_PARAM_FLOAT) {
    *t = tile_arg_f64(a->value);
    ia->f = a->value;
  } else if (p->kind == TC_PARAM_BOOL) {
    *t = tile_arg_bool(a->value != 0);
    ia->i = a->value != 0;
  } else {
    *t = tile_arg_i64((int64_t)a->value);
    ia->i = (int64_t)a->value;
  }
}

/* The case's kernel without @pipeline, launched on the same inputs (the
 * OUT buffers poisoned again); its outputs must equal the first run's. */
static bool same_without_pipeline(Gpu *g, const Case *c, const Variant *v, DBuf *bufs, int n, tile_arg *targs,
                                  const uint32_t grid[3]) {
  size_t len;
  char *src = variant_read_source(g, c->file, &len), *bare = src ? strip_pipeline(src, &len) : NULL;
  free(src);
  if (!bare) return false;
  tc_codegen_options go = {.linker = TC_LINKER_AUTO};
  Variant w;
  bool ok = c->kernel ? variant_build_text_kernel(g, c->file, bare, len, c->kernel, c->defines[0] ? c->defines : NULL, &w)
                      : variant_build_text(g, c->file, bare, len, c->defines[0] ? c->defines : NULL, &go, &w);
  free(bare);
  void *first[MAX_ARGS] = {0};
  for (int i = 0; ok && i < n; i++) {
    const Arg *a = find_arg(c, bufs[i].name ? bufs[i].name : "");
    if (!bufs[i].host || !a || a->role != OUT) continue;
    first[i] = malloc(bufs[i].n * bufs[i].elem_bytes);
    memcpy(first[i], bufs[i].host, bufs[i].n * bufs[i].elem_bytes);
    dbuf_poison(&bufs[i]);
    ok = dbuf_upload(g, &bufs[i]);
  }
  if (ok && (tile_launch(w.kernel, grid, NULL, targs, n) != TILE_OK || tile_synchronize(g->rt) != TILE_OK)) {
    printf("  launch without @pipeline failed: %s\n", tile_last_error());
    ok = false;
  }
  for (int i = 0; i < n; i++) {
    if (!first[i]) continue;
    if (ok && dbuf_download(g, &bufs[i]) && memcmp(first[i], bufs[i].host, bufs[i].n * bufs[i].elem_bytes)) {
      printf("  %s differs without @pipeline\n", bufs[i].name);
      ok = false;
    }
    free(first[i]);
  }
  (void)v;
  variant_free(&w);
  return ok;
}

static bool run_case(Gpu *g, const Case *c, uint64_t seed) {
  Variant v;
  bool ok = c->kernel ? variant_build_kernel(g, c->file, c->kernel, c->defines, &v) : variant_build(g, c->file, c->defines, &v);
  int n = ok ? tc_param_count(v.comp, 0) : 0;
  DBuf bufs[MAX_ARGS] = {0};
  void *interp_host[MAX_ARGS] = {0};
  tile_arg targs[MAX_ARGS];
  tc_arg iargs[MAX_ARGS];
  tc_buffer ibufs[MAX_ARGS];
  int nib = 0;
  Rng rng = {seed};
  for (int i = 0; ok && i < n; i++) {
    tc_param p = tc_param_get(v.comp, 0, i);
    const Arg *a = find_arg(c, p.name);
    if (!a) {
      printf("  no argument for parameter '%s'\n", p.name);
      ok = false;
      break;
    }
    if (p.kind == TC_PARAM_PTR) {
      ok = dbuf_alloc(g, &bufs[i], p.name, p.elem, a->n);
      if (!ok) break;
      if (a->role == IN) dbuf_fill(&bufs[i], &rng, a->lo, a->hi);
      else if (a->role == OUT) dbuf_poison(&bufs[i]);
    }
    set_tile_arg(&targs[i], &iargs[i], &p, a, &bufs[i]);
  }
  if (ok && c->prepare) c->prepare(bufs, n);
  for (int i = 0; ok && i < n; i++) {
    if (!bufs[i].host) continue;
    ok = dbuf_upload(g, &bufs[i]);
    /* The interpreter gets its own copy of the same initial contents. */
    interp_host[i] = malloc(bufs[i].n * bufs[i].elem_bytes);
    memcpy(interp_host[i], bufs[i].host, bufs[i].n * bufs[i].elem_bytes);
    iargs[i].p = interp_host[i];
    ibufs[nib++] = (tc_buffer){interp_host[i], bufs[i].n * bufs[i].elem_bytes, bufs[i].name};
  }
  int64_t gx = c->grid_count;
  if (ok && c->grid_const) {
    int64_t block = variant_const(&v, c->grid_const, 1);
    gx = (c->grid_count + block - 1) / block;
  }
  uint32_t grid[3] = {(uint32_t)gx, (uint32_t)(c->grid_y ? c->grid_y : 1), 1};
  if (ok && (tile_launch(v.kernel, grid, NULL, targs, n) != TILE_OK || tile_synchronize(g->rt) != TILE_OK)) {
    printf("  launch failed: %s\n", tile_last_error());
    ok = false;
  }
  for (int i = 0; ok && i < n; i++)
    if (bufs[i].host) ok = dbuf_download(g, &bufs[i]);
  if (ok) {
    char *err = NULL;
    int64_t igrid[3] = {grid[0], grid[1], grid[2]};
    if (!tc_interpret(v.comp, 0, igrid, iargs, n, ibufs, nib, 0, &err)) {
      printf("  interpreter: %s\n", err);
      ok = false;
    }
    free(err);
  }
  for (int i = 0; ok && i < n; i++) {
    const Arg *a = find_arg(c, bufs[i].name ? bufs[i].name : "");
    if (!bufs[i].host || !a || (a->role != OUT && a->role != ZERO)) continue;
    double ref, err = compare(&bufs[i], interp_host[i], &ref);
    bool pass = a->tol == 0 ? err == 0 : err <= a->tol;
    if (!pass) printf("  %s: relative error %.3g vs the interpreter (limit %.3g, max |ref| %.3g)\n", bufs[i].name, err, a->tol, ref);
    ok = ok && pass;
  }
  if (ok && c->reference) {
    double e = c->reference(bufs, n);
    if (!(e <= c->ref_tol)) printf("  relative error %.3g vs the C reference (limit %.3g)\n", e, c->ref_tol);
    ok = e <= c->ref_tol;
  }
  if (ok && c->unannotated) ok = same_without_pipeline(g, c, &v, bufs, n, targs, grid);
  for (int i = 0; i < n; i++) {
    dbuf_free(g, &bufs[i]);
    free(interp_host[i]);
  }
  variant_free(&v);
  return ok;
}

/* ---- special inputs ---- */

static void prepare_casts(DBuf *bufs, int n) {
  static const double specials[] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, 448, 464, 480, 65504, 65520, 3e9,
                                    -3e9, 255.5, 256, -0.0, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 1e-40, 0x1p-10, 0x1p-17};
  for (int i = 0; i < n; i++) {
    if (!bufs[i].name || strcmp(bufs[i].name, "x")) continue;
    for (size_t k = 0; k < sizeof specials / sizeof specials[0] && k < bufs[i].n; k++) dbuf_set(&bufs[i], k, specials[k]);
  }
}

/* Row 1 of the reductions input: all negative but a -0.0 (column 2) and a
 * +0.0 (column 5), so argmax must pick the +0.0 (and not the first zero). */
static void prepare_reductions(DBuf *bufs, int n) {
  DBuf *x = buf(bufs, n, "x");
  for (size_t j = 0; j < 50; j++) dbuf_set(x, 50 + j, -1.0 - (double)j);
  dbuf_set(x, 50 + 2, -0.0);
  dbuf_set(x, 50 + 5, 0.0);
}

/* The extreme values of tests/kernels/gpu_regressions.tile (its comment
 * says what each output checks). */
static void prepare_gpu_regressions(DBuf *bufs, int n) {
  DBuf *h = buf(bufs, n, "h"), *w = buf(bufs, n, "w"), *b = buf(bufs, n, "b");
  dbuf_set(h, 3, -32768), dbuf_set(h, 7, 32767), dbuf_set(h, 32 + 5, -32768);
  dbuf_set(w, 4, -2147483648.0), dbuf_set(w, 32, 100000), dbuf_set(w, 33, -70000), dbuf_set(w, 34, 65520);
  dbuf_set(w, 35, 65519), dbuf_set(w, 64, 300);
  dbuf_set(b, 2, -3), dbuf_set(b, 9, -128), dbuf_set(b, 32, 1);
}

/* lang/std/paged_decode.tile's cache: 5 sequences of PAGED_LENS tokens in
 * pages of 16 (29 pages, ids (7 i) % 32 of a pool of 32: shuffled and
 * distinct), the last pages partly filled. */
#define PAGED_BATCH 5
#define PAGED_POOL 32
static void prepare_paged(DBuf *bufs, int n) {
  static const int lens[PAGED_BATCH] = {1, 17, 200, 64, 131};
  DBuf *ids = buf(bufs, n, "page_ids"), *indptr = buf(bufs, n, "indptr"), *len = buf(bufs, n, "kv_len");
  int at = 0;
  for (int b = 0; b < PAGED_BATCH; b++) {
    dbuf_set(indptr, (size_t)b, at);
    dbuf_set(len, (size_t)b, lens[b]);
    for (int p = 0; p < (lens[b] + 15) / 16; p++, at++) dbuf_set(ids, (size_t)at, (at * 7) % PAGED_POOL);
  }
  dbuf_set(indptr, PAGED_BATCH, at);
}

/* paged_prefill's cache: one sequence of PREFILL_KV tokens (the last
 * PREFILL_Q of them new) in pages of 16 of the same shuffled pool. */
#define PREFILL_Q 100
#define PREFILL_KV 300
static void prepare_prefill(DBuf *bufs, int n) {
  DBuf *ids = buf(bufs, n, "page_ids"), *indptr = buf(bufs, n, "indptr"), *len = buf(bufs, n, "kv_len");
  DBuf *qo = buf(bufs, n, "qo_indptr");
  for (int p = 0; p < (PREFILL_KV + 15) / 16; p++) dbuf_set(ids, (size_t)p, (p * 7 + 3) % PAGED_POOL);
  dbuf_set(indptr, 0, 0), dbuf_set(indptr, 1, (PREFILL_KV + 15) / 16);
  dbuf_set(len, 0, PREFILL_KV);
  dbuf_set(qo, 0, 0), dbuf_set(qo, 1, PREFILL_Q);
}

/* ---- the cases ---- */

#define SC(nm, v) {nm, SCALAR, 0, 0, 0, v, 0}
#define INB(nm, n, lo, hi) {nm, IN, n, lo, hi, 0, 0}
#define OUTB(nm, n, tol) {nm, OUT, n, 0, 0, 0, tol}
#define ZEROB(nm, n, tol) {nm, ZERO, n, 0, 0, 0, tol}

/* paged_decode's arguments (prepare_paged's cache: 2 KV heads, 8 query
 * heads, d 64, pages of 16), stored K/V uniform in [lo, hi], per-head
 * scales in [slo, shi]; split 1, so part_out and part_lse stay as they are. */
#define PAGED_ARGS_D(D, lo, hi, slo, shi)                                                                            \
  {OUTB("out", PAGED_BATCH * 8 * D, BF16_TOL), OUTB("lse", PAGED_BATCH * 8, F32_TOL), ZEROB("part_out", 64, 0),      \
   ZEROB("part_lse", 8, 0), INB("q", PAGED_BATCH * 8 * D, -1, 1), INB("k_cache", PAGED_POOL * 16 * 2 * D, lo, hi),   \
   INB("v_cache", PAGED_POOL * 16 * 2 * D, lo, hi), INB("kv_scale", 4, slo, shi), INB("page_ids", 29, 0, 1),          \
   INB("indptr", PAGED_BATCH + 1, 0, 1), INB("kv_len", PAGED_BATCH, 0, 1), SC("batch", PAGED_BATCH), SC("heads", 8),   \
   SC("kv_heads", 2), SC("sm_scale", 0.125), SC("stride_page", 16 * 2 * D), SC("stride_slot", 2 * D),               \
   SC("stride_head", D), INB("k_scales", 1, 1, 1), INB("v_scales", 1, 1, 1)}
#define PAGED_ARGS(lo, hi, slo, shi) PAGED_ARGS_D(64, lo, hi, slo, shi)

/* paged_prefill's arguments (prepare_prefill's cache: 2 KV heads, 8 query
 * heads, head dim D); grid (cdiv(PREFILL_Q * 4, 128), 2). */
#define PREFILL_ARGS_D(D, lo, hi, slo, shi, causal)                                                                   \
  {OUTB("out", PREFILL_Q * 8 * D, BF16_TOL), OUTB("lse", PREFILL_Q * 8, F32_TOL), INB("q", PREFILL_Q * 8 * D, -1, 1), \
   INB("k_cache", PAGED_POOL * 16 * 2 * D, lo, hi), INB("v_cache", PAGED_POOL * 16 * 2 * D, lo, hi),                 \
   INB("kv_scale", 4, slo, shi), INB("page_ids", (PREFILL_KV + 15) / 16, 0, 1), INB("indptr", 2, 0, 1),               \
   INB("kv_len", 1, 0, 1), INB("qo_indptr", 2, 0, 1), SC("heads", 8), SC("kv_heads", 2), SC("sm_scale", 0.09),        \
   SC("causal", causal), SC("stride_page", 16 * 2 * D), SC("stride_slot", 2 * D), SC("stride_head", D),              \
   SC("q_stride_t", 8 * D), SC("q_stride_h", D), INB("k_scales", 1, 1, 1), INB("v_scales", 1, 1, 1)}

static const Case cases[] = {
    {"vector_add f32", "tests/kernels/vector_add.tile", {"T", "f32", NULL}, 100003, "BLOCK", 0,
     {OUTB("z", 100003, 0), INB("x", 100003, -100, 100), INB("y", 100003, -100, 100), SC("n", 100003)}, NULL,
     ref_vector_add, F32_TOL, false, NULL},
    {"vector_add i32", "tests/kernels/vector_add.tile", {"T", "i32", "BLOCK", "256", NULL}, 777, "BLOCK", 0,
     {OUTB("z", 777, 0), INB("x", 777, -1e6, 1e6), INB("y", 777, -1e6, 1e6), SC("n", 777)}, NULL, NULL, 0, false, NULL},
    {"vector_add bf16", "tests/kernels/vector_add.tile", {"T", "bf16", NULL}, 5000, "BLOCK", 0,
     {OUTB("z", 5000, 0), INB("x", 5000, -10, 10), INB("y", 5000, -10, 10), SC("n", 5000)}, NULL, NULL, 0, false, NULL},
    {"reductions", "tests/kernels/reductions.tile", {NULL}, 33, "BLOCK_R", 0,
     {OUTB("row_sum", 33, F32_TOL), OUTB("row_max", 33, 0), OUTB("row_argmax", 33, 0), ZEROB("col_sum", 50, F32_TOL),
      ZEROB("total", 1, F32_TOL), INB("x", 33 * 50, -10, 10), SC("rows", 33), SC("cols", 50)}, prepare_reductions,
     NULL, 0, false, NULL},
    {"scans (cumsum)", "tests/kernels/scans.tile", {NULL}, 3, NULL, 0,
     {OUTB("row_scan", 40 * 50, 0), OUTB("col_scan", 40 * 50, 0), OUTB("ranks", 300, 0), OUTB("counts", 3, 0),
      INB("x", 40 * 50, -10, 10), INB("v", 300, 0, 8), INB("bytes", 300, 0, 8), SC("rows", 40), SC("cols", 50),
      SC("n", 300)}, NULL, NULL, 0, false, NULL},
    {"paged_decode bf16 GQA 4, ragged pages (vs the interpreter)", "lang/std/paged_decode.tile",
     {"HEAD_DIM", "64", "PAGE", "16", NULL}, 2, NULL, PAGED_BATCH, PAGED_ARGS(-1, 1, 1, 1), prepare_paged, NULL, 0,
     false, NULL},
    {"paged_decode bf16 d128, 4 warps, blocks of 16 tokens", "lang/std/paged_decode.tile",
     {"HEAD_DIM", "128", "PAGE", "16", "WARPS", "4", "BLOCK_N", "16", NULL}, 2, NULL, PAGED_BATCH,
     PAGED_ARGS_D(128, -1, 1, 1, 1), prepare_paged, NULL, 0, false, NULL},
    {"paged_decode bf16 8 warps, blocks of 32 tokens", "lang/std/paged_decode.tile",
     {"HEAD_DIM", "64", "PAGE", "16", "WARPS", "8", "BLOCK_N", "32", NULL}, 2, NULL, PAGED_BATCH,
     PAGED_ARGS(-1, 1, 1, 1), prepare_paged, NULL, 0, false, NULL},
    {"paged_decode fp8 e4m3 cache with per-head scales", "lang/std/paged_decode.tile",
     {"HEAD_DIM", "64", "PAGE", "16", "KV", "f8e4m3", "SCALED", "true", NULL}, 2, NULL, PAGED_BATCH,
     PAGED_ARGS(-400, 400, 0.001, 0.005), prepare_paged, NULL, 0, false, NULL},
    {"paged_decode bf16 pipelined, 3 stages (cp.async ring over the page table)", "lang/std/paged_decode.tile",
     {"HEAD_DIM", "64", "PAGE", "16", "STAGES", "3", NULL}, 2, NULL, PAGED_BATCH, PAGED_ARGS(-1, 1, 1, 1),
     prepare_paged, NULL, 0, false, NULL},
    {"paged_decode fp8 pipelined, 4 warps, blocks of 64 tokens, 2 stages", "lang/std/paged_decode.tile",
     {"HEAD_DIM", "64", "PAGE", "16", "KV", "f8e4m3", "SCALED", "true", "WARPS", "4", "BLOCK_N", "64", "STAGES", "2",
      NULL}, 2, NULL, PAGED_BATCH, PAGED_ARGS(-400, 400, 0.001, 0.005), prepare_paged, NULL, 0, false, NULL},
    {.name = "paged_prefill bf16 d128 causal pipelined, 3 stages (vs the interpreter and the unpipelined build)",
     .file = "lang/std/paged_decode.tile", .kernel = "paged_prefill",
     .defines = {"HEAD_DIM", "128", "PAGE", "16", "STAGES", "3", NULL}, .grid_count = PREFILL_Q * 4,
     .grid_const = "BLOCK_M", .grid_y = 2, .args = PREFILL_ARGS_D(128, -1, 1, 1, 1, 1), .prepare = prepare_prefill,
     .unannotated = true},
    {.name = "paged_prefill fp8 e4m3 d64 full, blocks of 128 keys, 2 stages", .file = "lang/std/paged_decode.tile",
     .kernel = "paged_prefill",
     .defines = {"HEAD_DIM", "64", "PAGE", "16", "KV", "f8e4m3", "SCALED", "true", "BLOCK_N", "128", "STAGES", "2",
                 NULL},
     .grid_count = PREFILL_Q * 4, .grid_const = "BLOCK_M", .grid_y = 2,
     .args = PREFILL_ARGS_D(64, -400, 400, 0.001, 0.005, 0), .prepare = prepare_prefill, .unannotated = true},
    {"dot_fp8_reshaped_a: an 8-bit A computed by a reshape (k order), from registers, 1 warpgroup",
     "tests/kernels/dot_fp8_reshaped_a.tile", {NULL}, 1, NULL, 0,
     {OUTB("c", 128 * 64, FP8_DOT_TOL), INB("a", 128 * 64, -8, 8), INB("bt", 64 * 64, -8, 8)}, NULL, NULL, 0, false,
     NULL},
    {"dot_fp8_reshaped_a: 2 warpgroups", "tests/kernels/dot_fp8_reshaped_a.tile", {"WARPS", "8", NULL}, 1, NULL, 0,
     {OUTB("c", 128 * 64, FP8_DOT_TOL), INB("a", 128 * 64, -8, 8), INB("bt", 64 * 64, -8, 8)}, NULL, NULL, 0, false,
     NULL},
    {"casts", "tests/kernels/casts.tile", {NULL}, 1000, "BLOCK", 0,
     {OUTB("to_bf16", 1000, 0), OUTB("to_f16", 1000, 0), OUTB("to_e4m3", 1000, 0), OUTB("to_e5m2", 1000, 0),
      OUTB("to_i32", 1000, 0), OUTB("to_u8", 1000, 0), OUTB("back", 1000, 0), INB("x", 1000, -300, 300), SC("n", 1000)},
     prepare_casts, NULL, 0, false, NULL},
    /* programs of one row merged by the last to finish: fence() between
     * the partials, the ticket and the reads; the counters end at zero */
    {"split_rowsum: fence, atomic ticket, last program merges", "tests/kernels/split_reduce.tile", {NULL}, SPLIT_ROWS,
     NULL, (SPLIT_COLS + SPLIT_BLOCK - 1) / SPLIT_BLOCK,
     {OUTB("out", SPLIT_ROWS, F32_TOL), OUTB("part", SPLIT_ROWS * ((SPLIT_COLS + SPLIT_BLOCK - 1) / SPLIT_BLOCK), F32_TOL),
      ZEROB("count", SPLIT_ROWS, 0), INB("x", SPLIT_ROWS * SPLIT_COLS, -1, 1), SC("cols", SPLIT_COLS)},
     NULL, ref_split_rowsum, F32_TOL, false, NULL},
    {"histogram", "tests/kernels/atomics.tile", {NULL}, 1000, "BLOCK", 0,
     {ZEROB("hist", 17, 0), ZEROB("gmax", 1, 0), INB("x", 1000, -2, 19), SC("n", 1000), SC("bins", 17)}, NULL, NULL, 0, false, NULL},
    {"naive_attention", "tests/kernels/naive_attention.tile", {NULL}, 2, NULL, 0,
     {OUTB("out", 2 * 100 * 64, F32_TOL), INB("q", 2 * 100 * 64, -1, 1), INB("k", 2 * 100 * 64, -1, 1),
      INB("v", 2 * 100 * 64, -1, 1), SC("seqlen", 100), SC("sm_scale", 0.125)}, NULL, ref_naive, F32_TOL, false, NULL},
    {"rescaled accumulator: factors of 1 skip the multiply, the product chains in flight",
     "tests/kernels/rescaled_accumulator.tile", {NULL}, 1, NULL, 0,
     {OUTB("out", RESCALE_M * RESCALE_N, F32_TOL), INB("a", RESCALE_M * RESCALE_N, -1, 1),
      INB("b1", RESCALE_N * RESCALE_N, -1, 1), INB("b2", RESCALE_N * RESCALE_N, -1, 1), INB("f", RESCALE_M, 0.25, 4)},
     NULL, ref_rescaled, F32_TOL, false, NULL},
    {"naive_attention causal", "tests/kernels/naive_attention.tile", {"CAUSAL", "true", NULL}, 1, NULL, 0,
     {OUTB("out", 128 * 64, F32_TOL), INB("q", 128 * 64, -1, 1), INB("k", 128 * 64, -1, 1),
      INB("v", 128 * 64, -1, 1), SC("seqlen", 128), SC("sm_scale", 0.125)}, NULL, NULL, 0, false, NULL},
    {"loop_limits: loops end before their induction value wraps", "tests/kernels/loop_limits.tile", {NULL}, 1, NULL, 0,
     {OUTB("out", 6, 0), SC("lo", 2147483640), SC("hi", 2147483647), SC("step", 5), SC("ulo", 4294967290.0),
      SC("uhi", 4294967295.0), SC("ustep", 4)}, NULL, NULL, 0, false, NULL},
    {"loop_limits: big steps", "tests/kernels/loop_limits.tile", {NULL}, 1, NULL, 0,
     {OUTB("out", 6, 0), SC("lo", 2147483600), SC("hi", 2147483647), SC("step", 47), SC("ulo", 4000000000.0),
      SC("uhi", 4294967295.0), SC("ustep", 100000000)}, NULL, NULL, 0, false, NULL},
    {"gpu_regressions: what tile-gpu diff found", "tests/kernels/gpu_regressions.tile", {NULL}, 1, NULL, 0,
     {INB("h", 64, -32768, 32767), INB("w", 65, -1000, 1000), INB("b", 33, -128, 127), INB("x16", 512, -2, 2),
      INB("y16", 256, -2, 2), OUTB("tmp", 512, 0), OUTB("t_out", 512, 0), OUTB("neg_out", 32, 0),
      OUTB("abs_out", 32, 0), OUTB("absw_out", 32, 0), OUTB("f16_out", 32, 0), OUTB("bf_out", 32, 0),
      OUTB("mma_out", 512, F32_TOL), OUTB("loop_out", 1, 0), INB("f", 32, 0, 20), INB("bf", 32, 65536, 80000),
      OUTB("shr_out", 32, 0), OUTB("mix_out", 32, 0)},
     prepare_gpu_regressions, NULL, 0, false, NULL},
    {"gpu_regressions_minmax: min/max of negated integers", "tests/kernels/gpu_regressions_minmax.tile", {NULL}, 1,
     NULL, 0, {INB("m", 512, -300, 300), SC("s", 7), OUTB("wide", 256, 0), OUTB("min_out", 32, 0), OUTB("max_out", 32, 0)},
     NULL, NULL, 0, false, NULL},
    {"flash_attention_fp8 d64 n300 h2 (vs the interpreter)", "lang/std/flash_attention_fp8.tile", {NULL}, 300,
     "BLOCK_M", 2,
     {OUTB("out", 2 * 300 * 64, FP8_ATTN_TOL), INB("q", 2 * 300 * 64, -200, 200), INB("k", 2 * 300 * 64, -200, 200),
      INB("v", 2 * 300 * 64, -200, 200), SC("seqlen", 300), SC("heads", 2), SC("sm_scale", 0.125),
      SC("descale_q", 0.005), SC("descale_k", 0.0075), SC("descale_v", 0.0025), SC("stride_b", 2 * 300 * 64),
      SC("stride_h", 300 * 64), SC("stride_n", 64)},
     NULL, NULL, 0, false, NULL},
    {"softmax 37x1000", "lang/std/softmax.tile", {NULL}, 37, NULL, 0,
     {OUTB("out", 37 * 1024, F32_TOL), INB("x", 37 * 1024, -4, 4), SC("n", 1000), SC("stride", 1024)}, NULL,
     ref_softmax_37, F32_TOL, false, NULL},
    {"softmax 5x4096", "lang/std/softmax.tile", {"BLOCK", "4096", NULL}, 5, NULL, 0,
     {OUTB("out", 5 * 4096, F32_TOL), INB("x", 5 * 4096, -4, 4), SC("n", 4096), SC("stride", 4096)}, NULL, NULL, 0, false, NULL},
    {"layernorm f32", "lang/std/layernorm.tile", {NULL}, 13, NULL, 0,
     {OUTB("y", 13 * 2512, F32_TOL), INB("x", 13 * 2512, -2, 3), INB("w", 2500, 0.5, 1.5), INB("b", 2500, -1, 1),
      OUTB("mean", 13, F32_TOL), OUTB("rstd", 13, F32_TOL), SC("n", 2500), SC("stride", 2512), SC("eps", 1e-5)}, NULL, NULL, 0, false, NULL},
    {"layernorm bf16", "lang/std/layernorm.tile", {"T", "bf16", "BLOCK", "256", NULL}, 7, NULL, 0,
     {OUTB("y", 7 * 784, BF16_TOL), INB("x", 7 * 784, -2, 3), INB("w", 777, 0.5, 1.5), INB("b", 777, -1, 1),
      OUTB("mean", 7, F32_TOL), OUTB("rstd", 7, F32_TOL), SC("n", 777), SC("stride", 784), SC("eps", 1e-5)}, NULL, NULL, 0, false, NULL},
    {"flash_attention d64 full", "lang/std/flash_attention.tile", {"HEAD_DIM", "64", NULL}, 300, "BLOCK_M", 2 * 3,
     {OUTB("out", 2 * 3 * 300 * 64, BF16_TOL), INB("q", 2 * 3 * 300 * 64, -1, 1), INB("k", 2 * 3 * 300 * 64, -1, 1),
      INB("v", 2 * 3 * 300 * 64, -1, 1), SC("seqlen", 300), SC("heads", 3), SC("sm_scale", 0.125),
      SC("stride_b", 3 * 300 * 64), SC("stride_h", 300 * 64), SC("stride_n", 64)}, NULL, ref_flash_d64, BF16_TOL,
     true, NULL},
    {"flash_attention d128 causal", "lang/std/flash_attention.tile", {"HEAD_DIM", "128", "CAUSAL", "true", NULL},
     257, "BLOCK_M", 2,
     {OUTB("out", 2 * 257 * 128, BF16_TOL), INB("q", 2 * 257 * 128, -1, 1), INB("k", 2 * 257 * 128, -1, 1),
      INB("v", 2 * 257 * 128, -1, 1), SC("seqlen", 257), SC("heads", 2), SC("sm_scale", 0.08838834764831845),
      SC("stride_b", 2 * 257 * 128), SC("stride_h", 128), SC("stride_n", 2 * 128)}, NULL, NULL, 0, true, NULL},
    {"flash_attention d64 causal", "lang/std/flash_attention.tile", {"HEAD_DIM", "64", "CAUSAL", "true", NULL},
     190, "BLOCK_M", 1,
     {OUTB("out", 190 * 64, BF16_TOL), INB("q", 190 * 64, -1, 1), INB("k", 190 * 64, -1, 1),
      INB("v", 190 * 64, -1, 1), SC("seqlen", 190), SC("heads", 1), SC("sm_scale", 0.125),
      SC("stride_b", 190 * 64), SC("stride_h", 190 * 64), SC("stride_n", 64)}, NULL, NULL, 0, false, NULL},
};

int gpu_gemm_tests(Gpu *g, const char *only);
int gpu_tma_tests(Gpu *g, const char *only);
int gpu_attention_tests(Gpu *g, const char *only);
int gpu_mlp_tests(Gpu *g, const char *only);
int gpu_paged_tests(Gpu *g, const char *only);
int gpu_jit_tests(Gpu *g, const char *only);
int gpu_tune_tests(Gpu *g, const char *only);
int gpu_debug_tests(Gpu *g, const char *only);

int gpu_tests_main(int argc, char **argv, const char *source_root) {
  const char *only = argc > 0 ? argv[0] : NULL;
  Gpu g;
  if (!gpu_open(&g, source_root)) {
    printf("SKIP: the GPU suite needs a CUDA device\n");
    return EXIT_SKIP;
  }
  gpu_watchdog_start();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const Case *c = &cases[i];
    if (only && !strstr(c->name, only)) continue;
    double t0 = now_ms();
    bool ok = run_case(&g, c, 1000 + i);
    gpu_report(&g, c->name, ok, t0, NULL);
  }
  gpu_tma_tests(&g, only);
  gpu_attention_tests(&g, only);
  gpu_mlp_tests(&g, only);
  gpu_paged_tests(&g, only);
  gpu_jit_tests(&g, only);
  gpu_tune_tests(&g, only);
  gpu_debug_tests(&g, only);
  gpu_gemm_tests(&g, only); /* last: its ping-pong cases, in the barrier debug mode */
  printf("%d passed, %d failed\n", g.passed, g.failed);
  gpu_close(&g);
  return g.failed ? 1 : 0;
}
