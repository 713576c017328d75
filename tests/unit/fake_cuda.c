/* fake_cuda.c - a stand-in for libcuda.so.1 with several devices and no
 * GPU, for testing libtile's multi-device code and its NCCL wrapper on
 * machines without one (tests/unit/test_devices.c loads it through
 * tile_config.driver_library).
 *
 * Every driver function libtile requires is here with cuda.h's prototype
 * (so each is exported under the versioned name libtile looks up). The
 * few the tests look at do something observable: devices
 * (FAKE_CUDA_DEVICES of them, default 2), primary contexts, the current
 * context per thread, streams and events that remember their device,
 * peer access (refused when FAKE_CUDA_NO_PEER is set), and a log of the
 * calls that move work between devices, read with fake_cuda_log(). Memory
 * is only addresses: nothing is ever read or written through them. The
 * rest succeed and do nothing. */
#include <cuda.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_log.h"

/* Devices the fake can have (FAKE_CUDA_DEVICES is cut to this). */
#define FAKE_MAX_DEVICES 8

struct CUctx_st {
  int device;
  int peers[FAKE_MAX_DEVICES]; /* peer access enabled from this context */
};
struct CUstream_st {
  int device;
};
struct CUevent_st {
  int device;
};

static struct CUctx_st contexts[FAKE_MAX_DEVICES];
static _Thread_local CUcontext current;
static char call_log[FAKE_LOG_BYTES];
static CUdeviceptr next_address = 0x100000000ull;

/* For the tests: the calls logged so far, one per line, and a reset. */
const char *fake_cuda_log(void) { return call_log; }
void fake_cuda_reset(void) { call_log[0] = '\0'; }

static int device_count(void) {
  const char *env = getenv("FAKE_CUDA_DEVICES");
  int n = env ? atoi(env) : 2;
  return n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}

static int current_device(void) { return current ? current->device : -1; }

CUresult CUDAAPI cuInit(unsigned int Flags) {
  (void)Flags;
  return device_count() ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
CUresult CUDAAPI cuDriverGetVersion(int *v) {
  *v = 13000;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s) {
  *s = e == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult e, const char **s) {
  (void)e;
  *s = "an error of the fake driver";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int *count) {
  *count = device_count();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  snprintf(name, (size_t)len, "Fake GPU %d", dev);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attr, CUdevice dev) {
  (void)dev;
  switch (attr) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  default: *pi = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  (void)dev;
  *bytes = (size_t)1 << 34;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  contexts[dev].device = dev;
  *ctx = &contexts[dev];
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  (void)dev;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *ctx) {
  *ctx = current;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  current = ctx;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSynchronize(void) {
  fake_log_append(call_log, "synchronize device %d", current_device());
  return CUDA_SUCCESS;
}

/* ---- streams, events, peers: what the tests look at ---- */

CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int flags) {
  (void)flags;
  *s = malloc(sizeof **s);
  if (!*s) return CUDA_ERROR_OUT_OF_MEMORY;
  (*s)->device = current_device();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  free(s);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags) {
  (void)flags;
  *e = malloc(sizeof **e);
  if (!*e) return CUDA_ERROR_OUT_OF_MEMORY;
  (*e)->device = current_device();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent e) {
  free(e);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  fake_log_append(call_log, "record event of device %d on a stream of device %d (current %d)", e->device,
                  s ? s->device : -1, current_device());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  fake_log_append(call_log, "stream of device %d waits for an event of device %d (current %d, flags %u)",
                  s ? s->device : -1, e->device, current_device(), flags);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  *can = !getenv("FAKE_CUDA_NO_PEER") && dev != peer;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  (void)flags;
  if (!current) return CUDA_ERROR_INVALID_CONTEXT;
  if (current->peers[peer->device]) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  current->peers[peer->device] = 1;
  fake_log_append(call_log, "device %d reaches device %d", current->device, peer->device);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,
                                   CUstream s) {
  fake_log_append(call_log,
                  "copy %zu bytes 0x%llx (device %d) -> 0x%llx (device %d) on a stream of device %d (current %d)", n,
                  (unsigned long long)src, src_ctx->device, (unsigned long long)dst, dst_ctx->device,
                  s ? s->device : -1, current_device());
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n) {
  *p = next_address;
  next_address += (n + 0xffff) & ~(CUdeviceptr)0xffff;
  return CUDA_SUCCESS;
}

/* ---- the rest: success, nothing done ---- */

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *o, void **v) {
  (void)m, (void)image, (void)n, (void)o, (void)v;
  return CUDA_ERROR_NOT_SUPPORTED; /* no modules on the fake */
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  (void)m;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  (void)f, (void)m, (void)name;
  return CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *p, size_t *n, CUmodule m, const char *name) {
  (void)p, (void)n, (void)m, (void)name;
  return CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f) {
  (void)a, (void)f;
  *pi = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  (void)f, (void)a, (void)v;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,
                                void **extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)s, (void)params, (void)extra;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int block, size_t shared) {
  (void)f, (void)block, (void)shared;
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  (void)p;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) {
  (void)d, (void)s, (void)n;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) {
  (void)s;
  memset(d, 0, n);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  (void)d, (void)s, (void)n, (void)st;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) {
  (void)d, (void)v, (void)n;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  (void)s;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  (void)e;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  (void)a, (void)b;
  *ms = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  (void)s, (void)mode;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) {
  (void)s, (void)g;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *e, CUgraph g, unsigned long long flags) {
  (void)e, (void)g, (void)flags;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) {
  (void)e, (void)s;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
  (void)e;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  (void)g;
  return CUDA_SUCCESS;
}
