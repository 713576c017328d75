/* gen_reduce.c - shrinking a program that shows a problem.
 *
 * The generator writes one statement per line and opens and closes blocks
 * on lines of their own (kernel_gen.c), so a program can be reduced as
 * text: remove a line, or a whole block (a line that opens braces up to
 * the line that closes them), or unwrap a block (keep its body, or one
 * branch of an if / else), and keep the change when the caller's
 * predicate says the problem is still there. Candidates that no longer
 * compile (a name used after its definition went away) simply fail the
 * predicate. Removal is tried on runs of siblings first, halving the run
 * length down to single lines (as in delta debugging), then repeated
 * until nothing more can go or the budget of checks is spent.
 */
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

typedef struct Lines {
  char **text;
  int n;
  bool *alive;
} Lines;

static void lines_split(Lines *l, const char *src, size_t len) {
  l->n = 0;
  for (size_t i = 0; i < len; i++) l->n += src[i] == '\n';
  l->n += len && src[len - 1] != '\n';
  l->text = calloc((size_t)l->n + 1, sizeof *l->text);
  l->alive = calloc((size_t)l->n + 1, sizeof *l->alive);
  if (!l->text || !l->alive) abort();
  const char *p = src, *end = src + len;
  for (int i = 0; i < l->n; i++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    l->text[i] = strndup(p, n);
    l->alive[i] = true;
    p += n + 1;
  }
}

static void lines_free(Lines *l) {
  for (int i = 0; i < l->n; i++) free(l->text[i]);
  free(l->text);
  free(l->alive);
}

static char *lines_join(const Lines *l, const bool *alive, size_t *len) {
  StrBuf sb;
  sb_init(&sb);
  for (int i = 0; i < l->n; i++)
    if (alive[i]) sb_printf(&sb, "%s\n", l->text[i]);
  *len = sb.len;
  char *s = sb_take(&sb);
  return s ? s : strdup("");
}

/* Braces opened minus closed on a line (comments end a line's code). */
static int brace_delta(const char *s) {
  int d = 0;
  for (; *s && !(s[0] == '/' && s[1] == '/'); s++) d += (*s == '{') - (*s == '}');
  return d;
}

static bool starts_with_close(const char *s) {
  while (*s == ' ') s++;
  return *s == '}';
}

/* The last line of the unit starting at line i (a block's closing line,
 * or i itself), among the alive lines. */
static int unit_end(const Lines *l, int i) {
  int depth = brace_delta(l->text[i]);
  if (depth <= 0) return i;
  for (int j = i + 1; j < l->n; j++) {
    if (!l->alive[j]) continue;
    depth += brace_delta(l->text[j]);
    if (depth <= 0) return j;
  }
  return l->n - 1;
}

typedef struct Reducer {
  Lines lines;
  KgStillFails still_fails;
  void *user;
  int checks, max_checks;
} Reducer;

/* Tries the program without the lines marked in `drop`; keeps it when the
 * problem is still there. */
static bool try_drop(Reducer *r, const bool *drop) {
  if (r->checks >= r->max_checks) return false;
  Lines *l = &r->lines;
  bool *alive = malloc((size_t)l->n + 1), any = false;
  for (int i = 0; i < l->n; i++) {
    alive[i] = l->alive[i] && !drop[i];
    any |= l->alive[i] && drop[i];
  }
  bool kept = false;
  if (any) {
    size_t len;
    char *src = lines_join(l, alive, &len);
    r->checks++;
    if (r->still_fails(src, len, r->user)) {
      memcpy(l->alive, alive, (size_t)l->n);
      kept = true;
    }
    free(src);
  }
  free(alive);
  return kept;
}

/* The starts of the alive units that are children of the block opened at
 * line `open` (-1: the top level); returns their count. */
static int children(const Lines *l, int open, int *starts) {
  int n = 0, from = open + 1, to = open < 0 ? l->n - 1 : unit_end(l, open);
  for (int i = from; i <= to && i < l->n; i++) {
    if (!l->alive[i] || (open >= 0 && i == to)) continue;
    if (starts_with_close(l->text[i]) && brace_delta(l->text[i]) >= 0) continue; /* "} else {" */
    starts[n++] = i;
    i = unit_end(l, i);
  }
  return n;
}

static void mark_unit(const Lines *l, int start, bool *drop) {
  for (int j = start, end = unit_end(l, start); j <= end; j++)
    if (l->alive[j]) drop[j] = true;
}

/* Removes runs of sibling units inside the block at `open`, long runs
 * first; then descends into the blocks that remain. */
static bool reduce_block(Reducer *r, int open) {
  Lines *l = &r->lines;
  int *starts = malloc(sizeof(int) * ((size_t)l->n + 1)), n = children(l, open, starts);
  bool *drop = calloc((size_t)l->n + 1, 1), progress = false;
  for (int run = n / 2 > 0 ? n / 2 : 1; run >= 1; run /= 2) {
    for (int at = 0; at < n;) {
      memset(drop, 0, (size_t)l->n);
      for (int k = at; k < at + run && k < n; k++) mark_unit(l, starts[k], drop);
      if (try_drop(r, drop)) {
        progress = true;
        n = children(l, open, starts);
      } else {
        at += run;
      }
    }
  }
  for (int k = 0; k < n; k++)
    if (l->alive[starts[k]] && brace_delta(l->text[starts[k]]) > 0) progress |= reduce_block(r, starts[k]);
  free(starts);
  free(drop);
  return progress;
}

/* Unwraps blocks: keeps one segment's body (a loop's body, or one branch
 * of an if / else if / else) and drops the rest of the block. */
static bool unwrap_blocks(Reducer *r) {
  Lines *l = &r->lines;
  bool progress = false, *drop = calloc((size_t)l->n + 1, 1);
  int *splits = malloc(sizeof(int) * ((size_t)l->n + 2));
  for (int i = 0; i < l->n; i++) {
    if (!l->alive[i] || brace_delta(l->text[i]) <= 0 || !strchr(l->text[i], '{') || !strncmp(l->text[i], "kernel", 6))
      continue;
    int end = unit_end(l, i), ns = 0, depth = 0;
    splits[ns++] = i;
    for (int j = i; j < end; j++) {
      if (!l->alive[j]) continue;
      if (j > i && depth == 1 && starts_with_close(l->text[j]) && brace_delta(l->text[j]) >= 0) splits[ns++] = j;
      depth += brace_delta(l->text[j]);
    }
    splits[ns] = end;
    for (int s = 0; s < ns; s++) {
      memset(drop, 0, (size_t)l->n);
      for (int j = i; j <= end; j++) drop[j] = l->alive[j] && (j <= splits[s] || j >= splits[s + 1]);
      if (try_drop(r, drop)) {
        progress = true;
        break;
      }
    }
  }
  free(splits);
  free(drop);
  return progress;
}

char *kg_reduce(const char *source, size_t len, KgStillFails still_fails, void *user, int max_checks, int *checks) {
  Reducer r = {{0}, still_fails, user, 0, max_checks};
  lines_split(&r.lines, source, len);
  for (bool progress = true; progress && r.checks < r.max_checks;) {
    progress = reduce_block(&r, -1);
    progress |= unwrap_blocks(&r);
  }
  size_t n;
  char *out = lines_join(&r.lines, r.lines.alive, &n);
  if (checks) *checks = r.checks;
  lines_free(&r.lines);
  return out;
}
