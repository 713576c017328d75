/* test_attention_bwd.c - lang/std/flash_attention_bwd.tile in the
 * interpreter: the training forward (out and the log-sum-exp) and the
 * backward (delta, dk/dv, dq; and flash_attention_bwd_ws.tile's
 * warp-specialized dk/dv and dq) against a float64 reference computed from
 * the same rounded inputs, at sequence lengths that are not multiples of
 * the blocks, full and causal, head dims 64 and 128, grouped-query and
 * multi-query heads, BHSD and BSHD layouts. Outputs are poisoned first. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ref.h"
#include "harness.h"

/* bf16 inputs and gradients: relative error below 1e-2 (the spec's bound
 * for bf16); with f32 tensors the kernels compute in f32 throughout. */
#define BF16_TOL 1e-2
#define F32_TOL 1e-4
/* lse is compared absolutely (a log2 of a sum, about 1-10 in size). */
#define LSE_TOL 1e-3
#define FILE_BWD "lang/std/flash_attention_bwd.tile"
#define FILE_ATOMIC_DQ "tests/kernels/attention_bwd_atomic_dq.tile"
#define FILE_BWD_WS "lang/std/flash_attention_bwd_ws.tile"
#define MAX_DEFS 16


typedef struct Shape {
  int batch, heads, heads_kv, seqlen, dim;
  bool causal, bshd;
  const char *type; /* "bf16" or "f32" */
  int window;       /* WINDOW: 0 none */
} Shape;

/* Strides (in elements) of a [batch, h, seqlen, dim] tensor. */
typedef struct Strides {
  int64_t b, h, n;
} Strides;

static Strides strides_of(Shape s, int h) {
  if (s.bshd) return (Strides){(int64_t)s.seqlen * h * s.dim, s.dim, (int64_t)h * s.dim};
  return (Strides){(int64_t)h * s.seqlen * s.dim, (int64_t)s.seqlen * s.dim, s.dim};
}

/* The buffer's elements as doubles (malloc'd). */
static double *doubles_of(const HBuf *b) {
  double *d = malloc(sizeof(double) * b->n);
  for (size_t i = 0; i < b->n; i++) d[i] = hbuf_get(b, i);
  return d;
}

/* The defines of every kernel of the file but the preprocessing for s. */
static void defines_of(Shape s, char *dim, char *window, const char **defs) {
  snprintf(dim, 8, "%d", s.dim);
  snprintf(window, 16, "%d", s.window);
  const char *d[] = {"T", s.type, "HEAD_DIM", dim, "CAUSAL", s.causal ? "true" : "false", "WINDOW", window, NULL};
  memcpy(defs, d, sizeof d);
}

static int64_t block_of(tc_compilation *c, const char *name) {
  int64_t v = 0;
  cr_assert(tc_kernel_const_int(c, 0, name, &v), "%s", name);
  return v;
}

static void check_attention(Shape s, uint64_t seed) {
  char dim[8], window[16];
  const char *defs[MAX_DEFS];
  defines_of(s, dim, window, defs);
  const char *const *d = defs;
  /* the preprocessing kernel has no CAUSAL */
  const char *pre_defs[] = {"T", s.type, "HEAD_DIM", dim, NULL};
  tc_compilation *fwd = harness_compile(FILE_BWD, "attention_fwd_lse", d);
  tc_compilation *pre = harness_compile(FILE_BWD, "attention_bwd_preprocess", pre_defs);
  tc_compilation *dkdv = harness_compile(FILE_BWD, "attention_bwd_dkdv", d);
  tc_compilation *dqk = harness_compile(FILE_BWD, "attention_bwd_dq", d);
  Rng rng = {seed};
  size_t nq = (size_t)s.batch * s.heads * s.seqlen * s.dim, nkv = (size_t)s.batch * s.heads_kv * s.seqlen * s.dim;
  size_t rows = (size_t)s.batch * s.heads * s.seqlen;
  HBuf q = hbuf_new(s.type, nq, "q"), k = hbuf_new(s.type, nkv, "k"), v = hbuf_new(s.type, nkv, "v");
  HBuf dout = hbuf_new(s.type, nq, "dout"), out = hbuf_new(s.type, nq, "out"), dq = hbuf_new(s.type, nq, "dq");
  HBuf dk = hbuf_new(s.type, nkv, "dk"), dv = hbuf_new(s.type, nkv, "dv");
  HBuf lse = hbuf_new("f32", rows, "lse"), delta = hbuf_new("f32", rows, "delta");
  hbuf_fill_uniform(&q, &rng, -1, 1), hbuf_fill_uniform(&k, &rng, -1, 1), hbuf_fill_uniform(&v, &rng, -1, 1);
  hbuf_fill_uniform(&dout, &rng, -1, 1);
  HBuf *outs[] = {&out, &dq, &dk, &dv, &lse, &delta};
  for (int i = 0; i < 6; i++) hbuf_poison(outs[i]);
  Strides sq = strides_of(s, s.heads), skv = strides_of(s, s.heads_kv);
  double scale = 1.0 / sqrt((double)s.dim);
  tc_arg sc[9] = {{.i = s.seqlen}, {.i = s.heads}, {.i = s.heads_kv}, {.f = (float)scale}, {.i = sq.b},
                  {.i = sq.h},     {.i = sq.n},    {.i = skv.b},       {.i = skv.h}};
  tc_arg last = {.i = skv.n};
  int64_t bh = (int64_t)s.batch * s.heads, bhk = (int64_t)s.batch * s.heads_kv;

  tc_arg fa[15] = {{.p = out.data}, {.p = lse.data}, {.p = q.data}, {.p = k.data}, {.p = v.data}};
  memcpy(fa + 5, sc, sizeof sc), fa[14] = last;
  const HBuf *fb[] = {&out, &lse, &q, &k, &v};
  harness_run(fwd, (int64_t[3]){harness_cdiv(s.seqlen, block_of(fwd, "BLOCK_M")), bh, 1}, fa, 15, fb, 5);

  tc_arg pa[8] = {{.p = delta.data}, {.p = out.data}, {.p = dout.data}, {.i = s.seqlen}, {.i = s.heads},
                  {.i = sq.b},       {.i = sq.h},     {.i = sq.n}};
  const HBuf *pb[] = {&delta, &out, &dout};
  harness_run(pre, (int64_t[3]){harness_cdiv(s.seqlen, block_of(pre, "BLOCK_M")), bh, 1}, pa, 8, pb, 3);

  tc_arg ka[18] = {{.p = dk.data}, {.p = dv.data}, {.p = q.data}, {.p = k.data}, {.p = v.data}, {.p = dout.data},
                   {.p = lse.data}, {.p = delta.data}};
  memcpy(ka + 8, sc, sizeof sc), ka[17] = last;
  const HBuf *kb[] = {&dk, &dv, &q, &k, &v, &dout, &lse, &delta};
  harness_run(dkdv, (int64_t[3]){harness_cdiv(s.seqlen, block_of(dkdv, "BLOCK_N")), bhk, 1}, ka, 18, kb, 8);

  tc_arg qa[17] = {{.p = dq.data}, {.p = q.data}, {.p = k.data}, {.p = v.data}, {.p = dout.data},
                   {.p = lse.data}, {.p = delta.data}};
  memcpy(qa + 7, sc, sizeof sc), qa[16] = last;
  const HBuf *qb[] = {&dq, &q, &k, &v, &dout, &lse, &delta};
  harness_run(dqk, (int64_t[3]){harness_cdiv(s.seqlen, block_of(dqk, "BLOCK_M")), bh, 1}, qa, 17, qb, 7);

  /* the experiment: dq accumulated by the dk/dv kernel */
  tc_compilation *fz = harness_compile(FILE_ATOMIC_DQ, "attention_bwd_dkdv_dq", d);
  tc_compilation *cv = harness_compile(FILE_ATOMIC_DQ, "attention_dq_convert", (const char *[]){"T", s.type, NULL});
  HBuf acc = hbuf_new("f32", nq, "dq_acc"), dq2 = hbuf_new(s.type, nq, "dq2");
  HBuf dk2 = hbuf_new(s.type, nkv, "dk2"), dv2 = hbuf_new(s.type, nkv, "dv2");
  memset(acc.data, 0, acc.n * acc.elem_bytes);
  hbuf_poison(&dq2), hbuf_poison(&dk2), hbuf_poison(&dv2);
  tc_arg za[19] = {{.p = acc.data}, {.p = dk2.data}, {.p = dv2.data}};
  memcpy(za + 3, ka + 2, 16 * sizeof(tc_arg));
  const HBuf *zb[] = {&acc, &dk2, &dv2, &q, &k, &v, &dout, &lse, &delta};
  harness_run(fz, (int64_t[3]){harness_cdiv(s.seqlen, block_of(fz, "BLOCK_N")), bhk, 1}, za, 19, zb, 9);
  tc_arg ca[4] = {{.p = dq2.data}, {.p = acc.data}, {.i = (int64_t)nq}, {.f = (float)scale}};
  const HBuf *cb[] = {&dq2, &acc};
  harness_run(cv, (int64_t[3]){harness_cdiv((int64_t)nq, block_of(cv, "BLOCK")), 1, 1}, ca, 4, cb, 2);

  /* flash_attention_bwd_ws.tile: dk/dv and dq warp-specialized over TMA
   * rings, the descriptors over rows of heads (BHSD) or of tokens (BSHD) */
  HBuf dk3 = hbuf_new(s.type, nkv, "dk3"), dv3 = hbuf_new(s.type, nkv, "dv3"), dq3 = hbuf_new(s.type, nq, "dq3");
  HBuf dq4 = hbuf_new(s.type, nq, "dq4"); /* dq with the consumer warpgroups taking turns */
  hbuf_poison(&dk3), hbuf_poison(&dv3), hbuf_poison(&dq3), hbuf_poison(&dq4);
  {
    const char *wd[] = {"T",      s.type, "HEAD_DIM", dim, "CAUSAL", s.causal ? "true" : "false",
                        "WINDOW", window, "BSHD",     s.bshd ? "true" : "false", NULL};
    tc_compilation *wk = harness_compile(FILE_BWD_WS, "attention_bwd_dkdv_ws", wd);
    int64_t qr = (int64_t)s.batch * s.heads * s.seqlen, kr = (int64_t)s.batch * s.heads_kv * s.seqlen;
    int64_t qc = s.dim, kc = s.dim;
    if (s.bshd) qr = kr = (int64_t)s.batch * s.seqlen, qc = (int64_t)s.heads * s.dim, kc = (int64_t)s.heads_kv * s.dim;
    tc_arg wa[12] = {{.p = dk3.data},
                     {.p = dv3.data},
                     {.p = q.data, .shape = {qr, qc}, .strides = {qc, 1}},
                     {.p = k.data, .shape = {kr, kc}, .strides = {kc, 1}},
                     {.p = v.data, .shape = {kr, kc}, .strides = {kc, 1}},
                     {.p = dout.data, .shape = {qr, qc}, .strides = {qc, 1}},
                     {.p = lse.data},
                     {.p = delta.data},
                     {.i = s.seqlen},
                     {.i = s.heads},
                     {.i = s.heads_kv},
                     {.f = (float)scale}};
    const HBuf *wb[] = {&dk3, &dv3, &q, &k, &v, &dout, &lse, &delta};
    harness_run(wk, (int64_t[3]){harness_cdiv(s.seqlen, block_of(wk, "BLOCK_N")), bhk, 1}, wa, 12, wb, 8);
    tc_free(wk);
    tc_compilation *wq = harness_compile(FILE_BWD_WS, "attention_bwd_dq_ws", wd);
    tc_arg qa3[11] = {{.p = dq3.data}};
    memcpy(qa3 + 1, wa + 2, 10 * sizeof(tc_arg));
    const HBuf *qb3[] = {&dq3, &q, &k, &v, &dout, &lse, &delta};
    harness_run(wq, (int64_t[3]){harness_cdiv(s.seqlen, block_of(wq, "BLOCK_M")), bh, 1}, qa3, 11, qb3, 7);
    tc_free(wq);
    const char *td[] = {"T",    s.type, "HEAD_DIM", dim,    "CAUSAL", s.causal ? "true" : "false", "WINDOW", window,
                        "BSHD", s.bshd ? "true" : "false", "TURNS", "true", NULL};
    tc_compilation *wt = harness_compile(FILE_BWD_WS, "attention_bwd_dq_ws", td);
    qa3[0].p = dq4.data, qb3[0] = &dq4;
    harness_run(wt, (int64_t[3]){harness_cdiv(s.seqlen, block_of(wt, "BLOCK_M")), bh, 1}, qa3, 11, qb3, 7);
    tc_free(wt);
  }

  AttnRefShape rs = {s.batch, s.heads, s.heads_kv, s.seqlen, s.dim, s.causal, sq.b, sq.h, sq.n, skv.b, skv.h, skv.n,
                     s.window};
  double *in[4] = {doubles_of(&q), doubles_of(&k), doubles_of(&v), doubles_of(&dout)};
  AttnRefOut r = {calloc(nq, sizeof(double)), calloc(rows, sizeof(double)), calloc(nq, sizeof(double)),
                  calloc(nkv, sizeof(double)), calloc(nkv, sizeof(double))};
  attn_ref_train(&rs, in[0], in[1], in[2], in[3], (float)scale, &r);
  double tol = strcmp(s.type, "f32") ? BF16_TOL : F32_TOL;
  char what[96];
  snprintf(what, sizeof what, "b%d h%d/%d n%d d%d %s%s %s window %d", s.batch, s.heads, s.heads_kv, s.seqlen, s.dim,
           s.causal ? "causal" : "full", s.bshd ? " bshd" : "", s.type, s.window);
  double e_out = rel_error(&out, r.out, nq), e_dq = rel_error(&dq, r.dq, nq);
  double e_dk = rel_error(&dk, r.dk, nkv), e_dv = rel_error(&dv, r.dv, nkv);
  cr_expect_lt(e_out, tol, "%s: out rel error %g", what, e_out);
  cr_expect_lt(e_dq, tol, "%s: dq rel error %g", what, e_dq);
  cr_expect_lt(e_dk, tol, "%s: dk rel error %g", what, e_dk);
  cr_expect_lt(e_dv, tol, "%s: dv rel error %g", what, e_dv);
  double e_dq2 = rel_error(&dq2, r.dq, nq), e_dk2 = rel_error(&dk2, r.dk, nkv), e_dv2 = rel_error(&dv2, r.dv, nkv);
  cr_expect_lt(e_dq2, tol, "%s: dq rel error %g (atomic dq)", what, e_dq2);
  cr_expect_lt(e_dk2, tol, "%s: dk rel error %g (atomic dq)", what, e_dk2);
  cr_expect_lt(e_dv2, tol, "%s: dv rel error %g (atomic dq)", what, e_dv2);
  double e_dk3 = rel_error(&dk3, r.dk, nkv), e_dv3 = rel_error(&dv3, r.dv, nkv), e_dq3 = rel_error(&dq3, r.dq, nq);
  double e_dq4 = rel_error(&dq4, r.dq, nq);
  cr_expect_lt(e_dk3, tol, "%s: dk rel error %g (warp-specialized)", what, e_dk3);
  cr_expect_lt(e_dv3, tol, "%s: dv rel error %g (warp-specialized)", what, e_dv3);
  cr_expect_lt(e_dq3, tol, "%s: dq rel error %g (warp-specialized)", what, e_dq3);
  cr_expect_lt(e_dq4, tol, "%s: dq rel error %g (warp-specialized, turns)", what, e_dq4);
  double e_lse = 0;
  for (size_t i = 0; i < rows; i++) e_lse = fmax(e_lse, fabs(hbuf_get(&lse, i) - r.lse[i]));
  cr_expect_lt(e_lse, LSE_TOL, "%s: lse max abs error %g", what, e_lse);
  free(r.out), free(r.lse), free(r.dq), free(r.dk), free(r.dv);
  for (int i = 0; i < 4; i++) free(in[i]);
  HBuf *all[] = {&q, &k, &v, &dout, &out, &dq, &dk, &dv, &lse, &delta};
  for (int i = 0; i < 10; i++) hbuf_free(all[i]);
  HBuf *exp_bufs[] = {&acc, &dq2, &dk2, &dv2, &dk3, &dv3, &dq3, &dq4};
  for (int i = 0; i < 8; i++) hbuf_free(exp_bufs[i]);
  tc_free(fwd), tc_free(pre), tc_free(dkdv), tc_free(dqk), tc_free(fz), tc_free(cv);
}

Test(attention_bwd, d64_full_odd_length_f32) { check_attention((Shape){1, 2, 2, 70, 64, false, false, "f32", 0}, 51); }
Test(attention_bwd, d64_causal_odd_length_bf16) {
  check_attention((Shape){1, 2, 2, 97, 64, true, false, "bf16", 0}, 52);
}
Test(attention_bwd, d64_gqa4_causal_bshd) { check_attention((Shape){1, 4, 1, 80, 64, true, true, "bf16", 0}, 53); }
Test(attention_bwd, d128_gqa2_full) { check_attention((Shape){2, 4, 2, 40, 128, false, false, "bf16", 0}, 54); }
Test(attention_bwd, d128_causal_f32) { check_attention((Shape){1, 1, 1, 130, 128, true, false, "f32", 0}, 55); }
Test(attention_bwd, d128_gqa2_full_bshd_batch2) { check_attention((Shape){2, 4, 2, 70, 128, false, true, "bf16", 0}, 58); }
/* sliding windows: causal (local attention) and two-sided, a window
 * narrower than one block and one that spans several */
Test(attention_bwd, d64_causal_window_40) { check_attention((Shape){1, 2, 1, 200, 64, true, false, "f32", 40}, 56); }
Test(attention_bwd, d64_full_window_150_bf16) {
  check_attention((Shape){1, 2, 2, 230, 64, false, false, "bf16", 150}, 57);
}

/* ---- flash_attention_ws.tile: the warp-specialized forward ---- */

/* two_blocks: the loop over two key blocks per iteration (TWO_BLOCKS; at
 * d128 and d256 with BLOCK_N 64 and 32, which its shared memory needs;
 * up to d128 with Q_IN_REGISTERS).
 * sm_scale: 0 for 1 / sqrt(dim); a large one spreads the scores so that
 * rows' maxima grow by more than the kernel's rescale slack (2^8) from one
 * key block to the next, which inputs in [-1, 1] at 1 / sqrt(dim) never do. */
static void check_attention_ws_form(Shape s, uint64_t seed, bool two_blocks, double sm_scale, bool turns) {
  char d[8], w[16];
  snprintf(d, sizeof d, "%d", s.dim), snprintf(w, sizeof w, "%d", s.window);
  const char *defs[] = {"HEAD_DIM", d, "CAUSAL", s.causal ? "true" : "false", "WINDOW", w,
                        "BSHD", s.bshd ? "true" : "false", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  int at = 8;
  if (turns) defs[at++] = "TURNS", defs[at++] = "true";
  if (two_blocks) { /* with Q_IN_REGISTERS up to d128 */
    defs[at++] = "TWO_BLOCKS", defs[at++] = "true";
    if (s.dim > 64) defs[at++] = "BLOCK_N", defs[at++] = s.dim == 128 ? "64" : "32";
    if (s.dim <= 128) defs[at++] = "Q_IN_REGISTERS", defs[at++] = "true";
  } else { /* the one-block loop, Q in shared memory */
    defs[at++] = "TWO_BLOCKS", defs[at++] = "false", defs[at++] = "Q_IN_REGISTERS", defs[at++] = "false";
  }
  tc_compilation *c = harness_compile("lang/std/flash_attention_ws.tile", NULL, defs);
  size_t nq = (size_t)s.batch * s.heads * s.seqlen * s.dim, nkv = (size_t)s.batch * s.heads_kv * s.seqlen * s.dim;
  size_t rows = (size_t)s.batch * s.heads * s.seqlen;
  HBuf q = hbuf_new("bf16", nq, "q"), k = hbuf_new("bf16", nkv, "k"), v = hbuf_new("bf16", nkv, "v");
  HBuf out = hbuf_new("bf16", nq, "out"), dout = hbuf_new("bf16", nq, "dout"), lse = hbuf_new("f32", rows, "lse");
  Rng rng = {seed};
  hbuf_fill_uniform(&q, &rng, -1, 1), hbuf_fill_uniform(&k, &rng, -1, 1), hbuf_fill_uniform(&v, &rng, -1, 1);
  hbuf_fill_uniform(&dout, &rng, -1, 1);
  hbuf_poison(&out), hbuf_poison(&lse);
  double scale = sm_scale > 0 ? sm_scale : 1.0 / sqrt((double)s.dim);
  /* the descriptors' matrices: rows of one head's sequence (BHSD) or of
   * tokens with every head side by side (BSHD) */
  int64_t qr = (int64_t)s.batch * s.heads * s.seqlen, qc = s.dim;
  int64_t kr = (int64_t)s.batch * s.heads_kv * s.seqlen, kc = s.dim;
  if (s.bshd) qr = kr = (int64_t)s.batch * s.seqlen, qc = (int64_t)s.heads * s.dim, kc = (int64_t)s.heads_kv * s.dim;
  tc_arg args[11] = {{.p = out.data},
                    {.p = lse.data},
                    {.p = q.data, .shape = {qr, qc}, .strides = {qc, 1}},
                    {.p = k.data, .shape = {kr, kc}, .strides = {kc, 1}},
                    {.p = v.data, .shape = {kr, kc}, .strides = {kc, 1}},
                    {.p = lse.data}, /* cu_q, cu_k: not read without VARLEN */
                    {.p = lse.data},
                    {.i = s.seqlen},
                    {.i = s.heads},
                    {.i = s.heads_kv},
                    {.f = (float)scale}};
  const HBuf *bufs[] = {&out, &lse, &q, &k, &v};
  int64_t block_m = 0;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK_M", &block_m));
  harness_run(c, (int64_t[3]){harness_cdiv(s.seqlen, block_m), (int64_t)s.batch * s.heads, 1}, args, 11, bufs, 5);
  Strides sq = strides_of(s, s.heads), skv = strides_of(s, s.heads_kv);
  AttnRefShape rs = {s.batch, s.heads, s.heads_kv, s.seqlen, s.dim, s.causal, sq.b, sq.h, sq.n, skv.b, skv.h, skv.n,
                     s.window};
  double *in[4] = {doubles_of(&q), doubles_of(&k), doubles_of(&v), doubles_of(&dout)};
  AttnRefOut r = {calloc(nq, sizeof(double)), calloc(rows, sizeof(double)), calloc(nq, sizeof(double)),
                  calloc(nkv, sizeof(double)), calloc(nkv, sizeof(double))};
  attn_ref_train(&rs, in[0], in[1], in[2], in[3], (float)scale, &r);
  char what[96];
  snprintf(what, sizeof what, "ws%s b%d h%d/%d n%d d%d %s%s window %d", two_blocks ? " two blocks" : "", s.batch,
           s.heads, s.heads_kv, s.seqlen, s.dim, s.causal ? "causal" : "full", s.bshd ? " bshd" : "", s.window);
  double e = rel_error(&out, r.out, nq), e_lse = 0;
  for (size_t i = 0; i < rows; i++) e_lse = fmax(e_lse, fabs(hbuf_get(&lse, i) - r.lse[i]));
  cr_expect_lt(e, BF16_TOL, "%s: out rel error %g", what, e);
  cr_expect_lt(e_lse, LSE_TOL, "%s: lse max abs error %g", what, e_lse);
  free(r.out), free(r.lse), free(r.dq), free(r.dk), free(r.dv);
  for (int i = 0; i < 4; i++) free(in[i]);
  hbuf_free(&q), hbuf_free(&k), hbuf_free(&v), hbuf_free(&out), hbuf_free(&dout), hbuf_free(&lse);
  tc_free(c);
}

static void check_attention_ws(Shape s, uint64_t seed) { check_attention_ws_form(s, seed, false, 0, false); }

Test(attention_ws, d128_full_odd_length) { check_attention_ws((Shape){1, 2, 2, 150, 128, false, false, "bf16", 0}, 61); }
Test(attention_ws, d64_causal_gqa) { check_attention_ws((Shape){2, 4, 2, 200, 64, true, false, "bf16", 0}, 62); }
Test(attention_ws, d256_causal) { check_attention_ws((Shape){1, 2, 1, 90, 256, true, false, "bf16", 0}, 63); }
Test(attention_ws, d64_bshd_gqa_full) { check_attention_ws((Shape){2, 4, 1, 130, 64, false, true, "bf16", 0}, 64); }
Test(attention_ws, d64_causal_window_70_bshd) {
  check_attention_ws((Shape){1, 2, 2, 300, 64, true, true, "bf16", 70}, 65);
}
Test(attention_ws, d128_full_window_200) { check_attention_ws((Shape){1, 1, 1, 333, 128, false, false, "bf16", 200}, 66); }

/* the two-block loop: odd numbers of key blocks (a block b past the end),
 * causal (a block b past every row), windows, GQA, BSHD */
Test(attention_ws, two_blocks_d64_causal_gqa) {
  check_attention_ws_form((Shape){2, 4, 2, 200, 64, true, false, "bf16", 0}, 67, true, 0, false);
}
Test(attention_ws, two_blocks_d64_bshd_gqa_full) {
  check_attention_ws_form((Shape){2, 4, 1, 390, 64, false, true, "bf16", 0}, 68, true, 0, false);
}
Test(attention_ws, two_blocks_d64_causal_window_70_bshd) {
  check_attention_ws_form((Shape){1, 2, 2, 300, 64, true, true, "bf16", 70}, 69, true, 0, false);
}
Test(attention_ws, d64_causal_rows_rescaled) {
  check_attention_ws_form((Shape){1, 2, 2, 300, 64, true, false, "bf16", 0}, 71, false, 6.0, false);
}
Test(attention_ws, two_blocks_d64_full_rows_rescaled) {
  check_attention_ws_form((Shape){1, 2, 1, 390, 64, false, false, "bf16", 0}, 72, true, 6.0, false);
}
Test(attention_ws, two_blocks_d128_full_window_200) {
  check_attention_ws_form((Shape){1, 1, 1, 333, 128, false, false, "bf16", 200}, 70, true, 0, false);
}
/* the consumer warpgroups taking turns (TURNS: the same values) */
Test(attention_ws, turns_two_blocks_d64_causal_rows_rescaled) {
  check_attention_ws_form((Shape){1, 2, 2, 300, 64, true, false, "bf16", 0}, 73, true, 6.0, true);
}
Test(attention_ws, turns_one_block_d128_full) {
  check_attention_ws_form((Shape){1, 2, 1, 200, 128, false, false, "bf16", 0}, 74, false, 0, true);
}

/* ---- flash_attention_varlen.tile: packed sequences of different lengths ---- */

/* Sequences per varlen test batch, at most. */
#define ATTN_MAX_BATCH 8

/* With ws, flash_attention_ws.tile with VARLEN on the same problem. */
/* form: VARLEN_KERNEL (flash_attention_varlen.tile), VARLEN_WS or
 * VARLEN_WS_TWO_BLOCKS (flash_attention_ws.tile: the one-block loop, and
 * the default two-block loop with Q in registers). */
enum { VARLEN_KERNEL, VARLEN_WS, VARLEN_WS_TWO_BLOCKS };
static void check_varlen(const int *len_q, const int *len_k, int batch, int heads, int heads_kv, int dim, bool causal,
                         int form, uint64_t seed) {
  char d[8];
  snprintf(d, sizeof d, "%d", dim);
  bool ws = form != VARLEN_KERNEL;
  const char *defs[] = {"HEAD_DIM", d, "CAUSAL", causal ? "true" : "false", "VARLEN", "true", NULL, NULL, NULL};
  if (!ws) defs[4] = NULL;
  /* the default at d64: two blocks, Q in registers; VARLEN_WS the one-block loop */
  if (form == VARLEN_WS) defs[6] = "TWO_BLOCKS", defs[7] = "false";
  cr_assert(batch <= ATTN_MAX_BATCH);
  tc_compilation *c =
      harness_compile(ws ? "lang/std/flash_attention_ws.tile" : "lang/std/flash_attention_varlen.tile", NULL, defs);
  HBuf cu_q = hbuf_new("i32", (size_t)batch + 1, "cu_q"), cu_k = hbuf_new("i32", (size_t)batch + 1, "cu_k");
  int tq = 0, tk = 0, max_q = 0;
  for (int b = 0; b < batch; b++) {
    hbuf_set(&cu_q, b, tq), hbuf_set(&cu_k, b, tk);
    tq += len_q[b], tk += len_k[b];
    if (len_q[b] > max_q) max_q = len_q[b];
  }
  hbuf_set(&cu_q, batch, tq), hbuf_set(&cu_k, batch, tk);
  /* THD layout: token stride heads * dim, head stride dim */
  HBuf q = hbuf_new("bf16", (size_t)tq * heads * dim, "q"), out = hbuf_new("bf16", (size_t)tq * heads * dim, "out");
  HBuf k = hbuf_new("bf16", (size_t)tk * heads_kv * dim, "k"), v = hbuf_new("bf16", (size_t)tk * heads_kv * dim, "v");
  HBuf lse = hbuf_new("f32", (size_t)tq * heads, "lse");
  Rng rng = {seed};
  hbuf_fill_uniform(&q, &rng, -1, 1), hbuf_fill_uniform(&k, &rng, -1, 1), hbuf_fill_uniform(&v, &rng, -1, 1);
  hbuf_poison(&out), hbuf_poison(&lse);
  double scale = 1.0 / sqrt((double)dim);
  tc_arg args[14] = {{.p = out.data}, {.p = lse.data}, {.p = q.data},   {.p = k.data},
                     {.p = v.data},   {.p = cu_q.data}, {.p = cu_k.data}, {.i = heads},
                     {.i = heads_kv}, {.f = (float)scale}, {.i = heads * dim}, {.i = dim},
                     {.i = heads_kv * dim}, {.i = dim}};
  const HBuf *bufs[] = {&out, &lse, &q, &k, &v, &cu_q, &cu_k};
  int64_t block_m = 0;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK_M", &block_m));
  int64_t grid[3] = {harness_cdiv(max_q, block_m), (int64_t)batch * heads, 1};
  if (ws) { /* descriptors over the rows of tokens; seqlen is not read */
    tc_arg wa[11] = {{.p = out.data},
                     {.p = lse.data},
                     {.p = q.data, .shape = {tq, (int64_t)heads * dim}, .strides = {(int64_t)heads * dim, 1}},
                     {.p = k.data, .shape = {tk, (int64_t)heads_kv * dim}, .strides = {(int64_t)heads_kv * dim, 1}},
                     {.p = v.data, .shape = {tk, (int64_t)heads_kv * dim}, .strides = {(int64_t)heads_kv * dim, 1}},
                     {.p = cu_q.data},
                     {.p = cu_k.data},
                     {.i = 0},
                     {.i = heads},
                     {.i = heads_kv},
                     {.f = (float)scale}};
    harness_run(c, grid, wa, 11, bufs, 7);
  } else {
    harness_run(c, grid, args, 14, bufs, 7);
  }
  int cq[ATTN_MAX_BATCH + 1], ck[ATTN_MAX_BATCH + 1];
  for (int i = 0; i <= batch; i++) cq[i] = (int)hbuf_get(&cu_q, i), ck[i] = (int)hbuf_get(&cu_k, i);
  double *in[3] = {doubles_of(&q), doubles_of(&k), doubles_of(&v)};
  double *want = malloc(sizeof(double) * q.n), *want_lse = malloc(sizeof(double) * lse.n);
  attn_ref_varlen(batch, heads, heads_kv, dim, causal, cq, ck, in[0], in[1], in[2], (float)scale, want, want_lse);
  double e = rel_error(&out, want, out.n), lse_err = 0;
  for (size_t i = 0; i < lse.n; i++)
    if (isfinite(want_lse[i])) lse_err = fmax(lse_err, fabs(hbuf_get(&lse, i) - want_lse[i]));
  cr_expect_lt(e, BF16_TOL, "varlen d%d causal %d: rel error %g", dim, causal, e);
  cr_expect_lt(lse_err, LSE_TOL, "varlen lse: max abs error %g", lse_err);
  free(want), free(want_lse);
  for (int i = 0; i < 3; i++) free(in[i]);
  HBuf *all[] = {&q, &k, &v, &out, &lse, &cu_q, &cu_k};
  for (int i = 0; i < 7; i++) hbuf_free(all[i]);
  tc_free(c);
}

/* lengths from 1 up, not multiples of the blocks; queries and keys of a
 * sequence may differ in number (causal aligns them at the ends; a query
 * with no key to see gets zeros) */
Test(attention_varlen, d64_full_lengths_1_to_300) {
  const int lq[] = {1, 300, 70, 129}, lk[] = {1, 300, 70, 129};
  check_varlen(lq, lk, 4, 2, 1, 64, false, VARLEN_KERNEL, 71);
}
Test(attention_varlen, d128_causal_unequal_lengths) {
  const int lq[] = {5, 200, 64}, lk[] = {40, 150, 64};
  check_varlen(lq, lk, 3, 2, 2, 128, true, VARLEN_KERNEL, 72);
}
Test(attention_varlen, ws_d64_full_lengths_1_to_300) {
  const int lq[] = {1, 300, 70, 129}, lk[] = {1, 300, 70, 129};
  check_varlen(lq, lk, 4, 2, 1, 64, false, VARLEN_WS, 73);
}
Test(attention_varlen, ws_d128_causal_unequal_lengths) {
  const int lq[] = {5, 200, 64}, lk[] = {40, 150, 64};
  check_varlen(lq, lk, 3, 2, 2, 128, true, VARLEN_WS, 74);
}
Test(attention_varlen, ws_two_blocks_d64_causal_unequal_lengths) {
  const int lq[] = {5, 200, 64, 1}, lk[] = {40, 150, 64, 300};
  check_varlen(lq, lk, 4, 2, 1, 64, true, VARLEN_WS_TWO_BLOCKS, 75);
}

/* ---- flash_attention_fp8.tile: e4m3 inputs with per-tensor scales ---- */

/* fp8 inputs and outputs: the spec's bound for fp8 attention. */
#define FP8_TOL 5e-2

static void check_fp8(int heads, int seqlen, int dim, bool causal, uint64_t seed) {
  char d[8];
  snprintf(d, sizeof d, "%d", dim);
  const char *defs[] = {"HEAD_DIM", d, "CAUSAL", causal ? "true" : "false", NULL};
  tc_compilation *c = harness_compile("lang/std/flash_attention_fp8.tile", NULL, defs);
  size_t n = (size_t)heads * seqlen * dim;
  HBuf q = hbuf_new("f8e4m3", n, "q"), k = hbuf_new("f8e4m3", n, "k"), v = hbuf_new("f8e4m3", n, "v");
  HBuf out = hbuf_new("bf16", n, "out");
  Rng rng = {seed};
  /* the stored values use e4m3's range; the scales bring them back */
  hbuf_fill_uniform(&q, &rng, -200, 200), hbuf_fill_uniform(&k, &rng, -200, 200), hbuf_fill_uniform(&v, &rng, -200, 200);
  hbuf_poison(&out);
  const double dq = 1.0 / 200, dk = 1.5 / 200, dv = 0.5 / 200, scale = 1.0 / sqrt((double)dim);
  int64_t sh = (int64_t)seqlen * dim;
  tc_arg args[13] = {{.p = out.data}, {.p = q.data}, {.p = k.data},    {.p = v.data},     {.i = seqlen},
                     {.i = heads},    {.f = (float)scale}, {.f = (float)dq}, {.f = (float)dk}, {.f = (float)dv},
                     {.i = heads * sh}, {.i = sh},    {.i = dim}};
  const HBuf *bufs[] = {&out, &q, &k, &v};
  int64_t block_m = 0;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK_M", &block_m));
  harness_run(c, (int64_t[3]){harness_cdiv(seqlen, block_m), heads, 1}, args, 13, bufs, 4);
  double *in[3] = {doubles_of(&q), doubles_of(&k), doubles_of(&v)}, *dout = calloc(n, sizeof(double));
  for (size_t i = 0; i < n; i++) in[0][i] *= dq, in[1][i] *= dk, in[2][i] *= dv;
  AttnRefShape rs = {1, heads, heads, seqlen, dim, causal, heads * sh, sh, dim, heads * sh, sh, dim, 0};
  AttnRefOut r = {calloc(n, sizeof(double)), calloc((size_t)heads * seqlen, sizeof(double)), calloc(n, sizeof(double)),
                  calloc(n, sizeof(double)), calloc(n, sizeof(double))};
  attn_ref_train(&rs, in[0], in[1], in[2], dout, (float)scale, &r);
  double e = rel_error(&out, r.out, n);
  cr_expect_lt(e, FP8_TOL, "fp8 h%d n%d d%d causal %d: rel error %g", heads, seqlen, dim, causal, e);
  free(r.out), free(r.lse), free(r.dq), free(r.dk), free(r.dv), free(dout);
  for (int i = 0; i < 3; i++) free(in[i]);
  hbuf_free(&q), hbuf_free(&k), hbuf_free(&v), hbuf_free(&out);
  tc_free(c);
}

Test(attention_fp8, d64_full) { check_fp8(2, 150, 64, false, 81); }
Test(attention_fp8, d128_causal) { check_fp8(1, 200, 128, true, 82); }

/* ---- flash_attention_ws_fp8.tile: the warp-specialized fp8 forward ---- */

/* V^T rows of fp8 are padded to a multiple of 16 bytes (a TMA stride). */
#define VT_ROW_ALIGN 16

/* turns: the consumer warpgroups take turns (TURNS; no effect in the
 * interpreter, but the calls must balance on every path). p_regs: P and
 * V^T in k order (P_IN_REGISTERS in both kernels), V^T from attention_vt
 * and its padding columns part of the tensor. */
static void check_fp8_ws(Shape s, bool turns, bool p_regs, uint64_t seed) {
  char d[8];
  snprintf(d, sizeof d, "%d", s.dim);
  const char *pr = p_regs ? "true" : "false";
  const char *defs[] = {"HEAD_DIM", d,  "CAUSAL", s.causal ? "true" : "false", "BSHD", s.bshd ? "true" : "false",
                        "TURNS", turns ? "true" : "false", "P_IN_REGISTERS", pr, NULL};
  tc_compilation *c = harness_compile("lang/std/flash_attention_ws_fp8.tile", NULL, defs);
  int hk = s.heads_kv ? s.heads_kv : s.heads; /* 0: as many key/value heads as query heads */
  size_t n = (size_t)s.batch * s.heads * s.seqlen * s.dim, rows = (size_t)s.batch * s.heads * s.seqlen;
  size_t nkv = (size_t)s.batch * hk * s.seqlen * s.dim;
  int64_t vt_stride = harness_cdiv(s.seqlen, VT_ROW_ALIGN) * VT_ROW_ALIGN;
  int64_t vt_cols = p_regs ? vt_stride : s.seqlen;
  size_t vt_rows = (size_t)s.batch * hk * s.dim;
  HBuf q = hbuf_new("f8e4m3", n, "q"), k = hbuf_new("f8e4m3", nkv, "k"), v = hbuf_new("f8e4m3", nkv, "v");
  HBuf vt = hbuf_new("f8e4m3", vt_rows * (size_t)vt_stride, "vt");
  HBuf out = hbuf_new("bf16", n, "out"), lse = hbuf_new("f32", rows, "lse");
  Rng rng = {seed};
  hbuf_fill_uniform(&q, &rng, -200, 200), hbuf_fill_uniform(&k, &rng, -200, 200), hbuf_fill_uniform(&v, &rng, -200, 200);
  hbuf_poison(&vt), hbuf_poison(&out), hbuf_poison(&lse);
  /* each key/value head's V transposed: row (b * hk + h) * dim + j holds
   * v[b, :, h, j] (with p_regs in k order, zeros past seqlen up to the
   * padded width) */
  Strides sq = strides_of(s, s.heads), sv = strides_of(s, hk);
  for (int b = 0; b < s.batch; b++)
    for (int h = 0; h < hk; h++)
      for (int t = 0; t < (p_regs ? vt_stride : s.seqlen); t++) {
        int tok = attn_vt_token(t, p_regs);
        for (int j = 0; j < s.dim; j++)
          hbuf_set(&vt, (((size_t)b * hk + h) * s.dim + j) * (size_t)vt_stride + (size_t)t,
                   tok < s.seqlen ? hbuf_get(&v, (size_t)(b * sv.b + h * sv.h + tok * sv.n + j)) : 0.0);
      }
  /* attention_vt (the same file's second kernel) writes the same V^T:
   * exact, the padding columns left as they were */
  HBuf vt2 = hbuf_new("f8e4m3", vt_rows * (size_t)vt_stride, "vt (attention_vt)");
  hbuf_poison(&vt2);
  const char *vdefs[] = {"HEAD_DIM", d, "P_IN_REGISTERS", pr, NULL};
  tc_compilation *vc = harness_compile("lang/std/flash_attention_ws_fp8.tile", "attention_vt", vdefs);
  int64_t block_t = 0;
  cr_assert(tc_kernel_const_int(vc, 0, "BLOCK_T", &block_t));
  tc_arg vargs[7] = {{.p = vt2.data, .shape = {(int64_t)vt_rows, vt_cols}, .strides = {vt_stride, 1}},
                     {.p = v.data}, {.i = s.seqlen}, {.i = hk}, {.i = sv.b}, {.i = sv.h}, {.i = sv.n}};
  const HBuf *vbufs[] = {&vt2, &v};
  harness_run(vc, (int64_t[3]){harness_cdiv(s.seqlen, block_t), (int64_t)s.batch * hk, 1}, vargs, 7, vbufs, 2);
  tc_free(vc);
  size_t wrong = 0, padding_written = 0;
  for (size_t r = 0; r < vt_rows; r++)
    for (int64_t t = 0; t < vt_stride; t++) {
      size_t at = r * (size_t)vt_stride + (size_t)t; /* one byte an element; vt's padding is poison too */
      bool same = memcmp((char *)vt.data + at, (char *)vt2.data + at, 1) == 0;
      if (t < vt_cols) wrong += !same;
      else padding_written += !same;
    }
  cr_expect_eq(wrong, 0, "attention_vt: %zu elements differ from the transpose", wrong);
  cr_expect_eq(padding_written, 0, "attention_vt wrote %zu padding elements", padding_written);
  hbuf_free(&vt2);
  const double dq = 1.0 / 200, dk = 1.5 / 200, dv = 0.5 / 200, scale = 1.0 / sqrt((double)s.dim);
  int64_t qr = (int64_t)rows, qc = s.dim, kr = (int64_t)(nkv / (size_t)s.dim), kc = s.dim;
  if (s.bshd) qr = kr = (int64_t)s.batch * s.seqlen, qc = (int64_t)s.heads * s.dim, kc = (int64_t)hk * s.dim;
  tc_arg args[12] = {{.p = out.data},
                     {.p = lse.data},
                     {.p = q.data, .shape = {qr, qc}, .strides = {qc, 1}},
                     {.p = k.data, .shape = {kr, kc}, .strides = {kc, 1}},
                     {.p = vt.data, .shape = {(int64_t)vt_rows, vt_cols}, .strides = {vt_stride, 1}},
                     {.i = s.seqlen},
                     {.i = s.heads},
                     {.i = hk},
                     {.f = (float)scale},
                     {.f = (float)dq},
                     {.f = (float)dk},
                     {.f = (float)dv}};
  const HBuf *bufs[] = {&out, &lse, &q, &k, &vt};
  int64_t block_m = 0;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK_M", &block_m));
  harness_run(c, (int64_t[3]){harness_cdiv(s.seqlen, block_m), (int64_t)s.batch * s.heads, 1}, args, 12, bufs, 5);
  double *in[3] = {doubles_of(&q), doubles_of(&k), doubles_of(&v)}, *dout = calloc(n, sizeof(double));
  for (size_t i = 0; i < n; i++) in[0][i] *= dq;
  for (size_t i = 0; i < nkv; i++) in[1][i] *= dk, in[2][i] *= dv;
  AttnRefShape rs = {s.batch, s.heads, hk, s.seqlen, s.dim, s.causal, sq.b, sq.h, sq.n, sv.b, sv.h, sv.n, 0};
  AttnRefOut r = {calloc(n, sizeof(double)), calloc(rows, sizeof(double)), calloc(n, sizeof(double)),
                  calloc(nkv, sizeof(double)), calloc(nkv, sizeof(double))};
  attn_ref_train(&rs, in[0], in[1], in[2], dout, (float)scale, &r);
  double e = rel_error(&out, r.out, n), e_lse = 0;
  for (size_t i = 0; i < rows; i++) e_lse = fmax(e_lse, fabs(hbuf_get(&lse, i) - r.lse[i]));
  cr_expect_lt(e, FP8_TOL, "fp8 ws b%d h%d/%d n%d d%d causal %d bshd %d: rel error %g", s.batch, s.heads, hk, s.seqlen,
               s.dim, s.causal, s.bshd, e);
  /* the scores are exact products of the stored values and lse sums the
   * probabilities before their rounding to e4m3: bf16's bound */
  cr_expect_lt(e_lse, LSE_TOL, "fp8 ws: lse max abs error %g", e_lse);
  free(r.out), free(r.lse), free(r.dq), free(r.dk), free(r.dv), free(dout);
  for (int i = 0; i < 3; i++) free(in[i]);
  hbuf_free(&q), hbuf_free(&k), hbuf_free(&v), hbuf_free(&vt), hbuf_free(&out), hbuf_free(&lse);
  tc_free(c);
}

Test(attention_fp8, ws_d64_full_odd_length) {
  check_fp8_ws((Shape){.batch = 2, .heads = 2, .seqlen = 150, .dim = 64}, false, false, 83);
}
Test(attention_fp8, ws_d128_causal_bshd_turns) {
  check_fp8_ws((Shape){.batch = 1, .heads = 2, .seqlen = 200, .dim = 128, .causal = true, .bshd = true}, true, false, 84);
}
Test(attention_fp8, ws_p_in_registers_d64_full_odd_length) {
  check_fp8_ws((Shape){.batch = 2, .heads = 2, .seqlen = 150, .dim = 64}, false, true, 85);
}
Test(attention_fp8, ws_gqa4_d64_causal) {
  check_fp8_ws((Shape){.batch = 2, .heads = 4, .heads_kv = 1, .seqlen = 130, .dim = 64, .causal = true}, false, false, 87);
}
Test(attention_fp8, ws_gqa2_p_in_registers_d128_full_bshd) {
  check_fp8_ws((Shape){.batch = 1, .heads = 4, .heads_kv = 2, .seqlen = 150, .dim = 128, .bshd = true}, false, true, 88);
}
Test(attention_fp8, ws_p_in_registers_one_token) {
  check_fp8_ws((Shape){.batch = 2, .heads = 2, .heads_kv = 1, .seqlen = 1, .dim = 64, .causal = true}, false, true, 89);
}
Test(attention_fp8, ws_p_in_registers_17_tokens_bshd_gqa_turns) {
  check_fp8_ws((Shape){.batch = 2, .heads = 4, .heads_kv = 2, .seqlen = 17, .dim = 128, .bshd = true}, true, true, 90);
}
Test(attention_fp8, ws_p_in_registers_d128_causal_bshd_turns) {
  check_fp8_ws((Shape){.batch = 1, .heads = 2, .seqlen = 203, .dim = 128, .causal = true, .bshd = true}, true, true, 86);
}
