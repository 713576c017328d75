/* gpu_attention.c - the GPU suite's cases for lang/std/flash_attention_bwd.tile:
 * the training forward and the three backward kernels launched in turn, as
 * a training step would, at sequence lengths that are not multiples of the
 * blocks, head dims 64 and 128, full and causal, grouped-query ratios 1, 4
 * and 8, BHSD and BSHD. Every output is poisoned first; out, lse, dq, dk
 * and dv are checked against the float64 reference on the same (rounded)
 * inputs (tests/support/attn_ref.h), and on the smallest case the forward
 * also against the interpreter, bit for bit not required (tensor-core sums
 * in another order). Every case also runs the warp-specialized forward
 * (flash_attention_ws.tile: out and lse, the window and BSHD included) and
 * the warp-specialized dk/dv and dq (flash_attention_bwd_ws.tile) on the
 * same inputs, and runs again through tile_attention.h, checked
 * against the same reference. The fp8 forward runs through
 * tile_attention.h too, against float64 on its dequantized inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ref.h"
#include "gpu_common.h"
#include "tile_attention.h"

#define FILE_BWD "lang/std/flash_attention_bwd.tile"
#define FILE_BWD_WS "lang/std/flash_attention_bwd_ws.tile"
/* bf16 tensors: the spec's bound for bf16; lse absolutely (a log2). */
#define ATTN_BF16_TOL 1e-2
#define ATTN_LSE_TOL 1e-2
/* The interpreter's forward against the GPU's (f32 sums in another order,
 * bf16 outputs: a unit or two of bf16). */
#define ATTN_INTERP_TOL 1e-2
#define ATTN_KERNELS 4
#define ATTN_MAX_ARGS 18

typedef struct AttnCase {
  const char *name;
  int batch, heads, heads_kv, seqlen, dim;
  bool causal, bshd, with_interp;
  int window; /* WINDOW of the training kernels: 0 none */
} AttnCase;

static const AttnCase cases[] = {
    {"attention train d64 full n300 h4", 1, 4, 4, 300, 64, false, false, true, 0},
    {"attention train d64 causal n257 gqa4 bshd", 2, 8, 2, 257, 64, true, true, false, 0},
    {"attention train d128 full n200 gqa8", 1, 8, 1, 200, 128, false, false, false, 0},
    {"attention train d128 causal n333", 1, 2, 2, 333, 128, true, false, false, 0},
    {"attention train d64 causal window 100 n400", 1, 2, 2, 400, 64, true, false, false, 100},
    {"attention forward ws d256 full n190 gqa2", 1, 4, 2, 190, 256, false, false, false, 0},
    {"attention forward ws d256 causal n257", 1, 2, 2, 257, 256, true, false, false, 0},
};

static const char *const kernel_names[ATTN_KERNELS] = {"attention_fwd_lse", "attention_bwd_preprocess",
                                                       "attention_bwd_dkdv", "attention_bwd_dq"};

/* max |gpu - want| / max |want|; NaN anywhere: infinity. */
static double error_of(const DBuf *b, const double *want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < b->n; i++) {
    double x = dbuf_get(b, i);
    if (isnan(x) || isnan(want[i])) return INFINITY;
    err = fmax(err, fabs(x - want[i]));
    ref = fmax(ref, fabs(want[i]));
  }
  return ref > 0 ? err / ref : err;
}

static double *doubles_of(const DBuf *b) {
  double *d = malloc(sizeof(double) * b->n);
  for (size_t i = 0; i < b->n; i++) d[i] = dbuf_get(b, i);
  return d;
}

static int64_t grid_of(int64_t n, int64_t block) { return (n + block - 1) / block; }

/* Runs the forward in the interpreter on the same inputs and compares out. */
static bool forward_matches_interpreter(const Variant *fwd, DBuf *bufs, const tile_arg *targs, int nargs,
                                        const int64_t grid[3]) {
  tc_arg ia[ATTN_MAX_ARGS];
  tc_buffer ib[5];
  void *copies[5] = {0};
  int nb = 0;
  for (int i = 0; i < nargs; i++) {
    memset(&ia[i], 0, sizeof ia[i]);
    if (i < 5) {
      copies[i] = malloc(bufs[i].n * bufs[i].elem_bytes);
      memcpy(copies[i], bufs[i].host, bufs[i].n * bufs[i].elem_bytes);
      ia[i].p = copies[i];
      ib[nb++] = (tc_buffer){copies[i], bufs[i].n * bufs[i].elem_bytes, bufs[i].name};
    } else if (i == 8) {
      ia[i].f = targs[i].f;
    } else {
      ia[i].i = targs[i].i;
    }
  }
  char *err = NULL;
  bool ok = tc_interpret(fwd->comp, 0, grid, ia, nargs, ib, nb, 0, &err);
  if (!ok) printf("  interpreter: %s\n", err ? err : "?");
  free(err);
  if (ok) {
    DBuf interp = bufs[0];
    interp.host = copies[0];
    double *want = doubles_of(&interp), e = error_of(&bufs[0], want);
    if (!(e <= ATTN_INTERP_TOL)) printf("  out: error %.3g against the interpreter\n", e);
    ok = e <= ATTN_INTERP_TOL;
    free(want);
  }
  for (int i = 0; i < 5; i++) free(copies[i]);
  return ok;
}

/* flash_attention_ws.tile (the warp-specialized forward) on the same
 * inputs, its descriptors seeing q, k, v as matrices (rows of a head's
 * sequence for BHSD, rows of tokens for BSHD): out and lse against the
 * reference. */
static bool ws_forward_form(Gpu *g, const AttnCase *c, DBuf *q, DBuf *k, DBuf *v, const double *want,
                            const double *want_lse, bool two_blocks, bool turns) {
  char dim[8], window[16];
  snprintf(dim, sizeof dim, "%d", c->dim), snprintf(window, sizeof window, "%d", c->window);
  const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", c->causal ? "true" : "false", "WINDOW", window,
                        "BSHD", c->bshd ? "true" : "false", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  int at = 8;
  defs[at++] = "TURNS", defs[at++] = turns ? "true" : "false";
  if (two_blocks) { /* BLOCK_N 64 at d128, 32 at d256: four tiles a stage; Q in registers up to d128 */
    defs[at++] = "TWO_BLOCKS", defs[at++] = "true";
    if (c->dim > 64) defs[at++] = "BLOCK_N", defs[at++] = c->dim == 128 ? "64" : "32";
    if (c->dim <= 128) defs[at++] = "Q_IN_REGISTERS", defs[at++] = "true";
  } else { /* the one-block loop, Q in shared memory */
    defs[at++] = "TWO_BLOCKS", defs[at++] = "false", defs[at++] = "Q_IN_REGISTERS", defs[at++] = "false";
  }
  Variant w;
  if (!variant_build(g, "lang/std/flash_attention_ws.tile", defs, &w)) return false;
  size_t rows = (size_t)c->batch * c->heads * c->seqlen;
  DBuf out, lse;
  memset(&lse, 0, sizeof lse);
  bool ok = dbuf_alloc(g, &out, "out", "bf16", q->n) && dbuf_alloc(g, &lse, "lse", "f32", rows);
  if (ok) dbuf_poison(&out), dbuf_poison(&lse), ok = dbuf_upload(g, &out) && dbuf_upload(g, &lse);
  int64_t qr = (int64_t)rows, qc = c->dim, kr = (int64_t)c->batch * c->heads_kv * c->seqlen, kc = c->dim;
  if (c->bshd) qr = kr = (int64_t)c->batch * c->seqlen, qc = (int64_t)c->heads * c->dim, kc = (int64_t)c->heads_kv * c->dim;
  tile_tensor tq = {q->dev, 2, {qr, qc}, {qc, 1}}, tk = {k->dev, 2, {kr, kc}, {kc, 1}};
  tile_tensor tv = {v->dev, 2, {kr, kc}, {kc, 1}};
  /* cu_q, cu_k are not read without VARLEN */
  tile_arg a[11] = {tile_arg_ptr(out.dev),    tile_arg_ptr(lse.dev),   tile_arg_tensor(&tq),
                    tile_arg_tensor(&tk),     tile_arg_tensor(&tv),    tile_arg_ptr(lse.dev),
                    tile_arg_ptr(lse.dev),    tile_arg_i64(c->seqlen), tile_arg_i64(c->heads),
                    tile_arg_i64(c->heads_kv), tile_arg_f64(1.0 / sqrt((double)c->dim))};
  uint32_t grid[3] = {(uint32_t)grid_of(c->seqlen, variant_const(&w, "BLOCK_M", 128)),
                      (uint32_t)(c->batch * c->heads), 1};
  if (ok && (tile_launch(w.kernel, grid, NULL, a, 12) != TILE_OK || tile_synchronize(g->rt) != TILE_OK)) {
    printf("  flash_attention_ws launch failed: %s\n", tile_last_error());
    ok = false;
  }
  if (ok) ok = dbuf_download(g, &out) && dbuf_download(g, &lse);
  if (ok) {
    double e = error_of(&out, want), e_lse = 0;
    for (size_t i = 0; i < rows; i++) e_lse = fmax(e_lse, fabs(dbuf_get(&lse, i) - want_lse[i]));
    const char *form = two_blocks ? (turns ? " (two blocks, turns)" : " (two blocks)") : turns ? " (turns)" : "";
    if (!(e <= ATTN_BF16_TOL)) printf("  flash_attention_ws%s out: relative error %.3g\n", form, e);
    if (!(e_lse <= ATTN_LSE_TOL)) printf("  flash_attention_ws%s lse: max abs error %.3g\n", form, e_lse);
    ok = e <= ATTN_BF16_TOL && e_lse <= ATTN_LSE_TOL;
  }
  dbuf_free(g, &out), dbuf_free(g, &lse);
  variant_free(&w);
  return ok;
}

/* Both loops of the forward, one key block per iteration and two
 * (TWO_BLOCKS, with Q_IN_REGISTERS up to d128), each alone and with the
 * consumer warpgroups taking turns (TURNS). */
static bool ws_forward_matches(Gpu *g, const AttnCase *c, DBuf *q, DBuf *k, DBuf *v, const double *want,
                               const double *want_lse) {
  bool ok = true;
  for (int form = 0; form < 4; form++)
    ok = ws_forward_form(g, c, q, k, v, want, want_lse, form & 1, form & 2) && ok;
  return ok;
}

/* flash_attention_bwd_ws.tile (the warp-specialized dk/dv and dq) on the
 * same inputs, lse and delta (the strided kernels' b[1] and b[9]), the
 * descriptors as in ws_forward_matches: dq, dk, dv against the reference. */
static bool ws_backward_matches(Gpu *g, const AttnCase *c, const DBuf *b, const AttnRefOut *ref) {
  enum { LSE = 1, Q, K, V, DOUT, DQ, DK, DV, DELTA };
  char dim[8], window[16];
  snprintf(dim, sizeof dim, "%d", c->dim), snprintf(window, sizeof window, "%d", c->window);
  const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", c->causal ? "true" : "false", "WINDOW", window,
                        "BSHD", c->bshd ? "true" : "false", NULL};
  Variant wk, wq;
  memset(&wq, 0, sizeof wq);
  if (!variant_build_kernel(g, FILE_BWD_WS, "attention_bwd_dkdv_ws", defs, &wk)) return false;
  bool ok = variant_build_kernel(g, FILE_BWD_WS, "attention_bwd_dq_ws", defs, &wq);
  DBuf r[3];
  memset(r, 0, sizeof r);
  for (int i = 0; i < 3 && ok; i++) {
    ok = dbuf_alloc(g, &r[i], b[DQ + i].name, "bf16", b[DQ + i].n);
    if (ok) dbuf_poison(&r[i]), ok = dbuf_upload(g, &r[i]);
  }
  int64_t qr = (int64_t)c->batch * c->heads * c->seqlen, qc = c->dim;
  int64_t kr = (int64_t)c->batch * c->heads_kv * c->seqlen, kc = c->dim;
  if (c->bshd) qr = kr = (int64_t)c->batch * c->seqlen, qc = (int64_t)c->heads * c->dim, kc = (int64_t)c->heads_kv * c->dim;
  tile_tensor t[4] = {{b[Q].dev, 2, {qr, qc}, {qc, 1}}, {b[K].dev, 2, {kr, kc}, {kc, 1}},
                      {b[V].dev, 2, {kr, kc}, {kc, 1}}, {b[DOUT].dev, 2, {qr, qc}, {qc, 1}}};
  tile_arg ka[12] = {tile_arg_ptr(r[1].dev),  tile_arg_ptr(r[2].dev),  tile_arg_tensor(&t[0]),
                     tile_arg_tensor(&t[1]),  tile_arg_tensor(&t[2]),  tile_arg_tensor(&t[3]),
                     tile_arg_ptr(b[LSE].dev), tile_arg_ptr(b[DELTA].dev), tile_arg_i64(c->seqlen),
                     tile_arg_i64(c->heads),  tile_arg_i64(c->heads_kv), tile_arg_f64(1.0 / sqrt((double)c->dim))};
  tile_arg qa[11] = {tile_arg_ptr(r[0].dev)};
  memcpy(qa + 1, ka + 2, 10 * sizeof(tile_arg));
  uint32_t gk[3] = {(uint32_t)grid_of(c->seqlen, variant_const(&wk, "BLOCK_N", 128)), (uint32_t)(c->batch * c->heads_kv), 1};
  uint32_t gq[3] = {(uint32_t)grid_of(c->seqlen, variant_const(&wq, "BLOCK_M", 128)), (uint32_t)(c->batch * c->heads), 1};
  if (ok && (tile_launch(wk.kernel, gk, NULL, ka, 12) != TILE_OK || tile_launch(wq.kernel, gq, NULL, qa, 11) != TILE_OK ||
             tile_synchronize(g->rt) != TILE_OK)) {
    printf("  flash_attention_bwd_ws launch failed: %s\n", tile_last_error());
    ok = false;
  }
  const double *want[3] = {ref->dq, ref->dk, ref->dv};
  for (int i = 0; i < 3 && ok; i++) {
    ok = dbuf_download(g, &r[i]);
    double e = ok ? error_of(&r[i], want[i]) : INFINITY;
    if (ok && !(e <= ATTN_BF16_TOL)) printf("  flash_attention_bwd_ws %s: relative error %.3g\n", r[i].name, e);
    ok = ok && e <= ATTN_BF16_TOL;
  }
  for (int i = 0; i < 3; i++) dbuf_free(g, &r[i]);
  variant_free(&wk), variant_free(&wq);
  return ok;
}

/* The same step through tile_attention.h (the embedded kernels, picked by
 * the problem: the warp-specialized forward for contiguous BHSD and BSHD,
 * the strided one otherwise): out, lse, dq, dk and dv against the float64
 * reference r, with the direct launches' tolerances. */
static bool api_matches(Gpu *g, const AttnCase *c, const DBuf *b, const int64_t qs[3], const int64_t ks[3],
                        const AttnRefOut *ref) {
  enum { OUT, LSE, Q, K, V, DOUT, DQ, DK, DV, NCMP };
  tile_attention *att;
  if (tile_attention_create(g->rt, &att) != TILE_OK) {
    printf("  tile_attention_create: %s\n", tile_last_error());
    return false;
  }
  tile_attention_problem p = {c->batch, c->heads, c->heads_kv, c->seqlen, c->dim, c->causal, 0,
                              {qs[0], qs[1], qs[2]}, {ks[0], ks[1], ks[2]}};
  static const int mine[] = {OUT, LSE, DQ, DK, DV};
  DBuf r[5], ws;
  memset(r, 0, sizeof r), memset(&ws, 0, sizeof ws);
  bool ok = dbuf_alloc(g, &ws, "workspace", "f32", tile_attention_workspace_bytes(&p) / 4);
  for (int i = 0; i < 5 && ok; i++) {
    const DBuf *like = &b[mine[i]];
    ok = dbuf_alloc(g, &r[i], like->name, i == 1 ? "f32" : "bf16", like->n);
    if (ok) dbuf_poison(&r[i]), ok = dbuf_upload(g, &r[i]);
  }
  if (ok) ok = tile_attention_forward(att, &p, r[0].dev, r[1].dev, b[Q].dev, b[K].dev, b[V].dev, NULL) == TILE_OK &&
               tile_attention_backward(att, &p, r[2].dev, r[3].dev, r[4].dev, b[DOUT].dev, b[Q].dev, b[K].dev,
                                       b[V].dev, r[0].dev, r[1].dev, ws.dev, NULL) == TILE_OK &&
               tile_synchronize(g->rt) == TILE_OK;
  if (!ok) printf("  tile_attention: %s\n", tile_last_error());
  const double *want[5] = {ref->out, ref->lse, ref->dq, ref->dk, ref->dv};
  for (int i = 0; i < 5 && ok; i++) {
    ok = dbuf_download(g, &r[i]);
    double e = 0;
    if (ok && i == 1)
      for (size_t j = 0; j < r[i].n; j++) e = fmax(e, fabs(dbuf_get(&r[i], j) - want[i][j]));
    else if (ok)
      e = error_of(&r[i], want[i]);
    double tol = i == 1 ? ATTN_LSE_TOL : ATTN_BF16_TOL;
    if (ok && !(e <= tol)) {
      printf("  tile_attention: %s error %.3g (limit %.3g)\n", r[i].name, e, tol);
      ok = false;
    }
  }
  for (int i = 0; i < 5; i++) dbuf_free(g, &r[i]);
  dbuf_free(g, &ws);
  tile_attention_destroy(att);
  return ok;
}

/* Head dim 256 has only the warp-specialized forward: that, against the
 * reference. */
static bool run_ws_only(Gpu *g, const AttnCase *c, uint64_t seed) {
  size_t nq = (size_t)c->batch * c->heads * c->seqlen * c->dim, nkv = (size_t)c->batch * c->heads_kv * c->seqlen * c->dim;
  DBuf q, k, v;
  memset(&q, 0, sizeof q), memset(&k, 0, sizeof k), memset(&v, 0, sizeof v);
  Rng rng = {seed};
  bool ok = dbuf_alloc(g, &q, "q", "bf16", nq) && dbuf_alloc(g, &k, "k", "bf16", nkv) && dbuf_alloc(g, &v, "v", "bf16", nkv);
  if (ok) {
    dbuf_fill(&q, &rng, -1, 1), dbuf_fill(&k, &rng, -1, 1), dbuf_fill(&v, &rng, -1, 1);
    ok = dbuf_upload(g, &q) && dbuf_upload(g, &k) && dbuf_upload(g, &v);
  }
  if (ok) {
    int64_t sh = (int64_t)c->seqlen * c->dim;
    AttnRefShape rs = {c->batch, c->heads, c->heads_kv, c->seqlen, c->dim, c->causal,
                       (int64_t)c->heads * sh, sh, c->dim, (int64_t)c->heads_kv * sh, sh, c->dim, 0};
    double *in[3] = {doubles_of(&q), doubles_of(&k), doubles_of(&v)}, *dout = calloc(nq, sizeof(double));
    AttnRefOut r = {calloc(nq, sizeof(double)), calloc((size_t)c->batch * c->heads * c->seqlen, sizeof(double)),
                    calloc(nq, sizeof(double)), calloc(nkv, sizeof(double)), calloc(nkv, sizeof(double))};
    attn_ref_train(&rs, in[0], in[1], in[2], dout, 1.0 / sqrt((double)c->dim), &r);
    ok = ws_forward_matches(g, c, &q, &k, &v, r.out, r.lse);
    free(r.out), free(r.lse), free(r.dq), free(r.dk), free(r.dv), free(dout);
    for (int i = 0; i < 3; i++) free(in[i]);
  }
  dbuf_free(g, &q), dbuf_free(g, &k), dbuf_free(g, &v);
  return ok;
}

static bool run_attention(Gpu *g, const AttnCase *c, uint64_t seed) {
  if (c->dim == 256) return run_ws_only(g, c, seed);
  char dim[8], window[16];
  snprintf(dim, sizeof dim, "%d", c->dim);
  snprintf(window, sizeof window, "%d", c->window);
  const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", c->causal ? "true" : "false", "WINDOW", window, NULL};
  const char *pre_defs[] = {"HEAD_DIM", dim, NULL};
  Variant v[ATTN_KERNELS];
  memset(v, 0, sizeof v);
  bool ok = true;
  for (int i = 0; i < ATTN_KERNELS && ok; i++)
    ok = variant_build_kernel(g, FILE_BWD, kernel_names[i], i == 1 ? pre_defs : defs, &v[i]);
  size_t nq = (size_t)c->batch * c->heads * c->seqlen * c->dim, nkv = (size_t)c->batch * c->heads_kv * c->seqlen * c->dim;
  size_t rows = (size_t)c->batch * c->heads * c->seqlen;
  /* out, lse, q, k, v first (the forward's order), then the rest */
  enum { OUT, LSE, Q, K, V, DOUT, DQ, DK, DV, DELTA, NBUF };
  static const char *const names[NBUF] = {"out", "lse", "q", "k", "v", "dout", "dq", "dk", "dv", "delta"};
  DBuf b[NBUF];
  memset(b, 0, sizeof b);
  for (int i = 0; i < NBUF && ok; i++) {
    size_t n = i == LSE || i == DELTA ? rows : i == K || i == V || i == DK || i == DV ? nkv : nq;
    ok = dbuf_alloc(g, &b[i], names[i], i == LSE || i == DELTA ? "f32" : "bf16", n);
  }
  Rng rng = {seed};
  for (int i = 0; i < NBUF && ok; i++) {
    if (i == Q || i == K || i == V || i == DOUT) dbuf_fill(&b[i], &rng, -1, 1);
    else dbuf_poison(&b[i]);
    ok = dbuf_upload(g, &b[i]);
  }
  /* strides */
  int64_t qsn = c->bshd ? (int64_t)c->heads * c->dim : c->dim, qsh = c->bshd ? c->dim : (int64_t)c->seqlen * c->dim;
  int64_t qsb = (int64_t)c->heads * c->seqlen * c->dim;
  int64_t ksn = c->bshd ? (int64_t)c->heads_kv * c->dim : c->dim, ksh = c->bshd ? c->dim : (int64_t)c->seqlen * c->dim;
  int64_t ksb = (int64_t)c->heads_kv * c->seqlen * c->dim;
  double scale = 1.0 / sqrt((double)c->dim);
  tile_arg sc[10] = {tile_arg_i64(c->seqlen), tile_arg_i64(c->heads), tile_arg_i64(c->heads_kv), tile_arg_f64(scale),
                     tile_arg_i64(qsb),       tile_arg_i64(qsh),     tile_arg_i64(qsn),        tile_arg_i64(ksb),
                     tile_arg_i64(ksh),       tile_arg_i64(ksn)};
  int64_t bh = (int64_t)c->batch * c->heads, bhk = (int64_t)c->batch * c->heads_kv;
#define P(i) tile_arg_ptr(b[i].dev)
  tile_arg fa[15] = {P(OUT), P(LSE), P(Q), P(K), P(V)};
  memcpy(fa + 5, sc, sizeof sc);
  tile_arg pa[8] = {P(DELTA), P(OUT), P(DOUT), sc[0], sc[1], sc[4], sc[5], sc[6]};
  tile_arg ka[18] = {P(DK), P(DV), P(Q), P(K), P(V), P(DOUT), P(LSE), P(DELTA)};
  memcpy(ka + 8, sc, sizeof sc);
  tile_arg qa[17] = {P(DQ), P(Q), P(K), P(V), P(DOUT), P(LSE), P(DELTA)};
  memcpy(qa + 7, sc, sizeof sc);
#undef P
  int64_t fgrid[3] = {0, bh, 1};
  if (ok) {
    fgrid[0] = grid_of(c->seqlen, variant_const(&v[0], "BLOCK_M", 64));
    uint32_t g0[3] = {(uint32_t)fgrid[0], (uint32_t)bh, 1};
    uint32_t g1[3] = {(uint32_t)grid_of(c->seqlen, variant_const(&v[1], "BLOCK_M", 64)), (uint32_t)bh, 1};
    uint32_t g2[3] = {(uint32_t)grid_of(c->seqlen, variant_const(&v[2], "BLOCK_N", 64)), (uint32_t)bhk, 1};
    uint32_t g3[3] = {(uint32_t)grid_of(c->seqlen, variant_const(&v[3], "BLOCK_M", 64)), (uint32_t)bh, 1};
    ok = tile_launch(v[0].kernel, g0, NULL, fa, 15) == TILE_OK && tile_launch(v[1].kernel, g1, NULL, pa, 8) == TILE_OK &&
         tile_launch(v[2].kernel, g2, NULL, ka, 18) == TILE_OK && tile_launch(v[3].kernel, g3, NULL, qa, 17) == TILE_OK &&
         tile_synchronize(g->rt) == TILE_OK;
    if (!ok) printf("  launch failed: %s\n", tile_last_error());
  }
  for (int i = 0; i < NBUF && ok; i++) ok = dbuf_download(g, &b[i]);
  if (ok) {
    AttnRefShape rs = {c->batch, c->heads, c->heads_kv, c->seqlen, c->dim, c->causal, qsb, qsh, qsn, ksb, ksh, ksn,
                       c->window};
    double *in[4] = {doubles_of(&b[Q]), doubles_of(&b[K]), doubles_of(&b[V]), doubles_of(&b[DOUT])};
    AttnRefOut r = {calloc(nq, sizeof(double)), calloc(rows, sizeof(double)), calloc(nq, sizeof(double)),
                    calloc(nkv, sizeof(double)), calloc(nkv, sizeof(double))};
    attn_ref_train(&rs, in[0], in[1], in[2], in[3], (float)scale, &r);
    const struct {
      int buf;
      const double *want;
      double tol;
    } checks[] = {{OUT, r.out, ATTN_BF16_TOL}, {DQ, r.dq, ATTN_BF16_TOL}, {DK, r.dk, ATTN_BF16_TOL},
                  {DV, r.dv, ATTN_BF16_TOL}};
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
      double e = error_of(&b[checks[i].buf], checks[i].want);
      if (!(e <= checks[i].tol)) printf("  %s: relative error %.3g (limit %.3g)\n", names[checks[i].buf], e, checks[i].tol);
      ok = ok && e <= checks[i].tol;
    }
    double lse_err = 0;
    for (size_t i = 0; i < rows; i++) lse_err = fmax(lse_err, fabs(dbuf_get(&b[LSE], i) - r.lse[i]));
    if (!(lse_err <= ATTN_LSE_TOL)) printf("  lse: max abs error %.3g (limit %.3g)\n", lse_err, ATTN_LSE_TOL);
    ok = ok && lse_err <= ATTN_LSE_TOL;
    if (ok) ok = ws_forward_matches(g, c, &b[Q], &b[K], &b[V], r.out, r.lse);
    if (ok) ok = ws_backward_matches(g, c, b, &r);
    if (ok && !c->window) ok = api_matches(g, c, b, (int64_t[3]){qsb, qsh, qsn}, (int64_t[3]){ksb, ksh, ksn}, &r);
    free(r.out), free(r.lse), free(r.dq), free(r.dk), free(r.dv);
    for (int i = 0; i < 4; i++) free(in[i]);
  }
  if (ok && c->with_interp) ok = forward_matches_interpreter(&v[0], b, fa, 15, fgrid);
  for (int i = 0; i < NBUF; i++) dbuf_free(g, &b[i]);
  for (int i = 0; i < ATTN_KERNELS; i++) variant_free(&v[i]);
  return ok;
}

/* ---- flash_attention_varlen.tile ---- */

#define VARLEN_BATCH 8

typedef struct VarlenCase {
  const char *name;
  int heads, heads_kv, dim;
  bool causal;
  int len_q[VARLEN_BATCH], len_k[VARLEN_BATCH];
} VarlenCase;

static const VarlenCase varlen_cases[] = {
    {"attention varlen d64 full lengths 1-3000 gqa2", 4, 2, 64, false, {1, 17, 300, 1000, 3000, 129, 64, 2049},
     {1, 17, 300, 1000, 3000, 129, 64, 2049}},
    {"attention varlen d128 causal unequal lengths", 2, 2, 128, true, {5, 200, 64, 1, 777, 1500, 33, 256},
     {40, 150, 64, 9, 777, 1200, 33, 300}},
};

/* With ws, flash_attention_ws.tile with VARLEN (descriptors over the rows
 * of tokens) on the same problem. */
static bool run_varlen(Gpu *g, const VarlenCase *c, bool ws, uint64_t seed) {
  char dim[8];
  snprintf(dim, sizeof dim, "%d", c->dim);
  const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", c->causal ? "true" : "false", "VARLEN", "true", NULL};
  if (!ws) defs[4] = NULL;
  Variant w;
  if (!variant_build(g, ws ? "lang/std/flash_attention_ws.tile" : "lang/std/flash_attention_varlen.tile", defs, &w))
    return false;
  int cq[VARLEN_BATCH + 1] = {0}, ck[VARLEN_BATCH + 1] = {0}, max_q = 0;
  for (int b = 0; b < VARLEN_BATCH; b++) {
    cq[b + 1] = cq[b] + c->len_q[b], ck[b + 1] = ck[b] + c->len_k[b];
    if (c->len_q[b] > max_q) max_q = c->len_q[b];
  }
  enum { OUT, LSE, Q, K, V, CQ, CK, NB };
  DBuf b[NB];
  memset(b, 0, sizeof b);
  size_t nq = (size_t)cq[VARLEN_BATCH] * c->heads * c->dim, nk = (size_t)ck[VARLEN_BATCH] * c->heads_kv * c->dim;
  bool ok = dbuf_alloc(g, &b[OUT], "out", "bf16", nq) && dbuf_alloc(g, &b[LSE], "lse", "f32", nq / c->dim) &&
            dbuf_alloc(g, &b[Q], "q", "bf16", nq) && dbuf_alloc(g, &b[K], "k", "bf16", nk) &&
            dbuf_alloc(g, &b[V], "v", "bf16", nk) && dbuf_alloc(g, &b[CQ], "cu_q", "i32", VARLEN_BATCH + 1) &&
            dbuf_alloc(g, &b[CK], "cu_k", "i32", VARLEN_BATCH + 1);
  Rng rng = {seed};
  for (int i = 0; ok && i <= VARLEN_BATCH; i++) dbuf_set(&b[CQ], i, cq[i]), dbuf_set(&b[CK], i, ck[i]);
  for (int i = 0; ok && i < NB; i++) {
    if (i == Q || i == K || i == V) dbuf_fill(&b[i], &rng, -1, 1);
    else if (i == OUT || i == LSE) dbuf_poison(&b[i]);
    ok = dbuf_upload(g, &b[i]);
  }
  double scale = 1.0 / sqrt((double)c->dim);
  tile_arg a[14] = {tile_arg_ptr(b[OUT].dev), tile_arg_ptr(b[LSE].dev), tile_arg_ptr(b[Q].dev), tile_arg_ptr(b[K].dev),
                    tile_arg_ptr(b[V].dev),   tile_arg_ptr(b[CQ].dev),  tile_arg_ptr(b[CK].dev), tile_arg_i64(c->heads),
                    tile_arg_i64(c->heads_kv), tile_arg_f64(scale), tile_arg_i64(c->heads * c->dim),
                    tile_arg_i64(c->dim), tile_arg_i64(c->heads_kv * c->dim), tile_arg_i64(c->dim)};
  int64_t qc = (int64_t)c->heads * c->dim, kc = (int64_t)c->heads_kv * c->dim;
  tile_tensor tq = {b[Q].dev, 2, {cq[VARLEN_BATCH], qc}, {qc, 1}}, tk = {b[K].dev, 2, {ck[VARLEN_BATCH], kc}, {kc, 1}};
  tile_tensor tv = {b[V].dev, 2, {ck[VARLEN_BATCH], kc}, {kc, 1}};
  tile_arg wa[11] = {tile_arg_ptr(b[OUT].dev), tile_arg_ptr(b[LSE].dev), tile_arg_tensor(&tq),
                     tile_arg_tensor(&tk),     tile_arg_tensor(&tv),     tile_arg_ptr(b[CQ].dev),
                     tile_arg_ptr(b[CK].dev),  tile_arg_i64(0),          tile_arg_i64(c->heads),
                     tile_arg_i64(c->heads_kv), tile_arg_f64(scale)};
  uint32_t grid[3] = {(uint32_t)grid_of(max_q, variant_const(&w, "BLOCK_M", 128)), (uint32_t)(VARLEN_BATCH * c->heads), 1};
  if (ok && (tile_launch(w.kernel, grid, NULL, ws ? wa : a, ws ? 11 : 14) != TILE_OK ||
             tile_synchronize(g->rt) != TILE_OK)) {
    printf("  launch failed: %s\n", tile_last_error());
    ok = false;
  }
  ok = ok && dbuf_download(g, &b[OUT]) && dbuf_download(g, &b[LSE]);
  if (ok) {
    double *in[3] = {doubles_of(&b[Q]), doubles_of(&b[K]), doubles_of(&b[V])};
    double *want = malloc(sizeof(double) * nq), *want_lse = malloc(sizeof(double) * (nq / c->dim));
    attn_ref_varlen(VARLEN_BATCH, c->heads, c->heads_kv, c->dim, c->causal, cq, ck, in[0], in[1], in[2], (float)scale,
                    want, want_lse);
    double e = error_of(&b[OUT], want), lse_err = 0;
    for (size_t i = 0; i < nq / c->dim; i++)
      if (isfinite(want_lse[i])) lse_err = fmax(lse_err, fabs(dbuf_get(&b[LSE], i) - want_lse[i]));
    if (!(e <= ATTN_BF16_TOL)) printf("  out: relative error %.3g\n", e);
    if (!(lse_err <= ATTN_LSE_TOL)) printf("  lse: max abs error %.3g\n", lse_err);
    ok = e <= ATTN_BF16_TOL && lse_err <= ATTN_LSE_TOL;
    free(want), free(want_lse);
    for (int i = 0; i < 3; i++) free(in[i]);
  }
  for (int i = 0; i < NB; i++) dbuf_free(g, &b[i]);
  variant_free(&w);
  return ok;
}

/* The fp8 forward through tile_attention.h (tile_attention_forward_fp8)
 * on e4m3 inputs with per-tensor scales, out poisoned, against the
 * float64 reference on the dequantized values: below the spec's fp8 bound;
 * then flash_attention_ws_fp8.tile on the same inputs. */
#define ATTN_FP8_TOL 5e-2
static const AttnCase fp8_cases[] = {
    {"attention fp8 forward (tile_attention.h, flash_attention_ws_fp8) d64 full n300 h2", 1, 2, 2, 300, 64, false, false, false, 0},
    {"attention fp8 forward (tile_attention.h, flash_attention_ws_fp8) d128 causal n257 b2 h3 bshd", 2, 3, 3, 257, 128, true, true, false, 0},
    {"attention fp8 forward (flash_attention_ws_fp8) gqa4 d64 causal n333 b2 h8", 2, 8, 2, 333, 64, true, false, false, 0},
    {"attention fp8 forward (flash_attention_ws_fp8) gqa8 d128 full n200 h8 bshd", 1, 8, 1, 200, 128, false, true, false, 0},
    {"attention fp8 forward (flash_attention_ws_fp8) gqa2 d128 causal n1 b3 h4", 3, 4, 2, 1, 128, true, false, false, 0},
};

/* V^T rows of fp8 padded to a TMA stride (16 bytes). */
#define VT_ROW_ALIGN 16

/* flash_attention_ws_fp8.tile on the same inputs (q, k, v in b[0..2],
 * with the strides of the case), V transposed here into each head's
 * V^T: out and lse, poisoned first, against the reference r. */
static bool ws_fp8_matches(Gpu *g, const AttnCase *c, const DBuf *b, const tile_attention_fp8_scales *sc,
                           const AttnRefOut *r, const int64_t *kvs, bool turns, bool p_regs) {
  char dim[8];
  snprintf(dim, sizeof dim, "%d", c->dim);
  const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", c->causal ? "true" : "false", "BSHD", c->bshd ? "true" : "false",
                        "TURNS", turns ? "true" : "false", "P_IN_REGISTERS", p_regs ? "true" : "false", NULL};
  Variant w;
  if (!variant_build(g, "lang/std/flash_attention_ws_fp8.tile", defs, &w)) return false;
  int64_t vt_stride = grid_of(c->seqlen, VT_ROW_ALIGN) * VT_ROW_ALIGN;
  /* with P_IN_REGISTERS the tokens of each 16 in k order, zeros past seqlen */
  int64_t vt_cols = p_regs ? vt_stride : c->seqlen;
  int hk = c->heads_kv;
  size_t vt_rows = (size_t)c->batch * hk * c->dim, rows = (size_t)c->batch * c->heads * c->seqlen;
  DBuf vt, out, lse;
  memset(&vt, 0, sizeof vt), memset(&out, 0, sizeof out), memset(&lse, 0, sizeof lse);
  bool ok = dbuf_alloc(g, &vt, "vt", "f8e4m3", vt_rows * (size_t)vt_stride) &&
            dbuf_alloc(g, &out, "out (ws fp8)", "bf16", b[0].n) && dbuf_alloc(g, &lse, "lse (ws fp8)", "f32", rows);
  if (ok) {
    dbuf_poison(&vt), dbuf_poison(&out), dbuf_poison(&lse);
    for (int bb = 0; bb < c->batch; bb++)
      for (int h = 0; h < hk; h++)
        for (int t = 0; t < vt_cols; t++) {
          int tok = attn_vt_token(t, p_regs);
          for (int j = 0; j < c->dim; j++)
            dbuf_set(&vt, (((size_t)bb * hk + h) * c->dim + j) * (size_t)vt_stride + (size_t)t,
                     tok < c->seqlen ? dbuf_get(&b[2], (size_t)(bb * kvs[0] + h * kvs[1] + tok * kvs[2] + j)) : 0.0);
        }
    ok = dbuf_upload(g, &vt) && dbuf_upload(g, &out) && dbuf_upload(g, &lse);
  }
  int64_t qr = (int64_t)rows, qc = c->dim, kr = (int64_t)c->batch * hk * c->seqlen, kc = c->dim;
  if (c->bshd) qr = kr = (int64_t)c->batch * c->seqlen, qc = (int64_t)c->heads * c->dim, kc = (int64_t)hk * c->dim;
  tile_tensor tq = {b[0].dev, 2, {qr, qc}, {qc, 1}}, tk = {b[1].dev, 2, {kr, kc}, {kc, 1}};
  tile_tensor tv = {vt.dev, 2, {(int64_t)vt_rows, vt_cols}, {vt_stride, 1}};
  tile_arg a[12] = {tile_arg_ptr(out.dev),          tile_arg_ptr(lse.dev),         tile_arg_tensor(&tq),
                    tile_arg_tensor(&tk),           tile_arg_tensor(&tv),          tile_arg_i64(c->seqlen),
                    tile_arg_i64(c->heads),         tile_arg_i64(hk),              tile_arg_f64(1.0 / sqrt((double)c->dim)),
                    tile_arg_f64(sc->descale_q),    tile_arg_f64(sc->descale_k),   tile_arg_f64(sc->descale_v)};
  uint32_t grid[3] = {(uint32_t)grid_of(c->seqlen, variant_const(&w, "BLOCK_M", 128)), (uint32_t)(c->batch * c->heads), 1};
  if (ok && (tile_launch(w.kernel, grid, NULL, a, 11) != TILE_OK || tile_synchronize(g->rt) != TILE_OK)) {
    printf("  flash_attention_ws_fp8 launch failed: %s\n", tile_last_error());
    ok = false;
  }
  if (ok) ok = dbuf_download(g, &out) && dbuf_download(g, &lse);
  if (ok) {
    double e = error_of(&out, r->out), e_lse = 0;
    for (size_t i = 0; i < rows; i++) e_lse = fmax(e_lse, fabs(dbuf_get(&lse, i) - r->lse[i]));
    const char *form = p_regs ? (turns ? " (P in registers, turns)" : " (P in registers)") : turns ? " (turns)" : "";
    if (!(e <= ATTN_FP8_TOL)) printf("  flash_attention_ws_fp8%s out: relative error %.3g\n", form, e);
    if (!(e_lse <= ATTN_LSE_TOL)) printf("  flash_attention_ws_fp8%s lse: max abs error %.3g\n", form, e_lse);
    ok = e <= ATTN_FP8_TOL && e_lse <= ATTN_LSE_TOL;
  }
  dbuf_free(g, &vt), dbuf_free(g, &out), dbuf_free(g, &lse);
  variant_free(&w);
  return ok;
}

/* tile_attention_forward_fp8_lse on the same inputs (V transposed by
 * its attention_vt kernel into a poisoned workspace): out and lse,
 * poisoned first, against the reference r. */
static bool fp8_lse_api_matches(Gpu *g, tile_attention *att, const tile_attention_problem *p, const DBuf *b,
                                const tile_attention_fp8_scales *sc, const AttnRefOut *r) {
  size_t rows = (size_t)p->batch * p->heads * p->seqlen, ws_bytes = tile_attention_fp8_workspace_bytes(p);
  DBuf out, lse, ws;
  memset(&out, 0, sizeof out), memset(&lse, 0, sizeof lse), memset(&ws, 0, sizeof ws);
  bool ok = dbuf_alloc(g, &out, "out (fp8 lse API)", "bf16", b[0].n) && dbuf_alloc(g, &lse, "lse (fp8 lse API)", "f32", rows) &&
            dbuf_alloc(g, &ws, "workspace (fp8 lse API)", "f8e4m3", ws_bytes);
  if (ok) {
    dbuf_poison(&out), dbuf_poison(&lse), dbuf_poison(&ws);
    ok = dbuf_upload(g, &out) && dbuf_upload(g, &lse) && dbuf_upload(g, &ws);
  }
  ok = ok && tile_attention_forward_fp8_lse(att, p, out.dev, lse.dev, b[0].dev, b[1].dev, b[2].dev, ws.dev, sc, NULL) == TILE_OK &&
       tile_synchronize(g->rt) == TILE_OK && dbuf_download(g, &out) && dbuf_download(g, &lse);
  if (!ok) printf("  tile_attention_forward_fp8_lse: %s\n", tile_last_error());
  if (ok) {
    double e = error_of(&out, r->out), e_lse = 0;
    for (size_t i = 0; i < rows; i++) e_lse = fmax(e_lse, fabs(dbuf_get(&lse, i) - r->lse[i]));
    if (!(e <= ATTN_FP8_TOL)) printf("  tile_attention_forward_fp8_lse out: relative error %.3g\n", e);
    if (!(e_lse <= ATTN_LSE_TOL)) printf("  tile_attention_forward_fp8_lse lse: max abs error %.3g\n", e_lse);
    ok = e <= ATTN_FP8_TOL && e_lse <= ATTN_LSE_TOL;
  }
  dbuf_free(g, &out), dbuf_free(g, &lse), dbuf_free(g, &ws);
  return ok;
}

static bool run_fp8_api(Gpu *g, const AttnCase *c, uint64_t seed) {
  int hk = c->heads_kv;
  size_t n = (size_t)c->batch * c->heads * c->seqlen * c->dim, nkv = (size_t)c->batch * hk * c->seqlen * c->dim;
  int64_t sn = c->bshd ? (int64_t)c->heads * c->dim : c->dim, sh = c->bshd ? c->dim : (int64_t)c->seqlen * c->dim;
  int64_t sb = (int64_t)c->heads * c->seqlen * c->dim;
  /* k and v: [batch, heads_kv, seqlen, dim] in the same layout */
  const int64_t kvs[3] = {(int64_t)hk * c->seqlen * c->dim, c->bshd ? c->dim : (int64_t)c->seqlen * c->dim,
                          c->bshd ? (int64_t)hk * c->dim : c->dim};
  const tile_attention_fp8_scales sc = {0.005f, 0.0075f, 0.0025f};
  Rng rng = {seed};
  DBuf b[4];
  memset(b, 0, sizeof b);
  static const char *const names[4] = {"q", "k", "v", "out"};
  bool ok = true;
  for (int i = 0; i < 4 && ok; i++) {
    ok = dbuf_alloc(g, &b[i], names[i], i == 3 ? "bf16" : "f8e4m3", i == 1 || i == 2 ? nkv : n);
    if (ok && i < 3) dbuf_fill(&b[i], &rng, -200, 200);
    if (ok && i == 3) dbuf_poison(&b[i]);
    ok = ok && dbuf_upload(g, &b[i]);
  }
  tile_attention *att = NULL;
  tile_attention_problem p = {c->batch, c->heads, hk, c->seqlen, c->dim, c->causal, 0, {sb, sh, sn},
                              {kvs[0], kvs[1], kvs[2]}};
  /* flash_attention_fp8.tile has no grouped-query heads */
  bool old = hk == c->heads;
  ok = ok && tile_attention_create(g->rt, &att) == TILE_OK;
  ok = ok && (!old || (tile_attention_forward_fp8(att, &p, b[3].dev, b[0].dev, b[1].dev, b[2].dev, &sc, NULL) == TILE_OK &&
                       tile_synchronize(g->rt) == TILE_OK && dbuf_download(g, &b[3])));
  if (!ok) printf("  tile_attention_forward_fp8: %s\n", tile_last_error());
  if (ok) {
    const float descale[3] = {sc.descale_q, sc.descale_k, sc.descale_v};
    double *x[3], *dout = malloc(sizeof(double) * n);
    for (int i = 0; i < 3; i++) {
      x[i] = malloc(sizeof(double) * b[i].n);
      for (size_t j = 0; x[i] && j < b[i].n; j++) x[i][j] = dbuf_get(&b[i], j) * descale[i];
    }
    for (size_t j = 0; dout && j < n; j++) dout[j] = rng_uniform(&rng, -1, 1);
    AttnRefShape shape = {c->batch, c->heads, hk, c->seqlen, c->dim, c->causal, sb, sh, sn, kvs[0], kvs[1], kvs[2], 0};
    AttnRefOut r = {malloc(sizeof(double) * n), malloc(sizeof(double) * (size_t)c->batch * c->heads * c->seqlen),
                    calloc(n, sizeof(double)), calloc(nkv, sizeof(double)), calloc(nkv, sizeof(double))};
    attn_ref_train(&shape, x[0], x[1], x[2], dout, 1.0 / sqrt((double)c->dim), &r);
    double e = old ? error_of(&b[3], r.out) : 0;
    if (!(e <= ATTN_FP8_TOL)) {
      printf("  tile_attention_forward_fp8: out error %.3g (limit %.3g)\n", e, ATTN_FP8_TOL);
      ok = false;
    }
    for (int form = 0; form < 4; form++) ok = ws_fp8_matches(g, c, b, &sc, &r, kvs, form & 1, form >> 1) && ok;
    ok = fp8_lse_api_matches(g, att, &p, b, &sc, &r) && ok;
    for (int i = 0; i < 3; i++) free(x[i]);
    free(dout), free(r.out), free(r.lse), free(r.dq), free(r.dk), free(r.dv);
  }
  tile_attention_destroy(att);
  for (int i = 0; i < 4; i++) dbuf_free(g, &b[i]);
  return ok;
}

int gpu_attention_tests(Gpu *g, const char *only) {
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only && !strstr(cases[i].name, only)) continue;
    double t0 = now_ms();
    gpu_report(g, cases[i].name, run_attention(g, &cases[i], 7000 + i), t0, &failed);
  }
  for (int ws = 0; ws < 2; ws++)
    for (size_t i = 0; i < sizeof varlen_cases / sizeof varlen_cases[0]; i++) {
      char name[128];
      snprintf(name, sizeof name, "%s%s", varlen_cases[i].name, ws ? " (flash_attention_ws)" : "");
      if (only && !strstr(name, only)) continue;
      double t0 = now_ms();
      gpu_report(g, name, run_varlen(g, &varlen_cases[i], ws, 7100 + i), t0, &failed);
    }
  for (size_t i = 0; i < sizeof fp8_cases / sizeof fp8_cases[0]; i++) {
    if (only && !strstr(fp8_cases[i].name, only)) continue;
    double t0 = now_ms();
    gpu_report(g, fp8_cases[i].name, run_fp8_api(g, &fp8_cases[i], 7200 + i), t0, &failed);
  }
  return failed;
}
