/* masks.h - a warning for masks of loads, stores and atomics that are
 * true for every element (masks.c). */
#ifndef TILE_ANALYSIS_MASKS_H
#define TILE_ANALYSIS_MASKS_H

#include "../ir/ir.h"

/* Warns once per source location about each mask of m's kernels that is
 * a comparison (or an && of comparisons) true for every element by the
 * integer ranges of its operands. */
void warn_constant_masks(const Module *m, Diags *d);

#endif
