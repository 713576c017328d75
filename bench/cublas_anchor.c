/* cublas_anchor.c - cuBLAS (bf16/f16 GEMM) and cuBLASLt (fp8 e4m3 GEMM)
 * loaded with dlopen, as the anchors the GEMM benchmarks are measured
 * against in the same run.
 *
 * The toolkit headers (cublasLt.h, which includes cublas_api.h and
 * library_types.h) give the types and enum values; the functions are
 * looked up with dlsym, never linked, so tile-gpu starts on a machine
 * without cuBLAS. Each function pointer type is written out below and
 * checked at compile time against the header's prototype, so a pointer
 * found by dlsym is called with the signature the library exports.
 *
 * Both libraries come from one directory: libcublasLt first, by full path,
 * so that libcublas's DT_NEEDED entry "libcublasLt.so.13" binds to that
 * very copy (the loader matches an already loaded library by its soname).
 * cuBLAS 13 needs no libcudart: it carries the CUDA runtime inside, and
 * that runtime uses the context current on the calling thread, so every
 * entry point here first makes libtile's context current
 * (tile_runtime_bind).
 */
#include "cublas_anchor.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The sonames of the CUDA 13 libraries (cuBLAS 13.x). */
#define CUBLAS_LIBRARY "libcublas.so.13"
#define CUBLASLT_LIBRARY "libcublasLt.so.13"

/* cuBLASLt's workspace: what PyTorch gives cuBLAS(Lt) on Hopper (32 MiB,
 * its default CUBLAS_WORKSPACE_CONFIG of 4096 KiB x 8 for sm_90), so the
 * heuristic may pick the same kernels as torch._scaled_mm; the split-K and
 * stream-K variants need workspace, and the heuristic drops every algorithm
 * that needs more than it is allowed. The cuBLAS handle keeps its own
 * default pool, which cuBLAS sizes for the architecture itself. */
#define LT_WORKSPACE_BYTES ((size_t)32 << 20)

/* cuBLASLt assumes 256-byte aligned operands unless told otherwise
 * (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, default 256, cublasLt.h). */
#define LT_MAX_ALIGNMENT 256u

/* Room for "cuBLAS 13.1.0 from <directory>". */
#define DESCRIPTION_BYTES (PATH_MAX + 64)

/* The enum values the comments below cite, with the header each is from. */
_Static_assert(CUBLAS_STATUS_SUCCESS == 0 && CUBLAS_OP_N == 0 && CUBLAS_OP_T == 1 && CUBLAS_GEMM_DEFAULT == -1 &&
                   CUBLAS_COMPUTE_32F == 68,
               "cublas_api.h values");
_Static_assert(CUDA_R_32F == 0 && CUDA_R_16F == 2 && CUDA_R_16BF == 14 && CUDA_R_8F_E4M3 == 28,
               "library_types.h values");
_Static_assert(CUBLASLT_MATMUL_DESC_TRANSA == 3 && CUBLASLT_MATMUL_DESC_TRANSB == 4 &&
                   CUBLASLT_MATMUL_DESC_A_SCALE_POINTER == 17 && CUBLASLT_MATMUL_DESC_B_SCALE_POINTER == 18 &&
                   CUBLASLT_MATMUL_DESC_FAST_ACCUM == 25 && CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES == 1 &&
                   CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES == 5 && CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES == 8,
               "cublasLt.h values");

/* ---- the functions, their types, checked against the headers ------------ */

typedef cublasStatus_t (*CublasCreateFn)(cublasHandle_t *handle);
typedef cublasStatus_t (*CublasDestroyFn)(cublasHandle_t handle);
typedef cublasStatus_t (*CublasSetStreamFn)(cublasHandle_t handle, cudaStream_t stream);
typedef cublasStatus_t (*CublasGemmExFn)(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                         int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                                         cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo);
typedef cublasStatus_t (*LtCreateFn)(cublasLtHandle_t *handle);
typedef cublasStatus_t (*LtDestroyFn)(cublasLtHandle_t handle);
typedef const char *(*LtStatusTextFn)(cublasStatus_t status);
typedef size_t (*LtGetVersionFn)(void);
typedef cublasStatus_t (*LtDescCreateFn)(cublasLtMatmulDesc_t *desc, cublasComputeType_t computeType,
                                         cudaDataType_t scaleType);
typedef cublasStatus_t (*LtDescDestroyFn)(cublasLtMatmulDesc_t desc);
typedef cublasStatus_t (*LtDescSetFn)(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void *buf,
                                      size_t sizeInBytes);
typedef cublasStatus_t (*LtLayoutCreateFn)(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                           uint64_t cols, int64_t ld);
typedef cublasStatus_t (*LtLayoutDestroyFn)(cublasLtMatrixLayout_t layout);
typedef cublasStatus_t (*LtPrefCreateFn)(cublasLtMatmulPreference_t *pref);
typedef cublasStatus_t (*LtPrefDestroyFn)(cublasLtMatmulPreference_t pref);
typedef cublasStatus_t (*LtPrefSetFn)(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                                      const void *buf, size_t sizeInBytes);
typedef cublasStatus_t (*LtHeuristicFn)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                        cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                        cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                        cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                        cublasLtMatmulHeuristicResult_t results[], int *returnAlgoCount);
typedef cublasStatus_t (*LtMatmulFn)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                                     const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                     cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                                     cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                                     const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                                     cudaStream_t stream);

/* X(field, type, exported symbol, library): the v2 API's names are macros
 * (cublas_v2.h: cublasCreate -> cublasCreate_v2, ...), so the exported
 * names are listed, not the macros. Status names and strings come from
 * cuBLASLt; both libraries share cublasStatus_t. */
#define CUBLAS_ANCHOR_FUNCTIONS(X)                                                    \
  X(create, CublasCreateFn, cublasCreate_v2, LIB_CUBLAS)                              \
  X(destroy, CublasDestroyFn, cublasDestroy_v2, LIB_CUBLAS)                           \
  X(set_stream, CublasSetStreamFn, cublasSetStream_v2, LIB_CUBLAS)                    \
  X(gemm_ex, CublasGemmExFn, cublasGemmEx, LIB_CUBLAS)                                \
  X(lt_create, LtCreateFn, cublasLtCreate, LIB_CUBLASLT)                              \
  X(lt_destroy, LtDestroyFn, cublasLtDestroy, LIB_CUBLASLT)                           \
  X(status_name, LtStatusTextFn, cublasLtGetStatusName, LIB_CUBLASLT)                 \
  X(status_string, LtStatusTextFn, cublasLtGetStatusString, LIB_CUBLASLT)             \
  X(version, LtGetVersionFn, cublasLtGetVersion, LIB_CUBLASLT)                        \
  X(desc_create, LtDescCreateFn, cublasLtMatmulDescCreate, LIB_CUBLASLT)              \
  X(desc_destroy, LtDescDestroyFn, cublasLtMatmulDescDestroy, LIB_CUBLASLT)           \
  X(desc_set, LtDescSetFn, cublasLtMatmulDescSetAttribute, LIB_CUBLASLT)              \
  X(layout_create, LtLayoutCreateFn, cublasLtMatrixLayoutCreate, LIB_CUBLASLT)        \
  X(layout_destroy, LtLayoutDestroyFn, cublasLtMatrixLayoutDestroy, LIB_CUBLASLT)     \
  X(pref_create, LtPrefCreateFn, cublasLtMatmulPreferenceCreate, LIB_CUBLASLT)        \
  X(pref_destroy, LtPrefDestroyFn, cublasLtMatmulPreferenceDestroy, LIB_CUBLASLT)     \
  X(pref_set, LtPrefSetFn, cublasLtMatmulPreferenceSetAttribute, LIB_CUBLASLT)        \
  X(heuristic, LtHeuristicFn, cublasLtMatmulAlgoGetHeuristic, LIB_CUBLASLT)           \
  X(matmul, LtMatmulFn, cublasLtMatmul, LIB_CUBLASLT)

/* Each type above is the header's prototype (typeof takes no address at
 * run time: nothing is linked). */
#define CHECK_PROTOTYPE(field, type, symbol, lib)                                \
  _Static_assert(__builtin_types_compatible_p(type, __typeof__(&symbol)), \
                 #type " does not match the prototype of " #symbol " in the CUDA headers");
CUBLAS_ANCHOR_FUNCTIONS(CHECK_PROTOTYPE)
#undef CHECK_PROTOTYPE

enum { LIB_CUBLAS, LIB_CUBLASLT, LIB_COUNT };

typedef struct CublasFunctions {
#define FIELD(field, type, symbol, lib) type field;
  CUBLAS_ANCHOR_FUNCTIONS(FIELD)
#undef FIELD
} CublasFunctions;

/* The fp8 matmul of the last call: descriptors, layouts and the algorithm
 * of the heuristic, for m, n, k and the operands' alignments. In
 * cuBLASLt's terms (column-major, see cublas_anchor_gemm_fp8): its A is our
 * B^T, its B our A, C and D our C. */
typedef struct Fp8Plan {
  bool valid;
  int m, n, k;
  uint32_t align[4]; /* of cuBLASLt's A, B, C, D, in bytes */
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t layout_a, layout_b, layout_cd;
  cublasLtMatmulAlgo_t algo;
} Fp8Plan;

struct CublasAnchor {
  tile_runtime *rt;
  void *lib[LIB_COUNT]; /* dlopen handles */
  CublasFunctions fn;
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  uint64_t workspace; /* LT_WORKSPACE_BYTES of device memory for cuBLASLt */
  Fp8Plan fp8;
  char dir[PATH_MAX]; /* where the libraries were found */
  char description[DESCRIPTION_BYTES];
};

/* ---- messages ---------------------------------------------------------- */

static bool fail(char *msg, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(char *msg, size_t size, const char *fmt, ...) {
  if (msg && size > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* True on CUBLAS_STATUS_SUCCESS; else the message names the call and the
 * status ("cublasGemmEx failed: CUBLAS_STATUS_NOT_SUPPORTED (...)"). */
static bool cublas_ok(const CublasAnchor *c, cublasStatus_t st, const char *what, char *msg, size_t size) {
  if (st == CUBLAS_STATUS_SUCCESS) return true;
  const char *name = c->fn.status_name ? c->fn.status_name(st) : NULL;
  const char *text = c->fn.status_string ? c->fn.status_string(st) : NULL;
  return fail(msg, size, "%s failed: %s (%s)", what, name ? name : "unknown status", text ? text : "no description");
}

/* libtile's context, current on this thread before any cuBLAS call. */
static bool bind_context(const CublasAnchor *c, char *msg, size_t size) {
  if (tile_runtime_bind(c->rt) == TILE_OK) return true;
  return fail(msg, size, "cannot make the CUDA context current: %s", tile_last_error());
}

/* ---- loading ----------------------------------------------------------- */

static void *open_library(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }

/* Opens both libraries from dir (len bytes, not NUL-terminated; NULL for
 * the loader's own search). On failure, a file that exists but would not
 * load leaves dlerror's reason in why. */
static bool try_directory(CublasAnchor *c, const char *dir, size_t len, char *why, size_t why_size) {
  char lt_path[PATH_MAX], blas_path[PATH_MAX];
  if (dir) {
    if (len == 0 || len >= PATH_MAX - sizeof CUBLASLT_LIBRARY - 1) return false;
    snprintf(lt_path, sizeof lt_path, "%.*s/%s", (int)len, dir, CUBLASLT_LIBRARY);
    snprintf(blas_path, sizeof blas_path, "%.*s/%s", (int)len, dir, CUBLAS_LIBRARY);
    if (access(lt_path, F_OK) != 0 || access(blas_path, F_OK) != 0) return false;
  } else {
    snprintf(lt_path, sizeof lt_path, "%s", CUBLASLT_LIBRARY);
    snprintf(blas_path, sizeof blas_path, "%s", CUBLAS_LIBRARY);
  }
  dlerror();
  c->lib[LIB_CUBLASLT] = open_library(lt_path);
  c->lib[LIB_CUBLAS] = c->lib[LIB_CUBLASLT] ? open_library(blas_path) : NULL;
  if (c->lib[LIB_CUBLAS]) {
    if (dir) snprintf(c->dir, sizeof c->dir, "%.*s", (int)len, dir);
    else snprintf(c->dir, sizeof c->dir, "the dynamic loader's search path");
    return true;
  }
  const char *e = dlerror();
  snprintf(why, why_size, "%s", e ? e : "unknown dlopen error");
  if (c->lib[LIB_CUBLASLT]) dlclose(c->lib[LIB_CUBLASLT]);
  c->lib[LIB_CUBLASLT] = NULL;
  return false;
}

/* Tries each ':'-separated entry of list. */
static bool try_path_list(CublasAnchor *c, const char *list, char *why, size_t why_size) {
  for (const char *p = list; p && *p;) {
    size_t len = strcspn(p, ":");
    if (try_directory(c, p, len, why, why_size)) return true;
    p += len;
    if (*p == ':') p++;
  }
  return false;
}

static bool load_libraries(CublasAnchor *c, char *msg, size_t size) {
  /* Where the CUDA 13 toolkit and PyTorch's CUDA 13 wheels keep cuBLAS on
   * the GPU machine, tried after $TILE_CUBLAS_DIR and $LD_LIBRARY_PATH. */
  static const char *const known_dirs[] = {
      "/usr/local/cuda/lib64",                                            /* the toolkit */
      "/usr/local/cuda-13.0/lib64",                                       /* the toolkit, versioned */
      "/usr/local/cuda/targets/x86_64-linux/lib",                         /* what lib64 points to */
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib",    /* PyTorch cu13 wheels */
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib",  /* the nvidia-cublas wheel */
      "/usr/lib/x86_64-linux-gnu",                                        /* distribution packages */
  };
  char why[512] = "";
  if (try_path_list(c, getenv("TILE_CUBLAS_DIR"), why, sizeof why)) return true;
  if (try_path_list(c, getenv("LD_LIBRARY_PATH"), why, sizeof why)) return true;
  for (size_t i = 0; i < sizeof known_dirs / sizeof known_dirs[0]; i++)
    if (try_directory(c, known_dirs[i], strlen(known_dirs[i]), why, sizeof why)) return true;
  if (try_directory(c, NULL, 0, why, sizeof why)) return true;
  char tried[1024];
  size_t used = (size_t)snprintf(tried, sizeof tried, "$TILE_CUBLAS_DIR, $LD_LIBRARY_PATH");
  for (size_t i = 0; i < sizeof known_dirs / sizeof known_dirs[0] && used < sizeof tried; i++)
    used += (size_t)snprintf(tried + used, sizeof tried - used, ", %s", known_dirs[i]);
  return fail(msg, size, "%s and %s not found in %s, nor by the dynamic loader (%s)", CUBLAS_LIBRARY,
              CUBLASLT_LIBRARY, tried, why);
}

/* Stores a dlsym result into a function pointer field (POSIX: a function
 * pointer and void * have the same representation). */
static void store_symbol(void *field, void *sym) { memcpy(field, &sym, sizeof sym); }

static bool resolve_functions(CublasAnchor *c, char *msg, size_t size) {
#define RESOLVE(field, type, symbol, which)                                                    \
  {                                                                                            \
    void *sym = dlsym(c->lib[which], #symbol);                                                 \
    if (!sym)                                                                                  \
      return fail(msg, size, "%s has no function %s (not cuBLAS 13?)",                         \
                  which == LIB_CUBLAS ? CUBLAS_LIBRARY : CUBLASLT_LIBRARY, #symbol);           \
    store_symbol(&c->fn.field, sym);                                                           \
  }
  CUBLAS_ANCHOR_FUNCTIONS(RESOLVE)
#undef RESOLVE
  return true;
}

static bool create_handles(CublasAnchor *c, char *msg, size_t size) {
  if (!bind_context(c, msg, size)) return false;
  if (!cublas_ok(c, c->fn.create(&c->blas), "cublasCreate", msg, size)) return false;
  if (!cublas_ok(c, c->fn.lt_create(&c->lt), "cublasLtCreate", msg, size)) return false;
  if (tile_mem_alloc(c->rt, LT_WORKSPACE_BYTES, &c->workspace) != TILE_OK)
    return fail(msg, size, "cannot allocate the %zu-byte cuBLASLt workspace: %s", LT_WORKSPACE_BYTES,
                tile_last_error());
  return true;
}

/* "cuBLAS 13.1.0 from DIR": cublasLtGetVersion gives major * 10000 +
 * minor * 100 + patch, as CUBLAS_VERSION in cublas_api.h. */
static void describe(CublasAnchor *c) {
  size_t v = c->fn.version();
  snprintf(c->description, sizeof c->description, "cuBLAS %zu.%zu.%zu from %s", v / 10000, v / 100 % 100, v % 100,
           c->dir);
}

bool cublas_anchor_open(CublasAnchor **out, tile_runtime *rt, char *msg, size_t size) {
  *out = NULL;
  if (!rt) return fail(msg, size, "cublas_anchor_open: no tile_runtime");
  CublasAnchor *c = calloc(1, sizeof *c);
  if (!c) return fail(msg, size, "out of host memory");
  c->rt = rt;
  if (!load_libraries(c, msg, size) || !resolve_functions(c, msg, size) || !create_handles(c, msg, size)) {
    cublas_anchor_close(c);
    return false;
  }
  describe(c);
  *out = c;
  return true;
}

static void fp8_plan_free(CublasAnchor *c) {
  Fp8Plan *p = &c->fp8;
  if (p->layout_a) c->fn.layout_destroy(p->layout_a);
  if (p->layout_b) c->fn.layout_destroy(p->layout_b);
  if (p->layout_cd) c->fn.layout_destroy(p->layout_cd);
  if (p->desc) c->fn.desc_destroy(p->desc);
  memset(p, 0, sizeof *p);
}

void cublas_anchor_close(CublasAnchor *c) {
  if (!c) return;
  if (c->rt) tile_runtime_bind(c->rt);
  fp8_plan_free(c);
  if (c->lt) c->fn.lt_destroy(c->lt);
  if (c->blas) c->fn.destroy(c->blas);
  if (c->workspace) tile_mem_free(c->rt, c->workspace);
  /* Once a handle was made, the libraries stay loaded (PyTorch never
   * unloads them either): the CUDA runtime inside cuBLAS keeps
   * per-process state (its modules registered with the driver) that
   * outlives the handles, and nothing needs the address space back. A
   * later open finds them loaded. */
  bool loaded_for_good = c->blas != NULL;
  for (int i = 0; i < LIB_COUNT && !loaded_for_good; i++)
    if (c->lib[i]) dlclose(c->lib[i]);
  free(c);
}

const char *cublas_anchor_describe(const CublasAnchor *c) { return c ? c->description : "no cuBLAS"; }

/* ---- bf16 / f16 GEMM ---------------------------------------------------
 *
 * cuBLAS is column-major; a row-major matrix X[r, c] with leading dimension
 * ld is, to cuBLAS, the column-major matrix X^T (c x r) with the same ld.
 * So the row-major C[m, n] is the column-major C^T (n x m, ldc), and
 *
 *     C = A @ B   <=>   C^T = B^T @ A^T
 *
 * is one cuBLAS GEMM with m' = n, n' = m, k' = k, whose first operand
 * gives B^T (n x k) and whose second gives A^T (k x m):
 *
 *   our storage                     cuBLAS sees              op  to get
 *   B  [k, n] row-major, ldb        n x k = B^T  (ld ldb)     N   B^T
 *   B^T [n, k] row-major, ldb       k x n = B    (ld ldb)     T   B^T
 *   A  [m, k] row-major, lda        k x m = A^T  (ld lda)     N   A^T
 *   A^T [k, m] row-major, lda       m x k = A    (ld lda)     T   A^T
 *
 * hence transa' = b_trans ? T : N with (b, ldb) as cuBLAS's A, and
 * transb' = a_trans ? T : N with (a, lda) as cuBLAS's B. cuBLAS's own
 * bounds (lda' >= rows of the stored A', and so on) are then exactly the
 * row-major ones checked in check_gemm_args.
 */

static bool check_gemm_args(bool a_trans, bool b_trans, int m, int n, int k, uint64_t a, int lda, uint64_t b, int ldb,
                            uint64_t c_out, int ldc, char *msg, size_t size) {
  if (m < 1 || n < 1 || k < 1) return fail(msg, size, "cublas_anchor_gemm: m=%d n=%d k=%d must be positive", m, n, k);
  if (!a || !b || !c_out) return fail(msg, size, "cublas_anchor_gemm: a NULL device pointer");
  int lda_min = a_trans ? m : k, ldb_min = b_trans ? k : n;
  if (lda < lda_min || ldb < ldb_min || ldc < n)
    return fail(msg, size,
                "cublas_anchor_gemm: leading dimensions lda=%d ldb=%d ldc=%d, need at least %d (A %s), %d (B %s), %d",
                lda, ldb, ldc, lda_min, a_trans ? "[k, m]" : "[m, k]", ldb_min, b_trans ? "[n, k]" : "[k, n]", n);
  return true;
}

bool cublas_anchor_gemm(CublasAnchor *c, tile_stream *s, bool f16, bool out_f32, bool a_trans, bool b_trans, int m,
                        int n, int k, uint64_t a, int lda, uint64_t b, int ldb, uint64_t c_out, int ldc, char *msg,
                        size_t size) {
  if (!c) return fail(msg, size, "cublas_anchor_gemm: no anchor");
  if (!check_gemm_args(a_trans, b_trans, m, n, k, a, lda, b, ldb, c_out, ldc, msg, size)) return false;
  if (!bind_context(c, msg, size)) return false;
  /* library_types.h: CUDA_R_16F = 2, CUDA_R_16BF = 14, CUDA_R_32F = 0. */
  cudaDataType in = f16 ? CUDA_R_16F : CUDA_R_16BF;
  cudaDataType out = out_f32 ? CUDA_R_32F : in;
  /* alpha and beta have the compute type's scale type: float for
   * CUBLAS_COMPUTE_32F (cublas_api.h, = 68), on the host (the default
   * CUBLAS_POINTER_MODE_HOST). */
  const float alpha = 1.0f, beta = 0.0f;
  if (!cublas_ok(c, c->fn.set_stream(c->blas, (cudaStream_t)tile_stream_handle(s)), "cublasSetStream", msg, size))
    return false;
  /* cublas_api.h: CUBLAS_OP_N = 0, CUBLAS_OP_T = 1; CUBLAS_GEMM_DEFAULT =
   * -1 (cuBLAS picks the kernel; tensor cores for 16-bit inputs). */
  cublasStatus_t st = c->fn.gemm_ex(c->blas, b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, a_trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    n, m, k, &alpha, (const void *)(uintptr_t)b, in, ldb, (const void *)(uintptr_t)a,
                                    in, lda, &beta, (void *)(uintptr_t)c_out, out, ldc, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
  return cublas_ok(c, st, "cublasGemmEx", msg, size);
}

/* ---- fp8 e4m3 GEMM through cuBLASLt ------------------------------------
 *
 * The same transposition as above, C^T = B^T @ A^T in column-major terms,
 * with the one layout Hopper's fp8 kernels take ("TN": op(A) = T,
 * op(B) = N, both K-contiguous):
 *
 *   cuBLASLt's A: b_nk ([n, k] row-major = k x n column-major, ld k), op T,
 *                 giving n x k = B^T
 *   cuBLASLt's B: a    ([m, k] row-major = k x m column-major, ld k), op N,
 *                 giving k x m = A^T
 *   C and D:      c_out ([m, n] row-major = n x m column-major, ld n), bf16
 *
 * D = alpha * (scaleA * scaleB) * op(A) op(B) + beta * C with alpha 1,
 * beta 0; cuBLASLt's A scale is therefore our scale_b, its B scale our
 * scale_a (the product is the same either way). Types as torch._scaled_mm
 * sets them: compute CUBLAS_COMPUTE_32F (cublas_api.h, = 68), scale type
 * CUDA_R_32F (library_types.h, = 0), A and B CUDA_R_8F_E4M3 (= 28), C and
 * D CUDA_R_16BF (= 14); CUBLASLT_MATMUL_DESC_FAST_ACCUM left at its
 * default 0, as torch._scaled_mm's use_fast_accum=False.
 */

/* The largest power of two, up to LT_MAX_ALIGNMENT, dividing address (as
 * PyTorch's _getAlignment), for the heuristic's alignment preferences. */
static uint32_t pointer_alignment(uint64_t address) {
  uint32_t align = LT_MAX_ALIGNMENT;
  while (align > 1 && address % align) align /= 2;
  return align;
}

static bool desc_set(CublasAnchor *c, cublasLtMatmulDescAttributes_t attr, const void *buf, size_t bytes,
                     const char *what, char *msg, size_t size) {
  return cublas_ok(c, c->fn.desc_set(c->fp8.desc, attr, buf, bytes), what, msg, size);
}

/* cublasLt.h: CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17 and
 * CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18, each a const void * to one
 * value of the scale type on the device. */
static bool set_scales(CublasAnchor *c, uint64_t scale_a, uint64_t scale_b, char *msg, size_t size) {
  const void *lt_a_scale = (const void *)(uintptr_t)scale_b, *lt_b_scale = (const void *)(uintptr_t)scale_a;
  return desc_set(c, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &lt_a_scale, sizeof lt_a_scale,
                  "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)", msg, size) &&
         desc_set(c, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &lt_b_scale, sizeof lt_b_scale,
                  "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)", msg, size);
}

/* The descriptor and the three layouts of an fp8 plan. */
static bool fp8_describe(CublasAnchor *c, int m, int n, int k, char *msg, size_t size) {
  Fp8Plan *p = &c->fp8;
  if (!cublas_ok(c, c->fn.desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", msg,
                 size))
    return false;
  /* cublasLt.h: CUBLASLT_MATMUL_DESC_TRANSA = 3, TRANSB = 4, int32_t
   * values of cublasOperation_t. */
  const int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  if (!desc_set(c, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t, "cublasLtMatmulDescSetAttribute(TRANSA)", msg,
                size) ||
      !desc_set(c, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n, "cublasLtMatmulDescSetAttribute(TRANSB)", msg,
                size))
    return false;
  const uint64_t um = (uint64_t)m, un = (uint64_t)n, uk = (uint64_t)k;
  return cublas_ok(c, c->fn.layout_create(&p->layout_a, CUDA_R_8F_E4M3, uk, un, k), "cublasLtMatrixLayoutCreate(A)",
                   msg, size) &&
         cublas_ok(c, c->fn.layout_create(&p->layout_b, CUDA_R_8F_E4M3, uk, um, k), "cublasLtMatrixLayoutCreate(B)",
                   msg, size) &&
         cublas_ok(c, c->fn.layout_create(&p->layout_cd, CUDA_R_16BF, un, um, n), "cublasLtMatrixLayoutCreate(C)", msg,
                   size);
}

/* Asks the heuristic for the best algorithm within the workspace and the
 * operands' alignments (cublasLt.h: CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
 * = 1, a uint64_t; MIN_ALIGNMENT_A/B/C/D_BYTES = 5..8, uint32_t). */
static bool fp8_pick_algorithm(CublasAnchor *c, char *msg, size_t size) {
  Fp8Plan *p = &c->fp8;
  cublasLtMatmulPreference_t pref = NULL;
  if (!cublas_ok(c, c->fn.pref_create(&pref), "cublasLtMatmulPreferenceCreate", msg, size)) return false;
  const uint64_t workspace = LT_WORKSPACE_BYTES;
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  bool ok = cublas_ok(c, c->fn.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
                      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", msg, size);
  for (int i = 0; ok && i < 4; i++)
    ok = cublas_ok(c, c->fn.pref_set(pref, align_attr[i], &p->align[i], sizeof p->align[i]),
                   "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)", msg, size);
  cublasLtMatmulHeuristicResult_t result;
  memset(&result, 0, sizeof result);
  int found = 0;
  if (ok)
    ok = cublas_ok(c,
                   c->fn.heuristic(c->lt, p->desc, p->layout_a, p->layout_b, p->layout_cd, p->layout_cd, pref, 1,
                                   &result, &found),
                   "cublasLtMatmulAlgoGetHeuristic", msg, size);
  c->fn.pref_destroy(pref);
  if (!ok) return false;
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
    return fail(msg, size,
                "cuBLASLt has no fp8 e4m3 algorithm for m=%d n=%d k=%d (A [m, k] and B [n, k] K-contiguous, bf16 C, "
                "%zu-byte workspace, operands aligned to %u/%u/%u bytes; its fp8 kernels need 16-byte aligned "
                "operands and leading dimensions, and compute capability 8.9 or later)",
                p->m, p->n, p->k, LT_WORKSPACE_BYTES, p->align[0], p->align[1], p->align[2]);
  p->algo = result.algo;
  return true;
}

/* Makes c->fp8 the plan for this call, reusing the last one when the shape
 * and alignments are the same. */
static bool fp8_plan(CublasAnchor *c, int m, int n, int k, uint64_t a, uint64_t b_nk, uint64_t c_out,
                     uint64_t scale_a, uint64_t scale_b, char *msg, size_t size) {
  const uint32_t align[4] = {pointer_alignment(b_nk), pointer_alignment(a), pointer_alignment(c_out),
                             pointer_alignment(c_out)};
  Fp8Plan *p = &c->fp8;
  if (p->valid && p->m == m && p->n == n && p->k == k && !memcmp(p->align, align, sizeof align))
    return set_scales(c, scale_a, scale_b, msg, size);
  fp8_plan_free(c);
  p->m = m, p->n = n, p->k = k;
  memcpy(p->align, align, sizeof align);
  /* The scales are set before the heuristic runs, as torch does: the
   * algorithm must support scaled operands. */
  bool ok = fp8_describe(c, m, n, k, msg, size) && set_scales(c, scale_a, scale_b, msg, size) &&
            fp8_pick_algorithm(c, msg, size);
  if (!ok) {
    fp8_plan_free(c);
    return false;
  }
  p->valid = true;
  return true;
}

bool cublas_anchor_gemm_fp8(CublasAnchor *c, tile_stream *s, int m, int n, int k, uint64_t a, uint64_t b_nk,
                            uint64_t scale_a, uint64_t scale_b, uint64_t c_out, char *msg, size_t size) {
  if (!c) return fail(msg, size, "cublas_anchor_gemm_fp8: no anchor");
  if (m < 1 || n < 1 || k < 1)
    return fail(msg, size, "cublas_anchor_gemm_fp8: m=%d n=%d k=%d must be positive", m, n, k);
  if (!a || !b_nk || !scale_a || !scale_b || !c_out)
    return fail(msg, size, "cublas_anchor_gemm_fp8: a NULL device pointer");
  if (!bind_context(c, msg, size)) return false;
  if (!fp8_plan(c, m, n, k, a, b_nk, c_out, scale_a, scale_b, msg, size)) return false;
  const float alpha = 1.0f, beta = 0.0f;
  Fp8Plan *p = &c->fp8;
  cublasStatus_t st = c->fn.matmul(c->lt, p->desc, &alpha, (const void *)(uintptr_t)b_nk, p->layout_a,
                                   (const void *)(uintptr_t)a, p->layout_b, &beta, (const void *)(uintptr_t)c_out,
                                   p->layout_cd, (void *)(uintptr_t)c_out, p->layout_cd, &p->algo,
                                   (void *)(uintptr_t)c->workspace, LT_WORKSPACE_BYTES,
                                   (cudaStream_t)tile_stream_handle(s));
  return cublas_ok(c, st, "cublasLtMatmul", msg, size);
}
