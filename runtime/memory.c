/* memory.c - device memory for tests, examples and benchmarks.
 *
 * Thin synchronous wrappers over cuMemAlloc, cuMemcpy and cuMemset, so a
 * program that only runs tile kernels needs no CUDA header or library of
 * its own. Device pointers are uint64_t (CUdeviceptr), which is also what
 * tile_arg_ptr takes.
 */
#include <dlfcn.h>

#include "internal.h"

/* Checks the runtime and makes its context current. */
static tile_status enter(const tile_runtime *rt, const char *function) {
  if (!rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "%s: runtime is NULL", function);
  return tilert_bind(rt);
}

tile_status tile_mem_alloc(tile_runtime *rt, size_t bytes, uint64_t *out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_mem_alloc: out is NULL");
  *out = 0;
  tile_status st = enter(rt, "tile_mem_alloc");
  if (st != TILE_OK) return st;
  if (bytes == 0) return tilert_rt_fail(rt, TILE_ERROR_INVALID_ARGUMENT, "tile_mem_alloc: 0 bytes");
  CUdeviceptr p = 0;
  CUresult r = rt->drv.mem_alloc(&p, bytes);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuMemAlloc of %zu bytes failed", bytes);
  *out = (uint64_t)p;
  return TILE_OK;
}

tile_status tile_mem_free(tile_runtime *rt, uint64_t ptr) {
  if (ptr == 0) return TILE_OK;
  tile_status st = enter(rt, "tile_mem_free");
  if (st != TILE_OK) return st;
  CUresult r = rt->drv.mem_free((CUdeviceptr)ptr);
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuMemFree(0x%llx) failed", (unsigned long long)ptr);
  return TILE_OK;
}

tile_status tile_memcpy_htod(tile_runtime *rt, uint64_t dst, const void *src, size_t bytes) {
  tile_status st = enter(rt, "tile_memcpy_htod");
  if (st != TILE_OK || bytes == 0) return st;
  if (!src || !dst) return tilert_rt_fail(rt, TILE_ERROR_INVALID_ARGUMENT, "tile_memcpy_htod: NULL pointer");
  CUresult r = rt->drv.memcpy_htod((CUdeviceptr)dst, src, bytes);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuMemcpyHtoD of %zu bytes failed", bytes);
  return TILE_OK;
}

tile_status tile_memcpy_dtoh(tile_runtime *rt, void *dst, uint64_t src, size_t bytes) {
  tile_status st = enter(rt, "tile_memcpy_dtoh");
  if (st != TILE_OK || bytes == 0) return st;
  if (!src || !dst) return tilert_rt_fail(rt, TILE_ERROR_INVALID_ARGUMENT, "tile_memcpy_dtoh: NULL pointer");
  CUresult r = rt->drv.memcpy_dtoh(dst, (CUdeviceptr)src, bytes);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuMemcpyDtoH of %zu bytes failed", bytes);
  return TILE_OK;
}

tile_status tile_memset_d8(tile_runtime *rt, uint64_t dst, uint8_t value, size_t bytes) {
  tile_status st = enter(rt, "tile_memset_d8");
  if (st != TILE_OK || bytes == 0) return st;
  if (!dst) return tilert_rt_fail(rt, TILE_ERROR_INVALID_ARGUMENT, "tile_memset_d8: NULL pointer");
  CUresult r = rt->drv.memset_d8((CUdeviceptr)dst, value, bytes);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuMemsetD8 of %zu bytes failed", bytes);
  return TILE_OK;
}

tile_status tile_memcpy_dtod(tile_runtime *rt, uint64_t dst, uint64_t src, size_t bytes, tile_stream *stream) {
  tile_status st = enter(rt, "tile_memcpy_dtod");
  if (st != TILE_OK || bytes == 0) return st;
  if (!src || !dst) return tilert_rt_fail(rt, TILE_ERROR_INVALID_ARGUMENT, "tile_memcpy_dtod: NULL pointer");
  CUstream s = stream ? (CUstream)tile_stream_handle(stream) : NULL;
  CUresult r = rt->drv.memcpy_dtod_async((CUdeviceptr)dst, (CUdeviceptr)src, bytes, s);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuMemcpyDtoDAsync of %zu bytes failed", bytes);
  return TILE_OK;
}

void *tile_kernel_handle(const tile_kernel *k) { return k ? (void *)k->func : NULL; }

void *tile_driver_function(tile_runtime *rt, const char *name) {
  return rt && rt->drv.library && name ? dlsym(rt->drv.library, name) : NULL;
}
