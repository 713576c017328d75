/* jit.c - a C program built against an installed tile with `pkg-config
 * --cflags --libs tile-jit` alone (tests/install/check_install.sh): it
 * compiles a kernel of an installed standard-library file to a cubin at
 * run time through libtile_jit, into a given cache directory, and checks
 * where the cubin came from.
 *   jit FILE.tile CACHE_DIR compiled|disk */
#include <stdio.h>
#include <string.h>

#include "tile_jit.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: jit FILE.tile CACHE_DIR compiled|disk\n");
    return 2;
  }
  tile_jit_options o = {.cache_dir = argv[2]};
  tile_jit *j;
  if (tile_jit_create(&o, &j) != TILE_OK) {
    fprintf(stderr, "jit: %s\n", tile_last_error());
    return 1;
  }
  tile_jit_source src = {.filename = argv[1], .kernel = "softmax"};
  const void *cubin;
  size_t size;
  tile_jit_origin from;
  tile_status st = tile_jit_cubin(j, &src, &cubin, &size, &from);
  if (st != TILE_OK) {
    fprintf(stderr, "jit: %s: %s\n", tile_status_name(st), tile_last_error());
    tile_jit_destroy(j);
    return 1;
  }
  const char *got = from == TILE_JIT_COMPILED ? "compiled" : from == TILE_JIT_DISK ? "disk" : "memory";
  printf("jit: softmax of %s, %zu-byte cubin (%s)\n", argv[1], size, got);
  tile_jit_destroy(j);
  return strcmp(got, argv[3]) ? 1 : 0;
}
