/* mma.h - register layouts of the tensor-core instructions, as linear
 * layouts (layout.h), and how a dot's tile is cut into instructions.
 *
 * wgmma (sm_90a, one warpgroup of 4 warps per instruction): the result of
 * m64nNk16 / m64nNk32 holds, for thread t of the warpgroup (w = t / 32,
 * l = t % 32) in register r (0 .. N/2 - 1),
 *     row = 16w + l/4 + 8((r >> 1) & 1),   col = 8(r >> 2) + 2(l % 4) + (r & 1).
 * A dot tile [M, N] is spread over the warpgroups (gm along M, gn along N;
 * warpgroups beyond M/64 x N/8 hold replicas) and each warpgroup issues
 * m_rep x n_rep instructions of shape 64 x inst_n. For 16-bit types the A
 * operand from registers (m64k16) has the accumulator's layout of a
 * [64, 16] tile, so the accumulator of one dot, converted to bf16, is the
 * A operand of the next with no data movement (flash attention's P).
 *
 * mma.sync m16n8k16 (one warp per instruction): g = lane / 4, q = lane % 4;
 *     C: c0,c1 (g, 2q+{0,1}), c2,c3 (g+8, ..)
 *     A: a0,a1 (g, 2q+{0,1}), a2,a3 (g+8, ..), a4,a5 (g, 2q+8+..), a6,a7 (g+8, 2q+8+..)
 *     B: b0,b1 (k 2q+{0,1}, n g), b2,b3 (k 2q+8+.., n g)
 * with warps tiling M (wm) and N (wn) and instructions repeated in
 * registers.
 *
 * Register numbering (the contract the lowering relies on):
 *   wgmma acc   reg = r + (inst_n / 2) * (ni + n_rep * mi)
 *   wgmma A     reg = r + (K / 2) * mi  (k step kk: registers 8kk .. 8kk+7)
 *   mma acc     reg = e + 2h + 4 (ni + n_rep * mi)       (e: col & 1, h: row & 8)
 *   mma A       reg = e + 2h + 4 k8 + 8 (kk + k_rep * mi)
 *   mma B       reg = e + 2 k8 + 4 (kk + k_rep * ni)
 */
#ifndef TILE_LAYOUT_MMA_H
#define TILE_LAYOUT_MMA_H

#include <stdbool.h>

#include "layout.h"

/* Rows of one wgmma instruction and threads of its warpgroup. */
#define WGMMA_M 64
#define WARPGROUP_WARPS 4
/* N of one wgmma instruction: a multiple of 8 up to 256 (PTX ISA). */
#define WGMMA_MAX_N 256
#define WGMMA_MIN_N 8
/* Columns per warpgroup when warpgroups share N (see wgmma_shape). */
#define WGMMA_MIN_SPLIT_N 64

typedef struct WgmmaShape {
  int M, N, K;    /* the dot: [M, K] x [K, N] */
  int num_warps;
  int gm, gn;     /* warpgroups along M and along N; the rest replicate */
  int inst_n;     /* N of one instruction */
  int m_rep, n_rep; /* instructions per warpgroup along M and N */
} WgmmaShape;

/* Cuts a dot into wgmma instructions; false when wgmma does not apply
 * (warps not a multiple of 4, M not a multiple of 64, N below 8). */
bool wgmma_shape(int M, int N, int K, int num_warps, WgmmaShape *out);
/* The accumulator (result) layout of the dot, [M, N]. */
Layout layout_wgmma_acc(const WgmmaShape *s);
/* The A operand from registers, [M, K] (16-bit types). Warpgroups along N
 * hold replicas of A. */
Layout layout_wgmma_a(const WgmmaShape *s);
/* The A operand from registers, [M, K], for 8-bit types (K a multiple of
 * WGMMA_K_8BIT): each 32-bit register holds four consecutive k, lanes
 * move along k by 4 and 8, registers by 16 and then by instruction
 * (HOPPER-FACTS.md section 6). */
Layout layout_wgmma_a_8bit(const WgmmaShape *s);
/* K of one wgmma instruction on 8-bit types. */
#define WGMMA_K_8BIT 32
/* Accumulator registers per thread. */
int wgmma_acc_regs(const WgmmaShape *s);

/* mma.sync m16n8k16. */
#define MMA_M 16
#define MMA_N 8
#define MMA_K 16

typedef struct MmaShape {
  int M, N, K;
  int num_warps;
  int wm, wn;              /* warps along M and N; the rest replicate */
  int m_rep, n_rep, k_rep; /* instructions per warp along M, N and K */
} MmaShape;

bool mma_shape(int M, int N, int K, int num_warps, MmaShape *out);
/* The same with at most max_wn warps along N (a power of two): the warps
 * that M leaves over beyond max_wn hold replicas of the whole rows. */
bool mma_shape_wn(int M, int N, int K, int num_warps, int max_wn, MmaShape *out);
/* The cut whose accumulator layout is `acc` (mma_shape's when none is). */
bool mma_shape_of_acc(int M, int N, int K, int num_warps, const Layout *acc, MmaShape *out);
Layout layout_mma_acc(const MmaShape *s);
Layout layout_mma_a(const MmaShape *s);
Layout layout_mma_b(const MmaShape *s);

#endif
