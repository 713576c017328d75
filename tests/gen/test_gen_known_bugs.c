/* test_gen_known_bugs.c - the compiler bugs that the random kernels of
 * tests/gen found, one test each with the reduced reproducer. All are
 * fixed; the tests keep them fixed. While a bug is open its test fails and
 * the generator leaves the construct out (KgConfig.avoid, KG_BUG_* in
 * kernel_gen.h) so that test_gen_compile, test_gen_opt and `tile-gpu diff`
 * keep finding new problems; when it is fixed its bit leaves
 * KG_BUGS_KNOWN (tests/gen/README.md).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "kernel_gen.h"

/* Execution limit of one interpreter run (element operations). */
#define KNOWN_BUG_MAX_STEPS 1000000ULL
/* Input seeds tried for the fp8 test: some fill the input with an
 * infinity (KG_FILL_SPECIAL). */
#define KNOWN_BUG_SEEDS 64

#ifdef TILE_HAVE_LLVM
static void back_end_compiles(const char *src) {
  /* LLVM prints thousands of lines of its DAG before aborting; the test
   * runs in a process of its own, so its stderr can go */
  cr_assert(freopen("/dev/null", "w", stderr));
  tc_options opt = {0};
  tc_compilation *c = tc_compile("bug.tile", src, strlen(src), &opt);
  cr_assert(tc_error_count(c) == 0, "%s", tc_diagnostics(c));
  tc_codegen_options go = {.linker = TC_LINKER_NONE};
  cr_expect(tc_generate(c, &go), "the back end failed:\n%s", tc_diagnostics(c));
  tc_free(c);
}

/* Fixed bug (KG_BUG_FP8_ARGMAX): argmax or argmin of an fp8 tile crashed
 * the back end: LLVM aborts with "Cannot select: i1 = setcc ..., setoeq"
 * on the fp8 bytes loaded as i16 (a float compare on integer values), or
 * segfaults in IPSCCP (ConstantRange::icmp) in larger kernels. */
Test(gen_known_bug, fp8_argmax_compiles) {
  back_end_compiles("kernel k0(x: *f8e5m2, out: *i32) {\n"
                    "    let v = load(x + arange(0, 4)[:, None] * 4 + arange(0, 4)[None, :]);\n"
                    "    store(out + arange(0, 4), argmax(v, 1));\n"
                    "}\n");
}

/* Fixed bug (KG_BUG_BITCAST_HALF): bitcast between f16 and bf16 of a
 * computed value (a scalar or a tile; also through i16, which LLVM folds
 * into one bitcast) crashed the back end: LLVM aborts with "Cannot
 * select: f16 = bitcast ..." (bf16 = bitcast f16 the other way). */
Test(gen_known_bug, bitcast_f16_bf16_compiles) {
  back_end_compiles("kernel k0(x: *bf16, out: *f16) {\n"
                    "    let v = sqrt(load(x + arange(0, 16)));\n"
                    "    store(out + arange(0, 16), bitcast(v, f16) / -2.5);\n"
                    "}\n");
}
#endif

/* Fixed bug (KG_BUG_FP8_MINMAX_INF), found by `kgen --check 100000 15000
 * --kernels 2` (seeds 102708 and 105186): maximum and minimum of f8e5m2
 * values, and max/min reductions, turned an infinity into the largest finite
 * value (57344, 0x7b) in the interpreter at -O0, as if the result were
 * converted (and saturated), while the optimizer folds minimum(x, x) to x
 * and kept inf (0x7c): the optimized and -O0 results differed. The spec's
 * maximum/minimum return one of their operands (builtins.md); saturation
 * is a rule of conversions only. */
Test(gen_known_bug, fp8_minimum_of_inf_agrees_at_O0) {
  static const char src[] = "kernel k0(x: *f8e5m2, out: *f8e5m2) {\n"
                            "    let v = load(x + arange(0, 4));\n"
                            "    store(out + arange(0, 4), minimum(v, v));\n"
                            "}\n";
  KgKernel k = {.name = "k0", .nparams = 2, .grid = {1, 1, 1}, .warps = 4};
  k.params[0] = (KgParam){.name = "x", .role = KG_INPUT, .elem = "f8e5m2", .length = 4, .fill = KG_FILL_SPECIAL};
  k.params[1] = (KgParam){.name = "out", .role = KG_OUTPUT, .elem = "f8e5m2", .length = 4, .fill = KG_FILL_POISON};
  char msg[2048];
  int differing = -1;
  /* some seed fills x with an infinity */
  for (uint64_t seed = 1; seed < KNOWN_BUG_SEEDS && differing <= 0; seed++)
    differing = kg_compare_opt(src, strlen(src), &k, seed, KNOWN_BUG_MAX_STEPS, msg, sizeof msg);
  cr_expect(differing == 0, "-O0 and the optimizer disagree on minimum(v, v):\n%s", msg);
}
