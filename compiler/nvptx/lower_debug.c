/* lower_debug.c - device_print and device_assert on the GPU, and vprintf.
 *
 * device_print writes what the interpreter writes (interp_ops.c), one
 * line per element: "pid (x, y, z) idx (i, j) MESSAGE: VALUE", or
 * "pid (x, y, z) MESSAGE: VALUE" for a scalar and "pid (x, y, z)
 * MESSAGE" without a value, the value formatted by num_print_format. The
 * thread that holds an element prints it (the first of its replicas); a
 * scalar is printed by the program's first computing thread. Lines of
 * different threads and programs come in any order (vprintf's buffer is
 * written out when the host synchronizes).
 *
 * device_assert: a thread holding an element whose condition is false
 * prints "pid (x, y, z) idx (i, j) device_assert failed: MESSAGE" and
 * calls __assertfail (the CUDA assert: the driver prints the message, the
 * kernel stops, and the context reports CUDA_ERROR_ASSERT).
 *
 * Both are calls (vprintf, __assertfail): in a kernel with tensor-core
 * loops ptxas then serializes the wgmmas around them (its C7510-class
 * notes), so they are for debugging, not for kernels being measured.
 */
#include <stdio.h>
#include <string.h>

#include "../numeric/numeric.h"
#include "lower_internal.h"

/* Fields of one vprintf call: the program (3), up to TILE_MAX_RANK index
 * coordinates and the value. */
#define PRINTF_MAX_FIELDS (3 + TILE_MAX_RANK + 1)
/* Longest format: the message (DEVICE_MESSAGE_MAX in sema, every '%'
 * doubled) and the fixed parts. */
#define PRINTF_FORMAT_MAX 1024

void lower_vprintf(Lower *L, const char *fmt, LLVMValueRef *vals, int n) {
  LLVMValueRef str = LLVMBuildGlobalStringPtr(L->b, fmt, "tile_fmt");
  LLVMTypeRef gptr = LLVMPointerTypeInContext(L->ctx, 0);
  LLVMValueRef buf = LLVMConstNull(gptr);
  if (n > 0) {
    LLVMTypeRef fields[PRINTF_MAX_FIELDS + 3];
    for (int i = 0; i < n; i++) fields[i] = LLVMTypeOf(vals[i]);
    LLVMTypeRef st = LLVMStructTypeInContext(L->ctx, fields, (unsigned)n, 0);
    LLVMValueRef mem = LLVMBuildAlloca(L->entry_b, st, "printf_args");
    for (int i = 0; i < n; i++) LLVMBuildStore(L->b, vals[i], LLVMBuildStructGEP2(L->b, st, mem, (unsigned)i, ""));
    buf = LLVMBuildAddrSpaceCast(L->b, mem, gptr, "");
  }
  LLVMValueRef fn = LLVMGetNamedFunction(L->mod, "vprintf");
  LLVMTypeRef pt[2] = {gptr, gptr};
  LLVMTypeRef fty = LLVMFunctionType(L->t_i32, pt, 2, 0);
  if (!fn) fn = LLVMAddFunction(L->mod, "vprintf", fty);
  LLVMValueRef args[2] = {LLVMBuildAddrSpaceCast(L->b, str, gptr, ""), buf};
  LLVMBuildCall2(L->b, fty, fn, args, 2, "");
}

/* The message with every '%' doubled (it becomes part of a format). */
static void escape_percent(const char *msg, char *out, size_t size) {
  size_t n = 0;
  for (; msg && *msg && n + 3 < size; msg++) {
    if (*msg == '%') out[n++] = '%';
    out[n++] = *msg;
  }
  out[n] = 0;
}

/* "pid (%d, %d, %d)[ idx (%d, ...)]" and its three or more values. */
static int where_fields(Lower *L, const Layout *l, LLVMValueRef flat, char *fmt, size_t size, LLVMValueRef *vals) {
  static const char *const ctaid[3] = {"llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.ctaid.y",
                                       "llvm.nvvm.read.ptx.sreg.ctaid.z"};
  int n = 0;
  for (int a = 0; a < 3; a++) vals[n++] = call_intrinsic(L, ctaid[a], L->t_i32, NULL, 0);
  size_t len = (size_t)snprintf(fmt, size, "pid (%%d, %%d, %%d)");
  if (!l || !flat) return n;
  len += (size_t)snprintf(fmt + len, size - len, " idx (");
  for (int d = 0; d < l->rank; d++) {
    vals[n++] = coord_of(L, l, flat, d);
    len += (size_t)snprintf(fmt + len, size - len, d ? ", %%d" : "%%d");
  }
  snprintf(fmt + len, size - len, ")");
  return n;
}

/* A register value as vprintf takes it: i64 or double. */
static LLVMValueRef print_arg(Lower *L, LLVMValueRef v, ScalarKind k) {
  switch (num_print_kind(k)) {
  case NUM_PRINT_DOUBLE:
    if (k == SK_F8E4M3 || k == SK_F8E5M2) v = cast_scalar(L, v, k, SK_F32);
    return LLVMBuildFPExt(L->b, v, L->t_f64, "");
  case NUM_PRINT_SIGNED: return LLVMBuildSExt(L->b, v, L->t_i64, "");
  default: return LLVMBuildZExt(L->b, v, L->t_i64, "");
  }
}

/* Registers that repeat an earlier one (a register bit without a flat
 * bit) print nothing. */
static bool repeats(const Layout *l, uint32_t r) {
  for (int j = 0; j < l->nreg; j++)
    if (!l->reg[j] && (r >> j & 1)) return true;
  return false;
}

typedef struct PrintCtx {
  const Op *op;
  const LTile *t;
  uint32_t r;
  LLVMValueRef flat;
} PrintCtx;

static void print_element(Lower *L, void *p) {
  PrintCtx *c = p;
  const Value *v = c->op->noperands ? c->op->operands[0] : NULL;
  char where[160], msg[PRINTF_FORMAT_MAX / 2], fmt[PRINTF_FORMAT_MAX];
  LLVMValueRef vals[PRINTF_MAX_FIELDS];
  const Layout *l = v && v->type.rank ? c->t->layout : NULL;
  int n = where_fields(L, l, c->flat, where, sizeof where, vals);
  escape_percent(c->op->text, msg, sizeof msg);
  bool assert_op = c->op->kind == OP_DEVICE_ASSERT;
  if (assert_op || !v) {
    snprintf(fmt, sizeof fmt, "%s %s%s\n", where, assert_op ? "device_assert failed: " : "", msg);
  } else {
    ScalarKind k = (ScalarKind)v->type.kind;
    snprintf(fmt, sizeof fmt, "%s %s: %s\n", where, msg, num_print_format(k));
    vals[n++] = print_arg(L, c->t->regs[c->r], k);
  }
  lower_vprintf(L, fmt, vals, n);
  if (!assert_op) return;
  LLVMTypeRef gptr = LLVMPointerTypeInContext(L->ctx, 0);
  LLVMTypeRef pt[5] = {gptr, gptr, L->t_i32, gptr, L->t_i64};
  LLVMTypeRef fty = LLVMFunctionType(L->t_void, pt, 5, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(L->mod, "__assertfail");
  if (!fn) fn = LLVMAddFunction(L->mod, "__assertfail", fty);
  uint32_t fi = c->op->loc.file;
  const char *file = fi && (int)fi < L->opt->nfiles ? L->opt->files[fi]->name
                     : L->opt->source_name            ? L->opt->source_name
                                                      : "";
  LLVMValueRef args[5] = {
      LLVMBuildAddrSpaceCast(L->b, LLVMBuildGlobalStringPtr(L->b, c->op->text ? c->op->text : "", "tile_assert"), gptr, ""),
      LLVMBuildAddrSpaceCast(L->b, LLVMBuildGlobalStringPtr(L->b, file, "tile_file"), gptr, ""),
      const_i32(L, c->op->loc.line),
      LLVMBuildAddrSpaceCast(L->b, LLVMBuildGlobalStringPtr(L->b, L->f->name, "tile_kernel"), gptr, ""),
      LLVMConstInt(L->t_i64, 1, 0)};
  LLVMBuildCall2(L->b, fty, fn, args, 5, "");
  call_intrinsic(L, "llvm.trap", L->t_void, NULL, 0);
}

/* The program's first computing thread. */
static LLVMValueRef first_thread(Lower *L) { return LLVMBuildICmp(L->b, LLVMIntEQ, L->tid, const_i32(L, 0), ""); }

void lower_device_debug(Lower *L, const Op *op) {
  const Value *v = op->noperands ? op->operands[0] : NULL;
  LTile *t = v ? get_fixed(L, v) : NULL;
  if (v && !t) return;
  PrintCtx c = {op, t, 0, NULL};
  bool assert_op = op->kind == OP_DEVICE_ASSERT;
  if (!v || v->type.rank == 0) {
    LLVMValueRef pred = first_thread(L);
    if (assert_op) pred = LLVMBuildAnd(L->b, pred, LLVMBuildNot(L->b, t->regs[0], ""), "");
    guarded(L, pred, print_element, &c);
    return;
  }
  ThreadInfo *ti = thread_info(L, t->layout);
  for (uint32_t r = 0; r < (uint32_t)t->nregs; r++) {
    if (repeats(t->layout, r)) continue;
    c.r = r;
    c.flat = flat_index(L, t->layout, r);
    LLVMValueRef pred = ti->owner;
    if (assert_op) pred = LLVMBuildAnd(L->b, pred, LLVMBuildNot(L->b, t->regs[r], ""), "");
    guarded(L, pred, print_element, &c);
  }
}
