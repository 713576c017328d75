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
