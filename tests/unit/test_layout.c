/* test_layout.c - unit tests of the layout algebra (compiler/layout).
 *
 * Blocked and default layouts are checked base by base against
 * hand-computed examples (the bit order is the contract the back end's
 * address arithmetic relies on), then by enumeration: every element held
 * exactly once (or exactly 2^k times with k replicated hardware bits),
 * slices agree with projections, reshapes and transposes round-trip, right
 * inverses invert, and conversion plans pick the cheapest correct kind.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "layout/layout.h"

/* Longest layout_str output the tests produce. */
#define STR_SIZE 512

/* ---- helpers ---- */

static void expect_bases(const char *what, const uint32_t *got, int ngot, const uint32_t *want, int nwant) {
  cr_assert_eq(ngot, nwant, "%s: %d bases, expected %d", what, ngot, nwant);
  for (int i = 0; i < nwant; i++) cr_expect_eq(got[i], want[i], "%s[%d] = %u, expected %u", what, i, got[i], want[i]);
}

#define EXPECT_BASES(what, got, ngot, ...)                                \
  do {                                                                    \
    const uint32_t want_[] = {__VA_ARGS__};                               \
    expect_bases(what, got, ngot, want_, sizeof want_ / sizeof want_[0]); \
  } while (0)

static void expect_no_regs(const Layout *l) { cr_expect_eq(l->nreg, 0, "expected no register bits, got %d", l->nreg); }

static int popcount(uint32_t v) { return __builtin_popcount(v); }

/* Every element is held exactly 2^(replicated lane and warp bits) times. */
static void expect_coverage(const Layout *l) {
  int bits = layout_flat_bits(l);
  uint32_t numel = 1u << bits;
  int *count = calloc(numel, sizeof *count);
  cr_assert(count);
  for (uint32_t w = 0; w < 1u << l->nwarp; w++)
    for (uint32_t ln = 0; ln < 1u << l->nlane; ln++)
      for (uint32_t r = 0; r < (uint32_t)layout_regs(l); r++) {
        uint32_t f = layout_apply(l, r, ln, w);
        cr_assert_lt(f, numel, "flat index %u outside the tile", f);
        count[f]++;
      }
  int copies = 1 << (popcount(layout_lane_replication(l)) + popcount(layout_warp_replication(l)));
  for (uint32_t f = 0; f < numel; f++) cr_assert_eq(count[f], copies, "element %u held %d times, expected %d", f, count[f], copies);
  free(count);
}

static bool has_replication(const Layout *l) {
  return layout_lane_replication(l) != 0 || layout_warp_replication(l) != 0;
}

static Layout blocked(int rank, const int32_t *shape, const int32_t *spt, const int32_t *tpw, const int32_t *wpc) {
  int32_t order[TILE_MAX_RANK];
  for (int d = 0; d < rank; d++) order[d] = rank - 1 - d;
  return layout_blocked(rank, shape, spt, tpw, wpc, order);
}

static void expect_identity(const BitMatrix *m, int n) {
  cr_assert_eq(m->nin, n);
  cr_assert_eq(m->nout, n);
  for (int k = 0; k < n; k++) cr_expect_eq(m->col[k], 1u << k, "column %d = %u", k, m->col[k]);
}

/* ---- blocked layouts, by hand ---- */

Test(layout_blocked, two_d_example_from_the_design) {
  int32_t shape[] = {8, 16}, spt[] = {1, 4}, tpw[] = {8, 4}, wpc[] = {1, 1}, order[] = {1, 0};
  Layout l = layout_blocked(2, shape, spt, tpw, wpc, order);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 16, 32, 64);
  cr_expect_eq(l.nwarp, 0);
  expect_coverage(&l);
}

Test(layout_blocked, one_d_no_repetition) {
  int32_t shape[] = {128}, spt[] = {1}, tpw[] = {32}, wpc[] = {4};
  Layout l = blocked(1, shape, spt, tpw, wpc);
  expect_no_regs(&l);
  EXPECT_BASES("lane", l.lane, l.nlane, 1, 2, 4, 8, 16);
  EXPECT_BASES("warp", l.warp, l.nwarp, 32, 64);
  expect_coverage(&l);
}

Test(layout_blocked, one_d_repetition_is_a_high_register_bit) {
  int32_t shape[] = {1024}, spt[] = {4}, tpw[] = {32}, wpc[] = {4};
  Layout l = blocked(1, shape, spt, tpw, wpc);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2, 512);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 16, 32, 64);
  EXPECT_BASES("warp", l.warp, l.nwarp, 128, 256);
}

Test(layout_blocked, two_d_repetition_per_dim_in_order) {
  int32_t shape[] = {64, 64}, spt[] = {1, 4}, tpw[] = {4, 8}, wpc[] = {4, 1};
  Layout l = blocked(2, shape, spt, tpw, wpc);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2, 32, 1024, 2048);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 16, 64, 128);
  EXPECT_BASES("warp", l.warp, l.nwarp, 256, 512);
  expect_coverage(&l);
}

Test(layout_blocked, eight_warps_vec8) {
  int32_t shape[] = {128, 64}, spt[] = {1, 8}, tpw[] = {4, 8}, wpc[] = {8, 1};
  Layout l = blocked(2, shape, spt, tpw, wpc);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2, 4, 2048, 4096);
  EXPECT_BASES("lane", l.lane, l.nlane, 8, 16, 32, 64, 128);
  EXPECT_BASES("warp", l.warp, l.nwarp, 256, 512, 1024);
  expect_coverage(&l);
}

Test(layout_blocked, column_major_order) {
  int32_t shape[] = {16, 8}, spt[] = {4, 1}, tpw[] = {4, 8}, wpc[] = {1, 1}, order[] = {0, 1};
  Layout l = layout_blocked(2, shape, spt, tpw, wpc, order);
  EXPECT_BASES("reg", l.reg, l.nreg, 8, 16);
  EXPECT_BASES("lane", l.lane, l.nlane, 32, 64, 1, 2, 4);
  expect_coverage(&l);
}

Test(layout_blocked, small_tile_replicates_lanes_and_warps) {
  int32_t shape[] = {16}, spt[] = {4}, tpw[] = {32}, wpc[] = {4};
  Layout l = blocked(1, shape, spt, tpw, wpc);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 0, 0, 0);
  EXPECT_BASES("warp", l.warp, l.nwarp, 0, 0);
  cr_expect_eq(layout_lane_replication(&l), 0x1cu);
  cr_expect_eq(layout_warp_replication(&l), 0x3u);
  expect_coverage(&l);
}

Test(layout_blocked, excess_per_thread_bits_are_clamped) {
  int32_t shape[] = {2}, spt[] = {8}, tpw[] = {32}, wpc[] = {2};
  Layout l = blocked(1, shape, spt, tpw, wpc);
  EXPECT_BASES("reg", l.reg, l.nreg, 1);
  EXPECT_BASES("lane", l.lane, l.nlane, 0, 0, 0, 0, 0);
  EXPECT_BASES("warp", l.warp, l.nwarp, 0);
  expect_coverage(&l);
}

/* ---- default layouts ---- */

Test(layout_default, one_d_1024_four_warps_vec4) {
  int32_t shape[] = {1024};
  Layout l = layout_default(1, shape, 4, 4);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2, 512);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 16, 32, 64);
  EXPECT_BASES("warp", l.warp, l.nwarp, 128, 256);
  cr_expect_not(has_replication(&l));
  expect_coverage(&l);
  for (uint32_t w = 0; w < 4; w++)
    for (uint32_t ln = 0; ln < 32; ln++)
      for (uint32_t v = 0; v < 2; v++) {
        uint32_t base = layout_apply(&l, 4 * v, ln, w);
        cr_expect_eq(base % 4, 0u);
        for (uint32_t j = 1; j < 4; j++) cr_expect_eq(layout_apply(&l, 4 * v + j, ln, w), base + j);
      }
}

Test(layout_default, small_tile_sixteen_elements) {
  int32_t shape[] = {16};
  Layout l = layout_default(1, shape, 4, 4);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 0, 0, 0);
  EXPECT_BASES("warp", l.warp, l.nwarp, 0, 0);
  expect_coverage(&l);
}

Test(layout_default, two_d_vec8_four_warps) {
  int32_t shape[] = {64, 128};
  Layout l = layout_default(2, shape, 4, 8);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2, 4, 1024, 2048, 4096);
  EXPECT_BASES("lane", l.lane, l.nlane, 8, 16, 32, 64, 128);
  EXPECT_BASES("warp", l.warp, l.nwarp, 256, 512);
  expect_coverage(&l);
}

Test(layout_default, narrow_rows_put_lanes_on_dim0_and_replicate_warps) {
  int32_t shape[] = {32, 4};
  Layout l = layout_default(2, shape, 8, 8);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 16, 32, 64);
  EXPECT_BASES("warp", l.warp, l.nwarp, 0, 0, 0);
  expect_coverage(&l);
}

Test(layout_default, rank3) {
  int32_t shape[] = {2, 16, 32};
  Layout l = layout_default(3, shape, 4, 4);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2, 256);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 16, 32, 64);
  EXPECT_BASES("warp", l.warp, l.nwarp, 128, 512);
  expect_coverage(&l);
}

Test(layout_default, rank4) {
  int32_t shape[] = {2, 2, 8, 32};
  Layout l = layout_default(4, shape, 8, 4);
  EXPECT_BASES("reg", l.reg, l.nreg, 1, 2);
  EXPECT_BASES("lane", l.lane, l.nlane, 4, 8, 16, 32, 64);
  EXPECT_BASES("warp", l.warp, l.nwarp, 128, 256, 512);
  cr_expect_not(has_replication(&l));
  expect_coverage(&l);
}

Test(layout_default, rank0_is_scalar) {
  Layout l = layout_default(0, NULL, 4, 4);
  Layout s = layout_scalar(4);
  cr_expect(layout_equal(&l, &s));
}

Test(layout_scalar, every_thread_holds_the_element) {
  Layout l = layout_scalar(8);
  cr_expect_eq(l.rank, 0);
  expect_no_regs(&l);
  EXPECT_BASES("lane", l.lane, l.nlane, 0, 0, 0, 0, 0);
  EXPECT_BASES("warp", l.warp, l.nwarp, 0, 0, 0);
  cr_expect_eq(layout_flat_bits(&l), 0);
  cr_expect_eq(layout_apply(&l, 0, 31, 7), 0u);
  expect_coverage(&l);
}

/* Enumerates many shapes, warp counts and vector widths: layouts without
 * replication are bijections, the others cover every element equally. */
Test(layout_default, bijective_or_evenly_replicated_everywhere) {
  static const int32_t shapes[][TILE_MAX_RANK + 1] = {
      {1, 128},       {1, 256},        {1, 1024},     {1, 4096},    {1, 8},       {2, 16, 16},
      {2, 64, 64},    {2, 128, 32},    {2, 1, 256},   {2, 256, 1},  {2, 8, 512},  {3, 4, 32, 32},
      {3, 2, 2, 64},  {3, 16, 1, 64},  {4, 2, 4, 8, 16}, {4, 1, 2, 64, 8}, {2, 32, 128}, {2, 2, 2}};
  static const int warps[] = {1, 2, 4, 8};
  static const int vecs[] = {1, 2, 4, 8};
  int bijections = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t w = 0; w < 4; w++)
      for (size_t v = 0; v < 4; v++) {
        Layout l = layout_default(shapes[s][0], shapes[s] + 1, warps[w], vecs[v]);
        expect_coverage(&l);
        if (has_replication(&l)) continue;
        bijections++;
        cr_expect_eq(l.nreg + l.nlane + l.nwarp, layout_flat_bits(&l));
      }
  cr_expect_gt(bijections, 50);
}

/* ---- derived layouts ---- */

Test(layout_slice, drops_registers_and_keeps_zero_lanes) {
  int32_t shape[] = {8, 16}, spt[] = {1, 4}, tpw[] = {8, 4}, wpc[] = {1, 1};
  Layout l = blocked(2, shape, spt, tpw, wpc);
  Layout rows = layout_slice(&l, 0);
  cr_expect_eq(rows.rank, 1);
  cr_expect_eq(rows.shape[0], 16);
  EXPECT_BASES("reg", rows.reg, rows.nreg, 1, 2);
  EXPECT_BASES("lane", rows.lane, rows.nlane, 4, 8, 0, 0, 0);
  Layout cols = layout_slice(&l, 1);
  cr_expect_eq(cols.shape[0], 8);
  expect_no_regs(&cols);
  EXPECT_BASES("lane", cols.lane, cols.nlane, 0, 0, 1, 2, 4);
  expect_coverage(&rows);
  expect_coverage(&cols);
}

Test(layout_slice, reduction_of_default_2d) {
  int32_t shape[] = {64, 128};
  Layout l = layout_default(2, shape, 4, 8);
  Layout s = layout_slice(&l, 1);
  EXPECT_BASES("reg", s.reg, s.nreg, 8, 16, 32);
  EXPECT_BASES("lane", s.lane, s.nlane, 0, 0, 0, 0, 1);
  EXPECT_BASES("warp", s.warp, s.nwarp, 2, 4);
  expect_coverage(&s);
}

Test(layout_slice, dependent_register_bases_are_dropped) {
  Layout l = layout_scalar(1);
  l.rank = 2;
  l.shape[0] = 2;
  l.shape[1] = 2;
  l.nreg = 2;
  l.reg[0] = 1;
  l.reg[1] = 3; /* dim 1 bit XOR dim 0 bit: after slicing dim 0, equal to reg 0 */
  Layout s = layout_slice(&l, 0);
  EXPECT_BASES("reg", s.reg, s.nreg, 1);
}

Test(layout_project, equals_expand_of_slice_for_blocked_layouts) {
  static const int32_t shapes[][TILE_MAX_RANK + 1] = {
      {2, 64, 64}, {2, 16, 256}, {2, 8, 16}, {3, 4, 32, 32}, {3, 2, 8, 64}, {4, 2, 4, 8, 16}};
  static const int warps[] = {1, 4, 8};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t w = 0; w < 3; w++) {
      int rank = shapes[s][0];
      Layout l = layout_default(rank, shapes[s] + 1, warps[w], 4);
      for (int axis = 0; axis < rank; axis++) {
        int32_t from[TILE_MAX_RANK];
        memcpy(from, shapes[s] + 1, sizeof from);
        from[axis] = 1;
        Layout p = layout_project(&l, rank, from);
        Layout sl = layout_slice(&l, axis);
        Layout e = layout_expand_dims(&sl, axis);
        char a[STR_SIZE], b[STR_SIZE];
        layout_str(&p, a, sizeof a);
        layout_str(&e, b, sizeof b);
        cr_expect(layout_equal(&p, &e), "axis %d: %s vs %s", axis, a, b);
      }
    }
}

Test(layout_project, broadcast_operand_needs_no_movement) {
  int32_t shape[] = {32, 64}, from[] = {32, 1};
  Layout l = layout_default(2, shape, 4, 4);
  Layout p = layout_project(&l, 2, from);
  /* For every hardware position whose register survives, the projected
   * element is the broadcast source of the full element. */
  for (uint32_t w = 0; w < 4; w++)
    for (uint32_t ln = 0; ln < 32; ln++) {
      int32_t c[2], cp[2];
      layout_coords(&l, layout_apply(&l, 0, ln, w), c);
      layout_coords(&p, layout_apply(&p, 0, ln, w), cp);
      cr_expect_eq(cp[0], c[0]);
      cr_expect_eq(cp[1], 0);
    }
  expect_coverage(&p);
}

Test(layout_expand_dims, keeps_the_flat_map) {
  int32_t shape[] = {16, 32};
  Layout l = layout_default(2, shape, 4, 4);
  for (int axis = 0; axis <= 2; axis++) {
    Layout e = layout_expand_dims(&l, axis);
    cr_expect_eq(e.rank, 3);
    cr_expect_eq(e.shape[axis], 1);
    cr_expect_eq(layout_flat_bits(&e), layout_flat_bits(&l));
    cr_expect(memcmp(e.reg, l.reg, sizeof l.reg) == 0);
    Layout back = layout_slice(&e, axis);
    cr_expect(layout_equal(&back, &l));
  }
}

Test(layout_reshape, round_trip) {
  int32_t shape[] = {64, 64}, flat[] = {4096}, three[] = {16, 4, 64};
  Layout l = layout_default(2, shape, 8, 4);
  Layout f = layout_reshape(&l, 1, flat);
  Layout t = layout_reshape(&f, 3, three);
  Layout back = layout_reshape(&t, 2, shape);
  cr_expect(layout_equal(&back, &l));
  cr_expect_eq(layout_apply(&t, 5, 17, 3), layout_apply(&l, 5, 17, 3));
  expect_coverage(&t);
}

Test(layout_trans, swaps_coordinates) {
  int32_t shape[] = {8, 16}, spt[] = {1, 4}, tpw[] = {8, 4}, wpc[] = {1, 1}, perm[] = {1, 0};
  Layout l = blocked(2, shape, spt, tpw, wpc);
  Layout t = layout_trans(&l, perm);
  cr_expect_eq(t.shape[0], 16);
  cr_expect_eq(t.shape[1], 8);
  EXPECT_BASES("reg", t.reg, t.nreg, 8, 16);
  EXPECT_BASES("lane", t.lane, t.nlane, 32, 64, 1, 2, 4);
  for (uint32_t ln = 0; ln < 32; ln++)
    for (uint32_t r = 0; r < 4; r++) {
      int32_t c[2], ct[2];
      layout_coords(&l, layout_apply(&l, r, ln, 0), c);
      layout_coords(&t, layout_apply(&t, r, ln, 0), ct);
      cr_expect(ct[0] == c[1] && ct[1] == c[0]);
    }
}

Test(layout_trans, round_trip_rank3) {
  int32_t shape[] = {4, 32, 16};
  static const int32_t perms[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  Layout l = layout_default(3, shape, 4, 4);
  for (int p = 0; p < 6; p++) {
    int32_t inv[3];
    for (int i = 0; i < 3; i++) inv[perms[p][i]] = i;
    Layout t = layout_trans(&l, perms[p]);
    expect_coverage(&t);
    Layout back = layout_trans(&t, inv);
    cr_expect(layout_equal(&back, &l), "permutation %d", p);
  }
}

/* ---- queries ---- */

Test(layout_query, coords_and_dim_masks) {
  int32_t shape[] = {4, 8, 2}, c[3];
  Layout l = layout_default(3, shape, 1, 1);
  cr_expect_eq(layout_dim_mask(&l, 0), 0x30u);
  cr_expect_eq(layout_dim_mask(&l, 1), 0x0eu);
  cr_expect_eq(layout_dim_mask(&l, 2), 0x01u);
  cr_expect_eq(layout_flat_bits(&l), 6);
  layout_coords(&l, 43, c); /* 10 101 1 */
  cr_expect(c[0] == 2 && c[1] == 5 && c[2] == 1);
}

Test(layout_query, str_format) {
  int32_t shape[] = {8, 16}, spt[] = {1, 4}, tpw[] = {8, 4}, wpc[] = {2, 1};
  Layout l = blocked(2, shape, spt, tpw, wpc);
  char buf[STR_SIZE];
  layout_str(&l, buf, sizeof buf);
  cr_expect_str_eq(buf, "f[8, 16] reg=[1, 2] lane=[4, 8, 16, 32, 64] warp=[0]");
  char small[10];
  layout_str(&l, small, sizeof small);
  cr_expect_str_eq(small, "f[8, 16] ");
  Layout s = layout_scalar(1);
  layout_str(&s, buf, sizeof buf);
  cr_expect_str_eq(buf, "f[] reg=[] lane=[0, 0, 0, 0, 0] warp=[]");
}

Test(layout_query, equal_compares_everything) {
  int32_t shape[] = {64, 64};
  Layout a = layout_default(2, shape, 4, 4), b = a;
  cr_expect(layout_equal(&a, &b));
  b.reg[0] ^= 1;
  cr_expect_not(layout_equal(&a, &b));
  Layout c = layout_default(2, shape, 8, 4);
  cr_expect_not(layout_equal(&a, &c));
}

/* ---- algebra ---- */

Test(bitmatrix, rank_and_compose_by_hand) {
  BitMatrix m = {.nin = 3, .nout = 2, .col = {1, 2, 3}};
  cr_expect_eq(bitmatrix_rank(&m), 2);
  BitMatrix a = {.nin = 2, .nout = 2, .col = {2, 1}}; /* swap */
  BitMatrix b = {.nin = 2, .nout = 2, .col = {1, 3}}; /* x0 -> y0, x1 -> y0^y1 */
  BitMatrix ab = bitmatrix_compose(&a, &b);
  cr_expect_eq(ab.nin, 2);
  cr_expect_eq(ab.col[0], 2u);
  cr_expect_eq(ab.col[1], 3u);
}

Test(bitmatrix, right_inverse_of_bijective_layouts) {
  int32_t shapes[][2] = {{64, 64}, {16, 256}, {128, 8}};
  for (int s = 0; s < 3; s++) {
    Layout l = layout_default(2, shapes[s], 4, 4);
    cr_assert_not(has_replication(&l));
    BitMatrix m = layout_matrix(&l), r;
    cr_expect_eq(bitmatrix_rank(&m), layout_flat_bits(&l));
    cr_assert(bitmatrix_right_inverse(&m, &r));
    BitMatrix mr = bitmatrix_compose(&m, &r), rm = bitmatrix_compose(&r, &m);
    expect_identity(&mr, layout_flat_bits(&l));
    expect_identity(&rm, m.nin);
  }
}

Test(bitmatrix, right_inverse_avoids_replicated_bits) {
  int32_t shape[] = {16};
  Layout l = layout_default(1, shape, 4, 4);
  BitMatrix m = layout_matrix(&l), r;
  cr_assert(bitmatrix_right_inverse(&m, &r));
  BitMatrix mr = bitmatrix_compose(&m, &r);
  expect_identity(&mr, 4);
  /* inputs: reg 0-1, lane 2-6, warp 7-8; only reg 0-1 and lane 2-3 move elements */
  for (int k = 0; k < r.nin; k++) cr_expect_eq(r.col[k] & ~0xfu, 0u, "column %d = %u", k, r.col[k]);
}

Test(bitmatrix, right_inverse_prefers_low_inputs) {
  BitMatrix m = {.nin = 3, .nout = 1, .col = {0, 1, 1}}, r;
  cr_assert(bitmatrix_right_inverse(&m, &r));
  cr_expect_eq(r.col[0], 2u);
}

Test(bitmatrix, right_inverse_fails_when_not_surjective) {
  BitMatrix m = {.nin = 2, .nout = 3, .col = {1, 2}}, r;
  cr_expect_not(bitmatrix_right_inverse(&m, &r));
}

/* ---- conversion plans ---- */

Test(layout_convert, equal_is_none) {
  int32_t shape[] = {64, 64};
  Layout a = layout_default(2, shape, 4, 4), b = a;
  ConvertPlan plan;
  layout_convert_plan(&a, &b, &plan);
  cr_expect_eq(plan.kind, CONVERT_NONE);
}

Test(layout_convert, register_permutation) {
  int32_t shape[] = {1024};
  Layout src = layout_default(1, shape, 4, 4), dst = src;
  dst.reg[0] = src.reg[1]; /* swap the two vector bits */
  dst.reg[1] = src.reg[0];
  ConvertPlan plan;
  layout_convert_plan(&src, &dst, &plan);
  cr_assert_eq(plan.kind, CONVERT_REGISTERS);
  cr_assert_eq(plan.ndst_regs, 8);
  static const uint32_t want[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < 8; r++) cr_expect_eq(plan.src_reg[r], want[r], "dst register %d", r);
  for (int r = 0; r < 8; r++)
    cr_expect_eq(layout_apply(&dst, (uint32_t)r, 9, 2), layout_apply(&src, plan.src_reg[r], 9, 2));
}

Test(layout_convert, register_combination) {
  int32_t shape[] = {1024};
  Layout src = layout_default(1, shape, 4, 4), dst = src;
  dst.reg[0] = src.reg[0] ^ src.reg[1];
  ConvertPlan plan;
  layout_convert_plan(&src, &dst, &plan);
  cr_assert_eq(plan.kind, CONVERT_REGISTERS);
  cr_expect_eq(plan.src_reg[1], 3u);
  cr_expect_eq(plan.src_reg[5], 7u);
}

Test(layout_convert, lane_change_is_shuffle) {
  int32_t shape[] = {64, 64}, spt_a[] = {1, 4}, spt_b[] = {1, 8}, tpw[] = {4, 8}, wpc[] = {4, 1};
  Layout a = blocked(2, shape, spt_a, tpw, wpc), b = blocked(2, shape, spt_b, tpw, wpc);
  cr_assert(memcmp(a.warp, b.warp, sizeof a.warp) == 0);
  ConvertPlan plan;
  layout_convert_plan(&a, &b, &plan);
  cr_expect_eq(plan.kind, CONVERT_SHUFFLE);
  cr_expect_eq(plan.ndst_regs, 0);
  layout_convert_plan(&b, &a, &plan);
  cr_expect_eq(plan.kind, CONVERT_SHUFFLE);
}

Test(layout_convert, warp_change_is_shared) {
  int32_t shape[] = {64, 64}, spt[] = {1, 4}, tpw[] = {4, 8}, wpc_a[] = {4, 1}, wpc_b[] = {1, 4};
  Layout a = blocked(2, shape, spt, tpw, wpc_a), b = blocked(2, shape, spt, tpw, wpc_b);
  ConvertPlan plan;
  layout_convert_plan(&a, &b, &plan);
  cr_expect_eq(plan.kind, CONVERT_SHARED);
}

Test(layout_convert, same_warp_bases_but_data_from_another_warp_is_shared) {
  Layout src = layout_scalar(4);
  src.rank = 1;
  src.shape[0] = 256;
  src.nreg = 2;
  src.reg[0] = 1;
  src.reg[1] = 2;
  for (int i = 0; i < 5; i++) src.lane[i] = 4u << i;
  src.warp[0] = 128;
  src.warp[1] = 0;
  Layout dst = src;
  dst.nreg = 3;
  dst.reg[2] = 64;
  dst.lane[4] = 128;
  expect_coverage(&src);
  ConvertPlan plan;
  layout_convert_plan(&src, &dst, &plan);
  cr_expect_eq(plan.kind, CONVERT_SHARED);
}

Test(layout_convert, different_sizes_are_shared) {
  int32_t a_shape[] = {64}, b_shape[] = {128};
  Layout a = layout_default(1, a_shape, 1, 1), b = layout_default(1, b_shape, 1, 1);
  ConvertPlan plan;
  layout_convert_plan(&a, &b, &plan);
  cr_expect_eq(plan.kind, CONVERT_SHARED);
}
