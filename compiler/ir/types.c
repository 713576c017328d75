/* types.c - queries on element and tile types (see types.h). */
#include "types.h"

#include <stdio.h>
#include <string.h>

typedef struct ScalarInfo {
  const char *name;
  uint8_t bits, is_int, is_signed, is_float;
} ScalarInfo;

static const ScalarInfo scalar_info[SK_COUNT] = {
#define X(name, spelling, bits, is_int, is_signed, is_float) \
  {spelling, bits, is_int, is_signed, is_float},
    SCALAR_KINDS(X)
#undef X
};

const char *scalar_name(ScalarKind k) { return k < SK_COUNT ? scalar_info[k].name : "?"; }
int scalar_bits(ScalarKind k) { return scalar_info[k].bits; }
bool scalar_is_int(ScalarKind k) { return scalar_info[k].is_int; }
bool scalar_is_signed(ScalarKind k) { return scalar_info[k].is_signed; }
bool scalar_is_float(ScalarKind k) { return scalar_info[k].is_float; }

int scalar_bytes(ScalarKind k) {
  int bits = scalar_info[k].bits;
  return bits < 8 ? 1 : bits / 8;
}

ScalarKind scalar_from_name(const char *s, size_t len) {
  /* "ptr", "tensor", "type" and "void" are not element type names;
   * "bool" is another name of i1. */
  if (len == 4 && memcmp(s, "bool", 4) == 0) return SK_I1;
  for (int k = SK_I1; k <= SK_F64; k++)
    if (strlen(scalar_info[k].name) == len && memcmp(scalar_info[k].name, s, len) == 0)
      return (ScalarKind)k;
  return SK_VOID;
}

TType type_scalar(ScalarKind k) {
  TType t;
  memset(&t, 0, sizeof t);
  t.kind = (uint8_t)k;
  return t;
}

TType type_ptr(ScalarKind pointee) {
  TType t = type_scalar(SK_PTR);
  t.pointee = (uint8_t)pointee;
  return t;
}

TType type_tile(ScalarKind k, int rank, const int32_t *shape) {
  return type_with_shape(type_scalar(k), rank, shape);
}

TType type_with_elem(TType t, ScalarKind k) {
  t.kind = (uint8_t)k;
  if (k != SK_PTR && k != SK_DESC && k != SK_SMEM) t.pointee = 0;
  if (k != SK_DESC) t.desc_rank = 0;
  return t;
}

TType type_with_shape(TType t, int rank, const int32_t *shape) {
  memset(t.shape, 0, sizeof t.shape);
  t.rank = (uint8_t)rank;
  for (int i = 0; i < rank; i++) t.shape[i] = shape[i];
  return t;
}

TType type_elem(TType t) { return type_with_shape(t, 0, NULL); }

bool type_elem_eq(TType a, TType b) {
  return a.kind == b.kind && a.pointee == b.pointee && a.desc_rank == b.desc_rank;
}

bool type_shape_eq(TType a, TType b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; i++)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

bool type_eq(TType a, TType b) { return type_elem_eq(a, b) && type_shape_eq(a, b); }

TType type_smem(ScalarKind elem, int rank, const int32_t *shape) {
  TType t = type_with_shape(type_scalar(SK_SMEM), rank, shape);
  t.pointee = (uint8_t)elem;
  return t;
}

TType type_mbar(int n) { return type_with_shape(type_scalar(SK_MBAR), 1, (int32_t[]){n}); }

bool type_is_buffer(TType t) { return t.kind == SK_SMEM || t.kind == SK_MBAR; }

int64_t type_numel(TType t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) n *= t.shape[i];
  return n;
}

char *type_str(TType t, char *buf, size_t size) {
  size_t n = 0;
#define PUT(...) n += (size_t)snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, __VA_ARGS__)
  if (size) buf[0] = 0;
  if (t.kind == SK_PTR)
    PUT("*%s", scalar_name(t.pointee));
  else if (t.kind == SK_DESC)
    PUT("tensor<%s, %d>", scalar_name(t.pointee), t.desc_rank);
  else if (t.kind == SK_SMEM)
    PUT("smem<%s>", scalar_name(t.pointee));
  else
    PUT("%s", scalar_name(t.kind));
  if (t.rank > 0) {
    PUT("[");
    for (int i = 0; i < t.rank; i++) PUT(i ? ", %d" : "%d", t.shape[i]);
    PUT("]");
  }
#undef PUT
  return buf;
}
