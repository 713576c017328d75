/* test_gen_opt.c - differential test of the optimizer: every generated
 * program (tests/gen/kernel_gen.h) runs in the interpreter twice on the
 * same inputs, compiled with -O0 (no_opt) and with the default passes,
 * and every buffer must come out bit for bit the same. The optimizer may
 * remove unused loads and divisions (semantics.md, Memory), but the
 * generator makes no access that depends on that, so both runs must also
 * succeed: a run-time error in either is a bug of the generator or of the
 * compiler.
 *
 * On a difference the kernel is reduced (kg_reduce) to a small program
 * that still differs, which the failure message prints with the seed;
 * `kgen SEED` prints the whole program again.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernel_gen.h"

/* Programs compared, of two kernels each: about 10 s here, a minute
 * under the sanitizers (each is compiled twice and run twice). */
#define GEN_OPT_PROGRAMS 1000
#define GEN_OPT_KERNELS 2
/* The seed of the first program; program i has seed GEN_OPT_SEED + i. */
#define GEN_OPT_SEED 0x0907000000ULL
/* Execution limit of one run (element operations): a generated kernel
 * needs well under a million; a reduced one that loops forever stops here. */
#define GEN_OPT_MAX_STEPS 100000000ULL
/* Failures reported (each with its reduction) before the test stops. */
#define GEN_OPT_MAX_REPORTS 3
/* Predicate checks a reduction may spend. */
#define GEN_OPT_REDUCE_CHECKS 600

typedef struct Outcome {
  bool ran;           /* both compiled and ran */
  int differing;      /* buffers whose bits differ */
  char message[2048]; /* what went wrong */
} Outcome;

static Outcome run_both(const char *src, size_t len, const KgKernel *k, uint64_t seed) {
  Outcome o;
  int n = kg_compare_opt(src, len, k, seed, GEN_OPT_MAX_STEPS, o.message, sizeof o.message);
  o.ran = n >= 0;
  o.differing = n > 0 ? n : 0;
  return o;
}

/* Checks every kernel of the program of `seed`; on a difference, fails
 * with a reduced reproducer. Returns the number of kernels that failed. */
static int check_program(uint64_t seed, const KgConfig *cfg) {
  int failed = 0;
  KgProgram *p = kg_generate(seed, cfg);
  for (int k = 0; k < p->nkernels; k++) {
    size_t len;
    char *src = kg_kernel_source(p, k, &len);
    Outcome o = run_both(src, len, &p->kernels[k], seed);
    if (!o.ran || o.differing) {
      failed++;
      char *small = src;
      int checks = 0;
      KgOptProbe probe = {&p->kernels[k], seed, GEN_OPT_MAX_STEPS};
      if (o.ran) small = kg_reduce(src, len, kg_opt_still_differs, &probe, GEN_OPT_REDUCE_CHECKS, &checks);
      char *desc = kg_describe(&p->kernels[k]);
      cr_expect_fail("seed %llu kernel %d: %s\nreduced in %d checks to:\n%s\n%s", (unsigned long long)seed, k, o.message,
              checks, small, desc);
      free(desc);
      if (small != src) free(small);
    }
    free(src);
  }
  kg_free(p);
  return failed;
}

Test(gen_opt, optimizer_keeps_every_result) {
  KgConfig cfg;
  kg_config_init(&cfg);
  cfg.kernels = GEN_OPT_KERNELS;
  int failed = 0;
  for (int i = 0; i < GEN_OPT_PROGRAMS && failed < GEN_OPT_MAX_REPORTS; i++)
    failed += check_program(GEN_OPT_SEED + (uint64_t)i, &cfg);
}

/* The reducer on a planted difference: a kernel whose optimized and -O0
 * results differ is shrunk to the lines that matter. The difference here
 * is made by the predicate itself (a store of a value the predicate
 * looks for), so this checks kg_reduce, not the compiler. */
static bool keeps_marker(const char *src, size_t len, void *user) {
  (void)user;
  tc_options opt = {0};
  tc_compilation *c = tc_compile("gen.tile", src, len, &opt);
  bool ok = tc_error_count(c) == 0 && strstr(src, "store(out0") != NULL;
  tc_free(c);
  return ok;
}

Test(gen_opt, reducer_shrinks_to_the_problem) {
  KgProgram *p = kg_generate(GEN_OPT_SEED, NULL);
  size_t len;
  char *src = kg_kernel_source(p, 0, &len);
  int checks = 0;
  char *small = kg_reduce(src, len, keeps_marker, NULL, 2000, &checks);
  cr_assert(strstr(small, "store(out0"), "the reduction lost the store:\n%s", small);
  cr_assert(strlen(small) < len, "nothing was removed from:\n%s", src);
  int lines = 0;
  for (const char *s = small; *s; s++) lines += *s == '\n';
  cr_expect(lines <= 12, "the reduction left %d lines:\n%s", lines, small);
  free(small);
  free(src);
  kg_free(p);
}
