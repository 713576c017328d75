/* test_pair.c - two products over one A tile as one wgmma instruction
 * (nvptx/schedule_pair.c, the pair lowering of lower_wgmma.c), without a
 * GPU:
 *   - mlp_gate_up (bf16, N-major weights): its two rings become one of
 *     twice the stages, the first product is marked pair = 1 and the
 *     second pair = 2, and the PTX
 *     issues m64n256 instructions only, one commit group where there were
 *     two, and the loop's waits leave one group in flight instead of two
 *     (the same products: the previous iteration's); with
 *     tc_codegen_options.separate_products, two rings and m64n128 only;
 *   - mlp_gate_up_fp8 (K-major weights one swizzle atom wide): m64n256k32;
 *   - a kernel of its own with 64-wide B tiles pairs into m64n128 when the
 *     two products read the same A tile, and does not when they read
 *     different ones;
 *   - no other standard kernel changes (GEMM, attention).
 * The GPU suite checks the results (tests/gpu/gpu_mlp.c).
 * Built only where the back end (LLVM) is (tests/meson.build).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Stage `what` of c generated with pairs or with separate_products (malloc'd;
 * frees c). */
static char *emit_from(tc_compilation *c, bool pair, tc_emit_kind what) {
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE, .separate_products = !pair}), "%s",
            tc_diagnostics(c));
  char *out = tc_emit(c, what);
  cr_assert_not_null(out);
  tc_free(c);
  return out;
}

static char *emit(const char *path, const char *kernel, const char *const *defines, bool pair, tc_emit_kind what) {
  return emit_from(harness_compile(path, kernel, defines), pair, what);
}

Test(pair, gate_and_up_become_one_instruction) {
  char *ir = emit("lang/std/mlp.tile", "mlp_gate_up", NULL, true, TC_EMIT_LOWERED);
  cr_expect_eq(harness_count(ir, "{pair = 1}"), 1, "%s", ir);
  cr_expect_eq(harness_count(ir, "{pair = 2}"), 1, "%s", ir);
  /* x's ring, and the weights' two rings of 4 stages as one of 8 */
  cr_expect(strstr(ir, "ring = 1} : smem<bf16>[8, 64, 128]") != NULL, "%s", ir);
  cr_expect_eq(harness_count(ir, "ring = 1} : smem<bf16>[4, 64, 128]"), 0, "%s", ir);
  char *ptx = emit("lang/std/mlp.tile", "mlp_gate_up", NULL, true, TC_EMIT_PTX);
  char *sep = emit("lang/std/mlp.tile", "mlp_gate_up", NULL, false, TC_EMIT_PTX);
  cr_expect_gt(harness_count(ptx, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"), 0);
  cr_expect_eq(harness_count(ptx, "m64n128k16"), 0);
  cr_expect_eq(harness_count(sep, "m64n256k16"), 0);
  cr_expect_gt(harness_count(sep, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), 0);
  /* half the instructions, one group fewer (the loop body's second) */
  cr_expect_eq(2 * harness_count(ptx, "wgmma.mma_async"), harness_count(sep, "wgmma.mma_async"));
  cr_expect_eq(harness_count(ptx, "wgmma.commit_group") + 1, harness_count(sep, "wgmma.commit_group"));
  char *sep_ir = emit("lang/std/mlp.tile", "mlp_gate_up", NULL, false, TC_EMIT_LOWERED);
  cr_expect_eq(harness_count(sep_ir, "pair ="), 0, "%s", sep_ir);
  cr_expect_eq(harness_count(sep_ir, "ring = 1} : smem<bf16>[4, 64, 128]"), 2, "%s", sep_ir);
  /* the loop's two waits: the previous iteration's products done */
  cr_expect_eq(harness_count(ir, "{pending = 1}"), 2, "%s", ir);
  cr_expect_eq(harness_count(ir, "{pending = 2}"), 0, "%s", ir);
  cr_expect_eq(harness_count(sep_ir, "{pending = 2}"), 2, "%s", sep_ir);
  free(ir), free(ptx), free(sep), free(sep_ir);
}

Test(pair, k_major_fp8_weights_pair_too) {
  char *ptx = emit("lang/std/mlp.tile", "mlp_gate_up_fp8", NULL, true, TC_EMIT_PTX);
  cr_expect_gt(harness_count(ptx, "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"), 0);
  cr_expect_eq(harness_count(ptx, "m64n128k32"), 0);
  free(ptx);
}

/* Two products of 64-wide B tiles; SAME: they read the same A tile
 * (malloc'd source). */
static char *two_products(bool same) {
  const char *body = same ? "        let xt = load_block(x, [0, k0], [128, 64]);\n"
                            "        a = dot(xt, load_block(w, [k0, 0], [64, 64]), a);\n"
                            "        b = dot(xt, load_block(u, [k0, 0], [64, 64]), b);\n"
                          : "        a = dot(load_block(x, [0, k0], [128, 64]), load_block(w, [k0, 0], [64, 64]), a);\n"
                            "        b = dot(load_block(y, [0, k0], [128, 64]), load_block(u, [k0, 0], [64, 64]), b);\n";
  const char *fmt = "@warp_specialize(1, 2, 24, 240)\n"
                    "kernel k(o: tensor<bf16, 2>, x: tensor<bf16, 2>, y: tensor<bf16, 2>, w: tensor<bf16, 2>,\n"
                    "         u: tensor<bf16, 2>, n: i32) {\n"
                    "    var a = zeros([128, 64], f32);\n"
                    "    var b = zeros([128, 64], f32);\n"
                    "    @pipeline(stages = 3)\n"
                    "    for k0 in range(0, n, 64) {\n%s    }\n"
                    "    store_block(o, [0, 0], (a * b) as bf16);\n"
                    "}\n";
  size_t n = strlen(fmt) + strlen(body) + 1;
  char *src = malloc(n);
  cr_assert_not_null(src);
  snprintf(src, n, fmt, body);
  return src;
}

/* Source text compiled with pairs (malloc'd stage `what`). */
static char *emit_paired(const char *src, tc_emit_kind what) {
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  return emit_from(c, true, what);
}

Test(pair, only_products_of_one_a_tile_pair) {
  char *same = two_products(true), *other = two_products(false);
  char *ir = emit_paired(same, TC_EMIT_LOWERED), *ptx = emit_paired(same, TC_EMIT_PTX);
  cr_expect_eq(harness_count(ir, "{pair = 1}"), 1, "%s", ir);
  cr_expect(strstr(ir, "ring = 1} : smem<bf16>[6, 64, 64]") != NULL, "%s", ir);
  cr_expect_eq(harness_count(ir, "{pending = 1}"), 2, "%s", ir);
  cr_expect_gt(harness_count(ptx, "m64n128k16"), 0);
  cr_expect_eq(harness_count(ptx, "m64n64k16"), 0);
  char *ir2 = emit_paired(other, TC_EMIT_LOWERED), *ptx2 = emit_paired(other, TC_EMIT_PTX);
  cr_expect_eq(harness_count(ir2, "pair ="), 0, "%s", ir2);
  cr_expect_eq(harness_count(ptx2, "m64n128k16"), 0);
  cr_expect_gt(harness_count(ptx2, "m64n64k16"), 0);
  free(ir), free(ptx), free(ir2), free(ptx2), free(same), free(other);
}

/* Kernels with one product per A tile, or products with different A
 * tiles, are as they were even when pairs are asked for. */
Test(pair, other_std_kernels_have_no_pairs) {
  static const struct {
    const char *path, *kernel;
  } ks[] = {{"lang/std/gemm_ws.tile", "gemm_ws"},
            {"lang/std/flash_attention_ws.tile", "flash_attention_ws"},
            {"lang/std/flash_attention_bwd_ws.tile", "attention_bwd_dkdv_ws"},
            {"lang/std/flash_attention_bwd_ws.tile", "attention_bwd_dq_ws"},
            {"lang/std/mlp.tile", "mlp_down"},
            {"lang/std/moe.tile", "moe_gemm_ws"}};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    char *ir = emit(ks[i].path, ks[i].kernel, NULL, true, TC_EMIT_LOWERED);
    cr_expect_eq(harness_count(ir, "pair ="), 0, "%s %s", ks[i].path, ks[i].kernel);
    free(ir);
  }
  /* the gated grouped GEMM pairs */
  char *ir = emit("lang/std/moe.tile", "moe_gemm_ws", (const char *const[]){"GATED", "true", NULL}, true,
                  TC_EMIT_LOWERED);
  cr_expect_eq(harness_count(ir, "{pair = 1}"), 1, "%s", ir);
  free(ir);
}
