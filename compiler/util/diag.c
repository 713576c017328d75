/* diag.c - collecting and rendering diagnostics (see diag.h). */
#include "diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void diags_init(Diags *d, Arena *arena, const Source *src) {
  memset(d, 0, sizeof *d);
  d->arena = arena;
  d->src = src;
}

bool diags_full(const Diags *d) { return d->errors >= DIAG_MAX_ERRORS; }

static void diag_add(Diags *d, DiagLevel level, SrcLoc loc, const char *fmt, va_list ap) {
  if (d->truncated) return;
  if (level == DIAG_ERROR && diags_full(d)) {
    d->truncated = true;
    return;
  }
  if (d->count == d->cap) {
    int cap = d->cap ? d->cap * 2 : 16;
    d->items = arena_grow(d->arena, d->items, sizeof(Diag), (size_t)d->cap, (size_t)cap);
    d->cap = cap;
  }
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *msg = arena_alloc(d->arena, (size_t)(n < 0 ? 0 : n) + 1);
  vsnprintf(msg, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  d->items[d->count++] = (Diag){level, loc, msg};
  if (level == DIAG_ERROR) d->errors++;
}

void diag_error(Diags *d, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_add(d, DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
}

void diag_warning(Diags *d, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_add(d, DIAG_WARNING, loc, fmt, ap);
  va_end(ap);
}

void diag_note(Diags *d, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_add(d, DIAG_NOTE, loc, fmt, ap);
  va_end(ap);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static int utf8_seq_len(const unsigned char *p, size_t avail) {
  int n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3
          : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || (size_t)n > avail) return 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  return n;
}

/* Prints source line `line` with unprintable bytes as '?', then a caret
 * under byte column `col` (one caret column per printed character). */
static void render_source_line(const Source *src, SrcLoc loc, StrBuf *out) {
  if (!src || !src->text || loc.line == 0) return;
  size_t pos = 0;
  uint32_t l = 1;
  for (; l < loc.line && pos < src->len; pos++)
    if (src->text[pos] == '\n') l++;
  if (l < loc.line) return; /* no such line */
  const unsigned char *s = (const unsigned char *)src->text;
  size_t end = pos;
  while (end < src->len && s[end] != '\n') end++;
  if (end > pos && s[end - 1] == '\r') end--;
  size_t caret = 0, shown = 0;
  sb_puts(out, "    ");
  for (size_t i = pos; i < end;) {
    if (i - pos + 1 == loc.col) caret = shown;
    int n = utf8_seq_len(s + i, end - i);
    if (n == 1 && (s[i] < 0x20 || s[i] == 0x7f)) {
      sb_putc(out, s[i] == '\t' ? ' ' : '?');
    } else if (n >= 1) {
      sb_putn(out, (const char *)s + i, (size_t)n);
    } else {
      sb_putc(out, '?');
      n = 1;
    }
    /* Bytes inside a multi-byte character map to its single column. */
    for (int k = 1; k < n; k++)
      if (i - pos + 1 + (size_t)k == loc.col) caret = shown;
    i += (size_t)n;
    shown++;
  }
  if (loc.col > end - pos) caret = shown + (loc.col - 1 - (end - pos));
  sb_puts(out, "\n    ");
  for (size_t i = 0; i < caret; i++) sb_putc(out, ' ');
  sb_puts(out, "^\n");
}

void diag_render(const Diags *d, const Diag *diag, StrBuf *out) {
  static const char *const level_names[] = {"error", "warning", "note"};
  const char *file = d->src && d->src->name ? d->src->name : "<input>";
  if (diag->loc.line)
    sb_printf(out, "%s:%u:%u: %s: %s\n", file, diag->loc.line, diag->loc.col,
              level_names[diag->level], diag->msg);
  else
    sb_printf(out, "%s: %s: %s\n", file, level_names[diag->level], diag->msg);
  render_source_line(d->src, diag->loc, out);
}

void diags_render_all(const Diags *d, StrBuf *out) {
  for (int i = 0; i < d->count; i++) diag_render(d, &d->items[i], out);
  if (d->truncated || diags_full(d))
    sb_printf(out, "%s: error: too many errors (%d), stopping\n",
              d->src && d->src->name ? d->src->name : "<input>", DIAG_MAX_ERRORS);
}
