/* tile_tp.h - the gated MLP of tile_mlp.h split over several GPUs
 * (Megatron-style tensor parallelism), with NCCL (tile_nccl.h).
 *
 * With N ranks and F = d_ff, rank r holds x whole and a slice of each
 * weight: the columns [r F/N, (r + 1) F/N) of w_gate and of w_up, and the
 * same rows of w_down. Rank r computes its slice of the intermediate,
 *
 *   h_r = act(x w_gate_r) * (x w_up_r)          [tokens, F/N]
 *
 * exactly (the activation product is elementwise, so gate and up columns
 * cut the same way give h's columns), then the partial output
 * y_r = h_r w_down_r [+ residual on rank 0 only], and one all-reduce (sum)
 * leaves y = sum over r of y_r = h w_down [+ residual] on every rank.
 *
 * Overlap: with chunks > 1 the down projection runs in chunks of tokens;
 * each chunk's all-reduce runs on a stream of the layer's own while the
 * next chunk is computed. While they overlap, the down projection runs on
 * all but comm_sms SMs, which are left to NCCL's kernels (a GEMM program
 * fills an SM, so a collective started beside a full-width GEMM waits for
 * it). The call returns with the caller's stream ordered after the last
 * all-reduce, so work issued to it next sees y.
 *
 *   tile_tp_mlp *tp;
 *   tile_tp_mlp_create(rts, comms, n, &tp);        (n local ranks)
 *   tile_tp_mlp_rank rk[n] = {{.y = ..., .x = ..., .stream = s[0]}, ...};
 *   tile_tp_mlp_options o = {.chunks = 4, .comm_sms = 16};
 *   tile_tp_mlp_forward(tp, &problem, rk, &o);      (problem.d_ff: the whole F)
 *
 * One thread issues the work of every local rank of this process (all N
 * in one process, from tile_comm_init_all; or one, from
 * tile_comm_init_rank, in each of N processes). A layer of one rank needs
 * no NCCL: created with comms NULL it runs the plain fused MLP (chunks
 * do not apply); created with a communicator of one rank it runs the
 * whole plan, all-reduces and overlap included, on one GPU. All matrices
 * bf16, row-major, contiguous, as tile_mlp_forward's. */
#ifndef TILE_TP_H
#define TILE_TP_H

#include "tile_mlp.h"
#include "tile_nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most chunks a forward cuts the down projection into (each has an event
 * per local rank, made when the layer is created). */
#define TILE_TP_MAX_CHUNKS 16

typedef struct tile_tp_mlp tile_tp_mlp;

/* One local rank's buffers, on that rank's device. */
typedef struct tile_tp_mlp_rank {
  uint64_t y;          /* [tokens, d_model]: the output, the same on every rank */
  uint64_t x;          /* [tokens, d_model]: the input, the same on every rank */
  uint64_t w_gate;     /* [d_model, d_ff / N]: this rank's columns of w_gate */
  uint64_t w_up;       /* [d_model, d_ff / N] */
  uint64_t w_down;     /* [d_ff / N, d_model]: this rank's rows of w_down */
  uint64_t residual;   /* [tokens, d_model] or 0; read on rank 0 only */
  uint64_t workspace;  /* tile_tp_mlp_workspace_bytes(): h_r after the call */
  tile_stream *stream; /* the caller's stream on this device; NULL (the legacy default stream) only with chunks 1 */
} tile_tp_mlp_rank;

typedef struct tile_tp_mlp_options {
  int chunks;   /* pieces of the down projection and its all-reduce (1 to TILE_TP_MAX_CHUNKS); 1: no overlap */
  int comm_sms; /* SMs the down projection leaves to NCCL while chunks overlap (0 to SMs - 1) */
} tile_tp_mlp_options;

/* The default options: 4 chunks, 16 SMs left to NCCL (to be tuned by
 * measurement; the example program times others). */
#define TILE_TP_DEFAULT_CHUNKS 4
#define TILE_TP_DEFAULT_COMM_SMS 16

/* A layer over this process's local ranks: rts[i] is local rank i's
 * runtime and comms[i] its communicator (on rts[i]); every communicator
 * of one job of comm size N. comms NULL: a layer of one rank (local_ranks
 * 1), which runs the plain fused MLP. Loads the MLP kernels on each
 * device and makes a stream and events per device. */
tile_status tile_tp_mlp_create(tile_runtime *const *rts, tile_comm *const *comms, int local_ranks, tile_tp_mlp **out);
void tile_tp_mlp_destroy(tile_tp_mlp *tp); /* NULL is allowed */

/* N, the ranks the layer is split over (the communicators' size). */
int tile_tp_mlp_ranks(const tile_tp_mlp *tp);

/* Bytes of each rank's workspace for the whole problem p (d_ff the whole
 * width): tokens * d_ff / N bf16 values; 0 for an invalid problem or a
 * d_ff that does not split into N slices of a multiple of 8. */
size_t tile_tp_mlp_workspace_bytes(const tile_tp_mlp *tp, const tile_mlp_problem *p);

/* The layer over every local rank: ranks[i] for local rank i. opt NULL:
 * the defaults. Asynchronous on each rank's stream. */
tile_status tile_tp_mlp_forward(tile_tp_mlp *tp, const tile_mlp_problem *p, const tile_tp_mlp_rank *ranks,
                                const tile_tp_mlp_options *opt);

#ifdef __cplusplus
}
#endif

#endif
