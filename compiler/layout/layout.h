/* layout.h - distributed tile layouts as linear maps over GF(2).
 *
 * A layout says which thread of a block holds which element of a tile, and
 * in which of its registers. Tile shapes are powers of two, so an element
 * is named by its row-major flat index, a number of log2(numel) bits, and
 * every hardware position by three bit fields: register index, lane (5
 * bits) and warp. A linear layout maps each hardware bit to a flat-index
 * mask (its "basis"); the element at (reg, lane, warp) is the XOR of the
 * bases of the set bits. Blocked layouts, their slices for reductions,
 * broadcasts, transposes, reshapes, and later the wgmma accumulator and
 * swizzled shared-memory layouts are all instances; composing, inverting
 * and planning conversions between layouts is bit-matrix arithmetic.
 *
 * Conventions:
 *   - bases are masks of the flat index, whose bit 0 is the lowest bit of
 *     the last dimension (row-major: the last dimension varies fastest);
 *   - a zero basis means "this hardware bit does not change the element":
 *     replication (several lanes or warps hold the same element). Register
 *     bases are never zero (registers are not duplicated);
 *   - a layout is "surjective": every flat bit is reachable from some basis
 *     (every element is held by some thread).
 */
#ifndef TILE_LAYOUT_H
#define TILE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/types.h"

/* Largest register field: 2^LAYOUT_MAX_REG_BITS elements per thread. A
 * 2^20-element tile (the language's limit) in one warp needs 15 bits. */
#define LAYOUT_MAX_REG_BITS 20
#define LAYOUT_LANE_BITS 5
/* 32 warps (1024 threads) per block at most. */
#define LAYOUT_MAX_WARP_BITS 5
/* Bits of a flat index: log2(TILE_MAX_ELEMS). */
#define LAYOUT_MAX_FLAT_BITS 20

typedef struct Layout {
  uint8_t rank;
  int32_t shape[TILE_MAX_RANK];
  uint8_t nreg, nlane, nwarp; /* field widths; nlane is always 5 */
  uint32_t reg[LAYOUT_MAX_REG_BITS];
  uint32_t lane[LAYOUT_LANE_BITS];
  uint32_t warp[LAYOUT_MAX_WARP_BITS];
} Layout;

/* ---- construction ---- */

/* A blocked layout (Triton's BlockedEncoding): each thread holds
 * size_per_thread[d] consecutive elements along every dimension d, a warp's
 * 32 lanes tile threads_per_warp[d], the warps tile warps_per_cta[d], and
 * the whole pattern repeats in registers to cover the shape (or the shape is
 * replicated over lanes/warps when it is smaller). `order` lists dimensions
 * from fastest to slowest (order[0] = rank-1 for row-major). Products:
 * prod(threads_per_warp) = 32, prod(warps_per_cta) = num_warps. All values
 * powers of two.
 * Hardware bit order (dims taken in `order`, fastest first):
 *   reg  = size_per_thread bits of order[0], of order[1], ..., then the
 *          repetition bits (shape larger than spt*tpw*wpc) of order[0], ...;
 *   lane = threads_per_warp bits of order[0], of order[1], ...;
 *   warp = warps_per_cta bits of order[0], of order[1], ....
 * Within a dimension its flat bits go, low to high, to its per-thread,
 * lane, warp and repetition bits; per-thread bits past the dimension's size
 * are dropped, lane and warp bits past it get zero bases (replication). */
Layout layout_blocked(int rank, const int32_t *shape, const int32_t *size_per_thread,
                      const int32_t *threads_per_warp, const int32_t *warps_per_cta, const int32_t *order);

/* The default blocked layout for a shape: `vec` consecutive elements per
 * thread along the last dimension (clamped to it), lanes along the last
 * dimension first, then the others; warps along the first dimensions. */
Layout layout_default(int rank, const int32_t *shape, int num_warps, int vec);

/* A scalar (rank 0) held by every thread. */
Layout layout_scalar(int num_warps);

/* ---- derived layouts ---- */

/* Removes dimension `axis` (a reduction result): its bits leave every
 * basis; register bases that become zero (or, for non-blocked parents, a
 * combination of earlier register bases) are dropped, lane and warp bases
 * that become zero stay (replication). */
Layout layout_slice(const Layout *l, int axis);
/* Inserts a dimension of size 1 at `axis` (the flat index is unchanged). */
Layout layout_expand_dims(const Layout *l, int axis);
/* Same flat index, another shape with the same element count. */
Layout layout_reshape(const Layout *l, int rank, const int32_t *shape);
/* Result dimension i is operand dimension perm[i]. */
Layout layout_trans(const Layout *l, const int32_t *perm);
/* The layout a broadcast operand of shape `from` (dims equal or 1) must
 * have so that broadcasting it to `l` needs no data movement: the bits of
 * the broadcast dimensions leave every basis (register bases that become
 * zero or dependent are dropped as in layout_slice, lane/warp zeros stay). */
Layout layout_project(const Layout *l, int rank, const int32_t *from);

/* ---- queries ---- */

int layout_flat_bits(const Layout *l); /* log2(numel) */
int layout_regs(const Layout *l);      /* registers per thread: 1 << nreg */
/* Flat index held in register `reg` of the thread (lane, warp). */
uint32_t layout_apply(const Layout *l, uint32_t reg, uint32_t lane, uint32_t warp);
/* Coordinates of a flat index in the layout's shape. */
void layout_coords(const Layout *l, uint32_t flat, int32_t *coords);
/* Mask of the flat bits that belong to dimension `dim`. */
uint32_t layout_dim_mask(const Layout *l, int dim);
bool layout_equal(const Layout *a, const Layout *b);
/* Lanes/warps whose bases are zero hold copies: these masks select the
 * lane and warp bits that do not change the element. */
uint32_t layout_lane_replication(const Layout *l);
uint32_t layout_warp_replication(const Layout *l);
/* Textual form for dumps and tests, e.g.
 * "f[64, 32] reg=[1, 2] lane=[4, 8, 16, 32, 64] warp=[128, 256]". */
void layout_str(const Layout *l, char *buf, size_t size);

/* ---- algebra ---- */

/* A linear map from `nin` input bits to output bit masks over GF(2): the
 * general form behind layouts (inputs: reg, lane, warp bits concatenated). */
typedef struct BitMatrix {
  int nin, nout;
  uint32_t col[LAYOUT_MAX_REG_BITS + LAYOUT_LANE_BITS + LAYOUT_MAX_WARP_BITS];
} BitMatrix;

/* The layout's map, inputs ordered reg bits, lane bits, warp bits. */
BitMatrix layout_matrix(const Layout *l);
/* a after b: (a o b)(x) = a(b(x)); b's outputs are a's inputs. */
BitMatrix bitmatrix_compose(const BitMatrix *a, const BitMatrix *b);
/* A right inverse of a surjective map: r such that m(r(y)) = y for every
 * output y, choosing among preimages the one with the lowest input bits
 * (so replicated hardware bits stay zero). False if m is not surjective. */
bool bitmatrix_right_inverse(const BitMatrix *m, BitMatrix *r);
/* rank over GF(2) */
int bitmatrix_rank(const BitMatrix *m);

/* How to move a tile from layout `src` to layout `dst` (same shape). */
typedef enum ConvertKind {
  CONVERT_NONE,      /* identical layouts */
  CONVERT_REGISTERS, /* same lanes and warps: a register permutation (and
                        dropping/duplicating registers) within each thread */
  CONVERT_SHUFFLE,   /* same warps, and every element a warp needs is held
                        by that warp (dst reg and lane bases lie in the span
                        of src reg and lane bases): data moves between lanes
                        of a warp */
  CONVERT_SHARED,    /* data moves between warps: through shared memory */
} ConvertKind;

typedef struct ConvertPlan {
  ConvertKind kind;
  /* CONVERT_REGISTERS: dst register r takes src register src_reg[r]
   * (in the same thread), for r < ndst_regs. ndst_regs is the destination's
   * register count when src_reg was filled, else 0. */
  uint32_t src_reg[1u << 12];
  int ndst_regs;
} ConvertPlan;

/* Plans a conversion; fills src_reg for CONVERT_REGISTERS when the
 * destination has at most 4096 registers per thread. Layouts of different
 * element counts get CONVERT_SHARED. */
void layout_convert_plan(const Layout *src, const Layout *dst, ConvertPlan *plan);

#endif
