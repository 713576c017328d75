/* gpu_common.c - see gpu_common.h. */
#include "gpu_common.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "numeric/numeric.h"

double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The suite's watchdog: a kernel that hangs holds its GPU context (and
 * the device call) until an outer timeout; instead, when no test has
 * finished for TILE_GPU_TEST_SECONDS (default GPU_TEST_SECONDS), the
 * suite stops at once, naming the last test that finished. State of the
 * test program only (a signal handler needs it static). */
#define GPU_TEST_SECONDS 120
static char watch_last[160] = "(none yet)";
static unsigned watch_seconds;

static void watch_fire(int sig) {
  (void)sig;
  static const char head[] = "\nTIMEOUT: no GPU test finished within the watchdog's time after \"";
  static const char tail[] = "\" (the test after it hangs?); stopping\n";
  if (write(STDOUT_FILENO, head, sizeof head - 1) < 0 || write(STDOUT_FILENO, watch_last, strlen(watch_last)) < 0 ||
      write(STDOUT_FILENO, tail, sizeof tail - 1) < 0)
    _exit(124);
  _exit(124);
}

void gpu_watchdog_start(void) {
  const char *env = getenv("TILE_GPU_TEST_SECONDS");
  long s = env && *env ? strtol(env, NULL, 10) : GPU_TEST_SECONDS;
  watch_seconds = s > 0 ? (unsigned)s : GPU_TEST_SECONDS;
  signal(SIGALRM, watch_fire);
  alarm(watch_seconds);
}

void gpu_report(Gpu *g, const char *name, bool ok, double t0, int *failed) {
  printf("%s %s (%.0f ms)\n", ok ? "ok  " : "FAIL", name, now_ms() - t0);
  fflush(stdout);
  if (watch_seconds) {
    snprintf(watch_last, sizeof watch_last, "%s", name);
    alarm(watch_seconds);
  }
  if (ok) {
    g->passed++;
  } else {
    g->failed++;
    if (failed) ++*failed;
  }
}

int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double rng_uniform(Rng *r, double lo, double hi) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return lo + (hi - lo) * ((double)(z >> 11) * 0x1p-53);
}

bool gpu_open(Gpu *g, const char *source_root) {
  memset(g, 0, sizeof *g);
  g->source_root = source_root;
  tile_config cfg;
  tile_config_init(&cfg);
  tile_status st = tile_runtime_create(&cfg, &g->rt);
  if (st != TILE_OK) {
    printf("no GPU available (%s: %s)\n", tile_status_name(st), tile_last_error());
    return false;
  }
  if (tile_device_info(g->rt, &g->props) != TILE_OK) {
    printf("cannot read the device properties: %s\n", tile_last_error());
    return false;
  }
  printf("device: %s, %d SMs, compute capability %d.%d\n", g->props.name, g->props.sm_count, g->props.cc_major,
         g->props.cc_minor);
  return true;
}

void gpu_close(Gpu *g) {
  if (g->rt) tile_runtime_destroy(g->rt);
  g->rt = NULL;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  buf[n] = 0;
  *len = (size_t)n;
  return buf;
}

bool variant_build(Gpu *g, const char *relpath, const char *const *defines, Variant *v) {
  tc_codegen_options go = {.linker = TC_LINKER_AUTO};
  return variant_build_opts(g, relpath, defines, &go, v);
}

/* The source with every `@pipeline(...)` removed. */
char *replace_annotation(const char *src, const char *name, const char *with, size_t *len) {
  char pat[64];
  snprintf(pat, sizeof pat, "@%s(", name);
  size_t plen = strlen(pat), wlen = strlen(with), count = 0;
  for (const char *p = strstr(src, pat); p; p = strstr(p + 1, pat)) count++;
  char *out = malloc(strlen(src) + count * wlen + 1), *o = out;
  for (const char *p = src; *p;) {
    if (!strncmp(p, pat, plen)) {
      p += plen - 1; /* at its '(' */
      for (int depth = 0; *p; p++) {
        depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
        if (!depth) {
          p++;
          break;
        }
      }
      memcpy(o, with, wlen);
      o += wlen;
      continue;
    }
    *o++ = *p++;
  }
  *o = 0;
  *len = (size_t)(o - out);
  return out;
}

char *strip_pipeline(const char *src, size_t *len) { return replace_annotation(src, "pipeline", "", len); }

char *variant_read_source(Gpu *g, const char *relpath, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", g->source_root, relpath);
  char *src = read_file(path, len);
  if (!src) printf("  cannot read %s\n", path);
  return src;
}

bool variant_build_opts(Gpu *g, const char *relpath, const char *const *defines, const tc_codegen_options *go,
                        Variant *v) {
  size_t len;
  char *src = variant_read_source(g, relpath, &len);
  if (!src) {
    memset(v, 0, sizeof *v);
    return false;
  }
  bool ok = variant_build_text(g, relpath, src, len, defines, go, v);
  free(src);
  return ok;
}

static bool build_text(Gpu *g, const char *relpath, const char *src, size_t len, const char *kernel,
                       const char *const *defines, const tc_codegen_options *go, Variant *v) {
  memset(v, 0, sizeof *v);
  tc_define defs[32];
  int n = 0;
  for (; defines && defines[2 * n] && n < 32; n++) defs[n] = (tc_define){defines[2 * n], defines[2 * n + 1]};
  tc_options opt = {.kernel = kernel, .defines = defs, .ndefines = n};
  /* the file's full name: its imports are looked for next to it */
  char name[4096];
  snprintf(name, sizeof name, "%s/%s", g->source_root, relpath);
  double t0 = now_ms();
  v->comp = tc_compile(relpath[0] == '/' ? relpath : name, src, len, &opt);
  bool ok = tc_error_count(v->comp) == 0 && tc_generate(v->comp, go);
  v->compile_ms = now_ms() - t0;
  if (!ok) {
    printf("  compiling %s failed:\n%s", relpath, tc_diagnostics(v->comp));
    return false;
  }
  const char *warnings = tc_diagnostics(v->comp);
  if (warnings && *warnings) printf("  %s: %s", relpath, warnings);
  size_t size;
  const void *cubin = tc_cubin(v->comp, &size);
  if (tile_module_load(g->rt, cubin, size, &v->mod) != TILE_OK ||
      tile_kernel_get(v->mod, tc_kernel_name(v->comp, 0), &v->kernel) != TILE_OK) {
    printf("  loading %s: %s\n", relpath, tile_last_error());
    return false;
  }
  return true;
}

bool variant_build_text(Gpu *g, const char *relpath, const char *src, size_t len, const char *const *defines,
                        const tc_codegen_options *go, Variant *v) {
  return build_text(g, relpath, src, len, NULL, defines, go, v);
}

bool variant_build_text_kernel(Gpu *g, const char *relpath, const char *src, size_t len, const char *kernel,
                               const char *const *defines, Variant *v) {
  tc_codegen_options go = {.linker = TC_LINKER_AUTO};
  return build_text(g, relpath, src, len, kernel, defines, &go, v);
}

bool variant_build_kernel_opts(Gpu *g, const char *relpath, const char *kernel, const char *const *defines,
                               const tc_codegen_options *go, Variant *v) {
  size_t len;
  char *src = variant_read_source(g, relpath, &len);
  if (!src) {
    memset(v, 0, sizeof *v);
    return false;
  }
  tc_codegen_options deflt = {.linker = TC_LINKER_AUTO};
  bool ok = build_text(g, relpath, src, len, kernel, defines, go ? go : &deflt, v);
  free(src);
  return ok;
}

bool variant_build_kernel(Gpu *g, const char *relpath, const char *kernel, const char *const *defines, Variant *v) {
  return variant_build_kernel_opts(g, relpath, kernel, defines, NULL, v);
}

void variant_free(Variant *v) {
  if (v->mod) tile_module_unload(v->mod);
  if (v->comp) tc_free(v->comp);
  memset(v, 0, sizeof *v);
}

int64_t variant_const(const Variant *v, const char *name, int64_t fallback) {
  int64_t x;
  return tc_kernel_const_int(v->comp, 0, name, &x) ? x : fallback;
}

bool dbuf_alloc(Gpu *g, DBuf *b, const char *name, const char *elem, size_t n) {
  memset(b, 0, sizeof *b);
  b->name = name;
  b->kind = scalar_from_name(elem, strlen(elem));
  b->elem_bytes = (size_t)scalar_bytes(b->kind);
  b->n = n;
  b->host = calloc(n ? n : 1, b->elem_bytes);
  if (tile_mem_alloc(g->rt, n * b->elem_bytes, &b->dev) != TILE_OK) {
    printf("  device allocation of %zu bytes failed: %s\n", n * b->elem_bytes, tile_last_error());
    return false;
  }
  return true;
}

void dbuf_free(Gpu *g, DBuf *b) {
  free(b->host);
  if (b->dev) tile_mem_free(g->rt, b->dev);
  memset(b, 0, sizeof *b);
}

double dbuf_get(const DBuf *b, size_t i) {
  Slot s = num_load((const char *)b->host + i * b->elem_bytes, b->kind);
  if (scalar_is_float(b->kind)) return s.f;
  return scalar_is_signed(b->kind) ? (double)s.i : (double)s.u;
}

double *dbuf_doubles(const DBuf *b) {
  double *d = malloc(sizeof(double) * (b->n ? b->n : 1));
  if (!d) return NULL;
  for (size_t i = 0; i < b->n; i++) d[i] = dbuf_get(b, i);
  return d;
}

void dbuf_set(DBuf *b, size_t i, double v) {
  Slot s;
  if (scalar_is_float(b->kind)) s.f = num_round_float(v, b->kind);
  else s = num_convert((Slot){.f = v}, SK_F64, b->kind);
  num_store((char *)b->host + i * b->elem_bytes, s, b->kind);
}

void dbuf_fill(DBuf *b, Rng *r, double lo, double hi) {
  for (size_t i = 0; i < b->n; i++) {
    double v = rng_uniform(r, lo, hi);
    dbuf_set(b, i, scalar_is_float(b->kind) ? v : floor(v));
  }
}

void dbuf_poison(DBuf *b) {
  if (scalar_is_float(b->kind))
    for (size_t i = 0; i < b->n; i++) dbuf_set(b, i, NAN);
  else
    memset(b->host, 0x5A, b->n * b->elem_bytes);
}

bool dbuf_upload(Gpu *g, DBuf *b) {
  if (tile_memcpy_htod(g->rt, b->dev, b->host, b->n * b->elem_bytes) == TILE_OK) return true;
  printf("  upload of %s failed: %s\n", b->name, tile_last_error());
  return false;
}

bool dbuf_download(Gpu *g, DBuf *b) {
  if (tile_memcpy_dtoh(g->rt, b->host, b->dev, b->n * b->elem_bytes) == TILE_OK) return true;
  printf("  download of %s failed: %s\n", b->name, tile_last_error());
  return false;
}
