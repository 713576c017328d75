/* codegen.c - the GPU back end behind tc_generate:
 *
 *   tile IR (verified, optimized)
 *     | axisinfo + layouts_assign    nvptx/assign.c       (--emit=lowered)
 *     | lower_func per kernel        nvptx/lower*.c
 *     | link the kernels into one LLVM module, add each kernel's metadata
 *     | libdevice + default<O3>      nvptx/target.c       (--emit=llvm)
 *     | NVPTX                                             (--emit=ptx)
 *     | nvJitLink or ptxas           nvptx/cubin.c        (--emit=cubin)
 *     v
 *   one cubin with every kernel, and per-kernel statistics
 *
 * Each compilation has its own LLVM context, so compilations on different
 * threads share nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Linker.h>

#include "../nvptx/cubin.h"
#include "../nvptx/lower.h"
#include "compilation.h"

/* ---- metadata ---- */

static const char *param_kind_text(TType t) {
  return t.kind == SK_PTR ? "ptr" : t.kind == SK_DESC ? "desc" : NULL;
}

char *kernel_meta_text(const Func *f, int warps, unsigned shared_bytes, const DescBox *descs) {
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "tile-kernel 1\nname %s\nwarps %d\nshared %u\n", f->name, warps, shared_bytes);
  if (func_cluster(f) > 1) sb_printf(&sb, "cluster %d\n", f->cluster);
  for (uint32_t i = 0; i < f->body.nargs; i++) {
    TType t = f->body.args[i].type;
    const ParamInfo *p = &f->params[i];
    const char *kind = param_kind_text(t);
    if (kind)
      sb_printf(&sb, "param %s %s %s", p->name, kind, scalar_name((ScalarKind)t.pointee));
    else
      sb_printf(&sb, "param %s %s", p->name, scalar_name((ScalarKind)t.kind));
    if (t.kind == SK_DESC) {
      /* param NAME desc ELEM R box B0 .. B(R-1) swizzle S: the box of one
       * TMA copy, in the language's dimension order. A descriptor no copy
       * uses gets the smallest valid box: one 16-byte row. */
      const DescBox *d = descs && descs[i].used ? &descs[i] : NULL;
      sb_printf(&sb, " %d box", t.desc_rank);
      for (int k = 0; k < t.desc_rank; k++)
        sb_printf(&sb, " %d", d ? (int)d->box[k] : k + 1 < t.desc_rank ? 1 : 16 / scalar_bytes((ScalarKind)t.pointee));
      sb_printf(&sb, " swizzle %d", d ? d->swizzle : 0);
    }
    if (p->align) sb_printf(&sb, " align %lld", (long long)p->align);
    if (p->multiple_of) sb_printf(&sb, " multiple_of %lld", (long long)p->multiple_of);
    sb_putc(&sb, '\n');
  }
  for (int i = 0; i < f->nconsts; i++) {
    const ConstInfo *c = &f->consts[i];
    if (c->type.kind == SK_TYPE)
      sb_printf(&sb, "const %s type %s\n", c->name, scalar_name((ScalarKind)c->tval));
    else if (scalar_is_float((ScalarKind)c->type.kind))
      sb_printf(&sb, "const %s %s %.17g\n", c->name, scalar_name((ScalarKind)c->type.kind), c->fval);
    else if (!scalar_is_signed((ScalarKind)c->type.kind))
      sb_printf(&sb, "const %s %s %llu\n", c->name, scalar_name((ScalarKind)c->type.kind), (unsigned long long)c->ival);
    else
      sb_printf(&sb, "const %s %s %lld\n", c->name, scalar_name((ScalarKind)c->type.kind), (long long)c->ival);
  }
  sb_puts(&sb, "end\n");
  return sb_take(&sb);
}

/* The metadata as a global byte array __tile_meta_<kernel> (NUL included),
 * which the runtime reads with cuModuleGetGlobal. */
static void add_meta_global(LLVMModuleRef m, const char *kernel, const char *text) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMValueRef init = LLVMConstStringInContext(ctx, text, (unsigned)strlen(text), 0);
  char name[512];
  snprintf(name, sizeof name, "__tile_meta_%s", kernel);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(m, LLVMTypeOf(init), name, 1);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMExternalLinkage);
}

/* ---- clusters ---- */

/* LLVM 19's NVPTX back end has no cluster annotation: the directive
 * `.reqnctapercluster C, 1, 1` goes into the PTX text after the entry's
 * `.maxntid` line (which every kernel has). */
static bool add_cluster_directives(tc_compilation *c) {
  for (int i = 0; i < c->module->nfuncs; i++) {
    const Func *f = c->module->funcs[i];
    if (func_cluster(f) == 1) continue;
    char entry[600];
    snprintf(entry, sizeof entry, ".entry %s(", f->name);
    char *at = strstr(c->ptx, entry);
    char *maxntid = at ? strstr(at, "\n.maxntid ") : NULL;
    char *eol = maxntid ? strchr(maxntid + 1, '\n') : NULL;
    if (!eol) {
      diag_error(&c->diags, f->loc, "GPU back end: no .maxntid line for kernel '%s' in the PTX", f->name);
      return false;
    }
    char line[64];
    int n = snprintf(line, sizeof line, "\n.reqnctapercluster %d, 1, 1", f->cluster);
    size_t head = (size_t)(eol - c->ptx), len = strlen(c->ptx);
    char *ptx = malloc(len + (size_t)n + 1);
    memcpy(ptx, c->ptx, head);
    memcpy(ptx + head, line, (size_t)n);
    memcpy(ptx + head + (size_t)n, c->ptx + head, len - head + 1);
    free(c->ptx);
    c->ptx = ptx;
  }
  return true;
}

/* ---- the pipeline ---- */

static void report(tc_compilation *c, const char *what, char *msg) {
  diag_error(&c->diags, (SrcLoc){0, 0, 0}, "%s: %s", what, msg ? msg : "failed");
  free(msg);
}

/* Lowers every kernel and links them into one module (NULL on error).
 * Each kernel's lowered IR and layouts go to `dump` (--emit=lowered). */
static LLVMModuleRef lower_all(tc_compilation *c, LLVMContextRef ctx, const GpuOptions *options, const bool *added,
                               StrBuf *dump) {
  LLVMModuleRef all = NULL;
  for (int i = 0; i < c->module->nfuncs; i++) {
    const Func *f = c->module->funcs[i];
    GpuOptions kopt = *options;
    kopt.added_addresses = added[i];
    const GpuOptions *opt = &kopt;
    Arena a;
    arena_init(&a);
    GpuKernel k;
    LowerResult lr;
    bool ok = gpu_prepare(f, &a, &c->diags, !added[i], options->pair_products, &k) && lower_func(&k, ctx, &c->diags, opt, &lr);
    if (ok) {
      ir_print_func(k.f, dump);
      sb_printf(dump, "// layouts of %s (%d warps):\n", f->name, k.num_warps);
      layouts_print(k.layouts, k.f, dump);
      sb_putc(dump, '\n');
      c->code[i].warps = lr.num_warps;
      c->code[i].shared_bytes = lr.shared_bytes;
      c->code[i].meta = kernel_meta_text(f, lr.num_warps, lr.shared_bytes, k.sched.descs);
    }
    arena_free(&a);
    if (!ok) {
      if (all) LLVMDisposeModule(all);
      return NULL;
    }
    add_meta_global(lr.module, f->name, c->code[i].meta);
    if (!all) {
      all = lr.module;
    } else if (LLVMLinkModules2(all, lr.module)) {
      diag_error(&c->diags, f->loc, "GPU back end: linking kernel '%s' into the module failed", f->name);
      LLVMDisposeModule(all);
      return NULL;
    }
  }
  return all;
}

/* Spills are slow (local memory) and usually mean a tile too large for
 * its warps: a warning, or with spills_are_errors an error, naming the
 * kernel and the knob. Returns false for an error. */
static bool report_spills(tc_compilation *c, const tc_codegen_options *o) {
  bool ok = true;
  for (int i = 0; i < c->module->nfuncs; i++) {
    const tc_kernel_stats *s = &c->code[i].stats;
    if (!s->spill_store_bytes && !s->spill_load_bytes) continue;
    const Func *f = c->module->funcs[i];
    const char *fmt = "GPU back end: kernel '%s' spills registers to local memory (%d bytes stored, %d loaded, "
                      "%d registers per thread): use more warps or smaller tiles";
    if (o->spills_are_errors) {
      diag_error(&c->diags, f->loc, fmt, f->name, s->spill_store_bytes, s->spill_load_bytes, s->registers);
      ok = false;
    } else {
      diag_warning(&c->diags, f->loc, fmt, f->name, s->spill_store_bytes, s->spill_load_bytes, s->registers);
    }
  }
  return ok;
}

static void record_stats(tc_compilation *c, const CubinResult *cr) {
  for (int i = 0; i < c->module->nfuncs; i++) {
    KernelCode *k = &c->code[i];
    k->stats.warps = k->warps;
    k->stats.shared_bytes = k->shared_bytes;
    const CubinStats *s = cr ? cubin_result_kernel(cr, c->module->funcs[i]->name) : NULL;
    if (s) {
      k->stats.registers = s->registers;
      k->stats.spill_store_bytes = s->spill_store_bytes;
      k->stats.spill_load_bytes = s->spill_load_bytes;
      k->stats.wgmma_notes = s->wgmma_notes;
      k->stats.stack_frame_bytes = s->stack_frame_bytes;
    }
    k->have_stats = true;
  }
}

static bool assemble(tc_compilation *c, const tc_codegen_options *o) {
  if (o->linker == TC_LINKER_NONE) {
    record_stats(c, NULL);
    return true;
  }
  static const CubinLinker linkers[] = {CUBIN_AUTO, CUBIN_NVJITLINK, CUBIN_PTXAS};
  CubinResult cr;
  char *err = NULL;
  if (!cubin_from_ptx(c->ptx, strlen(c->ptx), o->arch ? o->arch : CUBIN_DEFAULT_ARCH, linkers[o->linker], &cr, &err)) {
    report(c, "assembling PTX to a cubin failed", err);
    return false;
  }
  if (cr.redo_error)
    diag_warning(&c->diags, (SrcLoc){0, 0, 0},
                 "GPU back end: nvJitLink's cubin serializes wgmma or ignores setmaxnreg, and ptxas, run to "
                 "compile it again as a whole program, failed (the slower cubin is kept): %s",
                 cr.redo_error);
  c->cubin = cr.data;
  c->cubin_size = cr.size;
  cr.data = NULL;
  record_stats(c, &cr);
  cubin_result_free(&cr);
  return true;
}

/* One pass: lower (kernel i with added-address conversions where
 * added[i]), optimize, PTX, cubin. */
static bool generate_once(tc_compilation *c, const tc_codegen_options *o, const bool *added) {
  codegen_free(c);
  c->code = calloc((size_t)c->module->nfuncs, sizeof(KernelCode));
  Target t;
  char *err = NULL;
  if (!target_create(&t, &err)) {
    report(c, "GPU back end", err);
    return false;
  }
  GpuOptions gopt = {o->debug_barriers, o->debug_break_tma_barriers, c->module->source_name, c->diags.files,
                     c->diags.nfiles, false, o->mbar_poll, !o->separate_products};
  LLVMContextRef ctx = LLVMContextCreate();
  StrBuf sb;
  sb_init(&sb);
  LLVMModuleRef m = lower_all(c, ctx, &gopt, added, &sb);
  c->lowered = sb_take(&sb);
  bool ok = m != NULL;
  if (ok && !(ok = target_optimize(&t, m, &err))) report(c, "GPU back end", err);
  if (ok) {
    char *ir = LLVMPrintModuleToString(m);
    c->llvm_ir = strdup(ir);
    LLVMDisposeMessage(ir);
    if (!(c->ptx = target_emit_ptx(&t, m, &err))) {
      report(c, "GPU back end", err);
      ok = false;
    } else {
      ok = add_cluster_directives(c);
    }
  }
  if (m) LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  target_destroy(&t);
  return ok && assemble(c, o);
}

static int spill_bytes(const tc_compilation *c, int i) {
  return c->code[i].stats.spill_store_bytes + c->code[i].stats.spill_load_bytes;
}

bool tc_generate(tc_compilation *c, const tc_codegen_options *options) {
  tc_codegen_options defaults = {.linker = TC_LINKER_AUTO};
  const tc_codegen_options *o = options ? options : &defaults;
  if (c->diags.errors || !c->module || !c->module->nfuncs) return false;
  if (o->arch && strcmp(o->arch, "sm_90a") != 0) {
    diag_error(&c->diags, (SrcLoc){0, 0, 0}, "GPU back end: target '%s' is not supported (only sm_90a)", o->arch);
    return false;
  }
  int n = c->module->nfuncs;
  bool *added = calloc((size_t)n, sizeof *added);
  bool ok = generate_once(c, o, added);
  /* A kernel that spills is lowered again with conversions whose
   * addresses need no extra registers (GpuOptions.added_addresses) and
   * without the layout hints of assign.c; the
   * pass with fewer spill bytes in total stays. */
  int before = 0;
  for (int i = 0; ok && i < n; i++) {
    added[i] = spill_bytes(c, i) > 0;
    before += spill_bytes(c, i);
  }
  if (before) {
    int after = 0;
    ok = generate_once(c, o, added);
    for (int i = 0; ok && i < n; i++) after += spill_bytes(c, i);
    if (!ok || after >= before) {
      memset(added, 0, sizeof *added * (size_t)n);
      ok = generate_once(c, o, added);
    }
  }
  free(added);
  ok = ok && (o->linker == TC_LINKER_NONE || report_spills(c, o));
  c->generated = ok;
  return ok;
}

const void *tc_cubin(const tc_compilation *c, size_t *size) {
  if (size) *size = c->cubin_size;
  return c->cubin;
}

bool tc_kernel_get_stats(const tc_compilation *c, int kernel, tc_kernel_stats *out) {
  if (!c->generated || kernel < 0 || kernel >= tc_kernel_count(c) || !c->code[kernel].have_stats) return false;
  *out = c->code[kernel].stats;
  return true;
}

const char *tc_kernel_meta(const tc_compilation *c, int kernel) {
  if (!c->generated || kernel < 0 || kernel >= tc_kernel_count(c)) return NULL;
  return c->code[kernel].meta;
}
