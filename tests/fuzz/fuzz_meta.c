/* fuzz_meta.c - libFuzzer target over libtile's metadata parser and launch
 * checks, which need no GPU: the input up to its first NUL byte is
 * metadata text for tile_meta_parse; when it parses, the bytes after the
 * NUL describe a grid and one argument per parameter (sometimes one more
 * or one fewer), checked with tile_check_args and, when they pass, laid
 * out and packed as a launch would (tensor arguments through the
 * tensor-map cache with an encoder that only reports success). Any crash,
 * sanitizer report, leak or timeout is a bug; rejected metadata and
 * arguments are expected. Seeds: tests/fuzz/corpus/fuzz_meta. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The bytes after the NUL, read in order; zeros once they run out. */
typedef struct Reader {
  const uint8_t *p;
  size_t left;
} Reader;

static uint64_t read_bytes(Reader *r, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) {
    v |= (uint64_t)(r->left ? *r->p : 0) << (8 * i);
    if (r->left) r->p++, r->left--;
  }
  return v;
}

/* An argument value: 8 bytes, or (byte 0 below 16) a small number, which
 * passes more checks than random bits do. */
static uint64_t read_value(Reader *r) {
  uint64_t tag = read_bytes(r, 1);
  return tag < 16 ? read_bytes(r, 1) << (tag % 8) : read_bytes(r, 8);
}

/* A tensor: the rank, then sizes and strides; the base 16-byte aligned
 * unless the reader says otherwise. */
static void read_tensor(Reader *r, tile_tensor *t) {
  memset(t, 0, sizeof *t);
  t->rank = (int)(read_bytes(r, 1) % (TILE_DESC_MAX_RANK + 2));
  t->ptr = read_value(r);
  for (int d = 0; d < TILE_DESC_MAX_RANK; d++) {
    t->shape[d] = (int64_t)read_value(r);
    t->strides[d] = (int64_t)read_value(r);
  }
}

static CUresult encode_ok(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank, void *address,
                          const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                          const cuuint32_t *element_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  (void)dtype, (void)address, (void)strides, (void)interleave, (void)swizzle, (void)l2, (void)oob;
  memset(map, 0, sizeof *map);
  for (cuuint32_t i = 0; i < rank; i++) (void)(dims[i] + box[i] + element_strides[i]); /* read them */
  return CUDA_SUCCESS;
}

static void pack(const tile_kernel_info *info, const tile_arg *args) {
  tilert_param_slot slots[TILE_MAX_PARAMS];
  if (tilert_layout_params(info, slots) != TILE_OK) return;
  tilert_tmap_cache *tmaps = NULL;
  if (tilert_has_desc_params(info) &&
      tilert_tmap_cache_create(&tilert_default_allocator, encode_ok, NULL, &tmaps) != TILE_OK)
    return;
  _Alignas(TILE_DESC_ALIGN) unsigned char buf[TILE_MAX_PARAM_BYTES];
  void *params[TILE_MAX_PARAMS];
  (void)tilert_pack_args(info, slots, tmaps, args, buf, params);
  /* Twice: the second lookup of each tensor hits the cache. */
  (void)tilert_pack_args(info, slots, tmaps, args, buf, params);
  tilert_tmap_cache_destroy(tmaps);
}

static void check(const tile_kernel_info *info, Reader *r) {
  uint32_t grid[3];
  for (int d = 0; d < 3; d++) grid[d] = (uint32_t)read_value(r);
  int extra = (int)(read_bytes(r, 1) % 3) - 1; /* one argument fewer, none, or one more */
  int nargs = info->nparams + (extra < 0 && info->nparams == 0 ? 0 : extra);
  tile_arg args[TILE_MAX_PARAMS + 1];
  tile_tensor tensors[TILE_MAX_PARAMS + 1];
  static const unsigned char descriptor[TILE_DESC_BYTES];
  for (int i = 0; i < nargs; i++) {
    args[i].kind = (tile_arg_kind)(read_bytes(r, 1) % 7); /* 6 is no kind at all */
    args[i].u = read_value(r);
    if (args[i].kind == TILE_ARG_DESC) args[i].desc = read_bytes(r, 1) % 2 ? descriptor : NULL;
    if (args[i].kind == TILE_ARG_TENSOR) {
      read_tensor(r, &tensors[i]);
      args[i].tensor = read_bytes(r, 1) % 8 ? &tensors[i] : NULL;
    }
  }
  char msg[256];
  size_t msg_size = read_bytes(r, 1) % 4 == 0 ? read_bytes(r, 1) % 8 : sizeof msg;
  tile_status st = tile_check_args(info, grid, args, nargs, msg, msg_size);
  if (st == TILE_OK && nargs == info->nparams) pack(info, args);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t text_len = nul ? (size_t)(nul - data) : size;
  char *text = malloc(text_len + 1);
  if (!text) return 0;
  memcpy(text, data, text_len);
  text[text_len] = '\0';
  tile_kernel_info *info = NULL;
  if (tile_meta_parse(text, &info) == TILE_OK) {
    Reader r = {nul ? nul + 1 : data + size, nul ? size - text_len - 1 : 0};
    check(info, &r);
    tile_meta_free(info);
  }
  free(text);
  return 0;
}
