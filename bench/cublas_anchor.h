/* cublas_anchor.h - cuBLAS and cuBLASLt as the anchors of the GEMM
 * benchmarks, called from C.
 *
 * Nothing links cuBLAS: libcublas.so.13 and libcublasLt.so.13 are opened
 * with dlopen when an anchor is opened, so tile-gpu still starts (and runs
 * everything else) on a machine without them. The calls use the device's
 * primary context, the one libtile made (tile_runtime_bind), so device
 * pointers and streams from libtile work as they are.
 *
 * Matrices are ROW-MAJOR here, as in the rest of the project; the
 * translation to cuBLAS's column-major convention is inside (see the
 * comment above cublas_anchor_gemm in cublas_anchor.c).
 */
#ifndef TILE_BENCH_CUBLAS_ANCHOR_H
#define TILE_BENCH_CUBLAS_ANCHOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tile.h"

/* Opaque: the dlopen handles, a cublasHandle_t, a cublasLtHandle_t, the
 * cuBLASLt workspace and the last fp8 plan (descriptors and algorithm). */
typedef struct CublasAnchor CublasAnchor;

/* Opens libcublasLt and libcublas (from one directory: $TILE_CUBLAS_DIR,
 * each entry of $LD_LIBRARY_PATH, the CUDA toolkit, PyTorch's wheels, then
 * the dynamic loader's own search) and creates the handles on rt's
 * context. False with a message in msg (e.g. "libcublas.so.13 not found
 * in ...") when they cannot be loaded or initialized. */
bool cublas_anchor_open(CublasAnchor **out, tile_runtime *rt, char *msg, size_t size);
/* Destroys the handles and frees the workspace; NULL is allowed. Call it
 * before tile_runtime_destroy. */
void cublas_anchor_close(CublasAnchor *c);
/* "cuBLAS 13.1.0 from /usr/local/cuda/lib64": which library was opened. */
const char *cublas_anchor_describe(const CublasAnchor *c);

/* C[m, n] = A[m, k] @ B[k, n], all row-major in device memory (leading
 * dimensions lda, ldb, ldc in elements), bf16 (f16 when f16) inputs, f32
 * accumulation (CUBLAS_COMPUTE_32F), C in f32 when out_f32, else in the
 * input type. a_trans: A is stored as [k, m] row-major instead (lda >= m);
 * b_trans: B is stored as [n, k] row-major instead (ldb >= k). Enqueued on
 * s (NULL: the default stream); false with a message on a bad argument or
 * a cuBLAS error. */
bool cublas_anchor_gemm(CublasAnchor *c, tile_stream *s, bool f16, bool out_f32, bool a_trans, bool b_trans, int m,
                        int n, int k, uint64_t a, int lda, uint64_t b, int ldb, uint64_t c_out, int ldc, char *msg,
                        size_t size);

/* FP8 e4m3 GEMM through cuBLASLt, as torch._scaled_mm does it (without
 * fast accumulation): C[m, n] (bf16, row-major, ldc = n) =
 * (scale_a * scale_b) * A[m, k] @ B[k, n], where A is row-major [m, k] and
 * B is given as b_nk, [n, k] row-major: both K-contiguous, the "TN" form
 * fp8 requires. scale_a and scale_b are device pointers to one f32 each.
 * The descriptors and the algorithm cuBLASLt's heuristic picked are kept
 * for the next call with the same shape and alignments, so a timed call
 * is one cublasLtMatmul. */
bool cublas_anchor_gemm_fp8(CublasAnchor *c, tile_stream *s, int m, int n, int k, uint64_t a, uint64_t b_nk,
                            uint64_t scale_a, uint64_t scale_b, uint64_t c_out, char *msg, size_t size);

#endif
