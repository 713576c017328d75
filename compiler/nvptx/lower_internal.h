/* lower_internal.h - state shared by the lowering files: lower.c (kernel,
 * control flow, value bookkeeping), lower_elem.c (elementwise ops, casts,
 * constants, shapes), lower_mem.c (loads, stores, atomics) and
 * lower_smem.c (layout conversions, reductions, dot). */
#ifndef TILE_LOWER_INTERNAL_H
#define TILE_LOWER_INTERNAL_H

#include "../util/ptrmap.h"
#include "lower.h"

/* Shared memory a block may use (H100/H200: 227 KiB with the opt-in). */
#define SMEM_LIMIT_BYTES (227 * 1024)

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

typedef struct Lower {
  const Func *f;
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
  LLVMValueRef tid, lane, warp;
  LLVMValueRef smem;
  unsigned smem_bytes;
  PtrMap fixed;     /* Value* -> LTile* */
  PtrMap flexible;  /* Value* -> FlexTiles* */
  PtrMap uses;      /* Value* -> (uintptr_t) use count */
  ConvEntry *conv;
  int nconv, capconv;
  ThreadInfo *threads;
  int nthreads, capthreads;
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
LLVMTypeRef llvm_elem_type(Lower *L, ScalarKind k);
/* The type elements have in memory (i1 is a byte). */
LLVMTypeRef llvm_mem_type(Lower *L, ScalarKind k);
/* v in layout `want` (converting or materializing as needed). */
LTile *get_tile(Lower *L, const Value *v, const Layout *want);
/* v in its own layout (fixed values; the scalar layout for rank 0). */
LTile *get_fixed(Lower *L, const Value *v);
void set_tile(Lower *L, const Value *v, LTile *t);
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
/* Reserves shared memory bytes for one use (uses never overlap in time:
 * each begins with a barrier). */
void smem_need(Lower *L, unsigned bytes);

/* ---- lower_elem.c ---- */
/* Computes op's (single) result in layout `l` from operands in matching
 * layouts: elementwise ops, casts, constants, arange, shape ops. */
LTile *lower_value_op(Lower *L, const Op *op, const Layout *l);
LLVMValueRef cast_scalar(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to);
/* A binary elementwise op (add .. min) on two scalars of kind k. */
LLVMValueRef lower_binary_scalar(Lower *L, OpKind kind, LLVMValueRef a, LLVMValueRef b, ScalarKind k);
bool is_unsigned_kind(ScalarKind k);

/* ---- lower_mem.c ---- */
LTile *lower_load(Lower *L, const Op *op, const Layout *l);
void lower_store(Lower *L, const Op *op);
LTile *lower_atomic(Lower *L, const Op *op, const Layout *l);

/* ---- lower_smem.c ---- */
LTile *convert_tile(Lower *L, const LTile *src, const Layout *dst, ScalarKind k);
LTile *lower_reduce(Lower *L, const Op *op, const Layout *l);
LTile *lower_dot(Lower *L, const Op *op, const Layout *l);

#endif
