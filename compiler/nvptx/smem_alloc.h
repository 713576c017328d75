/* smem_alloc.h - shared memory of one kernel: buffers placed by live
 * range, scratch for the lowering's transient uses, and the budget.
 *
 * Ops are numbered in program order (pre-order, a loop's body inside its
 * number range; Op.scratch holds the number). A buffer is live from its
 * first use to its last, over every loop that uses it whole (the next
 * iteration reads it again), and, when a wgmma reads it, until the next
 * wgmma_wait that waits for everything. Buffers whose live ranges do not
 * meet may share bytes. mbarriers come first and are never shared (each
 * keeps its phase for the whole kernel). Scratch (layout conversions,
 * reductions across warps) is asked for while lowering an op and goes
 * where no buffer live at that op is; every scratch use starts with a
 * barrier, so scratch uses never meet each other.
 */
#ifndef TILE_SMEM_ALLOC_H
#define TILE_SMEM_ALLOC_H

#include "../ir/ir.h"

/* Shared memory a block may use (H100/H200: 227 KiB with the opt-in). */
#define SMEM_LIMIT_BYTES (227 * 1024)

typedef struct SmemBuf {
  Op *alloc;              /* smem_alloc or mbar_alloc */
  uint32_t offset, bytes;
  uint32_t start, end;    /* live range, in op numbers */
} SmemBuf;

typedef struct SmemPlan {
  Arena *arena;
  SmemBuf *bufs;
  int nbufs;
  uint32_t scratch_base; /* scratch never goes below this (the mbarriers) */
  uint32_t top;          /* bytes used so far: buffers, then scratch too */
  uint32_t peak_at;      /* op number where `top` was reached */
  int peak_buf;          /* the buffer that reached it, or -1 (scratch) */
} SmemPlan;

/* Numbers the ops of f, then places every buffer (writing the offset
 * attribute of its alloc op). */
SmemPlan *smem_plan(Func *f, Arena *a);
/* Offset of `bytes` of scratch usable while lowering the op numbered `at`. */
uint32_t smem_scratch(SmemPlan *p, uint32_t at, uint32_t bytes);
/* Reports an error naming the buffers live where the most is needed, and
 * what to change, when the kernel needs more than SMEM_LIMIT_BYTES. */
bool smem_check_budget(const SmemPlan *p, const Func *f, Diags *diags);

#endif
