/* test_cluster.c - @cluster and the multicast copies it enables
 * (sema/irgen.c, nvptx/schedule_cluster.c, the pipeliner's multicast
 * decision, lower_tma.c, the PTX directive and the metadata line).
 *
 *   - the annotation: its range and where it may stand; the cluster
 *     queries in the interpreter, and the grid rule (a multiple of C);
 *   - gemm_ws with CLUSTER 2: B's copies (the same in both programs of a
 *     cluster) are multicast and A's are not; the empty barriers count the
 *     consumers of both programs and are released in both; with CLUSTER 1
 *     nothing of this;
 *   - the analysis proves, it does not assume: the same kernel walking
 *     tiles by program_id(0) multicasts nothing;
 *   - PTX: .reqnctapercluster after .maxntid, the multicast copies, the
 *     remote arrivals by mapa (without a cluster-scope release, which
 *     ptxas turns into a GPU-wide memory barrier per arrival), cluster
 *     barriers after the barrier set-up and before the exit;
 *   - the metadata's cluster line.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* Room for gemm_ws.tile with one line changed. */
#define SOURCE_MAX 16384

/* Compiles source text, with defines (NAME, VALUE pairs, NULL-ended)
 * and only `kernel` when given. */
static tc_compilation *compile_text(const char *src, const char *kernel, const char *const *defines) {
  tc_define defs[8];
  int n = 0;
  for (; defines && defines[2 * n] && n < 8; n++) defs[n] = (tc_define){defines[2 * n], defines[2 * n + 1]};
  tc_options o = {.kernel = kernel, .defines = defs, .ndefines = n};
  return tc_compile("cluster.tile", src, strlen(src), &o);
}

static void expect_error(const char *src, const char *part) {
  tc_compilation *c = compile_text(src, NULL, NULL);
  cr_expect_gt(tc_error_count(c), 0, "accepted: %s", src);
  cr_expect(strstr(tc_diagnostics(c), part), "expected '%s' in:\n%s", part, tc_diagnostics(c));
  tc_free(c);
}

/* ---- the annotation and the queries ---- */

Test(cluster, annotation_range_and_place) {
  expect_error("@cluster(0) kernel k(o: *i32) { store(o, 1); }",
               "1:1: error: '@cluster' needs a cluster size between 1 and 8 (got 0)");
  expect_error("@cluster(9) kernel k(o: *i32) { store(o, 1); }", "between 1 and 8 (got 9)");
  expect_error("kernel k(o: *i32, n: i32) { @cluster(2) for i in range(0, n) { store(o, i); } }",
               "'@cluster' cannot be applied to for loops; it applies to kernels");
  expect_error("kernel k(o: *i32, n: i32) { store(o, cluster_id(0)); }", "'cluster_id' takes 0 arguments (got 1)");
}

static const char queries[] = "@cluster(C)\n"
                              "kernel k(out: *i32, const C: i32 = 1) {\n"
                              "    let p = program_id(0) * 4;\n"
                              "    store(out + p, cluster_id());\n"
                              "    store(out + p + 1, cluster_rank());\n"
                              "    store(out + p + 2, num_clusters());\n"
                              "    store(out + p + 3, cluster_size());\n"
                              "}\n";

static bool run_queries(const char *C, int64_t programs, int32_t *out, char **error) {
  tc_compilation *c = compile_text(queries, NULL, (const char *[]){"C", C, NULL});
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  tc_arg arg = {.p = out};
  tc_buffer buf = {out, (size_t)programs * 4 * sizeof *out, "out"};
  bool ok = tc_interpret(c, 0, (int64_t[3]){programs, 1, 1}, &arg, 1, &buf, 1, 0, error);
  tc_free(c);
  return ok;
}

Test(cluster, queries_in_the_interpreter) {
  static const char *const sizes[] = {"1", "2", "4"};
  for (int s = 0; s < 3; s++) {
    int C = atoi(sizes[s]);
    int32_t out[8 * 4];
    for (int i = 0; i < 32; i++) out[i] = -7;
    char *err = NULL;
    cr_assert(run_queries(sizes[s], 8, out, &err), "%s", err);
    for (int p = 0; p < 8; p++) {
      cr_expect_eq(out[4 * p], p / C, "cluster_id of program %d (C %d)", p, C);
      cr_expect_eq(out[4 * p + 1], p % C, "cluster_rank of program %d (C %d)", p, C);
      cr_expect_eq(out[4 * p + 2], 8 / C);
      cr_expect_eq(out[4 * p + 3], C);
    }
  }
  int32_t out[6 * 4];
  char *err = NULL;
  cr_expect(!run_queries("4", 6, out, &err), "a grid of 6 for clusters of 4 ran");
  cr_expect(err && strstr(err, "grid size 6 in x is not a multiple of the cluster size 4 (kernel 'k' has '@cluster(4)')"),
            "%s", err ? err : "(no message)");
  free(err);
}

/* ---- gemm_ws: what is multicast ---- */

static tc_compilation *generated(const char *src, const char *const *defines) {
  size_t len;
  char *std = src ? NULL : harness_read_source("lang/std/gemm_ws.tile", &len);
  tc_compilation *c = compile_text(src ? src : std, "gemm_ws", defines);
  free(std);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  return c;
}

static char *emitted(const char *src, const char *const *defines, tc_emit_kind what) {
  tc_compilation *c = generated(src, defines);
  char *text = tc_emit(c, what);
  tc_free(c);
  return text;
}

static const char *const cluster2[] = {"CLUSTER", "2", NULL};

Test(cluster, gemm_ws_multicasts_the_shared_b_copies) {
  tc_compilation *c = generated(NULL, cluster2);
  cr_expect(!strstr(tc_diagnostics(c), "warning"), "%s", tc_diagnostics(c));
  tc_free(c);
  char *l = emitted(NULL, cluster2, TC_EMIT_LOWERED);
  cr_expect(strstr(l, "warps(12) cluster(2) warp_specialize(1, 2, 40, 232)"), "%s", l);
  /* A's copy at (m0, k0) differs between the two programs; B's at (k0, n0) is the same */
  char *a = harness_line_with(l, "tma_load %");
  cr_assert(a);
  char *b = harness_line_with(strstr(l, a) + strlen(a), "tma_load %");
  cr_assert(b);
  cr_expect(strstr(a, ", %a, ") && !strstr(a, "multicast"), "%s", a);
  cr_expect(strstr(b, ", %b, ") && strstr(b, "{multicast = 2}"), "%s", b);
  cr_expect_eq(harness_count(l, "multicast"), 1, "%s", l);
  /* empty slots wait for 2 consumer warpgroups x 2 programs, and are
   * released in both programs (in the loop and after it) */
  cr_expect(strstr(l, "count = 4, first_parity = 1} : mbar[4]"), "%s", l);
  cr_expect_eq(harness_count(l, "mbar_arrive %"), 2, "%s", l);
  cr_expect_eq(harness_count(l, "{cluster = 2}"), 2, "%s", l);
  free(a), free(b), free(l);
  l = emitted(NULL, NULL, TC_EMIT_LOWERED);
  cr_expect(!strstr(l, "cluster(") && !strstr(l, "multicast") && !strstr(l, "{cluster"), "CLUSTER 1:\n%s", l);
  cr_expect(strstr(l, "count = 2, first_parity = 1} : mbar[4]"), "%s", l);
  free(l);
}

/* The same kernel walking its tiles from program_id(0) (the same tiles,
 * but nothing proves B's coordinates equal within a cluster): no
 * multicast, no remote releases. */
Test(cluster, unproven_coordinates_are_not_multicast) {
  size_t len;
  char *src = harness_read_source("lang/std/gemm_ws.tile", &len);
  cr_assert(src && len + 64 < SOURCE_MAX);
  const char *from = "range(cluster_id(), ";
  char *at = strstr(src, from);
  cr_assert(at);
  char changed[SOURCE_MAX];
  snprintf(changed, sizeof changed, "%.*srange((program_id(0) - cluster_rank()) / CLUSTER, %s", (int)(at - src), src,
           at + strlen(from));
  tc_compilation *c = generated(changed, cluster2);
  cr_expect(strstr(tc_diagnostics(c), "warning: GPU back end: kernel 'gemm_ws' has '@cluster(2)' but no pipelined "
                                      "load_block is the same in every program of a cluster"),
            "%s", tc_diagnostics(c));
  char *l = tc_emit(c, TC_EMIT_LOWERED);
  tc_free(c);
  cr_expect(strstr(l, "cluster(2)"), "%s", l);
  cr_expect_eq(harness_count(l, "multicast"), 0, "%s", l);
  cr_expect_eq(harness_count(l, "{cluster = 2}"), 0, "%s", l);
  cr_expect(strstr(l, "count = 2, first_parity = 1} : mbar[4]"), "%s", l);
  free(l);
  free(src);
}

/* ---- PTX and metadata ---- */

Test(cluster, ptx_has_the_directive_multicast_copies_and_remote_releases) {
  char *ptx = emitted(NULL, cluster2, TC_EMIT_PTX);
  const char *maxntid = strstr(ptx, ".maxntid 384, 1, 1\n");
  cr_assert(maxntid, "%s", ptx);
  cr_expect(strncmp(maxntid + strlen(".maxntid 384, 1, 1\n"), ".reqnctapercluster 2, 1, 1\n", 27) == 0,
            "the cluster directive after .maxntid:\n%.200s", maxntid);
  /* B is 64 x 256: four 64 x 64 boxes, each issued by one program of the pair */
  cr_expect_eq(harness_count(ptx, ".multicast::cluster"), 4, "%s", ptx);
  cr_expect_eq(harness_count(ptx, "%cluster_ctarank"), 1, "%s", ptx);
  cr_expect_gt(harness_count(ptx, "mapa.shared::cluster.u32"), 0, "%s", ptx);
  cr_expect_gt(harness_count(ptx, "mbarrier.arrive.shared::cluster.b64"), 0, "%s", ptx);
  cr_expect_eq(harness_count(ptx, "mbarrier.arrive.release.cluster"), 0, "a GPU-wide fence per release:\n%s", ptx);
  /* after the barriers' initialization and before the exit */
  cr_expect_eq(harness_count(ptx, "barrier.cluster.arrive.release;"), 2, "%s", ptx);
  cr_expect_eq(harness_count(ptx, "barrier.cluster.wait.acquire;"), 2, "%s", ptx);
  free(ptx);
  ptx = emitted(NULL, NULL, TC_EMIT_PTX);
  cr_expect(!strstr(ptx, "reqnctapercluster") && !strstr(ptx, "multicast") && !strstr(ptx, "barrier.cluster") &&
                !strstr(ptx, "mapa"),
            "CLUSTER 1 uses no cluster feature");
  free(ptx);
}

Test(cluster, metadata_has_the_cluster_line) {
  tc_compilation *c = generated(NULL, cluster2);
  const char *meta = tc_kernel_meta(c, 0);
  cr_assert(meta);
  cr_expect(strstr(meta, "\nshared 230400\ncluster 2\nparam c desc "), "%s", meta);
  tc_free(c);
  c = generated(NULL, NULL);
  cr_expect(!strstr(tc_kernel_meta(c, 0), "cluster"), "%s", tc_kernel_meta(c, 0));
  tc_free(c);
}

/* ptxas takes the cluster kernel, without spills or serialized wgmmas */
Test(cluster, assembles_with_ptxas) {
  if (access("/usr/local/cuda/bin/ptxas", X_OK) != 0) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  size_t len;
  char *src = harness_read_source("lang/std/gemm_ws.tile", &len);
  tc_compilation *c = compile_text(src, "gemm_ws", cluster2);
  free(src);
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_PTXAS}), "%s", tc_diagnostics(c));
  tc_kernel_stats s;
  cr_assert(tc_kernel_get_stats(c, 0, &s));
  cr_expect_eq(s.spill_store_bytes + s.spill_load_bytes, 0);
  cr_expect_eq(s.wgmma_notes, 0);
  tc_free(c);
}
