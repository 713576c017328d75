/* layer.h - what the MLP and MoE layers of libtile_mlp share (layer.c):
 * loading an embedded kernel, the persistent grid, and the checks of the
 * sizes, the activation and the pointers every layer call makes. */
#ifndef TILE_MLP_LAYER_H
#define TILE_MLP_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "tile_mlp.h"

/* A header's module loader (tilec --emit=header --embed). */
typedef tile_status (*LayerLoadFn)(tile_runtime *, tile_module **);

/* TMA descriptors need 16-byte rows: d_model and d_ff bf16 elements are
 * multiples of 8; tensors 16-byte aligned. */
#define LAYER_DIM_MULTIPLE 8
#define LAYER_PTR_ALIGN 16
/* Activations built in (mlp.tile's and moe.tile's ACT). */
#define LAYER_ACTS 3
/* The element size of the bf16 tensors. */
#define LAYER_ELEM_BYTES 2

/* Loads the module and gets its kernel `name`. */
tile_status layer_load(tile_runtime *rt, LayerLoadFn fn, const char *name, tile_module **mod, tile_kernel **k);

/* The persistent kernels' grid: one program per SM (1 if unknown). */
uint32_t layer_sms(tile_runtime *rt);

/* tokens, d_model, d_ff at least 1, the two dims multiples of 8, act one
 * of the activations; the message names the function `fn`. */
tile_status layer_check(const char *fn, int tokens, int d_model, int d_ff, tile_mlp_activation act);

/* A pointer: not 0 (unless may_be_zero) and aligned to `align` bytes. */
tile_status layer_check_ptr(const char *fn, const char *name, uint64_t ptr, uint64_t align, bool may_be_zero);

/* fp8 (e4m3) rows are one byte an element: 16-byte rows for the tensor
 * copies need widths that are multiples of 16. */
#define LAYER_FP8_DIM_MULTIPLE 16
/* Each part of a layer's workspace starts on this boundary (TMA bases are
 * 16-byte aligned; 256 keeps every part on cache lines of its own). */
#define LAYER_SECTION_ALIGN 256
/* Most arguments of a kernel the layers launch (moe_gemm_ws_fp8's 12). */
#define LAYER_MAX_ARGS 12

/* d_model and d_ff multiples of LAYER_FP8_DIM_MULTIPLE (after layer_check). */
tile_status layer_check_fp8(const char *fn, int d_model, int d_ff);

/* bytes rounded up to LAYER_SECTION_ALIGN. */
size_t layer_round_up(size_t bytes);

/* One launch of a layer. */
typedef struct layer_step {
  const tile_kernel *k;
  uint32_t grid[3];
  tile_arg a[LAYER_MAX_ARGS];
  int n;
} layer_step;

/* Launches the steps in order on the stream; a failure's message starts
 * "fn: KERNEL". */
tile_status layer_run(const char *fn, const layer_step *steps, int n, tile_stream *stream);

/* For the tensor-parallel layer (tp.c), which places the down projection
 * itself: tile_mlp_down's launch, unchecked, on `programs` programs (0 or
 * more than the SMs: one per SM), so that SMs are left to a collective
 * running beside it; the rows of mlp_down's tiles (its BLOCK_M); and the
 * programs of the persistent kernels (one per SM). */
tile_status mlp_down_on(tile_mlp *m, const tile_mlp_problem *p, uint64_t y, uint64_t h, uint64_t w_down,
                        uint64_t residual, tile_stream *stream, uint32_t programs);
int mlp_down_block_rows(const tile_mlp *m);
uint32_t mlp_programs(const tile_mlp *m);

#endif
