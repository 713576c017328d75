/* strbuf.c - growable strings (see strbuf.h). */
#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_init(StrBuf *sb) {
  sb->data = NULL;
  sb->len = sb->cap = 0;
}

void sb_free(StrBuf *sb) {
  free(sb->data);
  sb_init(sb);
}

static void sb_reserve(StrBuf *sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap) return;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char *p = realloc(sb->data, cap);
  if (!p) {
    fprintf(stderr, "tile: out of memory (string of %zu bytes)\n", cap);
    abort();
  }
  sb->data = p;
  sb->cap = cap;
}

void sb_putn(StrBuf *sb, const char *s, size_t n) {
  sb_reserve(sb, n);
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

void sb_putc(StrBuf *sb, char c) { sb_putn(sb, &c, 1); }
void sb_puts(StrBuf *sb, const char *s) { sb_putn(sb, s, strlen(s)); }

void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  if (n > 0) {
    sb_reserve(sb, (size_t)n);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap2);
    sb->len += (size_t)n;
  }
  va_end(ap2);
}

void sb_printf(StrBuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *sb_take(StrBuf *sb) {
  if (!sb->data) sb_reserve(sb, 0), sb->data[0] = 0;
  char *p = sb->data;
  sb_init(sb);
  return p;
}
