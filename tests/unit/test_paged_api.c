/* test_paged_api.c - tile_paged.h without a GPU: the split rule, and
 * every check of a problem, a plan and the buffers, which come before the
 * kernels are needed (so a wrong call is reported, with the field, on any
 * machine). The GPU suite (tests/gpu/gpu_paged.c) runs the calls. */
#include <criterion/criterion.h>
#include <string.h>

#include "tile_paged.h"

static const tile_paged_problem good = {.batch = 4, .heads = 32, .heads_kv = 8, .head_dim = 128, .page_size = 16,
                                        .max_kv_len = 4096};
/* 16-byte aligned stand-ins for device pointers (never dereferenced) */
#define P(i) ((uint64_t)0x10000 * (i))

static void expect_plan_error(const tile_paged_problem *p, const char *message) {
  tile_paged_plan plan;
  tile_status st = tile_paged_decode_plan(NULL, p, &plan);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT, "%s", message);
  cr_expect(strstr(tile_last_error(), message), "got '%s', expected '%s'", tile_last_error(), message);
}

Test(paged_api, the_split_rule) {
  /* enough programs: no split */
  cr_expect_eq(tile_paged_splits(64, 8, 32768, 132), 1);
  /* 512 programs: fewer than 4 * 132, but two splits would pass it */
  cr_expect_eq(tile_paged_splits(64, 8, 4096, 132), 1);
  /* 256 programs: two splits reach 512 */
  cr_expect_eq(tile_paged_splits(32, 8, 32768, 132), 2);
  /* 32 programs on 132 SMs: 4 * 132 / 32 = 16 */
  cr_expect_eq(tile_paged_splits(1, 32, 32768, 132), 16);
  /* 8 programs: 66, but no chunk below 512 tokens (64) */
  cr_expect_eq(tile_paged_splits(1, 8, 32768, 132), 64);
  cr_expect_eq(tile_paged_splits(1, 8, 16384, 132), 32);
  /* no chunk below TILE_PAGED_MIN_CHUNK tokens */
  cr_expect_eq(tile_paged_splits(1, 8, 3 * TILE_PAGED_MIN_CHUNK, 132), 3);
  cr_expect_eq(tile_paged_splits(1, 8, 100, 132), 1);
  /* at most TILE_PAGED_MAX_SPLITS */
  cr_expect_eq(tile_paged_splits(1, 1, 1 << 24, 132), TILE_PAGED_MAX_SPLITS);
  /* nonsense in: one split */
  cr_expect_eq(tile_paged_splits(0, 0, 0, 0), 1);
}

Test(paged_api, problems_are_checked_field_by_field) {
  expect_plan_error(NULL, "tile_paged_decode_plan: the problem is NULL");
  tile_paged_problem p = good;
  p.head_dim = 96;
  expect_plan_error(&p, "no kernel for head_dim 96 and page_size 16");
  p = good, p.page_size = 8;
  expect_plan_error(&p, "no kernel for head_dim 128 and page_size 8");
  p = good, p.heads = 12;
  expect_plan_error(&p, "heads (12) is not a multiple of heads_kv (8)");
  p = good, p.heads = 64, p.heads_kv = 2;
  expect_plan_error(&p, "32 query heads per KV head: at most 16");
  p = good, p.max_kv_len = 0;
  expect_plan_error(&p, "max_kv_len (0) must be at least 1");
  p = good, p.kv_type = (tile_paged_kv_type)7;
  expect_plan_error(&p, "kv_type 7 is not one of TILE_PAGED_KV_BF16, _E4M3, _INT4");
  p = good, p.strides[0] = 16384, p.strides[1] = 1024, p.strides[2] = 100;
  expect_plan_error(&p, "strides[2] is 100: strides must be positive multiples of 16");
  p = good, p.strides[0] = 16384, p.strides[1] = (int64_t)1 << 32, p.strides[2] = 128;
  expect_plan_error(&p, "strides[1] (4294967296) must fit in 32 bits");
  p = good, p.sm_scale = -1;
  expect_plan_error(&p, "sm_scale is -1: it must be positive and finite");
  /* a good problem reaches the handle's check */
  expect_plan_error(&good, "tile_paged_decode_plan: the tile_paged is NULL");
}

Test(paged_api, buffers_are_checked) {
  tile_paged_plan plan = {.p = good, .splits = 1, .variant = 0};
  tile_paged_buffers b = {P(1), P(2), P(3), P(4), P(5), 0, P(7), P(8), P(9), 0, 0, 0, 0};
  /* the plan names another variant than its problem's */
  tile_status st = tile_paged_decode(NULL, &plan, &b, NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "the plan was not made by tile_paged_decode_plan"), "%s", tile_last_error());
  /* an int4 plan (its variant: the table's order, d128 page 16 int4) needs the group scales */
  tile_paged_plan p4 = {.p = good, .splits = 1, .variant = 3 * 4 + 3 + 2};
  p4.p.kv_type = TILE_PAGED_KV_INT4;
  st = tile_paged_decode(NULL, &p4, &b, NULL);
  cr_expect(strstr(tile_last_error(), "tile_paged_decode: k_scales is 0"), "%s", tile_last_error());
  b.k_scales = P(10), b.v_scales = P(11);
  st = tile_paged_decode(NULL, &p4, &b, NULL);
  cr_expect(strstr(tile_last_error(), "the tile_paged is NULL"), "%s", tile_last_error());
  cr_expect_eq(tile_paged_decode(NULL, NULL, &b, NULL), TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "plan is NULL"), "%s", tile_last_error());
  /* tile_paged_prefill: the plan's query count, then the handle; the
   * buffers (qo_indptr too) before the handle */
  tile_paged_plan pp;
  tile_paged_problem pr = good;
  st = tile_paged_prefill_plan(NULL, &pr, &pp);
  cr_expect(strstr(tile_last_error(), "tile_paged_prefill_plan: max_q_len is 0: it must be at least 1"), "%s",
            tile_last_error());
  pr.max_q_len = 300;
  st = tile_paged_prefill_plan(NULL, &pr, &pp);
  cr_expect(strstr(tile_last_error(), "tile_paged_prefill_plan: the tile_paged is NULL"), "%s", tile_last_error());
  tile_paged_plan pf = {.p = pr, .splits = 1, .variant = 3 * 4 + 3}; /* d128 page 16 bf16 */
  st = tile_paged_prefill(NULL, &pf, &b, NULL);
  cr_expect(strstr(tile_last_error(), "tile_paged_prefill: qo_indptr is 0"), "%s", tile_last_error());
  b.qo_indptr = P(12);
  st = tile_paged_prefill(NULL, &pf, &b, NULL);
  cr_expect(strstr(tile_last_error(), "tile_paged_prefill: the tile_paged is NULL"), "%s", tile_last_error());
  pf.splits = 2;
  st = tile_paged_prefill(NULL, &pf, &b, NULL);
  cr_expect(strstr(tile_last_error(), "the plan was not made by tile_paged_prefill_plan"), "%s", tile_last_error());
  /* tile_paged_append: pointers checked, then the handle */
  tile_paged_problem a = {.heads_kv = 4, .head_dim = 128, .page_size = 16};
  st = tile_paged_append(NULL, &a, P(1), P(2), P(3), P(4), P(5), 0, P(7), P(8), 0, 10, NULL);
  cr_expect_eq(st, TILE_ERROR_INVALID_ARGUMENT);
  cr_expect(strstr(tile_last_error(), "tile_paged_append: pos is 0"), "%s", tile_last_error());
  st = tile_paged_append(NULL, &a, P(1) + 1, P(2), P(3), P(4), P(5), P(6), P(7), P(8), 0, 10, NULL);
  cr_expect(strstr(tile_last_error(), "k_cache (0x10001) is not 2-byte aligned"), "%s", tile_last_error());
  st = tile_paged_append(NULL, &a, P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8), 0, -1, NULL);
  cr_expect(strstr(tile_last_error(), "new_tokens is -1"), "%s", tile_last_error());
  a.kv_type = TILE_PAGED_KV_E4M3;
  st = tile_paged_append(NULL, &a, P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8), 0, 10, NULL);
  cr_expect(strstr(tile_last_error(), "kv_scale is 0"), "%s", tile_last_error());
  a.kv_type = TILE_PAGED_KV_INT4;
  st = tile_paged_append(NULL, &a, P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8), 0, 10, NULL);
  cr_expect(strstr(tile_last_error(), "appending to an int4 cache is not offered"), "%s", tile_last_error());
  a.kv_type = TILE_PAGED_KV_BF16;
  st = tile_paged_append(NULL, &a, P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8), 0, 10, NULL);
  cr_expect(strstr(tile_last_error(), "the tile_paged is NULL"), "%s", tile_last_error());
  /* page copies and swaps */
  st = tile_paged_copy_pages(NULL, &a, P(1), P(2), P(3), P(4), -1, NULL);
  cr_expect(strstr(tile_last_error(), "tile_paged_copy_pages: n_pages is -1"), "%s", tile_last_error());
  st = tile_paged_swap_pages(NULL, &a, P(1), P(2), 0, P(4), 3, NULL);
  cr_expect(strstr(tile_last_error(), "tile_paged_swap_pages: a is 0"), "%s", tile_last_error());
  st = tile_paged_copy_pages(NULL, &a, P(1), P(2), P(3), P(4) + 2, 3, NULL);
  cr_expect(strstr(tile_last_error(), "dst (0x40002) is not 4-byte aligned"), "%s", tile_last_error());
  a.page_size = 5;
  st = tile_paged_copy_pages(NULL, &a, P(1), P(2), P(3), P(4), 3, NULL);
  cr_expect(strstr(tile_last_error(), "page_size 5"), "%s", tile_last_error());
  a.page_size = 16;
  st = tile_paged_copy_pages(NULL, &a, P(1), P(2), P(3), P(4), 3, NULL);
  cr_expect(strstr(tile_last_error(), "the tile_paged is NULL"), "%s", tile_last_error());
}
