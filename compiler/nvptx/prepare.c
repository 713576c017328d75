/* prepare.c - from a kernel's tile IR to what the lowering consumes:
 *
 *   copy of the tile IR                   (the compilation's IR stays as is)
 *     | axis analysis                     alignment facts for the scheduler
 *     | schedule_func     schedule*.c     GPU operations: buffers, TMA,
 *     |                                   cp.async rings, wgmma, barriers
 *     | ir_verify_lowered                 a malformed schedule is a message
 *     | axis analysis, layouts_assign     on the lowered IR
 *     | smem_plan         smem_alloc.c    buffer offsets by live range
 *     v
 *   GpuKernel  (--emit=lowered prints its IR and layouts)
 *
 * The scheduler runs before layouts are assigned so that every value it
 * creates (ring reads, wgmma results) gets its layout from the same
 * forward pass as the rest; what it needs to decide (which unit runs a
 * dot, which loads can be copied asynchronously) depends only on types,
 * shapes, the warp count and the alignment facts.
 */
#include "lower.h"
#include "smem_alloc.h"

bool gpu_prepare(const Func *f, Arena *a, Diags *diags, GpuKernel *out) {
  out->num_warps = lower_num_warps(f);
  out->f = ir_clone_func(a, f);
  AxisAnalysis *before = axis_analyze(out->f, a);
  if (!schedule_func(out->f, out->num_warps, before, a, diags, &out->sched)) return false;
  if (!ir_verify_lowered(out->f, diags)) return false;
  out->axes = axis_analyze(out->f, a);
  out->layouts = layouts_assign(out->f, out->num_warps, out->axes, a);
  out->plan = smem_plan(out->f, a);
  return true;
}
