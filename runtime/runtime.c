/* runtime.c - creating and destroying a tile_runtime: the driver, the
 * device, its primary context and the device limits launches are checked
 * against.
 *
 * The runtime uses the device's primary context (the one the CUDA runtime
 * API and libraries such as cuBLAS use too) rather than a context of its
 * own, so libtile and those libraries share memory and streams. Because
 * any thread may call into the runtime, each call makes that context
 * current on the calling thread first (tilert_bind).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- host memory ------------------------------------------------------- */

static void *default_alloc(void *user, size_t size) {
  (void)user;
  return malloc(size);
}

static void default_free(void *user, void *ptr, size_t size) {
  (void)user;
  (void)size;
  free(ptr);
}

const tilert_allocator tilert_default_allocator = {default_alloc, default_free, NULL};

void *tilert_alloc(const tilert_allocator *a, size_t size) {
  void *p = a->alloc(a->user, size);
  if (!p) tilert_fail(TILE_ERROR_OUT_OF_MEMORY, "out of host memory (%zu bytes)", size);
  return p;
}

void *tilert_calloc(const tilert_allocator *a, size_t size) {
  void *p = tilert_alloc(a, size);
  if (p) memset(p, 0, size);
  return p;
}

void tilert_free(const tilert_allocator *a, void *ptr, size_t size) {
  if (ptr) a->free(a->user, ptr, size);
}

/* ---- configuration ----------------------------------------------------- */

void tile_config_init(tile_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->log_level = TILE_LOG_INFO;
}

static tile_status check_config(const tile_config *cfg) {
  if (!cfg->alloc != !cfg->free)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_config: set both alloc and free, or neither");
  if (cfg->device < 0)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_config: device ordinal %d is negative", cfg->device);
  return TILE_OK;
}

/* ---- context ----------------------------------------------------------- */

tile_status tilert_bind(const tile_runtime *rt) {
  CUcontext current = NULL;
  /* Reading the current context is cheap; setting it only when it differs
   * keeps the launch path short. */
  if (rt->drv.ctx_get_current(&current) == CUDA_SUCCESS && current == rt->ctx) return TILE_OK;
  CUresult r = rt->drv.ctx_set_current(rt->ctx);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuCtxSetCurrent failed");
  return TILE_OK;
}

tile_status tile_runtime_bind(tile_runtime *rt) {
  return rt ? tilert_bind(rt) : tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_runtime_bind: rt is NULL");
}

void tilert_lock(tile_runtime *rt) { pthread_mutex_lock(&rt->mutex); }
void tilert_unlock(tile_runtime *rt) { pthread_mutex_unlock(&rt->mutex); }

/* ---- device ------------------------------------------------------------ */

static tile_status init_driver(tile_runtime *rt) {
  CUresult r = rt->drv.init(0);
  if (r == CUDA_ERROR_NO_DEVICE) return tilert_cu_fail(rt, r, TILE_ERROR_NO_DEVICE, "no CUDA device: cuInit failed");
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(rt, r, TILE_ERROR_NO_DRIVER, "the CUDA driver failed to initialize: cuInit failed");
  return TILE_OK;
}

static tile_status open_device(tile_runtime *rt, int ordinal) {
  int count = 0;
  CUresult r = rt->drv.device_get_count(&count);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_NO_DEVICE, "cuDeviceGetCount failed");
  if (ordinal >= count)
    return tilert_rt_fail(rt, TILE_ERROR_NO_DEVICE, "no CUDA device %d: there %s %d device%s", ordinal,
                          count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
  r = rt->drv.device_get(&rt->device, ordinal);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_NO_DEVICE, "cuDeviceGet(%d) failed", ordinal);
  r = rt->drv.primary_ctx_retain(&rt->ctx, rt->device);
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuDevicePrimaryCtxRetain failed for device %d", ordinal);
  return TILE_OK;
}

static int device_attribute(const tile_runtime *rt, CUdevice_attribute attr) {
  int value = 0;
  if (rt->drv.device_get_attribute(&value, attr, rt->device) != CUDA_SUCCESS) return 0;
  return value;
}

static void read_properties(tile_runtime *rt, int ordinal) {
  tile_device_properties *p = &rt->props;
  p->ordinal = ordinal;
  if (rt->drv.device_get_name(p->name, (int)sizeof p->name, rt->device) != CUDA_SUCCESS)
    tilert_format(p->name, sizeof p->name, "CUDA device %d", ordinal);
  p->cc_major = device_attribute(rt, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  p->cc_minor = device_attribute(rt, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  p->sm_count = device_attribute(rt, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p->max_threads_per_block = device_attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p->max_grid[0] = (uint32_t)device_attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  p->max_grid[1] = (uint32_t)device_attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  p->max_grid[2] = (uint32_t)device_attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  /* A limit the driver would not report must not reject every launch. */
  static const uint32_t cuda_grid_limits[3] = {TILE_GRID_MAX_X, TILE_GRID_MAX_YZ, TILE_GRID_MAX_YZ};
  for (int d = 0; d < 3; d++)
    if (p->max_grid[d] == 0) p->max_grid[d] = cuda_grid_limits[d];
  p->max_shared_per_block = (size_t)device_attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  p->max_shared_per_block_optin = (size_t)device_attribute(rt, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  p->l2_bytes = (size_t)device_attribute(rt, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  if (rt->drv.device_total_mem(&p->total_memory, rt->device) != CUDA_SUCCESS) p->total_memory = 0;
  if (rt->drv.driver_get_version(&p->driver_version) != CUDA_SUCCESS) p->driver_version = 0;
}

/* ---- create and destroy ------------------------------------------------ */

static void copy_config(tile_runtime *rt, const tile_config *cfg) {
  rt->alloc = cfg->alloc ? (tilert_allocator){cfg->alloc, cfg->free, cfg->alloc_user} : tilert_default_allocator;
  rt->log = cfg->log;
  rt->log_user = cfg->log_user;
  rt->log_level = cfg->log_level;
}

/* Frees rt after a failed creation; keeps the creation's error message. */
static void abandon(tile_runtime *rt) {
  if (rt->ctx) rt->drv.primary_ctx_release(rt->device);
  tilert_driver_close(&rt->drv);
  tilert_allocator a = rt->alloc;
  tilert_free(&a, rt, sizeof *rt);
}

static tile_status start(tile_runtime *rt, const tile_config *cfg) {
  tile_status st = tilert_driver_open(&rt->drv, cfg->driver_library);
  if (st != TILE_OK) {
    tilert_log_last_error(rt);
    return st;
  }
  if ((st = init_driver(rt)) != TILE_OK) return st;
  if ((st = open_device(rt, cfg->device)) != TILE_OK) return st;
  if ((st = tilert_bind(rt)) != TILE_OK) return st;
  read_properties(rt, cfg->device);
  if (pthread_mutex_init(&rt->mutex, NULL) != 0)
    return tilert_rt_fail(rt, TILE_ERROR_OUT_OF_MEMORY, "pthread_mutex_init failed");
  return TILE_OK;
}

tile_status tile_runtime_create(const tile_config *cfg, tile_runtime **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_runtime_create: out is NULL");
  *out = NULL;
  tile_config defaults;
  tile_config_init(&defaults);
  if (!cfg) cfg = &defaults;
  tile_status st = check_config(cfg);
  if (st != TILE_OK) return st;
  const tilert_allocator a =
      cfg->alloc ? (tilert_allocator){cfg->alloc, cfg->free, cfg->alloc_user} : tilert_default_allocator;
  tile_runtime *rt = tilert_calloc(&a, sizeof *rt);
  if (!rt) return TILE_ERROR_OUT_OF_MEMORY;
  copy_config(rt, cfg);
  if ((st = start(rt, cfg)) != TILE_OK) {
    abandon(rt);
    return st;
  }
  tilert_log(rt, TILE_LOG_INFO, "libtile: device %d: %s (sm_%d%d, %d SMs), driver %d.%d", cfg->device, rt->props.name,
             rt->props.cc_major, rt->props.cc_minor, rt->props.sm_count, rt->props.driver_version / 1000,
             rt->props.driver_version % 1000 / 10);
  *out = rt;
  return TILE_OK;
}

static void warn_leaks(const tile_runtime *rt) {
  const tilert_live_counts *c = &rt->live;
  if (c->modules || c->streams || c->events || c->graphs)
    tilert_log(rt, TILE_LOG_WARN,
               "tile_runtime_destroy: still alive: %ld modules, %ld streams, %ld events, %ld graphs "
               "(destroy them first)",
               c->modules, c->streams, c->events, c->graphs);
}

tile_status tile_runtime_destroy(tile_runtime *rt) {
  if (!rt) return TILE_OK;
  warn_leaks(rt);
  tile_status st = TILE_OK;
  CUresult r = rt->drv.primary_ctx_release(rt->device);
  if (r != CUDA_SUCCESS) st = tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuDevicePrimaryCtxRelease failed");
  pthread_mutex_destroy(&rt->mutex);
  tilert_driver_close(&rt->drv);
  tilert_allocator a = rt->alloc;
  tilert_free(&a, rt, sizeof *rt);
  return st;
}

tile_status tile_synchronize(tile_runtime *rt) {
  if (!rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_synchronize: runtime is NULL");
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  CUresult r = rt->drv.ctx_synchronize();
  if (r != CUDA_SUCCESS) return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "cuCtxSynchronize failed");
  return TILE_OK;
}

tile_status tile_device_info(const tile_runtime *rt, tile_device_properties *out) {
  if (!rt || !out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_device_info: NULL argument");
  *out = rt->props;
  return TILE_OK;
}
