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

/* Longest source line printed whole under a diagnostic. A longer one (a
 * generated or minified file) is shown as a window of this many bytes
 * around the column, with "..." where it is cut, so that the output of
 * one diagnostic stays a few lines however long the line is. */
#define DIAG_MAX_LINE_BYTES 160
/* Bytes of such a window shown before the column. */
#define DIAG_LINE_CONTEXT 60

/* Longest piece of outside text (a -D value or name, a command-line
 * argument, a path) quoted whole in a message; a longer one is cut to this
 * many bytes followed by "...", so that a 100 KB argument does not come
 * back in full. Longer than real names, values and paths. */
#define DIAG_MAX_QUOTE 128
/* Size of a buffer for diag_quote: the bytes, "..." and the NUL. */
#define DIAG_QUOTE_BUF (DIAG_MAX_QUOTE + 4)

/* A 1-based line and byte column; line 0 means "no location". file is
 * the source's index in the compilation's table of files (Diags.files):
 * 0 for the compiled file, 1, 2, ... for the files it imports. */
typedef struct SrcLoc {
  uint32_t line, col;
  uint32_t file;
} SrcLoc;

/* Largest source text a compilation (or the IR text parser) accepts:
 * 64 MiB, some thousand times the largest real kernel file, and small
 * enough that byte offsets, columns and token counts fit 32 bits with
 * room to spare and that the copies a compilation makes stay a few
 * hundred megabytes. Larger input is an error before anything is read. */
#define SOURCE_MAX_BYTES ((size_t)64 << 20)

typedef struct Source {
  const char *name; /* as given on the command line (an import: as found) */
  const char *text; /* not necessarily NUL terminated; may contain NUL */
  size_t len;
  uint32_t file;    /* its index in Diags.files: the lexer puts it in every SrcLoc */
} Source;

typedef enum DiagLevel { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagLevel;

typedef struct Diag {
  DiagLevel level;
  SrcLoc loc;
  char *msg;
} Diag;

typedef struct Diags {
  Arena *arena;
  const Source *src;     /* the compiled file (files[0]) */
  const Source **files;  /* every source of the compilation, by SrcLoc.file */
  int nfiles, cap_files;
  Diag *items;
  int count, cap;
  int errors;
  bool truncated; /* DIAG_MAX_ERRORS reached */
  bool warnings_off;        /* tilec -w: warnings are dropped */
  bool warnings_are_errors; /* tilec -Werror: each warning is an error */
} Diags;

void diags_init(Diags *d, Arena *arena, const Source *src);
/* Adds an imported source to the table of files; sets src->file to its
 * index. */
void diags_add_source(Diags *d, Source *src);
void diag_error(Diags *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_warning(Diags *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(Diags *d, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* text, or its first DIAG_MAX_QUOTE bytes (not cutting a UTF-8
 * character) followed by "...", in buf; returns buf. */
const char *diag_quote(char buf[DIAG_QUOTE_BUF], const char *text);
/* True once DIAG_MAX_ERRORS errors were reported. */
bool diags_full(const Diags *d);
/* Appends one rendered diagnostic (header line, source line, caret). */
void diag_render(const Diags *d, const Diag *diag, StrBuf *out);
/* All diagnostics, rendered, in report order. */
void diags_render_all(const Diags *d, StrBuf *out);

#endif
