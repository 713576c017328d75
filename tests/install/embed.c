/* embed.c - a C program built against an installed tile (tests/install/
 * check_install.sh): it includes the installed headers, links the
 * installed archives through pkg-config alone, compiles a standard-library
 * kernel from the installed share/tile/std to PTX with the compiler
 * library, and makes a libtile runtime (which, on a machine without a GPU,
 * reports why it cannot). Exit 0 when all of that worked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tile.h"
#include "tilec.h"

/* Source files above this are refused (the standard library's are a few KiB). */
#define EMBED_MAX_SOURCE (1 << 20)

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: embed FILE.tile\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  char *src = malloc(EMBED_MAX_SOURCE);
  size_t len = src ? fread(src, 1, EMBED_MAX_SOURCE, f) : 0;
  fclose(f);
  if (!src || len == 0 || len == EMBED_MAX_SOURCE) {
    fprintf(stderr, "embed: cannot read %s\n", argv[1]);
    return 1;
  }
  tc_compilation *c = tc_compile(argv[1], src, len, NULL);
  free(src);
  if (!c || tc_error_count(c)) {
    fprintf(stderr, "embed: %s\n", c ? tc_diagnostics(c) : "out of memory");
    return 1;
  }
  if (!tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE})) {
    fprintf(stderr, "embed: %s\n", tc_diagnostics(c));
    return 1;
  }
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  int ok = ptx && strstr(ptx, ".entry ") != NULL;
  printf("compiled %d kernel(s) of %s to %zu bytes of PTX\n", tc_kernel_count(c), argv[1], ptx ? strlen(ptx) : 0);
  free(ptx);
  tc_free(c);
  tile_runtime *rt = NULL;
  tile_status st = tile_runtime_create(NULL, &rt);
  printf("libtile: %s%s%s\n", tile_status_name(st), st == TILE_OK ? "" : ": ", st == TILE_OK ? "" : tile_last_error());
  if (rt) tile_runtime_destroy(rt);
  return ok ? 0 : 1;
}
