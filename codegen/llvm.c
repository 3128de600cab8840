/* codegen/llvm.c: renders a kernel IR program to LLVM IR (loop nests, runtime calls, entry points) and to objects. */
#include "codegen/kir.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* loops whose total work is below this run on the calling thread */
#define PAR_MIN_WORK 32768

typedef struct lctx {
  LLVMContextRef c;
  LLVMModuleRef m;
  LLVMBuilderRef b;
  const kir_program *p;
  const char *name;
  LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, voidt;
  LLVMValueRef fn;        /* function being built */
  LLVMValueRef profile;   /* NAME_profile when compiled with --profile, else NULL */
  LLVMValueRef *bufp;     /* by buffer id, in the kernel being built */
  LLVMValueRef iv[KIR_MAX_LOOPS];
  pc_graph *g;
} lctx;

/* ---------------------------------------------------------------- types */

static int dt_unsigned(pc_dtype t) { return t == PC_bool || (pc_dtype_is_int(t) && !pc_dtype_is_signed(t)); }
/* floats stored narrower than they are computed: f16, bf16 and the f8 formats live in f32 registers */
static int dt_narrow(pc_dtype t) { return t == PC_f16 || t == PC_bf16 || pc_dtype_is_f8(t); }

/* register type: half types are computed in float */
static LLVMTypeRef reg_type(lctx *L, pc_dtype t) {
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
  return pc_dtype_is_f8(t) || pc_dtype_subbyte_bits(t) ? L->i8 : dt_narrow(t) ? L->i16 : reg_type(L, t);
}

/* ---------------------------------------------------------------- helpers */

static LLVMValueRef ci64(lctx *L, int64_t v) { return LLVMConstInt(L->i64, (unsigned long long)v, 1); }

/* a constant global named name holding init */
static LLVMValueRef const_global(lctx *L, LLVMValueRef init, const char *name, LLVMLinkage linkage) {
  LLVMValueRef gv = LLVMAddGlobal(L->m, LLVMTypeOf(init), name);
  LLVMSetInitializer(gv, init);
  LLVMSetGlobalConstant(gv, 1);
  LLVMSetLinkage(gv, linkage);
  return gv;
}

static LLVMValueRef intrinsic(lctx *L, const char *name, LLVMTypeRef t, LLVMValueRef *args, unsigned n) {
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

static LLVMValueRef call_fn(lctx *L, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, LLVMValueRef *args,
                            unsigned n) {
  LLVMValueRef f = get_fn(L, name, ret, params, n);
  return LLVMBuildCall2(L->b, LLVMFunctionType(ret, params, n, 0), f, args, n, "");
}

/* libm function of one or two float args: "erf" -> erff for f32 */
static LLVMValueRef libm(lctx *L, const char *base, LLVMTypeRef t, LLVMValueRef *args, unsigned n) {
  char name[32];
  snprintf(name, sizeof name, "%s%s", base, t == L->f32 ? "f" : "");
  LLVMTypeRef ps[2] = {t, t};
  return call_fn(L, name, t, ps, args, n);
}

static LLVMValueRef fconst(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }
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
    gv = const_global(L, LLVMConstArray2(L->f32, els, 256), name, LLVMPrivateLinkage);
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
  LLVMValueRef ax = intrinsic(L, "llvm.fabs", L->f32, &f, 1);
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

static LLVMValueRef half_to_float(lctx *L, pc_dtype t, LLVMValueRef bits) {
  if (pc_dtype_is_f8(t)) return f8_to_float(L, t, bits);
  if (t == PC_f16) return LLVMBuildFPExt(L->b, LLVMBuildBitCast(L->b, bits, L->f16, ""), L->f32, "");
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

typedef LLVMValueRef (*ew_fn)(lctx *L, pc_dtype t, LLVMValueRef *a);

#define T(L, t) reg_type(L, t)

static LLVMValueRef e_neg(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return pc_dtype_is_float(t) ? LLVMBuildFNeg(L->b, a[0], "") : LLVMBuildNeg(L->b, a[0], "");
}
static LLVMValueRef e_abs(lctx *L, pc_dtype t, LLVMValueRef *a) {
  if (pc_dtype_is_float(t)) return intrinsic(L, "llvm.fabs", T(L, t), a, 1);
  if (dt_unsigned(t)) return a[0];
  LLVMValueRef neg = LLVMBuildICmp(L->b, LLVMIntSLT, a[0], LLVMConstNull(T(L, t)), "");
  return LLVMBuildSelect(L->b, neg, LLVMBuildNeg(L->b, a[0], ""), a[0], "");
}
#define FINTR(nm, intr) \
  static LLVMValueRef e_##nm(lctx *L, pc_dtype t, LLVMValueRef *a) { return intrinsic(L, intr, T(L, t), a, 1); }
/* exp on f32 as straight-line IR (range reduction + degree-7 polynomial, about 1 ulp) so
 * the loop vectorizer keeps it in zmm registers; libm's expf is a scalar call */
static LLVMValueRef fast_expf(lctx *L, LLVMValueRef x) {
  LLVMTypeRef f = L->f32;
  LLVMValueRef hi = fconst(f, 88.72283935546875), lo = fconst(f, -103.97208404541016); /* subnormals kept */
  LLVMValueRef xc = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOGT, x, hi, ""), hi, x, "");
  xc = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, xc, lo, ""), lo, xc, "");
  LLVMValueRef t = LLVMBuildFMul(L->b, xc, fconst(f, 1.4426950408889634), "");
  LLVMValueRef n = intrinsic(L, "llvm.roundeven", f, &t, 1);
  LLVMValueRef r = LLVMBuildFSub(L->b, xc, LLVMBuildFMul(L->b, n, fconst(f, 0.693145751953125), ""), "");
  r = LLVMBuildFSub(L->b, r, LLVMBuildFMul(L->b, n, fconst(f, 1.428606765330187e-06), ""), "");
  static const double c[8] = {1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1};
  LLVMValueRef pl = fconst(f, c[0]);
  for (int i = 1; i < 8; i++) {
    LLVMValueRef a[3] = {pl, r, fconst(f, c[i])};
    pl = intrinsic(L, "llvm.fmuladd", f, a, 3);
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
  return T(L, t) == L->f32 ? fast_expf(L, x) : intrinsic(L, "llvm.exp", T(L, t), &x, 1);
}
static LLVMValueRef e_exp(lctx *L, pc_dtype t, LLVMValueRef *a) { return emit_exp(L, t, a[0]); }

/* tanh on f32, vectorizable: odd Taylor polynomial below |x| = 0.3 (where 1 - 2/(e^2x + 1)
 * would cancel), that formula above, sign restored; a few ulp */
static LLVMValueRef fast_tanhf(lctx *L, LLVMValueRef x) {
  LLVMTypeRef f = L->f32;
  LLVMValueRef ax = intrinsic(L, "llvm.fabs", f, &x, 1);
  LLVMValueRef e = fast_expf(L, LLVMBuildFMul(L->b, ax, fconst(f, 2), ""));
  LLVMValueRef big = LLVMBuildFSub(L->b, fconst(f, 1),
                                   LLVMBuildFDiv(L->b, fconst(f, 2), LLVMBuildFAdd(L->b, e, fconst(f, 1), ""), ""), "");
  big = intrinsic(L, "llvm.copysign", f, (LLVMValueRef[]){big, x}, 2);
  static const double c[5] = {62.0 / 2835, -17.0 / 315, 2.0 / 15, -1.0 / 3, 1};
  LLVMValueRef x2 = LLVMBuildFMul(L->b, x, x, ""), pl = fconst(f, c[0]);
  for (int i = 1; i < 5; i++) pl = intrinsic(L, "llvm.fmuladd", f, (LLVMValueRef[]){pl, x2, fconst(f, c[i])}, 3);
  LLVMValueRef small = LLVMBuildFMul(L->b, pl, x, "");
  return LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, ax, fconst(f, 0.3), ""), small, big, "");
}
static LLVMValueRef e_tanh(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return T(L, t) == L->f32 ? fast_tanhf(L, a[0]) : libm(L, "tanh", T(L, t), a, 1);
}
FINTR(log, "llvm.log")
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
/* erf on f32, vectorizable: |x| < 1: x * P(x^2); 1 <= |x| < 4: 1 - e^(-x^2) * Q(1/x);
 * beyond, +-1. P (degree 6) and Q (degree 10) were least-squares fits to erf(x)/x and
 * erfc(x) e^(x^2) in double precision, made for primc; within 3 ulp of the exact erf */
static LLVMValueRef horner(lctx *L, const double *c, int n, LLVMValueRef v) {
  LLVMValueRef r = fconst(L->f32, c[0]);
  for (int i = 1; i < n; i++) r = intrinsic(L, "llvm.fmuladd", L->f32, (LLVMValueRef[]){r, v, fconst(L->f32, c[i])}, 3);
  return r;
}
static LLVMValueRef fast_erff(lctx *L, LLVMValueRef x) {
  static const double p[7] = {8.00618654e-05, -0.000805356714, 0.00519293966, -0.0268560611, 0.112836346, -0.376126289, 1.12837923};
  static const double q[11] = {-0.0367993936, 0.255393296, -0.783952355, 1.37965894, -1.47681844, 0.865867436, -0.05309375, -0.290376276, 0.0040775938, 0.563594103, 3.24047032e-05};
  LLVMTypeRef f = L->f32;
  LLVMValueRef ax = intrinsic(L, "llvm.fabs", f, &x, 1), x2 = LLVMBuildFMul(L->b, ax, ax, "");
  LLVMValueRef small = LLVMBuildFMul(L->b, ax, horner(L, p, 7, x2), "");
  LLVMValueRef axc = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, ax, fconst(f, 1), ""), fconst(f, 1), ax, "");
  LLVMValueRef x2c = LLVMBuildFMul(L->b, axc, axc, "");
  LLVMValueRef tail = LLVMBuildFMul(L->b, fast_expf(L, LLVMBuildFNeg(L->b, x2c, "")),
                                    horner(L, q, 11, LLVMBuildFDiv(L->b, fconst(f, 1), axc, "")), "");
  LLVMValueRef mid = LLVMBuildFSub(L->b, fconst(f, 1), tail, "");
  LLVMValueRef y = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, ax, fconst(f, 4), ""), mid, fconst(f, 1), "");
  y = LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealOLT, ax, fconst(f, 1), ""), small, y, "");
  y = intrinsic(L, "llvm.copysign", f, (LLVMValueRef[]){y, x}, 2);
  return LLVMBuildSelect(L->b, LLVMBuildFCmp(L->b, LLVMRealUNO, x, x, ""), x, y, "");
}
static LLVMValueRef e_erf(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return T(L, t) == L->f32 ? fast_erff(L, a[0]) : libm(L, "erf", T(L, t), a, 1);
}
static LLVMValueRef e_atan2(lctx *L, pc_dtype t, LLVMValueRef *a) { return libm(L, "atan2", T(L, t), a, 2); }
static LLVMValueRef e_rsqrt(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return LLVMBuildFDiv(L->b, fconst(T(L, t), 1), intrinsic(L, "llvm.sqrt", T(L, t), a, 1), "");
}
static LLVMValueRef e_reciprocal(lctx *L, pc_dtype t, LLVMValueRef *a) {
  return LLVMBuildFDiv(L->b, fconst(T(L, t), 1), a[0], "");
}
/* 1 / (1 + e^-|x|) mirrored for x < 0, so neither side overflows: exact down to subnormals */
static LLVMValueRef e_sigmoid(lctx *L, pc_dtype t, LLVMValueRef *a) {
  LLVMTypeRef ty = T(L, t);
  LLVMValueRef ax = intrinsic(L, "llvm.fabs", ty, a, 1);
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
    return LLVMBuildSelect(L->b, gt, fconst(ty, 1), LLVMBuildSelect(L->b, lt, fconst(ty, -1), a[0], ""), "");
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
  LLVMValueRef f = intrinsic(L, "llvm.fabs", T(L, t), a, 1);
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
  if (pc_dtype_is_float(t)) return intrinsic(L, "llvm.pow", T(L, t), a, 2);
  LLVMValueRef w[2];
  for (int i = 0; i < 2; i++)
    w[i] = dt_unsigned(t) ? LLVMBuildZExt(L->b, a[i], L->i64, "") : LLVMBuildSExtOrBitCast(L->b, a[i], L->i64, "");
  LLVMTypeRef ps[2] = {L->i64, L->i64};
  return LLVMBuildTruncOrBitCast(L->b, call_fn(L, "primc_ipow", L->i64, ps, w, 2), T(L, t), "");
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

static ew_fn ew_rule(pc_op op) {
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

static LLVMValueRef map_index(lctx *L, const kir_map *m, int n_loops) {
  LLVMValueRef idx = ci64(L, m->offset);
  for (int k = 0; k < n_loops; k++)
    if (m->stride[k]) idx = LLVMBuildAdd(L->b, idx, LLVMBuildMul(L->b, L->iv[k], ci64(L, m->stride[k]), ""), "");
  return idx;
}

static LLVMValueRef elem_ptr(lctx *L, int buf, pc_dtype t, const kir_map *m, int n_loops) {
  LLVMValueRef idx = map_index(L, m, n_loops);
  return LLVMBuildInBoundsGEP2(L->b, mem_type(L, t), L->bufp[buf], &idx, 1, "");
}

static LLVMValueRef emit_expr(lctx *L, const kir_expr *e, int n_loops) {
  switch (e->kind) { /* the renderer's one walk over expression kinds */
  case KE_LOAD: {
    LLVMValueRef v = LLVMBuildLoad2(L->b, mem_type(L, e->dtype), elem_ptr(L, e->buf, e->dtype, &e->map, n_loops), "");
    if (pc_dtype_subbyte_bits(e->dtype)) return LLVMBuildTrunc(L->b, v, reg_type(L, e->dtype), ""); /* i4 etc.: wraps */
    return dt_narrow(e->dtype) ? half_to_float(L, e->dtype, v) : v;
  }
  case KE_CONST:
    return pc_dtype_is_float(e->dtype) ? fconst(T(L, e->dtype), e->c)
                                       : LLVMConstInt(T(L, e->dtype), (unsigned long long)e->ci, 1);
  case KE_INDEX: return convert(L, map_index(L, &e->map, n_loops), PC_i64, e->dtype);
  case KE_CONVERT: return convert(L, emit_expr(L, e->args[0], n_loops), e->args[0]->dtype, e->dtype);
  case KE_PRIM: {
    LLVMValueRef a[3];
    for (int i = 0; i < e->n_args; i++) a[i] = emit_expr(L, e->args[i], n_loops);
    ew_fn f = ew_rule(e->op);
    pc_dtype t = e->args[e->n_args - 1]->dtype; /* operand dtype (where: not the condition) */
    if (!f) return NULL;
    return round_half(L, e->dtype, f(L, t, a));
  }
  }
  return NULL;
}

static void store_value(lctx *L, const kir_store *s, pc_dtype t, LLVMValueRef v, int n_loops) {
  if (dt_narrow(t)) v = float_to_half(L, t, v);
  if (pc_dtype_subbyte_bits(t)) v = LLVMBuildIntCast2(L->b, v, L->i8, !dt_unsigned(t), ""); /* held extended in a byte */
  LLVMBuildStore(L->b, v, elem_ptr(L, s->buf, t, &s->map, n_loops));
}

/* ---------------------------------------------------------------- loops */

static LLVMValueRef entry_alloca(lctx *L, LLVMTypeRef t) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(L->b);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(L->fn);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(L->b, first);
  else LLVMPositionBuilderAtEnd(L->b, entry);
  LLVMValueRef a = LLVMBuildAlloca(L->b, t, "");
  LLVMPositionBuilderAtEnd(L->b, cur);
  return a;
}

typedef struct loop {
  LLVMValueRef var;
  LLVMBasicBlockRef cond, exit;
  LLVMValueRef hi;
} loop;

static loop loop_begin(lctx *L, int k, LLVMValueRef lo, LLVMValueRef hi) {
  loop l = {entry_alloca(L, L->i64), NULL, NULL, hi};
  LLVMBuildStore(L->b, lo, l.var);
  l.cond = LLVMAppendBasicBlockInContext(L->c, L->fn, "cond");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(L->c, L->fn, "body");
  l.exit = LLVMAppendBasicBlockInContext(L->c, L->fn, "exit");
  LLVMBuildBr(L->b, l.cond);
  LLVMPositionBuilderAtEnd(L->b, l.cond);
  LLVMValueRef i = LLVMBuildLoad2(L->b, L->i64, l.var, "i");
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntSLT, i, hi, ""), body, l.exit);
  LLVMPositionBuilderAtEnd(L->b, body);
  L->iv[k] = i;
  return l;
}

static void loop_end(lctx *L, loop *l) {
  LLVMValueRef i = LLVMBuildLoad2(L->b, L->i64, l->var, "");
  LLVMBuildStore(L->b, LLVMBuildNSWAdd(L->b, i, ci64(L, 1), ""), l->var);
  LLVMBuildBr(L->b, l->cond);
  LLVMPositionBuilderAtEnd(L->b, l->exit);
}

/* The latch of an innermost reduced loop of 16 to 64 iterations (its branch back to cond) gets
 * llvm.loop.unroll.disable: such a loop (a 7x7 global average pool's 49) is otherwise unrolled whole
 * before the vectorizer runs, which then vectorizes the channel loop around it with one 16-lane gather
 * per element (MobileNetV2's 1280x49 pool: 15.5 -> 3 us on 1 thread; EfficientNet-B0's 17 pools
 * 144 -> 82 us). Longer loops are not unrolled whole anyway, and leaving the unroller off them cost
 * ViT-Tiny's layer norms and softmaxes 30% (610 -> 800 us); shorter ones are best unrolled. */
#define NO_UNROLL_MIN 16
#define NO_UNROLL_MAX 64
static void loop_no_unroll(lctx *L, LLVMValueRef latch) {
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(L->c, NULL, 0);
  LLVMMetadataRef str = LLVMMDStringInContext2(L->c, "llvm.loop.unroll.disable", 24);
  LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(L->c, &str, 1)};
  LLVMMetadataRef md = LLVMMDNodeInContext2(L->c, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, md);
  LLVMSetMetadata(latch, LLVMGetMDKindIDInContext(L->c, "llvm.loop", 9), LLVMMetadataAsValue(L->c, md));
}

/* accumulator start value of a reduction */
static LLVMValueRef red_init(lctx *L, kir_red r, pc_dtype t) {
  LLVMTypeRef ty = T(L, t);
  int is_max = r == KR_MAX || r == KR_ARGMAX, f = pc_dtype_is_float(t);
  if (r == KR_SUM) return LLVMConstNull(ty);
  if (r == KR_PROD) return f ? fconst(ty, 1) : LLVMConstInt(ty, 1, 0);
  if (f) return fconst(ty, is_max ? -__builtin_inf() : __builtin_inf());
  unsigned w = LLVMGetIntTypeWidth(ty);
  unsigned long long smax = (w == 64 ? ~0ull : ((1ull << w) - 1)) >> 1;
  if (dt_unsigned(t)) return is_max ? LLVMConstNull(ty) : LLVMConstAllOnes(ty);
  return is_max ? LLVMConstInt(ty, ~smax, 1) : LLVMConstInt(ty, smax, 0);
}

/* is x a better argmax/argmin candidate than best (NaN wins, first NaN kept) */
static LLVMValueRef arg_better(lctx *L, const kir_store *s, pc_dtype t, LLVMValueRef x, LLVMValueRef best) {
  int is_max = s->red == KR_ARGMAX, f = pc_dtype_is_float(t);
  if (f) {
    LLVMRealPredicate pr = is_max ? (s->arg_last ? LLVMRealOGE : LLVMRealOGT) : (s->arg_last ? LLVMRealOLE : LLVMRealOLT);
    LLVMValueRef c = LLVMBuildFCmp(L->b, pr, x, best, "");
    LLVMValueRef xn = LLVMBuildFCmp(L->b, LLVMRealUNO, x, x, ""), bn = LLVMBuildFCmp(L->b, LLVMRealUNO, best, best, "");
    LLVMValueRef nan_first = LLVMBuildAnd(L->b, xn, LLVMBuildNot(L->b, bn, ""), "");
    return LLVMBuildOr(L->b, c, nan_first, "");
  }
  int u = dt_unsigned(t);
  LLVMIntPredicate pr = is_max ? (s->arg_last ? (u ? LLVMIntUGE : LLVMIntSGE) : (u ? LLVMIntUGT : LLVMIntSGT))
                               : (s->arg_last ? (u ? LLVMIntULE : LLVMIntSLE) : (u ? LLVMIntULT : LLVMIntSLT));
  return LLVMBuildICmp(L->b, pr, x, best, "");
}

static LLVMValueRef red_combine(lctx *L, kir_red r, pc_dtype t, LLVMValueRef acc, LLVMValueRef x) {
  LLVMValueRef a[2] = {acc, x};
  static const ew_fn comb[] = {[KR_SUM] = e_add, [KR_PROD] = e_mul, [KR_MAX] = e_max, [KR_MIN] = e_min};
  /* float max/min reductions keep the intrinsics: the vectorizer splits those into lanes */
  int fminmax = pc_dtype_is_float(t) && (r == KR_MAX || r == KR_MIN);
  LLVMValueRef v = fminmax ? intrinsic(L, r == KR_MAX ? "llvm.maximum" : "llvm.minimum", T(L, t), a, 2) : comb[r](L, t, a);
  /* sums and products may be reassociated so the vectorizer can split them into lanes; the
   * order is still fixed at compile time, so results do not depend on threads or runs */
  if (pc_dtype_is_float(t) && (r == KR_SUM || r == KR_PROD) && LLVMIsAInstruction(v))
    LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
  return v; /* a half accumulator stays in float until the store: prims.def accumulates wide, rounds once */
}

/* reduced loops around the stores' expressions, then the stores */
static void emit_reduction(lctx *L, const kir_kernel *k) {
  LLVMValueRef acc[KIR_MAX_ARGS], idx[KIR_MAX_ARGS];
  for (int s = 0; s < k->n_stores; s++) {
    pc_dtype t = k->stores[s].value->dtype;
    acc[s] = entry_alloca(L, T(L, t));
    idx[s] = entry_alloca(L, L->i64);
    LLVMBuildStore(L->b, red_init(L, k->stores[s].red, t), acc[s]);
    LLVMBuildStore(L->b, ci64(L, 0), idx[s]);
  }
  loop loops[KIR_MAX_LOOPS];
  for (int l = k->n_par; l < k->n_loops; l++) loops[l] = loop_begin(L, l, ci64(L, 0), ci64(L, k->extent[l]));
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    pc_dtype t = st->value->dtype;
    LLVMValueRef x = emit_expr(L, st->value, k->n_loops);
    LLVMValueRef cur = LLVMBuildLoad2(L->b, T(L, t), acc[s], "");
    if (st->red == KR_ARGMAX || st->red == KR_ARGMIN) {
      LLVMValueRef better = arg_better(L, st, t, x, cur);
      LLVMValueRef ci = LLVMBuildLoad2(L->b, L->i64, idx[s], "");
      LLVMBuildStore(L->b, LLVMBuildSelect(L->b, better, x, cur, ""), acc[s]);
      LLVMBuildStore(L->b, LLVMBuildSelect(L->b, better, L->iv[st->arg_loop], ci, ""), idx[s]);
    } else {
      LLVMBuildStore(L->b, red_combine(L, st->red, t, cur, x), acc[s]);
    }
  }
  for (int l = k->n_loops - 1; l >= k->n_par; l--) {
    LLVMValueRef i = LLVMBuildLoad2(L->b, L->i64, loops[l].var, "");
    LLVMBuildStore(L->b, LLVMBuildNSWAdd(L->b, i, ci64(L, 1), ""), loops[l].var);
    LLVMValueRef latch = LLVMBuildBr(L->b, loops[l].cond);
    if (l == k->n_loops - 1 && k->extent[l] >= NO_UNROLL_MIN && k->extent[l] <= NO_UNROLL_MAX) loop_no_unroll(L, latch);
    LLVMPositionBuilderAtEnd(L->b, loops[l].exit);
  }
  for (int s = 0; s < k->n_stores; s++) {
    const kir_store *st = &k->stores[s];
    int arg = st->red == KR_ARGMAX || st->red == KR_ARGMIN;
    pc_dtype t = arg ? PC_i64 : st->value->dtype;
    LLVMValueRef v = LLVMBuildLoad2(L->b, T(L, t), arg ? idx[s] : acc[s], "");
    store_value(L, st, t, v, k->n_par);
  }
}

/* ---------------------------------------------------------------- kernel functions */

static void mark_loads(const kir_expr *e, char *used) {
  if (e->kind == KE_LOAD) used[e->buf] = 1;
  for (int i = 0; i < e->n_args; i++) mark_loads(e->args[i], used);
}

static int bufs_overlap(const kir_buf *a, const kir_buf *b) {
  if (a->place != b->place) return 0;
  if (a->place == KP_WORKSPACE || a->place == KP_CONST)
    return a->offset < b->offset + b->nbytes && b->offset < a->offset + a->nbytes;
  return a->index == b->index;
}

static int same_start(const kir_buf *a, const kir_buf *b) {
  if (a->place != b->place) return 0;
  return a->place == KP_WORKSPACE || a->place == KP_CONST ? a->offset == b->offset : a->index == b->index;
}

/* kN_body(bufs..., begin, end) with noalias where no other buffer of the kernel overlaps;
 * kN(ctx, begin, end) unpacks the buffer table for the thread pool */
/* Kernels called directly (too little work for the pool) are inlined into NAME_run_partJ by LLVM;
 * many big ones inlined together make one huge block, on which instruction selection is quadratic
 * (155 kernels of 256 max prims each: 95 s). Big bodies stay out of line: a call costs nothing next
 * to them. */
#define KERNEL_INLINE_MAX 256

static int instruction_count(LLVMValueRef fn) {
  int n = 0;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) n++;
  return n;
}

static LLVMValueRef emit_loop_kernel(lctx *L, int idx) {
  const kir_kernel *k = &L->p->kernels[idx];
  const kir_program *p = L->p;
  char *used = calloc((size_t)p->n_bufs, 1);
  int *ids = calloc((size_t)p->n_bufs, sizeof *ids);
  LLVMTypeRef *pt = calloc((size_t)p->n_bufs + 2, sizeof *pt);
  int n = 0;
  for (int s = 0; s < k->n_stores; s++) {
    used[k->stores[s].buf] = 1;
    mark_loads(k->stores[s].value, used);
  }
  /* buffers starting at the same address (an elementwise result written in place over its
   * operand) share one pointer: LLVM then sees x[i] = f(x[i]) and vectorizes without the
   * runtime overlap check that would send exact aliasing down the scalar loop */
  int *same = calloc((size_t)p->n_bufs, sizeof *same);
  for (int b = 0; b < p->n_bufs; b++) {
    if (!used[b]) continue;
    same[b] = -1;
    for (int i = 0; i < n && same[b] < 0; i++)
      if (same_start(&p->bufs[ids[i]], &p->bufs[b])) same[b] = i;
    if (same[b] < 0) same[b] = n, ids[n] = b, pt[n++] = L->ptr;
  }
  pt[n] = L->i64;
  pt[n + 1] = L->i64;
  char name[64];
  snprintf(name, sizeof name, "%s_k%d_body", L->name, idx);
  LLVMValueRef body = LLVMAddFunction(L->m, name, LLVMFunctionType(L->voidt, pt, (unsigned)n + 2, 0));
  LLVMSetLinkage(body, LLVMInternalLinkage);
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (int i = 0; i < n; i++) {
    int alone = 1;
    for (int j = 0; j < n; j++)
      if (j != i && bufs_overlap(&p->bufs[ids[i]], &p->bufs[ids[j]])) alone = 0;
    if (alone)
      LLVMAddAttributeAtIndex(body, (unsigned)i + 1, LLVMCreateEnumAttribute(L->c, noalias, 0));
  }
  L->fn = body;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, body, "entry"));
  for (int b = 0; b < p->n_bufs; b++)
    if (used[b]) L->bufp[b] = LLVMGetParam(body, (unsigned)same[b]);
  free(same);
  loop loops[KIR_MAX_LOOPS];
  for (int l = 0; l < k->n_par; l++)
    loops[l] = l == 0 ? loop_begin(L, 0, LLVMGetParam(body, (unsigned)n), LLVMGetParam(body, (unsigned)n + 1))
                      : loop_begin(L, l, ci64(L, 0), ci64(L, k->extent[l]));
  if (k->n_loops > k->n_par) {
    emit_reduction(L, k);
  } else {
    for (int s = 0; s < k->n_stores; s++)
      store_value(L, &k->stores[s], k->stores[s].value->dtype, emit_expr(L, k->stores[s].value, k->n_loops),
                  k->n_loops);
  }
  for (int l = k->n_par - 1; l >= 0; l--) loop_end(L, &loops[l]);
  LLVMBuildRetVoid(L->b);

  /* the thread-pool entry */
  snprintf(name, sizeof name, "%s_k%d", L->name, idx);
  LLVMTypeRef wt[3] = {L->ptr, L->i64, L->i64};
  LLVMValueRef w = LLVMAddFunction(L->m, name, LLVMFunctionType(L->voidt, wt, 3, 0));
  LLVMSetLinkage(w, LLVMInternalLinkage);
  if (instruction_count(body) > KERNEL_INLINE_MAX)
    LLVMAddAttributeAtIndex(w, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(L->c, LLVMGetEnumAttributeKindForName("noinline", 8), 0));
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, w, "entry"));
  LLVMValueRef *args = calloc((size_t)n + 2, sizeof *args);
  for (int i = 0; i < n; i++) {
    LLVMValueRef slot = ci64(L, ids[i]);
    LLVMValueRef gp = LLVMBuildInBoundsGEP2(L->b, L->ptr, LLVMGetParam(w, 0), &slot, 1, "");
    args[i] = LLVMBuildLoad2(L->b, L->ptr, gp, "");
  }
  args[n] = LLVMGetParam(w, 1);
  args[n + 1] = LLVMGetParam(w, 2);
  LLVMBuildCall2(L->b, LLVMFunctionType(L->voidt, pt, (unsigned)n + 2, 0), body, args, (unsigned)n + 2, "");
  LLVMBuildRetVoid(L->b);
  free(args);
  free(used);
  free(ids);
  free(pt);
  return w;
}

/* ---------------------------------------------------------------- entry points */

static LLVMValueRef const_i64_array(lctx *L, const int64_t *v, int n, const char *name) {
  LLVMValueRef *els = calloc((size_t)(n ? n : 1), sizeof *els);
  for (int i = 0; i < n; i++) els[i] = ci64(L, v[i]);
  LLVMValueRef gv = const_global(L, LLVMConstArray2(L->i64, els, (uint64_t)n), name, LLVMPrivateLinkage);
  free(els);
  return gv;
}

/* if (status != 0) return status; */
static void check_status(lctx *L, LLVMValueRef st) {
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(L->c, L->fn, "fail");
  LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(L->c, L->fn, "ok");
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntNE, st, LLVMConstNull(L->i32), ""), bad, ok);
  LLVMPositionBuilderAtEnd(L->b, bad);
  LLVMBuildRet(L->b, st);
  LLVMPositionBuilderAtEnd(L->b, ok);
}

/* a call kernel's params (a constant array) and its buffer pointers (from the table) */
static void call_operands(lctx *L, const kir_kernel *k, int idx, LLVMValueRef table, LLVMValueRef *params,
                          LLVMValueRef *args) {
  char name[96];
  snprintf(name, sizeof name, "%s_k%d_params", L->name, idx);
  *params = const_i64_array(L, k->params, k->n_params, name);
  *args = entry_alloca(L, LLVMArrayType2(L->ptr, KIR_MAX_ARGS));
  for (int i = 0; i < k->n_args; i++) {
    LLVMValueRef slot = ci64(L, k->args[i]);
    LLVMValueRef v = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, table, &slot, 1, ""), "");
    LLVMValueRef di = ci64(L, i);
    LLVMBuildStore(L->b, v, LLVMBuildInBoundsGEP2(L->b, L->ptr, *args, &di, 1, ""));
  }
}

static void emit_call_kernel(lctx *L, const kir_kernel *k, int idx, LLVMValueRef table, LLVMValueRef epi) {
  LLVMValueRef params, args, params2, args2;
  LLVMTypeRef ps[4] = {L->ptr, L->ptr, L->ptr, L->ptr};
  call_operands(L, k, idx, table, &params, &args);
  if (k->pair) { /* primc_k_conv_pair(params, args, params2, args2) */
    call_operands(L, &L->p->kernels[k->pair], k->pair, table, &params2, &args2);
    check_status(L, call_fn(L, "primc_k_conv_pair", L->i32, ps, (LLVMValueRef[]){params, args, params2, args2}, 4));
    return;
  }
  const kir_call_row *row = kir_call_info(k->call);
  const char *name = epi ? row->epi_symbol : row->symbol;
  check_status(L, call_fn(L, name, L->i32, ps, (LLVMValueRef[]){params, args, epi, table}, epi ? 4 : 2));
}

static void emit_loop_launch(lctx *L, LLVMValueRef kfn, const kir_kernel *k, LLVMValueRef table) {
  int64_t work = 1;
  for (int l = 0; l < k->n_loops; l++) work *= k->extent[l];
  LLVMTypeRef wt[3] = {L->ptr, L->i64, L->i64};
  if (work >= PAR_MIN_WORK && k->extent[0] > 1) {
    LLVMTypeRef ps[3] = {L->i64, L->ptr, L->ptr};
    call_fn(L, "primc_parallel_for", L->voidt, ps, (LLVMValueRef[]){ci64(L, k->extent[0]), kfn, table}, 3);
  } else {
    LLVMBuildCall2(L->b, LLVMFunctionType(L->voidt, wt, 3, 0), kfn,
                   (LLVMValueRef[]){table, ci64(L, 0), ci64(L, k->extent[0])}, 3, "");
  }
}

/* table[i] = the base pointer of buffer i: inputs[index], outputs[index], weights + offset or
 * workspace + offset. A loop over a constant (place, index or offset) array: one straight block of
 * a store per buffer makes LLVM's instruction scheduler quadratic (8,000 MatMuls: 27 s). */
static void emit_table_fill(lctx *L, LLVMValueRef table, LLVMValueRef in, LLVMValueRef out, LLVMValueRef ws,
                            LLVMValueRef weights) {
  const kir_program *p = L->p;
  if (!p->n_bufs) return;
  int64_t *desc = malloc(sizeof *desc * 2 * (size_t)p->n_bufs);
  for (int i = 0; i < p->n_bufs; i++) {
    const kir_buf *b = &p->bufs[i];
    desc[2 * i] = b->place;
    desc[2 * i + 1] = b->place == KP_INPUT || b->place == KP_OUTPUT ? b->index : b->offset;
  }
  char name[96];
  snprintf(name, sizeof name, "%s_buf_places", L->name);
  LLVMValueRef places = const_i64_array(L, desc, 2 * p->n_bufs, name);
  free(desc);
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(L->b);
  LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill");
  LLVMBasicBlockRef arr = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill.io");
  LLVMBasicBlockRef mem = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill.mem");
  LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(L->c, L->fn, "fill.next");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(L->c, L->fn, "filled");
  LLVMBuildBr(L->b, head);
  LLVMPositionBuilderAtEnd(L->b, head);
  LLVMValueRef i = LLVMBuildPhi(L->b, L->i64, "");
  LLVMValueRef i2 = LLVMBuildMul(L->b, i, ci64(L, 2), "");
  LLVMValueRef place = LLVMBuildLoad2(L->b, L->i64, LLVMBuildInBoundsGEP2(L->b, L->i64, places, &i2, 1, ""), "");
  LLVMValueRef i21 = LLVMBuildAdd(L->b, i2, ci64(L, 1), "");
  LLVMValueRef at = LLVMBuildLoad2(L->b, L->i64, LLVMBuildInBoundsGEP2(L->b, L->i64, places, &i21, 1, ""), "");
  LLVMValueRef is_in = LLVMBuildICmp(L->b, LLVMIntEQ, place, ci64(L, KP_INPUT), "");
  LLVMValueRef is_out = LLVMBuildICmp(L->b, LLVMIntEQ, place, ci64(L, KP_OUTPUT), "");
  LLVMBuildCondBr(L->b, LLVMBuildOr(L->b, is_in, is_out, ""), arr, mem);
  LLVMPositionBuilderAtEnd(L->b, arr);
  LLVMValueRef a = LLVMBuildSelect(L->b, is_in, in, out, "");
  LLVMValueRef pa = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, a, &at, 1, ""), "");
  LLVMBuildBr(L->b, next);
  LLVMPositionBuilderAtEnd(L->b, mem);
  LLVMValueRef is_const = LLVMBuildICmp(L->b, LLVMIntEQ, place, ci64(L, KP_CONST), "");
  LLVMValueRef base = LLVMBuildSelect(L->b, is_const, weights, ws, "");
  LLVMValueRef pm = LLVMBuildGEP2(L->b, L->i8, base, &at, 1, "");
  LLVMBuildBr(L->b, next);
  LLVMPositionBuilderAtEnd(L->b, next);
  LLVMValueRef ptr = LLVMBuildPhi(L->b, L->ptr, "");
  LLVMAddIncoming(ptr, (LLVMValueRef[]){pa, pm}, (LLVMBasicBlockRef[]){arr, mem}, 2);
  LLVMBuildStore(L->b, ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, table, &i, 1, ""));
  LLVMValueRef i1 = LLVMBuildAdd(L->b, i, ci64(L, 1), "");
  LLVMAddIncoming(i, (LLVMValueRef[]){ci64(L, 0), i1}, (LLVMBasicBlockRef[]){pre, next}, 2);
  LLVMBuildCondBr(L->b, LLVMBuildICmp(L->b, LLVMIntSLT, i1, ci64(L, p->n_bufs), ""), head, done);
  LLVMPositionBuilderAtEnd(L->b, done);
}

static LLVMValueRef emit_weights(lctx *L, const llvm_emit_opts *o) {
  const kir_program *p = L->p;
  char name[96];
  if (o->weights_external) {
    snprintf(name, sizeof name, "%s_weights_base", L->name);
    LLVMValueRef gv = LLVMAddGlobal(L->m, L->ptr, name);
    LLVMSetInitializer(gv, LLVMConstNull(L->ptr));
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    return gv;
  }
  snprintf(name, sizeof name, "%s_weights", L->name);
  if (!o->weights_blob) { /* an object: package.c appends the weights after LLVM wrote it (codegen/elf_weights.c) */
    LLVMValueRef gv = LLVMAddGlobal(L->m, LLVMArrayType2(L->i8, (uint64_t)p->weights_size), name);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetVisibility(gv, LLVMHiddenVisibility);
    LLVMSetAlignment(gv, 64);
    return gv;
  }
  LLVMValueRef init = LLVMConstStringInContext2(L->c, (const char *)o->weights_blob, (size_t)p->weights_size, 1);
  LLVMValueRef gv = const_global(L, init, name, LLVMInternalLinkage);
  LLVMSetAlignment(gv, 64);
  return gv;
}

/* ---------------------------------------------------------------- profiler */

static LLVMValueRef cstring(lctx *L, const char *s);

/* NAME_prof_kernels (writable primc_prof_kernel rows) and NAME_profile pointing at them */
static LLVMValueRef emit_profile_table(lctx *L) {
  const kir_program *p = L->p;
  LLVMTypeRef ft[5] = {L->ptr, L->ptr, L->i64, L->i64, L->i64};
  LLVMTypeRef rt = LLVMStructTypeInContext(L->c, ft, 5, 0);
  LLVMValueRef *rows = calloc((size_t)p->n_kernels + 1, sizeof *rows);
  for (int i = 0; i < p->n_kernels; i++) {
    char nm[256], org[256];
    kir_kernel_label(p, i, nm, sizeof nm, org, sizeof org);
    LLVMValueRef f[5] = {cstring(L, nm), cstring(L, org), ci64(L, kir_kernel_bytes(p, i)), ci64(L, 0), ci64(L, 0)};
    rows[i] = LLVMConstStructInContext(L->c, f, 5, 0);
  }
  LLVMValueRef init = LLVMConstArray2(rt, rows, (uint64_t)p->n_kernels);
  free(rows);
  char name[96];
  snprintf(name, sizeof name, "%s_prof_kernels", L->name);
  LLVMValueRef tab = LLVMAddGlobal(L->m, LLVMTypeOf(init), name);
  LLVMSetInitializer(tab, init);
  LLVMSetLinkage(tab, LLVMInternalLinkage);
  LLVMValueRef pf[2] = {LLVMConstInt(L->i32, (unsigned)p->n_kernels, 0), tab};
  LLVMValueRef pinit = LLVMConstStructInContext(L->c, pf, 2, 0);
  snprintf(name, sizeof name, "%s_profile", L->name);
  return const_global(L, pinit, name, LLVMExternalLinkage);
}

static LLVMValueRef prof_begin(lctx *L) {
  return L->profile ? call_fn(L, "primc_prof_begin", L->i64, NULL, NULL, 0) : NULL;
}

static void prof_end(lctx *L, int idx, LLVMValueRef t0) {
  if (!L->profile) return;
  LLVMTypeRef ps[3] = {L->ptr, L->i32, L->i64};
  call_fn(L, "primc_prof_end", L->voidt, ps, (LLVMValueRef[]){L->profile, LLVMConstInt(L->i32, (unsigned)idx, 0), t0}, 3);
}

/* kernels launched by one part of NAME_run: LLVM's CFG passes are quadratic in the status branches
 * of one function (4,000 kernels in one: 2.8 s; 8,000: 11 s), so the run is a chain of parts */
#define RUN_PART_KERNELS 64

/* NAME_run_partJ(table): kernels [lo, hi) in order; the first non-zero status, else 0 */
static LLVMValueRef emit_run_part(lctx *L, LLVMValueRef *kfns, int part, int lo, int hi) {
  const kir_program *p = L->p;
  char name[96];
  snprintf(name, sizeof name, "%s_run_part%d", L->name, part);
  LLVMValueRef fn = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, &L->ptr, 1, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(L->c, LLVMGetEnumAttributeKindForName("noinline", 8), 0));
  L->fn = fn;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, fn, "entry"));
  LLVMValueRef table = LLVMGetParam(fn, 0);
  for (int i = lo; i < hi; i++) {
    const kir_kernel *k = &p->kernels[i];
    if (k->absorbed) continue; /* run by the call it belongs to */
    LLVMValueRef t0 = prof_begin(L);
    /* an epilogue per block of rows needs the call's _epi symbol (calls.def); without one it runs after the call */
    int epi = k->kind == KK_CALL && k->has_epilogue && !k->epi_in_call, by_rows = epi && kir_call_info(k->call)->epi_symbol;
    if (k->kind == KK_CALL) emit_call_kernel(L, k, i, table, by_rows ? kfns[k->epilogue] : NULL);
    else emit_loop_launch(L, kfns[i], k, table);
    if (epi && !by_rows) emit_loop_launch(L, kfns[k->epilogue], &p->kernels[k->epilogue], table);
    prof_end(L, i, t0);
  }
  LLVMBuildRet(L->b, LLVMConstNull(L->i32));
  return fn;
}

/* 1 when arr (inputs or outputs) or any of its n pointers is NULL */
static LLVMValueRef any_null(lctx *L, LLVMValueRef arr, int n) {
  LLVMValueRef null = LLVMConstNull(L->ptr), bad = LLVMBuildICmp(L->b, LLVMIntEQ, arr, null, "");
  if (n == 0) return bad;
  /* the elements are read only when the array is there */
  LLVMBasicBlockRef from = LLVMGetInsertBlock(L->b);
  LLVMBasicBlockRef each = LLVMAppendBasicBlockInContext(L->c, L->fn, "elements");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(L->c, L->fn, "checked");
  LLVMBuildCondBr(L->b, bad, done, each);
  LLVMPositionBuilderAtEnd(L->b, each);
  LLVMValueRef any = LLVMConstInt(L->i1, 0, 0);
  for (int i = 0; i < n; i++) {
    LLVMValueRef slot = ci64(L, i);
    LLVMValueRef v = LLVMBuildLoad2(L->b, L->ptr, LLVMBuildInBoundsGEP2(L->b, L->ptr, arr, &slot, 1, ""), "");
    any = LLVMBuildOr(L->b, any, LLVMBuildICmp(L->b, LLVMIntEQ, v, null, ""), "");
  }
  LLVMBasicBlockRef each_end = LLVMGetInsertBlock(L->b);
  LLVMBuildBr(L->b, done);
  LLVMPositionBuilderAtEnd(L->b, done);
  LLVMValueRef phi = LLVMBuildPhi(L->b, L->i1, "");
  LLVMValueRef vals[2] = {LLVMConstInt(L->i1, 1, 0), any};
  LLVMBasicBlockRef blocks[2] = {from, each_end};
  LLVMAddIncoming(phi, vals, blocks, 2);
  return phi;
}

static LLVMValueRef emit_run(lctx *L, const llvm_emit_opts *o, LLVMValueRef *kfns) {
  const kir_program *p = L->p;
  char name[96];
  int n_parts = (p->n_kernels + RUN_PART_KERNELS - 1) / RUN_PART_KERNELS;
  LLVMValueRef *parts = calloc((size_t)n_parts + 1, sizeof *parts);
  for (int j = 0; j < n_parts; j++)
    parts[j] = emit_run_part(L, kfns, j, j * RUN_PART_KERNELS,
                             (j + 1) * RUN_PART_KERNELS < p->n_kernels ? (j + 1) * RUN_PART_KERNELS : p->n_kernels);
  snprintf(name, sizeof name, "%s_run", L->name);
  LLVMTypeRef pt[3] = {L->ptr, L->ptr, L->ptr};
  LLVMValueRef run = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, pt, 3, 0));
  L->fn = run;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, run, "entry"));
  LLVMValueRef in = LLVMGetParam(run, 0), out = LLVMGetParam(run, 1), ws = LLVMGetParam(run, 2);
  LLVMValueRef wg = emit_weights(L, o), weights = wg;
  if (o->weights_external) {
    weights = LLVMBuildLoad2(L->b, L->ptr, wg, "");
    LLVMValueRef missing = LLVMBuildICmp(L->b, LLVMIntEQ, weights, LLVMConstNull(L->ptr), "");
    check_status(L, LLVMBuildSelect(L->b, missing, LLVMConstInt(L->i32, 2, 0), LLVMConstNull(L->i32), ""));
  }
  /* status 1 for a NULL array, a NULL buffer inside one, or a NULL workspace the model needs */
  LLVMValueRef nulls = any_null(L, in, p->g->n_inputs);
  nulls = LLVMBuildOr(L->b, nulls, any_null(L, out, p->g->n_outputs), "");
  if (p->workspace_size > 0)
    nulls = LLVMBuildOr(L->b, nulls, LLVMBuildICmp(L->b, LLVMIntEQ, ws, LLVMConstNull(L->ptr), ""), "");
  check_status(L, LLVMBuildSelect(L->b, nulls, LLVMConstInt(L->i32, 1, 0), LLVMConstNull(L->i32), ""));
  LLVMValueRef table = entry_alloca(L, LLVMArrayType2(L->ptr, (uint64_t)(p->n_bufs ? p->n_bufs : 1)));
  emit_table_fill(L, table, in, out, ws, weights);
  for (int j = 0; j < n_parts; j++)
    check_status(L, LLVMBuildCall2(L->b, LLVMFunctionType(L->i32, &L->ptr, 1, 0), parts[j], &table, 1, ""));
  LLVMBuildRet(L->b, LLVMConstNull(L->i32));
  free(parts);
  return run;
}

/* NAME_load_weights(path): maps the side file into NAME_weights_base */
static LLVMValueRef emit_load_weights(lctx *L, const llvm_emit_opts *o) {
  if (!o->weights_external) return LLVMConstNull(L->ptr);
  char name[96];
  snprintf(name, sizeof name, "%s_load_weights", L->name);
  LLVMValueRef f = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, &L->ptr, 1, 0));
  L->fn = f;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, f, "entry"));
  snprintf(name, sizeof name, "%s_weights_base", L->name);
  LLVMValueRef gv = LLVMGetNamedGlobal(L->m, name);
  LLVMTypeRef ps[3] = {L->ptr, L->i64, L->ptr};
  LLVMBuildRet(L->b, call_fn(L, "primc_weights_map", L->i32, ps,
                             (LLVMValueRef[]){LLVMGetParam(f, 0), ci64(L, L->p->weights_size), gv}, 3));
  return f;
}

static LLVMValueRef cstring(lctx *L, const char *s) {
  LLVMValueRef init = LLVMConstStringInContext2(L->c, s, strlen(s), 0);
  return const_global(L, init, "", LLVMPrivateLinkage);
}

/* a data-dependent dim (nonzero's count) at its bound: the size of the buffer the caller passes */
static int64_t dim_bound(const pc_graph *g, int64_t d) { return PC_DIM_IS_SYM(d) ? g->syms[PC_DIM_SYM_ID(d)].hi : d; }

/* NAME_output_dims(workspace, i, dims): primc_output_dims over a table of each output's rank and
 * dims, a data-dependent dim as -(1 + workspace offset of the count the run wrote) */
static LLVMValueRef emit_output_dims(lctx *L) {
  const kir_program *p = L->p;
  const pc_graph *g = p->g;
  int n = g->n_outputs, w = 1 + PC_MAX_RANK;
  int64_t *tab = calloc((size_t)(n ? n : 1) * (size_t)w, sizeof *tab);
  for (int i = 0; i < n; i++) {
    const pc_type *t = &g->outputs[i]->type;
    tab[i * w] = t->rank;
    for (int d = 0; d < t->rank; d++) {
      int64_t v = t->dims[d];
      tab[i * w + 1 + d] = PC_DIM_IS_SYM(v) ? -1 - p->sym_slot[PC_DIM_SYM_ID(v)] : v;
    }
  }
  char name[96];
  snprintf(name, sizeof name, "%s_output_dims_table", L->name);
  LLVMValueRef gv = const_i64_array(L, tab, n * w, name);
  free(tab);
  snprintf(name, sizeof name, "%s_output_dims", L->name);
  LLVMTypeRef pt[3] = {L->ptr, L->i32, L->ptr};
  LLVMValueRef f = LLVMAddFunction(L->m, name, LLVMFunctionType(L->i32, pt, 3, 0));
  L->fn = f;
  LLVMPositionBuilderAtEnd(L->b, LLVMAppendBasicBlockInContext(L->c, f, "entry"));
  LLVMTypeRef ps[5] = {L->ptr, L->i32, L->ptr, L->i32, L->ptr};
  LLVMValueRef args[5] = {gv, LLVMConstInt(L->i32, (unsigned)n, 0), LLVMGetParam(f, 0), LLVMGetParam(f, 1),
                          LLVMGetParam(f, 2)};
  LLVMBuildRet(L->b, call_fn(L, "primc_output_dims", L->i32, ps, args, 5));
  return f;
}

/* primc_tensor_desc[] for the graph inputs or outputs */
static LLVMValueRef emit_descs(lctx *L, pc_value *const *vals, int n, const char *what) {
  LLVMTypeRef ft[4] = {L->ptr, L->i32, L->i32, LLVMArrayType2(L->i64, PC_MAX_RANK)};
  LLVMTypeRef dt = LLVMStructTypeInContext(L->c, ft, 4, 0);
  LLVMValueRef *els = calloc((size_t)(n ? n : 1), sizeof *els);
  for (int i = 0; i < n; i++) {
    const pc_value *v = vals[i];
    char buf[32];
    snprintf(buf, sizeof buf, "%s%d", what, i); /* "in0", "out1": the header uses the same names */
    LLVMValueRef dims[PC_MAX_RANK];
    for (int d = 0; d < PC_MAX_RANK; d++) dims[d] = ci64(L, d < v->type.rank ? dim_bound(L->g, v->type.dims[d]) : 0);
    LLVMValueRef f[4] = {cstring(L, v->name ? v->name : buf), LLVMConstInt(L->i32, (unsigned)v->type.dtype, 0),
                         LLVMConstInt(L->i32, (unsigned)v->type.rank, 0), LLVMConstArray2(L->i64, dims, PC_MAX_RANK)};
    els[i] = LLVMConstStructInContext(L->c, f, 4, 0);
  }
  LLVMValueRef init = LLVMConstArray2(dt, els, (uint64_t)n);
  char name[96];
  snprintf(name, sizeof name, "%s_%s_descs", L->name, what);
  LLVMValueRef gv = const_global(L, init, name, LLVMInternalLinkage);
  free(els);
  return gv;
}

/* NAME_model (a primc_model_desc) and NAME_workspace_size */
static void emit_model_desc(lctx *L, const llvm_emit_opts *o, LLVMValueRef run, LLVMValueRef lw, LLVMValueRef od) {
  const pc_graph *g = L->p->g;
  char name[96];
  LLVMValueRef f[11] = {cstring(L, L->name), run, lw, ci64(L, L->p->workspace_size), ci64(L, 64),
                        LLVMConstInt(L->i32, (unsigned)g->n_inputs, 0), LLVMConstInt(L->i32, (unsigned)g->n_outputs, 0),
                        emit_descs(L, g->inputs, g->n_inputs, "in"), emit_descs(L, g->outputs, g->n_outputs, "out"),
                        L->profile ? L->profile : LLVMConstNull(L->ptr), od};
  LLVMValueRef init = LLVMConstStructInContext(L->c, f, 11, 0);
  snprintf(name, sizeof name, "%s_model", L->name);
  LLVMValueRef gv = const_global(L, init, name, LLVMExternalLinkage);
  snprintf(name, sizeof name, "%s_workspace_size", L->name);
  const_global(L, ci64(L, L->p->workspace_size), name, LLVMExternalLinkage);
  if (o->main_alias) const_global(L, gv, "primc_main_model", LLVMExternalLinkage);
}

/* ---------------------------------------------------------------- module */

static void lctx_init(lctx *L, const kir_program *p, const char *name) {
  L->c = LLVMContextCreate();
  L->m = LLVMModuleCreateWithNameInContext(name, L->c);
  L->b = LLVMCreateBuilderInContext(L->c);
  L->p = p;
  L->g = p->g;
  L->name = name;
  L->i1 = LLVMInt1TypeInContext(L->c);
  L->i8 = LLVMInt8TypeInContext(L->c);
  L->i16 = LLVMInt16TypeInContext(L->c);
  L->i32 = LLVMInt32TypeInContext(L->c);
  L->i64 = LLVMInt64TypeInContext(L->c);
  L->f16 = LLVMHalfTypeInContext(L->c);
  L->f32 = LLVMFloatTypeInContext(L->c);
  L->f64 = LLVMDoubleTypeInContext(L->c);
  L->ptr = LLVMPointerTypeInContext(L->c, 0);
  L->voidt = LLVMVoidTypeInContext(L->c);
  L->bufp = calloc((size_t)p->n_bufs + 1, sizeof *L->bufp);
}

static void lctx_free(lctx *L) {
  free(L->bufp);
  LLVMDisposeBuilder(L->b);
  LLVMDisposeModule(L->m);
  LLVMContextDispose(L->c);
}

static int expr_supported(const kir_expr *e) {
  if (e->dtype == PC_c64 && e->kind != KE_LOAD && e->kind != KE_CONST) return 0;
  if (e->kind == KE_PRIM && !ew_rule(e->op)) return 0;
  for (int i = 0; i < e->n_args; i++)
    if (!expr_supported(e->args[i]) || e->args[i]->dtype == PC_c64) return 0;
  return 1;
}

static pc_status check_program(const kir_program *p) {
  for (int i = 0; i < p->n_kernels; i++) {
    const kir_kernel *k = &p->kernels[i];
    for (int s = 0; k->kind == KK_LOOP && s < k->n_stores; s++)
      if (!expr_supported(k->stores[s].value)) {
        if (k->n_nodes) return pc_node_fail(p->g, k->nodes[0], PC_ERR_UNSUPPORTED, "dtype or op not supported by the LLVM renderer");
        return pc_fail(p->g, PC_ERR_UNSUPPORTED, "kernel %d not supported by the LLVM renderer", i);
      }
  }
  return PC_OK;
}

static LLVMTargetMachineRef target_machine(pc_graph *g, const llvm_emit_opts *o) {
  LLVMInitializeAllTargetInfos();
  LLVMInitializeAllTargets();
  LLVMInitializeAllTargetMCs();
  LLVMInitializeAllAsmPrinters();
  char *host = LLVMGetDefaultTargetTriple();
  char *triple = o->triple ? LLVMNormalizeTargetTriple(o->triple) : host;
  int native = !o->triple && !o->cpu;
  char *cpu = native ? LLVMGetHostCPUName() : NULL;
  char *feat = native ? LLVMGetHostCPUFeatures() : NULL;
  LLVMTargetRef t = NULL;
  char *err = NULL;
  LLVMTargetMachineRef tm = NULL;
  if (LLVMGetTargetFromTriple(triple, &t, &err)) {
    pc_fail(g, PC_ERR_UNSUPPORTED, "target \"%s\": %s", triple, err ? err : "unknown");
  } else {
    LLVMCodeGenOptLevel lvl = o->opt_level <= 0 ? LLVMCodeGenLevelNone : o->opt_level >= 3 ? LLVMCodeGenLevelAggressive
                                                                                           : LLVMCodeGenLevelDefault;
    tm = LLVMCreateTargetMachine(t, triple, native ? cpu : o->cpu ? o->cpu : "generic",
                                 native ? feat : o->features ? o->features : "", lvl, LLVMRelocPIC,
                                 LLVMCodeModelDefault);
    if (!tm) pc_fail(g, PC_ERR_UNSUPPORTED, "cannot create a target machine for \"%s\"", triple);
  }
  LLVMDisposeMessage(err);
  if (triple != host) LLVMDisposeMessage(triple);
  LLVMDisposeMessage(host);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
  return tm;
}

static pc_status emit_file(lctx *L, LLVMTargetMachineRef tm, const llvm_emit_opts *o) {
  char *err = NULL;
  pc_status s = PC_OK;
  if (o->kind == LLVM_OUT_IR) {
    if (LLVMPrintModuleToFile(L->m, o->path, &err)) s = pc_fail(L->g, PC_ERR_IO, "%s: %s", o->path, err);
  } else {
    LLVMCodeGenFileType ft = o->kind == LLVM_OUT_ASM ? LLVMAssemblyFile : LLVMObjectFile;
    if (LLVMTargetMachineEmitToFile(tm, L->m, o->path, ft, &err)) s = pc_fail(L->g, PC_ERR_IO, "%s: %s", o->path, err);
  }
  LLVMDisposeMessage(err);
  return s;
}

/* cpu and features on every defined function, and full-width vectors where AVX-512 is
 * there: LLVM's host tuning (this Zen 5 reports "rocketlake") otherwise prefers 256 bits */
static void set_function_attrs(lctx *L, LLVMTargetMachineRef tm) {
  char *cpu = LLVMGetTargetMachineCPU(tm), *feat = LLVMGetTargetMachineFeatureString(tm);
  int avx512 = strstr(feat, "+avx512f") != NULL;
  for (LLVMValueRef f = LLVMGetFirstFunction(L->m); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f)) continue;
    const char *kv[3][2] = {{"target-cpu", cpu}, {"target-features", feat}, {"prefer-vector-width", "512"}};
    for (int i = 0; i < (avx512 ? 3 : 2); i++)
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateStringAttribute(L->c, kv[i][0], (unsigned)strlen(kv[i][0]), kv[i][1],
                                                        (unsigned)strlen(kv[i][1])));
  }
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
}

pc_status pc_llvm_emit(const kir_program *p, const llvm_emit_opts *o) {
  pc_graph *g = p->g;
  pc_status s = check_program(p);
  if (s != PC_OK) return s;
  LLVMTargetMachineRef tm = target_machine(g, o);
  if (!tm) return g->status;
  lctx L;
  memset(&L, 0, sizeof L);
  lctx_init(&L, p, o->name);
  char *trip = LLVMGetTargetMachineTriple(tm);
  LLVMSetTarget(L.m, trip);
  LLVMDisposeMessage(trip);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(L.m, td);
  LLVMDisposeTargetData(td);
  LLVMValueRef *kfns = calloc((size_t)p->n_kernels + 1, sizeof *kfns);
  for (int i = 0; i < p->n_kernels; i++)
    if (p->kernels[i].kind == KK_LOOP) kfns[i] = emit_loop_kernel(&L, i);
  if (o->profile) L.profile = emit_profile_table(&L);
  LLVMValueRef run = emit_run(&L, o, kfns);
  LLVMValueRef lw = emit_load_weights(&L, o);
  LLVMValueRef od = emit_output_dims(&L);
  emit_model_desc(&L, o, run, lw, od);
  set_function_attrs(&L, tm);
  free(kfns);
  char *err = NULL;
  if (LLVMVerifyModule(L.m, LLVMReturnStatusAction, &err)) s = pc_fail(g, PC_ERR_INTERNAL, "LLVM verifier: %.400s", err);
  LLVMDisposeMessage(err);
  if (s == PC_OK) {
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, o->opt_level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(po, o->opt_level >= 2);
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", o->opt_level < 0 ? 0 : o->opt_level > 3 ? 3 : o->opt_level);
    LLVMErrorRef e = LLVMRunPasses(L.m, pipeline, tm, po);
    if (e) {
      char *msg = LLVMGetErrorMessage(e);
      s = pc_fail(g, PC_ERR_INTERNAL, "LLVM passes: %s", msg);
      LLVMDisposeErrorMessage(msg);
    }
    LLVMDisposePassBuilderOptions(po);
  }
  if (s == PC_OK) s = emit_file(&L, tm, o);
  lctx_free(&L);
  LLVMDisposeTargetMachine(tm);
  return s;
}
