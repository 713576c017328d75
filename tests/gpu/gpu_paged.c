/* gpu_paged.c - GPU cases of tile_paged.h (lang/std/paged_decode.tile's
 * embedded builds): decode over a paged cache against a float64
 * reference on the gathered K/V, ragged lengths from 1 to 40,000, every
 * page size, GQA 1/4/8, split and unsplit plans, NHD and HND, bf16, e4m3
 * and int4 caches (the reference on the dequantized values); prefill with
 * cached prefixes (and none), causal and full, over the same caches;
 * appending to a bf16 and an e4m3 cache; copying and swapping pages.
 * Outputs are poisoned first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "tile_paged.h"

#define PAGED_MAX_BATCH 80
/* bf16 outputs, f32 sums in another order; lse in f32 */
#define PAGED_OUT_TOL 1e-2
#define PAGED_LSE_TOL 1e-3
/* prefill over an e4m3 or int4 cache: the dequantized keys are rounded to
 * bf16 for the tensor cores (one rounding more than the reference makes),
 * and a block of queries sees them all */
#define PAGED_LSE_TOL_QUANT 1e-2

typedef struct PagedCase {
  const char *name;
  int batch, heads, heads_kv, head_dim, page;
  tile_paged_kv_type kv;
  bool hnd;
  int lens[8]; /* the first lengths; the rest (up to batch) from the rng in [1, lens[7]] when lens[7] > 0 and
                  batch > 7 */
  int want_splits; /* the plan's splits: 1 unsplit, 2 split (more than one) */
} PagedCase;

static const PagedCase cases[] = {
    {"paged decode d128 page16 gqa4 lengths 1-40000 (split)", 4, 16, 4, 128, 16, TILE_PAGED_KV_BF16, false,
     {1, 300, 5000, 40000}, 2},
    {"paged decode d64 page1 gqa1 batch 70 (unsplit)", 70, 8, 8, 64, 1, TILE_PAGED_KV_BF16, false,
     {1, 2, 3, 100, 17, 250, 64, 300}, 1},
    {"paged decode d128 page32 gqa8 batch 64 (split)", 64, 32, 4, 128, 32, TILE_PAGED_KV_BF16, false,
     {2000, 1, 33, 1024, 999, 64, 65, 1500}, 2},
    {"paged decode d128 page64 gqa8 HND e4m3 per-head scales (split)", 2, 32, 4, 128, 64, TILE_PAGED_KV_E4M3, true,
     {3000, 777}, 2},
    {"paged decode d64 page16 gqa4 e4m3 batch 40 (unsplit)", 40, 16, 4, 64, 16, TILE_PAGED_KV_E4M3, false,
     {5, 130, 16, 17, 1, 200, 33, 400}, 1},
    {"paged decode d128 page16 gqa4 HND int4 group scales (split)", 3, 16, 4, 128, 16, TILE_PAGED_KV_INT4, true,
     {2500, 1, 700}, 2},
};

typedef struct Cache {
  int lens[PAGED_MAX_BATCH];
  int32_t *ids, indptr[PAGED_MAX_BATCH + 1];
  int pages;        /* pages used */
  int pool;         /* pages allocated (some unused, in between) */
  int64_t st[3];    /* strides */
} Cache;

/* A pool with a spare page after every third, the pages of each sequence
 * scattered over it (a stride coprime to the pool size). */
static bool make_cache(const PagedCase *c, Rng *r, Cache *ch) {
  ch->pages = 0;
  for (int b = 0; b < c->batch; b++) {
    int n = b < 8 ? c->lens[b] : 0;
    if (b >= 8 || n == 0) n = 1 + (int)rng_uniform(r, 0, c->lens[7] > 0 ? c->lens[7] : 1);
    ch->lens[b] = n;
    ch->indptr[b] = ch->pages;
    ch->pages += (n + c->page - 1) / c->page;
  }
  ch->indptr[c->batch] = ch->pages;
  ch->pool = ch->pages + ch->pages / 3 + 1;
  int stride = 7;
  while (ch->pool % stride == 0) stride += 2;
  ch->ids = malloc((size_t)ch->pages * sizeof *ch->ids);
  if (!ch->ids) return false;
  for (int i = 0; i < ch->pages; i++) ch->ids[i] = (int32_t)(((int64_t)i * stride + 3) % ch->pool);
  int64_t d = c->head_dim, P = c->page, G = c->heads_kv;
  if (c->hnd) ch->st[0] = P * G * d, ch->st[1] = d, ch->st[2] = P * d;
  else ch->st[0] = P * G * d, ch->st[1] = G * d, ch->st[2] = d;
  return true;
}

/* The float64 reference for sequence b, query head h: out[d] and lse. */
static void reference(const PagedCase *c, const Cache *ch, const double *q, const double *k, const double *v,
                      const float *scale, int b, int h, double sm, double *out, double *lse) {
  int g = h / (c->heads / c->heads_kv), D = c->head_dim, n = ch->lens[b];
  double ks = c->kv == TILE_PAGED_KV_E4M3 ? scale[2 * g] : 1, vs = c->kv == TILE_PAGED_KV_E4M3 ? scale[2 * g + 1] : 1;
  double *s = malloc((size_t)n * sizeof *s), m = -INFINITY, l = 0;
  const double *qh = q + ((size_t)b * c->heads + h) * D;
  for (int t = 0; t < n; t++) {
    int64_t page = ch->ids[ch->indptr[b] + t / c->page];
    const double *kt = k + page * ch->st[0] + (t % c->page) * ch->st[1] + g * ch->st[2];
    double dot = 0;
    for (int d = 0; d < D; d++) dot += qh[d] * kt[d] * ks;
    s[t] = dot * sm;
    m = fmax(m, s[t]);
  }
  for (int d = 0; d < D; d++) out[d] = 0;
  for (int t = 0; t < n; t++) {
    double p = exp(s[t] - m);
    l += p;
    int64_t page = ch->ids[ch->indptr[b] + t / c->page];
    const double *vt = v + page * ch->st[0] + (t % c->page) * ch->st[1] + g * ch->st[2];
    for (int d = 0; d < D; d++) out[d] += p * vt[d] * vs;
  }
  for (int d = 0; d < D; d++) out[d] /= l;
  *lse = m + log(l);
  free(s);
}

/* An int4 cache's n logical values from its bytes (freed here): value x is
 * nibble x % 2 of byte x / 2, times scale x / TILE_PAGED_INT4_GROUP. */
static double *int4_values(double *bytes, const DBuf *scales, size_t n) {
  double *val = bytes ? malloc(n * sizeof *val) : NULL;
  for (size_t x = 0; val && x < n; x++)
    val[x] = ((((int)bytes[x / 2] >> (int)(x % 2) * 4) & 15) - 8) * dbuf_get(scales, x / TILE_PAGED_INT4_GROUP);
  free(bytes);
  return val;
}

static bool run_case(Gpu *g, const tile_paged *pg, const PagedCase *c, uint64_t seed) {
  Rng r = {seed};
  Cache ch = {0};
  if (!make_cache(c, &r, &ch)) return false;
  size_t cache_n = (size_t)ch.pool * c->page * c->heads_kv * c->head_dim;
  size_t rows = (size_t)c->batch * c->heads, qn = rows * c->head_dim;
  bool int4 = c->kv == TILE_PAGED_KV_INT4;
  const char *elem = int4 ? "u8" : c->kv == TILE_PAGED_KV_E4M3 ? "f8e4m3" : "bf16";
  double lo = int4 ? 0 : c->kv == TILE_PAGED_KV_E4M3 ? -400 : -1, hi = int4 ? 255 : -lo;
  size_t stored = int4 ? cache_n / 2 : cache_n, groups = int4 ? cache_n / TILE_PAGED_INT4_GROUP : 1;
  DBuf K = {0}, V = {0}, Q = {0}, O = {0}, L = {0}, S = {0}, I = {0}, IP = {0}, N = {0}, KG = {0}, VG = {0};
  bool ok = dbuf_alloc(g, &K, "k_cache", elem, stored) && dbuf_alloc(g, &V, "v_cache", elem, stored) &&
            dbuf_alloc(g, &KG, "k_scales", "f32", groups) && dbuf_alloc(g, &VG, "v_scales", "f32", groups) &&
            dbuf_alloc(g, &Q, "q", "bf16", qn) && dbuf_alloc(g, &O, "out", "bf16", qn) &&
            dbuf_alloc(g, &L, "lse", "f32", rows) && dbuf_alloc(g, &S, "kv_scale", "f32", 2 * (size_t)c->heads_kv) &&
            dbuf_alloc(g, &I, "page_ids", "i32", (size_t)ch.pages) &&
            dbuf_alloc(g, &IP, "indptr", "i32", (size_t)c->batch + 1) && dbuf_alloc(g, &N, "kv_len", "i32", (size_t)c->batch);
  uint64_t ws = 0;
  if (ok) {
    dbuf_fill(&K, &r, lo, hi), dbuf_fill(&V, &r, lo, hi), dbuf_fill(&Q, &r, -1, 1);
    dbuf_fill(&S, &r, 0.001, 0.005), dbuf_fill(&KG, &r, 0.05, 0.2), dbuf_fill(&VG, &r, 0.05, 0.2);
    dbuf_poison(&O), dbuf_poison(&L);
    for (int i = 0; i < ch.pages; i++) dbuf_set(&I, (size_t)i, ch.ids[i]);
    for (int b = 0; b <= c->batch; b++) dbuf_set(&IP, (size_t)b, ch.indptr[b]);
    int maxlen = 0;
    for (int b = 0; b < c->batch; b++) dbuf_set(&N, (size_t)b, ch.lens[b]), maxlen = ch.lens[b] > maxlen ? ch.lens[b] : maxlen;
    DBuf *all[] = {&K, &V, &Q, &O, &L, &S, &I, &IP, &N, &KG, &VG};
    for (size_t i = 0; i < sizeof all / sizeof all[0] && ok; i++) ok = dbuf_upload(g, all[i]);
    tile_paged_problem p = {.batch = c->batch, .heads = c->heads, .heads_kv = c->heads_kv, .head_dim = c->head_dim,
                            .page_size = c->page, .kv_type = c->kv, .max_kv_len = maxlen};
    if (c->hnd)
      for (int i = 0; i < 3; i++) p.strides[i] = int4 ? ch.st[i] / 2 : ch.st[i]; /* int4: bytes */
    tile_paged_plan plan;
    if (ok && tile_paged_decode_plan(pg, &p, &plan) != TILE_OK) {
      printf("  plan: %s\n", tile_last_error());
      ok = false;
    }
    if (ok && (plan.splits > 1) != (c->want_splits > 1)) {
      printf("  the plan has %d splits; this case is meant to be %s\n", plan.splits, c->want_splits > 1 ? "split" : "unsplit");
      ok = false;
    }
    if (ok && plan.workspace_bytes) ok = tile_mem_alloc(g->rt, plan.workspace_bytes, &ws) == TILE_OK;
    tile_paged_buffers bf = {.out = O.dev, .lse = L.dev, .q = Q.dev, .k_cache = K.dev, .v_cache = V.dev,
                             .kv_scale = S.dev, .page_ids = I.dev, .indptr = IP.dev, .kv_len = N.dev, .workspace = ws,
                             .k_scales = KG.dev, .v_scales = VG.dev};
    if (ok && (tile_paged_decode(pg, &plan, &bf, NULL) != TILE_OK || tile_synchronize(g->rt) != TILE_OK)) {
      printf("  decode: %s\n", tile_last_error());
      ok = false;
    }
    ok = ok && dbuf_download(g, &O) && dbuf_download(g, &L);
    if (ok) {
      double *q = dbuf_doubles(&Q), *k = dbuf_doubles(&K), *v = dbuf_doubles(&V);
      if (int4) k = int4_values(k, &KG, cache_n), v = int4_values(v, &VG, cache_n);
      float sc[2 * 64];
      for (int i = 0; i < 2 * c->heads_kv; i++) sc[i] = (float)dbuf_get(&S, (size_t)i);
      double *want = malloc((size_t)c->head_dim * sizeof *want), err = 0, ref = 0, lerr = 0;
      ok = q && k && v && want;
      for (int b = 0; b < c->batch && ok; b++)
        for (int h = 0; h < c->heads; h++) {
          double lse;
          reference(c, &ch, q, k, v, sc, b, h, plan.p.sm_scale, want, &lse);
          size_t row = (size_t)b * c->heads + h;
          for (int d = 0; d < c->head_dim; d++) {
            double got = dbuf_get(&O, row * c->head_dim + d);
            err = isnan(got) ? INFINITY : fmax(err, fabs(got - want[d]));
            ref = fmax(ref, fabs(want[d]));
          }
          double gl = dbuf_get(&L, row);
          lerr = isnan(gl) ? INFINITY : fmax(lerr, fabs(gl - lse) / fmax(1, fabs(lse)));
        }
      double rel = ref > 0 ? err / ref : err;
      if (ok && (rel > PAGED_OUT_TOL || lerr > PAGED_LSE_TOL)) {
        printf("  %d splits: out relative error %.3g (tolerance %g), lse %.3g (tolerance %g)\n", plan.splits, rel,
               PAGED_OUT_TOL, lerr, PAGED_LSE_TOL);
        ok = false;
      }
      free(q), free(k), free(v), free(want);
    }
  }
  if (ws) tile_mem_free(g->rt, ws);
  DBuf *all[] = {&K, &V, &Q, &O, &L, &S, &I, &IP, &N, &KG, &VG};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]->host) dbuf_free(g, all[i]);
  free(ch.ids);
  return ok;
}

/* tile_paged_append: new tokens land in their slots, the rest of the
 * cache is untouched (d128, pages of 16, NHD, 4 KV heads). */
static bool run_append(Gpu *g, const tile_paged *pg) {
  enum { B = 3, G = 4, D = 128, P = 16, POOL = 12, NEW = 21 };
  static const int32_t ids[] = {5, 0, 9, 2, 11, 7, 1}, indptr[B + 1] = {0, 2, 3, 7};
  int32_t bidx[NEW], pos[NEW];
  for (int i = 0; i < NEW; i++) bidx[i] = i % B, pos[i] = (int32_t)(i / B * 3 + (i % B == 2 ? 40 : 0));
  size_t cn = (size_t)POOL * P * G * D;
  DBuf K = {0}, V = {0}, KN = {0}, VN = {0}, BI = {0}, PO = {0}, I = {0}, IP = {0};
  bool ok = dbuf_alloc(g, &K, "k", "bf16", cn) && dbuf_alloc(g, &V, "v", "bf16", cn) &&
            dbuf_alloc(g, &KN, "kn", "bf16", (size_t)NEW * G * D) && dbuf_alloc(g, &VN, "vn", "bf16", (size_t)NEW * G * D) &&
            dbuf_alloc(g, &BI, "b", "i32", NEW) && dbuf_alloc(g, &PO, "pos", "i32", NEW) && dbuf_alloc(g, &I, "ids", "i32", 7) &&
            dbuf_alloc(g, &IP, "indptr", "i32", B + 1);
  Rng r = {99};
  if (ok) {
    dbuf_fill(&K, &r, -1, 1), dbuf_fill(&V, &r, -1, 1), dbuf_fill(&KN, &r, 2, 3), dbuf_fill(&VN, &r, -3, -2);
    for (int i = 0; i < NEW; i++) dbuf_set(&BI, (size_t)i, bidx[i]), dbuf_set(&PO, (size_t)i, pos[i]);
    for (int i = 0; i < 7; i++) dbuf_set(&I, (size_t)i, ids[i]);
    for (int i = 0; i <= B; i++) dbuf_set(&IP, (size_t)i, indptr[i]);
    DBuf *all[] = {&K, &V, &KN, &VN, &BI, &PO, &I, &IP};
    for (size_t i = 0; i < 8 && ok; i++) ok = dbuf_upload(g, all[i]);
  }
  double *k0 = ok ? dbuf_doubles(&K) : NULL, *v0 = ok ? dbuf_doubles(&V) : NULL;
  tile_paged_problem p = {.heads_kv = G, .head_dim = D, .page_size = P};
  if (ok && (tile_paged_append(pg, &p, K.dev, V.dev, KN.dev, VN.dev, BI.dev, PO.dev, I.dev, IP.dev, 0, NEW, NULL) != TILE_OK ||
             tile_synchronize(g->rt) != TILE_OK)) {
    printf("  append: %s\n", tile_last_error());
    ok = false;
  }
  ok = ok && k0 && v0 && dbuf_download(g, &K) && dbuf_download(g, &V);
  if (ok) {
    for (int i = 0; i < NEW; i++) { /* the expected cache: old values with the new tokens written in */
      int64_t page = ids[indptr[bidx[i]] + pos[i] / P];
      for (int h = 0; h < G; h++)
        for (int d = 0; d < D; d++) {
          size_t at = (size_t)(page * P * G * D + (pos[i] % P) * G * D + h * D + d);
          k0[at] = dbuf_get(&KN, ((size_t)i * G + h) * D + d), v0[at] = dbuf_get(&VN, ((size_t)i * G + h) * D + d);
        }
    }
    size_t bad = 0;
    for (size_t i = 0; i < cn; i++) bad += dbuf_get(&K, i) != k0[i] || dbuf_get(&V, i) != v0[i];
    if (bad) printf("  %zu cache elements differ from the expected cache\n", bad);
    ok = bad == 0;
  }
  free(k0), free(v0);
  DBuf *all[] = {&K, &V, &KN, &VN, &BI, &PO, &I, &IP};
  for (size_t i = 0; i < 8; i++)
    if (all[i]->host) dbuf_free(g, all[i]);
  return ok;
}

/* tile_paged_copy_pages then tile_paged_swap_pages on a bf16 cache
 * (d128, pages of 16, 2 KV heads: 4096 elements a page, two blocks of the
 * kernels), and tile_paged_append into an e4m3 cache with per-head scales
 * (stored = e4m3(clamp(x / scale, 448))). */
static bool run_pages(Gpu *g, const tile_paged *pg) {
  enum { G = 2, D = 128, P = 16, POOL = 9, N = 3, NEW = 4 };
  const size_t page = (size_t)P * G * D, cn = POOL * page;
  static const int32_t src[N] = {4, 0, 8}, dst[N] = {2, 6, 1}, pa[N] = {1, 3, 5}, pb[N] = {7, 2, 0};
  DBuf K = {0}, V = {0}, S = {0}, T = {0}, A = {0}, B = {0};
  bool ok = dbuf_alloc(g, &K, "k", "bf16", cn) && dbuf_alloc(g, &V, "v", "bf16", cn) && dbuf_alloc(g, &S, "src", "i32", N) &&
            dbuf_alloc(g, &T, "dst", "i32", N) && dbuf_alloc(g, &A, "a", "i32", N) && dbuf_alloc(g, &B, "b", "i32", N);
  Rng r = {77};
  double *k0 = NULL, *v0 = NULL;
  if (ok) {
    dbuf_fill(&K, &r, -1, 1), dbuf_fill(&V, &r, -1, 1);
    for (int j = 0; j < N; j++)
      dbuf_set(&S, (size_t)j, src[j]), dbuf_set(&T, (size_t)j, dst[j]), dbuf_set(&A, (size_t)j, pa[j]), dbuf_set(&B, (size_t)j, pb[j]);
    DBuf *all[] = {&K, &V, &S, &T, &A, &B};
    for (int i = 0; i < 6 && ok; i++) ok = dbuf_upload(g, all[i]);
    k0 = dbuf_doubles(&K), v0 = dbuf_doubles(&V);
    ok = ok && k0 && v0;
  }
  tile_paged_problem p = {.heads_kv = G, .head_dim = D, .page_size = P};
  if (ok && (tile_paged_copy_pages(pg, &p, K.dev, V.dev, S.dev, T.dev, N, NULL) != TILE_OK ||
             tile_paged_swap_pages(pg, &p, K.dev, V.dev, A.dev, B.dev, N, NULL) != TILE_OK ||
             tile_synchronize(g->rt) != TILE_OK)) {
    printf("  pages: %s\n", tile_last_error());
    ok = false;
  }
  ok = ok && dbuf_download(g, &K) && dbuf_download(g, &V);
  if (ok) {
    int where[POOL]; /* page q holds the original page where[q] */
    for (int q = 0; q < POOL; q++) where[q] = q;
    for (int j = 0; j < N; j++) where[dst[j]] = where[src[j]];
    for (int j = 0; j < N; j++) {
      int t = where[pa[j]];
      where[pa[j]] = where[pb[j]], where[pb[j]] = t;
    }
    size_t bad = 0;
    for (int q = 0; q < POOL; q++)
      for (size_t e = 0; e < page; e++)
        bad += dbuf_get(&K, q * page + e) != k0[where[q] * page + e] || dbuf_get(&V, q * page + e) != v0[where[q] * page + e];
    if (bad) printf("  %zu elements differ after the copies and swaps\n", bad);
    ok = bad == 0;
  }
  free(k0), free(v0);
  DBuf *all[] = {&K, &V, &S, &T, &A, &B};
  for (int i = 0; i < 6; i++)
    if (all[i]->host) dbuf_free(g, all[i]);
  if (!ok) return false;
  /* append into e4m3 */
  static const int32_t ids[2] = {3, 1}, indptr[2] = {0, 2}, pos[NEW] = {0, 7, 16, 31}, bidx[NEW] = {0, 0, 0, 0};
  DBuf KC = {0}, VC = {0}, KN = {0}, VN = {0}, SC = {0}, BI = {0}, PO = {0}, I = {0}, IP = {0}, ONE = {0};
  ok = dbuf_alloc(g, &KC, "k", "f8e4m3", cn) && dbuf_alloc(g, &VC, "v", "f8e4m3", cn) &&
       dbuf_alloc(g, &KN, "kn", "bf16", (size_t)NEW * G * D) && dbuf_alloc(g, &VN, "vn", "bf16", (size_t)NEW * G * D) &&
       dbuf_alloc(g, &SC, "s", "f32", 2 * G) && dbuf_alloc(g, &BI, "b", "i32", NEW) && dbuf_alloc(g, &PO, "p", "i32", NEW) &&
       dbuf_alloc(g, &I, "ids", "i32", 2) && dbuf_alloc(g, &IP, "indptr", "i32", 2) && dbuf_alloc(g, &ONE, "one", "f8e4m3", 1);
  if (ok) {
    dbuf_fill(&KC, &r, -400, 400), dbuf_fill(&VC, &r, -400, 400), dbuf_fill(&KN, &r, -3, 3), dbuf_fill(&VN, &r, -3, 3);
    for (int i = 0; i < 2 * G; i++) dbuf_set(&SC, (size_t)i, 0.004 * (i + 1));
    for (int i = 0; i < NEW; i++) dbuf_set(&BI, (size_t)i, bidx[i]), dbuf_set(&PO, (size_t)i, pos[i]);
    for (int i = 0; i < 2; i++) dbuf_set(&I, (size_t)i, ids[i]), dbuf_set(&IP, (size_t)i, indptr[i]);
    DBuf *up[] = {&KC, &VC, &KN, &VN, &SC, &BI, &PO, &I, &IP};
    for (int i = 0; i < 9 && ok; i++) ok = dbuf_upload(g, up[i]);
  }
  k0 = ok ? dbuf_doubles(&KC) : NULL, v0 = ok ? dbuf_doubles(&VC) : NULL;
  p.kv_type = TILE_PAGED_KV_E4M3;
  if (ok && k0 && v0 &&
      (tile_paged_append(pg, &p, KC.dev, VC.dev, KN.dev, VN.dev, BI.dev, PO.dev, I.dev, IP.dev, SC.dev, NEW, NULL) != TILE_OK ||
       tile_synchronize(g->rt) != TILE_OK)) {
    printf("  e4m3 append: %s\n", tile_last_error());
    ok = false;
  }
  ok = ok && k0 && v0 && dbuf_download(g, &KC) && dbuf_download(g, &VC);
  if (ok) {
    for (int i = 0; i < NEW; i++) {
      size_t base = (size_t)ids[pos[i] / P] * page + (size_t)(pos[i] % P) * G * D;
      for (int h = 0; h < G; h++)
        for (int d = 0; d < D; d++)
          for (int kv = 0; kv < 2; kv++) {
            double x = dbuf_get(kv ? &VN : &KN, ((size_t)i * G + h) * D + d) / (double)(float)dbuf_get(&SC, 2 * h + kv);
            dbuf_set(&ONE, 0, fmin(fmax(x, -448), 448));
            (kv ? v0 : k0)[base + (size_t)h * D + d] = dbuf_get(&ONE, 0);
          }
    }
    size_t bad = 0;
    for (size_t i = 0; i < cn; i++) bad += dbuf_get(&KC, i) != k0[i] || dbuf_get(&VC, i) != v0[i];
    if (bad) printf("  %zu e4m3 cache elements differ from the expected cache\n", bad);
    ok = bad == 0;
  }
  free(k0), free(v0);
  DBuf *fr[] = {&KC, &VC, &KN, &VN, &SC, &BI, &PO, &I, &IP, &ONE};
  for (int i = 0; i < 10; i++)
    if (fr[i]->host) dbuf_free(g, fr[i]);
  return ok;
}

/* Prefill cases: queries at the ends of their sequences (a cached prefix
 * before them, or none), causal or full. */
typedef struct PrefillCase {
  const char *name;
  int batch, heads, heads_kv, head_dim, page;
  tile_paged_kv_type kv;
  bool hnd, causal;
  int q_lens[4], kv_lens[4]; /* kv_lens[b] >= q_lens[b] */
} PrefillCase;

static const PrefillCase prefill_cases[] = {
    {"paged prefill d128 page16 gqa4 causal, prefixes 0-4999", 4, 8, 2, 128, 16, TILE_PAGED_KV_BF16, false, true,
     {1, 300, 129, 1000}, {5000, 300, 2000, 1500}},
    {"paged prefill d64 page1 gqa1 full", 3, 4, 4, 64, 1, TILE_PAGED_KV_BF16, false, false, {7, 64, 33}, {100, 64, 500}},
    {"paged prefill d128 page64 gqa8 HND e4m3 causal", 2, 16, 2, 128, 64, TILE_PAGED_KV_E4M3, true, true, {200, 3},
     {3000, 777}},
    {"paged prefill d128 page32 gqa1 int4 causal", 2, 4, 4, 128, 32, TILE_PAGED_KV_INT4, false, true, {50, 128},
     {600, 128}},
    {"paged prefill d64 page16 gqa4 HND e4m3 full", 3, 8, 2, 64, 16, TILE_PAGED_KV_E4M3, true, false, {17, 1, 250},
     {40, 1000, 250}},
};

static bool run_prefill(Gpu *g, const tile_paged *pg, const PrefillCase *c, uint64_t seed) {
  Rng r = {seed};
  PagedCase dc = {c->name, c->batch, c->heads, c->heads_kv, c->head_dim, c->page, c->kv, c->hnd, {0}, 1};
  int total_q = 0, max_q = 0, qo[5] = {0};
  for (int b = 0; b < c->batch; b++) {
    dc.lens[b] = c->kv_lens[b];
    qo[b + 1] = qo[b] + c->q_lens[b], total_q += c->q_lens[b], max_q = c->q_lens[b] > max_q ? c->q_lens[b] : max_q;
  }
  Cache ch = {0};
  if (!make_cache(&dc, &r, &ch)) return false;
  int D = c->head_dim, group = c->heads / c->heads_kv;
  size_t cache_n = (size_t)ch.pool * c->page * c->heads_kv * D, rows = (size_t)total_q * c->heads, qn = rows * D;
  bool int4 = c->kv == TILE_PAGED_KV_INT4, fp8 = c->kv == TILE_PAGED_KV_E4M3;
  const char *elem = int4 ? "u8" : fp8 ? "f8e4m3" : "bf16";
  double lo = int4 ? 0 : fp8 ? -400 : -1, hi = int4 ? 255 : -lo;
  size_t stored = int4 ? cache_n / 2 : cache_n, groups = int4 ? cache_n / TILE_PAGED_INT4_GROUP : 1;
  DBuf K = {0}, V = {0}, Q = {0}, O = {0}, L = {0}, S = {0}, I = {0}, IP = {0}, N = {0}, KG = {0}, VG = {0}, QO = {0};
  bool ok = dbuf_alloc(g, &K, "k_cache", elem, stored) && dbuf_alloc(g, &V, "v_cache", elem, stored) &&
            dbuf_alloc(g, &KG, "k_scales", "f32", groups) && dbuf_alloc(g, &VG, "v_scales", "f32", groups) &&
            dbuf_alloc(g, &Q, "q", "bf16", qn) && dbuf_alloc(g, &O, "out", "bf16", qn) &&
            dbuf_alloc(g, &L, "lse", "f32", rows) && dbuf_alloc(g, &S, "kv_scale", "f32", 2 * (size_t)c->heads_kv) &&
            dbuf_alloc(g, &I, "page_ids", "i32", (size_t)ch.pages) &&
            dbuf_alloc(g, &IP, "indptr", "i32", (size_t)c->batch + 1) &&
            dbuf_alloc(g, &N, "kv_len", "i32", (size_t)c->batch) && dbuf_alloc(g, &QO, "qo_indptr", "i32", (size_t)c->batch + 1);
  if (!ok) goto done;
  dbuf_fill(&K, &r, lo, hi), dbuf_fill(&V, &r, lo, hi), dbuf_fill(&Q, &r, -1, 1);
  dbuf_fill(&S, &r, 0.001, 0.005), dbuf_fill(&KG, &r, 0.05, 0.2), dbuf_fill(&VG, &r, 0.05, 0.2);
  dbuf_poison(&O), dbuf_poison(&L);
  for (int i = 0; i < ch.pages; i++) dbuf_set(&I, (size_t)i, ch.ids[i]);
  int max_kv = 0;
  for (int b = 0; b <= c->batch; b++) dbuf_set(&IP, (size_t)b, ch.indptr[b]), dbuf_set(&QO, (size_t)b, qo[b]);
  for (int b = 0; b < c->batch; b++) dbuf_set(&N, (size_t)b, ch.lens[b]), max_kv = ch.lens[b] > max_kv ? ch.lens[b] : max_kv;
  DBuf *up[] = {&K, &V, &Q, &O, &L, &S, &I, &IP, &N, &KG, &VG, &QO};
  for (size_t i = 0; i < sizeof up / sizeof up[0] && ok; i++) ok = dbuf_upload(g, up[i]);
  tile_paged_problem p = {.batch = c->batch, .heads = c->heads, .heads_kv = c->heads_kv, .head_dim = D,
                          .page_size = c->page, .kv_type = c->kv, .max_kv_len = max_kv, .max_q_len = max_q,
                          .causal = c->causal};
  if (c->hnd)
    for (int i = 0; i < 3; i++) p.strides[i] = int4 ? ch.st[i] / 2 : ch.st[i];
  tile_paged_plan plan;
  tile_paged_buffers bf = {.out = O.dev, .lse = L.dev, .q = Q.dev, .k_cache = K.dev, .v_cache = V.dev,
                           .kv_scale = S.dev, .page_ids = I.dev, .indptr = IP.dev, .kv_len = N.dev,
                           .k_scales = KG.dev, .v_scales = VG.dev, .qo_indptr = QO.dev};
  if (ok && (tile_paged_prefill_plan(pg, &p, &plan) != TILE_OK || tile_paged_prefill(pg, &plan, &bf, NULL) != TILE_OK ||
             tile_synchronize(g->rt) != TILE_OK)) {
    printf("  prefill: %s\n", tile_last_error());
    ok = false;
  }
  ok = ok && dbuf_download(g, &O) && dbuf_download(g, &L);
  if (!ok) goto done;
  double *q = dbuf_doubles(&Q), *k = dbuf_doubles(&K), *v = dbuf_doubles(&V);
  if (int4) k = int4_values(k, &KG, cache_n), v = int4_values(v, &VG, cache_n);
  double *s = malloc((size_t)max_kv * sizeof *s), *want = malloc((size_t)D * sizeof *want), err = 0, ref = 0, lerr = 0;
  ok = q && k && v && s && want;
  for (int b = 0; b < c->batch && ok; b++) {
    int n = ch.lens[b], nq = c->q_lens[b];
    for (int i = 0; i < nq; i++)
      for (int h = 0; h < c->heads; h++) {
        int gk = h / group, last = c->causal ? i + n - nq : n - 1;
        double ks = fp8 ? (float)dbuf_get(&S, 2 * (size_t)gk) : 1, vs = fp8 ? (float)dbuf_get(&S, 2 * (size_t)gk + 1) : 1;
        size_t row = (size_t)(qo[b] + i) * c->heads + h;
        const double *qh = q + row * D;
        double m = -INFINITY, l = 0;
        for (int t = 0; t <= last; t++) {
          int64_t page = ch.ids[ch.indptr[b] + t / c->page];
          const double *kt = k + page * ch.st[0] + (t % c->page) * ch.st[1] + gk * ch.st[2];
          double dot = 0;
          for (int d = 0; d < D; d++) dot += qh[d] * kt[d] * ks;
          s[t] = dot * plan.p.sm_scale, m = fmax(m, s[t]);
        }
        for (int d = 0; d < D; d++) want[d] = 0;
        for (int t = 0; t <= last; t++) {
          double pr = exp(s[t] - m);
          l += pr;
          int64_t page = ch.ids[ch.indptr[b] + t / c->page];
          const double *vt = v + page * ch.st[0] + (t % c->page) * ch.st[1] + gk * ch.st[2];
          for (int d = 0; d < D; d++) want[d] += pr * vt[d] * vs;
        }
        for (int d = 0; d < D; d++) {
          double got = dbuf_get(&O, row * D + d);
          err = isnan(got) ? INFINITY : fmax(err, fabs(got - want[d] / l));
          ref = fmax(ref, fabs(want[d] / l));
        }
        double gl = dbuf_get(&L, row), wl = m + log(l);
        lerr = isnan(gl) ? INFINITY : fmax(lerr, fabs(gl - wl) / fmax(1, fabs(wl)));
      }
  }
  double rel = ref > 0 ? err / ref : err, ltol = int4 || fp8 ? PAGED_LSE_TOL_QUANT : PAGED_LSE_TOL;
  if (ok && (rel > PAGED_OUT_TOL || lerr > ltol)) {
    printf("  out relative error %.3g (tolerance %g), lse %.3g (tolerance %g)\n", rel, PAGED_OUT_TOL, lerr, ltol);
    ok = false;
  }
  free(q), free(k), free(v), free(s), free(want);
done:;
  DBuf *all[] = {&K, &V, &Q, &O, &L, &S, &I, &IP, &N, &KG, &VG, &QO};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]->host) dbuf_free(g, all[i]);
  free(ch.ids);
  return ok;
}

int gpu_paged_tests(Gpu *g, const char *only) {
  int failed = 0, matching = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) matching += !only || strstr(cases[i].name, only);
  const size_t np = sizeof prefill_cases / sizeof prefill_cases[0];
  for (size_t i = 0; i < np; i++) matching += !only || strstr(prefill_cases[i].name, only);
  if (!matching && only && !strstr("paged append d128 page16 (tile_paged_append)", only) &&
      !strstr("paged pages copied and swapped, e4m3 append", only))
    return 0;
  tile_paged *pg = NULL;
  if (tile_paged_create(g->rt, &pg) != TILE_OK) {
    printf("FAIL tile_paged_create: %s\n", tile_last_error());
    g->failed++;
    return 1;
  }
  const size_t nc = sizeof cases / sizeof cases[0];
  for (size_t i = 0; i < nc + 2 + np; i++) {
    const char *name = i < nc       ? cases[i].name
                       : i == nc     ? "paged append d128 page16 (tile_paged_append)"
                       : i == nc + 1 ? "paged pages copied and swapped, e4m3 append"
                                     : prefill_cases[i - nc - 2].name;
    if (only && !strstr(name, only)) continue;
    double t0 = now_ms();
    bool ok = i < nc        ? run_case(g, pg, &cases[i], 8100 + i)
              : i == nc     ? run_append(g, pg)
              : i == nc + 1 ? run_pages(g, pg)
                            : run_prefill(g, pg, &prefill_cases[i - nc - 2], 8200 + i);
    gpu_report(g, name, ok, t0, &failed);
  }
  tile_paged_destroy(pg);
  return failed;
}
