/* moe.c - the MoE layer of tile_mlp.h: the kernels of lang/std/moe.tile,
 * embedded (meson compiles moe_route, moe_count and moe_scatter for each
 * expert width, and moe_scan, moe_gather, the grouped GEMMs moe_gemm_ws
 * (gated per activation, and plain) and moe_combine once, into the moe_*.h
 * headers), launched in turn on the caller's stream. Each expert's rows
 * start at a multiple of MOE_ALIGN (the grouped GEMMs' BLOCK_M), so every
 * row tile of the GEMMs belongs to one expert and goes through TMA. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "layer.h"
#include "moe_combine.h"
#include "moe_count_w128.h"
#include "moe_count_w32.h"
#include "moe_count_w8.h"
#include "moe_down.h"
#include "moe_down8.h"
#include "moe_gather.h"
#include "moe_route_w128.h"
#include "moe_route_w32.h"
#include "moe_route_w8.h"
#include "moe_scan.h"
#include "moe_scatter_w128.h"
#include "moe_scatter_w32.h"
#include "moe_scatter_w8.h"
#include "moe_up_act0.h"
#include "moe_up_act1.h"
#include "moe_quant8.h"
#include "moe_up8_act0.h"
#include "moe_up8_act1.h"
#include "moe_up8_act2.h"
#include "moe_up_act2.h"
#include "tile_mlp.h"

/* The expert widths built in (the kernels' EXPERTS), ascending; a layer
 * takes the smallest that holds its experts. */
#define MOE_WIDTHS 3
static const int widths[MOE_WIDTHS] = {8, 32, 128};
/* Activations of the gated first GEMM. */
#define MOE_ACTS LAYER_ACTS
/* The routing kernel keeps top_k choices per token; moe.tile's loop
 * allows more, this is the range the API promises and tests. */
#define MOE_MAX_TOP_K 8
/* i32 maps and counts (the workspace's sections start on
 * LAYER_SECTION_ALIGN boundaries). */
#define MOE_I32_BYTES 4
/* Pairs per program of moe_count and moe_scatter (their BLOCK, checked
 * when the kernels load): the workspace holds one row of per-expert
 * counts per block. */
#define MOE_PAIR_BLOCK 64
/* Rows an expert's segment is padded to (moe_scatter's ALIGN, the grouped
 * GEMMs' BLOCK_M; checked when the kernels load): the permuted order has
 * at most pairs + experts * (MOE_ALIGN - 1) rows. */
#define MOE_ALIGN 128

/* Per width: route, count, scatter. */
enum { W_ROUTE, W_COUNT, W_SCATTER, W_KERNELS };
static const LayerLoadFn width_loads[MOE_WIDTHS][W_KERNELS] = {
    {moe_route_w8_load, moe_count_w8_load, moe_scatter_w8_load},
    {moe_route_w32_load, moe_count_w32_load, moe_scatter_w32_load},
    {moe_route_w128_load, moe_count_w128_load, moe_scatter_w128_load}};
static const char *const width_names[W_KERNELS] = {"moe_route", "moe_count", "moe_scatter"};
/* Once: scan, gather, combine, the plain grouped GEMM, the gated one per
 * activation. */
/* And the fp8 layer's: the block quantization, the plain fp8 grouped
 * GEMM, the gated one per activation. The grouped GEMMs come last, from
 * S_DOWN on. */
enum {
  S_SCAN, S_GATHER, S_COMBINE, S_QUANT8, S_DOWN, S_UP, S_DOWN8 = S_UP + MOE_ACTS, S_UP8,
  S_KERNELS = S_UP8 + MOE_ACTS
};
static const LayerLoadFn shared_loads[S_KERNELS] = {
    moe_scan_load,    moe_gather_load,  moe_combine_load, moe_quant8_load,  moe_down_load,     moe_up_act0_load,
    moe_up_act1_load, moe_up_act2_load, moe_down8_load,   moe_up8_act0_load, moe_up8_act1_load, moe_up8_act2_load};
static const char *const shared_names[S_KERNELS] = {
    "moe_scan",    "moe_gather",  "moe_combine",     "moe_quantize_blocks", "moe_gemm_ws",     "moe_gemm_ws",
    "moe_gemm_ws", "moe_gemm_ws", "moe_gemm_ws_fp8", "moe_gemm_ws_fp8",     "moe_gemm_ws_fp8", "moe_gemm_ws_fp8"};

struct tile_moe {
  tile_module *wmod[MOE_WIDTHS][W_KERNELS], *smod[S_KERNELS];
  tile_kernel *wk[MOE_WIDTHS][W_KERNELS], *sk[S_KERNELS];
  /* the kernels' BLOCK_T (route), BLOCK_E (scan), BLOCK_R and BLOCK_K
   * (gather), BLOCK_T and BLOCK_N (combine) */
  int route_block, scan_block, gather_rows, gather_cols, combine_rows, combine_cols;
  int quant_rows; /* moe_quantize_blocks' BLOCK_R */
  uint32_t sms;
};

tile_status tile_moe_create(tile_runtime *rt, tile_moe **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_moe_create: out is NULL");
  *out = NULL;
  if (!rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_moe_create: rt is NULL");
  tile_moe *m = calloc(1, sizeof *m);
  if (!m) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_moe_create: out of memory");
  m->sms = layer_sms(rt);
  tile_status st = TILE_OK;
  for (int w = 0; w < MOE_WIDTHS && st == TILE_OK; w++)
    for (int i = 0; i < W_KERNELS && st == TILE_OK; i++)
      st = layer_load(rt, width_loads[w][i], width_names[i], &m->wmod[w][i], &m->wk[w][i]);
  for (int i = 0; i < S_KERNELS && st == TILE_OK; i++)
    st = layer_load(rt, shared_loads[i], shared_names[i], &m->smod[i], &m->sk[i]);
  if (st == TILE_OK) {
    m->route_block = tilert_kernel_const_int(m->wk[0][W_ROUTE], "BLOCK_T");
    m->scan_block = tilert_kernel_const_int(m->sk[S_SCAN], "BLOCK_E");
    m->gather_rows = tilert_kernel_const_int(m->sk[S_GATHER], "BLOCK_R");
    m->gather_cols = tilert_kernel_const_int(m->sk[S_GATHER], "BLOCK_K");
    m->combine_rows = tilert_kernel_const_int(m->sk[S_COMBINE], "BLOCK_T");
    m->combine_cols = tilert_kernel_const_int(m->sk[S_COMBINE], "BLOCK_N");
    m->quant_rows = tilert_kernel_const_int(m->sk[S_QUANT8], "BLOCK_R");
    bool agree = true;
    for (int w = 0; w < MOE_WIDTHS; w++)
      agree &= tilert_kernel_const_int(m->wk[w][W_COUNT], "BLOCK") == MOE_PAIR_BLOCK &&
               tilert_kernel_const_int(m->wk[w][W_SCATTER], "BLOCK") == MOE_PAIR_BLOCK &&
               tilert_kernel_const_int(m->wk[w][W_SCATTER], "ALIGN") == MOE_ALIGN;
    for (int i = S_DOWN; i < S_KERNELS; i++) agree &= tilert_kernel_const_int(m->sk[i], "BLOCK_M") == MOE_ALIGN;
    if (m->route_block <= 0 || m->scan_block <= 0 || m->gather_rows <= 0 || m->gather_cols <= 0 || !agree ||
        m->combine_rows <= 0 || m->combine_cols <= 0 || m->quant_rows <= 0)
      st = tilert_fail(TILE_ERROR_BAD_METADATA, "the MoE kernels' block consts are missing or disagree");
  }
  if (st != TILE_OK) {
    tilert_error_prefix("tile_moe_create");
    tile_moe_destroy(m);
    return st;
  }
  *out = m;
  return TILE_OK;
}

void tile_moe_destroy(tile_moe *m) {
  if (!m) return;
  for (int w = 0; w < MOE_WIDTHS; w++)
    for (int i = 0; i < W_KERNELS; i++) tile_module_unload(m->wmod[w][i]);
  for (int i = 0; i < S_KERNELS; i++) tile_module_unload(m->smod[i]);
  free(m);
}

static tile_status check_problem(const char *fn, const tile_moe_problem *p) {
  if (!p) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the problem is NULL", fn);
  tile_status st = layer_check(fn, p->tokens, p->d_model, p->d_ff, p->act);
  if (st != TILE_OK) return st;
  if (p->experts < 1 || p->experts > widths[MOE_WIDTHS - 1])
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: experts (%d) must be 1 to %d", fn, p->experts,
                       widths[MOE_WIDTHS - 1]);
  if (p->top_k < 1 || p->top_k > MOE_MAX_TOP_K || p->top_k > p->experts)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: top_k (%d) must be 1 to %d and at most experts (%d)", fn,
                       p->top_k, MOE_MAX_TOP_K, p->experts);
  if ((int64_t)p->tokens * p->top_k > INT32_MAX)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: tokens * top_k (%lld) must fit in 32 bits", fn,
                       (long long)p->tokens * p->top_k);
  if (p->capacity < 0)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: capacity (%d) must be 0 (no limit) or positive", fn,
                       p->capacity);
  return TILE_OK;
}

/* The workspace's sections, in order: the routing (ids, weights), the
 * counts, offsets, the blocks' counts, the maps (row_of per pair,
 * token_of and tile_expert over the padded rows), x in the permuted order,
 * the hidden rows, the experts' outputs. */
/* The fp8 layer's workspace has four more after them: x and the hidden
 * rows quantized, and their block scales. */
enum {
  WS_IDS, WS_WEIGHTS, WS_COUNTS, WS_OFFSETS, WS_BLOCKS, WS_ROW_OF, WS_TOKEN_OF, WS_TILE_EXPERT, WS_XP, WS_HIDDEN,
  WS_OUT, WS_COUNT, WS_XQ = WS_COUNT, WS_XS, WS_HQ, WS_HS, WS8_COUNT
};
/* The fp8 layer's scale blocks: 128 columns of activations, 128 x 128 of
 * weights (moe_gemm_ws_fp8's BLOCK_K). */
#define MOE_FP8_BLOCK 128

/* Rows of the permuted order at most: every expert's last tile padded. */
static size_t padded_rows(const tile_moe_problem *p) {
  return (size_t)p->tokens * (size_t)p->top_k + (size_t)p->experts * (MOE_ALIGN - 1);
}

/* Section offsets of a checked problem: at[WS_COUNT] is the bf16 layer's
 * total, at[WS8_COUNT] the fp8 layer's. */
static void sections(const tile_moe_problem *p, size_t at[WS8_COUNT + 1]) {
  size_t pairs = (size_t)p->tokens * (size_t)p->top_k, e = (size_t)p->experts, rows = padded_rows(p);
  size_t blocks = (pairs + MOE_PAIR_BLOCK - 1) / MOE_PAIR_BLOCK;
  /* offsets: each expert's start, the rows in all, the pairs dropped */
  size_t kb_x = ((size_t)p->d_model + MOE_FP8_BLOCK - 1) / MOE_FP8_BLOCK;
  size_t kb_h = ((size_t)p->d_ff + MOE_FP8_BLOCK - 1) / MOE_FP8_BLOCK;
  const size_t bytes[WS8_COUNT] = {pairs * MOE_I32_BYTES,
                                  pairs * sizeof(float),
                                  e * MOE_I32_BYTES,
                                  (e + 2) * MOE_I32_BYTES,
                                  blocks * e * MOE_I32_BYTES,
                                  pairs * MOE_I32_BYTES,
                                  rows * MOE_I32_BYTES,
                                  (rows / MOE_ALIGN + 1) * MOE_I32_BYTES,
                                  rows * (size_t)p->d_model * LAYER_ELEM_BYTES,
                                  rows * (size_t)p->d_ff * LAYER_ELEM_BYTES,
                                  rows * (size_t)p->d_model * LAYER_ELEM_BYTES,
                                  rows * (size_t)p->d_model,
                                  rows * kb_x * sizeof(float),
                                  rows * (size_t)p->d_ff,
                                  rows * kb_h * sizeof(float)};
  at[0] = 0;
  for (int i = 0; i < WS8_COUNT; i++) at[i + 1] = at[i] + layer_round_up(bytes[i]);
}

size_t tile_moe_workspace_bytes(const tile_moe_problem *p) {
  if (check_problem("tile_moe_workspace_bytes", p) != TILE_OK) return 0;
  size_t at[WS8_COUNT + 1];
  sections(p, at);
  return at[WS_COUNT];
}

static uint32_t cdiv(int64_t a, int64_t b) { return (uint32_t)((a + b - 1) / b); }

tile_status tile_moe_stats(const tile_moe_problem *p, uint64_t workspace, uint64_t *counts, uint64_t *dropped) {
  static const char fn[] = "tile_moe_stats";
  tile_status st = check_problem(fn, p);
  if (st != TILE_OK) return st;
  if (!counts || !dropped) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: counts or dropped is NULL", fn);
  if (!workspace) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: workspace is 0", fn);
  size_t at[WS8_COUNT + 1];
  sections(p, at);
  *counts = workspace + at[WS_COUNTS];
  *dropped = workspace + at[WS_OFFSETS] + (size_t)(p->experts + 1) * MOE_I32_BYTES;
  return TILE_OK;
}

/* The bf16 layer's weights or the fp8 layer's (scales non-NULL). */
typedef struct moe_weights {
  uint64_t gate, up, down;
  const tile_moe_fp8_weights *fp8;
} moe_weights;

/* Both layers: routing, permutation and gather, then the two grouped
 * GEMMs (bf16, or fp8 with each operand quantized in blocks first), then
 * the combine; every launch on the stream, in order. */
static tile_status forward(tile_moe *m, const char *fn, const tile_moe_problem *p, uint64_t y, uint64_t x,
                           uint64_t router_logits, const moe_weights *wt, uint64_t workspace, tile_stream *stream) {
  int w = 0;
  while (widths[w] < p->experts) w++;
  size_t at[WS8_COUNT + 1];
  sections(p, at);
  uint64_t s[WS8_COUNT];
  for (int i = 0; i < WS8_COUNT; i++) s[i] = workspace + at[i];
  int64_t tokens = p->tokens, e = p->experts, k = p->top_k, pairs = tokens * k, dm = p->d_model, dff = p->d_ff;
  uint32_t pair_grid = cdiv(pairs, MOE_PAIR_BLOCK), gemm_grid = m->sms;
  int64_t capacity = p->capacity > 0 ? p->capacity : pairs; /* pairs: more than any expert gets */
  int64_t rows = (int64_t)padded_rows(p);
  /* the grouped GEMMs' operands: x in the permuted order, the hidden rows,
   * the outputs, and each weight tensor as [experts * rows, columns] */
  tile_tensor t_xp = {s[WS_XP], 2, {rows, dm}, {dm, 1}}, t_hid = {s[WS_HIDDEN], 2, {rows, dff}, {dff, 1}};
  tile_tensor t_out = {s[WS_OUT], 2, {rows, dm}, {dm, 1}};
  tile_tensor t_gate = {wt->gate, 2, {e * dm, dff}, {dff, 1}}, t_up = {wt->up, 2, {e * dm, dff}, {dff, 1}};
  tile_tensor t_down = {wt->down, 2, {e * dff, dm}, {dm, 1}};
  /* fp8: the quantized operands, and the weights as [experts * out, in] */
  tile_tensor t_xq = {s[WS_XQ], 2, {rows, dm}, {dm, 1}}, t_hq = {s[WS_HQ], 2, {rows, dff}, {dff, 1}};
  tile_tensor t_gate8 = {wt->gate, 2, {e * dff, dm}, {dm, 1}}, t_up8 = {wt->up, 2, {e * dff, dm}, {dm, 1}};
  tile_tensor t_down8 = {wt->down, 2, {e * dm, dff}, {dff, 1}};
  const tile_moe_fp8_weights *f8 = wt->fp8;
  layer_step steps[10];
  int n = 0;
  steps[n++] = (layer_step){m->wk[w][W_ROUTE],
                          {cdiv(tokens, m->route_block), 1, 1},
                          {tile_arg_ptr(s[WS_IDS]), tile_arg_ptr(s[WS_WEIGHTS]), tile_arg_ptr(router_logits),
                           tile_arg_i64(tokens), tile_arg_i64(e), tile_arg_i64(e), tile_arg_i64(k),
                           tile_arg_i64(p->sigmoid ? 1 : 0), tile_arg_bool(p->renormalize)},
                          9};
  /* per block of pairs: counts per expert, and each pair's rank in the block (into row_of) */
  steps[n++] = (layer_step){m->wk[w][W_COUNT],
                          {pair_grid, 1, 1},
                          {tile_arg_ptr(s[WS_BLOCKS]), tile_arg_ptr(s[WS_ROW_OF]), tile_arg_ptr(s[WS_IDS]),
                           tile_arg_i64(tokens), tile_arg_i64(k), tile_arg_i64(e)},
                          6};
  steps[n++] = (layer_step){m->sk[S_SCAN],
                          {cdiv(e, m->scan_block), 1, 1},
                          {tile_arg_ptr(s[WS_BLOCKS]), tile_arg_ptr(s[WS_COUNTS]), tile_arg_i64(pair_grid),
                           tile_arg_i64(e)},
                          4};
  steps[n++] = (layer_step){m->wk[w][W_SCATTER],
                          {pair_grid, 1, 1},
                          {tile_arg_ptr(s[WS_ROW_OF]), tile_arg_ptr(s[WS_TOKEN_OF]), tile_arg_ptr(s[WS_OFFSETS]),
                           tile_arg_ptr(s[WS_TILE_EXPERT]), tile_arg_ptr(s[WS_BLOCKS]), tile_arg_ptr(s[WS_COUNTS]),
                           tile_arg_ptr(s[WS_IDS]), tile_arg_i64(tokens), tile_arg_i64(k), tile_arg_i64(e),
                           tile_arg_i64(capacity)},
                          11};
  steps[n++] = (layer_step){m->sk[S_GATHER],
                          {cdiv(rows, m->gather_rows), cdiv(dm, m->gather_cols), 1},
                          {tile_arg_ptr(s[WS_XP]), tile_arg_ptr(x), tile_arg_ptr(s[WS_TOKEN_OF]),
                           tile_arg_ptr(s[WS_OFFSETS]), tile_arg_i64(e), tile_arg_i64(dm)},
                          6};
  if (!f8) {
    /* hidden = act(xp w_gate[e]) * (xp w_up[e]) */
    steps[n++] = (layer_step){m->sk[S_UP + p->act],
                            {gemm_grid, 1, 1},
                            {tile_arg_tensor(&t_hid), tile_arg_tensor(&t_xp), tile_arg_tensor(&t_gate),
                             tile_arg_tensor(&t_up), tile_arg_ptr(s[WS_OFFSETS]), tile_arg_ptr(s[WS_TILE_EXPERT]),
                             tile_arg_i64(e), tile_arg_i64(dff), tile_arg_i64(dm)},
                            9};
    /* out = hidden w_down[e] */
    steps[n++] = (layer_step){m->sk[S_DOWN],
                            {gemm_grid, 1, 1},
                            {tile_arg_tensor(&t_out), tile_arg_tensor(&t_hid), tile_arg_tensor(&t_down),
                             tile_arg_tensor(&t_down), tile_arg_ptr(s[WS_OFFSETS]), tile_arg_ptr(s[WS_TILE_EXPERT]),
                             tile_arg_i64(e), tile_arg_i64(dm), tile_arg_i64(dff)},
                            9};
  } else {
    /* xq, xs = xp in blocks of 128 columns; hidden from the fp8 gated GEMM;
     * hq, hs likewise; out from the plain one */
    steps[n++] = (layer_step){m->sk[S_QUANT8],
                            {cdiv(rows, m->quant_rows), cdiv(dm, MOE_FP8_BLOCK), 1},
                            {tile_arg_ptr(s[WS_XQ]), tile_arg_ptr(s[WS_XS]), tile_arg_ptr(s[WS_XP]),
                             tile_arg_ptr(s[WS_OFFSETS]), tile_arg_i64(e), tile_arg_i64(dm)},
                            6};
    steps[n++] = (layer_step){m->sk[S_UP8 + p->act],
                            {gemm_grid, 1, 1},
                            {tile_arg_tensor(&t_hid), tile_arg_tensor(&t_xq), tile_arg_ptr(s[WS_XS]),
                             tile_arg_tensor(&t_gate8), tile_arg_ptr(f8->gate_scale), tile_arg_tensor(&t_up8),
                             tile_arg_ptr(f8->up_scale), tile_arg_ptr(s[WS_OFFSETS]), tile_arg_ptr(s[WS_TILE_EXPERT]),
                             tile_arg_i64(e), tile_arg_i64(dff), tile_arg_i64(dm)},
                            12};
    steps[n++] = (layer_step){m->sk[S_QUANT8],
                            {cdiv(rows, m->quant_rows), cdiv(dff, MOE_FP8_BLOCK), 1},
                            {tile_arg_ptr(s[WS_HQ]), tile_arg_ptr(s[WS_HS]), tile_arg_ptr(s[WS_HIDDEN]),
                             tile_arg_ptr(s[WS_OFFSETS]), tile_arg_i64(e), tile_arg_i64(dff)},
                            6};
    steps[n++] = (layer_step){m->sk[S_DOWN8],
                            {gemm_grid, 1, 1},
                            {tile_arg_tensor(&t_out), tile_arg_tensor(&t_hq), tile_arg_ptr(s[WS_HS]),
                             tile_arg_tensor(&t_down8), tile_arg_ptr(f8->down_scale), tile_arg_tensor(&t_down8),
                             tile_arg_ptr(f8->down_scale), tile_arg_ptr(s[WS_OFFSETS]),
                             tile_arg_ptr(s[WS_TILE_EXPERT]), tile_arg_i64(e), tile_arg_i64(dm), tile_arg_i64(dff)},
                            12};
  }
  steps[n++] = (layer_step){m->sk[S_COMBINE],
                          {cdiv(tokens, m->combine_rows), cdiv(dm, m->combine_cols), 1},
                          {tile_arg_ptr(y), tile_arg_ptr(s[WS_OUT]), tile_arg_ptr(s[WS_WEIGHTS]),
                           tile_arg_ptr(s[WS_ROW_OF]), tile_arg_i64(tokens), tile_arg_i64(dm), tile_arg_i64(k)},
                          7};
  return layer_run(fn, steps, n, stream);
}

tile_status tile_moe_forward(tile_moe *m, const tile_moe_problem *p, uint64_t y, uint64_t x, uint64_t router_logits,
                             uint64_t w_gate, uint64_t w_up, uint64_t w_down, uint64_t workspace,
                             tile_stream *stream) {
  static const char fn[] = "tile_moe_forward";
  tile_status st = check_problem(fn, p);
  static const char *const names[] = {"y", "x", "router_logits", "w_gate", "w_up", "w_down", "workspace"};
  const uint64_t ptrs[] = {y, x, router_logits, w_gate, w_up, w_down, workspace};
  for (int i = 0; i < 7 && st == TILE_OK; i++) /* the f32 logits are read element by element */
    st = layer_check_ptr(fn, names[i], ptrs[i], i == 2 ? sizeof(float) : LAYER_PTR_ALIGN, false);
  if (st == TILE_OK && !m) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_moe is NULL", fn);
  if (st != TILE_OK) return st;
  const moe_weights wt = {w_gate, w_up, w_down, NULL};
  return forward(m, fn, p, y, x, router_logits, &wt, workspace, stream);
}

static tile_status check_fp8_problem(const char *fn, const tile_moe_problem *p) {
  tile_status st = check_problem(fn, p);
  return st == TILE_OK ? layer_check_fp8(fn, p->d_model, p->d_ff) : st;
}

size_t tile_moe_fp8_workspace_bytes(const tile_moe_problem *p) {
  if (check_fp8_problem("tile_moe_fp8_workspace_bytes", p) != TILE_OK) return 0;
  size_t at[WS8_COUNT + 1];
  sections(p, at);
  return at[WS8_COUNT];
}

tile_status tile_moe_forward_fp8(tile_moe *m, const tile_moe_problem *p, uint64_t y, uint64_t x,
                                 uint64_t router_logits, const tile_moe_fp8_weights *w, uint64_t workspace,
                                 tile_stream *stream) {
  static const char fn[] = "tile_moe_forward_fp8";
  tile_status st = check_fp8_problem(fn, p);
  if (st == TILE_OK && !w) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the weights are NULL", fn);
  if (st != TILE_OK) return st;
  static const char *const names[] = {"y",        "x",          "router_logits", "w->w_gate", "w->w_up",
                                      "w->w_down", "w->gate_scale", "w->up_scale", "w->down_scale", "workspace"};
  const uint64_t ptrs[] = {y,           x,           router_logits, w->w_gate,     w->w_up,
                           w->w_down,   w->gate_scale, w->up_scale, w->down_scale, workspace};
  /* the f32 logits and scales are read element by element */
  for (int i = 0; i < 10 && st == TILE_OK; i++)
    st = layer_check_ptr(fn, names[i], ptrs[i], i == 2 || (i >= 6 && i <= 8) ? sizeof(float) : LAYER_PTR_ALIGN,
                         false);
  if (st == TILE_OK && !m) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_moe is NULL", fn);
  if (st != TILE_OK) return st;
  const moe_weights wt = {w->w_gate, w->w_up, w->w_down, w};
  return forward(m, fn, p, y, x, router_logits, &wt, workspace, stream);
}
