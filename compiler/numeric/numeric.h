/* numeric.h - exact scalar semantics of the language's element types.
 *
 * The interpreter and the constant folder both compute through these
 * functions, so a constant folded at compile time and the same expression
 * evaluated at run time agree bit for bit.  It lives in compiler/numeric/
 * and depends on ir/ only, so the front end, the optimizer, the interpreter
 * and the GPU back end can all share one definition of what an operation
 * computes without depending on each other.
 *
 * Representation ("slot"): every element of every type lives in a 64-bit
 * union.  Integers are kept normalized to their type: signed types
 * sign-extended into `i`, unsigned types and i1 zero-extended into `u`.
 * Floats of every width are kept in `f` as a double whose value is exactly
 * representable in the element type (so an f16 slot holds a double that is
 * an f16 value).  Pointers are addresses in `u`.
 */
#ifndef TILE_NUMERIC_H
#define TILE_NUMERIC_H

#include <stdbool.h>
#include <stdint.h>

#include "../ir/types.h"

typedef union Slot {
  int64_t i;
  uint64_t u;
  double f;
} Slot;

/* Rounds x to the nearest value of float kind k (round to nearest, ties to
 * even), with the conversion rules of the spec: overflow gives +-inf for
 * f16, bf16, f32, f64; f8e4m3 and f8e5m2 saturate (finite overflow and inf
 * give the largest finite value of that sign); NaN stays NaN. Subnormals of
 * every format are kept (no flush to zero). */
double num_round_float(double x, ScalarKind k);

/* device_print's text of one element (the interpreter and the GPU write
 * the same): integers in decimal, i1 as 0 or 1, floats with %.9g (%.17g
 * for f64), as printf formats of a long long, unsigned long long or
 * double argument (num_print_kind says which). */
typedef enum NumPrintKind { NUM_PRINT_SIGNED, NUM_PRINT_UNSIGNED, NUM_PRINT_DOUBLE } NumPrintKind;
NumPrintKind num_print_kind(ScalarKind k);
const char *num_print_format(ScalarKind k);

/* Normalizes an integer to kind k: truncates to the width, then sign- or
 * zero-extends. For SK_I1 keeps only bit 0. */
Slot num_wrap_int(uint64_t bits, ScalarKind k);

/* The `as` conversion from kind `from` to kind `to` (both scalar kinds other
 * than SK_PTR/SK_DESC; SK_PTR <-> 64-bit ints is a plain copy). Rules:
 * int->int truncates or extends by the source's signedness; int->float
 * rounds to nearest even (exactly, also for 64-bit sources: no double
 * rounding); float->int truncates toward zero and saturates, NaN -> 0;
 * float->float rounds as num_round_float; x as i1 is x != 0. */
Slot num_convert(Slot v, ScalarKind from, ScalarKind to);

/* Bit patterns in memory. num_encode returns the little-endian bits of the
 * slot's value in kind k's memory format (f16 -> IEEE binary16 bits, bf16 ->
 * upper half of binary32, f8e4m3 -> OCP E4M3FN with NaN 0x7f/0xff, f8e5m2 ->
 * OCP E5M2). num_decode is its inverse (any bit pattern, incl. NaN/subnormal).
 * NaN is always encoded as the format's canonical positive quiet NaN (f16
 * 0x7e00, bf16 0x7fc0, f32 0x7fc00000, f64 0x7ff8000000000000, f8e4m3 0x7f,
 * f8e5m2 0x7e): payloads and the NaN sign are not kept, also not through
 * num_bitcast.  A value that is not representable in k is rounded first
 * (num_round_float); an inf slot of f8e4m3 is written as the largest finite
 * value, while f8e5m2 keeps inf (0x7c, 0xfc). Integers: the low bits. */
uint64_t num_encode(Slot v, ScalarKind k);
Slot num_decode(uint64_t bits, ScalarKind k);

/* Loads/stores one element of kind k at p (scalar_bytes(k) bytes, any
 * alignment) through num_decode/num_encode. */
Slot num_load(const void *p, ScalarKind k);
void num_store(void *p, Slot v, ScalarKind k);

/* Largest finite value of a float kind. */
double num_float_max(ScalarKind k);

/* Reinterprets the bits of a slot of kind `from` as kind `to` of the same
 * width (bitcast). */
Slot num_bitcast(Slot v, ScalarKind from, ScalarKind to);

/* Elementwise operations on normalized slots of kind k. Integer arithmetic
 * wraps; division and remainder truncate toward zero (C), INT_MIN / -1
 * gives INT_MIN and INT_MIN % -1 gives 0; division by zero sets *div_by_zero
 * and returns 0 (the caller reports it). Shifts follow the spec (amount
 * taken as unsigned; >= width gives 0, or all sign bits for signed >>).
 * Float operations compute in double and round once with num_round_float.
 * maximum/minimum: IEEE maxNum/minNum (one NaN -> the other operand),
 * +0 > -0. */
typedef enum NumBinop {
  NUM_ADD, NUM_SUB, NUM_MUL, NUM_DIV, NUM_REM,
  NUM_AND, NUM_OR, NUM_XOR, NUM_SHL, NUM_SHR,
  NUM_MAX, NUM_MIN
} NumBinop;
Slot num_binop(NumBinop op, Slot a, Slot b, ScalarKind k, bool *div_by_zero);

typedef enum NumCmp { NUM_EQ, NUM_NE, NUM_LT, NUM_LE, NUM_GT, NUM_GE } NumCmp;
/* Comparison by kind k's order (signed or unsigned ints; floats with IEEE
 * semantics: every comparison with NaN is false except NE). */
bool num_cmp(NumCmp op, Slot a, Slot b, ScalarKind k);

typedef enum NumUnop {
  NUM_NEG, NUM_NOT, NUM_ABS, NUM_EXP, NUM_EXP2, NUM_LOG, NUM_LOG2, NUM_SQRT,
  NUM_RSQRT, NUM_SIN, NUM_COS, NUM_TANH, NUM_ERF, NUM_SIGMOID, NUM_FLOOR,
  NUM_CEIL
} NumUnop;
/* Unary operations; math functions on float kinds only, computed in double
 * and rounded once. NUM_NOT is bitwise not on ints (logical on i1),
 * NUM_NEG wraps on ints, NUM_ABS of INT_MIN is INT_MIN. */
Slot num_unop(NumUnop op, Slot a, ScalarKind k);

/* fma(a, b, c) rounded once: f64 via fma, f32 via fmaf; f16, bf16 and fp8
 * from the exact product (exact in double) and a round-to-odd sum, so also
 * correctly rounded. On integers: a * b + c, wrapping. */
Slot num_fma(Slot a, Slot b, Slot c, ScalarKind k);

#endif
