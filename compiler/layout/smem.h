/* smem.h - layouts of tiles in shared memory, as the tensor cores and the
 * TMA engine read and write them.
 *
 * A shared tile keeps its last dimension contiguous. With a swizzle of S
 * bytes (32, 64 or 128), the last dimension is cut into "atoms" of S bytes
 * (S / elem_bytes elements); atom j of every row is stored in block j of
 * the buffer, one S-byte row per tile row (all dimensions but the last
 * count as rows), and inside a block the 16-byte chunks of each S-byte
 * row are XORed with bits of the row number:
 *     128B: byte bits [4:6] ^= bits [7:9]   (repeats every 1024 bytes)
 *      64B: byte bits [4:5] ^= bits [7:8]   (every 512 bytes)
 *      32B: byte bit  4     ^= bit  7       (every 256 bytes)
 * This is exactly what a TMA box of [rows, S / elem_bytes] with the same
 * swizzle writes at the block's address (boxes of a wider tile land in
 * consecutive blocks), and the canonical layout wgmma descriptors
 * describe (K-major: SBO = 8 rows; MN-major: LBO = one block). Without a
 * swizzle the tile is plain row-major.
 *
 * Every piece is a bit placement or an XOR of bits, so the byte offset is
 * a linear map over GF(2) of the element's flat index: `bit_offset[i]` is
 * the offset of flat index 1 << i, and any offset is the XOR of those of
 * its set bits. The lowering uses this to split an address into a
 * per-thread part (computed once) and per-register constants.
 */
#ifndef TILE_LAYOUT_SMEM_H
#define TILE_LAYOUT_SMEM_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"

/* The widest swizzle: a 128-byte row; its pattern repeats every 1024
 * bytes, which is the alignment swizzled buffers get. */
#define SMEM_MAX_SWIZZLE 128
#define SMEM_SWIZZLE_ALIGN 1024
/* The XOR acts on 16-byte chunks. */
#define SMEM_CHUNK_BYTES 16

typedef struct SmemLayout {
  int rank;
  int32_t shape[TILE_MAX_RANK];
  int elem_bytes;
  int swizzle;      /* 0, 32, 64 or 128 */
  int nbits;        /* flat-index bits: log2(number of elements) */
  uint32_t bit_offset[LAYOUT_MAX_FLAT_BITS];
  uint32_t bytes;   /* size of the tile */
} SmemLayout;

/* The swizzle the compiler picks for a tile whose last dimension has
 * `last_dim` elements: the widest of 128/64/32 bytes that the row fills,
 * 0 below 32 bytes. */
int smem_pick_swizzle(int elem_bytes, int last_dim);
/* The layout of a tile (shape powers of two, last dimension at least one
 * atom when swizzled). False for an impossible combination. */
bool smem_layout(int rank, const int32_t *shape, int elem_bytes, int swizzle, SmemLayout *out);
/* Byte offset of flat index `flat` (row-major). */
uint32_t smem_offset(const SmemLayout *s, uint32_t flat);
/* The closed form the layout implements, element by element (for tests
 * and for reading): coords are the tile coordinates. */
uint32_t smem_offset_closed_form(const SmemLayout *s, const int32_t *coords);
/* Elements per atom row (S / elem_bytes), or the last dimension when not
 * swizzled. */
int smem_atom_elems(const SmemLayout *s);
/* Bytes of one atom block: rows x S (the whole tile when not swizzled). */
uint32_t smem_atom_block_bytes(const SmemLayout *s);

#endif
