/* codegen/llvm_expr.c: values in LLVM IR: dtypes as LLVM types, half and 8-bit float conversions, the
 * elementwise prims (intrinsics, libm, straight-line exp/tanh/erf), conversions and kernel expressions. */
#include "codegen/llvm_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- types */

/* register type: half types are computed in float */
LLVMTypeRef lv_reg_type(lctx *L, pc_dtype t) {
  static const int kinds[PC_DTYPE_COUNT] = {[PC_f16] = 32, [PC_bf16] = 32, [PC_f32] = 32, [PC_f64] = 64,
                                            [PC_i8] = 8,   [PC_i16] = 16,  [PC_i32] = 32, [PC_i64] = 64,
                                            [PC_u8] = 8,   [PC_bool] = 8,  [PC_c64] = 64, /* c64: moved as 64-bit patterns */
                                            [PC_u16] = 16, [PC_u32] = 32,  [PC_u64] = 64,
                                            [PC_f8e4m3fn] = 32, [PC_f8e4m3fnuz] = 32, [PC_f8e5m2] = 32,
                                            [PC_f8e5m2fnuz] = 32, [PC_i4] = 4, [PC_u4] = 4, [PC_i2] = 2, [PC_u2] = 2,
                                            [PC_f4e2m1] = 32, [PC_f8e8m0] = 32};
  if (pc_dtype_is_float(t)) return kinds[t] == 64 ? L->f64 : L->f32;
  return LLVMIntTypeInContext(L->c, (unsigned)kinds[t]);
}

/* in-memory element type */
static LLVMTypeRef mem_type(lctx *L, pc_dtype t) {
  return pc_dtype_is_f8(t) || pc_dtype_subbyte_bits(t) ? L->i8 : dt_narrow(t) ? L->i16 : lv_reg_type(L, t);
}

/* ---------------------------------------------------------------- helpers */


/* a constant global named name holding init */
LLVMValueRef lv_const_global(lctx *L, LLVMValueRef init, const char *name, LLVMLinkage linkage) {
  LLVMValueRef gv = LLVMAddGlobal(L->m, LLVMTypeOf(init), name);
  LLVMSetInitializer(gv, init);
  LLVMSetGlobalConstant(gv, 1);
  LLVMSetLinkage(gv, linkage);
  return gv;
}

LLVMValueRef lv_intrinsic(lctx *L, const char *name, LLVMTypeRef t, LLVMValueRef *args, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(L->m, id, &t, 1);
  LLVMTypeRef ft = LLVMIntrinsicGetType(L->c, id, &t, 1);
  return LLVMBuildCall2(L->b, ft, f, args, n, "");
}

static LLVMValueRef get_fn(lctx *L, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, unsigned n) {
  LLVMValueRef f = LLVMGetNamedFunction(L->m, name);
  LLVMTypeRef ft = LLVMFunctionType(ret, params, n, 0);
  if (!f) f = LLVMAddFunction(L->m, name, ft);
  return f;
}

LLVMValueRef lv_call_fn(lctx *L, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, LLVMValueRef *args,
                        unsigned n) {
  LLVMValueRef f = get_fn(L, name, ret, params, n);
  return LLVMBuildCall2(L->b, LLVMFunctionType(ret, params, n, 0), f, args, n, "");
}

/* libm function of one or two float args: "erf" -> erff for f32 */
static LLVMValueRef libm(lctx *L, const char *base, LLVMTypeRef t, LLVMValueRef *args, unsigned n) {
  char name[32];
  snprintf(name, sizeof name, "%s%s", base, t == L->f32 ? "f" : "");
  LLVMTypeRef ps[2] = {t, t};
  return lv_call_fn(L, name, t, ps, args, n);
}

static LLVMValueRef to_bool(lctx *L, LLVMValueRef i1v) { return LLVMBuildZExt(L->b, i1v, L->i8, ""); }

/* ---------------------------------------------------------------- half conversions */

/* ---- 8-bit floats: decoded through a 256-entry table, encoded in integer IR */

/* f8 byte -> f32: a private constant table per format, filled by ir/types.c's decoder */
static LLVMValueRef f8_to_float(lctx *L, pc_dtype t, LLVMValueRef byte) {
  char name[48];
  snprintf(name, sizeof name, "primc_%s_values", pc_dtype_name(t));
  LLVMValueRef gv = LLVMGetNamedGlobal(L->m, name);
  LLVMTypeRef at = LLVMArrayType2(L->f32, 256);
  if (!gv) {
    LLVMValueRef els[256];
    for (int b = 0; b < 256; b++) els[b] = fconst(L->f32, pc_f8_to_f32(t, (uint8_t)b));
    gv = lv_const_global(L, LLVMConstArray2(L->f32, els, 256), name, LLVMPrivateLinkage);
  }
  LLVMValueRef idx[2] = {ci64(L, 0), LLVMBuildZExt(L->b, byte, L->i64, "")};
  return LLVMBuildLoad2(L->b, L->f32, LLVMBuildInBoundsGEP2(L->b, at, gv, idx, 2, ""), "");
}

static LLVMValueRef ci32(lctx *L, uint32_t v) { return LLVMConstInt(L->i32, v, 0); }

/* f32 -> f8 byte, round to nearest even, no saturation (convert_element_type's rule). Branch-free
 * so loops stay vectorizable. Normal results round the f32 bits directly (a carry walks into the
 * exponent as it should); below the smallest normal, adding 2^(emin - mbits + 23) makes the FPU's own
 * round-to-nearest-even quantize |x| to the subnormal step, whose count the low bits then hold. */
static LLVMValueRef float_to_f8(lctx *L, pc_dtype t, LLVMValueRef f) {
  int e4 = t == PC_f8e4m3fn || t == PC_f8e4m3fnuz, fnuz = t == PC_f8e4m3fnuz || t == PC_f8e5m2fnuz;
  int f4 = t == PC_f4e2m1; /* 4 bits, sign 0x8, no inf or NaN: saturates, NaN gives the other-signed zero */
  int mbits = f4 ? 1 : e4 ? 3 : 2, bias = f4 ? 1 : t == PC_f8e4m3fn ? 7 : t == PC_f8e4m3fnuz ? 8 : t == PC_f8e5m2 ? 15 : 16;
  int emin = 1 - bias, shift = 23 - mbits;
  uint32_t maxcode = f4 ? 0x7 : t == PC_f8e4m3fn ? 0x7e : t == PC_f8e5m2 ? 0x7b : 0x7f;
  LLVMBuilderRef b = L->b;
  LLVMValueRef u = LLVMBuildBitCast(b, f, L->i32, "");
  LLVMValueRef a = LLVMBuildAnd(b, u, ci32(L, 0x7fffffffu), "");
  LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, u, ci32(L, f4 ? 28 : 24), ""), ci32(L, f4 ? 0x8 : 0x80), "");
  /* normal: q = (a + half - 1 + lsb) >> shift, rebiased */
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, a, ci32(L, (uint32_t)shift), ""), ci32(L, 1), "");
  LLVMValueRef r = LLVMBuildAdd(b, a, LLVMBuildAdd(b, lsb, ci32(L, (1u << (shift - 1)) - 1), ""), "");
  LLVMValueRef qn = LLVMBuildSub(b, LLVMBuildLShr(b, r, ci32(L, (uint32_t)shift), ""),
                                 ci32(L, (uint32_t)(127 - bias) << mbits), "");
  /* subnormal: |x| + 2^k with ulp(2^k) = the f8 subnormal step */
  int k = emin - mbits + 23;
  LLVMValueRef ax = lv_intrinsic(L, "llvm.fabs", L->f32, &f, 1);
  LLVMValueRef sum = LLVMBuildFAdd(b, ax, fconst(L->f32, ldexp(1.0, k)), "");
  LLVMValueRef qs = LLVMBuildSub(b, LLVMBuildBitCast(b, sum, L->i32, ""), ci32(L, (uint32_t)(k + 127) << 23), "");
  LLVMValueRef small = LLVMBuildICmp(b, LLVMIntULT, a, ci32(L, (uint32_t)(emin + 127) << 23), "");
  LLVMValueRef q = LLVMBuildSelect(b, small, qs, qn, "");
  uint32_t nan = fnuz ? 0x80u : t == PC_f8e4m3fn ? 0x7fu : 0x7eu;
  LLVMValueRef nanv = f4 ? LLVMBuildXor(b, sign, ci32(L, 0x8), "") : fnuz ? ci32(L, nan) : LLVMBuildOr(b, sign, ci32(L, nan), "");
  LLVMValueRef over = t == PC_f8e5m2 ? LLVMBuildOr(b, sign, ci32(L, 0x7c), "")   /* inf */
                      : f4           ? LLVMBuildOr(b, sign, ci32(L, maxcode), "") /* saturates */
                                     : nanv;
  LLVMValueRef res = LLVMBuildOr(b, sign, q, "");
  if (fnuz) res = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, q, ci32(L, 0), ""), ci32(L, 0), res, ""); /* no -0 */
  res = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, q, ci32(L, maxcode), ""), over, res, "");
  res = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, a, ci32(L, 0x7f800000u), ""), nanv, res, "");
  return LLVMBuildTrunc(b, res, L->i8, "");
}

/* f32 -> f8e8m0: the exponent field (the sign dropped; inf and NaN give the NaN 0xff), as ir/types.c */
static LLVMValueRef float_to_e8m0(lctx *L, LLVMValueRef f) {
  LLVMValueRef u = LLVMBuildBitCast(L->b, f, L->i32, "");
  return LLVMBuildTrunc(L->b, LLVMBuildLShr(L->b, u, ci32(L, 23), ""), L->i8, "");
}

/* An f16 widened by fpext alone lets InstCombine narrow each compare of such values (and of one with a constant)
 * back to a compare of halves, which x86 without AVX512-FP16 lowers one element at a time with branches (an f16
 * ReLU ran 8 ns an element, a max pool 12 ms). Clearing the 13 low mantissa bits, zero in every widened half, NaNs
 * too, hides the fpext from it: the compares stay vector compares of floats, for one vandps. */
static LLVMValueRef half_to_float(lctx *L, pc_dtype t, LLVMValueRef bits) {
  if (pc_dtype_is_f8(t)) return f8_to_float(L, t, bits);
  if (t == PC_f16) {
    LLVMValueRef f = LLVMBuildFPExt(L->b, LLVMBuildBitCast(L->b, bits, L->f16, ""), L->f32, "");
    if (L->f16_native) return f;
    LLVMValueRef u = LLVMBuildAnd(L->b, LLVMBuildBitCast(L->b, f, L->i32, ""), LLVMConstInt(L->i32, 0xffffe000u, 0), "");
    return LLVMBuildBitCast(L->b, u, L->f32, "");
  }
  LLVMValueRef w = LLVMBuildShl(L->b, LLVMBuildZExt(L->b, bits, L->i32, ""), LLVMConstInt(L->i32, 16, 0), "");
  return LLVMBuildBitCast(L->b, w, L->f32, "");
}

/* bf16 rounding done in integers, the same way as pc_f32_to_bf16 */
static LLVMValueRef float_to_half(lctx *L, pc_dtype t, LLVMValueRef f) {
  if (t == PC_f8e8m0) return float_to_e8m0(L, f);
  if (pc_dtype_is_f8(t)) return float_to_f8(L, t, f);
  if (t == PC_f16) return LLVMBuildBitCast(L->b, LLVMBuildFPTrunc(L->b, f, L->f16, ""), L->i16, "");
  LLVMValueRef u = LLVMBuildBitCast(L->b, f, L->i32, "");
  LLVMValueRef hi = LLVMBuildLShr(L->b, u, LLVMConstInt(L->i32, 16, 0), "");
  LLVMValueRef nan = LLVMBuildFCmp(L->b, LLVMRealUNO, f, f, "");
  LLVMValueRef qn = LLVMBuildOr(L->b, hi, LLVMConstInt(L->i32, 0x40, 0), "");
  LLVMValueRef odd = LLVMBuildAnd(L->b, hi, LLVMConstInt(L->i32, 1, 0), "");
  LLVMValueRef r = LLVMBuildAdd(L->b, u, LLVMBuildAdd(L->b, odd, LLVMConstInt(L->i32, 0x7fff, 0), ""), "");
  r = LLVMBuildLShr(L->b, r, LLVMConstInt(L->i32, 16, 0), "");
  return LLVMBuildTrunc(L->b, LLVMBuildSelect(L->b, nan, qn, r, ""), L->i16, "");
}

static LLVMValueRef round_half(lctx *L, pc_dtype t, LLVMValueRef v) {
  return dt_narrow(t) ? half_to_float(L, t, float_to_half(L, t, v)) : v;
}

/* ---------------------------------------------------------------- elementwise prims */

static LLVMValueRef e_neg(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return pc_dtype_is_float(t) ? LLVMBuildFNeg(L->b, a[0], "") : LLVMBuildNeg(L->b, a[0], "");
}
static LLVMValueRef e_abs(lctx *L, pc_dtype t, LLVMValueRef *a) {
  if (pc_dtype_is_float(t)) return lv_intrinsic(L, "llvm.fabs", T(L, t), a, 1);
  if (dt_unsigned(t)) return a[0];
  LLVMValueRef neg = LLVMBuildICmp(L->b, LLVMIntSLT, a[0], LLVMConstNull(T(L, t)), "");
  return LLVMBuildSelect(L->b, neg, LLVMBuildNeg(L->b, a[0], ""), a[0], "");
}
#define FINTR(nm, intr) \
  static LLVMValueRef e_##nm(lctx *L, pc_dtype t, LLVMValueRef *a) { return lv_intrinsic(L, intr, T(L, t), a, 1); }
/* exp on f32 as straight-line IR (range reduction + degree-7 polynomial, about 1 ulp) so
 * the loop vectorizer keeps it in zmm registers; libm's expf is a scalar call. Below lo the result is 0
 * and the lane computes e^0: computing at lo made a subnormal product, and each is a microcode assist on
 * x86 (a causal softmax's -inf scores ran 4-5x slower) */
static LLVMValueRef fast_expf(lctx *L, LLVMValueRef x) {
  LLVMTypeRef f = L->f32;
  LLVMValueRef hi = fconst(f, 88.72283935546875), lo = fconst(f, -103.97208404541016); /* subnormals kept */
  LLVMValueRef xc = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOGT, x, hi, ""), hi, x, "");
  xc = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, xc, lo, ""), fconst(f, 0), xc, "");
  LLVMValueRef t = LLVMBuildFMul(L->b, xc, fconst(f, 1.4426950408889634), "");
  LLVMValueRef n = lv_intrinsic(L, "llvm.roundeven", f, &t, 1);
  LLVMValueRef r = LLVMBuildFSub(L->b, xc, LLVMBuildFMul(L->b, n, fconst(f, 0.693145751953125), ""), "");
  r = LLVMBuildFSub(L->b, r, LLVMBuildFMul(L->b, n, fconst(f, 1.428606765330187e-06), ""), "");
  static const double c[8] = {1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1};
  LLVMValueRef pl = fconst(f, c[0]);
  for (int i = 1; i < 8; i++) {
    LLVMValueRef a[3] = {pl, r, fconst(f, c[i])};
    pl = lv_intrinsic(L, "llvm.fmuladd", f, a, 3);
  }
  /* 2^n split in two factors so that n = 128 (x near the top) does not overflow the exponent */
  LLVMValueRef ni = LLVMBuildFPToSI(L->b, n, L->i32, "");
  LLVMValueRef n1 = LLVMBuildAShr(L->b, ni, LLVMConstInt(L->i32, 1, 0), ""), n2 = LLVMBuildSub(L->b, ni, n1, "");
  LLVMValueRef s1 = LLVMBuildBitCast(L->b, LLVMBuildShl(L->b, LLVMBuildAdd(L->b, n1, LLVMConstInt(L->i32, 127, 0), ""), LLVMConstInt(L->i32, 23, 0), ""), f, "");
  LLVMValueRef s2 = LLVMBuildBitCast(L->b, LLVMBuildShl(L->b, LLVMBuildAdd(L->b, n2, LLVMConstInt(L->i32, 127, 0), ""), LLVMConstInt(L->i32, 23, 0), ""), f, "");
  LLVMValueRef y = LLVMBuildFMul(L->b, LLVMBuildFMul(L->b, pl, s1, ""), s2, "");
  y = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOGT, x, hi, ""), fconst(f, __builtin_inf()), y, "");
  y = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, x, lo, ""), fconst(f, 0), y, "");
  return LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealUNO, x, x, ""), x, y, "");
}
static LLVMValueRef emit_exp(lctx *L, pc_dtype t, LLVMValueRef x) {
  return T(L, t) == L->f32 ? fast_expf(L, x) : lv_intrinsic(L, "llvm.exp", T(L, t), &x, 1);
}
static LLVMValueRef e_exp(lctx *L, pc_dtype t, LLVMValueRef *a) { return emit_exp(L, t, a[0]); }

/* tanh on f32, vectorizable: odd Taylor polynomial below |x| = 0.3 (where 1 - 2/(e^2x + 1)
 * would cancel), that formula above, sign restored; a few ulp */
static LLVMValueRef fast_tanhf(lctx *L, LLVMValueRef x) {
  LLVMTypeRef f = L->f32;
  LLVMValueRef ax = lv_intrinsic(L, "llvm.fabs", f, &x, 1);
  LLVMValueRef e = fast_expf(L, LLVMBuildFMul(L->b, ax, fconst(f, 2), ""));
  LLVMValueRef big = LLVMBuildFSub(L->b, fconst(f, 1),
                                   LLVMBuildFDiv(L->b, fconst(f, 2), LLVMBuildFAdd(L->b, e, fconst(f, 1), ""), ""), "");
  big = lv_intrinsic(L, "llvm.copysign", f, (LLVMValueRef[]){big, x}, 2);
  static const double c[5] = {62.0 / 2835, -17.0 / 315, 2.0 / 15, -1.0 / 3, 1};
  LLVMValueRef x2 = LLVMBuildFMul(L->b, x, x, ""), pl = fconst(f, c[0]);
  for (int i = 1; i < 5; i++) pl = lv_intrinsic(L, "llvm.fmuladd", f, (LLVMValueRef[]){pl, x2, fconst(f, c[i])}, 3);
  LLVMValueRef small = LLVMBuildFMul(L->b, pl, x, "");
  return LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, ax, fconst(f, 0.3), ""), small, big, "");
}
static LLVMValueRef e_tanh(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return T(L, t) == L->f32 ? fast_tanhf(L, a[0]) : libm(L, "tanh", T(L, t), a, 1);
}
/* c[0] v^(n-1) + ... + c[n-1], by fused multiply-adds */
static LLVMValueRef horner(lctx *L, const double *c, int n, LLVMValueRef v) {
  LLVMValueRef r = fconst(L->f32, c[0]);
  for (int i = 1; i < n; i++) r = lv_intrinsic(L, "llvm.fmuladd", L->f32, (LLVMValueRef[]){r, v, fconst(L->f32, c[i])}, 3);
  return r;
}
/* log on f32 as straight-line IR, vectorizable (llvm.log is a scalar logf call per lane): x = 2^k m with
 * m in [sqrt(2)/2, sqrt(2)), log(m) = f - (f^2/2 - s (f^2/2 + R(z))) with f = m - 1, s = f / (2 + f), z = s^2
 * and R(z) = Lg1 z + Lg2 z^2 + Lg3 z^3 + Lg4 z^4 (the minimax coefficients of FreeBSD's e_logf.c); ln 2 in
 * two parts so that k ln 2 is exact; subnormals scaled by 2^23 first. About 1 ulp. */
static LLVMValueRef fast_logf(lctx *L, LLVMValueRef x) {
  static const double lg[4] = {0.24279078841, 0.28498786688, 0.40000972152, 0.66666662693}; /* Lg4..Lg1 */
  LLVMTypeRef f = L->f32;
  LLVMBuilderRef b = L->b;
  LLVMValueRef sub = LLVMBuildFCmp(b, LLVMRealOLT, x, fconst(f, 0x1p-126), "");
  LLVMValueRef xs = LLVMBuildSelect(b, sub, LLVMBuildFMul(b, x, fconst(f, 0x1p23), ""), x, "");
  LLVMValueRef bits = LLVMBuildBitCast(b, xs, L->i32, "");
  LLVMValueRef k = LLVMBuildSub(b, LLVMBuildLShr(b, bits, ci32(L, 23), ""), ci32(L, 127), "");
  k = LLVMBuildSelect(b, sub, LLVMBuildSub(b, k, ci32(L, 23), ""), k, "");
  LLVMValueRef m = LLVMBuildBitCast(b, LLVMBuildOr(b, LLVMBuildAnd(b, bits, ci32(L, 0x7fffff), ""), ci32(L, 0x3f800000), ""), f, "");
  LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, m, fconst(f, 1.41421356237309505), "");
  m = LLVMBuildSelect(b, big, LLVMBuildFMul(b, m, fconst(f, 0.5), ""), m, "");
  k = LLVMBuildSelect(b, big, LLVMBuildAdd(b, k, ci32(L, 1), ""), k, "");
  LLVMValueRef fr = LLVMBuildFSub(b, m, fconst(f, 1), "");
  LLVMValueRef sv = LLVMBuildFDiv(b, fr, LLVMBuildFAdd(b, fr, fconst(f, 2), ""), "");
  LLVMValueRef z = LLVMBuildFMul(b, sv, sv, ""), w = LLVMBuildFMul(b, z, z, "");
  LLVMValueRef t1 = LLVMBuildFMul(b, w, horner(L, (const double[]){lg[0], lg[2]}, 2, w), "");
  LLVMValueRef t2 = LLVMBuildFMul(b, z, horner(L, (const double[]){lg[1], lg[3]}, 2, w), "");
  LLVMValueRef R = LLVMBuildFAdd(b, t2, t1, ""), hfsq = LLVMBuildFMul(b, LLVMBuildFMul(b, fr, fr, ""), fconst(f, 0.5), "");
  LLVMValueRef dk = LLVMBuildSIToFP(b, k, f, "");
  LLVMValueRef lo = LLVMBuildFAdd(b, LLVMBuildFMul(b, sv, LLVMBuildFAdd(b, hfsq, R, ""), ""),
                                  LLVMBuildFMul(b, dk, fconst(f, 9.0580006145e-06), ""), "");
  LLVMValueRef y = LLVMBuildFSub(b, LLVMBuildFMul(b, dk, fconst(f, 6.9313812256e-01), ""),
                                 LLVMBuildFSub(b, LLVMBuildFSub(b, hfsq, lo, ""), fr, ""), "");
  y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, x, fconst(f, 0), ""), fconst(f, -__builtin_inf()), y, "");
  y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, x, fconst(f, __builtin_inf()), ""), x, y, "");
  /* negative and NaN: NaN */
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealULT, x, fconst(f, 0), ""), fconst(f, __builtin_nan("")), y, "");
}
static LLVMValueRef e_log(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return T(L, t) == L->f32 ? fast_logf(L, a[0]) : lv_intrinsic(L, "llvm.log", T(L, t), a, 1);
}
FINTR(sqrt, "llvm.sqrt")
FINTR(sin, "llvm.sin")
FINTR(cos, "llvm.cos")
FINTR(floor, "llvm.floor")
FINTR(ceil, "llvm.ceil")
FINTR(round, "llvm.roundeven")
#define FLIBM(nm)                                                         \
  static LLVMValueRef e_##nm(lctx *L, pc_dtype t, LLVMValueRef *a) { return libm(L, #nm, T(L, t), a, 1); }
FLIBM(log1p)
FLIBM(expm1)
FLIBM(tan)
/* erf on f32, vectorizable: primc_rt.h's PRIMC_ERF_P and PRIMC_ERFC_R, both branches computed (about 30
 * vector operations per 8 lanes, where the exp, reciprocal and second polynomial of 1 - e^(-x^2) Q(1/x) took 110) */
static LLVMValueRef fast_erff(lctx *L, LLVMValueRef x) {
  static const double p[7] = {PRIMC_ERF_P}, r[PRIMC_ERFC_R_N] = {PRIMC_ERFC_R};
  LLVMTypeRef f = L->f32;
  LLVMBuilderRef b = L->b;
  LLVMValueRef ax = lv_intrinsic(L, "llvm.fabs", f, &x, 1), x2 = LLVMBuildFMul(b, ax, ax, "");
  LLVMValueRef small = LLVMBuildFMul(b, ax, horner(L, p, 7, x2), ""), lt1 = LLVMBuildFCmp(b, LLVMRealOLT, ax, fconst(f, 1), "");
  LLVMValueRef axc = LLVMBuildSelect(b, lt1, fconst(f, 1), ax, "");
  axc = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, axc, fconst(f, PRIMC_ERFC_TO), ""), fconst(f, PRIMC_ERFC_TO), axc, "");
  LLVMValueRef mid = LLVMBuildFSub(b, fconst(f, 1), horner(L, r, PRIMC_ERFC_R_N, LLVMBuildFSub(b, axc, fconst(f, PRIMC_ERFC_AT), "")), "");
  LLVMValueRef y = lv_intrinsic(L, "llvm.copysign", f, (LLVMValueRef[]){LLVMBuildSelect(b, lt1, small, mid, ""), x}, 2);
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, x, ""), x, y, "");
}
static LLVMValueRef e_erf(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return T(L, t) == L->f32 ? fast_erff(L, a[0]) : libm(L, "erf", T(L, t), a, 1);
}

/* u where x is 1 + erf(u) on f32 (GELU's factor), the sum either way round; NULL otherwise */
static const kir_expr *one_plus_erf_arg(const kir_expr *x) {
  if (x->kind != KE_PRIM || x->op != PC_OP_add || x->dtype != PC_f32) return NULL;
  for (int i = 0; i < 2; i++) {
    const kir_expr *c = x->args[1 - i], *t = x->args[i];
    if (c->kind == KE_CONST && c->c == 1.0 && t->kind == KE_PRIM && t->op == PC_OP_erf && t->dtype == PC_f32)
      return t->args[0];
  }
  return NULL;
}

/* 1 + erf(u) to 2e-6 absolute (f32 rounding in the 16th power), for --autocast bf16, where GELU's factor feeds
 * values that round to bf16 (2^-9 relative) and torch.autocast computes GELU in bf16: Abramowitz and Stegun
 * 7.1.28, erf(t) = 1 - r with r = (1 + a1 t + ... + a6 t^6)^-16 for t >= 0 (error 3e-7), so 1 + erf(u) is 2 - r
 * for u >= 0 and r for u < 0, with no cancellation; 16 vector operations where fast_erff and the add take about
 * 35 (a BERT-base encoder's FFN epilogues 9% of its time). Large |u|: r is 0; NaN stays NaN */
static LLVMValueRef fast_one_plus_erf(lctx *L, LLVMValueRef u) {
  static const double a[7] = {4.30638e-5, 2.765672e-4, 1.520143e-4, 9.2705272e-3, 4.22820123e-2, 7.05230784e-2, 1};
  LLVMBuilderRef b = L->b;
  LLVMValueRef t = lv_intrinsic(L, "llvm.fabs", L->f32, &u, 1), p = horner(L, a, 7, t);
  for (int i = 0; i < 4; i++) p = LLVMBuildFMul(b, p, p, ""); /* p^16 */
  LLVMValueRef r = LLVMBuildFDiv(b, fconst(L->f32, 1), p, "");
  LLVMValueRef neg = LLVMBuildFCmp(b, LLVMRealOLT, u, fconst(L->f32, 0), "");
  return LLVMBuildSelect(b, neg, r, LLVMBuildFSub(b, fconst(L->f32, 2), r, ""), "");
}
static LLVMValueRef e_atan2(lctx *L, pc_dtype t, LLVMValueRef *a) { return libm(L, "atan2", T(L, t), a, 2); }
static LLVMValueRef e_rsqrt(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return LLVMBuildFDiv(L->b, fconst(T(L, t), 1), lv_intrinsic(L, "llvm.sqrt", T(L, t), a, 1), "");
}
static LLVMValueRef e_reciprocal(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return LLVMBuildFDiv(L->b, fconst(T(L, t), 1), a[0], "");
}
/* 1 / (1 + e^-|x|) mirrored for x < 0, so neither side overflows: exact down to subnormals */
static LLVMValueRef e_sigmoid(lctx *L, pc_dtype t, LLVMValueRef *a) {
  LLVMTypeRef ty = T(L, t);
  LLVMValueRef ax = lv_intrinsic(L, "llvm.fabs", ty, a, 1);
  LLVMValueRef e = emit_exp(L, t, LLVMBuildFNeg(L->b, ax, ""));
  LLVMValueRef pos = LLVMBuildFDiv(L->b, fconst(ty, 1), LLVMBuildFAdd(L->b, fconst(ty, 1), e, ""), "");
  LLVMValueRef neg = LLVMBuildFDiv(L->b, e, LLVMBuildFAdd(L->b, fconst(ty, 1), e, ""), "");
  return LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, a[0], fconst(ty, 0), ""), neg, pos, "");
}
static LLVMValueRef e_sign(lctx *L, pc_dtype t, LLVMValueRef *a) {
  LLVMTypeRef ty = T(L, t);
  if (pc_dtype_is_float(t)) {
    LLVMValueRef gt = LLVMBuildFCmp(L->b, LLVMRealOGT, a[0], fconst(ty, 0), "");
    LLVMValueRef lt = LLVMBuildFCmp(L->b, LLVMRealOLT, a[0], fconst(ty, 0), "");
    /* NaN stays NaN, either zero gives +0 (numpy and torch: sign(-0.0) = 0.0) */
    LLVMValueRef rest = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealUNO, a[0], a[0], ""), a[0], fconst(ty, 0), "");
    return LLVMBuildSelect(L->b, gt, fconst(ty, 1), LLVMBuildSelect(L->b, lt, fconst(ty, -1), rest, ""), "");
  }
  LLVMValueRef z = LLVMConstNull(ty);
  LLVMValueRef gt = LLVMBuildZExt(L->b, LLVMBuildICmp(L->b, dt_unsigned(t) ? LLVMIntUGT : LLVMIntSGT, a[0], z, ""), ty, "");
  LLVMValueRef lt = LLVMBuildZExt(L->b, LLVMBuildICmp(L->b, dt_unsigned(t) ? LLVMIntULT : LLVMIntSLT, a[0], z, ""), ty, "");
  return LLVMBuildSub(L->b, gt, lt, "");
}
static LLVMValueRef e_not(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return LLVMBuildXor(L->b, a[0], t == PC_bool ? LLVMConstInt(L->i8, 1, 0) : LLVMConstAllOnes(T(L, t)), "");
}
static LLVMValueRef e_isnan(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return to_bool(L, LLVMBuildFCmp(L->b, LLVMRealUNO, a[0], a[0], ""));
}
static LLVMValueRef e_isinf(lctx *L, pc_dtype t, LLVMValueRef *a) {
  LLVMValueRef f = lv_intrinsic(L, "llvm.fabs", T(L, t), a, 1);
  return to_bool(L, LLVMBuildFCmp(L->b, LLVMRealOEQ, f, fconst(T(L, t), __builtin_inf()), ""));
}

#define ARITH(nm, fop, iop)                                                                  \
  static LLVMValueRef e_##nm(lctx *L, pc_dtype t, LLVMValueRef *a) {                         \
    return pc_dtype_is_float(t) ? fop(L->b, a[0], a[1], "") : iop(L->b, a[0], a[1], "");       \
  }
ARITH(add, LLVMBuildFAdd, LLVMBuildAdd)
ARITH(sub, LLVMBuildFSub, LLVMBuildSub)
ARITH(mul, LLVMBuildFMul, LLVMBuildMul)

/* integer division and remainder: x/0 gives 0 and MIN/-1 wraps, instead of trapping */
static LLVMValueRef int_divrem(lctx *L, pc_dtype t, LLVMValueRef *a, int rem) {
  LLVMTypeRef ty = T(L, t);
  LLVMValueRef zero = LLVMConstNull(ty), one = LLVMConstInt(ty, 1, 0), m1 = LLVMConstAllOnes(ty);
  LLVMValueRef is0 = LLVMBuildICmp(L->b, LLVMIntEQ, a[1], zero, "");
  if (dt_unsigned(t)) {
    LLVMValueRef d = LLVMBuildSelect(L->b, is0, one, a[1], "");
    LLVMValueRef r = rem ? LLVMBuildURem(L->b, a[0], d, "") : LLVMBuildUDiv(L->b, a[0], d, "");
    return LLVMBuildSelect(L->b, is0, zero, r, "");
  }
  LLVMValueRef ism1 = LLVMBuildICmp(L->b, LLVMIntEQ, a[1], m1, "");
  LLVMValueRef d = LLVMBuildSelect(L->b, LLVMBuildOr(L->b, is0, ism1, ""), one, a[1], "");
  LLVMValueRef r = rem ? LLVMBuildSRem(L->b, a[0], d, "") : LLVMBuildSDiv(L->b, a[0], d, "");
  LLVMValueRef special = rem ? zero : LLVMBuildNeg(L->b, a[0], "");
  r = LLVMBuildSelect(L->b, ism1, special, r, "");
  return LLVMBuildSelect(L->b, is0, zero, r, "");
}
static LLVMValueRef e_div(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return pc_dtype_is_float(t) ? LLVMBuildFDiv(L->b, a[0], a[1], "") : int_divrem(L, t, a, 0);
}
static LLVMValueRef e_rem(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return pc_dtype_is_float(t) ? LLVMBuildFRem(L->b, a[0], a[1], "") : int_divrem(L, t, a, 1);
}
static LLVMValueRef e_pow(lctx *L, pc_dtype t, LLVMValueRef *a) {
  if (pc_dtype_is_float(t)) return lv_intrinsic(L, "llvm.pow", T(L, t), a, 2);
  LLVMValueRef w[2];
  for (int i = 0; i < 2; i++)
    w[i] = dt_unsigned(t) ? LLVMBuildZExt(L->b, a[i], L->i64, "") : LLVMBuildSExtOrBitCast(L->b, a[i], L->i64, "");
  LLVMTypeRef ps[2] = {L->i64, L->i64};
  return LLVMBuildTruncOrBitCast(L->b, lv_call_fn(L, "primc_ipow", L->i64, ps, w, 2), T(L, t), "");
}
static LLVMValueRef minmax(lctx *L, pc_dtype t, LLVMValueRef *a, int is_max) {
  if (pc_dtype_is_float(t)) {
    /* a NaN operand wins, else the larger (smaller), else b: the interpreter's rule, and one vmaxps
     * plus a NaN blend on x86, where llvm.maximum expands to a long sequence ordering -0 < +0 too */
    LLVMValueRef pick = LLVMBuildFCmp(L->b, is_max ? LLVMRealOGT : LLVMRealOLT, a[0], a[1], "");
    LLVMValueRef r = LLVMBuildSelect(L->b, pick, a[0], a[1], "");
    return LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealUNO, a[0], a[0], ""), a[0], r, "");
  }
  LLVMIntPredicate pr = is_max ? (dt_unsigned(t) ? LLVMIntUGT : LLVMIntSGT) : (dt_unsigned(t) ? LLVMIntULT : LLVMIntSLT);
  return LLVMBuildSelect(L->b, LLVMBuildICmp(L->b, pr, a[0], a[1], ""), a[0], a[1], "");
}
static LLVMValueRef e_max(lctx *L, pc_dtype t, LLVMValueRef *a) { return minmax(L, t, a, 1); }
static LLVMValueRef e_min(lctx *L, pc_dtype t, LLVMValueRef *a) { return minmax(L, t, a, 0); }

/* comparisons: float predicate, signed, unsigned */
#define CMP(nm, fp, sp, up)                                                                        \
  static LLVMValueRef e_##nm(lctx *L, pc_dtype t, LLVMValueRef *a) {                               \
    if (pc_dtype_is_float(t)) return to_bool(L, LLVMBuildFCmp(L->b, fp, a[0], a[1], ""));          \
    return to_bool(L, LLVMBuildICmp(L->b, dt_unsigned(t) ? up : sp, a[0], a[1], ""));              \
  }
CMP(eq, LLVMRealOEQ, LLVMIntEQ, LLVMIntEQ)
CMP(ne, LLVMRealUNE, LLVMIntNE, LLVMIntNE)
CMP(lt, LLVMRealOLT, LLVMIntSLT, LLVMIntULT)
CMP(le, LLVMRealOLE, LLVMIntSLE, LLVMIntULE)
CMP(gt, LLVMRealOGT, LLVMIntSGT, LLVMIntUGT)
CMP(ge, LLVMRealOGE, LLVMIntSGE, LLVMIntUGE)

#define BITS(nm, op) \
  static LLVMValueRef e_##nm(lctx *L, pc_dtype t, LLVMValueRef *a) { return op(L->b, a[0], a[1], ""); }
BITS(and, LLVMBuildAnd)
BITS(or, LLVMBuildOr)
BITS(xor, LLVMBuildXor)

/* shifts by >= the width give 0 (or the sign fill), instead of poison */
static LLVMValueRef shift(lctx *L, pc_dtype t, LLVMValueRef *a, int left) {
  LLVMTypeRef ty = T(L, t);
  unsigned bits = LLVMGetIntTypeWidth(ty);
  LLVMValueRef big = LLVMBuildICmp(L->b, LLVMIntUGE, a[1], LLVMConstInt(ty, bits, 0), "");
  LLVMValueRef amt = LLVMBuildSelect(L->b, big, LLVMConstInt(ty, bits - 1, 0), a[1], "");
  if (left) return LLVMBuildSelect(L->b, big, LLVMConstNull(ty), LLVMBuildShl(L->b, a[0], amt, ""), "");
  if (dt_unsigned(t)) return LLVMBuildSelect(L->b, big, LLVMConstNull(ty), LLVMBuildLShr(L->b, a[0], amt, ""), "");
  return LLVMBuildAShr(L->b, a[0], amt, "");
}
static LLVMValueRef e_shift_left(lctx *L, pc_dtype t, LLVMValueRef *a) { return shift(L, t, a, 1); }
static LLVMValueRef e_shift_right(lctx *L, pc_dtype t, LLVMValueRef *a) { return shift(L, t, a, 0); }
static LLVMValueRef e_where(lctx *L, pc_dtype t, LLVMValueRef *a) {
  LLVMValueRef c = LLVMBuildICmp(L->b, LLVMIntNE, a[0], LLVMConstNull(L->i8), "");
  return LLVMBuildSelect(L->b, c, a[1], a[2], "");
}
static LLVMValueRef e_clamp(lctx *L, pc_dtype t, LLVMValueRef *a) {
  LLVMValueRef mx[2] = {minmax(L, t, a, 1), a[2]};
  return minmax(L, t, mx, 0);
}

ew_fn lv_ew_rule(pc_op op) {
  PC_PRIMS_CHECKED(74); /* a rule per elementwise prim */
  static const ew_fn rules[PC_OP_COUNT] = {
      [PC_OP_neg] = e_neg,     [PC_OP_abs] = e_abs,     [PC_OP_exp] = e_exp,       [PC_OP_log] = e_log,
      [PC_OP_log1p] = e_log1p, [PC_OP_expm1] = e_expm1, [PC_OP_sqrt] = e_sqrt,     [PC_OP_rsqrt] = e_rsqrt,
      [PC_OP_reciprocal] = e_reciprocal, [PC_OP_sin] = e_sin, [PC_OP_cos] = e_cos, [PC_OP_tan] = e_tan,
      [PC_OP_tanh] = e_tanh,   [PC_OP_erf] = e_erf,     [PC_OP_sigmoid] = e_sigmoid, [PC_OP_floor] = e_floor,
      [PC_OP_ceil] = e_ceil,   [PC_OP_round] = e_round, [PC_OP_sign] = e_sign,     [PC_OP_not] = e_not,
      [PC_OP_isnan] = e_isnan, [PC_OP_isinf] = e_isinf, [PC_OP_add] = e_add,       [PC_OP_sub] = e_sub,
      [PC_OP_mul] = e_mul,     [PC_OP_div] = e_div,     [PC_OP_pow] = e_pow,       [PC_OP_rem] = e_rem,
      [PC_OP_max] = e_max,     [PC_OP_min] = e_min,     [PC_OP_atan2] = e_atan2,   [PC_OP_eq] = e_eq,
      [PC_OP_ne] = e_ne,       [PC_OP_lt] = e_lt,       [PC_OP_le] = e_le,         [PC_OP_gt] = e_gt,
      [PC_OP_ge] = e_ge,       [PC_OP_and] = e_and,     [PC_OP_or] = e_or,         [PC_OP_xor] = e_xor,
      [PC_OP_bitwise_and] = e_and, [PC_OP_bitwise_or] = e_or, [PC_OP_bitwise_xor] = e_xor,
      [PC_OP_shift_left] = e_shift_left, [PC_OP_shift_right] = e_shift_right, [PC_OP_where] = e_where,
      [PC_OP_clamp] = e_clamp,
  };
  return rules[op];
}

/* ---------------------------------------------------------------- conversions */

static LLVMValueRef convert(lctx *L, LLVMValueRef v, pc_dtype from, pc_dtype to) {
  LLVMTypeRef tt = T(L, to);
  int ff = pc_dtype_is_float(from), tf = pc_dtype_is_float(to);
  if (to == PC_bool) {
    LLVMValueRef nz = ff ? LLVMBuildFCmp(L->b, LLVMRealUNE, v, fconst(T(L, from), 0), "")
                         : LLVMBuildICmp(L->b, LLVMIntNE, v, LLVMConstNull(T(L, from)), "");
    return to_bool(L, nz);
  }
  if (ff && tf) return round_half(L, to, LLVMBuildFPCast(L->b, v, tt, ""));
  if (ff) return dt_unsigned(to) ? LLVMBuildFPToUI(L->b, v, tt, "") : LLVMBuildFPToSI(L->b, v, tt, "");
  if (tf) return round_half(L, to, dt_unsigned(from) ? LLVMBuildUIToFP(L->b, v, tt, "") : LLVMBuildSIToFP(L->b, v, tt, ""));
  return LLVMBuildIntCast2(L->b, v, tt, !dt_unsigned(from), "");
}

/* ---------------------------------------------------------------- expressions */

void lv_dyn_begin(lctx *L, LLVMValueRef dims) {
  const kir_dyn *d = L->p->dyn;
  for (int s = 0; d && s < d->n_syms; s++) {
    LLVMValueRef at = ci64(L, s);
    L->symv[s] = LLVMBuildLoad2(L->b, L->i64, LLVMBuildInBoundsGEP2(L->b, L->i64, dims, &at, 1, ""), "sym");
  }
}

LLVMValueRef lv_size(lctx *L, const int64_t *field) {
  const kir_poly *q = kir_dyn_poly(L->p, field);
  if (!q) return ci64(L, *field);
  LLVMValueRef sum = NULL;
  for (int t = 0; t < KIR_DYN_TERMS; t++) {
    if (!q->c[t]) continue;
    LLVMValueRef term = ci64(L, q->c[t]);
    for (int s = 0, r = t; s < L->p->dyn->n_syms; s++, r /= 3)
      for (int e = 0; e < r % 3; e++) term = LLVMBuildNSWMul(L->b, term, L->symv[s], "");
    sum = sum ? LLVMBuildNSWAdd(L->b, sum, term, "") : term;
  }
  return sum ? sum : ci64(L, 0);
}

static LLVMValueRef map_index(lctx *L, const kir_map *m, int n_loops) {
  LLVMValueRef idx = lv_size(L, &m->offset);
  for (int k = 0; k < n_loops; k++)
    if (m->stride[k] || kir_dyn_poly(L->p, &m->stride[k]))
      idx = LLVMBuildAdd(L->b, idx, LLVMBuildMul(L->b, L->iv[k], lv_size(L, &m->stride[k]), ""), "");
  return idx;
}

static LLVMValueRef elem_ptr(lctx *L, int buf, pc_dtype t, const kir_map *m, int n_loops) {
  LLVMValueRef idx = map_index(L, m, n_loops);
  return LLVMBuildInBoundsGEP2(L->b, mem_type(L, t), L->bufp[buf], &idx, 1, "");
}

LLVMValueRef lv_emit_expr(lctx *L, const kir_expr *e, int n_loops) {
  switch (e->kind) { /* the renderer's one walk over expression kinds */
  case KE_LOAD: {
    LLVMValueRef v = LLVMBuildLoad2(L->b, mem_type(L, e->dtype), elem_ptr(L, e->buf, e->dtype, &e->map, n_loops), "");
    if (pc_dtype_subbyte_bits(e->dtype)) return LLVMBuildTrunc(L->b, v, lv_reg_type(L, e->dtype), ""); /* i4 etc.: wraps */
    return dt_narrow(e->dtype) ? half_to_float(L, e->dtype, v) : v;
  }
  case KE_CONST:
    if (!pc_dtype_is_float(e->dtype) && kir_dyn_poly(L->p, &e->ci)) /* an int that follows the symbols */
      return LLVMBuildIntCast2(L->b, lv_size(L, &e->ci), T(L, e->dtype), 1, "");
    if (pc_dtype_is_float(e->dtype) && kir_dyn_poly(L->p, &e->ci)) { /* N or 1/N: computed as the build did */
      int64_t n;
      LLVMValueRef v = LLVMBuildSIToFP(L->b, lv_size(L, &e->ci), L->f64, "");
      if (kir_dyn_float_int(e->dtype, e->c, &n) == KIR_FLOAT_RECIP) v = LLVMBuildFDiv(L->b, fconst(L->f64, 1.0), v, "");
      return e->dtype == PC_f64 ? v : LLVMBuildFPTrunc(L->b, v, T(L, e->dtype), "");
    }
    return pc_dtype_is_float(e->dtype) ? fconst(T(L, e->dtype), e->c)
                                       : LLVMConstInt(T(L, e->dtype), (unsigned long long)e->ci, 1);
  case KE_INDEX: return convert(L, map_index(L, &e->map, n_loops), PC_i64, e->dtype);
  case KE_CONVERT: return convert(L, lv_emit_expr(L, e->args[0], n_loops), e->args[0]->dtype, e->dtype);
  case KE_PRIM: {
    const kir_expr *u;
    if (L->g && L->g->autocast == PC_AUTOCAST_BF16 && (u = one_plus_erf_arg(e)))
      return fast_one_plus_erf(L, lv_emit_expr(L, u, n_loops));
    LLVMValueRef a[3];
    for (int i = 0; i < e->n_args; i++) a[i] = lv_emit_expr(L, e->args[i], n_loops);
    ew_fn f = lv_ew_rule(e->op);
    pc_dtype t = e->args[e->n_args - 1]->dtype; /* operand dtype (where: not the condition) */
    if (!f) return NULL;
    return round_half(L, e->dtype, f(L, t, a));
  }
  }
  return NULL;
}

LLVMValueRef lv_store_load(lctx *L, const kir_store *s, pc_dtype t, int n_loops) {
  return LLVMBuildLoad2(L->b, mem_type(L, t), elem_ptr(L, s->buf, t, &s->map, n_loops), "");
}

void lv_store_value(lctx *L, const kir_store *s, pc_dtype t, LLVMValueRef v, int n_loops) {
  if (dt_narrow(t)) v = float_to_half(L, t, v);
  if (pc_dtype_subbyte_bits(t)) v = LLVMBuildIntCast2(L->b, v, L->i8, !dt_unsigned(t), ""); /* held extended in a byte */
  LLVMBuildStore(L->b, v, elem_ptr(L, s->buf, t, &s->map, n_loops));
}

