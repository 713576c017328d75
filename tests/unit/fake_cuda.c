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
 * peer access (refused when FAKE_CUDA_NO_PEER is set), modules (cubins:
 * their functions and globals found in the ELF symbol table, so libtile
 * reads real kernel metadata), tensor maps that keep their address and
 * sizes, and a log of the calls that move work between devices, of the
 * calls that make the host wait (synchronizations, copies of device
 * memory to the host), and of every launch with its arguments decoded
 * from the kernel's metadata, read with fake_cuda_log(). Device memory
 * is only addresses: nothing is read or written through them, and nothing
 * runs. The rest succeed and do nothing. */
#include <cuda.h>
#include <elf.h>
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
/* Where the fake's device memory starts (addresses only: nothing behind them). */
#define FAKE_MEMORY_BASE 0x100000000ull
static CUdeviceptr next_address = FAKE_MEMORY_BASE;

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
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 48 * 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 227 * 1024; break;
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

/* ---- modules: cubins read for their symbols, launches logged ---- */

/* Functions a module hands out (a tile module has a few kernels). */
#define FAKE_MAX_FUNCTIONS 16

struct CUmod_st {
  unsigned char *elf; /* a copy of the image */
  size_t size;
  struct CUfunc_st *functions[FAKE_MAX_FUNCTIONS]; /* freed with the module */
  int nfunctions;
};
struct CUfunc_st {
  CUmodule module;
  char name[256];
};

/* The bytes an ELF image spans: its section headers and every section. */
static size_t elf_size(const Elf64_Ehdr *e) {
  size_t end = e->e_shoff + (size_t)e->e_shnum * e->e_shentsize;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)((const unsigned char *)e + e->e_shoff);
  for (int i = 0; i < e->e_shnum; i++)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > end) end = sh[i].sh_offset + sh[i].sh_size;
  return end;
}

/* The symbol `name` of the module's ELF, or NULL. */
static const Elf64_Sym *find_symbol(CUmodule m, const char *name) {
  const Elf64_Ehdr *e = (const Elf64_Ehdr *)m->elf;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(m->elf + e->e_shoff);
  for (int i = 0; i < e->e_shnum; i++) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    const Elf64_Sym *syms = (const Elf64_Sym *)(m->elf + sh[i].sh_offset);
    const char *names = (const char *)m->elf + sh[sh[i].sh_link].sh_offset;
    for (size_t k = 0; k < sh[i].sh_size / sizeof *syms; k++)
      if (!strcmp(names + syms[k].st_name, name)) return &syms[k];
  }
  return NULL;
}

/* Where a symbol's bytes are in the module's copy. */
static const unsigned char *symbol_bytes(CUmodule m, const Elf64_Sym *sym) {
  const Elf64_Ehdr *e = (const Elf64_Ehdr *)m->elf;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(m->elf + e->e_shoff);
  return m->elf + sh[sym->st_shndx].sh_offset + sym->st_value;
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *o, void **v) {
  (void)n, (void)o, (void)v;
  const Elf64_Ehdr *e = image;
  if (memcmp(e->e_ident, ELFMAG, SELFMAG)) return CUDA_ERROR_INVALID_IMAGE; /* cubins only */
  *m = calloc(1, sizeof **m);
  if (!*m) return CUDA_ERROR_OUT_OF_MEMORY;
  (*m)->size = elf_size(e);
  (*m)->elf = malloc((*m)->size);
  if (!(*m)->elf) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy((*m)->elf, image, (*m)->size);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  for (int i = 0; i < m->nfunctions; i++)
    free(m->functions[i]);
  free(m->elf);
  free(m);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  const Elf64_Sym *sym = find_symbol(m, name);
  if (!sym || ELF64_ST_TYPE(sym->st_info) != STT_FUNC) return CUDA_ERROR_NOT_FOUND;
  if (m->nfunctions == FAKE_MAX_FUNCTIONS) return CUDA_ERROR_OUT_OF_MEMORY;
  *f = malloc(sizeof **f);
  if (!*f) return CUDA_ERROR_OUT_OF_MEMORY;
  m->functions[m->nfunctions++] = *f;
  (*f)->module = m;
  snprintf((*f)->name, sizeof(*f)->name, "%s", name);
  return CUDA_SUCCESS;
}
/* A global's "device address" is the address of its bytes in the copy,
 * which cuMemcpyDtoH reads. */
CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *p, size_t *n, CUmodule m, const char *name) {
  const Elf64_Sym *sym = find_symbol(m, name);
  if (!sym || ELF64_ST_TYPE(sym->st_info) != STT_OBJECT) return CUDA_ERROR_NOT_FOUND;
  *p = (CUdeviceptr)(uintptr_t)symbol_bytes(m, sym);
  *n = sym->st_size;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f) {
  (void)f;
  *pi = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  (void)f, (void)a, (void)v;
  return CUDA_SUCCESS;
}

/* The fake tensor map: the address, the rank and the sizes (innermost
 * first, as the driver takes them). */
typedef struct fake_map {
  uint64_t address;
  uint32_t rank;
  uint64_t dims[5];
} fake_map;

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *address,
                                        const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                        const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill fill) {
  (void)type, (void)strides, (void)box, (void)elem_strides, (void)interleave, (void)swizzle, (void)l2, (void)fill;
  fake_map f = {(uint64_t)(uintptr_t)address, rank, {0}};
  for (cuuint32_t i = 0; i < rank && i < 5; i++)
    f.dims[i] = dims[i];
  memset(map, 0, sizeof *map);
  memcpy(map, &f, sizeof f);
  return CUDA_SUCCESS;
}

/* Appends one parameter's value as the kernel's metadata line `line`
 * ("param NAME KIND ...") describes it. */
static void append_param(char *out, size_t size, const char *line, const void *value) {
  char name[64] = "", kind[16] = "";
  if (sscanf(line, "param %63s %15s", name, kind) != 2) return;
  size_t used = strlen(out);
  if (!strcmp(kind, "desc")) {
    fake_map f;
    memcpy(&f, value, sizeof f);
    used += (size_t)snprintf(out + used, size - used, " %s=0x%llx[", name, (unsigned long long)f.address);
    for (uint32_t d = f.rank; d-- > 0 && used < size;)
      used += (size_t)snprintf(out + used, size - used, d ? "%llux" : "%llu", (unsigned long long)f.dims[d]);
    snprintf(out + used, size - used, "]");
  } else if (!strcmp(kind, "ptr") || !strcmp(kind, "i64") || !strcmp(kind, "u64")) {
    uint64_t v;
    memcpy(&v, value, sizeof v);
    snprintf(out + used, size - used, strcmp(kind, "ptr") ? " %s=%llu" : " %s=0x%llx", name, (unsigned long long)v);
  } else if (!strcmp(kind, "f32")) {
    float v;
    memcpy(&v, value, sizeof v);
    snprintf(out + used, size - used, " %s=%g", name, (double)v);
  } else if (!strcmp(kind, "i32") || !strcmp(kind, "u32")) {
    uint32_t v;
    memcpy(&v, value, sizeof v);
    snprintf(out + used, size - used, " %s=%u", name, v);
  }
}

/* Logs "launch NAME grid XxYxZ on device D: PARAM=VALUE ..." from the
 * kernel's metadata. */
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shared, CUstream s, void **params,
                                void **extra) {
  (void)bx, (void)by, (void)bz, (void)shared, (void)extra;
  char symbol[300], line[1024] = "";
  snprintf(symbol, sizeof symbol, "__tile_meta_%s", f->name);
  const Elf64_Sym *meta = find_symbol(f->module, symbol);
  if (meta) {
    const char *text = (const char *)symbol_bytes(f->module, meta), *end = text + meta->st_size;
    int i = 0;
    for (const char *p = text; p < end;) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      if (end - p > 6 && !strncmp(p, "param ", 6)) append_param(line, sizeof line, p, params[i++]);
      p = nl ? nl + 1 : end;
    }
  }
  fake_log_append(call_log, "launch %s grid %ux%ux%u on device %d:%s", f->name, gx, gy, gz,
                  s ? s->device : current_device(), line);
  return CUDA_SUCCESS;
}

/* ---- the rest: success, nothing done ---- */

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
/* From a module's global (a host address): its bytes; from memory of
 * cuMemAlloc: zeros. */
CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) {
  if (s >= FAKE_MEMORY_BASE && s < next_address) {
    memset(d, 0, n);
    fake_log_append(call_log, "copy %zu bytes to the host (current %d)", n, current_device());
  } else {
    memcpy(d, (const void *)(uintptr_t)s, n);
  }
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
  fake_log_append(call_log, "synchronize a stream of device %d", s ? s->device : -1);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  fake_log_append(call_log, "synchronize an event of device %d", e->device);
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
