/* attention.c - tile_attention.h: the training attention kernels of
 * lang/std/flash_attention_bwd.tile and the warp-specialized ones of
 * flash_attention_ws.tile and flash_attention_bwd_ws.tile, embedded (meson
 * compiles each file once per head dim and mask, and layout for the
 * warp-specialized ones, into the att_*.h headers), picked and launched
 * per call; and the fp8 forwards of flash_attention_fp8.tile (any strides)
 * and flash_attention_ws_fp8.tile (contiguous BHSD or BSHD, V transposed
 * into the workspace by its attention_vt kernel first). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "att_bws_d128.h"
#include "att_bws_d128_bshd.h"
#include "att_bws_d128_causal.h"
#include "att_bws_d128_causal_bshd.h"
#include "att_bws_d64.h"
#include "att_bws_d64_bshd.h"
#include "att_bws_d64_causal.h"
#include "att_bws_d64_causal_bshd.h"
#include "att_d128.h"
#include "att_d128_causal.h"
#include "att_d64.h"
#include "att_d64_causal.h"
#include "att_fp8_d128.h"
#include "att_fp8_d128_causal.h"
#include "att_fp8_d64.h"
#include "att_fp8_d64_causal.h"
#include "att_ws_d128.h"
#include "att_ws_d128_bshd.h"
#include "att_ws_d128_causal.h"
#include "att_ws_d128_causal_bshd.h"
#include "att_ws_d64.h"
#include "att_ws_d64_bshd.h"
#include "att_ws_d64_causal.h"
#include "att_ws_d64_causal_bshd.h"
#include "att_wsfp8_d128.h"
#include "att_wsfp8_d128_bshd.h"
#include "att_wsfp8_d128_causal.h"
#include "att_wsfp8_d128_causal_bshd.h"
#include "att_wsfp8_d64.h"
#include "att_wsfp8_d64_bshd.h"
#include "att_wsfp8_d64_causal.h"
#include "att_wsfp8_d64_causal_bshd.h"
#include "internal.h"
#include "tile_attention.h"

/* The specializations built in: head dims and masks. */
#define ATT_SPECS 4
/* The kernels' stride parameters promise multiple_of(8) (16-byte rows of
 * bf16 for their vector and asynchronous copies), the pointers align(16). */
#define ATT_STRIDE_MULTIPLE 8
#define ATT_PTR_ALIGN 16
/* CUDA's limit on the grid's y dimension, which holds batch * heads. */
#define ATT_MAX_GRID_Y 65535
/* Arguments of the largest kernel (attention_bwd_dkdv). */
#define ATT_MAX_ARGS 18

typedef tile_status (*LoadFn)(tile_runtime *, tile_module **);

static const struct {
  int dim;
  bool causal;
  LoadFn load;
} specs[ATT_SPECS] = {{64, false, att_d64_load},
                      {64, true, att_d64_causal_load},
                      {128, false, att_d128_load},
                      {128, true, att_d128_causal_load}};

/* The warp-specialized forward and backward per spec: [0] contiguous
 * BHSD, [1] BSHD. */
#define ATT_WS_LAYOUTS 2
static const LoadFn ws_loads[ATT_SPECS][ATT_WS_LAYOUTS] = {{att_ws_d64_load, att_ws_d64_bshd_load},
                                                          {att_ws_d64_causal_load, att_ws_d64_causal_bshd_load},
                                                          {att_ws_d128_load, att_ws_d128_bshd_load},
                                                          {att_ws_d128_causal_load, att_ws_d128_causal_bshd_load}};
static const LoadFn bws_loads[ATT_SPECS][ATT_WS_LAYOUTS] = {{att_bws_d64_load, att_bws_d64_bshd_load},
                                                           {att_bws_d64_causal_load, att_bws_d64_causal_bshd_load},
                                                           {att_bws_d128_load, att_bws_d128_bshd_load},
                                                           {att_bws_d128_causal_load, att_bws_d128_causal_bshd_load}};
/* flash_attention_bwd_ws.tile's kernels and the const giving each one's
 * rows per program. */
enum { B_DKDV, B_DQ, B_COUNT };
static const char *const bws_names[B_COUNT] = {"attention_bwd_dkdv_ws", "attention_bwd_dq_ws"};
static const char *const bws_consts[B_COUNT] = {"BLOCK_N", "BLOCK_M"};

enum { K_FWD, K_PRE, K_DKDV, K_DQ, K_COUNT };
static const char *const kernel_names[K_COUNT] = {"attention_fwd_lse", "attention_bwd_preprocess",
                                                  "attention_bwd_dkdv", "attention_bwd_dq"};
/* The const giving each kernel's rows per program. */
static const char *const block_consts[K_COUNT] = {"BLOCK_M", "BLOCK_M", "BLOCK_N", "BLOCK_M"};

/* flash_attention_fp8.tile per spec (head dim and mask, as specs[]). */
static const LoadFn fp8_loads[ATT_SPECS] = {att_fp8_d64_load, att_fp8_d64_causal_load, att_fp8_d128_load,
                                            att_fp8_d128_causal_load};

/* flash_attention_ws_fp8.tile per spec and layout (as ws_loads). */
static const LoadFn wsfp8_loads[ATT_SPECS][ATT_WS_LAYOUTS] = {
    {att_wsfp8_d64_load, att_wsfp8_d64_bshd_load},
    {att_wsfp8_d64_causal_load, att_wsfp8_d64_causal_bshd_load},
    {att_wsfp8_d128_load, att_wsfp8_d128_bshd_load},
    {att_wsfp8_d128_causal_load, att_wsfp8_d128_causal_bshd_load}};
/* Its two kernels: the forward and V's transposition, and the const
 * giving each one's rows (tokens) per program. */
enum { F8_FWD, F8_VT, F8_COUNT };
static const char *const wsfp8_names[F8_COUNT] = {"flash_attention_ws_fp8", "attention_vt"};
static const char *const wsfp8_consts[F8_COUNT] = {"BLOCK_M", "BLOCK_T"};
/* V^T's rows start 16 bytes apart (a TMA stride; fp8 elements are bytes). */
#define ATT_VT_ROW_ALIGN 16

struct tile_attention {
  tile_module *mod[ATT_SPECS];
  tile_kernel *k[ATT_SPECS][K_COUNT];
  int block[ATT_SPECS][K_COUNT];
  tile_module *ws_mod[ATT_SPECS][ATT_WS_LAYOUTS];
  tile_kernel *ws[ATT_SPECS][ATT_WS_LAYOUTS];
  int ws_block[ATT_SPECS][ATT_WS_LAYOUTS];
  tile_module *bws_mod[ATT_SPECS][ATT_WS_LAYOUTS];
  tile_kernel *bws[ATT_SPECS][ATT_WS_LAYOUTS][B_COUNT];
  int bws_block[ATT_SPECS][ATT_WS_LAYOUTS][B_COUNT];
  tile_module *fp8_mod[ATT_SPECS];
  tile_kernel *fp8[ATT_SPECS];
  int fp8_block[ATT_SPECS];
  tile_module *wsfp8_mod[ATT_SPECS][ATT_WS_LAYOUTS];
  tile_kernel *wsfp8[ATT_SPECS][ATT_WS_LAYOUTS][F8_COUNT];
  int wsfp8_block[ATT_SPECS][ATT_WS_LAYOUTS][F8_COUNT];
};

tile_status tile_attention_create(tile_runtime *rt, tile_attention **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_attention_create: out is NULL");
  *out = NULL;
  if (!rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_attention_create: rt is NULL");
  tile_attention *a = calloc(1, sizeof *a);
  if (!a) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_attention_create: out of memory");
  tile_status st = TILE_OK;
  for (int s = 0; s < ATT_SPECS && st == TILE_OK; s++) {
    st = specs[s].load(rt, &a->mod[s]);
    for (int i = 0; i < K_COUNT && st == TILE_OK; i++) {
      st = tile_kernel_get(a->mod[s], kernel_names[i], &a->k[s][i]);
      a->block[s][i] = st == TILE_OK ? tilert_kernel_const_int(a->k[s][i], block_consts[i]) : 0;
      if (st == TILE_OK && a->block[s][i] <= 0)
        st = tilert_fail(TILE_ERROR_BAD_METADATA, "%s has no %s", kernel_names[i], block_consts[i]);
    }
    if (st == TILE_OK) st = fp8_loads[s](rt, &a->fp8_mod[s]);
    if (st == TILE_OK) st = tile_kernel_get(a->fp8_mod[s], "flash_attention_fp8", &a->fp8[s]);
    a->fp8_block[s] = st == TILE_OK ? tilert_kernel_const_int(a->fp8[s], "BLOCK_M") : 0;
    if (st == TILE_OK && a->fp8_block[s] <= 0)
      st = tilert_fail(TILE_ERROR_BAD_METADATA, "flash_attention_fp8 has no BLOCK_M");
    for (int l = 0; l < ATT_WS_LAYOUTS && st == TILE_OK; l++) {
      st = ws_loads[s][l](rt, &a->ws_mod[s][l]);
      if (st == TILE_OK) st = tile_kernel_get(a->ws_mod[s][l], "flash_attention_ws", &a->ws[s][l]);
      a->ws_block[s][l] = st == TILE_OK ? tilert_kernel_const_int(a->ws[s][l], "BLOCK_M") : 0;
      if (st == TILE_OK && a->ws_block[s][l] <= 0)
        st = tilert_fail(TILE_ERROR_BAD_METADATA, "flash_attention_ws has no BLOCK_M");
      if (st == TILE_OK) st = wsfp8_loads[s][l](rt, &a->wsfp8_mod[s][l]);
      for (int i = 0; i < F8_COUNT && st == TILE_OK; i++) {
        st = tile_kernel_get(a->wsfp8_mod[s][l], wsfp8_names[i], &a->wsfp8[s][l][i]);
        a->wsfp8_block[s][l][i] = st == TILE_OK ? tilert_kernel_const_int(a->wsfp8[s][l][i], wsfp8_consts[i]) : 0;
        if (st == TILE_OK && a->wsfp8_block[s][l][i] <= 0)
          st = tilert_fail(TILE_ERROR_BAD_METADATA, "%s has no %s", wsfp8_names[i], wsfp8_consts[i]);
      }
      if (st == TILE_OK) st = bws_loads[s][l](rt, &a->bws_mod[s][l]);
      for (int i = 0; i < B_COUNT && st == TILE_OK; i++) {
        st = tile_kernel_get(a->bws_mod[s][l], bws_names[i], &a->bws[s][l][i]);
        a->bws_block[s][l][i] = st == TILE_OK ? tilert_kernel_const_int(a->bws[s][l][i], bws_consts[i]) : 0;
        if (st == TILE_OK && a->bws_block[s][l][i] <= 0)
          st = tilert_fail(TILE_ERROR_BAD_METADATA, "%s has no %s", bws_names[i], bws_consts[i]);
      }
    }
  }
  if (st != TILE_OK) {
    tilert_error_prefix("tile_attention_create");
    tile_attention_destroy(a);
    return st;
  }
  *out = a;
  return TILE_OK;
}

void tile_attention_destroy(tile_attention *a) {
  if (!a) return;
  for (int s = 0; s < ATT_SPECS; s++) {
    tile_module_unload(a->mod[s]);
    tile_module_unload(a->fp8_mod[s]);
    for (int l = 0; l < ATT_WS_LAYOUTS; l++) {
      tile_module_unload(a->ws_mod[s][l]), tile_module_unload(a->bws_mod[s][l]);
      tile_module_unload(a->wsfp8_mod[s][l]);
    }
  }
  free(a);
}

/* ---- checks ---- */

/* The problem with its strides filled in (contiguous BHSD where 0). */
typedef struct Problem {
  tile_attention_problem p;
  int spec;
} Problem;

static tile_status check_problem(const char *fn, const tile_attention_problem *in, Problem *out) {
  if (!in) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the problem is NULL", fn);
  const tile_attention_problem *p = in;
  if (p->batch < 1 || p->heads < 1 || p->heads_kv < 1 || p->seqlen < 1)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: batch (%d), heads (%d), heads_kv (%d) and seqlen (%d) must be at least 1", fn, p->batch,
                       p->heads, p->heads_kv, p->seqlen);
  if (p->heads % p->heads_kv)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: heads (%d) is not a multiple of heads_kv (%d)", fn, p->heads,
                       p->heads_kv);
  if ((int64_t)p->batch * p->heads > ATT_MAX_GRID_Y)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: batch * heads (%lld) is above %d, CUDA's grid limit", fn,
                       (long long)p->batch * p->heads, ATT_MAX_GRID_Y);
  out->spec = -1;
  for (int s = 0; s < ATT_SPECS; s++)
    if (specs[s].dim == p->head_dim && specs[s].causal == p->causal) out->spec = s;
  if (out->spec < 0)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: head_dim %d has no kernel (64 and 128 do)", fn, p->head_dim);
  out->p = *p;
  int64_t *st[2] = {out->p.q_strides, out->p.kv_strides};
  const int heads[2] = {p->heads, p->heads_kv};
  static const char *const names[2] = {"q_strides", "kv_strides"};
  for (int t = 0; t < 2; t++) {
    if (!st[t][0] && !st[t][1] && !st[t][2]) {
      st[t][2] = p->head_dim;
      st[t][1] = (int64_t)p->seqlen * p->head_dim;
      st[t][0] = (int64_t)heads[t] * st[t][1];
    }
    for (int d = 0; d < 3; d++)
      if (st[t][d] < 1 || st[t][d] % ATT_STRIDE_MULTIPLE)
        return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s[%d] is %lld: strides must be positive multiples of %d",
                           fn, names[t], d, (long long)st[t][d], ATT_STRIDE_MULTIPLE);
    if (st[t][2] > INT32_MAX)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s[2] (%lld) must fit in 32 bits", fn, names[t],
                         (long long)st[t][2]);
  }
  if (out->p.sm_scale == 0) out->p.sm_scale = 1.0f / sqrtf((float)p->head_dim);
  /* the kernels take the row maximum before scaling, which needs a
   * positive scale */
  if (!(out->p.sm_scale > 0) || isinf(out->p.sm_scale))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: sm_scale is %g: it must be positive and finite (0 means 1 / sqrt(head_dim))",
                       fn, (double)p->sm_scale);
  return TILE_OK;
}

/* Pointers named "lse" and "workspace" hold f32 (4-byte alignment); the
 * tensors' need ATT_PTR_ALIGN. */
static tile_status check_ptrs(const char *fn, const char *const *names, const uint64_t *ptrs, int n) {
  for (int i = 0; i < n; i++) {
    if (!ptrs[i]) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s is 0", fn, names[i]);
    int align = !strcmp(names[i], "lse") || !strcmp(names[i], "workspace") ? (int)sizeof(float) : ATT_PTR_ALIGN;
    if (ptrs[i] % (uint64_t)align)
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s (0x%llx) is not %d-byte aligned", fn, names[i],
                         (unsigned long long)ptrs[i], align);
  }
  return TILE_OK;
}

/* The ten scalars every kernel but the preprocessing takes after its
 * pointers: seqlen, heads, heads_kv, sm_scale, the q strides, the kv strides. */
static void scalars(const tile_attention_problem *p, tile_arg *a) {
  a[0] = tile_arg_i64(p->seqlen), a[1] = tile_arg_i64(p->heads), a[2] = tile_arg_i64(p->heads_kv);
  a[3] = tile_arg_f32(p->sm_scale);
  for (int d = 0; d < 3; d++) a[4 + d] = tile_arg_i64(p->q_strides[d]), a[7 + d] = tile_arg_i64(p->kv_strides[d]);
}

static tile_status launch(const tile_attention *a, const Problem *pr, int kernel, int heads, tile_stream *stream,
                          const tile_arg *args, int nargs) {
  int block = a->block[pr->spec][kernel];
  uint32_t grid[3] = {(uint32_t)((pr->p.seqlen + block - 1) / block), (uint32_t)(pr->p.batch * heads), 1};
  tile_status st = tile_launch(a->k[pr->spec][kernel], grid, stream, args, nargs);
  if (st != TILE_OK) tilert_error_prefix("%s", kernel_names[kernel]);
  return st;
}

/* The warp-specialized forward's layout for these strides: 0 contiguous
 * BHSD, 1 contiguous BSHD, -1 neither (the strided forward then). */
static int ws_layout(const tile_attention_problem *p) {
  int64_t d = p->head_dim, n = p->seqlen;
  const int64_t *qs = p->q_strides, *ks = p->kv_strides;
  if (qs[2] == d && qs[1] == n * d && qs[0] == p->heads * n * d && ks[2] == d && ks[1] == n * d &&
      ks[0] == p->heads_kv * n * d)
    return 0;
  if (qs[2] == p->heads * d && qs[1] == d && qs[0] == n * p->heads * d && ks[2] == p->heads_kv * d && ks[1] == d &&
      ks[0] == n * p->heads_kv * d)
    return 1;
  return -1;
}

/* out and lse by flash_attention_ws.tile: q, k, v as matrices of rows
 * (BHSD: rows of a head's sequence; BSHD: rows of tokens). */
/* The descriptor of a query-side (kv false) or key/value-side tensor at
 * ptr as the warp-specialized kernels see it in this layout. */
static tile_tensor ws_tensor(const tile_attention_problem *p, int layout, bool kv, uint64_t ptr) {
  int64_t b = p->batch, n = p->seqlen, d = p->head_dim, h = kv ? p->heads_kv : p->heads;
  if (layout == 1) return (tile_tensor){ptr, 2, {b * n, h * d}, {h * d, 1}};
  return (tile_tensor){ptr, 2, {b * h * n, d}, {d, 1}};
}

static tile_status forward_ws(const tile_attention *a, const Problem *pr, int layout, uint64_t out, uint64_t lse,
                              uint64_t q, uint64_t k, uint64_t v, tile_stream *stream) {
  const tile_attention_problem *p = &pr->p;
  int64_t b = p->batch, n = p->seqlen, h = p->heads, hk = p->heads_kv;
  tile_tensor tq = ws_tensor(p, layout, false, q), tk = ws_tensor(p, layout, true, k), tv = ws_tensor(p, layout, true, v);
  /* cu_q and cu_k are not read without VARLEN: lse stands in */
  tile_arg args[11] = {tile_arg_ptr(out),    tile_arg_ptr(lse),  tile_arg_tensor(&tq), tile_arg_tensor(&tk),
                       tile_arg_tensor(&tv), tile_arg_ptr(lse),  tile_arg_ptr(lse),    tile_arg_i64(n),
                       tile_arg_i64(h),      tile_arg_i64(hk),   tile_arg_f32(p->sm_scale)};
  int block = a->ws_block[pr->spec][layout];
  uint32_t grid[3] = {(uint32_t)((n + block - 1) / block), (uint32_t)(b * h), 1};
  tile_status st = tile_launch(a->ws[pr->spec][layout], grid, stream, args, 11);
  if (st != TILE_OK) tilert_error_prefix("flash_attention_ws");
  return st;
}

tile_status tile_attention_forward(tile_attention *a, const tile_attention_problem *p, uint64_t out, uint64_t lse,
                                   uint64_t q, uint64_t k, uint64_t v, tile_stream *stream) {
  static const char fn[] = "tile_attention_forward";
  Problem pr;
  tile_status st = check_problem(fn, p, &pr);
  static const char *const names[] = {"out", "lse", "q", "k", "v"};
  const uint64_t ptrs[] = {out, lse, q, k, v};
  if (st == TILE_OK) st = check_ptrs(fn, names, ptrs, 5);
  if (st == TILE_OK && !a) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_attention is NULL", fn);
  if (st != TILE_OK) return st;
  int layout = ws_layout(&pr.p);
  if (layout >= 0) return forward_ws(a, &pr, layout, out, lse, q, k, v, stream);
  tile_arg args[ATT_MAX_ARGS];
  for (int i = 0; i < 5; i++) args[i] = tile_arg_ptr(ptrs[i]);
  scalars(&pr.p, args + 5);
  return launch(a, &pr, K_FWD, pr.p.heads, stream, args, 15);
}

/* The scales' check. */
static tile_status check_fp8_scales(const char *fn, const tile_attention_fp8_scales *scales) {
  if (!scales) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the scales are NULL", fn);
  const float sc[3] = {scales->descale_q, scales->descale_k, scales->descale_v};
  static const char *const sc_names[3] = {"descale_q", "descale_k", "descale_v"};
  for (int i = 0; i < 3; i++)
    if (!(sc[i] > 0) || isinf(sc[i]))
      return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: %s is %g: it must be positive and finite", fn, sc_names[i],
                         (double)sc[i]);
  return TILE_OK;
}

/* flash_attention_fp8.tile's checks of the problem (already filled in)
 * and the scales. */
static tile_status check_fp8(const char *fn, const tile_attention_problem *pp, const tile_attention_fp8_scales *scales) {
  /* one head count and one set of strides for q, k, v and out */
  if (pp->heads_kv != pp->heads)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: heads (%d) and heads_kv (%d) differ: the fp8 forward has no grouped-query heads", fn,
                       pp->heads, pp->heads_kv);
  if (memcmp(pp->q_strides, pp->kv_strides, sizeof pp->q_strides))
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: q_strides and kv_strides differ: the fp8 forward reads q, k, v and writes out with one "
                       "set of strides",
                       fn);
  return check_fp8_scales(fn, scales);
}

tile_status tile_attention_forward_fp8(tile_attention *a, const tile_attention_problem *p, uint64_t out, uint64_t q,
                                       uint64_t k, uint64_t v, const tile_attention_fp8_scales *scales,
                                       tile_stream *stream) {
  static const char fn[] = "tile_attention_forward_fp8";
  Problem pr;
  tile_status st = check_problem(fn, p, &pr);
  static const char *const names[] = {"out", "q", "k", "v"};
  const uint64_t ptrs[] = {out, q, k, v};
  if (st == TILE_OK) st = check_ptrs(fn, names, ptrs, 4);
  if (st == TILE_OK) st = check_fp8(fn, &pr.p, scales);
  if (st != TILE_OK) return st;
  if (!a) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_attention is NULL", fn);
  const tile_attention_problem *pp = &pr.p;
  tile_arg args[13] = {tile_arg_ptr(out),          tile_arg_ptr(q),
                       tile_arg_ptr(k),            tile_arg_ptr(v),
                       tile_arg_i64(pp->seqlen),   tile_arg_i64(pp->heads),
                       tile_arg_f32(pp->sm_scale), tile_arg_f32(scales->descale_q),
                       tile_arg_f32(scales->descale_k), tile_arg_f32(scales->descale_v),
                       tile_arg_i64(pp->q_strides[0]), tile_arg_i64(pp->q_strides[1]),
                       tile_arg_i64(pp->q_strides[2])};
  int block = a->fp8_block[pr.spec];
  uint32_t grid[3] = {(uint32_t)((pp->seqlen + block - 1) / block), (uint32_t)(pp->batch * pp->heads), 1};
  st = tile_launch(a->fp8[pr.spec], grid, stream, args, 13);
  if (st != TILE_OK) tilert_error_prefix("%s: flash_attention_fp8", fn);
  return st;
}

/* V^T's row stride in elements (bytes) for seqlen tokens. */
static int64_t vt_stride(int seqlen) {
  return ((int64_t)seqlen + ATT_VT_ROW_ALIGN - 1) / ATT_VT_ROW_ALIGN * ATT_VT_ROW_ALIGN;
}

size_t tile_attention_fp8_workspace_bytes(const tile_attention_problem *p) {
  if (!p || p->batch < 1 || p->heads_kv < 1 || p->seqlen < 1 || p->head_dim < 1) return 0;
  return (size_t)p->batch * (size_t)p->heads_kv * (size_t)p->head_dim * (size_t)vt_stride(p->seqlen);
}

tile_status tile_attention_forward_fp8_lse(tile_attention *a, const tile_attention_problem *p, uint64_t out,
                                           uint64_t lse, uint64_t q, uint64_t k, uint64_t v, uint64_t workspace,
                                           const tile_attention_fp8_scales *scales, tile_stream *stream) {
  static const char fn[] = "tile_attention_forward_fp8_lse";
  Problem pr;
  tile_status st = check_problem(fn, p, &pr);
  static const char *const names[] = {"out", "lse", "q", "k", "v"};
  const uint64_t ptrs[] = {out, lse, q, k, v};
  if (st == TILE_OK) st = check_ptrs(fn, names, ptrs, 5);
  /* the workspace is a TMA tensor's base: 16 bytes */
  if (st == TILE_OK && (!workspace || workspace % ATT_PTR_ALIGN))
    st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: workspace (0x%llx) is %s", fn, (unsigned long long)workspace,
                     workspace ? "not 16-byte aligned" : "0");
  if (st == TILE_OK) st = check_fp8_scales(fn, scales);
  if (st != TILE_OK) return st;
  const tile_attention_problem *pp = &pr.p;
  int layout = ws_layout(pp);
  if (layout < 0)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT,
                       "%s: the strides are neither contiguous BHSD nor BSHD (tile_attention_forward_fp8 takes any)",
                       fn);
  if (!a) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_attention is NULL", fn);
  int64_t bh = (int64_t)pp->batch * pp->heads, bhk = (int64_t)pp->batch * pp->heads_kv, n = pp->seqlen;
  int64_t vts = vt_stride(pp->seqlen);
  /* V^T's padding columns are part of the tensor: attention_vt writes
   * zeros there, which the forward reads as keys whose P is 0. (Built
   * with P_IN_REGISTERS, both kernels put each 16 tokens in k order, and
   * the last group's tokens may land in the padding.) */
  tile_tensor tvt = {workspace, 2, {bhk * pp->head_dim, vts}, {vts, 1}};
  tile_kernel *const *kern = a->wsfp8[pr.spec][layout];
  const int *block = a->wsfp8_block[pr.spec][layout];
  /* V^T of each key/value head into the workspace */
  tile_arg vargs[7] = {tile_arg_tensor(&tvt),           tile_arg_ptr(v),
                       tile_arg_i64(n),                 tile_arg_i64(pp->heads_kv),
                       tile_arg_i64(pp->kv_strides[0]), tile_arg_i64(pp->kv_strides[1]),
                       tile_arg_i64(pp->kv_strides[2])};
  uint32_t vgrid[3] = {(uint32_t)((n + block[F8_VT] - 1) / block[F8_VT]), (uint32_t)bhk, 1};
  st = tile_launch(kern[F8_VT], vgrid, stream, vargs, 7);
  if (st != TILE_OK) {
    tilert_error_prefix("%s: attention_vt", fn);
    return st;
  }
  tile_tensor tq = ws_tensor(pp, layout, false, q), tk = ws_tensor(pp, layout, true, k);
  tile_arg args[12] = {tile_arg_ptr(out),          tile_arg_ptr(lse),
                       tile_arg_tensor(&tq),       tile_arg_tensor(&tk),
                       tile_arg_tensor(&tvt),      tile_arg_i64(n),
                       tile_arg_i64(pp->heads),    tile_arg_i64(pp->heads_kv),
                       tile_arg_f32(pp->sm_scale), tile_arg_f32(scales->descale_q),
                       tile_arg_f32(scales->descale_k), tile_arg_f32(scales->descale_v)};
  uint32_t grid[3] = {(uint32_t)((n + block[F8_FWD] - 1) / block[F8_FWD]), (uint32_t)bh, 1};
  st = tile_launch(kern[F8_FWD], grid, stream, args, 12);
  if (st != TILE_OK) tilert_error_prefix("%s: flash_attention_ws_fp8", fn);
  return st;
}

/* dk, dv and dq by flash_attention_bwd_ws.tile, delta in the workspace. */
static tile_status backward_ws(const tile_attention *a, const Problem *pr, int layout, uint64_t dq, uint64_t dk,
                               uint64_t dv, uint64_t dout, uint64_t q, uint64_t k, uint64_t v, uint64_t lse,
                               uint64_t delta, tile_stream *stream) {
  const tile_attention_problem *p = &pr->p;
  tile_tensor t[4] = {ws_tensor(p, layout, false, q), ws_tensor(p, layout, true, k), ws_tensor(p, layout, true, v),
                      ws_tensor(p, layout, false, dout)};
  tile_arg args[12] = {tile_arg_ptr(dk),        tile_arg_ptr(dv),          tile_arg_tensor(&t[0]),
                       tile_arg_tensor(&t[1]),  tile_arg_tensor(&t[2]),    tile_arg_tensor(&t[3]),
                       tile_arg_ptr(lse),       tile_arg_ptr(delta),       tile_arg_i64(p->seqlen),
                       tile_arg_i64(p->heads),  tile_arg_i64(p->heads_kv), tile_arg_f32(p->sm_scale)};
  tile_status st = TILE_OK;
  for (int i = 0; i < B_COUNT && st == TILE_OK; i++) {
    int block = a->bws_block[pr->spec][layout][i];
    uint32_t grid[3] = {(uint32_t)((p->seqlen + block - 1) / block), (uint32_t)(p->batch * (i == B_DKDV ? p->heads_kv : p->heads)), 1};
    /* dq's arguments: dq, then dk/dv's after their two outputs */
    if (i == B_DQ) args[1] = tile_arg_ptr(dq);
    st = tile_launch(a->bws[pr->spec][layout][i], grid, stream, i == B_DQ ? args + 1 : args, i == B_DQ ? 11 : 12);
    if (st != TILE_OK) tilert_error_prefix("%s", bws_names[i]);
  }
  return st;
}

size_t tile_attention_workspace_bytes(const tile_attention_problem *p) {
  if (!p || p->batch < 1 || p->heads < 1 || p->seqlen < 1) return 0;
  return (size_t)p->batch * (size_t)p->heads * (size_t)p->seqlen * sizeof(float);
}

tile_status tile_attention_backward(tile_attention *a, const tile_attention_problem *p, uint64_t dq, uint64_t dk,
                                    uint64_t dv, uint64_t dout, uint64_t q, uint64_t k, uint64_t v, uint64_t out,
                                    uint64_t lse, uint64_t workspace, tile_stream *stream) {
  static const char fn[] = "tile_attention_backward";
  Problem pr;
  tile_status st = check_problem(fn, p, &pr);
  static const char *const names[] = {"dq", "dk", "dv", "dout", "q", "k", "v", "out", "lse", "workspace"};
  const uint64_t ptrs[] = {dq, dk, dv, dout, q, k, v, out, lse, workspace};
  if (st == TILE_OK) st = check_ptrs(fn, names, ptrs, 10);
  if (st == TILE_OK && !a) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_attention is NULL", fn);
  if (st != TILE_OK) return st;
  tile_arg sc[10], args[ATT_MAX_ARGS];
  scalars(&pr.p, sc);
  /* delta = rowsum(out * dout) into the workspace */
  tile_arg pre[8] = {tile_arg_ptr(workspace), tile_arg_ptr(out), tile_arg_ptr(dout), sc[0], sc[1], sc[4], sc[5], sc[6]};
  st = launch(a, &pr, K_PRE, pr.p.heads, stream, pre, 8);
  int layout = ws_layout(&pr.p);
  if (st == TILE_OK && layout >= 0) return backward_ws(a, &pr, layout, dq, dk, dv, dout, q, k, v, lse, workspace, stream);
  /* dk, dv per key block of each key/value head */
  const uint64_t kv_ptrs[8] = {dk, dv, q, k, v, dout, lse, workspace};
  for (int i = 0; i < 8; i++) args[i] = tile_arg_ptr(kv_ptrs[i]);
  memcpy(args + 8, sc, sizeof sc);
  if (st == TILE_OK) st = launch(a, &pr, K_DKDV, pr.p.heads_kv, stream, args, 18);
  /* dq per query block */
  const uint64_t q_ptrs[7] = {dq, q, k, v, dout, lse, workspace};
  for (int i = 0; i < 7; i++) args[i] = tile_arg_ptr(q_ptrs[i]);
  memcpy(args + 7, sc, sizeof sc);
  if (st == TILE_OK) st = launch(a, &pr, K_DQ, pr.p.heads, stream, args, 17);
  return st;
}
