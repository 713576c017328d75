/* test_exchange.c - unit tests of layout/exchange.h: vector widths,
 * ldmatrix forms (checked against an emulation of the instruction as the
 * PTX ISA defines it), bank-conflict counts, and the scratch layouts of
 * conversions (bijective, vectorized, conflict-free where that is
 * possible).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "layout/exchange.h"
#include "layout/mma.h"

/* Every flat index gets its own offset, a multiple of the element size
 * below the tile's bytes. */
static void expect_bijective(const SmemLayout *sl) {
  uint32_t n = 1u << sl->nbits;
  bool *seen = calloc(n, 1);
  for (uint32_t f = 0; f < n; f++) {
    uint32_t o = smem_offset(sl, f);
    cr_assert(o % (uint32_t)sl->elem_bytes == 0 && o < sl->bytes, "flat %u -> offset %u", f, o);
    cr_assert(!seen[o / (uint32_t)sl->elem_bytes], "offset %u taken twice", o);
    seen[o / (uint32_t)sl->elem_bytes] = true;
  }
  free(seen);
}

/* Emulates ldmatrix over a shared tile whose element at byte offset o
 * holds the flat index stored there, and checks that register r of every
 * thread receives the element layout l puts there. */
static void expect_ldmatrix_delivers(const Layout *l, const SmemLayout *sl, const SmemLdsm *f) {
  uint32_t n = 1u << sl->nbits;
  uint32_t *mem = malloc(sl->bytes / 2 * sizeof *mem);
  for (uint32_t x = 0; x < n; x++) mem[smem_offset(sl, x) / 2] = x;
  int groups = layout_regs(l) / f->regs;
  for (uint32_t w = 0; w < (1u << l->nwarp); w++)
    for (int g = 0; g < groups; g++) {
      uint32_t row_addr[32];
      for (uint32_t lane = 0; lane < 32; lane++) row_addr[lane] = smem_offset(sl, layout_apply(&f->addr, (uint32_t)g, lane, w));
      for (uint32_t lane = 0; lane < 32; lane++)
        for (int j = 0; j < f->matrices; j++)
          for (int h = 0; h < 2; h++) {
            /* PTX: matrix j's rows come from lanes 8j..8j+7; plain: lane l
             * gets row l/4, columns 2(l%4)+h; trans: row 2(l%4)+h, column l/4 */
            uint32_t row = f->kind == SMEM_LDSM_PLAIN ? lane / 4 : 2 * (lane % 4) + (uint32_t)h;
            uint32_t col = f->kind == SMEM_LDSM_PLAIN ? 2 * (lane % 4) + (uint32_t)h : lane / 4;
            uint32_t got = mem[(row_addr[8 * j + row] + 2 * col) / 2];
            uint32_t reg = (uint32_t)(g * f->regs + 2 * j + h);
            uint32_t want = layout_apply(l, reg, lane, w);
            cr_assert_eq(got, want, "warp %u lane %u reg %u: element %u, expected %u", w, lane, reg, got, want);
          }
    }
  free(mem);
}

static Layout mma_b(int K, int N, int warps) {
  MmaShape s;
  cr_assert(mma_shape(16, N, K, warps, &s));
  return layout_mma_b(&s);
}

static Layout mma_a(int M, int K, int warps) {
  MmaShape s;
  cr_assert(mma_shape(M, 8 * warps, K, warps, &s));
  return layout_mma_a(&s);
}

Test(exchange, vector_elems_of_blocked_layouts) {
  SmemLayout sl;
  int32_t shape[2] = {32, 128};
  cr_assert(smem_layout(2, shape, 2, 0, &sl));
  Layout l8 = layout_default(2, shape, 2, 8);
  cr_expect_eq(smem_vector_elems(&l8, &sl), 8, "8 bf16 a thread, row-major: one 16-byte access");
  Layout l1 = layout_default(2, shape, 2, 1);
  cr_expect_eq(smem_vector_elems(&l1, &sl), 1);
  cr_assert(smem_layout(2, shape, 4, 0, &sl));
  cr_expect_eq(smem_vector_elems(&l8, &sl), 4, "f32: 16 bytes are 4 elements");
}

Test(exchange, ldmatrix_forms_of_mma_operands) {
  SmemLayout row_major;
  int32_t kn[2] = {128, 32};
  cr_assert(smem_layout(2, kn, 2, 0, &row_major));
  Layout b = mma_b(128, 32, 2);
  SmemLdsm f;
  cr_assert(smem_ldmatrix(&b, &row_major, &f), "B from a row-major [K, N] tile");
  cr_expect_eq(f.kind, SMEM_LDSM_TRANS);
  cr_expect_eq(f.matrices, 4);
  expect_ldmatrix_delivers(&b, &row_major, &f);
  int32_t ak[2] = {16, 64};
  SmemLayout a_rm;
  cr_assert(smem_layout(2, ak, 2, 0, &a_rm));
  Layout a = mma_a(16, 64, 2);
  cr_assert(smem_ldmatrix(&a, &a_rm, &f), "A from a row-major [M, K] tile");
  cr_expect_eq(f.kind, SMEM_LDSM_PLAIN);
  expect_ldmatrix_delivers(&a, &a_rm, &f);
  /* swizzled tiles (the 128-byte swizzle keeps 16-byte rows whole) */
  SmemLayout sw;
  int32_t big[2] = {64, 64};
  cr_assert(smem_layout(2, big, 2, 128, &sw));
  Layout a2 = mma_a(64, 64, 4);
  cr_assert(smem_ldmatrix(&a2, &sw, &f));
  expect_ldmatrix_delivers(&a2, &sw, &f);
  /* 32-bit elements: never */
  SmemLayout f32;
  cr_assert(smem_layout(2, ak, 4, 0, &f32));
  cr_expect(!smem_ldmatrix(&a, &f32, &f));
}

Test(exchange, ldmatrix_with_fewer_matrices) {
  /* one k step of 16 and one n tile of 8: B has 4 registers, x2 */
  SmemLayout sl;
  int32_t kn[2] = {16, 8};
  cr_assert(smem_layout(2, kn, 2, 0, &sl));
  Layout b = mma_b(16, 8, 1);
  SmemLdsm f;
  cr_assert(smem_ldmatrix(&b, &sl, &f));
  cr_expect_eq(f.matrices, 2);
  expect_ldmatrix_delivers(&b, &sl, &f);
}

Test(exchange, stmatrix_for_wgmma_accumulators) {
  /* the epilogue of a 128 x 64 bf16 piece of a GEMM tile (two warpgroups
   * of wgmma m64n64), into a 128-byte swizzled tile: four matrices per
   * instruction against 2-element (4-byte) st.shared, no more wavefronts */
  WgmmaShape s;
  cr_assert(wgmma_shape(128, 64, 16, 8, &s));
  Layout acc = layout_wgmma_acc(&s);
  int32_t shape[2] = {128, 64};
  SmemLayout sw;
  cr_assert(smem_layout(2, shape, 2, 128, &sw));
  cr_expect_eq(smem_vector_elems(&acc, &sw), 2);
  SmemLdsm f;
  cr_assert(smem_stmatrix(&acc, &sw, &f));
  cr_expect_eq(f.kind, SMEM_LDSM_PLAIN);
  cr_expect_eq(f.matrices, 4);
  /* stmatrix writes register (g, j, h) of a lane where ldmatrix would
   * read it from: the same check */
  expect_ldmatrix_delivers(&acc, &sw, &f);
  cr_expect_leq(smem_load_wavefronts(&acc, &sw, true), smem_store_wavefronts(&acc, &sw));
  /* 8 elements a thread in a row: one 16-byte st.shared moves as much */
  Layout l8 = layout_default(2, shape, 8, 8);
  cr_expect(!smem_stmatrix(&l8, &sw, &f));
  /* 32-bit elements: never */
  SmemLayout f32;
  cr_assert(smem_layout(2, shape, 4, 128, &f32));
  cr_expect(!smem_stmatrix(&acc, &f32, &f));
}

Test(exchange, wavefronts_count_bank_conflicts) {
  /* f32 [32, 32] row-major; a layout with lanes along rows (column 0 of
   * every row in one access) hits one bank 32 times */
  int32_t shape[2] = {32, 32};
  SmemLayout sl;
  cr_assert(smem_layout(2, shape, 4, 0, &sl));
  Layout rows = layout_default(2, shape, 1, 1); /* lanes along columns: conflict-free */
  cr_expect_eq(smem_store_wavefronts(&rows, &sl), layout_regs(&rows), "one wavefront per access");
  Layout t = layout_trans(&rows, (int32_t[]){1, 0});
  /* transposed: registers along the columns (16-byte vectors of 4), lanes
   * down the rows: each group of 8 lanes hits the same 4 banks */
  cr_expect_eq(smem_vector_elems(&t, &sl), 4);
  cr_expect_eq(smem_store_wavefronts(&t, &sl), layout_regs(&t) / 4 * 32, "%d", smem_store_wavefronts(&t, &sl));
}

Test(exchange, transposing_conversion_is_swizzled_free_of_conflicts) {
  int32_t shape[2] = {32, 32};
  Layout rows = layout_default(2, shape, 1, 1);
  Layout cols = layout_trans(&rows, (int32_t[]){1, 0});
  SmemLayout x;
  cr_assert(smem_exchange_layout(&rows, &cols, 4, true, true, &x));
  expect_bijective(&x);
  cr_expect_eq(smem_store_wavefronts(&rows, &x), layout_regs(&rows));
  cr_expect_eq(smem_load_wavefronts(&cols, &x, true), layout_regs(&cols), "the swizzle removes the conflicts");
}

Test(exchange, key_tile_to_mma_b_operand) {
  /* paged decode: K [32 keys, 128 dims] bf16 loaded 8 dims a thread, used
   * transposed as the B operand of q . K^T: 16-byte stores and ldmatrix
   * loads, no conflicts */
  int32_t kshape[2] = {32, 128};
  Layout k = layout_default(2, kshape, 2, 8);
  Layout kt = layout_trans(&k, (int32_t[]){1, 0});
  Layout b = mma_b(128, 32, 2);
  SmemLayout x;
  cr_assert(smem_exchange_layout(&kt, &b, 2, true, true, &x));
  expect_bijective(&x);
  cr_expect_eq(smem_vector_elems(&kt, &x), 8);
  SmemLdsm f;
  cr_assert(smem_ldmatrix(&b, &x, &f));
  expect_ldmatrix_delivers(&b, &x, &f);
  cr_expect_eq(smem_store_wavefronts(&kt, &x), layout_regs(&kt) / 8 * 4, "16-byte stores: 4 wavefronts each");
  cr_expect_eq(smem_load_wavefronts(&b, &x, true), layout_regs(&b) / f.regs * f.matrices, "a wavefront a matrix");
}

Test(exchange, value_tile_to_mma_b_operand) {
  /* V [32 keys, 128 dims] as the B operand of p . V: ldmatrix.trans */
  int32_t vshape[2] = {32, 128};
  Layout v = layout_default(2, vshape, 2, 8);
  Layout b = mma_b(32, 128, 2);
  SmemLayout x;
  cr_assert(smem_exchange_layout(&v, &b, 2, true, true, &x));
  expect_bijective(&x);
  SmemLdsm f;
  cr_assert(smem_ldmatrix(&b, &x, &f));
  cr_expect_eq(f.kind, SMEM_LDSM_TRANS);
  expect_ldmatrix_delivers(&b, &x, &f);
  cr_expect_eq(smem_store_wavefronts(&v, &x), layout_regs(&v) / 8 * 4);
  cr_expect_eq(smem_load_wavefronts(&b, &x, true), layout_regs(&b) / f.regs * f.matrices);
}

Test(exchange, without_ldmatrix_every_candidate_is_bijective) {
  /* pairs of layouts of several shapes, warps and vector widths */
  int32_t shapes[][2] = {{16, 16}, {32, 64}, {64, 8}, {8, 256}};
  int vecs[] = {1, 2, 4, 8};
  for (int s = 0; s < 4; s++)
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++)
        for (int eb = 1; eb <= 8; eb *= 2) {
          Layout src = layout_default(2, shapes[s], 4, vecs[a]);
          Layout d0 = layout_default(2, (int32_t[]){shapes[s][1], shapes[s][0]}, 4, vecs[b]);
          Layout dst = layout_trans(&d0, (int32_t[]){1, 0});
          SmemLayout x;
          cr_assert(smem_exchange_layout(&src, &dst, eb, eb == 2, true, &x));
          expect_bijective(&x);
          SmemLayout rm;
          cr_assert(smem_layout(2, shapes[s], eb, 0, &rm));
          int chosen = smem_store_wavefronts(&src, &x) + smem_load_wavefronts(&dst, &x, eb == 2);
          int plain = smem_store_wavefronts(&src, &rm) + smem_load_wavefronts(&dst, &rm, eb == 2);
          cr_expect(chosen <= plain, "shape %d vec %d/%d eb %d: %d wavefronts, row-major %d", s, vecs[a], vecs[b], eb,
                    chosen, plain);
        }
}
