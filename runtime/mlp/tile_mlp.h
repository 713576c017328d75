/* tile_mlp.h - the fused gated MLP and the mixture-of-experts layer from
 * C, over libtile (the MoE layer is at the end). The MLP: the standard
 * library's kernels (lang/std/mlp.tile), compiled when the library is
 * built for every activation it offers and embedded, picked per call. No
 * launch code to write:
 *
 *   tile_mlp *mlp;
 *   tile_mlp_create(rt, &mlp);
 *   tile_mlp_problem p = {.tokens = 8192, .d_model = 4096, .d_ff = 14336, .act = TILE_MLP_SWIGLU};
 *   tile_mlp_forward(mlp, &p, y, x, w_gate, w_up, w_down, residual, workspace, NULL);
 *
 * computes, in two launches (mlp_gate_up, mlp_down),
 *
 *   h = act(x w_gate) * (x w_up)      into the workspace ([tokens, d_ff])
 *   y = h w_down [+ residual]
 *
 * Matrices are bf16 in device memory, row-major and contiguous: x, y and
 * residual are [tokens, d_model], w_gate and w_up [d_model, d_ff], w_down
 * [d_ff, d_model]. residual 0 means none. The workspace holds h:
 * tile_mlp_workspace_bytes(p) bytes; after the call it is the layer's
 * intermediate activation (what a backward pass needs). Calls are
 * asynchronous on the stream (NULL: the default stream), as tile_launch.
 *
 * Every function returns a tile_status; a wrong problem (sizes below 1,
 * d_model or d_ff not a multiple of 8, an unknown activation, a NULL or
 * misaligned pointer) is TILE_ERROR_INVALID_ARGUMENT with tile_last_error()
 * naming the field. */
#ifndef TILE_MLP_H
#define TILE_MLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tile_mlp tile_mlp;

typedef enum tile_mlp_activation {
  TILE_MLP_SWIGLU = 0,     /* silu(g) * u */
  TILE_MLP_GEGLU = 1,      /* gelu(g) * u, the exact gelu (erf) */
  TILE_MLP_GEGLU_TANH = 2, /* gelu(g) * u, the tanh approximation */
} tile_mlp_activation;

typedef struct tile_mlp_problem {
  int tokens, d_model, d_ff; /* d_model and d_ff multiples of 8 */
  tile_mlp_activation act;
} tile_mlp_problem;

/* Loads the kernels on rt's device. */
tile_status tile_mlp_create(tile_runtime *rt, tile_mlp **out);
/* Unloads them. NULL is allowed. */
void tile_mlp_destroy(tile_mlp *m);

/* Bytes of the forward's workspace (h, bf16); 0 for an invalid problem. */
size_t tile_mlp_workspace_bytes(const tile_mlp_problem *p);

/* y = (act(x w_gate) * (x w_up)) w_down [+ residual]; residual may be 0. */
tile_status tile_mlp_forward(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t x, uint64_t w_gate,
                             uint64_t w_up, uint64_t w_down, uint64_t residual, uint64_t workspace,
                             tile_stream *stream);

/* The forward's two launches one at a time, for callers that place or
 * split the work themselves (the tensor-parallel layer of tile_tp.h runs
 * the down projection in chunks of tokens): h = act(x w_gate) * (x w_up),
 * h [tokens, d_ff]; then y = h w_down [+ residual]. The same checks as
 * tile_mlp_forward (the down projection ignores p->act but checks it). */
tile_status tile_mlp_gate_up(tile_mlp *m, const tile_mlp_problem *p, uint64_t h, uint64_t x, uint64_t w_gate,
                             uint64_t w_up, tile_stream *stream);
tile_status tile_mlp_down(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t h, uint64_t w_down,
                          uint64_t residual, tile_stream *stream);

/* The fp8 layer (mlp.tile's mlp_quantize_fp8, mlp_gate_up_fp8 and
 * mlp_down_fp8): e4m3 weights with a scale per output channel, each
 * matrix stored with one output channel per row (w_gate and w_up
 * [d_ff, d_model], w_down [d_model, d_ff]), the scales f32 (gate_scale,
 * up_scale [d_ff], down_scale [d_model]; a stored weight times its
 * channel's scale is the weight). x, y and residual are bf16 as above.
 * Each token's row of x is quantized to e4m3 with its own scale
 * (max |row| / 448), h = act(g) * u is computed from the fp8 products in
 * f32 and rounded to bf16, then quantized per token the same way for the
 * down projection: four launches. d_model and d_ff must be multiples of
 * 16 (16-byte rows of e4m3). The workspace
 * (tile_mlp_fp8_workspace_bytes(p)) holds the quantized x and h, their
 * scales and h. */
typedef struct tile_mlp_fp8_weights {
  uint64_t w_gate, w_up, w_down;             /* e4m3 */
  uint64_t gate_scale, up_scale, down_scale; /* f32 */
} tile_mlp_fp8_weights;

size_t tile_mlp_fp8_workspace_bytes(const tile_mlp_problem *p);
tile_status tile_mlp_forward_fp8(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t x,
                                 const tile_mlp_fp8_weights *w, uint64_t residual, uint64_t workspace,
                                 tile_stream *stream);

/* ---- a mixture-of-experts layer (lang/std/moe.tile) ----
 *
 *   tile_moe *moe;
 *   tile_moe_create(rt, &moe);
 *   tile_moe_problem p = {.tokens = 8192, .d_model = 4096, .d_ff = 14336, .experts = 8, .top_k = 2,
 *                         .renormalize = true, .act = TILE_MLP_SWIGLU};
 *   tile_moe_forward(moe, &p, y, x, router_logits, w_gate, w_up, w_down, workspace, NULL);
 *
 * routes each token to its top_k experts (softmax or sigmoid scores of the
 * router logits, ties to the lower expert), groups the (token, expert)
 * pairs by expert, runs every expert's gated MLP on its rows (x copied
 * into the experts' order, each expert's rows padded to 128, then two
 * warp-specialized grouped GEMMs on TMA, the activation product fused into
 * the first) and sums each token's experts weighted by their scores:
 *
 *   y[t] = sum over t's experts e of weight[t, e] * (act(x[t] w_gate[e]) * (x[t] w_up[e])) w_down[e]
 *
 * in eight kernels on the stream, with no host synchronization (a CUDA
 * graph can capture the call). x and y are bf16 [tokens, d_model];
 * router_logits f32 [tokens, experts]; w_gate and w_up bf16 [experts,
 * d_model, d_ff]; w_down bf16 [experts, d_ff, d_model]; all contiguous.
 * The workspace (tile_moe_workspace_bytes(p) bytes) holds the routing,
 * the permutation and the experts' intermediate rows.
 *
 * With capacity > 0 each expert takes at most that many (token, expert)
 * pairs (GShard's expert capacity; from a capacity factor f, capacity =
 * ceil(f * tokens * top_k / experts)). Pairs are ranked choice-major:
 * every token's first choice in token order, then every second choice,
 * and so on; an expert keeps its first `capacity` pairs in that order and
 * drops the rest, which then add nothing to their token's y (the weights
 * are those of the routing, not renormalized over what is kept). The
 * result is deterministic: the same inputs give the same y bit for bit.
 * tile_moe_stats gives where the routed count per expert and the number
 * of dropped pairs lie in the workspace after the call. capacity 0: no
 * limit, nothing dropped. */

typedef struct tile_moe tile_moe;

typedef struct tile_moe_problem {
  int tokens, d_model, d_ff; /* d_model and d_ff multiples of 8 */
  int experts;               /* 1 to 128 */
  int top_k;                 /* 1 to 8, at most experts */
  bool sigmoid;              /* scores: each logit's sigmoid (true) or the softmax over the experts */
  bool renormalize;          /* weights: the chosen scores divided by their sum */
  tile_mlp_activation act;
  int capacity;              /* pairs an expert takes at most; 0: no limit */
} tile_moe_problem;

/* Loads the kernels (every expert width) on rt's device. */
tile_status tile_moe_create(tile_runtime *rt, tile_moe **out);
/* Unloads them. NULL is allowed. */
void tile_moe_destroy(tile_moe *m);

/* Bytes of the layer's workspace; 0 for an invalid problem. */
size_t tile_moe_workspace_bytes(const tile_moe_problem *p);

tile_status tile_moe_forward(tile_moe *m, const tile_moe_problem *p, uint64_t y, uint64_t x, uint64_t router_logits,
                             uint64_t w_gate, uint64_t w_up, uint64_t w_down, uint64_t workspace,
                             tile_stream *stream);

/* The fp8 layer: expert weights in e4m3 with a scale per 128 x 128 block,
 * each expert's matrix stored with one output channel per row: w_gate and
 * w_up [experts, d_ff, d_model], w_down [experts, d_model, d_ff]; the
 * scales f32 [experts, cdiv(rows, 128), cdiv(columns, 128)] of those
 * matrices (gate_scale, up_scale [experts, cdiv(d_ff, 128),
 * cdiv(d_model, 128)]; down_scale [experts, cdiv(d_model, 128),
 * cdiv(d_ff, 128)]; a stored weight times its block's scale is the
 * weight). The routing, permutation and combine are the bf16 layer's;
 * each permuted row of x, and of the experts' hidden rows, is quantized
 * to e4m3 in blocks of 128 columns (scale: the block's largest magnitude
 * / 448) before its grouped GEMM, whose block products are scaled in
 * f32: ten launches, still no host synchronization. d_model and d_ff
 * must be multiples of 16. The workspace (tile_moe_fp8_workspace_bytes)
 * is the bf16 layer's and the quantized rows with their scales;
 * tile_moe_stats reads it the same way. */
typedef struct tile_moe_fp8_weights {
  uint64_t w_gate, w_up, w_down;             /* e4m3 */
  uint64_t gate_scale, up_scale, down_scale; /* f32 */
} tile_moe_fp8_weights;

size_t tile_moe_fp8_workspace_bytes(const tile_moe_problem *p);
tile_status tile_moe_forward_fp8(tile_moe *m, const tile_moe_problem *p, uint64_t y, uint64_t x,
                                 uint64_t router_logits, const tile_moe_fp8_weights *w, uint64_t workspace,
                                 tile_stream *stream);

/* Device addresses, inside the workspace of a tile_moe_forward call with
 * problem p, of what the call leaves there: counts, i32[experts], the
 * pairs routed to each expert (before the capacity), and dropped, one
 * i32, the pairs dropped in all (0 without a capacity). Valid once the
 * call's work on its stream is done, until the workspace is reused. */
tile_status tile_moe_stats(const tile_moe_problem *p, uint64_t workspace, uint64_t *counts, uint64_t *dropped);

#ifdef __cplusplus
}
#endif

#endif
