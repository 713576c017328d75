/* launch.c - launching kernels: checked (tile_launch) and unchecked.
 *
 * This is the hot path: a benchmark or an inference loop launches
 * thousands of small kernels per second, and the driver's own
 * cuLaunchKernel costs about 4.5 us of host time on an H200. A checked
 * launch adds one pass over the arguments to check them (args.c), one to
 * pack them into a stack buffer at offsets computed when the kernel was
 * looked up, and a read of the current context. No allocation, no lock;
 * a tile_arg_tensor argument adds a look-up in the kernel's cache of
 * encoded tensor maps, under its lock, and an encode on a miss (tmap.c).
 * The context is made current before packing because the encoder is a
 * driver call.
 */
#include "internal.h"

static tile_status launch_failed(const tile_kernel *k, CUresult r, const uint32_t grid[3], const unsigned block[3],
                                 unsigned shared) {
  return tilert_cu_fail(k->rt, r, TILE_ERROR_LAUNCH,
                        "cuLaunchKernel failed for kernel '%s' (grid %ux%ux%u, block %ux%ux%u, %u bytes of dynamic "
                        "shared memory)",
                        k->name, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared);
}

tile_status tile_launch(const tile_kernel *k, const uint32_t grid[3], tile_stream *stream, const tile_arg *args,
                        int nargs) {
  if (!k) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_launch: kernel is NULL");
  const tile_runtime *rt = k->rt;
  if (!k->info)
    return tilert_rt_fail(rt, TILE_ERROR_INVALID_ARGUMENT,
                          "kernel '%s' has no metadata (no %s%s in its module): launch it with tile_launch_unchecked",
                          k->name, TILE_META_SYMBOL_PREFIX, k->name);
  size_t cap;
  char *msg = tilert_error_buffer(&cap);
  tile_status st = tilert_check_args(k->info, grid, rt->props.max_grid, args, nargs, msg, cap);
  if (st != TILE_OK) {
    tilert_log_last_error(rt);
    return st;
  }
  CUstream cs = NULL;
  if ((st = tilert_stream_of(rt, stream, &cs)) != TILE_OK) return st;
  if ((st = tilert_bind(rt)) != TILE_OK) return st;
  _Alignas(TILE_DESC_ALIGN) unsigned char buf[TILE_MAX_PARAM_BYTES];
  void *params[TILE_MAX_PARAMS];
  if ((st = tilert_pack_args(k->info, k->slots, k->tmaps, args, buf, params)) != TILE_OK) {
    tilert_log_last_error(rt);
    return st;
  }
  CUresult r =
      rt->drv.launch_kernel(k->func, grid[0], grid[1], grid[2], k->block_x, 1, 1, k->shared_bytes, cs, params, NULL);
  if (r != CUDA_SUCCESS) return launch_failed(k, r, grid, (const unsigned[3]){k->block_x, 1, 1}, k->shared_bytes);
  return TILE_OK;
}

tile_status tile_launch_unchecked(const tile_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                                  unsigned shared_bytes, tile_stream *stream, void **params) {
  if (!k || !grid || !block)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_launch_unchecked: %s is NULL",
                       !k      ? "kernel"
                       : !grid ? "grid"
                               : "block");
  const tile_runtime *rt = k->rt;
  CUstream cs = NULL;
  tile_status st = tilert_stream_of(rt, stream, &cs);
  if (st == TILE_OK) st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  /* Without metadata the limit was not raised at lookup; the attribute is
   * per function and setting it again is harmless. */
  if (shared_bytes > TILE_DEFAULT_SHARED_LIMIT) {
    CUresult r =
        rt->drv.func_set_attribute(k->func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared_bytes);
    if (r != CUDA_SUCCESS)
      return tilert_cu_fail(rt, r, TILE_ERROR_UNSUPPORTED,
                            "kernel '%s': raising its dynamic shared memory to %u bytes failed", k->name, shared_bytes);
  }
  CUresult r = rt->drv.launch_kernel(k->func, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes, cs,
                                     params, NULL);
  if (r != CUDA_SUCCESS) return launch_failed(k, r, grid, block, shared_bytes);
  return TILE_OK;
}

/* How many programs can run at once: blocks per SM times SMs, or for a
 * kernel launched in clusters, the clusters that fit at once (clusters
 * must sit in one GPC each, so not every SM may get one) times their size. */
tile_status tile_kernel_resident_programs(const tile_kernel *k, uint32_t *programs) {
  if (!k || !programs)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_kernel_resident_programs: %s is NULL", !k ? "kernel" : "programs");
  *programs = 0;
  const tile_runtime *rt = k->rt;
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  int cluster = k->info ? k->info->cluster : 1;
  if (cluster > 1) {
    if (!rt->drv.occupancy_max_clusters)
      return tilert_rt_fail(rt, TILE_ERROR_UNSUPPORTED, "kernel '%s': the driver has no cuOccupancyMaxActiveClusters",
                            k->name);
    CUlaunchConfig cfg = {0};
    cfg.gridDimX = (unsigned)cluster * (unsigned)rt->props.sm_count;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = k->block_x;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = k->shared_bytes;
    int n = 0;
    CUresult r = rt->drv.occupancy_max_clusters(&n, k->func, &cfg);
    if (r != CUDA_SUCCESS)
      return tilert_cu_fail(rt, r, TILE_ERROR_LAUNCH, "kernel '%s': cuOccupancyMaxActiveClusters failed", k->name);
    *programs = (uint32_t)n * (uint32_t)cluster;
  } else {
    int n = 0;
    CUresult r = rt->drv.occupancy_max_blocks(&n, k->func, (int)k->block_x, k->shared_bytes);
    if (r != CUDA_SUCCESS)
      return tilert_cu_fail(rt, r, TILE_ERROR_LAUNCH, "kernel '%s': cuOccupancyMaxActiveBlocksPerMultiprocessor failed",
                            k->name);
    *programs = (uint32_t)n * (uint32_t)rt->props.sm_count;
  }
  if (!*programs)
    return tilert_rt_fail(rt, TILE_ERROR_UNSUPPORTED, "kernel '%s' does not fit on the device (no program can run)",
                          k->name);
  return TILE_OK;
}
