/* lower.h - internals of the NVPTX back end: tile IR with layouts to
 * per-thread LLVM IR (lower*.c), and the LLVM target steps (target.c).
 *
 * Every tile value becomes, in each thread, an array of LLVM scalars: one
 * per register of its layout. Elementwise ops work register by register;
 * loads and stores group consecutive registers into vector accesses;
 * reductions combine registers, then lanes (warp shuffles), then warps
 * (shared memory); layout conversions and dot operands go through shared
 * memory. Values whose layout is free to choose (constants, arange, and
 * what is computed from them: "flexible" values, see assign.c) are
 * materialized once per layout their users need.
 */
#ifndef TILE_LOWER_H
#define TILE_LOWER_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "../analysis/axisinfo.h"
#include "../layout/layout.h"
#include "../util/strmap.h"
#include "schedule.h"

/* ---- layout assignment (assign.c) ---- */

/* Layouts of one kernel's values. A value is either fixed (one layout) or
 * flexible (computed once per requested layout). Rank-0 values are fixed
 * with the scalar layout. */
typedef struct LayoutInfo {
  const Layout *fixed;     /* NULL for a flexible value */
  const Layout **wanted;   /* flexible: layouts users need, distinct */
  int nwanted, capwanted;
} LayoutInfo;

typedef struct LayoutMap LayoutMap;

/* Decides layouts for every value of f for `num_warps` warps. */
/* hints: the second round for 1-D loads spread over 2-D users (assign.c);
 * off in the retry of a kernel that spilled. */
LayoutMap *layouts_assign(const Func *f, int num_warps, const AxisAnalysis *axes, bool hints, Arena *arena);
LayoutInfo *layouts_get(const LayoutMap *m, const Value *v);
/* The layout every tile of this shape uses unless something else decides
 * (loads, dot results, conversions' targets). */
const Layout *layouts_canonical(LayoutMap *m, int rank, const int32_t *shape);
/* The layout a store (or another op with no result) works in. */
const Layout *layouts_of_store(LayoutMap *m, const Op *op);
/* Prints "value: layout" lines (for --emit=lowered). */
void layouts_print(const LayoutMap *m, const Func *f, StrBuf *out);

/* ---- lowering ---- */

/* A tile in one thread: its layout and one LLVM value per register. */
typedef struct LTile {
  const Layout *layout;
  int nregs;
  LLVMValueRef *regs;
} LTile;

typedef struct LowerResult {
  LLVMModuleRef module;
  unsigned shared_bytes; /* dynamic shared memory the kernel needs */
  int num_warps;         /* warps per block */
} LowerResult;

/* Options of the back end (tc_codegen_options). */
typedef struct GpuOptions {
  /* Every mbarrier wait gives up after GPU_DEBUG_WAIT_NS and traps after
   * printing the kernel, barrier, phase and program. */
  bool debug_barriers;
  /* For the test of the mode above: drop the transaction count of every
   * TMA barrier, so that waits never complete. */
  bool break_barriers;
  /* The .tile file, named by a failing device_assert (NULL: none), and
   * every source of the compilation by SrcLoc.file (imports; NULL: only
   * source_name), so that an assert from an imported file names it. */
  const char *source_name;
  const Source *const *files;
  int nfiles;
  /* Layout conversions through shared memory only in scratch layouts
   * whose addresses add a constant per register (no XOR swizzle that
   * costs a register per constant): the retry for a kernel that spilled
   * (layout/exchange.h). */
  bool added_addresses;
  /* mbarrier waits poll without try_wait's suspend-time hint
   * (tc_codegen_options.mbar_poll). */
  bool mbar_poll;
  /* products over one A tile may be paired (not
   * tc_codegen_options.separate_products) */
  bool pair_products;
} GpuOptions;

/* A kernel ready to lower: its lowered IR (a copy of the tile IR, with
 * the GPU operations of schedule.c), the alignment facts and layouts of
 * that IR, and its shared-memory plan. Everything lives in the arena
 * given to gpu_prepare. */
typedef struct SmemPlan SmemPlan;
typedef struct GpuKernel {
  Func *f;
  int num_warps; /* warps the tile layouts cover (roles.compute_warps) */
  WarpRoles roles;
  AxisAnalysis *axes;
  LayoutMap *layouts;
  SmemPlan *plan;
  ScheduleResult sched;
} GpuKernel;

/* schedule, verify, analyze, assign layouts, allocate (prepare.c). */
bool gpu_prepare(const Func *f, Arena *a, Diags *diags, bool hints, bool pair_products, GpuKernel *out);

/* Lowers a prepared kernel into a new module of ctx. On failure reports
 * to diags (e.g. an op the back end does not support yet) and returns
 * false. */
bool lower_func(const GpuKernel *k, LLVMContextRef ctx, Diags *diags, const GpuOptions *opt, LowerResult *out);

/* ---- target (target.c) ---- */

typedef struct Target {
  LLVMTargetMachineRef tm;
  char *triple, *datalayout;
} Target;

/* nvptx64-nvidia-cuda, sm_90a, +ptx80. False (error malloc'd) on failure. */
bool target_create(Target *t, char **error);
void target_destroy(Target *t);
/* Sets triple and data layout, links libdevice when the module calls
 * __nv_* functions, runs default<O3>. */
bool target_optimize(const Target *t, LLVMModuleRef m, char **error);
/* PTX text (malloc'd). */
char *target_emit_ptx(const Target *t, LLVMModuleRef m, char **error);

#endif
