/* test_moe.c - lang/std/moe.tile in the interpreter: the routing against a
 * float64 reference (the chosen experts exactly, on inputs without ties
 * and on rows of equal logits, where the lower indices win), and the
 * permutation (counts, offsets, the pair -> row map and its inverse) by
 * the properties the GPU must also meet: every row taken exactly once,
 * inside its expert's segment. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "act_ref.h"
#include "harness.h"

#define F32_TOL 1e-6
#define BF16_TOL 1e-2
#define MOE_MAX_EXPERTS 128
#define MOE_MAX_K 8
/* a capacity no expert reaches */
enum { NO_LIMIT = 1 << 30 };


typedef struct Route {
  int tokens, experts, tiles_experts, top_k, score;
  bool renorm, ties; /* ties: every fifth token's logits all equal */
} Route;

/* Runs moe_route; fills ids and weights (tokens * top_k). */
static void run_route(const Route *r, HBuf *logits, HBuf *ids, HBuf *weights) {
  char buf[16];
  snprintf(buf, sizeof buf, "%d", r->tiles_experts);
  const char *defs[] = {"EXPERTS", buf, NULL};
  tc_compilation *c = harness_compile("lang/std/moe.tile", "moe_route", defs);
  hbuf_poison(ids), hbuf_poison(weights);
  tc_arg args[9] = {{.p = ids->data}, {.p = weights->data}, {.p = logits->data}, {.i = r->tokens}, {.i = r->experts},
                    {.i = r->experts}, {.i = r->top_k}, {.i = r->score}, {.i = r->renorm}};
  const HBuf *bufs[] = {ids, weights, logits};
  int64_t bt = 0;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK_T", &bt));
  harness_run(c, (int64_t[3]){harness_cdiv(r->tokens, bt), 1, 1}, args, 9, bufs, 3);
  tc_free(c);
}

static void check_route(Route r, uint64_t seed) {
  Rng rng = {seed};
  HBuf logits = hbuf_new("f32", (size_t)r.tokens * r.experts, "logits");
  HBuf ids = hbuf_new("i32", (size_t)r.tokens * r.top_k, "ids"), w = hbuf_new("f32", (size_t)r.tokens * r.top_k, "weights");
  hbuf_fill_uniform(&logits, &rng, -4, 4);
  if (r.ties)
    for (int t = 0; t < r.tokens; t += 5)
      for (int e = 0; e < r.experts; e++) hbuf_set(&logits, (size_t)t * r.experts + e, 0.5);
  run_route(&r, &logits, &ids, &w);
  for (int t = 0; t < r.tokens; t++) {
    double p[MOE_MAX_EXPERTS], m = -INFINITY, s = 0;
    bool taken[MOE_MAX_EXPERTS] = {false};
    for (int e = 0; e < r.experts; e++) m = fmax(m, hbuf_get(&logits, (size_t)t * r.experts + e));
    for (int e = 0; e < r.experts; e++) {
      double x = hbuf_get(&logits, (size_t)t * r.experts + e);
      p[e] = r.score == 0 ? exp(x - m) : 1 / (1 + exp(-x));
      s += p[e];
    }
    if (r.score == 0)
      for (int e = 0; e < r.experts; e++) p[e] /= s;
    int want[MOE_MAX_K];
    double total = 0;
    for (int kk = 0; kk < r.top_k; kk++) {
      int best = -1;
      for (int e = 0; e < r.experts; e++)
        if (!taken[e] && (best < 0 || p[e] > p[best])) best = e; /* strict: the lower index keeps a tie */
      taken[best] = true, want[kk] = best, total += p[best];
    }
    for (int kk = 0; kk < r.top_k; kk++) {
      size_t i = (size_t)t * r.top_k + kk;
      cr_expect_eq((int)hbuf_get(&ids, i), want[kk], "token %d choice %d: expert %d, want %d", t, kk,
                   (int)hbuf_get(&ids, i), want[kk]);
      double wt = p[want[kk]] / (r.renorm ? total : 1);
      cr_expect(fabs(hbuf_get(&w, i) - wt) <= F32_TOL * fmax(1, wt), "token %d choice %d: weight %g, want %g", t, kk,
                hbuf_get(&w, i), wt);
    }
  }
  hbuf_free(&logits), hbuf_free(&ids), hbuf_free(&w);
}

Test(moe, route_softmax_top2_of_6) { check_route((Route){77, 6, 8, 2, 0, true, false}, 101); }
Test(moe, route_sigmoid_top8_of_128_no_renorm) { check_route((Route){40, 128, 128, 8, 1, false, false}, 102); }
Test(moe, route_ties_go_to_the_lower_experts) { check_route((Route){33, 8, 8, 2, 0, true, true}, 103); }
Test(moe, route_top1) { check_route((Route){300, 16, 16, 1, 0, true, true}, 104); }

/* The routing's permutation: counts, offsets (experts + 2), the maps and
 * the blocks' counts (then starts). */
typedef struct Perm {
  HBuf counts, offsets, blocks, row_of, token_of, tile_expert;
  size_t rows_bound; /* rows the padded order may take: pairs + experts * (align - 1) */
} Perm;

/* moe_count, moe_scan, moe_scatter on ids, with at most `capacity` rows
 * per expert and segments starting at multiples of `align` rows. */
static Perm run_permutation(const Route *r, HBuf *ids, int capacity, int align) {
  size_t pairs = (size_t)r->tokens * r->top_k;
  char ebuf[16];
  snprintf(ebuf, sizeof ebuf, "%d", r->tiles_experts);
  char abuf[16];
  snprintf(abuf, sizeof abuf, "%d", align);
  const char *edefs[] = {"EXPERTS", ebuf, NULL}, *sdefs[] = {"EXPERTS", ebuf, "ALIGN", abuf, NULL};
  tc_compilation *c = harness_compile("lang/std/moe.tile", "moe_count", edefs);
  int64_t bp = 0;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK", &bp));
  int64_t grid = harness_cdiv((int64_t)pairs, bp);
  Perm pm = {hbuf_new("i32", (size_t)r->experts, "counts"), hbuf_new("i32", (size_t)r->experts + 2, "offsets"),
             hbuf_new("i32", (size_t)grid * r->experts, "block_counts"), hbuf_new("i32", pairs, "row_of"),
             hbuf_new("i32", pairs + (size_t)r->experts * (align - 1), "token_of"),
             hbuf_new("i32", (pairs + (size_t)r->experts * (align - 1)) / align + 1, "tile_expert"),
             pairs + (size_t)r->experts * (align - 1)};
  hbuf_poison(&pm.counts), hbuf_poison(&pm.offsets), hbuf_poison(&pm.blocks), hbuf_poison(&pm.row_of),
      hbuf_poison(&pm.token_of), hbuf_poison(&pm.tile_expert);
  tc_arg ca[6] = {{.p = pm.blocks.data}, {.p = pm.row_of.data}, {.p = ids->data},
                  {.i = r->tokens},      {.i = r->top_k},       {.i = r->experts}};
  const HBuf *cb[] = {&pm.blocks, &pm.row_of, ids};
  harness_run(c, (int64_t[3]){grid, 1, 1}, ca, 6, cb, 3);
  tc_free(c);
  c = harness_compile("lang/std/moe.tile", "moe_scan", NULL);
  int64_t be = 0;
  cr_assert(tc_kernel_const_int(c, 0, "BLOCK_E", &be));
  tc_arg sa[4] = {{.p = pm.blocks.data}, {.p = pm.counts.data}, {.i = grid}, {.i = r->experts}};
  const HBuf *sb[] = {&pm.blocks, &pm.counts};
  harness_run(c, (int64_t[3]){harness_cdiv(r->experts, be), 1, 1}, sa, 4, sb, 2);
  tc_free(c);
  c = harness_compile("lang/std/moe.tile", "moe_scatter", sdefs);
  tc_arg xa[11] = {{.p = pm.row_of.data},    {.p = pm.token_of.data}, {.p = pm.offsets.data}, {.p = pm.tile_expert.data},
                   {.p = pm.blocks.data},    {.p = pm.counts.data},   {.p = ids->data},       {.i = r->tokens},
                   {.i = r->top_k},          {.i = r->experts},       {.i = capacity}};
  const HBuf *xb[] = {&pm.row_of, &pm.token_of, &pm.offsets, &pm.tile_expert, &pm.blocks, &pm.counts, ids};
  harness_run(c, (int64_t[3]){grid, 1, 1}, xa, 11, xb, 7);
  tc_free(c);
  return pm;
}

static void perm_free(Perm *pm) {
  hbuf_free(&pm->counts), hbuf_free(&pm->offsets), hbuf_free(&pm->blocks), hbuf_free(&pm->row_of),
      hbuf_free(&pm->token_of), hbuf_free(&pm->tile_expert);
}

/* count, scan, scatter on the routing of `r` (ids from moe_route, or with
 * `skew` every token's first choice set to expert 0), against the
 * permutation computed here: pairs in priority order (every first choice
 * in token order, then every second choice, ...), each expert keeping its
 * first `capacity` pairs in that order, rows in that order. */
static void check_permutation(Route r, int capacity, int align, bool skew, uint64_t seed) {
  Rng rng = {seed};
  size_t pairs = (size_t)r.tokens * r.top_k;
  HBuf logits = hbuf_new("f32", (size_t)r.tokens * r.experts, "logits");
  HBuf ids = hbuf_new("i32", pairs, "ids"), w = hbuf_new("f32", pairs, "weights");
  hbuf_fill_uniform(&logits, &rng, -4, 4);
  if (skew)
    for (int t = 0; t < r.tokens; t++) hbuf_set(&logits, (size_t)t * r.experts, 100);
  run_route(&r, &logits, &ids, &w);
  Perm pm = run_permutation(&r, &ids, capacity, align);
  int routed[MOE_MAX_EXPERTS] = {0}, kept[MOE_MAX_EXPERTS] = {0}, start[MOE_MAX_EXPERTS + 1] = {0}, dropped = 0;
  for (size_t i = 0; i < pairs; i++) routed[(int)hbuf_get(&ids, i)]++;
  for (int e = 0; e < r.experts; e++) {
    kept[e] = routed[e] < capacity ? routed[e] : capacity;
    start[e + 1] = start[e] + (kept[e] + align - 1) / align * align, dropped += routed[e] - kept[e];
    cr_expect_eq((int)hbuf_get(&pm.counts, e), routed[e], "count of expert %d", e);
    cr_expect_eq((int)hbuf_get(&pm.offsets, e), start[e], "offset of expert %d", e);
  }
  cr_expect_eq((int)hbuf_get(&pm.offsets, r.experts), start[r.experts], "rows kept");
  cr_expect_eq((int)hbuf_get(&pm.offsets, r.experts + 1), dropped, "pairs dropped");
  int next[MOE_MAX_EXPERTS] = {0};
  for (size_t q = 0; q < pairs; q++) {
    size_t t = q % (size_t)r.tokens, pair = t * (size_t)r.top_k + q / (size_t)r.tokens;
    int e = (int)hbuf_get(&ids, pair), rank = next[e]++;
    int want = rank < capacity ? start[e] + rank : -1, row = (int)hbuf_get(&pm.row_of, pair);
    cr_expect_eq(row, want, "pair %zu (token %zu, expert %d, rank %d): row %d, want %d", pair, t, e, rank, row, want);
    if (want >= 0) cr_expect_eq((int)hbuf_get(&pm.token_of, (size_t)want), (int)t, "token_of[%d]", want);
  }
  for (int e = 0; e < r.experts && align > 1; e++) {
    for (int row = start[e] + kept[e]; row < start[e + 1]; row++)
      cr_expect_eq((int)hbuf_get(&pm.token_of, (size_t)row), -1, "padding row %d of expert %d: token_of", row, e);
    for (int t = start[e] / align; t < start[e + 1] / align; t++)
      cr_expect_eq((int)hbuf_get(&pm.tile_expert, (size_t)t), e, "tile_expert[%d]", t);
  }
  perm_free(&pm);
  hbuf_free(&logits), hbuf_free(&ids), hbuf_free(&w);
}

Test(moe, permutation_top2_of_8) { check_permutation((Route){1000, 8, 8, 2, 0, true, false}, NO_LIMIT, 1, false, 105); }
Test(moe, permutation_top8_of_128) { check_permutation((Route){97, 128, 128, 8, 1, true, false}, NO_LIMIT, 1, false, 106); }
/* one token: most experts get none */
Test(moe, permutation_one_token) { check_permutation((Route){1, 128, 128, 8, 0, true, false}, NO_LIMIT, 1, false, 107); }
/* segments padded to 64 and 128 rows: padding rows have no token, every row tile its expert */
Test(moe, permutation_padded_segments) {
  check_permutation((Route){1000, 8, 8, 2, 0, true, false}, NO_LIMIT, 64, false, 117);
  check_permutation((Route){97, 128, 128, 8, 1, true, false}, 5, 128, false, 118);
  check_permutation((Route){1, 32, 32, 8, 0, true, false}, NO_LIMIT, 128, false, 119);
}
/* capacity: the later pairs of full experts dropped, first choices first */
Test(moe, permutation_capacity_drops_in_priority_order) {
  check_permutation((Route){1000, 8, 8, 2, 0, true, false}, 200, 1, false, 112);
  check_permutation((Route){300, 8, 8, 2, 0, true, false}, 250, 1, true, 113); /* expert 0 takes every first choice */
  check_permutation((Route){97, 32, 32, 4, 1, true, false}, 3, 1, false, 114);
  check_permutation((Route){50, 8, 8, 1, 0, true, false}, 0, 1, false, 115); /* everything dropped */
}

/* Random logits for r (8 experts) in which experts 3 and 6 lose every
 * vote, and their routing (ids and weights, tokens * top_k). */
static void route_without_3_and_6(const Route *r, Rng *rng, HBuf *logits, HBuf *ids, HBuf *wts) {
  size_t pairs = (size_t)r->tokens * r->top_k;
  *logits = hbuf_new("f32", (size_t)r->tokens * r->experts, "logits");
  *ids = hbuf_new("i32", pairs, "ids"), *wts = hbuf_new("f32", pairs, "weights");
  hbuf_fill_uniform(logits, rng, -4, 4);
  for (int t = 0; t < r->tokens; t++)
    hbuf_set(logits, (size_t)t * 8 + 3, -100), hbuf_set(logits, (size_t)t * 8 + 6, -100);
  run_route(r, logits, ids, wts);
}

/* The grouped GEMM: out[r] = x[token_of[r]] @ w[expert of r] (or, gated,
 * act(x @ w[e]) * (x @ w_up[e])), experts 3 and 6 chosen by no token (no
 * tiles), rows gathered or pre-permuted; then the combine of each token's
 * two rows with its routing weights. */
static void check_grouped_gemm(bool gather, bool gated, int act, int capacity, uint64_t seed) {
  Route r = {100, 8, 8, 2, 0, true, false};
  const int k = 72, n = 136;
  Rng rng = {seed};
  size_t pairs = (size_t)r.tokens * r.top_k;
  HBuf logits, ids, wts;
  route_without_3_and_6(&r, &rng, &logits, &ids, &wts);
  Perm pm = run_permutation(&r, &ids, capacity, 1);
  size_t rows = (size_t)hbuf_get(&pm.offsets, r.experts); /* kept */
  cr_expect(capacity < NO_LIMIT ? rows < pairs : rows == pairs, "%zu of %zu pairs kept", rows, pairs);
  HBuf x = hbuf_new("bf16", (size_t)r.tokens * k, "x"), w = hbuf_new("bf16", (size_t)8 * k * n, "w");
  HBuf wu = hbuf_new("bf16", (size_t)8 * k * n, "w_up");
  HBuf xp = hbuf_new("bf16", pairs * k, "x_permuted"), out = hbuf_new("bf16", pairs * n, "out");
  HBuf y = hbuf_new("f32", (size_t)r.tokens * n, "y");
  hbuf_fill_uniform(&x, &rng, -1, 1), hbuf_fill_uniform(&w, &rng, -0.3, 0.3), hbuf_fill_uniform(&wu, &rng, -0.3, 0.3);
  for (size_t row = 0; row < rows; row++)
    for (int t = 0; t < k; t++) hbuf_set(&xp, row * k + t, hbuf_get(&x, (size_t)hbuf_get(&pm.token_of, row) * k + t));
  hbuf_poison(&out), hbuf_poison(&y);
  char a[4];
  snprintf(a, sizeof a, "%d", act);
  const char *defs[] = {"EXPERTS", "8", "GATHER", gather ? "true" : "false", "GATED", gated ? "true" : "false",
                        "ACT", a, NULL};
  tc_compilation *c = harness_compile("lang/std/moe.tile", "moe_gemm", defs);
  const HBuf *src = gather ? &x : &xp;
  tc_arg args[9] = {{.p = out.data}, {.p = src->data}, {.p = w.data}, {.p = wu.data}, {.p = pm.offsets.data},
                     {.p = pm.token_of.data}, {.i = 8}, {.i = n}, {.i = k}};
  const HBuf *bufs[] = {&out, src, &w, &wu, &pm.offsets, &pm.token_of};
  harness_run(c, (int64_t[3]){3, 1, 1}, args, 9, bufs, 6);
  tc_free(c);
  cr_expect_eq((int)hbuf_get(&pm.counts, 3) + (int)hbuf_get(&pm.counts, 6), 0, "experts 3 and 6 have no rows");
  double *want = malloc(sizeof(double) * out.n);
  for (size_t row = 0; row < rows; row++) {
    int e = 0;
    while (e + 1 < 8 && hbuf_get(&pm.offsets, e + 1) <= (double)row) e++;
    size_t tok = (size_t)hbuf_get(&pm.token_of, row);
    for (int j = 0; j < n; j++) {
      double g = 0, u = 0;
      for (int t = 0; t < k; t++) {
        g += hbuf_get(&x, tok * k + t) * hbuf_get(&w, ((size_t)e * k + t) * n + j);
        u += hbuf_get(&x, tok * k + t) * hbuf_get(&wu, ((size_t)e * k + t) * n + j);
      }
      want[row * n + j] = gated ? act_ref(g, act == 0 ? 4 : act == 1 ? 2 : 3) * u : g;
    }
  }
  double err = rel_error(&out, want, rows * n);
  cr_expect_lt(err, BF16_TOL, "grouped gemm (gather %d gated %d act %d): rel error %g", gather, gated, act, err);
  /* the combine, on the kernel's out */
  c = harness_compile("lang/std/moe.tile", "moe_combine", (const char *const[]){"T", "f32", NULL});
  HBuf out32 = hbuf_new("f32", out.n, "out");
  for (size_t i = 0; i < rows * n; i++) hbuf_set(&out32, i, hbuf_get(&out, i));
  for (size_t i = rows * n; i < out.n; i++) hbuf_set(&out32, i, NAN); /* no row past the kept ones is read */
  tc_arg ca[7] = {{.p = y.data}, {.p = out32.data}, {.p = wts.data}, {.p = pm.row_of.data}, {.i = r.tokens}, {.i = n},
                  {.i = r.top_k}};
  const HBuf *cb[] = {&y, &out32, &wts, &pm.row_of};
  harness_run(c, (int64_t[3]){harness_cdiv(r.tokens, 16), harness_cdiv(n, 256), 1}, ca, 7, cb, 4);
  tc_free(c);
  double *want_y = calloc((size_t)r.tokens * n, sizeof(double));
  for (int t = 0; t < r.tokens; t++)
    for (int kk = 0; kk < r.top_k; kk++) {
      size_t pair = (size_t)t * r.top_k + kk;
      int row = (int)hbuf_get(&pm.row_of, pair);
      for (int j = 0; j < n && row >= 0; j++) want_y[(size_t)t * n + j] += hbuf_get(&wts, pair) * hbuf_get(&out32, (size_t)row * n + j);
    }
  double ey = rel_error(&y, want_y, y.n);
  cr_expect_lt(ey, F32_TOL, "combine: rel error %g", ey);
  free(want), free(want_y);
  perm_free(&pm);
  HBuf *all[] = {&logits, &ids, &wts, &x, &w, &wu, &xp, &out, &y, &out32};
  for (int i = 0; i < 10; i++) hbuf_free(all[i]);
}

Test(moe, grouped_gemm_gathering_rows) { check_grouped_gemm(true, false, 0, NO_LIMIT, 108); }
Test(moe, grouped_gemm_permuted_rows) { check_grouped_gemm(false, false, 0, NO_LIMIT, 109); }
/* 200 pairs over 6 experts, at most 25 rows each: dropped pairs add nothing */
Test(moe, grouped_gemm_and_combine_with_dropped_pairs) { check_grouped_gemm(true, true, 0, 25, 116); }
Test(moe, grouped_gemm_gated_swiglu) { check_grouped_gemm(true, true, 0, NO_LIMIT, 110); }
Test(moe, grouped_gemm_gated_geglu_tanh) { check_grouped_gemm(true, true, 2, NO_LIMIT, 111); }

/* The padded path: moe_scatter with ALIGN = BLOCK_M, moe_gather (x in the
 * permuted order, padding rows zero), moe_gemm_ws gated (the hidden rows)
 * and plain (the experts' outputs) on TMA descriptors; every kept row
 * against float64, padding rows zero. Experts 3 and 6 get no token. */
static void check_grouped_gemm_ws(int act, int capacity, uint64_t seed) {
  Route r = {300, 8, 8, 2, 0, true, false}; /* about 100 rows per expert: two or three row tiles each */
  enum { ALIGN = 64 };
  const int k = 72, n = 136;
  Rng rng = {seed};
  HBuf logits, ids, wts;
  route_without_3_and_6(&r, &rng, &logits, &ids, &wts);
  Perm pm = run_permutation(&r, &ids, capacity, ALIGN);
  size_t bound = pm.rows_bound, rows = (size_t)hbuf_get(&pm.offsets, r.experts);
  cr_assert(rows % ALIGN == 0 && rows <= bound, "%zu padded rows (bound %zu)", rows, bound);
  HBuf x = hbuf_new("bf16", (size_t)r.tokens * k, "x"), xp = hbuf_new("bf16", bound * k, "xp");
  HBuf w = hbuf_new("bf16", (size_t)8 * k * n, "w"), wu = hbuf_new("bf16", (size_t)8 * k * n, "w_up");
  HBuf wd = hbuf_new("bf16", (size_t)8 * n * k, "w_down");
  HBuf hid = hbuf_new("bf16", bound * n, "hidden"), out = hbuf_new("bf16", bound * k, "out");
  hbuf_fill_uniform(&x, &rng, -1, 1), hbuf_fill_uniform(&w, &rng, -0.3, 0.3), hbuf_fill_uniform(&wu, &rng, -0.3, 0.3);
  hbuf_fill_uniform(&wd, &rng, -0.3, 0.3);
  hbuf_poison(&xp), hbuf_poison(&hid), hbuf_poison(&out);
  tc_compilation *c = harness_compile("lang/std/moe.tile", "moe_gather", NULL);
  tc_arg ga[6] = {{.p = xp.data}, {.p = x.data}, {.p = pm.token_of.data}, {.p = pm.offsets.data}, {.i = 8}, {.i = k}};
  const HBuf *gb[] = {&xp, &x, &pm.token_of, &pm.offsets};
  harness_run(c, (int64_t[3]){harness_cdiv((int64_t)bound, 32), harness_cdiv(k, 256), 1}, ga, 6, gb, 4);
  tc_free(c);
  char a[4];
  snprintf(a, sizeof a, "%d", act);
  const char *up_defs[] = {"GATED", "true", "ACT", a, "BLOCK_M", "64", "BLOCK_N", "64", "CONSUMERS", "1", NULL};
  const char *down_defs[] = {"BLOCK_M", "64", "BLOCK_N", "64", "CONSUMERS", "1", NULL};
  /* up: hidden = act(xp w) * (xp w_up), descriptors [rows, cols] row-major */
  c = harness_compile("lang/std/moe.tile", "moe_gemm_ws", up_defs);
  tc_arg ua[9] = {{.p = hid.data, .shape = {(int64_t)bound, n}, .strides = {n, 1}},
                  {.p = xp.data, .shape = {(int64_t)bound, k}, .strides = {k, 1}},
                  {.p = w.data, .shape = {8 * k, n}, .strides = {n, 1}},
                  {.p = wu.data, .shape = {8 * k, n}, .strides = {n, 1}},
                  {.p = pm.offsets.data}, {.p = pm.tile_expert.data}, {.i = 8}, {.i = n}, {.i = k}};
  const HBuf *ub[] = {&hid, &xp, &w, &wu, &pm.offsets, &pm.tile_expert};
  harness_run(c, (int64_t[3]){5, 1, 1}, ua, 9, ub, 6);
  tc_free(c);
  /* down: out = hidden w_down */
  c = harness_compile("lang/std/moe.tile", "moe_gemm_ws", down_defs);
  tc_arg da[9] = {{.p = out.data, .shape = {(int64_t)bound, k}, .strides = {k, 1}},
                  {.p = hid.data, .shape = {(int64_t)bound, n}, .strides = {n, 1}},
                  {.p = wd.data, .shape = {8 * n, k}, .strides = {k, 1}},
                  {.p = wd.data, .shape = {8 * n, k}, .strides = {k, 1}},
                  {.p = pm.offsets.data}, {.p = pm.tile_expert.data}, {.i = 8}, {.i = k}, {.i = n}};
  const HBuf *db[] = {&out, &hid, &wd, &pm.offsets, &pm.tile_expert};
  harness_run(c, (int64_t[3]){3, 1, 1}, da, 9, db, 5);
  tc_free(c);
  double *want_h = calloc(rows * n, sizeof(double)), *want_o = calloc(rows * k, sizeof(double));
  size_t kept_rows = 0;
  for (int e = 0; e < 8; e++)
    for (size_t row = (size_t)hbuf_get(&pm.offsets, e); row < (size_t)hbuf_get(&pm.offsets, e + 1); row++) {
      int tok = (int)hbuf_get(&pm.token_of, row);
      if (tok < 0) continue; /* padding: zeros */
      kept_rows++;
      for (int j = 0; j < n; j++) {
        double g = 0, u = 0;
        for (int q = 0; q < k; q++) {
          g += hbuf_get(&x, (size_t)tok * k + q) * hbuf_get(&w, ((size_t)e * k + q) * n + j);
          u += hbuf_get(&x, (size_t)tok * k + q) * hbuf_get(&wu, ((size_t)e * k + q) * n + j);
        }
        want_h[row * n + j] = act_ref(g, act == 0 ? 4 : act == 1 ? 2 : 3) * u;
      }
      for (int j = 0; j < k; j++) { /* from the kernel's (bf16) hidden row */
        double s = 0;
        for (int q = 0; q < n; q++) s += hbuf_get(&hid, row * n + q) * hbuf_get(&wd, ((size_t)e * n + q) * k + j);
        want_o[row * k + j] = s;
      }
    }
  cr_expect(kept_rows > 0 && kept_rows < rows, "%zu rows kept of %zu padded", kept_rows, rows);
  double eh = rel_error(&hid, want_h, rows * n), eo = rel_error(&out, want_o, rows * k);
  cr_expect_lt(eh, BF16_TOL, "hidden (act %d, capacity %d): rel error %g", act, capacity, eh);
  cr_expect_lt(eo, BF16_TOL, "out (act %d, capacity %d): rel error %g", act, capacity, eo);
  free(want_h), free(want_o);
  perm_free(&pm);
  HBuf *all[] = {&logits, &ids, &wts, &x, &xp, &w, &wu, &wd, &hid, &out};
  for (int i = 0; i < 10; i++) hbuf_free(all[i]);
}

Test(moe, grouped_gemm_ws_swiglu_padded) { check_grouped_gemm_ws(0, NO_LIMIT, 120); }
Test(moe, grouped_gemm_ws_geglu_erf_with_capacity) { check_grouped_gemm_ws(1, 70, 121); }

/* fp8 with block scales: the padded permutation, moe_gather, then
 * moe_quantize_blocks (x per row and 128 columns) and moe_gemm_ws_fp8 on
 * weights quantized here per 128 x 128 block; against float64 on the
 * dequantized values (what the kernel multiplies), and, looser, on the
 * unquantized ones. k = 256 (two scale blocks with their own scales). */
static void check_grouped_gemm_fp8(bool gated, uint64_t seed) {
  Route r = {200, 8, 8, 2, 0, true, false};
  enum { ALIGN = 64, KB = 128 };
  const int k = 256, n = 128, kb = k / KB, nb = (n + 127) / 128;
  Rng rng = {seed};
  HBuf logits, ids, wts;
  route_without_3_and_6(&r, &rng, &logits, &ids, &wts);
  Perm pm = run_permutation(&r, &ids, NO_LIMIT, ALIGN);
  size_t bound = pm.rows_bound, rows = (size_t)hbuf_get(&pm.offsets, r.experts);
  HBuf x = hbuf_new("bf16", (size_t)r.tokens * k, "x"), xp = hbuf_new("bf16", bound * k, "xp");
  HBuf xq = hbuf_new("f8e4m3", bound * k, "xq"), xs = hbuf_new("f32", bound * kb, "x_scale");
  hbuf_fill_uniform(&x, &rng, -2, 2);
  for (int t = 0; t < r.tokens; t++) /* the second block of each row ten times larger: scales must differ */
    for (int q = KB; q < k; q++) hbuf_set(&x, (size_t)t * k + q, 10 * hbuf_get(&x, (size_t)t * k + q));
  hbuf_poison(&xp), hbuf_poison(&xq), hbuf_poison(&xs);
  tc_compilation *c = harness_compile("lang/std/moe.tile", "moe_gather", NULL);
  tc_arg ga[6] = {{.p = xp.data}, {.p = x.data}, {.p = pm.token_of.data}, {.p = pm.offsets.data}, {.i = 8}, {.i = k}};
  const HBuf *gb[] = {&xp, &x, &pm.token_of, &pm.offsets};
  harness_run(c, (int64_t[3]){harness_cdiv((int64_t)bound, 32), harness_cdiv(k, 256), 1}, ga, 6, gb, 4);
  tc_free(c);
  c = harness_compile("lang/std/moe.tile", "moe_quantize_blocks", NULL);
  tc_arg qa[6] = {{.p = xq.data}, {.p = xs.data}, {.p = xp.data}, {.p = pm.offsets.data}, {.i = 8}, {.i = k}};
  const HBuf *qb[] = {&xq, &xs, &xp, &pm.offsets};
  harness_run(c, (int64_t[3]){harness_cdiv((int64_t)rows, 16), kb, 1}, qa, 6, qb, 4);
  tc_free(c);
  /* weights [8 * n, k] quantized per 128 x 128 block, scales [8, nb, kb] */
  HBuf w[2] = {hbuf_new("f8e4m3", (size_t)8 * n * k, "w"), hbuf_new("f8e4m3", (size_t)8 * n * k, "w_up")};
  HBuf ws[2] = {hbuf_new("f32", (size_t)8 * nb * kb, "w_scale"), hbuf_new("f32", (size_t)8 * nb * kb, "w_up_scale")};
  double *wf = malloc(sizeof(double) * 2 * 8 * n * k);
  for (int m = 0; m < 2; m++)
    for (int e = 0; e < 8; e++)
      for (int b = 0; b < kb; b++) {
        double amax = 0;
        for (int j = 0; j < n; j++)
          for (int q = b * KB; q < (b + 1) * KB; q++) {
            double v = rng_uniform(&rng, -0.5, 0.5) * (1 + b + e);
            wf[((size_t)m * 8 * n + (size_t)e * n + j) * k + q] = v;
            amax = fmax(amax, fabs(v));
          }
        double s = amax / 448;
        hbuf_set(&ws[m], ((size_t)e * nb) * kb + b, s);
        for (int j = 0; j < n; j++)
          for (int q = b * KB; q < (b + 1) * KB; q++)
            hbuf_set(&w[m], ((size_t)e * n + j) * k + q, wf[((size_t)m * 8 * n + (size_t)e * n + j) * k + q] / s);
      }
  HBuf out = hbuf_new("f32", bound * n, "out");
  hbuf_poison(&out);
  const char *defs[] = {"T", "f32", "GATED", gated ? "true" : "false", "BLOCK_M", "64", "CONSUMERS", "1", NULL};
  c = harness_compile("lang/std/moe.tile", "moe_gemm_ws_fp8", defs);
  tc_arg fa[12] = {{.p = out.data, .shape = {(int64_t)bound, n}, .strides = {n, 1}},
                   {.p = xq.data, .shape = {(int64_t)bound, k}, .strides = {k, 1}},
                   {.p = xs.data},
                   {.p = w[0].data, .shape = {8 * n, k}, .strides = {k, 1}},
                   {.p = ws[0].data},
                   {.p = w[1].data, .shape = {8 * n, k}, .strides = {k, 1}},
                   {.p = ws[1].data},
                   {.p = pm.offsets.data}, {.p = pm.tile_expert.data}, {.i = 8}, {.i = n}, {.i = k}};
  const HBuf *fb[] = {&out, &xq, &xs, &w[0], &ws[0], &w[1], &ws[1], &pm.offsets, &pm.tile_expert};
  harness_run(c, (int64_t[3]){4, 1, 1}, fa, 12, fb, 9);
  tc_free(c);
  double *want = calloc(rows * n, sizeof(double)), *exact = calloc(rows * n, sizeof(double));
  for (int e = 0; e < 8; e++)
    for (size_t row = (size_t)hbuf_get(&pm.offsets, e); row < (size_t)hbuf_get(&pm.offsets, e + 1); row++) {
      int tok = (int)hbuf_get(&pm.token_of, row);
      if (tok < 0) continue;
      for (int j = 0; j < n; j++) {
        double dq[2] = {0, 0}, ex[2] = {0, 0};
        for (int m = 0; m < 2; m++)
          for (int q = 0; q < k; q++) {
            double a = hbuf_get(&xq, row * k + q) * hbuf_get(&xs, row * kb + q / KB);
            double b = hbuf_get(&w[m], ((size_t)e * n + j) * k + q) * hbuf_get(&ws[m], (size_t)e * nb * kb + q / KB);
            dq[m] += a * b;
            ex[m] += hbuf_get(&x, (size_t)tok * k + q) * wf[((size_t)m * 8 * n + (size_t)e * n + j) * k + q];
          }
        want[row * n + j] = gated ? act_ref(dq[0], 4) * dq[1] : dq[0];
        exact[row * n + j] = gated ? act_ref(ex[0], 4) * ex[1] : ex[0];
      }
    }
  double e1 = rel_error(&out, want, rows * n), e2 = rel_error(&out, exact, rows * n);
  cr_expect_lt(e1, F32_TOL * 10, "fp8 grouped gemm (gated %d) against the dequantized operands: %g", gated, e1);
  cr_expect_lt(e2, 5e-2, "fp8 grouped gemm (gated %d) against the unquantized operands: %g", gated, e2);
  cr_expect_gt(hbuf_get(&xs, (size_t)hbuf_get(&pm.offsets, 0) * kb + 1), 5 * hbuf_get(&xs, (size_t)hbuf_get(&pm.offsets, 0) * kb),
               "the second block's scale is the larger");
  free(want), free(exact), free(wf);
  perm_free(&pm);
  HBuf *all[] = {&logits, &ids, &wts, &x, &xp, &xq, &xs, &w[0], &w[1], &ws[0], &ws[1], &out};
  for (int i = 0; i < 12; i++) hbuf_free(all[i]);
}

Test(moe, grouped_gemm_fp8_block_scales) { check_grouped_gemm_fp8(false, 122); }
Test(moe, grouped_gemm_fp8_block_scales_gated) { check_grouped_gemm_fp8(true, 123); }
