/* harness.h - helpers for tests that compile .tile kernels and run them in
 * the interpreter against C references: reading sources from the tree,
 * typed host buffers (random fill, poisoning, element access in double),
 * the relative-error measure every kernel test uses, and small searches
 * in the text the compiler emits. */
#ifndef TILE_TEST_HARNESS_H
#define TILE_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tilec.h"

/* A host buffer of `n` elements of one element type ("f32", "bf16", ...). */
typedef struct HBuf {
  void *data;
  size_t n, elem_bytes;
  int kind; /* ScalarKind */
  const char *name;
} HBuf;

/* Deterministic generator for test inputs. */
typedef struct Rng {
  uint64_t state;
} Rng;

uint64_t rng_next(Rng *r);
double rng_uniform(Rng *r, double lo, double hi);

/* Reads a file relative to the source tree (TILE_SOURCE_ROOT). */
char *harness_read_source(const char *relpath, size_t *len);
/* Compiles kernel `kernel` (NULL: the first) of a file of the tree with
 * NAME=VALUE defines (NULL-terminated pairs: "BLOCK", "128", NULL); aborts
 * the test with the diagnostics on failure. */
tc_compilation *harness_compile(const char *relpath, const char *kernel, const char *const *defines);
/* Compiles source text (every kernel) down to the GPU back end's output
 * and returns stage `what` (malloc'd); aborts the test on any error. The
 * lowered IR comes without its layout listing. */
char *harness_emit_source(const char *src, tc_emit_kind what);
/* cdiv for grid sizes. */
static inline int64_t harness_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

HBuf hbuf_new(const char *elem, size_t n, const char *name);
void hbuf_free(HBuf *b);
/* Fills with uniform values in [lo, hi), rounded to the element type
 * (integers: rounded toward zero). */
void hbuf_fill_uniform(HBuf *b, Rng *r, double lo, double hi);
/* Fills with a value no kernel writes by accident: NaN for floats,
 * 0x5A5A... bit patterns for integers. */
void hbuf_poison(HBuf *b);
double hbuf_get(const HBuf *b, size_t i);
void hbuf_set(HBuf *b, size_t i, double v);
tc_buffer hbuf_tc(const HBuf *b);

/* Norm-wise relative error: max |got - want| / max |want| (or the absolute
 * error when want is all zeros). NaN in `got` gives +inf. */
double rel_error(const HBuf *got, const double *want, size_t n);

/* prefix + n copies of open + middle + n copies of close + suffix
 * (malloc'd, NUL terminated): deeply nested sources for limit tests. */
char *harness_nested(const char *prefix, char open, const char *middle, char close, const char *suffix, int n);

/* Words of a specialization's defines: five NAME, VALUE pairs and the
 * terminating NULL, with room to spare. */
#define HARNESS_SPEC_WORDS 12

/* A kernel file and the defines of one specialization (as for
 * harness_compile), for tables of specializations. */
typedef struct KernelSpec {
  const char *path;
  const char *defines[HARNESS_SPEC_WORDS];
} KernelSpec;

/* "path -D NAME=VALUE ..." for messages about a compiled kernel (defines
 * as for harness_compile; truncated to size). */
void harness_describe(const char *path, const char *const *defines, char *buf, size_t size);

/* ---- text the compiler emits (lowered IR, PTX) ---- */

/* Occurrences of needle in text. */
int harness_count(const char *text, const char *needle);
/* The first line containing needle (malloc'd, without its newline), or NULL. */
char *harness_line_with(const char *text, const char *needle);

/* Printed IR with one loop, cut in three (each malloc'd): the ops before
 * the loop with its `for` line, the loop body, and what follows the loop.
 * Fails the test when text has no loop. */
typedef struct HarnessLoop {
  char *before, *body, *after;
} HarnessLoop;

HarnessLoop harness_split_at_loop(const char *text);
void harness_loop_free(HarnessLoop *l);

/* Runs kernel 0 of c in the interpreter; fails the test with the message
 * on error. */
void harness_run(tc_compilation *c, const int64_t grid[3], const tc_arg *args, int nargs, const HBuf *const *bufs,
                 int nbufs);

#endif
