/* lower_internal.h - state shared by the lowering files: lower.c (kernel,
 * control flow, value bookkeeping), lower_elem.c (elementwise ops, casts,
 * constants, shapes), lower_mem.c (loads, stores, atomics), lower_smem.c
 * (layout conversions, reductions, dot on FMA units), lower_mma.c (dot on
 * mma.sync), lower_shared.c (buffers, cp.async, fences, barriers),
 * lower_wgmma.c (wgmma) and lower_tma.c (mbarriers, TMA). */
#ifndef TILE_LOWER_INTERNAL_H
#define TILE_LOWER_INTERNAL_H

#include "../layout/exchange.h"
#include "../layout/smem.h"
#include "../util/ptrmap.h"
#include "lower.h"
#include "smem_alloc.h"

/* shfl.sync operands: every lane takes part; the clamp of a full warp. */
#define FULL_WARP_MASK 0xffffffffu
#define SHFL_CLAMP 0x1f
/* Operands of one inline-asm statement: a wgmma of n256 has 128 tied
 * accumulators, 128 outputs and its two descriptors. */
#define LOWER_MAX_ASM_ARGS 160

/* Tensor-descriptor parameters of one kernel (each 128 bytes of the
 * 4 KiB parameter space). */
#define LOWER_MAX_TENSOR_PARAMS 16

/* A layout conversion made in the current region, reusable until the
 * region ends (cached so a value converted once is not converted again). */
typedef struct ConvEntry {
  const Value *value;
  const Layout *layout;
  LTile *tile;
} ConvEntry;

/* Per-layout values computed once in the kernel's entry block. */
typedef struct ThreadInfo {
  const Layout *layout;
  LLVMValueRef flat;    /* this thread's part of the flat index (i32) */
  LLVMValueRef owner;   /* i1: this thread is the first of its replicas */
} ThreadInfo;

/* A shared-memory buffer (or view) in the lowering: its address and the
 * layout of the tile it holds. */
typedef struct LBuf {
  LLVMValueRef ptr; /* ptr addrspace(3) */
  SmemLayout layout;
  /* each thread's part of the offsets is computed where it is used, not
   * once in the entry block (scratch layouts used once) */
  bool here;
} LBuf;

/* Which warps the code being lowered runs on (warp_split). */
typedef enum LowerRole { ROLE_NONE, ROLE_PRODUCER, ROLE_CONSUMER } LowerRole;

/* Named barrier ids: 0 is the whole block (bar.sync 0); the consumer
 * warpgroups of a split kernel synchronize on 1; ping-pong consumer
 * warpgroup i on 2 + i (at most 8 consumers: ids up to 9 of 16). */
#define BARRIER_CONSUMERS 1
#define BARRIER_PINGPONG_FIRST 2
/* The turn of cooperative consumer warpgroup i (wait_turn) is barrier
 * 2 + i: ping-pong consumers, which use those ids, take no turns. */
#define BARRIER_TURN_FIRST BARRIER_PINGPONG_FIRST
/* Warpgroup w of the block has barrier 10 + w of its own: it votes there
 * (a rescale whose wgmma wait sits in its branch: lower_elem.c) and
 * orders the staging of its products' A operands (lower.c); ids 10 to 15
 * serve blocks of at most 6 warpgroups, and larger ones do without. */
#define BARRIER_VOTE_FIRST 10
#define BARRIER_VOTE_WARPGROUPS 6
/* The register file of an SM, ptxas's per-thread ceiling, and the granule
 * of register counts (setmaxnreg, the allocation unit). */
#define SM_REGISTERS 65536
#define THREAD_REGISTERS 255
#define WS_REG_GRANULE 8

typedef struct Lower {
  const Func *f;
  const GpuKernel *k;
  const GpuOptions *opt;
  const Op *cur_op; /* the op being lowered (scratch placement) */
  Diags *diags;
  Arena arena;
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;       /* where code goes */
  LLVMBuilderRef entry_b; /* end of the entry block (thread constants) */
  LLVMValueRef fn;
  LLVMBasicBlockRef entry_bb, body_bb;
  LayoutMap *layouts;
  AxisAnalysis *axes;
  int num_warps;
  LLVMValueRef tid, lane, warp; /* numbered among the threads that compute */
  LLVMValueRef tid_raw;         /* tid.x */
  LowerRole role;
  const Op *turn_held; /* the wait_turn whose turn the code being lowered holds */
  LLVMValueRef smem;
  PtrMap fixed;     /* Value* -> LTile* */
  PtrMap flexible;  /* Value* -> FlexTiles* */
  PtrMap uses;      /* Value* -> (uintptr_t) use count */
  ConvEntry *conv;
  int nconv, capconv;
  ThreadInfo *threads;
  int nthreads, capthreads;
  PtrMap bufs;      /* Value* (smem) -> LBuf* */
  PtrMap trackers;  /* mbar_alloc Op* -> alloca i32: phases waited for, a bit per barrier */
  PtrMap deferred_waits; /* wgmma_wait result Value* -> its Op*, emitted by its use (lower_elem.c) */
  bool mbar_inits;  /* barriers initialized and not yet made visible */
  bool failed;
  /* LLVM types */
  LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_f16, t_bf16, t_f32, t_f64, t_ptr, t_sptr;
} Lower;

/* Flexible values: one tile per layout. */
typedef struct FlexTiles {
  LTile **tiles;
  int n, cap;
} FlexTiles;

/* ---- lower.c ---- */
LTile *lt_new(Lower *L, const Layout *layout);
/* A new tile holding the same registers (to be replaced, e.g. by a wait). */
LTile *lt_copy(Lower *L, const LTile *t);
LLVMTypeRef llvm_elem_type(Lower *L, ScalarKind k);
/* The type elements have in memory (i1 is a byte). */
LLVMTypeRef llvm_mem_type(Lower *L, ScalarKind k);
/* v in layout `want` (converting or materializing as needed). */
LTile *get_tile(Lower *L, const Value *v, const Layout *want);
/* v in its own layout (fixed values; the scalar layout for rank 0). */
LTile *get_fixed(Lower *L, const Value *v);
void set_tile(Lower *L, const Value *v, LTile *t);
/* The layout a result is lowered in: its fixed layout, else the canonical one. */
const Layout *layout_of_result(Lower *L, const Value *v);
ThreadInfo *thread_info(Lower *L, const Layout *l);
/* Flat index (i32) of register r of this thread in layout l. */
LLVMValueRef flat_index(Lower *L, const Layout *l, uint32_t r);
/* Coordinate along `dim` of a flat index value. */
LLVMValueRef coord_of(Lower *L, const Layout *l, LLVMValueRef flat, int dim);
LLVMValueRef const_i32(Lower *L, int64_t v);
LLVMValueRef const_int(Lower *L, LLVMTypeRef t, int64_t v);
LLVMValueRef call_intrinsic(Lower *L, const char *name, LLVMTypeRef ret, LLVMValueRef *args, int nargs);
void barrier(Lower *L);
LLVMBasicBlockRef new_block(Lower *L, const char *name);
void lower_error(Lower *L, const Op *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int use_count(Lower *L, const Value *v);
/* Scratch shared memory for one use while lowering the current op (uses
 * never overlap in time: each begins with a barrier); returns its offset. */
unsigned smem_need(Lower *L, unsigned bytes);
/* ptr addrspace(3) to byte `offset` of the block's shared memory. */
LLVMValueRef smem_ptr(Lower *L, LLVMValueRef offset);
/* Inline PTX. `side_effects`: kept in place and in order. */
LLVMValueRef llvm_asm(Lower *L, const char *text, const char *constraints, LLVMTypeRef ret, LLVMValueRef *args, int nargs,
                      bool side_effects);
/* Marks a call (an inline asm of a warp-collective instruction) as
 * convergent: it may not be moved into code that only some threads run. */
void mark_convergent(Lower *L, LLVMValueRef call);
/* The thread that issues TMA copies and other one-thread work: tid 0. */
LLVMValueRef is_elected(Lower *L);
/* The warpgroup of thread number `tid` (tid_raw: of the block; tid: among
 * the threads that compute). */
LLVMValueRef warpgroup_of(Lower *L, LLVMValueRef tid);
/* The named barrier of the thread's own warpgroup (BARRIER_VOTE_FIRST +
 * warpgroup of the block), and whether the block's warpgroups all have
 * one. */
LLVMValueRef warpgroup_barrier_id(Lower *L);
bool warpgroup_barriers_fit(Lower *L);
/* barrier.cluster arrive + wait: every thread of every program of the
 * cluster (lower_tma.c). */
void lower_cluster_barrier(Lower *L);

/* ---- lower_debug.c ---- */
/* vprintf(fmt, {vals}) from the current thread; the values' own types
 * (i32, i64, double) make the argument buffer. */
void lower_vprintf(Lower *L, const char *fmt, LLVMValueRef *vals, int n);
void lower_device_debug(Lower *L, const Op *op);
/* Runs the code the callback emits only where pred holds. */
typedef void (*GuardedFn)(Lower *L, void *ctx);
void guarded(Lower *L, LLVMValueRef pred, GuardedFn fn, void *ctx);

/* ---- lower_elem.c ---- */
/* Computes op's (single) result in layout `l` from operands in matching
 * layouts: elementwise ops, casts, constants, arange, shape ops. */
LTile *lower_value_op(Lower *L, const Op *op, const Layout *l);
LLVMValueRef cast_scalar(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to);
/* A binary elementwise op (add .. min) on two scalars of kind k. */
LLVMValueRef lower_binary_scalar(Lower *L, OpKind kind, LLVMValueRef a, LLVMValueRef b, ScalarKind k);
/* A 16-bit or fp8 float as f32 (other values as they are). */
LLVMValueRef lower_widen_float(Lower *L, LLVMValueRef v, ScalarKind k);
bool is_unsigned_kind(ScalarKind k);

/* ---- lower_mem.c ---- */
LTile *lower_load(Lower *L, const Op *op, const Layout *l);
void lower_store(Lower *L, const Op *op);
LTile *lower_atomic(Lower *L, const Op *op, const Layout *l);

/* ---- lower_smem.c ---- */
LTile *convert_tile(Lower *L, const LTile *src, const Layout *dst, ScalarKind k);
LTile *lower_reduce(Lower *L, const Op *op, const Layout *l);
LTile *lower_cumsum(Lower *L, const Op *op, const Layout *l);
/* dot on FMA units (or mma.sync: lower_mma.c) */
LTile *lower_dot(Lower *L, const Op *op, const Layout *l);

/* ---- lower_mma.c ---- */
LTile *lower_mma_dot(Lower *L, const Op *op, const Layout *l);

/* ---- lower_shared.c ---- */
/* The buffer a smem value denotes. */
LBuf *get_buf(Lower *L, const Value *v);
void lower_smem_alloc(Lower *L, const Op *op);
void lower_smem_index(Lower *L, const Op *op);
void lower_smem_store(Lower *L, const Op *op);
LTile *lower_smem_load(Lower *L, const Op *op, const Layout *l);
/* A register tile written to / read from a shared tile (vectors of up to
 * 16 bytes; ldmatrix where the layout allows). */
void lower_write_smem(Lower *L, const LBuf *b, const LTile *t, ScalarKind k);
LTile *lower_read_smem(Lower *L, const LBuf *b, const Layout *l, ScalarKind k);
void lower_async_copy(Lower *L, const Op *op);
void lower_async_commit(Lower *L);
void lower_async_wait(Lower *L, const Op *op);
void lower_fence_async(Lower *L);
void lower_fence(Lower *L);
void lower_turn(Lower *L, const Op *op);
/* 32-bit shared address of a buffer pointer (for PTX operands). */
LLVMValueRef smem_addr32(Lower *L, LLVMValueRef ptr);

/* ---- lower_elem.c ---- */
/* Whether `op` (an elementwise op) is a dot accumulator's rescale that
 * lower_elementwise may skip, and whether every use of its result is such
 * an accumulator in the ops after it (then its operand may still be in
 * flight where the rescale is skipped). */
bool is_skippable_rescale(Lower *L, const Op *op, bool *only_dots);

/* ---- lower_wgmma.c ---- */
LTile *lower_wgmma(Lower *L, const Op *op, const Layout *l);
void lower_wgmma_wait(Lower *L, const Op *op);
/* The wait of a wgmma_wait op, tied through the registers of `t` in place
 * (none: t NULL). */
void emit_wgmma_wait(Lower *L, const Op *op, LTile *t);
void tie_through(Lower *L, const char *text, LLVMValueRef *regs, int n);
/* Passes registers through an empty asm, so that LLVM cannot see (and
 * rematerialize) their values: an accumulator set to zeros before a loop
 * stays in its registers instead of being set again on every path. */
void opaque_regs(Lower *L, LLVMValueRef *regs, int n);

/* ---- lower_tma.c ---- */
void lower_mbar_alloc(Lower *L, const Op *op);
/* After the last allocation: makes the barriers' initialization visible. */
void lower_mbar_init_done(Lower *L);
void lower_mbar_expect(Lower *L, const Op *op);
void lower_mbar_arrive(Lower *L, const Op *op);
void lower_mbar_wait(Lower *L, const Op *op);
void lower_tma_load(Lower *L, const Op *op);
void lower_tma_store(Lower *L, const Op *op);
void lower_tma_store_wait(Lower *L, const Op *op);
/* This thread's position in a ring (ring_next). */
LTile *lower_ring_next(Lower *L, const Op *op, const Layout *l);

/* ---- lower.c: warp specialization ---- */
void lower_warp_split(Lower *L, const Op *op);

#endif
