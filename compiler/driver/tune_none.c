/* tune_none.c - `tilec tune` in a build without the GPU back end (LLVM):
 * the JIT it runs on (runtime/jit) needs the back end, so there is nothing
 * to tune with; the message says so. */
#include <string.h>

#include "run.h"

int cli_tune(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    fputs(tune_usage_text(), stdout);
    return EXIT_OK;
  }
  fprintf(stderr, "tilec tune: this tilec was built without the GPU back end (LLVM 19), which tuning needs\n");
  return EXIT_USAGE;
}
