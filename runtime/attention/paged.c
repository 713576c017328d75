/* paged.c - tile_paged.h: the kernels of lang/std/paged_decode.tile,
 * embedded (meson compiles the file once per head dim, page size and
 * cache type into the paged_*.h headers, listed in paged_variants.h),
 * picked per plan and launched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "paged_variants.h"
#include "tile_paged.h"

/* The decode kernel's stride parameters promise multiple_of(16) (16-byte
 * pieces of fp8 rows for its asynchronous copies), the caches align(16). */
#define PAGED_STRIDE_MULTIPLE 16
#define PAGED_PTR_ALIGN 16
/* CUDA's limits on the grid's y and z dimensions (batch, splits). */
#define PAGED_MAX_GRID_YZ 65535
/* Arguments of paged_decode and paged_prefill (k_scales and v_scales last). */
#define PAGED_DECODE_ARGS 20
#define PAGED_PREFILL_ARGS 21
/* CUDA's limit on the grid's x dimension (paged_prefill's query blocks). */
#define PAGED_MAX_GRID_X 2147483647

enum { K_DECODE, K_MERGE, K_APPEND, K_COPY, K_SWAP, K_PREFILL, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"paged_decode",     "paged_decode_merge", "paged_append",
                                                  "paged_copy_pages", "paged_swap_pages",   "paged_prefill"};

struct tile_paged {
  tile_module *mod[PAGED_VARIANTS];
  tile_kernel *k[PAGED_VARIANTS][K_COUNT];
  int block_t[PAGED_VARIANTS]; /* paged_append's tokens per program */
  int block_e[PAGED_VARIANTS]; /* paged_copy_pages' and paged_swap_pages' elements per program */
  int block_m[PAGED_VARIANTS]; /* paged_prefill's query rows per program */
  int sm_count;
};

tile_status tile_paged_create(tile_runtime *rt, tile_paged **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_paged_create: out is NULL");
  *out = NULL;
  if (!rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_paged_create: rt is NULL");
  tile_paged *pg = calloc(1, sizeof *pg);
  if (!pg) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_paged_create: out of memory");
  tile_device_properties props;
  tile_status st = tile_device_info(rt, &props);
  pg->sm_count = st == TILE_OK ? props.sm_count : 0;
  for (int v = 0; v < PAGED_VARIANTS && st == TILE_OK; v++) {
    st = paged_variants[v].load(rt, &pg->mod[v]);
    for (int i = 0; i < K_COUNT && st == TILE_OK; i++) st = tile_kernel_get(pg->mod[v], kernel_names[i], &pg->k[v][i]);
    pg->block_t[v] = st == TILE_OK ? tilert_kernel_const_int(pg->k[v][K_APPEND], "BLOCK_T") : 0;
    if (st == TILE_OK && pg->block_t[v] <= 0) st = tilert_fail(TILE_ERROR_BAD_METADATA, "paged_append has no BLOCK_T");
    pg->block_e[v] = st == TILE_OK ? tilert_kernel_const_int(pg->k[v][K_COPY], "BLOCK") : 0;
    if (st == TILE_OK && pg->block_e[v] <= 0) st = tilert_fail(TILE_ERROR_BAD_METADATA, "paged_copy_pages has no BLOCK");
    pg->block_m[v] = st == TILE_OK ? tilert_kernel_const_int(pg->k[v][K_PREFILL], "BLOCK_M") : 0;
    if (st == TILE_OK && pg->block_m[v] <= 0) st = tilert_fail(TILE_ERROR_BAD_METADATA, "paged_prefill has no BLOCK_M");
  }
  if (st != TILE_OK) {
    tilert_error_prefix("tile_paged_create");
    tile_paged_destroy(pg);
    return st;
  }
  *out = pg;
  return TILE_OK;
}

void tile_paged_destroy(tile_paged *pg) {
  if (!pg) return;
  for (int v = 0; v < PAGED_VARIANTS; v++) tile_module_unload(pg->mod[v]);
  free(pg);
}

int tile_paged_splits(int batch, int heads_kv, int max_kv_len, int sm_count) {
  int64_t programs = (int64_t)(batch > 0 ? batch : 1) * (heads_kv > 0 ? heads_kv : 1);
  int64_t target = (int64_t)TILE_PAGED_TARGET_WAVES * (sm_count > 0 ? sm_count : 1);
  int64_t want = target / programs; /* at most the target: a partial extra wave costs more than it fills */
  int64_t most = max_kv_len / TILE_PAGED_MIN_CHUNK;
  if (want > most) want = most;
  if (want > TILE_PAGED_MAX_SPLITS) want = TILE_PAGED_MAX_SPLITS;
  return want < 1 ? 1 : (int)want;
}

/* The problem with its defaults filled in; the variant index. */
static tile_status check_problem(const char *fn, const tile_paged_problem *in, tile_paged_problem *p, int *variant,
                                 bool decode) {
  if (!in) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the problem is NULL", fn);
  *p = *in;
  if (p->heads_kv < 1 || (decode && (p->batch < 1 || p->heads < 1 || p->max_kv_len < 1)))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: batch (%d), heads (%d), heads_kv (%d) and max_kv_len (%d) must be at least 1", fn, p->batch,
                       p->heads, p->heads_kv, p->max_kv_len);
  if (decode && p->heads % p->heads_kv)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: heads (%d) is not a multiple of heads_kv (%d)", fn, p->heads,
                       p->heads_kv);
  if (decode && p->heads / p->heads_kv > TILE_PAGED_MAX_GROUP)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %d query heads per KV head: at most %d", fn,
                       p->heads / p->heads_kv, TILE_PAGED_MAX_GROUP);
  if (decode && (p->batch > PAGED_MAX_GRID_YZ))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: batch (%d) is above %d, CUDA's grid limit", fn, p->batch,
                       PAGED_MAX_GRID_YZ);
  if (p->kv_type != TILE_PAGED_KV_BF16 && p->kv_type != TILE_PAGED_KV_E4M3 && p->kv_type != TILE_PAGED_KV_INT4)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: kv_type %d is not one of TILE_PAGED_KV_BF16, _E4M3, _INT4", fn,
                       (int)p->kv_type);
  *variant = -1;
  for (int v = 0; v < PAGED_VARIANTS; v++)
    if (paged_variants[v].head_dim == p->head_dim && paged_variants[v].page == p->page_size &&
        paged_variants[v].kv_type == (int)p->kv_type)
      *variant = v;
  if (*variant < 0)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: no kernel for head_dim %d and page_size %d (head dims 64 and 128, pages of 1, 16, 32 or 64)",
                       fn, p->head_dim, p->page_size);
  int64_t *s = p->strides;
  if (!s[0] && !s[1] && !s[2]) { /* NHD; in bytes for int4 (two values each) */
    s[2] = p->kv_type == TILE_PAGED_KV_INT4 ? p->head_dim / 2 : p->head_dim;
    s[1] = (int64_t)p->heads_kv * s[2];
    s[0] = (int64_t)p->page_size * s[1];
  }
  for (int d = 0; d < 3; d++) {
    if (s[d] < 1 || s[d] % PAGED_STRIDE_MULTIPLE)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: strides[%d] is %lld: strides must be positive multiples of %d",
                         fn, d, (long long)s[d], PAGED_STRIDE_MULTIPLE);
    if (d > 0 && s[d] > INT32_MAX)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: strides[%d] (%lld) must fit in 32 bits", fn, d, (long long)s[d]);
  }
  if (p->sm_scale == 0) p->sm_scale = 1.0f / sqrtf((float)p->head_dim);
  if (!(p->sm_scale > 0) || isinf(p->sm_scale))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: sm_scale is %g: it must be positive and finite (0 means 1 / sqrt(head_dim))",
                       fn, (double)in->sm_scale);
  return TILE_OK;
}

tile_status tile_paged_decode_plan(const tile_paged *pg, const tile_paged_problem *p, tile_paged_plan *plan) {
  static const char fn[] = "tile_paged_decode_plan";
  if (!plan) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: plan is NULL", fn);
  memset(plan, 0, sizeof *plan);
  tile_status st = check_problem(fn, p, &plan->p, &plan->variant, true);
  if (st != TILE_OK) return st;
  if (!pg) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_paged is NULL", fn);
  plan->splits = tile_paged_splits(p->batch, p->heads_kv, p->max_kv_len, pg->sm_count);
  if (plan->splits > 1) {
    size_t rows = (size_t)plan->splits * (size_t)p->batch * (size_t)p->heads;
    plan->workspace_bytes = rows * ((size_t)p->head_dim + 1) * sizeof(float);
  }
  return TILE_OK;
}

static tile_status check_ptr(const char *fn, const char *name, uint64_t ptr, int align) {
  if (!ptr) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s is 0", fn, name);
  if (ptr % (uint64_t)align)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s (0x%llx) is not %d-byte aligned", fn, name,
                       (unsigned long long)ptr, align);
  return TILE_OK;
}

/* The pointers a decode (with the workspace when split) or a prefill
 * (with qo_indptr; q and out 16-byte aligned) reads, then the handle. */
static tile_status check_buffers(const char *fn, const tile_paged *pg, const tile_paged_problem *p,
                                 const tile_paged_buffers *buf, bool split, bool prefill) {
  bool scaled = p->kv_type == TILE_PAGED_KV_E4M3, int4 = p->kv_type == TILE_PAGED_KV_INT4;
  int row_align = prefill ? PAGED_PTR_ALIGN : 2;
  const struct {
    const char *name;
    uint64_t ptr;
    int align;
    bool needed;
  } ptrs[] = {{"out", buf->out, row_align, true},
              {"lse", buf->lse, 4, true},
              {"q", buf->q, row_align, true},
              {"k_cache", buf->k_cache, PAGED_PTR_ALIGN, true},
              {"v_cache", buf->v_cache, PAGED_PTR_ALIGN, true},
              {"kv_scale", buf->kv_scale, 4, scaled},
              {"page_ids", buf->page_ids, 4, true},
              {"indptr", buf->indptr, 4, true},
              {"kv_len", buf->kv_len, 4, true},
              {"workspace", buf->workspace, 4, split},
              {"qo_indptr", buf->qo_indptr, 4, prefill},
              {"k_scales", buf->k_scales, 4, int4},
              {"v_scales", buf->v_scales, 4, int4}};
  tile_status st = TILE_OK;
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0] && st == TILE_OK; i++)
    if (ptrs[i].needed) st = check_ptr(fn, ptrs[i].name, ptrs[i].ptr, ptrs[i].align);
  if (st == TILE_OK && !pg) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_paged is NULL", fn);
  return st;
}

tile_status tile_paged_decode(const tile_paged *pg, const tile_paged_plan *plan, const tile_paged_buffers *buf,
                              tile_stream *stream) {
  static const char fn[] = "tile_paged_decode";
  if (!plan || !buf) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !plan ? "plan" : "buf");
  tile_paged_problem p;
  int v;
  tile_status st = check_problem(fn, &plan->p, &p, &v, true);
  if (st == TILE_OK && (v != plan->variant || plan->splits < 1 || plan->splits > TILE_PAGED_MAX_SPLITS))
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the plan was not made by tile_paged_decode_plan", fn);
  bool scaled = p.kv_type == TILE_PAGED_KV_E4M3, int4 = p.kv_type == TILE_PAGED_KV_INT4;
  bool split = st == TILE_OK && plan->splits > 1;
  if (st == TILE_OK) st = check_buffers(fn, pg, &p, buf, split, false);
  if (st != TILE_OK) return st;
  /* the partial outputs [splits, batch, heads, head_dim], then their
   * log-sum-exps [splits, batch, heads] */
  size_t rows = (size_t)plan->splits * (size_t)p.batch * (size_t)p.heads;
  uint64_t part_out = split ? buf->workspace : buf->out, part_lse = split ? buf->workspace + rows * p.head_dim * 4 : buf->lse;
  uint64_t scale = scaled ? buf->kv_scale : buf->lse; /* not read without SCALED */
  tile_arg a[PAGED_DECODE_ARGS] = {
      tile_arg_ptr(buf->out),      tile_arg_ptr(buf->lse),    tile_arg_ptr(part_out),      tile_arg_ptr(part_lse),
      tile_arg_ptr(buf->q),        tile_arg_ptr(buf->k_cache), tile_arg_ptr(buf->v_cache), tile_arg_ptr(scale),
      tile_arg_ptr(buf->page_ids), tile_arg_ptr(buf->indptr), tile_arg_ptr(buf->kv_len),   tile_arg_i64(p.batch),
      tile_arg_i64(p.heads),       tile_arg_i64(p.heads_kv),  tile_arg_f32(p.sm_scale),    tile_arg_i64(p.strides[0]),
      tile_arg_i64(p.strides[1]),  tile_arg_i64(p.strides[2]),
      tile_arg_ptr(int4 ? buf->k_scales : scale), tile_arg_ptr(int4 ? buf->v_scales : scale)}; /* not read but by int4 */
  uint32_t grid[3] = {(uint32_t)p.heads_kv, (uint32_t)p.batch, (uint32_t)plan->splits};
  st = tile_launch(pg->k[v][K_DECODE], grid, stream, a, PAGED_DECODE_ARGS);
  if (st != TILE_OK) {
    tilert_error_prefix("paged_decode");
    return st;
  }
  if (!split) return TILE_OK;
  tile_arg m[7] = {tile_arg_ptr(buf->out), tile_arg_ptr(buf->lse), tile_arg_ptr(part_out), tile_arg_ptr(part_lse),
                   tile_arg_i64(p.batch),  tile_arg_i64(p.heads), tile_arg_i64(plan->splits)};
  uint32_t mgrid[3] = {(uint32_t)(p.batch * p.heads), 1, 1};
  st = tile_launch(pg->k[v][K_MERGE], mgrid, stream, m, 7);
  if (st != TILE_OK) tilert_error_prefix("paged_decode_merge");
  return st;
}

tile_status tile_paged_prefill_plan(const tile_paged *pg, const tile_paged_problem *p, tile_paged_plan *plan) {
  static const char fn[] = "tile_paged_prefill_plan";
  if (!plan) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: plan is NULL", fn);
  memset(plan, 0, sizeof *plan);
  tile_status st = check_problem(fn, p, &plan->p, &plan->variant, true);
  if (st != TILE_OK) return st;
  if (p->max_q_len < 1) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: max_q_len is %d: it must be at least 1", fn, p->max_q_len);
  if (!pg) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_paged is NULL", fn);
  int64_t rows = (int64_t)p->max_q_len * (p->heads / p->heads_kv);
  int bm = pg->block_m[plan->variant];
  if ((rows + bm - 1) / bm > PAGED_MAX_GRID_X)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: max_q_len is %d: at most %lld with %d query heads per KV head",
                       fn, p->max_q_len, (long long)PAGED_MAX_GRID_X * bm / (p->heads / p->heads_kv),
                       p->heads / p->heads_kv);
  plan->splits = 1;
  return TILE_OK;
}

tile_status tile_paged_prefill(const tile_paged *pg, const tile_paged_plan *plan, const tile_paged_buffers *buf,
                               tile_stream *stream) {
  static const char fn[] = "tile_paged_prefill";
  if (!plan || !buf) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !plan ? "plan" : "buf");
  tile_paged_problem p;
  int v;
  tile_status st = check_problem(fn, &plan->p, &p, &v, true);
  if (st == TILE_OK && (v != plan->variant || plan->splits != 1 || p.max_q_len < 1))
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the plan was not made by tile_paged_prefill_plan", fn);
  bool scaled = p.kv_type == TILE_PAGED_KV_E4M3, int4 = p.kv_type == TILE_PAGED_KV_INT4;
  if (st == TILE_OK) st = check_buffers(fn, pg, &p, buf, false, true);
  if (st != TILE_OK) return st;
  uint64_t scale = scaled ? buf->kv_scale : buf->lse; /* not read without SCALED */
  int group = p.heads / p.heads_kv;
  tile_arg a[PAGED_PREFILL_ARGS] = {
      tile_arg_ptr(buf->out),       tile_arg_ptr(buf->lse),       tile_arg_ptr(buf->q),
      tile_arg_ptr(buf->k_cache),   tile_arg_ptr(buf->v_cache),   tile_arg_ptr(scale),
      tile_arg_ptr(buf->page_ids),  tile_arg_ptr(buf->indptr),    tile_arg_ptr(buf->kv_len),
      tile_arg_ptr(buf->qo_indptr), tile_arg_i64(p.heads),        tile_arg_i64(p.heads_kv),
      tile_arg_f32(p.sm_scale),     tile_arg_bool(p.causal != 0), tile_arg_i64(p.strides[0]),
      tile_arg_i64(p.strides[1]),   tile_arg_i64(p.strides[2]),   tile_arg_i64((int64_t)p.heads * p.head_dim),
      tile_arg_i64(p.head_dim),     tile_arg_ptr(int4 ? buf->k_scales : scale),
      tile_arg_ptr(int4 ? buf->v_scales : scale)}; /* not read but by int4 */
  int64_t rows = (int64_t)p.max_q_len * group;
  uint32_t grid[3] = {(uint32_t)((rows + pg->block_m[v] - 1) / pg->block_m[v]), (uint32_t)p.heads_kv, (uint32_t)p.batch};
  st = tile_launch(pg->k[v][K_PREFILL], grid, stream, a, PAGED_PREFILL_ARGS);
  if (st != TILE_OK) tilert_error_prefix("paged_prefill");
  return st;
}

tile_status tile_paged_append(const tile_paged *pg, const tile_paged_problem *p, uint64_t k_cache, uint64_t v_cache,
                              uint64_t k_new, uint64_t v_new, uint64_t batch_idx, uint64_t pos, uint64_t page_ids,
                              uint64_t indptr, uint64_t kv_scale, int new_tokens, tile_stream *stream) {
  static const char fn[] = "tile_paged_append";
  tile_paged_problem q;
  int v;
  tile_status st = check_problem(fn, p, &q, &v, false);
  if (st == TILE_OK && q.kv_type == TILE_PAGED_KV_INT4)
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: appending to an int4 cache is not offered", fn);
  if (st == TILE_OK && new_tokens < 0)
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: new_tokens is %d", fn, new_tokens);
  bool scaled = st == TILE_OK && q.kv_type == TILE_PAGED_KV_E4M3;
  const char *names[9] = {"k_cache", "v_cache", "k_new", "v_new", "batch_idx", "pos", "page_ids", "indptr", "kv_scale"};
  const uint64_t ptrs[9] = {k_cache, v_cache, k_new, v_new, batch_idx, pos, page_ids, indptr, kv_scale};
  for (int i = 0; i < (scaled ? 9 : 8) && st == TILE_OK; i++) st = check_ptr(fn, names[i], ptrs[i], i < 2 && scaled ? 1 : i < 4 ? 2 : 4);
  if (st == TILE_OK && !pg) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_paged is NULL", fn);
  if (st != TILE_OK || new_tokens == 0) return st;
  tile_arg a[14];
  for (int i = 0; i < 8; i++) a[i] = tile_arg_ptr(ptrs[i]);
  a[8] = tile_arg_i64(new_tokens), a[9] = tile_arg_i64(q.heads_kv);
  for (int d = 0; d < 3; d++) a[10 + d] = tile_arg_i64(q.strides[d]);
  a[13] = tile_arg_ptr(scaled ? kv_scale : page_ids); /* not read without SCALED */
  uint32_t grid[3] = {(uint32_t)((new_tokens + pg->block_t[v] - 1) / pg->block_t[v]), 1, 1};
  st = tile_launch(pg->k[v][K_APPEND], grid, stream, a, 14);
  if (st != TILE_OK) tilert_error_prefix("paged_append");
  return st;
}

/* paged_copy_pages or paged_swap_pages over n_pages pairs. */
static tile_status page_pairs(const char *fn, int kernel, const tile_paged *pg, const tile_paged_problem *p,
                              uint64_t k_cache, uint64_t v_cache, uint64_t x, uint64_t y, int n_pages,
                              tile_stream *stream) {
  tile_paged_problem q;
  int v;
  tile_status st = check_problem(fn, p, &q, &v, false);
  if (st == TILE_OK && (n_pages < 0 || n_pages > PAGED_MAX_GRID_YZ))
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: n_pages is %d (0 to %d)", fn, n_pages, PAGED_MAX_GRID_YZ);
  const char *names[4] = {"k_cache", "v_cache", kernel == K_COPY ? "src" : "a", kernel == K_COPY ? "dst" : "b"};
  const uint64_t ptrs[4] = {k_cache, v_cache, x, y};
  for (int i = 0; i < 4 && st == TILE_OK; i++) st = check_ptr(fn, names[i], ptrs[i], i < 2 ? 1 : 4);
  if (st == TILE_OK && !pg) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_paged is NULL", fn);
  if (st != TILE_OK || n_pages == 0) return st;
  tile_arg a[5] = {tile_arg_ptr(k_cache), tile_arg_ptr(v_cache), tile_arg_ptr(x), tile_arg_ptr(y),
                   tile_arg_i64(q.strides[0])};
  int64_t blocks = (q.strides[0] + pg->block_e[v] - 1) / pg->block_e[v];
  uint32_t grid[3] = {(uint32_t)blocks, (uint32_t)n_pages, 1};
  st = tile_launch(pg->k[v][kernel], grid, stream, a, 5);
  if (st != TILE_OK) tilert_error_prefix("%s", kernel_names[kernel]);
  return st;
}

tile_status tile_paged_copy_pages(const tile_paged *pg, const tile_paged_problem *p, uint64_t k_cache,
                                  uint64_t v_cache, uint64_t src, uint64_t dst, int n_pages, tile_stream *stream) {
  return page_pairs("tile_paged_copy_pages", K_COPY, pg, p, k_cache, v_cache, src, dst, n_pages, stream);
}

tile_status tile_paged_swap_pages(const tile_paged *pg, const tile_paged_problem *p, uint64_t k_cache,
                                  uint64_t v_cache, uint64_t a, uint64_t b, int n_pages, tile_stream *stream) {
  return page_pairs("tile_paged_swap_pages", K_SWAP, pg, p, k_cache, v_cache, a, b, n_pages, stream);
}
