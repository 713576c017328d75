/* llvm_version.c - the LLVM the compiler is linked with, for --version.
 * This file is the seed of the NVPTX back end (tile IR -> LLVM IR -> PTX),
 * which is built only when LLVM 19 is found. */
#include <llvm-c/Core.h>
#include <stdio.h>

#include "tilec.h"

const char *tc_llvm_version(char *buf, size_t size) {
  unsigned major, minor, patch;
  LLVMGetVersion(&major, &minor, &patch);
  snprintf(buf, size, "%u.%u.%u", major, minor, patch);
  return buf;
}
