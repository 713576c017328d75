/* fake_log.h - the call log the fake driver and the fake NCCL keep
 * (fake_cuda.c, fake_nccl.c): lines appended to a fixed buffer, cut when
 * it is full. */
#ifndef TILE_TESTS_FAKE_LOG_H
#define TILE_TESTS_FAKE_LOG_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Bytes of a fake's call log. */
#define FAKE_LOG_BYTES 8192

__attribute__((format(printf, 2, 3))) static inline void fake_log_append(char log[FAKE_LOG_BYTES], const char *fmt,
                                                                         ...) {
  size_t used = strlen(log);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(log + used, FAKE_LOG_BYTES - used, fmt, ap);
  va_end(ap);
  used = strlen(log);
  if (used + 1 < FAKE_LOG_BYTES) log[used] = '\n', log[used + 1] = '\0';
}

#endif
