/* args.c - checking launch arguments against kernel metadata, and packing
 * them into the bytes cuLaunchKernel reads.
 *
 * The driver checks nothing about arguments: it copies as many bytes per
 * parameter as the kernel declares, so an i32 passed where an i64 is
 * expected, a float for an integer, or a pointer that breaks the alignment
 * the code was compiled for, becomes a wrong result or a fault far from
 * the call. tilec records what each parameter is and which facts the code
 * assumes ("align 16", "multiple_of 16"), and this file holds every launch
 * to them before anything reaches the driver. The checks are a pure
 * function (tile_check_args) so tests exercise them without a GPU.
 *
 * A descriptor parameter takes either an encoded CUtensorMap (checked for
 * NULL only) or a tile_tensor, which is held to every rule of TMA that
 * can be checked on the host (cuTensorMapEncodeTiled's documentation in
 * cuda.h) together with the box and swizzle of the metadata, so that a bad
 * tensor is reported with the argument's name here rather than as a bare
 * CUDA_ERROR_INVALID_VALUE from the encoder at launch.
 *
 * Both checking and packing run on every launch: no allocation, no lock
 * (but for the tensor-map cache of tile_arg_tensor arguments, tmap.c), one
 * pass over the parameters each.
 */
#include <float.h>
#include <stdio.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "internal.h"

/* Smallest magnitude that rounds to infinity in f32: FLT_MAX plus half an
 * ulp ((2 - 2^-24) * 2^127). */
#define F32_OVERFLOW 0x1.ffffffp+127

/* Bit layout of a double. */
#define DOUBLE_MAN_BITS 52
#define DOUBLE_EXP_MASK 0x7ff
#define DOUBLE_BIAS 1023

/* Bit layouts of the 16-bit float formats. */
#define F16_EXP_BITS 5
#define F16_MAN_BITS 10
#define BF16_EXP_BITS 8
#define BF16_MAN_BITS 7

/* TMA's limits (cuTensorMapEncodeTiled in cuda.h of CUDA 13.0). The base
 * address and every stride in bytes are multiples of 16 ... */
#define TMA_ALIGN 16
/* ... every size is at most 2^32 elements ... */
#define TMA_MAX_SIZE (INT64_C(1) << 32)
/* ... every stride is below 2^40 bytes ... */
#define TMA_STRIDE_BYTES_LIMIT (UINT64_C(1) << 40)
/* ... and a box is at most 256 elements along each dimension. */
#define TMA_MAX_BOX 256

/* ---- 16-bit floats ----------------------------------------------------- */

/* x in a binary float format of 1 + exp_bits + man_bits <= 16 bits,
 * rounded to nearest even; overflow gives infinity, NaN a quiet NaN.
 * Computed on the bits of the double: going through float first would
 * round twice, and integer arithmetic needs no libm. */
static uint16_t encode_small_float(double x, int exp_bits, int man_bits) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  unsigned sign = (unsigned)(bits >> 63) << (exp_bits + man_bits);
  unsigned inf_bits = ((1u << exp_bits) - 1) << man_bits;
  int dexp = (int)((bits >> DOUBLE_MAN_BITS) & DOUBLE_EXP_MASK);
  uint64_t fraction = bits & ((UINT64_C(1) << DOUBLE_MAN_BITS) - 1);
  if (dexp == DOUBLE_EXP_MASK) return (uint16_t)(sign | inf_bits | (fraction ? 1u << (man_bits - 1) : 0));
  if (dexp == 0) return (uint16_t)sign; /* zero, or a double subnormal: far below any subnormal here */
  int e = dexp - DOUBLE_BIAS, bias = (1 << (exp_bits - 1)) - 1, min_exp = 1 - bias;
  uint64_t sig = fraction | (UINT64_C(1) << DOUBLE_MAN_BITS); /* x = sig * 2^(e - 52) */
  /* Bits to drop: down to man_bits fraction bits, more for a subnormal. */
  int shift = DOUBLE_MAN_BITS - man_bits + (e < min_exp ? min_exp - e : 0);
  if (shift >= 64) return (uint16_t)sign; /* below a quarter of the smallest subnormal */
  uint64_t q = sig >> shift, rest = sig & ((UINT64_C(1) << shift) - 1), half = UINT64_C(1) << (shift - 1);
  if (rest > half || (rest == half && (q & 1))) q++;
  /* A normal number is (biased exponent << man_bits) + fraction, which is
   * ((e + bias - 1) << man_bits) + q since q includes the leading 1; a
   * carry out of q then correctly bumps the exponent. */
  uint64_t magnitude = e < min_exp ? q : ((uint64_t)(e + bias - 1) << man_bits) + q;
  if (magnitude >= inf_bits) return (uint16_t)(sign | inf_bits);
  return (uint16_t)(sign | (unsigned)magnitude);
}

uint16_t tilert_f16_bits(double x) { return encode_small_float(x, F16_EXP_BITS, F16_MAN_BITS); }
uint16_t tilert_bf16_bits(double x) { return encode_small_float(x, BF16_EXP_BITS, BF16_MAN_BITS); }

bool tilert_float_overflows(tile_dtype t, double x) {
  if (!isfinite(x)) return false;
  uint16_t exp_mask;
  switch (t) {
  case TILE_DTYPE_F16:
    exp_mask = ((1u << F16_EXP_BITS) - 1) << F16_MAN_BITS;
    return (tilert_f16_bits(x) & exp_mask) == exp_mask;
  case TILE_DTYPE_BF16:
    exp_mask = ((1u << BF16_EXP_BITS) - 1) << BF16_MAN_BITS;
    return (tilert_bf16_bits(x) & exp_mask) == exp_mask;
  case TILE_DTYPE_F32: return x >= F32_OVERFLOW || x <= -F32_OVERFLOW;
  default: return false;
  }
}

/* ---- parameter layout -------------------------------------------------- */

int tilert_param_size(const tile_param_info *p) {
  switch (p->kind) {
  case TILE_PARAM_PTR: return (int)sizeof(uint64_t);
  case TILE_PARAM_DESC: return TILE_DESC_BYTES;
  default: return p->elem_bytes;
  }
}

int tilert_param_align(const tile_param_info *p) {
  return p->kind == TILE_PARAM_DESC ? TILE_DESC_ALIGN : tilert_param_size(p);
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

tile_status tilert_layout_params(const tile_kernel_info *info, tilert_param_slot *slots) {
  size_t offset = 0;
  for (int i = 0; i < info->nparams; i++) {
    const tile_param_info *p = &info->params[i];
    offset = align_up(offset, (size_t)tilert_param_align(p));
    slots[i] = (tilert_param_slot){(uint16_t)offset, (uint16_t)tilert_param_size(p)};
    offset += (size_t)tilert_param_size(p);
    if (offset > TILE_MAX_PARAM_BYTES)
      return tilert_fail(TILE_ERROR_UNSUPPORTED, "kernel '%s': its parameters take more than %d bytes", info->name,
                         TILE_MAX_PARAM_BYTES);
  }
  return TILE_OK;
}

/* ---- checking ---------------------------------------------------------- */

/* Value range of each integer type (lo <= 0 for all of them). */
typedef struct int_range {
  int64_t lo;
  uint64_t hi;
} int_range;

static const int_range int_ranges[] = {
    [TILE_DTYPE_I1] = {0, 1},
    [TILE_DTYPE_I8] = {INT8_MIN, INT8_MAX},
    [TILE_DTYPE_I16] = {INT16_MIN, INT16_MAX},
    [TILE_DTYPE_I32] = {INT32_MIN, INT32_MAX},
    [TILE_DTYPE_I64] = {INT64_MIN, INT64_MAX},
    [TILE_DTYPE_U8] = {0, UINT8_MAX},
    [TILE_DTYPE_U16] = {0, UINT16_MAX},
    [TILE_DTYPE_U32] = {0, UINT32_MAX},
    [TILE_DTYPE_U64] = {0, UINT64_MAX},
};

/* What a check is looking at, for its messages. */
typedef struct check_ctx {
  const tile_kernel_info *info;
  int index;
  char *msg;
  size_t msg_size;
} check_ctx;

static tile_status arg_error(const check_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static tile_status arg_error(const check_ctx *c, const char *fmt, ...) {
  if (c->msg_size == 0) return TILE_ERROR_INVALID_ARGUMENT;
  char reason[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  tilert_format(c->msg, c->msg_size, "argument %d '%s' of kernel '%s': %s", c->index, c->info->params[c->index].name,
                c->info->name, reason);
  return TILE_ERROR_INVALID_ARGUMENT;
}

static const char *arg_kind_phrase(tile_arg_kind k) {
  switch (k) {
  case TILE_ARG_PTR: return "a pointer";
  case TILE_ARG_INT: return "an integer";
  case TILE_ARG_UINT: return "an unsigned integer";
  case TILE_ARG_FLOAT: return "a float";
  case TILE_ARG_DESC: return "a tensor descriptor";
  case TILE_ARG_TENSOR: return "a tensor";
  default: return "an argument of unknown kind";
  }
}

/* "a pointer to f32", "i32", "a tensor descriptor of bf16 (rank 2)" */
static void describe_param(const tile_param_info *p, char *buf, size_t size) {
  switch (p->kind) {
  case TILE_PARAM_PTR: tilert_format(buf, size, "a pointer to %s", p->elem); break;
  case TILE_PARAM_DESC: tilert_format(buf, size, "a tensor descriptor of %s (rank %d)", p->elem, p->desc_rank); break;
  default: tilert_format(buf, size, "%s", p->elem); break;
  }
}

static tile_status wrong_kind(const check_ctx *c, const tile_param_info *p, const tile_arg *a) {
  char expected[96];
  describe_param(p, expected, sizeof expected);
  return arg_error(c, "expected %s, got %s", expected, arg_kind_phrase(a->kind));
}

static tile_status check_ptr(const check_ctx *c, const tile_param_info *p, const tile_arg *a) {
  if (a->kind != TILE_ARG_PTR) return wrong_kind(c, p, a);
  uint64_t natural = (uint64_t)p->elem_bytes;
  if (p->align && a->ptr % (uint64_t)p->align != 0)
    return arg_error(c, "pointer 0x%" PRIx64 " is not aligned to %d bytes (the kernel was compiled for '%s align %d')",
                     a->ptr, p->align, p->name, p->align);
  if (a->ptr % natural != 0)
    return arg_error(c, "pointer 0x%" PRIx64 " is not aligned to %d bytes (the size of %s)", a->ptr, p->elem_bytes,
                     p->elem);
  return TILE_OK;
}

static tile_status check_int(const check_ctx *c, const tile_param_info *p, const tile_arg *a) {
  if (a->kind != TILE_ARG_INT && a->kind != TILE_ARG_UINT) return wrong_kind(c, p, a);
  const int_range *r = &int_ranges[p->dtype];
  bool is_signed = a->kind == TILE_ARG_INT;
  bool in_range = is_signed ? a->i >= r->lo && (a->i < 0 || (uint64_t)a->i <= r->hi) : a->u <= r->hi;
  char value[32];
  if (is_signed)
    tilert_format(value, sizeof value, "%" PRId64, a->i);
  else
    tilert_format(value, sizeof value, "%" PRIu64, a->u);
  if (!in_range)
    return arg_error(c, "value %s is out of range for %s [%" PRId64 ", %" PRIu64 "]", value, p->elem, r->lo, r->hi);
  bool multiple = !p->multiple_of || (is_signed ? a->i % p->multiple_of == 0 : a->u % (uint64_t)p->multiple_of == 0);
  if (!multiple)
    return arg_error(c, "value %s is not a multiple of %d (the kernel was compiled for '%s multiple_of %d')", value,
                     p->multiple_of, p->name, p->multiple_of);
  return TILE_OK;
}

static tile_status check_float(const check_ctx *c, const tile_param_info *p, const tile_arg *a) {
  if (a->kind != TILE_ARG_FLOAT) return wrong_kind(c, p, a);
  if (tilert_float_overflows(p->dtype, a->f)) return arg_error(c, "value %g is out of range for %s", a->f, p->elem);
  return TILE_OK;
}

/* Sizes: 1 to 2^32 elements along every dimension. */
static tile_status check_tensor_sizes(const check_ctx *c, const tile_tensor *t) {
  for (int d = 0; d < t->rank; d++)
    if (t->shape[d] < 1 || t->shape[d] > TMA_MAX_SIZE)
      return arg_error(c, "size of dimension %d is %" PRId64 ", must be from 1 to 2^32", d, t->shape[d]);
  return TILE_OK;
}

/* Strides: the innermost dimension contiguous, the others positive and, in
 * bytes, multiples of 16 below 2^40. */
static tile_status check_tensor_strides(const check_ctx *c, const tile_param_info *p, const tile_tensor *t) {
  int inner = t->rank - 1;
  if (t->strides[inner] != 1)
    return arg_error(c,
                     "stride of dimension %d is %" PRId64 " elements, must be 1 (TMA needs the last dimension "
                     "contiguous)",
                     inner, t->strides[inner]);
  uint64_t elem = (uint64_t)p->elem_bytes;
  for (int d = 0; d < inner; d++) {
    int64_t s = t->strides[d];
    if (s < 1) return arg_error(c, "stride of dimension %d is %" PRId64 " elements, must be at least 1", d, s);
    /* elem is a power of two that divides the limit: no overflow. */
    if ((uint64_t)s >= TMA_STRIDE_BYTES_LIMIT / elem)
      return arg_error(c, "stride of dimension %d is %" PRId64 " elements of %s, not below 2^40 bytes (the TMA limit)",
                       d, s, p->elem);
    if ((uint64_t)s * elem % TMA_ALIGN != 0)
      return arg_error(c,
                       "stride of dimension %d is %" PRId64 " elements (%" PRIu64 " bytes), not a multiple of 16 "
                       "bytes",
                       d, s, (uint64_t)s * elem);
  }
  return TILE_OK;
}

/* The box the kernel was compiled with: every dimension 1 to 256, the
 * innermost a multiple of 16 bytes and, when swizzled, within the swizzle
 * span. A property of the kernel, but found here where the message can
 * name the parameter. */
static tile_status check_box(const check_ctx *c, const tile_param_info *p) {
  int bad_dim = -1;
  for (int d = 0; d < p->desc_rank && bad_dim < 0; d++)
    if (p->box[d] < 1 || p->box[d] > TMA_MAX_BOX) bad_dim = d;
  int inner = p->box[p->desc_rank - 1], bytes = bad_dim < 0 ? inner * p->elem_bytes : 0;
  bool fits = bad_dim < 0 && bytes % TMA_ALIGN == 0 && (!p->swizzle || bytes <= p->swizzle);
  if (fits) return TILE_OK;
  /* The box as "64 x 64" for the message; only on failure, since this
   * check runs on every launch. */
  char box[64] = "";
  for (int d = 0; d < p->desc_rank; d++) {
    size_t used = strlen(box);
    tilert_format(box + used, sizeof box - used, "%s%d", d ? " x " : "", p->box[d]);
  }
  if (bad_dim >= 0)
    return arg_error(c, "the kernel's box %s has dimension %d of %d elements, TMA allows 1 to %d", box, bad_dim,
                     p->box[bad_dim], TMA_MAX_BOX);
  if (bytes % TMA_ALIGN != 0)
    return arg_error(c, "the kernel's box %s has an inner dimension of %d bytes (%d x %s), not a multiple of 16 bytes",
                     box, bytes, inner, p->elem);
  return arg_error(c,
                   "the kernel's box %s has an inner dimension of %d bytes (%d x %s), more than its %d-byte swizzle "
                   "span",
                   box, bytes, inner, p->elem, p->swizzle);
}

static tile_status check_tensor(const check_ctx *c, const tile_param_info *p, const tile_tensor *t) {
  if (!t) return arg_error(c, "the tile_tensor pointer is NULL");
  if (t->rank != p->desc_rank)
    return arg_error(c, "tensor of rank %d for a parameter of rank %d (tensor<%s, %d>)", t->rank, p->desc_rank, p->elem,
                     p->desc_rank);
  if (!t->ptr) return arg_error(c, "tensor base is 0 (a NULL device pointer)");
  if (t->ptr % TMA_ALIGN != 0)
    return arg_error(c, "tensor base 0x%" PRIx64 " is not aligned to 16 bytes (TMA needs a 16-byte aligned base)",
                     t->ptr);
  tile_status st = check_tensor_sizes(c, t);
  if (st == TILE_OK) st = check_tensor_strides(c, p, t);
  if (st == TILE_OK) st = check_box(c, p);
  return st;
}

static tile_status check_desc(const check_ctx *c, const tile_param_info *p, const tile_arg *a) {
  if (a->kind == TILE_ARG_TENSOR) return check_tensor(c, p, a->tensor);
  if (a->kind != TILE_ARG_DESC) return wrong_kind(c, p, a);
  if (!a->desc) return arg_error(c, "the tensor descriptor pointer is NULL");
  return TILE_OK;
}

/* A tile_kernel_info from tile_meta_parse is consistent, but
 * tile_check_args also takes one a program filled in itself: the fields the
 * checks index arrays with or divide by are checked first, so that a wrong
 * one is an error instead of a read out of bounds or a division by zero. */
static tile_status check_param_info(const check_ctx *c, const tile_param_info *p) {
  const char *problem = NULL;
  if (!p->name || !p->elem) problem = "its name or element type is NULL";
  else if ((unsigned)p->dtype > (unsigned)TILE_DTYPE_F8E5M2) problem = "its dtype is not a tile_dtype";
  else if (p->elem_bytes < 1 || p->elem_bytes > 8) problem = "its elem_bytes is not 1 to 8";
  else if (p->kind == TILE_PARAM_INT && !tilert_dtype(p->dtype)->is_int)
    problem = "an integer parameter has a non-integer dtype";
  else if (p->kind == TILE_PARAM_INT && p->multiple_of < 0) problem = "its multiple_of is negative";
  else if (p->kind == TILE_PARAM_PTR && p->align < 0) problem = "its align is negative";
  else if (p->kind == TILE_PARAM_DESC && (p->desc_rank < 1 || p->desc_rank > TILE_DESC_MAX_RANK))
    problem = "its desc_rank is not 1 to 4";
  if (!problem) return TILE_OK;
  tilert_format(c->msg, c->msg_size, "parameter %d of kernel '%s': inconsistent tile_param_info (%s)", c->index,
                c->info->name, problem);
  return TILE_ERROR_INVALID_ARGUMENT;
}

static tile_status check_arg(const check_ctx *c, const tile_param_info *p, const tile_arg *a) {
  tile_status st = check_param_info(c, p);
  if (st != TILE_OK) return st;
  switch (p->kind) {
  case TILE_PARAM_PTR: return check_ptr(c, p, a);
  case TILE_PARAM_INT: return check_int(c, p, a);
  case TILE_PARAM_FLOAT: return check_float(c, p, a);
  case TILE_PARAM_DESC: return check_desc(c, p, a);
  }
  return arg_error(c, "parameter has an unknown kind %d", (int)p->kind);
}

static tile_status check_grid(const tile_kernel_info *info, const uint32_t grid[3], const uint32_t max_grid[3],
                              char *msg, size_t msg_size) {
  static const char axes[] = "xyz";
  for (int d = 0; d < 3; d++) {
    if (grid[d] >= 1 && grid[d] <= max_grid[d]) continue;
    tilert_format(msg, msg_size, "grid (%u, %u, %u) of kernel '%s': size in %c is %u, %s %u", grid[0], grid[1], grid[2],
                  info->name, axes[d], grid[d], grid[d] < 1 ? "must be at least" : "above the device limit",
                  grid[d] < 1 ? 1u : max_grid[d]);
    return TILE_ERROR_INVALID_ARGUMENT;
  }
  if (info->cluster > 1 && grid[0] % (uint32_t)info->cluster) {
    tilert_format(msg, msg_size,
                  "grid (%u, %u, %u) of kernel '%s': size in x is %u, not a multiple of its cluster size %d", grid[0],
                  grid[1], grid[2], info->name, grid[0], info->cluster);
    return TILE_ERROR_INVALID_ARGUMENT;
  }
  return TILE_OK;
}

tile_status tilert_check_args(const tile_kernel_info *info, const uint32_t grid[3], const uint32_t max_grid[3],
                              const tile_arg *args, int nargs, char *msg, size_t msg_size) {
  if (!info || !grid || (nargs > 0 && !args) || !info->name || (info->nparams > 0 && !info->params)) {
    const char *what = !info                   ? "info"
                       : !grid                 ? "grid"
                       : (nargs > 0 && !args)  ? "args"
                       : !info->name           ? "info->name"
                                               : "info->params";
    tilert_format(msg, msg_size, "tile_check_args: %s is NULL", what);
    return TILE_ERROR_INVALID_ARGUMENT;
  }
  tile_status st = check_grid(info, grid, max_grid, msg, msg_size);
  if (st != TILE_OK) return st;
  if (nargs != info->nparams) {
    tilert_format(msg, msg_size, "kernel '%s' takes %d argument%s, got %d", info->name, info->nparams,
                  info->nparams == 1 ? "" : "s", nargs);
    return TILE_ERROR_INVALID_ARGUMENT;
  }
  check_ctx c = {info, 0, msg, msg_size};
  for (c.index = 0; c.index < nargs; c.index++) {
    st = check_arg(&c, &info->params[c.index], &args[c.index]);
    if (st != TILE_OK) return st;
  }
  return TILE_OK;
}

tile_status tile_check_args(const tile_kernel_info *info, const uint32_t grid[3], const tile_arg *args, int nargs,
                            char *msg, size_t msg_size) {
  static const uint32_t cuda_grid_limits[3] = {TILE_GRID_MAX_X, TILE_GRID_MAX_YZ, TILE_GRID_MAX_YZ};
  return tilert_check_args(info, grid, cuda_grid_limits, args, nargs, msg, msg_size);
}

/* ---- packing ----------------------------------------------------------- */

static void write_int(unsigned char *dst, uint64_t v, int bytes) {
  uint8_t v8 = (uint8_t)v;
  uint16_t v16 = (uint16_t)v;
  uint32_t v32 = (uint32_t)v;
  switch (bytes) {
  case 1: memcpy(dst, &v8, 1); break;
  case 2: memcpy(dst, &v16, 2); break;
  case 4: memcpy(dst, &v32, 4); break;
  default: memcpy(dst, &v, 8); break;
  }
}

static void write_float(unsigned char *dst, double x, tile_dtype t) {
  uint16_t h;
  float f;
  switch (t) {
  case TILE_DTYPE_F16:
    h = tilert_f16_bits(x);
    memcpy(dst, &h, 2);
    break;
  case TILE_DTYPE_BF16:
    h = tilert_bf16_bits(x);
    memcpy(dst, &h, 2);
    break;
  /* In range: checked before packing (tilert_float_overflows). */
  case TILE_DTYPE_F32:
    f = (float)x;
    memcpy(dst, &f, 4);
    break;
  default: memcpy(dst, &x, 8); break;
  }
}

static void write_arg(unsigned char *dst, const tile_param_info *p, const tile_arg *a) {
  switch (p->kind) {
  case TILE_PARAM_PTR: memcpy(dst, &a->ptr, sizeof a->ptr); break;
  case TILE_PARAM_DESC: memcpy(dst, a->desc, TILE_DESC_BYTES); break;
  case TILE_PARAM_INT: write_int(dst, a->kind == TILE_ARG_INT ? (uint64_t)a->i : a->u, p->elem_bytes); break;
  case TILE_PARAM_FLOAT: write_float(dst, a->f, p->dtype); break;
  }
}

tile_status tilert_pack_args(const tile_kernel_info *info, const tilert_param_slot *slots, tilert_tmap_cache *tmaps,
                             const tile_arg *args, unsigned char *buf, void **params) {
  for (int i = 0; i < info->nparams; i++) {
    unsigned char *dst = buf + slots[i].offset;
    if (args[i].kind == TILE_ARG_TENSOR) {
      tile_status st = tilert_tmap_get(tmaps, info, i, args[i].tensor, dst);
      if (st != TILE_OK) return st;
    } else {
      write_arg(dst, &info->params[i], &args[i]);
    }
    params[i] = dst;
  }
  return TILE_OK;
}
