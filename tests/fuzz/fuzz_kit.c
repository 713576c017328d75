/* fuzz_kit.c - the pieces fuzz_interp and fuzz_options share (see
 * fuzz_kit.h): arguments for a kernel drawn from the input's bytes, and
 * the kernel sources of the tree.
 *
 * Everything is deterministic in the input, so that a crash reproduces
 * from its file alone. Arguments are mostly plausible (small sizes, the
 * powers of two kernels are written for, contiguous tensors) so that runs
 * get past the first masked load, and sometimes wild (negative sizes,
 * tensors larger than their memory, misaligned pointers), which the
 * interpreter must report as errors, never act on.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_kit.h"

/* Integer argument values kernels are written for (sizes, strides, flags). */
static const int64_t interesting_ints[] = {0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 63, 64, 100, 127, 128, 255, 256,
                                           1000, 1024, 4096, -1, -64, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
#define INTERESTING_INTS (sizeof interesting_ints / sizeof interesting_ints[0])

/* Largest element size (f64, i64, u64). */
#define FUZZ_MAX_ELEM_BYTES 8

/* Directories of the kernels under the source root. */
static const char *const source_dirs[] = {"lang/std", "tests/kernels"};

/* Most kernel files the sources hold. */
#define FUZZ_MAX_SOURCES 64

uint64_t fuzz_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t fuzz_seed(const uint8_t *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 0x100000001b3ULL;
  return h;
}

static int64_t draw_int(uint64_t *rng) {
  uint64_t r = fuzz_next(rng);
  if (r % 8 == 0) return (int64_t)fuzz_next(rng); /* anything at all */
  return interesting_ints[(r >> 8) % INTERESTING_INTS];
}

static double draw_float(uint64_t *rng) {
  uint64_t r = fuzz_next(rng);
  switch (r % 16) {
  case 0: return 0.0;
  case 1: return -0.0;
  case 2: return 1e30;
  case 3: return __builtin_inf();
  case 4: return __builtin_nan("");
  default: return (double)(r >> 11) * 0x1p-51 - 2.0; /* [-2, 2) */
  }
}

/* Buffer contents: small numbers mostly, any bits sometimes. */
static void fill_random(unsigned char *p, size_t bytes, uint64_t *rng) {
  bool wild = fuzz_next(rng) % 4 == 0;
  for (size_t i = 0; i < bytes; i++) {
    uint64_t r = fuzz_next(rng);
    p[i] = wild ? (unsigned char)r : (unsigned char)(i % 4 == 0 ? r % 5 : 0);
  }
}

/* A descriptor over a buffer of `elems` elements: usually a contiguous
 * tensor that fits, sometimes sizes and strides the memory cannot hold. */
static void draw_desc(const tc_param *p, tc_arg *a, uint64_t *rng) {
  int rank = p->desc_rank >= 1 && p->desc_rank <= 4 ? p->desc_rank : 1;
  bool wild = fuzz_next(rng) % 8 == 0;
  int64_t left = FUZZ_BUFFER_ELEMS;
  for (int d = rank - 1; d >= 0; d--) {
    int64_t size = 1;
    if (wild) size = draw_int(rng);
    else if (d == 0) size = left;
    else {
      size = (int64_t)1 << (fuzz_next(rng) % 7); /* 1 to 64 */
      while (size > left) size /= 2;
      left /= size;
    }
    a->shape[d] = size;
  }
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    a->strides[d] = wild && fuzz_next(rng) % 2 ? draw_int(rng) : stride;
    if (!wild) stride *= a->shape[d];
  }
}

void fuzz_run_kernels(const tc_compilation *c, uint64_t *rng) {
  for (int k = 0; k < tc_kernel_count(c); k++) {
    int n = tc_param_count(c, k);
    tc_arg *args = calloc((size_t)(n ? n : 1), sizeof *args);
    unsigned char **mem = calloc((size_t)(n ? n : 1), sizeof *mem);
    tc_buffer *bufs = calloc((size_t)(n ? n : 1), sizeof *bufs);
    if (!args || !mem || !bufs) abort();
    int nbufs = 0;
    for (int i = 0; i < n; i++) {
      tc_param p = tc_param_get(c, k, i);
      if (p.kind == TC_PARAM_PTR || p.kind == TC_PARAM_DESC) {
        size_t bytes = (size_t)FUZZ_BUFFER_ELEMS * FUZZ_MAX_ELEM_BYTES;
        mem[i] = malloc(bytes + FUZZ_MAX_ELEM_BYTES);
        if (!mem[i]) abort();
        fill_random(mem[i], bytes + FUZZ_MAX_ELEM_BYTES, rng);
        /* Now and then one byte off: a misaligned pointer. */
        size_t skew = fuzz_next(rng) % 16 == 0 ? 1 : 0;
        args[i].p = mem[i] + skew;
        bufs[nbufs++] = (tc_buffer){mem[i] + skew, (size_t)FUZZ_BUFFER_ELEMS * (size_t)p.elem_bytes, p.name};
        if (p.kind == TC_PARAM_DESC) draw_desc(&p, &args[i], rng);
      } else if (p.kind == TC_PARAM_FLOAT) {
        args[i].f = draw_float(rng);
      } else {
        args[i].i = p.kind == TC_PARAM_BOOL ? (int64_t)(fuzz_next(rng) & 1) : draw_int(rng);
      }
    }
    uint64_t g = fuzz_next(rng);
    int64_t grid[3] = {1 + (int64_t)(g % FUZZ_MAX_GRID), 1 + (int64_t)((g >> 8) % FUZZ_MAX_GRID), 1};
    tc_interp_options limits = {.max_steps = FUZZ_MAX_STEPS, .max_seconds = FUZZ_MAX_SECONDS};
    char *err = NULL;
    (void)tc_interpret_ex(c, k, grid, args, n, bufs, nbufs, &limits, &err);
    free(err);
    for (int i = 0; i < n; i++) free(mem[i]);
    free(mem);
    free(bufs);
    free(args);
  }
}

/* ---- the kernel sources ------------------------------------------------------ */

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 14, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *bigger = realloc(buf, cap *= 2);
    if (!bigger) free(buf);
    buf = bigger;
  }
  fclose(f);
  *len = n;
  return buf;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const FuzzSource *)a)->name, ((const FuzzSource *)b)->name);
}

/* Adds the .tile files of one directory. */
static void add_dir(const char *dir, FuzzSource *out, int *n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", TILE_SOURCE_ROOT, dir);
  DIR *d = opendir(path);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d)) && *n < FUZZ_MAX_SOURCES;) {
    size_t l = strlen(e->d_name);
    if (l < 6 || strcmp(e->d_name + l - 5, ".tile") != 0) continue;
    char file[4096 + 256];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    size_t len = 0;
    char *text = read_all(file, &len);
    if (!text) continue;
    size_t nl = strlen(dir) + l + 2;
    char *name = malloc(nl);
    if (!name) abort();
    snprintf(name, nl, "%s/%s", dir, e->d_name);
    out[(*n)++] = (FuzzSource){name, text, len};
  }
  closedir(d);
}

/* Read once and kept for the life of the process: the fuzzer calls the
 * target millions of times, and the sources never change under it. */
const FuzzSource *fuzz_sources(int *n) {
  static FuzzSource sources[FUZZ_MAX_SOURCES];
  static int count = -1;
  if (count < 0) {
    count = 0;
    for (size_t i = 0; i < sizeof source_dirs / sizeof source_dirs[0]; i++) add_dir(source_dirs[i], sources, &count);
    qsort(sources, (size_t)count, sizeof sources[0], by_name); /* readdir's order is the file system's */
  }
  *n = count;
  return count ? sources : NULL;
}
