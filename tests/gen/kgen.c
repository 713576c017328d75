/* kgen.c - prints generated programs, for looking at what the generator
 * makes and for reproducing a seed reported by a test:
 *
 *   kgen SEED [--kernels K] [--describe] [--features MASK] [--avoid MASK]
 *   kgen --check FIRST COUNT [--kernels K]
 *   kgen --reduce-crash SEED [--kernels K] [-D NAME=VALUE] [-O0] [--verify-each]
 *   kgen --reduce-opt SEED KERNEL [--kernels K]
 *   kgen --ptx SEED [--kernels K] [-D NAME=VALUE] [-O0] [--verify-each]
 *   kgen --sweep FIRST COUNT [--kernels K] [-D NAME=VALUE] [-O0] [--verify-each]
 *
 * The first form prints the program of SEED (and each kernel's parameter
 * description with --describe). --check compiles COUNT programs from seed
 * FIRST on and runs every kernel in the interpreter optimized and at -O0,
 * printing each seed whose program is rejected, fails to run, or gives
 * different results (test_gen_opt.c over any range of seeds). --avoid sets
 * the known bugs the generator steers around (kernel_gen.h, KG_BUG_*;
 * default all, 0 to reproduce them).
 * --reduce-crash shrinks a program on which the compiler (tc_compile and
 * tc_generate down to PTX, in a child process) dies with a signal, keeping
 * the signal, and prints the reduced program; --reduce-opt shrinks a
 * kernel whose -O0 and optimized results differ (as --check reports). --ptx compiles the program
 * down to PTX in this process (for a debugger) and prints the diagnostics;
 * --sweep compiles COUNT programs down to PTX, each in a child process,
 * and prints the seeds that crash the compiler or that it rejects (or
 * that the back end refuses, with its message).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel_gen.h"

/* Execution limit of one interpreter run in --check (element operations). */
#define KGEN_MAX_STEPS 200000000ULL
/* Predicate checks a crash reduction may spend (each forks a compile). */
#define KGEN_REDUCE_CHECKS 3000

typedef struct CrashProbe {
  tc_options opt; /* defines, -O0, --verify-each */
  int signal; /* the signal to keep: 0 until the first run */
} CrashProbe;

/* Compiles src down to PTX in a child; returns the signal it died of, -1
 * when the back end refused the program (its diagnostics printed), 0 when
 * it exited otherwise. */
static int compile_in_child(const char *src, size_t len, const CrashProbe *p) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stderr)) _exit(2); /* LLVM's own messages */
    tc_compilation *c = tc_compile("gen.tile", src, len, &p->opt);
    tc_codegen_options go = {.linker = TC_LINKER_NONE};
    if (tc_error_count(c)) _exit(1);
    if (!tc_generate(c, &go)) {
      fputs(tc_diagnostics(c), stdout);
      fflush(stdout);
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return -1;
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static bool still_crashes(const char *src, size_t len, void *user) {
  CrashProbe *p = user;
  return compile_in_child(src, len, p) == p->signal;
}

static int reduce_crash(uint64_t seed, const KgConfig *cfg, const tc_options *opt) {
  KgProgram *p = kg_generate(seed, cfg);
  CrashProbe probe = {*opt, 0};
  probe.signal = compile_in_child(p->source, p->len, &probe);
  if (probe.signal <= 0) {
    printf("seed %llu: the compiler does not crash\n", (unsigned long long)seed);
    kg_free(p);
    return 1;
  }
  int checks = 0;
  char *small = kg_reduce(p->source, p->len, still_crashes, &probe, KGEN_REDUCE_CHECKS, &checks);
  printf("// seed %llu: signal %d (%s); reduced in %d checks\n%s", (unsigned long long)seed, probe.signal,
         strsignal(probe.signal), checks, small);
  free(small);
  kg_free(p);
  return 0;
}

static int check(uint64_t first, int count, const KgConfig *cfg) {
  int bad = 0;
  char msg[4096];
  for (int i = 0; i < count; i++) {
    uint64_t seed = first + (uint64_t)i;
    KgProgram *p = kg_generate(seed, cfg);
    for (int k = 0; k < p->nkernels; k++) {
      size_t len;
      char *src = kg_kernel_source(p, k, &len);
      if (kg_compare_opt(src, len, &p->kernels[k], seed, KGEN_MAX_STEPS, msg, sizeof msg)) {
        printf("seed %llu kernel %d: %s\n", (unsigned long long)seed, k, msg);
        bad++;
      }
      free(src);
    }
    kg_free(p);
  }
  printf("%d programs, %d problems\n", count, bad);
  return bad ? 1 : 0;
}


/* Reduces kernel `kernel` of the program of seed while its -O0 and
 * optimized results differ. */
static int reduce_opt(uint64_t seed, int kernel, const KgConfig *cfg) {
  KgProgram *p = kg_generate(seed, cfg);
  int rc = 1;
  if (kernel >= 0 && kernel < p->nkernels) {
    size_t len;
    char *src = kg_kernel_source(p, kernel, &len), msg[4096];
    KgOptProbe probe = {&p->kernels[kernel], seed, KGEN_MAX_STEPS};
    if (kg_compare_opt(src, len, probe.k, seed, KGEN_MAX_STEPS, msg, sizeof msg) > 0) {
      int checks = 0;
      char *small = kg_reduce(src, len, kg_opt_still_differs, &probe, KGEN_REDUCE_CHECKS, &checks);
      kg_compare_opt(small, strlen(small), probe.k, seed, KGEN_MAX_STEPS, msg, sizeof msg);
      char *desc = kg_describe(probe.k);
      printf("// seed %llu kernel %d: reduced in %d checks\n%s%s%s", (unsigned long long)seed, kernel, checks, small, msg,
             desc);
      free(desc);
      free(small);
      rc = 0;
    } else {
      printf("seed %llu kernel %d: no difference\n", (unsigned long long)seed, kernel);
    }
    free(src);
  }
  kg_free(p);
  return rc;
}

static int sweep(uint64_t first, int count, const KgConfig *cfg, const tc_options *opt) {
  int crashes = 0, rejected = 0, refused = 0;
  for (int i = 0; i < count; i++) {
    uint64_t seed = first + (uint64_t)i;
    KgProgram *p = kg_generate(seed, cfg);
    CrashProbe probe = {*opt, 0};
    int sig = compile_in_child(p->source, p->len, &probe);
    if (sig < 0) {
      printf("seed %llu: refused by the back end (above)\n", (unsigned long long)seed);
      refused++;
    } else if (sig) {
      printf("seed %llu: signal %d (%s)\n", (unsigned long long)seed, sig, strsignal(sig));
      crashes++;
    } else {
      tc_compilation *c = tc_compile("gen.tile", p->source, p->len, opt);
      if (tc_error_count(c)) {
        printf("seed %llu: rejected\n%s", (unsigned long long)seed, tc_diagnostics(c));
        rejected++;
      }
      tc_free(c);
    }
    kg_free(p);
  }
  printf("%d programs: %d crashes, %d rejected by the front end, %d by the back end\n", count, crashes, rejected,
         refused);
  return crashes || rejected || refused;
}

static int to_ptx(uint64_t seed, const KgConfig *cfg, const tc_options *opt) {
  KgProgram *p = kg_generate(seed, cfg);
  tc_compilation *c = tc_compile("gen.tile", p->source, p->len, opt);
  tc_codegen_options go = {.linker = TC_LINKER_NONE};
  bool ok = !tc_error_count(c) && tc_generate(c, &go);
  printf("seed %llu: %s\n%s", (unsigned long long)seed, ok ? "PTX generated" : "failed", tc_diagnostics(c));
  tc_free(c);
  kg_free(p);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  KgConfig cfg;
  kg_config_init(&cfg);
  bool describe = false, do_check = false, do_reduce = false, do_ptx = false, do_sweep = false, do_reduce_opt = false;
  tc_define defs[8];
  tc_options opt = {0};
  opt.defines = defs;
  const char *seed_arg = NULL, *count_arg = "1";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--kernels") && i + 1 < argc) cfg.kernels = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--features") && i + 1 < argc) cfg.features = (unsigned)strtoul(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--avoid") && i + 1 < argc) cfg.avoid = (unsigned)strtoul(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--describe")) describe = true;
    else if (!strcmp(argv[i], "--reduce-crash")) do_reduce = true;
    else if (!strcmp(argv[i], "--ptx")) do_ptx = true;
    else if (!strcmp(argv[i], "-O0")) opt.no_opt = true;
    else if (!strcmp(argv[i], "--verify-each")) opt.verify_each_pass = true;
    else if (!strcmp(argv[i], "-D") && i + 1 < argc && opt.ndefines < 8 && strchr(argv[i + 1], '=')) {
      char *d = argv[++i], *eq = strchr(d, '=');
      *eq = 0;
      defs[opt.ndefines++] = (tc_define){d, eq + 1};
    }
    else if (!strcmp(argv[i], "--check") && i + 2 < argc) do_check = true, seed_arg = argv[++i], count_arg = argv[++i];
    else if (!strcmp(argv[i], "--sweep") && i + 2 < argc) do_sweep = true, seed_arg = argv[++i], count_arg = argv[++i];
    else if (!strcmp(argv[i], "--reduce-opt") && i + 2 < argc)
      do_reduce_opt = true, seed_arg = argv[++i], count_arg = argv[++i];
    else if (!seed_arg) seed_arg = argv[i];
    else {
      fprintf(stderr, "usage: kgen SEED [--kernels K] [--describe] [--features MASK] | --check FIRST COUNT | "
              "--reduce-crash SEED [-D NAME=VALUE]\n");
      return 2;
    }
  }
  if (!seed_arg) {
    fprintf(stderr, "usage: kgen SEED [--kernels K] [--describe] [--features MASK] | --check FIRST COUNT | "
              "--reduce-crash SEED [-D NAME=VALUE]\n");
    return 2;
  }
  uint64_t seed = strtoull(seed_arg, NULL, 0);
  if (do_check) return check(seed, atoi(count_arg), &cfg);
  if (do_reduce) return reduce_crash(seed, &cfg, &opt);
  if (do_ptx) return to_ptx(seed, &cfg, &opt);
  if (do_sweep) return sweep(seed, atoi(count_arg), &cfg, &opt);
  if (do_reduce_opt) return reduce_opt(seed, atoi(count_arg), &cfg);
  KgProgram *p = kg_generate(seed, &cfg);
  fputs(p->source, stdout);
  for (int k = 0; describe && k < p->nkernels; k++) {
    char *d = kg_describe(&p->kernels[k]);
    printf("%s", d);
    free(d);
  }
  kg_free(p);
  return 0;
}
