/* mma.c - register layouts of wgmma and mma.sync (see mma.h).
 *
 * Each layout is written down basis by basis from the fragment formulas
 * of the PTX ISA: a basis is the flat-index mask (row * N + col) that one
 * register, lane or warp bit moves to. Warps beyond what the tile needs
 * get zero bases, which the rest of the back end understands as replicas.
 */
#include "mma.h"

#include <string.h>

static int log2i(int v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static bool pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

/* A 2-D layout [rows, cols] under construction. */
typedef struct Builder {
  Layout l;
  int cols;
} Builder;

static Builder builder(int rows, int cols, int num_warps) {
  Builder b;
  memset(&b, 0, sizeof b);
  b.l.rank = 2;
  b.l.shape[0] = rows;
  b.l.shape[1] = cols;
  b.l.nlane = LAYOUT_LANE_BITS;
  b.l.nwarp = (uint8_t)log2i(num_warps);
  b.cols = cols;
  return b;
}

static uint32_t at(const Builder *b, int row, int col) { return (uint32_t)row * (uint32_t)b->cols + (uint32_t)col; }
static void reg(Builder *b, uint32_t basis) { b->l.reg[b->l.nreg++] = basis; }
/* Register bits for `count` repeats, each `step` apart (step a flat mask). */
static void reg_repeats(Builder *b, int count, uint32_t step) {
  for (int i = 0; (1 << i) < count; i++) reg(b, step << i);
}
static void warps(Builder *b, int *next, int count, uint32_t step) {
  for (int i = 0; (1 << i) < count; i++) b->l.warp[(*next)++] = step ? step << i : 0;
}

/* ---- wgmma ---- */

bool wgmma_shape(int M, int N, int K, int num_warps, WgmmaShape *out) {
  memset(out, 0, sizeof *out);
  if (num_warps < WARPGROUP_WARPS || num_warps % WARPGROUP_WARPS || !pow2(num_warps)) return false;
  if (M < WGMMA_M || M % WGMMA_M || !pow2(M) || N < WGMMA_MIN_N || !pow2(N) || K < 1 || !pow2(K)) return false;
  int groups = num_warps / WARPGROUP_WARPS;
  out->M = M, out->N = N, out->K = K, out->num_warps = num_warps;
  out->gm = groups < M / WGMMA_M ? groups : M / WGMMA_M;
  /* Warpgroups split N only down to WGMMA_MIN_SPLIT_N columns each: an
   * N-major B operand needs instructions at least one 128-byte swizzle
   * atom (64 16-bit elements) wide; the rest replicate. */
  int left = groups / out->gm, most = N / WGMMA_MIN_SPLIT_N > 1 ? N / WGMMA_MIN_SPLIT_N : 1;
  out->gn = left < most ? left : most;
  int n_per_group = N / out->gn;
  out->inst_n = n_per_group < WGMMA_MAX_N ? n_per_group : WGMMA_MAX_N;
  out->n_rep = n_per_group / out->inst_n;
  out->m_rep = M / (WGMMA_M * out->gm);
  return true;
}

int wgmma_acc_regs(const WgmmaShape *s) { return s->inst_n / 2 * s->n_rep * s->m_rep; }

/* The lanes and warps of a wgmma fragment of s: lanes move along the
 * columns by `lane_col` and twice that, then along the rows by 1, 2, 4;
 * warps by 16 and 32 rows, then the gm warpgroups by 64 rows and the gn
 * ones by `gn_step` columns (0: replicas). */
static void wgmma_threads(Builder *b, const WgmmaShape *s, int lane_col, int gn_step) {
  b->l.lane[0] = at(b, 0, lane_col);
  b->l.lane[1] = at(b, 0, 2 * lane_col);
  b->l.lane[2] = at(b, 1, 0);
  b->l.lane[3] = at(b, 2, 0);
  b->l.lane[4] = at(b, 4, 0);
  int w = 0;
  b->l.warp[w++] = at(b, 16, 0);
  b->l.warp[w++] = at(b, 32, 0);
  warps(b, &w, s->gm, at(b, WGMMA_M, 0));
  warps(b, &w, s->gn, gn_step ? at(b, 0, gn_step) : 0);
  while (w < b->l.nwarp) b->l.warp[w++] = 0;
}

/* The accumulator layout of a [M, cols] tile cut like s along M, with
 * instructions `inst` columns wide, `nrep` of them per warpgroup, and the
 * gn warpgroup bits moving `gn_step` columns (0: replicas). */
static Layout acc_like(const WgmmaShape *s, int cols, int inst, int nrep, int gn_step) {
  Builder b = builder(s->M, cols, s->num_warps);
  reg(&b, at(&b, 0, 1));
  reg(&b, at(&b, 8, 0));
  reg_repeats(&b, inst / 8, at(&b, 0, 8));
  reg_repeats(&b, nrep, at(&b, 0, inst));
  reg_repeats(&b, s->m_rep, at(&b, WGMMA_M * s->gm, 0));
  wgmma_threads(&b, s, 2, gn_step);
  return b.l;
}

Layout layout_wgmma_acc(const WgmmaShape *s) { return acc_like(s, s->N, s->inst_n, s->n_rep, s->N / s->gn); }

Layout layout_wgmma_a(const WgmmaShape *s) {
  int inst = s->K < WGMMA_MAX_N ? s->K : WGMMA_MAX_N;
  return acc_like(s, s->K, inst, s->K / inst, 0);
}

Layout layout_wgmma_a_8bit(const WgmmaShape *s) {
  Builder b = builder(s->M, s->K, s->num_warps);
  reg(&b, at(&b, 0, 1));
  reg(&b, at(&b, 0, 2));
  reg(&b, at(&b, 8, 0));
  reg(&b, at(&b, 0, 16));
  reg_repeats(&b, s->K / WGMMA_K_8BIT, at(&b, 0, WGMMA_K_8BIT));
  reg_repeats(&b, s->m_rep, at(&b, WGMMA_M * s->gm, 0));
  wgmma_threads(&b, s, 4, 0);
  return b.l;
}

/* ---- mma.sync m16n8k16 ---- */

bool mma_shape(int M, int N, int K, int num_warps, MmaShape *out) {
  return mma_shape_wn(M, N, K, num_warps, num_warps, out);
}

bool mma_shape_wn(int M, int N, int K, int num_warps, int max_wn, MmaShape *out) {
  memset(out, 0, sizeof *out);
  if (!pow2(num_warps) || M < MMA_M || !pow2(M) || N < MMA_N || !pow2(N) || K < MMA_K || !pow2(K) || max_wn < 1 ||
      !pow2(max_wn))
    return false;
  out->M = M, out->N = N, out->K = K, out->num_warps = num_warps;
  out->wm = num_warps < M / MMA_M ? num_warps : M / MMA_M;
  int left = num_warps / out->wm;
  if (left > max_wn) left = max_wn;
  out->wn = left < N / MMA_N ? left : N / MMA_N;
  out->m_rep = M / (MMA_M * out->wm);
  out->n_rep = N / (MMA_N * out->wn);
  out->k_rep = K / MMA_K;
  return true;
}

/* Lanes of every mma fragment: q = lane % 4 moves along `minor` (2 and 4
 * elements), g = lane / 4 along `major` (1, 2, 4). */
static void mma_lanes(Builder *b, uint32_t minor, uint32_t major) {
  b->l.lane[0] = minor * 2;
  b->l.lane[1] = minor * 4;
  b->l.lane[2] = major;
  b->l.lane[3] = major * 2;
  b->l.lane[4] = major * 4;
}

/* Warp bits: wm along rows of 16 (or replicas), then wn along columns of
 * 8 (or replicas), then replicas. */
static void mma_warps(Builder *b, const MmaShape *s, uint32_t m_step, uint32_t n_step) {
  int w = 0;
  warps(b, &w, s->wm, m_step);
  warps(b, &w, s->wn, n_step);
  while (w < b->l.nwarp) b->l.warp[w++] = 0;
}

Layout layout_mma_acc(const MmaShape *s) {
  Builder b = builder(s->M, s->N, s->num_warps);
  reg(&b, at(&b, 0, 1));
  reg(&b, at(&b, 8, 0));
  reg_repeats(&b, s->n_rep, at(&b, 0, MMA_N * s->wn));
  reg_repeats(&b, s->m_rep, at(&b, MMA_M * s->wm, 0));
  mma_lanes(&b, at(&b, 0, 1), at(&b, 1, 0));
  mma_warps(&b, s, at(&b, MMA_M, 0), at(&b, 0, MMA_N));
  return b.l;
}

Layout layout_mma_a(const MmaShape *s) {
  Builder b = builder(s->M, s->K, s->num_warps);
  reg(&b, at(&b, 0, 1));
  reg(&b, at(&b, 8, 0));
  reg(&b, at(&b, 0, 8));
  reg_repeats(&b, s->k_rep, at(&b, 0, MMA_K));
  reg_repeats(&b, s->m_rep, at(&b, MMA_M * s->wm, 0));
  mma_lanes(&b, at(&b, 0, 1), at(&b, 1, 0));
  mma_warps(&b, s, at(&b, MMA_M, 0), 0);
  return b.l;
}

Layout layout_mma_b(const MmaShape *s) {
  Builder b = builder(s->K, s->N, s->num_warps);
  reg(&b, at(&b, 1, 0));
  reg(&b, at(&b, 8, 0));
  reg_repeats(&b, s->k_rep, at(&b, MMA_K, 0));
  reg_repeats(&b, s->n_rep, at(&b, 0, MMA_N * s->wn));
  mma_lanes(&b, at(&b, 1, 0), at(&b, 0, 1));
  mma_warps(&b, s, 0, at(&b, 0, MMA_N));
  return b.l;
}

bool mma_shape_of_acc(int M, int N, int K, int num_warps, const Layout *acc, MmaShape *out) {
  for (int wn = num_warps; wn >= 1; wn /= 2) {
    if (!mma_shape_wn(M, N, K, num_warps, wn, out)) return false;
    Layout l = layout_mma_acc(out);
    if (layout_equal(&l, acc)) return true;
  }
  return mma_shape(M, N, K, num_warps, out);
}
