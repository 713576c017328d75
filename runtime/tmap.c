/* tmap.c - TMA tensor maps: encoding a CUtensorMap from a tile_tensor and
 * the box and swizzle in the kernel's metadata, and each kernel's cache of
 * the maps it encoded.
 *
 * A descriptor parameter (tensor<T, R> in the language) takes a 128-byte
 * CUtensorMap by value. The caller describes the tensor plainly (device
 * address, shape and strides in elements, dimension 0 outermost); the
 * compiler chose the element type, the box each TMA copy moves and the
 * shared-memory swizzle, and wrote them into the metadata. This file puts
 * the two together in the form cuTensorMapEncodeTiled wants: dimensions
 * innermost first, R - 1 strides in bytes (the innermost dimension is
 * contiguous and has none), every element stride 1, no interleave, L2
 * promotion of 128 bytes, and out-of-bounds elements filled with zeros
 * (what the language's load_block promises).
 *
 * Encoding runs on the host, so each kernel keeps the maps it made in a
 * small table keyed by the argument index and the tensor: a launch with
 * the same tensor as before costs a lock, a scan of the table and a
 * 128-byte copy, about what passing an encoded map costs (on an H200, a
 * hit added 1-3% to a bare cuLaunchKernel, a miss 6-11%; the numbers are
 * in runtime/README.md). The table is fixed-size
 * (TILE_TMAP_CACHE_ENTRIES, least recently used out first), allocated with
 * the kernel, so a launch never allocates. The mutex guards only the
 * table; the encoder runs outside it, so two threads that miss on the same
 * tensor at once both encode it (the same map) and one of them stores it.
 *
 * The encoder is a function pointer given when the cache is made (the
 * driver's, for a kernel): unit tests pass a fake one and check what it
 * receives and how often it is called, without a GPU.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A cache key: the argument index and the tensor, with the unused
 * dimensions zero so that keys compare with memcmp. ptr comes first: keys
 * of different tensors usually differ there, which the scan tests first. */
typedef struct tmap_key {
  uint64_t ptr;
  int64_t shape[TILE_DESC_MAX_RANK];
  int64_t strides[TILE_DESC_MAX_RANK];
  int32_t index;
  int32_t rank;
} tmap_key;

_Static_assert(sizeof(tmap_key) == sizeof(uint64_t) * (1 + 2 * TILE_DESC_MAX_RANK) + 2 * sizeof(int32_t),
               "tmap_key must have no padding: keys are compared with memcmp");

typedef struct tmap_entry {
  tmap_key key;
  uint64_t last_use; /* the cache's clock when last used; 0: empty */
  uint64_t map[TILE_DESC_BYTES / sizeof(uint64_t)];
} tmap_entry;

struct tilert_tmap_cache {
  tilert_allocator alloc;
  tilert_tmap_encode_fn encode;
  PFN_cuGetErrorName_v6000 error_name;
  pthread_mutex_t mutex; /* guards clock and entries */
  uint64_t clock;
  tmap_entry entries[TILE_TMAP_CACHE_ENTRIES];
};

/* Everything cuTensorMapEncodeTiled gets for one map that depends on the
 * tensor or the metadata; arrays innermost dimension first. */
typedef struct tmap_request {
  CUtensorMapDataType dtype;
  cuuint32_t rank;
  uint64_t address;
  cuuint64_t dims[TILE_DESC_MAX_RANK];
  cuuint64_t strides[TILE_DESC_MAX_RANK]; /* rank - 1 of them, in bytes */
  cuuint32_t box[TILE_DESC_MAX_RANK];
  cuuint32_t element_strides[TILE_DESC_MAX_RANK];
  CUtensorMapSwizzle swizzle;
} tmap_request;

/* The fixed choices: no interleave (tile tensors are plain row-major
 * blocks), 128-byte L2 promotion (whole 128-byte lines, which every
 * 16-byte-multiple box row of a tile load touches), zero fill out of
 * bounds. */
#define TMAP_INTERLEAVE CU_TENSOR_MAP_INTERLEAVE_NONE
#define TMAP_L2_PROMOTION CU_TENSOR_MAP_L2_PROMOTION_L2_128B
#define TMAP_OOB_FILL CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE

/* Names of the data types tma_data_type returns, for messages. */
static const char *const data_type_names[] = {
    [CU_TENSOR_MAP_DATA_TYPE_UINT8] = "UINT8",     [CU_TENSOR_MAP_DATA_TYPE_UINT16] = "UINT16",
    [CU_TENSOR_MAP_DATA_TYPE_UINT32] = "UINT32",   [CU_TENSOR_MAP_DATA_TYPE_INT32] = "INT32",
    [CU_TENSOR_MAP_DATA_TYPE_UINT64] = "UINT64",   [CU_TENSOR_MAP_DATA_TYPE_INT64] = "INT64",
    [CU_TENSOR_MAP_DATA_TYPE_FLOAT16] = "FLOAT16", [CU_TENSOR_MAP_DATA_TYPE_FLOAT32] = "FLOAT32",
    [CU_TENSOR_MAP_DATA_TYPE_FLOAT64] = "FLOAT64", [CU_TENSOR_MAP_DATA_TYPE_BFLOAT16] = "BFLOAT16",
};

/* TMA moves bytes: the 8-bit floats travel as UINT8 and signed 8- and
 * 16-bit integers as their unsigned types. i1 has no TMA type (the
 * metadata parser rejects it for descriptors). */
static bool tma_data_type(tile_dtype t, CUtensorMapDataType *out) {
  switch (t) {
  case TILE_DTYPE_I8:
  case TILE_DTYPE_U8:
  case TILE_DTYPE_F8E4M3:
  case TILE_DTYPE_F8E5M2: *out = CU_TENSOR_MAP_DATA_TYPE_UINT8; return true;
  case TILE_DTYPE_I16:
  case TILE_DTYPE_U16: *out = CU_TENSOR_MAP_DATA_TYPE_UINT16; return true;
  case TILE_DTYPE_I32: *out = CU_TENSOR_MAP_DATA_TYPE_INT32; return true;
  case TILE_DTYPE_U32: *out = CU_TENSOR_MAP_DATA_TYPE_UINT32; return true;
  case TILE_DTYPE_I64: *out = CU_TENSOR_MAP_DATA_TYPE_INT64; return true;
  case TILE_DTYPE_U64: *out = CU_TENSOR_MAP_DATA_TYPE_UINT64; return true;
  case TILE_DTYPE_F16: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; return true;
  case TILE_DTYPE_BF16: *out = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; return true;
  case TILE_DTYPE_F32: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; return true;
  case TILE_DTYPE_F64: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT64; return true;
  case TILE_DTYPE_I1: return false;
  }
  return false;
}

/* The metadata's swizzle span in bytes (0, 32, 64 or 128) as the enum. */
static CUtensorMapSwizzle tma_swizzle(int bytes) {
  switch (bytes) {
  case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
  case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
  case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
  default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

static const char *swizzle_name(CUtensorMapSwizzle s) {
  switch (s) {
  case CU_TENSOR_MAP_SWIZZLE_32B: return "32B";
  case CU_TENSOR_MAP_SWIZZLE_64B: return "64B";
  case CU_TENSOR_MAP_SWIZZLE_128B: return "128B";
  default: return "NONE";
  }
}

/* "argument I 'NAME' of kernel 'K': reason", as the message of status. */
static tile_status arg_fail(tile_status status, const tile_kernel_info *info, int index, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static tile_status arg_fail(tile_status status, const tile_kernel_info *info, int index, const char *fmt, ...) {
  char reason[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  return tilert_fail(status, "argument %d '%s' of kernel '%s': %s", index, info->params[index].name, info->name,
                     reason);
}

/* ---- the request ------------------------------------------------------- */

/* Reverses the language's dimension order (outermost first) into the
 * encoder's (innermost first) and scales the strides to bytes. */
static bool build_request(const tile_param_info *p, const tile_tensor *t, tmap_request *req) {
  memset(req, 0, sizeof *req);
  if (!tma_data_type(p->dtype, &req->dtype)) return false;
  int rank = p->desc_rank;
  req->rank = (cuuint32_t)rank;
  req->address = t->ptr;
  req->swizzle = tma_swizzle(p->swizzle);
  for (int d = 0; d < rank; d++) {
    int inner_first = rank - 1 - d;
    req->dims[inner_first] = (cuuint64_t)t->shape[d];
    req->box[inner_first] = (cuuint32_t)p->box[d];
    req->element_strides[inner_first] = 1;
  }
  /* strides[0] belongs to the second-innermost dimension, rank - 2. */
  for (int d = 0; d + 1 < rank; d++) req->strides[rank - 2 - d] = (cuuint64_t)t->strides[d] * (cuuint64_t)p->elem_bytes;
  return true;
}

/* Appends " NAME [v0, v1, ...]" to buf. */
static void append_list(char *buf, size_t size, const char *name, const uint64_t *values, int n) {
  size_t used = strlen(buf);
  tilert_format(buf + used, size - used, "%s [", name);
  for (int i = 0; i < n; i++) {
    used = strlen(buf);
    tilert_format(buf + used, size - used, "%s%" PRIu64, i ? ", " : "", values[i]);
  }
  used = strlen(buf);
  tilert_format(buf + used, size - used, "]");
}

static tile_status encode_failed(const tilert_tmap_cache *c, const tile_kernel_info *info, int index,
                                 const tmap_request *req, CUresult r) {
  const char *name = NULL;
  if (c->error_name) c->error_name(r, &name);
  char values[512];
  tilert_format(values, sizeof values, "data type %s, rank %u, address 0x%" PRIx64 ",", data_type_names[req->dtype],
                req->rank, req->address);
  uint64_t box[TILE_DESC_MAX_RANK], element_strides[TILE_DESC_MAX_RANK];
  for (cuuint32_t i = 0; i < req->rank; i++) {
    box[i] = req->box[i];
    element_strides[i] = req->element_strides[i];
  }
  int rank = (int)req->rank;
  append_list(values, sizeof values, " dims", req->dims, rank);
  append_list(values, sizeof values, ", strides", req->strides, rank - 1);
  append_list(values, sizeof values, " bytes, box", box, rank);
  append_list(values, sizeof values, ", element strides", element_strides, rank);
  return arg_fail(TILE_ERROR_INVALID_ARGUMENT, info, index,
                  "cuTensorMapEncodeTiled failed with %s (%d): %s, interleave NONE, swizzle %s, L2 promotion 128B, "
                  "OOB fill NONE (arrays innermost dimension first)",
                  name ? name : "CUDA error", (int)r, values, swizzle_name(req->swizzle));
}

/* ---- the cache --------------------------------------------------------- */

static void make_key(tmap_key *key, int index, const tile_tensor *t) {
  memset(key, 0, sizeof *key);
  key->ptr = t->ptr;
  key->index = index;
  key->rank = t->rank;
  for (int d = 0; d < t->rank; d++) {
    key->shape[d] = t->shape[d];
    key->strides[d] = t->strides[d];
  }
}

/* The entry holding key, or NULL. Under the mutex. */
static tmap_entry *find(tilert_tmap_cache *c, const tmap_key *key) {
  for (int i = 0; i < TILE_TMAP_CACHE_ENTRIES; i++) {
    tmap_entry *e = &c->entries[i];
    if (e->last_use && e->key.ptr == key->ptr && memcmp(&e->key, key, sizeof *key) == 0) return e;
  }
  return NULL;
}

/* An empty entry, or else the least recently used one. Under the mutex. */
static tmap_entry *victim(tilert_tmap_cache *c) {
  tmap_entry *oldest = &c->entries[0];
  for (int i = 1; i < TILE_TMAP_CACHE_ENTRIES && oldest->last_use; i++)
    if (c->entries[i].last_use < oldest->last_use) oldest = &c->entries[i];
  return oldest;
}

/* Copies the cached map for key to map; false if there is none. */
static bool lookup(tilert_tmap_cache *c, const tmap_key *key, void *map) {
  pthread_mutex_lock(&c->mutex);
  tmap_entry *e = find(c, key);
  if (e) {
    e->last_use = ++c->clock;
    memcpy(map, e->map, TILE_DESC_BYTES);
  }
  pthread_mutex_unlock(&c->mutex);
  return e != NULL;
}

static void insert(tilert_tmap_cache *c, const tmap_key *key, const void *map) {
  pthread_mutex_lock(&c->mutex);
  tmap_entry *e = find(c, key); /* another thread may have stored it meanwhile */
  if (!e) {
    e = victim(c);
    e->key = *key;
    memcpy(e->map, map, TILE_DESC_BYTES);
  }
  e->last_use = ++c->clock;
  pthread_mutex_unlock(&c->mutex);
}

tile_status tilert_tmap_get(tilert_tmap_cache *c, const tile_kernel_info *info, int index, const tile_tensor *t,
                            void *map) {
  tmap_key key;
  make_key(&key, index, t);
  if (lookup(c, &key, map)) return TILE_OK;
  const tile_param_info *p = &info->params[index];
  if (!c->encode)
    return arg_fail(TILE_ERROR_UNSUPPORTED, info, index,
                    "this CUDA driver has no cuTensorMapEncodeTiled (CUDA 12.0 or later has it); pass an encoded map "
                    "with tile_arg_desc");
  tmap_request req;
  if (!build_request(p, t, &req))
    return arg_fail(TILE_ERROR_INVALID_ARGUMENT, info, index, "element type %s has no TMA data type", p->elem);
  /* Encoded into a CUtensorMap of its own: the type is 128-byte aligned,
   * the parameter slot only 64-byte aligned. */
  CUtensorMap encoded;
  memset(&encoded, 0, sizeof encoded);
  CUresult r = c->encode(&encoded, req.dtype, req.rank, (void *)(uintptr_t)req.address, req.dims, req.strides,
                         req.box, req.element_strides, TMAP_INTERLEAVE, req.swizzle, TMAP_L2_PROMOTION, TMAP_OOB_FILL);
  if (r != CUDA_SUCCESS) return encode_failed(c, info, index, &req, r);
  insert(c, &key, &encoded);
  memcpy(map, &encoded, TILE_DESC_BYTES);
  return TILE_OK;
}

tile_status tilert_tmap_cache_create(const tilert_allocator *a, tilert_tmap_encode_fn encode,
                                     PFN_cuGetErrorName_v6000 error_name, tilert_tmap_cache **out) {
  *out = NULL;
  tilert_tmap_cache *c = tilert_calloc(a, sizeof *c);
  if (!c) return TILE_ERROR_OUT_OF_MEMORY;
  c->alloc = *a;
  c->encode = encode;
  c->error_name = error_name;
  if (pthread_mutex_init(&c->mutex, NULL) != 0) {
    tilert_free(a, c, sizeof *c);
    return tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "pthread_mutex_init failed");
  }
  *out = c;
  return TILE_OK;
}

void tilert_tmap_cache_destroy(tilert_tmap_cache *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->mutex);
  tilert_allocator a = c->alloc;
  tilert_free(&a, c, sizeof *c);
}

bool tilert_has_desc_params(const tile_kernel_info *info) {
  for (int i = 0; info && i < info->nparams; i++)
    if (info->params[i].kind == TILE_PARAM_DESC) return true;
  return false;
}
