/* strbuf.h - a growable, NUL-terminated string (malloc based) used by the
 * printers, which produce text that outlives a compilation's arena. */
#ifndef TILE_STRBUF_H
#define TILE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct StrBuf {
  char *data;
  size_t len, cap;
} StrBuf;

void sb_init(StrBuf *sb);
void sb_free(StrBuf *sb);
void sb_putc(StrBuf *sb, char c);
void sb_puts(StrBuf *sb, const char *s);
void sb_putn(StrBuf *sb, const char *s, size_t n);
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
/* Hands the string over to the caller (free() it); the buffer is reset. */
char *sb_take(StrBuf *sb);

#endif
