/* prepare.c - from a kernel's tile IR to what the lowering consumes:
 *
 *   warp roles        schedule_ws.c       @warps, @warp_specialize: who computes
 *   copy of the tile IR                   (the compilation's IR stays as is)
 *     | axis analysis                     alignment facts for the scheduler
 *     | schedule_func     schedule*.c     GPU operations: buffers, TMA,
 *     |                                   cp.async rings, wgmma, barriers
 *     | ir_verify_lowered                 a malformed schedule is a message
 *     | axis analysis, layouts_assign     on the lowered IR; no tile may
 *     |                                   need more registers than a thread has
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
#include <stdio.h>

#include "lower.h"
#include "smem_alloc.h"

/* Registers a thread has on sm_90 (ptxas's ceiling). One tile value whose
 * share of a thread is larger cannot be compiled without spilling every
 * element; ptxas would also take minutes to find that out. */
#define THREAD_MAX_REGISTERS 255

typedef struct Budget {
  const GpuKernel *k;
  Diags *diags;
  bool ok;
  bool flexible; /* this round checks flexible values (index arithmetic) */
} Budget;

static int registers_of(const Layout *l, TType t) {
  int words = (scalar_bits((ScalarKind)t.kind) + 31) / 32;
  return layout_regs(l) * (words < 1 ? 1 : words);
}

static void check_value(Budget *b, const Op *op, const Value *v) {
  if (v->type.rank == 0 || type_is_buffer(v->type) || !b->ok) return;
  LayoutInfo *info = layouts_get(b->k->layouts, v);
  if (!info || b->flexible == (info->fixed != NULL)) return;
  int n = info->fixed ? 1 : info->nwanted;
  /* With @warp_specialize the tiles live in the consumer warps, which
   * have consumer_registers each. */
  const WarpRoles *r = &b->k->roles;
  int limit = r->producers && r->consumer_registers < THREAD_MAX_REGISTERS ? r->consumer_registers
                                                                           : THREAD_MAX_REGISTERS;
  for (int i = 0; i < n; i++) {
    const Layout *l = info->fixed ? info->fixed : info->wanted[i];
    int regs = registers_of(l, v->type);
    if (regs <= limit) continue;
    char ty[96];
    type_str(v->type, ty, sizeof ty);
    if (r->producers)
      diag_error(b->diags, op->loc,
                 "GPU back end: the tile %s needs %d registers per thread on %d consumer warps (a consumer thread has "
                 "%d: @warp_specialize's consumer_registers): use more consumers or smaller tiles",
                 ty, regs, b->k->num_warps, limit);
    else
      diag_error(b->diags, op->loc,
                 "GPU back end: the tile %s needs %d registers per thread with %d warp%s (a thread has at most %d): "
                 "use more warps (@warps) or smaller tiles",
                 ty, regs, b->k->num_warps, b->k->num_warps == 1 ? "" : "s", THREAD_MAX_REGISTERS);
    b->ok = false;
    return;
  }
}

static void check_block(Budget *b, const Block *blk) {
  for (const Op *op = blk->first; op && b->ok; op = op->next) {
    for (uint32_t i = 0; i < op->nresults; i++) check_value(b, op, &op->results[i]);
    for (int r = 0; r < op->nregions; r++) check_block(b, &op->regions[r]);
  }
}

bool gpu_prepare(const Func *f, Arena *a, Diags *diags, bool hints, bool pair_products, GpuKernel *out) {
  if (!sched_warp_roles(f, diags, &out->roles)) return false;
  out->num_warps = out->roles.compute_warps;
  out->f = ir_clone_func(a, f);
  AxisAnalysis *before = axis_analyze(out->f, a);
  if (!schedule_func(out->f, &out->roles, before, a, diags, pair_products, &out->sched)) return false;
  if (!ir_verify_lowered(out->f, diags)) return false;
  out->axes = axis_analyze(out->f, a);
  out->layouts = layouts_assign(out->f, out->num_warps, out->axes, hints, a);
  /* Values with a layout of their own (loads, dots, what is computed from
   * them): a thread holds all their registers at once. Flexible values
   * (index arithmetic, pointer tiles) are computed element by element
   * where they are used and folded into addresses, so their size is no
   * register count. */
  Budget b = {out, diags, true, false};
  check_block(&b, &out->f->body);
  if (!b.ok) return false;
  out->plan = smem_plan(out->f, a);
  return true;
}
