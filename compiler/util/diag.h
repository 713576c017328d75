/* diag.h - source locations and diagnostics.
 *
 * Every stage reports problems through a Diags list instead of printing or
 * exiting, so that the compiler can run inside a library (the JIT runtime)
 * and tests can assert on the exact message and location. Rendering follows
 * the usual compiler form:
 *
 *   file.tile:3:14: error: message
 *       let x = y + ;
 *                   ^
 */
#ifndef TILE_DIAG_H
#define TILE_DIAG_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "strbuf.h"

/* After this many errors a compilation stops reporting (and stops early
 * where it can): later errors are mostly consequences of earlier ones. */
#define DIAG_MAX_ERRORS 20

/* A 1-based line and byte column; line 0 means "no location". */
typedef struct SrcLoc {
  uint32_t line, col;
} SrcLoc;

typedef struct Source {
  const char *name; /* as given on the command line */
  const char *text; /* not necessarily NUL terminated; may contain NUL */
  size_t len;
} Source;

typedef enum DiagLevel { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

typedef struct Diag {
  DiagLevel level;
  SrcLoc loc;
  char *msg;
} Diag;

typedef struct Diags {
  Arena *arena;
  const Source *src;
  Diag *items;
  int count, cap;
  int errors;
  bool truncated; /* DIAG_MAX_ERRORS reached */
} Diags;

void diags_init(Diags *d, Arena *arena, const Source *src);
void diag_error(Diags *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_warning(Diags *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(Diags *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* True once DIAG_MAX_ERRORS errors were reported. */
bool diags_full(const Diags *d);
/* Appends one rendered diagnostic (header line, source line, caret). */
void diag_render(const Diags *d, const Diag *diag, StrBuf *out);
/* All diagnostics, rendered, in report order. */
void diags_render_all(const Diags *d, StrBuf *out);

#endif
