/* types.h - element types and tile types shared by sema, the tile IR and the
 * interpreter.
 *
 * A tile type is an element type plus a static shape (rank 0 is a scalar).
 * Types are small plain structs passed by value: no interning, no pointers,
 * so comparing two types is a memcmp-like field comparison.
 */
#ifndef TILE_TYPES_H
#define TILE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Highest tile rank. Attention and MoE kernels need at most three
 * dimensions; four leaves room for batched 3-D tiles. */
#define TILE_MAX_RANK 4

/* Largest number of elements in one tile. A 256x256 tile is 65,536 elements;
 * the GPU back end will reject much smaller tiles for register reasons, but
 * the language itself stops here so that shape arithmetic cannot overflow. */
#define TILE_MAX_ELEMS (1 << 20)

/* X-macro: name, spelling, bit width, is_int, is_signed, is_float */
#define SCALAR_KINDS(X)                     \
  X(VOID, "void", 0, 0, 0, 0)               \
  X(I1, "i1", 1, 1, 0, 0)                   \
  X(I8, "i8", 8, 1, 1, 0)                   \
  X(I16, "i16", 16, 1, 1, 0)                \
  X(I32, "i32", 32, 1, 1, 0)                \
  X(I64, "i64", 64, 1, 1, 0)                \
  X(U8, "u8", 8, 1, 0, 0)                   \
  X(U16, "u16", 16, 1, 0, 0)                \
  X(U32, "u32", 32, 1, 0, 0)                \
  X(U64, "u64", 64, 1, 0, 0)                \
  X(F8E4M3, "f8e4m3", 8, 0, 1, 1)           \
  X(F8E5M2, "f8e5m2", 8, 0, 1, 1)           \
  X(F16, "f16", 16, 0, 1, 1)                \
  X(BF16, "bf16", 16, 0, 1, 1)              \
  X(F32, "f32", 32, 0, 1, 1)                \
  X(F64, "f64", 64, 0, 1, 1)                \
  X(PTR, "ptr", 64, 0, 0, 0)                \
  X(DESC, "tensor", 0, 0, 0, 0)             \
  X(SMEM, "smem", 0, 0, 0, 0)               \
  X(MBAR, "mbar", 0, 0, 0, 0)               \
  X(TYPE, "type", 0, 0, 0, 0)

typedef enum ScalarKind {
#define X(name, spelling, bits, is_int, is_signed, is_float) SK_##name,
  SCALAR_KINDS(X)
#undef X
      SK_COUNT
} ScalarKind;

/* A tile type.  For SK_PTR, `pointee` is the element type pointed to; for
 * SK_DESC (a tensor descriptor) `pointee` is its element type and
 * `desc_rank` its rank.  A scalar has rank 0.
 *
 * Two kinds exist only in the lowered IR of the GPU back end (never in
 * source, never in the interpreter): SK_SMEM, a buffer in shared memory
 * holding a tile of `pointee` elements of the given shape (one value, not
 * a tile of values: every thread holds its address), and SK_MBAR, an
 * array of `shape[0]` mbarriers in shared memory. */
typedef struct TType {
  uint8_t kind;      /* ScalarKind */
  uint8_t pointee;   /* ScalarKind, for SK_PTR and SK_DESC */
  uint8_t desc_rank; /* for SK_DESC */
  uint8_t rank;
  int32_t shape[TILE_MAX_RANK];
} TType;

const char *scalar_name(ScalarKind k);
int scalar_bits(ScalarKind k);
bool scalar_is_int(ScalarKind k);    /* i1 and all integer widths */
bool scalar_is_signed(ScalarKind k); /* signed integers and floats */
bool scalar_is_float(ScalarKind k);
/* Looks a type name up ("f32", "bf16", ...); SK_VOID when unknown. */
ScalarKind scalar_from_name(const char *s, size_t len);

TType type_scalar(ScalarKind k);
TType type_ptr(ScalarKind pointee);
TType type_tile(ScalarKind k, int rank, const int32_t *shape);
TType type_with_elem(TType t, ScalarKind k); /* same shape, new element */
TType type_with_shape(TType t, int rank, const int32_t *shape);
TType type_elem(TType t); /* rank-0 version */
bool type_eq(TType a, TType b);
bool type_elem_eq(TType a, TType b); /* element types (and pointees) equal */
bool type_shape_eq(TType a, TType b);
/* Lowered IR only: a shared-memory buffer of elem[shape], n mbarriers, and
 * whether a type is either (a buffer is one value, not a tile). */
TType type_smem(ScalarKind elem, int rank, const int32_t *shape);
TType type_mbar(int n);
bool type_is_buffer(TType t);
int64_t type_numel(TType t);
/* Writes the textual form ("f32[64, 128]", "*bf16", "tensor<bf16, 2>")
 * into buf; returns buf. */
char *type_str(TType t, char *buf, size_t size);
/* Size in bytes of one element in memory (pointers 8, i1 1 byte). */
int scalar_bytes(ScalarKind k);

#endif
