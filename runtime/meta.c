/* meta.c - the parser of kernel metadata text (version 1).
 *
 * tilec stores, beside each kernel, a NUL-terminated text global
 * __tile_meta_<kernel> saying how to launch it: warps, dynamic shared
 * memory, and each parameter's kind and type with the facts the code was
 * compiled to assume (alignment, divisibility, descriptor boxes). Text
 * rather than a binary struct so that it can be read in a PTX dump and
 * extended by adding line kinds. The format (see runtime/README.md):
 *
 *     tile-kernel 1
 *     name softmax
 *     warps 4
 *     shared 0
 *     param out ptr f32 align 16
 *     param n i32 multiple_of 16
 *     param eps f32
 *     param q desc bf16 2 box 64 64 swizzle 128
 *     const BLOCK i32 1024
 *     end
 *
 * One item per line, fields separated by single spaces. The parser is
 * strict (unknown lines, empty fields, duplicates and text after 'end' are
 * errors) because the only writer is the compiler, and a mismatch between
 * the two should fail loudly at kernel lookup rather than as a wrong
 * launch. The result is one allocation: the tile_kernel_info, its arrays,
 * and a copy of the text whose fields the strings point into.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Most fields on one line: "param q desc T 4 box a b c d swizzle S" is 12;
 * room for a few options more. */
#define META_MAX_FIELDS 16

/* 1024 threads per block / 32 threads per warp. */
#define META_MAX_WARPS 32

/* 16 MiB, far above any GPU's shared memory per block (227 KiB on
 * Hopper): a larger number is garbage, not a kernel the device rejects. */
#define META_MAX_SHARED (16u * 1024u * 1024u)

/* Programs per cluster: 8 is the portable cluster size of sm_90. */
#define META_MAX_CLUSTER 8

/* Alignment facts beyond a page are promises no allocator keeps. */
#define META_MAX_ALIGN 4096

/* Largest "multiple_of": fits an i32 parameter's positive range. */
#define META_MAX_MULTIPLE (1u << 30)

/* TMA box dimensions are at most 256 elements (cuTensorMapEncodeTiled). */
#define META_MAX_BOX 256

/* TMA swizzle modes, in bytes (0 = none). */
static const int swizzle_modes[] = {0, 32, 64, 128};
#define META_MAX_SWIZZLE 128

/* ---- element types ----------------------------------------------------- */

static const tilert_dtype_info dtypes[] = {
    [TILE_DTYPE_I1] = {"i1", 1, true, false, false},        [TILE_DTYPE_I8] = {"i8", 1, true, false, true},
    [TILE_DTYPE_I16] = {"i16", 2, true, false, true},       [TILE_DTYPE_I32] = {"i32", 4, true, false, true},
    [TILE_DTYPE_I64] = {"i64", 8, true, false, true},       [TILE_DTYPE_U8] = {"u8", 1, true, false, false},
    [TILE_DTYPE_U16] = {"u16", 2, true, false, false},      [TILE_DTYPE_U32] = {"u32", 4, true, false, false},
    [TILE_DTYPE_U64] = {"u64", 8, true, false, false},      [TILE_DTYPE_F16] = {"f16", 2, false, true, true},
    [TILE_DTYPE_BF16] = {"bf16", 2, false, true, true},     [TILE_DTYPE_F32] = {"f32", 4, false, true, true},
    [TILE_DTYPE_F64] = {"f64", 8, false, true, true},       [TILE_DTYPE_F8E4M3] = {"f8e4m3", 1, false, true, true},
    [TILE_DTYPE_F8E5M2] = {"f8e5m2", 1, false, true, true},
};

#define DTYPE_COUNT ((int)(sizeof dtypes / sizeof dtypes[0]))

const tilert_dtype_info *tilert_dtype(tile_dtype t) { return &dtypes[t]; }

static bool dtype_from_name(const char *s, tile_dtype *out) {
  for (int i = 0; i < DTYPE_COUNT; i++) {
    if (strcmp(dtypes[i].name, s) == 0) {
      *out = (tile_dtype)i;
      return true;
    }
  }
  return false;
}

/* f8 types exist only in memory: no scalar parameter has them. */
static bool is_scalar_dtype(tile_dtype t) { return t != TILE_DTYPE_F8E4M3 && t != TILE_DTYPE_F8E5M2; }

/* ---- the result block -------------------------------------------------- */

/* The single allocation behind a parsed tile_kernel_info. */
typedef struct meta_block {
  tilert_allocator alloc;
  size_t size;
  tile_kernel_info info;
} meta_block;

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static meta_block *block_of(tile_kernel_info *info) {
  return (meta_block *)((char *)info - offsetof(meta_block, info));
}

void tile_meta_free(tile_kernel_info *info) {
  if (!info) return;
  meta_block *b = block_of(info);
  tilert_allocator a = b->alloc;
  tilert_free(&a, b, b->size);
}

/* ---- the parser -------------------------------------------------------- */

typedef struct meta_parser {
  char *cursor; /* start of the next line in the text copy */
  int line;     /* number of the current line, from 1 */
  char *fields[META_MAX_FIELDS];
  int nfields;
  tile_kernel_info *info;
  tile_param_info *params; /* capacity: counted before parsing */
  int param_capacity;
  tile_const_info *consts;
  int const_capacity;
  bool seen_name, seen_warps, seen_shared, seen_cluster, seen_end;
} meta_parser;

static tile_status meta_error(const meta_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static tile_status meta_error(const meta_parser *p, const char *fmt, ...) {
  char reason[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  return tilert_fail(TILE_ERROR_BAD_METADATA, "metadata line %d: %s", p->line, reason);
}

/* Unsigned decimal without sign or leading zeros, at most max. */
static bool parse_number(const char *s, uint64_t max, uint64_t *out) {
  if (!*s || (s[0] == '0' && s[1])) return false;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return false;
    unsigned d = (unsigned)(*s - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static bool is_identifier(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= TILE_MAX_NAME) return false;
  if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

/* Cuts the next line out of the text and splits it into fields. Returns
 * false at the end of the text. */
static bool next_line(meta_parser *p) {
  if (*p->cursor == '\0') return false;
  char *line = p->cursor;
  char *nl = strchr(line, '\n');
  if (nl) {
    *nl = '\0';
    p->cursor = nl + 1;
  } else {
    p->cursor = line + strlen(line);
  }
  p->line++;
  p->nfields = 0;
  for (char *f = line;;) {
    if (p->nfields < META_MAX_FIELDS) p->fields[p->nfields] = f;
    p->nfields++;
    char *sp = strchr(f, ' ');
    if (!sp) break;
    *sp = '\0';
    f = sp + 1;
  }
  return true;
}

/* No field the compiler writes holds a control character. A carriage
 * return is singled out: it is what a CRLF conversion of the text leaves
 * at the end of every line, and without a message of its own the first
 * error would be a puzzling "version '1' is not supported". */
static tile_status check_characters(const meta_parser *p, int field) {
  for (const unsigned char *c = (const unsigned char *)p->fields[field]; *c; c++) {
    if (*c == '\r') return meta_error(p, "carriage return (CRLF line ends are not accepted)");
    if (*c < 0x20 || *c == 0x7f) return meta_error(p, "control character 0x%02x in field %d", *c, field + 1);
  }
  return TILE_OK;
}

static tile_status check_fields(const meta_parser *p) {
  if (p->nfields > META_MAX_FIELDS) return meta_error(p, "more than %d fields", META_MAX_FIELDS);
  for (int i = 0; i < p->nfields; i++) {
    tile_status st = check_characters(p, i);
    if (st != TILE_OK) return st;
  }
  if (p->nfields == 1 && p->fields[0][0] == '\0') return meta_error(p, "empty line");
  for (int i = 0; i < p->nfields; i++)
    if (p->fields[i][0] == '\0') return meta_error(p, "empty field %d (fields are separated by single spaces)", i + 1);
  return TILE_OK;
}

static tile_status expect_fields(const meta_parser *p, int n, const char *usage) {
  if (p->nfields != n) return meta_error(p, "expected '%s', got %d fields", usage, p->nfields);
  return TILE_OK;
}

/* A field that must be a number in [min, max]. */
static tile_status number_field(const meta_parser *p, int i, const char *what, uint64_t min, uint64_t max,
                                uint64_t *out) {
  if (i >= p->nfields) return meta_error(p, "%s is missing", what);
  uint64_t v = 0; /* *out is written only with a value in range: callers use it whatever the status */
  if (!parse_number(p->fields[i], UINT64_MAX, &v) || v < min || v > max)
    return meta_error(p, "bad %s '%s' (expected a number from %llu to %llu)", what, p->fields[i],
                      (unsigned long long)min, (unsigned long long)max);
  *out = v;
  return TILE_OK;
}

static tile_status parse_header(meta_parser *p) {
  if (strcmp(p->fields[0], "tile-kernel") != 0)
    return meta_error(p, "expected 'tile-kernel %d' (this is not tile kernel metadata)", TILE_META_VERSION);
  if (p->nfields != 2) return expect_fields(p, 2, "tile-kernel VERSION");
  uint64_t version;
  if (!parse_number(p->fields[1], UINT32_MAX, &version) || version != TILE_META_VERSION)
    return meta_error(p, "metadata version '%s' is not supported (this libtile reads version %d)", p->fields[1],
                      TILE_META_VERSION);
  return TILE_OK;
}

static tile_status parse_name(meta_parser *p) {
  if (p->seen_name) return meta_error(p, "second 'name' line");
  tile_status st = expect_fields(p, 2, "name KERNEL");
  if (st != TILE_OK) return st;
  if (!is_identifier(p->fields[1])) return meta_error(p, "bad kernel name '%s'", p->fields[1]);
  p->info->name = p->fields[1];
  p->seen_name = true;
  return TILE_OK;
}

/* A line "KEY N" that may appear once, N in [lo, hi]. */
static tile_status parse_number_line(meta_parser *p, bool *seen, const char *usage, const char *what, uint64_t lo,
                                     uint64_t hi, uint64_t *v) {
  if (*seen) return meta_error(p, "second '%s' line", p->fields[0]);
  tile_status st = expect_fields(p, 2, usage);
  if (st == TILE_OK) st = number_field(p, 1, what, lo, hi, v);
  if (st == TILE_OK) *seen = true;
  return st;
}

static tile_status parse_warps(meta_parser *p) {
  uint64_t v = 0;
  tile_status st = parse_number_line(p, &p->seen_warps, "warps N", "warp count", 1, META_MAX_WARPS, &v);
  p->info->warps = (int)v;
  p->info->threads = 32 * (int)v;
  return st;
}

static tile_status parse_shared(meta_parser *p) {
  uint64_t v = 0;
  tile_status st = parse_number_line(p, &p->seen_shared, "shared BYTES", "shared memory size", 0, META_MAX_SHARED, &v);
  p->info->shared_bytes = (unsigned)v;
  return st;
}

static tile_status parse_cluster(meta_parser *p) {
  uint64_t v = 1;
  tile_status st = parse_number_line(p, &p->seen_cluster, "cluster N", "cluster size", 1, META_MAX_CLUSTER, &v);
  p->info->cluster = (int)v;
  return st;
}

/* ---- parameters -------------------------------------------------------- */

static bool is_power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

static bool is_swizzle_mode(uint64_t v) {
  for (size_t i = 0; i < sizeof swizzle_modes / sizeof swizzle_modes[0]; i++)
    if ((uint64_t)swizzle_modes[i] == v) return true;
  return false;
}

static tile_status elem_field(const meta_parser *p, int i, tile_param_info *prm) {
  if (i >= p->nfields) return meta_error(p, "parameter '%s' has no element type", prm->name);
  if (!dtype_from_name(p->fields[i], &prm->dtype))
    return meta_error(p, "unknown element type '%s' for parameter '%s'", p->fields[i], prm->name);
  prm->elem = p->fields[i];
  prm->elem_bytes = dtypes[prm->dtype].bytes;
  prm->elem_signed = dtypes[prm->dtype].is_signed;
  return TILE_OK;
}

/* One "KEY VALUE" option at fields[i] of parameter prm. */
static tile_status parse_option(const meta_parser *p, int i, tile_param_info *prm) {
  const char *key = p->fields[i];
  if (i + 1 >= p->nfields) return meta_error(p, "option '%s' of parameter '%s' has no value", key, prm->name);
  uint64_t v = 0;
  tile_status st;
  if (prm->kind == TILE_PARAM_PTR && strcmp(key, "align") == 0) {
    if (prm->align) return meta_error(p, "second 'align' for parameter '%s'", prm->name);
    if ((st = number_field(p, i + 1, "alignment", 1, META_MAX_ALIGN, &v)) != TILE_OK) return st;
    if (!is_power_of_two(v))
      return meta_error(p, "alignment %llu of parameter '%s' is not a power of two", (unsigned long long)v, prm->name);
    prm->align = (int)v;
  } else if (prm->kind == TILE_PARAM_INT && strcmp(key, "multiple_of") == 0) {
    if (prm->multiple_of) return meta_error(p, "second 'multiple_of' for parameter '%s'", prm->name);
    if ((st = number_field(p, i + 1, "multiple_of", 1, META_MAX_MULTIPLE, &v)) != TILE_OK) return st;
    prm->multiple_of = (int)v;
  } else {
    return meta_error(p, "unknown option '%s' for parameter '%s'", key, prm->name);
  }
  return TILE_OK;
}

static tile_status parse_options(const meta_parser *p, int first, tile_param_info *prm) {
  for (int i = first; i < p->nfields; i += 2) {
    tile_status st = parse_option(p, i, prm);
    if (st != TILE_OK) return st;
  }
  return TILE_OK;
}

/* "swizzle S" at fields[i], if there. */
static tile_status parse_swizzle(const meta_parser *p, int i, tile_param_info *prm) {
  if (i + 1 >= p->nfields) return meta_error(p, "option 'swizzle' of parameter '%s' has no value", prm->name);
  uint64_t v = 0;
  tile_status st = number_field(p, i + 1, "swizzle", 0, META_MAX_SWIZZLE, &v);
  if (st != TILE_OK) return st;
  if (!is_swizzle_mode(v))
    return meta_error(p, "swizzle %llu of parameter '%s' is not 0, 32, 64 or 128", (unsigned long long)v, prm->name);
  prm->swizzle = (int)v;
  return TILE_OK;
}

/* param NAME desc ELEM RANK box B0 .. B(RANK-1) [swizzle S]: box sizes in
 * the language's dimension order (0 outermost), exactly RANK of them; the
 * swizzle at most once, 0 if absent. */
static tile_status parse_desc(const meta_parser *p, tile_param_info *prm) {
  tile_status st = elem_field(p, 3, prm);
  uint64_t rank = 0;
  if (st == TILE_OK) st = number_field(p, 4, "descriptor rank", 1, TILE_DESC_MAX_RANK, &rank);
  if (st != TILE_OK) return st;
  if (prm->dtype == TILE_DTYPE_I1)
    return meta_error(p, "descriptor parameter '%s' cannot have i1 elements (TMA has no 1-bit type)", prm->name);
  prm->desc_rank = (int)rank;
  if (p->nfields <= 5 || strcmp(p->fields[5], "box") != 0)
    return meta_error(p, "expected 'box' and %d box sizes after the rank of parameter '%s'", (int)rank, prm->name);
  for (int d = 0; d < (int)rank; d++) {
    uint64_t v = 0;
    if ((st = number_field(p, 6 + d, "box size", 1, META_MAX_BOX, &v)) != TILE_OK) return st;
    prm->box[d] = (int)v;
  }
  int i = 6 + (int)rank;
  uint64_t extra;
  if (i < p->nfields && parse_number(p->fields[i], UINT64_MAX, &extra))
    return meta_error(p, "more than %d box sizes for parameter '%s' of rank %d", (int)rank, prm->name, (int)rank);
  if (i < p->nfields && strcmp(p->fields[i], "swizzle") == 0) {
    if ((st = parse_swizzle(p, i, prm)) != TILE_OK) return st;
    i += 2;
  }
  if (i < p->nfields && strcmp(p->fields[i], "swizzle") == 0)
    return meta_error(p, "second 'swizzle' for parameter '%s'", prm->name);
  if (i < p->nfields) return meta_error(p, "unknown option '%s' for parameter '%s'", p->fields[i], prm->name);
  return TILE_OK;
}

/* param NAME SCALAR [multiple_of N] */
static tile_status parse_scalar(const meta_parser *p, tile_param_info *prm) {
  tile_status st = elem_field(p, 2, prm);
  if (st != TILE_OK) return st;
  if (!is_scalar_dtype(prm->dtype))
    return meta_error(p,
                      "parameter '%s' cannot be a scalar of type %s (only pointers and descriptors have %s elements)",
                      prm->name, prm->elem, prm->elem);
  prm->kind = dtypes[prm->dtype].is_int ? TILE_PARAM_INT : TILE_PARAM_FLOAT;
  return parse_options(p, 3, prm);
}

static tile_status check_new_param_name(const meta_parser *p, const char *name) {
  if (!is_identifier(name)) return meta_error(p, "bad parameter name '%s'", name);
  for (int i = 0; i < p->info->nparams; i++)
    if (strcmp(p->params[i].name, name) == 0) return meta_error(p, "second parameter named '%s'", name);
  return TILE_OK;
}

static tile_status parse_param(meta_parser *p) {
  if (p->nfields < 3) return meta_error(p, "expected 'param NAME KIND ...', got %d fields", p->nfields);
  if (p->info->nparams >= TILE_MAX_PARAMS || p->info->nparams >= p->param_capacity)
    return meta_error(p, "more than %d parameters", TILE_MAX_PARAMS);
  tile_status st = check_new_param_name(p, p->fields[1]);
  if (st != TILE_OK) return st;
  tile_param_info *prm = &p->params[p->info->nparams];
  memset(prm, 0, sizeof *prm);
  prm->name = p->fields[1];
  const char *kind = p->fields[2];
  tile_dtype scalar;
  if (strcmp(kind, "ptr") == 0) {
    prm->kind = TILE_PARAM_PTR;
    st = elem_field(p, 3, prm);
    if (st == TILE_OK) st = parse_options(p, 4, prm);
  } else if (strcmp(kind, "desc") == 0) {
    prm->kind = TILE_PARAM_DESC;
    st = parse_desc(p, prm);
  } else if (dtype_from_name(kind, &scalar)) {
    st = parse_scalar(p, prm);
  } else {
    st = meta_error(p, "unknown kind '%s' for parameter '%s' (expected ptr, desc or a scalar type)", kind, prm->name);
  }
  if (st == TILE_OK) p->info->nparams++;
  return st;
}

/* ---- constants --------------------------------------------------------- */

/* Value range of each integer type, as written in const lines: signed
 * types in [-(2^(b-1)), 2^(b-1) - 1], unsigned ones (the writer prints them
 * with %llu) in [0, 2^b - 1]. */
typedef struct const_int_range {
  uint64_t max_negative; /* largest magnitude of a negative value (0: none) */
  uint64_t max_positive;
} const_int_range;

static const const_int_range const_int_ranges[] = {
    [TILE_DTYPE_I1] = {0, 1},
    [TILE_DTYPE_I8] = {UINT64_C(1) << 7, INT8_MAX},
    [TILE_DTYPE_I16] = {UINT64_C(1) << 15, INT16_MAX},
    [TILE_DTYPE_I32] = {UINT64_C(1) << 31, INT32_MAX},
    [TILE_DTYPE_I64] = {UINT64_C(1) << 63, INT64_MAX},
    [TILE_DTYPE_U8] = {0, UINT8_MAX},
    [TILE_DTYPE_U16] = {0, UINT16_MAX},
    [TILE_DTYPE_U32] = {0, UINT32_MAX},
    [TILE_DTYPE_U64] = {0, UINT64_MAX},
};

/* An optional '-' and a decimal number within the range of integer type t. */
static bool is_integer_text(const char *s, tile_dtype t) {
  const const_int_range *r = &const_int_ranges[t];
  uint64_t v;
  if (*s == '-') return r->max_negative && parse_number(s + 1, r->max_negative, &v) && v != 0;
  return parse_number(s, r->max_positive, &v);
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* The spelling printf's %.17g gives a double: an optional '-', digits, an
 * optional fraction and an optional exponent ("-1.5e-07"), or inf, -inf,
 * nan, -nan. strtod alone would also take leading blanks, '+', hex floats
 * and "infinity", which the compiler never writes. */
static bool is_g_format(const char *s, bool *special) {
  if (*s == '-') s++;
  *special = !strcmp(s, "inf") || !strcmp(s, "nan");
  if (*special) return true;
  if (!is_digit(*s)) return false;
  while (is_digit(*s)) s++;
  if (*s == '.') {
    s++;
    if (!is_digit(*s)) return false;
    while (is_digit(*s)) s++;
  }
  if (*s == 'e') {
    s++;
    if (*s == '-' || *s == '+') s++;
    if (!is_digit(*s)) return false;
    while (is_digit(*s)) s++;
  }
  return *s == '\0';
}

/* A float const of type t: written as %.17g writes it and, unless it is an
 * infinity or NaN spelled as such, finite in double ("1e999" overflows to
 * infinity: no compiler wrote it) and in t (65536 is out of range for f16). */
static const char *float_text_problem(const char *s, tile_dtype t) {
  bool special;
  if (!is_g_format(s, &special)) return "not a decimal number as %.17g writes it";
  if (special) return NULL;
  double v = strtod(s, NULL);
  if (!isfinite(v)) return "out of range: not finite as a double";
  if (tilert_float_overflows(t, v)) return "out of range for its type";
  return NULL;
}

static tile_status check_const_value(const meta_parser *p, const char *name, const char *type, const char *value) {
  tile_dtype t;
  bool ok;
  if (strcmp(type, "type") == 0)
    ok = dtype_from_name(value, &t);
  else if (!dtype_from_name(type, &t))
    return meta_error(p, "unknown type '%s' of const '%s'", type, name);
  else if (t == TILE_DTYPE_I1)
    ok = !strcmp(value, "0") || !strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "false");
  else if (dtypes[t].is_int)
    ok = is_integer_text(value, t);
  else {
    const char *problem = float_text_problem(value, t);
    if (problem) return meta_error(p, "bad value '%s' for const '%s' of type %s (%s)", value, name, type, problem);
    ok = true;
  }
  if (!ok) return meta_error(p, "bad value '%s' for const '%s' of type %s", value, name, type);
  return TILE_OK;
}

/* const NAME TYPE VALUE */
static tile_status parse_const(meta_parser *p) {
  tile_status st = expect_fields(p, 4, "const NAME TYPE VALUE");
  if (st != TILE_OK) return st;
  if (p->info->nconsts >= p->const_capacity) return meta_error(p, "too many consts");
  const char *name = p->fields[1];
  if (!is_identifier(name)) return meta_error(p, "bad const name '%s'", name);
  for (int i = 0; i < p->info->nconsts; i++)
    if (strcmp(p->consts[i].name, name) == 0) return meta_error(p, "second const named '%s'", name);
  if ((st = check_const_value(p, name, p->fields[2], p->fields[3])) != TILE_OK) return st;
  p->consts[p->info->nconsts++] = (tile_const_info){name, p->fields[2], p->fields[3]};
  return TILE_OK;
}

/* ---- driver ------------------------------------------------------------ */

static tile_status parse_end(meta_parser *p) {
  tile_status st = expect_fields(p, 1, "end");
  if (st != TILE_OK) return st;
  if (*p->cursor != '\0') {
    p->line++;
    return meta_error(p, "text after 'end'");
  }
  p->seen_end = true;
  return TILE_OK;
}

static tile_status parse_item(meta_parser *p) {
  const char *key = p->fields[0];
  if (strcmp(key, "name") == 0) return parse_name(p);
  if (strcmp(key, "warps") == 0) return parse_warps(p);
  if (strcmp(key, "shared") == 0) return parse_shared(p);
  if (strcmp(key, "cluster") == 0) return parse_cluster(p);
  if (strcmp(key, "param") == 0) return parse_param(p);
  if (strcmp(key, "const") == 0) return parse_const(p);
  if (strcmp(key, "end") == 0) return parse_end(p);
  if (strcmp(key, "tile-kernel") == 0) return meta_error(p, "second 'tile-kernel' line");
  return meta_error(p, "unknown line '%s'", key);
}

static tile_status check_complete(const meta_parser *p) {
  const char *missing = !p->seen_name ? "name" : !p->seen_warps ? "warps" : !p->seen_shared ? "shared" : NULL;
  if (missing) return tilert_fail(TILE_ERROR_BAD_METADATA, "metadata: missing '%s' line", missing);
  return TILE_OK;
}

static tile_status parse_lines(meta_parser *p) {
  bool first = true;
  while (!p->seen_end && next_line(p)) {
    tile_status st = check_fields(p);
    if (st == TILE_OK) st = first ? parse_header(p) : parse_item(p);
    if (st != TILE_OK) return st;
    first = false;
  }
  if (first) return tilert_fail(TILE_ERROR_BAD_METADATA, "metadata: empty text");
  if (!p->seen_end) return tilert_fail(TILE_ERROR_BAD_METADATA, "metadata: missing 'end' line (is it truncated?)");
  return check_complete(p);
}

/* Lines that start with prefix: an upper bound on the items of a kind. */
static int count_lines_starting(const char *text, const char *prefix) {
  size_t n = strlen(prefix);
  int count = 0;
  for (const char *line = text;;) {
    if (strncmp(line, prefix, n) == 0) count++;
    const char *nl = strchr(line, '\n');
    if (!nl) return count;
    line = nl + 1;
  }
}

tile_status tilert_meta_parse(const tilert_allocator *a, const char *text, tile_kernel_info **out) {
  *out = NULL;
  /* memchr stops at the first NUL, so it never reads past a short text. */
  const char *nul = memchr(text, '\0', TILE_META_MAX_TEXT + 1);
  if (!nul) return tilert_fail(TILE_ERROR_BAD_METADATA, "metadata: longer than %d bytes", TILE_META_MAX_TEXT);
  size_t len = (size_t)(nul - text);
  int nparams = count_lines_starting(text, "param ");
  int nconsts = count_lines_starting(text, "const ");
  size_t off_params = align_up(sizeof(meta_block), _Alignof(tile_param_info));
  size_t off_consts = align_up(off_params + (size_t)nparams * sizeof(tile_param_info), _Alignof(tile_const_info));
  size_t off_text = off_consts + (size_t)nconsts * sizeof(tile_const_info);
  size_t size = off_text + len + 1;
  meta_block *b = tilert_calloc(a, size);
  if (!b) return TILE_ERROR_OUT_OF_MEMORY;
  b->alloc = *a;
  b->size = size;
  char *copy = (char *)b + off_text;
  memcpy(copy, text, len + 1);
  meta_parser p = {.cursor = copy,
                   .info = &b->info,
                   .params = (tile_param_info *)((char *)b + off_params),
                   .param_capacity = nparams,
                   .consts = (tile_const_info *)((char *)b + off_consts),
                   .const_capacity = nconsts};
  b->info.params = p.params;
  b->info.consts = p.consts;
  b->info.cluster = 1;
  tile_status st = parse_lines(&p);
  if (st != TILE_OK) {
    tile_meta_free(&b->info);
    return st;
  }
  *out = &b->info;
  return TILE_OK;
}

tile_status tile_meta_parse(const char *text, tile_kernel_info **out) {
  if (!out) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_meta_parse: out is NULL");
  *out = NULL;
  if (!text) return tilert_fail(TILE_ERROR_INVALID_ARGUMENT, "tile_meta_parse: text is NULL");
  return tilert_meta_parse(&tilert_default_allocator, text, out);
}
