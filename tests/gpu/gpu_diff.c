/* gpu_diff.c - `tile-gpu diff`: a differential test of the GPU back end.
 *
 *   tile-gpu diff [--count N] [--seed S] [--jobs J] [--kernels K] [--seconds T]
 *                 [--out DIR] [--reduce R] [--reduce-seconds T] [--hang-seconds T]
 *                 [--skip SEED]... [--features MASK] [--only KERNEL] [--dry-run] [--verbose]
 *
 * Generates N programs (tests/gen/kernel_gen.h) of K kernels each, program
 * i from seed S + i, on J threads. Each program is compiled once (tc_compile
 * and tc_generate with the default linker, so one cubin holds its K
 * kernels), and each kernel runs on the GPU through libtile and in the
 * interpreter on the same inputs, outputs poisoned first, as gpu_tests.c's
 * run_case does for the hand-written kernels. Every buffer is compared as
 * its tag says (bit for bit where the spec says the GPU is identical,
 * within a tolerance from the spec where it is not), and the bytes after
 * every buffer are checked for stray writes.
 *
 * The buffers of a program's kernels live in one device allocation per
 * thread (each buffer 256-byte aligned and followed by a guard band), so
 * one copy each way and one synchronization serve the K launches.
 *
 * A kernel with an unexplained difference is written to DIR/seed-S-kK/
 * (its source, description, inputs, and both results of the buffers that
 * differ), then reduced (kg_reduce: lines and blocks deleted while the
 * same buffer still differs on the GPU) and the reproducer printed. The
 * last line is the summary:
 *
 *   diff: N programs, M kernels, D differences (E explained)
 *
 * D counts kernels with any bit difference, E those whose every
 * difference is one the spec allows (tolerance tags). Exits 1 when a
 * difference is unexplained or a program fails to compile, run in the
 * interpreter, or launch; 77 without a GPU. With --seconds T no new
 * program is started after T seconds (and N is unlimited unless given) (then the reductions run, at most
 * --reduce-seconds more). --only KERNEL runs one kernel of each program,
 * compiled alone (to find which kernel of a program faulted). --dry-run
 * needs no GPU: the kernels are compiled to PTX only, and the interpreter
 * running the -O0 compilation on the device-side buffers plays the GPU,
 * which checks this driver itself (layout, guards, comparison, reduction).
 * A GPU run that does not finish in --hang-seconds (DIFF_HANG_SECONDS)
 * stops the process (naming the program): a hung kernel cannot be taken
 * back; --skip SEED leaves such a program out of later runs. The
 * reductions (of the first --reduce records) run on up to --jobs threads
 * for at most --reduce-seconds.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu_common.h"
#include "kernel_gen.h"

/* Programs and kernels per program when not given: 16 kernels per
 * compilation amortize LLVM's and the module loader's fixed costs. */
#define DIFF_DEFAULT_COUNT 1000
#define DIFF_DEFAULT_KERNELS 16
#define DIFF_MAX_KERNELS 128
#define DIFF_MAX_JOBS 128
/* Device buffers start on 256 bytes (what cuMemAlloc gives, more than any
 * align(N) fact) and are followed by this many guard bytes. */
#define DIFF_ALIGN 256
#define DIFF_GUARD 256
#define DIFF_GUARD_BYTE 0xA5
/* Execution limit of an interpreter run: generated kernels need far
 * less; a reduced one that loops forever stops here. */
#define DIFF_MAX_STEPS 200000000ULL
/* Unexplained differences remembered for the report and the reductions. */
#define DIFF_MAX_RECORDS 64
/* Kernels reduced by default, predicate checks per reduction, and the time
 * the reductions may take after the main run. */
#define DIFF_DEFAULT_REDUCE 3
#define DIFF_REDUCE_CHECKS 250
#define DIFF_REDUCE_SECONDS 180
/* A GPU run (upload, launches, synchronization, download) that takes
 * longer than this has hung (a loop that does not stop?): the process
 * stops, naming the program, since the GPU cannot be recovered. */
#define DIFF_HANG_SECONDS 60
/* Seeds --skip may name (programs known to hang, while that is fixed). */
#define DIFF_MAX_SKIP 16
/* Progress lines, one per this many programs. */
#define DIFF_PROGRESS_EVERY 50
/* Distinct reasons of explained differences counted in the summary. */
#define DIFF_MAX_REASONS 8

typedef struct Options {
  char out_buf[1024]; /* the default of out */
  long count;
  uint64_t seed;
  int jobs, kernels, reduce;
  double seconds;
  const char *out;
  unsigned features;
  bool verbose;
  const char *only; /* run only this kernel of each program, compiled alone */
  bool dry_run;     /* no GPU: the interpreter at -O0 plays the device */
  double reduce_seconds, hang_seconds;
  uint64_t skip[DIFF_MAX_SKIP]; /* seeds not run (one that hangs the GPU) */
  int nskip;
} Options;

typedef enum Outcome { OUT_SAME, OUT_EXPLAINED, OUT_DIFFERENT, OUT_INTERP_ERROR, OUT_LAUNCH_ERROR } Outcome;

typedef struct Record {
  uint64_t seed;
  int kernel;
  char buffer[KG_NAME_BYTES];
  char dir[512];
  char *reduced; /* malloc'd, after the reduction */
} Record;

typedef struct Shared {
  const Options *o;
  Gpu *g;
  KgConfig cfg;
  pthread_mutex_t lock;
  long next;
  bool fault; /* the GPU context is gone: stop */
  double t0;
  long programs, kernels, differences, explained, compile_errors, interp_errors, launch_errors;
  const char *reasons[DIFF_MAX_REASONS];
  long reason_counts[DIFF_MAX_REASONS];
  Record records[DIFF_MAX_RECORDS];
  int nrecords;
  /* the watchdog: when each thread's current GPU run started (0: none),
   * and its program */
  double gpu_since[DIFF_MAX_JOBS];
  uint64_t gpu_seed[DIFF_MAX_JOBS];
  int finished; /* threads done */
  int next_reduce; /* the next record to reduce */
  double reduce_deadline_ms; /* no reduction check after this (now_ms) */
} Shared;

/* One thread's device memory and its host image. */
typedef struct Arena {
  uint64_t dev;
  unsigned char *host;
  size_t cap;
  int worker; /* the thread's index, for the hang watchdog */
} Arena;

/* The result of one kernel. */
typedef struct KernelResult {
  Outcome outcome;
  char buffer[KG_NAME_BYTES]; /* the first buffer beyond its tag */
  const char *why;            /* an explained difference's reason */
  char detail[1536];
} KernelResult;

/* The seed of a kernel's inputs: from the program's seed and the kernel's
 * index, which the generator writes into its name ("k3"), so that a
 * kernel compiled alone (for the reduction) gets the same inputs. */
static uint64_t data_seed(uint64_t seed, const KgKernel *k) {
  return seed * 0x100000001B3ULL + (uint64_t)atoi(k->name + 1);
}

/* Grows the arena to hold `bytes` (device memory only on a GPU). */
static bool arena_reserve(Gpu *g, Arena *a, size_t bytes) {
  if (bytes <= a->cap) return true;
  if (a->dev) tile_mem_free(g->rt, a->dev);
  free(a->host);
  a->dev = 0;
  a->cap = bytes * 2;
  a->host = malloc(a->cap);
  if (!a->host || (g->rt && tile_mem_alloc(g->rt, a->cap, &a->dev) != TILE_OK)) {
    printf("  device allocation of %zu bytes failed: %s\n", a->cap, tile_last_error());
    a->dev = 0, a->cap = 0;
    return false;
  }
  return true;
}

static void arena_free(Gpu *g, Arena *a) {
  if (a->dev) tile_mem_free(g->rt, a->dev);
  free(a->host);
  memset(a, 0, sizeof *a);
}

/* A compiled program: the compilation the interpreter runs, the loaded
 * module; for --dry-run, instead of the module, a compilation without
 * the optimizer that the interpreter runs as "the device". */
typedef struct Compiled {
  tc_compilation *c, *dry;
  tile_module *mod;
} Compiled;

static void compiled_free(Compiled *cc) {
  if (cc->mod) tile_module_unload(cc->mod);
  tc_free(cc->c);
  if (cc->dry) tc_free(cc->dry);
  memset(cc, 0, sizeof *cc);
}

/* The launch argument of parameter p (by its compiled kind). */
static tile_arg launch_arg(const tc_param *tp, const KgParam *p, uint64_t dev) {
  if (tp->kind == TC_PARAM_PTR) return tile_arg_ptr(dev);
  if (tp->kind == TC_PARAM_FLOAT) return tile_arg_f64(p->fvalue);
  if (tp->kind == TC_PARAM_BOOL) return tile_arg_bool(p->ivalue & 1);
  return tp->elem_signed ? tile_arg_i64(p->ivalue) : tile_arg_u64((uint64_t)p->ivalue);
}

static int param_of(const KgKernel *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (!strcmp(k->params[i].name, name)) return i;
  return -1;
}

static bool guard_intact(const unsigned char *at) {
  for (int i = 0; i < DIFF_GUARD; i++)
    if (at[i] != DIFF_GUARD_BYTE) return false;
  return true;
}

/* Writes a file under dir (best effort: a reproducer is a convenience). */
static void write_file(const char *dir, const char *name, const void *data, size_t bytes) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(data, 1, bytes, f);
  fclose(f);
}

/* The buffers of one kernel: host copies (the interpreter's), offsets in
 * the arena. */
typedef struct KernelBufs {
  void *data[KG_MAX_PARAMS];
  size_t offset[KG_MAX_PARAMS];
  bool interp_ok;
} KernelBufs;

/* Compares kernel k's buffers after both runs. */
static void compare_kernel(const KgKernel *k, const KernelBufs *b, const unsigned char *image, KernelResult *r) {
  int len = 0;
  for (int i = 0; i < k->nparams; i++) {
    const KgParam *p = &k->params[i];
    if (p->role == KG_SCALAR) continue;
    size_t bytes = kg_param_bytes(p);
    KgDiff d;
    KgVerdict v = kg_compare(p, b->data[i], image + b->offset[i], &d);
    bool guard = guard_intact(image + b->offset[i] + bytes);
    if (!guard) v = KG_DIFFERENT;
    if (v == KG_SAME) continue;
    if (v == KG_DIFFERENT && r->outcome != OUT_DIFFERENT) {
      r->outcome = OUT_DIFFERENT;
      snprintf(r->buffer, sizeof r->buffer, "%s", p->name);
    } else if (v == KG_EXPLAINED && r->outcome == OUT_SAME) {
      r->outcome = OUT_EXPLAINED;
      r->why = p->why;
    }
    if (v == KG_DIFFERENT && len < (int)sizeof r->detail - 200)
      len += snprintf(r->detail + len, sizeof r->detail - (size_t)len, "%s %s[%zu]: %s%zu of %zu elements differ, %zu beyond the tag (%s)\n%s",
                      p->name, p->elem, p->length, guard ? "" : "WRITTEN PAST ITS END; ", d.differing, p->length,
                      d.beyond, p->cmp == KG_CMP_EXACT ? "exact" : "tolerance", d.detail);
  }
}

/* The directory of a kernel's reproducer. */
static void reproducer_dir(const Shared *sh, uint64_t seed, const KgKernel *k, char *dir, size_t size) {
  snprintf(dir, size, "%s/seed-%llu-%s", sh->o->out, (unsigned long long)seed, k->name);
}

/* Writes both results of every buffer of k that differs beyond its tag. */
static void save_results(const Shared *sh, uint64_t seed, const KgKernel *k, const KernelBufs *b,
                         const unsigned char *image) {
  char dir[512], name[64];
  reproducer_dir(sh, seed, k, dir, sizeof dir);
  mkdir(sh->o->out, 0777);
  mkdir(dir, 0777);
  for (int i = 0; i < k->nparams; i++) {
    const KgParam *p = &k->params[i];
    KgDiff d;
    if (p->role == KG_SCALAR || kg_compare(p, b->data[i], image + b->offset[i], &d) != KG_DIFFERENT) continue;
    snprintf(name, sizeof name, "%s.interp.bin", p->name);
    write_file(dir, name, b->data[i], kg_param_bytes(p));
    snprintf(name, sizeof name, "%s.gpu.bin", p->name);
    write_file(dir, name, image + b->offset[i], kg_param_bytes(p));
  }
}

/* Launches kernel k of cc with its buffers at the arena's offsets. */
static void launch_kernel(const Compiled *cc, const Arena *a, const KgKernel *k, const KernelBufs *b, KernelResult *r) {
  int ki = tc_kernel_find(cc->c, k->name), n = ki < 0 ? 0 : tc_param_count(cc->c, ki);
  tile_kernel *tk = NULL;
  if (ki < 0 || tile_kernel_get(cc->mod, k->name, &tk) != TILE_OK) {
    r->outcome = OUT_LAUNCH_ERROR;
    snprintf(r->detail, sizeof r->detail, "no kernel %s in the module: %s\n", k->name, tile_last_error());
    return;
  }
  tile_arg args[KG_MAX_PARAMS];
  bool described = n <= KG_MAX_PARAMS;
  for (int t = 0; t < n && described; t++) {
    tc_param tp = tc_param_get(cc->c, ki, t);
    int i = param_of(k, tp.name);
    if (i < 0) described = false;
    else args[t] = launch_arg(&tp, &k->params[i], a->dev + b->offset[i]);
  }
  uint32_t grid[3] = {(uint32_t)k->grid[0], (uint32_t)k->grid[1], (uint32_t)k->grid[2]};
  if (!described || tile_launch(tk, grid, NULL, args, n) != TILE_OK) {
    r->outcome = OUT_LAUNCH_ERROR;
    snprintf(r->detail, sizeof r->detail, "launch: %s\n",
             described ? tile_last_error() : "the kernel's parameters do not match its description");
  }
}

/* --dry-run: the -O0 compilation in the interpreter on the arena's image
 * plays the device. */
static void dry_run_kernel(const Compiled *cc, Arena *a, const KgKernel *k, const KernelBufs *b, KernelResult *r) {
  void *data[KG_MAX_PARAMS] = {0};
  for (int i = 0; i < k->nparams; i++)
    if (b->data[i]) data[i] = a->host + b->offset[i];
  char *err = NULL;
  if (!kg_interpret(cc->dry, k, data, DIFF_MAX_STEPS, &err)) {
    r->outcome = OUT_LAUNCH_ERROR;
    snprintf(r->detail, sizeof r->detail, "dry run at -O0: %s\n", err ? err : "?");
  }
  free(err);
}

/* Marks the start (seed) or the end (0) of a thread's GPU run. */
static void watch(Shared *sh, const Arena *a, uint64_t seed) {
  pthread_mutex_lock(&sh->lock);
  sh->gpu_since[a->worker] = seed ? now_ms() : 0;
  sh->gpu_seed[a->worker] = seed;
  pthread_mutex_unlock(&sh->lock);
}

/* Runs kernels[0..nk-1] of a compiled program on the GPU (or, dry, in the
 * interpreter at -O0) and in the interpreter; false when the GPU context
 * failed (nothing more can run). With `save`, the results of buffers that
 * differ are written to the kernel's reproducer directory. */
static bool run_kernels(Shared *sh, Arena *a, const KgKernel *kernels, int nk, const Compiled *cc, uint64_t seed,
                        bool save, KernelResult *res) {
  Gpu *g = sh->g;
  KernelBufs *bufs = calloc((size_t)nk, sizeof *bufs);
  memset(res, 0, sizeof *res * (size_t)nk);
  size_t total = 0;
  for (int j = 0; j < nk; j++)
    for (int i = 0; i < kernels[j].nparams; i++) {
      if (kernels[j].params[i].role == KG_SCALAR) continue;
      total = (total + DIFF_ALIGN - 1) / DIFF_ALIGN * DIFF_ALIGN;
      bufs[j].offset[i] = total;
      total += kg_param_bytes(&kernels[j].params[i]) + DIFF_GUARD;
    }
  bool ok = arena_reserve(g, a, total + DIFF_ALIGN);
  if (ok) memset(a->host, DIFF_GUARD_BYTE, total);
  for (int j = 0; ok && j < nk; j++) {
    const KgKernel *k = &kernels[j];
    kg_buffers_alloc(k, data_seed(seed, k), bufs[j].data);
    for (int i = 0; i < k->nparams; i++)
      if (bufs[j].data[i]) memcpy(a->host + bufs[j].offset[i], bufs[j].data[i], kg_param_bytes(&k->params[i]));
    char *err = NULL;
    bufs[j].interp_ok = kg_interpret(cc->c, k, bufs[j].data, DIFF_MAX_STEPS, &err);
    if (!bufs[j].interp_ok) {
      res[j].outcome = OUT_INTERP_ERROR;
      snprintf(res[j].detail, sizeof res[j].detail, "interpreter: %s\n", err ? err : "?");
    }
    free(err);
  }
  bool alive = true;
  if (cc->dry) {
    for (int j = 0; ok && j < nk; j++)
      if (bufs[j].interp_ok) dry_run_kernel(cc, a, &kernels[j], &bufs[j], &res[j]);
  } else {
    watch(sh, a, seed);
    ok = ok && tile_memcpy_htod(g->rt, a->dev, a->host, total) == TILE_OK;
    for (int j = 0; ok && j < nk; j++)
      if (bufs[j].interp_ok) launch_kernel(cc, a, &kernels[j], &bufs[j], &res[j]);
    alive = !ok || tile_synchronize(g->rt) == TILE_OK;
    if (!alive) {
      printf("GPU error while running kernels %s..%s of seed %llu (the context is lost; stopping): %s\n"
             "  find the kernel with: tile-gpu diff --seed %llu --count 1 --jobs 1 --only KERNEL, for each of them\n",
             kernels[0].name, kernels[nk - 1].name, (unsigned long long)seed, tile_last_error(), (unsigned long long)seed);
      for (int j = 0; j < nk; j++) {
        res[j].outcome = OUT_LAUNCH_ERROR;
        snprintf(res[j].detail, sizeof res[j].detail, "lost with the GPU context\n");
      }
    }
    ok = ok && alive && tile_memcpy_dtoh(g->rt, a->host, a->dev, total) == TILE_OK;
    watch(sh, a, 0);
  }
  for (int j = 0; ok && j < nk; j++) {
    if (res[j].outcome == OUT_SAME) compare_kernel(&kernels[j], &bufs[j], a->host, &res[j]);
    if (save && res[j].outcome == OUT_DIFFERENT) save_results(sh, seed, &kernels[j], &bufs[j], a->host);
  }
  for (int j = 0; j < nk; j++) kg_buffers_free(&kernels[j], bufs[j].data);
  free(bufs);
  return alive;
}

/* Compiles source (one kernel of it with `only`) and loads its module;
 * false (with the diagnostics in *diags, malloc'd) when that fails. */
static bool compile_source(Shared *sh, const char *src, size_t len, const char *only, Compiled *cc, char **diags) {
  tc_options opt = {0};
  opt.kernel = only;
  memset(cc, 0, sizeof *cc);
  *diags = NULL;
  cc->c = tc_compile("gen.tile", src, len, &opt);
  tc_codegen_options go = {.linker = sh->o->dry_run ? TC_LINKER_NONE : TC_LINKER_AUTO};
  size_t size;
  const void *cubin;
  bool ok = tc_error_count(cc->c) == 0 && tc_generate(cc->c, &go);
  if (ok && sh->o->dry_run) {
    opt.no_opt = true;
    cc->dry = tc_compile("gen.tile", src, len, &opt);
    ok = tc_error_count(cc->dry) == 0;
  } else if (ok) {
    ok = (cubin = tc_cubin(cc->c, &size)) && tile_module_load(sh->g->rt, cubin, size, &cc->mod) == TILE_OK;
  }
  if (ok) return true;
  *diags = strdup(tc_error_count(cc->c) ? tc_diagnostics(cc->c)
                  : cc->dry && tc_error_count(cc->dry) ? tc_diagnostics(cc->dry) : tile_last_error());
  compiled_free(cc);
  return false;
}

/* Saves the kernel, its inputs and both results of the differing buffers
 * under the output directory; returns the directory. */
static void save_reproducer(Shared *sh, const KgProgram *p, int kj, Record *rec, const KernelResult *r) {
  const KgKernel *k = &p->kernels[kj];
  reproducer_dir(sh, p->seed, k, rec->dir, sizeof rec->dir);
  mkdir(sh->o->out, 0777);
  mkdir(rec->dir, 0777);
  size_t len;
  char *src = kg_kernel_source(p, kj, &len), *desc = kg_describe(k);
  write_file(rec->dir, "kernel.tile", src, len);
  char *report = NULL;
  if (asprintf(&report, "seed %llu kernel %s (tile-gpu diff --seed %llu --count 1 --kernels %d)\n%s\n%s",
               (unsigned long long)p->seed, k->name, (unsigned long long)p->seed, p->nkernels, desc, r->detail) >= 0) {
    write_file(rec->dir, "report.txt", report, strlen(report));
    free(report);
  }
  void *data[KG_MAX_PARAMS];
  kg_buffers_alloc(k, data_seed(p->seed, k), data);
  for (int i = 0; i < k->nparams; i++) {
    if (!data[i]) continue;
    char name[64];
    snprintf(name, sizeof name, "%s.in.bin", k->params[i].name);
    write_file(rec->dir, name, data[i], kg_param_bytes(&k->params[i]));
  }
  kg_buffers_free(k, data);
  free(src);
  free(desc);
}

static void count_reason(Shared *sh, const char *why) {
  for (int i = 0; i < DIFF_MAX_REASONS; i++) {
    if (!sh->reasons[i]) sh->reasons[i] = why;
    if (sh->reasons[i] == why) {
      sh->reason_counts[i]++;
      return;
    }
  }
}

/* Records the results of a program's kernels (under the lock). */
static void record_results(Shared *sh, const KgProgram *p, const int *which, int nk, const KernelResult *res) {
  pthread_mutex_lock(&sh->lock);
  for (int j = 0; j < nk; j++) {
    const KernelResult *r = &res[j];
    if (r->outcome == OUT_INTERP_ERROR) sh->interp_errors++;
    else if (r->outcome == OUT_LAUNCH_ERROR) sh->launch_errors++;
    else sh->kernels++;
    if (r->outcome == OUT_EXPLAINED || r->outcome == OUT_DIFFERENT) sh->differences++;
    if (r->outcome == OUT_EXPLAINED) sh->explained++, count_reason(sh, r->why);
    if (r->outcome == OUT_EXPLAINED && sh->o->verbose)
      printf("seed %llu %s: explained difference (%s)\n", (unsigned long long)p->seed, p->kernels[which[j]].name, r->why);
    if (r->outcome == OUT_SAME || r->outcome == OUT_EXPLAINED) continue;
    printf("seed %llu %s: %s%s", (unsigned long long)p->seed, p->kernels[which[j]].name,
           r->outcome == OUT_DIFFERENT ? "unexplained difference\n" : "", r->detail);
    if (sh->nrecords < DIFF_MAX_RECORDS) {
      Record *rec = &sh->records[sh->nrecords++];
      memset(rec, 0, sizeof *rec);
      rec->seed = p->seed, rec->kernel = which[j];
      snprintf(rec->buffer, sizeof rec->buffer, "%s", r->buffer);
      save_reproducer(sh, p, which[j], rec, r);
    }
  }
  pthread_mutex_unlock(&sh->lock);
}

/* Compiles and runs one program: all kernels in one module, or, when that
 * does not compile (or with --only), each kernel on its own (to find the
 * one that fails). */
static bool process_program(Shared *sh, Arena *a, const KgProgram *p) {
  int nk = p->nkernels, which[DIFF_MAX_KERNELS];
  KernelResult *res = calloc((size_t)nk, sizeof *res);
  Compiled cc;
  char *diags = NULL;
  bool alive = true;
  if (!sh->o->only && compile_source(sh, p->source, p->len, NULL, &cc, &diags)) {
    for (int j = 0; j < nk; j++) which[j] = j;
    alive = run_kernels(sh, a, p->kernels, nk, &cc, p->seed, true, res);
    record_results(sh, p, which, nk, res);
    compiled_free(&cc);
  } else {
    free(diags);
    for (int j = 0; j < nk && alive; j++) {
      if (sh->o->only && strcmp(sh->o->only, p->kernels[j].name)) continue;
      if (!compile_source(sh, p->source, p->len, p->kernels[j].name, &cc, &diags)) {
        pthread_mutex_lock(&sh->lock);
        sh->compile_errors++;
        printf("seed %llu %s: does not compile:\n%s\n", (unsigned long long)p->seed, p->kernels[j].name, diags);
        pthread_mutex_unlock(&sh->lock);
        free(diags);
        continue;
      }
      which[0] = j;
      alive = run_kernels(sh, a, &p->kernels[j], 1, &cc, p->seed, true, res);
      record_results(sh, p, which, 1, res);
      compiled_free(&cc);
    }
  }
  free(res);
  return alive;
}

static double elapsed_s(const Shared *sh) { return (now_ms() - sh->t0) / 1e3; }

typedef struct Worker {
  Shared *sh;
  int index;
} Worker;

static void *worker(void *arg) {
  Shared *sh = ((Worker *)arg)->sh;
  Arena a = {0};
  a.worker = ((Worker *)arg)->index;
  for (;;) {
    pthread_mutex_lock(&sh->lock);
    bool done = sh->fault || sh->next >= sh->o->count || (sh->o->seconds > 0 && elapsed_s(sh) > sh->o->seconds);
    long i = done ? 0 : sh->next++;
    pthread_mutex_unlock(&sh->lock);
    if (done) break;
    bool skipped = false;
    for (int j = 0; j < sh->o->nskip; j++) skipped |= sh->o->skip[j] == sh->o->seed + (uint64_t)i;
    if (skipped) continue;
    KgProgram *p = kg_generate(sh->o->seed + (uint64_t)i, &sh->cfg);
    bool alive = process_program(sh, &a, p);
    kg_free(p);
    pthread_mutex_lock(&sh->lock);
    if (!alive) sh->fault = true;
    if (++sh->programs % DIFF_PROGRESS_EVERY == 0)
      printf("  %ld programs, %ld kernels, %ld differences (%ld explained), %.0f s\n", sh->programs, sh->kernels,
             sh->differences, sh->explained, elapsed_s(sh));
    fflush(stdout);
    pthread_mutex_unlock(&sh->lock);
  }
  arena_free(sh->g, &a);
  pthread_mutex_lock(&sh->lock);
  sh->finished++;
  pthread_mutex_unlock(&sh->lock);
  return NULL;
}

/* Waits until `threads` threads have finished, stopping the process when
 * a GPU run hangs. */
static void wait_for_threads(Shared *sh, int threads) {
  for (;;) {
    sleep(1);
    pthread_mutex_lock(&sh->lock);
    bool done = sh->finished >= threads;
    for (int i = 0; i < sh->o->jobs && !done; i++) {
      if (!sh->gpu_since[i] || now_ms() - sh->gpu_since[i] < sh->o->hang_seconds * 1e3) continue;
      printf("GPU hang: the kernels of seed %llu did not finish in %d s (a loop that does not stop?); stopping.\n"
             "  find the kernel with: tile-gpu diff --seed %llu --count 1 --jobs 1 --only KERNEL, for each of them\n"
             "diff: %ld programs, %ld kernels, %ld differences (%ld explained)\n",
             (unsigned long long)sh->gpu_seed[i], (int)sh->o->hang_seconds, (unsigned long long)sh->gpu_seed[i], sh->programs,
             sh->kernels, sh->differences, sh->explained);
      fflush(stdout);
      _exit(1);
    }
    pthread_mutex_unlock(&sh->lock);
    if (done) return;
  }
}

/* ---- reduction ---- */

typedef struct Probe {
  Shared *sh;
  Arena *a;
  const KgKernel *k;
  uint64_t seed;
  const char *buffer;
  double deadline_ms; /* no more checks after this (now_ms) */
} Probe;

/* Still the same unexplained difference in the same buffer on the GPU? */
static bool still_differs(const char *src, size_t len, void *user) {
  Probe *pr = user;
  if (pr->sh->fault || now_ms() > pr->deadline_ms) return false;
  Compiled cc;
  char *diags;
  if (!compile_source(pr->sh, src, len, NULL, &cc, &diags)) {
    free(diags);
    return false;
  }
  KernelResult r;
  if (!run_kernels(pr->sh, pr->a, pr->k, 1, &cc, pr->seed, false, &r)) pr->sh->fault = true;
  compiled_free(&cc);
  return r.outcome == OUT_DIFFERENT && !strcmp(r.buffer, pr->buffer);
}

/* One reduction thread: takes the next record to reduce until none is
 * left (the records are reduced on up to --jobs threads at once). */
static void *reduce_records(void *arg) {
  Worker *w = arg;
  Shared *sh = w->sh;
  Arena a = {0};
  a.worker = w->index;
  for (;;) {
    pthread_mutex_lock(&sh->lock);
    int i = sh->next_reduce++;
    pthread_mutex_unlock(&sh->lock);
    if (i >= sh->nrecords || i >= sh->o->reduce || sh->fault) break;
    Record *rec = &sh->records[i];
    if (!rec->buffer[0] || now_ms() > sh->reduce_deadline_ms) continue;
    KgProgram *p = kg_generate(rec->seed, &sh->cfg);
    size_t len;
    char *src = kg_kernel_source(p, rec->kernel, &len);
    Probe pr = {sh, &a, &p->kernels[rec->kernel], rec->seed, rec->buffer, sh->reduce_deadline_ms};
    if (still_differs(src, len, &pr)) {
      int checks = 0;
      rec->reduced = kg_reduce(src, len, still_differs, &pr, DIFF_REDUCE_CHECKS, &checks);
      write_file(rec->dir, "reduced.tile", rec->reduced, strlen(rec->reduced));
      pthread_mutex_lock(&sh->lock);
      printf("reduced seed %llu %s in %d checks (%s/reduced.tile)\n", (unsigned long long)rec->seed,
             p->kernels[rec->kernel].name, checks, rec->dir);
      pthread_mutex_unlock(&sh->lock);
    } else {
      pthread_mutex_lock(&sh->lock);
      printf("seed %llu %s: the difference does not show when the kernel is compiled alone\n",
             (unsigned long long)rec->seed, p->kernels[rec->kernel].name);
      pthread_mutex_unlock(&sh->lock);
    }
    free(src);
    kg_free(p);
  }
  arena_free(sh->g, &a);
  pthread_mutex_lock(&sh->lock);
  sh->finished++;
  pthread_mutex_unlock(&sh->lock);
  return NULL;
}

/* ---- the command ---- */

static bool parse(int argc, char **argv, Options *o) {
  const char *env_out = getenv("OUT");
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  *o = (Options){.count = DIFF_DEFAULT_COUNT,
                 .seed = 1,
                 .jobs = cpus > 0 ? (int)cpus : 1,
                 .kernels = DIFF_DEFAULT_KERNELS,
                 .reduce = DIFF_DEFAULT_REDUCE,
                 .features = KG_F_ALL,
                 .reduce_seconds = DIFF_REDUCE_SECONDS,
                 .hang_seconds = DIFF_HANG_SECONDS};
  snprintf(o->out_buf, sizeof o->out_buf, "%s/gpu-diff", env_out && *env_out ? env_out : ".");
  o->out = o->out_buf;
  bool count_given = false;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--verbose")) o->verbose = true;
    else if (!strcmp(a, "--dry-run")) o->dry_run = true;
    else if (!v) return false;
    else if (!strcmp(a, "--count")) o->count = atol(v), i++, count_given = true;
    else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 0), i++;
    else if (!strcmp(a, "--jobs")) o->jobs = atoi(v), i++;
    else if (!strcmp(a, "--kernels")) o->kernels = atoi(v), i++;
    else if (!strcmp(a, "--seconds")) o->seconds = atof(v), i++;
    else if (!strcmp(a, "--out")) o->out = v, i++;
    else if (!strcmp(a, "--reduce")) o->reduce = atoi(v), i++;
    else if (!strcmp(a, "--features")) o->features = (unsigned)strtoul(v, NULL, 0), i++;
    else if (!strcmp(a, "--only")) o->only = v, i++;
    else if (!strcmp(a, "--reduce-seconds")) o->reduce_seconds = atof(v), i++;
    else if (!strcmp(a, "--hang-seconds")) o->hang_seconds = atof(v), i++;
    else if (!strcmp(a, "--skip") && o->nskip < DIFF_MAX_SKIP) o->skip[o->nskip++] = strtoull(v, NULL, 0), i++;
    else return false;
  }
  if (o->seconds > 0 && !count_given) o->count = LONG_MAX; /* the time decides */
  if (o->hang_seconds <= 0 || o->reduce_seconds < 0) return false;
  if (o->jobs < 1) o->jobs = 1;
  if (o->jobs > DIFF_MAX_JOBS) o->jobs = DIFF_MAX_JOBS;
  if (o->kernels < 1 || o->kernels > DIFF_MAX_KERNELS) return false;
  return o->count >= 0;
}

int gpu_diff_main(int argc, char **argv, const char *source_root) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr, "usage: tile-gpu diff [--count N] [--seed S] [--jobs J] [--kernels K] [--seconds T] [--out DIR]\n"
                    "                     [--reduce R] [--reduce-seconds T] [--hang-seconds T] [--skip SEED]...\n"
                    "                     [--features MASK] [--only KERNEL] [--dry-run] [--verbose]\n");
    return 2;
  }
  Gpu g;
  memset(&g, 0, sizeof g);
  if (!o.dry_run && !gpu_open(&g, source_root)) {
    printf("SKIP: tile-gpu diff needs a CUDA device (--dry-run checks it without one)\n");
    return EXIT_SKIP;
  }
  Shared sh;
  memset(&sh, 0, sizeof sh);
  sh.o = &o, sh.g = &g, sh.t0 = now_ms();
  kg_config_init(&sh.cfg);
  sh.cfg.kernels = o.kernels;
  sh.cfg.features = o.features;
  pthread_mutex_init(&sh.lock, NULL);
  if (o.count == LONG_MAX)
    printf("diff: programs of %d kernels from seed %llu on %d threads for %.0f s\n", o.kernels,
           (unsigned long long)o.seed, o.jobs, o.seconds);
  else
    printf("diff: up to %ld programs of %d kernels from seed %llu on %d threads%s\n", o.count, o.kernels,
           (unsigned long long)o.seed, o.jobs, o.seconds > 0 ? " (time limited)" : "");
  pthread_t threads[DIFF_MAX_JOBS];
  Worker workers[DIFF_MAX_JOBS];
  for (int i = 0; i < o.jobs; i++) {
    workers[i] = (Worker){&sh, i};
    pthread_create(&threads[i], NULL, worker, &workers[i]);
  }
  wait_for_threads(&sh, o.jobs);
  for (int i = 0; i < o.jobs; i++) pthread_join(threads[i], NULL);
  double run_s = elapsed_s(&sh);
  /* the reductions run on threads of their own, watched too */
  sh.finished = 0;
  sh.reduce_deadline_ms = now_ms() + o.reduce_seconds * 1e3;
  int reducers = o.jobs < o.reduce ? o.jobs : (o.reduce > 0 ? o.reduce : 1);
  for (int i = 0; i < reducers; i++) pthread_create(&threads[i], NULL, reduce_records, &workers[i]);
  wait_for_threads(&sh, reducers);
  for (int i = 0; i < reducers; i++) pthread_join(threads[i], NULL);
  long unexplained = sh.differences - sh.explained;
  printf("\n%.0f s (%.1f kernels/s); explained differences by reason:\n", run_s, sh.kernels / (run_s > 0 ? run_s : 1));
  for (int i = 0; i < DIFF_MAX_REASONS && sh.reasons[i]; i++) printf("  %6ld  %s\n", sh.reason_counts[i], sh.reasons[i]);
  for (int i = 0; i < sh.nrecords; i++) {
    const Record *r = &sh.records[i];
    printf("\nproblem %d: seed %llu kernel k%d%s%s (%s)\n", i + 1, (unsigned long long)r->seed, r->kernel,
           r->buffer[0] ? ", buffer " : "", r->buffer, r->dir);
    if (r->reduced) printf("reduced reproducer:\n%s", r->reduced);
    free(r->reduced);
  }
  if (sh.compile_errors || sh.interp_errors || sh.launch_errors || sh.fault)
    printf("%ld kernels did not compile, %ld failed in the interpreter, %ld failed to launch%s\n", sh.compile_errors,
           sh.interp_errors, sh.launch_errors, sh.fault ? "; the GPU context was lost" : "");
  printf("diff: %ld programs, %ld kernels, %ld differences (%ld explained)\n", sh.programs, sh.kernels, sh.differences,
         sh.explained);
  pthread_mutex_destroy(&sh.lock);
  if (!o.dry_run) gpu_close(&g);
  return unexplained || sh.compile_errors || sh.interp_errors || sh.launch_errors || sh.fault ? 1 : 0;
}
