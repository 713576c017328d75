/* decode_bench.c - `tile-gpu bench decode`: decode attention over a paged
 * KV cache (lang/std/paged_decode.tile through tile_paged.h) at the
 * shapes of ../shared/ANCHORS.md and the issue: 32 query heads, d128, one
 * query token per sequence, batch 64 at KV lengths 4k and 32k and batch 1
 * at 32k, with 8 and 32 KV heads; pages of 16 tokens in a shuffled pool
 * (NHD), every sequence full length. The figure is TB/s of K+V bytes read
 * (batch * len * heads_kv * 128 * 2 elements), against the device copy
 * measured here (read plus written bytes per second); the cuDNN decode
 * anchor comes from bench/decode_anchor.py in the same run. The fp8 e4m3
 * cache (per-head scales) is reported in tokens per second against the
 * bf16 cache's at the same shape. TILE_BENCH_DECODE_SPLITS=N[,...] also
 * times the batch-1 shapes split N ways (printed, not rows);
 * TILE_BENCH_DECODE_LAYOUTS=1 the batch-64 shapes with other cache layouts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tile_attention.h"
#include "tile_paged.h"

#define DECODE_NAME_BYTES 160
#define DECODE_HEADS 32
#define DECODE_DIM 128
#define DECODE_PAGE 16
/* The copy anchor's buffer (far beyond L2). */
#define DECODE_COPY_BYTES ((size_t)1 << 31)

typedef struct DecodeShape {
  int batch, heads_kv, len;
} DecodeShape;

static const DecodeShape shapes[] = {{64, 8, 4096}, {64, 8, 32768}, {64, 32, 4096},
                                     {64, 32, 32768}, {1, 8, 32768},  {1, 32, 32768}};

/* How the bench lays out the cache: pages of `page` tokens, NHD or HND,
 * in a shuffled pool or in order (sequence b's pages one after another). */
typedef struct DecodeCache {
  int page;
  bool hnd, ordered;
} DecodeCache;

static const DecodeCache default_cache = {DECODE_PAGE, false, false};

typedef struct DecodeCall {
  const tile_paged *pg;
  tile_paged_plan plan;
  tile_paged_buffers buf;
  const tile_kernel *k; /* a build of paged_decode run instead (one split), or NULL */
  uint32_t grid[3];
  tile_arg args[20];
} DecodeCall;

static bool do_decode(void *ctx) {
  DecodeCall *c = ctx;
  if (c->k) return tile_launch(c->k, c->grid, NULL, c->args, 20) == TILE_OK;
  if (tile_paged_decode(c->pg, &c->plan, &c->buf, NULL) != TILE_OK) {
    printf("  tile_paged_decode: %s\n", tile_last_error());
    return false;
  }
  return true;
}

/* An i32 device array from host values. */
static uint64_t dev_i32(Gpu *g, const int32_t *v, size_t n) {
  uint64_t d = 0;
  if (tile_mem_alloc(g->rt, n * 4, &d) != TILE_OK) return 0;
  if (tile_memcpy_htod(g->rt, d, v, n * 4) != TILE_OK || tile_synchronize(g->rt) != TILE_OK) {
    tile_mem_free(g->rt, d);
    return 0;
  }
  return d;
}

/* Milliseconds of one decode step at shape s with the cache type kv; the
 * buffers are made and freed here. */
static double time_shape_in(Gpu *g, const tile_paged *pg, const DecodeShape *s, const DecodeCache *cache,
                            tile_paged_kv_type kv, int *splits, const Variant *sweep, int nsweep, double *sweep_ms) {
  const int page_size = cache->page;
  size_t per_seq = (size_t)(s->len + page_size - 1) / page_size, pages = per_seq * (size_t)s->batch;
  size_t elems = pages * page_size * (size_t)s->heads_kv * DECODE_DIM;
  const char *elem = kv == TILE_PAGED_KV_E4M3 ? "f8e4m3" : "bf16";
  double range = kv == TILE_PAGED_KV_E4M3 ? 200 : 1;
  int32_t *ids = malloc(pages * sizeof *ids), *indptr = malloc(((size_t)s->batch + 1) * sizeof *indptr);
  int32_t *lens = malloc((size_t)s->batch * sizeof *lens);
  float scales[2 * DECODE_HEADS];
  double ms = -1;
  DecodeCall c = {.pg = pg};
  uint64_t bufs[10] = {0};
  if (!ids || !indptr || !lens) goto done;
  Rng r = {(uint64_t)s->len * 131 + (uint64_t)s->heads_kv};
  for (size_t i = 0; i < pages; i++) ids[i] = (int32_t)i;
  for (size_t i = pages; i > 1 && !cache->ordered; i--) { /* a shuffled pool */
    size_t j = (size_t)rng_uniform(&r, 0, (double)i);
    if (j >= i) j = i - 1;
    int32_t t = ids[i - 1];
    ids[i - 1] = ids[j], ids[j] = t;
  }
  for (int b = 0; b <= s->batch; b++) indptr[b] = (int32_t)((size_t)b * per_seq);
  for (int b = 0; b < s->batch; b++) lens[b] = s->len;
  for (int h = 0; h < 2 * s->heads_kv; h++) scales[h] = 1.0f / 200;
  size_t rows = (size_t)s->batch * DECODE_HEADS;
  bufs[0] = bench_dev_fill(g, elem, elems, range, 1);
  bufs[1] = bench_dev_fill(g, elem, elems, range, 2);
  bufs[2] = bench_dev_fill(g, "bf16", rows * DECODE_DIM, 1, 3);
  bufs[3] = bench_dev_fill(g, "bf16", rows * DECODE_DIM, 0, 0);
  bufs[4] = bench_dev_fill(g, "f32", rows, 0, 0);
  bufs[5] = dev_i32(g, ids, pages);
  bufs[6] = dev_i32(g, indptr, (size_t)s->batch + 1);
  bufs[7] = dev_i32(g, lens, (size_t)s->batch);
  bufs[8] = dev_i32(g, (const int32_t *)scales, 2 * (size_t)s->heads_kv); /* f32 bits */
  for (int i = 0; i < 9; i++)
    if (!bufs[i]) goto done;
  tile_paged_problem p = {.batch = s->batch, .heads = DECODE_HEADS, .heads_kv = s->heads_kv, .head_dim = DECODE_DIM,
                          .page_size = page_size, .kv_type = kv, .max_kv_len = s->len};
  if (cache->hnd) { /* [pages, heads_kv, page_size, head_dim] */
    p.strides[0] = (int64_t)page_size * s->heads_kv * DECODE_DIM;
    p.strides[1] = DECODE_DIM;
    p.strides[2] = (int64_t)page_size * DECODE_DIM;
  }
  if (tile_paged_decode_plan(pg, &p, &c.plan) != TILE_OK) {
    printf("  tile_paged_decode_plan: %s\n", tile_last_error());
    goto done;
  }
  if (c.plan.workspace_bytes && tile_mem_alloc(g->rt, c.plan.workspace_bytes, &bufs[9]) != TILE_OK) goto done;
  c.buf = (tile_paged_buffers){.out = bufs[3], .lse = bufs[4], .q = bufs[2], .k_cache = bufs[0], .v_cache = bufs[1],
                               .kv_scale = bufs[8], .page_ids = bufs[5], .indptr = bufs[6], .kv_len = bufs[7],
                               .workspace = bufs[9]};
  *splits = c.plan.splits;
  for (int i = 0; i < nsweep; i++) { /* other builds of the kernel, one split */
    const tile_paged_buffers *b = &c.buf;
    tile_arg a[20] = {tile_arg_ptr(b->out),      tile_arg_ptr(b->lse),     tile_arg_ptr(b->out),     tile_arg_ptr(b->lse),
                      tile_arg_ptr(b->q),        tile_arg_ptr(b->k_cache), tile_arg_ptr(b->v_cache), tile_arg_ptr(b->kv_scale),
                      tile_arg_ptr(b->page_ids), tile_arg_ptr(b->indptr),  tile_arg_ptr(b->kv_len),  tile_arg_i64(s->batch),
                      tile_arg_i64(DECODE_HEADS), tile_arg_i64(s->heads_kv), tile_arg_f32(c.plan.p.sm_scale),
                      tile_arg_i64(c.plan.p.strides[0]), tile_arg_i64(c.plan.p.strides[1]), tile_arg_i64(c.plan.p.strides[2]),
                      tile_arg_ptr(b->lse), tile_arg_ptr(b->lse)};
    DecodeCall v = c;
    v.k = sweep[i].kernel;
    memcpy(v.args, a, sizeof a);
    v.grid[0] = (uint32_t)s->heads_kv, v.grid[1] = (uint32_t)s->batch, v.grid[2] = 1;
    sweep_ms[i] = bench_time_ms(g, do_decode, &v);
  }
  const char *split_list = getenv("TILE_BENCH_DECODE_SPLITS");
  if (split_list && *split_list && s->batch == 1) /* other split counts than the rule's, the same kernels */
    for (const char *at = split_list; *at;) {
      int n = atoi(at);
      size_t rows = (size_t)n * (size_t)s->batch * DECODE_HEADS;
      uint64_t ws = 0;
      if (n >= 2 && n <= TILE_PAGED_MAX_SPLITS &&
          tile_mem_alloc(g->rt, rows * (DECODE_DIM + 1) * sizeof(float), &ws) == TILE_OK) {
        DecodeCall v = c;
        v.plan.splits = n, v.plan.workspace_bytes = rows * (DECODE_DIM + 1) * sizeof(float), v.buf.workspace = ws;
        double t = bench_time_ms(g, do_decode, &v);
        printf("splits b%d kv%d %dk %s: %d splits (the rule: %d): %.4f ms, %.2f TB/s of bf16-equivalent K+V\n",
               s->batch, s->heads_kv, s->len / 1024, elem, n, c.plan.splits, t,
               (double)s->batch * s->len * s->heads_kv * DECODE_DIM * 2 * 2 / (t * 1e9));
        tile_mem_free(g->rt, ws);
      }
      at += strcspn(at, ",");
      at += *at == ',';
    }
  ms = bench_time_ms(g, do_decode, &c);
  double queued = ms > 0 ? bench_time_queued_ms(g, do_decode, &c) : -1;
  if (queued > 0) /* the same calls back to back: without the launch latency in front of each */
    printf("queued b%d kv%d %dk %s: %.4f ms per call back to back (%.4f alone), %.2f TB/s of bf16-equivalent K+V\n",
           s->batch, s->heads_kv, s->len / 1024, elem, queued, ms,
           (double)s->batch * s->len * s->heads_kv * DECODE_DIM * 2 * 2 / (queued * 1e9));
  /* a fast wrong kernel does not pass as a result: the outputs are finite */
  if (ms > 0) {
    DBuf o;
    if (dbuf_alloc(g, &o, "out", "bf16", rows * DECODE_DIM) &&
        tile_memcpy_dtod(g->rt, o.dev, bufs[3], rows * DECODE_DIM * 2, NULL) == TILE_OK && dbuf_download(g, &o)) {
      for (size_t i = 0; i < rows * DECODE_DIM; i++)
        if (!isfinite(dbuf_get(&o, i))) {
          printf("  out[%zu] is %g: not a result\n", i, dbuf_get(&o, i));
          ms = -1;
          break;
        }
      dbuf_free(g, &o);
    }
  }
done:
  for (int i = 0; i < 10; i++)
    if (bufs[i]) tile_mem_free(g->rt, bufs[i]);
  free(ids), free(indptr), free(lens);
  return ms;
}

static double time_shape(Gpu *g, const tile_paged *pg, const DecodeShape *s, tile_paged_kv_type kv, int *splits,
                         const Variant *sweep, int nsweep, double *sweep_ms) {
  return time_shape_in(g, pg, s, &default_cache, kv, splits, sweep, nsweep, sweep_ms);
}

/* TILE_BENCH_DECODE_LAYOUTS=1: the batch-64 shapes with other cache
 * layouts than the rows' (NHD, pages of 16, shuffled): HND, pages in
 * order, pages of 64; bf16, the split rule's kernels, printed (not rows).
 * Tells how much of the gap to a contiguous read is the scatter of the
 * pages and how much the kernel. */
static void layouts(Gpu *g, const tile_paged *pg) {
  static const DecodeCache caches[] = {{16, false, false}, {16, true, false}, {16, false, true},
                                       {16, true, true},   {64, false, false}, {64, true, false}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const DecodeShape *s = &shapes[i];
    if (s->batch == 1) continue;
    double bytes = (double)s->batch * s->len * s->heads_kv * DECODE_DIM * 2 * 2;
    for (size_t c = 0; c < sizeof caches / sizeof caches[0]; c++) {
      int splits = 0;
      double ms = time_shape_in(g, pg, s, &caches[c], TILE_PAGED_KV_BF16, &splits, NULL, 0, NULL);
      printf("layout b%d kv%d %dk bf16 page%d %s %s: %.4f ms, %.2f TB/s of K+V\n", s->batch, s->heads_kv,
             s->len / 1024, caches[c].page, caches[c].hnd ? "HND" : "NHD", caches[c].ordered ? "ordered" : "shuffled",
             ms, ms > 0 ? bytes / (ms * 1e9) : 0.0);
    }
  }
}

/* Builds of `kernel` for a sweep list "A:B[:C],..." (each entry nfields
 * numbers, bound in order to the const parameters names[]), with the
 * bf16 or e4m3 cache; what[i] gets entry i's numbers. Returns how many. */
#define SWEEP_MAX 32
#define SWEEP_FIELDS 3
#define SWEEP_FIELD_CHARS 8
static int build_sweep(Gpu *g, const char *kernel, const char *list, const char *const *names, int nfields, bool fp8,
                       Variant *v, char what[][SWEEP_FIELDS][SWEEP_FIELD_CHARS]) {
  int n = 0;
  for (const char *at = list; *at && n < SWEEP_MAX;) {
    size_t len = strcspn(at, ",");
    int got = 0;
    for (const char *p = at; got < nfields && p < at + len; got++) {
      size_t f = strspn(p, "0123456789");
      if (!f || f >= SWEEP_FIELD_CHARS) break;
      memcpy(what[n][got], p, f), what[n][got][f] = 0;
      p += f + (p[f] == ':');
    }
    if (got == nfields) {
      const char *defs[2 * SWEEP_FIELDS + 5] = {0};
      int d = 0;
      for (int k = 0; k < nfields; k++) defs[d++] = names[k], defs[d++] = what[n][k];
      defs[d++] = "KV", defs[d++] = fp8 ? "f8e4m3" : "bf16", defs[d++] = "SCALED", defs[d++] = fp8 ? "true" : "false";
      if (variant_build_kernel(g, "lang/std/paged_decode.tile", kernel, defs, &v[n])) n++;
      else printf("sweep: %s %.*s does not build\n", kernel, (int)len, at);
    }
    at += len + (at[len] == ',');
  }
  return n;
}

/* TILE_BENCH_DECODE_SWEEP=1: builds of paged_decode over warps, key
 * block and pipeline stages (SWEEP_DEFAULT) at batch 64, 8 KV heads, 4k
 * (one split), bf16 and e4m3 caches, printed (not rows); =W:B:S[,...]
 * those builds only. */
#define SWEEP_DEFAULT "2:32:1,2:32:3,2:32:4,2:64:1,2:64:3,4:64:3,4:64:4,4:128:1,4:128:2,4:128:3"
static void sweep(Gpu *g, const tile_paged *pg, const char *list) {
  if (!strcmp(list, "1")) list = SWEEP_DEFAULT;
  const DecodeShape s = {64, 8, 4096};
  double bytes = (double)s.batch * s.len * s.heads_kv * DECODE_DIM * 2 * 2;
  static const char *const names[] = {"WARPS", "BLOCK_N", "STAGES"};
  for (int fp8 = 0; fp8 < 2; fp8++) {
    Variant v[SWEEP_MAX];
    char what[SWEEP_MAX][SWEEP_FIELDS][SWEEP_FIELD_CHARS];
    int n = build_sweep(g, "paged_decode", list, names, 3, fp8, v, what);
    double ms[SWEEP_MAX];
    int splits;
    time_shape(g, pg, &s, fp8 ? TILE_PAGED_KV_E4M3 : TILE_PAGED_KV_BF16, &splits, v, n, ms);
    for (int i = 0; i < n; i++) {
      printf("sweep b64 kv8 4k %s: WARPS %s BLOCK_N %s STAGES %s: %.3f ms, %.2f TB/s of bf16-equivalent K+V\n",
             fp8 ? "e4m3" : "bf16", what[i][0], what[i][1], what[i][2], ms[i], bytes / (ms[i] * 1e9));
      variant_free(&v[i]);
    }
  }
}

void bench_decode(Gpu *g) {
  tile_paged *pg;
  if (tile_paged_create(g->rt, &pg) != TILE_OK) {
    printf("  tile_paged_create: %s\n", tile_last_error());
    return;
  }
  const char *sw = getenv("TILE_BENCH_DECODE_SWEEP");
  if (sw && *sw) sweep(g, pg, sw);
  const char *lay = getenv("TILE_BENCH_DECODE_LAYOUTS");
  if (lay && *lay) layouts(g, pg);
  double copy_tbps = bench_copy_gbps(g, DECODE_COPY_BYTES) / 1e3;
  char name[DECODE_NAME_BYTES];
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const DecodeShape *s = &shapes[i];
    int splits = 0, splits8 = 0;
    double ms = time_shape(g, pg, s, TILE_PAGED_KV_BF16, &splits, NULL, 0, NULL);
    double bytes = (double)s->batch * s->len * s->heads_kv * DECODE_DIM * 2 * 2;
    snprintf(name, sizeof name, "decode b%d h32 kv%d d128 %dk page16 bf16 TB/s vs copy (paged_decode.tile, %d split%s)",
             s->batch, s->heads_kv, s->len / 1024, splits, splits > 1 ? "s" : "");
    if (ms > 0) bench_add_row(name, bytes / (ms * 1e9), copy_tbps, "TB/s");
    double ms8 = time_shape(g, pg, s, TILE_PAGED_KV_E4M3, &splits8, NULL, 0, NULL);
    snprintf(name, sizeof name, "decode b%d h32 kv%d d128 %dk page16 e4m3 Mtok/s vs bf16 (paged_decode.tile, %d split%s)",
             s->batch, s->heads_kv, s->len / 1024, splits8, splits8 > 1 ? "s" : "");
    double tokens = (double)s->batch * s->len;
    if (ms > 0 && ms8 > 0) bench_add_row(name, tokens / (ms8 * 1e3), tokens / (ms * 1e3), "Mtok/s");
  }
  tile_paged_destroy(pg);
}

/* `tile-gpu bench prefill`: paged_prefill through tile_paged_prefill at
 * batch 8, 32 query heads over 8 KV heads, d128, pages of 16 (shuffled,
 * NHD): 2048-token prompts with no cached prefix, causal and full, against
 * the contiguous forward of tile_attention.h (flash_attention_ws.tile,
 * BSHD, the same tensors' layout) in TFLOP/s; 512 new tokens after a
 * 3584-token prefix, causal (against the contiguous causal 2k figure: no
 * contiguous kernel takes queries and keys of different lengths); and the
 * e4m3 cache in tokens per second against bf16. */
#define PREFILL_BATCH 8
#define PREFILL_HEADS_KV 8
/* paged_prefill's parameters (lang/std/paged_decode.tile) */
#define PREFILL_ARGS 21

typedef struct PrefillCall {
  const tile_paged *pg;
  tile_paged_plan plan;
  tile_paged_buffers buf;
  tile_attention *att;
  tile_attention_problem ap;
  uint64_t out, lse, q, k, v;
  const tile_kernel *k_sweep; /* a build of paged_prefill run instead, or NULL */
  uint32_t grid[3];
  tile_arg args[PREFILL_ARGS];
} PrefillCall;

static bool do_prefill(void *ctx) {
  PrefillCall *c = ctx;
  if (c->k_sweep) return tile_launch(c->k_sweep, c->grid, NULL, c->args, PREFILL_ARGS) == TILE_OK;
  if (tile_paged_prefill(c->pg, &c->plan, &c->buf, NULL) != TILE_OK) {
    printf("  tile_paged_prefill: %s\n", tile_last_error());
    return false;
  }
  return true;
}

static bool do_contiguous(void *ctx) {
  PrefillCall *c = ctx;
  if (tile_attention_forward(c->att, &c->ap, c->out, c->lse, c->q, c->k, c->v, NULL) != TILE_OK) {
    printf("  tile_attention_forward: %s\n", tile_last_error());
    return false;
  }
  return true;
}

/* Milliseconds of one prefill of q_len new tokens per sequence after
 * `prefix` cached ones; with att, the contiguous forward's too (prefix 0). */
static double time_prefill(Gpu *g, const tile_paged *pg, tile_attention *att, int q_len, int prefix, bool causal,
                           tile_paged_kv_type kv, double *contiguous_ms, const Variant *sweep, int nsweep,
                           double *sweep_ms) {
  int len = prefix + q_len, B = PREFILL_BATCH;
  size_t per_seq = (size_t)(len + DECODE_PAGE - 1) / DECODE_PAGE, pages = per_seq * B;
  size_t elems = pages * DECODE_PAGE * PREFILL_HEADS_KV * DECODE_DIM, qn = (size_t)B * q_len * DECODE_HEADS * DECODE_DIM;
  const char *elem = kv == TILE_PAGED_KV_E4M3 ? "f8e4m3" : "bf16";
  double range = kv == TILE_PAGED_KV_E4M3 ? 200 : 1, ms = -1;
  int32_t *ids = malloc(pages * sizeof *ids), indptr[PREFILL_BATCH + 1], lens[PREFILL_BATCH], qo[PREFILL_BATCH + 1];
  float scales[2 * PREFILL_HEADS_KV];
  uint64_t bufs[13] = {0};
  PrefillCall c = {.pg = pg, .att = att};
  if (!ids) goto done;
  Rng r = {(uint64_t)len * 7 + (uint64_t)q_len};
  for (size_t i = 0; i < pages; i++) ids[i] = (int32_t)i;
  for (size_t i = pages; i > 1; i--) {
    size_t j = (size_t)rng_uniform(&r, 0, (double)i);
    if (j >= i) j = i - 1;
    int32_t t = ids[i - 1];
    ids[i - 1] = ids[j], ids[j] = t;
  }
  for (int b = 0; b <= B; b++) indptr[b] = (int32_t)((size_t)b * per_seq), qo[b] = b * q_len;
  for (int b = 0; b < B; b++) lens[b] = len;
  for (int h = 0; h < 2 * PREFILL_HEADS_KV; h++) scales[h] = 1.0f / 200;
  bufs[0] = bench_dev_fill(g, elem, elems, range, 1);
  bufs[1] = bench_dev_fill(g, elem, elems, range, 2);
  bufs[2] = bench_dev_fill(g, "bf16", qn, 1, 3);
  bufs[3] = bench_dev_fill(g, "bf16", qn, 0, 0);
  bufs[4] = bench_dev_fill(g, "f32", qn / DECODE_DIM, 0, 0);
  bufs[5] = dev_i32(g, ids, pages);
  bufs[6] = dev_i32(g, indptr, (size_t)B + 1);
  bufs[7] = dev_i32(g, lens, (size_t)B);
  bufs[8] = dev_i32(g, (const int32_t *)scales, 2 * PREFILL_HEADS_KV);
  bufs[9] = dev_i32(g, qo, (size_t)B + 1);
  for (int i = 0; i < 10; i++)
    if (!bufs[i]) goto done;
  tile_paged_problem p = {.batch = B, .heads = DECODE_HEADS, .heads_kv = PREFILL_HEADS_KV, .head_dim = DECODE_DIM,
                          .page_size = DECODE_PAGE, .kv_type = kv, .max_kv_len = len, .max_q_len = q_len,
                          .causal = causal};
  if (tile_paged_prefill_plan(pg, &p, &c.plan) != TILE_OK) {
    printf("  tile_paged_prefill_plan: %s\n", tile_last_error());
    goto done;
  }
  c.buf = (tile_paged_buffers){.out = bufs[3], .lse = bufs[4], .q = bufs[2], .k_cache = bufs[0], .v_cache = bufs[1],
                               .kv_scale = bufs[8], .page_ids = bufs[5], .indptr = bufs[6], .kv_len = bufs[7],
                               .qo_indptr = bufs[9]};
  for (int i = 0; i < nsweep; i++) { /* other builds of the kernel, launched as tile_paged_prefill does */
    const tile_paged_buffers *b = &c.buf;
    tile_arg a[PREFILL_ARGS] = {
        tile_arg_ptr(b->out),      tile_arg_ptr(b->lse),     tile_arg_ptr(b->q),      tile_arg_ptr(b->k_cache),
        tile_arg_ptr(b->v_cache),  tile_arg_ptr(b->kv_scale), tile_arg_ptr(b->page_ids), tile_arg_ptr(b->indptr),
        tile_arg_ptr(b->kv_len),   tile_arg_ptr(b->qo_indptr), tile_arg_i64(DECODE_HEADS), tile_arg_i64(PREFILL_HEADS_KV),
        tile_arg_f32(c.plan.p.sm_scale), tile_arg_bool(causal), tile_arg_i64(c.plan.p.strides[0]),
        tile_arg_i64(c.plan.p.strides[1]), tile_arg_i64(c.plan.p.strides[2]), tile_arg_i64(DECODE_HEADS * DECODE_DIM),
        tile_arg_i64(DECODE_DIM), tile_arg_ptr(b->kv_scale), tile_arg_ptr(b->kv_scale)};
    PrefillCall v = c;
    v.k_sweep = sweep[i].kernel;
    memcpy(v.args, a, sizeof a);
    int64_t rows = (int64_t)q_len * (DECODE_HEADS / PREFILL_HEADS_KV);
    int64_t bm = variant_const(&sweep[i], "BLOCK_M", 0);
    sweep_ms[i] = -1;
    if (bm <= 0) continue;
    v.grid[0] = (uint32_t)((rows + bm - 1) / bm), v.grid[1] = PREFILL_HEADS_KV, v.grid[2] = B;
    sweep_ms[i] = bench_time_ms(g, do_prefill, &v);
  }
  ms = bench_time_ms(g, do_prefill, &c);
  if (att && contiguous_ms) { /* the same shapes contiguous, BSHD: [batch, seqlen, heads, d] */
    size_t kvn = (size_t)B * len * PREFILL_HEADS_KV * DECODE_DIM;
    bufs[10] = bench_dev_fill(g, "bf16", kvn, 1, 4);
    bufs[11] = bench_dev_fill(g, "bf16", kvn, 1, 5);
    bufs[12] = bench_dev_fill(g, "f32", qn / DECODE_DIM, 0, 0);
    c.ap = (tile_attention_problem){.batch = B, .heads = DECODE_HEADS, .heads_kv = PREFILL_HEADS_KV, .seqlen = len,
                                    .head_dim = DECODE_DIM, .causal = causal,
                                    .q_strides = {(int64_t)len * DECODE_HEADS * DECODE_DIM, DECODE_DIM,
                                                  DECODE_HEADS * DECODE_DIM},
                                    .kv_strides = {(int64_t)len * PREFILL_HEADS_KV * DECODE_DIM, DECODE_DIM,
                                                   PREFILL_HEADS_KV * DECODE_DIM}};
    c.out = bufs[3], c.lse = bufs[12], c.q = bufs[2], c.k = bufs[10], c.v = bufs[11];
    *contiguous_ms = bufs[10] && bufs[11] && bufs[12] ? bench_time_ms(g, do_contiguous, &c) : -1;
  }
done:
  for (int i = 0; i < 13; i++)
    if (bufs[i]) tile_mem_free(g->rt, bufs[i]);
  free(ids);
  return ms;
}

/* TILE_BENCH_PREFILL_SWEEP=BLOCK_N:STAGES[,...] (=1: PREFILL_SWEEP_DEFAULT):
 * builds of paged_prefill, bf16 and e4m3 caches, 2k causal, printed (not
 * rows). */
#define PREFILL_SWEEP_DEFAULT "64:1,64:3,64:4,128:1,128:2,128:3"
static void prefill_sweep(Gpu *g, const tile_paged *pg, const char *list) {
  if (!strcmp(list, "1")) list = PREFILL_SWEEP_DEFAULT;
  const double fl = 4.0 * PREFILL_BATCH * DECODE_HEADS * DECODE_DIM * 2048.0 * 2049 / 2;
  static const char *const names[] = {"BLOCK_N", "STAGES"};
  for (int fp8 = 0; fp8 < 2; fp8++) {
    Variant v[SWEEP_MAX];
    char what[SWEEP_MAX][SWEEP_FIELDS][SWEEP_FIELD_CHARS];
    int n = build_sweep(g, "paged_prefill", list, names, 2, fp8, v, what);
    double ms[SWEEP_MAX];
    time_prefill(g, pg, NULL, 2048, 0, true, fp8 ? TILE_PAGED_KV_E4M3 : TILE_PAGED_KV_BF16, NULL, v, n, ms);
    for (int i = 0; i < n; i++) {
      printf("prefill sweep b8 kv8 2k causal %s: BLOCK_N %s STAGES %s: %.3f ms, %.1f TFLOP/s\n", fp8 ? "e4m3" : "bf16",
             what[i][0], what[i][1], ms[i], ms[i] > 0 ? fl / (ms[i] * 1e9) : 0.0);
      variant_free(&v[i]);
    }
  }
}

void bench_prefill(Gpu *g) {
  tile_paged *pg = NULL;
  tile_attention *att = NULL;
  if (tile_paged_create(g->rt, &pg) != TILE_OK || tile_attention_create(g->rt, &att) != TILE_OK) {
    printf("  tile_paged_create / tile_attention_create: %s\n", tile_last_error());
    tile_paged_destroy(pg);
    return;
  }
  const char *sw = getenv("TILE_BENCH_PREFILL_SWEEP");
  if (sw && *sw) prefill_sweep(g, pg, sw);
  char name[DECODE_NAME_BYTES];
  const double hd = (double)PREFILL_BATCH * DECODE_HEADS * DECODE_DIM;
  double causal_ms = -1, full_ms = -1;
  double ms_c = time_prefill(g, pg, att, 2048, 0, true, TILE_PAGED_KV_BF16, &causal_ms, NULL, 0, NULL);
  double ms_f = time_prefill(g, pg, att, 2048, 0, false, TILE_PAGED_KV_BF16, &full_ms, NULL, 0, NULL);
  double fl_c = 4 * hd * 2048.0 * 2049 / 2, fl_f = 4 * hd * 2048.0 * 2048;
  if (ms_c > 0 && causal_ms > 0)
    bench_add_row("prefill b8 h32 kv8 d128 2k causal page16 TFLOP/s vs contiguous (paged_prefill, flash_attention_ws)",
                  fl_c / (ms_c * 1e9), fl_c / (causal_ms * 1e9), "TFLOP/s");
  if (ms_f > 0 && full_ms > 0)
    bench_add_row("prefill b8 h32 kv8 d128 2k full page16 TFLOP/s vs contiguous (paged_prefill, flash_attention_ws)",
                  fl_f / (ms_f * 1e9), fl_f / (full_ms * 1e9), "TFLOP/s");
  double ms_p = time_prefill(g, pg, NULL, 512, 3584, true, TILE_PAGED_KV_BF16, NULL, NULL, 0, NULL);
  double fl_p = 4 * hd * (512.0 * 3584 + 512.0 * 513 / 2);
  if (ms_p > 0 && causal_ms > 0)
    bench_add_row("prefill b8 h32 kv8 d128 512 new after 3584 cached, causal, TFLOP/s vs contiguous causal 2k",
                  fl_p / (ms_p * 1e9), fl_c / (causal_ms * 1e9), "TFLOP/s");
  double ms_8 = time_prefill(g, pg, NULL, 2048, 0, true, TILE_PAGED_KV_E4M3, NULL, NULL, 0, NULL);
  snprintf(name, sizeof name, "prefill b8 h32 kv8 d128 2k causal page16 e4m3 Mtok/s vs bf16 (paged_prefill)");
  double tokens = (double)PREFILL_BATCH * 2048;
  if (ms_8 > 0 && ms_c > 0) bench_add_row(name, tokens / (ms_8 * 1e3), tokens / (ms_c * 1e3), "Mtok/s");
  tile_attention_destroy(att);
  tile_paged_destroy(pg);
}
