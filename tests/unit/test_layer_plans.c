/* test_layer_plans.c - what the C APIs over the standard library launch,
 * without a GPU: over the fake driver (fake_cuda.c), which loads the
 * embedded cubins and logs every launch with its grid and arguments, and
 * every call that makes the host wait. Checked: the MoE layer is its
 * eight kernels in order on the caller's stream with no host round trip
 * (what lets a CUDA graph capture it); the paged decode follows its split
 * rule (a split batch of one sequence launches the split kernel and the
 * merge on the workspace, a full batch one kernel and no merge), also
 * without waiting; flash attention takes the warp-specialized kernels for
 * contiguous BHSD and BSHD and the strided ones otherwise. The numbers are
 * the GPU suite's to check. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fake_libs.h"
#include "tile_attention.h"
#include "tile_mlp.h"
#include "tile_paged.h"

/* The fake's log from here on. */
static void reset_log(void) {
  void *h = dlopen(fake_path("FAKE_CUDA_LIB"), RTLD_NOW | RTLD_LOCAL);
  cr_assert(h, "%s", dlerror());
  void (*reset)(void) = NULL;
  void *sym = dlsym(h, "fake_cuda_reset");
  cr_assert(sym);
  memcpy(&reset, &sym, sizeof sym);
  reset();
  dlclose(h);
}

static int count_lines(const char *log, const char *prefix) {
  int n = 0;
  for (const char *p = log; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    n += !strncmp(p, prefix, strlen(prefix));
  return n;
}

/* The log's launches are exactly these kernels, in this order. */
static void expect_launches(const char *log, const char *const *kernels, int n) {
  const char *at = log;
  char want[128];
  for (int i = 0; i < n; i++) {
    snprintf(want, sizeof want, "launch %s grid ", kernels[i]);
    at = strstr(at, want);
    cr_assert(at, "launch %d (%s) missing or out of order:\n%s", i, kernels[i], log);
    at++;
  }
  cr_expect_eq(count_lines(log, "launch "), n, "%s", log);
}

static void expect_no_host_wait(const char *log) {
  cr_expect_null(strstr(log, "synchronize"), "the host waited:\n%s", log);
  cr_expect_null(strstr(log, "to the host"), "a copy to the host:\n%s", log);
}

static uint64_t alloc(tile_runtime *rt, size_t bytes) {
  uint64_t p = 0;
  cr_assert_eq(tile_mem_alloc(rt, bytes, &p), TILE_OK);
  return p;
}

Test(layer_plans, moe_is_eight_kernels_on_the_stream_without_a_host_round_trip) {
  tile_runtime *rt = fake_runtime(1);
  tile_moe *m;
  cr_assert_eq(tile_moe_create(rt, &m), TILE_OK, "%s", tile_last_error());
  tile_moe_problem p = {.tokens = 1000, .d_model = 256, .d_ff = 512, .experts = 8, .top_k = 2, .renormalize = true};
  uint64_t y = alloc(rt, 1000 * 256 * 2), x = alloc(rt, 1000 * 256 * 2), logits = alloc(rt, 1000 * 8 * 4);
  uint64_t wg = alloc(rt, 8 * 256 * 512 * 2), wu = alloc(rt, 8 * 256 * 512 * 2), wd = alloc(rt, 8 * 512 * 256 * 2);
  uint64_t ws = alloc(rt, tile_moe_workspace_bytes(&p));
  tile_stream *s;
  cr_assert_eq(tile_stream_create(rt, &s), TILE_OK);
  reset_log();
  cr_assert_eq(tile_moe_forward(m, &p, y, x, logits, wg, wu, wd, ws, s), TILE_OK, "%s", tile_last_error());
  const char *log = cuda_log();
  static const char *const order[] = {"moe_route",  "moe_count",   "moe_scan",    "moe_scatter",
                                      "moe_gather", "moe_gemm_ws", "moe_gemm_ws", "moe_combine"};
  expect_launches(log, order, 8);
  int on_device_1 = 0; /* every launch on the stream's device */
  for (const char *at = strstr(log, " on device 1: "); at; at = strstr(at + 1, " on device 1: ")) on_device_1++;
  cr_expect_eq(on_device_1, 8, "%s", log);
  char want[64];
  /* y is written by the combine */
  snprintf(want, sizeof want, "launch moe_combine grid ");
  const char *combine = strstr(log, want);
  char ys[32];
  snprintf(ys, sizeof ys, "y=0x%llx ", (unsigned long long)y);
  cr_expect(combine && strstr(combine, ys), "the combine does not write y:\n%s", log);
  expect_no_host_wait(log);
  tile_stream_destroy(s);
  tile_moe_destroy(m);
  tile_runtime_destroy(rt);
}

Test(layer_plans, mlp_forward_is_two_kernels_without_waiting) {
  tile_runtime *rt = fake_runtime(0);
  tile_mlp *m;
  cr_assert_eq(tile_mlp_create(rt, &m), TILE_OK, "%s", tile_last_error());
  tile_mlp_problem p = {.tokens = 300, .d_model = 128, .d_ff = 256, .act = TILE_MLP_GEGLU_TANH};
  uint64_t b[6];
  for (int i = 0; i < 6; i++)
    b[i] = alloc(rt, 1 << 20);
  reset_log();
  cr_assert_eq(tile_mlp_forward(m, &p, b[0], b[1], b[2], b[3], b[4], 0, b[5], NULL), TILE_OK, "%s", tile_last_error());
  const char *log = cuda_log();
  cr_expect_eq(count_lines(log, "launch mlp_gate_up grid 132x1x1 "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch mlp_down grid 132x1x1 "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch "), 2, "%s", log);
  expect_no_host_wait(log);
  tile_mlp_destroy(m);
  tile_runtime_destroy(rt);
}

/* Decodes one batch shape: the plan, then its launches. */
static void decode(tile_paged *pg, tile_runtime *rt, int batch, int max_kv_len, tile_paged_plan *plan,
                   uint64_t *workspace) {
  tile_paged_problem p = {
      .batch = batch, .heads = 32, .heads_kv = 8, .head_dim = 128, .page_size = 16, .max_kv_len = max_kv_len};
  cr_assert_eq(tile_paged_decode_plan(pg, &p, plan), TILE_OK, "%s", tile_last_error());
  tile_paged_buffers b;
  memset(&b, 0, sizeof b);
  b.out = alloc(rt, 1 << 20), b.lse = alloc(rt, 1 << 16), b.q = alloc(rt, 1 << 20);
  b.k_cache = alloc(rt, 1 << 20), b.v_cache = alloc(rt, 1 << 20);
  b.page_ids = alloc(rt, 1 << 16), b.indptr = alloc(rt, 1 << 16), b.kv_len = alloc(rt, 1 << 16);
  b.workspace = *workspace = plan->workspace_bytes ? alloc(rt, plan->workspace_bytes) : 0;
  tile_stream *s;
  cr_assert_eq(tile_stream_create(rt, &s), TILE_OK);
  reset_log();
  cr_assert_eq(tile_paged_decode(pg, plan, &b, s), TILE_OK, "%s", tile_last_error());
  tile_stream_destroy(s);
}

Test(layer_plans, paged_decode_splits_by_its_rule) {
  tile_runtime *rt = fake_runtime(0);
  tile_paged *pg;
  cr_assert_eq(tile_paged_create(rt, &pg), TILE_OK, "%s", tile_last_error());
  tile_paged_plan plan;
  uint64_t ws;
  /* one sequence of 32k tokens, 8 KV heads on 132 SMs: 64 splits (8 x 64
   * programs, under 4 a SM; chunks of 512 tokens), then the merge */
  decode(pg, rt, 1, 32768, &plan, &ws);
  cr_expect_eq(plan.splits, tile_paged_splits(1, 8, 32768, 132));
  cr_expect_eq(plan.splits, 64);
  cr_expect_gt(plan.workspace_bytes, 0);
  const char *log = cuda_log();
  char want[128];
  cr_expect_eq(count_lines(log, "launch paged_decode grid 8x1x64 "), 1, "%s", log);
  const char *merge = strstr(log, "launch paged_decode_merge grid 32x1x1 ");
  cr_expect(merge, "no merge after a split decode:\n%s", log);
  snprintf(want, sizeof want, "part_out=0x%llx ", (unsigned long long)ws);
  cr_expect(merge && strstr(merge, want) && strstr(merge, "splits=64"), "the merge does not read the workspace:\n%s",
            log);
  cr_expect(strstr(log, "launch paged_decode grid") < merge, "the merge comes first:\n%s", log);
  expect_no_host_wait(log);
  /* a batch of 64 fills the GPU: one kernel, no workspace, no merge */
  decode(pg, rt, 64, 4096, &plan, &ws);
  cr_expect_eq(plan.splits, 1);
  cr_expect_eq(plan.workspace_bytes, 0);
  log = cuda_log();
  cr_expect_eq(count_lines(log, "launch paged_decode grid 8x64x1 "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch "), 1, "%s", log);
  expect_no_host_wait(log);
  tile_paged_destroy(pg);
  tile_runtime_destroy(rt);
}

/* The forward and backward of one attention problem: the log of their
 * launches. */
static const char *attention_calls(tile_attention *a, tile_runtime *rt, const tile_attention_problem *p) {
  uint64_t b[10];
  for (int i = 0; i < 10; i++)
    b[i] = alloc(rt, 64 << 20);
  reset_log();
  cr_assert_eq(tile_attention_forward(a, p, b[0], b[1], b[2], b[3], b[4], NULL), TILE_OK, "%s", tile_last_error());
  cr_assert_eq(tile_attention_backward(a, p, b[5], b[6], b[7], b[8], b[2], b[3], b[4], b[0], b[1], b[9], NULL), TILE_OK,
               "%s", tile_last_error());
  return cuda_log();
}

Test(layer_plans, attention_takes_the_warp_specialized_kernels_for_contiguous_layouts) {
  tile_runtime *rt = fake_runtime(0);
  tile_attention *a;
  cr_assert_eq(tile_attention_create(rt, &a), TILE_OK, "%s", tile_last_error());
  /* contiguous BHSD, d128, GQA 4: the TMA descriptors view q as
   * [batch * heads * seqlen, d] and k, v as [batch * heads_kv * seqlen, d] */
  tile_attention_problem p = {.batch = 2, .heads = 8, .heads_kv = 2, .seqlen = 1000, .head_dim = 128};
  const char *log = attention_calls(a, rt, &p);
  cr_expect_eq(count_lines(log, "launch flash_attention_ws grid 8x16x1 "), 1, "%s", log);
  cr_expect(strstr(log, "[16000x128] k=0x"), "q as one [16000 x 128] matrix:\n%s", log);
  cr_expect_eq(count_lines(log, "launch attention_bwd_preprocess "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch attention_bwd_dkdv_ws grid 8x4x1 "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch attention_bwd_dq_ws grid 8x16x1 "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch "), 4, "%s", log);
  expect_no_host_wait(log);
  /* contiguous BSHD (strides of [batch, head, row]), causal, d64: the same kernels */
  p = (tile_attention_problem){.batch = 2,
                               .heads = 8,
                               .heads_kv = 2,
                               .seqlen = 1000,
                               .head_dim = 64,
                               .causal = true,
                               .q_strides = {1000 * 8 * 64, 64, 8 * 64},
                               .kv_strides = {1000 * 2 * 64, 64, 2 * 64}};
  log = attention_calls(a, rt, &p);
  cr_expect_eq(count_lines(log, "launch flash_attention_ws "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch attention_bwd_dkdv_ws "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch attention_bwd_dq_ws "), 1, "%s", log);
  /* rows padded apart (neither layout): the strided kernels, strides passed as given */
  p.q_strides[2] = 8 * 64 + 64, p.q_strides[0] = 1000 * (8 * 64 + 64);
  log = attention_calls(a, rt, &p);
  cr_expect_eq(count_lines(log, "launch attention_fwd_lse "), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch attention_bwd_dkdv grid"), 1, "%s", log);
  cr_expect_eq(count_lines(log, "launch attention_bwd_dq grid"), 1, "%s", log);
  cr_expect(strstr(log, "stride_b=576000 stride_h=64 stride_n=576"), "the strides as given:\n%s", log);
  cr_expect_null(strstr(log, "_ws "), "a warp-specialized kernel on a strided layout:\n%s", log);
  expect_no_host_wait(log);
  tile_attention_destroy(a);
  tile_runtime_destroy(rt);
}

Test(layer_plans, the_fp8_forward_launches_its_kernel_with_the_scales) {
  tile_runtime *rt = fake_runtime(0);
  tile_attention *a;
  cr_assert_eq(tile_attention_create(rt, &a), TILE_OK, "%s", tile_last_error());
  tile_attention_problem p = {.batch = 3, .heads = 4, .heads_kv = 4, .seqlen = 1000, .head_dim = 128, .causal = true};
  uint64_t out = alloc(rt, 1 << 24), q = alloc(rt, 1 << 24), k = alloc(rt, 1 << 24), v = alloc(rt, 1 << 24);
  tile_attention_fp8_scales s = {0.25f, 0.5f, 0.125f};
  reset_log();
  cr_assert_eq(tile_attention_forward_fp8(a, &p, out, q, k, v, &s, NULL), TILE_OK, "%s", tile_last_error());
  const char *log = cuda_log();
  char want[512];
  /* BHSD strides filled in; sm_scale 1 / sqrt(128); a program per
   * BLOCK_M rows of each of the 12 heads */
  snprintf(want, sizeof want,
           "on device 0: out=0x%llx q=0x%llx k=0x%llx v=0x%llx seqlen=1000 heads=4 sm_scale=0.0883883 "
           "descale_q=0.25 descale_k=0.5 descale_v=0.125 stride_b=512000 stride_h=128000 stride_n=128\n",
           (unsigned long long)out, (unsigned long long)q, (unsigned long long)k, (unsigned long long)v);
  const char *at = strstr(log, want);
  cr_expect(at, "expected '%s' in:\n%s", want, log);
  cr_expect_eq(count_lines(log, "launch flash_attention_fp8 grid "), 1, "%s", log);
  unsigned gx = 0, gy = 0;
  cr_expect_eq(sscanf(log, "launch flash_attention_fp8 grid %ux%ux1", &gx, &gy), 2, "%s", log);
  cr_expect_eq(gy, 12);
  cr_expect_eq(gx, 16, "grid x %u: 1000 rows in blocks of BLOCK_M = 8192 / HEAD_DIM = 64", gx);
  expect_no_host_wait(log);
  tile_attention_destroy(a);
  tile_runtime_destroy(rt);
}

Test(layer_plans, the_warp_specialized_fp8_forward_transposes_v_into_the_workspace_first) {
  tile_runtime *rt = fake_runtime(0);
  tile_attention *a;
  cr_assert_eq(tile_attention_create(rt, &a), TILE_OK, "%s", tile_last_error());
  /* grouped-query heads: 4 query heads a key/value head */
  tile_attention_problem p = {.batch = 3, .heads = 16, .heads_kv = 4, .seqlen = 1000, .head_dim = 64, .causal = true};
  uint64_t out = alloc(rt, 1 << 24), lse = alloc(rt, 1 << 20), q = alloc(rt, 1 << 24), k = alloc(rt, 1 << 24),
           v = alloc(rt, 1 << 24), ws = alloc(rt, tile_attention_fp8_workspace_bytes(&p));
  tile_attention_fp8_scales s = {0.25f, 0.5f, 0.125f};
  reset_log();
  cr_assert_eq(tile_attention_forward_fp8_lse(a, &p, out, lse, q, k, v, ws, &s, NULL), TILE_OK, "%s",
               tile_last_error());
  const char *log = cuda_log();
  cr_expect_eq(count_lines(log, "launch "), 2, "%s", log);
  /* V^T of the 12 key/value heads: [12 * 64, 1008] (1000 tokens, rows
   * padded to 16 bytes, the padding written as zeros), 256 tokens a
   * program (BLOCK_T = 16384 / HEAD_DIM); the forward over the 48 query
   * heads */
  const char *vt = strstr(log, "launch attention_vt grid 4x12x1 ");
  const char *fwd = strstr(log, "launch flash_attention_ws_fp8 grid 8x48x1 ");
  cr_expect(vt && fwd && vt < fwd, "the transposition, then the forward:\n%s", log);
  char want[160];
  snprintf(want, sizeof want, "vt=0x%llx[768x1008]", (unsigned long long)ws);
  cr_expect(vt && strstr(vt, want), "expected '%s' in:\n%s", want, log);
  cr_expect(strstr(log, "stride_b=256000 stride_h=64000 stride_n=64"), "v's BHSD strides:\n%s", log);
  cr_expect(fwd && strstr(fwd, "heads=16 heads_kv=4 "), "%s", log);
  cr_expect(fwd && strstr(fwd, "descale_q=0.25 descale_k=0.5 descale_v=0.125"), "%s", log);
  /* k as [3 * 4 * 1000, 64], q as [3 * 16 * 1000, 64] */
  cr_expect(fwd && strstr(fwd, "[48000x64] k=0x") && strstr(fwd, "[12000x64] vt="), "%s", log);
  snprintf(want, sizeof want, "vt=0x%llx[768x1008] seqlen=1000", (unsigned long long)ws);
  cr_expect(fwd && strstr(fwd, want), "the forward reads the workspace: expected '%s' in:\n%s", want, log);
  expect_no_host_wait(log);
  tile_attention_destroy(a);
  tile_runtime_destroy(rt);
}

Test(layer_plans, the_fp8_mlp_quantizes_x_projects_quantizes_h_and_projects) {
  tile_runtime *rt = fake_runtime(0);
  tile_mlp *m;
  cr_assert_eq(tile_mlp_create(rt, &m), TILE_OK, "%s", tile_last_error());
  tile_mlp_problem p = {.tokens = 300, .d_model = 128, .d_ff = 256, .act = TILE_MLP_GEGLU};
  tile_mlp_fp8_weights w = {alloc(rt, 1 << 20), alloc(rt, 1 << 20), alloc(rt, 1 << 20),
                            alloc(rt, 1 << 12), alloc(rt, 1 << 12), alloc(rt, 1 << 12)};
  uint64_t y = alloc(rt, 1 << 20), x = alloc(rt, 1 << 20), res = alloc(rt, 1 << 20);
  uint64_t ws = alloc(rt, tile_mlp_fp8_workspace_bytes(&p));
  reset_log();
  cr_assert_eq(tile_mlp_forward_fp8(m, &p, y, x, &w, res, ws, NULL), TILE_OK, "%s", tile_last_error());
  const char *log = cuda_log();
  /* the workspace: xq at 0 (300 x 128 bytes), xs after it (38400 is a
   * multiple of 256), h at 38400 + 1280, hq after h's 153600 bytes */
  unsigned long long xs = ws + 38400, h = xs + 1280, hq = h + 153600, hs = hq + 76800;
  char want[512];
  snprintf(want, sizeof want, "launch mlp_quantize_fp8 grid 300x1x1 on device 0: q=0x%llx s=0x%llx x=0x%llx n=128\n",
           (unsigned long long)ws, xs, (unsigned long long)x);
  const char *at = strstr(log, want);
  cr_expect(at, "expected '%s' in:\n%s", want, log);
  snprintf(want, sizeof want, "launch mlp_gate_up_fp8 grid 132x1x1 on device 0: h=0x%llx[300x256] x=0x%llx[300x128] ",
           h, (unsigned long long)ws);
  cr_expect(at && (at = strstr(at, want)), "expected '%s' after the first quantization in:\n%s", want, log);
  snprintf(want, sizeof want, "launch mlp_quantize_fp8 grid 300x1x1 on device 0: q=0x%llx s=0x%llx x=0x%llx n=256\n",
           hq, hs, h);
  cr_expect(at && (at = strstr(at, want)), "expected '%s' after the gate/up projection in:\n%s", want, log);
  snprintf(want, sizeof want, "launch mlp_down_fp8 grid 132x1x1 on device 0: y=0x%llx[300x128] h=0x%llx[300x256] ",
           (unsigned long long)y, hq);
  cr_expect(at && (at = strstr(at, want)), "expected '%s' last in:\n%s", want, log);
  snprintf(want, sizeof want, "residual=0x%llx res_stride=128 tokens=300 d_ff=256 d_model=128\n",
           (unsigned long long)res);
  cr_expect(at && strstr(at, want), "expected '%s' in:\n%s", want, log);
  cr_expect_eq(count_lines(log, "launch "), 4, "%s", log);
  expect_no_host_wait(log);
  tile_mlp_destroy(m);
  tile_runtime_destroy(rt);
}

Test(layer_plans, the_fp8_moe_quantizes_both_grouped_gemms_operands) {
  tile_runtime *rt = fake_runtime(0);
  tile_moe *m;
  cr_assert_eq(tile_moe_create(rt, &m), TILE_OK, "%s", tile_last_error());
  tile_moe_problem p = {.tokens = 1000, .d_model = 256, .d_ff = 512, .experts = 8, .top_k = 2, .renormalize = true};
  tile_moe_fp8_weights w = {alloc(rt, 8 * 512 * 256), alloc(rt, 8 * 512 * 256), alloc(rt, 8 * 256 * 512),
                            alloc(rt, 1 << 12),       alloc(rt, 1 << 12),       alloc(rt, 1 << 12)};
  uint64_t y = alloc(rt, 1000 * 256 * 2), x = alloc(rt, 1000 * 256 * 2), logits = alloc(rt, 1000 * 8 * 4);
  uint64_t ws = alloc(rt, tile_moe_fp8_workspace_bytes(&p));
  reset_log();
  cr_assert_eq(tile_moe_forward_fp8(m, &p, y, x, logits, &w, ws, NULL), TILE_OK, "%s", tile_last_error());
  const char *log = cuda_log();
  static const char *const order[] = {
      "moe_route",       "moe_count",           "moe_scan",        "moe_scatter", "moe_gather", "moe_quantize_blocks",
      "moe_gemm_ws_fp8", "moe_quantize_blocks", "moe_gemm_ws_fp8", "moe_combine"};
  expect_launches(log, order, 10);
  char want[128];
  /* the weights as [experts * out, in]; the padded rows: 2000 + 8 * 127 = 3016 */
  snprintf(want, sizeof want, "w=0x%llx[4096x256] ", (unsigned long long)w.w_gate);
  cr_expect(strstr(log, want), "the gate weights as [8 * 512, 256]:\n%s", log);
  snprintf(want, sizeof want, "w=0x%llx[2048x512] w_scale=0x%llx w_up=0x%llx[2048x512] w_up_scale=0x%llx ",
           (unsigned long long)w.w_down, (unsigned long long)w.down_scale, (unsigned long long)w.w_down,
           (unsigned long long)w.down_scale);
  cr_expect(strstr(log, want), "the down weights as [8 * 256, 512]:\n%s", log);
  cr_expect(strstr(log, "launch moe_quantize_blocks grid 189x2x1 ") &&
                strstr(log, "launch moe_quantize_blocks grid 189x4x1 "),
            "x in 2 blocks of 128 columns, h in 4, over 3016 rows:\n%s", log);
  expect_no_host_wait(log);
  tile_moe_destroy(m);
  tile_runtime_destroy(rt);
}
