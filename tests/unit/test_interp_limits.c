/* test_interp_limits.c - the interpreter's limits and its descriptor
 * arithmetic, through the library API (tc_interpret, tc_interpret_ex):
 *   - the wall-clock limit stops a runaway loop with an error at the op
 *     being run and the program, soon after the limit;
 *   - every program costs a step, so a huge grid of an empty kernel meets
 *     the step limit;
 *   - descriptor addresses are computed in 64 bits: a block at the far end
 *     of a 2 x 32768 x 65536 tensor (2^32 elements, strides past 2^31) is
 *     read from the right place, and descriptors whose sizes or strides are
 *     negative, or whose extent overflows 64 bits, are errors, not wild
 *     addresses. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tilec.h"

static tc_compilation *compile(const char *name, const char *src) {
  tc_compilation *c = tc_compile(name, src, strlen(src), NULL);
  cr_assert_not_null(c);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  return c;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char spin_src[] = "kernel spin(z: *f32, n: i32) {\n"
                               "    var i = 0;\n"
                               "    while i >= 0 {\n"
                               "        i = (i + 1) & 1023;\n"
                               "    }\n"
                               "    store(z, 1.0);\n"
                               "}\n";

Test(interp_limits, time_limit_stops_a_runaway_loop) {
  tc_compilation *c = compile("spin.tile", spin_src);
  float z = 0;
  tc_arg args[2] = {{.p = &z}, {.i = 1}};
  tc_buffer bufs[] = {{&z, sizeof z, "z"}};
  tc_interp_options limits = {.max_seconds = 0.25};
  char *err = NULL;
  double t0 = now();
  cr_assert(!tc_interpret_ex(c, 0, (int64_t[3]){1, 1, 1}, args, 2, bufs, 1, &limits, &err));
  double took = now() - t0;
  cr_assert_not_null(err);
  cr_expect(strncmp(err, "spin.tile:", 10) == 0, "%s", err);
  cr_expect(strstr(err, ": error: time limit of 0.25 seconds exceeded after ") != NULL, "%s", err);
  cr_expect(strstr(err, "steps (program (0, 0, 0))") != NULL, "%s", err);
  /* Soon after the limit (a look at the clock every few milliseconds). */
  cr_expect(took >= 0.25 && took < 5.0, "took %g s", took);
  free(err);
  cr_expect_eq(z, 0.0f, "the store after the loop never ran");
  tc_free(c);
}

Test(interp_limits, step_limit_still_applies_and_defaults_hold) {
  tc_compilation *c = compile("spin.tile", spin_src);
  float z = 0;
  tc_arg args[2] = {{.p = &z}, {.i = 1}};
  tc_buffer bufs[] = {{&z, sizeof z, "z"}};
  char *err = NULL;
  tc_interp_options limits = {.max_steps = 5000, .max_seconds = 60};
  cr_assert(!tc_interpret_ex(c, 0, (int64_t[3]){1, 1, 1}, args, 2, bufs, 1, &limits, &err));
  cr_expect(strstr(err, "error: execution limit of 5000 steps exceeded (program (0, 0, 0))") != NULL, "%s", err);
  free(err);
  /* tc_interpret is tc_interpret_ex with {max_steps, 0}. */
  cr_assert(!tc_interpret(c, 0, (int64_t[3]){1, 1, 1}, args, 2, bufs, 1, 5000, &err));
  cr_expect(strstr(err, "execution limit of 5000 steps exceeded") != NULL, "%s", err);
  free(err);
  cr_expect_eq(TC_INTERP_DEFAULT_MAX_STEPS, 1000000000ULL);
  tc_free(c);
}

Test(interp_limits, every_program_costs_a_step) {
  /* Nothing to do per program: without a step per program, a grid of
   * 2^31 - 1 programs squared would run for ever. */
  tc_compilation *c = compile("empty.tile", "kernel empty(p: *f32) {\n}\n");
  char *err = NULL;
  tc_arg args[1] = {{.p = NULL}};
  tc_interp_options limits = {.max_steps = 1000};
  cr_assert(!tc_interpret_ex(c, 0, (int64_t[3]){INT32_MAX, INT32_MAX, 1}, args, 1, NULL, 0, &limits, &err));
  cr_expect_str_eq(err, "empty.tile:1:1: error: execution limit of 1000 steps exceeded (program (1000, 0, 0))");
  free(err);
  tc_free(c);
}

static const char big_src[] = "kernel big(out: *f32, t: tensor<f32, 3>, a: i32, b: i32, c: i32) {\n"
                              "    let v = load_block(t, [a, b, c], [1, 1, 16]);\n"
                              "    store(out + arange(0, 16), reshape(v, [16]));\n"
                              "}\n";

/* Arguments of big over a 2 x 32768 x 65536 f32 tensor of which only the
 * last 16 elements exist: the base lies 2^32 - 16 elements before mem. */
static void big_args(tc_arg args[5], float *out, float *mem) {
  memset(args, 0, 5 * sizeof *args);
  args[0].p = out;
  uintptr_t elems_before = ((uintptr_t)1 << 32) - 16;
  args[1].p = (void *)((uintptr_t)mem - elems_before * sizeof(float));
  int64_t shape[3] = {2, 32768, 65536}, strides[3] = {INT64_C(32768) * 65536, 65536, 1};
  memcpy(args[1].shape, shape, sizeof shape);
  memcpy(args[1].strides, strides, sizeof strides);
  args[2].i = 1;
  args[3].i = 32767;
  args[4].i = 65536 - 16;
}

Test(interp_limits, descriptor_strides_past_2_to_the_31) {
  tc_compilation *c = compile("big.tile", big_src);
  float out[16] = {0}, mem[16];
  for (int i = 0; i < 16; i++) mem[i] = (float)(i + 1);
  tc_arg args[5];
  big_args(args, out, mem);
  tc_buffer bufs[] = {{out, sizeof out, "out"}, {mem, sizeof mem, "t"}};
  char *err = NULL;
  bool ok = tc_interpret_ex(c, 0, (int64_t[3]){1, 1, 1}, args, 5, bufs, 2, NULL, &err);
  cr_assert(ok, "%s", err ? err : "");
  for (int i = 0; i < 16; i++) cr_expect_eq(out[i], (float)(i + 1), "out[%d] = %g", i, out[i]);
  tc_free(c);
}

/* Runs big with a descriptor of the given shape and strides (the rest as
 * big_args makes them); expects an error that contains `want`. */
static void expect_desc_error(const int64_t shape[3], const int64_t strides[3], const char *want) {
  tc_compilation *c = compile("big.tile", big_src);
  float out[16] = {0}, mem[16] = {0};
  tc_arg args[5];
  big_args(args, out, mem);
  memcpy(args[1].shape, shape, 3 * sizeof *shape);
  memcpy(args[1].strides, strides, 3 * sizeof *strides);
  tc_buffer bufs[] = {{out, sizeof out, "out"}, {mem, sizeof mem, "t"}};
  char *err = NULL;
  cr_assert(!tc_interpret_ex(c, 0, (int64_t[3]){1, 1, 1}, args, 5, bufs, 2, NULL, &err));
  cr_expect(strstr(err, want) != NULL, "error:\n%s\nexpected it to contain:\n%s", err, want);
  free(err);
  tc_free(c);
}

#define BIG_STRIDE0 ((int64_t)32768 * 65536)

Test(interp_limits, descriptor_with_negative_size_or_stride) {
  expect_desc_error((int64_t[3]){2, 32768, 65536}, (int64_t[3]){BIG_STRIDE0, -65536, 1},
                    "big.tile:1:1: error: descriptor argument 't' has stride -65536 in dimension 1 (must be at least "
                    "0) (kernel 'big')");
  expect_desc_error((int64_t[3]){-2, 32768, 65536}, (int64_t[3]){BIG_STRIDE0, 65536, 1},
                    "descriptor argument 't' has size -2 in dimension 0");
}

Test(interp_limits, descriptor_whose_extent_overflows) {
  expect_desc_error((int64_t[3]){INT64_C(1) << 40, 32768, 65536}, (int64_t[3]){INT64_C(1) << 40, 65536, 1},
                    "big.tile:1:1: error: descriptor argument 't': the offset of its last element overflows 64 bits "
                    "(kernel 'big')");
  /* Elements that fit, bytes that do not. */
  expect_desc_error((int64_t[3]){2, 32768, 65536}, (int64_t[3]){INT64_MAX / 2, 65536, 1},
                    "the address of its last element overflows 64 bits");
}

Test(interp_limits, bad_calls_are_errors) {
  tc_compilation *c = compile("spin.tile", spin_src);
  char *err = NULL;
  cr_assert(!tc_interpret_ex(c, 0, (int64_t[3]){1, 1, 1}, NULL, 2, NULL, 0, NULL, &err));
  cr_expect_str_eq(err, "no arguments given");
  free(err);
  cr_assert(!tc_interpret_ex(c, 3, (int64_t[3]){1, 1, 1}, NULL, 2, NULL, 0, NULL, &err));
  cr_expect_str_eq(err, "no such kernel (or the compilation failed)");
  free(err);
  tc_free(c);
}
