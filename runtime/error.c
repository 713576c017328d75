/* error.c - status names, the per-thread error message, and logging.
 *
 * Every libtile function returns a tile_status; the details go into a
 * message that tile_last_error() returns. The message buffer is the one
 * piece of static state in libtile: it is thread-local (C11
 * _Thread_local), so threads sharing a runtime never see each other's
 * errors and no lock is needed. A buffer per thread rather than per runtime
 * also lets functions without a runtime (tile_meta_parse, failures of
 * tile_runtime_create itself) report errors the same way.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The calling thread's last error message (see the comment above). */
static _Thread_local char last_error[TILE_ERROR_MAX];

/* Status names, indexed by tile_status. */
static const char *const status_names[] = {
    [TILE_OK] = "TILE_OK",
    [TILE_ERROR_NO_DRIVER] = "TILE_ERROR_NO_DRIVER",
    [TILE_ERROR_NO_DEVICE] = "TILE_ERROR_NO_DEVICE",
    [TILE_ERROR_INVALID_ARGUMENT] = "TILE_ERROR_INVALID_ARGUMENT",
    [TILE_ERROR_NOT_FOUND] = "TILE_ERROR_NOT_FOUND",
    [TILE_ERROR_LOAD] = "TILE_ERROR_LOAD",
    [TILE_ERROR_LAUNCH] = "TILE_ERROR_LAUNCH",
    [TILE_ERROR_CUDA] = "TILE_ERROR_CUDA",
    [TILE_ERROR_OUT_OF_MEMORY] = "TILE_ERROR_OUT_OF_MEMORY",
    [TILE_ERROR_IO] = "TILE_ERROR_IO",
    [TILE_ERROR_BAD_METADATA] = "TILE_ERROR_BAD_METADATA",
    [TILE_ERROR_UNSUPPORTED] = "TILE_ERROR_UNSUPPORTED",
    [TILE_ERROR_COMPILE] = "TILE_ERROR_COMPILE",
    [TILE_ERROR_NO_NCCL] = "TILE_ERROR_NO_NCCL",
    [TILE_ERROR_NCCL] = "TILE_ERROR_NCCL",
};

const char *tile_status_name(tile_status status) {
  size_t n = sizeof status_names / sizeof status_names[0];
  if ((size_t)status >= n || !status_names[status]) return "TILE_ERROR_UNKNOWN_STATUS";
  return status_names[status];
}

const char *tile_last_error(void) { return last_error; }

char *tilert_error_buffer(size_t *capacity) {
  *capacity = sizeof last_error;
  return last_error;
}

void tilert_format(char *buf, size_t size, const char *fmt, ...) {
  if (size == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

tile_status tilert_fail(tile_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

void tilert_log(const tile_runtime *rt, tile_log_level level, const char *fmt, ...) {
  if (!rt || !rt->log || level < rt->log_level) return;
  /* Log lines are short; a long one (a JIT log) is cut, which is fine for
   * a log since the full text is in the error message. */
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  rt->log(rt->log_user, level, line);
}

void tilert_log_last_error(const tile_runtime *rt) {
  if (!rt || !rt->log || TILE_LOG_ERROR < rt->log_level) return;
  rt->log(rt->log_user, TILE_LOG_ERROR, last_error);
}

tile_status tilert_rt_fail(const tile_runtime *rt, tile_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  tilert_log_last_error(rt);
  return status;
}

/* The tile_status a CUDA error means by itself, or fallback. */
static tile_status status_of_cuda_error(CUresult result, tile_status fallback) {
  switch (result) {
  case CUDA_ERROR_OUT_OF_MEMORY: return TILE_ERROR_OUT_OF_MEMORY;
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_INVALID_DEVICE: return TILE_ERROR_NO_DEVICE;
  case CUDA_ERROR_NOT_FOUND: return TILE_ERROR_NOT_FOUND;
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
  case CUDA_ERROR_STUB_LIBRARY: return TILE_ERROR_NO_DRIVER;
  default: return fallback;
  }
}

tile_status tilert_cu_fail(const tile_runtime *rt, CUresult result, tile_status fallback, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  const char *name = NULL, *text = NULL;
  if (rt && rt->drv.get_error_name) rt->drv.get_error_name(result, &name);
  if (rt && rt->drv.get_error_string) rt->drv.get_error_string(result, &text);
  if (n >= 0 && (size_t)n < sizeof last_error) {
    snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s (%d): %s", name ? name : "CUDA error", (int)result,
             text ? text : "no description");
  }
  tilert_log_last_error(rt);
  return status_of_cuda_error(result, fallback);
}

void tilert_error_prefix(const char *fmt, ...) {
  char prefix[TILE_ERROR_MAX / 4];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t plen = strlen(prefix) + 2; /* ": " */
  size_t old = strlen(last_error);
  if (plen + old + 1 > sizeof last_error) old = sizeof last_error - plen - 1;
  memmove(last_error + plen, last_error, old);
  last_error[plen + old] = '\0';
  memcpy(last_error, prefix, plen - 2);
  memcpy(last_error + plen - 2, ": ", 2);
}
