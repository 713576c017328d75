/* devices.c - several GPUs in one process: counting the devices, peer
 * access between the devices of two runtimes, copies between them, and a
 * stream waiting for an event recorded on another stream (of the same
 * device or of another).
 *
 * A program driving N GPUs creates one tile_runtime per device (each with
 * the device's primary context) and calls each through its own handles;
 * every call makes its runtime's context current first, so one thread can
 * issue work to all the devices in turn. */
#include <string.h>

#include "internal.h"

tile_status tile_device_count(const tile_config *cfg, int *count) {
  if (!count) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_device_count: count is NULL");
  *count = 0;
  /* A runtime on the stack for the error messages (names of CUDA errors):
   * nothing in it is allocated. */
  tile_runtime probe;
  memset(&probe, 0, sizeof probe);
  tile_status st = tilert_driver_open(&probe.drv, cfg ? cfg->driver_library : NULL);
  if (st != TILE_OK) return st;
  CUresult r = probe.drv.init(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    tilert_driver_close(&probe.drv);
    return TILE_OK; /* a driver without devices: none */
  }
  if (r == CUDA_SUCCESS) r = probe.drv.device_get_count(count);
  if (r != CUDA_SUCCESS) {
    st = tilert_cu_fail(&probe, r, TILE_ERROR_NO_DRIVER, "tile_device_count: the CUDA driver failed to initialize");
    *count = 0;
  }
  tilert_driver_close(&probe.drv);
  return st;
}

tile_status tile_peer_access_enable(tile_runtime *rt, tile_runtime *peer, bool *enabled) {
  if (!rt || !peer || !enabled)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_peer_access_enable: NULL argument");
  *enabled = false;
  if (rt->device == peer->device) { /* a device reaches its own memory */
    *enabled = true;
    return TILE_OK;
  }
  int can = 0;
  CUresult r = rt->drv.device_can_access_peer(&can, rt->device, peer->device);
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(rt, r, TILE_ERROR_CUDA, "tile_peer_access_enable: cuDeviceCanAccessPeer failed");
  if (!can) {
    tilert_log(rt, TILE_LOG_INFO, "libtile: device %d cannot reach device %d's memory (no peer access)",
               rt->props.ordinal, peer->props.ordinal);
    return TILE_OK;
  }
  tile_status st = tilert_bind(rt);
  if (st != TILE_OK) return st;
  r = rt->drv.ctx_enable_peer_access(peer->ctx, 0);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
    return tilert_cu_fail(rt, r, TILE_ERROR_CUDA,
                          "tile_peer_access_enable: cuCtxEnablePeerAccess(device %d -> %d) failed", rt->props.ordinal,
                          peer->props.ordinal);
  *enabled = true;
  return TILE_OK;
}

tile_status tile_memcpy_peer(tile_runtime *dst_rt, uint64_t dst, tile_runtime *src_rt, uint64_t src, size_t bytes,
                             tile_stream *stream) {
  if (!dst_rt || !src_rt) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_memcpy_peer: runtime is NULL");
  if (bytes == 0) return TILE_OK;
  if (!dst || !src) return tilert_rt_fail(dst_rt, TILE_ERROR_INVALID_ARGUMENT, "tile_memcpy_peer: NULL pointer");
  /* the copy is issued on a stream of either device (NULL: the
   * destination's default stream) */
  tile_runtime *issuer = stream ? stream->rt : dst_rt;
  if (issuer != dst_rt && issuer != src_rt)
    return tilert_rt_fail(dst_rt, TILE_ERROR_INVALID_ARGUMENT,
                          "tile_memcpy_peer: the stream belongs to neither the source's nor the destination's runtime");
  tile_status st = tilert_bind(issuer);
  if (st != TILE_OK) return st;
  CUresult r = issuer->drv.memcpy_peer_async((CUdeviceptr)dst, dst_rt->ctx, (CUdeviceptr)src, src_rt->ctx, bytes,
                                             stream ? stream->stream : NULL);
  if (r != CUDA_SUCCESS)
    return tilert_cu_fail(issuer, r, TILE_ERROR_CUDA, "cuMemcpyPeerAsync of %zu bytes (device %d -> %d) failed", bytes,
                          src_rt->props.ordinal, dst_rt->props.ordinal);
  return TILE_OK;
}

tile_status tile_stream_wait_event(tile_stream *s, const tile_event *e) {
  if (!s || !e)
    return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_stream_wait_event: %s is NULL",
                       !s ? "the stream" : "the event");
  tile_status st = tilert_bind(s->rt);
  if (st != TILE_OK) return st;
  CUresult r = s->rt->drv.stream_wait_event(s->stream, e->event, 0);
  if (r != CUDA_SUCCESS) return tilert_cu_fail(s->rt, r, TILE_ERROR_CUDA, "cuStreamWaitEvent failed");
  return TILE_OK;
}
