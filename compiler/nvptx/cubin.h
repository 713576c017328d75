/* cubin.h - PTX text to a cubin (an sm_XX ELF image) for one GPU arch.
 *
 * The NVPTX back end produces PTX; the runtime should load cubins, since
 * the driver's PTX JIT costs ~100 ms per module. Two ways to assemble:
 *
 *   CUBIN_NVJITLINK  in process, through libnvJitLink.so.13 opened with
 *                    dlopen (never linked, so tilec builds and runs where
 *                    the CUDA toolkit is absent);
 *   CUBIN_PTXAS      a ptxas subprocess (posix_spawn, no shell) on
 *                    temporary files;
 *   CUBIN_AUTO       nvJitLink if it loads, else ptxas; a module whose
 *                    wgmma nvJitLink serialized because of calls (C7509)
 *                    is redone with ptxas (see cubin_compile).
 *
 * Both ask for ptxas's verbose resource report and parse it into per-kernel
 * statistics (registers, spills, stack, shared memory), so the compiler can
 * report and test register pressure without a GPU.
 *
 * No global state: each call is independent and may run on any thread.
 * nvJitLink is opened per call (the library is opened RTLD_NODELETE, so
 * after the first load reopening it is only a reference count bump), or
 * once by the caller with cubin_nvjitlink_open() and passed in
 * CubinOptions. Errors are returned as malloc'd messages, never printed. */
#ifndef TILE_NVPTX_CUBIN_H
#define TILE_NVPTX_CUBIN_H

#include <stdbool.h>
#include <stddef.h>

/* The arch used when none is given. */
#define CUBIN_DEFAULT_ARCH "sm_90a"

typedef enum CubinLinker {
  CUBIN_AUTO,      /* nvJitLink, else ptxas; ptxas again for C7509 (see cubin_compile) */
  CUBIN_NVJITLINK, /* only nvJitLink */
  CUBIN_PTXAS,     /* only the ptxas executable */
} CubinLinker;

/* Resources of one kernel, from ptxas's verbose report. A field the report
 * does not mention is 0 (ptxas 13.0 omits cumulative stack and shared
 * memory when they are 0, and reports constant memory only through
 * nvJitLink's link summary). */
typedef struct CubinStats {
  int registers;         /* registers per thread */
  int barriers;          /* named barriers used */
  int spill_store_bytes; /* bytes stored to local memory by spills */
  int spill_load_bytes;  /* bytes loaded back from spills */
  int stack_frame_bytes; /* the kernel's own stack frame */
  int stack_bytes;       /* stack including the functions it calls */
  int shared_bytes;      /* static shared memory the kernel declares */
  int constant_bytes;    /* constant banks, summed (params live in cmem[0]) */
  int wgmma_notes;       /* ptxas C75xx messages about wgmma in this kernel
                            (serialized wgmma, injected waits or fences) */
  bool valid;            /* a register count was seen for this kernel */
} CubinStats;

typedef struct CubinKernel {
  char *name; /* the .entry name, as in the PTX */
  CubinStats stats;
} CubinKernel;

typedef struct CubinResult {
  unsigned char *data; /* the cubin (an ELF file) */
  size_t size;
  char *info_log;      /* ptxas's (and nvJitLink's) report; "" if none */
  CubinLinker linker;  /* the one that ran: CUBIN_NVJITLINK or CUBIN_PTXAS */
  int nkernels;
  CubinKernel *kernels; /* in order of first mention in the report */
  /* CUBIN_AUTO only: why ptxas could not redo a module whose nvJitLink
   * cubin has serialized wgmma or dropped setmaxnreg (malloc'd; NULL when
   * no redo was needed or it worked). The nvJitLink cubin is kept. */
  char *redo_error;
} CubinResult;

/* A loaded libnvJitLink, owned by the caller. */
typedef struct CubinNvJitLink CubinNvJitLink;

typedef struct CubinOptions {
  const char *arch;      /* "sm_90a" style; NULL: CUBIN_DEFAULT_ARCH */
  CubinLinker linker;
  /* The CUDA toolkit to use; NULL: $CUDA_HOME, then /usr/local/cuda.
   * ptxas is looked for in its bin/, then along $PATH (empty entries
   * skipped). nvJitLink (libnvJitLink.so.13) is dlopen'ed from its lib64/
   * or lib/; when cuda_home is NULL the loader's own search (soname,
   * LD_LIBRARY_PATH, ld.so.cache) comes first, otherwise last. */
  const char *cuda_home;
  const char *ptxas;         /* run this ptxas, no search; NULL: search */
  CubinNvJitLink *nvjitlink; /* NULL: open it for this call */
} CubinOptions;

/* PTX text (len bytes, need not be NUL-terminated; trailing NULs are
 * ignored, an embedded one is an error) to a cubin with the default
 * options and the given arch and linker. On success fills *out (free with
 * cubin_result_free) and returns true. On failure returns false and, if
 * error is not NULL, sets *error to a malloc'd message (NULL only if
 * memory ran out): for a PTX error it contains ptxas's message, and on the
 * ptxas path a command line that reproduces it, the PTX being kept in a
 * temporary directory the message names. */
bool cubin_from_ptx(const char *ptx, size_t len, const char *arch, CubinLinker linker,
                    CubinResult *out, char **error);

/* The same with every option; opts may be NULL (all defaults). */
bool cubin_compile(const CubinOptions *opts, const char *ptx, size_t len, CubinResult *out,
                   char **error);

void cubin_result_free(CubinResult *r);

/* "auto", "nvJitLink", "ptxas". */
const char *cubin_linker_name(CubinLinker linker);

/* The stats of kernel `name` in r, or NULL. */
const CubinStats *cubin_result_kernel(const CubinResult *r, const char *name);

/* Loads libnvJitLink (see CubinOptions.cuda_home; NULL for the default
 * search). Returns NULL with *error set when it cannot be loaded. */
CubinNvJitLink *cubin_nvjitlink_open(const char *cuda_home, char **error);
void cubin_nvjitlink_close(CubinNvJitLink *lib);
/* The library's version (e.g. 13, 0); false if it does not say. */
bool cubin_nvjitlink_version(const CubinNvJitLink *lib, unsigned *major, unsigned *minor);

/* Parses a ptxas verbose report (from `ptxas -v`, or nvJitLink's info log
 * with -verbose, which adds a link summary whose register and constant
 * figures win) into per-kernel stats. Only entry functions are listed.
 * Pure: no I/O. Returns false only when memory runs out; *kernels is then
 * NULL and *nkernels 0. Free the array with cubin_kernels_free. */
bool cubin_parse_info_log(const char *log, size_t len, CubinKernel **kernels, int *nkernels);
void cubin_kernels_free(CubinKernel *kernels, int nkernels);

#endif
