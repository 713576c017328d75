/* test_tensorcore.c - the tensor-core register layouts (layout/mma.h) and
 * the shared-memory tile layouts (layout/smem.h) against their closed
 * forms from the PTX ISA, element by element.
 *
 * Register layouts: for every warp, lane and register the layout must
 * name the element the fragment formula gives, and every element must be
 * held exactly as often as the replicated warps say. Shared layouts:
 * the linear (bit-by-bit) offset must equal the closed form for every
 * element, be a bijection onto the tile's bytes, and match the swizzle
 * formulas of HOPPER-FACTS.md section 5.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "layout/mma.h"
#include "layout/smem.h"

/* ---- helpers ---- */

static int popcount(uint32_t v) { return __builtin_popcount(v); }

/* Every element held 2^(replicated bits) times, none outside the tile. */
static void expect_coverage(const Layout *l) {
  uint32_t numel = 1u << layout_flat_bits(l);
  int *count = calloc(numel, sizeof *count);
  cr_assert(count);
  for (uint32_t w = 0; w < 1u << l->nwarp; w++)
    for (uint32_t ln = 0; ln < 32; ln++)
      for (uint32_t r = 0; r < (uint32_t)layout_regs(l); r++) {
        uint32_t f = layout_apply(l, r, ln, w);
        cr_assert_lt(f, numel);
        count[f]++;
      }
  int copies = 1 << (popcount(layout_lane_replication(l)) + popcount(layout_warp_replication(l)));
  for (uint32_t f = 0; f < numel; f++) cr_assert_eq(count[f], copies, "element %u held %d times", f, count[f]);
  free(count);
}

/* ---- wgmma ---- */

/* The PTX ISA's accumulator formula, extended over warpgroups and
 * repeated instructions as mma.h numbers them. */
static uint32_t wgmma_acc_formula(const WgmmaShape *s, uint32_t warp, uint32_t lane, uint32_t reg) {
  uint32_t wg = warp / 4, per = (uint32_t)s->inst_n / 2;
  uint32_t g_m = wg % (uint32_t)s->gm, g_n = (wg / (uint32_t)s->gm) % (uint32_t)s->gn;
  uint32_t r = reg % per, ni = (reg / per) % (uint32_t)s->n_rep, mi = reg / (per * (uint32_t)s->n_rep);
  uint32_t row = 64 * (g_m + (uint32_t)s->gm * mi) + 16 * (warp % 4) + lane / 4 + 8 * ((r >> 1) & 1);
  uint32_t col = g_n * (uint32_t)(s->N / s->gn) + ni * (uint32_t)s->inst_n + 8 * (r >> 2) + 2 * (lane % 4) + (r & 1);
  return row * (uint32_t)s->N + col;
}

static void check_wgmma(int M, int N, int warps) {
  WgmmaShape s;
  cr_assert(wgmma_shape(M, N, 64, warps, &s), "wgmma applies to [%d, %d] with %d warps", M, N, warps);
  Layout l = layout_wgmma_acc(&s);
  cr_assert_eq(layout_regs(&l), wgmma_acc_regs(&s));
  for (uint32_t w = 0; w < (uint32_t)warps; w++)
    for (uint32_t ln = 0; ln < 32; ln++)
      for (uint32_t r = 0; r < (uint32_t)layout_regs(&l); r++)
        cr_assert_eq(layout_apply(&l, r, ln, w), wgmma_acc_formula(&s, w, ln, r),
                     "[%d, %d] %d warps: warp %u lane %u reg %u", M, N, warps, w, ln, r);
  expect_coverage(&l);
}

Test(wgmma, accumulator_matches_the_ptx_formula) {
  check_wgmma(64, 128, 4);
  check_wgmma(64, 256, 4);
  check_wgmma(128, 128, 4);
  check_wgmma(128, 128, 8);
  check_wgmma(128, 256, 8);
  check_wgmma(256, 128, 8);
  check_wgmma(64, 64, 8);   /* N too narrow to split: the second warpgroup replicates */
  check_wgmma(64, 256, 8);  /* two warpgroups split N */
  check_wgmma(64, 16, 16);  /* more warpgroups than the tile needs: replicas */
  check_wgmma(128, 512, 4); /* two instructions along N */
}

Test(wgmma, cuts) {
  WgmmaShape s;
  cr_assert(wgmma_shape(128, 256, 64, 8, &s));
  cr_expect_eq(s.gm, 2);
  cr_expect_eq(s.gn, 1);
  cr_expect_eq(s.inst_n, 256);
  cr_expect_eq(s.m_rep, 1);
  cr_expect_eq(wgmma_acc_regs(&s), 128);
  cr_assert(wgmma_shape(64, 64, 64, 8, &s));
  cr_expect_eq(s.gm, 1);
  cr_expect_eq(s.gn, 1, "warpgroups split N only down to 64 columns each");
  cr_expect_eq(s.inst_n, 64);
  cr_assert(wgmma_shape(64, 256, 64, 8, &s));
  cr_expect_eq(s.gn, 2);
  cr_expect_eq(s.inst_n, 128);
  cr_expect_not(wgmma_shape(32, 64, 64, 4, &s), "M below 64");
  cr_expect_not(wgmma_shape(128, 64, 64, 2, &s), "fewer than 4 warps");
  cr_expect_not(wgmma_shape(128, 64, 64, 12, &s), "12 warps is not a power of two yet");
}

Test(wgmma, register_a_operand_is_the_accumulator_layout) {
  /* S = Q K^T [128, 64] becomes P, the A operand of P V with K = 64. */
  WgmmaShape qk, pv;
  cr_assert(wgmma_shape(128, 64, 64, 8, &qk));
  cr_assert(wgmma_shape(128, 128, 64, 8, &pv));
  Layout s = layout_wgmma_acc(&qk), a = layout_wgmma_a(&pv);
  cr_expect(layout_equal(&s, &a), "P needs no data movement");
  ConvertPlan *plan = malloc(sizeof *plan);
  layout_convert_plan(&s, &a, plan);
  cr_expect_eq(plan->kind, CONVERT_NONE);
  free(plan);
  /* The fragment of k step kk: registers 8kk..8kk+7 hold
   * (row 16w + l/4 + 8(j&1), k 16kk + 8(j>>1) + 2(l%4) + e) for pair j. */
  for (uint32_t w = 0; w < 8; w++)
    for (uint32_t ln = 0; ln < 32; ln++)
      for (uint32_t kk = 0; kk < 4; kk++)
        for (uint32_t j = 0; j < 4; j++)
          for (uint32_t e = 0; e < 2; e++) {
            uint32_t row = 64 * (w / 4) + 16 * (w % 4) + ln / 4 + 8 * (j & 1);
            uint32_t k = 16 * kk + 8 * (j >> 1) + 2 * (ln % 4) + e;
            cr_assert_eq(layout_apply(&a, 8 * kk + 2 * j + e, ln, w), row * 64 + k);
          }
  expect_coverage(&a);
  /* Warpgroups along N hold A replicated. */
  WgmmaShape split;
  cr_assert(wgmma_shape(64, 128, 64, 8, &split));
  cr_assert_eq(split.gn, 2);
  Layout ar = layout_wgmma_a(&split);
  cr_expect_eq(layout_warp_replication(&ar), 4u);
  expect_coverage(&ar);
}

Test(wgmma, register_a_operand_8bit_and_the_k_ordered_accumulator) {
  /* The 8-bit fragment of k step kk (PTX ISA, k32): register j holds
   * four consecutive k, (row 16w + l/4 + 8(j&1), k 32kk + 16(j>>1) +
   * 4(l%4) + i), i the byte. */
  WgmmaShape pv;
  cr_assert(wgmma_shape(128, 128, 128, 8, &pv));
  Layout a = layout_wgmma_a_8bit(&pv);
  for (uint32_t w = 0; w < 8; w++)
    for (uint32_t ln = 0; ln < 32; ln++)
      for (uint32_t kk = 0; kk < 4; kk++)
        for (uint32_t j = 0; j < 4; j++)
          for (uint32_t i = 0; i < 4; i++) {
            uint32_t row = 64 * (w / 4) + 16 * (w % 4) + ln / 4 + 8 * (j & 1);
            uint32_t k = 32 * kk + 16 * (j >> 1) + 4 * (ln % 4) + i;
            cr_assert_eq(layout_apply(&a, 16 * kk + 4 * j + i, ln, w), row * 128 + k, "warp %u lane %u kk %u j %u i %u",
                         w, ln, kk, j, i);
          }
  expect_coverage(&a);
  /* S [128, 128] with its columns in k order (flash_attention_ws_fp8's
   * k_order: reshape, trans, reshape) reaches the fragment by a
   * permutation of each thread's registers; S itself needs lanes to
   * exchange data. */
  WgmmaShape qk;
  cr_assert(wgmma_shape(128, 128, 128, 8, &qk));
  Layout acc = layout_wgmma_acc(&qk);
  const int32_t split[4] = {128 * 128 / 16, 2, 4, 2}, perm[4] = {0, 2, 1, 3}, square[2] = {128, 128};
  Layout r1 = layout_reshape(&acc, 4, split);
  Layout t = layout_trans(&r1, perm);
  Layout ordered = layout_reshape(&t, 2, square);
  ConvertPlan *plan = malloc(sizeof *plan);
  cr_assert(plan);
  layout_convert_plan(&ordered, &a, plan);
  cr_expect_eq(plan->kind, CONVERT_REGISTERS, "k-ordered P: plan %d", plan->kind);
  layout_convert_plan(&acc, &a, plan);
  cr_expect_neq(plan->kind, CONVERT_REGISTERS, "P in its own order would need more than a register permutation");
  cr_expect_neq(plan->kind, CONVERT_NONE);
  free(plan);
}

/* ---- mma.sync ---- */

static void check_mma(int M, int N, int K, int warps) {
  MmaShape s;
  cr_assert(mma_shape(M, N, K, warps, &s));
  Layout c = layout_mma_acc(&s), a = layout_mma_a(&s), b = layout_mma_b(&s);
  for (uint32_t w = 0; w < (uint32_t)warps; w++) {
    uint32_t wm = w % (uint32_t)s.wm, wn = (w / (uint32_t)s.wm) % (uint32_t)s.wn;
    for (uint32_t ln = 0; ln < 32; ln++) {
      uint32_t g = ln / 4, q = ln % 4;
      for (uint32_t r = 0; r < (uint32_t)layout_regs(&c); r++) {
        uint32_t e = r & 1, h = (r >> 1) & 1, ni = (r >> 2) % (uint32_t)s.n_rep, mi = (r >> 2) / (uint32_t)s.n_rep;
        uint32_t row = 16 * (wm + (uint32_t)s.wm * mi) + g + 8 * h;
        uint32_t col = 8 * (wn + (uint32_t)s.wn * ni) + 2 * q + e;
        cr_assert_eq(layout_apply(&c, r, ln, w), row * (uint32_t)N + col, "C: warp %u lane %u reg %u", w, ln, r);
      }
      for (uint32_t r = 0; r < (uint32_t)layout_regs(&a); r++) {
        uint32_t e = r & 1, h = (r >> 1) & 1, k8 = (r >> 2) & 1;
        uint32_t kk = (r >> 3) % (uint32_t)s.k_rep, mi = (r >> 3) / (uint32_t)s.k_rep;
        uint32_t row = 16 * (wm + (uint32_t)s.wm * mi) + g + 8 * h, k = 16 * kk + 8 * k8 + 2 * q + e;
        cr_assert_eq(layout_apply(&a, r, ln, w), row * (uint32_t)K + k, "A: warp %u lane %u reg %u", w, ln, r);
      }
      for (uint32_t r = 0; r < (uint32_t)layout_regs(&b); r++) {
        uint32_t e = r & 1, k8 = (r >> 1) & 1;
        uint32_t kk = (r >> 2) % (uint32_t)s.k_rep, ni = (r >> 2) / (uint32_t)s.k_rep;
        uint32_t k = 16 * kk + 8 * k8 + 2 * q + e, n = 8 * (wn + (uint32_t)s.wn * ni) + g;
        cr_assert_eq(layout_apply(&b, r, ln, w), k * (uint32_t)N + n, "B: warp %u lane %u reg %u", w, ln, r);
      }
    }
  }
  expect_coverage(&c);
  expect_coverage(&a);
  expect_coverage(&b);
}

Test(mma, fragments_match_the_ptx_formulas) {
  check_mma(16, 8, 16, 1);
  check_mma(32, 32, 32, 1);
  check_mma(32, 64, 16, 2);
  check_mma(16, 64, 64, 4);
  check_mma(32, 16, 32, 8); /* more warps than tiles: replicas */
}

/* ---- shared memory ---- */

static void check_smem(int rank, const int32_t *shape, int eb, int swizzle) {
  SmemLayout s;
  cr_assert(smem_layout(rank, shape, eb, swizzle, &s), "layout exists");
  uint32_t numel = 1u << s.nbits;
  unsigned char *seen = calloc(s.bytes, 1);
  int32_t coords[TILE_MAX_RANK];
  for (uint32_t f = 0; f < numel; f++) {
    uint32_t rest = f;
    for (int d = rank - 1; d >= 0; d--) {
      coords[d] = (int32_t)(rest % (uint32_t)shape[d]);
      rest /= (uint32_t)shape[d];
    }
    uint32_t off = smem_offset(&s, f);
    cr_assert_eq(off, smem_offset_closed_form(&s, coords), "flat %u", f);
    cr_assert_lt(off, s.bytes);
    cr_assert_eq(off % (uint32_t)eb, 0u);
    cr_assert(!seen[off], "offset %u used twice", off);
    seen[off] = 1;
  }
  free(seen);
}

Test(smem, linear_offsets_equal_the_closed_form) {
  for (int sw = 0; sw <= 128; sw = sw ? sw * 2 : 32) {
    check_smem(2, (int32_t[]){128, 64}, 2, sw);
    check_smem(2, (int32_t[]){64, 256}, 2, sw);
    check_smem(3, (int32_t[]){4, 64, 128}, 1, sw);
    check_smem(2, (int32_t[]){16, 32}, 4, sw);
  }
}

Test(smem, sw128_bf16_matches_the_swizzle_formula) {
  /* [R, 64] bf16, 128B: offset(r, c) = 64r + (c XOR 8 (r mod 8)) elements. */
  SmemLayout s;
  cr_assert(smem_layout(2, (int32_t[]){128, 64}, 2, 128, &s));
  for (uint32_t r = 0; r < 128; r++)
    for (uint32_t c = 0; c < 64; c++)
      cr_assert_eq(smem_offset(&s, r * 64 + c), 2 * (64 * r + (c ^ (8 * (r % 8)))), "(%u, %u)", r, c);
}

Test(smem, wide_tiles_are_blocks_of_tma_boxes) {
  /* [64, 128] bf16 with 128B: two boxes [64, 64]; box j at 8 KiB * j. */
  SmemLayout s, box;
  cr_assert(smem_layout(2, (int32_t[]){64, 128}, 2, 128, &s));
  cr_assert(smem_layout(2, (int32_t[]){64, 64}, 2, 128, &box));
  cr_expect_eq(smem_atom_elems(&s), 64);
  cr_expect_eq(smem_atom_block_bytes(&s), 8192u);
  for (uint32_t r = 0; r < 64; r++)
    for (uint32_t c = 0; c < 128; c++)
      cr_assert_eq(smem_offset(&s, r * 128 + c), (c / 64) * 8192 + smem_offset(&box, r * 64 + c % 64));
  /* 64B and 32B: bits [4:5] ^= [7:8], bit 4 ^= bit 7. */
  SmemLayout s64, s32;
  cr_assert(smem_layout(2, (int32_t[]){64, 32}, 2, 64, &s64));
  cr_assert(smem_layout(2, (int32_t[]){64, 16}, 2, 32, &s32));
  for (uint32_t r = 0; r < 64; r++) {
    for (uint32_t c = 0; c < 32; c++) {
      uint32_t x = r * 64 + 2 * c;
      cr_assert_eq(smem_offset(&s64, r * 32 + c), x ^ (((x >> 7) & 3) << 4));
    }
    for (uint32_t c = 0; c < 16; c++) {
      uint32_t x = r * 32 + 2 * c;
      cr_assert_eq(smem_offset(&s32, r * 16 + c), x ^ (((x >> 7) & 1) << 4));
    }
  }
}

Test(smem, swizzle_choice) {
  cr_expect_eq(smem_pick_swizzle(2, 64), 128);
  cr_expect_eq(smem_pick_swizzle(2, 128), 128);
  cr_expect_eq(smem_pick_swizzle(2, 32), 64);
  cr_expect_eq(smem_pick_swizzle(2, 16), 32);
  cr_expect_eq(smem_pick_swizzle(1, 32), 32);
  cr_expect_eq(smem_pick_swizzle(4, 4), 0);
  SmemLayout s;
  cr_expect_not(smem_layout(2, (int32_t[]){64, 16}, 2, 128, &s), "a 32-byte row cannot take a 128-byte swizzle");
  cr_expect_not(smem_layout(2, (int32_t[]){64, 24}, 2, 0, &s), "not a power of two");
}
