/* codegen_none.c - the GPU back end's entry points in a build without
 * LLVM (meson -Dllvm=disabled, used by the fuzzing build): they report
 * that the back end is missing instead of failing to link. */
#include <stdlib.h>

#include "compilation.h"

bool tc_generate(tc_compilation *c, const tc_codegen_options *options) {
  (void)options;
  diag_error(&c->diags, (SrcLoc){0, 0, 0}, "this build of the compiler has no GPU back end (built without LLVM)");
  return false;
}

const void *tc_cubin(const tc_compilation *c, size_t *size) {
  (void)c;
  if (size) *size = 0;
  return NULL;
}

bool tc_kernel_get_stats(const tc_compilation *c, int kernel, tc_kernel_stats *out) {
  (void)c, (void)kernel, (void)out;
  return false;
}

const char *tc_kernel_meta(const tc_compilation *c, int kernel) {
  (void)c, (void)kernel;
  return NULL;
}

char *tc_emit_header(const tc_compilation *c, const char *guard_name, bool embed) {
  (void)c, (void)guard_name, (void)embed;
  return NULL;
}
