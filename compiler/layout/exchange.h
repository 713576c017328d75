/* exchange.h - register tiles and shared memory: vector widths, the
 * ldmatrix forms, bank conflicts, and the scratch layout of a conversion.
 *
 * A register tile in layout l is written to (or read from) a shared tile
 * laid out by a SmemLayout sl; both are linear over GF(2), so the byte
 * offset of register r of thread (lane, warp) is the XOR of sl's offsets
 * of the set bases. Three questions follow, answered here without any
 * code generation so that they can be tested on the CPU:
 *
 *   - how many consecutive registers move with one st/ld.shared
 *     (smem_vector_elems);
 *   - whether ldmatrix (8x8 matrices of 16-bit elements, rows of 16
 *     bytes) delivers the layout, plain or transposed (smem_ldmatrix);
 *   - how many shared-memory wavefronts a warp's accesses take (bank
 *     conflicts: 32 banks of 4 bytes; 16-byte accesses are served 8 lanes
 *     at a time, 8-byte ones 16 at a time).
 *
 * A layout conversion through scratch memory may lay the scratch tile out
 * as it likes (any bijection of the flat index that is linear); the
 * exchange layout is chosen among candidates (row-major, the source's or
 * the destination's vectors first, the ldmatrix rows, each with XOR
 * swizzles of the bank bits) by the fewest wavefronts of the store and the
 * load together.
 */
#ifndef TILE_LAYOUT_EXCHANGE_H
#define TILE_LAYOUT_EXCHANGE_H

#include <stdbool.h>

#include "layout.h"
#include "smem.h"

/* The widest ld.shared / st.shared: 16 bytes (v4.b32). */
#define SMEM_VECTOR_BYTES 16
/* Shared memory: 32 banks of 4 bytes. */
#define SMEM_BANKS 32
#define SMEM_BANK_BYTES 4
/* ldmatrix moves 8x8 matrices of 16-bit elements, 1, 2 or 4 at a time. */
#define SMEM_LDSM_ROWS 8
#define SMEM_LDSM_MAX_MATRICES 4

typedef enum SmemLdsmKind {
  SMEM_LDSM_NONE,
  SMEM_LDSM_PLAIN, /* register pair (row l/4, columns 2(l%4) + {0,1}) of each matrix */
  SMEM_LDSM_TRANS, /* register pair (rows 2(l%4) + {0,1}, column l/4) */
} SmemLdsmKind;

typedef struct SmemLdsm {
  SmemLdsmKind kind;
  int matrices;   /* per instruction: 1, 2 or 4 */
  int regs;       /* elements per thread per instruction: 2 * matrices */
  /* Which element's row each lane addresses: register bits = instruction
   * index, lane bits 0-2 = row of the matrix, lane bits 3-4 = matrix
   * (zero bases where the instruction has fewer matrices). Same warp bases
   * as the layout. */
  Layout addr;
} SmemLdsm;

/* Registers moved by one access: the largest power of two whose bytes fit
 * SMEM_VECTOR_BYTES, whose registers land on consecutive bytes in order
 * and whose first byte no other basis moves off alignment. */
int smem_vector_elems(const Layout *l, const SmemLayout *sl);

/* Whether ldmatrix reads layout l from sl (16-bit elements only): the
 * three bases of a 16-byte matrix row must land on bytes 2, 4 and 8, and
 * every other basis on multiples of 16. */
bool smem_ldmatrix(const Layout *l, const SmemLayout *sl, SmemLdsm *out);

/* Whether stmatrix (the store form of ldmatrix: same matrices, same
 * register pairs, same row addresses) writes layout l into sl better than
 * st.shared: the ldmatrix form exists, moves more registers per
 * instruction than the widest st.shared does, and takes no more
 * wavefronts. */
bool smem_stmatrix(const Layout *l, const SmemLayout *sl, SmemLdsm *out);

/* Wavefronts of one warp (warp 0) writing or reading the whole tile: the
 * number of accesses times the wavefronts of one (by linearity every
 * access of the tile conflicts alike). Loads use ldmatrix where it
 * applies and `ldsm` is set. */
int smem_store_wavefronts(const Layout *l, const SmemLayout *sl);
int smem_load_wavefronts(const Layout *l, const SmemLayout *sl, bool ldsm);

/* The scratch layout for converting a tile from `src` to `dst` (same
 * element count): offsets in [0, numel * elem_bytes), a bijection, chosen
 * by the fewest wavefronts of smem_store_wavefronts(src) +
 * smem_load_wavefronts(dst) among the candidates. A candidate whose
 * register offsets share bits with its thread offsets (so that addresses
 * are XORed, a register per distinct constant, instead of immediate
 * offsets) is taken only with `xor_addresses`. False when the layouts
 * have different sizes. */
bool smem_exchange_layout(const Layout *src, const Layout *dst, int elem_bytes, bool ldsm, bool xor_addresses,
                          SmemLayout *out);

#endif
