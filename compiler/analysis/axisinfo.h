/* axisinfo.h - alignment, contiguity and constancy of integer and pointer
 * tiles (Triton's AxisInfo idea), computed from the signature's facts
 * (`align(N)`, `multiple_of(N)`), constants and `arange` arithmetic.
 *
 * For each dimension d of a value:
 *   contiguity[d]  the values come in runs of this many elements along d
 *                  that increase by exactly 1 (by one element for pointers);
 *   divisibility[d] the first value of every such run is a multiple of this
 *                  power of two (in bytes for pointers, in units otherwise);
 *   constancy[d]   the values come in runs of this many equal elements
 *                  along d, each run starting at a multiple of it.
 * All three are powers of two, at least 1, at most the dimension (for
 * divisibility: up to AXIS_MAX_DIVISIBILITY). The GPU back end uses them to
 * turn contiguous aligned pointer tiles into 16-byte vector loads and
 * stores, and masks that are constant over a vector into one predicate.
 *
 * Details:
 *   - runs are aligned: along d they cover indices [k*c, (k+1)*c);
 *   - the facts along d hold for every fixed position in the other
 *     dimensions; along a dimension of contiguity 1 the divisibility
 *     therefore holds for every element;
 *   - a rank-0 value (a scalar) is described as one dimension of size 1:
 *     slot 0 holds its divisibility (contiguity and constancy 1); slots at
 *     and beyond the rank (1 and up for scalars) are always 1;
 *   - contiguity is modulo 2^bits of the type (what address arithmetic
 *     needs); integer runs are at most half the type's range long;
 *   - facts of float and i1 values: only constancy means something
 *     (contiguity and divisibility are 1);
 *   - like Triton, the analysis assumes that index arithmetic on
 *     non-negative values (program ids, aranges, sums and products of them)
 *     does not overflow; it only matters for signed division, remainder and
 *     widening casts.
 */
#ifndef TILE_AXISINFO_H
#define TILE_AXISINFO_H

#include "../ir/ir.h"

/* Divisibility is capped here: nothing needs more than this alignment. */
#define AXIS_MAX_DIVISIBILITY (1 << 12)

typedef struct AxisInfo {
  int64_t contiguity[TILE_MAX_RANK];
  int64_t divisibility[TILE_MAX_RANK];
  int64_t constancy[TILE_MAX_RANK];
} AxisInfo;

typedef struct AxisAnalysis AxisAnalysis;

/* Analyzes a verified function (loop-carried values get the conservative
 * meet of their init and their yields, iterated to a fixpoint). The result
 * lives in the arena and is keyed by Value pointers (Value.id is not
 * touched); it describes f as it was: rerun it after changing f. */
AxisAnalysis *axis_analyze(const Func *f, Arena *arena);
/* The facts for a value of f (any value: block arguments too); a value the
 * analysis did not see gets the conservative answer (all 1). */
AxisInfo axis_info(const AxisAnalysis *a, const Value *v);

/* The widest vector (in elements) for an access through pointer tile
 * `ptr` along its last dimension, given that each thread holds `per_thread`
 * consecutive elements there: min of the pointer's contiguity, its
 * alignment over the element size, 16 bytes, and per_thread. If `mask` is
 * not NULL its constancy along the last dimension also bounds it. */
int axis_vector_width(const AxisAnalysis *a, const Value *ptr, const Value *mask, int per_thread);

#endif
