/* schedule_internal.h - what schedule.c (dots, TMA) shares with
 * schedule_pipeline.c (@pipeline rings). */
#ifndef TILE_SCHEDULE_INTERNAL_H
#define TILE_SCHEDULE_INTERNAL_H

#include "../ir/build.h"
#include "schedule.h"

typedef struct Sched {
  Func *f;
  Arena *a;
  Diags *diags;
  int num_warps; /* warps that compute (roles->compute_warps) */
  const AxisAnalysis *axes;
  Op *last_alloc; /* buffers and mbarriers are allocated after this op (NULL: at the top) */
  ScheduleResult *res;
  bool failed;
  const WarpRoles *roles;
  PtrMap producer_ops; /* Op* -> 1: what only the producer warpgroups run */
  int nsplit_loops;    /* loops whose copies the producers issue */
  int multicast_loads; /* copies shared by a cluster (schedule_pipeline.c) */
} Sched;

void sched_error(Sched *s, const Op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Allocations go to the top of the kernel; `loc` is the op they serve
 * (named in budget messages). */
Value *sched_alloc_smem(Sched *s, SrcLoc loc, ScalarKind elem, int rank, const int32_t *shape, int swizzle);
Value *sched_alloc_mbar(Sched *s, SrcLoc loc, int n, int count, int first_parity);
/* A barrier before b's cursor, unless one is already right there. */
void sched_barrier(IrBuilder *b);
void sched_void(IrBuilder *b, OpKind kind, int n, Value *const *ops, int64_t attr0);
/* The operand under a `trans` (and whether there was one). */
Value *sched_strip_trans(Value *v, bool *trans);
/* Whether a dot's A operand is read from registers (it is computed, not
 * loaded: flash attention's P); fp8 A always goes through a buffer. */
bool sched_a_in_registers(const Value *a);
/* The swizzle and box of a descriptor's copies (decided before rewriting). */
const DescBox *sched_desc_box(Sched *s, const Value *desc);
/* Issues the TMA copies of a box-tiled tile at `coords` into `buf`,
 * completing on bars[index] (one thread: the lowering elects it). */
Op *sched_tma_load(IrBuilder *b, Value *buf, Value *desc, Value *bars, Value *index, Value *const *coords, int rank);
/* Replaces a wgmma-engine dot by wgmma + wgmma_wait. An operand that is a
 * read of a buffer (smem_load: a ring stage, a load_block) uses that
 * buffer; others get one here. `pending` is what the wait leaves in
 * flight. Returns the wgmma_wait op. */
Op *sched_wgmma_dot(Sched *s, Op *dot, int pending);

/* schedule_cluster.c: whether `values` (scalars) are the same in every
 * program of the kernel's cluster and op is reached by all of them alike
 * (always true without @cluster). */
bool sched_cluster_uniform(Sched *s, const Op *op, Value *const *values, int n);

/* schedule_pipeline.c: rewrites one @pipeline loop whose body holds wgmma
 * dots fed by loads; false when nothing in it can be pipelined (the loop
 * is left to the plain path). */
bool sched_pipeline_loop(Sched *s, Op *loop);

/* schedule_ws.c: with @warp_specialize, whether the producers issue this
 * pipelined loop's copies (all of them TMA); after every rewrite, the
 * split of the kernel into its producer and consumer regions. */
bool sched_loop_is_split(Sched *s, const Op *loop, bool all_tma);
void sched_split_warps(Sched *s);
/* A for loop with @warp_specialize that encloses pipelined loops. */
bool sched_is_tile_loop(const Op *op);

/* schedule_order.c: barriers between a store and a later load or atomic
 * of the same buffer (another thread may hold the element); returns how
 * many were put in. */
int sched_order_memory(Sched *s);

/* schedule_pingpong.c: in the consumer region of `split`, the consumer
 * warpgroups take the tile loop's iterations in turn. `producer_of` maps
 * the ops of the consumer region's tile loop to their copies in the
 * producer region (and back, for values: `original_of`). */
void sched_pingpong(Sched *s, Op *split, PtrMap *producer_of, PtrMap *original_of);

/* schedule_pair.c: two wgmmas right after each other that share their A
 * operand and read B tiles of the same stage of two rings become one
 * instruction twice as wide (the rings interleaved stage by stage). */
void sched_pair_products(Sched *s);

#endif
