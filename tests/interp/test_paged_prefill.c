/* test_paged_prefill.c - paged_prefill of lang/std/paged_decode.tile in
 * the interpreter: queries of variable lengths against their sequences'
 * paged keys (a cached prefix, then the queries' own tokens), causal and
 * full, against float64 on the gathered keys and values: ragged lengths
 * (one query token, a query block longer than BLOCK_M rows, a sequence
 * with no cached prefix), pages in a shuffled order with the last partly
 * filled, GQA ratios 1, 2 and 4 (query heads packed into the rows of a
 * block), NHD and HND strides, q rows with padding between tokens,
 * bf16, e4m3 and int4 caches; outputs poisoned first. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "paged_ref.h"

#define BF16_TOL 1e-2
#define LSE_TOL 1e-3
#define LSE_TOL_FP8 1e-2

enum { D = 64, INT4_GROUP = PAGED_REF_INT4_GROUP, BATCH_MAX = 4, BLOCK_M = 128, Q_PAD = 8 /* elements between q's token rows */ };

typedef struct Prefill {
  int batch, heads, kv_heads, page;
  bool causal, hnd, fp8, int4;
  int q_lens[BATCH_MAX], kv_lens[BATCH_MAX]; /* kv_lens[b] >= q_lens[b] */
} Prefill;

static void check_prefill(const Prefill *c, uint64_t seed) {
  Rng rng = {seed};
  int pages = 0, total_q = 0, max_q = 0, npages[BATCH_MAX];
  for (int b = 0; b < c->batch; b++) {
    npages[b] = (c->kv_lens[b] + c->page - 1) / c->page, pages += npages[b];
    total_q += c->q_lens[b], max_q = c->q_lens[b] > max_q ? c->q_lens[b] : max_q;
  }
  int pool = pages + 2, *perm = malloc(sizeof(int) * (size_t)pool);
  for (int i = 0; i < pool; i++) perm[i] = i;
  for (int i = pool - 1; i > 0; i--) {
    int j = (int)rng_uniform(&rng, 0, i + 1), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  HBuf ids = hbuf_new("i32", (size_t)pages, "page_ids"), indptr = hbuf_new("i32", (size_t)c->batch + 1, "indptr");
  HBuf lens = hbuf_new("i32", (size_t)c->batch, "kv_len"), qo = hbuf_new("i32", (size_t)c->batch + 1, "qo_indptr");
  for (int b = 0, at = 0, qa = 0; b < c->batch; b++) {
    hbuf_set(&indptr, b, at), hbuf_set(&lens, b, c->kv_lens[b]), hbuf_set(&qo, b, qa);
    qa += c->q_lens[b];
    for (int p = 0; p < npages[b]; p++, at++) hbuf_set(&ids, at, perm[at]);
  }
  hbuf_set(&indptr, c->batch, pages), hbuf_set(&qo, c->batch, total_q);
  int row = c->int4 ? D / 2 : D;
  size_t page_elems = (size_t)c->page * c->kv_heads * row;
  const char *kv_type = c->int4 ? "u8" : c->fp8 ? "f8e4m3" : "bf16";
  HBuf kc = hbuf_new(kv_type, (size_t)pool * page_elems, "k_cache"), vc = hbuf_new(kv_type, (size_t)pool * page_elems, "v_cache");
  double lo = c->int4 ? 0 : c->fp8 ? -400 : -1, hi = c->int4 ? 255 : c->fp8 ? 400 : 1;
  hbuf_fill_uniform(&kc, &rng, lo, hi), hbuf_fill_uniform(&vc, &rng, lo, hi);
  size_t ngroups = c->int4 ? (size_t)pool * page_elems / (INT4_GROUP / 2) : 1;
  HBuf kg = hbuf_new("f32", ngroups, "k_scales"), vg = hbuf_new("f32", ngroups, "v_scales");
  hbuf_fill_uniform(&kg, &rng, 0.05, 0.2), hbuf_fill_uniform(&vg, &rng, 0.05, 0.2);
  HBuf ks = hbuf_new("f32", (size_t)2 * c->kv_heads, "kv_scale");
  for (int g = 0; g < 2 * c->kv_heads; g++) hbuf_set(&ks, g, c->fp8 ? (1 + g) / 400.0 : 1.0);
  /* q and out: token rows of heads * D elements plus Q_PAD */
  int64_t q_stride_t = (int64_t)c->heads * D + Q_PAD, q_stride_h = D;
  size_t qn = (size_t)total_q * (size_t)q_stride_t;
  HBuf q = hbuf_new("bf16", qn, "q"), out = hbuf_new("bf16", qn, "out");
  HBuf lse = hbuf_new("f32", (size_t)total_q * c->heads, "lse");
  hbuf_fill_uniform(&q, &rng, -1, 1);
  hbuf_poison(&out), hbuf_poison(&lse);
  int64_t stride_page = (int64_t)page_elems, stride_slot = c->hnd ? row : c->kv_heads * row,
          stride_head = c->hnd ? c->page * row : row;
  double scale = 1 / sqrt((double)D);
  char page[16];
  snprintf(page, sizeof page, "%d", c->page);
  const char *defs[] = {"HEAD_DIM", "64", "PAGE", page, "KV", kv_type, "SCALED", c->fp8 ? "true" : "false",
                        "INT4", c->int4 ? "true" : "false", NULL};
  tc_compilation *k = harness_compile("lang/std/paged_decode.tile", "paged_prefill", defs);
  tc_arg a[21] = {{.p = out.data},     {.p = lse.data},    {.p = q.data},       {.p = kc.data},
                  {.p = vc.data},      {.p = ks.data},     {.p = ids.data},     {.p = indptr.data},
                  {.p = lens.data},    {.p = qo.data},     {.i = c->heads},     {.i = c->kv_heads},
                  {.f = scale},        {.i = c->causal},   {.i = stride_page},  {.i = stride_slot},
                  {.i = stride_head},  {.i = q_stride_t},  {.i = q_stride_h},   {.p = kg.data},
                  {.p = vg.data}};
  const HBuf *bufs[] = {&out, &lse, &q, &kc, &vc, &ks, &ids, &indptr, &lens, &qo, &kg, &vg};
  int group = c->heads / c->kv_heads;
  int64_t blocks = (max_q * group + BLOCK_M - 1) / BLOCK_M;
  harness_run(k, (int64_t[3]){blocks, c->kv_heads, c->batch}, a, 21, bufs, 12);
  tc_free(k);
  /* float64 on the gathered keys and values; padding of q rows is never written */
  double *want = malloc(sizeof(double) * qn), *want_lse = malloc(sizeof(double) * (size_t)total_q * c->heads);
  for (size_t i = 0; i < qn; i++) want[i] = NAN; /* the padding: checked below */
  int checked_pad = 0;
  for (int b = 0, q0 = 0; b < c->batch; q0 += c->q_lens[b], b++) {
    int n = c->kv_lens[b], nq = c->q_lens[b], first = (int)hbuf_get(&indptr, b);
    double *s = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < nq; i++)
      for (int h = 0; h < c->heads; h++) {
        int g = h / group, last = c->causal ? i + n - nq : n - 1;
        size_t qa = (size_t)(q0 + i) * (size_t)q_stride_t + (size_t)h * D;
        double mx = -INFINITY;
        for (int t = 0; t <= last; t++) {
          int pg = (int)hbuf_get(&ids, first + t / c->page);
          size_t at = (size_t)pg * page_elems + (size_t)(t % c->page) * stride_slot + (size_t)g * stride_head;
          double dotp = 0;
          for (int e = 0; e < D; e++) dotp += hbuf_get(&q, qa + e) * paged_kv_value(c->int4, &kc, &kg, &ks, 0, g, at, e);
          s[t] = dotp * scale, mx = fmax(mx, s[t]);
        }
        double sum = 0;
        for (int t = 0; t <= last; t++) s[t] = exp(s[t] - mx), sum += s[t];
        for (int e = 0; e < D; e++) want[qa + e] = 0;
        for (int t = 0; t <= last; t++) {
          int pg = (int)hbuf_get(&ids, first + t / c->page);
          size_t at = (size_t)pg * page_elems + (size_t)(t % c->page) * stride_slot + (size_t)g * stride_head;
          for (int e = 0; e < D; e++) want[qa + e] += s[t] / sum * paged_kv_value(c->int4, &vc, &vg, &ks, 1, g, at, e);
        }
        want_lse[(size_t)(q0 + i) * c->heads + h] = mx + log(sum);
      }
    free(s);
  }
  for (int t = 0; t < total_q; t++) checked_pad += !isnan(hbuf_get(&out, (size_t)t * q_stride_t + (size_t)c->heads * D));
  cr_expect_eq(checked_pad, 0, "%d padding elements between q rows were written", checked_pad);
  double err = rel_error(&out, want, out.n);
  cr_expect_lt(err, BF16_TOL, "prefill (batch %d, heads %d/%d, page %d, %s, %s): out error %g", c->batch, c->heads,
               c->kv_heads, c->page, c->causal ? "causal" : "full", c->hnd ? "HND" : "NHD", err);
  int bad = 0;
  for (size_t i = 0; i < lse.n; i++)
    bad += !(fabs(hbuf_get(&lse, i) - want_lse[i]) <= (c->fp8 || c->int4 ? LSE_TOL_FP8 : LSE_TOL) * fmax(1, fabs(want_lse[i])));
  cr_expect_eq(bad, 0, "%d of %zu lse values off (lse[0] = %g, want %g)", bad, lse.n, hbuf_get(&lse, 0), want_lse[0]);
  free(want), free(want_lse), free(perm);
  HBuf *all[] = {&ids, &indptr, &lens, &qo, &kc, &vc, &kg, &vg, &ks, &q, &out, &lse};
  for (int i = 0; i < 12; i++) hbuf_free(all[i]);
}

/* one query token after a prefix; 70 query tokens (x2 heads: two blocks of
 * 128 rows) after a prefix of 30; a prompt with no prefix */
Test(paged_prefill, causal_cached_prefixes_gqa_2) {
  Prefill c = {3, 4, 2, 16, true, false, false, false, {1, 70, 9}, {40, 100, 9}};
  check_prefill(&c, 21);
}

Test(paged_prefill, full_attention_gqa_1_hnd_pages_of_32) {
  Prefill c = {2, 2, 2, 32, false, true, false, false, {33, 5}, {90, 5}};
  check_prefill(&c, 22);
}

Test(paged_prefill, causal_gqa_4_pages_of_one_token) {
  Prefill c = {2, 4, 1, 1, true, false, false, false, {20, 3}, {45, 3}};
  check_prefill(&c, 23);
}

Test(paged_prefill, fp8_cache_with_per_head_scales) {
  Prefill c = {2, 4, 2, 16, true, true, true, false, {17, 2}, {80, 30}};
  check_prefill(&c, 24);
}

Test(paged_prefill, int4_cache_with_group_scales) {
  Prefill c = {2, 4, 2, 16, true, false, false, true, {12, 1}, {50, 20}};
  check_prefill(&c, 25);
}
