/* exchange.c - vector widths, ldmatrix forms, bank conflicts and the
 * scratch layout of conversions (see exchange.h). */
#include "exchange.h"

#include <string.h>

/* Candidate scratch layouts: row-major, and four orders that put other
 * vectors on the lowest bytes (the source's registers, the destination's,
 * the two ldmatrix row forms). */
#define EXCHANGE_ORDERS 5
/* Swizzles tried per order: windows of high bits (one per start bit) and
 * four built from the lanes of one access. */
#define EXCHANGE_MAX_SWIZZLES (LAYOUT_MAX_FLAT_BITS + 4)

static int log2u(uint32_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static bool touches_low(const uint32_t *bases, int n, const SmemLayout *sl, uint32_t low) {
  for (int i = 0; i < n; i++)
    if (smem_offset(sl, bases[i]) & low) return true;
  return false;
}

int smem_vector_elems(const Layout *l, const SmemLayout *sl) {
  int eb = sl->elem_bytes, v = 1, j = 0;
  while (j < l->nreg && v * 2 * eb <= SMEM_VECTOR_BYTES && smem_offset(sl, l->reg[j]) == (uint32_t)(eb * v)) {
    v *= 2;
    j++;
  }
  for (; v > 1; v /= 2, j--) {
    uint32_t low = (uint32_t)(v * eb) - 1;
    if (!touches_low(l->reg + j, l->nreg - j, sl, low) && !touches_low(l->lane, l->nlane, sl, low) &&
        !touches_low(l->warp, l->nwarp, sl, low))
      break;
  }
  return v;
}

bool smem_ldmatrix(const Layout *l, const SmemLayout *sl, SmemLdsm *out) {
  memset(out, 0, sizeof *out);
  if (sl->elem_bytes != 2 || l->nreg < 1 || l->nlane != LAYOUT_LANE_BITS) return false;
  /* the three bases that walk a 16-byte row, and the three that pick the row */
  for (int form = SMEM_LDSM_PLAIN; form <= SMEM_LDSM_TRANS; form++) {
    uint32_t col[3], row[3];
    if (form == SMEM_LDSM_PLAIN) {
      col[0] = l->reg[0], col[1] = l->lane[0], col[2] = l->lane[1];
      row[0] = l->lane[2], row[1] = l->lane[3], row[2] = l->lane[4];
    } else {
      col[0] = l->lane[2], col[1] = l->lane[3], col[2] = l->lane[4];
      row[0] = l->reg[0], row[1] = l->lane[0], row[2] = l->lane[1];
    }
    bool ok = true;
    for (int i = 0; i < 3 && ok; i++) ok = smem_offset(sl, col[i]) == 2u << i;
    const uint32_t low = SMEM_VECTOR_BYTES - 1;
    ok = ok && !touches_low(row, 3, sl, low) && !touches_low(l->reg + 1, l->nreg - 1, sl, low) &&
         !touches_low(l->warp, l->nwarp, sl, low);
    if (!ok) continue;
    int lm = l->nreg - 1 < 2 ? l->nreg - 1 : 2;
    out->kind = (SmemLdsmKind)form;
    out->matrices = 1 << lm;
    out->regs = 2 * out->matrices;
    Layout *a = &out->addr;
    *a = *l;
    a->nreg = (uint8_t)(l->nreg - 1 - lm);
    for (int i = 0; i < a->nreg; i++) a->reg[i] = l->reg[1 + lm + i];
    for (int i = 0; i < 3; i++) a->lane[i] = row[i];
    a->lane[3] = lm >= 1 ? l->reg[1] : 0;
    a->lane[4] = lm >= 2 ? l->reg[2] : 0;
    return true;
  }
  return false;
}

/* ---- bank conflicts ---- */

/* Wavefronts of one group of lanes served together: the most distinct
 * 4-byte words any bank is asked for (the same word is broadcast). */
static int group_wavefronts(const uint32_t *off, int n, int width) {
  uint32_t words[SMEM_BANKS * (SMEM_VECTOR_BYTES / SMEM_BANK_BYTES)];
  int nwords = 0, per = width >= SMEM_BANK_BYTES ? width / SMEM_BANK_BYTES : 1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < per; k++) {
      uint32_t w = off[i] / SMEM_BANK_BYTES + (uint32_t)k;
      bool seen = false;
      for (int j = 0; j < nwords && !seen; j++) seen = words[j] == w;
      if (!seen) words[nwords++] = w;
    }
  int count[SMEM_BANKS] = {0}, most = 1;
  for (int j = 0; j < nwords; j++) {
    int c = ++count[words[j] % SMEM_BANKS];
    if (c > most) most = c;
  }
  return most;
}

/* One warp-wide access of `width` bytes a lane: 16-byte accesses are
 * served 8 lanes at a time, 8-byte ones 16, narrower ones all 32. */
static int access_wavefronts(const uint32_t *off, int width) {
  int group = width == 16 ? 8 : width == 8 ? 16 : 32, total = 0;
  for (int g = 0; g < 32; g += group) total += group_wavefronts(off + g, group, width);
  return total;
}

static void lane_offsets(const Layout *l, const SmemLayout *sl, uint32_t *off) {
  for (uint32_t lane = 0; lane < 32; lane++) off[lane] = smem_offset(sl, layout_apply(l, 0, lane, 0));
}

int smem_store_wavefronts(const Layout *l, const SmemLayout *sl) {
  uint32_t off[32];
  lane_offsets(l, sl, off);
  int v = smem_vector_elems(l, sl);
  return (layout_regs(l) / v) * access_wavefronts(off, v * sl->elem_bytes);
}

int smem_load_wavefronts(const Layout *l, const SmemLayout *sl, bool ldsm) {
  SmemLdsm f;
  if (ldsm && smem_ldmatrix(l, sl, &f)) {
    uint32_t off[32];
    lane_offsets(&f.addr, sl, off);
    int per = 0;
    for (int m = 0; m < f.matrices; m++) per += group_wavefronts(off + SMEM_LDSM_ROWS * m, SMEM_LDSM_ROWS, 16);
    return (layout_regs(l) / f.regs) * per;
  }
  return smem_store_wavefronts(l, sl);
}

bool smem_stmatrix(const Layout *l, const SmemLayout *sl, SmemLdsm *out) {
  if (!smem_ldmatrix(l, sl, out)) return false;
  if (out->regs <= smem_vector_elems(l, sl)) return false;
  return smem_load_wavefronts(l, sl, true) <= smem_store_wavefronts(l, sl);
}

/* Whether some register constant of the address shares a bit with the
 * thread part (then the two are XORed, not added: no immediate offsets). */
static bool offsets_overlap(const Layout *l, const SmemLayout *sl, int vec) {
  uint32_t regs = 0, threads = 0;
  for (int i = log2u((uint32_t)vec); i < l->nreg; i++) regs |= smem_offset(sl, l->reg[i]);
  for (int i = 0; i < l->nlane; i++) threads |= smem_offset(sl, l->lane[i]);
  for (int i = 0; i < l->nwarp; i++) threads |= smem_offset(sl, l->warp[i]);
  return (regs & threads) != 0;
}

/* ---- the exchange layout ---- */

/* Element offsets of the flat bits when the vectors x[0..nx) come first:
 * x[j] goes to offset 1 << j, then the flat bits not yet spanned in
 * increasing order. False if the x are dependent or zero. */
static bool order_offsets(const uint32_t *x, int nx, int nbits, uint32_t *offset) {
  uint32_t rows[LAYOUT_MAX_FLAT_BITS], tags[LAYOUT_MAX_FLAT_BITS];
  int nrows = 0;
  /* reduces v against the rows (pivot: each row's highest bit) */
#define REDUCE(v, tag)                                                          \
  for (int r_ = 0; r_ < nrows; r_++)                                            \
    if ((v) >> (31 - __builtin_clz(rows[r_])) & 1u) (v) ^= rows[r_], (tag) ^= tags[r_];
  int nb = 0;
  for (int i = 0; i < nx + nbits && nb < nbits; i++) {
    uint32_t v = i < nx ? x[i] : 1u << (i - nx), tag = 1u << nb;
    if (i < nx && (v == 0 || v >> nbits)) return false;
    REDUCE(v, tag)
    if (!v) {
      if (i < nx) return false;
      continue;
    }
    /* keep rows sorted by pivot, highest first, so one pass reduces */
    int at = nrows;
    while (at > 0 && __builtin_clz(rows[at - 1]) > __builtin_clz(v)) {
      rows[at] = rows[at - 1], tags[at] = tags[at - 1];
      at--;
    }
    rows[at] = v, tags[at] = tag;
    nrows++;
    nb++;
  }
  for (int i = 0; i < nbits; i++) {
    uint32_t v = 1u << i, tag = 0;
    REDUCE(v, tag)
    offset[i] = tag; /* flat bit i = XOR of the basis vectors in tag */
  }
#undef REDUCE
  return true;
}

static void fill_layout(SmemLayout *sl, const uint32_t *elem_off, const uint32_t *swz, int nbits, int eb) {
  for (int i = 0; i < nbits; i++) {
    uint32_t o = elem_off[i], s = o;
    for (int j = 0; j < nbits; j++)
      if (o >> j & 1u) s ^= swz[j];
    sl->bit_offset[i] = s * (uint32_t)eb;
  }
}

/* Swizzle targets from the lanes of one access: each lane basis whose
 * offset has bits above the bank range gets a bank bit of its own. */
static void lane_swizzle(const uint32_t *lane_off, int nlanes, int hi, int t0, int width, uint32_t *swz, int *used,
                         uint32_t *rows, int *nrows) {
  for (int k = 0; k < nlanes && *used < width; k++) {
    uint32_t v = lane_off[k] >> hi << hi;
    for (int r = 0; r < *nrows; r++)
      if (v >> (31 - __builtin_clz(rows[r])) & 1u) v ^= rows[r];
    if (!v) continue;
    int pivot = 31 - __builtin_clz(v);
    swz[pivot] |= 1u << (t0 + (*used)++);
    rows[(*nrows)++] = v;
    /* keep pivots distinct: sort highest first */
    for (int r = *nrows - 1; r > 0 && __builtin_clz(rows[r - 1]) > __builtin_clz(rows[r]); r--) {
      uint32_t t = rows[r];
      rows[r] = rows[r - 1], rows[r - 1] = t;
    }
  }
}

/* Offsets (elements, before any swizzle) of the lane bases one access
 * serves together. */
static int access_lanes(const Layout *l, const SmemLayout *plain, bool load, bool ldsm, uint32_t *lane_off) {
  SmemLdsm f;
  const Layout *a = l;
  int n;
  if (load && ldsm && smem_ldmatrix(l, plain, &f)) {
    a = &f.addr;
    n = 3;
  } else {
    int width = smem_vector_elems(l, plain) * plain->elem_bytes;
    n = width == 16 ? 3 : width == 8 ? 4 : 5;
  }
  for (int i = 0; i < n; i++) lane_off[i] = smem_offset(plain, a->lane[i]) / (uint32_t)plain->elem_bytes;
  return n;
}

bool smem_exchange_layout(const Layout *src, const Layout *dst, int elem_bytes, bool ldsm, bool xor_addresses,
                          SmemLayout *out) {
  int nbits = layout_flat_bits(src);
  /* (only the offsets of the flat bits matter: a rank-1 tile of the size) */
  int32_t numel = 1 << nbits;
  if (nbits != layout_flat_bits(dst) || !smem_layout(1, &numel, elem_bytes, 0, out)) return false;
  int eb = elem_bytes, lg = log2u((uint32_t)eb);
  /* the orders tried */
  uint32_t orders[EXCHANGE_ORDERS][LAYOUT_LANE_BITS];
  int norder[EXCHANGE_ORDERS] = {0};
  for (int i = 0; i < src->nreg && (2 << i) * eb <= SMEM_VECTOR_BYTES; i++) orders[1][norder[1]++] = src->reg[i];
  for (int i = 0; i < dst->nreg && (2 << i) * eb <= SMEM_VECTOR_BYTES; i++) orders[2][norder[2]++] = dst->reg[i];
  if (eb == 2 && dst->nreg >= 1) {
    uint32_t plain[3] = {dst->reg[0], dst->lane[0], dst->lane[1]}, trans[3] = {dst->lane[2], dst->lane[3], dst->lane[4]};
    memcpy(orders[3], plain, sizeof plain);
    memcpy(orders[4], trans, sizeof trans);
    norder[3] = norder[4] = 3;
  }
  SmemLayout best = *out, cand = *out;
  int best_cost = -1;
  for (int o = 0; o < EXCHANGE_ORDERS; o++) {
    if (o > 0 && norder[o] == 0) continue;
    uint32_t elem_off[LAYOUT_MAX_FLAT_BITS]; /* of each flat bit, before the swizzle */
    if (!order_offsets(orders[o], norder[o], nbits, elem_off)) continue;
    uint32_t none[LAYOUT_MAX_FLAT_BITS] = {0};
    fill_layout(&cand, elem_off, none, nbits, eb);
    SmemLayout plain = cand;
    /* the bank bits a swizzle may change: above the vectors of both
     * accesses (16-byte ldmatrix rows), within bytes 4..127 */
    SmemLdsm f;
    int unit = smem_vector_elems(src, &plain), lv = ldsm && smem_ldmatrix(dst, &plain, &f)
                                                        ? SMEM_VECTOR_BYTES / eb
                                                        : smem_vector_elems(dst, &plain);
    if (lv > unit) unit = lv;
    int lo = 2 - lg > 0 ? 2 - lg : 0, hi = 7 - lg, t0 = log2u((uint32_t)unit) > lo ? log2u((uint32_t)unit) : lo;
    int width = hi - t0;
    uint32_t swz[EXCHANGE_MAX_SWIZZLES + 1][LAYOUT_MAX_FLAT_BITS];
    int nswz = 1;
    memset(swz, 0, sizeof swz);
    if (width > 0 && nbits > hi) {
      for (int s = hi; s < nbits; s++, nswz++)
        for (int i = 0; i < width && s + i < nbits; i++) swz[nswz][s + i] |= 1u << (t0 + i);
      uint32_t st[LAYOUT_LANE_BITS], ld[LAYOUT_LANE_BITS];
      int nst = access_lanes(src, &plain, false, ldsm, st), nld = access_lanes(dst, &plain, true, ldsm, ld);
      for (int v = 0; v < 4; v++, nswz++) {
        uint32_t rows[LAYOUT_MAX_FLAT_BITS];
        int nrows = 0, used = 0;
        const uint32_t *first = v & 1 ? ld : st, *second = v & 1 ? st : ld;
        int nfirst = v & 1 ? nld : nst, nsecond = v & 1 ? nst : nld;
        lane_swizzle(first, nfirst, hi, t0, width, swz[nswz], &used, rows, &nrows);
        if (v >= 2) lane_swizzle(second, nsecond, hi, t0, width, swz[nswz], &used, rows, &nrows);
      }
    }
    for (int s = 0; s < nswz; s++) {
      fill_layout(&cand, elem_off, swz[s], nbits, eb);
      /* XORed addresses take a register per distinct constant part, which
       * a kernel near its register ceiling pays in spills (the back end
       * then lowers it again without them) */
      SmemLdsm lf;
      if (!xor_addresses &&
          (offsets_overlap(src, &cand, smem_vector_elems(src, &cand)) ||
           (ldsm && smem_ldmatrix(dst, &cand, &lf) ? offsets_overlap(&lf.addr, &cand, 1)
                                                   : offsets_overlap(dst, &cand, smem_vector_elems(dst, &cand)))))
        continue;
      int cost = smem_store_wavefronts(src, &cand) + smem_load_wavefronts(dst, &cand, ldsm);
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best = cand;
      }
    }
  }
  *out = best;
  return true;
}
