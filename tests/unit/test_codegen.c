/* test_codegen.c - the NVPTX back end without a GPU:
 *   - every kernel of lang/std and tests/kernels (defaults and the
 *     specializations the GPU suite uses: every path of the two GEMMs,
 *     cp.async and TMA rings of 1 to 4 stages, transposed operands, f16,
 *     the FMA and mma.sync paths, the configurations of the
 *     warp-specialized GEMM) compiles to PTX that
 *     `ptxas -arch=sm_90a -v` accepts, with 0 bytes of spills and no
 *     ptxas wgmma notes (C75xx: ptxas serialized the wgmmas or inserted
 *     waits, which costs much of the tensor cores' speed silently);
 *   - golden checks on the PTX: an aligned contiguous f32 load becomes a
 *     .v4 load, a row reduction uses shfl.sync, exp uses ex2.approx; the
 *     GEMMs' wgmma, cp.async and TMA instructions and TMA boxes; flash
 *     attention's P @ V takes A from registers and its key loop has no
 *     barriers but the lowered IR's;
 *   - --emit=lowered shows layouts; the metadata and header agree with
 *     the kernel's signature; unsupported ops are clear errors.
 * Assembling skips where the CUDA toolkit (ptxas) is absent; the suite is
 * built only with the back end (LLVM). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static bool have_ptxas(void) { return access("/usr/local/cuda/bin/ptxas", X_OK) == 0; }

static tc_compilation *generate(const char *path, const char *const *defines, tc_linker linker) {
  tc_compilation *c = harness_compile(path, NULL, defines);
  tc_codegen_options o = {.linker = linker};
  cr_assert(tc_generate(c, &o), "%s: %s", path, tc_diagnostics(c));
  return c;
}

static const KernelSpec specs[] = {
    {"lang/std/softmax.tile", {NULL}},
    {"lang/std/softmax.tile", {"BLOCK", "32768", "WARPS", "16", NULL}},
    {"lang/std/layernorm.tile", {NULL}},
    {"lang/std/layernorm.tile", {"T", "bf16", "BLOCK", "4096", "WARPS", "8", NULL}},
    /* cp.async rings (3 stages: one wgmma in flight), the plain path, 2
     * and 4 stages, the widest tile, each orientation, f16 */
    {"lang/std/gemm.tile", {NULL}},
    {"lang/std/gemm.tile", {"STAGES", "1", NULL}},
    {"lang/std/gemm.tile", {"STAGES", "2", NULL}},
    {"lang/std/gemm.tile", {"STAGES", "4", NULL}},
    {"lang/std/gemm.tile", {"BLOCK_N", "256", "STAGES", "4", NULL}},
    {"lang/std/gemm.tile", {"A_TRANS", "true", NULL}},
    {"lang/std/gemm.tile", {"B_TRANS", "true", NULL}},
    {"lang/std/gemm.tile", {"A_TRANS", "true", "B_TRANS", "true", NULL}},
    {"lang/std/gemm.tile", {"T", "f16", NULL}},
    {"lang/std/gemm.tile", {"T", "f16", "TC", "bf16", NULL}},
    /* FMA units (f32 inputs) and mma.sync (tiles below a warpgroup's) */
    {"lang/std/gemm.tile", {"T", "f32", "BLOCK_M", "32", "BLOCK_N", "32", "BLOCK_K", "16", NULL}},
    {"lang/std/gemm.tile", {"BLOCK_M", "32", "BLOCK_N", "32", "BLOCK_K", "16", "WARPS", "2", NULL}},
    /* TMA rings under full/empty mbarriers, 1 to 4 stages, f32 output */
    {"lang/std/gemm_tma.tile", {NULL}},
    {"lang/std/gemm_tma.tile", {"STAGES", "1", NULL}},
    {"lang/std/gemm_tma.tile", {"STAGES", "2", NULL}},
    {"lang/std/gemm_tma.tile", {"STAGES", "3", NULL}},
    {"lang/std/gemm_tma.tile", {"BLOCK_N", "256", "STAGES", "4", NULL}},
    {"lang/std/gemm_tma.tile", {"A_TRANS", "true", NULL}},
    {"lang/std/gemm_tma.tile", {"B_TRANS", "true", NULL}},
    {"lang/std/gemm_tma.tile", {"TC", "f32", NULL}},
    /* fp8 (k32 instructions, both operands K-major) */
    {"lang/std/gemm_fp8.tile", {NULL}},
    {"lang/std/gemm_fp8.tile", {"T", "f8e5m2", "TC", "f32", "BLOCK_N", "128", "STAGES", "2", NULL}},
    /* warp-specialized, persistent: every configuration gemm_ws lists */
    {"lang/std/gemm_ws.tile", {NULL}},
    {"lang/std/gemm_ws.tile", {"BLOCK_N", "128", "STAGES", "4", NULL}},
    {"lang/std/gemm_ws.tile", {"BLOCK_N", "128", "STAGES", "5", "CONSUMERS", "1", NULL}},
    {"lang/std/gemm_ws.tile", {"A_TRANS", "true", "B_TRANS", "true", NULL}},
    {"lang/std/gemm_ws.tile", {"T", "f16", "TC", "f32", "BLOCK_N", "128", "STAGES", "4", NULL}},
    {"lang/std/gemm_ws.tile", {"STAGES", "3", NULL}},
    {"lang/std/flash_attention.tile", {NULL}},
    {"lang/std/flash_attention.tile", {"STAGES", "1", NULL}},
    {"lang/std/flash_attention.tile", {"CAUSAL", "true", NULL}},
    {"lang/std/flash_attention.tile", {"HEAD_DIM", "128", NULL}},
    {"lang/std/flash_attention.tile", {"HEAD_DIM", "128", "CAUSAL", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {NULL}},
    {"lang/std/flash_attention_ws.tile", {"CAUSAL", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "64", NULL}},
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "64", "CAUSAL", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "256", NULL}},
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "256", "CAUSAL", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {"CAUSAL", "true", "WINDOW", "256", "BSHD", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "64", "WINDOW", "100", NULL}},
    /* (the default at d64 and d128: two key blocks, Q in registers) */
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "64", "TWO_BLOCKS", "false", "Q_IN_REGISTERS", "false", NULL}},
    {"lang/std/flash_attention_ws.tile", {"TWO_BLOCKS", "false", "Q_IN_REGISTERS", "false", "CAUSAL", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {"BLOCK_N", "64", "TWO_BLOCKS", "true", "WINDOW", "100", NULL}},
    {"lang/std/flash_attention_ws.tile", {"Q_IN_REGISTERS", "false", NULL}},
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "64", "Q_IN_REGISTERS", "false", NULL}},
    /* consumer warpgroups taking turns */
    {"lang/std/flash_attention_ws.tile", {"TURNS", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "64", "TURNS", "true", "CAUSAL", "true", NULL}},
    {"lang/std/flash_attention_ws.tile", {"TURNS", "true", "TWO_BLOCKS", "false", "Q_IN_REGISTERS", "false", NULL}},
    {"lang/std/flash_attention_ws.tile", {"TURNS", "true", "TWO_BLOCKS", "false", "Q_IN_REGISTERS", "true", NULL}},
    {"lang/std/flash_attention_varlen.tile", {NULL}},
    {"lang/std/flash_attention_fp8.tile", {NULL}},
    {"lang/std/flash_attention_fp8.tile", {"HEAD_DIM", "128", "CAUSAL", "true", NULL}},
    {"lang/std/flash_attention_ws_fp8.tile", {NULL}},
    {"lang/std/flash_attention_ws_fp8.tile", {"HEAD_DIM", "64", "CAUSAL", "true", "BSHD", "true", NULL}},
    {"lang/std/flash_attention_ws_fp8.tile", {"TURNS", "true", NULL}},
    {"lang/std/flash_attention_ws_fp8.tile", {"P_IN_REGISTERS", "true", NULL}},
    {"lang/std/flash_attention_ws_fp8.tile", {"HEAD_DIM", "64", "CAUSAL", "true", "P_IN_REGISTERS", "true", "TURNS", "true", NULL}},
    {"lang/std/flash_attention_varlen.tile", {"HEAD_DIM", "128", "CAUSAL", "true", NULL}},
    {"lang/std/paged_decode.tile", {NULL}},
    {"lang/std/paged_decode.tile", {"HEAD_DIM", "64", "PAGE", "1", "WARPS", "4", NULL}}, /* as libtile_attention builds d64 */
    {"lang/std/paged_decode.tile", {"KV", "f8e4m3", "SCALED", "true", NULL}},
    {"lang/std/paged_decode.tile", {"KV", "u8", "INT4", "true", "WARPS", "4", NULL}}, /* 2 warps spill at d128 */
    {"tests/kernels/vector_add.tile", {NULL}},
    {"tests/kernels/vector_add.tile", {"T", "bf16", NULL}},
    {"tests/kernels/vector_add.tile", {"T", "i32", NULL}},
    {"tests/kernels/reductions.tile", {NULL}},
    {"tests/kernels/dot_fp8_reshaped_a.tile", {NULL}},
    {"tests/kernels/dot_fp8_reshaped_a.tile", {"WARPS", "8", NULL}},
    {"tests/kernels/scans.tile", {NULL}},
    {"tests/kernels/casts.tile", {NULL}},
    {"tests/kernels/atomics.tile", {NULL}},
    {"tests/kernels/naive_attention.tile", {NULL}},
    {"tests/kernels/naive_attention.tile", {"CAUSAL", "true", NULL}},
    {"tests/kernels/tma_copy.tile", {NULL}},
    {"tests/kernels/tma_copy.tile", {"T", "bf16", "BR", "128", "BC", "128", NULL}},
};

/* Registers a thread can have (sm_90). */
#define MAX_REGISTERS 255

Test(codegen, every_kernel_assembles_without_spills_or_wgmma_notes) {
  if (!have_ptxas()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    char name[256];
    harness_describe(specs[i].path, specs[i].defines, name, sizeof name);
    tc_compilation *c = generate(specs[i].path, specs[i].defines, TC_LINKER_PTXAS);
    tc_kernel_stats s;
    cr_assert(tc_kernel_get_stats(c, 0, &s), "%s: no statistics", name);
    cr_expect(s.registers > 0 && s.registers <= MAX_REGISTERS, "%s: %d registers", name, s.registers);
    cr_expect(s.spill_store_bytes == 0 && s.spill_load_bytes == 0, "%s: %d/%d bytes of spills", name,
              s.spill_store_bytes, s.spill_load_bytes);
    cr_expect_eq(s.wgmma_notes, 0, "%s: ptxas reported %d wgmma notes (serialized wgmma or injected waits)", name,
                 s.wgmma_notes);
    size_t size;
    const unsigned char *cubin = tc_cubin(c, &size);
    cr_expect(cubin && size > 4 && !memcmp(cubin, "\x7f" "ELF", 4), "%s: not an ELF cubin", name);
    tc_free(c);
  }
}

/* The training attention kernels (a file of four): every kernel, head dims
 * 64 and 128, full and causal, with no spills and no wgmma notes. */
Test(codegen, attention_backward_assembles_without_spills_or_wgmma_notes) {
  if (!have_ptxas()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  static const char *const kernels[] = {"attention_fwd_lse", "attention_bwd_preprocess", "attention_bwd_dkdv",
                                        "attention_bwd_dq"};
  for (int d = 64; d <= 128; d += 64)
    for (int causal = 0; causal < 2; causal++)
      for (int i = 0; i < 4; i++) {
        char dim[8];
        snprintf(dim, sizeof dim, "%d", d);
        const char *defs[] = {"HEAD_DIM", dim, i == 1 ? NULL : "CAUSAL", causal ? "true" : "false", NULL};
        tc_compilation *c = harness_compile("lang/std/flash_attention_bwd.tile", kernels[i], defs);
        tc_codegen_options o = {.linker = TC_LINKER_PTXAS};
        cr_assert(tc_generate(c, &o), "%s: %s", kernels[i], tc_diagnostics(c));
        tc_kernel_stats s;
        cr_assert(tc_kernel_get_stats(c, 0, &s));
        cr_expect(s.spill_store_bytes == 0 && s.spill_load_bytes == 0, "%s d%d causal %d: %d/%d bytes of spills",
                  kernels[i], d, causal, s.spill_store_bytes, s.spill_load_bytes);
        cr_expect_eq(s.wgmma_notes, 0, "%s d%d causal %d: %d wgmma notes", kernels[i], d, causal, s.wgmma_notes);
        tc_free(c);
      }
}

/* lang/std/mlp.tile and moe.tile: each kernel and variant, no spills, no
 * wgmma notes; and paged_prefill, the second kernel of paged_decode.tile. */
Test(codegen, mlp_and_moe_kernels_assemble_without_spills_or_wgmma_notes) {
  if (!have_ptxas()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  static const struct {
    const char *path, *kernel;
    const char *defines[7];
  } ks[] = {{"lang/std/mlp.tile", "mlp_gate_up", {"ACT", "0", NULL}},
            {"lang/std/mlp.tile", "mlp_gate_up", {"ACT", "1", NULL}},
            {"lang/std/mlp.tile", "mlp_gate_up", {"ACT", "2", NULL}},
            {"lang/std/mlp.tile", "mlp_down", {"RESIDUAL", "true", NULL}},
            {"lang/std/mlp.tile", "mlp_down", {"RESIDUAL", "false", NULL}},
            {"lang/std/mlp.tile", "mlp_act_backward", {"ACT", "1", NULL}},
            {"lang/std/mlp.tile", "mlp_quantize_fp8", {NULL}},
            {"lang/std/mlp.tile", "mlp_gate_up_fp8", {"ACT", "0", NULL}},
            {"lang/std/mlp.tile", "mlp_gate_up_fp8", {"ACT", "1", NULL}},
            {"lang/std/mlp.tile", "mlp_down_fp8", {NULL}},
            {"lang/std/mlp.tile", "mlp_down_fp8", {"RESIDUAL", "false", NULL}},
            {"lang/std/moe.tile", "moe_route", {NULL}},
            {"lang/std/moe.tile", "moe_route", {"EXPERTS", "8", NULL}},
            {"lang/std/moe.tile", "moe_route", {"EXPERTS", "256", NULL}},
            {"lang/std/moe.tile", "moe_count", {NULL}},
            {"lang/std/moe.tile", "moe_count", {"EXPERTS", "8", NULL}},
            {"lang/std/moe.tile", "moe_count", {"EXPERTS", "256", NULL}},
            {"lang/std/moe.tile", "moe_scan", {NULL}},
            {"lang/std/moe.tile", "moe_scatter", {NULL}},
            {"lang/std/moe.tile", "moe_scatter", {"EXPERTS", "256", NULL}},
            {"lang/std/moe.tile", "moe_scatter", {"ALIGN", "128", NULL}},
            {"lang/std/moe.tile", "moe_gather", {NULL}},
            {"lang/std/moe.tile", "moe_gemm_ws", {NULL}},
            {"lang/std/moe.tile", "moe_gemm_ws", {"GATED", "true", "ACT", "0", NULL}},
            {"lang/std/moe.tile", "moe_gemm_ws", {"GATED", "true", "ACT", "1", NULL}},
            {"lang/std/moe.tile", "moe_gemm_ws", {"GATED", "true", "ACT", "2", NULL}},
            {"lang/std/moe.tile", "moe_gemm_ws_fp8", {NULL}},
            /* the gated fp8 form's fresh products start with scale-d 0
             * (zeros materialized after the fence made ptxas inject
             * warpgroup.arrive: C7519) */
            {"lang/std/moe.tile", "moe_gemm_ws_fp8", {"GATED", "true", "ACT", "0", NULL}},
            {"lang/std/moe.tile", "moe_gemm_ws_fp8", {"GATED", "true", "ACT", "1", NULL}},
            {"lang/std/moe.tile", "moe_gemm_ws_fp8", {"GATED", "true", "ACT", "2", NULL}},
            {"lang/std/moe.tile", "moe_quantize_blocks", {NULL}},
            {"lang/std/moe.tile", "moe_gemm", {NULL}},
            {"lang/std/moe.tile", "moe_gemm", {"GATHER", "false", "EXPERTS", "8", NULL}},
            {"lang/std/moe.tile", "moe_gemm", {"GATED", "true", "ACT", "1", NULL}},
            {"lang/std/moe.tile", "moe_gemm", {"GATED", "true", "ACT", "0", "EXPERTS", "256", NULL}},
            {"lang/std/moe.tile", "moe_combine", {NULL}},
            /* the backward's dq with the consumer warpgroups taking turns */
            {"lang/std/flash_attention_bwd_ws.tile", "attention_bwd_dq_ws", {"TURNS", "true", NULL}},
            {"lang/std/flash_attention_bwd_ws.tile", "attention_bwd_dq_ws",
             {"HEAD_DIM", "64", "CAUSAL", "true", "TURNS", "true", NULL}},
            /* paged prefill as libtile_attention builds it (8 warps, wgmma) */
            {"lang/std/paged_decode.tile", "paged_prefill", {NULL}},
            {"lang/std/paged_decode.tile", "paged_prefill", {"PAGE", "1", "KV", "f8e4m3", "SCALED", "true", NULL}},
            {"lang/std/paged_decode.tile", "paged_prefill", {"PAGE", "64", "KV", "u8", "INT4", "true", NULL}},
            {"lang/std/paged_decode.tile", "paged_prefill", {"HEAD_DIM", "64", "KV", "u8", "INT4", "true", NULL}}};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    tc_compilation *c = harness_compile(ks[i].path, ks[i].kernel, ks[i].defines);
    tc_codegen_options o = {.linker = TC_LINKER_PTXAS};
    cr_assert(tc_generate(c, &o), "%s: %s", ks[i].kernel, tc_diagnostics(c));
    tc_kernel_stats s;
    cr_assert(tc_kernel_get_stats(c, 0, &s));
    cr_expect(s.spill_store_bytes == 0 && s.spill_load_bytes == 0, "%s (variant %zu): %d/%d bytes of spills",
              ks[i].kernel, i, s.spill_store_bytes, s.spill_load_bytes);
    cr_expect_eq(s.wgmma_notes, 0, "%s: %d wgmma notes", ks[i].kernel, s.wgmma_notes);
    tc_free(c);
  }
}

static char *ptx_of(const char *path, const char *const *defines) {
  tc_compilation *c = generate(path, defines, TC_LINKER_NONE);
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  tc_free(c);
  return ptx;
}

Test(codegen, aligned_contiguous_f32_load_is_v4) {
  char *ptx = ptx_of("tests/kernels/vector_add.tile", NULL);
  cr_expect(strstr(ptx, ".version 8.0") && strstr(ptx, ".target sm_90a"));
  cr_expect(strstr(ptx, "ld.global.v4.f32") != NULL, "no 16-byte load:\n%s", ptx);
  cr_expect(strstr(ptx, "st.global.v4.f32") != NULL, "no 16-byte store");
  free(ptx);
}

Test(codegen, unaligned_load_is_scalar) {
  const char *src = "kernel k(z: *f32, x: *f32) { let o = arange(0, 256); store(z + o, load(x + o)); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  cr_expect(strstr(ptx, "ld.global.v4") == NULL && strstr(ptx, "ld.global.f32") != NULL, "%s", ptx);
  free(ptx);
  tc_free(c);
}

Test(codegen, row_reduction_uses_shuffles) {
  char *ptx = ptx_of("lang/std/softmax.tile", NULL);
  cr_expect(strstr(ptx, "shfl.sync.bfly.b32") != NULL, "no warp shuffle");
  cr_expect(strstr(ptx, "bar.sync") != NULL, "no barrier for the cross-warp step");
  cr_expect(strstr(ptx, "ex2.approx") != NULL, "exp should use ex2.approx");
  free(ptx);
}

Test(codegen, bf16_vector_and_conversions) {
  char *ptx = ptx_of("tests/kernels/vector_add.tile", (const char *[]){"T", "bf16", NULL});
  cr_expect(strstr(ptx, "ld.global.v4.b32") || strstr(ptx, "ld.global.v8") || strstr(ptx, "ld.global.v4.u32"),
            "bf16 loads should be 16 bytes wide:\n%s", ptx);
  free(ptx);
  ptx = ptx_of("tests/kernels/casts.tile", NULL);
  cr_expect(strstr(ptx, "cvt.rn.satfinite.e4m3x2.f32") && strstr(ptx, "cvt.rn.satfinite.e5m2x2.f32"));
  cr_expect(strstr(ptx, "cvt.rn.bf16.f32") && strstr(ptx, "cvt.rn.f16.f32"));
  free(ptx);
}

/* ---- tensor cores, cp.async and TMA ---- */

/* K steps of one wgmma (k16 for 16-bit inputs) in a BLOCK_K = 64 tile. */
#define WGMMA_K_STEPS_PER_TILE (64 / 16)

Test(codegen, gemm_is_wgmma_fed_by_cp_async_with_one_group_in_flight) {
  char *ptx = ptx_of("lang/std/gemm.tile", NULL);
  /* 128 x 128 on 8 warps: each warpgroup computes a 64 x 128 slab. */
  cr_expect_eq(harness_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "), WGMMA_K_STEPS_PER_TILE,
               "one instruction per k16 step:\n%s", ptx);
  cr_expect(strstr(ptx, "cp.async.cg.shared.global") != NULL, "16-byte asynchronous copies");
  cr_expect(strstr(ptx, "wgmma.wait_group.sync.aligned 1;") != NULL, "in the loop, one group stays in flight");
  cr_expect(strstr(ptx, "wgmma.wait_group.sync.aligned 0;") != NULL, "after the loop, none");
  cr_expect(strstr(ptx, "fence.proxy.async.shared::cta") != NULL, "cp.async writes are fenced for the async proxy");
  free(ptx);
  ptx = ptx_of("lang/std/gemm.tile", (const char *[]){"T", "f16", NULL});
  cr_expect(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 ") != NULL, "f16 inputs");
  free(ptx);
}

Test(codegen, small_gemm_tiles_use_mma_sync_or_fma) {
  char *ptx = ptx_of("lang/std/gemm.tile", (const char *[]){"BLOCK_M", "32", "BLOCK_N", "32", "BLOCK_K", "16", "WARPS",
                                                            "2", NULL});
  cr_expect(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != NULL, "32 x 32 on 2 warps");
  cr_expect(strstr(ptx, "wgmma") == NULL, "no warpgroup in 2 warps");
  free(ptx);
  ptx = ptx_of("lang/std/gemm.tile", (const char *[]){"T", "f32", "BLOCK_M", "32", "BLOCK_N", "32", "BLOCK_K", "16", NULL});
  cr_expect(strstr(ptx, "mma") == NULL && strstr(ptx, "fma.rn.f32") != NULL, "f32 inputs use the FMA units");
  free(ptx);
}

/* A descriptor line of the metadata obeys the TMA box rules: at most 256
 * elements per dimension, an inner dimension of at most one 128-byte
 * swizzle span, equal to the swizzle when there is one. */
#define TMA_MAX_BOX_DIM 256
#define TMA_MAX_INNER_BYTES 128

static void check_desc_boxes(const char *meta) {
  int seen = 0;
  for (const char *line = meta; (line = strstr(line, "\nparam ")); line++) {
    char name[32], elem[16];
    int rank, b0, b1, swizzle = 0;
    if (sscanf(line, "\nparam %31s desc %15s %d box %d %d swizzle %d", name, elem, &rank, &b0, &b1, &swizzle) < 5)
      continue;
    seen++;
    int eb = !strcmp(elem, "f32") ? 4 : !strcmp(elem, "bf16") || !strcmp(elem, "f16") ? 2 : 1;
    cr_expect(rank == 2 && b0 <= TMA_MAX_BOX_DIM && b1 <= TMA_MAX_BOX_DIM, "%s: box %d x %d", name, b0, b1);
    cr_expect_leq(b1 * eb, TMA_MAX_INNER_BYTES, "%s: inner box of %d bytes", name, b1 * eb);
    cr_expect(!swizzle || b1 * eb == swizzle, "%s: inner box of %d bytes with a %d-byte swizzle", name, b1 * eb, swizzle);
  }
  cr_expect_eq(seen, 3, "c, a and b are descriptors:\n%s", meta);
}

static void expect_meta_line(const char *const *defines, const char *line) {
  tc_compilation *c = generate("lang/std/gemm_tma.tile", defines, TC_LINKER_NONE);
  const char *meta = tc_kernel_meta(c, 0);
  cr_expect(strstr(meta, line) != NULL, "want '%s' in:\n%s", line, meta);
  check_desc_boxes(meta);
  tc_free(c);
}

Test(codegen, gemm_tma_boxes_are_in_language_order_with_inner_spans_of_128_bytes) {
  /* A tile [BLOCK_M, BLOCK_K] = [128, 64] bf16: rows of 128 bytes, one box. */
  expect_meta_line(NULL, "\nparam a desc bf16 2 box 128 64 swizzle 128\n");
  /* B [64, 128]: 256-byte rows, two boxes of [64, 64] side by side. */
  expect_meta_line(NULL, "\nparam b desc bf16 2 box 64 64 swizzle 128\n");
  expect_meta_line(NULL, "\nparam c desc bf16 2 box 128 64 swizzle 128\n");
  /* A^T tiles are [BLOCK_K, BLOCK_M] = [64, 128]; f32 C rows hold 32 per span. */
  expect_meta_line((const char *[]){"A_TRANS", "true", NULL}, "\nparam a desc bf16 2 box 64 64 swizzle 128\n");
  expect_meta_line((const char *[]){"TC", "f32", NULL}, "\nparam c desc f32 2 box 128 32 swizzle 128\n");
}

/* gemm_tma by default: 4 stages with one wgmma in flight fill 2 stages
 * before the loop and one per iteration; a fill is A's one box and B's
 * two. C [128, 128] leaves in two [128, 64] boxes. */
#define GEMM_TMA_FILLS_IN_CODE 3
#define GEMM_TMA_BOXES_PER_FILL 3
#define GEMM_TMA_STORE_BOXES 2

Test(codegen, gemm_tma_copies_by_tma_under_mbarriers) {
  char *ptx = ptx_of("lang/std/gemm_tma.tile", NULL);
  static const char load[] = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes";
  static const char store[] = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group";
  cr_expect_eq(harness_count(ptx, load), GEMM_TMA_FILLS_IN_CODE * GEMM_TMA_BOXES_PER_FILL, "%s", ptx);
  cr_expect_eq(harness_count(ptx, store), GEMM_TMA_STORE_BOXES, "%s", ptx);
  cr_expect(strstr(ptx, "mbarrier.try_wait.parity") != NULL);
  cr_expect(strstr(ptx, "mbarrier.arrive.expect_tx") != NULL);
  cr_expect(strstr(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 ") != NULL);
  cr_expect(strstr(ptx, "wgmma.wait_group.sync.aligned 1;") != NULL);
  free(ptx);
}

/* The PTX of the innermost loop around the first `needle`: from the label
 * that a backward branch jumps to, to that branch (malloc'd), or NULL. */
static char *ptx_loop_holding(const char *ptx, const char *needle) {
  const char *at = strstr(ptx, needle), *lo = NULL, *hi = NULL;
  for (const char *p = ptx; at && (p = strstr(p, "bra")); p += 3) {
    const char *t = p + 3;
    if (!strncmp(t, ".uni", 4)) t += 4;
    if (*t != ' ' && *t != '\t') continue;
    t += strspn(t, " \t");
    size_t n = strcspn(t, ";\n");
    char def[80];
    if (n + 3 > sizeof def) continue;
    snprintf(def, sizeof def, "\n%.*s:", (int)n, t);
    const char *target = strstr(ptx, def);
    if (target && target < at && at < p && (!lo || target > lo)) {
      lo = target;
      hi = p;
    }
  }
  return lo ? strndup(lo, (size_t)(hi - lo)) : NULL;
}

/* A wgmma descriptor in a k loop is one 32-bit add on a low word built
 * once per stage (docs/backend.md, Descriptors): no 64-bit address
 * arithmetic per instruction; and the warp number is a shuffle from lane
 * 0, which ptxas knows to be uniform. */
Test(codegen, wgmma_descriptors_are_32_bit_adds_in_the_k_loop) {
  const char *files[] = {"lang/std/gemm_ws.tile", "lang/std/gemm_tma.tile", "lang/std/flash_attention_ws.tile"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *ptx = ptx_of(files[i], NULL);
    char *loop = ptx_loop_holding(ptx, "wgmma.mma_async");
    cr_assert(loop, "%s: no loop around the wgmmas", files[i]);
    cr_expect(strstr(loop, "bfe.u64") == NULL && strstr(loop, "shr.u64") == NULL,
              "%s: 64-bit descriptor arithmetic in the k loop:\n%s", files[i], loop);
    cr_expect(strstr(ptx, "shfl.sync.idx.b32") != NULL, "%s: the warp number is not a shuffle", files[i]);
    free(loop);
    free(ptx);
  }
}

static const char *const flash_variants[][3] = {{NULL}, {"HEAD_DIM", "128", NULL}};

Test(codegen, flash_attention_reads_p_from_registers) {
  for (size_t i = 0; i < sizeof flash_variants / sizeof flash_variants[0]; i++) {
    char *ptx = ptx_of("lang/std/flash_attention.tile", flash_variants[i]);
    char *loop = ptx_loop_holding(ptx, "wgmma.mma_async");
    cr_assert(loop, "no loop around the wgmmas");
    /* S = Q K^T reads both operands from shared memory (descriptors); P V
     * takes P, the softmax of S, in registers: the {%r, %r, %r, %r} form. */
    cr_expect(strstr(loop, "}, %rd") != NULL, "an SS wgmma for Q K^T:\n%s", loop);
    cr_expect(strstr(loop, "}, {%r") != NULL, "an RS wgmma for P V:\n%s", loop);
    free(loop);
    free(ptx);
  }
}

/* With HEAD_DIM 64 (BLOCK_M 128, BLOCK_N 64, 8 warps) the two
 * warpgroups split the rows of S, so a row's max and sum stay inside one
 * warp (shuffles); the only barriers in the key loop are then the ones
 * the schedule wrote (around the K and V buffers). (With HEAD_DIM 128,
 * BLOCK_M is 64 and the warpgroups split the columns: the row reductions
 * cross warps through shared memory, with barriers of their own.) The
 * row statistics m_new and alpha live in the slice of the wgmma
 * accumulator layout, and their broadcasts (flexible, nvptx/assign.c)
 * take the accumulator's layout, which needs no data movement; given the
 * canonical layout instead they would go through shared memory twice per
 * key block, 8 bar.sync per iteration that the lowered IR does not show. */
static const char *const flash_row_local_variants[][3] = {{NULL}, {"CAUSAL", "true", NULL}};

/* The PTX loop of c that holds `holding` (malloc'd), checked to have as
 * many barriers as the lowered IR's first loop has `barrier` ops, which
 * go to *scheduled. Frees c. */
static char *key_loop_with_scheduled_barriers(tc_compilation *c, const char *name, const char *holding,
                                              int *scheduled) {
  char *lowered = tc_emit(c, TC_EMIT_LOWERED), *ptx = tc_emit(c, TC_EMIT_PTX);
  tc_free(c);
  HarnessLoop keys = harness_split_at_loop(lowered);
  *scheduled = harness_count(keys.body, "barrier @");
  char *loop = ptx_loop_holding(ptx, holding);
  cr_assert(loop, "%s: no loop around %s", name, holding);
  int in_ptx = harness_count(loop, "bar.sync") + harness_count(loop, "barrier.sync");
  cr_expect_eq(in_ptx, *scheduled, "%s: %d barriers in the PTX key loop, %d in the lowered IR's", name, in_ptx,
               *scheduled);
  harness_loop_free(&keys);
  free(ptx);
  free(lowered);
  return loop;
}

Test(codegen, flash_attention_key_loop_has_only_the_scheduled_barriers) {
  for (size_t i = 0; i < sizeof flash_row_local_variants / sizeof flash_row_local_variants[0]; i++) {
    const char *const *defines = flash_row_local_variants[i];
    char name[128];
    harness_describe("lang/std/flash_attention.tile", defines, name, sizeof name);
    int scheduled;
    free(key_loop_with_scheduled_barriers(generate("lang/std/flash_attention.tile", defines, TC_LINKER_NONE), name,
                                          "wgmma.mma_async", &scheduled));
  }
}

/* Decode attention (one query row group of 16, 2 warps): the scores are
 * replicated over the warps rather than split along the keys, so the row
 * max and sum are shuffles and P is the next dot's A operand in
 * registers; K and V go from the cp.async ring straight into the mma
 * operands (ldmatrix); the queries are loaded in the A operand's layout
 * before the loop. The key loop keeps only the barrier the ring needs and
 * stores nothing to shared memory. */
Test(codegen, decode_key_loop_exchanges_nothing) {
  static const char *const variants[][5] = {{NULL}, {"HEAD_DIM", "64", NULL}, {"WARPS", "4", "BLOCK_N", "64", NULL}};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    char name[128];
    harness_describe("lang/std/paged_decode.tile", variants[i], name, sizeof name);
    tc_compilation *c = harness_compile("lang/std/paged_decode.tile", "paged_decode", variants[i]);
    tc_codegen_options o = {.linker = TC_LINKER_NONE};
    cr_assert(tc_generate(c, &o), "%s: %s", name, tc_diagnostics(c));
    int scheduled;
    char *loop = key_loop_with_scheduled_barriers(c, name, "mma.sync", &scheduled);
    cr_expect(scheduled >= 1, "%s: the ring's barrier is missing from the lowered loop", name);
    cr_expect_eq(harness_count(loop, "st.shared"), 0, "%s: the key loop stores to shared memory", name);
    cr_expect(harness_count(loop, "ldmatrix") > 0, "%s: K and V are not read with ldmatrix", name);
    free(loop);
  }
}

/* The layout listing's line for the first dot of a two-warp kernel whose
 * [16, 32] scores are `use`d. */
static char *dot_layout_line(const char *use) {
  char src[1024];
  snprintf(src, sizeof src,
           "@warps(2)\n"
           "kernel k(o: *f32, q: *bf16, kk: *bf16) {\n"
           "    let r = arange(0, 16);\n"
           "    let c = arange(0, 32);\n"
           "    let d = arange(0, 64);\n"
           "    let s = dot(load(q + r[:, None] * 64 + d[None, :]), trans(load(kk + c[:, None] * 64 + d[None, :])));\n"
           "    %s\n"
           "}\n",
           use);
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  char *text = tc_emit(c, TC_EMIT_LOWERED);
  tc_free(c);
  const char *at = strstr(text, "(dot): f[16, 32]");
  cr_assert(at, "no dot layout in:\n%s", text);
  size_t n = strcspn(at, "\n");
  char *line = malloc(n + 1);
  memcpy(line, at, n), line[n] = 0;
  free(text);
  return line;
}

/* A small mma.sync product whose rows are reduced is replicated over the
 * warps (warp basis 0: the row max is shuffles); stored as it is, its
 * columns are split over the warps. */
Test(codegen, small_dot_rows_replicated_only_when_used_whole) {
  char *reduced = dot_layout_line("store(o + r, max(s, 1));");
  cr_expect(strstr(reduced, "warp=[0]") != NULL, "%s", reduced);
  char *stored = dot_layout_line("store(o + r[:, None] * 32 + c[None, :], s);");
  cr_expect(strstr(stored, "warp=[0]") == NULL, "%s", stored);
  free(reduced);
  free(stored);
}

/* fence(): a GPU-scope fence in every thread, a block barrier, another
 * fence (tests/kernels/split_reduce.tile has two); after store_block the
 * elected thread first waits for its TMA stores and fences the async
 * proxy. */
Test(codegen, fence_orders_memory_at_gpu_scope) {
  tc_compilation *c = generate("tests/kernels/split_reduce.tile", NULL, TC_LINKER_NONE);
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  cr_expect_eq(harness_count(ptx, "fence.acq_rel.gpu;"), 4, "%s", ptx);
  const char *first = strstr(ptx, "fence.acq_rel.gpu;"), *bar = first ? strstr(first, "bar.sync") : NULL;
  const char *second = first ? strstr(first + 1, "fence.acq_rel.gpu;") : NULL;
  cr_expect(bar && second && bar < second, "no barrier between the two fences of one fence()");
  cr_expect(strstr(ptx, "cp.async.bulk.wait_group 0;") == NULL, "TMA store waits without a TMA store");
  free(ptx);
  tc_free(c);
  char *tma = harness_emit_source("kernel k(dst: tensor<f32, 2>, src: tensor<f32, 2>, flag: *i32) {\n"
                                  "    store_block(dst, [0, 0], load_block(src, [0, 0], [32, 64]));\n"
                                  "    fence();\n"
                                  "    atomic_add(flag, 1);\n"
                                  "}\n",
                                  TC_EMIT_PTX);
  const char *wait = strstr(tma, "cp.async.bulk.wait_group 0;"), *fence = strstr(tma, "fence.acq_rel.gpu;");
  cr_expect(wait && fence && wait < fence && strstr(wait, "fence.proxy.async.global;"),
            "the TMA store is not finished before the fence:\n%s", tma);
  free(tma);
}

Test(codegen, lowered_shows_layouts) {
  tc_compilation *c = generate("lang/std/softmax.tile", NULL, TC_LINKER_NONE);
  char *text = tc_emit(c, TC_EMIT_LOWERED);
  cr_expect(strstr(text, "// layouts of softmax (4 warps):") != NULL, "%s", text);
  cr_expect(strstr(text, "(load): f[1024] reg=[1, 2, 512] lane=[4, 8, 16, 32, 64] warp=[128, 256]") != NULL, "%s", text);
  char *llvm = tc_emit(c, TC_EMIT_LLVM);
  cr_expect(strstr(llvm, "define ptx_kernel void @softmax") != NULL);
  free(llvm);
  free(text);
  tc_free(c);
}

Test(codegen, metadata_and_header) {
  tc_compilation *c = generate("tests/kernels/vector_add.tile", NULL, TC_LINKER_NONE);
  cr_expect_str_eq(tc_kernel_meta(c, 0),
                   "tile-kernel 1\nname vector_add\nwarps 4\nshared 0\nparam z ptr f32 align 16\n"
                   "param x ptr f32 align 16\nparam y ptr f32 align 16\nparam n i32\nconst T type f32\n"
                   "const BLOCK i32 1024\nconst WARPS i32 4\nend\n");
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  cr_expect(strstr(ptx, ".visible .global .align 1 .b8 __tile_meta_vector_add[") != NULL);
  cr_expect(strstr(ptx, ".maxntid 128, 1, 1") != NULL);
  free(ptx);
  char *h = tc_emit_header(c, "vadd", false);
  cr_expect(strstr(h, "static inline tile_status vadd_vector_add_launch(const tile_kernel *kernel, uint32_t grid_x") &&
            strstr(h, "uint64_t z,\n    uint64_t x,\n    uint64_t y,\n    int32_t n)"), "%s", h);
  cr_expect(strstr(h, "tile_arg args[4] = {tile_arg_ptr(z), tile_arg_ptr(x), tile_arg_ptr(y), tile_arg_i32(n)};"));
  cr_expect(tc_emit_header(c, "vadd", true) == NULL, "embedding needs a cubin");
  free(h);
  tc_free(c);
}

/* A tensor<T, R> parameter becomes a const tile_tensor * that libtile
 * encodes. Skipped until the GPU back end compiles descriptor parameters
 * (see unsupported_descriptors_are_errors). */
Test(codegen, header_takes_tensors_for_descriptors) {
  const char *src = "kernel k(d: tensor<f32, 2>, o: *f32) { let t = load_block(d, [0, 0], [16, 16]);"
                    " store(o + arange(0, 16), sum(t, 1)); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  if (!tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE})) {
    bool unsupported = strstr(tc_diagnostics(c), "tensor descriptor parameters are not supported yet") != NULL;
    cr_expect(unsupported, "%s", tc_diagnostics(c));
    tc_free(c);
    if (unsupported) cr_skip_test("the GPU back end does not compile descriptor parameters yet");
    return;
  }
  char *h = tc_emit_header(c, "t", false);
  cr_expect(strstr(h, "uint32_t grid_z, tile_stream *stream,\n    const tile_tensor *d,\n    uint64_t o)") != NULL,
            "%s", h);
  cr_expect(strstr(h, "tile_arg args[2] = {tile_arg_tensor(d), tile_arg_ptr(o)};") != NULL, "%s", h);
  free(h);
  tc_free(c);
}

Test(codegen, shared_memory_budget_is_checked) {
  /* A dot whose operands need more than 227 KiB of shared memory (32 warps
   * keep each thread's share of the tiles within its registers). */
  const char *src = "@warps(32) kernel k(o: *f32, a: *f32) { let r = arange(0, 256); let c = arange(0, 256);\n"
                    "  let t = load(a + r[:, None] * 256 + c[None, :]);\n"
                    "  store(o + r[:, None] * 256 + c[None, :], dot(t, t)); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_expect_not(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}));
  cr_expect(strstr(tc_diagnostics(c), "needs 524288 bytes of shared memory; a block has at most 232448") != NULL, "%s",
            tc_diagnostics(c));
  tc_free(c);
}

/* Waits carry try_wait's suspend-time hint, none with mbar_poll. */
Test(codegen, mbar_poll_drops_the_suspend_hint) {
  const char *src = "kernel k(d: tensor<f32, 2>, o: tensor<f32, 2>) { let t = load_block(d, [0, 0], [16, 16]);"
                    " store_block(o, [16, 0], t * 2.0); }";
  for (int poll = 0; poll < 2; poll++) {
    tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
    cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
    cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE, .mbar_poll = poll}), "%s",
              tc_diagnostics(c));
    char *ptx = tc_emit(c, TC_EMIT_PTX);
    cr_assert_not_null(ptx);
    bool hinted = strstr(ptx, "mbarrier.try_wait.parity.shared::cta.b64 p, [%r") && strstr(ptx, ", 10000000;");
    bool plain = strstr(ptx, "mbarrier.try_wait.parity.shared::cta.b64 p, [%r") && !strstr(ptx, ", 10000000;");
    cr_expect(poll ? plain : hinted, "poll %d:\n%s", poll, ptx);
    free(ptx);
    tc_free(c);
  }
}

Test(codegen, descriptors_become_tma_copies) {
  const char *src = "kernel k(d: tensor<f32, 2>, o: tensor<f32, 2>) { let t = load_block(d, [0, 0], [16, 16]);"
                    " store_block(o, [16, 0], t * 2.0); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  /* one 16 x 16 box per copy; rows of 64 bytes: 64-byte swizzle */
  cr_expect(strstr(tc_kernel_meta(c, 0), "param d desc f32 2 box 16 16 swizzle 64\n") != NULL, "%s", tc_kernel_meta(c, 0));
  cr_expect(strstr(tc_kernel_meta(c, 0), "param o desc f32 2 box 16 16 swizzle 64\n") != NULL, "%s", tc_kernel_meta(c, 0));
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  cr_expect(strstr(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") != NULL);
  cr_expect(strstr(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") != NULL);
  cr_expect(strstr(ptx, "mbarrier.try_wait.parity") != NULL);
  cr_expect(strstr(ptx, "fence.proxy.async.shared::cta") != NULL);
  cr_expect(strstr(ptx, ".param .align 64 .b8 k_param_0[128]") != NULL, "the map is passed by value");
  free(ptx);
  tc_free(c);
}

/* A tile larger than a thread's registers is an error at compile time,
 * naming the tile and the knob, before ptxas would spend minutes on it. */
Test(codegen, register_budget_is_checked) {
  const char *src = "@warps(1) kernel k(o: *f32, a: *f32) { let r = arange(0, 256);\n"
                    "  let t = load(a + r[:, None] * 256 + r[None, :]);\n"
                    "  store(o + r[:, None] * 256 + r[None, :], t * 2.0); }";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_expect_not(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}));
  cr_expect(strstr(tc_diagnostics(c), "t.tile:2:11: error: GPU back end: the tile f32[256, 256] needs 2048 registers "
                                       "per thread with 1 warp (a thread has at most 255): use more warps (@warps) or "
                                       "smaller tiles") != NULL,
            "%s", tc_diagnostics(c));
  tc_free(c);
  /* the f16 dot of the hardening report: 128 x 128 with one warp (mma.sync) */
  const char *dot = "@warps(1) kernel k(o: *f32, a: *f16) { let r = arange(0, 128);\n"
                    "  let t = load(a + r[:, None] * 128 + r[None, :]);\n"
                    "  store(o + r[:, None] * 128 + r[None, :], dot(t, t)); }";
  c = tc_compile("t.tile", dot, strlen(dot), NULL);
  cr_expect_not(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}));
  cr_expect(strstr(tc_diagnostics(c), "the tile f16[128, 128] needs 512 registers per thread with 1 warp") != NULL, "%s",
            tc_diagnostics(c));
  tc_free(c);
  /* and the FMA dot's own limit, checked before its tables are filled */
  const char *fma = "@warps(32) kernel k(o: *f32, a: *f32) { let r = arange(0, 128);\n"
                    "  let t = load(a + r[:, None] * 128 + r[None, :]);\n"
                    "  store(o + r[:, None] * 128 + r[None, :], dot(t, t)); }";
  c = tc_compile("t.tile", fma, strlen(fma), NULL);
  cr_expect(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  tc_free(c);
}

/* Spills are a warning naming the kernel, or an error with
 * spills_are_errors (tilec -Werror=spills). */
Test(codegen, spills_are_warnings_or_errors) {
  if (!have_ptxas()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  const char *src = "@warps(1)\nkernel k(o: *f32, a: *f32, b: *f32) { let r = arange(0, 64);\n"
                    "  let x = load(a + r[:, None] * 64 + r[None, :]);\n"
                    "  let y = load(b + r[:, None] * 64 + r[None, :]);\n"
                    "  let z = load(o + r[:, None] * 64 + r[None, :]);\n"
                    "  let w = load(o + 4096 + r[:, None] * 64 + r[None, :]);\n"
                    "  store(o + r[:, None] * 64 + r[None, :], x * y + z * w + y * z + w * x); }";
  for (int strict = 0; strict < 2; strict++) {
    tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
    cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
    bool ok = tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_PTXAS, .spills_are_errors = strict});
    cr_expect_eq(ok, !strict);
    const char *d = tc_diagnostics(c);
    cr_expect(strstr(d, strict ? "t.tile:2:1: error: GPU back end: kernel 'k' spills registers to local memory ("
                               : "t.tile:2:1: warning: GPU back end: kernel 'k' spills registers to local memory (") &&
                  strstr(d, "use more warps or smaller tiles"),
              "%s", d);
    tc_free(c);
  }
}

/* The auto linker: nvJitLink compiles relocatable code, where the slow
 * path of flash attention's correctly rounded division is an external call
 * that serializes every wgmma (C7509); auto then redoes the module with
 * ptxas, so the kernel the runtime gets has no such note. */
Test(codegen, auto_linker_keeps_wgmma_unserialized) {
  if (!have_ptxas()) cr_skip_test("no CUDA toolkit in /usr/local/cuda");
  tc_compilation *c = generate("lang/std/flash_attention.tile", NULL, TC_LINKER_AUTO);
  tc_kernel_stats s;
  cr_assert(tc_kernel_get_stats(c, 0, &s));
  cr_expect_eq(s.wgmma_notes, 0, "%d wgmma notes", s.wgmma_notes);
  tc_free(c);
  c = generate("lang/std/flash_attention.tile", NULL, TC_LINKER_NVJITLINK);
  cr_assert(tc_kernel_get_stats(c, 0, &s));
  cr_expect_gt(s.wgmma_notes, 0, "nvJitLink alone serializes (the reason auto falls back)");
  tc_free(c);
}

/* Found by fuzz_codegen (reproducer in
 * tests/fuzz/crashes-found/codegen-block-load-first-op.tile): a kernel
 * whose first op is a load_block (its offsets all parameters) and which
 * also has a store_block crashed tc_generate (shared buffers were placed
 * before an op that the load's rewrite had removed). */
Test(codegen, block_load_as_first_op) {
  tc_compilation *c = harness_compile("tests/fuzz/crashes-found/codegen-block-load-first-op.tile", NULL, NULL);
  tc_codegen_options o = {.linker = TC_LINKER_NONE};
  cr_expect(tc_generate(c, &o), "%s", tc_diagnostics(c));
  tc_free(c);
}

/* Found by the random kernel generator (tests/gen/README.md): a bitcast
 * between f16 and bf16 of a computed value (also through i16, which LLVM
 * folds into one) and argmax of an fp8 tile made LLVM's instruction
 * selection abort ("Cannot select: f16 = bitcast", "Cannot select: setcc"). */
Test(codegen, half_bitcasts_and_fp8_argmax_compile) {
  const char *src = "kernel k(o: *f16, a: *bf16, x: *f8e5m2, y: *i32, p: *u16) {\n"
                    "  let r = arange(0, 16);\n"
                    "  store(o + r, bitcast(sqrt(load(a + r)), f16) / -2.5);\n"
                    "  store(o + 16 + r, bitcast(bitcast(sqrt(load(a + r)), i16), f16));\n"
                    "  store(p + r, bitcast(load(o + r) * 2.0, u16));\n"
                    "  let t = load(x + r[:, None] * 16 + r[None, :]);\n"
                    "  store(y + r, argmax(t, 1));\n"
                    "  store(y + 16 + r, argmin(t, 0));\n"
                    "}\n";
  tc_compilation *c = tc_compile("t.tile", src, strlen(src), NULL);
  cr_assert_eq(tc_error_count(c), 0, "%s", tc_diagnostics(c));
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  cr_expect(ptx && strstr(ptx, "mov.b16"), "the 16-bit bitcasts go through a move");
  free(ptx);
  tc_free(c);
}

/* Found by tile-gpu diff: mma.sync.aligned needs all 32 lanes, and LLVM
 * sank it (an inline asm it took for a pure computation) into the branch
 * of the masked store that alone used the product, so only some lanes ran
 * it: wrong products or a hung GPU. It is convergent now: every mma.sync
 * comes before the first branch. */
Test(codegen, mma_is_not_sunk_into_a_masked_store) {
  const char *src = "kernel k(a: *f16, b: *f16, o: *f32) {\n"
                    "  let i = arange(0, 32)[:, None] * 16 + arange(0, 16)[None, :];\n"
                    "  let j = arange(0, 16)[:, None] * 16 + arange(0, 16)[None, :];\n"
                    "  let c = dot(load(a + i), load(b + j), 3.0);\n"
                    "  store(o + i, c, i < 60);\n"
                    "}\n";
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  const char *mma = strstr(ptx, "mma.sync"), *last = mma;
  for (const char *m = mma; m; m = strstr(m + 1, "mma.sync")) last = m;
  const char *branch = strstr(ptx, "bra");
  cr_expect(mma && branch && last < branch, "an mma.sync after a branch:\n%s", ptx);
  free(ptx);
}

/* Found by tile-gpu diff: LLVM's SLP vectorizer narrowed the u32 -> bf16
 * conversion of a sign-extended i8 to an unsigned conversion of the i8
 * (-3 became 253 instead of 4294967293); the vectorizers are off. */
Test(codegen, sign_extended_bytes_convert_as_unsigned_words) {
  const char *src = "kernel k(x: *i8, o: *bf16) {\n"
                    "  let v = load(x + arange(0, 16)[:, None], arange(0, 16)[None, :] < 7, program_id(0) as bf16);\n"
                    "  store(o + arange(0, 16)[:, None] * 16 + arange(0, 16)[None, :], v as u32);\n"
                    "}\n";
  char *ll = harness_emit_source(src, TC_EMIT_LLVM);
  bool narrowed = strstr(ll, "uitofp i8") != NULL;
  for (const char *u = strstr(ll, "uitofp <"); u; u = strstr(u + 1, "uitofp <")) {
    const char *x = strstr(u, " x "), *eol = strchr(u, '\n');
    narrowed |= x && eol && x < eol && !strncmp(x, " x i8>", 6);
  }
  cr_expect(!narrowed, "an unsigned conversion of the bytes:\n%s", ll);
  cr_expect(strstr(ll, "uitofp i32"), "the conversion starts from the u32 value:\n%s", ll);
  free(ll);
}

/* Found by tile-gpu diff: LLVM's loop vectorizer turned a while loop of
 * i8 additions into an s16x2 sum that lost the loop's result on the GPU;
 * LLVM's vectorizers do not run (the lowering vectorizes accesses). */
Test(codegen, loops_are_not_vectorized_by_llvm) {
  const char *src = "kernel k(x: *i8, y: *i32, o: *i8) {\n"
                    "  let v = load(y + (load(y + 1) & 31));\n"
                    "  var a = load(x + 1);\n"
                    "  var w = 0;\n"
                    "  while w < 3 && v >= 255 { w += 1; a = a + (w as i8); }\n"
                    "  store(o + program_id(0), a);\n"
                    "}\n";
  char *ll = harness_emit_source(src, TC_EMIT_LLVM);
  cr_expect(!strstr(ll, "vector.body") && !strstr(ll, "llvm.vector.reduce"), "%s", ll);
  cr_expect(!strstr(ll, "noimplicitfloat"), "the mark that stops the vectorizers is gone before code generation");
  free(ll);
}

/* Found by tile-gpu diff, all wrong only for the extreme values: ptxas
 * takes neg/abs of a 16-bit value to stay sign-extended (-(-32768) came
 * out +32768) and abs.s32(x) < 0 to be false; cvt.rn.f16 of an integer
 * beyond the f16 range gives 65504, not inf. The PTX works around each. */
Test(codegen, integer_extremes_work_around_ptxas) {
  const char *src = "kernel k(x: *i16, y: *i32, o: *i32, h: *f16) {\n"
                    "  let r = arange(0, 32);\n"
                    "  store(o + r, -load(x + r));\n"
                    "  store(o + 32 + r, abs(load(x + 32 + r)));\n"
                    "  store(o + 64 + r, where(abs(load(y + r)) < 0, 1, 0));\n"
                    "  store(h + r, load(y + 32 + r) as f16);\n"
                    "}\n";
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  cr_expect(!strstr(ptx, "neg.s16") && !strstr(ptx, "abs.s16") && strstr(ptx, "neg.s32"), "16-bit neg/abs in 32 bits:\n%s", ptx);
  cr_expect(strstr(ptx, "@p sub.s32"), "abs of i32 as a select:\n%s", ptx);
  cr_expect(!strstr(ptx, "cvt.rn.f16.s32") && strstr(ptx, "cvt.rn.f32.s32"), "int -> f16 through f32:\n%s", ptx);
  free(ptx);
}

/* ptxas merges chains of integer min/max into three-input VIMNMX3 and
 * drops the negation of an operand made by neg or a multiply by -64
 * (tile-gpu diff seed 426): integer minimum/maximum and min/max
 * reductions are compares and selects, with no min/max instruction left
 * for ptxas to merge. */
Test(codegen, integer_min_max_are_selects_not_min_instructions) {
  const char *src = "kernel k(x: *i32, u: *u64, s: *i8, o: *i32, ou: *u64, os: *i8) {\n"
                    "  let r = arange(0, 8)[:, None] * 32 + arange(0, 32)[None, :];\n"
                    "  store(o + arange(0, 32), min((-64) * load(x + r), 0));\n"
                    "  store(o + 32 + arange(0, 32), max(-load(x + 256 + r), 0));\n"
                    "  let c = arange(0, 32);\n"
                    "  store(ou + c, minimum(load(u + c), load(u + 32 + c)));\n"
                    "  store(os + c, maximum(load(s + c), load(s + 32 + c)));\n"
                    "}\n";
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  cr_expect(!strstr(ptx, "min.s32") && !strstr(ptx, "max.s32") && !strstr(ptx, "min.u64") && !strstr(ptx, "max.s16"),
            "no integer min/max instructions:\n%s", ptx);
  cr_expect(strstr(ptx, "setp.lt.s32") && strstr(ptx, "setp.gt.s32") && strstr(ptx, "setp.lt.u64") &&
                strstr(ptx, "setp.gt.s16") && strstr(ptx, "selp.b32"),
            "compares and selects of each width:\n%s", ptx);
  free(ptx);
}

/* The optimizer narrows the conversion of a value that is 0 or -1 (here
 * an arithmetic shift of a select by at least the width) to sitofp of an
 * i1, which LLVM 19's NVPTX back end emits as selp 1, 0 and a signed
 * conversion: +1.0 for -1 (tile-gpu diff seed 20201). The PTX selects
 * -1.0 itself. */
Test(codegen, signed_bool_to_float_is_minus_one) {
  const char *src = "kernel k(f: *f32, o: *f32) {\n"
                    "  let r = arange(0, 32);\n"
                    "  let v = load(f + r);\n"
                    "  store(o + r, (where(v > 10.0, bitcast(v, i32) / 65535, -2147483648) >> 35) as f32);\n"
                    "}\n";
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  cr_expect(strstr(ptx, "0fBF800000") && !strstr(ptx, "cvt.rn.f32.s32"), "-1.0 selected, no conversion of selp 1, 0:\n%s", ptx);
  free(ptx);
}

/* f16 * bf16 promotes to f32; stored as f16 it is rounded once. LLVM
 * narrowed the product to an f16 multiply of the bf16 operand rounded to
 * f16 (overflowing to inf; tile-gpu diff seed 3008), and the mirror image
 * to bf16. An explicit cast's f32 is opaque, so the product stays f32;
 * f16 * f16 is still one f16 multiply. */
Test(codegen, mixed_half_kinds_multiply_in_f32) {
  const char *src = "kernel k(a: *f16, b: *bf16, o: *f16, p: *bf16, q: *f16) {\n"
                    "  let r = arange(0, 64);\n"
                    "  store(o + r, (load(a + r) * load(b + r)) as f16);\n"
                    "  store(p + r, (load(a + 64 + r) * load(b + 64 + r)) as bf16);\n"
                    "  store(q + r, load(a + 128 + r) * load(a + 192 + r));\n"
                    "}\n";
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  int f32_muls = 0, f16_muls = 0;
  for (const char *p = ptx; (p = strstr(p, "mul.rn.f32")); p++) f32_muls++;
  for (const char *p = ptx; (p = strstr(p, "mul.rn.f16")); p++) f16_muls++;
  cr_expect(!strstr(ptx, "mul.rn.bf16") && f32_muls > 0 && f16_muls > 0 && f16_muls * 2 <= f32_muls,
            "mixed products in f32 (%d), f16 * f16 in f16 (%d):\n%s", f32_muls, f16_muls, ptx);
  free(ptx);
}

/* A store_block, then a load_block of the same bytes: the TMA store
 * completes (global writes included: wait_group, not wait_group.read)
 * before the load is issued (semantics.md, Memory: program order). */
Test(codegen, tma_store_completes_before_a_later_load) {
  const char *src = "kernel k(t: tensor<f32, 2>, out: *f32) {\n"
                    "  store_block(t, [0, 0], full([64, 64], 2.0, f32));\n"
                    "  let v = load_block(t, [0, 0], [64, 64]);\n"
                    "  store(out + arange(0, 64)[:, None] * 64 + arange(0, 64)[None, :], v);\n"
                    "}\n";
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  const char *st = strstr(ptx, "cp.async.bulk.tensor.2d.global.shared"), *wait = strstr(ptx, "cp.async.bulk.wait_group 0;");
  const char *ld = strstr(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global");
  cr_expect(st && wait && ld && st < wait && wait < ld, "store, full wait, load:\n%s", ptx);
  free(ptx);
}

/* The longest chain of dependent max.f32 in the PTX (each result one
 * more than the deeper of its operands; other registers count 0). */
static int max_chain(const char *ptx) {
  enum { NAMES = 4096, NAME_LEN = 16 };
  static char names[NAMES][NAME_LEN];
  static int depth[NAMES];
  int n = 0, deepest = 0;
  for (const char *p = ptx; (p = strstr(p, "max.f32")); p++) {
    char d[NAME_LEN], a[NAME_LEN], b[NAME_LEN];
    if (sscanf(p, "max.f32 %15[^,], %15[^,], %15[^;];", d, a, b) != 3) continue;
    int da = 0, db = 0;
    for (int i = 0; i < n; i++) {
      if (!strcmp(names[i], a)) da = depth[i];
      if (!strcmp(names[i], b)) db = depth[i];
    }
    if (n == NAMES) break;
    snprintf(names[n], NAME_LEN, "%s", d);
    depth[n] = 1 + (da > db ? da : db);
    if (depth[n] > deepest) deepest = depth[n];
    n++;
  }
  return deepest;
}

/* f32 maximum/minimum are one max.f32/min.f32 each (the instructions
 * order the zeros as the language does, docs/backend.md), exp2 is one
 * ex2.approx.ftz, and a reduction within a thread is a tree: the 16
 * registers of a row make a chain of 4 dependent max, not 15. */
Test(codegen, softmax_arithmetic_is_one_instruction_per_element) {
  const char *src = "@warps(1)\n"
                    "kernel k(x: *f32, o: *f32) {\n"
                    "  let r = arange(0, 64)[:, None] * 64 + arange(0, 64)[None, :];\n"
                    "  let v = load(x + r);\n"
                    "  let m = max(v, 1);\n"
                    "  store(o + r, exp2(v - m[:, None]) + minimum(v, 0.5));\n"
                    "}\n";
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  cr_expect(strstr(ptx, "max.f32") && strstr(ptx, "min.f32"), "%s", ptx);
  cr_expect(!strstr(ptx, "setp.eq.f32"), "no compare to fix the sign of zeros:\n%s", ptx);
  cr_expect(strstr(ptx, "ex2.approx.ftz.f32") && !strstr(ptx, "ex2.approx.f32"), "exp2 flushes subnormal results:\n%s", ptx);
  /* 64 elements of a row per thread (one row per thread: 64 rows over 32
   * lanes, two per thread) make a tree 6 deep, then the maximum with 0.5
   * is not in the chain (a minimum); a chain in register order would be
   * 63 deep */
  int chain = max_chain(ptx);
  cr_expect(chain >= 6 && chain <= 8, "dependent max.f32 chain %d:\n%s", chain, ptx);
  free(ptx);
}

/* A dot's accumulator scaled per row (online softmax's rescale) is
 * multiplied only when one of the thread's factors is not exactly 1: one
 * compare per distinct factor and a branch around the multiplies, and the
 * scaled product's wait inside it (the GPU suite runs this on the GPU:
 * tests/kernels/rescaled_accumulator.tile). The same product that does not
 * feed a dot multiplies unconditionally. */
Test(codegen, accumulator_rescale_by_ones_is_skipped) {
  static const char *const fmt = "kernel k(a: *bf16, b: *bf16, f: *f32, o: *f32) {\n"
                                 "  let i = arange(0, 64);\n"
                                 "  let at = load(a + i[:, None] * 64 + i[None, :]);\n"
                                 "  let bt = load(b + i[:, None] * 64 + i[None, :]);\n"
                                 "  let r = load(f + i);\n"
                                 "  var acc = dot(at, bt);\n"
                                 "  %s\n"
                                 "  store(o + i[:, None] * 64 + i[None, :], acc);\n"
                                 "}\n";
  char src[1024];
  snprintf(src, sizeof src, fmt, "acc = dot(at, bt, acc * r[:, None]);");
  char *ptx = harness_emit_source(src, TC_EMIT_PTX);
  cr_expect(strstr(ptx, "0f3F800000") && strstr(ptx, "wgmma.mma_async"), "no compare of the factors with 1:\n%s", ptx);
  const char *cmp = strstr(ptx, "0f3F800000"), *mul = strstr(ptx, "mul.rn.f32");
  cr_expect(cmp && mul && cmp < mul && strstr(cmp, "bra"), "the multiplies are not behind a branch:\n%s", ptx);
  /* the first product's wait is on the multiplying path only: none
   * between its commit and the compare */
  const char *commit = strstr(ptx, "wgmma.commit_group"), *wait = strstr(ptx, "wgmma.wait_group");
  cr_expect(commit && cmp && wait && commit < cmp && cmp < wait, "the wait is not behind the branch:\n%s", ptx);
  /* the branch with the wait is taken by the whole warpgroup or none */
  const char *vote = strstr(ptx, "barrier.red.or.pred");
  cr_expect(vote && cmp < vote && vote < wait, "no warpgroup vote before the branch with the wait:\n%s", ptx);
  free(ptx);
  snprintf(src, sizeof src, fmt, "acc = acc * r[:, None];");
  ptx = harness_emit_source(src, TC_EMIT_PTX);
  cr_expect(strstr(ptx, "mul.rn.f32") && !strstr(ptx, "0f3F800000"), "a product not feeding a dot is skipped:\n%s", ptx);
  free(ptx);
}

/* wait_turn / pass_turn: named barriers of the consumer warpgroups, each
 * behind a branch of its own (ptxas moves work across a barrier within a
 * basic block); in the one-block attention loop the turn is passed right
 * after QK^T is issued, before its wait; nothing without a split; a
 * barrier of all consumers while holding the turn is an error. */
Test(codegen, consumer_turns_are_named_barriers_behind_branches) {
  char *ptx = ptx_of("lang/std/flash_attention_ws.tile",
                     (const char *[]){"TURNS", "true", "TWO_BLOCKS", "false", "Q_IN_REGISTERS", "false", NULL});
  int waits = 0, passes = 0;
  for (const char *p = ptx; (p = strstr(p, "bra $turn_")); p++) {
    const char *end = strchr(p, '}');
    cr_assert(end);
    waits += strstr(p, "barrier.sync") && strstr(p, "barrier.sync") < end;
    passes += strstr(p, "barrier.arrive") && strstr(p, "barrier.arrive") < end;
  }
  /* warpgroup 0's first arrive and last wait; the loop's wait and pass,
   * and those before and after it */
  cr_expect(waits == 3 && passes == 3, "%d waits and %d passes behind branches:\n%s", waits, passes, ptx);
  bool passed_in_flight = false; /* some commit is followed by a pass before its wait */
  for (const char *commit = ptx; (commit = strstr(commit, "wgmma.commit_group")); commit++) {
    const char *pass = strstr(commit, "barrier.arrive"), *wait = strstr(commit, "wgmma.wait_group");
    passed_in_flight |= pass && wait && pass < wait;
  }
  cr_expect(passed_in_flight, "QK^T's wait comes before the turn is passed:\n%s", ptx);
  free(ptx);
  static const char *const alone = "@warps(8)\n"
                                   "kernel k(o: *f32) { wait_turn(); store(o + arange(0, 128), zeros([128], f32)); "
                                   "pass_turn(); }\n";
  ptx = harness_emit_source(alone, TC_EMIT_PTX);
  cr_expect(!strstr(ptx, "$turn_"), "turns without @warp_specialize:\n%s", ptx);
  free(ptx);
  static const char *const held = "@warp_specialize(1, 2, 24, 240)\n"
                                  "kernel k(o: *f32, a: tensor<bf16, 2>, b: tensor<bf16, 2>, n: i32) {\n"
                                  "  var acc = zeros([128, 64], f32);\n"
                                  "  wait_turn();\n"
                                  "  @pipeline(stages = 2)\n"
                                  "  for i in range(0, n, 64) {\n"
                                  "    acc = dot(load_block(a, [0, i], [128, 64]), load_block(b, [i, 0], [64, 64]), acc);\n"
                                  "    store(o + arange(0, 64), sum(acc, 0));\n"
                                  "  }\n"
                                  "  pass_turn();\n"
                                  "  store(o + arange(0, 128)[:, None] * 64 + arange(0, 64)[None, :], acc);\n"
                                  "}\n";
  tc_compilation *c = tc_compile("t.tile", held, strlen(held), NULL);
  cr_assert(tc_error_count(c) == 0, "%s", tc_diagnostics(c));
  cr_expect(!tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}));
  cr_expect(strstr(tc_diagnostics(c), "t.tile:8:30: error: GPU back end: this op needs a barrier of all consumer "
                                      "warpgroups") &&
                strstr(tc_diagnostics(c), "holds the turn taken at 4:3"),
            "%s", tc_diagnostics(c));
  tc_free(c);
}

/* Deferred wgmma waits: in the fused gate/up GEMM the two products of an
 * iteration are issued back to back and stay in flight over the next
 * iteration's (both accumulators only chain through the loop: D = 1), so
 * the loop waits for all but 2 groups (the last iteration's two) before
 * it hands their stage back (built with separate_products: paired, the
 * two are one group and the wait leaves one, test_pair.c); in the
 * software-pipelined attention loop P
 * is carried as the register A operand (no shared-memory staging in the
 * loop), the QK^T wait lets the P.V product run on, and ptxas reports no
 * wgmma note. */
Test(codegen, wgmma_waits_are_deferred_to_the_first_use) {
  const char *const mlp[] = {"ACT", "0", NULL};
  tc_compilation *c = harness_compile("lang/std/mlp.tile", "mlp_gate_up", mlp);
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE, .separate_products = true}), "%s",
            tc_diagnostics(c));
  char *ptx = tc_emit(c, TC_EMIT_PTX);
  const char *c1 = strstr(ptx, "wgmma.commit_group"), *c2 = c1 ? strstr(c1 + 1, "wgmma.commit_group") : NULL;
  const char *w1 = c1 ? strstr(c1, "wgmma.wait_group.sync.aligned") : NULL;
  const char *rel = w1 ? strstr(w1, "mbarrier.arrive") : NULL;
  cr_expect(c2 && w1 && c2 < w1 && !strncmp(w1, "wgmma.wait_group.sync.aligned 2;", 32) && rel,
            "commit, commit, then wait 2 and the release:\n%s", ptx);
  free(ptx);
  tc_free(c);

  const char *const att[] = {"HEAD_DIM", "128", NULL};
  c = harness_compile("tests/kernels/attention_pipelined.tile", NULL, att);
  cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
  ptx = tc_emit(c, TC_EMIT_PTX);
  cr_expect(strstr(ptx, "wgmma.wait_group.sync.aligned 1;"), "the QK^T wait leaves P.V pending");
  cr_expect(!strstr(ptx, "st.shared"), "P is the A operand from registers, never staged:\n%s", ptx);
  free(ptx);
  tc_free(c);
}

/* In the attention kernels (no wgmma chained across iterations), a ring
 * stage is handed back to the producer (mbar_arrive) only when every
 * wgmma issued before has completed: a full wgmma_wait (no pending count)
 * comes between the last wgmma and each release, however far the waits
 * were deferred. Checked on the lowered IR, whose op order is the
 * program's. */
Test(codegen, deferred_waits_still_precede_the_ring_release) {
  static const struct {
    const char *path, *defines[5];
  } ks[] = {{"tests/kernels/attention_pipelined.tile", {NULL}},
            {"lang/std/flash_attention_ws.tile", {NULL}},
            {"lang/std/flash_attention_ws.tile", {"HEAD_DIM", "64", "CAUSAL", "true", NULL}}};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
    tc_compilation *c = harness_compile(ks[i].path, NULL, ks[i].defines);
    cr_assert(tc_generate(c, &(tc_codegen_options){.linker = TC_LINKER_NONE}), "%s", tc_diagnostics(c));
    char *low = tc_emit(c, TC_EMIT_LOWERED);
    bool in_flight = false;
    int releases = 0;
    for (const char *line = low; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
      size_t n = strcspn(line, "\n");
      char buf[512];
      snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), line);
      if (strstr(buf, " = wgmma ")) in_flight = true;
      else if (strstr(buf, " = wgmma_wait ") && !strstr(buf, "pending")) in_flight = false;
      else if (strstr(buf, "mbar_arrive ")) {
        releases++;
        cr_expect(!in_flight, "%s: a stage released with a wgmma in flight:\n%s", ks[i].path, buf);
      }
    }
    cr_expect(releases > 0, "%s: no ring release found", ks[i].path);
    free(low);
    tc_free(c);
  }
}

/* device_print is vprintf with the interpreter's format (here the f32
 * tile's "%.9g" and the message's '%' doubled), device_assert
 * __assertfail with the message, the file and the line. */
Test(codegen, device_print_and_assert_call_vprintf_and_assertfail) {
  char *ptx = ptx_of("tests/kernels/device_print.tile", NULL);
  cr_expect(strstr(ptx, "vprintf,"), "no call of vprintf:\n%s", ptx);
  cr_expect(strstr(ptx, ".extern .func __assertfail"), "%s", ptx);
  free(ptx);
  tc_compilation *c = generate("tests/kernels/device_print.tile", NULL, TC_LINKER_NONE);
  char *ll = tc_emit(c, TC_EMIT_LLVM);
  tc_free(c);
  cr_expect(strstr(ll, "pid (%d, %d, %d) idx (%d, %d) v: %.9g\\0A"), "%s", ll);
  cr_expect(strstr(ll, "idx - 3 (100%%): %lld"), "the message's %% doubled");
  cr_expect(strstr(ll, "pid (%d, %d, %d) program start\\0A"), "a message alone");
  cr_expect(strstr(ll, "c\"x <= limit\\00\""), "the assert message");
  cr_expect(strstr(ll, "device_print.tile\\00\""), "the file");
  free(ll);
}

/* The fp8 forward stores P for its second product: each consumer
 * warpgroup stores and reads its own 64 rows, so both barriers around the
 * store are the warpgroup's own (barrier.sync on a register id, 128
 * threads) and the turns form compiles (a barrier of all consumers while
 * holding the turn would be an error). The bf16 forward, whose P stays in
 * registers, has no such barrier. */
Test(codegen, staging_barriers_of_one_warpgroup) {
  for (int turns = 0; turns < 2; turns++) {
    const char *const defs[] = {"TURNS", turns ? "true" : "false", NULL};
    char *ptx = ptx_of("lang/std/flash_attention_ws_fp8.tile", defs);
    char *ir = NULL;
    {
      tc_compilation *c = generate("lang/std/flash_attention_ws_fp8.tile", defs, TC_LINKER_NONE);
      ir = tc_emit(c, TC_EMIT_LOWERED);
      tc_free(c);
    }
    cr_expect_eq(harness_count(ir, "barrier {operand = 1}"), 2, "%s", ir);
    int own = 0;
    for (const char *p = strstr(ptx, "barrier.sync \t%r"); p; p = strstr(p + 1, "barrier.sync \t%r"))
      own += !strncmp(strchr(p, ',') ? strchr(p, ',') : p, ", 128;", 6);
    cr_expect_eq(own, 2, "turns %d: the staging barriers:\n%s", turns, ptx);
    free(ptx), free(ir);
  }
  tc_compilation *c = generate("lang/std/flash_attention_ws.tile", NULL, TC_LINKER_NONE);
  char *ws = tc_emit(c, TC_EMIT_LOWERED);
  cr_expect_eq(harness_count(ws, "operand = 1"), 0, "%s", ws);
  free(ws);
  tc_free(c);
}

/* An 8-bit A operand computed by a reshape is read from registers, from
 * a loaded tile too (converted to the fragment layout first), with one or
 * two 64-row instructions per warpgroup. */
Test(codegen, fp8_a_operand_from_a_reshape_is_read_from_registers) {
  for (int warps = 4; warps <= 8; warps *= 2) {
    char w[4];
    snprintf(w, sizeof w, "%d", warps);
    const char *const defs[] = {"WARPS", w, NULL};
    char *ptx = ptx_of("tests/kernels/dot_fp8_reshaped_a.tile", defs);
    int want = warps == 4 ? 4 : 2; /* (128 / 64 / warpgroups) rows x 2 steps of k32 */
    cr_expect_eq(harness_count(ptx, "e4m3.e4m3 {"), want, "%s", ptx);
    int a_regs = 0;
    for (const char *p = strstr(ptx, "wgmma.mma_async"); p; p = strstr(p + 1, "wgmma.mma_async")) {
      const char *acc_end = strchr(p, '}');
      a_regs += acc_end && !strncmp(acc_end, "}, {%r", 6);
    }
    cr_expect_eq(a_regs, want, "warps %d: A from registers:\n%s", warps, ptx);
    free(ptx);
  }
}

/* With P and V^T in k order (P_IN_REGISTERS), the fp8 forward's second
 * product reads P from registers: the k-ordered accumulator is the 8-bit
 * A operand's layout up to the order of each thread's registers, so no
 * shared memory, no barrier and no shuffle moves it (the 4 wgmma of P.V
 * take four 32-bit registers), and its conversion to e4m3 takes one cvt
 * for two values (32 for the 64 of a thread's P). */
Test(codegen, fp8_p_in_registers_moves_nothing) {
  const char *const defs[] = {"P_IN_REGISTERS", "true", NULL};
  char *ptx = ptx_of("lang/std/flash_attention_ws_fp8.tile", defs);
  cr_expect_eq(harness_count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 8, "%s", ptx);
  int a_regs = 0;
  for (const char *p = strstr(ptx, "wgmma.mma_async"); p; p = strstr(p + 1, "wgmma.mma_async")) {
    const char *acc_end = strchr(p, '}');
    a_regs += acc_end && !strncmp(acc_end, "}, {%r", 6);
  }
  cr_expect_eq(a_regs, 4, "the P.V products with A in registers:\n%s", ptx);
  cr_expect_eq(harness_count(ptx, "st.shared"), 0, "%s", ptx);
  cr_expect_eq(harness_count(ptx, "barrier.sync \t%r"), 0, "a staging barrier:\n%s", ptx);
  cr_expect_eq(harness_count(ptx, "cvt.rn.satfinite.e4m3x2.f32"), 32, "%s", ptx);
  free(ptx);
  tc_compilation *c = generate("lang/std/flash_attention_ws_fp8.tile", defs, TC_LINKER_NONE);
  char *ir = tc_emit(c, TC_EMIT_LOWERED);
  cr_expect_eq(harness_count(ir, "operand = 1"), 0, "%s", ir);
  free(ir);
  tc_free(c);
}
