/* smem.c - shared-memory tile layouts (see smem.h). */
#include "smem.h"

#include <string.h>

static int log2i(int64_t v) {
  int n = 0;
  while (v > 1) {
    v >>= 1;
    n++;
  }
  return n;
}

static bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int smem_pick_swizzle(int elem_bytes, int last_dim) {
  int row = elem_bytes * last_dim;
  for (int s = SMEM_MAX_SWIZZLE; s >= 32; s /= 2)
    if (row >= s) return s;
  return 0;
}

int smem_atom_elems(const SmemLayout *s) {
  return s->swizzle ? s->swizzle / s->elem_bytes : s->shape[s->rank - 1];
}

static int64_t rows_of(const SmemLayout *s) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < s->rank; d++) rows *= s->shape[d];
  return rows;
}

uint32_t smem_atom_block_bytes(const SmemLayout *s) {
  return (uint32_t)(rows_of(s) * smem_atom_elems(s) * s->elem_bytes);
}

/* The swizzle's XOR mask on the 16-byte chunk index: chunk bits ^= row
 * bits taken from byte bits 7 and up. */
static uint32_t swizzle_mask(int swizzle) { return swizzle ? (uint32_t)(swizzle / SMEM_CHUNK_BYTES - 1) : 0; }

uint32_t smem_offset_closed_form(const SmemLayout *s, const int32_t *coords) {
  int64_t row = 0;
  for (int d = 0; d + 1 < s->rank; d++) row = row * s->shape[d] + coords[d];
  int32_t col = coords[s->rank - 1];
  if (!s->swizzle) return (uint32_t)((row * s->shape[s->rank - 1] + col) * s->elem_bytes);
  int atom = smem_atom_elems(s);
  uint32_t x = (uint32_t)(row * s->swizzle + (col % atom) * s->elem_bytes);
  x ^= ((x >> 7) & swizzle_mask(s->swizzle)) << 4;
  return (uint32_t)(col / atom) * smem_atom_block_bytes(s) + x;
}

bool smem_layout(int rank, const int32_t *shape, int elem_bytes, int swizzle, SmemLayout *out) {
  memset(out, 0, sizeof *out);
  if (rank < 1 || rank > TILE_MAX_RANK || !pow2(elem_bytes)) return false;
  if (swizzle != 0 && swizzle != 32 && swizzle != 64 && swizzle != 128) return false;
  int64_t numel = 1;
  for (int d = 0; d < rank; d++) {
    if (!pow2(shape[d])) return false;
    numel *= shape[d];
  }
  int nbits = log2i(numel);
  if (nbits > LAYOUT_MAX_FLAT_BITS) return false;
  out->rank = rank;
  memcpy(out->shape, shape, sizeof(int32_t) * (size_t)rank);
  out->elem_bytes = elem_bytes;
  out->swizzle = swizzle;
  out->nbits = nbits;
  out->bytes = (uint32_t)(numel * elem_bytes);
  if (swizzle && (int64_t)shape[rank - 1] * elem_bytes < swizzle) return false;
  /* Linear: the offset of each flat bit alone. */
  int32_t coords[TILE_MAX_RANK];
  for (int i = 0; i < nbits; i++) {
    uint32_t flat = 1u << i;
    for (int d = rank - 1; d >= 0; d--) {
      int b = log2i(shape[d]);
      coords[d] = (int32_t)(flat & ((1u << b) - 1));
      flat >>= b;
    }
    out->bit_offset[i] = smem_offset_closed_form(out, coords);
  }
  return true;
}

uint32_t smem_offset(const SmemLayout *s, uint32_t flat) {
  uint32_t off = 0;
  for (int i = 0; i < s->nbits; i++)
    if (flat >> i & 1u) off ^= s->bit_offset[i];
  return off;
}
