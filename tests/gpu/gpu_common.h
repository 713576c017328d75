/* gpu_common.h - shared pieces of the GPU test suite and the GPU
 * benchmarks (one program, tile-gpu, with the commands `test` and `bench`,
 * so that a single statically linked binary travels to the GPU machine).
 *
 * A kernel variant is compiled in process (front end, interpreter IR and
 * the NVPTX back end), its cubin loaded through libtile, and host buffers
 * mirror device buffers so the same inputs can run in the interpreter.
 */
#ifndef TILE_GPU_COMMON_H
#define TILE_GPU_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tile.h"
#include "tilec.h"

/* Exit status meson reads as "skipped". */
#define EXIT_SKIP 77

typedef struct Gpu {
  tile_runtime *rt;
  tile_device_properties props;
  const char *source_root;
  int passed, failed;
} Gpu;

/* A compiled variant: compilation (for the interpreter), module, kernel. */
typedef struct Variant {
  tc_compilation *comp;
  tile_module *mod;
  tile_kernel *kernel;
  double compile_ms; /* tc_compile + tc_generate */
} Variant;

/* A host buffer mirrored on the device. */
typedef struct DBuf {
  const char *name;
  int kind; /* ScalarKind of the elements */
  size_t n, elem_bytes;
  void *host;
  uint64_t dev;
} DBuf;

/* Deterministic inputs. */
typedef struct Rng {
  uint64_t state;
} Rng;
double rng_uniform(Rng *r, double lo, double hi);

/* Creates the runtime; returns false (and prints why) when there is no
 * driver or device, so the caller can exit with EXIT_SKIP. */
bool gpu_open(Gpu *g, const char *source_root);
void gpu_close(Gpu *g);

/* Compiles `relpath` (under the source root) with NAME=VALUE defines
 * (NULL-terminated pairs) to a cubin and loads its only kernel. */
bool variant_build(Gpu *g, const char *relpath, const char *const *defines, Variant *v);
/* The source with every `@pipeline(...)` annotation removed (malloc'd):
 * annotations never change results, which the suites check with it. */
char *strip_pipeline(const char *src, size_t *len);
/* src with every @name(...) replaced by `with` (malloc'd). */
char *replace_annotation(const char *src, const char *name, const char *with, size_t *len);
/* The source of a file under the root (malloc'd), or NULL. */
char *variant_read_source(Gpu *g, const char *relpath, size_t *len);
/* From source text (reported as relpath). */
bool variant_build_text(Gpu *g, const char *relpath, const char *src, size_t len, const char *const *defines,
                        const tc_codegen_options *go, Variant *v);
/* Only the kernel named `kernel` of the file (of the text). */
bool variant_build_text_kernel(Gpu *g, const char *relpath, const char *src, size_t len, const char *kernel,
                               const char *const *defines, Variant *v);
bool variant_build_kernel(Gpu *g, const char *relpath, const char *kernel, const char *const *defines, Variant *v);
bool variant_build_kernel_opts(Gpu *g, const char *relpath, const char *kernel, const char *const *defines,
                               const tc_codegen_options *go, Variant *v);
/* The same with back-end options (debug modes). */
bool variant_build_opts(Gpu *g, const char *relpath, const char *const *defines, const tc_codegen_options *go,
                        Variant *v);
void variant_free(Variant *v);
int64_t variant_const(const Variant *v, const char *name, int64_t fallback);

bool dbuf_alloc(Gpu *g, DBuf *b, const char *name, const char *elem, size_t n);
void dbuf_free(Gpu *g, DBuf *b);
void dbuf_fill(DBuf *b, Rng *r, double lo, double hi);
/* NaN for floats, 0x5A bytes for integers, on the host copy. */
void dbuf_poison(DBuf *b);
double dbuf_get(const DBuf *b, size_t i);
/* Every element of b's host copy as a double (malloc'd; NULL when out of
 * memory): references over large buffers read these instead of calling
 * dbuf_get in their inner loops. */
double *dbuf_doubles(const DBuf *b);
void dbuf_set(DBuf *b, size_t i, double v);
bool dbuf_upload(Gpu *g, DBuf *b);
bool dbuf_download(Gpu *g, DBuf *b);

double now_ms(void);
/* Prints a case's line ("ok  " or "FAIL", its name, the milliseconds
 * since t0) and counts it in g, and in *failed when failed is not NULL. */
void gpu_report(Gpu *g, const char *name, bool ok, double t0, int *failed);
/* Stops the suite (exit 124, naming the last finished test) when no test
 * finishes for TILE_GPU_TEST_SECONDS seconds (default 120). */
void gpu_watchdog_start(void);
int cmp_double(const void *a, const void *b);

#endif
