/* target.c - the LLVM side of the back end: the NVPTX target machine for
 * sm_90a, libdevice linking for math functions, the O3 pipeline and PTX
 * emission, all through the LLVM C API.
 *
 * libdevice (the CUDA toolkit's bitcode math library) is linked only when
 * the module calls __nv_* functions; its functions get internal linkage so
 * that O3 keeps just what is used. nvvm-reflect-ftz is 0: subnormals are
 * kept, as the interpreter keeps them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "lower.h"

#define NVPTX_TRIPLE "nvptx64-nvidia-cuda"
#define NVPTX_CPU "sm_90a"
#define NVPTX_FEATURES "+ptx80"
/* Where the CUDA toolkit keeps libdevice, relative to its root. */
#define LIBDEVICE_PATH "/nvvm/libdevice/libdevice.10.bc"
#define DEFAULT_CUDA_ROOT "/usr/local/cuda"

static char *dup_message(const char *prefix, const char *msg) {
  size_t n = strlen(prefix) + (msg ? strlen(msg) : 0) + 1;
  char *s = malloc(n);
  snprintf(s, n, "%s%s", prefix, msg ? msg : "");
  return s;
}

bool target_create(Target *t, char **error) {
  memset(t, 0, sizeof *t);
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  LLVMTargetRef target;
  char *msg = NULL;
  if (LLVMGetTargetFromTriple(NVPTX_TRIPLE, &target, &msg)) {
    *error = dup_message("no NVPTX target in this LLVM: ", msg);
    LLVMDisposeMessage(msg);
    return false;
  }
  t->tm = LLVMCreateTargetMachine(target, NVPTX_TRIPLE, NVPTX_CPU, NVPTX_FEATURES, LLVMCodeGenLevelAggressive,
                                  LLVMRelocDefault, LLVMCodeModelDefault);
  if (!t->tm) {
    *error = dup_message("cannot create the NVPTX target machine", NULL);
    return false;
  }
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(t->tm);
  t->datalayout = LLVMCopyStringRepOfTargetData(td);
  LLVMDisposeTargetData(td);
  t->triple = strdup(NVPTX_TRIPLE);
  return true;
}

void target_destroy(Target *t) {
  if (t->tm) LLVMDisposeTargetMachine(t->tm);
  if (t->datalayout) LLVMDisposeMessage(t->datalayout);
  free(t->triple);
  memset(t, 0, sizeof *t);
}

static bool calls_libdevice(LLVMModuleRef m) {
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    size_t len;
    const char *name = LLVMGetValueName2(f, &len);
    if (LLVMIsDeclaration(f) && len > 5 && !strncmp(name, "__nv_", 5)) return true;
  }
  return false;
}

static bool link_libdevice(const Target *t, LLVMModuleRef m, char **error) {
  const char *root = getenv("CUDA_HOME");
  char path[4096];
  snprintf(path, sizeof path, "%s%s", root && *root ? root : DEFAULT_CUDA_ROOT, LIBDEVICE_PATH);
  LLVMMemoryBufferRef buf;
  char *msg = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "cannot read libdevice (%s): ", path);
    *error = dup_message(prefix, msg);
    LLVMDisposeMessage(msg);
    return false;
  }
  LLVMModuleRef lib;
  bool bad = LLVMParseBitcodeInContext2(LLVMGetModuleContext(m), buf, &lib);
  LLVMDisposeMemoryBuffer(buf);
  if (bad) {
    *error = dup_message("cannot parse libdevice: ", path);
    return false;
  }
  LLVMSetTarget(lib, t->triple);
  LLVMSetDataLayout(lib, t->datalayout);
  /* Every libdevice function becomes internal after linking, so O3
   * deletes the unused ones. */
  if (LLVMLinkModules2(m, lib)) {
    *error = dup_message("linking libdevice failed", NULL);
    return false;
  }
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    size_t len;
    const char *name = LLVMGetValueName2(f, &len);
    if (!LLVMIsDeclaration(f) && len > 5 && !strncmp(name, "__nv_", 5)) LLVMSetLinkage(f, LLVMInternalLinkage);
  }
  return true;
}

/* sitofp of an i1 (true is -1) becomes a select of -1.0 and 0.0. The
 * optimizer narrows conversions of values known to be 0 or -1 to i1
 * (sitofp (ashr x, 31) and the like), and LLVM 19's NVPTX back end
 * selects sitofp i1 as selp 1, 0 and a signed conversion: +1.0 for true
 * (tile-gpu diff seed 20201; test_codegen checks the PTX). */
static void replace_bool_to_signed_float(LLVMModuleRef m) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMTypeRef i1 = LLVMInt1TypeInContext(ctx);
  for (LLVMValueRef fn = LLVMGetFirstFunction(m); fn; fn = LLVMGetNextFunction(fn))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
      LLVMValueRef next;
      for (LLVMValueRef ins = LLVMGetFirstInstruction(bb); ins; ins = next) {
        next = LLVMGetNextInstruction(ins);
        if (LLVMGetInstructionOpcode(ins) != LLVMSIToFP) continue;
        LLVMValueRef x = LLVMGetOperand(ins, 0);
        if (LLVMTypeOf(x) != i1) continue;
        LLVMTypeRef ft = LLVMTypeOf(ins);
        LLVMPositionBuilderBefore(b, ins);
        LLVMValueRef r = LLVMBuildSelect(b, x, LLVMConstReal(ft, -1.0), LLVMConstReal(ft, 0.0), "");
        LLVMReplaceAllUsesWith(ins, r);
        LLVMInstructionEraseFromParent(ins);
      }
    }
  LLVMDisposeBuilder(b);
}

bool target_optimize(const Target *t, LLVMModuleRef m, char **error) {
  LLVMSetTarget(m, t->triple);
  LLVMSetDataLayout(m, t->datalayout);
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMAddModuleFlag(m, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", strlen("nvvm-reflect-ftz"),
                    LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), 0, 0)));
  if (calls_libdevice(m) && !link_libdevice(t, m, error)) return false;
  /* No SLP or loop vectorizer: the lowering emits the vector accesses
   * itself, and for NVPTX LLVM 19's vectorizers narrow integer chains
   * wrongly (tests/gen found a loop of i8 additions vectorized into a
   * wrong s16x2 sum, and uitofp of a sign-extended byte narrowed to the
   * byte). Both skip functions marked noimplicitfloat (the pass builder's
   * options to turn them off are not honoured by LLVMRunPasses here); the
   * mark goes before code generation, whose load/store vectorizer also
   * honours it and is wanted. */
  unsigned nif = LLVMGetEnumAttributeKindForName("noimplicitfloat", strlen("noimplicitfloat"));
  for (LLVMValueRef fn = LLVMGetFirstFunction(m); fn; fn = LLVMGetNextFunction(fn))
    if (LLVMCountBasicBlocks(fn)) LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, nif, 0));
  LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
  LLVMErrorRef err = LLVMRunPasses(m, "default<O3>", t->tm, opts);
  LLVMDisposePassBuilderOptions(opts);
  for (LLVMValueRef fn = LLVMGetFirstFunction(m); fn; fn = LLVMGetNextFunction(fn))
    LLVMRemoveEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, nif);
  if (!err) replace_bool_to_signed_float(m);
  if (err) {
    char *msg = LLVMGetErrorMessage(err);
    *error = dup_message("LLVM optimization failed: ", msg);
    LLVMDisposeErrorMessage(msg);
    return false;
  }
  return true;
}

char *target_emit_ptx(const Target *t, LLVMModuleRef m, char **error) {
  LLVMMemoryBufferRef buf;
  char *msg = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(t->tm, m, LLVMAssemblyFile, &msg, &buf)) {
    *error = dup_message("PTX emission failed: ", msg);
    LLVMDisposeMessage(msg);
    return NULL;
  }
  size_t n = LLVMGetBufferSize(buf);
  char *ptx = malloc(n + 1);
  memcpy(ptx, LLVMGetBufferStart(buf), n);
  ptx[n] = 0;
  LLVMDisposeMemoryBuffer(buf);
  return ptx;
}
