/* test_warpspec.c - @warp_specialize in the GPU back end
 * (nvptx/schedule_ws.c, the split loops of schedule_pipeline.c, and the
 * lowering of warp_split), without a GPU.
 *
 * What the split of a kernel must say, pinned on lang/std/gemm_ws.tile:
 *   - the lowered IR is one warp_split after the allocations: a producer
 *     region with only the TMA side of the pipelined loop (free-slot
 *     waits, byte counts, copies) and the loops and scalar arithmetic it
 *     needs, and a consumer region with everything else and no copies;
 *     both sides take ring positions from ring_next and wait with an
 *     explicit parity;
 *   - the persistent loop's TMA store is deferred: waited for before the
 *     buffer is written again, and once after the loop;
 *   - PTX: one block of 4 x (producers + consumers) warps whose register
 *     count at entry is pinned (.maxntid, .minnctapersm), setmaxnreg down
 *     for the producers and up for the consumers, the consumers' barriers
 *     named (id 1, their threads only); layouts cover the consumer warps;
 *   - the metadata says the block's warps;
 *   - errors: consumer counts the layouts cannot cover, loop-level
 *     annotations that disagree or do not fit the kernel's warps, loops
 *     that are not pipelined by TMA, copies whose coordinates need the
 *     consumers' values, tiles over the consumers' registers;
 *   - removing @warp_specialize changes no result (interpreter).
 * Built only where the back end (LLVM) is (tests/meson.build).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* Room for one kernel's source with an annotation replaced. */
#define SOURCE_MAX 16384

static tc_compilation *generated(const char *path, const char *const *defines) {
  tc_compilation *c = harness_compile(path, NULL, defines);
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s: %s", path, tc_diagnostics(c));
  return c;
}

/* The lowered IR cut at the warp_split: producer region, consumer
 * region (each malloc'd). */
typedef struct Split {
  char *all, *producer, *consumer;
} Split;

static Split split_of(const char *path, const char *const *defines) {
  tc_compilation *c = generated(path, defines);
  Split s = {tc_emit(c, TC_EMIT_LOWERED), NULL, NULL};
  tc_free(c);
  cr_assert(s.all);
  char *layouts = strstr(s.all, "// layouts of");
  const char *ws = strstr(s.all, "warp_split {");
  cr_assert(ws, "no warp_split:\n%s", s.all);
  const char *mid = strstr(ws, "\n  } {\n");
  cr_assert(mid, "%s", s.all);
  s.producer = strndup(ws, (size_t)(mid - ws));
  s.consumer = layouts ? strndup(mid, (size_t)(layouts - mid)) : strdup(mid);
  return s;
}

static void split_free(Split *s) {
  free(s->all);
  free(s->producer);
  free(s->consumer);
}

/* Each needle after the previous one. */
static void expect_in_order(const char *text, const char *const *needles, const char *what) {
  const char *at = text;
  for (int i = 0; needles[i]; i++) {
    const char *p = strstr(at, needles[i]);
    cr_expect(p, "%s: '%s' missing after '%s':\n%s", what, needles[i], i ? needles[i - 1] : "(start)", text);
    if (!p) return;
    at = p + strlen(needles[i]);
  }
}

#define IN_ORDER(text, what, ...) expect_in_order(text, (const char *const[]){__VA_ARGS__, NULL}, what)

/* ---- the split of gemm_ws ---------------------------------------------- */

Test(warpspec, gemm_ws_splits_into_a_tma_producer_and_computing_consumers) {
  Split s = split_of("lang/std/gemm_ws.tile", NULL);
  cr_expect(strstr(s.all, "warps(12) warp_specialize(1, 2, 40, 232)"), "%s", s.all);
  cr_expect(strstr(s.producer, "warp_split {producers = 1, consumers = 2, producer_registers = 40, "
                               "consumer_registers = 232}"),
            "%s", s.producer);
  /* Rings: 4 stages of A [128, 64] and B [64, 256]; full barriers take
   * the producer's one arrival, empty ones one per consumer warpgroup;
   * the epilogue's two 64-column slots. */
  cr_expect(strstr(s.all, "ring = 1} : smem<bf16>[4, 128, 64]") && strstr(s.all, "ring = 1} : smem<bf16>[4, 64, 256]"),
            "%s", s.all);
  cr_expect(strstr(s.all, "ring = 1} : smem<bf16>[2, 128, 64]"), "%s", s.all);
  cr_expect(strstr(s.all, "mbar_alloc {count = 1} : mbar[4]"), "%s", s.all);
  cr_expect(strstr(s.all, "count = 2, first_parity = 1} : mbar[4]"), "%s", s.all);
  /* Producer: the tile loop and the k loop, without loop-carried values;
   * per iteration a position, a wait for a free slot (the parity given),
   * the bytes of both tiles (128x64 + 64x256 bf16) and the copies. */
  cr_expect_eq(harness_count(s.producer, "iter("), 0, "%s", s.producer);
  cr_expect_eq(harness_count(s.producer, "for %"), 2, "%s", s.producer);
  IN_ORDER(s.producer, "producer", "for %", "for %", "ring_next", "mbar_wait %", "{elected = 1}", "mbar_expect",
           "{bytes = 49152}", "tma_load", "tma_load", "yield");
  static const char *const consumer_only[] = {"wgmma", "smem_store", "barrier", "tma_store", "mbar_arrive", "const 0.0"};
  for (size_t i = 0; i < sizeof consumer_only / sizeof consumer_only[0]; i++)
    cr_expect_eq(harness_count(s.producer, consumer_only[i]), 0, "'%s' in the producer:\n%s", consumer_only[i],
                 s.producer);
  char *wait = harness_line_with(s.producer, "mbar_wait");
  cr_expect(wait && harness_count(wait, ",") == 2, "a wait with its parity: %s", wait);
  free(wait);
  /* Consumer: no copies; waits for full slots (all threads, the parity
   * given), one wgmma in flight, releases, then the epilogue. */
  cr_expect_eq(harness_count(s.consumer, "tma_load"), 0, "%s", s.consumer);
  cr_expect_eq(harness_count(s.consumer, "mbar_expect"), 0, "%s", s.consumer);
  cr_expect_eq(harness_count(s.consumer, "elected"), 0, "%s", s.consumer);
  IN_ORDER(s.consumer, "consumer", "for %", "iter(", "ring_next", "mbar_wait %", "= wgmma %", "{pending = 1}",
           "mbar_arrive", "yield", "wgmma_wait", "ring_next", "mbar_arrive", "tma_store_wait", "{pending = 1}", "barrier",
           "smem_store", "fence_async", "barrier", "tma_store", "{deferred = 1}", "{column = 64}", "{column = 128}",
           "{column = 192}", "tma_store %", "{deferred = 1}", "yield", "tma_store_wait", "yield");
  /* C leaves in four 64-column pieces, each waiting for the piece two
   * before it (its slot) to be read */
  cr_expect_eq(harness_count(s.consumer, "tma_store %"), 4, "%s", s.consumer);
  cr_expect_eq(harness_count(s.consumer, "tma_store_wait %"), 5, "%s", s.consumer);
  /* The allocations stay before the split (initialized by all warps). */
  const char *first_split = strstr(s.all, "warp_split");
  const char *last_alloc = strstr(s.all, "mbar_alloc {offset");
  cr_expect(last_alloc && last_alloc < first_split, "%s", s.all);
  cr_expect(strstr(s.all, "// layouts of gemm_ws (8 warps)"), "layouts cover the consumers:\n%s", s.all);
  split_free(&s);
}

/* One consumer warpgroup: its own releases (count 1). */
Test(warpspec, one_consumer_warpgroup_releases_alone) {
  Split s = split_of("lang/std/gemm_ws.tile", (const char *[]){"CONSUMERS", "1", "BLOCK_N", "128", "STAGES", "5", NULL});
  cr_expect(strstr(s.all, "warps(8) warp_specialize(1, 1, 40, 232)"), "%s", s.all);
  cr_expect(strstr(s.all, "count = 1, first_parity = 1} : mbar[5]"), "%s", s.all);
  cr_expect(strstr(s.all, "// layouts of gemm_ws (4 warps)"), "%s", s.all);
  split_free(&s);
}

/* ---- PTX and metadata -------------------------------------------------- */

Test(warpspec, ptx_pins_the_entry_count_moves_registers_and_names_the_consumer_barrier) {
  tc_compilation *c = generated("lang/std/gemm_ws.tile", NULL);
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  cr_assert(ptx);
  cr_expect(strstr(ptx, ".maxntid 384, 1, 1"), "12 warps");
  cr_expect(strstr(ptx, ".minnctapersm 1"), "without it ptxas ignores setmaxnreg");
  cr_expect_eq(harness_count(ptx, "setmaxnreg.dec.sync.aligned.u32 40;"), 1);
  cr_expect_eq(harness_count(ptx, "setmaxnreg.inc.sync.aligned.u32 232;"), 1);
  /* the whole block meets once (barrier initialization); after the split
   * only the 256 consumer threads do, on barrier 1 */
  cr_expect_eq(harness_count(ptx, "bar.sync \t0;") + harness_count(ptx, "barrier.sync \t0;"), 1, "%s", ptx);
  cr_expect_gt(harness_count(ptx, "barrier.sync \t1, 256;"), 0, "%s", ptx);
  cr_expect(strstr(tc_kernel_meta(c, 0), "\nwarps 12\n"), "%s", tc_kernel_meta(c, 0));
  free(ptx);
  tc_free(c);
}

/* A split kernel without a pipelined loop: the producers have nothing
 * to issue; the consumers run the kernel. */
Test(warpspec, kernel_without_pipelined_loop_runs_on_the_consumers) {
  const char *src = "@warp_specialize(producers = 1, consumers = 2)\n"
                    "kernel k(h: *i32, x: *i32) { atomic_add(h + load(x + arange(0, 64)), 1); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  cr_expect(strstr(tc_kernel_meta(c, 0), "\nwarps 12\n"), "%s", tc_kernel_meta(c, 0));
  char *low = tc_emit(c, TC_EMIT_LOWERED);
  const char *ws = strstr(low, "warp_split");
  cr_expect(ws && strstr(ws, "atomic_add"), "%s", low);
  cr_expect(strstr(low, "(8 warps)"), "%s", low);
  free(low);
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  cr_expect(strstr(ptx, ".maxntid 384, 1, 1"), "%s", ptx);
  free(ptx);
  tc_free(c);
}

/* ---- errors ------------------------------------------------------------ */

static void expect_generate_error(const char *src, const char *message) {
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_expect_not(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", src);
  cr_expect(strstr(tc_diagnostics(c), message), "want '%s', got:\n%s", message, tc_diagnostics(c));
  tc_free(c);
}

/* A GEMM body: `ANN` before the kernel, `LOOP` before the k loop, B's
 * tile from `b_load`; p (an i32 pointer) and q (bf16, aligned) are there
 * for coordinates and pointer loads. */
static char *gemm_src(const char *ann, const char *loop, const char *b_load) {
  static char buf[SOURCE_MAX];
  snprintf(buf, sizeof buf,
           "%s\nkernel k(c: tensor<bf16, 2>, a: tensor<bf16, 2>, b: tensor<bf16, 2>, p: *i32, q: *bf16 align(16),\n"
           "         k: i32) {\n"
           "  var acc = zeros([128, 128], f32);\n"
           "  let off = load(p);\n"
           "  let tot = sum(load(p + arange(0, 16)), 0);\n"
           "  %s\n"
           "  for k0 in range(0, k, 64) {\n"
           "    let at = load_block(a, [0, k0], [128, 64]);\n"
           "    let bt = %s;\n"
           "    acc = dot(at, bt, acc);\n"
           "  }\n"
           "  store_block(c, [0, 0], acc as bf16);\n"
           "}\n",
           ann, loop, b_load);
  return buf;
}

static const char tma_b[] = "load_block(b, [k0, 0], [64, 128])";

Test(warpspec, consumer_counts_must_be_powers_of_two) {
  expect_generate_error(gemm_src("@warp_specialize(1, 3, 32, 160)", "@pipeline(stages = 3)", tma_b),
                        "t.tile:2:1: error: GPU back end: '@warp_specialize' with 3 consumer warpgroups: tile layouts need a power "
                        "of two of consumer warps (1, 2, 4 or 8 consumer warpgroups)");
}

Test(warpspec, loop_level_needs_the_kernels_warps) {
  expect_generate_error(gemm_src("@warps(4)", "@pipeline(stages = 3) @warp_specialize(1, 1)", tma_b),
                        "'@warp_specialize(1, 1)' on a loop needs a kernel of 8 warps (it has 4): give the kernel "
                        "@warps(8), or put @warp_specialize on the kernel");
}

Test(warpspec, loop_level_split_is_acted_on) {
  const char *src = gemm_src("@warps(8)", "@pipeline(stages = 3) @warp_specialize(1, 1)", tma_b);
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  char *low = tc_emit(c, TC_EMIT_LOWERED);
  cr_expect(strstr(low, "warp_split {producers = 1, consumers = 1"), "%s", low);
  cr_expect(strstr(low, "(4 warps)"), "%s", low);
  free(low);
  tc_free(c);
}

Test(warpspec, loop_level_on_cp_async_loads_is_an_error) {
  expect_generate_error(
      gemm_src("@warps(8)", "@pipeline(stages = 3) @warp_specialize(1, 1)",
               "load(q + (k0 + arange(0, 64))[:, None] * 128 + arange(0, 128)[None, :])"),
      "'@warp_specialize' on this loop: its producer warps issue TMA copies, so the loads feeding its dots must all "
      "be load_block (tensor descriptors)");
}

Test(warpspec, loop_level_on_a_loop_that_is_not_pipelined_is_an_error) {
  expect_generate_error(gemm_src("@warps(8)", "@warp_specialize(1, 1)", tma_b),
                        "'@warp_specialize' on a loop that is not pipelined");
}

Test(warpspec, coordinates_from_the_consumers_values_are_an_error) {
  /* the B tile's row comes from a reduction over a loaded tile */
  expect_generate_error(
      gemm_src("@warp_specialize(1, 2)", "@pipeline(stages = 3)", "load_block(b, [k0 + tot, 0], [64, 128])"),
      "'@warp_specialize': the producer warps issue this loop's copies, but their coordinates depend on a tile");
}

/* A scalar loaded before the loop: the producer loads it too. */
Test(warpspec, coordinates_from_scalar_loads_are_fine) {
  const char *src = gemm_src("@warp_specialize(1, 2)", "@pipeline(stages = 3)",
                             "load_block(b, [k0 + off, 0], [64, 128])");
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  char *low = tc_emit(c, TC_EMIT_LOWERED);
  const char *ws = strstr(low, "warp_split");
  const char *cons = ws ? strstr(ws, "\n  } {\n") : NULL;
  cr_assert(cons, "%s", low);
  cr_expect(strstr(ws, "= load %p") && strstr(ws, "= load %p") < cons, "the producer loads p itself:\n%s", low);
  free(low);
  tc_free(c);
}

Test(warpspec, tiles_over_the_consumer_registers_are_an_error) {
  /* 128 x 256 f32 over one consumer warpgroup: 256 registers a thread */
  const char *src = "@warp_specialize(1, 1, 40, 232)\n"
                    "kernel k(o: *f32, a: *f32) { let r = arange(0, 128); let s = arange(0, 256);\n"
                    "  let t = load(a + r[:, None] * 256 + s[None, :]);\n"
                    "  store(o + r[:, None] * 256 + s[None, :], t * 2.0); }";
  expect_generate_error(src, "the tile f32[128, 256] needs 256 registers per thread on 4 consumer warps (a consumer "
                             "thread has 232: @warp_specialize's consumer_registers)");
}

/* ---- results do not depend on the annotation (interpreter) -------------- */

Test(warpspec, removing_warp_specialize_changes_no_result) {
  size_t len;
  char *src = harness_read_source("lang/std/gemm_ws.tile", &len);
  cr_assert(src);
  char *at = strstr(src, "@warp_specialize(");
  cr_assert(at);
  char *end = strchr(at, ')');
  cr_assert(end);
  char bare[SOURCE_MAX];
  int head = (int)(at - src);
  snprintf(bare, sizeof bare, "%.*s@warps(8)%s", head, src, end + 1);
  const int m = 136, n = 264, k = 72;
  HBuf a = hbuf_new("bf16", (size_t)m * k, "a"), b = hbuf_new("bf16", (size_t)k * n, "b");
  HBuf c1 = hbuf_new("bf16", (size_t)m * n, "c"), c2 = hbuf_new("bf16", (size_t)m * n, "c");
  Rng rng = {41};
  hbuf_fill_uniform(&a, &rng, -1, 1);
  hbuf_fill_uniform(&b, &rng, -1, 1);
  const char *texts[2] = {src, bare};
  HBuf *outs[2] = {&c1, &c2};
  for (int v = 0; v < 2; v++) {
    tc_compilation *c = tc_compile("gemm_ws.tile", texts[v], strlen(texts[v]), NULL);
    cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
    hbuf_poison(outs[v]);
    tc_arg args[6] = {{.p = outs[v]->data, .shape = {m, n}, .strides = {n, 1}},
                      {.p = a.data, .shape = {m, k}, .strides = {k, 1}},
                      {.p = b.data, .shape = {k, n}, .strides = {n, 1}},
                      {.i = m},
                      {.i = n},
                      {.i = k}};
    const HBuf *bufs[3] = {outs[v], &a, &b};
    harness_run(c, (int64_t[3]){2, 1, 1}, args, 6, bufs, 3);
    tc_free(c);
  }
  cr_expect(memcmp(c1.data, c2.data, (size_t)m * n * 2) == 0, "C differs without @warp_specialize");
  double nonzero = 0;
  for (size_t i = 0; i < (size_t)m * n; i++) nonzero += hbuf_get(&c1, i) != 0;
  cr_expect_gt(nonzero, m * n / 2, "C was computed");
  hbuf_free(&a), hbuf_free(&b), hbuf_free(&c1), hbuf_free(&c2);
  free(src);
}

/* ---- the fused epilogue --------------------------------------------------- */

/* gemm_ws_bias_act assembles with ptxas without spills or wgmma notes
 * for the activations the std configurations use (none, relu, gelu in
 * its tanh form); erf and silu, whose libdevice code and divisions need
 * more temporaries next to the 128 accumulator registers, spill a little
 * in the epilogue (lang/std/gemm_ws.tile says so) but keep the mainloop
 * unserialized. */
Test(warpspec, fused_epilogue_assembles_without_spills) {
  if (access("/usr/local/cuda/bin/ptxas", X_OK) != 0) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  static const char *const acts[] = {"0", "1", "2", "3", "4"};
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
    const char *defs[] = {"ACT", acts[i], NULL};
    tc_compilation *c = harness_compile("lang/std/gemm_ws.tile", "gemm_ws_bias_act", defs);
    cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_PTXAS}), "%s", tc_diagnostics(c));
    tc_kernel_stats st;
    cr_assert(tc_kernel_get_stats(c, 0, &st));
    bool may_spill = !strcmp(acts[i], "2") || !strcmp(acts[i], "4");
    if (!may_spill)
      cr_expect(st.spill_store_bytes == 0 && st.spill_load_bytes == 0, "ACT %s: %d/%d bytes of spills", acts[i],
                st.spill_store_bytes, st.spill_load_bytes);
    cr_expect_eq(st.wgmma_notes, 0, "ACT %s: %d wgmma notes", acts[i], st.wgmma_notes);
    tc_free(c);
  }
}

/* ---- ping-pong consumers -------------------------------------------------- */

/* The split of gemm_ws_pingpong: the tile loop's iterations go to the
 * consumer warpgroups in turn; the other warpgroup walks the producer's
 * loop to keep its ring positions; the C buffer is one per warpgroup. */
Test(warpspec, pingpong_consumers_take_tiles_in_turn) {
  tc_compilation *c = harness_compile("lang/std/gemm_ws.tile", "gemm_ws_pingpong", NULL);
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  char *all = tc_emit(c, TC_EMIT_LOWERED);
  cr_assert(all);
  /* one consumer arrives per slot; two C buffers of [128, 128] */
  cr_expect(strstr(all, "count = 1, first_parity = 1} : mbar[4]"), "%s", all);
  cr_expect(strstr(all, "ring = 1} : smem<bf16>[2, 128, 128]"), "%s", all);
  cr_expect(strstr(all, "// layouts of gemm_ws_pingpong (4 warps)"), "%s", all);
  const char *cons = strstr(all, "\n  } {\n");
  cr_assert(cons, "%s", all);
  IN_ORDER(cons, "consumer", "consumer_id", "smem_index %", "for %", "{producers = 1, consumers = 2", "rem %",
           "cmp_eq", "if %", "for %", "iter(", "wgmma", "tma_store", "} else {", "for %", "ring_next", "yield");
  /* the walk of the other warpgroup's tiles copies nothing and waits for nothing */
  const char *walk = strstr(cons, "} else {\n        %");
  cr_assert(walk, "%s", cons);
  const char *walk_end = strstr(walk, "\n      }\n");
  cr_assert(walk_end);
  char *w = strndup(walk, (size_t)(walk_end - walk));
  cr_expect_eq(harness_count(w, "mbar_"), 0, "%s", w);
  cr_expect_eq(harness_count(w, "tma_"), 0, "%s", w);
  cr_expect_eq(harness_count(w, "ring_next"), 1, "%s", w);
  free(w);
  free(all);
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  /* each warpgroup's barriers: ids 2 + consumer, 128 threads */
  cr_expect_gt(harness_count(ptx, "barrier.sync \t%r"), 0, "%s", ptx);
  cr_expect_eq(harness_count(ptx, ", 256;"), 0, "no barrier of both consumer warpgroups");
  free(ptx);
  tc_free(c);
}

Test(warpspec, pingpong_assembles_without_spills) {
  if (access("/usr/local/cuda/bin/ptxas", X_OK) != 0) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  static const KernelSpec pp[] = {{"lang/std/gemm_ws.tile", {NULL}},
                                  {"lang/std/gemm_ws.tile", {"STAGES", "5", NULL}},
                                  {"lang/std/gemm_ws.tile", {"A_TRANS", "true", "B_TRANS", "true", NULL}}};
  for (size_t i = 0; i < sizeof pp / sizeof pp[0]; i++) {
    tc_compilation *c = harness_compile(pp[i].path, "gemm_ws_pingpong", pp[i].defines);
    cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_PTXAS}), "%s", tc_diagnostics(c));
    tc_kernel_stats st;
    cr_assert(tc_kernel_get_stats(c, 0, &st));
    cr_expect(st.spill_store_bytes == 0 && st.spill_load_bytes == 0, "case %zu: spills", i);
    cr_expect_eq(st.wgmma_notes, 0, "case %zu: wgmma notes", i);
    tc_free(c);
  }
}

Test(warpspec, pingpong_loop_cannot_carry_values) {
  const char *src = "@warp_specialize(1, 2)\n"
                    "kernel k(c: tensor<bf16, 2>, a: tensor<bf16, 2>, b: tensor<bf16, 2>, k: i32, t: i32) {\n"
                    "  var s = 0;\n"
                    "  @warp_specialize(1, 2)\n"
                    "  for tile in range(program_id(0), t, num_programs(0)) {\n"
                    "    var acc = zeros([128, 128], f32);\n"
                    "    @pipeline(stages = 3)\n"
                    "    for k0 in range(0, k, 64) {\n"
                    "      acc = dot(load_block(a, [0, k0], [128, 64]), load_block(b, [k0, 0], [64, 128]), acc);\n"
                    "    }\n"
                    "    store_block(c, [s, 0], acc as bf16);\n"
                    "    s = s + 128;\n"
                    "  }\n"
                    "}\n";
  expect_generate_error(src, "ping-pong consumers take the iterations of this loop in turn, so it cannot carry values");
}

Test(warpspec, pingpong_consumers_cannot_share_scratch) {
  /* a column sum of the accumulator crosses warps: scratch shared memory */
  const char *src = "@warp_specialize(1, 2)\n"
                    "kernel k(o: *f32, a: tensor<bf16, 2>, b: tensor<bf16, 2>, k: i32, t: i32) {\n"
                    "  @warp_specialize(1, 2)\n"
                    "  for tile in range(program_id(0), t, num_programs(0)) {\n"
                    "    var acc = zeros([128, 128], f32);\n"
                    "    @pipeline(stages = 3)\n"
                    "    for k0 in range(0, k, 64) {\n"
                    "      acc = dot(load_block(a, [0, k0], [128, 64]), load_block(b, [k0, 0], [64, 128]), acc);\n"
                    "    }\n"
                    "    store(o + tile * 128 + arange(0, 128), sum(acc, 0));\n"
                    "  }\n"
                    "}\n";
  expect_generate_error(src, "which ping-pong consumer warpgroups would share; use cooperative consumers");
}
