/* kernel_gen.h - a generator of random valid kernels of the tile language,
 * and the pieces a driver needs to run them and compare the results.
 *
 * kg_generate(seed) writes the source of one .tile file holding one or
 * more kernels that are well-typed and whose every memory access is in
 * bounds (or masked) by construction, plus a description of each kernel:
 * its parameters (buffers with element type, length, initial contents and
 * the comparison that the spec allows between the GPU and the interpreter;
 * scalars with their values) and its grid. The same seed gives the same
 * file on every machine (no floating-point state, no libc randomness).
 *
 * Three programs use it (tests/gen/README.md): a compile smoke test over
 * the whole compiler, a differential test of the optimizer in the
 * interpreter, and `tile-gpu diff`, a differential test of the GPU back end
 * against the interpreter. kg_reduce shrinks a program that shows a
 * difference to a small reproducer.
 */
#ifndef TILE_KERNEL_GEN_H
#define TILE_KERNEL_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tilec.h"

/* Parameters of one generated kernel, at most. A kernel has a few dozen
 * statements and each load, store or atomic may add a buffer; the
 * generator stops adding memory statements well before this. */
#define KG_MAX_PARAMS 48
/* Bytes of a parameter or kernel name ("out12", "k15"), with the NUL. */
#define KG_NAME_BYTES 16

typedef enum KgRole {
  KG_INPUT,   /* read only; filled before the run */
  KG_OUTPUT,  /* written by stores; poisoned before the run */
  KG_ACCUM,   /* the target of atomics; filled before the run */
  KG_SCALAR,  /* a scalar argument */
} KgRole;

typedef enum KgFill {
  KG_FILL_NONE,    /* scalars */
  KG_FILL_RANGE,   /* uniform in [lo, hi] (integers: whole numbers), rounded to the type */
  KG_FILL_SPECIAL, /* boundary values: NaN, infinities, -0.0, subnormals, MIN, MAX, random bits */
  KG_FILL_BYTES,   /* random bytes (i1 buffers: only bit 0 counts) */
  KG_FILL_POISON,  /* NaN for floats, 0x5A bytes for integers */
} KgFill;

/* How a buffer's contents after the run must compare with the
 * interpreter's (spec/semantics.md and spec/builtins.md, "On the GPU"). */
typedef enum KgCompare {
  KG_CMP_EXACT,     /* the same bits (any NaN equals any NaN) */
  KG_CMP_TOLERANCE, /* |gpu - interp| <= atol + rtol * |interp| per element */
} KgCompare;

typedef struct KgParam {
  char name[KG_NAME_BYTES];
  KgRole role;
  const char *elem;   /* element type name ("f32", "bf16", ...), static text */
  size_t length;      /* buffers: elements */
  KgFill fill;
  double lo, hi;      /* KG_FILL_RANGE */
  int64_t ivalue;     /* integer and i1 scalars (the bits, for u64) */
  double fvalue;      /* float scalars (exactly representable in the type) */
  KgCompare cmp;      /* buffers */
  double rtol, atol;  /* KG_CMP_TOLERANCE */
  const char *why;    /* the reason for a tolerance (static text), or NULL */
} KgParam;

typedef struct KgKernel {
  char name[KG_NAME_BYTES];
  int nparams;
  KgParam params[KG_MAX_PARAMS]; /* in the order of the signature (runtime parameters only) */
  int64_t grid[3];
  int warps;                     /* the default of its `const W` (for @warps(W)) */
  size_t text_begin, text_end;   /* its text in the program's source, helpers included */
} KgKernel;

typedef struct KgProgram {
  uint64_t seed;
  char *source; /* NUL-terminated */
  size_t len;
  int nkernels;
  KgKernel *kernels;
} KgProgram;

/* Parts of the language the generator may use (all by default). Turning
 * one off regenerates a different program: for triage, not reduction. */
enum {
  KG_F_LOOPS = 1u << 0,   /* for and while loops with carried values */
  KG_F_IFS = 1u << 1,     /* if / else on scalars */
  KG_F_DOT = 1u << 2,     /* dot */
  KG_F_ATOMICS = 1u << 3, /* atomic_* on integers */
  KG_F_HELPERS = 1u << 4, /* helper functions */
  KG_F_MATH = 1u << 5,    /* exp, log, sin, ... (approximate on the GPU) */
  KG_F_REDUCE = 1u << 6,  /* sum, max, min, argmax, argmin */
  KG_F_MASKS = 1u << 7,   /* masked loads and stores */
  KG_F_FP8 = 1u << 8,     /* f8e4m3 and f8e5m2 values */
  KG_F_SCRATCH = 1u << 9, /* a store and a load of the same memory in one program */
  KG_F_SHAPES = 1u << 10, /* trans, reshape, expand_dims, broadcast_to */
  KG_F_ALL = (1u << 11) - 1,
};

/* Constructs that hit compiler bugs (tests/gen/README.md, with their
 * reproducers; test_gen_known_bugs.c has a test for each). The generator
 * leaves out those named in KgConfig.avoid, so that the random tests go on
 * finding new problems while a bug is open; KG_BUGS_KNOWN holds the open
 * ones (none now: the three below are fixed, kept for --avoid). */
enum {
  KG_BUG_FP8_ARGMAX = 1u << 0,     /* argmax/argmin of an fp8 tile crashed the back end (LLVM) */
  KG_BUG_BITCAST_HALF = 1u << 1,   /* bitcast between f16 and bf16 (also via i16) crashed the back end */
  KG_BUG_FP8_MINMAX_INF = 1u << 2, /* maximum/minimum/max/min of f8e5m2 saturated inf, except when folded */
  KG_BUGS_KNOWN = 0,
};

typedef struct KgConfig {
  int kernels;        /* kernels per program (file) */
  unsigned features;  /* KG_F_* */
  unsigned avoid;     /* KG_BUG_*: constructs left out (default: every known bug) */
  int max_stmts;      /* statements per kernel, at most (loop bodies included) */
  int max_elems;      /* elements of a tile, at most (a power of two up to 4096) */
} KgConfig;

/* The defaults: one kernel, every feature, about 24 statements, tiles of up
 * to 64 x 64, known bugs avoided. */
void kg_config_init(KgConfig *cfg);

/* Never NULL (aborts when out of memory). */
KgProgram *kg_generate(uint64_t seed, const KgConfig *cfg);
void kg_free(KgProgram *p);

/* The text of kernel `k` alone with its helpers (malloc'd). */
char *kg_kernel_source(const KgProgram *p, int k, size_t *len);
/* A description of a kernel's parameters and grid (malloc'd), one line
 * per parameter: "out3 output f32[512] exact", "in0 input bf16[64]
 * range(-4, 4)", "s1 scalar i32 = 7". */
char *kg_describe(const KgKernel *k);

/* ---- running a kernel (gen_run.c) ---- */

size_t kg_elem_bytes(const char *elem);
/* Bytes of a buffer parameter. */
size_t kg_param_bytes(const KgParam *p);
/* The initial contents of a buffer parameter (deterministic in seed). */
void kg_fill(const KgParam *p, void *data, uint64_t seed);
/* Host copies of every buffer of k (NULL for scalars), filled from seed;
 * free with kg_buffers_free. */
void kg_buffers_alloc(const KgKernel *k, uint64_t seed, void *data[KG_MAX_PARAMS]);
void kg_buffers_free(const KgKernel *k, void *data[KG_MAX_PARAMS]);

typedef enum KgVerdict {
  KG_SAME,      /* bit for bit (NaN payloads aside) */
  KG_EXPLAINED, /* some bits differ, all within what the parameter's tag allows */
  KG_DIFFERENT, /* a difference the spec does not allow */
} KgVerdict;

typedef struct KgDiff {
  size_t differing;  /* elements whose bits differ */
  size_t beyond;     /* of those, beyond the tag's allowance */
  size_t first;      /* index of the first element beyond (or differing) */
  char detail[512];  /* the first few such elements: index, interpreter, other */
} KgDiff;

/* Compares buffer p after two runs: `want` from the interpreter, `got`
 * from the run under test. */
KgVerdict kg_compare(const KgParam *p, const void *want, const void *got, KgDiff *d);

/* Runs kernel k of compilation c (found by name) in the interpreter on the
 * buffers `data` (as from kg_buffers_alloc). max_steps: 0 for the default. */
bool kg_interpret(const tc_compilation *c, const KgKernel *k, void *const data[KG_MAX_PARAMS], uint64_t max_steps,
                  char **error);

/* Runs kernel k of source compiled with -O0 and with the default passes
 * on the same inputs (from seed) and compares every buffer bit for bit.
 * Returns the number of buffers that differ, or -1 when either compile or
 * run fails; msg (size bytes) says what differs or failed. */
int kg_compare_opt(const char *source, size_t len, const KgKernel *k, uint64_t seed, uint64_t max_steps, char *msg,
                   size_t size);

/* A KgStillFails predicate for kg_reduce: kg_compare_opt finds a
 * difference. `user` is a KgOptProbe. */
typedef struct KgOptProbe {
  const KgKernel *k;
  uint64_t seed, max_steps;
} KgOptProbe;
bool kg_opt_still_differs(const char *source, size_t len, void *user);

/* ---- reduction (gen_reduce.c) ---- */

/* The predicate a reduction keeps true: "this source still shows the
 * problem" (it must compile, run and still differ). */
typedef bool (*KgStillFails)(const char *source, size_t len, void *user);

/* Removes lines and whole blocks of `source` (a kernel's text as
 * kg_kernel_source gives it) while still_fails holds, calling it at most
 * max_checks times; returns the smallest source found (malloc'd). */
char *kg_reduce(const char *source, size_t len, KgStillFails still_fails, void *user, int max_checks, int *checks);

#endif
