/* test_paged.c - lang/std/paged_decode.tile in the interpreter: decode
 * attention over a paged KV cache against float64 on the gathered
 * (contiguous) keys and values: ragged sequence lengths with the last page
 * partly filled, pages in a shuffled order, GQA ratios 1 and 4, NHD and
 * HND strides, one split and several (with the merge kernel); outputs
 * poisoned first. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "paged_ref.h"

#define BF16_TOL 1e-2
#define LSE_TOL 1e-3
/* an fp8 cache: keys and values are dequantized into bf16 (one more
 * rounding than the float64 reference makes) */
#define LSE_TOL_FP8 1e-2

typedef struct Decode {
  int batch, heads, kv_heads, page, splits;
  bool hnd;                /* HND strides (else NHD) */
  const int *lens;         /* batch entries */
  bool fp8;                /* an e4m3 cache with per-head scales */
  bool int4;               /* a u8 cache of 4-bit values with group scales */
} Decode;

enum { D = 64, INT4_GROUP = PAGED_REF_INT4_GROUP };

/* Element e of the key or value row at `at` (in the cache's elements:
 * bytes for int4) of KV head g, dequantized as the kernel does. */
static void check_decode(const Decode *c, uint64_t seed) {
  Rng rng = {seed};
  int total_pages = 0, *npages = calloc((size_t)c->batch, sizeof(int));
  for (int b = 0; b < c->batch; b++) npages[b] = (c->lens[b] + c->page - 1) / c->page, total_pages += npages[b];
  /* the pages of all sequences in a shuffled order, plus 3 unused ones */
  int pool = total_pages + 3;
  int *perm = malloc(sizeof(int) * (size_t)pool);
  for (int i = 0; i < pool; i++) perm[i] = i;
  for (int i = pool - 1; i > 0; i--) {
    int j = (int)rng_uniform(&rng, 0, i + 1);
    int t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  HBuf ids = hbuf_new("i32", (size_t)total_pages, "page_ids"), indptr = hbuf_new("i32", (size_t)c->batch + 1, "indptr");
  HBuf lens = hbuf_new("i32", (size_t)c->batch, "kv_len");
  for (int b = 0, at = 0; b < c->batch; b++) {
    hbuf_set(&indptr, b, at);
    hbuf_set(&lens, b, c->lens[b]);
    for (int p = 0; p < npages[b]; p++, at++) hbuf_set(&ids, at, perm[at]);
  }
  hbuf_set(&indptr, c->batch, total_pages);
  /* a page's elements of the cache (bytes for int4: two values each) */
  int row = c->int4 ? D / 2 : D;
  size_t page_elems = (size_t)c->page * c->kv_heads * row;
  const char *kv_type = c->int4 ? "u8" : c->fp8 ? "f8e4m3" : "bf16";
  HBuf kc = hbuf_new(kv_type, (size_t)pool * page_elems, "k_cache"), vc = hbuf_new(kv_type, (size_t)pool * page_elems, "v_cache");
  /* fp8: stored values up to 400 (e4m3's range), scales bring them to
   * about 1; int4: any byte */
  double lo = c->int4 ? 0 : c->fp8 ? -400 : -1, hi = c->int4 ? 255 : c->fp8 ? 400 : 1;
  hbuf_fill_uniform(&kc, &rng, lo, hi);
  hbuf_fill_uniform(&vc, &rng, lo, hi);
  size_t ngroups = c->int4 ? (size_t)pool * page_elems / (INT4_GROUP / 2) : 1;
  HBuf kg = hbuf_new("f32", ngroups, "k_scales"), vg = hbuf_new("f32", ngroups, "v_scales");
  hbuf_fill_uniform(&kg, &rng, 0.05, 0.2);
  hbuf_fill_uniform(&vg, &rng, 0.05, 0.2);
  HBuf ks = hbuf_new("f32", (size_t)2 * c->kv_heads, "kv_scale");
  for (int g = 0; g < 2 * c->kv_heads; g++) hbuf_set(&ks, g, c->fp8 ? (1 + g) / 400.0 : 1.0);
  HBuf q = hbuf_new("bf16", (size_t)c->batch * c->heads * D, "q");
  hbuf_fill_uniform(&q, &rng, -1, 1);
  HBuf out = hbuf_new("bf16", (size_t)c->batch * c->heads * D, "out"), lse = hbuf_new("f32", (size_t)c->batch * c->heads, "lse");
  HBuf po = hbuf_new("f32", (size_t)c->splits * c->batch * c->heads * D, "part_out");
  HBuf pl = hbuf_new("f32", (size_t)c->splits * c->batch * c->heads, "part_lse");
  hbuf_poison(&out), hbuf_poison(&lse), hbuf_poison(&po), hbuf_poison(&pl);
  int64_t stride_page = (int64_t)page_elems, stride_slot = c->hnd ? row : c->kv_heads * row,
          stride_head = c->hnd ? c->page * row : row;
  double scale = 1 / sqrt((double)D);
  char page[16];
  snprintf(page, sizeof page, "%d", c->page);
  const char *defs[] = {"HEAD_DIM", "64", "PAGE", page, "KV", kv_type, "SCALED", c->fp8 ? "true" : "false",
                        "INT4", c->int4 ? "true" : "false", NULL};
  tc_compilation *k = harness_compile("lang/std/paged_decode.tile", "paged_decode", defs);
  tc_arg a[20] = {{.p = out.data},     {.p = lse.data},    {.p = po.data},      {.p = pl.data},
                  {.p = q.data},       {.p = kc.data},     {.p = vc.data},      {.p = ks.data},
                  {.p = ids.data},     {.p = indptr.data}, {.p = lens.data},    {.i = c->batch},
                  {.i = c->heads},     {.i = c->kv_heads}, {.f = scale},        {.i = stride_page},
                  {.i = stride_slot},  {.i = stride_head}, {.p = kg.data},      {.p = vg.data}};
  const HBuf *bufs[] = {&out, &lse, &po, &pl, &q, &kc, &vc, &ks, &ids, &indptr, &lens, &kg, &vg};
  harness_run(k, (int64_t[3]){c->kv_heads, c->batch, c->splits}, a, 20, bufs, 13);
  tc_free(k);
  if (c->splits > 1) {
    k = harness_compile("lang/std/paged_decode.tile", "paged_decode_merge", (const char *const[]){"HEAD_DIM", "64", NULL});
    tc_arg m[7] = {{.p = out.data}, {.p = lse.data}, {.p = po.data}, {.p = pl.data},
                   {.i = c->batch}, {.i = c->heads}, {.i = c->splits}};
    const HBuf *mb[] = {&out, &lse, &po, &pl};
    harness_run(k, (int64_t[3]){c->batch * c->heads, 1, 1}, m, 7, mb, 4);
    tc_free(k);
  }
  /* float64 on the gathered keys and values */
  double *want = calloc((size_t)c->batch * c->heads * D, sizeof(double));
  double *want_lse = calloc((size_t)c->batch * c->heads, sizeof(double));
  int group = c->heads / c->kv_heads;
  for (int b = 0; b < c->batch; b++) {
    int n = c->lens[b], first = (int)hbuf_get(&indptr, b);
    double *s = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int h = 0; h < c->heads; h++) {
      int g = h / group;
      double mx = -INFINITY;
      for (int t = 0; t < n; t++) {
        int page = (int)hbuf_get(&ids, first + t / c->page);
        size_t at = (size_t)page * page_elems + (size_t)(t % c->page) * stride_slot + (size_t)g * stride_head;
        double dotp = 0;
        for (int e = 0; e < D; e++)
          dotp += hbuf_get(&q, ((size_t)b * c->heads + h) * D + e) * paged_kv_value(c->int4, &kc, &kg, &ks, 0, g, at, e);
        s[t] = dotp * scale, mx = fmax(mx, s[t]);
      }
      double sum = 0;
      for (int t = 0; t < n; t++) s[t] = exp(s[t] - mx), sum += s[t];
      for (int t = 0; t < n; t++) {
        int page = (int)hbuf_get(&ids, first + t / c->page);
        size_t at = (size_t)page * page_elems + (size_t)(t % c->page) * stride_slot + (size_t)g * stride_head;
        for (int e = 0; e < D; e++)
          want[((size_t)b * c->heads + h) * D + e] += s[t] / sum * paged_kv_value(c->int4, &vc, &vg, &ks, 1, g, at, e);
      }
      want_lse[(size_t)b * c->heads + h] = mx + log(sum);
    }
    free(s);
  }
  double err = rel_error(&out, want, out.n);
  cr_expect_lt(err, BF16_TOL, "decode (batch %d, heads %d/%d, page %d, splits %d, %s): out error %g", c->batch, c->heads,
               c->kv_heads, c->page, c->splits, c->hnd ? "HND" : "NHD", err);
  for (size_t i = 0; i < lse.n; i++)
    cr_expect(fabs(hbuf_get(&lse, i) - want_lse[i]) <= (c->fp8 ? LSE_TOL_FP8 : LSE_TOL) * fmax(1, fabs(want_lse[i])),
              "lse[%zu] = %g, want %g", i, hbuf_get(&lse, i), want_lse[i]);
  free(want), free(want_lse), free(npages), free(perm);
  HBuf *all[] = {&ids, &indptr, &lens, &kc, &vc, &ks, &q, &out, &lse, &po, &pl, &kg, &vg};
  for (int i = 0; i < 13; i++) hbuf_free(all[i]);
}

static const int ragged[] = {1, 17, 200, 64, 131};

Test(paged_decode, ragged_lengths_one_split_gqa_1) {
  Decode c = {5, 4, 4, 16, 1, false, ragged, false, false};
  check_decode(&c, 1);
}

Test(paged_decode, gqa_4_hnd_pages_of_32) {
  Decode c = {5, 8, 2, 32, 1, true, ragged, false, false};
  check_decode(&c, 2);
}

Test(paged_decode, split_kv_with_the_merge) {
  Decode c = {5, 8, 2, 16, 4, false, ragged, false, false};
  check_decode(&c, 3);
  static const int long_one[] = {700};
  Decode one = {1, 4, 1, 64, 7, true, long_one, false, false}; /* batch 1, pages of 64, GQA 4, 7 splits */
  check_decode(&one, 4);
}

/* an e4m3 cache with per-head scales, dequantized in registers; the
 * reference uses the same (rounded) stored values times the scales */
Test(paged_decode, fp8_cache_with_per_head_scales) {
  Decode c = {5, 8, 2, 16, 3, false, ragged, true, false};
  check_decode(&c, 6);
}

/* an int4 cache (two values a byte, a scale per 32 values), HND strides,
 * split; the reference dequantizes the same nibbles */
Test(paged_decode, int4_cache_with_group_scales) {
  Decode c = {5, 8, 2, 16, 3, true, ragged, false, true};
  check_decode(&c, 7);
}

Test(paged_decode, pages_of_one_token) {
  static const int lens[] = {3, 40};
  Decode c = {2, 2, 1, 1, 2, false, lens, false, false};
  check_decode(&c, 5);
}

/* paged_append: new tokens of three sequences (2, 0 and 5 new, one
 * crossing into a new page) land in their slots, for every KV head (HND
 * strides), and no other element of the cache changes. */
Test(paged_append, tokens_land_in_their_slots_and_nothing_else_changes) {
  enum { PAGE = 4, HEADS = 2, POOL = 8 };
  Rng rng = {9};
  /* sequence 0: pages {5, 1}, 3 tokens before; sequence 1: page {0}, 1 token; sequence 2: pages {2, 7, 4}, 6 tokens */
  const int page_ids_v[] = {5, 1, 0, 2, 7, 4}, indptr_v[] = {0, 2, 3, 6}, before[] = {3, 1, 6}, added[] = {2, 0, 5};
  HBuf ids = hbuf_new("i32", 6, "page_ids"), indptr = hbuf_new("i32", 4, "indptr");
  for (int i = 0; i < 6; i++) hbuf_set(&ids, i, page_ids_v[i]);
  for (int i = 0; i < 4; i++) hbuf_set(&indptr, i, indptr_v[i]);
  int n = 7;
  HBuf bi = hbuf_new("i32", (size_t)n, "batch_idx"), pos = hbuf_new("i32", (size_t)n, "pos");
  for (int b = 0, i = 0; b < 3; b++)
    for (int j = 0; j < added[b]; j++, i++) hbuf_set(&bi, i, b), hbuf_set(&pos, i, before[b] + j);
  size_t page_elems = (size_t)PAGE * HEADS * D;
  HBuf kc = hbuf_new("f32", POOL * page_elems, "k_cache"), vc = hbuf_new("f32", POOL * page_elems, "v_cache");
  HBuf kn = hbuf_new("f32", (size_t)n * HEADS * D, "k_new"), vn = hbuf_new("f32", (size_t)n * HEADS * D, "v_new");
  hbuf_fill_uniform(&kc, &rng, -1, 1), hbuf_fill_uniform(&vc, &rng, -1, 1);
  hbuf_fill_uniform(&kn, &rng, 2, 3), hbuf_fill_uniform(&vn, &rng, 4, 5);
  double *k0 = malloc(sizeof(double) * kc.n), *v0 = malloc(sizeof(double) * vc.n);
  for (size_t i = 0; i < kc.n; i++) k0[i] = hbuf_get(&kc, i), v0[i] = hbuf_get(&vc, i);
  char page[8];
  snprintf(page, sizeof page, "%d", PAGE);
  tc_compilation *c = harness_compile("lang/std/paged_decode.tile", "paged_append",
                                      (const char *const[]){"T", "f32", "HEAD_DIM", "64", "PAGE", page, NULL});
  int64_t stride_page = (int64_t)page_elems, stride_slot = D, stride_head = PAGE * D; /* HND */
  tc_arg a[14] = {{.p = kc.data}, {.p = vc.data}, {.p = kn.data}, {.p = vn.data}, {.p = bi.data},
                  {.p = pos.data}, {.p = ids.data}, {.p = indptr.data}, {.i = n}, {.i = HEADS},
                  {.i = stride_page}, {.i = stride_slot}, {.i = stride_head}, {.p = ids.data}};
  const HBuf *bufs[] = {&kc, &vc, &kn, &vn, &bi, &pos, &ids, &indptr};
  harness_run(c, (int64_t[3]){1, 1, 1}, a, 14, bufs, 8);
  tc_free(c);
  /* what the cache must hold now */
  for (int i = 0; i < n; i++) {
    int b = (int)hbuf_get(&bi, i), p = (int)hbuf_get(&pos, i);
    int pg = page_ids_v[indptr_v[b] + p / PAGE];
    for (int g = 0; g < HEADS; g++)
      for (int e = 0; e < D; e++) {
        size_t at = (size_t)pg * page_elems + (size_t)(p % PAGE) * stride_slot + (size_t)g * stride_head + e;
        k0[at] = hbuf_get(&kn, ((size_t)i * HEADS + g) * D + e), v0[at] = hbuf_get(&vn, ((size_t)i * HEADS + g) * D + e);
      }
  }
  int wrong = 0;
  for (size_t i = 0; i < kc.n; i++) wrong += hbuf_get(&kc, i) != k0[i] || hbuf_get(&vc, i) != v0[i];
  cr_expect_eq(wrong, 0, "%d elements of the caches differ from the expected", wrong);
  free(k0), free(v0);
  HBuf *all[] = {&ids, &indptr, &bi, &pos, &kc, &vc, &kn, &vn};
  for (int i = 0; i < 8; i++) hbuf_free(all[i]);
}

/* paged_append into an e4m3 cache with per-head scales: each stored value
 * is the new value over its head's scale, rounded to e4m3, clamped at
 * 448 (some new values are beyond it); nothing else changes. */
Test(paged_append, fp8_cache_quantized_with_per_head_scales) {
  enum { PAGE = 16, HEADS = 2, POOL = 4, NEW = 5 };
  Rng rng = {12};
  const int ids_v[] = {3, 1}, indptr_v[] = {0, 2}, pos_v[NEW] = {0, 5, 16, 17, 31};
  HBuf ids = hbuf_new("i32", 2, "page_ids"), indptr = hbuf_new("i32", 2, "indptr");
  HBuf bi = hbuf_new("i32", NEW, "batch_idx"), pos = hbuf_new("i32", NEW, "pos");
  for (int i = 0; i < 2; i++) hbuf_set(&ids, i, ids_v[i]), hbuf_set(&indptr, i, indptr_v[i]);
  for (int i = 0; i < NEW; i++) hbuf_set(&bi, i, 0), hbuf_set(&pos, i, pos_v[i]);
  size_t page_elems = (size_t)PAGE * HEADS * D;
  HBuf kc = hbuf_new("f8e4m3", POOL * page_elems, "k_cache"), vc = hbuf_new("f8e4m3", POOL * page_elems, "v_cache");
  HBuf kn = hbuf_new("bf16", (size_t)NEW * HEADS * D, "k_new"), vn = hbuf_new("bf16", (size_t)NEW * HEADS * D, "v_new");
  HBuf sc = hbuf_new("f32", 2 * HEADS, "kv_scale");
  hbuf_fill_uniform(&kc, &rng, -400, 400), hbuf_fill_uniform(&vc, &rng, -400, 400);
  hbuf_fill_uniform(&kn, &rng, -3, 3), hbuf_fill_uniform(&vn, &rng, -3, 3);
  for (int i = 0; i < 2 * HEADS; i++) hbuf_set(&sc, i, 0.004 * (i + 1)); /* 3 / 0.004 = 750: some clamp */
  double *k0 = malloc(sizeof(double) * kc.n), *v0 = malloc(sizeof(double) * vc.n);
  for (size_t i = 0; i < kc.n; i++) k0[i] = hbuf_get(&kc, i), v0[i] = hbuf_get(&vc, i);
  tc_compilation *c = harness_compile("lang/std/paged_decode.tile", "paged_append",
                                      (const char *const[]){"KV", "f8e4m3", "SCALED", "true", "HEAD_DIM", "64",
                                                            "PAGE", "16", NULL});
  int64_t stride_page = (int64_t)page_elems, stride_slot = HEADS * D, stride_head = D; /* NHD */
  tc_arg a[14] = {{.p = kc.data}, {.p = vc.data}, {.p = kn.data}, {.p = vn.data}, {.p = bi.data},
                  {.p = pos.data}, {.p = ids.data}, {.p = indptr.data}, {.i = NEW}, {.i = HEADS},
                  {.i = stride_page}, {.i = stride_slot}, {.i = stride_head}, {.p = sc.data}};
  const HBuf *bufs[] = {&kc, &vc, &kn, &vn, &bi, &pos, &ids, &indptr, &sc};
  harness_run(c, (int64_t[3]){1, 1, 1}, a, 14, bufs, 9);
  tc_free(c);
  /* the expected stored values: e4m3 of clamp(x / scale), through a
   * one-element e4m3 buffer (the harness's rounding) */
  HBuf one = hbuf_new("f8e4m3", 1, "one");
  int clamped = 0;
  for (int i = 0; i < NEW; i++) {
    int pg = ids_v[pos_v[i] / PAGE];
    for (int g = 0; g < HEADS; g++)
      for (int e = 0; e < D; e++) {
        size_t at = (size_t)pg * page_elems + (size_t)(pos_v[i] % PAGE) * stride_slot + (size_t)g * stride_head + e;
        size_t from = ((size_t)i * HEADS + g) * D + e;
        for (int kv = 0; kv < 2; kv++) {
          double x = hbuf_get(kv ? &vn : &kn, from) / (double)(float)hbuf_get(&sc, 2 * g + kv);
          clamped += fabs(x) > 448;
          hbuf_set(&one, 0, fmin(fmax(x, -448), 448));
          (kv ? v0 : k0)[at] = hbuf_get(&one, 0);
        }
      }
  }
  cr_expect_gt(clamped, 0, "no value reached the clamp: the test does not check it");
  int wrong = 0;
  for (size_t i = 0; i < kc.n; i++) wrong += hbuf_get(&kc, i) != k0[i] || hbuf_get(&vc, i) != v0[i];
  cr_expect_eq(wrong, 0, "%d elements of the caches differ from the expected", wrong);
  free(k0), free(v0);
  HBuf *all[] = {&ids, &indptr, &bi, &pos, &kc, &vc, &kn, &vn, &sc, &one};
  for (int i = 0; i < 10; i++) hbuf_free(all[i]);
}

/* paged_copy_pages and paged_swap_pages over pages of 3000 elements (more
 * than one block of 2048): the named pages move, the others stay. */
Test(paged_pages, copy_then_swap) {
  enum { POOL = 7, ELEMS = 3000, N = 2 };
  Rng rng = {13};
  HBuf kc = hbuf_new("bf16", POOL * ELEMS, "k_cache"), vc = hbuf_new("bf16", POOL * ELEMS, "v_cache");
  hbuf_fill_uniform(&kc, &rng, -1, 1), hbuf_fill_uniform(&vc, &rng, -1, 1);
  double *k0 = malloc(sizeof(double) * kc.n), *v0 = malloc(sizeof(double) * vc.n);
  for (size_t i = 0; i < kc.n; i++) k0[i] = hbuf_get(&kc, i), v0[i] = hbuf_get(&vc, i);
  const int src_v[N] = {4, 0}, dst_v[N] = {2, 6}, a_v[N] = {1, 2}, b_v[N] = {5, 3};
  HBuf src = hbuf_new("i32", N, "src"), dst = hbuf_new("i32", N, "dst"), pa = hbuf_new("i32", N, "a"), pb = hbuf_new("i32", N, "b");
  for (int j = 0; j < N; j++) hbuf_set(&src, j, src_v[j]), hbuf_set(&dst, j, dst_v[j]), hbuf_set(&pa, j, a_v[j]), hbuf_set(&pb, j, b_v[j]);
  const char *const defs[] = {NULL};
  tc_compilation *c = harness_compile("lang/std/paged_decode.tile", "paged_copy_pages", defs);
  tc_arg a[5] = {{.p = kc.data}, {.p = vc.data}, {.p = src.data}, {.p = dst.data}, {.i = ELEMS}};
  const HBuf *bufs[] = {&kc, &vc, &src, &dst};
  harness_run(c, (int64_t[3]){2, N, 1}, a, 5, bufs, 4);
  tc_free(c);
  c = harness_compile("lang/std/paged_decode.tile", "paged_swap_pages", defs);
  tc_arg s[5] = {{.p = kc.data}, {.p = vc.data}, {.p = pa.data}, {.p = pb.data}, {.i = ELEMS}};
  const HBuf *sbufs[] = {&kc, &vc, &pa, &pb};
  harness_run(c, (int64_t[3]){2, N, 1}, s, 5, sbufs, 4);
  tc_free(c);
  /* expected: copies first, then swaps, page by page */
  int where[POOL];
  for (int p = 0; p < POOL; p++) where[p] = p; /* page p now holds the original page where[p] */
  for (int j = 0; j < N; j++) where[dst_v[j]] = where[src_v[j]];
  for (int j = 0; j < N; j++) {
    int t = where[a_v[j]];
    where[a_v[j]] = where[b_v[j]], where[b_v[j]] = t;
  }
  int wrong = 0;
  for (int p = 0; p < POOL; p++)
    for (int e = 0; e < ELEMS; e++) {
      size_t at = (size_t)p * ELEMS + e, from = (size_t)where[p] * ELEMS + e;
      wrong += hbuf_get(&kc, at) != k0[from] || hbuf_get(&vc, at) != v0[from];
    }
  cr_expect_eq(wrong, 0, "%d elements differ from the expected pages", wrong);
  free(k0), free(v0);
  HBuf *all[] = {&kc, &vc, &src, &dst, &pa, &pb};
  for (int i = 0; i < 6; i++) hbuf_free(all[i]);
}
