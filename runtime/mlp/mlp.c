/* mlp.c - tile_mlp.h: the gated MLP kernels of lang/std/mlp.tile,
 * embedded (meson compiles mlp_gate_up once per activation and mlp_down
 * with and without the residual into the mlp_*.h headers, and the fp8
 * layer's kernels likewise), picked and launched per call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "layer.h"
#include "mlp_down_plain.h"
#include "mlp_down8_plain.h"
#include "mlp_down8_res.h"
#include "mlp_down_res.h"
#include "mlp_quant.h"
#include "mlp_up8_act0.h"
#include "mlp_up8_act1.h"
#include "mlp_up8_act2.h"
#include "mlp_up_act0.h"
#include "mlp_up_act1.h"
#include "mlp_up_act2.h"
#include "tile_mlp.h"

/* The mlp_gate_up forms (one per activation) and the two mlp_down forms. */
#define MLP_ACTS LAYER_ACTS
#define MLP_DOWNS 2

static const LayerLoadFn up_loads[MLP_ACTS] = {mlp_up_act0_load, mlp_up_act1_load, mlp_up_act2_load};
/* [0]: without the residual, [1]: with it */
static const LayerLoadFn down_loads[MLP_DOWNS] = {mlp_down_plain_load, mlp_down_res_load};

/* The fp8 layer's: mlp_gate_up_fp8 per activation, mlp_down_fp8 without
 * and with the residual, and the per-token quantization. */
static const LayerLoadFn up8_loads[MLP_ACTS] = {mlp_up8_act0_load, mlp_up8_act1_load, mlp_up8_act2_load};
static const LayerLoadFn down8_loads[MLP_DOWNS] = {mlp_down8_plain_load, mlp_down8_res_load};

struct tile_mlp {
  tile_module *up_mod[MLP_ACTS], *down_mod[MLP_DOWNS];
  tile_kernel *up[MLP_ACTS], *down[MLP_DOWNS];
  tile_module *up8_mod[MLP_ACTS], *down8_mod[MLP_DOWNS], *quant_mod;
  tile_kernel *up8[MLP_ACTS], *down8[MLP_DOWNS], *quant;
  uint32_t sms; /* the persistent kernels' grid: one program per SM */
};

tile_status tile_mlp_create(tile_runtime *rt, tile_mlp **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_mlp_create: out is NULL");
  *out = NULL;
  if (!rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_mlp_create: rt is NULL");
  tile_mlp *m = calloc(1, sizeof *m);
  if (!m) return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "tile_mlp_create: out of memory");
  m->sms = layer_sms(rt);
  tile_status st = TILE_OK;
  for (int i = 0; i < MLP_ACTS && st == TILE_OK; i++)
    st = layer_load(rt, up_loads[i], "mlp_gate_up", &m->up_mod[i], &m->up[i]);
  for (int i = 0; i < MLP_DOWNS && st == TILE_OK; i++)
    st = layer_load(rt, down_loads[i], "mlp_down", &m->down_mod[i], &m->down[i]);
  for (int i = 0; i < MLP_ACTS && st == TILE_OK; i++)
    st = layer_load(rt, up8_loads[i], "mlp_gate_up_fp8", &m->up8_mod[i], &m->up8[i]);
  for (int i = 0; i < MLP_DOWNS && st == TILE_OK; i++)
    st = layer_load(rt, down8_loads[i], "mlp_down_fp8", &m->down8_mod[i], &m->down8[i]);
  if (st == TILE_OK) st = layer_load(rt, mlp_quant_load, "mlp_quantize_fp8", &m->quant_mod, &m->quant);
  if (st != TILE_OK) {
    tilert_error_prefix("tile_mlp_create");
    tile_mlp_destroy(m);
    return st;
  }
  *out = m;
  return TILE_OK;
}

void tile_mlp_destroy(tile_mlp *m) {
  if (!m) return;
  for (int i = 0; i < MLP_ACTS; i++) tile_module_unload(m->up_mod[i]);
  for (int i = 0; i < MLP_DOWNS; i++) tile_module_unload(m->down_mod[i]);
  for (int i = 0; i < MLP_ACTS; i++) tile_module_unload(m->up8_mod[i]);
  for (int i = 0; i < MLP_DOWNS; i++) tile_module_unload(m->down8_mod[i]);
  tile_module_unload(m->quant_mod);
  free(m);
}

static tile_status check_problem(const char *fn, const tile_mlp_problem *p) {
  if (!p) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the problem is NULL", fn);
  return layer_check(fn, p->tokens, p->d_model, p->d_ff, p->act);
}

size_t tile_mlp_workspace_bytes(const tile_mlp_problem *p) {
  if (check_problem("tile_mlp_workspace_bytes", p) != TILE_OK) return 0;
  return (size_t)p->tokens * (size_t)p->d_ff * LAYER_ELEM_BYTES;
}

/* A row-major bf16 matrix as a tensor argument. */
static tile_tensor matrix(uint64_t ptr, int64_t rows, int64_t cols) {
  return (tile_tensor){ptr, 2, {rows, cols}, {cols, 1}};
}

/* The problem, the object and the pointers (the last one may be 0). */
static tile_status check_call(const char *fn, const tile_mlp *m, const tile_mlp_problem *p, int n,
                              const char *const *names, const uint64_t *ptrs, bool last_may_be_zero) {
  tile_status st = check_problem(fn, p);
  for (int i = 0; i < n && st == TILE_OK; i++)
    st = layer_check_ptr(fn, names[i], ptrs[i], LAYER_PTR_ALIGN, last_may_be_zero && i == n - 1);
  if (st == TILE_OK && !m) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_mlp is NULL", fn);
  return st;
}

/* h = act(x w_gate) * (x w_up), without the checks. */
static tile_status gate_up(tile_mlp *m, const tile_mlp_problem *p, uint64_t h, uint64_t x, uint64_t w_gate,
                           uint64_t w_up, tile_stream *stream) {
  int64_t t = p->tokens, dm = p->d_model, dff = p->d_ff;
  tile_tensor th = matrix(h, t, dff), tx = matrix(x, t, dm), tg = matrix(w_gate, dm, dff), tu = matrix(w_up, dm, dff);
  uint32_t grid[3] = {m->sms, 1, 1};
  tile_arg args[7] = {tile_arg_tensor(&th), tile_arg_tensor(&tx), tile_arg_tensor(&tg), tile_arg_tensor(&tu),
                      tile_arg_i64(t),      tile_arg_i64(dm),     tile_arg_i64(dff)};
  tile_status st = tile_launch(m->up[p->act], grid, stream, args, 7);
  if (st != TILE_OK) tilert_error_prefix("mlp_gate_up");
  return st;
}

/* y = h w_down [+ residual] on `programs` programs (0: one per SM),
 * without the checks. */
tile_status mlp_down_on(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t h, uint64_t w_down,
                        uint64_t residual, tile_stream *stream, uint32_t programs) {
  int64_t t = p->tokens, dm = p->d_model, dff = p->d_ff;
  tile_tensor ty = matrix(y, t, dm), th = matrix(h, t, dff), td = matrix(w_down, dff, dm);
  uint32_t grid[3] = {programs && programs < m->sms ? programs : m->sms, 1, 1};
  /* without the residual the pointer is not read: pass y (aligned) */
  tile_arg args[8] = {tile_arg_tensor(&ty), tile_arg_tensor(&th), tile_arg_tensor(&td),
                      tile_arg_ptr(residual ? residual : y), tile_arg_i64(dm), tile_arg_i64(t),
                      tile_arg_i64(dff), tile_arg_i64(dm)};
  tile_status st = tile_launch(m->down[residual != 0], grid, stream, args, 8);
  if (st != TILE_OK) tilert_error_prefix("mlp_down");
  return st;
}

int mlp_down_block_rows(const tile_mlp *m) {
  int rows = tilert_kernel_const_int(m->down[0], "BLOCK_M");
  return rows > 0 ? rows : 1;
}

uint32_t mlp_programs(const tile_mlp *m) { return m->sms; }

tile_status tile_mlp_gate_up(tile_mlp *m, const tile_mlp_problem *p, uint64_t h, uint64_t x, uint64_t w_gate,
                             uint64_t w_up, tile_stream *stream) {
  static const char fn[] = "tile_mlp_gate_up";
  static const char *const names[] = {"h", "x", "w_gate", "w_up"};
  const uint64_t ptrs[] = {h, x, w_gate, w_up};
  tile_status st = check_call(fn, m, p, 4, names, ptrs, false);
  if (st == TILE_OK && (st = gate_up(m, p, h, x, w_gate, w_up, stream)) != TILE_OK) tilert_error_prefix("%s", fn);
  return st;
}

tile_status tile_mlp_down(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t h, uint64_t w_down,
                          uint64_t residual, tile_stream *stream) {
  static const char fn[] = "tile_mlp_down";
  static const char *const names[] = {"y", "h", "w_down", "residual"};
  const uint64_t ptrs[] = {y, h, w_down, residual};
  tile_status st = check_call(fn, m, p, 4, names, ptrs, true);
  if (st == TILE_OK && (st = mlp_down_on(m, p, y, h, w_down, residual, stream, 0)) != TILE_OK)
    tilert_error_prefix("%s", fn);
  return st;
}

tile_status tile_mlp_forward(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t x, uint64_t w_gate,
                             uint64_t w_up, uint64_t w_down, uint64_t residual, uint64_t workspace,
                             tile_stream *stream) {
  static const char fn[] = "tile_mlp_forward";
  static const char *const names[] = {"y", "x", "w_gate", "w_up", "w_down", "workspace", "residual"};
  const uint64_t ptrs[] = {y, x, w_gate, w_up, w_down, workspace, residual};
  tile_status st = check_call(fn, m, p, 7, names, ptrs, true);
  if (st != TILE_OK) return st;
  st = gate_up(m, p, workspace, x, w_gate, w_up, stream);
  if (st == TILE_OK) st = mlp_down_on(m, p, y, workspace, w_down, residual, stream, 0);
  if (st != TILE_OK) tilert_error_prefix("%s", fn);
  return st;
}

/* ---- the fp8 layer ---- */

/* Where the parts of the fp8 workspace start: xq, xs, h, hq, hs; [5] the
 * total. */
static void fp8_parts(const tile_mlp_problem *p, size_t off[6]) {
  size_t t = (size_t)p->tokens, dm = (size_t)p->d_model, dff = (size_t)p->d_ff;
  const size_t bytes[5] = {t * dm, t * sizeof(float), t * dff * LAYER_ELEM_BYTES, t * dff, t * sizeof(float)};
  off[0] = 0;
  for (int i = 0; i < 5; i++) off[i + 1] = off[i] + layer_round_up(bytes[i]);
}

static tile_status check_fp8_problem(const char *fn, const tile_mlp_problem *p) {
  tile_status st = check_problem(fn, p);
  return st == TILE_OK ? layer_check_fp8(fn, p->d_model, p->d_ff) : st;
}

size_t tile_mlp_fp8_workspace_bytes(const tile_mlp_problem *p) {
  if (check_fp8_problem("tile_mlp_fp8_workspace_bytes", p) != TILE_OK) return 0;
  size_t off[6];
  fp8_parts(p, off);
  return off[5];
}

tile_status tile_mlp_forward_fp8(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t x,
                                 const tile_mlp_fp8_weights *w, uint64_t residual, uint64_t workspace,
                                 tile_stream *stream) {
  static const char fn[] = "tile_mlp_forward_fp8";
  tile_status st = check_fp8_problem(fn, p);
  if (st == TILE_OK && !w) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the weights are NULL", fn);
  if (st != TILE_OK) return st;
  static const char *const names[] = {"y",         "x",          "w->w_gate",     "w->w_up",  "w->w_down",
                                      "w->gate_scale", "w->up_scale", "w->down_scale", "workspace", "residual"};
  const uint64_t ptrs[] = {y, x, w->w_gate, w->w_up, w->w_down, w->gate_scale, w->up_scale, w->down_scale, workspace,
                           residual};
  /* the scales are f32 arrays: 4-byte alignment */
  for (int i = 0; i < 10 && st == TILE_OK; i++)
    st = layer_check_ptr(fn, names[i], ptrs[i], i >= 5 && i <= 7 ? sizeof(float) : LAYER_PTR_ALIGN, i == 9);
  if (st == TILE_OK && !m) st = tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: the tile_mlp is NULL", fn);
  if (st != TILE_OK) return st;
  int64_t t = p->tokens, dm = p->d_model, dff = p->d_ff;
  size_t off[6];
  fp8_parts(p, off);
  uint64_t xq = workspace + off[0], xs = workspace + off[1], h = workspace + off[2], hq = workspace + off[3];
  uint64_t hs = workspace + off[4];
  /* (the weights: one output channel per row) */
  tile_tensor th = matrix(h, t, dff), txq = matrix(xq, t, dm), tg = matrix(w->w_gate, dff, dm);
  tile_tensor tu = matrix(w->w_up, dff, dm), ty = matrix(y, t, dm), thq = matrix(hq, t, dff);
  tile_tensor td = matrix(w->w_down, dm, dff);
  const layer_step steps[4] = {
      /* xq, xs = x quantized per token */
      {m->quant, {(uint32_t)t, 1, 1}, {tile_arg_ptr(xq), tile_arg_ptr(xs), tile_arg_ptr(x), tile_arg_i64(dm)}, 4},
      {m->up8[p->act],
       {m->sms, 1, 1},
       {tile_arg_tensor(&th), tile_arg_tensor(&txq), tile_arg_tensor(&tg), tile_arg_tensor(&tu), tile_arg_ptr(xs),
        tile_arg_ptr(w->gate_scale), tile_arg_ptr(w->up_scale), tile_arg_i64(t), tile_arg_i64(dm), tile_arg_i64(dff)},
       10},
      {m->quant, {(uint32_t)t, 1, 1}, {tile_arg_ptr(hq), tile_arg_ptr(hs), tile_arg_ptr(h), tile_arg_i64(dff)}, 4},
      /* without the residual the pointer is not read: y stands in (aligned) */
      {m->down8[residual != 0],
       {m->sms, 1, 1},
       {tile_arg_tensor(&ty), tile_arg_tensor(&thq), tile_arg_tensor(&td), tile_arg_ptr(hs),
        tile_arg_ptr(w->down_scale), tile_arg_ptr(residual ? residual : y), tile_arg_i64(dm), tile_arg_i64(t),
        tile_arg_i64(dff), tile_arg_i64(dm)},
       10},
  };
  return layer_run(fn, steps, 4, stream);
}
