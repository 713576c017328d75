/* module.c - loading modules and finding kernels with their metadata.
 *
 * A module is a cubin (what tilec produces), a fatbin, or PTX text, which
 * the driver compiles on load (about 100 ms for a small module on an H200,
 * so it is only a fallback). Finding a kernel does everything a launch
 * must not repeat: it reads and parses the metadata global
 * __tile_meta_<kernel>, checks it against the code (the number and sizes of
 * the parameters, the threads per block the code allows, shared memory),
 * raises the kernel's dynamic shared memory limit where it needs more than
 * the default 48 KiB, and computes where each argument goes in the packed
 * parameter buffer. The kernel object is then immutable and cached in its
 * module, so launches from any thread read it without a lock; the one
 * mutable part, the cache of encoded tensor maps of a kernel with
 * descriptor parameters (tmap.c), is made here too and has its own lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Size of each of the JIT's error and info log buffers. */
#define JIT_LOG_BYTES 8192

/* An ELF64 header is 64 bytes: a shorter "cubin" is truncated. */
#define ELF_HEADER_BYTES 64

/* Largest module file read by tile_module_load_file (far above any real
 * module; a bigger file is not one). */
#define MAX_MODULE_FILE_BYTES (1024L * 1024L * 1024L)

/* cubins are ELF files: 0x7f 'E' 'L' 'F'. */
static const unsigned char elf_magic[4] = {0x7f, 'E', 'L', 'F'};

/* Fatbins start with the little-endian word 0xBA55ED50. */
static const unsigned char fatbin_magic[4] = {0x50, 0xed, 0x55, 0xba};

typedef enum image_kind { IMAGE_UNKNOWN, IMAGE_CUBIN, IMAGE_FATBIN, IMAGE_PTX } image_kind;

static const char *const image_kind_names[] = {"unknown", "cubin", "fatbin", "PTX"};

/* ---- module images ----------------------------------------------------- */

/* PTX is text with a .version directive; the driver rejects the rest. */
static bool looks_like_ptx(const char *text, size_t size) {
  static const char directive[] = ".version";
  size_t n = sizeof directive - 1;
  for (size_t i = 0; i + n <= size; i++) {
    if (text[i] == '\0') return false;
    if (memcmp(text + i, directive, n) == 0) return true;
  }
  return false;
}

static image_kind classify_image(const void *data, size_t size) {
  if (size >= ELF_HEADER_BYTES && memcmp(data, elf_magic, sizeof elf_magic) == 0) return IMAGE_CUBIN;
  if (size >= sizeof fatbin_magic && memcmp(data, fatbin_magic, sizeof fatbin_magic) == 0) return IMAGE_FATBIN;
  if (looks_like_ptx(data, size)) return IMAGE_PTX;
  return IMAGE_UNKNOWN;
}

/* The driver wants PTX NUL-terminated and binary images aligned as malloc
 * aligns; a copy fixes either. Returns NULL (and *copy_size 0) if data can
 * be used as it is. */
static tile_status copy_if_needed(const tile_runtime *rt, const void *data, size_t size, image_kind kind, char **copy,
                                  size_t *copy_size) {
  *copy = NULL;
  *copy_size = 0;
  bool terminated = size > 0 && ((const char *)data)[size - 1] == '\0';
  bool aligned = (uintptr_t)data % _Alignof(max_align_t) == 0;
  if (kind == IMAGE_PTX ? terminated : aligned) return TILE_OK;
  *copy_size = size + 1;
  *copy = tilert_alloc(&rt->alloc, *copy_size);
  if (!*copy) return TILE_ERROR_OUT_OF_MEMORY;
  memcpy(*copy, data, size);
  (*copy)[size] = '\0';
  return TILE_OK;
}

typedef struct jit_logs {
  char error[JIT_LOG_BYTES];
  char info[JIT_LOG_BYTES];
} jit_logs;

static CUresult load_with_logs(const tile_runtime *rt, CUmodule *mod, const void *image, jit_logs *logs) {
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {logs->error, (void *)(uintptr_t)JIT_LOG_BYTES, logs->info, (void *)(uintptr_t)JIT_LOG_BYTES};
  CUresult r = rt->drv.module_load_data_ex(mod, image, (unsigned)(sizeof options / sizeof options[0]), options, values);
  logs->error[JIT_LOG_BYTES - 1] = '\0';
  logs->info[JIT_LOG_BYTES - 1] = '\0';
  return r;
}

/* A hint for the load errors that mean "built for another GPU". */
static const char *architecture_hint(CUresult r) {
  switch (r) {
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
  case CUDA_ERROR_INVALID_PTX:
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
  case CUDA_ERROR_INVALID_IMAGE: return " (was the module compiled for this GPU and a toolkit this driver supports?)";
  default: return "";
  }
}

static tile_status load_failed(const tile_runtime *rt, CUresult r, image_kind kind, size_t size, const jit_logs *logs) {
  tile_status st = tilert_cu_fail(rt, r, TILE_ERROR_LOAD, "the driver could not load a %s of %zu bytes on %s (sm_%d%d)",
                                  image_kind_names[kind], size, rt->props.name, rt->props.cc_major, rt->props.cc_minor);
  size_t cap;
  char *msg = tilert_error_buffer(&cap);
  size_t used = strlen(msg);
  tilert_format(msg + used, cap - used, "%s%s%s", architecture_hint(r), logs->error[0] ? "; JIT log:\n" : "",
                logs->error);
  if (logs->error[0]) tilert_log(rt, TILE_LOG_ERROR, "JIT log: %s", logs->error);
  return st;
}

static tile_status new_module(tile_runtime *rt, CUmodule mod, tile_module **out) {
  tile_module *m = tilert_calloc(&rt->alloc, sizeof *m);
  if (!m) {
    rt->drv.module_unload(mod);
    return TILE_ERROR_OUT_OF_MEMORY;
  }
  m->rt = rt;
  m->module = mod;
  tilert_lock(rt);
  rt->live.modules++;
  tilert_unlock(rt);
  *out = m;
  return TILE_OK;
}

static tile_status load_image(tile_runtime *rt, const void *image, image_kind kind, size_t size, tile_module **out) {
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  jit_logs *logs = tilert_calloc(&rt->alloc, sizeof *logs);
  if (!logs) return TILE_ERROR_OUT_OF_MEMORY;
  CUmodule mod = NULL;
  CUresult r = load_with_logs(rt, &mod, image, logs);
  if (r != CUDA_SUCCESS)
    st = load_failed(rt, r, kind, size, logs);
  else if (logs->info[0])
    tilert_log(rt, TILE_LOG_DEBUG, "JIT info log: %s", logs->info);
  tilert_free(&rt->alloc, logs, sizeof *logs);
  if (st != TILE_OK) return st;
  return new_module(rt, mod, out);
}

tile_status tile_module_load(tile_runtime *rt, const void *data, size_t size, tile_module **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_module_load: out is NULL");
  *out = NULL;
  if (!rt || !data || size == 0)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_module_load: %s", !rt ? "runtime is NULL" : "no data");
  image_kind kind = classify_image(data, size);
  if (kind == IMAGE_UNKNOWN)
    return tilert_rt_fail(rt, TILE_ERROR_LOAD,
                          "tile_module_load: %zu bytes that are neither a cubin (no ELF magic), a fatbin, nor PTX "
                          "text (no .version directive)",
                          size);
  if (kind == IMAGE_PTX)
    tilert_log(rt, TILE_LOG_WARN,
               "loading a module from PTX: the driver JIT-compiles it, which is slow (~100 ms); load a cubin instead");
  char *copy;
  size_t copy_size;
  tile_status st = copy_if_needed(rt, data, size, kind, &copy, &copy_size);
  if (st != TILE_OK) return st;
  st = load_image(rt, copy ? copy : data, kind, size, out);
  tilert_free(&rt->alloc, copy, copy_size);
  return st;
}

/* ---- files ------------------------------------------------------------- */

static tile_status file_size(const tile_runtime *rt, FILE *f, const char *path, size_t *size) {
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0)
    return tilert_rt_fail(rt, TILE_ERROR_IO, "cannot read module file %s: %s", path, strerror(errno));
  if (n == 0 || n > MAX_MODULE_FILE_BYTES)
    return tilert_rt_fail(rt, TILE_ERROR_IO, "module file %s has %ld bytes (expected 1 to %ld)", path, n,
                          MAX_MODULE_FILE_BYTES);
  *size = (size_t)n;
  return TILE_OK;
}

static tile_status read_file(const tile_runtime *rt, const char *path, char **data, size_t *size) {
  *data = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return tilert_rt_fail(rt, TILE_ERROR_IO, "cannot open module file %s: %s", path, strerror(errno));
  tile_status st = file_size(rt, f, path, size);
  *data = st == TILE_OK ? tilert_alloc(&rt->alloc, *size) : NULL;
  if (st == TILE_OK && !*data) st = TILE_ERROR_OUT_OF_MEMORY;
  if (st == TILE_OK && fread(*data, 1, *size, f) != *size)
    st = tilert_rt_fail(rt, TILE_ERROR_IO, "cannot read module file %s: %s", path,
                        ferror(f) ? strerror(errno) : "file shorter than its size");
  fclose(f);
  if (st != TILE_OK) {
    tilert_free(&rt->alloc, *data, *size);
    *data = NULL;
  }
  return st;
}

tile_status tile_module_load_file(tile_runtime *rt, const char *path, tile_module **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_module_load_file: out is NULL");
  *out = NULL;
  if (!rt || !path) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_module_load_file: NULL argument");
  char *data = NULL;
  size_t size = 0;
  tile_status st = read_file(rt, path, &data, &size);
  if (st != TILE_OK) return st;
  st = tile_module_load(rt, data, size, out);
  tilert_free(&rt->alloc, data, size);
  if (st != TILE_OK) tilert_error_prefix("%s", path);
  return st;
}

/* ---- unloading --------------------------------------------------------- */

static void free_kernel(const tile_runtime *rt, tile_kernel *k) {
  tilert_tmap_cache_destroy(k->tmaps);
  tile_meta_free(k->info);
  tilert_free(&rt->alloc, k, k->size);
}

tile_status tile_module_unload(tile_module *m) {
  if (!m) return TILE_OK;
  tile_runtime *rt = m->rt;
  tilert_lock(rt);
  tile_kernel *k = m->kernels;
  m->kernels = NULL;
  rt->live.modules--;
  tilert_unlock(rt);
  while (k) {
    tile_kernel *next = k->next;
    free_kernel(rt, k);
    k = next;
  }
  tile_status st = tilert_bind(rt);
  if (st == TILE_OK) {
    CUresult r = rt->drv.module_unload(m->module);
    if (r != CUDA_SUCCESS) st = tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuModuleUnload failed");
  }
  tilert_free(&rt->alloc, m, sizeof *m);
  return st;
}

/* ---- metadata ---------------------------------------------------------- */

/* Reads and parses __tile_meta_<name>; *info stays NULL if there is none. */
static tile_status read_metadata(const tile_module *m, const char *name, tile_kernel_info **info) {
  const tile_runtime *rt = m->rt;
  char symbol[TILE_MAX_NAME + sizeof TILE_META_SYMBOL_PREFIX];
  tilert_format(symbol, sizeof symbol, "%s%s", TILE_META_SYMBOL_PREFIX, name);
  CUdeviceptr dptr = 0;
  size_t bytes = 0;
  CUresult r = rt->drv.module_get_global(&dptr, &bytes, m->module, symbol);
  if (r == CUDA_ERROR_NOT_FOUND) {
    tilert_log(rt, TILE_LOG_INFO, "kernel '%s' has no metadata (%s): only tile_launch_unchecked can launch it", name,
               symbol);
    return TILE_OK;
  }
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_LOAD, "cuModuleGetGlobal(%s) failed", symbol);
  if (bytes == 0 || bytes > TILE_META_MAX_TEXT)
    return tilert_rt_fail(rt, TILE_ERROR_BAD_METADATA, "kernel '%s': metadata %s has %zu bytes (expected 1 to %d)",
                          name, symbol, bytes, TILE_META_MAX_TEXT);
  char *text = tilert_alloc(&rt->alloc, bytes + 1);
  if (!text) return TILE_ERROR_OUT_OF_MEMORY;
  tile_status st = TILE_OK;
  r = rt->drv.memcpy_dtoh(text, dptr, bytes);
  if (r != CUDA_SUCCESS) st = tilert_cu_fail(rt, r, TILE_ERROR_LOAD, "reading metadata %s failed", symbol);
  text[bytes] = '\0';
  if (st == TILE_OK && (st = tilert_meta_parse(&rt->alloc, text, info)) != TILE_OK) {
    tilert_error_prefix("kernel '%s': bad metadata in %s", name, symbol);
    tilert_log_last_error(rt);
  }
  tilert_free(&rt->alloc, text, bytes + 1);
  return st;
}

static int function_attribute(const tile_runtime *rt, CUfunction f, CUfunction_attribute attr) {
  int value = 0;
  if (rt->drv.func_get_attribute(&value, attr, f) != CUDA_SUCCESS) return -1;
  return value;
}

/* Threads and shared memory: what the code allows against the metadata. */
static tile_status prepare_function(const tile_runtime *rt, CUfunction f, const tile_kernel_info *info) {
  int max_threads = function_attribute(rt, f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (max_threads >= 0 && info->threads > max_threads)
    return tilert_rt_fail(rt, TILE_ERROR_UNSUPPORTED,
                          "kernel '%s' runs %d warps (%d threads) but its code allows at most %d threads per block "
                          "(%d registers per thread); use fewer warps",
                          info->name, info->warps, info->threads, max_threads,
                          function_attribute(rt, f, CU_FUNC_ATTRIBUTE_NUM_REGS));
  int static_shared = function_attribute(rt, f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  if (static_shared < 0) static_shared = 0;
  size_t total = (size_t)static_shared + info->shared_bytes;
  if (total > rt->props.max_shared_per_block_optin)
    return tilert_rt_fail(rt, TILE_ERROR_UNSUPPORTED,
                          "kernel '%s' needs %u bytes of dynamic shared memory (and %d static), but %s allows at "
                          "most %zu per block",
                          info->name, info->shared_bytes, static_shared, rt->props.name,
                          rt->props.max_shared_per_block_optin);
  int limit = function_attribute(rt, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  if (limit >= 0 && info->shared_bytes <= (unsigned)limit) return TILE_OK;
  CUresult r = rt->drv.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)info->shared_bytes);
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(rt, r, TILE_ERROR_UNSUPPORTED,
                          "kernel '%s': raising its dynamic shared memory to %u bytes failed", info->name,
                          info->shared_bytes);
  return TILE_OK;
}

/* Compares the parameters of the metadata with those of the code, where
 * the driver can tell (cuFuncGetParamInfo, CUDA 12.4 and later). */
static tile_status check_param_sizes(const tile_runtime *rt, CUfunction f, const tile_kernel_info *info) {
  if (!rt->drv.func_get_param_info) return TILE_OK;
  size_t offset, size;
  for (int i = 0; i < info->nparams; i++) {
    const tile_param_info *p = &info->params[i];
    CUresult r = rt->drv.func_get_param_info(f, (size_t)i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE)
      return tilert_rt_fail(rt, TILE_ERROR_BAD_METADATA,
                            "kernel '%s': the metadata lists %d parameters but the code has %d", info->name,
                            info->nparams, i);
    if (r != CUDA_SUCCESS) return TILE_OK; /* the driver cannot tell: nothing to compare */
    if (size != (size_t)tilert_param_size(p))
      return tilert_rt_fail(rt, TILE_ERROR_BAD_METADATA,
                            "kernel '%s': parameter %d '%s' is %d bytes in the metadata (%s) but %zu in the code",
                            info->name, i, p->name, tilert_param_size(p), p->elem, size);
  }
  if (rt->drv.func_get_param_info(f, (size_t)info->nparams, &offset, &size) == CUDA_SUCCESS)
    return tilert_rt_fail(rt, TILE_ERROR_BAD_METADATA,
                          "kernel '%s': the code has more parameters than the %d of its metadata", info->name,
                          info->nparams);
  return TILE_OK;
}

/* ---- kernels ----------------------------------------------------------- */

/* Where each argument goes in the packed buffer, and the cache of tensor
 * maps if the kernel has descriptor parameters. */
static tile_status prepare_launches(tile_runtime *rt, tile_kernel *k) {
  tile_status st = tilert_layout_params(k->info, k->slots);
  if (st == TILE_OK && tilert_has_desc_params(k->info))
    st = tilert_tmap_cache_create(&rt->alloc, rt->drv.tensor_map_encode_tiled, rt->drv.get_error_name, &k->tmaps);
  if (st != TILE_OK) tilert_log_last_error(rt);
  return st;
}

static tile_status new_kernel(tile_module *m, CUfunction f, const char *name, tile_kernel_info *info,
                              tile_kernel **out) {
  tile_runtime *rt = m->rt;
  int nparams = info ? info->nparams : 0;
  size_t name_off = sizeof(tile_kernel) + (size_t)nparams * sizeof(tilert_param_slot);
  size_t size = name_off + strlen(name) + 1;
  tile_kernel *k = tilert_calloc(&rt->alloc, size);
  if (!k) return TILE_ERROR_OUT_OF_MEMORY;
  *k = (tile_kernel){.rt = rt, .module = m, .func = f, .info = info, .size = size};
  k->block_x = info ? (unsigned)info->threads : 0;
  k->shared_bytes = info ? info->shared_bytes : 0;
  k->name = memcpy((char *)k + name_off, name, strlen(name) + 1);
  tile_status st = info ? prepare_launches(rt, k) : TILE_OK;
  if (st != TILE_OK) {
    tilert_tmap_cache_destroy(k->tmaps);
    tilert_free(&rt->alloc, k, size);
    return st;
  }
  *out = k;
  return TILE_OK;
}

static tile_kernel *find_cached(const tile_module *m, const char *name) {
  for (tile_kernel *k = m->kernels; k; k = k->next)
    if (strcmp(k->name, name) == 0) return k;
  return NULL;
}

/* Adds k to the module unless another thread added the same kernel first;
 * returns the kernel to use. */
static tile_kernel *publish(tile_module *m, tile_kernel *k) {
  tile_runtime *rt = m->rt;
  tilert_lock(rt);
  tile_kernel *existing = find_cached(m, k->name);
  if (!existing) {
    k->next = m->kernels;
    m->kernels = k;
  }
  tilert_unlock(rt);
  if (!existing) return k;
  free_kernel(rt, k);
  return existing;
}

static tile_status check_info(const tile_runtime *rt, CUfunction f, const char *name, const tile_kernel_info *info) {
  if (strcmp(info->name, name) != 0)
    return tilert_rt_fail(rt, TILE_ERROR_BAD_METADATA, "kernel '%s': its metadata names kernel '%s'", name, info->name);
  tile_status st = prepare_function(rt, f, info);
  if (st == TILE_OK) st = check_param_sizes(rt, f, info);
  return st;
}

static tile_status lookup(tile_module *m, const char *name, tile_kernel **out) {
  const tile_runtime *rt = m->rt;
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  CUfunction f = NULL;
  CUresult r = rt->drv.module_get_function(&f, m->module, name);
  if (r == CUDA_ERROR_NOT_FOUND) return tilert_rt_fail(rt, TILE_ERROR_NOT_FOUND, "no kernel '%s' in the module", name);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_LOAD, "cuModuleGetFunction(%s) failed", name);
  tile_kernel_info *info = NULL;
  st = read_metadata(m, name, &info);
  if (st == TILE_OK && info) st = check_info(rt, f, name, info);
  if (st == TILE_OK) st = new_kernel(m, f, name, info, out);
  if (st != TILE_OK) tile_meta_free(info);
  return st;
}

tile_status tile_kernel_get(tile_module *m, const char *name, tile_kernel **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_kernel_get: out is NULL");
  *out = NULL;
  if (!m || !name) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_kernel_get: NULL argument");
  size_t len = strlen(name);
  if (len == 0 || len >= TILE_MAX_NAME)
    return tilert_rt_fail(m->rt, TILE_ERROR_INVALID_ARGUMENT, "tile_kernel_get: kernel name of %zu characters", len);
  tilert_lock(m->rt);
  tile_kernel *k = find_cached(m, name);
  tilert_unlock(m->rt);
  if (!k) {
    tile_status st = lookup(m, name, &k);
    if (st != TILE_OK) return st;
    k = publish(m, k);
  }
  *out = k;
  return TILE_OK;
}

const tile_kernel_info *tile_kernel_get_info(const tile_kernel *k) { return k ? k->info : NULL; }

int tilert_kernel_const_int(const tile_kernel *k, const char *name) {
  const tile_kernel_info *info = tile_kernel_get_info(k);
  for (int i = 0; info && i < info->nconsts; i++)
    if (!strcmp(info->consts[i].name, name)) return atoi(info->consts[i].value);
  return 0;
}

const char *tile_kernel_name(const tile_kernel *k) { return k ? k->name : NULL; }
