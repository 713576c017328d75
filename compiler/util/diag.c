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

void diags_add_source(Diags *d, Source *src) {
  if (d->nfiles == d->cap_files) {
    int cap = d->cap_files ? 2 * d->cap_files : 8;
    const Source **files = ARENA_ARRAY(d->arena, const Source *, cap);
    if (d->nfiles) memcpy(files, d->files, sizeof *files * (size_t)d->nfiles);
    if (!d->nfiles) files[d->nfiles++] = d->src; /* the compiled file is file 0 */
    d->files = files, d->cap_files = cap;
  }
  src->file = (uint32_t)d->nfiles;
  d->files[d->nfiles++] = src;
}

/* The source a location points into: its file, or the compiled one. */
static const Source *source_of(const Diags *d, SrcLoc loc) {
  return loc.file && (int)loc.file < d->nfiles ? d->files[loc.file] : d->src;
}

bool diags_full(const Diags *d) { return d->errors >= DIAG_MAX_ERRORS; }

const char *diag_quote(char buf[DIAG_QUOTE_BUF], const char *text) {
  size_t n = strnlen(text, DIAG_MAX_QUOTE + 1);
  if (n <= DIAG_MAX_QUOTE) {
    memcpy(buf, text, n + 1);
    return buf;
  }
  n = DIAG_MAX_QUOTE;
  while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80) n--; /* a character boundary */
  memcpy(buf, text, n);
  memcpy(buf + n, "...", 4);
  return buf;
}

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
  if (d->warnings_off) return;
  int before = d->count;
  va_list ap;
  va_start(ap, fmt);
  diag_add(d, d->warnings_are_errors ? DIAG_ERROR : DIAG_WARNING, loc, fmt, ap);
  va_end(ap);
  if (d->warnings_are_errors && d->count > before) {
    Diag *last = &d->items[d->count - 1];
    static const char tag[] = " [-Werror]";
    size_t n = strlen(last->msg);
    char *msg = arena_alloc(d->arena, n + sizeof tag);
    memcpy(msg, last->msg, n);
    memcpy(msg + n, tag, sizeof tag);
    last->msg = msg;
  }
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

/* Where line `line` (1-based) of src starts, or false if there is none. */
static bool find_line(const Source *src, uint32_t line, size_t *start) {
  size_t pos = 0;
  for (uint32_t l = 1; l < line; l++) {
    const char *nl = pos < src->len ? memchr(src->text + pos, '\n', src->len - pos) : NULL;
    if (!nl) return false;
    pos = (size_t)(nl - src->text) + 1;
  }
  *start = pos;
  return true;
}

/* Prints source line `line` with unprintable bytes as '?', then a caret
 * under byte column `col` (one caret column per printed character; a
 * column past the end of the line is shown just after it). A line longer
 * than DIAG_MAX_LINE_BYTES is shown as a window of that many bytes around
 * the column, with "..." where it is cut. */
static void render_source_line(const Source *src, SrcLoc loc, StrBuf *out) {
  size_t pos;
  if (!src || !src->text || loc.line == 0 || !find_line(src, loc.line, &pos)) return;
  const unsigned char *s = (const unsigned char *)src->text;
  const unsigned char *nl = memchr(s + pos, '\n', src->len - pos);
  size_t end = nl ? (size_t)(nl - s) : src->len;
  if (end > pos && s[end - 1] == '\r') end--;
  size_t target = pos + (loc.col > 1 ? loc.col - 1 : 0); /* the byte under the caret */
  if (target > end) target = end;
  size_t from = pos, to = end;
  if (end - pos > DIAG_MAX_LINE_BYTES) {
    from = target - pos > DIAG_LINE_CONTEXT ? target - DIAG_LINE_CONTEXT : pos;
    while (from > pos && (s[from] & 0xC0) == 0x80) from--; /* start at a character */
    to = end - from > DIAG_MAX_LINE_BYTES ? from + DIAG_MAX_LINE_BYTES : end;
    while (to < end && to > target && (s[to] & 0xC0) == 0x80) to--;
  }
  size_t caret = 0, shown = 0;
  sb_puts(out, "    ");
  if (from > pos) {
    sb_puts(out, "...");
    shown = 3;
  }
  for (size_t i = from; i < to;) {
    int n = utf8_seq_len(s + i, to - i);
    if (n == 1 && (s[i] < 0x20 || s[i] == 0x7f)) {
      sb_putc(out, s[i] == '\t' ? ' ' : '?');
    } else if (n >= 1) {
      sb_putn(out, (const char *)s + i, (size_t)n);
    } else {
      sb_putc(out, '?');
      n = 1;
    }
    /* Bytes inside a multi-byte character map to its single column. */
    if (target >= i && target < i + (size_t)n) caret = shown;
    i += (size_t)n;
    shown++;
  }
  if (target >= to) caret = shown;
  if (to < end) sb_puts(out, "...");
  sb_puts(out, "\n    ");
  for (size_t i = 0; i < caret; i++) sb_putc(out, ' ');
  sb_puts(out, "^\n");
}

void diag_render(const Diags *d, const Diag *diag, StrBuf *out) {
  static const char *const level_names[] = {"error", "warning", "note"};
  const Source *src = source_of(d, diag->loc);
  const char *file = src && src->name ? src->name : "<input>";
  if (diag->loc.line)
    sb_printf(out, "%s:%u:%u: %s: %s\n", file, diag->loc.line, diag->loc.col,
              level_names[diag->level], diag->msg);
  else
    sb_printf(out, "%s: %s: %s\n", file, level_names[diag->level], diag->msg);
  render_source_line(src, diag->loc, out);
}

void diags_render_all(const Diags *d, StrBuf *out) {
  for (int i = 0; i < d->count; i++) diag_render(d, &d->items[i], out);
  if (d->truncated || diags_full(d))
    sb_printf(out, "%s: error: too many errors (%d), stopping\n",
              d->src && d->src->name ? d->src->name : "<input>", DIAG_MAX_ERRORS);
}
