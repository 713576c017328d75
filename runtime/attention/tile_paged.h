/* tile_paged.h - decode and prefill attention over a paged KV cache from
 * C, over libtile: the kernels of lang/std/paged_decode.tile (decode, the
 * split-KV merge, prefill, appending to the cache, page copies), compiled
 * when the library is built for each head dim, page size and cache element
 * type offered, and embedded.
 *
 *   tile_paged *pg;
 *   tile_paged_create(rt, &pg);
 *   tile_paged_problem p = {.batch = 64, .heads = 32, .heads_kv = 8, .head_dim = 128,
 *                           .page_size = 16, .max_kv_len = 32768};
 *   tile_paged_plan plan;
 *   tile_paged_decode_plan(pg, &p, &plan);           once per batch shape
 *   ... a workspace of plan.workspace_bytes ...
 *   tile_paged_decode(pg, &plan, &(tile_paged_buffers){...}, stream);
 *
 * The cache (the layout of vLLM and FlashInfer): pages of page_size token
 * slots; sequence b's pages are page_ids[indptr[b] .. indptr[b + 1]) in
 * order, and its token t is in slot t % page_size of page
 * page_ids[indptr[b] + t / page_size]; kv_len[b] tokens (1 or more; the
 * last page may be partly filled). page_ids, indptr (batch + 1 entries)
 * and kv_len are i32 in device memory. k_cache and v_cache are addressed
 * by strides in elements: slot s of page p, KV head g, dimension d is at
 * p * strides[0] + s * strides[1] + g * strides[2] + d. Strides all 0: NHD,
 * [pages, page_size, heads_kv, head_dim]; HND is {page_size * heads_kv *
 * head_dim, head_dim, page_size * head_dim}.
 *
 * q and out are [batch, heads, head_dim] bf16, contiguous; lse is [batch,
 * heads] f32, the natural log of each softmax's sum (for merging with
 * other attention over other keys). Query head h reads KV head
 * h / (heads / heads_kv) (grouped-query attention, up to
 * TILE_PAGED_MAX_GROUP query heads per KV head).
 *
 * The cache holds bf16, or fp8 e4m3 with per-head scales: kv_scale is f32
 * [heads_kv, 2], key and value scale of each KV head (a stored value
 * times its scale is the value attended to); or int4: bytes holding two
 * values each (dimension d in the low nibble of byte d / 2 when d is even,
 * the high one when odd, as value / scale + 8), strides in bytes (NHD's
 * default: head_dim / 2 per head), and k_scales, v_scales f32 holding one
 * scale per TILE_PAGED_INT4_GROUP values, laid out as the cache with every
 * TILE_PAGED_INT4_GROUP / 2 bytes replaced by one scale.
 *
 * Split-KV: when batch * heads_kv programs cannot fill the GPU, each
 * sequence's keys are split into plan.splits chunks, each program writes
 * a partial output and log-sum-exp to the workspace, and a second kernel
 * merges them. The rule (tile_paged_splits): as many splits as bring the
 * programs up to (not past) TILE_PAGED_TARGET_WAVES per SM, no chunk below
 * TILE_PAGED_MIN_CHUNK tokens of max_kv_len, at most TILE_PAGED_MAX_SPLITS.
 * A plan is only numbers: tile_paged_decode with the same plan and
 * buffers launches the same kernels with the same arguments, so it can be
 * captured in a CUDA graph for a fixed batch shape.
 *
 * Calls are asynchronous on the stream (NULL: the default stream). Every
 * function returns a tile_status; a wrong problem or buffer is
 * TILE_ERROR_INVALID_ARGUMENT with tile_last_error() naming the field. */
#ifndef TILE_PAGED_H
#define TILE_PAGED_H

#include <stddef.h>
#include <stdint.h>

#include "tile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Query heads per KV head that one program takes (the kernels' GROUP_PAD). */
#define TILE_PAGED_MAX_GROUP 16
/* The merge kernel's MAX_SPLITS. */
#define TILE_PAGED_MAX_SPLITS 64
/* Programs per SM the split rule aims at (the pipelined decode keeps four
 * resident: at batch 1 on the H200, 8 KV heads split 64 ways read 2.97 TB/s
 * against 2.47 at 33; 32 heads split 16 ways 3.83 against 2.69 at 9). */
#define TILE_PAGED_TARGET_WAVES 4
/* The fewest tokens a split takes (eight 64-token blocks). */
#define TILE_PAGED_MIN_CHUNK 512

typedef struct tile_paged tile_paged;

typedef enum tile_paged_kv_type {
  TILE_PAGED_KV_BF16 = 0,
  TILE_PAGED_KV_E4M3 = 1, /* with per-head scales (kv_scale) */
  TILE_PAGED_KV_INT4 = 2, /* two 4-bit values a byte, a scale per TILE_PAGED_INT4_GROUP values (k_scales, v_scales) */
} tile_paged_kv_type;

/* Values per scale of an int4 cache (the kernels' INT4_GROUP). */
#define TILE_PAGED_INT4_GROUP 32

typedef struct tile_paged_problem {
  int batch, heads, heads_kv;
  int head_dim;  /* 64 or 128 */
  int page_size; /* 1, 16, 32 or 64 */
  tile_paged_kv_type kv_type;
  int max_kv_len;     /* the longest sequence of the batch (for the split rule) */
  float sm_scale;     /* positive; 0: 1 / sqrt(head_dim) */
  int64_t strides[3]; /* page, slot, KV head, in elements; all 0: NHD */
  /* prefill only: */
  int max_q_len; /* the most query tokens of a sequence */
  int causal;    /* nonzero: each query sees the keys up to its own position */
} tile_paged_problem;

typedef struct tile_paged_plan {
  tile_paged_problem p; /* with sm_scale and strides filled in */
  int splits;           /* 1: no merge */
  size_t workspace_bytes;
  int variant; /* the kernels picked */
} tile_paged_plan;

typedef struct tile_paged_buffers {
  uint64_t out, lse, q;
  uint64_t k_cache, v_cache;
  uint64_t kv_scale; /* e4m3 only */
  uint64_t page_ids, indptr, kv_len;
  uint64_t workspace; /* plan.workspace_bytes (none with one split) */
  uint64_t k_scales, v_scales; /* int4 only */
  uint64_t qo_indptr;          /* prefill only */
} tile_paged_buffers;

/* Loads the kernels on rt's device. */
tile_status tile_paged_create(tile_runtime *rt, tile_paged **out);
/* Unloads them. NULL is allowed. */
void tile_paged_destroy(tile_paged *pg);

/* The split rule: splits for batch * heads_kv programs over sequences of
 * up to max_kv_len tokens on a GPU of sm_count SMs (1 or more). */
int tile_paged_splits(int batch, int heads_kv, int max_kv_len, int sm_count);

/* Checks the problem and picks kernels and splits. */
tile_status tile_paged_decode_plan(const tile_paged *pg, const tile_paged_problem *p, tile_paged_plan *plan);

/* out and lse for one query token per sequence. */
tile_status tile_paged_decode(const tile_paged *pg, const tile_paged_plan *plan, const tile_paged_buffers *buf,
                              tile_stream *stream);

/* Prefill / append attention: sequence b has qo_indptr[b + 1] -
 * qo_indptr[b] query tokens (qo_indptr: batch + 1 i32 in device memory,
 * starting at 0), rows qo_indptr[b] .. of q and out ([total_q, heads,
 * head_dim] bf16, contiguous), at the last positions of its kv_len[b]
 * cached tokens (kv_len[b] at least the query count: append the new
 * tokens' keys and values first). With p->causal a query sees the keys up
 * to its own position, else all of its sequence's. lse is [total_q,
 * heads] f32, natural log. Query heads of a KV head are computed together
 * (each key and value read once per block of query rows). The plan checks
 * the problem (max_q_len at least 1); no workspace. */
tile_status tile_paged_prefill_plan(const tile_paged *pg, const tile_paged_problem *p, tile_paged_plan *plan);
tile_status tile_paged_prefill(const tile_paged *pg, const tile_paged_plan *plan, const tile_paged_buffers *buf,
                               tile_stream *stream);

/* Appends tokens to the cache: token i of k_new and v_new
 * ([new_tokens, heads_kv, head_dim] bf16, contiguous) goes to sequence
 * batch_idx[i] at position pos[i] (i32 device arrays), every KV head;
 * its page must already be listed in page_ids. An e4m3 cache is
 * quantized with the per-head scales kv_scale (stored = value / scale,
 * clamped to 448); kv_scale is not read for bf16 (0 allowed); an int4
 * cache is not appended to here. The problem
 * gives kv_type, head dim, page size, heads_kv and strides. */
tile_status tile_paged_append(const tile_paged *pg, const tile_paged_problem *p, uint64_t k_cache, uint64_t v_cache,
                              uint64_t k_new, uint64_t v_new, uint64_t batch_idx, uint64_t pos, uint64_t page_ids,
                              uint64_t indptr, uint64_t kv_scale, int new_tokens, tile_stream *stream);

/* Copies pages src[j] to dst[j] (i32 device arrays, j < n_pages) in both
 * caches (prefix sharing, beam search); destinations distinct and never a
 * source. A page is strides[0] elements (NHD's default when 0). */
tile_status tile_paged_copy_pages(const tile_paged *pg, const tile_paged_problem *p, uint64_t k_cache,
                                  uint64_t v_cache, uint64_t src, uint64_t dst, int n_pages, tile_stream *stream);

/* Swaps pages a[j] and b[j] in both caches; no page twice in a and b. */
tile_status tile_paged_swap_pages(const tile_paged *pg, const tile_paged_problem *p, uint64_t k_cache,
                                  uint64_t v_cache, uint64_t a, uint64_t b, int n_pages, tile_stream *stream);

#ifdef __cplusplus
}
#endif

#endif
