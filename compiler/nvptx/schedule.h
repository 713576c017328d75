/* schedule.h - the GPU back end's scheduling pass: tile IR to lowered IR.
 *
 * After this pass a kernel says, in IR, everything that happens in shared
 * memory and asynchronously (the GPU operations of ir.h): which buffers
 * exist, which copies fill them (TMA, cp.async or plain stores), which
 * mbarriers and barriers order them, and where tensor-core products are
 * issued and waited for. Layout assignment (assign.c) and the allocator
 * (smem_alloc.c) run on the result; the lowering (lower*.c) turns each
 * operation into PTX. `--emit=lowered` prints it.
 *
 *   dot with bf16/f16/fp8 operands   wgmma when the warps form warpgroups
 *                                    and M is a multiple of 64; mma.sync
 *                                    for smaller tiles; FMA otherwise
 *   wgmma operands                   buffers: filled by TMA (load_block),
 *                                    cp.async (pipelined loads) or stores
 *                                    of registers; A may stay in registers
 *   load_block / store_block         TMA copies through a buffer
 *   @pipeline(stages = N) loops      rings of N buffers (schedule_pipeline.c)
 *   @warp_specialize                 producer warpgroups issue the rings'
 *                                    TMA copies, consumers do the rest
 *                                    (schedule_ws.c)
 */
#ifndef TILE_SCHEDULE_H
#define TILE_SCHEDULE_H

#include "../analysis/axisinfo.h"
#include "../ir/ir.h"

typedef enum DotEngine { DOT_FMA, DOT_MMA, DOT_WGMMA } DotEngine;

/* Which unit computes a dot (rank-2) with this many warps. */
DotEngine dot_engine(const Op *dot, int num_warps);

/* Accumulator registers per thread a wgmma dot may use: ptxas has 255 per
 * thread, and addresses, loop state and the epilogue need the rest. */
#define WGMMA_MAX_ACC_REGS 192

/* What the lowering and the metadata need to know about a tensor
 * descriptor parameter: the box one TMA copy moves (in the language's
 * dimension order) and its swizzle. */
typedef struct DescBox {
  bool used;
  int rank;
  int32_t box[TILE_MAX_RANK];
  int swizzle;
  int elem_bytes;
} DescBox;

/* How a kernel's warps divide (schedule_ws.c). Without
 * @warp_specialize every warp computes: producers = consumers = 0 and
 * compute_warps = block_warps. */
typedef struct WarpRoles {
  int producers, consumers; /* warpgroups */
  int producer_registers, consumer_registers;
  int block_warps;   /* warps per block (the launch) */
  int compute_warps; /* warps the tile layouts cover: 4 x consumers (4 for ping-pong) */
  bool kernel_level; /* on the kernel: every pipelined TMA loop gets producers */
  bool pingpong;     /* on a tile loop: consumer warpgroups take its iterations in turn */
} WarpRoles;

/* Warps per warpgroup (wgmma, setmaxnreg). */
#define WARPGROUP_WARPS 4

/* The split of f's warps, from its @warps and @warp_specialize (kernel or
 * loop level); false after a diagnostic when they cannot be honoured. */
bool sched_warp_roles(const Func *f, Diags *diags, WarpRoles *out);

typedef struct ScheduleResult {
  DescBox *descs; /* one per kernel parameter (unused ones have used = false) */
  int nparams;
} ScheduleResult;

/* Rewrites f (the back end's own copy of a verified kernel) into lowered
 * IR for the warps of `roles` (tile code for roles->compute_warps). `axes` is the alignment analysis of f before
 * the rewrite. Problems (an unsupported combination, a budget) become
 * diagnostics at the op; returns false then. `pair_products`: two wgmma
 * products over one A tile may become one instruction (schedule_pair.c). */
bool schedule_func(Func *f, const WarpRoles *roles, const AxisAnalysis *axes, Arena *a, Diags *diags,
                   bool pair_products, ScheduleResult *out);

#endif
