/* paged_variants.h - the builds of lang/std/paged_decode.tile embedded in
 * libtile_attention (runtime/attention/meson.build makes one header per
 * line of this table: head dim, page size, cache type). */
#ifndef TILE_PAGED_VARIANTS_H
#define TILE_PAGED_VARIANTS_H

#include "tile.h"

#include "paged_d64_p1.h"
#include "paged_d64_p1_e4m3.h"
#include "paged_d64_p1_int4.h"
#include "paged_d64_p16.h"
#include "paged_d64_p16_e4m3.h"
#include "paged_d64_p16_int4.h"
#include "paged_d64_p32.h"
#include "paged_d64_p32_e4m3.h"
#include "paged_d64_p32_int4.h"
#include "paged_d64_p64.h"
#include "paged_d64_p64_e4m3.h"
#include "paged_d64_p64_int4.h"
#include "paged_d128_p1.h"
#include "paged_d128_p1_e4m3.h"
#include "paged_d128_p1_int4.h"
#include "paged_d128_p16.h"
#include "paged_d128_p16_e4m3.h"
#include "paged_d128_p16_int4.h"
#include "paged_d128_p32.h"
#include "paged_d128_p32_e4m3.h"
#include "paged_d128_p32_int4.h"
#include "paged_d128_p64.h"
#include "paged_d128_p64_e4m3.h"
#include "paged_d128_p64_int4.h"

#define PAGED_VARIANTS 24

static const struct {
  int head_dim, page, kv_type; /* kv_type: tile_paged_kv_type */
  tile_status (*load)(tile_runtime *, tile_module **);
} paged_variants[PAGED_VARIANTS] = {
    {64, 1, 0, paged_d64_p1_load},
    {64, 1, 1, paged_d64_p1_e4m3_load},
    {64, 1, 2, paged_d64_p1_int4_load},
    {64, 16, 0, paged_d64_p16_load},
    {64, 16, 1, paged_d64_p16_e4m3_load},
    {64, 16, 2, paged_d64_p16_int4_load},
    {64, 32, 0, paged_d64_p32_load},
    {64, 32, 1, paged_d64_p32_e4m3_load},
    {64, 32, 2, paged_d64_p32_int4_load},
    {64, 64, 0, paged_d64_p64_load},
    {64, 64, 1, paged_d64_p64_e4m3_load},
    {64, 64, 2, paged_d64_p64_int4_load},
    {128, 1, 0, paged_d128_p1_load},
    {128, 1, 1, paged_d128_p1_e4m3_load},
    {128, 1, 2, paged_d128_p1_int4_load},
    {128, 16, 0, paged_d128_p16_load},
    {128, 16, 1, paged_d128_p16_e4m3_load},
    {128, 16, 2, paged_d128_p16_int4_load},
    {128, 32, 0, paged_d128_p32_load},
    {128, 32, 1, paged_d128_p32_e4m3_load},
    {128, 32, 2, paged_d128_p32_int4_load},
    {128, 64, 0, paged_d128_p64_load},
    {128, 64, 1, paged_d128_p64_e4m3_load},
    {128, 64, 2, paged_d128_p64_int4_load},
};

#endif
