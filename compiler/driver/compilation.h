/* compilation.h - the state behind a tc_compilation handle, shared by the
 * files of the compiler library's driver: compile.c (front end, passes,
 * interpreter), codegen.c (the GPU back end) and header.c (the C header
 * that tilec writes for AOT use). */
#ifndef TILE_COMPILATION_H
#define TILE_COMPILATION_H

#include "../front/parser.h"
#include "../ir/ir.h"
#include "tilec.h"

/* What the GPU back end produced for one kernel. */
typedef struct KernelCode {
  char *meta;            /* metadata text (runtime/tile.h's format) */
  int warps;
  unsigned shared_bytes; /* dynamic shared memory at launch */
  tc_kernel_stats stats;
  bool have_stats;
} KernelCode;

struct tc_compilation {
  Arena arena;
  Source src;
  Diags diags;
  TokenList tokens;
  Program *prog;
  Module *module;
  char *rendered;
  int rendered_count; /* diagnostics in `rendered` (later ones re-render it) */
  /* GPU back end results (codegen.c), all malloc'd */
  bool generated;
  char *lowered, *llvm_ir, *ptx;
  unsigned char *cubin;
  size_t cubin_size;
  KernelCode *code; /* one per module function */
  const char **imports; /* the imported files' paths (imports.c) */
  int nimports;
};

/* Reads the compiled program's imports and joins their items to it
 * (imports.c). */
void compile_imports(tc_compilation *c, const tc_options *o);

/* Renders the kernel's metadata text; descs (one per parameter, may be
 * NULL) gives each tensor descriptor's box and swizzle. */
struct DescBox;
char *kernel_meta_text(const Func *f, int warps, unsigned shared_bytes, const struct DescBox *descs);
/* Frees the back end's results. */
void codegen_free(tc_compilation *c);

#endif
