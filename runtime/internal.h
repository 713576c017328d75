/* internal.h - libtile's private declarations, shared by the .c files of runtime/.
 *
 * The CUDA headers are included here, never from tile.h: they give the
 * driver's types and constants, and cudaTypedefs.h gives the exact function
 * pointer type of each versioned driver entry point, so the pointers found
 * with dlsym are called with the signature the driver exports. libtile
 * never links libcuda; users of tile.h never need cuda.h.
 *
 * Names shared between files start with tilert_ (tile_ is the public API).
 */
#ifndef TILE_RUNTIME_INTERNAL_H
#define TILE_RUNTIME_INTERNAL_H

#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdarg.h>

#include "tile.h"

/* ---- limits ------------------------------------------------------------ */

/* Most parameters a checked launch takes: the argument pointers live in a
 * stack array of this size, so a launch allocates nothing. */
#define TILE_MAX_PARAMS 64

/* Most bytes of packed arguments: CUDA's classic 4 KiB kernel parameter
 * space (32 tensor descriptors), packed on the stack at launch. */
#define TILE_MAX_PARAM_BYTES 4096

/* CUtensorMap must be 64-byte aligned. */
#define TILE_DESC_ALIGN 64

/* Encoded tensor maps each kernel with descriptor parameters keeps (all
 * its descriptor parameters together). A hot loop launches a kernel with a
 * handful of tensors per parameter (a GEMM's A, B and C over a few layers
 * or shapes); 32 covers that while the linear scan of the keys under the
 * lock stays short. A workload cycling through more tensors than this
 * still works and pays one encode per miss (on an H200, a launch that
 * misses cost about 0.2 us more host time than one that hits). The table
 * is allocated with the kernel (about 7 KiB), so launches never
 * allocate. */
#define TILE_TMAP_CACHE_ENTRIES 32

/* Longest kernel name accepted (symbol names are short in practice; the
 * metadata symbol name is built in a stack buffer). */
#define TILE_MAX_NAME 512

/* Prefix of the global holding a kernel's metadata text. */
#define TILE_META_SYMBOL_PREFIX "__tile_meta_"

/* Largest metadata text: a kernel with TILE_MAX_PARAMS parameters needs a
 * few KiB; anything near this is a corrupt module. */
#define TILE_META_MAX_TEXT 65536

/* Size of the thread-local error message buffer; long JIT logs are cut. */
#define TILE_ERROR_MAX 8192

/* Dynamic shared memory a kernel may use without opting in (every CUDA
 * GPU since Volta); above it cuFuncSetAttribute must raise the limit. */
#define TILE_DEFAULT_SHARED_LIMIT (48u * 1024u)

/* CUDA's grid limits on every GPU since compute capability 3.0, used by the
 * pure tile_check_args; tile_launch uses the values the device reports. */
#define TILE_GRID_MAX_X 2147483647u
#define TILE_GRID_MAX_YZ 65535u

/* ---- host memory ------------------------------------------------------- */

typedef struct tilert_allocator {
  tile_alloc_fn alloc;
  tile_free_fn free;
  void *user;
} tilert_allocator;

/* malloc/free behind the tile_alloc_fn/tile_free_fn interface. */
extern const tilert_allocator tilert_default_allocator;

void *tilert_alloc(const tilert_allocator *a, size_t size);
void *tilert_calloc(const tilert_allocator *a, size_t size);
void tilert_free(const tilert_allocator *a, void *ptr, size_t size);

/* ---- the driver -------------------------------------------------------- */

/* X(field, function pointer type, exported symbol, fallback symbol or NULL,
 * required). The symbols are the versioned names cuda.h maps the API names
 * to (cuMemAlloc -> cuMemAlloc_v2, ...); a fallback is an older export with
 * the same signature, for drivers that predate the newer one. */
#define TILERT_DRIVER_FUNCTIONS(X)                                                                   \
  X(init, PFN_cuInit_v2000, "cuInit", NULL, true)                                                     \
  X(driver_get_version, PFN_cuDriverGetVersion_v2020, "cuDriverGetVersion", NULL, true)               \
  X(get_error_name, PFN_cuGetErrorName_v6000, "cuGetErrorName", NULL, true)                           \
  X(get_error_string, PFN_cuGetErrorString_v6000, "cuGetErrorString", NULL, true)                     \
  X(device_get_count, PFN_cuDeviceGetCount_v2000, "cuDeviceGetCount", NULL, true)                     \
  X(device_get, PFN_cuDeviceGet_v2000, "cuDeviceGet", NULL, true)                                     \
  X(device_get_name, PFN_cuDeviceGetName_v2000, "cuDeviceGetName", NULL, true)                        \
  X(device_get_attribute, PFN_cuDeviceGetAttribute_v2000, "cuDeviceGetAttribute", NULL, true)         \
  X(device_total_mem, PFN_cuDeviceTotalMem_v3020, "cuDeviceTotalMem_v2", NULL, true)                  \
  X(primary_ctx_retain, PFN_cuDevicePrimaryCtxRetain_v7000, "cuDevicePrimaryCtxRetain", NULL, true)   \
  X(primary_ctx_release, PFN_cuDevicePrimaryCtxRelease_v11000, "cuDevicePrimaryCtxRelease_v2", NULL,  \
    true)                                                                                             \
  X(ctx_get_current, PFN_cuCtxGetCurrent_v4000, "cuCtxGetCurrent", NULL, true)                        \
  X(ctx_set_current, PFN_cuCtxSetCurrent_v4000, "cuCtxSetCurrent", NULL, true)                        \
  X(ctx_synchronize, PFN_cuCtxSynchronize_v2000, "cuCtxSynchronize", NULL, true)                      \
  X(module_load_data_ex, PFN_cuModuleLoadDataEx_v2010, "cuModuleLoadDataEx", NULL, true)              \
  X(module_unload, PFN_cuModuleUnload_v2000, "cuModuleUnload", NULL, true)                            \
  X(module_get_function, PFN_cuModuleGetFunction_v2000, "cuModuleGetFunction", NULL, true)            \
  X(module_get_global, PFN_cuModuleGetGlobal_v3020, "cuModuleGetGlobal_v2", NULL, true)               \
  X(func_get_attribute, PFN_cuFuncGetAttribute_v2020, "cuFuncGetAttribute", NULL, true)               \
  X(func_set_attribute, PFN_cuFuncSetAttribute_v9000, "cuFuncSetAttribute", NULL, true)               \
  X(func_get_param_info, PFN_cuFuncGetParamInfo_v12040, "cuFuncGetParamInfo", NULL, false)            \
  X(launch_kernel, PFN_cuLaunchKernel_v4000, "cuLaunchKernel", NULL, true)                            \
  X(occupancy_max_blocks, PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050,                       \
    "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL, true)                                        \
  X(occupancy_max_clusters, PFN_cuOccupancyMaxActiveClusters_v11070, "cuOccupancyMaxActiveClusters",   \
    NULL, false)                                                                                      \
  X(mem_alloc, PFN_cuMemAlloc_v3020, "cuMemAlloc_v2", NULL, true)                                     \
  X(mem_free, PFN_cuMemFree_v3020, "cuMemFree_v2", NULL, true)                                        \
  X(memcpy_htod, PFN_cuMemcpyHtoD_v3020, "cuMemcpyHtoD_v2", NULL, true)                               \
  X(memcpy_dtoh, PFN_cuMemcpyDtoH_v3020, "cuMemcpyDtoH_v2", NULL, true)                               \
  X(memcpy_dtod_async, PFN_cuMemcpyDtoDAsync_v3020, "cuMemcpyDtoDAsync_v2", NULL, true)                \
  X(memset_d8, PFN_cuMemsetD8_v3020, "cuMemsetD8_v2", NULL, true)                                     \
  X(stream_create, PFN_cuStreamCreate_v2000, "cuStreamCreate", NULL, true)                            \
  X(stream_destroy, PFN_cuStreamDestroy_v4000, "cuStreamDestroy_v2", NULL, true)                      \
  X(stream_synchronize, PFN_cuStreamSynchronize_v2000, "cuStreamSynchronize", NULL, true)             \
  X(event_create, PFN_cuEventCreate_v2000, "cuEventCreate", NULL, true)                               \
  X(event_record, PFN_cuEventRecord_v2000, "cuEventRecord", NULL, true)                               \
  X(event_synchronize, PFN_cuEventSynchronize_v2000, "cuEventSynchronize", NULL, true)                \
  X(event_elapsed_time, PFN_cuEventElapsedTime_v12080, "cuEventElapsedTime_v2", "cuEventElapsedTime", \
    true)                                                                                             \
  X(event_destroy, PFN_cuEventDestroy_v4000, "cuEventDestroy_v2", NULL, true)                         \
  X(stream_begin_capture, PFN_cuStreamBeginCapture_v10010, "cuStreamBeginCapture_v2", NULL, true)     \
  X(stream_end_capture, PFN_cuStreamEndCapture_v10000, "cuStreamEndCapture", NULL, true)              \
  X(graph_instantiate, PFN_cuGraphInstantiateWithFlags_v11040, "cuGraphInstantiateWithFlags", NULL,   \
    true)                                                                                             \
  X(graph_launch, PFN_cuGraphLaunch_v10000, "cuGraphLaunch", NULL, true)                              \
  X(graph_exec_destroy, PFN_cuGraphExecDestroy_v10000, "cuGraphExecDestroy", NULL, true)              \
  X(graph_destroy, PFN_cuGraphDestroy_v10000, "cuGraphDestroy", NULL, true)                           \
  X(tensor_map_encode_tiled, PFN_cuTensorMapEncodeTiled_v12000, "cuTensorMapEncodeTiled", NULL, false)      \
  X(stream_wait_event, PFN_cuStreamWaitEvent_v3020, "cuStreamWaitEvent", NULL, true)                  \
  X(device_can_access_peer, PFN_cuDeviceCanAccessPeer_v4000, "cuDeviceCanAccessPeer", NULL, true)     \
  X(ctx_enable_peer_access, PFN_cuCtxEnablePeerAccess_v4000, "cuCtxEnablePeerAccess", NULL, true)     \
  X(memcpy_peer_async, PFN_cuMemcpyPeerAsync_v4000, "cuMemcpyPeerAsync", NULL, true)

typedef struct tilert_driver {
  void *library; /* dlopen handle */
#define TILERT_DRIVER_FIELD(field, type, symbol, fallback, required) type field;
  TILERT_DRIVER_FUNCTIONS(TILERT_DRIVER_FIELD)
#undef TILERT_DRIVER_FIELD
} tilert_driver;

/* Opens library (default "libcuda.so.1") and resolves every function. On
 * failure sets the error and returns TILE_ERROR_NO_DRIVER. */
tile_status tilert_driver_open(tilert_driver *drv, const char *library);
void tilert_driver_close(tilert_driver *drv);

/* ---- handles ----------------------------------------------------------- */

/* Objects that must be gone before their runtime is destroyed. */
typedef struct tilert_live_counts {
  long modules, streams, events, graphs;
} tilert_live_counts;

struct tile_runtime {
  tilert_allocator alloc;
  tile_log_fn log;
  void *log_user;
  tile_log_level log_level;
  tilert_driver drv;
  CUdevice device;
  CUcontext ctx; /* the device's retained primary context */
  tile_device_properties props;
  pthread_mutex_t mutex; /* guards live and every module's kernel list */
  tilert_live_counts live;
};

/* Where one argument goes in the packed parameter buffer. */
typedef struct tilert_param_slot {
  uint16_t offset;
  uint16_t size;
} tilert_param_slot;

typedef struct tilert_tmap_cache tilert_tmap_cache;

struct tile_kernel {
  tile_runtime *rt;
  tile_module *module;
  tile_kernel *next; /* in the module's list, under rt->mutex */
  CUfunction func;
  tile_kernel_info *info;    /* NULL: no metadata, unchecked launches only */
  tilert_tmap_cache *tmaps;  /* encoded maps; NULL without descriptor parameters */
  unsigned block_x;       /* 32 * warps */
  unsigned shared_bytes;
  size_t size; /* bytes of this allocation (struct + slots + name) */
  const char *name;
  tilert_param_slot slots[]; /* info->nparams of them */
};

struct tile_module {
  tile_runtime *rt;
  CUmodule module;
  tile_kernel *kernels; /* under rt->mutex */
};

struct tile_stream {
  tile_runtime *rt;
  CUstream stream;
  bool owned; /* created by tile_stream_create, destroyed with the wrapper */
};

struct tile_event {
  tile_runtime *rt;
  CUevent event;
};

struct tile_graph {
  tile_runtime *rt;
  CUgraph graph;
  CUgraphExec exec;
};

/* The integer value of the kernel's const `name` from its metadata; 0 when
 * it has none (for the libraries over libtile, which read block sizes). */
int tilert_kernel_const_int(const tile_kernel *k, const char *name);

/* ---- errors and logging ------------------------------------------------ */

/* Sets the calling thread's error message and returns status. */
tile_status tilert_fail(tile_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* As tilert_fail, and passes the message to the runtime's log. */
tile_status tilert_rt_fail(const tile_runtime *rt, tile_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* For a failed driver call: the message is fmt, then ": CUDA_ERROR_X:
 * description". The status is derived from the CUDA error where it has a
 * meaning of its own (out of memory, no device, not found), else fallback. */
tile_status tilert_cu_fail(const tile_runtime *rt, CUresult result, tile_status fallback, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Puts "prefix: " in front of the calling thread's error message. */
void tilert_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The thread-local message buffer, for code that formats in place. */
char *tilert_error_buffer(size_t *capacity);

/* Passes the calling thread's error message to the runtime's log. */
void tilert_log_last_error(const tile_runtime *rt);

void tilert_log(const tile_runtime *rt, tile_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* printf into a bounded buffer; the text is cut (never overflows) if long. */
void tilert_format(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- runtime ----------------------------------------------------------- */

/* Makes the runtime's context current on the calling thread. */
tile_status tilert_bind(const tile_runtime *rt);

/* The CUstream of s (NULL for the default stream), checking that s
 * belongs to rt. */
tile_status tilert_stream_of(const tile_runtime *rt, const tile_stream *s, CUstream *out);

void tilert_lock(tile_runtime *rt);
void tilert_unlock(tile_runtime *rt);

/* ---- metadata and arguments -------------------------------------------- */

/* Properties of a tile_dtype. */
typedef struct tilert_dtype_info {
  const char *name;
  int bytes;
  bool is_int, is_float, is_signed;
} tilert_dtype_info;

const tilert_dtype_info *tilert_dtype(tile_dtype t);

/* tile_meta_parse with a chosen allocator. */
tile_status tilert_meta_parse(const tilert_allocator *a, const char *text, tile_kernel_info **out);

/* tile_check_args with the grid limits of a device. */
tile_status tilert_check_args(const tile_kernel_info *info, const uint32_t grid[3], const uint32_t max_grid[3],
                              const tile_arg *args, int nargs, char *msg, size_t msg_size);

/* Bytes and alignment of a parameter in the packed argument buffer. */
int tilert_param_size(const tile_param_info *p);
int tilert_param_align(const tile_param_info *p);

/* Where each of info's parameters goes in the packed buffer (slots has
 * info->nparams entries). TILE_ERROR_UNSUPPORTED (with the error message
 * set) above TILE_MAX_PARAM_BYTES. */
tile_status tilert_layout_params(const tile_kernel_info *info, tilert_param_slot *slots);

/* Writes checked args into buf (aligned to TILE_DESC_ALIGN) at slots and
 * points params[i] at each; tile_arg_tensor arguments go through tmaps
 * (which must exist if there are any). Fails only where encoding a tensor
 * map fails, with the error message set. */
tile_status tilert_pack_args(const tile_kernel_info *info, const tilert_param_slot *slots, tilert_tmap_cache *tmaps,
                             const tile_arg *args, unsigned char *buf, void **params);

/* ---- tensor maps (tmap.c) ------------------------------------------------ */

/* The encoder: the driver's cuTensorMapEncodeTiled, or in tests a fake
 * that records what it is given. */
typedef PFN_cuTensorMapEncodeTiled_v12000 tilert_tmap_encode_fn;

/* A cache of TILE_TMAP_CACHE_ENTRIES encoded maps, least recently used
 * out first, safe to use from several threads. encode may be NULL (a
 * driver older than CUDA 12.0): every lookup then fails with
 * TILE_ERROR_UNSUPPORTED. error_name (may be NULL) names CUresults in
 * messages. */
tile_status tilert_tmap_cache_create(const tilert_allocator *a, tilert_tmap_encode_fn encode,
                                     PFN_cuGetErrorName_v6000 error_name, tilert_tmap_cache **out);
void tilert_tmap_cache_destroy(tilert_tmap_cache *c); /* NULL is allowed */

/* Whether a kernel needs a cache: it has a descriptor parameter. */
bool tilert_has_desc_params(const tile_kernel_info *info);

/* The CUtensorMap for the tile_tensor t passed as argument index (a
 * descriptor parameter of info; t already checked by tilert_check_args),
 * written to map (TILE_DESC_BYTES bytes): from the cache when the same
 * (index, ptr, rank, shape, strides) was encoded before, else encoded and
 * cached. An encoder error is TILE_ERROR_INVALID_ARGUMENT with every value
 * passed in the message. */
tile_status tilert_tmap_get(tilert_tmap_cache *c, const tile_kernel_info *info, int index, const tile_tensor *t,
                            void *map);

/* Whether finite x becomes infinite in float type t (false for an
 * infinity or NaN, and for f64). */
bool tilert_float_overflows(tile_dtype t, double x);

/* IEEE binary16 and bfloat16 bits of x, rounded to nearest even. */
uint16_t tilert_f16_bits(double x);
uint16_t tilert_bf16_bits(double x);

#endif /* TILE_RUNTIME_INTERNAL_H */
