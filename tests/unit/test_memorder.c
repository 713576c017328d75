/* test_memorder.c - memory order within a program on the GPU
 * (semantics.md, Memory): a barrier between a store and a later load or
 * atomic of the same buffer, none where no thread can read another's
 * store (nvptx/schedule_order.c). The GPU suite (tests/gpu, scratch
 * round trips) and `tile-gpu diff` check the results; this checks where
 * the barriers go in the lowered IR. */
#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *at = strstr(text, needle); at; at = strstr(at + 1, needle)) n++;
  return n;
}

/* The text between the first `from` and the next `to` has a barrier. */
static bool barrier_between(const char *text, const char *from, const char *to) {
  const char *a = strstr(text, from);
  if (!a) return false;
  const char *b = strstr(a + strlen(from), to);
  const char *bar = strstr(a, "barrier");
  return b && bar && bar < b;
}

Test(memorder, store_then_transposed_load_of_the_same_buffer) {
  char *t = harness_emit_source("kernel k(tmp: *f32, x: *f32, out: *f32) {\n"
                       "  let r = arange(0, 32);\n"
                       "  let c = arange(0, 16);\n"
                       "  store(tmp + r[:, None] * 16 + c[None, :], load(x + r[:, None] * 16 + c[None, :]));\n"
                       "  let v = load(tmp + r[:, None] + c[None, :] * 32);\n"
                       "  store(out + r[:, None] * 16 + c[None, :], v);\n"
                       "}\n", TC_EMIT_LOWERED);
  cr_expect(barrier_between(t, "store", "= load"), "a barrier orders the round trip:\n%s", t);
  cr_expect_eq(count(t, "barrier"), 1, "%s", t);
  free(t);
}

Test(memorder, different_parameters_need_no_barrier) {
  char *t = harness_emit_source("kernel k(x: *f32, y: *f32, z: *f32) {\n"
                       "  let r = arange(0, 128);\n"
                       "  store(y + r, load(x + r) * 2.0);\n"
                       "  store(z + r, load(x + 128 + r));\n"
                       "}\n", TC_EMIT_LOWERED);
  cr_expect_eq(count(t, "barrier"), 0, "%s", t);
  free(t);
}

Test(memorder, loads_before_stores_need_no_barrier) {
  char *t = harness_emit_source("kernel k(x: *f32) {\n"
                       "  let r = arange(0, 128);\n"
                       "  let v = load(x + r);\n"
                       "  store(x + 127 - r, v + 1.0);\n"
                       "}\n", TC_EMIT_LOWERED);
  cr_expect_eq(count(t, "barrier"), 0, "%s", t);
  free(t);
}

/* A store late in one iteration is pending at the top of the next: the
 * in-place update of a reversed buffer needs the barrier in the loop. */
Test(memorder, loop_carried_store_orders_the_next_iteration) {
  char *t = harness_emit_source("kernel k(x: *f32, n: i32) {\n"
                       "  let r = arange(0, 128);\n"
                       "  var p = x;\n"
                       "  for i in range(0, n) {\n"
                       "    let v = load(p + r);\n"
                       "    store(p + 127 - r, v + 1.0);\n"
                       "    p = p + 0;\n"
                       "  }\n"
                       "}\n", TC_EMIT_LOWERED);
  cr_expect(barrier_between(t, "for", "= load"), "a barrier before the load in the loop:\n%s", t);
  free(t);
}

/* Atomics read too: a store and then an atomic on the same buffer. */
Test(memorder, atomic_after_store) {
  char *t = harness_emit_source("kernel k(acc: *i32, out: *i32) {\n"
                       "  let r = arange(0, 64);\n"
                       "  store(acc + r, r);\n"
                       "  let old = atomic_add(acc + (63 - r), 1);\n"
                       "  store(out + r, old);\n"
                       "}\n", TC_EMIT_LOWERED);
  cr_expect(barrier_between(t, "store", "atomic_add"), "%s", t);
  free(t);
}

/* A pointer chosen at run time may be either buffer: ordered against both. */
Test(memorder, unknown_base_is_ordered) {
  char *t = harness_emit_source("kernel k(x: *f32, y: *f32, c: i32) {\n"
                       "  let r = arange(0, 128);\n"
                       "  store(x + r, 1.0);\n"
                       "  var p = x;\n"
                       "  if c > 0 { p = y; }\n"
                       "  store(y + r, load(p + 127 - r));\n"
                       "}\n", TC_EMIT_LOWERED);
  cr_expect_eq(count(t, "barrier"), 1, "%s", t);
  free(t);
}
