/* fuzz_codegen.c - libFuzzer target over the GPU back end up to PTX: every
 * input that compiles as a .tile file goes through tc_generate with
 * TC_LINKER_NONE (layouts, scheduling, shared-memory allocation, lowering,
 * LLVM IR, LLVM O3 and the NVPTX back end; no ptxas, no GPU), and the
 * lowered IR, LLVM IR, PTX, the C header and each kernel's metadata and
 * statistics are read back. The metadata must parse as libtile parses it. Built only
 * where LLVM 19 is found (tests/fuzz/meson.build). Any crash, sanitizer
 * report, leak or timeout is a bug; diagnostics (budgets, unsupported
 * shapes) are expected.
 *
 * With TILE_FUZZ_LINKER=1 in the environment (scripts/fuzz-coverage.sh
 * sets it; too slow for fuzzing: a ptxas run per input) the PTX is also
 * linked into a cubin, by ptxas, nvJitLink or the automatic choice in
 * turn (by the input's size), and the header embeds it. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "tile.h"
#include "tilec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tc_compilation *c = tc_compile("fuzz.tile", (const char *)data, size, NULL);
  if (!c) return 0;
  if (tc_error_count(c) == 0) {
    static const tc_linker linkers[] = {TC_LINKER_PTXAS, TC_LINKER_NVJITLINK, TC_LINKER_AUTO};
    const char *link = getenv("TILE_FUZZ_LINKER");
    bool linked = link && *link == '1';
    tc_codegen_options opt = {0};
    opt.linker = linked ? linkers[size % 3] : TC_LINKER_NONE;
    opt.debug_barriers = linked && size % 2; /* the barrier debug mode too */
    if (tc_generate(c, &opt)) {
      free(tc_emit(c, TC_EMIT_LOWERED));
      free(tc_emit(c, TC_EMIT_LLVM));
      free(tc_emit(c, TC_EMIT_PTX));
      free(tc_emit_header(c, "FUZZ_KERNELS_H", linked)); /* the cubin embedded when there is one */
      for (int k = 0; k < tc_kernel_count(c); k++) {
        tc_kernel_stats stats;
        (void)tc_kernel_get_stats(c, k, &stats);
        const char *meta = tc_kernel_meta(c, k);
        tile_kernel_info *info = NULL;
        /* What the compiler writes, libtile must read. */
        if (meta && tile_meta_parse(meta, &info) != TILE_OK) abort();
        tile_meta_free(info);
      }
    }
    (void)tc_diagnostics(c);
  }
  tc_free(c);
  return 0;
}
