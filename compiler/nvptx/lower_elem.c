/* lower_elem.c - ops computed register by register: constants, arange,
 * program ids, elementwise arithmetic with the language's exact semantics
 * (no LLVM undefined behaviour: division by zero, INT_MIN / -1 and
 * oversized shifts are guarded), conversions (including fp8 through the
 * Hopper cvt instructions), math through libdevice, and the shape ops
 * (broadcast, expand_dims, reshape, trans), which only rearrange registers.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../numeric/numeric.h"
#include "lower_internal.h"

bool is_unsigned_kind(ScalarKind k) { return scalar_is_int(k) && !scalar_is_signed(k); }

static bool is_fp8(ScalarKind k) { return k == SK_F8E4M3 || k == SK_F8E5M2; }

/* ---- scalar helpers ---- */

static LLVMValueRef inline_asm(Lower *L, const char *text, const char *constraints, LLVMTypeRef ret,
                               LLVMValueRef *args, int nargs) {
  LLVMTypeRef params[4];
  for (int i = 0; i < nargs; i++) params[i] = LLVMTypeOf(args[i]);
  LLVMTypeRef fty = LLVMFunctionType(ret, params, (unsigned)nargs, 0);
  LLVMValueRef a = LLVMGetInlineAsm(fty, text, strlen(text), constraints, strlen(constraints), 0, 0,
                                    LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(L->b, fty, a, args, (unsigned)nargs, "");
}

/* Two f32 -> fp8 (round to nearest even, saturating) with one cvt:
 * *out_lo and *out_hi, as i8s. */
static void f32_pair_to_fp8(Lower *L, LLVMValueRef lo, LLVMValueRef hi, ScalarKind to, LLVMValueRef *out_lo,
                            LLVMValueRef *out_hi) {
  const char *text = to == SK_F8E4M3 ? "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;" : "cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;";
  LLVMValueRef args[2] = {hi, lo}; /* the second source lands in the low byte */
  LLVMValueRef packed = inline_asm(L, text, "=h,f,f", L->t_i16, args, 2);
  *out_lo = LLVMBuildTrunc(L->b, packed, L->t_i8, "");
  *out_hi = LLVMBuildTrunc(L->b, LLVMBuildLShr(L->b, packed, LLVMConstInt(L->t_i16, 8, 0), ""), L->t_i8, "");
}

/* One f32 -> fp8, as an i8 (its cvt's other half converts a zero). */
static LLVMValueRef f32_to_fp8(Lower *L, LLVMValueRef v, ScalarKind to) {
  LLVMValueRef lo, hi;
  f32_pair_to_fp8(L, v, LLVMConstReal(L->t_f32, 0.0), to, &lo, &hi);
  return lo;
}

/* fp8 (an i8) -> f16, exactly. */
static LLVMValueRef fp8_to_f16(Lower *L, LLVMValueRef v, ScalarKind from) {
  const char *text = from == SK_F8E4M3 ? "cvt.rn.f16x2.e4m3x2 $0, $1;" : "cvt.rn.f16x2.e5m2x2 $0, $1;";
  LLVMValueRef arg = LLVMBuildZExt(L->b, v, L->t_i16, "");
  LLVMValueRef pair = inline_asm(L, text, "=r,h", L->t_i32, &arg, 1);
  return LLVMBuildBitCast(L->b, LLVMBuildTrunc(L->b, pair, L->t_i16, ""), L->t_f16, "");
}

static LLVMValueRef float_to_float(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to) {
  if (from == to) return v;
  if (is_fp8(from)) return float_to_float(L, fp8_to_f16(L, v, from), SK_F16, to);
  if (is_fp8(to)) return f32_to_fp8(L, float_to_float(L, v, from, SK_F32), to);
  /* f16 <-> bf16 through f32 (exact widening, one rounding). */
  if ((from == SK_F16 && to == SK_BF16) || (from == SK_BF16 && to == SK_F16))
    return float_to_float(L, float_to_float(L, v, from, SK_F32), SK_F32, to);
  LLVMTypeRef t = llvm_elem_type(L, to);
  return scalar_bits(to) > scalar_bits(from) ? LLVMBuildFPExt(L->b, v, t, "") : LLVMBuildFPTrunc(L->b, v, t, "");
}

static LLVMValueRef float_to_int(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to) {
  if (is_fp8(from) || from == SK_F16 || from == SK_BF16) {
    v = float_to_float(L, v, from, SK_F32);
    from = SK_F32;
  }
  LLVMTypeRef ft = llvm_elem_type(L, from);
  if (to == SK_I1) return LLVMBuildFCmp(L->b, LLVMRealUNE, v, LLVMConstReal(ft, 0.0), "");
  /* Saturating, NaN -> 0 (llvm.fpto[su]i.sat). */
  char name[64];
  const char *fs = from == SK_F64 ? "f64" : "f32";
  snprintf(name, sizeof name, "llvm.fpto%si.sat.i%d.%s", is_unsigned_kind(to) ? "u" : "s", scalar_bits(to), fs);
  return call_intrinsic(L, name, llvm_elem_type(L, to), &v, 1);
}

/* An integer -> f16 through f32, in asm: cvt.rn.f16 of an integer beyond
 * the f16 range gives the largest finite value on the GPU, not inf
 * (tile-gpu diff found it), and LLVM folds the two conversions back into
 * one. Through f32 it is one rounding: an integer that f32 rounds is
 * beyond the f16 range (inf either way). */
static LLVMValueRef int_to_f16(Lower *L, LLVMValueRef v, ScalarKind from) {
  bool u = is_unsigned_kind(from) || from == SK_I1;
  bool wide = scalar_bits(from) == 64;
  if (!wide && scalar_bits(from) < 32) v = u ? LLVMBuildZExt(L->b, v, L->t_i32, "") : LLVMBuildSExt(L->b, v, L->t_i32, "");
  char text[96];
  snprintf(text, sizeof text, "{\n.reg .f32 t;\ncvt.rn.f32.%s%d t, $1;\ncvt.rn.f16.f32 $0, t;\n}", u ? "u" : "s",
           wide ? 64 : 32);
  LLVMValueRef bits = inline_asm(L, text, wide ? "=h,l" : "=h,r", L->t_i16, &v, 1);
  return LLVMBuildBitCast(L->b, bits, L->t_f16, "");
}

static LLVMValueRef int_to_float(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to) {
  if (to == SK_F16) return int_to_f16(L, v, from);
  ScalarKind mid = is_fp8(to) ? SK_F32 : to;
  LLVMTypeRef t = llvm_elem_type(L, mid);
  LLVMValueRef r = is_unsigned_kind(from) || from == SK_I1 ? LLVMBuildUIToFP(L->b, v, t, "") : LLVMBuildSIToFP(L->b, v, t, "");
  return mid == to ? r : float_to_float(L, r, mid, to);
}

/* Narrow floats compute in f32 and round once. */
static bool narrow_float(ScalarKind k) { return k == SK_F16 || k == SK_BF16 || is_fp8(k); }

/* f32/f64 to f16/bf16 for the language's casts, in inline PTX. LLVM 19
 * narrows fptrunc(op(fpext a, fpext b)) to an op in the destination type
 * whenever the sources are no wider than it, comparing widths only: a
 * bf16 operand of a product cast to f16 was rounded to f16 first (f16 *
 * bf16 as f16 overflowed to inf; tile-gpu diff seed 3008). A cast LLVM
 * cannot see into keeps the f32 arithmetic; same-kind f16/bf16
 * arithmetic keeps its plain conversions, which LLVM narrows correctly. */
static LLVMValueRef narrow_opaque(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to) {
  char text[64];
  snprintf(text, sizeof text, "cvt.rn.%s.%s $0, $1;", to == SK_BF16 ? "bf16" : "f16", from == SK_F64 ? "f64" : "f32");
  LLVMValueRef bits = inline_asm(L, text, from == SK_F64 ? "=h,d" : "=h,f", L->t_i16, &v, 1);
  return LLVMBuildBitCast(L->b, bits, llvm_elem_type(L, to), "");
}

LLVMValueRef cast_scalar(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to) {
  if (from == to) return v;
  if (from == SK_PTR && to == SK_PTR) return v;
  if (from == SK_PTR) return LLVMBuildPtrToInt(L->b, v, llvm_elem_type(L, to), "");
  if (to == SK_PTR) return LLVMBuildIntToPtr(L->b, v, L->t_ptr, "");
  bool ff = scalar_is_float(from), tf = scalar_is_float(to);
  if (ff && tf && !narrow_float(from) && (to == SK_F16 || to == SK_BF16)) return narrow_opaque(L, v, from, to);
  if (ff && tf) return float_to_float(L, v, from, to);
  if (ff) return float_to_int(L, v, from, to);
  if (tf) return int_to_float(L, v, from, to);
  if (to == SK_I1) return LLVMBuildICmp(L->b, LLVMIntNE, v, const_int(L, LLVMTypeOf(v), 0), "");
  int fb = scalar_bits(from), tb = scalar_bits(to);
  LLVMTypeRef t = llvm_elem_type(L, to);
  if (tb < fb) return LLVMBuildTrunc(L->b, v, t, "");
  if (tb == fb) return v;
  return from == SK_I1 || is_unsigned_kind(from) ? LLVMBuildZExt(L->b, v, t, "") : LLVMBuildSExt(L->b, v, t, "");
}

/* ---- arithmetic ---- */

/* a / b and a % b without LLVM undefined behaviour: a zero divisor gives an
 * unspecified value (here a / 1), and INT_MIN / -1 wraps. */
static LLVMValueRef int_divrem(Lower *L, LLVMValueRef a, LLVMValueRef b, bool rem, bool is_unsigned) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef zero = const_int(L, t, 0), one = const_int(L, t, 1), minus1 = const_int(L, t, -1);
  LLVMValueRef bz = LLVMBuildICmp(L->b, LLVMIntEQ, b, zero, "");
  if (is_unsigned) {
    LLVMValueRef safe = LLVMBuildSelect(L->b, bz, one, b, "");
    return rem ? LLVMBuildURem(L->b, a, safe, "") : LLVMBuildUDiv(L->b, a, safe, "");
  }
  LLVMValueRef bm1 = LLVMBuildICmp(L->b, LLVMIntEQ, b, minus1, "");
  LLVMValueRef safe = LLVMBuildSelect(L->b, LLVMBuildOr(L->b, bz, bm1, ""), one, b, "");
  LLVMValueRef q = rem ? LLVMBuildSRem(L->b, a, safe, "") : LLVMBuildSDiv(L->b, a, safe, "");
  LLVMValueRef by_m1 = rem ? zero : LLVMBuildSub(L->b, zero, a, "");
  return LLVMBuildSelect(L->b, bm1, by_m1, q, "");
}

/* Shifts: the amount is taken as unsigned; >= the width gives 0 (or the
 * sign for an arithmetic right shift). */
static LLVMValueRef int_shift(Lower *L, LLVMValueRef a, LLVMValueRef amt, bool left, bool arith) {
  LLVMTypeRef t = LLVMTypeOf(a);
  unsigned width = LLVMGetIntTypeWidth(t);
  LLVMValueRef big = LLVMBuildICmp(L->b, LLVMIntUGE, amt, const_int(L, t, width), "");
  if (arith) {
    LLVMValueRef clamped = LLVMBuildSelect(L->b, big, const_int(L, t, width - 1), amt, "");
    return LLVMBuildAShr(L->b, a, clamped, "");
  }
  LLVMValueRef safe = LLVMBuildSelect(L->b, big, const_int(L, t, 0), amt, "");
  LLVMValueRef r = left ? LLVMBuildShl(L->b, a, safe, "") : LLVMBuildLShr(L->b, a, safe, "");
  return LLVMBuildSelect(L->b, big, const_int(L, t, 0), r, "");
}

static LLVMValueRef float_minmax(Lower *L, LLVMValueRef a, LLVMValueRef b, ScalarKind k, bool is_max) {
  ScalarKind ck = narrow_float(k) ? SK_F32 : k;
  LLVMValueRef x = float_to_float(L, a, k, ck), y = float_to_float(L, b, k, ck);
  LLVMValueRef args[2] = {x, y};
  LLVMTypeRef it = ck == SK_F64 ? L->t_i64 : L->t_i32;
  LLVMValueRef xb = LLVMBuildBitCast(L->b, x, it, ""), yb = LLVMBuildBitCast(L->b, y, it, "");
  LLVMValueRef r;
  if (ck == SK_F32) {
    /* The f32 max/min instructions (FMNMX) order the zeros as the language
     * does, in either operand order (docs/backend.md, measured); LLVM's
     * maxnum may return either zero and LLVM may fold it so, hence the
     * instruction itself, one per operation. */
    r = llvm_asm(L, is_max ? "max.f32 $0, $1, $2;" : "min.f32 $0, $1, $2;", "=f,f,f", L->t_f32, args, 2, false);
  } else {
    const char *name = is_max ? "llvm.maxnum.f64" : "llvm.minnum.f64";
    r = call_intrinsic(L, name, llvm_elem_type(L, ck), args, 2);
    /* maxnum may return either zero for (+0, -0); the language says +0 is
     * the greater. For equal operands, AND (max) or OR (min) of the bits
     * gives that and leaves equal nonzero values unchanged. */
    LLVMValueRef zeros = LLVMBuildBitCast(L->b, is_max ? LLVMBuildAnd(L->b, xb, yb, "") : LLVMBuildOr(L->b, xb, yb, ""),
                                          llvm_elem_type(L, ck), "");
    r = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOEQ, x, y, ""), zeros, r, "");
  }
  if (ck == k) return r;
  /* a narrow kind: the result is one of the operands, chosen by its f32
   * copy (converting the f32 result back would saturate an fp8 infinity) */
  LLVMValueRef is_x = LLVMBuildICmp(L->b, LLVMIntEQ, LLVMBuildBitCast(L->b, r, it, ""), xb, "");
  return LLVMBuildSelect(L->b, is_x, a, b, "");
}

/* Integer maximum/minimum as a compare and a select in inline PTX, which
 * LLVM cannot turn back into max/min: ptxas (CUDA 13.0) merges chains of
 * min.s32/max.s32 into three-input VIMNMX3 and drops the negation of an
 * operand made by neg.s32 (or by a multiply by a negative power of two)
 * on the way, so min(-64 x, ...) came out as min(64 x, ...) (tile-gpu diff
 * seed 426; test_codegen checks the PTX). i8 goes through 16 bits. */
static LLVMValueRef int_minmax(Lower *L, LLVMValueRef a, LLVMValueRef b, ScalarKind k, bool is_max) {
  bool u = is_unsigned_kind(k);
  int bits = scalar_bits(k);
  LLVMTypeRef t = LLVMTypeOf(a);
  if (bits < 16) {
    a = u ? LLVMBuildZExt(L->b, a, L->t_i16, "") : LLVMBuildSExt(L->b, a, L->t_i16, "");
    b = u ? LLVMBuildZExt(L->b, b, L->t_i16, "") : LLVMBuildSExt(L->b, b, L->t_i16, "");
    bits = 16;
  }
  char text[160];
  snprintf(text, sizeof text, "{\n.reg .pred p;\nsetp.%s.%c%d p, $1, $2;\nselp.b%d $0, $1, $2, p;\n}",
           is_max ? "gt" : "lt", u ? 'u' : 's', bits, bits);
  const char *cons = bits == 16 ? "=h,h,h" : bits == 32 ? "=r,r,r" : "=l,l,l";
  LLVMValueRef args[2] = {a, b};
  LLVMValueRef r = inline_asm(L, text, cons, LLVMTypeOf(a), args, 2);
  return LLVMTypeOf(r) == t ? r : LLVMBuildTrunc(L->b, r, t, "");
}

LLVMValueRef lower_widen_float(Lower *L, LLVMValueRef v, ScalarKind k) {
  return narrow_float(k) ? float_to_float(L, v, k, SK_F32) : v;
}

/* A bitcast. NVPTX cannot select one between f16 and bf16, and LLVM
 * folds a chain through i16 back into one, so every bitcast from or to a
 * 16-bit float goes through an i16 move that LLVM cannot see into. */
static LLVMValueRef bitcast_scalar(Lower *L, LLVMValueRef v, ScalarKind from, ScalarKind to) {
  LLVMTypeRef t = llvm_elem_type(L, to);
  bool half_from = from == SK_F16 || from == SK_BF16, half_to = to == SK_F16 || to == SK_BF16;
  if (!(half_from || half_to) || from == to) return LLVMBuildBitCast(L->b, v, t, "");
  LLVMValueRef bits = LLVMBuildBitCast(L->b, v, L->t_i16, "");
  bits = llvm_asm(L, "mov.b16 $0, $1;", "=h,h", L->t_i16, &bits, 1, false);
  return LLVMBuildBitCast(L->b, bits, t, "");
}

LLVMValueRef lower_binary_scalar(Lower *L, OpKind kind, LLVMValueRef a, LLVMValueRef b, ScalarKind k) {
  bool fl = scalar_is_float(k), u = is_unsigned_kind(k);
  LLVMBuilderRef B = L->b;
  if (fl && narrow_float(k) && kind != OP_MAX && kind != OP_MIN) {
    /* Computing in f32 and rounding once equals the exactly rounded
     * f16/bf16 result for + - * / (24 >= 2 * 11 + 2 bits). */
    LLVMValueRef x = float_to_float(L, a, k, SK_F32), y = float_to_float(L, b, k, SK_F32);
    return float_to_float(L, lower_binary_scalar(L, kind, x, y, SK_F32), SK_F32, k);
  }
  switch (kind) {
  case OP_ADD: return fl ? LLVMBuildFAdd(B, a, b, "") : LLVMBuildAdd(B, a, b, "");
  case OP_SUB: return fl ? LLVMBuildFSub(B, a, b, "") : LLVMBuildSub(B, a, b, "");
  case OP_MUL: return fl ? LLVMBuildFMul(B, a, b, "") : LLVMBuildMul(B, a, b, "");
  case OP_DIV: return fl ? LLVMBuildFDiv(B, a, b, "") : int_divrem(L, a, b, false, u);
  case OP_REM: return fl ? LLVMBuildFRem(B, a, b, "") : int_divrem(L, a, b, true, u);
  case OP_AND: return LLVMBuildAnd(B, a, b, "");
  case OP_OR: return LLVMBuildOr(B, a, b, "");
  case OP_XOR: return LLVMBuildXor(B, a, b, "");
  case OP_SHL: return int_shift(L, a, b, true, false);
  case OP_SHR: return int_shift(L, a, b, false, !u);
  case OP_MAX: return fl ? float_minmax(L, a, b, k, true) : int_minmax(L, a, b, k, true);
  case OP_MIN: return fl ? float_minmax(L, a, b, k, false) : int_minmax(L, a, b, k, false);
  default: return NULL;
  }
}

static LLVMValueRef compare_scalar(Lower *L, OpKind kind, LLVMValueRef a, LLVMValueRef b, ScalarKind k) {
  if (scalar_is_float(k)) {
    if (is_fp8(k)) {
      a = float_to_float(L, a, k, SK_F32);
      b = float_to_float(L, b, k, SK_F32);
    }
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    return LLVMBuildFCmp(L->b, fp[kind - OP_CMP_EQ], a, b, "");
  }
  if (k == SK_PTR) {
    a = LLVMBuildPtrToInt(L->b, a, L->t_i64, "");
    b = LLVMBuildPtrToInt(L->b, b, L->t_i64, "");
  }
  bool u = is_unsigned_kind(k) || k == SK_PTR || k == SK_I1;
  static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
  static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
  return LLVMBuildICmp(L->b, (u ? up : sp)[kind - OP_CMP_EQ], a, b, "");
}

/* libdevice function for a math op on f32 (suffix "f") or f64. */
static const char *libdevice_name(OpKind kind) {
  switch (kind) {
  case OP_EXP: return "__nv_exp";
  case OP_EXP2: return "__nv_exp2";
  case OP_LOG: return "__nv_log";
  case OP_LOG2: return "__nv_log2";
  case OP_RSQRT: return "__nv_rsqrt";
  case OP_SIN: return "__nv_sin";
  case OP_COS: return "__nv_cos";
  case OP_TANH: return "__nv_tanh";
  case OP_ERF: return "__nv_erf";
  default: return NULL;
  }
}

/* log2(e), for exp(x) = 2^(x * log2(e)). */
#define LOG2_E 1.4426950408889634

static LLVMValueRef math_scalar(Lower *L, OpKind kind, LLVMValueRef a, ScalarKind k) {
  if (narrow_float(k)) return float_to_float(L, math_scalar(L, kind, float_to_float(L, a, k, SK_F32), SK_F32), SK_F32, k);
  LLVMTypeRef t = llvm_elem_type(L, k);
  bool f64 = k == SK_F64;
  /* f32 exp and exp2 use the special-function unit's ex2.approx (relative
   * error about 2^-22, plus |x| * 2^-24 for exp from rounding x * log2(e)),
   * which the spec allows; this is what bounds softmax and attention. */
  if (!f64 && (kind == OP_EXP || kind == OP_EXP2)) {
    LLVMValueRef x = kind == OP_EXP ? LLVMBuildFMul(L->b, a, LLVMConstReal(t, LOG2_E), "") : a;
    /* .ftz: results below 2^-126 are zero (spec: On the GPU). Keeping
     * them costs ptxas three more instructions per exponential (a scaled
     * ex2 and a square), a third of flash attention's softmax. */
    return call_intrinsic(L, "llvm.nvvm.ex2.approx.ftz.f", t, &x, 1);
  }
  char name[48];
  const char *nv = libdevice_name(kind);
  if (nv) {
    snprintf(name, sizeof name, "%s%s", nv, f64 ? "" : "f");
    return call_intrinsic(L, name, t, &a, 1);
  }
  const char *suffix = f64 ? "f64" : "f32";
  switch (kind) {
  case OP_SQRT: snprintf(name, sizeof name, "llvm.sqrt.%s", suffix); break;
  case OP_FLOOR: snprintf(name, sizeof name, "llvm.floor.%s", suffix); break;
  case OP_CEIL: snprintf(name, sizeof name, "llvm.ceil.%s", suffix); break;
  case OP_ABS: snprintf(name, sizeof name, "llvm.fabs.%s", suffix); break;
  case OP_SIGMOID: {
    LLVMValueRef e = math_scalar(L, OP_EXP, LLVMBuildFNeg(L->b, a, ""), k);
    LLVMValueRef one = LLVMConstReal(t, 1.0);
    return LLVMBuildFDiv(L->b, one, LLVMBuildFAdd(L->b, one, e, ""), "");
  }
  default: return NULL;
  }
  return call_intrinsic(L, name, t, &a, 1);
}

/* -x or abs(x) of an i8/i16, in 32 bits and cut back to 16 by a move.
 * ptxas takes neg.s16/abs.s16 of a sign-extended value to be sign-extended
 * in its 32-bit register and drops a later cvt.s32.s16, which is wrong for
 * the one value that wraps (-32768 came out as +32768; tile-gpu diff found
 * it). An i8 goes through its i16 sign extension. */
static LLVMValueRef narrow_neg_abs(Lower *L, LLVMValueRef a, ScalarKind k, bool abs) {
  LLVMValueRef h = k == SK_I8 ? LLVMBuildSExt(L->b, a, L->t_i16, "") : a;
  const char *text = abs ? "{\n.reg .b32 t;\ncvt.s32.s16 t, $1;\nabs.s32 t, t;\ncvt.u16.u32 $0, t;\n}"
                         : "{\n.reg .b32 t;\ncvt.s32.s16 t, $1;\nneg.s32 t, t;\ncvt.u16.u32 $0, t;\n}";
  LLVMValueRef r = inline_asm(L, text, "=h,h", L->t_i16, &h, 1);
  return k == SK_I8 ? LLVMBuildTrunc(L->b, r, L->t_i8, "") : r;
}

static LLVMValueRef unary_scalar(Lower *L, OpKind kind, LLVMValueRef a, ScalarKind k) {
  bool fl = scalar_is_float(k);
  switch (kind) {
  case OP_NEG:
    if (fl) return narrow_float(k) ? float_to_float(L, LLVMBuildFNeg(L->b, float_to_float(L, a, k, SK_F32), ""), SK_F32, k)
                                   : LLVMBuildFNeg(L->b, a, "");
    if (k == SK_I8 || k == SK_I16) return narrow_neg_abs(L, a, k, false);
    return LLVMBuildSub(L->b, const_int(L, LLVMTypeOf(a), 0), a, "");
  case OP_NOT: return LLVMBuildNot(L->b, a, "");
  case OP_ABS:
    if (!fl) {
      if (is_unsigned_kind(k)) return a;
      if (k == SK_I8 || k == SK_I16) return narrow_neg_abs(L, a, k, true);
      /* ptxas folds abs.s32(x) < 0 to false (wrong for the most negative
       * value, tile-gpu diff found it): a select it does not fold */
      bool w = k == SK_I64 || k == SK_U64;
      return inline_asm(L,
                        w ? "{\n.reg .pred p;\nsetp.lt.s64 p, $1, 0;\nmov.b64 $0, $1;\n@p sub.s64 $0, 0, $1;\n}"
                          : "{\n.reg .pred p;\nsetp.lt.s32 p, $1, 0;\nmov.b32 $0, $1;\n@p sub.s32 $0, 0, $1;\n}",
                        w ? "=l,l" : "=r,r", LLVMTypeOf(a), &a, 1);
    }
    return math_scalar(L, kind, a, k);
  default: return math_scalar(L, kind, a, k);
  }
}

/* ---- constants and indices ---- */

static LLVMValueRef const_scalar(Lower *L, const Op *op) {
  TType t = op->results[0].type;
  ScalarKind k = (ScalarKind)t.kind;
  if (!scalar_is_float(k)) return const_int(L, llvm_elem_type(L, k), op->attr[0]);
  if (is_fp8(k)) /* the byte pattern, encoded like the interpreter does */
    return const_int(L, L->t_i8, (int64_t)num_encode((Slot){.f = op->fattr}, k));
  return LLVMConstReal(llvm_elem_type(L, k), op->fattr);
}

static LTile *lower_const(Lower *L, const Op *op, const Layout *l) {
  LTile *t = lt_new(L, l);
  LLVMValueRef c = const_scalar(L, op);
  for (int r = 0; r < t->nregs; r++) t->regs[r] = c;
  return t;
}

static LTile *lower_arange(Lower *L, const Op *op, const Layout *l) {
  LTile *t = lt_new(L, l);
  for (int r = 0; r < t->nregs; r++) {
    LLVMValueRef c = coord_of(L, l, flat_index(L, l, (uint32_t)r), 0);
    t->regs[r] = op->attr[0] ? LLVMBuildAdd(L->b, c, const_i32(L, op->attr[0]), "") : c;
  }
  return t;
}

static LTile *lower_program_id(Lower *L, const Op *op, const Layout *l) {
  static const char *const ids[] = {"llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.ctaid.y",
                                    "llvm.nvvm.read.ptx.sreg.ctaid.z"};
  static const char *const counts[] = {"llvm.nvvm.read.ptx.sreg.nctaid.x", "llvm.nvvm.read.ptx.sreg.nctaid.y",
                                       "llvm.nvvm.read.ptx.sreg.nctaid.z"};
  LTile *t = lt_new(L, l);
  int axis = (int)op->attr[0];
  t->regs[0] = call_intrinsic(L, op->kind == OP_PROGRAM_ID ? ids[axis] : counts[axis], L->t_i32, NULL, 0);
  return t;
}

/* ---- shapes ---- */

/* Drops from a flat index of shape `from` the bits of the dimensions where
 * `to` has size 1 (and `from` does not). */
static uint32_t flat_drop_dims(int rank, const int32_t *from, const int32_t *to, uint32_t flat) {
  uint32_t out = 0;
  int in_pos = 0, out_pos = 0;
  for (int d = rank - 1; d >= 0; d--) {
    int bits = __builtin_ctz((unsigned)from[d]);
    if (to[d] == from[d]) {
      out |= ((flat >> in_pos) & ((1u << bits) - 1)) << out_pos;
      out_pos += bits;
    }
    in_pos += bits;
  }
  return out;
}

static LTile *lower_broadcast(Lower *L, const Op *op, const Layout *l) {
  const Value *src = op->operands[0];
  LTile *t = lt_new(L, l);
  if (src->type.rank == 0) {
    LTile *s = get_fixed(L, src);
    if (!s) return NULL;
    for (int r = 0; r < t->nregs; r++) t->regs[r] = s->regs[0];
    return t;
  }
  Layout *pl = ARENA_NEW(&L->arena, Layout);
  *pl = layout_project(l, src->type.rank, src->type.shape);
  LTile *s = get_tile(L, src, pl);
  if (!s) return NULL;
  /* Result register r holds the element whose projection is some operand
   * register's element in the same thread. */
  for (int r = 0; r < t->nregs; r++) {
    uint32_t want = flat_drop_dims(l->rank, l->shape, src->type.shape, layout_apply(l, (uint32_t)r, 0, 0));
    int found = -1;
    for (int q = 0; q < s->nregs && found < 0; q++)
      if (layout_apply(pl, (uint32_t)q, 0, 0) == want) found = q;
    if (found < 0) {
      lower_error(L, op, "internal: broadcast register mapping");
      return NULL;
    }
    t->regs[r] = s->regs[found];
  }
  return t;
}

/* expand_dims, reshape and trans keep every register; only the layout's
 * shape changes. */
static LTile *lower_relabel(Lower *L, const Op *op, const Layout *l) {
  const Value *src = op->operands[0];
  Layout *sl = ARENA_NEW(&L->arena, Layout);
  if (op->kind == OP_TRANS) {
    int32_t inv[TILE_MAX_RANK];
    for (int i = 0; i < l->rank; i++) inv[(op->attr[0] >> (4 * i)) & 0xF] = i;
    *sl = layout_trans(l, inv);
  } else {
    *sl = layout_reshape(l, src->type.rank, src->type.shape);
  }
  LTile *s = src->type.rank ? get_tile(L, src, sl) : get_fixed(L, src);
  if (!s) return NULL;
  LTile *t = lt_new(L, l);
  if (t->nregs != s->nregs) {
    lower_error(L, op, "internal: relabel register count");
    return NULL;
  }
  memcpy(t->regs, s->regs, sizeof(LLVMValueRef) * (size_t)t->nregs);
  return t;
}

/* ---- elementwise ---- */

/* A dot's accumulator scaled by a factor per row, `dot(a, b, acc *
 * alpha[:, None])` (online softmax's rescale): skipped, per thread, when
 * all of the thread's factors are exactly 1, which an online softmax that
 * raises its reference maximum only in steps (flash_attention_ws.tile)
 * makes the common case. Exact: x * 1.0 is x for every x (a NaN keeps its
 * payload instead of becoming the canonical NaN). Worth a compare and a
 * branch when each distinct factor scales at least SCALE_SKIP_MIN_REGS
 * registers. */
#define SCALE_SKIP_MIN_REGS 8
#define SCALE_SKIP_MAX_FACTORS 16

/* Uses of `v` as the accumulator of a dot among the ops after `op` in its
 * block. */
static int dot_accumulator_uses(const Op *op, const Value *v) {
  int n = 0;
  for (const Op *o = op->next; o; o = o->next)
    n += (o->kind == OP_DOT || o->kind == OP_WGMMA) && o->noperands > 2 && o->operands[2] == v;
  return n;
}

bool is_skippable_rescale(Lower *L, const Op *op, bool *only_dots) {
  const Value *f = op->noperands == 2 ? op->operands[1] : NULL;
  if (op->kind != OP_MUL || op->operands[0]->type.kind != SK_F32 || op->operands[0]->type.rank != 2 || !f ||
      f->type.rank != 2 || !f->def || f->def->kind != OP_BROADCAST)
    return false;
  int n = dot_accumulator_uses(op, &op->results[0]);
  *only_dots = n > 0 && n == use_count(L, &op->results[0]);
  return n > 0;
}

/* The distinct registers of a broadcast operand, or 0 if there are too many. */
static int distinct_regs(const LTile *t, LLVMValueRef *out) {
  int n = 0;
  for (int r = 0; r < t->nregs; r++) {
    bool seen = false;
    for (int i = 0; i < n && !seen; i++) seen = out[i] == t->regs[r];
    if (seen) continue;
    if (n == SCALE_SKIP_MAX_FACTORS) return 0;
    out[n++] = t->regs[r];
  }
  return n;
}

/* Whether some thread of the warpgroup has `c` set, in every thread of
 * it: barrier.red.or over the warpgroup's own named barrier. */
static LLVMValueRef warpgroup_any(Lower *L, LLVMValueRef c) {
  LLVMValueRef args[2] = {LLVMBuildZExt(L->b, c, L->t_i32, ""), warpgroup_barrier_id(L)};
  LLVMValueRef r = llvm_asm(L,
                            "{ .reg .pred p, q; setp.ne.u32 p, $1, 0; barrier.red.or.pred q, $2, 128, p; "
                            "selp.u32 $0, 1, 0, q; }",
                            "=r,r,r,~{memory}", L->t_i32, args, 2, true);
  mark_convergent(L, r);
  return LLVMBuildICmp(L->b, LLVMIntNE, r, const_i32(L, 0), "wg_any");
}

/* x * f; with `wait`, x may still be in flight and the wait goes on the
 * path that multiplies. NULL if skipping is not worth it (and then the
 * wait has not been emitted). */
static LTile *lower_skippable_scale(Lower *L, const Layout *l, LTile *x, LTile *f, const Op *wait) {
  LLVMValueRef fs[SCALE_SKIP_MAX_FACTORS];
  int n = distinct_regs(f, fs);
  if (!n || n * SCALE_SKIP_MIN_REGS > x->nregs) return NULL;
  /* wgmma.wait_group must be executed by every thread of a warpgroup or
   * none: the branch with the wait is taken by the whole warpgroup (a
   * vote on a named barrier, one per warpgroup) */
  if (wait && !warpgroup_barriers_fit(L)) return NULL;
  LLVMTypeRef ft = LLVMTypeOf(fs[0]);
  LLVMValueRef any = NULL;
  for (int i = 0; i < n; i++) {
    /* unordered: a NaN factor multiplies */
    LLVMValueRef c = LLVMBuildFCmp(L->b, LLVMRealUNE, fs[i], LLVMConstReal(ft, 1.0), "");
    any = any ? LLVMBuildOr(L->b, any, c, "") : c;
  }
  if (wait) any = warpgroup_any(L, any);
  LLVMBasicBlockRef from = LLVMGetInsertBlock(L->b), mul = new_block(L, "scale"), join = new_block(L, "scale.end");
  LLVMBuildCondBr(L->b, any, mul, join);
  LLVMPositionBuilderAtEnd(L->b, mul);
  LTile *t = lt_new(L, l), *xw = x;
  if (wait) {
    xw = lt_copy(L, x);
    emit_wgmma_wait(L, wait, xw);
  }
  for (int r = 0; r < t->nregs; r++) t->regs[r] = LLVMBuildFMul(L->b, xw->regs[r], f->regs[r], "");
  mul = LLVMGetInsertBlock(L->b);
  LLVMBuildBr(L->b, join);
  LLVMPositionBuilderAtEnd(L->b, join);
  for (int r = 0; r < t->nregs; r++) {
    LLVMValueRef phi = LLVMBuildPhi(L->b, ft, "");
    LLVMValueRef vals[2] = {x->regs[r], t->regs[r]};
    LLVMBasicBlockRef blocks[2] = {from, mul};
    LLVMAddIncoming(phi, vals, blocks, 2);
    t->regs[r] = phi;
  }
  return t;
}

static LTile *lower_elementwise(Lower *L, const Op *op, const Layout *l) {
  LTile *in[3] = {NULL, NULL, NULL};
  /* an accumulator whose wait lower_wgmma_wait left to this op: in
   * another layout it is waited for before it is converted */
  const Op *wait = op->noperands ? ptrmap_get(&L->deferred_waits, op->operands[0]) : NULL;
  if (wait) {
    LTile *fx = get_fixed(L, op->operands[0]);
    if (!fx) return NULL;
    if (!layout_equal(fx->layout, l)) {
      emit_wgmma_wait(L, wait, fx);
      wait = NULL;
    }
  }
  for (uint32_t i = 0; i < op->noperands; i++) {
    const Value *v = op->operands[i];
    in[i] = v->type.rank ? get_tile(L, v, l) : get_fixed(L, v);
    if (!in[i]) return NULL;
  }
  ScalarKind k = (ScalarKind)op->operands[0]->type.kind;
  ScalarKind rk = (ScalarKind)op->results[0].type.kind;
  bool only_dots = false;
  if (is_skippable_rescale(L, op, &only_dots) && in[0]->nregs == in[1]->nregs) {
    LTile *t = lower_skippable_scale(L, l, in[0], in[1], wait);
    if (t) return t;
  }
  if (wait) { /* not skipped after all: wait here */
    in[0] = lt_copy(L, in[0]);
    emit_wgmma_wait(L, wait, in[0]);
  }
  LTile *t = lt_new(L, l);
  /* f32 (or narrower) -> fp8 two registers a cvt: half the conversions
   * (flash_attention_ws_fp8's P) */
  if (op->kind == OP_CAST && is_fp8(rk) && scalar_is_float(k) && !is_fp8(k) && t->nregs % 2 == 0 &&
      in[0]->nregs == t->nregs) {
    for (int r = 0; r < t->nregs; r += 2)
      f32_pair_to_fp8(L, float_to_float(L, in[0]->regs[r], k, SK_F32), float_to_float(L, in[0]->regs[r + 1], k, SK_F32),
                      rk, &t->regs[r], &t->regs[r + 1]);
    return t;
  }
  for (int r = 0; r < t->nregs; r++) {
    LLVMValueRef a[3];
    for (uint32_t i = 0; i < op->noperands; i++) a[i] = in[i]->regs[in[i]->nregs == 1 ? 0 : r];
    LLVMValueRef v = NULL;
    switch (op->kind) {
    case OP_CMP_EQ: case OP_CMP_NE: case OP_CMP_LT: case OP_CMP_LE: case OP_CMP_GT: case OP_CMP_GE:
      v = compare_scalar(L, (OpKind)op->kind, a[0], a[1], k);
      break;
    case OP_PTR_ADD: {
      ScalarKind ok = (ScalarKind)op->operands[1]->type.kind;
      LLVMValueRef off = cast_scalar(L, a[1], ok, is_unsigned_kind(ok) ? SK_U64 : SK_I64);
      ScalarKind pointee = (ScalarKind)op->operands[0]->type.pointee;
      v = LLVMBuildGEP2(L->b, llvm_mem_type(L, pointee), a[0], &off, 1, "");
      break;
    }
    case OP_CAST: v = cast_scalar(L, a[0], k, rk); break;
    case OP_BITCAST: v = bitcast_scalar(L, a[0], k, rk); break;
    case OP_SELECT: v = LLVMBuildSelect(L->b, a[0], a[1], a[2], ""); break;
    case OP_FMA: {
      ScalarKind ck = narrow_float(rk) ? SK_F32 : rk;
      LLVMValueRef args[3] = {float_to_float(L, a[0], rk, ck), float_to_float(L, a[1], rk, ck),
                              float_to_float(L, a[2], rk, ck)};
      v = float_to_float(L, call_intrinsic(L, ck == SK_F64 ? "llvm.fma.f64" : "llvm.fma.f32", llvm_elem_type(L, ck), args, 3),
                         ck, rk);
      break;
    }
    default:
      v = op->noperands == 2 ? lower_binary_scalar(L, (OpKind)op->kind, a[0], a[1], k)
                             : unary_scalar(L, (OpKind)op->kind, a[0], k);
    }
    if (!v) {
      lower_error(L, op, "'%s' is not supported by the GPU back end", op_info[op->kind].name);
      return NULL;
    }
    t->regs[r] = v;
  }
  return t;
}

LTile *lower_value_op(Lower *L, const Op *op, const Layout *l) {
  switch (op->kind) {
  case OP_CONST: return lower_const(L, op, l);
  case OP_ARANGE: return lower_arange(L, op, l);
  case OP_PROGRAM_ID:
  case OP_NUM_PROGRAMS: return lower_program_id(L, op, l);
  case OP_BROADCAST: return lower_broadcast(L, op, l);
  case OP_EXPAND_DIMS:
  case OP_RESHAPE:
  case OP_TRANS: return lower_relabel(L, op, l);
  case OP_SMEM_LOAD: return lower_smem_load(L, op, l);
  default: return lower_elementwise(L, op, l);
  }
}
