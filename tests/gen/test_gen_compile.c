/* test_gen_compile.c - a structure-aware smoke test of the whole compiler:
 * generated programs (tests/gen/kernel_gen.h, valid by construction) go
 * through the front end, the optimizer and the GPU back end down to PTX
 * (tc_generate with TC_LINKER_NONE: no toolkit needed) with varied
 * options: the default passes, -O0, the verifier after every pass, and
 * other warp counts through `-D W=...` (every generated kernel has
 * `@warps(W)`). The front end must accept every program; the back end
 * must compile every program at its own warp count, and may refuse one at
 * another warp count only with a clean "GPU back end:" budget message.
 * Nothing may crash (the sanitizer build runs this too).
 *
 * To see which seed crashed, run the test with TILE_GEN_VERBOSE=1: each
 * seed is printed before it is compiled; `kgen SEED --kernels 2` prints
 * the program.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernel_gen.h"

/* Programs compiled, two kernels each: about a minute on two cores (the
 * back end runs LLVM's O3 pipeline on every kernel). */
#define GEN_COMPILE_PROGRAMS 300
#define GEN_COMPILE_KERNELS 2
/* The seed of the first program; program i has seed GEN_COMPILE_SEED + i. */
#define GEN_COMPILE_SEED 0xC0C0000000ULL

/* The option sets, in turn: default, -O0, verify after each pass, -D W. */
enum { VARIANT_DEFAULT, VARIANT_O0, VARIANT_VERIFY, VARIANT_WARPS, VARIANTS };

static const char *const warp_counts[] = {"1", "2", "4", "8", "16"};

/* Whether every error in the diagnostics is a GPU back end message. */
static bool only_back_end_errors(const char *diags) {
  int errors = 0;
  for (const char *p = diags; (p = strstr(p, "error: ")); p += 7) {
    errors++;
    if (strncmp(p + 7, "GPU back end", 12)) return false;
  }
  return errors > 0;
}

static void compile_program(uint64_t seed, int variant, const char *warps, int *refused) {
  KgConfig cfg;
  kg_config_init(&cfg);
  cfg.kernels = GEN_COMPILE_KERNELS;
  KgProgram *p = kg_generate(seed, &cfg);
  tc_define def = {"W", warps};
  tc_options opt = {0};
  opt.no_opt = variant == VARIANT_O0;
  opt.verify_each_pass = variant == VARIANT_VERIFY;
  if (variant == VARIANT_WARPS) opt.defines = &def, opt.ndefines = 1;
  if (getenv("TILE_GEN_VERBOSE")) fprintf(stderr, "seed %llu variant %d\n", (unsigned long long)seed, variant);
  tc_compilation *c = tc_compile("gen.tile", p->source, p->len, &opt);
  if (tc_error_count(c)) fprintf(stderr, "%s\n%s", p->source, tc_diagnostics(c));
  cr_assert(tc_error_count(c) == 0, "seed %llu: the front end rejected a generated program (printed above)",
            (unsigned long long)seed);
  cr_assert(tc_kernel_count(c) == GEN_COMPILE_KERNELS, "seed %llu: %d kernels", (unsigned long long)seed,
            tc_kernel_count(c));
  tc_codegen_options go = {.linker = TC_LINKER_NONE};
  if (tc_generate(c, &go)) {
    char *ptx = tc_emit(c, TC_EMIT_PTX);
    cr_assert(ptx && strstr(ptx, ".entry"), "seed %llu: no PTX", (unsigned long long)seed);
    free(ptx);
  } else {
    bool clean = variant == VARIANT_WARPS && only_back_end_errors(tc_diagnostics(c));
    if (!clean) fprintf(stderr, "%s\n%s", p->source, tc_diagnostics(c));
    cr_assert(clean, "seed %llu (options %d, W=%s): the back end failed (printed above)", (unsigned long long)seed,
              variant, warps);
    (*refused)++;
  }
  tc_free(c);
  kg_free(p);
}

Test(gen_compile, programs_compile_to_ptx) {
  int refused = 0;
  for (int i = 0; i < GEN_COMPILE_PROGRAMS; i++)
    compile_program(GEN_COMPILE_SEED + (uint64_t)i, i % VARIANTS,
                    warp_counts[(i / VARIANTS) % (int)(sizeof warp_counts / sizeof warp_counts[0])], &refused);
  cr_log_info("%d of %d programs refused by the back end at another warp count", refused, GEN_COMPILE_PROGRAMS);
}

/* The generator's promises on many more programs, cheaply: the front end
 * accepts them, and the same seed gives the same text. */
Test(gen_compile, front_end_accepts_and_seeds_repeat) {
  KgConfig cfg;
  kg_config_init(&cfg);
  cfg.kernels = 3;
  for (uint64_t seed = 1; seed <= 300; seed++) {
    KgProgram *a = kg_generate(seed, &cfg), *b = kg_generate(seed, &cfg);
    cr_assert(a->len == b->len && !memcmp(a->source, b->source, a->len), "seed %llu is not deterministic",
              (unsigned long long)seed);
    tc_options opt = {0};
    tc_compilation *c = tc_compile("gen.tile", a->source, a->len, &opt);
    if (tc_error_count(c)) fprintf(stderr, "%s\n%s", a->source, tc_diagnostics(c));
    cr_assert(tc_error_count(c) == 0, "seed %llu: rejected (printed above)", (unsigned long long)seed);
    /* a kernel's text alone compiles too (what the reducers start from) */
    size_t len;
    char *one = kg_kernel_source(a, 2, &len);
    tc_compilation *c1 = tc_compile("one.tile", one, len, &opt);
    cr_assert(tc_error_count(c1) == 0, "seed %llu kernel 2 alone:\n%s", (unsigned long long)seed, tc_diagnostics(c1));
    tc_free(c1);
    free(one);
    tc_free(c);
    kg_free(a);
    kg_free(b);
  }
}
