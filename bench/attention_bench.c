/* attention_bench.c - `tile-gpu bench attention`: the standard library's
 * flash attention at the shapes of ../shared/ANCHORS.md (bf16, 16k tokens
 * per batch: batch = 16384 / seqlen, hidden 2048: heads = 2048 / head dim,
 * BHSD contiguous), in TFLOP/s = 4 * batch * heads * seqlen^2 * dim / t
 * (halved for causal):
 *
 *   flash_attention.tile      the forward through a cp.async ring (8 warps)
 *   flash_attention_ws.tile   the forward with a producer warpgroup filling
 *                             a TMA ring and two consumer warpgroups
 *   flash_attention_fp8.tile  the forward on e4m3 inputs (per-tensor
 *                             scales), reported against the bf16 anchors
 *   flash_attention_ws_fp8.tile  the same warp-specialized (P staged or in
 *                             registers, with or without turns), and
 *                             through tile_attention_forward_fp8_lse
 *   flash_attention_bwd.tile  the backward (delta, dk/dv, dq: 2.5 times the
 *                             forward's operations), at d128 16k
 *
 * The anchors (cuDNN and FlashAttention-2 through PyTorch's SDPA) are not
 * reachable from C: bench/attention_anchor.py measures them in the same
 * run (scripts/gpu-run.sh calls it after this) and prints the ratios. Here
 * the rows carry anchor 0. Each shape also compares the two forwards'
 * outputs on the same inputs (they must agree to bf16 rounding), so that a
 * fast wrong kernel cannot pass as a result.
 *
 * TILE_BENCH_ATTN_ONLY picks forward shapes ("d128 16k full|d64 1k") or
 * the backward ("backward"); TILE_BENCH_ATTN_FP8_ONLY=1 skips the bf16
 * forms but the default; TILE_BENCH_ATTN_FP8_PAIR=1 also times the fp8
 * forward with P staged against P in registers in alternating rounds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_ref.h"
#include "bench.h"
#include "tile_attention.h"

/* Tokens per batch and hidden size of the anchor shapes. */
#define ATTN_TOKENS 16384
#define ATTN_HIDDEN 2048
/* The two forwards agree to this relative error (bf16 outputs, f32 sums
 * in another order). */
#define ATTN_AGREE_TOL 1e-2
/* Two fp8 forwards round P to e4m3 from different block maxima. */
#define ATTN_FP8_AGREE_TOL 5e-2
#define ATTN_NAME_BYTES 192
/* Characters of one number of a TILE_BENCH_BWD_SWEEP entry, with its NUL. */
#define BWD_FIELD_CHARS 8
/* The backward's sequence length and head dim (the anchors' bwd shape). */
#define BWD_SEQLEN 16384
#define ATTN_HEAD_DIM_BWD 128

typedef struct AttnShape {
  int dim, seqlen;
  bool causal;
} AttnShape;

static const AttnShape shapes[] = {
    {64, 1024, false},   {64, 16384, false},  {64, 16384, true},  {128, 1024, false},
    {128, 4096, false},  {128, 16384, false}, {128, 16384, true},  {256, 16384, false},
};

/* The most arguments of a kernel these launches run: the dk/dv kernel
 * with dq's accumulator (ATOMIC_DQ_FILE) has 19. */
#define ATTN_LAUNCH_ARGS 19

typedef struct AttnLaunch {
  const tile_kernel *k[4];
  uint32_t grid[4][3];
  tile_arg args[4][ATTN_LAUNCH_ARGS];
  int nargs[4], nk;
} AttnLaunch;

static bool do_attn(void *ctx) {
  AttnLaunch *l = ctx;
  for (int i = 0; i < l->nk; i++)
    if (tile_launch(l->k[i], l->grid[i], NULL, l->args[i], l->nargs[i]) != TILE_OK) {
      printf("  launch failed: %s\n", tile_last_error());
      return false;
    }
  return true;
}

static double flops(const AttnShape *s, int batch, int heads) {
  double f = 4.0 * batch * heads * (double)s->seqlen * s->seqlen * s->dim;
  return s->causal ? f / 2 : f;
}

static uint64_t dev_bf16(Gpu *g, size_t n, uint64_t seed, bool random) {
  DBuf b;
  if (!dbuf_alloc(g, &b, "x", "bf16", n)) return 0;
  Rng r = {seed};
  if (random) dbuf_fill(&b, &r, -1, 1);
  else dbuf_poison(&b);
  dbuf_upload(g, &b);
  uint64_t dev = b.dev;
  free(b.host);
  return dev;
}

/* A device buffer of n bf16 values read back (its copy on the host). */
static bool read_bf16(Gpu *g, uint64_t src, size_t n, DBuf *out) {
  if (!dbuf_alloc(g, out, "x", "bf16", n)) return false;
  return tile_memcpy_dtod(g->rt, out->dev, src, n * 2, NULL) == TILE_OK && dbuf_download(g, out);
}

/* max |a - b| / max |b| over n bf16 values on the device; NaN: infinity. */
static double agreement(Gpu *g, uint64_t a, uint64_t b, size_t n) {
  DBuf x = {0}, y = {0};
  double err = INFINITY;
  if (read_bf16(g, a, n, &x) && read_bf16(g, b, n, &y)) {
    double e = 0, ref = 0;
    for (size_t i = 0; i < n && e < INFINITY; i++) {
      double u = dbuf_get(&x, i), w = dbuf_get(&y, i);
      e = isnan(u) || isnan(w) ? INFINITY : fmax(e, fabs(u - w));
      ref = fmax(ref, fabs(w));
    }
    err = ref > 0 ? e / ref : e;
  }
  if (x.host) dbuf_free(g, &x);
  if (y.host) dbuf_free(g, &y);
  return err;
}

static void shape_label(const AttnShape *s, char *out, size_t size) {
  snprintf(out, size, "d%d %dk %s", s->dim, s->seqlen / 1024, s->causal ? "causal" : "full");
}

/* Whether one of the '|'-separated texts of `list` occurs in the label. */
static bool shape_chosen(const AttnShape *s, const char *list) {
  char label[64], text[64];
  shape_label(s, label, sizeof label);
  for (const char *at = list; *at;) {
    size_t len = strcspn(at, "|");
    if (len > 0 && len < sizeof text) {
      memcpy(text, at, len);
      text[len] = 0;
      if (strstr(label, text)) return true;
    }
    at += len;
    at += *at == '|';
  }
  return false;
}

/* A form of the forward (a build of flash_attention_ws with other consts
 * or other annotations) on the default's launch: its output o1 poisoned
 * first, timed, then compared with the default's output o2. */
static void time_form(Gpu *g, const AttnLaunch *l, const Variant *tb, uint64_t o1, uint64_t o2, size_t n,
                      const AttnShape *s, int batch, int heads, const char *what, const char *form) {
  AttnLaunch tl = *l;
  tl.k[0] = tb->kernel;
  double tms = -1;
  if (tile_memset_d8(g->rt, o1, 0xFF, n * 2) == TILE_OK) {
    tl.args[0][0] = tile_arg_ptr(o1);
    tms = bench_time_ms(g, do_attn, &tl);
  }
  char name[ATTN_NAME_BYTES];
  snprintf(name, sizeof name, "attention fwd %s tile ws %s (flash_attention_ws.tile)", what, form);
  if (tms > 0) {
    bench_add_row(name, flops(s, batch, heads) / (tms * 1e9), 0, "TFLOP/s");
    double e = agreement(g, o1, o2, n);
    printf("  %s: %s %s the ws forward (relative difference %.3g)\n", what, form,
           e <= ATTN_AGREE_TOL ? "agrees with" : "DISAGREES with", e);
  }
}

/* flash_attention_ws with @warp_specialize replaced by @warps of its two
 * consumer warpgroups (the same loop without a producer warpgroup: every
 * warp issues and waits for the copies), one key block per iteration,
 * no turns: the ablation's row without warp specialization. */
static bool build_without_ws(Gpu *g, const char *dim, bool causal, Variant *v) {
  static const char *const ann = "@warp_specialize(1, 2, 24, 240)\n";
  size_t len;
  char *src = variant_read_source(g, "lang/std/flash_attention_ws.tile", &len);
  char *at = src ? strstr(src, ann) : NULL;
  bool ok = at != NULL;
  if (ok) {
    const char *warps = "@warps(8)";
    memset(at, ' ', strlen(ann) - 1); /* same length, so locations stay */
    memcpy(at, warps, strlen(warps));
    const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", causal ? "true" : "false", "TWO_BLOCKS", "false",
                          "Q_IN_REGISTERS", "false", "BLOCK_N", "128", "TURNS", "false", NULL};
    tc_codegen_options go = {.linker = TC_LINKER_AUTO};
    ok = variant_build_text(g, "lang/std/flash_attention_ws.tile", src, len, defs, &go, v);
  } else {
    printf("  flash_attention_ws.tile has no '%.31s' line to replace\n", ann);
  }
  free(src);
  return ok;
}

/* flash_attention_ws_fp8.tile on the fp8 inputs x (BHSD), V transposed
 * here into each head's V^T; its output (into o2, poisoned first)
 * compared with flash_attention_fp8.tile's in o1. */
/* A build of flash_attention_ws_fp8.tile ready to launch on the fp8
 * inputs x (BHSD), with its own V^T (natural or k order) and lse. */
typedef struct WsFp8 {
  Variant w;
  DBuf vt;
  uint64_t lse;
  tile_tensor tq, tk, tv;
  AttnLaunch l;
} WsFp8;

static void ws_fp8_free(Gpu *g, WsFp8 *f) {
  if (f->lse) tile_mem_free(g->rt, f->lse);
  if (f->vt.host) dbuf_free(g, &f->vt);
  variant_free(&f->w);
}

static bool ws_fp8_setup(Gpu *g, const AttnShape *s, const DBuf *x, uint64_t out, size_t n, int batch, int heads,
                         double scale, bool turns, bool p_regs, WsFp8 *f) {
  memset(f, 0, sizeof *f);
  char dim[8];
  snprintf(dim, sizeof dim, "%d", s->dim);
  const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", s->causal ? "true" : "false", "TURNS", turns ? "true" : "false",
                        "P_IN_REGISTERS", p_regs ? "true" : "false", NULL};
  if (!variant_build(g, "lang/std/flash_attention_ws_fp8.tile", defs, &f->w)) return false;
  size_t rows = (size_t)batch * heads * s->seqlen;
  bool ok = dbuf_alloc(g, &f->vt, "vt", "f8e4m3", n) && tile_mem_alloc(g->rt, rows * 4, &f->lse) == TILE_OK;
  if (ok) { /* seqlen is a multiple of 16: V^T rows need no padding; with
             * P_IN_REGISTERS the tokens of each 16 in k order */
    for (size_t bh = 0; bh < (size_t)batch * heads; bh++)
      for (int t = 0; t < s->seqlen; t++) {
        int tok = attn_vt_token(t, p_regs);
        for (int j = 0; j < s->dim; j++)
          dbuf_set(&f->vt, (bh * s->dim + j) * s->seqlen + t, dbuf_get(&x[2], (bh * s->seqlen + tok) * s->dim + j));
      }
    ok = dbuf_upload(g, &f->vt);
  }
  if (!ok) {
    ws_fp8_free(g, f);
    return false;
  }
  int64_t qr = (int64_t)rows;
  f->tq = (tile_tensor){x[0].dev, 2, {qr, s->dim}, {s->dim, 1}}, f->tk = (tile_tensor){x[1].dev, 2, {qr, s->dim}, {s->dim, 1}};
  f->tv = (tile_tensor){f->vt.dev, 2, {(int64_t)batch * heads * s->dim, s->seqlen}, {s->seqlen, 1}};
  f->l.nk = 1;
  f->l.k[0] = f->w.kernel;
  int64_t bm = variant_const(&f->w, "BLOCK_M", 128);
  f->l.grid[0][0] = (uint32_t)((s->seqlen + bm - 1) / bm), f->l.grid[0][1] = (uint32_t)(batch * heads), f->l.grid[0][2] = 1;
  tile_arg a[12] = {tile_arg_ptr(out),          tile_arg_ptr(f->lse),      tile_arg_tensor(&f->tq),
                    tile_arg_tensor(&f->tk),    tile_arg_tensor(&f->tv),   tile_arg_i64(s->seqlen),
                    tile_arg_i64(heads),        tile_arg_i64(heads),       tile_arg_f64(scale),
                    tile_arg_f64(1.0 / 200),    tile_arg_f64(1.0 / 200),   tile_arg_f64(1.0 / 200)};
  memcpy(f->l.args[0], a, sizeof a), f->l.nargs[0] = 12;
  return true;
}

/* flash_attention_ws_fp8.tile on the fp8 inputs x (BHSD), V transposed
 * here into each head's V^T; its output (into o2, poisoned first)
 * compared with flash_attention_fp8.tile's in o1. */
static void bench_ws_fp8(Gpu *g, const AttnShape *s, const DBuf *x, uint64_t o1, uint64_t o2, size_t n, int batch,
                         int heads, double scale, const char *what, bool turns, bool p_regs) {
  WsFp8 f;
  if (!ws_fp8_setup(g, s, x, o2, n, batch, heads, scale, turns, p_regs, &f)) return;
  double ms = tile_memset_d8(g->rt, o2, 0xFF, n * 2) == TILE_OK ? bench_time_ms(g, do_attn, &f.l) : -1;
  char name[ATTN_NAME_BYTES];
  snprintf(name, sizeof name, "attention fwd %s tile fp8 e4m3 ws%s%s (flash_attention_ws_fp8.tile)", what,
           p_regs ? ", P in registers" : "", turns ? ", warpgroups take turns" : "");
  if (ms > 0) {
    bench_add_row(name, flops(s, batch, heads) / (ms * 1e9), 0, "TFLOP/s");
    double e = agreement(g, o2, o1, n);
    printf("  %s: flash_attention_ws_fp8 against flash_attention_fp8: relative difference %.3g (%s fp8's bound %.0e)\n",
           what, e, e <= ATTN_FP8_AGREE_TOL ? "within" : "PAST", ATTN_FP8_AGREE_TOL);
  }
  ws_fp8_free(g, &f);
}

/* Rounds of the P-in-registers comparison. */
#define FP8_PAIR_ROUNDS 3

/* TILE_BENCH_ATTN_FP8_PAIR=1: flash_attention_ws_fp8 with P staged and
 * with P in registers (no turns), timed in alternating rounds
 * (bench_time_pair_ms), each output compared with flash_attention_fp8's
 * in o1 first. Printed, not rows. */
static void compare_fp8_p_forms(Gpu *g, const AttnShape *s, const DBuf *x, uint64_t o1, uint64_t o2, size_t n, int batch,
                                int heads, double scale, const char *what) {
  WsFp8 f[2];
  if (!ws_fp8_setup(g, s, x, o2, n, batch, heads, scale, false, false, &f[0])) return;
  if (!ws_fp8_setup(g, s, x, o2, n, batch, heads, scale, false, true, &f[1])) {
    ws_fp8_free(g, &f[0]);
    return;
  }
  bool ok = true;
  for (int i = 0; i < 2 && ok; i++) {
    ok = tile_memset_d8(g->rt, o2, 0xFF, n * 2) == TILE_OK && do_attn(&f[i].l) && tile_synchronize(g->rt) == TILE_OK;
    double e = ok ? agreement(g, o2, o1, n) : -1;
    printf("  %s: P %s: relative difference %.3g against flash_attention_fp8 (%s fp8's bound %.0e)\n", what,
           i ? "in registers" : "staged", e, e >= 0 && e <= ATTN_FP8_AGREE_TOL ? "within" : "PAST", ATTN_FP8_AGREE_TOL);
  }
  double fl = flops(s, batch, heads);
  for (int r = 0; r < FP8_PAIR_ROUNDS && ok; r++) {
    double ms[2];
    ok = bench_time_pair_ms(g, do_attn, &f[0].l, do_attn, &f[1].l, &ms[0], &ms[1]);
    if (ok)
      printf("fp8 P forms %s round %d: staged %.1f TFLOP/s, in registers %.1f: registers / staged %.3f\n", what, r,
             fl / (ms[0] * 1e9), fl / (ms[1] * 1e9), ms[0] / ms[1]);
  }
  ws_fp8_free(g, &f[0]), ws_fp8_free(g, &f[1]);
}

/* One call of tile_attention_forward_fp8_lse (V^T into the workspace,
 * then the forward). */
typedef struct Fp8ApiCall {
  tile_attention *att;
  tile_attention_problem p;
  tile_attention_fp8_scales sc;
  uint64_t out, lse, q, k, v, ws;
} Fp8ApiCall;

static bool do_fp8_api(void *ctx) {
  Fp8ApiCall *c = ctx;
  if (tile_attention_forward_fp8_lse(c->att, &c->p, c->out, c->lse, c->q, c->k, c->v, c->ws, &c->sc, NULL) == TILE_OK)
    return true;
  printf("  tile_attention_forward_fp8_lse: %s\n", tile_last_error());
  return false;
}

/* The same fp8 inputs (BHSD) through tile_attention_forward_fp8_lse, the
 * transposition of V included; out (o2, poisoned first) compared with
 * flash_attention_fp8.tile's in o1. */
static void bench_fp8_api(Gpu *g, const AttnShape *s, const DBuf *x, uint64_t o1, uint64_t o2, size_t n, int batch,
                          int heads, const char *what) {
  Fp8ApiCall c = {.p = {batch, heads, heads, s->seqlen, s->dim, s->causal, 0, {0}, {0}},
                  .sc = {1.0f / 200, 1.0f / 200, 1.0f / 200},
                  .out = o2, .q = x[0].dev, .k = x[1].dev, .v = x[2].dev};
  size_t rows = (size_t)batch * heads * s->seqlen;
  bool ok = tile_attention_create(g->rt, &c.att) == TILE_OK && tile_mem_alloc(g->rt, rows * 4, &c.lse) == TILE_OK &&
            tile_mem_alloc(g->rt, tile_attention_fp8_workspace_bytes(&c.p), &c.ws) == TILE_OK &&
            tile_memset_d8(g->rt, o2, 0xFF, n * 2) == TILE_OK;
  double ms = ok ? bench_time_ms(g, do_fp8_api, &c) : -1;
  if (!ok) printf("  fp8 API setup: %s\n", tile_last_error());
  char name[ATTN_NAME_BYTES];
  snprintf(name, sizeof name, "attention fwd %s tile fp8 e4m3 API (tile_attention_forward_fp8_lse)",
           what);
  if (ms > 0) {
    bench_add_row(name, flops(s, batch, heads) / (ms * 1e9), 0, "TFLOP/s");
    double e = agreement(g, o2, o1, n);
    printf("  %s: tile_attention_forward_fp8_lse against flash_attention_fp8: relative difference %.3g (%s fp8's bound %.0e)\n",
           what, e, e <= ATTN_FP8_AGREE_TOL ? "within" : "PAST", ATTN_FP8_AGREE_TOL);
  }
  if (c.lse) tile_mem_free(g->rt, c.lse);
  if (c.ws) tile_mem_free(g->rt, c.ws);
  tile_attention_destroy(c.att);
}

static void bench_shape(Gpu *g, const AttnShape *s) {
  int batch = ATTN_TOKENS / s->seqlen, heads = ATTN_HIDDEN / s->dim;
  size_t n = (size_t)ATTN_TOKENS * ATTN_HIDDEN;
  char dim[8], name[ATTN_NAME_BYTES], what[64];
  snprintf(dim, sizeof dim, "%d", s->dim);
  shape_label(s, what, sizeof what);
  const char *defs[] = {"HEAD_DIM", dim, "CAUSAL", s->causal ? "true" : "false", NULL};
  Variant fwd, ws;
  /* flash_attention.tile has no d256 */
  bool have_fwd = s->dim <= 128 && variant_build(g, "lang/std/flash_attention.tile", defs, &fwd);
  bool have_ws = variant_build(g, "lang/std/flash_attention_ws.tile", defs, &ws);
  uint64_t q = dev_bf16(g, n, 1, true), k = dev_bf16(g, n, 2, true), v = dev_bf16(g, n, 3, true);
  uint64_t o1 = dev_bf16(g, n, 0, false), o2 = dev_bf16(g, n, 0, false);
  /* the ws forward's lse: [batch * heads, seqlen] f32 (as many bytes as
   * ATTN_TOKENS * heads * 4 = 2 bf16 per row and head) */
  uint64_t lse = dev_bf16(g, (size_t)ATTN_TOKENS * heads * 2, 0, false);
  double scale = 1.0 / sqrt((double)s->dim);
  int64_t per_head = (int64_t)s->seqlen * s->dim;
  if (have_fwd && q && k && v && o1) {
    AttnLaunch l = {.nk = 1};
    l.k[0] = fwd.kernel;
    l.grid[0][0] = (uint32_t)((s->seqlen + variant_const(&fwd, "BLOCK_M", 128) - 1) / variant_const(&fwd, "BLOCK_M", 128));
    l.grid[0][1] = (uint32_t)(batch * heads), l.grid[0][2] = 1;
    tile_arg a[10] = {tile_arg_ptr(o1), tile_arg_ptr(q), tile_arg_ptr(k), tile_arg_ptr(v), tile_arg_i64(s->seqlen),
                      tile_arg_i64(heads), tile_arg_f64(scale), tile_arg_i64(heads * per_head), tile_arg_i64(per_head),
                      tile_arg_i64(s->dim)};
    memcpy(l.args[0], a, sizeof a), l.nargs[0] = 10;
    double ms = bench_time_ms(g, do_attn, &l);
    snprintf(name, sizeof name, "attention fwd %s tile cp.async (flash_attention.tile)", what);
    if (ms > 0) bench_add_row(name, flops(s, batch, heads) / (ms * 1e9), 0, "TFLOP/s");
  }
  if (have_ws && q && k && v && o2 && lse) {
    int64_t rows = (int64_t)batch * heads * s->seqlen;
    tile_tensor tq = {q, 2, {rows, s->dim}, {s->dim, 1}}, tk = {k, 2, {rows, s->dim}, {s->dim, 1}};
    tile_tensor tv = {v, 2, {rows, s->dim}, {s->dim, 1}};
    AttnLaunch l = {.nk = 1};
    l.k[0] = ws.kernel;
    int64_t bm = variant_const(&ws, "BLOCK_M", 128);
    l.grid[0][0] = (uint32_t)((s->seqlen + bm - 1) / bm), l.grid[0][1] = (uint32_t)(batch * heads), l.grid[0][2] = 1;
    /* (cu_q, cu_k: not read without VARLEN) */
    tile_arg a[11] = {tile_arg_ptr(o2),        tile_arg_ptr(lse),    tile_arg_tensor(&tq), tile_arg_tensor(&tk),
                      tile_arg_tensor(&tv),    tile_arg_ptr(lse),    tile_arg_ptr(lse),    tile_arg_i64(s->seqlen),
                      tile_arg_i64(heads),     tile_arg_i64(heads),  tile_arg_f64(scale)};
    memcpy(l.args[0], a, sizeof a), l.nargs[0] = 11;
    double ms = bench_time_ms(g, do_attn, &l);
    snprintf(name, sizeof name, "attention fwd %s tile ws 1+2 wg TMA (flash_attention_ws.tile)", what);
    if (ms > 0) bench_add_row(name, flops(s, batch, heads) / (ms * 1e9), 0, "TFLOP/s");
    if (ms > 0 && have_fwd) {
      double e = agreement(g, o2, o1, n);
      printf("  %s: the two forwards %s (relative difference %.3g)\n", what, e <= ATTN_AGREE_TOL ? "agree" : "DISAGREE", e);
    }
    /* TILE_BENCH_ATTN_PERSISTENT=1: the persistent experiment
     * (tests/kernels/attention_persistent.tile), printed, checked against
     * the ws forward's output */
    const char *pers = getenv("TILE_BENCH_ATTN_PERSISTENT");
    Variant pv;
    if (ms > 0 && pers && *pers && o1 && variant_build(g, "tests/kernels/attention_persistent.tile", defs, &pv)) {
      AttnLaunch pl = {.nk = 1};
      pl.k[0] = pv.kernel;
      uint32_t tiles = (uint32_t)((s->seqlen + bm - 1) / bm) * (uint32_t)(batch * heads);
      uint32_t sms = (uint32_t)g->props.sm_count;
      pl.grid[0][0] = tiles < sms ? tiles : sms, pl.grid[0][1] = 1, pl.grid[0][2] = 1;
      tile_arg pa[10] = {tile_arg_ptr(o1),          tile_arg_ptr(lse),       tile_arg_tensor(&tq), tile_arg_tensor(&tk),
                         tile_arg_tensor(&tv),      tile_arg_i64(batch),     tile_arg_i64(s->seqlen),
                         tile_arg_i64(heads),       tile_arg_i64(heads),     tile_arg_f64(scale)};
      memcpy(pl.args[0], pa, sizeof pa), pl.nargs[0] = 10;
      /* poisoned first (all-ones bf16 is NaN): a kernel that writes
       * nothing cannot agree */
      double pms = tile_memset_d8(g->rt, o1, 0xFF, n * 2) == TILE_OK ? bench_time_ms(g, do_attn, &pl) : -1;
      double e = pms > 0 ? agreement(g, o1, o2, n) : -1;
      printf("persistent %s: %.4f ms, %.1f TFLOP/s (ws %.4f ms, %.1f): %s the ws forward (relative difference %.3g)\n",
             what, pms, pms > 0 ? flops(s, batch, heads) / (pms * 1e9) : 0.0, ms, flops(s, batch, heads) / (ms * 1e9),
             e >= 0 && e <= ATTN_AGREE_TOL ? "agrees with" : "DISAGREES with", e);
      variant_free(&pv);
    }
    /* the forms of the loop beside the default (at d64 two key blocks per
     * iteration with Q in registers, at d128 one block with turns: one of
     * the rows repeats it), each poisoned and checked against the
     * default's output */
    static const struct {
      const char *name, *two, *qreg, *turns;
    } forms[] = {{"one key block per iteration", "false", "false", "false"},
                 {"two key blocks per iteration, Q in shared memory", "true", "false", "false"},
                 {"two key blocks per iteration, Q in registers", "true", "true", "false"},
                 {"one key block per iteration, warpgroups take turns", "false", "false", "true"},
                 {"one key block per iteration, warpgroups take turns, Q in registers", "false", "true", "true"},
                 {"two key blocks per iteration, warpgroups take turns", "true", "true", "true"}};
    /* TILE_BENCH_ATTN_FP8_ONLY=1: the bf16 default beside the fp8 rows only */
    const char *fp8_only = getenv("TILE_BENCH_ATTN_FP8_ONLY");
    bool forms_too = !(fp8_only && *fp8_only);
    for (size_t f = 0; forms_too && f < sizeof forms / sizeof forms[0] && ms > 0 && o1 && s->dim <= 128; f++) {
      bool two = forms[f].two[0] == 't';
      const char *alt_defs[] = {"HEAD_DIM", dim, "CAUSAL", s->causal ? "true" : "false", "TWO_BLOCKS", forms[f].two,
                                "Q_IN_REGISTERS", forms[f].qreg, "BLOCK_N", s->dim == 128 && two ? "64" : "128",
                                "TURNS", forms[f].turns, NULL};
      Variant tb;
      if (!variant_build(g, "lang/std/flash_attention_ws.tile", alt_defs, &tb)) continue;
      time_form(g, &l, &tb, o1, o2, n, s, batch, heads, what, forms[f].name);
      variant_free(&tb);
    }
    Variant nw;
    if (forms_too && ms > 0 && o1 && s->dim <= 128 && build_without_ws(g, dim, s->causal, &nw)) {
      time_form(g, &l, &nw, o1, o2, n, s, batch, heads, what, "one key block per iteration, no warp specialization");
      variant_free(&nw);
    }
  }
  /* fp8 e4m3 inputs with per-tensor scales, reported against the bf16 anchors */
  Variant f8;
  if (s->dim <= 128 && variant_build(g, "lang/std/flash_attention_fp8.tile", defs, &f8)) {
    DBuf x[3];
    memset(x, 0, sizeof x);
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) {
      Rng r = {20 + (uint64_t)i};
      ok = dbuf_alloc(g, &x[i], "x", "f8e4m3", n);
      if (ok) dbuf_fill(&x[i], &r, -200, 200), ok = dbuf_upload(g, &x[i]);
    }
    if (ok && o1) {
      AttnLaunch l = {.nk = 1};
      l.k[0] = f8.kernel;
      int64_t bm = variant_const(&f8, "BLOCK_M", 128);
      l.grid[0][0] = (uint32_t)((s->seqlen + bm - 1) / bm), l.grid[0][1] = (uint32_t)(batch * heads), l.grid[0][2] = 1;
      tile_arg a[13] = {tile_arg_ptr(o1), tile_arg_ptr(x[0].dev), tile_arg_ptr(x[1].dev), tile_arg_ptr(x[2].dev),
                        tile_arg_i64(s->seqlen), tile_arg_i64(heads), tile_arg_f64(scale), tile_arg_f64(1.0 / 200),
                        tile_arg_f64(1.0 / 200), tile_arg_f64(1.0 / 200), tile_arg_i64(heads * per_head),
                        tile_arg_i64(per_head), tile_arg_i64(s->dim)};
      memcpy(l.args[0], a, sizeof a), l.nargs[0] = 13;
      double ms = bench_time_ms(g, do_attn, &l);
      snprintf(name, sizeof name, "attention fwd %s tile fp8 e4m3 (flash_attention_fp8.tile)", what);
      if (ms > 0) bench_add_row(name, flops(s, batch, heads) / (ms * 1e9), 0, "TFLOP/s");
      for (int form = 0; form < 4 && ms > 0 && o2; form++)
        bench_ws_fp8(g, s, x, o1, o2, n, batch, heads, scale, what, form & 1, form >> 1);
      const char *pair = getenv("TILE_BENCH_ATTN_FP8_PAIR");
      if (ms > 0 && o2 && pair && *pair) compare_fp8_p_forms(g, s, x, o1, o2, n, batch, heads, scale, what);
      if (ms > 0 && o2) bench_fp8_api(g, s, x, o1, o2, n, batch, heads, what);
    }
    for (int i = 0; i < 3; i++) dbuf_free(g, &x[i]);
    variant_free(&f8);
  }
  if (have_fwd) variant_free(&fwd);
  if (have_ws) variant_free(&ws);
  uint64_t bufs[] = {q, k, v, o1, o2, lse};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) tile_mem_free(g->rt, bufs[i]);
}

/* Milliseconds of v's kernel over the 16k-token backward's grid: the
 * const block rows per program along x, bh programs along y. */
static double time_one_kernel(Gpu *g, const Variant *v, const char *block, uint32_t bh, const tile_arg *a, int n) {
  AttnLaunch l = {.nk = 1};
  l.k[0] = v->kernel, l.nargs[0] = n;
  memcpy(l.args[0], a, sizeof(tile_arg) * (size_t)n);
  l.grid[0][0] = (uint32_t)(BWD_SEQLEN / variant_const(v, block, 128)), l.grid[0][1] = bh, l.grid[0][2] = 1;
  return bench_time_ms(g, do_attn, &l);
}

/* A build of the backward's dk/dv and dq kernels for a sweep: BLOCK_M,
 * BLOCK_N and STAGES, given to both. */
typedef struct BwdConfig {
  char bm[BWD_FIELD_CHARS], bn[BWD_FIELD_CHARS], stages[BWD_FIELD_CHARS];
  bool atomic_dq; /* the defaults, then tests/kernels/attention_bwd_atomic_dq.tile against them */
} BwdConfig;

#define BWD_WS_FILE "lang/std/flash_attention_bwd_ws.tile"

#define ATOMIC_DQ_FILE "tests/kernels/attention_bwd_atomic_dq.tile"
/* attention_dq_convert's elements per program (its BLOCK). */
#define DQ_CONVERT_BLOCK 1024

/* The experiment's step: dq_acc zeroed, delta, dk/dv with dq's atomics,
 * dq rounded. */
typedef struct AtomicStep {
  Gpu *g;
  uint64_t dq_acc;
  size_t bytes;
  AttnLaunch l;
} AtomicStep;

static bool do_atomic_step(void *ctx) {
  AtomicStep *a = ctx;
  return tile_memset_d8(a->g->rt, a->dq_acc, 0, a->bytes) == TILE_OK && do_attn(&a->l);
}

/* One timed backward, for the experiments to be compared with: its
 * buffers (q, k, v, dout; dq, dk, dv as computed; lse, delta), the launch
 * of its three kernels and its times. */
typedef struct BwdRun {
  bool causal;
  uint32_t bh;        /* batch * heads */
  size_t n;           /* elements of each of q, k, v, dout, dq, dk, dv */
  double scale, flop; /* sm_scale; the backward's operations */
  uint64_t q, k, v, dout, dq, dk, dv, lse, delta;
  const char *const *defs; /* HEAD_DIM and CAUSAL */
  tile_arg sc[10];         /* the kernels' scalars, seqlen to kv_stride_n */
  AttnLaunch b;            /* delta, dk/dv, dq */
  double ms, ms_k[3];      /* the three together, each alone */
} BwdRun;

/* dq accumulated by the dk/dv kernel (ATOMIC_DQ_FILE) against r. */
static void bwd_atomic(Gpu *g, const BwdRun *r) {
  Variant fused = {0}, conv = {0};
  uint64_t acc = 0, dq2 = dev_bf16(g, r->n, 0, false), dk2 = dev_bf16(g, r->n, 0, false);
  uint64_t dv2 = dev_bf16(g, r->n, 0, false);
  AtomicStep a = {.g = g, .bytes = r->n * sizeof(float)};
  if (dq2 && dk2 && dv2 && tile_mem_alloc(g->rt, a.bytes, &acc) == TILE_OK &&
      variant_build_kernel(g, ATOMIC_DQ_FILE, "attention_bwd_dkdv_dq", r->defs, &fused) &&
      variant_build_kernel(g, ATOMIC_DQ_FILE, "attention_dq_convert", NULL, &conv)) {
    a.dq_acc = acc, a.l.nk = 3;
    a.l.k[0] = r->b.k[0], a.l.k[1] = fused.kernel, a.l.k[2] = conv.kernel;
    memcpy(a.l.args[0], r->b.args[0], sizeof r->b.args[0]), a.l.nargs[0] = r->b.nargs[0];
    memcpy(a.l.grid[0], r->b.grid[0], sizeof r->b.grid[0]);
    /* dk/dv's arguments after dq_acc, into dk2 and dv2 */
    a.l.args[1][0] = tile_arg_ptr(acc);
    memcpy(a.l.args[1] + 1, r->b.args[1], (size_t)r->b.nargs[1] * sizeof(tile_arg));
    a.l.args[1][1] = tile_arg_ptr(dk2), a.l.args[1][2] = tile_arg_ptr(dv2);
    a.l.nargs[1] = r->b.nargs[1] + 1;
    uint32_t gf[3] = {(uint32_t)(BWD_SEQLEN / variant_const(&fused, "BLOCK_N", 128)), r->bh, 1};
    memcpy(a.l.grid[1], gf, sizeof gf);
    tile_arg ca[4] = {tile_arg_ptr(dq2), tile_arg_ptr(acc), tile_arg_i64((int64_t)r->n), tile_arg_f64(r->scale)};
    memcpy(a.l.args[2], ca, sizeof ca), a.l.nargs[2] = 4;
    uint32_t gc[3] = {(uint32_t)((r->n + DQ_CONVERT_BLOCK - 1) / DQ_CONVERT_BLOCK), 1, 1};
    memcpy(a.l.grid[2], gc, sizeof gc);
    double ms_a = bench_time_ms(g, do_atomic_step, &a);
    double ms_f = ms_a > 0 ? time_one_kernel(g, &fused, "BLOCK_N", r->bh, a.l.args[1], a.l.nargs[1]) : -1;
    /* the outputs of one step from zero */
    bool ran = ms_a > 0 && do_atomic_step(&a) && tile_synchronize(g->rt) == TILE_OK;
    printf("bwd atomic dq d128 16k %s: %.1f TFLOP/s (%.3f ms; dkdv+dq %.3f ms) against %.1f (%.3f ms); "
           "dq agrees to %.2g, dk %.2g, dv %.2g\n",
           r->causal ? "causal" : "full", ms_a > 0 ? r->flop / (ms_a * 1e9) : 0, ms_a, ms_f, r->flop / (r->ms * 1e9),
           r->ms, ran ? agreement(g, dq2, r->dq, r->n) : INFINITY, ran ? agreement(g, dk2, r->dk, r->n) : INFINITY,
           ran ? agreement(g, dv2, r->dv, r->n) : INFINITY);
  } else {
    printf("bwd atomic dq: not built: %s\n", tile_last_error());
  }
  if (fused.kernel) variant_free(&fused);
  if (conv.kernel) variant_free(&conv);
  uint64_t fr[4] = {acc, dq2, dk2, dv2};
  for (int i = 0; i < 4; i++)
    if (fr[i]) tile_mem_free(g->rt, fr[i]);
}

/* TILE_BENCH_BWD_POLL: each warp-specialized backward kernel (w: dk/dv,
 * wq: dq, on their arguments wa and qa) against a build whose mbarrier
 * waits poll without try_wait's suspend-time hint
 * (tc_codegen_options.mbar_poll), three times each. */
static void bwd_ws_poll(Gpu *g, const BwdRun *r, const char *file, const Variant *w, const Variant *wq,
                        const tile_arg *wa, const tile_arg *qa) {
  tc_codegen_options po = {.linker = TC_LINKER_AUTO, .mbar_poll = true};
  Variant pw = {0}, pq = {0};
  if (variant_build_kernel_opts(g, file, "attention_bwd_dkdv_ws", r->defs, &po, &pw) &&
      variant_build_kernel_opts(g, file, "attention_bwd_dq_ws", r->defs, &po, &pq)) {
    for (int rep = 0; rep < 3; rep++) {
      double a = time_one_kernel(g, w, "BLOCK_N", r->bh, wa, 12), b = time_one_kernel(g, &pw, "BLOCK_N", r->bh, wa, 12);
      double c = time_one_kernel(g, wq, "BLOCK_M", r->bh, qa, 11), d = time_one_kernel(g, &pq, "BLOCK_M", r->bh, qa, 11);
      printf("bwd ws poll %s rep %d: dkdv hint %.3f poll %.3f ms; dq hint %.3f poll %.3f ms\n",
             r->causal ? "causal" : "full", rep, a, b, c, d);
    }
  }
  if (pw.kernel) variant_free(&pw);
  if (pq.kernel) variant_free(&pq);
}

/* TILE_BENCH_BWD_TURNS: the dq kernel (wq on qa, writing dq into qa[0]'s
 * buffer `dq`) against a build whose consumer warpgroups take turns
 * (TURNS), alternately three times each, and the turns build's dq (into a
 * buffer of its own, poisoned first) against wq's. */
static void bwd_ws_turns(Gpu *g, const BwdRun *r, const char *file, const Variant *wq, const tile_arg *qa,
                         uint64_t dq) {
  const char *defs[8] = {NULL};
  int n = 0;
  while (r->defs[n] && n < 6) defs[n] = r->defs[n], n++;
  defs[n] = "TURNS", defs[n + 1] = "true";
  Variant tq = {0};
  uint64_t spare = dev_bf16(g, r->n, 0, false);
  if (!spare || !variant_build_kernel(g, file, "attention_bwd_dq_ws", defs, &tq)) {
    printf("bwd ws turns: not built: %s\n", tile_last_error());
    if (spare) tile_mem_free(g->rt, spare);
    return;
  }
  tile_arg ta[11];
  memcpy(ta, qa, sizeof ta);
  ta[0] = tile_arg_ptr(spare);
  for (int rep = 0; rep < 3; rep++) {
    double a = time_one_kernel(g, wq, "BLOCK_M", r->bh, qa, 11), b = time_one_kernel(g, &tq, "BLOCK_M", r->bh, ta, 11);
    printf("bwd ws turns %s rep %d: dq %.3f ms, with turns %.3f ms\n", r->causal ? "causal" : "full", rep, a, b);
  }
  bool ran = tile_memset_d8(g->rt, spare, 0xFF, r->n * 2) == TILE_OK &&
             time_one_kernel(g, &tq, "BLOCK_M", r->bh, ta, 11) > 0 && tile_synchronize(g->rt) == TILE_OK;
  printf("bwd ws turns %s: dq with turns agrees with dq to %.2g\n", r->causal ? "causal" : "full",
         ran ? agreement(g, spare, dq, r->n) : INFINITY);
  variant_free(&tq);
  tile_mem_free(g->rt, spare);
}

/* The backward through flash_attention_bwd_ws.tile (what tile_attention.h
 * runs for contiguous tensors): delta, then the warp-specialized dk/dv and
 * dq, timed together and each alone against r's kernels, their outputs
 * against r's; with row, the step as the table's row. */
static void bwd_ws(Gpu *g, const BwdRun *r, bool row) {
  Variant w = {0}, wq = {0};
  const char *what = r->causal ? "causal" : "full";
  uint64_t x[3] = {dev_bf16(g, r->n, 0, false), dev_bf16(g, r->n, 0, false), dev_bf16(g, r->n, 0, false)};
  const char *file = BWD_WS_FILE;
  if (!x[0] || !x[1] || !x[2] || !variant_build_kernel(g, file, "attention_bwd_dkdv_ws", r->defs, &w) ||
      !variant_build_kernel(g, file, "attention_bwd_dq_ws", r->defs, &wq)) {
    printf("bwd ws: not built: %s\n", tile_last_error());
  } else {
    int64_t rows = (int64_t)r->n / ATTN_HEAD_DIM_BWD;
    tile_tensor tq = {r->q, 2, {rows, ATTN_HEAD_DIM_BWD}, {ATTN_HEAD_DIM_BWD, 1}};
    tile_tensor tk = tq, tv = tq, td = tq;
    tk.ptr = r->k, tv.ptr = r->v, td.ptr = r->dout;
    /* dk, dv into x[1], x[2]; dq into x[0] */
    tile_arg wa[12] = {tile_arg_ptr(x[1]),    tile_arg_ptr(x[2]),       tile_arg_tensor(&tq), tile_arg_tensor(&tk),
                       tile_arg_tensor(&tv),  tile_arg_tensor(&td),     tile_arg_ptr(r->lse), tile_arg_ptr(r->delta),
                       r->sc[0],              r->sc[1],                 r->sc[2],             r->sc[3]};
    tile_arg qa[11] = {tile_arg_ptr(x[0])};
    memcpy(qa + 1, wa + 2, 10 * sizeof(tile_arg));
    AttnLaunch l = {.nk = 3};
    l.k[0] = r->b.k[0], l.k[1] = w.kernel, l.k[2] = wq.kernel;
    memcpy(l.args[0], r->b.args[0], sizeof r->b.args[0]), l.nargs[0] = r->b.nargs[0];
    memcpy(l.args[1], wa, sizeof wa), l.nargs[1] = 12;
    memcpy(l.args[2], qa, sizeof qa), l.nargs[2] = 11;
    memcpy(l.grid[0], r->b.grid[0], sizeof r->b.grid[0]);
    uint32_t g1[3] = {(uint32_t)(BWD_SEQLEN / variant_const(&w, "BLOCK_N", 128)), r->bh, 1};
    uint32_t g2[3] = {(uint32_t)(BWD_SEQLEN / variant_const(&wq, "BLOCK_M", 128)), r->bh, 1};
    memcpy(l.grid[1], g1, sizeof g1), memcpy(l.grid[2], g2, sizeof g2);
    double ms = bench_time_ms(g, do_attn, &l);
    double ms_w = ms > 0 ? time_one_kernel(g, &w, "BLOCK_N", r->bh, wa, 12) : -1;
    double ms_q = ms > 0 ? time_one_kernel(g, &wq, "BLOCK_M", r->bh, qa, 11) : -1;
    if (ms > 0 && getenv("TILE_BENCH_BWD_POLL")) bwd_ws_poll(g, r, file, &w, &wq, wa, qa);
    if (ms > 0 && getenv("TILE_BENCH_BWD_TURNS")) bwd_ws_turns(g, r, file, &wq, qa, x[0]);
    bool ran = ms > 0 && tile_synchronize(g->rt) == TILE_OK;
    printf("bwd ws d128 16k %s: %.3f ms (dkdv %.3f, dq %.3f) against flash_attention_bwd.tile's %.3f (dkdv %.3f, "
           "dq %.3f); dq agrees to %.2g, dk %.2g, dv %.2g\n",
           what, ms, ms_w, ms_q, r->ms, r->ms_k[1], r->ms_k[2], ran ? agreement(g, x[0], r->dq, r->n) : INFINITY,
           ran ? agreement(g, x[1], r->dk, r->n) : INFINITY, ran ? agreement(g, x[2], r->dv, r->n) : INFINITY);
    char name[ATTN_NAME_BYTES];
    snprintf(name, sizeof name, "attention bwd d128 16k %s tile (flash_attention_bwd_ws.tile)", what);
    if (row && ms > 0) bench_add_row(name, r->flop / (ms * 1e9), 0, "TFLOP/s");
  }
  if (w.kernel) variant_free(&w);
  if (wq.kernel) variant_free(&wq);
  for (int i = 0; i < 3; i++)
    if (x[i]) tile_mem_free(g->rt, x[i]);
}

/* The backward at d128: delta, dk/dv and dq, from the training forward's
 * out and lse; with cfg, the dk/dv and dq kernels of that build (a sweep
 * row) or the defaults against an experiment, else the defaults as table
 * rows. Each kernel's time alone is printed too. */
static void bench_backward(Gpu *g, bool causal, const BwdConfig *cfg) {
  const int dim = ATTN_HEAD_DIM_BWD, seqlen = BWD_SEQLEN, batch = ATTN_TOKENS / seqlen, heads = ATTN_HIDDEN / dim;
  size_t n = (size_t)ATTN_TOKENS * ATTN_HIDDEN, rows = (size_t)batch * heads * seqlen;
  const char *names[4] = {"attention_fwd_lse", "attention_bwd_preprocess", "attention_bwd_dkdv", "attention_bwd_dq"};
  const char *defs[] = {"HEAD_DIM", "128", "CAUSAL", causal ? "true" : "false", NULL};
  const char *pre_defs[] = {"HEAD_DIM", "128", NULL};
  const char *cfg_defs[] = {"HEAD_DIM", "128", "CAUSAL", causal ? "true" : "false", "BLOCK_M", cfg ? cfg->bm : "",
                            "BLOCK_N", cfg ? cfg->bn : "", "STAGES", cfg ? cfg->stages : "", NULL};
  bool experiment = cfg && cfg->atomic_dq, custom = cfg && !experiment; /* custom: a sweep build */
  Variant v[4];
  memset(v, 0, sizeof v);
  bool ok = true;
  for (int i = 0; i < 4 && ok; i++)
    ok = variant_build_kernel(g, "lang/std/flash_attention_bwd.tile", names[i],
                              i == 1 ? pre_defs : (custom && i >= 2 ? cfg_defs : defs), &v[i]);
  uint64_t t[9] = {0};
  for (int i = 0; i < 7 && ok; i++) ok = (t[i] = dev_bf16(g, n, 10 + i, i < 4)) != 0; /* q k v dout | out dq dk */
  DBuf f32a = {0}, f32b = {0};
  ok = ok && dbuf_alloc(g, &f32a, "lse", "f32", rows) && dbuf_alloc(g, &f32b, "delta", "f32", rows);
  uint64_t dv = ok ? dev_bf16(g, n, 0, false) : 0;
  if (ok && dv) {
    uint64_t q = t[0], k = t[1], vv = t[2], dout = t[3], out = t[4], dq = t[5], dk = t[6];
    int64_t sb = (int64_t)heads * seqlen * dim, sh = (int64_t)seqlen * dim, sn = dim;
    AttnShape s = {dim, seqlen, causal};
    BwdRun r = {.causal = causal, .bh = (uint32_t)(batch * heads), .n = n, .scale = 1.0 / sqrt((double)dim),
                .flop = 2.5 * flops(&s, batch, heads), .q = q, .k = k, .v = vv, .dout = dout, .dq = dq, .dk = dk,
                .dv = dv, .lse = f32a.dev, .delta = f32b.dev, .defs = defs, .b = {.nk = 3}};
    tile_arg sc[10] = {tile_arg_i64(seqlen), tile_arg_i64(heads), tile_arg_i64(heads), tile_arg_f64(r.scale),
                       tile_arg_i64(sb),     tile_arg_i64(sh),    tile_arg_i64(sn),    tile_arg_i64(sb),
                       tile_arg_i64(sh),     tile_arg_i64(sn)};
    memcpy(r.sc, sc, sizeof sc);
    AttnLaunch f = {.nk = 1};
    f.k[0] = v[0].kernel;
    tile_arg fa[15] = {tile_arg_ptr(out), tile_arg_ptr(f32a.dev), tile_arg_ptr(q), tile_arg_ptr(k), tile_arg_ptr(vv)};
    memcpy(fa + 5, sc, sizeof sc), memcpy(f.args[0], fa, sizeof fa), f.nargs[0] = 15;
    f.grid[0][0] = (uint32_t)(seqlen / variant_const(&v[0], "BLOCK_M", 128)), f.grid[0][1] = r.bh, f.grid[0][2] = 1;
    ok = do_attn(&f) && tile_synchronize(g->rt) == TILE_OK; /* out and lse for the backward */
    AttnLaunch *b = &r.b;
    tile_arg pa[8] = {tile_arg_ptr(f32b.dev), tile_arg_ptr(out), tile_arg_ptr(dout), sc[0], sc[1], sc[4], sc[5], sc[6]};
    tile_arg ka[18] = {tile_arg_ptr(dk),   tile_arg_ptr(dv),       tile_arg_ptr(q),        tile_arg_ptr(k),
                       tile_arg_ptr(vv),   tile_arg_ptr(dout),     tile_arg_ptr(f32a.dev), tile_arg_ptr(f32b.dev)};
    tile_arg qa[17] = {tile_arg_ptr(dq),   tile_arg_ptr(q),        tile_arg_ptr(k),        tile_arg_ptr(vv),
                       tile_arg_ptr(dout), tile_arg_ptr(f32a.dev), tile_arg_ptr(f32b.dev)};
    memcpy(ka + 8, sc, sizeof sc), memcpy(qa + 7, sc, sizeof sc);
    for (int i = 0; i < 3; i++) b->k[i] = v[i + 1].kernel;
    memcpy(b->args[0], pa, sizeof pa), b->nargs[0] = 8;
    memcpy(b->args[1], ka, sizeof ka), b->nargs[1] = 18;
    memcpy(b->args[2], qa, sizeof qa), b->nargs[2] = 17;
    uint32_t g0[3] = {(uint32_t)(seqlen / variant_const(&v[1], "BLOCK_M", 64)), r.bh, 1};
    uint32_t g1[3] = {(uint32_t)(seqlen / variant_const(&v[2], "BLOCK_N", 64)), r.bh, 1};
    uint32_t g2[3] = {(uint32_t)(seqlen / variant_const(&v[3], "BLOCK_M", 64)), r.bh, 1};
    memcpy(b->grid[0], g0, sizeof g0), memcpy(b->grid[1], g1, sizeof g1), memcpy(b->grid[2], g2, sizeof g2);
    r.ms = ok ? bench_time_ms(g, do_attn, b) : -1;
    r.ms_k[0] = r.ms > 0 ? time_one_kernel(g, &v[1], "BLOCK_M", r.bh, pa, 8) : -1; /* each kernel alone */
    r.ms_k[1] = r.ms > 0 ? time_one_kernel(g, &v[2], "BLOCK_N", r.bh, ka, 18) : -1;
    r.ms_k[2] = r.ms > 0 ? time_one_kernel(g, &v[3], "BLOCK_M", r.bh, qa, 17) : -1;
    const char *what = causal ? "causal" : "full";
    if (r.ms > 0 && cfg && cfg->atomic_dq) bwd_atomic(g, &r); /* against the outputs just computed */
    if (experiment) {
      printf("bwd d128 16k %s (defaults): %.3f ms\n", what, r.ms);
    } else if (cfg) {
      printf("bwd sweep d128 16k %s BLOCK_M %s BLOCK_N %s STAGES %s: %.1f TFLOP/s (%.3f ms; delta %.3f, dkdv %.3f, dq %.3f)\n",
             what, cfg->bm, cfg->bn, cfg->stages, r.ms > 0 ? r.flop / (r.ms * 1e9) : 0, r.ms, r.ms_k[0], r.ms_k[1],
             r.ms_k[2]);
    } else {
      printf("bwd d128 16k %s: delta %.3f ms, dkdv %.3f ms, dq %.3f ms\n", what, r.ms_k[0], r.ms_k[1], r.ms_k[2]);
      char name[ATTN_NAME_BYTES];
      snprintf(name, sizeof name, "attention bwd d128 16k %s tile (flash_attention_bwd.tile)", what);
      if (r.ms > 0) bench_add_row(name, r.flop / (r.ms * 1e9), 0, "TFLOP/s");
      if (r.ms > 0) bwd_ws(g, &r, true);
    }
  }
  for (int i = 0; i < 4; i++)
    if (v[i].kernel) variant_free(&v[i]);
  for (int i = 0; i < 7; i++)
    if (t[i]) tile_mem_free(g->rt, t[i]);
  if (dv) tile_mem_free(g->rt, dv);
  if (f32a.host) dbuf_free(g, &f32a);
  if (f32b.host) dbuf_free(g, &f32b);
}

/* TILE_BENCH_BWD_SWEEP="BM:BN:S,...": the backward (full and causal) with
 * each build of its dk/dv and dq kernels. "default": the defaults, as
 * the table's rows (with flash_attention_bwd_ws.tile's); "atomic": the
 * defaults against dq accumulated by the dk/dv kernel
 * (tests/kernels/attention_bwd_atomic_dq.tile). Malformed entries are skipped
 * with a message. */
static void bwd_sweep(Gpu *g, const char *list) {
  for (const char *at = list; *at;) {
    size_t len = strcspn(at, ",");
    BwdConfig c;
    char entry[3 * BWD_FIELD_CHARS];
    if (len < sizeof entry) {
      memcpy(entry, at, len), entry[len] = 0;
      int bm, bn, st;
      if (strcmp(entry, "default") == 0) { /* the kernels' own defaults, as table rows */
        bench_backward(g, false, NULL);
        bench_backward(g, true, NULL);
      } else if (strcmp(entry, "atomic") == 0) {
        BwdConfig a = {.atomic_dq = true};
        bench_backward(g, false, &a);
        bench_backward(g, true, &a);
      } else if (sscanf(entry, "%d:%d:%d", &bm, &bn, &st) == 3 && bm > 0 && bn > 0 && st > 0 && bm < 1000 && bn < 1000 &&
          st < 100) {
        snprintf(c.bm, sizeof c.bm, "%d", bm), snprintf(c.bn, sizeof c.bn, "%d", bn);
        snprintf(c.stages, sizeof c.stages, "%d", st);
        bench_backward(g, false, &c);
        bench_backward(g, true, &c);
      } else {
        printf("TILE_BENCH_BWD_SWEEP: '%s' is not BLOCK_M:BLOCK_N:STAGES\n", entry);
      }
    }
    at += len;
    at += *at == ',';
  }
}

void bench_attention(Gpu *g) {
  const char *sweep = getenv("TILE_BENCH_BWD_SWEEP");
  if (sweep && *sweep) { /* the backward's builds only */
    bwd_sweep(g, sweep);
    return;
  }
  /* TILE_BENCH_ATTN_ONLY: the forward shapes it names, or "backward" for
   * the backward's rows alone */
  const char *only = getenv("TILE_BENCH_ATTN_ONLY");
  bool backward_only = only && !strcmp(only, "backward");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !backward_only; i++)
    if (!only || !*only || shape_chosen(&shapes[i], only)) bench_shape(g, &shapes[i]);
  if (only && *only && !backward_only) return;
  const char *pers = getenv("TILE_BENCH_ATTN_PERSISTENT");
  if (pers && *pers) return; /* the forward experiment only */
  bench_backward(g, false, NULL);
  bench_backward(g, true, NULL);
}
