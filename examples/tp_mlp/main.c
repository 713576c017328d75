/* tp_mlp - the gated MLP split over several GPUs (runtime/mlp/tile_tp.h)
 * and checked against the same layer on one GPU.
 *
 *   tp_mlp [--gpus N] [--procs] [--tokens T] [--d-model D] [--d-ff F]
 *          [--chunks C] [--comm-sms S] [--nccl PATH] [--bench]
 *
 * Random bf16 inputs and weights; the reference is tile_mlp_forward on
 * GPU 0 with the whole weights (itself checked on a few rows against a
 * float64 computation on the host); then the tensor-parallel layer over N
 * GPUs (default: every GPU there is), each holding its slices, with the
 * down projection's all-reduce in C overlapped chunks and again in one
 * piece, every rank's output against the reference (relative error below
 * 1e-2). --procs runs one process per GPU (rank 0 makes the NCCL id and
 * hands it to the others through pipes) instead of one process driving
 * them all. --bench times the one-GPU layer, the split layer with and
 * without the overlap (CUDA events, median), and NCCL's all-reduce from 1
 * MB to 1 GB (bus bandwidth, as nccl-tests reports it), and prints a
 * table.
 *
 * Defaults: Llama-3-70B's MLP (8192 -> 28672 -> 8192, SwiGLU), 8192
 * tokens. NCCL is found as tile_nccl_open finds it (--nccl, then
 * TILE_NCCL_LIBRARY, then libnccl.so.2); one GPU needs none, and runs
 * the whole plan through a communicator of one rank where it has one (the
 * all-reduces then copy nothing, but every stream, event and chunk is
 * there). Exits 77
 * (skipped) on a machine without a GPU, 1 on a failed check or error. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tile_tp.h"

#define EXIT_SKIP 77
/* The relative error allowed for bf16 inputs and outputs. */
#define BF16_TOL 1e-2
/* Rows of the reference checked against float64 on the host. */
#define CHECK_ROWS 3
/* Timed calls (after WARMUP_CALLS), of which the median is reported. */
#define WARMUP_CALLS 2
#define TIMED_CALLS 10
/* The all-reduce sizes timed: 1 MiB, 4 MiB, ... 1 GiB. */
#define ALLREDUCE_MIN_BYTES ((size_t)1 << 20)
#define ALLREDUCE_MAX_BYTES ((size_t)1 << 30)
#define ALLREDUCE_STEP 4

typedef struct opts {
  int gpus; /* 0: every GPU */
  bool procs, bench;
  tile_mlp_problem p;
  tile_tp_mlp_options o;
  const char *nccl;
} opts;

/* The whole layer on the host (bf16 bits). */
typedef struct layer {
  uint16_t *x, *res, *wg, *wu, *wd;
} layer;

/* One rank's device side. */
typedef struct rank_bufs {
  tile_runtime *rt;
  tile_stream *stream;
  tile_tp_mlp_rank k;
} rank_bufs;

static uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float float_of(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void fill(uint16_t *v, size_t n, float r, uint64_t seed) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    v[i] = bf16_of(-r + 2 * r * (float)((s >> 11) * 0x1p-53));
  }
}

static int fail(const char *what) {
  fprintf(stderr, "tp_mlp: %s: %s\n", what, tile_last_error());
  return 1;
}

/* The same inputs in every process (the seeds are fixed). Weights scaled
 * by 2 / sqrt(K), K the dimension each is reduced over, so that values
 * stay near 1 through both projections. */
static bool make_layer(const tile_mlp_problem *p, layer *l) {
  size_t t = (size_t)p->tokens, dm = (size_t)p->d_model, dff = (size_t)p->d_ff;
  l->x = malloc(t * dm * 2), l->res = malloc(t * dm * 2);
  l->wg = malloc(dm * dff * 2), l->wu = malloc(dm * dff * 2), l->wd = malloc(dff * dm * 2);
  if (!l->x || !l->res || !l->wg || !l->wu || !l->wd) return false;
  fill(l->x, t * dm, 1.0f, 1), fill(l->res, t * dm, 1.0f, 2);
  fill(l->wg, dm * dff, 2.0f / sqrtf((float)dm), 3), fill(l->wu, dm * dff, 2.0f / sqrtf((float)dm), 4);
  fill(l->wd, dff * dm, 2.0f / sqrtf((float)dff), 5);
  return true;
}

static void free_layer(layer *l) { free(l->x), free(l->res), free(l->wg), free(l->wu), free(l->wd); }

static uint64_t upload(tile_runtime *rt, const void *host, size_t bytes) {
  uint64_t d = 0;
  if (tile_mem_alloc(rt, bytes, &d) != TILE_OK) return 0;
  if (host && tile_memcpy_htod(rt, d, host, bytes) != TILE_OK) return 0;
  return d;
}

/* Rank r of n: x and the residual whole, columns [r S, (r + 1) S) of
 * w_gate and w_up, the same rows of w_down (S = d_ff / n); y poisoned
 * (all ones: bf16 NaN). */
static bool upload_rank(rank_bufs *b, const tile_mlp_problem *p, const layer *l, int r, int n) {
  size_t t = (size_t)p->tokens, dm = (size_t)p->d_model, dff = (size_t)p->d_ff, s = dff / (size_t)n;
  uint16_t *g = malloc(dm * s * 2), *u = malloc(dm * s * 2);
  bool ok = g && u;
  for (size_t i = 0; ok && i < dm; i++) {
    memcpy(g + i * s, l->wg + i * dff + (size_t)r * s, s * 2);
    memcpy(u + i * s, l->wu + i * dff + (size_t)r * s, s * 2);
  }
  tile_tp_mlp_rank *k = &b->k;
  ok = ok && (k->x = upload(b->rt, l->x, t * dm * 2)) && (k->residual = upload(b->rt, l->res, t * dm * 2)) &&
       (k->w_gate = upload(b->rt, g, dm * s * 2)) && (k->w_up = upload(b->rt, u, dm * s * 2)) &&
       (k->w_down = upload(b->rt, l->wd + (size_t)r * s * dm, s * dm * 2)) &&
       (k->y = upload(b->rt, NULL, t * dm * 2)) && (k->workspace = upload(b->rt, NULL, t * s * 2)) &&
       tile_memset_d8(b->rt, k->y, 0xff, t * dm * 2) == TILE_OK && tile_stream_create(b->rt, &b->stream) == TILE_OK;
  k->stream = b->stream;
  free(g), free(u);
  return ok;
}

static void free_rank(rank_bufs *b) {
  uint64_t ptrs[] = {b->k.x, b->k.residual, b->k.w_gate, b->k.w_up, b->k.w_down, b->k.y, b->k.workspace};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
    tile_mem_free(b->rt, ptrs[i]);
  tile_stream_destroy(b->stream);
}

/* ||a - b|| / ||b|| over n bf16 values (NaN where a has one). */
static double rel_error(const uint16_t *a, const uint16_t *b, size_t n) {
  double d = 0, r = 0;
  for (size_t i = 0; i < n; i++) {
    double x = float_of(a[i]), y = float_of(b[i]);
    d += (x - y) * (x - y), r += y * y;
  }
  return r > 0 ? sqrt(d / r) : sqrt(d);
}

/* Row i of the layer in float64 on the host. */
static void host_row(const tile_mlp_problem *p, const layer *l, size_t i, double *out, double *h) {
  size_t dm = (size_t)p->d_model, dff = (size_t)p->d_ff;
  for (size_t f = 0; f < dff; f++)
    h[f] = 0;
  double *u = h + dff;
  for (size_t f = 0; f < dff; f++)
    u[f] = 0;
  for (size_t q = 0; q < dm; q++) {
    double xv = float_of(l->x[i * dm + q]);
    for (size_t f = 0; f < dff; f++)
      h[f] += xv * float_of(l->wg[q * dff + f]), u[f] += xv * float_of(l->wu[q * dff + f]);
  }
  for (size_t f = 0; f < dff; f++)
    h[f] = h[f] / (1 + exp(-h[f])) * u[f];
  for (size_t c = 0; c < dm; c++)
    out[c] = float_of(l->res[i * dm + c]);
  for (size_t f = 0; f < dff; f++)
    for (size_t c = 0; c < dm; c++)
      out[c] += h[f] * float_of(l->wd[f * dm + c]);
}

/* Milliseconds of run(ctx) on the ranks' streams: the latest rank's end
 * event from its start event, median of TIMED_CALLS. */
typedef bool (*run_fn)(void *ctx);
static double time_ms(rank_bufs *ranks, int n, run_fn run, void *ctx) {
  tile_event *a[TILE_NCCL_MAX_LOCAL_RANKS], *b[TILE_NCCL_MAX_LOCAL_RANKS];
  double ms[TIMED_CALLS];
  for (int r = 0; r < n; r++)
    tile_event_create(ranks[r].rt, &a[r]), tile_event_create(ranks[r].rt, &b[r]);
  bool ok = true;
  for (int i = 0; i < WARMUP_CALLS && ok; i++)
    ok = run(ctx);
  for (int r = 0; r < n && ok; r++)
    ok = tile_stream_synchronize(ranks[r].stream) == TILE_OK;
  for (int i = 0; i < TIMED_CALLS && ok; i++) {
    for (int r = 0; r < n; r++)
      tile_event_record(a[r], ranks[r].stream);
    ok = run(ctx);
    for (int r = 0; r < n; r++)
      tile_event_record(b[r], ranks[r].stream);
    ms[i] = 0;
    for (int r = 0; r < n && ok; r++) {
      float t = 0;
      ok = tile_event_synchronize(b[r]) == TILE_OK && tile_event_elapsed_ms(a[r], b[r], &t) == TILE_OK;
      if (t > ms[i]) ms[i] = t;
    }
  }
  for (int r = 0; r < n; r++)
    tile_event_destroy(a[r]), tile_event_destroy(b[r]);
  if (!ok) return -1;
  for (int i = 1; i < TIMED_CALLS; i++) /* insertion sort: ten values */
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
      double t = ms[j];
      ms[j] = ms[j - 1], ms[j - 1] = t;
    }
  return ms[TIMED_CALLS / 2];
}

/* ---- what one process does ---- */

typedef struct job {
  const opts *o;
  layer l;
  int local, world; /* ranks in this process, and in all */
  rank_bufs ranks[TILE_NCCL_MAX_LOCAL_RANKS];
  tile_tp_mlp *tp;
  tile_tp_mlp_options run_opts;
  tile_comm *comms[TILE_NCCL_MAX_LOCAL_RANKS];
  tile_nccl *nccl;
  /* the one-GPU reference (on local rank 0, when it is world rank 0) */
  tile_mlp *mlp;
  uint64_t ref_y, ref_x, ref_res, ref_wg, ref_wu, ref_wd, ref_ws;
  uint16_t *want;                             /* its output */
  uint64_t ar_buf[TILE_NCCL_MAX_LOCAL_RANKS]; /* the all-reduce timings' buffers */
  size_t ar_bytes;
} job;

static bool run_tp(void *ctx) {
  job *j = ctx;
  tile_tp_mlp_rank k[TILE_NCCL_MAX_LOCAL_RANKS];
  for (int r = 0; r < j->local; r++)
    k[r] = j->ranks[r].k;
  return tile_tp_mlp_forward(j->tp, &j->o->p, k, &j->run_opts) == TILE_OK;
}

static bool run_reference(void *ctx) {
  job *j = ctx;
  return tile_mlp_forward(j->mlp, &j->o->p, j->ref_y, j->ref_x, j->ref_wg, j->ref_wu, j->ref_wd, j->ref_res, j->ref_ws,
                          j->ranks[0].stream) == TILE_OK;
}

static bool run_allreduce(void *ctx) {
  job *j = ctx;
  bool ok = tile_nccl_group_start(j->nccl) == TILE_OK;
  for (int r = 0; r < j->local && ok; r++)
    ok = tile_all_reduce(j->comms[r], j->ar_buf[r], j->ar_buf[r], j->ar_bytes / 2, TILE_DTYPE_BF16, TILE_REDUCE_SUM,
                         j->ranks[r].stream) == TILE_OK;
  return tile_nccl_group_end(j->nccl) == TILE_OK && ok;
}

/* The reference on local rank 0's device: the whole layer, checked
 * against float64 on CHECK_ROWS rows. */
static int reference(job *j, double *host_err) {
  const tile_mlp_problem *p = &j->o->p;
  tile_runtime *rt = j->ranks[0].rt;
  size_t t = (size_t)p->tokens, dm = (size_t)p->d_model, dff = (size_t)p->d_ff;
  if (tile_mlp_create(rt, &j->mlp) != TILE_OK) return fail("tile_mlp_create");
  j->want = malloc(t * dm * 2);
  if (!j->want || !(j->ref_x = upload(rt, j->l.x, t * dm * 2)) || !(j->ref_res = upload(rt, j->l.res, t * dm * 2)) ||
      !(j->ref_wg = upload(rt, j->l.wg, dm * dff * 2)) || !(j->ref_wu = upload(rt, j->l.wu, dm * dff * 2)) ||
      !(j->ref_wd = upload(rt, j->l.wd, dff * dm * 2)) || !(j->ref_y = upload(rt, NULL, t * dm * 2)) ||
      !(j->ref_ws = upload(rt, NULL, tile_mlp_workspace_bytes(p))) ||
      tile_memset_d8(rt, j->ref_y, 0xff, t * dm * 2) != TILE_OK || !run_reference(j) ||
      tile_stream_synchronize(j->ranks[0].stream) != TILE_OK ||
      tile_memcpy_dtoh(rt, j->want, j->ref_y, t * dm * 2) != TILE_OK)
    return fail("the one-GPU layer");
  double *row = malloc(dm * sizeof *row), *h = malloc(2 * dff * sizeof *h), d = 0, r = 0;
  for (size_t c = 0; row && h && c < CHECK_ROWS && c < t; c++) {
    size_t i = c * (t - 1) / (CHECK_ROWS > 1 ? CHECK_ROWS - 1 : 1); /* first, middle, last rows */
    host_row(p, &j->l, i, row, h);
    for (size_t k = 0; k < dm; k++) {
      double g = float_of(j->want[i * dm + k]);
      d += (g - row[k]) * (g - row[k]), r += row[k] * row[k];
    }
  }
  free(row), free(h);
  *host_err = r > 0 ? sqrt(d / r) : INFINITY;
  return 0;
}

static void free_reference(job *j) {
  if (!j->mlp) return;
  uint64_t ptrs[] = {j->ref_y, j->ref_x, j->ref_res, j->ref_wg, j->ref_wu, j->ref_wd, j->ref_ws};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
    tile_mem_free(j->ranks[0].rt, ptrs[i]);
  tile_mlp_destroy(j->mlp);
  free(j->want);
}

/* Runs the split layer with `chunks`, compares every local rank's y with
 * the reference (want, where this process has it); the worst error. */
static int check_split(job *j, int chunks, double *err) {
  const tile_mlp_problem *p = &j->o->p;
  size_t n = (size_t)p->tokens * (size_t)p->d_model;
  j->run_opts = j->o->o;
  j->run_opts.chunks = chunks;
  for (int r = 0; r < j->local; r++)
    if (tile_memset_d8(j->ranks[r].rt, j->ranks[r].k.y, 0xff, n * 2) != TILE_OK) return fail("poisoning y");
  if (!run_tp(j)) return fail("tile_tp_mlp_forward");
  uint16_t *got = malloc(n * 2);
  *err = 0;
  for (int r = 0; r < j->local; r++) {
    if (!got || tile_stream_synchronize(j->ranks[r].stream) != TILE_OK ||
        tile_memcpy_dtoh(j->ranks[r].rt, got, j->ranks[r].k.y, n * 2) != TILE_OK) {
      free(got);
      return fail("the split layer");
    }
    if (j->want) {
      double e = rel_error(got, j->want, n);
      if (!(e <= *err)) *err = e; /* (NaN stays) */
    }
  }
  free(got);
  return 0;
}

/* Everything one process does with its local ranks (world rank of local
 * rank i: first_rank + i); id: the communicator's id in --procs mode. */
static int run_job(const opts *o, int first_rank, int local, int world, const tile_nccl_id *id) {
  job j;
  memset(&j, 0, sizeof j);
  j.o = o, j.local = local, j.world = world;
  int rc = 1;
  if (!make_layer(&o->p, &j.l)) {
    fprintf(stderr, "tp_mlp: out of host memory for the layer\n");
    goto done;
  }
  for (int r = 0; r < local; r++) {
    tile_config cfg;
    tile_config_init(&cfg);
    cfg.device = first_rank + r;
    if (tile_runtime_create(&cfg, &j.ranks[r].rt) != TILE_OK) {
      rc = fail("tile_runtime_create");
      goto done;
    }
  }
  /* One GPU runs the whole plan through an NCCL communicator of one rank
   * where NCCL is found, and the plain one-rank layer where it is not. */
  if (tile_nccl_open(o->nccl, &j.nccl) != TILE_OK) {
    if (world > 1) {
      rc = fail("NCCL is needed for more than one GPU");
      goto done;
    }
    printf("tp_mlp: no NCCL (%s): one GPU without it\n", tile_last_error());
    j.nccl = NULL;
  }
  if (j.nccl) {
    tile_runtime *rts[TILE_NCCL_MAX_LOCAL_RANKS];
    for (int r = 0; r < local; r++)
      rts[r] = j.ranks[r].rt;
    tile_status st = id ? tile_comm_init_rank(j.nccl, rts[0], world, id, first_rank, &j.comms[0])
                        : tile_comm_init_all(j.nccl, rts, local, j.comms);
    if (st != TILE_OK) {
      rc = fail("the NCCL communicator");
      goto done;
    }
  }
  for (int r = 0; r < local; r++)
    if (!upload_rank(&j.ranks[r], &o->p, &j.l, first_rank + r, world)) {
      rc = fail("uploading a rank's slices");
      goto done;
    }
  {
    tile_runtime *rts[TILE_NCCL_MAX_LOCAL_RANKS];
    for (int r = 0; r < local; r++)
      rts[r] = j.ranks[r].rt;
    if (tile_tp_mlp_create(rts, j.nccl ? j.comms : NULL, local, &j.tp) != TILE_OK) {
      rc = fail("tile_tp_mlp_create");
      goto done;
    }
  }
  double host_err = 0, err_chunked = 0, err_whole = 0;
  bool has_ref = first_rank == 0;
  if (has_ref && (rc = reference(&j, &host_err)) != 0) goto done;
  if ((rc = check_split(&j, o->o.chunks, &err_chunked)) != 0 || (rc = check_split(&j, 1, &err_whole)) != 0) goto done;
  bool pass = !has_ref || (host_err <= BF16_TOL && err_chunked <= BF16_TOL && err_whole <= BF16_TOL);
  const tile_mlp_problem *p = &o->p;
  if (has_ref)
    printf("tp_mlp: %d GPU%s%s%s, %d tokens, %d -> %d -> %d: one-GPU layer vs float64 (%d rows) %.3g; split over %d "
           "vs one GPU: %.3g with %d chunks, %.3g in one piece (%s)\n",
           world, world == 1 ? "" : "s", id ? " (a process each)" : "", j.nccl ? ", NCCL" : ", no NCCL", p->tokens,
           p->d_model, p->d_ff, p->d_model, CHECK_ROWS, host_err, world, err_chunked, j.nccl ? o->o.chunks : 1,
           err_whole, pass ? "PASS" : "FAIL");
  rc = pass ? 0 : 1;
  /* (timed whatever the check said: in --procs mode every rank must make
   * the same collective calls, and only rank 0 knows the verdict) */
  if (o->bench) {
    double flops = 6.0 * p->tokens * (double)p->d_model * p->d_ff;
    double one = has_ref ? time_ms(j.ranks, 1, run_reference, &j) : -1;
    j.run_opts = o->o, j.run_opts.chunks = 1;
    double whole = time_ms(j.ranks, local, run_tp, &j);
    j.run_opts = o->o;
    double chunked = time_ms(j.ranks, local, run_tp, &j);
    if (has_ref) {
      printf("\n| layer | ms | TFLOP/s | speed-up over one GPU |\n| --- | --- | --- | --- |\n");
      printf("| one GPU (tile_mlp_forward) | %.3f | %.1f | 1.00 |\n", one, flops / (one * 1e9));
      if (!j.nccl) {
        printf("| tile_tp.h on 1 GPU (no NCCL) | %.3f | %.1f | %.2f |\n", whole, flops / (whole * 1e9), one / whole);
      } else {
        printf("| %d GPU%s, one all-reduce | %.3f | %.1f | %.2f |\n", world, world == 1 ? "" : "s", whole,
               flops / (whole * 1e9), one / whole);
        printf("| %d GPU%s, %d chunks overlapped, %d SMs to NCCL | %.3f | %.1f | %.2f |\n", world,
               world == 1 ? "" : "s", o->o.chunks, o->o.comm_sms, chunked, flops / (chunked * 1e9), one / chunked);
      }
    }
    bool bufs = j.nccl != NULL;
    for (int r = 0; r < local && bufs; r++)
      bufs = (j.ar_buf[r] = upload(j.ranks[r].rt, NULL, ALLREDUCE_MAX_BYTES)) != 0;
    if (world > 1 && !bufs) fprintf(stderr, "tp_mlp: no memory for the all-reduce timings: %s\n", tile_last_error());
    if (bufs && has_ref)
      printf("\n| all-reduce (bf16, sum, %d rank%s) | us | algorithm GB/s | bus GB/s |\n| --- | --- | --- | --- |\n",
             world, world == 1 ? "" : "s");
    for (size_t b = ALLREDUCE_MIN_BYTES; bufs && b <= ALLREDUCE_MAX_BYTES; b *= ALLREDUCE_STEP) {
      j.ar_bytes = b;
      double ms = time_ms(j.ranks, local, run_allreduce, &j);
      double alg = (double)b / (ms * 1e6), bus = alg * 2.0 * (world - 1) / world; /* nccl-tests' busbw */
      if (has_ref) printf("| %zu MiB | %.1f | %.1f | %.1f |\n", b >> 20, ms * 1e3, alg, bus);
    }
    for (int r = 0; r < local; r++)
      tile_mem_free(j.ranks[r].rt, j.ar_buf[r]);
  }
done:
  tile_tp_mlp_destroy(j.tp);
  free_reference(&j);
  for (int r = 0; r < local; r++)
    free_rank(&j.ranks[r]);
  for (int r = 0; r < local; r++)
    tile_comm_destroy(j.comms[r]);
  tile_nccl_close(j.nccl);
  for (int r = 0; r < local; r++)
    tile_runtime_destroy(j.ranks[r].rt);
  free_layer(&j.l);
  return rc;
}

/* ---- one process per GPU ---- */

/* Rank 0 makes the id and writes it to every other rank's pipe; each
 * process then runs its rank. Nothing touches CUDA before the fork. */
static int run_procs(const opts *o) {
  int n = o->gpus, fds[TILE_NCCL_MAX_LOCAL_RANKS][2];
  pid_t pids[TILE_NCCL_MAX_LOCAL_RANKS];
  for (int r = 1; r < n; r++)
    if (pipe(fds[r]) != 0) return perror("tp_mlp: pipe"), 1;
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] < 0) return perror("tp_mlp: fork"), 1;
    if (pids[r] > 0) continue;
    tile_nccl_id id;
    if (r == 0) {
      tile_nccl *nccl;
      if (tile_nccl_open(o->nccl, &nccl) != TILE_OK || tile_nccl_unique_id(nccl, &id) != TILE_OK) _exit(fail("NCCL"));
      tile_nccl_close(nccl);
      for (int k = 1; k < n; k++)
        if (write(fds[k][1], &id, sizeof id) != (ssize_t)sizeof id) _exit(1);
    } else if (read(fds[r][0], &id, sizeof id) != (ssize_t)sizeof id) {
      fprintf(stderr, "tp_mlp: rank %d got no NCCL id from rank 0\n", r);
      _exit(1);
    }
    fflush(stdout);
    int rc = run_job(o, r, 1, n, &id);
    fflush(stdout);
    _exit(rc);
  }
  int rc = 0;
  for (int r = 0; r < n; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "tp_mlp: rank %d failed (status %d)\n", r, status);
      rc = 1;
    }
  }
  return rc;
}

static int usage(const char *why) {
  fprintf(stderr,
          "tp_mlp: %s\nusage: tp_mlp [--gpus N] [--procs] [--tokens T] [--d-model D] [--d-ff F] [--chunks C] "
          "[--comm-sms S] [--nccl PATH] [--bench]\n",
          why);
  return 2;
}

int main(int argc, char **argv) {
  opts o = {.p = {.tokens = 8192, .d_model = 8192, .d_ff = 28672, .act = TILE_MLP_SWIGLU},
            .o = {.chunks = TILE_TP_DEFAULT_CHUNKS, .comm_sms = TILE_TP_DEFAULT_COMM_SMS}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--procs"))
      o.procs = true;
    else if (!strcmp(a, "--bench"))
      o.bench = true;
    else if (!v)
      return usage("an option without its value");
    else if (!strcmp(a, "--nccl"))
      o.nccl = v, i++;
    else {
      char *end;
      long n = strtol(v, &end, 10);
      if (*end || n < 0 || n > 1 << 30) return usage("a value that is not a count");
      if (!strcmp(a, "--gpus"))
        o.gpus = (int)n;
      else if (!strcmp(a, "--tokens"))
        o.p.tokens = (int)n;
      else if (!strcmp(a, "--d-model"))
        o.p.d_model = (int)n;
      else if (!strcmp(a, "--d-ff"))
        o.p.d_ff = (int)n;
      else if (!strcmp(a, "--chunks"))
        o.o.chunks = (int)n;
      else if (!strcmp(a, "--comm-sms"))
        o.o.comm_sms = (int)n;
      else
        return usage("an unknown option");
      i++;
    }
  }
  if (o.gpus > TILE_NCCL_MAX_LOCAL_RANKS) return usage("--gpus is more than 16");
  if (o.procs && o.gpus < 1) return usage("--procs needs --gpus (no CUDA call may come before the processes fork)");
  if (tile_mlp_workspace_bytes(&o.p) == 0) { /* the problem's checks, with the message */
    tile_mlp_forward(NULL, &o.p, 0, 0, 0, 0, 0, 0, 0, NULL);
    return usage(tile_last_error());
  }
  if (o.gpus > 0 && o.p.d_ff % (o.gpus * 8)) {
    fprintf(stderr, "tp_mlp: d_ff (%d) does not split into %d slices of a multiple of 8\n", o.p.d_ff, o.gpus);
    return 2;
  }
  if (o.procs) return run_procs(&o);
  int count = 0;
  if (tile_device_count(NULL, &count) != TILE_OK || count == 0) {
    printf("tp_mlp: no GPU (%s): skipped\n", count == 0 && !*tile_last_error() ? "no device" : tile_last_error());
    return EXIT_SKIP;
  }
  if (o.gpus == 0) o.gpus = count > TILE_NCCL_MAX_LOCAL_RANKS ? TILE_NCCL_MAX_LOCAL_RANKS : count;
  if (o.gpus > count) {
    fprintf(stderr, "tp_mlp: --gpus %d needs %d GPUs; this machine has %d\n", o.gpus, o.gpus, count);
    return 1;
  }
  if (o.p.d_ff % (o.gpus * 8)) {
    fprintf(stderr, "tp_mlp: d_ff (%d) does not split into %d slices of a multiple of 8\n", o.p.d_ff, o.gpus);
    return 2;
  }
  return run_job(&o, 0, o.gpus, o.gpus, NULL);
}
