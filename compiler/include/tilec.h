/* tilec.h - the tile compiler as a library.
 *
 * Compile a .tile source (held in memory) into specialized tile IR, look at
 * the result of any stage, and run kernels in the reference interpreter.
 * A compilation owns all its memory; nothing here keeps global state, so
 * several compilations may run on different threads at once.
 *
 *   tc_options opt = {0};
 *   tc_compilation *c = tc_compile("softmax.tile", src, len, &opt);
 *   if (tc_error_count(c)) fputs(tc_diagnostics(c), stderr);
 *   ...
 *   tc_free(c);
 */
#ifndef TILEC_H
#define TILEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TILEC_VERSION "0.1.0"

typedef struct tc_compilation tc_compilation;

/* A const parameter value, as on the command line: -D NAME=VALUE. */
typedef struct tc_define {
  const char *name;
  const char *value;
} tc_define;

typedef struct tc_options {
  const char *kernel;          /* compile only this kernel; NULL: every kernel */
  const tc_define *defines;    /* applied to every kernel that has the name */
  int ndefines;
  bool no_opt;                 /* skip the IR optimization passes */
  bool verify_each_pass;       /* run the IR verifier after every pass */
  bool warnings_are_errors;    /* tilec -Werror: every warning is an error */
  bool no_warnings;            /* tilec -w: no warnings */
  /* Where `import "x.tile"` looks after the importing file's directory,
   * in order (tilec -I). */
  const char *const *include_dirs;
  int ninclude_dirs;
} tc_options;

/* Largest source text tc_compile accepts (64 MiB); a longer one gives one
 * error and is not read. */
#define TC_MAX_SOURCE_BYTES ((size_t)64 << 20)

/* Reads a whole source file of at most TC_MAX_SOURCE_BYTES (malloc'd, a
 * NUL after the text); NULL with *why (a static string, or strerror's)
 * set when it cannot. Used for imports, and by the JIT. */
char *tc_read_file(const char *path, size_t *len, const char **why);

/* Compiles source text; never returns NULL (except when out of memory).
 * Problems are reported as diagnostics, not by failing the call. */
tc_compilation *tc_compile(const char *filename, const char *source, size_t len, const tc_options *options);
void tc_free(tc_compilation *c);

int tc_error_count(const tc_compilation *c);
/* The files the compilation imported (import "x.tile"), as found (a path
 * relative to the current directory or absolute), in the order they were
 * read; a file imported twice is listed twice. For dependency files. */
int tc_import_count(const tc_compilation *c);
const char *tc_import_path(const tc_compilation *c, int i);
/* All diagnostics so far rendered as "file:line:col: error: ..." with the
 * source line and a caret; "" when there are none. Owned by the
 * compilation, valid until tc_free or until a later stage (tc_generate)
 * adds diagnostics: call it again then. */
const char *tc_diagnostics(const tc_compilation *c);

typedef enum tc_emit_kind {
  TC_EMIT_TOKENS,  /* one token per line */
  TC_EMIT_AST,     /* S-expressions */
  TC_EMIT_IR,      /* textual tile IR after the optimization passes */
  TC_EMIT_LOWERED, /* tile IR with the GPU layout of every value (tc_generate) */
  TC_EMIT_LLVM,    /* LLVM IR after the O3 pipeline (tc_generate) */
  TC_EMIT_PTX,     /* PTX for sm_90a (tc_generate) */
} tc_emit_kind;

/* The program at a stage, as text (malloc'd; free it). NULL if the
 * compilation did not get that far. */
char *tc_emit(const tc_compilation *c, tc_emit_kind kind);

/* Kernels of the compiled module (after specialization). */
int tc_kernel_count(const tc_compilation *c);
const char *tc_kernel_name(const tc_compilation *c, int kernel);
/* Index of a kernel by name, or -1. */
int tc_kernel_find(const tc_compilation *c, const char *name);

typedef enum tc_param_kind { TC_PARAM_INT, TC_PARAM_FLOAT, TC_PARAM_BOOL, TC_PARAM_PTR, TC_PARAM_DESC } tc_param_kind;

typedef struct tc_param {
  const char *name;
  tc_param_kind kind;
  const char *elem;     /* element type name: the scalar's type, or what a pointer/descriptor points to */
  int elem_bytes;       /* size of one element in memory */
  bool elem_signed;
  int desc_rank;        /* TC_PARAM_DESC */
} tc_param;

/* The value a kernel was specialized for, of an integer or bool const
 * parameter (after defaults and -D): false if there is no such one. */
bool tc_kernel_const_int(const tc_compilation *c, int kernel, const char *name, int64_t *value);

/* A kernel's autotuning candidates, its @config annotations in source
 * order (spec/annotations.md): how many, and the bindings of one as
 * NAME/VALUE strings (decimal integers; true and false for bool), owned
 * by c (made in its arena). tc_kernel_config_count returns -1 for no
 * such kernel; tc_kernel_config returns the number of bindings, at most
 * max of them written to out, or -1 for no such kernel or index. */
int tc_kernel_config_count(const tc_compilation *c, int kernel);
int tc_kernel_config(tc_compilation *c, int kernel, int index, tc_define *out, int max);

/* Runtime parameters of a kernel (const parameters are specialized away). */
int tc_param_count(const tc_compilation *c, int kernel);
tc_param tc_param_get(const tc_compilation *c, int kernel, int index);

/* ---- the GPU back end ---- */

typedef enum tc_linker {
  TC_LINKER_AUTO,      /* nvJitLink in process, else ptxas; ptxas when nvJitLink serialized wgmma */
  TC_LINKER_NVJITLINK, /* libnvJitLink.so.13, opened with dlopen */
  TC_LINKER_PTXAS,     /* the ptxas executable */
  TC_LINKER_NONE,      /* stop at PTX */
} tc_linker;

typedef struct tc_codegen_options {
  const char *arch;  /* NULL: "sm_90a" */
  tc_linker linker;
  /* Debug mode for barriers (tilec -g): every mbarrier wait gives up
   * after about 2 seconds and traps, printing the kernel, the barrier, its
   * phase and the program, instead of hanging the GPU. */
  bool debug_barriers;
  /* For testing that mode only: breaks every TMA barrier's byte count,
   * so that the kernel's waits never complete. */
  bool debug_break_tma_barriers;
  /* Register spills reported by ptxas are errors (tilec -Werror=spills),
   * not warnings. */
  bool spills_are_errors;
  /* mbarrier waits poll try_wait without its suspend-time hint (for
   * measuring what the hint does; see docs/backend.md). */
  bool mbar_poll;
  /* Two products over one A tile (a gated MLP's gate and up) stay two
   * wgmma instructions instead of one twice as wide (docs/backend.md,
   * "Paired products"; for measuring what the pairing does). */
  bool separate_products;
} tc_codegen_options;

/* Registers and memory of a compiled kernel. */
typedef struct tc_kernel_stats {
  int warps;
  unsigned shared_bytes;   /* dynamic shared memory needed at launch */
  int registers;           /* per thread (from ptxas; 0 without a cubin) */
  int spill_store_bytes, spill_load_bytes;
  int wgmma_notes;         /* ptxas C75xx notes: serialized wgmma, injected waits/fences */
  int stack_frame_bytes;
} tc_kernel_stats;

/* Runs the back end on every compiled kernel: layouts, LLVM IR, PTX and
 * (unless linker is TC_LINKER_NONE) one cubin holding all kernels.
 * Returns false after adding diagnostics; warnings (register spills) are
 * added to tc_diagnostics too, and do not make it fail. */
bool tc_generate(tc_compilation *c, const tc_codegen_options *options);
/* The cubin of the last tc_generate (owned by the compilation), or NULL. */
const void *tc_cubin(const tc_compilation *c, size_t *size);
bool tc_kernel_get_stats(const tc_compilation *c, int kernel, tc_kernel_stats *out);
/* The kernel's metadata text as stored in the module (runtime/tile.h). */
const char *tc_kernel_meta(const tc_compilation *c, int kernel);
/* A C header with each kernel's metadata and a typed launch function for
 * libtile; with `embed`, the cubin too (malloc'd; NULL before a cubin). */
char *tc_emit_header(const tc_compilation *c, const char *guard_name, bool embed);

/* ---- the interpreter ---- */

/* One kernel argument, matching the parameter's kind. */
typedef struct tc_arg {
  int64_t i;  /* TC_PARAM_INT and TC_PARAM_BOOL */
  double f;   /* TC_PARAM_FLOAT */
  void *p;    /* TC_PARAM_PTR; TC_PARAM_DESC: the base */
  int64_t shape[4], strides[4]; /* TC_PARAM_DESC, in elements */
} tc_arg;

/* Host memory the kernel may access (anything else is an error). */
typedef struct tc_buffer {
  void *data;
  size_t bytes;
  const char *name;
} tc_buffer;

/* Runs `kernel` over the grid in the interpreter. Returns true on success;
 * on failure *error receives a malloc'd message (free it) naming the
 * source location. max_steps = 0 uses the default execution limit
 * (TC_INTERP_DEFAULT_MAX_STEPS); there is no time limit. The same as
 * tc_interpret_ex with options {max_steps, 0}. */
bool tc_interpret(const tc_compilation *c, int kernel, const int64_t grid[3], const tc_arg *args, int nargs,
                  const tc_buffer *buffers, int nbuffers, uint64_t max_steps, char **error);

/* The execution limit when none is given: 10^9 element operations, from a
 * few seconds (work on large tiles) to about a minute (loops over scalars)
 * of interpretation on a 2-core machine (see interp/interp.h). */
#define TC_INTERP_DEFAULT_MAX_STEPS ((uint64_t)1000000000ULL)

/* Limits of one interpreter run; zero-initialize it ({0}: the defaults),
 * since fields may be added at the end. */
typedef struct tc_interp_options {
  uint64_t max_steps; /* element operations; 0: TC_INTERP_DEFAULT_MAX_STEPS */
  double max_seconds; /* wall-clock limit, checked every few milliseconds of
                         work; 0: none. Running over it is an error naming
                         the op being run and the program, like the step limit. */
  FILE *print_to;     /* where device_print writes; NULL: stdout */
} tc_interp_options;

/* tc_interpret with limits given as options (NULL: the defaults). */
bool tc_interpret_ex(const tc_compilation *c, int kernel, const int64_t grid[3], const tc_arg *args, int nargs,
                     const tc_buffer *buffers, int nbuffers, const tc_interp_options *options, char **error);

#ifdef TILE_HAVE_LLVM
/* The version of the LLVM linked in ("19.1.7"), written into buf. */
const char *tc_llvm_version(char *buf, size_t size);
#endif

#ifdef __cplusplus
}
#endif

#endif
