/* tile.h - the public API of libtile, the runtime for kernels compiled by
 * tilec.
 *
 * libtile loads modules (cubins, or PTX as a slow fallback), finds kernels
 * and the metadata tilec stores beside them, checks launch arguments
 * against that metadata and launches through the CUDA driver API. It also
 * wraps the little of the driver that tests, examples and benchmarks need:
 * device memory, streams, events and CUDA graphs.
 *
 * Design, in the manner of Lua's and Wren's embedding APIs:
 *   - A handful of opaque handles (tile_runtime, tile_module, tile_kernel,
 *     tile_stream, tile_event, tile_graph) and a configuration struct with
 *     callbacks (host allocator, log).
 *   - Every function returns a tile_status; on failure, tile_last_error()
 *     gives a message for the calling thread saying what went wrong (with
 *     the CUDA error name and string where the driver reported it).
 *   - The driver is loaded with dlopen("libcuda.so.1") when a runtime is
 *     created, so programs linking libtile start on machines without a GPU
 *     and get TILE_ERROR_NO_DRIVER as a value. This header needs no CUDA
 *     header; device pointers are plain uint64_t.
 *   - Thread safety: a runtime may be used from any thread at once. Each
 *     call makes the device's primary context current on the calling thread
 *     (replacing whatever context was current there). Modules and kernels
 *     are immutable once created, except for each kernel's cache of encoded
 *     TMA descriptors, which has a lock of its own: launches allocate
 *     nothing, and only those passing tile_arg_tensor arguments take a
 *     (short, per-kernel) lock.
 *
 * Lifetimes: destroy every module, stream, event and graph before the
 * runtime that made it; a tile_kernel belongs to its module and is freed by
 * tile_module_unload.
 */
#ifndef TILE_H
#define TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TILE_VERSION_MAJOR 0
#define TILE_VERSION_MINOR 1

/* The metadata text version this runtime reads ("tile-kernel 1"). */
#define TILE_META_VERSION 1

/* Largest tensor-descriptor rank in kernel metadata and in a tile_tensor.
 * CUtensorMap allows 5, but tile kernels use at most 4-dimensional blocks. */
#define TILE_DESC_MAX_RANK 4

/* Size of a tensor descriptor (CUtensorMap) passed by value. */
#define TILE_DESC_BYTES 128

/* ---- status and errors ------------------------------------------------- */

typedef enum tile_status {
  TILE_OK = 0,
  TILE_ERROR_NO_DRIVER,        /* libcuda.so.1 missing, too old, or broken */
  TILE_ERROR_NO_DEVICE,        /* no CUDA device with the requested ordinal */
  TILE_ERROR_INVALID_ARGUMENT, /* a wrong call: NULL handle, bad launch args */
  TILE_ERROR_NOT_FOUND,        /* no such kernel in the module */
  TILE_ERROR_LOAD,             /* the driver rejected the module */
  TILE_ERROR_LAUNCH,           /* the driver rejected the launch */
  TILE_ERROR_CUDA,             /* any other driver error */
  TILE_ERROR_OUT_OF_MEMORY,    /* host or device memory exhausted */
  TILE_ERROR_IO,               /* a file could not be read */
  TILE_ERROR_BAD_METADATA,     /* kernel metadata malformed or inconsistent */
  TILE_ERROR_UNSUPPORTED,      /* the device cannot run the kernel as built */
  TILE_ERROR_COMPILE,          /* run-time compilation failed (tile_jit.h): the diagnostics are the message */
  TILE_ERROR_NO_NCCL,          /* libnccl.so.2 missing, too old, or broken (tile_nccl.h) */
  TILE_ERROR_NCCL,             /* NCCL reported an error: its text is the message */
} tile_status;

/* "TILE_OK", "TILE_ERROR_NO_DRIVER", ...; never NULL. */
const char *tile_status_name(tile_status status);

/* The message of the last failed libtile call on the calling thread ("" if
 * none). Successful calls leave it unchanged. The text lives in a
 * thread-local buffer, valid until the thread's next failing call. */
const char *tile_last_error(void);

/* ---- configuration ----------------------------------------------------- */

typedef enum tile_log_level {
  TILE_LOG_DEBUG,
  TILE_LOG_INFO,
  TILE_LOG_WARN,
  TILE_LOG_ERROR,
} tile_log_level;

/* Host allocator: alloc returns NULL on failure; free gets the size that
 * was asked for. Both or neither must be set. */
typedef void *(*tile_alloc_fn)(void *user, size_t size);
typedef void (*tile_free_fn)(void *user, void *ptr, size_t size);

/* Log sink: message is one line without a trailing newline. It may be
 * called from any thread that uses the runtime. */
typedef void (*tile_log_fn)(void *user, tile_log_level level, const char *message);

typedef struct tile_config {
  int device;                 /* CUDA device ordinal (default 0) */
  tile_alloc_fn alloc;        /* host allocator (default malloc/free) */
  tile_free_fn free;
  void *alloc_user;
  tile_log_fn log;            /* log sink (default: none) */
  void *log_user;
  tile_log_level log_level;   /* least severe level passed to log */
  const char *driver_library; /* default "libcuda.so.1" */
} tile_config;

/* Fills cfg with the defaults. A zero-initialized tile_config is the same
 * except that log_level is TILE_LOG_DEBUG. */
void tile_config_init(tile_config *cfg);

/* ---- runtime ----------------------------------------------------------- */

typedef struct tile_runtime tile_runtime;

/* Loads the driver, initializes it and retains the device's primary
 * context. cfg may be NULL for the defaults. Create one runtime per device
 * and share it between threads. */
tile_status tile_runtime_create(const tile_config *cfg, tile_runtime **out);

/* Releases the primary context and unloads the driver. NULL is allowed. */
tile_status tile_runtime_destroy(tile_runtime *rt);

/* Waits until all work on the device is done (cuCtxSynchronize). */
tile_status tile_synchronize(tile_runtime *rt);

/* Makes the runtime's context (the device's primary context) current on
 * the calling thread, as every libtile call does first: for calling other
 * CUDA libraries (cuBLAS, cuDNN) that use the current context. */
tile_status tile_runtime_bind(tile_runtime *rt);

typedef struct tile_device_properties {
  char name[256];
  int ordinal;
  int cc_major, cc_minor;           /* compute capability, 9.0 for Hopper */
  int sm_count;
  int max_threads_per_block;
  uint32_t max_grid[3];
  size_t max_shared_per_block;       /* without opting in (48 KiB) */
  size_t max_shared_per_block_optin; /* with opting in (227 KiB on H100) */
  size_t l2_bytes;
  size_t total_memory;
  int driver_version;               /* 13000 for CUDA 13.0 */
} tile_device_properties;

tile_status tile_device_info(const tile_runtime *rt, tile_device_properties *out);

/* ---- modules and kernels ----------------------------------------------- */

typedef struct tile_module tile_module;
typedef struct tile_kernel tile_kernel;

/* Loads a module from memory: a cubin (ELF), a fatbin, or PTX text. PTX is
 * compiled by the driver's JIT, which is slow (around 100 ms for a small
 * module); load cubins where possible. data is copied; it may be freed
 * after the call. */
tile_status tile_module_load(tile_runtime *rt, const void *data, size_t size, tile_module **out);
tile_status tile_module_load_file(tile_runtime *rt, const char *path, tile_module **out);

/* Unloads the module and frees its kernels. NULL is allowed. */
tile_status tile_module_unload(tile_module *m);

/* Finds a kernel and its metadata (the global __tile_meta_<name>). Asking
 * twice for the same name returns the same kernel. A kernel without
 * metadata (for example hand-written PTX) is found, but only
 * tile_launch_unchecked can launch it and tile_kernel_get_info returns
 * NULL for it. */
tile_status tile_kernel_get(tile_module *m, const char *name, tile_kernel **out);

/* ---- kernel metadata --------------------------------------------------- */

typedef enum tile_dtype {
  TILE_DTYPE_I1, TILE_DTYPE_I8, TILE_DTYPE_I16, TILE_DTYPE_I32, TILE_DTYPE_I64,
  TILE_DTYPE_U8, TILE_DTYPE_U16, TILE_DTYPE_U32, TILE_DTYPE_U64,
  TILE_DTYPE_F16, TILE_DTYPE_BF16, TILE_DTYPE_F32, TILE_DTYPE_F64,
  TILE_DTYPE_F8E4M3, TILE_DTYPE_F8E5M2,
} tile_dtype;

typedef enum tile_param_kind {
  TILE_PARAM_PTR,   /* a global pointer to elements of type elem */
  TILE_PARAM_INT,   /* a scalar integer (i1 passed as one byte) */
  TILE_PARAM_FLOAT, /* a scalar float */
  TILE_PARAM_DESC,  /* a tensor descriptor: 128-byte CUtensorMap by value */
} tile_param_kind;

typedef struct tile_param_info {
  const char *name;
  tile_param_kind kind;
  const char *elem;   /* scalar type, or element type of a pointer/descriptor */
  tile_dtype dtype;   /* elem as an enum */
  int elem_bytes;     /* size of one element (1 for i1 and f8) */
  bool elem_signed;   /* signed integers and floats */
  int align;          /* PTR: promised byte alignment ("align N"), else 0 */
  int multiple_of;    /* INT: promised divisor ("multiple_of N"), else 0 */
  int desc_rank;      /* DESC: rank and box dims (box[desc_rank..] are 0) */
  int box[TILE_DESC_MAX_RANK];
  int swizzle;        /* DESC: 0, 32, 64 or 128 bytes */
} tile_param_info;

/* A const parameter the kernel was specialized for (informational). */
typedef struct tile_const_info {
  const char *name;
  const char *type;  /* a dtype name, or "type" for a type parameter */
  const char *value; /* as written in the metadata */
} tile_const_info;

typedef struct tile_kernel_info {
  const char *name;
  int warps;
  int threads;            /* 32 * warps: the block is (threads, 1, 1) */
  unsigned shared_bytes;  /* dynamic shared memory per block */
  int nparams;
  const tile_param_info *params;
  int nconsts;
  const tile_const_info *consts;
  int cluster;            /* programs per cluster along x (1: no clusters); grid x must be a multiple */
} tile_kernel_info;

/* The kernel's metadata, or NULL if its module has none for it. Valid until
 * the module is unloaded. */
const tile_kernel_info *tile_kernel_get_info(const tile_kernel *k);

/* How many programs of k run at the same time on its device (the grid of a
 * persistent kernel): blocks per SM (registers, shared memory, threads)
 * times the SMs, or for a kernel with a cluster line in its metadata, the
 * clusters that fit at once (cuOccupancyMaxActiveClusters) times their
 * size, a multiple of the cluster size as a grid must be. */
tile_status tile_kernel_resident_programs(const tile_kernel *k, uint32_t *programs);

/* The kernel's name as found in its module. */
const char *tile_kernel_name(const tile_kernel *k);

/* Parses metadata text (format in runtime/README.md). Needs no GPU. Free
 * the result with tile_meta_free. Malformed text gives
 * TILE_ERROR_BAD_METADATA with the line and the reason. */
tile_status tile_meta_parse(const char *text, tile_kernel_info **out);
void tile_meta_free(tile_kernel_info *info);

/* ---- launch arguments -------------------------------------------------- */

typedef enum tile_arg_kind {
  TILE_ARG_PTR,   /* device pointer */
  TILE_ARG_INT,   /* signed integer, for any integer parameter it fits */
  TILE_ARG_UINT,  /* unsigned integer, for any integer parameter it fits */
  TILE_ARG_FLOAT, /* float, converted to the parameter's float type */
  TILE_ARG_DESC,   /* pointer to an encoded 128-byte CUtensorMap, copied at launch */
  TILE_ARG_TENSOR, /* pointer to a tile_tensor, encoded into a CUtensorMap at launch */
} tile_arg_kind;

/* A tensor in device memory, for a descriptor parameter (tensor<T, R> in
 * the language). The launch encodes the CUtensorMap from it and from what
 * the kernel's metadata says: the element type, the box the kernel loads
 * and stores, and the shared-memory swizzle. Dimensions are in the
 * language's order: dimension 0 outermost, dimension rank - 1 the
 * contiguous innermost one. Checked at launch (spec/abi.md): ptr non-zero
 * and 16-byte aligned; every size 1 to 2^32; strides[rank - 1] == 1; every
 * other stride at least 1 and, in bytes, a multiple of 16 below 2^40. */
typedef struct tile_tensor {
  uint64_t ptr;                          /* device address of element [0, ..., 0] */
  int rank;                              /* 1..TILE_DESC_MAX_RANK, the parameter's R */
  int64_t shape[TILE_DESC_MAX_RANK];     /* sizes, dimension 0 outermost */
  int64_t strides[TILE_DESC_MAX_RANK];   /* in elements; strides[rank - 1] must be 1 */
} tile_tensor;

typedef struct tile_arg {
  tile_arg_kind kind;
  union {
    uint64_t ptr;
    int64_t i;
    uint64_t u;
    double f;
    const void *desc;
    const tile_tensor *tensor;
  };
} tile_arg;

static inline tile_arg tile_arg_ptr(uint64_t p) { tile_arg a; a.kind = TILE_ARG_PTR; a.ptr = p; return a; }
static inline tile_arg tile_arg_bool(bool v) { tile_arg a; a.kind = TILE_ARG_INT; a.i = v; return a; }
static inline tile_arg tile_arg_i32(int32_t v) { tile_arg a; a.kind = TILE_ARG_INT; a.i = v; return a; }
static inline tile_arg tile_arg_i64(int64_t v) { tile_arg a; a.kind = TILE_ARG_INT; a.i = v; return a; }
static inline tile_arg tile_arg_u32(uint32_t v) { tile_arg a; a.kind = TILE_ARG_UINT; a.u = v; return a; }
static inline tile_arg tile_arg_u64(uint64_t v) { tile_arg a; a.kind = TILE_ARG_UINT; a.u = v; return a; }
static inline tile_arg tile_arg_f32(float v) { tile_arg a; a.kind = TILE_ARG_FLOAT; a.f = v; return a; }
static inline tile_arg tile_arg_f64(double v) { tile_arg a; a.kind = TILE_ARG_FLOAT; a.f = v; return a; }
/* An encoded CUtensorMap (128 bytes, copied at launch): the escape hatch
 * for maps made elsewhere; nothing in it is checked. */
static inline tile_arg tile_arg_desc(const void *tensor_map) {
  tile_arg a;
  a.kind = TILE_ARG_DESC;
  a.desc = tensor_map;
  return a;
}
/* A tensor for a descriptor parameter. The launch reads *t (it need not
 * outlive the call) and encodes the map, or takes it from the kernel's
 * cache of maps it encoded before. */
static inline tile_arg tile_arg_tensor(const tile_tensor *t) {
  tile_arg a;
  a.kind = TILE_ARG_TENSOR;
  a.tensor = t;
  return a;
}

/* Checks a launch against a kernel's metadata without a GPU: the grid
 * (every size >= 1 and within CUDA's limits), the argument count, the kind
 * of each argument, integers in range of their type and multiples of their
 * "multiple_of", finite floats within the range of their type, pointers aligned to
 * their element size and "align", encoded descriptors non-NULL, tensors
 * (tile_arg_tensor) against every TMA rule with the metadata's box and
 * swizzle (the list is in spec/abi.md). On failure, writes
 * a message naming the argument ("argument 2 'n' of kernel 'softmax':
 * expected i32, got a pointer"; arguments are numbered from 0, as indices
 * into args) to msg (if msg_size > 0) and returns
 * TILE_ERROR_INVALID_ARGUMENT. Does not touch tile_last_error. */
tile_status tile_check_args(const tile_kernel_info *info, const uint32_t grid[3], const tile_arg *args,
                            int nargs, char *msg, size_t msg_size);

/* ---- streams, launch, events, graphs ------------------------------------ */

typedef struct tile_stream tile_stream; /* NULL means the default stream */
typedef struct tile_event tile_event;
typedef struct tile_graph tile_graph;

/* Checks args as tile_check_args does (and the grid against the device's
 * limits), packs them (encoding a CUtensorMap for each tile_arg_tensor, or
 * reusing the one the kernel's cache holds for the same parameter and
 * tensor) and launches grid blocks of 32 * warps threads with the
 * metadata's dynamic shared memory. Asynchronous: errors the kernel hits
 * while running show up at the next synchronizing call. */
tile_status tile_launch(const tile_kernel *k, const uint32_t grid[3], tile_stream *stream, const tile_arg *args,
                        int nargs);

/* Launches with nothing checked: params is cuLaunchKernel's kernelParams
 * (one pointer to each argument's bytes). For kernels without metadata. */
tile_status tile_launch_unchecked(const tile_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                                  unsigned shared_bytes, tile_stream *stream, void **params);

/* A new stream, ordered with the default stream (CU_STREAM_DEFAULT). */
tile_status tile_stream_create(tile_runtime *rt, tile_stream **out);
/* Wraps a CUstream made elsewhere (not destroyed by tile_stream_destroy). */
tile_status tile_stream_wrap(tile_runtime *rt, void *cu_stream, tile_stream **out);
/* The CUstream of a stream (NULL for NULL), for use with other libraries. */
void *tile_stream_handle(const tile_stream *s);
tile_status tile_stream_synchronize(tile_stream *s);
tile_status tile_stream_destroy(tile_stream *s);

tile_status tile_event_create(tile_runtime *rt, tile_event **out);
tile_status tile_event_record(tile_event *e, tile_stream *s);
tile_status tile_event_synchronize(tile_event *e);
/* Milliseconds between two recorded, completed events. */
tile_status tile_event_elapsed_ms(const tile_event *start, const tile_event *end, float *ms);
tile_status tile_event_destroy(tile_event *e);

/* Records the work issued to s (from this thread) into a graph; s must not
 * be NULL. end_capture also instantiates the graph. */
tile_status tile_graph_begin_capture(tile_stream *s);
tile_status tile_graph_end_capture(tile_stream *s, tile_graph **out);
tile_status tile_graph_launch(const tile_graph *g, tile_stream *s);
tile_status tile_graph_destroy(tile_graph *g);

/* ---- device memory (for tests, examples, benchmarks). Allocation, frees and
 * copies to and from the host wait for the device; tile_memset_d8 and
 * tile_memcpy_dtod are asynchronous to the host (on the default stream or
 * the one given). ----------------------------------------------------- */

tile_status tile_mem_alloc(tile_runtime *rt, size_t bytes, uint64_t *out);
tile_status tile_mem_free(tile_runtime *rt, uint64_t ptr); /* 0 is allowed */
tile_status tile_memcpy_htod(tile_runtime *rt, uint64_t dst, const void *src, size_t bytes);
tile_status tile_memcpy_dtoh(tile_runtime *rt, void *dst, uint64_t src, size_t bytes);
tile_status tile_memset_d8(tile_runtime *rt, uint64_t dst, uint8_t value, size_t bytes);
/* Device-to-device copy on a stream (NULL: the default stream); returns
 * without waiting. */
tile_status tile_memcpy_dtod(tile_runtime *rt, uint64_t dst, uint64_t src, size_t bytes, tile_stream *stream);

/* ---- several devices --------------------------------------------------------
 * One tile_runtime per device (tile_config.device); each call makes its
 * runtime's context current, so one thread can drive every device in turn.
 * Collectives between devices are in tile_nccl.h (libtile_dist). */

/* How many CUDA devices the driver sees (cfg may be NULL: the default
 * driver library). No driver: TILE_ERROR_NO_DRIVER and *count 0; a driver
 * without devices: TILE_OK and *count 0. Creates no runtime. */
tile_status tile_device_count(const tile_config *cfg, int *count);

/* Lets kernels and copies on rt's device read and write peer's device
 * memory (cuCtxEnablePeerAccess; enabling it twice is not an error). Where
 * the hardware has no peer path, returns TILE_OK with *enabled false
 * (copies between the two still work, staged by the driver). The same
 * device: *enabled true. */
tile_status tile_peer_access_enable(tile_runtime *rt, tile_runtime *peer, bool *enabled);

/* Copies bytes from src (src_rt's device) to dst (dst_rt's device) on
 * stream, which belongs to either runtime (NULL: the destination's
 * default stream); returns without waiting. */
tile_status tile_memcpy_peer(tile_runtime *dst_rt, uint64_t dst, tile_runtime *src_rt, uint64_t src, size_t bytes,
                             tile_stream *stream);

/* Work issued to s after this call waits until e (recorded on any stream
 * of any device) has completed; the host does not wait. s must not be
 * NULL. */
tile_status tile_stream_wait_event(tile_stream *s, const tile_event *e);

/* ---- escape hatches ------------------------------------------------------
 * For benchmarks and interoperation: the driver objects behind the handles. */

/* The kernel's CUfunction. */
void *tile_kernel_handle(const tile_kernel *k);
/* A function of the loaded driver by its exported name (e.g.
 * "cuLaunchKernel"), or NULL. */
void *tile_driver_function(tile_runtime *rt, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* TILE_H */
