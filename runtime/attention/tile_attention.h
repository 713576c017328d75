/* tile_attention.h - flash attention from C, over libtile: the standard
 * library's training kernels (lang/std/flash_attention_bwd.tile) and its
 * warp-specialized forward and backward (flash_attention_ws.tile,
 * flash_attention_bwd_ws.tile, used when the tensors are contiguous BHSD or
 * BSHD; the strided kernels otherwise), compiled
 * when the library is built for every head dim and mask they offer and
 * embedded, picked per call. No launch code to write:
 *
 *   tile_attention *att;
 *   tile_attention_create(rt, &att);
 *   tile_attention_problem p = {.batch = 4, .heads = 16, .heads_kv = 4, .seqlen = 4096,
 *                               .head_dim = 128, .causal = true};
 *   tile_attention_forward(att, &p, out, lse, q, k, v, NULL);
 *   ...
 *   tile_attention_backward(att, &p, dq, dk, dv, dout, q, k, v, out, lse, workspace, NULL);
 *
 * Tensors are bf16 in device memory: q, out, dout, dq are [batch, heads,
 * seqlen, head_dim]; k, v, dk, dv [batch, heads_kv, seqlen, head_dim]
 * (grouped-query attention: query head h reads key/value head
 * h / (heads / heads_kv)); each addressed by strides in elements (batch,
 * head, row; the last dimension contiguous), or contiguous BHSD where the
 * strides are left 0. lse is [batch * heads, seqlen] f32, written by the
 * forward (log2 of each row's softmax denominator in the kernels' scaled
 * domain) and read by the backward. The backward also needs a workspace
 * of tile_attention_workspace_bytes(p) bytes. Calls are asynchronous on
 * the stream (NULL: the default stream), as tile_launch.
 *
 * The kernels' sliding window (WINDOW in the .tile file) is not offered
 * here: every call is full or causal attention.
 *
 * Every function returns a tile_status; a wrong problem (a head dim with
 * no kernel, heads not a multiple of heads_kv, strides that are not
 * multiples of 8 elements, a NULL pointer) is TILE_ERROR_INVALID_ARGUMENT
 * with tile_last_error() naming the field. */
#ifndef TILE_ATTENTION_H
#define TILE_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tile_attention tile_attention;

typedef struct tile_attention_problem {
  int batch, heads, heads_kv, seqlen;
  int head_dim;   /* 64 or 128 */
  bool causal;    /* query i attends to keys 0..i */
  float sm_scale; /* positive; 0: 1 / sqrt(head_dim) */
  /* strides in elements of [batch, head, row]; all 0: contiguous BHSD */
  int64_t q_strides[3];  /* q, out, dout, dq */
  int64_t kv_strides[3]; /* k, v, dk, dv */
} tile_attention_problem;

/* Loads the kernels (one module per head dim and mask) on rt's device. */
tile_status tile_attention_create(tile_runtime *rt, tile_attention **out);
/* Unloads them. NULL is allowed. */
void tile_attention_destroy(tile_attention *a);

/* out = softmax(q k^T * sm_scale [causal]) v, and lse. */
tile_status tile_attention_forward(tile_attention *a, const tile_attention_problem *p, uint64_t out, uint64_t lse,
                                   uint64_t q, uint64_t k, uint64_t v, tile_stream *stream);

/* The fp8 forward (lang/std/flash_attention_fp8.tile): q, k and v hold
 * e4m3 values x / scale with one scale per tensor, given here as the
 * descale factors (the scales: positive, finite); out is bf16:
 *
 *   out = softmax(q k^T * descale_q * descale_k * sm_scale [causal]) v * descale_v
 *
 * Both products on fp8 tensor cores, P rounded to e4m3 for the second
 * (a relative error of a few 1e-3 to 1e-2). No lse; no grouped-query
 * heads (heads_kv must equal heads); q, k, v and out share one layout
 * (q_strides and kv_strides equal, in elements, or both left 0 for
 * contiguous BHSD), any strides the bf16 forward takes. For contiguous
 * BHSD or BSHD, tile_attention_forward_fp8_lse below is the fast form. */
typedef struct tile_attention_fp8_scales {
  float descale_q, descale_k, descale_v;
} tile_attention_fp8_scales;

tile_status tile_attention_forward_fp8(tile_attention *a, const tile_attention_problem *p, uint64_t out, uint64_t q,
                                       uint64_t k, uint64_t v, const tile_attention_fp8_scales *scales,
                                       tile_stream *stream);

/* The fp8 forward in its warp-specialized form
 * (lang/std/flash_attention_ws_fp8.tile; at d128 and 16k tokens 6x
 * tile_attention_forward_fp8's kernel, bench/RESULTS.md), for q, k, v and
 * out in contiguous BHSD or BSHD (strides left 0, or BSHD's): the same
 * inputs, scales and out as tile_attention_forward_fp8, and lse as
 * tile_attention_forward's ([batch * heads, seqlen] f32, log2 domain).
 * fp8 products read both operands K-major, so V is first transposed
 * into the workspace (tile_attention_fp8_workspace_bytes(p) bytes,
 * 16-byte aligned; each key/value head's V^T, rows padded to 16 bytes
 * with zeros), then the forward reads it: two launches on the stream.
 * Grouped-query heads as in tile_attention_forward. */
size_t tile_attention_fp8_workspace_bytes(const tile_attention_problem *p);
tile_status tile_attention_forward_fp8_lse(tile_attention *a, const tile_attention_problem *p, uint64_t out,
                                           uint64_t lse, uint64_t q, uint64_t k, uint64_t v, uint64_t workspace,
                                           const tile_attention_fp8_scales *scales, tile_stream *stream);

/* Bytes of the backward's workspace (each row's rowsum(out * dout)). */
size_t tile_attention_workspace_bytes(const tile_attention_problem *p);

/* dq, dk, dv from dout and the forward's q, k, v, out and lse. dk and dv
 * are written (not accumulated); with grouped-query heads each is the sum
 * over the query heads of its group. */
tile_status tile_attention_backward(tile_attention *a, const tile_attention_problem *p, uint64_t dq, uint64_t dk,
                                    uint64_t dv, uint64_t dout, uint64_t q, uint64_t k, uint64_t v, uint64_t out,
                                    uint64_t lse, uint64_t workspace, tile_stream *stream);

#ifdef __cplusplus
}
#endif

#endif
