/* harness.c - kernel test helpers (see harness.h). Element storage goes
 * through numeric.h's encode/decode, which test_numeric.c checks against
 * independent references. */
#include "harness.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numeric/numeric.h"

#ifndef TILE_SOURCE_ROOT
#define TILE_SOURCE_ROOT "."
#endif

uint64_t rng_next(Rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double rng_uniform(Rng *r, double lo, double hi) { return lo + (hi - lo) * ((double)(rng_next(r) >> 11) * 0x1p-53); }

char *harness_read_source(const char *relpath, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", TILE_SOURCE_ROOT, relpath);
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)size + 1);
  cr_assert(fread(buf, 1, (size_t)size, f) == (size_t)size);
  fclose(f);
  buf[size] = 0;
  *len = (size_t)size;
  return buf;
}

tc_compilation *harness_compile(const char *relpath, const char *kernel, const char *const *defines) {
  size_t len;
  char *src = harness_read_source(relpath, &len);
  tc_define defs[32];
  int n = 0;
  for (; defines && defines[2 * n] && n < 32; n++) defs[n] = (tc_define){defines[2 * n], defines[2 * n + 1]};
  tc_options opt = {.kernel = kernel, .defines = defs, .ndefines = n, .verify_each_pass = true};
  /* the file's full name: its imports are looked for next to it */
  char name[4096];
  snprintf(name, sizeof name, "%s/%s", TILE_SOURCE_ROOT, relpath);
  tc_compilation *c = tc_compile(name, src, len, &opt);
  cr_assert(tc_error_count(c) == 0, "compiling %s failed:\n%s", relpath, tc_diagnostics(c));
  if (!kernel && tc_kernel_count(c) > 1) { /* the file's first kernel */
    char first[256];
    snprintf(first, sizeof first, "%s", tc_kernel_name(c, 0));
    tc_free(c);
    opt.kernel = first;
    c = tc_compile(name, src, len, &opt);
    cr_assert(tc_error_count(c) == 0, "compiling %s failed:\n%s", relpath, tc_diagnostics(c));
  }
  free(src);
  cr_assert(tc_kernel_count(c) == 1, "%s: expected one kernel", relpath);
  return c;
}

char *harness_emit_source(const char *src, tc_emit_kind what) {
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  char *text = tc_emit(c, what);
  tc_free(c);
  cr_assert(text);
  char *layouts = what == TC_EMIT_LOWERED ? strstr(text, "// layouts of") : NULL;
  if (layouts) *layouts = 0;
  return text;
}

HBuf hbuf_new(const char *elem, size_t n, const char *name) {
  HBuf b = {0};
  b.kind = scalar_from_name(elem, strlen(elem));
  cr_assert(b.kind != SK_VOID, "unknown element type %s", elem);
  b.elem_bytes = (size_t)scalar_bytes(b.kind);
  b.n = n;
  b.name = name;
  b.data = calloc(n ? n : 1, b.elem_bytes);
  return b;
}

void hbuf_free(HBuf *b) {
  free(b->data);
  b->data = NULL;
}

double hbuf_get(const HBuf *b, size_t i) {
  Slot s = num_load((const char *)b->data + i * b->elem_bytes, b->kind);
  if (scalar_is_float(b->kind)) return s.f;
  return scalar_is_signed(b->kind) ? (double)s.i : (double)s.u;
}

void hbuf_set(HBuf *b, size_t i, double v) {
  Slot s;
  if (scalar_is_float(b->kind)) s.f = num_round_float(v, b->kind);
  else s = num_wrap_int((uint64_t)(int64_t)v, b->kind);
  num_store((char *)b->data + i * b->elem_bytes, s, b->kind);
}

void hbuf_fill_uniform(HBuf *b, Rng *r, double lo, double hi) {
  for (size_t i = 0; i < b->n; i++) {
    double v = rng_uniform(r, lo, hi);
    hbuf_set(b, i, scalar_is_float(b->kind) ? v : floor(v));
  }
}

void hbuf_poison(HBuf *b) {
  if (scalar_is_float(b->kind)) {
    for (size_t i = 0; i < b->n; i++) hbuf_set(b, i, NAN);
  } else {
    memset(b->data, 0x5A, b->n * b->elem_bytes);
  }
}

tc_buffer hbuf_tc(const HBuf *b) { return (tc_buffer){b->data, b->n * b->elem_bytes, b->name}; }

double rel_error(const HBuf *got, const double *want, size_t n) {
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; i++) {
    double g = hbuf_get(got, i);
    if (g != g && want[i] == want[i]) return INFINITY;
    double e = fabs(g - want[i]);
    if (e != e) continue; /* NaN expected and got */
    if (e > max_err) max_err = e;
    if (fabs(want[i]) > max_ref) max_ref = fabs(want[i]);
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

void harness_run(tc_compilation *c, const int64_t grid[3], const tc_arg *args, int nargs, const HBuf *const *bufs,
                 int nbufs) {
  tc_buffer tb[32];
  cr_assert(nbufs <= 32);
  for (int i = 0; i < nbufs; i++) tb[i] = hbuf_tc(bufs[i]);
  char *err = NULL;
  bool ok = tc_interpret(c, 0, grid, args, nargs, tb, nbufs, 0, &err);
  cr_assert(ok, "interpreter: %s", err ? err : "?");
  free(err);
}

char *harness_nested(const char *prefix, char open, const char *middle, char close, const char *suffix, int n) {
  size_t lp = strlen(prefix), lm = strlen(middle), ls = strlen(suffix);
  char *s = malloc(lp + lm + ls + 2 * (size_t)n + 1);
  if (!s) abort();
  char *p = s;
  memcpy(p, prefix, lp);
  p += lp;
  memset(p, open, (size_t)n);
  p += n;
  memcpy(p, middle, lm);
  p += lm;
  memset(p, close, (size_t)n);
  p += n;
  memcpy(p, suffix, ls + 1);
  return s;
}


void harness_describe(const char *path, const char *const *defines, char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "%s", path);
  for (int i = 0; defines && defines[2 * i] && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, " -D %s=%s", defines[2 * i], defines[2 * i + 1]);
}

int harness_count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

char *harness_line_with(const char *text, const char *needle) {
  const char *hit = strstr(text, needle);
  if (!hit) return NULL;
  const char *start = hit;
  while (start > text && start[-1] != '\n') start--;
  const char *end = strchr(hit, '\n');
  return strndup(start, end ? (size_t)(end - start) : strlen(start));
}

HarnessLoop harness_split_at_loop(const char *text) {
  const char *for_line = strstr(text, " = for ");
  cr_assert(for_line, "no loop in:\n%s", text);
  while (for_line > text && for_line[-1] != '\n') for_line--;
  size_t indent = strspn(for_line, " ");
  const char *body = strchr(for_line, '\n');
  cr_assert(body, "the loop has no body:\n%s", text);
  body++;
  /* The loop closes on the first line that starts with '}' at its indent
   * (the body's own lines are indented deeper). */
  const char *close = body;
  while (!(strspn(close, " ") == indent && close[indent] == '}')) {
    const char *nl = strchr(close, '\n');
    cr_assert(nl, "unterminated loop in:\n%s", text);
    close = nl + 1;
  }
  const char *after = strchr(close, '\n');
  return (HarnessLoop){strndup(text, (size_t)(body - text)), strndup(body, (size_t)(close - body)),
                       strdup(after ? after + 1 : "")};
}

void harness_loop_free(HarnessLoop *l) {
  free(l->before);
  free(l->body);
  free(l->after);
}
