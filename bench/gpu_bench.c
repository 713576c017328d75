/* gpu_bench.c - GPU benchmarks (`tile-gpu bench`). Each figure is a ratio
 * to its anchor measured in the same run (see ../shared/ANCHORS.md):
 *
 *   memory-bound kernels   GB/s (bytes each kernel must read + write, once)
 *                          over a device-to-device copy's GB/s
 *   launch cost            host time of one tile_launch over one bare
 *                          cuLaunchKernel of the same function
 *   compile time           tc_compile + tc_generate (source to cubin), ms
 *   GEMM                   TFLOP/s (2 m n k / t) over cuBLAS's (bf16) or
 *                          cuBLASLt's (fp8 e4m3) on the same operands,
 *                          through dlopen (cublas_anchor.h); skipped with a
 *                          message where cuBLAS cannot be opened
 *
 * Timing: CUDA events around each launch after warm-up, median of the
 * repetitions; buffers are far larger than the 50 MB L2, so no input is
 * served from cache across repetitions. A GEMM kernel and its cuBLAS
 * anchor are timed in alternating rounds (time_pair_ms), so that a change
 * of the GPU's clocks during the run (power and temperature) moves both
 * figures alike; each row's anchor is the one measured beside it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cublas_anchor.h"
#include "gpu_common.h"
#include "numeric/numeric.h"
#include "tile_jit.h"

#define WARMUP 5
/* bench_time_queued_ms: rounds of back-to-back calls, and calls per round. */
#define QUEUED_ROUNDS 9
#define QUEUED_CALLS 20
#define REPS 30
/* Alternating rounds of time_pair_ms: PAIR_ROUNDS rounds of PAIR_REPS
 * timed calls of each function (60 of each in all, after WARMUP). */
#define PAIR_ROUNDS 6
#define PAIR_REPS 10
/* sustained_ms: calls between synchronizations (about 20 ms of GEMM at
 * the large shapes), and a bound on the calls. */
#define SUSTAIN_BATCH 20
#define SUSTAIN_MAX_CALLS 100000
#define LAUNCH_REPS 20000
#define COMPILE_REPS 5

/* Longest benchmark name: "gemm bf16 16384x2048x8192 tile cp.async 128x256x64 4 stages 8 warps" fits. */
#define ROW_NAME_BYTES 160

/* Longest series label of a sweep row ("tile WS 128x256x64 4 stages"). */
#define ROW_SERIES_BYTES 64

typedef struct Row {
  char name[ROW_NAME_BYTES];
  double value, anchor, ratio;
  const char *unit;
  /* sweep rows (bench sweep): the line of a plot the row is a point of,
   * its size on the x axis, the anchor's line; size 0 elsewhere */
  char series[ROW_SERIES_BYTES], anchor_series[ROW_SERIES_BYTES];
  double size;
  const char *size_name; /* what size measures, for the axis */
} Row;

/* Rows the final table holds; a row beyond them is printed, not kept. */
#define MAX_ROWS 128

static Row rows[MAX_ROWS];
static int nrows;

/* While bench sweep runs: the x of the rows being added (0: no sweep). */
static double sweep_size;

/* Makes the row just added (named name) a point of a line. */
static void row_point(const char *name, const char *series, double size, const char *size_name, const char *anchor) {
  if (nrows == 0 || strcmp(rows[nrows - 1].name, name)) return; /* the table was full */
  Row *r = &rows[nrows - 1];
  snprintf(r->series, sizeof r->series, "%.*s", (int)strcspn(series, "("), series);
  for (size_t n = strlen(r->series); n > 0 && r->series[n - 1] == ' ';) r->series[--n] = '\0';
  snprintf(r->anchor_series, sizeof r->anchor_series, "%s", anchor);
  r->size = size;
  r->size_name = size_name;
}

static void add_row(const char *name, double value, double anchor, const char *unit) {
  Row spare, *r = nrows < MAX_ROWS ? &rows[nrows++] : &spare;
  snprintf(r->name, sizeof r->name, "%s", name);
  r->value = value;
  r->anchor = anchor;
  r->ratio = anchor > 0 ? value / anchor : 0;
  r->unit = unit;
  printf("%-44s %10.2f %-7s anchor %10.2f  ratio %.3f\n", name, value, unit, anchor, r->ratio);
  fflush(stdout);
}

/* Times `calls` calls of fn issued back to back (events around them)
 * into t[*n], per call; false when one fails. */
static bool time_calls(tile_event *a, tile_event *b, LaunchFn fn, void *ctx, int calls, double *t, int *n) {
  tile_event_record(a, NULL);
  bool ok = true;
  for (int i = 0; ok && i < calls; i++) ok = fn(ctx);
  tile_event_record(b, NULL);
  tile_event_synchronize(b);
  float ms = 0;
  tile_event_elapsed_ms(a, b, &ms);
  t[(*n)++] = ms / calls;
  return ok;
}

/* Median per-call milliseconds of `rounds` (at most REPS) timings of
 * `calls` calls back to back, after WARMUP untimed calls; -1 when a call
 * fails. */
static double time_rounds_ms(Gpu *g, LaunchFn fn, void *ctx, int rounds, int calls) {
  tile_event *a, *b;
  tile_event_create(g->rt, &a);
  tile_event_create(g->rt, &b);
  bool ok = true;
  for (int i = 0; ok && i < WARMUP; i++) ok = fn(ctx);
  double t[REPS];
  int n = 0;
  for (int i = 0; ok && i < rounds && i < REPS; i++) ok = time_calls(a, b, fn, ctx, calls, t, &n);
  tile_event_destroy(a);
  tile_event_destroy(b);
  if (!ok) return -1;
  qsort(t, (size_t)n, sizeof(double), cmp_double);
  return t[n / 2];
}

/* Median milliseconds of REPS timed calls of fn after WARMUP untimed ones;
 * -1 when a call fails. */
static double time_ms(Gpu *g, LaunchFn fn, void *ctx) { return time_rounds_ms(g, fn, ctx, REPS, 1); }

/* Medians of fn_a's and fn_b's times, measured in PAIR_ROUNDS alternating
 * rounds after WARMUP calls of each; false when a call fails. */
static bool time_pair_ms(Gpu *g, LaunchFn fn_a, void *ctx_a, LaunchFn fn_b, void *ctx_b, double *ms_a,
                         double *ms_b) {
  tile_event *a, *b;
  if (tile_event_create(g->rt, &a) != TILE_OK) return false;
  if (tile_event_create(g->rt, &b) != TILE_OK) {
    tile_event_destroy(a);
    return false;
  }
  bool ok = true;
  for (int i = 0; ok && i < WARMUP; i++) ok = fn_a(ctx_a) && fn_b(ctx_b);
  double ta[PAIR_ROUNDS * PAIR_REPS], tb[PAIR_ROUNDS * PAIR_REPS];
  int na = 0, nb = 0;
  for (int r = 0; ok && r < PAIR_ROUNDS; r++) {
    for (int i = 0; ok && i < PAIR_REPS; i++) ok = time_calls(a, b, fn_a, ctx_a, 1, ta, &na);
    for (int i = 0; ok && i < PAIR_REPS; i++) ok = time_calls(a, b, fn_b, ctx_b, 1, tb, &nb);
  }
  tile_event_destroy(a);
  tile_event_destroy(b);
  if (!ok) return false;
  qsort(ta, (size_t)na, sizeof(double), cmp_double);
  qsort(tb, (size_t)nb, sizeof(double), cmp_double);
  *ms_a = ta[na / 2], *ms_b = tb[nb / 2];
  return true;
}

/* Mean ms of fn launched back to back for about budget_ms (no waits
 * between calls, as in a steady workload, so that the GPU's clocks settle
 * under its power limit); prints the wall-clock start and end (seconds,
 * CLOCK_REALTIME) so that samples of nvidia-smi can be matched to it.
 * TILE_BENCH_SUSTAIN_MS=N turns it on for the GEMM rows. */
static double sustained_ms(Gpu *g, LaunchFn fn, void *ctx, double budget_ms, const char *what) {
  struct timespec t0, t1;
  double start = now_ms();
  int calls = 0;
  clock_gettime(CLOCK_REALTIME, &t0);
  while (now_ms() - start < budget_ms && calls < SUSTAIN_MAX_CALLS) {
    for (int i = 0; i < SUSTAIN_BATCH; i++, calls++)
      if (!fn(ctx)) return -1;
    tile_synchronize(g->rt);
  }
  double ms = (now_ms() - start) / calls;
  clock_gettime(CLOCK_REALTIME, &t1);
  printf("  sustain %s %d calls from %.3f to %.3f\n", what, calls, t0.tv_sec + t0.tv_nsec * 1e-9,
         t1.tv_sec + t1.tv_nsec * 1e-9);
  return ms;
}

void bench_add_row(const char *name, double value, double anchor, const char *unit) {
  add_row(name, value, anchor, unit);
}

double bench_time_ms(Gpu *g, LaunchFn fn, void *ctx) { return time_ms(g, fn, ctx); }

bool bench_time_pair_ms(Gpu *g, LaunchFn fn_a, void *ctx_a, LaunchFn fn_b, void *ctx_b, double *ms_a, double *ms_b) {
  return time_pair_ms(g, fn_a, ctx_a, fn_b, ctx_b, ms_a, ms_b);
}

double bench_time_queued_ms(Gpu *g, LaunchFn fn, void *ctx) {
  return time_rounds_ms(g, fn, ctx, QUEUED_ROUNDS, QUEUED_CALLS);
}

/* Random elements generated on the host per buffer; a longer buffer
 * repeats them (device-to-device copies), so that filling the gigabytes of
 * a Mixtral layer's weights takes seconds, not minutes. */
#define FILL_PATTERN_ELEMS ((size_t)1 << 24)

/* A device buffer of n elements: uniform in [-range, range] (a repeated
 * random pattern), or zeros for range 0. 0 on failure. */
uint64_t bench_dev_fill(Gpu *g, const char *elem, size_t n, double range, uint64_t seed) {
  size_t m = n < FILL_PATTERN_ELEMS ? n : FILL_PATTERN_ELEMS;
  DBuf b;
  if (!dbuf_alloc(g, &b, "x", elem, m)) return 0;
  size_t eb = b.elem_bytes;
  uint64_t dev = 0;
  bool ok = tile_mem_alloc(g->rt, n * eb, &dev) == TILE_OK;
  if (ok && range > 0) {
    Rng r = {seed};
    dbuf_fill(&b, &r, -range, range);
    ok = dbuf_upload(g, &b);
    for (size_t off = 0; ok && off < n; off += m)
      ok = tile_memcpy_dtod(g->rt, dev + off * eb, b.dev, (n - off < m ? n - off : m) * eb, NULL) == TILE_OK;
  } else if (ok) {
    ok = tile_memset_d8(g->rt, dev, 0, n * eb) == TILE_OK;
  }
  /* the copies are asynchronous: done before their source is freed */
  ok = tile_synchronize(g->rt) == TILE_OK && ok;
  dbuf_free(g, &b);
  if (!ok && dev) tile_mem_free(g->rt, dev);
  return ok ? dev : 0;
}

/* ---- the copy anchor ---- */

typedef struct CopyCtx {
  Gpu *g;
  uint64_t dst, src;
  size_t bytes;
} CopyCtx;

static bool do_copy(void *p) {
  CopyCtx *c = p;
  return tile_memcpy_dtod(c->g->rt, c->dst, c->src, c->bytes, NULL) == TILE_OK;
}

double bench_copy_gbps(Gpu *g, size_t bytes) {
  CopyCtx c = {g, 0, 0, bytes};
  tile_mem_alloc(g->rt, bytes, &c.src);
  tile_mem_alloc(g->rt, bytes, &c.dst);
  tile_memset_d8(g->rt, c.src, 1, bytes);
  double ms = time_ms(g, do_copy, &c);
  tile_mem_free(g->rt, c.src);
  tile_mem_free(g->rt, c.dst);
  return 2.0 * (double)bytes / (ms * 1e6);
}

/* ---- kernels ---- */

typedef struct LaunchCtx {
  const tile_kernel *k;
  uint32_t grid[3];
  tile_arg args[16];
  int nargs;
} LaunchCtx;

static bool do_launch(void *p) {
  LaunchCtx *c = p;
  tile_status st = tile_launch(c->k, c->grid, NULL, c->args, c->nargs);
  if (st != TILE_OK) printf("  launch failed: %s\n", tile_last_error());
  return st == TILE_OK;
}

static uint64_t dev_random(Gpu *g, size_t n, const char *elem) {
  DBuf b;
  dbuf_alloc(g, &b, "x", elem, n);
  Rng r = {n};
  dbuf_fill(&b, &r, -1, 1);
  dbuf_upload(g, &b);
  uint64_t dev = b.dev;
  free(b.host);
  return dev;
}

static void bench_vector_add(Gpu *g, double copy) {
  const size_t n = (size_t)1 << 28;
  Variant v;
  if (!variant_build(g, "tests/kernels/vector_add.tile", (const char *[]){"BLOCK", "2048", "WARPS", "8", NULL}, &v)) return;
  LaunchCtx c = {v.kernel, {(uint32_t)(n / 2048), 1, 1}, {{0}}, 4};
  uint64_t x = dev_random(g, n, "f32"), y = dev_random(g, n, "f32"), z;
  tile_mem_alloc(g->rt, n * 4, &z);
  c.args[0] = tile_arg_ptr(z), c.args[1] = tile_arg_ptr(x), c.args[2] = tile_arg_ptr(y), c.args[3] = tile_arg_i32((int32_t)n);
  double ms = time_ms(g, do_launch, &c);
  add_row("vector add f32, 2^28 elements (GB/s)", 12.0 * (double)n / (ms * 1e6), copy, "GB/s");
  tile_mem_free(g->rt, x), tile_mem_free(g->rt, y), tile_mem_free(g->rt, z);
  variant_free(&v);
}

/* Kernels with a WARPS parameter are timed with 4, 8, 16 and 32 warps
 * (while each thread keeps at least one 16-byte vector of the row); the
 * best is reported, with its warp count. */
#define MIN_ELEMS_PER_THREAD 4

typedef struct RowKernel {
  const char *label, *file;
  bool layernorm;
} RowKernel;

static double time_row_kernel(Gpu *g, const RowKernel *rk, int n, int blk, int warps, uint64_t *bufs, size_t rows) {
  char block[16], w[16];
  snprintf(block, sizeof block, "%d", blk);
  snprintf(w, sizeof w, "%d", warps);
  Variant v;
  if (!variant_build(g, rk->file, (const char *[]){"BLOCK", block, "WARPS", w, NULL}, &v)) return -1;
  LaunchCtx c = {v.kernel, {(uint32_t)rows, 1, 1}, {{0}}, 0};
  if (rk->layernorm) {
    tile_arg a[9] = {tile_arg_ptr(bufs[0]), tile_arg_ptr(bufs[1]), tile_arg_ptr(bufs[2]), tile_arg_ptr(bufs[3]),
                     tile_arg_ptr(bufs[4]), tile_arg_ptr(bufs[5]), tile_arg_i32(n), tile_arg_i32(n), tile_arg_f32(1e-5f)};
    memcpy(c.args, a, sizeof a);
    c.nargs = 9;
  } else {
    tile_arg a[4] = {tile_arg_ptr(bufs[0]), tile_arg_ptr(bufs[1]), tile_arg_i32(n), tile_arg_i32(n)};
    memcpy(c.args, a, sizeof a);
    c.nargs = 4;
  }
  double ms = time_ms(g, do_launch, &c);
  variant_free(&v);
  return ms;
}

static void bench_rows(Gpu *g, double copy, const RowKernel *rk, int n) {
  const size_t total = (size_t)1 << 28;
  size_t rows = total / (size_t)n;
  uint64_t bufs[6];
  tile_mem_alloc(g->rt, total * 4, &bufs[0]);
  bufs[1] = dev_random(g, total, "f32");
  if (rk->layernorm) {
    bufs[2] = dev_random(g, (size_t)n, "f32"), bufs[3] = dev_random(g, (size_t)n, "f32");
    tile_mem_alloc(g->rt, rows * 4, &bufs[4]);
    tile_mem_alloc(g->rt, rows * 4, &bufs[5]);
  }
  double best = INFINITY;
  int best_warps = 0, best_block = n;
  /* softmax needs the whole row in one tile; layernorm may take it in
   * BLOCK-sized pieces (the first kept in registers). */
  for (int blk = n; blk >= (rk->layernorm ? n / 8 : n); blk /= 2)
    for (int w = 4; w <= 32; w *= 2) {
      if (blk / (32 * w) < MIN_ELEMS_PER_THREAD) break;
      double ms = time_row_kernel(g, rk, n, blk, w, bufs, rows);
      if (ms > 0 && ms < best) best = ms, best_warps = w, best_block = blk;
    }
  /* Bytes each row must move: read x once, write the output once (plus
   * the two per-row statistics of layernorm). */
  double bytes = 8.0 * (double)total + (rk->layernorm ? 8.0 * (double)rows : 0);
  char name[96];
  snprintf(name, sizeof name, "%s f32, rows of %d, BLOCK %d, %d warps (GB/s)", rk->label, n, best_block, best_warps);
  add_row(name, bytes / (best * 1e6), copy, "GB/s");
  char series[64];
  snprintf(series, sizeof series, "%s f32", rk->label);
  row_point(name, series, n, "row length (f32 elements)", "device-to-device copy, 1 GiB");
  for (int i = 0; i < (rk->layernorm ? 6 : 2); i++) tile_mem_free(g->rt, bufs[i]);
}

/* ---- GEMM: the cuBLAS anchors, and the problems kernels are measured on ----
 *
 * For each shape one GemmProblem holds the operands in device memory
 * (random bf16, never zeros: A and B each stored both ways, plus fp8 e4m3
 * copies for the fp8 shape) and cuBLAS's C, the reference every kernel's
 * C is checked against. cuBLAS itself is checked first, in every storage
 * order, against a host fp64 reference on a few rows. A kernel variant of
 * ours is timed in rounds alternating with the anchor and adds its row:
 *
 *     double anchor, ms = gemm_time_paired(p, GEMM_BF16, do_launch, &launch, &anchor);
 *     gemm_report(p, "tile 128x256x64, 3 stages", GEMM_BF16, ms, anchor, p->c);
 *
 * which prints "gemm bf16 8192^3 tile 128x256x64, 3 stages" in TFLOP/s,
 * the ratio to cuBLAS, and the error of its C against cuBLAS's.
 */

/* Rows of C compared between a kernel and cuBLAS: one at a random offset
 * in each 64th of the m rows, so every block of rows a tiling of M makes
 * (up to 64 blocks) is looked at; each is one small device-to-host copy. */
#define GEMM_CHECK_ROWS 64

/* Of those, the rows (every eighth) where cuBLAS's own C is checked against
 * a host fp64 reference: each costs n * k multiply-adds on the host, 8 rows
 * of 8192^3 half a billion (about a second). */
#define GEMM_HOST_ROWS 8

/* Largest norm-wise relative error ||C - R|| / ||R|| of a correct C. bf16
 * keeps 8 significant bits, so rounding C alone gives about
 * 2^-8.5 / sqrt(3) = 1.6e-3 (two results rounded independently differ by
 * about 2.3e-3); fp32 accumulation over k = 8192 adds far less. A wrong
 * layout gives errors of order 1, one missing K tile of 64 out of 8192
 * about 0.09, a dropped fp8 scale 1 or more. */
#define GEMM_TOLERANCE 1e-2

/* Inputs are drawn uniform in [-GEMM_INPUT_RANGE, GEMM_INPUT_RANGE] and
 * rounded to bf16 (the fp8 copies on to e4m3): far from either type's
 * overflow, and C's entries, about sqrt(k / 9) (30 for k = 8192), far
 * from bf16's. */
#define GEMM_INPUT_RANGE 1.0

/* The fp8 scales: powers of two (exact in f32) whose product is not 1, so
 * a kernel that drops one is caught. */
#define FP8_SCALE_A 0.5f
#define FP8_SCALE_B 0.25f

/* Bytes written over a C before each run: 0xFFFF is a NaN in bf16 and
 * 0xFFFFFFFF in f32, so a run that writes nothing fails its check. */
#define GEMM_POISON_BYTE 0xFF

/* 64 x 64 elements per block of the host transposes: at most 16 KiB on
 * each side (4-byte floats), which stays in L1. */
#define TRANSPOSE_BLOCK 64

typedef enum GemmPrecision {
  GEMM_BF16, /* bf16 A and B, bf16 C, fp32 accumulation */
  GEMM_FP8,  /* e4m3 A and B^T, bf16 C = scale_a * scale_b * A @ B */
} GemmPrecision;

typedef struct GemmShape {
  int m, n, k;
  bool fp8; /* also make fp8 operands and measure cuBLASLt's fp8 GEMM */
} GemmShape;

/* C[m, n] = A[m, k] @ B[k, n]. Every matrix is row-major and packed: its
 * leading dimension is its number of columns (k for A, m for A^T, n for
 * B and C, k for B^T). Device buffers belong to the problem. */
typedef struct GemmProblem {
  Gpu *g;
  CublasAnchor *cublas;
  int m, n, k;
  char label[32]; /* "8192^3", "16384x2048x8192" */
  uint64_t a;     /* bf16 A [m, k] */
  uint64_t a_t;   /* bf16 A^T [k, m]: A stored transposed */
  uint64_t b;     /* bf16 B [k, n] */
  uint64_t b_t;   /* bf16 B^T [n, k] */
  uint64_t c;     /* [m, n], room for f32: the C of the run being measured */
  uint64_t c_ref; /* bf16 [m, n]: cuBLAS's A @ B */
  double tflops;  /* cuBLAS's bf16 figure (0 until measured) */
  bool fp8;
  uint64_t a_f8;     /* e4m3 A [m, k]: the bf16 A rounded */
  uint64_t b_t_f8;   /* e4m3 B^T [n, k]: the bf16 B^T rounded */
  uint64_t scale_a;  /* one f32, FP8_SCALE_A */
  uint64_t scale_b;  /* one f32, FP8_SCALE_B */
  uint64_t c_ref_f8; /* bf16 [m, n]: cuBLASLt's scale_a * scale_b * A8 @ B8 */
  double tflops_fp8; /* cuBLASLt's fp8 figure */
  int rows[GEMM_CHECK_ROWS];         /* the rows of C that checks compare */
  double *host_ref, *host_ref_f8;    /* GEMM_HOST_ROWS x n: host fp64 C on host_row(p, 0..) */
} GemmProblem;

static double gemm_tflops(double ms, const GemmProblem *p) {
  return 2.0 * (double)p->m * (double)p->n * (double)p->k / (ms * 1e9);
}

/* The i-th row with a host reference: every eighth checked row. */
static int host_row(const GemmProblem *p, int i) { return p->rows[i * (GEMM_CHECK_ROWS / GEMM_HOST_ROWS)]; }

/* Host-side conversions, exact by construction: tables of every bf16 and
 * e4m3 bit pattern made once with compiler/numeric (the interpreter's
 * rounding), so converting 10^8 elements is a look-up each. */
typedef struct GemmTables {
  float bf16[1 << 16];           /* bf16 bits -> value */
  float e4m3[1 << 8];            /* e4m3 bits -> value */
  uint8_t bf16_to_e4m3[1 << 16]; /* bf16 bits -> the nearest e4m3 (saturating) */
} GemmTables;

static GemmTables *gemm_tables_new(void) {
  GemmTables *t = malloc(sizeof *t);
  if (!t) return NULL;
  for (uint32_t i = 0; i < 1u << 16; i++) {
    t->bf16[i] = (float)num_decode(i, SK_BF16).f;
    t->bf16_to_e4m3[i] = (uint8_t)num_encode(num_decode(i, SK_BF16), SK_F8E4M3);
  }
  for (uint32_t i = 0; i < 1u << 8; i++) t->e4m3[i] = (float)num_decode(i, SK_F8E4M3).f;
  return t;
}

/* The bf16 bits of x, through f32, then to nearest even on the upper half
 * (finite x only). Going through f32 can round a tie differently from a
 * direct rounding; that does not matter here, as everything downstream
 * uses the stored bits. */
static uint16_t bf16_bits(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* dst[c, r] = src[r, c] for a rows x cols matrix of 2-byte elements. */
static void transpose_u16(const uint16_t *src, uint16_t *dst, size_t rows, size_t cols) {
  for (size_t r0 = 0; r0 < rows; r0 += TRANSPOSE_BLOCK)
    for (size_t c0 = 0; c0 < cols; c0 += TRANSPOSE_BLOCK)
      for (size_t r = r0; r < rows && r < r0 + TRANSPOSE_BLOCK; r++)
        for (size_t c = c0; c < cols && c < c0 + TRANSPOSE_BLOCK; c++) dst[c * rows + r] = src[r * cols + c];
}

/* An element of a host matrix of 1- or 2-byte values, through its table. */
static float host_value(const DBuf *b, size_t i, const float *table) {
  return b->elem_bytes == 1 ? table[((const uint8_t *)b->host)[i]] : table[((const uint16_t *)b->host)[i]];
}

/* scale * (A @ B) on the rows host_row(p, 0 ..) in fp64, from the host
 * copies of A [m, k] and B^T [n, k] (bf16 or e4m3, decoded by table). */
static double *host_reference(const GemmProblem *p, const DBuf *a, const DBuf *b_t, const float *table, double scale) {
  size_t n = (size_t)p->n, k = (size_t)p->k;
  float *b = malloc(k * n * sizeof *b); /* B [k, n]: the inner loop below runs along its rows */
  double *ref = calloc((size_t)GEMM_HOST_ROWS * n, sizeof *ref);
  if (!b || !ref) {
    free(b), free(ref);
    printf("  out of host memory for the GEMM reference\n");
    return NULL;
  }
  for (size_t j0 = 0; j0 < n; j0 += TRANSPOSE_BLOCK)
    for (size_t k0 = 0; k0 < k; k0 += TRANSPOSE_BLOCK)
      for (size_t j = j0; j < n && j < j0 + TRANSPOSE_BLOCK; j++)
        for (size_t kk = k0; kk < k && kk < k0 + TRANSPOSE_BLOCK; kk++)
          b[kk * n + j] = host_value(b_t, j * k + kk, table);
  /* Each row of B once for all the reference rows, while it is in cache. */
  for (size_t kk = 0; kk < k; kk++) {
    const float *brow = b + kk * n;
    for (int i = 0; i < GEMM_HOST_ROWS; i++) {
      double x = scale * host_value(a, (size_t)host_row(p, i) * k + kk, table), *out = ref + (size_t)i * n;
      for (size_t j = 0; j < n; j++) out[j] += x * brow[j];
    }
  }
  free(b);
  return ref;
}

static bool dev_alloc(Gpu *g, uint64_t *out, size_t bytes) {
  if (tile_mem_alloc(g->rt, bytes, out) == TILE_OK) return true;
  printf("  device allocation of %zu bytes failed: %s\n", bytes, tile_last_error());
  *out = 0;
  return false;
}

/* Allocates a host + device buffer and keeps the device pointer in *dev,
 * which the problem then owns. */
static bool gemm_buffer(GemmProblem *p, DBuf *b, const char *name, const char *elem, size_t n, uint64_t *dev) {
  bool ok = dbuf_alloc(p->g, b, name, elem, n);
  *dev = b->dev;
  return ok;
}

static void gemm_problem_free(GemmProblem *p) {
  const uint64_t bufs[] = {p->a,    p->a_t,    p->b,       p->b_t,       p->c,         p->c_ref,
                           p->a_f8, p->b_t_f8, p->scale_a, p->scale_b, p->c_ref_f8};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) tile_mem_free(p->g->rt, bufs[i]);
  free(p->host_ref);
  free(p->host_ref_f8);
  memset(p, 0, sizeof *p);
}

/* The fp8 operands (A and B^T rounded to e4m3), the scales and their host
 * reference, from the bf16 host copies. */
static bool gemm_problem_fp8(GemmProblem *p, const GemmTables *t, const DBuf *a, const DBuf *b_t, DBuf *a8,
                             DBuf *b_t8) {
  size_t mk = (size_t)p->m * (size_t)p->k, nk = (size_t)p->n * (size_t)p->k;
  if (!gemm_buffer(p, a8, "A fp8", "f8e4m3", mk, &p->a_f8) ||
      !gemm_buffer(p, b_t8, "B^T fp8", "f8e4m3", nk, &p->b_t_f8))
    return false;
  const uint16_t *a16 = a->host, *b_t16 = b_t->host;
  uint8_t *a8h = a8->host, *b_t8h = b_t8->host;
  for (size_t i = 0; i < mk; i++) a8h[i] = t->bf16_to_e4m3[a16[i]];
  for (size_t i = 0; i < nk; i++) b_t8h[i] = t->bf16_to_e4m3[b_t16[i]];
  const float scale_a = FP8_SCALE_A, scale_b = FP8_SCALE_B;
  if (!dbuf_upload(p->g, a8) || !dbuf_upload(p->g, b_t8) || !dev_alloc(p->g, &p->scale_a, sizeof scale_a) ||
      !dev_alloc(p->g, &p->scale_b, sizeof scale_b) ||
      !dev_alloc(p->g, &p->c_ref_f8, (size_t)p->m * (size_t)p->n * 2) ||
      tile_memcpy_htod(p->g->rt, p->scale_a, &scale_a, sizeof scale_a) != TILE_OK ||
      tile_memcpy_htod(p->g->rt, p->scale_b, &scale_b, sizeof scale_b) != TILE_OK)
    return false;
  p->host_ref_f8 = host_reference(p, a8, b_t8, t->e4m3, (double)scale_a * (double)scale_b);
  p->fp8 = true;
  return p->host_ref_f8 != NULL;
}

/* The checked rows: one at a random offset in each 64th of the m rows. */
static void gemm_pick_rows(GemmProblem *p, Rng *r) {
  size_t m = (size_t)p->m;
  for (size_t i = 0; i < GEMM_CHECK_ROWS; i++) {
    size_t lo = m * i / GEMM_CHECK_ROWS, hi = m * (i + 1) / GEMM_CHECK_ROWS;
    size_t row = lo + (size_t)rng_uniform(r, 0, (double)(hi - lo));
    p->rows[i] = (int)(row < hi ? row : lo);
  }
}

/* Makes the operands on the host (random bf16, then the transposed
 * copies), uploads them, picks the checked rows and computes the host
 * reference. */
static bool gemm_problem_init(GemmProblem *p, Gpu *g, CublasAnchor *cublas, const GemmTables *t, const GemmShape *s) {
  memset(p, 0, sizeof *p);
  p->g = g, p->cublas = cublas, p->m = s->m, p->n = s->n, p->k = s->k;
  if (s->m == s->n && s->n == s->k) snprintf(p->label, sizeof p->label, "%d^3", s->m);
  else snprintf(p->label, sizeof p->label, "%dx%dx%d", s->m, s->n, s->k);
  size_t m = (size_t)s->m, n = (size_t)s->n, k = (size_t)s->k;
  Rng r = {m * 31 + n * 17 + k}; /* a fixed seed per shape */
  gemm_pick_rows(p, &r);
  DBuf a = {0}, a_t = {0}, b = {0}, b_t = {0}, a8 = {0}, b_t8 = {0};
  bool ok = gemm_buffer(p, &a, "A", "bf16", m * k, &p->a) && gemm_buffer(p, &a_t, "A^T", "bf16", m * k, &p->a_t) &&
            gemm_buffer(p, &b, "B", "bf16", k * n, &p->b) && gemm_buffer(p, &b_t, "B^T", "bf16", k * n, &p->b_t) &&
            dev_alloc(g, &p->c, m * n * 4) && dev_alloc(g, &p->c_ref, m * n * 2);
  if (ok) {
    uint16_t *a16 = a.host, *b16 = b.host;
    for (size_t i = 0; i < m * k; i++) a16[i] = bf16_bits(rng_uniform(&r, -GEMM_INPUT_RANGE, GEMM_INPUT_RANGE));
    for (size_t i = 0; i < k * n; i++) b16[i] = bf16_bits(rng_uniform(&r, -GEMM_INPUT_RANGE, GEMM_INPUT_RANGE));
    transpose_u16(a16, a_t.host, m, k);
    transpose_u16(b16, b_t.host, k, n);
    ok = dbuf_upload(g, &a) && dbuf_upload(g, &a_t) && dbuf_upload(g, &b) && dbuf_upload(g, &b_t) &&
         (p->host_ref = host_reference(p, &a, &b_t, t->bf16, 1.0)) != NULL &&
         (!s->fp8 || gemm_problem_fp8(p, t, &a, &b_t, &a8, &b_t8));
  }
  /* The device buffers are the problem's; only the host copies go. */
  DBuf *hosts[] = {&a, &a_t, &b, &b_t, &a8, &b_t8};
  for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) free(hosts[i]->host);
  if (!ok) printf("  gemm %s: setting up the problem failed\n", p->label);
  return ok;
}

/* Poisons the [m, n] matrix at c, of f32 (4-byte) or bf16 elements. */
static bool gemm_poison(const GemmProblem *p, uint64_t c, bool f32) {
  return tile_memset_d8(p->g->rt, c, GEMM_POISON_BYTE, (size_t)p->m * (size_t)p->n * (f32 ? 4 : 2)) == TILE_OK;
}

/* Reads row `row` of the [m, n] matrix at c (bf16, or f32) as doubles. */
static bool read_row(const GemmProblem *p, uint64_t c, bool f32, int row, void *scratch, double *out) {
  size_t n = (size_t)p->n, elem = f32 ? 4 : 2;
  if (tile_memcpy_dtoh(p->g->rt, scratch, c + (uint64_t)row * n * elem, n * elem) != TILE_OK) {
    printf("  reading row %d of C failed: %s\n", row, tile_last_error());
    return false;
  }
  ScalarKind kind = f32 ? SK_F32 : SK_BF16;
  for (size_t j = 0; j < n; j++) out[j] = num_load((const char *)scratch + j * elem, kind).f;
  return true;
}

/* ||C - R|| / ||R|| (Frobenius) over the given rows: R from the device
 * matrix ref (bf16) or, when ref is 0, from the host reference host_ref
 * (one row of n per entry of rows). NaN when a row cannot be read, or when
 * C holds a NaN. */
static double gemm_error(const GemmProblem *p, uint64_t c, bool c_f32, uint64_t ref, const double *host_ref,
                         const int *rows, int nrows_checked) {
  size_t n = (size_t)p->n;
  void *scratch = malloc(n * 4);
  double *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
  double diff2 = 0, ref2 = 0;
  bool ok = scratch && got && want;
  for (int i = 0; ok && i < nrows_checked; i++) {
    ok = read_row(p, c, c_f32, rows[i], scratch, got);
    if (ok && ref) ok = read_row(p, ref, false, rows[i], scratch, want);
    if (ok && !ref) memcpy(want, host_ref + (size_t)i * n, n * sizeof *want);
    for (size_t j = 0; ok && j < n; j++) diff2 += (got[j] - want[j]) * (got[j] - want[j]), ref2 += want[j] * want[j];
  }
  free(scratch), free(got), free(want);
  return ok && ref2 > 0 ? sqrt(diff2 / ref2) : NAN;
}

/* Against cuBLAS's C on the GEMM_CHECK_ROWS sampled rows. */
static double gemm_error_vs_cublas(const GemmProblem *p, uint64_t c, GemmPrecision prec) {
  return gemm_error(p, c, false, prec == GEMM_FP8 ? p->c_ref_f8 : p->c_ref, NULL, p->rows, GEMM_CHECK_ROWS);
}

/* Against the host reference on the GEMM_HOST_ROWS rows that have one. */
static double gemm_error_vs_host(const GemmProblem *p, uint64_t c, bool c_f32, GemmPrecision prec) {
  int rows_h[GEMM_HOST_ROWS];
  for (int i = 0; i < GEMM_HOST_ROWS; i++) rows_h[i] = host_row(p, i);
  return gemm_error(p, c, c_f32, 0, prec == GEMM_FP8 ? p->host_ref_f8 : p->host_ref, rows_h, GEMM_HOST_ROWS);
}

static bool gemm_error_ok(double err) { return err <= GEMM_TOLERANCE; /* false for NaN */ }

static const char *gemm_kind_name(GemmPrecision prec) { return prec == GEMM_FP8 ? "fp8 e4m3" : "bf16"; }

/* A kernel's row next to its anchor: TFLOP/s from ms (<= 0: the runs
 * failed) with the ratio to anchor_tflops (cuBLAS's figure, measured beside
 * it), then its C (bf16 [m, n] at c)
 * checked against cuBLAS's on the sampled rows. p->c is poisoned after, so
 * the next variant cannot pass on this one's C. */
static void gemm_report(GemmProblem *p, const char *variant, GemmPrecision prec, double ms, double anchor_tflops,
                        uint64_t c) {
  char name[ROW_NAME_BYTES];
  snprintf(name, sizeof name, "gemm %s %s %s", gemm_kind_name(prec), p->label, variant);
  if (ms > 0) add_row(name, gemm_tflops(ms, p), anchor_tflops, "TFLOP/s");
  else printf("%-44s failed\n", name);
  if (ms > 0 && sweep_size > 0) row_point(name, variant, sweep_size, "m = n = k", "cuBLAS");
  double err = gemm_error_vs_cublas(p, c, prec);
  printf("  check: relative error %.2e against cuBLAS on %d rows: %s\n", err, GEMM_CHECK_ROWS,
         gemm_error_ok(err) ? "ok" : "WRONG");
  gemm_poison(p, p->c, true);
}

/* One cuBLAS or cuBLASLt call on the problem, as a LaunchFn. */
typedef struct CublasCall {
  GemmProblem *p;
  GemmPrecision prec;
  bool a_trans, b_trans, out_f32; /* bf16 only: A^T and/or B^T as stored operands, f32 C */
  uint64_t c;
} CublasCall;

static bool do_cublas(void *ctx) {
  const CublasCall *k = ctx;
  const GemmProblem *p = k->p;
  char msg[512];
  bool ok = k->prec == GEMM_FP8
                ? cublas_anchor_gemm_fp8(p->cublas, NULL, p->m, p->n, p->k, p->a_f8, p->b_t_f8, p->scale_a,
                                         p->scale_b, k->c, msg, sizeof msg)
                : cublas_anchor_gemm(p->cublas, NULL, false, k->out_f32, k->a_trans, k->b_trans, p->m, p->n, p->k,
                                     k->a_trans ? p->a_t : p->a, k->a_trans ? p->m : p->k, k->b_trans ? p->b_t : p->b,
                                     k->b_trans ? p->k : p->n, k->c, p->n, msg, sizeof msg);
  if (!ok) printf("  %s\n", msg);
  return ok;
}

/* Runs call once on a poisoned C and checks it against the host reference;
 * appends "what error" to the line being built. */
static bool cublas_checked_run(CublasCall *call, const char *what, char *line, size_t size) {
  bool ok = gemm_poison(call->p, call->c, call->out_f32) && do_cublas(call);
  double err = ok ? gemm_error_vs_host(call->p, call->c, call->out_f32, call->prec) : NAN;
  size_t used = strlen(line);
  snprintf(line + used, size - used, "  %s %.2e", what, err);
  return gemm_error_ok(err);
}

/* cuBLAS's bf16 anchor: checked against the host reference with A and B
 * in each storage order, and once with an f32 C (the first run, A and B
 * row-major, stays in c_ref for the kernels' checks); then timed with A
 * and B row-major, into p->c, which is poisoned after. */
static bool gemm_anchor_bf16(GemmProblem *p) {
  static const struct {
    bool a_trans, b_trans, out_f32;
    const char *what;
  } cases[] = {
      {false, false, false, "A.B"}, {true, false, false, "At.B"},       {false, true, false, "A.Bt"},
      {true, true, false, "At.Bt"}, {false, false, true, "A.B f32-out"},
  };
  char line[256] = "";
  bool ok = true;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CublasCall call = {p, GEMM_BF16, cases[i].a_trans, cases[i].b_trans, cases[i].out_f32, i == 0 ? p->c_ref : p->c};
    ok &= cublas_checked_run(&call, cases[i].what, line, sizeof line);
  }
  printf("  cuBLAS bf16 %s against the host reference on %d rows:%s: %s\n", p->label, GEMM_HOST_ROWS, line,
         ok ? "ok" : "WRONG");
  CublasCall timed = {p, GEMM_BF16, false, false, false, p->c};
  double ms = time_ms(p->g, do_cublas, &timed);
  if (ms <= 0) return false;
  p->tflops = gemm_tflops(ms, p);
  char name[96];
  snprintf(name, sizeof name, "gemm bf16 %s cuBLAS", p->label);
  add_row(name, p->tflops, p->tflops, "TFLOP/s");
  return gemm_poison(p, p->c, true); /* so a kernel that writes nothing fails */
}

/* cuBLASLt's fp8 anchor: checked against the host reference (the run
 * stays in c_ref_f8), then timed into p->c, which is poisoned after. */
static bool gemm_anchor_fp8(GemmProblem *p) {
  char line[128] = "";
  CublasCall call = {p, GEMM_FP8, false, false, false, p->c_ref_f8};
  bool ok = cublas_checked_run(&call, "A.Bt", line, sizeof line);
  printf("  cuBLASLt fp8 %s against the host reference on %d rows:%s: %s\n", p->label, GEMM_HOST_ROWS, line,
         ok ? "ok" : "WRONG");
  call.c = p->c;
  double ms = time_ms(p->g, do_cublas, &call);
  if (ms <= 0) return false;
  p->tflops_fp8 = gemm_tflops(ms, p);
  char name[96];
  snprintf(name, sizeof name, "gemm fp8 e4m3 %s cuBLASLt", p->label);
  add_row(name, p->tflops_fp8, p->tflops_fp8, "TFLOP/s");
  return gemm_poison(p, p->c, true); /* so a kernel that writes nothing fails */
}

/* Times fn (a kernel writing p->c) in rounds alternating with the
 * problem's cuBLAS (bf16) or cuBLASLt (fp8) anchor, which writes its own
 * reference C again (so the check after still sees only the kernel's C).
 * Returns the kernel's median ms (-1: a call failed) and sets
 * *anchor_tflops to the anchor's figure of the same rounds. */
static double gemm_time_paired(GemmProblem *p, GemmPrecision prec, LaunchFn fn, void *ctx, double *anchor_tflops) {
  CublasCall anchor = {p, prec, false, false, false, prec == GEMM_FP8 ? p->c_ref_f8 : p->c_ref};
  double ms_anchor, ms;
  *anchor_tflops = 0;
  if (!time_pair_ms(p->g, do_cublas, &anchor, fn, ctx, &ms_anchor, &ms)) return -1;
  *anchor_tflops = gemm_tflops(ms_anchor, p);
  const char *sustain = getenv("TILE_BENCH_SUSTAIN_MS");
  if (sustain && atof(sustain) > 0) {
    double sa = sustained_ms(p->g, do_cublas, &anchor, atof(sustain), "anchor");
    double sk = sustained_ms(p->g, fn, ctx, atof(sustain), "kernel");
    printf("  sustained %.0f ms each: anchor %.2f TFLOP/s, kernel %.2f TFLOP/s, ratio %.3f\n", atof(sustain),
           gemm_tflops(sa, p), gemm_tflops(sk, p), sa / sk);
  }
  return ms;
}

/* ---- our GEMM kernels on a problem ---- */

/* TILE_BENCH_GEMM_ONLY=A|B|...: only the GEMM variants whose label holds
 * one of the '|'-separated texts (cuBLAS is always timed beside them). */
static bool gemm_variant_selected(const char *label) {
  const char *only = getenv("TILE_BENCH_GEMM_ONLY");
  if (!only || !*only) return true;
  for (const char *at = only; *at;) {
    const char *bar = strchr(at, '|');
    size_t len = bar ? (size_t)(bar - at) : strlen(at);
    char part[96];
    if (len > 0 && len < sizeof part) {
      memcpy(part, at, len), part[len] = 0;
      if (strstr(label, part)) return true;
    }
    if (!bar) break;
    at = bar + 1;
  }
  return false;
}

typedef struct TileGemm {
  Variant v;
  tile_arg args[12];
  int nargs;
  uint32_t grid[3];
  tile_tensor t[3];
} TileGemm;

static bool do_tile_gemm(void *ctx) {
  TileGemm *k = ctx;
  return tile_launch(k->v.kernel, k->grid, NULL, k->args, k->nargs) == TILE_OK;
}

/* One variant of lang/std/gemm.tile (tma: gemm_tma.tile) with bf16 C:
 * compiled, checked and timed on the problem. warps < 0: gemm_tma.tile
 * with its @warps replaced by @warp_specialize(1, -warps / 4), one tile
 * per program (the warp specialization without the persistent loop). */
static void bench_tile_gemm(GemmProblem *p, bool tma, int bm, int bn, int bk, int stages, int warps) {
  char dm[16], dn[16], dk[16], ds[16], dw[16], label[64];
  snprintf(dm, sizeof dm, "%d", bm), snprintf(dn, sizeof dn, "%d", bn), snprintf(dk, sizeof dk, "%d", bk);
  snprintf(ds, sizeof ds, "%d", stages), snprintf(dw, sizeof dw, "%d", warps);
  const char *defs[] = {"T", "bf16", "TC", "bf16", "BLOCK_M", dm, "BLOCK_N", dn, "BLOCK_K", dk,
                        "STAGES", ds, "WARPS", dw, NULL};
  snprintf(label, sizeof label, "%s %dx%dx%d %d stages %d warps", tma ? "tile TMA" : "tile cp.async", bm, bn, bk,
           stages, warps);
  if (warps < 0)
    snprintf(label, sizeof label, "tile TMA %dx%dx%d %d stages 1+%d wg (gemm_tma split)", bm, bn, bk, stages, -warps / 4);
  if (!gemm_variant_selected(label)) return;
  TileGemm k;
  memset(&k, 0, sizeof k);
  const char *file = tma ? "lang/std/gemm_tma.tile" : "lang/std/gemm.tile";
  if (warps < 0) {
    size_t len;
    char *src = variant_read_source(p->g, file, &len), with[48];
    snprintf(with, sizeof with, "@warp_specialize(1, %d)", -warps / 4);
    char *ws = src ? replace_annotation(src, "warps", with, &len) : NULL;
    defs[12] = NULL; /* no WARPS */
    tc_codegen_options go = {.linker = TC_LINKER_AUTO};
    bool ok = ws && variant_build_text(p->g, file, ws, len, defs, &go, &k.v);
    free(src);
    free(ws);
    if (!ok) return;
  } else if (!variant_build(p->g, file, defs, &k.v)) {
    return;
  }
  if (tma) {
    k.t[0] = (tile_tensor){p->c, 2, {p->m, p->n}, {p->n, 1}};
    k.t[1] = (tile_tensor){p->a, 2, {p->m, p->k}, {p->k, 1}};
    k.t[2] = (tile_tensor){p->b, 2, {p->k, p->n}, {p->n, 1}};
    for (int i = 0; i < 3; i++) k.args[k.nargs++] = tile_arg_tensor(&k.t[i]);
  } else {
    k.args[k.nargs++] = tile_arg_ptr(p->c);
    k.args[k.nargs++] = tile_arg_ptr(p->a);
    k.args[k.nargs++] = tile_arg_ptr(p->b);
  }
  k.args[k.nargs++] = tile_arg_i32(p->m);
  k.args[k.nargs++] = tile_arg_i32(p->n);
  k.args[k.nargs++] = tile_arg_i32(p->k);
  if (!tma) {
    k.args[k.nargs++] = tile_arg_i32(p->k);
    k.args[k.nargs++] = tile_arg_i32(p->n);
    k.args[k.nargs++] = tile_arg_i32(p->n);
  }
  k.grid[0] = (uint32_t)(((p->m + bm - 1) / bm) * ((p->n + bn - 1) / bn));
  k.grid[1] = k.grid[2] = 1;
  double anchor;
  double ms = gemm_time_paired(p, GEMM_BF16, do_tile_gemm, &k, &anchor);
  gemm_report(p, label, GEMM_BF16, ms, anchor, p->c);
  variant_free(&k.v);
}

/* lang/std/gemm_fp8.tile (e4m3, bf16 C) on the problem's fp8 operands. */
static void bench_tile_gemm_fp8(GemmProblem *p, int bm, int bn, int bk, int stages) {
  char dm[16], dn[16], dk[16], ds[16], label[64];
  snprintf(dm, sizeof dm, "%d", bm), snprintf(dn, sizeof dn, "%d", bn), snprintf(dk, sizeof dk, "%d", bk);
  snprintf(ds, sizeof ds, "%d", stages);
  const char *defs[] = {"BLOCK_M", dm, "BLOCK_N", dn, "BLOCK_K", dk, "STAGES", ds, NULL};
  snprintf(label, sizeof label, "tile TMA %dx%dx%d %d stages", bm, bn, bk, stages);
  TileGemm k;
  memset(&k, 0, sizeof k);
  if (!variant_build(p->g, "lang/std/gemm_fp8.tile", defs, &k.v)) return;
  k.t[0] = (tile_tensor){p->c, 2, {p->m, p->n}, {p->n, 1}};
  k.t[1] = (tile_tensor){p->a_f8, 2, {p->m, p->k}, {p->k, 1}};
  k.t[2] = (tile_tensor){p->b_t_f8, 2, {p->n, p->k}, {p->k, 1}};
  for (int i = 0; i < 3; i++) k.args[k.nargs++] = tile_arg_tensor(&k.t[i]);
  k.args[k.nargs++] = tile_arg_ptr(p->scale_a);
  k.args[k.nargs++] = tile_arg_ptr(p->scale_b);
  k.args[k.nargs++] = tile_arg_i32(p->m);
  k.args[k.nargs++] = tile_arg_i32(p->n);
  k.args[k.nargs++] = tile_arg_i32(p->k);
  k.grid[0] = (uint32_t)(((p->m + bm - 1) / bm) * ((p->n + bn - 1) / bn));
  k.grid[1] = k.grid[2] = 1;
  double anchor;
  double ms = gemm_time_paired(p, GEMM_FP8, do_tile_gemm, &k, &anchor);
  gemm_report(p, label, GEMM_FP8, ms, anchor, p->c);
  variant_free(&k.v);
}

/* lang/std/gemm_ws.tile (warp-specialized) with bf16 C: persistent (a
 * grid of min(tiles, SMs)) or one program per tile. */
static void bench_tile_gemm_ws(GemmProblem *p, int bm, int bn, int bk, int stages, int consumers, bool persistent,
                               bool pingpong, int group_m, int cluster, bool cluster_n) {
  char dm[16], dn[16], dk[16], ds[16], dc[16], dg[16], dcl[16], label[112];
  snprintf(dm, sizeof dm, "%d", bm), snprintf(dn, sizeof dn, "%d", bn), snprintf(ds, sizeof ds, "%d", stages);
  snprintf(dc, sizeof dc, "%d", consumers), snprintf(dk, sizeof dk, "%d", bk);
  snprintf(dg, sizeof dg, "%d", group_m), snprintf(dcl, sizeof dcl, "%d", cluster);
  const char *defs[] = {"T",       "bf16", "TC",        "bf16", "BLOCK_M", dm,      "BLOCK_N",   dn,
                        "BLOCK_K", dk,     "STAGES",    ds,     "CONSUMERS", dc,    "CLUSTER",   dcl,
                        "CLUSTER_N", cluster_n ? "true" : "false", "GROUP_M", dg, NULL};
  if (!group_m) defs[18] = NULL; /* the kernel's default */
  snprintf(label, sizeof label, "tile WS %dx%dx%d %d stages 1+%d wg%s%s", bm, bn, bk, stages, consumers,
           persistent ? " persistent" : "", pingpong ? " ping-pong" : "");
  if (group_m) snprintf(label + strlen(label), sizeof label - strlen(label), " GROUP_M %d", group_m);
  if (cluster > 1)
    snprintf(label + strlen(label), sizeof label - strlen(label), " cluster %d%s", cluster, cluster_n ? " along n" : "");
  if (!gemm_variant_selected(label)) return;
  TileGemm k;
  memset(&k, 0, sizeof k);
  if (pingpong) defs[12] = NULL; /* gemm_ws_pingpong has no CONSUMERS (nor, then, CLUSTER or GROUP_M) */
  if (!variant_build_kernel(p->g, "lang/std/gemm_ws.tile", pingpong ? "gemm_ws_pingpong" : "gemm_ws", defs, &k.v))
    return;
  k.t[0] = (tile_tensor){p->c, 2, {p->m, p->n}, {p->n, 1}};
  k.t[1] = (tile_tensor){p->a, 2, {p->m, p->k}, {p->k, 1}};
  k.t[2] = (tile_tensor){p->b, 2, {p->k, p->n}, {p->n, 1}};
  for (int i = 0; i < 3; i++) k.args[k.nargs++] = tile_arg_tensor(&k.t[i]);
  k.args[k.nargs++] = tile_arg_i32(p->m);
  k.args[k.nargs++] = tile_arg_i32(p->n);
  k.args[k.nargs++] = tile_arg_i32(p->k);
  /* a cluster takes `cluster` tiles stacked along m; persistent: as many
   * programs as run at once */
  uint32_t C = (uint32_t)cluster, cm = cluster_n ? 1 : C, cn = cluster_n ? C : 1;
  uint32_t tiles = C * (uint32_t)(((p->m + cm * bm - 1) / (cm * bm)) * ((p->n + cn * bn - 1) / (cn * bn)));
  uint32_t resident = 0;
  if (tile_kernel_resident_programs(k.v.kernel, &resident) != TILE_OK) {
    printf("%s: %s\n", label, tile_last_error());
    variant_free(&k.v);
    return;
  }
  k.grid[0] = persistent && resident < tiles ? resident : tiles;
  k.grid[1] = k.grid[2] = 1;
  double anchor;
  double ms = gemm_time_paired(p, GEMM_BF16, do_tile_gemm, &k, &anchor);
  snprintf(label + strlen(label), sizeof label - strlen(label), " (%u programs)", k.grid[0]);
  gemm_report(p, label, GEMM_BF16, ms, anchor, p->c);
  variant_free(&k.v);
}

/* tests/kernels/gemm_streamk.tile (128x256x64, 4 stages) on as many
 * programs as run at once: whole tiles in full waves, the last
 * tiles % programs + programs tiles cut along k over all programs. */
static void bench_tile_gemm_streamk(GemmProblem *p) {
  const char *label = "tile WS 128x256x64 4 stages 1+2 wg persistent, stream-K tail";
  TileGemm k;
  memset(&k, 0, sizeof k);
  if (!variant_build(p->g, "tests/kernels/gemm_streamk.tile", NULL, &k.v)) return;
  uint32_t resident = 0;
  if (tile_kernel_resident_programs(k.v.kernel, &resident) != TILE_OK) {
    printf("%s: %s\n", label, tile_last_error());
    variant_free(&k.v);
    return;
  }
  uint32_t tiles = (uint32_t)(((p->m + 127) / 128) * ((p->n + 255) / 256));
  uint64_t ws = 0, count = 0;
  size_t ws_bytes = (size_t)2 * resident * 128 * 256 * 4;
  if (tile_mem_alloc(p->g->rt, ws_bytes, &ws) != TILE_OK || tile_mem_alloc(p->g->rt, (size_t)tiles * 4, &count) != TILE_OK ||
      tile_memset_d8(p->g->rt, count, 0, (size_t)tiles * 4) != TILE_OK) {
    printf("%s: %s\n", label, tile_last_error());
  } else {
    k.t[0] = (tile_tensor){p->c, 2, {p->m, p->n}, {p->n, 1}};
    k.t[1] = (tile_tensor){p->a, 2, {p->m, p->k}, {p->k, 1}};
    k.t[2] = (tile_tensor){p->b, 2, {p->k, p->n}, {p->n, 1}};
    k.args[k.nargs++] = tile_arg_tensor(&k.t[0]);
    k.args[k.nargs++] = tile_arg_ptr(p->c);
    k.args[k.nargs++] = tile_arg_i32(p->n);
    k.args[k.nargs++] = tile_arg_tensor(&k.t[1]);
    k.args[k.nargs++] = tile_arg_tensor(&k.t[2]);
    k.args[k.nargs++] = tile_arg_ptr(ws);
    k.args[k.nargs++] = tile_arg_ptr(count);
    k.args[k.nargs++] = tile_arg_i32(p->m);
    k.args[k.nargs++] = tile_arg_i32(p->n);
    k.args[k.nargs++] = tile_arg_i32(p->k);
    k.grid[0] = resident < tiles ? resident : tiles, k.grid[1] = k.grid[2] = 1;
    double anchor;
    double ms = gemm_time_paired(p, GEMM_BF16, do_tile_gemm, &k, &anchor);
    char full[112];
    snprintf(full, sizeof full, "%s (%u programs)", label, k.grid[0]);
    gemm_report(p, full, GEMM_BF16, ms, anchor, p->c);
  }
  if (ws) tile_mem_free(p->g->rt, ws);
  if (count) tile_mem_free(p->g->rt, count);
  variant_free(&k.v);
}

static void bench_gemm_kernels(GemmProblem *p) {
  const char *sk = getenv("TILE_BENCH_GEMM_STREAMK");
  if (sk && *sk) { /* the stream-K experiment beside the persistent kernel only */
    bench_tile_gemm_ws(p, 128, 256, 64, 4, 2, true, false, 0, 1, false);
    bench_tile_gemm_streamk(p);
    return;
  }
  static const struct {
    bool tma;
    int bm, bn, bk, stages, warps;
  } variants[] = {
      {false, 128, 128, 64, 3, 8}, {false, 128, 128, 64, 4, 8}, {false, 128, 256, 64, 3, 8},
      {false, 128, 256, 64, 4, 8}, {true, 128, 128, 64, 4, 8},  {true, 128, 256, 64, 3, 8},
      {true, 128, 256, 64, 4, 8},  {true, 128, 256, 64, 4, -8},
  };
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
    bench_tile_gemm(p, variants[i].tma, variants[i].bm, variants[i].bn, variants[i].bk, variants[i].stages,
                    variants[i].warps);
  /* group_m 0: the kernel's default (8); the others sweep the tile order */
  static const struct {
    int bm, bn, bk, stages, consumers;
    bool persistent, pingpong;
    int group_m, cluster;
    bool cluster_n;
  } ws[] = {
      {128, 256, 64, 4, 2, false, false, 0, 1, false}, {128, 256, 64, 4, 2, true, false, 0, 1, false},
      {128, 256, 64, 3, 2, true, false, 0, 1, false},  {128, 128, 64, 4, 2, true, false, 0, 1, false},
      {128, 128, 64, 4, 2, true, true, 0, 1, false},   {128, 128, 64, 5, 2, true, true, 0, 1, false},
      {128, 256, 64, 4, 2, true, false, 1, 1, false},  {128, 256, 64, 4, 2, true, false, 4, 1, false},
      {128, 256, 64, 4, 2, true, false, 16, 1, false}, {256, 128, 64, 3, 2, true, false, 0, 1, false},
      {256, 128, 64, 3, 2, true, false, 16, 1, false}, {128, 256, 64, 4, 2, true, false, 0, 2, false},
      {128, 256, 64, 4, 2, true, false, 16, 2, false}, {128, 256, 64, 4, 2, false, false, 0, 2, false},
      {128, 256, 64, 3, 2, true, false, 0, 2, false},  {128, 128, 64, 4, 2, true, false, 0, 2, false},
      {128, 128, 64, 6, 2, true, false, 0, 1, false},  {128, 128, 64, 6, 2, true, false, 0, 2, false},
      {128, 256, 32, 8, 2, true, false, 0, 1, false},  {128, 256, 32, 8, 2, true, false, 0, 2, false},
      {128, 256, 32, 8, 2, true, false, 16, 1, false}, {256, 128, 64, 4, 2, true, false, 0, 1, false},
      {256, 128, 64, 4, 2, true, false, 16, 1, false},
      /* clusters along n: the two tiles share A's rows (cuBLAS's choice for 256x128) */
      {256, 128, 64, 4, 2, true, false, 0, 2, true}, {128, 256, 64, 4, 2, true, false, 0, 2, true},
      {256, 128, 64, 4, 2, true, false, 16, 2, true},
  };
  for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
    bench_tile_gemm_ws(p, ws[i].bm, ws[i].bn, ws[i].bk, ws[i].stages, ws[i].consumers, ws[i].persistent,
                       ws[i].pingpong, ws[i].group_m, ws[i].cluster, ws[i].cluster_n);
}

/* ---- GEMM + bias + activation: fused against cuBLAS and a kernel ---- */

/* The activation both sides apply (gelu, tanh form). */
#define FUSED_ACT "3"

typedef struct FusedAnchor {
  GemmProblem *p;
  Variant ew; /* tests/kernels/bias_act.tile */
  uint64_t c, bias;
  tile_arg args[5];
  uint32_t grid[3];
} FusedAnchor;

static bool do_cublas_then_bias_act(void *ctx) {
  FusedAnchor *f = ctx;
  CublasCall call = {f->p, GEMM_BF16, false, false, false, f->c};
  return do_cublas(&call) && tile_launch(f->ew.kernel, f->grid, NULL, f->args, 5) == TILE_OK;
}

/* gemm_ws_bias_act (persistent) against cuBLAS's GEMM followed by
 * bias_act on its C, both C = gelu(A @ B + bias) in bf16; the fused C is
 * checked against the anchor's on the sampled rows (the anchor rounds the
 * product to bf16 before the epilogue, so they differ by about that). */
static void bench_fused_epilogue(GemmProblem *p) {
  Gpu *g = p->g;
  size_t n = (size_t)p->n;
  FusedAnchor f;
  memset(&f, 0, sizeof f);
  f.p = p;
  DBuf bias = {0};
  Rng r = {n * 7 + 1};
  bool ok = dbuf_alloc(g, &bias, "bias", "f32", n) && dev_alloc(g, &f.c, (size_t)p->m * n * 2);
  if (ok) {
    dbuf_fill(&bias, &r, -1, 1);
    ok = dbuf_upload(g, &bias);
    f.bias = bias.dev;
  }
  const char *ew_defs[] = {"T", "bf16", "ACT", FUSED_ACT, NULL};
  ok = ok && variant_build(g, "tests/kernels/bias_act.tile", ew_defs, &f.ew);
  TileGemm k;
  memset(&k, 0, sizeof k);
  const char *defs[] = {"T", "bf16", "TC", "bf16", "ACT", FUSED_ACT, NULL};
  ok = ok && variant_build_kernel(g, "lang/std/gemm_ws.tile", "gemm_ws_bias_act", defs, &k.v);
  double anchor_ms = -1, ms = -1;
  if (ok) {
    int64_t block = variant_const(&f.ew, "BLOCK", 2048);
    f.args[0] = tile_arg_ptr(f.c), f.args[1] = tile_arg_ptr(f.bias), f.args[2] = tile_arg_i32(p->m);
    f.args[3] = tile_arg_i32(p->n), f.args[4] = tile_arg_i32(p->n);
    f.grid[0] = (uint32_t)((p->n + block - 1) / block), f.grid[1] = (uint32_t)p->m, f.grid[2] = 1;
    k.t[0] = (tile_tensor){p->c, 2, {p->m, p->n}, {p->n, 1}};
    k.t[1] = (tile_tensor){p->a, 2, {p->m, p->k}, {p->k, 1}};
    k.t[2] = (tile_tensor){p->b, 2, {p->k, p->n}, {p->n, 1}};
    for (int i = 0; i < 3; i++) k.args[k.nargs++] = tile_arg_tensor(&k.t[i]);
    k.args[k.nargs++] = tile_arg_ptr(f.bias);
    k.args[k.nargs++] = tile_arg_i32(p->m);
    k.args[k.nargs++] = tile_arg_i32(p->n);
    k.args[k.nargs++] = tile_arg_i32(p->k);
    uint32_t tiles = (uint32_t)(((p->m + 127) / 128) * ((p->n + 255) / 256)), sms = (uint32_t)g->props.sm_count;
    k.grid[0] = tiles < sms ? tiles : sms, k.grid[1] = k.grid[2] = 1;
    if (!time_pair_ms(g, do_cublas_then_bias_act, &f, do_tile_gemm, &k, &anchor_ms, &ms)) anchor_ms = ms = -1;
  }
  char name[ROW_NAME_BYTES];
  snprintf(name, sizeof name, "gemm bf16 %s + bias + gelu: fused gemm_ws_bias_act / cuBLAS + bias_act", p->label);
  if (ms > 0 && anchor_ms > 0) {
    add_row(name, gemm_tflops(ms, p), gemm_tflops(anchor_ms, p), "TFLOP/s");
    double err = gemm_error(p, p->c, false, f.c, NULL, p->rows, GEMM_CHECK_ROWS);
    printf("  check: relative error %.2e against cuBLAS + bias_act on %d rows: %s\n", err, GEMM_CHECK_ROWS,
           gemm_error_ok(err) ? "ok" : "WRONG");
  } else {
    printf("%-44s failed\n", name);
  }
  gemm_poison(p, p->c, true);
  variant_free(&k.v);
  variant_free(&f.ew);
  dbuf_free(g, &bias);
  if (f.c) tile_mem_free(g->rt, f.c);
}

/* only: "MxNxK" runs that one of the shapes (for a profiler), NULL all. */
static void bench_gemm(Gpu *g, const char *only) {
  static const GemmShape shapes[] = {{8192, 8192, 8192, true}, {4096, 4096, 4096, false}, {16384, 2048, 8192, false}};
  CublasAnchor *cublas;
  char msg[1024];
  if (!cublas_anchor_open(&cublas, g->rt, msg, sizeof msg)) {
    printf("GEMM rows skipped: cuBLAS cannot be used (%s)\n", msg);
    return;
  }
  printf("GEMM anchors: %s\n", cublas_anchor_describe(cublas));
  GemmTables *tables = gemm_tables_new();
  if (!tables) printf("GEMM rows skipped: out of host memory\n");
  for (size_t i = 0; tables && i < sizeof shapes / sizeof shapes[0]; i++) {
    char name[64];
    snprintf(name, sizeof name, "%dx%dx%d", shapes[i].m, shapes[i].n, shapes[i].k);
    if (only && strcmp(only, name)) continue;
    GemmProblem p;
    if (gemm_problem_init(&p, g, cublas, tables, &shapes[i])) {
      if (gemm_anchor_bf16(&p)) {
        bench_gemm_kernels(&p);
        if (shapes[i].fp8) bench_fused_epilogue(&p); /* the first shape, 8192^3 */
      }
      if (p.fp8 && gemm_anchor_fp8(&p)) {
        bench_tile_gemm_fp8(&p, 128, 256, 128, 4);
        bench_tile_gemm_fp8(&p, 128, 256, 128, 3);
        bench_tile_gemm_fp8(&p, 128, 128, 128, 4);
      }
    }
    gemm_problem_free(&p);
  }
  free(tables);
  cublas_anchor_close(cublas);
}

/* `bench sweep`: bf16 GEMM over square sizes, the std GEMM's default
 * configurations (warp-specialized persistent, and the TMA kernel) each
 * beside cuBLAS: the points of bench/plot.py's lines. */
static void bench_sweep(Gpu *g) {
  static const int sizes[] = {1024, 2048, 3072, 4096, 6144, 8192};
  CublasAnchor *cublas;
  char msg[1024];
  if (!cublas_anchor_open(&cublas, g->rt, msg, sizeof msg)) {
    printf("sweep skipped: cuBLAS cannot be used (%s)\n", msg);
    return;
  }
  GemmTables *tables = gemm_tables_new();
  for (size_t i = 0; tables && i < sizeof sizes / sizeof sizes[0]; i++) {
    GemmShape shape = {sizes[i], sizes[i], sizes[i], false};
    GemmProblem p;
    if (gemm_problem_init(&p, g, cublas, tables, &shape) && gemm_anchor_bf16(&p)) {
      sweep_size = sizes[i];
      bench_tile_gemm_ws(&p, 128, 256, 64, 4, 2, true, false, 0, 1, false);
      bench_tile_gemm(&p, true, 128, 256, 64, 4, 8);
      sweep_size = 0;
    }
    gemm_problem_free(&p);
  }
  free(tables);
  cublas_anchor_close(cublas);
}

/* ---- launch cost ---- */

typedef int (*CuLaunchKernelFn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                unsigned shared, void *stream, void **params, void **extra);

/* A launch with two tensor descriptors (tests/kernels/tma_copy.tile with
 * n = 0: the kernel does nothing) through tile_launch, which checks both
 * descriptions and takes their encoded maps from its cache, against a bare
 * cuLaunchKernel given two 128-byte maps. */
static void bench_launch_tensors(Gpu *g) {
  Variant v;
  if (!variant_build(g, "tests/kernels/tma_copy.tile", NULL, &v)) return;
  uint64_t buf;
  tile_mem_alloc(g->rt, 64 * 64 * 4, &buf);
  tile_tensor t = {buf, 2, {64, 64}, {64, 1}};
  int32_t zero = 0, n = 0;
  float scale = 1;
  tile_arg args[6] = {tile_arg_tensor(&t), tile_arg_tensor(&t), tile_arg_i32(0), tile_arg_i32(0), tile_arg_f32(1),
                      tile_arg_i32(n)};
  const uint32_t grid[3] = {1, 1, 1};
  CuLaunchKernelFn bare = (CuLaunchKernelFn)tile_driver_function(g->rt, "cuLaunchKernel");
  void *fn = tile_kernel_handle(v.kernel);
  _Alignas(64) unsigned char maps[2][128] = {{0}};
  void *params[6] = {maps[0], maps[1], &zero, &zero, &scale, &n};
  unsigned shared = tile_kernel_get_info(v.kernel)->shared_bytes; /* its mbarriers are set up on entry */
  double best_tile = INFINITY, best_bare = INFINITY;
  for (int round = 0; round < 5; round++) {
    tile_synchronize(g->rt);
    double t0 = now_ms();
    for (int i = 0; i < LAUNCH_REPS; i++) tile_launch(v.kernel, grid, NULL, args, 6);
    double t1 = now_ms();
    tile_synchronize(g->rt);
    double t2 = now_ms();
    for (int i = 0; i < LAUNCH_REPS; i++) bare(fn, 1, 1, 1, 128, 1, 1, shared, NULL, params, NULL);
    double t3 = now_ms();
    tile_synchronize(g->rt);
    best_tile = fmin(best_tile, (t1 - t0) * 1e3 / LAUNCH_REPS);
    best_bare = fmin(best_bare, (t3 - t2) * 1e3 / LAUNCH_REPS);
  }
  add_row("launch host cost, 2 tensor descriptors (us)", best_tile, best_bare, "us");
  tile_mem_free(g->rt, buf);
  variant_free(&v);
}

static void bench_launch(Gpu *g) {
  Variant v;
  if (!variant_build(g, "tests/kernels/vector_add.tile", NULL, &v)) return;
  uint64_t buf;
  tile_mem_alloc(g->rt, 4096 * 4, &buf);
  int32_t n = 0; /* every lane masked off: the launch is all there is */
  tile_arg args[4] = {tile_arg_ptr(buf), tile_arg_ptr(buf), tile_arg_ptr(buf), tile_arg_i32(n)};
  const uint32_t grid[3] = {1, 1, 1};
  CuLaunchKernelFn bare = (CuLaunchKernelFn)tile_driver_function(g->rt, "cuLaunchKernel");
  void *fn = tile_kernel_handle(v.kernel);
  void *params[4] = {&buf, &buf, &buf, &n};
  double best_tile = INFINITY, best_bare = INFINITY;
  /* Alternate the two a few times; keep each one's best. */
  for (int round = 0; round < 5; round++) {
    tile_synchronize(g->rt);
    double t0 = now_ms();
    for (int i = 0; i < LAUNCH_REPS; i++) tile_launch(v.kernel, grid, NULL, args, 4);
    double t1 = now_ms();
    tile_synchronize(g->rt);
    double t2 = now_ms();
    for (int i = 0; i < LAUNCH_REPS; i++) bare(fn, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL);
    double t3 = now_ms();
    tile_synchronize(g->rt);
    best_tile = fmin(best_tile, (t1 - t0) * 1e3 / LAUNCH_REPS);
    best_bare = fmin(best_bare, (t3 - t2) * 1e3 / LAUNCH_REPS);
  }
  add_row("launch host cost, tile_launch (us)", best_tile, best_bare, "us");
  tile_mem_free(g->rt, buf);
  variant_free(&v);
  bench_launch_tensors(g);
}

/* ---- compile time ---- */

/* Lookups timed per kind of hit (the median). */
#define JIT_LOOKUP_REPS 101

static double jit_lookup_us(tile_jit *jit, const tile_jit_source *src, tile_jit_origin want, double *out_ms) {
  const void *cubin;
  size_t size;
  tile_jit_origin from;
  double t0 = now_ms();
  tile_status st = tile_jit_cubin(jit, src, &cubin, &size, &from);
  *out_ms = now_ms() - t0;
  return st == TILE_OK && from == want ? *out_ms * 1e3 : -1;
}

/* The JIT on the standard flash attention (flash_attention_ws, its
 * defaults: d128): a compile into an empty cache, then lookups from
 * memory and, through a second tile_jit, from disk. The anchor, Triton
 * 3.6's cold compile and cached call of an attention kernel, is measured
 * by bench/jit_anchor.py in the same run. */
static void bench_jit(Gpu *g) {
  char dir[] = "/tmp/tile-bench-jit-XXXXXX";
  if (!mkdtemp(dir)) return;
  size_t len;
  char *text = variant_read_source(g, "lang/std/flash_attention_ws.tile", &len);
  tile_jit_options o = {.cache_dir = dir};
  tile_jit *a = NULL, *b = NULL;
  tile_jit_source src = {.filename = "flash_attention_ws.tile", .source = text, .len = len, .kernel = "flash_attention_ws"};
  double ms = 0, cold = -1, mem[JIT_LOOKUP_REPS], disk[JIT_LOOKUP_REPS];
  bool ok = text && tile_jit_create(&o, &a) == TILE_OK;
  if (ok && jit_lookup_us(a, &src, TILE_JIT_COMPILED, &ms) >= 0) cold = ms;
  for (int r = 0; ok && r < JIT_LOOKUP_REPS; r++) mem[r] = jit_lookup_us(a, &src, TILE_JIT_MEMORY, &ms);
  for (int r = 0; ok && r < JIT_LOOKUP_REPS; r++) {
    ok = tile_jit_create(&o, &b) == TILE_OK;
    disk[r] = ok ? jit_lookup_us(b, &src, TILE_JIT_DISK, &ms) : -1;
    tile_jit_destroy(b);
  }
  if (ok && cold >= 0) {
    qsort(mem, JIT_LOOKUP_REPS, sizeof(double), cmp_double);
    qsort(disk, JIT_LOOKUP_REPS, sizeof(double), cmp_double);
    add_row("JIT flash_attention_ws, empty cache (ms)", cold, 0, "ms");
    add_row("JIT flash_attention_ws, from memory (us)", mem[JIT_LOOKUP_REPS / 2], 0, "us");
    add_row("JIT flash_attention_ws, from disk (us)", disk[JIT_LOOKUP_REPS / 2], 0, "us");
  } else {
    printf("JIT: %s\n", tile_last_error());
  }
  if (a) tile_jit_clear(a, NULL);
  tile_jit_destroy(a);
  rmdir(dir);
  free(text);
}

static void bench_compile(Gpu *g) {
  static const char *const files[] = {"lang/std/softmax.tile",  "lang/std/layernorm.tile", "lang/std/gemm.tile",
                                      "lang/std/gemm_tma.tile", "lang/std/gemm_fp8.tile",  "lang/std/flash_attention.tile",
                                      "lang/std/gemm_ws.tile"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    double t[COMPILE_REPS];
    for (int r = 0; r < COMPILE_REPS; r++) {
      Variant v;
      if (!variant_build(g, files[i], NULL, &v)) return;
      t[r] = v.compile_ms;
      variant_free(&v);
    }
    qsort(t, COMPILE_REPS, sizeof(double), cmp_double);
    char name[96];
    snprintf(name, sizeof name, "compile %s to cubin (ms)", strrchr(files[i], '/') + 1);
    add_row(name, t[COMPILE_REPS / 2], 0, "ms");
  }
  bench_jit(g);
}

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* TILE_BENCH_JSON=PATH: the final table also as JSON, for bench/plot.py:
 * {"device": ..., "rows": [{"name", "value", "unit", "anchor", "ratio"}]}
 * (anchor 0: measured by an anchor script, not here); rows of bench sweep
 * also have "size", "series" and "anchor_series", the points of lines. */
static void write_json(const Gpu *g, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) {
    printf("TILE_BENCH_JSON: cannot write %s\n", path);
    return;
  }
  fputs("{\"device\": ", f);
  json_string(f, g->props.name);
  fputs(", \"rows\": [", f);
  for (int i = 0; i < nrows; i++) {
    fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", f);
    json_string(f, rows[i].name);
    fprintf(f, ", \"value\": %.6g, \"unit\": ", rows[i].value);
    json_string(f, rows[i].unit);
    fprintf(f, ", \"anchor\": %.6g, \"ratio\": %.6g", rows[i].anchor, rows[i].ratio);
    if (rows[i].size > 0) {
      fprintf(f, ", \"size\": %.6g, \"series\": ", rows[i].size);
      json_string(f, rows[i].series);
      fputs(", \"anchor_series\": ", f);
      json_string(f, rows[i].anchor_series);
      fputs(", \"size_name\": ", f);
      json_string(f, rows[i].size_name ? rows[i].size_name : "size");
    }
    fputc('}', f);
  }
  fputs("\n]}\n", f);
  if (fclose(f) != 0) printf("TILE_BENCH_JSON: cannot write %s\n", path);
  else printf("rows written to %s\n", path);
}

/* `tile-gpu bench [SECTION]`: all sections, or only one of memory, gemm,
 * launch, attention, decode, prefill, mlp, compile, sweep (only on its
 * own); `bench gemm MxNxK` runs one of the GEMM shapes only (for a
 * profiler). */
int gpu_bench_main(int argc, char **argv, const char *source_root) {
  const char *only = argc > 0 ? argv[0] : NULL;
  Gpu g;
  if (!gpu_open(&g, source_root)) return EXIT_SKIP;
  if (!only || !strcmp(only, "memory")) {
    double copy = bench_copy_gbps(&g, (size_t)1 << 30);
    add_row("device-to-device copy, 1 GiB (GB/s)", copy, copy, "GB/s");
    bench_vector_add(&g, copy);
    const RowKernel softmax = {"softmax", "lang/std/softmax.tile", false};
    const RowKernel layernorm = {"layernorm", "lang/std/layernorm.tile", true};
    for (int n = 4096; n <= 32768; n *= 2) bench_rows(&g, copy, &softmax, n);
    for (int n = 4096; n <= 16384; n *= 2) bench_rows(&g, copy, &layernorm, n);
  }
  if (!only || !strcmp(only, "gemm")) bench_gemm(&g, only && argc > 1 ? argv[1] : NULL);
  if (!only || !strcmp(only, "launch")) bench_launch(&g);
  if (!only || !strcmp(only, "attention")) bench_attention(&g);
  if (!only || !strcmp(only, "decode")) bench_decode(&g);
  if (!only || !strcmp(only, "prefill")) bench_prefill(&g);
  if (!only || !strcmp(only, "mlp")) bench_mlp(&g);
  if (!only || !strcmp(only, "compile")) bench_compile(&g);
  if (only && !strcmp(only, "sweep")) bench_sweep(&g); /* not in the full run: its sizes repeat the gemm rows' */
  printf("\n| benchmark | value | anchor | ratio |\n|---|---|---|---|\n");
  for (int i = 0; i < nrows; i++)
    printf("| %s | %.2f %s | %.2f | %.3f |\n", rows[i].name, rows[i].value, rows[i].unit, rows[i].anchor, rows[i].ratio);
  const char *json = getenv("TILE_BENCH_JSON");
  if (json && *json) write_json(&g, json);
  gpu_close(&g);
  return 0;
}
