/* paged_ref.h - the float64 references' view of lang/std/paged_decode.tile's
 * caches, shared by test_paged.c and test_paged_prefill.c. */
#ifndef PAGED_REF_H
#define PAGED_REF_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

/* Values per scale of an int4 cache (the kernels' INT4_GROUP default). */
#define PAGED_REF_INT4_GROUP 32

/* Element e of the key (which 0) or value (which 1) of KV head g stored
 * at element offset `at` (bytes with int4) of `cache`, dequantized: with
 * int4 the nibble of byte at + e / 2 (low for even e) minus 8 times its
 * group's scale in gscale; otherwise the element times the per-head scale
 * hscale[2 g + which] (1 for a bf16 cache). */
static inline double paged_kv_value(bool int4, const HBuf *cache, const HBuf *gscale, const HBuf *hscale, int which,
                                    int g, size_t at, int e) {
  if (int4) {
    int byte = (int)hbuf_get(cache, at + (size_t)e / 2);
    int nib = (byte >> (e % 2 * 4)) & 15;
    return (nib - 8) * hbuf_get(gscale, (at + (size_t)e / 2) / (PAGED_REF_INT4_GROUP / 2));
  }
  return hbuf_get(cache, at + (size_t)e) * hbuf_get(hscale, 2 * g + which);
}

#endif
