/* main.c - the project's main job: the standard library's flash
 * attention forward (lang/std/flash_attention.tile) on random bf16 inputs,
 * with its error against a reference computed in double.
 *
 * On a machine with a GPU the kernel runs there: meson compiled it with
 * tilec at build time into headers with embedded cubins (one per head dim
 * and masking), loaded and launched through libtile; the same inputs also
 * run in the interpreter, and both results are compared with the
 * reference. Without a GPU only the interpreter runs. Public APIs only
 * (tilec.h and tile.h), as an application would use them.
 *
 *   flash_attention [--batch B] [--heads H] [--seqlen N] [--dim 64|128]
 *                   [--causal] [--seed S] [--source PATH] [--cpu]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fa_d128.h"
#include "fa_d128_causal.h"
#include "fa_d64.h"
#include "fa_d64_causal.h"
#include "tile.h"
#include "tilec.h"

#ifndef TILE_SOURCE_ROOT
#define TILE_SOURCE_ROOT "."
#endif

typedef struct Config {
  int batch, heads, seqlen, dim;
  bool causal, cpu_only;
  uint64_t seed;
  const char *source;
} Config;

static uint64_t next_random(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* f32 -> bf16 with round to nearest even (inputs here are finite). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
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
  *len = (size_t)n;
  return buf;
}

static bool parse_args(int argc, char **argv, Config *c) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--causal")) c->causal = true;
    else if (!strcmp(a, "--cpu")) c->cpu_only = true;
    else if (v && !strcmp(a, "--batch")) c->batch = atoi(v), i++;
    else if (v && !strcmp(a, "--heads")) c->heads = atoi(v), i++;
    else if (v && !strcmp(a, "--seqlen")) c->seqlen = atoi(v), i++;
    else if (v && !strcmp(a, "--dim")) c->dim = atoi(v), i++;
    else if (v && !strcmp(a, "--seed")) c->seed = strtoull(v, NULL, 0), i++;
    else if (v && !strcmp(a, "--source")) c->source = v, i++;
    else return false;
  }
  return c->batch > 0 && c->heads > 0 && c->seqlen > 0 && (c->dim == 64 || c->dim == 128);
}

/* Attention of one (batch, head) in double, [seqlen, dim] row-major. */
static void reference(const uint16_t *q, const uint16_t *k, const uint16_t *v, double *out, const Config *c,
                      double scale) {
  int n = c->seqlen, d = c->dim;
  double *p = malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) {
    int last = c->causal ? i : n - 1;
    double m = -INFINITY, l = 0;
    for (int j = 0; j <= last; j++) {
      double s = 0;
      for (int t = 0; t < d; t++) s += from_bf16(q[i * d + t]) * from_bf16(k[j * d + t]);
      p[j] = s * scale;
      if (p[j] > m) m = p[j];
    }
    for (int j = 0; j <= last; j++) l += (p[j] = exp(p[j] - m));
    for (int t = 0; t < d; t++) {
      double o = 0;
      for (int j = 0; j <= last; j++) o += p[j] * from_bf16(v[j * d + t]);
      out[i * d + t] = o / l;
    }
  }
  free(p);
}

/* Max |got - want| over max |want|, got in bf16. */
static double rel_error(const uint16_t *got, const double *want, size_t n) {
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; i++) {
    double g = from_bf16(got[i]);
    double e = g == g ? fabs(g - want[i]) : INFINITY;
    if (e > max_err) max_err = e;
    if (fabs(want[i]) > max_ref) max_ref = fabs(want[i]);
  }
  return max_err / max_ref;
}

typedef tile_status (*LoadFn)(tile_runtime *, tile_module **);

/* Timed launches after the checked one; the median is reported. */
#define FA_TIMED_RUNS 21

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Runs the AOT-compiled kernel on the GPU. Returns false (with a message)
 * when there is no GPU; *ran tells whether it ran. */
static bool run_gpu(const Config *c, const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *o,
                    size_t total, int64_t block_m, float scale, bool *ran, double *ms) {
  *ran = false;
  tile_config cfg;
  tile_config_init(&cfg);
  tile_runtime *rt;
  tile_status st = tile_runtime_create(&cfg, &rt);
  if (st != TILE_OK) {
    printf("  no GPU (%s); the interpreter only\n", tile_last_error());
    return st == TILE_ERROR_NO_DRIVER || st == TILE_ERROR_NO_DEVICE;
  }
  LoadFn load = c->dim == 64 ? (c->causal ? fa_d64_causal_load : fa_d64_load)
                             : (c->causal ? fa_d128_causal_load : fa_d128_load);
  tile_module *mod;
  tile_kernel *kern;
  uint64_t dq, dk, dv, dout;
  size_t bytes = total * 2;
  bool ok = load(rt, &mod) == TILE_OK && tile_kernel_get(mod, "flash_attention_fwd", &kern) == TILE_OK &&
            tile_mem_alloc(rt, bytes, &dq) == TILE_OK && tile_mem_alloc(rt, bytes, &dk) == TILE_OK &&
            tile_mem_alloc(rt, bytes, &dv) == TILE_OK && tile_mem_alloc(rt, bytes, &dout) == TILE_OK;
  ok = ok && tile_memcpy_htod(rt, dq, q, bytes) == TILE_OK && tile_memcpy_htod(rt, dk, k, bytes) == TILE_OK &&
       tile_memcpy_htod(rt, dv, v, bytes) == TILE_OK && tile_memset_d8(rt, dout, 0xFF, bytes) == TILE_OK;
  size_t per_head = (size_t)c->seqlen * c->dim;
  uint32_t grid[3] = {(uint32_t)((c->seqlen + block_m - 1) / block_m), (uint32_t)(c->batch * c->heads), 1};
  tile_arg args[10] = {tile_arg_ptr(dout), tile_arg_ptr(dq), tile_arg_ptr(dk), tile_arg_ptr(dv),
                       tile_arg_i32(c->seqlen), tile_arg_i32(c->heads), tile_arg_f32(scale),
                       tile_arg_i64((int64_t)(c->heads * per_head)), tile_arg_i64((int64_t)per_head),
                       tile_arg_i32(c->dim)};
  /* the result of the first launch is checked; then the median time of
   * FA_TIMED_RUNS more */
  ok = ok && tile_launch(kern, grid, NULL, args, 10) == TILE_OK && tile_synchronize(rt) == TILE_OK;
  ok = ok && tile_memcpy_dtoh(rt, o, dout, bytes) == TILE_OK;
  tile_event *e0, *e1;
  ok = ok && tile_event_create(rt, &e0) == TILE_OK && tile_event_create(rt, &e1) == TILE_OK;
  float t[FA_TIMED_RUNS];
  for (int i = 0; ok && i < FA_TIMED_RUNS; i++) {
    ok = tile_event_record(e0, NULL) == TILE_OK && tile_launch(kern, grid, NULL, args, 10) == TILE_OK &&
         tile_event_record(e1, NULL) == TILE_OK && tile_synchronize(rt) == TILE_OK &&
         tile_event_elapsed_ms(e0, e1, &t[i]) == TILE_OK;
  }
  if (ok) qsort(t, FA_TIMED_RUNS, sizeof t[0], cmp_float);
  *ms = ok ? t[FA_TIMED_RUNS / 2] : 0;
  if (!ok) printf("  GPU run failed: %s\n", tile_last_error());
  *ran = ok;
  tile_runtime_destroy(rt); /* frees the module and memory with the context */
  return ok;
}

int main(int argc, char **argv) {
  Config c = {.batch = 1, .heads = 2, .seqlen = 256, .dim = 64, .seed = 1,
              .source = TILE_SOURCE_ROOT "/lang/std/flash_attention.tile"};
  if (!parse_args(argc, argv, &c)) {
    fprintf(stderr, "usage: %s [--batch B] [--heads H] [--seqlen N] [--dim 64|128] [--causal] [--seed S] [--source PATH]\n",
            argv[0]);
    return 2;
  }
  size_t len;
  char *src = read_file(c.source, &len);
  if (!src) {
    fprintf(stderr, "cannot read %s\n", c.source);
    return 2;
  }
  char dim[16];
  snprintf(dim, sizeof dim, "%d", c.dim);
  tc_define defs[] = {{"HEAD_DIM", dim}, {"CAUSAL", c.causal ? "true" : "false"}};
  tc_options opt = {.defines = defs, .ndefines = 2};
  clock_t t0 = clock();
  tc_compilation *comp = tc_compile(c.source, src, len, &opt);
  double compile_ms = 1e3 * (double)(clock() - t0) / CLOCKS_PER_SEC;
  free(src);
  if (tc_error_count(comp)) {
    fputs(tc_diagnostics(comp), stderr);
    tc_free(comp);
    return 1;
  }

  /* BHSD layout, bf16 inputs uniform in [-1, 1). */
  size_t per_head = (size_t)c.seqlen * c.dim, total = per_head * c.batch * c.heads;
  uint16_t *q = malloc(total * 2), *k = malloc(total * 2), *v = malloc(total * 2), *o = malloc(total * 2);
  uint64_t rng = c.seed;
  for (size_t i = 0; i < total; i++) {
    q[i] = to_bf16((float)((double)(next_random(&rng) >> 11) * 0x1p-52 - 1.0));
    k[i] = to_bf16((float)((double)(next_random(&rng) >> 11) * 0x1p-52 - 1.0));
    v[i] = to_bf16((float)((double)(next_random(&rng) >> 11) * 0x1p-52 - 1.0));
    o[i] = 0x7FC0; /* NaN: every element must be written */
  }
  float scale = (float)(1.0 / sqrt((double)c.dim));
  tc_arg args[10] = {{.p = o}, {.p = q}, {.p = k}, {.p = v}, {.i = c.seqlen}, {.i = c.heads}, {.f = scale},
                     {.i = (int64_t)c.heads * (int64_t)per_head}, {.i = (int64_t)per_head}, {.i = c.dim}};
  tc_buffer bufs[4] = {{o, total * 2, "out"}, {q, total * 2, "q"}, {k, total * 2, "k"}, {v, total * 2, "v"}};
  int64_t block_m = 128;
  tc_kernel_const_int(comp, 0, "BLOCK_M", &block_m);
  int64_t grid[3] = {(c.seqlen + block_m - 1) / block_m, (int64_t)c.batch * c.heads, 1};
  char *err = NULL;
  t0 = clock();
  bool ok = tc_interpret(comp, 0, grid, args, 10, bufs, 4, 0, &err);
  double run_ms = 1e3 * (double)(clock() - t0) / CLOCKS_PER_SEC;
  int rc = 0;
  if (!ok) {
    fprintf(stderr, "%s\n", err);
    rc = 1;
  } else {
    double *want = malloc(sizeof(double) * total);
    for (size_t h = 0; h < (size_t)c.batch * c.heads; h++)
      reference(q + h * per_head, k + h * per_head, v + h * per_head, want + h * per_head, &c, scale);
    double rel = rel_error(o, want, total);
    printf("flash attention forward (lang/std/flash_attention.tile)\n");
    printf("  batch %d, heads %d, seqlen %d, head dim %d, %s, bf16\n", c.batch, c.heads, c.seqlen, c.dim,
           c.causal ? "causal" : "full");
    printf("  interpreter: compile %.1f ms, run %.1f ms, max relative error vs float64: %.3e (%s, limit 1e-2)\n",
           compile_ms, run_ms, rel, rel < 1e-2 ? "PASS" : "FAIL");
    rc = rel < 1e-2 ? 0 : 1;
    if (!c.cpu_only) {
      uint16_t *g = malloc(total * 2);
      bool ran;
      double gpu_ms;
      if (!run_gpu(&c, q, k, v, g, total, block_m, scale, &ran, &gpu_ms)) rc = 1;
      if (ran) {
        double grel = rel_error(g, want, total);
        double vs_interp = 0;
        for (size_t i = 0; i < total; i++) vs_interp = fmax(vs_interp, fabs(from_bf16(g[i]) - from_bf16(o[i])));
        /* 4 b h n^2 d operations (two products of 2 n^2 d), half of them with the causal mask */
        double flop = 4.0 * c.batch * c.heads * (double)c.seqlen * c.seqlen * c.dim / (c.causal ? 2 : 1);
        printf("  GPU: %.3f ms (median of %d), %.2f TFLOP/s, max relative error vs float64: %.3e (%s, limit 1e-2); "
               "max |GPU - interpreter| %.3e\n",
               gpu_ms, FA_TIMED_RUNS, gpu_ms > 0 ? flop / (gpu_ms * 1e9) : 0, grel, grel < 1e-2 ? "PASS" : "FAIL",
               vs_interp);
        if (!(grel < 1e-2)) rc = 1;
      }
      free(g);
    }
    free(want);
  }
  free(err);
  free(q), free(k), free(v), free(o);
  tc_free(comp);
  return rc;
}
