/* test_schedule.c - the GPU back end's scheduling pass (nvptx/schedule*.c),
 * its shared-memory allocator (nvptx/smem_alloc.c), the shared-memory
 * budget and the verifier of the lowered IR (ir/verify_gpu.c), without a
 * GPU and without ptxas.
 *
 * A wrong schedule does not fail to compile: it hangs on an mbarrier or
 * computes wrong numbers on the GPU, where a test is slow and its failure
 * hard to read. So these tests pin, on the CPU, what the schedule of each
 * standard kernel must say:
 *   - the lowered IR (--emit=lowered) of lang/std/gemm.tile (cp.async
 *     rings, one wgmma in flight, the plain path without @pipeline) and
 *     lang/std/gemm_tma.tile (full/empty mbarriers, TMA copies, the
 *     epilogue through a buffer), and how transposed operands are marked;
 *   - the allocator's plan, from gpu_prepare: every use of a buffer lies
 *     in its live range (a wgmma's read lasts until a full wgmma_wait),
 *     buffers live at the same time never share bytes, swizzled buffers
 *     start on a swizzle repeat, mbarriers come first, and the TMA
 *     epilogue reuses the bytes of a ring that is dead by then;
 *   - kernels over the 227 KiB budget fail with a message naming the
 *     bytes, the buffers and the knobs;
 *   - ir_verify_lowered rejects malformed GPU operations (each next to a
 *     well-formed twin that it accepts), and ir_verify_func rejects any
 *     GPU operation, and a wgmma result read before its wgmma_wait.
 * Built only where the back end (LLVM) is (tests/meson.build).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/compilation.h"
#include "harness.h"
#include "ir/build.h"
#include "nvptx/lower.h"
#include "nvptx/smem_alloc.h"

/* Swizzled shared buffers start on a multiple of this (the 8-row x 128-byte
 * swizzle pattern: TMA and wgmma swizzle on absolute address bits). */
#define SWIZZLE_REPEAT_BYTES 1024
/* Unswizzled buffers: 16-byte vector accesses and cp.async pieces. */
#define PLAIN_BUFFER_ALIGN 16
/* An mbarrier is one 64-bit word, naturally aligned. */
#define MBAR_ALIGN 8
/* Room for the diagnostics of one failing compilation in a message. */
#define MESSAGES_MAX 4096

/* ---- lowered IR as text ----------------------------------------------- */

/* The kernel's lowered IR without the layout listing (malloc'd). */
static char *lowered(const char *path, const char *const *defines) {
  tc_compilation *c = harness_compile(path, NULL, defines);
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s: %s", path, tc_diagnostics(c));
  char *text = tc_emit(c, TC_EMIT_LOWERED);
  tc_free(c);
  cr_assert(text);
  char *layouts = strstr(text, "// layouts of");
  if (layouts) *layouts = 0;
  return text;
}

/* Each needle occurs in text, after the previous one. */
static void expect_in_order(const char *text, const char *const *needles, const char *what) {
  const char *at = text;
  for (int i = 0; needles[i]; i++) {
    const char *hit = strstr(at, needles[i]);
    cr_expect(hit, "%s: '%s' missing%s%s in:\n%s", what, needles[i], i ? " after " : "", i ? needles[i - 1] : "", text);
    if (!hit) return;
    at = hit + strlen(needles[i]);
  }
}

#define IN_ORDER(text, what, ...) expect_in_order(text, (const char *const[]){__VA_ARGS__, NULL}, what)

/* ---- gemm.tile: cp.async rings ---------------------------------------- */

Test(lowered, gemm_default_has_cp_async_rings_and_one_wgmma_in_flight) {
  char *text = lowered("lang/std/gemm.tile", NULL);
  /* STAGES = 3: one ring per operand, the slots in dimension 0. */
  cr_expect_eq(harness_count(text, "ring = 1}"), 2, "%s", text);
  cr_expect(strstr(text, "ring = 1} : smem<bf16>[3, 128, 64]"), "A ring [STAGES, BLOCK_M, BLOCK_K]:\n%s", text);
  cr_expect(strstr(text, "ring = 1} : smem<bf16>[3, 64, 128]"), "B ring [STAGES, BLOCK_K, BLOCK_N]:\n%s", text);
  cr_expect_eq(harness_count(text, "mbar_alloc"), 0, "cp.async rings need no mbarriers");
  HarnessLoop s = harness_split_at_loop(text);
  /* Prologue: one stage is filled before the loop (3 stages = the stage
   * read, one read by the wgmma in flight, one being filled). */
  cr_expect_eq(harness_count(s.before, "async_copy"), 2, "%s", s.before);
  IN_ORDER(s.before, "prologue", "async_copy", "async_copy", "async_commit");
  /* Iteration: wait for this stage's copies (no group may stay open with
   * one stage in flight), make them visible, compute, leave one wgmma
   * running, fill the next stage. */
  IN_ORDER(s.body, "loop", "async_wait @", "fence_async", "barrier", "= wgmma %", "wgmma_wait %", "{pending = 1}",
           "async_copy", "async_copy", "async_commit", "yield");
  cr_expect_eq(harness_count(s.body, "= wgmma "), 1, "%s", s.body);
  cr_expect_eq(harness_count(s.body, "smem_store"), 0, "the ring is filled by cp.async only");
  char *wgmma = harness_line_with(s.body, "= wgmma ");
  cr_expect(wgmma && !strchr(wgmma, '{'), "no operand is transposed: %s", wgmma);
  free(wgmma);
  /* After: the last wgmma is waited for completely, then open groups. */
  char *wait = harness_line_with(s.after, "wgmma_wait");
  cr_expect(wait && !strstr(wait, "pending"), "the wait after the loop leaves nothing in flight: %s", wait);
  free(wait);
  IN_ORDER(s.after, "after the loop", "wgmma_wait", "async_wait @", "store ");
  harness_loop_free(&s);
  free(text);
}

Test(lowered, gemm_four_stages_keeps_two_stages_in_flight) {
  char *text = lowered("lang/std/gemm.tile", (const char *[]){"STAGES", "4", NULL});
  cr_expect(strstr(text, "smem<bf16>[4, 128, 64]") && strstr(text, "smem<bf16>[4, 64, 128]"), "%s", text);
  HarnessLoop s = harness_split_at_loop(text);
  /* 4 stages, one wgmma in flight: two fills ahead, so a thread may
   * leave one copy group open when it waits for the current stage. */
  cr_expect_eq(harness_count(s.before, "async_commit"), 2, "%s", s.before);
  IN_ORDER(s.body, "loop", "async_wait {pending = 1}", "fence_async", "barrier", "= wgmma %", "{pending = 1}");
  harness_loop_free(&s);
  free(text);
}

Test(lowered, gemm_without_pipeline_stores_registers_before_the_wgmma) {
  char *text = lowered("lang/std/gemm.tile", (const char *[]){"STAGES", "1", NULL});
  cr_expect_eq(harness_count(text, "ring ="), 0, "%s", text);
  cr_expect_eq(harness_count(text, "async_"), 0, "no asynchronous copies without @pipeline:\n%s", text);
  HarnessLoop s = harness_split_at_loop(text);
  /* The previous wgmma's readers are done, every thread writes its part,
   * the writes are ordered before the async proxy's reads, and everyone's
   * writes are visible before the product starts. */
  IN_ORDER(s.body, "loop", "barrier", "smem_store", "smem_store", "fence_async", "barrier", "= wgmma %",
           "wgmma_wait %");
  char *wait = harness_line_with(s.body, "wgmma_wait");
  cr_expect(wait && !strstr(wait, "pending"), "%s", wait);
  free(wait);
  harness_loop_free(&s);
  free(text);
}

/* The wgmma line of a kernel's loop (malloc'd). */
static char *loop_wgmma(const char *path, const char *const *defines) {
  char *text = lowered(path, defines);
  HarnessLoop s = harness_split_at_loop(text);
  char *line = harness_line_with(s.body, "= wgmma ");
  cr_assert(line, "%s", s.body);
  harness_loop_free(&s);
  free(text);
  return line;
}

/* Attributes print only when non-zero (OPF_OPTATTR): a buffer that holds
 * an operand transposed is the only thing that makes one appear. */
static void check_transposes(const char *path) {
  static const struct {
    const char *a, *b, *attrs;
  } cases[] = {
      {"false", "false", NULL},
      {"true", "false", "{trans_a = 1} : f32[128, 128]"},
      {"false", "true", "{trans_b = 1} : f32[128, 128]"},
      {"true", "true", "{trans_a = 1, trans_b = 1} : f32[128, 128]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *line = loop_wgmma(path, (const char *[]){"A_TRANS", cases[i].a, "B_TRANS", cases[i].b, NULL});
    if (cases[i].attrs)
      cr_expect(strstr(line, cases[i].attrs), "%s A_TRANS=%s B_TRANS=%s: %s", path, cases[i].a, cases[i].b, line);
    else
      cr_expect(!strchr(line, '{'), "%s: %s", path, line);
    free(line);
  }
}

Test(lowered, transposed_operands_are_marked_on_the_wgmma) {
  check_transposes("lang/std/gemm.tile");
  check_transposes("lang/std/gemm_tma.tile");
}

/* ---- gemm_tma.tile: TMA rings with full/empty mbarriers ---------------- */

Test(lowered, gemm_tma_fills_rings_by_tma_under_full_and_empty_barriers) {
  char *text = lowered("lang/std/gemm_tma.tile", NULL);
  /* STAGES = 4: full[s] completes on the copies' bytes (one arrival: the
   * thread that announces them); empty[s] takes one arrival per
   * warpgroup (8 warps) and starts free. */
  cr_expect(strstr(text, "mbar_alloc {count = 1} : mbar[4]"), "full barriers:\n%s", text);
  cr_expect(strstr(text, "count = 2, first_parity = 1} : mbar[4]"), "empty barriers:\n%s", text);
  cr_expect_eq(harness_count(text, "mbar_alloc"), 2, "%s", text);
  cr_expect(strstr(text, "ring = 1} : smem<bf16>[4, 128, 64]") && strstr(text, "ring = 1} : smem<bf16>[4, 64, 128]"),
            "%s", text);
  HarnessLoop s = harness_split_at_loop(text);
  /* A fill: the issuing thread waits for a free slot, announces both
   * tiles' bytes (128x64 + 64x128 bf16 = 32768) and copies. Two stages
   * are filled ahead (4 - 1 in flight - 1 read). */
  static const char fill_bytes[] = "{bytes = 32768}";
  cr_expect_eq(harness_count(s.before, fill_bytes), 2, "%s", s.before);
  cr_expect_eq(harness_count(s.before, "tma_load"), 4, "%s", s.before);
  IN_ORDER(s.before, "prologue", "mbar_wait", "{elected = 1}", "mbar_expect", fill_bytes, "tma_load", "tma_load");
  /* Iteration: everyone waits on full[s], computes, releases the slot of
   * the wgmma that has finished, and the elected thread refills. */
  IN_ORDER(s.body, "loop", "mbar_wait %", "= wgmma %", "wgmma_wait %", "{pending = 1}", "mbar_arrive", "mbar_wait",
           "{elected = 1}", "mbar_expect", fill_bytes, "tma_load", "tma_load", "yield");
  char *full_wait = harness_line_with(s.body, "mbar_wait");
  cr_expect(full_wait && !strstr(full_wait, "elected"), "every thread waits for the data: %s", full_wait);
  free(full_wait);
  cr_expect_eq(harness_count(s.body, "async_"), 0, "no cp.async in a TMA ring:\n%s", s.body);
  /* After: the last wgmma, the last release, then C goes out by TMA from
   * a buffer written by every thread. */
  IN_ORDER(s.after, "epilogue", "wgmma_wait", "mbar_arrive", "barrier", "smem_store", "fence_async", "barrier",
           "tma_store", "return");
  char *wait = harness_line_with(s.after, "wgmma_wait");
  cr_expect(wait && !strstr(wait, "pending"), "%s", wait);
  free(wait);
  harness_loop_free(&s);
  free(text);
}

Test(lowered, gemm_tma_without_pipeline_waits_for_each_copy) {
  char *text = lowered("lang/std/gemm_tma.tile", (const char *[]){"STAGES", "1", NULL});
  cr_expect_eq(harness_count(text, "ring ="), 0, "%s", text);
  /* One single-phase barrier per load_block: count 1, first wait for a
   * completed copy. */
  cr_expect_eq(harness_count(text, "mbar_alloc"), 2, "%s", text);
  cr_expect_eq(harness_count(text, "first_parity"), 0, "%s", text);
  HarnessLoop s = harness_split_at_loop(text);
  IN_ORDER(s.body, "loop", "barrier", "mbar_expect", "{bytes = 16384}", "tma_load", "mbar_wait", "= wgmma %",
           "wgmma_wait");
  cr_expect_eq(harness_count(s.body, "tma_load"), 2, "%s", s.body);
  cr_expect_eq(harness_count(s.body, "elected"), 0, "without a ring nobody waits for a free slot:\n%s", s.body);
  harness_loop_free(&s);
  free(text);
}

/* ---- the allocator's plan ---------------------------------------------- */

/* smem_plan numbers the ops in program order (pre-order: an op before
 * the ops of its regions) into Op.scratch, and live ranges are ranges of
 * those numbers (smem_alloc.h); gpu_prepare runs it last, so the numbers
 * are still there for the checks below. */

/* Every message of d, one per line (a static buffer, valid until the
 * next call). */
static const char *messages(const Diags *d) {
  static char buf[MESSAGES_MAX];
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < d->count && len < sizeof buf; i++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s\n", d->items[i].msg);
  return buf;
}

/* A std kernel's first Func, scheduled, verified and allocated. */
typedef struct Prepared {
  tc_compilation *c;
  Arena arena;
  Diags diags;
  GpuKernel k;
} Prepared;

static void prepare(Prepared *p, const char *path, const char *const *defines) {
  p->c = harness_compile(path, NULL, defines);
  arena_init(&p->arena);
  diags_init(&p->diags, &p->arena, NULL);
  cr_assert(gpu_prepare(p->c->module->funcs[0], &p->arena, &p->diags, true, true, &p->k), "%s: %s", path, messages(&p->diags));
}

static void prepared_free(Prepared *p) {
  arena_free(&p->arena);
  tc_free(p->c);
}

static const SmemBuf *buf_of_alloc(const SmemPlan *p, const Op *alloc) {
  for (int i = 0; i < p->nbufs; i++)
    if (p->bufs[i].alloc == alloc) return &p->bufs[i];
  return NULL;
}

static const Op *root_alloc(const Value *v) {
  while (v->def && v->def->kind == OP_SMEM_INDEX) v = v->def->operands[0];
  return v->def;
}

/* The last op number inside op (its own for a plain op). */
static uint32_t last_number(const Op *op) {
  uint32_t last = op->scratch;
  for (int r = 0; r < op->nregions; r++)
    for (const Op *o = op->regions[r].first; o; o = o->next) {
      uint32_t l = last_number(o);
      if (l > last) last = l;
    }
  return last;
}

/* Full waits (pending 0) in one kernel: a handful per std kernel. */
#define MAX_FULL_WAITS 64

/* Op numbers of the waits that leave no wgmma running, ascending. */
typedef struct Waits {
  uint32_t at[MAX_FULL_WAITS];
  int n;
} Waits;

static void collect_full_waits(const Block *b, Waits *w) {
  for (const Op *op = b->first; op; op = op->next) {
    if (op->kind == OP_WGMMA_WAIT && op->attr[0] == 0) {
      cr_assert_lt(w->n, MAX_FULL_WAITS);
      w->at[w->n++] = op->scratch;
    }
    for (int r = 0; r < op->nregions; r++) collect_full_waits(&op->regions[r], w);
  }
}

/* The range of op numbers over which a use at `op` needs its buffer:
 * the op, every loop around it whole (the next iteration uses the
 * buffer again), and for a wgmma's operand, up to the first wait after
 * it that leaves no wgmma running (the read is asynchronous). */
static void needed_range(const Op *op, const Waits *full, uint32_t *lo, uint32_t *hi) {
  *lo = *hi = op->scratch;
  for (const Op *up = op->parent->parent; up; up = up->parent->parent)
    if (up->kind == OP_FOR || up->kind == OP_WHILE) {
      if (up->scratch < *lo) *lo = up->scratch;
      if (last_number(up) > *hi) *hi = last_number(up);
    }
  if (op->kind != OP_WGMMA) return;
  int w = 0;
  while (w < full->n && full->at[w] < op->scratch) w++;
  cr_expect_lt(w, full->n, "a wgmma at op %u is never waited for", op->scratch);
  if (w < full->n && full->at[w] > *hi) *hi = full->at[w];
}

/* smem_alloc.h's liveness rule, checked use by use: every use of a
 * buffer (through any smem_index) lies in the buffer's live range. */
static void check_uses_are_live(const SmemPlan *p, const Block *b, const Waits *full, const char *what) {
  for (const Op *op = b->first; op; op = op->next) {
    for (int r = 0; r < op->nregions; r++) check_uses_are_live(p, &op->regions[r], full, what);
    if (op->kind == OP_SMEM_INDEX) continue; /* an address, not an access */
    for (uint32_t i = 0; i < op->noperands; i++) {
      if (!type_is_buffer(op->operands[i]->type)) continue;
      const SmemBuf *sb = buf_of_alloc(p, root_alloc(op->operands[i]));
      cr_assert(sb, "%s: a buffer without a plan entry", what);
      uint32_t lo, hi;
      needed_range(op, full, &lo, &hi);
      cr_expect(sb->start <= lo && hi <= sb->end,
                "%s: %s at op %u uses the buffer of op %u outside its live range %u..%u (needs %u..%u)", what,
                op_info[op->kind].name, op->scratch, sb->alloc->scratch, sb->start, sb->end, lo, hi);
    }
  }
}

/* Live ranges are inclusive; mbarriers live for the whole kernel. */
static bool live_together(const SmemBuf *a, const SmemBuf *b) {
  if (a->alloc->kind == OP_MBAR_ALLOC || b->alloc->kind == OP_MBAR_ALLOC) return true;
  return a->start <= b->end && b->start <= a->end;
}

static bool share_bytes(const SmemBuf *a, const SmemBuf *b) {
  return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* Alignment, order and disjointness of every buffer of a plan. */
static void check_plan(const Prepared *pr, const char *what) {
  const SmemPlan *p = pr->k.plan;
  uint32_t mbar_end = 0, data_start = UINT32_MAX;
  for (int i = 0; i < p->nbufs; i++) {
    const SmemBuf *b = &p->bufs[i];
    cr_expect_eq((int64_t)b->offset, b->alloc->attr[0], "%s: the alloc op carries the plan's offset", what);
    cr_expect_leq(b->offset + b->bytes, p->top, "%s: buffer %d ends above top", what, i);
    if (b->alloc->kind == OP_MBAR_ALLOC) {
      cr_expect_eq(b->offset % MBAR_ALIGN, 0u, "%s: mbarriers at %u", what, b->offset);
      if (b->offset + b->bytes > mbar_end) mbar_end = b->offset + b->bytes;
      continue;
    }
    int64_t swizzle = b->alloc->attr[1];
    uint32_t align = swizzle ? SWIZZLE_REPEAT_BYTES : PLAIN_BUFFER_ALIGN;
    cr_expect_eq(b->offset % align, 0u, "%s: a %lld-byte swizzled buffer at %u", what, (long long)swizzle, b->offset);
    if (b->offset < data_start) data_start = b->offset;
  }
  cr_expect_leq(mbar_end, data_start, "%s: mbarriers below every data buffer", what);
  cr_expect_geq(p->scratch_base, mbar_end, "%s: scratch never overwrites mbarriers", what);
  for (int i = 0; i < p->nbufs; i++)
    for (int j = i + 1; j < p->nbufs; j++) {
      const SmemBuf *a = &p->bufs[i], *b = &p->bufs[j];
      cr_expect(!live_together(a, b) || !share_bytes(a, b),
                "%s: buffers %d [%u, +%u) and %d [%u, +%u) are live together and share bytes", what, i, a->offset,
                a->bytes, j, b->offset, b->bytes);
    }
  Waits full = {.n = 0};
  collect_full_waits(&pr->k.f->body, &full);
  check_uses_are_live(p, &pr->k.f->body, &full, what);
}

static const KernelSpec plan_cases[] = {
    {"lang/std/gemm.tile", {NULL}},
    {"lang/std/gemm.tile", {"STAGES", "1", NULL}},
    {"lang/std/gemm.tile", {"STAGES", "4", "BLOCK_N", "256", NULL}},
    {"lang/std/gemm_tma.tile", {NULL}},
    {"lang/std/gemm_tma.tile", {"STAGES", "1", NULL}},
    {"lang/std/gemm_tma.tile", {"TC", "f32", NULL}},
    {"lang/std/gemm_tma.tile", {"A_TRANS", "true", "B_TRANS", "true", NULL}},
    {"lang/std/flash_attention.tile", {NULL}},
    {"lang/std/flash_attention.tile", {"HEAD_DIM", "128", "CAUSAL", "true", NULL}},
    {"lang/std/gemm_ws.tile", {NULL}},
    {"lang/std/gemm_ws.tile", {"BLOCK_N", "128", "STAGES", "5", "CONSUMERS", "1", NULL}},
};

Test(smem_plan, buffers_are_aligned_ordered_and_disjoint_while_live) {
  for (size_t i = 0; i < sizeof plan_cases / sizeof plan_cases[0]; i++) {
    char what[160];
    harness_describe(plan_cases[i].path, plan_cases[i].defines, what, sizeof what);
    Prepared p;
    prepare(&p, plan_cases[i].path, plan_cases[i].defines);
    cr_expect_gt(p.k.plan->nbufs, 0, "%s: every std kernel stages something in shared memory", what);
    check_plan(&p, what);
    /* The scheduled IR is lowered IR: valid as such, invalid as tile IR. */
    cr_expect(ir_verify_lowered(p.k.f, &p.diags), "%s: %s", what, messages(&p.diags));
    cr_expect_not(ir_verify_func(p.k.f, &p.diags), "%s: GPU operations outside the lowered IR", what);
    prepared_free(&p);
  }
}

/* The buffer that op kind `kind` reads as operand `index` (the first such op). */
static const Op *buffer_used_by(const Block *b, OpKind kind, uint32_t index) {
  for (const Op *op = b->first; op; op = op->next) {
    if (op->kind == kind) return root_alloc(op->operands[index]);
    for (int r = 0; r < op->nregions; r++) {
      const Op *found = buffer_used_by(&op->regions[r], kind, index);
      if (found) return found;
    }
  }
  return NULL;
}

Test(smem_plan, tma_epilogue_reuses_a_dead_ring) {
  Prepared p;
  prepare(&p, "lang/std/gemm_tma.tile", NULL);
  const SmemPlan *plan = p.k.plan;
  const Op *epi_alloc = buffer_used_by(&p.k.f->body, OP_TMA_STORE, 1);
  cr_assert(epi_alloc && epi_alloc->kind == OP_SMEM_ALLOC, "the store of C goes through a buffer");
  const SmemBuf *epi = buf_of_alloc(plan, epi_alloc);
  cr_assert(epi);
  const SmemBuf *shared = NULL;
  for (int i = 0; i < plan->nbufs; i++) {
    const SmemBuf *b = &plan->bufs[i];
    if (b->alloc->kind == OP_SMEM_ALLOC && b->alloc->attr[2] && b->offset == epi->offset) shared = b;
  }
  cr_assert(shared, "the [128, 128] epilogue buffer at %u should take the bytes of a ring", epi->offset);
  /* The ring is dead once the wait after the loop has returned; the
   * epilogue's first write comes after it. */
  cr_expect_gt(epi->start, shared->end, "epilogue from op %u, ring until op %u", epi->start, shared->end);
  /* Two rings of 4 x 16 KiB and 8 + 8 mbarriers padded to one swizzle
   * repeat: the epilogue adds nothing. */
  cr_expect_eq(plan->top, SWIZZLE_REPEAT_BYTES + 2u * 4u * 128u * 64u * 2u, "top %u", plan->top);
  prepared_free(&p);
}

/* ---- the budget --------------------------------------------------------- */

/* Bytes of bf16. */
#define BF16_BYTES 2

/* Compiles a std kernel that must fail in the back end; its diagnostics
 * (malloc'd). */
static char *generate_fails(const char *path, const char *const *defines) {
  tc_compilation *c = harness_compile(path, NULL, defines);
  cr_expect_not(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s compiled", path);
  char *d = strdup(tc_diagnostics(c));
  tc_free(c);
  return d;
}

/* The message names the kernel's bytes and the limit, every buffer live
 * with the one placed highest (each ring with its slot count and the
 * load it serves), and the knobs to turn. */
Test(budget, tma_rings_over_227_kib_fail_with_the_bytes_buffers_and_knobs) {
  /* BLOCK_N 256 and 6 stages: rings of 6 x [128, 64] and 6 x [64, 256]
   * bf16 above the mbarriers' swizzle repeat. */
  enum { STAGES = 6, BM = 128, BN = 256, BK = 64 };
  char *d = generate_fails("lang/std/gemm_tma.tile", (const char *[]){"BLOCK_N", "256", "STAGES", "6", NULL});
  char want[256];
  snprintf(want, sizeof want,
           "lang/std/gemm_tma.tile:22:1: error: GPU back end: kernel 'gemm_tma' needs %d bytes of shared memory; "
           "a block has at most 232448. Buffers in use at the peak: ",
           SWIZZLE_REPEAT_BYTES + STAGES * (BM * BK + BK * BN) * BF16_BYTES);
  cr_expect(strstr(d, want), "want '%s' in:\n%s", want, d);
  /* the load_block of A (line 43) and of B (line 49) */
  cr_expect(strstr(d, "a ring of 6 x bf16[128, 64] for 43:22 (98304 bytes)"), "%s", d);
  cr_expect(strstr(d, "a ring of 6 x bf16[64, 256] for 49:22 (196608 bytes)"), "the larger ring, too:\n%s", d);
  cr_expect(strstr(d, "(196608 bytes). Use fewer @pipeline stages or smaller blocks (BLOCK_M, BLOCK_N, BLOCK_K)\n"),
            "%s", d);
  free(d);
}

Test(budget, cp_async_rings_over_227_kib_fail) {
  enum { STAGES = 5, BM = 128, BN = 256, BK = 64 };
  char *d = generate_fails("lang/std/gemm.tile", (const char *[]){"BLOCK_N", "256", "STAGES", "5", NULL});
  char want[256];
  snprintf(want, sizeof want, "kernel 'gemm' needs %d bytes of shared memory; a block has at most 232448.",
           STAGES * (BM * BK + BK * BN) * BF16_BYTES);
  cr_expect(strstr(d, want), "want '%s' in:\n%s", want, d);
  /* the loads of A (line 56) and B (line 64) */
  cr_expect(strstr(d, "a ring of 5 x bf16[128, 64] for 56:22 (81920 bytes)"), "%s", d);
  cr_expect(strstr(d, "a ring of 5 x bf16[64, 256] for 64:22 (163840 bytes)"), "%s", d);
  cr_expect(strstr(d, "Use fewer @pipeline stages or smaller blocks (BLOCK_M, BLOCK_N, BLOCK_K)"), "%s", d);
  free(d);
  /* One stage fewer fits: 4 x 48 KiB = 196608 bytes. */
  tc_compilation *c = harness_compile("lang/std/gemm.tile", NULL, (const char *[]){"BLOCK_N", "256", "STAGES", "4", NULL});
  cr_expect(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  tc_free(c);
}

/* ---- the verifier of the lowered IR ------------------------------------- */

/* A kernel k(p: *f32, d: tensor<bf16, 2>) built op by op before its return. */
typedef struct Kit {
  Arena arena;
  Module *m;
  Func *f;
  IrBuilder b;
  Diags diags;
} Kit;

static void kit_init(Kit *k) {
  arena_init(&k->arena);
  k->m = ir_module_new(&k->arena, "lowered.tile");
  TType desc = type_scalar(SK_DESC);
  desc.pointee = SK_BF16;
  desc.desc_rank = 2;
  TType params[] = {type_ptr(SK_F32), desc};
  k->f = ir_func_new(k->m, "k", 2, params, (SrcLoc){1, 1, 0});
  k->f->params[0].name = "p";
  k->f->params[1].name = "d";
  ir_append(&k->f->body, ir_op_make(&k->arena, OP_RETURN, 0, NULL, 0, NULL, (SrcLoc){1, 1, 0}));
  k->b = irb_at_end(&k->arena, &k->f->body);
  k->b.loc = (SrcLoc){2, 1, 0};
  diags_init(&k->diags, &k->arena, NULL);
}

static void kit_free(Kit *k) { arena_free(&k->arena); }

static Value *kit_smem(Kit *k, ScalarKind elem, int rank, const int32_t *shape, int swizzle, bool ring) {
  TType t = type_smem(elem, rank, shape);
  Op *op = irb_op(&k->b, OP_SMEM_ALLOC, 0, NULL, &t);
  op->attr[1] = swizzle;
  op->attr[2] = ring;
  return &op->results[0];
}

static Value *kit_mbar(Kit *k, int n) {
  TType t = type_mbar(n);
  Op *op = irb_op(&k->b, OP_MBAR_ALLOC, 0, NULL, &t);
  op->attr[1] = 1; /* count */
  return &op->results[0];
}

static Value *kit_zeros(Kit *k, TType t) { return irb_value(&k->b, OP_CONST, 0, NULL, t); }
static Value *kit_i32(Kit *k, int64_t v) { return irb_const_int(&k->b, SK_I32, v); }

/* ir_verify_lowered's messages, "" when it accepts (malloc'd). */
static char *verify_lowered(Kit *k) {
  k->diags.count = k->diags.errors = 0;
  bool ok = ir_verify_lowered(k->f, &k->diags);
  cr_expect_eq(ok, k->diags.errors == 0, "a verdict agrees with its messages");
  return strdup(messages(&k->diags));
}

/* Builds one kernel with `build(k, good)` twice: the well-formed twin must
 * verify, the broken one must fail with `message`. */
typedef void (*BuildFn)(Kit *k, bool good);

static void expect_rejected(BuildFn build, const char *message) {
  for (int good = 1; good >= 0; good--) {
    Kit k;
    kit_init(&k);
    build(&k, good);
    char *msgs = verify_lowered(&k);
    if (good)
      cr_expect_str_eq(msgs, "", "the well-formed twin of '%s' is rejected", message);
    else
      cr_expect(strstr(msgs, message), "want '%s', got:\n%s", message, msgs);
    free(msgs);
    kit_free(&k);
  }
}

/* a: [64, 16], b: [16, 64] or, transposed, [64, 16] with trans_b. */
static void build_wgmma(Kit *k, bool good) {
  Value *a = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  Value *b = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  TType acc_t = type_tile(SK_F32, 2, (int32_t[]){64, good ? 64 : 32});
  Value *acc = kit_zeros(k, acc_t);
  Op *mma = irb_op(&k->b, OP_WGMMA, 3, (Value *[]){a, b, acc}, &acc_t);
  mma->attr[1] = 1; /* b holds B^T: presents [16, 64] */
  irb_op(&k->b, OP_WGMMA_WAIT, 1, (Value *[]){&mma->results[0]}, &acc_t);
}

static void build_wgmma_untransposed(Kit *k, bool good) {
  Value *a = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  Value *b = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  TType acc_t = type_tile(SK_F32, 2, (int32_t[]){64, 64});
  Op *mma = irb_op(&k->b, OP_WGMMA, 3, (Value *[]){a, b, kit_zeros(k, acc_t)}, &acc_t);
  mma->attr[1] = good; /* without trans_b, b presents [64, 16]: K 16 != 64 */
}

Test(verify_lowered, wgmma_shapes_must_match) {
  expect_rejected(build_wgmma, "shapes do not match: smem<bf16>[64, 16] x smem<bf16>[64, 16] into f32[64, 32]");
  expect_rejected(build_wgmma_untransposed, "wgmma: shapes do not match");
}

/* Two products of one A tile issued as one (pair 1, pair 2): the broken
 * twin's second product reads another A tile. */
static void build_wgmma_pair(Kit *k, bool good) {
  Value *a = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  Value *a2 = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  Value *b = kit_smem(k, SK_BF16, 2, (int32_t[]){16, 64}, 128, false);
  TType acc_t = type_tile(SK_F32, 2, (int32_t[]){64, 64});
  Op *m1 = irb_op(&k->b, OP_WGMMA, 3, (Value *[]){a, b, kit_zeros(k, acc_t)}, &acc_t);
  Value *z = kit_zeros(k, acc_t);
  /* the constant goes before the pair: the two products are adjacent */
  ir_unlink(z->def);
  ir_insert_before(m1, z->def);
  Op *m2 = irb_op(&k->b, OP_WGMMA, 3, (Value *[]){good ? a : a2, b, z}, &acc_t);
  m1->attr[2] = 1, m2->attr[2] = 2;
  irb_op(&k->b, OP_WGMMA_WAIT, 1, (Value *[]){&m1->results[0]}, &acc_t);
  irb_op(&k->b, OP_WGMMA_WAIT, 1, (Value *[]){&m2->results[0]}, &acc_t);
}

/* A pair = 2 with no pair = 1 before it. */
static void build_wgmma_lone_second(Kit *k, bool good) {
  Value *a = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  Value *b = kit_smem(k, SK_BF16, 2, (int32_t[]){16, 64}, 128, false);
  TType acc_t = type_tile(SK_F32, 2, (int32_t[]){64, 64});
  Op *m = irb_op(&k->b, OP_WGMMA, 3, (Value *[]){a, b, kit_zeros(k, acc_t)}, &acc_t);
  m->attr[2] = good ? 0 : 2;
  irb_op(&k->b, OP_WGMMA_WAIT, 1, (Value *[]){&m->results[0]}, &acc_t);
}

Test(verify_lowered, paired_products_agree) {
  expect_rejected(build_wgmma_pair, "a wgmma with pair = 1 must be followed by one with pair = 2, with the same A operand");
  expect_rejected(build_wgmma_lone_second, "a wgmma with pair = 1 must be followed by one with pair = 2");
}

static void build_smem_index(Kit *k, bool good) {
  Value *buf = kit_smem(k, SK_BF16, 3, (int32_t[]){3, 64, 64}, 128, good);
  irb_value(&k->b, OP_SMEM_INDEX, 2, (Value *[]){buf, kit_i32(k, 1)}, type_smem(SK_BF16, 2, (int32_t[]){64, 64}));
}

Test(verify_lowered, only_rings_have_slots) {
  expect_rejected(build_smem_index, "smem_index: only rings (smem_alloc {ring = 1}) have slots");
}

static void build_tma_load(Kit *k, bool good) {
  Value *buf = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 64}, 128, false);
  Value *bars = kit_mbar(k, 1), *zero = kit_i32(k, 0);
  Value *ops[] = {buf, &k->f->body.args[1], bars, zero, zero, zero};
  irb_op(&k->b, OP_TMA_LOAD, good ? 6 : 5, ops, NULL);
}

Test(verify_lowered, tma_load_takes_one_coordinate_per_dimension) {
  expect_rejected(build_tma_load, "tma_load: expected 2 coordinates, got 1");
}

/* A store of columns [column, column + 16) of an f32[64, 64] tile into a
 * [64, 16] buffer: column must be a multiple of the buffer's width. */
static void build_part_store(Kit *k, bool good) {
  Value *buf = kit_smem(k, SK_F32, 2, (int32_t[]){64, 16}, 64, false);
  Op *st = irb_op(&k->b, OP_SMEM_STORE, 2, (Value *[]){buf, kit_zeros(k, type_tile(SK_F32, 2, (int32_t[]){64, 64}))},
                  NULL);
  st->attr[0] = good ? 48 : 40;
}

/* ring_next takes the mbarriers of the ring and an i32 advance. */
static void build_ring_next(Kit *k, bool good) {
  Value *bars = kit_mbar(k, 4);
  Value *adv = good ? kit_i32(k, 1) : kit_zeros(k, type_scalar(SK_I64));
  irb_value(&k->b, OP_RING_NEXT, 2, (Value *[]){bars, adv}, type_scalar(SK_I32));
}

Test(verify_lowered, part_stores_and_ring_positions) {
  expect_rejected(build_part_store, "smem_store: the tile must be f32[64, 16], or a wider one whose columns [column, "
                                    "column + 16) it takes; got f32[64, 64] (column 40)");
  expect_rejected(build_ring_next, "ring_next: the advance must be an i32 scalar");
}

/* PTX ISA: an mbarrier's transaction count holds at most 2^20 - 1 bytes. */
#define MBAR_TX_LIMIT ((1 << 20) - 1)

static int64_t expect_bytes;

static void build_mbar_expect(Kit *k, bool good) {
  Value *bars = kit_mbar(k, 2);
  Op *ex = irb_op(&k->b, OP_MBAR_EXPECT, 2, (Value *[]){bars, kit_i32(k, 1)}, NULL);
  ex->attr[0] = good ? MBAR_TX_LIMIT : expect_bytes;
}

Test(verify_lowered, mbar_expect_announces_bytes_that_fit_a_phase) {
  expect_bytes = 0;
  expect_rejected(build_mbar_expect, "mbar_expect: 0 transaction bytes do not fit one mbarrier phase");
  expect_bytes = MBAR_TX_LIMIT + 1;
  expect_rejected(build_mbar_expect, "1048576 transaction bytes do not fit one mbarrier phase");
}

/* A buffer handed to ordinary ops: each must refuse it (the twin uses a
 * register tile instead). */
static const TType f32x64 = {SK_F32, 0, 0, 1, {64}};

static Value *buffer_or_tile(Kit *k, bool good) {
  return good ? kit_zeros(k, f32x64) : kit_smem(k, SK_F32, 1, (int32_t[]){64}, 0, false);
}

static void build_store_of_buffer(Kit *k, bool good) {
  Value *v = buffer_or_tile(k, good);
  TType ptr_t = type_with_shape(type_ptr(SK_F32), 1, f32x64.shape);
  Value *ptrs = irb_value(&k->b, OP_BROADCAST, 1, (Value *[]){&k->f->body.args[0]}, ptr_t);
  irb_op(&k->b, OP_STORE, 2, (Value *[]){ptrs, v}, NULL);
}

static void build_add_of_buffer(Kit *k, bool good) {
  Value *v = buffer_or_tile(k, good);
  irb_value(&k->b, OP_ADD, 2, (Value *[]){v, v}, f32x64);
}

static void build_cast_of_buffer(Kit *k, bool good) {
  irb_value(&k->b, OP_CAST, 1, (Value *[]){buffer_or_tile(k, good)}, type_with_elem(f32x64, SK_I32));
}

static void build_buffer_result(Kit *k, bool good) {
  Value *v = buffer_or_tile(k, good);
  irb_value(&k->b, OP_SELECT, 3, (Value *[]){kit_zeros(k, type_with_elem(f32x64, SK_I1)), v, v}, v->type);
}

Test(verify_lowered, buffers_only_go_to_gpu_operations) {
  expect_rejected(build_store_of_buffer, "store: value must be f32[64], got smem<f32>[64]");
  expect_rejected(build_add_of_buffer, "add: operand type must be integer or float, got smem<f32>[64]");
  expect_rejected(build_cast_of_buffer, "cast: cannot cast smem<f32>[64] to i32[64]");
  expect_rejected(build_buffer_result, "a shared-memory buffer can only be the result of a GPU operation");
}

/* ir.h says a wgmma's result "may only feed another wgmma's acc or a
 * wgmma_wait" (the product is still being written asynchronously): a
 * schedule that forgets the wait would read garbage on the GPU, so the
 * verifier rejects it. */
static void build_unwaited_wgmma(Kit *k, bool good) {
  Value *a = kit_smem(k, SK_BF16, 2, (int32_t[]){64, 16}, 32, false);
  Value *b = kit_smem(k, SK_BF16, 2, (int32_t[]){16, 64}, 128, false);
  TType acc_t = type_tile(SK_F32, 2, (int32_t[]){64, 64});
  Value *r = irb_value(&k->b, OP_WGMMA, 3, (Value *[]){a, b, kit_zeros(k, acc_t)}, acc_t);
  if (good) r = irb_value(&k->b, OP_WGMMA_WAIT, 1, (Value *[]){r}, acc_t);
  irb_value(&k->b, OP_ADD, 2, (Value *[]){r, r}, acc_t);
}

Test(verify_lowered, wgmma_result_is_waited_for_before_use) {
  expect_rejected(build_unwaited_wgmma, "wgmma");
}

Test(verify_lowered, tile_ir_has_no_gpu_operations) {
  Kit k;
  kit_init(&k);
  Value *buf = kit_smem(&k, SK_F32, 1, (int32_t[]){64}, 0, false);
  irb_op(&k.b, OP_BARRIER, 0, NULL, NULL);
  irb_op(&k.b, OP_SMEM_STORE, 2, (Value *[]){buf, kit_zeros(&k, f32x64)}, NULL);
  irb_op(&k.b, OP_FENCE_ASYNC, 0, NULL, NULL);
  char *msgs = verify_lowered(&k);
  cr_expect_str_eq(msgs, "", "valid lowered IR");
  free(msgs);
  k.diags.count = k.diags.errors = 0;
  cr_expect_not(ir_verify_func(k.f, &k.diags));
  const char *m = messages(&k.diags);
  static const char gpu_only[] = "GPU operations exist only in the lowered IR of the GPU back end";
  /* smem_alloc, barrier, smem_store and fence_async: one message each. */
  cr_expect_eq(harness_count(m, gpu_only), 4, "%s", m);
  cr_expect(strstr(m, "invalid IR: barrier: GPU operations exist only"), "%s", m);
  cr_expect(strstr(m, "smem_alloc: result 0: a shared-memory buffer can only be the result of a GPU operation"),
            "%s", m);
  kit_free(&k);
}
