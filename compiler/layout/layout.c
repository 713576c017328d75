/* layout.c - distributed tile layouts as linear maps over GF(2) (see
 * layout.h).
 *
 * Every layout is a list of bases: one flat-index mask per register, lane
 * and warp bit. Building a blocked layout hands out the flat bits of each
 * dimension from low to high (registers, lanes, warps, repetitions);
 * slicing, transposing and projecting rewrite every basis through a table
 * from old flat bits to new ones; the algebra (rank, right inverse,
 * conversion planning) is Gaussian elimination on 32-bit masks. Nothing
 * here allocates: layouts and matrices are small values.
 */
#include "layout.h"

#include <stdio.h>
#include <string.h>

/* Lanes per warp, and the width of the masks the elimination works on. */
#define WARP_LANES 32
#define MASK_BITS 32
/* Columns of a BitMatrix. */
#define MATRIX_MAX_COLS (LAYOUT_MAX_REG_BITS + LAYOUT_LANE_BITS + LAYOUT_MAX_WARP_BITS)
/* Destination registers a ConvertPlan can describe. */
#define PLAN_MAX_REGS ((int)(sizeof(((ConvertPlan *)0)->src_reg) / sizeof(uint32_t)))

/* ---- small helpers ---- */

/* floor(log2(v)) for v >= 1; 0 for v <= 1. */
static int log2i(int64_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static int clamp_rank(int rank) {
  if (rank < 0) return 0;
  return rank > TILE_MAX_RANK ? TILE_MAX_RANK : rank;
}

static int dim_bits(const int32_t *shape, int dim) { return log2i(shape[dim]); }

/* Position of the lowest flat bit of dimension `dim` (row-major). */
static int dim_offset(int rank, const int32_t *shape, int dim) {
  int off = 0;
  for (int d = dim + 1; d < rank; d++) off += dim_bits(shape, d);
  return off;
}

static int count_bits(int rank, const int32_t *shape) {
  return dim_offset(rank, shape, -1);
}

/* A layout of the given shape with no register bits, five zero lane bases
 * and `nwarp` zero warp bases. */
static Layout layout_empty(int rank, const int32_t *shape, int nwarp) {
  Layout l;
  memset(&l, 0, sizeof l);
  l.rank = (uint8_t)clamp_rank(rank);
  for (int d = 0; d < l.rank; d++) l.shape[d] = shape[d];
  l.nlane = LAYOUT_LANE_BITS;
  l.nwarp = (uint8_t)(nwarp > LAYOUT_MAX_WARP_BITS ? LAYOUT_MAX_WARP_BITS : nwarp);
  return l;
}

static void push_reg(Layout *l, uint32_t basis) {
  if (basis && l->nreg < LAYOUT_MAX_REG_BITS) l->reg[l->nreg++] = basis;
}

/* ---- Gaussian elimination over GF(2) ----
 *
 * An Echelon holds independent vectors keyed by their highest set bit, each
 * with the mask of inputs whose XOR produces it. Inputs are added in order,
 * so the inputs that end up used are the earliest independent ones. */
typedef struct Echelon {
  uint32_t vec[MASK_BITS];
  uint32_t combo[MASK_BITS];
} Echelon;

static int high_bit(uint32_t v) { return MASK_BITS - 1 - __builtin_clz(v); }

/* Reduces v by the pivots; *combo accumulates the inputs used. Returns the
 * remainder (0 when v is in the span). */
static uint32_t echelon_reduce(const Echelon *e, uint32_t v, uint32_t *combo) {
  while (v) {
    int b = high_bit(v);
    if (!e->vec[b]) break;
    v ^= e->vec[b];
    *combo ^= e->combo[b];
  }
  return v;
}

/* Adds input `index` with value v; returns whether it was independent. */
static bool echelon_add(Echelon *e, uint32_t v, int index) {
  uint32_t combo = 1u << index;
  v = echelon_reduce(e, v, &combo);
  if (!v) return false;
  e->vec[high_bit(v)] = v;
  e->combo[high_bit(v)] = combo;
  return true;
}

/* Solves: finds the inputs whose XOR is v. False if v is outside the span. */
static bool echelon_solve(const Echelon *e, uint32_t v, uint32_t *combo) {
  *combo = 0;
  return echelon_reduce(e, v, combo) == 0;
}

/* Keeps only the register bases that are nonzero and independent of the
 * earlier ones (a dependent register would duplicate another's element). */
static void drop_dependent_regs(Layout *l) {
  Echelon e;
  memset(&e, 0, sizeof e);
  int kept = 0;
  for (int i = 0; i < l->nreg; i++)
    if (echelon_add(&e, l->reg[i], i)) l->reg[kept++] = l->reg[i];
  for (int i = kept; i < l->nreg; i++) l->reg[i] = 0;
  l->nreg = (uint8_t)kept;
}

/* ---- construction ---- */

/* Hands out the flat bits of one dimension from low to high; past the
 * dimension's size it hands out 0 (a replicated hardware bit). */
typedef struct DimCursor {
  int off, bits, used;
} DimCursor;

static uint32_t take_bit(DimCursor *c) {
  if (c->used >= c->bits) return 0;
  return 1u << (c->off + c->used++);
}

static void init_cursors(int rank, const int32_t *shape, DimCursor *cur) {
  for (int d = 0; d < rank; d++) cur[d] = (DimCursor){dim_offset(rank, shape, d), dim_bits(shape, d), 0};
}

/* Blocked layout bit order, with dims taken in `order` (fastest first):
 *   reg  = per-thread bits of order[0], of order[1], ...,
 *          then repetition bits of order[0], of order[1], ...;
 *   lane = lane bits of order[0], of order[1], ...;
 *   warp = warp bits of order[0], of order[1], ....
 * Within one dimension the flat bits go, low to high, to its per-thread
 * bits, its lane bits, its warp bits, then its repetitions. Per-thread bits
 * past the dimension's size are dropped; lane and warp bits past it get a
 * zero basis (replication). */
Layout layout_blocked(int rank, const int32_t *shape, const int32_t *size_per_thread,
                      const int32_t *threads_per_warp, const int32_t *warps_per_cta, const int32_t *order) {
  rank = clamp_rank(rank);
  int nwarp = 0;
  for (int d = 0; d < rank; d++) nwarp += log2i(warps_per_cta[d]);
  Layout l = layout_empty(rank, shape, nwarp);
  DimCursor cur[TILE_MAX_RANK];
  init_cursors(rank, shape, cur);
  for (int i = 0; i < rank; i++)
    for (int k = log2i(size_per_thread[order[i]]); k > 0; k--) push_reg(&l, take_bit(&cur[order[i]]));
  int lane = 0, warp = 0;
  for (int i = 0; i < rank; i++)
    for (int k = log2i(threads_per_warp[order[i]]); k > 0 && lane < LAYOUT_LANE_BITS; k--)
      l.lane[lane++] = take_bit(&cur[order[i]]);
  for (int i = 0; i < rank; i++)
    for (int k = log2i(warps_per_cta[order[i]]); k > 0 && warp < l.nwarp; k--)
      l.warp[warp++] = take_bit(&cur[order[i]]);
  for (int i = 0; i < rank; i++)
    while (cur[order[i]].used < cur[order[i]].bits) push_reg(&l, take_bit(&cur[order[i]]));
  return l;
}

/* Lanes: the last dimension first (up to its extent in threads), then the
 * ones before it; dimension 0 takes whatever is left, even past its size. */
static void default_lanes(int rank, const int32_t *shape, const int32_t *spt, int32_t *tpw) {
  int32_t left = WARP_LANES;
  for (int d = rank - 1; d >= 0; d--) {
    int32_t room = shape[d] / spt[d];
    tpw[d] = (d == 0 || left < room) ? left : (room < 1 ? 1 : room);
    left /= tpw[d];
  }
}

/* Warps: dimension 0 first (up to its extent left after the lanes), then
 * the next; leftover warps go to dimension 0 (replication). */
static void default_warps(int rank, const int32_t *shape, const int32_t *spt, const int32_t *tpw, int num_warps,
                          int32_t *wpc) {
  int32_t left = num_warps < 1 ? 1 : num_warps;
  for (int d = 0; d < rank; d++) {
    int32_t room = shape[d] / (spt[d] * tpw[d]);
    wpc[d] = left < room ? left : (room < 1 ? 1 : room);
    left /= wpc[d];
  }
  wpc[0] *= left;
}

Layout layout_default(int rank, const int32_t *shape, int num_warps, int vec) {
  rank = clamp_rank(rank);
  if (rank == 0) return layout_scalar(num_warps);
  int32_t spt[TILE_MAX_RANK], tpw[TILE_MAX_RANK], wpc[TILE_MAX_RANK], order[TILE_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    spt[d] = 1;
    order[d] = rank - 1 - d;
  }
  int32_t last = shape[rank - 1];
  spt[rank - 1] = vec < 1 ? 1 : (vec > last ? last : vec);
  default_lanes(rank, shape, spt, tpw);
  default_warps(rank, shape, spt, tpw, num_warps, wpc);
  return layout_blocked(rank, shape, spt, tpw, wpc, order);
}

Layout layout_scalar(int num_warps) { return layout_empty(0, NULL, log2i(num_warps)); }

/* ---- derived layouts ---- */

/* Rewrites every basis for a new shape: old dimension d becomes new
 * dimension dimmap[d] (bit for bit), or leaves when dimmap[d] < 0. */
static Layout remap_layout(const Layout *l, int rank, const int32_t *shape, const int *dimmap) {
  int dest[MASK_BITS];
  for (int b = 0; b < MASK_BITS; b++) dest[b] = -1;
  for (int d = 0; d < l->rank; d++) {
    int nd = dimmap[d], off = dim_offset(l->rank, l->shape, d);
    for (int b = 0; nd >= 0 && b < dim_bits(l->shape, d) && b < dim_bits(shape, nd); b++)
      dest[off + b] = dim_offset(rank, shape, nd) + b;
  }
  Layout r = *l;
  r.rank = (uint8_t)rank;
  memset(r.shape, 0, sizeof r.shape);
  for (int d = 0; d < rank; d++) r.shape[d] = shape[d];
  uint32_t *bases[] = {r.reg, r.lane, r.warp};
  int counts[] = {r.nreg, r.nlane, r.nwarp};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < counts[k]; i++) {
      uint32_t m = bases[k][i], out = 0;
      for (; m; m &= m - 1)
        if (dest[__builtin_ctz(m)] >= 0) out |= 1u << dest[__builtin_ctz(m)];
      bases[k][i] = out;
    }
  drop_dependent_regs(&r);
  return r;
}

Layout layout_slice(const Layout *l, int axis) {
  int32_t shape[TILE_MAX_RANK];
  int dimmap[TILE_MAX_RANK], rank = 0;
  for (int d = 0; d < l->rank; d++) {
    dimmap[d] = d == axis ? -1 : rank;
    if (d != axis) shape[rank++] = l->shape[d];
  }
  return remap_layout(l, rank, shape, dimmap);
}

Layout layout_expand_dims(const Layout *l, int axis) {
  Layout r = *l;
  if (l->rank >= TILE_MAX_RANK || axis < 0 || axis > l->rank) return r;
  for (int d = l->rank; d > axis; d--) r.shape[d] = l->shape[d - 1];
  r.shape[axis] = 1;
  r.rank++;
  return r;
}

Layout layout_reshape(const Layout *l, int rank, const int32_t *shape) {
  Layout r = *l;
  r.rank = (uint8_t)clamp_rank(rank);
  memset(r.shape, 0, sizeof r.shape);
  for (int d = 0; d < r.rank; d++) r.shape[d] = shape[d];
  return r;
}

Layout layout_trans(const Layout *l, const int32_t *perm) {
  int32_t shape[TILE_MAX_RANK];
  int dimmap[TILE_MAX_RANK];
  for (int i = 0; i < l->rank; i++) {
    shape[i] = l->shape[perm[i]];
    dimmap[perm[i]] = i;
  }
  return remap_layout(l, l->rank, shape, dimmap);
}

Layout layout_project(const Layout *l, int rank, const int32_t *from) {
  int dimmap[TILE_MAX_RANK];
  for (int d = 0; d < l->rank; d++) dimmap[d] = (d < rank && from[d] != 1) ? d : -1;
  return remap_layout(l, rank, from, dimmap);
}

/* ---- queries ---- */

int layout_flat_bits(const Layout *l) { return count_bits(l->rank, l->shape); }

int layout_regs(const Layout *l) { return 1 << l->nreg; }

static uint32_t xor_bases(const uint32_t *bases, int n, uint32_t index) {
  uint32_t out = 0;
  for (int i = 0; i < n; i++)
    if (index >> i & 1u) out ^= bases[i];
  return out;
}

uint32_t layout_apply(const Layout *l, uint32_t reg, uint32_t lane, uint32_t warp) {
  return xor_bases(l->reg, l->nreg, reg) ^ xor_bases(l->lane, l->nlane, lane) ^ xor_bases(l->warp, l->nwarp, warp);
}

void layout_coords(const Layout *l, uint32_t flat, int32_t *coords) {
  for (int d = l->rank - 1; d >= 0; d--) {
    int bits = dim_bits(l->shape, d);
    coords[d] = (int32_t)(flat & ((1u << bits) - 1));
    flat >>= bits;
  }
}

uint32_t layout_dim_mask(const Layout *l, int dim) {
  if (dim < 0 || dim >= l->rank) return 0;
  return ((1u << dim_bits(l->shape, dim)) - 1) << dim_offset(l->rank, l->shape, dim);
}

bool layout_equal(const Layout *a, const Layout *b) {
  if (a->rank != b->rank || a->nreg != b->nreg || a->nlane != b->nlane || a->nwarp != b->nwarp) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return memcmp(a->reg, b->reg, a->nreg * sizeof(uint32_t)) == 0 &&
         memcmp(a->lane, b->lane, a->nlane * sizeof(uint32_t)) == 0 &&
         memcmp(a->warp, b->warp, a->nwarp * sizeof(uint32_t)) == 0;
}

static uint32_t zero_bases(const uint32_t *bases, int n) {
  uint32_t mask = 0;
  for (int i = 0; i < n; i++)
    if (!bases[i]) mask |= 1u << i;
  return mask;
}

uint32_t layout_lane_replication(const Layout *l) { return zero_bases(l->lane, l->nlane); }
uint32_t layout_warp_replication(const Layout *l) { return zero_bases(l->warp, l->nwarp); }

/* Appends "name=[b0, b1, ...]" through the bounded writer below. */
#define PUT(...) n += (size_t)snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, __VA_ARGS__)
static size_t put_bases(char *buf, size_t size, size_t n, const char *name, const uint32_t *bases, int count) {
  PUT(" %s=[", name);
  for (int i = 0; i < count; i++) PUT(i ? ", %u" : "%u", (unsigned)bases[i]);
  PUT("]");
  return n;
}

void layout_str(const Layout *l, char *buf, size_t size) {
  size_t n = 0;
  if (size) buf[0] = 0;
  PUT("f[");
  for (int d = 0; d < l->rank; d++) PUT(d ? ", %d" : "%d", (int)l->shape[d]);
  PUT("]");
  n = put_bases(buf, size, n, "reg", l->reg, l->nreg);
  n = put_bases(buf, size, n, "lane", l->lane, l->nlane);
  put_bases(buf, size, n, "warp", l->warp, l->nwarp);
}
#undef PUT

/* ---- algebra ---- */

static int clamp_cols(int n) {
  if (n < 0) return 0;
  return n > MATRIX_MAX_COLS ? MATRIX_MAX_COLS : n;
}

BitMatrix layout_matrix(const Layout *l) {
  BitMatrix m;
  memset(&m, 0, sizeof m);
  m.nout = layout_flat_bits(l);
  for (int i = 0; i < l->nreg; i++) m.col[m.nin++] = l->reg[i];
  for (int i = 0; i < l->nlane; i++) m.col[m.nin++] = l->lane[i];
  for (int i = 0; i < l->nwarp; i++) m.col[m.nin++] = l->warp[i];
  return m;
}

BitMatrix bitmatrix_compose(const BitMatrix *a, const BitMatrix *b) {
  BitMatrix r;
  memset(&r, 0, sizeof r);
  r.nin = clamp_cols(b->nin);
  r.nout = a->nout;
  for (int i = 0; i < r.nin; i++) r.col[i] = xor_bases(a->col, clamp_cols(a->nin), b->col[i]);
  return r;
}

/* The echelon form of m's columns, added in input order. */
static Echelon matrix_echelon(const BitMatrix *m, int *rank) {
  Echelon e;
  memset(&e, 0, sizeof e);
  *rank = 0;
  for (int i = 0; i < clamp_cols(m->nin); i++) *rank += echelon_add(&e, m->col[i], i);
  return e;
}

int bitmatrix_rank(const BitMatrix *m) {
  int rank;
  matrix_echelon(m, &rank);
  return rank;
}

bool bitmatrix_right_inverse(const BitMatrix *m, BitMatrix *r) {
  if (m->nout < 0 || m->nout > MATRIX_MAX_COLS) return false;
  int rank;
  Echelon e = matrix_echelon(m, &rank);
  memset(r, 0, sizeof *r);
  r->nin = m->nout;
  r->nout = clamp_cols(m->nin);
  for (int k = 0; k < m->nout; k++)
    if (!echelon_solve(&e, 1u << k, &r->col[k])) return false;
  return rank == m->nout;
}

/* ---- conversion planning ---- */

static bool same_bases(const uint32_t *a, int na, const uint32_t *b, int nb) {
  return na == nb && memcmp(a, b, (size_t)na * sizeof(uint32_t)) == 0;
}

/* An echelon of the given bases (inputs numbered from 0). */
static Echelon bases_echelon(const uint32_t *a, int na, const uint32_t *b, int nb) {
  Echelon e;
  memset(&e, 0, sizeof e);
  for (int i = 0; i < na; i++) echelon_add(&e, a[i], i);
  for (int i = 0; i < nb; i++) echelon_add(&e, b[i], na + i);
  return e;
}

static bool in_span(const Echelon *e, const uint32_t *bases, int n) {
  uint32_t combo;
  for (int i = 0; i < n; i++)
    if (!echelon_solve(e, bases[i], &combo)) return false;
  return true;
}

/* Registers only: every dst register basis is a combination of src register
 * bases; src_reg of a dst register is the XOR of its bits' solutions. */
static bool plan_registers(const Layout *src, const Layout *dst, ConvertPlan *plan) {
  Echelon e = bases_echelon(src->reg, src->nreg, NULL, 0);
  uint32_t sol[LAYOUT_MAX_REG_BITS];
  for (int i = 0; i < dst->nreg; i++)
    if (!echelon_solve(&e, dst->reg[i], &sol[i])) return false;
  int nregs = layout_regs(dst);
  if (nregs > PLAN_MAX_REGS) return true;
  for (int r = 0; r < nregs; r++) plan->src_reg[r] = xor_bases(sol, dst->nreg, (uint32_t)r);
  plan->ndst_regs = nregs;
  return true;
}

void layout_convert_plan(const Layout *src, const Layout *dst, ConvertPlan *plan) {
  plan->ndst_regs = 0;
  plan->kind = CONVERT_SHARED;
  if (layout_flat_bits(src) != layout_flat_bits(dst)) return;
  if (layout_equal(src, dst)) {
    plan->kind = CONVERT_NONE;
    return;
  }
  if (!same_bases(src->warp, src->nwarp, dst->warp, dst->nwarp)) return;
  if (same_bases(src->lane, src->nlane, dst->lane, dst->nlane) && plan_registers(src, dst, plan)) {
    plan->kind = CONVERT_REGISTERS;
    return;
  }
  Echelon e = bases_echelon(src->reg, src->nreg, src->lane, src->nlane);
  if (in_span(&e, dst->reg, dst->nreg) && in_span(&e, dst->lane, dst->nlane)) plan->kind = CONVERT_SHUFFLE;
}
