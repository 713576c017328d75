/* test_mlp_api.c - tile_mlp.h without a GPU: every check of a problem and
 * of the pointers comes before the kernels are needed, so a wrong call is
 * reported (with the field) on any machine. The GPU suite
 * (tests/gpu/gpu_mlp.c) runs the calls. */
#include <criterion/criterion.h>
#include <string.h>

#include "tile_mlp.h"

static const tile_mlp_problem good = {.tokens = 1000, .d_model = 264, .d_ff = 520, .act = TILE_MLP_SWIGLU};
/* 16-byte aligned stand-ins for device pointers (never dereferenced) */
#define P(i) ((uint64_t)0x10000 * (i))

static void expect_error(const tile_mlp_problem *p, const uint64_t ptrs[7], const char *message) {
  tile_status st = tile_mlp_forward(NULL, p, ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "%s", message);
  cr_expect(strstr(tile_last_error(), message), "got '%s', expected '%s'", tile_last_error(), message);
}

/* y, x, w_gate, w_up, w_down, residual (none), workspace */
static const uint64_t ok_ptrs[7] = {P(1), P(2), P(3), P(4), P(5), 0, P(7)};

Test(mlp_api, problems_are_checked_field_by_field) {
  expect_error(NULL, ok_ptrs, "tile_mlp_forward: the problem is NULL");
  tile_mlp_problem p = good;
  p.tokens = 0;
  expect_error(&p, ok_ptrs, "tokens (0), d_model (264) and d_ff (520) must be at least 1");
  p = good, p.d_ff = 502;
  expect_error(&p, ok_ptrs, "d_model (264) and d_ff (502) must be multiples of 8");
  p = good, p.act = (tile_mlp_activation)3;
  expect_error(&p, ok_ptrs, "act is 3: TILE_MLP_SWIGLU, TILE_MLP_GEGLU or TILE_MLP_GEGLU_TANH");
  p = good, p.act = (tile_mlp_activation)-1;
  expect_error(&p, ok_ptrs, "act is -1");
}

Test(mlp_api, pointers_are_checked) {
  uint64_t ptrs[7];
  memcpy(ptrs, ok_ptrs, sizeof ptrs);
  ptrs[3] = 0;
  expect_error(&good, ptrs, "tile_mlp_forward: w_up is 0");
  memcpy(ptrs, ok_ptrs, sizeof ptrs);
  ptrs[6] = 0;
  expect_error(&good, ptrs, "tile_mlp_forward: workspace is 0");
  memcpy(ptrs, ok_ptrs, sizeof ptrs);
  ptrs[1] = P(2) + 8;
  expect_error(&good, ptrs, "x (0x20008) is not 16-byte aligned");
  memcpy(ptrs, ok_ptrs, sizeof ptrs);
  ptrs[5] = P(6) + 2; /* the residual may be 0, but not misaligned */
  expect_error(&good, ptrs, "residual (0x60002) is not 16-byte aligned");
  /* a good call without the object */
  expect_error(&good, ok_ptrs, "tile_mlp_forward: the tile_mlp is NULL");
}

Test(mlp_api, create_checks_its_arguments_and_the_workspace_is_h) {
  tile_mlp *m = (tile_mlp *)&m;
  cr_expect_eq(tile_mlp_create(NULL, &m), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_null(m, "out is cleared on failure");
  cr_expect_eq(tile_mlp_create(NULL, NULL), TILE_ERROR_INVALID_ARGUMENT);
  tile_mlp_destroy(NULL);
  cr_expect_eq(tile_mlp_workspace_bytes(&good), (size_t)1000 * 520 * 2);
  tile_mlp_problem p = good;
  p.d_model = 7;
  cr_expect_eq(tile_mlp_workspace_bytes(&p), 0);
  cr_expect_eq(tile_mlp_workspace_bytes(NULL), 0);
}

/* ---- the MoE layer ---- */

static const tile_moe_problem moe_good = {
    .tokens = 1001, .d_model = 136, .d_ff = 264, .experts = 8, .top_k = 2, .renormalize = true};
/* y, x, router_logits, w_gate, w_up, w_down, workspace */
static const uint64_t moe_ptrs[7] = {P(1), P(2), P(3), P(4), P(5), P(6), P(7)};

static void expect_moe_error(const tile_moe_problem *p, const uint64_t ptrs[7], const char *message) {
  tile_status st = tile_moe_forward(NULL, p, ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "%s", message);
  cr_expect(strstr(tile_last_error(), message), "got '%s', expected '%s'", tile_last_error(), message);
}

Test(mlp_api, moe_problems_are_checked_field_by_field) {
  expect_moe_error(NULL, moe_ptrs, "tile_moe_forward: the problem is NULL");
  tile_moe_problem p = moe_good;
  p.d_model = 130;
  expect_moe_error(&p, moe_ptrs, "d_model (130) and d_ff (264) must be multiples of 8");
  p = moe_good, p.experts = 129;
  expect_moe_error(&p, moe_ptrs, "experts (129) must be 1 to 128");
  p = moe_good, p.experts = 0;
  expect_moe_error(&p, moe_ptrs, "experts (0) must be 1 to 128");
  p = moe_good, p.top_k = 9, p.experts = 64;
  expect_moe_error(&p, moe_ptrs, "top_k (9) must be 1 to 8 and at most experts (64)");
  p = moe_good, p.top_k = 3, p.experts = 2;
  expect_moe_error(&p, moe_ptrs, "top_k (3) must be 1 to 8 and at most experts (2)");
  p = moe_good, p.tokens = 1 << 30, p.top_k = 8, p.experts = 8;
  expect_moe_error(&p, moe_ptrs, "tokens * top_k (8589934592) must fit in 32 bits");
  p = moe_good, p.act = (tile_mlp_activation)7;
  expect_moe_error(&p, moe_ptrs, "act is 7");
  p = moe_good, p.capacity = -1;
  expect_moe_error(&p, moe_ptrs, "capacity (-1) must be 0 (no limit) or positive");
}

/* tile_moe_stats: the routed counts (after ids and weights) and the
 * dropped count (offsets[experts + 1]) inside the workspace. */
Test(mlp_api, moe_stats_point_into_the_workspace) {
  size_t pairs = 1001 * 2, r = 256, rounded = (pairs * 4 + r - 1) / r * r;
  uint64_t counts = 0, dropped = 0, ws = P(9);
  cr_assert_eq(tile_moe_stats(&moe_good, ws, &counts, &dropped), TILE_OK);
  cr_expect_eq(counts, ws + 2 * rounded);
  cr_expect_eq(dropped, ws + 2 * rounded + r + (8 + 1) * 4);
  cr_expect_eq(tile_moe_stats(&moe_good, ws, NULL, &dropped), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_moe_stats: counts or dropped is NULL"), "%s", tile_last_error());
  cr_expect_eq(tile_moe_stats(&moe_good, 0, &counts, &dropped), TILE_ERROR_INVALID_ARGUMENT);
  tile_moe_problem p = moe_good;
  p.experts = 0;
  cr_expect_eq(tile_moe_stats(&p, ws, &counts, &dropped), TILE_ERROR_INVALID_ARGUMENT);
}

Test(mlp_api, moe_pointers_are_checked) {
  uint64_t ptrs[7];
  memcpy(ptrs, moe_ptrs, sizeof ptrs);
  ptrs[2] = 0;
  expect_moe_error(&moe_good, ptrs, "tile_moe_forward: router_logits is 0");
  ptrs[2] = P(3) + 4; /* f32 logits: 4-byte alignment is enough */
  ptrs[5] = P(6) + 8;
  expect_moe_error(&moe_good, ptrs, "w_down (0x60008) is not 16-byte aligned");
  ptrs[5] = P(6), ptrs[2] = P(3) + 2;
  expect_moe_error(&moe_good, ptrs, "router_logits (0x30002) is not 4-byte aligned");
  expect_moe_error(&moe_good, moe_ptrs, "tile_moe_forward: the tile_moe is NULL");
  tile_moe *m = (tile_moe *)&m;
  cr_expect_eq(tile_moe_create(NULL, &m), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_null(m);
  tile_moe_destroy(NULL);
}

/* ids, weights, counts, offsets, the blocks' counts (one row of 8 per 64
 * pairs), row_of, token_of and tile_expert over the padded rows (each
 * rounded to 256 bytes), then x permuted, the hidden rows and the
 * experts' outputs over the padded rows (pairs + 8 experts * 127) */
#define UP256(v) (((size_t)(v) + 255) / 256 * 256)
Test(mlp_api, moe_workspace_holds_the_routing_and_the_rows) {
  size_t pairs = 1001 * 2, blocks = (pairs + 63) / 64, rows = pairs + 8 * 127;
  size_t want = 2 * UP256(pairs * 4) + UP256(8 * 4) + UP256(10 * 4) + UP256(blocks * 8 * 4) + UP256(pairs * 4) +
                UP256(rows * 4) + UP256((rows / 128 + 1) * 4) + UP256(rows * 136 * 2) + UP256(rows * 264 * 2) +
                UP256(rows * 136 * 2);
  cr_expect_eq(tile_moe_workspace_bytes(&moe_good), want);
  tile_moe_problem p = moe_good;
  p.top_k = 0;
  cr_expect_eq(tile_moe_workspace_bytes(&p), 0);
}

Test(mlp_api, the_two_halves_check_their_own_pointers) {
  cr_expect_eq(tile_mlp_gate_up(NULL, &good, P(1), P(2), 0, P(4), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_mlp_gate_up: w_gate is 0"), "%s", tile_last_error());
  cr_expect_eq(tile_mlp_gate_up(NULL, &good, P(1), P(2), P(3), P(4), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_mlp_gate_up: the tile_mlp is NULL"), "%s", tile_last_error());
  cr_expect_eq(tile_mlp_down(NULL, &good, P(1), P(2) + 4, P(3), 0, NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_mlp_down: h (0x20004) is not 16-byte aligned"), "%s", tile_last_error());
  cr_expect_eq(tile_mlp_down(NULL, &good, P(1), P(2), P(3), 0, NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_mlp_down: the tile_mlp is NULL"), "%s", tile_last_error());
  tile_mlp_problem p = good;
  p.tokens = -1;
  cr_expect_eq(tile_mlp_down(NULL, &p, P(1), P(2), P(3), 0, NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_mlp_down: tokens (-1)"), "%s", tile_last_error());
}

Test(mlp_api, the_fp8_layer_checks_its_widths_weights_and_scales) {
  tile_mlp_fp8_weights w = {P(3), P(4), P(5), P(6) + 4, P(7), P(8)};
  tile_mlp_problem p = good; /* 264 and 520: multiples of 8, not of 16 */
  cr_expect_eq(tile_mlp_fp8_workspace_bytes(&p), 0);
  cr_expect_eq(tile_mlp_forward_fp8(NULL, &p, P(1), P(2), &w, 0, P(9), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "d_model (264) and d_ff (520) must be multiples of 16 for fp8"), "%s",
            tile_last_error());
  p.d_model = 272, p.d_ff = 528;
  /* x, h quantized (1 byte each), two f32 scales per token, h in bf16: each part on 256 bytes */
  size_t t = 1000, parts = (t * 272 + 255) / 256 * 256 + (t * 4 + 255) / 256 * 256 + (t * 528 * 2 + 255) / 256 * 256 +
                          (t * 528 + 255) / 256 * 256 + (t * 4 + 255) / 256 * 256;
  cr_expect_eq(tile_mlp_fp8_workspace_bytes(&p), parts);
  cr_expect_eq(tile_mlp_forward_fp8(NULL, &p, P(1), P(2), NULL, 0, P(9), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "the weights are NULL"), "%s", tile_last_error());
  /* a scale array needs only its floats' alignment */
  cr_expect_eq(tile_mlp_forward_fp8(NULL, &p, P(1), P(2), &w, 0, P(9), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_mlp_forward_fp8: the tile_mlp is NULL"), "%s", tile_last_error());
  w.up_scale = P(7) + 2;
  cr_expect_eq(tile_mlp_forward_fp8(NULL, &p, P(1), P(2), &w, 0, P(9), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "w->up_scale (0x70002) is not 4-byte aligned"), "%s", tile_last_error());
  w.up_scale = P(7), w.w_down = 0;
  cr_expect_eq(tile_mlp_forward_fp8(NULL, &p, P(1), P(2), &w, 0, P(9), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "w->w_down is 0"), "%s", tile_last_error());
}

Test(mlp_api, the_fp8_moe_layer_checks_and_sizes_its_workspace) {
  tile_moe_problem p = moe_good; /* d_model 136: a multiple of 8, not of 16 */
  tile_moe_fp8_weights w = {P(4), P(5), P(6), P(7), P(8) + 4, P(9)};
  cr_expect_eq(tile_moe_fp8_workspace_bytes(&p), 0);
  cr_expect_eq(tile_moe_forward_fp8(NULL, &p, P(1), P(2), P(3), &w, P(10), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "d_model (136) and d_ff (264) must be multiples of 16 for fp8"), "%s",
            tile_last_error());
  p.d_model = 144, p.d_ff = 272;
  /* the bf16 layer's workspace, then xq, its block scales (2 blocks of
   * 128 columns a row), hq and its scales (3 blocks) over the padded rows */
  size_t rows = 1001 * 2 + 8 * 127;
  size_t want = tile_moe_workspace_bytes(&p) + UP256(rows * 144) + UP256(rows * 2 * 4) + UP256(rows * 272) +
                UP256(rows * 3 * 4);
  cr_expect_eq(tile_moe_fp8_workspace_bytes(&p), want);
  cr_expect_eq(tile_moe_forward_fp8(NULL, &p, P(1), P(2), P(3), NULL, P(10), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_moe_forward_fp8: the weights are NULL"), "%s", tile_last_error());
  cr_expect_eq(tile_moe_forward_fp8(NULL, &p, P(1), P(2), P(3), &w, P(10), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_moe_forward_fp8: the tile_moe is NULL"), "%s", tile_last_error());
  w.gate_scale = P(7) + 2;
  cr_expect_eq(tile_moe_forward_fp8(NULL, &p, P(1), P(2), P(3), &w, P(10), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "w->gate_scale (0x70002) is not 4-byte aligned"), "%s", tile_last_error());
  w.gate_scale = P(7), w.w_up = P(5) + 8;
  cr_expect_eq(tile_moe_forward_fp8(NULL, &p, P(1), P(2), P(3), &w, P(10), NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "w->w_up (0x50008) is not 16-byte aligned"), "%s", tile_last_error());
}
