/* test_attention_api.c - tile_attention.h without a GPU: every check of a
 * problem and of the pointers comes before the kernels are needed, so a
 * wrong call is reported (with the field) on any machine. The GPU suite
 * (tests/gpu/gpu_attention.c) runs the calls. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tile_attention.h"

static const tile_attention_problem good = {.batch = 2, .heads = 8, .heads_kv = 2, .seqlen = 300, .head_dim = 128};
/* 16-byte aligned stand-ins for device pointers (never dereferenced) */
#define P(i) ((uint64_t)0x10000 * (i))

static void expect_forward_error(const tile_attention_problem *p, uint64_t out, const char *message) {
  tile_status st = tile_attention_forward(NULL, p, out, P(2), P(3), P(4), P(5), NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "%s", message);
  cr_expect(strstr(tile_last_error(), message), "got '%s', expected '%s'", tile_last_error(), message);
}

Test(attention_api, problems_are_checked_field_by_field) {
  expect_forward_error(NULL, P(1), "tile_attention_forward: the problem is NULL");
  tile_attention_problem p = good;
  p.head_dim = 96;
  expect_forward_error(&p, P(1), "head_dim 96 has no kernel (64 and 128 do)");
  p = good, p.heads = 6, p.heads_kv = 4;
  expect_forward_error(&p, P(1), "heads (6) is not a multiple of heads_kv (4)");
  p = good, p.seqlen = 0;
  expect_forward_error(&p, P(1), "seqlen (0) must be at least 1");
  p = good, p.batch = 9000;
  expect_forward_error(&p, P(1), "batch * heads (72000) is above 65535");
  p = good, p.q_strides[0] = 1 << 20, p.q_strides[1] = 128, p.q_strides[2] = 100;
  expect_forward_error(&p, P(1), "q_strides[2] is 100: strides must be positive multiples of 8");
  p = good, p.kv_strides[0] = 8, p.kv_strides[1] = -8, p.kv_strides[2] = 8;
  expect_forward_error(&p, P(1), "kv_strides[1] is -8");
  p = good, p.sm_scale = -0.125f;
  expect_forward_error(&p, P(1), "sm_scale is -0.125: it must be positive and finite");
  p = good, p.sm_scale = (float)INFINITY;
  expect_forward_error(&p, P(1), "sm_scale is inf: it must be positive and finite");
  p = good, p.sm_scale = (float)NAN;
  expect_forward_error(&p, P(1), "it must be positive and finite");
}

Test(attention_api, pointers_are_checked) {
  expect_forward_error(&good, 0, "tile_attention_forward: out is 0");
  expect_forward_error(&good, P(1) + 8, "out (0x10008) is not 16-byte aligned");
  /* lse holds f32: 4 bytes suffice */
  tile_status lst = tile_attention_forward(NULL, &good, P(1), P(2) + 4, P(3), P(4), P(5), NULL);
  cr_expect(lst == TILE_ERROR_INVALID_ARGUMENT && strstr(tile_last_error(), "the tile_attention is NULL"), "%s",
            tile_last_error());
  lst = tile_attention_forward(NULL, &good, P(1), P(2) + 2, P(3), P(4), P(5), NULL);
  cr_expect(strstr(tile_last_error(), "lse (0x20002) is not 4-byte aligned"), "%s", tile_last_error());
  tile_status st = tile_attention_backward(NULL, &good, P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8), P(9), 0, NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_attention_backward: workspace is 0"), "%s", tile_last_error());
}

Test(attention_api, a_good_call_needs_the_attention_object) {
  tile_status st = tile_attention_forward(NULL, &good, P(1), P(2), P(3), P(4), P(5), NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "the tile_attention is NULL"), "%s", tile_last_error());
  tile_attention *a = (tile_attention *)0x1;
  cr_expect_eq(tile_attention_create(NULL, &a), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect_null(a, "out is cleared on failure");
  cr_expect_eq(tile_attention_create(NULL, NULL), TILE_ERROR_INVALID_ARGUMENT);
  tile_attention_destroy(NULL);
}

Test(attention_api, workspace_is_one_float_per_query_row) {
  cr_expect_eq(tile_attention_workspace_bytes(&good), (size_t)2 * 8 * 300 * 4);
  cr_expect_eq(tile_attention_workspace_bytes(NULL), 0);
}

static void expect_fp8_error(const tile_attention_problem *p, const tile_attention_fp8_scales *s, uint64_t q,
                             const char *message) {
  tile_status st = tile_attention_forward_fp8(NULL, p, P(1), q, P(3), P(4), s, NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "%s", message);
  cr_expect(strstr(tile_last_error(), message), "got '%s', expected '%s'", tile_last_error(), message);
}

Test(attention_api, the_fp8_forward_checks_its_own_limits) {
  const tile_attention_fp8_scales ok = {0.01f, 0.02f, 0.03f};
  tile_attention_problem p = good; /* grouped-query heads: not in fp8 */
  expect_fp8_error(&p, &ok, P(2), "heads (8) and heads_kv (2) differ: the fp8 forward has no grouped-query heads");
  p.heads_kv = 8;
  expect_fp8_error(&p, &ok, P(2) + 8, "tile_attention_forward_fp8: q (0x20008) is not 16-byte aligned");
  p.q_strides[0] = 300 * 8 * 128, p.q_strides[1] = 128, p.q_strides[2] = 8 * 128; /* BSHD q, BHSD k and v */
  expect_fp8_error(&p, &ok, P(2), "q_strides and kv_strides differ");
  memcpy(p.kv_strides, p.q_strides, sizeof p.q_strides);
  expect_fp8_error(&p, NULL, P(2), "the scales are NULL");
  expect_fp8_error(&p, &(tile_attention_fp8_scales){0.01f, 0.0f, 0.03f}, P(2), "descale_k is 0: it must be positive");
  expect_fp8_error(&p, &(tile_attention_fp8_scales){0.01f, 0.02f, (float)INFINITY}, P(2), "descale_v is inf");
  expect_fp8_error(&p, &ok, P(2), "tile_attention_forward_fp8: the tile_attention is NULL");
  p.head_dim = 256;
  expect_fp8_error(&p, &ok, P(2), "head_dim 256 has no kernel");
}

static void expect_fp8_lse_error(const tile_attention_problem *p, uint64_t workspace, const char *message) {
  const tile_attention_fp8_scales ok = {0.01f, 0.02f, 0.03f};
  tile_status st = tile_attention_forward_fp8_lse(NULL, p, P(1), P(2), P(3), P(4), P(5), workspace, &ok, NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "%s", message);
  cr_expect(strstr(tile_last_error(), message), "got '%s', expected '%s'", tile_last_error(), message);
}

Test(attention_api, the_warp_specialized_fp8_forward_checks_its_layout_and_workspace) {
  tile_attention_problem p = good;
  p.heads_kv = 8;
  expect_fp8_lse_error(&p, 0, "tile_attention_forward_fp8_lse: workspace (0x0) is 0");
  expect_fp8_lse_error(&p, P(6) + 4, "workspace (0x60004) is not 16-byte aligned");
  /* rows padded apart: neither contiguous layout */
  int64_t s[3] = {300 * 8 * 256, 256, 8 * 256};
  memcpy(p.q_strides, s, sizeof s), memcpy(p.kv_strides, s, sizeof s);
  expect_fp8_lse_error(&p, P(6), "the strides are neither contiguous BHSD nor BSHD");
  /* BSHD is served */
  int64_t bshd[3] = {300 * 8 * 128, 128, 8 * 128};
  memcpy(p.q_strides, bshd, sizeof bshd), memcpy(p.kv_strides, bshd, sizeof bshd);
  expect_fp8_lse_error(&p, P(6), "tile_attention_forward_fp8_lse: the tile_attention is NULL");
  p = good; /* grouped-query heads are served */
  expect_fp8_lse_error(&p, P(6), "tile_attention_forward_fp8_lse: the tile_attention is NULL");
  p.heads = 6, p.heads_kv = 4;
  expect_fp8_lse_error(&p, P(6), "heads (6) is not a multiple of heads_kv (4)");
}

Test(attention_api, the_fp8_workspace_holds_each_kv_heads_v_transposed_in_padded_rows) {
  tile_attention_problem p = good; /* 2 key/value heads, 300 tokens: rows of 304 bytes */
  cr_expect_eq(tile_attention_fp8_workspace_bytes(&p), (size_t)2 * 2 * 128 * 304);
  p.seqlen = 320, p.heads_kv = 8;
  cr_expect_eq(tile_attention_fp8_workspace_bytes(&p), (size_t)2 * 8 * 128 * 320);
  cr_expect_eq(tile_attention_fp8_workspace_bytes(NULL), 0);
}
